"""One recall over one layer: visibility, filters, channels, ranking, pages.

    query -> keep (visibility + filters) -> hybrid candidates (8 x what the
    page needs) -> composite ranking -> min_score -> offset / top_k ->
    token budget -> hits, has_more
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memvault.errors import InvalidArgument

from .. import memory as m
from ..index import Vector
from ..layer import Layer
from ..memory import Memory
from ..requests import RecallQuery
from ..upkeep.heat import HeatSettings, band, check_band, heat
from .filters import parse_filter
from .hybrid import HYBRID, MODES, Candidate, FusionSettings, candidates, explain
from .ranking import MAX_TOP_K, OVERFETCH, Scored, check_top_k, rank

DEFAULT_TIERS = frozenset({m.WORKING, m.LONG_TERM})
# ~4 bytes of English per token for the BPE tokenizers agents budget with.
BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class Hit:
    scored: Scored
    candidate: Candidate


@dataclass(frozen=True)
class Page:
    hits: list[Hit]
    has_more: bool


def approximate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN))


def check(query: RecallQuery) -> tuple[int, str]:
    """Validate the request's own fields; returns (top_k, mode)."""
    top_k = check_top_k(query.top_k)
    mode = query.mode or HYBRID
    if mode not in MODES:
        raise InvalidArgument(f"mode: unknown mode {query.mode!r}; use one of {', '.join(MODES)}")
    if query.min_score is not None and not math.isfinite(query.min_score):
        raise InvalidArgument("min_score: must be a finite number")
    if query.offset < 0 or query.offset + top_k > MAX_TOP_K:
        raise InvalidArgument(f"offset: offset + top_k must stay within {MAX_TOP_K}")
    if query.max_tokens < 0:
        raise InvalidArgument("max_tokens: must not be negative")
    for tier in query.tiers:
        m.normalize_tier(tier)
    for memory_type in query.types:
        m.normalize_type(memory_type)
    check_band(query.band)
    return top_k, mode


def keeper(query: RecallQuery, now: float, heat_settings: HeatSettings | None = None
           ) -> Callable[[Memory], bool]:
    """What this request may see: visibility rules, then its filters."""
    matches = parse_filter(query.filter_json or None)
    tiers = frozenset(query.tiers) or DEFAULT_TIERS
    types = frozenset(m.normalize_type(t) for t in query.types)
    topic, below = query.topic_key, query.topic_key + "."
    half_life = (heat_settings or HeatSettings()).half_life_days

    def keep(memory: Memory) -> bool:
        return (not memory.is_expired(now)
                and (query.include_superseded or not memory.superseded_by)
                and memory.tier in tiers
                and (not types or memory.type in types)
                and (not topic or memory.topic_key == topic or memory.topic_key.startswith(below))
                and (not query.session_id or memory.session_id == query.session_id)
                and (not query.source or memory.source == query.source)
                and matches.matches(memory)
                and (not query.band or band(heat(memory, now, half_life)) == query.band))

    return keep


def recall(layer: Layer, query: RecallQuery, vector: Vector, keep: Callable[[Memory], bool], *,
           now: float, half_lives: Mapping[str, float], settings: FusionSettings,
           heat_settings: HeatSettings | None = None) -> Page:
    top_k, mode = check(query)
    want = query.offset + top_k
    found = candidates(layer, text=query.text, vector=vector, keep=keep,
                       depth=OVERFETCH * want, mode=mode, topic_key=query.topic_key,
                       settings=settings)
    by_id = {c.memory.id: c for c in found}
    ranked = rank([(c.memory, c.distance) for c in found], now=now, half_lives=half_lives,
                  top_k=min(want + 1, MAX_TOP_K), min_score=query.min_score,
                  relevance={c.memory.id: c.fusion for c in found},
                  heat_settings=heat_settings)
    has_more = len(ranked) > want or (want == MAX_TOP_K and len(found) > want)
    hits = [Hit(s, by_id[s.memory.id]) for s in ranked[query.offset : want]]
    if query.max_tokens:
        spent, kept = 0, []
        for hit in hits:
            spent += approximate_tokens(hit.scored.memory.text)
            if spent > query.max_tokens:
                has_more = True
                break
            kept.append(hit)
        hits = kept
    for hit in hits:  # reasons for what is returned only
        explain(hit.candidate)
    return Page(hits, has_more)
