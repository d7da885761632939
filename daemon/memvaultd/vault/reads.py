"""Reads: recall, get, chains, facets, a page of the listing
(`listing.py`), export, the heat band counts, the trash's list, and which
memory an id prefix names. Every read but the last
two goes through the memories layer, which never holds a trashed memory
(`state.py`). Each returns only what the caller's declared access
(`model/scopes.py`) may see: recall and the listing through their
visibility rule, the others memory by memory; a memory it may not see is
not found."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from memvault_base.errors import InvalidArgument, NotFound
from memvaultd.model import drafts, id_prefix
from memvaultd.model import memory as m
from memvaultd.model.commands import ListQuery, RecallQuery
from memvaultd.model.memory import Memory
from memvaultd.model.operations import TURNS
from memvaultd.model.scopes import FULL, Access
from memvaultd.model.vector import Vector
from memvaultd.recall import engine
from memvaultd.upkeep import trash as trashing
from memvaultd.vault import listing
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import VaultCore
from memvaultd.vault.events import MEMORY_EVENTS, Event

# `recall_at_once` answers only in a vault of up to this many memories. A
# recall on the event loop never hands the interpreter lock between threads
# (serve/), but neither does its vector work, which runs without the lock,
# overlap another call's. That work grows with the rows the IVF reads
# (~N/25): at 100k it is ~0.3 ms of a ~2 ms call, and 8 mixed clients made
# 412-566 calls/s with the loop answering against 379-413 on worker threads;
# at 1M it is several ms of ~9, and two recalls on workers at once made
# 1.38-1.46 x one client against 1.19 x on the loop. Between, alternating
# runs at 300k still favoured the loop (309-366 against 346-395 calls/s was
# within noise) and at 500k the workers won (255-286 against 229-249): the
# cut is at 500k (docs/benchmarks.md).
AT_ONCE_MAX_MEMORIES = 500_000


@dataclass(frozen=True)
class PreparedRecall:
    """A recall request checked once (`Reads.prepare`), whichever path then
    answers it: its plan, and the query's own vector if it came with one."""

    plan: engine.Plan
    vector: Vector | None


@dataclass(frozen=True)
class Recalled:
    hits: list[engine.Hit]
    has_more: bool
    turns: list[engine.Hit]
    # Each hit's vector, by id, when the query asked for them.
    vectors: dict[str, Vector]


@dataclass(frozen=True)
class Facet:
    name: str
    count: int
    last_activity: float


