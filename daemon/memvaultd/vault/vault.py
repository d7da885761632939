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
`vault_reads.py`, `vault_writes.py`, `vault_upkeep.py` and `vault_sync.py`;
`Vault` itself opens, loads and closes the vault.

It knows nothing of gRPC; the servicer translates requests into
`requests.py` terms and maps `memvault_base.errors` to status codes.
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path

from memvault_base.errors import MemvaultError
from memvaultd.config.settings import Config
from memvaultd.embedding.embedder import Embedder
from memvaultd.model.operations import TURNS, decode
from memvaultd.storage.keys import create_vault_key, load_vault_key
from memvaultd.storage.snapshot_body import decode_state
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.core import MAX_BATCH
from memvaultd.vault.events import EventBus
from memvaultd.vault.reads import Facet, Recalled, VaultReads
from memvaultd.vault.replication import VaultSync
from memvaultd.vault.upkeep import VaultUpkeep
from memvaultd.vault.writes import VaultWrites

log = logging.getLogger("memvaultd.vault")

__all__ = ["MAX_BATCH", "Facet", "Recalled", "Vault"]


class Vault(VaultWrites, VaultReads, VaultUpkeep, VaultSync):
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
