"""Memories held as columns: a `Memory` made only for the one asked for.

A snapshot's memories are read into a `Table`, one array a field, and an
index holds the table instead of a `Memory` object a memory. The object,
its strings, floats and dict were ~680 bytes a memory at 1M benchmark
memories, against ~290 here, ids and topics included (the text's UTF-8
bytes and offset, a code or a number a field); docs/architecture.md has
the measured table. A recall makes the objects of the ~10 memories it
returns (~1.8 us each), a sweep those of every memory, one at a time as it
walks them; a listing reads its keys from the columns.

`Records` is the sequence a vault passes around: the table's entries in
some order, and `Memory` objects among them (a delta's, or written since
the load). It reads like a list of memories; `column` and `numbers` read a
field of every entry without making the objects.

Values that repeat (a type, a tier, a tag list, a topic, a session) are
held once and coded; a field the whole table holds one value of is held as
that value. The strings a table hands out are those objects, so a map
keyed by them (the index's ids, the layer's topics) shares them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import MISSING, Field, fields
from functools import partial
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from memvaultd.model.memory import Memory

# Places in a table (int32 while a table holds under 2**31 entries: 4 MB a
# million), or -1 - k for the k-th object beside it.
Positions = npt.NDArray[np.integer[Any]]

FIELD_NAMES = tuple(spec.name for spec in fields(Memory))


def _default(spec: Field[Any]) -> Callable[[], Any] | None:
    if spec.default_factory is not MISSING:
        return spec.default_factory
    if spec.default is not MISSING:
        return partial(_same, spec.default)
    return None


def _same(value: Any) -> Any:
    return value


_DEFAULTS = {spec.name: _default(spec) for spec in fields(Memory)}
# Fields a memory holds as text of its own, rarely repeated: as UTF-8 bytes
# and offsets. The payload is its JSON text ("{}" for most).
TEXTS = frozenset({"text"})
PAYLOADS = frozenset(spec.name for spec in fields(Memory) if str(spec.type).startswith("dict"))
_NUMBER_TYPES = {"float": np.float64, "int": np.int64, "bool": np.bool_}
NUMBERS = {spec.name: _NUMBER_TYPES[str(spec.type)] for spec in fields(Memory)
           if str(spec.type) in _NUMBER_TYPES}


class Column:
    """One field of a table's entries."""

    __slots__ = ()

    def at(self, i: int) -> Any:
        raise NotImplementedError

    def values(self, positions: Positions) -> list[Any]:
        """The values at `positions` (each >= 0), in order."""
        at = self.at
        return [at(i) for i in positions.tolist()]


class Constant(Column):
    """A field every entry holds the same value of (or the default of a
    field a body lacks). A dict is made anew each time: it is mutable."""

    __slots__ = ("make", "value")

    def __init__(self, value: Any, make: Callable[[], Any] | None = None) -> None:
        self.value = value
        self.make = make

    def at(self, i: int) -> Any:
        return self.value if self.make is None else self.make()

    def values(self, positions: Positions) -> list[Any]:
        if self.make is None:
            return [self.value] * len(positions)
        return [self.make() for _ in range(len(positions))]


class Coded(Column):
    """Values held once each (`words`), an entry's the one its code names."""

    __slots__ = ("codes", "words")

    def __init__(self, words: list[Any], codes: npt.NDArray[np.integer[Any]]) -> None:
        self.words = words
        self.codes = codes

    def at(self, i: int) -> Any:
        return self.words[self.codes.item(i)]

    def values(self, positions: Positions) -> list[Any]:
        return list(map(self.words.__getitem__, self.codes[positions].tolist()))

    def mapped(self, how: Callable[[Any], Any], dtype: Any, positions: Positions
               ) -> npt.NDArray[Any]:
        """`how` of each entry's value, worked out once a distinct value."""
        table = np.fromiter(map(how, self.words), dtype=dtype, count=len(self.words))
        values: npt.NDArray[Any] = table[self.codes[positions]]
        return values


