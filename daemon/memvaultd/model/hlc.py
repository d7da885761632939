"""Hybrid logical clocks: timestamps that order operations across devices.

An HLC stamp is (wall milliseconds, counter, device id). It never goes
backwards on one device even when the wall clock does, and it moves past
every stamp the device has seen (`observe`), so "newer" means the same thing
on every device. Device id breaks the remaining ties; merges that pick the
larger stamp are therefore deterministic and order-independent.

A stamp pulled from another device may run at most `MAX_AHEAD_MS` ahead of
this device's wall clock (`ahead_ms`); a version holding one further ahead
is refused whole (`ClockAhead`), never clamped: a clamped stamp would be
each device's own (each clamps to its own clock), so devices would merge the
same operations differently and never converge, and a stamp from a clock
years ahead, taken in, would pull every device's clock along for good. The
refusal is a wait, not a loss: the version is pulled again at each round and
taken once this device's clock is within the bound of it (or the bad
device's version is dealt with); the message says which device's clock is
ahead, and by how much.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

from memvault_base.errors import Unavailable

# One day: a machine whose hardware clock keeps local time and is read as
# UTC (the commonest wrong clock: two systems on one disk) is off by at most
# 14 h, the widest time-zone offset, and still syncs; a clock further ahead
# than that is broken, and what it stamps is refused until it is set right.
MAX_AHEAD_MS = 24 * 3600 * 1000


class ClockAhead(Unavailable):
    """A pulled operation is stamped too far ahead of this device's clock."""


def ahead_ms(stamp: Stamp) -> int:
    """How far `stamp` runs ahead of this device's wall clock (<= 0: not)."""
    return stamp.wall_ms - int(time.time() * 1000)


class Stamp(NamedTuple):
    wall_ms: int
    counter: int
    device: str

    def encode(self) -> list[int | str]:
        return [self.wall_ms, self.counter, self.device]

    @classmethod
    def decode(cls, raw: list[int | str]) -> Stamp:
        wall_ms, counter, device = raw
        return cls(int(wall_ms), int(counter), str(device))


class Clock:
    def __init__(self, device: str, wall_ms: int = 0, counter: int = 0) -> None:
        self.device = device
        self._last = Stamp(wall_ms, counter, device)
        self._lock = threading.Lock()

    @property
    def last(self) -> Stamp:
        return self._last

    def now(self) -> Stamp:
        return self.reserve(1)

    def reserve(self, count: int) -> Stamp:
        """The first of `count` stamps drawn at once, the i-th being the
        first with its counter + i; the clock moves past the last. `init`
        stamps every memory of a vault this way in one step, while writes
        wait for it (`genesis.py`)."""
        with self._lock:
            wall = int(time.time() * 1000)
            if wall > self._last.wall_ms:
                first = Stamp(wall, 0, self.device)
            else:
                first = Stamp(self._last.wall_ms, self._last.counter + 1, self.device)
            self._last = Stamp(first.wall_ms, first.counter + max(count, 1) - 1, self.device)
            return first

    def observe(self, seen: Stamp) -> None:
        """Move past a stamp read from the log or from another device."""
        with self._lock:
            if (seen.wall_ms, seen.counter) > (self._last.wall_ms, self._last.counter):
                self._last = Stamp(seen.wall_ms, seen.counter, self.device)
