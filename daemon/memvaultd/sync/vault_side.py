"""What sync needs of a vault, and nothing more: the one interface through
which the sync worker and `init`/`join` reach it (the daemon's `Vault`
provides it; tests give a stand-in)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from memvaultd.crypto.device_keys import DeviceKeys
from memvaultd.model.operations import Operation
from memvaultd.storage.snapshot_body import SnapshotBody
from memvaultd.storage.vault_info import VaultInfo


class PushedVault(Protocol):
    """What the sync worker calls on every round."""

    def local_ops_after(self, seq: int) -> tuple[list[tuple[int, Operation]], int] | None:
        """This device's operations logged after `seq`, and the seq the scan
        reached; None when the log no longer holds them all."""
        ...

    def holds_log_after(self, seq: int) -> bool:
        """Whether the log still holds every record after `seq`."""
        ...

    def repush(self) -> int:
        """Log operations carrying the whole state (a put of every memory and
        turn, a forget of every tombstone) for a remote that lacks part of
        this device's history; the log seq before them."""
        ...

    def apply_remote(self, ops: Sequence[Operation]) -> int:
        """Log and apply the pulled operations that are new here; how many were."""
        ...

    def state_at_sync(self, pushed_seq: int) -> bytes | None:
        """The snapshot body of the state, if every local operation is pushed."""
        ...

    def size(self) -> int:
        """How many memories and turns the vault holds: what a snapshot carries."""
        ...

    def keep_log_from(self, seq: int | None) -> None:
        """Never prune the log past `seq`: the records the remote lacks."""
        ...


class SyncedVault(PushedVault, Protocol):
    """What setting sync up (`init`, `join`) and resuming it at start need."""

    @property
    def info(self) -> VaultInfo: ...

    @property
    def vault_key(self) -> bytes: ...

    @property
    def data_dir(self) -> Path: ...

    def device_keys(self) -> DeviceKeys:
        """This device's keys in this vault (created the first time)."""
        ...

    def genesis(self) -> int:
        """Log a put of every memory held; the log seq before them."""
        ...

    def adopt(self, info: VaultInfo, key: bytes, base: SnapshotBody | None,
              stage: Callable[[Path], None]) -> int:
        """Become the vault `info` names, from `base`, keeping every memory
        held, in one crash-safe step; `stage(directory)` writes sync's files
        of that vault into the directory the step moves into place."""
        ...

    def reseal(self, key: bytes, epoch: int, stage: Callable[[Path], None]) -> None:
        """Seal every local file under `key`, key epoch `epoch`'s, and keep
        it as the vault key, in one crash-safe step; `stage(directory)`
        writes sync's files, sealed under `key`, into the directory the step
        moves into place."""
        ...

    def on_local_commit(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` after every commit of this device's own operations."""
        ...
