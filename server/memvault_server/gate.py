"""The gate: who is calling is decided from a call's headers, before a byte
of its message is read.

gRPC Python reads a unary request's whole message (up to
`grpc.max_receive_message_length`, about 33 MiB here) before the handler runs,
but it asks the server's generic handlers for a handler with only the call's
method and headers in hand. The gate is that generic handler. For a Sync
method it parses the `authorization` header, looks the token up and charges
the account's rate (`access.py`, `limits.py`). A call that fails any of these
gets a handler that takes its request as a stream and never reads it: it
answers UNAUTHENTICATED or RESOURCE_EXHAUSTED at once, and gRPC drops what
the peer sends. A call that passes gets the Sync handler, bound to its caller,
and only then is its message read.

Health checks carry no token, so their messages are never read either: they
are answered for the whole server (the status of ""), whatever service they
name. The server serves one service and sets both names together, so the
answer is the one the name would get.

Nothing is registered by method name: a method registered with the server
is dispatched without asking the generic handlers, so it would skip the gate.

A request that does not decode (invalid UTF-8 in a string field, a corrupt
message) is INVALID_ARGUMENT: the handlers are made with a deserializer that
hands the servicer a marker instead of raising, since grpc itself would
answer INTERNAL and log a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

# grpcio's health package ships no type stubs.
from grpc_health.v1 import health, health_pb2  # type: ignore[import-untyped]

from memvault_base.errors import MemvaultError
from memvault_base.v1 import sync_pb2
from memvault_server.access import Access, Caller
from memvault_server.limits import RateLimiter
from memvault_server.servicer import SyncServicer, status_code

log = logging.getLogger("memvault_server.gate")

SYNC = sync_pb2.DESCRIPTOR.services_by_name["Sync"].full_name
HEALTH = "grpc.health.v1.Health"

Behaviour = Callable[[Any, grpc.ServicerContext, Caller], Any]


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


@dataclass(frozen=True)
class _Method:
    behaviour: Behaviour
    streaming: bool  # server streaming (WatchHead)
    deserialize: Callable[[bytes], Any]
    serialize: Callable[[Any], bytes]

    def handler(self, caller: Caller) -> grpc.RpcMethodHandler[Any, Any]:
        behaviour = self.behaviour

        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, _Undecodable):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"the request is not a valid message: {request.error}")
            return behaviour(request, context, caller)

        make = (grpc.unary_stream_rpc_method_handler if self.streaming
                else grpc.unary_unary_rpc_method_handler)
        return make(handle, request_deserializer=self.deserialize,
                    response_serializer=self.serialize)


def _refusal(streaming: bool, code: grpc.StatusCode,
             details: str) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler that answers `code` without reading the request."""

    def refuse(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        context.abort(code, details)

    if streaming:
        return grpc.stream_stream_rpc_method_handler(refuse)
    return grpc.stream_unary_rpc_method_handler(refuse)


class _UnreadWatch:
    """health.Watch for the whole server, the request left unread; as the
    library's own Watch, it holds no worker thread while it waits."""

    experimental_non_blocking = True
    experimental_thread_pool = None

    def __init__(self, servicer: health.HealthServicer) -> None:
        self.servicer = servicer

    def __call__(self, requests: Iterator[Any], context: grpc.ServicerContext,
                 send_response_callback: Callable[[Any], None] | None = None) -> Any:
        return self.servicer.Watch(health_pb2.HealthCheckRequest(), context,
                                   send_response_callback)


def _authorization(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The one `authorization` header's value; None if absent or repeated."""
    values = [value for key, value in metadata or () if key == "authorization"]
    if len(values) != 1 or not isinstance(values[0], str):
        return None
    return values[0]


class Gate(grpc.GenericRpcHandler):
    def __init__(self, access: Access, limiter: RateLimiter, servicer: SyncServicer,
                 health_servicer: health.HealthServicer) -> None:
        self.access = access
        self.limiter = limiter
        self._sync: dict[str, _Method] = {}
        for method in sync_pb2.DESCRIPTOR.services_by_name["Sync"].methods:
            request = getattr(sync_pb2, method.input_type.name)
            response = getattr(sync_pb2, method.output_type.name)
            self._sync[method.name] = _Method(
                getattr(servicer, method.name), method.server_streaming,
                _lenient(request.FromString), response.SerializeToString)
        check = health_pb2.HealthCheckResponse.SerializeToString
        self._health: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Check": grpc.stream_unary_rpc_method_handler(
                lambda requests, context: health_servicer.Check(
                    health_pb2.HealthCheckRequest(), context),
                response_serializer=check),
            "Watch": grpc.stream_stream_rpc_method_handler(
                _UnreadWatch(health_servicer), response_serializer=check),
        }

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler[Any, Any] | None:
        service, _, name = handler_call_details.method.lstrip("/").partition("/")
        if service == HEALTH:
            return self._health.get(name)
        method = self._sync.get(name) if service == SYNC else None
        if method is None:
            return None
        try:
            caller = self.access.caller(_authorization(handler_call_details.invocation_metadata))
            self.limiter.charge(caller.account)
        except MemvaultError as exc:
            return _refusal(method.streaming, status_code(exc), str(exc))
        except Exception:  # an unreadable tokens.json, say: refuse, and say why in the log
            log.exception("checking the token of a %s call failed", name)
            return _refusal(method.streaming, grpc.StatusCode.INTERNAL,
                            "the server could not check the token; see its log")
        return method.handler(caller)
