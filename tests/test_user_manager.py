"""The unit as users run it: `memvault service install` under a real systemd
user manager (`user_manager.py`), then what the manager does with the daemon:
readiness (`Type=notify`), the socket in the runtime directory where clients
look, a restart after a crash that keeps acknowledged writes, a clean stop
that writes a snapshot, no restart loop for a daemon that cannot start, and a
vault whose key is in a key file unlocked by the passphrase file `install`
names in the unit.

Hardening options this machine's kernel or container cannot set up are
turned off in a drop-in (found by probing each one, see `_unsupported`), so
the unit file itself is exactly what `install` writes; the test prints which
ones it turned off.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memvault.cli.service_templates import UNIT_NAME, UNIT_TEMPLATE

from .key_file_vault import make_key_file_vault
from .user_manager import UserManager, why_not

PASSPHRASE = "a passphrase for the user manager test"


@pytest.fixture(scope="module")
def manager() -> Iterator[UserManager]:
    reason = why_not()
    if reason is not None:
        if os.environ.get("MEMVAULT_REQUIRE_USER_MANAGER") == "1":
            pytest.fail(f"a systemd user manager is required: {reason}")
        pytest.skip(reason)
    # Not under /tmp: a home there makes `install` leave `PrivateTmp=yes` out
    # (service_templates.py), and the unit should run as most users get it.
    manager = UserManager(Path(f"/run/memvault-test-{os.getpid()}"))
    try:
        manager.start()
        # What a login passes to its manager; no Secret Service is reachable
        # from it here, so the key file's passphrase comes from the environment.
        done = manager.systemctl("set-environment", f"MEMVAULT_PASSPHRASE={PASSPHRASE}",
                                 "PYTHON_KEYRING_BACKEND=keyring.backends.fail.Keyring")
        assert done.returncode == 0, done.stderr
        yield manager
    finally:
        manager.stop()


@pytest.fixture(autouse=True)
def no_unit_left(manager: UserManager) -> Iterator[None]:
    """Whatever a test leaves (an installed unit, a failed one, a drop-in)
    is gone before the next."""
    yield
    _memvault(manager, "service", "uninstall")
    manager.systemctl("reset-failed")
    shutil.rmtree(manager.home / ".config/systemd/user" / f"{UNIT_NAME}.d", ignore_errors=True)


def _memvault(manager: UserManager, *args: str) -> subprocess.CompletedProcess[str]:
    # No terminal, as in a script: nothing may be asked for.
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args], env=manager.env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          start_new_session=True)


def _hardening() -> list[str]:
    """The unit's sandboxing settings that take yes or a value, as `Key=value`."""
    keys = ("NoNewPrivileges", "Private", "Protect", "Restrict", "LockPersonality", "SystemCall")
    lines = [line.rsplit("}", 1)[-1] for line in UNIT_TEMPLATE.splitlines()]  # past {writable}
    return [line for line in lines if line.startswith(keys) and not line.endswith("=")]


def _unsupported(manager: UserManager) -> list[str]:
    """The hardening settings a unit cannot run with here: a probe unit with
    just that setting must start and must still see the manager's notify
    socket (readiness goes through it). In a container without systemd as
    PID 1, ProtectKernelTunables and ProtectKernelLogs fail with status
    226/NAMESPACE, and ProtectControlGroups hides the notify socket."""
    notify = manager.runtime_dir / "systemd" / "notify"
    failing = []
    for setting in _hardening():
        probe = subprocess.run(
            ["systemd-run", "--user", "--wait", "--quiet", f"--property={setting}",
             "sh", "-c", 'test -S "$0"', str(notify)],
            env=manager.env, capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            failing.append(setting)
    return failing


def _turned_off(setting: str) -> str:
    """The drop-in line that undoes `setting`: an empty value resets a list
    or a string, but leaves a boolean as it was."""
    key, value = setting.split("=", 1)
    return f"{key}=no" if value == "yes" else f"{key}="


def _drop_in(manager: UserManager, off: list[str]) -> None:
    """A drop-in beside the unit `install` writes: `off` turned off, and the
    daemon's output in a file (no journald here) for the failure messages,
    with a traceback if native code crashes."""
    lines = [_turned_off(s) for s in off] + [
        f"StandardOutput=append:{manager.root}/daemon.log",
        f"StandardError=append:{manager.root}/daemon.log",
        "Environment=PYTHONFAULTHANDLER=1"]
    directory = manager.home / ".config/systemd/user" / f"{UNIT_NAME}.d"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "test.conf").write_text("[Service]\n" + "".join(f"{x}\n" for x in lines))


