"""The snapshot body: the whole vault state at one log position.

    body   := meta_len:u32 BE | meta:meta_len bytes (UTF-8 JSON) | vectors
    meta   := {"v": 2, "seq": N, "dimension": D, "hlc": [wall_ms, counter, device],
               "memories": {FIELD: [value of memory 0, of memory 1, ...], ...},
               "turns": {FIELD: [...], ...},
               "tombstones": [ID, ...], "seen": [OP_ID, ...],
               "stamps": {"ids": [ID, ...], "fields": [FIELD or "*", ...],
                          "wall_ms": [...], "counter": [...], "device": [i, ...],
                          "devices": [DEVICE, ...]},
               "upkeep": {"sweep" | "consolidate": seconds},     (absent: {})
               "base": SEQ, "gone": [ID, ...]}                   (a delta only)
    vectors:= (len(memories) + len(turns)) x D x float32 LE: the memories' rows,
              then the turns' rows, in list order

Memories are columns, one list per Memory field (a field absent from the
snapshot takes its default; tuple fields travel as lists), and stamps are
rows of five columns, `device` an index into `devices`: a 100k-memory body
decodes in 0.5 s against 1.1-1.9 s for one object per memory and per stamp
(version 1, still read):

    meta v1 := {"v": 1, ..., "memories": [{every Memory field}, ...], "turns": [...],
                "stamps": {ID: {FIELD or "*": [wall_ms, counter, device]}}, ...}

`snapshots.py` seals the body; this module only builds and parses it. Vectors
are raw (not JSON) so 100k memories load in one `frombuffer`.

A delta has the same body, with "base": the seq of the full snapshot it was
made against. Its memories and turns are those written, updated, counted or
moved since that snapshot, as they are at its own seq, with their vectors
and stamps; "gone" the ones purged since (a forget); "seen" the operations
applied since; tombstones and upkeep are whole. `delta_body.merged` lays it
over its base: the state at the delta's seq, as if one full snapshot had
been taken.
"""

from __future__ import annotations

import gc
import json
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field, fields
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.operations import memory_from_dict
from memvaultd.model.stamps import FieldStamps
from memvaultd.storage.snapshots import Cancel, SnapshotCancelled

FORMAT_VERSION = 2
_LEN = struct.Struct(">I")


@dataclass(frozen=True)
class SnapshotBody:
    seq: int
    dimension: int
    stamp: Stamp
    memories: list[Memory]
    vectors: npt.NDArray[np.float32]
    tombstones: frozenset[str]
    turns: list[Memory]
    turn_vectors: npt.NDArray[np.float32]
    seen: frozenset[str] = frozenset()
    stamps: Mapping[str, Mapping[str, Stamp]] = field(default_factory=dict)
    # When a sweep / consolidation last ran, on any device (docs/upkeep.md).
    upkeep: dict[str, float] = field(default_factory=dict)
    # A delta: the seq of the full snapshot it is laid over (-1: a full
    # snapshot), and the memories purged since.
    base: int = -1
    gone: frozenset[str] = frozenset()


def encode_body(state: SnapshotBody) -> bytes:
    return b"".join(encode_body_parts(state))


def encode_body_parts(state: SnapshotBody, cancelled: Cancel | None = None
                      ) -> list[bytes | memoryview]:
    """The body of `state` as parts whose concatenation is `encode_body`;
    `cancelled` is asked between parts (`SnapshotCancelled` if it says so).

    A snapshot is written from the parts (`SnapshotStore.write`) so that no
    single call holds the interpreter lock for long while writes wait: at
    600k memories one `json.dumps` of the meta held it for 1.8 s, and
    joining meta and vectors into one ~1 GB bytes (plus `tobytes`) for ~2 s
    more; a RememberBatch running meanwhile took 3.3 s instead of 0.95.
    """
    def check() -> None:  # between steps of ~10-300 ms at 100k
        if cancelled is not None and cancelled():
            raise SnapshotCancelled(f"snapshot {state.seq} given up")

    check()
    memories = _memory_columns(state.memories)
    check()
    stamps = _stamp_columns(state.stamps)
    check()
    meta = {"v": FORMAT_VERSION, "seq": state.seq, "dimension": state.dimension,
            "hlc": state.stamp.encode(),
            "memories": memories,
            "turns": _memory_columns(state.turns),
            "tombstones": sorted(state.tombstones), "seen": sorted(state.seen),
            "stamps": stamps,
            "upkeep": dict(state.upkeep)}
    if state.base >= 0:
        meta |= {"base": state.base, "gone": sorted(state.gone)}
    head = []
    for piece in _json_pieces(meta):
        check()
        head.append(piece.encode())
    vectors = [np.ascontiguousarray(matrix, dtype="<f4").reshape(-1).view(np.uint8).data
               for matrix in (state.vectors, state.turn_vectors)]
    return [_LEN.pack(sum(map(len, head))), *head, *vectors]


