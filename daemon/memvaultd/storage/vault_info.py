"""`vault.json`: the one plaintext file of a vault, and what it may hold.

    {"format": 1, "vault_id": HEX16, "device_id": HEX8, "model": NAME,
     "dimension": 384, "created_at": SECONDS}

Nothing in it is about the memories: ids that name the vault and this device,
and which model built the vectors (the vault refuses to mix vectors of two
models). The key, the log and the snapshots are found from `vault_id`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from memvault_base.durable import sync_dir
from memvault_base.errors import IntegrityError, InvalidArgument

FORMAT_VERSION = 1
FILE_NAME = "vault.json"


@dataclass(frozen=True)
class VaultInfo:
    vault_id: str
    device_id: str
    model: str
    dimension: int
    created_at: float
    format: int = FORMAT_VERSION

    @property
    def vault_id_bytes(self) -> bytes:
        return bytes.fromhex(self.vault_id)

    @classmethod
    def new(cls, model: str, dimension: int) -> VaultInfo:
        return cls(secrets.token_hex(16), secrets.token_hex(8), model, dimension, time.time())

    @classmethod
    def load(cls, data_dir: Path) -> VaultInfo | None:
        path = data_dir / FILE_NAME
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise IntegrityError(f"{path}: unreadable: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
            found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            raise IntegrityError(f"{path}: format {found!r} is not {FORMAT_VERSION}")
        try:
            info = cls(**doc)
            bytes.fromhex(info.vault_id)
            if len(info.vault_id_bytes) != 16 or not info.device_id or info.dimension <= 0:
                raise ValueError("vault_id, device_id or dimension out of range")
        except (TypeError, ValueError) as exc:
            raise IntegrityError(f"{path}: damaged ({exc}); restore it from a backup") from exc
        return info

    def save(self, data_dir: Path) -> None:
        path = data_dir / FILE_NAME
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(asdict(self), fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        sync_dir(data_dir)

    def check_model(self, model: str) -> None:
        if model != self.model:
            raise InvalidArgument(
                f"this vault's vectors were made by model {self.model!r} ({self.dimension} "
                f"dimensions); the configuration asks for {model!r}. Set model = "
                f"{self.model!r} in config.toml, or start a new vault with another MEMVAULT_HOME"
            )
