"""Library pages touched only to start are given back (`memvault_base/resident.py`):
in a fresh interpreter, and in the real daemon once it serves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from memvault import Client

from .daemon_process import DaemonProcess

RELEASE_ARROW = textwrap.dedent("""
    import json, re
    from pathlib import Path
    import numpy as np
    import pyarrow as pa
    from pyarrow import ipc
    from memvault_base.resident import _read_only_file_mappings, release_code_pages

    ARROW = str(Path(pa.__file__).parent.resolve()) + "/"

    def arrow_file_kb():
        # Rss less Anonymous of every mapping of a file in pyarrow's directory.
        total, inside = 0, False
        for line in open("/proc/self/smaps"):
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                fields = line.split()
                inside = len(fields) > 5 and fields[5].startswith(ARROW)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
            elif inside and line.startswith("Anonymous:"):
                total -= int(line.split()[1])
        return total

    def round_trip():
        table = pa.table({"v": np.arange(100_000, dtype=np.int64)})
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return int(ipc.open_stream(sink.getvalue()).read_all()["v"].to_numpy().sum())

    kept = np.arange(1_000_000, dtype=np.int64)  # anonymous memory: never advised
    first = round_trip()
    before = arrow_file_kb()
    advised = release_code_pages(Path(pa.__file__).parent)
    after = arrow_file_kb()
    writable = [line for line in open("/proc/self/maps")
                if any(int(line.split("-")[0], 16) == start
                       for start, _ in _read_only_file_mappings(None))
                and "w" in line.split()[1]]
    print(json.dumps({"before_kb": before, "after_kb": after, "advised": advised,
                      "same": round_trip() == first, "kept": int(kept.sum()),
                      "writable": writable}))
""")


def test_arrows_pages_go_back_and_arrow_still_works_after() -> None:
    done = subprocess.run([sys.executable, "-c", RELEASE_ARROW], capture_output=True,
                          text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    # 7 Dec 2026: 20-23 MB of Arrow's file pages resident after the import
    # and one stream written and read; under 1 MB once released.
    assert found["before_kb"] > 8_000
    assert found["after_kb"] < found["before_kb"] / 4
    assert found["advised"] > 0
    assert found["same"], "Arrow must read back what it wrote after its pages went"
    assert found["kept"] == 999_999 * 1_000_000 // 2
    assert found["writable"] == [], "only mappings the process cannot write are advised"


def _file_pages_mb(pid: int) -> float:
    # /proc/PID/status, unlike smaps, is readable for a process that forbade
    # dumps (`memvault_base/secrecy.py`) by a user without CAP_SYS_PTRACE.
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"RssFile:\s+(\d+) kB", status)
    assert found, status
    return int(found.group(1)) / 1024


def test_a_serving_daemon_holds_only_the_library_pages_it_uses(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            client.remember_batch([{"text": f"the release note {n} of the garden app"}
                                  for n in range(50)])
        assert proc.stop() == 0  # a snapshot, which the next start reads with Arrow
    with DaemonProcess(home).start() as proc:
        with Client(socket=proc.socket) as client:
            assert client.recall("garden app release notes")
            client.remember("the garden app ships on a Thursday")
        # 7 Dec 2026, this vault: 83 MB of file pages resident when start-up's
        # pages stayed (Arrow's ~28, ONNX Runtime's ~21 among them); 32 MB
        # when they went back and serving touched again what it uses.
        assert proc.proc is not None
        assert _file_pages_mb(proc.proc.pid) < 55
        assert proc.stop() == 0