_JSON_PIECE = 20_000  # list items per json.dumps call: ~10-30 ms each
_dumps = partial(json.dumps, separators=(",", ":"), ensure_ascii=False)


def _json_pieces(value: Any) -> Iterator[str]:
    """`json.dumps(value)` (compact, UTF-8), as pieces of at most
    `_JSON_PIECE` list items, the interpreter lock free between them."""
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + _dumps(key) + ":"
            yield from _json_pieces(item)
        yield "}"
    elif isinstance(value, list) and len(value) > _JSON_PIECE:
        yield "["
        for start in range(0, len(value), _JSON_PIECE):
            yield ("," if start else "") + _dumps(value[start : start + _JSON_PIECE])[1:-1]
        yield "]"
    else:
        yield _dumps(value)


def decode_body(body: bytes) -> SnapshotBody:
    """The state in `body`, version 1 or 2. The vectors are a read-only view
    of `body` (whoever keeps them copies them once, into its own matrix)."""
    try:
        with collector_paused():
            (size,) = _LEN.unpack_from(body)
            meta = json.loads(body[4 : 4 + size])
            version = meta.get("v")
            if version == FORMAT_VERSION:
                strings: dict[str, str] = {}
                memories, turns = (_memories_from_columns(meta["memories"], strings),
                                   _memories_from_columns(meta["turns"], strings))
                # The stamps' ids as the same objects as the records' (81
                # bytes each, 8 MB at 100k): the parser makes one per value.
                ids = {memory_id: memory_id for part in ("memories", "turns")
                       for memory_id in meta[part]["id"]}
                stamps: Mapping[str, Mapping[str, Stamp]] = _stamps_from_columns(
                    meta["stamps"], strings, ids)
                del ids
                del strings
            elif version == 1:
                memories = [memory_from_dict(doc) for doc in meta["memories"]]
                turns = [memory_from_dict(doc) for doc in meta["turns"]]
                stamps = {memory_id: {name: Stamp.decode(raw) for name, raw in entry.items()}
                          for memory_id, entry in meta["stamps"].items()}
            else:
                raise ValueError(f"snapshot format {version!r} is not 1 or {FORMAT_VERSION}")
            dimension = int(meta["dimension"])
            vectors = np.frombuffer(body, dtype="<f4", offset=4 + size)
            vectors = vectors.astype(np.float32, copy=False).reshape(
                len(memories) + len(turns), dimension)
            return SnapshotBody(int(meta["seq"]), dimension, Stamp.decode(meta["hlc"]), memories,
                         vectors[: len(memories)], frozenset(meta["tombstones"]), turns,
                         vectors[len(memories) :], frozenset(meta["seen"]), stamps,
                         {str(kind): float(at) for kind, at in meta.get("upkeep", {}).items()},
                         int(meta.get("base", -1)), frozenset(meta.get("gone", ())))
    except (ValueError, KeyError, IndexError, TypeError, struct.error) as exc:
        raise IntegrityError(f"snapshot body does not parse: {exc}") from exc


