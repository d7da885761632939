"""memvault.Client against a fake daemon: a real gRPC server on a temporary unix socket.

No model, no index: `FakeMemory` answers from a dict and records every request,
so these tests prove the client's own work — field mapping both ways, payload
JSON, error translation, connection failures, event streams. `test_cli_unit`
reuses `FakeMemory` through `running_fake`.
"""

from __future__ import annotations

import contextlib
import json
import os
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
from memvault_base.errors import (
    IntegrityError,
    InvalidArgument,
    Locked,
    MemvaultError,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from memvault_base.rpc import ANSWERED
from memvault_base.v1 import memory_pb2 as pb
from memvault_base.v1 import memory_pb2_grpc as pb_grpc

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
    last_accessed_at=1700000200.75,
)
# What FULL_RECORD superseded: the first link of its chain.
# When the fake says its memory went to the trash, and will be purged.
TRASHED_AT = 1_700_000_000.0
PURGE_AT = TRASHED_AT + 30 * 86_400

OLDER_RECORD = pb.MemoryRecord(
    id="m-0", text="prefers unittest", type="semantic", payload_json="{}", superseded_by="m-1",
    created_at=1.5,
)  # fmt: skip
FULL_BREAKDOWN = pb.ScoreBreakdown(
    similarity=0.8, keyword=0.6, topic=1.0, fusion=0.7, decay=0.5, reinforcement=1.25,
    importance=1.1,
)  # fmt: skip
TURN_HIT = pb.TurnHit(
    turn=pb.Turn(
        id="t-1", session_id="s-1", speaker="user", text="I use pytest", at=1700000300.5,
        payload_json='{"turn": 4}',
    ),
    score=0.42,
    channels=["keyword"],
)  # fmt: skip


REMOTE_DOWN = ("the sync remote grpc://127.0.0.1:7443 is unreachable: memvault-server: "
               "failed to connect to all addresses; last error: UNKNOWN: "
               "ipv4:127.0.0.1:7443: Connection refused")


