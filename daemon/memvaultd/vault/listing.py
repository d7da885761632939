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
every matching memory once: at 100k a page took 14-22 ms, 60-68 ms with
the facet counts, over the socket, the memories restored from a snapshot
(60-67 and 343-352 ms when held as objects; docs/benchmarks.md,
"Listing"); a page holds at most MAX_PAGE of them.

The vault's topics and entities with their last activity (`activity`) and
its heat bands (`band_counts`) are counted over the same columns: no
`Memory` is made for them.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain

import numpy as np
import numpy.typing as npt

from memvault_base.errors import InvalidArgument
from memvaultd.index.layer import Layer
from memvaultd.model.commands import ListQuery, RecallQuery
from memvaultd.model.heat import (
    BANDS,
    HeatSettings,
    band,
    bands_of,
    heat,
    heats,
    last_uses,
)
from memvaultd.model.memory import Memory
from memvaultd.model.records import Records
from memvaultd.model.scopes import within
from memvaultd.recall.visibility import Visibility, check_kinds

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

Floats = npt.NDArray[np.float64]
Places = npt.NDArray[np.intp]


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
    check_kinds(query.tiers, query.types, query.band)


def list_page(layer: Layer, query: ListQuery, now: float,
              heat_settings: HeatSettings) -> ListPage:
    """The page of `layer`'s memories that `query` asks for (`check` it first).

    The keys are arrays over every match (`heats` for heat); only the page's
    memories, and the ties at its edge, are then ordered one by one.
    """
    sort = query.sort or CREATED
    cursor = _read_token(query.page_token, sort, query.ascending) if query.page_token else None
    if cursor is not None:
        now = cursor.now
    memories = _matching(layer, query, now, heat_settings)
    warmth = None
    if sort == HEAT or query.band or query.include_facets:
        warmth = heats(memories, now, heat_settings.half_life_days)
    if query.band:
        assert warmth is not None
        keep = np.flatnonzero(bands_of(warmth) == query.band)
        memories, warmth = memories.taken(keep), warmth[keep]
    keys = _keys(sort, memories, warmth)
    ids = memories.ids()
    places = np.arange(len(memories))
    if cursor is not None:
        places = _beyond(keys, ids, cursor, query.ascending)
    skip = 0 if cursor is not None else query.offset
    limit = query.limit or DEFAULT_PAGE
    # The page and one more (is there a next page?), without sorting the rest.
    best = _first(places, keys, ids, skip + limit + 1, query.ascending)
    page = best[skip:skip + limit]
    token = (_write_token(sort, query.ascending, float(keys[page[-1]]), ids[page[-1]], now)
             if len(best) > skip + limit and page else "")
    half_life = heat_settings.half_life_days
    listed = [Listed(memories[i], heat(memories[i], now, half_life)) for i in page]
    facets = _facets(memories, warmth) if query.include_facets else {}
    return ListPage(listed, len(memories), token, facets)


def activity(layer: Layer, field: str, query: ListQuery, now: float,
             heat_settings: HeatSettings) -> list[tuple[str, int, float]]:
    """(value, memories, last activity) for each non-empty value of `field`
    among the memories `query` matches, the most memories first, ties by
    value; a memory's activity is when it was written or last reinforced."""
    memories = _matching(layer, query, now, heat_settings)
    latest = np.maximum(memories.numbers("created_at"), memories.numbers("last_reinforced_at"))
    found: dict[str, list[float]] = {}
    for name, at in zip(memories.column(field), latest.tolist(), strict=True):
        if name:
            entry = found.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] = max(entry[1], at)
    return sorted(((name, int(count), at) for name, (count, at) in found.items()),
                  key=lambda facet: (-facet[1], facet[0]))


def band_counts(layer: Layer, now: float, heat_settings: HeatSettings) -> dict[str, int]:
    """How many of the memories a recall may see by default (not expired,
    superseded or archived) are in each heat band."""
    memories = _matching(layer, ListQuery(), now, heat_settings)
    counted = Counter(bands_of(heats(memories, now, heat_settings.half_life_days)).tolist())
    return {name: counted[name] for name in BANDS}


