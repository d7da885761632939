"""Reading a damaged operation log without changing it: every record that
still authenticates, and exactly which are lost and where.

`OperationLog` refuses a log at its first damaged record and cuts a torn
tail when it opens: right for the daemon, which must never start from a log
with a hole in it. `memvault check` needs the other reading, which changes
no byte: go on past the damage, keep what authenticates, and say which seqs
do not.

Past a record that does not open, the scan looks for the next one that
does: a record header (``length:u32 | seq:u64``, `oplog.py`) whose seq is
at or after the one expected, no further on than the rest of the segment
could hold (a record is at least 40 bytes), and whose sealed part opens
under that seq. A seq's top five bytes are the same for 2**24 records, so
one `bytes.find` of them finds the next candidate at C speed; a candidate
in ciphertext (a 2**-40 chance per byte) costs one failed AES-GCM open. A
record whose length field alone was altered is found whole between its
header and the next record, and kept; so is one whose seq field alone was.

The newest segment's end follows the daemon's rule (`OperationLog`): an
incomplete record or a run of zeros there, after a record that opens and
with no later record or seq behind it, is a write a crash tore, never
acknowledged; the next start cuts it. Anything else is damage.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import OVERHEAD, open_sealed
from memvaultd.storage.oplog import (
    MAGIC,
    MAX_RECORD_SIZE,
    RECORD_HEADER,
    SEGMENT_HEADER,
    VERSION,
    record_aad,
    segment_paths,
)

__all__ = ["LogScan", "SegmentScan", "scan_log"]

_MIN_RECORD = RECORD_HEADER.size + OVERHEAD  # an empty plaintext: 40 bytes
_NONZERO = re.compile(rb"[^\x00]")

Take = Callable[[int, bytes], None]  # (seq, plaintext) of each record that authenticates


@dataclass
class SegmentScan:
    path: Path
    first_seq: int  # the seq its records start at (the name's, unless the records say otherwise)
    size: int
    header: str = ""  # what is wrong with the segment header; "" when sound
    runs: list[tuple[int, int]] = field(default_factory=list)  # seqs that authenticate
    damage: list[str] = field(default_factory=list)  # what is wrong, and where
    lost: list[tuple[int, int | None]] = field(default_factory=list)  # None: to its end
    torn_tail: int = 0  # bytes a crash left at the end of the newest segment

    @property
    def sound(self) -> bool:
        return not self.header and not self.damage

    @property
    def records(self) -> int:
        return sum(last - first + 1 for first, last in self.runs)

    def _kept(self, seq: int) -> None:
        if self.runs and self.runs[-1][1] == seq - 1:
            self.runs[-1] = (self.runs[-1][0], seq)
        else:
            self.runs.append((seq, seq))


@dataclass
class LogScan:
    segments: list[SegmentScan]

    @property
    def last_seq(self) -> int:
        """The newest seq that authenticates; 0 when none does."""
        return max((s.runs[-1][1] for s in self.segments if s.runs), default=0)

    def first_seq(self) -> int:
        """The oldest seq that authenticates; 0 when none does."""
        return min((s.runs[0][0] for s in self.segments if s.runs), default=0)

    def missing(self, after: int) -> list[tuple[int, int | None]]:
        """The seqs after `after` that no record authenticates for, up to
        the newest that does; a range ends in None when a damaged end hides
        how many more there were."""
        runs = sorted(run for s in self.segments for run in s.runs)
        gaps: list[tuple[int, int | None]] = []
        expected = after + 1
        for first, last in runs:
            if first > expected:
                gaps.append((expected, first - 1))
            expected = max(expected, last + 1)
        if any(last is None and first >= expected for s in self.segments
               for first, last in s.lost):
            gaps.append((expected, None))
        return gaps


def scan_log(directory: Path, key: bytes, vault_id: bytes, *, upto: int | None = None,
             take: Take | None = None) -> LogScan:
    """Every segment of the log in `directory`, read but never changed.

    `upto`: a last seq read while appends were held off (the log of a
    running daemon): no record after it is read. `take` is given each
    record that authenticates."""
    paths = segment_paths(directory) if directory.is_dir() else []
    scans = []
    for index, path in enumerate(paths):
        if upto is not None and int(path.name[:20]) > upto:
            break
        scans.append(_Reader(path.read_bytes(), key, vault_id).scan(
            path, newest=index == len(paths) - 1 and upto is None, upto=upto, take=take))
    return LogScan(scans)


class _Reader:
    def __init__(self, data: bytes, key: bytes, vault_id: bytes) -> None:
        self.data = data
        self.key = key
        self.vault_id = vault_id

    def scan(self, path: Path, *, newest: bool, upto: int | None, take: Take | None
             ) -> SegmentScan:
        data, named = self.data, int(path.name[:20])
        scan = SegmentScan(path, named, len(data))
        if len(data) < SEGMENT_HEADER.size:
            if newest:
                scan.torn_tail = len(data)  # its creation was cut short by a crash
            else:
                scan.damage.append(f"only {len(data)} bytes: the segment header is cut short")
                scan.lost.append((named, None))
            return scan
        scan.header = self._header_problem(named)
        pos = SEGMENT_HEADER.size
        expected = scan.first_seq = self._first_seq(named)
        while pos < len(data) and (upto is None or expected <= upto):
            pos, expected, go_on = self._step(scan, pos, expected, newest, take)
            if not go_on:
                break
        return scan

    def _step(self, scan: SegmentScan, pos: int, expected: int, newest: bool,
              take: Take | None) -> tuple[int, int, bool]:
        """One record at `pos`: (where the next starts, its seq, whether to go on)."""
        found = self._opens_at(pos, expected)
        if found is not None:
            plain, end = found
            if RECORD_HEADER.unpack_from(self.data, pos)[1] != expected:
                scan.damage.append(f"record seq {expected} at byte {pos}: its seq field is "
                                   "altered (the record itself authenticates and is kept)")
            self._keep(scan, expected, plain, take)
            return end, expected + 1, True
        following = self._resync(pos, expected)
        if following is None:
            if newest and self._torn(pos, expected):
                scan.torn_tail = len(self.data) - pos
            else:
                scan.damage.append(f"from record seq {expected} at byte {pos} to the end "
                                   f"({len(self.data) - pos} bytes) nothing authenticates")
                scan.lost.append((expected, None))
            return pos, expected, False
        at, seq = following
        whole = self._open(pos + RECORD_HEADER.size, at, expected) if seq == expected + 1 else None
        if whole is not None:
            scan.damage.append(f"record seq {expected} at byte {pos}: its length field is "
                               "altered (the record itself authenticates and is kept)")
            self._keep(scan, expected, whole, take)
        elif seq > expected:
            seqs = f"seq {expected}" if seq == expected + 1 else f"seqs {expected}-{seq - 1}"
            scan.damage.append(f"bytes {pos}-{at - 1} ({seqs}) do not authenticate")
            scan.lost.append((expected, seq - 1))
        else:
            scan.damage.append(f"bytes {pos}-{at - 1} are not a record (seq {seq} follows them)")
        return at, seq, True

    @staticmethod
    def _keep(scan: SegmentScan, seq: int, plain: bytes, take: Take | None) -> None:
        scan._kept(seq)
        if take is not None:
            take(seq, plain)

    def _header_problem(self, named: int) -> str:
        magic, version, vault_id, first = SEGMENT_HEADER.unpack_from(self.data)
        if magic != MAGIC:
            return "not a memvault log segment header (bad magic)"
        if version != VERSION:
            return f"format version {version}; this release reads {VERSION}"
        if vault_id != self.vault_id:
            return f"the header names vault {vault_id.hex()}"
        if first != named:
            return f"the header says first seq {first}, the file name {named}"
        return ""

    def _first_seq(self, named: int) -> int:
        """The seq the first record opens under: the name's, else the header's
        or the record's own (a renamed segment still gives up its records)."""
        header_first = SEGMENT_HEADER.unpack_from(self.data)[3]
        pos = SEGMENT_HEADER.size
        field_seq = (RECORD_HEADER.unpack_from(self.data, pos)[1]
                     if len(self.data) - pos >= RECORD_HEADER.size else named)
        for seq in (named, header_first, field_seq):
            if self._opens_at(pos, seq) is not None:
                return seq
        return named

    def _opens_at(self, pos: int, seq: int) -> tuple[bytes, int] | None:
        """(plaintext, end) of a whole record at `pos` that opens as `seq`,
        whatever its seq field says."""
        if len(self.data) - pos < RECORD_HEADER.size:
            return None
        length = RECORD_HEADER.unpack_from(self.data, pos)[0]
        start = pos + RECORD_HEADER.size
        if not OVERHEAD <= length <= MAX_RECORD_SIZE + OVERHEAD or start + length > len(self.data):
            return None
        plain = self._open(start, start + length, seq)
        return None if plain is None else (plain, start + length)

    def _open(self, start: int, stop: int, seq: int) -> bytes | None:
        if stop - start < OVERHEAD:
            return None
        try:
            return open_sealed(self.key, self.data[start:stop], aad=record_aad(self.vault_id, seq))
        except IntegrityError:
            return None

    def _resync(self, pos: int, expected: int) -> tuple[int, int] | None:
        """(position, seq) of the first record after `pos` that opens with a
        seq of at least `expected`; None when there is none."""
        data = self.data
        top = expected + (len(data) - pos) // _MIN_RECORD + 1
        prefixes = [(block << 24).to_bytes(8, "big")[:5]
                    for block in range(expected >> 24, (top >> 24) + 1)]
        start = pos + 1 + 4  # the seq field of a record starting after `pos`
        while True:
            hits = [hit for prefix in prefixes if (hit := data.find(prefix, start)) >= 0]
            if not hits:
                return None
            hit = min(hits)
            if hit + 8 > len(data):
                return None
            seq = int.from_bytes(data[hit : hit + 8], "big")
            if expected <= seq <= top and self._opens_at(hit - 4, seq) is not None:
                return hit - 4, seq
            start = hit + 1
            if seq == 0:
                # A run of zero bytes (a block the disk lost): the first seq
                # field in it can begin 7 bytes before its first non-zero byte.
                after = _NONZERO.search(data, hit)
                if after is None:
                    return None
                start = max(start, after.start() - 7)

    def _torn(self, pos: int, expected: int) -> bool:
        """Whether the end of the newest segment from `pos` is a torn write,
        as `OperationLog` decides when it opens (and then cuts it)."""
        data = self.data
        if len(data) - pos < RECORD_HEADER.size or data.count(0, pos) == len(data) - pos:
            return True
        length, seq = RECORD_HEADER.unpack_from(data, pos)
        if (not OVERHEAD <= length <= MAX_RECORD_SIZE + OVERHEAD or seq != expected
                or len(data) - pos >= RECORD_HEADER.size + length):
            return False
        # A grown length field hides a whole record, or the next one.
        rest = pos + RECORD_HEADER.size
        return (self._open(rest, len(data), expected) is None
                and (expected + 1).to_bytes(8, "big") not in data[rest:])
