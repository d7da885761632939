"""A rotation's recovery key survives a daemon killed between the epoch's
grant and its answer (`sync/pending_rotation.py`): real daemon, real CLI, a
directory remote.

The daemon is killed (SIGKILL, `rotate:granted`) once the new epoch's grant
is on the remote and before `memvault recovery-key rotate` prints anything.
Started again, `memvault sync status` shows that epoch's recovery key once
(it opens the epoch on the remote, a `join` with it works); after a second
such crash, `memvault recovery-key rotate` shows the cut-short rotation's
key instead of starting another epoch, and the next one rotates again.
"""

from __future__ import annotations

import json
from pathlib import Path

from memvault import Client
from memvaultd.sync import epochs, recovery
from memvaultd.sync.remotes import open_remote

from .daemon_process import DaemonProcess
from .test_devices import _cli

CRASH = {"MEMVAULT_CRASH_AT": "rotate:granted"}


def _opens(url: str, text: str) -> int:
    """The newest key epoch the recovery key `text` opens on the remote."""
    vault_id, secret = recovery.parse_recovery_key(text)
    remote = open_remote(url, vault_id=vault_id.hex())
    try:
        return epochs.from_recovery(remote, vault_id, secret).number
    finally:
        remote.close()


def _crash_rotating(home: Path) -> None:
    with DaemonProcess(home, **CRASH).start() as crashing:
        rotated = _cli(crashing.socket, "recovery-key", "rotate", "--json")
        assert rotated.returncode != 0 and not rotated.stdout, rotated.stdout
        assert crashing.proc is not None and crashing.proc.wait(30) == -9


def test_a_rotation_killed_before_its_answer_shows_its_key_later(tmp_path: Path) -> None:
    url, home = (tmp_path / "shared").as_uri(), tmp_path / "a"
    with DaemonProcess(home).start() as a:
        client = Client(socket=a.socket, timeout=120)
        first = client.init_sync(url).recovery_key
        kept = client.remember("written before the rotations").id

    # Killed after epoch 1's grant: `sync status` shows its key, once.
    _crash_rotating(home)
    with DaemonProcess(home).start() as a:
        shown = _cli(a.socket, "sync", "status", "--json")
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        text = status["unshown_recovery_key"]
        assert text and text != first and status["unshown_recovery_epoch"] == 1
        assert _opens(url, text) == 1
        printed = _cli(a.socket, "sync", "status")
        assert text not in printed.stdout and "cut short" not in printed.stdout
        assert not list(home.rglob("sync.rotation"))

    # Killed after epoch 2's grant: `recovery-key rotate` shows its key
    # instead of starting epoch 3; the next call starts epoch 3.
    _crash_rotating(home)
    with DaemonProcess(home).start() as a:
        again = _cli(a.socket, "recovery-key", "rotate")
        assert again.returncode == 0, again.stderr
        assert "cut short" in again.stdout and "key epoch 2" in again.stdout, again.stdout
        text = again.stdout.split("Recovery key", 1)[1].splitlines()[1].strip()
        assert _opens(url, text) == 2
        newer = json.loads(_cli(a.socket, "recovery-key", "rotate", "--json").stdout)
        assert newer["epoch"] == 3 and not newer["recovered"], newer
        assert _opens(url, newer["recovery_key"]) == 3
        assert Client(socket=a.socket, timeout=120).get(kept).id == kept

    # A joining device opens the vault with the newest key.
    with DaemonProcess(tmp_path / "b").start() as b:
        joined = Client(socket=b.socket, timeout=120)
        joined.join_sync(url, newer["recovery_key"])
        assert joined.get(kept).id == kept
