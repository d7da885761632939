"""`memvault doctor`: each check, what it says to fix, and its exit status;
and `memvault status` with its sync line and the scan progress bar."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from .daemon_process import PASSPHRASE, DaemonProcess
from .key_file_vault import make_key_file_vault
from .test_layout import BLOCKER

CHECKS = ["config", "key storage", "socket", "data dir", "disk", "model", "watch", "daemon",
          "service"]


def memvault(home: Path, *args: str, prelude: str = "",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = prelude + "\nfrom memvault.cli.main import main\nmain()\n"
    env = dict(os.environ, MEMVAULT_HOME=str(home),
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring", **(env or {}))
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=120)


def checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(done.stdout)
    assert report["ok"] is (done.returncode == 0)
    assert [c["name"] for c in report["checks"]] == CHECKS
    return {c["name"]: c for c in report["checks"]}


def test_a_healthy_setup_passes(daemon: DaemonProcess) -> None:
    done = memvault(daemon.home, "doctor", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found = checks(done)
    assert all(c["status"] in ("ok", "warn") for c in found.values()), found
    # The session's daemon holds what earlier tests on this worker wrote: 1 memory or more.
    assert re.search(r"\d+ memor(y|ies), model ready, key in keyfile", found["daemon"]["detail"])
    assert found["model"]["status"] == "ok"
    # No OS keyring in this environment: a warning that says what it means.
    assert found["key storage"]["status"] == "warn"
    assert "key file" in found["key storage"]["detail"] and found["key storage"]["fix"]
    human = memvault(daemon.home, "doctor")
    assert human.returncode == 0 and "daemon" in human.stdout and "fix:" in human.stdout


def test_a_bad_config_and_no_daemon_fail_with_what_to_fix(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("cache_size = -1\n[[watch]]\npath = 'x'\n")
    done = memvault(home, "doctor", "--json")
    assert done.returncode == 1
    found = checks(done)
    assert found["config"]["status"] == "fail"
    assert "cache_size must be an integer" in found["config"]["detail"]
    assert "keeps its previous settings" in found["config"]["fix"]
    assert found["daemon"]["status"] == "fail" and "not running" in found["daemon"]["detail"]
    assert "memvault service install" in found["daemon"]["fix"]
    assert "Traceback" not in done.stderr


def test_socket_directory_permissions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    (home / "run").chmod(0o755)
    found = checks(memvault(home, "doctor", "--json"))
    assert found["socket"]["status"] == "warn" and "chmod 700" in found["socket"]["fix"]

    (home / "run").rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (home / "run").symlink_to(tmp_path / "elsewhere")
    found = checks(memvault(home, "doctor", "--json"))
    assert found["socket"]["status"] == "fail" and "symlink" in found["socket"]["detail"]


def test_missing_watch_folder_is_a_warning(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[[watch]]\npath = "{tmp_path / "gone"}"\n')
    found = checks(memvault(home, "doctor", "--json"))
    assert found["config"]["status"] == "ok"
    assert found["watch"]["status"] == "warn" and "gone" in found["watch"]["detail"]


def test_doctor_runs_in_the_light_client(daemon: DaemonProcess) -> None:
    """Without the daemon's libraries importable, doctor still answers (asking
    the running daemon, and subprocesses, what it cannot import)."""
    done = memvault(daemon.home, "doctor", "--json", prelude=BLOCKER)
    assert done.returncode == 0, done.stdout + done.stderr
    found = checks(done)
    assert found["model"]["detail"].endswith("loaded by the running daemon")


def test_status_has_a_sync_line_and_no_scan_to_follow(daemon: DaemonProcess) -> None:
    done = memvault(daemon.home, "status", "--json")
    assert json.loads(done.stdout)["sync"]["configured"] is False
    assert "not configured" in memvault(daemon.home, "status").stdout
    done = memvault(daemon.home, "status", "--follow-scan")
    assert done.returncode == 0 and "no scan of watched folders is running" in done.stderr


def test_status_follows_a_first_scan(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(150):
        (notes / f"note-{i:03}.md").write_text(f"# Note {i}\n\nThought number {i} about things.")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[[watch]]\npath = "{notes}"\n')
    with DaemonProcess(home).start(wait=False) as proc:
        proc.wait_serving()
        done = memvault(home, "status", "--follow-scan")
        assert done.returncode == 0, done.stderr
        # Either it caught the scan running, or the scan was already over.
        assert ("scanned 150 files" in done.stderr
                or "no scan of watched folders is running" in done.stderr)
        proc.stop()
    assert "scanning 150 files in 1 watched folders" in proc.log


def test_doctor_checks_that_the_installed_service_can_unlock_the_vault(tmp_path: Path) -> None:
    """The unit `service install` wrote for a key-file vault: its passphrase
    file exists, is the user's alone and opens the key file (no daemon is
    started for it); a unit without one could never start."""
    home, user = tmp_path / "home", tmp_path / "user"
    key_file = make_key_file_vault(home / "data", PASSPHRASE) / "vault.key"
    secret = tmp_path / "passphrase"
    secret.write_text(PASSPHRASE + "\n")
    secret.chmod(0o600)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho active\n")
    (bin_dir / "systemctl").chmod(0o755)
    env = {"HOME": str(user), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    unit = user / ".config/systemd/user/memvaultd.service"

    def service_check() -> dict[str, Any]:
        return checks(memvault(home, "doctor", "--json", env=env))["service"]

    assert service_check() == {"name": "service", "status": "ok", "fix": "",
                               "detail": f"not installed ({unit} does not exist)"}
    done = memvault(home, "service", "install", "--platform", "linux", "--passphrase-file",
                    str(secret), env=env)
    assert done.returncode == 0, done.stderr
    found = service_check()
    assert found["status"] == "ok", found
    assert found["detail"] == (f"{unit} unlocks the vault: {secret} (mode 600) opens the key "
                               f"file {key_file}")

    secret.chmod(0o644)
    found = service_check()
    assert found["status"] == "fail" and f"chmod 600 {secret}" in found["detail"]
    assert found["fix"] == "memvault service install --passphrase-file FILE"

    secret.chmod(0o600)
    secret.write_text("not the passphrase\n")
    found = service_check()
    assert found["status"] == "fail" and found["detail"].startswith("wrong passphrase"), found

    secret.unlink()
    found = service_check()
    assert found["status"] == "fail" and "does not exist" in found["detail"]

    # A unit that gives the daemon no passphrase: it exits 2 at every start.
    unit.write_text("".join(line for line in unit.read_text().splitlines(keepends=True)
                            if "MEMVAULT_PASSPHRASE_FILE" not in line))
    found = service_check()
    assert found["status"] == "fail", found
    assert found["detail"] == (f"{unit} gives memvaultd no passphrase, and the vault's key is "
                               f"in the key file {key_file}: the service cannot start")
