"""`memvault init`, `join` and `sync now|status|leave|move` as users type them:
the real CLI, real daemons, a real memvault-server on loopback, the real model."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .test_cli import memvault

SYNC_S = 30.0


def _token(server: ServerProcess, device: str) -> str:
    """A token of the one user every device of these tests belongs to."""
    return create_token(server.data_dir, device, account="user")


def _init(home: Path, server: ServerProcess) -> tuple[str, str]:
    """`memvault init` against `server`; (remote URL, recovery key)."""
    remote = f"grpc://{server.target}"
    done = memvault(home, "init", "--remote", remote, "--token", _token(server, home.name),
                    "--json")
    assert done.returncode == 0, done.stderr
    return remote, json.loads(done.stdout)["recovery_key"]


def test_sync_now_with_the_server_down_names_the_remote_not_the_daemon(
        tmp_path: Path, server: ServerProcess) -> None:
    with DaemonProcess(tmp_path / "a").start() as daemon:
        home = daemon.home
        dead = "grpc://127.0.0.1:1"  # nothing listens on port 1
        done = memvault(home, "init", "--remote", dead, "--token", "t")
        assert done.returncode == 3, done.stderr
        assert f"the sync remote {dead} is unreachable" in done.stderr, done.stderr
        assert not json.loads(memvault(home, "sync", "status", "--json").stdout)["configured"]
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
        # Read at once: the failed `sync now` is what records the outage, not
        # the worker's next round (up to 30 s later, on its timer).
        offline = json.loads(memvault(home, "sync", "status", "--json").stdout)
        assert offline["state"] == "offline", offline
        assert offline["last_error"], offline
        done = memvault(home, "sync", "status")
        _readable(done.stdout)
        assert re.search(r"state\s+offline", done.stdout), done.stdout
        assert "last error" in done.stdout, done.stdout
        daemon.stop()


def _remember(home: Path, text: str) -> str:
    done = memvault(home, "remember", text, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def _holds(home: Path, ids: list[str]) -> bool:
    return all(memvault(home, "get", memory_id).returncode == 0 for memory_id in ids)


def _eventually_holds(home: Path, ids: list[str]) -> None:
    deadline = time.monotonic() + SYNC_S
    while not _holds(home, ids):
        assert time.monotonic() < deadline, f"{home.name} lacks some of {ids}"
        time.sleep(0.2)


def _configured(home: Path) -> bool:
    return bool(json.loads(memvault(home, "sync", "status", "--json").stdout)["configured"])


def test_leave_keeps_the_vault_and_the_remote_and_init_or_join_follow(
        tmp_path: Path, server: ServerProcess) -> None:
    with DaemonProcess(tmp_path / "a").start() as a, DaemonProcess(tmp_path / "b").start() as b:
        home = a.home
        # Bad input changes nothing and says what is wrong.
        for args in (("sync", "leave"), ("sync", "move", "--remote", "file:///tmp/x")):
            done = memvault(home, *args)
            assert done.returncode == 2, done.stderr
            assert "sync is not set up" in done.stderr and "Traceback" not in done.stderr
        assert not _configured(home)
        before = _remember(home, "the laptop knew this before sync")
        remote, key = _init(home, server)
        again = memvault(home, "init", "--remote", remote)
        assert again.returncode == 2 and "sync leave" in again.stderr, again.stderr
        same = memvault(home, "sync", "move", "--remote", remote)
        assert same.returncode == 2 and "already syncs to" in same.stderr, same.stderr
        assert _configured(home)

        pushed = _remember(home, "pushed before leaving")
        assert memvault(home, "sync", "now").returncode == 0
        left = memvault(home, "sync", "leave")
        assert left.returncode == 0, left.stderr
        assert remote in left.stdout and "Every memory stays here" in left.stdout
        _readable(left.stdout)
        assert not _configured(home)
        after = _remember(home, "written after leaving")
        a.stop()
        a.start()
        assert not _configured(home), "leave holds across a restart"
        assert _holds(home, [before, pushed, after])

        # The remote still holds the vault: another device joins it.
        token = _token(server, "b")
        joined = memvault(b.home, "join", "--remote", remote, "--token", token,
                          "--recovery-key", key)
        assert joined.returncode == 0, joined.stderr
        _eventually_holds(b.home, [before, pushed])
        assert not _holds(b.home, [after]), "a vault that left pushes nothing"

        # This device joins it again, keeping what it wrote meanwhile.
        token = _token(server, "a-again")
        rejoined = memvault(home, "join", "--remote", remote, "--token", token,
                            "--recovery-key", key)
        assert rejoined.returncode == 0, rejoined.stderr
        _eventually_holds(b.home, [after])
        a.stop()
        b.stop()


def test_move_takes_every_memory_to_a_new_remote_and_others_follow_by_join(
        tmp_path: Path, server: ServerProcess) -> None:
    with ServerProcess(tmp_path / "server2") as second, \
            DaemonProcess(tmp_path / "a").start() as a, \
            DaemonProcess(tmp_path / "b").start() as b:
        second.start()
        old, old_key = _init(a.home, server)
        mine = _remember(a.home, "the laptop's note")
        assert memvault(b.home, "join", "--remote", old, "--token",
                        _token(server, "b"), "--recovery-key",
                        old_key).returncode == 0
        theirs = _remember(b.home, "the desktop's note")
        _eventually_holds(a.home, [mine, theirs])

        new = f"grpc://{second.target}"
        moved = memvault(a.home, "sync", "move", "--remote", new, "--token",
                         _token(second, "a"), "--json")
        assert moved.returncode == 0, moved.stderr
        new_key = json.loads(moved.stdout)["recovery_key"]
        assert new_key != old_key
        assert json.loads(memvault(a.home, "sync", "status", "--json").stdout)["remote"] == new
        moved_after = _remember(a.home, "written after the move")
        assert memvault(a.home, "sync", "now").returncode == 0

        # B still syncs to the old remote, which hears nothing more from A.
        assert memvault(b.home, "sync", "now").returncode == 0
        assert not _holds(b.home, [moved_after])
        late = _remember(b.home, "written on the old remote after the move")
        # B follows: leave, then join the new remote; nothing of B's is lost.
        assert memvault(b.home, "sync", "leave").returncode == 0
        joined = memvault(b.home, "join", "--remote", new, "--token",
                          _token(second, "b"), "--recovery-key", new_key)
        assert joined.returncode == 0, joined.stderr
        _eventually_holds(b.home, [mine, theirs, moved_after, late])
        _eventually_holds(a.home, [late])
        a.stop()
        b.stop()
