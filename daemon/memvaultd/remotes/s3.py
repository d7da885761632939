"""`s3://bucket/prefix`: any S3-compatible bucket, direct.

    <prefix>/<vault_id>/objects/<name>
    <prefix>/<vault_id>/versions/<number:020d>

Put-if-absent is a PUT with `If-None-Match: *` (the store answers 412 when
the key exists), as a single request, never multipart (a multipart upload's
completion is not conditional everywhere). The bucket must honour it: AWS S3
and Ceph RGW do; a store that ignores the header would let two writers of
version N both "win", so check yours (tests/test_remote_contract.py races
eight writers per number).

Settings from the environment: `MEMVAULT_S3_ENDPOINT` (e.g.
`http://127.0.0.1:7480`; unset means AWS), `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_REGION` (default us-east-1). Addressing is
path-style (`endpoint/bucket/key`), which every S3-compatible store accepts.

`watch_head` polls every 0.5 s (`MEMVAULT_S3_POLL_S` changes it): one LIST
request per poll, 7,200 an hour per watching device, so that a memory written
on one device is on the others within about a second. On a self-hosted
S3-compatible store that is free; at AWS's LIST price it is about 3.6 cents
an hour per device, and `MEMVAULT_S3_POLL_S=5` cuts it tenfold for a
5-second delay. The sync worker also pulls on its own timer.

Errors the store returns other than "not found" and "precondition failed"
become `Unavailable` with the store's message (which names the key, never
the secret key).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
from obstore.store import S3Store

from memvault.errors import InvalidArgument, NotFound, Unavailable

from .blobs import BlobRemote

POLL_INTERVAL = float(os.environ.get("MEMVAULT_S3_POLL_S", "0.5"))
# obstore raises the built-in FileNotFoundError for a missing key; its own
# NotFoundError is caught as well in case a version changes that.
_NOT_FOUND = (NotFoundError, FileNotFoundError)
_ANSWERS = (*_NOT_FOUND, AlreadyExistsError, PreconditionError)
_LIST_PAGE = 1000  # S3's own maximum per ListObjectsV2 page


def s3_store(bucket: str) -> S3Store:
    """An obstore client for `bucket`, configured from the environment."""
    endpoint = os.environ.get("MEMVAULT_S3_ENDPOINT", "")
    kwargs: dict[str, str] = {}
    if endpoint:
        kwargs["endpoint"] = endpoint
    for env, key in (("AWS_ACCESS_KEY_ID", "access_key_id"),
                     ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
                     ("AWS_SESSION_TOKEN", "session_token")):
        if os.environ.get(env):
            kwargs[key] = os.environ[env]
    return S3Store(
        bucket,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        virtual_hosted_style_request=False,
        client_options={"allow_http": endpoint.startswith("http://"),
                        "connect_timeout": timedelta(seconds=5),
                        "timeout": timedelta(seconds=60)},
        # A down remote is reported within ~10 s instead of obstore's default
        # 3 minutes; the sync worker has its own back-off above this.
        retry_config={"max_retries": 3, "retry_timeout": timedelta(seconds=10)},
        **kwargs,  # type: ignore[arg-type]
    )


@contextmanager
def _reported(what: str) -> Iterator[None]:
    try:
        yield
    except _ANSWERS:
        raise  # answers, not failures: the callers turn them into results
    except (BaseError, OSError) as exc:
        raise Unavailable(f"S3 {what} failed: {str(exc).splitlines()[0]}") from exc


class S3Blobs:
    def __init__(self, store: S3Store, prefix: str, vault_id: str) -> None:
        self.store = store
        self.base = f"{prefix}/{vault_id}/" if prefix else f"{vault_id}/"

    def put_if_absent(self, key: str, data: bytes) -> bool:
        try:
            with _reported(f"PUT {key}"):
                obstore.put(self.store, self.base + key, data, mode="create",
                            use_multipart=False)
        except (AlreadyExistsError, PreconditionError):
            return False
        return True

    def get(self, key: str) -> bytes:
        try:
            with _reported(f"GET {key}"):
                return bytes(obstore.get(self.store, self.base + key).bytes())
        except _NOT_FOUND:
            raise NotFound(f"no object {key!r} under {self.base}") from None

    def exists(self, key: str) -> bool:
        try:
            with _reported(f"HEAD {key}"):
                obstore.head(self.store, self.base + key)
        except _NOT_FOUND:
            return False
        return True

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        # obstore lists whole path components; a string prefix such as
        # "objects/seg" is the listing of "objects/" filtered.
        directory = (self.base + prefix).rpartition("/")[0]
        full_prefix = self.base + prefix
        offset = self.base + start_after if start_after else None
        found: list[str] = []
        with _reported(f"LIST {prefix}"):
            for page in obstore.list(self.store, directory, offset=offset,
                                     chunk_size=_LIST_PAGE):
                for meta in page:
                    if meta["path"].startswith(full_prefix):
                        found.append(meta["path"][len(self.base):])
                if limit is not None and len(found) >= limit:
                    break
        found.sort()
        return found if limit is None else found[:limit]

    def delete(self, key: str) -> None:
        try:
            with _reported(f"DELETE {key}"):
                obstore.delete(self.store, self.base + key)
        except _NOT_FOUND:
            pass  # S3 itself answers 204 for a missing key; some stores 404

    def close(self) -> None:
        pass  # obstore's client closes its connections when dropped


def open_s3(url: str, bucket: str, prefix: str, vault_id: str) -> BlobRemote:
    """`url` is s3://`bucket`/`prefix`."""
    if not bucket:
        raise InvalidArgument(f"{url!r} names no bucket: use s3://bucket/prefix")
    return BlobRemote(url, S3Blobs(s3_store(bucket), prefix.strip("/"), vault_id),
                      POLL_INTERVAL)
