"""Translation between the plain values of `memvault.types` and the protobuf
messages of `memvault_base.v1`, both ways; the only code of the client that knows
the messages' field names.

    keywords / Memory          ->  message
    remember(text, topic=...)      MemoryInput (topic -> topic_key, session -> session_id,
                                   payload -> payload_json, importance only when given)
    update(id, topic=...)          UpdateRequest: MemoryInput + `fields` naming what is set
    Memory                         MemoryRecord (import: every field, the vector if any)
    {"speaker", "text", ...}       Turn

    message                    ->  value
    MemoryRecord                   Memory (payload_json decoded to a dict)
    Hit, TurnHit, RecallReply      Hit, TurnHit, Hits
    ListMemoriesReply              MemoryPage
    Facet, StatusReply, Event, *Reply   Facet, Status, Event, *Result

Nothing here does I/O; bad input raises InvalidArgument before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memvault.types import (
    Event,
    Facet,
    FacetCounts,
    Hit,
    Hits,
    ListedMemory,
    Memory,
    MemoryPage,
    RememberResult,
    ScoreBreakdown,
    Status,
    TurnHit,
)
from memvault_base.errors import InvalidArgument, MemvaultError
from memvault_base.v1 import memory_pb2 as pb

__all__ = [
    "INHERITED_FIELDS",
    "INPUT_KEYS",
    "UPDATE_FIELDS",
    "batch_input",
    "event",
    "exact_topic_filter",
    "facets",
    "filter_json",
    "hit",
    "hits",
    "import_record",
    "memory",
    "memory_input",
    "payload_json",
    "record",
    "remember_result",
    "status",
    "strings",
    "supersede_request",
    "turn",
    "update_request",
]

# remember()'s keywords; remember_batch() mappings take these plus "text".
INPUT_KEYS = frozenset(
    {
        "text",
        "type",
        "topic",
        "payload",
        "entity",
        "tags",
        "category",
        "importance",
        "session",
        "source",
        "tier",
        "expires_at",
        "supersedes",
        "vector",
        "protected",
        "new",
        "allow_secret",
        "scope",
    }
)
# The wire names, accepted too, so a dict shaped like Memory.to_dict() fits.
_INPUT_ALIASES = {"topic_key": "topic", "session_id": "session"}

# update()'s keywords -> the MemoryInput field each one sets, which is also the
# name UpdateRequest.fields lists for it.
UPDATE_FIELDS = {
    "text": "text",
    "type": "type",
    "topic": "topic_key",
    "payload": "payload_json",
    "entity": "entity",
    "tags": "tags",
    "category": "category",
    "importance": "importance",
    "session": "session_id",
    "source": "source",
    "tier": "tier",
    "expires_at": "expires_at",
    "protected": "protected",
    "scope": "scope",
}

_TURN_KEYS = frozenset({"speaker", "text", "at", "payload"})


# -- keywords -> messages ------------------------------------------------------------


def memory_input(
    text: str,
    *,
    type: str = "",
    topic: str = "",
    payload: Mapping[str, Any] | None = None,
    entity: str = "",
    tags: Sequence[str] = (),
    category: str = "",
    importance: float | None = None,
    session: str = "",
    source: str = "",
    tier: str = "",
    expires_at: float = 0,
    supersedes: str = "",
    vector: Sequence[float] | None = None,
    protected: bool | None = None,
    new: bool = False,
    allow_secret: bool = False,
    scope: str = "",
) -> pb.MemoryInput:
    memory = pb.MemoryInput(
        text=text,
        type=type,
        topic_key=topic,
        payload_json=payload_json(payload),
        entity=entity,
        tags=strings(tags),
        category=category,
        session_id=session,
        source=source,
        tier=tier,
        expires_at=expires_at,
        supersedes=supersedes,
        vector=list(vector or ()),
        never_merge=new,
        allow_secret=allow_secret,
        scope=scope,
    )
    if importance is not None:
        memory.importance = importance
    if protected is not None:
        memory.protected = protected
    return memory


def batch_input(index: int, mapping: Mapping[str, Any]) -> pb.MemoryInput:
    kwargs = {_INPUT_ALIASES.get(k, k): v for k, v in mapping.items()}
    unknown = sorted(set(kwargs) - INPUT_KEYS)
    if unknown:
        raise InvalidArgument(f"memories[{index}]: unknown key(s) {', '.join(unknown)}")
    if "text" not in kwargs:
        raise InvalidArgument(f"memories[{index}]: missing key text")
    return memory_input(**kwargs)


def update_request(
    id: str, changes: Mapping[str, Any], vector: Sequence[float] | None,
    allow_secret: bool = False,
) -> pb.UpdateRequest:
    """`changes` maps update()'s keywords to their new values (None = unchanged)."""
    given = {name: value for name, value in changes.items() if value is not None}
    if not given:
        raise InvalidArgument(
            f"update of {id}: nothing to change; give at least one field ({', '.join(changes)})"
        )
    if vector is not None and "text" not in given:
        raise InvalidArgument(f"update of {id}: a vector goes with a new text; give text too")
    memory = memory_input(given.pop("text", ""), vector=vector, allow_secret=allow_secret, **given)
    names = [UPDATE_FIELDS[name] for name in changes if changes[name] is not None]
    return pb.UpdateRequest(id=id, memory=memory, fields=names)


