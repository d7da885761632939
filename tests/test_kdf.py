"""Key derivation: HKDF subkeys kept apart by purpose, Argon2id passphrase keys."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from argon2.low_level import Type, hash_secret

from memvaultd.crypto.kdf import (
    PURPOSE_LOG,
    PURPOSE_SNAPSHOT,
    Argon2Params,
    derive_key,
    passphrase_key,
)

MASTER = bytes(range(32))
CHEAP = Argon2Params(time_cost=1, memory_kib=8192, parallelism=1)


def hkdf_reference(ikm: bytes, info: bytes, size: int) -> bytes:
    """RFC 5869 written out with hmac, salt absent (= HashLen zero bytes)."""
    prk = hmac.new(b"\0" * 32, ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < size:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out, counter = out + block, counter + 1
    return out[:size]


@pytest.mark.parametrize("size", [16, 32, 64])
def test_derive_key_is_hkdf_sha256_with_memvault_info(size: int) -> None:
    expected = hkdf_reference(MASTER, b"memvault/log/v1", size)
    assert derive_key(MASTER, purpose=PURPOSE_LOG, size=size) == expected


def test_purposes_give_independent_keys() -> None:
    keys = {derive_key(MASTER, purpose=p) for p in (PURPOSE_LOG, PURPOSE_SNAPSHOT, "sync/v1")}
    assert len(keys) == 3
    assert MASTER not in keys
    assert derive_key(MASTER, purpose=PURPOSE_LOG) == derive_key(MASTER, purpose=PURPOSE_LOG)


def test_masters_give_independent_keys() -> None:
    other = bytes(32)
    assert derive_key(MASTER, purpose=PURPOSE_LOG) != derive_key(other, purpose=PURPOSE_LOG)


def test_empty_purpose_is_refused() -> None:
    with pytest.raises(ValueError):
        derive_key(MASTER, purpose="")


def test_default_argon2_params() -> None:
    assert Argon2Params() == Argon2Params(time_cost=3, memory_kib=65536, parallelism=4)


def test_passphrase_key_is_deterministic_and_32_bytes() -> None:
    salt = b"s" * 16
    key = passphrase_key("correct horse", salt, CHEAP)
    assert len(key) == 32
    assert key == passphrase_key("correct horse", salt, CHEAP)


def test_passphrase_key_depends_on_every_input() -> None:
    salt = b"s" * 16
    base = passphrase_key("correct horse", salt, CHEAP)
    assert base != passphrase_key("correct horsf", salt, CHEAP)
    assert base != passphrase_key("correct horse", b"t" * 16, CHEAP)
    assert base != passphrase_key("correct horse", salt, Argon2Params(2, 8192, 1))
    assert base != passphrase_key("correct horse", salt, Argon2Params(1, 8200, 1))
    assert base != passphrase_key("correct horse", salt, Argon2Params(1, 8192, 2))


def test_passphrase_key_is_argon2id() -> None:
    # The encoded form names the variant; its hash field is the raw key.
    salt = b"0123456789abcdef"
    encoded = hash_secret(
        b"pw", salt, time_cost=1, memory_cost=8192, parallelism=1, hash_len=32, type=Type.ID
    )
    assert encoded.startswith(b"$argon2id$v=19$m=8192,t=1,p=1$")
    raw_b64 = base64.b64encode(passphrase_key("pw", salt, CHEAP)).rstrip(b"=")
    assert encoded.endswith(b"$" + raw_b64)
