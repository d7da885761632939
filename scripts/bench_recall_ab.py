#!/usr/bin/env python3
"""Two builds of memvaultd on their own vaults, timed in alternation.

    .venv/bin/python scripts/bench_recall.py --n 100000 --keep      # each build
    .venv/bin/python scripts/bench_recall_ab.py \\
        --side before /path/to/old/checkout /tmp/memvault-bench-abc/home \\
        --side now . /tmp/memvault-bench-def/home

Each `--side` names a source checkout and a home that `bench_recall.py
--keep` left (the vault that checkout wrote: a build may not read a newer
one's format). Every round starts each side's daemon in turn (each round
beginning with the next side: `in_turn`), with that
checkout's `daemon/`, `base/` and `client/` first on PYTHONPATH and this
interpreter, waits until its IVF and keyword index are built, times cached
recalls over its socket (hybrid, hybrid with a filter keeping half,
`mode="vector"`, one of each per query in turn), with `--mixed` runs
bench_recall.py's mixed load (a remember every 10th call, cached recalls
otherwise) from 1 client and then 8, reads its resident memory and stops it.
The mixed load's remembers add 320 memories a round to each side's vault,
alike. With `--own-model-cache` each side has a model cache of its own
beside its home (`model-cache/`): two builds whose model exports differ in
format would otherwise remove each other's export at every start. A side
whose cache is empty then starts once, untimed, to export the model into it.

Why alternate: two `bench_recall.py` runs one after the other differ by
more than a change does. On 28 Nov two runs of one build at 100k gave
filtered p50s of 2.15 and 3.37 ms (the second began at load 2.5), which
read as a regression of 0.2-0.4 ms; five alternating rounds of the same
homes gave 1.79 against 1.84 ms (docs/benchmarks.md). Drift in the
machine's load then falls on both sides alike.

Output: a table, then one JSON line: per side, p50 / p99 of each kind over
all rounds, the p99 of the calm rounds alone (the host took less than 2% of
the CPU time while they were timed: `steal_share` in bench_recall.py), and
per round the steal share, spawn to SERVING, stop, resident memory and the
mixed calls per second of 1 and 8 clients.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from bench_recall import (
    CLIENTS,
    FILTER,
    IVF_MEMORIES,
    MIXED_OPS,
    TIMED_RECALLS,
    Daemon,
    Inputs,
    cpu_ticks,
    drawn_texts,
    mixed_load,
    percentiles,
    phase,
    settle,
    steal_share,
    timed_ms,
)

KINDS = ("hybrid", "filtered", "vector")
# A round counts as calm when the host took less than this share of the
# machine's CPU time while its recalls were timed (`steal_share`).
CALM_STEAL = 0.02


@dataclass
class Side:
    name: str
    tree: Path
    home: Path
    own_model_cache: bool = False
    # Per round: the host's steal share while it was timed, and its samples of each kind.
    rounds: list[tuple[float, dict[str, list[float]]]] = field(default_factory=list)
    start_s: list[float] = field(default_factory=list)
    stop_s: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    calls_per_s: dict[int, list[float]] = field(default_factory=lambda: {1: [], CLIENTS: []})
    written: int = 0  # memories the mixed load has remembered so far

    def daemon(self) -> Daemon:
        daemon = Daemon(self.home)
        daemon.env["PYTHONPATH"] = ":".join(
            str(self.tree / part) for part in ("daemon", "base", "client"))
        if self.own_model_cache:
            daemon.env["MEMVAULT_CACHE_DIR"] = str(self.model_cache)
        return daemon

    @property
    def model_cache(self) -> Path:
        return self.home.parent / "model-cache"

    def export_model(self) -> None:
        """Start once, untimed, if this side's own model cache holds no export."""
        if self.own_model_cache and not any(self.model_cache.glob("models/*.onnx")):
            daemon = self.daemon()
            daemon.start()
            daemon.stop()

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tree": str(self.tree), "home": str(self.home)}
        calm = [samples for steal, samples in self.rounds if steal < CALM_STEAL]
        for kind in KINDS:
            p50, p99 = percentiles([ms for _, samples in self.rounds for ms in samples[kind]])
            out[f"{kind}_p50_ms"], out[f"{kind}_p99_ms"] = round(p50, 3), round(p99, 3)
            if calm:
                p99 = percentiles([ms for samples in calm for ms in samples[kind]])[1]
                out[f"{kind}_p99_calm_ms"] = round(p99, 3)
        out["steal_share"] = [round(steal, 3) for steal, _ in self.rounds]
        out["calm_rounds"] = len(calm)
        out["start_s"] = [round(s, 3) for s in self.start_s]
        out["stop_s"] = [round(s, 3) for s in self.stop_s]
        out["rss_mb"] = [round(s, 1) for s in self.rss_mb]
        for clients, rates in self.calls_per_s.items():
            if rates:
                out[f"mixed_{clients}_per_s"] = [round(r, 1) for r in rates]
        return out


