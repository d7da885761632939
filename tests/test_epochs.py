"""Key epochs (`memvaultd.sync.epochs`, docs/decisions/0013-key-epochs.md):
a new vault key wrapped to each remaining device and to a new recovery
key; the devices given it move to it on their own, the old recovery key
and a revoked device open nothing sealed under it."""

from __future__ import annotations

import os
import uuid

import pytest

from memvault_base.errors import IntegrityError, InvalidArgument, Locked
from memvaultd.crypto.device_keys import DeviceKeys, wrap_to
from memvaultd.sync import epochs, recovery, snapshots
from memvaultd.sync.devices import Registry
from memvaultd.sync.envelope import VERSION, Envelope, UnknownEpoch, chain_context, epoch_of
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.base import Remote

from .signed_chain import registered


def test_a_wrapped_key_opens_for_its_device_and_purpose_alone() -> None:
    laptop, desktop, key = DeviceKeys.new(), DeviceKeys.new(), os.urandom(32)
    wrapped = wrap_to(laptop.receive_public, key, info=b"epoch 1 to laptop")
    assert len(wrapped) == 32 + 32 + 16
    assert laptop.unwrap(wrapped, info=b"epoch 1 to laptop") == key
    with pytest.raises(IntegrityError):
        desktop.unwrap(wrapped, info=b"epoch 1 to laptop")
    with pytest.raises(IntegrityError):
        laptop.unwrap(wrapped, info=b"epoch 2 to laptop")
    with pytest.raises(IntegrityError):
        laptop.unwrap(wrapped[:-1] + bytes([wrapped[-1] ^ 1]), info=b"epoch 1 to laptop")


def _vault() -> tuple[Remote, bytes, epochs.Epoch, bytes, list[Registry]]:
    """A remote holding a vault of three registered devices at epoch 0,
    with its first recovery key's secret."""
    vault_id, key = os.urandom(16), os.urandom(32)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    _, secret = recovery.new_recovery_key(vault_id)
    remote.put_object(recovery.OBJECT, recovery.wrap(key, secret, vault_id))
    envelope = Envelope(key, vault_id)
    devices = [registered(remote, envelope, name) for name in ("laptop", "desktop", "phone")]
    return remote, vault_id, epochs.first(key), secret, devices


def _rotate(remote: Remote, vault_id: bytes, current: epochs.Epoch, by: Registry,
            revoke: frozenset[str] = frozenset(), head: int = 5
            ) -> tuple[epochs.Epoch, bytes]:
    """Epoch `current.number + 1` started by `by`, given to every device the
    registry holds (and `by`), and the new recovery key's secret."""
    _, secret = recovery.new_recovery_key(vault_id)
    recipients = {d: r.receive for d, r in by.records().items()}
    recipients[by.device] = by.keys.receive_public
    return epochs.start(remote, vault_id, current, by.keys, by.device, recipients, secret,
                        head=head, key_of=by.key_of, revoke=revoke), secret


def test_the_other_devices_move_to_a_new_epoch_and_the_old_recovery_key_opens_nothing_of_it(
) -> None:
    remote, vault_id, zero, old_secret, (laptop, desktop, phone) = _vault()
    one, new_secret = _rotate(remote, vault_id, zero, laptop)
    assert one.number == 1 and one.key != zero.key
    for device in (desktop, phone):
        moved = epochs.catch_up(remote, vault_id, zero, device.keys, device.device,
                                device.key_of)
        assert moved == one
    # Nothing newer: catching up from the newest is a no-op.
    assert epochs.catch_up(remote, vault_id, one, desktop.keys, desktop.device,
                           desktop.key_of) == one
    # A version sealed after the rotation opens under epoch 1 only.
    sealed = one.envelope(vault_id).seal(VERSION, b"after", chain_context(9, bytes(32)))
    old = epochs.from_recovery(remote, vault_id, old_secret)
    assert old.number == 0
    with pytest.raises(UnknownEpoch):
        old.envelope(vault_id).open(VERSION, sealed, chain_context(9, bytes(32)), name="v9")
    guessed = old.envelope(vault_id)
    guessed.add_epoch(1, old.key)
    with pytest.raises(IntegrityError, match="does not authenticate"):
        guessed.open(VERSION, sealed, chain_context(9, bytes(32)), name="v9")
    # The new recovery key opens epoch 1, and through its grant every older key.
    recovered = epochs.from_recovery(remote, vault_id, new_secret)
    assert recovered == one
    assert epochs.keys_back(remote, vault_id, recovered) == {0: zero.key, 1: one.key}
    assert recovered.envelope(vault_id).open(VERSION, sealed, chain_context(9, bytes(32)),
                                             name="v9") == b"after"


