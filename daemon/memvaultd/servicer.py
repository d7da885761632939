"""The gRPC face of the vault: translate, delegate, map errors. No logic.

Every domain error becomes a status code through the one table in
`memvault.errors`; anything unexpected is logged (without request content)
and answered INTERNAL, so a bug never takes the daemon down.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from memvault.errors import MemvaultError, status_of
from memvault.v1 import memory_pb2 as pb
from memvault.v1 import memory_pb2_grpc as pb_grpc

from . import __version__
from .events import EventBus
from .memory import Memory
from .recall.ranking import Scored
from .requests import MemoryDraft, RecallQuery
from .vault import Vault

log = logging.getLogger("memvaultd.servicer")

R = TypeVar("R")


def _translate_errors(method: Callable[..., R]) -> Callable[..., R]:
    @functools.wraps(method)
    def wrapper(self: MemoryServicer, request: Any, context: grpc.ServicerContext) -> R:
        try:
            return method(self, request, context)
        except MemvaultError as exc:
            context.abort(status_of(exc), str(exc))
        except Exception:
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{method.__name__} failed; see the "
                          "daemon's log")
        raise AssertionError("unreachable: abort raises")

    return wrapper


def draft_from(msg: pb.MemoryInput) -> MemoryDraft:
    return MemoryDraft(
        text=msg.text, type=msg.type, topic_key=msg.topic_key, payload_json=msg.payload_json,
        entity=msg.entity, tags=list(msg.tags), category=msg.category,
        importance=msg.importance if msg.HasField("importance") else None,
        session_id=msg.session_id, source=msg.source, tier=msg.tier,
        expires_at=msg.expires_at, supersedes=msg.supersedes, vector=list(msg.vector))


def record_of(memory: Memory, vector: Any = None) -> pb.MemoryRecord:
    return pb.MemoryRecord(
        id=memory.id, text=memory.text, type=memory.type, topic_key=memory.topic_key,
        payload_json=json.dumps(memory.payload, ensure_ascii=False), entity=memory.entity,
        tags=memory.tags, category=memory.category, importance=memory.importance,
        session_id=memory.session_id, source=memory.source, tier=memory.tier,
        created_at=memory.created_at, last_reinforced_at=memory.last_reinforced_at,
        reinforce_count=memory.reinforce_count, access_count=memory.access_count,
        expires_at=memory.expires_at, superseded_by=memory.superseded_by,
        supersedes=memory.supersedes, vector=[] if vector is None else vector.tolist())


def hit_of(scored: Scored, vault: Vault, include_vector: bool) -> pb.Hit:
    vector = vault.index.vector(scored.memory.id) if include_vector else None
    return pb.Hit(memory=record_of(scored.memory, vector), score=scored.score,
                  similarity=scored.similarity, decay=scored.decay,
                  reinforcement=scored.reinforcement)


class MemoryServicer(pb_grpc.MemoryServicer):
    def __init__(self, vault: Vault, events: EventBus, socket_path: str,
                 started_at: float) -> None:
        self.vault = vault
        self.events = events
        self.socket_path = socket_path
        self.started_at = started_at

    @_translate_errors
    def Remember(self, request: pb.RememberRequest, context: grpc.ServicerContext
                 ) -> pb.RememberReply:
        (outcome,) = self.vault.remember([draft_from(request.memory)])
        return pb.RememberReply(id=outcome.id, txid=outcome.txid, reinforced=outcome.reinforced)

    @_translate_errors
    def RememberBatch(self, request: pb.RememberBatchRequest, context: grpc.ServicerContext
                      ) -> pb.RememberBatchReply:
        outcomes = self.vault.remember([draft_from(msg) for msg in request.memories])
        return pb.RememberBatchReply(
            results=[pb.RememberReply(id=o.id, txid=o.txid, reinforced=o.reinforced)
                     for o in outcomes],
            txid=outcomes[-1].txid)

    @_translate_errors
    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext
               ) -> pb.RecallReply:
        query = RecallQuery(
            text=request.query, top_k=request.top_k,
            min_score=request.min_score if request.HasField("min_score") else None,
            filter_json=request.filter_json, vector=list(request.query_vector))
        hits = self.vault.recall(query)
        return pb.RecallReply(hits=[hit_of(h, self.vault, request.include_vectors)
                                    for h in hits])

    @_translate_errors
    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.MemoryRecord:
        memory, vector = self.vault.get(request.id)
        return record_of(memory, vector if request.include_vector else None)

    @_translate_errors
    def Forget(self, request: pb.ForgetRequest, context: grpc.ServicerContext
               ) -> pb.ForgetReply:
        return pb.ForgetReply(txid=self.vault.forget(request.id))

    @_translate_errors
    def Status(self, request: pb.StatusRequest, context: grpc.ServicerContext
               ) -> pb.StatusReply:
        vault, embedder = self.vault, self.vault.embedder
        return pb.StatusReply(
            version=__version__, model_state=embedder.state, model=embedder.model_name,
            dimension=vault.info.dimension, memory_count=len(vault.index),
            applied_txid=vault.applied_txid, socket=self.socket_path,
            data_dir=str(vault.data_dir), key_storage=vault.key_storage,
            cache_hits=embedder.hits, cache_misses=embedder.misses,
            cache_size=embedder.cache_size, uptime_s=time.time() - self.started_at,
            vault_id=vault.info.vault_id)

    def Events(self, request: pb.EventsRequest, context: grpc.ServicerContext
               ) -> Iterator[pb.Event]:
        subscription = self.events.subscribe(request.types)
        try:
            while context.is_active():
                # Wake twice a second to notice a client that went away.
                event = subscription.get(timeout=0.5)
                if event is not None:
                    yield pb.Event(type=event.type, query=event.query, id=event.id,
                                   at=event.at)
        finally:
            subscription.close()