def _matching(layer: Layer, query: ListQuery, now: float,
              heat_settings: HeatSettings) -> Records:
    """The memories recall's visibility rule lets through (over the index's
    columns), then those of the asked topic, session, source, entity and tag."""
    # The topic, session and source narrowed below, over the records'
    # columns: in the rule, each would make every memory the columns let
    # through (at 100k restored, a topic's page took 315-361 ms, 58 ms when
    # the memories were objects already).
    seen = Visibility.of(RecallQuery(
        types=query.types, tiers=query.tiers, include_superseded=query.include_superseded,
        filter_json=query.filter_json, access=query.access), now, heat_settings)
    index = layer.index
    view = index.view()
    ok = seen.mask(index, view, np.arange(view.count))
    ids = view.ids
    # A memory removed since the view was taken is left out. Read as
    # columns: only the page's memories are made (`model/records.py`).
    memories = index.records_of([ids[row] for row in np.flatnonzero(ok).tolist()])
    if query.topic_key:
        memories = memories.taken(np.flatnonzero(
            memories.mapped("topic_key", partial(within, query.topic_key), np.bool_)))
    for name, value in (("session_id", query.session_id), ("source", query.source)):
        if value:
            memories = memories.taken(np.flatnonzero(
                memories.mapped(name, value.__eq__, np.bool_)))
    if query.entity:
        memories = memories.taken(np.flatnonzero(
            memories.mapped("entity", query.entity.__eq__, np.bool_)))
    if query.tag:
        memories = memories.taken(np.flatnonzero(
            memories.mapped("tags", partial(_holds, query.tag), np.bool_)))
    return memories


def _holds(tag: str, tags: tuple[str, ...]) -> bool:
    return tag in tags


def _keys(sort: str, memories: Sequence[Memory], warmth: Floats | None) -> Floats:
    if sort == HEAT:
        assert warmth is not None
        return warmth
    if sort == LAST_USED:
        return last_uses(memories)
    return Records.of(memories).numbers("importance" if sort == IMPORTANCE else "created_at")


def _beyond(keys: Floats, ids: list[str], cursor: _Cursor, ascending: bool) -> Places:
    """The places past the cursor in the order: a greater (ascending) or
    smaller key, or the same key and an id past the cursor's."""
    past = keys > cursor.key if ascending else keys < cursor.key
    tied = np.flatnonzero(keys == cursor.key).tolist()
    later = [i for i in tied if (ids[i] > cursor.id if ascending else ids[i] < cursor.id)]
    return np.union1d(np.flatnonzero(past), np.array(later, dtype=np.intp))


def _first(places: Places, keys: Floats, ids: list[str], want: int,
           ascending: bool) -> list[int]:
    """The first `want` of `places` in the order (key, then id; both reversed
    when descending): the keys past the want-th by a partition, the ties at
    the edge by id, and only those sorted."""
    if len(places) > want:
        signed = keys[places] if ascending else -keys[places]
        edge = np.partition(signed, want - 1)[want - 1]
        inside = places[signed < edge].tolist()
        tied = places[signed == edge].tolist()
        pick = heapq.nsmallest if ascending else heapq.nlargest
        chosen = inside + pick(want - len(inside), tied, key=ids.__getitem__)
    else:
        chosen = places.tolist()
    return sorted(chosen, key=lambda i: (keys[i], ids[i]), reverse=not ascending)


def _facets(memories: Sequence[Memory], warmth: Floats | None) -> dict[str, FacetCount]:
    """Counts per value of each field (an empty value is not counted)."""
    assert warmth is not None
    memories = Records.of(memories)
    fields = {"topic": "topic_key", "entity": "entity", "type": "type", "source": "source",
              "session": "session_id", "tier": "tier"}
    counters = {name: Counter(memories.column(field)) for name, field in fields.items()}
    counters["tag"] = Counter(chain.from_iterable(memories.column("tags")))
    counters["band"] = Counter(bands_of(warmth).tolist())
    for counter in counters.values():
        counter.pop("", None)
    return {name: FacetCount(sorted(counters[name].items(), key=lambda kv: (-kv[1], kv[0]))
                             [:FACET_VALUES], len(counters[name]))
            for name in FACETS}


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
