"""The front process: the socket's gate and grpc, beside the core that holds the vault.

memvaultd starts this process (`python -m memvaultd.serve.front`,
`front_process.py`) and it serves the public socket: the gate checks each
peer's uid (`peer_gate.py`) and grpc reads and writes the calls. Every
Memory call, unary or streaming, goes to the core over the link
(`link.py`) as the client's bytes, with its `memvault-*` metadata (the
caller's declared access, which the core checks), and its answer comes
back the same way.
Health (Check, Watch) and reflection are answered here: health from the
serving state the core sends over the link, NOT_SERVING until the core
says SERVING, and NOT_SERVING for good once either side stops.

Why a process of its own: a Python process computes on one core at a time
(the interpreter lock). With grpc in the core, its work was ~1/3 of what
the core's event loop did per call, and on the 2-core machine of
docs/benchmarks.md 8 clients got ~1.35-1.5 x the calls of one. Here grpc's
work runs on the other core, beside the recalls (docs/benchmarks.md, "The
front process").

The front holds no memory, key or query beyond the bytes in flight; it exits
when the core does (its stdin, a pipe from the core, reaches its end).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import uvloop

# grpcio's health and reflection packages ship no type stubs.
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
from grpc_reflection.v1alpha import reflection  # type: ignore[import-untyped]

from memvault_base.access import PREFIX
from memvault_base.errors import Status
from memvault_base.resident import release_code_pages
from memvault_base.rpc import ANSWERED, MESSAGE_OPTIONS, status_code
from memvault_base.secrecy import forbid_dumps
from memvault_base.v1 import memory_pb2
from memvaultd.serve.front.link import READY, LinkClient, Metadata, State
from memvaultd.serve.front.peer_gate import PeerGate

log = logging.getLogger("memvaultd.front")

MEMORY = memory_pb2.DESCRIPTOR.services_by_name["Memory"]
_STOPPING = "memvaultd is stopping"


class Relay(grpc.GenericRpcHandler):
    """Every Memory method, over the link; the bytes pass untouched."""

    def __init__(self, link: LinkClient) -> None:
        self._handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in MEMORY.methods:
            path = f"/{MEMORY.full_name}/{method.name}"
            if method.server_streaming:
                self._handlers[path] = grpc.unary_stream_rpc_method_handler(
                    _streamed(link, method.name))
            else:
                self._handlers[path] = grpc.unary_unary_rpc_method_handler(
                    _linked(link, method.name))

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler[Any, Any] | None:
        return self._handlers.get(handler_call_details.method)


def _access(context: Any) -> Metadata:
    """The call's `memvault-*` metadata: the caller's declared access,
    handed on unread (the core checks it)."""
    return tuple((key, value) for key, value in context.invocation_metadata() or ()
                 if key.startswith(PREFIX) and isinstance(value, str))


def _linked(link: LinkClient, method: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
    async def handle(request: bytes, context: Any) -> bytes:
        try:
            status, payload = await link.call(method, request, _access(context))
        except ConnectionError:
            await context.abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, (ANSWERED,))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc), (ANSWERED,))
        if status != Status.OK:
            await context.abort(status_code(status), payload.decode("utf-8", "replace"),
                                (ANSWERED,))
        return payload
    return handle


def _streamed(link: LinkClient, method: str) -> Callable[[bytes, Any], AsyncIterator[bytes]]:
    async def handle(request: bytes, context: Any) -> AsyncIterator[bytes]:
        try:
            streamed = link.stream(method, request, _access(context))
        except ConnectionError:
            await context.abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, (ANSWERED,))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc), (ANSWERED,))
        try:
            async for item in streamed:
                yield item
        except ConnectionError:
            await context.abort(grpc.StatusCode.UNAVAILABLE, _STOPPING, (ANSWERED,))
        finally:
            streamed.close()  # the client went away: so does the core's stream
        assert streamed.status is not None  # the items end with the stream
        if streamed.status != Status.OK:
            await context.abort(status_code(streamed.status), streamed.details, (ANSWERED,))
    return handle


class Health:
    """The front's health service, set from the core's serving state in the
    order the link brings it."""

    def __init__(self) -> None:
        self.servicer = health.aio.HealthServicer()
        self._states: asyncio.Queue[State] = asyncio.Queue()

    def told(self, state: State) -> None:
        self._states.put_nowait(state)

    async def follow(self) -> None:
        """Apply each state told, until cancelled."""
        while True:
            await self.apply(await self._states.get())

    async def apply(self, state: State) -> None:
        if state is State.STOPPING:
            await self.servicer.enter_graceful_shutdown()
            return
        status = (health_pb2.HealthCheckResponse.SERVING if state is State.SERVING
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in ("", MEMORY.full_name):
            await self.servicer.set(name, status)


async def serve(public: Path, inner: Path, link_path: Path, grace: float) -> None:
    loop = asyncio.get_running_loop()
    serving = Health()
    await serving.apply(State.NOT_SERVING)  # until the core says otherwise
    _, link = await loop.create_unix_connection(lambda: LinkClient(serving.told),
                                                str(link_path))
    following = asyncio.ensure_future(serving.follow())
    server = grpc.aio.server(options=MESSAGE_OPTIONS)
    server.add_generic_rpc_handlers((Relay(link),))
    health_pb2_grpc.add_HealthServicer_to_server(serving.servicer, server)
    reflection.enable_server_reflection(
        (MEMORY.full_name, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    inner.unlink(missing_ok=True)
    old_umask = os.umask(0o177)  # 0600 from the moment it exists, in a 0700 directory
    try:
        server.add_insecure_port(f"unix:{inner}")
        await server.start()
    finally:
        os.umask(old_umask)
    gate = PeerGate(public, inner)
    gate.open()

    stop = asyncio.Event()
    orphaned = False

    def core_gone() -> None:
        nonlocal orphaned
        orphaned = True
        stop.set()

    def stdin_readable() -> None:
        if not os.read(sys.stdin.fileno(), 4096):
            core_gone()

    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(sys.stdin.fileno(), stdin_readable)
    link.lost.add_done_callback(lambda _: core_gone())
    os.write(sys.stdout.fileno(), READY)
    release_code_pages()  # the imports' and grpc's start-up pages (4 of 22 MB)
    await stop.wait()
    loop.remove_reader(sys.stdin.fileno())
    following.cancel()
    await serving.apply(State.STOPPING)
    # Refuse new connections first; calls in flight get `grace` unless the
    # core is gone, when nothing could answer them.
    gate.stop_accepting()
    await server.stop(0 if orphaned else grace)
    gate.close()
    inner.unlink(missing_ok=True)
    if orphaned:
        log.warning("the core went away; the front stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memvaultd-front", description=__doc__.split("\n")[0])
    parser.add_argument("--public", type=Path, required=True)
    parser.add_argument("--inner", type=Path, required=True)
    parser.add_argument("--link", type=Path, required=True)
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    # Every request and answer passes through here in clear: no core file, no dump.
    forbid_dumps()
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Ctrl-C in a terminal reaches the whole process group: the core stops
    # this process itself, after its own calls.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # uvloop, as the core's end of the link: grpc's asyncio server and the link
    # each take a turn of this loop per call (docs/benchmarks.md, "uvloop").
    uvloop.run(serve(args.public, args.inner, args.link, args.grace))
    return 0
