"""The float16 matrix of a large vault: read exactly as NumPy widens it,
half the bytes, and recall as it was (memvaultd/index/half.py)."""

from __future__ import annotations

import math

import numpy as np

from memvaultd.index import half
from memvaultd.index import ivf as ann
from memvaultd.index.memory_index import MemoryIndex
from memvaultd.model.memory import Memory

from .reference_index import wait_for_ivf

DIM = 64


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    centres = rng.normal(size=(20, dim)).astype(np.float32)
    vectors = centres[rng.integers(0, 20, size=n)] + rng.normal(0.0, 0.1, size=(n, dim))
    unit: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32)
    return unit


def test_every_finite_half_widens_as_numpy_widens_it() -> None:
    every = np.arange(2**16, dtype=np.uint16).view(np.float16).reshape(-1, 64)
    rows = np.arange(len(every), dtype=np.int64)
    wide, numpy_wide = half.widened(every, rows), every.astype(np.float32)
    finite = np.isfinite(numpy_wide)  # unit vectors hold no infinity or NaN
    assert np.array_equal(wide[finite], numpy_wide[finite])
    subnormal = (every.view(np.uint16) & 0x7C00) == 0
    assert np.array_equal(wide[subnormal], numpy_wide[subnormal])  # zeros and subnormals


def test_products_are_those_of_the_widened_rows() -> None:
    rng = np.random.default_rng(3)
    matrix = _unit(rng, 500, 384).astype(np.float16)
    matrix[7, :40] = np.float16(1e-6)  # subnormals count too
    query = _unit(rng, 1, 384)[0]
    rows = rng.choice(500, size=130, replace=False).astype(np.int64)
    expected = matrix[rows].astype(np.float32) @ query
    assert np.allclose(half.products(matrix, rows, query), expected, atol=1e-6)
    assert np.allclose(ann.exact(matrix, rows, query), expected, atol=1e-6)
    every = np.arange(500, dtype=np.int64)
    assert np.allclose(half.products(matrix, every, query),
                       matrix.astype(np.float32) @ query, atol=1e-6)


def _index(vectors: np.ndarray, half_from: int, threshold: int) -> MemoryIndex:
    index = MemoryIndex(vectors.shape[1])
    index.half_from, index.ivf_threshold = half_from, threshold
    for i, vector in enumerate(vectors):
        index.put(Memory(id=f"m{i}", text=f"memory {i}"), vector)
    return index


def test_a_large_matrix_is_float16_and_a_small_one_float32() -> None:
    vectors = _unit(np.random.default_rng(4), 3000)
    small, large = _index(vectors, 10**9, 10**9), _index(vectors, 2000, 10**9)
    assert small.view().matrix.dtype == np.float32
    assert large.view().matrix.dtype == np.float16
    assert large.view().matrix.nbytes * 2 == small.view().matrix.nbytes
    restored = MemoryIndex(DIM)
    restored.half_from, restored.ivf_threshold = 2000, 10**9
    restored.restore([Memory(id=f"m{i}", text=f"memory {i}") for i in range(3000)], vectors)
    assert restored.view().matrix.dtype == np.float16
    # What leaves the index is float32, each value the float16 it holds.
    stored = vectors.astype(np.float16).astype(np.float32)
    for index in (large, restored):
        vector = index.vector("m5")
        assert vector is not None and vector.dtype == np.float32
        assert np.array_equal(vector, stored[5])
        memories, exported = index.export()
        assert exported.dtype == np.float32
        assert np.array_equal(exported, stored[[int(m.id[1:]) for m in memories]])
    # The same vector again keeps its row, as in a float32 matrix.
    before = large.view().count
    large.put(Memory(id="m5", text="memory 5 again"), vectors[5])
    assert large.view().count == before


def test_the_ivf_over_float16_keeps_recall_and_exact_scores() -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng, 6000)
    index = _index(vectors, 2000, 2000)
    assert wait_for_ivf(index) and index.view().matrix.dtype == np.float16
    overlap = []
    for query in _unit(rng, 50):
        found = index.search(query, 10)
        truth = np.argsort(-(vectors @ query), kind="stable")[:10]  # float32, exact
        overlap.append(len({m.id for m, _ in found} & {f"m{i}" for i in truth}) / 10)
        stored = index.view().matrix.astype(np.float32)
        for memory, distance in found:  # the products of the rows as stored
            cos = float(stored[int(memory.id[1:])] @ query)
            assert math.isclose(distance, math.sqrt(max(0.0, 2 - 2 * cos)), abs_tol=1e-5)
    assert np.mean(overlap) >= 0.99
