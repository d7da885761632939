"""`sync leave` and `sync move` are each one crash-safe step: real daemons,
directory remotes, the real model.

The daemon is killed with SIGKILL at each step of a leave and of a move (the
crash points of `memvaultd/storage/crash_points.py`), started again, and must
serve every memory it acknowledged, syncing as it did before the step (and
then the step works when asked again) or as the step left it (and then
`init` or `join` works, or sync goes on to the new remote).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memvault import Client
from memvault_base.errors import MemvaultError
from memvaultd.storage.crash_points import CRASH_ENV

from .daemon_process import DaemonProcess
from .test_remote_faults import batch, eventually

START_S = 120.0
SYNC_S = 60.0


def _missing(client: Client, ids: list[str]) -> list[str]:
    missing = []
    for memory_id in ids:
        try:
            client.get(memory_id)
        except MemvaultError:
            missing.append(memory_id)
    return missing


def _killed_at(step: str, home: Path, first: str, act: str, second: str
               ) -> tuple[list[str], str]:
    """A daemon syncing to `first` that writes, then is killed at `step` of
    `act` ("leave", or "move" to `second`); its acknowledged memories and the
    recovery key of `first`."""
    proc = DaemonProcess(home, **{CRASH_ENV: step}).start(timeout=START_S)
    with Client(socket=proc.socket) as client:
        held = [r.id for r in client.remember_batch(batch(np.random.default_rng(), 4, "before"))]
        key = client.init_sync(first).recovery_key
        held += [r.id for r in client.remember_batch(batch(np.random.default_rng(), 3, "after"))]
        with pytest.raises(MemvaultError):
            if act == "leave":
                client.leave_sync()
            else:
                client.move_sync(second)
    assert proc.proc is not None and proc.proc.wait(60) == -9, f"not killed at {step}:\n{proc.log}"
    proc.kill()
    return held, key


@pytest.mark.parametrize("step", ["leave:stopped", "leave:done"])
def test_kill_9_at_every_step_of_a_leave(tmp_path: Path, step: str) -> None:
    first, second = (tmp_path / "first").as_uri(), (tmp_path / "second").as_uri()
    home = tmp_path / "a"
    held, key = _killed_at(step, home, first, "leave", second)
    with DaemonProcess(home).start(timeout=START_S) as proc, \
            Client(socket=proc.socket) as client:
        assert _missing(client, held) == [], f"after a kill at {step}:\n{proc.log}"
        info = client.sync_status()
        if info.configured:  # before the commit point: still synced; leave again
            assert info.remote == first
            client.leave_sync()
        assert not client.sync_status().configured
        client.init_sync(second)  # a vault that left starts afresh elsewhere
        proc.stop()
    with DaemonProcess(tmp_path / "b").start(timeout=START_S) as other, \
            Client(socket=other.socket) as joiner:
        joiner.join_sync(first, key)  # the remote left still holds the vault
        eventually(lambda: _missing(joiner, held[:4]) == [], SYNC_S, "B holds A's memories")
        other.stop()


def test_kill_9_in_a_move_then_the_move_again_to_the_same_remote(tmp_path: Path) -> None:
    first, second = (tmp_path / "first").as_uri(), (tmp_path / "second").as_uri()
    home = tmp_path / "a"
    held, _ = _killed_at("move:stopped", home, first, "move", second)
    with DaemonProcess(home).start(timeout=START_S) as proc, \
            Client(socket=proc.socket) as client:
        assert _missing(client, held) == [], proc.log
        assert client.sync_status().remote == first, "before the commit point: still on first"
        key = client.move_sync(second).recovery_key
        assert client.sync_status().remote == second
        late = client.remember("written after the move").id
        client.sync_now()
        proc.stop()
    with DaemonProcess(tmp_path / "b").start(timeout=START_S) as other, \
            Client(socket=other.socket) as joiner:
        joiner.join_sync(second, key)
        eventually(lambda: _missing(joiner, [*held, late]) == [], SYNC_S,
                   "B holds every memory of A on the new remote")
        other.stop()