# A text a put accepted may hold a lone surrogate (`check_text`'s count).
_UTF8 = ("utf-8", "surrogatepass")


class Texts(Column):
    """Strings as their UTF-8 bytes, one after the other, and offsets."""

    __slots__ = ("data", "offsets")

    def __init__(self, data: bytes, offsets: npt.NDArray[np.int64]) -> None:
        self.data = data
        self.offsets = offsets

    def at(self, i: int) -> Any:
        return self.data[self.offsets.item(i) : self.offsets.item(i + 1)].decode(*_UTF8)

    def values(self, positions: Positions) -> list[Any]:
        return list(self.each(positions))

    def each(self, positions: Positions) -> Iterator[Any]:
        """The values at `positions`, made as they are read."""
        data, offsets = self.data, self.offsets
        starts, ends = offsets[positions].tolist(), offsets[positions + 1].tolist()
        for start, end in zip(starts, ends, strict=True):
            yield data[start:end].decode(*_UTF8)


class Payloads(Texts):
    """Payload dicts as their JSON text."""

    __slots__ = ()

    def at(self, i: int) -> dict[str, Any]:
        return _payload(super().at(i))

    def each(self, positions: Positions) -> Iterator[Any]:
        return map(_payload, super().each(positions))


def _payload(text: str) -> dict[str, Any]:
    if text == "{}":
        return {}
    payload: dict[str, Any] = json.loads(text)
    return payload


class Numbers(Column):
    """A float, int or bool field as a NumPy array."""

    __slots__ = ("array",)

    def __init__(self, array: npt.NDArray[Any]) -> None:
        self.array = array

    def at(self, i: int) -> Any:
        return self.array.item(i)

    def values(self, positions: Positions) -> list[Any]:
        values: list[Any] = self.array[positions].tolist()
        return values


class Table:
    """The memories of a snapshot, a `Column` a field, and their ids (the
    one field held as a list: every map of the vault is keyed by them)."""

    __slots__ = ("_values", "_varying", "columns", "ids")

    def __init__(self, ids: list[str], columns: dict[str, Column]) -> None:
        if missing := [name for name in FIELD_NAMES if name != "id" and name not in columns]:
            raise ValueError(f"a table without the fields {missing}")
        self.ids = ids
        self.columns = columns
        # A memory's values: the fields every entry holds alike set once,
        # the others read at each `memory` (2.5 us a memory with a call a
        # field, ~1 us so: most fields of most vaults hold one value).
        order = [None, *(columns[name] for name in FIELD_NAMES[1:])]
        self._values: list[Any] = [column.value if isinstance(column, Constant)
                                   and column.make is None else None for column in order]
        self._varying = [(k, column.at) for k, column in enumerate(order)
                         if column is not None and self._values[k] is None]

    def __len__(self) -> int:
        return len(self.ids)

    def memory(self, i: int) -> Memory:
        values = self._values.copy()
        values[0] = self.ids[i]
        for k, at in self._varying:
            values[k] = at(i)
        return Memory(*values)

    def joined(self, other: Table) -> Table:
        """This table's entries, then `other`'s (a delta's over its
        snapshot's): each column the two joined, no value made again."""
        if not len(self) or not len(other):
            return other if not len(self) else self
        return Table([*self.ids, *other.ids], _times_shared({
            name: _joined(name, column, len(self), other.columns[name], len(other))
            for name, column in self.columns.items()}))


_NO_TABLE = Table([], {name: Constant(None) for name in FIELD_NAMES})