def test_a_revoked_device_is_given_nothing_and_cannot_start_an_epoch_the_others_take(
) -> None:
    remote, vault_id, zero, _, (laptop, desktop, phone) = _vault()
    one, _ = _rotate(remote, vault_id, zero, laptop, revoke=frozenset({phone.device}))
    assert phone.device not in one.devices and one.revoked == ((phone.device, 5),)
    assert one.refuses(phone.device, 6) and not one.refuses(phone.device, 5)
    assert not one.refuses(desktop.device, 6)
    with pytest.raises(epochs.Revoked):
        epochs.catch_up(remote, vault_id, zero, phone.keys, phone.device, phone.key_of)
    # Racing for epoch 1 with what it holds: the name is taken.
    with pytest.raises(InvalidArgument):
        _rotate(remote, vault_id, zero, phone)
    moved = epochs.catch_up(remote, vault_id, zero, desktop.keys, desktop.device,
                            desktop.key_of)
    assert moved == one
    # Epoch 2 from the revoked device, on the only key it holds (epoch 0's):
    # its signer is revoked and it does not follow epoch 1.
    _rotate(remote, vault_id, epochs.Epoch(1, zero.key), phone)
    assert epochs.catch_up(remote, vault_id, one, desktop.keys, desktop.device,
                           desktop.key_of) == one  # passed over


def test_a_grant_no_registered_device_signed_is_passed_over_and_stops_no_one() -> None:
    remote, vault_id, zero, _, (laptop, desktop, _phone) = _vault()
    # A writer holding the vault key but no registered device key, and one
    # holding only a token: garbage where epoch 2's grant goes.
    stranger = Registry(remote, zero.envelope(vault_id), "00aa00aa00aa00aa", DeviceKeys.new())
    _rotate(remote, vault_id, zero, stranger)
    remote.put_object("keys/epoch/00000002/grant", os.urandom(300))
    assert epochs.catch_up(remote, vault_id, zero, desktop.keys, desktop.device,
                           desktop.key_of) == zero  # neither Revoked nor an error
    # The next rotation takes the next free number; the others follow it.
    three, secret = _rotate(remote, vault_id, zero, laptop)
    assert three.number == 3
    assert epochs.catch_up(remote, vault_id, zero, desktop.keys, desktop.device,
                           desktop.key_of) == three
    assert epochs.keys_back(remote, vault_id, three) == {0: zero.key, 3: three.key}
    assert epochs.from_recovery(remote, vault_id, secret) == three


def test_a_rotation_cut_short_before_its_grant_is_never_taken_and_the_next_one_is() -> None:
    remote, vault_id, zero, _, (laptop, desktop, _phone) = _vault()
    cut = "keys/epoch/00000001/00000000000000aa/"
    remote.put_object(f"{cut}to/{desktop.device}", os.urandom(80))
    remote.put_object(f"{cut}recovery", os.urandom(92))
    assert epochs.catch_up(remote, vault_id, zero, desktop.keys, desktop.device,
                           desktop.key_of) == zero
    one, _ = _rotate(remote, vault_id, zero, laptop)
    assert epochs.catch_up(remote, vault_id, zero, desktop.keys, desktop.device,
                           desktop.key_of) == one


