"""Operation records: the unit of the log, of replay and (later) of sync.

Every change to the vault is one operation. The log stores each one sealed
(`oplog.py` adds the envelope); this module owns the plaintext inside it:

    record := json_len:u32 BE | json:json_len bytes (UTF-8) | vector:dim x f32 LE

    json   := {"v": 1, "op": OP_ID, "kind": "put" | "reinforce" | "forget",
               "hlc": [wall_ms, counter, device], ...kind-specific fields}
      put       "memory": {every Memory field except the vector}
      reinforce "id": ID, "at": seconds
      forget    "id": ID, "at": seconds

The vector travels as raw float32 after the JSON (1,536 bytes for 384
dimensions instead of ~4 KiB as JSON numbers) and only on `put`.

Operations are idempotent by `op` id, so replaying or receiving one twice
changes nothing the second time.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memvault.errors import IntegrityError

from .hlc import Stamp
from .memory import Memory

FORMAT_VERSION = 1
PUT, REINFORCE, FORGET = "put", "reinforce", "forget"
_LEN = struct.Struct(">I")

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Operation:
    op_id: str
    kind: str
    stamp: Stamp
    memory: Memory | None = None
    vector: Vector | None = None
    target: str = ""
    at: float = 0.0

    @property
    def memory_id(self) -> str:
        return self.memory.id if self.memory is not None else self.target


def encode(op: Operation) -> bytes:
    doc: dict[str, Any] = {"v": FORMAT_VERSION, "op": op.op_id, "kind": op.kind,
                           "hlc": op.stamp.encode()}
    vector = b""
    if op.kind == PUT:
        assert op.memory is not None and op.vector is not None
        doc["memory"] = memory_to_dict(op.memory)
        vector = np.ascontiguousarray(op.vector, dtype="<f4").tobytes()
    else:
        doc["id"] = op.target
        doc["at"] = op.at
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return _LEN.pack(len(body)) + body + vector


def decode(record: bytes) -> Operation:
    """The operation in `record`. Raises IntegrityError on anything malformed:
    a record that authenticated but does not parse is a bug or a foreign
    writer, and must not be half-applied."""
    try:
        (size,) = _LEN.unpack_from(record)
        doc = json.loads(record[4 : 4 + size])
        if doc.get("v") != FORMAT_VERSION:
            raise ValueError(f"operation format {doc.get('v')!r} is not {FORMAT_VERSION}")
        stamp = Stamp.decode(doc["hlc"])
        kind = doc["kind"]
        if kind == PUT:
            vector = np.frombuffer(record[4 + size :], dtype="<f4").astype(np.float32)
            return Operation(doc["op"], kind, stamp, memory=memory_from_dict(doc["memory"]),
                             vector=vector)
        if kind in (REINFORCE, FORGET):
            return Operation(doc["op"], kind, stamp, target=doc["id"], at=float(doc["at"]))
        raise ValueError(f"unknown operation kind {kind!r}")
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise IntegrityError(f"operation record does not parse: {exc}") from exc


def memory_to_dict(memory: Memory) -> dict[str, Any]:
    doc = asdict(memory)
    doc["tags"] = list(memory.tags)
    return doc


def memory_from_dict(doc: dict[str, Any]) -> Memory:
    fields = dict(doc)
    fields["tags"] = tuple(fields.get("tags", ()))
    return Memory(**fields)
