"""The matrix of a large vault in float16, and the loops that read it.

A vault of `IVF_THRESHOLD` rows and more keeps its vectors as float16: 768
bytes a memory rather than 1,536 (77 MB less resident at 100k, 768 MB at
1M). The IVF picks a search's rows from its 8-bit codes (`ivf.py`) and the
best of them are scored exactly from these rows, widened to float32 as
they are read; a smaller vault keeps float32, which one BLAS product scans
(`memory_index.py`).

Rounding a unit vector's values to float16 (11 significant bits) moves a
product by at most ~2^-11 of it; at 100k memories recall@10 against the
float32 exact scan stayed >= 0.99 (docs/benchmarks.md). A value under
2^-14 in magnitude (a float16 subnormal) is read as zero: with 384
dimensions such a value moves a product by under 6e-5 x 2^-14 at most.

Why compiled (`loops.half_products`, `loops.half_widen`): NumPy 2.4 on the
development machine widens float16 at ~4 ns a value (150-220 ms for 100k x
384) and its float16 matrix-vector product is ~10x slower than float32;
the compiled loops widen by integer bit moves, eight values at a time, and
score 96 rows in ~8 us (2.6 us from float32).
"""

from __future__ import annotations

from typing import TypeGuard

import numpy as np
import numpy.typing as npt

from memvaultd.index import loops

Matrix = npt.NDArray[np.float32]
Half = npt.NDArray[np.float16]
Rows = npt.NDArray[np.int64]


def single(matrix: Half | Matrix) -> TypeGuard[Matrix]:
    """Whether `matrix` is float32 (a vault under IVF size)."""
    return bool(matrix.dtype == np.float32)


def products(matrix: Half | Matrix, rows: Rows, query: Matrix) -> Matrix:
    """The products of `matrix[rows]` with `query`, in float32: one NumPy
    product for a float32 matrix, `_products` for a float16 one."""
    if single(matrix):
        product: Matrix = np.dot(matrix[rows], query)
        return product
    return loops.half_products(matrix.view(np.uint16), rows,
                               np.ascontiguousarray(query, np.float32))


def take(matrix: Half | Matrix, rows: Rows, out: Matrix) -> None:
    """`out[:] = matrix[rows]` in float32, whichever of the two `matrix` is."""
    if single(matrix):
        np.take(matrix, rows, axis=0, out=out)
    elif len(rows):
        loops.half_widen(matrix.view(np.uint16), rows, out)


def widened(matrix: Half | Matrix, rows: Rows) -> Matrix:
    """`matrix[rows]` as a new float32 array."""
    out = np.empty((len(rows), matrix.shape[1]), np.float32)
    take(matrix, rows, out)
    return out


def block(matrix: Half | Matrix, start: int, end: int) -> Matrix:
    """Rows [start, end) of `matrix` in float32: themselves when they are."""
    if single(matrix):
        return matrix[start:end]
    return widened(matrix, np.arange(start, min(end, len(matrix)), dtype=np.int64))
