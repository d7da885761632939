"""The sealed operation log: round trips, crash recovery, and attacks on its bytes."""

from __future__ import annotations

import errno
import logging
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault_base.errors import IntegrityError, InvalidArgument, ResourceExhausted
from memvaultd.storage import oplog
from memvaultd.storage.oplog import OperationLog

KEY = bytes(range(32))
VAULT = bytes.fromhex("a1a2a3a4a5a6a7a8a9aaabacadaeafb0")
HEADER = 30  # magic 5 | version 1 | vault id 16 | first seq 8
RECORD_HEAD = 12  # length 4 | seq 8
OVERHEAD = 28
REPO = Path(__file__).resolve().parent.parent


def record(seq: int, size: int = 40) -> bytes:
    return (f"op {seq}:".encode() * size)[:size]


def open_log(directory: Path, key: bytes = KEY, vault_id: bytes = VAULT) -> OperationLog:
    return OperationLog(directory, key, vault_id)


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def build(directory: Path, layout: list[int], size: int = 40) -> dict[int, bytes]:
    """A closed log with one segment per entry of `layout` (records in it)."""
    written: dict[int, bytes] = {}
    with open_log(directory) as log:
        for count in layout:
            batch = [record(log.last_seq + i + 1, size) for i in range(count)]
            last = log.append(batch)
            written.update(zip(range(last - count + 1, last + 1), batch, strict=True))
            log.rotate()
    return written


def replay_all(directory: Path, after: int = 0) -> list[tuple[int, bytes]]:
    return list(open_log(directory).replay(after))


def replay_until_error(directory: Path) -> tuple[list[tuple[int, bytes]], Exception | None]:
    got: list[tuple[int, bytes]] = []
    try:
        for item in open_log(directory).replay():
            got.append(item)
    except IntegrityError as err:
        return got, err
    return got, None


# -- round trips ---------------------------------------------------------


def test_empty_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "log")
    assert log.last_seq == 0 and list(log.replay()) == [] and log.size_bytes() == 0
    assert stat.S_IMODE((tmp_path / "log").stat().st_mode) == 0o700


def test_append_and_replay(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.append([b"one"]) == 1
    assert log.append([b"two", b"three", b""]) == 4
    assert log.append([]) == 4
    assert list(log.replay()) == [(1, b"one"), (2, b"two"), (3, b"three"), (4, b"")]
    assert list(log.replay(after=2)) == [(3, b"three"), (4, b"")]
    assert list(log.replay(after=4)) == []


def test_segment_layout(tmp_path: Path) -> None:
    with open_log(tmp_path) as log:
        log.append([b"hello"])
    (path,) = segments(tmp_path)
    assert path.name == "00000000000000000001.log"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = path.read_bytes()
    assert data[:HEADER] == b"MVLOG\x01" + VAULT + (1).to_bytes(8, "big")
    assert data[HEADER : HEADER + RECORD_HEAD] == (5 + OVERHEAD).to_bytes(4, "big") + (1).to_bytes(
        8, "big"
    )
    assert len(data) == HEADER + RECORD_HEAD + 5 + OVERHEAD
    assert b"hello" not in data


def test_reopen_continues_in_a_new_segment(tmp_path: Path) -> None:
    written = build(tmp_path, [3, 2])
    log = open_log(tmp_path)
    assert log.last_seq == 5
    assert log.append([record(6)]) == 6
    written[6] = record(6)
    assert [p.name[:20] for p in segments(tmp_path)] == [f"{s:020d}" for s in (1, 4, 6)]
    assert dict(log.replay()) == written
    assert log.size_bytes() == sum(p.stat().st_size for p in segments(tmp_path))


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(st.binary(max_size=3000), max_size=6), max_size=8))
def test_random_records_round_trip(batches: list[list[bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp))
        expected = []
        for i, batch in enumerate(batches):
            log.append(batch)
            expected.extend(batch)
            if i % 3 == 2:
                log.rotate()
        log.close()
        assert [r for _, r in open_log(Path(tmp)).replay()] == expected


def test_automatic_rotation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oplog, "SEGMENT_LIMIT", 1000)
    log = open_log(tmp_path)
    for seq in range(1, 41):
        log.append([record(seq, 100)])
    assert len(segments(tmp_path)) > 4
    assert all(p.stat().st_size <= 1000 + 140 for p in segments(tmp_path))
    assert dict(log.replay()) == {s: record(s, 100) for s in range(1, 41)}


