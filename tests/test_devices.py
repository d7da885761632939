"""Devices: each has its own keys, the vault keeps a sealed registry of
them, and every version on the remote is signed by the device that pushed it.

Real parts: laptop A and desktop B (real daemons, one vault) through a
memvault-server, a directory and an S3 bucket (Ceph RGW). Mallory can
write to the remote (a server token of the same account, or write access
to the directory or the bucket) but holds no vault key: she appends the
next version with the right parent, an envelope's header and noise, and a
signature of a device she made up. Both devices refuse it, `sync status`
names it (and its `--json`), and new memories keep going both ways. The
registry lists both devices, this one marked, and a rename on one device
shows on the other.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memvault import Client
from memvault_base.errors import InvalidArgument, MemvaultError, RollbackDetected
from memvaultd.crypto.device_keys import DeviceKeys, verify
from memvaultd.crypto.kdf import Argon2Params
from memvaultd.storage.device_secret import device_key_file, device_keys
from memvaultd.storage.keyfile import KeyWrapping
from memvaultd.storage.keys import UnlockedKey
from memvaultd.sync import signatures
from memvaultd.sync.devices import DeviceRecord, Registry
from memvaultd.sync.envelope import VERSION, Envelope, chain_context
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.version_body import pack_ops
from memvaultd.sync.worker import SyncWorker

from .ceph import CephRGW
from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .signed_chain import registered, signed_version, worker_devices
from .test_sync import _eventually, _has
from .test_sync_worker_unit import _IdleVault

ROOT = Path(__file__).resolve().parents[1]


def _cli(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memvault.cli.main", "--socket", str(socket), *args],
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'base'}{os.pathsep}{ROOT / 'client'}"},
        capture_output=True, text=True, timeout=300)


def _forge(url: str, token: str | None, vault_id: str) -> int:
    """What Mallory does: the next version, right parent, noise inside,
    signed by a key of her own under a device id she made up."""
    remote = open_remote(url, token=token, vault_id=vault_id)
    try:
        head = remote.head()
        assert head, "a chain to forge the next version of"
        parent = hashlib.sha256(remote.versions_after(head - 1, limit=1)[0][1]).digest()
        sealed = b"MVRO\x01\x01" + os.urandom(4090)
        forged = signatures.sign(DeviceKeys.new(), os.urandom(8).hex(), bytes.fromhex(vault_id),
                                 head + 1, sealed)
        assert remote.append_version(head + 1, parent, forged)
        return head + 1
    finally:
        remote.close()


@contextmanager
def _remote(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
            monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[str, dict[str, str | None], dict[str, str]]]:
    """(url, token by device, the daemons' environment) of a remote of `kind`."""
    if kind == "server":
        data = tmp_path / "server"
        data.mkdir()
        tokens: dict[str, str | None] = {
            name: create_token(data, name, account="owner")
            for name in ("laptop", "desktop", "mallory")}
        with ServerProcess(data).start() as server:
            yield f"grpc://{server.target}", tokens, {}
    elif kind == "directory":
        yield (tmp_path / "shared").as_uri(), dict.fromkeys(("laptop", "desktop", "mallory")), {}
    else:
        rgw: CephRGW = request.getfixturevalue("rgw")
        rgw.create_bucket("memvault-devices")
        for name, value in rgw.env().items():
            monkeypatch.setenv(name, value)
        yield (f"s3://memvault-devices/{uuid.uuid4().hex[:8]}",
               dict.fromkeys(("laptop", "desktop", "mallory")), rgw.env())


@pytest.mark.parametrize("kind", ["server", "directory", "s3"])
def test_a_forged_version_is_refused_and_sync_goes_on(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with _remote(kind, tmp_path, request, monkeypatch) as (url, tokens, env), \
            DaemonProcess(tmp_path / "a", **env).start() as a, \
            DaemonProcess(tmp_path / "b", **env).start() as b:
        ca, cb = Client(socket=a.socket, timeout=120), Client(socket=b.socket, timeout=120)
        alone = json.loads(_cli(a.socket, "devices", "--json").stdout)
        assert len(alone) == 1 and alone[0]["this_device"] and not alone[0]["added"]
        before = ca.remember("the laptop knew this before sync").id
        key = ca.init_sync(url, token=tokens["laptop"]).recovery_key
        cb.join_sync(url, key, token=tokens["desktop"])
        ca.sync_now()
        assert _has(cb, before)

        listed = json.loads(_cli(a.socket, "devices", "--json").stdout)
        assert len(listed) == 2 and [d["this_device"] for d in listed] == [True, False]
        assert listed[0]["sign_key"] == alone[0]["sign_key"], "init keeps the device's keys"
        laptop, desktop = listed[0]["device_id"], listed[1]["device_id"]
        assert [d.device_id for d in cb.devices() if d.this_device] == [desktop]
        renamed = _cli(a.socket, "devices", "rename", desktop[:6], "desktop")
        assert renamed.returncode == 0, renamed.stderr
        assert _cli(a.socket, "devices", "rename", laptop[:6], "laptop").returncode == 0
        table = _cli(b.socket, "devices").stdout
        assert max(len(line) for line in table.splitlines()) <= 80, table
        assert {d.name: d.this_device for d in cb.devices()} == {"laptop": False,
                                                                  "desktop": True}

        bad = _forge(url, tokens["mallory"], ca.status().vault_id)
        for client in (ca, cb):
            status = client.sync_now()  # no error: the forgery does not stop anyone
            assert status.state == "idle" and not status.bad_version, status
            assert [number for number, _ in status.refused] == [bad], status
            assert "not registered" in status.refused[0][1]
        shown = json.loads(_cli(b.socket, "sync", "status", "--json").stdout)
        assert shown["refused"][0]["version"] == bad
        assert f"version {bad}" in _cli(a.socket, "sync", "status").stdout

        after_a = ca.remember(f"written on A after the forgery {uuid.uuid4().hex[:6]}").id
        _eventually(lambda: _has(cb, after_a))
        after_b = cb.remember(f"written on B after the forgery {uuid.uuid4().hex[:6]}").id
        _eventually(lambda: _has(ca, after_b))
        assert ca.sync_now().head > bad and cb.sync_now().head == ca.sync_status().head
        checked = _cli(a.socket, "check")
        said = " ".join(checked.stdout.split())
        assert "1 signed by no registered device: passed over" in said, checked.stdout
        a.stop()
        b.stop()


def test_a_device_secret_in_a_key_file_opens_for_its_device_and_vault_alone(
        tmp_path: Path) -> None:
    vault_id = os.urandom(16)
    wrapping = KeyWrapping.new("passphrase", Argon2Params(time_cost=1, memory_kib=64,
                                                          parallelism=1))
    unlocked = UnlockedKey(os.urandom(32), "keyfile", "test", wrapping)
    first = device_keys(tmp_path, vault_id, "00112233aabbccdd", unlocked)
    again = device_keys(tmp_path, vault_id, "00112233aabbccdd", unlocked)
    assert again.sign_public == first.sign_public
    assert device_keys(tmp_path, vault_id, "ffeeddccbbaa9988", unlocked
                       ).sign_public != first.sign_public, "a copy is a device of its own"
    path = device_key_file(tmp_path, vault_id, "00112233aabbccdd")
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 1
    path.write_bytes(bytes(blob))
    with pytest.raises(MemvaultError, match="does not open"):
        device_keys(tmp_path, vault_id, "00112233aabbccdd", unlocked)


def test_every_byte_of_a_signed_version_counts() -> None:
    keys, vault_id = DeviceKeys.new(), os.urandom(16)
    signed = signatures.sign(keys, "0011223344556677", vault_id, 7, b"sealed version")
    assert signatures.checked(signed, vault_id, 7, lambda d: keys.sign_public) == (
        b"sealed version", "0011223344556677")
    for at in range(len(signed)):
        flipped = bytearray(signed)
        flipped[at] ^= 0x40
        with pytest.raises(signatures.Refused):
            signatures.checked(bytes(flipped), vault_id, 7,
                               lambda d: keys.sign_public if d == "0011223344556677" else None)
    with pytest.raises(signatures.Refused):
        signatures.checked(signed, vault_id, 8, lambda d: keys.sign_public)  # another number
    with pytest.raises(signatures.Refused):
        signatures.checked(signed, os.urandom(16), 7, lambda d: keys.sign_public)
    assert not verify(keys.sign_public, bytes(64), b"message")


def test_only_the_vault_key_registers_and_a_rename_cannot_re_key_a_device() -> None:
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    laptop = registered(remote, envelope, "laptop")
    # A token holder's record, sealed under another key: passed over.
    intruder = Registry(remote, Envelope(os.urandom(32), vault_id), "00aa00aa00aa00aa",
                        DeviceKeys.new())
    intruder.register("intruder")
    # A record of the laptop with other keys (a rename that would re-key it).
    forged = Registry(remote, envelope, laptop.device, DeviceKeys.new())
    forged._publish(DeviceRecord(laptop.device, "laptop", forged.keys.sign_public,
                                 forged.keys.receive_public, time.time(), time.time() + 1))
    desktop = registered(remote, envelope, "desktop")
    records = desktop.records()
    assert set(records) == {laptop.device, desktop.device}
    assert records[laptop.device].sign == laptop.keys.sign_public
    assert desktop.key_of("00aa00aa00aa00aa") is None
    desktop.rename("laptop", "old laptop")
    assert laptop.records()[laptop.device].name == "old laptop"
    with pytest.raises(InvalidArgument):
        laptop.rename("desktop", "old laptop")  # taken
    with pytest.raises(InvalidArgument):
        laptop.rename("phone", "new phone")  # no such device


def test_unsigned_versions_of_an_earlier_release_count_until_a_signed_one(
        tmp_path: Path) -> None:
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    device = registered(remote, envelope)
    first = envelope.seal(VERSION, pack_ops([]), chain_context(1, b""))  # an earlier release
    assert remote.append_version(1, b"", first)
    second = signed_version(device, 2, hashlib.sha256(first).digest(), pack_ops([]))
    assert remote.append_version(2, hashlib.sha256(first).digest(), second)
    third = envelope.seal(VERSION, pack_ops([]), chain_context(3, hashlib.sha256(second).digest()))
    assert remote.append_version(3, hashlib.sha256(second).digest(), third)
    worker = SyncWorker(_IdleVault(), remote,  # type: ignore[arg-type]
                        HighWaterFile(tmp_path, os.urandom(32), vault_id),
                        HighWater("memory://test"), envelope, **worker_devices(remote, envelope))
    worker.sync_once()
    assert worker.status.state == "idle" and worker.high_water.head == 3
    assert [number for number, _ in worker.status.refused] == [3], "unsigned after a signed one"
    worker.mark.hashes.clear()
    assert worker.hash_at(1) == hashlib.sha256(first).digest()


def test_a_refused_version_is_a_link_of_the_chain_for_every_later_check(
        tmp_path: Path) -> None:
    """Refused, then linked past: `sync verify` and the witness read the
    chain back across it without a false alarm, and a swap of it is caught."""
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    device = registered(remote, envelope)
    first = signed_version(device, 1, b"", pack_ops([]))
    forged = signatures.sign(DeviceKeys.new(), os.urandom(8).hex(), vault_id, 2,
                             os.urandom(4096))
    third = signed_version(device, 3, hashlib.sha256(forged).digest(), pack_ops([]))
    parent = b""
    for number, blob in enumerate((first, forged, third), 1):
        assert remote.append_version(number, parent, blob)
        parent = hashlib.sha256(blob).digest()
    worker = SyncWorker(_IdleVault(), remote,  # type: ignore[arg-type]
                        HighWaterFile(tmp_path, os.urandom(32), vault_id),
                        HighWater("memory://test"), envelope, **worker_devices(remote, envelope))
    worker.sync_once()
    assert [number for number, _ in worker.status.refused] == [2]
    worker.mark.hashes.clear()
    assert worker.hash_at(1) == hashlib.sha256(first).digest()
    remote._vault.versions[1] = forged[:-1] + bytes([forged[-1] ^ 1])  # type: ignore[attr-defined]
    with pytest.raises(RollbackDetected):
        worker.hash_at(1)
