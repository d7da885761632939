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
And it raises its mmap threshold to the largest block freed (up to 32 MiB)
and its trim threshold to twice that, so after the load's temporaries were
freed, blocks of megabytes came from the heaps and up to 64 MiB stayed at
each heap's top: whether the start's threads left 25 MB more resident
depended on which arena each had drawn. `fix_thresholds` holds both low
while the daemon starts and at their ceilings once its IVF is built.

Arrow (the snapshot body's columns) brings an allocator of its own,
mimalloc, which keeps what it frees in its segments, out of `malloc_trim`'s
reach: `arrow_from_malloc` hands Arrow's buffers to the C library's malloc.
Arrow's code is used only to read and write snapshots, and its pages stay
resident after each (31 MB at the start): `release_arrow_pages` gives them
back (`memvault_base/resident.py`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]  # ships no py.typed

from memvault_base.resident import release_code_pages
from memvault_base.secrecy import linux_libc

log = logging.getLogger("memvaultd.index")


# mallopt's parameters (glibc's malloc.h).
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1
# Two: a 100k daemon serving held 536 against 561 MB resident (medians of
# three alternating rounds, scripts/bench_recall_ab.py), recall latency the
# same; see docs/benchmarks.md for calls per second.
ARENAS = 2


@functools.cache
def _glibc(function: str) -> Callable[..., int] | None:
    """The C library's `function`, if it is glibc's (which has it)."""
    libc = linux_libc()
    if libc is None:
        return None
    try:
        found: Callable[..., int] = getattr(libc, function)
    except (OSError, AttributeError):  # not glibc
        return None
    return found


def limit_arenas() -> None:
    """Cap glibc's malloc arenas at ARENAS, where the C library has them.
    Before the process starts its threads: arenas made already stay."""
    mallopt = _glibc("mallopt")
    if mallopt is not None and not mallopt(_M_ARENA_MAX, ARENAS):
        log.warning("could not cap the malloc arenas at %d", ARENAS)


# While the daemon starts (the load, the keyword index, the first IVF),
# blocks from 4 MiB are mapped on their own and unmapped when freed, and a
# heap's free top beyond 4 MiB goes back at once. At 100k a serving
# daemon's anonymous memory was 333-336 MB in five starts, against 335-370
# MB (two levels, 25 MB apart) with glibc's moving thresholds; a trim
# threshold of 128 KiB held as much but gave back pages the load's next
# blocks took again (start 1.95 against 1.80 s).
START_THRESHOLDS = (4 << 20, 4 << 20)
# Serving, blocks up to 32 MiB come from the heaps again, as glibc's moving
# thresholds let them (at most 32 and 64 MiB): at 1M a recall's arrays of a
# value a row are 4-8 MB, and mapped afresh each time they cost a 1M recall
# 330-430 page faults, against none.
SERVING_THRESHOLDS = (32 << 20, 64 << 20)


def fix_thresholds(*, serving: bool = False) -> None:
    """Hold glibc's mmap and trim thresholds at START_THRESHOLDS, or at
    SERVING_THRESHOLDS once the start's bulk work is done, where the C
    library has them."""
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return
    mmap_threshold, trim_threshold = SERVING_THRESHOLDS if serving else START_THRESHOLDS
    for parameter, value in ((_M_MMAP_THRESHOLD, mmap_threshold),
                             (_M_TRIM_THRESHOLD, trim_threshold)):
        if not mallopt(parameter, value):
            log.warning("could not set malloc's parameter %d to %d", parameter, value)


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


def release_arrow_pages() -> None:
    """Let the kernel reclaim the pages of Arrow's libraries (its wheel's
    directory) that a snapshot's read or write touched (~8 ms)."""
    release_code_pages(Path(pa.__file__).parent)