def test_one_write_and_one_sync_per_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path)
    log.append([b"first"])  # starts the segment
    calls: list[str] = []
    real_write = os.write
    monkeypatch.setattr(oplog, "_sync_file", lambda fd: calls.append("sync"))
    monkeypatch.setattr(oplog, "sync_dir", lambda path: calls.append("dirsync"))

    def counting_write(fd: int, data: bytes) -> int:
        calls.append("write")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    log.append([b"x" * 2000] * 10)
    assert calls == ["write", "sync"]
    log.rotate()
    calls.clear()
    log.append([b"y"])
    assert calls == ["write", "sync", "dirsync"]  # a new segment's name must be durable


def test_oversized_record_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oplog, "MAX_RECORD_SIZE", 100)
    log = open_log(tmp_path)
    with pytest.raises(InvalidArgument):
        log.append([b"ok", b"x" * 101])
    assert log.last_seq == 0 and segments(tmp_path) == []


def test_append_after_close_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append([b"x"])


@pytest.mark.parametrize("fail_on", [1, 2])
def test_full_disk_leaves_no_half_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_on: int
) -> None:
    log = open_log(tmp_path)
    real_write = os.write
    count = 0

    def write(fd: int, data: bytes) -> int:
        nonlocal count
        count += 1
        if count == fail_on:
            real_write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    results: list[int | None] = []
    for seq in range(1, 4):
        try:
            results.append(log.append([record(seq)]))
        except ResourceExhausted:
            results.append(None)
    assert results == ([None, 1, 2] if fail_on == 1 else [1, None, 2])
    replayed = list(open_log(tmp_path).replay())
    assert [s for s, _ in replayed] == [1, 2]


# -- pruning -------------------------------------------------------------


def test_prune_removes_only_whole_old_segments(tmp_path: Path) -> None:
    build(tmp_path, [3, 3, 3])  # seqs 1-3, 4-6, 7-9
    log = open_log(tmp_path)
    assert log.prune(upto_seq=5) == 1  # 4-6 still holds 6
    assert [p.name[:20] for p in segments(tmp_path)] == [f"{s:020d}" for s in (4, 7)]
    assert [s for s, _ in log.replay(after=5)] == [6, 7, 8, 9]
    assert log.prune(upto_seq=100) == 1  # the newest segment always stays
    assert log.last_seq == 9 and open_log(tmp_path).last_seq == 9
    with pytest.raises(IntegrityError, match="seq 1 is missing"):
        list(log.replay())


def test_prune_never_removes_the_open_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append([b"a"])
    assert log.prune(upto_seq=1) == 0
    assert log.append([b"b"]) == 2


# -- reading beside appends ----------------------------------------------
# The sync worker reads its backlog this way, without holding writes back.


def test_bounded_replay_reads_nothing_past_upto_and_changes_nothing(tmp_path: Path) -> None:
    written = build(tmp_path, [3, 4])  # seqs 1-3, 4-7
    log = open_log(tmp_path)
    newest = segments(tmp_path)[-1]
    with newest.open("ab") as f:  # an append in flight: a record half written
        f.write(b"\x00\x00\x00\x50" + (8).to_bytes(8, "big") + b"half")
    size = newest.stat().st_size
    assert list(log.replay(after=2, upto=6)) == [(s, written[s]) for s in (3, 4, 5, 6)]
    assert list(log.replay(after=0, upto=7)) == sorted(written.items())
    assert newest.stat().st_size == size, "a bounded replay cut the append in flight"


def test_bounded_replay_skips_segments_begun_after_upto(tmp_path: Path) -> None:
    written = build(tmp_path, [3, 3])
    log = open_log(tmp_path)
    segment = segments(tmp_path)[-1]
    # A segment of seqs 7- that a writer has only begun (its header only).
    (tmp_path / f"{7:020d}{segment.name[20:]}").write_bytes(segment.read_bytes()[:HEADER])
    assert list(log.replay(after=0, upto=6)) == sorted(written.items())


