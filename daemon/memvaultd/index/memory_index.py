"""The in-memory index: decrypted memories and their vectors.

Vectors live in one contiguous matrix, one row per memory, so an exact
search is a single matrix-vector product: about 1 ms over 10k x 384 float32
on the development machine (the memory-bandwidth floor), against 10 ms for
LanceDB's flat search over the same rows. Unit vectors make the product the
cosine, and the L2 distance the ranking formula wants is sqrt(2 - 2 cos).
Above `ann.IVF_THRESHOLD` rows an inverted-file index (`ivf.py`), built and
extended on a background thread, picks which rows to score; the scores
themselves are products with the rows, in float32. A matrix allocated once
it holds that many rows is float16 (`half.py`: half the bytes, read by
compiled loops); a smaller one stays float32, scanned by BLAS.

Concurrency: writers hold `_lock`. Readers never lock for the scan: they take
a consistent view (matrix, ids, row count) under the lock, which is cheap, and
scan outside it. Rows below the view's count never change while a view is in
use — new rows are appended (a new vector for an existing memory too: its old
row dies), a removed row is only marked dead, and compaction builds new
arrays and swaps them in — so a reader sees a state the vault really was in.
The IVF is part of the view for the same reason: compaction drops it (its
row numbers no longer hold) and the background thread builds a new one.

Beside each row, `columns.py` keeps the fields recall filters and ranks by,
written wherever the row's record is written: an update rewrites a row's
columns in place, as it replaces the record, so a recall running meanwhile
may read either version, as it would a record.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memvaultd.index import half
from memvaultd.index import ivf as ann
from memvaultd.index.columns import Columns
from memvaultd.index.heap import fix_thresholds, trim_heap
from memvaultd.model import ints
from memvaultd.model.memory import Memory
from memvaultd.model.records import Records
from memvaultd.model.vector import Vector, matrix_begun_by

log = logging.getLogger("memvaultd.index")

Rows = npt.NDArray[np.int64]
Predicate = Callable[[Memory], bool]

_INITIAL_CAPACITY = 1024
# Compact when a quarter of the rows are dead: the scan cost of dead rows is
# then at most a third on top, and compaction (one copy) stays rare.
_COMPACT_DEAD_FRACTION = 0.25
_SETTLE_S = 0.5
# An IVF search scores exactly the best REFINE x limit probed rows by their
# 8-bit products, and at least REFINE_MIN (`_candidates`). On the benchmark's
# vectors at 140k memories (20 queries, the worst one), the exact 24 nearest
# of the probed rows were among the best 27 by code, the nearest 48 among
# the best 52; a filter keeping half needs ~2 x limit candidates. Scoring
# 128 rows exactly takes ~0.05 ms (docs/benchmarks.md).
REFINE = 4
REFINE_MIN = 128
# Records made from the columns kept for the next read: ~60 filtered
# recalls' candidates, ~4 MB.
_MADE = 8192


@dataclass(frozen=True, slots=True)
class View:
    matrix: Vector | half.Half
    ids: list[str]
    alive: npt.NDArray[np.bool_]
    count: int
    ivf: ann.InvertedLists | None
    columns: Columns
    # The coded part of the IVF's tail (`ann.TailCodes`): rows from
    # `ivf.covered` on and their codes; rows past these are read exactly.
    tail_rows: Rows
    tail_codes: ann.Codes


# Which of some rows of a view a request may see (recall/columnar.py).
RowMask = Callable[[View, Rows], npt.NDArray[np.bool_]]


@dataclass(frozen=True, slots=True)
class _Rows:
    """Each memory's row (`of`), and where the record of each row a
    restore filled is: `records[at[row]]` for `row < len(at)` with
    `at[row] >= 0`, else `MemoryIndex._records`. Replaced whole when the
    rows are renumbered (compaction), so a reader that took it once reads
    a row and its record's place from the same numbering."""

    of: dict[str, int]
    records: Records
    at: npt.NDArray[np.integer[Any]]
    # Records made from the columns lately, by place (`MemoryIndex.get`).
    made: dict[int, Memory] = field(default_factory=dict)