def _log(manager: UserManager) -> str:
    """The daemon's output and what the manager says of it, for failure messages."""
    path = manager.root / "daemon.log"
    shown = manager.show(UNIT_NAME, "ActiveState", "Result", "ExecMainCode", "ExecMainStatus",
                         "NRestarts")
    return f"{shown}\n" + (path.read_text() if path.exists() else "(no output)")


def _wait_for(manager: UserManager, check: Callable[[], bool], what: str,
              timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s; log:\n{_log(manager)}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def unsupported(manager: UserManager) -> list[str]:
    off = _unsupported(manager)
    print(f"hardening this machine cannot run, turned off in a drop-in: {off or 'none'}")
    assert len(off) < len(_hardening()) // 2, f"most hardening fails here: {off}"
    return off


def test_the_unit_runs_the_daemon_under_a_real_user_manager(manager: UserManager,
                                                            unsupported: list[str]) -> None:
    _drop_in(manager, unsupported)

    started = time.monotonic()
    done = _memvault(manager, "service", "install")
    assert done.returncode == 0, f"{done.stderr}\nlog:\n{_log(manager)}"
    # Type=notify: `enable --now` returned once the daemon said READY=1, which
    # it says once its socket is bound, before the memories load.
    print(f"install returned after {time.monotonic() - started:.1f} s")
    shown = manager.show(UNIT_NAME, "ActiveState", "MainPID", "NRestarts")
    assert shown["ActiveState"] == "active", _log(manager)
    socket = manager.runtime_dir / "memvault" / "memvault.sock"
    assert socket.is_socket() and socket.stat().st_mode & 0o777 == 0o600

    # The CLI finds the socket from XDG_RUNTIME_DIR alone, where the unit's
    # RuntimeDirectory put it.
    done = _memvault(manager, "remember", "the user manager keeps this memory", "--json")
    assert done.returncode == 0, f"{done.stderr}\nlog:\n{_log(manager)}"
    _wait_for(manager, lambda: manager.show(UNIT_NAME, "StatusText")["StatusText"].startswith(
        "ready"), "the daemon's status reads ready")

    # A crash: the manager restarts it (Restart=on-failure, RestartSec=2), and
    # the acknowledged remember is there.
    first = int(shown["MainPID"])
    os.kill(first, signal.SIGKILL)
    _wait_for(manager, lambda: manager.show(UNIT_NAME, "NRestarts", "ActiveState") == {
        "NRestarts": "1", "ActiveState": "active"}, "a restart after SIGKILL")
    assert int(manager.show(UNIT_NAME, "MainPID")["MainPID"]) not in (0, first)
    done = _memvault(manager, "recall", "what does the user manager keep", "--json")
    assert done.returncode == 0, done.stderr
    assert [hit["text"] for hit in json.loads(done.stdout)][:1] == [
        "the user manager keeps this memory"]

    status = json.loads(_memvault(manager, "service", "status", "--json").stdout)
    assert status["installed"] and status["current"]
    assert status["manager"] == ["active", "enabled"]

    # `systemctl --user stop`: SIGTERM, a snapshot, exit 0, the runtime
    # directory (and the socket in it) removed by the manager.
    done = manager.systemctl("stop", UNIT_NAME)
    assert done.returncode == 0, done.stderr
    assert manager.show(UNIT_NAME, "ActiveState", "Result", "ExecMainStatus") == {
        "ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
    assert "snapshot at txid" in _log(manager).split("received SIGTERM")[-1]
    assert not socket.parent.exists()

    done = _memvault(manager, "service", "uninstall")
    assert done.returncode == 0, done.stderr
    assert not (manager.home / ".config/systemd/user" / UNIT_NAME).exists()
    assert manager.show(UNIT_NAME, "LoadState")["LoadState"] == "not-found"


def test_a_daemon_that_cannot_start_is_not_restarted(manager: UserManager,
                                                     unsupported: list[str]) -> None:
    """Exit status 2 (a bad config here) is RestartPreventExitStatus: the unit
    fails once, with the reason in its output, instead of looping."""
    _drop_in(manager, unsupported)
    config = manager.home / ".config/memvault/config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("this is = not [valid toml\n")
    try:
        done = _memvault(manager, "service", "install")
        assert done.returncode == 1
        assert "enable --now memvaultd.service` failed" in done.stderr
        time.sleep(3)  # longer than RestartSec: a restart would have happened
        assert manager.show(UNIT_NAME, "ActiveState", "NRestarts", "ExecMainStatus") == {
            "ActiveState": "failed", "NRestarts": "0", "ExecMainStatus": "2"}
        assert "bad configuration" in _log(manager) and "not valid TOML" in _log(manager)
    finally:
        config.unlink()


def test_a_key_file_vault_is_unlocked_by_the_passphrase_file_install_was_given(
        manager: UserManager, unsupported: list[str]) -> None:
    """No OS keyring and no passphrase in the manager's environment: the key
    file's passphrase reaches the daemon only through the file given to
    `install`. Without one, `install` refuses (exit 2) and
    writes nothing: the unit it would write could never start."""
    _drop_in(manager, unsupported)
    done = manager.systemctl("unset-environment", "MEMVAULT_PASSPHRASE")
    assert done.returncode == 0, done.stderr
    home = manager.root / "headless"  # a vault of its own (MEMVAULT_HOME), outside /tmp
    unit = manager.home / ".config/systemd/user" / UNIT_NAME
    try:
        key_file = make_key_file_vault(home / "data", PASSPHRASE) / "vault.key"
        done = _memvault(manager, "--home", str(home), "service", "install")
        assert done.returncode == 2, f"{done.stderr}\nlog:\n{_log(manager)}"
        assert f"the passphrase of the key file {key_file} is needed" in done.stderr
        assert "--passphrase-file" in done.stderr and not unit.exists()

        secret = manager.home / ".config/memvault/passphrase"
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_text(PASSPHRASE + "\n")
        secret.chmod(0o600)
        done = _memvault(manager, "--home", str(home), "service", "install",
                         "--passphrase-file", str(secret))
        assert done.returncode == 0, f"{done.stderr}\nlog:\n{_log(manager)}"
        assert manager.show(UNIT_NAME, "ActiveState")["ActiveState"] == "active", _log(manager)
        done = _memvault(manager, "--home", str(home), "remember", "unlocked by its file",
                         "--json")
        assert done.returncode == 0, f"{done.stderr}\nlog:\n{_log(manager)}"
        _wait_for(manager, lambda: manager.show(UNIT_NAME, "StatusText")["StatusText"]
                  .startswith("ready"), "the daemon's status reads ready")
        assert f"passphrase from MEMVAULT_PASSPHRASE_FILE ({secret})" in _log(manager)

        done = _memvault(manager, "--home", str(home), "doctor", "--json")
        service = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "service")
        assert service["status"] == "ok", service
        assert f"{secret} (mode 600) opens the key file {key_file}" in service["detail"]
    finally:
        manager.systemctl("set-environment", f"MEMVAULT_PASSPHRASE={PASSPHRASE}")
