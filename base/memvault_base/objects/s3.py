"""A put-if-absent store on an S3-compatible bucket: memvault-server's
`--store s3://bucket/prefix` (for more than one host) and the daemon's
`s3://bucket/prefix` remotes.

    <prefix>/<vault_id>/owner                    (memvault-server only)
    <prefix>/<vault_id>/objects/<name>
    <prefix>/<vault_id>/versions/<number:020d>

Put-if-absent is one PUT with `If-None-Match: *` (412 when the key exists),
never multipart (a multipart upload's completion is not conditional
everywhere). That single conditional write is all the safety the version
chain needs, so any number of writers (server replicas, devices) can share
the bucket: two racing to append version N both PUT `versions/N`
conditionally and the bucket lets exactly one through. The bucket must honour
the header (AWS S3 and Ceph RGW do; tests/test_server.py races two server
replicas over RGW, tests/test_remote_contract.py eight devices).

A store that ignores the header lets the last writer win instead, silently,
and nothing above it could tell: `honours_put_if_absent` probes for that
(two conditional PUTs of one fresh key; the second must be refused), and the
daemon runs it before it sets sync up on a bucket.

A GET returns at most `max_object` bytes (the daemon's remotes:
`names.MAX_OBJECT`; memvault-server bounds what it stores as it takes it): a
larger object is refused by its stated size before its body is read, and a
body longer than stated is cut off at the bound.

Settings from the environment: `MEMVAULT_S3_ENDPOINT` (unset: AWS),
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
`AWS_REGION` (default us-east-1); path-style addressing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotFoundError, PreconditionError
from obstore.store import S3Store as ObjectStore

from memvault_base.errors import IntegrityError, InvalidArgument, NotFound, Unavailable

# obstore raises the built-in FileNotFoundError for a missing key; its own
# NotFoundError is caught as well in case a version changes that.
_NOT_FOUND = (NotFoundError, FileNotFoundError)
_ANSWERS = (*_NOT_FOUND, AlreadyExistsError, PreconditionError)
_LIST_PAGE = 1000  # S3's own maximum per ListObjectsV2 page
_READ_CHUNK = 1 << 20


class S3Store:
    """`Store` (store.py) over the keys under `prefix` in a bucket."""

    shared = True

    def __init__(self, store: ObjectStore, prefix: str, max_object: int | None = None) -> None:
        self.store = store
        self.base = f"{prefix}/" if prefix else ""
        self.max_object = max_object

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
                result = obstore.get(self.store, self.base + key)
                self._check_size(key, result.meta["size"])
                body = bytearray()
                for chunk in result.stream(min_chunk_size=_READ_CHUNK):
                    body += chunk
                    self._check_size(key, len(body))
                return bytes(body)
        except _NOT_FOUND:
            raise NotFound(f"no object {key!r}") from None

    def honours_put_if_absent(self, key: str) -> bool:
        """Whether the bucket refuses a second put-if-absent of `key`, a
        fresh key no one else writes, and keeps the first one's bytes. The
        key is deleted afterwards."""
        try:
            first = self.put_if_absent(key, b"first")
            second = self.put_if_absent(key, b"second")
            kept = self.get(key) == b"first"
        finally:
            self.delete(key)
        return first and not second and kept

    def exists(self, key: str) -> bool:
        try:
            with _reported(f"HEAD {key}"):
                obstore.head(self.store, self.base + key)
        except _NOT_FOUND:
            return False
        return True

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        # obstore lists whole path components: list the directory, filter by string.
        full_prefix = self.base + prefix
        directory = full_prefix.rpartition("/")[0]
        offset = self.base + start_after if start_after else None
        found: list[str] = []
        with _reported(f"LIST {prefix}"):
            for page in obstore.list(self.store, directory, offset=offset,
                                     chunk_size=_LIST_PAGE):
                found.extend(meta["path"][len(self.base):] for meta in page
                             if meta["path"].startswith(full_prefix))
                if limit is not None and len(found) >= limit:
                    break
        found.sort()
        return found if limit is None else found[:limit]

    def inventory(self) -> Iterator[tuple[str, int]]:
        with _reported("LIST"):
            for page in obstore.list(self.store, self.base.rstrip("/") or None,
                                     chunk_size=_LIST_PAGE):
                for meta in page:
                    yield meta["path"][len(self.base):], meta["size"]

    def delete(self, key: str) -> None:
        try:
            with _reported(f"DELETE {key}"):
                obstore.delete(self.store, self.base + key)
        except _NOT_FOUND:
            pass

    def close(self) -> None:
        pass

    def _check_size(self, key: str, size: int) -> None:
        if self.max_object is not None and size > self.max_object:
            raise IntegrityError(f"bucket object {key} is over {self.max_object} bytes "
                                 f"({size}), more than memvault ever writes; refused unread")


def open_s3_store(url: str) -> S3Store:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not bucket:
        raise InvalidArgument(f"--store {url!r} names no bucket: use s3://bucket/prefix")
    return S3Store(bucket_client(bucket), prefix.strip("/"))


def bucket_client(bucket: str) -> ObjectStore:
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
    return ObjectStore(
        bucket,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        virtual_hosted_style_request=False,
        client_options={"allow_http": endpoint.startswith("http://"),
                        "connect_timeout": timedelta(seconds=5),
                        "timeout": timedelta(seconds=60)},
        # A down store is reported within ~10 s instead of obstore's default
        # 3 minutes; callers (the sync worker) have their own back-off above.
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
        raise Unavailable(f"bucket {what} failed: {str(exc).splitlines()[0]}") from exc
