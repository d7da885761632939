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
Given the vault's `Records` (`model/records.py`), it reads the rules and
the risk of those restored from a snapshot from their columns, and makes a
`Memory` only of those the columns let through, which it then decides one
at a time with those held as objects: a dry run over 100k restored
memories took 15-16 ms against 372-398 ms making every one, under the
vault's write lock (`scripts/bench_list.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from memvaultd.model import memory as m
from memvaultd.model.heat import (
    SECONDS_PER_DAY,
    HeatSettings,
    band,
    heat,
    heats,
    last_use,
    last_uses,
)
from memvaultd.model.memory import PINNED_IMPORTANCE, Memory
from memvaultd.model.records import Records

STALENESS_DAYS: Final = 90.0
# The columns' risk lets a memory through to be decided one at a time when
# within this of the threshold: `heats` may differ from `heat` by a few ulps.
MARGIN: Final = 1e-9


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
         heat_settings: HeatSettings, threshold: float | None = None, *,
         get: Callable[[str], Memory | None] | None = None) -> SweepPlan:
    """What a sweep at `now` forgets, in id order (the same on every device).
    `get` finds a swept consolidated memory's sources when `memories` are
    `Records` (else they are looked up among `memories`)."""
    limit = settings.threshold if threshold is None else threshold
    if isinstance(memories, Records):
        # Those held as objects already (written since the start) are
        # decided one at a time: reading a field of each object once per
        # rule cost 100k of them 2-3 x the single pass.
        in_table = memories.at >= 0
        columns = memories.taken(np.flatnonzero(in_table))
        exempt_rows = _exempt_rows(columns, now, settings.min_age_days)
        open_rows = ~exempt_rows & (_expired_rows(columns, now)
                                    | (_risks(columns, now, heat_settings) > limit - MARGIN))
        chosen = [*columns.taken(np.flatnonzero(open_rows)),
                  *memories.taken(np.flatnonzero(~in_table))]
        considered, exempt = len(memories), int(exempt_rows.sum())
        by_id = {memory.id: memory for memory in chosen}
        find = get or _finder(memories)
    else:
        by_id = {memory.id: memory for memory in memories}
        considered, exempt, find = len(by_id), 0, by_id.get
    swept: list[Swept] = []
    for memory in sorted(by_id.values(), key=lambda mem: mem.id):
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
    # Counted as exempt (archived) above; they go with their summary.
    sources = _sources_of(swept, find, now, heat_settings)
    return SweepPlan(swept + sources, considered, exempt - len(sources))


Flags = npt.NDArray[np.bool_]


def _finder(records: Records) -> Callable[[str], Memory | None]:
    """A record by id, made only when asked for."""
    places = {memory_id: i for i, memory_id in enumerate(records.ids())}

    def find(memory_id: str) -> Memory | None:
        place = places.get(memory_id)
        return None if place is None else records[place]

    return find


def _exempt_rows(records: Records, now: float, min_age_days: float) -> Flags:
    """`exemption` of each record, from the columns."""
    exempt: Flags = ((records.numbers("importance") >= PINNED_IMPORTANCE)
                     | records.numbers("protected")
                     | records.mapped("type", m.PROCEDURAL.__eq__, np.bool_)
                     | records.mapped("superseded_by", bool, np.bool_)
                     | records.mapped("tier", m.ARCHIVED.__eq__, np.bool_)
                     | (now - records.numbers("created_at") < min_age_days * SECONDS_PER_DAY))
    return exempt


def _expired_rows(records: Records, now: float) -> Flags:
    expires = records.numbers("expires_at")
    expired: Flags = (expires > 0) & (expires <= now)
    return expired


def _risks(records: Records, now: float, heat_settings: HeatSettings
           ) -> npt.NDArray[np.float64]:
    """`risk` of each record, as array operations."""
    days = np.maximum(0.0, now - last_uses(records)) / SECONDS_PER_DAY
    staleness = 1.0 - np.exp(-days / STALENESS_DAYS)
    importance = np.clip(records.numbers("importance"), 0.0, 1.0)
    found: npt.NDArray[np.float64] = ((1.0 - heats(records, now, heat_settings.half_life_days))
                                      * staleness * (1.0 - importance))
    return found


def _sources_of(swept: list[Swept], find: Callable[[str], Memory | None], now: float,
                heat_settings: HeatSettings) -> list[Swept]:
    """The archived sources of the swept consolidated memories, unless a
    rule other than "archived" keeps them (pinned or protected since)."""
    out: list[Swept] = []
    taken: set[str] = set()  # two summaries may share a source (two devices)
    for summary in swept:
        for source_id in summary.memory.consolidated_from:
            source = find(source_id)
            if (source is not None and source.tier == m.ARCHIVED and source_id not in taken
                    and not exemption(source, now, 0.0, as_source=True)):
                taken.add(source_id)
                out.append(Swept(source, summary.risk,
                                 heat(source, now, heat_settings.half_life_days),
                                 f"source of swept consolidated memory {summary.memory.id}"))
    return out
