"""The daemon's recent events (remember, forget, restore, cache hits and
misses), kept for the Vault page: the daemon streams what happens from the
moment one asks, so the browser's server listens from its start."""

from __future__ import annotations

import threading
from collections import deque

from memvault.client import Client
from memvault.event_stream import EventStream
from memvault.types import Event
from memvault_base.errors import MemvaultError

__all__ = ["RecentEvents"]

# The Vault page's list: a screenful.
KEPT = 50
# Between attempts to listen again after the daemon went away.
RETRY_S = 2.0


class RecentEvents:
    def __init__(self, client: Client) -> None:
        self.client = client
        self._events: deque[Event] = deque(maxlen=KEPT)
        self._stopped = threading.Event()
        self._stream_lock = threading.Lock()
        self._stream: EventStream | None = None
        self._thread = threading.Thread(target=self._listen, name="memvault-ui-events",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def latest(self) -> list[Event]:
        """The newest first."""
        return list(reversed(self._events))

    def stop(self) -> None:
        self._stopped.set()
        with self._stream_lock:
            stream = self._stream
        if stream is not None:
            stream.cancel()
        self._thread.join(timeout=5)

    def _listen(self) -> None:
        while not self._stopped.is_set():
            try:
                with self.client.events() as stream:
                    with self._stream_lock:
                        self._stream = stream
                    for event in stream:
                        self._events.append(event)
            except MemvaultError:
                pass
            finally:
                with self._stream_lock:
                    self._stream = None
            self._stopped.wait(RETRY_S)
