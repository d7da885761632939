"""The client's upkeep calls: the forgetting sweep and consolidation.

`Client` inherits these; they live apart because they are their own concept
(docs/upkeep.md), with their own result types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memvault import wire
from memvault.types import Memory
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["ConsolidateResult", "Consolidation", "SweepResult", "SweptMemory", "UpkeepCalls"]


@dataclass(frozen=True)
class SweptMemory:
    id: str
    text: str
    risk: float
    heat: float
    band: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "risk": self.risk, "heat": self.heat,
                "band": self.band, "reason": self.reason}


@dataclass(frozen=True)
class SweepResult:
    """What a sweep moved to the trash (or, with dry_run, would); txid 0 on
    a dry run. The trash purges them at `purge_at` (0 when nothing moved)."""

    txid: int
    swept: tuple[SweptMemory, ...]
    considered: int
    exempt: int
    dry_run: bool
    purge_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "dry_run": self.dry_run, "considered": self.considered,
                "exempt": self.exempt, "purge_at": self.purge_at,
                "swept": [s.to_dict() for s in self.swept]}


@dataclass(frozen=True)
class Consolidation:
    """One consolidated memory and the memories it summarises (now archived)."""

    id: str
    text: str
    type: str
    topic_key: str
    entity: str
    sources: tuple[str, ...]
    facts: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "type": self.type,
                "topic_key": self.topic_key, "entity": self.entity,
                "sources": list(self.sources), "facts": self.facts}


@dataclass(frozen=True)
class ConsolidateResult:
    txid: int
    consolidations: tuple[Consolidation, ...]
    candidates: int
    dry_run: bool

    @property
    def archived(self) -> int:
        return sum(len(c.sources) for c in self.consolidations)

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "dry_run": self.dry_run, "candidates": self.candidates,
                "archived": self.archived,
                "consolidations": [c.to_dict() for c in self.consolidations]}


class UpkeepCalls:
    """Mixed into `Client`, which provides `_call` and the channel."""

    _call: Callable[..., Any]
    _unary: Callable[..., Any]
    _get: Any  # Client's Get stub

    def _upkeep_stubs(self) -> None:
        self._sweep = self._unary("Sweep", pb.SweepRequest, pb.SweepReply)
        self._consolidate = self._unary("Consolidate", pb.ConsolidateRequest,
                                        pb.ConsolidateReply)

    def sweep(self, *, dry_run: bool = False, threshold: float | None = None) -> SweepResult:
        """Move to the trash every memory whose forgetting risk is over the
        threshold (the daemon's `sweep.threshold` unless given); each comes
        with its reason. Pinned, procedural, protected and young memories are
        never swept. `dry_run=True` lists them and changes nothing."""
        request = pb.SweepRequest(dry_run=dry_run)
        if threshold is not None:
            request.threshold = threshold
        reply = self._call(self._sweep, request, timeout=600.0)
        return SweepResult(reply.txid, tuple(
            SweptMemory(s.id, s.text, s.risk, s.heat, s.band, s.reason) for s in reply.memories),
            reply.considered, reply.exempt, dry_run, reply.purge_at)

    def consolidate(self, *, scope: str = "all", min_age_days: float | None = None,
                    session: str = "", dry_run: bool = False) -> ConsolidateResult:
        """Merge each cluster of cold, minor, similar memories into one memory
        that keeps every distinct fact with its sources, and move the sources
        to the archived tier. `scope="session"` never mixes sessions (and
        `session` limits it to one); `min_age_days=0` takes memories of any
        age (a bulk import). `dry_run=True` shows the clusters, writes nothing."""
        request = pb.ConsolidateRequest(scope=scope, dry_run=dry_run, session_id=session)
        if min_age_days is not None:
            request.min_age_days = min_age_days
        reply = self._call(self._consolidate, request, timeout=600.0)
        return ConsolidateResult(reply.txid, tuple(
            Consolidation(c.id, c.text, c.type, c.topic_key, c.entity, tuple(c.sources), c.facts)
            for c in reply.consolidations), reply.candidates, dry_run)

    def sources(self, id: str) -> list[Memory]:
        """The archived memories a consolidated memory summarises ([] for others)."""
        reply = self._call(self._get, pb.GetRequest(id=id))
        return [wire.memory(source) for source in reply.sources]
