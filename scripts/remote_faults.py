#!/usr/bin/env python3
"""The long remote-fault campaign: a real memvault-server fails in every way
while an agent keeps writing into a real daemon.

    .venv/bin/python scripts/remote_faults.py [--rounds 20] [--seed N] [--keep DIR]

The parts are `tests/test_remote_faults.py`'s: a memvault-server on a
loopback port, `FaultProxy` in front of it, laptop A and desktop B (real
daemons, one vault, joined through the proxy). One writer streams
`Remember` calls into A (own vectors, one in ten a `RememberBatch` of 20)
every ~50 ms for the whole run and records every acknowledged id. Each
round injects one fault, in turn:

- kill:     SIGKILL of the server at a random moment of the stream, and the
            proxy's port goes dark too (every connection drops), for 1-5 s;
            then both come back;
- cut:      the server killed at A's next `AppendVersion`, before it reaches
            the server or after the server stored it (coin toss), 1-3 s;
- slow:     every call waits 2-5 s before it is forwarded, for 8-15 s;
- errors:   every call answered UNAVAILABLE, RESOURCE_EXHAUSTED, INTERNAL,
            UNKNOWN, DEADLINE_EXCEEDED in turn, for 8-20 s;
- rollback: the server's data directory replaced by a copy taken earlier
            (both devices have seen newer versions); both must report
            `RollbackDetected` (status `stopped`). Then the newest data is
            put back and both daemons restarted, which resumes sync.

After each round the faults are healed and the round's acknowledged writes
must reach B. At the end B must hold every acknowledged id, the chain on the
server (opened with the recovery key) must hold no operation twice, and
rollbacks detected must equal rollbacks injected.

Exit status 0 when nothing was lost, nothing sent twice and every rollback
detected; 1 otherwise. Figures on stdout, the last line one JSON object;
they go to `docs/reliability.md`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import grpc  # noqa: E402 - after the path is set
import numpy as np  # noqa: E402

from memvault import Client  # noqa: E402
from memvault_base.errors import MemvaultError  # noqa: E402
from tests.test_remote_faults import (  # noqa: E402
    ERRORS,
    Cut,
    Site,
    batch,
    eventually,
    holds_all,
    p50,
    p99,
    start_site,
    stop_site,
    thread_count,
    unit_vectors,
)

KINDS = ("kill", "cut", "slow", "errors", "rollback")
CODES = (*ERRORS, grpc.StatusCode.DEADLINE_EXCEEDED)
# The longest back-off is 32-64 s; a round's writes must be on B within two
# of them, plus the time to pull and apply.
CONVERGE_S = 150.0
# Without a poke, B notices a rolled-back remote at its 30 s timer.
DETECT_S = 90.0
WRITE_EVERY_S = 0.05


@dataclass
class Figures:
    rounds: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    cuts_after_store: int = 0
    error_answers: int = 0
    acknowledged: int = 0
    failed_writes: int = 0  # refused while A restarted: never acknowledged
    lost_on_b: int = 0
    lost_on_a: int = 0
    operations_on_remote: int = 0
    sent_twice: int = 0
    rollbacks_injected: int = 0
    rollbacks_detected: int = 0
    slowest_detection_s: float = 0.0
    converge_s: dict[str, float] = field(default_factory=dict)  # kind -> slowest
    remember_ms: dict[str, list[float]] = field(default_factory=dict)  # phase -> p50, p99, n
    retry_gaps_s: list[list[float]] = field(default_factory=list)  # per error period
    threads: list[int] = field(default_factory=list)  # A's at the start, most during slow
    wall_s: float = 0.0


class Writer(threading.Thread):
    """An agent writing into A for the whole run."""

    def __init__(self, socket: Path, seed: int) -> None:
        super().__init__(name="writer", daemon=True)
        self.socket = socket
        self.rng = np.random.default_rng(seed)
        self.acked: list[str] = []
        self.timings: list[tuple[float, float]] = []  # (started, seconds) of single remembers
        self.failures = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        client = Client(socket=self.socket)
        while not self.stop.wait(WRITE_EVERY_S):
            started = time.monotonic()
            try:
                ids = self._write(client)
            except MemvaultError:  # A restarting: not acknowledged, try again
                self.failures += 1
                client.close()
                client = Client(socket=self.socket)
                self.stop.wait(0.5)
                continue
            with self._lock:
                self.acked += ids
                if len(ids) == 1:
                    self.timings.append((started, time.monotonic() - started))
        client.close()

    def _write(self, client: Client) -> list[str]:
        if self.rng.random() < 0.1:
            return [r.id for r in client.remember_batch(batch(self.rng, 20, "stream"))]
        n = len(self.acked)
        return [client.remember(f"streamed note {n}", topic=f"stream.{n}",
                                vector=unit_vectors(self.rng, 1)[0]).id]

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.acked)


class Campaign:
    def __init__(self, site: Site, seed: int, report: Callable[[str], None]) -> None:
        self.site = site
        self.rng = random.Random(seed)
        self.report = report
        self.writer = Writer(site.a.socket, seed)
        self.figures = Figures()
        self.phases: list[tuple[float, float, str]] = []  # (start, end, kind)

    def run(self, rounds: int) -> Figures:
        started = time.monotonic()
        self.figures.threads = [thread_count(self.site.a), 0]
        self.writer.start()
        time.sleep(2.0)  # a healthy stretch first: the baseline
        try:
            for number in range(rounds):
                kind = KINDS[number % len(KINDS)]
                self._round(number, kind)
        finally:
            self.writer.stop.set()
            self.writer.join()
        self._final_check()
        self._latencies()
        self.figures.wall_s = time.monotonic() - started
        return self.figures

    def _round(self, number: int, kind: str) -> None:
        begun = time.monotonic()
        getattr(self, f"_{kind}")()
        self.site.proxy.heal()
        healed = time.monotonic()
        self.phases.append((begun, healed, kind))
        self.figures.faults[kind] = self.figures.faults.get(kind, 0) + 1
        self.figures.rounds += 1
        waited = self._converge(self.writer.snapshot(), kind)
        # Until B holds the round's writes, A pushes (and B pulls) the backlog.
        self.phases.append((healed, healed + waited, "catching up"))
        self.report(f"round {number + 1} {kind}: {len(self.writer.acked)} acknowledged so far,"
                    f" on B {waited:.1f} s after the fault ended")

    # -- the faults ------------------------------------------------------------

    def _kill(self) -> None:
        time.sleep(self.rng.uniform(0.0, 2.0))
        self.site.kill_server()
        self.site.proxy.go_dark()
        time.sleep(self.rng.uniform(1.0, 5.0))
        self.site.restart_server()
        self.site.proxy.come_back()

    def _cut(self) -> None:
        cut = Cut("laptop", nth=1, landed=self.rng.random() < 0.5, kill=self.site.kill_server)
        self.site.proxy.cut = cut
        if not cut.done.wait(60):
            raise RuntimeError("A appended nothing for 60 s")
        self.figures.cuts_after_store += cut.landed
        time.sleep(self.rng.uniform(1.0, 3.0))
        self.site.restart_server()

    def _slow(self) -> None:
        self.site.proxy.delay_s = self.rng.uniform(2.0, 5.0)
        deadline = time.monotonic() + self.rng.uniform(8.0, 15.0)
        while time.monotonic() < deadline:
            self.figures.threads[1] = max(self.figures.threads[1], thread_count(self.site.a))
            time.sleep(0.5)

    def _errors(self) -> None:
        since = time.monotonic()
        self.site.proxy.codes = CODES
        time.sleep(self.rng.uniform(8.0, 20.0))
        self.site.proxy.codes = ()
        failed = [c for c in self.site.proxy.calls_of("laptop", since)
                  if c.outcome in {code.name for code in CODES}]
        injected = {code.name for code in CODES}
        self.figures.error_answers += sum(
            c.outcome in injected for device in ("laptop", "desktop") for watch in (False, True)
            for c in self.site.proxy.calls_of(device, since, watch=watch))
        self.figures.retry_gaps_s.append(
            [round(b.at - a.at, 2) for a, b in itertools.pairwise(failed)])

    def _rollback(self) -> None:
        site, scratch = self.site, self.site.root / "rollback"
        shutil.rmtree(scratch, ignore_errors=True)
        site.kill_server()
        shutil.copytree(site.server.data_dir, scratch / "old")
        site.restart_server()
        old_head = len(list((scratch / "old").rglob("versions/*")))
        eventually(lambda: min(site.ca.sync_status().head, site.cb.sync_status().head)
                   > old_head + 1, CONVERGE_S, "both devices past the copy")
        site.kill_server()
        shutil.copytree(site.server.data_dir, scratch / "new")
        self._swap_data(scratch / "old")
        self.figures.rollbacks_injected += 1
        injected = time.monotonic()
        detected = [self._detects(client, injected) for client in (site.ca, site.cb)]
        self.figures.rollbacks_detected += all(d is not None for d in detected)
        self.figures.slowest_detection_s = max(self.figures.slowest_detection_s,
                                               *(d or DETECT_S for d in detected))
        site.kill_server()  # the operator puts the newest data back, restarts the devices
        self._swap_data(scratch / "new")
        for daemon in (site.a, site.b):
            daemon.stop()
            daemon.start()
        site.reconnect()

    def _swap_data(self, source: Path) -> None:
        data = self.site.server.data_dir
        shutil.rmtree(data)
        shutil.copytree(source, data)
        self.site.restart_server()

    def _detects(self, client: Client, since: float) -> float | None:
        """Seconds until `client` reports the rollback, None if it never does."""
        deadline = since + DETECT_S
        while time.monotonic() < deadline:
            status = client.sync_status()
            if status.state == "stopped" and "rollback" in status.last_error.lower():
                return time.monotonic() - since
            time.sleep(0.2)
        return None

    # -- checks ----------------------------------------------------------------

    def _converge(self, ids: list[str], kind: str) -> float:
        started = time.monotonic()
        eventually(lambda: holds_all(self.site.cb, ids), CONVERGE_S, f"B holds {kind}'s writes")
        waited = time.monotonic() - started
        self.figures.converge_s[kind] = max(self.figures.converge_s.get(kind, 0.0), waited)
        return waited

    def _final_check(self) -> None:
        written = self.writer.snapshot()
        eventually(lambda: holds_all(self.site.cb, written[-50:]), CONVERGE_S,
                   "B holds the last writes")
        acked = set(written)
        on_b = {m.id for m in self.site.cb.export()}
        on_a = {m.id for m in self.site.ca.export()}
        ops = self.site.chain_ops()
        self.figures.acknowledged = len(acked)
        self.figures.failed_writes = self.writer.failures
        self.figures.lost_on_b = len(acked - on_b)
        self.figures.lost_on_a = len(acked - on_a)
        self.figures.operations_on_remote = len(ops)
        self.figures.sent_twice = sum(n > 1 for n in Counter(op.op_id for op in ops).values())

    def _latencies(self) -> None:
        """A's single remembers, by what the remote was doing when each began
        ("healthy": no fault, nothing left to catch up on)."""
        by_phase: dict[str, list[float]] = {}
        for started, seconds in self.writer.timings:
            kind = next((k for s, e, k in self.phases if s <= started <= e), "healthy")
            by_phase.setdefault(kind, []).append(seconds)
        self.figures.remember_ms = {kind: [round(p50(v) * 1e3, 1), round(p99(v) * 1e3, 1),
                                           len(v)] for kind, v in sorted(by_phase.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--keep", type=Path, help="keep the daemons' and server's data here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="memvault-remote-faults-") as scratch:
        root = args.keep or Path(scratch)
        # One model cache for both daemons (tests/daemon_process.py passes it on).
        os.environ.setdefault("MEMVAULT_CACHE_DIR", str(root / "model-cache"))
        print(f"seed {args.seed}: starting the server, the proxy and two daemons", flush=True)
        site = start_site(root)
        try:
            figures = Campaign(site, args.seed, lambda line: print(line, flush=True)
                               ).run(args.rounds)
        finally:
            stop_site(site)

    print_figures(figures)
    print(json.dumps({"seed": args.seed, **asdict(figures)}))
    ok = (not figures.lost_on_a and not figures.lost_on_b and not figures.sent_twice
          and figures.rollbacks_detected == figures.rollbacks_injected)
    return 0 if ok else 1


def print_figures(f: Figures) -> None:
    print(f"{f.rounds} rounds in {f.wall_s:.0f} s: " + ", ".join(
        f"{n} {kind}" for kind, n in f.faults.items())
          + f" ({f.cuts_after_store} cuts after the server stored the version)")
    print(f"acknowledged writes: {f.acknowledged}; refused while A restarted: "
          f"{f.failed_writes}; lost on B: {f.lost_on_b}; lost on A: {f.lost_on_a}")
    print(f"operations on the remote: {f.operations_on_remote}; sent twice: {f.sent_twice}")
    print(f"rollbacks injected: {f.rollbacks_injected}; detected by both devices: "
          f"{f.rollbacks_detected}; slowest detection: {f.slowest_detection_s:.1f} s")
    print(f"error answers: {f.error_answers}; A's retry gaps per error period (s): "
          f"{f.retry_gaps_s}")
    for kind, (median, tail, n) in f.remember_ms.items():
        print(f"remember on A while {kind}: p50 {median} ms, p99 {tail} ms ({n} calls)")
    print(f"A's threads: {f.threads[0]} at the start, at most {f.threads[1]} while slow")
    print("slowest until B held a round's writes (s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in f.converge_s.items()))


if __name__ == "__main__":
    sys.exit(main())
