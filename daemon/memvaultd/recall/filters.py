"""Recall filters: a small JSON language over memory metadata, compiled once.

A filter is a JSON object. Its keys are field names or the logical operators
`AND`, `OR` and `NOT`; several keys in one object must all hold:

    {"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}
    {"OR": [{"type": "fact"}, {"importance": {"gte": 0.9}}]}
    {"NOT": {"payload.status": {"in": ["done", "dropped"]}}}
    {"created_at": {"gte": "2026-01-01", "lt": "2026-02-01"}}

`{"field": value}` is equality; `{"field": {"op": operand, ...}}` applies each
operator (eq ne contains in nin gt gte lt lte exists) and all must hold. The
full reference, with what each operator means on each kind of field, is
`docs/recall.md`.

`parse_filter` validates the whole tree and compiles it into nested closures,
so that `matches` does no parsing and no dispatch on operator names:
the recall engine runs it on every over-fetched candidate (8 x top_k, up to
8000) of every query. Every error is an `InvalidArgument` whose message starts
with the path of the offending part, e.g. `filter.AND[1].tags: ...`, because
people type filters on a command line and need to see where they went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Protocol

from memvault.errors import InvalidArgument
from memvaultd.memory import Memory

from .filter_json import load_filter_json
from .filter_language import (
    FIELDS,
    MAX_DEPTH,
    MAX_NODES,
    OPERATORS,
    OPS_OF_KIND,
    PAYLOAD,
    check_op,
    field_kind,
)
from .filter_language import LOGICAL as LOGICAL
from .filter_language import MAX_TEXT_BYTES as MAX_TEXT_BYTES
from .filter_language import NUMBER as NUMBER
from .filter_language import STRING as STRING
from .filter_language import TAGS as TAGS
from .filter_language import TIME as TIME
from .filter_operands import core_operand, describe
from .filter_payload import ValueTest as ValueTest
from .filter_payload import payload_predicate
from .filter_predicates import Predicate, all_of, any_of, core_predicate

__all__ = ["FIELDS", "MATCH_ALL", "OPERATORS", "CompiledFilter", "Filter", "parse_filter"]


class Filter(Protocol):
    """Anything that can tell whether a memory passes."""

    def matches(self, memory: Memory, /) -> bool: ...


class CompiledFilter:
    """A parsed filter. `matches` is the compiled predicate itself (an attribute,
    not a method, to save a call per memory); `fields` names every field the
    filter reads (the engine uses it, e.g., to show superseded memories when a
    filter asks about `superseded_by`); `spec` is the parsed JSON."""

    __slots__ = ("fields", "matches", "spec")

    def __init__(self, matches: Predicate, fields: frozenset[str], spec: Any) -> None:
        self.matches: Predicate = matches
        self.fields = fields
        self.spec = spec

    def __repr__(self) -> str:
        return f"CompiledFilter({json.dumps(self.spec, default=str)[:200]})"


def _always(memory: Memory) -> bool:
    return True


MATCH_ALL: Final = CompiledFilter(_always, frozenset(), {})


def parse_filter(spec: str | Mapping[str, Any] | None) -> CompiledFilter:
    """Validate and compile `spec` (JSON text or its parsed object).

    None, "" (or only whitespace), JSON `null` and `{}` match every memory.
    Raises InvalidArgument, and nothing else, for anything that is not a filter.
    """
    if isinstance(spec, str):
        spec = load_filter_json(spec)
    if spec is None or (isinstance(spec, Mapping) and not spec):
        return MATCH_ALL
    compiler = _Compiler()
    predicate = compiler.filter(spec, "filter", 1)
    return CompiledFilter(predicate, frozenset(compiler.fields), spec)


class _Compiler:
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
