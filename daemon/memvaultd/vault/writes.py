"""Writes: remember, supersede, update, reinforce, forget (into the trash, or
purged), the trash's restore and empty, turns, import and a watched file's
chunks; each validated and embedded first, and a restated memory turned into
a reinforcement."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memvault_base.errors import InvalidArgument, NotFound
from memvaultd.crypto.entropy import new_id
from memvaultd.model import drafts
from memvaultd.model import memory as m
from memvaultd.model.commands import MemoryDraft, RememberOutcome, TurnDraft
from memvaultd.model.memory import Memory
from memvaultd.model.operations import (
    BY_CLIENT,
    BY_WATCH,
    FORGET,
    PUT,
    REINFORCE,
    RESTORE,
    TRASH,
    TURNS,
    UPDATE,
    Operation,
)
from memvaultd.model.vector import Vector
from memvaultd.recall.filter.parse import parse_filter
from memvaultd.vault.core import MAX_BATCH, VaultCore, visible

# Up to this many memories of one topic are compared one by one (~2 µs
# each); beyond it, the index's scan is cheaper.
_SMALL_TOPIC = 2000


@dataclass(frozen=True)
class _Prepared:
    memory: Memory
    vector: Vector


# The memories planned so far in one batch, by (type, topic).
_Batch = dict[tuple[str, str], list[_Prepared]]


class Writes:
    def __init__(self, core: VaultCore) -> None:
        self.core = core

    def remember(self, items: Sequence[MemoryDraft]) -> list[RememberOutcome]:
        if not items:
            raise InvalidArgument("memories: at least one memory is required")
        if len(items) > MAX_BATCH:
            raise InvalidArgument(f"memories: {len(items)} is over the batch limit of {MAX_BATCH}")
        prepared = self._prepare(items)
        self.core.await_loaded()
        with self.core.write_lock:
            for item in prepared:
                older = item.memory.supersedes
                if older and self.core.memories.get(older) is None:
                    raise InvalidArgument(f"supersedes: no memory {item.memory.supersedes!r}")
            ops, restated = self._plan(prepared)
            first = self.core.commit(ops)
        return [RememberOutcome(op.memory_id, first + i, was)
                for i, (op, was) in enumerate(zip(ops, restated, strict=True))]

    def supersede(self, memory_id: str, draft: MemoryDraft) -> RememberOutcome:
        self.core.get(memory_id)
        (outcome,) = self.remember([replace(draft, supersedes=memory_id)])
        return outcome

    def update(self, memory_id: str, draft: MemoryDraft, names: Sequence[str]
               ) -> tuple[int, Memory]:
        if not names:
            raise InvalidArgument("fields: name at least one field to update")
        changes = drafts.checked_fields(draft, names)
        vector = None
        if "text" in changes:
            info = self.core.info
            vector = (drafts.own_vector(draft.vector, info.dimension, info.model, "vector")
                      if draft.vector
                      else self.core.embedder.embed_documents([changes["text"]])[0])
        self.core.await_loaded()
        with self.core.write_lock:
            self.core.get(memory_id)
            txid = self.core.commit([Operation(new_id(), UPDATE, self.core.clock.now(),
                                           target=memory_id, at=time.time(), fields=changes,
                                           vector=vector)])
            return txid, self.core.get(memory_id)

    def reinforce(self, memory_id: str) -> tuple[int, Memory]:
        self.core.await_loaded()
        with self.core.write_lock:
            self.core.get(memory_id)
            txid = self.core.commit([self._reinforce_op(memory_id, time.time())])
            return txid, self.core.get(memory_id)

    def forget(self, memory_id: str = "", filter_json: str = "", dry_run: bool = False, *,
               purge: bool = False, by: str = "") -> tuple[int, list[str]]:
        """Move the memory `memory_id`, or every memory the filter matches,
        to the trash, `by` (what asks: "cli", "mcp", ...) noted there.
        `purge`: erase them for good instead, on every device, and what of
        the trash the id or filter names too. Returns (last txid, the ids)."""
        if bool(memory_id) == bool(filter_json):
            raise InvalidArgument("id: give either an id or a filter to forget by")
        by = m.check_short(by, "by") or BY_CLIENT
        matches = parse_filter(filter_json) if filter_json else None
        self.core.await_loaded()
        with self.core.write_lock:
            trash = self.core.state.trash
            if matches is None:
                if not (purge and trash.get(memory_id) is not None):
                    self.core.get(memory_id)
                ids = [memory_id]
            else:
                pool = [*self.core.memories.memories(), *(trash.memories() if purge else ())]
                ids = sorted(mem.id for mem in pool if matches.matches(mem))
            if dry_run or not ids:
                return self.core.applied_txid, ids
            last = self.core.commit(self._forget_ops(ids, purge, by))
            return last + len(ids) - 1, ids

    def restore(self, ids: Sequence[str], every: bool = False) -> tuple[int, list[Memory]]:
        """Bring memories back from the trash, every field as it was (and
        as updated since, on any device); `every`: the whole trash. An id
        that is not forgotten is returned as it is. Returns (last txid, the
        memories)."""
        if bool(ids) == every:
            raise InvalidArgument("ids: give the ids to restore, or restore all")
        if len(ids) > MAX_BATCH:
            raise InvalidArgument(f"ids: {len(ids)} is over the batch limit of {MAX_BATCH}")
        self.core.await_loaded()
        with self.core.write_lock:
            trash = self.core.state.trash
            if every:
                ids = [mem.id for mem in sorted(trash.memories(), key=_forgotten_order)]
            for memory_id in ids:
                if trash.get(memory_id) is None and self.core.memories.get(memory_id) is None:
                    raise self._gone(memory_id)
            back = [i for i in dict.fromkeys(ids) if trash.get(i) is not None]
            txid = self.core.applied_txid
            if back:
                now = time.time()
                first = self.core.commit([Operation(new_id(), RESTORE, self.core.clock.now(),
                                                    target=i, at=now) for i in back])
                txid = first + len(back) - 1
            return txid, [self.core.get(i) for i in dict.fromkeys(ids)]

    def empty_trash(self) -> tuple[int, list[str]]:
        """Purge everything in the trash, on every device. Returns (last txid, the ids)."""
        self.core.await_loaded()
        with self.core.write_lock:
            ids = [mem.id for mem in sorted(self.core.state.trash.memories(),
                                            key=_forgotten_order)]
            if not ids:
                return self.core.applied_txid, []
            last = self.core.commit(self._forget_ops(ids, True, ""))
            return last + len(ids) - 1, ids

    def _forget_ops(self, ids: Sequence[str], purge: bool, by: str) -> list[Operation]:
        """A trash of each memory (`by` noted), or with `purge` a tombstone."""
        now = time.time()
        return [Operation(new_id(), FORGET if purge else TRASH, self.core.clock.now(),
                          target=i, at=now, by="" if purge else by) for i in ids]

    def _gone(self, memory_id: str) -> NotFound:
        if memory_id in self.core.state.tombstones:
            return NotFound(f"id: memory {memory_id!r} was purged; nothing can bring it back")
        return NotFound(f"id: no memory {memory_id!r} in the trash")

    def append_turns(self, session_id: str, turns: Sequence[TurnDraft]) -> tuple[int, list[str]]:
        if not session_id:
            raise InvalidArgument("session_id: turns belong to a session; name it")
        if not turns or len(turns) > MAX_BATCH:
            raise InvalidArgument(f"turns: between 1 and {MAX_BATCH} turns per call")
        now = time.time()
        memories = []
        for i, turn in enumerate(turns):
            memory = drafts.new_memory(MemoryDraft(text=turn.text, type=m.EPISODIC,
                                                   entity=turn.speaker, session_id=session_id,
                                                   source=turn.speaker,
                                                   payload_json=turn.payload_json),
                                       now, f"turns[{i}].")
            at = m.check_time(turn.at, f"turns[{i}].at") or now
            memories.append(memory.copy(created_at=at, last_reinforced_at=at))
        vectors = self.core.embedder.embed_documents([t.text for t in memories])
        self.core.await_loaded()
        with self.core.write_lock:
            first = self.core.commit([Operation(new_id(), PUT, self.core.clock.now(),
                                            memory=t, vector=v, layer=TURNS)
                                  for t, v in zip(memories, vectors, strict=True)])
        return first + len(memories) - 1, [t.id for t in memories]

    def import_memories(self, records: Sequence[tuple[Memory, Vector | None]]
                        ) -> tuple[int, int, int]:
        """Whole records, ids and times kept. Returns (added, reinforced, txid)."""
        if len(records) > MAX_BATCH:
            raise InvalidArgument(f"memories: over the batch limit of {MAX_BATCH}")
        missing = [i for i, (_, v) in enumerate(records) if v is None]
        embedded = self.core.embedder.embed_documents([records[i][0].text for i in missing])
        vectors = [v for _, v in records]
        for i, vector in zip(missing, embedded, strict=True):
            vectors[i] = vector
        self.core.await_loaded()
        with self.core.write_lock:
            ops: list[Operation] = []
            batch: _Batch = {}
            added = 0
            for (memory, _), vector in zip(records, vectors, strict=True):
                assert vector is not None
                if (self.core.state.find(memory.id) is not None
                        or memory.id in self.core.state.tombstones):
                    continue  # already here (or forgotten, in the trash or purged)
                item = _Prepared(memory, vector)
                target = self._restated(item, batch, time.time())
                if target is None:
                    ops.append(Operation(new_id(), PUT, self.core.clock.now(),
                                         memory=memory, vector=vector))
                    batch.setdefault((item.memory.type, item.memory.topic_key), []).append(item)
                    added += 1
                else:
                    ops.append(self._reinforce_op(target, memory.last_reinforced_at))
            first = self.core.commit(ops) if ops else self.core.applied_txid + 1
            return added, len(ops) - added, first + len(ops) - 1

    def _prepare(self, items: Sequence[MemoryDraft]) -> list[_Prepared]:
        """Validate every draft and embed those without a vector. Raises
        before anything is written when any one of them is bad."""
        now = time.time()
        many = len(items) > 1
        memories = [drafts.new_memory(d, now, f"memories[{i}]." if many else "")
                    for i, d in enumerate(items)]
        vectors: list[Vector | None] = [
            drafts.own_vector(d.vector, self.core.info.dimension, self.core.info.model,
                              f"memories[{i}].vector" if many else "vector") if d.vector else None
            for i, d in enumerate(items)]
        to_embed = [i for i, vector in enumerate(vectors) if vector is None]
        if to_embed:
            embedded = self.core.embedder.embed_documents([memories[i].text for i in to_embed])
            for i, vector in zip(to_embed, embedded, strict=True):
                vectors[i] = vector
        return [_Prepared(mem, vec) for mem, vec in zip(memories, vectors, strict=True)
                if vec is not None]

    def _plan(self, prepared: list[_Prepared]) -> tuple[list[Operation], list[bool]]:
        """One operation per input: a put, or a reinforce of the memory it
        restates — an existing one, or one earlier in the same batch."""
        ops: list[Operation] = []
        restated: list[bool] = []
        batch: _Batch = {}
        now = time.time()
        for item in prepared:
            target = None if item.memory.supersedes else self._restated(item, batch, now)
            if target is None:
                ops.append(Operation(new_id(), PUT, self.core.clock.now(),
                                     memory=item.memory, vector=item.vector))
                batch.setdefault((item.memory.type, item.memory.topic_key), []).append(item)
            else:
                ops.append(self._reinforce_op(target, now))
            restated.append(target is not None)
        return ops, restated

    def _reinforce_op(self, memory_id: str, at: float) -> Operation:
        return Operation(new_id(), REINFORCE, self.core.clock.now(), target=memory_id, at=at)

    def _restated(self, item: _Prepared, batch: _Batch, now: float) -> str | None:
        """The id of a visible memory of the same type and topic that `item`
        restates (cosine >= the threshold), from the vault or the batch.

        A small topic group (from the topic map) is compared directly; a big
        one (typically the memories without a topic) is searched through the
        index, whose first window then holds a match. Either way the cost does
        not grow with the vault: scanning it with a filter that matches
        nothing made 100k memories take ~45 minutes to load.
        """
        threshold = self.core.config.restatement_threshold
        new = item.memory

        def same_kind(old: Memory) -> bool:
            return (old.type == new.type and old.topic_key == new.topic_key
                    and visible(old, now))

        if self.core.memories.topic_size(new.topic_key) <= _SMALL_TOPIC:
            group = [old for i in self.core.memories.with_topic(new.topic_key)
                     if (old := self.core.memories.get(i)) is not None and same_kind(old)]
            olds = [(old.id, self.core.memories.index.vector(old.id)) for old in group]
        else:  # a big group (memories without a topic): its nearest is found fast
            olds = [(old.id, self.core.memories.index.vector(old.id))
                    for old, _ in self.core.memories.index.search(item.vector, 1, same_kind)]
        olds += [(e.memory.id, e.vector) for e in batch.get((new.type, new.topic_key), ())
                 if same_kind(e.memory)]
        best_id, best_cos = None, threshold
        for old_id, vector in olds:
            cos = -1.0 if vector is None else float(vector @ item.vector)
            if cos >= best_cos:
                best_id, best_cos = old_id, cos
        return best_id

    # -- watched note files (note_folder.py) ------------------------------

    def replace_chunks(self, items: Sequence[MemoryDraft], forget_ids: Sequence[str] = ()
                       ) -> list[str]:
        """A watched file's changes as one durable append: each draft becomes a
        memory of its own (superseding `draft.supersedes` when set), never a
        reinforcement, since a file's chunks are tracked one by one and two
        alike must stay two; then `forget_ids` go to the trash (those already
        gone are skipped). Returns the new memories' ids, in order."""
        prepared = self._prepare(items) if items else []
        self.core.await_loaded()
        with self.core.write_lock:
            ops = [Operation(new_id(), PUT, self.core.clock.now(), memory=p.memory,
                             vector=p.vector) for p in prepared]
            ops += self._forget_ops([i for i in dict.fromkeys(forget_ids)
                                     if self.core.memories.get(i) is not None], False, BY_WATCH)
            if ops:
                self.core.commit(ops)
        return [p.memory.id for p in prepared]


def _forgotten_order(memory: Memory) -> tuple[float, str]:
    return memory.trashed_at, memory.id
