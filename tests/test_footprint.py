"""A vault larger than the memory at hand is refused before it is loaded
(memvaultd/vault/footprint.py): the arithmetic, the figures it reads, and
the real daemon refusing, then loading when told to, under `memory_limit_mb`
and under a real cgroup's memory limit."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from memvault import Client
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.storage.snapshot_body import SnapshotBody, encode_body_parts
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.vault import footprint
from memvaultd.vault.footprint import Available, NotEnoughMemory

from . import memory_cgroup
from .daemon_process import DaemonProcess
from .memory_cgroup import MemoryCgroup, Unavailable

MB = 1024 * 1024


def _fake_proc(root: Path, available_kb: int, cgroup: str = "/user.slice/app.service",
               resident_pages: int = 25_600) -> Path:
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal:       16000000 kB\nMemFree:  100 kB\n"
                                  f"MemAvailable:   {available_kb} kB\nBuffers: 1 kB\n")
    (proc / "self" / "cgroup").write_text(f"0::{cgroup}\n")
    (proc / "self" / "statm").write_text(f"90000 {resident_pages} 3000 1 0 5000 0\n")
    return proc


def _cgroup(root: Path, group: str, limit: str, current: int, inactive_file: int = 0) -> None:
    path = root / "cgroup" / group.lstrip("/")
    path.mkdir(parents=True, exist_ok=True)
    (path / "memory.max").write_text(f"{limit}\n")
    (path / "memory.current").write_text(f"{current}\n")
    (path / "memory.stat").write_text(f"anon {current - inactive_file}\nfile {inactive_file}\n"
                                      f"active_file 0\ninactive_file {inactive_file}\n")


def test_the_least_of_memavailable_the_cgroups_and_the_limit(tmp_path: Path) -> None:
    proc, cgroups = _fake_proc(tmp_path, available_kb=8 * 1024 * 1024), tmp_path / "cgroup"
    assert footprint.available(0, proc, cgroups) == Available(
        8 * 1024 * MB, "MemAvailable in /proc/meminfo")
    # The unit's own limit has 300 MB of room, its slice above 1 GB.
    _cgroup(tmp_path, "/user.slice/app.service", str(500 * MB), 200 * MB)
    _cgroup(tmp_path, "/user.slice", str(2048 * MB), 1024 * MB)
    room = footprint.available(0, proc, cgroups)
    assert room == Available(300 * MB, "the limit memory.max of cgroup /user.slice/app.service")
    _cgroup(tmp_path, "/user.slice/app.service", "max", 200 * MB)  # no limit of its own
    assert footprint.available(0, proc, cgroups) == Available(
        1024 * MB, "the limit memory.max of cgroup /user.slice")
    # memory_limit_mb counts what the daemon holds already (statm: 100 MB).
    room = footprint.available(600, proc, cgroups)
    assert room is not None and room.bytes == 500 * MB
    assert room.source == "memory_limit_mb = 600 less the 100 MB the daemon holds"


def test_inactive_file_pages_are_room_under_a_cgroup_limit(tmp_path: Path) -> None:
    """Page cache is charged to the cgroup that read or wrote it; the kernel
    drops its inactive pages before it ends a process for the limit."""
    proc, cgroups = _fake_proc(tmp_path, available_kb=8 * 1024 * 1024), tmp_path / "cgroup"
    _cgroup(tmp_path, "/user.slice/app.service", str(500 * MB), 450 * MB, inactive_file=150 * MB)
    assert footprint.available(0, proc, cgroups) == Available(
        200 * MB, "the limit memory.max of cgroup /user.slice/app.service")
    (cgroups / "user.slice" / "app.service" / "memory.stat").unlink()  # unreadable: none
    assert footprint.available(0, proc, cgroups) == Available(
        50 * MB, "the limit memory.max of cgroup /user.slice/app.service")


def test_a_version_1_memory_controller_counts_too(tmp_path: Path) -> None:
    """A hybrid hierarchy: version 1's memory controller, version 2 unified."""
    proc, cgroups = _fake_proc(tmp_path, available_kb=8 * 1024 * 1024), tmp_path / "cgroup"
    (proc / "self" / "cgroup").write_text("9:name=systemd:/\n4:memory:/jobs/a1\n1:cpu:/\n0::/\n")
    (cgroups / "unified").mkdir(parents=True)
    _cgroup(tmp_path, "/memory", str(2**63 - 4096), 0)  # the root: no limit
    (cgroups / "memory" / "jobs" / "a1").mkdir(parents=True)
    (cgroups / "memory" / "jobs" / "a1" / "memory.limit_in_bytes").write_text(f"{700 * MB}\n")
    (cgroups / "memory" / "jobs" / "a1" / "memory.usage_in_bytes").write_text(f"{600 * MB}\n")
    assert footprint.available(0, proc, cgroups) == Available(
        100 * MB, "the limit memory.limit_in_bytes of cgroup /jobs/a1")
    # Version 1 counts the group's own pages and its children's apart.
    (cgroups / "memory" / "jobs" / "a1" / "memory.stat").write_text(
        f"cache {90 * MB}\ninactive_file {10 * MB}\ntotal_inactive_file {80 * MB}\n")
    assert footprint.available(0, proc, cgroups) == Available(
        180 * MB, "the limit memory.limit_in_bytes of cgroup /jobs/a1")


