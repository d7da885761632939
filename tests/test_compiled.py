"""compiled.nogil: a loop still compiles where numba can keep no cache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numba
import numpy as np
import pytest

from memvaultd import compiled


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
