"""Giving the kernel back the pages of code a process touched only to start.

Importing a library touches much of its code and read-only data: its
relocations, its static initialisers (Arrow registers some thousand compute
functions, ONNX Runtime its kernels), the paths that open a file or build a
session. Those pages stay in the process's resident set for as long as it
runs, though a daemon that serves recalls never touches most of them again:
a 100k daemon held 85 MB of such file pages, 31 MB of them Arrow's, which it
uses only to read and write a snapshot.

`release_code_pages` asks the kernel to reclaim them (`MADV_PAGEOUT`, Linux
5.4 and later) from every mapping of a file the process cannot write: shared
libraries, extension modules, the model's weights. Those pages are clean, so
nothing is lost: a page used again is read back from the file, once. Pages
that another process maps too (the C library, Python's, those the front
process shares) are left where they are. Anonymous memory (the heap, the
vault's arrays, a library's written data) is never touched, so nothing
decrypted is pushed towards the swap device. Elsewhere (macOS, an older
kernel) nothing is done.

Measured on the daemon serving 100k memories (7 Dec 2026): its file pages
went from 85 to 32-37 MB once it had served recalls of new texts and a
write (what those used came back), the front's from 22 to 18 MB.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable
from pathlib import Path

from memvault_base.secrecy import linux_libc

__all__ = ["release_code_pages", "resident_file_bytes"]

log = logging.getLogger("memvault.resident")

# <asm-generic/mman-common.h>; Python 3.11's mmap module does not name it.
MADV_PAGEOUT = 21


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    libc = linux_libc()
    if libc is None:
        return None
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    found: Callable[[int, int, int], int] = madvise
    return found


def _read_only_file_mappings(under: Path | None) -> list[tuple[int, int]]:
    """(start, length) of every mapping of a file this process cannot write
    through, of files under `under` only if it is given."""
    prefix = None if under is None else str(under.resolve()) + "/"
    found = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            # start-end perms offset dev inode path
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or "w" in fields[1]:
                continue
            path = fields[5].rstrip("\n")
            if not path.startswith("/") or (prefix is not None and not path.startswith(prefix)):
                continue
            start, end = (int(part, 16) for part in fields[0].split("-"))
            found.append((start, end - start))
    return found


def release_code_pages(under: Path | None = None) -> int:
    """Ask the kernel to reclaim the resident pages of every read-only file
    mapping (of files under `under`, if given). Returns the bytes of mappings
    advised, 0 where the kernel has no such advice."""
    madvise = _madvise()
    if madvise is None:
        return 0
    try:
        mappings = _read_only_file_mappings(under)
    except OSError as exc:  # no /proc: nothing to name the mappings by
        log.debug("cannot read this process's mappings: %s", exc)
        return 0
    advised = 0
    for start, length in mappings:
        # EINVAL for a locked mapping or a kernel before 5.4: the pages stay,
        # which is all that failing here means.
        if madvise(start, length, MADV_PAGEOUT) == 0:
            advised += length
    return advised


def resident_file_bytes() -> int | None:
    """The bytes of file pages this process has resident (`RssFile`, Linux),
    None where the kernel does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssFile:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None
