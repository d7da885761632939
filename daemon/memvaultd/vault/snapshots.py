"""Snapshots of the vault: the whole state sealed at one txid, after which
the log segments the older kept snapshot covers are dropped; when a commit
starts one; and which one a start begins from.

Two snapshots are kept, and the log back to the older one: a newest
snapshot that does not authenticate (one flipped bit on the disk) is passed
over at start, and the older one plus the log after it give the same state.
The cost is the log between the two, at most a tenth of the vault's
operations more (`storage.snapshots.LOG_SHARE`), and the same again of
replay should the fallback ever be needed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.operations import TURNS
from memvaultd.storage.snapshot_body import (
    SnapshotBody,
    collector_paused,
    decode_body,
    encode_body_parts,
)
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.storage.snapshots import due as snapshot_due
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import VaultCore
from memvaultd.vault.state import VaultState

log = logging.getLogger("memvaultd.vault")

KEEP = 2  # snapshots kept: the newest, and the older one that can stand in for it


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
            store = core.snapshot_store
            store.write(body.seq, parts)
            store.prune(keep=KEEP)
            # The log stays from the older kept snapshot on, so that it can
            # stand in for the newest (`newest_usable`); and records the
            # remote does not hold yet stay, whatever the snapshots.
            floor = store.files()[0][0]
            core.log.prune(floor if core.prune_floor is None else min(floor, core.prune_floor))
            self.txid = body.seq
            log.info("snapshot at txid %d (%d memories)", body.seq, len(body.memories))
            return True
        finally:
            self._lock.release()

    def capture(self) -> Callable[[], SnapshotBody]:
        """The whole state at `applied_txid`, in two steps: the cut now (the
        caller holds the write lock), the copy of the vectors when the
        returned function is called (outside the lock: `MemoryIndex.cut`)."""
        core = self.core
        return capture(core.state, core.applied_txid, core.info.dimension, core.clock.last)

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

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No snapshot is written, and so nothing pruned, while this is held
        (`memvault check` reads the files of a running vault)."""
        with self._lock:
            yield


def newest_usable(store: SnapshotStore) -> tuple[SnapshotBody | None, list[tuple[Path, str]]]:
    """The newest snapshot that authenticates and parses (None: none does, or
    there is none), and the newer ones passed over, with why."""
    passed: list[tuple[Path, str]] = []
    for seq, path in reversed(store.files()):
        try:
            body = store.read(seq)
            return decode_body(body), passed
        except IntegrityError as exc:
            message = str(exc)
            passed.append((path, message if path.name in message else f"snapshot {path.name}: "
                           f"{message}"))
    return None, passed


def capture(state: VaultState, seq: int, dimension: int, stamp: Stamp
            ) -> Callable[[], SnapshotBody]:
    """`state` as the snapshot at `seq`: the cut now, the vectors' copy when called."""
    memories, vectors = state.memories.index.cut()
    turns, turn_vectors = state.layers[TURNS].index.cut()
    tombstones, seen = frozenset(state.tombstones), frozenset(state.seen)
    stamps = {k: dict(v) for k, v in state.stamps.items()}
    upkeep = dict(state.upkeep)
    return lambda: SnapshotBody(seq, dimension, stamp, memories, vectors(), tombstones,
                                turns, turn_vectors(), seen, stamps, upkeep)


def restore(state: VaultState, body: SnapshotBody) -> None:
    """Make `state` (empty) the state `body` holds."""
    state.restore(list(zip(body.memories, body.vectors, strict=True)),
                  list(zip(body.turns, body.turn_vectors, strict=True)),
                  set(body.tombstones), set(body.seen), body.stamps)
    state.upkeep = dict(body.upkeep)
