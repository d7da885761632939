"""`Memory`: a stored memory, every field the daemon keeps for it, and the
checks that read one back from its JSON shape (an export line, for import)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from memvault_base.errors import InvalidArgument
from memvault_base.memory_rules import DEFAULT_IMPORTANCE, PINNED_IMPORTANCE

__all__ = ["Memory"]


@dataclass(frozen=True)
class Memory:
    """A stored memory, with every field the daemon keeps for it."""

    id: str
    text: str
    type: str = ""
    topic_key: str = ""
    # A dict inside a frozen dataclass: the Memory itself is not hashable, a
    # price paid so that callers get the payload as the JSON object it is.
    payload: dict[str, Any] = field(default_factory=dict)
    entity: str = ""
    tags: tuple[str, ...] = ()
    category: str = ""
    importance: float = DEFAULT_IMPORTANCE
    session_id: str = ""
    source: str = ""
    tier: str = ""
    created_at: float = 0.0
    last_reinforced_at: float = 0.0
    reinforce_count: int = 0
    access_count: int = 0
    expires_at: float = 0.0
    superseded_by: str = ""
    supersedes: str = ""
    vector: tuple[float, ...] = ()
    last_accessed_at: float = 0.0
    # Kept out of the forgetting sweep and consolidation.
    protected: bool = False
    # A consolidated memory's sources; an archived source's consolidated memory.
    consolidated_from: tuple[str, ...] = ()
    consolidated_into: str = ""
    # Whose it is: "user", "project:<name>" or "agent:<name>" (docs/scopes.md);
    # "" (an export written before scopes) is imported as the caller's default.
    scope: str = ""

    @property
    def pinned(self) -> bool:
        """True when importance is at or above 0.9: decay does not hide it."""
        return self.importance >= PINNED_IMPORTANCE

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the CLI prints for this memory (and `export` writes)."""
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "type": self.type,
            "topic_key": self.topic_key,
            "payload": self.payload,
            "tags": list(self.tags),
            "category": self.category,
            "entity": self.entity,
            "importance": self.importance,
            "session_id": self.session_id,
            "source": self.source,
            "tier": self.tier,
            "created_at": self.created_at,
            "last_reinforced_at": self.last_reinforced_at,
            "reinforce_count": self.reinforce_count,
            "access_count": self.access_count,
            "last_accessed_at": self.last_accessed_at,
            "expires_at": self.expires_at,
            "superseded_by": self.superseded_by,
            "supersedes": self.supersedes,
            "protected": self.protected,
            "consolidated_from": list(self.consolidated_from),
            "consolidated_into": self.consolidated_into,
            "scope": self.scope,
        }
        if self.vector:
            out["vector"] = list(self.vector)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "memory") -> Memory:
        """The Memory that `to_dict()` described; InvalidArgument names what is wrong.

        "text" is required; every other key is optional and takes its default.
        An unknown key is an error rather than dropped, so that an import never
        loses a field silently. `where` prefixes messages ("line 7").
        """
        unknown = sorted(set(data) - _FIELD_NAMES)
        if unknown:
            raise InvalidArgument(f"{where}: unknown key(s) {', '.join(unknown)}")
        if "text" not in data:
            raise InvalidArgument(f"{where}: missing key text")
        values: dict[str, Any] = {"id": ""}
        for name, value in data.items():
            values[name] = _checked(name, value, f"{where}.{name}")
        return cls(**values)


_FIELD_NAMES = frozenset(f.name for f in fields(Memory))
_INT_FIELDS = frozenset({"reinforce_count", "access_count"})
_FLOAT_FIELDS = frozenset(
    {"importance", "created_at", "last_reinforced_at", "last_accessed_at", "expires_at"}
)


def _checked(name: str, value: Any, where: str) -> Any:
    """`value` as Memory's field `name` holds it, or InvalidArgument."""
    if name == "payload":
        if not isinstance(value, dict):
            raise InvalidArgument(f"{where}: must be a JSON object")
        return value
    if name == "protected":
        if not isinstance(value, bool):
            raise InvalidArgument(f"{where}: must be true or false")
        return value
    if name in ("tags", "vector", "consolidated_from"):
        if not isinstance(value, list | tuple):
            raise InvalidArgument(f"{where}: must be a list")
        if name != "vector":
            return tuple(_str(tag, f"{where}[{i}]") for i, tag in enumerate(value))
        return tuple(_number(x, f"{where}[{i}]") for i, x in enumerate(value))
    if name in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"{where}: must be a whole number >= 0")
        return value
    if name in _FLOAT_FIELDS:
        return _number(value, where)
    return _str(value, where)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}: must be a string, not {type(value).__name__}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(f"{where}: must be a finite number")
    return float(value)
