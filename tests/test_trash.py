"""The trash through the real daemon, its CLI, the MCP bridge and two synced
devices: forget moves a memory to the trash, restore brings it back whole,
the background upkeep purges it after `trash.retention_days`, `--purge`
skips it, and an agent cannot purge (the merge rules alone:
tests/test_merge.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp import ClientSession

from memvault import Client
from memvault.types import Memory
from memvault_base.errors import NotFound

from .daemon_process import DaemonProcess
from .test_cli import memvault
from .test_mcp import _call, _with_bridge

DAY = 86_400.0
NO_BACKGROUND_SWEEP = "[sweep]\nevery_hours = 0\n"


def _daemon(home: Path, config: str = NO_BACKGROUND_SWEEP) -> DaemonProcess:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(config)
    return DaemonProcess(home)


def _eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def _in_trash(client: Client, memory_id: str) -> bool:
    return memory_id in {t.memory.id for t in client.trash()}


def _live(client: Client, memory_id: str) -> bool:
    try:
        client.get(memory_id)
    except NotFound:
        return False
    return True


def _whole(client: Client, memory_id: str) -> dict[str, object]:
    """Every field of the memory, its vector included."""
    return client.get(memory_id, include_vector=True).to_dict()


def _rich_memory(client: Client, topic: str, recalled: bool = True) -> str:
    """A memory with every kind of field set, reinforced, updated and (unless
    not `recalled`) recalled."""
    memory_id = client.remember(
        "the staging database is restored from the nightly dump at 04:00", topic=topic,
        type="procedural", payload={"db": "staging", "hours": [4]}, entity="staging-db",
        tags=["ops", "db"], category="infrastructure", importance=0.8, session="s-42",
        source="runbook", expires_at=time.time() + 400 * DAY).id
    client.reinforce(memory_id)
    client.update(memory_id, tags=["ops", "db", "restore"], protected=True)
    hits = client.recall("when is staging restored", topic=topic, mark_accessed=recalled)
    assert hits[0].memory.id == memory_id
    return memory_id


@pytest.fixture(scope="module")
def trash_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    with _daemon(tmp_path_factory.mktemp("trash") / "home").start() as daemon:
        yield daemon
        daemon.stop()


@pytest.fixture
def client(trash_daemon: DaemonProcess) -> Iterator[Client]:
    with Client(socket=trash_daemon.socket) as c:
        yield c


def test_forget_then_restore_gives_the_memory_back_with_every_field(
        trash_daemon: DaemonProcess, client: Client) -> None:
    home, topic = trash_daemon.home, f"ops.{uuid.uuid4().hex[:6]}"
    memory_id = _rich_memory(client, topic)
    before = _whole(client, memory_id)

    forgot = memvault(home, "forget", memory_id)
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout.startswith(f"forgot {memory_id}")
    assert f"memvault trash restore {memory_id}" in forgot.stderr
    # Every read but the trash's own no longer sees it.
    assert client.recall("when is staging restored", topic=topic) == []
    assert topic not in {t.name for t in client.list_topics()}
    assert memory_id not in {m.id for m in client.export()}
    missing = memvault(home, "get", memory_id)
    assert missing.returncode == 4 and "in the trash" in missing.stderr
    with pytest.raises(NotFound, match="in the trash"):
        client.update(memory_id, category="edited while forgotten")

    listed = memvault(home, "trash", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = [e for e in json.loads(listed.stdout) if e["id"] == memory_id]
    assert entry["text"] == before["text"] and entry["trashed_by"] == "cli"
    assert time.time() - 60 < entry["trashed_at"] <= time.time()
    assert entry["purge_at"] == pytest.approx(entry["trashed_at"] + 30 * DAY)
    assert entry["memory"]["tags"] == ["ops", "db", "restore"]
    assert memory_id[:8] in memvault(home, "trash").stdout  # the table shows 8 characters
    assert client.status().trash_count >= 1

    # It stays in the trash across a restart (the stop's snapshot holds it).
    assert trash_daemon.stop() == 0
    trash_daemon.start()
    assert _in_trash(client, memory_id) and not _live(client, memory_id)

    restored = memvault(home, "trash", "restore", memory_id)
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout == f"{memory_id}\n" and "restored 1 memory" in restored.stderr
    assert _whole(client, memory_id) == before
    assert not _in_trash(client, memory_id)
    assert client.recall("when is staging restored", topic=topic)[0].memory.id == memory_id
    assert topic in {t.name for t in client.list_topics()}


def test_purge_skips_the_trash_and_cannot_be_undone(trash_daemon: DaemonProcess,
                                                   client: Client) -> None:
    home = trash_daemon.home
    gone = client.remember(f"a secret pasted by mistake {uuid.uuid4().hex}").id
    purged = memvault(home, "forget", gone, "--purge", "--json")
    assert purged.returncode == 0, purged.stderr
    assert json.loads(purged.stdout)["purged"] is True
    assert not _in_trash(client, gone) and not _live(client, gone)
    again = memvault(home, "trash", "restore", gone)
    assert again.returncode == 4 and "purged" in again.stderr

    # A filter with --purge also takes what of the trash it matches.
    tag = uuid.uuid4().hex[:8]
    trashed = client.remember("the wifi password of the old office", tags=[tag]).id
    live = client.remember("a draft of the resignation letter", tags=[tag]).id
    client.forget(trashed)
    both = memvault(home, "forget", "--filter", json.dumps({"tags": {"contains": tag}}),
                    "--purge")
    assert both.returncode == 0, both.stderr
    assert sorted(both.stdout.split()) == sorted([trashed, live])
    assert not {trashed, live} & {t.memory.id for t in client.trash()}
    usage = memvault(home, "forget", "--sweep", "--purge")
    assert usage.returncode == 2 and "--purge goes with ID or --filter" in usage.stderr


def test_restore_all_and_empty_with_confirmation(trash_daemon: DaemonProcess,
                                                client: Client) -> None:
    home = trash_daemon.home
    client.empty_trash()  # what the tests before left there
    ids = [client.remember(text).id for text in (
        "the cat's vet appointment is on tuesday", "lunch orders go in the shared sheet",
        "the old build server's ip was 10.0.0.7")]
    for memory_id in ids:
        client.forget(memory_id, by="a script")
    assert {t.trashed_by for t in client.trash()} == {"a script"}
    back = memvault(home, "trash", "restore", "--all", "--json")
    assert back.returncode == 0, back.stderr
    assert sorted(m["id"] for m in json.loads(back.stdout)["memories"]) == sorted(ids)
    assert all(_live(client, memory_id) for memory_id in ids) and client.trash() == []

    for memory_id in ids:
        client.forget(memory_id)
    refused = _memvault_with_input(home, "n\n", "trash", "empty")
    assert refused.returncode == 1 and "Purge 3 memories for good" in refused.stderr
    assert len(client.trash()) == 3
    emptied = _memvault_with_input(home, "y\n", "trash", "empty")
    assert emptied.returncode == 0, emptied.stderr
    assert sorted(emptied.stdout.split()) == sorted(ids)
    assert client.trash() == [] and not any(_live(client, i) for i in ids)
    assert memvault(home, "trash", "empty").stderr == "the trash is empty\n"


def _memvault_with_input(home: Path, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args],
                          env=dict(os.environ, MEMVAULT_HOME=str(home)), input=answer,
                          capture_output=True, text=True, timeout=60)


def test_the_trash_syncs_to_a_second_device(tmp_path: Path) -> None:
    """Through a directory remote: a trash made before `init` (carried by its
    puts) and one made before `join`, a forget, a restore and an empty on
    the other device; each device ends holding what the other holds."""
    remote = (tmp_path / "shared").as_uri()
    with _daemon(tmp_path / "a").start() as a, _daemon(tmp_path / "b").start() as b, \
            Client(socket=a.socket) as ca, Client(socket=b.socket) as cb:
        early_a = ca.remember("trashed on the laptop before sync existed").id
        ca.forget(early_a)
        early_b = cb.remember("trashed on the desktop before it joined").id
        cb.forget(early_b)
        cb.join_sync(remote, ca.init_sync(remote).recovery_key)
        for client in (ca, cb):
            _eventually(lambda c=client: _in_trash(c, early_a) and _in_trash(c, early_b))

        topic = f"sync.{uuid.uuid4().hex[:6]}"
        # Not marked accessed: access marks reach other devices at the next
        # round of sync, not at once, and this compares both devices' copies.
        shared = _rich_memory(ca, topic, recalled=False)
        _eventually(lambda: _live(cb, shared) and _whole(cb, shared) == _whole(ca, shared))
        before = _whole(ca, shared)
        ca.forget(shared)
        _eventually(lambda: _in_trash(cb, shared) and not _live(cb, shared))
        assert cb.recall("when is staging restored", topic=topic) == []
        (entry,) = [t for t in cb.trash() if t.memory.id == shared]
        assert entry.trashed_by == "client"

        assert [m.id for m in cb.restore([shared]).memories] == [shared]
        _eventually(lambda: _live(ca, shared) and not _in_trash(ca, shared))
        assert _whole(ca, shared) == before == _whole(cb, shared)

        ca.forget(shared)
        _eventually(lambda: _in_trash(cb, shared))
        assert set(cb.empty_trash().ids) == {shared, early_a, early_b}
        _eventually(lambda: ca.trash() == [])
        assert not _live(ca, shared)
        with pytest.raises(NotFound, match="purged"):
            ca.restore([shared])
        a.stop()
        b.stop()


def test_the_trash_is_purged_after_its_retention_and_the_purge_syncs(tmp_path: Path) -> None:
    """Device a keeps the trash 4 s (its background check runs every
    second), b keeps the default 30 days: what b forgets, a purges, and b
    receives the purge."""
    short = NO_BACKGROUND_SWEEP + "[trash]\nretention_days = 0.00005\n"  # 4.3 s
    remote = (tmp_path / "shared").as_uri()
    with _daemon(tmp_path / "a", short).start() as a, _daemon(tmp_path / "b").start() as b, \
            Client(socket=a.socket) as ca, Client(socket=b.socket) as cb:
        cb.join_sync(remote, ca.init_sync(remote).recovery_key)
        memory_id = cb.remember("a note forgotten on the desktop").id
        cb.forget(memory_id)
        forgotten_at = time.time()
        (entry,) = cb.trash()
        assert entry.purge_at == pytest.approx(entry.trashed_at + 30 * DAY)
        _eventually(lambda: _in_trash(ca, memory_id))
        _eventually(lambda: not _in_trash(ca, memory_id), timeout=30)
        assert time.time() - forgotten_at >= 4.0, "purged before its retention was over"
        _eventually(lambda: not _in_trash(cb, memory_id), timeout=30)
        for client in (ca, cb):
            with pytest.raises(NotFound, match="purged"):
                client.restore([memory_id])
        a.stop()
        b.stop()


def test_the_mcp_bridge_forgets_into_the_trash_and_cannot_purge(
        trash_daemon: DaemonProcess, client: Client) -> None:
    topic = f"mcp.{uuid.uuid4().hex[:6]}"
    memory_id = _rich_memory(client, topic)
    before = _whole(client, memory_id)
    old = time.time() - 300 * DAY
    minor, swept_away = (Memory(id=uuid.uuid4().hex, text=text, importance=0.05,
                                created_at=old, last_reinforced_at=old) for text in (
        "an old scribble an agent was told to purge", "an old scribble an agent swept away"))
    client.import_memories([minor, swept_away])

    async def body(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert "purge" not in tools["forget"].input_schema["properties"]
        assert not {name for name in tools if "trash" in name or "purge" in name}
        assert "memvault trash restore" in (tools["forget"].description or "")
        reply = await _call(session, "forget", id=memory_id)
        assert reply == {"id": memory_id, "forgotten": True, "in_trash": True,
                         "restore": f"memvault trash restore {memory_id}"}
        # An argument the tool does not declare is dropped: still the trash.
        insisted = await _call(session, "forget", id=minor.id, purge=True)
        assert insisted["in_trash"] is True
        swept = await _call(session, "forget", sweep=True)
        assert swept_away.id in {s["id"] for s in swept["forgotten"]}
        assert swept["in_trash"] is True and "memvault trash restore" in swept["restore"]

    _with_bridge(str(trash_daemon.home), body)
    held = {t.memory.id: t.trashed_by for t in client.trash()}
    assert (held[memory_id], held[minor.id], held[swept_away.id]) == ("mcp", "mcp", "sweep")
    client.restore([memory_id, minor.id, swept_away.id])
    assert _whole(client, memory_id) == before
    assert client.get(minor.id).text == minor.text
    assert client.get(swept_away.id).text == swept_away.text
