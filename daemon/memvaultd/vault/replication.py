"""The vault as sync sees it: this device's operations to push, pulled
operations to apply, the state for a remote snapshot, `genesis` for `init`
and `adopt` for `join`."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence

from memvault_base.errors import IntegrityError
from memvaultd.crypto.entropy import new_id
from memvaultd.crypto.kdf import PURPOSE_LOG, derive_key
from memvaultd.model.operations import FORGET, PUT, Operation, decode, encode
from memvaultd.storage.keys import create_vault_key
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.snapshot_body import SnapshotBody, encode_body
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import MAX_BATCH, VaultCore
from memvaultd.vault.genesis import PendingPuts
from memvaultd.vault.snapshots import Snapshots
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
        100k memories, or a remote down for long, seconds at every round."""
        core = self.core
        with core.write_lock:
            upto = core.log.last_seq
        if not self.holds_log_after(seq):
            return None
        try:
            ops = [(at, op) for at, record in core.log.replay(after=seq, upto=upto)
                   if (op := decode(record)).stamp.device == core.info.device_id]
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
        """Log and apply the operations of a pulled version that are new here."""
        core = self.core
        core.await_loaded()
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
            for _, record in core.log.replay(after=pushed_seq):
                if decode(record).stamp.device == core.info.device_id:
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
            core.genesis_rest = PendingPuts.cut(core.state.layers, core.clock)
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

    def adopt(self, info: VaultInfo, key: bytes, base: SnapshotBody | None) -> int:
        """Become another vault (`join`): its id and key, starting from `base`
        (its newest snapshot), with every memory this device held put into it
        so nothing is lost. Returns the log seq before those puts (what the
        remote lacks starts after it).

        Crash-safe in order: the new log (base + puts) is written and synced
        in `log.joining` first; only then are the old log and snapshots moved
        away, the new key stored and `vault.json` replaced.
        """
        core = self.core
        data_dir = core.data_dir
        core.await_loaded()
        with core.write_lock:
            self.marks.flush_locked()
            joining = data_dir / "log.joining"
            shutil.rmtree(joining, ignore_errors=True)
            new_log = OperationLog(joining, derive_key(key, purpose=PURPOSE_LOG),
                                   info.vault_id_bytes)
            state = VaultState(info.dimension)
            if base is not None:
                state.restore(list(zip(base.memories, base.vectors, strict=True)),
                              list(zip(base.turns, base.turn_vectors, strict=True)),
                              set(base.tombstones), set(base.seen), base.stamps)
                state.upkeep = dict(base.upkeep)
            mine = []
            for layer_name, layer in core.state.layers.items():
                memories, vectors = layer.index.export()
                mine += [Operation(new_id(), PUT, core.clock.now(), memory=memory,
                                   vector=vector, layer=layer_name)
                         for memory, vector in zip(memories, vectors, strict=True)]
            for start in range(0, len(mine), MAX_BATCH):
                new_log.append([encode(op) for op in mine[start : start + MAX_BATCH]])
            for op in mine:
                state.apply(op)
            old_key_file = data_dir / "vault.key"
            core.log.close()
            for name in ("log", "snapshots"):
                shutil.rmtree(data_dir / f"{name}.previous", ignore_errors=True)
                if (data_dir / name).exists():
                    (data_dir / name).rename(data_dir / f"{name}.previous")
            joining.rename(data_dir / "log")
            new_log.close()
            if old_key_file.exists():
                old_key_file.rename(data_dir / "vault.key.previous")
            unlocked = create_vault_key(data_dir, info.vault_id_bytes,
                                        storage=core.config.key_storage, prompt=False, key=key)
            info.save(data_dir)
            for name in ("log.previous", "snapshots.previous"):
                shutil.rmtree(data_dir / name, ignore_errors=True)
            (data_dir / "vault.key.previous").unlink(missing_ok=True)
            core.become(info, unlocked)
            core.state = state
            core.set_applied(core.log.last_seq)
            self.snapshots.txid = -1
        # The base came from the remote, not the log: a snapshot keeps it here.
        self.snapshots.snapshot()
        log.info("joined vault %s with %d memories of this device", info.vault_id, len(mine))
        return 0
