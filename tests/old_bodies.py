"""Snapshot bodies as versions 1 and 2 wrote them (`storage/snapshot_body.py`),
which a start still reads: a JSON meta, then the vectors as float32."""

from __future__ import annotations

import json
import struct
from dataclasses import fields

from memvaultd.model.memory import Memory
from memvaultd.model.operations import memory_to_dict
from memvaultd.model.stamps import FieldStamps
from memvaultd.storage.snapshot_body import SnapshotBody


def version_2(state: SnapshotBody) -> bytes:
    """The body as version 2 wrote it: a JSON meta of one list per field,
    then the vectors as float32."""
    memory_names = [f.name for f in fields(Memory)]

    def columns(memories: list[Memory]) -> dict[str, list[object]]:
        return {name: [list(v) if isinstance(v := getattr(m, name), tuple) else v
                       for m in memories] for name in memory_names}

    rows = list(FieldStamps(state.stamps).rows())
    devices = list(dict.fromkeys(stamp.device for _, _, stamp in rows))
    meta = {"v": 2, "seq": state.seq, "dimension": state.dimension,
            "hlc": state.stamp.encode(),
            "memories": columns(state.memories), "turns": columns(state.turns),
            "tombstones": sorted(state.tombstones), "seen": sorted(state.seen),
            "stamps": {"ids": [r[0] for r in rows], "fields": [r[1] for r in rows],
                       "wall_ms": [r[2].wall_ms for r in rows],
                       "counter": [r[2].counter for r in rows],
                       "device": [devices.index(r[2].device) for r in rows],
                       "devices": devices},
            "upkeep": dict(state.upkeep)}
    if state.base >= 0:
        meta |= {"base": state.base, "gone": sorted(state.gone)}
    head = json.dumps(meta).encode()
    return (struct.pack(">I", len(head)) + head + state.vectors.astype("<f4").tobytes()
            + state.turn_vectors.astype("<f4").tobytes())


def version_1(state: SnapshotBody) -> bytes:
    """The body as version 1 wrote it: one object per memory and per stamp."""
    meta = {"v": 1, "seq": state.seq, "dimension": state.dimension,
            "hlc": state.stamp.encode(),
            "memories": [memory_to_dict(m) for m in state.memories],
            "turns": [memory_to_dict(t) for t in state.turns],
            "tombstones": sorted(state.tombstones), "seen": sorted(state.seen),
            "stamps": {i: {name: s.encode() for name, s in entry.items()}
                       for i, entry in state.stamps.items()},
            "upkeep": dict(state.upkeep)}
    head = json.dumps(meta).encode()
    return (struct.pack(">I", len(head)) + head + state.vectors.astype("<f4").tobytes()
            + state.turn_vectors.astype("<f4").tobytes())
