"""The passphrase-wrapped key file: round trip, and every alteration refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memvault_base.errors import IntegrityError, Locked
from memvaultd.crypto.kdf import Argon2Params
from memvaultd.storage.keyfile import (
    KEY_FILE_SIZE,
    MAX_MEMORY_KIB,
    MAX_PARALLELISM,
    MAX_TIME_COST,
    unwrap_key,
    wrap_key,
    write_key_file,
)

VAULT = bytes.fromhex("00112233445566778899aabbccddeeff")
KEY = bytes(range(100, 132))
CHEAP = Argon2Params(time_cost=1, memory_kib=8192, parallelism=1)


@pytest.fixture(scope="module")
def blob() -> bytes:
    return wrap_key(KEY, "correct horse", vault_id=VAULT, params=CHEAP)


def test_round_trip(blob: bytes) -> None:
    assert len(blob) == KEY_FILE_SIZE == 92
    assert blob.startswith(b"MVKEY\x01\x01")
    assert unwrap_key(blob, "correct horse", vault_id=VAULT) == KEY


def test_params_travel_in_the_file() -> None:
    params = Argon2Params(time_cost=2, memory_kib=9000, parallelism=2)
    blob = wrap_key(KEY, "pw", vault_id=VAULT, params=params)
    assert blob[7:16] == (2).to_bytes(4, "big") + (9000).to_bytes(4, "big") + b"\x02"
    assert unwrap_key(blob, "pw", vault_id=VAULT) == KEY


def test_salt_and_nonce_are_fresh() -> None:
    a = wrap_key(KEY, "pw", vault_id=VAULT, params=CHEAP)
    b = wrap_key(KEY, "pw", vault_id=VAULT, params=CHEAP)
    assert a[16:32] != b[16:32] and a[32:44] != b[32:44]


def test_key_is_not_in_the_file(blob: bytes) -> None:
    assert KEY not in blob


def test_wrong_passphrase_is_locked(blob: bytes) -> None:
    with pytest.raises(Locked, match="wrong passphrase for the key file"):
        unwrap_key(blob, "correct horsE", vault_id=VAULT)


def test_other_vault_is_refused(blob: bytes) -> None:
    with pytest.raises(Locked):
        unwrap_key(blob, "correct horse", vault_id=bytes(16))


def test_empty_passphrase_is_locked(blob: bytes) -> None:
    with pytest.raises(Locked):
        unwrap_key(blob, "", vault_id=VAULT)
    with pytest.raises(Locked):
        wrap_key(KEY, "", vault_id=VAULT, params=CHEAP)


def test_every_flipped_byte_is_refused(blob: bytes) -> None:
    # Header bytes that no longer parse give IntegrityError; salt, parameters
    # still in range, nonce, ciphertext and tag give Locked: GCM cannot tell
    # them from a wrong passphrase.
    outcomes: dict[type[Exception], int] = {}
    for i in range(len(blob)):
        altered = bytearray(blob)
        altered[i] ^= 0xFF
        with pytest.raises((Locked, IntegrityError)) as caught:
            unwrap_key(bytes(altered), "correct horse", vault_id=VAULT)
        outcomes[caught.type] = outcomes.get(caught.type, 0) + 1
    assert outcomes[IntegrityError] >= 7  # magic, version, kdf at least
    assert outcomes[Locked] >= 16 + 12 + 32 + 16


@pytest.mark.parametrize("cut", [0, 5, 31, 32, 44, 76, 91])
def test_truncation_is_refused(blob: bytes, cut: int) -> None:
    with pytest.raises(IntegrityError, match="damaged"):
        unwrap_key(blob[:cut], "correct horse", vault_id=VAULT)


def test_extension_is_refused(blob: bytes) -> None:
    with pytest.raises(IntegrityError):
        unwrap_key(blob + b"\0", "correct horse", vault_id=VAULT)


def test_hostile_parameters_are_refused_before_hashing(blob: bytes) -> None:
    # 2**32-1 KiB of Argon2 memory would exhaust the machine before failing.
    altered = blob[:11] + b"\xff\xff\xff\xff" + blob[15:]
    with pytest.raises(IntegrityError, match="out of range"):
        unwrap_key(altered, "correct horse", vault_id=VAULT)


@pytest.mark.parametrize(("offset", "size", "value"), [
    (7, 4, MAX_TIME_COST + 1), (11, 4, MAX_MEMORY_KIB + 1), (15, 1, MAX_PARALLELISM + 1)])
def test_parameters_over_the_ceilings_are_refused_before_hashing(
        blob: bytes, offset: int, size: int, value: int) -> None:
    # The ceilings are 4x what this release writes (t=3, 64 MiB, 4 lanes):
    # a remote's keys/recovery cannot cost a joining device more.
    assert (MAX_TIME_COST, MAX_MEMORY_KIB, MAX_PARALLELISM) == (12, 256 * 1024, 16)
    altered = blob[:offset] + value.to_bytes(size, "big") + blob[offset + size:]
    with pytest.raises(IntegrityError, match="out of range"):
        unwrap_key(altered, "correct horse", vault_id=VAULT)
    with pytest.raises(ValueError, match="must be"):
        wrap_key(KEY, "pw", vault_id=VAULT, params=Argon2Params(
            *(value if place == offset else default for place, default in
              ((7, 3), (11, 65536), (15, 4)))))


def test_unknown_version_is_refused(blob: bytes) -> None:
    with pytest.raises(IntegrityError, match="version 2"):
        unwrap_key(blob[:5] + b"\x02" + blob[6:], "correct horse", vault_id=VAULT)


def test_write_key_file_is_private_and_atomic(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "vault.key"
    old_umask = os.umask(0)
    try:
        write_key_file(path, blob)
    finally:
        os.umask(old_umask)
    assert path.read_bytes() == blob
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["vault.key"]


def test_write_key_file_replaces_whole(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "vault.key"
    path.write_bytes(b"x" * 500)
    path.chmod(0o644)
    write_key_file(path, blob)
    assert path.read_bytes() == blob
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