@dataclass
class FakeMemory(pb_grpc.MemoryServicer):  # type: ignore[misc]
    """Answers like the daemon would, from canned data; records what it was sent."""

    requests: list[Any] = field(default_factory=list)
    record: pb.MemoryRecord = field(default_factory=lambda: FULL_RECORD)
    model_state: str = "ready"
    events: list[pb.Event] = field(default_factory=list)
    stream_cancelled: threading.Event = field(default_factory=threading.Event)
    status_calls: int = 0
    # What Export streams, and what Import received (one list per call).
    store: list[pb.MemoryRecord] = field(default_factory=lambda: [OLDER_RECORD, FULL_RECORD])
    imported: list[list[pb.MemoryRecord]] = field(default_factory=list)

    def Remember(self, request: pb.RememberRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        text = request.memory.text
        if text.startswith("invalid"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "text: must not be 'invalid'")
        if text.startswith("locked"):
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "vault is locked")
        if text.startswith("slow"):
            time.sleep(1.0)
        if text.startswith("remote down"):  # a sync remote's failure, in the transport's words
            if text.endswith("answered"):
                context.set_trailing_metadata((ANSWERED,))
            context.abort(grpc.StatusCode.UNAVAILABLE, REMOTE_DOWN)
        if text.startswith("old daemon, again"):  # a daemon that predates `outcome`
            return pb.RememberReply(id="m-1", txid=41, reinforced=True)
        if text.startswith("again"):
            return pb.RememberReply(id="m-1", txid=41, reinforced=True, outcome="reinforced",
                                    target_id="m-1")
        if text.startswith("changed"):
            return pb.RememberReply(id="m-new", txid=41, outcome="superseded", target_id="m-1",
                                    reason="words pytest -> vitest")
        return pb.RememberReply(id="m-new", txid=41, outcome="added")

    def RememberBatch(self, request: pb.RememberBatchRequest, context: Any) -> Any:
        self.requests.append(request)
        results = [
            pb.RememberReply(id=f"m-{i}", txid=100 + i) for i, _ in enumerate(request.memories)
        ]
        return pb.RememberBatchReply(results=results, txid=100 + len(results) - 1)

    def ResolveId(self, request: pb.ResolveIdRequest, context: grpc.ServicerContext) -> Any:
        # Not recorded: the CLI asks it before each call that takes an id,
        # and the tests look at that call. Every id names itself here.
        return pb.ResolveIdReply(id=request.id)

    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        if request.filter_json.startswith("{bad"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "filter_json: does not parse")
        if request.query == "nothing":
            return pb.RecallReply(turns=[TURN_HIT] if request.include_turns else [])
        hit = pb.Hit(
            memory=self.record, score=0.5, similarity=0.8, decay=0.5, reinforcement=1.25,
            channels=["vector", "keyword"], match_reasons=["keyword: pytest"],
            breakdown=FULL_BREAKDOWN,
        )  # fmt: skip
        return pb.RecallReply(
            hits=[hit],
            has_more=request.query == "more",
            turns=[TURN_HIT] if request.include_turns else [],
        )

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        if request.id not in (self.record.id, OLDER_RECORD.id):
            context.abort(grpc.StatusCode.NOT_FOUND, f"no memory with id {request.id}")
        record = pb.MemoryRecord()
        record.CopyFrom(self.record if request.id == self.record.id else OLDER_RECORD)
        if not request.include_vector:
            del record.vector[:]
        chain = [pb.MemoryRecord(), pb.MemoryRecord()]
        chain[0].CopyFrom(OLDER_RECORD)
        chain[1].CopyFrom(self.record)
        for link in chain:
            del link.vector[:]  # the daemon sends the chain without vectors
        return pb.GetReply(memory=record, chain=chain)

    def Forget(self, request: pb.ForgetRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        if request.id == "corrupt":
            context.abort(grpc.StatusCode.DATA_LOSS, "segment 7 failed to authenticate")
        if request.id == "full":
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full")
        if request.filter_json:
            ids = ["m-1", "m-2"] if request.filter_json != '{"tier": "none"}' else []
            trashed = ids and not (request.dry_run or request.purge)
            return pb.ForgetReply(txid=0 if request.dry_run else 47, ids=ids,
                                  purge_at=PURGE_AT if trashed else 0.0)
        if request.id != self.record.id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no memory with id {request.id}")
        return pb.ForgetReply(txid=42, ids=[request.id],
                              purge_at=0.0 if request.purge else PURGE_AT)

    def ListTrash(self, request: pb.ListTrashRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        return pb.ListTrashReply(memories=[pb.TrashedMemory(
            memory=self.record, trashed_at=TRASHED_AT, trashed_by="mcp", purge_at=PURGE_AT)])

    def RestoreFromTrash(self, request: pb.RestoreFromTrashRequest,
                         context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        for memory_id in request.ids:
            if memory_id != self.record.id:
                context.abort(grpc.StatusCode.NOT_FOUND,
                              f"id: no memory {memory_id!r} in the trash")
        return pb.RestoreFromTrashReply(txid=49, memories=[self.record])

    def EmptyTrash(self, request: pb.EmptyTrashRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        return pb.EmptyTrashReply(txid=50, ids=[self.record.id])

    def _known(self, id: str, context: grpc.ServicerContext) -> None:
        if id not in (self.record.id, OLDER_RECORD.id):
            context.abort(grpc.StatusCode.NOT_FOUND, f"no memory with id {id}")

    def Update(self, request: pb.UpdateRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        self._known(request.id, context)
        return pb.UpdateReply(txid=43, memory=self.record)

    def Supersede(self, request: pb.SupersedeRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        self._known(request.id, context)
        return pb.RememberReply(id="m-2", txid=44, outcome="superseded", target_id=request.id)

    def Reinforce(self, request: pb.ReinforceRequest, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        self._known(request.id, context)
        return pb.ReinforceReply(txid=45, reinforce_count=3)

    def ListTopics(self, request: pb.ListRequest, context: Any) -> Any:
        self.requests.append(request)
        return pb.ListReply(
            items=[
                pb.Facet(name="user.preferences.testing", count=2, last_activity=1700000100.5),
                pb.Facet(name="ops.deploy", count=1, last_activity=1600000000.0),
            ]
        )

    def ListEntities(self, request: pb.ListRequest, context: Any) -> Any:
        self.requests.append(request)
        return pb.ListReply(items=[pb.Facet(name="user", count=3, last_activity=1700000000.0)])

    def AppendTurns(self, request: pb.AppendTurnsRequest, context: Any) -> Any:
        self.requests.append(request)
        return pb.AppendTurnsReply(ids=[f"t-{i}" for i in range(len(request.turns))], txid=46)

    def Export(self, request: pb.ExportRequest, context: Any) -> Any:
        self.requests.append(request)
        for stored in self.store:
            record = pb.MemoryRecord()
            record.CopyFrom(stored)
            if not request.include_vectors:
                del record.vector[:]
            yield record

    def Import(self, request: pb.ImportRequest, context: Any) -> Any:
        self.requests.append(request)
        self.imported.append(list(request.memories))
        known = {r.id for r in self.store}
        reinforced = sum(1 for r in request.memories if r.id in known)
        return pb.ImportReply(
            added=len(request.memories) - reinforced, reinforced=reinforced, txid=48
        )

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
    assert result == memvault.RememberResult(id="m-new", txid=41, outcome="added")
    assert not result.reinforced and not result.superseded
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
    result = client.remember("again, prefers pytest")
    assert result.reinforced is True
    assert (result.outcome, result.id, result.target) == ("reinforced", "m-1", "m-1")


def test_remember_reports_supersession(client: Client) -> None:
    result = client.remember("changed: prefers vitest")
    assert result.superseded and not result.reinforced
    assert (result.id, result.target, result.reason) == ("m-new", "m-1", "words pytest -> vitest")
    assert result.to_dict() == {"id": "m-new", "txid": 41, "outcome": "superseded",
                                "target": "m-1", "reason": "words pytest -> vitest",
                                "reinforced": False}


def test_a_daemon_without_outcomes_still_reports_reinforcement(client: Client) -> None:
    result = client.remember("old daemon, again: prefers pytest")
    assert (result.outcome, result.target, result.reinforced) == ("reinforced", "m-1", True)


def test_remember_new_never_merges(client: Client, fake_daemon: FakeDaemon) -> None:
    client.remember("prefers pytest", new=True)
    assert fake_daemon.servicer.requests[-1].memory.never_merge is True
    client.remember_batch([{"text": "prefers pytest", "new": True}, {"text": "x"}])
    sent = fake_daemon.servicer.requests[-1].memories
    assert [m.never_merge for m in sent] == [True, False]
    client.remember("prefers pytest")
    assert fake_daemon.servicer.requests[-1].memory.never_merge is False


def test_supersede_sends_only_what_is_given_and_what_is_cleared(
    client: Client, fake_daemon: FakeDaemon
) -> None:
    client.supersede("m-1", "prefers vitest")
    sent = fake_daemon.servicer.requests[-1]
    assert sent.memory.text == "prefers vitest" and list(sent.cleared) == []
    assert (sent.memory.topic_key, sent.memory.category, list(sent.memory.tags)) == ("", "", [])
    assert not sent.memory.HasField("importance")  # the old memory's
    client.supersede("m-1", "prefers vitest", topic="t.x", tags=["a"], importance=0.3)
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.memory.topic_key, list(sent.memory.tags)) == ("t.x", ["a"])
    assert sent.memory.importance == pytest.approx(0.3) and list(sent.cleared) == []
    client.supersede("m-1", "prefers vitest", topic="", tags=[], payload={}, category="x")
    sent = fake_daemon.servicer.requests[-1]
    assert sorted(sent.cleared) == ["payload_json", "tags", "topic_key"]
    assert sent.memory.category == "x"


def test_recall_exact_topic_adds_the_equality(client: Client, fake_daemon: FakeDaemon) -> None:
    client.recall("q", topic="work")
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.topic_key, sent.filter_json) == ("work", "")
    client.recall("q", topic="work", exact_topic=True)
    sent = fake_daemon.servicer.requests[-1]
    assert sent.topic_key == "work" and json.loads(sent.filter_json) == {"topic_key": "work"}
    client.recall("q", topic="work", exact_topic=True, filter={"category": "x"})
    assert json.loads(fake_daemon.servicer.requests[-1].filter_json) == {
        "AND": [{"category": "x"}, {"topic_key": "work"}]}


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
        last_accessed_at=1700000200.75,
    )


EXPECTED_BREAKDOWN = memvault.ScoreBreakdown(
    similarity=0.8, keyword=0.6, topic=1.0, fusion=0.7, decay=0.5, reinforcement=1.25,
    importance=1.1,
)  # fmt: skip


def test_get_maps_every_field(client: Client) -> None:
    assert client.get("m-1") == _expected_memory(())
    assert client.get("m-1", include_vector=True) == _expected_memory((0.25, -0.5, 1.0))
    assert client.get("m-1").pinned


def test_recall_maps_hits(client: Client) -> None:
    [hit] = client.recall("tests?")
    assert hit == Hit(
        _expected_memory((0.25, -0.5, 1.0)),
        0.5,
        0.8,
        0.5,
        1.25,
        channels=("vector", "keyword"),
        match_reasons=("keyword: pytest",),
        breakdown=EXPECTED_BREAKDOWN,
    )


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
    assert list(out)[-8:] == [
        "similarity", "decay", "reinforcement", "channels", "match_reasons", "breakdown",
        "heat", "band",
    ]  # fmt: skip
    assert out["channels"] == ["vector", "keyword"]
    assert out["match_reasons"] == ["keyword: pytest"]
    assert out["breakdown"] == {
        "similarity": 0.8, "keyword": 0.6, "topic": 1.0, "fusion": 0.7, "decay": 0.5,
        "reinforcement": 1.25, "importance": 1.1, "heat": 0.0,
    }  # fmt: skip
    assert out["last_accessed_at"] == 1700000200.75
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


# -- recall: the issue-3 options and reply ---------------------------------------------


def test_recall_maps_every_new_option(client: Client, fake_daemon: FakeDaemon) -> None:
    client.recall(
        "tests?",
        mode="keyword",
        types=["fact", "procedural"],
        topic="user.preferences",
        session="s-1",
        source="claude-code",
        tiers=["working", "archived"],
        include_superseded=True,
        max_tokens=200,
        offset=10,
        mark_accessed=False,
        min_txid=41,
        include_turns=True,
    )
    sent = fake_daemon.servicer.requests[-1]
    assert sent.mode == "keyword"
    assert list(sent.types) == ["fact", "procedural"]
    assert (sent.topic_key, sent.session_id, sent.source) == (
        "user.preferences",
        "s-1",
        "claude-code",
    )
    assert list(sent.tiers) == ["working", "archived"]
    assert sent.include_superseded and sent.include_turns
    assert (sent.max_tokens, sent.offset, sent.min_txid) == (200, 10, 41)
    assert sent.HasField("mark_accessed") and sent.mark_accessed is False


def test_recall_defaults_leave_new_options_unset(client: Client, fake_daemon: FakeDaemon) -> None:
    client.recall("q", types="fact", tiers="working")
    sent = fake_daemon.servicer.requests[-1]
    assert not sent.HasField("mark_accessed")  # the daemon's default: mark
    assert (sent.mode, sent.topic_key, sent.max_tokens, sent.offset, sent.min_txid) == (
        "",
        "",
        0,
        0,
        0,
    )
    assert not sent.include_turns and not sent.include_superseded
    assert list(sent.types) == ["fact"] and list(sent.tiers) == ["working"]  # lone strings


def test_recall_returns_hits_with_has_more_and_turns(client: Client) -> None:
    hits = client.recall("more", include_turns=True)
    assert isinstance(hits, memvault.Hits) and isinstance(hits, list)
    assert len(hits) == 1 and hits[0].memory.id == "m-1"
    assert hits.has_more is True
    assert hits.turns == [
        memvault.TurnHit(
            id="t-1",
            session_id="s-1",
            speaker="user",
            text="I use pytest",
            at=1700000300.5,
            payload={"turn": 4},
            score=0.42,
            channels=("keyword",),
        )
    ]
    out = hits.to_dict()
    assert out["has_more"] is True and out["hits"][0]["id"] == "m-1"
    assert out["turns"][0]["payload"] == {"turn": 4}
    assert out["turns"][0]["channels"] == ["keyword"]


def test_recall_without_more_or_turns(client: Client) -> None:
    hits = client.recall("tests?")
    assert hits.has_more is False and hits.turns == []
    empty = client.recall("nothing", include_turns=True)
    assert empty == [] and not empty.has_more and len(empty.turns) == 1


# -- lifecycle ------------------------------------------------------------------------


def test_history_is_the_chain_oldest_first(client: Client, fake_daemon: FakeDaemon) -> None:
    chain = client.history("m-1")
    assert [m.id for m in chain] == ["m-0", "m-1"]
    assert chain[0].superseded_by == "m-1" and chain[1] == _expected_memory(())
    assert fake_daemon.servicer.requests[-1].id == "m-1"
    assert client.get("m-0").text == "prefers unittest"  # get still returns the memory asked for


def test_forget_where(client: Client, fake_daemon: FakeDaemon) -> None:
    flt = {"tags": {"contains": "old"}}
    result = client.forget_where(flt)
    assert result == memvault.ForgetResult(txid=47, ids=("m-1", "m-2"), purge_at=PURGE_AT)
    sent = fake_daemon.servicer.requests[-1]
    assert json.loads(sent.filter_json) == flt and sent.id == "" and not sent.dry_run
    preview = client.forget_where('{"tier": "archived"}', dry_run=True)
    assert preview.txid == 0 and preview.ids == ("m-1", "m-2")
    assert fake_daemon.servicer.requests[-1].dry_run
    assert preview.to_dict() == {"txid": 0, "ids": ["m-1", "m-2"], "purge_at": 0.0,
                                 "purged": False}
    purged = client.forget_where(flt, purge=True, by="a script")
    assert (purged.purged, purged.purge_at) == (True, 0.0)
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.purge, sent.by) == (True, "a script")


def test_the_trash_calls(client: Client, fake_daemon: FakeDaemon) -> None:
    assert client.forget("m-1") == 42
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.id, sent.purge, sent.by) == ("m-1", False, "")
    (held,) = client.trash()
    assert (held.memory.id, held.memory.text) == ("m-1", FULL_RECORD.text)
    assert (held.trashed_at, held.trashed_by, held.purge_at) == (TRASHED_AT, "mcp", PURGE_AT)
    assert held.to_dict()["memory"]["tags"] == ["testing", "python"]
    restored = client.restore(["m-1"])
    assert restored.txid == 49 and [m.id for m in restored.memories] == ["m-1"]
    assert list(fake_daemon.servicer.requests[-1].ids) == ["m-1"]
    client.restore_all()
    assert fake_daemon.servicer.requests[-1].all
    with pytest.raises(NotFound, match="in the trash"):
        client.restore(["m-404"])
    with pytest.raises(InvalidArgument, match="restore_all"):
        client.restore([])
    assert client.empty_trash() == memvault.ForgetResult(txid=50, ids=("m-1",), purged=True)


@pytest.mark.parametrize("empty", ["", "  ", {}])
def test_forget_where_needs_a_filter(
    client: Client, fake_daemon: FakeDaemon, empty: str | dict[str, Any]
) -> None:
    with pytest.raises(InvalidArgument, match="filter"):
        client.forget_where(empty)
    assert fake_daemon.servicer.requests == []


def test_update_sends_every_field(client: Client, fake_daemon: FakeDaemon) -> None:
    result = client.update(
        "m-1",
        text="prefers pytest, always",
        type="semantic",
        topic="user.preferences.testing",
        payload={"lang": "python"},
        entity="user",
        tags=["testing"],
        category="development",
        importance=0.95,
        session="s-2",
        source="cli",
        tier="working",
        expires_at=1900000000.0,
        vector=[0.5, 0.5],
    )
    assert result == memvault.UpdateResult(txid=43, memory=_expected_memory((0.25, -0.5, 1.0)))
    assert result.to_dict()["memory"]["id"] == "m-1" and result.to_dict()["txid"] == 43
    sent = fake_daemon.servicer.requests[-1]
    assert sent.id == "m-1"
    assert list(sent.fields) == [
        "text", "type", "topic_key", "payload_json", "entity", "tags", "category",
        "importance", "session_id", "source", "tier", "expires_at",
    ]  # fmt: skip
    m = sent.memory
    assert (m.text, m.type, m.topic_key, m.entity, m.category) == (
        "prefers pytest, always",
        "semantic",
        "user.preferences.testing",
        "user",
        "development",
    )
    assert json.loads(m.payload_json) == {"lang": "python"} and list(m.tags) == ["testing"]
    assert m.importance == pytest.approx(0.95)
    assert (m.session_id, m.source, m.tier, m.expires_at) == ("s-2", "cli", "working", 1.9e9)
    assert list(m.vector) == [0.5, 0.5]


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        ({"topic": "ops.deploy"}, ["topic_key"]),
        ({"tags": []}, ["tags"]),  # an empty value clears, it is still sent
        ({"importance": 0.0, "expires_at": 0}, ["importance", "expires_at"]),
        ({"payload": {}, "session": ""}, ["payload_json", "session_id"]),
        ({"text": "new", "tier": None}, ["text"]),
    ],
)
def test_update_sends_only_the_named_fields(
    client: Client, fake_daemon: FakeDaemon, changes: dict[str, Any], fields: list[str]
) -> None:
    client.update("m-1", **changes)
    sent = fake_daemon.servicer.requests[-1]
    assert list(sent.fields) == fields
    assert sent.memory.HasField("importance") == ("importance" in fields)


