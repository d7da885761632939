"""Which object names and vault ids the server accepts, and its key layout.

    <vault_id>/owner                     the account the vault is bound to (UTF-8)
    <vault_id>/objects/<name>            an object (write-once)
    <vault_id>/versions/<number:020d>    version `number` of the chain

The same rules as the daemon's `memvaultd/remotes/names.py` (a copy: the
server imports nothing from the daemon); tests/test_server.py checks that
both accept and refuse the same names.
"""

from __future__ import annotations

import re

from memvault_base.errors import InvalidArgument

MAX_NAME = 200
_NAME_CHARS = re.compile(r"[a-z0-9/_.-]*")
_VAULT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
VERSION_DIGITS = 20
MAX_VERSION = 10**VERSION_DIGITS - 1
PARENT_BYTES = 32  # sha256


def check_name(name: str) -> str:
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
    if len(prefix) > MAX_NAME or not _NAME_CHARS.fullmatch(prefix) or prefix.startswith("/"):
        raise InvalidArgument(f"prefix {prefix!r} cannot start an object name")
    return prefix


def check_vault_id(vault_id: str) -> str:
    if not _VAULT_ID.fullmatch(vault_id):
        raise InvalidArgument(f"vault id {vault_id!r} must match [a-z0-9][a-z0-9_-]{{0,63}}")
    return vault_id


def check_version(number: int, parent: bytes) -> None:
    if not 1 <= number <= MAX_VERSION:
        raise InvalidArgument(f"version number must be 1..{MAX_VERSION}, got {number}")
    want = 0 if number == 1 else PARENT_BYTES
    if len(parent) != want:
        raise InvalidArgument(f"version {number} needs a parent of {want} bytes, "
                              f"got {len(parent)}")


def object_key(vault_id: str, name: str) -> str:
    return f"{vault_id}/objects/{name}"


def versions_prefix(vault_id: str) -> str:
    return f"{vault_id}/versions/"


def version_key(vault_id: str, number: int) -> str:
    return f"{vault_id}/versions/{number:0{VERSION_DIGITS}d}"


def owner_key(vault_id: str) -> str:
    return f"{vault_id}/owner"


def version_numbers(keys: list[str], prefix: str) -> list[int]:
    """The version numbers among keys under `prefix`; anything else is ignored."""
    tails = (key[len(prefix):] for key in keys)
    return [int(tail) for tail in tails if len(tail) == VERSION_DIGITS and tail.isdigit()]
