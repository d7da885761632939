"""The vault: the domain of memvaultd. Remember, recall, get, forget.

It owns the in-memory index and the sealed storage behind it, and keeps
one rule: a write is appended to the operation log and fsynced before it is
applied to the index and acknowledged, so an acknowledged write survives
`kill -9` and power loss. Start-up is the same rule run backwards: newest
snapshot, then every log record after it.

It knows nothing of gRPC; the servicer translates requests into
`requests.py` terms and maps `memvault.errors` to status codes.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memvault.errors import InvalidArgument, NotFound, ResourceExhausted, Unavailable

from . import memory as m
from .config import Config
from .crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from .embedder import Embedder
from .events import EventBus
from .hlc import Clock
from .index import MemoryIndex
from .keys import UnlockedKey, create_vault_key, load_vault_key
from .memory import Memory
from .operations import FORGET, PUT, REINFORCE, Operation, decode, encode
from .oplog import OperationLog
from .recall.filters import parse_filter
from .recall.ranking import OVERFETCH, Scored, check_top_k, rank
from .requests import MemoryDraft, RecallQuery, RememberOutcome
from .snapshot import SnapshotStore
from .state import State, decode_state, encode_state
from .vault_info import VaultInfo

log = logging.getLogger("memvaultd.vault")

Vector = npt.NDArray[np.float32]
MAX_BATCH = 10_000
# How long a request waits for start-up (snapshot load and replay) to finish.
_LOAD_WAIT_S = 60.0


@dataclass(frozen=True)
class _Prepared:
    memory: Memory
    vector: Vector


class Vault:
    def __init__(self, data_dir: Path, info: VaultInfo, key: UnlockedKey, config: Config,
                 embedder: Embedder, events: EventBus) -> None:
        self.data_dir = data_dir
        self.info = info
        self.key_storage = key.storage
        self.key_detail = key.detail
        self.config = config
        self.embedder = embedder
        self.events = events
        vault_id = info.vault_id_bytes
        self.log = OperationLog(data_dir / "log", derive_key(key.key, purpose=PURPOSE_LOG),
                                vault_id)
        self.snapshots = SnapshotStore(data_dir / "snapshots",
                                       derive_key(key.key, purpose=PURPOSE_SNAPSHOT), vault_id)
        self.index = MemoryIndex(info.dimension)
        self.tombstones: set[str] = set()
        self.clock = Clock(info.device_id)
        self.applied_txid = 0
        self._snapshot_txid = 0
        self._write_lock = threading.Lock()
        self._snapshot_lock = threading.Lock()
        self._loaded = threading.Event()
        self._txid_changed = threading.Condition()

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
        started = time.monotonic()
        latest = self.snapshots.latest()
        if latest is not None:
            state = decode_state(latest[1])
            for memory, vector in zip(state.memories, state.vectors, strict=True):
                self.index.put(memory, vector)
            self.tombstones = set(state.tombstones)
            self.clock.observe(state.stamp)
            self.applied_txid = self._snapshot_txid = state.seq
        replayed = 0
        for seq, record in self.log.replay(after=self.applied_txid):
            self._apply(decode(record))
            self.applied_txid = seq
            replayed += 1
        self._loaded.set()
        log.info("loaded %d memories (snapshot at %d, %d log records) in %.2f s",
                 len(self.index), self._snapshot_txid, replayed, time.monotonic() - started)

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set()

    def _await_loaded(self) -> None:
        if not self._loaded.wait(_LOAD_WAIT_S):
            raise Unavailable("the vault is still loading; try again shortly")

    # -- writes ------------------------------------------------------------

    def remember(self, drafts: Sequence[MemoryDraft]) -> list[RememberOutcome]:
        if not drafts:
            raise InvalidArgument("memories: at least one memory is required")
        if len(drafts) > MAX_BATCH:
            raise InvalidArgument(f"memories: {len(drafts)} is over the batch limit of {MAX_BATCH}")
        prepared = self._prepare(drafts)
        self._await_loaded()
        with self._write_lock:
            ops, restated = self._plan(prepared)
            first_txid = self._commit(ops)
        self._maybe_snapshot()
        return [RememberOutcome(op.memory_id, first_txid + i, was_restated)
                for i, (op, was_restated) in enumerate(zip(ops, restated, strict=True))]

    def forget(self, memory_id: str) -> int:
        self._await_loaded()
        with self._write_lock:
            if self.index.get(memory_id) is None:
                raise NotFound(f"id: no memory {memory_id!r}")
            txid = self._commit([Operation(uuid.uuid4().hex, FORGET, self.clock.now(),
                                           target=memory_id, at=time.time())])
        self._maybe_snapshot()
        return txid

    def _prepare(self, drafts: Sequence[MemoryDraft]) -> list[_Prepared]:
        """Validate every draft and embed those without a vector. Raises
        before anything is written when any one of them is bad."""
        now = time.time()
        memories = [self._validated(draft, now, f"memories[{i}]." if len(drafts) > 1 else "")
                    for i, draft in enumerate(drafts)]
        vectors: list[Vector | None] = [
            self._own_vector(draft.vector, f"memories[{i}].vector" if len(drafts) > 1
                             else "vector") if draft.vector else None
            for i, draft in enumerate(drafts)]
        to_embed = [i for i, vector in enumerate(vectors) if vector is None]
        if to_embed:
            embedded = self.embedder.embed_documents([memories[i].text for i in to_embed])
            for i, vector in zip(to_embed, embedded, strict=True):
                vectors[i] = vector
        return [_Prepared(memory, vector) for memory, vector in zip(memories, vectors, strict=True)
                if vector is not None]

    def _validated(self, draft: MemoryDraft, now: float, where: str) -> Memory:
        def named(message: str) -> InvalidArgument:
            return InvalidArgument(where + message)

        try:
            payload = json.loads(draft.payload_json) if draft.payload_json else {}
        except (ValueError, RecursionError) as exc:
            raise named(f"payload: not valid JSON: {exc}") from exc
        if not isinstance(payload, dict):
            raise named("payload: must be a JSON object")
        if len(draft.payload_json.encode("utf-8", "surrogatepass")) > m.MAX_PAYLOAD_BYTES:
            raise named(f"payload: over the limit of {m.MAX_PAYLOAD_BYTES} bytes")
        try:
            memory = Memory(
                id=uuid.uuid4().hex,
                text=m.check_text(draft.text),
                type=m.normalize_type(draft.type),
                topic_key=m.check_short(draft.topic_key, "topic_key"),
                payload=payload,
                entity=m.check_short(draft.entity, "entity"),
                tags=m.check_tags(list(draft.tags)),
                category=m.check_short(draft.category, "category"),
                importance=m.check_importance(draft.importance),
                session_id=m.check_short(draft.session_id, "session_id"),
                source=m.check_short(draft.source, "source"),
                tier=m.normalize_tier(draft.tier),
                created_at=now,
                last_reinforced_at=now,
                expires_at=m.check_time(draft.expires_at, "expires_at"),
                supersedes=draft.supersedes,
            )
        except InvalidArgument as exc:
            raise named(str(exc)) from exc
        if draft.supersedes and self.index.get(draft.supersedes) is None:
            raise named(f"supersedes: no memory {draft.supersedes!r}")
        return memory

    def _own_vector(self, values: Sequence[float], field: str) -> Vector:
        """A caller's own embedding, checked and scaled to unit length (the
        ranking formula's distance assumes unit vectors)."""
        dimension = self.info.dimension
        if len(values) != dimension:
            raise InvalidArgument(f"{field}: has {len(values)} dimensions; this vault's "
                                  f"model ({self.info.model}) uses {dimension}")
        vector = np.asarray(values, dtype=np.float32)
        if not np.all(np.isfinite(vector)):
            raise InvalidArgument(f"{field}: contains NaN or infinity")
        norm = float(np.linalg.norm(vector))
        if norm == 0.0 or not math.isfinite(norm):
            raise InvalidArgument(f"{field}: must not be the zero vector")
        return vector / np.float32(norm)

    def _plan(self, prepared: list[_Prepared]) -> tuple[list[Operation], list[bool]]:
        """One operation per input: a put, or a reinforce of the memory it
        restates — an existing one, or one earlier in the same batch."""
        ops: list[Operation] = []
        restated: list[bool] = []
        batch: list[_Prepared] = []
        now = time.time()
        for item in prepared:
            target = self._restated(item, batch, now)
            if target is None:
                ops.append(Operation(uuid.uuid4().hex, PUT, self.clock.now(),
                                     memory=item.memory, vector=item.vector))
                batch.append(item)
            else:
                ops.append(Operation(uuid.uuid4().hex, REINFORCE, self.clock.now(),
                                     target=target, at=now))
            restated.append(target is not None)
        return ops, restated

    def _restated(self, item: _Prepared, batch: list[_Prepared], now: float) -> str | None:
        threshold = self.config.restatement_threshold
        new = item.memory

        def same_kind(old: Memory) -> bool:
            return (old.type == new.type and old.topic_key == new.topic_key
                    and _visible(old, now))

        best_id, best_cos = None, threshold
        for old, distance in self.index.search(item.vector, 1, same_kind):
            cos = 1.0 - distance * distance / 2.0
            if cos >= best_cos:
                best_id, best_cos = old.id, cos
        for earlier in batch:
            cos = float(earlier.vector @ item.vector)
            if same_kind(earlier.memory) and cos >= best_cos:
                best_id, best_cos = earlier.memory.id, cos
        return best_id

    def _commit(self, ops: list[Operation]) -> int:
        """Append `ops` durably, then apply them. Returns the first txid."""
        try:
            last = self.log.append([encode(op) for op in ops])
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise ResourceExhausted("the data directory's disk is full; nothing was "
                                        "written. Free space and try again") from exc
            raise
        for op in ops:
            self._apply(op)
        with self._txid_changed:
            self.applied_txid = last
            self._txid_changed.notify_all()
        for op in ops:
            self.events.publish("forget" if op.kind == FORGET else "remember", id=op.memory_id)
        return last - len(ops) + 1

    def _apply(self, op: Operation) -> None:
        self.clock.observe(op.stamp)
        if op.kind == PUT:
            assert op.memory is not None and op.vector is not None
            if op.memory.id in self.tombstones:
                return
            self.index.put(op.memory, op.vector)
            old = self.index.get(op.memory.supersedes) if op.memory.supersedes else None
            if old is not None:
                self.index.update(old.copy(superseded_by=op.memory.id))
        elif op.kind == REINFORCE:
            old = self.index.get(op.target)
            if old is not None:
                self.index.update(old.copy(reinforce_count=old.reinforce_count + 1,
                                           last_reinforced_at=max(old.last_reinforced_at, op.at)))
        elif op.kind == FORGET:
            self.index.remove(op.target)
            self.tombstones.add(op.target)

    # -- reads -------------------------------------------------------------

    def recall(self, query: RecallQuery) -> list[Scored]:
        top_k = check_top_k(query.top_k)
        if query.min_score is not None and not math.isfinite(query.min_score):
            raise InvalidArgument("min_score: must be a finite number")
        matches = parse_filter(query.filter_json or None)
        if query.vector:
            vector = self._own_vector(query.vector, "query_vector")
        elif query.text.strip():
            m.check_text(query.text, "query")
            vector = self.embedder.embed_query(query.text)
        else:
            raise InvalidArgument("query: must not be empty")
        self._await_loaded()
        now = time.time()

        def keep(memory: Memory) -> bool:
            return _visible(memory, now) and matches.matches(memory)

        candidates = self.index.search(vector, OVERFETCH * top_k, keep)
        return rank(candidates, now=now, half_lives=self.config.half_lives, top_k=top_k,
                    min_score=query.min_score)

    def get(self, memory_id: str) -> tuple[Memory, Vector]:
        self._await_loaded()
        memory = self.index.get(memory_id)
        vector = self.index.vector(memory_id)
        if memory is None or vector is None:
            raise NotFound(f"id: no memory {memory_id!r}")
        return memory, vector

    # -- snapshots ---------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self.applied_txid - self._snapshot_txid >= self.config.snapshot_every:
            threading.Thread(target=self.snapshot, name="snapshot", daemon=True).start()

    def snapshot(self) -> bool:
        """Seal the whole state at the current txid, then drop the log
        segments it covers. Returns False when there was nothing new."""
        if not self._snapshot_lock.acquire(blocking=False):
            return False  # one is already being written
        try:
            with self._write_lock:
                if self.applied_txid == self._snapshot_txid or not self.loaded:
                    return False
                memories, vectors = self.index.export()
                state = State(self.applied_txid, self.info.dimension, self.clock.last,
                              memories, vectors, frozenset(self.tombstones))
                self.log.rotate()
            self.snapshots.write(state.seq, encode_state(state))
            self.snapshots.prune(keep=2)
            self.log.prune(state.seq)
            self._snapshot_txid = state.seq
            log.info("snapshot at txid %d (%d memories)", state.seq, len(memories))
            return True
        finally:
            self._snapshot_lock.release()

    def close(self) -> None:
        if self.loaded:
            self.snapshot()
        self.log.close()


def _visible(memory: Memory, now: float) -> bool:
    """Recall shows neither superseded, expired nor archived memories
    unless asked (and asking arrives with the full memory model)."""
    return not memory.superseded_by and not memory.is_expired(now) and memory.tier != m.ARCHIVED
