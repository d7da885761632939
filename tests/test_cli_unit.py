"""The `memvault` CLI against the fake daemon of test_client_unit: outputs and exit codes.

Most tests drive the click command in-process (CliRunner); a few run the real
`python -m memvault.cli.main` in a subprocess to prove what a shell sees: parseable
`--json`, one-line errors, no traceback, the documented exit codes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memvault.cli.main import cli
from memvault_base.v1 import memory_pb2 as pb

# The fake daemon lives with the client's tests.
from .test_client_unit import PURGE_AT, TRASHED_AT, FakeDaemon, running_fake, short_temp_dir

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
        [sys.executable, "-m", "memvault.cli.main", "--socket", str(socket), *args],
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'base'}{os.pathsep}{ROOT / 'client'}"},
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
    assert result.stdout == "m-1\n"
    assert result.stderr == "reinforced m-1 (prefers pytest — über alles)\n"


def test_remember_says_what_it_superseded(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "remember", "changed: prefers vitest")
    assert result.stdout == "m-new\n"  # the new version's id, alone on stdout
    assert result.stderr == "superseded m-1 (prefers pytest — über alles)\n"
    data = json.loads(run(fake_daemon, "remember", "changed: prefers vitest", "--json").stdout)
    assert (data["outcome"], data["target"], data["id"]) == ("superseded", "m-1", "m-new")


def test_remember_new_is_never_merged(fake_daemon: FakeDaemon) -> None:
    assert run(fake_daemon, "remember", "prefers pytest", "--new").exit_code == 0
    assert fake_daemon.servicer.requests[-1].memory.never_merge is True


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
    assert json.loads(result.stdout) == {"id": "m-1", "txid": 41, "outcome": "reinforced",
                                         "target": "m-1", "reason": "", "reinforced": True}
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
    trashed = run(fake_daemon, "forget", "m-1")
    assert trashed.stdout == "forgot m-1 (txid 42)\n"
    assert trashed.stderr == "in the trash: `memvault trash restore m-1` brings it back\n"
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.id, sent.purge, sent.by) == ("m-1", False, "cli")
    result = run(fake_daemon, "forget", "m-1", "--json")
    assert json.loads(result.stdout) == {"id": "m-1", "txid": 42, "purged": False}
    purged = run(fake_daemon, "forget", "m-1", "--purge")
    assert (purged.stdout, purged.stderr) == ("purged m-1 (txid 42)\n", "")
    assert fake_daemon.servicer.requests[-1].purge
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
        [sys.executable, "-m", "memvault.cli.main", "--socket", str(fake_daemon.socket), "events"],
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'base'}{os.pathsep}{ROOT / 'client'}"},
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


# -- recall: the issue-3 options ------------------------------------------------------------


def test_recall_passes_every_new_option(fake_daemon: FakeDaemon) -> None:
    result = run(
        fake_daemon,
        "recall", "q", "--mode", "keyword", "--type", "fact", "--type", "procedural",
        "--topic", "user.preferences", "--session", "s-1", "--source", "cli",
        "--tier", "working", "--tier", "archived", "--include-superseded",
        "--max-tokens", "300", "--offset", "20", "--preview", "--min-txid", "41", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    sent = fake_daemon.servicer.requests[-1]
    assert sent.mode == "keyword" and list(sent.types) == ["fact", "procedural"]
    assert (sent.topic_key, sent.session_id, sent.source) == ("user.preferences", "s-1", "cli")
    assert list(sent.tiers) == ["working", "archived"] and sent.include_superseded
    assert (sent.max_tokens, sent.offset, sent.min_txid) == (300, 20, 41)
    assert sent.HasField("mark_accessed") and not sent.mark_accessed
    assert not sent.include_turns
    assert isinstance(json.loads(result.stdout), list)  # still a list without --turns


def test_recall_defaults_mark_accessed(fake_daemon: FakeDaemon) -> None:
    assert run(fake_daemon, "recall", "q").exit_code == 0
    sent = fake_daemon.servicer.requests[-1]
    assert not sent.HasField("mark_accessed") and sent.mode == ""


@pytest.mark.parametrize(
    "args",
    [["--mode", "fuzzy"], ["--offset", "-1"], ["--max-tokens", "x"], ["--min-txid", "-5"]],
)
def test_recall_bad_new_options_exit_2(fake_daemon: FakeDaemon, args: list[str]) -> None:
    assert run(fake_daemon, "recall", "q", *args).exit_code == 2
    assert fake_daemon.servicer.requests == []


def test_recall_table_shows_channels_and_more(fake_daemon: FakeDaemon) -> None:
    # Channels only add: they show on a wide terminal, and give way at 80 columns.
    result = CliRunner().invoke(cli, ["--socket", str(fake_daemon.socket), "recall", "more",
                                      "--offset", "3"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "vector,keyword" in result.stdout
    assert result.stdout.splitlines()[1].split()[0] == "4"  # ranks continue past the offset
    assert result.stderr == "more: --offset 4\n"
    assert run(fake_daemon, "recall", "which runner?").stderr == ""


def test_recall_turns_json_is_an_object(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "recall", "more", "--turns", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data) == {"hits", "turns", "has_more"}
    assert data["has_more"] is True and data["hits"][0]["channels"] == ["vector", "keyword"]
    assert data["turns"][0]["speaker"] == "user" and data["turns"][0]["text"] == "I use pytest"
    assert fake_daemon.servicer.requests[-1].include_turns


def test_recall_turns_table(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "recall", "which runner?", "--turns")
    assert result.exit_code == 0
    assert "prefers pytest" in result.stdout and "I use pytest" in result.stdout
    assert "speaker" in result.stdout
    only_turns = run(fake_daemon, "recall", "nothing", "--turns")
    assert "I use pytest" in only_turns.stdout
    assert only_turns.stderr == "no memories matched\n"


# -- lifecycle --------------------------------------------------------------------------------


def test_update_sends_only_the_options_given(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "update", "m-1", "--topic", "ops.deploy", "--importance", "0.2")
    assert result.exit_code == 0, result.output
    assert result.stdout == "updated m-1 (txid 43)\n"
    sent = fake_daemon.servicer.requests[-1]
    assert list(sent.fields) == ["topic_key", "importance"]
    assert sent.memory.topic_key == "ops.deploy" and sent.memory.importance == pytest.approx(0.2)


def test_update_every_option_and_json(fake_daemon: FakeDaemon) -> None:
    result = run(
        fake_daemon,
        "update", "m-1", "--text", "new text", "--type", "episodic", "--topic", "t",
        "--tag", "a", "--tag", "b", "--category", "c", "--payload", '{"k": 1}',
        "--importance", "0.5", "--session", "s", "--source", "src", "--entity", "e",
        "--tier", "archived", "--expires-at", "0", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["txid"] == 43 and data["memory"]["id"] == "m-1"
    sent = fake_daemon.servicer.requests[-1]
    assert sorted(sent.fields) == sorted(
        ["text", "type", "topic_key", "tags", "category", "payload_json", "importance",
         "session_id", "source", "entity", "tier", "expires_at"]
    )  # fmt: skip
    m = sent.memory
    assert (m.text, m.type, m.entity, m.tier, list(m.tags)) == (
        "new text",
        "episodic",
        "e",
        "archived",
        ["a", "b"],
    )


def test_update_clear_tags_and_usage_errors(fake_daemon: FakeDaemon) -> None:
    assert run(fake_daemon, "update", "m-1", "--clear-tags").exit_code == 0
    sent = fake_daemon.servicer.requests[-1]
    assert list(sent.fields) == ["tags"] and list(sent.memory.tags) == []
    fake_daemon.servicer.requests.clear()
    nothing = run(fake_daemon, "update", "m-1")
    assert nothing.exit_code == 2 and nothing.stderr.startswith("memvault: update of m-1")
    assert run(fake_daemon, "update", "m-1", "--clear-tags", "--tag", "x").exit_code == 2
    assert run(fake_daemon, "update", "m-1", "--payload", "[1]").exit_code == 2
    assert fake_daemon.servicer.requests == []
    assert run(fake_daemon, "update", "m-404", "--text", "x").exit_code == 4


def test_supersede(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "supersede", "m-1", "prefers vitest", "--topic", "t", "--tag", "x")
    assert (result.exit_code, result.stdout) == (0, "m-2\n")
    assert result.stderr == "superseded m-1 (prefers pytest — über alles)\n"
    sent = fake_daemon.servicer.requests[-2]  # then the Get of the old text
    assert (sent.id, sent.memory.text, sent.memory.topic_key) == ("m-1", "prefers vitest", "t")
    assert list(sent.memory.tags) == ["x"] and list(sent.cleared) == []
    data = json.loads(run(fake_daemon, "supersede", "m-1", "-", "--json", input="piped\n").stdout)
    assert data == {"id": "m-2", "txid": 44, "outcome": "superseded", "target": "m-1",
                    "reason": "", "reinforced": False}
    sent = fake_daemon.servicer.requests[-1]
    assert sent.memory.text == "piped" and list(sent.cleared) == []  # the rest inherited
    run(fake_daemon, "supersede", "m-1", "x", "--topic", "", "--clear-tags", "--json")
    assert sorted(fake_daemon.servicer.requests[-1].cleared) == ["tags", "topic_key"]
    assert run(fake_daemon, "supersede", "m-404", "x").exit_code == 4


def test_reinforce(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "reinforce", "m-1")
    assert result.stdout == "reinforced m-1 (3 times, txid 45)\n"
    data = json.loads(run(fake_daemon, "reinforce", "m-1", "--json").stdout)
    assert data == {"id": "m-1", "txid": 45, "reinforce_count": 3}
    missing = run(fake_daemon, "reinforce", "m-404")
    assert (missing.exit_code, missing.stderr) == (4, "memvault: no memory with id m-404\n")


def test_forget_by_filter(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "forget", "--filter", FILTER)
    assert result.exit_code == 0
    assert result.stdout == "m-1\nm-2\n"
    until = datetime.fromtimestamp(PURGE_AT).isoformat(sep=" ", timespec="seconds")
    assert result.stderr == (
        "forgot 2 memories (txid 47)\n"
        f"in the trash until {until}: `memvault trash restore ID` (or --all) brings them "
        "back, `memvault trash` lists them\n")
    sent = fake_daemon.servicer.requests[-1]
    assert (sent.id, sent.filter_json, sent.dry_run, sent.purge) == ("", FILTER, False, False)
    dry = run(fake_daemon, "forget", "--filter", FILTER, "--dry-run", "--json")
    assert json.loads(dry.stdout) == {"txid": 0, "ids": ["m-1", "m-2"], "dry_run": True,
                                      "purge_at": 0.0, "purged": False}
    purged = run(fake_daemon, "forget", "--filter", FILTER, "--purge")
    assert purged.stderr == "purged 2 memories (txid 47)\n"
    assert run(fake_daemon, "forget", "--filter", FILTER, "--purge", "--dry-run"
               ).stderr == "would purge 2 memories\n"
    assert fake_daemon.servicer.requests[-1].dry_run
    human_dry = run(fake_daemon, "forget", "--filter", FILTER, "--dry-run")
    assert human_dry.stderr == "would forget 2 memories\n"
    none = run(fake_daemon, "forget", "--filter", '{"tier": "none"}')
    assert (none.stdout, none.stderr) == ("", "forgot 0 memories (txid 47)\n")


def test_forget_takes_exactly_one_of_id_and_filter(fake_daemon: FakeDaemon) -> None:
    assert run(fake_daemon, "forget").exit_code == 2
    assert run(fake_daemon, "forget", "m-1", "--filter", FILTER).exit_code == 2
    assert run(fake_daemon, "forget", "m-1", "--dry-run").exit_code == 2
    assert run(fake_daemon, "forget", "--sweep", "--purge").exit_code == 2
    assert fake_daemon.servicer.requests == []


def test_trash_lists_restores_and_empties(fake_daemon: FakeDaemon) -> None:
    listed = run(fake_daemon, "trash", "--json")
    assert listed.exit_code == 0, listed.output
    (entry,) = json.loads(listed.stdout)
    assert {k: entry[k] for k in ("id", "trashed_at", "trashed_by", "purge_at")} == {
        "id": "m-1", "trashed_at": TRASHED_AT, "trashed_by": "mcp", "purge_at": PURGE_AT}
    assert entry["text"] == entry["memory"]["text"] == "prefers pytest — über alles"
    table = run(fake_daemon, "trash").stdout
    assert table.split("\n")[0].split() == ["id", "forgotten", "by", "purged", "after", "text"]
    assert "m-1" in table and "mcp" in table and "prefers pytest" in table

    restored = run(fake_daemon, "trash", "restore", "m-1")
    assert (restored.stdout, restored.stderr) == ("m-1\n", "restored 1 memory (txid 49)\n")
    everything = run(fake_daemon, "trash", "restore", "--all", "--json")
    assert json.loads(everything.stdout)["txid"] == 49
    assert fake_daemon.servicer.requests[-1].all
    missing = run(fake_daemon, "trash", "restore", "m-404")
    assert (missing.exit_code, missing.stderr) == (
        4, "memvault: id: no memory 'm-404' in the trash\n")
    asked = len(fake_daemon.servicer.requests)
    for usage in (("trash", "restore"), ("trash", "restore", "m-1", "--all")):
        assert run(fake_daemon, *usage).exit_code == 2
    assert len(fake_daemon.servicer.requests) == asked

    refused = run(fake_daemon, "trash", "empty", input="n\n")
    assert refused.exit_code == 1 and "Purge 1 memory for good" in refused.stderr
    assert not any(isinstance(r, pb.EmptyTrashRequest) for r in fake_daemon.servicer.requests)
    emptied = run(fake_daemon, "trash", "empty", input="y\n")
    assert (emptied.exit_code, emptied.stdout) == (0, "m-1\n")
    assert emptied.stderr.endswith("purged 1 memory (txid 50)\n")
    unasked = run(fake_daemon, "trash", "empty", "--yes", "--json")
    assert json.loads(unasked.stdout) == {"txid": 50, "ids": ["m-1"], "purge_at": 0.0,
                                          "purged": True}


def test_topics_and_entities(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "topics")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["topic", "memories", "last", "activity"]
    assert lines[1].split()[:2] == ["user.preferences.testing", "2"]
    assert datetime.fromtimestamp(1700000100.5).strftime("%Y-%m-%d %H:%M:%S") in lines[1]
    data = json.loads(run(fake_daemon, "topics", "--filter", FILTER, "--json").stdout)
    assert data[1] == {"name": "ops.deploy", "count": 1, "last_activity": 1600000000.0}
    assert fake_daemon.servicer.requests[-1].filter_json == FILTER
    entities = json.loads(run(fake_daemon, "entities", "--json").stdout)
    assert entities == [{"name": "user", "count": 3, "last_activity": 1700000000.0}]
    assert "user" in run(fake_daemon, "entities").stdout


def test_get_chain(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "get", "m-1", "--chain")
    assert result.exit_code == 0
    rows = result.stdout.splitlines()[1:]
    assert rows[0].split()[0] == "m-0" and rows[1].split()[:2] == ["*", "m-1"]
    data = json.loads(run(fake_daemon, "get", "m-1", "--chain", "--json").stdout)
    assert [m["id"] for m in data] == ["m-0", "m-1"] and data[0]["superseded_by"] == "m-1"
    assert run(fake_daemon, "get", "m-404", "--chain").exit_code == 4


# -- turns ----------------------------------------------------------------------------------


def test_turns_append_from_stdin(fake_daemon: FakeDaemon) -> None:
    lines = (
        '{"speaker": "user", "text": "I moved to Lisbon", "at": 1700000000}\n'
        "\n"
        '{"speaker": "assistant", "text": "Noted.", "payload": {"n": 2}}\n'
    )
    result = run(fake_daemon, "turns", "append", "s-9", input=lines)
    assert result.exit_code == 0, result.output
    assert result.stdout == "t-0\nt-1\n"
    sent = fake_daemon.servicer.requests[-1]
    assert sent.session_id == "s-9" and [t.speaker for t in sent.turns] == ["user", "assistant"]
    assert sent.turns[0].at == 1700000000.0 and json.loads(sent.turns[1].payload_json) == {"n": 2}


def test_turns_append_one_from_options(fake_daemon: FakeDaemon) -> None:
    result = run(
        fake_daemon, "turns", "append", "s-1", "--speaker", "user", "--text", "hi", "--json"
    )
    assert json.loads(result.stdout) == {"ids": ["t-0"], "txid": 46}
    [turn] = fake_daemon.servicer.requests[-1].turns
    assert (turn.speaker, turn.text, turn.at) == ("user", "hi", 0.0)


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ([], '{"speaker": "u", "text": "ok"}\nnot json\n', "memvault: stdin line 2: not JSON"),
        ([], "[1]\n", "memvault: stdin line 1: not a JSON object"),
        ([], "", "memvault: no turns given"),
        ([], '{"speaker": "u"}\n', "memvault: turns[0]: text must be given"),
        (["--speaker", "u"], "", "--speaker and --text go together"),
    ],
)
def test_turns_append_bad_input_exits_2(
    fake_daemon: FakeDaemon, args: list[str], stdin: str, message: str
) -> None:
    result = run(fake_daemon, "turns", "append", "s", *args, input=stdin)
    assert result.exit_code == 2
    assert message in result.stderr
    assert fake_daemon.servicer.requests == []


# -- export / import -----------------------------------------------------------------------


def test_export_to_stdout_is_json_lines(fake_daemon: FakeDaemon) -> None:
    result = run(fake_daemon, "export")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["m-0", "m-1"]
    assert "vector" not in json.loads(lines[1])
    assert json.loads(lines[1])["last_accessed_at"] == 1700000200.75
    with_vectors = run(fake_daemon, "export", "-", "--vectors").stdout.splitlines()
    assert json.loads(with_vectors[1])["vector"] == [0.25, -0.5, 1.0]
    assert fake_daemon.servicer.requests[-1].include_vectors


def test_export_to_a_private_file(fake_daemon: FakeDaemon, short_dir: Path) -> None:
    target = short_dir / "vault.jsonl"
    target.write_text("old contents\n")
    result = run(fake_daemon, "export", str(target), "--vectors")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"exported 2 memories to {target}\n"
    assert target.stat().st_mode & 0o777 == 0o600  # clear text: the owner's only
    assert [json.loads(line)["id"] for line in target.read_text().splitlines()] == ["m-0", "m-1"]
    assert sorted(p.name for p in short_dir.iterdir()) == ["memvault.sock", "vault.jsonl"]
    data = json.loads(run(fake_daemon, "export", str(target), "--json").stdout)
    assert data == {"file": str(target), "exported": 2}


def test_export_import_round_trip_loses_nothing(fake_daemon: FakeDaemon, short_dir: Path) -> None:
    target = short_dir / "vault.jsonl"
    assert run(fake_daemon, "export", str(target), "--vectors").exit_code == 0
    with short_temp_dir() as other_dir, running_fake(other_dir) as empty:
        empty.servicer.store = []
        result = run(empty, "import", str(target), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"added": 2, "reinforced": 0, "txid": 48}
        assert empty.servicer.imported == [fake_daemon.servicer.store]  # every field, vectors


def test_import_in_batches_of_500(fake_daemon: FakeDaemon, short_dir: Path) -> None:
    source = short_dir / "many.jsonl"
    lines = [json.dumps({"id": f"n-{i}", "text": f"memory {i}"}) for i in range(1001)]
    source.write_text("\n".join(lines) + "\n")
    result = run(fake_daemon, "import", str(source))
    assert result.exit_code == 0, result.output
    assert result.stdout == "added 1001, reinforced 0 (txid 48)\n"
    assert [len(batch) for batch in fake_daemon.servicer.imported] == [500, 500, 1]


def test_import_from_stdin_reinforces_known_ids(fake_daemon: FakeDaemon) -> None:
    exported = run(fake_daemon, "export").stdout
    result = run(fake_daemon, "import", "-", "--json", input=exported)
    assert json.loads(result.stdout) == {"added": 0, "reinforced": 2, "txid": 48}


@pytest.mark.parametrize(
    ("contents", "line", "message"),
    [
        ('{"id": "a", "text": "ok"}\n{"text": \n', 2, ": not JSON"),
        ('{"id": "a", "text": "ok"}\n\n["x"]\n', 3, ": not a JSON object"),
        ('{"id": "a", "text": "ok", "score": 1}\n', 1, ": unknown key(s) score"),
        ('{"id": "x"}\n', 1, ": missing key text"),
        ('{"id": "a", "text": "ok", "tags": "a"}\n', 1, ".tags: must be a list"),
        ('{"id": "a", "text": "ok"}\n{"text": "no id"}\n', 2, ": no id"),
    ],
)
def test_import_checks_every_line_before_sending(
    fake_daemon: FakeDaemon, short_dir: Path, contents: str, line: int, message: str
) -> None:
    source = short_dir / "bad.jsonl"
    source.write_text('{"id": "f", "text": "fine"}\n' * 600 + contents)  # the bad line: batch 2
    result = run(fake_daemon, "import", str(source))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"memvault: {source} line {600 + line}{message}")
    assert fake_daemon.servicer.imported == []


def test_import_missing_file_is_a_usage_error(fake_daemon: FakeDaemon, short_dir: Path) -> None:
    assert run(fake_daemon, "import", str(short_dir / "none.jsonl")).exit_code == 2


def test_import_empty_file(fake_daemon: FakeDaemon, short_dir: Path) -> None:
    source = short_dir / "empty.jsonl"
    source.write_text("")
    result = run(fake_daemon, "import", str(source))
    assert (result.exit_code, result.stdout) == (0, "added 0, reinforced 0\n")
    assert fake_daemon.servicer.imported == []


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
