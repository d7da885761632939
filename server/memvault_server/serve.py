"""The gRPC server: the Sync service and health, on a TCP address.

Health reports SERVING (for "" and "memvault.v1.Sync", set together; the
gate answers every name with the server's status) once the port is bound
and NOT_SERVING while stopping. Threads: every WatchHead stream holds one
worker for its lifetime, so the pool is `max_watchers` plus 64 for unary
calls; a stream over `max_watchers` is refused, not queued.

Every call passes the gate (`gate.py`) with only its headers read; what a
peer without a valid token can make the server hold is bounded there and
by the transport settings below (docs/server.md, "Limits").
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc

# grpcio's health package ships no type stubs.
from grpc_health.v1 import health, health_pb2  # type: ignore[import-untyped]

from memvault_server.access import Access
from memvault_server.chain import Chains
from memvault_server.gate import SYNC, Gate
from memvault_server.limits import DEFAULT_RATE, RateLimiter
from memvault_server.quotas import DEFAULT_MAX_BYTES, DEFAULT_MAX_OBJECTS, Quotas
from memvault_server.servicer import SyncServicer
from memvault_server.store import open_store
from memvault_server.tokens import TokenBook

DEFAULT_LISTEN = "127.0.0.1:7433"
DEFAULT_MAX_OBJECT = 16 * 1024 * 1024  # the daemon's largest log record is 16 MiB too
DEFAULT_MAX_WATCHERS = 256
_UNARY_WORKERS = 64
# gRPC itself refuses messages over max_object_bytes x 2 + 1 MiB before
# reading them (RESOURCE_EXHAUSTED, "larger than max"); anything up to that
# reaches the servicer and gets the message naming --max-object-bytes.
_ENVELOPE = 1024 * 1024
# What HTTP/2 may buffer for a stream before its handler reads it: the
# stream's flow-control window. gRPC's default grows the window by probing
# the bandwidth-delay product, and those windows let 4 unauthenticated
# connections of 128 streams raise the server's peak memory by 277 MiB
# before the gate refused each stream; a fixed window of 1 MiB holds that to
# 9 MiB, and uploads 16 MiB at 40 ms round trip as fast as probing did
# (0.73 s against 0.69 s; docs/server.md, "Limits").
_STREAM_WINDOW = 1024 * 1024


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
    quota_objects: int = DEFAULT_MAX_OBJECTS
    quota_bytes: int = DEFAULT_MAX_BYTES


class SyncServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = open_store(settings.store, settings.data_dir)
        self.chains = Chains(self.store)
        self.quotas = Quotas(settings.quota_objects, settings.quota_bytes)
        access = Access(TokenBook(settings.data_dir), self.store)
        self.servicer = SyncServicer(self.store, self.chains, access, self.quotas,
                                     settings.max_object_bytes, settings.max_watchers)
        self.health = health.HealthServicer()
        limit = settings.max_object_bytes * 2 + _ENVELOPE
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=settings.max_watchers + _UNARY_WORKERS,
                               thread_name_prefix="rpc"),
            options=[("grpc.max_receive_message_length", limit),
                     ("grpc.max_send_message_length", -1),
                     # gRPC sets SO_REUSEPORT by default: a second server on a
                     # taken port would start and silently share its traffic.
                     ("grpc.so_reuseport", 0),
                     ("grpc.http2.bdp_probe", 0),
                     ("grpc.http2.lookahead_bytes", _STREAM_WINDOW)])
        self.server.add_generic_rpc_handlers(
            (Gate(access, RateLimiter(settings.rate), self.servicer, self.health),))
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
        self.quotas.count(self.store)
        self.server.start()
        for name in ("", SYNC):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self

    def stop(self, grace: float = 5.0) -> None:
        """Refuse new calls, end watch streams, let in-flight calls finish."""
        self.health.enter_graceful_shutdown()
        self.servicer.stopping.set()
        self.chains.close()
        self.server.stop(grace).wait()
        self.store.close()
