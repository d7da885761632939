"""Fingerprints of the chain (`sync verify`) and silent devices, in this
process: the text form and its check digit, what the digest binds, the
device that is ahead recomputing its own at the other's head, and a remote
that swaps a version in between. Through real daemons and memvault-server:
`test_sync_verify.py`."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvault_base.errors import InvalidArgument, RollbackDetected
from memvaultd.sync import views
from memvaultd.sync.envelope import Envelope
from memvaultd.sync.fingerprint import Fingerprint, FingerprintKey
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.version_body import pack_ops
from memvaultd.sync.witness import Witness
from memvaultd.sync.worker import SyncWorker

from .signed_chain import signed_version, worker_devices
from .test_sync_worker_unit import _Chain, _IdleVault

KEY, VAULT = bytes(range(32)), bytes(range(16))


def _fingerprint(**change: object) -> Fingerprint:
    args: dict[str, object] = {"chain": 1, "scope": "", "head": 42, "head_hash": b"h" * 32}
    args.update(change)
    return FingerprintKey(KEY, VAULT).of(**args)  # type: ignore[arg-type]


def test_the_text_reads_back_with_spaces_or_dashes() -> None:
    mine = _fingerprint()
    text = mine.text()
    assert text.startswith("1-42-") and len(text.split("-")) == 8, text
    assert Fingerprint.parse(text) == mine
    assert Fingerprint.parse("  " + text.replace("-", " ") + "\n") == mine
    assert Fingerprint.parse(text.replace("-", " - ")) == mine


@given(st.integers(0, 37), st.integers(1, 9))
def test_every_single_mistyped_digit_is_refused(place: int, shift: int) -> None:
    text = _fingerprint().text()
    digits = [i for i, char in enumerate(text) if char.isdigit()]
    at = digits[place % len(digits)]
    typo = text[:at] + str((int(text[at]) + shift) % 10) + text[at + 1 :]
    with pytest.raises(InvalidArgument, match=r"mistyped|not a memvault fingerprint"):
        Fingerprint.parse(typo)


@pytest.mark.parametrize("text", ["", "1-42", "1-42-12345-12345-12345-12345-12345",
                                  "1-42-1234-12345-12345-12345-12345-123456",
                                  "a-42-12345-12345-12345-12345-12345-12345"])
def test_what_is_not_a_fingerprint_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgument, match="not a memvault fingerprint"):
        Fingerprint.parse(text)


def test_the_digits_bind_the_key_vault_chain_scope_head_and_hash() -> None:
    base = _fingerprint().digits
    others = [_fingerprint(chain=2), _fingerprint(scope="moved"), _fingerprint(head=43),
              _fingerprint(head_hash=b"i" * 32),
              FingerprintKey(bytes(32), VAULT).of(1, "", 42, b"h" * 32),
              FingerprintKey(KEY, bytes(16)).of(1, "", 42, b"h" * 32)]
    assert all(other.digits != base for other in others)
    assert len({other.digits for other in others}) == len(others)


@pytest.fixture
def synced(tmp_path: Path) -> tuple[SyncWorker, _Chain]:
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    chain = _Chain(remote, envelope)
    for _ in range(6):
        chain.append()
    worker = SyncWorker(_IdleVault(), remote,  # type: ignore[arg-type]
                        HighWaterFile(tmp_path, os.urandom(32), vault_id),
                        HighWater("memory://test"), envelope,
                        **worker_devices(remote, envelope))
    worker.sync_once()
    assert worker.high_water.head == 6
    return worker, chain


def test_the_device_ahead_recomputes_its_hash_at_any_earlier_version(
        synced: tuple[SyncWorker, _Chain]) -> None:
    worker, chain = synced
    assert [worker.hash_at(n) for n in range(1, 7)] == chain.hashes
    worker.mark.hashes.clear()  # read back from the remote, linked up to the head
    assert [worker.hash_at(n) for n in range(1, 7)] == chain.hashes
    assert worker.hash_at(0) == b""
    with pytest.raises(InvalidArgument):
        worker.hash_at(7)


def test_a_version_swapped_between_is_a_fork_not_a_hash(synced: tuple[SyncWorker, _Chain]
                                                        ) -> None:
    worker, chain = synced
    versions = chain.remote._vault.versions  # type: ignore[attr-defined]
    versions[3] = signed_version(chain.device, 4, chain.hashes[2], pack_ops([]))
    # What this device pulled in this process is known without asking the remote.
    assert worker.hash_at(2) == chain.hashes[1]
    worker.mark.hashes.clear()  # as after a restart: only the head's hash is on disk
    assert worker.hash_at(5) == chain.hashes[4]  # above the swap: unaffected
    with pytest.raises(RollbackDetected, match="forked or replaced"):
        worker.hash_at(2)


def test_verify_agrees_on_a_prefix_and_stops_sync_on_a_fork(
        synced: tuple[SyncWorker, _Chain]) -> None:
    worker, chain = synced
    key = FingerprintKey(KEY, VAULT)
    behind = key.of(1, "", 4, chain.hashes[3])
    verdict = views.verify(worker, key, behind.text(), catch_up=worker.sync_once)
    assert verdict.agreed and verdict.compared_at == 4 and verdict.mine.head == 6
    assert worker.status.state != "stopped"

    other = key.of(1, "", 4, hashlib.sha256(b"another history").digest())
    verdict = views.verify(worker, key, other.text(), catch_up=worker.sync_once)
    assert not verdict.agreed and "different histories" in verdict.forked
    assert worker.status.state == "stopped" and "ForkDetected" in worker.status.last_error


def test_a_head_the_remote_will_not_hand_over_is_a_withheld_view(
        synced: tuple[SyncWorker, _Chain]) -> None:
    worker, _ = synced
    key = FingerprintKey(KEY, VAULT)
    ahead = key.of(1, "", 9, os.urandom(32))
    verdict = views.verify(worker, key, ahead.text(), catch_up=worker.sync_once)
    assert "withholds versions" in verdict.forked and worker.status.state == "stopped"


def test_a_newer_chain_here_is_undecided_not_a_fork(synced: tuple[SyncWorker, _Chain]) -> None:
    worker, _ = synced
    key = FingerprintKey(KEY, VAULT)
    worker.high_water = HighWater("memory://test", chain=2, scope="moved")
    verdict = views.verify(worker, key, key.of(1, "", 3, os.urandom(32)).text(),
                           catch_up=worker.sync_once)
    assert verdict.undecided and not verdict.forked and worker.status.state != "stopped"


def test_silent_devices_are_the_others_past_the_bound_longest_first() -> None:
    seen = {"me": 0.0, "laptop": 100.0, "phone": 50.0, "desktop": 990.0}
    silent = views.silent_devices(seen, lambda device: device == "me", now=1000.0,
                                  bound_s=500.0)
    assert silent == [("phone", 50.0), ("laptop", 100.0)]


def test_the_mark_keeps_each_writers_newest_stamp() -> None:
    mark = HighWater("memory://test").advanced(1, b"a" * 32, writers={"x": 5.0, "y": 7.0})
    mark = mark.advanced(2, b"b" * 32, writers={"x": 3.0})
    assert mark.seen == {"x": 5.0, "y": 7.0}


def _witnessed(worker: SyncWorker, chain: _Chain) -> Witness:
    """A witness on a remote of its own, attached to `worker` as device "me";
    returned as another device's, "other", to record views with."""
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=os.urandom(16).hex())
    worker.attach_witness(Witness(remote, chain.envelope, "me"), "memory://witness", None)
    return Witness(remote, chain.envelope, "other")


def test_through_a_witness_a_consistent_view_passes_and_keeps_one_record(
        synced: tuple[SyncWorker, _Chain]) -> None:
    worker, chain = synced
    other = _witnessed(worker, chain)
    other.record(1, "", 4, chain.hashes[3])
    other.record(1, "", 6, chain.hashes[5])
    other.record(7, "moved", 99, os.urandom(32))  # another chain: not compared
    worker.sync_once()
    assert worker.status.state == "idle", worker.status.last_error
    assert [view.device for view in other.others()] == ["me"]
    assert len(other.remote.list_objects("seen/other/")) == 1


def test_through_a_witness_a_fork_and_a_withheld_version_stop_sync(
        synced: tuple[SyncWorker, _Chain]) -> None:
    worker, chain = synced
    other = _witnessed(worker, chain)
    other.record(1, "", 5, hashlib.sha256(b"another history").digest())
    with pytest.raises(RollbackDetected, match="different histories"):
        worker.sync_once()
    assert worker.status.state == "stopped" and "ForkDetected" in worker.status.last_error

    worker.status.state = "idle"
    other.record(1, "", 9, os.urandom(32))
    with pytest.raises(RollbackDetected, match="withholds versions"):
        worker.sync_once()
