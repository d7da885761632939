"""A small in-process event bus behind the `Events` stream.

Each subscriber gets its own bounded queue. A subscriber that stops reading
loses its oldest events rather than slowing the daemon: 1,000 events is
several seconds of a busy agent, far more than a live reader lags.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

_QUEUE_SIZE = 1000
# The events that name a memory (its id); a caller that declared its access
# hears only of the memories it may see (`Vault.shows_event`).
MEMORY_EVENTS = frozenset({"remember", "forget", "restore"})


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    query: str = ""
    id: str = ""
    at: float = 0.0


class Subscription:
    def __init__(self, bus: EventBus, types: frozenset[str]) -> None:
        self._bus = bus
        self.types = types
        self.queue: queue.Queue[Event] = queue.Queue(_QUEUE_SIZE)

    def get(self, timeout: float) -> Event | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._bus.unsubscribe(self)

    def offer(self, event: Event) -> None:
        if self.types and event.type not in self.types:
            return
        while True:
            try:
                self.queue.put_nowait(event)
                return
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    self.queue.get_nowait()


class EventBus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[Subscription] = []

    def subscribe(self, types: Iterable[str] = ()) -> Subscription:
        sub = Subscription(self, frozenset(types))
        with self._lock:
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)

    def publish(self, type: str, *, query: str = "", id: str = "") -> None:
        if not self._subscribers:  # the common case: nobody listens, no work
            return
        event = Event(type, query, id, time.time())
        with self._lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.offer(event)
