"""Reading a damaged log without changing it (`storage/log_scan.py`): every
record that still authenticates is found, the lost ones are named exactly,
and the scan's verdict on the newest segment's end is the daemon's."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from memvault_base.errors import IntegrityError
from memvaultd.storage.log_scan import LogScan, scan_log
from memvaultd.storage.oplog import OperationLog

from .test_oplog import HEADER, KEY, RECORD_HEAD, VAULT, build, open_log, segments


def scan(directory: Path) -> tuple[LogScan, dict[int, bytes]]:
    taken: dict[int, bytes] = {}
    found = scan_log(directory, KEY, VAULT, take=taken.__setitem__)
    return found, taken


def spans(segment: Path) -> list[tuple[int, int, int]]:
    """(seq, start, end) of each whole record of a segment file."""
    blob = segment.read_bytes()
    out, pos = [], HEADER
    while pos + RECORD_HEAD <= len(blob):
        length, seq = struct.unpack(">IQ", blob[pos : pos + RECORD_HEAD])
        if pos + RECORD_HEAD + length > len(blob):
            break
        out.append((seq, pos, pos + RECORD_HEAD + length))
        pos += RECORD_HEAD + length
    return out


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_sound_log_gives_every_record_and_changes_nothing(tmp_path: Path) -> None:
    written = build(tmp_path, [5, 7, 3])
    before = listing(tmp_path)
    found, taken = scan(tmp_path)
    assert taken == written
    assert all(s.sound for s in found.segments) and found.missing(after=0) == []
    assert found.last_seq == 15 and found.first_seq() == 1
    assert listing(tmp_path) == before


def test_every_flipped_byte_of_a_middle_record_loses_that_record_at_most(
        tmp_path: Path) -> None:
    """And wherever the daemon refuses the log, the scan calls it damaged."""
    pristine = tmp_path / "pristine"
    written = build(pristine, [6, 4], size=90)
    first = segments(pristine)[0]
    seq, start, end = spans(first)[2]
    work = tmp_path / "work"
    recovered = 0
    for offset in range(start, end):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        target = work / first.name
        blob = bytearray(target.read_bytes())
        blob[offset] ^= 0x01
        target.write_bytes(bytes(blob))
        found, taken = scan(work)
        lost = {s for s in written if s not in taken}
        assert lost <= {seq}, f"byte {offset}: lost {sorted(lost)}"
        assert all(taken[s] == written[s] for s in taken), f"byte {offset}: altered"
        assert not found.segments[0].sound, f"byte {offset} passed unnoticed"
        assert found.missing(after=0) == ([(seq, seq)] if lost else [])
        recovered += not lost
        with pytest.raises(IntegrityError):
            list(open_log(work).replay())
    # A length or seq field alone altered: the record itself is found and kept.
    assert recovered == 4 + 8


def test_a_zeroed_block_loses_only_the_records_under_it(tmp_path: Path) -> None:
    written = build(tmp_path, [40], size=100)
    segment = segments(tmp_path)[0]
    blob = bytearray(segment.read_bytes())
    blob[1000:2500] = bytes(1500)  # a lost disk block, mid-segment
    segment.write_bytes(bytes(blob))
    found, taken = scan(tmp_path)
    lost = sorted(set(written) - set(taken))
    assert lost and lost == list(range(lost[0], lost[-1] + 1))
    assert all(taken[s] == written[s] for s in taken) and max(taken) == 40
    assert found.missing(after=0) == [(lost[0], lost[-1])]


def test_a_missing_middle_segment_is_a_gap(tmp_path: Path) -> None:
    build(tmp_path, [3, 4, 2])
    segments(tmp_path)[1].unlink()
    found, _ = scan(tmp_path)
    assert all(s.sound for s in found.segments)
    assert found.missing(after=0) == [(4, 7)] and found.missing(after=7) == []


def test_a_damaged_end_of_the_newest_segment_is_open_ended(tmp_path: Path) -> None:
    written = build(tmp_path, [5])
    segment = segments(tmp_path)[0]
    start = spans(segment)[2][1]
    blob = bytearray(segment.read_bytes())
    for offset in range(start + RECORD_HEAD + 2, len(blob), 7):
        blob[offset] ^= 0xFF  # record 3 and everything after it altered
    segment.write_bytes(bytes(blob))
    found, taken = scan(tmp_path)
    assert set(taken) == {1, 2} and all(taken[s] == written[s] for s in taken)
    assert found.missing(after=0) == [(3, None)]  # how many were there: nobody can tell


def test_a_renamed_segment_still_gives_up_its_records(tmp_path: Path) -> None:
    written = build(tmp_path, [3, 3])
    second = segments(tmp_path)[1]
    second.rename(tmp_path / f"{40:020d}.log")
    found, taken = scan(tmp_path)
    assert taken == written
    assert "first seq 4" in found.segments[1].header and not found.segments[1].sound


def _torn_or_refused(directory: Path) -> str:
    """What a start makes of the log: open it (cutting a torn tail), replay it."""
    try:
        with OperationLog(directory, KEY, VAULT) as log:
            list(log.replay())
            return "cut"
    except IntegrityError:
        return "refused"


def test_the_newest_segments_end_is_judged_as_the_daemon_judges_it(tmp_path: Path) -> None:
    """Truncations and flips of the last record: a torn tail the daemon would
    cut is a torn tail to the scan; one it would refuse is damage."""
    pristine = tmp_path / "pristine"
    build(pristine, [4], size=60)
    segment = segments(pristine)[0]
    _, start, end = spans(segment)[-1]
    cases: list[tuple[str, bytes]] = []
    blob = segment.read_bytes()
    for cut in range(start + 1, end):
        cases.append((f"cut at {cut}", blob[:cut]))
    for offset in [*range(start, start + RECORD_HEAD), end - 1]:
        flipped = bytearray(blob)
        flipped[offset] ^= 0x01
        cases.append((f"flip {offset}", bytes(flipped)))
    cases.append(("zero tail", blob + bytes(300)))
    work = tmp_path / "work"
    verdicts = {"cut": 0, "refused": 0}
    for name, content in cases:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        (work / segment.name).write_bytes(content)
        found, _ = scan(work)
        newest = found.segments[-1]
        daemon = _torn_or_refused(work)  # after the scan: the daemon cuts what it may
        verdicts[daemon] += 1
        if daemon == "cut":
            assert newest.sound and (newest.torn_tail > 0 or len(content) == len(blob)), name
        else:
            assert not newest.sound, name
    assert verdicts["cut"] > 0 and verdicts["refused"] > 0


def test_upto_reads_no_record_after_it(tmp_path: Path) -> None:
    written = build(tmp_path, [3, 3])
    taken: dict[int, bytes] = {}
    found = scan_log(tmp_path, KEY, VAULT, upto=4, take=taken.__setitem__)
    assert taken == {s: written[s] for s in range(1, 5)} and found.last_seq == 4
