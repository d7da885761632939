"""The set of operation ids a vault has applied, held in 16 bytes an id.

`VaultState.seen` holds the id of every operation ever applied, so that a
replay or a retry is a no-op: one per memory put, and more. As a `set` of
32-character strings each id was ~125 bytes (an 81-byte string and its
slot): ~125 MB at 1M memories, and a million strings to make at each start.
An id the daemon makes (`crypto/entropy.new_id`) is 16 random bytes in
lowercase hex; `OpIds` keeps those as two sorted `uint64` arrays (their
high and low halves) and answers membership by binary search. Ids added
since the arrays were last rebuilt wait in a small set, folded in once it
holds an eighth as many. Any other id (a test's "op-1", an id in capitals)
is kept as the string it is, so that every id reads back as it was added.

Iteration gives the ids in sorted order: 16-byte values sort as their
lowercase hex does.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Set

import numpy as np
import numpy.typing as npt

_HEX = 32
# Fold the recent ids into the arrays past this many, or an eighth of the
# arrays: each fold sorts them all (~0.1 s at 1M), so an add pays a share.
_FOLD_MIN = 4096
_FOLD_SHARE = 8
_NIBBLES = np.full(256, 255, dtype=np.uint8)
_NIBBLES[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10)
_NIBBLES[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16)
_Halves = npt.NDArray[np.uint64]


def _canonical(op_id: str) -> bool:
    """Whether `op_id` is 32 lowercase hex digits: kept as 16 bytes."""
    return len(op_id) == _HEX and op_id.isascii() and all(
        c in "0123456789abcdef" for c in op_id)


def _spelt(text: npt.NDArray[np.uint8]) -> tuple[_Halves, _Halves, npt.NDArray[np.bool_]]:
    """Rows of 32 ASCII characters (an (n, 32) array) as the high and low
    64 bits of the 16 bytes their hex spells, and which rows are hex."""
    nibbles = _NIBBLES[text]
    ok = (nibbles != 255).all(axis=1)
    raw = ((nibbles[:, 0::2] << 4) | nibbles[:, 1::2]).astype(np.uint8)
    both = raw.view(">u8").astype(np.uint64)  # big-endian: integer order is byte order
    return both[:, 0].copy(), both[:, 1].copy(), ok


class OpIds(Set[str]):
    """Writers hold the vault's lock, as they did for a `set`; a reader may
    ask at any time: a fold swaps in the new arrays, as one tuple, before it
    lets go of the recent ids they now hold."""

    __slots__ = ("_halves", "_other", "_recent")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._halves: tuple[_Halves, _Halves] = (np.zeros(0, dtype=np.uint64),
                                                 np.zeros(0, dtype=np.uint64))
        self._recent: set[str] = set()
        self._other: set[str] = set()
        if isinstance(ids, OpIds):
            self._halves = ids._halves  # never written in place
            self._recent, self._other = set(ids._recent), set(ids._other)
            return
        for op_id in ids:
            (self._recent if _canonical(op_id) else self._other).add(op_id)
        self._fold()

    @classmethod
    def of_text(cls, text: npt.NDArray[np.uint8], others: Iterable[str] = ()) -> OpIds:
        """The ids spelt by the rows of `text` (an (n, 32) array of ASCII
        characters, each row an id) and `others`, without a string each."""
        high, low, ok = _spelt(text)
        new = cls(others)
        new._other.update(bytes(row).decode("utf-8") for row in text[~ok])
        new._add_halves(high[ok], low[ok])
        return new

    def __contains__(self, op_id: object) -> bool:
        if not isinstance(op_id, str):
            return False
        if op_id in self._recent or op_id in self._other:
            return True
        highs, lows = self._halves
        if not len(highs) or not _canonical(op_id):
            return False
        raw = bytes.fromhex(op_id)
        high, low = int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:], "big")
        at = int(np.searchsorted(highs, np.uint64(high)))
        # Equal high halves (one in ~2^64 pairs of random ids) are ordered by the low.
        while at < len(highs) and int(highs[at]) == high:
            if int(lows[at]) == low:
                return True
            at += 1
        return False

    def __len__(self) -> int:
        return len(self._halves[0]) + len(self._recent) + len(self._other)

    def __iter__(self) -> Iterator[str]:
        """Every id, in sorted order."""
        return heapq.merge(self._folded(), sorted(self._recent), sorted(self._other))

    def _folded(self) -> Iterator[str]:
        step = 65_536  # strings made a slice at a time, not all at once
        highs, lows = self._halves
        for start in range(0, len(highs), step):
            both = np.stack([highs[start : start + step], lows[start : start + step]],
                            axis=1).astype(">u8")
            raw = both.tobytes()
            for at in range(0, len(raw), 16):
                yield raw[at : at + 16].hex()

    def add(self, op_id: str) -> None:
        if op_id in self:
            return
        if not _canonical(op_id):
            self._other.add(op_id)
            return
        self._recent.add(op_id)
        if len(self._recent) > max(_FOLD_MIN, len(self._halves[0]) // _FOLD_SHARE):
            self._fold()

    def __or__(self, other: object) -> OpIds:
        """These ids and `other`'s, without a string for each of these; with
        another `OpIds`, without a string for any id of either. A start
        lays a delta's ids over its snapshot's so: 99k ids over 930k took
        0.67 s an id at a time, as strings (`scripts/bench_recall.py`'s 1M
        vault)."""
        if not isinstance(other, Iterable):
            return NotImplemented
        union = self.copy()
        if isinstance(other, OpIds):
            union._fold()  # its recent ids into the arrays, which are then merged
            union._add_halves(*other._halves)
            union._other |= other._other
            other = other._recent
        for op_id in other:
            union.add(op_id)
        return union

    __ror__ = __or__

    def copy(self) -> OpIds:
        """An `OpIds` of the same ids; the arrays are shared, never written in place."""
        return OpIds(self)

    def _fold(self) -> None:
        if not self._recent:
            return
        text = np.frombuffer("".join(self._recent).encode("ascii"), dtype=np.uint8)
        high, low, _ = _spelt(text.reshape(-1, _HEX))
        self._add_halves(high, low)
        self._recent = set()

    def _add_halves(self, high: _Halves, low: _Halves) -> None:
        high = np.concatenate([self._halves[0], high])
        low = np.concatenate([self._halves[1], low])
        order = np.lexsort((low, high))
        high, low = high[order], low[order]
        if len(high) > 1:  # an id given twice is held once
            keep = np.concatenate([[True], (high[1:] != high[:-1]) | (low[1:] != low[:-1])])
            high, low = high[keep], low[keep]
        self._halves = (high, low)
