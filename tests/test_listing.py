"""The paged listing (`ListMemories`, `Client.list_memories`, `memvault list`):
every memory a request matches, once each across pages, in a stable order."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault_base.errors import InvalidArgument
from memvaultd.index.layer import Layer
from memvaultd.model.commands import ListQuery
from memvaultd.model.heat import BANDS, HeatSettings, band, bands_of, heat, heats
from memvaultd.model.memory import Memory
from memvaultd.model.scopes import FULL, Access
from memvaultd.recall.filter.parse import parse_filter
from memvaultd.vault import listing
from memvaultd.vault.core import visible

from .daemon_process import DaemonProcess
from .test_cli import memvault as run_cli

DIM = 8
NOW = 1_800_000_000.0
DAY = 86_400.0
HEAT = HeatSettings()


def _vault(count: int, seed: int = 7) -> Layer:
    rng, r = np.random.default_rng(seed), random.Random(seed)
    layer = Layer(DIM)
    for i in range(count):
        # Few distinct times and importances: ties that only the id can break.
        memory = Memory(
            id=f"{r.getrandbits(128):032x}", text=f"memory {i}",
            type=r.choice(("semantic", "episodic", "procedural")),
            topic_key=r.choice(("", "work", "work.deadlines", "workshop", "home")),
            entity=r.choice(("", "alice", "bob")), tags=tuple(r.sample(("a", "b", "c"), 2)),
            importance=r.choice((0.2, 0.5, 0.9)), session_id=r.choice(("", "s1", "s2")),
            source=r.choice(("claude", "cursor")), tier=r.choice(("working", "long_term")),
            created_at=NOW - DAY * r.randrange(40), access_count=r.randrange(3),
            last_accessed_at=NOW - DAY * r.randrange(10))
        vector = rng.standard_normal(DIM).astype(np.float32)
        layer.put(memory, vector / np.linalg.norm(vector))
    return layer


def _pages(layer: Layer, **asked: object) -> list[list[str]]:
    pages, token = [], ""
    while True:
        page = listing.list_page(layer, ListQuery(page_token=token, **asked),  # type: ignore[arg-type]
                                 NOW, HEAT)
        pages.append([listed.memory.id for listed in page.memories])
        token = page.next_token
        if not token:
            return pages


@pytest.mark.parametrize("sort", listing.SORTS)
@pytest.mark.parametrize("ascending", [False, True])
def test_pages_cover_every_match_once_in_key_then_id_order(sort: str, ascending: bool) -> None:
    layer = _vault(230)
    pages = _pages(layer, sort=sort, ascending=ascending, limit=40)
    assert [len(p) for p in pages] == [40] * 5 + [30]
    ids = [i for page in pages for i in page]
    assert len(set(ids)) == 230
    memories = list(layer.memories())
    keys = listing._keys(sort, memories, heats(memories, NOW))
    expected = sorted(range(230), key=lambda i: (keys[i], memories[i].id), reverse=not ascending)
    assert ids == [memories[i].id for i in expected]


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 60), limit=st.integers(1, 25), sort=st.sampled_from(listing.SORTS),
       ascending=st.booleans(), seed=st.integers(0, 2**16))
def test_any_page_size_pages_a_tie_heavy_vault_exactly_once(
        count: int, limit: int, sort: str, ascending: bool, seed: int) -> None:
    # _vault's keys take a few values each: most page edges fall inside a tie.
    layer = _vault(count, seed)
    flat = [i for page in _pages(layer, sort=sort, ascending=ascending, limit=limit)
            for i in page]
    memories = list(layer.memories())
    keys = listing._keys(sort, memories, heats(memories, NOW))
    expected = sorted(range(count), key=lambda i: (keys[i], memories[i].id),
                      reverse=not ascending)
    assert flat == [memories[i].id for i in expected]


def test_heats_are_heat_for_many_memories_at_once() -> None:
    memories = list(_vault(500).memories())
    for memory in memories[::7]:
        memory.reinforce_count, memory.last_reinforced_at = 3, NOW - DAY * 2.5
    for memory in memories[1::11]:  # untouched for two months: frozen
        memory.created_at, memory.last_accessed_at, memory.reinforce_count = NOW - 60 * DAY, 0, 0
    at_once = heats(memories, NOW)
    one_by_one = [heat(m, NOW) for m in memories]
    assert np.allclose(at_once, one_by_one, rtol=1e-12, atol=0)
    assert bands_of(at_once).tolist() == [band(h) for h in one_by_one]
    assert len(set(bands_of(at_once).tolist())) == 4


def test_a_memory_added_between_pages_shifts_nothing() -> None:
    layer = _vault(100)
    first = listing.list_page(layer, ListQuery(limit=30), NOW, HEAT)
    newest = Memory(id="f" * 32, text="written while paging", created_at=NOW)
    layer.put(newest, np.ones(DIM, dtype=np.float32) / np.sqrt(DIM))
    second = listing.list_page(layer, ListQuery(limit=30, page_token=first.next_token),
                               NOW + 60, HEAT)
    everything = _pages(layer, limit=30)
    flat = [i for page in everything for i in page]
    assert flat[0] == newest.id
    assert [m.memory.id for m in second.memories] == flat[31:61]
    assert second.total == 101


def test_offset_pages_agree_with_token_pages() -> None:
    layer = _vault(120)
    by_token = [i for page in _pages(layer, sort="heat", limit=25) for i in page]
    by_offset = [m.memory.id for offset in range(0, 120, 25) for m in listing.list_page(
        layer, ListQuery(sort="heat", limit=25, offset=offset), NOW, HEAT).memories]
    assert by_offset == by_token


def test_filters_narrow_as_recall_does_and_facets_count_the_matches() -> None:
    layer = _vault(300)
    every = list(layer.memories())

    def ids(**asked: object) -> set[str]:
        page = listing.list_page(layer, ListQuery(limit=500, **asked),  # type: ignore[arg-type]
                                 NOW, HEAT)
        assert page.total == len(page.memories)
        return {listed.memory.id for listed in page.memories}

    assert ids(topic_key="work") == {m.id for m in every
                                     if m.topic_key in ("work", "work.deadlines")}
    assert ids(entity="bob") == {m.id for m in every if m.entity == "bob"}
    assert ids(tag="c") == {m.id for m in every if "c" in m.tags}
    assert ids(types=["fact"]) == {m.id for m in every if m.type == "semantic"}
    assert ids(source="cursor", session_id="s2") == {
        m.id for m in every if m.source == "cursor" and m.session_id == "s2"}
    assert ids(tiers=["working"]) == {m.id for m in every if m.tier == "working"}
    assert ids(filter_json='{"importance": {"gte": 0.9}}') == {
        m.id for m in every if m.importance >= 0.9}
    hot = ids(band="hot")
    assert hot and hot == {m.id for m in every
                           if heat(m, NOW, HEAT.half_life_days) >= 0.5}

    page = listing.list_page(layer, ListQuery(entity="alice", include_facets=True), NOW, HEAT)
    alice = [m for m in every if m.entity == "alice"]
    assert page.facets["entity"].values == [("alice", len(alice))]
    tags = dict(page.facets["tag"].values)
    assert tags == {t: sum(t in m.tags for m in alice) for t in "abc"}
    assert sum(c for _, c in page.facets["band"].values) == len(alice)
    assert dict(page.facets["topic"].values)["work.deadlines"] == sum(
        m.topic_key == "work.deadlines" for m in alice)


def test_superseded_and_expired_memories_are_hidden_unless_asked() -> None:
    layer = Layer(DIM)
    vector = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    layer.put(Memory(id="a" * 32, text="old", created_at=NOW - 10, superseded_by="b" * 32),
              vector)
    layer.put(Memory(id="b" * 32, text="new", created_at=NOW - 5, supersedes="a" * 32), vector)
    layer.put(Memory(id="c" * 32, text="gone", created_at=NOW - 5, expires_at=NOW - 1), vector)
    shown = listing.list_page(layer, ListQuery(), NOW, HEAT)
    assert [m.memory.id for m in shown.memories] == ["b" * 32]
    both = listing.list_page(layer, ListQuery(include_superseded=True), NOW, HEAT)
    assert [m.memory.id for m in both.memories] == ["b" * 32, "a" * 32]


@pytest.mark.parametrize("query, field", [
    (ListQuery(sort="random"), "sort"),
    (ListQuery(limit=501), "limit"),
    (ListQuery(band="tepid"), "band"),
    (ListQuery(tiers=["attic"]), "tier"),
    (ListQuery(types=["poem"]), "type"),
])
def test_bad_requests_name_their_field(query: ListQuery, field: str) -> None:
    with pytest.raises(InvalidArgument, match=field):
        listing.check(query)


@pytest.mark.parametrize("token", ["garbage", "e30", "W10", "eyJ2IjoxfQ"])
def test_a_token_that_is_not_one_is_refused(token: str) -> None:
    with pytest.raises(InvalidArgument, match="page_token"):
        listing.list_page(_vault(5), ListQuery(page_token=token), NOW, HEAT)


def test_a_token_of_another_order_is_refused() -> None:
    layer = _vault(20)
    token = listing.list_page(layer, ListQuery(limit=5), NOW, HEAT).next_token
    with pytest.raises(InvalidArgument, match="page_token"):
        listing.list_page(layer, ListQuery(limit=5, sort="heat", page_token=token), NOW, HEAT)


@pytest.mark.slow
def test_client_and_cli_list_through_the_daemon(daemon: DaemonProcess) -> None:
    import memvault

    marker = f"listing-{time.time_ns()}"
    with memvault.Client(daemon.socket) as mv:
        for i in range(7):
            mv.remember(f"{marker} the build step number {i} uses make", topic=f"{marker}.build",
                        entity="ci", tags=[marker], source="lister", importance=0.1 * (i + 1),
                        new=True)
        first = mv.list_memories(tag=marker, sort="importance", limit=3, facets=True)
        assert first.total == 7 and len(first.memories) == 3
        assert [round(m.memory.importance, 1) for m in first.memories] == [0.7, 0.6, 0.5]
        assert first.facets["source"].values == (("lister", 7),)
        rest = mv.list_memories(tag=marker, sort="importance", limit=3,
                                page_token=first.next_page_token)
        assert [round(m.memory.importance, 1) for m in rest.memories] == [0.4, 0.3, 0.2]
        with pytest.raises(memvault.InvalidArgument, match="page_token"):
            mv.list_memories(page_token="garbage")

    done = run_cli(daemon.home, "list", "--tag", marker, "--json", "--limit", "2")
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert page["total"] == 7 and len(page["memories"]) == 2
    assert page["memories"][0]["band"] == "hot"

    done = run_cli(daemon.home, "list", "--topic", marker, "--sort", "importance", "--facets")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # At 80 columns the key columns stay (band and type give way to a long topic).
    assert lines[0].split()[:2] == ["id", "importance"] and "topic" in lines[0]
    assert all(len(line) <= 80 for line in lines)
    assert "0.70" in lines[1] and marker in lines[1]
    assert f"topic: {marker}.build 7" in done.stdout
    assert "1-7 of 7 memories" in done.stderr


def _varied(count: int, seed: int) -> Layer:
    """_vault's memories, some archived, expired, superseded or of another scope."""
    layer, r = _vault(count, seed), random.Random(seed)
    for memory in list(layer.memories()):
        kind = r.randrange(6)
        if kind == 0:
            memory.tier = "archived"
        elif kind == 1:
            memory.expires_at = NOW - DAY
        elif kind == 2:
            memory.superseded_by = "0" * 32
        elif kind == 3:
            memory.scope = "project:work"
        if r.random() < 0.3:
            memory.reinforce_count, memory.last_reinforced_at = 1, NOW - DAY * r.randrange(5)
        layer.put(memory, layer.index.vector(memory.id))
    return layer


