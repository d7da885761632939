"""A small JSON document of sync's, sealed in one file of the data directory.

    file := magic:4 | format:u8 (1) | sealed(JSON)
            AAD "memvault/sync-<name>" | format:u8 | vault_id:16,
            key = HKDF(vault key, "sync/<name>/v1")

`sync.setup` (`pending_setup.py`) and `sync.rotation` (`pending_rotation.py`)
are such files: each holds a recovery key between the moment it exists and
the moment the user has it. A rekey (`vault/rekey.py`) reseals them with
the rest of the local files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memvault_base.durable import replace_file
from memvault_base.errors import IntegrityError
from memvaultd.crypto.aead import open_sealed, seal
from memvaultd.crypto.kdf import derive_key

FORMAT = 1


class SealedDoc:
    def __init__(self, path: Path, vault_key: bytes, vault_id: bytes, *, name: str,
                 magic: bytes) -> None:
        self.path, self.vault_id, self.name, self.magic = path, vault_id, name, magic
        self._key = derive_key(vault_key, purpose=f"sync/{name}/v1")
        self._aad = f"memvault/sync-{name}".encode() + bytes([FORMAT]) + vault_id

    def read(self) -> dict[str, Any] | None:
        """The document; None if there is no file. `IntegrityError` for a
        file that does not open under this key, or holds no JSON object."""
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if blob[:5] != self.magic + bytes([FORMAT]):
            raise IntegrityError(f"{self.path}: not a memvault sync {self.name} file")
        try:
            doc = json.loads(open_sealed(self._key, blob[5:], aad=self._aad))
        except ValueError as exc:
            raise IntegrityError(f"{self.path}: {exc}") from exc
        if not isinstance(doc, dict):
            raise IntegrityError(f"{self.path}: not a JSON object")
        return doc

    def write(self, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        replace_file(self.path, self.magic + bytes([FORMAT]) + seal(self._key, body,
                                                                    aad=self._aad))

    def moved(self, directory: Path, key: bytes) -> SealedDoc:
        """The same document's file in `directory`, sealed under `key`."""
        return SealedDoc(directory / self.path.name, key, self.vault_id, name=self.name,
                         magic=self.magic)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
