"""What every part of the vault shares: the state, the sealed log behind it,
the waits for start-up and for a txid, and `commit`, the one way an
operation reaches the state (logged and fsynced first, then applied:
`vault.py` says why).

Each part of the vault (`writes.py`, `reads.py`, `access.py`,
`snapshots.py`, `upkeep.py`, `replication.py`) is an object holding this
core; `vault.Vault` builds them and wires the two things a commit tells
others: the snapshot check (`after_commit`) and sync's wake-up
(`on_local_commit`, set by sync through the vault).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from memvault_base.errors import NotFound, ResourceExhausted, Unavailable
from memvaultd.config.settings import Config
from memvaultd.crypto.device_keys import DeviceKeys
from memvaultd.crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from memvaultd.embedding.embedder import Embedder
from memvaultd.index.layer import Layer
from memvaultd.model import memory as m
from memvaultd.model.hlc import Clock
from memvaultd.model.memory import Memory
from memvaultd.model.operations import ACCESS, FORGET, RESTORE, TRASH, UPKEEP, Operation, encode
from memvaultd.storage.device_secret import device_keys
from memvaultd.storage.keys import UnlockedKey
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.vault.events import EventBus
from memvaultd.vault.genesis import PendingPuts
from memvaultd.vault.state import VaultState

log = logging.getLogger("memvaultd.vault")

MAX_BATCH = 10_000
# How long a request waits for start-up (snapshot load and replay) to finish,
# and for `min_txid` to be applied.
_LOAD_WAIT_S = 60.0
_TXID_WAIT_S = 10.0


class VaultCore:
    def __init__(self, data_dir: Path, info: VaultInfo, key: UnlockedKey, config: Config,
                 embedder: Embedder, events: EventBus) -> None:
        self.data_dir = data_dir
        self.config = config
        self.embedder = embedder
        self.events = events
        self.state = VaultState(info.dimension)
        self.applied_txid = 0
        self.write_lock = threading.Lock()
        # Guards the records' access marks: a recall's read-modify-write of
        # access_count, and every write's apply, which would otherwise undo a
        # mark (or be undone by one). Held for microseconds, never over I/O
        # but a snapshot's flush, so recalls never queue behind the write
        # lock, which a remember holds across its log append and fsync.
        # Order: the write lock first, then this one.
        self.access_lock = threading.Lock()
        self.closing = threading.Event()
        # Called after every commit, under the write lock (the snapshot check).
        self.after_commit: list[Callable[[], None]] = []
        # Called after every commit of this device's own operations: sync's
        # wake-up, once sync is set up.
        self.on_local_commit: Callable[[], None] | None = None
        # The last log seq the remote holds: the log is never pruned past it.
        self.prune_floor: int | None = None
        # The puts `genesis` has yet to log, by memory id, in order: a write
        # that names one of them logs that put first (`commit`), and no
        # snapshot starts while any is left (`Snapshots.if_due`).
        self.genesis_rest = PendingPuts()
        self._loaded = threading.Event()
        self._load_error = ""
        self._applied = threading.Condition()
        self.clock = Clock(info.device_id)  # the device id survives a `join`
        self._device_keys: tuple[tuple[bytes, str], DeviceKeys] | None = None
        self.become(info, key)

    def become(self, info: VaultInfo, key: UnlockedKey) -> None:
        """Use `info`'s ids and `key` from now on: at opening, and after `join`."""
        self.info = info
        self.unlocked = key
        self.key_storage, self.key_detail, self.vault_key = key.storage, key.detail, key.key
        vault_id = info.vault_id_bytes
        self.log = OperationLog(self.data_dir / "log", derive_key(key.key, purpose=PURPOSE_LOG),
                                vault_id)
        self.snapshot_store = SnapshotStore(self.data_dir / "snapshots",
                                            derive_key(key.key, purpose=PURPOSE_SNAPSHOT),
                                            vault_id)

    def device_keys(self) -> DeviceKeys:
        """This device's keys in this vault, created the first time they are
        asked for (a vault from before devices had keys, a copy, a join)."""
        ids = (self.info.vault_id_bytes, self.info.device_id)
        if self._device_keys is None or self._device_keys[0] != ids:
            keys = device_keys(self.data_dir, *ids, self.unlocked)
            self._device_keys = (ids, keys)
        return self._device_keys[1]

    def claim_copy(self, mark: str) -> None:
        """At opening: if the data directory is another copy than the one
        `vault.json` names (`VaultInfo.as_copy`), become a new device."""
        if self.info.copy == mark:
            return
        info = self.info.as_copy(mark, self.log.last_seq)
        info.save(self.data_dir)
        if info.device_id != self.info.device_id:
            log.warning("this data directory is a copy of device %s's (copied, restored or "
                        "on a cloned machine): it is device %s from now on",
                        self.info.device_id, info.device_id)
        self.info = info
        self.clock.device = info.device_id

    @property
    def memories(self) -> Layer:
        return self.state.memories

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set() and not self._load_error

    def finish_loading(self, error: str = "") -> None:
        """Start-up is over: requests waiting for it go on (or learn `error`)."""
        self._load_error = error
        self._loaded.set()

    def await_loaded(self) -> None:
        if not self._loaded.wait(_LOAD_WAIT_S):
            raise Unavailable("the vault is still loading; try again shortly")
        if self._load_error:
            raise Unavailable(self._load_error)

    def await_txid(self, txid: int) -> None:
        if not txid:
            return
        with self._applied:
            if not self._applied.wait_for(lambda: self.applied_txid >= txid, _TXID_WAIT_S):
                raise Unavailable(f"min_txid: transaction {txid} is not applied here yet "
                                  f"(applied: {self.applied_txid}); retry later")

    def set_applied(self, txid: int) -> None:
        with self._applied:
            self.applied_txid = txid
            self._applied.notify_all()

    def get(self, memory_id: str) -> Memory:
        memory = self.memories.get(memory_id)
        if memory is None:
            if self.state.trash.get(memory_id) is not None:
                raise NotFound(f"id: memory {memory_id!r} is in the trash; "
                               f"`memvault trash restore {memory_id}` brings it back")
            raise NotFound(f"id: no memory {memory_id!r}")
        return memory

    def commit(self, ops: list[Operation], *, local: bool = True, genesis: bool = False) -> int:
        """Append `ops` durably, then apply them; the caller holds the write
        lock. Returns the first txid. `local`: this device's own operations
        (sync is told); `genesis`: `ops` are genesis puts (which may name each
        other in any order: a supersession reaches the older memory with its
        own put)."""
        if not genesis and self.genesis_rest:
            self.genesis_ahead([name for op in ops for name in _names(op)])
        try:
            last = self.log.append([encode(op) for op in ops])
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise ResourceExhausted("the data directory's disk is full; nothing was "
                                        "written. Free space and try again") from exc
            raise
        with self.access_lock:
            for op in ops:
                self.apply(op)
        self.set_applied(last)
        for op in ops:
            if op.kind not in (ACCESS, UPKEEP):
                self.events.publish(_EVENTS.get(op.kind, "remember"), id=op.memory_id)
        if local and not genesis and self.on_local_commit is not None:
            self.on_local_commit()
        for callback in self.after_commit:
            callback()
        return last - len(ops) + 1

    def apply(self, op: Operation) -> bool:
        self.clock.observe(op.stamp)
        return self.state.apply(op)

    def genesis_ahead(self, names: list[str]) -> None:
        """Log, now, the puts `genesis` has not logged yet of the memories a
        write is about to name. Another device applies this device's
        operations in log order and drops an update, a reinforce or an
        access mark of a memory it does not hold yet (`state.py`): the put
        must come first. The caller holds the write lock."""
        ahead = self.genesis_rest.take(names)
        if ahead:
            self.commit(ahead, genesis=True)


# The event a committed operation publishes (`memvault events`); "remember"
# for the rest. A trash and a purge are both a memory leaving recall.
_EVENTS = {FORGET: "forget", TRASH: "forget", RESTORE: "restore"}


def _names(op: Operation) -> tuple[str, ...]:
    """The memories `op` names, but for a forget (a purge), whose tombstone
    wins over the put in either order. A trash or a restore names its
    memory: applied before the put, it would be dropped."""
    if op.kind == ACCESS:
        return tuple(op.ids or ())
    if op.kind == FORGET:
        return ()
    supersedes = op.memory.supersedes if op.memory is not None else ""
    return (op.memory_id, supersedes) if supersedes else (op.memory_id,)


def visible(memory: Memory, now: float) -> bool:
    return not memory.superseded_by and not memory.is_expired(now) and memory.tier != m.ARCHIVED