class MemoryIndex:
    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._lock = threading.Lock()
        # The records written since the restore, and the restored ones
        # changed since, as objects; the others stay in `_rows.records`.
        self._records: dict[str, Memory] = {}
        self._rows = _Rows({}, Records.of(()), ann.NO_ROWS)
        self._matrix: Vector | half.Half = np.zeros((_INITIAL_CAPACITY, dimension),
                                                     dtype=np.float32)
        self._alive = np.zeros(_INITIAL_CAPACITY, dtype=bool)
        self._columns = Columns(_INITIAL_CAPACITY)
        self._ids: list[str] = []
        self._dead = 0
        self._ivf: ann.InvertedLists | None = None
        self._tail: ann.TailCodes | None = None  # of `_ivf`
        self._maintaining = False
        self._epoch = 0  # compactions so far: IVF row numbers hold within one epoch
        self.ivf_threshold = ann.IVF_THRESHOLD
        # A matrix allocated once it holds this many rows is float16 (`half.py`).
        self.half_from = ann.IVF_THRESHOLD
        self.nprobe: int | None = None  # None: the IVF's own choice

    def __len__(self) -> int:
        return len(self._rows.of)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._rows.of

    def get(self, memory_id: str) -> Memory | None:
        # Lock-free: a writer sets `_records` before it moves a record out
        # of `_rows.records` (`_held`), and takes a row out of `_rows.of`
        # first. A record moved out between the two reads here is in
        # `_records` once its place reads -1: read again.
        memory = self._records.get(memory_id)
        if memory is not None:
            return memory
        rows = self._rows
        row = rows.of.get(memory_id)
        if row is None or row >= len(rows.at):
            return self._records.get(memory_id)
        at = rows.at.item(row)
        if at < 0:
            return self._records.get(memory_id)
        # A place's record never changes (a changed one moves out to
        # `_records`), so the one made for it stays true: a filtered recall
        # tests its ~130 candidates' records, which repeat across recalls.
        made = rows.made.get(at)
        if made is None:
            made = rows.records[at]
            if len(rows.made) >= _MADE:
                rows.made.clear()
            rows.made[at] = made
        return made

    def ids(self) -> list[str]:
        """The ids of the memories held, in no order."""
        with self._lock:
            return list(self._rows.of)

    def rows_of(self, memory_ids: list[str], view: View) -> list[int]:
        """The rows of those of `memory_ids` that `view` holds, in order."""
        row_of, count = self._rows.of.get, view.count
        return [r for r in map(row_of, memory_ids) if r is not None and r < count]

    def vector(self, memory_id: str) -> Vector | None:
        row = self._rows.of.get(memory_id)
        return None if row is None else self._matrix[row].astype(np.float32)

    def memories(self) -> Iterator[Memory]:
        """Every live memory, in row order, each made as it is read."""
        return iter(self.live_rows()[0])

    def put(self, memory: Memory, vector: Vector) -> None:
        """Insert `memory`, or replace the record (and vector) of the same id."""
        with self._lock:
            old = self._rows.of.get(memory.id)
            if old is not None and np.array_equal(self._matrix[old],
                                                  vector.astype(self._matrix.dtype)):
                self._held(old, memory)
                self._columns.set(old, memory)
                return
            if old is not None:  # a new vector: a new row, so views stay true
                self._held(old, memory)
                self._alive[old] = False
                self._dead += 1
            row = len(self._ids)
            if row == len(self._matrix):
                self._grow()
            self._ids.append(memory.id)
            self._records[memory.id] = memory
            self._rows.of[memory.id] = row
            self._matrix[row] = vector
            self._alive[row] = True
            self._columns.set(row, memory)
            if self._tail is not None:  # ~5 us a row
                self._tail.add(self._matrix, len(self._ids))
            stale = self._ivf_stale()
        if stale:
            self._maintain()

    def restore(self, memories: Sequence[Memory], vectors: Vector | Sequence[Vector]) -> None:
        """Fill an empty index with `memories` (distinct ids) and their
        vectors, row i for memory i: what a `put` of each in order gives, in
        one copy of the vectors (100k x 384: ~0.1 s against ~1 s of puts
        and seven doublings of the matrix)."""
        count = len(memories)
        shapes = ({vectors.shape[1:]} if isinstance(vectors, np.ndarray)
                  else {vector.shape for vector in vectors})
        if len(vectors) != count or shapes - {(self.dimension,)}:
            raise ValueError(f"restore needs {count} vectors of {self.dimension} values")
        matrix = _taken(vectors, count, self.dimension, self._dtype(count))
        if matrix is not None:
            pass  # a `RestoreMatrix`'s rows: the matrix itself
        elif isinstance(vectors, np.ndarray):
            matrix = np.empty((_restored_capacity(count), self.dimension), self._dtype(count))
            matrix[:count] = vectors
        else:
            matrix = np.empty((_restored_capacity(count), self.dimension), self._dtype(count))
            if count:  # rows of one body: one copy, no stacked intermediate
                np.concatenate(vectors, out=matrix[:count].reshape(-1))
        alive = np.zeros(len(matrix), dtype=bool)
        alive[:count] = True
        records = Records.of(memories)
        ids = records.ids()
        columns = Columns.of(records, len(matrix))
        with self._lock:
            if self._rows.of:
                raise ValueError("restore fills an empty index")
            self._matrix, self._alive, self._ids = matrix, alive, ids
            self._columns = columns
            self._records = {}
            self._rows = _Rows(dict(zip(ids, ints.shared(0, count), strict=True)), records,
                               np.arange(count, dtype=np.int32))
            stale = self._ivf_stale()
        if stale:  # the IVF is built in the background, as after a burst of puts
            self._maintain()

    def update(self, memory: Memory) -> None:
        """Replace the record of an existing memory, keeping its vector."""
        with self._lock:
            row = self._rows.of.get(memory.id)
            if row is not None:
                self._held(row, memory)
                self._columns.set(row, memory)

    def remove(self, memory_id: str) -> Memory | None:
        with self._lock:
            memory = self.get(memory_id)
            row = self._rows.of.pop(memory_id, None)
            self._records.pop(memory_id, None)
            if row is not None:
                self._held(row, None)
                self._alive[row] = False
                self._dead += 1
                if self._dead > _COMPACT_DEAD_FRACTION * len(self._ids):
                    self._compact()
            return memory

    def _held(self, row: int, memory: Memory | None) -> None:
        """`memory` as the record of `row`'s memory, an object from now on
        (None: the memory is gone). Under `_lock`."""
        if memory is not None:
            self._records[memory.id] = memory
        at = self._rows.at
        if row < len(at):
            at[row] = -1

    def search(self, query: Vector, limit: int, keep: Predicate | None = None
               ) -> list[tuple[Memory, float]]:
        """Up to `limit` (memory, L2 distance) pairs nearest to the unit vector
        `query`, among the memories `keep` accepts, nearest first.

        Exact below `ann.IVF_THRESHOLD` rows; above it, the candidates of
        `_candidates`, each set walked until one holds `limit` accepted
        memories, the last being every row (a filter that keeps few)."""
        view = self.view()
        if view.count == 0 or limit <= 0:
            return []
        for rows, cos in self._candidates(view, query, limit):
            found = self._walk(view, rows, cos, limit, keep)
            if len(found) == limit:
                break
        return found

    def nearest(self, view: View, query: Vector, limit: int, visible: RowMask
                ) -> tuple[Rows, Vector]:
        """`search` in rows: up to `limit` rows of `view` that `visible`
        accepts, nearest first, and their cosines with `query`. `visible`
        reads the rows' columns in one go rather than a record at a time."""
        if view.count == 0 or limit <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        for rows, cos in self._candidates(view, query, limit):
            found = _walk_rows(view, rows, cos, limit, visible)
            if len(found[0]) == limit:
                break
        return found

    def _candidates(self, view: View, query: Vector, limit: int
                    ) -> Iterator[tuple[Rows, Vector]]:
        """Rows to walk for `limit` nearest, with their exact cosines: each
        set holds the one before it, and the last is every row.

        With an IVF: first the best `REFINE x limit` (at least `REFINE_MIN`)
        of the probed lists' rows and the tail's by their 8-bit products (and
        any tail row not coded yet); then every probed row and the tail; then
        every row. The first set is all a recall needs unless its filter
        keeps under ~1 in 4 of the memories (1 in 5 at the default `limit`
        of 24, 128 rows)."""
        if view.ivf is None and view.count >= self.ivf_threshold and not self._maintaining:
            self._maintain()
        ivf = view.ivf
        if ivf is not None:
            # The coded tail competes with the probed rows; the best are kept in
            # list order, as the whole set: ties then fall alike.
            found = ivf.refined(query, self.nprobe, view.tail_codes, view.tail_rows,
                                view.matrix, max(REFINE_MIN, REFINE * limit))
            uncoded = ivf.covered + len(view.tail_rows)
            yield self._uncoded(view, found.rows[found.best], found.exact, uncoded, query)
            if len(found.best) < len(found.rows):
                yield self._uncoded(view, found.rows, ann.exact(view.matrix, found.rows, query),
                                    uncoded, query)
        yield np.arange(view.count), _scan(view.matrix, 0, view.count, query)

    @staticmethod
    def _uncoded(view: View, rows: Rows, cos: Vector, uncoded: int, query: Vector
                 ) -> tuple[Rows, Vector]:
        """`rows` (scored `cos`) and the rows from `uncoded` on, scored exactly."""
        if uncoded < view.count:  # rows written faster than the tail's codes could hold
            rows = np.concatenate([rows, np.arange(uncoded, view.count)])
            cos = np.concatenate([cos, _scan(view.matrix, uncoded, view.count, query)])
        return rows, cos

    def _walk(self, view: View, rows: npt.NDArray[np.int64], cos: Vector, limit: int,
              keep: Predicate | None) -> list[tuple[Memory, float]]:
        """Test candidate `rows` (scored `cos`) nearest first until `limit` pass."""
        cos[~view.alive[rows]] = -np.inf
        # Fetch a window of nearest rows and test them in order; widen the
        # window (x4) only when the predicate rejected too many. A filter that
        # keeps half the vault needs one window of 2 x limit on average.
        found: list[tuple[Memory, float]] = []
        tested: set[int] = set()
        window = min(len(rows), max(limit * 2, 32))
        while True:
            for i in _nearest_rows(cos, window).tolist():
                if i in tested:
                    continue
                tested.add(i)
                if cos[i] == -np.inf:
                    return found
                memory = self.get(view.ids[rows[i]])
                if memory is None or (keep is not None and not keep(memory)):
                    continue
                distance = float(np.sqrt(max(0.0, 2.0 - 2.0 * float(cos[i]))))
                found.append((memory, distance))
                if len(found) == limit:
                    return found
            if window == len(rows):
                return found
            window = min(len(rows), window * 4)

    def cosines(self, memory_ids: list[str], query: Vector, view: View | None = None
                ) -> list[float | None]:
        """Cosine of each memory's vector with `query` (None: not here), in one product."""
        view = view or self.view()
        row_of = self._rows.of.get
        rows = [row_of(i) for i in memory_ids]
        present = [r for r in rows if r is not None and r < view.count]
        if not present:
            return [None] * len(rows)
        values = iter(half.products(view.matrix, np.array(present, dtype=np.int64), query).tolist())
        return [next(values) if r is not None and r < view.count else None for r in rows]

    def view(self) -> View:
        """The rows as they are now; they read the same for as long as the view is held."""
        with self._lock:
            tail, coded = self._tail, 0 if self._tail is None else self._tail.filled
            return View(self._matrix, self._ids, self._alive, len(self._ids), self._ivf,
                        self._columns, ann.NO_ROWS if tail is None else tail.rows[:coded],
                        ann.NO_CODES if tail is None else tail.codes[:coded])

    def _ivf_stale(self) -> bool:
        """Whether the IVF should be built, rebuilt or extended (under `_lock`)."""
        count = len(self._ids)
        if self._maintaining or count < self.ivf_threshold:
            return False
        ivf = self._ivf
        # Retrain when the rows doubled (the centroids no longer fit them);
        # extend when the tail exceeds 1/32 of the indexed rows: every search
        # reads the tail's codes, and 1/32 keeps them under the 1/24 of the
        # rows the lists themselves give a search at 100k (ann.PROBES).
        return (ivf is None or count >= 2 * ivf.trained_on
                or count - ivf.covered > tail_limit(ivf.covered))

    def _maintain(self) -> None:
        with self._lock:
            if self._maintaining:
                return
            self._maintaining = True
        threading.Thread(target=self._maintain_ivf, name="ivf", daemon=True).start()

    def _maintain_ivf(self) -> None:
        again = True
        try:
            while again:
                # Let a burst of writes (a snapshot being loaded, a big batch)
                # finish first: during a 100k load, building on every 2048
                # new rows made 30 builds that competed with the load itself.
                time.sleep(_SETTLE_S)
                with self._lock:
                    epoch = self._epoch
                view = self.view()
                started = time.monotonic()
                ivf = view.ivf
                if ivf is None or view.count >= 2 * ivf.trained_on:
                    ivf = ann.build(view.matrix, view.count)
                else:
                    ivf = ivf.extended(view.matrix, view.count)
                log.info("ivf ready: covers %d rows (%d lists, trained on %d) in %.2f s",
                         ivf.covered, ivf.nlist, ivf.trained_on, time.monotonic() - started)
                with self._lock:
                    if self._epoch == epoch:  # no compaction renumbered the rows meanwhile
                        self._ivf = ivf
                        # Room for twice the tail that triggers the next
                        # extension, for the writes made while it is built.
                        self._tail = ann.TailCodes(ivf, 2 * tail_limit(ivf.covered))
                        self._tail.add(self._matrix, len(self._ids))
                    self._maintaining = False
                    again = self._maintaining = self._ivf_stale()
                del view
                trim_heap()  # k-means' temporaries: ~50 MB at 100k
                fix_thresholds(serving=True)  # the start's bulk work is done (`index/heap.py`)
        finally:
            if again:  # an exception: let the next write try again
                with self._lock:
                    self._maintaining = False

    def _dtype(self, rows: int) -> type[np.floating]:
        """The type of a new matrix that holds `rows` rows: float16 from IVF
        size (`half.py`), float32 below. By rows held, not room: a matrix
        growing past 16k rows stays float32 until the IVF is due."""
        return np.float16 if rows >= self.half_from else np.float32

    def _grow(self) -> None:
        capacity = _grown(len(self._matrix))
        # Rows at and above the count are never read, so no need to zero them.
        matrix = np.empty((capacity, self.dimension), dtype=self._dtype(len(self._ids)))
        matrix[: len(self._matrix)] = self._matrix
        alive = np.zeros(capacity, dtype=bool)
        alive[: len(self._alive)] = self._alive
        self._matrix, self._alive = matrix, alive
        self._columns = self._columns.resized(capacity)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: len(self._ids)])
        capacity = max(_INITIAL_CAPACITY, 2 * len(keep))
        matrix = np.zeros((capacity, self.dimension), dtype=self._dtype(len(keep)))
        matrix[: len(keep)] = self._matrix[keep]
        alive = np.zeros(capacity, dtype=bool)
        alive[: len(keep)] = True
        ids = [self._ids[row] for row in keep]
        self._matrix, self._alive, self._ids, self._dead = matrix, alive, ids, 0
        self._columns = self._columns.taken(keep, capacity)
        self._ivf = None  # its row numbers are gone; rebuilt on the next write or search
        self._tail = None
        self._epoch += 1
        # The restored rows come first, and keep their order.
        old = self._rows
        at = old.at[keep[keep < len(old.at)]]
        records = old.records
        if not (at >= 0).any():  # every restored record replaced or gone
            records, at = Records.of(()), ann.NO_ROWS
        self._rows = _Rows(dict(zip(ids, ints.shared(0, len(ids)), strict=True)), records,
                           at, old.made if records is old.records else {})

    def export(self) -> tuple[Records, Vector]:
        """Every live memory and its vector, in one consistent cut."""
        memories, vectors = self.cut()
        return memories, vectors()

    def cut(self) -> tuple[Records, Callable[[], Vector]]:
        """`export` in two steps: the memories now, their vectors when called.

        Only the cut has to happen under the caller's lock (a snapshot holds
        the vault's write lock): no row of a matrix is ever rewritten (a new
        vector takes a new row; growth and compaction make a new matrix), so
        the rows named now read the same later. At 400k memories the copy of
        their vectors takes 0.4-1.5 s, which writes would otherwise wait for.
        """
        memories, matrix, rows = self.live_rows()
        dimension = self.dimension

        def vectors() -> Vector:
            return half.widened(matrix, rows) if len(rows) else np.zeros((0, dimension),
                                                                          dtype=np.float32)

        return memories, vectors

    def records_of(self, memory_ids: Iterable[str]) -> Records:
        """The records of those of `memory_ids` held, in order, as
        `live_rows` gives them: the restored ones read from their columns."""
        return self.rows_held(memory_ids)[0]

    def rows_held(self, memory_ids: Iterable[str]) -> tuple[Records, Vector | half.Half, Rows]:
        """`live_rows` of those of `memory_ids` held, in their order."""
        with self._lock:
            rows = np.fromiter((row for row in map(self._rows.of.get, memory_ids)
                                if row is not None), dtype=np.int64)
            return self._records_at(rows), self._matrix, rows

    def live_rows(self) -> tuple[Records, Vector | half.Half, Rows]:
        """Every live memory, the matrix, and each memory's row in it, in
        one consistent cut: the rows read the same later (`cut`). The
        memories as `Records`: the restored ones unchanged since are read
        from their columns, made only as they are read."""
        with self._lock:
            # Live rows only: a memory given a new vector left a dead row behind.
            rows = np.flatnonzero(self._alive[: len(self._ids)]).astype(np.int64)
            return self._records_at(rows), self._matrix, rows

    def _records_at(self, rows: Rows) -> Records:
        """The records of `rows` (under `_lock`): a restored one unchanged
        since from its place in the columns, any other its object."""
        held, records, ids = self._rows, self._records, self._ids
        at = np.full(len(rows), -1, dtype=np.int64)
        restored = rows < len(held.at)
        at[restored] = held.at[rows[restored]]
        objects = [records[ids[row]] for row in rows[at < 0].tolist()]
        return held.records.picked(at, objects)


