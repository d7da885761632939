"""The link between the front process and the core: every call as frames.

The front (`relay.py`) runs grpc and the socket's gate; the core (memvaultd's
own process) holds the vault and runs no grpc. Every Memory call the front
receives, unary or server-streaming, goes to the core over one connection
to a unix socket in the core's 0700 inner directory, and its answer comes
back as frames; the core also tells the front its serving state, which the
front's health service reports (docs/format.md, "The front-to-core link"):

    preface  "memvault-link/2\\n"                  front -> core, once, 16 bytes
    frame    length:4 | kind:1 | call:4 | body

    kind  name    from    body
    1     CALL    front   name_length:1 | name | access_length:2 | access | request
    2     CANCEL  front   (empty)
    3     MORE    front   count:4
    4     REPLY   core    reply
    5     ITEM    core    item
    6     END     core    status:1 | details
    7     STATE   core    state:1                   (call 0)

Integers are big-endian; `length` counts the bytes after itself (5 at
least, MAX_FRAME at most: a frame outside those bounds, an unknown kind or
a malformed body ends the link, read no further). `call` is the front's
number for a call, never 0 and never one still in use; every frame of a
call carries it. `name` is the method's name in the Memory service (ASCII,
`Recall`); `access` the call's `memvault-*` metadata, the caller's declared
access (`memvault_base.access`), as ASCII lines `key=value\\n` in the
order received (at most MAX_ACCESS bytes), which the core checks and
enforces; `request`, `reply` and `item` are protobuf messages, the
client's and the servicer's bytes, which the front never parses.

- A unary call: CALL, answered by REPLY (status OK) or END (any other).
  Answers come in any order: a recall answered at once overtakes a call
  that waits on a worker.
- A server-streaming call (Events, Export): CALL, then ITEM for each
  message and END with the status (OK or not) once it is over. The core
  sends at most STREAM_WINDOW items the front has not asked for: the CALL
  asks for that many, each MORE for `count` more, sent by the front once
  it has passed half a window on to its client. So a slow client holds at
  most a window of items in the front, and none piles up in the core.
- CANCEL: the front's client went away (or its deadline passed) before the
  END: the core ends the stream and sends nothing more for it.
- END's `status` is the gRPC status number (`memvault_base.errors.Status`);
  `details` the message in UTF-8, which the front hands on as it is.
- STATE: the core's serving state, sent when the link opens and at each
  change: 0 not serving yet (loading), 1 serving, 2 stopping (for good).

The preface carries the link's version: the core closes a connection that
opens with anything else. Front and core are the same installed code (the
core starts the front with its own interpreter), so it guards against a
stray peer on the socket rather than against an old front.

The front reports itself started by writing READY on its stdout, a pipe
from the core, once it serves the public socket; the end of its stdin,
another pipe from the core, tells it that the core is gone.

Why frames rather than grpc between the two: the point of the front is to
take grpc's own work (~1/3 of what the core's event loop did per call,
docs/benchmarks.md) off the core's interpreter lock; a second grpc hop
would put it back. This module imports no grpc: the core uses its codec.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import struct
from collections.abc import Callable
from enum import IntEnum
from typing import cast

from memvault_base.errors import Status
from memvault_base.limits import MAX_MESSAGE

log = logging.getLogger("memvaultd.link")

PREFACE = b"memvault-link/2\n"
READY = b"ready\n"
# A call's declared access: a few scopes and topic patterns are ~100 bytes;
# 4 KiB holds dozens.
MAX_ACCESS = 4096
# The largest frame: a CALL of a 255-byte name, its access and a message of the limit.
MAX_FRAME = 1 + 4 + 1 + 255 + 2 + MAX_ACCESS + MAX_MESSAGE
# Items the core may send ahead on one stream. An Events item is ~50 bytes,
# an Export record with its vector ~2-5 KB: 64 of them are at most ~320 KB
# held in the front for a client that reads slowly.
STREAM_WINDOW = 64

_HEAD = struct.Struct(">IBI")  # length, kind, call
_LENGTH = _CALL = _COUNT = struct.Struct(">I")
_ACCESS_LENGTH = struct.Struct(">H")
_MIN_LENGTH = 5  # kind and call


class Kind(IntEnum):
    CALL = 1
    CANCEL = 2
    MORE = 3
    REPLY = 4
    ITEM = 5
    END = 6
    STATE = 7


class State(IntEnum):
    """The core's serving state, as STATE frames carry it."""

    NOT_SERVING = 0
    SERVING = 1
    STOPPING = 2


class LinkBroken(Exception):
    """The peer broke the link's format; the link ends."""


