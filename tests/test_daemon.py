"""The real daemon, the real model, over the real socket, through the client."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest

from memvault import Client
from memvault_base.errors import InvalidArgument, NotFound, Unavailable

from .daemon_process import DaemonProcess

FILTER = {"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}


@pytest.fixture
def client(daemon: DaemonProcess) -> Client:
    with Client(socket=daemon.socket) as c:
        yield c


def test_remembered_memory_is_recalled_first_with_its_payload(client: Client) -> None:
    client.remember(
        "prefers vitest over jest",
        topic="user.preferences.testing",
        category="development",
        tags=["testing"],
        payload={"framework": "vitest"},
    )
    client.remember(
        "the staging database lives in eu-west-1", category="infrastructure", tags=["aws"]
    )
    hits = client.recall("which test framework does the user like", filter=FILTER)
    assert hits, "the memory must be found"
    assert hits[0].memory.text == "prefers vitest over jest"
    assert hits[0].memory.payload == {"framework": "vitest"}
    assert all(h.memory.category == "development" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_generic_words_of_a_topic_key_are_no_keyword_match(client: Client) -> None:
    """"user" in `user.preferences.testing` is no reason to recall a testing
    preference for where the user lives: only a topic's last, specific part
    is matched as a keyword."""
    scope = {"tags": "topic-words"}
    # new=True: the shared daemon may hold the same statement under the same
    # topic already, which a remember would reinforce instead.
    home = client.remember("moved to Lisbon in March", topic="user.home", tags=["topic-words"],
                           new=True)
    client.remember("prefers vitest over jest", topic="user.preferences.testing",
                    tags=["topic-words"], new=True)
    client.remember("the standup is at 9:30 every weekday", topic="work.meetings",
                    tags=["topic-words"], new=True)
    hits = client.recall("where does the user live now", top_k=3, filter=scope)
    assert hits[0].memory.id == home.id
    for hit in hits:
        assert "keyword" not in hit.channels, (hit.memory.text, hit.match_reasons)
    (testing,) = client.recall("which testing framework", top_k=1, filter=scope)
    assert testing.memory.text == "prefers vitest over jest"
    assert any(reason.startswith("keyword: test") for reason in testing.match_reasons)


def test_hits_carry_the_composite_score(client: Client) -> None:
    client.remember("the user's cat is called Miso", type="episodic", topic="user.pets")
    (hit,) = client.recall("what is the cat's name", top_k=1, filter={"topic_key": "user.pets"},
                           mode="vector")
    # Vector mode is the recall spec's formula exactly.
    assert hit.score == pytest.approx(hit.similarity * hit.decay * hit.reinforcement)
    assert 0.99 < hit.decay <= 1.0  # just written: almost no decay
    assert hit.reinforcement == pytest.approx(1.0)
    (hybrid,) = client.recall("what is the cat's name", top_k=1,
                              filter={"topic_key": "user.pets"})
    parts = hybrid.breakdown
    assert hybrid.score == pytest.approx(
        parts.fusion * parts.decay * parts.reinforcement * parts.importance)
    assert "vector" in hybrid.channels and "keyword" in hybrid.channels
    assert any(reason.startswith("keyword: cat") for reason in hybrid.match_reasons)


def test_restating_a_memory_reinforces_it_instead_of_copying(client: Client) -> None:
    first = client.remember("The API key rotates monthly", topic="ops.keys")
    again = client.remember("API keys are rotated every month", topic="ops.keys")
    assert again.reinforced and again.id == first.id
    other_topic = client.remember("API keys are rotated every month", topic="ops.other")
    assert not other_topic.reinforced
    memory = client.get(first.id)
    assert memory.reinforce_count == 1
    hits = client.recall("how often do API keys rotate", top_k=5, filter={"topic_key": "ops.keys"})
    assert [h.memory.id for h in hits] == [first.id]
    assert hits[0].reinforcement == pytest.approx(1 + 0.6931, rel=1e-3)


def test_batch_with_own_vectors_and_dimension_check(client: Client) -> None:
    vector = [0.0] * 384
    vector[7] = 3.0  # stored scaled to unit length
    results = client.remember_batch(
        [
            {"text": "byo vector memory", "vector": vector, "topic": "byo"},
            {"text": "embedded by the daemon in the same batch", "topic": "byo"},
        ]
    )
    assert len(results) == 2 and len({r.id for r in results}) == 2
    assert results[1].txid == results[0].txid + 1
    (hit,) = client.recall(query_vector=vector, top_k=1, filter={"topic_key": "byo"})
    assert hit.memory.id == results[0].id
    assert hit.similarity == pytest.approx(1.0, abs=1e-5)
    stored = client.get(results[0].id, include_vector=True)
    assert stored.vector[7] == pytest.approx(1.0)
    with pytest.raises(InvalidArgument, match=r"vector.*3 dimensions.*384"):
        client.remember("wrong size", vector=[1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.remember(""), "text"),
        (lambda c: c.remember("   "), "text"),
        (lambda c: c.remember("x" * 40_000), "text"),
        (lambda c: c.remember("ok", payload='{"unclosed": '), "payload"),
        (lambda c: c.remember("ok", type="rumour"), "type"),
        (lambda c: c.remember("ok", importance=1.5), "importance"),
        (lambda c: c.recall(""), "query"),
        (lambda c: c.recall("q", top_k=1001), "top_k"),
        (lambda c: c.recall("q", filter={"tags": {"regex": "x"}}), "regex"),
        (lambda c: c.recall("q", filter='{"AND": [}'), "filter"),
        (lambda c: c.recall("q", filter={"colour": "red"}), "colour"),
    ],
)
def test_bad_input_is_refused_with_the_field_named_and_nothing_written(
    client: Client, call: object, field: str
) -> None:
    for _ in range(2):
        before = client.status()
        with pytest.raises(InvalidArgument, match=field):
            call(client)  # type: ignore[operator]
        after = client.status()
        if after.applied_txid == before.applied_txid:
            break
        # The earlier tests' recalls marked memories accessed, and the daemon
        # logs such marks once a second: one such flush may land between the
        # two statuses. By the second try it has; a write by the bad call
        # itself would show again.
        time.sleep(1.5)
    assert (after.memory_count, after.applied_txid) == (before.memory_count, before.applied_txid)


def test_unknown_id_is_not_found(client: Client) -> None:
    with pytest.raises(NotFound, match="id"):
        client.get("0" * 32)
    with pytest.raises(NotFound, match="id"):
        client.forget("0" * 32)


def test_forget_hides_the_memory(client: Client) -> None:
    kept = client.remember("the build uses bazel", topic="build.tool")
    txid = client.forget(kept.id)
    assert txid > kept.txid
    with pytest.raises(NotFound):
        client.get(kept.id)
    hits = client.recall("which build tool", filter={"topic_key": "build.tool"})
    assert hits == []  # empty is an answer: never padded


def test_cache_lookups_stream_hit_and_miss_events(client: Client) -> None:
    seen: list[tuple[str, str]] = []
    changed = threading.Condition()

    def listen() -> None:
        with Client(socket=client.socket) as listener:
            for event in listener.events(types=["hit", "miss"]):
                with changed:
                    seen.append((event.type, event.query))
                    changed.notify_all()
                if event.type == "hit":
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    # The stream registers a moment after the call starts: ask fresh queries
    # until the listener sees one miss, then ask that one again for a hit.
    for attempt in range(50):
        query = f"what does the user eat for breakfast, take {attempt}"
        client.recall(query)
        with changed:
            if changed.wait_for(lambda q=query: ("miss", q) in seen, timeout=0.2):
                break
    else:
        pytest.fail("no miss event arrived")
    client.recall(query)
    thread.join(10)
    assert seen[-2:] == [("miss", query), ("hit", query)]
    status = client.status()
    assert status.cache_hits >= 1 and status.cache_misses >= 1


def test_a_cached_recall_is_not_blocked_by_a_large_embedding_batch(client: Client) -> None:
    query = "where is the staging database"
    client.remember("the staging database runs on db-stage-1", topic="infra.staging")
    client.recall(query)  # now cached
    batch_done = threading.Event()

    def big_batch() -> None:
        with Client(socket=client.socket) as other:
            other.remember_batch(
                [
                    {
                        "text": f"filler note number {i} about nothing in particular",
                        "topic": "filler",
                    }
                    for i in range(600)
                ]
            )
        batch_done.set()

    thread = threading.Thread(target=big_batch)
    thread.start()
    time.sleep(0.3)  # the batch is on the model thread now (600 texts: ~2.5 s)
    hits = client.recall(query)
    assert hits and not batch_done.is_set(), "the cached recall must not wait for the batch"
    thread.join(60)
    assert batch_done.is_set()


def test_a_recall_waiting_for_a_transaction_holds_up_no_other_call(client: Client) -> None:
    # Cached recalls are answered on the server's event loop; one that has
    # to wait (here for a transaction that never comes, 10 s) must wait on
    # a worker, or every other call would wait with it.
    query = "which port does the staging database listen on"
    client.recall(query)  # now cached
    waited: list[BaseException] = []

    def wait_for_the_future() -> None:
        with Client(socket=client.socket) as other:
            try:
                other.recall(query, min_txid=client.status().applied_txid + 10_000_000)
            except Unavailable as exc:
                waited.append(exc)

    thread = threading.Thread(target=wait_for_the_future)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    for _ in range(20):
        client.recall(query)
    client.status()
    written = client.remember("the staging database listens on port 6543", topic="staging")
    assert client.recall(query, topic="staging", min_txid=written.txid)[0].memory.id == written.id
    assert time.monotonic() - started < 3.0 and thread.is_alive()
    thread.join(30)
    assert waited and "min_txid" in str(waited[0])


def test_a_cached_recall_answers_as_the_first_did(client: Client) -> None:
    # The first asking embeds the query on a worker; the second is answered
    # on the loop from the cache: both must rank alike (marks aside).
    for i in range(12):
        client.remember(f"the coffee machine on floor {i} needs descaling every {i + 2} weeks",
                        topic=f"office.floor{i}")
    query = "how often should the coffee machine on floor 3 be descaled"
    first = client.recall(query, top_k=8, mark_accessed=False)
    second = client.recall(query, top_k=8, mark_accessed=False)
    assert [h.memory.id for h in first] == [h.memory.id for h in second]
    assert [h.score for h in first] == pytest.approx([h.score for h in second], abs=1e-6)
    assert client.status().cache_hits >= 1


def test_health_serving_and_reflection_lists_the_services(daemon: DaemonProcess) -> None:
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    assert daemon.health() == "SERVING"
    with grpc.insecure_channel(f"unix://{daemon.socket}") as channel:
        services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
    assert {"memvault.v1.Memory", "grpc.health.v1.Health"} <= services


def test_socket_is_private(daemon: DaemonProcess) -> None:
    assert daemon.socket.stat().st_mode & 0o777 == 0o600
    assert daemon.socket.parent.stat().st_mode & 0o777 == 0o700
    data = daemon.home / "data"
    assert data.stat().st_mode & 0o777 == 0o700
    assert Path(daemon.home / "data" / "vault.json").exists()
