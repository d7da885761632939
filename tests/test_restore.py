"""Loading a snapshot in bulk gives exactly what one put per memory gives.

`Layer.restore` (one matrix copy, keyword postings built per term, the topic
map in one pass) and `VaultState.restore` against the reference: a `put` of
each memory in order. Also the snapshot body: version 2 (columns) round
trips every field, version 1 (one object per memory) is still read, and a
malformed body is refused.
"""

from __future__ import annotations

import json
import math
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields

import numpy as np
import pytest

from memvault_base.errors import IntegrityError
from memvaultd.index import keyword
from memvaultd.index.keyword import KeywordIndex
from memvaultd.index.layer import Layer
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import MEMORIES, PUT, Operation, memory_to_dict
from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body
from memvaultd.vault.state import VaultState

from .reference_index import ranked, search_exact, wait_for_ivf

DIM = 16
# Words that exercise the tokenizer: stop words, suffixes, case, digits,
# apostrophes, underscores, and a final sigma whose lower case depends on
# what follows it.
WORDS = ["Deploy", "deploying", "the", "tests", "Friday", "naïve", "café", "ΣΑΣ", "don't",
         "snake_case", "v2", "running", "runs", "über", "ОДИН", "42", "it's", "ΑΣ"]


def _memories(n: int, seed: int) -> tuple[list[Memory], np.ndarray]:
    rng = np.random.default_rng(seed)
    memories = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(0, 9)))
        memories.append(Memory(
            id=f"m{i}", text=" ".join(words) or "-", topic_key=f"topic.{i % 7}_x",
            tags=tuple(f"tag{t}" for t in rng.choice(5, size=int(rng.integers(0, 3)),
                                                     replace=False)),
            entity=str(rng.choice(["", "Ana", "ΣΑΣ"])),
            session_id=str(rng.choice(["", "s1", "s2"])), created_at=float(i)))
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    return memories, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _put_one_by_one(memories: list[Memory], vectors: np.ndarray, threshold: int) -> Layer:
    layer = Layer(DIM)
    layer.index.ivf_threshold = threshold
    for memory, vector in zip(memories, vectors, strict=True):
        layer.put(memory, vector)
    return layer


def _restored(memories: list[Memory], vectors: np.ndarray, threshold: int,
              finished: bool = True) -> Layer:
    """A layer restored from `memories`; `finished`: its keyword index built
    as the vault's thread builds it once serving, else left to the first
    keyword search or write."""
    layer = Layer(DIM)
    layer.index.ivf_threshold = threshold
    layer.restore(list(memories), list(vectors))  # rows, as the vault passes them
    if finished:
        layer.finish_restore()
    return layer


def _assert_same(a: Layer, b: Layer) -> None:
    ia, ib = a.index, b.index
    n = len(ia._ids)
    assert ia._ids == ib._ids and ia._row == ib._row and ia._records == ib._records
    assert np.array_equal(ia._matrix[:n], ib._matrix[:n])
    assert np.array_equal(ia._alive[:n], ib._alive[:n])
    ka, kb = a.keywords, b.keywords
    docs = len(ka._doc_ids)
    assert ka._ordinals == kb._ordinals and ka._doc_ids == kb._doc_ids
    assert ka._total == kb._total
    assert np.array_equal(ka._lengths[:docs], kb._lengths[:docs])
    assert np.array_equal(ka._alive[:docs], kb._alive[:docs])
    assert _live_postings(ka) == _live_postings(kb)
    assert a._topics == b._topics
    assert a.sessions._links == b.sessions._links and a.sessions._last == b.sessions._last


def _live_postings(index: KeywordIndex) -> dict[str, tuple[list[int], list[int]]]:
    """Each term's postings of live documents (ordinals, counts), checked
    against its count of live documents. Entries of removed documents are
    left out: when they are dropped depends on when the index merged, which
    differs between a restore and puts, and they score nothing."""
    postings = {}
    for term, term_id in index._term_ids.items():
        ords, tfs = index._entries(term_id)
        kept = index._alive[ords]
        assert np.all(np.diff(ords) > 0), term
        assert int(np.count_nonzero(kept)) == index._live[term_id], term
        if index._live[term_id]:
            postings[term] = (ords[kept].tolist(), tfs[kept].tolist())
    return postings


