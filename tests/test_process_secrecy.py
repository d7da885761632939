"""Plaintext stays in the daemon: the real daemon and its front are not
dumpable and write no core file, the passphrase leaves the environment, and a
vault sealed before nonces came from the OS per seal still opens.

What is checkable from outside, and how:

- RLIMIT_CORE: `/proc/<pid>/limits` ("Max core file size"), readable by anyone.
- Not dumpable: the kernel has no field for it in `/proc/<pid>/status`; it
  shows in what a process of the same user without CAP_SYS_PTRACE may open:
  `/proc/<pid>/environ` (a ptrace read check) is refused for a process that
  is not dumpable and allowed for one that is. Run as root, the daemon and
  the reader are started with no capabilities (`setpriv`), as a user's own
  processes are.
- The passphrase: `/proc/<pid>/environ` shows the block the kernel copied at
  exec, which `unsetenv` leaves alone; the daemon zeroes the value there too.
  Only a reader allowed past the ptrace check (root here) can look, and
  finds no passphrase; the front never had it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memvault.client import Client

from .daemon_process import PASSPHRASE, DaemonProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

# Today's format, written by the daemon as of the first release of this test
# (two memories, a clean stop: a log segment, a snapshot, a key file under
# PASSPHRASE). It must open with every later release.
OLD_VAULT = Path(__file__).parent / "data" / "vault-format-1"
# Root keeps every capability, and CAP_SYS_PTRACE reads any process: drop them
# all, so the reader and the daemon stand as two processes of one plain user.
NO_CAPS = (["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]
           if os.geteuid() == 0 else [])


def _start_without_caps(daemon: DaemonProcess) -> DaemonProcess:
    log = open(daemon.log_path, "ab")  # noqa: SIM115 - handed to the child
    daemon.proc = subprocess.Popen([*NO_CAPS, sys.executable, "-P", "-m", "memvaultd.app.main"],
                                   env=daemon.env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=log)
    log.close()
    daemon.wait_serving()
    return daemon


def _core_limit(pid: int) -> tuple[str, str]:
    text = Path(f"/proc/{pid}/limits").read_text()
    found = re.search(r"^Max core file size\s+(\S+)\s+(\S+)", text, re.MULTILINE)
    assert found, text
    return found.group(1), found.group(2)


def _readable_by_a_peer(pid: int) -> bool:
    """Whether a process of the same user, without privileges, opens its environ."""
    done = subprocess.run([*NO_CAPS, "cat", f"/proc/{pid}/environ"], capture_output=True,
                          timeout=30)
    return done.returncode == 0


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                    reason="needs setpriv to drop root's capabilities")
def test_the_daemon_and_its_front_are_not_dumpable_and_write_no_core(tmp_path: Path) -> None:
    with _start_without_caps(DaemonProcess(tmp_path / "home")) as daemon:
        assert daemon.proc is not None
        pids = {"daemon": daemon.proc.pid, "front": daemon.front_pid()}
        # The control: an ordinary process of the same user is readable.
        with subprocess.Popen([*NO_CAPS, "sleep", "30"]) as ordinary:
            try:
                deadline = time.monotonic() + 10
                while Path(f"/proc/{ordinary.pid}/comm").read_text().strip() != "sleep":
                    assert time.monotonic() < deadline, "sleep never started"
                    time.sleep(0.01)  # setpriv has not exec'd it yet
                assert _readable_by_a_peer(ordinary.pid), "the check cannot tell"
            finally:
                ordinary.kill()
        for name, pid in pids.items():
            assert _core_limit(pid) == ("0", "0"), name
            assert not _readable_by_a_peer(pid), f"the {name} is dumpable"
        daemon.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="only a privileged reader may look")
def test_the_passphrase_leaves_the_environment_once_used(tmp_path: Path) -> None:
    with DaemonProcess(tmp_path / "home").start() as daemon:
        assert daemon.proc is not None
        assert daemon.env["MEMVAULT_PASSPHRASE"] == PASSPHRASE  # it was given so
        environ = Path(f"/proc/{daemon.proc.pid}/environ").read_bytes()
        assert PASSPHRASE.encode() not in environ
        # Zeroed where it stood; the rest is untouched.
        assert b"MEMVAULT_PASSPHRASE=" + bytes(len(PASSPHRASE)) in environ
        assert f"MEMVAULT_HOME={daemon.home}".encode() in environ
        # The front was started without it.
        front = Path(f"/proc/{daemon.front_pid()}/environ").read_bytes()
        assert b"MEMVAULT_PASSPHRASE" not in front
        # Unlocked: the vault serves without it.
        client = Client(socket=daemon.socket)
        client.remember("the passphrase is no longer needed once unlocked")
        assert client.status().memory_count == 1
        daemon.stop()


def test_a_vault_written_in_format_1_still_opens(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(OLD_VAULT, home / "data")
    for path in [home / "data", *(home / "data").rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    with DaemonProcess(home).start() as daemon:
        client = Client(socket=daemon.socket)
        texts = {memory.text for memory in client.export()}
        assert texts == {"the staging database lives on port 5433",
                         "prefers vitest over jest"}
        hits = client.recall("which port does the staging database use", top_k=1)
        assert hits[0].memory.text == "the staging database lives on port 5433"
        # Written afterwards with per-seal nonces, read back after a restart.
        client.remember("a memory sealed under the new nonces")
        daemon.stop()
        daemon.start()
        assert len(list(Client(socket=daemon.socket).export())) == 3
        daemon.stop()
