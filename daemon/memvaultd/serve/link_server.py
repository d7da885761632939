"""The core's end of the link: frames from the front in, answers out.

The frames and their rules are `front/link.py`'s (and docs/format.md, "The
front-to-core link"); this side reads CALL, CANCEL and MORE, hands each
call to the dispatch (`dispatch.py`) and writes REPLY, ITEM, END and
STATE. It runs on the core's event loop, and so does every method here.

What a peer can make it do is bounded: a frame's length is checked before
its body is read (MAX_FRAME), a stream sends no more than the items asked
for and waits while the socket's buffer is full, and a peer that breaks the
format (a bad preface, length or kind, a call number in use) is
disconnected, its calls ended. Only the front should connect: the socket is
0600 in the core's 0700 inner directory.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import cast

from memvaultd.serve.dispatch import Call, Dispatch, Ended
from memvaultd.serve.front import link
from memvaultd.serve.front.link import Kind, LinkBroken, Metadata, State

log = logging.getLogger("memvaultd.link")

FROM_FRONT = frozenset({Kind.CALL, Kind.CANCEL, Kind.MORE})


class LinkServer:
    """The link's socket, its connections and the serving state they are told."""

    def __init__(self, dispatch: Dispatch) -> None:
        self._dispatch = dispatch
        self._state = State.NOT_SERVING
        self._connections: set[LinkConnection] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self, path: Path) -> None:
        self._server = await asyncio.get_running_loop().create_unix_server(
            lambda: LinkConnection(self._dispatch, self), str(path))

    def set_state(self, state: State) -> None:
        """Tell every front the serving state (STOPPING is for good)."""
        if self._state is State.STOPPING:
            return
        self._state = state
        for connection in self._connections:
            connection.send(link.state_frame(state))

    def opened(self, connection: LinkConnection) -> None:
        self._connections.add(connection)
        connection.send(link.state_frame(self._state))

    def closed(self, connection: LinkConnection) -> None:
        self._connections.discard(connection)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close()


class _OpenStream:
    """A streaming call of a connection: its task, its `Call`, and the items
    the front has asked for and not yet been sent (`credit`)."""

    def __init__(self, connection: LinkConnection, number: int) -> None:
        self._connection = connection
        self.number = number
        self.call = Call(self._send)
        self.credit = link.STREAM_WINDOW
        self.more = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _send(self, item: bytes) -> None:
        while self.credit == 0:
            self.more.clear()
            await self.more.wait()
        self.credit -= 1
        self._connection.send(link.frame(Kind.ITEM, self.number, item))
        await self._connection.writable.wait()

    def grant(self, count: int) -> None:
        self.credit = min(self.credit + count, link.STREAM_WINDOW)
        self.more.set()

    def cancel(self) -> None:
        self.call.end()
        if self.task is not None:
            self.task.cancel()


class LinkConnection(asyncio.Protocol):
    """One connection from a front: each CALL is answered by its own task."""

    def __init__(self, dispatch: Dispatch, server: LinkServer) -> None:
        self._dispatch = dispatch
        self._server = server
        self._frames = link.Frames(FROM_FRONT)
        self._prefaced = bytearray()
        self._transport: asyncio.Transport | None = None
        self._unary: set[asyncio.Task[None]] = set()  # the loop keeps only weak references
        self._streams: dict[int, _OpenStream] = {}
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports have asyncio.Transport's methods without being
        # its subclass.
        self._transport = cast(asyncio.Transport, transport)
        self._server.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.writable.set()
        self._server.closed(self)
        for stream in list(self._streams.values()):
            stream.cancel()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def data_received(self, data: bytes) -> None:
        try:
            if len(self._prefaced) < len(link.PREFACE):
                data = self._preface(data)
            for kind, number, body in self._frames.feed(data):
                self._received(kind, number, body)
        except LinkBroken as broken:
            log.error("a peer broke the link (%s); disconnected it", broken)
            self.close()

    def _preface(self, data: bytes) -> bytes:
        wanted = len(link.PREFACE) - len(self._prefaced)
        self._prefaced += data[:wanted]
        if not link.PREFACE.startswith(self._prefaced):
            raise LinkBroken("a connection that did not open with the link's preface")
        return data[wanted:]

    def _received(self, kind: Kind, number: int, body: bytes) -> None:
        if kind is Kind.CALL:
            name, access, request = link.parse_call(body)
            if number == 0 or number in self._streams:
                raise LinkBroken(f"a CALL numbered {number}, which is not free")
            if self._dispatch.streams(name):
                self._open_stream(number, name, request, access)
            else:
                task = asyncio.ensure_future(self._answer(number, name, request, access))
                self._unary.add(task)
                task.add_done_callback(self._unary.discard)
            return
        stream = self._streams.get(number)
        if kind is Kind.MORE:
            count = link.parse_more(body)
            if stream is not None:
                stream.grant(count)
        elif stream is not None:  # CANCEL; a unary call's answer is dropped by the front
            stream.cancel()

    async def _answer(self, number: int, name: str, request: bytes, access: Metadata
                      ) -> None:
        answer = await self._dispatch.unary(name, request, access)
        if isinstance(answer, Ended):
            self.send(link.end_frame(number, answer.status, answer.details))
        else:
            self.send(link.frame(Kind.REPLY, number, answer))

    def _open_stream(self, number: int, name: str, request: bytes, access: Metadata) -> None:
        stream = self._streams[number] = _OpenStream(self, number)

        async def run() -> None:
            ended = await self._dispatch.stream(name, request, stream.call, access)
            self.send(link.end_frame(number, ended.status, ended.details))

        def done(task: asyncio.Task[None]) -> None:
            # Cancelled (by the front, or the link's end) it has nobody to tell.
            if self._streams.get(number) is stream:
                del self._streams[number]

        stream.task = asyncio.ensure_future(run())
        stream.task.add_done_callback(done)

    def send(self, data: bytes) -> None:
        if self._transport is not None and not self.closed:
            self._transport.write(data)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

