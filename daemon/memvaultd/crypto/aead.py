"""AES-256-GCM sealing with a random 96-bit nonce per seal.

A sealed value is laid out as::

    nonce:12 | ciphertext:len(plaintext) | tag:16

Random nonces are safe here because one key seals far fewer than 2**32
values: NIST SP 800-38D caps random-nonce GCM at 2**32 invocations per key
(collision probability below 2**-32). The log key seals one value per memory
operation; at a sustained 1,000 operations a second a key would need 136 years
to get there.

Each nonce is drawn from the OS (getrandom(2)) at the moment of the seal,
never from a buffer in this process: a virtual machine restored from a
snapshot, or cloned, would replay a buffer's bytes, and a repeated GCM nonce
under one key reveals the XOR of two plaintexts and lets the authentication
key be solved for. The kernel reseeds its generator when it learns of the
restore (Linux 5.18+ on a hypervisor with a VM generation ID: QEMU/KVM,
Hyper-V, Firecracker); every seal after that is fresh. Measured by
`scripts/bench_seal.py` against a nonce from the per-thread block of
`entropy.py`: x0.6-1.0 alone, x0.1-1.8 beside a thread encoding JSON (the
interpreter lock's hand-overs make that side noisy), while AES-256-GCM-SIV
(nonce-misuse resistant) cost x2.6-3.3 alone and x1.5-3.3 beside it, and would
have needed a new format byte in every envelope (docs/format.md, "Nonces").

Callers bind the context (vault id, kind, format version, position) into the
associated data, so a sealed value opened anywhere else fails to authenticate.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memvault_base.errors import IntegrityError

__all__ = ["KEY_SIZE", "NONCE_SIZE", "OVERHEAD", "TAG_SIZE", "open_sealed", "seal"]

KEY_SIZE = 32
NONCE_SIZE = 12
TAG_SIZE = 16
OVERHEAD = NONCE_SIZE + TAG_SIZE  # 28 bytes added to every sealed value


def _cipher(key: bytes) -> AESGCM:
    if len(key) != KEY_SIZE:
        # A 16-byte key would silently give AES-128: refuse rather than downgrade.
        raise ValueError(f"AES-256-GCM needs a {KEY_SIZE}-byte key, got {len(key)} bytes")
    return AESGCM(key)


def seal(key: bytes, plaintext: bytes, *, aad: bytes) -> bytes:
    """Encrypt and authenticate `plaintext`, binding `aad`: nonce || ciphertext || tag."""
    nonce = os.urandom(NONCE_SIZE)
    return nonce + _cipher(key).encrypt(nonce, plaintext, aad)


def open_sealed(key: bytes, sealed: bytes, *, aad: bytes) -> bytes:
    """Authenticate and decrypt a value from `seal()`; IntegrityError if anything differs."""
    if len(sealed) < OVERHEAD:
        raise IntegrityError("sealed value is shorter than its nonce and tag: truncated")
    nonce, body = sealed[:NONCE_SIZE], sealed[NONCE_SIZE:]
    try:
        return _cipher(key).decrypt(nonce, body, aad)
    except InvalidTag:
        # Wrong key, wrong context or altered bytes all look the same to GCM;
        # the message names none of them so it leaks nothing about which.
        raise IntegrityError("sealed value failed to authenticate: tampered or corrupt") from None
