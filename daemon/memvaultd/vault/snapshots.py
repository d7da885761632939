"""Snapshots of the vault: the whole state sealed at one txid, after which
the log segments it covers are dropped; and when a commit starts one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memvaultd.model.operations import TURNS
from memvaultd.storage.snapshot_body import SnapshotBody, collector_paused, encode_body_parts
from memvaultd.storage.snapshots import due as snapshot_due
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import VaultCore

log = logging.getLogger("memvaultd.vault")


class Snapshots:
    def __init__(self, core: VaultCore, marks: AccessMarks) -> None:
        self.core = core
        self.marks = marks
        self.txid = 0  # the txid of the newest snapshot (-1: none of this vault yet)
        self._lock = threading.Lock()

    def snapshot(self, wait: bool = False) -> bool:
        """Seal the whole state at the current txid, then drop the log
        segments it covers. Returns False when there was nothing new, or
        when one is being written and `wait` is False."""
        if not self._lock.acquire(blocking=wait):
            return False  # one is already being written
        core = self.core
        try:
            # The capture and the encoding allocate a few objects per memory,
            # none of them garbage; collections they would trigger walk the
            # whole heap with the lock held (see `collector_paused`).
            with collector_paused():
                with core.write_lock, core.access_lock:
                    # Marks applied in memory but not yet logged would otherwise
                    # be counted twice: once in the snapshot, once on replay. The
                    # access lock keeps new ones out until the state is captured.
                    self.marks.log(self.marks.take())
                    if core.applied_txid == self.txid or not core.loaded:
                        return False
                    capture = self.capture()
                    core.log.rotate()
                body = capture()
                parts = encode_body_parts(body)
            core.snapshot_store.write(body.seq, parts)
            core.snapshot_store.prune(keep=2)
            core.log.prune(self._prune_to(body.seq, len(body.memories) + len(body.turns)
                                          + len(body.tombstones)))
            self.txid = body.seq
            log.info("snapshot at txid %d (%d memories)", body.seq, len(body.memories))
            return True
        finally:
            self._lock.release()

    def _prune_to(self, seq: int, held: int) -> int:
        """How far a snapshot at `seq` lets the log be pruned.

        Records the remote does not hold yet (after sync's floor) stay, up
        to a bound: `sync_backlog` records, or twice what the vault holds
        (`held`: memories, turns, tombstones) if more. Past it, while sync
        is stopped or offline, they go like any other, and sync's next push
        puts the whole vault again (`Replication.repush`, about `held`
        records): the log stays bounded however long the remote is away,
        and holding twice a re-push's records means a re-push is never
        itself dropped before it is pushed.
        """
        floor = self.core.prune_floor
        if floor is None or floor >= seq:
            return seq
        limit = max(self.core.config.sync_backlog, 2 * held)
        if seq - floor <= limit:
            return floor
        log.warning("%d log records the remote lacks are past the sync backlog of %d: "
                    "dropped with this snapshot; the next push puts the whole vault again",
                    seq - floor, limit)
        return seq

    def capture(self) -> Callable[[], SnapshotBody]:
        """The whole state at `applied_txid`, in two steps: the cut now (the
        caller holds the write lock), the copy of the vectors when the
        returned function is called (outside the lock: `MemoryIndex.cut`)."""
        core = self.core
        state = core.state
        memories, vectors = state.memories.index.cut()
        turns, turn_vectors = state.layers[TURNS].index.cut()
        seq, dimension, stamp = core.applied_txid, core.info.dimension, core.clock.last
        tombstones, seen = frozenset(state.tombstones), frozenset(state.seen)
        stamps = {k: dict(v) for k, v in state.stamps.items()}
        upkeep = dict(state.upkeep)
        return lambda: SnapshotBody(seq, dimension, stamp, memories, vectors(), tombstones,
                                    turns, turn_vectors(), seen, stamps, upkeep)

    def if_due(self) -> None:
        """Start a snapshot in the background when enough was written since
        the last one; called after each commit, under the write lock."""
        core = self.core
        # Not while one is being written: each commit until it finished
        # started a thread that gave up at once, and a thread start waits
        # for the new thread to run (0.9 s of remembers' time in one init).
        if not core.genesis_rest and not self._lock.locked() and snapshot_due(
                core.applied_txid - self.txid, len(core.memories), core.config.snapshot_every):
            threading.Thread(target=self.snapshot, name="snapshot", daemon=True).start()