def test_bounded_replay_refuses_a_log_short_of_upto(tmp_path: Path) -> None:
    build(tmp_path, [3, 3])
    log = open_log(tmp_path)
    newest = segments(tmp_path)[-1]
    with newest.open("r+b") as f:  # record 6, acknowledged, cut off
        f.truncate(newest.stat().st_size - (RECORD_HEAD + 40 + OVERHEAD))
    with pytest.raises(IntegrityError, match="seq 6 is missing"):
        list(log.replay(after=2, upto=6))
    newest.unlink()  # records 4-6 gone whole
    with pytest.raises(IntegrityError, match="seq 4 is missing"):
        list(log.replay(after=3, upto=6))


def test_bounded_replay_beside_a_writer(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append([record(1)])
    done = threading.Event()

    def write() -> None:
        while not done.is_set() and log.last_seq < 2000:
            log.append([record(log.last_seq + i + 1) for i in range(3)])
            if log.last_seq % 300 == 0:
                log.rotate()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        reads = 0
        while writer.is_alive() and reads < 200:
            upto = log.last_seq
            got = list(log.replay(after=0, upto=upto))
            assert [s for s, _ in got] == list(range(1, upto + 1))
            assert all(data == record(s) for s, data in got)
            reads += 1
    finally:
        done.set()
        writer.join()
    assert reads > 5


# -- torn tails ----------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 5, 11, 12, 13, 50])
def test_torn_tail_is_cut_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cut: int
) -> None:
    written = build(tmp_path, [2, 3])
    newest = segments(tmp_path)[-1]
    whole = newest.stat().st_size
    last_record = RECORD_HEAD + 40 + OVERHEAD
    with newest.open("r+b") as f:
        f.truncate(whole - last_record + cut)
    with caplog.at_level(logging.WARNING, logger="memvaultd.storage.oplog"):
        log = open_log(tmp_path)
    assert log.last_seq == 4
    assert newest.stat().st_size == whole - last_record
    assert any(newest.name in r.getMessage() for r in caplog.records)
    assert all(KEY.hex() not in r.getMessage() for r in caplog.records)
    assert log.append([b"after the crash"]) == 5
    del written[5]
    written[5] = b"after the crash"
    assert dict(log.replay()) == written


def test_zero_filled_tail_is_cut(tmp_path: Path) -> None:
    # Power loss can leave the file longer than the data that reached the disk.
    written = build(tmp_path, [2])
    newest = segments(tmp_path)[-1]
    with newest.open("ab") as f:
        f.write(bytes(4096))
    assert dict(replay_all(tmp_path)) == written


def test_segment_torn_in_its_header_is_removed(tmp_path: Path) -> None:
    written = build(tmp_path, [2])
    torn = tmp_path / f"{3:020d}.log"
    torn.write_bytes(b"MVLOG\x01" + VAULT[:4])
    log = open_log(tmp_path)
    assert log.last_seq == 2 and not torn.exists()
    assert dict(log.replay()) == written


def test_incomplete_record_before_the_newest_segment_is_damage(tmp_path: Path) -> None:
    build(tmp_path, [2, 2])
    oldest = segments(tmp_path)[0]
    with oldest.open("r+b") as f:
        f.truncate(oldest.stat().st_size - 10)
    got, err = replay_until_error(tmp_path)
    assert isinstance(err, IntegrityError) and oldest.name in str(err)
    assert got == []


# -- attacks -------------------------------------------------------------


def owner_of_byte(offset: int, size: int = 40) -> int:
    """The seq (1-based within the segment) whose bytes include `offset`; 0 for the header."""
    if offset < HEADER:
        return 0
    return (offset - HEADER) // (RECORD_HEAD + size + OVERHEAD) + 1


def test_every_flipped_byte_of_an_older_segment_is_refused(tmp_path: Path) -> None:
    written = build(tmp_path, [3, 1], size=8)
    oldest = segments(tmp_path)[0]
    original = oldest.read_bytes()
    for offset in range(len(original)):
        altered = bytearray(original)
        altered[offset] ^= 0xFF
        oldest.write_bytes(altered)
        got, err = replay_until_error(tmp_path)
        assert isinstance(err, IntegrityError), offset
        assert oldest.name in str(err)
        first_bad = max(owner_of_byte(offset, 8), 1)
        # Genuine records only, and none from the damaged one on. (A damaged
        # length or seq field stops the segment's structural scan before any
        # of its records is opened, so fewer may come back.)
        assert got == [(s, written[s]) for s in range(1, len(got) + 1)], offset
        assert len(got) < first_bad, offset
    oldest.write_bytes(original)


