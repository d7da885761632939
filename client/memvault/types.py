"""The plain values `memvault.Client` returns, so that callers never handle protobuf.

All are frozen dataclasses. Times are seconds since the Unix epoch as floats
(0.0 means "unset"), `payload` is the decoded JSON object, sequences are
tuples. `to_dict()` gives the JSON shape the `memvault` CLI prints with
`--json`; `vector` appears in it only when the daemon returned one (it does so
only on request), so that a recall's JSON does not carry 384 floats per hit.

Translation from and to the wire messages lives in `memvault.client`, the one
module that speaks gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "Hit", "Memory", "RememberResult", "Status"]


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
    importance: float = 0.0
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

    @property
    def pinned(self) -> bool:
        """True when importance is at or above 0.9: decay does not hide it."""
        return self.importance >= 0.9

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the CLI prints for this memory."""
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
            "expires_at": self.expires_at,
            "superseded_by": self.superseded_by,
            "supersedes": self.supersedes,
        }
        if self.vector:
            out["vector"] = list(self.vector)
        return out


@dataclass(frozen=True)
class Hit:
    """One recall result: the memory and the parts of its composite score.

    `score = similarity x decay x reinforcement` (before any importance
    adjustment the daemon documents).
    """

    memory: Memory
    score: float
    similarity: float = 0.0
    decay: float = 0.0
    reinforcement: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The memory's fields flattened, score third, the score's parts last."""
        mem = self.memory.to_dict()
        out: dict[str, Any] = {"id": mem.pop("id"), "text": mem.pop("text"), "score": self.score}
        out.update(mem)
        out["similarity"] = self.similarity
        out["decay"] = self.decay
        out["reinforcement"] = self.reinforcement
        return out


@dataclass(frozen=True)
class RememberResult:
    """What a write returns: the memory's id and the write's transaction id."""

    id: str
    txid: int
    # True when the text restated an existing memory of the same type and
    # topic: that memory was reinforced and `id` is its id, no copy was stored.
    reinforced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "txid": self.txid, "reinforced": self.reinforced}


@dataclass(frozen=True)
class Status:
    """The daemon's state, as `Status` reports it."""

    version: str
    model_state: str
    model: str = ""
    dimension: int = 0
    memory_count: int = 0
    applied_txid: int = 0
    socket: str = ""
    data_dir: str = ""
    key_storage: str = ""
    cache_hits: int = 0
    cache_misses: int = 0
    cache_size: int = 0
    uptime_s: float = 0.0
    vault_id: str = ""

    @property
    def ready(self) -> bool:
        return self.model_state == "ready"

    @property
    def cache_hit_rate(self) -> float | None:
        """Hits over lookups of the query-embedding cache; None before the first lookup."""
        lookups = self.cache_hits + self.cache_misses
        return self.cache_hits / lookups if lookups else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "model_state": self.model_state,
            "model": self.model,
            "dimension": self.dimension,
            "memory_count": self.memory_count,
            "applied_txid": self.applied_txid,
            "socket": self.socket,
            "data_dir": self.data_dir,
            "key_storage": self.key_storage,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "cache_size": self.cache_size,
            "cache_hit_rate": self.cache_hit_rate,
            "uptime_s": self.uptime_s,
            "vault_id": self.vault_id,
        }


@dataclass(frozen=True)
class Event:
    """Something the daemon did: "hit" / "miss" (query-embedding cache),
    "remember", "forget", "ready"."""

    type: str
    query: str = ""
    id: str = ""
    at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "query": self.query, "id": self.id, "at": self.at}
