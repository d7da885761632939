"""Predicates: a filter's conditions as closures over one memory.

The compiler builds one small closure per condition and joins them with
`all_of` and `any_of`, so that `matches` does no dispatch on operator names:
it runs on every over-fetched candidate of every query (the figures are in
`all_of`). Conditions inside `payload` are built in `filter_payload`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from memvaultd.model.memory import Memory
from memvaultd.recall.filter.language import COMPARE, ORDERING, STRING, TAGS, TIME

__all__ = ["Predicate", "all_of", "any_of", "core_predicate"]

Predicate = Callable[[Memory], bool]


def core_predicate(field: str, kind: str, op: str, x: Any) -> Predicate:
    """The predicate for one operator on one record field. `x` is validated.

    Each branch is a separate small closure so that `matches` costs one
    attribute read and one comparison per condition (see the figures in
    `all_of`)."""
    get: Callable[[Memory], Any] = attrgetter(field)
    if kind == TAGS:
        if op in ("eq", "contains"):
            return lambda m: x in m.tags
        if op == "ne":
            return lambda m: x not in m.tags
        if op == "in":
            return lambda m: not x.isdisjoint(m.tags)
        if op == "nin":
            return lambda m: x.isdisjoint(m.tags)
        return lambda m: bool(m.tags) is x
    if op == "eq":
        return lambda m: get(m) == x
    if op == "ne":
        return lambda m: get(m) != x
    if op == "contains":
        return lambda m: x in get(m)
    if op == "in":
        return lambda m: get(m) in x
    if op == "nin":
        return lambda m: get(m) not in x
    if op in ORDERING:
        compare = COMPARE[op]
        return lambda m: compare(get(m), x)
    return _exists_predicate(get, kind, x)


def _exists_predicate(get: Callable[[Memory], Any], kind: str, wanted: bool) -> Predicate:
    # A record field always has a value; "exists" asks whether it is set:
    # a non-empty string, a time other than 0 (0 means "never", e.g. no expiry).
    # importance and the counters are always set.
    if kind == STRING:
        return lambda m: (get(m) != "") is wanted
    if kind == TIME:
        return lambda m: (get(m) > 0) is wanted
    return lambda m: wanted


def all_of(parts: list[Predicate]) -> Predicate:
    # Measured with the example {"AND": [{"category": "development"},
    # {"tags": {"contains": "testing"}}]} on the 2-core development machine:
    # about 120 ns per matching memory, 90 ns when the first condition fails,
    # so 8000 candidates cost about 1 ms. A payload condition costs 200-500 ns
    # (path walk and JSON kind check). tests/test_filters.py::test_match_cost
    # prints the current figure.
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        first, second = parts
        return lambda m: first(m) and second(m)
    chain = tuple(parts)

    def all_hold(m: Memory) -> bool:
        # A plain loop: all() over a generator costs ~190 ns more for 4 parts.
        for part in chain:  # noqa: SIM110
            if not part(m):
                return False
        return True

    return all_hold


def any_of(parts: list[Predicate]) -> Predicate:
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        first, second = parts
        return lambda m: first(m) or second(m)
    chain = tuple(parts)

    def any_holds(m: Memory) -> bool:
        for part in chain:  # noqa: SIM110 (as in all_hold)
            if part(m):
                return True
        return False

    return any_holds
