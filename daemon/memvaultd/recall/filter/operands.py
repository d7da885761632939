"""The operands of a filter: checked, converted, and named in error messages.

A time is seconds since the epoch or an ISO-8601 text (no zone means UTC);
a number is finite; a `type` or `tier` operand must name a real type or tier,
since a misspelt one would silently match nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from memvault_base.errors import InvalidArgument
from memvaultd.model.memory import TIERS, normalize_type
from memvaultd.recall.filter.language import NUMBER, TIME

__all__ = ["check_bool", "check_number", "check_time", "core_operand", "describe"]


def core_operand(field: str, kind: str, op: str, operand: Any, path: str) -> Any:
    if op == "exists":
        return check_bool(operand, path)
    if op in ("in", "nin"):
        items = [_core_scalar(field, kind, x, f"{path}[{i}]") for i, x in enumerate(operand)]
        return frozenset(items)
    return _core_scalar(field, kind, operand, path, exact=op != "contains")


def _core_scalar(field: str, kind: str, operand: Any, path: str, exact: bool = True) -> Any:
    if kind == NUMBER:
        return check_number(operand, path)
    if kind == TIME:
        return check_time(operand, path)
    if not isinstance(operand, str):
        raise InvalidArgument(f"{path}: {field} is a string field; got {describe(operand)}")
    if field == "type" and exact:
        if not operand:
            raise InvalidArgument(f"{path}: the memory type must not be empty")
        try:
            return normalize_type(operand)
        except InvalidArgument as err:  # its message starts "type: "
            raise InvalidArgument(f"{path}: {str(err).removeprefix('type: ')}") from None
    if field == "tier" and exact and operand not in TIERS:
        raise InvalidArgument(f"{path}: unknown tier {operand!r}; use one of {', '.join(TIERS)}")
    return operand


def describe(value: Any) -> str:
    """`value` as an error message names it: `the string "x"`, `a list`, ..."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return f"the string {text if len(text) <= 60 else text[:57] + '...'}"
    if isinstance(value, int | float):
        return f"the number {value!r}"[:80]
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def check_bool(operand: Any, path: str) -> bool:
    if not isinstance(operand, bool):
        raise InvalidArgument(f"{path}: expects true or false, got {describe(operand)}")
    return operand


def check_number(operand: Any, path: str) -> int | float:
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        raise InvalidArgument(f"{path}: expects a number, got {describe(operand)}")
    if isinstance(operand, float) and not math.isfinite(operand):
        raise InvalidArgument(f"{path}: {operand!r} is not a finite number")
    return operand


_TIME_HINT: Final = (
    'seconds since the epoch or an ISO-8601 time such as "2026-01-31" '
    'or "2026-01-31T10:00:00Z" (no zone means UTC)'
)


def check_time(operand: Any, path: str) -> float:
    """A time operand as seconds since the epoch."""
    if isinstance(operand, str):
        try:
            moment = datetime.fromisoformat(operand.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.timestamp()
        except (ValueError, OverflowError, OSError):
            raise InvalidArgument(
                f"{path}: {describe(operand)} is not a time; write {_TIME_HINT}"
            ) from None
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        raise InvalidArgument(f"{path}: expects {_TIME_HINT}; got {describe(operand)}")
    try:
        seconds = float(operand)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise InvalidArgument(f"{path}: {operand!r} is not a finite time")
    return seconds
