"""What a stop seals, and what a start lays over the newest snapshot: the
memories and turns changed since it (`storage/delta_body.py` has the body,
`docs/format.md` the file)."""

from __future__ import annotations

import logging
from pathlib import Path

from memvault_base.errors import IntegrityError
from memvaultd.index.memory_index import cut_rows
from memvaultd.model.hlc import Stamp
from memvaultd.model.operations import TURNS
from memvaultd.storage.snapshot_body import SnapshotBody, read_body
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.vault.state import VaultState

log = logging.getLogger("memvaultd.vault")


def newest_delta(store: SnapshotStore, base: int, last_seq: int
                 ) -> tuple[SnapshotBody | None, list[tuple[Path, str]]]:
    """The newest delta over snapshot `base` that authenticates, parses and
    ends within the log (None: there is none), and the deltas that do not
    authenticate or parse, each with why. Neither kind costs a write: the
    log after `base` holds every write a delta holds (a delta prunes no
    log), and the caller replays it."""
    damaged: list[tuple[Path, str]] = []
    for seq, path in reversed(store.deltas()):
        if seq < base or seq > last_seq:
            log.warning("delta %s does not fit snapshot %d and the log up to %d: not used",
                        path.name, base, last_seq)
            continue
        try:
            with store.open_delta(seq) as sealed:
                delta = read_body(sealed, sealed.length)
        except IntegrityError as exc:
            log.warning("%s; the log after snapshot %d is replayed instead", exc, base)
            damaged.append((path, str(exc)))
            continue
        if delta.base == base:
            return delta, damaged
        log.warning("delta %s is made against snapshot %d, not %d: not used", path.name,
                    delta.base, base)
    return None, damaged


def capture_delta(state: VaultState, base: int, seq: int, dimension: int, stamp: Stamp
                  ) -> SnapshotBody:
    """What changed in `state` since the full snapshot at `base`, as a delta
    body at `seq` (the caller holds the write lock). Cut from the indexes'
    columns like a full snapshot (`capture_state`): a 1M vault restarted
    over a delta of 98k memories made a `Memory`, a vector and a dict of
    stamps for each of them at every stop (3.6 s of a stop in process)."""
    changed = state.changed
    layers = state.memories, state.trash, state.layers[TURNS]
    memories, vectors = cut_rows([layer.index.rows_held(changed) for layer in layers[:2]])
    turns, turn_vectors = cut_rows([layers[2].index.rows_held(changed)])
    gone = frozenset(changed.keys() - {*memories.ids(), *turns.ids()})
    return SnapshotBody(seq, dimension, stamp, memories, vectors(), frozenset(state.tombstones),
                        turns, turn_vectors(), frozenset(state.seen_since),
                        state.stamps.only(changed), dict(state.upkeep), base, gone)
