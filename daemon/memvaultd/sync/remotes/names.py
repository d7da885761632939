"""Names on a remote: which object names and vault ids are allowed, and the
key layout under a vault (written down in docs/format.md, "Remote layout").

    <vault_id>/objects/<name>            an object (write-once)
    <vault_id>/versions/<number:020d>    version `number` of the chain

20 digits hold every uint64 and sort numerically as strings, so a listing of
`versions/` is the chain in order. Objects and versions live under separate
prefixes: no object name can collide with a version.

memvault-server validates names with the same rules (its own copy: the server
imports nothing from the daemon); tests/test_server.py checks both agree.
"""

from __future__ import annotations

import re

from memvault_base.errors import InvalidArgument

MAX_NAME = 200
_NAME_CHARS = re.compile(r"[a-z0-9/_.-]*")
_VAULT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
VERSION_DIGITS = 20
MAX_VERSION = 10**VERSION_DIGITS - 1


def check_name(name: str) -> str:
    """`name` if it is a valid object name, else `InvalidArgument` saying why."""
    if not 1 <= len(name) <= MAX_NAME:
        raise InvalidArgument(f"object name must be 1..{MAX_NAME} characters, got {len(name)}")
    if not _NAME_CHARS.fullmatch(name):
        raise InvalidArgument(f"object name {name!r} may only use a-z 0-9 / _ . -")
    if name.startswith("/") or name.endswith("/") or "//" in name:
        raise InvalidArgument(f"object name {name!r} has a leading, trailing or doubled '/'")
    if any(part in (".", "..") for part in name.split("/")):
        raise InvalidArgument(f"object name {name!r} has a '.' or '..' component")
    return name


def check_prefix(prefix: str) -> str:
    """`prefix` if it may start a valid name ("" lists everything)."""
    if len(prefix) > MAX_NAME or not _NAME_CHARS.fullmatch(prefix) or prefix.startswith("/"):
        raise InvalidArgument(f"prefix {prefix!r} cannot start an object name")
    return prefix


def check_vault_id(vault_id: str) -> str:
    if not _VAULT_ID.fullmatch(vault_id):
        raise InvalidArgument(f"vault id {vault_id!r} must match [a-z0-9][a-z0-9_-]{{0,63}}")
    return vault_id


def check_version(number: int, parent: bytes, parent_bytes: int = 32) -> None:
    """The caller's side of the chain's rules: numbers from 1, parent empty
    for version 1 and a `parent_bytes` hash for every later one."""
    if not 1 <= number <= MAX_VERSION:
        raise InvalidArgument(f"version number must be 1..{MAX_VERSION}, got {number}")
    want = 0 if number == 1 else parent_bytes
    if len(parent) != want:
        raise InvalidArgument(f"version {number} needs a parent of {want} bytes, "
                              f"got {len(parent)}")


def check_limit(limit: int) -> int:
    if not 1 <= limit <= 1000:
        raise InvalidArgument(f"limit must be 1..1000, got {limit}")
    return limit


def version_key(number: int) -> str:
    """The key of version `number` under `<vault_id>/versions/`."""
    return f"{number:0{VERSION_DIGITS}d}"


def version_number(key: str) -> int | None:
    """The number a `versions/` key names, or None for anything else."""
    if len(key) == VERSION_DIGITS and key.isdigit():
        return int(key)
    return None
