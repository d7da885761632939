"""The one error tree of memvault, shared by the daemon, the client and the CLI.

    MemvaultError
    ├── InvalidArgument     the request is malformed; nothing was changed
    ├── NotFound            no memory (or object) with that id
    ├── PermissionDenied    the caller's declared access does not reach it
    ├── IntegrityError      ciphertext failed to authenticate: tampered or corrupt
    ├── Locked              the vault key is not available (no keyring, no passphrase)
    ├── Unavailable         the daemon (or remote) cannot be reached or is not ready
    ├── ResourceExhausted   a size or space limit was hit
    └── RollbackDetected    a remote showed an older or forked history
        └── ForkDetected    two devices' fingerprints of the chain differ

Each class's docstring is its user-facing meaning. Calls map the tree to
status codes in one table, `CODE_OF`, used both ways: the daemon answers a
failed call with `code_of(err)`, a client raises `error_of(code, message)`.
The codes are gRPC's status numbers (`Status`), as grpc's
doc/statuscodes.md defines them, so that this module needs no grpc: the
daemon's core speaks them over its link without loading grpc, and
`memvault_base.rpc` turns them into grpc's own `StatusCode`.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "CODE_OF",
    "ForkDetected",
    "IntegrityError",
    "InvalidArgument",
    "Locked",
    "MemvaultError",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "RollbackDetected",
    "Status",
    "Unavailable",
    "code_of",
    "error_of",
]


class MemvaultError(Exception):
    """Something went wrong in memvault."""


class InvalidArgument(MemvaultError):
    """The request is malformed; nothing was changed."""


class NotFound(MemvaultError):
    """No such memory."""


class PermissionDenied(MemvaultError):
    """The caller declared an access (scopes, topics, read-only) that does not reach this."""


class IntegrityError(MemvaultError):
    """Data failed to authenticate: it was tampered with or is corrupt. Nothing from it was used."""


class Locked(MemvaultError):
    """The vault key is not available: unlock the keyring or provide the passphrase."""


class Unavailable(MemvaultError):
    """The daemon is not running or not ready."""


class ResourceExhausted(MemvaultError):
    """A size or space limit was reached."""


class RollbackDetected(MemvaultError):
    """The remote showed an older or different history than this device has seen; sync stopped."""


class ForkDetected(RollbackDetected):
    """This device and another saw different histories on the remote (their fingerprints
    differ): the remote forked or withheld versions. Sync stopped; compare the fingerprints
    of the other devices, then `memvault sync repair`."""


class Status(IntEnum):
    """gRPC's status codes by number; the names are grpc's `StatusCode` names."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


CODE_OF: dict[type[MemvaultError], Status] = {
    InvalidArgument: Status.INVALID_ARGUMENT,
    NotFound: Status.NOT_FOUND,
    PermissionDenied: Status.PERMISSION_DENIED,
    IntegrityError: Status.DATA_LOSS,
    Locked: Status.FAILED_PRECONDITION,
    Unavailable: Status.UNAVAILABLE,
    ResourceExhausted: Status.RESOURCE_EXHAUSTED,
    RollbackDetected: Status.ABORTED,
    MemvaultError: Status.INTERNAL,
}

_ERROR_OF: dict[int, type[MemvaultError]] = {code: cls for cls, code in CODE_OF.items()}


def code_of(err: MemvaultError) -> Status:
    """The status code for `err`: its own class's, else its nearest ancestor's."""
    for cls in type(err).__mro__:
        if cls in CODE_OF:
            return CODE_OF[cls]
    return Status.INTERNAL


def error_of(code: int, message: str) -> MemvaultError:
    """The exception a client raises for a call that failed with status `code`."""
    if code == Status.DEADLINE_EXCEEDED:
        return Unavailable(message)
    return _ERROR_OF.get(code, MemvaultError)(message)

