"""`vault.json`: the one plaintext file of a vault, and what it may hold.

    {"format": 1, "vault_id": HEX16, "device_id": HEX8, "model": NAME,
     "dimension": 384, "created_at": SECONDS,
     "copy": HEX16, "earlier_devices": [[HEX8, SEQ], ...]}

Nothing in it is about the memories: ids that name the vault and this device,
and which model built the vectors (the vault refuses to mix vectors of two
models). The key, the log and the snapshots are found from `vault_id`.

A device is one copy of the data directory. `copy` marks the copy that
holds `device_id` (`copy_mark`: a hash of the directory's inode and the
machine's id); a directory copied elsewhere, or a machine cloned with a new
machine id, finds another mark at start and becomes a new device
(`as_copy`): two copies under one id would draw equal clock stamps, which
merge by arrival order and leave the copies apart for good. The ids it held
before stay in `earlier_devices`, each with the last log seq written under
it: those records are still this device's to push. `copy` and
`earlier_devices` may be absent (a vault from before they were kept: its
first start records the mark and keeps its id).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from memvault_base.durable import replace_file
from memvault_base.errors import IntegrityError, InvalidArgument

FORMAT_VERSION = 1
FILE_NAME = "vault.json"
# systemd's, then D-Bus's older place for it; absent (macOS, some
# containers), the inode alone marks the copy.
_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


def copy_mark(data_dir: Path) -> str:
    """What tells this copy of the data directory from any other: a hash of
    its inode and the machine's id (machine-id(5) asks that the id itself
    not be written where others may read it). A copy (cp, rsync, a restored
    backup) has another inode; a cloned machine, another machine id once it
    is given one, as cloning tools and first boots do."""
    machine = b""
    for path in _MACHINE_ID_FILES:
        try:
            machine = path.read_bytes().strip()
            break
        except OSError:
            continue
    inode = str(data_dir.stat().st_ino).encode()
    return hashlib.sha256(b"memvault/copy\0" + machine + b"\0" + inode).hexdigest()[:32]


@dataclass(frozen=True)
class VaultInfo:
    vault_id: str
    device_id: str
    model: str
    dimension: int
    created_at: float
    format: int = FORMAT_VERSION
    copy: str = ""
    earlier_devices: tuple[tuple[str, int], ...] = ()

    @property
    def vault_id_bytes(self) -> bytes:
        return bytes.fromhex(self.vault_id)

    @classmethod
    def new(cls, model: str, dimension: int, copy: str = "") -> VaultInfo:
        return cls(secrets.token_hex(16), secrets.token_hex(8), model, dimension, time.time(),
                   copy=copy)

    def joining(self, vault_id: str) -> VaultInfo:
        """This device in the vault `vault_id` (`join`): its log starts anew,
        holding only records of `device_id`."""
        return replace(self, vault_id=vault_id, earlier_devices=())

    def as_copy(self, mark: str, last_seq: int) -> VaultInfo:
        """This vault in the copy marked `mark`: a new device, unless the
        copy it was in is not known (then only the mark is recorded).
        `last_seq`: the log's last record, the last of the old id's here."""
        if not self.copy:
            return replace(self, copy=mark)
        return replace(self, device_id=secrets.token_hex(8), copy=mark,
                       earlier_devices=(*self.earlier_devices, (self.device_id, last_seq)))

    def wrote(self, device: str, seq: int) -> bool:
        """Whether the log record at `seq`, stamped by `device`, is this
        device's own (written here, under its id now or an earlier one)."""
        return device == self.device_id or any(
            device == earlier and seq <= upto for earlier, upto in self.earlier_devices)

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
            doc["earlier_devices"] = tuple((str(device), int(upto))
                                           for device, upto in doc.get("earlier_devices", ()))
            info = cls(**doc)
            bytes.fromhex(info.vault_id)
            if len(info.vault_id_bytes) != 16 or not info.device_id or info.dimension <= 0:
                raise ValueError("vault_id, device_id or dimension out of range")
        except (TypeError, ValueError) as exc:
            raise IntegrityError(f"{path}: damaged ({exc}); restore it from a backup") from exc
        return info

    def save(self, data_dir: Path) -> None:
        replace_file(data_dir / FILE_NAME, json.dumps(asdict(self), indent=2).encode())

    def check_model(self, model: str) -> None:
        if model != self.model:
            raise InvalidArgument(
                f"this vault's vectors were made by model {self.model!r} ({self.dimension} "
                f"dimensions); the configuration asks for {model!r}. Set model = "
                f"{self.model!r} in config.toml, or start a new vault with another MEMVAULT_HOME"
            )
