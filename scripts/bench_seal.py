#!/usr/bin/env python3
"""What a seal costs with each way of keeping nonces unique across a restored VM.

    .venv/bin/python scripts/bench_seal.py

Times, in one process, alternating, four ways to seal a 2 KiB operation record
(a put with its 384-dim vector) and a 4 MiB snapshot chunk:

- `gcm/block`: AES-256-GCM, nonce from the per-thread block of
  `crypto/entropy.py` (the format-1 seal);
- `gcm/os`: AES-256-GCM, nonce from one `os.urandom(12)` per seal;
- `siv/block`: AES-256-GCM-SIV (RFC 8452), nonce from the block (the format-2
  seal);
- `siv/os`: AES-256-GCM-SIV, nonce from `os.urandom(12)` per seal.

Each alone, and beside one thread encoding JSON (what a snapshot being encoded
does to a `RememberBatch`): the encoder holds the interpreter lock through
each C call, and whatever gives the lock up (`os.urandom` does, for its
system call) waits for the call to end to take it back. Prints medians and the ratio of each to
`gcm/block`; the last line is one JSON object.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESGCMSIV

ROUNDS = 7
RECORD = os.urandom(2048)
CHUNK = os.urandom(4 << 20)
AAD = b"memvault/log" + bytes(25)
KEY = os.urandom(32)
# (payload, seals per round): ~0.2 s a round for each
SIZES = {"record": (RECORD, 5_000), "chunk": (CHUNK, 20)}


def _block_nonce() -> bytes:
    from memvaultd.crypto.entropy import random_bytes

    return random_bytes(12)


def _os_nonce() -> bytes:
    return os.urandom(12)


def _sealer(cipher: AESGCM | AESGCMSIV, nonce: Callable[[], bytes],
            payload: bytes) -> Callable[[], bytes]:
    return lambda: (n := nonce()) + cipher.encrypt(n, payload, AAD)


def per_call_us(work: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - started) / calls * 1e6


class BusyThread:
    """A thread encoding JSON in C calls of ~20 ms, as a snapshot's meta is encoded."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        rows = [{"id": f"{i:032x}", "text": "a memory", "tags": ["a", "b"]} for i in range(20_000)]
        while not self._stop.is_set():
            json.dumps(rows)

    def __enter__(self) -> BusyThread:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(busy: bool) -> dict[str, dict[str, float]]:
    gcm, siv = AESGCM(KEY), AESGCMSIV(KEY)
    ways = {"gcm/block": (gcm, _block_nonce), "gcm/os": (gcm, _os_nonce),
            "siv/block": (siv, _block_nonce), "siv/os": (siv, _os_nonce)}
    out: dict[str, dict[str, float]] = {}
    for size, (payload, calls) in SIZES.items():
        samples: dict[str, list[float]] = {way: [] for way in ways}
        sealers = {way: _sealer(cipher, nonce, payload) for way, (cipher, nonce) in ways.items()}
        if busy:
            calls = max(1, calls // 5)  # a busy neighbour makes each call slower
        for _ in range(ROUNDS):
            for way, seal in sealers.items():
                if busy:
                    with BusyThread():
                        samples[way].append(per_call_us(seal, calls))
                else:
                    samples[way].append(per_call_us(seal, calls))
        out[size] = {way: statistics.median(values) for way, values in samples.items()}
    return out


def main() -> int:
    report: dict[str, object] = {}
    for busy in (False, True):
        label = "beside a busy thread" if busy else "alone"
        print(f"[bench] {label}", file=sys.stderr)
        results = measure(busy)
        for size, by_way in results.items():
            base = by_way["gcm/block"]
            for way, us in by_way.items():
                print(f"{label:22} {size:6} {way:10} {us:10.2f} us   x{us / base:6.2f}")
            report[f"{'busy' if busy else 'alone'}/{size}"] = {
                way: {"us": round(us, 2), "ratio": round(us / base, 3)}
                for way, us in by_way.items()}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
