"""The filter compiler: one walk that validates a parsed filter and builds its predicate.

Logical keys (`AND`, `OR`, `NOT`) recurse; any other key is a field, whose
operators are checked against its kind (`language.py`), whose operands are
checked and converted (`filter_operands`), and which becomes a closure
(`filter_predicates`, `filter_payload`). Errors name the path of the part,
e.g. `filter.AND[1].tags`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memvault_base.errors import InvalidArgument
from memvaultd.recall.filter.language import (
    MAX_DEPTH,
    MAX_NODES,
    OPS_OF_KIND,
    PAYLOAD,
    check_op,
    field_kind,
)
from memvaultd.recall.filter.operands import core_operand, describe
from memvaultd.recall.filter.payload import payload_predicate
from memvaultd.recall.filter.predicates import Predicate, all_of, any_of, core_predicate

__all__ = ["FilterCompiler"]


class FilterCompiler:
    """One parse: walks the tree once, counting nodes and bounding depth
    before each recursion, and returns the predicate of each part."""

    def __init__(self) -> None:
        self.nodes = 0
        self.fields: set[str] = set()

    def count(self, path: str, n: int = 1) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise InvalidArgument(f"{path}: the filter has more than {MAX_NODES} nodes")

    def filter(self, obj: Any, path: str, depth: int) -> Predicate:
        if depth > MAX_DEPTH:
            raise InvalidArgument(f"{path}: nested too deeply; the limit is {MAX_DEPTH} levels")
        if not isinstance(obj, Mapping):
            raise InvalidArgument(
                f'{path}: expected a filter object such as {{"tags": "x"}}, got {describe(obj)}'
            )
        if not obj:
            raise InvalidArgument(f"{path}: an empty object is not a condition here")
        self.count(path)
        parts = [self.key(key, value, path, depth) for key, value in obj.items()]
        return all_of(parts)

    def key(self, key: Any, value: Any, path: str, depth: int) -> Predicate:
        if not isinstance(key, str):
            raise InvalidArgument(f"{path}: keys must be strings, got {describe(key)}")
        here = f"{path}.{key}"
        if key in ("AND", "OR"):
            return self.logical(key, value, here, depth)
        if key == "NOT":
            if isinstance(value, list):
                raise InvalidArgument(
                    f"{here}: NOT takes one filter object, not a list; "
                    'to negate several, write {"NOT": {"OR": [...]}}'
                )
            inner = self.filter(value, here, depth + 1)
            return lambda m: not inner(m)
        return self.condition(key, value, here)

    def logical(self, name: str, value: Any, path: str, depth: int) -> Predicate:
        if not isinstance(value, list):
            raise InvalidArgument(
                f"{path}: {name} takes a list of filter objects, got {describe(value)}"
            )
        if not value:
            raise InvalidArgument(f"{path}: {name} needs at least one filter object")
        children = [self.filter(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        return all_of(children) if name == "AND" else any_of(children)

    def condition(self, field: str, value: Any, path: str) -> Predicate:
        kind = field_kind(field, path)
        self.fields.add(field)
        if not isinstance(value, Mapping):
            self.count(path)
            return self.operator(field, kind, "eq", value, path)
        if not value:
            raise InvalidArgument(
                f'{path}: empty operator object; write {{"{field}": value}} for equality '
                f"or use one of {', '.join(OPS_OF_KIND[kind])}"
            )
        parts = []
        for op, operand in value.items():
            self.count(path)
            checked = check_op(op, kind, field, path)
            parts.append(self.operator(field, kind, checked, operand, f"{path}.{op}"))
        return all_of(parts)

    def operator(self, field: str, kind: str, op: str, operand: Any, path: str) -> Predicate:
        if op in ("in", "nin"):
            if not isinstance(operand, list):
                raise InvalidArgument(
                    f"{path}: {op} takes a list of values, got {describe(operand)}"
                )
            self.count(path, len(operand))
        if kind == PAYLOAD:
            return payload_predicate(field.split(".")[1:], op, operand, path)
        return core_predicate(field, kind, op, core_operand(field, kind, op, operand, path))
