"""Sealed snapshots: round trips, and every alteration refused."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault_base.errors import IntegrityError, InvalidArgument
from memvaultd.storage import snapshots as snapshot
from memvaultd.storage.snapshots import SnapshotStore

KEY = bytes(range(32))
VAULT = bytes.fromhex("c0c1c2c3c4c5c6c7c8c9cacbcccdcecf")
HEADER = 42
OVERHEAD = 28


def store(directory: Path, key: bytes = KEY, vault_id: bytes = VAULT) -> SnapshotStore:
    return SnapshotStore(directory, key, vault_id)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """16-byte chunks, so a small sample has several."""
    monkeypatch.setattr(snapshot, "CHUNK_SIZE", 16)
    return 16


def test_empty_store(tmp_path: Path) -> None:
    assert store(tmp_path / "snap").latest() is None
    assert stat.S_IMODE((tmp_path / "snap").stat().st_mode) == 0o700


def test_write_and_read(tmp_path: Path) -> None:
    s = store(tmp_path)
    path = s.write(42, b"the whole state")
    assert path == tmp_path / f"{42:020d}.snap"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert s.latest() == (42, b"the whole state")
    assert b"whole state" not in path.read_bytes()
    assert os.listdir(tmp_path) == [path.name]  # no temporary left


def test_layout(tmp_path: Path, small_chunks: int) -> None:
    path = store(tmp_path).write(7, b"x" * 40)
    data = path.read_bytes()
    header = b"MVSNP\x01" + VAULT + (7).to_bytes(8, "big") + (3).to_bytes(4, "big")
    assert data[:HEADER] == header + (40).to_bytes(8, "big")
    assert len(data) == HEADER + 40 + 3 * OVERHEAD


def test_newest_wins(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(10, b"ten")
    s.write(200, b"two hundred")
    s.write(30, b"thirty")
    assert s.latest() == (200, b"two hundred")


@settings(max_examples=40, deadline=None)
@given(body=st.binary(max_size=200), seq=st.integers(0, 2**64 - 1))
def test_random_bodies_round_trip(body: bytes, seq: int) -> None:
    import tempfile

    saved = snapshot.CHUNK_SIZE
    snapshot.CHUNK_SIZE = 32  # many chunk boundaries, including exact multiples
    try:
        with tempfile.TemporaryDirectory() as tmp:
            s = store(Path(tmp))
            s.write(seq, body)
            assert s.latest() == (seq, body)
    finally:
        snapshot.CHUNK_SIZE = saved


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    s = store(tmp_path)
    for seq in (5, 1, 9, 3):
        s.write(seq, b"state %d" % seq)
    assert s.prune(keep=2) == 2
    assert sorted(p.name[:20] for p in tmp_path.iterdir()) == [f"{5:020d}", f"{9:020d}"]
    assert s.prune() == 0
    with pytest.raises(InvalidArgument):
        s.prune(keep=0)


def test_interrupted_write_leaves_nothing(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(1, b"old")
    (tmp_path / f".{2:020d}.snap.tmp").write_bytes(b"MVSNP half written")
    assert store(tmp_path).latest() == (1, b"old")
    assert sorted(os.listdir(tmp_path)) == [f"{1:020d}.snap"]


def test_negative_seq_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        store(tmp_path).write(-1, b"")


# -- attacks -------------------------------------------------------------


def test_every_flipped_byte_is_refused(tmp_path: Path, small_chunks: int) -> None:
    s = store(tmp_path)
    path = s.write(3, bytes(range(40)))  # 3 chunks: 16, 16, 8
    original = path.read_bytes()
    for offset in range(len(original)):
        altered = bytearray(original)
        altered[offset] ^= 0x01
        path.write_bytes(altered)
        with pytest.raises(IntegrityError, match=path.name):
            s.latest()


@pytest.mark.parametrize("cut", [0, 20, HEADER, HEADER + 10, HEADER + 16 + OVERHEAD, -OVERHEAD, -1])
def test_truncation_is_refused(tmp_path: Path, small_chunks: int, cut: int) -> None:
    s = store(tmp_path)
    path = s.write(3, bytes(range(40)))
    path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(IntegrityError):
        s.latest()


def test_dropped_final_chunk_with_rewritten_header_is_refused(
    tmp_path: Path, small_chunks: int
) -> None:
    # The attacker shortens the body to two whole chunks and fixes up the
    # header; the new last chunk was not sealed as final.
    s = store(tmp_path)
    path = s.write(3, bytes(range(40)))
    data = path.read_bytes()
    header = data[:30] + (2).to_bytes(4, "big") + (32).to_bytes(8, "big")
    path.write_bytes(header + data[HEADER : HEADER + 2 * (16 + OVERHEAD)])
    with pytest.raises(IntegrityError, match="chunk 0"):
        s.latest()


def test_swapped_chunks_are_refused(tmp_path: Path, small_chunks: int) -> None:
    s = store(tmp_path)
    path = s.write(3, bytes(range(48)))  # three full chunks
    data = path.read_bytes()
    size = 16 + OVERHEAD
    c0, c1, c2 = (data[HEADER + i * size : HEADER + (i + 1) * size] for i in range(3))
    path.write_bytes(data[:HEADER] + c1 + c0 + c2)
    with pytest.raises(IntegrityError, match="chunk 0"):
        s.latest()


def test_chunk_moved_between_snapshots_is_refused(tmp_path: Path, small_chunks: int) -> None:
    s = store(tmp_path)
    old = s.write(3, b"a" * 32)
    new = s.write(4, b"b" * 32)
    a, b = old.read_bytes(), new.read_bytes()
    size = 16 + OVERHEAD
    new.write_bytes(b[: HEADER + size] + a[HEADER + size :])
    with pytest.raises(IntegrityError, match="chunk 1"):
        s.latest()


def test_old_snapshot_renamed_as_newer_is_refused(tmp_path: Path) -> None:
    s = store(tmp_path)
    old = s.write(3, b"old state")
    s.write(9, b"new state")
    old.replace(tmp_path / f"{9:020d}.snap")
    with pytest.raises(IntegrityError, match="seq 3"):
        s.latest()


def test_other_vault_is_refused(tmp_path: Path) -> None:
    store(tmp_path, vault_id=bytes(16)).write(3, b"theirs")
    with pytest.raises(IntegrityError, match="belongs to vault"):
        store(tmp_path).latest()


def test_other_vault_relabelled_is_refused(tmp_path: Path) -> None:
    path = store(tmp_path, vault_id=bytes(16)).write(3, b"theirs")
    data = path.read_bytes()
    path.write_bytes(data[:6] + VAULT + data[22:])
    with pytest.raises(IntegrityError, match="chunk 0"):
        store(tmp_path).latest()


def test_wrong_key_is_refused(tmp_path: Path) -> None:
    store(tmp_path).write(3, b"state")
    with pytest.raises(IntegrityError):
        store(tmp_path, key=bytes(32)).latest()


def test_large_body_round_trip(tmp_path: Path) -> None:
    # 2.5 chunks of 4 MiB: the real chunk size, a partial last chunk.
    body = os.urandom(10 * 1024 * 1024)
    s = store(tmp_path)
    s.write(1, body)
    started = time.perf_counter()
    assert s.latest() == (1, body)
    assert time.perf_counter() - started < 1.0


def test_snapshots_fall_due_every_setting_or_a_tenth_of_the_vault() -> None:
    # The setting rules small vaults: 10,000 writes into 50,000 memories.
    assert not snapshot.due(9_999, 50_000, 10_000)
    assert snapshot.due(10_000, 50_000, 10_000)
    # A tenth of the vault rules large ones, so a bulk load does not seal
    # the whole of a growing vault every 10,000 writes.
    assert not snapshot.due(10_000, 400_000, 10_000)
    assert not snapshot.due(39_999, 400_000, 10_000)
    assert snapshot.due(40_000, 400_000, 10_000)
    # A small setting still counts (tests and cautious users set it low).
    assert snapshot.due(1, 0, 1)
    assert not snapshot.due(0, 0, 1)


def test_a_bulk_load_seals_a_small_multiple_of_the_vault() -> None:
    """Loading 1M memories, 10,000 at a time: what the snapshots seal in all."""
    sealed, since, size = 0, 0, 0
    while size < 1_000_000:
        size += 10_000
        since += 10_000
        if snapshot.due(since, size, 10_000):
            sealed, since = sealed + size, 0
    assert sealed < 12 * size  # a fixed 10,000 would seal ~50 x (every batch: 50.5M)


def test_a_body_in_parts_is_sealed_as_their_concatenation(tmp_path: Path,
                                                          small_chunks: int) -> None:
    parts = [b"12345", memoryview(b"a part that spans two chunks"), b"", bytearray(b"tail")]
    whole = b"".join(parts)
    path = store(tmp_path).write(9, parts)
    assert store(tmp_path).latest() == (9, whole)
    chunks = -(-len(whole) // small_chunks)
    assert len(path.read_bytes()) == HEADER + len(whole) + chunks * OVERHEAD
    empty = store(tmp_path / "empty").write(1, [b"", b""])
    assert store(tmp_path / "empty").latest() == (1, b"")
    assert len(empty.read_bytes()) == HEADER + OVERHEAD  # one empty sealed chunk


def test_a_delta_round_trips_and_is_no_snapshot(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(10, b"the whole state")
    path = s.write_delta(14, b"what changed")
    assert path == tmp_path / f"{14:020d}.delta"
    assert path.read_bytes()[:5] == b"MVSND"
    assert s.read_delta(14) == b"what changed"
    assert s.deltas() == [(14, path)] and [seq for seq, _ in s.files()] == [10]
    # Renamed to a snapshot's name, its magic (bound into every chunk) gives it away.
    path.rename(tmp_path / f"{14:020d}.snap")
    with pytest.raises(IntegrityError, match="bad magic"):
        s.read(14)


def test_a_newer_delta_replaces_the_older_and_a_snapshot_every_delta(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(10, b"state")
    s.write_delta(12, b"first")
    s.write_delta(15, b"second")
    assert [seq for seq, _ in s.deltas()] == [15]
    s.write(20, b"newer state")
    assert s.deltas() == []
    assert sorted(os.listdir(tmp_path)) == [f"{10:020d}.snap", f"{20:020d}.snap"]


def test_a_tampered_delta_is_refused(tmp_path: Path) -> None:
    s = store(tmp_path)
    path = s.write_delta(3, b"what changed since")
    data = bytearray(path.read_bytes())
    data[HEADER + 2] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="failed to authenticate"):
        s.read_delta(3)


def test_a_cancelled_write_leaves_nothing(tmp_path: Path, small_chunks: int) -> None:
    s = store(tmp_path)
    s.write(1, b"kept")
    asked = iter([False, False, True])
    with pytest.raises(snapshot.SnapshotCancelled):
        s.write(2, b"x" * 100, cancelled=lambda: next(asked))
    assert os.listdir(tmp_path) == [f"{1:020d}.snap"]
