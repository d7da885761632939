"""A delta laid over the snapshot it was made against.

A stop seals what changed since the newest snapshot as a delta
(`vault/deltas.py`, `docs/format.md`); a start reads the snapshot, then
`merged` makes of the two the one full state the delta's seq describes, which
`VaultState.restore_rows` loads in bulk as it would a single snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

from memvaultd.model.memory import Memory
from memvaultd.model.records import Records
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
    changed = {*delta_ids(delta), *delta.gone}
    stamps = base.stamps if isinstance(base.stamps, FieldStamps) else FieldStamps(base.stamps)
    for memory_id in changed:
        stamps.discard(memory_id)
    stamps.replace(delta.stamps)
    return SnapshotBody(delta.seq, delta.dimension, delta.stamp, memories, vectors,
                        delta.tombstones, turns, turn_vectors, base.seen | delta.seen, stamps,
                        delta.upkeep)


def delta_ids(delta: SnapshotBody) -> list[str]:
    """The ids of the memories and turns `delta` holds, from its columns:
    read as objects, a 1M vault's 98k were ~2 s of a start."""
    return [*Records.of(delta.memories).ids(), *Records.of(delta.turns).ids()]


def _laid_over(memories: Sequence[Memory], vectors: Rows, changed: Sequence[Memory],
               changed_vectors: Rows, gone: frozenset[str], allocate: Allocate
               ) -> tuple[Records, Rows]:
    """`memories` in their order, each replaced by its version in `changed`
    where there is one and left out if `gone`, then the rest of `changed`
    in its order; and their vectors, in one matrix.

    Found with C loops over the ids and NumPy over the rows, and written
    over `vectors` when it can (`merged`): 930k memories and a delta of
    98k took 3.5 s and a second matrix of 770 MB with a loop a memory. The
    records stay columns (`Records`): only the delta's are objects."""
    records, delta = Records.of(memories), Records.of(changed)
    at = {memory_id: j for j, memory_id in enumerate(delta.ids())}
    ids = records.ids()
    count = len(ids)
    js = np.fromiter(map(at.get, ids, repeat(-1)), np.int64, count)  # -1: not in the delta
    kept = (np.ones(count, bool) if not gone
            else ~np.fromiter(map(gone.__contains__, ids), bool, count))
    del ids
    fresh = np.ones(len(changed), bool)
    fresh[js[js >= 0]] = False
    new = np.flatnonzero(fresh)  # in the delta only: after the others, in its order
    if not kept.all():
        records = records.taken(np.flatnonzero(kept))
        js = js[kept]
    replaced = np.flatnonzero(js >= 0)
    records = _laid(records, delta, replaced, js[replaced], new)
    total = len(records)
    result = _room(vectors, total) if kept.all() else None
    if result is None:
        result = allocate(total, vectors.shape[1], vectors.dtype)
        if kept.all():  # one copy: 872k rows gathered a slice at a time were 3.2 s
            result[: len(vectors)] = vectors
        else:
            _copy_rows(result, np.arange(total - len(new)), vectors, np.flatnonzero(kept))
    _copy_rows(result, replaced, changed_vectors, js[replaced])
    _copy_rows(result, np.arange(total - len(new), total), changed_vectors, new)
    return records, result[:total]


def _laid(records: Records, delta: Records, replaced: npt.NDArray[np.int64],
          versions: npt.NDArray[np.int64], new: npt.NDArray[np.int64]) -> Records:
    """`records` with entry `replaced[k]` replaced by the delta's entry
    `versions[k]`, then the delta's entries `new`. A delta read from a body
    is columns too: its table joined after the snapshot's, its records stay
    columns (98k memories of a 1M vault were ~45 MB more as objects)."""
    if records.table is delta.table or delta.extra or records.extra:
        return (records.replaced(replaced, [delta[j] for j in versions.tolist()])
                .extended([delta[j] for j in new.tolist()]))
    shift = len(records.table)
    at = records.at.copy()
    at[replaced] = delta.at[versions] + shift
    return Records(records.table.joined(delta.table), np.concatenate([at, delta.at[new] + shift]),
                   [])


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
