"""Remote snapshots: published once, in sealed chunks of bounded size, read
back whole or not at all.

The worker and the snapshot objects run against a remote in this process
(`memory://`), wrapped to count what is uploaded; the same through real
daemons and a real memvault-server at a state over the server's 16 MiB
object limit:
`test_sync.py::test_a_vault_over_the_object_limit_joins_from_one_snapshot`.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memvault_base.errors import IntegrityError, Unavailable
from memvaultd.model.hlc import Stamp
from memvaultd.model.operations import ACCESS, Operation
from memvaultd.sync import snapshot_publisher, snapshots
from memvaultd.sync.envelope import Envelope
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.snapshots import CHUNK_OBJECT, latest_snapshot
from memvaultd.sync.version_body import pack_ops
from memvaultd.sync.worker import SyncWorker

from .signed_chain import registered, signed_version, worker_devices

MIB = 1 << 20
OPS_PER_VERSION = 10
VERSIONS = 200  # 2,000 operations: past SNAPSHOT_MIN_OPS for a small vault


class _Vault:
    """The part of a vault the worker calls: nothing local, a state of `body`."""

    def __init__(self, body: bytes, size: int = 5) -> None:
        self.body = body
        self._size = size
        self.captures = 0

    def keep_log_from(self, seq: int | None) -> None:
        pass

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int]:
        return [], seq

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        return len(ops)

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        self.captures += 1
        return self.body

    def size(self) -> int:
        return self._size


class _Uploads:
    """A remote that counts what is put on it, and can be made to fail puts."""

    def __init__(self, inner: Remote) -> None:
        self.inner = inner
        self.puts: list[tuple[str, int]] = []
        self.failing = False

    def put_object(self, name: str, data: bytes) -> bool:
        if self.failing:
            raise Unavailable("the remote went away")
        self.puts.append((name, len(data)))
        return self.inner.put_object(name, data)

    @property
    def bytes_put(self) -> int:
        return sum(size for _, size in self.puts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _ops(number: int) -> list[Operation]:
    return [Operation(f"op{number}-{i}", ACCESS, Stamp(1, number * 100 + i, "other"),
                      ids=("m1",), at=1.0) for i in range(OPS_PER_VERSION)]


def _chain(remote: Remote, envelope: Envelope, versions: int) -> None:
    """`versions` versions appended as another device of the vault would."""
    parent, device = b"", registered(remote, envelope)
    for number in range(1, versions + 1):
        blob = signed_version(device, number, parent, pack_ops(_ops(number)))
        assert remote.append_version(number, parent, blob)
        parent = hashlib.sha256(blob).digest()


def _site(tmp_path: Path, body: bytes, versions: int = VERSIONS
          ) -> tuple[SyncWorker, _Uploads, _Vault, Envelope]:
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    _chain(remote, envelope, versions)
    uploads = _Uploads(remote)
    vault = _Vault(body)
    worker = SyncWorker(vault, uploads,  # type: ignore[arg-type]
                        HighWaterFile(tmp_path, os.urandom(32), vault_id),
                        HighWater("memory://test"), envelope,
                        **worker_devices(remote, envelope))
    return worker, uploads, vault, envelope


def test_a_due_snapshot_is_published_once_not_every_round(tmp_path: Path) -> None:
    body = os.urandom(9 * MIB)  # 9 MiB: three chunks
    worker, uploads, vault, envelope = _site(tmp_path, body)
    for _ in range(6):  # the round that pulls the chain, then five idle ones
        worker.sync_once(full_check=False)
    print("uploaded:", uploads.bytes_put, "bytes in", len(uploads.puts), "objects")
    assert worker.high_water.head == VERSIONS
    assert worker.high_water.snapshot == VERSIONS and worker.status.snapshot == VERSIONS
    assert vault.captures == 1, "the state was captured once"
    assert len(uploads.puts) == 4, uploads.puts  # three chunks and the manifest
    assert uploads.bytes_put <= len(body) + 2 * CHUNK_OBJECT
    found = latest_snapshot(uploads.inner, envelope, bytes)
    assert found is not None and found[0] == VERSIONS and found[2] == body


def test_a_snapshot_over_the_object_limit_is_cut_into_bounded_chunks(tmp_path: Path) -> None:
    body = os.urandom(40 * MIB)  # over memvault-server's default 16 MiB limit
    worker, uploads, _, envelope = _site(tmp_path, body)
    worker.sync_once()
    assert worker.status.state == "idle"
    sizes = [size for _, size in uploads.puts]
    assert len(sizes) == 12 and max(sizes) == CHUNK_OBJECT  # 11 chunks and the manifest
    found = latest_snapshot(uploads.inner, envelope, bytes)
    assert found is not None and found[2] == body


def test_another_devices_snapshot_is_not_published_again(tmp_path: Path) -> None:
    worker, uploads, vault, envelope = _site(tmp_path, os.urandom(MIB))
    head = uploads.inner.versions_after(VERSIONS - 1, limit=1)[0][1]
    snapshots.publish(uploads.inner, envelope, VERSIONS, hashlib.sha256(head).digest(),
                      b"another device's state")
    worker.sync_once()
    assert uploads.puts == [] and vault.captures == 0
    assert worker.high_water.snapshot == VERSIONS


def test_a_failed_publication_does_not_fail_the_round_and_is_tried_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    worker, uploads, _, _ = _site(tmp_path, os.urandom(MIB))
    uploads.failing = True
    worker.sync_once()
    assert worker.status.state == "idle" and worker.high_water.head == VERSIONS
    assert any("not published" in error for error in worker.status.errors)
    uploads.failing = False
    worker.sync_once()
    assert uploads.puts == [], "no new try before the retry time"
    monkeypatch.setattr(snapshot_publisher, "RETRY_S", 0.0)
    worker.snapshots.retry_at = 0.0
    worker.sync_once()
    assert worker.high_water.snapshot == VERSIONS and len(uploads.puts) == 2


# -- what a joiner accepts ------------------------------------------------------


def _published(versions: int = 3) -> tuple[Remote, Envelope, list[snapshots.Snapshot]]:
    """A chain of `versions` and a 9 MiB snapshot at each of versions 1 and 3."""
    vault_id = os.urandom(16)
    envelope = Envelope(os.urandom(32), vault_id)
    remote = open_remote(f"memory://{uuid.uuid4().hex}", vault_id=vault_id.hex())
    _chain(remote, envelope, versions)
    made = []
    for number in (1, versions):
        digest = hashlib.sha256(remote.versions_after(number - 1, 1)[0][1]).digest()
        made.append(snapshots.publish(remote, envelope, number, digest,
                                      bytes([number]) * (9 * MIB)))
    return remote, envelope, made


def _replace(remote: Remote, name: str, data: bytes) -> None:
    remote._vault.objects[name] = data  # type: ignore[attr-defined]


def _object(remote: Remote, name: str) -> bytes:
    return remote.get_object(name)


def test_a_joiner_takes_the_newest_snapshot_whole() -> None:
    remote, envelope, _ = _published()
    found = latest_snapshot(remote, envelope, bytes)
    assert found is not None and found[0] == 3 and found[2] == bytes([3]) * (9 * MIB)


@pytest.mark.parametrize("attack", ["flipped", "truncated", "moved", "swapped", "missing",
                                    "other snapshot's", "planted manifest"])
def test_an_altered_snapshot_is_passed_over_for_an_older_one(attack: str) -> None:
    remote, envelope, (older, newest) = _published()
    chunk0, chunk1 = newest.chunk_name(0), newest.chunk_name(1)
    if attack == "flipped":
        data = bytearray(_object(remote, chunk1))
        data[100] ^= 1
        _replace(remote, chunk1, bytes(data))
    elif attack == "truncated":
        _replace(remote, chunk1, _object(remote, chunk1)[: 2 * MIB])
    elif attack == "moved":  # chunk 0's bytes at place 1
        _replace(remote, chunk1, _object(remote, chunk0))
    elif attack == "swapped":  # the manifest of the older snapshot under the newer's name
        _replace(remote, newest.name, _object(remote, older.name))
    elif attack == "missing":
        remote.delete_object(newest.chunk_name(2))
    elif attack == "other snapshot's":  # a chunk of the older snapshot
        _replace(remote, chunk1, _object(remote, older.chunk_name(1)))
    else:  # someone holding only a token plants a manifest at the head
        remote.put_object(f"states/{3:020d}/{'f' * 32}", os.urandom(4096))
        remote.put_object(f"states/{3:020d}/not-hex", os.urandom(4096))
        _replace(remote, chunk1, b"garbage")
    found = latest_snapshot(remote, envelope, bytes)
    assert found is not None and found[0] == 1 and found[2] == bytes([1]) * (9 * MIB)


def test_with_every_snapshot_damaged_a_joiner_replays_the_chain() -> None:
    remote, envelope, made = _published()
    for snapshot in made:
        _replace(remote, snapshot.chunk_name(0), b"garbage")
    assert latest_snapshot(remote, envelope, bytes) is None


def test_a_body_that_opens_but_does_not_parse_is_passed_over_for_an_older_one() -> None:
    remote, envelope, _ = _published()

    def parse(body: bytes) -> bytes:
        if body[0] == 3:
            raise IntegrityError("snapshot body does not parse: the head is cut short")
        return body

    found = latest_snapshot(remote, envelope, parse)
    assert found is not None and found[0] == 1 and found[2] == bytes([1]) * (9 * MIB)
