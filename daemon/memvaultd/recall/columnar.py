"""The recall over columns: channels, fusion and ranking on the candidates' rows.

The reference recall (`tests/reference_recall.py`) computes one `Memory` at
a time; this is the same, done as array operations on the index rows of a
recall's ~50 candidates, reading their fields from the index's columns
(`columns.py`). The reference path spends ~20 us of Python per candidate
(visibility, the channel union, fusion, the score and its sort key), all of
it holding the interpreter lock. At 100k memories a cached hybrid recall,
both paths alternating in one process: 1.54-1.82 ms of CPU for the
reference, 1.21-1.30 ms here (docs/benchmarks.md, "Recall over columns").

The answers are the reference path's, bit for bit: each figure is the same
float64 operations in the same order (NumPy's elementwise + - * / and sqrt
round as Python's do). `exp` and `log1p`, which NumPy may round differently
from the C library, stay `math` calls, one per candidate. What only a few
candidates need (session neighbours, a named entity, heat) reads their
records as the reference does. `tests/test_recall_equivalence.py` compares
both paths on random vaults, with and without filters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from memvaultd.index.columns import TYPE_CODES
from memvaultd.index.keyword import KeywordHits
from memvaultd.index.layer import Layer
from memvaultd.index.memory_index import MemoryIndex, RowMask, Rows, View
from memvaultd.model.heat import HeatSettings, heat
from memvaultd.model.memory import PINNED_IMPORTANCE
from memvaultd.model.vector import Vector
from memvaultd.recall import hybrid
from memvaultd.recall.hybrid import HYBRID, KEYWORD, VECTOR, Candidate, FusionSettings
from memvaultd.recall.ranking import (
    SECONDS_PER_DAY,
    Scored,
    half_life_of,
    l2_from_cosine,
    reinforcement,
)
from memvaultd.recall.visibility import Visibility

Floats = npt.NDArray[np.float64]
_LN2 = math.log(2.0)
# A hybrid recall over this many rows scores its keywords on another thread
# while it searches the vectors: both are compiled loops that let go of the
# interpreter lock (`loops.bm25_sums`, `loops.probed_lists`), and what that
# saves grows with the vault. Over the socket (scripts/bench_recall_ab.py and
# bench_recall.py, docs/benchmarks.md): at 1M hybrid p50 4.63 -> 3.71 ms,
# one client's mixed calls 226-238 -> 308 /s, 8 clients' unchanged; at 100k
# 1.57 -> 1.52 ms, but the hand-off's ~0.13 ms of CPU a call took 8 clients
# from 1,209-1,281 to 1,005 calls/s. At 1M, once the BM25 loops read their
# lengths in uint16 (7 Dec), beside still won: 4.28 against 4.91 ms inline.
KEYWORDS_BESIDE_FROM = 200_000
_BESIDE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="keywords")


@dataclass
class _Found:
    """The union of the channels' rows, vector channel first, and per row
    what each channel said."""

    rows: Rows
    distance: Floats
    in_vector: int  # rows[:in_vector] came from the vector channel, nearest first
    in_keyword: npt.NDArray[np.bool_]
    keyword_rank: npt.NDArray[np.int64]  # -1: not found by the keyword channel
    topic: Floats  # 1.0: found by the topic channel
    topic_asked: bool
    bm25: KeywordHits


def ranked(layer: Layer, query_text: str, vector: Vector, seen: Visibility, *, depth: int,
           mode: str, topic_key: str, top_k: int, min_score: float | None, now: float,
           half_lives: Mapping[str, float], settings: FusionSettings,
           heat_settings: HeatSettings | None = None) -> tuple[list[tuple[Scored, Candidate]], int]:
    """The best `top_k` candidates as (score, candidate), best first, and
    how many candidates the channels found."""
    index = layer.index
    view = index.view()
    found = _channels(layer, view, query_text, vector, seen, depth, mode, topic_key,
                      hybrid.left_to_entities(query_text, layer, settings, mode))
    if found is None:
        return [], 0
    ids = [view.ids[row] for row in found.rows.tolist()]
    similarity = np.maximum(0.0, 1.0 - found.distance / 2.0)
    raw = found.bm25.scores_of(ids)
    best_bm25 = max(raw, default=0.0) or 1.0
    keyword = np.array(raw, dtype=np.float64) / best_bm25
    if settings.method == "rrf" and mode == HYBRID:
        entity = np.zeros(len(ids), dtype=np.float64)
        fusion = _rrf(found, settings)
    else:
        entity = _entities(index, view, found.rows, ids, query_text)
        fusion = _weighted(layer, view, found, ids, vector, similarity, keyword, entity,
                           best_bm25, mode, settings)
    heats = heat_settings or HeatSettings()
    score = _Score.of(view, found.rows, fusion, now, half_lives)
    total = score.total
    if heats.ranking_weight:
        heats_now = [heat(memory, now, heats.half_life_days) if memory is not None else 0.0
                     for memory in map(index.get, ids)]
        total = total * (1.0 + heats.ranking_weight * np.array(heats_now))
    chosen = np.flatnonzero(total >= (-math.inf if min_score is None else min_score))
    created = view.columns.created_at[found.rows]
    chosen = _best(chosen, total, found.distance, created, ids, top_k)
    out = []
    for i in chosen.tolist():
        memory = index.get(ids[i])
        if memory is None:  # removed since the view was taken
            continue
        channels = ([VECTOR] if i < found.in_vector else []) + (
            [KEYWORD] if found.in_keyword[i] else []) + (["topic"] if found.topic[i] else [])
        distance, sim = float(found.distance[i]), float(similarity[i])
        candidate = Candidate(memory, distance, sim, float(keyword[i]), float(found.topic[i]),
                              float(entity[i]), float(fusion[i]), channels,
                              matched=found.bm25.matched)
        hot = heat(memory, now, heats.half_life_days)
        out.append((Scored(memory, float(total[i]), sim, float(score.fresh[i]),
                           float(score.boost[i]), distance, float(score.weight[i]),
                           float(fusion[i]), hot, 1.0 + heats.ranking_weight * hot),
                    candidate))
    return out, len(found.rows)


def _channels(layer: Layer, view: View, text: str, vector: Vector, seen: Visibility,
              depth: int, mode: str, topic_key: str, names: frozenset[str]) -> _Found | None:
    index = layer.index

    def visible(view: View, rows: Rows) -> npt.NDArray[np.bool_]:
        return seen.mask(index, view, rows)

    search: Callable[[], KeywordHits] = KeywordHits.empty
    if mode in (HYBRID, KEYWORD) and text:
        search = partial(layer.keywords.search, text, names)
        if mode == HYBRID and view.count >= KEYWORDS_BESIDE_FROM:
            search = _BESIDE.submit(search).result
    empty = np.zeros(0, dtype=np.int64)
    vector_rows, vector_cos = empty, np.zeros(0, dtype=np.float32)
    if mode in (HYBRID, VECTOR):
        vector_rows, vector_cos = index.nearest(view, vector, depth, visible)
    bm25 = search()
    keyword_rows = _keyword_rows(index, view, bm25, depth, visible)
    topics = hybrid.asked_topics(text, topic_key, layer) if mode == HYBRID else set()
    on_topic = [i for topic in topics for i in layer.with_topic(topic)]
    topic_rows = _visible_rows(index, view, on_topic, visible)
    union = list(dict.fromkeys(vector_rows.tolist() + keyword_rows + topic_rows))
    if not union:
        return None
    rows = np.array(union, dtype=np.int64)
    cos = np.empty(len(rows), dtype=np.float64)
    cos[: len(vector_rows)] = vector_cos
    if len(rows) > len(vector_rows):
        # One product for the rows only the other channels found, in the
        # reference's order (reference_recall._fill_similarity), so BLAS rounds alike.
        others = [view.ids[row] for row in union[len(vector_rows):]]
        cos[len(vector_rows):] = [-1.0 if c is None else c
                                  for c in index.cosines(others, vector, view)]
    where = {row: i for i, row in enumerate(union)}
    keyword_rank = np.full(len(rows), -1, dtype=np.int64)
    keyword_rank[[where[row] for row in keyword_rows]] = np.arange(len(keyword_rows))
    topic = np.zeros(len(rows), dtype=np.float64)
    topic[[where[row] for row in topic_rows]] = 1.0
    distance = l2_from_cosine(cos).astype(np.float64, copy=False)
    return _Found(rows, distance, len(vector_rows), keyword_rank >= 0, keyword_rank, topic,
                  bool(topics), bm25)


def _keyword_rows(index: MemoryIndex, view: View, bm25: KeywordHits, depth: int,
                  visible: RowMask) -> list[int]:
    """The keyword channel: the first `depth` visible rows, best BM25 first.

    Read a slice at a time: many memories can tie on a score (a window then
    holds every tie, ~400 rows for the benchmark's templated texts), and one
    filter keeping half needs ~2 x `depth` of them."""
    picked: list[int] = []
    step = max(32, 2 * depth)
    for ordinals in bm25.ranked_windows():
        for start in range(0, len(ordinals), step):
            ids = bm25.ids_of(ordinals[start : start + step].tolist())
            picked += _visible_rows(index, view, ids, visible)[: depth - len(picked)]
            if len(picked) == depth:
                return picked
    return picked


def _visible_rows(index: MemoryIndex, view: View, ids: list[str], visible: RowMask
                  ) -> list[int]:
    """The rows of `ids` in `view` that `visible` accepts, in the order of `ids`."""
    rows = np.array(index.rows_of(ids, view), dtype=np.int64)
    if not len(rows):
        return []
    kept: list[int] = rows[visible(view, rows)].tolist()
    return kept


def _weighted(layer: Layer, view: View, found: _Found, ids: list[str], vector: Vector,
              similarity: Floats, keyword: Floats, entity: Floats, best_bm25: float, mode: str,
              settings: FusionSettings) -> Floats:
    """The reference's `_weighted` over arrays: the same sums in the same order."""
    c = settings.context
    w_v, w_k, w_t, w_e, total = hybrid.fusion_weights(settings, mode, found.topic_asked)
    if c and mode == HYBRID:
        similarity, keyword = _blended(layer, view, found, ids, vector, similarity, keyword,
                                       best_bm25, c)
    fusion: Floats = (w_v * similarity + w_k * keyword + w_t * found.topic + w_e * entity) / total
    return fusion


def _blended(layer: Layer, view: View, found: _Found, ids: list[str], vector: Vector,
             similarity: Floats, keyword: Floats, best_bm25: float, c: float
             ) -> tuple[Floats, Floats]:
    """Similarity and keyword score blended with the session neighbours',
    for the candidates that have any (only memories with a session do)."""
    in_session = np.flatnonzero(view.columns.has_session[found.rows]).tolist()
    neighbours_of = {i: layer.sessions.neighbours(ids[i]) for i in in_session}
    neighbours_of = {i: ns for i, ns in neighbours_of.items() if ns}
    if not neighbours_of:
        return similarity, keyword
    around = hybrid.Neighbours.of(layer, neighbours_of.values(), vector, found.bm25, view)
    similarity, keyword = similarity.copy(), keyword.copy()
    for i, neighbours in neighbours_of.items():
        similarity[i], keyword[i] = around.blended(similarity[i], keyword[i], neighbours,
                                                   best_bm25, c)
    return similarity, keyword


def _entities(index: MemoryIndex, view: View, rows: Rows, ids: list[str], text: str
              ) -> Floats:
    """1.0 where the query names the memory's entity (hybrid.names)."""
    entity = np.zeros(len(rows), dtype=np.float64)
    named = np.flatnonzero(view.columns.has_entity[rows]).tolist()
    if named:
        words = hybrid.words(text)
        for i in named:
            memory = index.get(ids[i])
            entity[i] = 1.0 if memory is not None and hybrid.names(words, memory.entity) else 0.0
    return entity


def _rrf(found: _Found, settings: FusionSettings) -> Floats:
    """The reference's `_rrf` over arrays (0.0 + x is x, so skipping an add and adding
    to zero agree)."""
    k = settings.rrf_k
    top = settings.rrf_vector + settings.rrf_keyword + settings.rrf_topic
    count = len(found.rows)
    score = np.zeros(count, dtype=np.float64)
    vector_rank = np.arange(count)
    score = np.where(vector_rank < found.in_vector,
                     score + settings.rrf_vector / (k + 1 + vector_rank), score)
    score = np.where(found.in_keyword,
                     score + settings.rrf_keyword / (k + 1 + found.keyword_rank), score)
    score = score + settings.rrf_topic * found.topic / (k + 1)
    fusion: Floats = score * (k + 1) / top
    return fusion


@dataclass
class _Score:
    """The composite score's factors of each candidate (`ranking.py`), and their product."""

    fresh: Floats
    boost: Floats
    weight: Floats
    total: Floats

    @classmethod
    def of(cls, view: View, rows: Rows, relevance: Floats, now: float,
           half_lives: Mapping[str, float]) -> _Score:
        columns = view.columns
        # By type code; OTHER_TYPE, last, decays as a type without a half-life.
        table = np.array([half_life_of(kind, half_lives) for kind in TYPE_CODES]
                         + [half_life_of("", half_lives)])
        days = np.maximum(0.0, (now - columns.since[rows]) / SECONDS_PER_DAY)
        exponent = -_LN2 * days / table[columns.type[rows]]
        fresh = np.array([math.exp(x) for x in exponent.tolist()], dtype=np.float64)
        importance = columns.importance[rows]
        fresh[importance >= PINNED_IMPORTANCE] = 1.0  # a pinned memory does not fade
        boost = np.array([reinforcement(n) for n in columns.reinforce_count[rows].tolist()],
                         dtype=np.float64)
        weight = 0.5 + np.minimum(1.0, np.maximum(0.0, importance))
        return cls(fresh, boost, weight, relevance * fresh * boost * weight)


def _best(chosen: npt.NDArray[np.intp], total: Floats, distance: Floats, created: Floats,
          ids: list[str], top_k: int) -> npt.NDArray[np.intp]:
    """The `top_k` best of `chosen`, ordered as `ranking.py` orders: higher
    total, then smaller distance, newer, smaller id. The id decides only
    between equal (total, distance, created), which random vectors never
    give; then the whole key is sorted in Python."""
    if not len(chosen):
        return chosen
    order = chosen[np.lexsort((-created[chosen], distance[chosen], -total[chosen]))]
    head = order[: top_k + 1]
    same = ((total[head][1:] == total[head][:-1]) & (distance[head][1:] == distance[head][:-1])
            & (created[head][1:] == created[head][:-1]))
    if same.any():
        t, d, c = total.tolist(), distance.tolist(), created.tolist()
        order = np.array(sorted(chosen.tolist(), key=lambda i: (-t[i], d[i], -c[i], ids[i])),
                         dtype=np.intp)
    return order[:top_k]
