"""Memories held as columns (`model/records.py`) read as the objects they were.

A table built from memories gives back each one equal, every field; the
sequence operations a load and a cut use (`taken`, `replaced`, `extended`,
`picked`, slices) give what the same operations on a list give; a field read
a column at a time (`column`, `each`, `numbers`, `mapped`) equals the field
read from each object. And an index restored from a body holds no object a
memory until one is changed, through writes, removals and compaction.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading

import numpy as np
import pytest

from memvaultd.index.columns import _FIELDS, Columns
from memvaultd.index.memory_index import MemoryIndex
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.records import (
    FIELD_NAMES,
    Constant,
    Records,
    Table,
    TableBuilder,
    columns_of,
)
from memvaultd.model.stamps import BASE
from memvaultd.storage.delta_body import _laid
from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body
from memvaultd.vault.snapshots import restore
from memvaultd.vault.state import VaultState

DIM = 8


def _memories(n: int) -> list[Memory]:
    return [Memory(id=f"m{i}", text=["é café", "naïve ΣΑΣ", "\ud800 lone", "plain"][i % 4] + str(i),
                   topic_key=f"topic.{i % 3}", tags=(("a", "b"), (), ("c",))[i % 3],
                   payload={"n": i, "ü": [1, 2]} if i % 2 else {},
                   importance=(0.5, -0.0, 1.0)[i % 3], created_at=100.0 + i,
                   last_reinforced_at=0.0 if i % 2 else 100.0 + i,
                   expires_at=math.nan if i == 3 else 0.0,
                   access_count=i, protected=bool(i % 2), scope=("user", "agent:x")[i % 2],
                   consolidated_from=("x", "y") if i == 5 else ())
            for i in range(n)]


def _same(a: Memory, b: Memory) -> bool:
    """Equal field for field, a NaN equal to a NaN and -0.0 not to 0.0."""
    for spec in dataclasses.fields(Memory):
        x, y = getattr(a, spec.name), getattr(b, spec.name)
        if isinstance(x, float):
            if not (math.isnan(x) and math.isnan(y)) and (
                    x != y or math.copysign(1, x) != math.copysign(1, y)):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


def test_a_table_gives_back_every_field_of_every_memory() -> None:
    memories = _memories(12)
    records = Records.whole(columns_of(memories))
    assert len(records) == 12 and not records.extra
    assert all(_same(read, memory) for read, memory in zip(records, memories, strict=True))
    assert _same(records[7], memories[7]) and _same(records[-1], memories[-1])
    assert records[3].payload is not records[3].payload  # a dict is made anew: mutable


def test_a_field_every_memory_holds_alike_is_held_once() -> None:
    memories = [m.copy(importance=0.5, tier="long_term") for m in _memories(6)]
    columns = columns_of(memories).columns
    assert isinstance(columns["importance"], Constant)
    assert isinstance(columns["tier"], Constant)
    assert not isinstance(columns["created_at"], Constant)


def test_coded_values_across_batches_share_one_code_and_one_string_each() -> None:
    strings: dict[str, str] = {}
    builder = TableBuilder(strings)
    # Arrow dictionary batches: each its own words; the same word in two
    # batches, and equal strings that are distinct objects.
    builder.add_coded("tier", ["short_term", "long_" + "term"], np.array([0, 1, 1]))
    builder.add_coded("tier", ["long_" + "term", "archived"], np.array([1, 0]))
    builder.add_coded("tags", [()], np.zeros(5, dtype=np.int64))
    builder.add_words("scope", ["user", "agent:x", "user", "agent:" + "x", "user"])
    builder.add_words("session_id", ["", "s", "s", "", "t"])
    builder.add_words("topic_key", [f"t.{i % 2}" for i in range(5)])
    for name in FIELD_NAMES:
        if name not in ("tier", "tags", "scope", "session_id", "topic_key", "id", "text"):
            builder.add_missing(name)
    builder.add("id", [f"m{i}" for i in range(5)])
    builder.add("text", [f"text {i}" for i in range(5)])
    records = Records.whole(builder.table(5))
    assert records.column("tier") == ["short_term", "long_term", "long_term", "archived",
                                      "long_term"]
    assert records.column("scope") == ["user", "agent:x", "user", "agent:x", "user"]
    assert records.column("session_id") == ["", "s", "s", "", "t"]
    assert records.column("tags") == [()] * 5
    tiers = records.column("tier")
    assert tiers[1] is tiers[2] is tiers[4] is strings["long_term"]
    scopes = records.column("scope")
    assert scopes[1] is scopes[3]


def test_coded_tuples_share_their_strings() -> None:
    strings: dict[str, str] = {}
    builder = TableBuilder(strings)
    builder.add_words("tags", [("a", "b" + "c"), (), ("bc",), ("a", "bc")])
    builder.add_words("tags", [("bc",), ("d",)])
    for name in FIELD_NAMES:
        if name not in ("tags", "id", "text"):
            builder.add_missing(name)
    builder.add("id", [f"m{i}" for i in range(6)])
    builder.add("text", ["x"] * 6)
    tags = Records.whole(builder.table(6)).column("tags")
    assert tags == [("a", "bc"), (), ("bc",), ("a", "bc"), ("bc",), ("d",)]
    assert tags[0][1] is tags[2][0] is tags[4][0] is strings["bc"]
    with pytest.raises(TypeError):
        builder.add_words("tags", [["a list", "is not hashable"]])


def _alike(values: list[object], want: list[object]) -> bool:
    """Equal in order, a NaN alike to a NaN."""
    return len(values) == len(want) and all(
        a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                   and math.isnan(b)) for a, b in zip(values, want, strict=True))


def _mixed() -> tuple[Records, list[Memory]]:
    """Records of a table with objects among them, and the same as a list."""
    memories = _memories(10)
    changed = [m.copy(text=f"changed {m.id}", importance=0.25, tags=("new",))
               for m in memories[2:4]]
    added = [m.copy(id=f"n{i}", session_id="s") for i, m in enumerate(memories[:2])]
    records = (Records.whole(columns_of(memories)).taken([0, 2, 3, 5, 6, 7, 9])
               .replaced([1, 2], changed).extended(added))
    expected = [memories[0], *changed, memories[5], memories[6], memories[7], memories[9], *added]
    return records, expected


def test_sequence_operations_give_what_they_give_on_a_list() -> None:
    records, expected = _mixed()
    assert len(records) == len(expected)
    assert all(_same(a, b) for a, b in zip(records, expected, strict=True))
    assert records == expected and records[2:5] == expected[2:5]
    picked = records.picked(np.array([4, -1, 0, -1]), expected[:2])
    assert picked == [expected[4], expected[0], expected[0], expected[1]]


@pytest.mark.parametrize("name", [spec.name for spec in dataclasses.fields(Memory)])
def test_a_field_read_a_column_at_a_time_equals_each_object_s(name: str) -> None:
    records, expected = _mixed()
    want = [getattr(m, name) for m in expected]
    assert _alike(records.column(name), want)
    assert _alike(list(records.each(name)), want)
    whole = Records.whole(columns_of(expected))
    assert list(whole.each("text")) == [m.text for m in expected]
    if isinstance(want[0], (float, int)):
        np.testing.assert_array_equal(records.numbers(name), np.array(want))
    assert records.mapped(name, lambda value: len(str(value)), np.int64).tolist() == [
        len(str(value)) for value in want]


def _restored(n: int) -> tuple[MemoryIndex, list[Memory], np.ndarray]:
    memories = _memories(n)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = MemoryIndex(DIM)
    index.restore(Records.whole(columns_of(memories)), vectors)
    return index, memories, vectors


def test_a_restored_index_holds_columns_and_objects_only_for_what_changed() -> None:
    index, memories, vectors = _restored(40)
    assert not index._records and len(index) == 40
    assert all(_same(index.get(m.id), m) for m in memories)
    index.update(memories[1].copy(text="updated"))
    index.put(memories[2].copy(text="moved"), -vectors[2])  # a new vector: a new row
    index.put(memories[3].copy(text="same vector"), vectors[3])
    assert index.remove(memories[4].id) == memories[4]
    index.put(Memory(id="new", text="new one"), vectors[0])
    assert set(index._records) == {memories[1].id, memories[2].id, memories[3].id, "new"}
    assert index.get(memories[4].id) is None and memories[4].id not in index
    assert [index.get(memories[i].id).text for i in (1, 2, 3)] == ["updated", "moved",
                                                                  "same vector"]
    live = {m.id: m for m in index.memories()}
    assert len(live) == len(index) == 40
    assert live[memories[2].id].text == "moved" and _same(live[memories[9].id], memories[9])


def test_compaction_keeps_each_restored_record_with_its_memory() -> None:
    index, memories, _ = _restored(64)
    for memory in memories[:40:2]:  # a third of the rows dead: compacted
        index.remove(memory.id)
    index.update(memories[41].copy(text="kept apart"))
    assert index._epoch == 1 and len(index._ids) < 64  # compacted once
    assert all(index.get(m.id) is None for m in memories[:40:2])
    assert index.get(memories[41].id).text == "kept apart"
    assert all(_same(index.get(m.id), m) for i, m in enumerate(memories)
               if i != 41 and not (i < 40 and i % 2 == 0))
    records, _, rows = index.live_rows()
    assert [m.id for m in records] == [index._ids[row] for row in rows.tolist()]


def test_a_delta_read_from_a_body_stays_columns_over_its_snapshot() -> None:
    """A delta's table is joined after its snapshot's: the merged records
    hold no object, and read as the delta's versions over the snapshot."""
    memories = _memories(9)
    changed = [memories[2].copy(text="changed", tags=("z",), importance=0.75),
               Memory(id="new", text="added", payload={"k": "v"}, created_at=5.0)]
    base = Records.whole(columns_of(memories))
    delta = Records.whole(columns_of(changed))
    assert Records.whole(columns_of([])).table.joined(delta.table).ids == ["m2", "new"]
    merged = _laid(base.taken(np.arange(9)), delta, np.array([2]), np.array([0]), np.array([1]))
    assert not merged.extra
    want = [*memories[:2], changed[0], *memories[3:], changed[1]]
    assert all(_same(a, b) for a, b in zip(merged, want, strict=True)) and len(merged) == 10


