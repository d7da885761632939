"""The client's reads: `recall` (the memories that best answer a query), `get`
and `history` (one memory, and its supersession chain), `resolve_id` (the
memory an id prefix names), `list_topics` and `list_entities` (what the vault
holds, counted), `list_memories` (every memory, a page at a time).

`Client` inherits these; the writes are in `memvault.writes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memvault import wire
from memvault.connection import Connection
from memvault.types import Facet, Hits, Memory, MemoryPage
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["ReadCalls"]


class ReadCalls(Connection):
    """Mixed into `Client`, which calls `_read_stubs` from its `_make_stubs`."""

    def _read_stubs(self) -> None:
        self._recall = self._unary("Recall", pb.RecallRequest, pb.RecallReply)
        self._get = self._unary("Get", pb.GetRequest, pb.GetReply)
        self._resolve_id = self._unary("ResolveId", pb.ResolveIdRequest, pb.ResolveIdReply)
        self._list_topics = self._unary("ListTopics", pb.ListRequest, pb.ListReply)
        self._list_entities = self._unary("ListEntities", pb.ListRequest, pb.ListReply)
        self._list_memories = self._unary("ListMemories", pb.ListMemoriesRequest,
                                          pb.ListMemoriesReply)

    def recall(
        self,
        query: str = "",
        *,
        top_k: int = 0,
        min_score: float | None = None,
        filter: Mapping[str, Any] | str | None = None,
        query_vector: Sequence[float] | None = None,
        include_vectors: bool = False,
        mode: str = "",
        types: Sequence[str] = (),
        topic: str = "",
        exact_topic: bool = False,
        session: str = "",
        source: str = "",
        tiers: Sequence[str] = (),
        include_superseded: bool = False,
        max_tokens: int = 0,
        offset: int = 0,
        mark_accessed: bool = True,
        min_txid: int = 0,
        include_turns: bool = False,
        band: str = "",
    ) -> Hits:
        """The memories that best answer `query`, best first; empty when none do.

        `top_k` 0 means the daemon's default (3). `filter` is a filter
        expression, as a dict or as JSON text passed through unchanged, e.g.
        {"AND": [{"category": "development"}, {"tags": {"contains": "testing"}}]}.
        `mode` is "hybrid" (the default), "vector" or "keyword". `types`,
        `topic` (and the topics below it: "work" keeps "work.deadlines";
        `exact_topic=True` keeps that topic alone), `session`, `source` and
        `tiers` (default working + long_term) narrow the search. `max_tokens` stops
        adding hits once their text would pass that many tokens; `offset`
        skips ranked hits, and the result's `has_more` says whether more
        remain. `mark_accessed=False` is a preview that leaves access counts
        alone. `min_txid` waits until the daemon has applied that write.
        `include_turns` also searches the transcript turns, returned apart in
        the result's `turns`. `band` ("hot", "warm", "cold", "frozen") keeps
        only memories of that heat band; every hit carries `heat` and `band`.
        """
        request = pb.RecallRequest(
            query=query,
            top_k=top_k,
            filter_json=(
                wire.exact_topic_filter(filter, topic)
                if exact_topic and topic
                else wire.filter_json(filter)
            ),
            query_vector=list(query_vector or ()),
            include_vectors=include_vectors,
            mode=mode,
            types=wire.strings(types),
            topic_key=topic,
            session_id=session,
            source=source,
            tiers=wire.strings(tiers),
            include_superseded=include_superseded,
            max_tokens=max_tokens,
            offset=offset,
            min_txid=min_txid,
            include_turns=include_turns,
            band=band,
        )
        if min_score is not None:
            request.min_score = min_score
        if not mark_accessed:  # unset means the daemon's documented default, true
            request.mark_accessed = False
        return wire.hits(self._call(self._recall, request))

    def get(self, id: str, *, include_vector: bool = False) -> Memory:
        """The memory with this id; raises NotFound when there is none."""
        reply = self._call(self._get, pb.GetRequest(id=id, include_vector=include_vector))
        return wire.memory(reply.memory)

    def resolve_id(self, id: str) -> str:
        """The whole id of the memory (held or in the trash) that `id` is or begins.

        A whole id is returned as it is. A prefix needs at least 4 characters
        and must begin exactly one id: InvalidArgument naming the candidates
        when it begins several, NotFound when it begins none.
        """
        return str(self._call(self._resolve_id, pb.ResolveIdRequest(id=id)).id)

    def history(self, id: str) -> list[Memory]:
        """The supersession chain this memory belongs to, oldest first, itself included.

        A single memory when it never replaced another and was never replaced.
        Raises NotFound when there is no such memory.
        """
        reply = self._call(self._get, pb.GetRequest(id=id))
        return [wire.memory(link) for link in reply.chain]

    def list_topics(self, filter: Mapping[str, Any] | str | None = None) -> list[Facet]:
        """The topic keys of the memories (the filter matches), with counts and last activity."""
        request = pb.ListRequest(filter_json=wire.filter_json(filter))
        return wire.facets(self._call(self._list_topics, request))

    def list_entities(self, filter: Mapping[str, Any] | str | None = None) -> list[Facet]:
        """The entities of the memories (the filter matches), with counts and last activity."""
        request = pb.ListRequest(filter_json=wire.filter_json(filter))
        return wire.facets(self._call(self._list_entities, request))

    def list_memories(
        self,
        *,
        sort: str = "created",
        ascending: bool = False,
        limit: int = 0,
        offset: int = 0,
        page_token: str = "",
        filter: Mapping[str, Any] | str | None = None,
        types: Sequence[str] = (),
        topic: str = "",
        entity: str = "",
        tag: str = "",
        source: str = "",
        session: str = "",
        band: str = "",
        tiers: Sequence[str] = (),
        include_superseded: bool = False,
        facets: bool = False,
    ) -> MemoryPage:
        """A page of every memory that matches, in a stable order; no query, no ranking.

        `sort` is "created" (the default), "last_used", "heat" or
        "importance", newest (hottest, most important) first unless
        `ascending`; ties go by id. `limit` is 1..500 (0: 50). The next page:
        pass the page's `next_page_token` (empty on the last page), or an
        `offset`. `topic` keeps that topic and the topics below it; `types`,
        `entity`, `tag`, `source`, `session`, `band`, `tiers` (default
        working + long_term) and `filter` (as recall's) narrow further.
        `facets=True` also counts the matching memories per value of each
        field (the page's `facets`).
        """
        request = pb.ListMemoriesRequest(
            sort=sort, ascending=ascending, limit=limit, offset=offset, page_token=page_token,
            filter_json=wire.filter_json(filter), types=wire.strings(types), topic_key=topic,
            entity=entity, tag=tag, source=source, session_id=session, band=band,
            tiers=wire.strings(tiers), include_superseded=include_superseded,
            include_facets=facets)
        return wire.memory_page(self._call(self._list_memories, request))
