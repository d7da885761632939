"""Credentials stay out of memories: the detector's precision and recall on a
corpus, its rules, and every write path through the real daemon (the CLI,
MCP, import, a watched note, a session's turns)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import ClientSession

from memvault import Client
from memvault_base.errors import InvalidArgument
from memvaultd.model import secrets

from .daemon_process import DaemonProcess
from .test_cli import memvault
from .test_mcp import _with_bridge
from .test_watcher import file_memories, scans_done, within, write_config

CORPUS = Path(__file__).parent / "data" / "secrets_corpus.tsv"
# AWS's own documentation example: the form of a key id, not a key.
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
WITH_KEY = f"the deploy user's access key is {AWS_KEY}, region eu-west-1"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """A daemon of this module's own: the memories stored with --allow-secret
    stay out of the shared daemon that other tests export whole."""
    with DaemonProcess(tmp_path_factory.mktemp("secrets") / "home").start() as proc:
        yield proc
        proc.stop()


def _corpus() -> list[tuple[str, str, str]]:
    rows = []
    for line in CORPUS.read_text().splitlines():
        if line and not line.startswith("#"):
            label, kind, text = line.split("\t")
            rows.append((label, kind, text.replace("\\n", "\n")))
    return rows


def test_precision_and_recall_on_the_corpus() -> None:
    rows = _corpus()
    secret = [text for label, _, text in rows if label == "secret"]
    innocent = [text for label, _, text in rows if label == "innocent"]
    assert len(secret) >= 60 and len(innocent) >= 60
    found = sum(1 for text in secret if secrets.find(text))
    false = [text for text in innocent if secrets.find(text)]
    recall = found / len(secret)
    precision = found / (found + len(false))
    print(f"secrets: recall {recall:.3f} ({found}/{len(secret)}), precision {precision:.3f} "
          f"({len(false)} of {len(innocent)} look-alikes flagged: {false})")
    assert recall >= 0.95
    assert precision >= 0.95


@pytest.mark.parametrize("text,kind", [
    (WITH_KEY, secrets.AWS_ACCESS_KEY),
    ("token ghp_" + "a1B2c3D4e5" * 4, secrets.GITHUB_TOKEN),
    ("bot xoxb-123456789012-abcdefghijkl", secrets.SLACK_TOKEN),
    ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", secrets.STRIPE_KEY),
    ("sk-ant-api03-" + "x9Y8w7V6u5" * 3, secrets.ANTHROPIC_KEY),
    ("sk-" + "Q1w2E3r4T5y6U7i8O9p0" * 2, secrets.OPENAI_KEY),
    ("AIza" + "SyD3x4mPl3k3yF0rT3st1ngOnlyAbCdEfGH", secrets.GOOGLE_API_KEY),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLWZha2U", secrets.JWT),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", secrets.PRIVATE_KEY),
    ("postgres://app:s3cr3tPw@db.internal/app", secrets.URL_PASSWORD),
    ("api token Zq8Lm2Xv9Rt4Wp7Yk3Hs6Dn1", secrets.TOKEN),
])
def test_each_kind_is_named_with_its_span(text: str, kind: str) -> None:
    (finding,) = secrets.find(text)
    assert finding.kind == kind
    assert secrets.redact(text).count(f"[redacted: {kind}]") == 1


@pytest.mark.parametrize("text", [
    "fixed in 3f786850e387550fdab836ed7e6dc881de23001b",
    "vault 123e4567-e89b-12d3-a456-426614174000",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "see https://github.com/memvault/memvault/pull/1234 and postgres://localhost:5432/app",
    "postgres://app:${DB_PASSWORD}@db/app",
    "the value is SGVsbG8sIHdvcmxkISBIb3cgYXJlIHlvdT8=",
    "edit daemon/memvaultd/model/secrets.py and /usr/lib/python3.12/site-packages",
    "ask-the-team-about-it and task-force-meeting-2024-notes",
])
def test_look_alikes_are_left_alone(text: str) -> None:
    assert secrets.find(text) == []


def test_a_refusal_names_kind_and_place_never_the_secret() -> None:
    message = secrets.refusal(secrets.find(WITH_KEY))
    assert "aws access key at characters 32..52" in message
    assert AWS_KEY not in message


def test_cli_refuses_a_key_naming_its_kind_and_allow_secret_stores_it(
        vault: DaemonProcess) -> None:
    home = vault.home
    refused = memvault(home, "remember", WITH_KEY)
    assert refused.returncode == 2, refused.stderr
    assert "aws access key" in refused.stderr and AWS_KEY not in refused.stderr
    assert "--allow-secret" in refused.stderr and "Traceback" not in refused.stderr
    stored = memvault(home, "remember", WITH_KEY, "--allow-secret", "--json")
    assert stored.returncode == 0, stored.stderr
    memory_id = json.loads(stored.stdout)["id"]
    assert memvault(home, "update", memory_id, "--text", WITH_KEY + " (rotated)").returncode == 2
    assert memvault(home, "supersede", memory_id, WITH_KEY + " again").returncode == 2
    assert memvault(home, "supersede", memory_id, WITH_KEY + " again",
                    "--allow-secret").returncode == 0


def test_import_refuses_a_record_naming_its_line(vault: DaemonProcess, tmp_path: Path) -> None:
    lines = [json.dumps({"id": f"secret-import-{i}", "text": text})
             for i, text in enumerate(["a plain note about lunch", WITH_KEY])]
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(lines) + "\n")
    refused = memvault(vault.home, "import", str(export))
    assert refused.returncode == 2, refused.stderr
    assert f"{export} line 2" in refused.stderr and "aws access key" in refused.stderr
    with Client(socket=vault.socket) as client:
        with pytest.raises(InvalidArgument, match=r"memories\[1\]\.text"):
            client.import_memories([json.loads(line) for line in lines])
        assert client.import_memories([json.loads(line) for line in lines],
                                      allow_secret=True).added == 2


def test_mcp_remember_refuses_a_key(vault: DaemonProcess) -> None:
    async def body(session: ClientSession) -> None:
        result = await session.call_tool("remember", {"text": WITH_KEY})
        text = "".join(getattr(block, "text", "") for block in result.content)
        assert result.is_error and "aws access key" in text and AWS_KEY not in text

    _with_bridge(str(vault.home), body)


def test_a_sessions_turns_are_stored_redacted(vault: DaemonProcess) -> None:
    with Client(socket=vault.socket) as client:
        client.append_turns("secrets-session", [{"speaker": "user", "text": WITH_KEY}])
        hits = client.recall("the deploy user's access key", include_turns=True,
                             session="secrets-session")
        assert [turn.text for turn in hits.turns] == [
            "the deploy user's access key is [redacted: aws access key], region eu-west-1"]


def test_a_watched_note_with_a_key_is_stored_redacted(home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ops.md").write_text(f"# Ops\n\n{WITH_KEY}\n")
    write_config(home, notes)
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        scans_done(proc, 1)
        within(lambda: len(file_memories(client)) == 1, timeout=30)
        (memory,) = file_memories(client)
        assert AWS_KEY not in memory.text
        assert "[redacted: aws access key]" in memory.text
        assert "ops.md: redacted aws access key" in proc.log
        proc.stop()
