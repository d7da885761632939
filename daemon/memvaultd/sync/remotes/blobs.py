"""A `Remote` built on nothing but a put-if-absent `Store`
(`memvault_base.objects.store`): the directory and S3 remotes are this class
over the directory and bucket stores memvault-server keeps its vaults in,
with the same key layout (`memvault_base.objects.names`).

The chain needs no lock and no server: version N is the key
`<vault_id>/versions/{N:020d}`, written only after version N-1 is seen to
exist, with put-if-absent, so of two racing writers of N exactly one wins.
No gap can appear, so the head is the last key of a listing of `versions/`.
The parent hash is not checked here (a blob store cannot): the reader
verifies the chain after decrypting.
"""

from __future__ import annotations

import threading
import time

from memvault_base.errors import InvalidArgument, NotFound
from memvault_base.objects.names import (
    check_limit,
    check_name,
    check_prefix,
    check_version,
    object_key,
    objects_prefix,
    version_key,
    version_numbers,
    versions_prefix,
)
from memvault_base.objects.store import Store


class BlobRemote:
    """`Remote` for vault `vault_id` in `store`; `watch_head` polls the head
    every `poll_interval` s."""

    def __init__(self, url: str, store: Store, vault_id: str, poll_interval: float) -> None:
        self.url = url
        self.store = store
        self.vault_id = vault_id
        self.poll_interval = poll_interval
        self._objects = objects_prefix(vault_id)
        self._versions = versions_prefix(vault_id)
        self._head_hint = 0  # the last head seen: listings start just before it
        self._hint_lock = threading.Lock()

    def put_object(self, name: str, data: bytes) -> bool:
        return self.store.put_if_absent(object_key(self.vault_id, check_name(name)), bytes(data))

    def get_object(self, name: str) -> bytes:
        try:
            return self.store.get(object_key(self.vault_id, check_name(name)))
        except NotFound:
            raise NotFound(f"no object {name!r} in {self.url}") from None

    def list_objects(self, prefix: str = "") -> list[str]:
        keys = self.store.list(self._objects + check_prefix(prefix))
        return [key[len(self._objects):] for key in keys]

    def delete_object(self, name: str) -> None:
        self.store.delete(object_key(self.vault_id, check_name(name)))

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        if number > 1 and not self.store.exists(version_key(self.vault_id, number - 1)):
            return False  # the chain is not at number-1 (yet, or any more)
        written = self.store.put_if_absent(version_key(self.vault_id, number), bytes(data))
        if written:
            self._remember_head(number)
        return written

    def versions_after(self, number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        check_limit(limit)
        if number < 0:
            raise InvalidArgument(f"version number must be >= 0, got {number}")
        keys = self.store.list(self._versions, start_after=version_key(self.vault_id, number),
                               limit=limit)
        return [(n, self.store.get(version_key(self.vault_id, n)))
                for n in version_numbers(keys, self._versions)]

    def head(self) -> int:
        with self._hint_lock:
            hint = self._head_hint
        # One short listing from just before the last head seen, instead of the
        # whole chain (10k versions are 10 pages of an S3 listing).
        start = version_key(self.vault_id, hint - 1) if hint > 1 else ""
        keys = self.store.list(self._versions, start_after=start)
        if not keys and hint > 0:
            keys = self.store.list(self._versions)  # the hint itself is gone: look again
        head = max(version_numbers(keys, self._versions), default=0)
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
        self.store.close()

    def _remember_head(self, number: int) -> None:
        with self._hint_lock:
            self._head_hint = max(self._head_hint, number)