def one_round(side: Side, texts: list[str], timed: int, mixed: Inputs | None) -> None:
    daemon = side.daemon()
    offset = daemon.log_path.stat().st_size if daemon.log_path.exists() else 0
    try:
        side.start_s.append(daemon.start())
        with daemon.client() as client:
            count = client.status().memory_count
            settle(daemon, offset, count >= IVF_MEMORIES)
            for text in texts:  # each kind's query cache and first calls: not timed
                client.recall(text)
                client.recall(text, filter=FILTER)
                client.recall(text, mode="vector")
            calls: dict[str, Callable[[str], object]] = {
                "hybrid": lambda q: client.recall(q),
                "filtered": lambda q: client.recall(q, filter=FILTER),
                "vector": lambda q: client.recall(q, mode="vector")}
            samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
            ticks = cpu_ticks()
            for i in range(timed):
                text = texts[i % len(texts)]
                for kind, call in calls.items():
                    samples[kind].append(timed_ms(partial(call, text)))
            side.rounds.append((steal_share(ticks), samples))
            if mixed is not None:
                for clients, ops in ((1, CLIENTS * MIXED_OPS), (CLIENTS, MIXED_OPS)):
                    load = mixed_load(daemon, clients, texts, mixed, 10**9 + side.written, ops)
                    side.calls_per_s[clients].append(load.calls_per_s)
                    side.written += clients * ops // 10
            side.rss_mb.append(daemon.rss_mb())
    finally:
        side.stop_s.append(daemon.stop())


def _mixed_inputs(texts: list[str]) -> Inputs:
    """What the mixed load reads: the remembered memories' vectors (random
    unit vectors: a new memory's vector only has to be one) and the cached
    queries."""
    vectors = np.random.default_rng(1).normal(size=(4096, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return Inputs(vectors=vectors, assignment=np.zeros(0, np.intp), centre_texts=[],
                  cached=texts, uncached=[], query_vectors=vectors[:0], model=None)


def table(sides: list[Side]) -> str:
    """Each figure a row, a column a side, and with two sides their ratio."""
    figures = [side.figures() for side in sides]
    stats = ["p50", "p99"] + (["p99_calm"] if all(f["calm_rounds"] for f in figures) else [])
    rows = [(f"{kind} {stat} ms", [f[f"{kind}_{stat}_ms"] for f in figures])
            for kind in KINDS for stat in stats]
    rows += [("calm rounds", [float(f["calm_rounds"]) for f in figures])]
    keys = ["steal_share", "start_s", "stop_s", "rss_mb"]
    keys += [key for key in ("mixed_1_per_s", f"mixed_{CLIENTS}_per_s")
             if all(key in f for f in figures)]
    rows += [(f"{key} (median)", [float(np.median(f[key])) for f in figures]) for key in keys]
    two = len(sides) == 2
    lines = [f"{'':28}" + "".join(f"{side.name:>16}" for side in sides)
             + (f"{'ratio':>8}" if two else "")]
    lines += [f"{name:28}" + "".join(f"{v:16.3f}" for v in values)
              + (f"{values[1] / values[0]:8.2f}" if two and values[0] else "")
              for name, values in rows]
    return "\n".join(lines)


def in_turn(sides: list[Side], number: int) -> list[Side]:
    """The order of round `number`: each round begins one side later. The
    side that ran second was slower for it: on 1 Dec, at 100k, one build
    against an unchanged one read 1.10 x its hybrid p50 when it always ran
    second, 0.98 x when always first (5 and 3 rounds)."""
    start = number % len(sides)
    return sides[start:] + sides[:start]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--side", nargs=3, action="append", required=True,
                        metavar=("NAME", "CHECKOUT", "HOME"),
                        help="a build's source checkout and the home it wrote (twice or more)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every side (5)")
    parser.add_argument("--queries", type=int, default=TIMED_RECALLS,
                        help=f"timed recalls of each kind per side and round ({TIMED_RECALLS})")
    parser.add_argument("--mixed", action="store_true",
                        help=f"also the mixed load's calls/s, 1 client then {CLIENTS}")
    parser.add_argument("--own-model-cache", action="store_true",
                        help="a model cache for each side beside its home (builds whose "
                             "model exports differ in format)")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if len(args.side) < 2:
        parser.error("give --side at least twice")
    if args.rounds < 1 or args.queries < 1:
        parser.error("--rounds and --queries must be at least 1")
    sides = [Side(name, Path(tree).resolve(), Path(home).resolve(), args.own_model_cache)
             for name, tree, home in args.side]
    for side in sides:
        if not (side.tree / "daemon" / "memvaultd").is_dir():
            parser.error(f"{side.tree}: not a memvault checkout (no daemon/memvaultd)")
        if not (side.home / "data").is_dir():
            parser.error(f"{side.home}: no vault here (no data/); keep one with "
                         "bench_recall.py --keep")
    texts = drawn_texts(0)[1]  # bench_recall.py's cached queries
    mixed = _mixed_inputs(texts) if args.mixed else None
    for side in sides:
        side.export_model()
    for number in range(args.rounds):
        for side in in_turn(sides, number):
            phase(f"round {number + 1} of {args.rounds}: {side.name}")
            one_round(side, texts, args.queries, mixed)
    if not args.json_only:
        print(table(sides))
    print(json.dumps({"rounds": args.rounds, "queries": args.queries,
                      "sides": {side.name: side.figures() for side in sides}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
