"""`init`'s puts, cut at once and made a chunk at a time (`genesis.py`).

What a joining device must get: a put of every memory as it stood at the
cut, in the cut's order, each stamped before any write that came after the
cut (so that write's fields win over the put's), each with its own vector
and layer. The end-to-end check, writes landing during a real `init`, is
`test_sync.py::test_writes_during_init_land_on_every_device`.
"""

from __future__ import annotations

import numpy as np

from memvaultd.model.hlc import Clock
from memvaultd.model.memory import Memory
from memvaultd.model.operations import MEMORIES, PUT, TRASH, TURNS, UPDATE, Operation
from memvaultd.vault.genesis import PendingPuts
from memvaultd.vault.state import VaultState

DIM = 8


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _state(clock: Clock, memories: int, turns: int) -> VaultState:
    state = VaultState(DIM)
    for i in range(memories + turns):
        layer = MEMORIES if i < memories else TURNS
        state.apply(Operation(f"put{i}", PUT, clock.now(), layer=layer,
                              memory=Memory(id=f"m{i}", text=f"note {i}"), vector=_vector(i)))
    return state


def test_a_reserved_block_is_consecutive_and_the_clock_moves_past_it() -> None:
    clock = Clock("dev", wall_ms=2**50)  # a wall clock behind: the counter carries the order
    before = clock.now()
    first = clock.reserve(1000)
    assert (first.wall_ms, first.counter) == (before.wall_ms, before.counter + 1)
    after = clock.now()
    assert (after.wall_ms, after.counter) == (first.wall_ms, first.counter + 1000)
    assert clock.reserve(0) > after  # an empty block still moves the clock on


def test_puts_come_in_order_with_their_vectors_layers_and_stamps() -> None:
    clock = Clock("dev")
    state = _state(clock, memories=7, turns=3)
    pending = PendingPuts.cut(state.layers, clock)
    assert len(pending) == 10
    puts = pending.next(4) + pending.next(100)
    assert not pending and pending.next(4) == []
    assert [op.memory_id for op in puts] == [f"m{i}" for i in range(10)]
    assert [op.layer for op in puts] == [MEMORIES] * 7 + [TURNS] * 3
    assert all(op.kind == PUT for op in puts)
    for i, op in enumerate(puts):
        assert op.vector is not None and np.array_equal(op.vector, _vector(i))
    stamps = [op.stamp for op in puts]
    assert stamps == sorted(stamps) and len(set(stamps)) == 10
    assert len({op.op_id for op in puts}) == 10


def test_a_put_taken_ahead_is_not_made_again() -> None:
    clock = Clock("dev")
    pending = PendingPuts.cut(_state(clock, memories=6, turns=0).layers, clock)
    ahead = pending.take(["m4", "nobody", "m1", "m4"])
    assert [op.memory_id for op in ahead] == ["m4", "m1"]
    assert [op.memory_id for op in pending.next(100)] == ["m0", "m2", "m3", "m5"]


def test_a_write_after_the_cut_outranks_the_put_and_leaves_it_as_cut() -> None:
    """The put holds the memory as it was at the cut, and a stamp drawn
    before the write's: applied in either order, the write's fields win."""
    clock = Clock("dev")
    state = _state(clock, memories=3, turns=0)
    pending = PendingPuts.cut(state.layers, clock)
    update = Operation("u", UPDATE, clock.now(), target="m2", at=1.0,
                       fields={"category": "edited after the cut"})
    state.apply(update)
    (put,) = pending.take(["m2"])
    assert put.memory is not None and put.memory.category == ""
    assert put.stamp < update.stamp
    other = VaultState(DIM)
    other.apply(put)
    other.apply(update)
    got = other.memories.get("m2")
    assert got is not None and got.category == "edited after the cut"


def test_nothing_pending_is_empty() -> None:
    pending = PendingPuts()
    assert not pending and pending.take(["m0"]) == [] and pending.next(10) == []


def test_a_put_carries_the_newest_change_held_so_an_older_restatement_loses() -> None:
    """A re-push restates every memory: a device that trashed a memory after
    another device last changed it keeps it trashed, whichever put arrives
    last (a put stamped at the time it is made would let the later re-push
    win and bring the forgotten memory back)."""
    clock_a, clock_b = Clock("dev-a"), Clock("dev-b")
    a, b = VaultState(DIM), VaultState(DIM)
    for i in range(2):
        put = Operation(f"put{i}", PUT, clock_a.now(), memory=Memory(id=f"m{i}", text=f"n {i}"),
                        vector=_vector(i))
        a.apply(put)
        b.apply(put)
        clock_b.observe(put.stamp)
    trash = Operation("t", TRASH, clock_a.now(), target="m1", at=2.0, by="cli")
    a.apply(trash)
    for _ in range(3):
        clock_b.now()  # B's clock runs on, as it would by the time it re-pushes
    puts_a = PendingPuts.cut(a.layers, clock_a, a.stamps).next(100)
    puts_b = PendingPuts.cut(b.layers, clock_b, b.stamps).next(100)
    for first, second in ((puts_a, puts_b), (puts_b, puts_a)):
        fresh = VaultState(DIM)
        for op in first + second:
            fresh.apply(op)
        assert fresh.memories.get("m1") is None and fresh.trash.get("m1") is not None
        assert fresh.memories.get("m0") is not None
