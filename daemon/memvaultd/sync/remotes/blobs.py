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

What the store answers is bounded before it is believed: an object or
version is at most `names.MAX_OBJECT` bytes, written or read (the store refuses
to read more), a listing of objects at most `MAX_LISTED` names, and the
head is found with listings of `MAX_LIMIT` keys at a time, so a store that
holds millions of names (a planted folder, a hostile bucket) costs time,
never memory.
"""

from __future__ import annotations

import threading
import time

from memvault_base.errors import IntegrityError, InvalidArgument, NotFound
from memvault_base.objects.names import (
    MAX_LIMIT,
    MAX_LISTED,
    MAX_VERSION,
    check_limit,
    check_name,
    check_object_size,
    check_prefix,
    check_version,
    is_name,
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
        key = object_key(self.vault_id, check_name(name))
        return self.store.put_if_absent(key, bytes(check_object_size(data, f"object {name!r}")))

    def get_object(self, name: str) -> bytes:
        try:
            return self.store.get(object_key(self.vault_id, check_name(name)))
        except NotFound:
            raise NotFound(f"no object {name!r} in {self.url}") from None

    def list_objects(self, prefix: str = "") -> list[str]:
        keys = self.store.list(self._objects + check_prefix(prefix), limit=MAX_LISTED + 1)
        if len(keys) > MAX_LISTED:
            raise IntegrityError(f"{self.url} lists more than {MAX_LISTED} objects under "
                                 f"{prefix!r}, more than memvault ever writes; refused")
        names = (key[len(self._objects):] for key in keys)
        return [name for name in names if is_name(name)]

    def delete_object(self, name: str) -> None:
        self.store.delete(object_key(self.vault_id, check_name(name)))

    def append_version(self, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        if number > 1 and not self.store.exists(version_key(self.vault_id, number - 1)):
            return False  # the chain is not at number-1 (yet, or any more)
        written = self.store.put_if_absent(version_key(self.vault_id, number),
                                           bytes(check_object_size(data, f"version {number}")))
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
        if hint == 0:
            hint = self._probe_head()
        # One short listing from just before the last head seen, instead of the
        # whole chain (10k versions are 10 pages of an S3 listing).
        head = self._last_after(version_key(self.vault_id, hint - 1) if hint > 1 else "")
        if head is None and hint > 0:
            head = self._last_after("")  # the hint itself is gone: look again
        with self._hint_lock:
            self._head_hint = head or 0
        return head or 0

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

    def _last_after(self, start: str) -> int | None:
        """The highest version number listed after key `start`; None if
        nothing is listed there. A page at a time: only the last is held."""
        last: int | None = None
        while True:
            keys = self.store.list(self._versions, start_after=start, limit=MAX_LIMIT)
            numbers = version_numbers(keys, self._versions)
            if keys:
                last = max([last or 0, *numbers])
            # Version keys (20 digits) sort before any stray's that follows
            # them: a page without one has nothing more to find.
            if len(keys) < MAX_LIMIT or not numbers or keys[-1] <= start:
                return last
            start = keys[-1]

    def _probe_head(self) -> int:
        """Near the head without listing the chain: from the first version,
        `exists` at doubling steps, then halving ones (~2 log2(head) calls:
        40 for a million versions, where a listing is 1,000 pages)."""
        first = version_numbers(self.store.list(self._versions, limit=1), self._versions)
        if not first:
            return 0
        low, step = first[0], 1
        while low + step <= MAX_VERSION and self.store.exists(
                version_key(self.vault_id, low + step)):
            low, step = low + step, step * 2
        while step > 1:  # low exists; low + step does not (or is past the last number)
            step //= 2
            if low + step <= MAX_VERSION and self.store.exists(
                    version_key(self.vault_id, low + step)):
                low += step
        return low

    def _remember_head(self, number: int) -> None:
        with self._hint_lock:
            self._head_hint = max(self._head_hint, number)

