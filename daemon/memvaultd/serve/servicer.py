"""The Memory service's face of the vault: protobuf in, a vault call, protobuf out.

Each method of `memvault.v1.Memory` is a method here by the same name
that takes its request message and the caller's declared access
(`model/scopes.Access`, from the call's metadata) and returns its reply (a
stream's, its items), handing the access to the vault, which enforces it.
Nothing else: no logic, no status codes. A domain error raised
below is left to the dispatch (`dispatch.py`), which answers every error
of every method the same way; the calls' threads and the link are the
dispatch's too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memvault_base.errors import Unavailable
from memvault_base.v1 import memory_pb2 as pb
from memvaultd import __version__
from memvaultd.model.commands import (
    ImportedRecord,
    ListQuery,
    MemoryDraft,
    RecallQuery,
    RememberOutcome,
    TurnDraft,
)
from memvaultd.model.heat import band, last_use
from memvaultd.model.memory import Memory
from memvaultd.model.scopes import Access
from memvaultd.model.vector import Vector
from memvaultd.recall.engine import Hit
from memvaultd.sync.setup import Syncing
from memvaultd.upkeep import consolidation
from memvaultd.upkeep.sweep import Swept
from memvaultd.vault.check import CheckReport
from memvaultd.vault.events import EventBus
from memvaultd.vault.reads import PreparedRecall
from memvaultd.vault.vault import Facet, ListPage, Recalled, Vault


class Liveness(Protocol):
    """What a streaming method asks of its call: whether it is still wanted."""

    def is_active(self) -> bool: ...


@dataclass(frozen=True)
class RecallCall:
    """A Recall's request, converted and checked once (`Vault.prepare_recall`:
    the query, its filter compiled, its own vector checked) for every path the
    call may take (at once, on the computing pool, on the shared pool)."""

    request: pb.RecallRequest
    prepared: PreparedRecall


def draft_from(msg: pb.MemoryInput) -> MemoryDraft:
    return MemoryDraft(
        text=msg.text, type=msg.type, topic_key=msg.topic_key, payload_json=msg.payload_json,
        entity=msg.entity, tags=list(msg.tags), category=msg.category,
        importance=msg.importance if msg.HasField("importance") else None,
        session_id=msg.session_id, source=msg.source, tier=msg.tier,
        expires_at=msg.expires_at, supersedes=msg.supersedes, vector=list(msg.vector),
        protected=msg.protected if msg.HasField("protected") else None, new=msg.never_merge,
        allow_secret=msg.allow_secret, scope=msg.scope)


def remember_reply(outcome: RememberOutcome) -> pb.RememberReply:
    return pb.RememberReply(id=outcome.id, txid=outcome.txid, reinforced=outcome.reinforced,
                            outcome=outcome.outcome, target_id=outcome.target,
                            reason=outcome.reason)


def query_from(msg: pb.RecallRequest, access: Access) -> RecallQuery:
    return RecallQuery(
        text=msg.query, top_k=msg.top_k,
        min_score=msg.min_score if msg.HasField("min_score") else None,
        filter_json=msg.filter_json, vector=list(msg.query_vector), mode=msg.mode,
        types=list(msg.types), topic_key=msg.topic_key, session_id=msg.session_id,
        source=msg.source, tiers=list(msg.tiers), include_superseded=msg.include_superseded,
        max_tokens=msg.max_tokens, offset=msg.offset,
        mark_accessed=msg.mark_accessed if msg.HasField("mark_accessed") else True,
        min_txid=msg.min_txid, include_turns=msg.include_turns, band=msg.band,
        include_vectors=msg.include_vectors, access=access)


def record_of(memory: Memory, vector: Vector | None = None) -> pb.MemoryRecord:
    return pb.MemoryRecord(
        id=memory.id, text=memory.text, type=memory.type, topic_key=memory.topic_key,
        payload_json=json.dumps(memory.payload, ensure_ascii=False), entity=memory.entity,
        tags=memory.tags, category=memory.category, importance=memory.importance,
        session_id=memory.session_id, source=memory.source, tier=memory.tier,
        created_at=memory.created_at, last_reinforced_at=memory.last_reinforced_at,
        reinforce_count=memory.reinforce_count, access_count=memory.access_count,
        expires_at=memory.expires_at, superseded_by=memory.superseded_by,
        supersedes=memory.supersedes, last_accessed_at=memory.last_accessed_at,
        protected=memory.protected, consolidated_from=memory.consolidated_from,
        consolidated_into=memory.consolidated_into, scope=memory.scope,
        vector=[] if vector is None else vector.tolist())


def imported_from(record: pb.MemoryRecord) -> ImportedRecord:
    """The record's fields by name, as sent: the vault checks them."""
    fields: dict[str, Any] = {}
    for field in record.DESCRIPTOR.fields:
        if field.name != "vector":
            value = getattr(record, field.name)
            # A repeated field reads as a container of the message's own.
            scalar = isinstance(value, str | bytes | int | float | bool)
            fields[field.name] = value if scalar else list(value)
    return ImportedRecord(fields, list(record.vector))


