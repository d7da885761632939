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

And the kernel backs an array that asks for it (NumPy asks for every
array of 4 MiB and more) with 2 MiB pages. On a virtual machine that
reports its free memory to the host (virtio-balloon's free page
reporting, in free blocks of 2 MiB and up), such a page is a block the
host took back, and its first touch costs the host's work for every 4
KiB in it: a 1M start spent seconds of system time there, more or fewer
with how much the host had taken. `huge_pages` turns them off while the
vault loads.

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
# blocks from 8 MiB are mapped on their own and unmapped when freed, and a
# heap's free top beyond 4 MiB goes back at once. At 100k a serving
# daemon's anonymous memory was 333-336 MB in five starts, against 335-370
# MB (two levels, 25 MB apart) with glibc's moving thresholds; a trim
# threshold of 128 KiB held as much but gave back pages the load's next
# blocks took again (start 1.95 against 1.80 s). 8 MiB, not 4: a sealed
# chunk's ciphertext and plaintext are 4 MiB and a few bytes each, and
# mapped afresh for each of a 1M snapshot's ~350 chunks they made 1.30M
# page faults of a start against 0.60M; at 100k it served in 396-402 MB
# against 399-405 with 4 MiB (7 alternating rounds, 7 Dec).
START_THRESHOLDS = (8 << 20, 4 << 20)
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


# <linux/prctl.h>: the process's transparent huge pages off (1) or as the
# system's setting says (0), for its threads and for the children it starts.
_PR_SET_THP_DISABLE = 41


def huge_pages(allowed: bool) -> None:
    """Let the kernel back this process's memory with transparent huge
    pages or not (Linux 3.15 and later; elsewhere nothing is done).

    Off while the vault loads: filling the 1M vault's 768 MB matrix took
    4.6-8.6 s in huge pages the first time in a process and 0.34-0.40 s in
    4 KiB pages (one process, 7 Dec; /proc/vmstat counted no compaction
    stall), and a 1M daemon started in 7.8 against 14.6 s (medians of 3
    alternating rounds, `bench_recall_ab.py`).
    On again once it is loaded: the IVF built then has its codes in huge
    pages, where a search reads megabytes of them (hybrid p50 4.49 against 5.13
    ms in the same rounds)."""
    prctl = _glibc("prctl")
    if prctl is not None and prctl(_PR_SET_THP_DISABLE, 0 if allowed else 1, 0, 0, 0) != 0:
        log.warning("could not turn transparent huge pages %s", "on" if allowed else "off")


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
