"""The reference recall: `engine.recall` one `Memory` at a time.

The served recall (`engine.recall` over `columnar.ranked`) finds, fuses and
ranks the candidates as array operations on their index rows. This is the
same recall written out plainly, candidate by candidate: what the request
may see, the channels' union and its fusion here, the composite score in
`reference_ranking.py`.
It is the spec the columnar path must match, bit for bit
(test_recall_equivalence.py).

What both paths share is imported, not written again: the request checks
and the page cut (`engine.plan`, `engine.page`), the settings and weights,
the session-neighbour blend, named entities and asked topics (`hybrid.py`),
and the similarity of a distance (`ranking.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from memvaultd.index.keyword import KeywordHits
from memvaultd.index.layer import Layer
from memvaultd.model.heat import HeatSettings
from memvaultd.model.memory import Memory
from memvaultd.model.vector import Vector
from memvaultd.recall import engine
from memvaultd.recall.hybrid import (
    HYBRID,
    KEYWORD,
    VECTOR,
    Candidate,
    FusionSettings,
    Neighbours,
    asked_topics,
    fusion_weights,
    left_to_entities,
    names,
    words,
)
from memvaultd.recall.ranking import MAX_TOP_K, OVERFETCH, similarity
from memvaultd.recall.visibility import Visibility

from .reference_index import ranked
from .reference_ranking import rank


def recall(layer: Layer, planned: engine.Plan, vector: Vector, *,
           half_lives: Mapping[str, float], settings: FusionSettings,
           heat_settings: HeatSettings | None = None) -> engine.Page:
    """The page `engine.recall` must give: the same request asks the
    channels for as many candidates and ranks as many of them."""
    query, seen, now = planned.query, planned.seen, planned.now
    want = query.offset + planned.top_k
    found = candidates(layer, text=query.text, vector=vector,
                       keep=lambda memory: visible(seen, memory), depth=OVERFETCH * want,
                       mode=planned.mode, topic_key=query.topic_key, settings=settings)
    by_id = {c.memory.id: c for c in found}
    ranked = rank([(c.memory, c.distance) for c in found], now=now, half_lives=half_lives,
                  top_k=min(want + 1, MAX_TOP_K), min_score=query.min_score,
                  relevance={c.memory.id: c.fusion for c in found},
                  heat_settings=heat_settings)
    return engine.page(query, want, [(s, by_id[s.memory.id]) for s in ranked], len(found))


def visible(seen: Visibility, memory: Memory) -> bool:
    """Whether the request may see `memory` (`Visibility.mask`, one memory)."""
    return (not memory.is_expired(seen.now)
            and (seen.include_superseded or not memory.superseded_by)
            and memory.tier in seen.tiers
            and (not seen.types or memory.type in seen.types)
            and (seen.narrower is None or seen.narrower(memory)))


def candidates(layer: Layer, *, text: str, vector: Vector, keep: Callable[[Memory], bool],
               depth: int, mode: str, topic_key: str, settings: FusionSettings
               ) -> list[Candidate]:
    """The union of the channels' best `depth` memories, each with its fused
    relevance, best first."""
    found: dict[str, Candidate] = {}

    def add(memory: Memory, channel: str) -> Candidate:
        item = found.get(memory.id)
        if item is None:
            item = found[memory.id] = Candidate(memory, math.nan)
        item.channels.append(channel)
        return item

    vector_rank: dict[str, int] = {}
    if mode in (HYBRID, VECTOR):
        for position, (memory, distance) in enumerate(layer.index.search(vector, depth, keep)):
            add(memory, VECTOR).distance = distance
            vector_rank[memory.id] = position
    bm25 = KeywordHits.empty()
    keyword_rank: dict[str, int] = {}
    if mode in (HYBRID, KEYWORD) and text:
        bm25 = layer.keywords.search(text, left_to_entities(text, layer, settings, mode))
        for memory_id in ranked(bm25):
            hit = layer.get(memory_id)
            if hit is not None and keep(hit):
                keyword_rank[memory_id] = len(keyword_rank)
                add(hit, KEYWORD)
                if len(keyword_rank) == depth:
                    break
    topics = asked_topics(text, topic_key, layer) if mode == HYBRID else set()
    for topic in topics:
        for memory_id in layer.with_topic(topic):
            on_topic = layer.get(memory_id)
            if on_topic is not None and keep(on_topic):
                add(on_topic, "topic").topic = 1.0
    if not found:
        return []
    _fill_similarity(layer, found, vector)
    raw = bm25.scores_of(list(found))
    best_bm25 = max(raw, default=0.0) or 1.0
    for item, score in zip(found.values(), raw, strict=True):
        item.keyword = score / best_bm25
        item.matched = bm25.matched
    if settings.method == "rrf" and mode == HYBRID:
        _rrf(found, vector_rank, keyword_rank, settings)
    else:
        _weighted(layer, found, vector, text, bm25, best_bm25, mode, bool(topics), settings)
    return sorted(found.values(), key=lambda c: (-c.fusion, c.distance, c.memory.id))


def _fill_similarity(layer: Layer, found: dict[str, Candidate], vector: Vector) -> None:
    missing = [item for item in found.values() if math.isnan(item.distance)]
    cosines = layer.index.cosines([item.memory.id for item in missing], vector)
    for item, cos in zip(missing, cosines, strict=True):
        item.distance = math.sqrt(max(0.0, 2.0 - 2.0 * (-1.0 if cos is None else cos)))
    for item in found.values():
        item.similarity = similarity(item.distance)


def _weighted(layer: Layer, found: dict[str, Candidate], vector: Vector, text: str,
              bm25: KeywordHits, best_bm25: float, mode: str, topic_asked: bool,
              settings: FusionSettings) -> None:
    c = settings.context
    w_v, w_k, w_t, w_e, total = fusion_weights(settings, mode, topic_asked)
    query_words = words(text)
    neighbours_of = {i: layer.sessions.neighbours(i) if c and mode == HYBRID else ()
                     for i in found}
    around = Neighbours.of(layer, neighbours_of.values(), vector, bm25)
    for item in found.values():
        sim, kw = item.similarity, item.keyword
        neighbours = neighbours_of[item.memory.id]
        if neighbours:
            sim, kw = around.blended(sim, kw, neighbours, best_bm25, c)
        item.entity = 1.0 if names(query_words, item.memory.entity) else 0.0
        item.fusion = (w_v * sim + w_k * kw + w_t * item.topic + w_e * item.entity) / total


def _rrf(found: dict[str, Candidate], vector_rank: dict[str, int],
         keyword_rank: dict[str, int], settings: FusionSettings) -> None:
    k = settings.rrf_k
    top = settings.rrf_vector + settings.rrf_keyword + settings.rrf_topic
    for memory_id, item in found.items():
        score = 0.0
        if memory_id in vector_rank:
            score += settings.rrf_vector / (k + 1 + vector_rank[memory_id])
        if memory_id in keyword_rank:
            score += settings.rrf_keyword / (k + 1 + keyword_rank[memory_id])
        score += settings.rrf_topic * item.topic / (k + 1)
        item.fusion = score * (k + 1) / top  # 1.0 = first in every channel