class Records(Sequence[Memory]):
    """Memories in order: entry i is the table's entry `at[i]` when that is
    >= 0, else `extra[-at[i] - 1]`. Never changed once made: each change
    (`taken`, `replaced`, `extended`) is a new `Records` sharing the table."""

    __slots__ = ("at", "extra", "table")
    __hash__ = None  # type: ignore[assignment]  # compared by value, as a list

    def __init__(self, table: Table | None, at: Positions, extra: list[Memory]) -> None:
        self.table = table or _NO_TABLE
        self.at = at
        self.extra = extra

    @classmethod
    def of(cls, memories: Iterable[Memory]) -> Records:
        """`memories` as records: a `Records` itself, or objects."""
        if isinstance(memories, Records):
            return memories
        extra = list(memories)
        return cls(None, -1 - np.arange(len(extra), dtype=np.int64), extra)

    @classmethod
    def whole(cls, table: Table) -> Records:
        return cls(table, np.arange(len(table), dtype=_place_type(len(table))), [])

    def __len__(self) -> int:
        return len(self.at)

    @overload
    def __getitem__(self, i: int) -> Memory: ...
    @overload
    def __getitem__(self, i: slice) -> Records: ...

    def __getitem__(self, i: int | slice) -> Memory | Records:
        if isinstance(i, slice):
            return Records(self.table, self.at[i], self.extra)
        a = self.at.item(i)
        return self.table.memory(a) if a >= 0 else self.extra[-a - 1]

    def __iter__(self) -> Iterator[Memory]:
        memory, extra = self.table.memory, self.extra
        for a in self.at.tolist():
            yield memory(a) if a >= 0 else extra[-a - 1]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Records, list, tuple)):
            return len(self) == len(other) and all(
                mine == theirs for mine, theirs in zip(self, other, strict=True))
        return NotImplemented

    def __repr__(self) -> str:
        return f"Records({len(self)} memories, {len(self.extra)} as objects)"

    def taken(self, indices: Sequence[int] | npt.NDArray[np.integer[Any]]) -> Records:
        """Entries `indices`, in that order."""
        return Records(self.table, self.at[np.asarray(indices, dtype=np.int64)], self.extra)

    def picked(self, indices: Positions, memories: Sequence[Memory]) -> Records:
        """Entry k is entry `indices[k]` where that is >= 0, else the next
        of `memories` in order."""
        at = np.empty(len(indices), dtype=np.int64)
        own = indices >= 0
        at[own] = self.at[indices[own]]
        start = len(self.extra)
        at[~own] = -1 - np.arange(start, start + len(memories), dtype=np.int64)
        return Records(self.table, at, [*self.extra, *memories])

    def replaced(self, indices: Sequence[int] | Positions, memories: Sequence[Memory]) -> Records:
        """Entry `indices[k]` replaced by `memories[k]`, each k."""
        at = self.at.copy()
        start = len(self.extra)
        at[np.asarray(indices, dtype=np.int64)] = -1 - np.arange(start, start + len(memories))
        return Records(self.table, at, [*self.extra, *memories])

    def extended(self, memories: Sequence[Memory]) -> Records:
        """These records, then `memories`."""
        start = len(self.extra)
        added = -1 - np.arange(start, start + len(memories), dtype=np.int64)
        return Records(self.table, np.concatenate([self.at, added]), [*self.extra, *memories])

    @classmethod
    def chained(cls, parts: Sequence[Records]) -> Records:
        """`parts` one after the other. Parts of one table (a vault's layers,
        restored from one snapshot) stay its entries; the entries of any
        other table become objects, made once here. Iterated into a list, a
        1M vault's snapshot made a `Memory` for every memory (~1.2 GB)."""
        tables = [part.table for part in parts if (part.at >= 0).any()]
        table = max(tables, key=len, default=None)
        at: list[Positions] = []
        extra: list[Memory] = []
        for part in parts:
            if part.table is not table and (part.at >= 0).any():
                part = cls.of(list(part))
            # The k-th object of this part is the (len(extra) + k)-th of the chain.
            at.append(np.where(part.at >= 0, part.at, part.at - len(extra)))
            extra.extend(part.extra)
        joined = np.concatenate(at) if at else np.zeros(0, dtype=np.int64)
        return cls(table, joined, extra)

    def ids(self) -> list[str]:
        return self.column("id")

    def column(self, name: str) -> list[Any]:
        """Field `name` of every entry, in order, without making the memories."""
        own = self.at >= 0
        positions = self.at[own]
        found = (list(map(self.table.ids.__getitem__, positions.tolist())) if name == "id"
                 else self.table.columns[name].values(positions))
        if own.all():
            return found
        values: list[Any] = [None] * len(self.at)
        for i, value in zip(np.flatnonzero(own).tolist(), found, strict=True):
            values[i] = value
        for i, value in zip(np.flatnonzero(~own).tolist(), self._of_objects(name, own),
                            strict=True):
            values[i] = value
        return values

    def each(self, name: str) -> Iterator[Any]:
        """`column`, made as it is read: a text column's strings are ~140
        bytes each, 140 MB for 1M memories were they all made at once."""
        column = self.table.columns.get(name)
        if not isinstance(column, Texts):
            return iter(self.column(name))
        if (self.at >= 0).all():
            return column.each(self.at)
        return self._each_mixed(name, column)

    def _each_mixed(self, name: str, column: Column) -> Iterator[Any]:
        extra = self.extra
        for a in self.at.tolist():
            yield column.at(a) if a >= 0 else getattr(extra[-a - 1], name)

    def numbers(self, name: str, dtype: Any = None) -> npt.NDArray[Any]:
        """Field `name` of every entry as an array (a float, int or bool field)."""
        dtype = dtype or NUMBERS[name]
        out = np.empty(len(self.at), dtype=dtype)
        own = self.at >= 0
        column = self.table.columns.get(name)
        if own.any():
            positions = self.at[own]
            if isinstance(column, Numbers):
                out[own] = column.array[positions]
            else:
                out[own] = np.array(column.values(positions) if column else [], dtype=dtype)
        if not own.all():
            out[~own] = self._of_objects(name, own)
        return out

    def mapped(self, name: str, how: Callable[[Any], Any], dtype: Any) -> npt.NDArray[Any]:
        """`how` of field `name` of every entry, as an array: once a distinct
        value of a coded field (a tier, a scope, a session) rather than an entry."""
        column = self.table.columns.get(name)
        if not isinstance(column, (Coded, Constant)):
            return np.fromiter(map(how, self.column(name)), dtype=dtype, count=len(self))
        out = np.empty(len(self.at), dtype=dtype)
        own = self.at >= 0
        if own.any():
            if isinstance(column, Coded):
                out[own] = column.mapped(how, dtype, self.at[own])
            else:
                out[own] = how(column.at(0))
        if not own.all():
            out[~own] = np.fromiter(map(how, self._of_objects(name, own)), dtype=dtype,
                                    count=int((~own).sum()))
        return out

    def _of_objects(self, name: str, own: npt.NDArray[np.bool_]) -> list[Any]:
        """Field `name` of the entries that are objects (`own` False), in order."""
        extra = self.extra
        return [getattr(extra[-a - 1], name) for a in self.at[~own].tolist()]


