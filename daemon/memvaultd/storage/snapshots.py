"""Sealed full-state snapshots.

A snapshot file ``{seq:020d}.snap`` holds the vault's state as of log seq
``seq``::

    header (42 bytes):
        magic "MVSNP":5 | version:u8 | vault_id:16 | seq:u64 |
        chunk_count:u32 | body_len:u64

    chunk i, for i in 0..chunk_count-1:
        nonce:12 | ciphertext:min(4 MiB, body_len - i * 4 MiB) | tag:16

    chunk AAD = "memvault/snapshot" | header:42 | index:u32 | final:u8

Integers are big-endian. The body is opaque here (the vault layer builds it).

A delta ``{seq:020d}.delta`` is laid out the same with magic "MVSND": the
memories changed since the full snapshot its body names, written at a stop
instead of the whole state (`vault/deltas.py`). The magic is in the header
every chunk binds, so a delta renamed to ``.snap`` does not authenticate as a
full snapshot. Writing a full snapshot deletes every delta of the directory
before the new file takes its name: no delta outlives the snapshot it was
made against.
Every chunk binds the whole header, its own index and whether it is the last,
so chunks cannot be reordered, dropped, cut short or moved between snapshots
or vaults, and the header cannot be edited. An empty body is one empty chunk,
so even it carries a tag.

4 MiB chunks: AES-GCM in `cryptography` refuses inputs over 2**31-1 bytes,
and a 150 MB state must not need two 150 MB copies in flight while writing.
The per-chunk cost is 28 bytes and one AEAD call: 0.0007% overhead.

Measured on a 2-core machine: reading and verifying a 150 MiB snapshot takes
0.19 s from the page cache (~800 MB/s; 0.35 s right after writing it), and
writing one 0.55 s including the fsync.

Files are written to a temporary name, fsynced, renamed and the directory
fsynced: a crash leaves either the whole snapshot or none of it.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from memvault_base.durable import sync_dir
from memvault_base.errors import IntegrityError, InvalidArgument
from memvaultd.crypto.aead import OVERHEAD, open_sealed, seal

__all__ = ["CHUNK_SIZE", "LOG_SHARE", "SealedBody", "SnapshotCancelled", "SnapshotStore", "due"]

MAGIC = b"MVSNP"
DELTA_MAGIC = b"MVSND"
VERSION = 1
CHUNK_SIZE = 4 * 1024 * 1024
_HEADER = struct.Struct(">5sB16sQIQ")  # 42 bytes
_CHUNK_TAIL = struct.Struct(">IB")  # index, final flag
_AAD_LABEL = b"memvault/snapshot"
_NAME = re.compile(r"^(\d{20})\.snap$")
_DELTA_NAME = re.compile(r"^(\d{20})\.delta$")
_TMP_SUFFIX = ".tmp"

# A snapshot is due once the log since the last one holds a tenth of the
# vault (and `snapshot_every` operations).
# Every snapshot seals the whole state, so a fixed interval made a bulk load
# quadratic: loading 400k memories in batches of 10,000 wrote a snapshot
# every ~20,000 (one at a time), each of the whole vault (at 400k: 1.4 s of
# capture under the write lock, 5.4 s of encoding, 2.0 s of sealing), and
# every other batch took 5-8 s instead of 2. At a tenth of the vault the
# snapshots of a load form a geometric series (~11x the final vault sealed
# in all), and a start after a crash replays at most a tenth of the vault's
# size in log records (~0.1 ms each: 10 s at 1M, 1 s at 100k) on top of
# loading the snapshot. The 400k load went from 2,948 to 3,724 memories/s;
# a batch that meets a snapshot still takes up to ~8 s (docs/benchmarks.md).
LOG_SHARE = 10


def due(operations_since: int, memories: int, every: int) -> bool:
    """Whether a snapshot is due: `every` operations since the last one (the
    `snapshot_every` setting), and at least a tenth of the vault."""
    return operations_since >= max(every, memories // LOG_SHARE)


class SnapshotCancelled(Exception):
    """A snapshot given up before it took its name, because its writer was
    asked to stop (a stop does not wait for a whole background snapshot:
    the log holds every write it would have held)."""


Cancel = Callable[[], bool]


def _never() -> bool:
    return False


def _chunk_count(body_len: int) -> int:
    return max(1, -(-body_len // CHUNK_SIZE))


def _chunks(parts: Sequence[bytes | memoryview], size: int, count: int) -> Iterator[bytes]:
    """The concatenation of `parts` in `count` chunks of `size` bytes (the
    last shorter, or empty), never holding more than one chunk's copy."""
    pending: list[memoryview] = []
    filled = produced = 0
    for part in parts:
        view = memoryview(part)
        view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        while view:
            take = min(size - filled, len(view))
            pending.append(view[:take])
            filled, view = filled + take, view[take:]
            if filled == size:
                yield b"".join(pending)
                pending, filled, produced = [], 0, produced + 1
    if produced < count:
        yield b"".join(pending)


