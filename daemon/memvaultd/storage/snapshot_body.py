"""The snapshot body: the whole vault state at one log position.

Version 3 (written), in Apache Arrow's IPC stream format:

    body    := head_len:u32 BE | head:head_len bytes (UTF-8 JSON)
               | memories | turns | stamps | tombstones | seen
    head    := {"v": 3, "seq": N, "dimension": D, "hlc": [wall_ms, counter, device],
                "rows": [MEMORIES, TURNS],
                "sections": [bytes of memories, turns, stamps, tombstones, seen],
                "upkeep": {"sweep" | "consolidate": seconds},
                "base": SEQ, "gone": [ID, ...]}                  (a delta only)
    section := one Arrow IPC stream: its schema, record batches of at most
               16,384 rows (each dictionary batch before the first record
               batch that uses it), the end-of-stream marker

    memories, turns: a column per Memory field, then "vector"
        str fields: utf8, but type, tier, category, scope, source, entity,
            session_id and the other short ones (`_SHARED_STRINGS`):
            dictionary<int32, utf8>
        tags: list<dictionary<int32, utf8>>   consolidated_from: list<utf8>
        payload: utf8 (the JSON text of the dict)
        float: float64   int: int64   bool: bool
        vector: fixed_size_list<float16 or float32>[D], the dtype of the
            matrix the index held (float16 from 20k memories, `index/half.py`)
    stamps: id: utf8 | field: dictionary<int32, utf8> (a field, or "*")
            | wall_ms: int64 | counter: int64 | device: dictionary<int32, utf8>
    tombstones, seen: id: utf8

Why columns in batches: a start reads the body a sealed chunk at a time
(`SnapshotStore.open`) and builds each batch's memories from its columns,
its vectors copied into the index's own matrix (`read_body`'s `allocate`):
the whole decrypted body is never held, nor a float32 copy of a float16
matrix (154 MB at 100k memories, 1.5 GB at 1M). The memories are read
into columns (`model/records.py`), not objects: a text column is kept as
its UTF-8 bytes, a dictionary column as codes and one Python string per
distinct value. A writer encodes a batch at a time and is asked between
batches whether to give up (`cancelled`).

A column a memory field lacks takes the field's default (an older writer);
one naming no field is refused (a newer writer's field is not dropped).

Versions 1 and 2 are still read:

    body   := meta_len:u32 BE | meta:meta_len bytes (UTF-8 JSON) | vectors
    meta v2 := {"v": 2, "seq": N, "dimension": D, "hlc": [wall_ms, counter, device],
                "memories": {FIELD: [value of memory 0, of memory 1, ...], ...},
                "turns": {FIELD: [...], ...},
                "tombstones": [ID, ...], "seen": [OP_ID, ...],
                "stamps": {"ids": [ID, ...], "fields": [FIELD or "*", ...],
                           "wall_ms": [...], "counter": [...], "device": [i, ...],
                           "devices": [DEVICE, ...]},
                "upkeep": {...}, "base": SEQ, "gone": [ID, ...]}
    meta v1 := {"v": 1, ..., "memories": [{every Memory field}, ...], "turns": [...],
                "stamps": {ID: {FIELD or "*": [wall_ms, counter, device]}}, ...}
    vectors:= (len(memories) + len(turns)) x D x float32 LE: the memories' rows,
              then the turns' rows, in list order

`snapshots.py` seals the body; this module only builds and parses it.

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
import io
import json
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import partial
from itertools import chain, islice, repeat
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]  # ships no py.typed
import pyarrow.ipc as ipc  # type: ignore[import-untyped]

from memvault_base.errors import IntegrityError
from memvaultd.model.hlc import Stamp
from memvaultd.model.memory import Memory
from memvaultd.model.op_ids import OpIds
from memvaultd.model.operations import check_kinds, memory_from_dict, memory_to_dict
from memvaultd.model.records import (
    NUMBERS,
    TEXTS,
    Coded,
    Constant,
    Numbers,
    Payloads,
    Records,
    TableBuilder,
    Texts,
)
from memvaultd.model.stamps import FieldStamps, StampBatch
from memvaultd.storage.snapshots import Cancel, SnapshotCancelled

FORMAT_VERSION = 3
_LEN = struct.Struct(">I")
# Rows per record batch: a batch's columns and Memory objects take ~10-40
# ms to encode or decode at 100k, so a writer gives up the interpreter lock
# that often, and a reader holds one batch's temporaries (a few MB).
BATCH_ROWS = 16_384

# The matrix rows of a body's memories or turns: float32, or float16 as a
# large vault's index holds them (`index/half.py`).
Rows = npt.NDArray[np.float32] | npt.NDArray[np.float16]
# A matrix for (rows, dimension, dtype the body holds) to be read into; its
# first `rows` rows are the body's vectors (`read_body`).
Allocate = Callable[[int, int, np.dtype[Any]], Rows]


@dataclass(frozen=True)
class SnapshotBody:
    seq: int
    dimension: int
    stamp: Stamp
    # A read body's: `Records` (columns); a body to write: any sequence.
    memories: Sequence[Memory]
    vectors: Rows
    tombstones: frozenset[str]
    turns: Sequence[Memory]
    turn_vectors: Rows
    seen: Set[str] = frozenset()  # read: an `OpIds`
    stamps: Mapping[str, Mapping[str, Stamp]] = field(default_factory=dict)
    # When a sweep / consolidation last ran, on any device (docs/upkeep.md).
    upkeep: dict[str, float] = field(default_factory=dict)
    # A delta: the seq of the full snapshot it is laid over (-1: a full
    # snapshot), and the memories purged since.
    base: int = -1
    gone: frozenset[str] = frozenset()


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def encode_body(state: SnapshotBody) -> bytes:
    return b"".join(encode_body_parts(state))


def encode_body_parts(state: SnapshotBody, cancelled: Cancel | None = None
                      ) -> list[bytes | memoryview]:
    """The body of `state` as parts whose concatenation is `encode_body`;
    `cancelled` is asked between record batches (`SnapshotCancelled` if it
    says so).

    A snapshot is written from the parts (`SnapshotStore.write`) so that no
    single call holds the interpreter lock for long while writes wait: at
    600k memories one `json.dumps` of a whole body held it for 1.8 s, and
    a RememberBatch running meanwhile took 3.3 s instead of 0.95.
    """
    def check() -> None:
        if cancelled is not None and cancelled():
            raise SnapshotCancelled(f"snapshot {state.seq} given up")

    check()
    dimension = state.dimension
    sections = [
        _stream(_memory_schema(dimension, state.vectors.dtype),
                _memory_batches(state.memories, state.vectors), check),
        _stream(_memory_schema(dimension, state.turn_vectors.dtype),
                _memory_batches(state.turns, state.turn_vectors), check),
        _stream(_STAMPS, _stamp_batches(state.stamps), check),
        _stream(_IDS, _id_batches(sorted(state.tombstones)), check),
        _stream(_IDS, _id_batches(state.seen if isinstance(state.seen, OpIds)
                                  else sorted(state.seen)), check),
    ]
    head: dict[str, Any] = {
        "v": FORMAT_VERSION, "seq": state.seq, "dimension": dimension,
        "hlc": state.stamp.encode(), "rows": [len(state.memories), len(state.turns)],
        "sections": [sum(map(len, parts)) for parts in sections],
        "upkeep": dict(state.upkeep)}
    if state.base >= 0:
        head |= {"base": state.base, "gone": sorted(state.gone)}
    encoded = _dumps(head).encode()
    return [_LEN.pack(len(encoded)), encoded, *chain.from_iterable(sections)]


_dumps = partial(json.dumps, separators=(",", ":"), ensure_ascii=False)


class _Parts(io.RawIOBase):
    """What an Arrow stream writer writes, kept as the pieces it wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        piece = bytes(data)
        self.parts.append(piece)
        return len(piece)


