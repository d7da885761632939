"""The servicer's blocking methods behind the core's asyncio servers: the
link's for unary calls from the front process (`link.py`), grpc's for
streams and health (`server.py`). Both call the same handlers.

The servicer is plain blocking code (it waits on locks, the model, the disk),
so each call runs on a worker thread of a pool while the event loop only
moves bytes. A method may also have an *at-once* variant, run on the loop
itself: it answers when it can do so without waiting, or returns None and
the call goes to the pool. Recall has one: a recall whose query vector is
cached and whose vault is loaded is pure computing, ~2 ms at 100k memories
(up to 500k memories; beyond, recalls overlap better on the workers:
`vault_reads.AT_ONCE_MAX_MEMORIES`). A recall sent to the workers that
will wait for nothing runs on threads of its own, one per core
(`Computing`, server.py).

Why not grpc's thread-pool server: on the 2-core machine of
docs/benchmarks.md, with 8 clients mixing recalls and remembers against a
100k vault, its recalls take turns on the interpreter lock with its polling
thread and with each other, ~58-63 thread switches per call against ~11-16
here, and the daemon spent 2.6-2.9 ms of CPU per call against 1.9-2.0 ms;
8 clients got 402-470 calls/s through it against 516-556 here (the same
runs, alternating). Sending every call to the pool, recalls included, gave
416-437 calls/s: the gain is the recall computed on the loop, without
handing it between threads.

The price: while a recall computes on the loop, no other call starts. A
recall is a few ms (the budget: 25 ms p99 with the model, which at-once
recalls never call), and they could not run side by side anyway, holding
the interpreter lock; a recall that meets an index being grown waits for it
(~1 s at 1M memories) as it would on a thread, and holds the other calls
meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

import grpc


class _Aborted(Exception):
    """`WorkerContext.abort`, carried from the worker thread to the loop."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class WorkerContext:
    """What a servicer method asks of its call, from any thread: to abort
    it (raises, as grpc's own `abort` does) and whether it is still live."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self.finished = False

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Aborted(code, details)

    def is_active(self) -> bool:
        return not (self.finished or self._context.done())


Unary = Callable[[Any, WorkerContext], Any]


@dataclass(frozen=True)
class Computing:
    """Where a method's calls go that will only compute, waiting for
    nothing: a pool of their own, one thread per core (server.py says why),
    and how to tell them (`ready`). A call that may wait goes to the shared
    pool, so that it holds none of these threads while it waits."""

    pool: Executor
    ready: Callable[[Any], bool]


def unary(behaviour: Unary, pool: Executor, at_once: Unary | None = None,
          computing: Computing | None = None) -> Callable[[Any, Any], Any]:
    """A unary handler: `at_once` on the loop if given and it answers, else
    `behaviour` on a worker: of `computing`'s pool if the call is ready
    there, else of `pool`."""
    async def handle(request: Any, context: Any) -> Any:
        call = WorkerContext(context)
        try:
            if at_once is not None:
                reply = at_once(request, call)
                if reply is not None:
                    return reply
            chosen = pool
            if computing is not None and computing.ready(request):
                chosen = computing.pool
            return await asyncio.get_running_loop().run_in_executor(chosen, behaviour, request,
                                                                    call)
        except _Aborted as aborted:
            await context.abort(aborted.code, aborted.details)
        finally:
            call.finished = True
    return handle


class OpenStreams:
    """The server-streaming calls in progress (touched on the loop only), so
    that a stopping daemon can end them: an `Events` subscriber would
    otherwise hold the stop for its whole grace period (20 s)."""

    def __init__(self) -> None:
        self._calls: set[WorkerContext] = set()

    def opened(self, call: WorkerContext) -> None:
        self._calls.add(call)

    def closed(self, call: WorkerContext) -> None:
        self._calls.discard(call)

    def end_all(self) -> None:
        """Each open stream sees its call inactive and ends (`Events` within 0.5 s)."""
        for call in self._calls:
            call.finished = True


def stream(behaviour: Callable[[Any, WorkerContext], Iterator[Any]], pool: Executor,
           open_streams: OpenStreams) -> Callable[[Any, Any], AsyncIterator[Any]]:
    """A server-streaming handler: each item is produced on a worker (one
    `next` at a time) and sent from the loop."""
    async def handle(request: Any, context: Any) -> AsyncIterator[Any]:
        call = WorkerContext(context)
        open_streams.opened(call)
        items = behaviour(request, call)
        end = object()
        pending: Future[Any] | None = None
        try:
            while True:
                pending = pool.submit(next, items, end)
                item = await asyncio.wrap_future(pending)
                pending = None
                if item is end:
                    return
                yield item
        except _Aborted as aborted:
            await context.abort(aborted.code, aborted.details)
        finally:
            # The client went away or the stream ended: let an item still
            # being produced finish (Events wakes every 0.5 s and sees the
            # call finished), then run the generator's `finally`.
            call.finished = True
            open_streams.closed(call)
            with contextlib.suppress(RuntimeError):  # the pool is shut: the daemon is stopping
                pool.submit(_close_after, pending, items)
    return handle


def _close_after(pending: Future[Any] | None, items: Iterator[Any]) -> None:
    if pending is not None:
        with contextlib.suppress(BaseException):
            pending.result()
    close = getattr(items, "close", None)
    if close is not None:
        close()
