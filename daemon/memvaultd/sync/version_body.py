"""The body of a remote version: the operations it carries, packed.

    version body := count:u32 | (len:u32 | operation record)*

`next_version` cuts the operations that wait for the remote into versions
the remotes take (`docs/format.md`).
"""

from __future__ import annotations

import struct

from memvault_base.errors import IntegrityError
from memvault_base.objects.names import MAX_OBJECT
from memvaultd.model.operations import Operation, decode, encode
from memvaultd.sync import signatures
from memvaultd.sync.envelope import FIXED_MAX

OPS_PER_VERSION = 1000


def pack_ops(ops: list[Operation]) -> bytes:
    """version body := count:u32 | (len:u32 | operation record)*"""
    return _pack([encode(op) for op in ops])


def _pack(records: list[bytes]) -> bytes:
    parts = [struct.pack(">I", len(records))]
    parts += [struct.pack(">I", len(record)) + record for record in records]
    return b"".join(parts)


def next_version(pending: list[tuple[int, Operation]], start: int) -> tuple[int, bytes]:
    """The operations of the next version, from `pending[start]` on: at most
    OPS_PER_VERSION of them and, sealed and signed, at most `MAX_OBJECT` bytes, the
    largest object any remote takes (600 memories of 30 KiB made one 19 MB
    version of 600 operations). Returns (where the next one starts, the
    body); the first operation always goes, since one record is at most
    ~100 KiB (a memory's text, payload and vector)."""
    budget = MAX_OBJECT - FIXED_MAX - signatures.TRAILER - 4
    records: list[bytes] = []
    end = start
    for _, op in pending[start : start + OPS_PER_VERSION]:
        record = encode(op)
        budget -= 4 + len(record)
        if budget < 0 and records:
            break
        records.append(record)
        end += 1
    return end, _pack(records)


def writers(ops: list[Operation]) -> dict[str, float]:
    """The devices that stamped `ops`, with the newest stamp of each (wall seconds)."""
    found: dict[str, float] = {}
    for op in ops:
        found[op.stamp.device] = max(op.stamp.wall_ms / 1000, found.get(op.stamp.device, 0.0))
    return found


def unpack_ops(body: bytes, name: str) -> list[Operation]:
    try:
        (count,) = struct.unpack_from(">I", body)
        ops, offset = [], 4
        for _ in range(count):
            (size,) = struct.unpack_from(">I", body, offset)
            if offset + 4 + size > len(body):
                raise struct.error("an operation runs past the end")
            ops.append(decode(body[offset + 4 : offset + 4 + size]))
            offset += 4 + size
    except struct.error as exc:
        raise IntegrityError(f"remote object {name}: operations do not parse") from exc
    return ops
