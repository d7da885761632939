"""Turning what a caller sent into a valid `Memory`, or a clear refusal.

Every check names the field (and, in a batch, the item) it refuses, and
runs before anything is written: a bad batch writes nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np

from memvault_base.errors import InvalidArgument
from memvaultd.crypto.entropy import new_id
from memvaultd.model import memory as m
from memvaultd.model import secrets
from memvaultd.model.commands import MemoryDraft
from memvaultd.model.memory import Memory
from memvaultd.model.operations import memory_from_dict
from memvaultd.model.scopes import check_scope
from memvaultd.model.vector import Vector

# The fields `Update` may change, and how each is checked.
UPDATABLE = ("text", "type", "topic_key", "payload_json", "entity", "tags", "category",
             "importance", "session_id", "source", "tier", "expires_at", "protected", "scope")


def parse_payload(payload_json: str) -> dict[str, Any]:
    if len(payload_json.encode("utf-8", "surrogatepass")) > m.MAX_PAYLOAD_BYTES:
        raise InvalidArgument(f"payload: over the limit of {m.MAX_PAYLOAD_BYTES} bytes")
    try:
        payload = json.loads(payload_json) if payload_json else {}
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f"payload: not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise InvalidArgument("payload: must be a JSON object")
    return payload


def checked_text(text: str, allow_secret: bool = False) -> str:
    """`text` within the limits, refused when it holds a credential unless
    `allow_secret` (docs/secrets.md): the message names each kind and where
    it is, never the secret."""
    m.check_text(text)
    if not allow_secret and (found := secrets.find(text)):
        raise InvalidArgument(f"text: {secrets.refusal(found)}")
    return text


def checked_fields(draft: MemoryDraft, names: Sequence[str]) -> dict[str, Any]:
    """The named fields of `draft`, validated, as Memory attribute values."""
    checks: dict[str, Callable[[], tuple[str, Any]]] = {
        "text": lambda: ("text", checked_text(draft.text, draft.allow_secret)),
        "type": lambda: ("type", m.normalize_type(draft.type)),
        "topic_key": lambda: ("topic_key", m.check_short(draft.topic_key, "topic_key")),
        "payload_json": lambda: ("payload", parse_payload(draft.payload_json)),
        "entity": lambda: ("entity", m.check_short(draft.entity, "entity")),
        "tags": lambda: ("tags", m.check_tags(list(draft.tags))),
        "category": lambda: ("category", m.check_short(draft.category, "category")),
        "importance": lambda: ("importance", m.check_importance(draft.importance)),
        "session_id": lambda: ("session_id", m.check_short(draft.session_id, "session_id")),
        "source": lambda: ("source", m.check_short(draft.source, "source")),
        "tier": lambda: ("tier", m.normalize_tier(draft.tier)),
        "expires_at": lambda: ("expires_at", m.check_time(draft.expires_at, "expires_at")),
        "protected": lambda: ("protected", bool(draft.protected)),
        "scope": lambda: ("scope", check_scope(draft.scope)),
    }
    out: dict[str, Any] = {}
    for name in names:
        if name not in checks:
            raise InvalidArgument(f"fields: {name!r} cannot be updated; updatable fields are "
                                  f"{', '.join(UPDATABLE)}")
        attribute, value = checks[name]()
        out[attribute] = value
    return out


def new_memory(draft: MemoryDraft, now: float, where: str = "") -> Memory:
    """A new memory from `draft`; `where` prefixes messages ("memories[3].")."""
    try:
        values = checked_fields(draft, UPDATABLE)
    except InvalidArgument as exc:
        raise InvalidArgument(where + str(exc)) from exc
    return Memory(id=new_id(), created_at=now, last_reinforced_at=now,
                  supersedes=draft.supersedes, **values)


def own_vector(values: Sequence[float], dimension: int, model: str, field: str) -> Vector:
    """A caller's own embedding, checked and scaled to unit length (the
    ranking formula's distance assumes unit vectors)."""
    if len(values) != dimension:
        raise InvalidArgument(f"{field}: has {len(values)} dimensions; this vault's "
                              f"model ({model}) uses {dimension}")
    vector = np.asarray(values, dtype=np.float32)
    if not np.all(np.isfinite(vector)):
        raise InvalidArgument(f"{field}: contains NaN or infinity")
    # math.hypot, not np.linalg.norm: NumPy hands even 384 floats to BLAS and
    # releases the interpreter lock around the call, and taking it back waits
    # behind any busy thread. 10,000 norms (one RememberBatch's worth) took
    # 14 ms alone, 2.9 s beside a thread running Python and 53 s beside one
    # in a long json.dumps, as a snapshot being encoded was.
    norm = math.hypot(*vector.tolist())
    if norm == 0.0 or not math.isfinite(norm):
        raise InvalidArgument(f"{field}: must not be the zero vector")
    return vector / np.float32(norm)


_MEMORY_FIELDS = frozenset(f.name for f in dataclass_fields(Memory))


def imported_memory(record: Mapping[str, Any], now: float, allow_secret: bool = False
                    ) -> Memory:
    """An exported record sent back (`Import`) as a `Memory`: its id, times,
    counts and chain kept, every field under the limits a remembered memory
    obeys (else a 10 MB text, a NaN importance or an unknown type went
    straight in). A record with no creation time (written by hand or by
    another tool) is created `now`: with 0 it would count as 56 years
    unused, frozen at once, and a minor one forgotten by the next sweep."""
    doc = {name: value for name, value in record.items() if name in _MEMORY_FIELDS}
    doc["tags"] = list(record.get("tags", ()))
    doc["consolidated_from"] = list(record.get("consolidated_from", ()))
    doc["payload"] = parse_payload(record.get("payload_json", ""))
    draft = MemoryDraft(text=record.get("text", ""), type=record.get("type", ""),
                        topic_key=record.get("topic_key", ""),
                        payload_json=record.get("payload_json", ""),
                        entity=record.get("entity", ""), tags=doc["tags"],
                        category=record.get("category", ""),
                        importance=record.get("importance"),
                        session_id=record.get("session_id", ""),
                        source=record.get("source", ""), tier=record.get("tier", ""),
                        expires_at=record.get("expires_at", 0.0),
                        protected=record.get("protected"), allow_secret=allow_secret,
                        scope=record.get("scope", ""))
    doc |= checked_fields(draft, UPDATABLE)
    memory_id = record.get("id", "")
    if not memory_id or len(memory_id) > m.MAX_SHORT_FIELD:
        raise InvalidArgument(f"id: must be 1..{m.MAX_SHORT_FIELD} characters")
    m.check_short(record.get("consolidated_into", ""), "consolidated_into")
    if len(doc["consolidated_from"]) > m.MAX_SOURCES:
        raise InvalidArgument(f"consolidated_from: over {m.MAX_SOURCES} ids")
    for source in doc["consolidated_from"]:
        m.check_short(source, "consolidated_from")
    for name in ("created_at", "last_reinforced_at", "last_accessed_at"):
        m.check_time(doc.get(name, 0.0), name)
    if not doc.get("created_at"):
        doc["created_at"] = now
        doc["last_reinforced_at"] = doc.get("last_reinforced_at") or now
    return memory_from_dict(doc)
