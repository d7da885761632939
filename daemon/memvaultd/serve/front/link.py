"""The link between the front process and the core: unary calls as frames.

The front (`front.py`) runs grpc and the socket's gate; the core (memvaultd's
own process) holds the vault. Each unary Memory call the front receives goes
to the core as one frame on a unix socket in the core's 0700 inner
directory, and its answer comes back as one frame (docs/format.md, "The
front-to-core link"):

    request  length:4 | call:4 | name_length:1 | name | request bytes
    reply    length:4 | call:4 | status:1 | reply bytes, or UTF-8 details

Integers are big-endian; `length` counts the bytes after itself; `status` is
the gRPC status code (0: OK). Replies may come in any order: a call answered
at once overtakes one that waits on a worker. The request and reply bytes
are the client's and the servicer's protobuf messages, untouched: the front
never parses them.

Why frames rather than grpc between the two: the point of the front is to
take grpc's own work (~1/3 of what the core's event loop did per call,
docs/benchmarks.md) off the core's interpreter lock; a second grpc hop
would put it back.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc

log = logging.getLogger("memvaultd.link")

_HEAD = 4  # the length prefix
_CODES = {code.value[0]: code for code in grpc.StatusCode}


def request_frame(call: int, method: str, payload: bytes) -> bytes:
    name = method.encode()
    body = 5 + len(name) + len(payload)
    return (body.to_bytes(4, "big") + call.to_bytes(4, "big") + bytes([len(name)])
            + name + payload)


def reply_frame(call: int, status: grpc.StatusCode, payload: bytes) -> bytes:
    body = 5 + len(payload)
    return (body.to_bytes(4, "big") + call.to_bytes(4, "big")
            + bytes([status.value[0]]) + payload)


class Frames:
    """Cuts a byte stream into frames (without their length prefix)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= _HEAD:
            size = int.from_bytes(self._buffer[:_HEAD], "big")
            if len(self._buffer) < _HEAD + size:
                break
            frames.append(bytes(self._buffer[_HEAD : _HEAD + size]))
            del self._buffer[: _HEAD + size]
        return frames


def parse_request(frame: bytes) -> tuple[int, str, bytes]:
    call = int.from_bytes(frame[:4], "big")
    end = 5 + frame[4]
    return call, frame[5:end].decode(), frame[end:]


def parse_reply(frame: bytes) -> tuple[int, grpc.StatusCode, bytes]:
    return int.from_bytes(frame[:4], "big"), _CODES[frame[4]], frame[5:]


# -- the core's end -------------------------------------------------------------------


class LinkAborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class _CallContext:
    """What the core's handlers ask of grpc's context, for a linked call:
    `abort` (which raises, as grpc's does) and `done`."""

    def __init__(self, connection: LinkServer) -> None:
        self._connection = connection

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise LinkAborted(code, details)

    def done(self) -> bool:
        return self._connection.closed


@dataclass(frozen=True)
class Unary:
    """A unary method as the core serves it: bytes in, the handler, bytes out."""

    handler: Callable[[Any, Any], Awaitable[Any]]
    deserialize: Callable[[bytes], Any]
    serialize: Callable[[Any], bytes]


class LinkServer(asyncio.Protocol):
    """One link connection, on the core's event loop: each request frame is
    handled by its method's handler, as grpc would call it."""

    def __init__(self, methods: dict[str, Unary]) -> None:
        self._methods = methods
        self._frames = Frames()
        self._transport: asyncio.Transport | None = None
        self._handling: set[asyncio.Future[None]] = set()  # the loop keeps only weak references
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        for frame in self._frames.feed(data):
            call, name, payload = parse_request(frame)
            method = self._methods.get(name)
            if method is None:
                self._send(call, grpc.StatusCode.UNIMPLEMENTED, f"no method {name!r}".encode())
                continue
            handling = asyncio.ensure_future(self._handle(call, method, payload))
            self._handling.add(handling)
            handling.add_done_callback(self._handling.discard)

    async def _handle(self, call: int, method: Unary, payload: bytes) -> None:
        try:
            reply = await method.handler(method.deserialize(payload), _CallContext(self))
            self._send(call, grpc.StatusCode.OK, method.serialize(reply))
        except LinkAborted as aborted:
            self._send(call, aborted.code, aborted.details.encode())
        except Exception:
            log.exception("a linked call failed")
            self._send(call, grpc.StatusCode.INTERNAL, b"the call failed; see the daemon's log")

    def _send(self, call: int, status: grpc.StatusCode, payload: bytes) -> None:
        if self._transport is not None and not self.closed:
            self._transport.write(reply_frame(call, status, payload))


# -- the front's end ------------------------------------------------------------------


class LinkClient(asyncio.Protocol):
    """The front's end of the link: one connection carries every unary
    call, each matched to its reply by its call number."""

    def __init__(self) -> None:
        self._frames = Frames()
        self._pending: dict[int, asyncio.Future[tuple[grpc.StatusCode, bytes]]] = {}
        self._numbers = itertools.count(1)
        self._transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError("the daemon's core went away"))
        if not self.lost.done():
            self.lost.set_result(None)

    def data_received(self, data: bytes) -> None:
        for frame in self._frames.feed(data):
            call, status, payload = parse_reply(frame)
            waiting = self._pending.get(call)
            if waiting is not None and not waiting.done():
                waiting.set_result((status, payload))

    async def call(self, method: str, payload: bytes) -> tuple[grpc.StatusCode, bytes]:
        """(status, reply bytes or UTF-8 details); ConnectionError if the core is gone."""
        if self._transport is None or self.lost.done():
            raise ConnectionError("the daemon's core went away")
        number = next(self._numbers) % 2**32
        waiting: asyncio.Future[tuple[grpc.StatusCode, bytes]] = (
            asyncio.get_running_loop().create_future())
        self._pending[number] = waiting
        try:
            self._transport.write(request_frame(number, method, payload))
            return await waiting
        finally:
            del self._pending[number]
