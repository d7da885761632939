"""The `memvault` CLI against the fake daemon of test_client_unit: outputs and exit codes.

Most tests drive the click command in-process (CliRunner); a few run the real
`python -m memvault.cli` in a subprocess to prove what a shell sees: parseable
`--json`, one-line errors, no traceback, the documented exit codes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memvault.cli import cli
from memvault.v1 import memory_pb2 as pb

# The fake daemon lives with the client's tests.
from .test_client_unit import FakeDaemon, running_fake, short_temp_dir

ROOT = Path(__file__).resolve().parents[1]
FILTER = '{"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}'


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with short_temp_dir() as path:
        yield path


@pytest.fixture
def fake_daemon(short_dir: Path) -> Iterator[FakeDaemon]:
    with running_fake(short_dir) as daemon:
        yield daemon


def run(daemon: FakeDaemon | Path, *args: str, input: str | None = None) -> Result:
    socket = daemon.socket if isinstance(daemon, FakeDaemon) else daemon
    return CliRunner().invoke(cli, ["--socket", str(socket), *args], input=input)


def run_process(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault.cli", "--socket", str(socket), *args],
        env={**os.environ, "PYTHONPATH": str(ROOT / "client")},
        capture_output=True,
        text=True,
        timeout=30,
    )


# -- remember -----------------------------------------------------------------------


def test_remember_prints_the_id(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "remember", "prefers pytest")
    assert result.exit_code == 0
    assert result.stdout == "m-new\n"
    assert result.stderr == ""


def test_remember_says_when_it_reinforced(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "remember", "again: prefers pytest")
    assert result.stdout == "m-new\n"
    assert "reinforced existing memory" in result.stderr


def test_remember_json_and_every_option(fake_daemon: FakeDaemon) -> None:
    result = run(
        fake_daemon,
        "remember", "again: prefers pytest",
        "--type", "semantic", "--topic", "user.preferences.testing",
        "--tag", "testing", "--tag", "python", "--category", "development",
        "--payload", '{"lang": "python"}', "--importance", "0.9", "--session", "s-1",
        "--source", "cli", "--entity", "user", "--tier", "working",
        "--expires-at", "1800000000", "--supersedes", "m-0", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"id": "m-new", "txid": 41, "reinforced": True}
    sent = fake_daemon.servicer.requests[-1].memory
    assert (sent.type, sent.topic_key, sent.category) == (
        "semantic",
        "user.preferences.testing",
        "development",
    )
    assert list(sent.tags) == ["testing", "python"]
    assert json.loads(sent.payload_json) == {"lang": "python"}
    assert sent.importance == pytest.approx(0.9)
    assert (sent.session_id, sent.source, sent.entity, sent.tier) == (
        "s-1",
        "cli",
        "user",
        "working",
    )
    assert (sent.expires_at, sent.supersedes) == (1800000000.0, "m-0")


def test_remember_reads_stdin(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "remember", "-", input="from a pipe\n")
    assert result.exit_code == 0
    assert fake_daemon.servicer.requests[-1].memory.text == "from a pipe"


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]", '"text"'])
def test_bad_payload_is_one_line_exit_2_and_nothing_sent(
    fake_daemon: FakeDaemon, payload: str
) -> None:
    result = run(fake_daemon, "remember", "x", "--payload", payload)
    assert result.exit_code == 2
    assert result.stderr.startswith("memvault: --payload ")
    assert result.stderr.count("\n") == 1
    assert fake_daemon.servicer.requests == []


def test_daemon_invalid_argument_exits_2(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "remember", "invalid text")
    assert result.exit_code == 2
    assert result.stderr == "memvault: text: must not be 'invalid'\n"


def test_other_daemon_errors_exit_1(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "remember", "locked")
    assert result.exit_code == 1
    assert result.stderr == "memvault: vault is locked\n"


def test_usage_errors_exit_2(fake_daemon: FakeDaemon) -> None:
    assert run(fake_daemon, "remember").exit_code == 2
    assert run(fake_daemon, "remember", "x", "--importance", "7").exit_code == 2
    assert run(fake_daemon, "recall", "q", "--top-k", "0").exit_code == 2
    assert run(fake_daemon, "nonsense").exit_code == 2
    assert fake_daemon.servicer.requests == []


# -- recall -------------------------------------------------------------------------


def test_recall_json_is_a_list_of_flat_hits(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "recall", "which runner?", "--json")
    assert result.exit_code == 0
    [hit] = json.loads(result.stdout)
    assert list(hit)[:8] == [
        "id", "text", "score", "type", "topic_key", "payload", "tags", "category",
    ]  # fmt: skip
    assert hit["similarity"] == 0.8 and hit["decay"] == 0.5 and hit["reinforcement"] == 1.25
    assert hit["payload"]["nested"] == {"ok": True}
    assert "über" in result.stdout  # ensure_ascii=False: no \u escapes


def test_recall_json_empty_is_empty_list(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "recall", "nothing", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_recall_passes_options_and_filter_verbatim(fake_daemon: FakeDaemon) -> None:
    args = ["recall", "q", "--top-k", "5", "--min-score", "0.2", "--filter", FILTER, "--json"]
    assert run(fake_daemon, *args).exit_code == 0
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.top_k, sent.min_score, sent.filter_json) == (5, 0.2, FILTER)


def test_recall_bad_filter_is_the_daemons_invalid_argument(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "recall", "q", "--filter", "{bad")
    assert result.exit_code == 2
    assert result.stderr == "memvault: filter_json: does not parse\n"


def test_recall_table(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "recall", "which runner?")
    assert result.exit_code == 0
    assert "0.500" in result.stdout and "user.preferences.testing" in result.stdout
    assert "prefers pytest" in result.stdout
    assert run(fake_daemon, "recall", "nothing").stdout == ""


# -- get, forget, status --------------------------------------------------------------


def test_get(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "get", "m-1", "--json")
    assert result.exit_code == 0
    memory = json.loads(result.stdout)
    assert memory["id"] == "m-1" and memory["tags"] == ["testing", "python"]
    assert "vector" not in memory
    assert json.loads(run(fake_daemon, "get", "m-1", "--vector", "--json").stdout)["vector"] == [
        0.25,
        -0.5,
        1.0,
    ]
    human = run(fake_daemon, "get", "m-1")
    assert "user.preferences.testing" in human.stdout and '"lang": "python"' in human.stdout


def test_not_found_exits_4(fake_daemon: FakeDaemon) -> None:
    for command in ("get", "forget"):
        result = run(fake_daemon, command, "m-404")
        assert result.exit_code == 4
        assert result.stderr == "memvault: no memory with id m-404\n"


def test_forget(fake_daemon: FakeDaemon) -> None:
    assert run(fake_daemon, "forget", "m-1").stdout == "forgot m-1 (txid 42)\n"
    result = run(fake_daemon, "forget", "m-1", "--json")
    assert json.loads(result.stdout) == {"id": "m-1", "txid": 42}
    assert run(fake_daemon, "forget", "corrupt").exit_code == 1


def test_status(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "status")
    assert result.exit_code == 0
    assert "all-MiniLM-L6-v2 (ready)" in result.stdout
    assert "75.0%" in result.stdout and "1h 2m" in result.stdout
    data = json.loads(run(fake_daemon, "status", "--json").stdout)
    assert data["cache_hit_rate"] == 0.75 and data["memory_count"] == 12


def test_events_json_lines(fake_daemon: FakeDaemon) -> None:
    # The stream stays open, as the daemon's does, until Ctrl-C: only a real
    # process can be sent SIGINT, so this one runs in a subprocess.
    fake_daemon.servicer.events = [pb.Event(type="hit", query="q", at=1.0)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memvault.cli", "--socket", str(fake_daemon.socket), "events"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "client")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert json.loads(line) == {"type": "hit", "query": "q", "id": "", "at": 1.0}
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "Traceback" not in stderr


# -- no daemon --------------------------------------------------------------------------


def test_no_daemon_is_one_line_exit_3(short_dir: Path) -> None:
    socket = short_dir / "none.sock"
    result = run(socket, "status")
    assert result.exit_code == 3
    assert result.stderr == (
        f"memvault: memvault daemon is not running (no socket at {socket}). "
        "Start it with `memvaultd` or ./scripts/run\n"
    )


def test_home_option_finds_the_socket(short_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["--home", str(short_dir), "status"])
    assert result.exit_code == 3
    assert str(short_dir / "run" / "memvault.sock") in result.stderr


def test_help_documents_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "Exit codes:" in result.stdout
    assert "4  no memory with that id" in result.stdout


# -- through a real process ----------------------------------------------------------


def test_subprocess_json_against_fake_daemon(fake_daemon: FakeDaemon) -> None:
    out = run_process(fake_daemon.socket, "recall", "which runner?", "--filter", FILTER, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["id"] == "m-1"
    assert fake_daemon.servicer.requests[-1].filter_json == FILTER
    missing = run_process(fake_daemon.socket, "get", "m-404", "--json")
    assert (missing.returncode, missing.stdout) == (4, "")


def test_subprocess_without_daemon(short_dir: Path) -> None:
    out = run_process(short_dir / "none.sock", "recall", "q", "--json")
    assert out.returncode == 3
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "memvaultd" in out.stderr