def _stream(schema: pa.Schema, batches: Iterable[list[pa.Array]], check: Callable[[], None]
            ) -> list[bytes]:
    """One IPC stream of `batches` (each a list of columns), `check`ed
    before each."""
    sink = _Parts()
    with ipc.new_stream(sink, schema) as writer:
        for columns in batches:
            check()
            writer.write_batch(pa.record_batch(columns, schema=schema))
    return sink.parts


_WORDS = pa.dictionary(pa.int32(), pa.string())
_STAMPS = pa.schema([("id", pa.string()), ("field", _WORDS), ("wall_ms", pa.int64()),
                     ("counter", pa.int64()), ("device", _WORDS)])
_IDS = pa.schema([("id", pa.string())])
# The string fields whose equal values share one object: every one but the
# text, the id and the topic, whose values rarely repeat. A JSON parser made
# one string per value: a tier, a type, a category or a tag repeated over
# 100k memories was ~60 bytes each time (35 MB of a 100k vault).
_SHARED_STRINGS = frozenset(f.name for f in fields(Memory)
                            if f.type == "str" and f.name not in ("text", "id", "topic_key"))
_SHARED_LISTS = frozenset({"tags"})
_TUPLES = frozenset(f.name for f in fields(Memory) if isinstance(f.default, tuple))
_PAYLOADS = frozenset(f.name for f in fields(Memory) if f.type.startswith("dict"))
_SCALARS = {"str": pa.string(), "float": pa.float64(), "int": pa.int64(), "bool": pa.bool_()}
VECTOR = "vector"