# supersede()'s keywords a new version inherits when not given -> the wire
# name `SupersedeRequest.cleared` uses to leave it empty instead.
INHERITED_FIELDS = {
    "type": "type",
    "topic": "topic_key",
    "payload": "payload_json",
    "entity": "entity",
    "tags": "tags",
    "category": "category",
    "session": "session_id",
    "source": "source",
}


def supersede_request(
    id: str, text: str, fields: Mapping[str, Any], vector: Sequence[float] | None,
    allow_secret: bool = False,
) -> pb.SupersedeRequest:
    """`fields` maps supersede()'s keywords to values: None inherits the old
    memory's, an empty value ("", [], {}) leaves the field empty."""
    given = {name: value for name, value in fields.items() if value is not None}
    cleared = [
        INHERITED_FIELDS[name]
        for name, value in given.items()
        if name in INHERITED_FIELDS and not value
    ]
    kept = {name: value for name, value in given.items() if value or name not in INHERITED_FIELDS}
    memory = memory_input(text, vector=vector, allow_secret=allow_secret, **kept)
    return pb.SupersedeRequest(id=id, memory=memory, cleared=cleared)


def turn(index: int, mapping: Mapping[str, Any]) -> pb.Turn:
    unknown = sorted(set(mapping) - _TURN_KEYS)
    if unknown:
        raise InvalidArgument(f"turns[{index}]: unknown key(s) {', '.join(unknown)}")
    for key in ("speaker", "text"):
        if not isinstance(mapping.get(key), str):
            raise InvalidArgument(f"turns[{index}]: {key} must be given, as a string")
    at = mapping.get("at", 0.0)
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise InvalidArgument(f"turns[{index}]: at must be seconds since the epoch")
    return pb.Turn(
        speaker=mapping["speaker"],
        text=mapping["text"],
        at=float(at),
        payload_json=payload_json(mapping.get("payload")),
    )


def record(memory: Memory) -> pb.MemoryRecord:
    """Every field of `memory`, as Import takes it (ids, times and counts kept)."""
    return pb.MemoryRecord(
        id=memory.id,
        text=memory.text,
        type=memory.type,
        topic_key=memory.topic_key,
        payload_json=payload_json(memory.payload),
        entity=memory.entity,
        tags=strings(memory.tags),
        category=memory.category,
        importance=memory.importance,
        session_id=memory.session_id,
        source=memory.source,
        tier=memory.tier,
        created_at=memory.created_at,
        last_reinforced_at=memory.last_reinforced_at,
        reinforce_count=memory.reinforce_count,
        access_count=memory.access_count,
        expires_at=memory.expires_at,
        superseded_by=memory.superseded_by,
        supersedes=memory.supersedes,
        vector=list(memory.vector),
        last_accessed_at=memory.last_accessed_at,
        protected=memory.protected,
        consolidated_from=strings(memory.consolidated_from),
        consolidated_into=memory.consolidated_into,
        scope=memory.scope,
    )


def import_record(index: int, item: Memory | Mapping[str, Any]) -> pb.MemoryRecord:
    """An import item (a Memory, or a mapping shaped like `Memory.to_dict()`) as a record."""
    if isinstance(item, Memory):
        return record(item)
    if not isinstance(item, Mapping):
        kind = type(item).__name__
        raise InvalidArgument(f"memories[{index}]: a Memory or a mapping, not {kind}")
    return record(Memory.from_dict(item, where=f"memories[{index}]"))


def payload_json(payload: Mapping[str, Any] | None) -> str:
    if payload is None:
        return ""
    if not isinstance(payload, Mapping):
        raise InvalidArgument(f"payload must be a JSON object, not {type(payload).__name__}")
    try:
        return json.dumps(dict(payload), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"payload is not a JSON object: {err}") from None


def filter_json(filter: Mapping[str, Any] | str | None) -> str:
    if filter is None:
        return ""
    if isinstance(filter, str):
        return filter  # the daemon validates it and names what is wrong
    try:
        return json.dumps(dict(filter), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"filter is not JSON: {err}") from None


