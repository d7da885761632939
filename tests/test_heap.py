"""The daemon's heap settings (`index/heap.py`), each in a fresh interpreter:
they change process-wide state."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .daemon_process import DaemonProcess

ARROW_READ = textwrap.dedent("""
    import json, sys
    import numpy as np
    import pyarrow as pa
    from pyarrow import ipc
    from memvaultd.index.heap import arrow_from_malloc
    if sys.argv[1] == "malloc":
        arrow_from_malloc()
    sink = pa.BufferOutputStream()
    table = pa.table({"v": np.arange(1_000_000, dtype=np.int64)})
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    # Read as snapshot_body.py reads: a stream, its buffers decompressed or
    # copied into new ones (here: concatenated) from the default pool.
    read = ipc.open_stream(sink.getvalue()).read_all().combine_chunks()
    copy = pa.concat_arrays([read["v"].chunk(0), read["v"].chunk(0)])
    print(json.dumps({"default": pa.default_memory_pool().backend_name,
                      "malloc": pa.system_memory_pool().bytes_allocated(),
                      "own": pa.mimalloc_memory_pool().bytes_allocated(), "n": len(copy)}))
""")


def _run(script: str, mode: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                          text=True, timeout=60, check=True)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_arrow_allocates_from_malloc_once_told_and_from_its_own_mimalloc_before() -> None:
    before, after = _run(ARROW_READ, "default"), _run(ARROW_READ, "malloc")
    # 3 x 8 MB of int64s live at the end: the read table and the copy.
    assert before["default"] == "mimalloc" and before["own"] >= 16_000_000
    assert after["default"] == "system"
    assert after["malloc"] >= 16_000_000 and after["own"] == 0


THRESHOLDS = textwrap.dedent("""
    import ctypes, json, sys
    from memvaultd.index.heap import START_THRESHOLDS, fix_thresholds
    if sys.argv[1] == "fixed":
        fix_thresholds()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = MallInfo2

    # A large temporary freed (the load's), then blocks just under it and
    # then the threshold's own size, as an index's arrays are.
    libc.free(libc.malloc(24 << 20))
    before = libc.mallinfo2().hblks
    blocks = [libc.malloc(16 << 20) for _ in range(3)] + [libc.malloc(START_THRESHOLDS[0])]
    mapped = libc.mallinfo2().hblks - before
    for block in blocks:
        libc.free(block)
    # Two blocks under the mmap threshold, more than the trim threshold
    # together, freed at the heap's top.
    top = [libc.malloc(3 << 20), libc.malloc(3 << 20)]
    grown = libc.mallinfo2().arena
    for block in top[::-1]:
        libc.free(block)
    print(json.dumps({"mapped": mapped, "grown": grown, "after": libc.mallinfo2().arena}))
""")


def test_fixed_thresholds_map_large_blocks_and_give_a_freed_top_back() -> None:
    moving, fixed = _run(THRESHOLDS, "moving"), _run(THRESHOLDS, "fixed")
    # glibc's moving threshold rose to 24 MiB at the first free: the next
    # blocks came from the heap, and 6 MiB freed at its top stayed.
    assert moving["mapped"] == 0
    assert moving["after"] >= moving["grown"]
    # Held: every block from the threshold up is mapped on its own, and the
    # freed top goes back.
    assert fixed["mapped"] == 4
    assert fixed["after"] <= fixed["grown"] - (5 << 20)


# /proc/self/status as the process reads it before, between and after.
HUGE_PAGES = textwrap.dedent("""
    import json
    from pathlib import Path
    from memvaultd.index.heap import huge_pages

    seen = [Path("/proc/self/status").read_text()]
    huge_pages(False)
    seen.append(Path("/proc/self/status").read_text())
    huge_pages(True)
    seen.append(Path("/proc/self/status").read_text())
    print(json.dumps({"seen": seen}))
""")


def _huge_pages_enabled(status: str) -> str:
    """THP_enabled of a /proc/PID/status text."""
    found = re.search(r"THP_enabled:\s*(\d)", status)
    assert found is not None
    return found[1]


# A kernel built without them says 0 whatever a process asks.
needs_huge_pages = pytest.mark.skipif(not Path("/sys/kernel/mm/transparent_hugepage").is_dir(),
                                      reason="a kernel without transparent huge pages")


@needs_huge_pages
def test_huge_pages_go_off_and_on_again() -> None:
    seen = _run(HUGE_PAGES, "")["seen"]
    assert [_huge_pages_enabled(status) for status in seen] == ["1", "0", "1"]


@needs_huge_pages
def test_a_loaded_daemon_has_its_huge_pages_again(tmp_path: Path) -> None:
    # Off while the vault loads (`index/heap.py`); a daemon that kept them off
    # would search its IVF's codes through 4 KiB pages for the rest of its life.
    with DaemonProcess(tmp_path / "home").start() as proc:
        assert proc.proc is not None
        status = Path(f"/proc/{proc.proc.pid}/status").read_text()
        assert _huge_pages_enabled(status) == "1"
        assert proc.stop() == 0
