"""Request rate per account: a token bucket.

Each account may make `rate` calls per second on average, with bursts of up
to `rate` calls (one second's worth: a device catching up lists and gets
objects in a burst, then goes quiet). All tokens of an account draw on its
one bucket, however their headers were spelled. A call over the limit is
refused with RESOURCE_EXHAUSTED before its message is read (`gate.py`); it
costs the server one dictionary lookup, so a flood does not take the server
down. A WatchHead stream counts as one call.

The table holds only accounts that called in the last second or so: a
bucket left alone for one second (burst / rate) is full again, exactly as if
it had never been made, so an entry that old is dropped. Once a second the
table is swept, so it holds at most the accounts seen in about two seconds,
whatever number of accounts the tokens name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memvault_base.errors import ResourceExhausted

log = logging.getLogger("memvault_server.limits")

DEFAULT_RATE = 200.0  # calls/s per account: ~10x what a busy sync worker makes


class RateLimiter:
    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self._full_after = 1.0  # s for an empty bucket of `rate` to refill at `rate`/s
        self._buckets: dict[str, tuple[float, float]] = {}  # account -> (tokens, at)
        self._swept = clock()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)

    def charge(self, account: str) -> None:
        """Take one call from `account`'s bucket, or raise `ResourceExhausted`."""
        now = self.clock()
        with self._lock:
            if now - self._swept >= self._full_after:
                self._sweep(now)
            tokens, at = self._buckets.get(account, (self.rate, now))
            tokens = min(self.rate, tokens + (now - at) * self.rate)
            if tokens < 1.0:
                self._buckets[account] = (tokens, now)
                raise ResourceExhausted(
                    f"rate limit of {self.rate:g} calls/s for account {account} exceeded; "
                    f"slow down and retry")
            self._buckets[account] = (tokens - 1.0, now)

    def _sweep(self, now: float) -> None:
        before = len(self._buckets)
        self._buckets = {account: (tokens, at) for account, (tokens, at) in self._buckets.items()
                         if now - at < self._full_after}
        self._swept = now
        if len(self._buckets) < before:
            log.debug("rate limiter: dropped %d idle accounts, %d kept",
                      before - len(self._buckets), len(self._buckets))