def columns_of(memories: Sequence[Memory]) -> Table:
    """A table of `memories` (objects): what a snapshot body read gives."""
    builder = TableBuilder()
    for name in FIELD_NAMES:
        builder.add(name, [getattr(memory, name) for memory in memories])
    return builder.table(len(memories))


class TableBuilder:
    """A table, a field's values at a time (`add`), chunk after chunk."""

    def __init__(self, strings: dict[str, str] | None = None) -> None:
        self._strings = strings if strings is not None else {}
        self._ids: list[str] = []
        self._codes: dict[str, dict[Any, int]] = {}
        self._words: dict[str, list[Any]] = {}
        self._code_chunks: dict[str, list[npt.NDArray[np.int64]]] = {}
        self._texts: dict[str, list[bytes]] = {}
        self._offsets: dict[str, list[npt.NDArray[np.int64]]] = {}
        self._sizes: dict[str, int] = {}
        self._numbers: dict[str, list[npt.NDArray[Any]]] = {}
        self._missing: set[str] = set()

    def add(self, name: str, values: list[Any]) -> None:
        """The next entries' values of field `name` (every field the same count)."""
        if name == "id":
            self._ids += values
        elif name in TEXTS or name in PAYLOADS:
            texts = map(_dumped, values) if name in PAYLOADS else values
            encoded = [text.encode(*_UTF8) for text in texts]
            self.add_text(name, b"".join(encoded), np.cumsum(
                [0, *map(len, encoded)], dtype=np.int64))
        elif name in NUMBERS:
            self.add_numbers(name, np.asarray(values, dtype=NUMBERS[name]))
        else:
            self.add_words(name, values)

    def add_missing(self, name: str) -> None:
        """Field `name` absent from the body: its default for every entry."""
        self._missing.add(name)

    def add_words(self, name: str, values: Iterable[Any]) -> None:
        """Values of a coded field (strings, tuples of strings), each
        distinct one kept once; strings shared through the builder's map."""
        self._code_chunks.setdefault(name, []).append(
            np.fromiter(map(self._coder(name), values), dtype=np.int64))

    def add_coded(self, name: str, words: Sequence[Any], codes: npt.NDArray[np.integer[Any]]
                  ) -> None:
        """`add_words` of `words[code]` for each of `codes`, each of `words`
        coded once (an Arrow dictionary column's batch)."""
        mine = np.fromiter(map(self._coder(name), words), dtype=np.int64, count=len(words))
        self._code_chunks.setdefault(name, []).append(mine[codes])

    def add_whole(self, name: str, words: list[Any], codes: npt.NDArray[np.int64]) -> None:
        """Every entry's value of a coded field at once: `words[code]` for
        each of `codes`, `words` distinct (no other values of the field)."""
        if name in self._code_chunks:
            raise ValueError(f"{name!r} was given in parts already")
        self._words[name] = words
        self._code_chunks[name] = [codes]

    def _coder(self, name: str) -> Callable[[Any], int]:
        codes = self._codes.setdefault(name, {})
        words = self._words.setdefault(name, [])
        one = self._strings.setdefault

        def code(value: Any) -> int:
            found = codes.get(value)
            if found is None:
                found = codes[value] = len(words)
                words.append(one(value, value) if isinstance(value, str)
                             else tuple(one(v, v) for v in value))
            return found

        return code

    def add_text(self, name: str, data: bytes, offsets: npt.NDArray[np.int64]) -> None:
        """UTF-8 bytes of entries' strings, and their offsets in `data`
        (one more than the entries, from 0)."""
        base = self._sizes.get(name, 0)
        self._texts.setdefault(name, []).append(data)
        chunks = self._offsets.setdefault(name, [])
        chunks.append((offsets[1:] if chunks else offsets) + base)
        self._sizes[name] = base + int(offsets[-1])

    def add_numbers(self, name: str, values: npt.NDArray[Any]) -> None:
        self._numbers.setdefault(name, []).append(values)

    def table(self, count: int) -> Table:
        if len(self._ids) != count:
            raise ValueError(f"{len(self._ids)} ids for {count} memories")
        columns: dict[str, Column] = {}
        for name in FIELD_NAMES:
            if name == "id":
                continue
            if not count:
                columns[name] = Constant(None)  # never read
            elif name in self._missing:
                default = _DEFAULTS.get(name)
                if default is None:
                    raise ValueError(f"memories lack the field {name!r}")
                value = default()
                columns[name] = (Constant(value, default) if isinstance(value, dict)
                                 else Constant(value))
            elif name in self._texts:
                offsets = np.concatenate(self._offsets.pop(name))
                data = b"".join(self._texts.pop(name))
                _check_count(name, len(offsets) - 1, count)
                if name in PAYLOADS and data == _EMPTY_PAYLOAD * count:  # most vaults'
                    columns[name] = Constant({}, dict)
                else:
                    columns[name] = (Payloads if name in PAYLOADS else Texts)(data, offsets)
            elif name in self._numbers:
                array = np.concatenate(self._numbers.pop(name))
                _check_count(name, len(array), count)
                columns[name] = _numbers(array)
            elif name in self._code_chunks:
                codes = np.concatenate(self._code_chunks.pop(name))
                _check_count(name, len(codes), count)
                words = self._words.pop(name)
                self._codes.pop(name, None)
                columns[name] = (Constant(words[0]) if len(words) == 1
                                 else Coded(words, codes.astype(_code_type(len(words)))))
            else:
                raise ValueError(f"no values of {name!r}")
        return Table(self._ids, _times_shared(columns))