def _chunk_aad(header: bytes, index: int, count: int) -> bytes:
    return _AAD_LABEL + header + _CHUNK_TAIL.pack(index, index == count - 1)


class SealedBody:
    """A sealed body read front to back, each 4 MiB chunk decrypted and
    verified when the read reaches it: a reader that parses as it goes
    (`snapshot_body.read_body`) never holds the whole decrypted body, which
    at 100k memories was ~250 MB at the peak of a start on top of what the
    parse built from it."""

    def __init__(self, chunk: Callable[[int], bytes], count: int, length: int) -> None:
        self._chunk = chunk  # the plaintext of chunk i, verified
        self._count = count
        self.length = length  # of the whole body, in bytes
        self._next = 0  # the next chunk to decrypt
        self._held = memoryview(b"")  # what is left of the last one decrypted
        self.position = 0

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all that is left if negative): fewer only at the end."""
        whole = size < 0
        size = self.length - self.position if whole else size
        pieces: list[memoryview] = []
        while size > 0 and (self._held or self._next < self._count):
            if not self._held:
                self._held = memoryview(self._chunk(self._next))
                self._next += 1
            piece, self._held = self._held[:size], self._held[size:]
            pieces.append(piece)
            size -= len(piece)
        while whole and self._next < self._count:  # an empty body's one chunk: its tag
            self._chunk(self._next)
            self._next += 1
        self.position += sum(map(len, pieces))
        return pieces[0].tobytes() if len(pieces) == 1 else b"".join(pieces)


class SnapshotStore:
    """A directory of sealed snapshots, newest by seq wins."""

    def __init__(self, directory: Path, key: bytes, vault_id: bytes, *,
                 read_only: bool = False) -> None:
        """`read_only`: for `memvault check`, which changes nothing: the
        directory is not created and no interrupted write is cleared away."""
        self._dir = directory
        self._key = key
        self._vault_id = vault_id
        if read_only:
            return
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for stale in directory.glob(f".*{_TMP_SUFFIX}"):
            stale.unlink()  # a write interrupted by a crash; never renamed, never used

    def _snapshots(self, name: re.Pattern[str] = _NAME) -> list[tuple[int, Path]]:
        if not self._dir.is_dir():
            return []
        found = ((name.match(p.name), p) for p in self._dir.iterdir())
        return sorted((int(m[1]), p) for m, p in found if m)

    def deltas(self) -> list[tuple[int, Path]]:
        """(seq, path) of every delta, oldest first."""
        return self._snapshots(_DELTA_NAME)

    def files(self) -> list[tuple[int, Path]]:
        """(seq, path) of every snapshot, oldest first."""
        return self._snapshots()

    def write(self, seq: int, body: bytes | Sequence[bytes | memoryview],
              cancelled: Cancel = _never) -> Path:
        """Seal `body` (bytes, or parts to concatenate) as the state at log
        seq `seq`; durable and complete on return. `cancelled` is asked
        before each chunk: if it says so, the temporary file is deleted and
        `SnapshotCancelled` raised."""
        return self._write(seq, body, MAGIC, f"{seq:020d}.snap", cancelled)

    def write_delta(self, seq: int, body: bytes | Sequence[bytes | memoryview]) -> Path:
        """`write`, as the delta at log seq `seq`; the older deltas are
        deleted once it is durable."""
        path = self._write(seq, body, DELTA_MAGIC, f"{seq:020d}.delta")
        older = [old for old_seq, old in self.deltas() if old_seq != seq]
        for old in older:
            old.unlink()
        if older:
            sync_dir(self._dir)
        return path

    def _write(self, seq: int, body: bytes | Sequence[bytes | memoryview], magic: bytes,
               name: str, cancelled: Cancel = _never) -> Path:
        if seq < 0:
            raise InvalidArgument(f"a snapshot seq is >= 0, not {seq}")
        parts = [body] if isinstance(body, (bytes, bytearray, memoryview)) else body
        path = self._dir / name
        tmp = self._dir / f".{path.name}{_TMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                self._write_sealed(out, seq, parts, magic, cancelled)
                out.flush()
                os.fsync(out.fileno())
        except SnapshotCancelled:
            tmp.unlink()
            raise
        if magic == MAGIC:  # a delta is made against the newest snapshot only
            for delta in (path for _, path in self.deltas()):
                delta.unlink()
        os.replace(tmp, path)
        sync_dir(self._dir)
        return path

    def _write_sealed(self, out: BinaryIO, seq: int, parts: Sequence[bytes | memoryview],
                      magic: bytes, cancelled: Cancel) -> None:
        size = sum(memoryview(part).nbytes for part in parts)
        count = _chunk_count(size)
        header = _HEADER.pack(magic, VERSION, self._vault_id, seq, count, size)
        out.write(header)
        for index, chunk in enumerate(_chunks(parts, CHUNK_SIZE, count)):
            if cancelled():
                raise SnapshotCancelled(f"snapshot {seq} given up")
            out.write(seal(self._key, chunk, aad=_chunk_aad(header, index, count)))

    def latest(self) -> tuple[int, bytes] | None:
        """The newest snapshot as (seq, body), every chunk verified; None if there is none."""
        snapshots = self._snapshots()
        if not snapshots:
            return None
        seq, path = snapshots[-1]
        return seq, self._read(seq, path)

    def read(self, seq: int) -> bytes:
        """The body of snapshot `seq`, every chunk verified; IntegrityError,
        naming the file, when it does not authenticate or cannot be read."""
        return self._read_file(seq, self._dir / f"{seq:020d}.snap", MAGIC)

    def read_delta(self, seq: int) -> bytes:
        """`read`, of the delta at `seq`."""
        return self._read_file(seq, self._dir / f"{seq:020d}.delta", DELTA_MAGIC)

    @contextmanager
    def open(self, seq: int) -> Iterator[SealedBody]:
        """The body of snapshot `seq` as a stream (`SealedBody`): one chunk
        decrypted at a time, as it is read."""
        with self._open(seq, self._dir / f"{seq:020d}.snap", MAGIC) as body:
            yield body

    @contextmanager
    def open_delta(self, seq: int) -> Iterator[SealedBody]:
        """`open`, of the delta at `seq`."""
        with self._open(seq, self._dir / f"{seq:020d}.delta", DELTA_MAGIC) as body:
            yield body

    @contextmanager
    def _open(self, seq: int, path: Path, magic: bytes) -> Iterator[SealedBody]:
        try:
            with path.open("rb") as src:
                header = src.read(_HEADER.size)
                count, body_len = self._check_header(path, header, seq, magic)
                if os.fstat(src.fileno()).st_size != _HEADER.size + body_len + count * OVERHEAD:
                    raise IntegrityError(f"snapshot {path.name}: truncated or extended")
                yield SealedBody(
                    lambda index: self._read_chunk(src, path, header, index, count, body_len),
                    count, body_len)
        except OSError as exc:  # a bad sector (EIO) loses the file as surely as a flipped bit
            raise IntegrityError(f"snapshot {path.name}: unreadable: {exc.strerror}") from exc

    def head(self, seq: int) -> tuple[int, bytes]:
        """The body length of snapshot `seq` and its first chunk (up to 4
        MiB), verified: enough to size the state without reading it all."""
        path = self._dir / f"{seq:020d}.snap"
        try:
            with path.open("rb") as src:
                header = src.read(_HEADER.size)
                count, body_len = self._check_header(path, header, seq, MAGIC)
                return body_len, self._read_chunk(src, path, header, 0, count, body_len)
        except OSError as exc:
            raise IntegrityError(f"snapshot {path.name}: unreadable: {exc.strerror}") from exc

    def _read_file(self, seq: int, path: Path, magic: bytes) -> bytes:
        try:
            return self._read(seq, path, magic)
        except OSError as exc:  # a bad sector (EIO) loses the file as surely as a flipped bit
            raise IntegrityError(f"snapshot {path.name}: unreadable: {exc.strerror}") from exc

    def _read(self, seq: int, path: Path, magic: bytes = MAGIC) -> bytes:
        with self._open(seq, path, magic) as body:
            return body.read()

    def _check_header(self, path: Path, header: bytes, seq: int, magic: bytes
                      ) -> tuple[int, int]:
        def fail(what: str) -> IntegrityError:
            return IntegrityError(f"snapshot {path.name}: {what}")

        if len(header) < _HEADER.size:
            raise fail("header is truncated")
        found, version, vault_id, head_seq, count, body_len = _HEADER.unpack(header)
        if found != magic:
            raise fail("not a memvault snapshot (bad magic)")
        if version != VERSION:
            raise fail(f"format version {version}; this release reads {VERSION}")
        if vault_id != self._vault_id:
            raise fail(f"belongs to vault {vault_id.hex()}, not {self._vault_id.hex()}")
        if head_seq != seq:
            raise fail(f"header says seq {head_seq}, the file name says {seq}")
        if count != _chunk_count(body_len):
            raise fail(f"{count} chunks cannot hold {body_len} bytes")
        return count, body_len

    def _read_chunk(
        self, src: BinaryIO, path: Path, header: bytes, index: int, count: int, body_len: int
    ) -> bytes:
        plain_len = min(CHUNK_SIZE, body_len - index * CHUNK_SIZE)
        sealed = src.read(plain_len + OVERHEAD)
        try:
            return open_sealed(self._key, sealed, aad=_chunk_aad(header, index, count))
        except IntegrityError:
            raise IntegrityError(
                f"snapshot {path.name}: chunk {index} of {count} failed to authenticate"
            ) from None

    def prune(self, keep: int = 2) -> int:
        """Delete all but the newest `keep` snapshots; how many were deleted."""
        if keep < 1:
            raise InvalidArgument("prune must keep at least the newest snapshot")
        old = self._snapshots()[:-keep]
        for _, path in old:
            path.unlink()
        if old:
            sync_dir(self._dir)
        return len(old)
