"""Composite ranking: how relevant, how fresh and how confirmed a memory is.

The recall engine over-fetches `OVERFETCH x top_k` candidates from its
channels, each with the L2 distance between its unit vector and the query's
and its relevance (the fused score of `hybrid.py`; the similarity alone in
vector mode), and `columnar.ranked` orders them by

    score = relevance x decay x reinforcement x importance_weight
    similarity    = max(0, 1 - distance / 2)              1 at distance 0, 0 at opposite vectors
    decay         = exp(-ln 2 x days / half_life(type))   0.5 after one half-life; 1 pinned
    reinforcement = 1 + ln(1 + reinforce_count)           1, 1.69, 2.10, 2.61 at 0, 1, 2, 4
    importance_weight = 0.5 + importance (within 0..1)    1 at the default 0.5, 1.4 pinned (0.9)
    (x heat_factor = 1 + heat.ranking_weight x heat, when that weight is set;
     the default 0 leaves heat out of the score: upkeep/heat.py)

`days` runs from `last_reinforced_at` (or `created_at` for a memory never
reinforced) to now, and never below 0: a device whose clock ran ahead must
not make its memories outrank everyone else's. Half-lives follow how long
each kind of memory stays true: an episode (what happened) fades in weeks, a
fact in months, a procedure (how to do something) in half a year; a type
without one decays as semantic (`half_life_of`). Equal scores fall back to
the smaller distance, then the newer `created_at`, then the smaller id;
`min_score` drops what scores below it and nothing pads the rest.
`docs/recall.md` gives the reasoning and the environment overrides;
`tests/reference_recall.py` writes the score out one memory at a time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from memvault_base.errors import InvalidArgument
from memvaultd.model.memory import EPISODIC, PROCEDURAL, SEMANTIC, Memory

__all__ = [
    "DEFAULT_HALF_LIVES_DAYS",
    "DEFAULT_TOP_K",
    "MAX_TOP_K",
    "OVERFETCH",
    "Scored",
    "check_top_k",
    "half_life_of",
    "half_lives_from_env",
    "l2_from_cosine",
    "reinforcement",
    "similarity",
]

# Three hits fill an agent's prompt with what matters without crowding it
# (each memory is up to ~1 KiB of useful text for the embedder).
DEFAULT_TOP_K: Final = 3
# 1000 x OVERFETCH = 8000 candidates: about 8 ms to rank one memory at a time
# on the development machine (24 candidates, the default: 20 us).
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


def check_top_k(top_k: int | None) -> int:
    """A request's `top_k`: 0 or None means DEFAULT_TOP_K; 1..MAX_TOP_K else InvalidArgument."""
    if not top_k:
        return DEFAULT_TOP_K
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgument(f"top_k: {top_k} is outside 1..{MAX_TOP_K}")
    return top_k
