"""A machine without a terminal or an OS keyring (a server, a service, CI):
nothing is ever prompted for there. A passphrase or a recovery key that is
missing, wrong or kept in a file others can read is one line that says how to
give it, and exit status 2, from the daemon and the CLI alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .daemon_process import PASSPHRASE, daemon_env
from .key_file_vault import make_key_file_vault

# A refused start is the interpreter's imports and one Argon2id run: seconds.
EXIT_DEADLINE_S = 60


def _start(home: Path, cache: Path, **env: str) -> tuple[int, list[str]]:
    """memvaultd as a service manager starts it: no terminal, no stdin. The
    model cache is empty, as on a first start: the model then takes longest
    to load (exported through torch), and must not keep the daemon, or print
    anything, after it was refused."""
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "memvaultd.app.main"],
        env=daemon_env(home, MEMVAULT_CACHE_DIR=str(cache), **env),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, text=True)
    try:
        output, _ = proc.communicate(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"memvaultd still running after {EXIT_DEADLINE_S} s:\n{output}")
    return proc.returncode, output.strip().splitlines()


def _passphrase_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "passphrase"
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("case", ["wrong in the environment", "wrong in a file", "none given",
                                  "file readable by the group", "file readable by all"])
def test_a_daemon_that_cannot_unlock_says_why_in_one_line_and_exits_2(
        tmp_path: Path, case: str) -> None:
    home = tmp_path / "home"
    key_file = make_key_file_vault(home / "data", PASSPHRASE) / "vault.key"
    cache = tmp_path / "cache"
    if case == "wrong in the environment":
        env, expected = {"MEMVAULT_PASSPHRASE": "not it"}, [
            "memvaultd: wrong passphrase (from MEMVAULT_PASSPHRASE) for the key file "
            f"{key_file}, or the key file is damaged"]
    elif case == "wrong in a file":
        path = _passphrase_file(tmp_path, "not it")
        env, expected = {"MEMVAULT_PASSPHRASE": "", "MEMVAULT_PASSPHRASE_FILE": str(path)}, [
            f"memvaultd: wrong passphrase (from MEMVAULT_PASSPHRASE_FILE ({path})) for the key "
            f"file {key_file}, or the key file is damaged"]
    elif case == "none given":
        env, expected = {"MEMVAULT_PASSPHRASE": ""}, [
            f"memvaultd: the key file {key_file} needs a passphrase: set MEMVAULT_PASSPHRASE, or "
            "MEMVAULT_PASSPHRASE_FILE to a file holding it, or run from a terminal"]
    else:
        # The right passphrase, in a file others may read: refused all the same.
        mode = 0o640 if case == "file readable by the group" else 0o644
        path = _passphrase_file(tmp_path, PASSPHRASE, mode)
        env, expected = {"MEMVAULT_PASSPHRASE": "", "MEMVAULT_PASSPHRASE_FILE": str(path)}, [
            f"memvaultd: the passphrase file {path} (MEMVAULT_PASSPHRASE_FILE) is mode "
            f"{mode:o}: other users may read it; chmod 600 {path}"]
    code, lines = _start(home, cache, **env)
    assert (code, lines) == (2, expected)
    assert not (home / "run" / "memvault.sock").exists()


def _memvault(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI with no terminal at all: stdin from /dev/null, a session of its own
    (so no /dev/tty either)."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("MEMVAULT_RECOVERY_KEY", "MEMVAULT_PASSPHRASE", "MEMVAULT_TOKEN")}
    return subprocess.run([sys.executable, "-m", "memvault.cli.main",
                           "--home", str(tmp_path / "home"), *args],
                          env=base | env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, start_new_session=True)


def test_join_without_a_terminal_says_how_to_give_the_recovery_key(tmp_path: Path) -> None:
    done = _memvault(tmp_path, "join", "--remote", f"file://{tmp_path}/remote")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "memvault: the recovery key is needed and there is no terminal to ask for it: set "
        "MEMVAULT_RECOVERY_KEY or give --recovery-key-file FILE (- for stdin)"]
    assert done.stdout == ""
