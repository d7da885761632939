"""The passphrase-wrapped vault key, for machines without a usable OS keyring.

A key file is 92 bytes::

    magic "MVKEY":5 | version:u8 | kdf:u8 | time_cost:u32 | memory_kib:u32 |
    parallelism:u8 | salt:16 | nonce:12 | wrapped vault key:32 | tag:16

All integers are big-endian. ``kdf`` 1 is Argon2id; its parameters travel in
the file so a later release can raise the defaults and still open old files.
The first 32 bytes (magic to salt) are the header. The vault key is sealed
with AES-256-GCM under ``passphrase_key(passphrase, salt, params)`` with::

    AAD = "memvault/keyfile" | header:32 | vault_id:16

so a key file moved to another vault, or whose parameters were edited, does
not open. A wrong passphrase and an altered nonce, key or tag are the same
event to GCM, so both raise `Locked`; an unreadable header raises
`IntegrityError`.

The daemon keeps the passphrase's Argon2id key, with its salt and
parameters (`KeyWrapping`), from the unlock: `join` wraps the joined vault's
key under the same passphrase with it, so a passphrase typed at the prompt
is never asked for again and no passphrase is held. That key file has the
salt and parameters of the one it replaces, a fresh nonce, and the joined
vault's id in its AAD.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from memvault_base.durable import replace_file
from memvault_base.errors import IntegrityError, Locked
from memvaultd.crypto.aead import KEY_SIZE, OVERHEAD, open_sealed, seal
from memvaultd.crypto.kdf import Argon2Params, passphrase_key

__all__ = ["KEY_FILE_SIZE", "KeyWrapping", "open_key_file", "unwrap_key", "wrap_key",
           "write_key_file"]

MAGIC = b"MVKEY"
VERSION = 1
KDF_ARGON2ID = 1
SALT_SIZE = 16  # RFC 9106 recommends 128-bit salts
_HEADER = struct.Struct(">5sBBIIB16s")
_AAD_LABEL = b"memvault/keyfile"
KEY_FILE_SIZE = _HEADER.size + OVERHEAD + KEY_SIZE  # 32 + 28 + 32 = 92

# Bounds on parameters read from a file, checked before the KDF runs: a
# damaged or hostile file (the recovery key file comes from the remote,
# before anything can authenticate) must not make the unlock allocate
# gigabytes or run for minutes. This release writes t=3, 64 MiB, 4 lanes
# (`Argon2Params`); each ceiling is 4x that, room for a later release to
# raise its defaults and still be read by this one: at most 256 MiB and
# ~1.5 s (16x the work of 0.09 s) on a 2-core machine.
MAX_MEMORY_KIB = 4 * 65536
MAX_TIME_COST = 4 * 3
MAX_PARALLELISM = 4 * 4

WRONG_PASSPHRASE = (
    "wrong passphrase for the key file, or the key file is damaged or belongs to another vault"
)


def _header(params: Argon2Params, salt: bytes) -> bytes:
    return _HEADER.pack(
        MAGIC,
        VERSION,
        KDF_ARGON2ID,
        params.time_cost,
        params.memory_kib,
        params.parallelism,
        salt,
    )


def _aad(header: bytes, vault_id: bytes) -> bytes:
    return _AAD_LABEL + header + vault_id


def _check_params(params: Argon2Params) -> None:
    if not 1 <= params.time_cost <= MAX_TIME_COST:
        raise ValueError(f"time_cost must be 1..{MAX_TIME_COST}")
    if not 1 <= params.parallelism <= MAX_PARALLELISM:
        raise ValueError(f"parallelism must be 1..{MAX_PARALLELISM}")
    # Argon2 needs at least 8 KiB per lane.
    if not 8 * params.parallelism <= params.memory_kib <= MAX_MEMORY_KIB:
        raise ValueError(f"memory_kib must be {8 * params.parallelism}..{MAX_MEMORY_KIB}")


@dataclass(frozen=True)
class KeyWrapping:
    """A passphrase's Argon2id key and the salt and parameters it was derived
    with: seals any vault key as that passphrase's key file would."""

    params: Argon2Params
    salt: bytes
    key: bytes = field(repr=False)  # as secret as the passphrase, for this salt

    @classmethod
    def new(cls, passphrase: str, params: Argon2Params) -> KeyWrapping:
        """A fresh salt, and the passphrase's key under it (one Argon2id run)."""
        if not passphrase:
            raise Locked("the passphrase is empty: choose a non-empty passphrase")
        _check_params(params)
        salt = os.urandom(SALT_SIZE)
        return cls(params, salt, passphrase_key(passphrase, salt, params))

    def wrap(self, vault_key: bytes, vault_id: bytes) -> bytes:
        """The key file bytes holding `vault_key` of vault `vault_id`."""
        if len(vault_key) != KEY_SIZE:
            raise ValueError(f"a vault key is {KEY_SIZE} bytes, got {len(vault_key)}")
        header = _header(self.params, self.salt)
        return header + seal(self.key, vault_key, aad=_aad(header, vault_id))

    def unwrap(self, blob: bytes, vault_id: bytes) -> bytes:
        """The key inside `blob`, a key file this wrapping sealed (same salt
        and parameters: no Argon2id run); Locked if it does not open."""
        params, salt = _parse_header(blob)
        if (params, salt) != (self.params, self.salt):
            raise Locked(WRONG_PASSPHRASE)
        try:
            return open_sealed(self.key, blob[_HEADER.size :],
                               aad=_aad(blob[: _HEADER.size], vault_id))
        except IntegrityError:
            raise Locked(WRONG_PASSPHRASE) from None


