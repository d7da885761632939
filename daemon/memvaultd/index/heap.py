"""Handing freed heap memory back to the operating system.

Loading a snapshot, building an IVF and sealing a snapshot each allocate and
free hundreds of megabytes of short-lived Python objects and arrays. glibc
keeps what was freed in its arenas for reuse, so the daemon's resident size
stays at the peak: at 100k memories, 65 MB of the ~840 MB a loaded state
held in process were such free pages, returned by one `malloc_trim(0)`
(~10 ms). Elsewhere than glibc (musl, macOS) there is no such call and
nothing is done.

glibc also gives threads that allocate at once arenas of their own, up to
8 a core, and each keeps its own free pages: `limit_arenas` caps them.

Arrow (the snapshot body's columns) brings an allocator of its own,
mimalloc, which keeps what it frees in its segments, out of `malloc_trim`'s
reach: `arrow_from_malloc` hands Arrow's buffers to the C library's malloc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

import pyarrow as pa  # type: ignore[import-untyped]  # ships no py.typed

log = logging.getLogger("memvaultd.index")


# mallopt's parameter for the most arenas (glibc's malloc.h).
_M_ARENA_MAX = -8
# Two: a 100k daemon serving held 536 against 561 MB resident (medians of
# three alternating rounds, scripts/bench_recall_ab.py), recall latency the
# same; see docs/benchmarks.md for calls per second.
ARENAS = 2


@functools.cache
def _glibc(function: str) -> Callable[..., int] | None:
    """The C library's `function`, if it is glibc's (which has it)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        found: Callable[..., int] = getattr(ctypes.CDLL(name), function)
    except (OSError, AttributeError):  # not glibc
        return None
    return found


def limit_arenas() -> None:
    """Cap glibc's malloc arenas at ARENAS, where the C library has them.
    Before the process starts its threads: arenas made already stay."""
    mallopt = _glibc("mallopt")
    if mallopt is not None and not mallopt(_M_ARENA_MAX, ARENAS):
        log.warning("could not cap the malloc arenas at %d", ARENAS)


def arrow_from_malloc() -> None:
    """Arrow's buffers from the C library's malloc from now on. A daemon
    serving held 519 against 543 MB at 100k, 2,295 against 2,340 MB at 1M
    (medians of 5 and 3 alternating rounds, `bench_recall_ab.py`; the
    model's weights mapped too, which alone changed nothing measurable),
    starting and stopping as fast."""
    pa.set_memory_pool(pa.system_memory_pool())


def trim_heap() -> None:
    """Return the heap's free pages to the operating system, where the C
    library can."""
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)