def _times_shared(columns: dict[str, Column]) -> dict[str, Column]:
    """`columns`, with `last_reinforced_at` the very column of `created_at`
    when every memory holds the same in both: a memory never reinforced
    was written so (`model/drafts.py`), 8 MB at 1M memories."""
    created, reinforced = columns["created_at"], columns["last_reinforced_at"]
    if (isinstance(created, Numbers) and isinstance(reinforced, Numbers)
            and np.array_equal(created.array, reinforced.array)
            and np.array_equal(np.signbit(created.array), np.signbit(reinforced.array))):
        columns["last_reinforced_at"] = created
    return columns


def _joined(name: str, first: Column, count: int, then: Column, more: int) -> Column:
    """Column `first` of `count` entries, then `then` of `more`."""
    if (isinstance(first, Constant) and isinstance(then, Constant) and first.make is then.make
            and first.value == then.value and type(first.value) is type(then.value)
            and not (isinstance(first.value, float) and math.copysign(1, first.value)
                     != math.copysign(1, then.value))):
        return first
    first, then = _spelled(name, first, count), _spelled(name, then, more)
    if isinstance(first, Numbers) and isinstance(then, Numbers):
        return Numbers(np.concatenate([first.array, then.array]))
    if isinstance(first, Coded) and isinstance(then, Coded):  # a word may be held twice
        codes = np.concatenate([first.codes.astype(np.int64),
                                then.codes.astype(np.int64) + len(first.words)])
        words = [*first.words, *then.words]
        return Coded(words, codes.astype(_code_type(len(words))))
    if isinstance(first, Texts) and isinstance(then, Texts):
        offsets = np.concatenate([first.offsets, then.offsets[1:] + first.offsets[-1]])
        return type(first)(first.data + then.data, offsets)
    raise ValueError(f"columns of {name!r} that do not join")


