#!/usr/bin/env python3
"""Sync cost and speed of real memvaultd daemons through a real memvault-server.

    .venv/bin/python scripts/bench_sync.py --n 10000

One memvault-server on a loopback port (directory store, one account, a token
per device) and three daemons as users run them (`python -m memvaultd.app.main`,
each on a fresh MEMVAULT_HOME, key-file vaults, the real model), reached over
their unix sockets with `memvault.Client`:

- device A loads N memories through `RememberBatch`, each with its own vector
  (clustered synthetic vectors made as `bench_recall.py` makes them, every
  memory on its own topic so none is merged into another), then `init`s sync
  and uploads them all;
- writes beside `init`: from the `init` call until the first upload is all
  pushed, another connection to A remembers one memory every 20 ms (an
  agent writing as it works), and each remember's latency is kept
  (longest, p99, p50): `init` logs a put of every memory while writes go on;
- bytes per new memory: A remembers 50 more, one at a time, waiting after
  each until A reports it pushed (`sync_status().pushed_seq` reaches the
  write's txid). The growth of the server's data directory (every file's
  size: sealed versions with their envelope and padding) divided by 50 is
  `bytes_per_memory`. A's connection to the server goes through a byte
  counter in this process, so the bytes A sent on the wire in the same window
  (gRPC and HTTP/2 framing, headers with the token, the `WatchHead` and
  `ListVersions` calls around each push) are reported beside it, and so are
  the bytes A received in that window;
- propagation: device B joins with the recovery key, then 30 times A
  remembers a memory and the clock runs from A's acknowledgement until B's
  `get(id)` succeeds, polled every 10 ms (p50, p99);
- the snapshot: once A has pushed its first upload, the clock runs on until
  A reports the remote snapshot its worker publishes (`sync_status().snapshot`),
  and the snapshot's objects on the server are counted (manifest and chunks);
- joining from the snapshot: a fresh device C joins the vault, now N + 80
  memories, through a byte counter of its own; the clock runs from the
  `join` call until C's `status().memory_count` equals A's, and the bytes C
  received in that time are reported;
- joining by replaying the chain: a second memvault-server serves a copy of
  the first one's data directory without the snapshot's objects, and a
  fresh device D joins there the same way (its own byte counter): the same
  vault, from version 1. The daemons start before any clock runs: model
  loading is not sync.

Each daemon logs a sync round that failed and will be retried (remote
unreachable, rate limit); the count per device is reported, since a retry
costs at least a second of back-off and shows up in the tail figures.

Output: a table on stdout, then, as the last line, one JSON object with every
figure. Phases are reported on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from bench_recall import (
    CENTRES,
    MEMORY_TEMPLATES,
    clustered_vectors,
    embed,
    load_model,
    memory_batches,
    sentences,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memvault import Client
from memvault_base.errors import MemvaultError

ADDITIONS = 50  # single memories whose upload is measured
PROPAGATIONS = 30  # memories timed from A's acknowledgement to B's get
POLL_S = 0.010  # how often B (and A's push status) are polled
BESIDE_EVERY_S = 0.020  # one remember this often on A while `init` runs
BATCH = 2000  # memories per RememberBatch while loading A
SEED = 20260214
START_TIMEOUT_S = 300.0
SYNC_TIMEOUT_S = 900.0
_LISTENING = re.compile(r"listening on [^\s]+:(\d+)")
_CHILD_ENV = {
    "MEMVAULT_PASSPHRASE": "bench passphrase",
    "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def phase(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def wait_for(check: Callable[[], bool], timeout: float, what: str,
             every: float = POLL_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise TimeoutError(f"{what}: not after {timeout:g} s")


# -- the server ----------------------------------------------------------------


class Server:
    """memvault-server on a loopback port, its data in `data_dir`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def token(self, name: str, account: str) -> str:
        argv = [sys.executable, "-m", "memvault_server.main", "token", "create", name,
                "--account", account, "--data", str(self.data_dir)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              check=True).stdout.strip()

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memvault_server.main", "serve", "--listen",
                 "127.0.0.1:0", "--data", str(self.data_dir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)

        def listening() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"memvault-server exited; see {self.log_path}")
            found = _LISTENING.search(self.log_path.read_text(errors="replace"))
            self.port = int(found.group(1)) if found else 0
            return bool(found)

        wait_for(listening, 30.0, "memvault-server listening", every=0.05)

    def copy_without_snapshots(self, target: Path) -> None:
        """A copy of the data directory without the remote snapshots' objects
        (the directory store writes "/" in a name as "+", docs/format.md)."""
        shutil.copytree(self.data_dir, target, ignore=shutil.ignore_patterns(
            "states+*", "state-chunks+*"))

    def snapshot_objects(self) -> tuple[int, int]:
        """(bytes, objects) of the remote snapshots in the store."""
        files = [p for p in self.data_dir.rglob("objects/*")
                 if p.is_file() and p.name.startswith(("states+", "state-chunks+"))]
        return sum(p.stat().st_size for p in files), len(files)

    def store_bytes(self) -> tuple[int, int]:
        """(total size of every file under the data directory, files in the store)."""
        files = [p for p in self.data_dir.rglob("*") if p.is_file()]
        stored = [p for p in files if p.parent.name in ("objects", "versions")]
        return sum(p.stat().st_size for p in files), len(stored)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


