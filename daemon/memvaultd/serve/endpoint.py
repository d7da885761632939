"""Serving the Memory service and health, from the core's side.

The public socket is served by the front process (`front.py`): its gate and
grpc. The core answers the front: unary calls over the link (`link.py`),
streams and health on its own grpc, both on sockets in `<run>/inner/`
(0700). Health reports NOT_SERVING until the vault is loaded and the model
is warm, then SERVING: readiness is reported, never guessed. Reflection (in
the front) lets `grpcurl -plaintext -unix SOCKET list` discover the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError

# grpcio's health package ships no type stubs.
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from memvault_base.v1 import memory_pb2
from memvaultd.serve import aio_bridge
from memvaultd.serve.front import link
from memvaultd.serve.front import relay as front
from memvaultd.serve.front.socket_guard import claim_socket, prepare_socket_dir
from memvaultd.serve.front_process import FrontProcess
from memvaultd.serve.servicer import MemoryServicer
from memvaultd.vault.events import EventBus
from memvaultd.vault.vault import Vault

T = TypeVar("T")
log = logging.getLogger("memvaultd.server")
SERVICE = memory_pb2.DESCRIPTOR.services_by_name["Memory"].full_name
# Worker threads: an Events stream holds one while it waits for its next
# event, and a RememberBatch one while the model embeds; 32 leaves room for
# both beside a dozen concurrent calls.
_WORKERS = 32


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


# Recalls that go to workers (every recall in a vault above 500k memories;
# below, one the loop declined only because the access marks' lock was busy)
# and will wait for nothing else (`VaultReads.recall_ready`: no load,
# transaction or model call) have threads of their own, one per core: more
# only queue on the interpreter lock, with the kernel free to preempt
# whichever thread holds it, while a recall's vector work, which runs
# without the lock, needs no more than the cores. At 1M memories, 8 mixed
# clients made 167-185 calls/s with every recall on the shared pool (the
# daemon 1.44-1.47 of 2 cores busy, 50-59 voluntary thread switches a call),
# 187-198 calls/s on two threads of their own (1.53-1.56 cores, 31-41
# switches), 171-192 on three; the same runs alternating
# (docs/benchmarks.md). A semaphore letting two of the shared pool's threads
# compute at once gave no gain (162-168 calls/s): the other threads still
# took turns on the lock. A recall that may wait stays on the shared pool,
# holding none of these threads meanwhile.
RECALL_THREADS = max(2, _cores())
# In-flight calls get this long to finish on SIGTERM: a RememberBatch of 96
# texts took 4.9 s on a busy 2-core machine (test_service.py), so 5 s was
# too tight. The unit's TimeoutStopSec=90 leaves 70 s for the final snapshot,
# which took 15-21 s at 1M memories (runs AC, AF, AH; ~1.5 s at 100k).
_STOP_GRACE_S = 20.0


class _Undecodable:
    """Stands in for a request whose bytes are not a valid message."""

    def __init__(self, why: str) -> None:
        self.why = why


def _lenient(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return _Undecodable(str(exc))

    return deserialize


def _refusing(handler: Callable[[Any, Any], Any], streaming: bool) -> Callable[[Any, Any], Any]:
    message = "request: not a valid protobuf message (invalid UTF-8 in a string field?)"
    if streaming:
        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{message}: {request.why}")
            async with contextlib.aclosing(handler(request, context)) as items:
                async for item in items:
                    yield item
        return stream

    async def unary(request: Any, context: Any) -> Any:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{message}: {request.why}")
        return await handler(request, context)
    return unary


Handlers = dict[str, "grpc.RpcMethodHandler[Any, Any]"]  # generic in the stubs only


def memory_methods(servicer: MemoryServicer, pool: Executor, recall_pool: Executor,
                   open_streams: aio_bridge.OpenStreams) -> Handlers:
    """The Memory service's handlers by method name, like the generated ones,
    except that bytes which do not decode (invalid UTF-8, a corrupt message)
    get INVALID_ARGUMENT: the generated deserializer's failure is answered
    INTERNAL by grpc before any servicer code runs."""
    service = memory_pb2.DESCRIPTOR.services_by_name["Memory"]
    at_once = {"Recall": servicer.recall_at_once}
    computing = {"Recall": aio_bridge.Computing(recall_pool, servicer.recall_ready)}
    handlers = {}
    for method in service.methods:
        request = getattr(memory_pb2, method.input_type.name)
        reply = getattr(memory_pb2, method.output_type.name)
        behaviour = getattr(servicer, method.name)
        if method.server_streaming:
            handler = _refusing(aio_bridge.stream(behaviour, pool, open_streams),
                                streaming=True)
            make = grpc.unary_stream_rpc_method_handler
        else:
            handler = _refusing(aio_bridge.unary(behaviour, pool, at_once.get(method.name),
                                                 computing.get(method.name)),
                                streaming=False)
            make = grpc.unary_unary_rpc_method_handler
        handlers[method.name] = make(handler, request_deserializer=_lenient(request.FromString),
                                     response_serializer=reply.SerializeToString)
    return handlers


def linked_methods(handlers: Handlers) -> dict[str, link.Unary]:
    """The unary ones, as the link serves them (`link.py`)."""
    linked = {}
    for name, h in handlers.items():
        if h.unary_unary is not None:
            assert h.request_deserializer is not None and h.response_serializer is not None
            linked[name] = link.Unary(h.unary_unary, h.request_deserializer,
                                      h.response_serializer)
    return linked


class DaemonServer:
    """The core's side of serving: grpc's asyncio server and the link's, on
    a loop thread of their own (`aio_bridge.py` says why), both on sockets in
    a 0700 directory of their own, reached only by the front process, which
    serves the public socket (`front.py`). Its methods are called from other
    threads."""

    def __init__(self, vault: Vault, events: EventBus, socket_path: Path,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self.socket_path = socket_path
        inner = socket_path.parent / "inner"
        self.inner_socket = inner / "grpc.sock"  # the core's grpc: streams, health
        self.link_socket = inner / "link.sock"  # the core's link: unary calls
        self.front_socket = inner / "front.sock"  # the front's grpc, behind its gate
        self._on_failure = on_failure
        self._pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="rpc")
        self._recall_pool = ThreadPoolExecutor(max_workers=RECALL_THREADS,
                                               thread_name_prefix="recall")
        self._streams = aio_bridge.OpenStreams()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rpc-loop",
                                        daemon=True)
        self._thread.start()
        self.health = health.aio.HealthServicer()
        servicer = MemoryServicer(vault, events, str(socket_path), time.time())
        self._methods = memory_methods(servicer, self._pool, self._recall_pool, self._streams)
        self.server: grpc.aio.Server = self._on_loop(self._build())
        self._link: asyncio.AbstractServer | None = None
        self._front = FrontProcess(socket_path, self.front_socket, self.inner_socket,
                                  self.link_socket, _STOP_GRACE_S, self._front_exited)
        self.set_serving(False)

    async def _build(self) -> grpc.aio.Server:
        # Made on the loop: the server binds itself to the running loop.
        server = grpc.aio.server(options=front.OPTIONS)
        # The whole service, though the front sends it only streams and
        # health: a client on this socket (a diagnosis) gets every method.
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, self._methods),))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        return server

    async def _serve_link(self) -> asyncio.AbstractServer:
        methods = linked_methods(self._methods)
        return await asyncio.get_running_loop().create_unix_server(
            lambda: link.LinkServer(methods), str(self.link_socket))

    def _on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def start(self) -> None:
        prepare_socket_dir(self.socket_path)
        claim_socket(self.socket_path)
        prepare_socket_dir(self.inner_socket)
        for path in (self.inner_socket, self.link_socket, self.front_socket):
            path.unlink(missing_ok=True)  # claim_socket proved nobody serves
        old_umask = os.umask(0o177)  # each socket is 0600 from the moment it exists
        try:
            self.server.add_insecure_port(f"unix:{self.inner_socket}")
            self._on_loop(self.server.start())
            self._link = self._on_loop(self._serve_link())
        finally:
            os.umask(old_umask)
        self._front.start()  # returns once it serves the public socket

    def _front_exited(self, code: int) -> None:
        if code == 0:
            # Stopped by a SIGTERM of its own (a `kill`, or a service manager
            # signalling the whole group): the daemon stops as that would stop it.
            log.info("the front process was stopped; stopping")
            os.kill(os.getpid(), signal.SIGTERM)
            return
        why = f"the front process exited unasked (status {code}); the socket is not served"
        log.error("%s", why)
        if self._on_failure is not None:
            self._on_failure(why)

    def set_serving(self, serving: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in ("", SERVICE):
            self._on_loop(self.health.set(name, status))

    def stop(self, grace: float = _STOP_GRACE_S) -> None:
        """Refuse new calls, let in-flight ones finish for up to `grace` s."""
        self._on_loop(self.health.enter_graceful_shutdown())
        self._loop.call_soon_threadsafe(self._streams.end_all)
        # The front closes the public socket, lets its calls finish (the core
        # still answers them) and exits; it has `grace` and a little more.
        self._front.stop(grace + 5.0)
        if self._link is not None:
            self._link.close()
        self._on_loop(self.server.stop(grace))
        for path in (self.inner_socket, self.link_socket, self.front_socket):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.inner_socket.parent.rmdir()
        self._pool.shutdown(wait=False)
        self._recall_pool.shutdown(wait=False)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)
