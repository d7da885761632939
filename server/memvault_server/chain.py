"""The version chain of every vault: compare-and-swap appends, heads, watchers.

Append N (`AppendVersion`), in this order:

1. `versions/N` exists                     -> not appended (someone else won)
2. N > 1 and `versions/N-1` does not exist -> not appended (the caller is ahead)
3. N > 1 and sha256(versions/N-1) != parent -> InvalidArgument (the caller's
   history differs from the stored one)
4. put-if-absent `versions/N`              -> appended, or not if another
                                              writer got there between 1 and 4

Step 4 is the whole of the safety: the store's put-if-absent lets exactly one
writer of N through, whether the writers are threads of this process or
server replicas sharing a bucket. Steps 1-3 only give the right answer
early. Versions are write-once, so the hash read in step 3 cannot change
under the check.

Heads: each vault has a condition variable; an append here notifies it at
once. On a shared store (S3) another replica's appends are learned by a
poller thread that lists each watched vault's head every `poll_interval`
(1 s) while at least one watcher waits on it, so a device watching replica A
hears of an append made through replica B within about a second.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field

from memvault_base.errors import InvalidArgument
from memvault_base.objects.names import check_version, version_key, version_numbers, versions_prefix
from memvault_base.objects.store import Store

log = logging.getLogger("memvault_server.chain")

# A ListVersions reply stops adding versions past this many bytes (at least
# one is always sent): 32 MiB keeps a reply within gRPC's comfortable range
# while holding ~8,000 typical 4 KiB versions.
REPLY_BYTES = 32 * 1024 * 1024
POLL_INTERVAL = 1.0


@dataclass
class _VaultState:
    changed: threading.Condition = field(default_factory=threading.Condition)
    head: int | None = None  # None: not read from the store yet
    tip: tuple[int, bytes] = (0, b"")  # (number, sha256) of the newest version hashed
    watchers: int = 0


class Chains:
    def __init__(self, store: Store, poll_interval: float = POLL_INTERVAL) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self._states: dict[str, _VaultState] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._poller: threading.Thread | None = None

    def _state(self, vault_id: str) -> _VaultState:
        with self._lock:
            state = self._states.get(vault_id)
            if state is None:
                state = self._states[vault_id] = _VaultState()
            return state

    def append(self, vault_id: str, number: int, parent: bytes, data: bytes) -> bool:
        check_version(number, parent)
        state = self._state(vault_id)
        if self.store.exists(version_key(vault_id, number)):
            return False
        if number > 1:
            if not self.store.exists(version_key(vault_id, number - 1)):
                return False
            if self._hash_of(vault_id, state, number - 1) != parent:
                raise InvalidArgument(
                    f"parent does not match version {number - 1} as stored: this device's "
                    f"history differs from the server's")
        if not self.store.put_if_absent(version_key(vault_id, number), data):
            return False
        with state.changed:
            state.tip = (number, hashlib.sha256(data).digest())
            if state.head is None or number > state.head:
                state.head = number
            state.changed.notify_all()
        return True

    def _hash_of(self, vault_id: str, state: _VaultState, number: int) -> bytes:
        with state.changed:
            tip_number, tip_hash = state.tip
        if tip_number == number:
            return tip_hash  # the usual case: appending right after the last append seen
        digest = hashlib.sha256(self.store.get(version_key(vault_id, number))).digest()
        with state.changed:
            if number > state.tip[0]:
                state.tip = (number, digest)
        return digest

    def head(self, vault_id: str) -> int:
        state = self._state(vault_id)
        if not self.store.shared:
            with state.changed:
                if state.head is not None:
                    return state.head
        return self._read_head(vault_id, state)

    def _read_head(self, vault_id: str, state: _VaultState) -> int:
        """The head as the store has it, from one listing that starts just
        before the head known here (a 10k-version chain is not re-listed)."""
        prefix = versions_prefix(vault_id)
        known = state.head or 0
        start = version_key(vault_id, known - 1) if known > 1 else ""
        keys = self.store.list(prefix, start_after=start)
        if not keys and known > 0:
            keys = self.store.list(prefix)
        listed = max(version_numbers(keys, prefix), default=0)
        with state.changed:
            # Forward only: an append here may have landed after the listing.
            if state.head is None or listed > state.head:
                state.head = listed
                state.changed.notify_all()
            return state.head

    def versions_after(self, vault_id: str, after: int,
                       limit: int) -> tuple[list[tuple[int, bytes]], bool]:
        """Up to `limit` versions after `after`, and whether the reply stopped at
        REPLY_BYTES with more to come."""
        prefix = versions_prefix(vault_id)
        keys = self.store.list(prefix, start_after=version_key(vault_id, after), limit=limit)
        found: list[tuple[int, bytes]] = []
        size = 0
        for number in version_numbers(keys, prefix):
            if found and size >= REPLY_BYTES:
                return found, True
            data = self.store.get(version_key(vault_id, number))
            found.append((number, data))
            size += len(data)
        return found, False

    def wait_head(self, vault_id: str, after: int, timeout: float) -> int:
        """The head once it is greater than `after`, or after `timeout` s."""
        state = self._state(vault_id)
        self.head(vault_id)  # fills state.head
        deadline = time.monotonic() + timeout
        with state.changed:
            state.watchers += 1
            try:
                if self.store.shared:
                    self._start_poller()
                while (state.head or 0) <= after and not self._stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    state.changed.wait(remaining)
                return state.head or 0
            finally:
                state.watchers -= 1

    def _start_poller(self) -> None:
        with self._lock:
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="head-poller",
                                                daemon=True)
                self._poller.start()

    def _poll(self) -> None:
        while not self._stopping.wait(self.poll_interval):
            with self._lock:
                watched = [(vault, state) for vault, state in self._states.items()
                           if state.watchers > 0]
            for vault_id, state in watched:
                try:
                    self._read_head(vault_id, state)
                except Exception as exc:  # a bucket hiccup must not end the poller
                    log.warning("polling the head of vault %s failed: %s", vault_id, exc)

    def close(self) -> None:
        """Wake every watcher and stop the poller."""
        self._stopping.set()
        with self._lock:
            states = list(self._states.values())
        for state in states:
            with state.changed:
                state.changed.notify_all()
        if self._poller is not None:
            self._poller.join(timeout=5)