def hit_of(hit: Hit, vector: Vector | None) -> pb.Hit:
    scored, found = hit.scored, hit.candidate
    return pb.Hit(
        memory=record_of(scored.memory, vector), score=scored.score,
        similarity=found.similarity, decay=scored.decay, reinforcement=scored.reinforcement,
        channels=found.channels, match_reasons=found.reasons,
        breakdown=pb.ScoreBreakdown(
            similarity=found.similarity, keyword=found.keyword, topic=found.topic,
            fusion=found.fusion, decay=scored.decay, reinforcement=scored.reinforcement,
            importance=scored.importance, heat=scored.heat_factor),
        heat=scored.heat, band=band(scored.heat))


def swept_of(swept: Swept) -> pb.SweptMemory:
    return pb.SweptMemory(id=swept.memory.id, text=swept.memory.text, risk=swept.risk,
                          heat=swept.heat, band=band(swept.heat), reason=swept.reason)


def turn_hit_of(hit: Hit) -> pb.TurnHit:
    turn = hit.scored.memory
    return pb.TurnHit(turn=pb.Turn(session_id=turn.session_id, speaker=turn.entity,
                                   text=turn.text, at=turn.created_at, id=turn.id,
                                   payload_json=json.dumps(turn.payload, ensure_ascii=False)),
                      score=hit.scored.score, channels=hit.candidate.channels)


def facets_of(items: list[Facet]) -> pb.ListReply:
    return pb.ListReply(items=[pb.Facet(name=f.name, count=f.count,
                                        last_activity=f.last_activity) for f in items])


def list_query_from(msg: pb.ListMemoriesRequest, access: Access) -> ListQuery:
    return ListQuery(
        sort=msg.sort, ascending=msg.ascending, limit=msg.limit, offset=msg.offset,
        page_token=msg.page_token, filter_json=msg.filter_json, types=list(msg.types),
        topic_key=msg.topic_key, entity=msg.entity, tag=msg.tag, source=msg.source,
        session_id=msg.session_id, band=msg.band, tiers=list(msg.tiers),
        include_superseded=msg.include_superseded, include_facets=msg.include_facets,
        access=access)


def list_reply(page: ListPage) -> pb.ListMemoriesReply:
    return pb.ListMemoriesReply(
        memories=[pb.ListedMemory(memory=record_of(listed.memory), heat=listed.heat,
                                  band=listed.band, last_used=last_use(listed.memory))
                  for listed in page.memories],
        total=page.total, next_page_token=page.next_token,
        facets={name: pb.FacetCounts(values=[pb.FacetValue(value=v, count=c)
                                             for v, c in counts.values],
                                     distinct=counts.distinct)
                for name, counts in page.facets.items()})


def seq_ranges(ranges: Sequence[tuple[int, int | None]]) -> list[pb.SeqRange]:
    return [pb.SeqRange(first=first, last=last or 0) for first, last in ranges]


def check_reply(report: CheckReport) -> pb.CheckReply:
    return pb.CheckReply(
        sound=report.sound, memory_count=report.memory_count, snapshot_seq=report.snapshot_seq,
        findings=[pb.CheckFinding(object=f.object, kind=f.kind, status=f.status,
                                  detail=f.detail, seqs=seq_ranges(f.seqs))
                  for f in report.findings],
        lost=seq_ranges(report.lost), lost_memories=report.lost_memories)


