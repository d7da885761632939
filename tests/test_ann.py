"""The IVF structure on its own: lists cover every row once, extension keeps
old assignments, probing every list returns every row."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memvaultd.index import ivf as ann


def _unit(n: int, seed: int, dim: int = 16) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    unit: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32)
    return unit


def test_lists_partition_the_rows() -> None:
    matrix = _unit(5000, 1)
    ivf = ann.build(matrix, 4000)
    assert ivf.covered == 4000 and ivf.nlist == int(ann.LISTS_PER_SQRT_N * np.sqrt(4000))
    assert sorted(ivf.order.tolist()) == list(range(4000))
    assert ivf.offsets[-1] == 4000 and np.all(np.diff(ivf.offsets) >= 0)
    for i in range(ivf.nlist):
        assert np.all(ivf.labels[ivf.order[ivf.offsets[i] : ivf.offsets[i + 1]]] == i)
    assert np.allclose(np.linalg.norm(ivf.centroids, axis=1), 1.0, atol=1e-5)


def test_every_row_is_in_its_nearest_list() -> None:
    matrix = _unit(3000, 2)
    ivf = ann.build(matrix, 3000)
    nearest = np.argmax(matrix @ ivf.centroids.T, axis=1)
    assert np.array_equal(nearest, ivf.labels)


def test_extension_keeps_old_rows_and_adds_the_tail() -> None:
    matrix = _unit(5000, 3)
    ivf = ann.build(matrix, 3000)
    bigger = ivf.extended(matrix, 5000)
    assert bigger.covered == 5000 and bigger.trained_on == 3000
    assert np.array_equal(bigger.labels[:3000], ivf.labels)
    assert sorted(bigger.order.tolist()) == list(range(5000))


def test_probing_every_list_returns_every_row() -> None:
    matrix = _unit(2000, 4)
    ivf = ann.build(matrix, 2000)
    rows = ivf.rows(matrix[0], nprobe=ivf.nlist)
    assert sorted(rows.tolist()) == list(range(2000))
    some = ivf.rows(matrix[0])
    assert 0 < len(some) < 2000 and len(set(some.tolist())) == len(some)
    assert ivf.labels[0] in {int(ivf.labels[r]) for r in some}  # its own list is probed


def test_the_tail_is_coded_as_written_with_the_lists_scale() -> None:
    """`TailCodes` holds the rows past `covered` as the lists would, up to
    its capacity, and a search ranks them as it ranks a list."""
    matrix = _unit(3000, 5)
    ivf = ann.build(matrix, 2000)
    tail = ann.TailCodes(ivf, 600)
    tail.add(matrix, 2400)
    assert tail.filled == 400
    tail.add(matrix, 3000)  # past the capacity: the rest stays uncoded
    assert tail.filled == 600
    assert np.array_equal(tail.codes, ann.quantized(matrix[2000:2600], ivf.scale))
    query = matrix[2100]
    found = ivf.refined(query, None, tail.codes, tail.rows, None, 0)
    rows, products = found.rows[-len(tail.rows):], found.products[-len(tail.rows):]
    assert rows.tolist() == list(range(2000, 2600))
    rounding = float(np.sum(np.abs(query) / (2 * ivf.scale)))
    # Within the rounding, except rows clipped to the scale of the rows it
    # was made from (they only rank less exactly).
    unclipped = np.all(np.abs(matrix[2000:2600] * ivf.scale) <= 127, axis=1)
    assert unclipped.sum() > 300
    error = np.abs(products - matrix[2000:2600] @ query)
    assert np.all(error[unclipped] <= rounding + 1e-6)
    assert rows[np.argmax(products)] == 2100


# Assigning rows in a fresh interpreter, one BLAS thread as the daemon runs:
# how much more the process holds resident once the products are freed and
# the heap trimmed.
ASSIGN_GROWTH = textwrap.dedent("""
    import json, re
    import numpy as np
    from threadpoolctl import threadpool_limits
    from memvaultd.index import ivf
    from memvaultd.index.heap import trim_heap

    def resident_kb():
        status = open("/proc/self/status").read()
        return int(re.search(r"VmRSS:\\s+(\\d+)", status).group(1))

    threadpool_limits(1)
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(32_768, 384)).astype(np.float32)
    centroids = rng.normal(size=(1024, 384)).astype(np.float32)
    np.dot(centroids[:8], rows[:8].T)  # BLAS loaded and its threads started
    labels = np.empty(len(rows), np.int32)
    before = resident_kb()
    labels[:] = ivf.assign(centroids, rows, 0, len(rows))
    trim_heap()  # as the daemon does after a build: the products' pages
    print(json.dumps({"growth_kb": resident_kb() - before,
                      "agree": float(np.mean(labels == np.argmax(rows @ centroids.T, axis=1)))}))
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_assigning_rows_leaves_little_of_the_blas_buffer_resident() -> None:
    """OpenBLAS keeps the buffer it packs a product into for the life of the
    process, and every page a product touched stays resident: products of
    16k rows left 24 MB of it, in every daemon that built an IVF."""
    done = subprocess.run([sys.executable, "-c", ASSIGN_GROWTH], capture_output=True,
                          text=True, timeout=120, check=True)
    found = json.loads(done.stdout)
    assert found["agree"] > 0.999
    assert found["growth_kb"] < 8 * 1024, found  # 25 MB with products of 16k rows
