"""The daemon's cryptographic primitives: AEAD sealing, key derivation, and
a device's own key pairs (`device_keys.py`: Ed25519 and X25519).

Everything memvault writes to disk or sends to a remote is sealed with
`seal()` under a key that `derive_key()` gave for one purpose only. The
lowest floor: it imports nothing of memvault's.
"""

from __future__ import annotations

from memvaultd.crypto.aead import NONCE_SIZE, OVERHEAD, TAG_SIZE, open_sealed, seal
from memvaultd.crypto.kdf import (
    PURPOSE_LOG,
    PURPOSE_SNAPSHOT,
    Argon2Params,
    derive_key,
    passphrase_key,
)

__all__ = [
    "NONCE_SIZE",
    "OVERHEAD",
    "PURPOSE_LOG",
    "PURPOSE_SNAPSHOT",
    "TAG_SIZE",
    "Argon2Params",
    "derive_key",
    "open_sealed",
    "passphrase_key",
    "seal",
]
