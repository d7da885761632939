"""The daemon's heap settings (`index/heap.py`), each in a fresh interpreter:
they change process-wide state."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

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


def _read(mode: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", ARROW_READ, mode], capture_output=True,
                          text=True, timeout=60, check=True)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_arrow_allocates_from_malloc_once_told_and_from_its_own_mimalloc_before() -> None:
    before, after = _read("default"), _read("malloc")
    # 3 x 8 MB of int64s live at the end: the read table and the copy.
    assert before["default"] == "mimalloc" and before["own"] >= 16_000_000
    assert after["default"] == "system"
    assert after["malloc"] >= 16_000_000 and after["own"] == 0
