"""The forgetting sweep: which memories to tombstone, and why.

    risk       = (1 - heat) x staleness x (1 - importance)
    staleness  = 1 - exp(-days since last use / 90)      0.28 at 30 days, 0.63 at 90, 0.95 at 270

A memory is swept when its risk is over `sweep.threshold` (default 0.5)
and no rule keeps it. With the default, a memory nobody rated (importance
0.5) can approach but never pass 0.5: only memories rated below the default
are ever swept, after 74 days unused at importance 0.1, 89 at 0.2, 113 at
0.3, 162 at 0.4. Forgetting is irreversible, so the default forgets only what an
agent said was minor; `threshold = 0.4` also sweeps unrated memories unused
for ~5 months. An expired memory (never recalled again) is swept whatever
its risk, under the same rules.

Never swept, whatever the risk:

- pinned memories (importance >= 0.9),
- procedural memories (instructions: how to do things),
- memories marked `protected`,
- memories younger than `sweep.min_age_days` (default 30),
- superseded memories (the history `Get` returns) and archived memories
  (the sources a consolidated memory points to) — except that sweeping a
  consolidated memory also sweeps its archived sources: they were kept only
  as its provenance.

This module only decides; the vault writes the forgets through the log.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from memvaultd.model import memory as m
from memvaultd.model.heat import SECONDS_PER_DAY, HeatSettings, band, heat, last_use
from memvaultd.model.memory import Memory

STALENESS_DAYS: Final = 90.0


@dataclass(frozen=True)
class SweepSettings:
    threshold: float = 0.5
    min_age_days: float = 30.0
    # How often the daemon sweeps in the background; 0 turns it off. Runs are
    # counted per vault (any device's sweep counts), so a laptop that starts
    # every morning still sweeps once a day, and two devices do not both.
    every_hours: float = 24.0


@dataclass(frozen=True)
class Swept:
    memory: Memory
    risk: float
    heat: float
    reason: str


@dataclass(frozen=True)
class SweepPlan:
    swept: list[Swept]
    considered: int
    exempt: int


def risk(memory: Memory, now: float, heat_value: float) -> float:
    days = max(0.0, now - last_use(memory)) / SECONDS_PER_DAY
    staleness = 1.0 - math.exp(-days / STALENESS_DAYS)
    return (1.0 - heat_value) * staleness * (1.0 - min(1.0, max(0.0, memory.importance)))


def exemption(memory: Memory, now: float, min_age_days: float, *,
              as_source: bool = False) -> str:
    """The rule that keeps `memory` out of every sweep, or '' if none does.
    `as_source`: it is swept as the source of a swept consolidated memory."""
    if memory.pinned:
        return "pinned"
    if memory.protected:
        return "protected"
    if memory.type == m.PROCEDURAL:
        return "procedural"
    if memory.superseded_by:
        return "superseded"
    if as_source:
        return ""
    if memory.tier == m.ARCHIVED:
        return "archived"
    if now - memory.created_at < min_age_days * SECONDS_PER_DAY:
        return "younger than min_age_days"
    return ""


def plan(memories: Iterable[Memory], now: float, settings: SweepSettings,
         heat_settings: HeatSettings, threshold: float | None = None) -> SweepPlan:
    """What a sweep at `now` forgets, in id order (the same on every device)."""
    limit = settings.threshold if threshold is None else threshold
    swept: list[Swept] = []
    considered = exempt = 0
    by_id = {memory.id: memory for memory in memories}
    for memory in sorted(by_id.values(), key=lambda mem: mem.id):
        considered += 1
        if exemption(memory, now, settings.min_age_days):
            exempt += 1
            continue
        hot = heat(memory, now, heat_settings.half_life_days)
        if memory.is_expired(now):
            days = (now - memory.expires_at) / SECONDS_PER_DAY
            swept.append(Swept(memory, 1.0, hot, f"expired {days:.0f} days ago"))
            continue
        danger = risk(memory, now, hot)
        if danger > limit:
            unused = (now - last_use(memory)) / SECONDS_PER_DAY
            swept.append(Swept(memory, danger, hot, (
                f"risk {danger:.2f} > {limit:.2f}: importance {memory.importance:.2f}, "
                f"unused for {unused:.0f} days, {band(hot)} (heat {hot:.2f})")))
    # The loop counted these as exempt (archived); they go with their summary.
    sources = _sources_of(swept, by_id, now, heat_settings)
    return SweepPlan(swept + sources, considered, exempt - len(sources))


def _sources_of(swept: list[Swept], by_id: dict[str, Memory], now: float,
                heat_settings: HeatSettings) -> list[Swept]:
    """The archived sources of the swept consolidated memories, unless a
    rule other than "archived" keeps them (pinned or protected since)."""
    out: list[Swept] = []
    taken: set[str] = set()  # two summaries may share a source (two devices)
    for summary in swept:
        for source_id in summary.memory.consolidated_from:
            source = by_id.get(source_id)
            if (source is not None and source.tier == m.ARCHIVED and source_id not in taken
                    and not exemption(source, now, 0.0, as_source=True)):
                taken.add(source_id)
                out.append(Swept(source, summary.risk,
                                 heat(source, now, heat_settings.half_life_days),
                                 f"source of swept consolidated memory {summary.memory.id}"))
    return out