def _field_type(spec: Field[Any]) -> pa.DataType:
    if spec.name in _SHARED_STRINGS:
        return _WORDS
    if spec.name in _TUPLES:
        return pa.list_(_WORDS if spec.name in _SHARED_LISTS else pa.string())
    if spec.name in _PAYLOADS:
        return pa.string()
    return _SCALARS[str(spec.type)]


def _memory_schema(dimension: int, dtype: np.dtype[Any]) -> pa.Schema:
    values = pa.float16() if dtype == np.float16 else pa.float32()
    return pa.schema([*((spec.name, _field_type(spec)) for spec in fields(Memory)),
                      (VECTOR, pa.list_(values, dimension))])


def _memory_batches(memories: Sequence[Memory], vectors: Rows) -> Iterator[list[pa.Array]]:
    dtype = np.float16 if vectors.dtype == np.float16 else np.float32
    dimension = vectors.shape[1] if vectors.ndim == 2 else 0
    for start in range(0, len(memories), BATCH_ROWS):
        part = Records.of(memories[start : start + BATCH_ROWS])
        # A field of a batch at a time, from the columns: no `Memory` made.
        columns = [_written_column(part, spec) for spec in fields(Memory)]
        rows = np.ascontiguousarray(vectors[start : start + len(part)], dtype=dtype)
        columns.append(pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), dimension))
        yield columns


def _encoded(spec: Field[Any], values: list[Any]) -> pa.Array:
    return pa.array(_written(spec, values), type=_field_type(spec))


def _written(spec: Field[Any], values: list[Any]) -> list[Any]:
    """`values` of field `spec` as the body holds them: a payload as its JSON."""
    if spec.name in _PAYLOADS:
        return [_dumps(value) if value else "{}" for value in values]
    return values


def _written_column(part: Records, spec: Field[Any]) -> pa.Array:
    """Field `spec` of every entry of `part`, as the body's column. The
    entries read from a table are taken from its column by Arrow and NumPy
    (a text's bytes as they are, a coded field's distinct values once):
    a 1M vault's delta of 156k memories took 1.7 s as Python values."""
    name = spec.name
    column = part.table.columns.get(name)
    own = part.at >= 0
    if name == "id" or not own.any() or not isinstance(column, (Numbers, Texts, Coded,
                                                                 Constant)):
        return _encoded(spec, part.column(name))
    positions = part.at[own]
    objects = [getattr(part.extra[-a - 1], name) for a in part.at[~own].tolist()]
    if isinstance(column, Numbers):
        numbers: npt.NDArray[Any] = np.empty(len(part), dtype=NUMBERS[name])
        numbers[own] = column.array[positions]
        numbers[~own] = objects
        return pa.array(numbers, type=_field_type(spec))
    # The table's values, then the objects', each entry's taken by its place.
    places = np.empty(len(part), dtype=np.int64)
    if isinstance(column, Texts):
        values = pa.LargeStringArray.from_buffers(
            len(column.offsets) - 1, pa.py_buffer(np.ascontiguousarray(column.offsets)),
            pa.py_buffer(column.data)).take(pa.array(positions, pa.int64()))
        if objects:
            places[own] = np.arange(len(positions))
            places[~own] = np.arange(len(positions), len(part))
            values = pa.concat_arrays([values, pa.array(_written(spec, objects),
                                                        pa.large_string())]).take(places)
        return values.cast(pa.string())
    # A coded field's distinct values met (a constant's one), each written once.
    if isinstance(column, Coded):
        used, places[own] = np.unique(column.codes[positions], return_inverse=True)
        distinct = [column.words[code] for code in used.tolist()]
    else:
        distinct, places[own] = [column.at(0)], 0
    places[~own] = np.arange(len(distinct), len(distinct) + len(objects))
    return pa.array(_written(spec, distinct + objects), type=_field_type(spec)).take(
        pa.array(places))


