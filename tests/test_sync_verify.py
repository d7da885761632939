"""Forks and freezes caught where two views meet: `memvault sync verify`
(fingerprints compared between devices) and the silent devices of `sync
status`. Real daemons, the real CLI, and a real remote of each kind (a
memvault-server on loopback, a directory, an S3 bucket on Ceph RGW) whose
store the tests edit to fork or freeze one device's view; the witness is a
second remote of the same kind."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memvault_base.objects.s3 import S3Store, bucket_client

from .ceph import CephRGW
from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .test_cli import memvault
from .test_devices import _remote
from .test_sync_cli import _eventually_holds, _init, _remember, _token

KINDS = ["server", "directory", "s3"]

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


def _daemon(tmp_path: Path, name: str, config: str = "", env: dict[str, str] | None = None
            ) -> DaemonProcess:
    home = tmp_path / name
    home.mkdir()
    if config:
        (home / "config.toml").write_text(config)
    return DaemonProcess(home, **(env or {}))


def _init_on(home: Path, shared: Shared) -> tuple[str, str]:
    """`memvault init` on `shared`; (remote URL, recovery key)."""
    token = shared.token(home.name)
    done = memvault(home, "init", "--remote", shared.url,
                    *(("--token", token) if token else ()), "--json")
    assert done.returncode == 0, done.stderr
    return shared.url, json.loads(done.stdout)["recovery_key"]


def _join_on(home: Path, shared: Shared, key: str) -> None:
    token = shared.token(home.name)
    joined = memvault(home, "join", "--remote", shared.url,
                      *(("--token", token) if token else ()), "--recovery-key", key)
    assert joined.returncode == 0, joined.stderr


class Shared:
    """The remote both devices sync to, of one kind, and what it can do:
    show the devices that did not see its newest version a history
    without it."""

    def __init__(self, kind: str, url: str, env: dict[str, str], tmp_path: Path,
                 server: ServerProcess | None = None) -> None:
        self.kind, self.url, self.env, self.tmp_path = kind, url, env, tmp_path
        self.server = server

    def token(self, device: str) -> str | None:
        if self.server is None:
            return None
        return create_token(self.server.data_dir, device, account="user")

    def hide_newest_version(self) -> None:
        """From now on the remote holds no newest version: the version
        numbered after it is free again, for whoever appends next."""
        if self.server is not None:
            self.server = _hide_newest_version(self.server)
        elif self.kind == "directory":
            # No head marker: a directory remote's head is the last name in
            # versions/ (remotes/blobs.py), so the file alone is the version.
            root = self.tmp_path / "shared"
            newest = max(root.glob("*/versions/*"), key=lambda path: int(path.name))
            newest.rename(self.tmp_path / "hidden-version")
        else:  # the bucket's head is its last versions/ key too
            bucket, _, prefix = self.url.removeprefix("s3://").partition("/")
            store = S3Store(bucket_client(bucket), prefix)
            versions = [key for key, _ in store.inventory() if "/versions/" in key]
            store.delete(max(versions, key=lambda key: int(key.rpartition("/")[2])))


@contextmanager
def _shared(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Shared]:
    if kind == "server":
        server = ServerProcess(tmp_path / "server").start()
        shared = Shared(kind, f"grpc://{server.target}", {}, tmp_path, server)
        try:
            yield shared
        finally:
            if shared.server is not None:
                shared.server.stop()
        return
    with _remote(kind, tmp_path, request, monkeypatch) as (url, _, env):
        yield Shared(kind, url, env, tmp_path)


class WitnessRemote:
    """A second remote of one kind, as a witness, that can go down for
    real and come back with what it held."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.server: ServerProcess | None = None
        self.rgw: CephRGW | None = None
        self.root = tmp_path / "witness"
        self.away = tmp_path / "witness-away"
        self.held: list[tuple[str, bytes]] = []
        if kind == "server":
            self.server = ServerProcess(self.root).start()
            self.url = f"grpc://{self.server.target}"
        elif kind == "directory":
            self.root.mkdir()
            self.url = self.root.as_uri()
        else:
            self.rgw = request.getfixturevalue("rgw")
            self.bucket = f"memvault-witness-{uuid.uuid4().hex[:8]}"
            self.rgw.create_bucket(self.bucket)
            self.url = f"s3://{self.bucket}/witness"

    def token(self, device: str) -> str | None:
        if self.server is None:
            return None
        return create_token(self.server.data_dir, device, account="user")

    def down(self) -> None:
        if self.server is not None:
            self.target = self.server.target
            self.server.stop()
        elif self.kind == "directory":
            # A file where the folder was: it does not open as a directory,
            # and no device can make one there (a folder merely gone would
            # be made again, empty: a witness that dropped its records).
            self.root.rename(self.away)
            self.root.write_text("not a folder\n")
        else:  # the bucket is gone: every request of it fails (NoSuchBucket)
            store = self._store()
            self.held = [(key, store.get(key)) for key, _ in store.inventory()]
            for key, _ in self.held:
                store.delete(key)
            assert self.rgw is not None
            self.rgw.delete_bucket(self.bucket)

    def back(self) -> None:
        if self.server is not None:
            self.server = ServerProcess(self.root, "--listen", self.target).start()
        elif self.kind == "directory":
            self.root.unlink()
            self.away.rename(self.root)
        else:
            assert self.rgw is not None
            self.rgw.create_bucket(self.bucket)
            store = self._store()
            for key, data in self.held:
                assert store.put_if_absent(key, data)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def _store(self) -> S3Store:
        return S3Store(bucket_client(self.bucket), "witness")


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


