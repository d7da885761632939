"""A rotation's recovery key not yet shown to the user, kept sealed in
`data/sync.rotation`.

    file := a `sealed_doc.SealedDoc` named "rotation", magic "MVRT"
    JSON := {"recovery_key": TEXT}

`recovery-key rotate` and `devices revoke` write it before the new epoch's
grant reaches the remote, and remove it once the answer holding the key is
built. A daemon killed in between (the grant on the remote, every device
moving to the epoch, the key printed nowhere) finds it at the next `memvault
sync status` or `memvault recovery-key rotate`, which show it once
(`Syncing.unshown_recovery_key`), if it opens the newest epoch on the
remote; one whose grant never landed, or that a later rotation replaced, is
dropped.

The recovery key unwraps only keys this file's own key (the vault key this
device keeps, the newest epoch's once the local files moved) already
opens, and a rekey reseals the file with the rest (`vault/rekey.py`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from memvault_base.errors import IntegrityError
from memvaultd.sync.sealed_doc import SealedDoc

FILE_NAME = "sync.rotation"
MAGIC = b"MVRT"

log = logging.getLogger(__name__)


class PendingRotationFile:
    def __init__(self, data_dir: Path, vault_key: bytes, vault_id: bytes) -> None:
        self._doc = SealedDoc(data_dir / FILE_NAME, vault_key, vault_id, name="rotation",
                              magic=MAGIC)
        self.path, self.vault_id = self._doc.path, vault_id

    def load(self) -> str | None:
        """The recovery key kept, if any; None too for a file that does not
        open (left in place: a rekey may be moving it)."""
        try:
            doc = self._doc.read()
            return None if doc is None else str(doc["recovery_key"])
        except (IntegrityError, KeyError) as exc:
            log.warning("%s not read: %s", self.path, exc)
            return None

    def save(self, recovery_key: str) -> None:
        self._doc.write({"recovery_key": recovery_key})

    def reseal_into(self, directory: Path, key: bytes) -> None:
        """This file, if there is one, sealed under `key` in `directory`
        (a rekey, `vault/rekey.py`)."""
        text = self.load()
        if text is not None:
            self._doc.moved(directory, key).write({"recovery_key": text})

    def remove(self) -> None:
        self._doc.remove()
