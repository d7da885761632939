"""Heat: how much a memory is in use, from 0 (untouched for months) to ~1.

    heat      = recency x (0.5 + 0.3 x frequency + 0.2 x importance)
    recency   = 2 ^ (-days since last use / half_life)       half_life 7 days
    frequency = min(1, ln(1 + uses) / ln(1 + 20))            uses = accesses + 2 x reinforcements
    last use  = the latest of created_at, last_reinforced_at, last_accessed_at

Recency dominates: a memory nobody touches cools whatever it was, as a
working set does. The other half says how it was used: a memory recalled or
restated twenty times (saturation: further uses add nothing) starts each
cooling from 0.8 instead of 0.5, and importance adds up to 0.2. A
reinforcement (the agent said it again) counts as two accesses: it is a
deliberate act, a recall hit may be incidental.

Bands, with the times a memory takes to cross them from its last use:

    band     heat       unrated memory, never used   used 20x (importance 0.5)
    hot      >= 0.5     first 1.8 days                first 5.9 days
    warm     >= 0.25    until day 8.8                 until day 12.9
    cold     >= 0.05    until day 25.1                until day 29.2
    frozen   <  0.05    after                         after

`docs/upkeep.md` gives the reasoning; heat enters recall's ranking only
through `heat.ranking_weight` (default 0: it does not).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from memvault_base.errors import InvalidArgument
from memvaultd.model.memory import Memory
from memvaultd.model.records import Records

HOT, WARM, COLD, FROZEN = "hot", "warm", "cold", "frozen"
BANDS: Final = (HOT, WARM, COLD, FROZEN)
# The lowest heat of each band, hottest first; below the last is frozen.
CUTOFFS: Final = ((HOT, 0.5), (WARM, 0.25), (COLD, 0.05))
SATURATION_USES: Final = 20
REINFORCE_USES: Final = 2
SECONDS_PER_DAY: Final = 86_400.0
_SATURATION: Final = math.log1p(SATURATION_USES)


@dataclass(frozen=True)
class HeatSettings:
    half_life_days: float = 7.0
    # score x (1 + ranking_weight x heat). 0 keeps ranking as it was: the
    # LoCoMo figures in docs/benchmarks.md were measured without heat.
    ranking_weight: float = 0.0


def last_use(memory: Memory, *, creation: bool = True) -> float:
    """When the memory was last used; `creation=False` leaves out its
    creation (0.0 for a memory never recalled nor restated)."""
    reinforced = memory.last_reinforced_at if memory.reinforce_count else 0.0
    return max(memory.created_at if creation else 0.0, reinforced, memory.last_accessed_at)


def heat(memory: Memory, now: float, half_life_days: float = HeatSettings.half_life_days,
         *, creation: bool = True) -> float:
    """The memory's heat at `now` (a future last use counts as now).
    `creation=False`: as if being written were not a use (consolidation asks
    whether a memory was *used* lately; `min_age_days` guards new ones)."""
    days = max(0.0, now - last_use(memory, creation=creation)) / SECONDS_PER_DAY
    recency: float = 2.0 ** (-days / half_life_days)
    uses = memory.access_count + REINFORCE_USES * memory.reinforce_count
    frequency = min(1.0, math.log1p(max(0, uses)) / _SATURATION)
    importance = min(1.0, max(0.0, memory.importance))
    return recency * (0.5 + 0.3 * frequency + 0.2 * importance)


def heats(memories: Sequence[Memory], now: float,
          half_life_days: float = HeatSettings.half_life_days) -> npt.NDArray[np.float64]:
    """`heat` of each memory, as array operations: ~3 ms per 100k memories
    against ~150 ms for `heat` one at a time (the listing's sort by heat and
    its band counts read every matching memory). Equal to `heat` within a
    few ulps (NumPy's exp2 and log1p may round differently from the C library's)."""
    reinforcements = _numbers(memories, "reinforce_count", np.int64)
    days = np.maximum(0.0, now - last_uses(memories)) / SECONDS_PER_DAY
    recency = np.exp2(-days / half_life_days)
    uses = np.maximum(0, _numbers(memories, "access_count", np.int64)
                      + REINFORCE_USES * reinforcements)
    frequency = np.minimum(1.0, np.log1p(uses) / _SATURATION)
    importance = np.clip(_numbers(memories, "importance", np.float64), 0.0, 1.0)
    result: npt.NDArray[np.float64] = recency * (0.5 + 0.3 * frequency + 0.2 * importance)
    return result


def last_uses(memories: Sequence[Memory]) -> npt.NDArray[np.float64]:
    """`last_use` of each memory, as array operations."""
    reinforced = np.where(_numbers(memories, "reinforce_count", np.int64) > 0,
                          _numbers(memories, "last_reinforced_at", np.float64), 0.0)
    result: npt.NDArray[np.float64] = np.maximum(
        np.maximum(_numbers(memories, "created_at", np.float64), reinforced),
        _numbers(memories, "last_accessed_at", np.float64))
    return result


def _numbers(memories: Sequence[Memory], name: str, dtype: type) -> npt.NDArray[Any]:
    """Field `name` of each memory: read from its column (`Records`), or
    from each object."""
    if isinstance(memories, Records):
        return memories.numbers(name, dtype)
    return np.fromiter(map(attrgetter(name), memories), dtype=dtype, count=len(memories))


def bands_of(values: npt.NDArray[np.float64]) -> npt.NDArray[np.str_]:
    """`band` of each heat."""
    lowest = np.array([cut for _, cut in CUTOFFS])
    names = np.array([*(name for name, _ in CUTOFFS), FROZEN])
    # CUTOFFS run from the hottest down: count the cutoffs a heat falls under.
    result: npt.NDArray[np.str_] = names[(values[:, None] < lowest[None, :]).sum(axis=1)]
    return result


def band(value: float) -> str:
    for name, lowest in CUTOFFS:
        if value >= lowest:
            return name
    return FROZEN


def check_band(value: str) -> str:
    """`value` if it names a band ('' means any); raises InvalidArgument."""
    if value and value not in BANDS:
        raise InvalidArgument(f"band: unknown band {value!r}; use one of {', '.join(BANDS)}")
    return value
