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

from memvault_base.errors import IntegrityError
from memvaultd.index.heap import release_arrow_pages, trim_heap
from memvaultd.index.memory_index import cut_rows, restore_matrix
from memvaultd.model.hlc import Stamp
from memvaultd.model.op_ids import OpIds
from memvaultd.model.operations import TURNS
from memvaultd.model.stamps import FieldStamps
from memvaultd.storage.crash_points import reached
from memvaultd.storage.delta_body import delta_ids, merged
from memvaultd.storage.snapshot_body import (
    SnapshotBody,
    collector_paused,
    encode_body_parts,
    read_body,
)
from memvaultd.storage.snapshots import Cancel, SnapshotCancelled, SnapshotStore
from memvaultd.storage.snapshots import due as snapshot_due
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import VaultCore
from memvaultd.vault.deltas import capture_delta
from memvaultd.vault.state import VaultState

log = logging.getLogger("memvaultd.vault")

KEEP = 2  # snapshots kept: the newest, and the older one that can stand in for it
# Below this many memories and turns a stop seals the whole state (0.2 s at
# 5k): a delta would save little, and a start would have one file more to read.
DELTA_FROM = 5_000


class Snapshots:
    def __init__(self, core: VaultCore, marks: AccessMarks) -> None:
        self.core = core
        self.marks = marks
        self.txid = 0  # the txid of the newest snapshot (-1: none of this vault yet)
        # The txid of the newest delta over it (0: none), and the snapshot on
        # disk the state's changes are counted from (None: none is, and a
        # stop writes a full snapshot).
        self.delta_txid = 0
        self.delta_base: int | None = None
        self._lock = threading.Lock()

    def snapshot(self, wait: bool = False) -> bool:
        """Seal the whole state at the current txid, then drop the log
        segments it covers. Returns False when there was nothing new, or
        when one is being written and `wait` is False."""
        if not self._lock.acquire(blocking=wait):
            return False  # one is already being written
        try:
            return self._full(self.core.closing.is_set)
        finally:
            self._lock.release()

    def at_stop(self) -> bool:
        """What a stop writes: a background snapshot being written gives up
        (it asks `core.closing`), then only what changed since the newest
        snapshot is sealed, as a delta over it (`storage/snapshot_body.py`),
        unless there is no snapshot to lay it over, the vault is small
        (`DELTA_FROM`) or the changes are half of it; then the whole state.
        Returns False when there was nothing new.

        Why: at 100k memories a stop that sealed the whole state took
        2.5-3.5 s, 1.0-1.4 s with a delta of the 2,000 memories written
        since the newest snapshot (docs/benchmarks.md)."""
        core = self.core
        with self._lock:
            with collector_paused():
                with core.write_lock, core.access_lock:
                    self.marks.log(self.marks.take())
                    if not core.loaded or core.applied_txid in (self.txid, self.delta_txid):
                        return False
                    base, state = self.delta_base, core.state
                    held = sum(len(layer) for layer in state.layers.values())
                    if base is None or held < DELTA_FROM or len(state.changed) * 2 > held:
                        whole = True
                    else:
                        whole = False
                        body = capture_delta(state, base, core.applied_txid,
                                             core.info.dimension, core.clock.last)
                        store = core.snapshot_store
                if whole:
                    return self._full()
                parts = encode_body_parts(body)
            store.write_delta(body.seq, parts)
            self.delta_txid = body.seq
            log.info("delta at txid %d over snapshot %d (%d memories and turns)", body.seq,
                     base, len(body.memories) + len(body.turns))
            return True

    def _full(self, cancelled: Cancel | None = None) -> bool:
        """`snapshot`, the caller holding `_lock`; given up (False) when
        `cancelled` says so before the file takes its name."""
        core = self.core
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
                # The changes a delta would hold are counted from this cut,
                # once it is on disk.
                taken = core.state.take_changes()
                base, self.delta_base = self.delta_base, None
                store, oplog, floor = core.snapshot_store, core.log, core.prune_floor
                oplog.rotate()
            reached("snapshot:captured")
            try:
                body = capture()
                parts = encode_body_parts(body, cancelled)
                if store is not core.snapshot_store:  # never, while `join` waits for this lock
                    log.warning("the vault changed under a snapshot: it is dropped")
                    return False
                store.write(body.seq, parts, cancelled or _never)
            except SnapshotCancelled:
                with core.write_lock, core.access_lock:
                    core.state.give_back(*taken)
                    self.delta_base = base
                log.info("snapshot at txid %d given up: the vault is closing", core.applied_txid)
                return False
        store.prune(keep=KEEP)
        # The log stays from the older kept snapshot on, so that it can
        # stand in for the newest (`newest_usable`); records the remote
        # does not hold yet stay too, up to the sync backlog.
        older = store.files()[0][0]
        held = len(body.memories) + len(body.turns) + len(body.tombstones)
        oplog.prune(min(older, self._prune_to(body.seq, floor, held)))
        self.txid = self.delta_base = body.seq
        self.delta_txid = 0  # the write deleted the deltas
        log.info("snapshot at txid %d (%d memories)", body.seq, len(body.memories))
        del body, parts
        trim_heap()  # the encoding's pieces: the size of the body again
        release_arrow_pages()
        return True

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
        # Counted from the newest delta too: a start after a crash replays
        # the log from there, and a snapshot due at once after a start from
        # a delta sealed 100k memories while the first recalls were served.
        since = core.applied_txid - max(self.txid, self.delta_txid)
        if not core.genesis_rest and not self._lock.locked() and snapshot_due(
                since, len(core.memories), core.config.snapshot_every):
            threading.Thread(target=self.snapshot, name="snapshot", daemon=True).start()