def frame(kind: Kind, call: int, body: bytes = b"") -> bytes:
    return _HEAD.pack(_MIN_LENGTH + len(body), kind, call) + body


Metadata = tuple[tuple[str, str], ...]


def access_lines(access: Metadata) -> bytes:
    """A CALL's `access`; ValueError unless it is key=value lines of ASCII,
    MAX_ACCESS bytes at most."""
    if any("\n" in key + value or "=" in key for key, value in access):
        raise ValueError("the call's memvault-* metadata does not make key=value lines")
    lines = "".join(f"{key}={value}\n" for key, value in access).encode("ascii")
    if len(lines) > MAX_ACCESS:
        raise ValueError(f"the call's memvault-* metadata is over {MAX_ACCESS} bytes")
    return lines


def call_frame(call: int, method: str, request: bytes, access: bytes = b"") -> bytes:
    """A CALL; `access` as `access_lines` makes it."""
    name = method.encode("ascii")
    return frame(Kind.CALL, call, bytes([len(name)]) + name
                 + _ACCESS_LENGTH.pack(len(access)) + access + request)


def more_frame(call: int, count: int) -> bytes:
    return frame(Kind.MORE, call, _COUNT.pack(count))


def end_frame(call: int, status: int, details: str) -> bytes:
    return frame(Kind.END, call, bytes([status]) + details.encode()[:MAX_MESSAGE])


def state_frame(state: State) -> bytes:
    return frame(Kind.STATE, 0, bytes([state]))


def parse_call(body: bytes) -> tuple[str, Metadata, bytes]:
    """(method, access metadata, request) of a CALL; LinkBroken if its name
    or access does not fit it."""
    if not body or 1 + body[0] + _ACCESS_LENGTH.size > len(body):
        raise LinkBroken("a CALL whose name runs past its frame")
    end = 1 + body[0]
    (size,) = _ACCESS_LENGTH.unpack_from(body, end)
    start = end + _ACCESS_LENGTH.size
    if size > MAX_ACCESS or start + size > len(body):
        raise LinkBroken("a CALL whose access runs past its frame")
    lines = body[start : start + size].decode("ascii", "replace").splitlines()
    access = tuple((key, value) for key, _, value in (line.partition("=") for line in lines))
    return body[1:end].decode("ascii", "replace"), access, body[start + size :]


def parse_more(body: bytes) -> int:
    if len(body) != _COUNT.size:
        raise LinkBroken("a MORE without its count")
    count: int = _COUNT.unpack(body)[0]
    return count


def parse_end(body: bytes) -> tuple[int, bytes]:
    """(status, details in UTF-8) of an END."""
    if not body:
        raise LinkBroken("an END without its status")
    return body[0], body[1:]


def parse_state(body: bytes) -> State:
    try:
        (state,) = body
        return State(state)
    except ValueError:
        raise LinkBroken("a STATE that names no state") from None


class Frames:
    """Cuts a byte stream into frames: (kind, call, body) each.

    Each length is checked as soon as its 4 bytes are in, and each kind as
    soon as its byte is: a frame over `limit` or of a kind this end does
    not receive is refused before its body is buffered."""

    def __init__(self, kinds: frozenset[Kind], limit: int = MAX_FRAME) -> None:
        self._kinds = kinds
        self._limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[Kind, int, bytes]]:
        buffer = self._buffer
        buffer += data
        frames = []
        at = 0
        while len(buffer) - at >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer, at)
            if not _MIN_LENGTH <= size <= self._limit:
                raise LinkBroken(f"a frame of {size} bytes ({_MIN_LENGTH}..{self._limit})")
            if len(buffer) - at <= _LENGTH.size:
                break
            kind = buffer[at + _LENGTH.size]
            if kind not in self._kinds:
                raise LinkBroken(f"a frame of kind {kind}, not one this end receives")
            end = at + _LENGTH.size + size
            if len(buffer) < end:
                break
            (call,) = _CALL.unpack_from(buffer, at + _LENGTH.size + 1)
            frames.append((Kind(kind), call, bytes(buffer[at + _HEAD.size : end])))
            at = end
        del buffer[:at]
        return frames


# -- the front's end ------------------------------------------------------------------

FROM_CORE = frozenset({Kind.REPLY, Kind.ITEM, Kind.END, Kind.STATE})