class ByteCounter:
    """A TCP relay to `target` that counts the bytes each way."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.sent = 0
        self.received = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._relay, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, client, False),
                             daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket, upload: bool) -> None:
        try:
            while chunk := source.recv(1 << 16):
                with self._lock:
                    if upload:
                        self.sent += len(chunk)
                    else:
                        self.received += len(chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()


# -- the daemons -----------------------------------------------------------------


class Daemon:
    """memvaultd in a subprocess on a fresh MEMVAULT_HOME, as users run it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(mode=0o700)
        self.socket = home / "run" / "memvault.sock"
        self.log_path = home.parent / f"{home.name}.log"
        # One model cache for the three daemons: the first exports, the others load it.
        self.env = {"MEMVAULT_CACHE_DIR": str(home.parent / "model-cache"), **os.environ,
                    "MEMVAULT_HOME": str(home), **_CHILD_ENV}
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "memvaultd.app.main"],
                                         env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)

    def wait_serving(self) -> None:
        def serving() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"memvaultd exited; see {self.log_path}")
            return self._health() == "SERVING"

        wait_for(serving, START_TIMEOUT_S, f"memvaultd in {self.home.name} serving",
                 every=0.1)

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

    def client(self) -> Client:
        return Client(socket=self.socket, timeout=600.0)

    def sync_retries(self) -> int:
        """How many sync rounds failed and were retried (the daemon logs each)."""
        text = self.log_path.read_text(errors="replace")
        return sum("sync failed" in line for line in text.splitlines())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the measurements ------------------------------------------------------------


@dataclass
class Figures:
    n: int
    load_s: float = 0.0
    initial_upload_s: float = 0.0
    initial_store_bytes: int = 0
    bytes_per_memory: float = 0.0
    wire_bytes_per_memory: float = 0.0
    wire_received_per_memory: float = 0.0
    objects: int = 0
    propagation_ms: list[float] = field(default_factory=list)
    beside_init_ms: list[float] = field(default_factory=list)
    join_b_s: float = 0.0
    snapshot_s: float = 0.0
    snapshot_version: int = 0
    snapshot_bytes: int = 0
    snapshot_objects: int = 0
    bootstrap_s: float = 0.0
    bootstrap_received: int = 0
    replay_s: float = 0.0
    replay_received: int = 0
    bootstrap_memories: int = 0
    sync_errors: list[str] = field(default_factory=list)
    sync_retries: dict[str, int] = field(default_factory=dict)


def wait_pushed(client: Client, txid: int, timeout: float = SYNC_TIMEOUT_S) -> None:
    """Until the device reports every local write up to `txid` on the remote."""
    wait_for(lambda: client.sync_status().pushed_seq >= txid, timeout, f"txid {txid} pushed")


