"""Forks and freezes caught where two views meet: `memvault sync verify`
(fingerprints compared between devices) and the silent devices of `sync
status`. Real daemons, a real memvault-server on loopback whose disk the
tests edit to fork or freeze one device's view, the real CLI."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .test_cli import memvault
from .test_sync_cli import _eventually_holds, _init, _remember, _token

EXIT_FORKED = 5
# 0.003 h: 10.8 s, so that a test waits seconds, not days, for a frozen view,
# yet a device that wrote just now is not silent on a loaded machine.
FREEZE_CONFIG = "freeze_bound_hours = 0.003\n"
FREEZE_S = 10.8


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "server").start()
    yield proc
    proc.stop()


def _verify(home: Path, *other: str) -> dict[str, object]:
    done = memvault(home, "sync", "verify", *other, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _now(home: Path) -> None:
    done = memvault(home, "sync", "now")
    assert done.returncode == 0, done.stderr


def _join(home: Path, server: ServerProcess, remote: str, key: str) -> None:
    joined = memvault(home, "join", "--remote", remote, "--token", _token(server, home.name),
                      "--recovery-key", key)
    assert joined.returncode == 0, joined.stderr


def _daemon(tmp_path: Path, name: str, config: str = "") -> DaemonProcess:
    home = tmp_path / name
    home.mkdir()
    if config:
        (home / "config.toml").write_text(config)
    return DaemonProcess(home)


def _hide_newest_version(server: ServerProcess) -> ServerProcess:
    """The server, restarted on its port, without its newest version: from
    now on it shows the devices that did not see that version a history
    without it (the server caches heads, hence the restart)."""
    target = server.target
    server.stop()
    newest = max(server.data_dir.rglob("versions/*"), key=lambda path: int(path.name))
    newest.rename(server.data_dir / "hidden-version")
    return ServerProcess(server.data_dir, "--listen", target).start()


def test_two_devices_agree_even_when_one_is_ahead(tmp_path: Path, server: ServerProcess
                                                  ) -> None:
    with _daemon(tmp_path, "a").start() as a, _daemon(tmp_path, "b").start() as b:
        remote, key = _init(a.home, server)
        _join(b.home, server, remote, key)
        first = _remember(a.home, "the deploy key lives in the team vault")
        _eventually_holds(b.home, [first])
        _now(a.home)
        _now(b.home)
        fa, fb = _verify(a.home), _verify(b.home)
        assert fa["fingerprint"] == fb["fingerprint"] and fa["head"] == fb["head"], (fa, fb)
        assert _verify(a.home, str(fb["fingerprint"]))["agreed"]

        # A goes ahead: it recomputes its own fingerprint at B's head.
        second = _remember(a.home, "staging runs on the old cluster until March")
        _now(a.home)
        ahead = _verify(a.home)
        assert int(str(ahead["head"])) > int(str(fb["head"]))
        done = _verify(a.home, str(fb["fingerprint"]))
        assert done["agreed"] and done["compared_at"] == fb["head"], done
        # And B, behind, catches up first; a person reads it too.
        human = memvault(b.home, "sync", "verify", str(ahead["fingerprint"]))
        assert human.returncode == 0, human.stderr
        assert f"agree at version {ahead['head']}" in human.stdout, human.stdout
        _eventually_holds(b.home, [second])

        # A typo is a typo, not a fork: sync goes on.
        typo = str(ahead["fingerprint"])
        typo = typo[:-1] + str((int(typo[-1]) + 1) % 10)
        mistyped = memvault(b.home, "sync", "verify", typo)
        assert mistyped.returncode == 2 and "mistyped" in mistyped.stderr, mistyped.stderr
        status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
        assert status["state"] != "stopped", status
        a.stop()
        b.stop()


def test_a_forked_remote_is_caught_by_comparing_fingerprints(
        tmp_path: Path, server: ServerProcess) -> None:
    with _daemon(tmp_path, "a").start() as a, _daemon(tmp_path, "b").start() as b:
        _fork(a, b, server)


def _fork(a: DaemonProcess, b: DaemonProcess, server: ServerProcess) -> None:
    remote, key = _init(a.home, server)
    _join(b.home, server, remote, key)
    shared = _remember(a.home, "both devices saw this one")
    _eventually_holds(b.home, [shared])
    _now(b.home)
    b.stop()
    _remember(a.home, "only the laptop was shown this one")
    _now(a.home)
    fa = _verify(a.home)
    a.stop()

    # The server drops A's newest version and lets B write another at its
    # number: A and B now hold two histories, each consistent in itself.
    server = _hide_newest_version(server)
    try:
        b.start()
        _remember(b.home, "only the desktop was shown this one")
        _now(b.home)
        fb = _verify(b.home)
        assert fb["head"] == fa["head"] and fb["fingerprint"] != fa["fingerprint"], (fa, fb)

        done = memvault(b.home, "sync", "verify", str(fa["fingerprint"]))
        assert done.returncode == EXIT_FORKED, (done.returncode, done.stderr)
        assert "different histories" in done.stderr and "sync repair" in done.stderr, done.stderr
        status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
        assert status["state"] == "stopped", status
        assert "ForkDetected" in str(status["last_error"]), status
        human = memvault(b.home, "sync", "status")
        assert "ForkDetected" in human.stdout and "sync repair" in human.stdout, human.stdout
        b.stop()
    finally:
        server.stop()


def _device_id(daemon: DaemonProcess) -> str:
    return str(json.loads((daemon.home / "data" / "vault.json").read_text())["device_id"])


def test_a_frozen_view_is_named_in_sync_status_and_caught_by_verify(
        tmp_path: Path, server: ServerProcess) -> None:
    with (_daemon(tmp_path, "a").start() as a,
          _daemon(tmp_path, "b", FREEZE_CONFIG).start() as b):
        _freeze(a, b, server)


def _freeze(a: DaemonProcess, b: DaemonProcess, server: ServerProcess) -> None:
    remote, key = _init(a.home, server)
    _join(b.home, server, remote, key)
    seen = _remember(a.home, "the laptop writes now and then")
    _eventually_holds(b.home, [seen])
    status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
    assert status["silent"] == [] and status["freeze_bound_s"] == pytest.approx(FREEZE_S), status
    b.stop()
    _remember(a.home, "the remote hides this one from the desktop")
    _now(a.home)
    fa = _verify(a.home)
    a.stop()

    server = _hide_newest_version(server)
    try:
        b.start()
        _now(b.home)
        deadline = time.monotonic() + 60
        while True:
            status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
            if status["silent"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert [entry["device"] for entry in status["silent"]] == [_device_id(a)], status
        assert time.time() - status["silent"][0]["last_seen"] > FREEZE_S, status
        human = " ".join(memvault(b.home, "sync", "status").stdout.split())
        assert f"device {_device_id(a)}" in human and "hidden by the remote" in human, human

        # A's fingerprint names a version the remote keeps from B.
        done = memvault(b.home, "sync", "verify", str(fa["fingerprint"]))
        assert done.returncode == EXIT_FORKED, (done.returncode, done.stderr)
        assert "withholds versions" in done.stderr, done.stderr
        b.stop()
    finally:
        server.stop()


def _witness(home: Path, witness: ServerProcess) -> dict[str, object]:
    token = create_token(witness.data_dir, home.name, account="user")
    done = memvault(home, "sync", "witness", f"grpc://{witness.target}", "--token", token,
                    "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_fork_is_caught_through_a_witness(tmp_path: Path, server: ServerProcess) -> None:
    with (ServerProcess(tmp_path / "witness").start() as witness,
          _daemon(tmp_path, "a").start() as a, _daemon(tmp_path, "b").start() as b):
        _through_a_witness(a, b, server, witness)


def _through_a_witness(a: DaemonProcess, b: DaemonProcess, server: ServerProcess,
                       witness: ServerProcess) -> None:
    remote, key = _init(a.home, server)
    _join(b.home, server, remote, key)
    assert _witness(a.home, witness)["witness"] == f"grpc://{witness.target}"
    _witness(b.home, witness)
    shared = _remember(a.home, "both devices saw this one")
    _eventually_holds(b.home, [shared])
    for home in (a.home, b.home, a.home, b.home):  # each round reads the other's view
        _now(home)
    for home in (a.home, b.home):
        status = json.loads(memvault(home, "sync", "status", "--json").stdout)
        assert status["state"] == "idle" and status["witness"], status
    b.stop()
    _remember(a.home, "only the laptop was shown this one")
    _now(a.home)  # on the remote, and A's view of it on the witness
    a.stop()

    # The remote forks as before; B writes its own version at A's number
    # while the witness is away (a witness that is down never stops sync).
    target = witness.target
    witness.stop()
    server = _hide_newest_version(server)
    back = None
    try:
        b.start()
        _remember(b.home, "only the desktop was shown this one")
        _now(b.home)
        # A witness that is down is named in `sync status` while it fails.
        status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
        assert status["state"] == "idle" and status["witness_error"], status
        human = " ".join(memvault(b.home, "sync", "status").stdout.split())
        assert "witness" in human and "failing" in human, human
        back = ServerProcess(witness.data_dir, "--listen", target).start()
        deadline = time.monotonic() + 60
        while True:  # the first round that reaches the witness again stops sync
            done = memvault(b.home, "sync", "now")
            if done.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert done.returncode != 0 and "different histories" in done.stderr, done.stderr
        status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
        assert status["state"] == "stopped", status
        assert "ForkDetected" in str(status["last_error"]), status
        assert "witness" in str(status["last_error"]), status
        b.stop()
    finally:
        server.stop()
        if back is not None:
            back.stop()