class Reads:
    def __init__(self, core: VaultCore, marks: AccessMarks) -> None:
        self.core = core
        self.marks = marks

    def prepare(self, query: RecallQuery) -> PreparedRecall:
        """Check `query` once, whichever path answers it: bad input fails
        here, before any embedding, naming the field."""
        planned = engine.plan(query, time.time(), self.core.config.heat)
        return PreparedRecall(planned, self._given_vector(query))

    def recall(self, prepared: PreparedRecall) -> Recalled:
        query = prepared.plan.query
        vector = prepared.vector
        if vector is None:
            vector = self.core.embedder.embed_query(query.text)
        self.core.await_loaded()
        self.core.await_txid(query.min_txid)
        recalled = self._recalled(prepared.plan, vector, wait=True)
        assert recalled is not None
        return recalled

    def recall_at_once(self, prepared: PreparedRecall) -> Recalled | None:
        """`recall`, when it can be answered without waiting: the vault is
        loaded, `min_txid` is applied, the query's vector is given or cached
        and the access marks' lock is free; and the vault holds at most
        AT_ONCE_MAX_MEMORIES. None otherwise, having marked nothing."""
        if len(self.core.memories) > AT_ONCE_MAX_MEMORIES:
            return None
        query = prepared.plan.query
        vector = prepared.vector
        if vector is None:
            vector = self.core.embedder.cached_query(query.text, count=False)
        if vector is None or not self._caught_up(query.min_txid):
            return None
        recalled = self._recalled(prepared.plan, vector, wait=False)
        if recalled is not None and prepared.vector is None:
            self.core.embedder.count_hit(query.text)  # counted once, by whichever path answers
        return recalled

    def recall_ready(self, prepared: PreparedRecall) -> bool:
        """Whether `recall(prepared)` would wait for nothing but, briefly,
        the access marks' lock (a commit or a snapshot's capture holds it):
        the vault is loaded, `min_txid` applied, and the query's vector given
        or cached, so that no model call queues behind a batch being embedded."""
        query = prepared.plan.query
        if not self._caught_up(query.min_txid):
            return False
        return prepared.vector is not None or (
            self.core.embedder.cached_query(query.text, count=False) is not None)

    def _caught_up(self, min_txid: int) -> bool:
        return self.core.loaded and self.core.applied_txid >= min_txid

    def _given_vector(self, query: RecallQuery) -> Vector | None:
        """The query's own vector, checked; None for a text query, its text checked."""
        info = self.core.info
        if query.vector:
            return drafts.own_vector(query.vector, info.dimension, info.model, "query_vector")
        if not query.text.strip():
            raise InvalidArgument("query: must not be empty")
        m.check_text(query.text, "query")
        return None

    def _recalled(self, planned: engine.Plan, vector: Vector, *, wait: bool
                  ) -> Recalled | None:
        config, query = self.core.config, planned.query
        page = engine.recall(self.core.memories, planned, vector, half_lives=config.half_lives,
                             settings=config.fusion, heat_settings=config.heat)
        turns: list[engine.Hit] = []
        if query.include_turns:
            turn_query = RecallQuery(text=query.text, top_k=query.top_k,
                                     session_id=query.session_id, min_score=query.min_score,
                                     access=query.access)
            turns = engine.recall(self.core.state.layers[TURNS],
                                  engine.plan(turn_query, planned.now, config.heat), vector,
                                  half_lives=config.half_lives, settings=config.fusion).hits
        if query.mark_accessed and page.hits and not self.marks.mark(
                [hit.scored.memory.id for hit in page.hits], wait=wait):
            return None
        vectors = {}
        if query.include_vectors:
            index = self.core.memories.index
            vectors = {hit.scored.memory.id: row for hit in page.hits
                       if (row := index.vector(hit.scored.memory.id)) is not None}
        return Recalled(page.hits, page.has_more, turns, vectors)

    def get(self, memory_id: str, access: Access = FULL
            ) -> tuple[Memory, Vector, list[Memory], list[Memory]]:
        """The memory, its vector, its supersession chain and, for a
        consolidated memory, the (archived) memories it summarises: of
        each, what `access` may see."""
        self.core.await_loaded()
        memory = self.core.get(memory_id)
        if not access.sees(memory):
            raise NotFound(f"id: no memory {memory_id!r}")
        vector = self.core.memories.index.vector(memory_id)
        assert vector is not None
        memories = self.core.memories
        sources = [s for i in memory.consolidated_from
                   if (s := memories.get(i)) is not None and access.sees(s)]
        chain = [link for link in self.chain(memory) if access.sees(link)]
        return memory, vector, chain, sources

    def resolve_id(self, ref: str, access: Access = FULL) -> str:
        """The id of the one memory, held or in the trash, that `ref` is or
        begins (`model/id_prefix.py`), among those `access` may see."""
        self.core.await_loaded()
        state = self.core.state

        def known(memory_id: str) -> bool:
            if access.full:
                return memory_id in state.tombstones or state.find(memory_id) is not None
            found = state.find(memory_id)
            return found is not None and access.sees(found[1])

        # The ids first, a memory made only for those `ref` begins.
        ids = (memory_id for layer in (state.memories, state.trash) for memory_id in layer.ids()
               if memory_id.startswith(ref) and _seen(layer.get(memory_id), access))
        return id_prefix.resolve(ref, known, ids)

    def shows(self, memory_id: str, access: Access) -> bool:
        """Whether `access` may see the memory `memory_id` (held or in the
        trash); a purged one, whose scope is gone with it, only with full access."""
        if access.full:
            return True
        found = self.core.state.find(memory_id)
        return found is not None and access.sees(found[1])

    def shows_event(self, event: Event, access: Access) -> bool:
        """Whether a caller with `access` hears of `event`: with full access
        every event; else one about a memory it may see, and "ready". A
        query's "hit" or "miss" may be another agent's words, and a purged
        memory's scope is gone with it: neither is told."""
        if access.full:
            return True
        if event.type in MEMORY_EVENTS:
            return self.shows(event.id, access)
        return event.type == "ready"

    def chain(self, memory: Memory) -> list[Memory]:
        """The supersession chain through `memory`, oldest first."""
        first, seen = memory, {memory.id}
        while first.supersedes and first.supersedes not in seen:
            older = self.core.memories.get(first.supersedes)
            if older is None:
                break
            first = older
            seen.add(first.id)
        chain, current = [first], first
        while current.superseded_by and current.superseded_by not in {c.id for c in chain}:
            newer = self.core.memories.get(current.superseded_by)
            if newer is None:
                break
            chain.append(newer)
            current = newer
        return chain

    def facets(self, field: str, filter_json: str = "", access: Access = FULL
               ) -> list[Facet]:
        """Counts and last activity per topic_key or entity (non-empty), of
        the memories `access` may see."""
        self.core.await_loaded()
        query = ListQuery(filter_json=filter_json, access=access)
        return [Facet(*found) for found in listing.activity(
            self.core.memories, field, query, time.time(), self.core.config.heat)]

    def list_memories(self, query: ListQuery) -> listing.ListPage:
        """A page of the memories `query` matches, in its order (`listing.py`)."""
        listing.check(query)
        self.core.await_loaded()
        return listing.list_page(self.core.memories, query, time.time(), self.core.config.heat)

    def export(self, access: Access = FULL) -> Iterator[tuple[Memory, Vector]]:
        self.core.await_loaded()
        memories, vectors = self.core.memories.index.export()
        for memory, vector in zip(memories, vectors, strict=True):
            if access.sees(memory):
                yield memory, vector

    def band_counts(self) -> dict[str, int]:
        """Visible memories per heat band."""
        self.core.await_loaded()
        return listing.band_counts(self.core.memories, time.time(), self.core.config.heat)

    def trash(self, access: Access = FULL) -> list[tuple[Memory, float]]:
        """What the trash holds that `access` may see, the most recently
        forgotten first, each with when it will be purged."""
        self.core.await_loaded()
        settings = self.core.config.trash
        held = sorted((mem for mem in self.core.state.trash.memories() if access.sees(mem)),
                      key=lambda mem: (-mem.trashed_at, mem.id))
        return [(memory, trashing.purge_at(memory, settings)) for memory in held]


def _seen(memory: Memory | None, access: Access) -> bool:
    return memory is not None and access.sees(memory)
