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

from pathlib import Path
from typing import Any

from memvault_base.errors import IntegrityError
from memvaultd.storage.keys import drop_rekeyed_key, promote_rekeyed_key
from memvaultd.storage.oplog import OperationLog
from memvaultd.storage.snapshots import SnapshotStore
from memvaultd.storage.staged_swap import StagedSwap

__all__ = ["JOURNAL", "NAMES", "STAGING", "RekeyJournal", "reseal_log", "reseal_snapshots"]

STAGING = "rekey.staging"
JOURNAL = "rekey.journal"
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


class RekeyJournal(StagedSwap):
    kind = "rekey"
    names = NAMES
    required = "log"
    replace_unstaged = False
    rolled_back = ("the local files stay under the key they had, and the next sync round "
                   "rekeys")

    def __init__(self, data_dir: Path, vault_id: bytes) -> None:
        super().__init__(data_dir)
        self.vault_id = vault_id

    def commit(self, epoch: int) -> None:
        """The commit point: the staged files are whole; from here on the
        rekey is finished, now or at the next start."""
        self._commit({"vault_id": self.vault_id.hex(), "epoch": epoch})

    def _moved(self) -> None:
        # A key-file vault's key moved in with the files; the keyring's is copied.
        promote_rekeyed_key(self.data_dir, self.vault_id)

    def _dropped(self) -> None:
        drop_rekeyed_key(self.data_dir, self.vault_id)

    def _check(self, doc: dict[str, Any]) -> str | None:
        return None if doc["vault_id"] == self.vault_id.hex() else f"vault {doc['vault_id']!r}"
