"""The front process and its link to the core.

The link's two ends over a real unix socket on one event loop, the core's
end with the real dispatch and methods of the test's own; hostile bytes on
the core's socket; the real front process (`python -m memvaultd.serve.front`)
before a core of the test's own, reached with grpc; then the real daemon:
its front lives and dies with it, and only the front loads grpc. Every call
of the rest of the suite goes through the front too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memvault import Client
from memvault_base.errors import InvalidArgument, Status
from memvault_base.v1 import memory_pb2 as pb
from memvault_base.v1 import memory_pb2_grpc as pb_grpc
from memvaultd.model.scopes import Access
from memvaultd.serve.dispatch import Call, Dispatch, Stream, Unary
from memvaultd.serve.front import link
from memvaultd.serve.front.link import Kind, LinkBroken, LinkClient, State
from memvaultd.serve.link_server import LinkServer

from .daemon_process import DaemonProcess

T = TypeVar("T")

# -- the frames -----------------------------------------------------------------------


def test_frames_are_cut_from_a_stream_whatever_its_pieces() -> None:
    access = (("memvault-scopes", "project:api"), ("memvault-read-only", "1"))
    stream = (link.call_frame(7, "Recall", b"\x0a\x03abc", link.access_lines(access))
              + link.end_frame(7, Status.INVALID_ARGUMENT, "query: bad")
              + link.frame(Kind.ITEM, 2**32 - 1, b"")
              + link.more_frame(9, 32)
              + link.state_frame(State.SERVING))
    for size in (1, 3, 64):
        frames = link.Frames(frozenset(Kind))
        got = [f for i in range(0, len(stream), size) for f in frames.feed(stream[i : i + size])]
        assert [(kind, call) for kind, call, _ in got] == [
            (Kind.CALL, 7), (Kind.END, 7), (Kind.ITEM, 2**32 - 1), (Kind.MORE, 9),
            (Kind.STATE, 0)]
        assert link.parse_call(got[0][2]) == ("Recall", access, b"\x0a\x03abc")
        assert link.parse_end(got[1][2]) == (Status.INVALID_ARGUMENT, b"query: bad")
        assert got[2][2] == b""
        assert link.parse_more(got[3][2]) == 32
        assert link.parse_state(got[4][2]) is State.SERVING


def test_a_frame_is_judged_by_its_head_before_its_body_is_read() -> None:
    frames = link.Frames(frozenset({Kind.CALL}))
    with pytest.raises(LinkBroken, match="a frame of 2147483648 bytes"):
        frames.feed((2**31).to_bytes(4, "big") + bytes([Kind.CALL]) + b"\0\0\0\1")
    with pytest.raises(LinkBroken, match="kind 5"):
        link.Frames(frozenset({Kind.CALL})).feed(link.frame(Kind.ITEM, 1, b"x"))
    with pytest.raises(LinkBroken, match="a frame of 4 bytes"):
        link.Frames(frozenset(Kind)).feed(b"\0\0\0\4\1\0\0\0")
    for body in (b"", b"\x09Recall", b"\x06Recall\x00"):
        with pytest.raises(LinkBroken, match="name runs past"):
            link.parse_call(body)
    with pytest.raises(LinkBroken, match="access runs past"):
        link.parse_call(b"\x06Recall\x00\x09a=b\n")
    with pytest.raises(ValueError, match="over 4096 bytes"):
        link.access_lines((("memvault-topics", "x" * 5000),))
    for bad in (lambda: link.parse_more(b"\0\0\1"), lambda: link.parse_end(b""),
                lambda: link.parse_state(b"\x09")):
        with pytest.raises(LinkBroken):
            bad()


# -- the link's two ends --------------------------------------------------------------


class _Methods:
    """The test's Memory methods: unary Get and Status, streaming Export and Events."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.produced = 0
        self.closed = threading.Event()
        self.events_closed = threading.Event()
        self.export_size = 10

    def get(self, request: pb.GetRequest, access: Access) -> pb.GetReply:
        if request.id == "slow":
            assert self.release.wait(10)
        if request.id == "refuse":
            raise InvalidArgument("id: must not be 'refuse'")
        if request.id == "crash":
            raise KeyError("a bug")
        return pb.GetReply(memory=pb.MemoryRecord(id=request.id))

    def export(self, request: pb.ExportRequest, access: Access, call: Call
               ) -> Iterator[pb.MemoryRecord]:
        try:
            for i in range(self.export_size):
                self.produced += 1
                yield pb.MemoryRecord(id=f"m-{i}")
                if i == 2 and request.include_vectors:
                    raise InvalidArgument("vectors: not today")
        finally:
            self.closed.set()

    def events(self, request: pb.EventsRequest, access: Access, call: Call
               ) -> Iterator[pb.Event]:
        try:
            while call.is_active():
                time.sleep(0.05)
                yield pb.Event(type="tick")
        finally:
            self.events_closed.set()

    def dispatch(self, pool: ThreadPoolExecutor) -> Dispatch:
        return Dispatch({"Get": Unary(pb.GetRequest, self.get),
                         "Export": Stream(pb.ExportRequest, self.export),
                         "Events": Stream(pb.EventsRequest, self.events)}, pool, pool)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(max_workers=8)
    yield pool
    pool.shutdown(wait=False)