def test_every_flipped_byte_of_the_newest_segment_is_refused_or_cut(tmp_path: Path) -> None:
    written = build(tmp_path, [1, 3], size=8)
    newest = segments(tmp_path)[-1]
    original = newest.read_bytes()
    refused = 0
    for offset in range(len(original)):
        altered = bytearray(original)
        altered[offset] ^= 0xFF
        newest.write_bytes(altered)
        try:
            got = replay_all(tmp_path)
        except IntegrityError:
            refused += 1
            continue
        # A grown length field on the last record looks like a torn write: the
        # record is cut, never returned altered.
        last_length_field = range(
            len(original) - 8 - OVERHEAD - RECORD_HEAD, len(original) - 8 - OVERHEAD - 8
        )
        assert offset in last_length_field, offset
        assert got == [(s, written[s]) for s in range(1, 4)]
    assert refused >= len(original) - 4


@pytest.mark.parametrize("cut", [0, 10, HEADER, HEADER + 7])
def test_truncated_older_segment_is_refused(tmp_path: Path, cut: int) -> None:
    build(tmp_path, [2, 2])
    oldest = segments(tmp_path)[0]
    oldest.write_bytes(oldest.read_bytes()[:cut])
    got, err = replay_until_error(tmp_path)
    assert isinstance(err, IntegrityError)
    assert got == []


def test_deleted_middle_segment_is_a_gap(tmp_path: Path) -> None:
    build(tmp_path, [2, 2, 2])
    segments(tmp_path)[1].unlink()
    got, err = replay_until_error(tmp_path)
    assert isinstance(err, IntegrityError)
    assert "seq 3 is missing" in str(err) and f"{5:020d}.log" in str(err)
    assert [s for s, _ in got] == [1, 2]


def test_removed_record_is_a_gap(tmp_path: Path) -> None:
    build(tmp_path, [3, 1])
    oldest = segments(tmp_path)[0]
    data = oldest.read_bytes()
    size = RECORD_HEAD + 40 + OVERHEAD
    oldest.write_bytes(data[: HEADER + size] + data[HEADER + 2 * size :])
    got, err = replay_until_error(tmp_path)
    assert isinstance(err, IntegrityError) and "seq 2 is missing" in str(err)
    assert got == []  # the segment's structure is checked before any record is opened


def test_swapped_records_are_refused(tmp_path: Path) -> None:
    build(tmp_path, [3, 1])
    oldest = segments(tmp_path)[0]
    data = oldest.read_bytes()
    size = RECORD_HEAD + 40 + OVERHEAD
    one, two = data[HEADER : HEADER + size], data[HEADER + size : HEADER + 2 * size]
    # Whole records swapped (seq fields travel with them), then only the sealed parts.
    for a, b in (
        (two, one),
        (one[:RECORD_HEAD] + two[RECORD_HEAD:], two[:RECORD_HEAD] + one[RECORD_HEAD:]),
    ):
        oldest.write_bytes(data[:HEADER] + a + b + data[HEADER + 2 * size :])
        got, err = replay_until_error(tmp_path)
        assert isinstance(err, IntegrityError)
        assert got == []


def test_swapped_segments_are_refused(tmp_path: Path) -> None:
    build(tmp_path, [2, 2, 2])
    first, second, _ = segments(tmp_path)
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    got, err = replay_until_error(tmp_path)
    assert isinstance(err, IntegrityError) and got == []


def test_old_record_replayed_at_a_new_position_is_refused(tmp_path: Path) -> None:
    build(tmp_path, [3, 1])
    oldest = segments(tmp_path)[0]
    data = bytearray(oldest.read_bytes())
    size = RECORD_HEAD + 40 + OVERHEAD
    old = data[HEADER : HEADER + size]
    # Record 1 copied over record 3, its seq field relabelled to 3.
    data[HEADER + 2 * size : HEADER + 3 * size] = old[:4] + (3).to_bytes(8, "big") + old[12:]
    oldest.write_bytes(bytes(data))
    got, err = replay_until_error(tmp_path)
    assert isinstance(err, IntegrityError) and "seq 3" in str(err)
    assert [s for s, _ in got] == [1, 2]


