"""The recall engine's path over columns against its reference path.

`engine.recall` (what recall runs, over `columnar.ranked`) and the reference
(`reference_recall.recall`, one Memory at a time) must give the same page:
the same hits in the same order with the same scores and factors, bit for
bit, and the same `has_more`. Random vaults with every field the ranking and
the visibility read varied, below and above the IVF threshold, after
updates, new vectors, removals and a compaction; random requests with and
without filters, in every mode and both fusion methods.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np
import pytest

from memvaultd.index.keyword import KeywordHits
from memvaultd.index.layer import Layer
from memvaultd.model import memory as m
from memvaultd.model.commands import RecallQuery
from memvaultd.model.heat import HeatSettings
from memvaultd.model.memory import Memory
from memvaultd.recall import columnar, engine
from memvaultd.recall.hybrid import FusionSettings
from memvaultd.recall.ranking import DEFAULT_HALF_LIVES_DAYS

from . import reference_recall
from .reference_index import wait_for_ivf

DIM = 32
NOW = 1_800_000_000.0
DAY = 86_400.0
WORDS = ("kiwi", "harbour", "deploy", "lantern", "rust", "python", "garden", "orbit",
         "violin", "ledger", "pepper", "canyon", "marble", "signal", "tundra", "falcon")
TOPICS = ("", "proj", "proj.alpha", "proj.alpha.ui", "proj.beta", "home.garden")
PEOPLE = ("", "", "", "Ada Lovelace", "Linus", "Grace")
SESSIONS = ("", "", "s1", "s2", "s3")


def _unit(rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    vector = centres[rng.integers(len(centres))] + rng.normal(0.0, 0.3, DIM)
    unit: np.ndarray = (vector / np.linalg.norm(vector)).astype(np.float32)
    return unit


def _memory(i: int, r: random.Random) -> Memory:
    created = NOW - r.uniform(0, 200) * DAY
    count = r.choice((0, 0, 0, 1, 2, 5))
    return Memory(
        id=f"m{i:05d}",
        text=" ".join(r.choices(WORDS, k=r.randint(2, 7))) + f" number {i}",
        # A type or tier this version does not know (a newer device wrote
        # it) must read alike in both paths: never asked for, decays as semantic.
        type=r.choice((*m.TYPES, *m.TYPES, "future-kind")),
        topic_key=r.choice(TOPICS),
        entity=r.choice(PEOPLE),
        tags=tuple(r.sample(WORDS, r.randint(0, 2))),
        category=r.choice(("work", "home")),
        importance=r.choice((0.1, 0.5, 0.5, 0.7, 0.9, 1.0)),
        session_id=r.choice(SESSIONS),
        source=r.choice(("", "notes", "chat")),
        tier=r.choice((m.WORKING, m.LONG_TERM, m.LONG_TERM, m.ARCHIVED, "future-tier")),
        created_at=created,
        last_reinforced_at=created + r.uniform(0, 20) * DAY if count else 0.0,
        reinforce_count=count,
        access_count=r.randint(0, 30),
        last_accessed_at=created + r.uniform(0, 5) * DAY,
        expires_at=r.choice((0.0, 0.0, 0.0, NOW - DAY, NOW + DAY)),
        superseded_by=r.choice(("", "", "", "m00000")),
    )


def _vault(n: int, seed: int, threshold: int) -> tuple[Layer, np.random.Generator, np.ndarray]:
    rng, r = np.random.default_rng(seed), random.Random(seed)
    centres = rng.normal(size=(12, DIM))
    layer = Layer(DIM)
    layer.index.ivf_threshold = threshold
    for i in range(n):
        layer.put(_memory(i, r), _unit(rng, centres))
    # Changes the columns must follow: new fields, new vectors, removals
    # (past a quarter of the rows dead, which compacts the matrix).
    for i in r.sample(range(n), n // 10):
        old = layer.get(f"m{i:05d}")
        assert old is not None
        changed = dataclasses.replace(_memory(i, r), id=old.id)
        layer.update(changed, _unit(rng, centres) if i % 2 else None)
    for i in r.sample(range(n), n // 3):
        layer.remove(f"m{i:05d}")
    for i in range(n, n + n // 10):
        layer.put(_memory(i, r), _unit(rng, centres))
    wait_for_ivf(layer.index)
    return layer, rng, centres


def _request(r: random.Random) -> tuple[RecallQuery, FusionSettings, HeatSettings]:
    words = r.sample(WORDS, r.randint(1, 3))
    if r.random() < 0.2:
        words.append("proj.alpha")
    if r.random() < 0.2:
        words.append("ada lovelace")
    filters = ("", "", "", json.dumps({"category": "work"}),
               json.dumps({"OR": [{"importance": {"gte": 0.9}}, {"tags": {"contains": "kiwi"}}]}))
    query = RecallQuery(
        text=" ".join(words),
        top_k=r.choice((0, 1, 3, 10, 50)),
        offset=r.choice((0, 0, 2)),
        min_score=r.choice((None, None, 0.05)),
        filter_json=r.choice(filters),
        mode=r.choice(("", "hybrid", "vector", "keyword")),
        types=r.choice(((), (), ("episodic",), ("fact", "procedural"))),
        topic_key=r.choice(("", "", "", "proj.alpha", "proj")),
        session_id=r.choice(("", "", "", "s2")),
        source=r.choice(("", "", "", "chat")),
        tiers=r.choice(((), (), ("archived",), ("working", "archived"))),
        include_superseded=r.random() < 0.3,
        band=r.choice(("", "", "", "", "hot", "frozen")),
    )
    fusion = FusionSettings(method="rrf") if r.random() < 0.25 else FusionSettings(
        context=r.choice((0.5, 0.5, 0.0)))
    return query, fusion, HeatSettings(ranking_weight=r.choice((0.0, 0.0, 0.0, 0.5)))


def _page(layer: Layer, query: RecallQuery, vector: np.ndarray, fusion: FusionSettings,
          heats: HeatSettings, *, reference: bool) -> engine.Page:
    recall = reference_recall.recall if reference else engine.recall
    return recall(layer, engine.plan(query, NOW, heats), vector,
                  half_lives=DEFAULT_HALF_LIVES_DAYS, settings=fusion, heat_settings=heats)


@pytest.mark.parametrize(("n", "threshold", "seed"), [(600, 10**9, 1), (3000, 1000, 2)])
def test_the_columnar_path_gives_the_reference_page(n: int, threshold: int, seed: int) -> None:
    _compare_pages(n, threshold, seed)


def test_keywords_scored_beside_the_vectors_give_the_reference_page(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A large vault's hybrid recall scores its keywords on another thread."""
    pool, submitted = columnar._BESIDE, []

    class Counted:
        def submit(self, work: Callable[[], KeywordHits]) -> Future[KeywordHits]:
            submitted.append(work)
            return pool.submit(work)

    monkeypatch.setattr(columnar, "_BESIDE", Counted())
    monkeypatch.setattr(columnar, "KEYWORDS_BESIDE_FROM", 1000)
    _compare_pages(3000, 1000, 3)
    assert len(submitted) > 50