def _assert_same_answers(a: Layer, b: Layer, queries: np.ndarray) -> None:
    for query in queries:
        found_a, found_b = a.index.search(query, 10), b.index.search(query, 10)
        assert [m.id for m, _ in found_a] == [m.id for m, _ in found_b]
        assert all(math.isclose(x, y, abs_tol=1e-6)
                   for (_, x), (_, y) in zip(found_a, found_b, strict=True))
    for text in ("deploy tests", "naive café", "σας", "don't run", "tag1 ana", "topic 3"):
        hits_a, hits_b = a.keywords.search(text), b.keywords.search(text)
        assert list(ranked(hits_a)) == list(ranked(hits_b))
        assert hits_a.matched == hits_b.matched


# Small slices and merges, so that these sizes restore in many slices and
# merge their recent postings many times.
SMALL = pytest.mark.parametrize("small", [False, True])


def _small(monkeypatch: pytest.MonkeyPatch, small: bool) -> None:
    if small:
        monkeypatch.setattr(keyword, "RESTORE_SLICE", 97)
        monkeypatch.setattr(keyword, "MERGE_MIN", 50)


@SMALL
@pytest.mark.parametrize("n", [0, 1, 700, 2500])
def test_restore_equals_one_put_per_memory(n: int, small: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _small(monkeypatch, small)
    memories, vectors = _memories(n, seed=n)
    reference, restored = (_put_one_by_one(memories, vectors, 10**9),
                           _restored(memories, vectors, 10**9))
    _assert_same(reference, restored)
    _assert_same_answers(reference, restored, _memories(5, seed=99)[1])


@SMALL
def test_restored_layer_follows_later_writes_like_the_reference(
        small: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    _small(monkeypatch, small)
    memories, vectors = _memories(1500, seed=3)
    # Its keyword index left unbuilt: the first write builds it, then applies.
    reference, restored = (_put_one_by_one(memories, vectors, 10**9),
                           _restored(memories, vectors, 10**9, finished=False))
    extra, extra_vectors = _memories(40, seed=4)
    for layer in (reference, restored):
        for i in range(0, 1500, 3):  # a third re-indexed (new text), a tenth removed
            layer.update(memories[i].copy(text="deploy on Friday", topic_key="moved"))
        for i in range(0, 1500, 10):
            layer.remove(memories[i].id)
        for memory, vector in zip(extra, extra_vectors, strict=True):
            layer.put(memory.copy(id=f"new-{memory.id}"), vector)
    _assert_same(reference, restored)
    _assert_same_answers(reference, restored, _memories(5, seed=98)[1])


def test_a_search_before_the_keyword_index_is_built_builds_it_once() -> None:
    """Searches on many threads, before the vault's thread has built the
    restored keyword index: each gets the answers of a finished restore."""
    memories, vectors = _memories(2500, seed=6)
    reference = _restored(memories, vectors, 10**9)
    pending = _restored(memories, vectors, 10**9, finished=False)
    assert len(pending.keywords) == len(reference.keywords) == 2500
    texts = ["deploy tests", "naive café", "tag1 ana", "topic 3"] * 4
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda text: list(ranked(pending.keywords.search(text))), texts))
    assert found == [list(ranked(reference.keywords.search(text))) for text in texts]
    pending.finish_restore()  # a no-op once built
    _assert_same(reference, pending)


def test_restore_above_the_ivf_threshold_builds_the_ivf() -> None:
    memories, vectors = _memories(3000, seed=5)
    layer = _restored(memories, vectors, threshold=1000)
    assert wait_for_ivf(layer.index)
    layer.index.nprobe = 10**6  # every list read: the IVF path must then be exact
    for query in _memories(20, seed=6)[1]:
        fast = layer.index.search(query, 10)
        assert [m.id for m, _ in fast] == [m.id for m, _ in search_exact(layer.index, query, 10)]


def test_a_layer_that_holds_memories_or_repeated_ids_takes_one_put_each() -> None:
    memories, vectors = _memories(300, seed=7)
    doubled = [*memories, memories[5].copy(text="replaced text")]
    doubled_vectors = np.concatenate([vectors, vectors[:1]])
    _assert_same(_put_one_by_one(doubled, doubled_vectors, 10**9),
                 _restored(doubled, doubled_vectors, 10**9))
    reference = _put_one_by_one(memories, vectors, 10**9)
    layer = _put_one_by_one(memories[:100], vectors[:100], 10**9)
    layer.restore(memories[100:], list(vectors[100:]))
    _assert_same(reference, layer)


