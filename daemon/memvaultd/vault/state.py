"""The vault's state as a function of the operations applied to it.

Every device applies its own operations and the ones it pulls from the
remote; devices that applied the same set of operations hold the same
memories, whatever the order they arrived in, because each kind merges
without regard to order:

- an operation id is applied once (`seen`): replays and retries are no-ops;
- `put` and `update` set fields last-writer-wins per field, by hybrid
  logical clock (device id breaks ties) — the stamps live in `stamps`
  (`model/stamps.py`);
- `reinforce` and `access` count distinct operations (a sum) and keep the
  latest time (a max);
- `trash` and `restore` write one register of the memory, its trash state
  (`trashed_at`, `trashed_by`), last-writer-wins by stamp like any field: a
  trash sets it to (when, by what), a restore clears it. Both fields take
  the operation's stamp together, so they never come apart. A restore made
  after its device saw the trash carries a later stamp (the clock moved past
  the trash's) and wins; a trash on one device and a restore on another,
  neither having seen the other, end on every device as the one with the
  later stamp says. A put of the same memory again (an import on two
  devices) merges the register like its other fields;
- where a memory lives follows from that register alone: in `memories`
  while it is not trashed, in `trash` while it is. Updates, reinforcements,
  access marks and supersession apply to it in either place (one made on a
  device that had not seen the trash yet is kept, and comes back with a
  restore), so the order in which a trash and they arrive changes nothing.
  Every read goes through `memories` and never sees the trash;
- `forget` is the purge, a tombstone: it wins over every put, update, trash
  or restore, before or after, on every device, and cannot be undone. It is
  the only forgetting that logs and snapshots written before the trash
  existed hold, and they mean by it what it means now;
- `upkeep` (a sweep or consolidation ran) keeps the latest time per kind.

Operations that refer to a memory (update, reinforce, trash, restore,
supersession) are applied after the put that created it: each device pushes
its operations in the order it made them, and a device only refers to
memories it holds. One that finds no memory (purged) changes nothing.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Mapping, Sequence, Set
from dataclasses import fields
from typing import cast

import numpy as np

from memvaultd.index.layer import Layer
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.op_ids import OpIds
from memvaultd.model.operations import (
    ACCESS,
    FORGET,
    MEMORIES,
    PUT,
    REINFORCE,
    RESTORE,
    TRASH,
    TRASH_LAYER,
    TUPLE_FIELDS,
    TURNS,
    UPDATE,
    UPKEEP,
    Operation,
)
from memvaultd.model.records import Records
from memvaultd.model.stamps import FieldStamps
from memvaultd.model.vector import Vector
from memvaultd.storage.snapshot_body import Rows, collector_paused

MEMORY_FIELDS = tuple(f.name for f in fields(Memory))
# Fields a put sets and an update may change; counters merge by their own rule.
_LWW_FIELDS = frozenset(MEMORY_FIELDS) - {"id", "reinforce_count", "access_count",
                                          "last_reinforced_at", "last_accessed_at"}
# The trash register: written by a put, a trash or a restore, never by an update.
TRASH_FIELDS = ("trashed_at", "trashed_by")
_UPDATABLE = _LWW_FIELDS - set(TRASH_FIELDS)


class VaultState:
    def __init__(self, dimension: int) -> None:
        trash = Layer(dimension)
        # The trash is listed, never searched: no IVF for it (a sweep past
        # 20k memories would otherwise build one in the background, 2.3 s
        # of a core at 100k, `index/ivf.py`).
        trash.index.ivf_threshold = sys.maxsize
        self.layers = {MEMORIES: Layer(dimension), TURNS: Layer(dimension), TRASH_LAYER: trash}
        self.tombstones: set[str] = set()
        self.seen = OpIds()
        self.stamps = FieldStamps()
        # "sweep" / "consolidate" -> when it last ran, on any device.
        self.upkeep: dict[str, float] = {}
        # The memories and turns an operation named, and the operations
        # applied, since `take_changes` (a full snapshot's cut): what a delta
        # holds (`vault/deltas.py`). Ordered: new ones follow in a delta
        # in the order they came.
        self.changed: dict[str, None] = {}
        self.seen_since: list[str] = []

    @property
    def memories(self) -> Layer:
        return self.layers[MEMORIES]

    @property
    def trash(self) -> Layer:
        return self.layers[TRASH_LAYER]

    def find(self, memory_id: str) -> tuple[Layer, Memory] | None:
        """The memory `memory_id`, live or in the trash, and the layer holding it."""
        for layer in (self.layers[MEMORIES], self.layers[TRASH_LAYER]):
            memory = layer.get(memory_id)
            if memory is not None:
                return layer, memory
        return None

    def apply(self, op: Operation) -> bool:
        """Apply `op` unless it was applied before; returns whether it was new."""
        if op.op_id in self.seen:
            return False
        self.seen.add(op.op_id)
        self.seen_since.append(op.op_id)
        self.changed.update(dict.fromkeys(_named(op)))
        if op.kind == PUT:
            self._put(op)
        elif op.kind == UPDATE:
            self._update(op)
        elif op.kind == REINFORCE:
            found = self.find(op.target)
            if found is not None:
                layer, old = found
                layer.recount(old.copy(
                    reinforce_count=old.reinforce_count + 1,
                    last_reinforced_at=max(old.last_reinforced_at, op.at)))
        elif op.kind in (TRASH, RESTORE):
            self._trash_register(op)
        elif op.kind == FORGET:
            self.memories.remove(op.target)
            self.trash.remove(op.target)
            self.tombstones.add(op.target)
            self.stamps.discard(op.target)
        elif op.kind == UPKEEP:
            self.upkeep[op.target] = max(self.upkeep.get(op.target, 0.0), op.at)
        elif op.kind == ACCESS:
            for memory_id in op.ids:
                found = self.find(memory_id)
                if found is not None:
                    layer, old = found
                    layer.recount(old.copy(
                        access_count=old.access_count + 1,
                        last_accessed_at=max(old.last_accessed_at, op.at)))
        return True

    def _put(self, op: Operation) -> None:
        assert op.memory is not None and op.vector is not None
        new = op.memory
        if new.id in self.tombstones:
            return
        if op.layer == TURNS:
            layer = self.layers[TURNS]
            old = layer.get(new.id)
        else:
            found = self.find(new.id)
            layer, old = found if found is not None else (self._home(new), None)
        if old is None:
            layer.put(new, op.vector)
            self.stamps.put(new.id, op.stamp)
        else:  # the same memory put twice (an import on two devices): merge
            changes = {name: getattr(new, name) for name in _LWW_FIELDS
                       if self._newer(new.id, name, op.stamp)}
            changes["reinforce_count"] = max(old.reinforce_count, new.reinforce_count)
            changes["access_count"] = max(old.access_count, new.access_count)
            changes["last_reinforced_at"] = max(old.last_reinforced_at, new.last_reinforced_at)
            changes["last_accessed_at"] = max(old.last_accessed_at, new.last_accessed_at)
            self._place(layer, old.copy(**changes), op.vector if "text" in changes else None)
        if new.supersedes and op.layer != TURNS:
            found = self.find(new.supersedes)
            if found is not None and self._newer(new.supersedes, "superseded_by", op.stamp):
                holder, older = found
                holder.update(older.copy(superseded_by=new.id))

    def _update(self, op: Operation) -> None:
        found = self.find(op.target)
        if found is None:
            return
        layer, old = found
        changes = {name: value for name, value in (op.fields or {}).items()
                   if name in _UPDATABLE and self._newer(op.target, name, op.stamp)}
        if not changes:
            return
        for name in TUPLE_FIELDS:
            if name in changes:
                changes[name] = tuple(changes[name])
        layer.update(old.copy(**changes), op.vector if "text" in changes else None)

    def _trash_register(self, op: Operation) -> None:
        """A trash or a restore: the register takes the op's value if its stamp is newer."""
        found = self.find(op.target)
        if found is None:
            return
        layer, old = found
        if not self._newer(op.target, TRASH_FIELDS[0], op.stamp):
            return
        self.stamps.set(op.target, TRASH_FIELDS[1], op.stamp)
        at, by = (op.at, op.by) if op.kind == TRASH else (0.0, "")
        self._place(layer, old.copy(trashed_at=at, trashed_by=by), None)

    def _home(self, memory: Memory) -> Layer:
        """Where a memory of the memories layer lives: the trash while it is trashed."""
        return self.layers[TRASH_LAYER] if memory.trashed else self.layers[MEMORIES]

    def _place(self, layer: Layer, memory: Memory, vector: Vector | None) -> None:
        """Write `memory`, now held by `layer`, where its trash register puts it."""
        home = layer if layer is self.layers[TURNS] else self._home(memory)
        if home is layer:
            layer.update(memory, vector)
            return
        if vector is None:
            vector = layer.index.vector(memory.id)
            assert vector is not None  # the layer holds it
        layer.remove(memory.id)
        home.put(memory, vector)

    def _newer(self, memory_id: str, name: str, stamp: Stamp) -> bool:
        """Whether `stamp` beats the field's stamp; if so, it becomes the field's."""
        current = self.stamps.of(memory_id, name)
        if current is not None and stamp <= current:
            return False
        self.stamps.set(memory_id, name, stamp)
        return True

    def restore_rows(self, memories: Sequence[Memory], vectors: Rows | list[Vector],
                     turns: Sequence[Memory], turn_vectors: Rows | list[Vector],
                     tombstones: set[str], seen: Set[str],
                     stamps: Mapping[str, Mapping[str, Stamp]]) -> None:
        """Take a snapshot's state: the same layers as a `put` of each memory
        in order, built in bulk (`Layer.restore`), with the collector paused
        while they are: 100k memories in ~1.4 s against ~3.4 s. A snapshot
        holds the trash among its memories (`trashed_at` set): they go to
        the trash layer, as their puts would. `vectors` row i is memory i's;
        a matrix the index can keep (`restore_matrix`) is not copied when the
        live memories come first (as a snapshot's cut lays them out)."""
        live, trashed = _parted(memories, vectors)
        with collector_paused():
            for name, (part, rows) in ((MEMORIES, live), (TURNS, (turns, turn_vectors)),
                                       (TRASH_LAYER, trashed)):
                # float16 rows (a large vault's): the index keeps or converts them.
                self.layers[name].restore(part, cast(Vector, rows))
            self.tombstones = tombstones
            self.seen = seen if isinstance(seen, OpIds) else OpIds(seen)
            # Taken as given, like the sets: the caller gives them up.
            self.stamps = stamps if isinstance(stamps, FieldStamps) else FieldStamps(stamps)
            self.changed, self.seen_since = {}, []
            # What was just built lives as long as the vault: frozen, the
            # collector never walks it again. Left young, the collections
            # the log replay's allocations trigger walked it all (and the
            # `gc.collect` before the vault's own freeze took 0.2 s at 100k).
            gc.freeze()

    def take_changes(self) -> tuple[list[str], list[str]]:
        """The memory ids and operation ids since the last take, and a new start."""
        changed, seen = list(self.changed), self.seen_since
        self.changed, self.seen_since = {}, []
        return changed, seen

    def give_back(self, changed: list[str], seen: list[str]) -> None:
        """Count `take_changes`'s changes again, before those made since (a
        snapshot that took them was given up)."""
        self.changed = dict.fromkeys(changed) | self.changed
        self.seen_since = seen + self.seen_since

    def finish_restore(self) -> None:
        """Build what `restore_rows` left to be built off the path to serving:
        each layer's keyword index (`Layer.finish_restore`)."""
        for layer in self.layers.values():
            layer.finish_restore()


