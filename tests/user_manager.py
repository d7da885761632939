"""A real systemd user manager for tests: `systemd --user`, a child of the test process.

A machine without systemd as PID 1 and without logind (a container, a CI
runner) starts no user manager on its own, and `systemd --user` refuses two
things there, both worked around for the manager alone:

- "not booted with systemd": it checks for `/run/systemd/system`. The
  manager runs in a mount namespace of its own (`unshare --mount`) with a
  tmpfs on `/run/systemd` that holds that directory; the host never sees it
  (a host that did would have apt's scripts start services through it), only
  an empty `/run/systemd` where there was none, to mount on.
- a cgroup it may create children in: it is started in a cgroup made for it
  under each hierarchy the test process belongs to (cgroup2 and, on a hybrid
  layout, `name=systemd`), removed with its children when it stops.

Everything else is as a user's login has it: `$XDG_RUNTIME_DIR` (outside
/tmp: a unit with `PrivateTmp=yes` must still see it), a home, and
`systemctl --user` talking to the manager's private socket.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SYSTEMD = Path("/lib/systemd/systemd")
_NAMESPACED = ("mkdir -p /run/systemd && mount -t tmpfs -o mode=0755 memvault-test /run/systemd"
               " && mkdir /run/systemd/system && exec \"$0\" --user")


def why_not() -> str | None:
    """Why a user manager cannot be started here, or None if it can."""
    if os.geteuid() != 0:
        return "starting a user manager in a mount namespace of its own needs root"
    if not SYSTEMD.exists() or not (shutil.which("systemctl") and shutil.which("systemd-run")):
        return f"systemd is not installed ({SYSTEMD})"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if not _cgroup_parents():
        return "no writable cgroup hierarchy to start the manager in"
    return None


def _cgroup_parents() -> list[Path]:
    """The directories of this process's cgroups in the hierarchies systemd
    uses: cgroup2 and the `name=systemd` one of a hybrid layout."""
    ours: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        ours[controllers] = path
    parents = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        mount_point = fields.split()[4]
        fs_type, _, options = rest.split()[:3]
        if fs_type == "cgroup2" and "" in ours:
            parents.append(Path(mount_point + ours[""]))
        elif fs_type == "cgroup" and "name=systemd" in options.split(","):
            parents.append(Path(mount_point + ours.get("name=systemd", "/")))
    return [p for p in parents if os.access(p, os.W_OK)]


@dataclass
class UserManager:
    """A manager whose runtime directory and home are under `root` (not in /tmp)."""

    root: Path
    _proc: subprocess.Popen[bytes] | None = None
    _cgroups: list[Path] = field(default_factory=list)

    @property
    def runtime_dir(self) -> Path:
        return self.root / "runtime"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def env(self) -> dict[str, str]:
        """The environment of a shell in this user's login."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MEMVAULT_", "XDG_", "DBUS_"))}
        return env | {"HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime_dir)}

    def start(self, timeout: float = 20.0) -> None:
        self.runtime_dir.mkdir(mode=0o700, parents=True)
        self.home.mkdir(parents=True)
        name = f"memvault-test-{os.getpid()}-{time.monotonic_ns()}"
        self._cgroups = [parent / name for parent in _cgroup_parents()]
        for cgroup in self._cgroups:
            cgroup.mkdir()
        join = "".join(f'echo $$ > "{cgroup}/cgroup.procs" && ' for cgroup in self._cgroups)
        env = {"HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime_dir),
               "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        log = self.root / "manager.log"
        with log.open("wb") as output:
            self._proc = subprocess.Popen(
                ["sh", "-c", f"{join}exec unshare --mount --propagation private sh -c "
                             f"'{_NAMESPACED}' {SYSTEMD}"],
                env=env, stdout=output, stderr=output, start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.systemctl("show-environment").returncode != 0:
            if self._proc.poll() is not None:
                raise RuntimeError(f"systemd --user exited with {self._proc.returncode}: "
                                   f"{log.read_text(errors='replace').strip()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"systemd --user did not answer within {timeout:.0f} s")
            time.sleep(0.1)

    def systemctl(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["systemctl", "--user", "--no-pager", *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def show(self, unit: str, *properties: str) -> dict[str, str]:
        done = self.systemctl("show", unit, *(f"--property={p}" for p in properties))
        return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)

    def stop(self) -> None:
        """Stop the manager (it stops its units first), then remove its cgroups."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
        for cgroup in self._cgroups:
            for directory, _, _ in sorted(os.walk(cgroup), key=lambda w: -len(w[0])):
                with contextlib.suppress(OSError):  # still in use: left to the host
                    os.rmdir(directory)
        shutil.rmtree(self.root, ignore_errors=True)
