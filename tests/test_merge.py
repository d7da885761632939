"""Merge convergence: devices that applied the same operations agree, in any
order the chain can deliver them (each device's own order kept, and a memory
put before anything that refers to it), the trash included: a trash and a
restore are one last-writer-wins register of the memory, a purge (`forget`)
a tombstone that wins over everything (`vault/state.py`)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import (
    ACCESS,
    FORGET,
    PUT,
    REINFORCE,
    RESTORE,
    TRASH,
    UPDATE,
    Operation,
    decode,
    encode,
)
from memvaultd.storage.snapshot_body import SnapshotBody, decode_body, encode_body
from memvaultd.vault.state import VaultState

from .old_bodies import version_2
from .reference_index import ranked

DIM = 4
REPUT = "put again"  # the generator's name for a put of a memory that exists
DEVICES = ("dev-a", "dev-b", "dev-c")


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@st.composite
def histories(draw: st.DrawFn) -> list[Operation]:
    """A causal history: each op by a random device at a moment when the
    memories it refers to exist."""
    ops: list[Operation] = []
    alive: list[str] = []
    clock = {d: 0 for d in DEVICES}
    for n in range(draw(st.integers(1, 40))):
        device = draw(st.sampled_from(DEVICES))
        clock[device] = max(clock.values()) + draw(st.integers(0, 2))  # ties happen
        stamp = Stamp(clock[device], n, device)
        kind = draw(st.sampled_from([PUT, PUT, UPDATE, UPDATE, REINFORCE, FORGET, TRASH, TRASH,
                                     RESTORE, ACCESS, REPUT])
                    if alive else st.just(PUT))
        op_id = f"op{n}"
        if kind in (PUT, REPUT):
            # A put again of a memory some device holds: an import of the
            # same export on two devices, or `init`/`join` logging what a
            # device holds, trashed or not.
            memory_id = f"m{n}" if kind == PUT else draw(st.sampled_from(alive))
            trashed = kind == REPUT and draw(st.booleans())
            memory = Memory(id=memory_id, text=f"text {n}", category=f"c{n % 3}",
                            created_at=float(n), last_reinforced_at=float(n),
                            trashed_at=float(n) if trashed else 0.0,
                            trashed_by="import" if trashed else "")
            ops.append(Operation(op_id, PUT, stamp, memory=memory, vector=_vector(n)))
            if kind == PUT:
                alive.append(memory_id)
        else:
            target = draw(st.sampled_from(alive))
            if kind == UPDATE:
                field = draw(st.sampled_from(["category", "text", "importance", "tags"]))
                value = {"category": f"u{n}", "text": f"updated {n}",
                         "importance": draw(st.floats(0, 1)), "tags": [f"t{n}"]}[field]
                vector = _vector(1000 + n) if field == "text" else None
                ops.append(Operation(op_id, UPDATE, stamp, target=target, at=float(n),
                                     fields={field: value}, vector=vector))
            elif kind == REINFORCE:
                ops.append(Operation(op_id, REINFORCE, stamp, target=target, at=float(n)))
            elif kind == TRASH:  # of a memory live or trashed already, here or elsewhere
                ops.append(Operation(op_id, TRASH, stamp, target=target, at=float(n),
                                     by=f"by {device}"))
            elif kind == RESTORE:
                ops.append(Operation(op_id, RESTORE, stamp, target=target, at=float(n)))
            elif kind == ACCESS:
                ids = tuple(draw(st.lists(st.sampled_from(alive), min_size=1, max_size=3)))
                ops.append(Operation(op_id, ACCESS, stamp, ids=ids, at=float(n)))
            else:
                ops.append(Operation(op_id, FORGET, stamp, target=target, at=float(n)))
                alive.remove(target)
    return ops


def _delivery(ops: list[Operation], rng: random.Random) -> list[Operation]:
    """A random order that keeps each device's order and puts first."""
    queues = {d: [op for op in ops if op.stamp.device == d] for d in DEVICES}
    created: set[str] = set()
    order: list[Operation] = []
    while any(queues.values()):
        ready = [d for d, q in queues.items() if q and (
            q[0].kind == PUT or set(q[0].ids or (q[0].target,)) <= created)]
        device = rng.choice(ready)
        op = queues[device].pop(0)
        if op.kind == PUT:
            assert op.memory is not None
            created.add(op.memory.id)
        order.append(op)
    return order


