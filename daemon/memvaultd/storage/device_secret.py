"""Get or create this device's secret (`crypto/device_keys.py`), kept as the
vault key is (`storage/keys.py`):

- the vault key in the OS keyring: a keyring entry beside it, service
  ``memvault``, username ``device-<vault id hex>-<device id>``, value the
  secret in base64;
- the vault key in ``vault.key``: the file ``device-<vault id hex>-<device
  id>.key``, a key file (`storage/keyfile.py`, 92 bytes) sealed with the
  vault key file's passphrase key (its `KeyWrapping`: no second prompt, no
  second Argon2id run), with ``vault_id:16 | device id (ASCII)`` in place
  of the vault id in its associated data.

The secret belongs to one device of one vault: a copied data directory
(a new device id) and a `join` (a new vault id) each find none and make
their own. A vault made before devices had keys gets its secret at its
next start, the same way.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

from memvault_base.durable import replace_file
from memvault_base.errors import IntegrityError, Locked
from memvaultd.crypto.device_keys import DeviceKeys
from memvaultd.storage.keys import (
    KEYRING_SERVICE,
    UnlockedKey,
    keyring_error,
    keyring_key,
    usable_keyring,
)

__all__ = ["device_key_file", "device_keys", "keyring_username"]

log = logging.getLogger("memvaultd.keys")


def keyring_username(vault_id: bytes, device_id: str) -> str:
    return f"device-{vault_id.hex()}-{device_id}"


def device_key_file(data_dir: Path, vault_id: bytes, device_id: str) -> Path:
    return data_dir / f"device-{vault_id.hex()}-{device_id}.key"


def device_keys(data_dir: Path, vault_id: bytes, device_id: str, unlocked: UnlockedKey
                ) -> DeviceKeys:
    """This device's keys in vault `vault_id`, created (and stored as
    `unlocked`, the vault key, is) if it has none yet."""
    if unlocked.storage == "keyfile":
        return _from_key_file(data_dir, vault_id, device_id, unlocked)
    return _from_keyring(vault_id, device_id)


def _from_key_file(data_dir: Path, vault_id: bytes, device_id: str, unlocked: UnlockedKey
                   ) -> DeviceKeys:
    if unlocked.wrapping is None:  # every key-file UnlockedKey is made with one
        raise Locked("the key file's passphrase is not at hand: restart the daemon")
    path = device_key_file(data_dir, vault_id, device_id)
    bound = vault_id + device_id.encode("ascii")
    if path.exists():
        try:
            return DeviceKeys(unlocked.wrapping.unwrap(path.read_bytes(), bound))
        except Locked:
            raise IntegrityError(f"{path}: does not open with this vault's passphrase "
                                 "(damaged, or of another vault or device)") from None
    keys = DeviceKeys.new()
    replace_file(path, unlocked.wrapping.wrap(keys.secret, bound))
    log.info("created this device's keys in %s", path)
    return keys


def _from_keyring(vault_id: bytes, device_id: str) -> DeviceKeys:
    backend = usable_keyring()
    if backend is None:
        raise Locked("the OS keyring that holds this vault's key is not usable now: start "
                     "and unlock it")
    user = keyring_username(vault_id, device_id)
    try:
        encoded = backend.get_password(KEYRING_SERVICE, user)
        if encoded is None:
            keys = DeviceKeys.new()
            encoded = base64.b64encode(keys.secret).decode("ascii")
            backend.set_password(KEYRING_SERVICE, user, encoded)
            # Read back, as for the vault key: a backend that drops writes
            # would give this device new keys at every start.
            if backend.get_password(KEYRING_SERVICE, user) != encoded:
                raise keyring_error()("the keyring did not return the device key just stored")
            log.info("created this device's keys in the OS keyring (user %s)", user)
            return keys
    except keyring_error() as err:
        raise Locked(f"the OS keyring refused this device's key: {err}") from None
    return DeviceKeys(keyring_key(encoded, f"the OS keyring entry {user}"))