def _spelled(name: str, column: Column, count: int) -> Column:
    """A `Constant` as the column its field's values otherwise are."""
    if not isinstance(column, Constant):
        return column
    if name in NUMBERS:
        return Numbers(np.full(count, column.value, dtype=NUMBERS[name]))
    if name in TEXTS or name in PAYLOADS:
        encoded = [_dumped(value) if name in PAYLOADS else value
                   for value in column.values(np.zeros(count, dtype=np.int64))]
        data = [text.encode(*_UTF8) for text in encoded]
        kind = Payloads if name in PAYLOADS else Texts
        return kind(b"".join(data), np.cumsum([0, *map(len, data)], dtype=np.int64))
    return Coded([column.value], np.zeros(count, dtype=np.uint8))


def _check_count(name: str, held: int, count: int) -> None:
    if held != count:
        raise ValueError(f"{held} values of {name!r} for {count} memories")


def _numbers(array: npt.NDArray[Any]) -> Column:
    """A column of `array`, or its one value when every entry holds it (most
    memories were never reinforced, accessed, given an expiry or trashed:
    6 of the 8 number fields of the benchmark's vault, 48 bytes a memory)."""
    first = array[0]
    same = array == first
    if array.dtype.kind == "f":  # -0.0 is a value of its own
        same &= np.signbit(array) == np.signbit(first)
    if same.all():
        return Constant(first.item())
    return Numbers(array)


def _place_type(count: int) -> type[np.integer[Any]]:
    return np.int32 if count < 2**31 else np.int64


def _code_type(words: int) -> type[np.integer[Any]]:
    for kind in (np.uint8, np.uint16):
        if words <= np.iinfo(kind).max + 1:
            return kind
    return np.uint32


_EMPTY_PAYLOAD = b"{}"


def _dumped(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False) if value else "{}"

