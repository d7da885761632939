"""Heat, the sweep's rules, consolidation's clusters and the trash's
retention, as pure logic (the daemon end to end is tests/test_upkeep.py and
tests/test_trash.py)."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault_base.errors import InvalidArgument
from memvaultd.config import settings as config_settings
from memvaultd.model import memory as m
from memvaultd.model.heat import (
    COLD,
    FROZEN,
    HOT,
    WARM,
    HeatSettings,
    band,
    heat,
)
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import PUT, UPDATE, Operation
from memvaultd.model.records import Records, columns_of
from memvaultd.upkeep import consolidation, summariser
from memvaultd.upkeep import sweep as sweeping
from memvaultd.upkeep import trash as trashing
from memvaultd.vault.state import VaultState

DAY = 86_400.0
NOW = 1_800_000_000.0
DIM = 8


def _memory(days_old: float = 60, **fields: object) -> Memory:
    at = NOW - days_old * DAY
    values: dict[str, object] = {"id": uuid.uuid4().hex, "text": "a fact", "created_at": at,
                                 "last_reinforced_at": at}
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


def _unit(vector: list[float]) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    return v / np.linalg.norm(v)


# -- heat -----------------------------------------------------------------------


def test_an_unused_memory_cools_through_the_bands_on_the_documented_days() -> None:
    memory = _memory(days_old=0)
    created = memory.created_at
    # docs/upkeep.md: unrated and never used, hot for 1.8 days, warm until
    # 8.8, cold until 25.1, frozen after.
    expected = [(0.0, HOT), (1.7, HOT), (1.9, WARM), (8.7, WARM), (8.9, COLD), (25.0, COLD),
                (25.2, FROZEN), (400.0, FROZEN)]
    for days, name in expected:
        assert band(heat(memory, created + days * DAY)) == name, days


def test_recorded_accesses_heat_a_memory_and_saturate() -> None:
    now = NOW
    cold = _memory(days_old=20)
    assert band(heat(cold, now)) == COLD
    # The same memory recalled just now: hot again, and more uses mean more heat.
    used = [cold.copy(access_count=n, last_accessed_at=now) for n in (1, 5, 20, 200)]
    heats = [heat(u, now) for u in used]
    assert all(band(h) == HOT for h in heats)
    assert heats[0] < heats[1] < heats[2] == heats[3]  # 20 uses saturate
    # A reinforcement counts as two accesses.
    assert heat(cold.copy(reinforce_count=3, last_reinforced_at=now), now) == pytest.approx(
        heat(cold.copy(access_count=6, last_accessed_at=now), now))
    # Importance adds up to 0.2 at the same recency.
    assert heat(cold.copy(importance=1.0), now) > heat(cold.copy(importance=0.0), now)


def test_a_last_use_in_the_future_counts_as_now() -> None:
    ahead = _memory(days_old=-3)
    assert heat(ahead, NOW) == pytest.approx(heat(_memory(days_old=0), NOW))


def test_the_half_life_setting_scales_time() -> None:
    memory = _memory(days_old=14)
    assert heat(memory, NOW, 14.0) == pytest.approx(heat(_memory(days_old=7), NOW, 7.0))


# -- the sweep ------------------------------------------------------------------


def test_risk_passes_the_default_threshold_only_below_the_default_importance() -> None:
    settings_ = sweeping.SweepSettings()
    heat_settings = HeatSettings()
    # Unrated: never, however old. Importance 0.2: after 89 days unused (docs/upkeep.md).
    unrated = [_memory(days_old=d) for d in (60, 365, 3650)]
    minor = [_memory(days_old=d, importance=0.2) for d in (88, 90)]
    plan = sweeping.plan(unrated + minor, NOW, settings_, heat_settings)
    assert [s.memory.id for s in plan.swept] == [minor[1].id]
    reason = plan.swept[0].reason
    assert "importance 0.20" in reason and "unused for 90 days" in reason and "frozen" in reason


vaults = st.lists(st.builds(
    lambda days, importance, memory_type, protected, superseded, tier, accesses, expired: _memory(
        days_old=days, importance=importance, type=memory_type, protected=protected,
        superseded_by="newer" if superseded else "", tier=tier, access_count=accesses,
        expires_at=NOW - DAY if expired else 0.0),
    st.floats(0, 2000), st.floats(0, 1), st.sampled_from(m.TYPES), st.booleans(), st.booleans(),
    st.sampled_from(m.TIERS), st.integers(0, 50), st.booleans()), max_size=40)


@settings(max_examples=300, deadline=None)
@given(vaults, st.floats(0, 1), st.floats(0, 90))
def test_a_sweep_never_takes_a_protected_memory(memories: list[Memory], threshold: float,
                                                min_age: float) -> None:
    plan = sweeping.plan(memories, NOW, sweeping.SweepSettings(min_age_days=min_age),
                         HeatSettings(), threshold)
    for swept in plan.swept:
        memory = swept.memory
        assert not memory.pinned and not memory.protected
        assert memory.type != m.PROCEDURAL and not memory.superseded_by
        assert NOW - memory.created_at >= min_age * DAY
        assert memory.tier != m.ARCHIVED  # no consolidated memory here to take it along
        assert swept.risk > threshold or memory.is_expired(NOW)
    assert plan.considered == len(memories)


def _decided(plan: sweeping.SweepPlan) -> tuple[object, ...]:
    return ([(s.memory.id, s.risk, s.heat, s.reason) for s in plan.swept], plan.considered,
            plan.exempt)


@settings(max_examples=300, deadline=None)
@given(vaults, st.floats(0, 1), st.floats(0, 90), st.integers(0, 3), st.randoms())
def test_a_sweep_over_the_columns_decides_as_one_memory_at_a_time(
        memories: list[Memory], threshold: float, min_age: float, summaries: int,
        draw: random.Random) -> None:
    # Consolidated memories over some of the archived ones, to take them along.
    archived = [memory.id for memory in memories if memory.tier == m.ARCHIVED]
    memories += [_memory(days_old=draw.uniform(0, 400), importance=draw.uniform(0, 0.5),
                         consolidated_from=tuple(draw.sample(archived, min(2, len(archived)))))
                 for _ in range(summaries)]
    settings_ = sweeping.SweepSettings(min_age_days=min_age)
    one_by_one = _decided(sweeping.plan(memories, NOW, settings_, HeatSettings(), threshold))
    columns = Records.whole(columns_of(memories))
    assert _decided(sweeping.plan(columns, NOW, settings_, HeatSettings(), threshold)) == \
        one_by_one
    by_id = {memory.id: memory for memory in memories}
    assert _decided(sweeping.plan(columns, NOW, settings_, HeatSettings(), threshold,
                                  get=by_id.get)) == one_by_one
    # Some restored (in the table), the rest written since (objects).
    cut = draw.randrange(len(memories) + 1)
    mixed = Records(columns_of(memories[:cut]), np.concatenate(
        [np.arange(cut), -1 - np.arange(len(memories) - cut)]), memories[cut:])
    assert _decided(sweeping.plan(mixed, NOW, settings_, HeatSettings(), threshold)) == \
        one_by_one


def test_sweeping_a_consolidated_memory_takes_its_archived_sources() -> None:
    sources = [_memory(days_old=200, importance=0.1, tier=m.ARCHIVED) for _ in range(2)]
    keeper = _memory(days_old=200, importance=0.1, tier=m.ARCHIVED, protected=True)
    summary = _memory(days_old=200, importance=0.1,
                      consolidated_from=(*[s.id for s in sources], keeper.id))
    plan = sweeping.plan([*sources, keeper, summary], NOW, sweeping.SweepSettings(),
                         HeatSettings())
    swept = {s.memory.id: s.reason for s in plan.swept}
    assert set(swept) == {summary.id, *(s.id for s in sources)}
    assert all(summary.id in swept[s.id] for s in sources)
    assert plan.exempt == 1  # the protected source stays


def test_upkeep_times_travel_in_snapshots() -> None:
    from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body

    empty = np.zeros((0, DIM), np.float32)
    state = SnapshotBody(7, DIM, Stamp(1, 0, "d"), [], empty, frozenset(), [], empty,
                  upkeep={"sweep": NOW, "consolidate": NOW - DAY})
    assert decode_body(encode_body(state)).upkeep == {"sweep": NOW, "consolidate": NOW - DAY}


def test_upkeep_fields_of_memories_travel_in_snapshots() -> None:
    from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body

    memories = [_memory(protected=True), _memory(consolidated_from=("a", "b")),
                _memory(tier=m.ARCHIVED, consolidated_into="c")]
    vectors = np.stack([_unit([1, 0, 0, 0, 0, 0, 0, i]) for i in range(3)])
    empty = np.zeros((0, DIM), np.float32)
    state = SnapshotBody(7, DIM, Stamp(1, 0, "d"), memories, vectors, frozenset(), [], empty)
    assert decode_body(encode_body(state)).memories == memories


# -- the summariser -------------------------------------------------------------


sentence = st.text(st.characters(codec="utf-8", categories=("L", "N", "Zs")), min_size=1,
                   max_size=30).map(str.strip).filter(bool)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(sentence, min_size=1, max_size=4), min_size=1, max_size=6))
def test_extractive_keeps_every_sentence_of_every_source(texts: list[list[str]]) -> None:
    memories = [Memory(id=f"m{i}", text=". ".join(parts) + ".") for i, parts in
                enumerate(texts)]
    summary = summariser.extractive(memories)
    kept = {summariser.fact_key(f.text): f.sources for f in summary.facts}
    assert len(kept) == len(summary.facts), "facts are distinct"
    for memory in memories:
        for part in summariser.sentences(memory.text):
            assert memory.id in kept[summariser.fact_key(part)]


def test_extractive_deduplicates_case_spacing_and_end_marks() -> None:
    memories = [Memory(id="a", text="The CI runs on push. Use  pnpm!"),
                Memory(id="b", text="- the ci runs on push\n- Builds take 4 minutes.")]
    summary = summariser.extractive(memories)
    assert [(f.text, f.sources) for f in summary.facts] == [
        ("The CI runs on push.", ("a", "b")), ("Use  pnpm!", ("a",)),
        ("Builds take 4 minutes.", ("b",))]
    assert summary.text == "- The CI runs on push.\n- Use  pnpm!\n- Builds take 4 minutes."


def test_a_summariser_is_loaded_by_name_and_checked() -> None:
    assert summariser.load("") is summariser.extractive
    assert summariser.load("memvaultd.upkeep.summariser:extractive") is summariser.extractive
    with pytest.raises(Exception, match="cannot load"):
        summariser.load("no.such.module:summarise")
    with pytest.raises(Exception, match="returned no summary"):
        summariser.checked("not a summary", "custom:thing")


# -- consolidation ----------------------------------------------------------------


def _cold(topic: str = "", session: str = "", vector: list[float] | None = None,
          text: str = "", **fields: object) -> tuple[Memory, np.ndarray]:
    memory = _memory(days_old=60, topic_key=topic, session_id=session,
                     text=text or f"fact {uuid.uuid4().hex[:6]}", **fields)
    return memory, _unit(vector or [1, 0, 0, 0, 0, 0, 0, 0])


def test_candidates_exclude_what_must_stay_as_it_is() -> None:
    request, config = consolidation.Request(), consolidation.ConsolidationSettings()
    ok = _cold()[0]
    assert consolidation.is_candidate(ok, NOW, request, config, HeatSettings())
    for excluded in (ok.copy(importance=0.9), ok.copy(importance=0.6), ok.copy(protected=True),
                     ok.copy(type=m.PROCEDURAL), ok.copy(superseded_by="x"),
                     ok.copy(tier=m.ARCHIVED), ok.copy(consolidated_from=("a", "b")),
                     ok.copy(created_at=NOW - DAY, last_reinforced_at=NOW - 30 * DAY),
                     ok.copy(access_count=3, last_accessed_at=NOW),
                     ok.copy(expires_at=NOW - 1),
                     ok.copy(source="file:notes/deploys.md#Deploys")):
        assert not consolidation.is_candidate(excluded, NOW, request, config, HeatSettings())
    # min_age_days 0: a bulk import is taken at once (if cold).
    young = ok.copy(created_at=NOW - 3600, last_reinforced_at=NOW - 40 * DAY)
    assert not consolidation.is_candidate(young, NOW, request, config, HeatSettings())
    assert consolidation.is_candidate(young, NOW, consolidation.Request(min_age_days=0),
                                      config, HeatSettings())


def test_a_summary_is_stale_once_a_source_is_gone_replaced_or_unarchived() -> None:
    a, b = _cold()[0], _cold()[0]
    summary = _cold(consolidated_from=(a.id, b.id))[0]
    archived = {s.id: s.copy(tier=m.ARCHIVED, consolidated_into=summary.id) for s in (a, b)}
    assert not consolidation.stale(summary, archived.get)
    for source in (archived[a.id].copy(superseded_by="new"), archived[a.id].copy(tier=m.LONG_TERM),
                   archived[a.id].copy(consolidated_into="another")):
        assert consolidation.stale(summary, {**archived, a.id: source}.get)
    assert consolidation.stale(summary, {b.id: archived[b.id]}.get), "a source forgotten"
    retired = summary.copy(tier=m.ARCHIVED)
    assert not consolidation.stale(retired, {}.get), "retired already"
    assert not consolidation.stale(a, archived.get), "not a summary"


def test_clusters_follow_topic_type_and_similarity_and_never_mix_sessions() -> None:
    near, far = [1, 0.2, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0, 0]
    items = [_cold("ops", "s1", near), _cold("ops", "s2", near), _cold("ops", "s1", far),
             _cold("ops", "s1", [1, 0.1, 0, 0, 0, 0, 0, 0]), _cold("pets", "s1", near),
             _cold("ops", "s1", near, type=m.EPISODIC)]
    found = consolidation.clusters(items, consolidation.Request(), 0.6)
    assert [sorted(x[0].session_id for x in c) for c in found] == [["s1", "s1", "s2"]]
    by_session = consolidation.clusters(items, consolidation.Request(scope="session"), 0.6)
    assert [[x[0].session_id for x in c] for c in by_session] == [["s1", "s1"]]


def test_clusters_are_bounded_and_deterministic() -> None:
    items = [_cold("big", text="x" * 1000) for _ in range(60)]
    found = consolidation.clusters(items, consolidation.Request(), 0.6)
    assert all(sum(len(x[0].text) for x in c) <= consolidation.MAX_SOURCE_BYTES for c in found)
    assert sum(len(c) for c in found) == 60
    shuffled = list(items)
    random.Random(7).shuffle(shuffled)
    again = consolidation.clusters(shuffled, consolidation.Request(), 0.6)
    assert [[x[0].id for x in c] for c in again] == [[x[0].id for x in c] for c in found]


def test_a_consolidated_memory_keeps_provenance_common_fields_and_counts() -> None:
    cluster = [_cold("ops", "s1", text="Deploys run on Fridays.", tags=("ops",),
                     reinforce_count=2, access_count=1),
               _cold("ops", "s1", [1, 0.3, 0, 0, 0, 0, 0, 0], text="Deploys need a review.",
                     tags=("ops", "review"), importance=0.3, entity="ci")]
    done = consolidation.build(cluster, summariser.extractive([c[0] for c in cluster]))
    memory = done.memory
    assert memory.consolidated_from == tuple(c[0].id for c in cluster)
    assert memory.id == consolidation.consolidated_id([c[0] for c in reversed(cluster)])
    assert memory.text == "- Deploys run on Fridays.\n- Deploys need a review."
    assert memory.topic_key == "ops" and memory.session_id == "s1" and memory.entity == ""
    assert memory.tags == ("ops", "review") and memory.importance == 0.5
    assert memory.reinforce_count == 2 and memory.access_count == 1
    assert memory.created_at == max(c[0].created_at for c in cluster)
    assert memory.payload["facts"][1] == {"text": "Deploys need a review.",
                                          "from": [cluster[1][0].id]}
    assert float(np.linalg.norm(done.vector)) == pytest.approx(1.0)


def test_two_devices_consolidating_the_same_memories_converge_on_one() -> None:
    cluster = [_cold("ops", text=f"Fact number {i}.") for i in range(3)]
    done = consolidation.build(cluster, summariser.extractive([c[0] for c in cluster]))

    def ops(device: str, tick: int) -> list[Operation]:
        stamp = Stamp(tick, 0, device)
        return [Operation(uuid.uuid4().hex, PUT, stamp, memory=done.memory, vector=done.vector),
                *(Operation(uuid.uuid4().hex, UPDATE, stamp, target=s.id, at=NOW,
                            fields={"tier": m.ARCHIVED, "consolidated_into": done.memory.id})
                  for s in done.sources)]

    states = []
    for order in ((1, 2), (2, 1)):
        state = VaultState(DIM)
        for memory, vector in cluster:
            state.apply(Operation(uuid.uuid4().hex, PUT, Stamp(0, 0, "x"), memory=memory,
                                  vector=vector))
        first, second = ops("laptop", 10), ops("desktop", 11)
        for batch in (first, second) if order == (1, 2) else (second, first):
            for op in batch:
                state.apply(op)
        states.append(state)
    for state in states:
        summaries = [mem for mem in state.memories.memories() if mem.consolidated_from]
        assert [s.id for s in summaries] == [done.memory.id]
        assert all(state.memories.get(s.id).tier == m.ARCHIVED for s, _ in cluster)
    assert sorted(map(repr, states[0].memories.memories())) == \
        sorted(map(repr, states[1].memories.memories()))


def test_the_trash_purges_what_outlived_its_retention_oldest_first() -> None:
    week = trashing.TrashSettings(retention_days=7)
    held = [_memory(id=name, trashed_at=NOW - days * DAY, trashed_by="cli")
            for name, days in (("fresh", 1), ("due", 7), ("older", 9), ("edge", 6.99))]
    assert trashing.due(held, NOW, week) == ["older", "due"]
    assert trashing.purge_at(held[0], week) == NOW + 6 * DAY
    assert trashing.due(held, NOW, trashing.TrashSettings(retention_days=0)) == [
        "older", "due", "edge", "fresh"]
    assert trashing.TrashSettings().retention_days == 30


def test_the_retention_is_a_config_toml_setting(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert config_settings.load(path).trash.retention_days == 30
    path.write_text("[trash]\nretention_days = 7.5\n")
    assert config_settings.load(path).trash.retention_s == 7.5 * DAY
    for bad in ("[trash]\nretention_days = -1\n", "[trash]\nretention_days = \"a week\"\n",
                "[trash]\nkeep_days = 3\n"):
        path.write_text(bad)
        with pytest.raises(InvalidArgument, match="trash"):
            config_settings.load(path)
