"""Snapshots on the remote: the whole state at one version, sealed in chunks
of bounded size under a sealed manifest, so a device joining a vault of any
size starts from one instead of replaying the chain.

    states/{N:020d}/{sid}                 the manifest     (envelope kind 2)
    state-chunks/{N:020d}/{sid}/{i:06d}   chunk i of count (envelope kind 4)

    sid              := 16 random bytes, 32 hex digits in names
    manifest body    := format:u8 (1) | count:u32 | body_len:u64 | sha256(body):32
    manifest context := number:u64 | sha256(version N's object):32 | sid:16
    chunk body       := body[i * B : (i + 1) * B], B := chunk_body(the manifest's epoch)
    chunk context    := number:u64 | sha256(version N's object):32 | sid:16 |
                        index:u32 | count:u32

The associated data binds every chunk to its snapshot (version, that
version's hash, sid) and its place (index of count): a chunk moved to
another place or snapshot, one dropped or one left over fails to open, and
the manifest's digest checks the whole. A chunk's body is `chunk_body` bytes
(4 fewer when its envelope names a key epoch, `envelope.py`) so that every
chunk but the last is exactly 4 MiB on the wire: a quarter of
memvault-server's default 16 MiB object limit, whatever the vault's size
(the state of 100,728 memories, 303 MiB, is 76 chunks: bench_sync.py).

The chunks are written first, the manifest last: a manifest names a whole
snapshot, and a publication cut short leaves chunks no manifest names (they
are never read). Each publication has its own sid, so two devices that
publish at the same version never mix their chunks; a reader takes any
complete one. A manifest or chunk that fails to open (damaged, or planted by
someone holding a token but not the key), or a body that opens but does not
parse, is passed over for the next older snapshot, then for the chain
itself: it can slow a join, never stop one.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from memvault_base.errors import IntegrityError, NotFound
from memvaultd.sync.envelope import FIXED, FIXED_MAX, SNAPSHOT, SNAPSHOT_CHUNK, Envelope, epoch_of
from memvaultd.sync.remotes.base import Remote

log = logging.getLogger("memvaultd.sync")

T = TypeVar("T")

MANIFESTS = "states/"
CHUNKS = "state-chunks/"
CHUNK_OBJECT = 4 * 1024 * 1024
CHUNK_BODY = CHUNK_OBJECT - FIXED


def chunk_body(epoch: int) -> int:
    """The body bytes of a chunk sealed under key epoch `epoch`."""
    return CHUNK_BODY if epoch == 0 else CHUNK_OBJECT - FIXED_MAX

_FORMAT = 1
_MANIFEST = struct.Struct(">BIQ32s")
# Manifests tried, newest first, before a reader gives up on snapshots (and
# a joiner replays the chain): each try downloads the version it names (up
# to ~3 MiB), and manifests planted by someone holding only a token must not
# turn a join into thousands of downloads.
_TRIES = 8


@dataclass(frozen=True)
class Snapshot:
    """One snapshot the remote holds: at version `number`, whose object hashes to `digest`."""

    number: int
    digest: bytes
    sid: bytes

    @property
    def name(self) -> str:
        return f"{MANIFESTS}{self.number:020d}/{self.sid.hex()}"

    def chunk_name(self, index: int) -> str:
        return f"{CHUNKS}{self.number:020d}/{self.sid.hex()}/{index:06d}"

    def context(self) -> bytes:
        return struct.pack(">Q", self.number) + self.digest + self.sid

    def chunk_context(self, index: int, count: int) -> bytes:
        return self.context() + struct.pack(">II", index, count)


def publish(remote: Remote, envelope: Envelope, number: int, digest: bytes,
            body: bytes | memoryview) -> Snapshot:
    """Seal `body`, the state at version `number` (whose object hashes to
    `digest`), as chunks and then its manifest. Returns what was published."""
    snapshot = Snapshot(number, digest, secrets.token_bytes(16))
    view, size = memoryview(body), chunk_body(envelope.epoch)
    count = max(1, -(-len(view) // size))
    for index in range(count):
        piece = bytes(view[index * size : (index + 1) * size])
        remote.put_object(snapshot.chunk_name(index), envelope.seal(
            SNAPSHOT_CHUNK, piece, snapshot.chunk_context(index, count)))
    manifest = _MANIFEST.pack(_FORMAT, count, len(view), hashlib.sha256(view).digest())
    remote.put_object(snapshot.name, envelope.seal(SNAPSHOT, manifest, snapshot.context()))
    return snapshot


def listed(remote: Remote, up_to: int | None = None) -> list[tuple[int, bytes]]:
    """(number, sid) of every manifest name on the remote, newest first;
    only those at or below version `up_to` when given. Names that are not a
    manifest's are ignored."""
    found = []
    for name in remote.list_objects(MANIFESTS):
        parts = name[len(MANIFESTS) :].split("/")
        if len(parts) != 2 or len(parts[0]) != 20 or not parts[0].isdigit():
            continue
        try:
            sid = bytes.fromhex(parts[1])
        except ValueError:
            continue
        number = int(parts[0])
        if len(sid) == 16 and number > 0 and (up_to is None or number <= up_to):
            found.append((number, sid))
    return sorted(found, reverse=True)


