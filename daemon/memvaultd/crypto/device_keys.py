"""A device's own key pairs, derived from one 32-byte device secret.

    signing key   := Ed25519 private key, seed = HKDF(secret, "device/sign/v1")
    receiving key := X25519 private key, HKDF(secret, "device/receive/v1")

One secret keeps the storage of a device's keys the storage of one 32-byte
key, exactly like the vault key's (`storage/device_secret.py`); the two
purposes keep the signing and the key-agreement keys independent. The
signing key signs each version the device pushes (`sync/signatures.py`);
the receiving key is what a new vault key will be wrapped to.
"""

from __future__ import annotations

import secrets

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from memvaultd.crypto.kdf import derive_key

__all__ = ["PUBLIC_SIZE", "SECRET_SIZE", "SIGNATURE_SIZE", "DeviceKeys", "verify"]

SECRET_SIZE = 32
PUBLIC_SIZE = 32
SIGNATURE_SIZE = 64


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

    def __repr__(self) -> str:
        return f"DeviceKeys(sign_public={self.sign_public.hex()[:16]}...)"


def verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """Whether `signature` is the Ed25519 signature of `message` under `public`."""
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True
