"""Sealed, padded objects on the remote.

    object := magic "MVRO" | 1 | kind:u8 | nonce:12 | ciphertext | tag:16       (epoch 0)
            | magic "MVRO" | 2 | kind:u8 | epoch:u32 | nonce:12 | ciphertext | tag:16
    plain  := body_len:u32 BE | body | zero bytes up to the size bucket
    aad    := "memvault/remote" | format:u8 | kind:u8 | vault_id:16 | context      (format 1)
            | "memvault/remote" | 2 | kind:u8 | epoch:u32 | vault_id:16 | context

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

Each kind has its own key (HKDF of the key epoch's key, purpose
"sync/<kind>/v1"). An object of epoch 0 (the key of `init`) is format 1,
byte for byte as before key epochs; one of a later epoch (`epochs.py`)
is format 2 and names its epoch, in the header for the reader to pick the
key and in the associated data so that the header cannot be re-labelled.
An envelope seals under the newest epoch it holds and opens any it holds;
an object of an epoch it does not hold is `UnknownEpoch` (the device
catches up, `epochs.catch_up`, or was revoked).
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
FORMAT, EPOCH_FORMAT = 1, 2
VERSION, SNAPSHOT, DESCRIPTION, SNAPSHOT_CHUNK, MOVE, WITNESS, DEVICE, EPOCH = range(1, 9)
_KIND_NAMES = {VERSION: "version", SNAPSHOT: "snapshot", DESCRIPTION: "description",
               SNAPSHOT_CHUNK: "snapshot-chunk", MOVE: "move", WITNESS: "witness",
               DEVICE: "device", EPOCH: "epoch"}
_HEADER = struct.Struct(">4sBB")
_EPOCH = struct.Struct(">I")
_MIN_BUCKET = 4096
_MIB = 1 << 20


# The envelope's bytes besides the body: header, nonce and tag, body length
# (format 1); a format 2 object has the epoch's 4 bytes more.
FIXED = _HEADER.size + OVERHEAD + 4
FIXED_MAX = FIXED + _EPOCH.size


class UnknownEpoch(IntegrityError):
    """An object sealed under a key epoch this envelope does not hold."""

    def __init__(self, message: str, epoch: int) -> None:
        super().__init__(message)
        self.epoch = epoch


def bucket(size: int) -> int:
    """The padded size of an object whose unpadded size is `size`."""
    padded = _MIN_BUCKET
    while padded < size and padded < _MIB:
        padded *= 2
    if padded >= size:
        return padded
    return -(-size // _MIB) * _MIB


class Envelope:
    def __init__(self, vault_key: bytes, vault_id: bytes, epoch: int = 0) -> None:
        self.vault_id = vault_id
        self._epochs: dict[int, dict[int, bytes]] = {}
        self._keys: dict[int, bytes] = {}
        self.add_epoch(epoch, vault_key)

    def add_epoch(self, epoch: int, key: bytes) -> None:
        """Hold key epoch `epoch` too; the newest held is the one sealed under."""
        self._keys[epoch] = key
        self._epochs[epoch] = {kind: derive_key(key, purpose=f"sync/{name}/v1")
                               for kind, name in _KIND_NAMES.items()}

    def key(self, epoch: int) -> bytes:
        """Key epoch `epoch`'s key (the one the kinds' keys derive from)."""
        return self._keys[epoch]

    @property
    def epoch(self) -> int:
        """The epoch this envelope seals under: the newest it holds."""
        return max(self._epochs)

    @property
    def fixed(self) -> int:
        """The bytes besides the body of an object sealed now."""
        return FIXED if self.epoch == 0 else FIXED_MAX

    def seal(self, kind: int, body: bytes, context: bytes = b"", *, reserve: int = 0) -> bytes:
        """`body` sealed, padded so that the object plus `reserve` bytes
        (a version's signature, `signatures.py`) fill a size bucket."""
        epoch, fixed = self.epoch, self.fixed
        header = self._header(kind, epoch)
        plain = struct.pack(">I", len(body)) + body
        plain += bytes(bucket(fixed + len(body) + reserve) - fixed - len(body) - reserve)
        return header + seal(self._epochs[epoch][kind], plain,
                             aad=self._aad(header, context))

    def open(self, kind: int, data: bytes, context: bytes = b"", *, name: str) -> bytes:
        """The body of `data`, or IntegrityError naming the object."""
        if len(data) < FIXED:
            raise IntegrityError(f"remote object {name}: truncated ({len(data)} bytes)")
        epoch = epoch_of(data)
        magic, fmt, found = _HEADER.unpack_from(data)
        if magic != MAGIC or fmt not in (FORMAT, EPOCH_FORMAT) or found != kind:
            raise IntegrityError(f"remote object {name}: not a memvault {_KIND_NAMES[kind]} "
                                 f"(format {fmt}, kind {found})")
        keys = self._epochs.get(epoch)
        if keys is None:
            raise UnknownEpoch(f"remote object {name}: sealed under key epoch {epoch}, "
                               f"which this device does not hold", epoch)
        header = self._header(kind, epoch)
        try:
            plain = open_sealed(keys[kind], data[len(header) :],
                                aad=self._aad(header, context))
        except IntegrityError as exc:
            raise IntegrityError(f"remote object {name}: does not authenticate (altered, "
                                 "swapped, replayed or of another vault)") from exc
        (size,) = struct.unpack_from(">I", plain)
        if size > len(plain) - 4 or any(plain[4 + size :]):
            raise IntegrityError(f"remote object {name}: bad padding")
        return plain[4 : 4 + size]

    @staticmethod
    def _header(kind: int, epoch: int) -> bytes:
        if epoch == 0:
            return _HEADER.pack(MAGIC, FORMAT, kind)
        return _HEADER.pack(MAGIC, EPOCH_FORMAT, kind) + _EPOCH.pack(epoch)

    def _aad(self, header: bytes, context: bytes) -> bytes:
        # Format 1's associated data, kept byte for byte: its format and kind.
        return b"memvault/remote" + header[4:] + self.vault_id + context


def epoch_of(data: bytes) -> int:
    """The key epoch an object names (0 for format 1)."""
    if len(data) >= FIXED_MAX and data[:4] == MAGIC and data[4] == EPOCH_FORMAT:
        return int(_EPOCH.unpack_from(data, _HEADER.size)[0])
    return 0


def chain_context(number: int, parent: bytes) -> bytes:
    return struct.pack(">Q", number) + (parent or bytes(32))
