"""Access marks: recall's `mark_accessed`, applied at once and logged by a
background flush once a second (`vault.py` says why)."""

from __future__ import annotations

import logging
import threading
import time

from memvault_base.errors import MemvaultError
from memvaultd.crypto.entropy import new_id
from memvaultd.model.operations import ACCESS, Operation, encode
from memvaultd.vault.core import VaultCore

log = logging.getLogger("memvaultd.vault")

# One record a second: a crash loses at most a second of access counts.
_FLUSH_S = 1.0


class AccessMarks:
    def __init__(self, core: VaultCore) -> None:
        self.core = core
        self._pending: list[str] = []  # marked and applied, not yet logged
        self._flusher = threading.Thread(target=self._flush_loop, name="access-flush",
                                         daemon=True)

    def start(self) -> None:
        """Begin logging the marks once a second (once the vault is loaded)."""
        self._flusher.start()

    def mark(self, ids: list[str], *, wait: bool = True) -> bool:
        """Count an access of each memory; False, marking nothing, if the
        access lock is busy and `wait` is False (a commit or a snapshot's
        capture holds it: ~60 ms for a batch of 2,000 remembers)."""
        core = self.core
        if not core.access_lock.acquire(blocking=wait):
            return False
        try:
            now = time.time()
            for memory_id in ids:
                old = core.memories.get(memory_id)
                if old is not None:
                    core.memories.recount(old.copy(access_count=old.access_count + 1,
                                                   last_accessed_at=now))
            self._pending.extend(ids)
        finally:
            core.access_lock.release()
        return True

    def _flush_loop(self) -> None:
        while not self.core.closing.wait(_FLUSH_S):
            self.flush()

    def flush(self) -> None:
        """Write the pending access marks as one record (already applied)."""
        with self.core.write_lock:
            self.flush_locked()

    def flush_locked(self) -> None:
        """`flush` for a caller that holds the write lock."""
        with self.core.access_lock:
            ids = self.take()
        self.log(ids)

    def take(self) -> list[str]:
        """The marks not logged yet; the caller holds the access lock."""
        ids, self._pending = self._pending, []
        return ids

    def log(self, ids: list[str]) -> None:
        """Log marks taken by `take`; the caller holds the write lock."""
        if not ids:
            return
        core = self.core
        if core.genesis_rest:
            core.genesis_ahead(ids)  # the marked memories' puts first
        op = Operation(new_id(), ACCESS, core.clock.now(), ids=tuple(ids), at=time.time())
        core.state.seen.add(op.op_id)  # applied already, as each recall ran
        try:
            core.applied_txid = core.log.append([encode(op)])
        except (OSError, MemvaultError) as exc:  # a full disk: ResourceExhausted
            log.warning("could not record %d access marks: %s", len(ids), exc)
