"""Device tokens: a token bound to a memvault device, and one device's
signed request to revoke another's token (docs/decisions/0013-key-epochs.md).

A daemon binds its token to its device id and Ed25519 public key when sync
is set up or starts (`BindDevice`; first bind wins, `tokens.py`). When a
device is revoked (`memvault devices revoke`), another device of the vault
asks the server to revoke the token bound to it, signing

    b"memvault revoke-device v1\\0" signer "\\0" target "\\0" issued_at:8 (big-endian ms)

(`memvault_base.device_revocation`) with the key bound to the token it
presents (docs/format.md). So the holder of a stolen bound token, without
its device's private key, cannot revoke anyone. A token no device has bound
yet binds to whatever key its holder brings: the server cannot tell a
vault's devices from others, so an account's tokens should be made when
their devices join, and each is bound at its first sync. `issued_at` must
be within `WINDOW_MS` of the server's clock, and a signature is taken once
in that window (kept in memory: a replay after a
restart finds the target's token already revoked, NOT_FOUND).
"""

from __future__ import annotations

import re
import threading
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from memvault_base.device_revocation import WINDOW_MS, request_bytes
from memvault_base.errors import InvalidArgument, NotFound, PermissionDenied
from memvault_server.access import Caller
from memvault_server.tokens import TokenBook

PUBLIC_KEY_SIZE = 32
_DEVICE = re.compile(r"[0-9a-z]{1,64}")  # a device id as the daemon names it: hex


class Revocations:
    def __init__(self, tokens: TokenBook) -> None:
        self.tokens = tokens
        self._seen: dict[bytes, int] = {}  # signature -> its issued_at, within the window
        self._lock = threading.Lock()

    def bind(self, caller: Caller, device: str, public_key: bytes) -> None:
        if not _DEVICE.fullmatch(device):
            raise InvalidArgument(f"device_id must match {_DEVICE.pattern}")
        if len(public_key) != PUBLIC_KEY_SIZE:
            raise InvalidArgument(f"public_key: {PUBLIC_KEY_SIZE} bytes, not {len(public_key)}")
        self.tokens.bind_device(caller.token_name, device, public_key)

    def revoke(self, caller: Caller, target: str, issued_at: int, signature: bytes,
               now_ms: int | None = None) -> str:
        """Revoke the token bound to `target`; returns its name."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        signer = self.tokens.entry_named(caller.token_name)
        if signer is None or not signer.device:
            raise PermissionDenied(f"token {caller.token_name!r} is bound to no device: only a "
                                   "device's own token may revoke another device")
        if signer.device == target:
            raise PermissionDenied("a device does not revoke itself")
        if abs(now_ms - issued_at) > WINDOW_MS:
            raise PermissionDenied("the request's time is over 5 minutes from the server's "
                                   "clock: check this device's clock")
        try:
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(signer.device_key)).verify(
                signature, request_bytes(signer.device, target, issued_at))
        except (InvalidSignature, ValueError):
            raise PermissionDenied("the revocation is not signed by the key bound to the "
                                   "presenting token") from None
        with self._lock:
            self._seen = {s: at for s, at in self._seen.items() if abs(now_ms - at) <= WINDOW_MS}
            if signature in self._seen:
                raise PermissionDenied("this revocation request was already taken (a replay)")
            self._seen[signature] = issued_at
        bound = self.tokens.bound_to(caller.account, target)
        if bound is None:
            raise NotFound(f"no token of this account is bound to device {target}")
        self.tokens.revoke(bound.name)
        return bound.name
