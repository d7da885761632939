"""Names on a remote: which object names and vault ids are allowed, and the
key layout of a vault in a store (written down in docs/format.md, "Remote
layout").

    <vault_id>/owner                     the account the vault is bound to
                                         (memvault-server only; UTF-8)
    <vault_id>/objects/<name>            an object (write-once)
    <vault_id>/versions/<number:020d>    version `number` of the chain

20 digits hold every uint64 and sort numerically as strings, so a listing of
`versions/` is the chain in order. Objects and versions live under separate
prefixes: no object name can collide with a version or with `owner`.

The one copy of these rules: the daemon checks every name before it reaches a
remote, and memvault-server checks again what any client sends it.
"""

from __future__ import annotations

import re

from memvault_base.errors import InvalidArgument, ResourceExhausted

MAX_NAME = 200
_NAME_CHARS = re.compile(r"[a-z0-9/_.-]*")
_VAULT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
VERSION_DIGITS = 20
MAX_VERSION = 10**VERSION_DIGITS - 1
PARENT_BYTES = 32  # sha256 of the previous version's bytes
# Versions per `versions_after` call (per ListVersions reply on the server).
MAX_LIMIT = 1000
# The largest object or version this project writes, and so the most any
# remote read is allowed to return: a snapshot chunk is 4 MiB, a key file 92
# bytes, a version at most 1,000 operations (~2 MB for typical memories),
# and a log record at most 16 MiB (`storage/oplog.py`). memvault-server
# refuses larger objects by default (`--max-object-bytes`), and the daemon's
# remotes refuse to write or read them: a hostile remote cannot make a
# device hold more than this per object.
MAX_OBJECT = 16 * 1024 * 1024
# Object names one listing may return. The daemon lists only snapshots and
# keys, and publishes a snapshot hundreds of versions apart at the least, so
# 100,000 names are a history of tens of millions of versions; at ~100 bytes
# each they are ~10 MB. A remote that lists more is refused.
MAX_LISTED = 100_000
_VERSION_TAIL = re.compile(f"[0-9]{{{VERSION_DIGITS}}}")


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


def is_name(name: str) -> bool:
    """Whether `name` is a valid object name (`check_name` without the why)."""
    try:
        check_name(name)
    except InvalidArgument:
        return False
    return True


def check_prefix(prefix: str) -> str:
    """`prefix` if it may start a valid name ("" lists everything)."""
    if len(prefix) > MAX_NAME or not _NAME_CHARS.fullmatch(prefix) or prefix.startswith("/"):
        raise InvalidArgument(f"prefix {prefix!r} cannot start an object name")
    return prefix


def check_vault_id(vault_id: str) -> str:
    """`vault_id` if it is a valid vault id (one path component, never `.` or `..`)."""
    if not _VAULT_ID.fullmatch(vault_id):
        raise InvalidArgument(f"vault id {vault_id!r} must match [a-z0-9][a-z0-9_-]{{0,63}}")
    return vault_id


def check_version(number: int, parent: bytes) -> None:
    """The caller's side of the chain's rules: numbers from 1, parent empty
    for version 1 and a `PARENT_BYTES` hash for every later one."""
    if not 1 <= number <= MAX_VERSION:
        raise InvalidArgument(f"version number must be 1..{MAX_VERSION}, got {number}")
    want = 0 if number == 1 else PARENT_BYTES
    if len(parent) != want:
        raise InvalidArgument(f"version {number} needs a parent of {want} bytes, "
                              f"got {len(parent)}")


def check_object_size(data: bytes, what: str) -> bytes:
    """`data` if it is at most `MAX_OBJECT` bytes, else `ResourceExhausted`."""
    if len(data) > MAX_OBJECT:
        raise ResourceExhausted(f"{what} is {len(data)} bytes, over the {MAX_OBJECT} bytes "
                                "a remote object may hold")
    return data


def check_limit(limit: int) -> int:
    """`limit` if it is a valid number of versions to list: 1..`MAX_LIMIT`."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be 1..{MAX_LIMIT}, got {limit}")
    return limit


def objects_prefix(vault_id: str) -> str:
    return f"{vault_id}/objects/"


def object_key(vault_id: str, name: str) -> str:
    return objects_prefix(vault_id) + name


def versions_prefix(vault_id: str) -> str:
    return f"{vault_id}/versions/"


def version_key(vault_id: str, number: int) -> str:
    return f"{versions_prefix(vault_id)}{number:0{VERSION_DIGITS}d}"


def owner_key(vault_id: str) -> str:
    return f"{vault_id}/owner"


def version_numbers(keys: list[str], prefix: str) -> list[int]:
    """The version numbers among keys under `prefix`; anything else is ignored.

    Only ASCII digits count: `str.isdigit` also accepts superscripts, which
    `int` refuses, and other scripts' digits, which `int` reads as numbers
    whose key is another file."""
    tails = (key[len(prefix):] for key in keys)
    return [int(tail) for tail in tails if _VERSION_TAIL.fullmatch(tail)]
