"""The vault as sync sees it: this device's operations to push, pulled
operations to apply, the state for a remote snapshot, `genesis` for `init`
and `adopt` for `join`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from memvault_base.errors import IntegrityError
from memvaultd.crypto.entropy import drawing, new_id
from memvaultd.crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from memvaultd.model.hlc import MAX_AHEAD_MS, ClockAhead, ahead_ms
from memvaultd.model.op_ids import OpIds
from memvaultd.model.operations import FORGET, PUT, Operation, decode, encode
from memvaultd.storage.crash_points import reached
from memvaultd.storage.join_journal import JoinJournal
from memvaultd.storage.keys import store_joined_key
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.snapshot_body import SnapshotBody, encode_body, encode_body_parts
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import MAX_BATCH, VaultCore
from memvaultd.vault.genesis import PendingPuts
from memvaultd.vault.snapshots import Snapshots, capture_state
from memvaultd.vault.state import VaultState

log = logging.getLogger("memvaultd.vault")

# Puts `genesis` logs under one hold of the write lock. 1,000 held it ~70 ms
# alone at 100k, longer beside the first upload; with 250, a remember every
# 20 ms from `init` to the upload's end (bench_sync.py --n 100000, two runs
# each, back to back) took p50 26 ms against 38-40, p99 236-313 against
# 341-434, and 35% more of them were served; the upload took 27.9-32.4 s
# against 27.7-27.8 (4 x the fsyncs).
_GENESIS_CHUNK = 250
_GENESIS_PAUSE_S = 0.001  # between chunks: 0.4 s in all at 100k


class Replication:
    def __init__(self, core: VaultCore, marks: AccessMarks, snapshots: Snapshots) -> None:
        self.core = core
        self.marks = marks
        self.snapshots = snapshots

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int] | None:
        """This device's operations logged after `seq`, in order (what the
        remote may lack), and the log seq the scan reached: once these are
        pushed, the remote holds everything of this device up to that seq.
        None when the log no longer holds them all (past the sync backlog:
        `Snapshots._prune_to`); then only `repush` brings the remote level.

        Only that seq is read under the write lock; the records up to it are
        read and decoded after, beside new writes (`OperationLog.replay`
        with `upto`). Reading them under the lock held every write back for
        as long as a backlog took to decode: after `init` on a vault of
        100k memories, or a remote down for long, seconds at every round.
        Access marks are among them; when they travel is the worker's
        choice (`sync/exchange.marks_wait`)."""
        core = self.core
        with core.write_lock:
            upto = core.log.last_seq
        if not self.holds_log_after(seq):
            return None
        info = core.info
        try:
            ops = [(at, op) for at, record in core.log.replay(after=seq, upto=upto)
                   if info.wrote((op := decode(record)).stamp.device, at)]
        except IntegrityError:
            if not self.holds_log_after(seq):
                return None  # pruned while being read
            raise
        return ops, upto

    def holds_log_after(self, seq: int) -> bool:
        """Whether the log still holds every record after `seq`."""
        log_ = self.core.log
        return seq >= log_.last_seq or log_.first_seq <= seq + 1

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        """Log and apply the operations of a pulled version that are new here.
        A version with an operation stamped over a day ahead of this
        device's clock is refused whole (`model/hlc.py` says why)."""
        core = self.core
        core.await_loaded()
        furthest = max(ops, key=lambda op: op.stamp, default=None)
        if furthest is not None and ahead_ms(furthest.stamp) > MAX_AHEAD_MS:
            hours = ahead_ms(furthest.stamp) / 3_600_000
            raise ClockAhead(
                f"a pulled version holds an operation of device {furthest.stamp.device} stamped "
                f"{hours:.1f} h ahead of this device's clock (at most "
                f"{MAX_AHEAD_MS // 3_600_000} h is taken): set that device's clock, or this "
                "one's, right. Sync takes the version once this clock is within the bound")
        with core.write_lock:
            fresh = [op for op in ops if op.op_id not in core.state.seen]
            if fresh:
                core.commit(fresh, local=False)
            return len(fresh)

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        """The state body for a remote snapshot, if every local operation is
        pushed (then the state is exactly the chain's); else None."""
        core = self.core
        with core.write_lock:
            for at, record in core.log.replay(after=pushed_seq):
                if core.info.wrote(decode(record).stamp.device, at):
                    return None
            capture = self.snapshots.capture()
        return encode_body(capture())

    def size(self) -> int:
        """Memories and turns held (forgotten ones not counted)."""
        return sum(len(layer) for layer in self.core.state.layers.values())

    def genesis(self) -> int:
        """Log a put of every memory and turn this device holds, so a remote
        that never saw them gets them; returns the log seq before them.

        The puts are cut in one hold of the write lock (`PendingPuts`), then
        made and logged `_GENESIS_CHUNK` at a time with the lock released in
        between: held throughout, it kept every write waiting for 7.3 s at
        100k memories.
        Writes go on between two chunks. One that names a memory whose put
        is not logged yet (an update, a reinforce, an access mark, a
        supersession) logs that put just before itself (`_genesis_ahead`):
        another device applies the operations in log order, and drops an
        update of a memory it does not hold yet. The puts' stamps are drawn
        before any such write, so the write's fields win over the put's.

        No snapshot is taken until the last chunk is in, then one if due,
        rather than one every tenth of the vault: none of these records can
        be pruned before the remote holds them, and each snapshot held
        writes back for ~1 s at 100k."""
        core = self.core
        with core.write_lock:
            before = core.log.last_seq
            core.genesis_rest = PendingPuts.cut(core.state.layers, core.clock,
                                                core.state.stamps)
        try:
            while True:
                with core.write_lock:
                    chunk = core.genesis_rest.next(_GENESIS_CHUNK)
                    if not chunk:
                        break
                    core.commit(chunk, genesis=True)
                # Python's locks are not fair: released and taken again at
                # once, the lock went back to this loop before a waiting
                # write woke up (one remember waited 5.8 s of a 100k init).
                time.sleep(_GENESIS_PAUSE_S)
        finally:
            with core.write_lock:
                core.genesis_rest = PendingPuts()
                self.snapshots.if_due()
        return before

    def repush(self) -> int:
        """Log, for a remote that lacks part of this device's history (its
        log records were dropped past the sync backlog, or the vault moved
        to a fresh chain), a put of every memory and turn held and a forget
        of every tombstone: together they carry the whole state. Returns the
        log seq before them; the log is kept from there until they are
        pushed. Counters (reinforce, access) merge as puts do, by maximum.
        """
        core = self.core
        with core.write_lock:
            core.prune_floor = core.log.last_seq
        before = self.genesis()
        with core.write_lock:
            tombstones = sorted(core.state.tombstones)
        for start in range(0, len(tombstones), _GENESIS_CHUNK):
            with core.write_lock:
                now = time.time()
                core.commit([Operation(new_id(), FORGET, core.clock.now(), target=memory_id,
                                       at=now)
                             for memory_id in tombstones[start : start + _GENESIS_CHUNK]],
                            genesis=True)
            time.sleep(_GENESIS_PAUSE_S)
        log.info("re-put the whole vault for the remote: %d memories and turns, %d forgets",
                 self.size(), len(tombstones))
        return before

    def adopt(self, info: VaultInfo, key: bytes, base: SnapshotBody | None,
              stage: Callable[[Path], None]) -> int:
        """Become another vault (`join`): its id and key, starting from `base`
        (its newest snapshot), with every memory this device held put into it
        so nothing is lost. `stage(directory)` writes sync's own files of
        the joined vault there. Returns the log seq before those puts (what
        the remote lacks starts after it): 0, the new log's start.

        One step a crash cannot split (`storage/join_journal.py`): the key is
        stored as the current one is (`store_joined_key`: nothing to ask
        for), the whole joined vault is written in `join.staging/` (its log
        of the puts, a snapshot of base + puts, `vault.json`, sync's files,
        a key file), the journal commits it, and the files are swapped. Until
        the commit the current vault is untouched; after it, a crash is
        finished at the next start. Writes wait throughout, and so does a
        snapshot: one of the current vault sealed after the swap would be
        taken for the joined vault's newest.
        """
        core = self.core
        core.await_loaded()
        journal = JoinJournal(core.data_dir)
        with self.snapshots.exclusive(), core.write_lock:
            self.marks.flush_locked()
            staging = journal.begin()
            try:
                unlocked = store_joined_key(staging, info.vault_id_bytes, key, core.unlocked)
                reached("join:key")
                state, count = self._stage(staging, info, key, base)
                info.save(staging)
                stage(staging)
                reached("join:staged")
                journal.commit(info.vault_id, core.info.vault_id)
            except BaseException:
                journal.abandon()  # nothing of the current vault was touched
                raise
            reached("join:journaled")
            core.log.close()
            journal.roll_forward()
            core.become(info, unlocked)
            core.state = state
            core.set_applied(core.log.last_seq)
            self.snapshots.txid = core.log.last_seq
            # The joined state's changes are not counted from a snapshot: a
            # stop seals it whole.
            self.snapshots.delta_base, self.snapshots.delta_txid = None, 0
        reached("join:done")
        log.info("joined vault %s with %d memories of this device", info.vault_id, count)
        return 0

    @drawing()
    def _stage(self, staging: Path, info: VaultInfo, key: bytes, base: SnapshotBody | None
               ) -> tuple[VaultState, int]:
        """The joined vault's log (a put of every memory held here) and its
        snapshot (base + those puts) in `staging`; its state, and how many
        puts. The caller holds the write lock."""
        core = self.core
        vault_id = info.vault_id_bytes
        new_log = OperationLog(staging / "log", derive_key(key, purpose=PURPOSE_LOG), vault_id)
        state = VaultState(info.dimension)
        if base is not None:
            state.restore_rows(base.memories, base.vectors, base.turns, base.turn_vectors,
                               set(base.tombstones), OpIds(base.seen), base.stamps)
            state.upkeep = dict(base.upkeep)
        mine = []
        for layer_name, layer in core.state.layers.items():
            memories, vectors = layer.index.export()
            mine += [Operation(new_id(), PUT, core.clock.now(), memory=memory,
                               vector=vector, layer=layer_name)
                     for memory, vector in zip(memories, vectors, strict=True)]
        try:
            for start in range(0, len(mine), MAX_BATCH):
                new_log.append([encode(op) for op in mine[start : start + MAX_BATCH]])
            seq = new_log.last_seq
        finally:
            new_log.close()
        for op in mine:
            state.apply(op)
        reached("join:log-staged")
        # The base came from the remote, not the log: the snapshot keeps it.
        body = capture_state(state, seq, info.dimension, core.clock.last)()
        SnapshotStore(staging / "snapshots", derive_key(key, purpose=PURPOSE_SNAPSHOT),
                      vault_id).write(seq, encode_body_parts(body))
        return state, len(mine)
