"""How much each account may keep: objects and bytes, over all its vaults.

An object (`PutObject`) and a version (`AppendVersion`) each count as one
object and their length in bytes; the `owner` binding is the server's own and
does not count. A write is charged before it reaches the store and given back
if nothing was written (the name was taken, the append lost a race, the store
failed), so concurrent writes of one account cannot pass the quota together.
A write that would take the account over either quota is RESOURCE_EXHAUSTED,
naming the quota, its flag and what the account holds. An admin's delete
gives its object back.

The counts live in memory. At start the server lists the whole store once
(`Store.inventory`: every key and its size) and reads each vault's owner,
so a restart forgets nothing; the log says what it counted and how long it
took. Replicas over one bucket each count at start and then only what passes
through them: an account writing through several replicas at once can pass
its quota by what it writes through the others until they restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memvault_base.errors import NotFound, ResourceExhausted
from memvault_base.objects.names import owner_key
from memvault_base.objects.store import Store

log = logging.getLogger("memvault_server.quotas")

# A vault of 100k memories remembered one at a time holds ~100k versions of
# 4,096 bytes (400 MiB; docs/benchmarks.md) and snapshots of about twice its
# ~190 MB state: ~0.8 GiB in ~100k objects. The defaults leave an account
# about ten such vaults.
DEFAULT_MAX_OBJECTS = 1_000_000
DEFAULT_MAX_BYTES = 10 * 1024**3


@dataclass
class Usage:
    objects: int = 0
    bytes: int = 0


class Quotas:
    def __init__(self, max_objects: int, max_bytes: int) -> None:
        self.max_objects = max_objects
        self.max_bytes = max_bytes
        self._usage: dict[str, Usage] = {}
        self._lock = threading.Lock()

    def count(self, store: Store) -> None:
        """Count what every account holds in `store` (at start, before serving)."""
        started = time.monotonic()
        per_vault: dict[str, Usage] = {}
        for key, size in store.inventory():
            vault, _, rest = key.partition("/")
            if rest.startswith(("objects/", "versions/")):
                usage = per_vault.setdefault(vault, Usage())
                usage.objects += 1
                usage.bytes += size
        accounts = 0
        with self._lock:
            self._usage.clear()
            for vault, usage in per_vault.items():
                try:
                    account = store.get(owner_key(vault)).decode()
                except NotFound:
                    continue  # not written through a server: nobody's
                total = self._usage.setdefault(account, Usage())
                total.objects += usage.objects
                total.bytes += usage.bytes
            accounts = len(self._usage)
        log.info("counted %d objects in %d vaults of %d accounts in %.1f s",
                 sum(u.objects for u in per_vault.values()), len(per_vault), accounts,
                 time.monotonic() - started)

    def usage(self, account: str) -> Usage:
        with self._lock:
            found = self._usage.get(account, Usage())
            return Usage(found.objects, found.bytes)

    def charged(self, account: str, size: int, write: Callable[[], bool]) -> bool:
        """`write()` (True if it wrote) with one object of `size` bytes charged
        to `account` first and given back unless it wrote; `ResourceExhausted`
        without calling it if the account has no room."""
        self.take(account, size)
        written = False
        try:
            written = write()
        finally:
            if not written:
                self.give_back(account, size)
        return written

    def take(self, account: str, size: int) -> None:
        """Charge one object of `size` bytes to `account`, or `ResourceExhausted`."""
        with self._lock:
            usage = self._usage.setdefault(account, Usage())
            if usage.objects + 1 > self.max_objects:
                raise ResourceExhausted(
                    f"account {account} holds {usage.objects} objects, its quota of "
                    f"{self.max_objects} (memvault-server serve --quota-objects)")
            if usage.bytes + size > self.max_bytes:
                raise ResourceExhausted(
                    f"account {account} holds {usage.bytes} bytes; {size} more would pass "
                    f"its quota of {self.max_bytes} bytes (memvault-server serve --quota-bytes)")
            usage.objects += 1
            usage.bytes += size

    def give_back(self, account: str, size: int) -> None:
        """Undo one `take`, or account for an object deleted."""
        with self._lock:
            usage = self._usage.setdefault(account, Usage())
            usage.objects = max(0, usage.objects - 1)
            usage.bytes = max(0, usage.bytes - size)
