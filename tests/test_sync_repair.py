"""A bad version on the remote stops sync, never for good; the local log
stays bounded while it is stopped.

Real parts: a memvault-server on a loopback port, laptop A and desktop B
(real daemons, one vault), and Mallory, who holds a device token of the
same account and laptop A's device key (its data directory and passphrase),
but not the vault key: she appends a version with the right parent and
garbage inside, signed as A. (A version no registered device signed is
only passed over: tests/test_devices.py.) Both devices stop at it and `sync status` names
it; A keeps being written to (reinforcements, a new memory, a forget) past
its backlog limit, and its log keeps only a bounded tail. Then the user runs
`memvault sync repair` on A: refused without confirmation, done with
`--yes`. A moves the vault to a fresh chain and puts its whole vault there,
B follows on its own at its next round, C joins afterwards, and the three
hold the same memories: everything acknowledged before and during the stop,
the forget included.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from memvault import Client
from memvault_base.errors import MemvaultError
from memvaultd.crypto.device_keys import DeviceKeys
from memvaultd.storage.device_secret import device_keys
from memvaultd.storage.keyfile import open_key_file
from memvaultd.storage.keys import KEY_FILE_NAME, UnlockedKey
from memvaultd.sync import signatures
from memvaultd.sync.remotes import open_remote

from .daemon_process import PASSPHRASE, DaemonProcess
from .server_process import ServerProcess, create_token

ROOT = Path(__file__).resolve().parents[1]
# Small enough that a test crosses the backlog limit in seconds: a snapshot
# every 50 operations (the vault holds ~30 memories, so no tenth-of-the-vault
# rule delays it), and at most max(300, twice the vault) records kept for the
# remote (`vault/snapshots.py`).
CONFIG = "snapshot_every = 50\nsync_backlog = 300\n"
BACKLOG = 300
REINFORCEMENTS = 1200


def _vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(384)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def _daemon(root: Path, name: str) -> DaemonProcess:
    home = root / name
    home.mkdir(parents=True)
    (home / "config.toml").write_text(CONFIG)
    return DaemonProcess(home)


def _cli(socket: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault.cli.main", "--socket", str(socket), *args],
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'base'}{os.pathsep}{ROOT / 'client'}"},
        input=stdin, capture_output=True, text=True, timeout=600)


def _log_records(daemon: DaemonProcess, client: Client) -> int:
    """How many records the daemon's log holds: from its oldest segment's
    first seq (the segment's name) to the last applied."""
    oldest = min(int(p.name[:20]) for p in (daemon.home / "data" / "log").glob("*.log"))
    return client.status().applied_txid - oldest + 1


def _device_keys(daemon: DaemonProcess, vault_id: str, device_id: str) -> DeviceKeys:
    """The device key of `daemon`'s device, read as its daemon reads it."""
    data = daemon.home / "data"
    key, wrapping = open_key_file((data / KEY_FILE_NAME).read_bytes(), PASSPHRASE,
                                  vault_id=bytes.fromhex(vault_id))
    return device_keys(data, bytes.fromhex(vault_id), device_id,
                       UnlockedKey(key, "keyfile", "test", wrapping))


def _append_garbage(url: str, token: str, vault_id: str, signer: tuple[DeviceKeys, str]
                    ) -> int:
    """What Mallory does with her token and a device's key: the next
    version, right parent, garbage inside, signed. Returns its number."""
    remote = open_remote(url, token=token, vault_id=vault_id)
    try:
        head = remote.head()
        parent = hashlib.sha256(remote.versions_after(head - 1, limit=1)[0][1]).digest()
        garbage = b"MVRO\x01\x01" + os.urandom(4090)  # a version's header, then noise
        garbage = signatures.sign(*signer, bytes.fromhex(vault_id), head + 1, garbage)
        assert remote.append_version(head + 1, parent, garbage)
        return head + 1
    finally:
        remote.close()


def _export(client: Client) -> dict[str, tuple[str, int]]:
    return {m.id: (m.text, m.reinforce_count) for m in client.export()}


def test_a_bad_version_is_named_repaired_and_nothing_is_lost(tmp_path: Path) -> None:
    data = tmp_path / "server"
    data.mkdir()
    tokens = {name: create_token(data, name, account="owner")
              for name in ("laptop", "desktop", "mallory", "new")}
    rng = random.Random(4)
    with ServerProcess(data).start() as server, \
            _daemon(tmp_path, "a").start() as a, _daemon(tmp_path, "b").start() as b:
        url = f"grpc://{server.target}"
        ca, cb = Client(socket=a.socket, timeout=120), Client(socket=b.socket, timeout=120)
        before = [r.id for r in ca.remember_batch(
            [{"text": f"known before the attack {i}", "topic": f"before.{i}",
              "vector": _vector(rng)} for i in range(20)])]
        key = ca.init_sync(url, token=tokens["laptop"]).recovery_key
        cb.join_sync(url, key, token=tokens["desktop"])
        ca.sync_now()

        vault_id = ca.status().vault_id
        laptop = next(d.device_id for d in ca.devices() if d.this_device)
        bad = _append_garbage(url, tokens["mallory"], vault_id,
                              (_device_keys(a, vault_id, laptop), laptop))
        for client in (ca, cb):
            with pytest.raises(MemvaultError):
                client.sync_now()
            status = client.sync_status()
            assert status.state == "stopped", status
            assert status.bad_version == bad, status
            assert f"version {bad}" in status.last_error
            assert "does not authenticate" in status.last_error
        stopped_text = _cli(a.socket, "sync", "status").stdout
        assert "sync repair" in stopped_text and str(bad) in stopped_text

        # Written while stopped: far past the backlog limit.
        during = ca.remember("written on A while sync was stopped", topic="during.a",
                             vector=_vector(rng)).id
        gone = before[-1]
        ca.forget(gone)
        for i in range(REINFORCEMENTS):
            ca.reinforce(before[i % 10])
        on_b = cb.remember("written on B while sync was stopped", topic="during.b",
                           vector=_vector(rng)).id
        held = _log_records(a, ca)
        print("records held on A while stopped:", held, "status:", ca.sync_status())
        assert held <= 2 * BACKLOG, f"A's log holds {held} records: not bounded"
        assert ca.sync_status().repush, "the status says the whole vault goes again"

        refused = _cli(a.socket, "sync", "repair")  # no --yes, nobody to say yes
        assert refused.returncode != 0, refused
        assert ca.sync_status().state == "stopped" and ca.sync_status().chain == 1
        repaired = _cli(a.socket, "sync", "repair", "--yes", "--json")
        assert repaired.returncode == 0, repaired.stderr
        after = json.loads(repaired.stdout)
        assert after["chain"] == 2 and after["state"] == "idle", after
        assert not after["repush"] and not after["bad_version"]

        b_status = cb.sync_now()  # B finds the move (on its own within a minute)
        assert b_status.chain == 2 and b_status.state == "idle", b_status
        ca.sync_now()
        expected = _export(ca)
        assert during in expected and on_b in expected and gone not in expected
        assert all(expected[i][1] == REINFORCEMENTS // 10 for i in before[:10])
        assert _export(cb) == expected

        with DaemonProcess(tmp_path / "c").start() as c:
            cc = Client(socket=c.socket, timeout=120)
            cc.join_sync(url, key, token=tokens["new"])
            assert cc.sync_status().chain == 2
            assert _export(cc) == expected
            c.stop()
        # The bad version is left where it was, on the old chain, unused.
        old = open_remote(url, token=tokens["laptop"], vault_id=ca.status().vault_id)
        assert old.head() == bad
        old.close()
        a.stop()
        b.stop()
