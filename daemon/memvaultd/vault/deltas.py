"""What a stop seals, and what a start lays over the newest snapshot: the
memories and turns changed since it (`storage/delta_body.py` has the body,
`docs/format.md` the file)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import TURNS
from memvaultd.model.vector import Vector
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
    body at `seq` (the caller holds the write lock: a few thousand rows)."""
    memories: list[Memory] = []
    turns: list[Memory] = []
    vectors: list[Vector] = []
    turn_vectors: list[Vector] = []
    gone: set[str] = set()
    for memory_id in state.changed:
        found = state.find(memory_id)
        # A memory read from the columns is made at each `get`: made once.
        layer, memory = found if found is not None else (
            state.layers[TURNS], state.layers[TURNS].get(memory_id))
        vector = layer.index.vector(memory_id)
        if memory is None or vector is None:
            gone.add(memory_id)
        elif layer is state.layers[TURNS]:
            turns.append(memory)
            turn_vectors.append(vector)
        else:
            memories.append(memory)
            vectors.append(vector)
    stamps = {memory_id: dict(state.stamps[memory_id]) for memory_id in state.changed
              if memory_id in state.stamps}
    return SnapshotBody(seq, dimension, stamp, memories, _rows(vectors, dimension),
                        frozenset(state.tombstones), turns, _rows(turn_vectors, dimension),
                        frozenset(state.seen_since), stamps, dict(state.upkeep), base,
                        frozenset(gone))


def _rows(vectors: list[Vector], dimension: int) -> Vector:
    return np.stack(vectors) if vectors else np.zeros((0, dimension), dtype=np.float32)
