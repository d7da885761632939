"""`OpIds`, the set of applied operation ids, against a plain `set`."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memvaultd.crypto.entropy import new_id
from memvaultd.model import op_ids
from memvaultd.model.hlc import Stamp
from memvaultd.model.op_ids import OpIds
from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body

_HEX_IDS = st.binary(min_size=16, max_size=16).map(bytes.hex)
# Ids a newer or older writer, or a test, might use: kept as the strings they are.
_OTHER_IDS = st.one_of(st.text(max_size=40), _HEX_IDS.map(str.upper),
                       st.text(alphabet="0123456789abcdefg", min_size=32, max_size=32))
_IDS = st.one_of(_HEX_IDS, _OTHER_IDS)


@settings(max_examples=200, deadline=None)
@given(first=st.lists(_IDS, max_size=40), later=st.lists(_IDS, max_size=40),
       absent=st.lists(_IDS, max_size=10))
def test_op_ids_answer_as_a_set_does(first: list[str], later: list[str],
                                     absent: list[str]) -> None:
    ids, expected = OpIds(first), set(first)
    copied = ids.copy()
    for op_id in later:
        ids.add(op_id)
        expected.add(op_id)
    assert len(ids) == len(expected) and ids == expected
    assert list(ids) == sorted(expected)
    assert all(op_id in ids for op_id in expected)
    assert all((op_id in ids) == (op_id in expected) for op_id in absent)
    assert copied == set(first)  # a copy does not follow later adds
    assert ids | set(absent) == expected | set(absent) == set(absent) | ids
    assert 5 not in ids


@settings(max_examples=200, deadline=None)
@given(first=st.lists(_IDS, max_size=30), first_later=st.lists(_IDS, max_size=10),
       second=st.lists(_IDS, max_size=30), second_later=st.lists(_IDS, max_size=10),
       shared=st.lists(_IDS, max_size=10))
def test_a_union_of_two_op_ids_is_the_union_of_their_sets(
        first: list[str], first_later: list[str], second: list[str], second_later: list[str],
        shared: list[str]) -> None:
    # Each side holds ids in its arrays (given at first) and among its recent
    # ones (added later), some of them on both sides and in both places.
    one, other = OpIds(first + shared), OpIds(second)
    for op_id in first_later:
        one.add(op_id)
    for op_id in second_later + shared:
        other.add(op_id)
    expected = set(first + shared + first_later) | set(second + second_later + shared)
    union = one | other
    assert isinstance(union, OpIds)
    assert len(union) == len(expected) and union == expected
    assert list(union) == sorted(expected)
    assert all(op_id in union for op_id in expected)
    assert one == set(first + shared + first_later)  # neither side is changed
    assert other == set(second + second_later + shared)


def test_a_union_of_large_op_ids_keeps_every_id_once() -> None:
    everything = [new_id() for _ in range(20_000)]
    one, other = OpIds(everything[:15_000]), OpIds(everything[10_000:])
    for op_id in everything[:50]:  # recent on one side, in the arrays on the other
        other.add(op_id)
    union = one | other
    assert len(union) == len(everything) and list(union) == sorted(everything)


def test_many_adds_fold_into_the_arrays_and_stay_members(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(op_ids, "_FOLD_MIN", 8)
    everything = [new_id() for _ in range(3000)]
    ids = OpIds(everything[:100])
    for op_id in everything[100:]:
        ids.add(op_id)
        ids.add(op_id)  # twice: held once
    assert len(ids._recent) <= max(8, len(everything) // 8)
    assert len(ids) == len(everything) and list(ids) == sorted(everything)
    assert all(op_id in ids for op_id in everything)
    assert not any(new_id() in ids for _ in range(1000))


def test_ids_sharing_their_first_eight_bytes_are_told_apart() -> None:
    prefix = "0123456789abcdef"
    twins = [prefix + f"{n:016x}" for n in (5, 1, 9)]
    ids = OpIds(twins)
    assert all(t in ids for t in twins)
    assert prefix + f"{2:016x}" not in ids and prefix + f"{10:016x}" not in ids


def test_op_ids_round_trip_through_a_snapshot_body() -> None:
    seen = [new_id() for _ in range(5000)] + ["op-1", "A" * 32, "é" * 16, "0" * 31]
    body = SnapshotBody(seq=1, dimension=4, stamp=Stamp(1, 0, "d"), memories=[],
                        vectors=np.zeros((0, 4), np.float32), tombstones=frozenset(), turns=[],
                        turn_vectors=np.zeros((0, 4), np.float32), seen=frozenset(seen))
    read = decode_body(encode_body(body)).seen
    assert isinstance(read, OpIds)
    assert read == set(seen) and list(read) == sorted(seen)
    again = decode_body(encode_body(dataclasses.replace(body, seen=read))).seen
    assert list(again) == sorted(seen)