def test_restore_refuses_vectors_of_the_wrong_shape() -> None:
    memories, vectors = _memories(10, seed=8)
    with pytest.raises(ValueError):
        Layer(DIM).index.restore(memories, list(vectors[:, :-1]))
    with pytest.raises(ValueError):
        Layer(DIM).index.restore(memories, vectors[:9])


def _state(seed: int = 9) -> SnapshotBody:
    memories, vectors = _memories(50, seed)
    memories = [m.copy(payload={"n": i, "nested": [1, "x"]}, importance=0.25 + i / 100)
                for i, m in enumerate(memories)]
    memories[3] = memories[3].copy(**_non_default_new_fields())
    turns, turn_vectors = _memories(5, seed + 1)
    turns = [t.copy(id=f"turn-{t.id}") for t in turns]
    stamps = {m.id: {"*": Stamp(1_700_000_000_000 + i, i % 3, "dev-a")}
              for i, m in enumerate(memories)}
    stamps["m7"]["text"] = Stamp(1_800_000_000_000, 2, "dev-b")
    stamps["m8"] = {"tier": Stamp(1_800_000_000_001, 0, "dev-c")}
    return SnapshotBody(seq=77, dimension=DIM, stamp=Stamp(1_900_000_000_000, 4, "dev-a"),
                 memories=memories, vectors=vectors, tombstones=frozenset({"gone-1", "gone-2"}),
                 turns=turns, turn_vectors=turn_vectors,
                 seen=frozenset({"op-1", "op-2", "op-3"}), stamps=stamps,
                 upkeep={"sweep": 1_700_000_000.5})


def _non_default_new_fields() -> dict[str, object]:
    """A value other than the default for every field a tuple, bool or str
    default allows: whatever fields Memory gains, they round trip too."""
    changes: dict[str, object] = {}
    for spec in fields(Memory):
        if isinstance(spec.default, bool):
            changes[spec.name] = not spec.default
        elif isinstance(spec.default, tuple):
            changes[spec.name] = ("a", "b")
    return changes


def _assert_states_equal(a: SnapshotBody, b: SnapshotBody) -> None:
    assert (a.seq, a.dimension, a.stamp) == (b.seq, b.dimension, b.stamp)
    assert a.memories == b.memories and a.turns == b.turns
    assert np.array_equal(a.vectors, b.vectors)
    assert np.array_equal(a.turn_vectors, b.turn_vectors)
    assert (a.tombstones, a.seen, a.stamps, a.upkeep) == (b.tombstones, b.seen, b.stamps,
                                                          b.upkeep)


def test_version_2_round_trips_every_field() -> None:
    state = _state()
    decoded = decode_body(encode_body(state))
    _assert_states_equal(decoded, state)
    tuple_fields = [f.name for f in fields(Memory) if isinstance(f.default, tuple)]
    assert all(isinstance(getattr(m, name), tuple) for m in decoded.memories
               for name in tuple_fields)
    assert all(isinstance(s, Stamp) for entry in decoded.stamps.values() for s in entry.values())


def _version_1(state: SnapshotBody) -> bytes:
    """The body as version 1 wrote it: one object per memory and per stamp."""
    meta = {"v": 1, "seq": state.seq, "dimension": state.dimension,
            "hlc": state.stamp.encode(),
            "memories": [memory_to_dict(m) for m in state.memories],
            "turns": [memory_to_dict(t) for t in state.turns],
            "tombstones": sorted(state.tombstones), "seen": sorted(state.seen),
            "stamps": {i: {name: s.encode() for name, s in entry.items()}
                       for i, entry in state.stamps.items()},
            "upkeep": dict(state.upkeep)}
    head = json.dumps(meta).encode()
    return (struct.pack(">I", len(head)) + head + state.vectors.astype("<f4").tobytes()
            + state.turn_vectors.astype("<f4").tobytes())


def test_version_1_is_still_read() -> None:
    state = _state()
    _assert_states_equal(decode_body(_version_1(state)), state)


def _meta_edited(body: bytes, edit: object) -> bytes:
    (size,) = struct.unpack_from(">I", body)
    meta = json.loads(body[4 : 4 + size])
    edit(meta)  # type: ignore[operator]
    head = json.dumps(meta).encode()
    return struct.pack(">I", len(head)) + head + body[4 + size :]


def test_a_column_missing_from_an_older_writer_takes_the_default() -> None:
    state = _state()
    newest = fields(Memory)[-1]
    body = _meta_edited(encode_body(state), lambda meta: meta["memories"].pop(newest.name))
    expected = newest.default if not callable(newest.default_factory) else \
        newest.default_factory()
    assert all(getattr(m, newest.name) == expected for m in decode_body(body).memories)


