"""Loading a snapshot in bulk gives exactly what one put per memory gives.

`Layer.restore` (one matrix copy, keyword postings built per term, the topic
map in one pass) and `VaultState.restore` against the reference: a `put` of
each memory in order. Also the snapshot body: version 3 (Arrow record
batches) round trips every field, from bytes and from a sealed stream, with
float16 and float32 vectors; versions 2 (JSON columns) and 1 (one object
per memory) are still read; a malformed body of any version is refused.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from memvault_base.errors import IntegrityError
from memvaultd.index import keyword
from memvaultd.index.keyword import KeywordIndex
from memvaultd.index.layer import Layer
from memvaultd.model import records
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import MEMORIES, PUT, Operation
from memvaultd.model.records import Records
from memvaultd.model.stamps import FieldStamps
from memvaultd.storage import snapshot_body
from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body, read_body
from memvaultd.vault.state import VaultState

from .old_bodies import version_1, version_2
from .reference_index import live_postings, ranked, search_exact, wait_for_ivf

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
            entity=str(rng.choice(["", "Ana", "ΣΑΣ", "Ada Lovelace"])),
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
    assert ia._ids == ib._ids and ia._rows.of == ib._rows.of
    assert {m.id: m for m in ia.memories()} == {m.id: m for m in ib.memories()}
    assert np.array_equal(ia._matrix[:n], ib._matrix[:n])
    assert np.array_equal(ia._alive[:n], ib._alive[:n])
    ka, kb = a.keywords, b.keywords
    docs = len(ka._doc_ids)
    assert ka._ordinals == kb._ordinals and ka._doc_ids == kb._doc_ids
    assert ka._total == kb._total
    assert np.array_equal(ka._lengths[:docs], kb._lengths[:docs])
    assert live_postings(ka) == live_postings(kb)
    assert a._topics == b._topics
    assert a.sessions._links == b.sessions._links and a.sessions._last == b.sessions._last
    ea, eb = a.entities, b.entities
    assert ea._count == eb._count and ea._single == eb._single and ea._pairs == eb._pairs


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


def test_restore_maps_topics_held_once_and_shared_as_puts_do() -> None:
    """Topics of one memory each (the benchmark's), shared ones and none,
    mixed: the restored topic map is the one a put a memory makes."""
    memories, vectors = _memories(300, seed=21)
    memories = [m.copy(topic_key=(f"own.{i}", "shared", "", f"pair.{i // 2}")[i % 4])
                for i, m in enumerate(memories)]
    reference, restored = (_put_one_by_one(memories, vectors, 10**9),
                           _restored(memories, vectors, 10**9))
    assert restored._topics == reference._topics
    assert restored.topic_size("shared") == 75 and restored.with_topic("own.4") == {"m4"}


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


def _assert_every_field_read(decoded: SnapshotBody, state: SnapshotBody) -> None:
    _assert_states_equal(decoded, state)
    tuple_fields = [f.name for f in fields(Memory) if isinstance(f.default, tuple)]
    assert all(isinstance(getattr(m, name), tuple) for m in decoded.memories
               for name in tuple_fields)
    assert all(isinstance(s, Stamp) for entry in decoded.stamps.values() for s in entry.values())


def test_version_3_round_trips_every_field() -> None:
    state = _state()
    _assert_every_field_read(decode_body(encode_body(state)), state)
    assert json.loads(_head(encode_body(state)))["v"] == 3


def test_a_body_is_read_as_columns_a_repeated_value_held_once() -> None:
    """The memories are read into columns, not objects: a value every
    memory holds is held once, a repeated tag list once with a code a
    memory; other values, a negative zero and a NaN read as written."""
    memories, vectors = _memories(6, 5)
    memories = [m.copy(tags=("a", "b"), expires_at=0.0, last_reinforced_at=0.0 if i % 2 else 7.5,
                       importance=[0.5, -0.0, 0.0, 0.25, 0.5, 1.0][i],
                       created_at=math.nan if i == 3 else 100.0 + i)
                for i, m in enumerate(memories)]
    state = dataclasses.replace(_state(), memories=memories, vectors=vectors, stamps={})
    read = decode_body(encode_body(state)).memories
    assert isinstance(read, Records) and not read.extra
    columns = read.table.columns
    for name in ("tags", "expires_at", "payload"):
        assert isinstance(columns[name], records.Constant), name
    assert isinstance(columns["importance"], records.Numbers)
    assert isinstance(columns["text"], records.Texts)
    assert [m.id for m in read] == [m.id for m in memories]
    assert read[0].payload == {} and read[0].tags == ("a", "b")
    assert [m.last_reinforced_at for m in read] == [7.5, 0.0] * 3
    assert [m.importance for m in read] == [0.5, -0.0, 0.0, 0.25, 0.5, 1.0]
    assert math.copysign(1, read[1].importance) == -1 and math.copysign(1, read[2].importance) == 1
    assert math.isnan(read[3].created_at) and read[4].created_at == 104.0


def test_a_negative_zero_among_zeros_reads_as_written() -> None:
    """-0.0 equals 0.0: a column of zeros with one negative zero is not one value."""
    memories, vectors = _memories(3, 8)
    memories = [m.copy(expires_at=z) for m, z in zip(memories, (0.0, -0.0, 0.0), strict=True)]
    state = dataclasses.replace(_state(), memories=memories, vectors=vectors, stamps={})
    read = decode_body(encode_body(state)).memories
    assert [math.copysign(1, m.expires_at) for m in read] == [1, -1, 1]


def test_both_times_of_a_memory_read_as_written() -> None:
    memories, vectors = _memories(4, 6)
    times = [(5.0, 5.0), (5.0, 6.0), (0.0, -0.0), (7.0, 7.0)]
    memories = [m.copy(created_at=c, last_reinforced_at=r)
                for m, (c, r) in zip(memories, times, strict=True)]
    state = dataclasses.replace(_state(), memories=memories, vectors=vectors, stamps={})
    read = decode_body(encode_body(state)).memories
    assert [(m.created_at, m.last_reinforced_at) for m in read] == times
    assert math.copysign(1, read[2].last_reinforced_at) == -1


def test_the_put_stamps_of_a_body_are_read_into_arrays() -> None:
    """A memory's put stamp is a row of three arrays, read back as written;
    a stamp of a field of its own (an update's) stays a `Stamp`."""
    memories, vectors = _memories(4, 9)
    wall = 1_790_000_000_000
    written = [Stamp(wall, 1000 + i % 2, f"dev-{i % 3}") for i in range(4)]
    stamps = {m.id: {"*": s} for m, s in zip(memories, written, strict=True)}
    stamps[memories[1].id]["text"] = Stamp(wall + 5, 0, "dev-9")
    state = dataclasses.replace(_state(), memories=memories, vectors=vectors, stamps=stamps)
    read = decode_body(encode_body(state)).stamps
    assert isinstance(read, FieldStamps)
    assert {m.id: read[m.id] for m in memories} == stamps
    assert read.of(memories[1].id, "text") == Stamp(wall + 5, 0, "dev-9")
    assert read.of(memories[1].id, "tags") == written[1]
    assert [type(entry) for entry in read._entries.values()] == [int, dict, int, int]
    assert set(read._loaded.walls.tolist()) == {wall}


def test_float16_vectors_are_written_and_read_as_float16() -> None:
    """A large vault's index holds float16 rows: the body carries them as
    they are, and a reader gets them in the dtype its allocator asks for."""
    state = _state()
    half = dataclasses.replace(state, vectors=state.vectors.astype(np.float16))
    body = encode_body(half)
    assert len(body) < len(encode_body(state)) - 50 * DIM  # 2 bytes a value, not 4
    decoded = decode_body(body)
    assert decoded.vectors.dtype == np.float16 and decoded.turn_vectors.dtype == np.float32
    _assert_states_equal(decoded, half)
    wide = decode_body(body, lambda rows, dimension, dtype: np.empty((rows + 7, dimension),
                                                                      np.float32))
    assert wide.vectors.dtype == np.float32 and wide.vectors.shape == (50, DIM)
    np.testing.assert_array_equal(wide.vectors, half.vectors.astype(np.float32))


def test_a_body_of_many_batches_reads_from_a_stream_of_small_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 7 rows (50 memories: 8 batches, their dictionaries
    replaced each time), read through reads of at most 5 bytes: what a
    sealed body read a chunk at a time gives, at any boundary."""
    monkeypatch.setattr(snapshot_body, "BATCH_ROWS", 7)
    state = _state()
    parts = snapshot_body.encode_body_parts(state)
    body = b"".join(parts)
    assert body == encode_body(state) and len(parts) > 8 * 5

    class Trickle:
        def __init__(self) -> None:
            self.source = io.BytesIO(body)

        def read(self, size: int = -1) -> bytes:
            out = b""
            while size < 0 or len(out) < size:
                piece = self.source.read(5 if size < 0 else min(5, size - len(out)))
                if not piece:
                    break
                out += piece
            return out

    decoded = read_body(Trickle(), len(body))
    _assert_states_equal(decoded, state)
    assert len({id(m.tier) for m in decoded.memories}) == 1  # one string across batches


def test_topics_across_batches_read_back_each_as_one_string(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The topics, a plain string column, are coded over the whole section
    at its end: repeated within a batch, across batches, or held once."""
    monkeypatch.setattr(snapshot_body, "BATCH_ROWS", 7)
    state = _state()
    topics = [f"topic.{i % 4}" if i % 3 else f"own.{i}" for i in range(len(state.memories))]
    topics[5] = ""
    state = dataclasses.replace(state, memories=[
        m.copy(topic_key=topic) for m, topic in zip(state.memories, topics, strict=True)])
    decoded = decode_body(encode_body(state))
    _assert_states_equal(decoded, state)
    read = [m.topic_key for m in decoded.memories]
    assert read == topics
    by_value: dict[str, set[int]] = {}
    for topic in read:
        by_value.setdefault(topic, set()).add(id(topic))
    assert all(len(objects) == 1 for objects in by_value.values())


def test_a_snapshot_is_given_up_between_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    from memvaultd.storage.snapshots import SnapshotCancelled

    monkeypatch.setattr(snapshot_body, "BATCH_ROWS", 7)
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(SnapshotCancelled):
        snapshot_body.encode_body_parts(_state(), cancelled)
    assert len(asked) == 4


def test_version_2_is_still_read() -> None:
    state = _state()
    _assert_every_field_read(decode_body(version_2(state)), state)


def test_version_1_is_still_read() -> None:
    state = _state()
    _assert_states_equal(decode_body(version_1(state)), state)


def _meta_edited(body: bytes, edit: object) -> bytes:
    (size,) = struct.unpack_from(">I", body)
    meta = json.loads(body[4 : 4 + size])
    edit(meta)  # type: ignore[operator]
    head = json.dumps(meta).encode()
    return struct.pack(">I", len(head)) + head + body[4 + size :]


def _head(body: bytes) -> bytes:
    (size,) = struct.unpack_from(">I", body)
    return body[4 : 4 + size]


def test_a_column_missing_from_an_older_writer_takes_the_default() -> None:
    state = _state()
    newest = fields(Memory)[-1]
    expected = newest.default if not callable(newest.default_factory) else \
        newest.default_factory()
    body = _meta_edited(version_2(state), lambda meta: meta["memories"].pop(newest.name))
    assert all(getattr(m, newest.name) == expected for m in decode_body(body).memories)
    body = _with_memory_columns(state, lambda names, arrays: (
        [n for n in names if n != newest.name],
        [a for n, a in zip(names, arrays, strict=True) if n != newest.name]))
    assert all(getattr(m, newest.name) == expected for m in decode_body(body).memories)


@pytest.mark.parametrize("edit", [
    lambda meta: meta["memories"].update(from_the_future=[0] * 50),  # refused, never dropped
    lambda meta: meta["memories"]["text"].pop(),
    lambda meta: meta["memories"].pop("id"),
    lambda meta: meta["stamps"]["wall_ms"].pop(),
    lambda meta: meta["stamps"]["wall_ms"].__setitem__(0, "soon"),
    lambda meta: meta["stamps"]["device"].__setitem__(0, 99),
    lambda meta: meta.update(v=4),
])
def test_a_malformed_version_2_body_is_refused(edit: object) -> None:
    with pytest.raises(IntegrityError):
        decode_body(_meta_edited(version_2(_state()), edit))


def _with_memory_columns(state: SnapshotBody, edit: Callable[
        [list[str], list[object]], tuple[list[str], list[object]]]) -> bytes:
    """`state`'s version 3 body with its memories section rewritten: `edit`
    takes the columns' names and arrays and returns new ones."""
    import pyarrow as pa

    body = encode_body(state)
    head = json.loads(_head(body))
    start = 4 + len(_head(body))
    size = head["sections"][0]
    table = pa.ipc.open_stream(body[start : start + size]).read_all().combine_chunks()
    names, arrays = edit(list(table.column_names), [c.chunk(0) for c in table.columns])
    sink = pa.BufferOutputStream()
    batch = pa.record_batch(arrays, names=names)
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    section = sink.getvalue().to_pybytes()
    head["sections"][0] = len(section)
    encoded = json.dumps(head).encode()
    return struct.pack(">I", len(encoded)) + encoded + section + body[start + size :]


def _replaced(name: str, array: object) -> Callable[[list[str], list[object]],
                                                      tuple[list[str], list[object]]]:
    return lambda names, arrays: (names, [array if n == name else a
                                          for n, a in zip(names, arrays, strict=True)])


def _malformed_version_3() -> list[Callable[[], bytes]]:
    import pyarrow as pa

    state = _state()
    n = len(state.memories)
    return [
        # A newer writer's field: refused, never dropped.
        lambda: _with_memory_columns(state, lambda names, arrays: (
            [*names, "from_the_future"], [*arrays, pa.array([0] * n)])),
        lambda: _with_memory_columns(state, lambda names, arrays: (
            [x for x in names if x != "id"], [a for x, a in zip(names, arrays, strict=True)
                                              if x != "id"])),
        lambda: _with_memory_columns(state, _replaced("text", pa.array([None] * n, pa.string()))),
        lambda: _with_memory_columns(state, _replaced("importance", pa.array(["high"] * n))),
        lambda: _with_memory_columns(state, _replaced("category", pa.array([["x"]] * n))),
        lambda: _with_memory_columns(state, _replaced("vector", pa.FixedSizeListArray.from_arrays(
            pa.array(np.zeros(n * (DIM - 1), np.float32)), DIM - 1))),
        lambda: _meta_edited(encode_body(state), lambda meta: meta.update(rows=[n + 1, 5])),
        lambda: _meta_edited(encode_body(state), lambda meta: meta.update(rows=[n - 1, 5])),
        lambda: _meta_edited(encode_body(state),
                             lambda meta: meta["sections"].__setitem__(0, meta["sections"][0] - 8)),
        lambda: encode_body(state)[:-1],
        lambda: encode_body(state) + b"\0",
        lambda: _meta_edited(encode_body(state), lambda meta: meta.update(v=4)),
    ]


@pytest.mark.parametrize("case", range(len(_malformed_version_3())))
def test_a_malformed_version_3_body_is_refused(case: int) -> None:
    with pytest.raises(IntegrityError):
        decode_body(_malformed_version_3()[case]())


def test_vault_state_restore_equals_applying_the_puts() -> None:
    state = decode_body(encode_body(_state()))
    reference = VaultState(DIM)
    for i, (memory, vector) in enumerate(zip(state.memories, state.vectors, strict=True)):
        reference.apply(Operation(f"op-{i}", PUT, state.stamps.get(memory.id, {}).get(
            "*", Stamp(0, 0, "d")), memory=memory, vector=vector, layer=MEMORIES))
    restored = VaultState(DIM)
    restored.restore_rows(state.memories, state.vectors, [], [],
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


@pytest.mark.parametrize("gone", [frozenset(), frozenset({"m5", "m299"})])
@pytest.mark.parametrize("new", [30, 1100])
def test_a_delta_over_a_body_read_with_room_is_written_over_its_rows(gone: frozenset[str],
                                                                     new: int) -> None:
    """A body read as a start reads it (`restore_matrix`, room past its rows)
    takes a delta's changed and new rows in place when none is gone and
    they fit (room for 1,024 rows: 30 do, 1,100 do not), and the index then
    keeps that matrix; else they are copied. Either way the memories and
    rows are those of the delta laid over the body."""
    from memvaultd.index.memory_index import restore_matrix
    from memvaultd.storage.delta_body import merged

    memories, vectors = _memories(300 + new + 2, seed=13)
    stamp = Stamp(1_700_000_000_000, 0, "d")
    none = (frozenset[str](), [], np.zeros((0, DIM), np.float32))
    body = encode_body(SnapshotBody(10, DIM, stamp, memories[:300], vectors[:300], *none,
                                    stamps={m.id: {"*": stamp} for m in memories[:300]}))
    base = read_body(io.BytesIO(body), len(body), restore_matrix)
    changed = [memories[7].copy(text="deploy on Friday"), memories[250].copy(tags=("moved",))]
    changed_vectors = vectors[[-2, -1]]
    added = memories[300 : 300 + new]
    delta = SnapshotBody(20, DIM, stamp, [*changed, *added],
                         np.concatenate([changed_vectors, vectors[300 : 300 + new]]), *none,
                         stamps={m.id: {"*": stamp} for m in [*changed, *added]},
                         base=10,
                         gone=gone)
    rows_before = base.vectors
    full = merged(base, delta, restore_matrix)

    expected = {m.id: (m, v) for m, v in zip(memories[:300], vectors[:300], strict=True)}
    for memory, vector in zip(delta.memories, delta.vectors, strict=True):
        expected[memory.id] = (memory, vector)
    for memory_id in gone:
        del expected[memory_id]
    assert full.memories == [memory for memory, _ in expected.values()]
    np.testing.assert_array_equal(full.vectors, np.array([v for _, v in expected.values()]))
    assert np.shares_memory(full.vectors, rows_before) == (not gone and new < 1024)
    assert set(full.stamps) == {m.id for m in full.memories}
    state = VaultState(DIM)
    state.restore_rows(full.memories, full.vectors, [], full.turn_vectors, set(), set(),
                       full.stamps)
    assert np.shares_memory(state.layers[MEMORIES].index._matrix, full.vectors)


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
    topics = {id(m.topic_key) for m in memories if m.topic_key == "topic.1_x"}
    assert len(tiers) == 1 and len(tags) <= 1 and len(topics) == 1


def test_a_list_where_a_string_belongs_is_refused() -> None:
    body = _meta_edited(version_2(_state()),
                        lambda meta: meta["memories"]["category"].__setitem__(0, ["x"]))
    with pytest.raises(IntegrityError):
        decode_body(body)


def test_a_keyword_index_emptied_by_removals_restores_like_a_new_one() -> None:
    memories, _ = _memories(300, seed=10)
    fields = [(m.text, m.topic_key) for m in memories]
    emptied = KeywordIndex()
    for i, (text, _topic) in enumerate(fields[:50]):
        emptied.put(f"old{i}", [text, "gone"])
    for i, (text, _topic) in enumerate(fields[:50]):
        emptied.remove(f"old{i}", [text, "gone"])
    fresh = KeywordIndex()
    ids = [m.id for m in memories]
    for index in (emptied, fresh):
        index.restore(ids, fields)
    assert live_postings(emptied) == live_postings(fresh)
    for text in ("deploy tests", "naive café", "σας", "gone", "topic 3"):
        assert list(ranked(emptied.search(text))) == list(ranked(fresh.search(text)))


def test_a_restore_matrix_becomes_the_index_matrix_without_a_copy() -> None:
    """The rows a body is read into (`restore_matrix`) are kept as the
    index's matrix when they are its front; any other rows are copied."""
    from memvaultd.index.memory_index import restore_matrix

    memories, vectors = _memories(300, seed=21)
    matrix = restore_matrix(300, DIM)
    matrix[:300] = vectors
    layer = Layer(DIM)
    layer.restore(memories, matrix[:300])
    layer.finish_restore()
    assert np.shares_memory(layer.index._matrix, matrix)
    _assert_same(_put_one_by_one(memories, vectors, 10**9), layer)
    layer.put(memories[0].copy(id="new"), vectors[1])  # into the room past the rows
    assert len(layer.index.export()[0]) == 301
    np.testing.assert_array_equal(matrix[:300], vectors)  # rows below never rewritten
    other = Layer(DIM)
    other.restore(memories[100:], matrix[100:300])  # not the front: copied
    other.finish_restore()
    assert not np.shares_memory(other.index._matrix, matrix)
    _assert_same(_put_one_by_one(memories[100:], vectors[100:], 10**9), other)


def test_a_sealed_body_is_read_a_chunk_at_a_time(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A body of many sealed chunks parses from `SnapshotStore.open` as from
    its bytes; a flipped bit in any chunk fails the read as a whole."""
    from memvaultd.storage import snapshots

    monkeypatch.setattr(snapshots, "CHUNK_SIZE", 1024)
    monkeypatch.setattr(snapshot_body, "BATCH_ROWS", 7)
    state = _state()
    store = snapshots.SnapshotStore(tmp_path, bytes(range(32)), bytes(16))
    path = store.write(77, snapshot_body.encode_body_parts(state))
    with store.open(77) as sealed:
        assert sealed.length > 8 * 1024
        _assert_states_equal(read_body(sealed, sealed.length), state)
    assert store.read(77) == encode_body(state)
    data = bytearray(path.read_bytes())
    data[-100] ^= 1  # in the last chunk: after every memory was read
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="chunk"), store.open(77) as sealed:
        read_body(sealed, sealed.length)
