"""Sealed, padded objects on the remote.

    object := magic "MVRO" | format:u8 | kind:u8 | nonce:12 | ciphertext | tag:16
    plain  := body_len:u32 BE | body | zero bytes up to the size bucket
    aad    := "memvault/remote" | format:u8 | kind:u8 | vault_id:16 | context

    kind 1, a version of the chain:   context = number:u64 | parent:32 (sha256 of
                                      version number-1's object; 32 zero bytes for 1)
    kind 2, a snapshot's manifest:    context = number:u64 | version hash:32 | sid:16
    kind 3, the vault's description:  context = ""
    kind 4, a snapshot's chunk:       context = number:u64 | version hash:32 | sid:16 |
                                                index:u32 | count:u32
    kind 5, a move to another chain:  context = ""
    kind 6, a device's view, on a witness: context = device id (`witness.py`)
    kind 7, a device's record:        context = device id (`devices.py`)
    kind 8, a key epoch's grant:      context = epoch:u32 (`epochs.py`)

A version on the remote is kind 1 followed by its device's signature
(`signatures.py`).

(`snapshots.py` has the snapshot kinds' bodies, `moves.py` the move's.)

Each kind has its own key (HKDF of the vault key, purpose "sync/<kind>/v1").
The associated data binds every object to its vault, its kind, its place in
the chain and its parent, so a swapped, replayed, re-labelled or re-parented
object fails to open. Padding hides a memory's length: objects are padded
to the next power of two from 4 KiB up to 1 MiB, then to a multiple of 1 MiB;
a version holding one new memory (~2 KiB of operation) is 4 KiB on the wire.
"""

from __future__ import annotations

import struct

from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import OVERHEAD, open_sealed, seal
from memvaultd.crypto.kdf import derive_key

MAGIC = b"MVRO"
FORMAT = 1
VERSION, SNAPSHOT, DESCRIPTION, SNAPSHOT_CHUNK, MOVE, WITNESS, DEVICE, EPOCH = range(1, 9)
_KIND_NAMES = {VERSION: "version", SNAPSHOT: "snapshot", DESCRIPTION: "description",
               SNAPSHOT_CHUNK: "snapshot-chunk", MOVE: "move", WITNESS: "witness",
               DEVICE: "device", EPOCH: "epoch"}
_HEADER = struct.Struct(">4sBB")
_MIN_BUCKET = 4096
_MIB = 1 << 20


# The envelope's bytes besides the body: header, nonce and tag, body length.
FIXED = _HEADER.size + OVERHEAD + 4


def bucket(size: int) -> int:
    """The padded size of an object whose unpadded size is `size`."""
    padded = _MIN_BUCKET
    while padded < size and padded < _MIB:
        padded *= 2
    if padded >= size:
        return padded
    return -(-size // _MIB) * _MIB


class Envelope:
    def __init__(self, vault_key: bytes, vault_id: bytes) -> None:
        self.vault_id = vault_id
        self._keys = {kind: derive_key(vault_key, purpose=f"sync/{name}/v1")
                      for kind, name in _KIND_NAMES.items()}

    def seal(self, kind: int, body: bytes, context: bytes = b"", *, reserve: int = 0) -> bytes:
        """`body` sealed, padded so that the object plus `reserve` bytes
        (a version's signature, `signatures.py`) fill a size bucket."""
        header = _HEADER.pack(MAGIC, FORMAT, kind)
        plain = struct.pack(">I", len(body)) + body
        plain += bytes(bucket(FIXED + len(body) + reserve) - FIXED - len(body) - reserve)
        return header + seal(self._keys[kind], plain, aad=self._aad(kind, context))

    def open(self, kind: int, data: bytes, context: bytes = b"", *, name: str) -> bytes:
        """The body of `data`, or IntegrityError naming the object."""
        if len(data) < FIXED:
            raise IntegrityError(f"remote object {name}: truncated ({len(data)} bytes)")
        magic, fmt, found = _HEADER.unpack_from(data)
        if magic != MAGIC or fmt != FORMAT or found != kind:
            raise IntegrityError(f"remote object {name}: not a memvault {_KIND_NAMES[kind]} "
                                 f"(format {fmt}, kind {found})")
        try:
            plain = open_sealed(self._keys[kind], data[_HEADER.size :],
                                aad=self._aad(kind, context))
        except IntegrityError as exc:
            raise IntegrityError(f"remote object {name}: does not authenticate (altered, "
                                 "swapped, replayed or of another vault)") from exc
        (size,) = struct.unpack_from(">I", plain)
        if size > len(plain) - 4 or any(plain[4 + size :]):
            raise IntegrityError(f"remote object {name}: bad padding")
        return plain[4 : 4 + size]

    def _aad(self, kind: int, context: bytes) -> bytes:
        return b"memvault/remote" + bytes([FORMAT, kind]) + self.vault_id + context


def chain_context(number: int, parent: bytes) -> bytes:
    return struct.pack(">Q", number) + (parent or bytes(32))
