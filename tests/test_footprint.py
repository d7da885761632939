"""A vault larger than the memory at hand is refused before it is loaded
(memvaultd/vault/footprint.py): the arithmetic, the figures it reads, and
the real daemon refusing, then loading when told to."""

from __future__ import annotations

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

from .daemon_process import DaemonProcess

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


def _cgroup(root: Path, group: str, limit: str, current: int) -> None:
    path = root / "cgroup" / group.lstrip("/")
    path.mkdir(parents=True, exist_ok=True)
    (path / "memory.max").write_text(f"{limit}\n")
    (path / "memory.current").write_text(f"{current}\n")


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
