"""The vault: the domain of memvaultd.

It owns the in-memory layers (memories and transcript turns) and the sealed
storage behind them, and keeps one rule: a write is appended to the
operation log and fsynced before it is applied and acknowledged, so an
acknowledged write survives `kill -9` and power loss. Start-up is the same
rule run backwards: newest snapshot, then every log record after it.

Access counts (recall's `mark_accessed`) are the one exception: they are
applied at once and written in one record per second by a background flush,
so a recall never waits on the disk. A crash can lose the last second of
access counts, never a memory.

The class is joined from parts, a module each: `vault_core.py` (the shared
state and `_commit`), `vault_access.py`, `vault_snapshots.py` and
`vault_reads.py`; `Vault` itself opens, loads and closes the vault.

It knows nothing of gRPC; the servicer translates requests into
`requests.py` terms and maps `memvault.errors` to status codes.
"""

from __future__ import annotations

import gc
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from memvault.errors import InvalidArgument, MemvaultError

from . import drafts
from . import memory as m
from .config import Config
from .crypto.entropy import new_id
from .crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from .embedder import Embedder
from .events import EventBus
from .index import Vector
from .keys import create_vault_key, load_vault_key
from .memory import Memory
from .merge import VaultState
from .operations import (
    FORGET,
    PUT,
    REINFORCE,
    TURNS,
    UPDATE,
    UPKEEP,
    Operation,
    decode,
    encode,
)
from .oplog import OperationLog
from .recall.filters import parse_filter
from .requests import MemoryDraft, RememberOutcome, TurnDraft
from .snapshot import SnapshotStore
from .state import State, decode_state, encode_state
from .upkeep import consolidation, summariser
from .upkeep import sweep as sweeping
from .vault_core import MAX_BATCH, visible
from .vault_info import VaultInfo
from .vault_reads import Facet, Recalled, VaultReads
from .vault_snapshots import VaultSnapshots

log = logging.getLogger("memvaultd.vault")

# Puts `genesis` logs under one hold of the write lock: ~70 ms at 100k.
_GENESIS_CHUNK = 1_000
_GENESIS_PAUSE_S = 0.001  # between chunks: 0.1 s in all at 100k
# Up to this many memories of one topic are compared one by one (~2 µs
# each); beyond it, the index's scan is cheaper.
_SMALL_TOPIC = 2000

__all__ = ["MAX_BATCH", "Facet", "Recalled", "Vault"]


@dataclass(frozen=True)
class _Prepared:
    memory: Memory
    vector: Vector


# The memories planned so far in one batch, by (type, topic).
_Batch = dict[tuple[str, str], list[_Prepared]]