def open_manifest(remote: Remote, envelope: Envelope, snapshot: Snapshot
                  ) -> tuple[int, int, bytes]:
    """(count, body_len, sha256 of the body) from the snapshot's manifest."""
    sealed = remote.get_object(snapshot.name)
    body = envelope.open(SNAPSHOT, sealed, snapshot.context(), name=snapshot.name)
    if len(body) != _MANIFEST.size:
        raise IntegrityError(f"remote object {snapshot.name}: not a snapshot manifest")
    fmt, count, size, digest = _MANIFEST.unpack(body)
    if fmt != _FORMAT or count != max(1, -(-size // chunk_body(epoch_of(sealed)))):
        raise IntegrityError(f"remote object {snapshot.name}: manifest format {fmt}, "
                             f"{count} chunks for {size} bytes")
    return count, size, digest


def fetch(remote: Remote, envelope: Envelope, snapshot: Snapshot) -> bytes:
    """The state body of `snapshot`, every chunk opened and the whole checked."""
    count, size, digest = open_manifest(remote, envelope, snapshot)
    body = bytearray()
    for index in range(count):
        name = snapshot.chunk_name(index)
        body += envelope.open(SNAPSHOT_CHUNK, remote.get_object(name),
                              snapshot.chunk_context(index, count), name=name)
        if len(body) > size:
            break
    if len(body) != size or hashlib.sha256(body).digest() != digest:
        raise IntegrityError(f"remote object {snapshot.name}: its chunks do not add up to "
                             "the snapshot it names")
    return bytes(body)


def candidates(remote: Remote, up_to: int | None = None) -> Iterator[Snapshot]:
    """The remote's newest `_TRIES` snapshots, newest first, each paired with
    the hash of its version as the remote holds it now; those whose version
    is gone are skipped."""
    digests: dict[int, bytes | None] = {}
    for number, sid in listed(remote, up_to)[:_TRIES]:
        if number not in digests:
            version = remote.versions_after(number - 1, limit=1)
            digests[number] = (hashlib.sha256(version[0][1]).digest()
                               if version and version[0][0] == number else None)
        digest = digests[number]
        if digest is not None:
            yield Snapshot(number, digest, sid)


def latest_snapshot(remote: Remote, envelope: Envelope, parse: Callable[[bytes], T]
                    ) -> tuple[int, bytes, T] | None:
    """(version, version object hash, `parse` of the state body) of the
    newest snapshot that opens whole and parses; None when there is none
    (the joiner replays the chain). A body that opens but that `parse`
    refuses (IntegrityError: sealed with the key, but not as memvault
    writes a body) is passed over as a damaged one is, so that one such
    publication does not stop every join of the vault."""
    for snapshot in candidates(remote):
        try:
            body = fetch(remote, envelope, snapshot)
            parsed = parse(body)
        except (IntegrityError, NotFound) as exc:
            log.warning("snapshot at version %d passed over: %s", snapshot.number, exc)
            continue
        log.info("bootstrapping from the snapshot at version %d (%d bytes)", snapshot.number,
                 len(body))
        return snapshot.number, snapshot.digest, parsed
    return None


def newest_published(remote: Remote, envelope: Envelope, up_to: int) -> int:
    """The version of the newest snapshot at or below `up_to` whose manifest
    opens (another device's, or this one's); 0 when there is none. Chunks are
    not read: this only tells a publisher that one is there."""
    for snapshot in candidates(remote, up_to):
        try:
            open_manifest(remote, envelope, snapshot)
        except (IntegrityError, NotFound):
            continue
        return snapshot.number
    return 0