def newest_usable(store: SnapshotStore) -> tuple[SnapshotBody | None, list[tuple[Path, str]]]:
    """The newest snapshot that authenticates and parses (None: none does, or
    there is none), and the newer ones passed over, with why."""
    passed: list[tuple[Path, str]] = []
    for seq, path in reversed(store.files()):
        try:
            # Parsed as it is decrypted, its vectors read straight into the
            # matrix the index keeps (`restore_matrix`).
            with store.open(seq) as sealed:
                return read_body(sealed, sealed.length, restore_matrix), passed
        except IntegrityError as exc:
            message = str(exc)
            passed.append((path, message if path.name in message else f"snapshot {path.name}: "
                           f"{message}"))
    return None, passed



def _never() -> bool:
    return False


def capture_state(state: VaultState, seq: int, dimension: int, stamp: Stamp
                  ) -> Callable[[], SnapshotBody]:
    """`state` as a snapshot body at log seq `seq`: cut now, the vectors
    copied when the returned function is called."""
    memories, vectors = cut_rows([state.memories.index.live_rows(),
                                  state.trash.index.live_rows()])
    turns, turn_vectors = cut_rows([state.layers[TURNS].index.live_rows()])
    tombstones, seen = frozenset(state.tombstones), state.seen.copy()
    stamps = FieldStamps(state.stamps)
    upkeep = dict(state.upkeep)
    return lambda: SnapshotBody(seq, dimension, stamp, memories, vectors(), tombstones,
                                turns, turn_vectors(), seen, stamps, upkeep)


def restore(state: VaultState, body: SnapshotBody, delta: SnapshotBody | None = None) -> None:
    """Make `state` (empty) the state `body` holds, with `delta` (made
    against `body`) laid over it; the delta's changes then count as changes
    since `body`, as they were when it was written."""
    if delta is not None:
        body = merged(body, delta, restore_matrix)
    state.restore_rows(body.memories, body.vectors, body.turns, body.turn_vectors,
                       set(body.tombstones), OpIds(body.seen), body.stamps)
    state.upkeep = dict(body.upkeep)
    if delta is not None:
        state.changed = dict.fromkeys(delta_ids(delta))
        state.changed.update(dict.fromkeys(delta.gone))
        state.seen_since = list(delta.seen)
