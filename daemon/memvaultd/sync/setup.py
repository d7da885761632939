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

from memvault_base.errors import InvalidArgument
from memvaultd.storage.snapshot_body import decode_body
from memvaultd.storage.vault_info import VaultInfo
from memvaultd.sync import recovery
from memvaultd.sync.envelope import DESCRIPTION, Envelope
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import open_remote
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.vault_side import SyncedVault
from memvaultd.sync.worker import SyncStatus, SyncWorker, latest_snapshot

DESCRIPTION_OBJECT = "keys/description"

log = logging.getLogger(__name__)


class AlreadyConfigured(InvalidArgument):
    """Sync is already set up for this vault."""


class Syncing:
    """Sync for one vault: set up by `init` or `join`, resumed at start,
    stopped at stop. Holds the worker once there is one; the vault hears of
    it only through `on_local_commit` and `keep_log_from`."""

    def __init__(self, vault: SyncedVault) -> None:
        self.vault = vault
        self.worker: SyncWorker | None = None
        self._resumable: HighWater | None = None

    @property
    def status(self) -> SyncStatus | None:
        """The worker's status; None while sync is not set up."""
        return None if self.worker is None else self.worker.status

    def sync_now(self) -> None:
        """One round now, if sync is set up; its failure is raised."""
        if self.worker is not None:
            self.worker.sync_once()

    def stop(self) -> None:
        if self.worker is not None:
            self.vault.on_local_commit(None)
            self.worker.stop()

    def init(self, url: str, token: str | None, allow_cleartext_token: bool = False
             ) -> tuple[str, str]:
        """Create the vault on an empty remote; returns (vault id, recovery key)."""
        self._refuse_twice()
        vault = self.vault
        vault_id = vault.info.vault_id_bytes
        remote = open_remote(url, token=token, vault_id=vault.info.vault_id,
                             device=vault.info.device_id, setting_up=True,
                             allow_cleartext_token=allow_cleartext_token)
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
                raise InvalidArgument(f"remote: {url} already has a recovery key for this "
                                      "vault")
        except BaseException:
            remote.close()
            raise
        vault.keep_log_from(0)  # nothing is pushed yet: keep every log record
        before = vault.genesis()
        water_file = HighWaterFile(vault.data_dir, key, vault_id)
        high_water = HighWater(url, token, pushed_seq=before)
        water_file.save(high_water)
        worker = self._start(remote, water_file, high_water, envelope)
        # Push before answering, so that a `join` started as soon as `init`
        # returns finds this device's memories on the remote. Left to the
        # worker thread, the first push lands ~0.1 s later (its batch window),
        # or later still on a loaded machine, and such a join would start
        # without them. Sync is set up either way: a push that fails here is
        # retried by the worker and shows in `memvault sync status`.
        try:
            worker.sync_once()
        except Exception as exc:
            log.warning("first push failed (%s); the sync worker retries it", exc)
        return vault.info.vault_id, text

    def join(self, url: str, token: str | None, recovery_key: str,
             allow_cleartext_token: bool = False) -> str:
        """Join the vault the recovery key names; returns its id."""
        self._refuse_twice()
        vault = self.vault
        vault_id, secret = recovery.parse_recovery_key(recovery_key)
        remote = open_remote(url, token=token, vault_id=vault_id.hex(),
                             device=vault.info.device_id, setting_up=True,
                             allow_cleartext_token=allow_cleartext_token)
        try:
            key = recovery.unwrap(remote.get_object(recovery.OBJECT), secret, vault_id)
            envelope = Envelope(key, vault_id)
            description = json.loads(envelope.open(
                DESCRIPTION, remote.get_object(DESCRIPTION_OBJECT), name=DESCRIPTION_OBJECT))
            if description["model"] != vault.info.model:
                raise InvalidArgument(f"remote: the vault there uses model "
                                      f"{description['model']!r}; this daemon uses "
                                      f"{vault.info.model!r}")
            snapshot = latest_snapshot(remote, envelope)
        except BaseException:
            remote.close()
            raise
        base = decode_body(snapshot[2]) if snapshot else None
        info = VaultInfo(vault_id.hex(), vault.info.device_id, vault.info.model,
                         vault.info.dimension, vault.info.created_at)
        vault.keep_log_from(0)  # nothing is pushed yet: keep every log record
        before = vault.adopt(info, key, base)
        water_file = HighWaterFile(vault.data_dir, key, vault_id)
        high_water = HighWater(url, token, pushed_seq=before)
        if snapshot is not None:
            high_water = high_water.advanced(snapshot[0], snapshot[1])
        water_file.save(high_water)
        worker = self._start(remote, water_file, high_water, envelope)
        worker.sync_once()
        return info.vault_id

    def keep_unpushed(self) -> HighWater | None:
        """At start, before the vault loads: this device's sync state, if
        sync was set up, and the log kept from its `pushed_seq` on. Set only
        once sync resumed, after the load, a write in between could start a
        snapshot that, with no floor, dropped the records the remote lacks;
        sync would then stop at "seq N is missing"."""
        vault = self.vault
        high_water = HighWaterFile(vault.data_dir, vault.vault_key,
                                   vault.info.vault_id_bytes).load()
        if high_water is not None:
            vault.keep_log_from(high_water.pushed_seq)
        self._resumable = high_water
        return high_water

    def resume(self) -> bool:
        """At start, once the vault is loaded: pick up sync where this device
        left it (what `keep_unpushed` read), if it was set up."""
        high_water = self._resumable
        if high_water is None:
            return False
        vault = self.vault
        key, vault_id = vault.vault_key, vault.info.vault_id_bytes
        remote = open_remote(high_water.remote, token=high_water.token,
                             vault_id=vault.info.vault_id, device=vault.info.device_id)
        self._start(remote, HighWaterFile(vault.data_dir, key, vault_id), high_water,
                    Envelope(key, vault_id))
        return True

    def _start(self, remote: Remote, water_file: HighWaterFile, high_water: HighWater,
               envelope: Envelope) -> SyncWorker:
        worker = SyncWorker(self.vault, remote, water_file, high_water, envelope)
        self.vault.keep_log_from(high_water.pushed_seq)
        self.vault.on_local_commit(worker.poke)
        self.worker = worker
        worker.start()
        return worker

    def _refuse_twice(self) -> None:
        if self.worker is not None:
            raise AlreadyConfigured(f"sync is already set up (remote "
                                    f"{self.worker.status.remote})")
