"""Versions signed by the device that pushed them.

    signed version := sealed:N (envelope kind 1) | signer:8 | signature:64
    signer         := the pushing device's id (16 hex digits, as 8 bytes)
    signature      := Ed25519(signer's signing key, message)
    message        := "memvault/version/v1" | vault_id:16 | number:u64 |
                      sha256(sealed):32

The sealed part already binds the version's number and parent in its
associated data, so signing its hash with the number binds the whole chain
context. The signature sits outside the seal so that it is checked before
the seal is opened: a version that no registered device signed is refused
and passed over (a token-only writer's forgery: `Refused`), while a version
that a registered device signed and that does not open on this device's
chain is a fork or damage, and stops sync as before. The parent hash of the
next version is sha256 of the whole signed version, refused or not, so
every device that refuses the same object links past it the same way.

Versions of an earlier release carry no signature: one that opens is taken
only while the reader has met no signed version on its chain
(`open_version`'s `unsigned_ok`; `HighWater.signed`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable

from memvault_base.errors import IntegrityError
from memvaultd.crypto.device_keys import SIGNATURE_SIZE, DeviceKeys, verify
from memvaultd.sync.envelope import VERSION, Envelope, chain_context

__all__ = ["TRAILER", "Refused", "checked", "message", "open_version", "sealed_part", "sign",
           "split"]

_LABEL = b"memvault/version/v1"
_SIGNER = 8
TRAILER = _SIGNER + SIGNATURE_SIZE


class Refused(Exception):
    """A version no registered device signed: passed over, never applied."""


def message(vault_id: bytes, number: int, sealed: bytes) -> bytes:
    return _LABEL + vault_id + struct.pack(">Q", number) + hashlib.sha256(sealed).digest()


def sign(keys: DeviceKeys, device_id: str, vault_id: bytes, number: int, sealed: bytes
         ) -> bytes:
    """`sealed`, version `number`, as this device pushes it."""
    signer = bytes.fromhex(device_id)
    if len(signer) != _SIGNER:
        raise ValueError(f"a device id is {_SIGNER} bytes, not {len(signer)}")
    return sealed + signer + keys.sign(message(vault_id, number, sealed))


def split(blob: bytes) -> tuple[bytes, str, bytes]:
    """(sealed part, signer's device id, signature) of a signed version."""
    if len(blob) <= TRAILER:
        raise Refused(f"{len(blob)} bytes: too short to carry a signature")
    sealed, signer = blob[:-TRAILER], blob[-TRAILER:-SIGNATURE_SIZE]
    return sealed, signer.hex(), blob[-SIGNATURE_SIZE:]


def sealed_part(blob: bytes) -> bytes:
    """The sealed part of a signed version, unchecked (readers that open
    it anyway: an object that is not one fails to open)."""
    return blob[:-TRAILER] if len(blob) > TRAILER else blob


def checked(blob: bytes, vault_id: bytes, number: int,
            key_of: Callable[[str], bytes | None]) -> tuple[bytes, str]:
    """(sealed part, signer) of version `number` if a registered device
    (`key_of`: its signing key, or None) signed it; else Refused."""
    sealed, signer, signature = split(blob)
    public = key_of(signer)
    if public is None:
        raise Refused(f"signed as device {signer}, which is not registered in this vault")
    if not verify(public, signature, message(vault_id, number, sealed)):
        raise Refused(f"the signature of device {signer} does not verify")
    return sealed, signer


def open_version(envelope: Envelope, blob: bytes, number: int, parent: bytes,
                 key_of: Callable[[str], bytes | None], *, unsigned_ok: bool
                 ) -> tuple[bytes, bool]:
    """(body, whether signed) of version `number` on `parent`. Refused if
    no registered device signed it (unless, while `unsigned_ok`, it is an
    earlier release's unsigned version that opens); IntegrityError if one
    signed it and it does not open there."""
    context, name = chain_context(number, parent), f"version {number}"
    try:
        sealed, _ = checked(blob, envelope.vault_id, number, key_of)
    except Refused:
        if not unsigned_ok:
            raise
        try:
            return envelope.open(VERSION, blob, context, name=name), False
        except IntegrityError:
            raise Refused("unsigned, and it does not open under the vault key") from None
    return envelope.open(VERSION, sealed, context, name=name), True
