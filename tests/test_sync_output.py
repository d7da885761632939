"""`memvault sync status` for people: labels, local times with how long ago,
counts with their noun, the rare lines only when they hold, 80 columns."""

from __future__ import annotations

import io
import re
import time
from datetime import datetime

from rich.console import Console

from memvault.cli.sync_output import ago, sync_table
from memvault.types import SyncInfo

NOW = time.time()


def _text(info: SyncInfo) -> str:
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(sync_table(info, now=NOW))
    return out.getvalue()


def test_a_stopped_sync_reads_as_sentences_within_80_columns() -> None:
    info = SyncInfo(True, "grpcs://sync.example.org:7443", "stopped", head=12, pushed_seq=57,
                    pending=3, last_push=NOW - 190, last_pull=0.0,
                    last_error="stopped: remote object versions/13 failed to authenticate "
                               "(flipped, truncated or replaced); nothing of it was applied",
                    bad_version=13, repush=True, chain=2, snapshot=10)
    text = _text(info)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    pushed = datetime.fromtimestamp(NOW - 190).isoformat(sep=" ", timespec="seconds")
    for line in (f"last push {pushed} (3 minutes ago)", "last pull never",
                 "pending 3 operations to push", "version 12 on chain 2, snapshot at 10",
                 "bad version 13 does not open", "state stopped: see the last error"):
        label, value = line.split(" ", 1) if not line.startswith(("last", "bad")) else (
            " ".join(line.split(" ", 2)[:2]), line.split(" ", 2)[2])
        assert re.search(rf"^{label} +{re.escape(value)}", text, re.M), (line, text)
    assert "repush" in text
    assert "versions/13" in text and "withheld" not in text
    for raw in ("configured", "True", "pushed_seq", "last_push", str(NOW)[:6]):
        assert raw not in text, raw


def test_not_set_up_says_how_to_set_it_up() -> None:
    assert "not set up (memvault init / memvault join)" in _text(SyncInfo(False))


def test_ago_as_people_say_it() -> None:
    assert ago(2) == "just now"
    assert ago(1) == "just now"
    assert ago(42) == "42 seconds ago"
    assert ago(61) == "1 minute ago"
    assert ago(7_300) == "2 hours ago"
    assert ago(3 * 86_400 + 5) == "3 days ago"
    assert ago(-60).startswith("in the future")


def test_a_silent_device_and_the_witness_read_as_sentences_within_80_columns() -> None:
    info = SyncInfo(True, "grpcs://sync.example.org:7443", "idle", head=12, chain=1,
                    silent=(("3f9c0a1b2c3d4e5f", NOW - 4 * 86_400),), freeze_bound_s=72 * 3600,
                    witness="s3://witness-bucket/memvault")
    text = _text(info)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    flat = " ".join(text.split())
    assert "silent device 3f9c0a1b2c3d4e5f: nothing from it since" in flat, text
    assert "(4 days ago), over the bound of 3 days: idle, gone, or hidden by the remote" in flat
    assert re.search(r"^witness +s3://witness-bucket/memvault", text, re.M), text
    assert "silent" not in _text(SyncInfo(True, "grpcs://sync.example.org:7443", "idle"))
