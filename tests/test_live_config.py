"""config.toml applied live by a real daemon: cache size, half-lives, fusion,
the watch list; an invalid file is reported and changes nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memvault import Client
from memvault.types import Hit

from .daemon_process import DaemonProcess

# The file is seen ~0.2 s after the save (the debounce's quiet step).
APPLIED_WITHIN_S = 3.0
QUERY = "which editor does the user like"


def eventually(check: Callable[[], bool], timeout: float = APPLIED_WITHIN_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not applied within {timeout} s")
        time.sleep(0.05)


def top_hit(client: Client) -> Hit:
    return client.recall(QUERY, top_k=1, mark_accessed=False)[0]


def test_config_changes_apply_live_and_a_bad_file_changes_nothing(
        home: Path, tmp_path: Path) -> None:
    config = home / "config.toml"
    home.mkdir(parents=True)
    config.write_text("cache_size = 64\n")
    with DaemonProcess(home).start() as proc, Client(socket=proc.socket) as client:
        client.remember("the user's editor is helix", topic="user.tools.editor")
        assert client.status().cache_size == 64
        before = top_hit(client).breakdown
        assert before.decay > 0.999  # seconds old at a 90-day half-life

        config.write_text('cache_size = 7\n\n[decay]\nsemantic = 0.0001\n\n'
                          '[fusion]\nmethod = "rrf"\n')
        eventually(lambda: client.status().cache_size == 7)
        after = top_hit(client).breakdown
        assert after.decay < 0.99  # 0.0001 days is under 9 s: it fades visibly
        assert after.fusion != pytest.approx(before.fusion)

        config.write_text("cache_size = 'lots'\n")
        eventually(lambda: "previous configuration stays" in proc.log)
        assert "cache_size must be an integer" in proc.log
        assert client.status().cache_size == 7
        assert top_hit(client).breakdown.decay < 0.99  # the half-lives in force stay

        notes = tmp_path / "notes"
        notes.mkdir()
        (notes / "tools.md").write_text("# Tools\n\nThe user's shell is fish.")
        config.write_text(f'cache_size = 7\n\n[[watch]]\npath = "{notes}"\n')
        eventually(lambda: any("fish" in h.memory.text for h in client.recall(
            "which shell", topic="notes.tools", mark_accessed=False)), timeout=10)
        assert top_hit(client).breakdown.decay > 0.999  # [decay] is gone: defaults again

        config.write_text("cache_size = 7\n")  # the folder is no longer watched
        eventually(lambda: proc.log.count("configuration applied (") >= 3)
        (notes / "tools.md").write_text("# Tools\n\nThe user's shell is zsh.")
        time.sleep(1.5)
        texts = [h.memory.text for h in client.recall("which shell", topic="notes.tools")]
        assert texts == ["# Tools\n\nThe user's shell is fish."]  # kept, not followed
        proc.stop()


def test_a_bad_file_at_start_still_refuses_to_start(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("[[watch]]\nglob = '*.md'\n")
    proc = DaemonProcess(home).start(wait=False)
    assert proc.proc is not None and proc.proc.wait(60) == 2
    assert "watch[0].path is required" in proc.log
