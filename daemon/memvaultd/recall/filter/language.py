"""What the filter language allows: its limits, fields, kinds and operators.

Each record field has a kind (string, tags, number, time); `payload.<path>`
names a value inside the payload, of any JSON kind. The kind decides which
operators apply. `field_kind` and `check_op` refuse anything else with a
message that says what was meant, because people type filters by hand.
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable
from typing import Any, Final

from memvault_base.errors import InvalidArgument

__all__ = [
    "COMPARE", "FIELDS", "LOGICAL", "MAX_DEPTH", "MAX_NODES", "MAX_TEXT_BYTES", "NUMBER",
    "OPERATORS", "OPS_OF_KIND", "ORDERING", "PAYLOAD", "STRING", "TAGS", "TIME",
    "check_op", "field_kind",
]  # fmt: skip

# Limits on hostile or runaway input. 32 levels is far beyond what a person
# writes (real filters nest 2-3 deep) yet keeps compilation's recursion well
# under Python's default limit of 1000 frames. 1000 nodes and 64 KiB bound the
# compile time to about a millisecond and the per-memory cost of `matches`.
MAX_DEPTH: Final = 32
MAX_NODES: Final = 1000
MAX_TEXT_BYTES: Final = 64 * 1024

STRING, TAGS, NUMBER, TIME, PAYLOAD = "string", "tags", "number", "time", "payload"
_FIELD_KIND: Final[dict[str, str]] = {
    "id": STRING, "text": STRING, "type": STRING, "topic_key": STRING, "entity": STRING,
    "tags": TAGS, "category": STRING, "importance": NUMBER, "session_id": STRING,
    "source": STRING, "tier": STRING, "created_at": TIME, "last_reinforced_at": TIME,
    "reinforce_count": NUMBER, "access_count": NUMBER, "expires_at": TIME,
    "superseded_by": STRING, "supersedes": STRING, "scope": STRING,
}  # fmt: skip
FIELDS: Final = tuple(_FIELD_KIND)
LOGICAL: Final = ("AND", "OR", "NOT")
OPERATORS: Final = ("eq", "ne", "contains", "in", "nin", "gt", "gte", "lt", "lte", "exists")
ORDERING: Final = ("gt", "gte", "lt", "lte")
OPS_OF_KIND: Final[dict[str, tuple[str, ...]]] = {
    STRING: ("eq", "ne", "contains", "in", "nin", "exists"),
    TAGS: ("eq", "ne", "contains", "in", "nin", "exists"),
    NUMBER: ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"),
    TIME: ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"),
    PAYLOAD: OPERATORS,
}
COMPARE: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le,
}  # fmt: skip


def field_kind(field: str, path: str) -> str:
    kind = _FIELD_KIND.get(field)
    if kind is not None:
        return kind
    if field.startswith("payload."):
        if any(not part for part in field.split(".")[1:]):
            raise InvalidArgument(f"{path}: empty name in payload path {field!r}")
        return PAYLOAD
    raise InvalidArgument(f"{path}: {_unknown_field_message(field)}")


def _unknown_field_message(field: str) -> str:
    if field == "payload":
        return "name a field inside payload, e.g. payload.status"
    if field.upper() in LOGICAL:
        return f"unknown field {field!r}; did you mean {field.upper()!r}?"
    if field.startswith("$"):
        hint = "operators are written without '$' (AND, eq, in, ...); "
    else:
        close = difflib.get_close_matches(field, FIELDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"unknown field {field!r}; {hint}fields are {', '.join(FIELDS)}, "
        "and payload.<name> for a field inside payload (e.g. payload.status)"
    )


def check_op(op: Any, kind: str, field: str, path: str) -> str:
    allowed = OPS_OF_KIND[kind]
    if op in allowed:
        return str(op)
    if op in OPERATORS:
        raise InvalidArgument(
            f"{path}: operator {op!r} does not apply to {field}, a {kind} field; "
            f"use one of {', '.join(allowed)}"
        )
    hint = ""
    if isinstance(op, str):
        guess = op.lstrip("$").lower()
        close = [guess] if guess in allowed else difflib.get_close_matches(guess, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InvalidArgument(
        f"{path}: unknown operator {op!r}{hint}; operators are {', '.join(allowed)}"
    )