def _snapshot(state: VaultState) -> dict[str, tuple[object, ...]]:
    """Every memory, live or in the trash, with its vector and where it lives."""
    out: dict[str, tuple[object, ...]] = {}
    for name, layer in (("memories", state.memories), ("trash", state.trash)):
        for memory in layer.memories():
            vector = layer.index.vector(memory.id)
            assert vector is not None
            assert memory.id not in out, "a memory lives in one place"
            assert (name == "trash") == memory.trashed, memory
            out[memory.id] = (name, memory, tuple(np.round(vector, 6)))
    return out


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(0, 2**32), st.integers(0, 2**32))
def test_any_causal_delivery_order_converges(ops: list[Operation], seed_a: int,
                                            seed_b: int) -> None:
    first, second = VaultState(DIM), VaultState(DIM)
    for op in _delivery(ops, random.Random(seed_a)):
        first.apply(op)
    for op in _delivery(ops, random.Random(seed_b)):
        second.apply(op)
        second.apply(op)  # a retried delivery changes nothing
    assert _snapshot(first) == _snapshot(second)
    assert first.tombstones == second.tombstones


def _reloaded(state: VaultState) -> VaultState:
    """`state` through a snapshot body, as a device loads it at start or at
    `join`: the trash travels among the memories, told apart by `trashed_at`."""
    layers = [state.memories, state.trash]
    memories = [memory for layer in layers for memory in layer.memories()]
    vectors = np.array([layer.index.vector(m.id) for layer in layers
                        for m in layer.memories()], dtype=np.float32).reshape(-1, DIM)
    body = decode_body(encode_body(SnapshotBody(
        7, DIM, Stamp(0, 0, "x"), memories, vectors, frozenset(state.tombstones), [],
        np.zeros((0, DIM), dtype=np.float32), frozenset(state.seen),
        {k: dict(v) for k, v in state.stamps.items()})))
    loaded = VaultState(DIM)
    loaded.restore_rows(body.memories, body.vectors, [], [],
                        set(body.tombstones), set(body.seen), body.stamps)
    return loaded


@settings(max_examples=100, deadline=None)
@given(histories(), st.integers(0, 2**32), st.integers(0, 40))
def test_a_snapshot_taken_midway_converges_with_the_rest(ops: list[Operation], seed: int,
                                                         cut: int) -> None:
    """A device that starts from a snapshot taken at any point of the
    history, then applies the rest, holds what one that applied it all holds:
    the trash register's stamps travel with the snapshot."""
    order = _delivery(ops, random.Random(seed))
    direct, partial = VaultState(DIM), VaultState(DIM)
    for op in order:
        direct.apply(op)
    for op in order[:cut]:
        partial.apply(op)
    loaded = _reloaded(partial)
    assert _snapshot(loaded) == _snapshot(partial)
    for op in order[cut:]:
        loaded.apply(op)
    assert _snapshot(loaded) == _snapshot(direct)
    assert loaded.tombstones == direct.tombstones


@settings(max_examples=50, deadline=None)
@given(histories())
def test_operations_survive_their_encoding(ops: list[Operation]) -> None:
    direct, decoded = VaultState(DIM), VaultState(DIM)
    for op in ops:
        direct.apply(op)
        decoded.apply(decode(encode(op)))
    assert _snapshot(direct) == _snapshot(decoded)


def test_reinforcements_are_counted_once_per_operation() -> None:
    state = VaultState(DIM)
    memory = Memory(id="m", text="t", created_at=1.0, last_reinforced_at=1.0)
    state.apply(Operation("p", PUT, Stamp(1, 0, "a"), memory=memory, vector=_vector(1)))
    for op_id, device in (("r1", "a"), ("r2", "b"), ("r1", "a")):
        state.apply(Operation(op_id, REINFORCE, Stamp(2, 0, device), target="m", at=5.0))
    got = state.memories.get("m")
    assert got is not None and got.reinforce_count == 2 and got.last_reinforced_at == 5.0


