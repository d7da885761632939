from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryRecord(_message.Message):
    __slots__ = ("id", "text", "type", "topic_key", "payload_json", "entity", "tags", "category", "importance", "session_id", "source", "tier", "created_at", "last_reinforced_at", "reinforce_count", "access_count", "expires_at", "superseded_by", "supersedes", "vector", "last_accessed_at", "protected", "consolidated_from", "consolidated_into", "scope")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_REINFORCED_AT_FIELD_NUMBER: _ClassVar[int]
    REINFORCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    ACCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESSED_AT_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATED_FROM_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATED_INTO_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    type: str
    topic_key: str
    payload_json: str
    entity: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    category: str
    importance: float
    session_id: str
    source: str
    tier: str
    created_at: float
    last_reinforced_at: float
    reinforce_count: int
    access_count: int
    expires_at: float
    superseded_by: str
    supersedes: str
    vector: _containers.RepeatedScalarFieldContainer[float]
    last_accessed_at: float
    protected: bool
    consolidated_from: _containers.RepeatedScalarFieldContainer[str]
    consolidated_into: str
    scope: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., type: _Optional[str] = ..., topic_key: _Optional[str] = ..., payload_json: _Optional[str] = ..., entity: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., category: _Optional[str] = ..., importance: _Optional[float] = ..., session_id: _Optional[str] = ..., source: _Optional[str] = ..., tier: _Optional[str] = ..., created_at: _Optional[float] = ..., last_reinforced_at: _Optional[float] = ..., reinforce_count: _Optional[int] = ..., access_count: _Optional[int] = ..., expires_at: _Optional[float] = ..., superseded_by: _Optional[str] = ..., supersedes: _Optional[str] = ..., vector: _Optional[_Iterable[float]] = ..., last_accessed_at: _Optional[float] = ..., protected: _Optional[bool] = ..., consolidated_from: _Optional[_Iterable[str]] = ..., consolidated_into: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class MemoryInput(_message.Message):
    __slots__ = ("text", "type", "topic_key", "payload_json", "entity", "tags", "category", "importance", "session_id", "source", "tier", "expires_at", "supersedes", "vector", "protected", "never_merge", "allow_secret", "scope")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    PROTECTED_FIELD_NUMBER: _ClassVar[int]
    NEVER_MERGE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SECRET_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    text: str
    type: str
    topic_key: str
    payload_json: str
    entity: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    category: str
    importance: float
    session_id: str
    source: str
    tier: str
    expires_at: float
    supersedes: str
    vector: _containers.RepeatedScalarFieldContainer[float]
    protected: bool
    never_merge: bool
    allow_secret: bool
    scope: str
    def __init__(self, text: _Optional[str] = ..., type: _Optional[str] = ..., topic_key: _Optional[str] = ..., payload_json: _Optional[str] = ..., entity: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., category: _Optional[str] = ..., importance: _Optional[float] = ..., session_id: _Optional[str] = ..., source: _Optional[str] = ..., tier: _Optional[str] = ..., expires_at: _Optional[float] = ..., supersedes: _Optional[str] = ..., vector: _Optional[_Iterable[float]] = ..., protected: _Optional[bool] = ..., never_merge: _Optional[bool] = ..., allow_secret: _Optional[bool] = ..., scope: _Optional[str] = ...) -> None: ...

class RememberRequest(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryInput
    def __init__(self, memory: _Optional[_Union[MemoryInput, _Mapping]] = ...) -> None: ...

class RememberReply(_message.Message):
    __slots__ = ("id", "txid", "reinforced", "outcome", "target_id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    TXID_FIELD_NUMBER: _ClassVar[int]
    REINFORCED_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    txid: int
    reinforced: bool
    outcome: str
    target_id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., txid: _Optional[int] = ..., reinforced: _Optional[bool] = ..., outcome: _Optional[str] = ..., target_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RememberBatchRequest(_message.Message):
    __slots__ = ("memories",)
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryInput]
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryInput, _Mapping]]] = ...) -> None: ...

