"""The client's check call: is every sealed file of the vault sound?

`Client` inherits it. The daemon reads every snapshot, every log record,
the key, `vault.json`, the sync state and the remote's chain, and changes
nothing (docs/cli.md, `memvault check`). `CheckReport.from_dict` reads the
same shape back from `memvaultd check --json`, which the CLI runs when no
daemon is there to ask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memvault_base.v1 import memory_pb2 as pb

__all__ = ["CheckCalls", "CheckFinding", "CheckReport"]

SeqRange = tuple[int, int | None]  # first, last; None: to an end nobody can tell


@dataclass(frozen=True)
class CheckFinding:
    object: str  # a path under the data directory, or "log", "remote"
    kind: str  # snapshot | log segment | log | key | vault.json | sync state | remote | ...
    status: str  # ok | damaged | warning | unchecked | repaired
    detail: str
    seqs: tuple[SeqRange, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"object": self.object, "kind": self.kind, "status": self.status,
                "detail": self.detail, "seqs": [list(r) for r in self.seqs]}


@dataclass(frozen=True)
class CheckReport:
    sound: bool
    checked_by: str  # "daemon" (the running daemon) or "offline" (`memvaultd check`)
    memory_count: int
    snapshot_seq: int
    findings: tuple[CheckFinding, ...]
    lost: tuple[SeqRange, ...] = ()
    lost_memories: tuple[str, ...] = ()
    repaired: str = ""  # after `--repair`: where the replaced files are kept

    def to_dict(self) -> dict[str, Any]:
        return {"sound": self.sound, "checked_by": self.checked_by,
                "memory_count": self.memory_count, "snapshot_seq": self.snapshot_seq,
                "lost": [list(r) for r in self.lost], "lost_memories": list(self.lost_memories),
                "repaired": self.repaired, "findings": [f.to_dict() for f in self.findings]}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> CheckReport:
        return cls(bool(doc["sound"]), str(doc["checked_by"]), int(doc["memory_count"]),
                   int(doc["snapshot_seq"]),
                   tuple(CheckFinding(f["object"], f["kind"], f["status"], f["detail"],
                                      _ranges(f["seqs"])) for f in doc["findings"]),
                   _ranges(doc["lost"]), tuple(doc["lost_memories"]), str(doc["repaired"]))


def _ranges(items: Sequence[Sequence[int | None]]) -> tuple[SeqRange, ...]:
    return tuple((int(first or 0), None if last is None else int(last)) for first, last in items)


def _from_wire(ranges: Sequence[pb.SeqRange]) -> tuple[SeqRange, ...]:
    return tuple((r.first, r.last or None) for r in ranges)


class CheckCalls:
    """Mixed into `Client`, which provides `_call` and `_unary`."""

    _call: Callable[..., Any]
    _unary: Callable[..., Any]

    def _check_stubs(self) -> None:
        self._check = self._unary("Check", pb.CheckRequest, pb.CheckReply)

    def check(self, *, remote: bool = True, timeout: float = 3600.0) -> CheckReport:
        """Read every sealed file of the vault (and, with `remote`, the
        remote's whole version chain) and say what is sound; changes nothing."""
        reply = self._call(self._check, pb.CheckRequest(skip_remote=not remote),
                           timeout=timeout)
        return CheckReport(
            reply.sound, "daemon", reply.memory_count, reply.snapshot_seq,
            tuple(CheckFinding(f.object, f.kind, f.status, f.detail, _from_wire(f.seqs))
                  for f in reply.findings),
            _from_wire(reply.lost), tuple(reply.lost_memories))
