"""Upkeep written as operations: the sweep, consolidation and the trash's
retention decide (`upkeep/`), the vault logs what they decided."""

from __future__ import annotations

import time
from collections.abc import Iterable

from memvault_base.errors import InvalidArgument
from memvaultd.crypto.entropy import drawing, new_id
from memvaultd.model import memory as m
from memvaultd.model.operations import BY_SWEEP, FORGET, PUT, TRASH, UPDATE, UPKEEP, Operation
from memvaultd.model.scopes import FULL, Access
from memvaultd.upkeep import consolidation, summariser
from memvaultd.upkeep import sweep as sweeping
from memvaultd.upkeep import trash as trashing
from memvaultd.vault.core import VaultCore


class Upkeep:
    def __init__(self, core: VaultCore) -> None:
        self.core = core

    @drawing()
    def sweep(self, dry_run: bool, threshold: float | None = None, access: Access = FULL
              ) -> tuple[int, sweeping.SweepPlan]:
        """Move what the sweep plans (upkeep/sweep.py) to the trash in one
        durable append; returns (last txid or 0, the plan). The whole vault's:
        only with full access."""
        access.check_full("the sweep")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise InvalidArgument(f"threshold: {threshold!r} is outside 0..1")
        self.core.await_loaded()
        with self.core.write_lock:
            now = time.time()
            plan = sweeping.plan(self.core.memories.records(), now, self.core.config.sweep,
                                 self.core.config.heat, threshold, get=self.core.memories.get)
            if dry_run:
                return 0, plan
            ops = [Operation(new_id(), TRASH, self.core.clock.now(), target=s.memory.id,
                             at=now, by=BY_SWEEP) for s in plan.swept]
            return self._commit_upkeep("sweep", ops, now), plan

    @drawing()
    def purge_trash(self) -> tuple[int, list[str]]:
        """Purge, for good and on every device, what has been in the trash
        longer than `trash.retention_days` (upkeep/trash.py); returns (last
        txid or 0, the ids)."""
        self.core.await_loaded()
        with self.core.write_lock:
            now = time.time()
            ids = trashing.due(self.core.state.trash.memories(), now, self.core.config.trash)
            if not ids:
                return 0, []
            first = self.core.commit([Operation(new_id(), FORGET, self.core.clock.now(),
                                                target=i, at=now) for i in ids])
            return first + len(ids) - 1, ids

    def purge_time(self) -> float:
        """When a memory moved to the trash now will be purged."""
        return time.time() + self.core.config.trash.retention_s

    @drawing()
    def consolidate(self, request: consolidation.Request, dry_run: bool,
                    access: Access = FULL
                    ) -> tuple[int, list[consolidation.Consolidated], int]:
        """Write one memory per cluster and archive its sources (upkeep/
        consolidation.py); returns (last txid or 0, what was written, how many
        memories were candidates). The whole vault's: only with full access."""
        access.check_full("consolidation")
        request = consolidation.check(request)
        settings = self.core.config.consolidation
        summarise = summariser.load(settings.summariser)
        self.core.await_loaded()
        with self.core.write_lock:
            now = time.time()
            candidates = [
                (mem, vector) for mem in self.core.memories.memories()
                if consolidation.is_candidate(mem, now, request, settings, self.core.config.heat)
                and (vector := self.core.memories.index.vector(mem.id)) is not None]
            planned = consolidation.plan(
                candidates, request, settings, summarise,
                lambda found: summariser.checked(found, settings.summariser or "extractive"))
            if dry_run:
                return 0, planned, len(candidates)
            lookup = self.core.memories.get
            ops = retirements(self.core, (), now, [
                mem for mem in self.core.memories.memories()
                if consolidation.stale(mem, lookup)])
            for done in planned:
                # The put first: a crash between leaves sources unarchived
                # (still found), never archived sources with no summary.
                ops.append(Operation(new_id(), PUT, self.core.clock.now(),
                                     memory=done.memory, vector=done.vector))
                ops += [Operation(new_id(), UPDATE, self.core.clock.now(), target=s.id,
                                  at=now, fields={"tier": m.ARCHIVED,
                                                  "consolidated_into": done.memory.id})
                        for s in done.sources]
            return self._commit_upkeep("consolidate", ops, now), planned, len(candidates)

    def _commit_upkeep(self, what: str, ops: list[Operation], now: float) -> int:
        """`ops` and a record that `what` ran, in one append; the last txid."""
        ops.append(Operation(new_id(), UPKEEP, self.core.clock.now(), target=what, at=now,
                             fields={"count": len(ops)}))
        return self.core.commit(ops) + len(ops) - 1

    def last_upkeep(self, what: str) -> float:
        return self.core.state.upkeep.get(what, 0.0)


def retirements(core: VaultCore, changed: Iterable[str], now: float,
                consolidated: Iterable[m.Memory] = ()) -> list[Operation]:
    """The operations that retire the consolidated memories whose sources
    `changed` names (about to be edited, superseded or forgotten), and those
    in `consolidated`: each is archived (a summary of what its sources no
    longer say must not be recalled), and its sources go back to the
    long-term tier, where recall finds them as they now are. A later
    consolidation of the same sources writes the same id again, and the put
    brings it back. Called under the write lock."""
    retired = {mem.id: mem for mem in consolidated}
    for memory_id in changed:
        source = core.memories.get(memory_id)
        into = core.memories.get(source.consolidated_into) if source is not None \
            and source.consolidated_into else None
        if into is not None:
            retired[into.id] = into
    ops = []
    for summary in retired.values():
        if summary.tier == m.ARCHIVED:
            continue
        ops.append(Operation(new_id(), UPDATE, core.clock.now(), target=summary.id, at=now,
                             fields={"tier": m.ARCHIVED}))
        for source_id in summary.consolidated_from:
            source = core.memories.get(source_id)
            if source is not None and source.consolidated_into == summary.id:
                ops.append(Operation(new_id(), UPDATE, core.clock.now(), target=source_id,
                                     at=now, fields={"tier": m.LONG_TERM,
                                                     "consolidated_into": ""}))
    return ops
