"""Merge convergence: devices that applied the same operations agree, in any
order the chain can deliver them (each device's own order kept, and a memory
put before anything that refers to it)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import (
    ACCESS,
    FORGET,
    PUT,
    REINFORCE,
    UPDATE,
    Operation,
    decode,
    encode,
)
from memvaultd.vault.state import VaultState

from .reference_index import ranked

DIM = 4
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
        kind = draw(st.sampled_from([PUT, PUT, UPDATE, UPDATE, REINFORCE, FORGET])
                    if alive else st.just(PUT))
        op_id = f"op{n}"
        if kind == PUT:
            memory_id = f"m{n}"
            memory = Memory(id=memory_id, text=f"text {n}", category=f"c{n % 3}",
                            created_at=float(n), last_reinforced_at=float(n))
            ops.append(Operation(op_id, PUT, stamp, memory=memory, vector=_vector(n)))
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
            q[0].kind == PUT or q[0].target in created)]
        device = rng.choice(ready)
        op = queues[device].pop(0)
        if op.kind == PUT:
            assert op.memory is not None
            created.add(op.memory.id)
        order.append(op)
    return order


def _snapshot(state: VaultState) -> dict[str, tuple[object, ...]]:
    out: dict[str, tuple[object, ...]] = {}
    for memory in state.memories.memories():
        vector = state.memories.index.vector(memory.id)
        assert vector is not None
        out[memory.id] = (memory, tuple(np.round(vector, 6)))
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