class RememberBatchReply(_message.Message):
    __slots__ = ("results", "txid")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TXID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RememberReply]
    txid: int
    def __init__(self, results: _Optional[_Iterable[_Union[RememberReply, _Mapping]]] = ..., txid: _Optional[int] = ...) -> None: ...

class RecallRequest(_message.Message):
    __slots__ = ("query", "top_k", "min_score", "filter_json", "query_vector", "include_vectors", "mode", "types", "topic_key", "session_id", "source", "tiers", "include_superseded", "max_tokens", "offset", "mark_accessed", "min_txid", "include_turns", "band")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    FILTER_JSON_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VECTORS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TIERS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MARK_ACCESSED_FIELD_NUMBER: _ClassVar[int]
    MIN_TXID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TURNS_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    query: str
    top_k: int
    min_score: float
    filter_json: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    include_vectors: bool
    mode: str
    types: _containers.RepeatedScalarFieldContainer[str]
    topic_key: str
    session_id: str
    source: str
    tiers: _containers.RepeatedScalarFieldContainer[str]
    include_superseded: bool
    max_tokens: int
    offset: int
    mark_accessed: bool
    min_txid: int
    include_turns: bool
    band: str
    def __init__(self, query: _Optional[str] = ..., top_k: _Optional[int] = ..., min_score: _Optional[float] = ..., filter_json: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., include_vectors: _Optional[bool] = ..., mode: _Optional[str] = ..., types: _Optional[_Iterable[str]] = ..., topic_key: _Optional[str] = ..., session_id: _Optional[str] = ..., source: _Optional[str] = ..., tiers: _Optional[_Iterable[str]] = ..., include_superseded: _Optional[bool] = ..., max_tokens: _Optional[int] = ..., offset: _Optional[int] = ..., mark_accessed: _Optional[bool] = ..., min_txid: _Optional[int] = ..., include_turns: _Optional[bool] = ..., band: _Optional[str] = ...) -> None: ...

class Hit(_message.Message):
    __slots__ = ("memory", "score", "similarity", "decay", "reinforcement", "channels", "match_reasons", "breakdown", "heat", "band")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    REINFORCEMENT_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    MATCH_REASONS_FIELD_NUMBER: _ClassVar[int]
    BREAKDOWN_FIELD_NUMBER: _ClassVar[int]
    HEAT_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryRecord
    score: float
    similarity: float
    decay: float
    reinforcement: float
    channels: _containers.RepeatedScalarFieldContainer[str]
    match_reasons: _containers.RepeatedScalarFieldContainer[str]
    breakdown: ScoreBreakdown
    heat: float
    band: str
    def __init__(self, memory: _Optional[_Union[MemoryRecord, _Mapping]] = ..., score: _Optional[float] = ..., similarity: _Optional[float] = ..., decay: _Optional[float] = ..., reinforcement: _Optional[float] = ..., channels: _Optional[_Iterable[str]] = ..., match_reasons: _Optional[_Iterable[str]] = ..., breakdown: _Optional[_Union[ScoreBreakdown, _Mapping]] = ..., heat: _Optional[float] = ..., band: _Optional[str] = ...) -> None: ...