def wrap_key(
    vault_key: bytes,
    passphrase: str,
    *,
    vault_id: bytes,
    params: Argon2Params = Argon2Params(),  # noqa: B008 -- frozen dataclass, safe to share
) -> bytes:
    """The key file bytes holding `vault_key` sealed under `passphrase`."""
    if len(vault_key) != KEY_SIZE:
        raise ValueError(f"a vault key is {KEY_SIZE} bytes, got {len(vault_key)}")
    return KeyWrapping.new(passphrase, params).wrap(vault_key, vault_id)


def _parse_header(blob: bytes) -> tuple[Argon2Params, bytes]:
    if len(blob) != KEY_FILE_SIZE:
        raise IntegrityError(
            f"the key file is damaged: {len(blob)} bytes where {KEY_FILE_SIZE} are expected"
        )
    magic, version, kdf, time_cost, memory_kib, parallelism, salt = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise IntegrityError("the file is not a memvault key file (bad magic)")
    if version != VERSION or kdf != KDF_ARGON2ID:
        raise IntegrityError(
            f"the key file has format version {version}, KDF {kdf}: "
            f"this release reads version {VERSION}, KDF {KDF_ARGON2ID} (Argon2id)"
        )
    params = Argon2Params(time_cost=time_cost, memory_kib=memory_kib, parallelism=parallelism)
    try:
        _check_params(params)
    except ValueError as err:
        raise IntegrityError(
            f"the key file is damaged: KDF parameters out of range ({err})"
        ) from None
    return params, salt


def unwrap_key(blob: bytes, passphrase: str, *, vault_id: bytes) -> bytes:
    """The vault key inside key file `blob`; Locked on a wrong passphrase."""
    return open_key_file(blob, passphrase, vault_id=vault_id)[0]


def open_key_file(blob: bytes, passphrase: str, *, vault_id: bytes
                  ) -> tuple[bytes, KeyWrapping]:
    """The vault key inside key file `blob`, and the wrapping that sealed it;
    Locked on a wrong passphrase."""
    if not passphrase:
        raise Locked("the passphrase is empty: provide the vault's passphrase")
    params, salt = _parse_header(blob)
    header = blob[: _HEADER.size]
    wrapping = KeyWrapping(params, salt, passphrase_key(passphrase, salt, params))
    try:
        key = open_sealed(wrapping.key, blob[_HEADER.size :], aad=_aad(header, vault_id))
    except IntegrityError:
        raise Locked(WRONG_PASSPHRASE) from None
    return key, wrapping


def write_key_file(path: Path, blob: bytes) -> None:
    """Write `blob` to `path` atomically: a 0600 temporary file, fsync, rename, fsync dir.

    After a crash the path holds either the old file or the whole new one.
    """
    replace_file(path, blob)
