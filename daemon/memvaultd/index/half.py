"""The matrix of a large vault in float16, and the loops that read it.

A vault of `IVF_THRESHOLD` rows and more keeps its vectors as float16: 768
bytes a memory rather than 1,536 (77 MB less resident at 100k, 768 MB at
1M). The IVF picks a search's rows from its 8-bit codes (`ivf.py`) and the
best of them are scored exactly from these rows, widened to float32 as
they are read; a smaller vault keeps float32, which one BLAS product scans
without numba (`memory_index.py`).

Rounding a unit vector's values to float16 (11 significant bits) moves a
product by at most ~2^-11 of it; at 100k memories recall@10 against the
float32 exact scan stayed >= 0.99 (docs/benchmarks.md). A value under
2^-14 in magnitude (a float16 subnormal) is read as zero: with 384
dimensions such a value moves a product by under 6e-5 x 2^-14 at most.

Why compiled: NumPy 2.4 on the development machine widens float16 at ~4 ns
a value (150-220 ms for 100k x 384) and its float16 matrix-vector product
is ~10x slower than float32; these loops widen by integer bit moves, which
LLVM turns into SIMD, and score 128 rows in ~17 us (4 us from float32) and
100k rows in ~12 ms, as the float32 product does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeGuard

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Half = npt.NDArray[np.float16]
Rows = npt.NDArray[np.int64]
Bits = npt.NDArray[np.uint16]
Wide = npt.NDArray[np.uint32]


_SUBNORMAL = np.float32(2.0**-14)  # the smallest normal float16


def _widen_row(bits: Bits, r: int, wide: Wide, bias: Matrix) -> None:
    """Row `r` of `bits` (float16 values) as float32, `wide` (bits) minus
    `bias`: sign kept, exponent rebased from 15 to 127, mantissa moved up 13
    places. A subnormal (exponent 0) is rebased as if its exponent were 1,
    2^-14 x (1 + m/1024), and `bias` takes the 2^-14 off again: m x 2^-24,
    exactly, as NumPy widens it."""
    for j in range(bits.shape[1]):
        h = np.uint32(bits[r, j])
        normal = (h & np.uint32(0x7C00)) != 0
        negative = (h & np.uint32(0x8000)) != 0
        wide[j] = (((h & np.uint32(0x8000)) << np.uint32(16))
                   | (((h & np.uint32(0x7FFF)) << np.uint32(13))
                      + (np.uint32(0x38000000) if normal else np.uint32(0x38800000))))
        bias[j] = np.float32(0.0) if normal else (-_SUBNORMAL if negative else _SUBNORMAL)


def _products(bits: Bits, rows: Rows, query: Matrix) -> Matrix:
    """`bits[rows] @ query`, `bits` being float16 values: each row widened
    (`_widen_row`), then multiplied."""
    products = np.empty(len(rows), np.float32)
    wide = np.empty(query.shape[0], np.uint32)
    values = wide.view(np.float32)
    bias = np.empty(query.shape[0], np.float32)
    for k in range(len(rows)):
        _widen_row(bits, rows[k], wide, bias)
        acc = np.float32(0.0)
        for j in range(query.shape[0]):
            acc += (values[j] - bias[j]) * query[j]
        products[k] = acc
    return products


def _widen(bits: Bits, rows: Rows, out: Matrix) -> None:
    """`out[k] = bits[rows[k]]` widened to float32 (`_widen_row`)."""
    wide = np.empty(bits.shape[1], np.uint32)
    values = wide.view(np.float32)
    bias = np.empty(bits.shape[1], np.float32)
    for k in range(len(rows)):
        _widen_row(bits, rows[k], wide, bias)
        for j in range(bits.shape[1]):
            out[k, j] = values[j] - bias[j]


@functools.cache
def _compiled() -> tuple[Callable[[Bits, Rows, Matrix], Matrix],
                         Callable[[Bits, Rows, Matrix], None]]:
    """`_products` and `_widen`, compiled with `_widen_row` inlined. numba
    compiles a call only to a compiled function, so `_widen_row` is made one
    here, when numba is imported, rather than at this module's import: a
    vault under IVF size never imports numba (~120 MB, `compiled.py`)."""
    import numba

    from memvaultd.index.compiled import nogil

    global _widen_row
    _widen_row = numba.njit(inline="always")(_widen_row)
    return nogil(fastmath=True)(_products), nogil()(_widen)


def single(matrix: Half | Matrix) -> TypeGuard[Matrix]:
    """Whether `matrix` is float32 (a vault under IVF size)."""
    return bool(matrix.dtype == np.float32)


def products(matrix: Half | Matrix, rows: Rows, query: Matrix) -> Matrix:
    """The products of `matrix[rows]` with `query`, in float32: one NumPy
    product for a float32 matrix, `_products` for a float16 one."""
    if single(matrix):
        product: Matrix = np.dot(matrix[rows], query)
        return product
    return _compiled()[0](matrix.view(np.uint16), rows,
                                np.ascontiguousarray(query, np.float32))


def take(matrix: Half | Matrix, rows: Rows, out: Matrix) -> None:
    """`out[:] = matrix[rows]` in float32, whichever of the two `matrix` is."""
    if single(matrix):
        np.take(matrix, rows, axis=0, out=out)
    elif len(rows):
        _compiled()[1](matrix.view(np.uint16), rows, out)


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
