"""The composite ranking: exact values of each factor, env overrides, order.

`decay`, `score` and `rank` are the reference (`reference_ranking.py`) the
served path (`columnar.py`) is held to; these tests pin the reference.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvault_base.errors import InvalidArgument
from memvaultd.model.memory import Memory
from memvaultd.recall.ranking import (
    DEFAULT_HALF_LIVES_DAYS,
    DEFAULT_TOP_K,
    MAX_TOP_K,
    OVERFETCH,
    Scored,
    check_top_k,
    half_lives_from_env,
    l2_from_cosine,
    reinforcement,
    similarity,
)

from .reference_ranking import decay, rank, score

DAY = 86_400.0
NOW = 1_780_000_000.0  # mid-2026
HALF = dict(DEFAULT_HALF_LIVES_DAYS)


def mem(id: str, *, type: str = "semantic", age_days: float = 0.0, count: int = 0,
        created_days: float | None = None) -> Memory:  # fmt: skip
    created = NOW - (age_days if created_days is None else created_days) * DAY
    return Memory(
        id=id, text=id, type=type, created_at=created,
        last_reinforced_at=NOW - age_days * DAY, reinforce_count=count,
    )  # fmt: skip


# --- constants ----------------------------------------------------------------


def test_spec_constants() -> None:
    assert DEFAULT_TOP_K == 3
    assert MAX_TOP_K == 1000
    assert OVERFETCH == 8
    assert DEFAULT_HALF_LIVES_DAYS == {"episodic": 14.0, "semantic": 90.0, "procedural": 180.0}


# --- similarity ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("distance", "expected"),
    [(0.0, 1.0), (0.5, 0.75), (1.0, 0.5), (math.sqrt(2), 1 - math.sqrt(2) / 2), (2.0, 0.0)],
)
def test_similarity_exact(distance: float, expected: float) -> None:
    assert similarity(distance) == pytest.approx(expected, abs=1e-15)


def test_similarity_never_negative() -> None:
    assert similarity(2.5) == 0.0
    assert similarity(1e9) == 0.0


# --- decay --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory_type", "days", "expected"),
    [
        ("episodic", 14, 0.5),
        ("episodic", 28, 0.25),
        ("episodic", 7, 2**-0.5),
        ("semantic", 90, 0.5),
        ("semantic", 180, 0.25),
        ("procedural", 180, 0.5),
        ("procedural", 0, 1.0),
    ],
)
def test_decay_exact(memory_type: str, days: float, expected: float) -> None:
    assert decay(memory_type, NOW - days * DAY, NOW, HALF) == pytest.approx(expected, rel=1e-12)


def test_decay_clamps_the_future_to_now() -> None:
    # A device whose clock ran a day ahead must not boost its memories past 1.
    assert decay("episodic", NOW + DAY, NOW, HALF) == 1.0
    assert decay("semantic", NOW + 1e9, NOW, HALF) == 1.0


def test_decay_of_an_unknown_type_is_semantic() -> None:
    assert decay("mystery", NOW - 90 * DAY, NOW, HALF) == pytest.approx(0.5)


def test_decay_uses_the_given_half_lives() -> None:
    assert decay("episodic", NOW - DAY, NOW, {**HALF, "episodic": 1.0}) == pytest.approx(0.5)


# --- reinforcement ------------------------------------------------------------


def test_reinforcement_exact() -> None:
    assert reinforcement(0) == 1.0
    assert reinforcement(1) == pytest.approx(1 + math.log(2))
    assert reinforcement(math.e - 1) == pytest.approx(2.0)  # type: ignore[arg-type]
    assert reinforcement(round(math.e**2 - 1)) == pytest.approx(1 + math.log(round(math.e**2)))


def test_reinforcement_of_a_negative_count_is_one() -> None:
    assert reinforcement(-5) == 1.0


# --- environment --------------------------------------------------------------


def test_half_lives_default_without_env() -> None:
    assert half_lives_from_env({}) == DEFAULT_HALF_LIVES_DAYS


def test_half_lives_overrides() -> None:
    env = {"MEMVAULT_DECAY_EPISODIC": "7", "MEMVAULT_DECAY_PROCEDURAL": " 365.5 "}
    assert half_lives_from_env(env) == {"episodic": 7.0, "semantic": 90.0, "procedural": 365.5}
    assert half_lives_from_env({"MEMVAULT_DECAY_SEMANTIC": "1e1"})["semantic"] == 10.0


def test_half_lives_empty_value_keeps_default() -> None:
    assert half_lives_from_env({"MEMVAULT_DECAY_SEMANTIC": ""})["semantic"] == 90.0


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf", "nan", "1e999", "7d"])
@pytest.mark.parametrize(
    "name", ["MEMVAULT_DECAY_EPISODIC", "MEMVAULT_DECAY_SEMANTIC", "MEMVAULT_DECAY_PROCEDURAL"]
)
def test_half_lives_bad_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name) as info:
        half_lives_from_env({name: value})
    assert repr(value) in str(info.value)


def test_half_lives_read_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_DECAY_EPISODIC", "3")
    assert half_lives_from_env()["episodic"] == 3.0


# --- l2_from_cosine -----------------------------------------------------------


def test_l2_from_cosine_matches_real_vectors() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(50, 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[0]
    expected = np.linalg.norm(vectors - query, axis=1)
    assert np.allclose(l2_from_cosine(vectors @ query), expected, atol=1e-7)


def test_l2_from_cosine_edges_and_rounding() -> None:
    cos = np.array([1.0, 0.0, -1.0, 1.0 + 1e-7], dtype=np.float32)
    out = l2_from_cosine(cos)
    assert out.dtype == np.float32
    assert out[0] == 0.0 and out[3] == 0.0  # no NaN from a cosine a hair above 1
    assert out[1] == pytest.approx(math.sqrt(2))
    assert out[2] == pytest.approx(2.0)


# --- score and rank -----------------------------------------------------------


def test_score_is_the_product_of_the_factors() -> None:
    hit = score(mem("a", type="episodic", age_days=14, count=1), 1.0, now=NOW, half_lives=HALF)
    assert hit.similarity == 0.5
    assert hit.decay == pytest.approx(0.5)
    assert hit.reinforcement == pytest.approx(1 + math.log(2))
    assert hit.score == pytest.approx(0.25 * (1 + math.log(2)))
    assert hit.distance == 1.0


def test_score_falls_back_to_created_at_when_never_reinforced() -> None:
    memory = Memory(id="a", text="a", type="episodic", created_at=NOW - 14 * DAY)
    assert score(memory, 0.0, now=NOW, half_lives=HALF).decay == pytest.approx(0.5)


def test_rank_orders_by_score() -> None:
    fresh_far = mem("fresh-far")
    old_near = mem("old-near", type="episodic", age_days=28)  # decay 0.25
    reinforced = mem("reinforced", count=3)  # x (1 + ln 4) = 2.39
    out = rank(
        [(fresh_far, 1.0), (old_near, 0.0), (reinforced, 1.0)], now=NOW, half_lives=HALF, top_k=3
    )
    assert [s.memory.id for s in out] == ["reinforced", "fresh-far", "old-near"]
    assert [round(s.score, 4) for s in out] == [round(0.5 * (1 + math.log(4)), 4), 0.5, 0.25]
    assert all(isinstance(s, Scored) for s in out)


def test_rank_keeps_top_k() -> None:
    cands = [(mem(f"m{i}"), i / 10) for i in range(20)]
    out = rank(cands, now=NOW, half_lives=HALF, top_k=5)
    assert [s.memory.id for s in out] == ["m0", "m1", "m2", "m3", "m4"]


def test_rank_min_score_drops_and_never_pads() -> None:
    cands = [(mem("a"), 0.0), (mem("b"), 1.0), (mem("c"), 1.8)]  # scores 1, 0.5, 0.1
    out = rank(cands, now=NOW, half_lives=HALF, top_k=3, min_score=0.5)
    assert [s.memory.id for s in out] == ["a", "b"]  # the boundary 0.5 stays
    assert rank(cands, now=NOW, half_lives=HALF, top_k=3, min_score=1.5) == []


def test_rank_empty_in_empty_out() -> None:
    assert rank([], now=NOW, half_lives=HALF, top_k=3) == []
    assert len(rank([(mem("a"), 0.0)], now=NOW, half_lives=HALF, top_k=3)) == 1


def test_rank_ties_are_deterministic() -> None:
    # Same score 0.5 for all four; the tie-break is distance, newer created_at, id.
    cands = [
        (mem("d", created_days=1), 1.0),
        (mem("c", created_days=2), 1.0),
        (mem("b", created_days=2), 1.0),
        (mem("a", type="episodic", age_days=14), 0.0),  # 1 x 0.5, but nearer
    ]
    expected = ["a", "d", "b", "c"]
    for perm in itertools.permutations(cands):
        got = [s.memory.id for s in rank(perm, now=NOW, half_lives=HALF, top_k=4)]
        assert got == expected


def test_rank_future_timestamps_do_not_boost() -> None:
    future = mem("future", age_days=-30)
    present = mem("present")
    out = rank([(future, 0.5), (present, 0.5)], now=NOW, half_lives=HALF, top_k=2)
    assert out[0].score == out[1].score == pytest.approx(0.75)
    assert out[0].decay == 1.0


@pytest.mark.parametrize("top_k", [0, -1, MAX_TOP_K + 1])
def test_rank_refuses_a_bad_top_k(top_k: int) -> None:
    with pytest.raises(InvalidArgument, match="top_k"):
        rank([], now=NOW, half_lives=HALF, top_k=top_k)


def test_rank_refuses_nan_min_score() -> None:
    with pytest.raises(InvalidArgument, match="min_score"):
        rank([], now=NOW, half_lives=HALF, top_k=1, min_score=math.nan)


def test_check_top_k() -> None:
    assert check_top_k(None) == DEFAULT_TOP_K
    assert check_top_k(0) == DEFAULT_TOP_K
    assert check_top_k(MAX_TOP_K) == MAX_TOP_K
    with pytest.raises(InvalidArgument, match=r"top_k: 1001 is outside 1\.\.1000"):
        check_top_k(1001)
    with pytest.raises(InvalidArgument, match="top_k"):
        check_top_k(-2)


candidates = st.lists(
    st.tuples(
        st.builds(
            mem,
            st.text("abcdef", min_size=1, max_size=3),
            type=st.sampled_from(["episodic", "semantic", "procedural"]),
            age_days=st.sampled_from([0.0, 1.0, 14.0, 90.0, -2.0]),
            count=st.integers(0, 5),
            created_days=st.sampled_from([0.0, 3.0, 10.0]),
        ),
        st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0]),
    ),
    max_size=30,
)


@given(candidates, st.integers(1, 12), st.none() | st.floats(0, 2))
def test_rank_agrees_with_a_full_sort(
    cands: list[tuple[Memory, float]], top_k: int, min_score: float | None
) -> None:
    out = rank(cands, now=NOW, half_lives=HALF, top_k=top_k, min_score=min_score)
    every = [score(m, d, now=NOW, half_lives=HALF) for m, d in cands]
    kept = [s for s in every if min_score is None or s.score >= min_score]
    kept.sort(key=lambda s: (-s.score, s.distance, -s.memory.created_at, s.memory.id))
    assert [(s.memory.id, s.score) for s in out] == [(s.memory.id, s.score) for s in kept][:top_k]
    assert len(out) == min(top_k, len(kept))
