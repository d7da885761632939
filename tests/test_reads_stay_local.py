"""The remote does not learn when the user reads: recalls, through the real
CLI, make no write on a real memvault-server on loopback, at the worker's own
pace or at `sync now`; their access marks count on the device all the same."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon_process import DaemonProcess
from .server_process import ServerProcess
from .test_cli import memvault
from .test_sync_cli import _init

# The daemon logs access marks once a second (vault/access.py); its sync
# worker looks every 30 s and at once after a local write.
_FLUSH_S = 1.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "server").start()
    yield proc
    proc.stop()


def _stored(server: ServerProcess) -> dict[str, int]:
    """Every file the server keeps, with its size."""
    return {str(path.relative_to(server.data_dir)): path.stat().st_size
            for path in server.data_dir.rglob("*") if path.is_file()}


def _sync_status(home: Path) -> dict[str, object]:
    done = memvault(home, "sync", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_recalls_write_nothing_to_the_remote(tmp_path: Path, server: ServerProcess) -> None:
    with DaemonProcess(tmp_path / "a").start() as daemon:
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
