"""Each memory's field stamps: which operation last wrote each of its fields.

A put stamps every field of its memory at once (`BASE`); an update, a trash
or a restore stamps the fields it writes. Most memories are never updated,
so most hold the put's stamp alone: held as that one `Stamp`, not as a
one-entry dict, a memory's stamps cost ~64 bytes rather than ~250 (the dict
is 184): 18 MB of a 100k vault, 180 MB at 1M. A memory with stamps of its
own fields holds a dict, as every memory did.

The put stamps of a loaded vault (`from_batches`, a snapshot body's columns;
`from_rows`) are held as three arrays (wall time, counter, device) and each
memory's row in them, one of the shared row numbers (`ints.py`): 17 bytes a
memory rather than a `Stamp`'s 74, 57 MB at 1M memories. A `Stamp` is made
when one is read.

Read, `FieldStamps` is the mapping memory id -> {field or BASE: stamp} that
snapshots carry and tests compare; `vault/state.py` writes it through
`put`, `set` and `discard`, and reads a field's stamp with `of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import cast

import numpy as np
import numpy.typing as npt

from memvaultd.model import ints
from memvaultd.model.hlc import Stamp

BASE = "*"  # the stamp of the put, for every field not written since

# A row of the put stamps' arrays (`_Loaded`), a put's stamp, or a dict.
_Entry = int | Stamp | dict[str, Stamp]
_new_stamp = partial(tuple.__new__, Stamp)


class _Loaded:
    """The put stamps `from_rows` or `from_batches` read, row by row."""

    __slots__ = ("codes", "counters", "devices", "walls")

    def __init__(self, walls: list[int] | npt.NDArray[np.int64],
                 counters: list[int] | npt.NDArray[np.int64], devices: list[str],
                 codes: list[int] | npt.NDArray[np.integer]) -> None:
        self.walls = np.asarray(walls, dtype=np.int64)
        self.counters = np.asarray(counters, dtype=np.int64)
        self.devices = devices
        self.codes: npt.NDArray[np.integer] = np.asarray(
            codes, dtype=np.uint8 if len(devices) <= 256 else np.uint32)

    def stamp(self, row: int) -> Stamp:
        return _new_stamp((self.walls.item(row), self.counters.item(row),
                           self.devices[self.codes.item(row)]))

    def joined(self, other: _Loaded) -> _Loaded:
        """These rows, then `other`'s."""
        mine = {name: code for code, name in enumerate(self.devices)}
        remap = np.array([mine.setdefault(name, len(mine)) for name in other.devices],
                         dtype=np.int64)
        return _Loaded(np.concatenate([self.walls, other.walls]),
                       np.concatenate([self.counters, other.counters]), list(mine),
                       np.concatenate([self.codes.astype(np.int64), remap[other.codes]]))


_NONE_LOADED = _Loaded([], [], [], [])


@dataclass(frozen=True, slots=True)
class StampBatch:
    """Rows of stamps as columns, as a snapshot body holds them: each row's
    memory id, field (`fields[field_codes[row]]`: a field or BASE), wall
    time, counter and device (`devices[device_codes[row]]`)."""

    ids: Sequence[str]
    fields: Sequence[str]
    field_codes: npt.NDArray[np.integer]
    walls: npt.NDArray[np.int64]
    counters: npt.NDArray[np.int64]
    devices: Sequence[str]
    device_codes: npt.NDArray[np.integer]

    def check(self) -> None:
        """ValueError unless every column holds a value a row and every code
        names one of its words."""
        rows = len(self.ids)
        if {len(self.field_codes), len(self.walls), len(self.counters),
                len(self.device_codes)} != {rows}:
            raise ValueError(f"stamp columns of unequal rows for {rows} ids")
        for what, codes, words in (("field", self.field_codes, self.fields),
                                   ("device", self.device_codes, self.devices)):
            if rows and (int(codes.min()) < 0 or int(codes.max()) >= len(words)):
                raise ValueError(f"a stamp's {what} code beyond its {len(words)} words")

    def puts_only(self) -> bool:
        """Whether every row is a put's stamp (BASE)."""
        bases = [code for code, name in enumerate(self.fields) if name == BASE]
        return bool(np.isin(self.field_codes, bases).all())

    def rows(self) -> Iterator[tuple[str, str, Stamp]]:
        fields, devices = self.fields, self.devices
        for memory_id, field, wall, counter, device in zip(
                self.ids, self.field_codes.tolist(), self.walls.tolist(),
                self.counters.tolist(), self.device_codes.tolist(), strict=True):
            yield memory_id, fields[field], _new_stamp((wall, counter, devices[device]))


