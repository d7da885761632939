"""An inverted-file (IVF) index over the rows of the vector matrix.

Above `IVF_THRESHOLD` rows an exact scan stops fitting the latency budget: it
reads the whole matrix (150 MB at 100k x 384 float32, about 9 ms on the
development machine; 1.5 GB and ~100 ms at 1M). The IVF partitions the rows
by their nearest of `nlist` centroids (k-means, in NumPy, on a sample) and a
search reads only the `nprobe` lists whose centroids are nearest the query.

The lists are read from an 8-bit copy of the vectors (`codes`, one byte per
dimension, scaled per dimension), which ranks a probed row by an
approximate product; the index then only chooses which rows to read: the
best of them are scored in float32 from the matrix's own rows
(`exact`; float16 rows in a vault of IVF size, widened as they are read:
`half.py`), and every score a recall returns is a product with the row. Why 8 bits: the probed
lists are read from memory once a search (~4,100 rows at 100k, ~26,000 at
1M), and a quarter of the bytes took 0.13 ms against 0.29 ms for float32 at
100k; the copy costs 38 MB rather than 150 MB at 100k (384 MB rather than
1.5 GB at 1M). Rounding moves a product by at most sum_j |q_j| / (2 s_j):
0.013 for the benchmark's queries at 140k memories, where the largest error
seen was 0.002; the caller scores 4 x (at least 128) the rows it needs
exactly, and the exact 24 nearest were among the best 27 by code
(`memory_index.py`).

The structure is immutable once built: the lists are one array of row
numbers grouped by list (`order`), where each list starts (`offsets`), and
the codes in that order, covering rows [0, covered); contiguous reads of
them beat gathering the rows by number (0.97 ms against 2.76 ms p50 at 100k
when both were float32). Rows appended later form the tail, which every
search reads until an `extended` copy assigns them to their lists; the owner
swaps the new object in, so readers never see a half-built index.

The tail is read from codes too (`TailCodes`, made as the rows are written,
with the lists' scale), and its rows compete with the probed ones for exact
scoring. Read exactly, in float32, a tail near the size that triggers an
extension (1/32 of the covered rows) cost a recall more than the lists: at
180k memories, in process, 2.50-2.76 ms a recall against 1.51-2.03 ms from
its codes and 1.38-1.56 ms with no tail (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from memvaultd.index import half, loops
from memvaultd.index.half import Half

Matrix = npt.NDArray[np.float32]
Rows = npt.NDArray[np.int64]

# Measured on clustered MiniLM-like vectors (docs/benchmarks.md): below 20k
# rows the exact scan costs under 2 ms, and exact answers are worth that.
IVF_THRESHOLD = 20_000
# 2 sqrt(N) lists (632 at 100k, 2,000 at 1M). Finer lists hold the near
# neighbours of a query in fewer rows: on the benchmark's 100k clustered
# vectors (120 queries, docs/benchmarks.md), sqrt(N) lists read 7,961 rows
# for recall@10 0.9967 (worst query 0.8), 2 sqrt(N) lists 3,762 rows for
# 0.9992 (worst 0.9), at 0.57 ms a search against 1.1 ms. 4 sqrt(N) gained
# little more (2,084 rows, 0.9983) and took 5.5 s to build against 2.3.
LISTS_PER_SQRT_N = 2
# The cap, for the build's sake: assigning 1M rows to 2,000 centroids is ~1.5
# TFLOP, in the background (a 1M daemon built its IVF in 29-35 s after it
# served, against 19-25 s for 1,024 lists, 7 Dec); past it lists grow with
# N, and so does a search. At 1M, 26 lists of ~500 rows read 13,000 rows a
# search, where a cap of 1,024 read 26,000, for recall@10 0.999 against
# 1.000 (24 and 32 probes of 2,000 lists; 24 of 1,024); hybrid p50 over the
# socket 4.77 against 5.19 ms, vector 3.47 against 3.99 (3 alternating
# rounds, `bench_recall_ab.py`, 7 Dec).
MAX_LISTS = 2048
# Lists read per query, whatever the vault's size: the 26 of 632 lists
# measured above at 100k. With lists growing as sqrt(N), a query's nearest
# neighbours crowd into its nearest lists as N grows rather than spread over
# more of them. On the benchmark's 1M vectors (1,024 lists, 100 queries,
# 7 Dec), 16 lists gave recall@10 0.999 and 24 gave 1.000, as did 41 (1/25
# of the lists); 26 lists are ~26,000 rows a search against 41,500 for 41,
# 1.4-1.5 against 2.3 ms over 1M random codes (float products).
PROBES = 26
# k-means on at most this many rows per centroid, for this many rounds.
_SAMPLE_PER_LIST = 32
_ROUNDS = 8
_CHUNK = 16_384  # rows coded or scaled at a time (16k x 384 floats = 24 MB)
# Rows assigned per matrix product. OpenBLAS packs a product's operands
# into a 32 MB buffer it keeps for the life of the process, and the pages a
# product touched stay resident: 16k rows against 1,024 centroids left 24 MB
# of it resident, 2,048 rows 3.5 MB, and took no longer (111 against 149 ms
# per 16k rows, one thread, 7 Dec).
_ASSIGNED = 2_048


def scores(rows: Matrix, query: Matrix) -> Matrix:
    """`rows @ query`, with the interpreter lock released while it runs: the
    rows not coded yet, the exact scan.

    NumPy 2.4's `matmul` keeps the lock for a matrix-vector product under
    ~500 rows; `dot` hands every one to BLAS without it. With `@` two threads
    doing 150 x 384 float32 products (20 us each) ran at 1.0x one thread,
    with `dot` at 1.9x. (A search itself, the centroids and ~26 such lists
    at 100k, is one compiled call: `loops.ivf_search`.)
    """
    product: Matrix = np.dot(rows, query)
    return product


Codes = npt.NDArray[np.int8]


def exact(matrix: Matrix | Half, rows: Rows, query: Matrix) -> Matrix:
    """The exact products of `matrix[rows]` with `query`, without the copy of
    the rows or the interpreter lock: the candidates an IVF search refines,
    scored from the matrix itself (`loops.exact`, or `half.products` for a
    float16 matrix)."""
    if half.single(matrix):
        return loops.exact(matrix, rows, np.ascontiguousarray(query, np.float32))
    return half.products(matrix, rows, query)


class Refined(NamedTuple):
    """What `InvertedLists.refined` found."""

    rows: Rows  # the probed lists' rows, then the tail's
    products: Matrix  # theirs, from the codes
    best: Rows  # positions in `rows` of the best by `products`, ascending
    exact: Matrix  # the exact products of `rows[best]`


NO_CODES: Codes = np.zeros((0, 0), dtype=np.int8)
NO_ROWS: Rows = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class InvertedLists:
    centroids: Matrix
    labels: npt.NDArray[np.int32]  # list of each covered row
    order: Rows  # covered rows grouped by list
    offsets: Rows  # list l is order[offsets[l]:offsets[l + 1]]
    codes: Codes  # the matrix rows in `order`, as round(value * scale)
    scale: Matrix  # per dimension
    covered: int
    trained_on: int  # rows when the centroids were trained
    nprobe: int

    @property
    def nlist(self) -> int:
        return len(self.centroids)

    def rows(self, query: Matrix, nprobe: int | None = None) -> Rows:
        """The covered rows in the `nprobe` lists nearest `query`."""
        return self.search(query, nprobe)[0]

    def search(self, query: Matrix, nprobe: int | None = None) -> tuple[Rows, Matrix]:
        """The covered rows in the `nprobe` lists nearest `query`, and their
        approximate inner products with it (from the codes)."""
        found = self.refined(query, nprobe, NO_CODES, NO_ROWS, None, 0)
        return found.rows, found.products

    def refined(self, query: Matrix, nprobe: int | None, tail_codes: Codes, tail_rows: Rows,
                matrix: Matrix | Half | None, best: int) -> Refined:
        """`search`, then the tail's rows (`tail_rows`, coded `tail_codes`, from
        `TailCodes`) ranked as a list's, and the `best` of all by their
        approximate products scored exactly from `matrix` (None: `best` is 0):
        one compiled call (`loops.ivf_search`)."""
        return Refined(*loops.ivf_search(
            self.centroids, self.offsets, self.codes, self.order, tail_codes, tail_rows,
            self.scale, np.ascontiguousarray(query, np.float32), nprobe or self.nprobe, matrix,
            best))

    def extended(self, matrix: Matrix | Half, count: int) -> InvertedLists:
        """A copy that also covers rows [covered, count) of `matrix`."""
        new = assign(self.centroids, matrix, self.covered, count)
        return _lists(matrix, self.centroids, np.concatenate([self.labels, new]),
                      self.trained_on, self.nprobe, self.scale)


def build(matrix: Matrix | Half, count: int, seed: int = 0) -> InvertedLists:
    """Train centroids on rows [0, count) of `matrix` and assign every row."""
    nlist = max(1, min(MAX_LISTS, int(LISTS_PER_SQRT_N * np.sqrt(count))))
    rng = np.random.default_rng(seed)
    sample_size = min(count, nlist * _SAMPLE_PER_LIST)
    sample = half.widened(matrix, np.sort(rng.choice(count, size=sample_size, replace=False)))
    centroids = sample[rng.choice(sample_size, size=nlist, replace=False)].copy()
    for _ in range(_ROUNDS):
        labels = assign(centroids, sample, 0, sample_size)
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, sample)
        sizes = np.bincount(labels, minlength=nlist)
        empty = sizes == 0
        # An empty list takes a random sample row: a centroid that wins
        # nothing would be a list that is never useful.
        sums[empty] = sample[rng.choice(sample_size, size=int(empty.sum()))]
        centroids = _normalised(sums)
    nprobe = min(nlist, PROBES)
    return _lists(matrix, centroids, assign(centroids, matrix, 0, count), count, nprobe,
                  _scale(matrix, count))


def assign(centroids: Matrix, matrix: Matrix | Half, start: int, end: int
           ) -> npt.NDArray[np.int32]:
    """The nearest centroid (largest inner product) of each of rows
    [start, end) of `matrix`."""
    labels = np.empty(end - start, dtype=np.int32)
    for at in range(start, end, _ASSIGNED):
        rows = half.block(matrix, at, min(end, at + _ASSIGNED))
        labels[at - start : at - start + len(rows)] = np.argmax(rows @ centroids.T, axis=1)
    return labels


def _scale(matrix: Matrix | Half, count: int) -> Matrix:
    """Per dimension, what maps the largest magnitude of rows [0, count) of
    `matrix` to 127. Rows added later are clipped to it: they only rank less
    exactly."""
    largest = np.zeros(matrix.shape[1], dtype=np.float32)
    for start in range(0, count, _CHUNK):
        rows = half.block(matrix, start, min(count, start + _CHUNK))
        np.maximum(largest, np.abs(rows).max(axis=0), out=largest)
    largest[largest == 0] = 1.0
    scale: Matrix = (127.0 / largest).astype(np.float32)
    return scale


def _codes(matrix: Matrix | Half, rows: Rows, scale: Matrix) -> Codes:
    """`matrix[rows]` rounded to 8 bits, a chunk at a time: at 1M rows the
    float32 copy would be 1.5 GB at once."""
    codes = np.empty((len(rows), matrix.shape[1]), dtype=np.int8)
    for start in range(0, len(rows), _CHUNK):
        chunk = half.widened(matrix, rows[start : start + _CHUNK])
        codes[start : start + _CHUNK] = quantized(chunk, scale)
    return codes


def quantized(rows: Matrix, scale: Matrix) -> Codes:
    """`rows` as 8-bit codes: round(value * scale), clipped to +-127."""
    codes: Codes = np.clip(np.rint(rows * scale), -127, 127).astype(np.int8)
    return codes


class TailCodes:
    """The codes of the rows an IVF does not cover yet, from `ivf.covered`
    on, made as the rows are written (under the owner's lock) with the IVF's
    scale, for up to `capacity` rows; rows past those are read exactly.

    Written once per row and only ever appended: a reader that took
    `codes[:n]` and `rows[:n]` reads the same values for as long as it holds
    them, while later rows are added."""

    __slots__ = ("codes", "filled", "rows", "scale", "start")

    def __init__(self, ivf: InvertedLists, capacity: int) -> None:
        self.start = ivf.covered
        self.scale = ivf.scale
        self.rows: Rows = np.arange(ivf.covered, ivf.covered + capacity, dtype=np.int64)
        self.codes: Codes = np.empty((capacity, len(ivf.scale)), dtype=np.int8)
        self.filled = 0

    def add(self, matrix: Matrix | Half, count: int) -> None:
        """Code the rows of `matrix` up to `count` (or capacity) not coded yet."""
        end = min(count - self.start, len(self.rows))
        if end > self.filled:
            self.codes[self.filled : end] = quantized(
                half.block(matrix, self.start + self.filled, self.start + end), self.scale)
            self.filled = end


def _lists(matrix: Matrix | Half, centroids: Matrix, labels: npt.NDArray[np.int32], trained_on: int,
           nprobe: int, scale: Matrix) -> InvertedLists:
    order = np.argsort(labels, kind="stable").astype(np.int64)
    offsets = np.zeros(len(centroids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=len(centroids)), out=offsets[1:])
    return InvertedLists(centroids, labels, order, offsets, _codes(matrix, order, scale), scale,
                         len(labels), trained_on, nprobe)


def _normalised(vectors: Matrix) -> Matrix:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: Matrix = (vectors / norms).astype(np.float32)
    return normalised
