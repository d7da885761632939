"""Remember means remember, through the real daemon, CLI and MCP bridge: a
changed fact supersedes, a restatement reinforces, `--new` adds, an import
gives back every memory, `supersede` inherits what it is not given, and a
topic keeps its sub-topics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import pytest
from mcp import Client as McpClient

from memvault import Client
from memvault.cli.mcp_bridge import build_server
from memvault_base.v1 import memory_pb2 as pb
from memvault_base.v1 import memory_pb2_grpc as pb_grpc

from .daemon_process import DaemonProcess

MARCH = "The Q3 deadline for the API project is March 3"
APRIL = "The Q3 deadline for the API project is April 15"


def memvault(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args],
                          env=dict(os.environ, MEMVAULT_HOME=str(home)), capture_output=True,
                          text=True, timeout=60)


def topic() -> str:
    return f"work.t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    with Client(socket=daemon.socket) as c:
        yield c


def test_a_moved_deadline_supersedes_and_the_cli_says_so(daemon: DaemonProcess) -> None:
    key = topic()
    first = memvault(daemon.home, "remember", MARCH, "--topic", key, "--tag", "api")
    assert first.returncode == 0 and first.stderr == "", first.stderr
    march_id = first.stdout.strip()
    second = memvault(daemon.home, "remember", APRIL, "--topic", key)
    assert second.returncode == 0, second.stderr
    april_id = second.stdout.strip()
    assert april_id != march_id, "April 15 must not be swallowed as a restatement"
    assert second.stderr == f"superseded {march_id[:8]}… ({MARCH})\n"

    chain = json.loads(memvault(daemon.home, "get", april_id, "--chain", "--json").stdout)
    links = chain["chain"] if isinstance(chain, dict) else chain
    assert [link["text"] for link in links] == [MARCH, APRIL]
    with Client(socket=daemon.socket) as c:
        assert c.get(march_id).superseded_by == april_id
        assert c.get(april_id).tags == ("api",), "the new version keeps what it did not say"
        hits = c.recall("when is the Q3 API deadline", topic=key, top_k=5)
        assert [h.memory.id for h in hits] == [april_id], "the old version is hidden"

    again = memvault(daemon.home, "remember", "The Q3 deadline of the API project is April 15",
                     "--topic", key, "--json")
    said = json.loads(again.stdout)
    assert (said["outcome"], said["id"], said["target"]) == ("reinforced", april_id, april_id)


def test_outcomes_through_the_client(client: Client) -> None:
    key = topic()
    first = client.remember("The user prefers vitest over jest", topic=key)
    assert (first.outcome, first.target) == ("added", "")
    same = client.remember("The user prefers vitest to jest", topic=key)
    assert (same.outcome, same.id, same.target) == ("reinforced", first.id, first.id)
    assert client.get(first.id).reinforce_count == 1
    negated = client.remember("The user no longer prefers vitest over jest", topic=key)
    assert (negated.outcome, negated.target) == ("superseded", first.id)
    assert "negation" in negated.reason
    other = client.remember("The CI runs the unit tests on every push", topic=key)
    assert other.outcome == "added"
    forced = client.remember("The CI runs the unit tests on every push", topic=key, new=True)
    assert forced.outcome == "added" and forced.id != other.id


def test_an_event_or_another_entity_is_never_a_new_version(client: Client) -> None:
    key = topic()
    monday = client.remember("Caroline went to the LGBTQ support group on Monday",
                             type="episodic", topic=key)
    tuesday = client.remember("Caroline went to the LGBTQ support group on Tuesday",
                              type="episodic", topic=key)
    assert tuesday.outcome == "added", "another event, not a new date for the first"
    again = client.remember("Caroline went to the LGBTQ support group on Tuesday",
                            type="episodic", topic=key)
    assert (again.outcome, again.target) == ("reinforced", tuesday.id)
    assert client.get(monday.id).superseded_by == ""
    jon = client.remember("Thanks, that is kind of you!", topic=key, entity="Jon")
    gina = client.remember("Thanks, that is kind of you!", topic=key, entity="Gina")
    assert gina.outcome == "added" and gina.id != jon.id, "another speaker's words"


def test_a_batch_judges_each_memory_against_the_earlier_ones(client: Client) -> None:
    key = topic()
    results = client.remember_batch([
        {"text": "The standup is at 9:30", "topic": key},
        {"text": "The standup is at 9:45", "topic": key},
        {"text": "The standup is at 9:45", "topic": key},
        {"text": "The standup is at 9:45", "topic": key, "new": True},
    ])
    assert [r.outcome for r in results] == ["added", "superseded", "reinforced", "added"]
    assert results[1].target == results[0].id and results[2].target == results[1].id
    assert client.get(results[0].id).superseded_by == results[1].id


def test_an_export_imported_into_an_empty_vault_gives_back_every_memory(tmp_path: Path) -> None:
    with DaemonProcess(tmp_path / "a").start() as a, Client(socket=a.socket) as ca:
        key = "near.duplicates"
        # Near-identical memories, each its own (written with new=True): the
        # import must keep them apart, as it must keep the chain.
        for i in range(30):
            ca.remember(f"The user bought groceries at the market on Saturday {i % 3}",
                        topic=key, new=True)
        old = ca.remember(MARCH, topic="work")
        ca.supersede(old.id, APRIL)
        exported = list(ca.export())
        a.stop()
    assert len(exported) == 32
    with DaemonProcess(tmp_path / "b").start() as b, Client(socket=b.socket) as cb:
        result = cb.import_memories(exported)
        assert (result.added, result.reinforced) == (32, 0)
        back = {m.id: m for m in cb.export()}
        assert set(back) == {m.id for m in exported}
        for memory in exported:
            assert back[memory.id].text == memory.text
            assert back[memory.id].superseded_by == memory.superseded_by
            assert back[memory.id].supersedes == memory.supersedes
        assert [m.text for m in cb.history(old.id)] == [MARCH, APRIL]
        again = cb.import_memories(exported)
        assert (again.added, again.reinforced) == (0, 0), "ids it holds are skipped"
        b.stop()


def test_supersede_inherits_every_field_not_given(client: Client, daemon: DaemonProcess) -> None:
    key = topic()
    old = client.remember("The office moves to Lisbon in May", topic=key, tags=["office"],
                          category="logistics", entity="company", payload={"floor": 3},
                          importance=0.8, type="episodic", session="s-1", source="planner",
                          protected=True)
    new = client.supersede(old.id, "The office moves to Porto in May")
    assert (new.outcome, new.target) == ("superseded", old.id)
    got = client.get(new.id)
    assert (got.topic_key, got.tags, got.category, got.entity, got.payload) == (
        key, ("office",), "logistics", "company", {"floor": 3})
    assert (got.importance, got.type, got.session_id, got.source, got.protected) == (
        pytest.approx(0.8), "episodic", "s-1", "planner", True)
    cleared = client.supersede(new.id, "The office moves to Porto in June", tags=[],
                               category="", importance=0.4)
    got = client.get(cleared.id)
    assert (got.tags, got.category, got.topic_key) == ((), "", key)
    assert got.importance == pytest.approx(0.4)

    # The CLI: the topic stays, and with it the topic in `memvault topics`.
    done = memvault(daemon.home, "supersede", cleared.id, "The office moves to Faro in June")
    assert done.returncode == 0, done.stderr
    assert client.get(done.stdout.strip()).topic_key == key
    topics = json.loads(memvault(daemon.home, "topics", "--json").stdout)
    assert key in json.dumps(topics)


def test_a_topic_keeps_its_sub_topics_unless_asked_exactly(client: Client,
                                                           daemon: DaemonProcess) -> None:
    parent = topic()
    below = client.remember("The API deadline is April 15", topic=parent + ".deadlines")
    at = client.remember("The API project is led by Sara", topic=parent)
    ids = {h.memory.id for h in client.recall("API project", topic=parent, top_k=10)}
    assert ids == {below.id, at.id}
    exact = {h.memory.id for h in client.recall("API project", topic=parent, exact_topic=True,
                                                top_k=10)}
    assert exact == {at.id}
    cli = json.loads(memvault(daemon.home, "recall", "API project", "--topic", parent,
                              "--top-k", "10", "--json").stdout)
    assert {h["memory"]["id"] if "memory" in h else h["id"] for h in cli} == ids
    cli = json.loads(memvault(daemon.home, "recall", "API project", "--topic", parent,
                              "--exact-topic", "--top-k", "10", "--json").stdout)
    assert {h["memory"]["id"] if "memory" in h else h["id"] for h in cli} == exact


# -- MCP: the bridge in process, on the real daemon ----------------------------------


def _mcp(client: Client, body: Any) -> None:
    async def main() -> None:
        async with McpClient(build_server(client)) as session:
            await body(session)

    anyio.run(main)


async def _call(session: Any, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, f"{tool} failed: {text}"
    return json.loads(text)


def test_mcp_tools_carry_annotations_and_get_and_supersede_exist(client: Client) -> None:
    async def body(session: Any) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"get", "supersede", "recall", "remember", "forget", "list_topics"} <= set(tools)
        for name in ("recall", "list_topics", "get"):
            assert tools[name].annotations.read_only_hint is True, name
        assert tools["forget"].annotations.destructive_hint is True
        assert tools["remember"].annotations.destructive_hint is False
        assert tools["supersede"].input_schema["required"] == ["id", "text"]

    _mcp(client, body)


def test_mcp_remember_reports_a_supersession_and_get_shows_the_chain(client: Client) -> None:
    key = topic()

    async def body(session: Any) -> None:
        first = await _call(session, "remember", text=MARCH, topic=key, tags=["api"])
        assert (first["outcome"], first["reinforced"]) == ("added", False)
        second = await _call(session, "remember", text=APRIL, topic=key)
        assert (second["outcome"], second["target"]) == ("superseded", first["id"])
        same = await _call(session, "remember", text=APRIL, topic=key)
        assert (same["outcome"], same["id"], same["reinforced"]) == (
            "reinforced", second["id"], True)
        got = await _call(session, "get", id=second["id"])
        assert got["memory"]["text"] == APRIL and got["memory"]["supersedes"] == first["id"]
        assert [link["text"] for link in got["chain"]] == [MARCH, APRIL]

        moved = await _call(session, "supersede", id=second["id"],
                            text="The Q3 deadline for the API project is May 2")
        assert (moved["outcome"], moved["target"]) == ("superseded", second["id"])
        kept = client.get(moved["id"])
        assert (kept.topic_key, kept.tags, kept.source) == (key, ("api",), "mcp")

        forced = await _call(session, "remember", text=APRIL, topic=key, new=True)
        assert forced["outcome"] == "added"

        parent = key.rsplit(".", 1)[0]
        hits = await _call(session, "recall", query="Q3 API deadline", topic=parent, top_k=50)
        assert moved["id"] in {h["id"] for h in hits}, "a parent topic keeps its sub-topics"
        exact = await _call(session, "recall", query="Q3 API deadline", topic=parent,
                            exact_topic=True, top_k=50)
        assert moved["id"] not in {h["id"] for h in exact}

    _mcp(client, body)


def test_the_wire_carries_outcomes_never_merge_and_cleared_fields(daemon: DaemonProcess) -> None:
    """What a client generated from the .proto sees, old fields included."""
    key = topic()
    with grpc.insecure_channel(f"unix://{daemon.socket}") as channel:
        stub = pb_grpc.MemoryStub(channel)  # type: ignore[no-untyped-call]
        first = stub.Remember(pb.RememberRequest(memory=pb.MemoryInput(
            text=MARCH, topic_key=key, category="planning")))
        assert (first.outcome, first.target_id, first.reinforced) == ("added", "", False)
        again = stub.Remember(pb.RememberRequest(memory=pb.MemoryInput(text=MARCH, topic_key=key)))
        assert (again.outcome, again.target_id, again.id, again.reinforced) == (
            "reinforced", first.id, first.id, True)
        kept = stub.Remember(pb.RememberRequest(memory=pb.MemoryInput(
            text=MARCH, topic_key=key, never_merge=True)))
        assert kept.outcome == "added" and kept.id != first.id
        moved = stub.Supersede(pb.SupersedeRequest(id=first.id, memory=pb.MemoryInput(
            text=APRIL), cleared=["category"]))
        assert (moved.outcome, moved.target_id) == ("superseded", first.id)
        got = stub.Get(pb.GetRequest(id=moved.id)).memory
        assert (got.topic_key, got.category) == (key, "")
        with pytest.raises(grpc.RpcError) as refused:
            stub.Supersede(pb.SupersedeRequest(id=moved.id, memory=pb.MemoryInput(text="x"),
                                               cleared=["text"]))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "cleared" in (refused.value.details() or "")

