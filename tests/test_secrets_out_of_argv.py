"""Secrets and memories out of argv and out of shared places, through the
real CLI and the real daemon: tokens and recovery keys from a file, stdin or
the environment (a warning when given as an argument), `remember -` and
`recall -` from stdin, a cache directory checked as the socket's is, and a
client that talks only to a socket of its own user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .daemon_process import DaemonProcess, daemon_env
from .server_process import ServerProcess, create_token

WARNING = "can be read by every user of this machine"
# A recovery key of the right shape for a vault no remote holds.
SOME_KEY = "mvr1-" + "-".join(["aaaaaaaa"] * 9 + ["aaaaa"])
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a file to another uid")


def cli(home: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args],
                          env=dict(os.environ, MEMVAULT_HOME=str(home), **env), input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_a_token_from_a_file_or_stdin_and_a_warning_for_one_in_argv(
        tmp_path: Path, server: ServerProcess) -> None:
    remote = f"grpc://{server.target}"
    token_file = tmp_path / "token"
    token_file.write_text(create_token(server.data_dir, "a", account="user") + "\n")
    token_file.chmod(0o600)
    with DaemonProcess(tmp_path / "a").start() as a, DaemonProcess(tmp_path / "b").start() as b:
        done = cli(a.home, "init", "--remote", remote, "--token-file", str(token_file), "--json")
        assert done.returncode == 0 and WARNING not in done.stderr, done.stderr
        recovery = json.loads(done.stdout)["recovery_key"]
        # The recovery key on stdin, the token from the environment: no warning.
        token = create_token(server.data_dir, "b", account="user")
        done = cli(b.home, "join", "--remote", remote, "--recovery-key-file", "-", "--json",
                   stdin=recovery + "\n", MEMVAULT_TOKEN=token)
        assert done.returncode == 0 and WARNING not in done.stderr, done.stderr
        # As arguments: still accepted, with a warning naming the better ways.
        done = cli(b.home, "sync", "move", "--remote", "grpc://127.0.0.1:1", "--token", token)
        assert "warning: --token on the command line " + WARNING in done.stderr, done.stderr
        assert "MEMVAULT_TOKEN" in done.stderr and "--token-file" in done.stderr
        a.stop()
        b.stop()


def test_a_recovery_key_in_argv_is_warned_about(tmp_path: Path) -> None:
    home = tmp_path / "nowhere"  # the warning comes before any daemon is asked
    done = cli(home, "join", "--remote", "grpc://127.0.0.1:1", "--recovery-key", SOME_KEY)
    assert "warning: --recovery-key on the command line " + WARNING in done.stderr, done.stderr
    assert "--recovery-key-file" in done.stderr
    done = cli(home, "join", "--remote", "grpc://127.0.0.1:1", "--recovery-key-file",
               str(tmp_path / "missing"))
    assert done.returncode == 2 and "cannot read a recovery key" in done.stderr, done.stderr


def test_remember_and_recall_read_stdin(tmp_path: Path) -> None:
    with DaemonProcess(tmp_path / "home").start() as daemon:
        text = "the deploy key rotates every ninety days"
        done = cli(daemon.home, "remember", "-", stdin=text + "\n")
        assert done.returncode == 0, done.stderr
        memory_id = done.stdout.strip()
        done = cli(daemon.home, "recall", "-", "--json", stdin="how often does the key rotate\n")
        assert done.returncode == 0, done.stderr
        hits = json.loads(done.stdout)
        assert hits[0]["id"] == memory_id and hits[0]["text"] == text
        daemon.stop()


def _refused_cache(tmp_path: Path, cache: Path) -> str:
    env = daemon_env(tmp_path / "home", MEMVAULT_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-P", "-m", "memvaultd.app.main"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    return done.stderr


def test_a_symlinked_cache_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real-cache"
    real.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(real)
    assert "(a symlink?); refusing to use it" in _refused_cache(tmp_path, tmp_path / "cache")


@as_root
def test_a_cache_of_another_user_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, NOBODY, NOBODY)
    assert f"belongs to uid {NOBODY}, not to you" in _refused_cache(tmp_path, cache)
    # The model cache inside it, checked by the model's loader.
    os.chown(cache, 0, 0)
    (cache / "models").mkdir(mode=0o700)
    os.chown(cache / "models", NOBODY, NOBODY)
    stderr = _refused_cache(tmp_path, cache)
    assert "the model cache" in stderr and f"belongs to uid {NOBODY}" in stderr, stderr


def test_an_open_cache_is_made_private(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    with DaemonProcess(tmp_path / "home", MEMVAULT_CACHE_DIR=str(cache)).start() as daemon:
        assert (cache.stat().st_mode & 0o777) == 0o700
        assert ((cache / "models").stat().st_mode & 0o777) == 0o700
        daemon.stop()


@as_root
def test_the_client_refuses_a_socket_of_another_user(daemon: DaemonProcess) -> None:
    assert cli(daemon.home, "status").returncode == 0
    os.chown(daemon.socket, NOBODY, NOBODY, follow_symlinks=False)
    try:
        done = cli(daemon.home, "status")
    finally:
        os.chown(daemon.socket, os.getuid(), os.getgid(), follow_symlinks=False)
    assert done.returncode != 0
    assert f"belongs to uid {NOBODY}, not to you" in done.stderr, done.stderr
    assert "refusing to talk to it" in done.stderr
    assert cli(daemon.home, "status").returncode == 0
