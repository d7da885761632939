#!/usr/bin/env python3
"""How long a page of `ListMemories` takes over the socket at N memories.

    PYTHONPATH=base:client:daemon:server python scripts/bench_list.py [--memories 100000]

Fills a fresh vault with N memories that bring their own vectors (random unit
vectors: RememberBatch with vectors, no model call), spread over 40 topics
with sub-topics, 12 entities, 30 tags, 5 sources and 200 sessions, restarts
the daemon (which then reads them from the snapshot's columns; `--fresh`:
the daemon that wrote them, holding each as an object), then times each
kind of page the memory browser (`memvault ui`) and `memvault list` ask
for, the whole vault's counts (its topics, its entities, its heat bands:
`memvault topics`, `memvault status --bands`) and a dry run of the sweep
(`memvault sweep --dry-run`): the median and the worst of REPEATS calls,
client side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import DEFAULT_BATCH, DIMENSION, IVF_MEMORIES, Daemon, settle

from memvault import Client, MemoryPage
from memvault.upkeep import SweepResult

REPEATS = 7
SEED = 20261127


def batches(count: int, rng: np.random.Generator) -> Any:
    for start in range(0, count, DEFAULT_BATCH):
        size = min(DEFAULT_BATCH, count - start)
        vectors = rng.standard_normal((size, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield [{
            "text": f"bench memory {start + i}: a statement about thing {(start + i) % 997}",
            "vector": vectors[i].tolist(),
            "topic": f"area{(start + i) % 40}.part{(start + i) % 7}",
            "entity": f"entity{(start + i) % 12}",
            "tags": [f"tag{(start + i) % 30}"],
            "source": f"agent{(start + i) % 5}",
            "session": f"session{(start + i) % 200}",
            "importance": round(((start + i) % 10) / 10, 1),
            "new": True,
        } for i in range(size)]


def timed(call: Callable[[], Any]) -> tuple[float, float, Any]:
    call()  # warm: first-call allocations
    times, page = [], None
    for _ in range(REPEATS):
        started = time.perf_counter()
        page = call()
        times.append(time.perf_counter() - started)
    assert page is not None
    return statistics.median(times) * 1000, max(times) * 1000, page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--fresh", action="store_true",
                        help="no restart after the load: the memories held as objects")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memvault-bench-list-") as tmp:
        daemon = Daemon(Path(tmp) / "home")
        daemon.start()
        try:
            with daemon.client() as client:
                client.wait_ready(600)
                started = time.perf_counter()
                for batch in batches(args.memories, np.random.default_rng(SEED)):
                    client.remember_batch(batch)
                print(f"loaded {args.memories} memories in {time.perf_counter() - started:.1f} s")
            if not args.fresh:
                daemon.stop()
                offset = daemon.log_path.stat().st_size
                daemon.start()
                # The IVF and keyword index the start builds, not timed beside.
                settle(daemon, offset, args.memories >= IVF_MEMORIES)
            with daemon.client() as client:
                client.wait_ready(600)
                # The token of page 100 of 50: nine pages of 500, then nine of 50
                # (a token names a place in the order, whatever the page size).
                token = ""
                for limit in [500] * 9 + [50] * 9:
                    token = client.list_memories(limit=limit, page_token=token).next_page_token
                cases: dict[str, Callable[[], Any]] = {
                    "first page, newest first": lambda: client.list_memories(),
                    "first page + facets": lambda: client.list_memories(facets=True),
                    "by heat + facets": lambda: client.list_memories(sort="heat", facets=True),
                    "topic area3 + facets": lambda: client.list_memories(topic="area3",
                                                                         facets=True),
                    "page 100 by token": lambda: client.list_memories(page_token=token),
                    "page 100 by offset": lambda: client.list_memories(offset=50 * 99),
                    "500 a page + facets": lambda: client.list_memories(limit=500, facets=True),
                    "topics (ListTopics)": client.list_topics,
                    "entities (ListEntities)": client.list_entities,
                    "heat bands (Status)": lambda: client.status(bands=True),
                    "sweep, dry run (Sweep)": lambda: client.sweep(dry_run=True),
                }
                _report(client, cases)
        finally:
            daemon.stop()


def _matched(result: Any) -> int:
    """Memories a page matched, a whole-vault count counted or a sweep weighed."""
    if isinstance(result, MemoryPage):
        return result.total
    if isinstance(result, list):  # facets
        return sum(facet.count for facet in result)
    if isinstance(result, SweepResult):
        return result.considered
    return sum(result.bands.values())


def _report(client: Client, cases: dict[str, Callable[[], Any]]) -> None:
    # On 2 shared cores the load moves every figure: say what it was.
    figures: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    print(f"{'page':28} {'median ms':>10} {'worst ms':>9} {'matched':>8}")
    for name, call in cases.items():
        median, worst, result = timed(call)
        print(f"{name:28} {median:10.1f} {worst:9.1f} {_matched(result):8d}")
        figures[name] = {"median_ms": median, "worst_ms": worst, "matched": _matched(result)}
    figures["load_end"] = os.getloadavg()[0]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
