"""Getting and creating the vault key: OS keyring, or a passphrase-wrapped key file."""

from __future__ import annotations

import base64
import contextlib
import getpass
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail, null
from keyring.errors import KeyringError, PasswordSetError

from memvault_base.errors import IntegrityError, InvalidArgument, Locked
from memvaultd.crypto.kdf import Argon2Params
from memvaultd.storage.keys import (
    KEY_FILE_NAME,
    KEYRING_SERVICE,
    create_vault_key,
    keyring_username,
    load_vault_key,
    usable_keyring,
)

from .daemon_process import DaemonProcess

VAULT = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
CHEAP = Argon2Params(time_cost=1, memory_kib=8192, parallelism=1)
PASSPHRASE = "tr0ub4dor&3 staple"


class MemoryKeyring(KeyringBackend):
    """A keyring that keeps secrets in a dict: the keyring code path without D-Bus."""

    priority = 1
    # Every KeyringBackend subclass registers itself with keyring; a viable one
    # would join keyring's own backend discovery for the whole test process.
    viable = False

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # keyring is untyped
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.entries[(service, username)]


class BrokenKeyring(MemoryKeyring):
    """A keyring whose daemon went away."""

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringError("org.freedesktop.DBus.Error.ServiceUnknown")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise PasswordSetError("org.freedesktop.DBus.Error.ServiceUnknown")


class PlaintextKeyring(MemoryKeyring):
    """Stands in for keyrings.alt.file.PlaintextKeyring."""


PlaintextKeyring.__module__ = "keyrings.alt.file"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMVAULT_PASSPHRASE", "MEMVAULT_PASSPHRASE_FILE"):
        monkeypatch.delenv(name, raising=False)


Backend = TypeVar("Backend", bound=KeyringBackend)


def untyped(cls: type[Backend]) -> Backend:
    """An instance of one of keyring's own backends, whose __init__ is unannotated."""
    return cls()


class Installer:
    """Installs a keyring backend for the running test."""

    def __call__(self, backend: Backend) -> Backend:
        keyring.set_keyring(backend)
        return backend


@pytest.fixture
def use_keyring() -> Iterator[Installer]:
    """Install keyring backends for one test, then put the real one back."""
    original = keyring.get_keyring()
    yield Installer()
    keyring.set_keyring(original)


