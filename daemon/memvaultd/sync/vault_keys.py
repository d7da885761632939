"""The vault on a remote's first objects: what `init` and `sync move` put
there before any version, and the naming of a remote that cannot be reached.

    keys/recovery     the vault key wrapped under a new recovery key (`recovery.py`)
    keys/description  {"model": NAME, "dimension": D}, sealed (envelope kind DESCRIPTION)

Both are put-if-absent and no device deletes, so a remote takes the vault's
key once. The recovery key is recorded (`pending_setup.py`) before the
remote sees it: a setup cut short there is finished by asking again, with
the same key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from memvault_base.errors import IntegrityError, InvalidArgument, Locked, Unavailable
from memvaultd.sync import recovery
from memvaultd.sync.envelope import DESCRIPTION, Envelope
from memvaultd.sync.pending_setup import PendingSetupFile
from memvaultd.sync.remotes import redact
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.vault_side import SyncedVault

__all__ = ["DESCRIPTION_OBJECT", "place", "reaching"]

DESCRIPTION_OBJECT = "keys/description"


@contextmanager
def reaching(url: str) -> Iterator[None]:
    """A remote that cannot be reached, named as such to whoever asked: the
    daemon answering "unavailable" with only the transport's words read as
    the daemon itself being down (`memvault sync now` said "memvault daemon
    is not running" while the daemon served and `sync status` said offline)."""
    try:
        yield
    except Unavailable as exc:
        raise Unavailable(f"the sync remote {redact(url)} is unreachable: {exc}") from exc


def place(remote: Remote, url: str, vault: SyncedVault) -> tuple[Envelope, str]:
    """Put the vault's key and description on `remote` (at `url`), which
    holds no version of it; returns the envelope and the recovery key's text.
    A remote holding this vault's key already is refused (`InvalidArgument`),
    unless under the recovery key this device recorded for it."""
    vault_id, key = vault.info.vault_id_bytes, vault.vault_key
    envelope = Envelope(key, vault_id)
    text = _claim(remote, url, PendingSetupFile(vault.data_dir, key, vault_id))
    _, secret = recovery.parse_recovery_key(text)
    description = json.dumps({"model": vault.info.model,
                              "dimension": vault.info.dimension}).encode()
    remote.put_object(DESCRIPTION_OBJECT, envelope.seal(DESCRIPTION, description))
    if not remote.put_object(recovery.OBJECT, recovery.wrap(key, secret, vault_id)):
        # There already: this device's own setup cut short (the key opens
        # with the recovery key it recorded), or not.
        try:
            recovery.unwrap(remote.get_object(recovery.OBJECT), secret, vault_id)
        except (IntegrityError, Locked):
            raise InvalidArgument(f"remote: {redact(url)} already has a recovery key for "
                                  "this vault; use join") from None
    return envelope, text


def _claim(remote: Remote, url: str, pending: PendingSetupFile) -> str:
    """The recovery key to place the vault under: the one of this device's
    setup there that was cut short, else a new one, recorded before the
    remote sees it."""
    if remote.head():
        raise InvalidArgument(f"remote: {redact(url)} already holds this vault; use join")
    text = pending.recovery_key_for(url)
    if text is None:
        if remote.list_objects("keys/"):
            raise InvalidArgument(f"remote: {redact(url)} already holds this vault; use join")
        text, _ = recovery.new_recovery_key(pending.vault_id)
        pending.save(url, text)
    return text