_STAMP = Stamp(1, 0, "d")
_MEMORIES = [Memory(id=f"m{i}", text=f"memory {i}", topic_key=f"t.{i % 3}", tags=("a",),
                    created_at=float(i)) for i in range(9)]
_CHANGED = [_MEMORIES[2].copy(text="changed", importance=0.75),
            Memory(id="new", text="added", created_at=5.0)]


def _body(seq: int, rows: list[Memory], base: int = -1) -> SnapshotBody:
    """`rows` sealed and read back as a body at `seq` (a delta over `base`,
    "m4" gone), each row's vector its own."""
    return decode_body(encode_body(SnapshotBody(
        seq, DIM, _STAMP, rows, np.arange(len(rows) * DIM, dtype=np.float32).reshape(-1, DIM),
        frozenset(), [], np.zeros((0, DIM), np.float32), frozenset({f"op-{seq}"}),
        {m.id: {BASE: _STAMP} for m in rows}, base=base, gone=frozenset({"m4"}))))


def _restored_over_a_delta() -> VaultState:
    state = VaultState(DIM)
    restore(state, _body(10, _MEMORIES), _body(12, _CHANGED, base=10))
    return state


def _counting_made(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The ids of the `Memory` objects made from a table from now on."""
    made: list[str] = []
    memory = Table.memory

    def counted(table: Table, i: int) -> Memory:
        made.append(table.ids[i])
        return memory(table, i)

    monkeypatch.setattr(Table, "memory", counted)
    return made


def test_a_delta_laid_over_its_snapshot_at_a_start_makes_no_memory(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A start reads a snapshot and its delta as columns and restores the
    state from them: no `Memory` is made on the way, not even for the
    delta's (98k memories of a 1M vault were ~2 s as objects)."""
    made = _counting_made(monkeypatch)
    state = _restored_over_a_delta()
    monkeypatch.undo()
    assert not made
    assert sorted(state.changed) == ["m2", "m4", "new"]
    assert state.memories.ids() == ["m0", "m1", "m2", "m3", "m5", "m6", "m7", "m8", "new"]
    assert state.memories.get("m2") == _CHANGED[0]
    assert state.memories.get("new") == _CHANGED[1] and state.memories.get("m4") is None


def test_a_stop_after_a_start_over_a_delta_makes_no_memory(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """After a start over a snapshot and its delta, the delta a stop seals
    and a full snapshot are cut from the columns: no `Memory` is made for
    the restored ones (a 1M vault's delta of 98k memories was a `Memory`, a
    vector and a dict of stamps each at every stop). What they hold reads
    as the state does, the memory changed since the start included."""
    from memvaultd.model.operations import UPDATE, Operation
    from memvaultd.vault.deltas import capture_delta
    from memvaultd.vault.snapshots import capture_state

    state = _restored_over_a_delta()
    state.finish_restore()
    state.apply(Operation("op-13", UPDATE, Stamp(2, 0, "d"), target="m7",
                          fields={"text": "since the start"}))
    made = _counting_made(monkeypatch)
    delta = encode_body(capture_delta(state, 10, 13, DIM, Stamp(2, 0, "d")))
    whole = encode_body(capture_state(state, 13, DIM, Stamp(2, 0, "d"))())
    monkeypatch.undo()
    assert not made
    delta_read, whole_read = decode_body(delta), decode_body(whole)
    assert delta_read.base == 10 and delta_read.gone == {"m4"}
    assert sorted(m.id for m in delta_read.memories) == ["m2", "m7", "new"]
    for read in (delta_read, whole_read):
        for m, vector in zip(read.memories, read.vectors, strict=True):
            assert m == state.memories.get(m.id)
            np.testing.assert_array_equal(vector, state.memories.index.vector(m.id))
    assert set(delta_read.stamps) == {"m2", "m7", "new"}
    assert delta_read.stamps["m7"] == state.stamps["m7"] != {BASE: _STAMP}
    assert whole_read.stamps == state.stamps
    assert [m.id for m in whole_read.memories] == state.memories.ids()


@pytest.mark.parametrize("alike", [False, True])
def test_a_body_of_table_entries_and_objects_reads_back_each_memory(
        alike: bool, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Memories read from a table (texts with a lone surrogate, a NaN, a
    -0.0, payloads, coded tags and topics; or, `alike`, fields the table
    holds one value of) mixed with objects in batches of 4: written from
    the columns and the objects, each reads back as it was, in order."""
    from memvaultd.storage import snapshot_body

    monkeypatch.setattr(snapshot_body, "BATCH_ROWS", 4)
    memories = _memories(12)
    if alike:
        memories = [memories[0].copy(id=f"a{i}") for i in range(12)]
    table = Records.whole(columns_of(memories))
    objects = [Memory(id=f"o{i}", text=f"object {i}", topic_key=("topic.0", "own")[i % 2],
                      tags=(("a", "b"), ("new",), ())[i % 3], payload={"o": i} if i % 2 else {},
                      importance=(-0.0, 0.25, math.nan)[i % 3], created_at=float(i),
                      protected=bool(i % 2), scope="user", consolidated_from=("z",) * (i % 2))
               for i in range(6)]
    mixed = Records.chained([table.taken([5, 1]), Records.of(objects[:1]),
                             table.taken([2, 11, 3, 0, 4]), Records.of(objects[1:4]),
                             table.taken([9]), Records.of(objects[4:]), table.taken([6])])
    vectors = np.arange(len(mixed) * DIM, dtype=np.float32).reshape(-1, DIM)
    body = SnapshotBody(1, DIM, _STAMP, mixed, vectors, frozenset(), [],
                        np.zeros((0, DIM), np.float32))
    read = decode_body(encode_body(body))
    assert len(read.memories) == len(mixed)
    assert all(_same(a, b) for a, b in zip(read.memories, mixed, strict=True))
    np.testing.assert_array_equal(read.vectors, vectors)


def test_records_chained_keep_one_table_and_make_objects_of_others() -> None:
    """Parts of one table stay its entries, with their objects in order; a
    part of another table reads the same, as objects."""
    first, other = _memories(6), [m.copy(id=f"o{m.id}") for m in _memories(3)]
    table = Records.whole(columns_of(first))
    loose = [Memory(id="x", text="loose"), Memory(id="y", text="also loose")]
    parts = [table.taken([4, 1]).extended(loose[:1]), Records.of(loose[1:]),
             table.taken([0]).replaced([0], [first[0].copy(text="replaced")]),
             Records.whole(columns_of(other)).taken([2, 0]), table.taken([5, 3])]
    chained = Records.chained(parts)
    want = [m for part in parts for m in part]
    assert len(chained) == len(want) and all(_same(a, b) for a, b in zip(chained, want,
                                                                         strict=True))
    assert chained.table is table.table
    assert [m.id for m in chained.extra] == ["x", "y", "m0", "om2", "om0"]
    assert chained.ids() == [m.id for m in want]
    assert len(Records.chained([])) == 0 and len(Records.chained([Records.of(())])) == 0


def test_tables_joined_read_each_entry_as_its_own_table_did() -> None:
    """Joined column by column: a value held once in each, two different
    ones, a -0.0 beside 0.0, coded words held twice, texts and payloads."""
    first = [m.copy(importance=0.5, expires_at=0.0, payload={}) for m in _memories(5)]
    then = [m.copy(id=f"t{i}", importance=0.75, expires_at=-0.0, payload={"a": i})
            for i, m in enumerate(_memories(4))]
    joined = columns_of(first).joined(columns_of(then))
    assert len(joined) == 9 and joined.ids == [m.id for m in first + then]
    assert all(_same(joined.memory(i), m) for i, m in enumerate(first + then))
    many = [m.copy(id=f"x{i}", topic_key=f"own.{i}") for i, m in enumerate(_memories(300))]
    wide = columns_of(many).joined(columns_of(then))  # 300 words, then one-byte codes
    assert [wide.memory(i).topic_key for i in (0, 299, 300, 303)] == [
        "own.0", "own.299", "topic.0", "topic.0"]
    alike = columns_of(first).joined(columns_of(first[:2]))
    assert isinstance(alike.columns["importance"], Constant)


def test_columns_of_records_equal_columns_of_the_objects() -> None:
    records, expected = _mixed()
    fast, slow = Columns.of(records, 20), Columns.of(expected, 20)
    for name, _, _ in _FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)


def test_a_record_read_while_it_is_rewritten_is_never_missing() -> None:
    """`get` takes no lock: a recall reading a memory while another call
    counts an access on it (moving it out of the columns) reads one version
    or the other, never none."""
    missing: list[str] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can
    try:
        for _ in range(100):
            index, memories, _ = _restored(64)
            stop = threading.Event()

            def read(index: MemoryIndex = index, memories: list[Memory] = memories,
                     stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    missing.extend(m.id for m in memories if index.get(m.id) is None)

            reader = threading.Thread(target=read)
            reader.start()
            for memory in memories:
                index.update(memory.copy(access_count=1))
            stop.set()
            reader.join()
    finally:
        sys.setswitchinterval(switch)
    assert not missing


def test_a_record_made_once_is_read_again_until_it_changes() -> None:
    index, memories, _ = _restored(8)
    first = index.get(memories[0].id)
    assert index.get(memories[0].id) is first  # made once, kept
    index.update(first.copy(text="changed"))
    assert index.get(memories[0].id).text == "changed"
    index.remove(memories[0].id)
    assert index.get(memories[0].id) is None


@pytest.mark.parametrize("shared", [False, True])
def test_a_list_column_reads_as_each_row_read_alone(shared: bool) -> None:
    """Rows of every length (none, one, two, three, 22 words), tuples met
    more than once and in another order, a word that is a prefix of
    another, a dictionary holding a word twice, a column sliced from a
    larger one: each row's value is its own tuple, and the distinct values
    come in the order their first rows do."""
    import pyarrow as pa

    from memvaultd.storage.snapshot_body import _tuples

    rows = [["b", "a"], [], ["a"], ["a", "b"], ["b", "a"], ["ab"], [], ["a", "b", "a"],
            ["a"], ["a", "b", "a"], ["é", ""], ["a", "b"] * 11, ["b", "a"] * 11, ["a", "b"] * 11]
    column = pa.array([["x"], *rows, ["y"]], pa.list_(pa.string()))
    if shared:
        words = pa.array(["a", "b", "a", "ab", "x", "y", "é", ""], pa.string())
        place = {"a": [0, 2], "b": [1], "ab": [3], "x": [4], "y": [5], "é": [6], "": [7]}
        flat = [w for row in [["x"], *rows, ["y"]] for w in row]
        codes = pa.array([place[w][i % len(place[w])] for i, w in enumerate(flat)], pa.int32())
        column = pa.ListArray.from_arrays(column.offsets,
                                          pa.DictionaryArray.from_arrays(codes, words))
    distinct, codes = _tuples(column.slice(1, len(rows)))
    assert [distinct[c] for c in codes.tolist()] == [tuple(row) for row in rows]
    assert distinct == list(dict.fromkeys(tuple(row) for row in rows))


def test_a_list_column_with_a_null_is_refused() -> None:
    import pyarrow as pa

    from memvaultd.storage.snapshot_body import _tuples

    with pytest.raises(ValueError, match="nulls"):
        _tuples(pa.array([["a", None]], pa.list_(pa.string())))
    with pytest.raises(ValueError, match="strings belong"):
        _tuples(pa.array([[1]], pa.list_(pa.int64())))


def test_long_list_rows_that_differ_only_at_their_end_stay_distinct() -> None:
    """Two words, rows of 65: as one number each they would overflow 64
    bits and the two rows below read as one."""
    import pyarrow as pa

    from memvaultd.storage.snapshot_body import _tuples

    rows = [["a"] * 65, ["a"] * 64 + ["b"], ["a"] * 65]
    distinct, codes = _tuples(pa.array(rows, pa.list_(pa.string())))
    assert [distinct[c] for c in codes.tolist()] == [tuple(row) for row in rows]