def test_counted_memories_keep_their_place_in_every_map() -> None:
    """Reinforcements and access marks change counts and times alone
    (`Layer.recount`): the memory is still found by its words, topic and
    session, and the columns the ranking reads have the new counts."""
    state = VaultState(DIM)
    memory = Memory(id="m", text="kestrel migration notes", topic_key="birds", session_id="s1",
                    payload={"seen": 3}, tags=("field",), created_at=1.0, last_reinforced_at=1.0)
    state.apply(Operation("p", PUT, Stamp(1, 0, "a"), memory=memory, vector=_vector(1)))
    later = Memory(id="n", text="heron", session_id="s1", created_at=2.0)
    state.apply(Operation("q", PUT, Stamp(1, 1, "a"), memory=later, vector=_vector(2)))
    state.apply(Operation("r", REINFORCE, Stamp(2, 0, "a"), target="m", at=5.0))
    state.apply(Operation("x", ACCESS, Stamp(3, 0, "a"), ids=("m",), at=7.0))
    assert state.memories.get("m") == dataclasses.replace(
        memory, reinforce_count=1, last_reinforced_at=5.0, access_count=1, last_accessed_at=7.0)
    assert list(ranked(state.memories.keywords.search("kestrel migration"))) == ["m"]
    assert state.memories.with_topic("birds") == {"m"}
    assert state.memories.sessions.neighbours("m") == ("n",)
    view = state.memories.index.view()
    row = view.ids.index("m")
    assert view.columns.reinforce_count[row] == 1 and view.columns.since[row] == 5.0


def test_memory_copy_is_dataclasses_replace() -> None:
    memory = Memory(id="m", text="t", payload={"k": [1]}, tags=("a", "b"), importance=0.7)
    changes = {"access_count": 4, "last_accessed_at": 9.0, "tier": "archived"}
    copied = memory.copy(**changes)
    assert copied == dataclasses.replace(memory, **changes) and copied is not memory
    assert memory.access_count == 0  # the original is untouched
    with pytest.raises(TypeError, match="no field colour"):
        memory.copy(colour="red")


def test_forget_wins_over_a_later_put_of_the_same_memory() -> None:
    state = VaultState(DIM)
    memory = Memory(id="m", text="t")
    state.apply(Operation("f", FORGET, Stamp(5, 0, "b"), target="m", at=5.0))
    state.apply(Operation("p", PUT, Stamp(1, 0, "a"), memory=memory, vector=_vector(1)))
    assert state.memories.get("m") is None


FIRST = Stamp(1, 0, "a")


def _put(memory_id: str = "m", stamp: Stamp = FIRST, **fields: object) -> Operation:
    memory = Memory(id=memory_id, text="t", **fields)  # type: ignore[arg-type]
    return Operation(f"put-{memory_id}-{stamp}", PUT, stamp, memory=memory, vector=_vector(1))


def _in_every_order(ops: list[Operation]) -> list[VaultState]:
    """A state per order of `ops` after the first (the put), each applied once."""
    states = []
    for rest in itertools.permutations(ops[1:]):
        state = VaultState(DIM)
        for op in (ops[0], *rest):
            state.apply(op)
        states.append(state)
    return states


def test_a_restore_made_after_seeing_the_trash_wins_in_any_order() -> None:
    trash = Operation("t", TRASH, Stamp(5, 0, "a"), target="m", at=5.0, by="mcp")
    restore = Operation("r", RESTORE, Stamp(6, 0, "b"), target="m", at=6.0)
    update = Operation("u", UPDATE, Stamp(5, 1, "c"), target="m", at=5.0,
                       fields={"category": "changed while trashed"})
    for state in _in_every_order([_put(), trash, update, restore]):
        memory = state.memories.get("m")
        assert memory is not None and state.trash.get("m") is None
        assert (memory.category, memory.trashed_at, memory.trashed_by) == (
            "changed while trashed", 0.0, "")


def test_a_trash_and_a_restore_unaware_of_each_other_end_as_the_later_stamp_says() -> None:
    """The first trash on device a, a restore on b, and a second trash on a
    that had not seen the restore: the register holds the latest stamp's
    value on every device."""
    first = Operation("t1", TRASH, Stamp(5, 0, "a"), target="m", at=5.0, by="cli")
    restore = Operation("r", RESTORE, Stamp(7, 0, "b"), target="m", at=7.0)
    second = Operation("t2", TRASH, Stamp(7, 0, "c"), target="m", at=7.5, by="sweep")
    for state in _in_every_order([_put(), first, restore, second]):
        assert state.memories.get("m") is None  # "c" > "b" breaks the tie of (7, 0)
        trashed = state.trash.get("m")
        assert trashed is not None and (trashed.trashed_at, trashed.trashed_by) == (7.5, "sweep")


