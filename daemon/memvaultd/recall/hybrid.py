"""Hybrid recall: three channels over one layer, fused into one relevance.

`columnar.ranked` runs the channels and this fusion over the candidates'
index rows; this module holds what that needs beyond arrays: the settings,
the weights, the session-neighbour blend, named entities, asked topics, and
the `Candidate` a hit carries with its match reasons (`explain`).
`tests/reference_recall.py` writes the same recall out one `Memory` at a
time, the reference the columnar path is held to.

Channels:
- vector: the nearest memories by cosine (`index/memory_index.py`: an exact
  scan, or the rows of the nearest IVF lists above 20k memories, scored
  exactly);
- keyword: BM25 over text, the topic's last part, tags and entity
  (`index/keyword.py`), for the query's words but those of an entity it
  names (`left_to_entities`);
- topic: memories whose `topic_key` is exactly the requested topic, or a
  dotted topic key written in the query.

Each channel contributes its `depth` best memories among those the caller
keeps (filters, visibility); the union is scored on every signal:

    similarity = max(0, 1 - d/2)                  (d: L2 distance of unit vectors)
    keyword    = bm25 / best bm25 in the union    (0..1)
    topic      = 1 when the topic channel found it, else 0
    entity     = 1 when the query names the memory's entity, else 0
    fusion     = (w_v sim' + w_k keyword' + w_t topic + w_e entity)
                 / (w_v + w_k + w_t [a topic was asked] + w_e)

where x' is x blended with its session neighbours (the memory written just
before and after it in the same session): x' = (1 - c) x + c mean(neighbours).
A turn of a conversation, or a fact noted in passing, is often only
understandable with what surrounds it ("yes, the one in Sweden").

Defaults (w_v 1, w_k 0.5, w_t 2, w_e 0.2, c 0.5) and why, measured on the
LoCoMo turns of docs/benchmarks.md (760 questions, any@5 / any@10):

    reciprocal-rank fusion of vector and keyword ranks (k = 60)   0.559 / 0.645
    weighted sum of the normalised scores                           0.647 / 0.728
      + session-neighbour blending, c = 0.5                         0.670 / 0.767
      + entity named in the query, w_e = 0.2                        0.701 / 0.783
      + Snowball's stemmer in the keyword channel                   0.709 / 0.796
      + a named entity's words left out of the keyword query        0.717 / 0.813

Refitting w_k, w_e and c on four conversations and scoring the fifth
(leave-one-conversation-out, `scripts/bench_quality.py`) picks these
defaults in every fold on the entity and stemmer lines (their figures are
the same), and gives 0.709 / 0.807 for the last, where two folds of five pick a
neighbour (w_k 0.25; w_e 0.4). The entity's words are left out of
the keyword query (`unmatched_names`) because the entity signal already
rewards every memory of the entity; as a keyword the name favoured the
shortest memories of the entity ("Caroline: Glad it helped ya!").

Ranks throw away how much better the best match is than the tenth; the
weighted sum keeps it. RRF stays available (`fusion.method = "rrf"`, with
k = 60 and the topic 2 / keyword 1 / vector 1 weights). The weights are
round values, and what they gain from being chosen on the scored
conversations is the full-dev minus LOCO gap above: 0.008 / 0.007. Blending
lowers a strong match whose neighbours are unrelated; letting context only
raise scores (max of own and blended) measured worse (0.686 / 0.774).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memvaultd.index.keyword import KeywordHits, tokens
from memvaultd.index.layer import Layer, keyword_fields
from memvaultd.index.memory_index import View
from memvaultd.model.memory import Memory
from memvaultd.model.vector import Vector
from memvaultd.recall.ranking import similarity

HYBRID, VECTOR, KEYWORD = "hybrid", "vector", "keyword"
MODES = (HYBRID, VECTOR, KEYWORD)
_TOPIC_IN_QUERY = re.compile(r"\b[\w-]+(?:\.[\w-]+)+\b")
_WORDS = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class FusionSettings:
    method: str = "score"  # score | rrf
    vector: float = 1.0
    keyword: float = 0.5
    topic: float = 2.0
    context: float = 0.5
    entity: float = 0.2
    rrf_k: int = 60
    rrf_vector: float = 1.0
    rrf_keyword: float = 1.0
    rrf_topic: float = 2.0


@dataclass
class Candidate:
    memory: Memory
    distance: float
    similarity: float = 0.0
    keyword: float = 0.0
    topic: float = 0.0
    entity: float = 0.0
    fusion: float = 0.0
    channels: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # filled by `explain`
    matched: Sequence[str] = ()  # the query terms the keyword channel matched


def explain(item: Candidate) -> None:
    """Fill `item.reasons`: which channels found it and why. Only the hits a
    recall returns need them (3 of ~50 candidates by default), and each
    costs a tokenisation of the memory."""
    item.reasons = _reasons(item, item.matched)


def unmatched_names(text: str, layer: Layer) -> frozenset[str]:
    """The query's keyword terms that name an entity of the layer, which the
    keyword channel then leaves out, when the query has other terms.

    The entity signal already rewards every memory of an entity the query
    names. As a keyword, the name matches all of that entity's memories (its
    entity field, and the speaker's name in front of each turn), most
    strongly the shortest ("Caroline: Glad it helped ya!"), and crowds out
    the memories that match what the query asks about that entity."""
    named = layer.entities.named_in(words(text))
    if not named:
        return frozenset()
    name_terms = frozenset(t for name in named for t in tokens(" ".join(name)))
    return name_terms if any(t not in name_terms for t in tokens(text)) else frozenset()


def left_to_entities(text: str, layer: Layer, settings: FusionSettings, mode: str
                     ) -> frozenset[str]:
    """`unmatched_names` where the fusion rewards a named entity (hybrid mode,
    the score fusion, an entity weight above 0); elsewhere nothing would
    stand in for the name, and it stays a keyword."""
    if mode != HYBRID or settings.method != "score" or not settings.entity:
        return frozenset()
    return unmatched_names(text, layer)


def asked_topics(text: str, topic_key: str, layer: Layer) -> set[str]:
    asked = {topic_key} if topic_key else set()
    asked |= {t for t in _TOPIC_IN_QUERY.findall(text) if layer.topic_size(t)}
    return asked


def fusion_weights(settings: FusionSettings, mode: str, topic_asked: bool
                   ) -> tuple[float, float, float, float, float]:
    """(w_v, w_k, w_t, w_e, their sum): each signal's weight in `mode`."""
    w_v = settings.vector if mode != KEYWORD else 0.0
    w_k = settings.keyword if mode != VECTOR else 0.0
    w_t = settings.topic if topic_asked else 0.0
    w_e = settings.entity if mode == HYBRID else 0.0
    return w_v, w_k, w_t, w_e, w_v + w_k + w_t + w_e


