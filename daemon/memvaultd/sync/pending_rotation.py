"""A rotation's recovery key not yet shown to the user, kept sealed in
`data/sync.rotation`.

    file := magic "MVRT" | format:u8 | sealed(JSON)
            AAD "memvault/sync-rotation" | format:u8 | vault_id:16,
            key = HKDF(vault key, "sync/rotation/v1")
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

import json
import logging
from pathlib import Path

from memvault_base.durable import replace_file
from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import open_sealed, seal
from memvaultd.crypto.kdf import derive_key

FILE_NAME = "sync.rotation"
MAGIC = b"MVRT"
FORMAT = 1

log = logging.getLogger(__name__)


class PendingRotationFile:
    def __init__(self, data_dir: Path, vault_key: bytes, vault_id: bytes) -> None:
        self.path = data_dir / FILE_NAME
        self.vault_id = vault_id
        self._key = derive_key(vault_key, purpose="sync/rotation/v1")
        self._aad = b"memvault/sync-rotation" + bytes([FORMAT]) + vault_id

    def load(self) -> str | None:
        """The recovery key kept, if any; None too for a file that does not
        open (left in place: a rekey may be moving it)."""
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            if blob[:5] != MAGIC + bytes([FORMAT]):
                raise IntegrityError("not a memvault pending rotation")
            return str(json.loads(open_sealed(self._key, blob[5:], aad=self._aad))
                       ["recovery_key"])
        except (IntegrityError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s not read: %s", self.path, exc)
            return None

    def save(self, recovery_key: str) -> None:
        body = json.dumps({"recovery_key": recovery_key}).encode()
        replace_file(self.path, MAGIC + bytes([FORMAT]) + seal(self._key, body, aad=self._aad))

    def reseal_into(self, directory: Path, key: bytes) -> None:
        """This file, if there is one, sealed under `key` in `directory`
        (a rekey, `vault/rekey.py`)."""
        text = self.load()
        if text is not None:
            PendingRotationFile(directory, key, self.vault_id).save(text)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
