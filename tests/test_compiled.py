"""The compiled loops: `compiled.nogil` compiles where numba can keep no cache,
and a daemon loads numba only for a vault that needs it."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numba
import numpy as np
import pytest

from memvault import Client
from memvaultd.index import compiled
from memvaultd.index import ivf as ann

from .daemon_process import DaemonProcess


def _total(values: np.ndarray) -> float:
    acc = 0.0
    for value in values:
        acc += value
    return acc


def test_a_loop_compiles_without_a_writable_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    njit = numba.njit

    def no_cache_location(**options: Any) -> Any:
        if options.get("cache"):  # what numba raises when no directory is writable
            raise RuntimeError("cannot cache function '_total': no locator available")
        return njit(**options)

    monkeypatch.setattr(compiled, "numba", SimpleNamespace(njit=no_cache_location))
    loop = compiled.nogil()(_total)
    assert loop(np.arange(5, dtype=np.float64)) == 10.0
    assert isinstance(loop, numba.core.registry.CPUDispatcher)


def _maps_numba(pid: int) -> bool:
    """Whether process `pid` has loaded numba (its extension modules are mapped)."""
    return "/numba/" in Path(f"/proc/{pid}/maps").read_text()


def test_numba_loads_only_in_a_vault_past_the_ivf_threshold(home: Path) -> None:
    """A small vault never loads numba (~120 MB of resident memory); one past
    20k memories does, for the IVF scan and the keyword sums, and answers the
    same recall meanwhile and after."""
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(ann.IVF_THRESHOLD + 500, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def batch(start: int, stop: int) -> list[dict[str, Any]]:
        return [{"text": f"note {i} about deploys", "topic": f"t.{i}",
                 "vector": vectors[i].tolist()} for i in range(start, stop)]

    with DaemonProcess(home).start() as daemon, Client(daemon.socket, timeout=60.0) as client:
        assert daemon.proc is not None
        client.remember_batch(batch(0, 1000))
        hits = client.recall("deploys", query_vector=vectors[7].tolist(), top_k=1)
        assert hits[0].memory.text == "note 7 about deploys"
        time.sleep(3)  # what a compile started by those writes would take to load numba
        assert not _maps_numba(daemon.proc.pid)
        for start in range(1000, len(vectors), 5000):
            client.remember_batch(batch(start, min(start + 5000, len(vectors))))
        deadline = time.monotonic() + 60
        while not _maps_numba(daemon.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _maps_numba(daemon.proc.pid)
        hits = client.recall("deploys", query_vector=vectors[7].tolist(), top_k=1)
        assert hits[0].memory.text == "note 7 about deploys"
        assert daemon.stop() == 0, daemon.log