def load(client: Client, n: int) -> float:
    """N memories with their own vectors through RememberBatch; returns seconds."""
    rng = random.Random(SEED)
    model = load_model()
    centres = embed(model, sentences(CENTRES, MEMORY_TEMPLATES, rng))
    centre_texts = sentences(CENTRES, MEMORY_TEMPLATES, random.Random(SEED + 1))
    vectors, assignment = clustered_vectors(centres, n, np.random.default_rng(SEED))
    started = time.perf_counter()
    for batch in memory_batches(vectors, assignment, centre_texts, BATCH):
        if any(r.reinforced for r in client.remember_batch(batch)):
            raise RuntimeError("a bench memory was merged into another")
    return time.perf_counter() - started


def one_memory(i: int, rng: np.random.Generator) -> dict[str, Any]:
    vector = rng.normal(size=384).astype(np.float32)
    return {"text": f"sync bench memory {i}: the staging deploy moved to thursdays",
            "topic": f"bench.sync.{i}", "tags": ["bench", "sync"], "category": "odd",
            "vector": (vector / np.linalg.norm(vector)).tolist()}


def remembers_beside(daemon: Daemon, stop: threading.Event) -> list[float]:
    """One remember every BESIDE_EVERY_S on a connection of its own until
    `stop`; the latency of each, in ms."""
    rng = np.random.default_rng(SEED + 4)
    latencies: list[float] = []
    with daemon.client() as client:
        while not stop.is_set():
            memory = one_memory(1_000_000 + len(latencies), rng)
            started = time.perf_counter()
            client.remember(memory.pop("text"), **memory)
            latencies.append((time.perf_counter() - started) * 1000.0)
            stop.wait(BESIDE_EVERY_S)
    return latencies


def bytes_per_memory(client: Client, server: Server, counter: ByteCounter,
                     figures: Figures) -> None:
    rng = np.random.default_rng(SEED + 2)
    before, _ = server.store_bytes()
    sent_before, received_before = counter.sent, counter.received
    for i in range(ADDITIONS):
        memory = one_memory(i, rng)
        result = client.remember(memory.pop("text"), **memory)
        wait_pushed(client, result.txid)
    after, objects = server.store_bytes()
    figures.bytes_per_memory = (after - before) / ADDITIONS
    figures.wire_bytes_per_memory = (counter.sent - sent_before) / ADDITIONS
    figures.wire_received_per_memory = (counter.received - received_before) / ADDITIONS
    figures.objects = objects


def has(client: Client, memory_id: str) -> bool:
    try:
        client.get(memory_id)
    except MemvaultError:
        return False
    return True


def propagation(writer: Client, reader: Client, figures: Figures) -> None:
    rng = np.random.default_rng(SEED + 3)
    for i in range(PROPAGATIONS):
        memory = one_memory(ADDITIONS + i, rng)
        result = writer.remember(memory.pop("text"), **memory)
        acknowledged = time.perf_counter()
        wait_for(lambda mid=result.id: has(reader, mid), 60.0, f"memory {i} on B")
        figures.propagation_ms.append((time.perf_counter() - acknowledged) * 1000.0)
        time.sleep(0.1)


def bootstrap(client: Client, remote: str, key: str, token: str, expected: int) -> float:
    started = time.perf_counter()
    client.join_sync(remote, key, token=token)
    wait_for(lambda: client.status().memory_count >= expected, SYNC_TIMEOUT_S,
             f"{expected} memories after join")
    return time.perf_counter() - started


def counted_join(client: Client, counter: ByteCounter, key: str, token: str,
                 expected: int) -> tuple[float, int]:
    """(seconds, bytes received) of a join through `counter`."""
    received = counter.received
    seconds = bootstrap(client, f"grpc://127.0.0.1:{counter.port}", key, token, expected)
    return seconds, counter.received - received


# -- the run ---------------------------------------------------------------------