def _stamp_batches(stamps: Mapping[str, Mapping[str, Stamp]]) -> Iterator[list[pa.Array]]:
    held = stamps if isinstance(stamps, FieldStamps) else FieldStamps(stamps)
    for batch in held.batches(BATCH_ROWS):
        yield [pa.array(batch.ids, pa.string()), _words(batch.field_codes, batch.fields),
               pa.array(batch.walls, pa.int64()), pa.array(batch.counters, pa.int64()),
               _words(batch.device_codes, batch.devices)]


def _words(codes: npt.NDArray[np.integer[Any]], words: Sequence[str]) -> pa.Array:
    """A dictionary column (`_WORDS`) of `codes` into `words`."""
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                          pa.array(words, pa.string()))


def _id_batches(ids: Iterable[str]) -> Iterator[list[pa.Array]]:
    """Sorted `ids` (an `OpIds` iterates in order) a batch at a time."""
    each = iter(ids)
    while batch := list(islice(each, BATCH_ROWS)):
        yield [pa.array(batch, pa.string())]


def new_matrix(rows: int, dimension: int, dtype: np.dtype[Any]) -> Rows:
    matrix: Rows = np.empty((rows, dimension), dtype=dtype)
    return matrix


def decode_body(body: bytes, allocate: Allocate = new_matrix) -> SnapshotBody:
    """The state in `body` (version 1, 2 or 3): `read_body` of the bytes."""
    return read_body(io.BytesIO(body), len(body), allocate)


def decode_published(body: bytes) -> SnapshotBody:
    """A body another device published, as a joiner takes it: `decode_body`,
    and its memories' values as a put's must be (`check_kinds`): strings
    valid UTF-8, no lone surrogate's bytes (a text and a payload are held
    as their bytes, decoded as read, and a reply cannot carry one), numbers
    finite, every payload a JSON object. A body this device sealed is not
    checked so at each start: it was written from what the log took, and
    parsing every payload took 3.6 s at 1M memories."""
    state = decode_body(body)
    try:
        _check_values(state.memories)
        _check_values(state.turns)
    except ValueError as exc:  # a JSONDecodeError, a UnicodeEncodeError among them
        raise IntegrityError(f"snapshot body does not parse: {exc}") from exc
    return state


def _check_values(memories: Sequence[Memory]) -> None:
    """ValueError unless every string of `memories` is valid UTF-8, every
    number finite and every payload a JSON object. A table's text and
    payload columns are checked in Arrow (9 ms at 1M memories; its other
    strings were decoded strictly as they were read), its numbers in NumPy,
    each payload parsed once; objects (a body of version 1 or 2) as a put's
    record is checked."""
    if not isinstance(memories, Records):
        for memory in memories:
            check_kinds(json.loads(_dumps(memory_to_dict(memory)).encode()))
        return
    table = memories.table
    for name, column in table.columns.items():
        if not isinstance(column, Texts):
            continue
        try:
            pa.LargeStringArray.from_buffers(
                len(column.offsets) - 1, pa.py_buffer(np.ascontiguousarray(column.offsets)),
                pa.py_buffer(column.data)).validate(full=True)
        except pa.ArrowInvalid as exc:
            raise ValueError(f"{name!r} holds a value that is not UTF-8: {exc}") from exc
        if isinstance(column, Payloads):
            every = np.arange(len(column.offsets) - 1)
            for memory_id, payload in zip(table.ids, column.each(every), strict=True):
                if not isinstance(payload, dict):
                    raise ValueError(f"the payload of {memory_id} is not a JSON object")
    for name, dtype in NUMBERS.items():
        if np.dtype(dtype).kind == "f" and not np.isfinite(memories.numbers(name)).all():
            raise ValueError(f"{name!r} holds a number that is not finite")


