"""What the daemon says about itself: its `Status`, where its sync stands
(`SyncInfo`; `memvault status` shows both) and the `Event`s it streams."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeviceInfo", "Event", "Status", "SyncInfo", "SyncVerdict"]


@dataclass(frozen=True)
class Status:
    """The daemon's state, as `Status` reports it."""

    version: str
    model_state: str
    model: str = ""
    dimension: int = 0
    memory_count: int = 0
    applied_txid: int = 0
    socket: str = ""
    data_dir: str = ""
    key_storage: str = ""
    cache_hits: int = 0
    cache_misses: int = 0
    cache_size: int = 0
    uptime_s: float = 0.0
    vault_id: str = ""
    # Visible memories per heat band (only when asked: status(bands=True)).
    bands: dict[str, int] = field(default_factory=dict)
    # When the vault was last swept / consolidated on any device; 0 = never.
    last_sweep_at: float = 0.0
    last_consolidation_at: float = 0.0
    # Memories in the trash (not counted in memory_count).
    trash_count: int = 0

    @property
    def ready(self) -> bool:
        return self.model_state == "ready"

    @property
    def cache_hit_rate(self) -> float | None:
        """Hits over lookups of the query-embedding cache; None before the first lookup."""
        lookups = self.cache_hits + self.cache_misses
        return self.cache_hits / lookups if lookups else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "model_state": self.model_state,
            "model": self.model,
            "dimension": self.dimension,
            "memory_count": self.memory_count,
            "applied_txid": self.applied_txid,
            "socket": self.socket,
            "data_dir": self.data_dir,
            "key_storage": self.key_storage,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "cache_size": self.cache_size,
            "cache_hit_rate": self.cache_hit_rate,
            "uptime_s": self.uptime_s,
            "vault_id": self.vault_id,
            "bands": dict(self.bands),
            "last_sweep_at": self.last_sweep_at,
            "last_consolidation_at": self.last_consolidation_at,
            "trash_count": self.trash_count,
        }


@dataclass(frozen=True)
class Event:
    """Something the daemon did: "hit" / "miss" (query-embedding cache),
    "remember", "forget" (to the trash, or purged), "restore", "ready"."""

    type: str
    query: str = ""
    id: str = ""
    at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "query": self.query, "id": self.id, "at": self.at}


@dataclass(frozen=True)
class SyncInfo:
    """Where this device's sync stands (`memvault sync status`)."""

    configured: bool
    remote: str = ""
    state: str = ""
    head: int = 0
    pushed_seq: int = 0
    pending: int = 0
    last_push: float = 0.0
    last_pull: float = 0.0
    last_error: str = ""
    # The version that failed to open, when sync stopped on one (0: none);
    # `memvault sync repair` moves the vault past it.
    bad_version: int = 0
    # The head a remote claims while withholding the versions up to it (0: none).
    withheld_head: int = 0
    # The local log no longer holds every operation the remote lacks: the
    # next push puts the whole vault again.
    repush: bool = False
    chain: int = 0  # which chain of the vault: 1, then one more per repair
    snapshot: int = 0  # the version of the newest remote snapshot known (0: none)
    # Other devices silent past `freeze_bound_s`: (device id, wall time of
    # its newest operation pulled), the longest silent first (a frozen view).
    silent: tuple[tuple[str, float], ...] = ()
    freeze_bound_s: float = 0.0
    witness: str = ""  # the witness remote, without secrets ("": none)
    # Versions refused since the daemon started, signed by no registered
    # device: (number, why); nothing of them was applied.
    refused: tuple[tuple[int, str], ...] = ()
    # The recovery key of a rotation cut short before its answer, and its
    # epoch: shown once, here ("": none).
    unshown_recovery_key: str = ""
    unshown_recovery_epoch: int = 0
    # Why the witness failed in the latest round that asked it ("": it answers).
    witness_error: str = ""

    def to_dict(self) -> dict[str, Any]:
        doc = {name: getattr(self, name) for name in self.__dataclass_fields__}
        doc["silent"] = [{"device": device, "last_seen": last_seen}
                         for device, last_seen in self.silent]
        doc["refused"] = [{"version": number, "reason": reason}
                          for number, reason in self.refused]
        return doc


@dataclass(frozen=True)
class DeviceInfo:
    """A device registered in the vault (`memvault devices`)."""

    device_id: str
    name: str
    sign_key: str  # Ed25519, hex: signs the versions the device pushes
    receive_key: str  # X25519, hex
    added: float = 0.0  # when it registered; 0: not yet (sync is not set up)
    last_seen: float = 0.0  # its newest operation this device pulled; 0: none
    this_device: bool = False
    revoked: bool = False  # `memvault devices revoke`: given no key since

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class SyncVerdict:
    """What `memvault sync verify` found: this device's fingerprint, and
    whether another's agreed with it (a mismatch raises ForkDetected)."""

    fingerprint: str
    chain: int
    head: int
    agreed: bool = False
    compared_at: int = 0  # the version the two fingerprints were compared at
    undecided: str = ""  # why they could not be compared yet ("" when they were)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
