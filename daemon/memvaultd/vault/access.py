"""Access marks: recall's `mark_accessed`, applied at once and logged by a
background flush once a second (`vault.py` says why)."""

from __future__ import annotations

import logging
import time

from memvault_base.errors import MemvaultError
from memvaultd.crypto.entropy import new_id
from memvaultd.model.operations import ACCESS, Operation, encode
from memvaultd.vault.core import VaultCore

log = logging.getLogger("memvaultd.vault")

_ACCESS_FLUSH_S = 1.0


class VaultAccessMarks(VaultCore):
    def _mark_accessed(self, ids: list[str], *, wait: bool = True) -> bool:
        """Count an access of each memory; False, marking nothing, if the
        access lock is busy and `wait` is False (a commit or a snapshot's
        capture holds it: ~60 ms for a batch of 2,000 remembers)."""
        if not self._access_lock.acquire(blocking=wait):
            return False
        try:
            now = time.time()
            for memory_id in ids:
                old = self.memories.get(memory_id)
                if old is not None:
                    self.memories.recount(old.copy(access_count=old.access_count + 1,
                                                  last_accessed_at=now))
            self._accessed.extend(ids)
        finally:
            self._access_lock.release()
        return True

    def _flush_access_loop(self) -> None:
        while not self._closing.wait(_ACCESS_FLUSH_S):
            self.flush_access()

    def flush_access(self) -> None:
        """Write the pending access marks as one record (already applied)."""
        with self._write_lock:
            self._flush_access_locked()

    def _flush_access_locked(self) -> None:
        """`flush_access` for a caller that holds the write lock."""
        with self._access_lock:
            ids = self._take_access_marks()
        self._log_access(ids)

    def _take_access_marks(self) -> list[str]:
        """The marks not logged yet; the caller holds the access lock."""
        ids, self._accessed = self._accessed, []
        return ids

    def _log_access(self, ids: list[str]) -> None:
        """Log marks taken from `_accessed`; the caller holds the write lock."""
        if not ids:
            return
        if self._genesis_rest:
            self._genesis_ahead(ids)  # the marked memories' puts first
        op = Operation(new_id(), ACCESS, self.clock.now(), ids=tuple(ids),
                       at=time.time())
        self.state.seen.add(op.op_id)  # applied already, as each recall ran
        try:
            self.applied_txid = self.log.append([encode(op)])
        except (OSError, MemvaultError) as exc:  # a full disk: ResourceExhausted
            log.warning("could not record %d access marks: %s", len(ids), exc)
