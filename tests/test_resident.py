"""Library pages touched only to start are given back (`memvault_base/resident.py`):
the mechanism on a file of the test's own, and the real daemon doing it once it serves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from memvault import Client

from .daemon_process import DaemonProcess

# A file of the test's own, so that no other process maps its pages (a page
# another process maps too is never reclaimed: the suite's own process maps
# Arrow's and ONNX Runtime's libraries).
RELEASE = textwrap.dedent("""
    import json, mmap, os, re, sys
    from pathlib import Path
    import numpy as np
    from memvault_base.resident import _read_only_file_mappings, release_code_pages

    folder = Path(sys.argv[1])
    size = 16 << 20
    data = os.urandom(size)
    for name in ("read", "written"):
        (folder / name).write_bytes(data)
    with open(folder / "read", "rb") as file:
        read = mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ)
    with open(folder / "written", "r+b") as file:
        written = mmap.mmap(file.fileno(), size)
    written[:] = bytes(size)  # dirty: a writable mapping is never advised
    assert read[:] == data  # every page resident
    kept = np.arange(1_000_000, dtype=np.int64)  # anonymous memory: never advised

    def resident_kb(name):
        total, inside = 0, False
        for line in open("/proc/self/smaps"):
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                fields = line.split()
                inside = len(fields) > 5 and fields[5] == str((folder / name).resolve())
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
        return total

    def anonymous_kb():
        return sum(int(line.split()[1]) for line in open("/proc/self/smaps")
                   if line.startswith("Anonymous:"))

    before = {"read": resident_kb("read"), "written": resident_kb("written"),
              "anonymous": anonymous_kb()}
    advised = release_code_pages(folder)
    after = {"read": resident_kb("read"), "written": resident_kb("written"),
             "anonymous": anonymous_kb()}
    writable = [line for line in open("/proc/self/maps")
                if any(int(line.split("-")[0], 16) == start
                       for start, _ in _read_only_file_mappings(None))
                and "w" in line.split()[1]]
    print(json.dumps({"before": before, "after": after, "advised": advised,
                      "same": read[:] == data, "still_zero": written[:16] == bytes(16),
                      "kept": int(kept.sum()), "writable": writable}))
""")


def test_read_only_file_pages_go_back_and_read_the_same_after(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", RELEASE, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    assert found["before"]["read"] >= 16 * 1024 - 64
    assert found["advised"] == 16 << 20, "only the read-only mapping of the folder's files"
    assert found["after"]["read"] < 1024
    assert found["same"], "pages given back are read back from the file, the same"
    # The writable mapping and the anonymous memory are as they were.
    assert found["after"]["written"] == found["before"]["written"] >= 16 * 1024 - 64
    assert found["still_zero"]
    assert found["after"]["anonymous"] >= found["before"]["anonymous"] - 1024
    assert found["kept"] == 999_999 * 1_000_000 // 2
    assert found["writable"] == [], "no mapping the process can write is ever advised"


def test_a_serving_daemon_gives_back_its_start_up_pages(tmp_path: Path) -> None:
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
        assert proc.stop() == 0
    # How much goes back depends on which pages other processes map too (this
    # suite's own maps Arrow's): 83 -> 32 MB for this vault run alone, 7 Dec.
    given = re.findall(r"start-up's library pages given back: (\d+) -> (\d+) MB", proc.log)
    assert len(given) == 2, proc.log


# Where the C library is asked for, nothing is spawned: `ctypes.util.find_library`
# runs `ldconfig -p` in a child, which once the front is started is a second
# child of the daemon (tests/daemon_process.py's front_pid counts one).
NO_CHILD = textwrap.dedent("""
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was spawned: {args}")

    subprocess.Popen = refuse
    from memvault_base.resident import release_code_pages
    from memvault_base.secrecy import dumpable
    from memvaultd.index.heap import (fix_thresholds, huge_pages, limit_arenas,
                                      release_arrow_pages, trim_heap)

    huge_pages(False); limit_arenas(); fix_thresholds(); trim_heap()
    fix_thresholds(serving=True); huge_pages(True)
    assert dumpable() is True
    assert release_code_pages() > 0
    release_arrow_pages()
""")


def test_reaching_the_c_library_spawns_no_process() -> None:
    done = subprocess.run([sys.executable, "-c", NO_CHILD], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
