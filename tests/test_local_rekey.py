"""A device's local files move to the newest key epoch
(docs/decisions/0013-key-epochs.md, "Local files"), through real daemons, a
directory remote and the real model.

After `memvault recovery-key rotate` on A, and after B caught up with it,
no sealed file of either data directory opens under an older vault key (the
log's records, every snapshot and delta, `sync.state`, the key file), every
one opens under the newest, and every memory is still served after a
restart. A is then killed (SIGKILL) at each step of the switch
(`storage/rekey_journal.py`, the `rekey:*` crash points), one rotation per
step: it starts again with every acknowledged memory, and by the end of its
next sync round its files are under the newest key (and `sync status`
shows the cut-short rotation's recovery key).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import keyring
import pytest

from memvault import Client
from memvault_base.errors import IntegrityError, MemvaultError
from memvaultd.crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from memvaultd.storage.keys import KEYRING_SERVICE, load_vault_key, rekey_username
from memvaultd.storage.oplog import SEGMENT_HEADER, OperationLog
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.sync.high_water import HighWaterFile

from .daemon_process import PASSPHRASE, DaemonProcess
from .test_devices import _cli
from .test_join_crash import KEYRING, _require_keyring
from .test_sync import _eventually, _has

REKEY_STEPS = ("rekey:key", "rekey:staged", "rekey:journaled", "rekey:moving", "rekey:moved",
               "rekey:done")


def _data_dir(home: Path) -> Path:
    return next(home.rglob("vault.json")).parent


def _vault_key(data: Path, vault_id: bytes, monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)  # a key file's
    return load_vault_key(data, vault_id, prompt=False).key


def _opened_under(data: Path, key: bytes, vault_id: bytes, scratch: Path) -> list[str]:
    """The sealed files of `data` that open under vault key `key` (a copy
    is read: opening a log cuts what looks like a torn tail)."""
    opened = []
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(data / "log", scratch / "log")
    try:
        log = OperationLog(scratch / "log", derive_key(key, purpose=PURPOSE_LOG), vault_id)
        records = list(log.replay(log.first_seq - 1))
        log.close()
        if records:
            opened.append(f"log ({len(records)} records)")
    except IntegrityError:
        pass
    store = SnapshotStore(data / "snapshots", derive_key(key, purpose=PURPOSE_SNAPSHOT),
                          vault_id)
    for seq, path in store.files():
        try:
            store.read(seq)
            opened.append(path.name)
        except IntegrityError:
            pass
    for seq, path in store.deltas():
        try:
            store.read_delta(seq)
            opened.append(path.name)
        except IntegrityError:
            pass
    try:
        if HighWaterFile(data, key, vault_id).load() is not None:
            opened.append("sync.state")
    except IntegrityError:
        pass
    return opened


def _sealed_files(data: Path) -> int:
    """How many sealed files `data` has: snapshots, deltas, `sync.state`,
    and the log if it holds a record (pruned behind a snapshot, it may not)."""
    snapshots = [p for p in (data / "snapshots").iterdir() if p.suffix in (".snap", ".delta")]
    records = any(p.stat().st_size > SEGMENT_HEADER.size for p in (data / "log").glob("*.log"))
    return len(snapshots) + int(records) + int((data / "sync.state").exists())


def _assert_moved(data: Path, old_keys: list[bytes], vault_id: bytes, scratch: Path,
                  monkeypatch: pytest.MonkeyPatch) -> bytes:
    """No sealed file opens under any of `old_keys`; every one opens under
    the vault key kept now, which is none of them. Returns that key."""
    key = _vault_key(data, vault_id, monkeypatch)
    assert key not in old_keys
    for old in old_keys:
        assert _opened_under(data, old, vault_id, scratch) == []
    opened = _opened_under(data, key, vault_id, scratch)
    assert len(opened) == _sealed_files(data) and "sync.state" in opened, opened
    state = HighWaterFile(data, key, vault_id).load()
    assert state is not None and state.local_epoch > 0
    # The older epochs' keys stay at hand, inside the state sealed under the newest.
    assert set(state.epochs) == {str(n) for n in range(state.local_epoch + 1)}
    assert bytes.fromhex(state.epochs[str(state.local_epoch)]) == key
    return key


def _write(client: Client, what: str, count: int = 3) -> list[str]:
    return [client.remember(f"{what} {i} {uuid.uuid4().hex[:8]}").id for i in range(count)]


def _missing(client: Client, ids: list[str]) -> list[str]:
    return [memory_id for memory_id in ids if not _has(client, memory_id)]


@pytest.mark.parametrize("mode", ["keyfile", "keyring"])
def test_rotation_and_catch_up_move_the_local_files_to_the_new_key(
        mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A's and B's vault keys in key files, or both in the OS keyring (the
    real gnome-keyring of the test session)."""
    if mode == "keyring":
        _require_keyring()
    env = KEYRING if mode == "keyring" else {}
    url = (tmp_path / "shared").as_uri()
    with DaemonProcess(tmp_path / "a", **env).start() as a, \
            DaemonProcess(tmp_path / "b", **env).start() as b:
        ca, cb = Client(socket=a.socket, timeout=120), Client(socket=b.socket, timeout=120)
        recovery_key = ca.init_sync(url).recovery_key
        ids = _write(ca, "written on A before the rotation")
        cb.join_sync(url, recovery_key)
        ids += _write(cb, "written on B before the rotation")
        _eventually(lambda: not _missing(ca, ids) and not _missing(cb, ids))
        vault_id = bytes.fromhex(ca.status().vault_id)
        data_a, data_b = _data_dir(tmp_path / "a"), _data_dir(tmp_path / "b")
        first = _vault_key(data_a, vault_id, monkeypatch)
        assert _vault_key(data_b, vault_id, monkeypatch) == first
        # A restart seals a snapshot, so that there is one to move.
        a.stop()
        a = DaemonProcess(tmp_path / "a", **env).start()
        ca = Client(socket=a.socket, timeout=120)
        assert any((data_a / "snapshots").iterdir())

        rotated = _cli(a.socket, "recovery-key", "rotate", "--json")
        assert rotated.returncode == 0, rotated.stderr
        ids += _write(ca, "written on A after the rotation")
        _eventually(lambda: not _missing(cb, ids))  # B caught up
        ids += _write(cb, "written on B after it caught up")
        _eventually(lambda: not _missing(ca, ids))
        for client in (ca, cb):
            assert client.sync_now().state == "idle"

        key_a = _assert_moved(data_a, [first], vault_id, tmp_path / "scratch", monkeypatch)
        key_b = _assert_moved(data_b, [first], vault_id, tmp_path / "scratch", monkeypatch)
        assert key_a == key_b  # both under epoch 1's key
        if mode == "keyring":  # the entry the switch stored the key in is gone
            assert not (data_a / "vault.key").exists()
            assert keyring.get_password(KEYRING_SERVICE, rekey_username(vault_id)) is None
        for daemon in (a, b):
            daemon.stop()
        with DaemonProcess(tmp_path / "a", **env).start() as a2, \
                DaemonProcess(tmp_path / "b", **env).start() as b2:
            ca, cb = Client(socket=a2.socket, timeout=120), Client(socket=b2.socket, timeout=120)
            assert _missing(ca, ids) == [] and _missing(cb, ids) == []
            more = _write(ca, "written on A after the restart")
            _eventually(lambda: not _missing(cb, more))
            for client in (ca, cb):
                assert client.sync_now().state == "idle"
        _assert_moved(data_a, [first], vault_id, tmp_path / "scratch", monkeypatch)
        _assert_moved(data_b, [first], vault_id, tmp_path / "scratch", monkeypatch)


