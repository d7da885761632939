"""The client's trash calls: what `forget` put in the trash, restoring from
it, and emptying it.

A forgotten memory waits in the trash, on every synced device, until the
daemon purges it (`trash.retention_days` after it was forgotten, 30 by
default); recall and every other read never see it meanwhile. `Client`
inherits these; `forget` itself is in `memvault.writes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memvault import wire
from memvault.connection import Connection
from memvault.types import ForgetResult, Memory
from memvault_base.errors import InvalidArgument
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["RestoreResult", "TrashCalls", "TrashedMemory"]


@dataclass(frozen=True)
class TrashedMemory:
    """A memory in the trash: when it was forgotten, by what ("cli", "mcp",
    "client", "sweep", "watch"), and when the daemon purges it for good."""

    memory: Memory
    trashed_at: float
    trashed_by: str
    purge_at: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.memory.id, "text": self.memory.text, "trashed_at": self.trashed_at,
                "trashed_by": self.trashed_by, "purge_at": self.purge_at,
                "memory": self.memory.to_dict()}


@dataclass(frozen=True)
class RestoreResult:
    """The memories brought back, every field as before, and the write's txid."""

    txid: int
    memories: tuple[Memory, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"txid": self.txid, "memories": [m.to_dict() for m in self.memories]}


class TrashCalls(Connection):
    """Mixed into `Client`, which calls `_trash_stubs` from its `_make_stubs`."""

    def _trash_stubs(self) -> None:
        self._list_trash = self._unary("ListTrash", pb.ListTrashRequest, pb.ListTrashReply)
        self._restore = self._unary("RestoreFromTrash", pb.RestoreFromTrashRequest,
                                    pb.RestoreFromTrashReply)
        self._empty_trash = self._unary("EmptyTrash", pb.EmptyTrashRequest, pb.EmptyTrashReply)

    def trash(self) -> list[TrashedMemory]:
        """What the trash holds, the most recently forgotten first."""
        reply = self._call(self._list_trash, pb.ListTrashRequest())
        return [TrashedMemory(wire.memory(t.memory), t.trashed_at, t.trashed_by, t.purge_at)
                for t in reply.memories]

    def restore(self, ids: Sequence[str]) -> RestoreResult:
        """Bring these memories back from the trash, on every synced device.

        An id that is not forgotten comes back as it is; one that is neither
        in the vault nor in the trash (purged) raises NotFound. An empty list
        raises InvalidArgument before anything is sent (`restore_all` brings
        everything back)."""
        if isinstance(ids, str):
            ids = [ids]
        if not ids:
            raise InvalidArgument("restore needs at least one id; restore_all() takes every one")
        reply = self._call(self._restore, pb.RestoreFromTrashRequest(ids=list(ids)))
        return RestoreResult(reply.txid, tuple(wire.memory(m) for m in reply.memories))

    def restore_all(self) -> RestoreResult:
        """Bring back every memory in the trash."""
        reply = self._call(self._restore, pb.RestoreFromTrashRequest(all=True))
        return RestoreResult(reply.txid, tuple(wire.memory(m) for m in reply.memories))

    def empty_trash(self) -> ForgetResult:
        """Purge everything in the trash, for good and on every synced device."""
        reply = self._call(self._empty_trash, pb.EmptyTrashRequest())
        return ForgetResult(txid=reply.txid, ids=tuple(reply.ids), purged=True)
