"""A consolidated memory never outlives what it summarises, through the real
daemon: the chunks of watched files are never consolidated, and a summary
whose source is edited, superseded or forgotten is retired (archived) with
its other sources back in recall."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault import Client
from memvault.types import Memory

from .daemon_process import DaemonProcess

DAY = 86_400.0
DEPLOY = ["The deploy script lives in ops/deploy.sh.",
          "The deploy script ops/deploy.sh needs sudo. Run it from the repo root.",
          "Run the deploy script ops/deploy.sh after the tests pass."]
NOTE = """\
# Deploys

## Script

The deploy script lives in ops/deploy.sh.

## Rights

The deploy script ops/deploy.sh needs sudo. Run it from the repo root.

## Order

Run the deploy script ops/deploy.sh after the tests pass.
"""


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notes")


@pytest.fixture(scope="module")
def upkeep_daemon(tmp_path_factory: pytest.TempPathFactory, notes: Path
                  ) -> Iterator[DaemonProcess]:
    # A vault of its own (consolidation acts on the whole vault), watching a folder.
    home = tmp_path_factory.mktemp("consolidation") / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[sweep]\nevery_hours = 0\n\n[[watch]]\npath = "{notes}"\n')
    with DaemonProcess(home).start() as proc:
        yield proc
        proc.stop()


@pytest.fixture
def client(upkeep_daemon: DaemonProcess) -> Iterator[Client]:
    with Client(socket=upkeep_daemon.socket) as c:
        yield c


def _old(text: str, topic: str) -> Memory:
    at = time.time() - 30 * DAY
    return Memory(id=uuid.uuid4().hex, text=text, topic_key=topic, created_at=at,
                  last_reinforced_at=at)


def _eventually(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def _consolidated(client: Client, topic: str) -> tuple[Memory, list[Memory]]:
    originals = [_old(text, topic) for text in DEPLOY]
    client.import_memories(originals)
    (done,) = [c for c in client.consolidate(min_age_days=0).consolidations
               if c.topic_key == topic]
    summary = client.get(done.id)
    assert summary.consolidated_from == tuple(m.id for m in originals)
    return summary, originals


def _retired(client: Client, summary: Memory, back: list[Memory]) -> None:
    assert client.get(summary.id).tier == "archived"
    for source in back:
        got = client.get(source.id)
        assert (got.tier, got.consolidated_into) == ("long_term", "")
    hits = {h.memory.id for h in client.recall("where does the deploy script live", top_k=10,
                                               mark_accessed=False)}
    assert summary.id not in hits, "a stale summary is never recalled"


def test_the_chunks_of_a_watched_file_are_never_consolidated(client: Client, notes: Path) -> None:
    (notes / "deploys.md").write_text(NOTE)

    def chunks() -> list[Memory]:
        return [m for m in client.export() if m.source.startswith("file:")
                and not m.superseded_by]

    _eventually(lambda: len(chunks()) == 3)
    done = client.consolidate(min_age_days=0)
    assert not {s for c in done.consolidations for s in c.sources} & {m.id for m in chunks()}
    assert all(m.tier != "archived" and not m.consolidated_into for m in chunks())


def test_superseding_a_source_retires_its_summary(client: Client) -> None:
    summary, originals = _consolidated(client, f"deploy.{uuid.uuid4().hex[:6]}")
    client.supersede(originals[0].id, "The deploy script lives in tools/deploy.sh.")
    _retired(client, summary, originals[1:])


def test_editing_a_source_retires_its_summary(client: Client) -> None:
    summary, originals = _consolidated(client, f"deploy.{uuid.uuid4().hex[:6]}")
    client.update(originals[1].id, text="The deploy script needs no sudo any more.")
    _retired(client, summary, originals)


def test_a_summary_whose_source_was_forgotten_is_retired_by_the_next_run(client: Client) -> None:
    summary, originals = _consolidated(client, f"deploy.{uuid.uuid4().hex[:6]}")
    client.forget(originals[2].id)
    client.consolidate(dry_run=True)
    assert client.get(summary.id).tier == "long_term", "a dry run changes nothing"
    client.consolidate(min_age_days=0)
    _retired(client, summary, originals[:2])
