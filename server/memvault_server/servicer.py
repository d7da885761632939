"""memvault.v1.Sync: check what the caller may do, translate, delegate.

Every call reaches a method here already admitted by the gate (`gate.py`:
the bearer token named an account, whose rate was charged) with its
`Caller`. Each method then checks the vault against the caller's account
(PERMISSION_DENIED if another's; `access.py`), the size and the quota of
what it writes, and goes to the chain (`chain.py`) or the store. A read
never creates anything: a vault nobody has written to reads as empty. Only
a write binds a vault, after every check has passed. Errors become status
codes in one table, `_STATUS_OF`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from memvault_base.errors import MemvaultError, NotFound, ResourceExhausted
from memvault_base.objects.names import (
    MAX_LIMIT,
    check_name,
    check_prefix,
    check_version,
    object_key,
    objects_prefix,
)
from memvault_base.objects.store import Store
from memvault_base.rpc import status_of
from memvault_base.v1 import sync_pb2 as pb
from memvault_server.access import Access, Caller, PermissionDenied, Unauthenticated
from memvault_server.chain import Chains
from memvault_server.quotas import Quotas
from memvault_server.revocation import Revocations

log = logging.getLogger("memvault_server.servicer")

_STATUS_OF: dict[type[MemvaultError], grpc.StatusCode] = {
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}
LIST_PAGE = 10_000  # names per ListObjects reply: ~1 MiB at 100 characters each
WATCH_TICK = 1.0  # s: how often a watching stream checks that its caller is still there

R = TypeVar("R")


def status_code(exc: MemvaultError) -> grpc.StatusCode:
    return _STATUS_OF.get(type(exc)) or status_of(exc)


def _translate_errors(method: Callable[..., R]) -> Callable[..., R]:
    @functools.wraps(method)
    def wrapper(self: SyncServicer, request: Any, context: grpc.ServicerContext,
                caller: Caller) -> R:
        try:
            return method(self, request, context, caller)
        except MemvaultError as exc:
            context.abort(status_code(exc), str(exc))
        except Exception:
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{method.__name__} failed; see the "
                          "server's log")
        raise AssertionError("unreachable: abort raises")

    return wrapper


class SyncServicer:
    def __init__(self, store: Store, chains: Chains, access: Access, quotas: Quotas,
                 max_object_bytes: int, max_watchers: int) -> None:
        self.store = store
        self.chains = chains
        self.access = access
        self.revocations = Revocations(access.tokens)
        self.quotas = quotas
        self.max_object_bytes = max_object_bytes
        self._watch_slots = threading.BoundedSemaphore(max_watchers)
        self.max_watchers = max_watchers
        self.stopping = threading.Event()

    def _check_size(self, data: bytes) -> None:
        if len(data) > self.max_object_bytes:
            raise ResourceExhausted(
                f"{len(data)} bytes is over this server's limit of {self.max_object_bytes} "
                f"bytes per object (memvault-server serve --max-object-bytes)")

    @_translate_errors
    def PutObject(self, request: pb.PutObjectRequest, context: grpc.ServicerContext,
                  caller: Caller) -> pb.PutObjectResponse:
        vault_id = request.vault_id
        self.access.check_write(caller, vault_id)
        self._check_size(request.data)
        key = object_key(vault_id, check_name(request.name))
        data = request.data

        def write() -> bool:
            self.access.bind(caller, vault_id)
            return self.store.put_if_absent(key, data)

        try:
            written = self.quotas.charged(caller.account, len(data), write)
        except ResourceExhausted:
            if self.store.exists(key):  # a write that would change nothing costs nothing
                return pb.PutObjectResponse(written=False)
            raise
        return pb.PutObjectResponse(written=written)

    @_translate_errors
    def GetObject(self, request: pb.GetObjectRequest, context: grpc.ServicerContext,
                  caller: Caller) -> pb.GetObjectResponse:
        vault_id = request.vault_id
        key = object_key(vault_id, check_name(request.name))
        if not self.access.check_read(caller, vault_id):
            raise NotFound(f"no object {key!r}")
        return pb.GetObjectResponse(data=self.store.get(key))

    @_translate_errors
    def ListObjects(self, request: pb.ListObjectsRequest, context: grpc.ServicerContext,
                    caller: Caller) -> pb.ListObjectsResponse:
        vault_id = request.vault_id
        exists = self.access.check_read(caller, vault_id)
        base = objects_prefix(vault_id)
        prefix = base + check_prefix(request.prefix)
        if not exists:
            return pb.ListObjectsResponse()
        start = object_key(vault_id, request.start_after) if request.start_after else ""
        keys = self.store.list(prefix, start_after=start, limit=LIST_PAGE + 1)
        names = [key[len(base):] for key in keys[:LIST_PAGE]]
        return pb.ListObjectsResponse(names=names, truncated=len(keys) > LIST_PAGE)

    @_translate_errors
    def DeleteObject(self, request: pb.DeleteObjectRequest, context: grpc.ServicerContext,
                     caller: Caller) -> pb.DeleteObjectResponse:
        vault_id = request.vault_id
        exists = self.access.check_delete(caller, vault_id)
        key = object_key(vault_id, check_name(request.name))
        if exists:
            try:
                size = len(self.store.get(key))
            except NotFound:
                return pb.DeleteObjectResponse()
            self.store.delete(key)
            self.quotas.give_back(caller.account, size)
        return pb.DeleteObjectResponse()

    @_translate_errors
    def AppendVersion(self, request: pb.AppendVersionRequest, context: grpc.ServicerContext,
                      caller: Caller) -> pb.AppendVersionResponse:
        vault_id = request.vault_id
        self.access.check_write(caller, vault_id)
        self._check_size(request.data)
        check_version(request.number, request.parent)

        def append() -> bool:
            if request.number > 1 and self.access.owner(vault_id) is None:
                return False  # an unwritten vault's chain is empty: it takes version 1 only
            self.access.bind(caller, vault_id)
            return self.chains.append(vault_id, request.number, request.parent, request.data)

        appended = self.quotas.charged(caller.account, len(request.data), append)
        head = self.chains.head(vault_id) if self.access.owner(vault_id) is not None else 0
        return pb.AppendVersionResponse(appended=appended, head=head)

    @_translate_errors
    def ListVersions(self, request: pb.ListVersionsRequest, context: grpc.ServicerContext,
                     caller: Caller) -> pb.ListVersionsResponse:
        vault_id = request.vault_id
        if not self.access.check_read(caller, vault_id):
            return pb.ListVersionsResponse()
        limit = min(request.limit or MAX_LIMIT, MAX_LIMIT)
        found, truncated = self.chains.versions_after(vault_id, request.after, limit)
        return pb.ListVersionsResponse(
            versions=[pb.Version(number=n, data=data) for n, data in found], truncated=truncated)

    @_translate_errors
    def GetHead(self, request: pb.GetHeadRequest, context: grpc.ServicerContext,
                caller: Caller) -> pb.GetHeadResponse:
        vault_id = request.vault_id
        if not self.access.check_read(caller, vault_id):
            return pb.GetHeadResponse(head=0)
        return pb.GetHeadResponse(head=self.chains.head(vault_id))

    @_translate_errors
    def BindDevice(self, request: pb.BindDeviceRequest, context: grpc.ServicerContext,
                   caller: Caller) -> pb.BindDeviceResponse:
        self.revocations.bind(caller, request.device_id, request.public_key)
        return pb.BindDeviceResponse()

    @_translate_errors
    def RevokeDevice(self, request: pb.RevokeDeviceRequest, context: grpc.ServicerContext,
                     caller: Caller) -> pb.RevokeDeviceResponse:
        name = self.revocations.revoke(caller, request.device_id, request.issued_at,
                                       request.signature)
        log.info("token %r revoked: device %s, revoked by device of token %r", name,
                 request.device_id, caller.token_name)
        return pb.RevokeDeviceResponse(token_name=name)

    def WatchHead(self, request: pb.WatchHeadRequest, context: grpc.ServicerContext,
                  caller: Caller) -> Iterator[pb.HeadEvent]:
        vault_id = request.vault_id
        try:
            exists = self.access.check_read(caller, vault_id)
        except MemvaultError as exc:
            context.abort(status_code(exc), str(exc))
        # Each stream holds a worker thread while it lasts (serve.py sizes the pool).
        if not self._watch_slots.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"this server already serves {self.max_watchers} WatchHead streams "
                          f"(memvault-server serve --max-watchers); poll GetHead instead")
        try:
            head = self.chains.head(vault_id) if exists else 0
            yield pb.HeadEvent(head=head)
            while context.is_active() and not self.stopping.is_set():
                if exists:
                    moved = self.chains.wait_head(vault_id, head, WATCH_TICK)
                else:
                    # Nothing to wait on until someone writes: look once a tick.
                    self.stopping.wait(WATCH_TICK)
                    exists = self.access.check_read(caller, vault_id)
                    moved = self.chains.head(vault_id) if exists else 0
                if moved != head:
                    head = moved
                    yield pb.HeadEvent(head=head)
        except MemvaultError as exc:
            context.abort(status_code(exc), str(exc))
        finally:
            self._watch_slots.release()
