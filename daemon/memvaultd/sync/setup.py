"""Setting sync up: `init` on the first device, `join` on every other one.

init: the vault's key is wrapped under a new recovery key and stored on the
remote (`keys/recovery`), with a sealed description of the vault (model,
dimension); every memory this device holds is logged as a put, so the first
push carries them; that push is made before `init` returns. The recovery
key is returned once and kept nowhere.

join: the recovery key names the vault and unwraps its key from the remote;
the device starts from the remote's newest snapshot, puts every memory it
held into the joined vault (nothing is lost), and pulls the versions after
the snapshot. A wrong recovery key fails before anything is written.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from memvault_base.errors import InvalidArgument
from memvaultd.storage.snapshot_body import decode_state
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.sync import recovery
from memvaultd.sync.envelope import DESCRIPTION, Envelope
from memvaultd.sync.high_water import Mark, MarkFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.worker import SyncWorker, latest_snapshot

if TYPE_CHECKING:
    from memvaultd.vault.vault import Vault

DESCRIPTION_OBJECT = "keys/description"

log = logging.getLogger(__name__)


class AlreadyConfigured(InvalidArgument):
    """Sync is already set up for this vault."""


def init_sync(vault: Vault, url: str, token: str | None) -> tuple[str, str]:
    """Create the vault on an empty remote; returns (vault id, recovery key)."""
    _refuse_twice(vault)
    vault_id = vault.info.vault_id_bytes
    remote = open_remote(url, token=token, vault_id=vault.info.vault_id)
    try:
        if remote.head() or remote.list_objects("keys/"):
            raise InvalidArgument(f"remote: {url} already holds this vault; use join")
        text, secret = recovery.new_recovery_key(vault_id)
        key = vault.vault_key
        envelope = Envelope(key, vault_id)
        description = json.dumps({"model": vault.info.model,
                                  "dimension": vault.info.dimension}).encode()
        remote.put_object(DESCRIPTION_OBJECT, envelope.seal(DESCRIPTION, description))
        if not remote.put_object(recovery.OBJECT, recovery.wrap(key, secret, vault_id)):
            raise InvalidArgument(f"remote: {url} already has a recovery key for this vault")
    except BaseException:
        remote.close()
        raise
    vault.prune_floor = 0  # nothing is pushed yet: keep every log record
    before = vault.genesis()
    marks = MarkFile(vault.data_dir, key, vault_id)
    mark = Mark(url, token, pushed_seq=before)
    marks.save(mark)
    worker = _start(vault, remote, marks, mark, envelope)
    # Push before answering, so that a `join` started as soon as `init`
    # returns finds this device's memories on the remote. Left to the worker
    # thread, the first push lands ~0.1 s later (its batch window), or later
    # still on a loaded machine, and such a join would start without them.
    # Sync is set up either way: a push that fails here is retried by the
    # worker and shows in `memvault sync status`.
    try:
        worker.sync_once()
    except Exception as exc:
        log.warning("first push failed (%s); the sync worker retries it", exc)
    return vault.info.vault_id, text


def join_sync(vault: Vault, url: str, token: str | None, recovery_key: str) -> str:
    """Join the vault the recovery key names; returns its id."""
    _refuse_twice(vault)
    vault_id, secret = recovery.parse_recovery_key(recovery_key)
    remote = open_remote(url, token=token, vault_id=vault_id.hex())
    try:
        key = recovery.unwrap(remote.get_object(recovery.OBJECT), secret, vault_id)
        envelope = Envelope(key, vault_id)
        description = json.loads(envelope.open(
            DESCRIPTION, remote.get_object(DESCRIPTION_OBJECT), name=DESCRIPTION_OBJECT))
        if description["model"] != vault.info.model:
            raise InvalidArgument(f"remote: the vault there uses model {description['model']!r};"
                                  f" this daemon uses {vault.info.model!r}")
        snapshot = latest_snapshot(remote, envelope)
    except BaseException:
        remote.close()
        raise
    base = decode_state(snapshot[2]) if snapshot else None
    info = VaultInfo(vault_id.hex(), vault.info.device_id, vault.info.model,
                     vault.info.dimension, vault.info.created_at)
    vault.prune_floor = 0  # nothing is pushed yet: keep every log record
    before = vault.adopt(info, key, base)
    marks = MarkFile(vault.data_dir, key, vault_id)
    mark = Mark(url, token, pushed_seq=before)
    if snapshot is not None:
        mark = mark.advanced(snapshot[0], snapshot[1])
    marks.save(mark)
    worker = _start(vault, remote, marks, mark, envelope)
    worker.sync_once()
    return info.vault_id


def keep_unpushed(vault: Vault) -> Mark | None:
    """At start, before the vault loads: this device's sync state, if sync
    was set up, and the log kept from its `pushed_seq` on. Set only once
    sync resumed, after the load, a write in between could start a snapshot
    that, with no floor, dropped the records the remote lacks; sync would
    then stop at "seq N is missing"."""
    mark = MarkFile(vault.data_dir, vault.vault_key, vault.info.vault_id_bytes).load()
    if mark is not None:
        vault.prune_floor = mark.pushed_seq
    return mark


def resume_sync(vault: Vault, mark: Mark | None) -> SyncWorker | None:
    """At start, once the vault is loaded: pick up sync where this device
    left it (`mark`, from `keep_unpushed`), if it was set up."""
    if mark is None:
        return None
    key = vault.vault_key
    marks = MarkFile(vault.data_dir, key, vault.info.vault_id_bytes)
    remote = open_remote(mark.remote, token=mark.token, vault_id=vault.info.vault_id)
    return _start(vault, remote, marks, mark, Envelope(key, vault.info.vault_id_bytes))


def _start(vault: Vault, remote: Remote, marks: MarkFile, mark: Mark,
           envelope: Envelope) -> SyncWorker:
    worker = SyncWorker(vault, remote, marks, mark, envelope)
    vault.prune_floor = mark.pushed_seq
    vault.sync = worker
    worker.start()
    return worker


def _refuse_twice(vault: Vault) -> None:
    if vault.sync is not None:
        raise AlreadyConfigured(f"sync is already set up (remote {vault.sync.status.remote})")