class Vault(VaultReads, VaultSnapshots):
    # -- opening -----------------------------------------------------------

    @classmethod
    def open(cls, data_dir: Path, config: Config, embedder: Embedder, events: EventBus, *,
             prompt: bool = True) -> Vault:
        """Unlock (or create) the vault in `data_dir`. Fast: loading the
        memories is `load()`, so the socket can be served meanwhile."""
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        data_dir.chmod(0o700)
        info = VaultInfo.load(data_dir)
        if info is None:
            info = VaultInfo.new(config.model, embedder.dimension())
            key = create_vault_key(data_dir, info.vault_id_bytes, storage=config.key_storage,
                                   prompt=prompt)
            info.save(data_dir)
            log.info("created vault %s", info.vault_id)
        else:
            info.check_model(config.model)
            key = load_vault_key(data_dir, info.vault_id_bytes, prompt=prompt)
        log.info("vault key: %s", key.detail)
        return cls(data_dir, info, key, config, embedder, events)

    def load(self) -> None:
        """Newest snapshot, then the log after it. Requests wait for this."""
        try:
            self._load()
        except BaseException as exc:
            # Waiting requests learn at once that the vault will not open.
            self._load_error = f"the vault could not be loaded: {exc}"
            self._loaded.set()
            raise

    def _load(self) -> None:
        started = time.monotonic()
        latest = self.snapshots.latest()
        if latest is not None:
            state = decode_state(latest[1])
            self.state.restore(list(zip(state.memories, state.vectors, strict=True)),
                               list(zip(state.turns, state.turn_vectors, strict=True)),
                               set(state.tombstones), set(state.seen), state.stamps)
            self.state.upkeep = dict(state.upkeep)
            self.clock.observe(state.stamp)
            self.applied_txid = self._snapshot_txid = state.seq
        replayed = 0
        for seq, record in self.log.replay(after=self.applied_txid):
            self._apply(decode(record))
            self.applied_txid = seq
            replayed += 1
        # A million memories are tens of millions of objects that never die;
        # left to the cyclic collector, each full collection pauses every
        # thread for ~0.4 s at 200k memories (6 µs once frozen).
        gc.collect()
        gc.freeze()
        self._loaded.set()
        self._flusher.start()
        log.info("loaded %d memories, %d turns (snapshot at %d, %d log records) in %.2f s",
                 len(self.memories), len(self.state.layers[TURNS]), self._snapshot_txid, replayed,
                 time.monotonic() - started)

    # -- writes ------------------------------------------------------------

    def remember(self, items: Sequence[MemoryDraft]) -> list[RememberOutcome]:
        if not items:
            raise InvalidArgument("memories: at least one memory is required")
        if len(items) > MAX_BATCH:
            raise InvalidArgument(f"memories: {len(items)} is over the batch limit of {MAX_BATCH}")
        prepared = self._prepare(items)
        self._await_loaded()
        with self._write_lock:
            for item in prepared:
                if item.memory.supersedes and self.memories.get(item.memory.supersedes) is None:
                    raise InvalidArgument(f"supersedes: no memory {item.memory.supersedes!r}")
            ops, restated = self._plan(prepared)
            first = self._commit(ops)
        return [RememberOutcome(op.memory_id, first + i, was)
                for i, (op, was) in enumerate(zip(ops, restated, strict=True))]

    def supersede(self, memory_id: str, draft: MemoryDraft) -> RememberOutcome:
        self._get(memory_id)
        (outcome,) = self.remember([replace(draft, supersedes=memory_id)])
        return outcome

    def update(self, memory_id: str, draft: MemoryDraft, names: Sequence[str]
               ) -> tuple[int, Memory]:
        if not names:
            raise InvalidArgument("fields: name at least one field to update")
        changes = drafts.checked_fields(draft, names)
        vector = None
        if "text" in changes:
            vector = (drafts.own_vector(draft.vector, self.info.dimension, self.info.model,
                                        "vector") if draft.vector
                      else self.embedder.embed_documents([changes["text"]])[0])
        self._await_loaded()
        with self._write_lock:
            self._get(memory_id)
            txid = self._commit([Operation(new_id(), UPDATE, self.clock.now(),
                                           target=memory_id, at=time.time(), fields=changes,
                                           vector=vector)])
            return txid, self._get(memory_id)

    def reinforce(self, memory_id: str) -> tuple[int, Memory]:
        self._await_loaded()
        with self._write_lock:
            self._get(memory_id)
            txid = self._commit([self._reinforce_op(memory_id, time.time())])
            return txid, self._get(memory_id)

    def forget(self, memory_id: str = "", filter_json: str = "", dry_run: bool = False
               ) -> tuple[int, list[str]]:
        if bool(memory_id) == bool(filter_json):
            raise InvalidArgument("id: give either an id or a filter to forget by")
        matches = parse_filter(filter_json) if filter_json else None
        self._await_loaded()
        with self._write_lock:
            if matches is None:
                self._get(memory_id)
                ids = [memory_id]
            else:
                ids = sorted(mem.id for mem in self.memories.memories() if matches.matches(mem))
            if dry_run or not ids:
                return self.applied_txid, ids
            now = time.time()
            last = self._commit([Operation(new_id(), FORGET, self.clock.now(),
                                           target=i, at=now) for i in ids])
            return last + len(ids) - 1, ids

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
        vectors = self.embedder.embed_documents([t.text for t in memories])
        self._await_loaded()
        with self._write_lock:
            first = self._commit([Operation(new_id(), PUT, self.clock.now(),
                                            memory=t, vector=v, layer=TURNS)
                                  for t, v in zip(memories, vectors, strict=True)])
        return first + len(memories) - 1, [t.id for t in memories]

    def import_memories(self, records: Sequence[tuple[Memory, Vector | None]]
                        ) -> tuple[int, int, int]:
        """Whole records, ids and times kept. Returns (added, reinforced, txid)."""
        if len(records) > MAX_BATCH:
            raise InvalidArgument(f"memories: over the batch limit of {MAX_BATCH}")
        missing = [i for i, (_, v) in enumerate(records) if v is None]
        embedded = self.embedder.embed_documents([records[i][0].text for i in missing])
        vectors = [v for _, v in records]
        for i, vector in zip(missing, embedded, strict=True):
            vectors[i] = vector
        self._await_loaded()
        with self._write_lock:
            ops: list[Operation] = []
            batch: _Batch = {}
            added = 0
            for (memory, _), vector in zip(records, vectors, strict=True):
                assert vector is not None
                if self.memories.get(memory.id) is not None or memory.id in self.state.tombstones:
                    continue  # already here (or deliberately forgotten): nothing to add
                item = _Prepared(memory, vector)
                target = self._restated(item, batch, time.time())
                if target is None:
                    ops.append(Operation(new_id(), PUT, self.clock.now(),
                                         memory=memory, vector=vector))
                    batch.setdefault((item.memory.type, item.memory.topic_key), []).append(item)
                    added += 1
                else:
                    ops.append(self._reinforce_op(target, memory.last_reinforced_at))
            first = self._commit(ops) if ops else self.applied_txid + 1
            return added, len(ops) - added, first + len(ops) - 1

    def _prepare(self, items: Sequence[MemoryDraft]) -> list[_Prepared]:
        """Validate every draft and embed those without a vector. Raises
        before anything is written when any one of them is bad."""
        now = time.time()
        many = len(items) > 1
        memories = [drafts.new_memory(d, now, f"memories[{i}]." if many else "")
                    for i, d in enumerate(items)]
        vectors: list[Vector | None] = [
            drafts.own_vector(d.vector, self.info.dimension, self.info.model,
                              f"memories[{i}].vector" if many else "vector") if d.vector else None
            for i, d in enumerate(items)]
        to_embed = [i for i, vector in enumerate(vectors) if vector is None]
        if to_embed:
            embedded = self.embedder.embed_documents([memories[i].text for i in to_embed])
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
                ops.append(Operation(new_id(), PUT, self.clock.now(),
                                     memory=item.memory, vector=item.vector))
                batch.setdefault((item.memory.type, item.memory.topic_key), []).append(item)
            else:
                ops.append(self._reinforce_op(target, now))
            restated.append(target is not None)
        return ops, restated

    def _reinforce_op(self, memory_id: str, at: float) -> Operation:
        return Operation(new_id(), REINFORCE, self.clock.now(), target=memory_id, at=at)

    def _restated(self, item: _Prepared, batch: _Batch, now: float) -> str | None:
        """The id of a visible memory of the same type and topic that `item`
        restates (cosine >= the threshold), from the vault or the batch.

        A small topic group (from the topic map) is compared directly; a big
        one (typically the memories without a topic) is searched through the
        index, whose first window then holds a match. Either way the cost does
        not grow with the vault: scanning it with a filter that matches
        nothing made 100k memories take ~45 minutes to load.
        """
        threshold = self.config.restatement_threshold
        new = item.memory

        def same_kind(old: Memory) -> bool:
            return (old.type == new.type and old.topic_key == new.topic_key
                    and visible(old, now))

        if self.memories.topic_size(new.topic_key) <= _SMALL_TOPIC:
            group = [old for i in self.memories.with_topic(new.topic_key)
                     if (old := self.memories.get(i)) is not None and same_kind(old)]
            olds = [(old.id, self.memories.index.vector(old.id)) for old in group]
        else:  # a big group (memories without a topic): its nearest is found fast
            olds = [(old.id, self.memories.index.vector(old.id))
                    for old, _ in self.memories.index.search(item.vector, 1, same_kind)]
        olds += [(e.memory.id, e.vector) for e in batch.get((new.type, new.topic_key), ())
                 if same_kind(e.memory)]
        best_id, best_cos = None, threshold
        for old_id, vector in olds:
            cos = -1.0 if vector is None else float(vector @ item.vector)
            if cos >= best_cos:
                best_id, best_cos = old_id, cos
        return best_id

    # -- upkeep (upkeep/: heat, sweep, consolidation) -----------------------

    def sweep(self, dry_run: bool, threshold: float | None = None
              ) -> tuple[int, sweeping.SweepPlan]:
        """Forget what the sweep plans (upkeep/sweep.py) in one durable
        append; returns (last txid or 0, the plan)."""
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise InvalidArgument(f"threshold: {threshold!r} is outside 0..1")
        self._await_loaded()
        with self._write_lock:
            now = time.time()
            plan = sweeping.plan(self.memories.memories(), now, self.config.sweep,
                                 self.config.heat, threshold)
            if dry_run:
                return 0, plan
            ops = [Operation(new_id(), FORGET, self.clock.now(), target=s.memory.id,
                             at=now) for s in plan.swept]
            return self._commit_upkeep("sweep", ops, now), plan

    def consolidate(self, request: consolidation.Request, dry_run: bool
                    ) -> tuple[int, list[consolidation.Consolidated], int]:
        """Write one memory per cluster and archive its sources (upkeep/
        consolidation.py); returns (last txid or 0, what was written, how many
        memories were candidates)."""
        request = consolidation.check(request)
        settings = self.config.consolidation
        summarise = summariser.load(settings.summariser)
        self._await_loaded()
        with self._write_lock:
            now = time.time()
            candidates = [
                (mem, vector) for mem in self.memories.memories()
                if consolidation.is_candidate(mem, now, request, settings, self.config.heat)
                and (vector := self.memories.index.vector(mem.id)) is not None]
            planned = consolidation.plan(
                candidates, request, settings, summarise,
                lambda found: summariser.checked(found, settings.summariser or "extractive"))
            if dry_run:
                return 0, planned, len(candidates)
            ops = []
            for done in planned:
                # The put first: a crash between leaves sources unarchived
                # (still found), never archived sources with no summary.
                ops.append(Operation(new_id(), PUT, self.clock.now(),
                                     memory=done.memory, vector=done.vector))
                ops += [Operation(new_id(), UPDATE, self.clock.now(), target=s.id,
                                  at=now, fields={"tier": m.ARCHIVED,
                                                  "consolidated_into": done.memory.id})
                        for s in done.sources]
            return self._commit_upkeep("consolidate", ops, now), planned, len(candidates)

    def _commit_upkeep(self, what: str, ops: list[Operation], now: float) -> int:
        """`ops` and a record that `what` ran, in one append; the last txid."""
        ops.append(Operation(new_id(), UPKEEP, self.clock.now(), target=what, at=now,
                             fields={"count": len(ops)}))
        return self._commit(ops) + len(ops) - 1

    def last_upkeep(self, what: str) -> float:
        return self.state.upkeep.get(what, 0.0)

    # -- sync --------------------------------------------------------------

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int]:
        """This device's operations logged after `seq`, in order (what the
        remote may lack), and the log seq the scan reached: once these are
        pushed, the remote holds everything of this device up to that seq.

        Only that seq is read under the write lock; the records up to it are
        read and decoded after, beside new writes (`OperationLog.replay`
        with `upto`). Reading them under the lock held every write back for
        as long as a backlog took to decode: after `init` on a vault of
        100k memories, or a remote down for long, seconds at every round."""
        with self._write_lock:
            upto = self.log.last_seq
        ops = [(at, op) for at, record in self.log.replay(after=seq, upto=upto)
               if (op := decode(record)).stamp.device == self.info.device_id]
        return ops, upto

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        """Log and apply the operations of a pulled version that are new here."""
        self._await_loaded()
        with self._write_lock:
            fresh = [op for op in ops if op.op_id not in self.state.seen]
            if fresh:
                self._commit(fresh, notify_sync=False)
            return len(fresh)

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        """The state body for a remote snapshot, if every local operation is
        pushed (then the state is exactly the chain's); else None."""
        with self._write_lock:
            for _, record in self.log.replay(after=pushed_seq):
                if decode(record).stamp.device == self.info.device_id:
                    return None
            capture = self._capture()
        return encode_state(capture())

    def genesis(self) -> int:
        """Log a put of every memory and turn this device holds, so a remote
        that never saw them gets them; returns the log seq before them.

        The puts are logged `_GENESIS_CHUNK` at a time, with the write lock
        released in between: held throughout, it kept every write waiting
        for 7.3 s at 100k memories. A write that lands between two chunks
        changes nothing of the outcome, since operations merge without regard
        to order (`merge.py`): a forget wins over the put, a later update
        over its older stamps. Their stamps are all drawn in the first hold,
        with the cut of what is logged, before any such write: only the
        vectors' copy and the operations are made after it.

        No snapshot is taken until the last chunk is in, then one if due,
        rather than one every tenth of the vault: none of these records can
        be pruned before the remote holds them, and each snapshot held
        writes back for ~1 s at 100k."""
        with self._write_lock:
            before = self.log.last_seq
            cuts = [(name, *layer.index.cut()) for name, layer in self.state.layers.items()]
            stamps = iter([self.clock.now() for _, memories, _ in cuts for _ in memories])
            self._snapshots_held += 1
        try:
            ops = [Operation(new_id(), PUT, next(stamps), memory=memory, vector=vector,
                             layer=name)
                   for name, memories, vectors in cuts
                   for memory, vector in zip(memories, vectors(), strict=True)]
            for chunk in range(0, len(ops), _GENESIS_CHUNK):
                with self._write_lock:
                    self._commit(ops[chunk : chunk + _GENESIS_CHUNK], notify_sync=False)
                # Python's locks are not fair: released and taken again at
                # once, the lock went back to this loop before a waiting
                # write woke up (one remember waited 5.8 s of a 100k init).
                time.sleep(_GENESIS_PAUSE_S)
        finally:
            with self._write_lock:
                self._snapshots_held -= 1
                self._snapshot_if_due()
        return before

    def adopt(self, info: VaultInfo, key: bytes, base: State | None) -> int:
        """Become another vault (`join`): its id and key, starting from `base`
        (its newest snapshot), with every memory this device held put into it
        so nothing is lost. Returns the log seq before those puts (what the
        remote lacks starts after it).

        Crash-safe in order: the new log (base + puts) is written and synced
        in `log.joining` first; only then are the old log and snapshots moved
        away, the new key stored and `vault.json` replaced.
        """
        self._await_loaded()
        with self._write_lock:
            self._flush_access_locked()
            joining = self.data_dir / "log.joining"
            shutil.rmtree(joining, ignore_errors=True)
            new_log = OperationLog(joining, derive_key(key, purpose=PURPOSE_LOG),
                                   info.vault_id_bytes)
            state = VaultState(info.dimension)
            if base is not None:
                state.restore(list(zip(base.memories, base.vectors, strict=True)),
                              list(zip(base.turns, base.turn_vectors, strict=True)),
                              set(base.tombstones), set(base.seen), base.stamps)
                state.upkeep = dict(base.upkeep)
            mine = []
            for layer_name, layer in self.state.layers.items():
                memories, vectors = layer.index.export()
                mine += [Operation(new_id(), PUT, self.clock.now(), memory=memory,
                                   vector=vector, layer=layer_name)
                         for memory, vector in zip(memories, vectors, strict=True)]
            for start in range(0, len(mine), MAX_BATCH):
                new_log.append([encode(op) for op in mine[start : start + MAX_BATCH]])
            for op in mine:
                state.apply(op)
            old_key_file = self.data_dir / "vault.key"
            self.log.close()
            for name in ("log", "snapshots"):
                shutil.rmtree(self.data_dir / f"{name}.previous", ignore_errors=True)
                if (self.data_dir / name).exists():
                    (self.data_dir / name).rename(self.data_dir / f"{name}.previous")
            joining.rename(self.data_dir / "log")
            new_log.close()
            if old_key_file.exists():
                old_key_file.rename(self.data_dir / "vault.key.previous")
            unlocked = create_vault_key(self.data_dir, info.vault_id_bytes,
                                        storage=self.config.key_storage, prompt=False, key=key)
            info.save(self.data_dir)
            for name in ("log.previous", "snapshots.previous"):
                shutil.rmtree(self.data_dir / name, ignore_errors=True)
            (self.data_dir / "vault.key.previous").unlink(missing_ok=True)
            self.info, self.key_storage, self.key_detail = info, unlocked.storage, unlocked.detail
            self.vault_key = key
            self.log = OperationLog(self.data_dir / "log", derive_key(key, purpose=PURPOSE_LOG),
                                    info.vault_id_bytes)
            self.snapshots = SnapshotStore(self.data_dir / "snapshots",
                                           derive_key(key, purpose=PURPOSE_SNAPSHOT),
                                           info.vault_id_bytes)
            self.state = state
            with self._applied:
                self.applied_txid = self.log.last_seq
                self._applied.notify_all()
            self._snapshot_txid = -1
        # The base came from the remote, not the log: a snapshot keeps it here.
        self.snapshot()
        log.info("joined vault %s with %d memories of this device", info.vault_id, len(mine))
        return 0

    def close(self) -> None:
        self._closing.set()
        if self.loaded:
            try:
                # A background snapshot still being written would die with
                # the process (the next start then replayed up to 10,000
                # records, ~1 s at 100k): wait for it, then seal what it missed.
                self.snapshot(wait=True)
            except (OSError, MemvaultError) as exc:
                # Everything acknowledged is in the log already; the next
                # start replays it. A snapshot only makes that start faster.
                log.warning("no snapshot at stop (%s); the log has every write", exc)
            self.flush_access()
        self.log.close()

    # -- watched note files (note_folder.py) ------------------------------

    def replace_chunks(self, items: Sequence[MemoryDraft], forget_ids: Sequence[str] = ()
                       ) -> list[str]:
        """A watched file's changes as one durable append: each draft becomes a
        memory of its own (superseding `draft.supersedes` when set), never a
        reinforcement, since a file's chunks are tracked one by one and two
        alike must stay two; then `forget_ids` are forgotten (those already
        gone are skipped). Returns the new memories' ids, in order."""
        prepared = self._prepare(items) if items else []
        self._await_loaded()
        with self._write_lock:
            ops = [Operation(new_id(), PUT, self.clock.now(), memory=p.memory,
                             vector=p.vector) for p in prepared]
            now = time.time()
            ops += [Operation(new_id(), FORGET, self.clock.now(), target=i, at=now)
                    for i in dict.fromkeys(forget_ids) if self.memories.get(i) is not None]
            if ops:
                self._commit(ops)
        return [p.memory.id for p in prepared]
