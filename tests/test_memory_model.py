"""The full memory model through the real daemon: lifecycle, recall options,
turns, export and import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memvault import Client
from memvault_base.errors import InvalidArgument, NotFound

from .daemon_process import DaemonProcess


@pytest.fixture
def client(daemon: DaemonProcess) -> Client:
    with Client(socket=daemon.socket) as c:
        yield c


def _topic(name: str) -> str:
    # Tests share one daemon: a unique topic keeps each test's memories apart.
    return f"t{time.monotonic_ns()}.{name}"


def test_vocabulary_maps_onto_the_three_types(client: Client) -> None:
    topic = _topic("types")
    kinds = {"fact": "semantic", "event": "episodic", "instruction": "procedural",
             "task": "episodic"}
    ids = {word: client.remember(f"a memory typed {word} about llamas number {i}",
                                 type=word, topic=f"{topic}.{word}").id
           for i, word in enumerate(kinds)}
    for word, memory_type in kinds.items():
        assert client.get(ids[word]).type == memory_type
    hits = client.recall("llamas", topic=topic, types=["instruction"], top_k=10)
    assert [h.memory.id for h in hits] == [ids["instruction"]]


def test_update_keeps_the_id_and_reembeds_the_text(client: Client) -> None:
    topic = _topic("update")
    memory_id = client.remember("the deploy window is tuesday", topic=topic).id
    result = client.update(memory_id, text="the deploy window is thursday", tags=["ops"])
    assert result.memory.id == memory_id and result.txid > 0
    got = client.get(memory_id)
    assert got.text == "the deploy window is thursday" and got.tags == ("ops",)
    (hit,) = client.recall("which day is the deploy window", topic=topic, top_k=1)
    assert hit.memory.id == memory_id and "thursday" in hit.memory.text
    with pytest.raises(InvalidArgument, match="importance"):
        client.update(memory_id, importance=7.0)
    assert client.get(memory_id).importance == 0.5


def test_supersession_hides_the_old_and_get_returns_the_chain(client: Client) -> None:
    topic = _topic("supersede")
    first = client.remember("the team uses jest", topic=topic).id
    second = client.supersede(first, "the team moved to vitest", topic=topic).id
    third = client.remember("the team moved to vitest 2", topic=topic, supersedes=second).id
    assert [m.id for m in client.history(second)] == [first, second, third]
    assert client.get(first).superseded_by == second
    visible = client.recall("what test runner does the team use", topic=topic, top_k=10)
    assert [h.memory.id for h in visible] == [third]
    everything = client.recall("what test runner does the team use", topic=topic, top_k=10,
                               include_superseded=True)
    assert {h.memory.id for h in everything} == {first, second, third}


def test_expired_memories_are_never_returned(client: Client) -> None:
    topic = _topic("expiry")
    client.remember("the coupon code is LLAMA10", topic=topic, expires_at=time.time() + 1.0)
    assert client.recall("coupon code", topic=topic)
    time.sleep(1.2)
    assert client.recall("coupon code", topic=topic) == []


def test_forget_by_filter_with_a_dry_run_first(client: Client) -> None:
    topic = _topic("forget")
    notes = ("kiwis ripen faster next to apples", "the kiwi bird cannot fly",
             "kiwis were once called chinese gooseberries")
    ids = {client.remember(note, topic=topic, category="scratch", tags=["tmp"]).id
           for note in notes}
    assert len(ids) == 3
    kept = client.remember("a keeper about kiwis", topic=topic, category="keep").id
    where = {"AND": [{"topic_key": topic}, {"category": "scratch"}]}
    preview = client.forget_where(where, dry_run=True)
    assert set(preview.ids) == ids
    assert len(client.recall("kiwis", topic=topic, top_k=10)) == 4  # nothing changed
    done = client.forget_where(where)
    assert set(done.ids) == ids and done.txid > preview.txid
    assert [h.memory.id for h in client.recall("kiwis", topic=topic, top_k=10)] == [kept]


def test_reinforce_and_list_topics_and_entities(client: Client) -> None:
    topic = _topic("facets")
    memory_id = client.remember("ada writes the compiler", topic=topic, entity="ada").id
    client.remember("ada prefers rust for the compiler backend", topic=topic, entity="ada")
    client.remember("grace reviews every parser change", topic=f"{topic}.reviews",
                    entity="grace")
    assert client.reinforce(memory_id).reinforce_count == 1
    topics = {f.name: f for f in client.list_topics(filter={"topic_key": {"in": [
        topic, f"{topic}.reviews"]}})}
    assert topics[topic].count == 2 and topics[f"{topic}.reviews"].count == 1
    assert topics[topic].last_activity > 0
    entities = {f.name: f.count for f in client.list_entities(
        filter={"entity": {"in": ["ada", "grace"]}})}
    assert entities["ada"] >= 2 and entities["grace"] >= 1


def test_channels_keyword_only_and_vector_only_modes(client: Client) -> None:
    topic = _topic("modes")
    exact = client.remember("error code ZX-4471 means the disk is full", topic=topic).id
    client.remember("the storage volume ran out of space last night", topic=topic)
    keyword = client.recall("ZX-4471", topic=topic, mode="keyword", top_k=5)
    assert [h.memory.id for h in keyword] == [exact]
    assert keyword[0].channels == ("keyword",)
    vector = client.recall("ZX-4471", topic=topic, mode="vector", top_k=5)
    assert all(h.channels == ("vector",) for h in vector)
    topical = client.recall(f"anything about {topic}", top_k=5)
    assert topical and all(h.memory.topic_key == topic for h in topical[:2])
    assert "topic" in topical[0].channels
    with pytest.raises(InvalidArgument, match="mode"):
        client.recall("x", mode="psychic")


def test_token_budget_and_pagination(client: Client) -> None:
    topic = _topic("pages")
    texts = [f"walrus fact number {i}: walruses can weigh {1000 + i} kilograms"
             for i in range(12)]
    client.remember_batch([{"text": t, "topic": f"{topic}.{i}"} for i, t in enumerate(texts)])
    first = client.recall("how heavy are walruses", topic=topic, top_k=5)
    assert len(first) == 5 and first.has_more
    second = client.recall("how heavy are walruses", topic=topic, top_k=5, offset=5)
    third = client.recall("how heavy are walruses", topic=topic, top_k=5, offset=10)
    ids = [h.memory.id for h in [*first, *second, *third]]
    assert len(ids) == len(set(ids)) == 12 and not third.has_more
    budget = client.recall("how heavy are walruses", topic=topic, top_k=10, max_tokens=40)
    spent = sum(-(-len(h.memory.text.encode()) // 4) for h in budget)
    assert 1 <= len(budget) < 10 and spent <= 40 and budget.has_more


def test_mark_accessed_counts_only_real_reads(client: Client) -> None:
    topic = _topic("access")
    memory_id = client.remember("the office wifi password is on the fridge", topic=topic).id
    client.recall("wifi password", topic=topic, mark_accessed=False)
    assert client.get(memory_id).access_count == 0
    client.recall("wifi password", topic=topic)
    after = client.get(memory_id)
    assert after.access_count == 1 and after.last_accessed_at > 0


def test_min_txid_reads_your_writes(client: Client) -> None:
    topic = _topic("txid")
    written = client.remember("the release train leaves at noon", topic=topic)
    hits = client.recall("when does the release train leave", topic=topic,
                         min_txid=written.txid)
    assert hits[0].memory.id == written.id
    with pytest.raises(Exception, match="min_txid"):
        client.recall("anything", min_txid=written.txid + 10_000_000)


def test_turns_live_in_their_own_layer(client: Client) -> None:
    session = _topic("session")
    turns = client.append_turns(session, [
        {"speaker": "alice", "text": "did you book the flights to Lisbon?"},
        {"speaker": "bob", "text": "yes, we fly out on the 14th of March"},
    ])
    assert len(turns.ids) == 2
    hits = client.recall("when do we fly to Lisbon", session=session, include_turns=True)
    assert hits == []  # turns never enter the memory ranking
    assert {t.speaker for t in hits.turns} == {"alice", "bob"}
    assert "14th of March" in " ".join(t.text for t in hits.turns)
    with pytest.raises(NotFound):
        client.get(turns.ids[0])


def test_bad_recall_options_are_refused(client: Client) -> None:
    with pytest.raises(InvalidArgument, match="tier"):
        client.recall("x", tiers=["attic"])
    with pytest.raises(InvalidArgument, match="type"):
        client.recall("x", types=["rumour"])
    with pytest.raises(InvalidArgument, match="offset"):
        client.recall("x", top_k=10, offset=995)


def test_export_then_import_into_an_empty_vault_loses_nothing(daemon: DaemonProcess,
                                                              client: Client,
                                                              tmp_path: Path) -> None:
    topic = _topic("export")
    client.remember("exported fact one", topic=topic, tags=["a"], payload={"n": 1},
                    importance=0.9, entity="e1", category="c", session="s", source="agent")
    client.remember("exported fact two", topic=f"{topic}.b")
    exported = tmp_path / "export.jsonl"
    env = dict(os.environ, MEMVAULT_HOME=str(daemon.home))
    done = subprocess.run([sys.executable, "-m", "memvault.cli.main", "export", str(exported),
                           "--vectors"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(lines) == client.status().memory_count
    with DaemonProcess(tmp_path / "other").start() as other:
        other_env = dict(os.environ, MEMVAULT_HOME=str(other.home))
        imported = subprocess.run([sys.executable, "-m", "memvault.cli.main", "import",
                                   str(exported), "--json"], env=other_env,
                                  capture_output=True, text=True, timeout=300)
        assert imported.returncode == 0, imported.stderr
        assert json.loads(imported.stdout)["added"] == len(lines)
        with Client(socket=other.socket) as fresh:
            for line in lines:
                got = fresh.get(line["id"], include_vector=True).to_dict()
                for key, value in line.items():
                    if key == "vector":
                        assert got[key] == pytest.approx(value, abs=1e-6)
                    elif isinstance(value, float):
                        assert got[key] == pytest.approx(value), key
                    else:
                        assert got[key] == value, key
            again = fresh.import_memories(lines)
            assert again.added == 0
            assert fresh.status().memory_count == len(lines)
        other.stop()
