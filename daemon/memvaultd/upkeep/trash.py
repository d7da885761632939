"""The trash's retention: how long a forgotten memory can be restored, and
which ones are due to be purged.

`forget` (the CLI, MCP, the sweep, a watched file deleted) moves a memory to
the trash (`vault/state.py`); it is purged for good `retention_days` after
it was forgotten, by the background upkeep of whichever device runs first
(`app/sweep_schedule.py`), and the purge syncs like any write. This module
only decides; the vault writes the purges through the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memvaultd.model.heat import SECONDS_PER_DAY
from memvaultd.model.memory import Memory

# 30 days: what Gmail's trash keeps, and macOS's "remove items from the Trash
# after 30 days"; long enough to notice what an agent was misled into forgetting.
DEFAULT_RETENTION_DAYS = 30.0


@dataclass(frozen=True)
class TrashSettings:
    # Days a forgotten memory stays restorable; 0 purges it at the next
    # background check (within 10 minutes).
    retention_days: float = DEFAULT_RETENTION_DAYS

    @property
    def retention_s(self) -> float:
        return self.retention_days * SECONDS_PER_DAY


def purge_at(memory: Memory, settings: TrashSettings) -> float:
    """When the trashed `memory` is due to be purged (seconds since the epoch)."""
    return memory.trashed_at + settings.retention_s


def due(trash: Iterable[Memory], now: float, settings: TrashSettings) -> list[str]:
    """Ids of the memories in `trash` whose retention is over at `now`, oldest first."""
    expired = [memory for memory in trash if purge_at(memory, settings) <= now]
    return [memory.id for memory in sorted(expired, key=lambda m: (m.trashed_at, m.id))]
