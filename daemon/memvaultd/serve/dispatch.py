"""Each Memory call from its request bytes to its answer, on the core's event loop.

The link (`link_server.py`) hands a call's method name, request bytes and
`memvault-*` metadata here and sends on what comes back: a unary call's reply bytes, or how the
call ended (`Ended`: a status number and details). This is the one place
where an error becomes a status: a domain error (`MemvaultError`) gets its
code from the table in `memvault_base.errors`; anything else is logged
(without request content) and answered INTERNAL, so a bug never takes the
daemon down; bytes that do not decode get INVALID_ARGUMENT, an unknown
method UNIMPLEMENTED. The metadata becomes the caller's declared access
(`model/scopes.Access`, INVALID_ARGUMENT when it does not parse), which
every method is given beside its request and the vault enforces.

The servicer is plain blocking code (it waits on locks, the model, the
disk), so each call runs on a worker thread of a pool while the event loop
only moves bytes. A method may also have an *at-once* variant, run on the
loop itself: it answers when it can do so without waiting, or returns None
and the call goes to the pool. Recall has one: a recall whose query vector
is cached and whose vault is loaded is pure computing, ~2 ms at 100k
memories (up to 500k memories; beyond, recalls overlap better on the
workers: `vault.reads.AT_ONCE_MAX_MEMORIES`). A recall sent to the workers
that will wait for nothing runs on threads of its own, one per core
(`endpoint.RECALL_THREADS`). A stream's items are each produced on a
worker, one `next` at a time, and sent from the loop.

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
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from google.protobuf.message import DecodeError, Message

from memvault_base.errors import MemvaultError, Status, code_of
from memvault_base.limits import MAX_MESSAGE
from memvaultd.model.scopes import Access

log = logging.getLogger("memvaultd.dispatch")

UNDECODABLE = "request: not a valid protobuf message (invalid UTF-8 in a string field?)"


class Call:
    """A streaming call in progress, as its method sees it: `is_active()`
    turns False once the call is no longer wanted (the front cancelled it,
    the link to the front is lost, or the daemon is stopping), which a
    method that waits between items checks (Events, every 0.5 s)."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send
        self._active = True

    def is_active(self) -> bool:
        return self._active

    def end(self) -> None:
        self._active = False

    async def send(self, item: bytes) -> None:
        """Send one item to the caller; returns once the link may take another."""
        await self._send(item)


@dataclass(frozen=True)
class Ended:
    """How a call ended: a stream's end (OK or not), or a unary call's failure."""

    status: int
    details: str = ""


Answer = bytes | Ended  # a unary call's reply, or how the call ended


@dataclass(frozen=True)
class Unary:
    """A unary method. On the loop, `prepare` turns the request and the
    caller's access into what the others take (once per call: a recall's
    query), `at_once` answers if it needs no wait, and `ready` tells a call
    that will only compute, which goes to the computing pool; else `run`
    answers on the shared pool, so that a call which may wait holds none
    of the computing threads meanwhile. `run` takes what `prepare` made
    (without it, the request) and the access."""

    request: type[Message]
    run: Callable[[Any, Access], Message]
    prepare: Callable[[Any, Access], Any] | None = None
    at_once: Callable[[Any], Message | None] | None = None
    ready: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class Stream:
    """A server-streaming method: `run` (of the request, the caller's access
    and the call) gives the items, each made on a worker."""

    request: type[Message]
    run: Callable[[Any, Access, Call], Iterator[Message]]


