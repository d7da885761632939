"""`FieldStamps` reads as the plain mapping id -> {field or "*": stamp} it
holds compactly, whatever order its stamps were written in."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvaultd.model.hlc import Stamp
from memvaultd.model.stamps import BASE, FieldStamps, StampBatch

_rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                           st.sampled_from([BASE, "text", "trashed_by"]),
                           st.builds(Stamp, st.integers(0, 9), st.integers(0, 3),
                                     st.sampled_from(["d1", "d2"]))))


def _plain(rows: list[tuple[str, str, Stamp]]) -> dict[str, dict[str, Stamp]]:
    out: dict[str, dict[str, Stamp]] = {}
    for memory_id, name, stamp in rows:
        out.setdefault(memory_id, {})[name] = stamp
    return out


@given(_rows)
def test_reads_as_the_plain_mapping(rows: list[tuple[str, str, Stamp]]) -> None:
    plain = _plain(rows)
    stamps = FieldStamps.from_rows(rows)
    assert stamps == plain and dict(stamps) == plain
    assert FieldStamps(plain) == stamps == FieldStamps(stamps)
    assert _plain(list(stamps.rows())) == plain
    for memory_id, entry in plain.items():
        for name in (BASE, "text", "trashed_by"):
            assert stamps.of(memory_id, name) == (entry.get(name) or entry.get(BASE))


def _batch(rows: list[tuple[str, str, Stamp]]) -> StampBatch:
    """`rows` as a snapshot body's section holds them: a column each, the
    fields and devices as codes of words (in an order of their own)."""
    fields = sorted({name for _, name, _ in rows}, reverse=True)
    devices = sorted({stamp.device for _, _, stamp in rows}, reverse=True)
    return StampBatch([memory_id for memory_id, _, _ in rows], fields,
                      np.array([fields.index(name) for _, name, _ in rows], dtype=np.int32),
                      np.array([stamp.wall_ms for _, _, stamp in rows], dtype=np.int64),
                      np.array([stamp.counter for _, _, stamp in rows], dtype=np.int64),
                      devices, np.array([devices.index(stamp.device) for _, _, stamp in rows],
                                        dtype=np.int32))


@given(_rows, st.lists(st.integers(0, 30), max_size=4))
def test_read_in_batches_reads_as_the_rows_do(rows: list[tuple[str, str, Stamp]],
                                              cuts: list[int]) -> None:
    ends = sorted({min(cut, len(rows)) for cut in cuts} | {len(rows)})
    batches = [_batch(rows[start:end]) for start, end in zip([0, *ends], ends, strict=False)]
    stamps = FieldStamps.from_batches(batches)
    assert stamps == FieldStamps.from_rows(rows) == _plain(rows)
    for memory_id, entry in _plain(rows).items():
        for name in (BASE, "text", "trashed_by"):
            assert stamps.of(memory_id, name) == (entry.get(name) or entry.get(BASE))


def test_puts_after_field_stamps_in_an_earlier_batch_keep_them() -> None:
    one, two, three = Stamp(1, 0, "d1"), Stamp(2, 0, "d2"), Stamp(3, 1, "d1")
    first = [("m", BASE, one), ("m", "text", two)]
    then = [("m", BASE, three), ("n", BASE, one), ("n", BASE, two)]
    stamps = FieldStamps.from_batches([_batch(first), _batch(then)])
    assert stamps == _plain(first + then) == {"m": {BASE: three, "text": two},
                                               "n": {BASE: two}}


def test_a_batch_whose_codes_name_no_word_is_refused() -> None:
    batch = _batch([("m", BASE, Stamp(1, 0, "d"))])
    for bad in (np.array([1], dtype=np.int32), np.array([-1], dtype=np.int32)):
        with pytest.raises(ValueError, match="device"):
            FieldStamps.from_batches([StampBatch(batch.ids, batch.fields, batch.field_codes,
                                                 batch.walls, batch.counters, batch.devices,
                                                 bad)])
        with pytest.raises(ValueError, match="field"):
            FieldStamps.from_batches([StampBatch(batch.ids, batch.fields, bad, batch.walls,
                                                 batch.counters, batch.devices,
                                                 batch.device_codes)])
    with pytest.raises(ValueError, match="rows"):
        FieldStamps.from_batches([StampBatch(["m", "n"], batch.fields, batch.field_codes,
                                             batch.walls, batch.counters, batch.devices,
                                             batch.device_codes)])


def test_writes_and_copies() -> None:
    one, two, three = Stamp(1, 0, "d"), Stamp(2, 0, "d"), Stamp(3, 0, "d")
    stamps = FieldStamps()
    stamps.put("m", one)
    assert stamps["m"] == {BASE: one} and stamps.of("m", "text") == one
    copy = FieldStamps(stamps)
    stamps.set("m", "text", two)
    assert stamps["m"] == {BASE: one, "text": two} and copy["m"] == {BASE: one}
    stamps["m"]["text"] = three  # type: ignore[index]  # a copy: changes nothing
    assert stamps.of("m", "text") == two
    stamps.replace({"m": {BASE: three}, "n": {"text": one}})
    assert stamps == {"m": {BASE: three}, "n": {"text": one}}
    stamps.put("n", two)  # a put stamps the whole memory again
    assert stamps["n"] == {BASE: two}
    stamps.discard("m")
    stamps.discard("gone")
    assert "m" not in stamps and len(stamps) == 1


@given(_rows, st.lists(st.sampled_from(["a", "b", "c", "z"])))
def test_only_some_memories_reads_as_their_part_of_the_mapping(
        rows: list[tuple[str, str, Stamp]], wanted: list[str]) -> None:
    """A delta's stamps: those of the memories asked for that are held,
    loaded puts among them, and a copy: a change to one leaves the other."""
    stamps = FieldStamps.from_batches([_batch(rows)])
    part = stamps.only(wanted)
    assert part == {memory_id: stamps[memory_id] for memory_id in wanted if memory_id in stamps}
    for memory_id in part:
        part.set(memory_id, "text", Stamp(99, 0, "d3"))
    assert stamps == _plain(rows)


@given(_rows, _rows, st.integers(1, 5))
def test_written_in_batches_they_read_back_the_same(
        loaded: list[tuple[str, str, Stamp]], written: list[tuple[str, str, Stamp]],
        size: int) -> None:
    """Stamps read as a body's columns, then written to: their batches (put
    stamps gathered from the arrays, the rest row by row) hold every stamp
    once, no batch over `size` rows, and read back as the same mapping."""
    stamps = FieldStamps.from_batches([_batch(loaded)])
    for memory_id, name, stamp in written:
        stamps.set(f"w{memory_id}" if name == BASE else memory_id, name, stamp)
    batches = list(stamps.batches(size))
    assert all(0 < len(batch.ids) <= size for batch in batches)
    for batch in batches:
        batch.check()
    rows = [row for batch in batches for row in batch.rows()]
    assert len(rows) == len(list(stamps.rows())) and _plain(rows) == stamps
    assert FieldStamps.from_batches(batches) == stamps


_other_rows = st.lists(st.tuples(st.sampled_from(["b", "c", "d"]),
                                 st.sampled_from([BASE, "text"]),
                                 st.builds(Stamp, st.integers(0, 9), st.integers(0, 3),
                                           st.sampled_from(["d2", "d3"]))))


@given(_rows, _other_rows)
def test_a_delta_read_replaces_its_memories_stamps_whole(
        base: list[tuple[str, str, Stamp]], delta: list[tuple[str, str, Stamp]]) -> None:
    """A snapshot's stamps and a delta's, both read as columns (devices of
    their own, one in common): each memory of the delta takes its stamps
    there, every other keeps its own, and the base read before is unchanged."""
    stamps = FieldStamps.from_batches([_batch(base)])
    before = FieldStamps(stamps)
    stamps.replace(FieldStamps.from_batches([_batch(delta)]))
    want = _plain(base) | _plain(delta)
    assert stamps == want and FieldStamps.from_batches(list(stamps.batches(3))) == want
    assert before == _plain(base)
