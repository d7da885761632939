"""The one error tree of memvault, shared by the daemon, the client and the CLI.

    MemvaultError
    ├── InvalidArgument     the request is malformed; nothing was changed
    ├── NotFound            no memory (or object) with that id
    ├── IntegrityError      ciphertext failed to authenticate: tampered or corrupt
    ├── Locked              the vault key is not available (no keyring, no passphrase)
    ├── Unavailable         the daemon (or remote) cannot be reached or is not ready
    ├── ResourceExhausted   a size or space limit was hit
    └── RollbackDetected    a remote showed an older or forked history

Each class's docstring is its user-facing meaning. The gRPC boundary maps the
tree to status codes in one table, `STATUS_OF`, used both ways: the daemon
aborts with `STATUS_OF[type(err)]`, the client raises `error_from_status(...)`.
"""

from __future__ import annotations

import grpc

__all__ = [
    "STATUS_OF",
    "IntegrityError",
    "InvalidArgument",
    "Locked",
    "MemvaultError",
    "NotFound",
    "ResourceExhausted",
    "RollbackDetected",
    "Unavailable",
    "error_from_status",
]


class MemvaultError(Exception):
    """Something went wrong in memvault."""


class InvalidArgument(MemvaultError):
    """The request is malformed; nothing was changed."""


class NotFound(MemvaultError):
    """No such memory."""


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


STATUS_OF: dict[type[MemvaultError], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    IntegrityError: grpc.StatusCode.DATA_LOSS,
    Locked: grpc.StatusCode.FAILED_PRECONDITION,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RollbackDetected: grpc.StatusCode.ABORTED,
    MemvaultError: grpc.StatusCode.INTERNAL,
}

_ERROR_OF = {code: cls for cls, code in STATUS_OF.items()}


def status_of(err: MemvaultError) -> grpc.StatusCode:
    """The status code for `err`: its own class's, else its nearest ancestor's."""
    for cls in type(err).__mro__:
        if cls in STATUS_OF:
            return STATUS_OF[cls]
    return grpc.StatusCode.INTERNAL


def error_from_status(code: grpc.StatusCode, message: str) -> MemvaultError:
    """The exception a client raises for a failed call."""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(message)
    return _ERROR_OF.get(code, MemvaultError)(message)