def _compare_pages(n: int, threshold: int, seed: int) -> None:
    layer, rng, centres = _vault(n, seed, threshold)
    assert wait_for_ivf(layer.index) is (n >= threshold)
    r = random.Random(seed)
    nonempty = 0
    for _ in range(300):
        query, fusion, heats = _request(r)
        vector = _unit(rng, centres)
        fast = _page(layer, query, vector, fusion, heats, reference=False)
        slow = _page(layer, query, vector, fusion, heats, reference=True)
        context = f"{query} {fusion} {heats}"
        assert [h.scored for h in fast.hits] == [h.scored for h in slow.hits], context
        assert [h.candidate for h in fast.hits] == [h.candidate for h in slow.hits], context
        assert fast.has_more == slow.has_more, context
        nonempty += bool(fast.hits)
    assert nonempty > 150  # the requests are not all filtered down to nothing


def test_equal_keys_fall_back_to_the_id() -> None:
    """Copies with the same vector, times and fields tie on score, distance
    and age: the smaller id comes first, in both paths."""
    layer = Layer(DIM)
    vector = np.zeros(DIM, dtype=np.float32)
    vector[0] = 1.0
    for name in ("c", "a", "d", "b"):
        layer.put(Memory(id=name, text="same words", created_at=NOW - DAY), vector)
    query = RecallQuery(text="same words", top_k=3)
    for reference in (False, True):
        page = _page(layer, query, vector, FusionSettings(), HeatSettings(), reference=reference)
        assert [h.scored.memory.id for h in page.hits] == ["a", "b", "c"]
        assert page.has_more