def test_a_crash_at_each_step_of_the_switch_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = (tmp_path / "shared").as_uri()
    home = tmp_path / "a"
    with DaemonProcess(home).start() as a:
        client = Client(socket=a.socket, timeout=120)
        client.init_sync(url)
        ids = _write(client, "written before any rotation")
        vault_id = bytes.fromhex(client.status().vault_id)
        data = _data_dir(home)
        keys = [_vault_key(data, vault_id, monkeypatch)]
    for step in REKEY_STEPS:
        with DaemonProcess(home, MEMVAULT_CRASH_AT=step).start() as crashing:
            client = Client(socket=crashing.socket, timeout=120)
            ids += _write(client, f"written before a crash at {step}")
            rotated = _cli(crashing.socket, "recovery-key", "rotate", "--json")
            assert rotated.returncode != 0, f"no crash at {step}: {rotated.stdout}"
            assert crashing.proc is not None and crashing.proc.wait(30) == -9
        with DaemonProcess(home).start() as restarted:
            client = Client(socket=restarted.socket, timeout=120)
            assert _missing(client, ids) == [], f"lost after a crash at {step}"
            # The rotation was cut short after its grant: its key is shown
            # once (`pending_rotation.py`), so the next rotate starts an epoch.
            assert client.sync_status().unshown_recovery_epoch == len(keys)
            try:
                assert client.sync_now().state == "idle"
            except MemvaultError as exc:
                pytest.fail(f"sync after a crash at {step}: {exc}\n{restarted.log}")
            assert not (data / "rekey.staging").exists() and not (data / "rekey.journal").exists()
            keys.append(_assert_moved(data, keys, vault_id, tmp_path / "scratch", monkeypatch))
            ids += _write(client, f"written after a crash at {step}")
    with DaemonProcess(home).start() as last:
        client = Client(socket=last.socket, timeout=120)
        assert _missing(client, ids) == []