def read_body(source: Readable, length: int, allocate: Allocate = new_matrix) -> SnapshotBody:
    """The state in the `length` bytes `source` reads, read front to back
    and parsed as they come (version 3; 1 and 2 are read whole first).

    The vectors are the first rows of matrices `allocate` makes, one for
    the memories and one for the turns, in the dtype it chooses (the
    body's are converted as they are copied in): whoever keeps them can
    make them its own without another copy (`MemoryIndex.restore`)."""
    try:
        prefix = source.read(_LEN.size)
        (size,) = _LEN.unpack(prefix)
        encoded = source.read(size)
        if len(encoded) != size:
            raise ValueError("the head is cut short")
        if _version(encoded) != FORMAT_VERSION:
            return _decode_json_body(_whole(prefix + encoded, source, length))
        head = json.loads(encoded)
        with collector_paused():
            body = _read_sections(head, source, length - _LEN.size - size, allocate)
        if source.read(1):
            raise ValueError("bytes after the last section")
        return body
    except (ValueError, KeyError, IndexError, TypeError, struct.error, pa.ArrowException) as exc:
        raise IntegrityError(f"snapshot body does not parse: {exc}") from exc


_VERSION = re.compile(rb'\s*\{\s*"v"\s*:\s*(\d+)\s*[,}]')


def _version(head: bytes) -> object:
    """The "v" of a head or meta: every writer puts it first, so it is read
    without parsing a version 2 meta twice (33 MB of JSON at 100k memories:
    +1 s and +160 MB at a start); parsed in full if not first."""
    found = _VERSION.match(head)
    if found:
        return int(found[1])
    meta = json.loads(head)
    return meta.get("v") if isinstance(meta, dict) else None


_PIECE = 4 * 1024 * 1024  # a sealed chunk


def _whole(start: bytes, source: Readable, length: int) -> bytearray:
    """The body of `length` bytes that begins with `start` and goes on in
    `source`, read into one buffer a piece at a time: a version 1 or 2 body
    is parsed whole, and joining its chunks then the head and the rest held
    it two and three times over (+330 MB at 100k memories)."""
    body = bytearray(length)
    body[: len(start)] = start
    at = len(start)
    while at < length:
        piece = source.read(min(_PIECE, length - at))
        if not piece:
            raise ValueError(f"the body ends at {at} of {length} bytes")
        body[at : at + len(piece)] = piece
        at += len(piece)
    return body


def _read_sections(head: dict[str, Any], source: Readable, length: int, allocate: Allocate
                   ) -> SnapshotBody:
    dimension = int(head["dimension"])
    lengths = [int(size) for size in head["sections"]]
    counts = [int(count) for count in head["rows"]]
    if len(lengths) != 5 or len(counts) != 2 or sum(lengths) != length or min(lengths) < 0:
        raise ValueError(f"sections {lengths} of rows {counts} in a body of {length} bytes")
    strings: dict[str, str] = {}
    memories, vectors = _read_memories(_Section(source, lengths[0]), counts[0], dimension,
                                       strings, allocate)
    turns, turn_vectors = _read_memories(_Section(source, lengths[1]), counts[1], dimension,
                                         strings, allocate)
    # The stamps' ids as the same objects as the records' (81 bytes each,
    # 8 MB at 100k): a column decodes to one string per value.
    ids = {memory_id: memory_id for memory_id in chain(memories.ids(), turns.ids())}
    stamps = FieldStamps.from_batches(_read_stamps(_Section(source, lengths[2]), strings, ids))
    del ids
    tombstones = frozenset(_read_ids(_Section(source, lengths[3])))
    seen = _read_op_ids(_Section(source, lengths[4]))
    return SnapshotBody(int(head["seq"]), dimension, Stamp.decode(head["hlc"]), memories,
                        vectors, tombstones, turns, turn_vectors, seen, stamps,
                        {str(kind): float(at) for kind, at in head.get("upkeep", {}).items()},
                        int(head.get("base", -1)), frozenset(head.get("gone", ())))


class _Section:
    """The next `length` bytes of `source`, as a file an Arrow reader reads."""

    def __init__(self, source: Readable, length: int) -> None:
        self._source = source
        self.left = length
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        data = self._source.read(size)
        if len(data) != size:
            raise ValueError("a section is cut short")
        self.left -= size
        return data

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The stream's record batches; ValueError if bytes follow its end."""
        reader = ipc.open_stream(self)
        yield from reader
        if self.left:
            raise ValueError(f"{self.left} bytes after the end of a section's stream")


