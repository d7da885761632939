"""`grpc://host:port` and `grpcs://host:port`: a memvault-server.

Every call carries `authorization: Bearer <token>`. `grpcs` verifies the
server against the system roots, or against the PEM file named by
`MEMVAULT_TLS_CA` (a self-signed server). The server checks the parent hash
of every appended version and pushes head changes on a `WatchHead` stream,
so `watch_head` wakes as soon as the server has stored the append (no
polling).

Failed calls become the error tree's classes by status code
(`memvault_base.errors.error_from_status`): NOT_FOUND -> NotFound,
INVALID_ARGUMENT -> InvalidArgument, RESOURCE_EXHAUSTED -> ResourceExhausted,
UNAVAILABLE and deadlines -> Unavailable; UNAUTHENTICATED and
PERMISSION_DENIED -> MemvaultError with the server's message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import grpc

from memvault_base.errors import Unavailable, error_from_status
from memvault_base.objects.names import check_limit, check_name, check_prefix, check_version
from memvault_base.v1 import sync_pb2, sync_pb2_grpc

# Deadline of one unary call: a 16 MiB object at 1 MB/s still fits.
CALL_TIMEOUT = 60.0


class GrpcRemote:
    def __init__(self, url: str, target: str, secure: bool, token: str | None,
                 vault_id: str) -> None:
        self.url = url
        self.vault_id = vault_id
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        # The server bounds what it sends (its object limit, ~32 MiB per
        # ListVersions page); the client does not second-guess it.
        options = [("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1)]
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

    def put_object(self, name: str, data: bytes) -> bool:
        request = sync_pb2.PutObjectRequest(vault_id=self.vault_id, name=check_name(name),
                                            data=data)
        reply: sync_pb2.PutObjectResponse = self._call(self._stub.PutObject, request)
        return reply.written

    def get_object(self, name: str) -> bytes:
        request = sync_pb2.GetObjectRequest(vault_id=self.vault_id, name=check_name(name))
        reply: sync_pb2.GetObjectResponse = self._call(self._stub.GetObject, request)
        return reply.data

    def list_objects(self, prefix: str = "") -> list[str]:
        names: list[str] = []
        while True:
            request = sync_pb2.ListObjectsRequest(
                vault_id=self.vault_id, prefix=check_prefix(prefix),
                start_after=names[-1] if names else "")
            page: sync_pb2.ListObjectsResponse = self._call(self._stub.ListObjects, request)
            names.extend(page.names)
            if not page.truncated or not page.names:
                return names

    def delete_object(self, name: str) -> None:
        request = sync_pb2.DeleteObjectRequest(vault_id=self.vault_id, name=check_name(name))
        self._call(self._stub.DeleteObject, request)

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        request = sync_pb2.AppendVersionRequest(vault_id=self.vault_id, number=number,
                                                parent=parent, data=data)
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
            found.extend((version.number, version.data) for version in page.versions)
            if not page.truncated or not page.versions:
                break
            after = found[-1][0]
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

    def close(self) -> None:
        self._channel.close()


def _error(exc: grpc.RpcError, url: str) -> Exception:
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or code.name
    if code == grpc.StatusCode.UNAVAILABLE:
        return Unavailable(f"memvault-server at {url} is unreachable: {details}")
    return error_from_status(code, details)
