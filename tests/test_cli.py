"""The `memvault` command as users type it, against the real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .daemon_process import DaemonProcess

FILTER = '{"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}'


def memvault(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MEMVAULT_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "memvault.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_remember_then_recall_with_a_filter_survives_kill_9(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        done = memvault(
            home,
            "remember",
            "prefers vitest over jest",
            "--topic",
            "user.preferences.testing",
            "--category",
            "development",
            "--tag",
            "testing",
            "--payload",
            '{"framework": "vitest"}',
            "--json",
        )
        assert done.returncode == 0, done.stderr
        memory_id = json.loads(done.stdout)["id"]
        memvault(home, "remember", "deploys happen on fridays", "--category", "ops")
        first = _recall(home)
        assert first["id"] == memory_id
        assert first["payload"] == {"framework": "vitest"}
        proc.kill()
    with DaemonProcess(home).start() as proc:
        assert _recall(home)["id"] == memory_id
        proc.stop()


def _recall(home: Path) -> dict[str, object]:
    done = memvault(
        home, "recall", "which test framework does the user like", "--filter", FILTER, "--json"
    )
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert isinstance(hits, list) and hits
    return hits[0]  # type: ignore[no-any-return]


def test_get_forget_status_in_json(daemon: DaemonProcess) -> None:
    home = daemon.home
    memory_id = json.loads(
        memvault(home, "remember", "the office plant is a ficus", "--json").stdout
    )["id"]
    got = json.loads(memvault(home, "get", memory_id, "--json").stdout)
    assert got["text"] == "the office plant is a ficus"
    status = json.loads(memvault(home, "status", "--json").stdout)
    assert status["model_state"] == "ready" and status["memory_count"] >= 1
    assert memvault(home, "forget", memory_id, "--json").returncode == 0
    missing = memvault(home, "get", memory_id)
    assert missing.returncode == 4 and "Traceback" not in missing.stderr


def test_bad_filter_is_a_usage_error_naming_the_operator(daemon: DaemonProcess) -> None:
    done = memvault(daemon.home, "recall", "anything", "--filter", '{"tags": {"like": "x"}}')
    assert done.returncode == 2
    assert "like" in done.stderr and "Traceback" not in done.stderr


def test_without_a_daemon_one_line_says_how_to_start_it(tmp_path: Path) -> None:
    done = memvault(tmp_path / "nothing-here", "recall", "anything")
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "memvaultd" in lines[0]
