"""`EventStream`: the daemon's events as `Client.events()` streams them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType

import grpc

from memvault import wire
from memvault.types import Event
from memvault_base.errors import MemvaultError
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["EventStream"]


class EventStream(Iterator[Event]):
    """The daemon's events as they happen; ends when cancelled or closed.

    Iterate it; `cancel()` (alias `close()`, also on leaving a `with` block)
    ends the iteration cleanly from any thread.
    """

    def __init__(
        self,
        call: grpc._CallIterator[pb.Event],
        translate: Callable[[grpc.RpcError], MemvaultError],
    ) -> None:
        self._call = call
        self._translate = translate
        self._cancelled = False

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        try:
            msg = next(self._call)
        except grpc.RpcError as err:
            if self._cancelled or (
                isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.CANCELLED
            ):
                raise StopIteration from None
            raise self._translate(err) from None
        return wire.event(msg)

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()

    close = cancel

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()
