"""The front process and its link to the core.

The link's two ends over a real unix socket on one event loop, with the
test's own handlers; then the real daemon: its front lives and dies with it.
Every call of the rest of the suite goes through the front too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from memvault import Client
from memvaultd.serve.front import link

from .daemon_process import DaemonProcess

# -- the frames -----------------------------------------------------------------------


def test_frames_are_cut_from_a_stream_whatever_its_pieces() -> None:
    stream = (link.request_frame(7, "Recall", b"\x0a\x03abc")
              + link.reply_frame(7, grpc.StatusCode.INVALID_ARGUMENT, b"query: bad")
              + link.request_frame(2**32 - 1, "Remember", b""))
    for size in (1, 3, 64):
        frames = link.Frames()
        got = [f for i in range(0, len(stream), size) for f in frames.feed(stream[i : i + size])]
        assert len(got) == 3
        assert link.parse_request(got[0]) == (7, "Recall", b"\x0a\x03abc")
        assert link.parse_reply(got[1]) == (7, grpc.StatusCode.INVALID_ARGUMENT, b"query: bad")
        assert link.parse_request(got[2]) == (2**32 - 1, "Remember", b"")


# -- the link's two ends --------------------------------------------------------------


def _methods(release: asyncio.Event) -> dict[str, link.Unary]:
    async def echo(request: bytes, context: Any) -> bytes:
        return request

    async def slow(request: bytes, context: Any) -> bytes:
        await release.wait()
        return b"slow " + request

    async def refuse(request: bytes, context: Any) -> bytes:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "text: must not be empty")
        raise AssertionError("abort raises")

    async def crash(request: bytes, context: Any) -> bytes:
        raise KeyError("a bug")

    def same(data: bytes) -> bytes:
        return data

    return {name: link.Unary(handler, same, same)
            for name, handler in (("Echo", echo), ("Slow", slow), ("Refuse", refuse),
                                  ("Crash", crash))}


class _Core(link.LinkServer):
    """The core's end, keeping its transport so that a test can hang up."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport = transport


def _linked(tmp_path: Path, body: Callable[[link.LinkClient, asyncio.Event, _Core], Any]
            ) -> None:
    async def run() -> None:
        release = asyncio.Event()
        loop = asyncio.get_running_loop()
        path = tmp_path / "link.sock"
        cores: list[_Core] = []

        def accept() -> _Core:
            cores.append(_Core(_methods(release)))
            return cores[-1]

        server = await loop.create_unix_server(accept, str(path))
        _, client = await loop.create_unix_connection(link.LinkClient, str(path))
        await asyncio.sleep(0.01)  # the core's end is made once the loop turns
        try:
            await asyncio.wait_for(body(client, release, cores[0]), 10)
        finally:
            server.close()

    asyncio.run(run())


def test_a_quick_answer_overtakes_one_that_waits(tmp_path: Path) -> None:
    async def body(client: link.LinkClient, release: asyncio.Event, core: Any) -> None:
        slow = asyncio.ensure_future(client.call("Slow", b"first"))
        assert await client.call("Echo", b"second") == (grpc.StatusCode.OK, b"second")
        assert not slow.done()
        release.set()
        assert await slow == (grpc.StatusCode.OK, b"slow first")

    _linked(tmp_path, body)


def test_a_refusal_a_failure_and_an_unknown_method_arrive_as_statuses(tmp_path: Path) -> None:
    async def body(client: link.LinkClient, release: asyncio.Event, core: Any) -> None:
        assert await client.call("Refuse", b"") == (grpc.StatusCode.INVALID_ARGUMENT,
                                                    b"text: must not be empty")
        status, details = await client.call("Crash", b"")
        assert status is grpc.StatusCode.INTERNAL and b"log" in details
        assert await client.call("Nope", b"") == (grpc.StatusCode.UNIMPLEMENTED,
                                                  b"no method 'Nope'")

    _linked(tmp_path, body)


def test_a_call_in_flight_fails_when_the_core_goes_away(tmp_path: Path) -> None:
    async def body(client: link.LinkClient, release: asyncio.Event, core: Any) -> None:
        waiting = asyncio.ensure_future(client.call("Slow", b"x"))
        await asyncio.sleep(0.05)
        core.transport.close()
        with pytest.raises(ConnectionError):
            await waiting
        with pytest.raises(ConnectionError):
            await client.call("Echo", b"y")
        assert client.lost.done()

    _linked(tmp_path, body)


# -- the real daemon ------------------------------------------------------------------


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":  # exited, waiting for its parent (gone) to be reaped by init
            return True
        time.sleep(0.05)
    return False


def test_the_front_ends_with_the_core_and_a_new_daemon_takes_the_socket(home: Path) -> None:
    with DaemonProcess(home).start() as daemon:
        front = daemon.front_pid()
        with Client(socket=daemon.socket, timeout=30) as client:
            client.remember("kept across a crash", topic="crash.front")
        daemon.kill()  # SIGKILL: the core cannot stop its front itself
        assert _gone(front, within=5.0), "the front outlived its core"
    with DaemonProcess(home).start() as again:
        with Client(socket=again.socket, timeout=30) as client:
            assert [h.memory.text for h in client.recall("kept across a crash")][:1] == [
                "kept across a crash"]
        assert again.stop() == 0
        assert not (home / "run" / "memvault.sock").exists()


def test_the_daemon_stops_and_says_why_when_its_front_dies(home: Path) -> None:
    with DaemonProcess(home).start() as daemon:
        os.kill(daemon.front_pid(), signal.SIGKILL)
        assert daemon.proc is not None
        code = daemon.proc.wait(60)
        # Not 0, so that the service manager restarts it; not 2 (bad config).
        assert code == 1
        assert "the front process exited unasked" in daemon.log


def test_the_socket_tells_what_it_serves(daemon: DaemonProcess) -> None:
    from grpc_reflection.v1alpha import (  # type: ignore[import-untyped]
        reflection_pb2,
        reflection_pb2_grpc,
    )

    with grpc.insecure_channel(f"unix://{daemon.socket}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
        names = {s.name for r in replies for s in r.list_services_response.service}
    assert {"memvault.v1.Memory", "grpc.health.v1.Health"} <= names


def test_a_sigterm_to_the_front_stops_the_daemon_cleanly(home: Path) -> None:
    with DaemonProcess(home).start() as daemon:
        with Client(socket=daemon.socket, timeout=30) as client:
            client.remember("written before the stop", topic="front.stop")
        os.kill(daemon.front_pid(), signal.SIGTERM)
        assert daemon.proc is not None
        assert daemon.proc.wait(60) == 0
        assert "the front process was stopped; stopping" in daemon.log
        assert not daemon.socket.exists()


def test_the_front_is_not_given_the_passphrase(daemon: DaemonProcess) -> None:
    assert "MEMVAULT_PASSPHRASE" in daemon.env  # the daemon's own: the key file's
    environ = Path(f"/proc/{daemon.front_pid()}/environ").read_bytes().split(b"\0")
    names = {entry.split(b"=", 1)[0].decode() for entry in environ if entry}
    assert "MEMVAULT_PASSPHRASE" not in names and "MEMVAULT_HOME" not in names
    assert "PATH" in names