def test_other_vault_is_refused(tmp_path: Path) -> None:
    build(tmp_path / "a", [2])
    with pytest.raises(IntegrityError, match="belongs to vault"):
        open_log(tmp_path / "a", vault_id=bytes(16))


def test_segment_relabelled_for_another_vault_is_refused(tmp_path: Path) -> None:
    # Same key, other vault id: the AAD still tells them apart.
    other = bytes(16)
    with open_log(tmp_path / "other", vault_id=other) as log:
        log.append([b"theirs", b"theirs too"])
    build(tmp_path / "mine", [1])
    (theirs,) = segments(tmp_path / "other")
    data = theirs.read_bytes()
    # Header and seq fields rewritten to fit seqs 2 and 3 of this vault.
    relabelled = bytearray(data[:6] + VAULT + (2).to_bytes(8, "big") + data[30:])
    relabelled[34:42] = (2).to_bytes(8, "big")
    relabelled[80:88] = (3).to_bytes(8, "big")
    (tmp_path / "mine" / f"{2:020d}.log").write_bytes(relabelled)
    got, err = replay_until_error(tmp_path / "mine")
    assert isinstance(err, IntegrityError)
    assert [s for s, _ in got] == [1]


def test_wrong_key_is_refused(tmp_path: Path) -> None:
    build(tmp_path, [2])
    with pytest.raises(IntegrityError, match="failed to authenticate"):
        list(open_log(tmp_path, key=bytes(32)).replay())


# -- kill -9 -------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import hashlib, random, sys
    from pathlib import Path
    from memvaultd import oplog
    oplog.SEGMENT_LIMIT = 20_000  # many segment boundaries to die at

    def record(seq):
        size = 1 + seq * 7919 % 3000
        return (hashlib.sha256(str(seq).encode()).digest() * 94)[:size]

    log = oplog.OperationLog(Path(sys.argv[1]), bytes(range(32)), bytes(16))
    rng = random.Random()
    while True:
        first = log.last_seq + 1
        batch = [record(first + i) for i in range(rng.randint(1, 4))]
        print(log.append(batch), flush=True)
    """
)


def expected_crash_record(seq: int) -> bytes:
    import hashlib

    size = 1 + seq * 7919 % 3000
    return (hashlib.sha256(str(seq).encode()).digest() * 94)[:size]


def test_every_acknowledged_record_survives_kill_9(tmp_path: Path) -> None:
    path = os.pathsep.join(str(REPO / p) for p in ("base", "client", "daemon"))
    env = {**os.environ, "PYTHONPATH": path}
    rng = random.Random(0x5EED)
    acknowledged = 0
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, env=env
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # alive and appending
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        printed = [int(line) for line in (first + rest).split()]
        if printed:
            acknowledged = max(acknowledged, printed[-1])
        replayed = dict(open_log(tmp_path, vault_id=bytes(16)).replay())
        assert list(replayed) == list(range(1, len(replayed) + 1))
        assert len(replayed) >= acknowledged
        assert all(replayed[s] == expected_crash_record(s) for s in replayed)
    assert acknowledged > 0 and len(segments(tmp_path)) > 5


def test_copy_of_log_directory_is_only_ciphertext(tmp_path: Path) -> None:
    build(tmp_path / "log", [2], size=40)
    for path in segments(tmp_path / "log"):
        assert b"op 1:" not in path.read_bytes()
    shutil.rmtree(tmp_path / "log")


@pytest.mark.parametrize("which", [1, 3])
def test_grown_length_field_in_newest_segment_is_not_cut(tmp_path: Path, which: int) -> None:
    # Record 1's length grown past the end (records 2-3 follow), or the last
    # record's length grown although it is whole: damage, never a torn write.
    build(tmp_path, [1, 3])
    newest = segments(tmp_path)[-1]
    data = bytearray(newest.read_bytes())
    at = HEADER + (which - 1) * (RECORD_HEAD + 40 + OVERHEAD)
    data[at + 2] ^= 0x01  # + 256 bytes
    newest.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="damaged length field"):
        open_log(tmp_path)
    assert newest.read_bytes() == bytes(data)
