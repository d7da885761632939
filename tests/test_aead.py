"""AES-256-GCM sealing: round trips, and every alteration refused."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import NONCE_SIZE, OVERHEAD, TAG_SIZE, open_sealed, seal

KEY = bytes(range(32))
AAD = b"memvault/test|context"


def test_layout_sizes() -> None:
    assert (NONCE_SIZE, TAG_SIZE, OVERHEAD) == (12, 16, 28)
    assert len(seal(KEY, b"hello", aad=AAD)) == 5 + OVERHEAD


@given(plaintext=st.binary(max_size=4096), aad=st.binary(max_size=64))
def test_round_trip(plaintext: bytes, aad: bytes) -> None:
    assert open_sealed(KEY, seal(KEY, plaintext, aad=aad), aad=aad) == plaintext


def test_nonce_is_fresh_per_seal() -> None:
    nonces = {seal(KEY, b"same", aad=AAD)[:NONCE_SIZE] for _ in range(1000)}
    assert len(nonces) == 1000


def test_every_flipped_byte_is_refused() -> None:
    sealed = seal(KEY, b"a small secret memory", aad=AAD)
    for i in range(len(sealed)):
        altered = bytearray(sealed)
        altered[i] ^= 0x01
        with pytest.raises(IntegrityError):
            open_sealed(KEY, bytes(altered), aad=AAD)


@pytest.mark.parametrize("cut", [0, 1, 11, 12, 27, -1, -16])
def test_truncation_is_refused(cut: int) -> None:
    sealed = seal(KEY, b"a small secret memory", aad=AAD)
    with pytest.raises(IntegrityError):
        open_sealed(KEY, sealed[:cut], aad=AAD)


def test_wrong_context_or_key_is_refused() -> None:
    sealed = seal(KEY, b"secret", aad=AAD)
    with pytest.raises(IntegrityError):
        open_sealed(KEY, sealed, aad=AAD + b"x")
    with pytest.raises(IntegrityError):
        open_sealed(os.urandom(32), sealed, aad=AAD)


def test_error_message_names_nothing_secret() -> None:
    sealed = seal(KEY, b"the plaintext", aad=AAD)
    with pytest.raises(IntegrityError) as caught:
        open_sealed(KEY, sealed, aad=b"other")
    message = str(caught.value)
    for secret in (KEY.hex(), "the plaintext", AAD.decode(), "other"):
        assert secret not in message
    assert caught.value.__cause__ is None


@pytest.mark.parametrize("size", [0, 16, 24, 31, 33])
def test_only_256_bit_keys(size: int) -> None:
    with pytest.raises(ValueError, match="32-byte key"):
        seal(bytes(size), b"x", aad=b"")
