"""Setting sync up: `init` on the first device, `join` on every other one.

init: the vault's key is wrapped under a new recovery key and stored on the
remote (`keys/recovery`), with a sealed description of the vault (model,
dimension); every memory this device holds is logged as a put, so the first
push carries them; that push is made before `init` returns. The recovery
key is returned once and kept nowhere.

join: the recovery key names the vault and unwraps its key from the remote;
the device starts from the remote's newest snapshot, puts every memory it
held into the joined vault (nothing is lost), and pulls the versions after
the snapshot. A wrong recovery key fails before anything is written. If
the vault was moved to a fresh chain by a repair (`moves.py`), the device
joins the newest chain.

repair: once the user confirmed, moves a stopped vault to a fresh chain on
the same remote (`SyncWorker.repair`); the other devices follow.

witness: a second remote where this device records what it has seen and
reads what the others have (`witness.py`), kept in `sync.state`.

verify: this device's fingerprint of the chain, compared with another
device's when given (`views.py`); `status` names the devices silent past
`freeze_bound_hours`.

leave: stops the worker and removes `sync.state` (the commit point); the
vault stays whole and the remote keeps what it holds. move: `init` on
another, empty remote, with `sync.state` replaced in one rename (the commit
point); the old remote hears nothing, and other devices leave and join
(docs/decisions/0009-sync-leave-and-move.md). A setup cut short is finished
by asking again (`pending_setup.py`).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from memvault_base.errors import InvalidArgument, Locked, MemvaultError, Unavailable
from memvaultd.storage.crash_points import reached
from memvaultd.storage.snapshot_body import decode_published
from memvaultd.sync import epochs, moves, recovery, views
from memvaultd.sync.devices import DeviceRecord, Registry, read_records
from memvaultd.sync.envelope import DESCRIPTION, Envelope
from memvaultd.sync.fingerprint import FingerprintKey
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.pending_rotation import PendingRotationFile
from memvaultd.sync.pending_setup import PendingSetupFile
from memvaultd.sync.remotes import open_remote, redact
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.snapshots import latest_snapshot
from memvaultd.sync.status import SyncStatus
from memvaultd.sync.vault_keys import DESCRIPTION_OBJECT, place, reaching
from memvaultd.sync.vault_side import SyncedVault
from memvaultd.sync.witness import Witness
from memvaultd.sync.worker import SyncWorker

__all__ = ["DESCRIPTION_OBJECT", "AlreadyConfigured", "Syncing"]

log = logging.getLogger(__name__)


class AlreadyConfigured(InvalidArgument):
    """Sync is already set up for this vault."""


@dataclass(frozen=True)
class Rotation:
    """What `rotate_keys` did: the new recovery key (shown once), the epoch
    started, the device revoked ("" for none), and whether its token on a
    memvault-server was revoked, in words ("" on a remote of another kind)."""

    recovery_key: str
    epoch: int
    revoked_device: str
    token_revoked: bool
    token_note: str
    # The key of a rotation cut short before its answer, shown now; no
    # epoch was started by this call (`unshown_recovery_key`).
    recovered: bool = False


class Syncing:
    """Sync for one vault: set up by `init` or `join`, resumed at start,
    stopped at stop. Holds the worker once there is one; the vault hears of
    it only through `on_local_commit` and `keep_log_from`."""

    def __init__(self, vault: SyncedVault, *, marks_every_s: float = 6 * 3600,
                 freeze_bound_s: float = 72 * 3600) -> None:
        self.vault = vault
        self.marks_every_s = marks_every_s  # `access_marks_every_hours`
        self.freeze_bound_s = freeze_bound_s  # `freeze_bound_hours`
        self.worker: SyncWorker | None = None
        self._resumable: HighWater | None = None
        # init, join, move, leave and repair one at a time: each replaces
        # the worker, and two at once would leave one running unowned.
        self._setting_up = threading.Lock()

    @property
    def status(self) -> SyncStatus | None:
        """The worker's status; None while sync is not set up."""
        worker = self.worker
        if worker is None:
            return None
        # Asked of the log now: a snapshot may have dropped the records the
        # remote lacks while the worker is stopped or waiting.
        worker.status.repush = not self.vault.holds_log_after(worker.high_water.pushed_seq)
        info = self.vault.info
        earlier = {device for device, _ in info.earlier_devices}
        worker.status.silent = views.silent_devices(
            worker.high_water.seen, lambda device: device == info.device_id or device in earlier,
            time.time(), self.freeze_bound_s)
        worker.status.freeze_bound_s = self.freeze_bound_s
        return worker.status

    def add_witness(self, url: str, token: str | None, allow_cleartext_token: bool = False
                    ) -> None:
        """Record this device's views on the remote at `url` too, and check
        the other devices' there at every round; then one round at once."""
        with self._setting_up:
            worker = self._synced("witness")
            if redact(url) == worker.status.remote:
                raise InvalidArgument("sync witness: the witness must be another remote than "
                                      f"the one this vault syncs to ({redact(url)})")
            with reaching(url):
                remote = self._open(url, token, self.vault.info.vault_id,
                                    allow_cleartext_token=allow_cleartext_token)
                witness = Witness(remote, worker.envelope, self.vault.info.device_id)
                try:
                    witness.others()  # reachable, and ours to write: before it is kept
                except BaseException:
                    remote.close()
                    raise
            worker.attach_witness(witness, url, token)
        self.sync_now()

    def verify(self, other: str | None) -> views.Verdict:
        """This device's fingerprint of the chain; compared with `other`
        (another device's, as printed there) when given."""
        worker = self._synced("verify")
        key = FingerprintKey(worker.envelope.key(0), self.vault.info.vault_id_bytes)
        with reaching(worker.status.remote):
            return views.verify(worker, key, other, self.sync_now)

    def devices(self) -> tuple[list[DeviceRecord], dict[str, float], str]:
        """The registered devices, this device's last view of each (the wall
        time of its newest operation pulled), and this device's id."""
        worker, info = self.worker, self.vault.info
        if worker is None:  # a vault on its own: this device alone
            keys = self.vault.device_keys()
            return [DeviceRecord(info.device_id, socket.gethostname() or "device",
                                 keys.sign_public, keys.receive_public, 0.0, 0.0)], {}, \
                info.device_id
        with reaching(worker.status.remote):
            records = worker.registry.records()
        return sorted(records.values(), key=lambda r: (r.added, r.device)), dict(
            worker.high_water.seen), self.vault.info.device_id

    def rename_device(self, old: str, new: str) -> DeviceRecord:
        worker = self._synced("devices rename")
        with reaching(worker.status.remote):
            return worker.registry.rename(old, new)

    def revoked_devices(self) -> set[str]:
        """The ids of the devices revoked (`rotate_keys`), as this device knows."""
        worker = self.worker
        return set(worker.high_water.revoked) if worker is not None else set()

    def rotate_keys(self, revoke: str) -> Rotation:
        """Start a new key epoch (docs/decisions/0013-key-epochs.md), given
        to every registered device but the one named `revoke` (none when
        empty), then have a memvault-server revoke that device's token. A
        token left unrevoked is said in the result and undoes nothing."""
        worker = self._synced("devices revoke" if revoke else "recovery-key rotate")
        unshown = None if revoke else self.unshown_recovery_key()
        if unshown is not None:
            return Rotation(*unshown, "", False, "", recovered=True)
        pending = self._pending_rotation()
        with reaching(worker.status.remote):
            revoked = worker.registry.find(revoke).device if revoke else ""
            text = worker.rotate(frozenset({revoked}) if revoked else frozenset(), pending.save)
        token_revoked, token_note = worker.revoke_token(revoked) if revoked else (False, "")
        pending.remove()  # shown once the answer is, as `init`'s key
        return Rotation(text, worker.envelope.epoch, revoked, token_revoked, token_note)

    def unshown_recovery_key(self) -> tuple[str, int] | None:
        """The recovery key of a rotation cut short after its grant, before
        its answer (`pending_rotation.py`), with its epoch: returned once,
        then forgotten. Only if it opens an epoch at least as new as this
        device's: one whose grant never landed, or that a later rotation
        replaced, is dropped. A remote that cannot be reached: asked again
        at the next call."""
        worker = self.worker
        if worker is None or not self._pending_rotation().path.exists():
            return None  # at every status: no wait on a round in progress
        # Under the worker's lock: a move of the local files to a new key
        # stages this file, and would bring back one removed meanwhile.
        with worker.between_rounds():
            return self._take_unshown(worker)

    def _take_unshown(self, worker: SyncWorker) -> tuple[str, int] | None:
        pending = self._pending_rotation()
        text = pending.load()
        if text is None:
            return None
        try:
            vault_id, secret = recovery.parse_recovery_key(text)
            epoch = epochs.from_recovery(worker.base, vault_id, secret).number
        except Unavailable as exc:
            log.warning("the recovery key of a rotation cut short is kept: the remote is "
                        "unreachable (%s)", exc)
            return None
        except MemvaultError:
            epoch = -1
        if epoch < worker.envelope.epoch:
            log.warning("dropped the recovery key of a rotation cut short: its epoch %s",
                        "was replaced since" if epoch >= 0 else "never started")
            pending.remove()
            return None
        pending.remove()
        return text, epoch

    def sync_now(self) -> None:
        """One round now, if sync is set up; its failure is raised."""
        worker = self.worker
        if worker is not None:
            with reaching(worker.status.remote):
                worker.sync_once()

    def repair(self, confirmed: bool) -> None:
        """Move a stopped vault to a fresh chain on its remote, keeping every
        memory; the user must have confirmed (`--yes` or the prompt)."""
        if not confirmed:
            raise InvalidArgument("sync repair: needs the user's confirmation (confirm=true; "
                                  "`memvault sync repair --yes`)")
        with self._setting_up:
            if self.worker is None:
                raise InvalidArgument("sync is not set up: there is nothing to repair")
            with reaching(self.worker.status.remote):
                self.worker.repair()
            try:  # as `init`: the first push before answering, else the worker's
                self.worker.sync_once(publish=False)
            except Exception as exc:
                log.warning("first push on the new chain failed (%s); the sync worker "
                            "retries it", exc)

    def stop(self) -> None:
        if self.worker is not None:
            self.vault.on_local_commit(None)
            self.worker.stop()

    def init(self, url: str, token: str | None, allow_cleartext_token: bool = False
             ) -> tuple[str, str]:
        """Create the vault on an empty remote; returns (vault id, recovery key)."""
        with self._setting_up:
            self._refuse_twice()
            remote, envelope, text = self._create(url, token, allow_cleartext_token)
            self._begin(url, token, remote, envelope)
            return self.vault.info.vault_id, text

    def move(self, url: str, token: str | None, allow_cleartext_token: bool = False
             ) -> tuple[str, str]:
        """Sync to another, empty remote from now on: the vault starts a
        fresh chain there, carrying every memory; the old remote keeps what
        it holds and hears nothing (docs/decisions/0009-sync-leave-and-move.md).
        Returns (vault id, the new remote's recovery key)."""
        with self._setting_up:
            worker = self._synced("move")
            if redact(url) == worker.status.remote:
                raise InvalidArgument(f"sync move: this vault already syncs to {redact(url)}")
            remote, envelope, text = self._create(url, token, allow_cleartext_token)
            self._retire(worker)
            reached("move:stopped")
            # Replacing `sync.state` in one rename is the move's commit
            # point: before it the vault syncs to the old remote, after it
            # to the new one.
            self._begin(url, token, remote, envelope)
            return self.vault.info.vault_id, text

    def leave(self) -> tuple[str, int]:
        """Stop syncing: the vault stays whole here, key and every memory;
        the remote keeps what it holds. Returns (the remote left, how many
        of this device's operations it never received)."""
        with self._setting_up:
            worker = self._synced("leave")
            self._retire(worker)
            reached("leave:stopped")
            unpushed = self.vault.local_ops_after(worker.high_water.pushed_seq)
            pending = len(unpushed[0]) if unpushed else worker.status.pending
            # Removing `sync.state` is the leave's commit point: with it the
            # next start resumes sync, without it the vault is on its own.
            self._water_file().remove()
            self.vault.keep_log_from(None)
            reached("leave:done")
            return worker.status.remote, pending

    def _retire(self, worker: SyncWorker) -> None:
        self.vault.on_local_commit(None)
        worker.stop(wait_round=True)
        self.worker = None

    def _create(self, url: str, token: str | None, allow_cleartext_token: bool
                ) -> tuple[Remote, Envelope, str]:
        """The vault placed on the empty remote at `url` (`vault_keys.place`);
        returns the remote, the envelope and the recovery key's text."""
        vault = self.vault
        with reaching(url):
            remote = self._open(url, token, vault.info.vault_id, setting_up=True,
                                allow_cleartext_token=allow_cleartext_token)
            try:
                envelope, text = place(remote, url, vault)
            except BaseException:
                remote.close()
                raise
        return remote, envelope, text

    def _begin(self, url: str, token: str | None, remote: Remote, envelope: Envelope) -> None:
        """Sync to `remote`, where `_create` put the vault, from its first version."""
        vault = self.vault
        vault.keep_log_from(0)  # nothing is pushed yet: keep every log record
        before = vault.genesis()
        water_file = self._water_file()
        high_water = HighWater(url, token, pushed_seq=before)
        water_file.save(high_water)
        PendingSetupFile(vault.data_dir, vault.vault_key, vault.info.vault_id_bytes).remove()
        worker = self._start(remote, remote, water_file, high_water, envelope)
        # Push before answering, so that a `join` started as soon as `init`
        # returns finds this device's memories on the remote. Left to the
        # worker thread, the first push lands ~0.1 s later (its batch window),
        # or later still on a loaded machine, and such a join would start
        # without them. Sync is set up either way: a push that fails here is
        # retried by the worker and shows in `memvault sync status`.
        try:
            worker.sync_once(publish=False)
        except Exception as exc:
            log.warning("first push failed (%s); the sync worker retries it", exc)

    def _water_file(self) -> HighWaterFile:
        vault = self.vault
        return HighWaterFile(vault.data_dir, vault.vault_key, vault.info.vault_id_bytes)

    def join(self, url: str, token: str | None, recovery_key: str,
             allow_cleartext_token: bool = False) -> str:
        """Join the vault the recovery key names; returns its id."""
        with self._setting_up, reaching(url):
            self._refuse_twice()
            return self._join(url, token, recovery_key, allow_cleartext_token)

    def _join(self, url: str, token: str | None, recovery_key: str,
              allow_cleartext_token: bool) -> str:
        vault = self.vault
        vault_id, secret = recovery.parse_recovery_key(recovery_key)
        base = remote = self._open(url, token, vault_id.hex(), setting_up=True,
                                   allow_cleartext_token=allow_cleartext_token)
        try:
            held, newest = _epochs_of(base, vault_id, secret)
            key = held[0]
            envelope = Envelope(key, vault_id)
            for number, epoch_key in held.items():
                envelope.add_epoch(number, epoch_key)
            description = json.loads(envelope.open(
                DESCRIPTION, base.get_object(DESCRIPTION_OBJECT), name=DESCRIPTION_OBJECT))
            if description["model"] != vault.info.model:
                raise InvalidArgument(f"remote: the vault there uses model "
                                      f"{description['model']!r}; this daemon uses "
                                      f"{vault.info.model!r}")
            move = moves.newest(base, envelope, vault_id.hex())
            if move is not None:
                remote = self._open(url, token, move.scope)
            snapshot = latest_snapshot(remote, envelope, decode_published)
        except BaseException:
            remote.close()
            if base is not remote:
                base.close()
            raise
        try:
            state = snapshot[2] if snapshot else None
            info = vault.info.joining(vault_id.hex())
            # The joined vault's log starts empty: every record of it is this
            # device's to push. Saved in the join's own step, so a join that
            # is finished at the next start resumes sync from there.
            high_water = HighWater(url, token, pushed_seq=0, revoked=dict(newest.revoked),
                                   members=list(newest.devices),
                                   epochs={str(n): k.hex() for n, k in held.items() if n})
            if move is not None:
                high_water = replace(high_water, chain=move.chain, scope=move.scope)
            if snapshot is not None:
                high_water = high_water.advanced(snapshot[0], snapshot[1]).snapshot_at(
                    snapshot[0])
            vault.keep_log_from(0)  # nothing is pushed yet: keep every log record
            vault.adopt(info, key, state, lambda staging: HighWaterFile(
                staging, key, vault_id).save(high_water))
        except BaseException:
            remote.close()
            if base is not remote:
                base.close()
            raise
        water_file = HighWaterFile(vault.data_dir, key, vault_id)
        worker = self._start(remote, base, water_file, high_water, envelope)
        worker.sync_once(publish=False)
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
        base = self._open(high_water.remote, high_water.token, vault.info.vault_id)
        remote = base if not high_water.scope else self._open(
            high_water.remote, high_water.token, high_water.scope)
        self._start(remote, base, HighWaterFile(vault.data_dir, key, vault_id), high_water,
                    Envelope(high_water.first_key(key), vault_id))
        return True

    def _start(self, remote: Remote, base: Remote, water_file: HighWaterFile,
               high_water: HighWater, envelope: Envelope) -> SyncWorker:
        url, token = high_water.remote, high_water.token

        def open_scope(scope: str) -> Remote:
            return self._open(url, token, scope)

        info = self.vault.info
        registry = Registry(base, envelope, info.device_id, self.vault.device_keys())
        worker = SyncWorker(self.vault, remote, water_file, high_water, envelope,
                            registry=registry, device_name=socket.gethostname() or "device",
                            base=base, open_scope=open_scope,
                            marks_every_s=self.marks_every_s, reseal=self._reseal)
        if high_water.witness:
            witness_url, witness_token = high_water.witness, high_water.witness_token
            worker.witness = Witness.opened_when_used(
                redact(witness_url),
                lambda: self._open(witness_url, witness_token, self.vault.info.vault_id),
                envelope, self.vault.info.device_id)
            worker.status.witness = redact(witness_url)
        self.vault.keep_log_from(high_water.pushed_seq)
        self.vault.on_local_commit(worker.poke)
        self.worker = worker
        worker.start()
        return worker

    def _pending_rotation(self) -> PendingRotationFile:
        vault = self.vault
        return PendingRotationFile(vault.data_dir, vault.vault_key, vault.info.vault_id_bytes)

    def _reseal(self, epoch: int, key: bytes, mark: HighWater) -> HighWaterFile:
        """Seal the local files under key epoch `epoch`'s `key`, `sync.state`
        holding `mark` (`vault/rekey.py`); the state's file from then on."""
        vault = self.vault
        vault_id = vault.info.vault_id_bytes
        pending = PendingSetupFile(vault.data_dir, vault.vault_key, vault_id)
        rotation = self._pending_rotation()

        def stage(staging: Path) -> None:
            HighWaterFile(staging, key, vault_id).save(mark)
            pending.reseal_into(staging, key)
            rotation.reseal_into(staging, key)
        vault.reseal(key, epoch, stage)
        return HighWaterFile(vault.data_dir, key, vault_id)

    def _open(self, url: str, token: str | None, scope: str, *, setting_up: bool = False,
              allow_cleartext_token: bool = False) -> Remote:
        """The remote at `url`, scoped to `scope` (the vault's id, or a moved
        chain's); this device's id names its own temporary files there."""
        return open_remote(url, token=token, vault_id=scope, device=self.vault.info.device_id,
                           setting_up=setting_up, allow_cleartext_token=allow_cleartext_token)

    def _refuse_twice(self) -> None:
        if self.worker is not None:
            raise AlreadyConfigured(f"sync is already set up (remote "
                                    f"{self.worker.status.remote}); `memvault sync leave` "
                                    "stops it, `memvault sync move` changes the remote")

    def _synced(self, what: str) -> SyncWorker:
        if self.worker is None:
            raise InvalidArgument(f"sync {what}: sync is not set up for this vault (nothing "
                                  "was changed); `memvault init` or `memvault join` sets it up")
        return self.worker


def _epochs_of(remote: Remote, vault_id: bytes, secret: bytes
               ) -> tuple[dict[int, bytes], epochs.Epoch]:
    """Every key epoch's key the recovery key's `secret` opens (through the
    newest epoch it opens, `epochs.keys_back`) and that epoch; Locked if a
    later epoch exists: that recovery key was replaced."""
    newest = epochs.from_recovery(remote, vault_id, secret)
    held = epochs.keys_back(remote, vault_id, newest)
    envelope = Envelope(held[0], vault_id)
    for number, key in held.items():
        envelope.add_epoch(number, key)
    records = read_records(remote, envelope)
    committed = epochs.committed(remote, vault_id, newest,
                                 lambda d: records[d].sign if d in records else None)
    if committed > newest.number:
        raise Locked(f"this recovery key was replaced when key epoch {newest.number + 1} "
                     f"started (the vault is at epoch {committed}): join with the newest "
                     "one; nothing was changed")
    return held, newest
