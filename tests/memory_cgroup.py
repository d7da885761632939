"""A real cgroup with a memory limit, for a test daemon to run under.

A child is made under the test's own memory cgroup: in version 1's memory
controller (a hybrid hierarchy) or in version 2, where the parent must
hand the memory controller down (`cgroup.subtree_control`), which version 2
allows only in a group that holds no process of its own, or the root. A
process is moved into the child by `enter`, as a `preexec_fn`: after the
fork and before the exec, so everything the daemon allocates is charged
there (version 1 does not move what a process held before it moved).

Making a cgroup takes root or a delegated subtree; where it cannot be made,
`Unavailable` says why.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


class Unavailable(Exception):
    """No cgroup with a memory limit can be made here."""


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    name: str  # as the processes in it read it in /proc/self/cgroup
    limit_file: str  # "memory.limit_in_bytes" (version 1) or "memory.max"

    def set_limit(self, limit: int) -> None:
        (self.path / self.limit_file).write_text(str(limit))

    def enter(self) -> None:
        """Move the calling process into this group (a `preexec_fn`)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self, timeout: float = 10.0) -> None:
        """rmdir once the group is empty: a process that has exited leaves
        it only once its parent has reaped it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def make(limit: int = 0, membership: Path = Path("/proc/self/cgroup"),
         root: Path = Path("/sys/fs/cgroup")) -> MemoryCgroup:
    """A new child of this process's memory cgroup, limited to `limit`
    bytes (0: not yet); `remove` it once its processes have ended."""
    base, parent, limit_file = _own_memory_cgroup(membership, root)
    name = f"memvault-test-{uuid.uuid4().hex[:12]}"
    path = base / parent.lstrip("/") / name
    try:
        path.mkdir()
    except OSError as exc:
        raise Unavailable(f"cannot make a cgroup under {path.parent}: {exc}") from exc
    group = MemoryCgroup(path, f"{parent.rstrip('/')}/{name}", limit_file)
    try:
        if limit:
            group.set_limit(limit)
    except OSError as exc:
        group.remove()
        raise Unavailable(f"cannot write {path / limit_file}: {exc}") from exc
    return group


def _own_memory_cgroup(membership: Path, root: Path) -> tuple[Path, str, str]:
    """Where this process's memory cgroup is mounted, its name, and its limit file."""
    try:
        lines = membership.read_text().splitlines()
    except OSError as exc:
        raise Unavailable(f"no cgroups: {exc}") from exc
    unified = None
    for line in lines:
        _, controllers, name = line.split(":", 2)
        if "memory" in controllers.split(","):
            if not (root / "memory" / "memory.limit_in_bytes").exists():
                raise Unavailable(f"version 1's memory controller is not at {root / 'memory'}")
            return root / "memory", name, "memory.limit_in_bytes"
        if controllers == "":
            unified = name
    if unified is None:
        raise Unavailable(f"no memory controller in {membership}")
    base = root if (root / "cgroup.controllers").exists() else root / "unified"
    group = base / unified.lstrip("/")
    try:
        if "memory" not in (group / "cgroup.controllers").read_text().split():
            raise Unavailable(f"cgroup {unified} has no memory controller "
                              f"({group / 'cgroup.controllers'})")
        if "memory" not in (group / "cgroup.subtree_control").read_text().split():
            (group / "cgroup.subtree_control").write_text("+memory")
    except OSError as exc:
        # EBUSY: version 2 hands a controller down only from a group with no
        # process of its own.
        raise Unavailable(f"cannot hand the memory controller down from cgroup {unified}: "
                          f"{exc}") from exc
    return base, unified, "memory.max"
