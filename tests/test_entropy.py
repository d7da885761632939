"""Nonces and ids drawn from blocks of OS randomness: never repeated, not
across threads, not across a fork."""

from __future__ import annotations

import os
import re
import threading

from memvaultd.crypto import entropy
from memvaultd.crypto.aead import NONCE_SIZE, open_sealed, seal

KEY = bytes(range(32))


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

    def draw(out: list[bytes]) -> None:
        out.extend(entropy.random_bytes(16) for _ in range(2_000))

    threads = [threading.Thread(target=draw, args=(out,)) for out in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for out in drawn for value in out]
    assert len(set(every)) == len(every)


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



def test_a_restored_snapshot_of_the_process_repeats_no_nonce() -> None:
    """A virtual machine restored from a snapshot resumes with the blocks it
    held then: ids drawn after it repeat, nonces must not."""
    entropy.random_bytes(NONCE_SIZE)  # this thread holds a block, partly used
    held = (entropy._local.block, entropy._local.offset, entropy._local.generation)
    first = [seal(KEY, b"a", aad=b"ctx")[:NONCE_SIZE], entropy.new_id()]
    entropy._local.block, entropy._local.offset, entropy._local.generation = held  # restored
    again = [seal(KEY, b"b", aad=b"ctx")[:NONCE_SIZE], entropy.new_id()]
    assert again[1] == first[1], "the restore was not simulated"
    assert again[0] != first[0]
