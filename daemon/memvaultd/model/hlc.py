"""Hybrid logical clocks: timestamps that order operations across devices.

An HLC stamp is (wall milliseconds, counter, device id). It never goes
backwards on one device even when the wall clock does, and it moves past
every stamp the device has seen (`observe`), so "newer" means the same thing
on every device. Device id breaks the remaining ties; merges that pick the
larger stamp are therefore deterministic and order-independent.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple


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
