"""The gRPC server: the Sync service and health, on a TCP address.

Health reports SERVING for "" and "memvault.v1.Sync" once the port is bound
and NOT_SERVING while stopping. Threads: every WatchHead stream holds one
worker for its lifetime, so the pool is `max_watchers` plus 64 for unary
calls; a stream over `max_watchers` is refused, not queued.

A request that does not decode (invalid UTF-8 in a string field, a corrupt
message) is INVALID_ARGUMENT: the handlers are registered with a
deserializer that hands the servicer a marker instead of raising, since
grpc itself would answer INTERNAL and log a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

# grpcio's health package ships no type stubs.
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from memvault_base.v1 import sync_pb2
from memvault_server.access import Access
from memvault_server.chain import Chains
from memvault_server.limits import DEFAULT_RATE, RateLimiter
from memvault_server.servicer import SyncServicer
from memvault_server.store import open_store
from memvault_server.tokens import TokenBook

SERVICE = sync_pb2.DESCRIPTOR.services_by_name["Sync"].full_name
DEFAULT_LISTEN = "127.0.0.1:7433"
DEFAULT_MAX_OBJECT = 16 * 1024 * 1024  # the daemon's largest log record is 16 MiB too
DEFAULT_MAX_WATCHERS = 256
_UNARY_WORKERS = 64
# gRPC itself refuses messages over max_object_bytes x 2 + 1 MiB before
# reading them (RESOURCE_EXHAUSTED, "larger than max"); anything up to that
# reaches the servicer and gets the message naming --max-object-bytes.
_ENVELOPE = 1024 * 1024


@dataclass
class Settings:
    data_dir: Path
    listen: str = DEFAULT_LISTEN
    store: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_object_bytes: int = DEFAULT_MAX_OBJECT
    rate: float = DEFAULT_RATE
    max_watchers: int = DEFAULT_MAX_WATCHERS


class SyncServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = open_store(settings.store, settings.data_dir)
        self.chains = Chains(self.store)
        self.servicer = SyncServicer(
            self.store, self.chains, Access(TokenBook(settings.data_dir), self.store),
            RateLimiter(settings.rate), settings.max_object_bytes, settings.max_watchers)
        self.health = health.HealthServicer()
        limit = settings.max_object_bytes * 2 + _ENVELOPE
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=settings.max_watchers + _UNARY_WORKERS,
                               thread_name_prefix="rpc"),
            options=[("grpc.max_receive_message_length", limit),
                     ("grpc.max_send_message_length", -1),
                     # gRPC sets SO_REUSEPORT by default: a second server on a
                     # taken port would start and silently share its traffic.
                     ("grpc.so_reuseport", 0)])
        _add_sync_servicer(self.servicer, self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = 0

    def start(self) -> SyncServer:
        """Bind and serve; `self.port` is the bound port (useful with port 0)."""
        s = self.settings
        if s.tls_cert and s.tls_key:
            credentials = grpc.ssl_server_credentials(
                [(s.tls_key.read_bytes(), s.tls_cert.read_bytes())])
            self.port = self.server.add_secure_port(s.listen, credentials)
        else:
            self.port = self.server.add_insecure_port(s.listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {s.listen}")
        self.server.start()
        for name in ("", SERVICE):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self

    def stop(self, grace: float = 5.0) -> None:
        """Refuse new calls, end watch streams, let in-flight calls finish."""
        self.health.enter_graceful_shutdown()
        self.servicer.stopping.set()
        self.chains.close()
        self.server.stop(grace).wait()
        self.store.close()


class _Undecodable:
    """What a request that does not decode is handed to its handler as."""

    def __init__(self, error: str) -> None:
        self.error = error


def _lenient(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return _Undecodable(str(exc))

    return deserialize


def _refusing(behaviour: Callable[[Any, grpc.ServicerContext], Any]
              ) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, _Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"the request is not a valid message: {request.error}")
        return behaviour(request, context)

    return handle


def _add_sync_servicer(servicer: SyncServicer, server: grpc.Server) -> None:
    """As the generated `add_SyncServicer_to_server`, with lenient deserializers."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in sync_pb2.DESCRIPTOR.services_by_name["Sync"].methods:
        request = getattr(sync_pb2, method.input_type.name)
        response = getattr(sync_pb2, method.output_type.name)
        make = (grpc.unary_stream_rpc_method_handler if method.server_streaming
                else grpc.unary_unary_rpc_method_handler)
        handlers[method.name] = make(_refusing(getattr(servicer, method.name)),
                                     request_deserializer=_lenient(request.FromString),
                                     response_serializer=response.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
