"""Ids drawn from the OS, in blocks within one write: never repeated, not
across threads, not across a fork, not after a restored snapshot of the
process."""

from __future__ import annotations

import os
import re
import threading

from memvaultd.crypto import entropy
from memvaultd.crypto.aead import NONCE_SIZE, open_sealed, seal

KEY = bytes(range(32))


@entropy.drawing()
def test_values_have_the_asked_size_and_never_repeat() -> None:
    values = [entropy.random_bytes(NONCE_SIZE) for _ in range(20_000)]  # ~60 blocks
    assert {len(v) for v in values} == {NONCE_SIZE}
    assert len(set(values)) == len(values)
    assert len(entropy.random_bytes(10_000)) == 10_000  # larger than a block: straight from the OS


def test_ids_are_version_4_uuids() -> None:
    ids = [entropy.new_id() for _ in range(1_000)]
    assert all(re.fullmatch(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_threads_never_share_a_value() -> None:
    drawn: list[list[bytes]] = [[] for _ in range(4)]

    @entropy.drawing()
    def draw(out: list[bytes]) -> None:
        out.extend(entropy.random_bytes(16) for _ in range(2_000))

    threads = [threading.Thread(target=draw, args=(out,)) for out in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for out in drawn for value in out]
    assert len(set(every)) == len(every)


@entropy.drawing()
def test_a_forked_child_does_not_reuse_the_parents_block() -> None:
    entropy.random_bytes(NONCE_SIZE)  # the parent holds a block, partly used
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next value, to the parent
        try:
            os.write(write, entropy.random_bytes(16))
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 16
    assert child != entropy.random_bytes(16)


def test_seals_of_one_plaintext_differ_and_open() -> None:
    sealed = {seal(KEY, b"same text", aad=b"ctx") for _ in range(1_000)}
    assert len(sealed) == 1_000
    assert {open_sealed(KEY, s, aad=b"ctx") for s in sealed} == {b"same text"}


def test_a_write_draws_its_ids_in_blocks_and_keeps_none(monkeypatch) -> None:
    calls: list[int] = []
    real = os.urandom

    def counted(size: int) -> bytes:
        calls.append(size)
        return real(size)

    monkeypatch.setattr(entropy.os, "urandom", counted)
    with entropy.drawing():
        with entropy.drawing():  # a write within a write shares the block
            ids = [entropy.new_id() for _ in range(1_000)]
        assert entropy._local.block is not None
    assert len(set(ids)) == 1_000
    assert len(calls) == 4  # 16,000 bytes from 4 KiB blocks, not 1,000 calls
    assert entropy._local.block is None  # nothing kept for the next write
    entropy.new_id()
    entropy.new_id()
    assert calls[4:] == [16, 16]  # outside a write: each id its own draw


def test_a_restored_snapshot_of_the_process_repeats_no_id_or_nonce() -> None:
    """A virtual machine restored from a snapshot (or cloned) resumes with
    the memory it held then. What it held between writes must give the
    writes after the restore nothing the discarded run used: an id sent
    twice would be dropped by every other device as already seen."""
    with entropy.drawing():
        entropy.new_id()  # a finished write
    held = dict(vars(entropy._local))  # the snapshot

    def a_write() -> list[object]:
        with entropy.drawing():
            return [seal(KEY, b"a", aad=b"ctx")[:NONCE_SIZE], entropy.new_id(), entropy.new_id()]

    first = a_write()
    vars(entropy._local).clear()
    vars(entropy._local).update(held)  # restored
    again = a_write()
    assert not set(first) & set(again)
