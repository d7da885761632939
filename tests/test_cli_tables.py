"""The `memvault` tables as a new user sees them, at 60, 80 and 200 columns
(a narrow pane, a pipe or a default terminal, a wide one), against the real
daemon: every row keeps its key columns (the short id prefix the commands
accept, the score, the topic, the time) and the text takes what is left.
Then the prefix read off a table works with `get`, `forget` and every other
command that takes an id, and an ambiguous or unknown one is refused."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memvault import Client
from memvault.cli.main import cli
from memvault.types import Memory

from .daemon_process import DaemonProcess

WIDTHS = (60, 80, 200)
DAY = 86_400.0
NO_BACKGROUND_SWEEP = "[sweep]\nevery_hours = 0\n"
TOPIC = "ops.deploy.production"
LONG = (" The runbook in the wiki has the details, the rollback steps and the people "
        "to call when the health checks stay red for more than five minutes.")
DEPLOY = ["The deploy script lives in ops/deploy.sh." + LONG,
          "The deploy script ops/deploy.sh needs sudo. Run it from the repo root." + LONG,
          "Run the deploy script ops/deploy.sh after the tests pass." + LONG]
# Ids a test chose, sharing their first characters, as an import keeps them.
TWIN_A = "feed0001" + "a" * 24
TWIN_B = "feed0002" + "b" * 24


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """A vault of its own (a sweep and a consolidation read the whole vault),
    holding cold deploy notes, minor old ones for the sweep, and two ids
    that share a prefix."""
    home = tmp_path_factory.mktemp("tables") / "home"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(NO_BACKGROUND_SWEEP)
    with DaemonProcess(home).start() as daemon, Client(socket=daemon.socket) as client:
        client.import_memories(
            [_old(text, 30, topic_key=TOPIC) for text in DEPLOY]
            + [_old("an old scribble about the vending machine on floor two", 300,
                    importance=0.05, topic_key="office.trivia"),
               _old("the twin memory written first", 5, id=TWIN_A),
               _old("the twin memory written second", 5, id=TWIN_B)])
        client.append_turns("s-deploy", [
            {"speaker": "user", "text": "how do we deploy to production again?" + LONG}])
        yield daemon
        daemon.stop()


def _old(text: str, days: float, **fields: object) -> Memory:
    at = time.time() - days * DAY
    memory_id = str(fields.pop("id", uuid.uuid4().hex))
    return Memory(id=memory_id, text=text, created_at=at, last_reinforced_at=at,
                  **fields)  # type: ignore[arg-type]


def run(daemon: DaemonProcess, *args: str, width: int = 80, input: str | None = None
        ) -> Result:
    return CliRunner().invoke(cli, ["--socket", str(daemon.socket), *args],
                              env={"COLUMNS": str(width)}, input=input)


def ok(daemon: DaemonProcess, *args: str, width: int = 80) -> Result:
    result = run(daemon, *args, width=width)
    assert result.exit_code == 0, result.output
    return result


def as_json(daemon: DaemonProcess, *args: str) -> object:
    return json.loads(ok(daemon, *args, "--json").stdout)


def row_of(table: str, *cells: str) -> str:
    """The one line of `table` holding the first cell; it holds every other."""
    lines = [line for line in table.splitlines() if cells[0] in line]
    assert len(lines) == 1, f"{cells[0]!r} in {len(lines)} lines of\n{table}"
    for cell in cells[1:]:
        assert cell in lines[0], f"{cell!r} missing from {lines[0]!r} in\n{table}"
    return lines[0]


def fits(table: str, width: int) -> None:
    too_wide = [line for line in table.splitlines() if len(line) > width]
    assert not too_wide, f"wider than {width}: {too_wide}"


def day_of(epoch: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(epoch))


@pytest.mark.parametrize("width", WIDTHS)
def test_recall_keeps_rank_id_score_and_topic(vault: DaemonProcess, width: int) -> None:
    hits = as_json(vault, "recall", "how do we deploy", "--preview")
    assert isinstance(hits, list) and len(hits) == 3
    table = ok(vault, "recall", "how do we deploy", "--preview", width=width).stdout
    fits(table, width)
    assert len(table.splitlines()) == 1 + len(hits), "one line per hit, under a header"
    assert hits[0]["topic_key"] == TOPIC
    for rank, hit in enumerate(hits, 1):
        row = row_of(table, hit["id"][:8], f"{hit['score']:.3f}", hit["topic_key"])
        assert row.split()[0] == str(rank)
        assert hit["text"][:8] in row, "the text gets what is left"
    if width == 200:
        assert "vector" in table, "a wide terminal also shows the channels"


@pytest.mark.parametrize("width", WIDTHS)
def test_chain_keeps_id_and_created(vault: DaemonProcess, width: int) -> None:
    first = as_json(vault, "remember", "the staging host is stage-1." + LONG, "--new")
    second = as_json(vault, "supersede", first["id"], "the staging host is stage-2." + LONG)
    table = ok(vault, "get", second["id"], "--chain", width=width).stdout
    fits(table, width)
    for memory_id in (first["id"], second["id"]):
        created = as_json(vault, "get", memory_id)["created_at"]
        row_of(table, memory_id[:8], day_of(created))
    assert row_of(table, second["id"][:8]).startswith("*")


@pytest.mark.parametrize("width", WIDTHS)
def test_consolidate_keeps_id_sources_and_topic(vault: DaemonProcess, width: int) -> None:
    done = as_json(vault, "consolidate", "--dry-run", "--min-age-days", "0")
    mine = [c for c in done["consolidations"] if c["topic_key"] == TOPIC]
    assert mine, done
    table = ok(vault, "consolidate", "--dry-run", "--min-age-days", "0", width=width).stdout
    fits(table, width)
    for merged in mine:
        row_of(table, merged["id"][:8], TOPIC, f" {len(merged['sources'])} ")


@pytest.mark.parametrize("width", WIDTHS)
def test_sweep_keeps_id_and_risk(vault: DaemonProcess, width: int) -> None:
    plan = as_json(vault, "forget", "--sweep", "--dry-run")
    assert plan["swept"], plan
    table = ok(vault, "forget", "--sweep", "--dry-run", width=width).stdout
    fits(table, width)
    for swept in plan["swept"]:
        row_of(table, swept["id"][:8], f"{swept['risk']:.2f}")


@pytest.mark.parametrize("width", WIDTHS)
def test_trash_keeps_id_and_when(vault: DaemonProcess, width: int) -> None:
    memory_id = as_json(vault, "remember", "a note to throw away." + LONG, "--new")["id"]
    ok(vault, "forget", memory_id)
    (trashed,) = [t for t in as_json(vault, "trash") if t["id"] == memory_id]
    table = ok(vault, "trash", width=width).stdout
    fits(table, width)
    row_of(table, memory_id[:8], day_of(trashed["trashed_at"]))


@pytest.mark.parametrize("width", WIDTHS)
def test_turns_keep_score_session_and_speaker(vault: DaemonProcess, width: int) -> None:
    found = as_json(vault, "recall", "deploy to production", "--turns", "--preview")
    (turn,) = found["turns"]
    out = ok(vault, "recall", "deploy to production", "--turns", "--preview",
             width=width).stdout
    fits(out, width)
    row_of(out, "s-deploy", f"{turn['score']:.3f}", "user")


@pytest.mark.parametrize("width", WIDTHS)
def test_topics_keep_name_and_count(vault: DaemonProcess, width: int) -> None:
    facets = as_json(vault, "topics")
    table = ok(vault, "topics", width=width).stdout
    fits(table, width)
    for facet in facets:
        row_of(table, facet["name"], f" {facet['count']} ")


@pytest.mark.parametrize("width", WIDTHS)
def test_status_keeps_every_field(vault: DaemonProcess, width: int) -> None:
    count = as_json(vault, "status")["memory_count"]
    table = ok(vault, "status", width=width).stdout
    fits(table, width)
    row_of(table, "memories", str(count))
    for name in ("model", "trash", "socket", "query cache", "sync"):
        assert re.search(rf"^{name}\s", table, re.MULTILINE), (name, table)


def _prefix_from_table(vault: DaemonProcess, query: str) -> str:
    """The id prefix of the first hit, as a person reads it off the table."""
    first = ok(vault, "recall", query, "--preview").stdout.splitlines()[1]
    (prefix,) = [cell for cell in first.split() if re.fullmatch(r"[0-9a-f]{8}", cell)]
    return prefix


def test_a_prefix_from_the_table_works_with_get_and_forget(vault: DaemonProcess) -> None:
    kept = as_json(vault, "remember", "the parking garage closes at nine on weekdays", "--new")
    gone = as_json(vault, "remember", "the espresso machine needs descaling every month",
                   "--new")
    prefix = _prefix_from_table(vault, "when does the espresso machine need descaling")
    assert gone["id"].startswith(prefix)
    assert as_json(vault, "get", prefix)["id"] == gone["id"]
    assert gone["id"] in ok(vault, "get", prefix).stdout
    forgot = ok(vault, "forget", prefix)
    assert gone["id"] in forgot.stdout, "says which memory it forgot, by its whole id"
    assert run(vault, "get", gone["id"]).exit_code == 4
    assert as_json(vault, "get", kept["id"])["id"] == kept["id"], "only that one"
    assert as_json(vault, "trash", "restore", prefix)["memories"][0]["id"] == gone["id"]
    assert as_json(vault, "get", gone["id"])["id"] == gone["id"]


def test_every_command_that_takes_an_id_takes_a_prefix(vault: DaemonProcess) -> None:
    memory_id = as_json(vault, "remember", "the coffee budget is 40 euros a month",
                        "--topic", "office.coffee", "--new")["id"]
    prefix = memory_id[:8]
    assert as_json(vault, "reinforce", prefix)["id"] == memory_id
    assert as_json(vault, "update", prefix, "--tag", "budget")["memory"]["tags"] == ["budget"]
    assert as_json(vault, "get", prefix, "--chain")[0]["id"] == memory_id
    assert as_json(vault, "get", prefix, "--sources") == []
    newer = as_json(vault, "supersede", prefix, "the coffee budget is 50 euros a month")
    assert as_json(vault, "get", newer["id"])["supersedes"] == memory_id
    newest = as_json(vault, "remember", "the coffee budget is 60 euros a month", "--new",
                     "--supersedes", newer["id"][:8])
    assert as_json(vault, "get", newest["id"])["supersedes"] == newer["id"]
    ok(vault, "forget", newest["id"][:8])
    purged = as_json(vault, "forget", newest["id"][:8], "--purge")
    assert (purged["id"], purged["purged"]) == (newest["id"], True)


def test_an_ambiguous_prefix_names_the_candidates_and_changes_nothing(
        vault: DaemonProcess) -> None:
    for command in (["get", "feed000"], ["forget", "feed000"], ["update", "feed", "--tag", "x"],
                    ["reinforce", "feed0"]):
        refused = run(vault, *command)
        assert refused.exit_code == 2, (command, refused.output)
        assert TWIN_A in refused.stderr and TWIN_B in refused.stderr, refused.stderr
    for twin in (TWIN_A, TWIN_B):
        memory = as_json(vault, "get", twin)
        assert (memory["reinforce_count"], memory["tags"]) == (0, [])
    assert as_json(vault, "get", "feed0002")["id"] == TWIN_B


def test_an_unknown_or_short_prefix_is_refused(vault: DaemonProcess) -> None:
    unknown = run(vault, "forget", "0000ffff")
    assert unknown.exit_code == 4 and "0000ffff" in unknown.stderr
    short = run(vault, "get", "fee")
    assert short.exit_code == 2 and "4" in short.stderr, short.stderr
    assert "Traceback" not in unknown.stderr + short.stderr


def test_a_whole_id_is_taken_as_it_is(vault: DaemonProcess, tmp_path: Path) -> None:
    # "abcd" is a whole id, and the first characters of "abcdef": it names itself.
    lines = [json.dumps({"id": memory_id, "text": text}) for memory_id, text in
             (("abcd", "a memory with a short id of its own"),
              ("abcdef", "a memory whose id begins with another's"))]
    (tmp_path / "short.jsonl").write_text("\n".join(lines) + "\n")
    ok(vault, "import", str(tmp_path / "short.jsonl"))
    assert as_json(vault, "get", "abcd")["text"] == "a memory with a short id of its own"
    assert as_json(vault, "get", "abcde")["id"] == "abcdef"
