"""The log keeps what the remote lacks from the moment a daemon starts.

`Syncing.resume` sets the vault's prune floor once the vault has loaded; a
snapshot that ran before it (a write at start-up, with thousands of records
since the last snapshot) used the floor of a vault without sync, and dropped
log records never pushed: sync then stopped for good at "seq N is missing".
`Syncing.keep_unpushed`, which the daemon runs before loading, closes that
gap. These tests open a daemon's vault in this process, as `app/main.py` does.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from memvault import Client
from memvaultd.config.settings import Config
from memvaultd.embedding.embedder import Embedder
from memvaultd.model.commands import MemoryDraft
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.setup import Syncing
from memvaultd.vault.events import EventBus
from memvaultd.vault.vault import Vault

from .daemon_process import PASSPHRASE, DaemonProcess

WRITTEN = 50


def _vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(384)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


@pytest.fixture
def unpushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Vault]:
    """A vault whose sync state says the remote holds none of its records."""
    rng = random.Random(5)
    with DaemonProcess(tmp_path / "home").start() as daemon:
        Client(socket=daemon.socket).remember_batch(
            [{"text": f"kept until pushed {i}", "topic": f"k{i}", "vector": _vector(rng)}
             for i in range(WRITTEN)])
        daemon.stop()
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    events = EventBus()
    embedder = Embedder(Config().model, cache_size=1, events=events)  # never started
    vault = Vault.open(tmp_path / "home" / "data", Config(), embedder, events, prompt=False)
    HighWaterFile(vault.data_dir, vault.vault_key, vault.info.vault_id_bytes).save(
        HighWater("memory://remote", pushed_seq=0))
    yield vault
    vault.close()


def _write_then_snapshot(vault: Vault) -> None:
    """What a write at start-up does when a snapshot is due."""
    vault.load()
    vault.remember([MemoryDraft("written at start-up", topic_key="s",
                                vector=_vector(random.Random(6)))])
    assert vault.snapshot(wait=True)


def test_records_the_remote_lacks_survive_a_snapshot_at_start(unpushed: Vault) -> None:
    Syncing(unpushed).keep_unpushed()
    _write_then_snapshot(unpushed)
    ops, _ = unpushed.local_ops_after(0)
    texts = {op.memory.text for _, op in ops if op.memory is not None}
    assert {f"kept until pushed {i}" for i in range(WRITTEN)} <= texts


def test_without_the_floor_that_snapshot_drops_them(unpushed: Vault) -> None:
    _write_then_snapshot(unpushed)  # start-up without keep_unpushed
    assert not unpushed.holds_log_after(0)
    assert unpushed.local_ops_after(0) is None  # gone: only a re-push would bring them


def test_past_the_backlog_the_floor_lets_go_and_a_repush_carries_the_vault(
        unpushed: Vault) -> None:
    """Sync stopped or offline for long: the records the remote lacks are kept
    up to the backlog (here max(40, twice the vault's 50 memories) = 100),
    then dropped with a snapshot; the next push puts the whole vault again."""
    unpushed.config = replace(unpushed.config, sync_backlog=40)
    Syncing(unpushed).keep_unpushed()
    unpushed.load()
    memories = [m.id for m in unpushed.memories.memories()]
    gone = memories[0]
    unpushed.forget(gone, purge=True)  # a tombstone: re-sent as a forget
    for i in range(40):  # 50 puts, a forget, 40: within the backlog, every record stays
        unpushed.reinforce(memories[1 + i % 10])
    assert unpushed.snapshot(wait=True)
    assert unpushed.local_ops_after(0) is not None
    for i in range(60):  # past it
        unpushed.reinforce(memories[1 + i % 10])
    assert unpushed.snapshot(wait=True)
    assert not unpushed.holds_log_after(0)
    assert unpushed.local_ops_after(0) is None
    # Left: the newest segment, the 60 records since the first snapshot (a
    # log always keeps its newest segment), not the 151 since the floor.
    records = unpushed.applied_txid - unpushed.core.log.first_seq + 1
    assert records <= 60, f"{records} records held"

    before = unpushed.repush()
    found = unpushed.local_ops_after(before)
    assert found is not None
    ops = [op for _, op in found[0]]
    puts = {op.memory.id: op.memory for op in ops if op.memory is not None}
    assert set(puts) == set(memories) - {gone}
    assert {op.target for op in ops if op.kind == "forget"} == {gone}
    assert puts[memories[1]].reinforce_count == 10