def _named(op: Operation) -> tuple[str, ...]:
    """The memories (or turns) whose record `op` may change."""
    if op.kind == PUT:
        assert op.memory is not None
        return (op.memory.id, op.memory.supersedes) if op.memory.supersedes else (op.memory.id,)
    if op.kind == ACCESS:
        return tuple(op.ids or ())
    if op.kind == UPKEEP:
        return ()
    return (op.target,)


_Part = tuple[Records, "Rows | list[Vector]"]


def _parted(memories: Sequence[Memory], vectors: Rows | list[Vector]) -> tuple[_Part, _Part]:
    """The live memories and their vectors, and the trashed ones and theirs;
    a slice of `vectors` each when the live ones come first."""
    records = Records.of(memories)
    trashed = records.numbers("trashed_at") > 0
    if not trashed.any():
        return (records, vectors), (Records.of(()), [])
    live, gone = np.flatnonzero(~trashed), np.flatnonzero(trashed)
    if not len(live) or live[-1] == len(live) - 1:  # the live ones first: two slices
        count = len(live)
        return (records[:count], vectors[:count]), (records[count:], vectors[count:])
    if isinstance(vectors, np.ndarray):
        return (records.taken(live), vectors[live]), (records.taken(gone), vectors[gone])
    return ((records.taken(live), [vectors[i] for i in live.tolist()]),
            (records.taken(gone), [vectors[i] for i in gone.tolist()]))
