"""The puts `init` has yet to log: one per memory the device holds
(`Replication.genesis`), each made only when it is logged.

`genesis` cuts them under the write lock, and every write waits for that
hold. Made there, they would cost the hold a stamp (`Clock.now`, a lock
each), an id and an `Operation` per memory and a copy of every vector
(`export`): 1.1-1.3 s at 155k memories, 11.9 s at 1M, which a remember
waited whole. The cut takes only what fixes the puts: each memory as it is, the
matrix and its row (rows are never rewritten, `MemoryIndex.cut`), and one
block of stamps (`Clock.reserve`) for the memories that carry none: 74-90
ms at 155k, 0.80-0.95 s at 1M (docs/benchmarks.md). The rest is done a
chunk at a time, between writes.

A put restates a memory as this device holds it, so it carries the time of
the newest change it holds of that memory (its newest field stamp, under
this device's id), not the time it is made: a put made now would win over
every change another device made before it, and after a re-push (a move to
a fresh chain) a memory forgotten on one device would come back from
another's put. A write after the cut is stamped later than anything the
cut holds, so its fields still win over the put's.
What the cut holds meanwhile is the matrix it read (never a copy): if the
vault grows or compacts during `init`, that old matrix lives until the
last put is made, as the copy `export` made did before.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, count, islice
from operator import attrgetter

import numpy as np

from memvaultd.crypto.entropy import drawing, new_id
from memvaultd.index.half import Half
from memvaultd.index.layer import Layer
from memvaultd.index.memory_index import Rows
from memvaultd.model.hlc import Clock, Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import PUT, Operation
from memvaultd.model.vector import Vector


@dataclass(frozen=True, slots=True)
class _Part:
    """One layer's memories, as cut: memory i's vector is `matrix[rows[i]]`."""

    layer: str
    memories: Sequence[Memory]
    matrix: Vector | Half
    rows: Rows


class PendingPuts:
    """Puts by memory id, in the order of the cut; empty when no `init` runs."""

    def __init__(self, parts: list[_Part] | None = None, first: Stamp | None = None,
                 stamps: Mapping[str, Mapping[str, Stamp]] | None = None) -> None:
        self._parts = parts or []
        self._stamps = stamps or {}
        self._starts = [0, *accumulate(len(part.memories) for part in self._parts)][:-1]
        self._first = first
        ids = chain.from_iterable(map(attrgetter("id"), part.memories) for part in self._parts)
        self._pending: dict[str, int] = dict(zip(ids, count()))

    @classmethod
    def cut(cls, layers: Mapping[str, Layer], clock: Clock,
            stamps: Mapping[str, Mapping[str, Stamp]] | None = None) -> PendingPuts:
        """A put of every memory of `layers`, now; `stamps` are the field
        stamps of each memory (`VaultState.stamps`), read when a put is made
        (no copy under the lock). The caller holds the write lock."""
        parts = [_Part(name, *layer.index.live_rows()) for name, layer in layers.items()]
        return cls(parts, clock.reserve(sum(len(part.memories) for part in parts)), stamps)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    @drawing()
    def take(self, names: Iterable[str]) -> list[Operation]:
        """The puts still pending of `names`, no longer pending."""
        pending = self._pending
        return [self._put(pending.pop(name)) for name in names if name in pending]

    @drawing()
    def next(self, size: int) -> list[Operation]:
        """The first `size` puts still pending, in order, no longer pending."""
        return self.take(list(islice(self._pending, size)))

    def _put(self, i: int) -> Operation:
        assert self._first is not None  # an empty PendingPuts has nothing to make
        k = bisect_right(self._starts, i) - 1
        part, j = self._parts[k], i - self._starts[k]
        memory = part.memories[j]
        stamp = Stamp(self._first.wall_ms, self._first.counter + i, self._first.device)
        held = self._stamps.get(memory.id)
        if held:
            # Never later than the stamp reserved at the cut: a write the put
            # did not see (logged after it, `VaultCore.genesis_ahead`) stays newer.
            newest = max(held.values())
            stamp = min(stamp, Stamp(newest.wall_ms, newest.counter, self._first.device))
        return Operation(new_id(), PUT, stamp, memory=memory,
                         vector=part.matrix[part.rows[j]].astype(np.float32),
                         layer=part.layer)
