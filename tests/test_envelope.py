"""The sealed objects of the remote: every alteration refused, sizes hidden."""

from __future__ import annotations

import os

import pytest

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import PUT, Operation
from memvaultd.sync.envelope import DESCRIPTION, SNAPSHOT, VERSION, Envelope, bucket, chain_context
from memvaultd.sync.version_body import pack_ops, unpack_ops

KEY, VAULT = os.urandom(32), os.urandom(16)
PARENT = os.urandom(32)


def _version(text: str = "a memory") -> bytes:
    import numpy as np

    op = Operation("op1", PUT, Stamp(1, 0, "dev"), memory=Memory(id="m1", text=text),
                   vector=np.ones(384, dtype=np.float32) / np.sqrt(384))
    return pack_ops([op])


def test_round_trip() -> None:
    envelope = Envelope(KEY, VAULT)
    body = _version()
    sealed = envelope.seal(VERSION, body, chain_context(7, PARENT))
    assert envelope.open(VERSION, sealed, chain_context(7, PARENT), name="v7") == body
    assert unpack_ops(body, "v7")[0].memory_id == "m1"


def test_every_flipped_byte_is_refused() -> None:
    envelope = Envelope(KEY, VAULT)
    sealed = envelope.seal(VERSION, b"x" * 100, chain_context(3, PARENT))
    for position in range(len(sealed)):
        forged = bytearray(sealed)
        forged[position] ^= 0x01
        with pytest.raises(IntegrityError, match="remote object v3"):
            envelope.open(VERSION, bytes(forged), chain_context(3, PARENT), name="v3")


@pytest.mark.parametrize("cut", [0, 5, 6, 40, 4095])
def test_truncation_is_refused(cut: int) -> None:
    envelope = Envelope(KEY, VAULT)
    sealed = envelope.seal(VERSION, b"body", chain_context(1, b""))
    with pytest.raises(IntegrityError):
        envelope.open(VERSION, sealed[:cut], chain_context(1, b""), name="v1")


def test_a_version_opens_only_at_its_own_place_after_its_own_parent() -> None:
    envelope = Envelope(KEY, VAULT)
    sealed = envelope.seal(VERSION, b"body", chain_context(5, PARENT))
    for context in (chain_context(6, PARENT), chain_context(5, os.urandom(32)),
                    chain_context(4, PARENT)):  # moved, re-parented, replayed
        with pytest.raises(IntegrityError):
            envelope.open(VERSION, sealed, context, name="v")


def test_another_vault_or_kind_is_refused() -> None:
    sealed = Envelope(KEY, VAULT).seal(VERSION, b"body", chain_context(1, b""))
    with pytest.raises(IntegrityError):
        Envelope(KEY, os.urandom(16)).open(VERSION, sealed, chain_context(1, b""), name="v1")
    with pytest.raises(IntegrityError):
        Envelope(os.urandom(32), VAULT).open(VERSION, sealed, chain_context(1, b""), name="v1")
    with pytest.raises(IntegrityError, match="not a memvault snapshot"):
        Envelope(KEY, VAULT).open(SNAPSHOT, sealed, chain_context(1, b""), name="s1")
    relabelled = sealed[:5] + bytes([DESCRIPTION]) + sealed[6:]
    with pytest.raises(IntegrityError):
        Envelope(KEY, VAULT).open(DESCRIPTION, relabelled, name="d")


def test_padding_hides_how_long_a_memory_is() -> None:
    envelope = Envelope(KEY, VAULT)
    sizes = {len(envelope.seal(VERSION, _version("x" * n), chain_context(1, b"")))
             for n in (1, 50, 400, 1500)}
    assert sizes == {4096}
    assert [bucket(n) for n in (1, 4096, 4097, 70_000, 1_048_577)] == [
        4096, 4096, 8192, 131072, 2 * 1048576]


def test_operations_that_run_past_the_body_are_refused() -> None:
    body = _version()
    with pytest.raises(IntegrityError, match="do not parse"):
        unpack_ops(body[:-10], "v1")