def test_update_refuses_nothing_and_a_lone_vector(client: Client, fake_daemon: FakeDaemon) -> None:
    with pytest.raises(InvalidArgument, match="nothing to change"):
        client.update("m-1")
    with pytest.raises(InvalidArgument, match="vector goes with a new text"):
        client.update("m-1", vector=[1.0, 0.0], topic="t")
    assert fake_daemon.servicer.requests == []


def test_update_unknown_id_is_not_found(client: Client) -> None:
    with pytest.raises(NotFound):
        client.update("m-404", text="x")


def test_supersede(client: Client, fake_daemon: FakeDaemon) -> None:
    result = client.supersede(
        "m-1", "prefers vitest now", topic="user.preferences.testing", tags=["testing"],
        importance=0.7, source="cli", vector=[0.1, 0.2],
    )  # fmt: skip
    assert result == memvault.RememberResult(id="m-2", txid=44, outcome="superseded", target="m-1")
    sent = fake_daemon.servicer.requests[-1]
    assert sent.id == "m-1" and sent.memory.text == "prefers vitest now"
    assert sent.memory.topic_key == "user.preferences.testing"
    assert list(sent.memory.tags) == ["testing"] and sent.memory.source == "cli"
    assert sent.memory.importance == pytest.approx(0.7)
    assert list(sent.memory.vector) == pytest.approx([0.1, 0.2])
    with pytest.raises(NotFound):
        client.supersede("m-404", "x")


