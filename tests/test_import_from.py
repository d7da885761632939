"""`memvault import-from`, against the real daemon, on samples written for
these tests (tests/data/importers/): for each importer a dry run stores
nothing and lists what it would store, the import stores the right memories,
a second import adds nothing, and a bad file stores nothing and exits 2
naming the file and line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from memvault.cli.import_commands import REMEMBER_BATCH_SIZE
from memvault.cli.main import cli
from memvault.importers.agents_md import parse_instructions
from memvault.importers.notes import TARGET_CHARS, parse_note, read_note
from memvault_base.errors import InvalidArgument
from memvault_base.v1 import memory_pb2 as pb

from .daemon_process import DaemonProcess
from .test_client_unit import running_fake, short_temp_dir

DATA = Path(__file__).parent / "data" / "importers"


def memvault(home: Path, *args: str, cwd: Path = DATA) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MEMVAULT_HOME=str(home), COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def stored(home: Path) -> list[dict[str, Any]]:
    done = memvault(home, "export")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def imported(home: Path, *args: str) -> dict[str, int]:
    done = memvault(home, "import-from", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_agents_md(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        bad = memvault(home, "import-from", "agents-md", "CLAUDE.md", "AGENTS-not-utf8.md")
        assert bad.returncode == 2
        assert bad.stderr == "memvault: AGENTS-not-utf8.md:4: not UTF-8 text (invalid start byte)\n"
        assert stored(home) == []

        dry = memvault(home, "import-from", "agents-md", "CLAUDE.md", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        lines = dry.stdout.splitlines()
        assert lines[0] == "would remember 6 memories"
        assert all(len(line) <= 80 for line in lines)
        assert "CLAUDE.md:7" in dry.stdout and "instructions.project.testing" in dry.stdout
        listed = json.loads(memvault(home, "import-from", "agents-md", "CLAUDE.md", "--dry-run",
                                     "--json").stdout)
        assert listed["count"] == 6 and len(listed["memories"]) == 6
        assert stored(home) == []

        assert imported(home, "agents-md", "CLAUDE.md") == {
            "added": 6, "reinforced": 0, "superseded": 0}
        memories = {m["source"]: m for m in stored(home)}
        assert {source: (m["type"], m["topic_key"]) for source, m in memories.items()} == {
            "CLAUDE.md:3": ("procedural", "instructions.project"),
            "CLAUDE.md:7": ("procedural", "instructions.project.testing"),
            "CLAUDE.md:9": ("procedural", "instructions.project.testing"),
            "CLAUDE.md:12": ("procedural", "instructions.project.testing"),
            "CLAUDE.md:22": ("procedural", "instructions.project.code-style"),
            "CLAUDE.md:23": ("procedural", "instructions.project.code-style"),
        }
        assert memories["CLAUDE.md:7"]["text"] == (
            "Run the tests before every commit:\nthe whole suite takes about two minutes.")
        assert memories["CLAUDE.md:12"]["text"].startswith("Run a single test file with:\n```bash")
        assert "# a comment in the block" in memories["CLAUDE.md:12"]["text"]
        assert all(m["tags"] == ["claude-md"] for m in memories.values())

        assert imported(home, "agents-md", "CLAUDE.md") == {
            "added": 0, "reinforced": 6, "superseded": 0}
        assert len(stored(home)) == 6
        proc.stop()


def test_notes(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        bad = memvault(home, "import-from", "notes", "notes-bad")
        assert bad.returncode == 2
        assert bad.stderr == ("memvault: notes-bad/journal/broken.md:3: "
                              "front matter line is not `key: value`\n")
        assert stored(home) == []

        dry = memvault(home, "import-from", "notes", "notes", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        lines = dry.stdout.splitlines()
        assert lines[0] == "would remember 5 memories"
        assert all(len(line) <= 80 for line in lines)
        assert "note:garden.md#Watering" in dry.stdout and "notes.projects.alpha" in dry.stdout
        listed = json.loads(memvault(home, "import-from", "notes", "notes", "--dry-run",
                                     "--json").stdout)
        assert listed["count"] == 5
        assert stored(home) == []

        assert imported(home, "notes", "notes") == {"added": 5, "reinforced": 0, "superseded": 0}
        memories = {m["source"]: m for m in stored(home)}
        assert {source: (m["type"], m["topic_key"], m["tags"])
                for source, m in memories.items()} == {
            "note:garden.md": ("semantic", "notes", ["garden", "home"]),
            "note:garden.md#Watering": ("semantic", "notes", ["garden", "home", "plants"]),
            "note:garden.md#Tools": ("semantic", "notes", ["garden", "home"]),
            "note:projects/alpha/plan.md#Plan": ("semantic", "notes.projects.alpha", ["release"]),
            "note:projects/alpha/plan.md#Plan > Storage": ("semantic", "notes.projects.alpha",
                                                           []),
        }
        garden = memories["note:garden.md"]
        assert garden["text"] == "The garden faces south and gets sun from ten until four."
        assert garden["payload"] == {"note": "garden.md", "front_matter": {
            "title": "Garden", "tags": ["garden", "home"], "permalink": "garden"}}
        storage = memories["note:projects/alpha/plan.md#Plan > Storage"]["text"]
        assert storage.startswith("## Storage\n") and "# not a heading" in storage
        assert not any("Obsidian" in m["text"] or "Not Markdown" in m["text"]
                       for m in memories.values())

        assert imported(home, "notes", "notes") == {"added": 0, "reinforced": 5, "superseded": 0}
        assert len(stored(home)) == 5
        proc.stop()


def test_a_long_note_section_is_split_at_blank_lines_each_part_headed(tmp_path: Path) -> None:
    paragraph = "A sentence about the storage layer and its files. " * 10  # ~500 characters
    note = tmp_path / "long.md"
    note.write_text("## Storage\n\n" + "\n\n".join([paragraph] * 7) + "\n")
    parts = read_note(tmp_path, note)
    assert len(parts) == 3  # cut at the first blank line past 1,500 characters: 3, 3, 1
    assert all(p.text.startswith("## Storage\n") for p in parts)
    assert all(len(p.text) <= TARGET_CHARS + len(paragraph) + 20 for p in parts)
    assert sum(p.text.count(paragraph.strip()) for p in parts) == 7


def test_mem0(home: Path) -> None:
    with DaemonProcess(home).start() as proc:
        bad = memvault(home, "import-from", "mem0", "mem0-bad.json")
        assert bad.returncode == 2
        assert bad.stderr == 'memvault: mem0-bad.json: memory 2 (id m-2): no text under "memory"\n'
        (home.parent / "broken.json").write_text('[\n  {"memory": "x"},\n  {"memory": }\n]\n')
        broken = memvault(home, "import-from", "mem0", str(home.parent / "broken.json"))
        assert broken.returncode == 2 and broken.stderr.startswith("memvault: ")
        assert "broken.json:3: not JSON (Expecting value)" in broken.stderr
        assert stored(home) == []

        dry = memvault(home, "import-from", "mem0", "mem0-export.json", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        lines = dry.stdout.splitlines()
        assert lines[0] == "would remember 3 memories"
        assert all(len(line) <= 80 for line in lines)
        assert "Is a vegetarian" in dry.stdout
        listed = json.loads(memvault(home, "import-from", "mem0", "mem0-export.json",
                                     "--dry-run", "--json").stdout)
        assert [m["entity"] for m in listed["memories"]] == ["alice", "alice", "support-bot"]
        assert stored(home) == []

        assert imported(home, "mem0", "mem0-export.json") == {
            "added": 3, "reinforced": 0, "superseded": 0}
        memories = {m["payload"]["mem0"]["id"]: m for m in stored(home)}
        vegetarian = memories["892db2ae-06d9-49e5-8b3e-585ef9b85b8e"]
        assert (vegetarian["text"], vegetarian["type"], vegetarian["topic_key"],
                vegetarian["entity"], vegetarian["source"], vegetarian["tags"]) == (
            "Is a vegetarian and allergic to peanuts", "semantic", "mem0", "alice",
            "mem0:892db2ae-06d9-49e5-8b3e-585ef9b85b8e", ["food", "health"])
        assert vegetarian["payload"]["mem0"] == {
            "id": "892db2ae-06d9-49e5-8b3e-585ef9b85b8e",
            "hash": "814a3fc2b8bbd2a3b6c0f7f3a6ed1a2f",
            "created_at": "2024-07-20T01:30:36.275141-07:00",
            "updated_at": "2024-07-20T01:30:36.275172-07:00", "user_id": "alice",
            "metadata": {"source": "onboarding chat"}}
        bot = memories["a1f0c3d2-7b6e-4f5a-8c9d-0e1f2a3b4c5d"]
        assert (bot["entity"], bot["payload"]["mem0"]["run_id"]) == ("support-bot", "run-42")

        assert imported(home, "mem0", "mem0-export.json") == {
            "added": 0, "reinforced": 3, "superseded": 0}
        assert len(stored(home)) == 3
        proc.stop()


def test_front_matter_in_its_simple_forms(tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("---\n# a comment\ntitle: 'Quoted'\ntags:\n  - alpha\n  - \"beta\"\n"
                    "aliases: [one, two]\nempty:\n---\nText #gamma, not `#code`.\n")
    [draft] = read_note(tmp_path, note)
    assert draft.payload["front_matter"] == {"title": "Quoted", "tags": ["alpha", "beta"],
                                             "aliases": ["one", "two"], "empty": []}
    assert draft.tags == ("alpha", "beta", "gamma")
    note.write_text("---\ntitle: never closed\n\nText.\n")
    with pytest.raises(InvalidArgument, match=r"n\.md:1: front matter has no closing"):
        read_note(tmp_path, note)


def test_remembered_in_batches_of_50(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("".join(f"- Rule {i}: keep step {i} before step {i + 1}.\n"
                              for i in range(120)))
    with short_temp_dir() as short_dir, running_fake(short_dir) as fake:
        done = CliRunner().invoke(cli, ["--socket", str(fake.socket), "import-from", "agents-md",
                                        str(agents)])
        assert done.exit_code == 0, done.output
        assert done.stdout == "added 120, reinforced 0, superseded 0\n"
        batches = [r for r in fake.servicer.requests if isinstance(r, pb.RememberBatchRequest)]
        assert [len(b.memories) for b in batches] == [REMEMBER_BATCH_SIZE] * 2 + [20]
        assert batches[0].memories[0].type == "procedural"


# Lines of every kind the readers tell apart; "t" lines are text, made unique below.
_KINDS = ["t", "", "# H1", "## H2", "### H3", "- t", "  - t", "1. t", "```", "~~~", "<!-- c -->",
          "---", "tags: [a]", "  continued t", "#tag t"]


def _markdown(kinds: list[str]) -> tuple[str, list[str]]:
    """The text of lines of these kinds, and the unique words of its text lines."""
    words = [f"w{i}" for i, kind in enumerate(kinds) if kind.endswith("t")]
    lines, numbered = [], iter(words)
    for kind in kinds:
        lines.append(kind[:-1] + next(numbered) if kind.endswith("t") else kind)
    return "\n".join(lines), words


@given(st.lists(st.sampled_from(_KINDS), max_size=80))
def test_every_instruction_line_lands_in_one_memory(kinds: list[str]) -> None:
    text, words = _markdown(kinds)
    drafts = parse_instructions(text, "AGENTS.md")
    starts = [int(d.source.removeprefix("AGENTS.md:")) for d in drafts]
    assert starts == sorted(set(starts))
    assert all(d.text.strip() and d.type == "procedural" and d.topic.startswith("instructions")
               for d in drafts)
    found = re.findall(r"\bw\d+\b", " ".join(d.text for d in drafts))
    assert sorted(found) == sorted(words)  # none lost, none twice


@given(st.lists(st.sampled_from(_KINDS), max_size=80))
def test_every_note_line_lands_in_one_memory(kinds: list[str]) -> None:
    text, words = _markdown(kinds)
    try:
        drafts = parse_note(text, "a/b.md", "a/b.md")
    except InvalidArgument as err:  # a first line "---" opens front matter
        assert text.startswith("---") and str(err).startswith("a/b.md:")
        return
    assert all(d.text.strip() and d.topic == "notes.a" for d in drafts)
    found = re.findall(r"\bw\d+\b", " ".join(d.text for d in drafts))
    if text.startswith("---"):  # the front matter's words are in the payload, not the text
        words = re.findall(r"\bw\d+\b", text.split("\n---", 1)[-1])
    assert sorted(found) == sorted(words)
