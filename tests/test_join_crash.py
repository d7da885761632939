"""`join` is one crash-safe step, and a join racing a background snapshot
loses nothing: real daemons, a directory remote, the real model.

Device A (a key file, its passphrase in the environment) holds the vault on
the remote. Device B joins it, holding memories of its own, in both key
modes: the OS keyring (the real gnome-keyring of the test session), and a
key file whose passphrase was typed at the daemon's prompt
(`terminal_daemon.py`, README's headless flow), so `join` has no passphrase
to ask for. B is killed with SIGKILL at each step of the join (the crash
points of `memvaultd/storage/crash_points.py`), started again, and must
serve every memory it acknowledged, as the vault it was (and then `join`
again works) or as the joined one (and then sync goes on).

A first start killed after naming the new vault (`vault.json`) or after
storing its key is covered here too: the next start must open the vault.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import keyring
import numpy as np
import pytest

from memvault import Client
from memvault_base.errors import MemvaultError
from memvaultd.storage.crash_points import CRASH_ENV, STALL_ENV, STALL_S

from .daemon_process import DaemonProcess
from .terminal_daemon import TerminalDaemon
from .test_remote_faults import batch, eventually

START_S = 120.0
SYNC_S = 60.0
KEYRING = {"PYTHON_KEYRING_BACKEND": "", "MEMVAULT_PASSPHRASE": ""}
JOIN_STEPS = ("join:key", "join:log-staged", "join:staged", "join:journaled", "join:moving",
              "join:moved", "join:done")


def _require_keyring() -> None:
    if "SecretService" not in type(keyring.get_keyring()).__module__:
        if os.environ.get("MEMVAULT_REQUIRE_KEYRING") == "1":
            pytest.fail("MEMVAULT_REQUIRE_KEYRING=1 but no Secret Service")
        pytest.skip("no Secret Service on this machine (./scripts/test provides gnome-keyring)")


def _device(mode: str, home: Path, **env: str) -> DaemonProcess:
    """Device B: its key in the keyring, or in a key file whose passphrase is typed."""
    if mode == "keyring":
        return DaemonProcess(home, **KEYRING, **env)
    return TerminalDaemon(home, **env)


def _holds(client: Client, ids: list[str]) -> bool:
    try:
        for memory_id in reversed(ids):
            client.get(memory_id)
    except MemvaultError:
        return False
    return True


def _missing(client: Client, ids: list[str]) -> list[str]:
    missing = []
    for memory_id in ids:
        try:
            client.get(memory_id)
        except MemvaultError:
            missing.append(memory_id)
    return missing


@dataclass
class Vault:
    """Device A, with the vault on the remote."""

    a: DaemonProcess
    ca: Client
    remote: str
    recovery_key: str
    vault_id: str
    held: list[str]  # A's memories, on the remote before any join


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    root = tmp_path_factory.mktemp("join")
    a = DaemonProcess(root / "a").start(timeout=START_S)
    ca = Client(socket=a.socket)
    held = [r.id for r in ca.remember_batch(batch(np.random.default_rng(1), 5, "laptop"))]
    remote = (root / "shared").as_uri()
    result = ca.init_sync(remote)
    yield Vault(a, ca, remote, result.recovery_key, result.vault_id, held)
    ca.close()
    a.stop()


def _join_is_complete(vault: Vault, cb: Client, mine: list[str]) -> None:
    """B is in the vault: it gets A's memories, A gets B's, and a write on B
    after the join reaches A."""
    assert cb.status().vault_id == vault.vault_id
    eventually(lambda: _holds(cb, vault.held), SYNC_S, "B holds A's memories")
    after = cb.remember_batch(batch(np.random.default_rng(), 1, "after"))[0].id
    eventually(lambda: _holds(vault.ca, [*mine, after]), SYNC_S, "A holds B's memories")


@pytest.mark.parametrize("mode", ["keyfile", "keyring"])
@pytest.mark.parametrize("step", JOIN_STEPS)
def test_kill_9_at_every_step_of_a_join(vault: Vault, tmp_path: Path, mode: str,
                                         step: str) -> None:
    if mode == "keyring":
        _require_keyring()
    home = tmp_path / "b"
    b = _device(mode, home, **{CRASH_ENV: step}).start(timeout=START_S)
    with Client(socket=b.socket) as cb:
        before = cb.status().vault_id
        mine = [r.id for r in cb.remember_batch(batch(np.random.default_rng(), 3, "desktop"))]
        with pytest.raises(MemvaultError):
            cb.join_sync(vault.remote, vault.recovery_key)
    assert b.proc is not None and b.proc.wait(60) == -9, f"not killed at {step}:\n{b.log}"
    b.kill()
    with _device(mode, home).start(timeout=START_S) as b, Client(socket=b.socket) as cb:
        assert _missing(cb, mine) == [], f"after a kill at {step}:\n{b.log}"
        now = cb.status().vault_id
        assert now in (before, vault.vault_id)
        if now == before:  # rolled back: the join can be made again
            cb.join_sync(vault.remote, vault.recovery_key)
        _join_is_complete(vault, cb, mine)
        b.stop()


def test_join_with_the_passphrase_typed_at_the_prompt(vault: Vault, tmp_path: Path) -> None:
    """README's headless flow: the daemon asked for its passphrase on its
    terminal; `join` wraps the joined vault's key under the same one without
    asking again, and the next start opens it with that passphrase."""
    home = tmp_path / "b"
    with TerminalDaemon(home).start(timeout=START_S) as b, Client(socket=b.socket) as cb:
        assert b.prompts == 2  # a new key file: the passphrase and its repetition
        assert cb.status().key_storage == "keyfile"
        mine = [r.id for r in cb.remember_batch(batch(np.random.default_rng(), 3, "headless"))]
        cb.join_sync(vault.remote, vault.recovery_key)
        _join_is_complete(vault, cb, mine)
        b.stop()
    with TerminalDaemon(home).start(timeout=START_S) as b, Client(socket=b.socket) as cb:
        assert b.prompts == 1
        assert cb.status().vault_id == vault.vault_id
        assert _missing(cb, [*mine, *vault.held]) == []
        b.stop()


def test_a_join_racing_a_background_snapshot_loses_nothing(vault: Vault, tmp_path: Path
                                                           ) -> None:
    """A background snapshot cuts B's state, then (held open by the stall
    point) is still being written when the join runs. Its state, of the old
    vault at a log position beyond the joined vault's, must not be sealed as
    the joined vault's newest snapshot: a start after a crash would load it
    and lose the joined memories and every write acknowledged after the join."""
    home = tmp_path / "b"
    home.mkdir()
    every = 100
    (home / "config.toml").write_text(f"snapshot_every = {every}\n")
    b = DaemonProcess(home, **{STALL_ENV: "snapshot:captured"}).start(timeout=START_S)
    with Client(socket=b.socket) as cb:
        mine = [r.id for r in cb.remember_batch(batch(np.random.default_rng(), 20, "desktop"))]
        for n in range(every - len(mine)):  # the last of these starts a snapshot
            cb.reinforce(mine[n % len(mine)])
        cb.join_sync(vault.remote, vault.recovery_key)
        after = [r.id for r in cb.remember_batch(batch(np.random.default_rng(), 5, "after"))]
        eventually(lambda: _holds(cb, vault.held), SYNC_S, "B holds A's memories")
        time.sleep(STALL_S)  # the held snapshot finishes, whatever it writes
    b.kill()
    with DaemonProcess(home).start(timeout=START_S) as b, Client(socket=b.socket) as cb:
        assert cb.status().vault_id == vault.vault_id
        assert _missing(cb, [*mine, *vault.held, *after]) == [], b.log
        b.stop()


@pytest.mark.parametrize("mode", ["keyfile", "keyring"])
@pytest.mark.parametrize("step", ["first-start:named", "first-start:key"])
def test_a_first_start_killed_before_it_is_whole_opens_next_time(tmp_path: Path, mode: str,
                                                                 step: str) -> None:
    if mode == "keyring":
        _require_keyring()
    home = tmp_path / "home"
    make: Callable[..., DaemonProcess] = (
        (lambda **env: DaemonProcess(home, **KEYRING, **env)) if mode == "keyring"
        else (lambda **env: DaemonProcess(home, **env)))
    first = make(**{CRASH_ENV: step}).start(wait=False)
    assert first.proc is not None and first.proc.wait(START_S) == -9, first.log
    with make().start(timeout=START_S) as proc, Client(socket=proc.socket) as client:
        memory_id = client.remember("written after a first start that was cut short").id
        proc.stop()
    with make().start(timeout=START_S) as proc, Client(socket=proc.socket) as client:
        assert client.get(memory_id).text == "written after a first start that was cut short"
        proc.stop()