class Dispatch:
    """The Memory methods by name, over a shared pool and a computing pool.
    Its coroutines run on the core's event loop."""

    def __init__(self, methods: Mapping[str, Unary | Stream], pool: Executor,
                 computing: Executor) -> None:
        self._methods = dict(methods)
        self._pool = pool
        self._computing = computing
        self._streams: set[Call] = set()  # touched on the loop only

    def streams(self, name: str) -> bool:
        """Whether `name` is a server-streaming method."""
        return isinstance(self._methods.get(name), Stream)

    async def unary(self, name: str, payload: bytes,
                    metadata: Sequence[tuple[str, str]] = ()) -> Answer:
        method = self._methods.get(name)
        if not isinstance(method, Unary):
            return Ended(Status.UNIMPLEMENTED, f"no unary method {name!r}")
        try:
            request = method.request.FromString(payload)
        except (DecodeError, UnicodeDecodeError) as exc:
            return Ended(Status.INVALID_ARGUMENT, f"{UNDECODABLE}: {exc}")
        try:
            access = Access.of_metadata(metadata)
            prepared = request if method.prepare is None else method.prepare(request, access)
            if method.at_once is not None:
                reply = method.at_once(prepared)
                if reply is not None:
                    return _within_limit(reply.SerializeToString())
            pool = self._pool
            if method.ready is not None and method.ready(prepared):
                pool = self._computing
            work = partial(method.run, prepared, access)
            return _within_limit(await asyncio.get_running_loop().run_in_executor(
                pool, _serialized, work))
        except Exception as exc:
            return _failed(name, exc)

    async def stream(self, name: str, payload: bytes, call: Call,
                     metadata: Sequence[tuple[str, str]] = ()) -> Ended:
        """Run a streaming call, sending its items through `call`, to its end."""
        method = self._methods.get(name)
        if not isinstance(method, Stream):
            return Ended(Status.UNIMPLEMENTED, f"no streaming method {name!r}")
        try:
            request = method.request.FromString(payload)
        except (DecodeError, UnicodeDecodeError) as exc:
            return Ended(Status.INVALID_ARGUMENT, f"{UNDECODABLE}: {exc}")
        self._streams.add(call)
        items: Iterator[Message] | None = None
        pending: Future[bytes | None] | None = None
        try:
            items = method.run(request, Access.of_metadata(metadata), call)
            while True:
                pending = self._pool.submit(_next_item, items)
                item = await asyncio.wrap_future(pending)
                pending = None
                if item is None:
                    return Ended(Status.OK)
                if len(item) > MAX_MESSAGE:
                    return _too_large()
                await call.send(item)
        except Exception as exc:
            return _failed(name, exc)
        finally:
            # Cancelled (the client went away) or ended: let an item still
            # being made finish (Events wakes every 0.5 s and sees the call
            # ended), then run the method's `finally`.
            call.end()
            self._streams.discard(call)
            if items is not None:
                with contextlib.suppress(RuntimeError):  # the pool is shut: the daemon stops
                    self._pool.submit(_close_after, pending, items)

    def end_streams(self) -> None:
        """Each open stream sees its call inactive and ends (Events within 0.5 s):
        an Events subscriber would otherwise hold a stopping daemon for its
        whole grace period (20 s)."""
        for call in self._streams:
            call.end()


def _failed(name: str, exc: Exception) -> Ended:
    if isinstance(exc, MemvaultError):
        return Ended(code_of(exc), str(exc))
    log.error("%s failed", name, exc_info=exc)
    return Ended(Status.INTERNAL, f"{name} failed; see the daemon's log")


def _too_large() -> Ended:
    return Ended(Status.RESOURCE_EXHAUSTED,
                 f"the reply is larger than the {MAX_MESSAGE >> 20} MiB message limit; "
                 "ask for less (a smaller top_k, no vectors)")


def _within_limit(reply: bytes) -> Answer:
    return reply if len(reply) <= MAX_MESSAGE else _too_large()


def _serialized(work: Callable[[], Message]) -> bytes:
    return work().SerializeToString()


def _next_item(items: Iterator[Message]) -> bytes | None:
    item = next(items, None)
    return None if item is None else item.SerializeToString()


def _close_after(pending: Future[bytes | None] | None, items: Iterator[Message]) -> None:
    if pending is not None:
        with contextlib.suppress(BaseException):
            pending.result()
    close = getattr(items, "close", None)
    if close is not None:
        close()
