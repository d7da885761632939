"""Snapshots of the vault: the whole state sealed at one txid, after which
the log segments the older kept snapshot covers are dropped; when a commit
starts one; and which one a start begins from.

Two snapshots are kept, and the log back to the older one: a newest
snapshot that does not authenticate (one flipped bit on the disk) is passed
over at start, and the older one plus the log after it give the same state.
The cost is the log between the two, at most a tenth of the vault's
operations more (`storage.snapshots.LOG_SHARE`), and the same again of
replay should the fallback ever be needed.

A snapshot is cut under the write lock and sealed after it is released;
`join` swaps the vault's log, store and key in between unless it waits for
the snapshot lock (`exclusive`), and a snapshot is written only to the store
and log it was cut from: the state of one vault sealed as another's newest
snapshot, at a position beyond its log, would outrank that log at the next
start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from memvault_base.errors import IntegrityError
from memvaultd.index.heap import trim_heap
from memvaultd.index.layer import Layer
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import TURNS
from memvaultd.model.vector import Vector
from memvaultd.storage.crash_points import reached
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
                    store, oplog, floor = core.snapshot_store, core.log, core.prune_floor
                    oplog.rotate()
                reached("snapshot:captured")
                body = capture()
                parts = encode_body_parts(body)
            if store is not core.snapshot_store:  # never, while `join` waits for this lock
                log.warning("the vault changed under a snapshot: it is dropped")
                return False
            store.write(body.seq, parts)
            store.prune(keep=KEEP)
            # The log stays from the older kept snapshot on, so that it can
            # stand in for the newest (`newest_usable`); records the remote
            # does not hold yet stay too, up to the sync backlog.
            older = store.files()[0][0]
            held = len(body.memories) + len(body.turns) + len(body.tombstones)
            oplog.prune(min(older, self._prune_to(body.seq, floor, held)))
            self.txid = body.seq
            log.info("snapshot at txid %d (%d memories)", body.seq, len(body.memories))
            del body, parts
            trim_heap()  # the encoding's pieces: the size of the body again
            return True
        finally:
            self._lock.release()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """No snapshot is being cut or written, and so nothing pruned, while
        this is held: one in progress is waited for (`join`; `memvault check`
        reads the files of a running vault). Taken before the write lock."""
        with self._lock:
            yield

    def _prune_to(self, seq: int, floor: int | None, held: int) -> int:
        """How far a snapshot at `seq` lets the log be pruned.

        Records the remote does not hold yet (after sync's `floor`) stay, up
        to a bound: `sync_backlog` records, or twice what the vault holds
        (`held`: memories, turns, tombstones) if more. Past it, while sync
        is stopped or offline, they go like any other, and sync's next push
        puts the whole vault again (`Replication.repush`, about `held`
        records): the log stays bounded however long the remote is away,
        and holding twice a re-push's records means a re-push is never
        itself dropped before it is pushed.
        """
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
        return capture_state(core.state, core.applied_txid, core.info.dimension,
                             core.clock.last)

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



def capture_state(state: VaultState, seq: int, dimension: int, stamp: Stamp
                  ) -> Callable[[], SnapshotBody]:
    """`state` as a snapshot body at log seq `seq`: cut now, the vectors
    copied when the returned function is called."""
    memories, vectors = _cut(state.memories, state.trash)
    turns, turn_vectors = state.layers[TURNS].index.cut()
    tombstones, seen = frozenset(state.tombstones), frozenset(state.seen)
    stamps = {k: dict(v) for k, v in state.stamps.items()}
    upkeep = dict(state.upkeep)
    return lambda: SnapshotBody(seq, dimension, stamp, memories, vectors(), tombstones,
                                turns, turn_vectors(), seen, stamps, upkeep)


def _cut(*layers: Layer) -> tuple[list[Memory], Callable[[], Vector]]:
    """`MemoryIndex.cut` of several layers as one list: the snapshot holds
    the trash among the memories (`trashed_at` tells them apart, and
    `VaultState.restore` puts them back). The vectors are copied once, into
    one matrix, rather than a copy per layer then their concatenation: at
    100k memories that second copy is 150 MB."""
    parts = [layer.index.live_rows() for layer in layers]
    memories = [memory for part_memories, _, _ in parts for memory in part_memories]
    dimension = layers[0].index.dimension

    def vectors() -> Vector:
        out = np.empty((len(memories), dimension), dtype=np.float32)
        start = 0
        for _, matrix, rows in parts:
            np.take(matrix, rows, axis=0, out=out[start : start + len(rows)])
            start += len(rows)
        return out

    return memories, vectors


def restore(state: VaultState, body: SnapshotBody) -> None:
    """Make `state` (empty) the state `body` holds."""
    state.restore(list(zip(body.memories, body.vectors, strict=True)),
                  list(zip(body.turns, body.turn_vectors, strict=True)),
                  set(body.tombstones), set(body.seen), body.stamps)
    state.upkeep = dict(body.upkeep)
