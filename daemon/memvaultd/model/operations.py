"""Operation records: the unit of the log, of replay and (later) of sync.

Every change to the vault is one operation. The log stores each one sealed
(`oplog.py` adds the envelope); this module owns the plaintext inside it:

    record := json_len:u32 BE | json:json_len bytes (UTF-8) | vector:dim x f32 LE

    json   := {"v": 1, "op": OP_ID, "kind": KIND,
               "hlc": [wall_ms, counter, device], ...kind-specific fields}
      put       "memory": {every Memory field except the vector},
                "layer": "memories" | "turns" | "trash"   (vector follows)
      update    "id": ID, "fields": {name: new value}, "at": seconds
                                                      (vector follows if the text changed)
      reinforce "id": ID, "at": seconds
      trash     "id": ID, "at": seconds, "by": WHAT   (forget: into the trash)
      restore   "id": ID, "at": seconds                (out of the trash)
      forget    "id": ID, "at": seconds                (purge: a tombstone)
      access    "ids": [ID, ...], "at": seconds          (recall's mark_accessed)
      upkeep    "id": "sweep" | "consolidate", "at": seconds,
                "fields": {"count": N}        (a sweep or consolidation ran; N changed)

`forget` is the purge: the memory is gone for good on every device, as it
is in every log written before `trash` and `restore` existed. A put in the layer
"trash" is a memory that was in the trash when `init` or `join` logged it
(its `trashed_at` is set); `vault/state.py` places every memory by that
field, so the layer name only says where it was.

The vector travels as raw float32 after the JSON (1,536 bytes for 384
dimensions instead of ~4 KiB as JSON numbers).

The JSON is strict UTF-8 and its strings Unicode text: a lone surrogate, as
its bytes or as an escape ("\\ud800"), does not parse.

Operations are idempotent by `op` id, so replaying or receiving one twice
changes nothing the second time.
"""

from __future__ import annotations

import json
import struct
import sys
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.vector import Vector

FORMAT_VERSION = 1
PUT, UPDATE, REINFORCE, FORGET, ACCESS = "put", "update", "reinforce", "forget", "access"
UPKEEP = "upkeep"
TRASH, RESTORE = "trash", "restore"
# What a trash says forgot the memory, when the daemon itself decides: a
# client that does not say, the forgetting sweep, a watched file's change.
BY_CLIENT, BY_SWEEP, BY_WATCH = "client", "sweep", "watch"
MEMORIES, TURNS, TRASH_LAYER = "memories", "turns", "trash"
_LEN = struct.Struct(">I")



@dataclass(frozen=True, slots=True)
class Operation:
    op_id: str
    kind: str
    stamp: Stamp
    memory: Memory | None = None
    vector: Vector | None = None
    target: str = ""
    at: float = 0.0
    layer: str = MEMORIES
    fields: dict[str, Any] | None = None
    ids: tuple[str, ...] = ()
    by: str = ""  # a trash: what forgot the memory

    @property
    def memory_id(self) -> str:
        return self.memory.id if self.memory is not None else self.target


def encode(op: Operation) -> bytes:
    doc: dict[str, Any] = {"v": FORMAT_VERSION, "op": op.op_id, "kind": op.kind,
                           "hlc": op.stamp.encode()}
    if op.kind == PUT:
        assert op.memory is not None
        doc["memory"] = memory_to_dict(op.memory)
        doc["layer"] = op.layer
    elif op.kind == ACCESS:
        doc["ids"] = list(op.ids)
        doc["at"] = op.at
    else:
        doc["id"] = op.target
        doc["at"] = op.at
        if op.kind in (UPDATE, UPKEEP):
            doc["fields"] = op.fields or {}
        elif op.kind == TRASH:
            doc["by"] = op.by
    vector = b"" if op.vector is None else np.ascontiguousarray(op.vector, dtype="<f4").tobytes()
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return _LEN.pack(len(body)) + body + vector


