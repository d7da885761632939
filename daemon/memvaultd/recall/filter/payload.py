"""Payload conditions: `payload.<path>` names a value inside a memory's payload.

Payload values are JSON, so comparisons follow JSON kinds, not Python's:
true is not 1, 1 is 1.0, "1" is not 1. A condition on a list value holds when
it holds for any element (MongoDB's rule), except `contains`, which on a list
asks for an element and on a string for a substring. `ne` and `nin` are the
negations of `eq` and `in`, so they hold for a missing field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from memvault_base.errors import InvalidArgument
from memvaultd.model.memory import Memory
from memvaultd.recall.filter.language import COMPARE
from memvaultd.recall.filter.operands import check_bool, check_number, describe
from memvaultd.recall.filter.predicates import Predicate

__all__ = ["ValueTest", "payload_predicate"]

_MISSING: Final[Any] = object()
_KIND_OF_TYPE: Final[dict[type, str]] = {
    bool: "bool", int: "number", float: "number", str: "string", type(None): "null",
}  # fmt: skip
ValueTest = Callable[[Any], bool]


def _json_kind(value: Any) -> str | None:
    return _KIND_OF_TYPE.get(type(value))


def _payload_scalar(operand: Any, path: str) -> tuple[str, Any]:
    kind = _json_kind(operand)
    if kind is None:
        raise InvalidArgument(
            f"{path}: expects a string, number, true, false or null; got {describe(operand)}"
        )
    if kind == "number":
        check_number(operand, path)
    return kind, operand


def payload_predicate(parts: list[str], op: str, operand: Any, path: str) -> Predicate:
    get = _payload_getter(parts)
    if op == "exists":
        wanted = check_bool(operand, path)
        return lambda m: (get(m) is not _MISSING) is wanted
    if op == "contains":
        return _payload_contains(get, _payload_scalar(operand, path))
    test = _payload_test(op, operand, path)
    if op in ("ne", "nin"):
        return lambda m: not _any_element(test, get(m))
    return lambda m: _any_element(test, get(m))


def _payload_getter(parts: list[str]) -> Callable[[Memory], Any]:
    if len(parts) == 1:
        key = parts[0]
        return lambda m: m.payload.get(key, _MISSING)
    # A list is stepped into by a decimal index, e.g. payload.steps.0.name.
    steps = tuple((p, int(p) if p.isascii() and p.isdigit() else -1) for p in parts)

    def get(m: Memory) -> Any:
        value: Any = m.payload
        for key, index in steps:
            if isinstance(value, dict):
                value = value.get(key, _MISSING)
            elif isinstance(value, list) and 0 <= index < len(value):
                value = value[index]
            else:
                return _MISSING
        return value

    return get


def _payload_test(op: str, operand: Any, path: str) -> ValueTest:
    if op in ("in", "nin"):
        pairs = frozenset(_payload_scalar(x, f"{path}[{i}]") for i, x in enumerate(operand))
        return lambda v: (kind := _json_kind(v)) is not None and (kind, v) in pairs
    kind, x = _payload_scalar(operand, path)
    if op in ("eq", "ne"):
        return lambda v: _json_kind(v) == kind and v == x
    if kind not in ("number", "string"):
        raise InvalidArgument(f"{path}: {op} compares numbers or strings, got {describe(x)}")
    compare = COMPARE[op]
    return lambda v: _json_kind(v) == kind and compare(v, x)


def _payload_contains(get: Callable[[Memory], Any], operand: tuple[str, Any]) -> Predicate:
    kind, x = operand

    def contains(m: Memory) -> bool:
        value = get(m)
        if isinstance(value, list):
            return any(_json_kind(e) == kind and e == x for e in value)
        return kind == "string" and isinstance(value, str) and x in value

    return contains


def _any_element(test: ValueTest, value: Any) -> bool:
    if isinstance(value, list):
        return any(test(element) for element in value)
    return test(value)