@pytest.fixture
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A headless machine: the fail backend, by environment and in this process."""
    original = keyring.get_keyring()
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    keyring.set_keyring(untyped(fail.Keyring))
    yield
    keyring.set_keyring(original)


@pytest.fixture
def env_passphrase(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)


def tree(directory: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def assert_no_plaintext_key(directory: Path, key: bytes) -> None:
    encoded = base64.b64encode(key)
    for name, content in tree(directory).items():
        assert key not in content and encoded not in content, name


# -- key file ------------------------------------------------------------


@pytest.mark.usefixtures("no_keyring", "env_passphrase")
def test_key_file_round_trip_with_env_passphrase(tmp_path: Path) -> None:
    data = tmp_path / "data"
    created = create_vault_key(data, VAULT, params=CHEAP)
    assert len(created.key) == 32
    assert created.storage == "keyfile"
    assert (
        created.detail == f"key file {data / KEY_FILE_NAME} (passphrase from MEMVAULT_PASSPHRASE)"
    )
    assert stat.S_IMODE((data / KEY_FILE_NAME).stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    loaded = load_vault_key(data, VAULT)
    assert loaded == created
    assert_no_plaintext_key(tmp_path, created.key)
    for text in (created.detail, repr(created)):
        assert PASSPHRASE not in text and created.key.hex() not in text


@pytest.mark.usefixtures("no_keyring")
def test_passphrase_from_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "passphrase"
    secret.write_text(PASSPHRASE + "\nsecond line is ignored\n")
    secret.chmod(0o600)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE_FILE", str(secret))
    created = create_vault_key(tmp_path / "data", VAULT, params=CHEAP, prompt=False)
    assert "MEMVAULT_PASSPHRASE_FILE" in created.detail and str(secret) in created.detail
    # The same passphrase given directly opens it: only the first line counted.
    monkeypatch.delenv("MEMVAULT_PASSPHRASE_FILE")
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    assert load_vault_key(tmp_path / "data", VAULT).key == created.key


@pytest.mark.usefixtures("no_keyring")
def test_env_passphrase_wins_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE_FILE", str(tmp_path / "absent"))
    created = create_vault_key(tmp_path, VAULT, params=CHEAP)
    assert created.detail.endswith("(passphrase from MEMVAULT_PASSPHRASE)")


@pytest.mark.usefixtures("no_keyring")
def test_missing_passphrase_file_is_locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE_FILE", str(tmp_path / "absent"))
    with pytest.raises(Locked, match="cannot read the passphrase file"):
        create_vault_key(tmp_path / "data", VAULT, params=CHEAP)
    assert not (tmp_path / "data").exists()


@pytest.mark.usefixtures("no_keyring", "env_passphrase")
def test_wrong_passphrase_is_locked_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_vault_key(tmp_path, VAULT, params=CHEAP)
    before = tree(tmp_path)
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "not it")
    with pytest.raises(Locked, match="wrong passphrase") as caught:
        load_vault_key(tmp_path, VAULT)
    assert "not it" not in str(caught.value)
    assert str(tmp_path / KEY_FILE_NAME) in str(caught.value)
    assert tree(tmp_path) == before


@pytest.mark.usefixtures("no_keyring", "env_passphrase")
def test_other_vault_id_is_locked(tmp_path: Path) -> None:
    create_vault_key(tmp_path, VAULT, params=CHEAP)
    with pytest.raises(Locked):
        load_vault_key(tmp_path, bytes(16))


@pytest.mark.usefixtures("no_keyring", "env_passphrase")
def test_damaged_key_file_is_integrity_error(tmp_path: Path) -> None:
    create_vault_key(tmp_path, VAULT, params=CHEAP)
    path = tmp_path / KEY_FILE_NAME
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(IntegrityError, match=KEY_FILE_NAME):
        load_vault_key(tmp_path, VAULT)


@pytest.mark.usefixtures("no_keyring")
def test_empty_passphrase_is_locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_PASSPHRASE", "")
    with pytest.raises(Locked, match="empty"):
        create_vault_key(tmp_path / "data", VAULT, params=CHEAP)
    assert not (tmp_path / "data").exists()


@pytest.mark.usefixtures("no_keyring")
@pytest.mark.parametrize("prompt", [True, False])
def test_no_passphrase_source_names_the_env_vars(tmp_path: Path, prompt: bool) -> None:
    # Under pytest stdin is not a terminal, so even prompt=True cannot ask.
    with pytest.raises(Locked, match=r"MEMVAULT_PASSPHRASE.*MEMVAULT_PASSPHRASE_FILE"):
        create_vault_key(tmp_path, VAULT, params=CHEAP, prompt=prompt)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_keyring")
def test_terminal_prompt_asks_twice_on_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter([PASSPHRASE, PASSPHRASE, PASSPHRASE])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(answers))
    created = create_vault_key(tmp_path, VAULT, params=CHEAP)
    assert created.detail.endswith("(passphrase from terminal prompt)")
    assert load_vault_key(tmp_path, VAULT).key == created.key  # the third answer
    with pytest.raises(StopIteration):
        next(answers)


@pytest.mark.usefixtures("no_keyring")
def test_terminal_prompt_mismatch_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter([PASSPHRASE, PASSPHRASE + "x"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(answers))
    with pytest.raises(Locked, match="differ"):
        create_vault_key(tmp_path, VAULT, params=CHEAP)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_keyring", "env_passphrase")
def test_create_refuses_to_replace_a_key(tmp_path: Path) -> None:
    create_vault_key(tmp_path, VAULT, params=CHEAP)
    before = tree(tmp_path)
    with pytest.raises(InvalidArgument, match="already has a key"):
        create_vault_key(tmp_path, VAULT, params=CHEAP)
    assert tree(tmp_path) == before


@pytest.mark.usefixtures("no_keyring")
def test_forcing_keyring_without_one_is_locked(tmp_path: Path) -> None:
    with pytest.raises(Locked, match="no usable OS keyring"):
        create_vault_key(tmp_path, VAULT, storage="keyring")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("no_keyring")
def test_load_without_key_file_or_keyring_is_locked(tmp_path: Path) -> None:
    with pytest.raises(Locked, match=VAULT.hex()):
        load_vault_key(tmp_path, VAULT)


def test_unknown_storage_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        create_vault_key(tmp_path, VAULT, storage="plaintext")


# -- keyring, in process -------------------------------------------------


def test_keyring_round_trip(tmp_path: Path, use_keyring: Installer) -> None:
    backend = use_keyring(MemoryKeyring())
    created = create_vault_key(tmp_path, VAULT)
    assert created.storage == "keyring"
    assert created.detail == "OS keyring (test_keys)"
    stored = backend.entries[(KEYRING_SERVICE, keyring_username(VAULT))]
    assert base64.b64decode(stored) == created.key
    assert keyring_username(VAULT) == "vault-" + VAULT.hex()
    assert load_vault_key(tmp_path, VAULT) == created
    assert list(tmp_path.iterdir()) == []  # nothing on disk at all


def test_forcing_key_file_ignores_the_keyring(
    tmp_path: Path,
    use_keyring: Installer,
    env_passphrase: None,
) -> None:
    backend = use_keyring(MemoryKeyring())
    created = create_vault_key(tmp_path, VAULT, storage="keyfile", params=CHEAP)
    assert created.storage == "keyfile" and backend.entries == {}
    assert load_vault_key(tmp_path, VAULT).key == created.key


def test_missing_keyring_entry_is_locked(tmp_path: Path, use_keyring: Installer) -> None:
    use_keyring(MemoryKeyring())
    with pytest.raises(Locked, match=VAULT.hex()):
        load_vault_key(tmp_path, VAULT)


def test_unreachable_keyring_is_locked(tmp_path: Path, use_keyring: Installer) -> None:
    use_keyring(BrokenKeyring())
    with pytest.raises(Locked, match=f"could not be read for vault {VAULT.hex()}"):
        load_vault_key(tmp_path, VAULT)
    with pytest.raises(Locked, match="refused"):
        create_vault_key(tmp_path, VAULT, storage="keyring")


def test_auto_falls_back_to_key_file_when_keyring_refuses(
    tmp_path: Path,
    use_keyring: Installer,
    env_passphrase: None,
) -> None:
    use_keyring(BrokenKeyring())
    created = create_vault_key(tmp_path, VAULT, params=CHEAP)
    assert created.storage == "keyfile"


def test_damaged_keyring_entry_is_integrity_error(tmp_path: Path, use_keyring: Installer) -> None:
    backend = use_keyring(MemoryKeyring())
    backend.entries[(KEYRING_SERVICE, keyring_username(VAULT))] = "bm90IGEga2V5"
    with pytest.raises(IntegrityError):
        load_vault_key(tmp_path, VAULT)


def test_keyring_create_refuses_to_replace(tmp_path: Path, use_keyring: Installer) -> None:
    use_keyring(MemoryKeyring())
    first = create_vault_key(tmp_path, VAULT)
    with pytest.raises(InvalidArgument):
        create_vault_key(tmp_path, VAULT)
    assert load_vault_key(tmp_path, VAULT).key == first.key


@pytest.mark.parametrize(
    "backend",
    [untyped(fail.Keyring), untyped(null.Keyring), PlaintextKeyring()],
    ids=["fail", "null", "keyrings.alt"],
)
def test_untrustworthy_backends_are_not_usable(
    use_keyring: Installer, backend: KeyringBackend
) -> None:
    use_keyring(backend)
    assert usable_keyring() is None


def test_chainer_is_usable_only_if_every_backend_is(
    use_keyring: Installer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = untyped(chainer.ChainerBackend)
    use_keyring(chain)
    for backends, usable in (
        ([], False),
        ([MemoryKeyring()], True),
        ([MemoryKeyring(), PlaintextKeyring()], False),
    ):
        monkeypatch.setattr(chainer.ChainerBackend, "backends", backends)
        assert (usable_keyring() is not None) is usable


def test_keyring_never_falls_to_plaintext(
    tmp_path: Path, use_keyring: Installer, env_passphrase: None
) -> None:
    backend = use_keyring(PlaintextKeyring())
    created = create_vault_key(tmp_path, VAULT, params=CHEAP)
    assert created.storage == "keyfile" and backend.entries == {}
    with pytest.raises(Locked):
        create_vault_key(tmp_path / "other", VAULT, storage="keyring")


# -- keyring, the real Secret Service ------------------------------------


def _secret_service() -> KeyringBackend | None:
    from keyring.backends import SecretService

    backend = keyring.get_keyring()
    return backend if isinstance(backend, SecretService.Keyring) else None


def test_real_secret_service_round_trip(tmp_path: Path) -> None:
    backend = _secret_service()
    if backend is None:
        reason = f"no Secret Service keyring here (found {keyring.get_keyring()!r})"
        if os.environ.get("MEMVAULT_REQUIRE_KEYRING") == "1":
            pytest.fail(f"MEMVAULT_REQUIRE_KEYRING=1 but {reason}")
        pytest.skip(reason)
    vault_id = os.urandom(16)
    try:
        created = create_vault_key(tmp_path, vault_id, storage="keyring", prompt=False)
        assert created.detail == "OS keyring (SecretService)"
        assert load_vault_key(tmp_path, vault_id, prompt=False) == created
        assert list(tmp_path.iterdir()) == []
    finally:
        with contextlib.suppress(KeyringError):
            backend.delete_password(KEYRING_SERVICE, keyring_username(vault_id))


def test_a_key_file_vaults_daemon_never_imports_keyring(tmp_path: Path) -> None:
    """keyring and what it brings (85 modules) load only where the OS
    keyring is consulted: not in a daemon whose vault is in a key file."""
    home = tmp_path / "home"
    with DaemonProcess(home).start() as proc:  # creates the vault: tries the keyring
        assert proc.stop() == 0
    assert (home / "data" / KEY_FILE_NAME).exists()
    started_at = len(proc.log)
    with DaemonProcess(home, PYTHONPROFILEIMPORTTIME="1").start() as proc:
        assert proc.stop() == 0
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.log[started_at:].splitlines()
                if line.startswith("import time:")]
    assert "memvaultd.storage.keys" in imported, "the start's imports must be in the log"
    assert not [name for name in imported if name.split(".")[0] == "keyring"]