def cut_rows(parts: Sequence[tuple[Records, Vector | half.Half, Rows]]
             ) -> tuple[Records, Callable[[], Vector]]:
    """Several indexes' `live_rows` (or `rows_held`) as one cut: their
    records one after the other, and a function that copies their vectors
    into one matrix in the dtype of the first part's matrix (float16 in a
    large vault, where 100k rows widened to float32 were a 150 MB copy of
    what 77 MB hold), rather than a copy a part then their concatenation.
    The copy can wait until the caller's lock is released: `cut`."""
    records = Records.chained([part_records for part_records, _, _ in parts])
    dimension = parts[0][1].shape[1]
    dtype = parts[0][1].dtype

    def vectors() -> Vector:
        out: Vector = np.empty((len(records), dimension), dtype=dtype)
        start = 0
        for _, matrix, rows in parts:
            into = out[start : start + len(rows)]
            if matrix.dtype == out.dtype:
                np.take(matrix, rows, axis=0, out=into)
            elif half.single(into):  # float16 rows into float32: compiled (`half.py`)
                half.take(matrix, rows, into)
            else:
                into[:] = matrix[rows]
            start += len(rows)
        return out

    return records, vectors


def _scan(matrix: Vector | half.Half, start: int, end: int, query: Vector) -> Vector:
    """The products of rows [start, end) of `matrix` with `query`."""
    if half.single(matrix):  # one BLAS product
        return ann.scores(matrix[start:end], query)
    return half.products(matrix, np.arange(start, end, dtype=np.int64), query)




