"""Per-row copies of the memory fields recall filters and ranks by.

`MemoryIndex` keeps one row per vector. `Columns` holds, under the same row
numbers, what the recall engine reads of every candidate: the fields that
decide whether a request may see it (expiry, supersession, tier, type) and
the ones the composite score uses (times, reinforcement, importance). As
NumPy arrays, visibility and the score of a recall's ~50 candidates are a
few array operations. Read from `Memory` objects one at a time they were
~20 us of Python per candidate, ~1 ms of a 1.3 ms recall at 100k, all of it
holding the interpreter lock that eight clients then queued on
(docs/benchmarks.md, "Recall over columns").

The index writes a row's columns wherever it writes the row's record (put,
update, restore) and carries them through growth and compaction, so a view
reads columns and records of the same vault state. ~50 bytes a row: 5 MB at
100k memories.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from memvaultd.model.memory import TIERS, TYPES, Memory
from memvaultd.model.records import Records

# A tier or type outside the known ones (a record from a newer version) gets
# the code after them: no request names it, and it decays as the default type.
TIER_CODES: Final = {tier: code for code, tier in enumerate(TIERS)}
TYPE_CODES: Final = {kind: code for code, kind in enumerate(TYPES)}
OTHER_TIER: Final = len(TIERS)
OTHER_TYPE: Final = len(TYPES)


# Scopes as small integers, handed out as each first appears in a record
# and never reused: this process's own table, never written anywhere. A
# vault holds a few dozen scopes, so a recall declaring some matches the
# codes of its rows in one `np.isin` (`recall/visibility.py`).
SCOPE_CODES: Final[dict[str, int]] = {}
_next_scope_code = itertools.count()


def _scope(memory: Memory) -> int:
    return _scope_code(memory.scope)


def _scope_code(scope: str) -> int:
    code = SCOPE_CODES.get(scope)
    if code is None:  # `count` is atomic: two threads never share a code
        code = SCOPE_CODES.setdefault(scope, next(_next_scope_code))
    return code


def _since(memory: Memory) -> float:
    return memory.last_reinforced_at or memory.created_at


def _tier(memory: Memory) -> int:
    return TIER_CODES.get(memory.tier, OTHER_TIER)


def _type(memory: Memory) -> int:
    return TYPE_CODES.get(memory.type, OTHER_TYPE)


def _flag(name: str) -> Callable[[Memory], bool]:
    value = attrgetter(name)
    return lambda memory: bool(value(memory))


# name, dtype, what of a Memory. Built with one `np.fromiter` a column at
# load: 0.6 s for 1M memories, against 2.3 s for rows of tuples.
_FIELDS: Final[tuple[tuple[str, type, Callable[[Memory], Any]], ...]] = (
    ("expires_at", np.float64, attrgetter("expires_at")),
    ("since", np.float64, _since),  # last_reinforced_at, or created_at if never reinforced
    ("created_at", np.float64, attrgetter("created_at")),
    ("reinforce_count", np.int64, attrgetter("reinforce_count")),
    ("importance", np.float64, attrgetter("importance")),
    ("superseded", np.bool_, _flag("superseded_by")),
    ("tier", np.int8, _tier),
    ("type", np.int8, _type),
    ("has_entity", np.bool_, _flag("entity")),
    ("has_session", np.bool_, _flag("session_id")),
    ("scope", np.int32, _scope),
)


def _since_of(records: Records) -> npt.NDArray[np.float64]:
    reinforced = records.numbers("last_reinforced_at")
    return np.where(reinforced != 0, reinforced, records.numbers("created_at"))


def _mapped(field: str, how: Callable[[Any], Any], dtype: type
            ) -> Callable[[Records], npt.NDArray[Any]]:
    return lambda records: records.mapped(field, how, dtype)


# `_FIELDS` read from the columns of `Records` (`model/records.py`): a
# coded field's value is worked out once a distinct value.
_FROM_RECORDS: Final[dict[str, Callable[[Records], npt.NDArray[Any]]]] = {
    "expires_at": lambda records: records.numbers("expires_at"),
    "since": _since_of,
    "created_at": lambda records: records.numbers("created_at"),
    "reinforce_count": lambda records: records.numbers("reinforce_count"),
    "importance": lambda records: records.numbers("importance"),
    "superseded": _mapped("superseded_by", bool, np.bool_),
    "tier": _mapped("tier", lambda tier: TIER_CODES.get(tier, OTHER_TIER), np.int8),
    "type": _mapped("type", lambda kind: TYPE_CODES.get(kind, OTHER_TYPE), np.int8),
    "has_entity": _mapped("entity", bool, np.bool_),
    "has_session": _mapped("session_id", bool, np.bool_),
    "scope": _mapped("scope", lambda scope: _scope_code(scope), np.int32),
}


class Columns:
    __slots__ = tuple(name for name, _, _ in _FIELDS)

    expires_at: npt.NDArray[np.float64]
    since: npt.NDArray[np.float64]
    created_at: npt.NDArray[np.float64]
    reinforce_count: npt.NDArray[np.int64]
    importance: npt.NDArray[np.float64]
    superseded: npt.NDArray[np.bool_]
    tier: npt.NDArray[np.int8]
    type: npt.NDArray[np.int8]
    has_entity: npt.NDArray[np.bool_]
    has_session: npt.NDArray[np.bool_]
    scope: npt.NDArray[np.int32]

    def __init__(self, capacity: int) -> None:
        for name, dtype, _ in _FIELDS:
            setattr(self, name, np.zeros(capacity, dtype=dtype))

    @classmethod
    def of(cls, memories: Sequence[Memory], capacity: int) -> Columns:
        """Rows 0..len-1 for `memories` in order, in one pass per field."""
        columns = cls(capacity)
        if isinstance(memories, Records):
            for name, _, _ in _FIELDS:
                getattr(columns, name)[: len(memories)] = _FROM_RECORDS[name](memories)
            return columns
        for name, dtype, value in _FIELDS:
            getattr(columns, name)[: len(memories)] = np.fromiter(
                map(value, memories), dtype=dtype, count=len(memories))
        return columns

    def set(self, row: int, memory: Memory) -> None:
        for name, _, value in _FIELDS:
            getattr(self, name)[row] = value(memory)

    def resized(self, capacity: int) -> Columns:
        """A copy with room for `capacity` rows (growth keeps every row)."""
        bigger = Columns(capacity)
        for name, _, _ in _FIELDS:
            old = getattr(self, name)
            getattr(bigger, name)[: len(old)] = old
        return bigger

    def taken(self, rows: npt.NDArray[np.intp], capacity: int) -> Columns:
        """Rows `rows` as rows 0..len-1 (compaction)."""
        kept = Columns(capacity)
        for name, _, _ in _FIELDS:
            getattr(kept, name)[: len(rows)] = getattr(self, name)[rows]
        return kept