def test_a_purge_wins_over_trash_restore_update_and_put_in_any_order() -> None:
    purge = Operation("f", FORGET, Stamp(3, 0, "a"), target="m", at=3.0)
    later = [Operation("t", TRASH, Stamp(9, 0, "b"), target="m", at=9.0, by="cli"),
             Operation("r", RESTORE, Stamp(10, 0, "b"), target="m", at=10.0),
             Operation("u", UPDATE, Stamp(11, 0, "c"), target="m", at=11.0,
                       fields={"category": "x"}),
             _put(stamp=Stamp(12, 0, "c"))]
    for state in _in_every_order([_put(), purge, *later]):
        assert state.find("m") is None and state.tombstones == {"m"}
        assert "m" not in state.stamps


def test_a_put_of_a_trashed_memory_lands_in_the_trash() -> None:
    """`init` and `join` log a put of every memory a device holds, the
    trashed ones with their register: another device holds them trashed."""
    state = VaultState(DIM)
    state.apply(_put(trashed_at=4.0, trashed_by="watch"))
    assert state.memories.get("m") is None
    trashed = state.trash.get("m")
    assert trashed is not None and trashed.trashed_by == "watch"
    state.apply(Operation("r", RESTORE, Stamp(2, 0, "b"), target="m", at=6.0))
    assert state.memories.get("m") is not None and state.trash.get("m") is None


def test_a_forget_record_written_before_the_trash_still_purges() -> None:
    """A log written before `trash` existed holds forgets of this exact
    shape (no "by"): it decodes, and it is still a tombstone."""
    body = json.dumps({"v": 1, "op": "old", "kind": "forget", "hlc": [3, 0, "dev-a"],
                       "id": "m", "at": 3.0}, separators=(",", ":")).encode()
    op = decode(struct.pack(">I", len(body)) + body)
    assert (op.kind, op.target, op.by) == (FORGET, "m", "")
    state = VaultState(DIM)
    state.apply(_put())
    state.apply(op)
    state.apply(_put(stamp=Stamp(9, 0, "b")))
    assert state.find("m") is None and state.tombstones == {"m"}


def _spliced(op: Operation, old: bytes, new: bytes) -> bytes:
    """`op`'s record with `old` in its JSON (once) written as `new`, the
    length fixed: what a writer other than `encode` may send."""
    record = encode(op)
    (size,) = struct.unpack_from(">I", record)
    body = record[4 : 4 + size]
    assert body.count(old) == 1, body
    body = body.replace(old, new)
    return struct.pack(">I", len(body)) + body + record[4 + size :]


_TAGGED = _put(tags=("field", "birds"))


# Where a lone surrogate goes: (the JSON it replaces, the JSON it is written in).
_LONE_SURROGATES = {
    "an escape in the text": (b'"t"', b'"t\\ud800"'),
    "an escape in a tag": (b'"birds"', b'"bi\\udc00rds"'),
    "an escape in an update's value": (b'"x"', b'"\\udbff"'),
    "its bytes in the text": (b'"t"', b'"t\xed\xa0\x80"'),
}


@pytest.mark.parametrize("where", _LONE_SURROGATES)
def test_a_string_with_a_lone_surrogate_does_not_parse(where: str) -> None:
    """No device writes one (`encode` is strict UTF-8) and no reply can
    carry one: refused as any record that does not parse."""
    op = (Operation("u", UPDATE, FIRST, target="m", at=1.0, fields={"category": "x"})
          if "update" in where else _TAGGED)
    with pytest.raises(IntegrityError, match="operation record does not parse"):
        decode(_spliced(op, *_LONE_SURROGATES[where]))


def test_the_message_names_the_lone_surrogate() -> None:
    with pytest.raises(IntegrityError, match=r"a string holds a lone surrogate \(U\+D800\)"):
        decode(_spliced(_TAGGED, b'"t"', b'"\\ud800"'))


def test_a_record_in_another_encoding_does_not_parse() -> None:
    """`json.loads` takes UTF-16 bytes, and their lone surrogates with them."""
    body = json.dumps({"v": 1, "op": "o", "kind": "forget", "hlc": [3, 0, "d"],
                       "id": "m\ud800", "at": 3.0}, ensure_ascii=False
                      ).encode("utf-16-le", "surrogatepass")
    with pytest.raises(IntegrityError, match="operation record does not parse"):
        decode(struct.pack(">I", len(body)) + body)


