"""The composite score one memory at a time: the reference for `columnar.py`.

`recall/ranking.py` states the formula and holds what both paths share
(`similarity`, `reinforcement`, `half_life_of`, `Scored`); the served path
computes it over the candidates' index columns (`columnar._Score`,
`columnar._best`). Here it is written out per memory, as the spec that path
must match bit for bit (`reference_recall.py`, test_recall_equivalence.py),
with the factors' own tests in test_ranking.py.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping

from memvault_base.errors import InvalidArgument
from memvaultd.model.heat import HeatSettings, heat
from memvaultd.model.memory import Memory
from memvaultd.recall.ranking import (
    MAX_TOP_K,
    SECONDS_PER_DAY,
    Scored,
    half_life_of,
    reinforcement,
    similarity,
)

_LN2 = math.log(2.0)


def decay(
    memory_type: str, last_reinforced_at: float, now: float, half_lives: Mapping[str, float]
) -> float:
    """exp(-ln2 x days / half_life): 1 when just reinforced, 0.5 after one half-life.

    A moment in the future counts as now: a device whose clock ran ahead must
    not make its memories outrank everyone else's. A type missing from
    `half_lives` decays as the default type, semantic.
    """
    days = max(0.0, (now - last_reinforced_at) / SECONDS_PER_DAY)
    return math.exp(-_LN2 * days / half_life_of(memory_type, half_lives))


def score(
    memory: Memory, distance: float, *, now: float, half_lives: Mapping[str, float]
) -> Scored:
    """The composite score of one candidate, with its factors."""
    sim, fresh, boost = _factors(memory, distance, now, half_lives)
    weight = importance_weight(memory.importance)
    return Scored(memory, sim * fresh * boost * weight, sim, fresh, boost, distance, weight, sim)


def importance_weight(importance: float) -> float:
    """0.5 + importance: 1.0 at the default importance 0.5, so memories
    nobody rated rank purely by relevance, freshness and reinforcement; a
    pinned memory (0.9) counts 1.4 times, an unimportant one (0.1) 0.6."""
    return 0.5 + min(1.0, max(0.0, importance))


def _factors(
    memory: Memory, distance: float, now: float, half_lives: Mapping[str, float]
) -> tuple[float, float, float]:
    since = memory.last_reinforced_at or memory.created_at
    # A pinned memory (importance >= 0.9) does not fade: the user said so.
    fresh = 1.0 if memory.pinned else decay(memory.type, since, now, half_lives)
    return (similarity(distance), fresh, reinforcement(memory.reinforce_count))


def rank(
    candidates: Iterable[tuple[Memory, float]],
    *,
    now: float,
    half_lives: Mapping[str, float],
    top_k: int,
    min_score: float | None = None,
    relevance: Mapping[str, float] | None = None,
    heat_settings: HeatSettings | None = None,
) -> list[Scored]:
    """The best `top_k` candidates (memory, L2 distance), best first.

    score = relevance x decay x reinforcement x importance_weight, where
    relevance is the vector similarity, or `relevance[memory.id]` when the
    caller fused several channels (hybrid recall).

    With `heat_settings.ranking_weight` above 0, the score is also
    multiplied by 1 + weight x heat. Every result carries its heat.

    Candidates scoring under `min_score` are dropped; fewer than `top_k` (or
    none) is a valid answer and is never padded. Equal scores fall back to the
    smaller distance, then the newer `created_at`, then the smaller id, so the
    same inputs always give the same order.
    """
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgument(f"top_k: {top_k} is outside 1..{MAX_TOP_K}")
    if min_score is not None and math.isnan(min_score):
        raise InvalidArgument("min_score: NaN is not a score")
    floor = -math.inf if min_score is None else min_score
    heats = heat_settings or HeatSettings()
    weight_of_heat = heats.ranking_weight
    # Sort plain tuples and build a Scored only for the winners: a frozen
    # dataclass per candidate made 8000 candidates cost 13 ms instead of 7.6.
    # The candidate's position ends each key, so two memories never compare.
    keyed = []
    for position, (memory, distance) in enumerate(candidates):
        sim, fresh, boost = _factors(memory, distance, now, half_lives)
        weight = importance_weight(memory.importance)
        relevant = sim if relevance is None else relevance[memory.id]
        total = relevant * fresh * boost * weight
        if weight_of_heat:
            total *= 1.0 + weight_of_heat * heat(memory, now, heats.half_life_days)
        if total >= floor:
            keyed.append((-total, distance, -memory.created_at, memory.id, position,
                          memory, sim, fresh, boost, weight, relevant))  # fmt: skip
    # nsmallest keeps a heap of top_k: O(n log k) for n = OVERFETCH x top_k.
    # Heat is computed again for the winners only (~1 us each).
    return [
        Scored(memory, -neg, sim, fresh, boost, distance, weight, relevant,
               hot := heat(memory, now, heats.half_life_days), 1.0 + weight_of_heat * hot)
        for neg, distance, _, _, _, memory, sim, fresh, boost, weight, relevant
        in heapq.nsmallest(top_k, keyed)
    ]