@dataclass(frozen=True)
class Neighbours:
    """The session neighbours of a recall's candidates: each one's cosine
    with the query (None: gone) and BM25 score, read in one matrix product
    and one keyword lookup rather than one each."""

    cosines: dict[str, float | None]
    bm25: dict[str, float]

    @classmethod
    def of(cls, layer: Layer, neighbourhoods: Iterable[Sequence[str]], vector: Vector,
           bm25: KeywordHits, view: View | None = None) -> Neighbours:
        around = list({n for ns in neighbourhoods for n in ns})
        return cls(dict(zip(around, layer.index.cosines(around, vector, view), strict=True)),
                   dict(zip(around, bm25.scores_of(around), strict=True)))

    def blended(self, sim: float, kw: float, neighbours: Sequence[str], best_bm25: float,
                c: float) -> tuple[float, float]:
        """`sim` and `kw` blended with the mean of `neighbours`' (weight `c`)."""
        return ((1 - c) * sim + c * mean_similarity(neighbours, self.cosines),
                (1 - c) * kw + c * sum(self.bm25[n] for n in neighbours) / (
                    len(neighbours) * best_bm25))


def mean_similarity(ids: Sequence[str], cosines: dict[str, float | None]) -> float:
    sims = [similarity(math.sqrt(max(0.0, 2.0 - 2.0 * cos)))
            for memory_id in ids if (cos := cosines[memory_id]) is not None]
    return float(np.mean(sims)) if sims else 0.0


def _reasons(item: Candidate, matched: Sequence[str]) -> list[str]:
    reasons = []
    if VECTOR in item.channels:
        reasons.append(f"vector: similarity {item.similarity:.2f}")
    if KEYWORD in item.channels:
        words = [t for t in matched if t in _stems(item.memory)]
        reasons.append("keyword: " + ", ".join(words) if words else "keyword")
    if item.topic:
        reasons.append(f"topic: {item.memory.topic_key}")
    if item.entity:
        reasons.append(f"entity: {item.memory.entity}")
    return reasons


def words(text: str) -> frozenset[str]:
    return frozenset(_WORDS.findall(text.lower()))


def names(query_words: frozenset[str], entity: str) -> bool:
    """Whether the query names `entity` (every word of it, any case)."""
    named = _WORDS.findall(entity.lower())
    return bool(named) and all(w in query_words for w in named)


def _stems(memory: Memory) -> frozenset[str]:
    return _field_stems(keyword_fields(memory))


@functools.lru_cache(maxsize=4096)
def _field_stems(fields: tuple[str, ...]) -> frozenset[str]:
    # Cached by content: a reason is written for every keyword candidate of
    # every recall (~24), and the same memories come back query after query.
    return frozenset(t for f in fields for t in tokens(f))
