"""What the writes return: the write's txid, and what it made or changed.

Sync's `init`, `join`, `sync move` and `sync leave` are here too: they
change where the vault syncs, and return what to keep of that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memvault.memory import Memory

__all__ = [
    "AppendResult",
    "ForgetResult",
    "ImportResult",
    "InitResult",
    "JoinResult",
    "LeaveResult",
    "ReinforceResult",
    "RememberResult",
    "UpdateResult",
]


ADDED = "added"
REINFORCED = "reinforced"
SUPERSEDED = "superseded"


@dataclass(frozen=True)
class RememberResult:
    """What a remember or supersede did: the memory's id, the write's
    transaction id, and its outcome.

    - "added": a memory of its own;
    - "reinforced": the same statement as memory `target` (every fact
      unchanged): that memory was reinforced, no copy was stored, and `id`
      is `target`;
    - "superseded": `target` with a changed or added fact: `id` is its new
      version, and `target` stays in the chain (`history()`), hidden from
      recall. `reason` says what differs ("numbers 3 -> 15").
    """

    id: str
    txid: int
    outcome: str = ADDED
    target: str = ""
    reason: str = ""

    @property
    def reinforced(self) -> bool:
        return self.outcome == REINFORCED

    @property
    def superseded(self) -> bool:
        return self.outcome == SUPERSEDED

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "txid": self.txid, "outcome": self.outcome,
                "target": self.target, "reason": self.reason, "reinforced": self.reinforced}


@dataclass(frozen=True)
class UpdateResult:
    """An edit in place: the write's txid and the memory as it now is."""

    txid: int
    memory: Memory

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "memory": self.memory.to_dict()}


@dataclass(frozen=True)
class ForgetResult:
    """The memories a filter forgot (or, on a dry run, would forget; txid 0 then).

    Forgotten memories are in the trash until `purge_at` (`Client.restore`
    brings them back); `purged` ones are gone for good (purge_at 0)."""

    txid: int
    ids: tuple[str, ...] = ()
    purge_at: float = 0.0
    purged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "ids": list(self.ids), "purge_at": self.purge_at,
                "purged": self.purged}


@dataclass(frozen=True)
class ReinforceResult:
    """A reinforcement: the write's txid and the memory's new reinforce_count."""

    txid: int
    reinforce_count: int

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "reinforce_count": self.reinforce_count}


@dataclass(frozen=True)
class AppendResult:
    """Stored transcript turns: their ids, in input order, and the write's txid."""

    ids: tuple[str, ...]
    txid: int

    def to_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "txid": self.txid}


@dataclass(frozen=True)
class ImportResult:
    """An import: how many memories were added, how many reinforced existing ones."""

    added: int
    reinforced: int
    # The txid of the last write; 0 when nothing was sent.
    txid: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "reinforced": self.reinforced, "txid": self.txid}


@dataclass(frozen=True)
class InitResult:
    """What `init` returns: the vault's id and its recovery key (shown once)."""

    vault_id: str
    recovery_key: str

    def to_dict(self) -> dict[str, Any]:
        return {"vault_id": self.vault_id, "recovery_key": self.recovery_key}


@dataclass(frozen=True)
class RotateResult:
    """What a key rotation returns: the new recovery key (shown once), the
    key epoch it started, the device it revoked ("" for none), and whether
    that device's token was revoked on a memvault-server, in words
    (`token_note`, "" on a remote of another kind). `recovered`: the key is
    that of a rotation cut short before its answer, shown now; no epoch
    was started."""

    recovery_key: str
    epoch: int
    revoked_device: str = ""
    token_revoked: bool = False
    token_note: str = ""
    recovered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"recovery_key": self.recovery_key, "epoch": self.epoch,
                "revoked_device": self.revoked_device, "token_revoked": self.token_revoked,
                "token_note": self.token_note, "recovered": self.recovered}


@dataclass(frozen=True)
class JoinResult:
    vault_id: str
    memory_count: int

    def to_dict(self) -> dict[str, Any]:
        return {"vault_id": self.vault_id, "memory_count": self.memory_count}


@dataclass(frozen=True)
class LeaveResult:
    """What `sync leave` returns: the remote left, and how many of this
    device's operations it never received (they stay here)."""

    remote: str
    pending: int

    def to_dict(self) -> dict[str, Any]:
        return {"remote": self.remote, "pending": self.pending}
