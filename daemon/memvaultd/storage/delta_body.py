"""A delta laid over the snapshot it was made against.

A stop seals what changed since the newest snapshot as a delta
(`vault/deltas.py`, `docs/format.md`); a start reads the snapshot, then
`merged` makes of the two the one full state the delta's seq describes, which
`VaultState.restore_rows` loads in bulk as it would a single snapshot.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from memvaultd.model.memory import Memory
from memvaultd.model.stamps import FieldStamps
from memvaultd.model.vector import matrix_begun_by
from memvaultd.storage.snapshot_body import Allocate, Rows, SnapshotBody, new_matrix

# Rows copied at a time: the gathered rows' temporary stays ~24 MB.
_ROWS_AT_ONCE = 16_384


def merged(base: SnapshotBody, delta: SnapshotBody, allocate: Allocate | None = None
           ) -> SnapshotBody:
    """The full state `delta` describes over `base` (the snapshot at
    `delta.base`): each memory and turn in `base`'s order, the delta's
    version where it has one, the gone ones left out, then the delta's new
    ones in its order. `base` is used up: when none is gone and the matrix
    its vectors begin has room for the new ones (a start's: `allocate` left
    an eighth), the rows past them are taken as free and written over in
    place; else the vectors are copied into matrices `allocate` makes (by
    default of `base`'s dtype, no room). Its stamps become the result's."""
    if delta.base != base.seq:
        raise ValueError(f"the delta is made against snapshot {delta.base}, not {base.seq}")
    allocate = allocate or new_matrix
    memories, vectors = _laid_over(base.memories, base.vectors, delta.memories, delta.vectors,
                                   delta.gone, allocate)
    turns, turn_vectors = _laid_over(base.turns, base.turn_vectors, delta.turns,
                                     delta.turn_vectors, delta.gone, allocate)
    changed = {memory.id for memory in (*delta.memories, *delta.turns)} | delta.gone
    stamps = base.stamps if isinstance(base.stamps, FieldStamps) else FieldStamps(base.stamps)
    for memory_id in changed:
        stamps.discard(memory_id)
    stamps.replace(delta.stamps)
    return SnapshotBody(delta.seq, delta.dimension, delta.stamp, memories, vectors,
                        delta.tombstones, turns, turn_vectors, base.seen | delta.seen, stamps,
                        delta.upkeep)


def _laid_over(memories: list[Memory], vectors: Rows, changed: list[Memory],
               changed_vectors: Rows, gone: frozenset[str], allocate: Allocate
               ) -> tuple[list[Memory], Rows]:
    """`memories` in their order, each replaced by its version in `changed`
    where there is one and left out if `gone`, then the rest of `changed`
    in its order; and their vectors, in one matrix.

    Found with C loops over the ids and NumPy over the rows, and written
    over `vectors` when it can (`merged`): 930k memories and a delta of
    98k took 3.5 s and a second matrix of 770 MB with a loop a memory."""
    at = {memory.id: j for j, memory in enumerate(changed)}
    ids = list(map(_id, memories))
    count = len(ids)
    js = np.fromiter(map(at.get, ids, repeat(-1)), np.int64, count)  # -1: not in the delta
    kept = (np.ones(count, bool) if not gone
            else ~np.fromiter(map(gone.__contains__, ids), bool, count))
    del ids
    fresh = np.ones(len(changed), bool)
    fresh[js[js >= 0]] = False
    new = np.flatnonzero(fresh)  # in the delta only: after the others, in its order
    if kept.all():
        out = list(memories)
    else:
        out = list(compress(memories, kept.tolist()))
        js = js[kept]
    replaced = np.flatnonzero(js >= 0)
    for i, j in zip(replaced.tolist(), js[replaced].tolist(), strict=True):
        out[i] = changed[j]
    out += map(changed.__getitem__, new.tolist())
    total = len(out)
    result = _room(vectors, total) if kept.all() else None
    if result is None:
        result = allocate(total, vectors.shape[1], vectors.dtype)
        _copy_rows(result, np.arange(total - len(new)), vectors, np.flatnonzero(kept))
    _copy_rows(result, replaced, changed_vectors, js[replaced])
    _copy_rows(result, np.arange(total - len(new), total), changed_vectors, new)
    return out, result[:total]


_id = attrgetter("id")


def _room(vectors: Rows, total: int) -> Rows | None:
    """The matrix `vectors` are the first rows of, when it has `total` rows
    (the rows past `vectors` free: a body's matrix, made with room)."""
    whole = matrix_begun_by(vectors)
    if whole is None or len(whole) < total or not whole.flags.writeable:
        return None
    room: Rows = whole[:total]
    return room


def _copy_rows(into: Rows, rows: npt.NDArray[np.int64], source: Rows,
               source_rows: npt.NDArray[np.int64] | None = None) -> None:
    """into[rows] = source[source_rows] (source_rows: `rows`), a slice of
    rows at a time: the gathered rows' temporary stays ~24 MB."""
    for first in range(0, len(rows), _ROWS_AT_ONCE):
        part = slice(first, first + _ROWS_AT_ONCE)
        into[rows[part]] = source[(rows if source_rows is None else source_rows)[part]]