def test_reinforce(client: Client, fake_daemon: FakeDaemon) -> None:
    result = client.reinforce("m-1")
    assert result == memvault.ReinforceResult(txid=45, reinforce_count=3)
    assert result.to_dict() == {"txid": 45, "reinforce_count": 3}
    assert fake_daemon.servicer.requests[-1].id == "m-1"
    with pytest.raises(NotFound):
        client.reinforce("m-404")


def test_list_topics_and_entities(client: Client, fake_daemon: FakeDaemon) -> None:
    topics = client.list_topics({"category": "development"})
    assert topics == [
        memvault.Facet("user.preferences.testing", 2, 1700000100.5),
        memvault.Facet("ops.deploy", 1, 1600000000.0),
    ]
    assert json.loads(fake_daemon.servicer.requests[-1].filter_json) == {"category": "development"}
    assert client.list_entities() == [memvault.Facet("user", 3, 1700000000.0)]
    assert fake_daemon.servicer.requests[-1].filter_json == ""
    assert topics[0].to_dict() == {
        "name": "user.preferences.testing", "count": 2, "last_activity": 1700000100.5,
    }  # fmt: skip


# -- transcript turns ---------------------------------------------------------------------


def test_append_turns(client: Client, fake_daemon: FakeDaemon) -> None:
    result = client.append_turns(
        "s-9",
        iter(
            [
                {"speaker": "user", "text": "I moved to Lisbon", "at": 1700000000},
                {"speaker": "assistant", "text": "Noted.", "payload": {"turn": 2}},
            ]
        ),
    )
    assert result == memvault.AppendResult(ids=("t-0", "t-1"), txid=46)
    assert result.to_dict() == {"ids": ["t-0", "t-1"], "txid": 46}
    sent = fake_daemon.servicer.requests[-1]
    assert sent.session_id == "s-9"
    first, second = sent.turns
    assert (first.speaker, first.text, first.at, first.payload_json) == (
        "user",
        "I moved to Lisbon",
        1700000000.0,
        "",
    )
    assert (second.speaker, second.at, json.loads(second.payload_json)) == (
        "assistant",
        0.0,
        {"turn": 2},
    )


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        ({"speaker": "user"}, r"turns\[1\]: text"),
        ({"text": "hi"}, r"turns\[1\]: speaker"),
        ({"speaker": "u", "text": "hi", "when": 1}, r"turns\[1\].*when"),
        ({"speaker": "u", "text": "hi", "at": "noon"}, r"turns\[1\]: at"),
        ({"speaker": "u", "text": "hi", "payload": [1]}, "payload"),
    ],
)
def test_append_turns_rejects_bad_turns_before_sending(
    client: Client, fake_daemon: FakeDaemon, turn: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        client.append_turns("s", [{"speaker": "u", "text": "ok"}, turn])
    assert fake_daemon.servicer.requests == []


# -- export / import -----------------------------------------------------------------------


def test_export_streams_every_memory(client: Client, fake_daemon: FakeDaemon) -> None:
    memories = list(client.export())
    assert [m.id for m in memories] == ["m-0", "m-1"]
    assert memories[1] == _expected_memory(())
    assert not fake_daemon.servicer.requests[-1].include_vectors
    with_vectors = list(client.export(include_vectors=True))
    assert with_vectors[1].vector == (0.25, -0.5, 1.0)
    assert fake_daemon.servicer.requests[-1].include_vectors


def test_export_stops_early_without_error(client: Client, fake_daemon: FakeDaemon) -> None:
    fake_daemon.servicer.store = [FULL_RECORD] * 50
    stream = client.export()
    assert next(stream).id == "m-1"
    stream.close()  # type: ignore[attr-defined]  # a generator: closing cancels the call
    assert client.status().ready  # the connection is still good


def test_export_without_daemon_fails_at_once(short_dir: Path) -> None:
    with Client(short_dir / "none.sock") as c, pytest.raises(Unavailable):
        c.export()


def test_import_memories_sends_whole_records_in_batches(
    client: Client, fake_daemon: FakeDaemon
) -> None:
    full = _expected_memory((0.25, -0.5, 1.0))
    items: list[Memory | dict[str, Any]] = [
        full,
        full.to_dict(),  # an export line
        {"text": "only text"},
        Memory(id="m-9", text="nine"),
        {"id": "m-0", "text": "prefers unittest"},
    ]
    result = client.import_memories(iter(items), batch_size=2)
    assert [len(batch) for batch in fake_daemon.servicer.imported] == [2, 2, 1]
    first, second = fake_daemon.servicer.imported[0]
    assert first == FULL_RECORD and second == FULL_RECORD  # every field, vector included
    # The daemon's convention for an empty payload: "{}"; a memory nobody
    # rated has the daemon's default importance, 0.5 (0 would make it the
    # first the forgetting sweep takes).
    assert fake_daemon.servicer.imported[1][0] == pb.MemoryRecord(
        text="only text", payload_json="{}", importance=0.5
    )
    # m-1 twice and m-0 once are in the fake's store: reinforced; the rest added.
    assert result == memvault.ImportResult(added=2, reinforced=3, txid=48)
    assert result.to_dict() == {"added": 2, "reinforced": 3, "txid": 48}


def test_import_memories_default_batch_and_nothing(client: Client, fake_daemon: FakeDaemon) -> None:
    result = client.import_memories(Memory(id=f"n-{i}", text=str(i)) for i in range(1201))
    assert [len(batch) for batch in fake_daemon.servicer.imported] == [500, 500, 201]
    assert (result.added, result.reinforced) == (1201, 0)
    assert client.import_memories([]) == memvault.ImportResult(0, 0, 0)
    assert len(fake_daemon.servicer.imported) == 3  # nothing sent for nothing


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"id": "x"}, r"memories\[0\]: missing key text"),
        ({"text": "x", "score": 0.5}, r"memories\[0\]: unknown key\(s\) score"),
        ({"text": "x", "tags": "a"}, r"memories\[0\]\.tags: must be a list"),
        ({"text": "x", "reinforce_count": -1}, r"reinforce_count: must be a whole number"),
        ({"text": "x", "created_at": "today"}, r"created_at: must be a finite number"),
        ({"text": "x", "vector": [1, "a"]}, r"vector\[1\]: must be a finite number"),
        ({"text": "x", "payload": []}, r"payload: must be a JSON object"),
        ({"text": 7}, r"text: must be a string"),
        ("text", r"memories\[0\]: a Memory or a mapping"),
    ],
)
def test_import_memories_rejects_bad_items_before_sending(
    client: Client, fake_daemon: FakeDaemon, item: Any, message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        client.import_memories([item])
    assert fake_daemon.servicer.imported == []
    with pytest.raises(InvalidArgument, match="batch_size"):
        client.import_memories([], batch_size=0)


def test_export_then_import_loses_nothing(client: Client, fake_daemon: FakeDaemon) -> None:
    lines = [json.dumps(m.to_dict()) for m in client.export(include_vectors=True)]
    client.import_memories(json.loads(line) for line in lines)
    [batch] = fake_daemon.servicer.imported
    assert batch == fake_daemon.servicer.store


def test_memory_from_dict_inverts_to_dict() -> None:
    full = _expected_memory((0.25, -0.5, 1.0))
    assert Memory.from_dict(full.to_dict()) == full
    assert Memory.from_dict({"text": "t", "importance": 1}) == Memory(
        id="", text="t", importance=1.0
    )


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


def _slow_relay(public: Path, upstream: Path, delay: float) -> None:
    """Accept one connection on `public` and relay it to `upstream`, but only
    after `delay` s: a daemon busy at start (its model loading, the machine
    loaded) that has not yet answered gRPC's handshake."""
    import socket as sockets

    listener = sockets.socket(sockets.AF_UNIX)
    listener.bind(str(public))
    listener.listen(1)

    def pump(source: sockets.socket, sink: sockets.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(sockets.SHUT_WR)

    def serve() -> None:
        conn, _ = listener.accept()
        listener.close()
        time.sleep(delay)
        back = sockets.socket(sockets.AF_UNIX)
        back.connect(str(upstream))
        threading.Thread(target=pump, args=(conn, back), daemon=True).start()
        pump(back, conn)

    threading.Thread(target=serve, daemon=True).start()


def test_a_daemon_slow_to_answer_a_new_connection_is_waited_for(
        fake_daemon: FakeDaemon, short_dir: Path) -> None:
    """Not "not running": gRPC gave up on a connection after 100 ms while the
    reconnect backoff's minimum was 100 ms (it is also the connect timeout),
    and a daemon started by systemd, busy importing its model, failed its
    first client that way (tests/test_user_manager.py, cold page cache)."""
    relay = short_dir / "slow.sock"
    _slow_relay(relay, fake_daemon.socket, delay=0.5)
    with Client(relay, timeout=5.0) as c:
        assert c.status().ready


def test_the_daemons_own_unavailable_is_its_words_whatever_they_quote(
        fake_daemon: FakeDaemon) -> None:
    """A sync remote that is down is reported as the remote, though the
    daemon's message quotes gRPC's "Connection refused": the daemon marks
    what it answers (`ANSWERED`). Unmarked, the same words are taken for the
    client's own transport failing: a daemon that is not running."""
    with Client(fake_daemon.socket) as c:
        with pytest.raises(Unavailable) as info:
            c.remember("remote down, answered")
        assert str(info.value) == REMOTE_DOWN
        with pytest.raises(Unavailable, match="daemon is not running"):
            c.remember("remote down, not marked")


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
    assert set(memvault.__all__) >= {
        "AppendResult", "Facet", "ForgetResult", "Hits", "ImportResult", "ReinforceResult",
        "ScoreBreakdown", "TurnHit", "UpdateResult",
    }  # fmt: skip
    for name in memvault.__all__:
        assert hasattr(memvault, name), name


def test_light_install_imports_nothing_heavy() -> None:
    heavy = ["memvaultd", "torch", "numpy", "lancedb", "sentence_transformers", "onnxruntime",
             "onnx", "tokenizers"]
    code = (
        "import sys, memvault, memvault.cli.main, memvault.cli.output, memvault.wire\n"
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{root / 'base'}{os.pathsep}{root / 'client'}"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