@pytest.mark.parametrize("edit", [
    lambda meta: meta["memories"].update(from_the_future=[0] * 50),  # refused, never dropped
    lambda meta: meta["memories"]["text"].pop(),
    lambda meta: meta["memories"].pop("id"),
    lambda meta: meta["stamps"]["wall_ms"].pop(),
    lambda meta: meta["stamps"]["wall_ms"].__setitem__(0, "soon"),
    lambda meta: meta["stamps"]["device"].__setitem__(0, 99),
    lambda meta: meta.update(v=3),
])
def test_a_malformed_body_is_refused(edit: object) -> None:
    with pytest.raises(IntegrityError):
        decode_body(_meta_edited(encode_body(_state()), edit))


def test_vault_state_restore_equals_applying_the_puts() -> None:
    state = decode_body(encode_body(_state()))
    reference = VaultState(DIM)
    for i, (memory, vector) in enumerate(zip(state.memories, state.vectors, strict=True)):
        reference.apply(Operation(f"op-{i}", PUT, state.stamps.get(memory.id, {}).get(
            "*", Stamp(0, 0, "d")), memory=memory, vector=vector, layer=MEMORIES))
    restored = VaultState(DIM)
    restored.restore(list(zip(state.memories, state.vectors, strict=True)), [],
                     set(state.tombstones), set(state.seen), state.stamps)
    restored.finish_restore()  # what the vault's thread does once serving
    _assert_same(reference.memories, restored.memories)
    assert restored.seen == set(state.seen) and restored.tombstones == set(state.tombstones)


def test_a_cut_reads_the_vectors_of_its_moment_after_later_writes() -> None:
    """A snapshot takes the cut under the write lock and copies the vectors
    after releasing it: growth, new vectors and compaction meanwhile must not
    change what it reads."""
    memories, vectors = _memories(1500, seed=7)
    layer = Layer(DIM)
    for memory, vector in zip(memories[:800], vectors[:800], strict=True):
        layer.put(memory, vector)
    cut_memories, cut_vectors = layer.index.cut()
    for memory, vector in zip(memories[800:], vectors[800:], strict=True):
        layer.put(memory, vector)  # past the first 1,024 rows: the matrix grows
    for memory, vector in zip(memories[:100], vectors[800:900], strict=True):
        layer.put(memory, vector)  # new vectors: new rows, the old ones dead
    for memory in memories[100:450]:
        layer.remove(memory.id)  # 450 of 1,600 rows dead: compacted
    assert len(layer.index.export()[0]) == 1150
    assert [m.id for m in cut_memories] == [m.id for m in memories[:800]]
    np.testing.assert_array_equal(cut_vectors(), vectors[:800])


