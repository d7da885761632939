"""`grpc://host:port` and `grpcs://host:port`: a memvault-server.

Every call carries `authorization: Bearer <token>`. `grpcs` verifies the
server against the system roots, or against the PEM file named by
`MEMVAULT_TLS_CA` (a self-signed server). The server checks the parent hash
of every appended version and pushes head changes on a `WatchHead` stream,
so `watch_head` wakes as soon as the server has stored the append (no
polling).

Failed calls become the error tree's classes by status code
(`memvault_base.rpc.error_from_status`): NOT_FOUND -> NotFound,
INVALID_ARGUMENT -> InvalidArgument, RESOURCE_EXHAUSTED -> ResourceExhausted,
UNAVAILABLE and deadlines -> Unavailable; UNAUTHENTICATED and
PERMISSION_DENIED -> MemvaultError with the server's message.

The server is not trusted with the device's memory either. A reply over
`MAX_REPLY` bytes is refused by gRPC before it is read; an object or
version over `names.MAX_OBJECT`, a listing that does not move forward,
strays outside its prefix or passes `names.MAX_LISTED` names, and versions
out of order or more than were asked for are `IntegrityError`: an honest
memvault-server sends none of them. Objects this device would send over
`MAX_OBJECT` are refused before they leave (`ResourceExhausted`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from memvault_base.device_revocation import request_bytes
from memvault_base.errors import IntegrityError, Unavailable
from memvault_base.objects.names import (
    MAX_LISTED,
    MAX_OBJECT,
    check_limit,
    check_name,
    check_object_size,
    check_prefix,
    check_version,
    is_name,
)
from memvault_base.rpc import error_from_status
from memvault_base.v1 import sync_pb2, sync_pb2_grpc

# Deadline of one unary call: a 16 MiB object at 1 MB/s still fits.
CALL_TIMEOUT = 60.0
_MIB = 1024 * 1024
# The largest reply memvault-server sends: a ListVersions page stops taking
# versions once past 32 MiB (the server's `chain.REPLY_BYTES`), so it holds
# at most that plus one version; any other reply is one object or a page of
# 10,000 names (~2 MB). 1 MiB covers the framing.
MAX_REPLY = 32 * _MIB + MAX_OBJECT + _MIB
# The largest request: one object or version and its name and parent.
_MAX_REQUEST = MAX_OBJECT + _MIB


class GrpcRemote:
    def __init__(self, url: str, target: str, secure: bool, token: str | None,
                 vault_id: str) -> None:
        self.url = url
        self.vault_id = vault_id
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [("grpc.max_receive_message_length", MAX_REPLY),
                   ("grpc.max_send_message_length", _MAX_REQUEST)]
        if secure:
            ca = os.environ.get("MEMVAULT_TLS_CA")
            roots = Path(ca).read_bytes() if ca else None
            self._channel = grpc.secure_channel(
                target, grpc.ssl_channel_credentials(root_certificates=roots), options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = sync_pb2_grpc.SyncStub(self._channel)  # type: ignore[no-untyped-call]

    def _call(self, method: Any, request: object) -> Any:
        """`method(request)` with the deadline and token; errors as the error tree."""
        try:
            return method(request, timeout=CALL_TIMEOUT, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _error(exc, self.url) from None

    def _refuse(self, what: str) -> IntegrityError:
        return IntegrityError(f"memvault-server at {self.url} {what}, which memvault-server "
                              "never does; refused")

    def put_object(self, name: str, data: bytes) -> bool:
        request = sync_pb2.PutObjectRequest(
            vault_id=self.vault_id, name=check_name(name),
            data=check_object_size(data, f"object {name!r}"))
        reply: sync_pb2.PutObjectResponse = self._call(self._stub.PutObject, request)
        return reply.written

    def get_object(self, name: str) -> bytes:
        request = sync_pb2.GetObjectRequest(vault_id=self.vault_id, name=check_name(name))
        reply: sync_pb2.GetObjectResponse = self._call(self._stub.GetObject, request)
        if len(reply.data) > MAX_OBJECT:
            raise self._refuse(f"sent object {name!r} of {len(reply.data)} bytes, over "
                               f"{MAX_OBJECT}")
        return reply.data

    def list_objects(self, prefix: str = "") -> list[str]:
        check_prefix(prefix)
        names: list[str] = []
        while True:
            last = names[-1] if names else ""
            request = sync_pb2.ListObjectsRequest(vault_id=self.vault_id, prefix=prefix,
                                                  start_after=last)
            page: sync_pb2.ListObjectsResponse = self._call(self._stub.ListObjects, request)
            for name in page.names:
                if name <= last or not name.startswith(prefix) or not is_name(name):
                    raise self._refuse(f"listed {name!r} after {last!r} under {prefix!r}")
                names.append(name)
                last = name
            if len(names) > MAX_LISTED:
                raise self._refuse(f"listed more than {MAX_LISTED} objects under {prefix!r}")
            if not page.truncated or not page.names:
                return names

    def delete_object(self, name: str) -> None:
        request = sync_pb2.DeleteObjectRequest(vault_id=self.vault_id, name=check_name(name))
        self._call(self._stub.DeleteObject, request)

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        request = sync_pb2.AppendVersionRequest(
            vault_id=self.vault_id, number=number, parent=parent,
            data=check_object_size(data, f"version {number}"))
        reply: sync_pb2.AppendVersionResponse = self._call(self._stub.AppendVersion, request)
        return reply.appended

    def versions_after(self, number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        check_limit(limit)
        found: list[tuple[int, bytes]] = []
        after = number
        while len(found) < limit:
            request = sync_pb2.ListVersionsRequest(vault_id=self.vault_id, after=after,
                                                   limit=limit - len(found))
            page: sync_pb2.ListVersionsResponse = self._call(self._stub.ListVersions, request)
            if len(page.versions) > limit - len(found):
                raise self._refuse(f"sent {len(page.versions)} versions where at most "
                                   f"{limit - len(found)} were asked for")
            for version in page.versions:
                if version.number <= after:
                    raise self._refuse(f"sent version {version.number} after {after}")
                if len(version.data) > MAX_OBJECT:
                    raise self._refuse(f"sent version {version.number} of "
                                       f"{len(version.data)} bytes, over {MAX_OBJECT}")
                found.append((version.number, version.data))
                after = version.number
            if not page.truncated or not page.versions:
                break
        return found

    def head(self) -> int:
        request = sync_pb2.GetHeadRequest(vault_id=self.vault_id)
        reply: sync_pb2.GetHeadResponse = self._call(self._stub.GetHead, request)
        return reply.head

    def watch_head(self, after: int, timeout: float) -> int:
        if timeout <= 0:
            return self.head()
        stream = self._stub.WatchHead(sync_pb2.WatchHeadRequest(vault_id=self.vault_id),
                                      timeout=timeout, metadata=self._metadata)
        head: int | None = None
        try:
            for event in stream:  # the first event is the current head
                head = event.head
                if head > after:
                    break
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise _error(exc, self.url) from None
        finally:
            stream.cancel()
        return self.head() if head is None else head

    def bind_device(self, device: str, public_key: bytes) -> None:
        """Bind this remote's token to `device` and its Ed25519 public key
        (first bind wins: PERMISSION_DENIED if bound to another)."""
        self._call(self._stub.BindDevice,
                   sync_pb2.BindDeviceRequest(device_id=device, public_key=public_key))

    def revoke_device(self, target: str, signer: str, sign: Callable[[bytes], bytes]) -> str:
        """Revoke the token bound to device `target`, asked by this token's
        device `signer` with its key (`sign`); returns the token's name."""
        issued_at = int(time.time() * 1000)
        reply = self._call(self._stub.RevokeDevice, sync_pb2.RevokeDeviceRequest(
            device_id=target, issued_at=issued_at,
            signature=sign(request_bytes(signer, target, issued_at))))
        return str(reply.token_name)

    def close(self) -> None:
        self._channel.close()


def _error(exc: grpc.RpcError, url: str) -> Exception:
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or code.name
    if code == grpc.StatusCode.UNAVAILABLE:
        # `Syncing` names the remote to whoever asked (`the sync remote URL
        # is unreachable: ...`); the status shows it beside this message.
        return Unavailable(f"memvault-server: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Unavailable(f"memvault-server: no answer within {CALL_TIMEOUT:g} s")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and f"vs. {MAX_REPLY})" in details:
        # gRPC's own words for a reply over this channel's receive limit.
        return IntegrityError(f"memvault-server at {url} sent a reply over {MAX_REPLY} bytes, "
                              "which memvault-server never does; refused unread")
    return error_from_status(code, details)

