"""The front process: the socket's gate and grpc, beside the core that holds the vault.

memvaultd starts this process (`front_process.py`) and it serves the public
socket: the gate checks each peer's uid (`peer_gate.py`) and grpc reads and
writes the calls. Each unary Memory call goes to the core over the link
(`link.py`) as the client's bytes; streams (Events, Export, health's Watch)
and health's Check are forwarded to the core's own grpc on its inner
socket. Reflection is answered here.

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

# grpcio's health and reflection packages ship no type stubs.
from grpc_health.v1 import health, health_pb2  # type: ignore[import-untyped]
from grpc_reflection.v1alpha import reflection  # type: ignore[import-untyped]

from memvault_base.v1 import memory_pb2
from memvaultd.serve.front.link import LinkClient
from memvaultd.serve.front.peer_gate import PeerGate

log = logging.getLogger("memvaultd.front")

MEMORY = memory_pb2.DESCRIPTOR.services_by_name["Memory"]
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]
# The core's grpc and the front's alike: a RememberBatch of 10k memories with vectors.
MAX_MESSAGE = 64 * 1024 * 1024
OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE),
           ("grpc.max_send_message_length", MAX_MESSAGE)]
READY = b"ready\n"


class Forwarding(grpc.GenericRpcHandler):
    """Every Memory and Health method: unary Memory calls over the link,
    the rest through a grpc channel to the core. Bytes pass untouched."""

    def __init__(self, link: LinkClient, core: grpc.aio.Channel) -> None:
        self._handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for service in (MEMORY, HEALTH):
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                if method.client_streaming:
                    continue  # neither service has one
                if method.server_streaming:
                    self._handlers[path] = grpc.unary_stream_rpc_method_handler(
                        _streamed(core, path))
                elif service is MEMORY:
                    self._handlers[path] = grpc.unary_unary_rpc_method_handler(
                        _linked(link, method.name))
                else:
                    self._handlers[path] = grpc.unary_unary_rpc_method_handler(
                        _forwarded(core, path))

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler[Any, Any] | None:
        return self._handlers.get(handler_call_details.method)


def _linked(link: LinkClient, method: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
    async def handle(request: bytes, context: Any) -> bytes:
        try:
            status, payload = await link.call(method, request)
        except ConnectionError:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "memvaultd is stopping")
        if status is not grpc.StatusCode.OK:
            await context.abort(status, payload.decode("utf-8", "replace"))
        return payload
    return handle


def _forwarded(core: grpc.aio.Channel, path: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
    call: Any = core.unary_unary(path)

    async def handle(request: bytes, context: Any) -> bytes:
        try:
            reply: bytes = await call(request, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as error:
            await context.abort(error.code(), error.details() or "")
        return reply
    return handle


def _streamed(core: grpc.aio.Channel, path: str
              ) -> Callable[[bytes, Any], AsyncIterator[bytes]]:
    method: Any = core.unary_stream(path)

    async def handle(request: bytes, context: Any) -> AsyncIterator[bytes]:
        call = method(request, timeout=context.time_remaining())
        try:
            async for item in call:
                yield item
        except grpc.aio.AioRpcError as error:
            await context.abort(error.code(), error.details() or "")
        finally:
            call.cancel()  # the client went away: so does the core's stream
    return handle


async def serve(public: Path, inner: Path, core: Path, link_path: Path, grace: float) -> None:
    loop = asyncio.get_running_loop()
    _, link = await loop.create_unix_connection(LinkClient, str(link_path))
    channel = grpc.aio.insecure_channel(f"unix:{core}", options=OPTIONS)
    server = grpc.aio.server(options=OPTIONS)
    server.add_generic_rpc_handlers((Forwarding(link, channel),))
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
    await stop.wait()
    loop.remove_reader(sys.stdin.fileno())
    # Refuse new connections first; calls in flight get `grace` unless the
    # core is gone, when nothing could answer them.
    gate.stop_accepting()
    await server.stop(0 if orphaned else grace)
    gate.close()
    inner.unlink(missing_ok=True)
    await channel.close()
    if orphaned:
        log.warning("the core went away; the front stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memvaultd-front", description=__doc__.split("\n")[0])
    parser.add_argument("--public", type=Path, required=True)
    parser.add_argument("--inner", type=Path, required=True)
    parser.add_argument("--core", type=Path, required=True)
    parser.add_argument("--link", type=Path, required=True)
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Ctrl-C in a terminal reaches the whole process group: the core stops
    # this process itself, after its own calls.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(serve(args.public, args.inner, args.core, args.link, args.grace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
