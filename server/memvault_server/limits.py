"""Request rate per token: a token bucket.

Each token name may make `rate` calls per second on average, with bursts of
up to `rate` calls (one second's worth: a device catching up lists and gets
objects in a burst, then goes quiet). A call over the limit is refused with
RESOURCE_EXHAUSTED at once; it costs the server one dictionary lookup, so a
flood does not take the server down. A WatchHead stream counts as one call.
"""

from __future__ import annotations

import threading
import time

from memvault_base.errors import ResourceExhausted

DEFAULT_RATE = 200.0  # calls/s per token: ~10x what a busy sync worker makes


class RateLimiter:
    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens, at)
        self._lock = threading.Lock()

    def charge(self, name: str) -> None:
        """Take one call from `name`'s bucket, or raise `ResourceExhausted`."""
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(name, (self.rate, now))
            tokens = min(self.rate, tokens + (now - at) * self.rate)
            if tokens < 1.0:
                self._buckets[name] = (tokens, now)
                raise ResourceExhausted(
                    f"rate limit of {self.rate:g} calls/s per token exceeded; slow down "
                    f"and retry")
            self._buckets[name] = (tokens - 1.0, now)
