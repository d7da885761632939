"""Browsing: every memory a request matches, a page at a time, with facet counts.

A page is ordered by one key (when it was created, last used, its heat or
its importance), ties broken by id, so that the order is total and a page
boundary never splits or repeats a memory. The page token names the last
memory of a page by its key and id (a keyset cursor, not an offset): a
memory added or forgotten between two pages does not shift the next one.
Heat changes with the clock, so the token also carries the first page's
clock and every later page computes heat at that moment.

    token = base64url(JSON {"v": 1, "sort": ..., "asc": ..., "key": ..., "id": ..., "now": ...})

What a memory must be to match is recall's rule (`recall/visibility.py`:
expiry, supersession, tiers, types, topic and the topics below it, session,
source, a filter), plus an entity, a tag and a heat band. One call reads
every memory of the vault once: ~0.1-0.2 s per 100k (docs/benchmarks.md,
"Listing"); a page holds at most MAX_PAGE of them.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from memvault_base.errors import InvalidArgument
from memvaultd.index.layer import Layer
from memvaultd.model import memory as m
from memvaultd.model.commands import ListQuery, RecallQuery
from memvaultd.model.heat import HeatSettings, band, check_band, heat, last_use
from memvaultd.model.memory import Memory
from memvaultd.recall.visibility import Visibility

# 500 rows: a screenful many times over, and a reply of ~0.5 MB at most
# (memories up to ~1 KiB of text each); the next page is one call away.
MAX_PAGE = 500
DEFAULT_PAGE = 50
# Values per facet: a sidebar's worth; `distinct` says how many there are.
FACET_VALUES = 25
TOKEN_VERSION = 1

CREATED, LAST_USED, HEAT, IMPORTANCE = "created", "last_used", "heat", "importance"
SORTS = (CREATED, LAST_USED, HEAT, IMPORTANCE)
FACETS = ("topic", "entity", "tag", "type", "source", "session", "band", "tier")


@dataclass(frozen=True)
class Listed:
    memory: Memory
    heat: float

    @property
    def band(self) -> str:
        return band(self.heat)


@dataclass(frozen=True)
class FacetCount:
    values: list[tuple[str, int]]  # the most frequent first, ties by value
    distinct: int


@dataclass(frozen=True)
class ListPage:
    memories: list[Listed]
    total: int
    next_token: str
    facets: dict[str, FacetCount] = field(default_factory=dict)


@dataclass(frozen=True)
class _Cursor:
    key: float
    id: str
    now: float


def check(query: ListQuery) -> None:
    """Raises InvalidArgument naming the first field that is wrong."""
    if query.sort and query.sort not in SORTS:
        raise InvalidArgument(f"sort: unknown order {query.sort!r}; use one of {', '.join(SORTS)}")
    if not 0 <= query.limit <= MAX_PAGE:
        raise InvalidArgument(f"limit: must be 1..{MAX_PAGE} (0 means {DEFAULT_PAGE})")
    if query.offset < 0:
        raise InvalidArgument("offset: must not be negative")
    for tier in query.tiers:
        m.normalize_tier(tier)
    for memory_type in query.types:
        m.normalize_type(memory_type)
    check_band(query.band)


def list_page(layer: Layer, query: ListQuery, now: float,
              heat_settings: HeatSettings) -> ListPage:
    """The page of `layer`'s memories that `query` asks for (`check` it first)."""
    sort = query.sort or CREATED
    cursor = _read_token(query.page_token, sort, query.ascending) if query.page_token else None
    if cursor is not None:
        now = cursor.now
    half_life = heat_settings.half_life_days
    matched = [Listed(memory, heat(memory, now, half_life))
               for memory in _matching(layer, query, now, heat_settings)]
    if query.band:
        matched = [listed for listed in matched if listed.band == query.band]
    key = _KEYS[sort]
    limit = query.limit or DEFAULT_PAGE
    after = matched
    if cursor is not None:
        after = [listed for listed in matched
                 if _beyond((key(listed), listed.memory.id), cursor, query.ascending)]
    skip = 0 if cursor is not None else query.offset
    # The page and one more (is there a next page?), without sorting the rest.
    want = skip + limit + 1

    def order(listed: Listed) -> tuple[float, str]:
        return key(listed), listed.memory.id

    best = (heapq.nsmallest(want, after, key=order) if query.ascending
            else heapq.nlargest(want, after, key=order))
    page = best[skip:skip + limit]
    more = len(best) > skip + limit
    token = _write_token(sort, query.ascending, key(page[-1]), page[-1].memory.id,
                         now) if more and page else ""
    facets = _facets(matched) if query.include_facets else {}
    return ListPage(page, len(matched), token, facets)


def _matching(layer: Layer, query: ListQuery, now: float,
              heat_settings: HeatSettings) -> Iterable[Memory]:
    """The memories recall's visibility rule lets through (over the index's
    columns), then those of the asked entity and tag."""
    seen = Visibility.of(RecallQuery(
        types=query.types, topic_key=query.topic_key, session_id=query.session_id,
        source=query.source, tiers=query.tiers, include_superseded=query.include_superseded,
        filter_json=query.filter_json), now, heat_settings)
    index = layer.index
    view = index.view()
    rows = np.arange(view.count)
    ok = seen.mask(index, view, rows)
    ids = view.ids
    for row in np.flatnonzero(ok).tolist():
        memory = index.get(ids[row])
        if memory is None:
            continue
        if query.entity and memory.entity != query.entity:
            continue
        if query.tag and query.tag not in memory.tags:
            continue
        yield memory


_KEYS: dict[str, Callable[[Listed], float]] = {
    CREATED: lambda listed: listed.memory.created_at,
    LAST_USED: lambda listed: last_use(listed.memory),
    HEAT: lambda listed: listed.heat,
    IMPORTANCE: lambda listed: listed.memory.importance,
}


def _beyond(position: tuple[float, str], cursor: _Cursor, ascending: bool) -> bool:
    mark = (cursor.key, cursor.id)
    return position > mark if ascending else position < mark


def _facets(matched: list[Listed]) -> dict[str, FacetCount]:
    counters: dict[str, Counter[str]] = {name: Counter() for name in FACETS}
    topic, entity, tag = counters["topic"], counters["entity"], counters["tag"]
    kind, source, session = counters["type"], counters["source"], counters["session"]
    bands, tier = counters["band"], counters["tier"]
    for listed in matched:
        memory = listed.memory
        if memory.topic_key:
            topic[memory.topic_key] += 1
        if memory.entity:
            entity[memory.entity] += 1
        tag.update(memory.tags)
        kind[memory.type] += 1
        if memory.source:
            source[memory.source] += 1
        if memory.session_id:
            session[memory.session_id] += 1
        bands[listed.band] += 1
        tier[memory.tier] += 1
    return {name: FacetCount(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
                             [:FACET_VALUES], len(counter))
            for name, counter in counters.items()}


def _write_token(sort: str, ascending: bool, key: float, memory_id: str, now: float) -> str:
    body = json.dumps({"v": TOKEN_VERSION, "sort": sort, "asc": ascending, "key": key,
                       "id": memory_id, "now": now}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def _read_token(token: str, sort: str, ascending: bool) -> _Cursor:
    bad = InvalidArgument("page_token: not a token of this listing; start again without it")
    try:
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        cursor = _Cursor(float(body["key"]), str(body["id"]), float(body["now"]))
        same = (body["v"], body["sort"], body["asc"]) == (TOKEN_VERSION, sort, ascending)
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise bad from None
    if not same or not (math.isfinite(cursor.key) and math.isfinite(cursor.now)):
        raise bad
    return cursor
