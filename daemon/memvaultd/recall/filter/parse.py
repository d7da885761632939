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

from memvaultd.model.memory import Memory
from memvaultd.recall.filter.compiler import FilterCompiler
from memvaultd.recall.filter.json_text import load_filter_json

# The language lives in the filter_*.py modules beside this one; its names stay
# importable from here ("X as X" marks a re-export for mypy --strict).
from memvaultd.recall.filter.language import FIELDS, OPERATORS
from memvaultd.recall.filter.language import LOGICAL as LOGICAL
from memvaultd.recall.filter.language import MAX_DEPTH as MAX_DEPTH
from memvaultd.recall.filter.language import MAX_NODES as MAX_NODES
from memvaultd.recall.filter.language import MAX_TEXT_BYTES as MAX_TEXT_BYTES
from memvaultd.recall.filter.language import NUMBER as NUMBER
from memvaultd.recall.filter.language import PAYLOAD as PAYLOAD
from memvaultd.recall.filter.language import STRING as STRING
from memvaultd.recall.filter.language import TAGS as TAGS
from memvaultd.recall.filter.language import TIME as TIME
from memvaultd.recall.filter.payload import ValueTest as ValueTest
from memvaultd.recall.filter.predicates import Predicate as Predicate

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
    compiler = FilterCompiler()
    predicate = compiler.filter(spec, "filter", 1)
    return CompiledFilter(predicate, frozenset(compiler.fields), spec)