class ScoreBreakdown(_message.Message):
    __slots__ = ("similarity", "keyword", "topic", "fusion", "decay", "reinforcement", "importance", "heat")
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    KEYWORD_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    DECAY_FIELD_NUMBER: _ClassVar[int]
    REINFORCEMENT_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    HEAT_FIELD_NUMBER: _ClassVar[int]
    similarity: float
    keyword: float
    topic: float
    fusion: float
    decay: float
    reinforcement: float
    importance: float
    heat: float
    def __init__(self, similarity: _Optional[float] = ..., keyword: _Optional[float] = ..., topic: _Optional[float] = ..., fusion: _Optional[float] = ..., decay: _Optional[float] = ..., reinforcement: _Optional[float] = ..., importance: _Optional[float] = ..., heat: _Optional[float] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ("session_id", "speaker", "text", "at", "id", "payload_json")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SPEAKER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    speaker: str
    text: str
    at: float
    id: str
    payload_json: str
    def __init__(self, session_id: _Optional[str] = ..., speaker: _Optional[str] = ..., text: _Optional[str] = ..., at: _Optional[float] = ..., id: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class TurnHit(_message.Message):
    __slots__ = ("turn", "score", "channels")
    TURN_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    turn: Turn
    score: float
    channels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, turn: _Optional[_Union[Turn, _Mapping]] = ..., score: _Optional[float] = ..., channels: _Optional[_Iterable[str]] = ...) -> None: ...

class RecallReply(_message.Message):
    __slots__ = ("hits", "has_more", "turns")
    HITS_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[Hit]
    has_more: bool
    turns: _containers.RepeatedCompositeFieldContainer[TurnHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[Hit, _Mapping]]] = ..., has_more: _Optional[bool] = ..., turns: _Optional[_Iterable[_Union[TurnHit, _Mapping]]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("id", "include_vector")
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_VECTOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    include_vector: bool
    def __init__(self, id: _Optional[str] = ..., include_vector: _Optional[bool] = ...) -> None: ...

class GetReply(_message.Message):
    __slots__ = ("memory", "chain", "sources")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryRecord
    chain: _containers.RepeatedCompositeFieldContainer[MemoryRecord]
    sources: _containers.RepeatedCompositeFieldContainer[MemoryRecord]
    def __init__(self, memory: _Optional[_Union[MemoryRecord, _Mapping]] = ..., chain: _Optional[_Iterable[_Union[MemoryRecord, _Mapping]]] = ..., sources: _Optional[_Iterable[_Union[MemoryRecord, _Mapping]]] = ...) -> None: ...

class ResolveIdRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ResolveIdReply(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("id", "filter_json", "dry_run", "purge", "by")
    ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_JSON_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    filter_json: str
    dry_run: bool
    purge: bool
    by: str
    def __init__(self, id: _Optional[str] = ..., filter_json: _Optional[str] = ..., dry_run: _Optional[bool] = ..., purge: _Optional[bool] = ..., by: _Optional[str] = ...) -> None: ...

class ForgetReply(_message.Message):
    __slots__ = ("txid", "ids", "purge_at")
    TXID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    PURGE_AT_FIELD_NUMBER: _ClassVar[int]
    txid: int
    ids: _containers.RepeatedScalarFieldContainer[str]
    purge_at: float
    def __init__(self, txid: _Optional[int] = ..., ids: _Optional[_Iterable[str]] = ..., purge_at: _Optional[float] = ...) -> None: ...

class ListTrashRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TrashedMemory(_message.Message):
    __slots__ = ("memory", "trashed_at", "trashed_by", "purge_at")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    TRASHED_AT_FIELD_NUMBER: _ClassVar[int]
    TRASHED_BY_FIELD_NUMBER: _ClassVar[int]
    PURGE_AT_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryRecord
    trashed_at: float
    trashed_by: str
    purge_at: float
    def __init__(self, memory: _Optional[_Union[MemoryRecord, _Mapping]] = ..., trashed_at: _Optional[float] = ..., trashed_by: _Optional[str] = ..., purge_at: _Optional[float] = ...) -> None: ...

class ListTrashReply(_message.Message):
    __slots__ = ("memories",)
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[TrashedMemory]
    def __init__(self, memories: _Optional[_Iterable[_Union[TrashedMemory, _Mapping]]] = ...) -> None: ...

class RestoreFromTrashRequest(_message.Message):
    __slots__ = ("ids", "all")
    IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    all: bool
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., all: _Optional[bool] = ...) -> None: ...

class RestoreFromTrashReply(_message.Message):
    __slots__ = ("txid", "memories")
    TXID_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    txid: int
    memories: _containers.RepeatedCompositeFieldContainer[MemoryRecord]
    def __init__(self, txid: _Optional[int] = ..., memories: _Optional[_Iterable[_Union[MemoryRecord, _Mapping]]] = ...) -> None: ...

class EmptyTrashRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EmptyTrashReply(_message.Message):
    __slots__ = ("txid", "ids")
    TXID_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    txid: int
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, txid: _Optional[int] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateRequest(_message.Message):
    __slots__ = ("id", "memory", "fields")
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    memory: MemoryInput
    fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., memory: _Optional[_Union[MemoryInput, _Mapping]] = ..., fields: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateReply(_message.Message):
    __slots__ = ("txid", "memory")
    TXID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    txid: int
    memory: MemoryRecord
    def __init__(self, txid: _Optional[int] = ..., memory: _Optional[_Union[MemoryRecord, _Mapping]] = ...) -> None: ...

class SupersedeRequest(_message.Message):
    __slots__ = ("id", "memory", "cleared")
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    CLEARED_FIELD_NUMBER: _ClassVar[int]
    id: str
    memory: MemoryInput
    cleared: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., memory: _Optional[_Union[MemoryInput, _Mapping]] = ..., cleared: _Optional[_Iterable[str]] = ...) -> None: ...

class ReinforceRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ReinforceReply(_message.Message):
    __slots__ = ("txid", "reinforce_count")
    TXID_FIELD_NUMBER: _ClassVar[int]
    REINFORCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    txid: int
    reinforce_count: int
    def __init__(self, txid: _Optional[int] = ..., reinforce_count: _Optional[int] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("filter_json",)
    FILTER_JSON_FIELD_NUMBER: _ClassVar[int]
    filter_json: str
    def __init__(self, filter_json: _Optional[str] = ...) -> None: ...

class Facet(_message.Message):
    __slots__ = ("name", "count", "last_activity")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    last_activity: float
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., last_activity: _Optional[float] = ...) -> None: ...

class ListReply(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Facet]
    def __init__(self, items: _Optional[_Iterable[_Union[Facet, _Mapping]]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("sort", "ascending", "limit", "offset", "page_token", "filter_json", "types", "topic_key", "entity", "tag", "source", "session_id", "band", "tiers", "include_superseded", "include_facets")
    SORT_FIELD_NUMBER: _ClassVar[int]
    ASCENDING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_JSON_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    TIERS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FACETS_FIELD_NUMBER: _ClassVar[int]
    sort: str
    ascending: bool
    limit: int
    offset: int
    page_token: str
    filter_json: str
    types: _containers.RepeatedScalarFieldContainer[str]
    topic_key: str
    entity: str
    tag: str
    source: str
    session_id: str
    band: str
    tiers: _containers.RepeatedScalarFieldContainer[str]
    include_superseded: bool
    include_facets: bool
    def __init__(self, sort: _Optional[str] = ..., ascending: _Optional[bool] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., page_token: _Optional[str] = ..., filter_json: _Optional[str] = ..., types: _Optional[_Iterable[str]] = ..., topic_key: _Optional[str] = ..., entity: _Optional[str] = ..., tag: _Optional[str] = ..., source: _Optional[str] = ..., session_id: _Optional[str] = ..., band: _Optional[str] = ..., tiers: _Optional[_Iterable[str]] = ..., include_superseded: _Optional[bool] = ..., include_facets: _Optional[bool] = ...) -> None: ...

class FacetValue(_message.Message):
    __slots__ = ("value", "count")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    value: str
    count: int
    def __init__(self, value: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class FacetCounts(_message.Message):
    __slots__ = ("values", "distinct")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[FacetValue]
    distinct: int
    def __init__(self, values: _Optional[_Iterable[_Union[FacetValue, _Mapping]]] = ..., distinct: _Optional[int] = ...) -> None: ...

class ListedMemory(_message.Message):
    __slots__ = ("memory", "heat", "band", "last_used")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    HEAT_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryRecord
    heat: float
    band: str
    last_used: float
    def __init__(self, memory: _Optional[_Union[MemoryRecord, _Mapping]] = ..., heat: _Optional[float] = ..., band: _Optional[str] = ..., last_used: _Optional[float] = ...) -> None: ...

class ListMemoriesReply(_message.Message):
    __slots__ = ("memories", "total", "next_page_token", "facets")
    class FacetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FacetCounts
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FacetCounts, _Mapping]] = ...) -> None: ...
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FACETS_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[ListedMemory]
    total: int
    next_page_token: str
    facets: _containers.MessageMap[str, FacetCounts]
    def __init__(self, memories: _Optional[_Iterable[_Union[ListedMemory, _Mapping]]] = ..., total: _Optional[int] = ..., next_page_token: _Optional[str] = ..., facets: _Optional[_Mapping[str, FacetCounts]] = ...) -> None: ...

