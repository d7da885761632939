"""The sync worker's high-water mark check, on a remote in this process.

What the check downloads decides what an idle device costs its remote: every
round (each write, each notice, every 30 s) used to fetch version `head`
whole, up to 3 MiB after a bulk upload. These tests count those downloads
and show that a replaced version is still reported as a fork. The same check
through real daemons and a directory remote: `test_sync.py`. And what a
round that fails at its first steps leaves in the status (a failure at the
remote, through the real daemon: `test_sync_cli.py`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memvault_base.errors import RollbackDetected
from memvaultd.model.hlc import Stamp
from memvaultd.model.operations import ACCESS, FORGET, Operation
from memvaultd.sync import mark as chain_mark
from memvaultd.sync import signatures
from memvaultd.sync.envelope import VERSION, Envelope, chain_context
from memvaultd.sync.exchange import marks_wait
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.version_body import pack_ops, unpack_ops
from memvaultd.sync.worker import SyncWorker

from .signed_chain import registered, signed_version, worker_devices


class _IdleVault:
    """The part of a vault the worker calls, with nothing local to push."""

    def __init__(self) -> None:
        self.applied: list[Operation] = []
        self.prune_floor: int | None = 0

    def keep_log_from(self, seq: int | None) -> None:
        self.prune_floor = seq

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int]:
        return [], seq

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        self.applied += ops
        return len(ops)

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        return None

    def size(self) -> int:
        return 0


class _Counting:
    """A remote that counts the version objects it hands out."""

    def __init__(self, inner: Remote) -> None:
        self.inner = inner
        self.versions_read = 0

    def versions_after(self, number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        found = self.inner.versions_after(number, limit)
        self.versions_read += len(found)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Chain:
    """Versions sealed as another device of the vault would seal them."""

    def __init__(self, remote: Remote, envelope: Envelope) -> None:
        self.remote, self.envelope = remote, envelope
        self.device = registered(remote, envelope)
        self.hashes: list[bytes] = []

    def append(self, parent: bytes | None = None) -> bytes:
        number = len(self.hashes) + 1
        parent = (self.hashes[-1] if self.hashes else b"") if parent is None else parent
        blob = signed_version(self.device, number, parent, pack_ops([]))
        assert self.remote.append_version(number, parent, blob)
        self.hashes.append(hashlib.sha256(blob).digest())
        return blob


@pytest.fixture
def setup(tmp_path: Path) -> tuple[SyncWorker, _Counting, _Chain]:
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    counting = _Counting(remote)
    chain = _Chain(remote, envelope)
    for _ in range(3):
        chain.append()
    marks = HighWaterFile(tmp_path, os.urandom(32), vault_id)
    worker = SyncWorker(_IdleVault(), counting, marks,  # type: ignore[arg-type]
                        HighWater("memory://test"), envelope,
                        **worker_devices(remote, envelope))
    worker.sync_once()  # pulls versions 1-3: 3 downloads
    assert worker.high_water.head == 3 and counting.versions_read == 3
    counting.versions_read = 0
    return worker, counting, chain


def _replace_head(chain: _Chain) -> None:
    """Another object at the number the worker has seen (a fork in place)."""
    vault = chain.remote._vault  # type: ignore[attr-defined]
    vault.versions[-1] = signed_version(chain.device, len(vault.versions), b"x" * 32,
                                        pack_ops([]))


def test_idle_rounds_do_not_download_the_head_again(setup: tuple[SyncWorker, _Counting, _Chain]
                                                    ) -> None:
    worker, counting, _ = setup
    for _ in range(20):
        worker.sync_once(full_check=False)
    assert counting.versions_read == 0, "an idle round fetched version `head` again"
    worker.sync_once()  # `sync now`
    assert counting.versions_read == 1


def test_a_new_version_is_downloaded_once(setup: tuple[SyncWorker, _Counting, _Chain]) -> None:
    worker, counting, chain = setup
    chain.append()
    for _ in range(5):
        worker.sync_once(full_check=False)
    assert worker.high_water.head == 4 and counting.versions_read == 1


def test_a_head_replaced_in_place_is_reported_by_sync_now(
        setup: tuple[SyncWorker, _Counting, _Chain]) -> None:
    worker, _, chain = setup
    _replace_head(chain)
    worker.sync_once(full_check=False)  # trusted for up to an hour
    with pytest.raises(RollbackDetected, match="forked or replaced"):
        worker.sync_once()
    assert worker.status.state == "stopped"


def test_a_head_replaced_in_place_is_reported_within_the_recheck_time(
        setup: tuple[SyncWorker, _Counting, _Chain], monkeypatch: pytest.MonkeyPatch) -> None:
    worker, _, chain = setup
    _replace_head(chain)
    monkeypatch.setattr(chain_mark, "RECHECK_S", 0.0)
    with pytest.raises(RollbackDetected, match="forked or replaced"):
        worker.sync_once(full_check=False)


def test_a_version_built_on_a_replaced_head_is_reported_as_a_fork(
        setup: tuple[SyncWorker, _Counting, _Chain]) -> None:
    worker, _, chain = setup
    _replace_head(chain)
    vault = chain.remote._vault  # type: ignore[attr-defined]
    chain.hashes[-1] = hashlib.sha256(vault.versions[-1]).digest()
    chain.append()  # version 4, whose parent is the replaced version 3
    with pytest.raises(RollbackDetected, match="forked or replaced"):
        worker.sync_once(full_check=False)
    assert worker.high_water.head == 3, "nothing of the fork was applied"


def test_a_push_sends_what_follows_the_mark_in_order_in_versions_of_1000(
        setup: tuple[SyncWorker, _Counting, _Chain]) -> None:
    """The operations after the mark's `pushed_seq`, each once, in log
    order, 1,000 to a version; those up to it (met by a pull as versions of
    this device's own) are not sent again."""
    worker, counting, chain = setup
    pending = [(seq, Operation(f"op{seq}", ACCESS, Stamp(1, seq, "dev"), ids=(f"m{seq}",),
                               at=1.0)) for seq in range(1, 2501)]
    worker.mark.advance(worker.high_water.head, worker.mark.head_hash(), pushed_seq=1200)
    assert worker.push(pending, 2600) == 1300
    assert worker.high_water.head == 5 and worker.high_water.pushed_seq == 2600
    parent, sent = chain.hashes[-1], []
    for number, blob in counting.inner.versions_after(3, limit=10):
        body = worker.envelope.open(VERSION, signatures.sealed_part(blob),
                                    chain_context(number, parent), name="v")
        sent.append([op.op_id for op in unpack_ops(body, "v")])
        parent = hashlib.sha256(blob).digest()
    assert [len(ops) for ops in sent] == [1000, 300]
    assert [op for ops in sent for op in ops] == [f"op{seq}" for seq in range(1201, 2501)]


def test_access_marks_alone_wait_for_the_next_period_and_a_write_carries_them() -> None:
    hour = 3600.0
    now = 1_000 * 6 * hour + 2 * hour  # two hours into a six-hour period

    def op(kind: str, seconds: float) -> tuple[int, Operation]:
        return 1, Operation(uuid.uuid4().hex, kind, Stamp(int(seconds * 1000), 0, "d"),
                            ids=("m",), target="m", at=seconds)

    assert marks_wait([op(ACCESS, now - hour)], now, 6 * hour)
    assert marks_wait([op(ACCESS, now - hour), op(ACCESS, now)], now, 6 * hour)
    # One mark of the period before: they all go.
    assert not marks_wait([op(ACCESS, now - 3 * hour), op(ACCESS, now)], now, 6 * hour)
    # A write goes at once, and takes the marks before it along.
    assert not marks_wait([op(ACCESS, now - hour), op(FORGET, now)], now, 6 * hour)
    assert not marks_wait([], now, 6 * hour)


def test_a_round_that_fails_reading_the_backlog_reads_offline_naming_it(
        setup: tuple[SyncWorker, _Counting, _Chain]) -> None:
    """The round's first steps fail (reading the log of what waits to be
    pushed, on a disk that refuses it): the status says offline with the
    error at once, not syncing with none; the next round that succeeds
    is idle again."""
    worker, _, _ = setup
    vault = worker.vault

    def refused(seq: int) -> tuple[list[tuple[int, Operation]], int]:
        raise OSError(5, "Input/output error")

    vault.local_ops_after = refused  # type: ignore[method-assign]
    with pytest.raises(OSError):
        worker.sync_once()
    assert worker.status.state == "offline", worker.status
    assert "Input/output error" in worker.status.last_error
    del vault.local_ops_after
    worker.sync_once()
    assert worker.status.state == "idle" and not worker.status.last_error
