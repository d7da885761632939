"""Running as a service: the unit and the plist, sd_notify, a clean SIGTERM."""

from __future__ import annotations

import importlib.util
import json
import os
import plistlib
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from memvault import Client, RememberResult
from memvault.cli.service import find_daemon, installed_settings, plan
from memvault.cli.service_templates import agent_plist, systemd_quote
from memvaultd.serve.endpoint import _STOP_GRACE_S

from .daemon_process import DaemonProcess
from .key_file_vault import make_key_file_vault
from .terminal_daemon import on_its_terminal

ROOT = Path(__file__).resolve().parent.parent
_SNAPSHOT_1M_S = 21  # the slowest stop of a 1M vault measured: 21 s (docs/benchmarks.md)


def _memvault(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def _dry_run(platform: str, *extra: str, env: dict[str, str] | None = None
             ) -> dict[str, object]:
    done = _memvault(*extra, "service", "install", "--dry-run", "--json", "--platform", platform,
                     env=env)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _systemd_analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        if os.environ.get("MEMVAULT_REQUIRE_SYSTEMD_ANALYZE") == "1":
            pytest.fail("systemd-analyze is missing (scripts/setup --system installs it)")
        pytest.skip("systemd-analyze is not installed")
    return tool


def _verify(unit: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "memvaultd.service").write_text(unit)
    # A user manager needs a runtime directory, even offline, and reads the
    # sockets of every user unit installed under it: a socket path is at most
    # 107 bytes, which a pytest-xdist worker's tmp_path and gpg-agent's
    # "gnupg/S.gpg-agent.extra" passed (110), so the directory is a short one.
    with tempfile.TemporaryDirectory(prefix="mv-run-") as runtime:
        return subprocess.run(
            [_systemd_analyze(), "verify", "--user", str(tmp_path / "memvaultd.service")],
            capture_output=True, text=True, env={**os.environ, "XDG_RUNTIME_DIR": runtime},
            timeout=60)


# -- the unit ----------------------------------------------------------------------


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    plan = _dry_run("linux")
    done = _verify(str(plan["content"]), tmp_path)
    # Unknown keys are only warnings (exit 0): an empty stderr is the real test.
    assert (done.returncode, done.stderr.strip()) == (0, "")


def test_unit_with_an_awkward_home_still_verifies(tmp_path: Path) -> None:
    home = tmp_path / "my memory 100%"
    plan = _dry_run("linux", "--home", str(home))
    unit = str(plan["content"])
    assert f"Environment={systemd_quote(f'MEMVAULT_HOME={home}')}" in unit
    assert f"ReadWritePaths={systemd_quote(str(home))}" in unit
    done = _verify(unit, tmp_path)
    assert (done.returncode, done.stderr.strip()) == (0, "")


def test_unit_settings() -> None:
    unit = str(_dry_run("linux")["content"]).splitlines()
    exec_start = next(line for line in unit if line.startswith("ExecStart="))
    daemon = Path(exec_start.removeprefix("ExecStart="))
    assert daemon.is_absolute() and daemon.name == "memvaultd" and os.access(daemon, os.X_OK)
    for expected in ("Type=notify", "RuntimeDirectory=memvault", "RuntimeDirectoryMode=0700",
                     "UMask=0077", "LimitCORE=0", "NoNewPrivileges=yes", "ProtectSystem=strict",
                     "Restart=on-failure", "Environment=HF_HUB_OFFLINE=1",
                     "RestartPreventExitStatus=2", "WantedBy=default.target"):
        assert expected in unit
    # torch's CPU kernels need writable+executable pages.
    assert not any(line.startswith("MemoryDenyWriteExecute") for line in unit)
    # With ProtectSystem=strict, the data directory must be given back.
    assert any(line.startswith("ReadWritePaths=/") for line in unit)
    # A stop gives in-flight calls their grace, then writes the final
    # snapshot: 15-21 s at 1M memories (docs/benchmarks.md). The manager must
    # not kill the daemon before both, with room for a slower disk.
    stop = next(line for line in unit if line.startswith("TimeoutStopSec="))
    assert int(stop.removeprefix("TimeoutStopSec=")) >= _STOP_GRACE_S + 2 * _SNAPSHOT_1M_S


@pytest.mark.parametrize(("daemon", "home", "hidden"), [
    ("/usr/bin/memvaultd", None, None),
    ("/tmp/venv/bin/memvaultd", None, "/tmp/venv/bin/memvaultd"),
    ("/usr/bin/memvaultd", "/var/tmp/memory", "/var/tmp/memory"),
    ("/usr/bin/memvaultd", "/tmpfoo/memory", None),
])
def test_private_tmp_only_where_it_hides_nothing_the_daemon_needs(
        daemon: str, home: str | None, hidden: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With PrivateTmp=yes a daemon under /tmp fails to start (203/EXEC) and
    data under /tmp fails the sandbox (226/NAMESPACE): seen under a real user
    manager, test_user_manager.py."""
    monkeypatch.delenv("MEMVAULT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "/home/someone/.local/share")
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/someone/.cache")
    unit = plan("linux", daemon=Path(daemon), home=home,
                user_home=Path("/home/someone")).content.decode().splitlines()
    if hidden is None:
        assert "PrivateTmp=yes" in unit
        assert not any(line.startswith("Environment=TMPDIR=") for line in unit)
    else:
        assert "PrivateTmp=yes" not in unit
        assert f"# PrivateTmp=yes is left out: it would hide {hidden} from the daemon" in unit
        # The shared /tmp is read-only to the unit: temporary files go to the cache.
        cache = "/var/tmp/memory/cache" if home else "/home/someone/.cache/memvault"
        assert f"Environment=TMPDIR={cache}" in unit
        assert f"ReadWritePaths={cache}" in unit or f"ReadWritePaths={home}" in unit


def test_a_unit_for_a_home_may_write_the_users_model_cache(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The exported model is one per user, outside any MEMVAULT_HOME: a unit
    # that could not write it would stop at its first start.
    monkeypatch.delenv("MEMVAULT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/someone/.cache")
    unit = plan("linux", daemon=Path("/usr/bin/memvaultd"), home="/var/tmp/memory",
                user_home=Path("/home/someone")).content.decode().splitlines()
    assert "ReadWritePaths=/home/someone/.cache/memvault/models" in unit
    assert "ReadWritePaths=/var/tmp/memory" in unit


def test_dry_run_prints_the_unit_and_the_commands_and_writes_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = _memvault("service", "install", "--dry-run", "--platform", "linux", env=env)
    assert done.returncode == 0, done.stderr
    assert "[Service]" in done.stdout
    assert "$ systemctl --user daemon-reload" in done.stdout
    assert "$ systemctl --user enable --now memvaultd.service" in done.stdout
    assert list(tmp_path.iterdir()) == []


# -- the plist ----------------------------------------------------------------------


def test_plist_round_trips_with_the_expected_keys(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    done = _memvault("service", "install", "--dry-run", "--json", "--platform", "macos",
                     env=env)
    plan = json.loads(done.stdout)
    assert plan["path"] == str(tmp_path / "Library/LaunchAgents/dev.memvault.memvaultd.plist")
    agent = plistlib.loads(plan["content"].encode())
    assert agent["Label"] == "dev.memvault.memvaultd"
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert Path(agent["ProgramArguments"][0]) == find_daemon()
    log = str(tmp_path / "Library/Logs/memvault/memvaultd.log")
    assert agent["StandardOutPath"] == agent["StandardErrorPath"] == log
    assert agent["EnvironmentVariables"]["HF_HUB_OFFLINE"] == "1"
    assert agent["Umask"] == 0o077
    # No core file: the daemon holds the vault key and memories in clear.
    assert agent["SoftResourceLimits"] == agent["HardResourceLimits"] == {"Core": 0}
    assert agent["ExitTimeOut"] >= _STOP_GRACE_S + 2 * _SNAPSHOT_1M_S  # as TimeoutStopSec
    assert plistlib.loads(plistlib.dumps(agent)) == agent
    assert agent == agent_plist(str(find_daemon()), log, agent["EnvironmentVariables"])
    assert plan["install"] == [f"launchctl bootstrap gui/{os.getuid()} {plan['path']}"]


# -- install, status, uninstall (with a stand-in systemctl) ---------------------------


@pytest.fixture
def fake_systemctl(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """A `systemctl` that records its arguments, first on PATH; HOME in tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\necho active\n')
    script.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "HOME": str(tmp_path / "user"), "XDG_DATA_HOME": str(tmp_path / "user/.local/share"),
           "XDG_CACHE_HOME": str(tmp_path / "user/.cache")}
    env.pop("MEMVAULT_HOME", None)
    env.pop("MEMVAULT_CACHE_DIR", None)
    yield env, calls


def test_install_status_uninstall(fake_systemctl: tuple[dict[str, str], Path],
                                  tmp_path: Path) -> None:
    env, calls = fake_systemctl
    unit = tmp_path / "user/.config/systemd/user/memvaultd.service"

    done = _memvault("service", "install", "--platform", "linux", env=env)
    assert done.returncode == 0, done.stderr
    assert f"ReadWritePaths={tmp_path}/user/.local/share/memvault\n" in unit.read_text()
    # The exported model is cached outside the data: without this the unit
    # could not write it, and every start would fall back to torch.
    assert f"ReadWritePaths={tmp_path}/user/.cache/memvault\n" in unit.read_text()
    assert (tmp_path / "user/.cache/memvault").is_dir()
    assert calls.read_text().splitlines() == ["--user daemon-reload",
                                              "--user enable --now memvaultd.service"]
    data_dir = tmp_path / "user/.local/share/memvault"
    assert data_dir.is_dir() and data_dir.stat().st_mode & 0o777 == 0o700

    status = json.loads(_memvault("service", "status", "--json", "--platform", "linux",
                                  env=env).stdout)
    assert status["installed"] and status["current"]
    assert status["manager"] == ["active", "active"]

    done = _memvault("service", "uninstall", "--platform", "linux", env=env)
    assert done.returncode == 0, done.stderr
    assert not unit.exists()
    assert calls.read_text().splitlines()[-2:] == ["--user disable --now memvaultd.service",
                                                   "--user daemon-reload"]
    status = json.loads(_memvault("service", "status", "--json", "--platform", "linux",
                                  env=env).stdout)
    assert not status["installed"]


def test_a_failing_manager_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    (bin_dir / "systemctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    done = _memvault("service", "install", "--platform", "linux", env=env)
    assert done.returncode == 1
    assert done.stderr.strip() == ("memvault: `systemctl --user daemon-reload` failed: "
                                   "Failed to connect to bus")


# -- sd_notify and SIGTERM, with a real daemon -----------------------------------------


class NotifyListener:
    """A stand-in for systemd's NOTIFY_SOCKET: collects every datagram."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue

    def lines(self) -> list[str]:
        return [line for message in list(self.messages) for line in message.splitlines()]

    def wait_for(self, prefix: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not any(line.startswith(prefix) for line in self.lines()):
            assert time.monotonic() < deadline, f"no {prefix!r} in {self.lines()}"
            time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_daemon_tells_the_service_manager_how_it_goes(home: Path, tmp_path: Path) -> None:
    listener = NotifyListener(tmp_path / "notify.sock")
    try:
        with DaemonProcess(home, NOTIFY_SOCKET=str(listener.path)).start(wait=False) as proc:
            listener.wait_for("READY=1")
            # READY=1 means the socket is bound: a client can connect right away.
            assert proc.socket.exists()
            listener.wait_for("STATUS=ready: ")
            assert proc.health() == "SERVING"
            assert proc.stop() == 0
            listener.wait_for("STOPPING=1", timeout=5)
        lines = listener.lines()
    finally:
        listener.close()
    assert lines.index("READY=1") < lines.index("STATUS=ready: 0 memories")
    assert "STATUS=loading memories" in lines
    assert "STATUS=warming the model" in lines


def test_sigterm_ends_an_open_event_stream_instead_of_waiting_for_it(home: Path) -> None:
    # An agent's `memvault events` (or the MCP bridge) keeps a stream open
    # for as long as it runs: stopping must end it, not wait out the 20 s
    # grace that in-flight calls get.
    with DaemonProcess(home).start() as proc:
        ended = threading.Event()
        received: list[str] = []

        def listen() -> None:
            with Client(socket=proc.socket) as listener:
                for event in listener.events(types=["remember"]):
                    received.append(event.id)
            ended.set()

        thread = threading.Thread(target=listen, daemon=True)
        thread.start()
        with Client(socket=proc.socket) as client:
            for attempt in range(50):  # the stream registers a moment after the call starts
                client.remember(f"the stream is open, take {attempt}")
                if received:
                    break
                time.sleep(0.1)
        assert received, "the stream never delivered an event"
        started = time.monotonic()
        assert proc.stop(timeout=30) == 0
        assert time.monotonic() - started < 10.0
        assert ended.wait(5), "the subscriber's stream did not end"


def test_sigterm_lets_an_in_flight_batch_finish(home: Path) -> None:
    texts = [f"note {i}: the build of service {i} needs flag --opt-{i} and a warm cache "
             f"on machine {i % 7}, owned by team {i % 5}" for i in range(480)]
    with DaemonProcess(home).start() as proc:
        results: list[RememberResult] = []
        failure: list[BaseException] = []
        with Client(socket=proc.socket, timeout=120) as client:
            client.status()  # connected: the batch below is sent at once

            def send() -> None:
                try:
                    results.extend(client.remember_batch(
                        {"text": t, "topic": f"build.{i}"} for i, t in enumerate(texts)))
                except BaseException as exc:
                    failure.append(exc)

            sender = threading.Thread(target=send)
            started = time.monotonic()
            sender.start()
            # On the wire and embedding: the model takes ~430-490 texts a
            # second on a quiet 2-core machine (docs/benchmarks.md), so 480
            # take about a second, well past this.
            time.sleep(0.3)
            assert sender.is_alive(), "the batch finished before SIGTERM: make it bigger"
            assert proc.proc is not None
            proc.proc.send_signal(signal.SIGTERM)
            sender.join(60)
            elapsed = time.monotonic() - started
            assert failure == [] and len(results) == len(texts), (failure, elapsed)
        assert proc.proc.wait(60) == 0, proc.log
        assert not proc.socket.exists()
        assert not (proc.socket.parent / "inner").exists()

    with DaemonProcess(home).start() as again, Client(socket=again.socket) as client:
        assert client.status().memory_count == len(texts)
        hits = client.recall("which flag does service 42 need", top_k=1)
        assert hits and hits[0].memory.id == results[42].id
        assert again.stop() == 0


# -- a vault whose key is in a key file ------------------------------------------------

KEY_FILE_PASSPHRASE = "a passphrase for the service"


def _headless(fake_systemctl: tuple[dict[str, str], Path], tmp_path: Path
              ) -> tuple[dict[str, str], Path, Path]:
    """(env, key file, unit path): a key-file vault in the default data
    directory of a user with no keyring, whose shell has no passphrase."""
    env, _ = fake_systemctl
    env = {k: v for k, v in env.items() if not k.startswith("MEMVAULT_PASSPHRASE")}
    key_file = make_key_file_vault(tmp_path / "user/.local/share/memvault",
                                   KEY_FILE_PASSPHRASE) / "vault.key"
    return env, key_file, tmp_path / "user/.config/systemd/user/memvaultd.service"


def _no_terminal(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          start_new_session=True)


def test_install_for_a_key_file_vault_without_a_passphrase_says_how_to_give_one(
        fake_systemctl: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """Such a unit could never start (the daemon exits 2 asking for the
    passphrase, and RestartPreventExitStatus=2 keeps it down): it is not written."""
    env, key_file, unit = _headless(fake_systemctl, tmp_path)
    done = _no_terminal("service", "install", "--platform", "linux", env=env)
    assert (done.returncode, done.stderr.strip().splitlines()) == (2, [
        f"memvault: the passphrase of the key file {key_file} is needed and there is no "
        "terminal to ask for it: give --passphrase-file FILE (the passphrase on its first "
        "line, mode 0600) or set MEMVAULT_PASSPHRASE_FILE"])
    # The manager was only asked whether its own environment holds a passphrase.
    assert fake_systemctl[1].read_text().splitlines() == ["--user show-environment"]
    assert not unit.exists()


def test_install_writes_the_passphrase_file_into_the_unit_and_the_plist(
        fake_systemctl: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, _, unit = _headless(fake_systemctl, tmp_path)
    secret = tmp_path / "secret dir" / "passphrase"
    secret.parent.mkdir()
    secret.write_text(KEY_FILE_PASSPHRASE + "\n")
    secret.chmod(0o600)

    done = _no_terminal("service", "install", "--platform", "linux", "--passphrase-file",
                        str(secret), env=env)
    assert done.returncode == 0, done.stderr
    assert f"reads its passphrase from {secret}" in done.stdout
    lines = unit.read_text().splitlines()
    assert f"Environment={systemd_quote(f'MEMVAULT_PASSPHRASE_FILE={secret}')}" in lines
    verified = _verify(unit.read_text(), tmp_path / "verify")
    assert (verified.returncode, verified.stderr.strip()) == (0, "")
    status = json.loads(_memvault("service", "status", "--json", "--platform", "linux",
                                  env=env).stdout)
    assert status["installed"] and status["current"], status

    # $MEMVAULT_PASSPHRASE_FILE in the shell is taken when no option is given.
    plan = _dry_run("macos", env=env | {"MEMVAULT_PASSPHRASE_FILE": str(secret)})
    agent = plistlib.loads(str(plan["content"]).encode())
    assert agent["EnvironmentVariables"]["MEMVAULT_PASSPHRASE_FILE"] == str(secret)


@pytest.mark.parametrize("case", ["readable by the group", "wrong passphrase", "missing"])
def test_install_refuses_a_passphrase_file_the_daemon_could_not_use(
        fake_systemctl: tuple[dict[str, str], Path], tmp_path: Path, case: str) -> None:
    env, key_file, unit = _headless(fake_systemctl, tmp_path)
    secret = tmp_path / "passphrase"
    if case != "missing":
        secret.write_text(("not it" if case == "wrong passphrase" else KEY_FILE_PASSPHRASE)
                          + "\n")
        secret.chmod(0o640 if case == "readable by the group" else 0o600)
    done = _no_terminal("service", "install", "--platform", "linux", "--passphrase-file",
                        str(secret), env=env)
    expected = {
        "readable by the group": (2, f"memvault: the passphrase file {secret} is mode 640: "
                                     f"other users may read it; chmod 600 {secret}"),
        "wrong passphrase": (2, f"memvault: wrong passphrase (from MEMVAULT_PASSPHRASE_FILE "
                                f"({secret})) for the key file {key_file}, or the key file is "
                                "damaged"),
        "missing": (2, f"memvault: the passphrase file {secret} does not exist")}[case]
    assert (done.returncode, done.stderr.strip()) == expected
    assert not unit.exists() and not fake_systemctl[1].exists()


def test_install_takes_the_passphrase_the_manager_environment_gives(
        fake_systemctl: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """`systemctl --user set-environment MEMVAULT_PASSPHRASE=...` reaches every
    unit: install says so, and writes no passphrase file into the unit."""
    env, _, unit = _headless(fake_systemctl, tmp_path)
    calls = fake_systemctl[1]
    (tmp_path / "bin/systemctl").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\ncase "$*" in *show-environment) '
        'echo HOME=/x; echo "MEMVAULT_PASSPHRASE=$\'a b\'";; *) echo active;; esac\n')
    done = _no_terminal("service", "install", "--platform", "linux", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == (
        "the service's passphrase comes from the service manager's environment "
        "(MEMVAULT_PASSPHRASE), not checked; `--passphrase-file FILE` is checked, and seen by "
        "this service alone")
    assert "MEMVAULT_PASSPHRASE" not in unit.read_text()


def _on_a_terminal(args: list[str], env: dict[str, str], answer: str) -> tuple[int, str]:
    """`memvault ARGS` on a pseudo-terminal, `answer` typed at its passphrase prompt."""
    master, slave = os.openpty()
    proc = subprocess.Popen(on_its_terminal([sys.executable, "-m", "memvault.cli.main", *args]),
                            env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    output, answered = b"", False
    try:
        while select.select([master], [], [], 60)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if not answered and b"Passphrase of the vault's key file:" in output:
                os.write(master, answer.encode() + b"\n")
                answered = True
    finally:
        os.close(master)
    return proc.wait(30), output.decode(errors="replace")


def test_install_on_a_terminal_asks_for_the_passphrase_and_keeps_it_0600(
        fake_systemctl: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, key_file, unit = _headless(fake_systemctl, tmp_path)
    kept = tmp_path / "user/.config/memvault/passphrase"
    args = ["service", "install", "--platform", "linux"]

    code, output = _on_a_terminal(args, env, "not the passphrase")
    assert code == 2, output
    assert f"the passphrase typed does not open the key file {key_file}" in output
    assert "nothing was written" in output and not kept.exists() and not unit.exists()

    code, output = _on_a_terminal(args, env, KEY_FILE_PASSPHRASE)
    assert code == 0, output
    assert kept.read_text() == KEY_FILE_PASSPHRASE + "\n"
    assert kept.stat().st_mode & 0o777 == 0o600
    assert f"Environment=MEMVAULT_PASSPHRASE_FILE={kept}\n" in unit.read_text()
    # A later install finds the kept file and asks nothing.
    done = _no_terminal(*args, env=env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("platform", ["linux", "macos"])
def test_the_installed_settings_read_back_what_install_wrote(
        platform: Literal["linux", "macos"], tmp_path: Path) -> None:
    """doctor reads the home and passphrase file back from the installed file:
    quoting (a space, a `%`, a quote) must not change them."""
    home = tmp_path / 'my "memory" 100%'
    secret = tmp_path / "secret dir 50%" / "passphrase"
    written = plan(platform, daemon=Path("/usr/bin/memvaultd"), home=str(home),
                   user_home=tmp_path, passphrase_file=secret)
    written.path.parent.mkdir(parents=True)
    written.path.write_bytes(written.content)
    assert installed_settings(platform, written.path) == (str(home), secret)


def test_the_checkout_is_byte_compiled_for_a_service_that_cannot_write_it() -> None:
    """`scripts/setup` compiles daemon/, base/ and client/: under
    `ProtectSystem=strict` no start can write `__pycache__`, and each would
    compile every module again. Each bytecode file must name its source's
    mtime and size, as Python checks them before it uses one."""
    stale = []
    for package in ("daemon", "base", "client"):
        for source in sorted((ROOT / package).rglob("*.py")):
            cached = Path(importlib.util.cache_from_source(str(source)))
            found = source.stat()
            header = cached.read_bytes()[8:16] if cached.exists() else b""
            if header != struct.pack("<II", int(found.st_mtime) & 0xFFFFFFFF,
                                     found.st_size & 0xFFFFFFFF):
                stale.append(str(source.relative_to(ROOT)))
    assert not stale, (f"{len(stale)} modules not byte-compiled since they changed "
                       f"(./scripts/setup compiles them): {stale[:5]}")
