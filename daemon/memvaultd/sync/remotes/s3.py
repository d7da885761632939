"""`s3://bucket/prefix`: any S3-compatible bucket, direct.

    <prefix>/<vault_id>/objects/<name>
    <prefix>/<vault_id>/versions/<number:020d>

Put-if-absent is a PUT with `If-None-Match: *` (the store answers 412 when
the key exists), as a single request, never multipart (a multipart upload's
completion is not conditional everywhere). The bucket must honour it: AWS S3
and Ceph RGW do (tests/test_remote_contract.py races eight writers per
number). A store that ignores the header would let two writers of version N
both "win": the second device's operations would be overwritten while it
counts them as pushed, and it prunes them. So `init` and `join` probe the
store first, with two conditional PUTs of one fresh key
`<vault_id>/probes/<random>` (deleted afterwards), and refuse a store that
accepts the second.

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
import secrets

from memvault_base.errors import InvalidArgument
from memvault_base.objects.names import MAX_OBJECT
from memvault_base.objects.s3 import S3Store, bucket_client
from memvaultd.sync.remotes.blobs import BlobRemote

POLL_INTERVAL = float(os.environ.get("MEMVAULT_S3_POLL_S", "0.5"))


def open_s3(url: str, bucket: str, prefix: str, vault_id: str, *, probe: bool = False
            ) -> BlobRemote:
    """`url` is s3://`bucket`/`prefix`. The bucket code is the server's own
    `S3Store` (one implementation of conditional writes), rooted at
    `prefix`; it holds no key and decrypts nothing. With `probe`, a store
    that ignores conditional writes is refused (`InvalidArgument`)."""
    if not bucket:
        raise InvalidArgument(f"{url!r} names no bucket: use s3://bucket/prefix")
    store = S3Store(bucket_client(bucket), prefix.strip("/"), max_object=MAX_OBJECT)
    if probe and not store.honours_put_if_absent(f"{vault_id}/probes/{secrets.token_hex(8)}"):
        where = os.environ.get("MEMVAULT_S3_ENDPOINT") or "AWS S3"
        raise InvalidArgument(
            f"remote: {url}: the S3 store at {where} ignores conditional writes: it accepted "
            "a second PUT with If-None-Match: * of one key. Two devices appending the same "
            "version would both be told they won, and one's memories would be lost. Use a "
            "store that refuses such a PUT with 412 (AWS S3 and Ceph RGW do)")
    return BlobRemote(url, store, vault_id, POLL_INTERVAL)
