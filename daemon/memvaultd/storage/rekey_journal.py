"""The rekey journal: a device moves its local files to a new vault key
(the newest key epoch's, docs/decisions/0013-key-epochs.md) in one step that
a crash cannot split.

    data/rekey.staging/   every file sealed under the vault key, resealed
                          under the new one, complete and fsynced:
                          log/ snapshots/ sync.state [sync.setup]
                          [sync.rotation] [vault.key]
    data/rekey.journal    {"format": 1, "vault_id": HEX, "epoch": N,
                           "staged": [NAME, ...]}
    data/rekey.replaced/  the files under the old key, while they are moved out

The new key is stored first, beside the old one (`keys.store_rekeyed_key`:
the keyring entry ``rekey-<vault id>``, or `rekey.staging/vault.key` under
the same passphrase). Then `rekey.staging/` is written whole (`reseal_log`:
every log record opened and sealed again, same seq; `reseal_snapshots`:
every snapshot and delta, same body), sync's files last; then the journal
(temporary file, fsync, rename, directory fsync): its rename is the commit
point. Then each of `NAMES` moves: the current file into `rekey.replaced/`,
the staged one into its place; the keyring's vault entry takes the new key
(`keys.promote_rekeyed_key`); last `rekey.replaced/`, `rekey.staging/`, the
journal and the ``rekey-`` entry are removed.

At start, before the vault key is loaded (`recover`): a journal means the
rekey was committed, so it is rolled forward (each move redone or skipped
as the files show, the keyring entry copied again); a `rekey.staging/`
without a journal means it was not, so it is removed with the ``rekey-``
entry, and the vault opens under its old key, as it was. Either way every
acknowledged write is there: the log is resealed whole while writes wait.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from memvault_base.durable import replace_file, sync_dir
from memvault_base.errors import IntegrityError
from memvaultd.storage.crash_points import reached
from memvaultd.storage.keys import drop_rekeyed_key, promote_rekeyed_key
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.snapshots import SnapshotStore

__all__ = ["JOURNAL", "NAMES", "STAGING", "RekeyJournal", "reseal_log", "reseal_snapshots"]

log = logging.getLogger("memvaultd.storage")

STAGING = "rekey.staging"
JOURNAL = "rekey.journal"
REPLACED = "rekey.replaced"
FORMAT = 1
# Every file sealed under the vault key, and the key file. The log moves
# first and sync.state after the snapshots: a start that finds the journal
# moves the rest whatever was moved.
NAMES = ("log", "snapshots", "sync.state", "sync.setup", "sync.rotation", "vault.key")
# Records resealed per append (one write and fdatasync each): 1,000 records
# of ~2 KiB, as a sync version carries.
_BATCH = 1000


def reseal_log(source: OperationLog, target: OperationLog) -> int:
    """Every record of `source` sealed again in `target` (empty, under
    another key), with the same seqs; the last seq."""
    first = source.first_seq
    if first > source.last_seq:
        return source.last_seq  # no record held (the caller keeps the numbering)
    target.continue_after(first - 1)
    batch: list[bytes] = []
    for _, record in source.replay(first - 1):
        batch.append(record)
        if len(batch) == _BATCH:
            target.append(batch)
            batch = []
    if batch:
        target.append(batch)
    if target.last_seq != source.last_seq:
        raise IntegrityError(f"log: resealed up to seq {target.last_seq}, not "
                             f"{source.last_seq}")
    return target.last_seq


def reseal_snapshots(source: SnapshotStore, target: SnapshotStore) -> int:
    """Every snapshot and delta of `source` sealed again in `target`, same
    seq and body; how many files. The deltas go last: writing a full
    snapshot deletes the deltas beside it."""
    count = 0
    for seq, _ in source.files():
        target.write(seq, source.read(seq))
        count += 1
    for seq, _ in source.deltas():
        target.write_delta(seq, source.read_delta(seq))
        count += 1
    return count


class RekeyJournal:
    def __init__(self, data_dir: Path, vault_id: bytes) -> None:
        self.data_dir, self.vault_id = data_dir, vault_id
        self.staging = data_dir / STAGING
        self.path = data_dir / JOURNAL

    def begin(self) -> Path:
        """An empty `rekey.staging/`, whatever an earlier rekey left there."""
        if self.path.exists():
            raise IntegrityError(f"{self.path}: a committed rekey is not finished; restart "
                                 "the daemon to finish it")
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(mode=0o700)
        return self.staging

    def abandon(self) -> None:
        """Drop what was staged: the rekey failed before its commit."""
        if not self.path.exists():
            shutil.rmtree(self.staging, ignore_errors=True)
            drop_rekeyed_key(self.data_dir, self.vault_id)

    def commit(self, epoch: int) -> None:
        """The commit point: the staged files are whole; from here on the
        rekey is finished, now or at the next start."""
        staged = [name for name in NAMES if (self.staging / name).exists()]
        if "log" not in staged:
            raise IntegrityError(f"{self.staging}: no log staged; the rekey is not made")
        sync_dir(self.staging)
        sync_dir(self.data_dir)
        doc = {"format": FORMAT, "vault_id": self.vault_id.hex(), "epoch": epoch,
               "staged": staged}
        replace_file(self.path, json.dumps(doc).encode())

    def roll_forward(self) -> None:
        """Put the staged files in place of the current ones, and the new
        key in the keyring's vault entry; idempotent."""
        staged = self._read()
        replaced = self.data_dir / REPLACED
        replaced.mkdir(mode=0o700, exist_ok=True)
        for name in NAMES:
            new, current = self.staging / name, self.data_dir / name
            if name not in staged or not new.exists():
                continue  # not staged, or moved in already
            if current.exists():
                shutil.rmtree(replaced / name, ignore_errors=True)
                current.rename(replaced / name)
            new.rename(current)
            if name == NAMES[0]:
                reached("rekey:moving")
        sync_dir(self.data_dir)
        # A key-file vault's key moved in above; the keyring's is copied.
        promote_rekeyed_key(self.data_dir, self.vault_id)
        reached("rekey:moved")
        shutil.rmtree(replaced)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.path.unlink()
        sync_dir(self.data_dir)
        drop_rekeyed_key(self.data_dir, self.vault_id)

    def recover(self) -> str:
        """At start: finish a committed rekey, drop an uncommitted one.
        Returns what was done ("" for nothing), for the log."""
        if self.path.exists():
            self.roll_forward()
            log.warning("finished a rekey of the local files that was cut short (journal %s)",
                        self.path)
            return "rolled forward"
        if self.staging.exists():
            shutil.rmtree(self.staging)
            sync_dir(self.data_dir)
            drop_rekeyed_key(self.data_dir, self.vault_id)
            log.warning("dropped a rekey of the local files cut short before its commit; "
                        "they stay under the key they had, and the next sync round rekeys")
            return "rolled back"
        return ""

    def _read(self) -> set[str]:
        try:
            doc = json.loads(self.path.read_text())
            staged = set(doc["staged"])
            if (doc["format"] != FORMAT or not staged <= set(NAMES)
                    or doc["vault_id"] != self.vault_id.hex()):
                raise ValueError(f"format {doc['format']!r}, names {sorted(staged)}, "
                                 f"vault {doc['vault_id']!r}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(f"{self.path}: unreadable ({exc}); the rekey it journals "
                                 f"cannot be finished: see docs/format.md") from exc
        return staged
