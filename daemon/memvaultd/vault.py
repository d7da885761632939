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
state and `_commit`), `vault_access.py`, `vault_snapshots.py`,
`vault_reads.py`, `vault_writes.py` and `vault_upkeep.py`; `Vault` itself
opens, loads and closes the vault.

It knows nothing of gRPC; the servicer translates requests into
`requests.py` terms and maps `memvault.errors` to status codes.
"""

from __future__ import annotations

import gc
import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from memvault.errors import MemvaultError

from .config import Config
from .crypto.entropy import new_id
from .crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from .embedder import Embedder
from .events import EventBus
from .keys import create_vault_key, load_vault_key
from .merge import VaultState
from .operations import (
    PUT,
    TURNS,
    Operation,
    decode,
    encode,
)
from .oplog import OperationLog
from .snapshot import SnapshotStore
from .state import State, decode_state, encode_state
from .vault_core import MAX_BATCH
from .vault_info import VaultInfo
from .vault_reads import Facet, Recalled, VaultReads
from .vault_snapshots import VaultSnapshots
from .vault_upkeep import VaultUpkeep
from .vault_writes import VaultWrites

log = logging.getLogger("memvaultd.vault")

# Puts `genesis` logs under one hold of the write lock: ~70 ms at 100k.
_GENESIS_CHUNK = 1_000
_GENESIS_PAUSE_S = 0.001  # between chunks: 0.1 s in all at 100k

__all__ = ["MAX_BATCH", "Facet", "Recalled", "Vault"]


class Vault(VaultWrites, VaultReads, VaultUpkeep, VaultSnapshots):
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