def _read_memories(section: _Section, count: int, dimension: int, strings: dict[str, str],
                   allocate: Allocate) -> tuple[Records, Rows]:
    reader = ipc.open_stream(section)
    names = reader.schema.names
    if unknown := sorted(set(names) - _MEMORY_FIELDS - {VECTOR}):
        # A newer writer's field: refused rather than dropped, as in a put.
        raise ValueError(f"unknown memory fields {unknown}")
    vector_type = reader.schema.field(VECTOR).type
    if (not pa.types.is_fixed_size_list(vector_type) or vector_type.list_size != dimension
            or vector_type.value_type not in (pa.float16(), pa.float32())):
        raise ValueError(f"vectors of {vector_type}, not of {dimension} floats")
    matrix = allocate(count, dimension, np.dtype(vector_type.value_type.to_pandas_dtype()))
    if matrix.shape[0] < count or matrix.shape[1:] != (dimension,):
        raise ValueError(f"a matrix of {matrix.shape} for {count} rows")
    table = TableBuilder(strings)
    for spec in fields(Memory):
        if spec.name not in names:
            table.add_missing(spec.name)
    read = 0
    later: dict[str, list[pa.Array]] = {}
    for batch in reader:
        size = batch.num_rows
        if read + size > count:
            raise ValueError(f"more than the {count} memories the head says")
        for spec in fields(Memory):
            if spec.name in names:
                column = batch.column(spec.name)
                if _coded_at_the_end(spec, column):
                    later.setdefault(spec.name, []).append(column.dictionary_encode())
                else:
                    _add_column(table, spec, column)
        rows = batch.column(VECTOR).flatten().to_numpy(zero_copy_only=True)
        matrix[read : read + size] = rows.reshape(size, dimension)
        read += size
    if section.left:
        raise ValueError(f"{section.left} bytes after the end of a section's stream")
    if read != count:
        raise ValueError(f"{read} memories where the head says {count}")
    for name, parts in later.items():
        table.add_whole(name, *_coded_whole(parts))
    return Records.whole(table.table(count)), matrix[:count]


def _coded_at_the_end(spec: Field[Any], column: pa.Array) -> bool:
    """Whether `column` is a string field's whose values rarely repeat (the
    topic: `_field_type`), held as codes of distinct values, coded over the
    whole section at its end (`_coded_whole`)."""
    return (str(spec.type) == "str" and spec.name not in ("id", *TEXTS, *_PAYLOADS)
            and pa.types.is_string(column.type) and not column.null_count)


def _coded_whole(parts: list[pa.DictionaryArray]) -> tuple[list[str], npt.NDArray[np.int64]]:
    """The distinct values of a column read in batches (each batch's values
    dictionary-encoded), and each row's code: in Arrow's hashing, without a
    Python call a value. Coded batch by batch through a dict, the
    benchmark's 1M distinct topics took ~3.4 s of a start."""
    values = pa.concat_arrays([part.dictionary for part in parts]).dictionary_encode()
    words: list[str] = values.dictionary.to_pylist()
    to_whole = values.indices.to_numpy().astype(np.int64)
    starts = np.cumsum([0, *(len(part.dictionary) for part in parts)])
    codes = np.concatenate([to_whole[start + part.indices.to_numpy()]
                            for part, start in zip(parts, starts, strict=False)])
    return words, codes


_MEMORY_FIELDS = frozenset(f.name for f in fields(Memory))