class MemoryServicer:
    """The Memory service's methods, by their names in memory.proto."""

    def __init__(self, vault: Vault, syncing: Syncing, events: EventBus, socket_path: str,
                 started_at: float, check: Callable[[bool], CheckReport] | None = None
                 ) -> None:
        self.vault = vault
        self.syncing = syncing
        self.events = events
        self.socket_path = socket_path
        self.started_at = started_at
        self.check = check  # `memvault check` of the running vault (app/check.py)

    def Remember(self, request: pb.RememberRequest, access: Access) -> pb.RememberReply:
        (outcome,) = self.vault.remember([draft_from(request.memory)], access)
        return remember_reply(outcome)

    def RememberBatch(self, request: pb.RememberBatchRequest, access: Access
                      ) -> pb.RememberBatchReply:
        outcomes = self.vault.remember([draft_from(msg) for msg in request.memories], access)
        return pb.RememberBatchReply(
            results=[remember_reply(o) for o in outcomes],
            txid=outcomes[-1].txid)

    def recall_call(self, request: pb.RecallRequest, access: Access) -> RecallCall:
        return RecallCall(request, self.vault.prepare_recall(query_from(request, access)))

    def Recall(self, call: RecallCall, access: Access) -> pb.RecallReply:
        # `access` is in the prepared query already (`recall_call`).
        return self._recall_reply(self.vault.recall(call.prepared))

    def recall_at_once(self, call: RecallCall) -> pb.RecallReply | None:
        """Recall's reply if it needs no wait (`Reads.recall_at_once`), else None."""
        recalled = self.vault.recall_at_once(call.prepared)
        return None if recalled is None else self._recall_reply(recalled)

    def recall_ready(self, call: RecallCall) -> bool:
        """Whether Recall would wait for nothing (`Reads.recall_ready`)."""
        return self.vault.recall_ready(call.prepared)

    def _recall_reply(self, recalled: Recalled) -> pb.RecallReply:
        return pb.RecallReply(
            hits=[hit_of(h, recalled.vectors.get(h.scored.memory.id)) for h in recalled.hits],
            has_more=recalled.has_more, turns=[turn_hit_of(h) for h in recalled.turns])

    def Get(self, request: pb.GetRequest, access: Access) -> pb.GetReply:
        memory, vector, chain, sources = self.vault.get(request.id, access)
        return pb.GetReply(memory=record_of(memory, vector if request.include_vector else None),
                           chain=[record_of(link) for link in chain],
                           sources=[record_of(source) for source in sources])

    def ResolveId(self, request: pb.ResolveIdRequest, access: Access) -> pb.ResolveIdReply:
        return pb.ResolveIdReply(id=self.vault.resolve_id(request.id, access))

    def Forget(self, request: pb.ForgetRequest, access: Access) -> pb.ForgetReply:
        txid, ids = self.vault.forget(request.id, request.filter_json, request.dry_run,
                                      purge=request.purge, by=request.by, access=access)
        trashed = ids and not (request.purge or request.dry_run)
        return pb.ForgetReply(txid=txid, ids=ids,
                              purge_at=self.vault.purge_time() if trashed else 0.0)

    def ListTrash(self, request: pb.ListTrashRequest, access: Access) -> pb.ListTrashReply:
        return pb.ListTrashReply(memories=[
            pb.TrashedMemory(memory=record_of(memory), trashed_at=memory.trashed_at,
                             trashed_by=memory.trashed_by, purge_at=purge_at)
            for memory, purge_at in self.vault.trash(access)])

    def RestoreFromTrash(self, request: pb.RestoreFromTrashRequest, access: Access
                         ) -> pb.RestoreFromTrashReply:
        txid, memories = self.vault.restore(list(request.ids), request.all, access)
        return pb.RestoreFromTrashReply(txid=txid, memories=[record_of(m) for m in memories])

    def EmptyTrash(self, request: pb.EmptyTrashRequest, access: Access) -> pb.EmptyTrashReply:
        txid, ids = self.vault.empty_trash(access)
        return pb.EmptyTrashReply(txid=txid, ids=ids)

    def Sweep(self, request: pb.SweepRequest, access: Access) -> pb.SweepReply:
        txid, plan = self.vault.sweep(
            request.dry_run, request.threshold if request.HasField("threshold") else None,
            access)
        trashed = plan.swept and not request.dry_run
        return pb.SweepReply(txid=txid, memories=[swept_of(s) for s in plan.swept],
                             considered=plan.considered, exempt=plan.exempt,
                             purge_at=self.vault.purge_time() if trashed else 0.0)

    def Consolidate(self, request: pb.ConsolidateRequest, access: Access
                    ) -> pb.ConsolidateReply:
        txid, done, candidates = self.vault.consolidate(consolidation.Request(
            request.scope, request.min_age_days if request.HasField("min_age_days") else None,
            request.session_id), request.dry_run, access)
        return pb.ConsolidateReply(txid=txid, candidates=candidates, consolidations=[
            pb.Consolidation(id=c.memory.id, text=c.memory.text, type=c.memory.type,
                             topic_key=c.memory.topic_key, entity=c.memory.entity,
                             sources=[s.id for s in c.sources], facts=len(c.summary.facts))
            for c in done])

    def Update(self, request: pb.UpdateRequest, access: Access) -> pb.UpdateReply:
        txid, memory = self.vault.update(request.id, draft_from(request.memory),
                                         list(request.fields), access)
        return pb.UpdateReply(txid=txid, memory=record_of(memory))

    def Supersede(self, request: pb.SupersedeRequest, access: Access) -> pb.RememberReply:
        outcome = self.vault.supersede(request.id, draft_from(request.memory),
                                       list(request.cleared), access)
        return remember_reply(outcome)

    def Reinforce(self, request: pb.ReinforceRequest, access: Access) -> pb.ReinforceReply:
        txid, memory = self.vault.reinforce(request.id, access)
        return pb.ReinforceReply(txid=txid, reinforce_count=memory.reinforce_count)

    def ListTopics(self, request: pb.ListRequest, access: Access) -> pb.ListReply:
        return facets_of(self.vault.facets("topic_key", request.filter_json, access))

    def ListEntities(self, request: pb.ListRequest, access: Access) -> pb.ListReply:
        return facets_of(self.vault.facets("entity", request.filter_json, access))

    def ListMemories(self, request: pb.ListMemoriesRequest, access: Access
                     ) -> pb.ListMemoriesReply:
        return list_reply(self.vault.list_memories(list_query_from(request, access)))

    def AppendTurns(self, request: pb.AppendTurnsRequest, access: Access
                    ) -> pb.AppendTurnsReply:
        turns = [TurnDraft(t.speaker, t.text, t.at, t.payload_json) for t in request.turns]
        txid, ids = self.vault.append_turns(request.session_id, turns, access)
        return pb.AppendTurnsReply(ids=ids, txid=txid)

    def Import(self, request: pb.ImportRequest, access: Access) -> pb.ImportReply:
        added, reinforced, txid = self.vault.import_memories(
            [imported_from(record) for record in request.memories], request.allow_secret,
            access)
        return pb.ImportReply(added=added, reinforced=reinforced, txid=txid)

    def Export(self, request: pb.ExportRequest, access: Access, call: Liveness
               ) -> Iterator[pb.MemoryRecord]:
        for memory, vector in self.vault.export(access):
            yield record_of(memory, vector if request.include_vectors else None)

    # Sync and check are about the vault as a whole, never one memory:
    # only a caller with full access may use them (`Access.check_full`).

    def InitSync(self, request: pb.InitSyncRequest, access: Access) -> pb.InitSyncReply:
        access.check_full("sync")
        vault_id, recovery_key = self.syncing.init(request.remote, request.token or None,
                                                   request.allow_cleartext_token)
        return pb.InitSyncReply(vault_id=vault_id, recovery_key=recovery_key)

    def JoinSync(self, request: pb.JoinSyncRequest, access: Access) -> pb.JoinSyncReply:
        access.check_full("sync")
        vault_id = self.syncing.join(request.remote, request.token or None,
                                     request.recovery_key, request.allow_cleartext_token)
        return pb.JoinSyncReply(vault_id=vault_id, memory_count=len(self.vault.memories))

    def SyncNow(self, request: pb.SyncStatusRequest, access: Access) -> pb.SyncStatusReply:
        access.check_full("sync")
        self.syncing.sync_now()
        return self._sync_status()

    def SyncStatus(self, request: pb.SyncStatusRequest, access: Access) -> pb.SyncStatusReply:
        access.check_full("sync")
        reply = self._sync_status()
        unshown = self.syncing.unshown_recovery_key()
        if unshown is not None:
            reply.unshown_recovery_key, reply.unshown_recovery_epoch = unshown
        return reply

    def SyncRepair(self, request: pb.SyncRepairRequest, access: Access) -> pb.SyncStatusReply:
        access.check_full("sync")
        self.syncing.repair(confirmed=request.confirm)
        return self._sync_status()

    def SyncVerify(self, request: pb.VerifySyncRequest, access: Access) -> pb.VerifySyncReply:
        access.check_full("sync")
        verdict = self.syncing.verify(request.fingerprint or None)
        return pb.VerifySyncReply(
            fingerprint=verdict.mine.text(), chain=verdict.mine.chain, head=verdict.mine.head,
            agreed=verdict.agreed, compared_at=verdict.compared_at, forked=verdict.forked,
            undecided=verdict.undecided)

    def SyncWitness(self, request: pb.InitSyncRequest, access: Access) -> pb.SyncStatusReply:
        access.check_full("sync")
        self.syncing.add_witness(request.remote, request.token or None,
                                 request.allow_cleartext_token)
        return self._sync_status()

    def SyncLeave(self, request: pb.SyncLeaveRequest, access: Access) -> pb.SyncLeaveReply:
        access.check_full("sync")
        remote, pending = self.syncing.leave()
        return pb.SyncLeaveReply(remote=remote, pending=pending)

    def SyncMove(self, request: pb.InitSyncRequest, access: Access) -> pb.InitSyncReply:
        access.check_full("sync")
        vault_id, recovery_key = self.syncing.move(request.remote, request.token or None,
                                                   request.allow_cleartext_token)
        return pb.InitSyncReply(vault_id=vault_id, recovery_key=recovery_key)

    def _sync_status(self) -> pb.SyncStatusReply:
        status = self.syncing.status
        if status is None:
            return pb.SyncStatusReply(configured=False, state="not configured")
        return pb.SyncStatusReply(
            configured=True, remote=status.remote, state=status.state, head=status.head,
            pushed_seq=status.pushed_seq, pending=status.pending, last_push=status.last_push,
            last_pull=status.last_pull, last_error=status.last_error,
            bad_version=status.bad_version, withheld_head=status.withheld_head,
            repush=status.repush, chain=status.chain, snapshot=status.snapshot,
            silent=[pb.SilentDevice(device=device, last_seen=last_seen)
                    for device, last_seen in status.silent],
            freeze_bound_s=status.freeze_bound_s, witness=status.witness,
            witness_error=status.witness_error,
            refused=[pb.RefusedVersion(number=number, reason=reason)
                     for number, reason in status.refused])

    def ListDevices(self, request: pb.ListDevicesRequest, access: Access
                    ) -> pb.ListDevicesReply:
        access.check_full("devices")
        return self._devices()

    def RenameDevice(self, request: pb.RenameDeviceRequest, access: Access
                     ) -> pb.ListDevicesReply:
        access.check_full("devices")
        self.syncing.rename_device(request.old_name, request.new_name)
        return self._devices()

    def RotateKeys(self, request: pb.RotateKeysRequest, access: Access
                   ) -> pb.RotateKeysReply:
        access.check_full("devices")
        done = self.syncing.rotate_keys(request.revoke)
        return pb.RotateKeysReply(recovery_key=done.recovery_key, epoch=done.epoch,
                                  revoked_device=done.revoked_device,
                                  token_revoked=done.token_revoked, token_note=done.token_note,
                                  recovered=done.recovered)

    def _devices(self) -> pb.ListDevicesReply:
        records, seen, mine = self.syncing.devices()
        revoked = self.syncing.revoked_devices()
        return pb.ListDevicesReply(devices=[pb.Device(
            device_id=r.device, name=r.name, sign_key=r.sign.hex(), receive_key=r.receive.hex(),
            added=r.added, last_seen=seen.get(r.device, 0.0), this_device=r.device == mine,
            revoked=r.device in revoked)
            for r in records])

    def Status(self, request: pb.StatusRequest, access: Access) -> pb.StatusReply:
        vault, embedder = self.vault, self.vault.embedder
        return pb.StatusReply(
            version=__version__, model_state=embedder.state, model=embedder.model_name,
            dimension=vault.info.dimension, memory_count=len(vault.memories),
            applied_txid=vault.applied_txid, socket=self.socket_path,
            data_dir=str(vault.data_dir), key_storage=vault.key_storage,
            cache_hits=embedder.hits, cache_misses=embedder.misses,
            cache_size=embedder.cache_size, uptime_s=time.time() - self.started_at,
            vault_id=vault.info.vault_id,
            bands=vault.band_counts() if request.include_bands else {},
            last_sweep_at=vault.last_upkeep("sweep"),
            last_consolidation_at=vault.last_upkeep("consolidate"),
            trash_count=vault.trash_size)

    def Check(self, request: pb.CheckRequest, access: Access) -> pb.CheckReply:
        access.check_full("check")
        if self.check is None:
            raise Unavailable("this daemon does not check its files; run `memvaultd check`")
        return check_reply(self.check(not request.skip_remote))

    def Events(self, request: pb.EventsRequest, access: Access, call: Liveness
               ) -> Iterator[pb.Event]:
        subscription = self.events.subscribe(request.types)
        try:
            while call.is_active():
                # Wake twice a second to notice a client that went away.
                event = subscription.get(timeout=0.5)
                if event is not None and self.vault.shows_event(event, access):
                    yield pb.Event(type=event.type, query=event.query, id=event.id,
                                   at=event.at)
        finally:
            subscription.close()
