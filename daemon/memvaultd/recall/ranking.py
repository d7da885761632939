"""Composite ranking: how relevant, how fresh and how confirmed a memory is.

The recall engine over-fetches `OVERFETCH x top_k` candidates from its
channels, each with the L2 distance between its unit vector and the query's,
and `rank` orders them by

    score = similarity x decay x reinforcement
    similarity    = max(0, 1 - distance / 2)              1 at distance 0, 0 at opposite vectors
    decay         = exp(-ln 2 x days / half_life(type))   0.5 after one half-life
    reinforcement = 1 + ln(1 + reinforce_count)           1, 1.69, 2.10, 2.61 at 0, 1, 2, 4
    (x heat_factor = 1 + heat.ranking_weight x heat, when that weight is set;
     the default 0 leaves heat out of the score: upkeep/heat.py)

`days` runs from `last_reinforced_at` (or `created_at` for a memory never
reinforced) to now, and never below 0. Half-lives follow how long each kind of
memory stays true: an episode (what happened) fades in weeks, a fact in
months, a procedure (how to do something) in half a year. `docs/recall.md`
gives the reasoning and the environment overrides.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from memvault_base.errors import InvalidArgument
from memvaultd.model.heat import HeatSettings, heat
from memvaultd.model.memory import EPISODIC, PROCEDURAL, SEMANTIC, Memory

__all__ = [
    "DEFAULT_HALF_LIVES_DAYS",
    "DEFAULT_TOP_K",
    "MAX_TOP_K",
    "OVERFETCH",
    "Scored",
    "check_top_k",
    "decay",
    "half_life_of",
    "half_lives_from_env",
    "l2_from_cosine",
    "rank",
    "reinforcement",
    "score",
    "similarity",
]

# Three hits fill an agent's prompt with what matters without crowding it
# (each memory is up to ~1 KiB of useful text for the embedder).
DEFAULT_TOP_K: Final = 3
# 1000 x OVERFETCH = 8000 candidates: about 8 ms to rank on the development
# machine (24 candidates, the default: 20 us).
MAX_TOP_K: Final = 1000
# Filters and the re-rank discard candidates the vector channel found: eight
# times top_k leaves enough after a filter that keeps one memory in eight.
OVERFETCH: Final = 8
DEFAULT_HALF_LIVES_DAYS: Final[Mapping[str, float]] = {
    EPISODIC: 14.0,
    SEMANTIC: 90.0,
    PROCEDURAL: 180.0,
}
HALF_LIFE_ENV: Final = {
    EPISODIC: "MEMVAULT_DECAY_EPISODIC",
    SEMANTIC: "MEMVAULT_DECAY_SEMANTIC",
    PROCEDURAL: "MEMVAULT_DECAY_PROCEDURAL",
}
SECONDS_PER_DAY: Final = 86_400.0
_LN2: Final = math.log(2.0)


def half_lives_from_env(env: Mapping[str, str] = os.environ) -> dict[str, float]:
    """Half-lives in days per memory type, with `MEMVAULT_DECAY_<TYPE>` overrides.

    An unset or empty variable keeps the default. Raises ValueError naming the
    variable when a value is not a finite number of days above 0.
    """
    half_lives = dict(DEFAULT_HALF_LIVES_DAYS)
    for memory_type, name in HALF_LIFE_ENV.items():
        raw = env.get(name, "").strip()
        if not raw:
            continue
        try:
            days = float(raw)
        except ValueError:
            days = math.nan
        if not math.isfinite(days) or days <= 0:
            raise ValueError(
                f"{name}={raw!r}: expected a half-life in days, a finite number above 0 "
                f"(default {DEFAULT_HALF_LIVES_DAYS[memory_type]:g})"
            )
        half_lives[memory_type] = days
    return half_lives


def similarity(distance: float) -> float:
    """Similarity of two unit vectors `distance` apart (L2, 0..2) as 0..1."""
    return max(0.0, 1.0 - distance / 2.0)


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


def half_life_of(memory_type: str, half_lives: Mapping[str, float]) -> float:
    """The half-life in days of `memory_type`; semantic's for a type not in `half_lives`."""
    return (
        half_lives.get(memory_type) or half_lives.get(SEMANTIC) or DEFAULT_HALF_LIVES_DAYS[SEMANTIC]
    )


def reinforcement(reinforce_count: int) -> float:
    """1 + ln(1 + count): each restatement helps, with diminishing returns."""
    return 1.0 + math.log1p(max(0, reinforce_count))


def l2_from_cosine(cos: NDArray[np.floating[Any]]) -> NDArray[np.floating[Any]]:
    """L2 distances of unit vectors from their cosine similarities.

    |a - b|^2 = 2 - 2 cos for unit vectors. Rounding can push a cosine a few
    ulps above 1 (2 - 2 cos slightly negative), hence the clamp before sqrt.
    """
    distances: NDArray[np.floating[Any]] = np.sqrt(np.maximum(0.0, 2.0 - 2.0 * cos))
    return distances


@dataclass(frozen=True, slots=True)
class Scored:
    """One ranked memory, with the factors of its score (recall explains hits)."""

    memory: Memory
    score: float
    similarity: float
    decay: float
    reinforcement: float
    distance: float
    importance: float = 1.0
    relevance: float = 0.0
    heat: float = 0.0
    heat_factor: float = 1.0


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


def check_top_k(top_k: int | None) -> int:
    """A request's `top_k`: 0 or None means DEFAULT_TOP_K; 1..MAX_TOP_K else InvalidArgument."""
    if not top_k:
        return DEFAULT_TOP_K
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgument(f"top_k: {top_k} is outside 1..{MAX_TOP_K}")
    return top_k


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
