"""Each memory's field stamps: which operation last wrote each of its fields.

A put stamps every field of its memory at once (`BASE`); an update, a trash
or a restore stamps the fields it writes. Most memories are never updated,
so most hold the put's stamp alone: held as that one `Stamp`, not as a
one-entry dict, a memory's stamps cost ~64 bytes rather than ~250 (the dict
is 184): 18 MB of a 100k vault, 180 MB at 1M. A memory with stamps of its
own fields holds a dict, as every memory did.

Read, `FieldStamps` is the mapping memory id -> {field or BASE: stamp} that
snapshots carry and tests compare; `vault/state.py` writes it through
`put`, `set` and `discard`, and reads a field's stamp with `of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from memvaultd.model.hlc import Stamp

BASE = "*"  # the stamp of the put, for every field not written since

_Entry = Stamp | dict[str, Stamp]


class FieldStamps(Mapping[str, Mapping[str, Stamp]]):
    def __init__(self, stamps: Mapping[str, Mapping[str, Stamp]] | None = None) -> None:
        """A copy of `stamps` (another `FieldStamps`, or plain dicts)."""
        self._entries: dict[str, _Entry] = {}
        if isinstance(stamps, FieldStamps):
            self._entries = {memory_id: entry if isinstance(entry, Stamp) else dict(entry)
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
        for memory_id, name, stamp in rows:  # inline for the first, by far the commonest
            if memory_id not in entries:
                entries[memory_id] = stamp if name == BASE else {name: stamp}
            else:
                stamps.set(memory_id, name, stamp)
        return stamps

    def rows(self) -> Iterator[tuple[str, str, Stamp]]:
        """(memory id, field or BASE, stamp) for every stamp, memory by memory."""
        for memory_id, entry in self._entries.items():
            if isinstance(entry, Stamp):
                yield memory_id, BASE, entry
            else:
                for name, stamp in entry.items():
                    yield memory_id, name, stamp

    def __getitem__(self, memory_id: str) -> Mapping[str, Stamp]:
        """A copy of the memory's stamps: they change only through this object."""
        entry = self._entries[memory_id]
        return {BASE: entry} if isinstance(entry, Stamp) else dict(entry)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def of(self, memory_id: str, name: str) -> Stamp | None:
        """The stamp that decides field `name`: its own, else the put's."""
        entry = self._entries.get(memory_id)
        if entry is None or isinstance(entry, Stamp):
            return entry
        return entry.get(name) or entry.get(BASE)

    def put(self, memory_id: str, stamp: Stamp) -> None:
        """Every field of the memory stamped `stamp` (a first put)."""
        self._entries[memory_id] = stamp

    def set(self, memory_id: str, name: str, stamp: Stamp) -> None:
        """Field `name` (or BASE) of the memory stamped `stamp`."""
        entry = self._entries.get(memory_id)
        if entry is None:
            self._entries[memory_id] = stamp if name == BASE else {name: stamp}
        elif isinstance(entry, Stamp):
            self._entries[memory_id] = stamp if name == BASE else {BASE: entry, name: stamp}
        else:
            entry[name] = stamp

    def replace(self, stamps: Mapping[str, Mapping[str, Stamp]]) -> None:
        """Each memory of `stamps` takes its stamps there, whole."""
        for memory_id, entry in FieldStamps(stamps)._entries.items():
            self._entries[memory_id] = entry

    def discard(self, memory_id: str) -> None:
        self._entries.pop(memory_id, None)
