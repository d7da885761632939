"""Each memory's field stamps: which operation last wrote each of its fields.

A put stamps every field of its memory at once (`BASE`); an update, a trash
or a restore stamps the fields it writes. Most memories are never updated,
so most hold the put's stamp alone: held as that one `Stamp`, not as a
one-entry dict, a memory's stamps cost ~64 bytes rather than ~250 (the dict
is 184): 18 MB of a 100k vault, 180 MB at 1M. A memory with stamps of its
own fields holds a dict, as every memory did.

The put stamps of a loaded vault (`from_rows`) are held as three arrays
(wall time, counter, device) and each memory's row in them, one of the
shared row numbers (`ints.py`): 17 bytes a memory rather than a `Stamp`'s
74, 57 MB at 1M memories. A `Stamp` is made when one is read.

Read, `FieldStamps` is the mapping memory id -> {field or BASE: stamp} that
snapshots carry and tests compare; `vault/state.py` writes it through
`put`, `set` and `discard`, and reads a field's stamp with `of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import partial

import numpy as np
import numpy.typing as npt

from memvaultd.model import ints
from memvaultd.model.hlc import Stamp

BASE = "*"  # the stamp of the put, for every field not written since

# A row of the put stamps' arrays (`_Loaded`), a put's stamp, or a dict.
_Entry = int | Stamp | dict[str, Stamp]
_new_stamp = partial(tuple.__new__, Stamp)


class _Loaded:
    """The put stamps `from_rows` read, row by row."""

    __slots__ = ("codes", "counters", "devices", "walls")

    def __init__(self, walls: list[int], counters: list[int], devices: list[str],
                 codes: list[int]) -> None:
        self.walls = np.array(walls, dtype=np.int64)
        self.counters = np.array(counters, dtype=np.int64)
        self.devices = devices
        self.codes: npt.NDArray[np.integer] = np.array(
            codes, dtype=np.uint8 if len(devices) <= 256 else np.uint32)

    def stamp(self, row: int) -> Stamp:
        return _new_stamp((self.walls.item(row), self.counters.item(row),
                           self.devices[self.codes.item(row)]))


_NONE_LOADED = _Loaded([], [], [], [])


class FieldStamps(Mapping[str, Mapping[str, Stamp]]):
    def __init__(self, stamps: Mapping[str, Mapping[str, Stamp]] | None = None) -> None:
        """A copy of `stamps` (another `FieldStamps`, or plain dicts)."""
        self._entries: dict[str, _Entry] = {}
        self._loaded = _NONE_LOADED
        if isinstance(stamps, FieldStamps):
            self._loaded = stamps._loaded  # never changed: shared
            self._entries = {memory_id: entry if not isinstance(entry, dict) else dict(entry)
                             for memory_id, entry in stamps._entries.items()}
        elif stamps:
            for memory_id, fields in stamps.items():
                for name, stamp in fields.items():
                    self.set(memory_id, name, stamp)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str, Stamp]]) -> FieldStamps:
        """Stamps from (memory id, field or BASE, stamp) rows, as `rows` gives them."""
        stamps = cls()
        entries = stamps._entries
        walls: list[int] = []
        counters: list[int] = []
        codes: list[int] = []
        devices: dict[str, int] = {}
        names: list[str] = []
        rows_of = ints.table(0)
        for memory_id, name, stamp in rows:  # inline for the first, by far the commonest
            entry = entries.get(memory_id)
            if entry is None and name == BASE:
                wall, counter, device = stamp
                row = len(walls)
                if row == len(rows_of):
                    rows_of = ints.table(2 * row + 1024)
                entries[memory_id] = rows_of[row]
                walls.append(wall)
                counters.append(counter)
                code = devices.setdefault(device, len(devices))
                if code == len(names):
                    names.append(device)
                codes.append(code)
            elif entry is None:
                entries[memory_id] = {name: stamp}
            else:
                if isinstance(entry, int):  # its put's stamp, then a field's
                    entries[memory_id] = _new_stamp((walls[entry], counters[entry],
                                                     names[codes[entry]]))
                stamps.set(memory_id, name, stamp)
        stamps._loaded = _Loaded(walls, counters, names, codes)
        return stamps

    def _entry(self, memory_id: str) -> Stamp | dict[str, Stamp] | None:
        entry = self._entries.get(memory_id)
        return self._loaded.stamp(entry) if isinstance(entry, int) else entry

    def rows(self) -> Iterator[tuple[str, str, Stamp]]:
        """(memory id, field or BASE, stamp) for every stamp, memory by memory."""
        loaded = self._loaded.stamp
        for memory_id, entry in self._entries.items():
            if isinstance(entry, int):
                yield memory_id, BASE, loaded(entry)
            elif isinstance(entry, Stamp):
                yield memory_id, BASE, entry
            else:
                for name, stamp in entry.items():
                    yield memory_id, name, stamp

    def __getitem__(self, memory_id: str) -> Mapping[str, Stamp]:
        """A copy of the memory's stamps: they change only through this object."""
        entry = self._entry(memory_id)
        if entry is None:
            raise KeyError(memory_id)
        return {BASE: entry} if isinstance(entry, Stamp) else dict(entry)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def of(self, memory_id: str, name: str) -> Stamp | None:
        """The stamp that decides field `name`: its own, else the put's."""
        entry = self._entry(memory_id)
        if entry is None or isinstance(entry, Stamp):
            return entry
        return entry.get(name) or entry.get(BASE)

    def put(self, memory_id: str, stamp: Stamp) -> None:
        """Every field of the memory stamped `stamp` (a first put)."""
        self._entries[memory_id] = stamp

    def set(self, memory_id: str, name: str, stamp: Stamp) -> None:
        """Field `name` (or BASE) of the memory stamped `stamp`."""
        entry = self._entry(memory_id)
        if entry is None:
            self._entries[memory_id] = stamp if name == BASE else {name: stamp}
        elif isinstance(entry, Stamp):
            self._entries[memory_id] = stamp if name == BASE else {BASE: entry, name: stamp}
        else:
            entry[name] = stamp

    def replace(self, stamps: Mapping[str, Mapping[str, Stamp]]) -> None:
        """Each memory of `stamps` takes its stamps there, whole."""
        other = stamps if isinstance(stamps, FieldStamps) else FieldStamps(stamps)
        for memory_id in other._entries:
            entry = other._entry(memory_id)
            assert entry is not None
            self._entries[memory_id] = entry if isinstance(entry, Stamp) else dict(entry)

    def discard(self, memory_id: str) -> None:
        self._entries.pop(memory_id, None)
