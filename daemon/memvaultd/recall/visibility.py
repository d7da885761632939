"""What one recall request may see, one memory at a time or a batch of rows.

A memory is visible when it has not expired, is not superseded (unless the
request includes superseded memories), sits in one of the asked tiers
(working and long-term by default) and, when types are asked, is of one of
them. A request may narrow further by topic (the key or below it), session,
source, a filter (`filter/`) and a heat band; and the caller's declared
access (`model/scopes.py`) keeps it to its scopes and topics.

`mask` answers for many index rows at once from the index's columns
(`columns.py`), the scopes included; only the narrowing a column cannot
answer (topic prefix, session, source, filter, band, declared topics) reads
the records, and only of the rows the
columns let through. The reference recall (`tests/reference_recall.py`)
asks the same of one `Memory` at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memvaultd.index.columns import SCOPE_CODES, TIER_CODES, TYPE_CODES
from memvaultd.index.memory_index import MemoryIndex, Rows, View
from memvaultd.model import memory as m
from memvaultd.model.commands import RecallQuery
from memvaultd.model.heat import HeatSettings, band, check_band, heat
from memvaultd.model.memory import Memory
from memvaultd.recall.filter.parse import MATCH_ALL, parse_filter

DEFAULT_TIERS = frozenset({m.WORKING, m.LONG_TERM})


def check_kinds(tiers: Sequence[str], types: Sequence[str], band_name: str) -> None:
    """Raises InvalidArgument naming the first tier, type or band that is not
    one: the kinds a recall and a listing narrow by."""
    for tier in tiers:
        m.normalize_tier(tier)
    for memory_type in types:
        m.normalize_type(memory_type)
    check_band(band_name)


@dataclass(frozen=True)
class Visibility:
    now: float
    include_superseded: bool
    tiers: frozenset[str]
    types: frozenset[str]  # empty: any type
    narrower: Callable[[Memory], bool] | None  # None: nothing beyond the above
    scopes: frozenset[str] | None  # the caller's readable scopes; None: all
    # By column code (columns.py), with one more entry for unknown values.
    _tier_ok: npt.NDArray[np.bool_]
    _type_ok: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, query: RecallQuery, now: float, heat_settings: HeatSettings | None = None
           ) -> Visibility:
        """Raises InvalidArgument for a filter that does not parse."""
        tiers = frozenset(query.tiers) or DEFAULT_TIERS
        types = frozenset(m.normalize_type(t) for t in query.types)
        return cls(now, query.include_superseded, tiers, types,
                   _narrower(query, now, heat_settings or HeatSettings()),
                   query.access.readable,
                   np.array([t in tiers for t in TIER_CODES] + [False]),
                   np.array([not types or t in types for t in TYPE_CODES] + [not types]))

    def mask(self, index: MemoryIndex, view: View, rows: Rows) -> npt.NDArray[np.bool_]:
        """Whether the request may see the memory in each of `rows` (dead rows: False)."""
        columns = view.columns
        expires = columns.expires_at[rows]
        ok: npt.NDArray[np.bool_] = (view.alive[rows] & ((expires <= 0) | (expires > self.now))
                                     & self._tier_ok[columns.tier[rows]])
        if not self.include_superseded:
            ok &= ~columns.superseded[rows]
        if self.types:
            ok &= self._type_ok[columns.type[rows]]
        if self.scopes is not None:
            # Looked up at each call: a scope may first appear after `of`.
            codes = [code for scope in self.scopes if (code := SCOPE_CODES.get(scope)) is not None]
            ok &= np.isin(columns.scope[rows], codes)
        if self.narrower is not None:
            ids, narrower, row_list = view.ids, self.narrower, rows.tolist()
            for i in np.flatnonzero(ok).tolist():
                memory = index.get(ids[row_list[i]])
                ok[i] = memory is not None and narrower(memory)
        return ok


def _narrower(query: RecallQuery, now: float, heat_settings: HeatSettings
              ) -> Callable[[Memory], bool] | None:
    matches = parse_filter(query.filter_json or None)
    access = query.access
    if not (query.topic_key or query.session_id or query.source or query.band
            or matches is not MATCH_ALL or access.topics):
        return None
    topic, below = query.topic_key, query.topic_key + "."
    half_life = heat_settings.half_life_days

    def narrower(memory: Memory) -> bool:
        return ((not topic or memory.topic_key == topic or memory.topic_key.startswith(below))
                and access.sees_topic(memory.topic_key)
                and (not query.session_id or memory.session_id == query.session_id)
                and (not query.source or memory.source == query.source)
                and matches.matches(memory)
                and (not query.band or band(heat(memory, now, half_life)) == query.band))

    return narrower
