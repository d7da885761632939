"""kill -9 at random moments while clients stream writes: nothing acknowledged is lost.

One vault lives through every trial. A trial starts the real daemon, checks
that it comes up and holds every memory acknowledged so far exactly as
written, lets three writers stream `Remember` and `RememberBatch` calls, and
kills the daemon with SIGKILL at a random moment. One trial in four kills it
during start-up instead (while the log is replayed and a torn tail cut), and
is checked by the next start.

Writers send their own vectors, so no trial waits for the model: a kill
lands in the middle of a stream of fsynced appends, not in a quiet moment.
Each memory has its own topic, so none is taken for a restatement of
another.

The suite runs 10 trials; `scripts/crash_trials.py` runs the long campaign
with the same code and reports its figures.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np

from memvault_base.v1 import memory_pb2 as pb
from memvault_base.v1 import memory_pb2_grpc as pb_grpc

from .daemon_process import DaemonProcess

DIMENSION = 384
# A start-up on a busy 2-core machine can take tens of seconds (torch import
# and the model beside the replay); the checks wait for it, never race it.
START_DEADLINE_S = 180.0
CALL_DEADLINE_S = 60.0
# One trial in this many kills during start-up rather than mid-stream.
STARTUP_KILL_EVERY = 4


@dataclass(frozen=True)
class Expected:
    text: str
    topic: str
    tags: tuple[str, ...]
    payload: dict[str, object]
    vector_seed: int


@dataclass
class CrashFigures:
    trials: int = 0
    startup_kills: int = 0
    stream_kills: int = 0
    acknowledged: int = 0
    unacknowledged_attempts: int = 0
    lost: int = 0
    altered: int = 0
    slowest_start_s: float = 0.0
    failures: list[str] = field(default_factory=list)


def vector_of(seed: int) -> list[float]:
    """A reproducible vector for memory number `seed` (stored scaled to unit length)."""
    values = np.random.default_rng(seed).standard_normal(DIMENSION).astype(np.float32)
    return [float(v) for v in values]


def unit(values: list[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float32)
    return array / np.linalg.norm(array)


def _input(number: int, trial: int) -> tuple[pb.MemoryInput, Expected]:
    expected = Expected(
        text=f"crash trial {trial} memory {number}: the deploy key rotates on day {number % 28}",
        topic=f"crash.t{trial}.m{number}",
        tags=("crash", f"trial-{trial}"),
        payload={"n": number, "trial": trial, "note": "ünïcödé ✓"},
        vector_seed=number,
    )
    message = pb.MemoryInput(
        text=expected.text, topic_key=expected.topic, tags=list(expected.tags),
        payload_json=json.dumps(expected.payload), vector=vector_of(number))
    return message, expected


class Writers:
    """Three threads streaming writes until the daemon goes away."""

    def __init__(self, socket: Path, trial: int, first_number: int) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.stub = pb_grpc.MemoryStub(self.channel)  # type: ignore[no-untyped-call]
        self.trial = trial
        self.acked: dict[str, Expected] = {}
        self.attempts = 0
        self.first_ack = threading.Event()
        self._numbers = iter(range(first_number, first_number + 10_000_000))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.unexpected: list[str] = []
        self._threads = [threading.Thread(target=self._single, daemon=True) for _ in range(2)]
        self._threads.append(threading.Thread(target=self._batch, daemon=True))

    def _next(self) -> tuple[pb.MemoryInput, Expected]:
        with self._lock:
            number = next(self._numbers)
            self.attempts += 1
        return _input(number, self.trial)

    def _acknowledge(self, memory_id: str, expected: Expected, reinforced: bool) -> None:
        with self._lock:
            if reinforced:
                self.unexpected.append(f"{memory_id}: taken as a restatement")
            self.acked[memory_id] = expected
        self.first_ack.set()

    def _call(self, send: Callable[[], None]) -> bool:
        try:
            send()
        except grpc.RpcError as err:
            if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                self.unexpected.append(f"{err.code().name}: {err.details()}")
            return False
        return not self._stop.is_set()

    def _single(self) -> None:
        def send() -> None:
            message, expected = self._next()
            reply = self.stub.Remember(pb.RememberRequest(memory=message),
                                       timeout=CALL_DEADLINE_S)
            self._acknowledge(reply.id, expected, reply.reinforced)

        while self._call(send):
            pass

    def _batch(self) -> None:
        def send() -> None:
            pairs = [self._next() for _ in range(5)]
            reply = self.stub.RememberBatch(
                pb.RememberBatchRequest(memories=[m for m, _ in pairs]), timeout=CALL_DEADLINE_S)
            for result, (_, expected) in zip(reply.results, pairs, strict=True):
                self._acknowledge(result.id, expected, result.reinforced)

        while self._call(send):
            pass

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(CALL_DEADLINE_S + 10)
        self.channel.close()


def exported(socket: Path, include_vectors: bool = False) -> dict[str, pb.MemoryRecord]:
    """Every memory the daemon holds, once its vault is loaded (Export waits for that)."""
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stub = pb_grpc.MemoryStub(channel)  # type: ignore[no-untyped-call]
        stream = stub.Export(pb.ExportRequest(include_vectors=include_vectors),
                             timeout=START_DEADLINE_S, wait_for_ready=True)
        return {record.id: record for record in stream}


def differences(expected: dict[str, Expected], held: dict[str, pb.MemoryRecord],
                check_vectors: bool = False) -> tuple[list[str], list[str]]:
    """(lost ids, altered ids) of `expected` against what the daemon holds."""
    lost, altered = [], []
    for memory_id, want in expected.items():
        record = held.get(memory_id)
        if record is None:
            lost.append(memory_id)
            continue
        same = (record.text == want.text and record.topic_key == want.topic
                and tuple(record.tags) == want.tags
                and json.loads(record.payload_json) == want.payload)
        if same and check_vectors:
            same = bool(np.allclose(np.asarray(record.vector, dtype=np.float32),
                                    unit(vector_of(want.vector_seed)), atol=1e-6))
        if not same:
            altered.append(memory_id)
    return lost, altered


class CrashCampaign:
    def __init__(self, home: Path, seed: int, report: Callable[[str], None] = print) -> None:
        self.home = home
        self.rng = random.Random(seed)
        self.report = report
        self.acked: dict[str, Expected] = {}
        self.figures = CrashFigures()
        self._next_number = 0

    def _check(self, proc: DaemonProcess, started: float, check_vectors: bool = False) -> None:
        held = exported(proc.socket, include_vectors=check_vectors)
        self.figures.slowest_start_s = max(self.figures.slowest_start_s,
                                           time.monotonic() - started)
        lost, altered = differences(self.acked, held, check_vectors)
        self.figures.lost += len(lost)
        self.figures.altered += len(altered)
        if lost or altered:
            self.figures.failures.append(
                f"trial {self.figures.trials}: lost {lost[:5]}, altered {altered[:5]}")

    def trial(self) -> None:
        number = self.figures.trials
        proc = DaemonProcess(self.home)
        started = time.monotonic()
        proc.start(wait=False)
        if number % STARTUP_KILL_EVERY == STARTUP_KILL_EVERY - 1:
            time.sleep(self.rng.uniform(0.0, 2.5))  # import, unlock, bind, replay: anywhere
            proc.kill()
            self.figures.startup_kills += 1
            self.figures.trials += 1
            return
        self._check(proc, started)
        writers = Writers(proc.socket, number, self._next_number)
        writers.start()
        if not writers.first_ack.wait(CALL_DEADLINE_S):
            self.figures.failures.append(f"trial {number}: no write acknowledged\n{proc.log}")
        time.sleep(self.rng.uniform(0.0, 1.0))
        proc.kill()
        writers.join()
        self._next_number += writers.attempts
        self.acked.update(writers.acked)
        self.figures.acknowledged += len(writers.acked)
        self.figures.unacknowledged_attempts += writers.attempts - len(writers.acked)
        self.figures.failures += [f"trial {number}: {u}" for u in writers.unexpected]
        self.figures.stream_kills += 1
        self.figures.trials += 1

    def finish(self) -> None:
        """Start until SERVING, check every vector too, stop cleanly, start from the snapshot."""
        with DaemonProcess(self.home) as proc:
            started = time.monotonic()
            proc.start(timeout=START_DEADLINE_S)
            self._check(proc, started, check_vectors=True)
            if proc.stop() != 0:
                self.figures.failures.append(f"clean stop failed:\n{proc.log}")
        with DaemonProcess(self.home) as proc:
            started = time.monotonic()
            proc.start(wait=False)
            self._check(proc, started)
            proc.stop()

    def run(self, trials: int) -> CrashFigures:
        for _ in range(trials):
            self.trial()
            if self.figures.trials % 10 == 0:
                f = self.figures
                self.report(f"{f.trials} trials, {f.acknowledged} acknowledged, "
                            f"{f.lost} lost, {f.altered} altered")
        self.finish()
        return self.figures


def test_kill_9_at_random_moments_loses_no_acknowledged_memory(home: Path) -> None:
    figures = CrashCampaign(home, seed=20260601, report=lambda _: None).run(trials=10)
    assert figures.failures == []
    assert figures.lost == 0 and figures.altered == 0
    assert figures.stream_kills >= 7 and figures.acknowledged > 0
