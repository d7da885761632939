"""Writes: remember, supersede, update, reinforce, forget (into the trash, or
purged), the trash's restore and empty, turns, import and a watched file's
chunks; each validated and embedded first. A remember is judged against the
memories of its scope, type and topic (`restatement.py`): the same statement
again reinforces the earlier memory, a changed one supersedes it, anything
else is added. Each checks the caller's declared access (`model/scopes.py`)
before anything is embedded or written: a write outside it is
PermissionDenied and changes nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from memvault_base.errors import InvalidArgument, NotFound
from memvaultd.crypto.entropy import drawing, new_id
from memvaultd.model import drafts, secrets
from memvaultd.model import memory as m
from memvaultd.model.commands import (
    ADDED,
    REINFORCED,
    SUPERSEDED,
    ImportedRecord,
    MemoryDraft,
    RememberOutcome,
    TurnDraft,
)
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
from memvaultd.model.scopes import FULL, Access, check_scope
from memvaultd.model.vector import Vector
from memvaultd.recall.filter.parse import parse_filter
from memvaultd.vault import restatement
from memvaultd.vault.core import MAX_BATCH, VaultCore, visible
from memvaultd.vault.upkeep import retirements

# Up to this many memories of one topic are compared one by one (~2 µs
# each); beyond it, the index's scan is cheaper.
_SMALL_TOPIC = 2000
# Earlier memories a new one is judged against: its nearest few by cosine.
_CANDIDATES = 3
# The fields `supersede` takes from the memory it replaces unless the caller
# gives them or names them in `cleared` (MemoryInput's names).
INHERITED = ("type", "topic_key", "payload_json", "entity", "tags", "category",
             "importance", "session_id", "source", "protected")
# What a supersession found by remember takes from the memory it replaces
# when the new one leaves it empty (Memory's names): its type and topic are
# the same by construction, its importance the caller's or the default.
_TAKEN = ("entity", "tags", "category", "payload", "session_id", "source")


@dataclass(frozen=True)
class _Prepared:
    memory: Memory
    vector: Vector
    new: bool = False  # never merged


@dataclass(frozen=True)
class _Judged:
    outcome: str
    target: str = ""
    reason: str = ""


# The memories planned so far in one batch, by (type, topic).
_Batch = dict[tuple[str, str], list[_Prepared]]


class Writes:
    def __init__(self, core: VaultCore) -> None:
        self.core = core

    @drawing()
    def remember(self, items: Sequence[MemoryDraft], access: Access = FULL
                 ) -> list[RememberOutcome]:
        if not items:
            raise InvalidArgument("memories: at least one memory is required")
        if len(items) > MAX_BATCH:
            raise InvalidArgument(f"memories: {len(items)} is over the batch limit of {MAX_BATCH}")
        items = [replace(d, scope=d.scope or access.default_scope) for d in items]
        for i, draft in enumerate(items):
            where = f"memories[{i}]." if len(items) > 1 else ""
            access.check_new(check_scope(draft.scope, where + "scope"), draft.topic_key,
                             "remember")
        prepared = self._prepare(items)
        self.core.await_loaded()
        with self.core.write_lock:
            for item in prepared:
                older = item.memory.supersedes
                old = self.core.memories.get(older) if older else None
                if older and old is None:
                    raise InvalidArgument(f"supersedes: no memory {item.memory.supersedes!r}")
                if old is not None:
                    access.check_change(old, "supersede")
            ops, judged = self._plan(prepared)
            replaced = [j.target for j in judged if j.outcome == SUPERSEDED]
            # After the puts, in the same append: a consolidated memory that
            # summarised a replaced memory is retired (vault/upkeep.py).
            retiring = retirements(self.core, replaced, time.time())
            first = self.core.commit(ops + retiring)
        return [RememberOutcome(op.memory_id, first + i, j.outcome, j.target, j.reason)
                for i, (op, j) in enumerate(zip(ops, judged, strict=True))]

    def supersede(self, memory_id: str, draft: MemoryDraft, cleared: Sequence[str] = (),
                  access: Access = FULL) -> RememberOutcome:
        """`draft` as the new version of `memory_id`, taking from it every
        field of `INHERITED` that `draft` leaves unset and `cleared` does not
        name, and its scope unless `draft` names one."""
        unknown = sorted(set(cleared) - set(INHERITED))
        if unknown:
            raise InvalidArgument(f"cleared: {', '.join(unknown)} cannot be cleared; these "
                                  f"can: {', '.join(INHERITED)}")
        old = self.core.get(memory_id)
        access.check_change(old, "supersede")
        (outcome,) = self.remember([replace(inherited(draft, old, cleared),
                                            supersedes=memory_id,
                                            scope=draft.scope or old.scope)], access)
        return outcome

    def update(self, memory_id: str, draft: MemoryDraft, names: Sequence[str],
               access: Access = FULL) -> tuple[int, Memory]:
        if not names:
            raise InvalidArgument("fields: name at least one field to update")
        access.check_writable("update")
        changes = drafts.checked_fields(draft, names)
        vector = None
        if "text" in changes:
            info = self.core.info
            vector = (drafts.own_vector(draft.vector, info.dimension, info.model, "vector")
                      if draft.vector
                      else self.core.embedder.embed_documents([changes["text"]])[0])
        self.core.await_loaded()
        with self.core.write_lock:
            self._check_change(memory_id, access, "update", changes)
            now = time.time()
            ops = [Operation(new_id(), UPDATE, self.core.clock.now(), target=memory_id, at=now,
                             fields=changes, vector=vector)]
            if "text" in changes:  # a summary of its old text would be stale
                ops += retirements(self.core, [memory_id], now)
            txid = self.core.commit(ops)
            return txid, self.core.get(memory_id)

    def reinforce(self, memory_id: str, access: Access = FULL) -> tuple[int, Memory]:
        self.core.await_loaded()
        with self.core.write_lock:
            self._check_change(memory_id, access, "reinforce")
            txid = self.core.commit([self._reinforce_op(memory_id, time.time())])
            return txid, self.core.get(memory_id)

    def _check_change(self, memory_id: str, access: Access, what: str,
                      changes: dict[str, Any] | None = None) -> None:
        """NotFound if no memory `memory_id` is held; PermissionDenied unless
        `access` may change it, and (`changes`) what it becomes too."""
        memory = self.core.get(memory_id)
        if access.full:
            return
        access.check_change(memory, what)
        if changes:
            after = memory.copy(**changes)
            access.check_new(after.scope, after.topic_key, what)

    @drawing()
    def forget(self, memory_id: str = "", filter_json: str = "", dry_run: bool = False, *,
               purge: bool = False, by: str = "", access: Access = FULL
               ) -> tuple[int, list[str]]:
        """Move the memory `memory_id`, or every memory the filter matches,
        to the trash, `by` (what asks: "cli", "mcp", ...) noted there.
        `purge`: erase them for good instead, on every device, and what of
        the trash the id or filter names too. A filter matches only what
        `access` may change. Returns (last txid, the ids)."""
        if bool(memory_id) == bool(filter_json):
            raise InvalidArgument("id: give either an id or a filter to forget by")
        by = m.check_short(by, "by") or BY_CLIENT
        matches = parse_filter(filter_json) if filter_json else None
        access.check_writable("forget")
        self.core.await_loaded()
        with self.core.write_lock:
            trash = self.core.state.trash
            if matches is None:
                target = trash.get(memory_id) if purge else None
                access.check_change(target or self.core.get(memory_id), "forget")
                ids = [memory_id]
            else:
                pool = [*self.core.memories.memories(), *(trash.memories() if purge else ())]
                ids = sorted(mem.id for mem in pool
                             if matches.matches(mem) and access.may_change(mem))
            if dry_run or not ids:
                return self.core.applied_txid, ids
            last = self.core.commit(self._forget_ops(ids, purge, by))
            return last + len(ids) - 1, ids

    @drawing()
    def restore(self, ids: Sequence[str], every: bool = False, access: Access = FULL
                ) -> tuple[int, list[Memory]]:
        """Bring memories back from the trash, every field as it was (and
        as updated since, on any device); `every`: the whole trash (what
        of it `access` may change). An id that is not forgotten is returned
        as it is. Returns (last txid, the memories)."""
        if bool(ids) == every:
            raise InvalidArgument("ids: give the ids to restore, or restore all")
        if len(ids) > MAX_BATCH:
            raise InvalidArgument(f"ids: {len(ids)} is over the batch limit of {MAX_BATCH}")
        access.check_writable("restore")
        self.core.await_loaded()
        with self.core.write_lock:
            trash = self.core.state.trash
            if every:
                ids = [mem.id for mem in sorted(trash.memories(), key=_forgotten_order)
                       if access.may_change(mem)]
            for memory_id in ids:
                held = trash.get(memory_id) or self.core.memories.get(memory_id)
                if held is None:
                    raise self._gone(memory_id)
                access.check_change(held, "restore")
            back = [i for i in dict.fromkeys(ids) if trash.get(i) is not None]
            txid = self.core.applied_txid
            if back:
                now = time.time()
                first = self.core.commit([Operation(new_id(), RESTORE, self.core.clock.now(),
                                                    target=i, at=now) for i in back])
                txid = first + len(back) - 1
            return txid, [self.core.get(i) for i in dict.fromkeys(ids)]

    @drawing()
    def empty_trash(self, access: Access = FULL) -> tuple[int, list[str]]:
        """Purge everything in the trash, on every device. Returns (last txid, the ids)."""
        access.check_full("emptying the trash")
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

    @drawing()
    def append_turns(self, session_id: str, turns: Sequence[TurnDraft], access: Access = FULL
                     ) -> tuple[int, list[str]]:
        """The turns, in the caller's default scope; they have no topic, so
        a caller that declared topics may not write them (nor see them)."""
        if not session_id:
            raise InvalidArgument("session_id: turns belong to a session; name it")
        if not turns or len(turns) > MAX_BATCH:
            raise InvalidArgument(f"turns: between 1 and {MAX_BATCH} turns per call")
        access.check_new(access.default_scope, "", "append turns")
        now = time.time()
        memories = []
        for i, turn in enumerate(turns):
            # A turn is a transcript captured as it happened, not a text the
            # caller chose to keep: its credentials are redacted (docs/secrets.md).
            memory = drafts.new_memory(MemoryDraft(text=secrets.redact(turn.text),
                                                   type=m.EPISODIC,
                                                   entity=turn.speaker, session_id=session_id,
                                                   source=turn.speaker,
                                                   payload_json=turn.payload_json,
                                                   scope=access.default_scope),
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

    @drawing()
    def import_memories(self, records: Sequence[ImportedRecord], allow_secret: bool = False,
                        access: Access = FULL) -> tuple[int, int, int]:
        """Whole records, ids, times and chains kept, each checked as a
        remembered memory is (`drafts.imported_memory`), and in a scope
        `access` may write (a record without one: the caller's default). A
        record carries its own id, so it is never merged into another
        memory: an export imported into an empty vault gives back every
        memory. Returns (added, 0, txid); the 0 fills the reinforcement
        count old clients read."""
        if len(records) > MAX_BATCH:
            raise InvalidArgument(f"memories: over the batch limit of {MAX_BATCH}")
        access.check_writable("import")
        info = self.core.info
        now = time.time()
        memories = []
        for i, record in enumerate(records):
            fields = {**record.fields, "scope": record.fields.get("scope") or access.default_scope}
            try:
                memory = drafts.imported_memory(fields, now, allow_secret)
            except InvalidArgument as exc:
                raise InvalidArgument(f"memories[{i}].{exc}") from exc
            access.check_new(memory.scope, memory.topic_key, f"import (memories[{i}])")
            memories.append(memory)
        vectors: list[Vector | None] = [
            drafts.own_vector(record.vector, info.dimension, info.model,
                              f"memories[{i}].vector") if record.vector else None
            for i, record in enumerate(records)]
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        embedded = self.core.embedder.embed_documents([memories[i].text for i in missing])
        for i, vector in zip(missing, embedded, strict=True):
            vectors[i] = vector
        self.core.await_loaded()
        with self.core.write_lock:
            ops: list[Operation] = []
            for memory, vector in zip(memories, vectors, strict=True):
                assert vector is not None
                if (self.core.state.find(memory.id) is not None
                        or memory.id in self.core.state.tombstones):
                    continue  # already here (or forgotten, in the trash or purged)
                ops.append(Operation(new_id(), PUT, self.core.clock.now(),
                                     memory=memory, vector=vector))
            first = self.core.commit(ops) if ops else self.core.applied_txid + 1
            return len(ops), 0, first + len(ops) - 1

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
        return [_Prepared(mem, vec, d.new)
                for mem, vec, d in zip(memories, vectors, items, strict=True) if vec is not None]

    def _plan(self, prepared: list[_Prepared]) -> tuple[list[Operation], list[_Judged]]:
        """One operation per input: a put (of a new memory, or of a new
        version of the memory it changes), or a reinforce of the memory it
        restates — an existing one, or one earlier in the same batch."""
        ops: list[Operation] = []
        judged: list[_Judged] = []
        batch: _Batch = {}
        retired: set[str] = set()  # superseded earlier in this batch
        now = time.time()
        for item in prepared:
            if item.memory.supersedes:
                verdict = _Judged(SUPERSEDED, item.memory.supersedes)
            elif item.new:
                verdict = _Judged(ADDED)
            else:
                verdict = self._judge(item, batch, retired, now)
            if verdict.outcome == REINFORCED:
                ops.append(self._reinforce_op(verdict.target, now))
            else:
                if verdict.outcome == SUPERSEDED and not item.memory.supersedes:
                    item = replace(item, memory=self._new_version(item.memory, verdict.target,
                                                                  batch))
                memory = item.memory
                ops.append(Operation(new_id(), PUT, self.core.clock.now(),
                                     memory=memory, vector=item.vector))
                batch.setdefault((memory.type, memory.topic_key), []).append(item)
                if memory.supersedes:
                    retired.add(memory.supersedes)
            judged.append(verdict)
        return ops, judged

    def _new_version(self, memory: Memory, target: str, batch: _Batch) -> Memory:
        """`memory` as the new version of `target`, with the fields of
        `_TAKEN` it leaves empty taken from it."""
        old = self.core.memories.get(target) or next(
            e.memory for group in batch.values() for e in group if e.memory.id == target)
        taken = {name: getattr(old, name) for name in _TAKEN if not getattr(memory, name)}
        return memory.copy(supersedes=target, **taken)

    def _reinforce_op(self, memory_id: str, at: float) -> Operation:
        return Operation(new_id(), REINFORCE, self.core.clock.now(), target=memory_id, at=at)

    def _judge(self, item: _Prepared, batch: _Batch, retired: set[str], now: float
               ) -> _Judged:
        """What `item` is to the visible memories of its scope, type and
        topic (and entity, when both name one), in the vault or earlier in the batch:
        its nearest few by cosine are judged by `restatement.judge`; a
        reinforcement of any of them wins, then a supersession of the
        nearest that is one. An episodic memory is an event: another event
        with other values is another event, never a new version of it, so
        it is reinforced or added, never superseded.

        A small topic group (from the topic map) is compared directly; a big
        one (typically the memories without a topic) is searched through the
        index, whose first window then holds the nearest. Either way the cost
        does not grow with the vault: scanning it with a filter that matches
        nothing made 100k memories take ~45 minutes to load.
        """
        new = item.memory

        def same_kind(old: Memory) -> bool:
            return (old.type == new.type and old.topic_key == new.topic_key
                    and old.scope == new.scope
                    and not (old.entity and new.entity and old.entity != new.entity)
                    and visible(old, now) and old.id not in retired)

        if self.core.memories.topic_size(new.topic_key) <= _SMALL_TOPIC:
            group = [old for i in self.core.memories.with_topic(new.topic_key)
                     if (old := self.core.memories.get(i)) is not None and same_kind(old)]
        else:  # a big group (memories without a topic): its nearest are found fast
            group = [old for old, _ in
                     self.core.memories.index.search(item.vector, _CANDIDATES, same_kind)]
        olds = [(old, self.core.memories.index.vector(old.id)) for old in group]
        olds += [(e.memory, e.vector) for e in batch.get((new.type, new.topic_key), ())
                 if same_kind(e.memory)]
        nearest = sorted(((float(vector @ item.vector), old) for old, vector in olds
                          if vector is not None), key=lambda pair: -pair[0])[:_CANDIDATES]
        threshold = self.core.config.restatement_threshold
        verdicts = [(old, restatement.judge(old.text, new.text, cos, threshold))
                    for cos, old in nearest if cos >= restatement.SUPERSEDE_COSINE]
        wanted_outcomes = (REINFORCED,) if new.type == m.EPISODIC else (REINFORCED, SUPERSEDED)
        for wanted in wanted_outcomes:
            for old, verdict in verdicts:
                if verdict.outcome == wanted:
                    return _Judged(wanted, old.id, verdict.reason)
        return _Judged(ADDED)

    # -- watched note files (note_folder.py) ------------------------------

    @drawing()
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
            now = time.time()
            # A chunk consolidated before its file changed: the summary goes.
            ops += retirements(self.core, [p.memory.supersedes for p in prepared
                                           if p.memory.supersedes] + list(forget_ids), now)
            ops += self._forget_ops([i for i in dict.fromkeys(forget_ids)
                                     if self.core.memories.get(i) is not None], False, BY_WATCH)
            if ops:
                self.core.commit(ops)
        return [p.memory.id for p in prepared]


def _forgotten_order(memory: Memory) -> tuple[float, str]:
    return memory.trashed_at, memory.id


def inherited(draft: MemoryDraft, old: Memory, cleared: Sequence[str] = ()) -> MemoryDraft:
    """`draft` with every field of `INHERITED` it leaves unset ("", no tags,
    None) taken from `old`, except those `cleared` names (which stay empty)."""
    values: dict[str, Any] = {"type": old.type, "topic_key": old.topic_key,
              "payload_json": json.dumps(old.payload, ensure_ascii=False) if old.payload else "",
              "entity": old.entity, "tags": tuple(old.tags), "category": old.category,
              "importance": old.importance, "session_id": old.session_id,
              "source": old.source, "protected": old.protected}
    unset = [name for name in INHERITED
             if name not in cleared and getattr(draft, name) in ("", (), [], None)]
    return replace(draft, **{name: values[name] for name in unset})