def test_the_body_in_pieces_is_the_body_of_one_json_dumps(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Snapshots encode the meta a few list items per `json.dumps` (the lock
    is free between them) and hand the vectors over without copying: the
    bytes must be exactly those of one dumps and one concatenation."""
    from memvaultd.storage import snapshot_body as state_module

    monkeypatch.setattr(state_module, "_JSON_PIECE", 3)  # 50 memories: 17 pieces a column
    state = _state()
    parts = state_module.encode_body_parts(state)
    body = b"".join(parts)
    (size,) = struct.unpack_from(">I", body)
    meta = json.loads(body[4 : 4 + size])
    assert body[4 : 4 + size] == json.dumps(meta, separators=(",", ":"),
                                            ensure_ascii=False).encode()
    assert body[4 + size :] == (np.ascontiguousarray(state.vectors, dtype="<f4").tobytes()
                                + np.ascontiguousarray(state.turn_vectors, "<f4").tobytes())
    assert len(parts) > 17
    _assert_states_equal(decode_body(body), state)


def test_a_delta_laid_over_its_snapshot_gives_the_state_it_was_cut_from() -> None:
    """A full cut, then puts, updates, counts, a trash, a purge and turns;
    the delta of what changed, sealed and parsed, laid over the cut's body
    restores the same layers, stamps, seen ids and tombstones as the state
    the operations made."""
    from memvaultd.model.operations import ACCESS, FORGET, REINFORCE, TRASH, TURNS, UPDATE
    from memvaultd.vault.deltas import capture_delta
    from memvaultd.vault.snapshots import capture_state, restore

    memories, vectors = _memories(400, seed=11)
    clock = iter(range(1, 10_000))

    def op(kind: str, **fields: object) -> Operation:
        tick = next(clock)
        return Operation(f"op-{tick}", kind, Stamp(1_700_000_000_000 + tick, 0, "d"),
                         **fields)  # type: ignore[arg-type]

    live = VaultState(DIM)
    for memory, vector in zip(memories[:300], vectors[:300], strict=True):
        live.apply(op(PUT, memory=memory, vector=vector))
    base = decode_body(encode_body(capture_state(live, 300, DIM, Stamp(1, 0, "d"))()))
    live.take_changes()  # what a full snapshot's cut does
    for memory, vector in zip(memories[300:], vectors[300:], strict=True):
        live.apply(op(PUT, memory=memory, vector=vector))
    live.apply(op(UPDATE, target="m1", fields={"text": "deploy on Friday"},
                  vector=vectors[399]))
    live.apply(op(UPDATE, target="m2", fields={"topic_key": "moved", "tags": ["tag9"]}))
    live.apply(op(REINFORCE, target="m3", at=5.0))
    live.apply(op(ACCESS, ids=("m4", "m350"), at=6.0))
    live.apply(op(TRASH, target="m5", at=7.0, by="client"))
    live.apply(op(FORGET, target="m6"))
    live.apply(op(FORGET, target="m360"))
    for turn, vector in zip(*_memories(3, seed=12), strict=True):
        live.apply(op(PUT, memory=turn.copy(id=f"turn-{turn.id}"), vector=vector, layer=TURNS))
    delta = decode_body(encode_body(capture_delta(live, 300, 420, DIM, Stamp(2, 0, "d"))))
    assert delta.base == 300 and delta.gone == {"m6", "m360"}
    assert len(delta.memories) == 100 - 1 + 5 and len(delta.turns) == 3

    restored = VaultState(DIM)
    restore(restored, base, delta)
    restored.finish_restore()
    for name in live.layers:
        a, b = live.layers[name], restored.layers[name]
        assert {m.id: m for m in a.memories()} == {m.id: m for m in b.memories()}, name
        for memory in a.memories():
            assert np.array_equal(a.index.vector(memory.id), b.index.vector(memory.id))
        assert a._topics == b._topics
        for text in ("deploy friday", "tag9", "topic 3"):
            assert list(ranked(a.keywords.search(text))) == list(ranked(b.keywords.search(text)))
    assert restored.stamps == live.stamps and restored.tombstones == live.tombstones
    assert restored.seen == live.seen
    # The delta's changes count as changes since the base: the next delta holds them.
    assert set(restored.changed) == set(live.changed)
    assert set(restored.seen_since) == set(live.seen_since)


def test_a_delta_is_laid_over_its_own_snapshot_only() -> None:
    from memvaultd.storage.delta_body import merged

    body = _state()
    delta = SnapshotBody(90, DIM, body.stamp, [], np.zeros((0, DIM), np.float32),
                         frozenset(), [], np.zeros((0, DIM), np.float32), base=76)
    with pytest.raises(ValueError, match="snapshot 76, not 77"):
        merged(body, delta)


def test_equal_short_strings_of_a_body_are_one_object() -> None:
    memories = decode_body(encode_body(_state())).memories
    tiers = {id(m.tier) for m in memories}
    tags = {id(tag) for m in memories for tag in m.tags if tag == "tag1"}
    assert len(tiers) == 1 and len(tags) <= 1


def test_a_list_where_a_string_belongs_is_refused() -> None:
    body = _meta_edited(encode_body(_state()),
                        lambda meta: meta["memories"]["category"].__setitem__(0, ["x"]))
    with pytest.raises(IntegrityError):
        decode_body(body)


def test_a_keyword_index_emptied_by_removals_restores_like_a_new_one() -> None:
    memories, _ = _memories(300, seed=10)
    fields = [(m.text, m.topic_key) for m in memories]
    emptied = KeywordIndex()
    for i, (text, _topic) in enumerate(fields[:50]):
        emptied.put(f"old{i}", [text, "gone"])
    for i in range(50):
        emptied.remove(f"old{i}")
    fresh = KeywordIndex()
    ids = [m.id for m in memories]
    for index in (emptied, fresh):
        index.restore(ids, fields)
    assert _live_postings(emptied) == _live_postings(fresh)
    for text in ("deploy tests", "naive café", "σας", "gone", "topic 3"):
        assert list(ranked(emptied.search(text))) == list(ranked(fresh.search(text)))
