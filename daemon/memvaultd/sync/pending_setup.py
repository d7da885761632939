"""A setup on a remote not yet finished, kept sealed in `data/sync.setup`.

    file := magic "MVSU" | format:u8 | sealed(JSON)
            AAD "memvault/sync-setup" | format:u8 | vault_id:16,
            key = HKDF(vault key, "sync/setup/v1")
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

import json
import logging
from pathlib import Path

from memvault_base.durable import replace_file
from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import open_sealed, seal
from memvaultd.crypto.kdf import derive_key

FILE_NAME = "sync.setup"
MAGIC = b"MVSU"
FORMAT = 1

log = logging.getLogger(__name__)


class PendingSetupFile:
    def __init__(self, data_dir: Path, vault_key: bytes, vault_id: bytes) -> None:
        self.path = data_dir / FILE_NAME
        self.vault_id = vault_id
        self._key = derive_key(vault_key, purpose="sync/setup/v1")
        self._aad = b"memvault/sync-setup" + bytes([FORMAT]) + vault_id

    def recovery_key_for(self, url: str) -> str | None:
        """The recovery key of an unfinished setup on `url`; None if there is
        none (or one of a vault this device left by a `join`)."""
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            if blob[:5] != MAGIC + bytes([FORMAT]):
                raise IntegrityError("not a memvault pending setup")
            doc = json.loads(open_sealed(self._key, blob[5:], aad=self._aad))
            remote, recovery_key = str(doc["remote"]), str(doc["recovery_key"])
        except (IntegrityError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s ignored: %s", self.path, exc)
            return None
        return recovery_key if remote == url else None

    def save(self, url: str, recovery_key: str) -> None:
        body = json.dumps({"remote": url, "recovery_key": recovery_key}).encode()
        replace_file(self.path, MAGIC + bytes([FORMAT]) + seal(self._key, body, aad=self._aad))

    def reseal_into(self, directory: Path, key: bytes) -> None:
        """This file, if there is one, sealed under `key` in `directory`
        (a rekey, `vault/rekey.py`); one that does not open is left out."""
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            doc = json.loads(open_sealed(self._key, blob[5:], aad=self._aad))
        except (IntegrityError, ValueError) as exc:
            log.warning("%s not resealed: %s", self.path, exc)
            return
        PendingSetupFile(directory, key, self.vault_id).save(doc["remote"], doc["recovery_key"])

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
