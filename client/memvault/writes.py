"""The client's writes: `remember` (and `remember_batch`), `supersede`,
`update`, `reinforce`, `forget` (and `forget_where`), `append_turns`. What
`forget` moves to the trash, `memvault.trash` lists and restores.

Each returns the write's txid: the daemon acknowledges a write only once it
is in the log, and `recall(min_txid=...)` waits until it is applied.
`Client` inherits these; the reads are in `memvault.reads`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memvault import wire
from memvault.connection import Connection
from memvault.types import (
    AppendResult,
    ForgetResult,
    ReinforceResult,
    RememberResult,
    UpdateResult,
)
from memvault_base.errors import InvalidArgument
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["WriteCalls"]


class WriteCalls(Connection):
    """Mixed into `Client`, which calls `_write_stubs` from its `_make_stubs`."""

    def _write_stubs(self) -> None:
        self._remember = self._unary("Remember", pb.RememberRequest, pb.RememberReply)
        self._remember_batch = self._unary(
            "RememberBatch", pb.RememberBatchRequest, pb.RememberBatchReply
        )
        self._forget = self._unary("Forget", pb.ForgetRequest, pb.ForgetReply)
        self._update = self._unary("Update", pb.UpdateRequest, pb.UpdateReply)
        self._supersede = self._unary("Supersede", pb.SupersedeRequest, pb.RememberReply)
        self._reinforce = self._unary("Reinforce", pb.ReinforceRequest, pb.ReinforceReply)
        self._append_turns = self._unary("AppendTurns", pb.AppendTurnsRequest, pb.AppendTurnsReply)

    def remember(
        self,
        text: str,
        *,
        type: str = "",
        topic: str = "",
        payload: Mapping[str, Any] | None = None,
        entity: str = "",
        tags: Sequence[str] = (),
        category: str = "",
        importance: float | None = None,
        session: str = "",
        source: str = "",
        tier: str = "",
        expires_at: float = 0,
        supersedes: str = "",
        vector: Sequence[float] | None = None,
        protected: bool | None = None,
        new: bool = False,
        allow_secret: bool = False,
        scope: str = "",
    ) -> RememberResult:
        """Store a memory; returns its id, the txid and what the daemon made of it.

        The daemon compares the text with the memories of its type and topic
        (docs/recall.md): the same statement again reinforces the earlier
        memory (`result.outcome == "reinforced"`, `result.id` is its id), a
        changed or added fact stores a new version of it
        (`"superseded"`, `result.target` is the earlier memory), anything
        else is `"added"`. `new=True` always adds.

        Empty strings and None take the daemon's defaults (type semantic,
        importance 0.5, tier long_term). `supersedes=ID` replaces that memory,
        as `supersede()` does. `protected=True` keeps it out of the forgetting
        sweep and consolidation.

        A text that holds what looks like a credential (an API key, a private
        key, a password in a URL, a high-entropy token) is refused with
        InvalidArgument naming its kind and place; `allow_secret=True`
        stores it anyway (the same keyword on update, supersede and import).

        `scope` is whose it is: "user", "project:<name>" or "agent:<name>"
        (docs/scopes.md); "" is the client's first scope other than "user"
        when it was made with `scopes=`, else "user".
        """
        memory = wire.memory_input(
            text,
            type=type,
            topic=topic,
            payload=payload,
            entity=entity,
            tags=tags,
            category=category,
            importance=importance,
            session=session,
            source=source,
            tier=tier,
            expires_at=expires_at,
            supersedes=supersedes,
            vector=vector,
            protected=protected,
            new=new,
            allow_secret=allow_secret,
            scope=scope,
        )
        reply = self._call(self._remember, pb.RememberRequest(memory=memory))
        return wire.remember_result(reply)

    def remember_batch(self, memories: Iterable[Mapping[str, Any]]) -> list[RememberResult]:
        """Store several memories in one call; one result per input, in input order.

        Each mapping takes "text" and remember()'s keywords ("topic_key" and
        "session_id" are accepted as well). An unknown key raises
        InvalidArgument before anything is sent.
        """
        inputs = [wire.batch_input(i, m) for i, m in enumerate(memories)]
        reply = self._call(self._remember_batch, pb.RememberBatchRequest(memories=inputs))
        return [wire.remember_result(r) for r in reply.results]

    def forget(self, id: str, *, purge: bool = False, by: str = "") -> int:
        """Move the memory with this id to the trash, on every synced device;
        returns the txid. Recall no longer finds it; `restore([id])` brings
        it back until the daemon purges it (`trash.retention_days`, 30 by
        default). `purge=True` erases it for good at once instead. `by` is
        what the trash shows as having forgotten it ("" = "client")."""
        return self._call(self._forget, pb.ForgetRequest(id=id, purge=purge, by=by)).txid

    def forget_where(
        self,
        filter: Mapping[str, Any] | str,
        *,
        dry_run: bool = False,
        purge: bool = False,
        by: str = "",
    ) -> ForgetResult:
        """Move every memory the filter expression matches to the trash
        (`purge=True`: erase them, and those of the trash it matches, for
        good); returns their ids.

        `dry_run=True` only lists them (txid 0). An empty filter raises
        InvalidArgument before anything is sent: forgetting everything takes
        a filter that says so.
        """
        text = wire.filter_json(filter)
        if not text.strip() or not filter:
            raise InvalidArgument("forget_where needs a filter expression, not an empty one")
        request = pb.ForgetRequest(filter_json=text, dry_run=dry_run, purge=purge, by=by)
        reply = self._call(self._forget, request)
        return ForgetResult(txid=reply.txid, ids=tuple(reply.ids), purge_at=reply.purge_at,
                            purged=purge and not dry_run)

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        type: str | None = None,
        topic: str | None = None,
        payload: Mapping[str, Any] | None = None,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        category: str | None = None,
        importance: float | None = None,
        session: str | None = None,
        source: str | None = None,
        tier: str | None = None,
        expires_at: float | None = None,
        vector: Sequence[float] | None = None,
        protected: bool | None = None,
        allow_secret: bool = False,
        scope: str | None = None,
    ) -> UpdateResult:
        """Edit the memory in place (same id); only the keywords given change.

        An empty value clears a field (`tags=[]`, `expires_at=0`). `vector`
        is the embedding of a new `text` (bring-your-own); without text it is
        refused. Nothing given raises InvalidArgument before anything is sent.
        """
        changes: dict[str, Any] = {
            "text": text,
            "type": type,
            "topic": topic,
            "payload": payload,
            "entity": entity,
            "tags": tags,
            "category": category,
            "importance": importance,
            "session": session,
            "source": source,
            "tier": tier,
            "expires_at": expires_at,
            "protected": protected,
            "scope": scope,
        }
        reply = self._call(self._update, wire.update_request(id, changes, vector,
                                                                allow_secret))
        return UpdateResult(txid=reply.txid, memory=wire.memory(reply.memory))

    def supersede(
        self,
        id: str,
        text: str,
        *,
        type: str | None = None,
        topic: str | None = None,
        payload: Mapping[str, Any] | None = None,
        entity: str | None = None,
        tags: Sequence[str] | None = None,
        category: str | None = None,
        importance: float | None = None,
        session: str | None = None,
        source: str | None = None,
        tier: str = "",
        expires_at: float = 0,
        vector: Sequence[float] | None = None,
        protected: bool | None = None,
        allow_secret: bool = False,
        scope: str | None = None,
    ) -> RememberResult:
        """Store `text` as the new version of memory `id`, which recall then hides.

        The old memory gets `superseded_by`; `history()` of either returns
        both. A keyword left at None is the old memory's (type, topic,
        payload, entity, tags, category, importance, session, source,
        protected, scope); an empty value (`topic=""`, `tags=[]`, `payload={}`)
        leaves that field empty.
        """
        fields: dict[str, Any] = {
            "type": type,
            "topic": topic,
            "payload": payload,
            "entity": entity,
            "tags": tags,
            "category": category,
            "importance": importance,
            "session": session,
            "source": source,
            "tier": tier,
            "expires_at": expires_at,
            "protected": protected,
            "scope": scope,
        }
        reply = self._call(self._supersede, wire.supersede_request(id, text, fields, vector,
                                                                     allow_secret))
        return wire.remember_result(reply)

    def reinforce(self, id: str) -> ReinforceResult:
        """Count the memory as confirmed once more (it decays more slowly)."""
        reply = self._call(self._reinforce, pb.ReinforceRequest(id=id))
        return ReinforceResult(txid=reply.txid, reinforce_count=reply.reinforce_count)

    def append_turns(self, session: str, turns: Iterable[Mapping[str, Any]]) -> AppendResult:
        """Store raw conversation turns of `session` in the transcript layer.

        Each mapping: "speaker", "text", optionally "at" (seconds since the
        epoch; now when absent) and "payload" (a JSON object). Turns are found
        by `recall(..., include_turns=True)`, never mixed into the memories.
        """
        messages = [wire.turn(i, t) for i, t in enumerate(turns)]
        request = pb.AppendTurnsRequest(session_id=session, turns=messages)
        reply = self._call(self._append_turns, request)
        return AppendResult(ids=tuple(reply.ids), txid=reply.txid)
