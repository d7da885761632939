"""memvault_base.v1.Sync: translate requests, check who is calling, delegate.

Every call, before anything else: the bearer token names an account
(UNAUTHENTICATED if not), the token's rate is charged (RESOURCE_EXHAUSTED
over it), and the vault is bound to, or checked against, the account
(PERMISSION_DENIED). Then the call goes to the chain (`chain.py`) or the
store (`store.py`). Errors become status codes in one table, `_STATUS_OF`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from memvault_base.errors import MemvaultError, ResourceExhausted
from memvault_base.objects.names import check_name, check_prefix, object_key
from memvault_base.rpc import status_of
from memvault_base.v1 import sync_pb2 as pb
from memvault_base.v1 import sync_pb2_grpc as pb_grpc
from memvault_server.access import Access, PermissionDenied, Unauthenticated
from memvault_server.chain import Chains
from memvault_server.limits import RateLimiter
from memvault_server.store import Store

log = logging.getLogger("memvault_server.servicer")

_STATUS_OF: dict[type[MemvaultError], grpc.StatusCode] = {
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}
LIST_PAGE = 10_000  # names per ListObjects reply: ~1 MiB at 100 characters each
WATCH_TICK = 1.0  # s: how often a watching stream checks that its caller is still there

R = TypeVar("R")


def _status(exc: MemvaultError) -> grpc.StatusCode:
    return _STATUS_OF.get(type(exc)) or status_of(exc)


def _translate_errors(method: Callable[..., R]) -> Callable[..., R]:
    @functools.wraps(method)
    def wrapper(self: SyncServicer, request: Any, context: grpc.ServicerContext) -> R:
        try:
            return method(self, request, context)
        except MemvaultError as exc:
            context.abort(_status(exc), str(exc))
        except Exception:
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{method.__name__} failed; see the "
                          "server's log")
        raise AssertionError("unreachable: abort raises")

    return wrapper


class SyncServicer(pb_grpc.SyncServicer):
    def __init__(self, store: Store, chains: Chains, access: Access, limiter: RateLimiter,
                 max_object_bytes: int, max_watchers: int) -> None:
        self.store = store
        self.chains = chains
        self.access = access
        self.limiter = limiter
        self.max_object_bytes = max_object_bytes
        self._watch_slots = threading.BoundedSemaphore(max_watchers)
        self.max_watchers = max_watchers
        self.stopping = threading.Event()

    def _admit(self, vault_id: str, context: grpc.ServicerContext) -> str:
        """Authenticate, charge the rate, check the vault; the vault id."""
        value = dict(context.invocation_metadata()).get("authorization")
        authorization = value if isinstance(value, str) else None
        account = self.access.account(authorization)
        self.limiter.charge(authorization or "")  # per token, not per account
        self.access.check_vault(account, vault_id)
        return vault_id

    def _check_size(self, data: bytes) -> None:
        if len(data) > self.max_object_bytes:
            raise ResourceExhausted(
                f"{len(data)} bytes is over this server's limit of {self.max_object_bytes} "
                f"bytes per object (memvault-server serve --max-object-bytes)")

    @_translate_errors
    def PutObject(self, request: pb.PutObjectRequest,
                  context: grpc.ServicerContext) -> pb.PutObjectResponse:
        vault_id = self._admit(request.vault_id, context)
        self._check_size(request.data)
        written = self.store.put_if_absent(object_key(vault_id, check_name(request.name)),
                                           request.data)
        return pb.PutObjectResponse(written=written)

    @_translate_errors
    def GetObject(self, request: pb.GetObjectRequest,
                  context: grpc.ServicerContext) -> pb.GetObjectResponse:
        vault_id = self._admit(request.vault_id, context)
        data = self.store.get(object_key(vault_id, check_name(request.name)))
        return pb.GetObjectResponse(data=data)

    @_translate_errors
    def ListObjects(self, request: pb.ListObjectsRequest,
                    context: grpc.ServicerContext) -> pb.ListObjectsResponse:
        vault_id = self._admit(request.vault_id, context)
        base = object_key(vault_id, "")
        start = object_key(vault_id, request.start_after) if request.start_after else ""
        keys = self.store.list(base + check_prefix(request.prefix), start_after=start,
                               limit=LIST_PAGE + 1)
        names = [key[len(base):] for key in keys[:LIST_PAGE]]
        return pb.ListObjectsResponse(names=names, truncated=len(keys) > LIST_PAGE)

    @_translate_errors
    def DeleteObject(self, request: pb.DeleteObjectRequest,
                     context: grpc.ServicerContext) -> pb.DeleteObjectResponse:
        vault_id = self._admit(request.vault_id, context)
        self.store.delete(object_key(vault_id, check_name(request.name)))
        return pb.DeleteObjectResponse()

    @_translate_errors
    def AppendVersion(self, request: pb.AppendVersionRequest,
                      context: grpc.ServicerContext) -> pb.AppendVersionResponse:
        vault_id = self._admit(request.vault_id, context)
        self._check_size(request.data)
        appended = self.chains.append(vault_id, request.number, request.parent, request.data)
        return pb.AppendVersionResponse(appended=appended, head=self.chains.head(vault_id))

    @_translate_errors
    def ListVersions(self, request: pb.ListVersionsRequest,
                     context: grpc.ServicerContext) -> pb.ListVersionsResponse:
        vault_id = self._admit(request.vault_id, context)
        limit = min(request.limit or 1000, 1000)
        found, truncated = self.chains.versions_after(vault_id, request.after, limit)
        return pb.ListVersionsResponse(
            versions=[pb.Version(number=n, data=data) for n, data in found], truncated=truncated)

    @_translate_errors
    def GetHead(self, request: pb.GetHeadRequest,
                context: grpc.ServicerContext) -> pb.GetHeadResponse:
        vault_id = self._admit(request.vault_id, context)
        return pb.GetHeadResponse(head=self.chains.head(vault_id))

    def WatchHead(self, request: pb.WatchHeadRequest,
                  context: grpc.ServicerContext) -> Iterator[pb.HeadEvent]:
        try:
            vault_id = self._admit(request.vault_id, context)
        except MemvaultError as exc:
            context.abort(_status(exc), str(exc))
        # Each stream holds a worker thread while it lasts (serve.py sizes the pool).
        if not self._watch_slots.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"this server already serves {self.max_watchers} WatchHead streams "
                          f"(memvault-server serve --max-watchers); poll GetHead instead")
        try:
            head = self.chains.head(vault_id)
            yield pb.HeadEvent(head=head)
            while context.is_active() and not self.stopping.is_set():
                moved = self.chains.wait_head(vault_id, head, WATCH_TICK)
                if moved != head:
                    head = moved
                    yield pb.HeadEvent(head=head)
        except MemvaultError as exc:
            context.abort(_status(exc), str(exc))
        finally:
            self._watch_slots.release()
