"""Numeric loops compiled to machine code that runs without the interpreter lock.

The daemon serves recalls on a pool of threads that share one interpreter
lock: whatever a recall computes in Python, it computes alone. NumPy releases
the lock inside each large call, but a recall's arrays are small (the ~26
probed IVF lists at 100k memories are ~150 rows each), so a search spent a
third of its time in Python between NumPy calls, and took the lock back 26
times. A loop compiled here (numba, LLVM) does such work in one call, with
the lock released, and faster than the NumPy it replaces (`ivf.py`,
docs/benchmarks.md).

Compiled once per machine: numba keeps the machine code in the daemon's
cache directory (`<cache>/numba`, `NUMBA_CACHE_DIR` set by `main.py`; beside
the module in `__pycache__` when imported elsewhere, as by the tests); where
it cannot be written it compiles at each start (~1 s a loop).
Importing numba costs ~65 MB of resident memory and loading a loop ~55 MB
more, so callers import this module only when they need a loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])


def nogil(fastmath: bool = False) -> Callable[[F], F]:
    """`numba.njit` without the interpreter lock, cached on disk when it can be.

    `fastmath` lets LLVM reorder floating-point sums (SIMD), as BLAS does: for
    dot products, not where a result must match NumPy's to the last bit."""

    def wrap(function: F) -> F:
        try:
            compiled = numba.njit(nogil=True, fastmath=fastmath, cache=True)(function)
        except RuntimeError:  # no writable cache location
            compiled = numba.njit(nogil=True, fastmath=fastmath)(function)
        return compiled  # type: ignore[return-value]  # a Dispatcher calls like F

    return wrap
