"""`memvault init`, `join` and `sync now|status|leave|move` as users type them:
the real CLI, real daemons, a real memvault-server on loopback, the real model."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .test_cli import memvault

SYNC_S = 30.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "server").start()
    yield proc
    proc.stop()


def _init(home: Path, server: ServerProcess) -> tuple[str, str]:
    """`memvault init` against `server`; (remote URL, recovery key)."""
    remote = f"grpc://{server.target}"
    done = memvault(home, "init", "--remote", remote, "--token",
                    create_token(server.data_dir, home.name), "--json")
    assert done.returncode == 0, done.stderr
    return remote, json.loads(done.stdout)["recovery_key"]


def _eventually_state(home: Path, state: str) -> dict[str, object]:
    deadline = time.monotonic() + SYNC_S
    while True:
        info = json.loads(memvault(home, "sync", "status", "--json").stdout)
        if info["state"] == state or time.monotonic() > deadline:
            return info  # type: ignore[no-any-return]
        time.sleep(0.2)


def test_sync_now_with_the_server_down_names_the_remote_not_the_daemon(
        tmp_path: Path, server: ServerProcess) -> None:
    with DaemonProcess(tmp_path / "a").start() as daemon:
        home = daemon.home
        remote, _ = _init(home, server)
        server.stop()
        done = memvault(home, "sync", "now")
        assert done.returncode == 3, done.stderr
        assert "daemon is not running" not in done.stderr, done.stderr
        assert f"the sync remote {remote} is unreachable" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        # The daemon is fine, and says so.
        assert memvault(home, "status", "--json").returncode == 0
        daemon.stop()


_EPOCH = re.compile(r"\b1\d{9}\.\d+")


def _readable(text: str) -> None:
    """Labels and times as people read them, within 80 columns."""
    assert "configured" not in text and "True" not in text and "pushed_seq" not in text, text
    assert not _EPOCH.search(text), text
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_sync_status_and_now_read_as_people_read(tmp_path: Path, server: ServerProcess) -> None:
    with DaemonProcess(tmp_path / "a").start() as daemon:
        home = daemon.home
        unset = memvault(home, "sync", "status")
        assert unset.returncode == 0 and "not set up" in unset.stdout, unset.stdout
        remote, _ = _init(home, server)
        assert memvault(home, "remember", "the deploy window is friday").returncode == 0
        for args in (("sync", "now"), ("sync", "status")):
            done = memvault(home, *args)
            assert done.returncode == 0, done.stderr
            _readable(done.stdout)
            assert re.search(r"last push\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \((just now|"
                             r"\d+ seconds? ago)\)", done.stdout), done.stdout
            assert re.search(r"remote\s+" + re.escape(remote), done.stdout), done.stdout
            assert re.search(r"pending\s+nothing to push", done.stdout), done.stdout
        # JSON keeps the wire's fields: epoch seconds, as scripts read them.
        info = json.loads(memvault(home, "sync", "status", "--json").stdout)
        assert info["configured"] is True and isinstance(info["last_push"], float)
        assert info["last_push"] > 1.7e9 and info["remote"] == remote
        server.stop()
        assert memvault(home, "sync", "now").returncode == 3
        offline = _eventually_state(home, "offline")
        assert offline["state"] == "offline", offline
        done = memvault(home, "sync", "status")
        _readable(done.stdout)
        assert re.search(r"state\s+offline", done.stdout), done.stdout
        assert "last error" in done.stdout, done.stdout
        daemon.stop()