def _batch_of(rows: list[tuple[str, str, Stamp]]) -> StampBatch:
    ids, names, stamps = zip(*rows, strict=True)
    walls, counters, devices = zip(*stamps, strict=True)
    fields, field_codes = _coded(names)
    device_words, device_codes = _coded(devices)
    return StampBatch(ids, fields, field_codes, np.array(walls, dtype=np.int64),
                      np.array(counters, dtype=np.int64), device_words, device_codes)


def _coded(values: Sequence[str]) -> tuple[list[str], npt.NDArray[np.int64]]:
    """The distinct `values` in the order met, and each value's place among them."""
    words: dict[str, int] = {}
    codes = [words.setdefault(value, len(words)) for value in values]
    return list(words), np.array(codes, dtype=np.int64)


class _Reader:
    """The put stamps of a `FieldStamps` being read: rows one at a time
    (`rows`), or batches of puts whole (`puts`), in any order."""

    def __init__(self, stamps: FieldStamps) -> None:
        self.stamps = stamps
        self.walls: list[int] = []
        self.counters: list[int] = []
        self.codes: list[int] = []
        # Arrays of whole batches and of the rows before them, in row order.
        self.parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                               npt.NDArray[np.int64]]] = []
        self.held = 0  # rows in `parts`
        self.devices: dict[str, int] = {}
        self.names: list[str] = []

    def device(self, name: str) -> int:
        code = self.devices.setdefault(name, len(self.devices))
        if code == len(self.names):
            self.names.append(name)
        return code

    def rows(self, rows: Iterable[tuple[str, str, Stamp]]) -> None:
        stamps = self.stamps
        entries = stamps._entries
        walls, counters, codes = self.walls, self.counters, self.codes
        rows_of = ints.table(0)
        for memory_id, name, stamp in rows:  # inline for the first, by far the commonest
            entry = entries.get(memory_id)
            if entry is None and name == BASE:
                wall, counter, device = stamp
                row = self.held + len(walls)
                if row >= len(rows_of):
                    rows_of = ints.table(2 * row + 1024)
                entries[memory_id] = rows_of[row]
                walls.append(wall)
                counters.append(counter)
                codes.append(self.device(device))
            elif entry is None:
                entries[memory_id] = {name: stamp}
            else:
                if isinstance(entry, int):  # its put's stamp, then a field's
                    entries[memory_id] = self.stamp(entry)
                stamps.set(memory_id, name, stamp)

    def puts(self, batch: StampBatch) -> None:
        """Every row of `batch` a put of a memory not met before: taken whole."""
        self._flush()
        mine = np.array([self.device(name) for name in batch.devices], dtype=np.int64)
        count = len(batch.ids)
        self.parts.append((np.asarray(batch.walls, dtype=np.int64),
                           np.asarray(batch.counters, dtype=np.int64), mine[batch.device_codes]))
        # An id twice in the batch: its later row, as `rows` would take it.
        self.stamps._entries.update(zip(batch.ids, ints.shared(self.held, self.held + count),
                                        strict=True))
        self.held += count

    def stamp(self, row: int) -> Stamp:
        """The put stamp of row `row` so far."""
        if row >= self.held:
            at = row - self.held
            return _new_stamp((self.walls[at], self.counters[at], self.names[self.codes[at]]))
        for walls, counters, codes in self.parts:
            if row < len(walls):
                return _new_stamp((int(walls[row]), int(counters[row]),
                                   self.names[int(codes[row])]))
            row -= len(walls)
        raise AssertionError("a row below the rows held is in a part")

    def _flush(self) -> None:
        """The rows read one at a time so far, as arrays after the parts."""
        if self.walls:
            self.parts.append((np.array(self.walls, dtype=np.int64),
                               np.array(self.counters, dtype=np.int64),
                               np.array(self.codes, dtype=np.int64)))
            self.held += len(self.walls)
            self.walls, self.counters, self.codes = [], [], []

    def loaded(self) -> _Loaded:
        self._flush()
        if not self.parts:
            return _Loaded([], [], self.names, [])
        walls, counters, codes = (np.concatenate(column) for column in zip(*self.parts,
                                                                             strict=True))
        return _Loaded(walls, counters, self.names, codes)


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

    def only(self, memory_ids: Iterable[str]) -> FieldStamps:
        """A copy holding the stamps of those of `memory_ids` it holds (a
        delta's): the put stamps' arrays shared, no `Stamp` made."""
        part = FieldStamps()
        part._loaded = self._loaded
        entries = self._entries
        part._entries = {memory_id: entry if not isinstance(entry, dict) else dict(entry)
                         for memory_id in memory_ids
                         if (entry := entries.get(memory_id)) is not None}
        return part

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str, Stamp]]) -> FieldStamps:
        """Stamps from (memory id, field or BASE, stamp) rows, as `rows` gives them."""
        stamps = cls()
        reader = _Reader(stamps)
        reader.rows(rows)
        stamps._loaded = reader.loaded()
        return stamps

    @classmethod
    def from_batches(cls, batches: Iterable[StampBatch]) -> FieldStamps:
        """`from_rows` of the rows of `batches` in turn (ValueError for one
        whose columns disagree). A batch of puts alone, of memories not
        met before (a snapshot body's, but for the few memories with stamps
        of their own fields), is taken whole, its columns as arrays, without
        a `Stamp` a row: at 1M memories 2.2 s of a 13-18 s start were the
        stamps read a row at a time (`scripts/bench_recall.py`'s vault)."""
        stamps = cls()
        reader = _Reader(stamps)
        for batch in batches:
            batch.check()
            if (batch.puts_only() and batch.ids
                    and not any(map(stamps._entries.__contains__, batch.ids))):
                reader.puts(batch)
            else:
                reader.rows(batch.rows())
        stamps._loaded = reader.loaded()
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

    def batches(self, size: int) -> Iterator[StampBatch]:
        """Every stamp (`rows`), as batches of up to `size` rows: first the
        put stamps held as rows of the loaded arrays, gathered from them
        without a `Stamp` made (156k of a 1M vault's delta were 0.9 s as
        rows), then the others."""
        loaded_ids: list[str] = []
        loaded_rows: list[int] = []
        others: list[tuple[str, _Entry]] = []
        for memory_id, entry in self._entries.items():
            if isinstance(entry, int):
                loaded_ids.append(memory_id)
                loaded_rows.append(entry)
            else:
                others.append((memory_id, entry))
        loaded = self._loaded
        at = np.array(loaded_rows, dtype=np.int64)
        for start in range(0, len(at), size):
            rows = at[start : start + size]
            yield StampBatch(loaded_ids[start : start + size], (BASE,),
                             np.zeros(len(rows), dtype=np.uint8), loaded.walls[rows],
                             loaded.counters[rows], loaded.devices, loaded.codes[rows])
        rest = ((memory_id, name, stamp) for memory_id, entry in others
                for name, stamp in (entry.items() if isinstance(entry, dict)
                                    else ((BASE, cast(Stamp, entry)),)))
        while batch := list(islice(rest, size)):
            yield _batch_of(batch)

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
        """Each memory of `stamps` takes its stamps there, whole. Put stamps
        `stamps` holds as rows of its arrays (a delta's, read) stay rows:
        its arrays are joined after these (a 1M vault's delta of 156k made
        a `Stamp` each at every start and cut them at every stop)."""
        other = stamps if isinstance(stamps, FieldStamps) else FieldStamps(stamps)
        shift = len(self._loaded.walls)
        if len(other._loaded.walls):
            self._loaded = self._loaded.joined(other._loaded)
        rows = ints.table(len(self._loaded.walls))
        entries = self._entries
        for memory_id, entry in other._entries.items():
            entries[memory_id] = (rows[shift + entry] if isinstance(entry, int)
                                  else dict(entry) if isinstance(entry, dict) else entry)

    def discard(self, memory_id: str) -> None:
        self._entries.pop(memory_id, None)
