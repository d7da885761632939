"""The gRPC edge: the error tree's status numbers as grpc's `StatusCode`.

`memvault_base.errors` holds the tree and its table of status numbers and
imports no grpc, so that a process which speaks the numbers without grpc
(the daemon's core) never loads it. The processes that do speak gRPC (the
client, the daemon's front process, the sync server, the daemon's
memvault-server remote) translate here, both ways.
"""

from __future__ import annotations

import grpc

from memvault_base.errors import MemvaultError, code_of, error_of
from memvault_base.limits import MAX_MESSAGE

__all__ = ["ANSWERED", "MESSAGE_OPTIONS", "answered", "error_from_status", "status_code",
           "status_of"]

_CODES: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}

# A grpc server's channel options for MAX_MESSAGE, both ways.
MESSAGE_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE),
                   ("grpc.max_send_message_length", MAX_MESSAGE)]


# The trailing metadata a daemon sends with every error it answers. A client
# tells by it "the daemon said UNAVAILABLE" (a sync remote is down; the
# daemon is stopping) from "the connection to the daemon failed", whose
# status gRPC makes up on the client's side, without it; the words alone
# cannot tell them apart, since the daemon may quote a transport's own
# ("the sync remote ... is unreachable: ... Connection refused").
ANSWERED = ("memvault-answered", "memvaultd")


def answered(err: grpc.Call) -> bool:
    """Whether the daemon sent the status of the failed call `err`."""
    return ANSWERED in tuple(err.trailing_metadata() or ())


def status_code(number: int) -> grpc.StatusCode:
    """grpc's `StatusCode` for a status number; UNKNOWN for a number it does not define."""
    return _CODES.get(number, grpc.StatusCode.UNKNOWN)


def status_of(err: MemvaultError) -> grpc.StatusCode:
    """The status code for `err`: its own class's, else its nearest ancestor's."""
    return _CODES[code_of(err)]


def error_from_status(code: grpc.StatusCode, message: str) -> MemvaultError:
    """The exception a client raises for a failed call."""
    number: int = code.value[0]
    return error_of(number, message)
