"""Publishing remote snapshots (`snapshots.py`) as the worker's rounds go.

Once the versions since the newest remote snapshot hold as many operations
as the vault holds memories (and at least 1,000), the full state at the
head is published once, in chunks of at most 4 MiB, so a new device of any
vault size bootstraps from it instead of replaying all history.
"""

from __future__ import annotations

import logging
import time

from memvault_base.errors import IntegrityError, RollbackDetected
from memvaultd.sync import snapshots
from memvaultd.sync.mark import ChainMark
from memvaultd.sync.vault_side import PushedVault

log = logging.getLogger("memvaultd.sync")

# A remote snapshot is due once the versions since the last one hold as many
# operations as the vault holds memories and turns, and at least this many.
# A joiner then downloads the snapshot and at most about as much again in
# versions; each snapshot is published once, so its cost is spread over
# that many operations (a 100k vault: 303 MiB over 100k operations of 2-4
# KiB each). 1,000: a small vault's snapshot every 1,000 operations.
SNAPSHOT_MIN_OPS = 1000
# After a failed publication (the remote refused or went away), the next
# try waits this long: each try seals and uploads the whole state (303 MiB
# at 100k), and the versions are pushed meanwhile regardless.
RETRY_S = 600.0


class SnapshotPublisher:
    def __init__(self, mark: ChainMark, vault: PushedVault) -> None:
        self.mark, self.vault = mark, vault
        # When a snapshot may next be tried, after one failed (monotonic).
        self.retry_at = 0.0
        mark.status.snapshot = mark.high_water.snapshot

    def maybe_publish(self) -> None:
        """Publish the state at the head, once, if a snapshot is due.

        Due by this device's count of the operations since the newest
        snapshot it knows (`HighWater.ops_since_snapshot`); then the remote
        is asked whether another device published one meanwhile (one
        listing, only when due), so a snapshot is sealed and uploaded once
        per due point, not once per round (while the head rests on a due
        point, each round would upload the whole state again: 45 MiB in 5
        idle rounds for an 8 MiB state). A publication that fails is
        logged and tried again after `RETRY_S`; it never fails the round,
        whose versions are pushed.
        """
        mark, status = self.mark.high_water, self.mark.status
        if (mark.head == 0 or mark.snapshot >= mark.head
                or mark.ops_since_snapshot < max(SNAPSHOT_MIN_OPS, self.vault.size())
                or time.monotonic() < self.retry_at):
            return
        remote, envelope = self.mark.remote, self.mark.envelope
        try:
            newest = snapshots.newest_published(remote, envelope, mark.head)
            if newest > mark.snapshot:
                self._known(newest)
                return
            body = self.vault.state_at_sync(mark.pushed_seq)
            if body is None:
                return  # a local write arrived meanwhile; a later round snapshots
            published = snapshots.publish(remote, envelope, mark.head, self.mark.head_hash(),
                                          body)
        except (RollbackDetected, IntegrityError):
            raise
        except Exception as exc:
            self.retry_at = time.monotonic() + RETRY_S
            status.errors = [*status.errors[-9:],
                             f"snapshot at version {mark.head} not published: {exc}"]
            log.warning("snapshot at version %d not published (%s); next try in %.0f s",
                        mark.head, exc, RETRY_S)
            return
        self._known(published.number)
        log.info("published the snapshot at version %d (%d bytes in %s)", published.number,
                 len(body), published.name)

    def _known(self, number: int) -> None:
        self.mark.save(self.mark.high_water.snapshot_at(number))
        self.mark.status.snapshot = number
