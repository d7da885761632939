"""What the `memvault` command says on its small paths, against the real
daemon: out-of-range options refused as usage errors, help without empty
choices, counts in the singular when there is one, and an import line that
cannot be imported named by its number."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.console import Console
from rich.table import Table

from memvault.cli import output
from memvault.cli.main import cli
from memvault.cli.upkeep_commands import _consolidate_summary
from memvault.types import Status
from memvault.upkeep import ConsolidateResult, Consolidation

from .daemon_process import DaemonProcess


def run(daemon: DaemonProcess, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket), *args], input=input)


@pytest.mark.parametrize("score", ["5", "1.5", "-0.1", "nan"])
def test_a_min_score_out_of_0_to_1_is_a_usage_error(daemon: DaemonProcess, score: str) -> None:
    refused = run(daemon, "recall", "anything", "--min-score", score)
    assert refused.exit_code == 2, refused.output
    assert "--min-score" in refused.stderr and "Traceback" not in refused.stderr


def test_a_min_score_in_range_is_passed_on(daemon: DaemonProcess) -> None:
    run(daemon, "remember", "the printer on floor three jams on thick paper")
    hits = json.loads(run(daemon, "recall", "printer jams", "--min-score", "0.01",
                          "--json").stdout)
    assert hits and all(hit["score"] >= 0.01 for hit in hits)
    assert json.loads(run(daemon, "recall", "printer jams", "--min-score", "1",
                          "--json").stdout) == []


def test_band_help_lists_only_the_bands() -> None:
    shown = CliRunner().invoke(cli, ["recall", "--help"], env={"COLUMNS": "200"}).stdout
    (line,) = [line for line in shown.splitlines() if "--band" in line]
    assert "[hot|warm|cold|frozen]" in line, line
    assert "[|" not in line and "||" not in line


def test_one_reinforcement_is_one_time(daemon: DaemonProcess) -> None:
    memory_id = run(daemon, "remember", "the fire drill is on the first monday", "--new"
                    ).stdout.strip()
    said = run(daemon, "reinforce", memory_id)
    assert said.exit_code == 0, said.output
    assert f"reinforced {memory_id} (1 time, txid" in said.stdout, said.stdout
    assert "(2 times, txid" in run(daemon, "reinforce", memory_id).stdout


def test_one_forgotten_by_filter_is_one_memory(daemon: DaemonProcess) -> None:
    run(daemon, "remember", "the locker code is 4411", "--category", "lockers-one")
    said = run(daemon, "forget", "--filter", '{"category": "lockers-one"}', "--dry-run")
    assert "would forget 1 memory\n" in said.stderr, said.stderr


def test_counts_in_summaries_and_tables_agree_with_their_number() -> None:
    one = Consolidation(id="c" * 32, text="merged", type="semantic", topic_key="t", entity="",
                        sources=("a", "b"), facts=2)
    summary = _consolidate_summary(ConsolidateResult(txid=0, dry_run=True, candidates=1,
                                                     consolidations=(one,)))
    assert "(1 candidate)" in summary and "1 cluster " in summary, summary
    status = Status(version="1", model_state="ready", model="m", dimension=384,
                    memory_count=1, applied_txid=1, socket="s", data_dir="d",
                    key_storage="keyfile", cache_hits=1, cache_misses=1, cache_size=1,
                    uptime_s=1.0)
    table = _text(output.status_table(status))
    assert "1 entry, 1 hit, 1 miss" in table, table


def _text(table: Table) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_an_import_line_without_an_id_is_named(daemon: DaemonProcess, tmp_path: Path) -> None:
    lines = [{"id": "import-line-one", "text": "the first line is whole"},
             {"text": "the second line has no id"}]
    path = tmp_path / "memories.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused = run(daemon, "import", str(path))
    assert refused.exit_code == 2, refused.output
    assert "line 2" in refused.stderr and "id" in refused.stderr, refused.stderr
    assert run(daemon, "get", "import-line-one").exit_code == 4, "nothing was sent"
