"""The remote does not learn when the user reads: recalls, through the real
CLI, make no write on a real memvault-server on loopback, at the worker's own
pace or at `sync now`, within a period of the access marks' schedule; the
marks count on the device all the same, and reach the other devices with
the next write or at the next period, so that heat and the forgetting
sweep there count them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .daemon_process import DaemonProcess
from .server_process import ServerProcess
from .test_cli import memvault
from .test_sync_cli import _init, _token

# The daemon logs access marks once a second (vault/access.py); its sync
# worker looks every 30 s and at once after a local write.
_FLUSH_S = 1.0


def _stored(server: ServerProcess) -> dict[str, int]:
    """Every file the server keeps, with its size."""
    return {str(path.relative_to(server.data_dir)): path.stat().st_size
            for path in server.data_dir.rglob("*") if path.is_file()}


def _sync_status(home: Path) -> dict[str, object]:
    done = memvault(home, "sync", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _device(home: Path, marks_every_hours: float) -> DaemonProcess:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f"access_marks_every_hours = {marks_every_hours}\n")
    return DaemonProcess(home)


def _access_count(home: Path, memory_id: str) -> int:
    done = memvault(home, "get", memory_id, "--json")
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["access_count"])


def _recall(home: Path, memory_id: str, times: int) -> None:
    for n in range(times):
        done = memvault(home, "recall", f"staging database port {n}", "--top-k", "10", "--json")
        assert done.returncode == 0 and memory_id in done.stdout, done.stderr


def _sync(*homes: Path) -> None:
    """`sync now` on each device, in this order."""
    for home in homes:
        done = memvault(home, "sync", "now")
        assert done.returncode == 0, done.stderr


# A period of a million hours: the test never meets the schedule's next
# period, so every push in it is one a write made.
_NEVER_H = 1_000_000


def test_recalls_write_nothing_to_the_remote(tmp_path: Path, server: ServerProcess) -> None:
    with _device(tmp_path / "a", _NEVER_H).start() as daemon:
        home = daemon.home
        _init(home, server)
        done = memvault(home, "remember", "the staging database lives on port 5433", "--json")
        assert done.returncode == 0, done.stderr
        memory_id = json.loads(done.stdout)["id"]
        assert memvault(home, "sync", "now").returncode == 0
        before = _stored(server)
        versions = [name for name in before if "/versions/" in name]
        assert versions, before
        for query in ("which port does staging use", "the staging database", "port 5433"):
            done = memvault(home, "recall", query, "--top-k", "10", "--json")
            assert done.returncode == 0 and memory_id in done.stdout, done.stderr
        time.sleep(3 * _FLUSH_S)  # the marks are in the local log now
        assert memvault(home, "sync", "now").returncode == 0
        assert _stored(server) == before, "a recall reached the remote"
        status = _sync_status(home)
        assert status["pending"] == 0 and status["state"] == "idle", status
        # Counted here all the same.
        shown = json.loads(memvault(home, "get", memory_id, "--json").stdout)
        assert shown["access_count"] == 3, shown
        # A write still travels at once.
        assert memvault(home, "remember", "prefers vitest over jest").returncode == 0
        assert memvault(home, "sync", "now").returncode == 0
        after = _stored(server)
        new = [name for name in after if name not in before]
        assert len(new) == 1 and "/versions/" in new[0], new
        daemon.stop()


def test_the_marks_reach_the_other_devices_with_a_write_or_at_the_next_period(
        tmp_path: Path, server: ServerProcess) -> None:
    # b's schedule has a one-second period: its marks go out at the next.
    with _device(tmp_path / "a", _NEVER_H).start() as a, \
            _device(tmp_path / "b", 1 / 3600).start() as b:
        remote, key = _init(a.home, server)
        done = memvault(a.home, "remember", "the staging database lives on port 5433", "--json")
        memory_id = json.loads(done.stdout)["id"]
        assert memvault(a.home, "sync", "now").returncode == 0
        joined = memvault(b.home, "join", "--remote", remote, "--token", _token(server, "b"),
                          "--recovery-key", key)
        assert joined.returncode == 0, joined.stderr
        assert _access_count(b.home, memory_id) == 0

        # a's recalls wait for a write, which carries them.
        _recall(a.home, memory_id, 2)
        time.sleep(3 * _FLUSH_S)
        _sync(a.home, b.home)
        assert _access_count(b.home, memory_id) == 0
        assert memvault(a.home, "remember", "prefers vitest over jest").returncode == 0
        _sync(a.home, b.home)
        assert _access_count(b.home, memory_id) == 2

        # b's recall goes out alone once its period is over.
        _recall(b.home, memory_id, 1)
        time.sleep(3 * _FLUSH_S)
        _sync(b.home, a.home)
        assert _access_count(a.home, memory_id) == 3
        a.stop()
        b.stop()