def _add_column(table: TableBuilder, spec: Field[Any], column: pa.Array) -> None:
    """One field's values for a batch of memories, into `table`."""
    if column.null_count:
        raise ValueError(f"{spec.name!r} holds nulls")
    name = spec.name
    if name in _TUPLES:
        if not pa.types.is_list(column.type):
            raise ValueError(f"{name!r} is {column.type}, not a list")
        offsets = column.offsets.to_numpy()
        if offsets[0] == offsets[-1]:  # no entry holds any: one code for all
            table.add_coded(name, [()], np.zeros(len(column), dtype=np.int64))
            return
        table.add_coded(name, *_tuples(column))
        return
    kind = str(spec.type)
    if name in _PAYLOADS or name in TEXTS:
        if not pa.types.is_string(column.type):
            raise ValueError(f"{name!r} is {column.type}, not {pa.string()}")
        _validity, offsets, data = column.buffers()
        ends = np.frombuffer(offsets, np.int32)[column.offset : column.offset + len(column) + 1]
        first, last = int(ends[0]), int(ends[-1])
        table.add_text(name, bytes(memoryview(data)[first:last]) if data else b"",
                       ends.astype(np.int64) - first)
        return
    if kind == "str":
        if pa.types.is_dictionary(column.type):
            if column.indices.null_count:
                raise ValueError("a dictionary column holds nulls")
            table.add_coded(name, _strings(column.dictionary, None),
                            column.indices.to_numpy())
        elif name == "id":
            table.add(name, _strings(column, None))
        else:  # a plain string column is coded at the section's end (`_coded_at_the_end`)
            raise ValueError(f"{name!r} is {column.type}, not {pa.string()}")
        return
    expected = _SCALARS[kind]
    if column.type != expected:
        raise ValueError(f"{name!r} is {column.type}, not {expected}")
    # A copy, not a view: a view holds the batch's whole body (its vectors
    # among it) until the section ends, and each batch then lands in memory
    # never touched before: at 1M memories ~220k page faults, 2 s of a start.
    table.add_numbers(name, np.array(column.to_numpy(zero_copy_only=False)))


def _tuples(column: pa.ListArray) -> tuple[list[tuple[str, ...]], npt.NDArray[np.int64]]:
    """A list column's distinct values as tuples, in the order their first
    rows come, and each row's code into them. The rows are grouped by
    length and each group's word codes made distinct by NumPy, so Python
    makes a tuple for each distinct value rather than each row: a batch of
    16k memories of two tags each (the benchmark's) reads in 2.6-2.8 ms
    against 8-10 ms row by row; its 1M, ~0.2 s of a start against 0.6-1.1."""
    values = column.values
    if not pa.types.is_dictionary(values.type):
        if not pa.types.is_string(values.type):
            raise ValueError(f"a list of {values.type} where strings belong")
        values = values.dictionary_encode()
    if values.null_count or values.indices.null_count:
        raise ValueError("a list column holds nulls")
    words = _strings(values.dictionary, None)
    # A word a dictionary holds twice is one word: its first place.
    place: dict[str, int] = {}
    first_place = np.fromiter(map(place.setdefault, words, range(len(words))), np.int64,
                              count=len(words))
    flat = first_place[values.indices.to_numpy()]
    offsets = column.offsets.to_numpy().astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    codes = np.empty(len(column), dtype=np.int64)
    distinct: list[tuple[str, ...]] = []
    first: list[int] = []
    for length in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == length)
        unique, where, inverse = _distinct_rows(flat[starts[rows, None] + np.arange(length)],
                                                len(words))
        codes[rows] = len(distinct) + inverse.reshape(-1)
        distinct += [tuple(words[word] for word in key) for key in unique.tolist()]
        first += rows[where].tolist()
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return [distinct[i] for i in order.tolist()], rank[codes]


