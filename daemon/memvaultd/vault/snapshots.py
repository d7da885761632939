"""Snapshots of the vault: the whole state sealed at one txid, after which
the log segments it covers are dropped; and when a commit starts one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memvaultd.model.operations import TURNS
from memvaultd.storage.snapshot_body import State, collector_paused, encode_state_parts
from memvaultd.storage.snapshots import due as snapshot_due
from memvaultd.vault.access import VaultAccessMarks

log = logging.getLogger("memvaultd.vault")


class VaultSnapshots(VaultAccessMarks):
    def snapshot(self, wait: bool = False) -> bool:
        """Seal the whole state at the current txid, then drop the log
        segments it covers. Returns False when there was nothing new, or
        when one is being written and `wait` is False."""
        if not self._snapshot_lock.acquire(blocking=wait):
            return False  # one is already being written
        try:
            # The capture and the encoding allocate a few objects per memory,
            # none of them garbage; collections they would trigger walk the
            # whole heap with the lock held (see `collector_paused`).
            with collector_paused():
                with self._write_lock, self._access_lock:
                    # Marks applied in memory but not yet logged would otherwise
                    # be counted twice: once in the snapshot, once on replay. The
                    # access lock keeps new ones out until the state is captured.
                    self._log_access(self._take_access_marks())
                    if self.applied_txid == self._snapshot_txid or not self.loaded:
                        return False
                    capture = self._capture()
                    self.log.rotate()
                state = capture()
                parts = encode_state_parts(state)
            self.snapshots.write(state.seq, parts)
            self.snapshots.prune(keep=2)
            # Records the remote does not hold yet stay, whatever the snapshot.
            self.log.prune(state.seq if self.prune_floor is None
                           else min(state.seq, self.prune_floor))
            self._snapshot_txid = state.seq
            log.info("snapshot at txid %d (%d memories)", state.seq, len(state.memories))
            return True
        finally:
            self._snapshot_lock.release()

    def _capture(self) -> Callable[[], State]:
        """The whole state at `applied_txid`, in two steps: the cut now (the
        caller holds the write lock), the copy of the vectors when the
        returned function is called (outside the lock: `MemoryIndex.cut`)."""
        memories, vectors = self.memories.index.cut()
        turns, turn_vectors = self.state.layers[TURNS].index.cut()
        seq, dimension, stamp = self.applied_txid, self.info.dimension, self.clock.last
        tombstones, seen = frozenset(self.state.tombstones), frozenset(self.state.seen)
        stamps = {k: dict(v) for k, v in self.state.stamps.items()}
        upkeep = dict(self.state.upkeep)
        return lambda: State(seq, dimension, stamp, memories, vectors(), tombstones, turns,
                             turn_vectors(), seen, stamps, upkeep)

    def _snapshot_if_due(self) -> None:
        # Not while one is being written: each commit until it finished
        # started a thread that gave up at once, and a thread start waits
        # for the new thread to run (0.9 s of remembers' time in one init).
        if not self._genesis_rest and not self._snapshot_lock.locked() and snapshot_due(
                self.applied_txid - self._snapshot_txid, len(self.memories),
                self.config.snapshot_every):
            threading.Thread(target=self.snapshot, name="snapshot", daemon=True).start()