def _reference_activity(layer: Layer, field: str, access: Access,
                        filter_json: str) -> list[tuple[str, int, float]]:
    matches = parse_filter(filter_json or None)
    found: dict[str, list[float]] = {}
    for memory in layer.memories():
        name = getattr(memory, field)
        if name and visible(memory, NOW) and matches.matches(memory) and access.sees(memory):
            entry = found.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] = max(entry[1], memory.created_at, memory.last_reinforced_at)
    return sorted(((n, int(c), t) for n, (c, t) in found.items()), key=lambda f: (-f[1], f[0]))


@settings(max_examples=40, deadline=None)
@given(count=st.integers(0, 120), seed=st.integers(0, 2**16),
       field=st.sampled_from(("topic_key", "entity")),
       access=st.sampled_from((FULL, Access.declared(["project:work"]),
                               Access.declared(topics=["work"]))),
       filter_json=st.sampled_from(("", json.dumps({"type": "episodic"}))))
def test_topics_entities_and_bands_are_counted_from_the_columns_as_one_by_one(
        count: int, seed: int, field: str, access: Access, filter_json: str) -> None:
    layer = _varied(count, seed)
    query = ListQuery(filter_json=filter_json, access=access)
    assert listing.activity(layer, field, query, NOW, HEAT) == \
        _reference_activity(layer, field, access, filter_json)
    one_by_one = Counter(band(heat(memory, NOW)) for memory in layer.memories()
                         if visible(memory, NOW))
    assert listing.band_counts(layer, NOW, HEAT) == {name: one_by_one[name] for name in BANDS}
