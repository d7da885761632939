"""Reads: recall, get, chains, facets, export and the heat band counts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from memvault_base.errors import InvalidArgument
from memvaultd.index.memory_index import Vector
from memvaultd.model import drafts
from memvaultd.model import memory as m
from memvaultd.model.commands import RecallQuery
from memvaultd.model.heat import BANDS, band, heat
from memvaultd.model.memory import Memory
from memvaultd.model.operations import TURNS
from memvaultd.recall import engine
from memvaultd.recall.filter.parse import parse_filter
from memvaultd.recall.visibility import Visibility
from memvaultd.vault.access import VaultAccessMarks
from memvaultd.vault.core import visible

# `recall_at_once` answers only in a vault of up to this many memories. A
# recall on the event loop never hands the interpreter lock between threads
# (aio_bridge.py), but neither does its vector work, which runs without the
# lock, overlap another call's. That work grows with the rows the IVF reads
# (~N/25): at 100k it is ~0.3 ms of a ~2 ms call and the loop wins (8 mixed
# clients 516-556 against 402-470 calls/s on worker threads; 412-566 against
# 379-413 once the IVF read 8-bit codes and BM25 summed without the lock,
# leaving ~1.2 ms a recall); at 1M it is
# several ms of ~9 and two recalls on workers at once win (1.38-1.46 x one
# client in runs R, U, the daemon 1.48 cores busy, against 1.19 x and 1.02
# cores on the loop in run W). At 300k the loop still made as many calls
# (8 clients 302-342 against 241-327 calls/s, alternating; 309-366 against
# 346-395 once the workers' recalls had a thread per core, server.py); at
# 500k the recall threads won (255-286 against 229-249 calls/s with the loop
# answering): the cut is between 300k and 500k (docs/benchmarks.md).
AT_ONCE_MAX_MEMORIES = 500_000


@dataclass(frozen=True)
class Recalled:
    hits: list[engine.Hit]
    has_more: bool
    turns: list[engine.Hit]


@dataclass(frozen=True)
class Facet:
    name: str
    count: int
    last_activity: float


class VaultReads(VaultAccessMarks):
    def recall(self, query: RecallQuery) -> Recalled:
        engine.check(query)
        now = time.time()
        seen = Visibility.of(query, now, self.config.heat)  # a bad filter fails before embedding
        vector = self._given_vector(query)
        if vector is None:
            vector = self.embedder.embed_query(query.text)
        self._await_loaded()
        self._await_txid(query.min_txid)
        recalled = self._recalled(query, vector, seen, now, wait=True)
        assert recalled is not None
        return recalled

    def recall_at_once(self, query: RecallQuery) -> Recalled | None:
        """`recall`, when it can be answered without waiting: the vault is
        loaded, `min_txid` is applied, the query's vector is given or cached
        and the access marks' lock is free; and the vault holds at most
        AT_ONCE_MAX_MEMORIES. None otherwise, having marked nothing. Bad
        input fails here as in `recall`."""
        if len(self.memories) > AT_ONCE_MAX_MEMORIES:
            return None
        engine.check(query)
        now = time.time()
        seen = Visibility.of(query, now, self.config.heat)
        vector = self._given_vector(query)
        if vector is None:
            vector = self.embedder.cached_query(query.text, count=False)
        if vector is None or not self._caught_up(query.min_txid):
            return None
        recalled = self._recalled(query, vector, seen, now, wait=False)
        if recalled is not None and not query.vector:
            self.embedder.count_hit(query.text)  # counted once, by whichever path answers
        return recalled

    def recall_ready(self, query: RecallQuery) -> bool:
        """Whether `recall(query)` would wait for nothing but, briefly, the
        access marks' lock (a commit or a snapshot's capture holds it): the
        vault is loaded, `min_txid` applied, and the query's vector given or
        cached, so that no model call queues behind a batch being embedded."""
        if not self._caught_up(query.min_txid):
            return False
        return bool(query.vector) or (
            self.embedder.cached_query(query.text, count=False) is not None)

    def _caught_up(self, min_txid: int) -> bool:
        return self.loaded and self.applied_txid >= min_txid

    def _given_vector(self, query: RecallQuery) -> Vector | None:
        """The query's own vector, checked; None for a text query, its text checked."""
        if query.vector:
            return drafts.own_vector(query.vector, self.info.dimension, self.info.model,
                                     "query_vector")
        if not query.text.strip():
            raise InvalidArgument("query: must not be empty")
        m.check_text(query.text, "query")
        return None

    def _recalled(self, query: RecallQuery, vector: Vector, seen: Visibility, now: float,
                  *, wait: bool) -> Recalled | None:
        settings = self.config.fusion
        page = engine.recall(self.memories, query, vector, seen, now=now,
                             half_lives=self.config.half_lives, settings=settings,
                             heat_settings=self.config.heat)
        turns: list[engine.Hit] = []
        if query.include_turns:
            turn_query = RecallQuery(text=query.text, top_k=query.top_k,
                                     session_id=query.session_id, min_score=query.min_score)
            turns = engine.recall(self.state.layers[TURNS], turn_query, vector,
                                  Visibility.of(turn_query, now, self.config.heat), now=now,
                                  half_lives=self.config.half_lives, settings=settings).hits
        if query.mark_accessed and page.hits and not self._mark_accessed(
                [hit.scored.memory.id for hit in page.hits], wait=wait):
            return None
        return Recalled(page.hits, page.has_more, turns)

    def get(self, memory_id: str) -> tuple[Memory, Vector, list[Memory], list[Memory]]:
        """The memory, its vector, its supersession chain and, for a
        consolidated memory, the (archived) memories it summarises."""
        self._await_loaded()
        memory = self._get(memory_id)
        vector = self.memories.index.vector(memory_id)
        assert vector is not None
        sources = [s for i in memory.consolidated_from if (s := self.memories.get(i)) is not None]
        return memory, vector, self.chain(memory), sources

    def chain(self, memory: Memory) -> list[Memory]:
        """The supersession chain through `memory`, oldest first."""
        first, seen = memory, {memory.id}
        while first.supersedes and first.supersedes not in seen:
            older = self.memories.get(first.supersedes)
            if older is None:
                break
            first = older
            seen.add(first.id)
        chain, current = [first], first
        while current.superseded_by and current.superseded_by not in {c.id for c in chain}:
            newer = self.memories.get(current.superseded_by)
            if newer is None:
                break
            chain.append(newer)
            current = newer
        return chain

    def facets(self, field: str, filter_json: str = "") -> list[Facet]:
        """Counts and last activity per topic_key or entity (non-empty)."""
        self._await_loaded()
        matches = parse_filter(filter_json or None)
        now = time.time()
        counts: dict[str, list[float]] = {}
        for memory in self.memories.memories():
            name = getattr(memory, field)
            if name and visible(memory, now) and matches.matches(memory):
                entry = counts.setdefault(name, [0, 0.0])
                entry[0] += 1
                entry[1] = max(entry[1], memory.created_at, memory.last_reinforced_at)
        return sorted((Facet(n, int(c), t) for n, (c, t) in counts.items()),
                      key=lambda f: (-f.count, f.name))

    def export(self) -> Iterator[tuple[Memory, Vector]]:
        self._await_loaded()
        memories, vectors = self.memories.index.export()
        yield from zip(memories, vectors, strict=True)

    def band_counts(self) -> dict[str, int]:
        """Visible memories per heat band."""
        self._await_loaded()
        now, half_life = time.time(), self.config.heat.half_life_days
        counts = dict.fromkeys(BANDS, 0)
        for memory in self.memories.memories():
            if visible(memory, now):
                counts[band(heat(memory, now, half_life))] += 1
        return counts
