"""`Connection`: the channel to the daemon's socket under every `Client` call.

It makes the typed call stubs, runs a call with its deadline, and turns every
failed call into the exception of `memvault_base.errors` that
`memvault_base.rpc.error_from_status` names. The only judgement it makes is
telling "the daemon is not running" apart from "the daemon said no".
`Client` and its call mixins (`memvault.sync`, `memvault.transfer`) build on
it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from memvault_base import access, paths
from memvault_base.errors import MemvaultError, Unavailable
from memvault_base.limits import MAX_MESSAGE
from memvault_base.rpc import answered, error_from_status

__all__ = ["CONNECT_TIMEOUT_S", "START_HINT", "Connection"]

_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)

START_HINT = "Start it with `memvaultd` or ./scripts/run"

# A connect to a local unix socket completes in well under a millisecond; 5 s
# only bounds the case of a daemon that accepted the connection and then hung.
CONNECT_TIMEOUT_S = 5.0

_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    # A recall of 1000 hits with vectors is ~2-3 MB, close to gRPC's 4 MiB
    # default: leave room rather than fail on the largest legal answer.
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    # gRPC's default reconnect backoff grows to 120 s. A local daemon that was
    # restarted should be found again within a second, not minutes later.
    # Not `grpc.min_reconnect_backoff_ms`: gRPC core also uses it as the time
    # a connection has to answer its handshake (default 20 s). At 100 ms a
    # daemon just started by systemd, importing its model on a cold page
    # cache, failed its first client as "not running" (tests/test_user_manager.py);
    # `_connect` bounds the wait instead (CONNECT_TIMEOUT_S).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

# What gRPC core says when the transport, not the daemon, failed. A daemon's
# own UNAVAILABLE ("model still loading", "the sync remote ... is
# unreachable: ... Connection refused") carries `memvault_base.rpc.ANSWERED`.
_TRANSPORT_FAILURES = (
    "failed to connect",
    "connection refused",
    "connection reset",
    "socket closed",
    "broken pipe",
    "no such file",
)


class Connection:
    """The channel to the daemon at `socket` (or the one `home` names); see `Client`.

    A subclass makes the stubs of its calls in `_make_stubs`, which runs once,
    at the end of `__init__`.
    """

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        *,
        home: str | None = None,
        timeout: float = 30.0,
        scopes: Sequence[str] = (),
        topics: Sequence[str] = (),
        read_only: bool = False,
    ) -> None:
        raw = Path(socket) if socket is not None else paths.resolve(home).socket
        self.socket: Path = raw.expanduser().absolute()
        self.timeout = timeout
        self.scopes, self.topics, self.read_only = tuple(scopes), tuple(topics), read_only
        # Sent with every call: the access this client declares (docs/scopes.md).
        self._metadata = access.metadata(scopes, topics, read_only) or None
        self._channel = grpc.insecure_channel(f"unix://{self.socket}", options=_CHANNEL_OPTIONS)
        # A channel left open keeps the interpreter waiting at exit for good:
        # a script that never calls `close` (most do not) would never end.
        # The finalizer closes it when the Connection is collected, at exit
        # at the latest, and it is what `close` calls (once, whoever first).
        self._close_channel = weakref.finalize(self, self._channel.close)
        self._connected = False
        self._make_stubs()

    def _make_stubs(self) -> None:
        """Make the call stubs of the calls a subclass adds (none here)."""

    # Typed stubs rather than the generated MemoryStub, which carries no type
    # information; method names match memory.proto.

    def _unary(
        self, method: str, request: type[_Req], reply: type[_Resp]
    ) -> grpc.UnaryUnaryMultiCallable[_Req, _Resp]:
        return self._channel.unary_unary(
            f"/memvault.v1.Memory/{method}",
            request_serializer=request.SerializeToString,
            response_deserializer=reply.FromString,
        )

    def _stream(
        self, method: str, request: type[_Req], reply: type[_Resp]
    ) -> grpc.UnaryStreamMultiCallable[_Req, _Resp]:
        return self._channel.unary_stream(
            f"/memvault.v1.Memory/{method}",
            request_serializer=request.SerializeToString,
            response_deserializer=reply.FromString,
        )

    def _call(
        self,
        method: grpc.UnaryUnaryMultiCallable[_Req, _Resp],
        request: _Req,
        *,
        timeout: float | None = None,
    ) -> _Resp:
        timeout = self.timeout if timeout is None else timeout
        self._connect(min(timeout, CONNECT_TIMEOUT_S))
        try:
            return method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise self._error(err, timeout) from None

    def _connect(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Fail fast, with a message that says what to do, when no daemon answers.

        Checked once per Client: after the first connection gRPC reconnects on
        its own, and a call on a broken connection fails at once (no
        wait-for-ready), so `_error` reports it.
        """
        if self._connected:
            return
        if not self.socket.exists():
            raise Unavailable(self._not_running(f"no socket at {self.socket}"))
        owner = self.socket.stat().st_uid
        if owner != os.getuid():
            # Another user's process there would read every memory sent and
            # answer recalls with what it likes.
            raise Unavailable(f"the socket {self.socket} belongs to uid {owner}, not to you "
                              f"(uid {os.getuid()}): refusing to talk to it. Check "
                              "MEMVAULT_HOME / --socket, or stop whatever serves it")
        settled = threading.Event()
        seen: list[grpc.ChannelConnectivity] = []

        def on_change(state: grpc.ChannelConnectivity) -> None:
            seen.append(state)
            if state is not grpc.ChannelConnectivity.IDLE and (
                state is not grpc.ChannelConnectivity.CONNECTING
            ):
                settled.set()

        self._channel.subscribe(on_change, try_to_connect=True)
        try:
            settled.wait(timeout)
        finally:
            self._channel.unsubscribe(on_change)
        state = seen[-1] if seen else None
        if state is grpc.ChannelConnectivity.READY:
            self._connected = True
        elif state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            raise Unavailable(self._not_running(f"socket at {self.socket} refuses connections"))
        elif state is grpc.ChannelConnectivity.SHUTDOWN:
            raise Unavailable("this memvault Client is closed")
        else:
            raise Unavailable(
                f"memvault daemon at {self.socket} did not accept a connection "
                f"within {timeout:g} s; it may be hung. Restart it (`memvaultd`)"
            )

    def _not_running(self, why: str) -> str:
        return f"memvault daemon is not running ({why}). {START_HINT}"

    def _error(self, err: grpc.RpcError, timeout: float | None = None) -> MemvaultError:
        """The memvault exception for a failed call."""
        if not isinstance(err, grpc.Call):  # every RpcError gRPC raises is also a Call
            return MemvaultError(str(err))
        code, details = err.code(), err.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE and not answered(err) and any(
            marker in details.lower() for marker in _TRANSPORT_FAILURES
        ):
            why = "no socket at" if not self.socket.exists() else "connection lost to"
            return Unavailable(self._not_running(f"{why} {self.socket}"))
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            limit = f" within {timeout:g} s" if timeout is not None else ""
            return Unavailable(f"memvault daemon at {self.socket} did not answer{limit}")
        return error_from_status(code, details)