@pytest.mark.parametrize(("escape", "text"), [
    (b"\\u0001", "\x01"),  # what `encode` writes for a control character
    (b"\\ud83d\\ude00", "\U0001F600"),  # a valid pair: one character
    (b"\\\\ud800", "\\ud800"),  # a backslash, then "ud800": six characters
], ids=["a control character", "a valid pair", "an escaped backslash"])
def test_other_escapes_still_decode(escape: bytes, text: str) -> None:
    op = decode(_spliced(_TAGGED, b'"t"', b'"' + escape + b'"'))
    assert op.memory is not None and op.memory.text == text
    assert op.memory.tags == ("field", "birds")


# A field of the wrong kind: (the JSON it replaces, the JSON it is written in).
_WRONG_KINDS = {
    "a number for the text": (b'"text":"t"', b'"text":5'),
    "null for a string": (b'"category":""', b'"category":null'),
    "a string for the tags": (b'"tags":["field","birds"]', b'"tags":"field"'),
    "a number among the tags": (b'"birds"', b'7'),
    "a list for the payload": (b'"payload":{}', b'"payload":[1]'),
    "a string for a number": (b'"importance":0.5', b'"importance":"high"'),
    "NaN for a time": (b'"expires_at":0.0', b'"expires_at":NaN'),
    "an int past a float for a time": (b'"expires_at":0.0', b'"expires_at":1' + b'0' * 400),
    "a list for an update's value": (b'"x"', b'["x"]'),
}


@pytest.mark.parametrize("what", list(_WRONG_KINDS))
def test_a_field_of_the_wrong_kind_does_not_parse(what: str) -> None:
    """Applied, `"text": 5` failed the keyword index at every start after."""
    op = (Operation("u", UPDATE, FIRST, target="m", at=1.0, fields={"category": "x"})
          if "update" in what else _TAGGED)
    with pytest.raises(IntegrityError, match="operation record does not parse"):
        decode(_spliced(op, *_WRONG_KINDS[what]))


@pytest.mark.parametrize("memory", [[1], "m", None])
def test_a_memory_that_is_not_an_object_does_not_parse(memory: object) -> None:
    body = json.dumps({"v": 1, "op": "o", "kind": "put", "hlc": [3, 0, "d"],
                       "memory": memory, "layer": "memories"}).encode()
    with pytest.raises(IntegrityError, match="operation record does not parse"):
        decode(struct.pack(">I", len(body)) + body)


def test_numbers_of_either_kind_and_unknown_update_fields_decode() -> None:
    """Another writer may write 1 for 1.0; an update's field that is no
    field of a memory is ignored where it is applied."""
    op = decode(_spliced(_TAGGED, b'"importance":0.5', b'"importance":1'))
    assert op.memory is not None and op.memory.importance == 1
    update = Operation("u", UPDATE, FIRST, target="m", at=1.0, fields={"colour": ["x"]})
    assert decode(encode(update)).fields == {"colour": ["x"]}


def test_a_snapshot_written_before_the_trash_loads_every_memory_live() -> None:
    """A snapshot body without the trash's columns (written before they
    existed) holds only live memories, and loads as such."""
    state = VaultState(DIM)
    for n in range(3):
        state.apply(_put(f"m{n}", Stamp(1, n, "a")))
    body = version_2(SnapshotBody(
        7, DIM, Stamp(1, 9, "a"), list(state.memories.memories()),
        np.stack([_vector(1)] * 3), frozenset({"gone"}), [],
        np.zeros((0, DIM), dtype=np.float32), frozenset(state.seen), state.stamps))
    (size,) = struct.unpack_from(">I", body)
    meta = json.loads(body[4 : 4 + size])
    for name in ("trashed_at", "trashed_by"):
        del meta["memories"][name]
    head = json.dumps(meta).encode()
    old = decode_body(struct.pack(">I", len(head)) + head + body[4 + size :])
    loaded = VaultState(DIM)
    loaded.restore_rows(old.memories, old.vectors, [], [],
                        set(old.tombstones), set(old.seen), old.stamps)
    assert sorted(m.id for m in loaded.memories.memories()) == ["m0", "m1", "m2"]
    assert len(loaded.trash) == 0 and loaded.tombstones == {"gone"}