def test_nothing_readable_means_no_figure(tmp_path: Path) -> None:
    """As on macOS: no /proc, no cgroup file system."""
    assert footprint.available(0, tmp_path / "no-proc", tmp_path / "no-cgroup") is None
    footprint.check(10**9, None)  # not checked, only logged


def test_a_load_that_needs_more_is_refused_naming_both_figures() -> None:
    room = Available(400 * MB, "MemAvailable in /proc/meminfo")
    footprint.check(400 * MB // footprint.BYTES_PER_MEMORY, room)  # fits exactly
    with pytest.raises(NotEnoughMemory) as refused:
        footprint.check(1_000_000, room)
    need = round(1_000_000 * footprint.BYTES_PER_MEMORY / MB)
    message = str(refused.value)
    assert f"~1,000,000 memories needs ~{need:,} MB" in message
    assert "400 MB available (MemAvailable in /proc/meminfo)" in message
    assert "memory_check = false" in message
    footprint.check(1_000_000, room, enforce=False)  # logged, not refused


def test_the_memories_are_counted_from_the_snapshot_head_and_the_log(tmp_path: Path) -> None:
    dimension = 8
    store = SnapshotStore(tmp_path, bytes(range(32)), bytes(16))
    assert footprint.memories_to_load(store, 40, dimension) == 40  # the log alone
    memories = [Memory(id=f"m{i}", text=f"memory {i} " * 50) for i in range(3000)]
    turns = [Memory(id=f"t{i}", text="a turn") for i in range(5)]
    body = SnapshotBody(100, dimension, Stamp(1, 0, "d"), memories,
                        np.ones((3000, dimension), np.float32), frozenset(), turns,
                        np.ones((5, dimension), np.float32))
    store.write(100, encode_body_parts(body))  # a body of several chunks
    assert footprint.memories_to_load(store, 100, dimension) == 3005
    assert footprint.memories_to_load(store, 130, dimension) == 3035  # 30 records after it
    # A newest snapshot that does not authenticate is passed over, as the load does.
    damaged = tmp_path / f"{200:020d}.snap"
    damaged.write_bytes(b"MVSNP" + bytes(60))
    assert footprint.memories_to_load(store, 230, dimension) == 3135


def _memories(n: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [{"text": f"footprint memory {i}", "topic_key": f"footprint.{i}",
             "vector": vectors[i].tolist()} for i in range(n)]


def test_the_daemon_refuses_a_vault_past_its_memory_limit_then_loads_when_told(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with DaemonProcess(home) as daemon:
        daemon.start()
        with Client(socket=daemon.socket) as client:
            client.remember_batch(_memories(2000))
        assert daemon.stop() == 0
    # 2,000 memories need ~12 MB; the daemon holds far more than 1 MB already.
    (home / "config.toml").write_text("memory_limit_mb = 1\n")
    with DaemonProcess(home) as daemon:
        daemon.start(wait=False)
        assert daemon.proc is not None and daemon.proc.wait(90) == 2
        assert "this vault of ~2,0" in daemon.log
        assert "MB available (memory_limit_mb = 1 less the" in daemon.log
        assert "memory_check = false" in daemon.log
    (home / "config.toml").write_text("memory_limit_mb = 1\nmemory_check = false\n")
    with DaemonProcess(home) as daemon:
        daemon.start()
        assert "loading anyway: memory_check = false" in daemon.log
        with Client(socket=daemon.socket) as client:
            hits = client.recall("footprint memory 7", top_k=3, filter={"topic_key": "footprint.7"})
            assert [hit.memory.text for hit in hits] == ["footprint memory 7"]
        assert daemon.stop() == 0


@pytest.fixture(scope="module")
def cgroups() -> None:
    """Whether a child of the test's own memory cgroup can be made
    (tests/memory_cgroup.py: as root); the tests that need one are skipped
    without, unless MEMVAULT_REQUIRE_CGROUP=1 (scripts/test sets it)."""
    try:
        memory_cgroup.make().remove()
    except Unavailable as why:
        give_up = pytest.fail if os.environ.get("MEMVAULT_REQUIRE_CGROUP") == "1" else pytest.skip
        give_up(f"no cgroup with a memory limit can be made here: {why}")


@pytest.fixture
def cgroup(cgroups: None) -> Iterator[MemoryCgroup]:
    group = memory_cgroup.make()
    yield group
    group.remove()


# What the cgroup test's daemon weighs, measured in its cgroup (version 1 on
# 2 cores): ~200 MB held at the check (197-215 over 5 starts: Python, NumPy,
# the model, the front process; Argon2id's 64 MiB come and go before it),
# ~450 MB at the peak of loading 40,000 memories, ~300 MB serving them.
# 2,000 memories (~13 MB) are lost in that spread: a limit the daemon
# reaches the check under leaves them room or not by chance. 40,000 need
# ~248 MB: 320 MB lets the daemon reach the check with ~100 MB to spare and
# leaves it ~110 MB of room, under half the estimate (and under it still
# with ~90 MB less held, the model not yet loaded); 640 MB leaves ~440 MB,
# over the estimate and over the load's real peak.
CGROUP_MEMORIES = 40_000
REFUSED_LIMIT_MB, STARTED_LIMIT_MB = 320, 640


def _files(data: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `data`: its mode, modification time and digest."""
    return {str(path.relative_to(data)): (path.stat().st_mode, path.stat().st_mtime_ns,
                                          hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(data.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def seeded_home(cgroups: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vault of CGROUP_MEMORIES memories (~30 s to store on 2 cores, up to
    ~110 s when they are busy), stopped, for the tests to start in turn: in place, as a copy
    (another inode) is told apart and claimed as a new device on its first
    start (`copy_mark`)."""
    home = tmp_path_factory.mktemp("cgroup-vault") / "home"
    with DaemonProcess(home) as daemon:
        daemon.start()
        with Client(socket=daemon.socket) as client:
            memories = _memories(CGROUP_MEMORIES)
            for start in range(0, CGROUP_MEMORIES, 5000):
                client.remember_batch(memories[start:start + 5000])
        assert daemon.stop() == 0
    return home


def test_the_daemon_refuses_a_vault_past_its_cgroup_limit_and_starts_under_a_larger_one(
        cgroup: MemoryCgroup, seeded_home: Path) -> None:
    home = seeded_home
    data = home / "data"
    before = _files(data)

    cgroup.set_limit(REFUSED_LIMIT_MB * MB)
    with DaemonProcess(home) as daemon:
        earlier = len(daemon.log)  # the log file is appended to
        daemon.start(wait=False, preexec=cgroup.enter)
        assert daemon.proc is not None and daemon.proc.wait(90) == 2, daemon.log
        log = daemon.log[earlier:]
        need = round(CGROUP_MEMORIES * footprint.BYTES_PER_MEMORY / MB)
        # 40,001 where a test that served the vault ran first: a served start
        # logs a record.
        refused = re.search(rf"this vault of ~40,00\d memories needs ~{need} MB of memory to load "
                            rf"\(~6,500 bytes a memory\); (\d+) MB available \(the limit "
                            rf"{cgroup.limit_file} of cgroup {re.escape(cgroup.name)}\)", log)
        assert refused is not None, log
        # The room is the limit less what the daemon holds, not the limit.
        assert 0 < int(refused[1]) < REFUSED_LIMIT_MB - 50
        assert "memory_check = false" in log
    assert _files(data) == before

    cgroup.set_limit(STARTED_LIMIT_MB * MB)
    with DaemonProcess(home) as daemon:
        earlier = len(daemon.log)  # the log file is appended to
        daemon.start(preexec=cgroup.enter)
        assert daemon.proc is not None
        assert Path(f"/proc/{daemon.proc.pid}/cgroup").read_text().count(cgroup.name) == 1
        assert "needs ~" not in daemon.log[earlier:]
        with Client(socket=daemon.socket) as client:
            assert client.status().memory_count == CGROUP_MEMORIES
            hits = client.recall("footprint memory 7", top_k=3, filter={"topic_key": "footprint.7"})
            assert [hit.memory.text for hit in hits] == ["footprint memory 7"]
        assert daemon.stop() == 0


def _write_page_cache(path: Path, size_mb: int) -> Callable[[], None]:
    """A `preexec` that writes `size_mb` MB to `path` (fsynced: clean pages
    the kernel may drop at once) before the daemon starts, as anything else
    in its cgroup may have, e.g. a container's other processes, or the
    unit's own reads (the model, the log)."""
    block = bytes(range(256)) * 4096  # 1 MB

    def write() -> None:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for _ in range(size_mb):
            os.write(descriptor, block)
        os.fsync(descriptor)
        os.close(descriptor)

    return write


def test_page_cache_under_the_cgroup_limit_counts_as_room(
        tmp_path: Path, cgroup: MemoryCgroup, seeded_home: Path) -> None:
    """The kernel gives file pages back before it ends a process for its
    limit: a cgroup's usage counts them, the room to load in must not."""
    cgroup.set_limit(STARTED_LIMIT_MB * MB)
    # 300 MB of clean file pages charged to the group: counted as held, they
    # would leave ~140 MB of the 640 MB, under the ~248 MB the vault needs.
    written = tmp_path / "written"
    write = _write_page_cache(written, 300)

    def enter_and_write() -> None:
        cgroup.enter()
        write()

    with DaemonProcess(seeded_home) as daemon:
        earlier = len(daemon.log)  # the log file is appended to
        daemon.start(preexec=enter_and_write)
        assert "needs ~" not in daemon.log[earlier:]
        with Client(socket=daemon.socket) as client:
            assert client.status().memory_count == CGROUP_MEMORIES
        assert daemon.stop() == 0
    written.unlink()  # pytest keeps the last runs' directories
