"""A setup on a remote not yet finished, kept sealed in `data/sync.setup`.

    file := a `sealed_doc.SealedDoc` named "setup", magic "MVSU"
    JSON := {"remote": URL, "recovery_key": TEXT}

`init` and `sync move` write it before they put anything on the remote, and
remove it once `sync.state` names that remote. The remote takes the
vault's key once (`keys/recovery` is put-if-absent and no device deletes),
so a setup cut short (a crash, a remote gone between two puts) would leave
that remote holding the key under a recovery key nobody was shown, and
every later setup there refused. Asked again to set up on the same remote,
`vault_keys.place` finds here the recovery key the remote's copy opens
with, and finishes the setup with it.

The recovery key only unwraps the vault key, and this file is sealed under
the vault key: whoever can open it holds what the key would give already.
"""

from __future__ import annotations

import logging
from pathlib import Path

from memvault_base.errors import IntegrityError
from memvaultd.sync.sealed_doc import SealedDoc

FILE_NAME = "sync.setup"
MAGIC = b"MVSU"

log = logging.getLogger(__name__)


class PendingSetupFile:
    def __init__(self, data_dir: Path, vault_key: bytes, vault_id: bytes) -> None:
        self._doc = SealedDoc(data_dir / FILE_NAME, vault_key, vault_id, name="setup",
                              magic=MAGIC)
        self.path, self.vault_id = self._doc.path, vault_id

    def recovery_key_for(self, url: str) -> str | None:
        """The recovery key of an unfinished setup on `url`; None if there is
        none (or one of a vault this device left by a `join`)."""
        try:
            doc = self._doc.read()
            if doc is None:
                return None
            remote, recovery_key = str(doc["remote"]), str(doc["recovery_key"])
        except (IntegrityError, KeyError) as exc:
            log.warning("%s ignored: %s", self.path, exc)
            return None
        return recovery_key if remote == url else None

    def save(self, url: str, recovery_key: str) -> None:
        self._doc.write({"remote": url, "recovery_key": recovery_key})

    def reseal_into(self, directory: Path, key: bytes) -> None:
        """This file, if there is one, sealed under `key` in `directory`
        (a rekey, `vault/rekey.py`); one that does not open is left out."""
        try:
            doc = self._doc.read()
        except IntegrityError as exc:
            log.warning("%s not resealed: %s", self.path, exc)
            return
        if doc is not None:
            self._doc.moved(directory, key).write(doc)

    def remove(self) -> None:
        self._doc.remove()
