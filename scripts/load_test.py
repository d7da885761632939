#!/usr/bin/env python3
"""Load: concurrent clients of mixed remember/recall/update/forget on a real daemon.

    .venv/bin/python scripts/load_test.py [--clients 16] [--seconds 60] [--seed N]
                                          [--socket PATH] [--keep DIR]

Each client is a thread with its own `memvault.Client` (its own channel)
and its own memories: it remembers new ones (a topic of their own, so none
is taken for a restatement of another), recalls the text of one of them,
updates one's category, and forgets one, in random order. Every write the
daemon acknowledges is recorded. At the end every acknowledged and not
forgotten memory is read back with `Get` and checked (text, and the
category of the last acknowledged update); every forgotten one must be
gone.

Without `--socket` a daemon is started on a fresh temporary vault (the real
model embeds every text) and stopped at the end. Prints throughput, p50/p99
latency per operation kind, errors and writes lost; the last line is one
JSON object with the same figures. Exit status 0 when there were no errors
and no lost writes. `tests/test_load.py` runs the same code for ~10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("remember", "recall", "update", "forget")
# Out of 100 operations; a client with nothing to update or forget remembers.
MIX = {"remember": 35, "recall": 35, "update": 20, "forget": 10}
ANIMALS = ("otter", "heron", "badger", "lynx", "marten", "ibis", "stoat", "vole")
PLACES = ("harbour", "orchard", "quarry", "meadow", "archive", "foundry", "lagoon")


@dataclass
class Written:
    text: str
    category: str = ""
    forgotten: bool = False


@dataclass
class Worker:
    number: int
    memories: dict[str, Written] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(
        default_factory=lambda: {kind: [] for kind in KINDS})
    errors: list[str] = field(default_factory=list)
    recalls_found: int = 0
    made: int = 0

    def text(self, rng: random.Random) -> str:
        self.made += 1
        return (f"client {self.number} note {self.made}: the {rng.choice(ANIMALS)} near the "
                f"{rng.choice(PLACES)} counted {rng.randrange(10**6)} stones")


@dataclass
class Report:
    clients: int
    seconds: float
    operations: int
    ops_per_s: float
    latency_ms: dict[str, dict[str, float]]
    counts: dict[str, int]
    errors: int
    error_samples: list[str]
    acknowledged_writes: int
    checked_memories: int
    checked_forgotten: int
    lost: int
    lost_samples: list[str]
    recall_found_own: float

    def as_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _step(client: Any, worker: Worker, rng: random.Random) -> None:
    live = [i for i, w in worker.memories.items() if not w.forgotten]
    kind = rng.choices(KINDS, weights=[MIX[k] for k in KINDS])[0]
    if kind != "remember" and not live:
        kind = "remember"
    started = time.perf_counter()
    try:
        if kind == "remember":
            text = worker.text(rng)
            result = client.remember(text, topic=f"load.c{worker.number}.n{worker.made}")
            if result.reinforced or result.id in worker.memories:
                raise AssertionError(f"remember of a new text answered {result.id} as a "
                                     f"restatement")
            worker.memories[result.id] = Written(text)
        elif kind == "recall":
            target = rng.choice(live)
            hits = client.recall(worker.memories[target].text, top_k=5)
            worker.recalls_found += target in {hit.memory.id for hit in hits}
        elif kind == "update":
            target = rng.choice(live)
            category = f"cat-{worker.number}-{rng.randrange(10**6)}"
            reply = client.update(target, category=category)
            if reply.memory.category != category:
                raise AssertionError(f"update of {target} answered {reply.memory.category!r}")
            worker.memories[target].category = category
        else:
            target = rng.choice(live)
            client.forget(target)
            worker.memories[target].forgotten = True
    except Exception as exc:  # every failure is counted, none stops the run
        worker.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
        return
    worker.latencies[kind].append(time.perf_counter() - started)


def _check(client: Any, workers: list[Worker]) -> tuple[int, int, list[str]]:
    """Read every acknowledged memory back: (memories checked, forgotten checked, lost)."""
    from memvault_base.errors import NotFound

    checked = forgotten = 0
    lost: list[str] = []
    for worker in workers:
        for memory_id, written in worker.memories.items():
            try:
                memory = client.get(memory_id)
            except NotFound:
                if written.forgotten:
                    forgotten += 1
                else:
                    lost.append(f"{memory_id}: missing")
                continue
            if written.forgotten:
                lost.append(f"{memory_id}: forgotten, yet still there")
                continue
            checked += 1
            if memory.text != written.text or memory.category != written.category:
                lost.append(f"{memory_id}: altered ({memory.text!r}, {memory.category!r})")
    return checked, forgotten, lost


def run_load(socket: Path, clients: int = 16, seconds: float = 60.0, seed: int = 0,
             progress: Callable[[str], None] | None = None) -> Report:
    """`clients` threads, each with its own Client, for `seconds`; then the read-back."""
    from memvault import Client

    workers = [Worker(n) for n in range(clients)]
    stop = threading.Event()
    start = threading.Barrier(clients + 1)

    def work(worker: Worker) -> None:
        rng = random.Random(seed * 1000 + worker.number)
        with Client(socket=socket, timeout=120.0) as client:
            start.wait()
            while not stop.is_set():
                _step(client, worker, rng)

    threads = [threading.Thread(target=work, args=(w,), name=f"load-{w.number}")
               for w in workers]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.monotonic()
    while (left := seconds - (time.monotonic() - began)) > 0:
        time.sleep(min(left, 10.0))
        if progress is not None and left > 10.0:
            done = sum(len(v) for w in workers for v in w.latencies.values())
            progress(f"{time.monotonic() - began:.0f} s: {done} operations")
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began

    with Client(socket=socket, timeout=120.0) as client:
        checked, forgotten, lost = _check(client, workers)

    latency = {kind: [s for w in workers for s in w.latencies[kind]] for kind in KINDS}
    errors = [e for w in workers for e in w.errors]
    counts = {kind: len(values) for kind, values in latency.items()}
    operations = sum(counts.values())
    acknowledged = counts["remember"] + counts["update"] + counts["forget"]
    recalls = counts["recall"]
    return Report(
        clients=clients, seconds=round(elapsed, 1), operations=operations,
        ops_per_s=round(operations / elapsed, 1),
        latency_ms={kind: {"p50": round(_percentile(v, 0.50) * 1000, 1),
                           "p99": round(_percentile(v, 0.99) * 1000, 1),
                           "max": round(max(v, default=0.0) * 1000, 1)}
                    for kind, v in latency.items()},
        counts=counts, errors=len(errors), error_samples=errors[:5],
        acknowledged_writes=acknowledged, checked_memories=checked,
        checked_forgotten=forgotten, lost=len(lost), lost_samples=lost[:5],
        recall_found_own=round(sum(w.recalls_found for w in workers) / recalls, 3)
        if recalls else 0.0)


def print_report(report: Report) -> None:
    print(f"{report.clients} clients, {report.seconds:.0f} s: {report.operations} operations, "
          f"{report.ops_per_s:.1f} ops/s")
    for kind in KINDS:
        lat = report.latency_ms[kind]
        print(f"  {kind:<8} {report.counts[kind]:>7}  p50 {lat['p50']:>7.1f} ms  "
              f"p99 {lat['p99']:>7.1f} ms  max {lat['max']:>7.1f} ms")
    print(f"acknowledged writes: {report.acknowledged_writes}; read back: "
          f"{report.checked_memories} memories, {report.checked_forgotten} forgotten ones gone")
    print(f"recalls that found their own memory in the top 5: {report.recall_found_own:.1%}")
    print(f"errors: {report.errors}; writes lost: {report.lost}")
    for line in report.error_samples + report.lost_samples:
        print("  ", line)
    print(report.as_json())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--socket", type=Path, help="a running daemon's socket")
    parser.add_argument("--keep", type=Path, help="keep the started daemon's vault here")
    args = parser.parse_args()

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def progress(line: str) -> None:
        print(line, flush=True)

    if args.socket:
        report = run_load(args.socket, args.clients, args.seconds, args.seed, progress)
    else:
        from tests.daemon_process import DaemonProcess

        with tempfile.TemporaryDirectory(prefix="memvault-load-") as scratch:
            home = (args.keep or Path(scratch)) / "home"
            with DaemonProcess(home).start() as daemon:
                print(f"seed {args.seed}; daemon SERVING", flush=True)
                report = run_load(daemon.socket, args.clients, args.seconds, args.seed,
                                  progress)
                if daemon.stop() != 0:
                    print("the daemon did not stop cleanly:\n" + daemon.log[-2000:])
                    report.errors += 1
    print_report(report)
    return 0 if report.errors == 0 and report.lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
