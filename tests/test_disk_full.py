"""The daemon's data directory on a full disk (a 4 MiB tmpfs).

`Remember` must fail with RESOURCE_EXHAUSTED once the disk is full, whether
the append's write runs out of blocks or the log cannot even create its next
segment (no inode left); everything acknowledged before stays readable by
`Get` and `Recall`; the daemon keeps serving; once a filler file is deleted,
writes succeed again, and a restart finds every acknowledged memory (no half
record was left in the log).

Mounting needs root: as another user the test is skipped.
"""

from __future__ import annotations

import errno
import itertools
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault import Client
from memvault_base.errors import ResourceExhausted

from .daemon_process import DaemonProcess

TMPFS_BYTES = 4 * 1024 * 1024
TMPFS_INODES = 400
# A full page can leave room in the open segment's last block: a few more
# records may fit before the first refusal.
MAX_APPENDS_TO_FULL = 40

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a small tmpfs for the data directory needs root")


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},nr_inodes={TMPFS_INODES},mode=0700",
         "tmpfs", str(home)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root and mount(8)): {done.stderr.strip()}")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def _fill_blocks(path: Path) -> int:
    """Write `path` until the filesystem has not one byte left; its size."""
    written = 0
    with open(path, "wb", buffering=0) as out:
        for chunk in (1 << 16, 1 << 12, 1 << 8, 1):
            block = b"\xa5" * chunk
            while True:
                try:
                    written += out.write(block) or 0
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return written


def _fill_inodes(directory: Path) -> int:
    """Create empty files in `directory` until no inode is left; how many."""
    directory.mkdir()
    count = 0
    while True:
        try:
            (directory / f"{count}").touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            return count
        count += 1


def _remember(client: Client, n: int) -> tuple[str, str]:
    text = f"disk-full note {n}: the {['otter', 'heron', 'badger', 'lynx'][n % 4]} " \
           f"number {n} likes {n * 7919 % 1000} pebbles"
    return client.remember(text, topic=f"disk.n{n}").id, text


def _all_readable(client: Client, acknowledged: dict[str, str]) -> None:
    for memory_id, text in acknowledged.items():
        assert client.get(memory_id).text == text
    for memory_id, text in list(acknowledged.items())[::5]:
        hits = client.recall(text, top_k=5)
        assert memory_id in {hit.memory.id for hit in hits}, text


def test_full_disk_refuses_writes_keeps_reads_and_recovers(small_home: Path) -> None:
    acknowledged: dict[str, str] = {}
    numbers = itertools.count()
    with DaemonProcess(small_home).start() as daemon:
        client = Client(socket=daemon.socket)
        for _ in range(20):
            memory_id, text = _remember(client, next(numbers))
            acknowledged[memory_id] = text

        # 1. No block left: the append's write fails.
        filler = small_home / "filler"
        assert _fill_blocks(filler) > 0
        refused = None
        for _ in range(MAX_APPENDS_TO_FULL):
            try:
                memory_id, text = _remember(client, next(numbers))
            except ResourceExhausted as exc:
                refused = exc
                break
            acknowledged[memory_id] = text  # it fitted in a page already held
        assert refused is not None, f"{MAX_APPENDS_TO_FULL} remembers after the disk filled up"
        assert "full" in str(refused) or "space" in str(refused), refused
        # The failed append closed its segment: the next ones start a new one.
        for _ in range(3):
            with pytest.raises(ResourceExhausted):
                _remember(client, next(numbers))
        with pytest.raises(ResourceExhausted):
            client.remember_batch([{"text": "a batch on a full disk", "topic": "disk.batch"}])
        some_id = next(iter(acknowledged))
        with pytest.raises(ResourceExhausted):
            client.update(some_id, category="never-written")
        with pytest.raises(ResourceExhausted):
            client.forget(some_id)
        assert daemon.health() == "SERVING"
        _all_readable(client, acknowledged)
        assert client.get(some_id).category == ""

        # 2. Space again: writes succeed and read back.
        filler.unlink()
        for _ in range(3):
            memory_id, text = _remember(client, next(numbers))
            acknowledged[memory_id] = text
        client.update(some_id, category="written-after-freeing")
        _all_readable(client, acknowledged)
        client.close()
        assert daemon.stop() == 0, daemon.log

    # 3. A fresh start (no segment open yet) on a disk without a free inode:
    #    creating the log's next segment fails.
    with DaemonProcess(small_home).start() as daemon:
        client = Client(socket=daemon.socket)
        _all_readable(client, acknowledged)
        assert client.status().memory_count == len(acknowledged), "a refused write was kept"
        assert client.get(some_id).category == "written-after-freeing"
        assert _fill_inodes(small_home / "inodes") > 0
        for _ in range(2):
            with pytest.raises(ResourceExhausted):
                _remember(client, next(numbers))
        assert daemon.health() == "SERVING"
        _all_readable(client, acknowledged)
        subprocess.run(["rm", "-rf", str(small_home / "inodes")], check=True)
        memory_id, text = _remember(client, next(numbers))
        acknowledged[memory_id] = text
        _all_readable(client, acknowledged)
        client.close()
        assert daemon.stop() == 0, daemon.log


def test_access_marks_and_stop_on_a_full_disk_fail_quietly(small_home: Path) -> None:
    with DaemonProcess(small_home).start() as daemon:
        client = Client(socket=daemon.socket)
        acknowledged = dict(_remember(client, n) for n in range(5))
        _fill_blocks(small_home / "filler")
        for n in range(5, 5 + MAX_APPENDS_TO_FULL):
            try:
                memory_id, text = _remember(client, n)
            except ResourceExhausted:
                break
            acknowledged[memory_id] = text
        _all_readable(client, acknowledged)  # recall marks accesses: a log append
        # The access flush runs every second; give it a few rounds (no timing is asserted).
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and "Traceback" not in daemon.log:
            time.sleep(0.2)
        assert daemon.health() == "SERVING"
        client.close()
        code = daemon.stop()
        assert "Traceback" not in daemon.log, daemon.log
        assert code == 0, daemon.log
