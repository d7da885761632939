"""Moving this device's local files to another vault key (`reseal`): what
a device does once it holds a newer key epoch than the one its files are
sealed under (docs/decisions/0013-key-epochs.md), so that whoever later
learns an older key (a leaked recovery key, a revoked device's) and copies
this disk reads nothing written here since.

The files and the order of the switch are `storage/rekey_journal.py`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from memvaultd.crypto.kdf import PURPOSE_LOG, PURPOSE_SNAPSHOT, derive_key
from memvaultd.storage.crash_points import reached
from memvaultd.storage.keys import store_rekeyed_key
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.rekey_journal import RekeyJournal, reseal_log, reseal_snapshots
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.vault.access import AccessMarks
from memvaultd.vault.core import VaultCore
from memvaultd.vault.snapshots import Snapshots

log = logging.getLogger("memvaultd.vault")


class Rekey:
    def __init__(self, core: VaultCore, marks: AccessMarks, snapshots: Snapshots) -> None:
        self.core, self.marks, self.snapshots = core, marks, snapshots

    def reseal(self, key: bytes, epoch: int, stage: Callable[[Path], None]) -> None:
        """Seal every local file under `key` (key epoch `epoch`'s) from now
        on, and keep `key` where the vault key is kept, in one step a crash
        cannot split; `stage(directory)` writes sync's files, sealed under
        `key`, into the directory the step moves into place.

        Writes and snapshots wait meanwhile: the log is copied record by
        record (42 MB in 1.2 s on a loaded 2-core machine: a 100k vault's
        210 MB log about 6 s), and a snapshot
        sealed under the old key after the switch would not open."""
        core = self.core
        core.await_loaded()
        vault_id = core.info.vault_id_bytes
        journal = RekeyJournal(core.data_dir, vault_id)
        with self.snapshots.exclusive(), core.write_lock:
            self.marks.flush_locked()
            last_seq = core.log.last_seq
            staging = journal.begin()
            try:
                unlocked = store_rekeyed_key(staging, vault_id, key, core.unlocked)
                reached("rekey:key")
                resealed = OperationLog(staging / "log", derive_key(key, purpose=PURPOSE_LOG),
                                        vault_id)
                try:
                    reseal_log(core.log, resealed)
                finally:
                    resealed.close()
                reseal_snapshots(core.snapshot_store, SnapshotStore(
                    staging / "snapshots", derive_key(key, purpose=PURPOSE_SNAPSHOT), vault_id))
                stage(staging)
                reached("rekey:staged")
                journal.commit(epoch)
            except BaseException:
                journal.abandon()  # nothing of the current files was touched
                raise
            reached("rekey:journaled")
            core.log.close()
            journal.roll_forward()
            core.become(core.info, unlocked)
            core.log.continue_after(last_seq)
        reached("rekey:done")
        log.info("the local files are sealed under key epoch %d's key", epoch)
