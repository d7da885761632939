"""A `Remote` built on nothing but put-if-absent blobs: the directory and S3
remotes are this class over their own `Blobs`.

The chain needs no lock and no server: version N is the blob
`versions/{N:020d}`, appended only after `versions/{N-1:020d}` is seen to
exist, with put-if-absent, so of two racing writers of N exactly one wins.
No gap can appear, so the head is the last key of a listing of `versions/`.
The parent hash is not checked here (a blob store cannot): the reader
verifies the chain after decrypting.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from memvault_base.errors import InvalidArgument
from memvaultd.sync.remotes.names import (
    check_limit,
    check_name,
    check_prefix,
    check_version,
    version_key,
    version_number,
)

OBJECTS = "objects/"
VERSIONS = "versions/"


class Blobs(Protocol):
    """Keys relative to one vault (`objects/<name>`, `versions/<020d>`)."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write atomically and durably unless `key` exists; True if written."""
        ...

    def get(self, key: str) -> bytes:
        """The bytes under `key`; `NotFound` if none."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        """Keys starting with `prefix` (a string prefix) and sorting after
        `start_after`, sorted, the first `limit` of them (all if None)."""
        ...

    def delete(self, key: str) -> None:
        """Remove `key`; missing is fine."""
        ...

    def close(self) -> None: ...


class BlobRemote:
    """`Remote` over `Blobs`; `watch_head` polls the head every `poll_interval` s."""

    def __init__(self, url: str, blobs: Blobs, poll_interval: float) -> None:
        self.url = url
        self.blobs = blobs
        self.poll_interval = poll_interval
        self._head_hint = 0  # the last head seen: listings start just before it
        self._hint_lock = threading.Lock()

    def put_object(self, name: str, data: bytes) -> bool:
        return self.blobs.put_if_absent(OBJECTS + check_name(name), bytes(data))

    def get_object(self, name: str) -> bytes:
        return self.blobs.get(OBJECTS + check_name(name))

    def list_objects(self, prefix: str = "") -> list[str]:
        keys = self.blobs.list(OBJECTS + check_prefix(prefix))
        return [key[len(OBJECTS):] for key in keys]

    def delete_object(self, name: str) -> None:
        self.blobs.delete(OBJECTS + check_name(name))

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        if number > 1 and not self.blobs.exists(VERSIONS + version_key(number - 1)):
            return False  # the chain is not at number-1 (yet, or any more)
        written = self.blobs.put_if_absent(VERSIONS + version_key(number), bytes(data))
        if written:
            self._remember_head(number)
        return written

    def versions_after(self, number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        check_limit(limit)
        if number < 0:
            raise InvalidArgument(f"version number must be >= 0, got {number}")
        keys = self.blobs.list(VERSIONS, start_after=VERSIONS + version_key(number), limit=limit)
        return [(n, self.blobs.get(VERSIONS + version_key(n))) for n in _numbers(keys)]

    def head(self) -> int:
        with self._hint_lock:
            hint = self._head_hint
        # One short listing from just before the last head seen, instead of the
        # whole chain (10k versions are 10 pages of an S3 listing).
        start = VERSIONS + version_key(hint - 1) if hint > 1 else ""
        keys = self.blobs.list(VERSIONS, start_after=start)
        if not keys and hint > 0:
            keys = self.blobs.list(VERSIONS)  # the hint itself is gone: look again
        head = max(_numbers(keys), default=0)
        with self._hint_lock:
            self._head_hint = head
        return head

    def watch_head(self, after: int, timeout: float) -> int:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            head = self.head()
            remaining = deadline - time.monotonic()
            if head > after or remaining <= 0:
                return head
            time.sleep(min(self.poll_interval, remaining))

    def close(self) -> None:
        self.blobs.close()

    def _remember_head(self, number: int) -> None:
        with self._hint_lock:
            self._head_hint = max(self._head_hint, number)


def _numbers(keys: list[str]) -> list[int]:
    """The version numbers among `versions/` keys; anything else there is ignored."""
    found = (version_number(key[len(VERSIONS):]) for key in keys)
    return [number for number in found if number is not None]