def test_an_envelope_seals_under_its_newest_epoch_names_it_and_opens_every_one_it_holds(
) -> None:
    vault_id, zero, one = os.urandom(16), os.urandom(32), os.urandom(32)
    envelope = Envelope(zero, vault_id)
    before = envelope.seal(VERSION, b"before", chain_context(1, bytes(32)))
    assert before[4] == 1 and epoch_of(before) == 0 and len(before) == 4096  # format 1
    envelope.add_epoch(1, one)
    after = envelope.seal(VERSION, b"after", chain_context(2, bytes(32)))
    assert after[4] == 2 and epoch_of(after) == 1 and len(after) == 4096
    assert envelope.open(VERSION, before, chain_context(1, bytes(32)), name="v1") == b"before"
    assert envelope.open(VERSION, after, chain_context(2, bytes(32)), name="v2") == b"after"
    # The epoch is in the associated data: a header re-labelled to another
    # epoch the reader holds does not open.
    envelope.add_epoch(2, one)
    relabelled = after[:6] + (2).to_bytes(4, "big") + after[10:]
    with pytest.raises(IntegrityError, match="does not authenticate"):
        envelope.open(VERSION, relabelled, chain_context(2, bytes(32)), name="v2")
    with pytest.raises(UnknownEpoch) as caught:
        Envelope(zero, vault_id).open(VERSION, after, chain_context(2, bytes(32)), name="v2")
    assert caught.value.epoch == 1


def test_a_snapshot_sealed_in_a_later_epoch_keeps_its_chunks_at_4_mib() -> None:
    vault_id = os.urandom(16)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    envelope = Envelope(os.urandom(32), vault_id)
    envelope.add_epoch(3, os.urandom(32))
    body = os.urandom(5 * 1024 * 1024)
    snapshot = snapshots.publish(remote, envelope, 7, bytes(32), body)
    first_chunk = remote.get_object(snapshot.chunk_name(0))
    assert len(first_chunk) == snapshots.CHUNK_OBJECT and epoch_of(first_chunk) == 3
    assert snapshots.fetch(remote, envelope, snapshot) == body


def test_after_an_epoch_a_device_registered_under_an_older_key_alone_does_not_count() -> None:
    remote, vault_id, zero, _, (laptop, desktop, phone) = _vault()
    one, _ = _rotate(remote, vault_id, zero, laptop, revoke=frozenset({phone.device}))
    # The revoked phone registers a device of its own, under the key it holds.
    puppet = registered(remote, zero.envelope(vault_id), "puppet")
    envelope = zero.envelope(vault_id)
    envelope.add_epoch(1, one.key)
    reader = Registry(remote, envelope, desktop.device, desktop.keys)
    reader.admits = lambda r: epochs.admits(1, one.devices, r.device, r.epoch)
    assert reader.key_of(puppet.device) is None
    assert reader.key_of(laptop.device) == laptop.keys.sign_public  # in the grant
    newcomer = registered(remote, envelope, "newcomer")  # registered under epoch 1
    assert reader.key_of(newcomer.device) == newcomer.keys.sign_public
    assert puppet.device in reader.records()  # listed, but its signatures do not count


def test_epochs_planted_above_the_vaults_cost_a_recovery_key_bounded_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A token holder plants epochs, each with a grant and a recovery object
    that costs an Argon2id derivation to try: a join tries a bounded number,
    then refuses the key plainly."""
    remote, vault_id, zero, _, (laptop, _desktop, _phone) = _vault()
    one, secret = _rotate(remote, vault_id, zero, laptop)

    def plant(numbers: range) -> None:
        for number in numbers:
            grant = os.urandom(300)
            folder = f"keys/epoch/{number:08d}/"
            remote.put_object(f"{folder}grant", grant)
            remote.put_object(f"{folder}{epochs._attempt(grant, number).hex()}/recovery",
                              recovery.wrap(os.urandom(32),
                                            recovery.new_recovery_key(vault_id)[1], vault_id))

    plant(range(2, 12))  # 10 above the vault's newest: its key still opens it
    assert epochs.from_recovery(remote, vault_id, secret) == one
    plant(range(12, 42))
    tried: list[bytes] = []
    real = recovery.unwrap

    def counted(blob: bytes, key: bytes, of_vault: bytes) -> bytes:
        tried.append(blob)
        return real(blob, key, of_vault)

    monkeypatch.setattr(recovery, "unwrap", counted)
    with pytest.raises(Locked, match="none of the newest 16 key epochs"):
        epochs.from_recovery(remote, vault_id, secret)
    assert len(tried) == 16  # of 41
