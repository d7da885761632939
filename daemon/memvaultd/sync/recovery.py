"""The recovery key: what a new device needs, besides the remote, to join.

    recovery key := "mvr1-" + base32(vault_id:16 | secret:32), in groups of 8

It names the vault (so `join` knows which vault on the remote to open) and
carries 256 random bits. The remote holds the vault key wrapped under it in
the key-file format of `keyfile.py` (Argon2id, then AES-256-GCM with the
vault id in the associated data), as object `keys/recovery`; 256 random bits
need no stretching, but one format for every wrapped key keeps one parser.
That parser refuses Argon2 parameters over its ceilings (256 MiB, t=12, 16
lanes) before running the KDF, so a remote cannot make a joining device
spend more than that on a key file it planted.
"""

from __future__ import annotations

import base64
import secrets

from memvault_base.errors import IntegrityError, InvalidArgument, Locked
from memvaultd.storage.keyfile import unwrap_key, wrap_key

PREFIX = "mvr1-"
OBJECT = "keys/recovery"


def new_recovery_key(vault_id: bytes) -> tuple[str, bytes]:
    secret = secrets.token_bytes(32)
    text = base64.b32encode(vault_id + secret).decode().rstrip("=").lower()
    return PREFIX + "-".join(text[i : i + 8] for i in range(0, len(text), 8)), secret


def parse_recovery_key(text: str) -> tuple[bytes, bytes]:
    """(vault_id, secret) from a recovery key as the user typed it."""
    compact = "".join(text.split()).lower()
    if not compact.startswith(PREFIX):
        raise InvalidArgument("recovery_key: a recovery key starts with 'mvr1-'")
    body = compact[len(PREFIX) :].replace("-", "").upper()
    try:
        raw = base64.b32decode(body + "=" * (-len(body) % 8))
    except ValueError as exc:
        raise InvalidArgument(f"recovery_key: not a recovery key ({exc})") from exc
    if len(raw) != 48:
        raise InvalidArgument("recovery_key: wrong length; check for a missing group")
    return raw[:16], raw[16:]


def wrap(vault_key: bytes, secret: bytes, vault_id: bytes) -> bytes:
    return wrap_key(vault_key, secret.hex(), vault_id=vault_id)


def unwrap(blob: bytes, secret: bytes, vault_id: bytes) -> bytes:
    try:
        return unwrap_key(blob, secret.hex(), vault_id=vault_id)
    except IntegrityError as exc:
        raise IntegrityError(f"remote object {OBJECT}: {exc}; nothing was changed") from None
    except Locked as exc:
        raise Locked("wrong recovery key for this vault (or its key file on the remote "
                     "is damaged); nothing was changed") from exc
