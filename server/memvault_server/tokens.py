"""Bearer tokens: who may call the server, and for which account.

    DIR/tokens.json (mode 0600):
    {"format": 1,
     "tokens": [{"name": NAME, "account": ACCOUNT, "sha256": HEX64, "created_at": SECONDS,
                 "admin": BOOL, "device": ID, "device_key": HEX64}]}

`admin` (false when absent) lets the token delete objects of its account's
vaults (`access.py`); a device's token is never an admin. `device` and
`device_key` (empty when absent) are the memvault device the token is bound
to and that device's Ed25519 public key (`bind_device`; `devices.py`).

A token is `mvs_` + 43 characters of base64url: 256 random bits. Only its
sha256 is stored. A plain hash is enough, with no salt and no slow KDF: those
defend guessable secrets such as passwords, and a 256-bit random token
cannot be guessed, so its hash cannot be reversed by search either. A
presented token is hashed and compared with every stored hash by
`hmac.compare_digest` (constant time, and no early exit over the list), so
timing tells an attacker nothing about how close a guess was.

The file is written atomically (temporary file, fsync, rename) and re-read
when its modification time changes, so `token create` and `token revoke` take
effect on a running server within one call. Several tokens (one per device,
say) may share an account; an account owns the vaults it created.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from memvault_base.durable import sync_dir
from memvault_base.errors import InvalidArgument, NotFound, PermissionDenied

FILE_NAME = "tokens.json"
PREFIX = "mvs_"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


@dataclass(frozen=True)
class TokenEntry:
    name: str
    account: str
    sha256: str
    created_at: float
    admin: bool = False
    device: str = ""
    device_key: str = ""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenBook:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._lock = threading.Lock()
        self._mtime: int | None = None
        self._entries: list[TokenEntry] = []

    def entries(self) -> list[TokenEntry]:
        with self._lock:
            self._reload()
            return list(self._entries)

    def entry_of(self, token: str) -> TokenEntry | None:
        """The entry of `token`, or None. Constant time per entry."""
        presented = _digest(token).encode()
        found: TokenEntry | None = None
        for entry in self.entries():
            if hmac.compare_digest(presented, entry.sha256.encode()) and found is None:
                found = entry
        return found

    def create(self, name: str, account: str | None = None, admin: bool = False) -> str:
        """A new token named `name` for `account` (default: `name`); returned once."""
        account = account or name
        for value, what in ((name, "token name"), (account, "account")):
            if not _NAME.fullmatch(value):
                raise InvalidArgument(f"{what} {value!r} must match {_NAME.pattern}")
        token = PREFIX + secrets.token_urlsafe(32)
        with self._lock:
            self._reload()
            if any(entry.name == name for entry in self._entries):
                raise InvalidArgument(f"a token named {name!r} exists; revoke it first")
            self._entries.append(TokenEntry(name, account, _digest(token), time.time(), admin))
            self._save()
        return token

    def revoke(self, name: str) -> None:
        with self._lock:
            self._reload()
            kept = [entry for entry in self._entries if entry.name != name]
            if len(kept) == len(self._entries):
                raise NotFound(f"no token named {name!r}")
            self._entries = kept
            self._save()

    def entry_named(self, name: str) -> TokenEntry | None:
        return next((e for e in self.entries() if e.name == name), None)

    def bind_device(self, name: str, device: str, device_key: bytes) -> None:
        """Bind token `name` to `device` and its public key. First bind wins:
        binding again to the same device and key changes nothing; to another
        is `PermissionDenied`, as is a device already bound to another token
        of the account."""
        with self._lock:
            self._reload()
            entry = next((e for e in self._entries if e.name == name), None)
            if entry is None:
                raise NotFound(f"no token named {name!r}")
            if entry.device:
                if (entry.device, entry.device_key) != (device, device_key.hex()):
                    raise PermissionDenied(f"token {name!r} is bound to another device")
                return
            if any(e.account == entry.account and e.device == device for e in self._entries):
                raise PermissionDenied(f"device {device} is bound to another token")
            self._entries = [replace(e, device=device, device_key=device_key.hex())
                             if e.name == name else e for e in self._entries]
            self._save()

    def bound_to(self, account: str, device: str) -> TokenEntry | None:
        """The token of `account` bound to `device`, or None."""
        return next((e for e in self.entries() if e.account == account and e.device == device),
                    None)

    def _reload(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._entries, self._mtime = [], None
            return
        if mtime == self._mtime:
            return
        doc = json.loads(self.path.read_text())
        self._entries = [TokenEntry(**entry) for entry in doc.get("tokens", [])]
        self._mtime = mtime

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(f".{FILE_NAME}.{secrets.token_hex(4)}.tmp")
        doc = {"format": 1, "tokens": [entry.__dict__ for entry in self._entries]}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(doc, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        sync_dir(self.path.parent)
        self._mtime = None  # re-read on next use, picking up the new mtime
