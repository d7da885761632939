"""The vault: the domain of memvaultd.

It owns the in-memory layers (memories, transcript turns, the trash) and the sealed
storage behind them, and keeps one rule: a write is appended to the
operation log and fsynced before it is applied and acknowledged, so an
acknowledged write survives `kill -9` and power loss. Start-up is the same
rule run backwards: newest snapshot, then every log record after it.

Access counts (recall's `mark_accessed`) are the one exception: they are
applied at once and written in one record per second by a background flush,
so a recall never waits on the disk. A crash can lose the last second of
access counts, never a memory.

`Vault` composes its parts, each an object with its own state over the
shared `VaultCore`: `AccessMarks`, `Snapshots`, `Writes`, `Reads`, `Upkeep`
and `Replication` (what sync asks of the vault). Its methods are the vault's
whole surface: the serving layer, the note watcher and sync call nothing
else. It knows nothing of gRPC or of the sync worker, which it tells of each
local write through the callback sync gives `on_local_commit`.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from memvault_base.errors import IntegrityError, MemvaultError
from memvaultd.config.settings import Config
from memvaultd.crypto.device_keys import DeviceKeys
from memvaultd.embedding.embedder import Embedder
from memvaultd.index.heap import trim_heap
from memvaultd.index.layer import Layer
from memvaultd.model.commands import (
    ImportedRecord,
    ListQuery,
    MemoryDraft,
    RecallQuery,
    RememberOutcome,
    TurnDraft,
)
from memvaultd.model.memory import Memory
from memvaultd.model.operations import TURNS, Operation, decode
from memvaultd.model.scopes import FULL, Access
from memvaultd.model.vector import Vector
from memvaultd.storage.crash_points import reached
from memvaultd.storage.join_journal import JoinJournal
from memvaultd.storage.keys import UnlockedKey, create_vault_key, has_vault_key, load_vault_key
from memvaultd.storage.rekey_journal import RekeyJournal
from memvaultd.storage.set_aside import set_aside
from memvaultd.storage.snapshot_body import SnapshotBody
from memvaultd.storage.vault_info import VaultInfo, copy_mark
from memvaultd.upkeep import consolidation
from memvaultd.upkeep.sweep import SweepPlan
from memvaultd.vault import footprint
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.check import REPAIR_HINT, refuse_unfinished_repair
from memvaultd.vault.core import MAX_BATCH, VaultCore
from memvaultd.vault.deltas import newest_delta
from memvaultd.vault.events import Event, EventBus
from memvaultd.vault.listing import ListPage
from memvaultd.vault.reads import Facet, PreparedRecall, Reads, Recalled
from memvaultd.vault.rekey import Rekey
from memvaultd.vault.replication import Replication
from memvaultd.vault.snapshots import Snapshots, newest_usable, restore
from memvaultd.vault.upkeep import Upkeep
from memvaultd.vault.writes import Writes

log = logging.getLogger("memvaultd.vault")

__all__ = ["MAX_BATCH", "Facet", "ListPage", "PreparedRecall", "Recalled", "Vault"]


class Vault:
    def __init__(self, data_dir: Path, info: VaultInfo, key: UnlockedKey, config: Config,
                 embedder: Embedder, events: EventBus) -> None:
        self.core = core = VaultCore(data_dir, info, key, config, embedder, events)
        self.marks = AccessMarks(core)
        self.snapshots = Snapshots(core, self.marks)
        self.writes = Writes(core)
        self.reads = Reads(core, self.marks)
        self.upkeep = Upkeep(core)
        self.replication = Replication(core, self.marks, self.snapshots)
        self.rekey = Rekey(core, self.marks, self.snapshots)
        core.after_commit.append(self.snapshots.if_due)

    # -- opening, loading, closing ---------------------------------------------

    @classmethod
    def open(cls, data_dir: Path, config: Config, embedder: Embedder, events: EventBus, *,
             prompt: bool = True) -> Vault:
        """Unlock (or create) the vault in `data_dir`. Fast: loading the
        memories is `load()`, so the socket can be served meanwhile.

        First, a `join` cut short is finished or dropped (`JoinJournal`),
        and so is a rekey of the local files (`RekeyJournal`).
        A new vault is named (`vault.json`) before its key is stored, and a
        vault that never opened its log has nothing sealed yet: one whose
        first start was cut short gets its key now, whichever step the cut
        came at. Last, a copied data directory becomes a device of its own
        (`VaultInfo.as_copy`)."""
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        data_dir.chmod(0o700)
        JoinJournal(data_dir).recover()
        info = VaultInfo.load(data_dir)
        if info is None:
            info = VaultInfo.new(config.model, embedder.dimension(), copy_mark(data_dir))
            info.save(data_dir)
            reached("first-start:named")
            log.info("created vault %s", info.vault_id)
        info.check_model(config.model)
        RekeyJournal(data_dir, info.vault_id_bytes).recover()
        if not (data_dir / "log").exists() and not has_vault_key(data_dir, info.vault_id_bytes):
            key = create_vault_key(data_dir, info.vault_id_bytes, storage=config.key_storage,
                                   prompt=prompt)
            reached("first-start:key")
        else:
            key = load_vault_key(data_dir, info.vault_id_bytes, prompt=prompt)
        log.info("vault key: %s", key.detail)
        vault = cls(data_dir, info, key, config, embedder, events)
        vault.core.claim_copy(copy_mark(data_dir))
        vault.core.device_keys()
        return vault

    def load(self) -> None:
        """Newest snapshot, then the log after it. Requests wait for this."""
        try:
            self._load()
        except BaseException as exc:
            # Waiting requests learn at once that the vault will not open.
            self.core.finish_loading(f"the vault could not be loaded: {exc}")
            raise

    def _load(self) -> None:
        core = self.core
        started = time.monotonic()
        refuse_unfinished_repair(core.data_dir)
        # Weighed before anything is decrypted in bulk: a vault larger than
        # the memory at hand is refused, not loaded into swap (footprint.py).
        footprint.check(footprint.memories_to_load(core.snapshot_store, core.log.last_seq,
                                                   core.info.dimension),
                        footprint.available(core.config.memory_limit_mb),
                        enforce=core.config.memory_check)
        # A newest snapshot that does not authenticate is passed over for the
        # older one, whose log the prune keeps (snapshots.py).
        body, passed_over = newest_usable(core.snapshot_store)
        if body is None and passed_over:
            raise IntegrityError(f"{passed_over[0][1]}; no older snapshot can stand in for it"
                                 f"{_others(passed_over)}. {REPAIR_HINT}")
        restored = body is not None
        damaged_deltas: list[tuple[Path, str]] = []
        if body is not None:
            # A stop seals what changed since the newest snapshot as a delta
            # over it (snapshots.py); one that cannot be used is replaced by
            # the log after the snapshot, which holds the same writes.
            delta, damaged_deltas = newest_delta(core.snapshot_store, body.seq,
                                                 core.log.last_seq)
            restore(core.state, body, delta)
            core.clock.observe(body.stamp if delta is None else delta.stamp)
            self.snapshots.txid = self.snapshots.delta_base = body.seq
            self.snapshots.delta_txid = 0 if delta is None else delta.seq
            core.applied_txid = body.seq if delta is None else delta.seq
            del delta
        del body  # its vectors are a view of the whole decrypted body
        replayed = 0
        try:
            for seq, record in core.log.replay(after=core.applied_txid):
                core.apply(decode(record))
                core.applied_txid = seq
                replayed += 1
        except IntegrityError as exc:
            if passed_over:
                raise IntegrityError(f"{passed_over[0][1]}; the older snapshot cannot stand in "
                                     f"for it: {exc}. {REPAIR_HINT}") from exc
            raise IntegrityError(f"{exc}. {REPAIR_HINT}") from exc
        # Empty after a repair: new records go after the snapshot's seq.
        core.log.continue_after(core.applied_txid)
        if passed_over:
            self._set_aside(passed_over)
        if damaged_deltas:
            self._set_deltas_aside(damaged_deltas)
        # A million memories are tens of millions of objects that never die;
        # left to the cyclic collector, each full collection pauses every
        # thread for ~0.4 s at 200k memories (6 µs once frozen).
        gc.collect()
        gc.freeze()
        trim_heap()  # the body and the parse's temporaries (`index/heap.py`)
        core.finish_loading()
        # The keyword indexes a snapshot's restore left (1.2 s at 100k): a
        # keyword search or write made meanwhile builds them itself, or
        # waits for this thread to.
        if restored:
            threading.Thread(target=self._finish_restore, name="keywords", daemon=True).start()
        self.marks.start()
        log.info("loaded %d memories, %d turns (snapshot at %d, %d log records) in %.2f s",
                 len(core.memories), len(core.state.layers[TURNS]), self.snapshots.txid,
                 replayed, time.monotonic() - started)

    def _finish_restore(self) -> None:
        started = time.monotonic()
        self.core.state.finish_restore()
        trim_heap()
        log.info("keyword index ready in %.2f s", time.monotonic() - started)

    def _set_aside(self, passed_over: list[tuple[Path, str]]) -> None:
        why = passed_over[0][1]
        try:
            where = set_aside(self.core.data_dir, passed_over)
        except OSError as exc:
            log.warning("%s: started from the older snapshot %d and the log after it, nothing "
                        "lost; the damaged file could not be moved aside (%s)",
                        why, self.snapshots.txid, exc)
            return
        log.warning("%s: started from the older snapshot %d and the log after it, nothing "
                    "lost; the damaged file is kept in %s", why, self.snapshots.txid,
                    where.relative_to(self.core.data_dir))

    def _set_deltas_aside(self, damaged: list[tuple[Path, str]]) -> None:
        """Deltas that do not authenticate, out of the way once the log after
        their snapshot has been replayed in their place: kept for a person to
        look at (`memvault check` lists them), never read again."""
        try:
            where = set_aside(self.core.data_dir, damaged)
        except OSError as exc:
            log.warning("%s: the damaged delta could not be moved aside (%s)", damaged[0][1],
                        exc)
            return
        log.warning("%s: started from snapshot %d and the log after it, nothing lost; the "
                    "damaged delta is kept in %s", damaged[0][1], self.snapshots.txid,
                    where.relative_to(self.core.data_dir))

    def stopping(self) -> None:
        """A stop has begun: a background snapshot gives up at its next
        record batch, and the access marks' flusher ends; writes go on
        until `close`, whose delta then holds them."""
        self.core.closing.set()

    def close(self) -> None:
        core = self.core
        self.stopping()
        if core.loaded:
            try:
                # A background snapshot still being written would die with
                # the process (the next start then replayed up to 10,000
                # records, ~1 s at 100k): wait for it, then seal what changed
                # since, as a delta over it.
                self.snapshots.at_stop()
            except (OSError, MemvaultError) as exc:
                # Everything acknowledged is in the log already; the next
                # start replays it. A snapshot only makes that start faster.
                log.warning("no snapshot at stop (%s); the log has every write", exc)
            self.marks.flush()
        core.log.close()

    # -- what the vault is ----------------------------------------------------

    @property
    def info(self) -> VaultInfo:
        return self.core.info

    @property
    def data_dir(self) -> Path:
        return self.core.data_dir

    @property
    def vault_key(self) -> bytes:
        return self.core.vault_key

    def device_keys(self) -> DeviceKeys:
        return self.core.device_keys()

    @property
    def key_storage(self) -> str:
        return self.core.key_storage

    @property
    def config(self) -> Config:
        return self.core.config

    @config.setter
    def config(self, config: Config) -> None:
        """A new configuration, applied from the next call on (live config.toml)."""
        self.core.config = config

    @property
    def embedder(self) -> Embedder:
        return self.core.embedder

    @property
    def memories(self) -> Layer:
        return self.core.memories

    @property
    def trash_size(self) -> int:
        return len(self.core.state.trash)

    @property
    def applied_txid(self) -> int:
        return self.core.applied_txid

    @property
    def loaded(self) -> bool:
        return self.core.loaded

    def snapshot(self, wait: bool = False) -> bool:
        return self.snapshots.snapshot(wait)

    def flush_access(self) -> None:
        self.marks.flush()

    # -- writes (writes.py) ---------------------------------------------------

    # Each takes the caller's declared access (`model/scopes.py`); the
    # default, full access, is what the daemon's own callers have.

    def remember(self, items: Sequence[MemoryDraft], access: Access = FULL
                 ) -> list[RememberOutcome]:
        return self.writes.remember(items, access)

    def supersede(self, memory_id: str, draft: MemoryDraft, cleared: Sequence[str] = (),
                  access: Access = FULL) -> RememberOutcome:
        return self.writes.supersede(memory_id, draft, cleared, access)

    def update(self, memory_id: str, draft: MemoryDraft, names: Sequence[str],
               access: Access = FULL) -> tuple[int, Memory]:
        return self.writes.update(memory_id, draft, names, access)

    def reinforce(self, memory_id: str, access: Access = FULL) -> tuple[int, Memory]:
        return self.writes.reinforce(memory_id, access)

    def forget(self, memory_id: str = "", filter_json: str = "", dry_run: bool = False, *,
               purge: bool = False, by: str = "", access: Access = FULL
               ) -> tuple[int, list[str]]:
        return self.writes.forget(memory_id, filter_json, dry_run, purge=purge, by=by,
                                  access=access)

    def restore(self, ids: Sequence[str], every: bool = False, access: Access = FULL
                ) -> tuple[int, list[Memory]]:
        return self.writes.restore(ids, every, access)

    def empty_trash(self, access: Access = FULL) -> tuple[int, list[str]]:
        return self.writes.empty_trash(access)

    def append_turns(self, session_id: str, turns: Sequence[TurnDraft], access: Access = FULL
                     ) -> tuple[int, list[str]]:
        return self.writes.append_turns(session_id, turns, access)

    def import_memories(self, records: Sequence[ImportedRecord], allow_secret: bool = False,
                        access: Access = FULL) -> tuple[int, int, int]:
        return self.writes.import_memories(records, allow_secret, access)

    def replace_chunks(self, items: Sequence[MemoryDraft], forget_ids: Sequence[str] = ()
                       ) -> list[str]:
        return self.writes.replace_chunks(items, forget_ids)

    # -- reads (reads.py) -----------------------------------------------------

    def prepare_recall(self, query: RecallQuery) -> PreparedRecall:
        return self.reads.prepare(query)

    def recall(self, query: RecallQuery | PreparedRecall) -> Recalled:
        return self.reads.recall(self._prepared(query))

    def recall_at_once(self, query: RecallQuery | PreparedRecall) -> Recalled | None:
        return self.reads.recall_at_once(self._prepared(query))

    def recall_ready(self, query: RecallQuery | PreparedRecall) -> bool:
        return self.reads.recall_ready(self._prepared(query))

    def _prepared(self, query: RecallQuery | PreparedRecall) -> PreparedRecall:
        return query if isinstance(query, PreparedRecall) else self.reads.prepare(query)

    def get(self, memory_id: str, access: Access = FULL
            ) -> tuple[Memory, Vector, list[Memory], list[Memory]]:
        return self.reads.get(memory_id, access)

    def chain(self, memory: Memory) -> list[Memory]:
        return self.reads.chain(memory)

    def resolve_id(self, ref: str, access: Access = FULL) -> str:
        return self.reads.resolve_id(ref, access)

    def facets(self, field: str, filter_json: str = "", access: Access = FULL) -> list[Facet]:
        return self.reads.facets(field, filter_json, access)

    def list_memories(self, query: ListQuery) -> ListPage:
        return self.reads.list_memories(query)

    def export(self, access: Access = FULL) -> Iterator[tuple[Memory, Vector]]:
        return self.reads.export(access)

    def band_counts(self) -> dict[str, int]:
        return self.reads.band_counts()

    def trash(self, access: Access = FULL) -> list[tuple[Memory, float]]:
        return self.reads.trash(access)

    def shows_event(self, event: Event, access: Access) -> bool:
        return self.reads.shows_event(event, access)

    # -- upkeep (upkeep.py) ---------------------------------------------------

    def sweep(self, dry_run: bool, threshold: float | None = None, access: Access = FULL
              ) -> tuple[int, SweepPlan]:
        return self.upkeep.sweep(dry_run, threshold, access)

    def consolidate(self, request: consolidation.Request, dry_run: bool,
                    access: Access = FULL
                    ) -> tuple[int, list[consolidation.Consolidated], int]:
        return self.upkeep.consolidate(request, dry_run, access)

    def last_upkeep(self, what: str) -> float:
        return self.upkeep.last_upkeep(what)

    def purge_trash(self) -> tuple[int, list[str]]:
        return self.upkeep.purge_trash()

    def purge_time(self) -> float:
        return self.upkeep.purge_time()

    # -- what sync asks of the vault (replication.py; sync/vault_side.py) ------

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int] | None:
        return self.replication.local_ops_after(seq)

    def holds_log_after(self, seq: int) -> bool:
        return self.replication.holds_log_after(seq)

    def repush(self) -> int:
        return self.replication.repush()

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        return self.replication.apply_remote(ops)

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        return self.replication.state_at_sync(pushed_seq)

    def size(self) -> int:
        return self.replication.size()

    def genesis(self) -> int:
        return self.replication.genesis()

    def adopt(self, info: VaultInfo, key: bytes, base: SnapshotBody | None,
              stage: Callable[[Path], None]) -> int:
        return self.replication.adopt(info, key, base, stage)

    def reseal(self, key: bytes, epoch: int, stage: Callable[[Path], None]) -> None:
        self.rekey.reseal(key, epoch, stage)

    def keep_log_from(self, seq: int | None) -> None:
        """Never prune the log past `seq` (None: no floor): the records the
        remote does not hold yet."""
        self.core.prune_floor = seq

    def on_local_commit(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` after every commit of this device's own operations."""
        self.core.on_local_commit = callback


def _others(passed_over: list[tuple[Path, str]]) -> str:
    rest = "; ".join(why for _, why in passed_over[1:])
    return f" ({rest})" if rest else ""