class Streamed:
    """A server-streaming call in progress: its items as an async iterator;
    once they end, `status` and `details` say how. `close` cancels it if it
    has not ended."""

    def __init__(self, client: LinkClient, number: int) -> None:
        self._client = client
        self.number = number
        self._items: collections.deque[bytes] = collections.deque()
        self._arrived = asyncio.Event()
        self._passed = 0  # items handed on since the last MORE
        self.status: int | None = None
        self.details = ""

    def __aiter__(self) -> Streamed:
        return self

    async def __anext__(self) -> bytes:
        while not self._items:
            if self.status is not None:
                raise StopAsyncIteration
            if self._client.lost.done():
                raise ConnectionError("the daemon's core went away")
            self._arrived.clear()
            await self._arrived.wait()
        self._passed += 1
        if self._passed == STREAM_WINDOW // 2:
            self._client.send(more_frame(self.number, self._passed))
            self._passed = 0
        return self._items.popleft()

    def close(self) -> None:
        if self.status is None:
            self.status = Status.CANCELLED
            self._client.send(frame(Kind.CANCEL, self.number))
        self._client.forget(self.number)

    def _item(self, item: bytes) -> None:
        if len(self._items) >= STREAM_WINDOW:
            raise LinkBroken(f"more than {STREAM_WINDOW} items ahead on call {self.number}")
        self._items.append(item)
        self._arrived.set()

    def _end(self, status: int, details: str) -> None:
        self.status, self.details = status, details
        self._arrived.set()

    def _wake(self) -> None:
        """The link is lost: a reader waiting for items learns it."""
        self._arrived.set()


class LinkClient(asyncio.Protocol):
    """The front's end of the link: one connection carries every call, each
    matched to its frames by its call number. `on_state` hears each STATE."""

    def __init__(self, on_state: Callable[[State], None]) -> None:
        self._on_state = on_state
        self._frames = Frames(FROM_CORE)
        self._unary: dict[int, asyncio.Future[tuple[int, bytes]]] = {}
        self._streams: dict[int, Streamed] = {}
        self._numbers = itertools.count(1)
        self._transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.Transport's methods without being
        # its subclass.
        self._transport = cast(asyncio.Transport, transport)
        self._transport.write(PREFACE)

    def connection_lost(self, exc: Exception | None) -> None:
        for waiting in self._unary.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError("the daemon's core went away"))
        for streamed in self._streams.values():
            streamed._wake()
        if not self.lost.done():
            self.lost.set_result(None)

    def data_received(self, data: bytes) -> None:
        try:
            for kind, number, body in self._frames.feed(data):
                self._received(kind, number, body)
        except LinkBroken as broken:
            log.error("the core broke the link (%s); closing it", broken)
            assert self._transport is not None
            self._transport.close()

    def _received(self, kind: Kind, number: int, body: bytes) -> None:
        # A call the front has given up on (cancelled, its client gone) is
        # no longer here: what the core had sent for it already is dropped.
        if kind is Kind.STATE:
            self._on_state(parse_state(body))
        elif kind is Kind.ITEM:
            streamed = self._streams.get(number)
            if streamed is not None:
                streamed._item(body)
        elif kind is Kind.REPLY:
            self._answer(number, Status.OK, body)
        else:
            status, details = parse_end(body)
            streamed = self._streams.get(number)
            if streamed is not None:
                streamed._end(status, details.decode("utf-8", "replace"))
            else:
                self._answer(number, status, details)

    def _answer(self, number: int, status: int, payload: bytes) -> None:
        waiting = self._unary.get(number)
        if waiting is not None and not waiting.done():
            waiting.set_result((status, payload))

    def send(self, data: bytes) -> None:
        if self._transport is not None and not self.lost.done():
            self._transport.write(data)

    def forget(self, number: int) -> None:
        self._streams.pop(number, None)

    def _number(self) -> int:
        if self._transport is None or self.lost.done():
            raise ConnectionError("the daemon's core went away")
        while True:  # 0 is the link's own; a long stream may hold a number across the wrap
            number = next(self._numbers) % 2**32
            if number and number not in self._unary and number not in self._streams:
                return number

    async def call(self, method: str, request: bytes, access: Metadata = ()
                   ) -> tuple[int, bytes]:
        """(status, reply bytes or UTF-8 details); ConnectionError if the core
        is gone, ValueError if `access` does not fit a CALL."""
        lines = access_lines(access)
        number = self._number()
        waiting: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self._unary[number] = waiting
        try:
            self.send(call_frame(number, method, request, lines))
            return await waiting
        finally:
            del self._unary[number]

    def stream(self, method: str, request: bytes, access: Metadata = ()) -> Streamed:
        """A server-streaming call, started; ConnectionError if the core is
        gone, ValueError if `access` does not fit a CALL."""
        lines = access_lines(access)
        number = self._number()
        streamed = self._streams[number] = Streamed(self, number)
        self.send(call_frame(number, method, request, lines))
        return streamed
