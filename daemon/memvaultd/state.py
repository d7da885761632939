"""The snapshot body: the whole vault state at one log position.

    body   := meta_len:u32 BE | meta:meta_len bytes (UTF-8 JSON) | vectors
    meta   := {"v": 1, "seq": N, "dimension": D, "hlc": [wall_ms, counter, device],
               "memories": [{every Memory field}, ...], "turns": [{...}, ...],
               "tombstones": [ID, ...], "seen": [OP_ID, ...],
               "stamps": {ID: {FIELD or "*": [wall_ms, counter, device]}},
               "upkeep": {"sweep" | "consolidate": seconds}}     (absent: {})
    vectors:= (len(memories) + len(turns)) x D x float32 LE: the memories' rows,
              then the turns' rows, in list order

`snapshot.py` seals the body; this module only builds and parses it. Vectors
are raw (not JSON) so 100k memories load in one `frombuffer`.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memvault.errors import IntegrityError

from .hlc import Stamp
from .memory import Memory
from .operations import memory_from_dict, memory_to_dict

FORMAT_VERSION = 1
_LEN = struct.Struct(">I")


@dataclass(frozen=True)
class State:
    seq: int
    dimension: int
    stamp: Stamp
    memories: list[Memory]
    vectors: npt.NDArray[np.float32]
    tombstones: frozenset[str]
    turns: list[Memory]
    turn_vectors: npt.NDArray[np.float32]
    seen: frozenset[str] = frozenset()
    stamps: dict[str, dict[str, Stamp]] = field(default_factory=dict)
    # When a sweep / consolidation last ran, on any device (docs/upkeep.md).
    upkeep: dict[str, float] = field(default_factory=dict)


def encode_state(state: State) -> bytes:
    meta = {"v": FORMAT_VERSION, "seq": state.seq, "dimension": state.dimension,
            "hlc": state.stamp.encode(),
            "memories": [memory_to_dict(memory) for memory in state.memories],
            "turns": [memory_to_dict(turn) for turn in state.turns],
            "tombstones": sorted(state.tombstones), "seen": sorted(state.seen),
            "stamps": {memory_id: {name: stamp.encode() for name, stamp in stamps.items()}
                       for memory_id, stamps in state.stamps.items()},
            "upkeep": dict(state.upkeep)}
    head = json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode()
    vectors = (np.ascontiguousarray(state.vectors, dtype="<f4").tobytes()
               + np.ascontiguousarray(state.turn_vectors, dtype="<f4").tobytes())
    return _LEN.pack(len(head)) + head + vectors


def decode_state(body: bytes) -> State:
    try:
        (size,) = _LEN.unpack_from(body)
        meta = json.loads(body[4 : 4 + size])
        if meta.get("v") != FORMAT_VERSION:
            raise ValueError(f"snapshot format {meta.get('v')!r} is not {FORMAT_VERSION}")
        dimension = int(meta["dimension"])
        memories = [memory_from_dict(doc) for doc in meta["memories"]]
        turns = [memory_from_dict(doc) for doc in meta["turns"]]
        vectors = np.frombuffer(body, dtype="<f4", offset=4 + size).astype(np.float32)
        vectors = vectors.reshape(len(memories) + len(turns), dimension)
        return State(int(meta["seq"]), dimension, Stamp.decode(meta["hlc"]), memories,
                     vectors[: len(memories)], frozenset(meta["tombstones"]), turns,
                     vectors[len(memories) :], frozenset(meta["seen"]),
                     {memory_id: {name: Stamp.decode(raw) for name, raw in stamps.items()}
                      for memory_id, stamps in meta["stamps"].items()},
                     {str(kind): float(at) for kind, at in meta.get("upkeep", {}).items()})
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise IntegrityError(f"snapshot body does not parse: {exc}") from exc
