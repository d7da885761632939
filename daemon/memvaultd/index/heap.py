"""Handing freed heap memory back to the operating system.

Loading a snapshot, building an IVF and sealing a snapshot each allocate and
free hundreds of megabytes of short-lived Python objects and arrays. glibc
keeps what was freed in its arenas for reuse, so the daemon's resident size
stays at the peak: at 100k memories, 65 MB of the ~840 MB a loaded state
held in process were such free pages, returned by one `malloc_trim(0)`
(~10 ms). Elsewhere than glibc (musl, macOS) there is no such call and
nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

log = logging.getLogger("memvaultd.index")


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def trim_heap() -> None:
    """Return the heap's free pages to the operating system, where the C
    library can."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
