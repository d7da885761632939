#!/usr/bin/env python3
"""The keyword channel's search, holding only the documents that can rank
first against summing every posting, in this process, side by side.

    .venv/bin/python scripts/bench_keywords.py [--n 1000000] [--json-only]

The index holds `--n` of `scripts/bench_recall.py`'s memories (its 300
centre texts, each memory one of them plus "(bench memory i)", its topic
and tags), restored as a daemon's start restores it. For each of that
benchmark's 20 cached queries, what a hybrid recall asks of the channel is
timed: the search, its first window of ranked documents (`ranked_windows`),
and the scores of 50 other documents (`scores_of`, the vector channel's
candidates). The two ways run in alternating blocks on the same index
(`keyword.PRUNE_FROM` set past any search for the whole sum), each query's
answers compared first: the same documents in the same order, the same
scores to the bit.

Output: a table (per query: postings, documents held, both medians), then
one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_loops import per_call_us
from bench_recall import CACHED_QUERIES, SEED, drawn_texts

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "daemon"), str(ROOT / "base")]

from memvaultd.index import keyword  # noqa: E402
from memvaultd.index.keyword import KeywordIndex  # noqa: E402

BLOCKS = 7  # alternating blocks per side and query; the median of their per-call times
CANDIDATES = 50  # ids whose scores a hybrid recall reads (the vector channel's, ~2 x 24)
WHOLE = 10**18  # a PRUNE_FROM no search reaches


def _index(n: int) -> tuple[KeywordIndex, list[str]]:
    centres, _ = drawn_texts(0)
    assignment = np.random.default_rng(SEED).integers(0, len(centres), size=n)
    ids = [f"{i:032x}" for i in range(n)]
    # The fields `index/layer.py` gives the channel: text, topic's last part, tags, entity.
    fields = ((f"{centres[c]} (bench memory {i})", str(i), "bench", f"centre-{c}", "")
              for i, c in enumerate(assignment.tolist()))
    index = KeywordIndex()
    index.restore(ids, fields)
    return index, ids


def _asked(index: KeywordIndex, query: str, others: list[str]) -> tuple[list[str], list[float]]:
    hits = index.search(query)
    first = next(hits.ranked_windows(), np.zeros(0, dtype=np.int64))
    return hits.ids_of(first.tolist()), hits.scores_of(others)


def _timed(prune_from: int, call: Callable[[], Any]) -> float:
    keyword.PRUNE_FROM = prune_from
    return per_call_us(call, 0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="documents indexed")
    parser.add_argument("--json-only", action="store_true", help="print the JSON line only")
    args = parser.parse_args(argv)
    pruned_from = keyword.PRUNE_FROM
    started = time.perf_counter()
    index, ids = _index(args.n)
    restore_s = time.perf_counter() - started
    _, queries = drawn_texts(0)
    others = [ids[i] for i in np.random.default_rng(1).integers(0, args.n, CANDIDATES)]
    rows, figures = [], {}
    for query in queries[:CACHED_QUERIES]:
        keyword.PRUNE_FROM = WHOLE
        whole_hits = index.search(query)
        whole = _asked(index, query, others)
        keyword.PRUNE_FROM = pruned_from
        held = len(index.search(query)._ords)
        pruned = _asked(index, query, others)
        if pruned[0] != whole[0] or np.array(pruned[1]).tobytes() != np.array(whole[1]).tobytes():
            print(f"the two ways answer {query!r} differently", file=sys.stderr)
            return 1
        call = lambda q=query: _asked(index, q, others)  # noqa: E731
        pairs = [(_timed(pruned_from, call), _timed(WHOLE, call)) for _ in range(BLOCKS)]
        fast = statistics.median(p for p, _ in pairs)
        slow = statistics.median(w for _, w in pairs)
        matched = len(whole_hits)
        figures[query] = {"matched": matched, "held": held, "pruned_us": round(fast, 1),
                          "whole_us": round(slow, 1)}
        rows.append(f"{query[:38]:<38} {matched:>8,} {held:>8,} {fast:8.0f} {slow:8.0f} "
                    f"{slow / fast:5.2f}x")
    keyword.PRUNE_FROM = pruned_from
    pruned_all = [f["pruned_us"] for f in figures.values()]
    whole_all = [f["whole_us"] for f in figures.values()]
    summary = {"n": args.n, "restore_s": round(restore_s, 1), "prune_from": pruned_from,
               "median_pruned_us": round(statistics.median(pruned_all), 1),
               "median_whole_us": round(statistics.median(whole_all), 1),
               "total_pruned_us": round(sum(pruned_all), 1),
               "total_whole_us": round(sum(whole_all), 1), "queries": figures}
    if not args.json_only:
        print(f"{args.n:,} documents; us a query (search, first window, {CANDIDATES} scores), "
              f"median of {BLOCKS} alternating blocks")
        print(f"{'query':<38} {'matched':>8} {'held':>8} {'pruned':>8} {'whole':>8} {'ratio':>6}")
        print("\n".join(rows))
        print(f"{'median / sum of the 20':<56} {summary['median_pruned_us']:8.0f} "
              f"{summary['median_whole_us']:8.0f}")
        print(f"{'':<56} {summary['total_pruned_us']:8.0f} {summary['total_whole_us']:8.0f}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
