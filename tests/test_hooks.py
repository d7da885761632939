"""The Claude Code hooks through the real CLI and a real daemon: the inputs
of tests/data/claude_code are written from Claude Code's documented hook
input (docs/hooks.md), the transcript from its JSON-lines format."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault import Client
from memvault.hooks import decisions, settings, transcript
from memvault.hooks.project import normalized_remote
from memvault.hooks.project import of as project_of

from .daemon_process import DaemonProcess

DATA = Path(__file__).parent / "data" / "claude_code"
TOKEN = "ghp_R7xK2mPq9LwZ4vT8nB3cY6dH1sF5gJ0aQe2W"  # made up, of GitHub's form
# The turns of transcript.jsonl: its user and assistant text, without the
# meta line, the /clear echo, the tool call, the tool result, the thinking
# block and the system line.
TURNS = 7


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    with DaemonProcess(tmp_path_factory.mktemp("hooks") / "home").start() as proc:
        yield proc
        proc.stop()


def memvault(home: Path, *args: str, stdin: str = "", **env: str
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memvault.cli.main", *args], input=stdin,
                          env=dict(os.environ, MEMVAULT_HOME=str(home), **env),
                          capture_output=True, text=True, timeout=60)


def example(name: str, **changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    value.update(changes)
    return value


def hook(home: Path, event: str, payload: dict[str, Any] | str, *options: str
         ) -> subprocess.CompletedProcess[str]:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return memvault(home, "hooks", "run", event, *options, stdin=stdin)


def session(tmp_path: Path, name: str) -> tuple[str, Path, Path]:
    """A session id, its project directory ("orbit") and its transcript."""
    project = tmp_path / name / "orbit"
    project.mkdir(parents=True)
    path = tmp_path / name / "transcript.jsonl"
    shutil.copy(DATA / "transcript.jsonl", path)
    return f"{name}-{tmp_path.name}", project, path


def stored_turns(home: Path, session_id: str) -> list[str]:
    with Client(home / "run" / "memvault.sock") as client:
        hits = client.recall("staging database tests token config loader", top_k=100,
                             session=session_id, include_turns=True, mark_accessed=False)
    return [turn.text for turn in hits.turns]


def session_memories(home: Path, session_id: str) -> list[str]:
    with Client(home / "run" / "memvault.sock") as client:
        return [m.memory.text for m in client.list_memories(session=session_id).memories]


def all_texts(home: Path) -> list[str]:
    with Client(home / "run" / "memvault.sock") as client:
        return sorted(m.memory.text for m in client.list_memories(limit=500).memories)


def context_of(done: subprocess.CompletedProcess[str], event: str) -> str:
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    return str(answer["hookSpecificOutput"]["additionalContext"])


# -- Stop and PreCompact ---------------------------------------------------


def test_stop_stores_the_turns_and_what_the_user_asked_to_remember_but_no_secret(
        vault: DaemonProcess, tmp_path: Path) -> None:
    sid, project, path = session(tmp_path, "stop")
    done = hook(vault.home, "stop", example("stop", session_id=sid, cwd=str(project),
                                            transcript_path=str(path)))
    assert done.returncode == 0, done.stderr
    # The request holding a token was refused by the daemon, and said so
    # without repeating the token.
    warning = json.loads(done.stdout)["systemMessage"]
    assert "credential" in warning and "github token" in warning
    assert TOKEN not in done.stdout + done.stderr

    memories = session_memories(vault.home, sid)
    assert "The staging database for orbit listens on port 5433." in memories
    assert "The integration tests run with make itest, never with pytest directly." in memories
    assert len(memories) == 2
    assert not any("ghp_" in text for text in memories)

    turns = stored_turns(vault.home, sid)
    assert len(turns) == TURNS
    assert any("[redacted: github token]" in text for text in turns)
    assert not any("ghp_" in text for text in turns)
    assert not any(text.startswith(("Caveat", "<command-name>")) for text in turns)
    with Client(vault.socket) as client:
        listed = client.list_memories(session=sid).memories
    assert {m.memory.source for m in listed} == {"claude-code"}
    assert {m.memory.payload["project"] for m in listed} == {"orbit"}


def test_the_same_stop_twice_stores_its_turns_once_and_pre_compact_stores_what_is_new(
        vault: DaemonProcess, tmp_path: Path) -> None:
    sid, project, path = session(tmp_path, "twice")
    stop = example("stop", session_id=sid, cwd=str(project), transcript_path=str(path))
    assert hook(vault.home, "stop", stop).returncode == 0
    texts = all_texts(vault.home)
    assert hook(vault.home, "stop", stop).returncode == 0
    assert len(stored_turns(vault.home, sid)) == TURNS
    assert all_texts(vault.home) == texts  # and no memory twice

    with path.open("ab") as file:
        file.write((DATA / "transcript_more.jsonl").read_bytes())
    compact = example("pre_compact", session_id=sid, cwd=str(project),
                      transcript_path=str(path))
    done = hook(vault.home, "pre-compact", compact)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    assert len(stored_turns(vault.home, sid)) == TURNS + 2
    assert ("Going forward, write the changelog entry in the same commit as the change."
            in all_texts(vault.home))

    state = vault.home / "state" / "claude-code"
    assert state.stat().st_mode & 0o777 == 0o700
    assert (vault.home / "state").stat().st_mode & 0o777 == 0o700


def test_a_line_still_being_written_is_read_the_next_time(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    whole = (DATA / "transcript_more.jsonl").read_bytes()
    first, second = whole.split(b"\n")[:2]
    path.write_bytes(first + b"\n" + second[:20])
    chunks = list(transcript.chunks(path, 0))
    assert [t.speaker for c in chunks for t in c.turns] == ["user"]
    assert chunks[-1].end == len(first) + 1
    path.write_bytes(first + b"\n" + second + b"\n")
    again = list(transcript.chunks(path, chunks[-1].end))
    assert [t.speaker for c in again for t in c.turns] == ["assistant"]


# -- SessionStart and UserPromptSubmit --------------------------------------


def test_session_start_injects_the_projects_memories_and_not_the_others(
        vault: DaemonProcess, tmp_path: Path) -> None:
    sid, project, path = session(tmp_path, "start")
    assert hook(vault.home, "stop", example("stop", session_id=sid, cwd=str(project),
                                            transcript_path=str(path))).returncode == 0
    with Client(vault.socket) as client:
        client.remember("Orbit's release checklist lives in docs/release.md.")
        client.remember("The user's sister's birthday is on March 3rd.")
        client.remember("The user goes to the gym on Tuesday and Thursday mornings.")
    done = hook(vault.home, "session-start", example("session_start", cwd=str(project)))
    context = context_of(done, "SessionStart")
    assert "(orbit)" in context.splitlines()[0]
    assert "The staging database for orbit listens on port 5433." in context
    assert "make itest" in context
    assert "docs/release.md" in context  # found by the project's name
    assert "birthday" not in context and "gym" not in context

    small = hook(vault.home, "session-start", example("session_start", cwd=str(project)),
                 "--max-tokens", "40")
    assert len(context_of(small, "SessionStart").encode()) <= 40 * 4


def test_a_prompt_gets_the_memories_that_bear_on_it_and_an_unrelated_one_none(
        vault: DaemonProcess, tmp_path: Path) -> None:
    with Client(vault.socket) as client:
        client.remember("The integration tests run with make itest, never with pytest.")
        client.remember("The user's favourite coffee is a flat white.")
    done = hook(vault.home, "prompt", example("user_prompt_submit"))
    context = context_of(done, "UserPromptSubmit")
    assert "make itest" in context
    assert "coffee" not in context

    unrelated = hook(vault.home, "prompt", example(
        "user_prompt_submit", prompt="Convert this JSON file to YAML, keeping the key order"))
    assert unrelated.returncode == 0 and unrelated.stdout == "", unrelated.stdout
    slash = hook(vault.home, "prompt", example("user_prompt_submit", prompt="/compact"))
    assert slash.returncode == 0 and slash.stdout == ""


def test_the_hooks_work_in_the_sessions_project_scope(vault: DaemonProcess,
                                                      tmp_path: Path) -> None:
    sid, orbit, path = session(tmp_path, "scoped")
    nebula = tmp_path / "scoped" / "nebula"
    nebula.mkdir()
    assert hook(vault.home, "stop", example("stop", session_id=sid, cwd=str(orbit),
                                            transcript_path=str(path))).returncode == 0
    with Client(vault.socket) as client:  # stored by this session or an earlier one
        stored = [m.memory for m in client.list_memories(limit=500).memories
                  if m.memory.text == "The staging database for orbit listens on port 5433."]
        assert stored and {m.scope for m in stored} == {"project:orbit"}
    with Client(vault.socket, scopes=["project:nebula"]) as client:
        client.remember("The nebula integration tests run with make nebula-check.")
    asked = "How do I run the nebula integration tests?"

    def prompt(cwd: Path, *options: str) -> str:
        done = hook(vault.home, "prompt", example("user_prompt_submit", cwd=str(cwd),
                                                  prompt=asked), *options)
        assert done.returncode == 0 and "skipped" not in done.stdout, done.stdout
        return context_of(done, "UserPromptSubmit") if done.stdout else ""

    assert "nebula-check" in prompt(nebula)
    assert "nebula-check" not in prompt(orbit)  # another project's memory
    assert "nebula-check" in prompt(orbit, "--scope", "all")
    assert "nebula-check" in prompt(orbit, "--scope", "auto", "--scope", "project:nebula")
    refused = hook(vault.home, "prompt", example("user_prompt_submit", cwd=str(orbit)),
                   "--scope", "projekt:x")
    assert refused.returncode == 0 and "projekt:x" in json.loads(refused.stdout)["systemMessage"]


def test_the_project_is_the_repository_and_its_remote_without_credentials(
        tmp_path: Path) -> None:
    repo = tmp_path / "orbit"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin",
                    "https://deploy:s3cr3tvalue@github.com/acme/orbit.git"], check=True)
    project = project_of(str(repo / "src"))
    assert (project.name, project.remote) == ("orbit", "github.com/acme/orbit")
    assert project.payload() == {"project": "orbit", "git_remote": "github.com/acme/orbit"}
    assert normalized_remote("git@github.com:acme/orbit.git") == "github.com/acme/orbit"
    assert normalized_remote("ssh://git@example.org:2222/x/y") == "example.org/x/y"
    assert normalized_remote("/srv/git/orbit.git") == ""
    assert project_of(str(tmp_path)).remote == ""


# -- failing open ---------------------------------------------------------


@pytest.mark.parametrize("event", ["session-start", "prompt", "stop", "pre-compact"])
def test_every_hook_fails_open_without_a_daemon(tmp_path: Path, event: str) -> None:
    name = {"session-start": "session_start", "prompt": "user_prompt_submit",
            "stop": "stop", "pre-compact": "pre_compact"}[event]
    shutil.copy(DATA / "transcript.jsonl", tmp_path / "t.jsonl")
    done = hook(tmp_path / "no-daemon", event,
                example(name, cwd=str(tmp_path), transcript_path=str(tmp_path / "t.jsonl")))
    assert done.returncode == 0
    assert json.loads(done.stdout)["systemMessage"].startswith("memvault: ")
    assert "not running" in done.stderr and "Traceback" not in done.stderr


def test_a_hook_fails_open_on_input_that_is_not_json(tmp_path: Path) -> None:
    done = hook(tmp_path / "home", "prompt", "this is not json")
    assert done.returncode == 0
    assert "not JSON" in json.loads(done.stdout)["systemMessage"]


@pytest.mark.parametrize("args", [
    ["bogus-event"], ["prompt", "--max-tokens", "many"], ["prompt", "--min-relevance", "nan"],
    ["prompt", "--min-relevance"], ["prompt", "--an-option-of-a-later-version", "1"],
])
def test_a_command_line_it_cannot_read_never_blocks_the_agent(tmp_path: Path,
                                                              args: list[str]) -> None:
    # Claude Code takes exit code 2 as "block the prompt": a usage error must not be one.
    done = memvault(tmp_path / "home", "hooks", "run", *args,
                    stdin=json.dumps(example("user_prompt_submit")))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["systemMessage"].startswith("memvault: ")


def test_a_hung_daemon_holds_a_hook_for_seconds_at_most(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    hung = socket.socket(socket.AF_UNIX)
    hung.bind(str(home / "run" / "memvault.sock"))
    hung.listen()  # the kernel accepts connections; nothing ever answers
    try:
        start = time.monotonic()
        done = hook(home, "prompt", example("user_prompt_submit"))
        took = time.monotonic() - start
    finally:
        hung.close()
    assert done.returncode == 0 and "systemMessage" in done.stdout
    assert took < 8, took  # 2 s of waiting, and an interpreter's start on a busy machine


# -- install and uninstall --------------------------------------------------


THEIRS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "/usr/local/bin/guard-rm", "timeout": 5}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'done'"}]}],
    },
}


def test_install_merges_into_settings_with_other_hooks_and_uninstall_removes_only_its_own(
        tmp_path: Path) -> None:
    project = tmp_path / "orbit"
    path = project / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(THEIRS, indent=4))
    path.chmod(0o644)

    done = memvault(tmp_path / "home", "hooks", "install", "claude-code", "--project",
                    str(project))
    assert done.returncode == 0, done.stderr
    merged = json.loads(path.read_text())
    assert merged["model"] == "opus" and merged["permissions"] == THEIRS["permissions"]
    assert merged["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    assert merged["hooks"]["Stop"][0] == THEIRS["hooks"]["Stop"][0]
    for event, name in (("SessionStart", "session-start"), ("UserPromptSubmit", "prompt"),
                        ("Stop", "stop"), ("PreCompact", "pre-compact")):
        ours = [h for group in merged["hooks"][event] for h in group["hooks"]
                if settings.is_ours(h["command"])]
        assert len(ours) == 1, event
        assert ours[0]["type"] == "command" and ours[0]["timeout"] == settings.TIMEOUT_S
        assert ours[0]["command"].endswith(f"hooks run {name}")
    assert path.stat().st_mode & 0o777 == 0o644

    before = path.read_bytes()
    again = memvault(tmp_path / "home", "hooks", "install", "claude-code", "--project",
                     str(project), "--json")
    assert json.loads(again.stdout)["changed"] is False
    assert path.read_bytes() == before

    gone = memvault(tmp_path / "home", "hooks", "uninstall", "claude-code", "--project",
                    str(project), "--json")
    assert json.loads(gone.stdout)["removed"] == 4
    assert json.loads(path.read_text()) == THEIRS
    none = memvault(tmp_path / "home", "hooks", "uninstall", "claude-code", "--project",
                    str(project))
    assert none.returncode == 0 and "nothing changed" in none.stdout


def test_install_writes_the_users_settings_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    user = tmp_path / "user"
    dry = memvault(tmp_path / "home", "--home", str(tmp_path / "home"), "hooks", "install",
                   "claude-code", "--dry-run", "--budget", "800", HOME=str(user))
    assert dry.returncode == 0, dry.stderr
    assert not (user / ".claude").exists()
    shown = json.loads(dry.stdout.split("\n", 1)[1])
    command = shown["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert f"--home {tmp_path / 'home'} hooks run session-start --max-tokens 800" in command

    done = memvault(tmp_path / "home", "hooks", "install", "claude-code", "--json",
                    HOME=str(user))
    result = json.loads(done.stdout)
    assert result["path"] == str(user / ".claude" / "settings.json") and result["changed"]
    written = json.loads((user / ".claude" / "settings.json").read_text())
    assert set(written["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact"}

    scoped = memvault(tmp_path / "home", "hooks", "install", "claude-code", "--json",
                      "--scope", "agent:coder", "--budget", "900", HOME=str(user))
    commands = json.loads(scoped.stdout)["hooks"]
    assert all("--scope agent:coder" in command for command in commands.values())
    assert commands["SessionStart"].endswith("--scope agent:coder --max-tokens 900")


def test_a_second_memvault_entry_and_an_older_install_are_replaced_not_added() -> None:
    older = {"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "/old/venv/bin/memvault hooks run stop"},
                   {"type": "command", "command": "other-tool"}]},
        {"hooks": [{"type": "command", "command": "memvault --home /x hooks run stop"}]}]}}
    wanted = settings.commands("/new/bin/memvault")
    merged = settings.installed(older, wanted)
    stop = merged["hooks"]["Stop"]
    assert len(stop) == 1
    assert [h["command"] for h in stop[0]["hooks"]] == [wanted["Stop"], "other-tool"]
    assert settings.installed(merged, wanted) == merged


def test_only_memvaults_own_commands_are_recognised() -> None:
    assert settings.is_ours("/home/u/.venv/bin/memvault hooks run stop")
    assert settings.is_ours("memvault --home '/a b' hooks run prompt --min-relevance 0.6")
    assert not settings.is_ours("memvault-other hooks run stop")
    assert not settings.is_ours("echo memvault hooks run stop")
    assert not settings.is_ours("memvault recall hooks")
    assert not settings.is_ours("'unbalanced")
    assert not settings.is_ours(None)


def test_a_settings_file_that_is_not_json_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    done = memvault(tmp_path / "home", "hooks", "install", "claude-code", "--project",
                    str(tmp_path))
    assert done.returncode == 2 and "not valid JSON" in done.stderr
    assert path.read_text() == "{ not json"


# -- what a session decided --------------------------------------------------


@pytest.mark.parametrize(("text", "kind", "kept"), [
    ("remember that we deploy with uv. Now fix the build", "remember", "We deploy with uv."),
    ("Please remember: staging listens on 5433", "remember", "Staging listens on 5433"),
    ("From now on, run ruff before committing.", "remember",
     "From now on, run ruff before committing."),
    ("No, actually the tests use four workers", "correction", "The tests use four workers"),
    ("that's wrong, the API lives in proto/", "correction", "The API lives in proto/"),
])
def test_requests_and_corrections_are_recognised(text: str, kind: str, kept: str) -> None:
    assert decisions.of(text) == decisions.Decision(kind, kept)


@pytest.mark.parametrize("text", [
    "remember what we did yesterday?", "no, actually stop", "Never mind, let's go on",
    "Can you fix the failing test", "actually I think it is fine", "note that",
])
def test_questions_and_asides_are_not_decisions(text: str) -> None:
    assert decisions.of(text) is None