def exact_topic_filter(filter: Mapping[str, Any] | str | None, topic: str) -> str:
    """`filter` (JSON text) narrowed to memories of exactly `topic`, not the
    topics below it: the filter equality {"topic_key": topic}."""
    clause = json.dumps({"topic_key": topic}, ensure_ascii=False)
    text = filter_json(filter)
    return f'{{"AND": [{text}, {clause}]}}' if text.strip() else clause


def strings(values: Sequence[str]) -> list[str]:
    # A lone string would otherwise become one element per character.
    return [values] if isinstance(values, str) else list(values)


# -- messages -> values ----------------------------------------------------------------


def memory(message: pb.MemoryRecord) -> Memory:
    return Memory(
        id=message.id,
        text=message.text,
        type=message.type,
        topic_key=message.topic_key,
        payload=_payload(message.payload_json),
        entity=message.entity,
        tags=tuple(message.tags),
        category=message.category,
        importance=message.importance,
        session_id=message.session_id,
        source=message.source,
        tier=message.tier,
        created_at=message.created_at,
        last_reinforced_at=message.last_reinforced_at,
        reinforce_count=message.reinforce_count,
        access_count=message.access_count,
        expires_at=message.expires_at,
        superseded_by=message.superseded_by,
        supersedes=message.supersedes,
        vector=tuple(message.vector),
        last_accessed_at=message.last_accessed_at,
        protected=message.protected,
        consolidated_from=tuple(message.consolidated_from),
        consolidated_into=message.consolidated_into,
        scope=message.scope,
    )


def _payload(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise MemvaultError(
            f"the daemon returned a payload that is not a JSON object: {text[:80]!r}"
        )
    return value


def hit(message: pb.Hit) -> Hit:
    b = message.breakdown
    return Hit(
        memory=memory(message.memory),
        score=message.score,
        similarity=message.similarity,
        decay=message.decay,
        reinforcement=message.reinforcement,
        channels=tuple(message.channels),
        match_reasons=tuple(message.match_reasons),
        breakdown=ScoreBreakdown(
            similarity=b.similarity,
            keyword=b.keyword,
            topic=b.topic,
            fusion=b.fusion,
            decay=b.decay,
            reinforcement=b.reinforcement,
            importance=b.importance,
            heat=b.heat,
        ),
        heat=message.heat,
        band=message.band,
    )


def _turn_hit(message: pb.TurnHit) -> TurnHit:
    t = message.turn
    return TurnHit(
        id=t.id,
        session_id=t.session_id,
        speaker=t.speaker,
        text=t.text,
        at=t.at,
        payload=_payload(t.payload_json),
        score=message.score,
        channels=tuple(message.channels),
    )


def hits(reply: pb.RecallReply) -> Hits:
    return Hits(
        (hit(h) for h in reply.hits),
        has_more=reply.has_more,
        turns=(_turn_hit(t) for t in reply.turns),
    )


def facets(reply: pb.ListReply) -> list[Facet]:
    return [Facet(f.name, f.count, f.last_activity) for f in reply.items]


def memory_page(reply: pb.ListMemoriesReply) -> MemoryPage:
    return MemoryPage(
        tuple(ListedMemory(memory(m.memory), m.heat, m.band, m.last_used)
              for m in reply.memories),
        reply.total, reply.next_page_token,
        {name: FacetCounts(tuple((v.value, v.count) for v in counts.values), counts.distinct)
         for name, counts in sorted(reply.facets.items())})


def remember_result(reply: pb.RememberReply) -> RememberResult:
    # A daemon older than `outcome` says only whether it reinforced.
    outcome = reply.outcome or ("reinforced" if reply.reinforced else "added")
    target = reply.target_id or (reply.id if outcome == "reinforced" else "")
    return RememberResult(
        id=reply.id, txid=reply.txid, outcome=outcome, target=target, reason=reply.reason
    )


def event(message: pb.Event) -> Event:
    return Event(type=message.type, query=message.query, id=message.id, at=message.at)


def status(reply: pb.StatusReply) -> Status:
    return Status(
        version=reply.version,
        model_state=reply.model_state,
        model=reply.model,
        dimension=reply.dimension,
        memory_count=reply.memory_count,
        applied_txid=reply.applied_txid,
        socket=reply.socket,
        data_dir=reply.data_dir,
        key_storage=reply.key_storage,
        cache_hits=reply.cache_hits,
        cache_misses=reply.cache_misses,
        cache_size=reply.cache_size,
        uptime_s=reply.uptime_s,
        vault_id=reply.vault_id,
        # hottest first (a protobuf map keeps no order)
        bands={b: reply.bands[b] for b in ("hot", "warm", "cold", "frozen") if b in reply.bands},
        last_sweep_at=reply.last_sweep_at,
        last_consolidation_at=reply.last_consolidation_at,
        trash_count=reply.trash_count,
    )
