"""memvault.Client against a fake daemon: a real gRPC server on a temporary unix socket.

No model, no index: `FakeMemory` answers from a dict and records every request,
so these tests prove the client's own work — field mapping both ways, payload
JSON, error translation, connection failures, event streams. `test_cli_unit`
reuses `FakeMemory` through `running_fake`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

import memvault
from memvault import Client, Hit, Memory
from memvault.errors import (
    IntegrityError,
    InvalidArgument,
    Locked,
    MemvaultError,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from memvault.v1 import memory_pb2 as pb
from memvault.v1 import memory_pb2_grpc as pb_grpc

FULL_RECORD = pb.MemoryRecord(
    id="m-1",
    text="prefers pytest — über alles",
    type="semantic",
    topic_key="user.preferences.testing",
    payload_json='{"lang": "python", "n": 3, "nested": {"ok": true}}',
    entity="user",
    tags=["testing", "python"],
    category="development",
    importance=0.95,
    session_id="s-1",
    source="claude-code",
    tier="long_term",
    created_at=1700000000.25,
    last_reinforced_at=1700000100.5,
    reinforce_count=2,
    access_count=7,
    expires_at=1800000000.0,
    superseded_by="m-3",
    supersedes="m-0",
    vector=[0.25, -0.5, 1.0],
)


@dataclass
class FakeMemory(pb_grpc.MemoryServicer):  # type: ignore[misc]
    """Answers like the daemon would, from canned data; records what it was sent."""

    requests: list[Any] = field(default_factory=list)
    record: pb.MemoryRecord = field(default_factory=lambda: FULL_RECORD)
    model_state: str = "ready"
    events: list[pb.Event] = field(default_factory=list)
    stream_cancelled: threading.Event = field(default_factory=threading.Event)
    status_calls: int = 0

    def Remember(self, request: pb.RememberRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        text = request.memory.text
        if text.startswith("invalid"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "text: must not be 'invalid'")
        if text.startswith("locked"):
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "vault is locked")
        if text.startswith("slow"):
            time.sleep(1.0)
        return pb.RememberReply(id="m-new", txid=41, reinforced=text.startswith("again"))

    def RememberBatch(self, request: pb.RememberBatchRequest, context: Any) -> Any:
        self.requests.append(request)
        results = [
            pb.RememberReply(id=f"m-{i}", txid=100 + i) for i, _ in enumerate(request.memories)
        ]
        return pb.RememberBatchReply(results=results, txid=100 + len(results) - 1)

    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        if request.filter_json.startswith("{bad"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "filter_json: does not parse")
        if request.query == "nothing":
            return pb.RecallReply()
        hit = pb.Hit(memory=self.record, score=0.5, similarity=0.8, decay=0.5, reinforcement=1.25)
        return pb.RecallReply(hits=[hit])

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        if request.id != self.record.id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no memory with id {request.id}")
        record = pb.MemoryRecord()
        record.CopyFrom(self.record)
        if not request.include_vector:
            del record.vector[:]
        return record

    def Forget(self, request: pb.ForgetRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        if request.id == "corrupt":
            context.abort(grpc.StatusCode.DATA_LOSS, "segment 7 failed to authenticate")
        if request.id == "full":
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full")
        if request.id != self.record.id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no memory with id {request.id}")
        return pb.ForgetReply(txid=42)

    def Status(self, request: pb.StatusRequest, context: Any) -> Any:
        self.status_calls += 1
        state = self.model_state
        if state.startswith("loading-until-"):  # "ready" from the Nth call on
            state = "ready" if self.status_calls >= int(state.rsplit("-", 1)[1]) else "loading"
        return pb.StatusReply(
            version="0.1.0",
            model_state=state,
            model="all-MiniLM-L6-v2",
            dimension=384,
            memory_count=12,
            applied_txid=42,
            socket="/run/memvault.sock",
            data_dir="/data",
            key_storage="keyring",
            cache_hits=3,
            cache_misses=1,
            cache_size=256,
            uptime_s=3725.5,
            vault_id="v-1",
        )

    def Events(self, request: pb.EventsRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        # Called when the RPC ends for any reason, the client's cancel included.
        context.add_callback(self.stream_cancelled.set)
        for event in self.events:
            if not request.types or event.type in request.types:
                yield event
        # Then stay open, like the daemon, until the client goes away.
        while context.is_active():
            time.sleep(0.02)


@dataclass
class FakeDaemon:
    servicer: FakeMemory
    socket: Path


@contextmanager
def short_temp_dir() -> Iterator[Path]:
    # A unix socket path must fit in 108 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="mv-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def running_fake(directory: Path) -> Iterator[FakeDaemon]:
    """A FakeMemory served on `directory`/memvault.sock until the block ends."""
    servicer = FakeMemory()
    socket = directory / "memvault.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_MemoryServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        yield FakeDaemon(servicer, socket)
    finally:
        server.stop(grace=None)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with short_temp_dir() as path:
        yield path


@pytest.fixture
def fake_daemon(short_dir: Path) -> Iterator[FakeDaemon]:
    with running_fake(short_dir) as daemon:
        yield daemon


@pytest.fixture
def client(fake_daemon: FakeDaemon) -> Iterator[Client]:
    with Client(fake_daemon.socket, timeout=5.0) as c:
        yield c


# -- requests: keywords -> wire ---------------------------------------------------


def test_remember_maps_every_keyword(client: Client, fake_daemon: FakeDaemon) -> None:
    result = client.remember(
        "prefers pytest",
        type="semantic",
        topic="user.preferences.testing",
        payload={"lang": "python", "ü": [1, 2]},
        entity="user",
        tags=["testing", "python"],
        category="development",
        importance=0.9,
        session="s-1",
        source="claude-code",
        tier="working",
        expires_at=1800000000.5,
        supersedes="m-0",
        vector=[0.5, -0.25],
    )
    assert result == memvault.RememberResult(id="m-new", txid=41, reinforced=False)
    sent = fake_daemon.servicer.requests[-1].memory
    assert sent.text == "prefers pytest"
    assert sent.type == "semantic"
    assert sent.topic_key == "user.preferences.testing"
    assert sent.entity == "user"
    assert list(sent.tags) == ["testing", "python"]
    assert sent.category == "development"
    assert sent.HasField("importance") and sent.importance == pytest.approx(0.9)
    assert sent.session_id == "s-1"
    assert sent.source == "claude-code"
    assert sent.tier == "working"
    assert sent.expires_at == 1800000000.5
    assert sent.supersedes == "m-0"
    assert list(sent.vector) == [0.5, -0.25]

    assert json.loads(sent.payload_json) == {"lang": "python", "ü": [1, 2]}


def test_remember_defaults_leave_fields_unset(client: Client, fake_daemon: FakeDaemon) -> None:
    client.remember("plain")
    sent = fake_daemon.servicer.requests[-1].memory
    assert not sent.HasField("importance")  # the daemon's default (0.5) applies
    assert sent.payload_json == ""
    assert list(sent.tags) == [] and list(sent.vector) == []


def test_remember_reports_reinforcement(client: Client) -> None:
    assert client.remember("again, prefers pytest").reinforced is True


def test_a_lone_tag_string_is_one_tag(client: Client, fake_daemon: FakeDaemon) -> None:
    client.remember("x", tags="testing")
    assert list(fake_daemon.servicer.requests[-1].memory.tags) == ["testing"]


def test_unserialisable_payload_is_invalid_and_not_sent(
    client: Client, fake_daemon: FakeDaemon
) -> None:
    with pytest.raises(InvalidArgument, match="payload"):
        client.remember("x", payload={"when": object()})
    assert fake_daemon.servicer.requests == []


def test_remember_batch(client: Client, fake_daemon: FakeDaemon) -> None:
    results = client.remember_batch(
        [
            {"text": "a", "topic": "t.a", "tags": ["x"], "importance": 0.2},
            {"text": "b", "topic_key": "t.b", "session_id": "s", "payload": {"k": 1}},
        ]
    )
    assert [(r.id, r.txid) for r in results] == [("m-0", 100), ("m-1", 101)]
    sent = fake_daemon.servicer.requests[-1].memories
    assert [m.topic_key for m in sent] == ["t.a", "t.b"]
    assert sent[0].importance == pytest.approx(0.2) and not sent[1].HasField("importance")
    assert sent[1].session_id == "s" and sent[1].payload_json == '{"k": 1}'


def test_remember_batch_rejects_unknown_keys_before_sending(
    client: Client, fake_daemon: FakeDaemon
) -> None:
    with pytest.raises(InvalidArgument, match=r"memories\[1\].*colour"):
        client.remember_batch([{"text": "a"}, {"text": "b", "colour": "red"}])
    with pytest.raises(InvalidArgument, match="text"):
        client.remember_batch([{"topic": "t"}])
    assert fake_daemon.servicer.requests == []


def test_recall_maps_request(client: Client, fake_daemon: FakeDaemon) -> None:
    flt = {"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}
    client.recall("tests?", top_k=5, min_score=0.25, filter=flt, include_vectors=True)
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.query, sent.top_k, sent.include_vectors) == ("tests?", 5, True)
    assert sent.HasField("min_score") and sent.min_score == 0.25

    assert json.loads(sent.filter_json) == flt


def test_recall_passes_a_string_filter_verbatim(client: Client, fake_daemon: FakeDaemon) -> None:
    text = '{"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}'
    client.recall("q", filter=text, query_vector=[1.0, 0.0])
    sent = fake_daemon.servicer.requests[-1]
    assert sent.filter_json == text
    assert list(sent.query_vector) == [1.0, 0.0]
    assert not sent.HasField("min_score") and sent.top_k == 0


# -- replies: wire -> values ------------------------------------------------------


def _expected_memory(vector: tuple[float, ...]) -> Memory:
    return Memory(
        id="m-1",
        text="prefers pytest — über alles",
        type="semantic",
        topic_key="user.preferences.testing",
        payload={"lang": "python", "n": 3, "nested": {"ok": True}},
        entity="user",
        tags=("testing", "python"),
        category="development",
        importance=0.95,
        session_id="s-1",
        source="claude-code",
        tier="long_term",
        created_at=1700000000.25,
        last_reinforced_at=1700000100.5,
        reinforce_count=2,
        access_count=7,
        expires_at=1800000000.0,
        superseded_by="m-3",
        supersedes="m-0",
        vector=vector,
    )


def test_get_maps_every_field(client: Client) -> None:
    assert client.get("m-1") == _expected_memory(())
    assert client.get("m-1", include_vector=True) == _expected_memory((0.25, -0.5, 1.0))
    assert client.get("m-1").pinned


def test_recall_maps_hits(client: Client) -> None:
    [hit] = client.recall("tests?")
    assert hit == Hit(_expected_memory((0.25, -0.5, 1.0)), 0.5, 0.8, 0.5, 1.25)


def test_recall_empty_is_empty(client: Client) -> None:
    assert client.recall("nothing") == []


def test_empty_payload_decodes_to_empty_dict(client: Client, fake_daemon: FakeDaemon) -> None:
    fake_daemon.servicer.record = pb.MemoryRecord(id="m-1", text="t", payload_json="")
    assert client.get("m-1").payload == {}
    fake_daemon.servicer.record = pb.MemoryRecord(id="m-1", text="t", payload_json="{}")
    assert client.get("m-1").payload == {}


def test_payload_round_trip(client: Client, fake_daemon: FakeDaemon) -> None:
    payload = {"s": "é ✓", "n": 1.5, "l": [1, None, True], "o": {"deep": {"x": []}}}
    client.remember("x", payload=payload)
    stored = fake_daemon.servicer.requests[-1].memory.payload_json
    fake_daemon.servicer.record = pb.MemoryRecord(id="m-1", text="x", payload_json=stored)
    assert client.get("m-1").payload == payload


def test_hit_to_dict_is_flat(client: Client) -> None:
    [hit] = client.recall("tests?")
    out = hit.to_dict()
    assert list(out)[:8] == [
        "id", "text", "score", "type", "topic_key", "payload", "tags", "category",
    ]  # fmt: skip
    assert list(out)[-3:] == ["similarity", "decay", "reinforcement"]
    assert out["payload"] == {"lang": "python", "n": 3, "nested": {"ok": True}}
    assert out["tags"] == ["testing", "python"]
    assert out["score"] == 0.5 and out["reinforce_count"] == 2
    assert out["vector"] == [0.25, -0.5, 1.0]
    assert "vector" not in client.get("m-1").to_dict()


def test_forget_and_status(client: Client) -> None:
    assert client.forget("m-1") == 42
    status = client.status()
    assert status.ready and status.model == "all-MiniLM-L6-v2" and status.dimension == 384
    assert (status.memory_count, status.applied_txid, status.cache_size) == (12, 42, 256)
    assert status.cache_hit_rate == 0.75
    assert status.to_dict()["cache_hit_rate"] == 0.75
    assert status.vault_id == "v-1" and status.key_storage == "keyring"


# -- errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.remember("invalid text"), InvalidArgument, "text: must not be 'invalid'"),
        (lambda c: c.remember("locked"), Locked, "vault is locked"),
        (lambda c: c.get("m-404"), NotFound, "no memory with id m-404"),
        (lambda c: c.forget("m-404"), NotFound, "no memory with id m-404"),
        (lambda c: c.forget("corrupt"), IntegrityError, "segment 7"),
        (lambda c: c.forget("full"), ResourceExhausted, "disk full"),
        (lambda c: c.recall("q", filter="{bad"), InvalidArgument, "filter_json: does not parse"),
    ],
)
def test_status_codes_become_memvault_errors(
    client: Client, call: Any, error: type[MemvaultError], message: str
) -> None:
    with pytest.raises(error) as info:
        call(client)
    assert type(info.value) is error
    assert str(info.value) == message if error is not IntegrityError else message in str(info.value)


def test_no_socket_is_unavailable_at_once(short_dir: Path) -> None:
    socket = short_dir / "missing.sock"
    started = time.monotonic()
    with Client(socket) as c, pytest.raises(Unavailable) as info:
        c.status()
    assert time.monotonic() - started < 2.0
    assert str(info.value) == (
        f"memvault daemon is not running (no socket at {socket}). "
        "Start it with `memvaultd` or ./scripts/run"
    )


def test_refusing_socket_is_unavailable_at_once(short_dir: Path) -> None:
    # A socket file nobody listens on: what a crashed daemon leaves behind.
    import socket as sockets

    path = short_dir / "stale.sock"
    listener = sockets.socket(sockets.AF_UNIX)
    listener.bind(str(path))
    listener.close()
    started = time.monotonic()
    with Client(path) as c, pytest.raises(Unavailable, match=r"not running.*memvaultd"):
        c.status()
    assert time.monotonic() - started < 2.0


def test_client_finds_socket_from_home(short_dir: Path) -> None:
    c = Client(home=str(short_dir))
    assert c.socket == short_dir / "run" / "memvault.sock"
    c.close()


def test_deadline_becomes_unavailable(fake_daemon: FakeDaemon) -> None:
    with Client(fake_daemon.socket, timeout=0.2) as c, pytest.raises(Unavailable, match=r"0\.2 s"):
        c.remember("slow")


def test_daemon_stopping_later_is_unavailable(short_dir: Path) -> None:
    socket = short_dir / "memvault.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_MemoryServicer_to_server(FakeMemory(), server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    with Client(socket, timeout=2.0) as c:
        assert c.status().ready
        server.stop(grace=None).wait()
        started = time.monotonic()
        with pytest.raises(Unavailable, match="memvaultd"):
            c.status()
        assert time.monotonic() - started < 2.5


# -- wait_ready -------------------------------------------------------------------


def test_wait_ready_polls_until_ready(client: Client, fake_daemon: FakeDaemon) -> None:
    fake_daemon.servicer.model_state = "loading-until-3"
    client.wait_ready(timeout=5)
    assert fake_daemon.servicer.status_calls == 3


def test_wait_ready_times_out_with_a_hint(client: Client, fake_daemon: FakeDaemon) -> None:
    fake_daemon.servicer.model_state = "loading"
    with pytest.raises(Unavailable, match=r"not ready after 0\.3 s.*memvaultd"):
        client.wait_ready(timeout=0.3)


def test_wait_ready_stops_at_a_failed_model(client: Client, fake_daemon: FakeDaemon) -> None:
    fake_daemon.servicer.model_state = "failed"
    started = time.monotonic()
    with pytest.raises(Unavailable, match="could not load its model"):
        client.wait_ready(timeout=10)
    assert time.monotonic() - started < 1.0


def test_wait_ready_waits_for_a_daemon_that_starts_late(short_dir: Path) -> None:
    socket = short_dir / "memvault.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_MemoryServicer_to_server(FakeMemory(), server)

    def start_later() -> None:
        time.sleep(0.4)
        server.add_insecure_port(f"unix://{socket}")
        server.start()

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        with Client(socket) as c:
            c.wait_ready(timeout=5)
            assert c.status().ready
    finally:
        starter.join()
        server.stop(grace=None)


def test_wait_ready_without_daemon(short_dir: Path) -> None:
    with Client(short_dir / "none.sock") as c, pytest.raises(Unavailable, match="no socket"):
        c.wait_ready(timeout=0.2)


# -- events -----------------------------------------------------------------------


def test_events_stream_and_close(client: Client, fake_daemon: FakeDaemon) -> None:
    fake_daemon.servicer.events = [
        pb.Event(type="miss", query="tests?", at=1.5),
        pb.Event(type="remember", id="m-1", at=2.0),
        pb.Event(type="hit", query="tests?", at=3.0),
    ]
    with client.events(["hit", "miss"]) as stream:
        first = next(stream)
        second = next(stream)
    assert first == memvault.Event(type="miss", query="tests?", id="", at=1.5)
    assert second.type == "hit" and second.to_dict()["query"] == "tests?"
    assert list(fake_daemon.servicer.requests[-1].types) == ["hit", "miss"]
    assert list(stream) == []  # a closed stream ends, it does not raise
    assert fake_daemon.servicer.stream_cancelled.wait(2.0)


def test_events_cancel_from_another_thread(client: Client, fake_daemon: FakeDaemon) -> None:
    stream = client.events()
    threading.Timer(0.2, stream.cancel).start()
    started = time.monotonic()
    assert list(stream) == []
    assert time.monotonic() - started < 2.0


def test_events_end_when_client_closes(fake_daemon: FakeDaemon) -> None:
    c = Client(fake_daemon.socket)
    stream = c.events()
    threading.Timer(0.2, c.close).start()
    assert list(stream) == []


def test_events_without_daemon(short_dir: Path) -> None:
    with Client(short_dir / "none.sock") as c, pytest.raises(Unavailable):
        c.events()


# -- the package ------------------------------------------------------------------


def test_public_surface() -> None:
    assert memvault.__version__ == "0.1.0"
    assert set(memvault.__all__) >= {"Client", "Hit", "Memory", "MemvaultError", "NotFound"}
    for name in memvault.__all__:
        assert hasattr(memvault, name), name


def test_light_install_imports_nothing_heavy() -> None:
    heavy = ["memvaultd", "torch", "numpy", "lancedb", "sentence_transformers"]
    code = (
        "import sys, memvault, memvault.cli, memvault.output\n"
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(root / "client")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
