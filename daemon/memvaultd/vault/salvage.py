"""`memvault check --repair`: a sound vault made of everything that still authenticates.

Kept: the newest snapshot that authenticates, then every log record after
it that authenticates (in a damaged segment too), applied as a start
applies them. Lost, and said so: the records that do not authenticate
(their seqs, and the memories that later records name but whose own records
were among them), and, when no snapshot authenticates, whatever lived only
in the snapshots.

Written back so that a crash at any moment loses nothing:

1. the sound vault is built beside the old one, in `repair.new/`: a fresh
   log and one snapshot, fsynced, then the file `repair.new/COMPLETE`;
2. the old `log/` and `snapshots/` (and whatever else the caller names, a
   damaged `sync.state`) are moved to `damaged/<time>/`, never deleted
   (`storage/set_aside.py`);
3. the new ones are renamed into their places and `repair.new/` removed.

A crash after 1 leaves COMPLETE behind: the daemon refuses to start
(`check.refuse_unfinished_repair`) until `memvault check --repair`, run
again, finishes 2 and 3 (`finish_repair`). A crash during 1 leaves a
`repair.new/` without COMPLETE, which holds only copies and which the next
repair clears away.

Numbering. Sync knows this device's log by seq: `pushed_seq` is the last
record whose operation the remote holds, and the log must hold every
record after it. With sync set up (`keep_after` = `pushed_seq`) the records
kept after it are written to the fresh log again, numbered on from
`pushed_seq` + 1 (sealed anew, the same operations: one applied twice
changes nothing), and the snapshot sits at the fresh log's last seq; sync
then pushes what the remote lacks as if nothing had happened. Without sync
the fresh log is empty and the snapshot takes the old log's last seq, after
which the next start numbers new records (`OperationLog.continue_after`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memvault_base.durable import sync_dir
from memvault_base.errors import IntegrityError
from memvaultd.crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from memvaultd.model.hlc import Clock
from memvaultd.model.operations import (
    ACCESS,
    MEMORIES,
    PUT,
    REINFORCE,
    TURNS,
    UPDATE,
    Operation,
    decode,
)
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.set_aside import set_aside
from memvaultd.storage.snapshot_body import SnapshotBody, encode_body_parts
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.check import (
    DAMAGED,
    OK,
    REPAIR_COMPLETE,
    REPAIR_STAGING,
    WARNING,
    CheckReport,
    Examination,
    Finding,
    SeqRange,
    seqs_named,
)
from memvaultd.vault.snapshots import capture_state, restore
from memvaultd.vault.state import VaultState

__all__ = ["Salvage", "examine", "finish_repair", "repair"]

_RELOG_BATCH = 1000  # records per append (one fsync each) while the fresh log is written


@dataclass
class Salvage:
    """The state a repair keeps, built as the log is read (`take`)."""

    info: VaultInfo
    base: SnapshotBody | None
    fresh_log: OperationLog | None = None  # the records after `keep_after` go here again
    keep_after: int | None = None
    state: VaultState = field(init=False)
    clock: Clock = field(init=False)
    unparsed: list[int] = field(default_factory=list)
    last_seq: int = 0  # the newest seq that authenticates
    pulled: int = 0  # operations taken back from the remote
    _named: set[str] = field(default_factory=set)
    _taken: set[int] = field(default_factory=set)
    _pending: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = VaultState(self.info.dimension)
        self.clock = Clock(self.info.device_id)
        if self.base is not None:
            restore(self.state, self.base)
            self.clock.observe(self.base.stamp)

    @property
    def base_seq(self) -> int:
        return self.base.seq if self.base is not None else 0

    def take(self, seq: int, plain: bytes) -> None:
        """One record that authenticates, as the log scan finds it."""
        if seq in self._taken:
            return  # the same seq twice (a copied segment): the first one counts
        self._taken.add(seq)
        self.last_seq = max(self.last_seq, seq)
        apply = seq > self.base_seq
        relog = (self.fresh_log is not None and self.keep_after is not None
                 and seq > self.keep_after)
        if not (apply or relog):
            return
        try:
            op = decode(plain)
        except IntegrityError:
            self.unparsed.append(seq)
            return
        if apply:
            self.state.apply(op)
            self.clock.observe(op.stamp)
            if op.kind in (UPDATE, REINFORCE):
                self._named.add(op.target)
            elif op.kind == ACCESS:
                self._named.update(op.ids)
            elif op.kind == PUT and op.memory is not None and op.memory.supersedes:
                self._named.add(op.memory.supersedes)
        if relog:
            self._pending.append(plain)
            if len(self._pending) >= _RELOG_BATCH:
                self.flush()

    def take_pulled(self, op: Operation) -> None:
        """An operation of a version the remote holds: what of it was lost
        here comes back (one already applied changes nothing)."""
        if self.state.apply(op):
            self.clock.observe(op.stamp)
            self.pulled += 1

    def flush(self) -> None:
        if self.fresh_log is not None and self._pending:
            self.fresh_log.append(self._pending)
        self._pending = []

    def lost_memories(self) -> list[str]:
        """Memories later records name that are not held: their puts were lost."""
        layers, tombstones = self.state.layers, self.state.tombstones
        return sorted(name for name in self._named if name not in tombstones
                      and layers[MEMORIES].get(name) is None and layers[TURNS].get(name) is None)


def examine(data_dir: Path, info: VaultInfo, key: bytes, report: CheckReport, *,
            fresh_log: OperationLog | None = None, keep_after: int | None = None) -> Salvage:
    """Check every snapshot and record (findings into `report`) and build
    the state they give, as a repair would keep it."""
    examination = Examination(data_dir, info, key)
    salvage = Salvage(info, examination.read_snapshots(), fresh_log, keep_after)
    scan = examination.read_log(take=salvage.take)
    salvage.flush()
    examination.report(report, scan)
    if salvage.unparsed:
        ranges: list[SeqRange] = [(seq, seq) for seq in salvage.unparsed]
        report.add(Finding("log", "log", DAMAGED,
                           f"{seqs_named(ranges)}: authentic, but the operation held there does "
                           "not parse (written by a newer memvault?): lost", tuple(ranges)))
        report.lost = sorted([*report.lost, *(r for r in ranges if r[0] > salvage.base_seq)],
                             key=lambda r: r[0])
    if keep_after is not None:
        unpushed = [r for r in scan.missing(after=keep_after)
                    if r[0] <= salvage.base_seq]
        if unpushed:
            report.add(Finding("log", "log", DAMAGED,
                               f"{seqs_named(unpushed)}: damaged before the remote had it; "
                               f"what it held is in snapshot {salvage.base_seq} here, but other "
                               "devices will not get it",
                               tuple(unpushed)))
    report.memory_count = len(salvage.state.memories)
    if report.lost:
        report.lost_memories = salvage.lost_memories()
    examination.set_aside(report)
    return salvage


def repair(data_dir: Path, info: VaultInfo, key: bytes, *, keep_after: int | None,
           also_aside: Sequence[tuple[Path, str]] = (),
           pull: Callable[[Callable[[Operation], None]], Finding] | None = None
           ) -> tuple[CheckReport, Path | None]:
    """Write the sound vault in place of the damaged one; returns the
    report of what was read (and lost) and where the old files now are.

    `pull`, for a vault that syncs, walks the remote's chain and hands each
    operation to the repair, which takes back what the remote holds of what
    was lost here; its finding joins the report."""
    staging = data_dir / REPAIR_STAGING
    shutil.rmtree(staging, ignore_errors=True)  # an earlier repair's unfinished copies
    staging.mkdir(mode=0o700)
    vault_id = info.vault_id_bytes
    fresh_log = OperationLog(staging / "log", derive_key(key, purpose=PURPOSE_LOG), vault_id)
    if keep_after is not None:
        fresh_log.continue_after(keep_after)
    report = CheckReport("offline")
    try:
        salvage = examine(data_dir, info, key, report, fresh_log=fresh_log,
                          keep_after=keep_after)
        fresh_log.rotate()
        if pull is not None:
            _pull(report, salvage, pull)
        seq = (fresh_log.last_seq if keep_after is not None
               else max(salvage.base_seq, salvage.last_seq))
    finally:
        fresh_log.close()
    body = capture_state(salvage.state, seq, info.dimension, salvage.clock.last)()
    SnapshotStore(staging / "snapshots", derive_key(key, purpose=PURPOSE_SNAPSHOT),
                  vault_id).write(seq, encode_body_parts(body))
    _mark_complete(staging)
    why = (f"replaced by `memvault check --repair`: the new vault starts from snapshot {seq}"
           + (f"; {seqs_named(report.lost)} could not be kept" if report.lost else ""))
    where = _swap(data_dir, [(data_dir / name, why) for name in ("log", "snapshots")
                             if (data_dir / name).exists()] + list(also_aside))
    return report, where


def _pull(report: CheckReport, salvage: Salvage,
          pull: Callable[[Callable[[Operation], None]], Finding]) -> None:
    held = len(salvage.state.memories)
    finding = pull(salvage.take_pulled)
    if finding.status != OK:
        report.add(Finding(finding.object, "repair", WARNING,
                           f"what the remote holds of the lost records was not taken back: "
                           f"{finding.detail}"))
        return
    report.memory_count = len(salvage.state.memories)
    report.lost_memories = salvage.lost_memories() if report.lost else []
    report.add(Finding(finding.object, "repair", OK,
                       f"taken back from the remote: {salvage.pulled} operations this device "
                       f"had lost ({report.memory_count - held} memories more)"))


def finish_repair(data_dir: Path) -> Path | None:
    """Finish a repair a crash interrupted after its sound vault was complete
    (where the files it replaced are now), or clear one interrupted before;
    None when there was none to finish."""
    staging = data_dir / REPAIR_STAGING
    if not staging.exists():
        return None
    if not (staging / REPAIR_COMPLETE).exists():
        shutil.rmtree(staging)  # only copies, never complete: the old vault is untouched
        return None
    why = "replaced by `memvault check --repair` (finished after an interruption)"
    return _swap(data_dir, [(data_dir / name, why) for name in ("log", "snapshots")
                            if (staging / name).exists() and (data_dir / name).exists()])


def _mark_complete(staging: Path) -> None:
    for name in ("log", "snapshots"):
        sync_dir(staging / name)
    fd = os.open(staging / REPAIR_COMPLETE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    sync_dir(staging)


def _swap(data_dir: Path, aside: list[tuple[Path, str]]) -> Path | None:
    staging = data_dir / REPAIR_STAGING
    where = set_aside(data_dir, aside) if aside else None
    for name in ("log", "snapshots"):
        if (staging / name).exists():
            (staging / name).rename(data_dir / name)
    sync_dir(data_dir)
    (staging / REPAIR_COMPLETE).unlink()
    staging.rmdir()
    sync_dir(data_dir)
    return where