def decode(record: bytes) -> Operation:
    """The operation in `record`. Raises IntegrityError on anything malformed:
    a record that authenticated but does not parse is a bug or a foreign
    writer, and must not be half-applied."""
    try:
        (size,) = _LEN.unpack_from(record)
        body = record[4 : 4 + size]
        # Decoded here, strictly: `json.loads` of bytes decodes them with
        # "surrogatepass" (and takes UTF-16 or UTF-32 too), so the bytes of
        # a lone surrogate would reach the state as one. No dearer, the
        # search for an escape included (skipping `detect_encoding` pays for
        # it): 11.3 against 11.4 us for an access mark of 10 ids, 28.3
        # against 28.1 for a put, best of 15 runs of 50,000.
        doc = json.loads(body.decode())
        if b"\\u" in body:
            _check_unicode(doc)
        if doc.get("v") != FORMAT_VERSION:
            raise ValueError(f"operation format {doc.get('v')!r} is not {FORMAT_VERSION}")
        stamp = Stamp.decode(doc["hlc"])
        kind = doc["kind"]
        tail = record[4 + size :]
        vector = np.frombuffer(tail, dtype="<f4").astype(np.float32) if tail else None
        if kind == PUT:
            memory = doc["memory"]
            if not isinstance(memory, dict):
                raise ValueError(f"a memory is an object, not {type(memory).__name__}")
            check_kinds(memory)
            return Operation(doc["op"], kind, stamp, memory=memory_from_dict(memory),
                             vector=vector, layer=doc.get("layer", MEMORIES))
        if kind == ACCESS:
            return Operation(doc["op"], kind, stamp, ids=tuple(doc["ids"]), at=float(doc["at"]))
        if kind == UPDATE:
            check_kinds(doc.get("fields") or {})
        if kind in (UPDATE, REINFORCE, FORGET, UPKEEP, TRASH, RESTORE):
            return Operation(doc["op"], kind, stamp, target=doc["id"], at=float(doc["at"]),
                             fields=doc.get("fields"), vector=vector,
                             by=str(doc.get("by", "")))
        raise ValueError(f"unknown operation kind {kind!r}")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError,
            struct.error) as exc:
        raise IntegrityError(f"operation record does not parse: {exc}") from exc


# Made once: `json.dumps` given an option builds an encoder at each call
# (14.7 against 12.0 us for a put's document). A parsed one is never circular.
_STRICT = json.JSONEncoder(ensure_ascii=False, check_circular=False)


def _check_unicode(doc: Any) -> None:
    """ValueError if a string of `doc` holds a lone surrogate: an escape
    ("\\ud800") `json.loads` takes, that `encode` could never have written
    (strict UTF-8) and that no reply can carry (protobuf refuses it).

    Run only for a body that holds a `\\u`: an honest one does for a control
    character, or a text's own backslash before a "u", and most never do.
    Such a put decodes in ~44 us instead of ~29."""
    try:
        _STRICT.encode(doc).encode()
    except UnicodeEncodeError as exc:
        code = ord(exc.object[exc.start])
        raise ValueError(f"a string holds a lone surrogate (U+{code:04X}), which is not "
                         "Unicode text; no memvault device writes one") from None


# Memory fields held as tuples, which JSON carries as lists.
TUPLE_FIELDS = ("tags", "consolidated_from")


def memory_to_dict(memory: Memory) -> dict[str, Any]:
    doc = asdict(memory)
    for name in TUPLE_FIELDS:
        doc[name] = list(doc[name])
    return doc


def memory_from_dict(doc: dict[str, Any]) -> Memory:
    fields = dict(doc)
    for name in TUPLE_FIELDS:
        if name in fields:
            fields[name] = tuple(fields[name])
    return Memory(**fields)


def _kind_of(annotation: str) -> str:
    if annotation in ("float", "int", "bool"):
        return "number"
    if annotation.startswith("dict"):
        return "dict"
    return "str" if annotation == "str" else "strings"  # tuple[str, ...]


_KINDS = {spec.name: _kind_of(str(spec.type)) for spec in dataclass_fields(Memory)}
# A number field takes any finite number: another writer may write 1 for
# 1.0, and a bool is an int. The bounds refuse the infinities (JSON's 1e999
# parses as one) and an int past a float's range; NaN fails both.
_NUMBERS = frozenset({int, float, bool})
_LARGEST = sys.float_info.max


def check_kinds(values: dict[str, Any]) -> None:
    """ValueError unless each of `values` (Memory fields by name, as JSON
    parsed them: a put's memory, an update's fields) is of its field's
    kind, a list's items strings. A name that is no field is left to the
    caller: a put's `Memory` refuses it, an update ignores it. A record of
    another writer with `"text": 5` was applied, and its first read (the
    keyword index's `lower()`) failed at every start after, replaying the
    log: the vault no longer opened."""
    # A put's 26 fields cost its decode 6 us (28 -> 34-35 us, ~0.6 s of a start
    # replaying 100k puts); a set of types a kind at a time measured slower.
    for name, value in values.items():
        kind = _KINDS.get(name)
        if kind is None:
            continue
        held = type(value)
        if kind == "str":
            fits = held is str
        elif kind == "number":
            fits = held in _NUMBERS and -_LARGEST <= value <= _LARGEST  # NaN fails
        elif kind == "dict":
            fits = held is dict
        else:
            fits = held is list and all(type(v) is str for v in value)
        if not fits:
            raise ValueError(f"the field {name!r} holds {type(value).__name__} {value!r:.40}")