def _distinct_rows(keys: npt.NDArray[np.int64], base: int
                   ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """`np.unique(keys, axis=0)` with the first index and the inverse. Rows
    of codes below `base` are read as one number each where that fits in 62
    bits (empty rows as 0): NumPy sorts rows as opaque records, 1.45 s
    for the benchmark's 1M two-word rows, where the whole of `_tuples`
    over them takes ~0.2 s read as numbers."""
    if base ** keys.shape[1] < 2**62:
        packed = keys @ (base ** np.arange(keys.shape[1], dtype=np.int64))
        _, where, inverse = np.unique(packed, return_index=True, return_inverse=True)
        return keys[where], where, inverse
    unique, where, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return unique, where, inverse


def _defaults(spec: Field[Any], count: int) -> Iterable[Any]:
    """A field's default for `count` memories of a body older than the field."""
    if spec.default is not MISSING:
        return repeat(spec.default, count)
    if spec.default_factory is not MISSING:
        return (spec.default_factory() for _ in range(count))
    raise ValueError(f"memories lack the field {spec.name!r}")


def _strings(column: pa.Array, strings: dict[str, str] | None) -> list[str]:
    """A column of strings (a dictionary column's decoded once per distinct
    value, and those shared through `strings`)."""
    if pa.types.is_dictionary(column.type):
        words = _strings(column.dictionary, strings)
        if column.indices.null_count:
            raise ValueError("a dictionary column holds nulls")
        return list(map(words.__getitem__, column.indices.to_numpy().tolist()))
    if not pa.types.is_string(column.type):
        raise ValueError(f"a column of {column.type} where strings belong")
    values: list[str] = column.to_pylist()
    if strings is not None:
        one = strings.setdefault
        values = list(map(one, values, values))
    return values


_new_stamp = partial(tuple.__new__, Stamp)  # C-level: Stamp(...) costs 3x as much


def _read_stamps(section: _Section, strings: dict[str, str], known_ids: dict[str, str]
                 ) -> Iterator[StampBatch]:
    """The stamps section's record batches as columns (`FieldStamps.from_batches`)."""
    for batch in section.batches():
        if batch.schema != _STAMPS:
            raise ValueError(f"stamps of {batch.schema}")
        if any(column.null_count for column in batch.columns):
            raise ValueError("a stamp holds nulls")
        ids = _strings(batch.column(0), None)
        field, device = batch.column(1), batch.column(4)
        yield StampBatch(list(map(known_ids.setdefault, ids, ids)),
                         _strings(field.dictionary, strings), field.indices.to_numpy(),
                         np.array(batch.column(2).to_numpy()),  # copies: as a number column's
                         np.array(batch.column(3).to_numpy()),
                         _strings(device.dictionary, strings), device.indices.to_numpy())


def _read_ids(section: _Section) -> Iterator[str]:
    for batch in section.batches():
        yield from _strings(_id_column(batch), None)


def _id_column(batch: pa.RecordBatch) -> pa.Array:
    if batch.schema != _IDS:
        raise ValueError(f"ids of {batch.schema}")
    return batch.column(0)


_OP_ID_CHARACTERS = 32  # an id `new_id` makes: 16 bytes in hex


def _read_op_ids(section: _Section) -> OpIds:
    """The operation ids of a section, a batch of 32-byte ids read as one
    array of characters rather than a string each (`OpIds`)."""
    texts: list[npt.NDArray[np.uint8]] = []
    others: list[str] = []
    for batch in section.batches():
        column = _id_column(batch)
        if column.null_count:
            raise ValueError("an id is null")
        _, offsets_buffer, data = column.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[
            column.offset : column.offset + len(column) + 1]
        if len(column) and (np.diff(offsets) == _OP_ID_CHARACTERS).all():
            characters = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]]
            texts.append(characters.reshape(-1, _OP_ID_CHARACTERS))
        else:
            others += _strings(column, None)
    text = np.concatenate(texts) if texts else np.zeros((0, _OP_ID_CHARACTERS), np.uint8)
    return OpIds.of_text(text, others)


def vector_rows(body_len: int, head: bytes, dimension: int) -> int:
    """How many vectors (memories, then turns) a body of `body_len` bytes
    that begins with `head` holds: the head's counts (version 3), or what
    follows its meta, 4 x `dimension` bytes a row (versions 1 and 2)."""
    try:
        size: int = _LEN.unpack_from(head)[0]
        if _LEN.size + size <= len(head):
            meta = json.loads(head[_LEN.size : _LEN.size + size])
            if isinstance(meta, dict) and meta.get("v") == FORMAT_VERSION:
                return sum(int(count) for count in meta["rows"])
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise IntegrityError(f"snapshot body does not parse: {exc}") from exc
    return max(0, body_len - _LEN.size - size) // (4 * dimension)


# -- versions 1 and 2 ------------------------------------------------------------


def _decode_json_body(body: bytes | bytearray) -> SnapshotBody:
    """The state in `body`, version 1 or 2. The vectors are a read-only view
    of `body` (whoever keeps them copies them once, into its own matrix)."""
    try:
        with collector_paused():
            (size,) = _LEN.unpack_from(body)
            meta = json.loads(body[4 : 4 + size])
            version = meta.get("v")
            if version == 2:
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
                raise ValueError(f"snapshot format {version!r} is not 1, 2 or {FORMAT_VERSION}")
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
        return _defaults(spec, count)
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
