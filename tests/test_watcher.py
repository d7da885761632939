"""Watched note folders, end to end: a real daemon, real files, real recall.

Edits, new files and deletions must show in recall within two seconds of
the save; a restart (also after changes made while the daemon was down)
must neither duplicate nor lose a chunk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memvault import Client
from memvault.types import Memory

from .daemon_process import DaemonProcess

SAVE_TO_RECALL_S = 2.0

DEPLOYS = """\
# Memvault

## Storage

The vault keeps a sealed append-only log and periodic snapshots.

## Deploys

We deploy memvault on fridays after lunch.
"""


def write_config(home: Path, notes: Path, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[[watch]]\npath = "{notes}"\n{extra}')


def within(check: Callable[[], bool], timeout: float = SAVE_TO_RECALL_S) -> float:
    """Seconds until `check()` holds; fails the test after `timeout`."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            pytest.fail(f"not reflected within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - started


def scans_done(proc: DaemonProcess, count: int) -> None:
    """Wait for the daemon's `count`th finished scan of the watched folders."""
    within(lambda: proc.log.count("files scanned in") >= count, timeout=30)


def file_memories(client: Client) -> list[Memory]:
    """The visible memories that mirror files, by their source."""
    return sorted((m for m in client.export() if m.source.startswith("file:")
                   and not m.superseded_by), key=lambda m: m.source)


def texts(client: Client, query: str, topic: str) -> list[str]:
    return [h.memory.text for h in client.recall(query, topic=topic, top_k=10)]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "projects").mkdir(parents=True)
    (folder / "projects" / "memvault.md").write_text(DEPLOYS)
    (folder / "todo.txt").write_text("buy a new keyboard\n\ncall the plumber")
    (folder / ".obsidian").mkdir()
    (folder / ".obsidian" / "hidden.md").write_text("# never mirrored")
    return folder


@pytest.fixture
def daemon_with_notes(home: Path, notes: Path) -> Iterator[DaemonProcess]:
    write_config(home, notes, 'glob = "**/*.md"\n')
    with DaemonProcess(home).start() as proc:
        yield proc
        proc.stop()


def test_first_scan_mirrors_markdown_chunks_with_topic_source_and_payload(
        daemon_with_notes: DaemonProcess, notes: Path) -> None:
    with Client(socket=daemon_with_notes.socket) as client:
        within(lambda: len(file_memories(client)) == 2, timeout=30)
        deploys, storage = file_memories(client)
        assert deploys.source == "file:projects/memvault.md#Memvault > Deploys"
        assert deploys.topic_key == "notes.projects.memvault"
        assert deploys.type == "semantic"
        assert deploys.text == "## Deploys\n\nWe deploy memvault on fridays after lunch."
        assert deploys.payload["file"] == "projects/memvault.md"
        assert deploys.payload["folder"] == str(notes.resolve())
        assert len(deploys.payload["sha256"]) == 64
        assert storage.source.endswith("#Memvault > Storage")
        # the .txt file is outside the glob, the hidden folder always is
        assert not any("keyboard" in m.text or "never" in m.text for m in file_memories(client))


def test_edit_add_delete_reach_recall_within_two_seconds(
        daemon_with_notes: DaemonProcess, notes: Path) -> None:
    note = notes / "projects" / "memvault.md"
    with Client(socket=daemon_with_notes.socket) as client:
        within(lambda: len(file_memories(client)) == 2, timeout=30)
        deploys_before, storage_before = file_memories(client)

        # A burst of saves: only the last content counts.
        for day in ("mondays", "tuesdays", "thursdays"):
            note.write_text(DEPLOYS.replace("fridays", day))
            time.sleep(0.01)
        edited = within(lambda: any("thursdays" in t for t in texts(
            client, "when do we deploy memvault", "notes.projects.memvault")))
        deploys_after, storage_after = file_memories(client)
        assert storage_after.id == storage_before.id  # an unchanged chunk is left alone
        assert deploys_after.id != deploys_before.id
        assert deploys_after.supersedes == deploys_before.id
        history = [m.text for m in client.history(deploys_after.id)]
        assert history[0].endswith("fridays after lunch.") and len(history) <= 3

        (notes / "ideas.md").write_text("# Ideas\n\nA garden shed built from pallets.")
        added = within(lambda: any("pallets" in t for t in texts(
            client, "garden shed", "notes.ideas")))

        note.unlink()
        deleted = within(lambda: texts(client, "when do we deploy memvault",
                                       "notes.projects.memvault") == [])
        # forgotten with its history, not merely hidden
        assert not [m for m in client.export() if "memvault" in m.source]
        # ... into the trash, from which the user can take it back
        trashed = [t for t in client.trash() if "memvault" in t.memory.source]
        assert {t.memory.id for t in trashed} >= {deploys_after.id, storage_after.id}
        assert {t.trashed_by for t in trashed} == {"watch"}
        print(f"save to recall: edit {edited:.3f} s, add {added:.3f} s, delete {deleted:.3f} s")


def test_restart_neither_duplicates_nor_loses(home: Path, notes: Path) -> None:
    write_config(home, notes)
    proc = DaemonProcess(home).start()
    try:
        with Client(socket=proc.socket) as client:
            within(lambda: len(file_memories(client)) == 2, timeout=30)
            before = {(m.id, m.text) for m in file_memories(client)}
        assert proc.stop() == 0

        proc.start()
        scans_done(proc, 2)
        with Client(socket=proc.socket) as client:
            assert {(m.id, m.text) for m in file_memories(client)} == before

        # Changes made while the daemon is down are found at the next start.
        assert proc.stop() == 0
        note = notes / "projects" / "memvault.md"
        note.write_text(DEPLOYS.replace("fridays after lunch", "wednesdays at dawn"))
        (notes / "later.md").write_text("# Later\n\nRead the restic design document.")
        proc.start()
        scans_done(proc, 3)
        with Client(socket=proc.socket) as client:
            within(lambda: any("wednesdays" in m.text for m in file_memories(client)))
            after = file_memories(client)
            assert len({m.source for m in after}) == 3
            kept = {(m.id, m.text) for m in after} & before
            assert [text for _, text in kept] == [
                "## Storage\n\nThe vault keeps a sealed append-only log and periodic snapshots."]
        assert proc.stop() == 0
        proc.start()
        scans_done(proc, 4)
        with Client(socket=proc.socket) as client:
            assert {(m.id, m.text) for m in file_memories(client)} == {
                (m.id, m.text) for m in after}
    finally:
        proc.stop()


def test_a_chunk_forgotten_by_hand_comes_back_once(
        daemon_with_notes: DaemonProcess) -> None:
    with Client(socket=daemon_with_notes.socket) as client:
        within(lambda: len(file_memories(client)) == 2, timeout=30)
        _, storage = file_memories(client)
        client.forget(storage.id)
    daemon_with_notes.stop()
    daemon_with_notes.start()
    scans_done(daemon_with_notes, 2)
    with Client(socket=daemon_with_notes.socket) as client:
        assert len(file_memories(client)) == 2
        assert storage.id not in {m.id for m in file_memories(client)}