def run(n: int, workdir: Path) -> Figures:
    figures = Figures(n)
    server = Server(workdir / "server")
    replay_server = Server(workdir / "server-without-snapshots")
    tokens = {name: server.token(name, "bench") for name in "abcd"}
    server.start()
    counter = ByteCounter(("127.0.0.1", server.port))
    c_counter = ByteCounter(("127.0.0.1", server.port))
    daemons = {name: Daemon(workdir / name) for name in "abcd"}
    try:
        for daemon in daemons.values():
            daemon.spawn()
        for daemon in daemons.values():
            daemon.wait_serving()
        a, b, c, d = (daemons[name].client() for name in "abcd")
        phase(f"loading {n} memories into A")
        figures.load_s = load(a, n)
        phase("A: init, first upload, a remember every 20 ms beside them")
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            beside = pool.submit(remembers_beside, daemons["a"], stop)
            try:
                started = time.perf_counter()
                key = a.init_sync(f"grpc://127.0.0.1:{counter.port}",
                                  token=tokens["a"]).recovery_key
                wait_pushed(a, a.status().applied_txid)
                figures.initial_upload_s = time.perf_counter() - started
            finally:
                stop.set()
            figures.beside_init_ms = beside.result()
        # The last of those may still be unpushed: pushed in the next window,
        # it would add its version to the bytes of the 50 below.
        wait_pushed(a, a.status().applied_txid)
        phase("A publishes the remote snapshot")
        wait_for(lambda: a.sync_status().snapshot > 0, SYNC_TIMEOUT_S, "A's snapshot",
                 every=0.1)
        figures.snapshot_s = time.perf_counter() - started
        figures.snapshot_version = a.sync_status().snapshot
        figures.snapshot_bytes, figures.snapshot_objects = server.snapshot_objects()
        figures.initial_store_bytes = server.store_bytes()[0]
        phase(f"A: {ADDITIONS} single memories, each waited for until pushed")
        bytes_per_memory(a, server, counter, figures)
        direct = f"grpc://127.0.0.1:{server.port}"
        phase("B joins")
        figures.join_b_s = bootstrap(b, direct, key, tokens["b"], a.status().memory_count)
        phase(f"propagation A -> B, {PROPAGATIONS} times")
        propagation(a, b, figures)
        figures.bootstrap_memories = a.status().memory_count
        phase("C joins from the snapshot")
        figures.bootstrap_s, figures.bootstrap_received = counted_join(
            c, c_counter, key, tokens["c"], figures.bootstrap_memories)
        phase("D joins a copy without the snapshot, replaying the chain")
        server.copy_without_snapshots(replay_server.data_dir)
        replay_server.start()
        d_counter = ByteCounter(("127.0.0.1", replay_server.port))
        figures.replay_s, figures.replay_received = counted_join(
            d, d_counter, key, tokens["d"], figures.bootstrap_memories)
        d_counter.close()
        figures.sync_errors = [f"{name}: {cl.sync_status().last_error}"
                               for name, cl in zip("abcd", (a, b, c, d), strict=True)
                               if cl.sync_status().last_error]
    finally:
        for daemon in daemons.values():
            daemon.stop()
        figures.sync_retries = {name: d.sync_retries() for name, d in daemons.items()}
        counter.close()
        c_counter.close()
        server.stop()
        replay_server.stop()
    return figures


