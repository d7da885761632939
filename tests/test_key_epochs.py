"""Key epochs through real daemons (docs/decisions/0013-key-epochs.md):
`memvault recovery-key rotate` on one device, the other moves to the new
key on its own; `memvault devices revoke` leaves the revoked device, with
its keys, its data directory and read access to the remote, nothing new to
open, and what it still pushes is refused by the others."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

import grpc
import pytest

from memvault import Client
from memvault_base.errors import MemvaultError
from memvault_base.v1 import sync_pb2, sync_pb2_grpc
from memvaultd.storage.device_secret import device_keys
from memvaultd.storage.keys import load_vault_key
from memvaultd.sync import epochs, recovery, signatures
from memvaultd.sync.envelope import VERSION, Envelope, UnknownEpoch, chain_context, epoch_of
from memvaultd.sync.high_water import HighWaterFile
from memvaultd.sync.remotes import open_remote

from .daemon_process import PASSPHRASE, DaemonProcess
from .signed_chain import registered, signed_version
from .test_devices import _cli, _remote
from .test_sync import _eventually, _has


def _newest_version(url: str, token: str | None, vault_id: str) -> tuple[int, bytes]:
    remote = open_remote(url, token=token, vault_id=vault_id)
    try:
        head = remote.head()
        return head, remote.versions_after(head - 1, limit=1)[0][1]
    finally:
        remote.close()


@pytest.mark.parametrize("kind", ["server", "directory", "s3"])
def test_rotation_and_revocation_through_two_daemons(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with _remote(kind, tmp_path, request, monkeypatch) as (url, tokens, env), \
            DaemonProcess(tmp_path / "a", **env).start() as a, \
            DaemonProcess(tmp_path / "b", **env).start() as b:
        ca, cb = Client(socket=a.socket, timeout=120), Client(socket=b.socket, timeout=120)
        old_key = ca.init_sync(url, token=tokens["laptop"]).recovery_key
        cb.join_sync(url, old_key, token=tokens["desktop"])
        vault_id = ca.status().vault_id
        desktop = next(d.device_id for d in cb.devices() if d.this_device)

        # recovery-key rotate: epoch 1; B moves on its own and both go on.
        rotated = _cli(a.socket, "recovery-key", "rotate", "--json")
        assert rotated.returncode == 0, rotated.stderr
        shown = json.loads(rotated.stdout)
        assert shown["epoch"] == 1 and shown["recovery_key"] != old_key
        after_a = ca.remember(f"written on A after the rotation {uuid.uuid4().hex[:6]}").id
        _eventually(lambda: _has(cb, after_a))
        after_b = cb.remember(f"written on B after the rotation {uuid.uuid4().hex[:6]}").id
        _eventually(lambda: _has(ca, after_b))
        for client in (ca, cb):
            status = client.sync_now()
            assert status.state == "idle" and not status.refused, status

        # The old recovery key opens nothing written after the rotation.
        _, newest = _newest_version(url, tokens["mallory"], vault_id)
        assert epoch_of(newest) == 1
        probe = open_remote(url, token=tokens["mallory"], vault_id=vault_id)
        _, old_secret = recovery.parse_recovery_key(old_key)
        _, new_secret = recovery.parse_recovery_key(shown["recovery_key"])
        old = epochs.from_recovery(probe, bytes.fromhex(vault_id), old_secret)
        assert old.number == 0
        with pytest.raises(UnknownEpoch):
            old.envelope(bytes.fromhex(vault_id)).open(
                VERSION, signatures.sealed_part(newest), name="newest")
        assert epochs.from_recovery(probe, bytes.fromhex(vault_id), new_secret).number == 1

        if kind == "server":  # a token alone, without a device's key, revokes nobody
            _refused_revocations(url, tokens, vault_id, desktop)

        # devices revoke: epoch 2, given to A alone; on memvault-server B's
        # token is revoked too.
        revoked = _cli(a.socket, "devices", "revoke", desktop[:6], "--json")
        assert revoked.returncode == 0, revoked.stderr
        shown_revoked = json.loads(revoked.stdout)
        assert shown_revoked["revoked_device"] == desktop
        assert shown_revoked["token_revoked"] == (kind == "server"), shown_revoked
        if kind == "server":
            assert "'desktop'" in shown_revoked["token_note"], shown_revoked
            _refused_everything(url, tokens["desktop"], vault_id)
        # B's read access to the remote from here on: its own token, or
        # where the server revoked it, another of the account's.
        reader = tokens["mallory"] if kind == "server" else tokens["desktop"]
        assert [d.revoked for d in ca.devices() if d.device_id == desktop] == [True]
        secret_a = ca.remember(f"written on A after the revocation {uuid.uuid4().hex[:6]}").id
        ca.sync_now()
        with pytest.raises(MemvaultError, match="revoked"):
            cb.sync_now()
        assert not _has(cb, secret_a)
        b.stop()

        # What B keeps: its data directory, its device keys, every key up to
        # epoch 1 (its sync.state), and read access to the remote.
        data = next((tmp_path / "b").rglob("vault.key")).parent
        monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
        unlocked = load_vault_key(data, bytes.fromhex(vault_id), prompt=False)
        kept = HighWaterFile(data, unlocked.key, bytes.fromhex(vault_id)).load()
        # B moved its files to epoch 1's key, and keeps epoch 0's beside it.
        assert kept is not None and set(kept.epochs) == {"0", "1"} and kept.local_epoch == 1
        assert bytes.fromhex(kept.epochs["1"]) == unlocked.key
        envelope = Envelope(kept.first_key(unlocked.key), bytes.fromhex(vault_id))
        envelope.add_epoch(1, bytes.fromhex(kept.epochs["1"]))
        head, newest = _newest_version(url, reader, vault_id)
        assert epoch_of(newest) == 2
        with pytest.raises(UnknownEpoch):
            envelope.open(VERSION, signatures.sealed_part(newest), name="newest")
        keys_b = device_keys(data, bytes.fromhex(vault_id), desktop, unlocked)
        for name in probe.list_objects("keys/epoch/00000002/"):
            if "/to/" in name:
                with pytest.raises(MemvaultError):
                    keys_b.unwrap(probe.get_object(name), info=b"any")
        assert not [n for n in probe.list_objects("keys/epoch/00000002/") if desktop in n]

        # B writes on anyway, signed with its own key under the newest key it
        # holds: A refuses it and goes on.
        parent = hashlib.sha256(newest).digest()
        sealed = envelope.seal(VERSION, b"\x00" * 8, chain_context(head + 1, parent),
                               reserve=signatures.TRAILER)
        blob = signatures.sign(keys_b, desktop, bytes.fromhex(vault_id), head + 1, sealed)
        writer = open_remote(url, token=reader, vault_id=vault_id)
        assert writer.append_version(head + 1, parent, blob)
        # Nor a device it registers under the keys it holds: its versions
        # are refused as a stranger's.
        puppet = registered(writer, envelope, "puppet")
        parent = hashlib.sha256(blob).digest()
        assert writer.append_version(head + 2, parent, signed_version(
            puppet, head + 2, parent, b"\x00" * 8))
        writer.close()
        status = ca.sync_now()
        assert status.state == "idle", status
        assert [n for n, _ in status.refused] == [head + 1, head + 2], status
        later = ca.remember(f"written on A after B's refused version {uuid.uuid4().hex[:6]}").id
        assert ca.sync_now().head > head + 2 and _has(ca, later)
        checked = " ".join(_cli(a.socket, "check").stdout.split())
        assert "2 signed by no registered device: passed over" in checked, checked

        # A new device joins with the newest recovery key and reads the whole
        # chain, every epoch; the replaced one is refused before anything.
        newest_key = json.loads(revoked.stdout)["recovery_key"]
        with DaemonProcess(tmp_path / "c", **env).start() as c:
            cc = Client(socket=c.socket, timeout=120)
            with pytest.raises(MemvaultError, match="replaced"):
                cc.join_sync(url, shown["recovery_key"], token=tokens["mallory"])
            cc.join_sync(url, newest_key, token=tokens["mallory"])
            assert all(_has(cc, m) for m in (after_a, after_b, secret_a, later))
            assert cc.sync_now().state == "idle"
            c.stop()
        probe.close()
        a.stop()


def _refused_revocations(url: str, tokens: dict[str, str | None], vault_id: str,
                         target: str) -> None:
    """RevokeDevice from a token that is not the signer's device's: unsigned,
    wrongly signed, or another device's; the target's token still works."""
    channel = grpc.insecure_channel(url.removeprefix("grpc://"))
    stub = sync_pb2_grpc.SyncStub(channel)  # type: ignore[no-untyped-call]
    now = int(time.time() * 1000)
    with channel:
        for name, signature in (("mallory", b""), ("mallory", b"\x01" * 64),
                                ("laptop", b"\x01" * 64)):
            with pytest.raises(grpc.RpcError) as caught:
                stub.RevokeDevice(sync_pb2.RevokeDeviceRequest(
                    device_id=target, issued_at=now, signature=signature), timeout=10,
                    metadata=(("authorization", f"Bearer {tokens[name]}"),))
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, name
    _newest_version(url, tokens["desktop"], vault_id)


def _refused_everything(url: str, token: str | None, vault_id: str) -> None:
    """A revoked token reads and writes nothing."""
    remote = open_remote(url, token=token, vault_id=vault_id)
    try:
        for call in (remote.head, lambda: remote.list_objects("devices/"),
                     lambda: remote.versions_after(0, limit=1),
                     lambda: remote.put_object("devices/x", b"x"),
                     lambda: remote.append_version(10**6, b"\x00" * 32, b"x")):
            with pytest.raises(MemvaultError, match="unknown or revoked token"):
                call()
    finally:
        remote.close()


def test_a_revocation_among_three_devices_leaves_the_other_two_syncing(tmp_path: Path) -> None:
    url = (tmp_path / "shared").as_uri()
    with DaemonProcess(tmp_path / "a").start() as a, \
            DaemonProcess(tmp_path / "b").start() as b, \
            DaemonProcess(tmp_path / "c").start() as c:
        ca, cb, cc = (Client(socket=d.socket, timeout=120) for d in (a, b, c))
        key = ca.init_sync(url).recovery_key
        cb.join_sync(url, key)
        cc.join_sync(url, key)
        lost = next(d.device_id for d in cc.devices() if d.this_device)
        # Someone who can only write to the remote plants epoch 1's grant:
        # passed over by every device, which neither stops nor thinks itself
        # revoked, and by the rotation, which takes epoch 2.
        remote = open_remote(url, vault_id=ca.status().vault_id)
        assert remote.put_object("keys/epoch/00000001/grant", b"\x00" * 300)
        remote.close()
        for client in (ca, cb, cc):
            assert client.sync_now().state == "idle"
        rotated = ca.rotate_keys(lost)
        assert rotated.revoked_device == lost and rotated.epoch == 2
        # B takes epoch 1 on its own; A and B go on both ways, C hears nothing.
        from_a = ca.remember(f"A, after C was revoked {uuid.uuid4().hex[:6]}").id
        _eventually(lambda: _has(cb, from_a))
        from_b = cb.remember(f"B, after C was revoked {uuid.uuid4().hex[:6]}").id
        _eventually(lambda: _has(ca, from_b))
        with pytest.raises(MemvaultError, match="revoked"):
            cc.sync_now()
        assert not _has(cc, from_a) and not _has(cc, from_b)
        assert {d.device_id: d.revoked for d in cb.devices()}[lost]
        for client in (ca, cb):
            assert client.sync_now().state == "idle"
        for daemon in (a, b, c):
            daemon.stop()
