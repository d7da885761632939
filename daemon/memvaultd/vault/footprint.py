"""What loading the vault will take in memory, against what the machine gives.

Every decrypted memory is held in RAM and nothing decrypted is written to
disk, so a vault larger than the memory at hand can only be loaded into
swap (decrypted pages on the swap device) or until the OOM killer ends the
daemon, and the next start does the same. Before the load the daemon
weighs it instead (docs/architecture.md, "What a vault costs in memory"):

- the memories: the vectors of the newest snapshot (its body's length less
  its meta's, over 4 x dimension bytes: only its first chunk is decrypted,
  ~5 ms) plus one for each log record after it (a record is one operation,
  so this is at most what the log adds);
- at `BYTES_PER_MEMORY` each;
- against the memory available: `MemAvailable` in /proc/meminfo, the room
  left under each cgroup's limit (memory.max less memory.current, or
  version 1's memory.limit_in_bytes less memory.usage_in_bytes, from the
  daemon's cgroup up: a systemd unit's `MemoryMax=`, a container's limit;
  the inactive file pages in memory.stat count as room, as MemAvailable
  counts the page cache the kernel can drop), and `memory_limit_mb`
  (config.toml) less what the daemon holds already: the least of them.

A load that needs more is refused with `NotEnoughMemory` (exit status 2,
which a systemd unit does not restart) unless `memory_check = false`, when
it is logged and the load goes on. Where none of the figures can be read
(macOS has no /proc) nothing is checked, and the log says so.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from memvault_base.errors import IntegrityError, ResourceExhausted
from memvaultd.storage.snapshot_body import vector_rows
from memvaultd.storage.snapshots import SnapshotStore

log = logging.getLogger("memvaultd.vault")

# Resident bytes a memory takes at the load's peak, measured at 100k
# memories with `scripts/bench_recall.py` (docs/benchmarks.md): 905-1,052
# MB right after loading, less the ~370 MB the process holds before it
# (Python, NumPy, the model, the front process): 5,400-6,800 B a memory, the
# decrypted body and the parse's temporaries included; serving settles at
# ~4,700 (the records, the keyword postings, the float16 matrix and the
# 8-bit codes). The benchmark's memories have a term of their own each (its
# worst case for the keyword index); real ones weigh less.
BYTES_PER_MEMORY = 6_500
_MB = 1024 * 1024


class NotEnoughMemory(ResourceExhausted):
    """The vault needs more memory to load than this machine (or its limit) has
    available: free memory, raise the limit, or set `memory_check = false`."""


@dataclass(frozen=True)
class Available:
    """The bytes a load may take, and which figure set them."""

    bytes: int
    source: str


def memories_to_load(store: SnapshotStore, last_seq: int, dimension: int) -> int:
    """The memories (and turns) a load will hold: the newest snapshot that
    authenticates, plus a memory per log record after it."""
    for seq, _ in reversed(store.files()):
        try:
            body_len, head = store.head(seq)
            return vector_rows(body_len, head, dimension) + max(0, last_seq - seq)
        except IntegrityError:
            continue  # the load passes over it too, to an older one
    return last_seq


def available(limit_mb: float = 0, proc: Path = Path("/proc"),
              cgroups: Path = Path("/sys/fs/cgroup")) -> Available | None:
    """The least of MemAvailable, the room under each cgroup's memory.max
    from the daemon's own up, and `limit_mb` (0: none) less the daemon's
    resident size; None where none of them can be read."""
    found: list[Available] = []
    meminfo = _meminfo(proc / "meminfo")
    if meminfo is not None:
        found.append(Available(meminfo, "MemAvailable in /proc/meminfo"))
    found.extend(_cgroup_room(proc / "self" / "cgroup", cgroups))
    if limit_mb > 0:
        held = _resident(proc / "self" / "statm")
        found.append(Available(max(0, int(limit_mb * _MB) - held),
                               f"memory_limit_mb = {limit_mb:g} less the {held // _MB} MB "
                               "the daemon holds"))
    return min(found, key=lambda room: room.bytes) if found else None


def check(memories: int, room: Available | None, enforce: bool = True) -> None:
    """Refuse (`NotEnoughMemory`) a load of `memories` that needs more than
    `room`; with `enforce` off, only log it."""
    if room is None:
        log.info("memory available unknown on this system: the load of ~%d memories is not "
                 "checked against it", memories)
        return
    need = memories * BYTES_PER_MEMORY
    if need <= room.bytes:
        return
    message = (f"this vault of ~{memories:,} memories needs ~{_in_mb(need)} of memory to load "
               f"(~{BYTES_PER_MEMORY:,} bytes a memory); {_in_mb(room.bytes)} available "
               f"({room.source}). Free memory or raise the limit, or set memory_check = false "
               "in config.toml to load it anyway (it may then swap or be ended by the "
               "out-of-memory killer)")
    if enforce:
        raise NotEnoughMemory(message)
    log.warning("%s; loading anyway: memory_check = false", message)


def _in_mb(size: int) -> str:
    return f"{size / _MB:,.0f} MB"


def _meminfo(path: Path) -> int | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(":")
            if name == "MemAvailable":
                return int(value.split()[0]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


# The limit and the usage files of a cgroup, version 2 and version 1, and
# memory.stat's count of the inactive file pages in it and below it.
_V2 = ("memory.max", "memory.current", "inactive_file")
_V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
_NO_V1_LIMIT = 2**60  # version 1 writes "no limit" as the largest page multiple


def _cgroup_room(membership: Path, root: Path) -> list[Available]:
    """The room under the memory limit of the daemon's cgroup and of each
    above it: version 2 (the "0::" line; under `unified` on a hybrid
    system) and version 1's memory controller."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return []
    rooms = []
    for line in lines:
        controllers, _, name = line.partition(":")[2].partition(":")
        if not controllers:
            base, files = (root / "unified" if (root / "unified").is_dir() else root), _V2
        elif "memory" in controllers.split(","):
            base, files = root / "memory", _V1
        else:
            continue
        group = base / name.strip().lstrip("/")
        while group.is_relative_to(base):
            room = _room_under(group, *files)
            if room is not None:
                rooms.append(Available(room, f"the limit {files[0]} of cgroup "
                                             f"/{group.relative_to(base)}"))
            group = group.parent
    return rooms


def _room_under(group: Path, limit_file: str, usage_file: str, inactive_file: str
                ) -> int | None:
    """The limit less the usage, which counts the page cache the group's
    processes read or wrote: the kernel drops its inactive pages before it
    ends a process for the limit. Counted as used, 300 MB written in the
    daemon's cgroup (a container's other processes; the daemon's own reads
    of the model and the log) leave a 40,000-memory vault (~248 MB) ~140 MB
    of a 640 MB limit that it loads and serves under (tests/test_footprint.py)."""
    try:
        limit = int((group / limit_file).read_text())  # "max" (no limit) is no number
        if limit >= _NO_V1_LIMIT:
            return None
        used = int((group / usage_file).read_text())
    except (OSError, ValueError):
        return None
    return max(0, limit - used + _stat(group / "memory.stat", inactive_file))


def _stat(path: Path, key: str) -> int:
    """`key`'s count in a memory.stat file; 0 where it cannot be read."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0


def _resident(statm: Path) -> int:
    try:
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
