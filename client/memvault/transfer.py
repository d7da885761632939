"""The client's transfer calls: every memory of the vault out (`export`) and in
(`import_memories`), whole, with ids, times, counts and vectors.

`Client` inherits these; they live apart because they move the vault as a
whole rather than answer for one memory (`memvault export` / `import`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import grpc

from memvault import wire
from memvault.connection import Connection
from memvault.types import ImportResult, Memory
from memvault_base.errors import InvalidArgument, MemvaultError
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["IMPORT_BATCH_SIZE", "TransferCalls"]

# 500 records with 384-float vectors and a paragraph of text each are ~1 MB:
# a quarter of gRPC's default 4 MiB receive limit, at one fsync per batch.
IMPORT_BATCH_SIZE = 500


class TransferCalls(Connection):
    """Mixed into `Client`, which calls `_transfer_stubs` from its `_make_stubs`."""

    def _transfer_stubs(self) -> None:
        self._import = self._unary("Import", pb.ImportRequest, pb.ImportReply)
        self._export = self._stream("Export", pb.ExportRequest, pb.MemoryRecord)

    def export(self, *, include_vectors: bool = False) -> Iterator[Memory]:
        """Every memory of the vault, streamed; superseded ones included.

        There is no overall deadline: a large vault streams for as long as its
        reader takes. Leaving the loop early cancels the stream.
        """
        self._connect()
        try:
            call = self._export(pb.ExportRequest(include_vectors=include_vectors),
                                metadata=self._metadata)
        except grpc.RpcError as err:
            raise self._error(err) from None
        return _stream_memories(call, self._error)

    def import_memories(
        self,
        memories: Iterable[Memory | Mapping[str, Any]],
        *,
        batch_size: int = IMPORT_BATCH_SIZE,
        allow_secret: bool = False,
    ) -> ImportResult:
        """Import whole memories (ids, times, counts, vectors kept), `batch_size` per call.

        A mapping is what `Memory.to_dict()` gives (an `export` line). Nothing
        is duplicated: the daemon keeps what it already holds and counts a
        restatement as a reinforcement. Batches are converted and sent one
        after another, so a bad item stops the import after the batches
        before it were stored.
        """
        if batch_size < 1:
            raise InvalidArgument(f"batch_size must be at least 1, not {batch_size}")
        added = reinforced = txid = 0
        items = enumerate(memories)
        while batch := list(itertools.islice(items, batch_size)):
            records = [wire.import_record(i, m) for i, m in batch]
            reply = self._call(self._import, pb.ImportRequest(memories=records,
                                                                 allow_secret=allow_secret))
            added += reply.added
            reinforced += reply.reinforced
            txid = reply.txid
        return ImportResult(added=added, reinforced=reinforced, txid=txid)


def _stream_memories(
    call: grpc._CallIterator[pb.MemoryRecord],
    translate: Callable[[grpc.RpcError], MemvaultError],
) -> Iterator[Memory]:
    try:
        for record in call:
            yield wire.memory(record)
    except grpc.RpcError as err:
        raise translate(err) from None
    finally:
        call.cancel()  # a no-op once the stream ended; frees it when the reader stopped early
