"""Consolidation: clusters of cold, minor memories become one memory each.

Candidates are the visible memories that nobody uses any more and nobody
marked as mattering:

- not used lately: band cold or frozen (heat < 0.25, `heat.py`) counting
  recalls and restatements only, not the writing itself: new memories are
  guarded by the age rule instead, so `min_age_days 0` takes a fresh bulk
  import whole,
- importance <= `consolidation.max_importance` (default 0.5, the unrated
  default), so never pinned; not `protected`, not procedural,
- older than `min_age_days` (default 7; 0 consolidates a bulk import at once),
- not a consolidated memory itself (a summary is not summarised again),
- not a chunk of a watched file (source `file:...`): the file is its truth,
  and a summary would outlive the next edit of it.

A consolidated memory whose source changes afterwards (edited, superseded,
forgotten, or its file changed) is retired: archived, and its other sources
back in the long-term tier (`stale` finds them; vault/upkeep.py writes it).

They are grouped by type and by topic_key (or, without one, entity), and
with `scope = session` by session too; inside a group, oldest first, each
memory joins the first cluster whose first memory it resembles (cosine >=
`consolidation.similarity`, default 0.45) or starts one. Measured with
all-MiniLM-L6-v2: facts about one subject ("The deploy script lives in
ops/deploy.sh." / "...needs sudo. Run it from the repo root." / "Run the
deploy script after the tests pass.") score 0.47-0.64 with each other;
unrelated facts 0.30 at most, even two "the user ..." facts (0.05-0.26).
0.45 merges the first and keeps a margin of 0.15 above the second.
A cluster of one is left alone.

Each cluster of two or more becomes one memory: the summariser's text, the
normalised mean of the sources' vectors (no model call, and a query near
any source stays near it), the sources' common fields, their summed counts,
their latest times (created_at included: the summary is as old as its
newest fact, so it is as cold as its sources and decays like them), and
`consolidated_from` = the sources. Its id is a UUIDv5 of the sources' ids,
so two devices that consolidate the same memories write the same memory,
and the merge keeps one.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from memvault_base.errors import InvalidArgument
from memvaultd.model import memory as m
from memvaultd.model.heat import COLD, FROZEN, SECONDS_PER_DAY, HeatSettings, band, heat
from memvaultd.model.memory import MAX_SOURCES as MAX_SOURCES
from memvaultd.model.memory import Memory
from memvaultd.model.vector import Vector
from memvaultd.upkeep.summariser import Summariser, Summary

ALL, SESSION = "all", "session"
SCOPES: Final = (ALL, SESSION)
SOURCE: Final = "consolidation"
# Bounds of one cluster: the summary must fit one memory (32 KiB of text),
# and its fact list the payload (`MAX_SOURCES`).
MAX_SOURCE_BYTES: Final = 24 * 1024
# Leader clustering compares each memory with every cluster so far: a group
# of 5,000 memories costs at most 5,000 x 5,000 dot products (~1 s); the
# rest of a larger group waits for the next run.
MAX_GROUP: Final = 5_000
_NAMESPACE: Final = uuid.UUID("6f0d54a4-6c1b-4c59-8e0e-3f5b7c1d9a21")


@dataclass(frozen=True)
class ConsolidationSettings:
    min_age_days: float = 7.0
    similarity: float = 0.45
    max_importance: float = 0.5
    summariser: str = ""


@dataclass(frozen=True)
class Request:
    scope: str = ALL
    min_age_days: float | None = None
    session_id: str = ""


@dataclass(frozen=True)
class Consolidated:
    memory: Memory
    vector: Vector
    sources: tuple[Memory, ...]
    summary: Summary


def check(request: Request) -> Request:
    scope = request.scope or ALL
    if scope not in SCOPES:
        raise InvalidArgument(f"scope: unknown scope {request.scope!r}; use all or session")
    age = request.min_age_days
    if age is not None and not (math.isfinite(age) and age >= 0):
        raise InvalidArgument(f"min_age_days: {age!r} is not a number of days >= 0")
    if request.session_id and scope != SESSION:
        raise InvalidArgument("session_id: only with scope session")
    m.check_short(request.session_id, "session_id")
    return Request(scope, age, request.session_id)


def is_candidate(memory: Memory, now: float, request: Request,
                 settings: ConsolidationSettings, heat_settings: HeatSettings) -> bool:
    min_age = settings.min_age_days if request.min_age_days is None else request.min_age_days
    return (not memory.superseded_by and not memory.is_expired(now)
            and memory.tier != m.ARCHIVED and not memory.consolidated_from
            and not memory.protected and memory.type != m.PROCEDURAL
            and not memory.source.startswith(m.WATCHED_FILE_SOURCE)
            and memory.importance <= settings.max_importance
            and now - memory.created_at >= min_age * SECONDS_PER_DAY
            and (request.scope != SESSION or (bool(memory.session_id) and (
                not request.session_id or memory.session_id == request.session_id)))
            and band(heat(memory, now, heat_settings.half_life_days, creation=False))
            in (COLD, FROZEN))


def stale(consolidated: Memory, lookup: Callable[[str], Memory | None]) -> bool:
    """Whether a consolidated memory no longer says what its sources say: one
    of them is gone, superseded, or no longer archived into it."""
    if not consolidated.consolidated_from or consolidated.tier == m.ARCHIVED:
        return False
    for source_id in consolidated.consolidated_from:
        source = lookup(source_id)
        if (source is None or source.superseded_by or source.tier != m.ARCHIVED
                or source.consolidated_into != consolidated.id):
            return True
    return False


def clusters(candidates: Iterable[tuple[Memory, Vector]], request: Request,
             similarity: float) -> list[list[tuple[Memory, Vector]]]:
    """Clusters of two or more, in a deterministic order."""
    groups: dict[tuple[str, ...], list[tuple[Memory, Vector]]] = {}
    for memory, vector in candidates:
        subject = (f"topic:{memory.topic_key}" if memory.topic_key
                   else f"entity:{memory.entity}" if memory.entity else "")
        session = memory.session_id if request.scope == SESSION else ""
        # Never across scopes: a summary belongs to one (model/scopes.py).
        groups.setdefault((memory.scope, memory.type, subject, session), []).append(
            (memory, vector))
    out: list[list[tuple[Memory, Vector]]] = []
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda item: (item[0].created_at, item[0].id))
        out += [c for c in _leader_clusters(members[:MAX_GROUP], similarity) if len(c) > 1]
    return out


def _leader_clusters(members: list[tuple[Memory, Vector]], similarity: float
                     ) -> list[list[tuple[Memory, Vector]]]:
    found: list[list[tuple[Memory, Vector]]] = []
    sizes: list[int] = []
    leaders = np.empty((len(members), members[0][1].shape[0] if members else 0), np.float32)
    for memory, vector in members:
        size = len(memory.text.encode("utf-8", "surrogatepass"))
        joined = False
        if found:
            cosines = leaders[: len(found)] @ vector
            for i in np.flatnonzero(cosines >= similarity):
                if len(found[i]) < MAX_SOURCES and sizes[i] + size <= MAX_SOURCE_BYTES:
                    found[i].append((memory, vector))
                    sizes[i] += size
                    joined = True
                    break
        if not joined:
            leaders[len(found)] = vector
            found.append([(memory, vector)])
            sizes.append(size)
    return found


def consolidated_id(sources: Sequence[Memory]) -> str:
    return uuid.uuid5(_NAMESPACE, "\n".join(sorted(s.id for s in sources))).hex


def build(cluster: Sequence[tuple[Memory, Vector]], summary: Summary) -> Consolidated:
    sources = tuple(memory for memory, _ in cluster)
    mean = np.mean(np.stack([vector for _, vector in cluster]), axis=0).astype(np.float32)
    vector = mean / max(float(np.linalg.norm(mean)), 1e-12)

    def common(name: str) -> str:
        values = {getattr(s, name) for s in sources}
        return values.pop() if len(values) == 1 else ""

    tags = tuple(dict.fromkeys(t for s in sources for t in s.tags))[: m.MAX_TAGS]
    memory = Memory(
        id=consolidated_id(sources), text=summary.text, type=sources[0].type,
        topic_key=common("topic_key"), entity=common("entity"), tags=tags,
        category=common("category"), importance=max(s.importance for s in sources),
        session_id=common("session_id"), source=SOURCE, tier=m.LONG_TERM,
        scope=sources[0].scope,
        payload={"facts": [{"text": f.text, "from": list(f.sources)} for f in summary.facts]},
        created_at=max(s.created_at for s in sources),
        last_reinforced_at=max(s.last_reinforced_at or s.created_at for s in sources),
        reinforce_count=sum(s.reinforce_count for s in sources),
        access_count=sum(s.access_count for s in sources),
        last_accessed_at=max(s.last_accessed_at for s in sources),
        consolidated_from=tuple(s.id for s in sources))
    return Consolidated(memory, vector, sources, summary)


def plan(candidates: Iterable[tuple[Memory, Vector]], request: Request,
         settings: ConsolidationSettings, summarise: Summariser,
         check_summary: Callable[[object], Summary]) -> list[Consolidated]:
    return [build(cluster, check_summary(summarise([mem for mem, _ in cluster])))
            for cluster in clusters(candidates, request, settings.similarity)]
