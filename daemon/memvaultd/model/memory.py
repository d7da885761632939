"""The memory record: what the vault stores, and the rules its fields obey.

A `Memory` is the decrypted, in-memory form. It never touches disk as such:
the operation log and snapshots carry it sealed (see `operations.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from memvault_base.errors import InvalidArgument
from memvault_base.memory_rules import DEFAULT_IMPORTANCE as DEFAULT_IMPORTANCE
from memvault_base.memory_rules import PINNED_IMPORTANCE as PINNED_IMPORTANCE

EPISODIC, SEMANTIC, PROCEDURAL = "episodic", "semantic", "procedural"
TYPES = (EPISODIC, SEMANTIC, PROCEDURAL)
# The fact/event/instruction/task vocabulary of other agent-memory tools maps
# onto the three types by how long such a memory stays relevant (their decay).
TYPE_ALIASES = {"fact": SEMANTIC, "event": EPISODIC, "instruction": PROCEDURAL, "task": EPISODIC}

WORKING, LONG_TERM, ARCHIVED = "working", "long_term", "archived"
TIERS = (WORKING, LONG_TERM, ARCHIVED)

DEFAULT_TYPE = SEMANTIC

# 32 KiB of UTF-8: a long note section or a page of transcript. Larger inputs
# embed poorly anyway (MiniLM reads only its first 256 tokens, ~1 KiB of text)
# and belong split into several memories.
MAX_TEXT_BYTES = 32 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_TAGS = 64
MAX_SHORT_FIELD = 512  # topic_key, category, entity, session_id, source, a tag
# The memories one consolidated memory summarises: its fact list must fit the
# 64 KiB payload, with room for the ids (33 bytes each).
MAX_SOURCES = 100
# The source of a watched file's chunks ("file:notes/a.md#Heading"): the file
# is their truth, so upkeep never merges them (notes/note_folder.py).
WATCHED_FILE_SOURCE = "file:"


@dataclass(slots=True)
class Memory:
    id: str
    text: str
    type: str = DEFAULT_TYPE
    topic_key: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    entity: str = ""
    tags: tuple[str, ...] = ()
    category: str = ""
    importance: float = DEFAULT_IMPORTANCE
    session_id: str = ""
    source: str = ""
    tier: str = LONG_TERM
    created_at: float = 0.0
    last_reinforced_at: float = 0.0
    reinforce_count: int = 0
    access_count: int = 0
    expires_at: float = 0.0
    superseded_by: str = ""
    supersedes: str = ""
    last_accessed_at: float = 0.0
    # Kept out of the forgetting sweep and consolidation (docs/upkeep.md).
    protected: bool = False
    # A consolidated memory names its sources; each source (archived) names it.
    consolidated_from: tuple[str, ...] = ()
    consolidated_into: str = ""
    # In the trash (docs/format.md, `vault/state.py`): when it was forgotten
    # (0: not in the trash) and by what ("cli", "mcp", "sweep", "watch", ...).
    trashed_at: float = 0.0
    trashed_by: str = ""
    # Whose it is: "user", "project:<name>" or "agent:<name>" (`scopes.py`).
    # A record written before scopes has none and reads as "user".
    scope: str = "user"

    @property
    def pinned(self) -> bool:
        return self.importance >= PINNED_IMPORTANCE

    @property
    def trashed(self) -> bool:
        return self.trashed_at > 0

    def is_expired(self, now: float) -> bool:
        return self.expires_at > 0 and self.expires_at <= now

    def copy(self, **changes: Any) -> Memory:
        """`dataclasses.replace`, in 1.1 rather than 5.6 us: every recall
        copies each memory it returns, to count the access."""
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"Memory has no field {', '.join(sorted(unknown))}")
        new = Memory(*_field_values(self))
        for name, value in changes.items():
            setattr(new, name, value)
        return new


_FIELD_NAMES = frozenset(f.name for f in fields(Memory))
_field_values = attrgetter(*(f.name for f in fields(Memory)))


def normalize_type(value: str) -> str:
    """`value` as one of TYPES; '' means the default. Raises InvalidArgument."""
    if not value:
        return DEFAULT_TYPE
    lowered = value.strip().lower()
    if lowered in TYPES:
        return lowered
    if lowered in TYPE_ALIASES:
        return TYPE_ALIASES[lowered]
    allowed = ", ".join((*TYPES, *TYPE_ALIASES))
    raise InvalidArgument(f"type: unknown memory type {value!r}; use one of {allowed}")


def normalize_tier(value: str) -> str:
    if not value:
        return LONG_TERM
    if value in TIERS:
        return value
    raise InvalidArgument(f"tier: unknown tier {value!r}; use one of {', '.join(TIERS)}")


def check_text(text: str, field_name: str = "text") -> str:
    if not text or not text.strip():
        raise InvalidArgument(f"{field_name}: must not be empty")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise InvalidArgument(
            f"{field_name}: {size} bytes is over the limit of {MAX_TEXT_BYTES} bytes; "
            "split it into several memories"
        )
    return text


def check_short(value: str, field_name: str) -> str:
    if len(value) > MAX_SHORT_FIELD:
        raise InvalidArgument(f"{field_name}: longer than {MAX_SHORT_FIELD} characters")
    return value


def check_tags(tags: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if len(tags) > MAX_TAGS:
        raise InvalidArgument(f"tags: {len(tags)} tags is over the limit of {MAX_TAGS}")
    out: list[str] = []
    for tag in tags:
        if not tag.strip():
            raise InvalidArgument("tags: a tag must not be empty")
        check_short(tag, "tags")
        if tag not in out:
            out.append(tag)
    return tuple(out)


def check_importance(value: float | None) -> float:
    if value is None:
        return DEFAULT_IMPORTANCE
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"importance: {value!r} is outside 0..1")
    return float(value)


def check_time(value: float, field_name: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise InvalidArgument(f"{field_name}: {value!r} is not a time (seconds since the epoch)")
    return float(value)
