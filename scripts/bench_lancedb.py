#!/usr/bin/env python3
"""The decrypted vector index as a LanceDB table, against memvault's own.

    .venv/bin/python scripts/bench_lancedb.py --n 100000

On the vectors and queries of scripts/bench_recall.py (its generator, its
daemon and its measuring functions, imported), one run measures:

- LanceDB in memory (`memory://`, the place a decrypted index could live):
  the table's flat search; the time to build an IVF_HNSW_SQ index (cosine,
  LanceDB's defaults); with the index, p50/p99 for the 24 candidates the
  daemon over-fetches and recall@10 against an exact scan, each with the
  default search and with the setting that did best here (TUNED_EF,
  TUNED_REFINE), p50/p99 with a filter keeping half, and again after 50
  single-row adds (what a vault's writes between two index builds look like);
- memvaultd as users run it, over its unix socket, after a restart and once
  its IVF has settled (as bench_recall.py does): hybrid recall of a cached
  query p50/p99, the same with the filter keeping half, `mode="vector"`, and
  recall@10 of `mode="vector"` against exact.

LanceDB is asked for the row ids and
distances alone, its cheapest answer; the daemon returns whole memories.

Output: a table on stdout, then, as the last line, one JSON object with every
figure. Phases on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_recall as br  # beside this file: on sys.path when the script runs
import numpy as np

# The row id and its distance (naming `_distance` keeps LanceDB from warning
# on every query that it adds the column unasked).
ID = ["id", "_distance"]
# The search setting that did best at 100k (100 queries, recall@10 against
# exact / p50 for 10 rows): the defaults 0.697 / 2.1 ms; nprobes 20-100 the
# same recall; ef 100 0.865, ef 300 0.940 / 3.1 ms; refine_factor 4 alone
# 0.858; ef 300 with refine_factor 4 0.969 / 7.2 ms.
TUNED_EF, TUNED_REFINE = 300, 4
ADDS = 50  # single-row adds before the last LanceDB figures
TIMED = 300  # searches per figure, as bench_recall.py's TIMED_RECALLS
# LanceDB's flat search is ~140 ms a query at 100k: fewer samples of it (p99
# of 100 is the slowest but one).
FLAT_SAMPLES = 100


def lance_memory_table(vectors: br.Matrix) -> Any:
    import lancedb
    import pyarrow as pa

    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    data = pa.table({
        "id": pa.array(np.arange(len(vectors)), type=pa.int64()),
        "category": pa.array([br.category(i) for i in range(len(vectors))]),
        "vector": pa.FixedSizeListArray.from_arrays(flat, br.DIMENSION),
    })
    return lancedb.connect("memory://").create_table("bench", data=data)


def tuned(query: Any) -> Any:
    return query.ef(TUNED_EF).refine_factor(TUNED_REFINE)


def lance_recall_at_10(table: Any, probes: br.Matrix, vectors: br.Matrix,
                       setting: Callable[[Any], Any] = lambda query: query) -> float:
    found = []
    for qvec in probes:
        got = {row["id"] for row in setting(table.search(qvec).select(ID)).limit(10).to_list()}
        expected = set(np.argpartition(-(vectors @ qvec), 10)[:10].tolist())
        found.append(len(got & expected) / 10)
    return float(np.mean(found))


def lancedb_figures(inputs: br.Inputs, probes: br.Matrix, timed: int
                    ) -> tuple[dict[str, Any], dict[str, list[float]]]:
    from lancedb.index import HnswSq

    vectors, queries = inputs.vectors, inputs.query_vectors[: br.CACHED_QUERIES]
    table = lance_memory_table(vectors)

    def search(where: str | None = None, setting: Callable[[Any], Any] = lambda query: query
               ) -> Callable[[br.Matrix], object]:
        def one(qvec: br.Matrix) -> object:
            query = setting(table.search(qvec).select(ID))
            if where is not None:
                query = query.where(where)
            return query.limit(br.CANDIDATES).to_list()
        return one

    samples: dict[str, list[float]] = {}
    br.phase("LanceDB flat search")
    samples["flat"] = br.time_each(search(), queries, min(timed, FLAT_SAMPLES))
    br.phase("LanceDB: building IVF_HNSW_SQ")
    started = time.perf_counter()
    table.create_index("vector", config=HnswSq(distance_type="cosine"))
    figures: dict[str, Any] = {"lancedb_build_s": time.perf_counter() - started}
    br.phase("LanceDB indexed searches")
    samples["indexed"] = br.time_each(search(), queries, timed)
    samples["indexed_filtered"] = br.time_each(search(br.LANCE_FILTER), queries, timed)
    samples["tuned"] = br.time_each(search(setting=tuned), queries, timed)
    figures["lancedb_recall_at_10"] = lance_recall_at_10(table, probes, vectors)
    figures["lancedb_tuned_recall_at_10"] = lance_recall_at_10(table, probes, vectors, tuned)
    br.phase(f"LanceDB: {ADDS} single-row adds")
    for i in range(ADDS):
        table.add([{"id": len(vectors) + i, "category": br.category(i),
                    "vector": vectors[i].tolist()}])
    samples["after_adds"] = br.time_each(search(), queries, timed)
    return figures, samples


def memvault_figures(inputs: br.Inputs, probes: br.Matrix, timed: int, workdir: Path
                     ) -> tuple[dict[str, Any], dict[str, list[float]]]:
    daemon = br.Daemon(workdir / "home")
    n = len(inputs.vectors)
    try:
        br.phase("starting memvaultd")
        daemon.start()
        with daemon.client() as client:
            br.phase(f"loading {n} memories")
            br.load(client, inputs, br.DEFAULT_BATCH)
        br.phase("restarting memvaultd with the memories")
        daemon.stop()
        log_offset = daemon.log_path.stat().st_size
        daemon.start()
        with daemon.client() as client:
            settled = br.settle(daemon, log_offset, n >= 20_000)
            figures = {"memvault_ivf_settle_s": settled.get("ivf_settle_s", 0.0)}
            br.phase("timing memvault recalls over the socket")
            samples = br.daemon_recalls(client, inputs.cached, [], timed)
            figures["memvault_recall_at_10"] = br.recall_at_10(client, probes, inputs.vectors)
            figures["memvault_rss_mb"] = daemon.rss_mb()
    finally:
        daemon.stop()
    return figures, {kind: samples[kind] for kind in ("cached", "filtered", "vector")}


def run(n: int, timed: int, workdir: Path) -> dict[str, Any]:
    inputs = br.prepare(n, br.RECALL_PROBES)
    probes = inputs.query_vectors[br.CACHED_QUERIES:]
    figures: dict[str, Any] = {"n": n, "load_avg_1m_start": br.load_average()}
    ours, our_samples = memvault_figures(inputs, probes, timed, workdir)
    figures["load_avg_1m_between"] = br.load_average()
    theirs, their_samples = lancedb_figures(inputs, probes, timed)
    figures |= ours | theirs
    for prefix, samples in (("memvault", our_samples), ("lancedb", their_samples)):
        for kind, values in samples.items():
            figures[f"{prefix}_{kind}_p50_ms"], figures[f"{prefix}_{kind}_p99_ms"] = \
                br.percentiles(values)
    figures["samples"] = {f"{prefix}_{kind}": len(values)
                          for prefix, samples in (("memvault", our_samples),
                                                  ("lancedb", their_samples))
                          for kind, values in samples.items()}
    import lancedb
    import pyarrow

    figures["versions"] = {"lancedb": lancedb.__version__, "pyarrow": pyarrow.__version__}
    figures["machine"] = br.machine()
    figures["load_avg_1m_end"] = br.load_average()
    return {key: round(value, 3) if isinstance(value, float) else value
            for key, value in figures.items()}


def table(f: dict[str, Any]) -> str:
    rows = [
        ("memvault hybrid, cached (socket)", "memvault_cached", f["memvault_recall_at_10"]),
        ("memvault hybrid, filter keeps 1/2 (socket)", "memvault_filtered", None),
        ("memvault mode=vector (socket)", "memvault_vector", f["memvault_recall_at_10"]),
        ("LanceDB IVF_HNSW_SQ", "lancedb_indexed", f["lancedb_recall_at_10"]),
        (f"LanceDB IVF_HNSW_SQ, ef {TUNED_EF}, refine x{TUNED_REFINE}", "lancedb_tuned",
         f["lancedb_tuned_recall_at_10"]),
        ("LanceDB IVF_HNSW_SQ, filter keeps 1/2", "lancedb_indexed_filtered", None),
        (f"LanceDB IVF_HNSW_SQ after {ADDS} adds", "lancedb_after_adds", None),
        ("LanceDB flat", "lancedb_flat", 1.0),
    ]
    m, v = f["machine"], f["versions"]
    lines = [f"memvault against LanceDB {v['lancedb']} in memory: n={f['n']}, "
             f"{m['nproc']} x {m['cpu']}", "",
             f"{'':44} {'p50 ms':>9} {'p99 ms':>9} {'recall@10':>10}"]
    for name, key, recall in rows:
        shown = "" if recall is None else f"{recall:.3f}"
        lines.append(f"{name:44} {f[key + '_p50_ms']:9.2f} {f[key + '_p99_ms']:9.2f} "
                     f"{shown:>10}")
    lines += ["", f"LanceDB IVF_HNSW_SQ build: {f['lancedb_build_s']:.1f} s; "
              f"memvault's IVF settled {f['memvault_ivf_settle_s']:.1f} s after SERVING",
              f"load average (1 min): {f['load_avg_1m_start']:.2f} at start, "
              f"{f['load_avg_1m_between']:.2f} between, {f['load_avg_1m_end']:.2f} at end"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=100_000, help="memories (100000)")
    parser.add_argument("--queries", type=int, default=TIMED,
                        help=f"timed searches per figure ({TIMED})")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (vault, daemon log)")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.n < br.CANDIDATES + 1:
        parser.error(f"--n must be at least {br.CANDIDATES + 1}")
    return br.in_workdir("memvault-bench-lancedb-", args.keep, args.json_only, table,
                         lambda workdir: run(args.n, args.queries, workdir))

if __name__ == "__main__":
    sys.exit(main())