def tail_limit(covered: int) -> int:
    """The tail past which an IVF covering `covered` rows is extended
    (`scripts/bench_recall.py` grows a tail to 9/10 of it)."""
    return max(1024, covered // 32)


class RestoreMatrix(np.ndarray):
    """A matrix made to be restored into (`restore_matrix`): `restore` given
    its first rows keeps it as the index's matrix instead of copying them."""


def restore_matrix(rows: int, dimension: int, dtype: np.dtype[Any] | None = None
                   ) -> RestoreMatrix:
    """An empty matrix whose first `rows` rows, once filled (a snapshot
    body's vectors, `storage/snapshot_body.py`), `MemoryIndex.restore` of
    `rows` memories takes as its own: the dtype and room a restore of that
    many allocates, whatever `dtype` the rows come in. The copy it saves is
    77 MB at 100k memories (float16), 770 MB at 1M."""
    del dtype  # the rows are converted as they are written in
    kind = np.float16 if rows >= ann.IVF_THRESHOLD else np.float32
    # Room for a delta's new rows to land in place (`storage/delta_body.py`)
    # when it adds up to half as many: a delta of 156k memories over 872k
    # had no room in an eighth, and its copy into a new matrix was 1.5 s of
    # a start and 670 MB more at its peak. Rows never written are never
    # resident (their pages are never touched); the index grows from here.
    capacity = max(_restored_capacity(rows), rows + rows // 2)
    return np.empty((capacity, dimension), kind).view(RestoreMatrix)


def _taken(vectors: object, count: int, dimension: int, dtype: type[np.floating]
           ) -> Vector | half.Half | None:
    """The matrix `vectors` are the first `count` rows of, when it is a
    `RestoreMatrix` of `dimension` columns in `dtype` with room past them;
    else None (they are copied)."""
    if not isinstance(vectors, RestoreMatrix) or len(vectors) != count:
        return None
    whole = matrix_begun_by(vectors)
    if not isinstance(whole, RestoreMatrix) or whole.dtype != dtype or whole.shape[1] != dimension:
        return None
    matrix: Vector | half.Half = whole.view(np.ndarray)
    return matrix


def _restored_capacity(count: int) -> int:
    """The matrix rows a restore of `count` memories allocates: room for an
    eighth more written before it grows (`_grown`), not the next power of
    two, which at 100k memories left 31k rows (48 MB) empty."""
    return count + max(_INITIAL_CAPACITY, count // 8)


def _grown(capacity: int) -> int:
    """The capacity after `capacity`: doubled while small, then a quarter
    more. A quarter keeps at most a fifth of the matrix empty (doubling
    left up to half: 96 MB at 100k) and each row is still copied about
    four times over the matrix's life, ~40 ms a growth at 100k."""
    if capacity < 16 * _INITIAL_CAPACITY:
        return 2 * capacity
    return capacity + capacity // 4


def _walk_rows(view: View, rows: Rows, cos: Vector, limit: int, visible: RowMask
               ) -> tuple[Rows, Vector]:
    """`MemoryIndex._walk` a window at a time: the same rows in the same order."""
    cos[~view.alive[rows]] = -np.inf
    tested = np.zeros(len(rows), dtype=bool)
    picked: list[npt.NDArray[np.intp]] = []
    need = limit
    window = min(len(rows), max(limit * 2, 32))
    while True:
        order = _nearest_rows(cos, window)
        order = order[~tested[order]]
        tested[order] = True
        live = cos[order] != -np.inf  # nearest first: the dead rows come last
        ended = not live.all()
        order = order[live]
        chosen = order[visible(view, rows[order])][:need]
        picked.append(chosen)
        need -= len(chosen)
        if not need or ended or window == len(rows):
            chosen = np.concatenate(picked)
            return rows[chosen].astype(np.int64, copy=False), cos[chosen]
        window = min(len(rows), window * 4)


def _nearest_rows(cos: Vector, window: int) -> npt.NDArray[np.intp]:
    """Indices of the `window` largest cosines, largest first."""
    if window >= len(cos):
        return np.argsort(-cos, kind="stable")
    part = np.argpartition(-cos, window - 1)[:window]
    return part[np.argsort(-cos[part], kind="stable")]
