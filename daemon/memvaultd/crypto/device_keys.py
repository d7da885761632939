"""A device's own key pairs, derived from one 32-byte device secret.

    signing key   := Ed25519 private key, seed = HKDF(secret, "device/sign/v1")
    receiving key := X25519 private key, HKDF(secret, "device/receive/v1")

One secret keeps the storage of a device's keys the storage of one 32-byte
key, exactly like the vault key's (`storage/device_secret.py`); the two
purposes keep the signing and the key-agreement keys independent. The
signing key signs each version the device pushes (`sync/signatures.py`);
the receiving key is what a new vault key is wrapped to (`wrap_to`, `unwrap`:
a key epoch, `sync/epochs.py`).

    wrapped := HPKE base mode (RFC 9180), DHKEM(X25519, HKDF-SHA256),
               HKDF-SHA256, AES-256-GCM: enc:32 | ciphertext | tag:16

`cryptography`'s HPKE (47.0) does the key agreement, the key schedule and
the seal; the caller's `info` binds what the key is for and to whom.
"""

from __future__ import annotations

import secrets

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from memvault_base.errors import IntegrityError
from memvaultd.crypto.kdf import derive_key

__all__ = ["PUBLIC_SIZE", "SECRET_SIZE", "SIGNATURE_SIZE", "WRAPPED_OVERHEAD", "DeviceKeys",
           "verify", "wrap_to"]

SECRET_SIZE = 32
PUBLIC_SIZE = 32
SIGNATURE_SIZE = 64
_SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_256_GCM)
WRAPPED_OVERHEAD = 32 + 16  # the encapsulated key and the tag


class DeviceKeys:
    """This device's signing and receiving keys; `repr` shows no secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) != SECRET_SIZE:
            raise ValueError(f"a device secret is {SECRET_SIZE} bytes, not {len(secret)}")
        self.secret = secret
        self._signing = Ed25519PrivateKey.from_private_bytes(
            derive_key(secret, purpose="device/sign/v1"))
        self._receiving = X25519PrivateKey.from_private_bytes(
            derive_key(secret, purpose="device/receive/v1"))
        self.sign_public = self._signing.public_key().public_bytes_raw()
        self.receive_public = self._receiving.public_key().public_bytes_raw()

    @classmethod
    def new(cls) -> DeviceKeys:
        return cls(secrets.token_bytes(SECRET_SIZE))

    def sign(self, message: bytes) -> bytes:
        return self._signing.sign(message)

    def unwrap(self, wrapped: bytes, *, info: bytes) -> bytes:
        """What `wrap_to(self.receive_public, ..., info=info)` sealed; IntegrityError
        if it was wrapped to another device, for another `info`, or altered."""
        try:
            return _SUITE.decrypt(wrapped, self._receiving, info=info)
        except (InvalidTag, ValueError):
            raise IntegrityError("wrapped key does not open with this device's key: "
                                 "wrapped to another device, or altered") from None

    def __repr__(self) -> str:
        return f"DeviceKeys(sign_public={self.sign_public.hex()[:16]}...)"


def verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """Whether `signature` is the Ed25519 signature of `message` under `public`."""
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def wrap_to(public: bytes, secret: bytes, *, info: bytes) -> bytes:
    """`secret` sealed to the device whose receiving key is `public`."""
    return _SUITE.encrypt(secret, X25519PublicKey.from_public_bytes(public), info=info)
