"""The plain values `memvault.Client` returns, so that callers never handle protobuf.

All are frozen dataclasses, except `Hits`, a list of `Hit` that also carries
the reply's `has_more` and `turns`. Times are seconds since the Unix epoch as
floats (0.0 means "unset"), `payload` is the decoded JSON object, sequences
are tuples. `to_dict()` gives the JSON shape the `memvault` CLI prints with
`--json`; `vector` appears in it only when the daemon returned one (it does so
only on request), so that a recall's JSON does not carry 384 floats per hit.
`Memory.from_dict()` reads that shape back (an export line, for import).

Translation from and to the wire messages lives in `memvault.wire`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from memvault.errors import InvalidArgument

__all__ = [
    "AppendResult",
    "Event",
    "Facet",
    "ForgetResult",
    "Hit",
    "Hits",
    "ImportResult",
    "Memory",
    "ReinforceResult",
    "RememberResult",
    "ScoreBreakdown",
    "Status",
    "TurnHit",
    "UpdateResult",
]


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
    importance: float = 0.5  # the daemon's default: unrated
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

    @property
    def pinned(self) -> bool:
        """True when importance is at or above 0.9: decay does not hide it."""
        return self.importance >= 0.9

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
class UpdateResult:
    """An edit in place: the write's txid and the memory as it now is."""

    txid: int
    memory: Memory

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "memory": self.memory.to_dict()}


@dataclass(frozen=True)
class ForgetResult:
    """The memories a filter forgot (or, on a dry run, would forget; txid 0 then)."""

    txid: int
    ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "ids": list(self.ids)}


@dataclass(frozen=True)
class ReinforceResult:
    """A reinforcement: the write's txid and the memory's new reinforce_count."""

    txid: int
    reinforce_count: int

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "reinforce_count": self.reinforce_count}


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
class AppendResult:
    """Stored transcript turns: their ids, in input order, and the write's txid."""

    ids: tuple[str, ...]
    txid: int

    def to_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "txid": self.txid}


@dataclass(frozen=True)
class ImportResult:
    """An import: how many memories were added, how many reinforced existing ones."""

    added: int
    reinforced: int
    # The txid of the last write; 0 when nothing was sent.
    txid: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "reinforced": self.reinforced, "txid": self.txid}


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
    # Visible memories per heat band (only when asked: status(bands=True)).
    bands: dict[str, int] = field(default_factory=dict)
    # When the vault was last swept / consolidated on any device; 0 = never.
    last_sweep_at: float = 0.0
    last_consolidation_at: float = 0.0

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
            "bands": dict(self.bands),
            "last_sweep_at": self.last_sweep_at,
            "last_consolidation_at": self.last_consolidation_at,
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


@dataclass(frozen=True)
class SyncInfo:
    """Where this device's sync stands (`memvault sync status`)."""

    configured: bool
    remote: str = ""
    state: str = ""
    head: int = 0
    pushed_seq: int = 0
    pending: int = 0
    last_push: float = 0.0
    last_pull: float = 0.0
    last_error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class InitResult:
    """What `init` returns: the vault's id and its recovery key (shown once)."""

    vault_id: str
    recovery_key: str

    def to_dict(self) -> dict[str, Any]:
        return {"vault_id": self.vault_id, "recovery_key": self.recovery_key}


@dataclass(frozen=True)
class JoinResult:
    vault_id: str
    memory_count: int

    def to_dict(self) -> dict[str, Any]:
        return {"vault_id": self.vault_id, "memory_count": self.memory_count}
