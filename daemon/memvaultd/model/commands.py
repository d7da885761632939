"""What callers ask of the vault, in the domain's own terms (no protobuf).

The servicer translates gRPC messages into these; the vault validates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memvaultd.model.scopes import FULL, Access


@dataclass(frozen=True)
class MemoryDraft:
    """A memory to store, as the caller sent it (not yet validated)."""

    text: str
    type: str = ""
    topic_key: str = ""
    payload_json: str = ""
    entity: str = ""
    tags: Sequence[str] = ()
    category: str = ""
    importance: float | None = None
    session_id: str = ""
    source: str = ""
    tier: str = ""
    expires_at: float = 0.0
    supersedes: str = ""
    vector: Sequence[float] = ()
    protected: bool | None = None
    # Store it as a memory of its own: never a reinforcement nor a supersession.
    new: bool = False
    # Store a text that holds a credential (`secrets.py`) rather than refuse it.
    allow_secret: bool = False
    # "": the caller's default scope (`Access.default_scope`; `user` without one).
    scope: str = ""


@dataclass(frozen=True)
class RecallQuery:
    text: str = ""
    top_k: int = 0
    min_score: float | None = None
    filter_json: str = ""
    vector: Sequence[float] = ()
    mode: str = ""
    types: Sequence[str] = ()
    topic_key: str = ""
    session_id: str = ""
    source: str = ""
    tiers: Sequence[str] = ()
    include_superseded: bool = False
    max_tokens: int = 0
    offset: int = 0
    mark_accessed: bool = True
    min_txid: int = 0
    include_turns: bool = False
    band: str = ""
    include_vectors: bool = False
    access: Access = FULL  # what the caller may see (`scopes.py`)


@dataclass(frozen=True)
class ListQuery:
    """A page of the memories a filter matches, in a stable order (`vault/listing.py`)."""

    sort: str = ""
    ascending: bool = False
    limit: int = 0
    offset: int = 0
    page_token: str = ""
    filter_json: str = ""
    types: Sequence[str] = ()
    topic_key: str = ""
    entity: str = ""
    tag: str = ""
    source: str = ""
    session_id: str = ""
    band: str = ""
    tiers: Sequence[str] = ()
    include_superseded: bool = False
    include_facets: bool = False
    access: Access = FULL  # what the caller may see (`scopes.py`)


@dataclass(frozen=True)
class TurnDraft:
    speaker: str
    text: str
    at: float = 0.0
    payload_json: str = ""


ADDED = "added"
REINFORCED = "reinforced"
SUPERSEDED = "superseded"


@dataclass(frozen=True)
class RememberOutcome:
    """What a remember did. `id` is the stored memory's id, or the reinforced
    one's; `target` the memory it reinforced or superseded ("" when added)."""

    id: str
    txid: int
    outcome: str = ADDED  # ADDED | REINFORCED | SUPERSEDED
    target: str = ""
    # For people: what differs from `target` ("numbers 3 -> 15").
    reason: str = ""

    @property
    def reinforced(self) -> bool:
        return self.outcome == REINFORCED


@dataclass(frozen=True)
class ImportedRecord:
    """An exported memory as a caller sends it back (`Import`), not yet
    checked: its fields by the names of `memory.proto`'s MemoryRecord, and
    its vector if it came with one."""

    fields: Mapping[str, Any]
    vector: Sequence[float] = ()