class _Linked:
    def __init__(self, client: LinkClient, server: LinkServer, methods: _Methods,
                 path: Path, states: list[State]) -> None:
        self.client, self.server, self.methods, self.path = client, server, methods, path
        self.states = states


def _linked(tmp_path: Path, pool: ThreadPoolExecutor,
            body: Callable[[_Linked], Coroutine[Any, Any, None]]) -> None:
    async def run() -> None:
        methods = _Methods()
        server = LinkServer(methods.dispatch(pool))
        path = tmp_path / "link.sock"
        await server.start(path)
        states: list[State] = []
        _, client = await asyncio.get_running_loop().create_unix_connection(
            lambda: LinkClient(states.append), str(path))
        await asyncio.sleep(0.05)  # the core's end is made once the loop turns
        try:
            await asyncio.wait_for(body(_Linked(client, server, methods, path, states)), 10)
        finally:
            methods.release.set()
            server.close()

    asyncio.run(run())


def _get(memory_id: str) -> bytes:
    return pb.GetRequest(id=memory_id).SerializeToString()


def test_a_quick_answer_overtakes_one_that_waits(tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        client = linked.client
        slow = asyncio.ensure_future(client.call("Get", _get("slow")))
        status, reply = await client.call("Get", _get("quick"))
        assert status == Status.OK and pb.GetReply.FromString(reply).memory.id == "quick"
        assert not slow.done()
        linked.methods.release.set()
        status, reply = await slow
        assert status == Status.OK and pb.GetReply.FromString(reply).memory.id == "slow"

    _linked(tmp_path, pool, body)


def test_a_refusal_a_failure_and_an_unknown_method_arrive_as_statuses(
        tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        client = linked.client
        assert await client.call("Get", _get("refuse")) == (
            Status.INVALID_ARGUMENT, b"id: must not be 'refuse'")
        assert await client.call("Get", _get("crash")) == (
            Status.INTERNAL, b"Get failed; see the daemon's log")
        assert await client.call("Nope", b"") == (Status.UNIMPLEMENTED,
                                                  b"no unary method 'Nope'")
        status, details = await client.call("Get", b"\x0a\x01\xff")
        assert status == Status.INVALID_ARGUMENT
        assert details.startswith(b"request: not a valid protobuf message")

    _linked(tmp_path, pool, body)


def test_a_call_in_flight_fails_when_the_core_goes_away(tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        waiting = asyncio.ensure_future(linked.client.call("Get", _get("slow")))
        await asyncio.sleep(0.05)
        linked.server.close()
        with pytest.raises(ConnectionError):
            await waiting
        with pytest.raises(ConnectionError):
            await linked.client.call("Get", _get("quick"))
        assert linked.client.lost.done()

    _linked(tmp_path, pool, body)


def test_a_stream_brings_its_items_then_its_end(tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        streamed = linked.client.stream("Export", b"")
        ids = [pb.MemoryRecord.FromString(item).id async for item in streamed]
        assert ids == [f"m-{i}" for i in range(10)]
        assert (streamed.status, streamed.details) == (Status.OK, "")
        failing = linked.client.stream(
            "Export", pb.ExportRequest(include_vectors=True).SerializeToString())
        assert len([item async for item in failing]) == 3
        assert (failing.status, failing.details) == (Status.INVALID_ARGUMENT,
                                                     "vectors: not today")
        # Unary and streaming calls share the link.
        status, _ = await linked.client.call("Get", _get("after"))
        assert status == Status.OK

    _linked(tmp_path, pool, body)


def test_a_cancel_ends_the_cores_stream(tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        streamed = linked.client.stream("Events", b"")
        assert pb.Event.FromString(await streamed.__anext__()).type == "tick"
        started = time.monotonic()
        streamed.close()  # what the front does when its client goes away
        await asyncio.get_running_loop().run_in_executor(
            None, linked.methods.events_closed.wait, 5)
        assert linked.methods.events_closed.is_set()
        assert time.monotonic() - started < 1.0
        assert streamed.status == Status.CANCELLED

    _linked(tmp_path, pool, body)


def test_a_slow_reader_holds_at_most_a_window_of_items(tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        linked.methods.export_size = 10 * link.STREAM_WINDOW
        streamed = linked.client.stream("Export", b"")
        await asyncio.sleep(0.5)  # nobody reads
        # The core made the window, and the one item it was about to send.
        assert linked.methods.produced <= link.STREAM_WINDOW + 2
        ids = [pb.MemoryRecord.FromString(item).id async for item in streamed]
        assert ids == [f"m-{i}" for i in range(10 * link.STREAM_WINDOW)]
        assert streamed.status == Status.OK

    _linked(tmp_path, pool, body)


def test_the_serving_state_reaches_the_front_and_stopping_is_for_good(
        tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        linked.server.set_state(State.SERVING)
        linked.server.set_state(State.STOPPING)
        linked.server.set_state(State.SERVING)  # too late: stopping is for good
        await asyncio.sleep(0.1)
        assert linked.states == [State.NOT_SERVING, State.SERVING, State.STOPPING]

    _linked(tmp_path, pool, body)


HOSTILE = {
    "no preface": b"GET / HTTP/1.1\r\n\r\n",
    "a length of 2 GiB": link.PREFACE + (2**31).to_bytes(4, "big") + b"\1\0\0\0\1",
    "a length under a frame's head": link.PREFACE + b"\0\0\0\1\1",
    "a kind the core does not receive": link.PREFACE + link.frame(Kind.ITEM, 1, b"x"),
    "a name past its frame": link.PREFACE + link.frame(Kind.CALL, 1, b"\xffGet"),
    "call number 0": link.PREFACE + link.call_frame(0, "Get", b""),
    "a MORE without its count": link.PREFACE + link.frame(Kind.MORE, 1, b"\1"),
}


def test_hostile_bytes_on_the_link_are_refused_and_the_core_serves_on(
        tmp_path: Path, pool: Any) -> None:
    def hang_up_after(data: bytes, path: Path) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.settimeout(5)
            peer.connect(str(path))
            peer.sendall(data)
            received = b""
            while chunk := peer.recv(65536):  # EOF: the core hung up
                received += chunk
            return received

    async def body(linked: _Linked) -> None:
        loop = asyncio.get_running_loop()
        for what, data in HOSTILE.items():
            started = time.monotonic()
            received = await loop.run_in_executor(None, hang_up_after, data, linked.path)
            # The core said its state when the peer connected, and nothing more.
            assert received == link.state_frame(State.NOT_SERVING), what
            assert time.monotonic() - started < 2.0, what
        status, _ = await linked.client.call("Get", _get("still served"))
        assert status == Status.OK

    _linked(tmp_path, pool, body)


def test_a_call_number_in_use_breaks_the_link(tmp_path: Path, pool: Any) -> None:
    async def body(linked: _Linked) -> None:
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_unix_connection(str(linked.path))
        writer.write(link.PREFACE + link.call_frame(5, "Events", b"")
                     + link.call_frame(5, "Events", b""))
        received = await asyncio.wait_for(reader.read(), 5)  # to EOF
        assert received.startswith(link.state_frame(State.NOT_SERVING))
        writer.close()
        await loop.run_in_executor(None, linked.methods.events_closed.wait, 5)
        assert linked.methods.events_closed.is_set(), "the dropped link's stream ran on"

    _linked(tmp_path, pool, body)


# -- the real front, before a core of the test's own ----------------------------------


class _Core:
    """The core's end of the link on a loop thread of its own, and the real
    front process started on it, as `Endpoint` starts it."""

    def __init__(self, tmp_path: Path) -> None:
        self.methods = _Methods()
        self.pool = ThreadPoolExecutor(max_workers=8)
        self.server = LinkServer(self.methods.dispatch(self.pool))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        (tmp_path / "inner").mkdir(mode=0o700)
        self.public = tmp_path / "front-public.sock"
        link_path = tmp_path / "inner" / "link.sock"
        self.on_loop(self.server.start(link_path))
        self.front = subprocess.Popen(
            [sys.executable, "-m", "memvaultd.serve.front", "--public", str(self.public),
             "--inner", str(tmp_path / "inner" / "front.sock"), "--link", str(link_path),
             "--grace", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.front.stdout is not None
        assert self.front.stdout.readline() == link.READY

    def on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def set_state(self, state: State) -> None:
        self.loop.call_soon_threadsafe(self.server.set_state, state)

    def close(self) -> None:
        if self.front.poll() is None:
            self.front.kill()
        self.front.wait(10)
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.pool.shutdown(wait=False)


@pytest.fixture
def core(tmp_path: Path) -> Iterator[_Core]:
    core = _Core(tmp_path)
    yield core
    core.close()


def _status(channel: grpc.Channel, service: str = "memvault.v1.Memory") -> str:
    reply = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=5)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def _until(condition: Callable[[], bool], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_fronts_health_follows_the_cores_state_check_and_watch(core: _Core) -> None:
    with grpc.insecure_channel(f"unix://{core.public}") as channel:
        assert _status(channel) == "NOT_SERVING" and _status(channel, "") == "NOT_SERVING"
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service="memvault.v1.Memory"), timeout=20)
        statuses = (health_pb2.HealthCheckResponse.ServingStatus.Name(r.status) for r in watch)
        assert next(statuses) == "NOT_SERVING"
        core.set_state(State.SERVING)
        assert next(statuses) == "SERVING"
        assert _status(channel) == "SERVING" and _status(channel, "") == "SERVING"
        core.set_state(State.STOPPING)
        assert next(statuses) == "NOT_SERVING"
        assert _status(channel) == "NOT_SERVING"
        core.set_state(State.SERVING)  # ignored: stopping is for good
        time.sleep(0.1)
        assert _status(channel) == "NOT_SERVING"
        watch.cancel()


def test_a_sigterm_to_the_front_turns_its_health_not_serving(core: _Core) -> None:
    core.set_state(State.SERVING)
    with grpc.insecure_channel(f"unix://{core.public}") as channel:
        assert _until(lambda: _status(channel) == "SERVING")
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=20)
        statuses = (health_pb2.HealthCheckResponse.ServingStatus.Name(r.status) for r in watch)
        assert next(statuses) == "SERVING"
        core.front.send_signal(signal.SIGTERM)
        assert next(statuses) == "NOT_SERVING"
    assert core.front.wait(10) == 0


def test_streams_through_the_front_and_a_client_that_goes_away(core: _Core) -> None:
    with grpc.insecure_channel(f"unix://{core.public}") as channel:
        stub = pb_grpc.MemoryStub(channel)  # type: ignore[no-untyped-call]
        records = list(stub.Export(pb.ExportRequest(), timeout=10))
        assert [r.id for r in records] == [f"m-{i}" for i in range(10)]
        with pytest.raises(grpc.RpcError) as failed:
            list(stub.Export(pb.ExportRequest(include_vectors=True), timeout=10))
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert failed.value.details() == "vectors: not today"
        events = stub.Events(pb.EventsRequest(), timeout=20)
        assert next(events).type == "tick"
        started = time.monotonic()
        events.cancel()  # the client goes away: the front cancels, the core's stream ends
        assert core.methods.events_closed.wait(5)
        assert time.monotonic() - started < 1.5
        reply = stub.Get(pb.GetRequest(id="after"), timeout=10)
        assert reply.memory.id == "after"
        with pytest.raises(grpc.RpcError) as refused:
            stub.Get(pb.GetRequest(id="refuse"), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_deadline_passing_mid_stream_ends_the_cores_stream(core: _Core) -> None:
    with grpc.insecure_channel(f"unix://{core.public}") as channel:
        stub = pb_grpc.MemoryStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as caught:
            for _ in stub.Events(pb.EventsRequest(), timeout=0.5):
                pass
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert core.methods.events_closed.wait(5)


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


def test_only_the_front_loads_grpc(daemon: DaemonProcess) -> None:
    # grpc's core is a native library: a process that imported grpc has it
    # mapped. The core has served streams, health and unary calls by now.
    with Client(socket=daemon.socket, timeout=30) as client:
        client.remember("served without grpc in the core", topic="front.grpc")
        assert "served without grpc in the core" in [m.text for m in client.export()]
    assert daemon.proc is not None and daemon.health() == "SERVING"

    def maps(pid: int) -> str:
        return Path(f"/proc/{pid}/maps").read_text()

    assert "cygrpc" in maps(daemon.front_pid())
    assert "cygrpc" not in maps(daemon.proc.pid)