@pytest.mark.parametrize("kind", KINDS)
def test_a_forked_remote_is_caught_by_comparing_fingerprints(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with _shared(kind, tmp_path, request, monkeypatch) as shared, \
            _daemon(tmp_path, "a", env=shared.env).start() as a, \
            _daemon(tmp_path, "b", env=shared.env).start() as b:
        _fork(a, b, shared)


def _fork(a: DaemonProcess, b: DaemonProcess, shared: Shared) -> None:
    _, key = _init_on(a.home, shared)
    _join_on(b.home, shared, key)
    both = _remember(a.home, "both devices saw this one")
    _eventually_holds(b.home, [both])
    _now(b.home)
    b.stop()
    _remember(a.home, "only the laptop was shown this one")
    _now(a.home)
    fa = _verify(a.home)
    a.stop()

    # The remote drops A's newest version and lets B write another at its
    # number: A and B now hold two histories, each consistent in itself.
    shared.hide_newest_version()
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


def _device_id(daemon: DaemonProcess) -> str:
    return str(json.loads((daemon.home / "data" / "vault.json").read_text())["device_id"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_frozen_view_is_named_in_sync_status_and_caught_by_verify(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with _shared(kind, tmp_path, request, monkeypatch) as shared, \
            _daemon(tmp_path, "a", env=shared.env).start() as a, \
            _daemon(tmp_path, "b", FREEZE_CONFIG, shared.env).start() as b:
        _freeze(a, b, shared)


def _freeze(a: DaemonProcess, b: DaemonProcess, shared: Shared) -> None:
    _, key = _init_on(a.home, shared)
    _join_on(b.home, shared, key)
    seen = _remember(a.home, "the laptop writes now and then")
    _eventually_holds(b.home, [seen])
    status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
    assert status["silent"] == [] and status["freeze_bound_s"] == pytest.approx(FREEZE_S), status
    b.stop()
    _remember(a.home, "the remote hides this one from the desktop")
    _now(a.home)
    fa = _verify(a.home)
    a.stop()

    shared.hide_newest_version()
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


def _witness(home: Path, witness: WitnessRemote) -> dict[str, object]:
    token = witness.token(home.name)
    done = memvault(home, "sync", "witness", witness.url,
                    *(("--token", token) if token else ()), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", KINDS)
def test_a_fork_is_caught_through_a_witness(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with _shared(kind, tmp_path, request, monkeypatch) as shared, \
            _daemon(tmp_path, "a", env=shared.env).start() as a, \
            _daemon(tmp_path, "b", env=shared.env).start() as b:
        witness = WitnessRemote(kind, tmp_path, request)
        try:
            _through_a_witness(a, b, shared, witness)
        finally:
            witness.stop()


def _through_a_witness(a: DaemonProcess, b: DaemonProcess, shared: Shared,
                       witness: WitnessRemote) -> None:
    _, key = _init_on(a.home, shared)
    _join_on(b.home, shared, key)
    assert _witness(a.home, witness)["witness"] == witness.url
    _witness(b.home, witness)
    both = _remember(a.home, "both devices saw this one")
    _eventually_holds(b.home, [both])
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
    witness.down()
    shared.hide_newest_version()
    b.start()
    _remember(b.home, "only the desktop was shown this one")
    _now(b.home)
    # A witness that is down is named in `sync status` while it fails.
    status = json.loads(memvault(b.home, "sync", "status", "--json").stdout)
    assert status["state"] == "idle" and status["witness_error"], status
    human = " ".join(memvault(b.home, "sync", "status").stdout.split())
    assert "witness" in human and "failing" in human, human
    witness.back()
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