def vector_rows(body_len: int, head: bytes, dimension: int) -> int:
    """How many vectors (memories, then turns) a body of `body_len` bytes
    that begins with `head` holds: what follows its meta, 4 x `dimension`
    bytes a row."""
    try:
        size: int = _LEN.unpack_from(head)[0]
    except struct.error as exc:
        raise IntegrityError(f"snapshot body does not parse: {exc}") from exc
    return max(0, body_len - _LEN.size - size) // (4 * dimension)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a state of millions of objects
    is built: none of them is garbage, and the collections their allocation
    triggers (each walking everything allocated so far) were half the time
    of parsing a 100k snapshot (0.9 s -> 0.4 s without them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _memory_columns(memories: Sequence[Memory]) -> dict[str, list[Any]]:
    return {f.name: list(map(attrgetter(f.name), memories)) for f in fields(Memory)}


def _memories_from_columns(columns: dict[str, list[Any]], strings: dict[str, str]
                           ) -> list[Memory]:
    """Memories from one list per field, built by one `map` over the columns
    (100k: 0.1 s against 0.4 s from one dict each). Equal strings of the
    short fields become one object (`strings`): the JSON parser makes one
    per value, and a tier, a type, a category or a tag repeated over 100k
    memories was ~60 bytes each time (35 MB of a 100k vault)."""
    count = len(columns["id"])
    known = {f.name for f in fields(Memory)}
    if unknown := sorted(set(columns) - known):
        # A newer writer's field: refused rather than dropped, as in a put.
        raise ValueError(f"unknown memory fields {unknown}")
    values = [_column(f, columns.get(f.name), count, strings) for f in fields(Memory)]
    return list(map(Memory, *values))


def _column(spec: Any, values: list[Any] | None, count: int, strings: dict[str, str]
            ) -> Iterable[Any]:
    """One field's values for `count` memories: as stored, or the default."""
    if values is None:
        if spec.default is not MISSING:
            return repeat(spec.default, count)
        if spec.default_factory is not MISSING:
            return (spec.default_factory() for _ in range(count))
        raise ValueError(f"memories lack the field {spec.name!r}")
    if len(values) != count:
        raise ValueError(f"{len(values)} values of {spec.name!r} for {count} memories")
    # All C-level maps: a Python loop per value cost 0.3 s more at 100k.
    # (A list where a string belongs is unhashable: refused, as in a put.)
    one = strings.setdefault
    if spec.name in _SHARED_STRINGS:
        return map(one, values, values)
    # A field whose default is a tuple holds a tuple; JSON carries a list.
    if isinstance(spec.default, tuple):
        return map(tuple, map(map, repeat(one), values, values))
    return values


# The string fields whose equal values share one object: every one but the
# text, the id and the topic, whose values rarely repeat (looking each up
# cost more than it saved: +0.18 s of a 0.45 s parse at 100k with them,
# +0.07 s without).
_SHARED_STRINGS = frozenset(f.name for f in fields(Memory)
                            if f.type == "str" and f.name not in ("text", "id", "topic_key"))



def _stamp_columns(stamps: Mapping[str, Mapping[str, Stamp]]) -> dict[str, list[Any]]:
    rows = list(stamps.rows() if isinstance(stamps, FieldStamps) else
                ((memory_id, name, stamp) for memory_id, entry in stamps.items()
                 for name, stamp in entry.items()))
    devices = list(dict.fromkeys(stamp.device for _, _, stamp in rows))
    index = {device: i for i, device in enumerate(devices)}
    return {"ids": [row[0] for row in rows], "fields": [row[1] for row in rows],
            "wall_ms": [row[2].wall_ms for row in rows],
            "counter": [row[2].counter for row in rows],
            "device": [index[row[2].device] for row in rows], "devices": devices}


_new_stamp = partial(tuple.__new__, Stamp)  # C-level: Stamp(...) costs 3x as much


def _stamps_from_columns(columns: dict[str, list[Any]], strings: dict[str, str],
                         known_ids: dict[str, str]) -> FieldStamps:
    ids = map(known_ids.setdefault, columns["ids"], columns["ids"])
    names = map(strings.setdefault, columns["fields"], columns["fields"])
    devices = [str(device) for device in columns["devices"]]
    walls, counters = _integers(columns["wall_ms"]), _integers(columns["counter"])
    devices_of = map(devices.__getitem__, columns["device"])
    return FieldStamps.from_rows(zip(ids, names, map(_new_stamp, zip(
        walls, counters, devices_of, strict=True)), strict=True))


def _integers(values: list[Any]) -> list[int]:
    """`values` checked to be integers (as `Stamp.decode` makes them), in one pass."""
    array = np.asarray(values)
    if array.size and array.dtype.kind not in "iu":
        raise ValueError("a stamp holds a non-integer")
    result: list[int] = array.tolist()
    return result
