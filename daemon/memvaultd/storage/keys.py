"""Get or create the 32-byte vault key.

The key lives in one of two places, and which one a vault uses is known from
the data directory alone:

- ``data_dir/vault.key`` present: a passphrase-wrapped key file (see
  `memvaultd.storage.keyfile`), for machines without a usable OS keyring;
- absent: the OS keyring, service ``memvault``, username
  ``vault-<vault id hex>``, value the key in base64.

The key is never written in plaintext to a file. A keyring backend counts as
usable only if it really keeps secrets: not keyring's "fail" or "null"
backends, and never any `keyrings.alt` backend, whose files are plaintext or
encrypted under a key stored next to them.

Passphrases come, in order, from ``MEMVAULT_PASSPHRASE``, from the first line
of the file named by ``MEMVAULT_PASSPHRASE_FILE`` (refused if its group or
others may read it), or from a terminal prompt; with none of them and no
terminal, `Locked` says how to give one.
The daemon moves ``MEMVAULT_PASSPHRASE`` out of its environment before it
starts any other process (`take_passphrase_from_env`: children never inherit
it, and `/proc/<pid>/environ` no longer shows it) and drops it once the vault
is open (`forget_passphrase`).
A key-file vault's `UnlockedKey` keeps the passphrase's Argon2id key
(`KeyWrapping`), so `join` stores the joined vault's key the way the current
one is stored without asking for the passphrase again (`store_joined_key`),
and a rekey (`storage/rekey_journal.py`) replaces the key the same way
(`store_rekeyed_key`, `promote_rekeyed_key`).

The `keyring` package is imported only when the OS keyring is consulted:
it brings 85 modules (its backends found through the installed packages'
entry points), 50 ms of a start and 4.4 MB of objects that a daemon whose
vault is in a key file never needs. Its error class is reached through
`keyring_error()`, which an `except` clause calls only when an exception
reaches it.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import logging
import os
import secrets
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memvault_base.errors import IntegrityError, InvalidArgument, Locked
from memvault_base.paths import KEY_FILE_NAME
from memvault_base.secrecy import scrub_environment
from memvaultd.crypto.aead import KEY_SIZE
from memvaultd.crypto.kdf import Argon2Params
from memvaultd.storage.keyfile import KeyWrapping, open_key_file, write_key_file

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

__all__ = [
    "ENV_PASSPHRASE",
    "ENV_PASSPHRASE_FILE",
    "KEYRING_SERVICE",
    "KEY_FILE_NAME",
    "UnlockedKey",
    "create_vault_key",
    "drop_rekeyed_key",
    "forget_passphrase",
    "has_vault_key",
    "keyring_error",
    "keyring_key",
    "keyring_username",
    "load_vault_key",
    "promote_rekeyed_key",
    "rekey_username",
    "store_joined_key",
    "store_rekeyed_key",
    "take_passphrase_from_env",
    "usable_keyring",
]

log = logging.getLogger("memvaultd.keys")

KEYRING_SERVICE = "memvault"
ENV_PASSPHRASE = "MEMVAULT_PASSPHRASE"
ENV_PASSPHRASE_FILE = "MEMVAULT_PASSPHRASE_FILE"
STORAGES = ("auto", "keyring", "keyfile")

# MEMVAULT_PASSPHRASE once `take_passphrase_from_env` moved it out of the
# environment; empty again after `forget_passphrase`.
_taken: list[str] = []


def take_passphrase_from_env() -> None:
    """Move MEMVAULT_PASSPHRASE from the environment into this process's
    memory alone: `_passphrase` reads it from here, no child process started
    afterwards inherits it, and the process's initial environment block (what
    `/proc/<pid>/environ` shows) holds zeros in its place."""
    value = os.environ.get(ENV_PASSPHRASE)
    if value is not None:
        _taken[:] = [value]
        scrub_environment(ENV_PASSPHRASE)


def forget_passphrase() -> None:
    """Drop the passphrase `take_passphrase_from_env` kept: the vault is open
    (a key file's Argon2id key stays in `UnlockedKey.wrapping` for `join`)."""
    _taken.clear()


@dataclass(frozen=True)
class UnlockedKey:
    """The vault key and where it came from; `detail` never holds a secret."""

    key: bytes
    storage: str  # "keyring" | "keyfile"
    detail: str  # e.g. "OS keyring (SecretService)"
    # A key file's: how to seal another key under the same passphrase (`join`).
    wrapping: KeyWrapping | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        # The dataclass default would print the key into any log or traceback.
        return f"UnlockedKey(storage={self.storage!r}, detail={self.detail!r})"


def keyring_username(vault_id: bytes) -> str:
    """The keyring username under which the vault's key is stored."""
    return f"vault-{vault_id.hex()}"


def keyring_error() -> type[Exception]:
    """keyring's `KeyringError`, the package imported on first use."""
    from keyring.errors import KeyringError

    return KeyringError


def _usable(backend: KeyringBackend) -> bool:
    from keyring.backends import chainer, fail, null

    if isinstance(backend, fail.Keyring | null.Keyring):
        return False
    if type(backend).__module__.startswith("keyrings.alt"):
        return False
    if isinstance(backend, chainer.ChainerBackend):
        # The chainer writes to the first backend that accepts: every one of
        # them must be trustworthy, and at least one must exist.
        chained: list[KeyringBackend] = list(backend.backends)
        return bool(chained) and all(_usable(b) for b in chained)
    return True


def usable_keyring() -> KeyringBackend | None:
    """The OS keyring backend if it really keeps secrets, else None."""
    import keyring

    backend = keyring.get_keyring()
    return backend if _usable(backend) else None


def _backend_name(backend: KeyringBackend) -> str:
    from keyring.backends import chainer

    if isinstance(backend, chainer.ChainerBackend):
        backend = backend.backends[0]
    return type(backend).__module__.rsplit(".", 1)[-1]  # "SecretService", "macOS", ...


def _read_passphrase_file(path: Path) -> str:
    """The first line of `path`, a file only its owner may read: a passphrase
    that others can read protects nothing, so such a file is refused rather
    than used with a warning nobody of a service reads."""
    try:
        with path.open("rb") as file:
            mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
            if mode & 0o077:
                raise Locked(f"the passphrase file {path} ({ENV_PASSPHRASE_FILE}) is mode "
                             f"{mode:o}: other users may read it; chmod 600 {path}")
            text = file.read().decode("utf-8")
    except OSError as err:
        raise Locked(
            f"cannot read the passphrase file {path} named by {ENV_PASSPHRASE_FILE}: {err.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise Locked(f"the passphrase file {path} ({ENV_PASSPHRASE_FILE}) is not UTF-8 text"
                     ) from None
    lines = text.splitlines()
    return lines[0] if lines else ""


def _prompt(confirm: bool) -> str:
    first = getpass.getpass("memvault passphrase: ")
    if confirm and first and getpass.getpass("repeat the passphrase: ") != first:
        raise Locked("the two passphrases differ: nothing was created")
    return first


def _passphrase(key_file: Path, *, prompt: bool, confirm: bool) -> tuple[str, str]:
    """(passphrase, where it came from)."""
    if _taken:
        value, source = _taken[0], ENV_PASSPHRASE
    elif ENV_PASSPHRASE in os.environ:
        value, source = os.environ[ENV_PASSPHRASE], ENV_PASSPHRASE
    elif ENV_PASSPHRASE_FILE in os.environ:
        path = Path(os.environ[ENV_PASSPHRASE_FILE])
        value, source = _read_passphrase_file(path), f"{ENV_PASSPHRASE_FILE} ({path})"
    elif prompt and sys.stdin.isatty():
        value, source = _prompt(confirm), "terminal prompt"
    else:
        raise Locked(
            f"the key file {key_file} needs a passphrase: set {ENV_PASSPHRASE}, or "
            f"{ENV_PASSPHRASE_FILE} to a file holding it, or run from a terminal"
        )
    if not value:
        raise Locked(f"the passphrase from {source} is empty: the key file needs a non-empty one")
    return value, source


def _create_in_keyring(backend: KeyringBackend, vault_id: bytes, key: bytes) -> UnlockedKey:
    user = keyring_username(vault_id)
    encoded = base64.b64encode(key).decode("ascii")
    backend.set_password(KEYRING_SERVICE, user, encoded)
    # Read back: a backend that accepts and drops writes would lose the vault.
    if backend.get_password(KEYRING_SERVICE, user) != encoded:
        raise keyring_error()("the keyring did not return the key just stored")
    return UnlockedKey(key, "keyring", f"OS keyring ({_backend_name(backend)})")


def _create_in_key_file(
    data_dir: Path, vault_id: bytes, key: bytes, *, prompt: bool, params: Argon2Params
) -> UnlockedKey:
    path = data_dir / KEY_FILE_NAME
    passphrase, source = _passphrase(path, prompt=prompt, confirm=True)
    wrapping = KeyWrapping.new(passphrase, params)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_key_file(path, wrapping.wrap(key, vault_id))
    return UnlockedKey(key, "keyfile", f"key file {path} (passphrase from {source})", wrapping)


def _refuse_existing(data_dir: Path, vault_id: bytes, backend: KeyringBackend | None) -> None:
    # Replacing an existing key would make everything sealed under it unreadable.
    where = None
    if (data_dir / KEY_FILE_NAME).exists():
        where = f"key file {data_dir / KEY_FILE_NAME}"
    elif backend is not None:
        try:
            if backend.get_password(KEYRING_SERVICE, keyring_username(vault_id)) is not None:
                where = "OS keyring"
        except keyring_error():
            pass  # unreachable now; the write below reports it
    if where is not None:
        raise InvalidArgument(
            f"vault {vault_id.hex()} already has a key in the {where}: load it, do not create one"
        )


def create_vault_key(
    data_dir: Path,
    vault_id: bytes,
    *,
    storage: str = "auto",
    prompt: bool = True,
    params: Argon2Params | None = None,
    key: bytes | None = None,
) -> UnlockedKey:
    """Create a new random vault key (or store `key`, a vault's key obtained
    with its recovery key) in the keyring or a key file."""
    if storage not in STORAGES:
        raise InvalidArgument(f"key storage must be one of {', '.join(STORAGES)}, not {storage!r}")
    backend = usable_keyring()
    _refuse_existing(data_dir, vault_id, backend)
    key = key or secrets.token_bytes(KEY_SIZE)
    if len(key) != KEY_SIZE:
        raise InvalidArgument(f"a vault key has {KEY_SIZE} bytes, not {len(key)}")
    if storage == "keyring" and backend is None:
        import keyring

        raise Locked(
            "no usable OS keyring (found "
            f"{keyring.get_keyring()!r}): start and unlock a Secret Service "
            "(e.g. gnome-keyring) or use the passphrase-protected key file instead"
        )
    if backend is not None and storage != "keyfile":
        try:
            return _create_in_keyring(backend, vault_id, key)
        except keyring_error() as err:
            if storage == "keyring":
                raise Locked(f"the OS keyring refused the vault key: {err}") from None
            log.warning("OS keyring unusable (%s); using a passphrase-protected key file", err)
    return _create_in_key_file(
        data_dir, vault_id, key, prompt=prompt, params=params or Argon2Params()
    )


def _load_from_key_file(path: Path, vault_id: bytes, *, prompt: bool) -> UnlockedKey:
    passphrase, source = _passphrase(path, prompt=prompt, confirm=False)
    blob = path.read_bytes()
    try:
        key, wrapping = open_key_file(blob, passphrase, vault_id=vault_id)
    except Locked:
        raise Locked(
            f"wrong passphrase (from {source}) for the key file {path}, or the key file is damaged"
        ) from None
    except IntegrityError as err:
        raise IntegrityError(f"{path}: {err}") from None
    return UnlockedKey(key, "keyfile", f"key file {path} (passphrase from {source})", wrapping)


def _load_from_keyring(data_dir: Path, vault_id: bytes) -> UnlockedKey:
    vault = vault_id.hex()
    backend = usable_keyring()
    if backend is None:
        raise Locked(
            f"vault {vault} keeps its key in the OS keyring, but none is usable here "
            f"(and there is no {data_dir / KEY_FILE_NAME}): start and unlock the keyring"
        )
    try:
        encoded = backend.get_password(KEYRING_SERVICE, keyring_username(vault_id))
    except keyring_error() as err:
        raise Locked(f"the OS keyring could not be read for vault {vault}: {err}") from None
    if encoded is None:
        raise Locked(
            f"no key for vault {vault} in the OS keyring (service {KEYRING_SERVICE!r}, "
            f"user {keyring_username(vault_id)!r}) and no key file in {data_dir}"
        )
    key = keyring_key(encoded, f"the OS keyring entry for vault {vault}")
    return UnlockedKey(key, "keyring", f"OS keyring ({_backend_name(backend)})")


def keyring_key(encoded: str, entry: str) -> bytes:
    """The 32-byte key a keyring entry holds in base64; IntegrityError
    naming `entry` if it holds anything else."""
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_SIZE:
        raise IntegrityError(f"{entry} is not a {KEY_SIZE}-byte key")
    return key


def load_vault_key(data_dir: Path, vault_id: bytes, *, prompt: bool = True) -> UnlockedKey:
    """The vault's existing key, from its key file if present, else from the OS keyring."""
    path = data_dir / KEY_FILE_NAME
    if path.exists():
        return _load_from_key_file(path, vault_id, prompt=prompt)
    return _load_from_keyring(data_dir, vault_id)


def has_vault_key(data_dir: Path, vault_id: bytes) -> bool:
    """Whether the vault's key is stored: its key file, or its keyring entry."""
    if (data_dir / KEY_FILE_NAME).exists():
        return True
    backend = usable_keyring()
    if backend is None:
        return False
    try:
        return backend.get_password(KEYRING_SERVICE, keyring_username(vault_id)) is not None
    except keyring_error():
        return False


def _stage_key_file(staging: Path, vault_id: bytes, key: bytes, current: UnlockedKey
                    ) -> UnlockedKey | None:
    """`key` sealed in `staging/vault.key` with `current`'s passphrase key
    (no prompt, no Argon2 run) when `current` is a key file's; None when it
    is the keyring's."""
    if len(key) != KEY_SIZE:
        raise InvalidArgument(f"a vault key has {KEY_SIZE} bytes, not {len(key)}")
    if current.storage != "keyfile":
        return None
    if current.wrapping is None:  # every key-file UnlockedKey is made with one
        raise Locked("the key file's passphrase is not at hand: restart the daemon")
    write_key_file(staging / KEY_FILE_NAME, current.wrapping.wrap(key, vault_id))
    return UnlockedKey(key, "keyfile", current.detail, current.wrapping)


def store_joined_key(staging: Path, vault_id: bytes, key: bytes, current: UnlockedKey
                     ) -> UnlockedKey:
    """Store `key`, of the vault `join` is about to switch to, the way
    `current` is stored, before anything of the current vault moves:

    - keyring: a new entry beside the current one (kept: it is the only copy
      of the current vault's key until the join is complete). An entry the
      joined vault already has (a join cut short earlier) is used if it holds
      this very key, and refused if it holds another;
    - key file: `staging/vault.key`, sealed with `current`'s passphrase
      (its `KeyWrapping`: no prompt, no Argon2 run); moved into place with
      the rest of the join (`storage/join_journal.py`).
    """
    staged = _stage_key_file(staging, vault_id, key, current)
    if staged is not None:
        return staged
    backend = usable_keyring()
    if backend is None:
        raise Locked("the OS keyring that holds this vault's key is not usable now: start "
                     "and unlock it, then join again")
    user = keyring_username(vault_id)
    try:
        held = backend.get_password(KEYRING_SERVICE, user)
        if held is None:
            return _create_in_keyring(backend, vault_id, key)
    except keyring_error() as err:
        raise Locked(f"the OS keyring refused the joined vault's key: {err}") from None
    if held != base64.b64encode(key).decode("ascii"):
        raise InvalidArgument(
            f"the OS keyring already holds another key for vault {vault_id.hex()} "
            f"(service {KEYRING_SERVICE!r}, user {user!r}): it is not this vault's key; "
            "remove that entry and join again")
    return UnlockedKey(key, "keyring", f"OS keyring ({_backend_name(backend)})")


def rekey_username(vault_id: bytes) -> str:
    """The keyring username of the key a rekey is moving the vault to."""
    return f"rekey-{vault_id.hex()}"


def store_rekeyed_key(staging: Path, vault_id: bytes, key: bytes, current: UnlockedKey
                      ) -> UnlockedKey:
    """Store `key`, the one a rekey moves this vault's local files to, the
    way `current` is stored, without touching `current` (until the rekey's
    commit it seals everything here):

    - keyring: the entry ``rekey-<vault id hex>`` (any one a rekey cut
      short left is replaced); `promote_rekeyed_key` copies it over the
      vault's entry once the files have moved;
    - key file: `staging/vault.key`, sealed with `current`'s passphrase
      key (no prompt, no Argon2 run), moved into place with the rest.
    """
    staged = _stage_key_file(staging, vault_id, key, current)
    if staged is not None:
        return staged
    backend = _rekey_keyring()
    encoded = base64.b64encode(key).decode("ascii")
    try:
        backend.set_password(KEYRING_SERVICE, rekey_username(vault_id), encoded)
        if backend.get_password(KEYRING_SERVICE, rekey_username(vault_id)) != encoded:
            raise keyring_error()("the keyring did not return the key just stored")
    except keyring_error() as err:
        raise Locked(f"the OS keyring refused the vault's next key: {err}") from None
    return UnlockedKey(key, "keyring", current.detail)


def promote_rekeyed_key(data_dir: Path, vault_id: bytes) -> None:
    """Make the key `store_rekeyed_key` kept in the keyring the vault's own
    (a key-file vault's moved in with its files: nothing to do). Idempotent:
    a rekey finished at the next start does it again."""
    if (data_dir / KEY_FILE_NAME).exists():
        return
    backend = _rekey_keyring()
    try:
        encoded = backend.get_password(KEYRING_SERVICE, rekey_username(vault_id))
        if encoded is None:
            raise Locked(f"the OS keyring lost vault {vault_id.hex()}'s next key (entry "
                         f"{rekey_username(vault_id)!r}) before the rekey was finished")
        keyring_key(encoded, f"the OS keyring entry {rekey_username(vault_id)!r}")
        user = keyring_username(vault_id)
        backend.set_password(KEYRING_SERVICE, user, encoded)
        if backend.get_password(KEYRING_SERVICE, user) != encoded:
            raise keyring_error()("the keyring did not return the key just stored")
    except keyring_error() as err:
        raise Locked(f"the OS keyring refused the vault's new key: {err}; restart the "
                     "daemon once it is unlocked") from None


def drop_rekeyed_key(data_dir: Path, vault_id: bytes) -> None:
    """Delete the keyring's ``rekey-<vault id>`` entry, if there is one: a
    rekey finished (the vault's entry holds the key) or dropped."""
    if (data_dir / KEY_FILE_NAME).exists():
        return
    backend = usable_keyring()
    if backend is None:
        return
    try:
        if backend.get_password(KEYRING_SERVICE, rekey_username(vault_id)) is not None:
            backend.delete_password(KEYRING_SERVICE, rekey_username(vault_id))
    except keyring_error() as err:
        log.warning("the keyring entry %s was not deleted (%s)", rekey_username(vault_id), err)


def _rekey_keyring() -> KeyringBackend:
    backend = usable_keyring()
    if backend is None:
        raise Locked("the OS keyring that holds this vault's key is not usable now: start "
                     "and unlock it, then restart the daemon")
    return backend