class AppendTurnsRequest(_message.Message):
    __slots__ = ("session_id", "turns")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turns: _containers.RepeatedCompositeFieldContainer[Turn]
    def __init__(self, session_id: _Optional[str] = ..., turns: _Optional[_Iterable[_Union[Turn, _Mapping]]] = ...) -> None: ...

class AppendTurnsReply(_message.Message):
    __slots__ = ("ids", "txid")
    IDS_FIELD_NUMBER: _ClassVar[int]
    TXID_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    txid: int
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., txid: _Optional[int] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("include_vectors",)
    INCLUDE_VECTORS_FIELD_NUMBER: _ClassVar[int]
    include_vectors: bool
    def __init__(self, include_vectors: _Optional[bool] = ...) -> None: ...

class ImportRequest(_message.Message):
    __slots__ = ("memories", "allow_secret")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SECRET_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryRecord]
    allow_secret: bool
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryRecord, _Mapping]]] = ..., allow_secret: _Optional[bool] = ...) -> None: ...

class ImportReply(_message.Message):
    __slots__ = ("added", "reinforced", "txid")
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REINFORCED_FIELD_NUMBER: _ClassVar[int]
    TXID_FIELD_NUMBER: _ClassVar[int]
    added: int
    reinforced: int
    txid: int
    def __init__(self, added: _Optional[int] = ..., reinforced: _Optional[int] = ..., txid: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("include_bands",)
    INCLUDE_BANDS_FIELD_NUMBER: _ClassVar[int]
    include_bands: bool
    def __init__(self, include_bands: _Optional[bool] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("version", "model_state", "model", "dimension", "memory_count", "applied_txid", "socket", "data_dir", "key_storage", "cache_hits", "cache_misses", "cache_size", "uptime_s", "vault_id", "bands", "last_sweep_at", "last_consolidation_at", "trash_count")
    class BandsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_STATE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    APPLIED_TXID_FIELD_NUMBER: _ClassVar[int]
    SOCKET_FIELD_NUMBER: _ClassVar[int]
    DATA_DIR_FIELD_NUMBER: _ClassVar[int]
    KEY_STORAGE_FIELD_NUMBER: _ClassVar[int]
    CACHE_HITS_FIELD_NUMBER: _ClassVar[int]
    CACHE_MISSES_FIELD_NUMBER: _ClassVar[int]
    CACHE_SIZE_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    BANDS_FIELD_NUMBER: _ClassVar[int]
    LAST_SWEEP_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_CONSOLIDATION_AT_FIELD_NUMBER: _ClassVar[int]
    TRASH_COUNT_FIELD_NUMBER: _ClassVar[int]
    version: str
    model_state: str
    model: str
    dimension: int
    memory_count: int
    applied_txid: int
    socket: str
    data_dir: str
    key_storage: str
    cache_hits: int
    cache_misses: int
    cache_size: int
    uptime_s: float
    vault_id: str
    bands: _containers.ScalarMap[str, int]
    last_sweep_at: float
    last_consolidation_at: float
    trash_count: int
    def __init__(self, version: _Optional[str] = ..., model_state: _Optional[str] = ..., model: _Optional[str] = ..., dimension: _Optional[int] = ..., memory_count: _Optional[int] = ..., applied_txid: _Optional[int] = ..., socket: _Optional[str] = ..., data_dir: _Optional[str] = ..., key_storage: _Optional[str] = ..., cache_hits: _Optional[int] = ..., cache_misses: _Optional[int] = ..., cache_size: _Optional[int] = ..., uptime_s: _Optional[float] = ..., vault_id: _Optional[str] = ..., bands: _Optional[_Mapping[str, int]] = ..., last_sweep_at: _Optional[float] = ..., last_consolidation_at: _Optional[float] = ..., trash_count: _Optional[int] = ...) -> None: ...

class SweepRequest(_message.Message):
    __slots__ = ("dry_run", "threshold")
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    dry_run: bool
    threshold: float
    def __init__(self, dry_run: _Optional[bool] = ..., threshold: _Optional[float] = ...) -> None: ...

class SweptMemory(_message.Message):
    __slots__ = ("id", "text", "risk", "heat", "band", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RISK_FIELD_NUMBER: _ClassVar[int]
    HEAT_FIELD_NUMBER: _ClassVar[int]
    BAND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    risk: float
    heat: float
    band: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., risk: _Optional[float] = ..., heat: _Optional[float] = ..., band: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SweepReply(_message.Message):
    __slots__ = ("txid", "memories", "considered", "exempt", "purge_at")
    TXID_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    EXEMPT_FIELD_NUMBER: _ClassVar[int]
    PURGE_AT_FIELD_NUMBER: _ClassVar[int]
    txid: int
    memories: _containers.RepeatedCompositeFieldContainer[SweptMemory]
    considered: int
    exempt: int
    purge_at: float
    def __init__(self, txid: _Optional[int] = ..., memories: _Optional[_Iterable[_Union[SweptMemory, _Mapping]]] = ..., considered: _Optional[int] = ..., exempt: _Optional[int] = ..., purge_at: _Optional[float] = ...) -> None: ...

class ConsolidateRequest(_message.Message):
    __slots__ = ("scope", "min_age_days", "dry_run", "session_id")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MIN_AGE_DAYS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    scope: str
    min_age_days: float
    dry_run: bool
    session_id: str
    def __init__(self, scope: _Optional[str] = ..., min_age_days: _Optional[float] = ..., dry_run: _Optional[bool] = ..., session_id: _Optional[str] = ...) -> None: ...

class Consolidation(_message.Message):
    __slots__ = ("id", "text", "type", "topic_key", "entity", "sources", "facts")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_KEY_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    type: str
    topic_key: str
    entity: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    facts: int
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., type: _Optional[str] = ..., topic_key: _Optional[str] = ..., entity: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ..., facts: _Optional[int] = ...) -> None: ...

class ConsolidateReply(_message.Message):
    __slots__ = ("txid", "consolidations", "candidates")
    TXID_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATIONS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    txid: int
    consolidations: _containers.RepeatedCompositeFieldContainer[Consolidation]
    candidates: int
    def __init__(self, txid: _Optional[int] = ..., consolidations: _Optional[_Iterable[_Union[Consolidation, _Mapping]]] = ..., candidates: _Optional[int] = ...) -> None: ...

class EventsRequest(_message.Message):
    __slots__ = ("types",)
    TYPES_FIELD_NUMBER: _ClassVar[int]
    types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, types: _Optional[_Iterable[str]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("type", "query", "id", "at")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    type: str
    query: str
    id: str
    at: float
    def __init__(self, type: _Optional[str] = ..., query: _Optional[str] = ..., id: _Optional[str] = ..., at: _Optional[float] = ...) -> None: ...

class InitSyncRequest(_message.Message):
    __slots__ = ("remote", "token", "allow_cleartext_token")
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ALLOW_CLEARTEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    remote: str
    token: str
    allow_cleartext_token: bool
    def __init__(self, remote: _Optional[str] = ..., token: _Optional[str] = ..., allow_cleartext_token: _Optional[bool] = ...) -> None: ...

class InitSyncReply(_message.Message):
    __slots__ = ("vault_id", "recovery_key")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_KEY_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    recovery_key: str
    def __init__(self, vault_id: _Optional[str] = ..., recovery_key: _Optional[str] = ...) -> None: ...

class JoinSyncRequest(_message.Message):
    __slots__ = ("remote", "token", "recovery_key", "allow_cleartext_token")
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_KEY_FIELD_NUMBER: _ClassVar[int]
    ALLOW_CLEARTEXT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    remote: str
    token: str
    recovery_key: str
    allow_cleartext_token: bool
    def __init__(self, remote: _Optional[str] = ..., token: _Optional[str] = ..., recovery_key: _Optional[str] = ..., allow_cleartext_token: _Optional[bool] = ...) -> None: ...

class JoinSyncReply(_message.Message):
    __slots__ = ("vault_id", "memory_count")
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    memory_count: int
    def __init__(self, vault_id: _Optional[str] = ..., memory_count: _Optional[int] = ...) -> None: ...

class SyncStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SyncStatusReply(_message.Message):
    __slots__ = ("configured", "remote", "state", "head", "pushed_seq", "pending", "last_push", "last_pull", "last_error", "bad_version", "withheld_head", "repush", "chain", "snapshot", "silent", "freeze_bound_s", "witness", "refused", "unshown_recovery_key", "unshown_recovery_epoch", "witness_error")
    CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    PUSHED_SEQ_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    LAST_PUSH_FIELD_NUMBER: _ClassVar[int]
    LAST_PULL_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    BAD_VERSION_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_HEAD_FIELD_NUMBER: _ClassVar[int]
    REPUSH_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    SILENT_FIELD_NUMBER: _ClassVar[int]
    FREEZE_BOUND_S_FIELD_NUMBER: _ClassVar[int]
    WITNESS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    UNSHOWN_RECOVERY_KEY_FIELD_NUMBER: _ClassVar[int]
    UNSHOWN_RECOVERY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    WITNESS_ERROR_FIELD_NUMBER: _ClassVar[int]
    configured: bool
    remote: str
    state: str
    head: int
    pushed_seq: int
    pending: int
    last_push: float
    last_pull: float
    last_error: str
    bad_version: int
    withheld_head: int
    repush: bool
    chain: int
    snapshot: int
    silent: _containers.RepeatedCompositeFieldContainer[SilentDevice]
    freeze_bound_s: float
    witness: str
    refused: _containers.RepeatedCompositeFieldContainer[RefusedVersion]
    unshown_recovery_key: str
    unshown_recovery_epoch: int
    witness_error: str
    def __init__(self, configured: _Optional[bool] = ..., remote: _Optional[str] = ..., state: _Optional[str] = ..., head: _Optional[int] = ..., pushed_seq: _Optional[int] = ..., pending: _Optional[int] = ..., last_push: _Optional[float] = ..., last_pull: _Optional[float] = ..., last_error: _Optional[str] = ..., bad_version: _Optional[int] = ..., withheld_head: _Optional[int] = ..., repush: _Optional[bool] = ..., chain: _Optional[int] = ..., snapshot: _Optional[int] = ..., silent: _Optional[_Iterable[_Union[SilentDevice, _Mapping]]] = ..., freeze_bound_s: _Optional[float] = ..., witness: _Optional[str] = ..., refused: _Optional[_Iterable[_Union[RefusedVersion, _Mapping]]] = ..., unshown_recovery_key: _Optional[str] = ..., unshown_recovery_epoch: _Optional[int] = ..., witness_error: _Optional[str] = ...) -> None: ...

class RefusedVersion(_message.Message):
    __slots__ = ("number", "reason")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    number: int
    reason: str
    def __init__(self, number: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ListDevicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Device(_message.Message):
    __slots__ = ("device_id", "name", "sign_key", "receive_key", "added", "last_seen", "this_device", "revoked")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIGN_KEY_FIELD_NUMBER: _ClassVar[int]
    RECEIVE_KEY_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    THIS_DEVICE_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    name: str
    sign_key: str
    receive_key: str
    added: float
    last_seen: float
    this_device: bool
    revoked: bool
    def __init__(self, device_id: _Optional[str] = ..., name: _Optional[str] = ..., sign_key: _Optional[str] = ..., receive_key: _Optional[str] = ..., added: _Optional[float] = ..., last_seen: _Optional[float] = ..., this_device: _Optional[bool] = ..., revoked: _Optional[bool] = ...) -> None: ...

class ListDevicesReply(_message.Message):
    __slots__ = ("devices",)
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    def __init__(self, devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ...) -> None: ...

class RenameDeviceRequest(_message.Message):
    __slots__ = ("old_name", "new_name")
    OLD_NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    old_name: str
    new_name: str
    def __init__(self, old_name: _Optional[str] = ..., new_name: _Optional[str] = ...) -> None: ...

class RotateKeysRequest(_message.Message):
    __slots__ = ("revoke",)
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    revoke: str
    def __init__(self, revoke: _Optional[str] = ...) -> None: ...

class RotateKeysReply(_message.Message):
    __slots__ = ("recovery_key", "epoch", "revoked_device", "token_revoked", "token_note", "recovered")
    RECOVERY_KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVOKED_DEVICE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_REVOKED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_NOTE_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    recovery_key: str
    epoch: int
    revoked_device: str
    token_revoked: bool
    token_note: str
    recovered: bool
    def __init__(self, recovery_key: _Optional[str] = ..., epoch: _Optional[int] = ..., revoked_device: _Optional[str] = ..., token_revoked: _Optional[bool] = ..., token_note: _Optional[str] = ..., recovered: _Optional[bool] = ...) -> None: ...

class SilentDevice(_message.Message):
    __slots__ = ("device", "last_seen")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    device: str
    last_seen: float
    def __init__(self, device: _Optional[str] = ..., last_seen: _Optional[float] = ...) -> None: ...

class VerifySyncRequest(_message.Message):
    __slots__ = ("fingerprint",)
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    def __init__(self, fingerprint: _Optional[str] = ...) -> None: ...

class VerifySyncReply(_message.Message):
    __slots__ = ("fingerprint", "chain", "head", "agreed", "compared_at", "forked", "undecided")
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    AGREED_FIELD_NUMBER: _ClassVar[int]
    COMPARED_AT_FIELD_NUMBER: _ClassVar[int]
    FORKED_FIELD_NUMBER: _ClassVar[int]
    UNDECIDED_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    chain: int
    head: int
    agreed: bool
    compared_at: int
    forked: str
    undecided: str
    def __init__(self, fingerprint: _Optional[str] = ..., chain: _Optional[int] = ..., head: _Optional[int] = ..., agreed: _Optional[bool] = ..., compared_at: _Optional[int] = ..., forked: _Optional[str] = ..., undecided: _Optional[str] = ...) -> None: ...

class SyncRepairRequest(_message.Message):
    __slots__ = ("confirm",)
    CONFIRM_FIELD_NUMBER: _ClassVar[int]
    confirm: bool
    def __init__(self, confirm: _Optional[bool] = ...) -> None: ...

class SyncLeaveRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SyncLeaveReply(_message.Message):
    __slots__ = ("remote", "pending")
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    remote: str
    pending: int
    def __init__(self, remote: _Optional[str] = ..., pending: _Optional[int] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("skip_remote",)
    SKIP_REMOTE_FIELD_NUMBER: _ClassVar[int]
    skip_remote: bool
    def __init__(self, skip_remote: _Optional[bool] = ...) -> None: ...

class SeqRange(_message.Message):
    __slots__ = ("first", "last")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ...) -> None: ...

class CheckFinding(_message.Message):
    __slots__ = ("object", "kind", "status", "detail", "seqs")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    SEQS_FIELD_NUMBER: _ClassVar[int]
    object: str
    kind: str
    status: str
    detail: str
    seqs: _containers.RepeatedCompositeFieldContainer[SeqRange]
    def __init__(self, object: _Optional[str] = ..., kind: _Optional[str] = ..., status: _Optional[str] = ..., detail: _Optional[str] = ..., seqs: _Optional[_Iterable[_Union[SeqRange, _Mapping]]] = ...) -> None: ...

class CheckReply(_message.Message):
    __slots__ = ("sound", "memory_count", "snapshot_seq", "findings", "lost", "lost_memories")
    SOUND_FIELD_NUMBER: _ClassVar[int]
    MEMORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_SEQ_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    LOST_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    sound: bool
    memory_count: int
    snapshot_seq: int
    findings: _containers.RepeatedCompositeFieldContainer[CheckFinding]
    lost: _containers.RepeatedCompositeFieldContainer[SeqRange]
    lost_memories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, sound: _Optional[bool] = ..., memory_count: _Optional[int] = ..., snapshot_seq: _Optional[int] = ..., findings: _Optional[_Iterable[_Union[CheckFinding, _Mapping]]] = ..., lost: _Optional[_Iterable[_Union[SeqRange, _Mapping]]] = ..., lost_memories: _Optional[_Iterable[str]] = ...) -> None: ...