# -- the report ------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(),
            "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def summarise(f: Figures, load_before: Sequence[float]) -> dict[str, Any]:
    p50, p99 = (float(x) for x in np.percentile(np.asarray(f.propagation_ms), [50, 99]))
    beside_p50, beside_p99 = (float(x) for x in np.percentile(np.asarray(f.beside_init_ms),
                                                                [50, 99]))
    return {
        "n": f.n,
        "bytes_per_memory": round(f.bytes_per_memory, 1),
        "wire_bytes_per_memory": round(f.wire_bytes_per_memory, 1),
        "wire_received_per_memory": round(f.wire_received_per_memory, 1),
        "objects": f.objects,
        "initial_store_bytes": f.initial_store_bytes,
        "initial_upload_s": round(f.initial_upload_s, 2),
        "load_s": round(f.load_s, 2),
        "propagation_p50_ms": round(p50, 1),
        "propagation_p99_ms": round(p99, 1),
        "propagation_max_ms": round(max(f.propagation_ms), 1),
        "remembers_beside_init": len(f.beside_init_ms),
        "remember_beside_init_p50_ms": round(beside_p50, 1),
        "remember_beside_init_p99_ms": round(beside_p99, 1),
        "remember_beside_init_max_ms": round(max(f.beside_init_ms), 1),
        "join_b_s": round(f.join_b_s, 2),
        "snapshot_s": round(f.snapshot_s, 2),
        "snapshot_version": f.snapshot_version,
        "snapshot_bytes": f.snapshot_bytes,
        "snapshot_objects": f.snapshot_objects,
        "bootstrap_s": round(f.bootstrap_s, 2),
        "bootstrap_received": f.bootstrap_received,
        "replay_s": round(f.replay_s, 2),
        "replay_received": f.replay_received,
        "bootstrap_memories": f.bootstrap_memories,
        "sync_errors": f.sync_errors,
        "sync_retries": f.sync_retries,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "machine": machine(),
    }


def table(s: dict[str, Any]) -> str:
    kib = 4096
    rows = [
        ("vault on A", f"{s['n']} memories, loaded in {s['load_s']} s"),
        ("first upload (init to all pushed)",
         f"{s['initial_upload_s']} s, {s['initial_store_bytes'] / 2**20:.1f} MiB on the server "
         "with the snapshot"),
        ("a remember beside init, max / p99 / p50",
         f"{s['remember_beside_init_max_ms']:.0f} / {s['remember_beside_init_p99_ms']:.0f} / "
         f"{s['remember_beside_init_p50_ms']:.1f} ms ({s['remembers_beside_init']} remembers)"),
        ("server bytes per new memory",
         f"{s['bytes_per_memory']:.0f} B (target <= {kib}) "
         f"{'met' if s['bytes_per_memory'] <= kib else 'MISSED'}"),
        ("wire bytes sent by A per new memory", f"{s['wire_bytes_per_memory']:.0f} B"),
        ("wire bytes received by A per new memory",
         f"{s['wire_received_per_memory']:.0f} B"),
        ("objects + versions in the store", str(s["objects"])),
        ("propagation A -> B p50 / p99 / max",
         f"{s['propagation_p50_ms']:.0f} / {s['propagation_p99_ms']:.0f} / "
         f"{s['propagation_max_ms']:.0f} ms (target p50 <= 1000) "
         f"{'met' if s['propagation_p50_ms'] <= 1000 else 'MISSED'}"),
        ("remote snapshot (init to published)",
         f"{s['snapshot_s']} s, at version {s['snapshot_version']}: "
         f"{s['snapshot_bytes'] / 2**20:.1f} MiB in {s['snapshot_objects']} objects"),
        ("B joins (vault of N + 50)", f"{s['join_b_s']} s"),
        (f"C joins from the snapshot ({s['bootstrap_memories']} memories)",
         f"{s['bootstrap_s']} s, {s['bootstrap_received'] / 2**20:.1f} MiB received"),
        ("D joins replaying the chain (same vault)",
         f"{s['replay_s']} s, {s['replay_received'] / 2**20:.1f} MiB received"),
        ("sync errors standing at the end", "; ".join(s["sync_errors"]) or "none"),
        ("sync rounds failed and retried", ", ".join(
            f"{name}: {count}" for name, count in s["sync_retries"].items())),
        ("load average before / after", f"{s['loadavg_before']} / {s['loadavg']}"),
        ("machine", f"{s['machine']['cpu']}, {s['machine']['cores']} cores"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000, help="memories in the vault")
    parser.add_argument("--keep", action="store_true",
                        help="keep the working directory (daemon and server logs)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="memvault-bench-sync-"))
    try:
        summary = summarise(run(args.n, workdir), load_before)
    finally:
        if args.keep:
            phase(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(summary))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
