#!/usr/bin/env python3
"""The compiled search loops (`memvaultd.index.loops`) against the NumPy
they stand in for, in this process, side by side.

    .venv/bin/python scripts/bench_loops.py [--rows 100000] [--json-only]

For each loop, on the shapes a recall gives it at `--rows` memories (the
IVF's probed lists: 2 sqrt(N) lists, 1/25 of them read; the exact scoring
of 4 x 24 candidates; the keyword sums of a 3-term and an 8-term query over
postings of 2% of the documents each; a keyword window cut from the
documents a search holds, 2% of them, a sixth of those tied at the cut),
the compiled call and the code it stands in for (NumPy's, or for the
probed lists also the portable loop beside the AVX-512 VNNI one) are timed
in alternating blocks, and each row gives both medians, their ratio, and
two threads' calls per second (the compiled loops hold no interpreter
lock; NumPy's small calls do).

Output: a table, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "daemon"), str(ROOT / "base")]

from memvaultd.index import keyword, loops  # noqa: E402

DIMS = 384
BLOCKS = 9  # alternating blocks per side; the median of their per-call times


def per_call_us(call: Callable[[], Any], seconds: float) -> float:
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        call()
        calls += 1
    return (time.perf_counter() - started) / calls * 1e6


def _side_by_side(compiled: Callable[[], Any], plain: Callable[[], Any]) -> tuple[float, float]:
    compiled(), plain()  # first calls: caches and page faults
    a, b = [], []
    for _ in range(BLOCKS):
        a.append(per_call_us(compiled, 0.1))
        b.append(per_call_us(plain, 0.1))
    return statistics.median(a), statistics.median(b)


def _two_threads_per_s(call: Callable[[], Any], seconds: float = 0.6) -> float:
    counts = [0, 0]
    stop = time.perf_counter() + seconds

    def run(i: int) -> None:
        while time.perf_counter() < stop:
            call()
            counts[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    n = args.rows
    nlist = min(1024, 2 * int(math.sqrt(n)))
    probed = max(24, nlist // 25)
    per_list = n // nlist
    codes = rng.integers(-127, 128, size=(n, DIMS), dtype=np.int8)
    order = rng.permutation(n).astype(np.int64)
    offsets = np.arange(0, n + 1, per_list, dtype=np.int64)[: nlist + 1]
    lists = np.sort(rng.choice(nlist, probed, replace=False))
    starts, ends = offsets[lists], offsets[lists + 1]
    query = rng.normal(size=DIMS).astype(np.float32)
    matrix = rng.normal(size=(n, DIMS)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    half = matrix.astype(np.float16)
    candidates = rng.choice(n, 96, replace=False).astype(np.int64)

    def numpy_lists() -> tuple[np.ndarray, np.ndarray]:
        products = [np.dot(codes[s:e], query) for s, e in zip(starts, ends, strict=True)]
        rows = [order[s:e] for s, e in zip(starts, ends, strict=True)]
        return np.concatenate(rows), np.concatenate(products)

    index = keyword.KeywordIndex()
    # As the index holds them: lengths in uint16, 0 for a removed document (1 in 20).
    lengths = rng.integers(3, 40, n).astype(np.uint16)
    lengths[rng.random(n) < 0.05] = 0
    index._lengths = lengths

    def postings(terms: int) -> list[tuple[np.ndarray, np.ndarray]]:
        per = n // 50
        # As the index stores them: int32 ordinals, one-byte counts.
        return [(np.sort(rng.choice(n, per, replace=False)).astype(np.int32),
                 rng.integers(1, 4, per).astype(np.uint8)) for _ in range(terms)]

    def sums(found: list[tuple[np.ndarray, np.ndarray]], compiled: bool) -> Callable[[], Any]:
        idfs = list(rng.random(len(found)) * 4)

        def call() -> Any:
            index._compiled = compiled
            return index._sums(found, idfs, 17.0, n)
        return call

    held = n // 50
    scores = rng.integers(1, 60, held).astype(np.float64) / 7
    scores[rng.choice(held, held // 6, replace=False)] = 8.75  # ties at the cut
    scores[rng.choice(held, 40, replace=False)] = 9.0 + rng.random(40)

    def numpy_window() -> np.ndarray:
        pool = np.arange(held)
        part = -scores[pool]
        pool = pool[part <= np.partition(part, keyword.FIRST_WINDOW - 1)[keyword.FIRST_WINDOW - 1]]
        return pool[np.argsort(-scores[pool], kind="stable")]

    three, eight = postings(3), postings(8)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any], str]] = [
        (f"IVF probed lists ({probed} x {per_list} rows)",
         lambda: loops.probed_lists(codes, order, starts, ends, query), numpy_lists, "numpy"),
        ("the same, portable loop" + (" (no VNNI here)" if not loops.VNNI else ""),
         lambda: loops.probed_lists(codes, order, starts, ends, query),
         lambda: loops.probed_lists(codes, order, starts, ends, query, widest=False),
         "portable"),
        ("exact scoring, 96 rows float32",
         lambda: loops.exact(matrix, candidates, query), lambda: matrix[candidates] @ query,
         "numpy"),
        ("exact scoring, 96 rows float16",
         lambda: loops.half_products(half.view(np.uint16), candidates, query),
         lambda: half[candidates].astype(np.float32) @ query, "numpy"),
        ("keyword sums, 3 terms", sums(three, True), sums(three, False), "numpy"),
        ("keyword sums, 8 terms", sums(eight, True), sums(eight, False), "numpy"),
        (f"keyword window of {held:,} held",
         lambda: loops.best_first(scores, np.arange(held), keyword.FIRST_WINDOW), numpy_window,
         "numpy"),
    ]
    figures: dict[str, Any] = {"rows": n, "vnni": loops.VNNI,
                               "machine": {"nproc": os.cpu_count()}}
    table = []
    for name, compiled, plain, against in cases:
        fast, slow = _side_by_side(compiled, plain)
        threads_fast, threads_slow = _two_threads_per_s(compiled), _two_threads_per_s(plain)
        figures[name] = {"compiled_us": round(fast, 2), f"{against}_us": round(slow, 2),
                         "ratio": round(slow / fast, 2),
                         "two_threads_per_s": [round(threads_fast), round(threads_slow)]}
        table.append(f"{name:<40} {fast:9.1f} {slow:9.1f} {slow / fast:6.2f}x "
                     f"{threads_fast:8.0f} {threads_slow:8.0f}")
    if not args.json_only:
        print(f"{n:,} rows; us a call (median of {BLOCKS} alternating blocks); "
              "calls/s with two threads; 'before': NumPy's, or the portable loop")
        print(f"{'loop':<40} {'compiled':>9} {'before':>9} {'ratio':>7} {'2 thr':>8} "
              f"{'before':>8}")
        print("\n".join(table))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
