"""What the reads return: a recall's `Hits` (each a `Hit` with its
`ScoreBreakdown`, and the matching transcript turns as `TurnHit`s), the
`Facet`s of `list_topics` / `list_entities`, and a `MemoryPage` of
`list_memories` (each a `ListedMemory`, with `FacetCounts` per field)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from memvault.memory import Memory

__all__ = [
    "Facet", "FacetCounts", "Hit", "Hits", "ListedMemory", "MemoryPage", "ScoreBreakdown",
    "TurnHit",
]


@dataclass(frozen=True)
class ScoreBreakdown:
    """The parts of a hit's score (docs/recall.md).

    `similarity`, `keyword` and `topic` are what each channel saw (0 when it
    did not find the memory), `fusion` the fused relevance of the channels
    (0..1); `decay`, `reinforcement` and `importance` the factors applied to it.
    """

    similarity: float = 0.0
    keyword: float = 0.0
    topic: float = 0.0
    fusion: float = 0.0
    decay: float = 0.0
    reinforcement: float = 0.0
    importance: float = 0.0
    # 1 + heat.ranking_weight x heat: 1 unless heat is set to rank.
    heat: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Hit:
    """One recall result: the memory, its score and how it was found.

    `channels` names the channels that found it ("vector", "keyword",
    "topic"), `match_reasons` says why in short phrases, `breakdown` holds
    every part of the score. `similarity`, `decay` and `reinforcement` repeat
    three of those parts, as they were before channels existed.
    """

    memory: Memory
    score: float
    similarity: float = 0.0
    decay: float = 0.0
    reinforcement: float = 0.0
    channels: tuple[str, ...] = ()
    match_reasons: tuple[str, ...] = ()
    breakdown: ScoreBreakdown = field(default_factory=ScoreBreakdown)
    # How used the memory is, 0..1, and its band: hot | warm | cold | frozen.
    heat: float = 0.0
    band: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The memory's fields flattened, score third, how it was found last."""
        mem = self.memory.to_dict()
        out: dict[str, Any] = {"id": mem.pop("id"), "text": mem.pop("text"), "score": self.score}
        out.update(mem)
        out["similarity"] = self.similarity
        out["decay"] = self.decay
        out["reinforcement"] = self.reinforcement
        out["channels"] = list(self.channels)
        out["match_reasons"] = list(self.match_reasons)
        out["breakdown"] = self.breakdown.to_dict()
        out["heat"] = self.heat
        out["band"] = self.band
        return out


@dataclass(frozen=True)
class TurnHit:
    """A transcript turn that matched a recall (`include_turns`), ranked on its own."""

    id: str
    session_id: str
    speaker: str
    text: str
    at: float = 0.0
    payload: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0
    channels: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "speaker": self.speaker,
            "text": self.text,
            "at": self.at,
            "payload": self.payload,
            "score": self.score,
            "channels": list(self.channels),
        }


class Hits(list[Hit]):
    """A recall's hits, best first — a plain list of `Hit` (`hits[0]`, `hits == []`)
    that also carries the rest of the reply.

    `has_more`: more ranked hits exist past `offset + len(hits)` (ask again
    with that offset). `turns`: the matching transcript turns when the recall
    asked for them, ranked on their own and never mixed into the hits.
    """

    def __init__(
        self, hits: Iterable[Hit] = (), *, has_more: bool = False, turns: Iterable[TurnHit] = ()
    ) -> None:
        super().__init__(hits)
        self.has_more = has_more
        self.turns: list[TurnHit] = list(turns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hits": [hit.to_dict() for hit in self],
            "turns": [turn.to_dict() for turn in self.turns],
            "has_more": self.has_more,
        }

    def __repr__(self) -> str:
        return f"Hits({list.__repr__(self)}, has_more={self.has_more}, turns={self.turns!r})"


@dataclass(frozen=True)
class Facet:
    """A topic or entity the vault knows: how many memories, and when last active."""

    name: str
    count: int
    # The newest created_at / last_reinforced_at among those memories.
    last_activity: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "last_activity": self.last_activity}


@dataclass(frozen=True)
class ListedMemory:
    """A memory of a `list_memories` page, with its heat (0..1) and band now,
    and when it was last used (created, reinforced or recalled)."""

    memory: Memory
    heat: float = 0.0
    band: str = ""
    last_used: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.memory.to_dict(), "heat": self.heat, "band": self.band,
                "last_used": self.last_used}


@dataclass(frozen=True)
class FacetCounts:
    """How many of the matching memories have each value of one field: the
    most frequent values first (at most 25), and how many distinct values
    there are in all."""

    values: tuple[tuple[str, int], ...] = ()
    distinct: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"values": [{"value": v, "count": c} for v, c in self.values],
                "distinct": self.distinct}


@dataclass(frozen=True)
class MemoryPage:
    """A page of `list_memories`: its memories in order, how many match in
    all, the token of the next page ("" on the last) and, when asked, the
    facet counts by field ("topic", "entity", "tag", "type", "source",
    "session", "band", "tier")."""

    memories: tuple[ListedMemory, ...] = ()
    total: int = 0
    next_page_token: str = ""
    facets: dict[str, FacetCounts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"memories": [listed.to_dict() for listed in self.memories],
                "total": self.total, "next_page_token": self.next_page_token,
                "facets": {name: counts.to_dict() for name, counts in self.facets.items()}}
