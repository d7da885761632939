"""One recall over one layer: visibility, filters, channels, ranking, pages.

    query -> visibility + filters -> hybrid candidates (8 x what the page
    needs) -> composite ranking -> min_score -> offset / top_k ->
    token budget -> hits, has_more

`columnar.ranked` finds and ranks the candidates; `page` cuts the page.
`tests/reference_recall.py` is the same recall one `Memory` at a time,
with this module's `check` and `page`: the spec the equivalence test holds
`columnar.ranked` to.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from memvault_base.errors import InvalidArgument
from memvaultd.index.layer import Layer
from memvaultd.model.commands import RecallQuery
from memvaultd.model.heat import HeatSettings
from memvaultd.model.vector import Vector
from memvaultd.recall import columnar
from memvaultd.recall.hybrid import HYBRID, MODES, Candidate, FusionSettings, explain
from memvaultd.recall.ranking import MAX_TOP_K, OVERFETCH, Scored, check_top_k
from memvaultd.recall.visibility import Visibility, check_kinds

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


@dataclass(frozen=True)
class Plan:
    """A recall request checked once: its page, its mode, what it may see,
    and the time it is answered at (`plan`)."""

    query: RecallQuery
    top_k: int
    mode: str
    seen: Visibility
    now: float


def plan(query: RecallQuery, now: float, heat_settings: HeatSettings | None = None) -> Plan:
    """Validate the request's own fields and compile its filter; raises
    InvalidArgument naming the field."""
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
    check_kinds(query.tiers, query.types, query.band)
    return Plan(query, top_k, mode, Visibility.of(query, now, heat_settings), now)


def recall(layer: Layer, planned: Plan, vector: Vector, *, half_lives: Mapping[str, float],
           settings: FusionSettings, heat_settings: HeatSettings | None = None) -> Page:
    query = planned.query
    want = query.offset + planned.top_k
    ranked, found = columnar.ranked(layer, query.text, vector, planned.seen,
                                    depth=OVERFETCH * want, mode=planned.mode,
                                    topic_key=query.topic_key, top_k=min(want + 1, MAX_TOP_K),
                                    min_score=query.min_score, now=planned.now,
                                    half_lives=half_lives, settings=settings,
                                    heat_settings=heat_settings)
    return page(query, want, ranked, found)


def page(query: RecallQuery, want: int, ranked: list[tuple[Scored, Candidate]], found: int
         ) -> Page:
    """The page of `query` from the best `want + 1` candidates (`want`: offset
    + top_k; one more says whether more follow) of the `found` the channels
    gave: the offset, the token budget, and match reasons for its hits."""
    has_more = len(ranked) > want or (want == MAX_TOP_K and found > want)
    hits = [Hit(scored, candidate) for scored, candidate in ranked[query.offset : want]]
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
