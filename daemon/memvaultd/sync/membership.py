"""This device's membership of the vault, as the worker keeps it: its
record in the registry (`devices.py`), its server token bound to it, the
key epochs (`epochs.py`) it has been given, and its local files moved to
the newest of them (`reseal_if_behind`).

A revoked device counts for its versions up to its revocation's head
(`ChainMark.signer_of`), the same on every device.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from memvault_base.errors import MemvaultError
from memvaultd.storage.crash_points import reached
from memvaultd.sync import epochs, recovery
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.mark import ChainMark
from memvaultd.sync.remotes.base import DeviceTokens, Remote

log = logging.getLogger("memvaultd.sync")

# Seals this device's local files under key epoch N's key (`vault/rekey.py`),
# with `sync.state` as given; the file that reads it from then on.
Reseal = Callable[[int, bytes, HighWater], HighWaterFile]


class Membership:
    """`base` is the vault's own scope, where the registry and the epochs live."""

    def __init__(self, mark: ChainMark, base: Remote, device_name: str,
                 reseal: Reseal | None = None) -> None:
        self.mark, self.base, self.device_name = mark, base, device_name
        self.reseal = reseal
        self.registry, self.envelope = mark.registry, mark.envelope
        # This device's record is published in the first round that reaches
        # the remote, before anything it pushes.
        self.registered = False
        for number, key in mark.high_water.epochs.items():
            self.envelope.add_epoch(int(number), bytes.fromhex(key))
        self.registry.admits = lambda record: epochs.admits(
            self.envelope.epoch, {*self.mark.high_water.members, *self.mark.high_water.revoked},
            record.device, record.epoch)

    def register(self) -> None:
        """Publish this device's record and bind its token, once per worker."""
        if not self.registered:
            self.registry.register(self.device_name)
            self._bind_token()
            self.registered = True

    def epoch(self) -> epochs.Epoch:
        number = self.envelope.epoch
        return epochs.Epoch(number, self.envelope.key(number),
                            revoked=tuple(sorted(self.mark.high_water.revoked.items())))

    def catch_up(self) -> None:
        """Move to the newest key epoch given to this device, if newer."""
        current = self.epoch()
        newest = epochs.catch_up(self.base, self.envelope.vault_id, current,
                                 self.registry.keys, self.registry.device, self.registry.key_of)
        if newest.number != current.number:
            self._hold(newest)

    def _hold(self, newest: epochs.Epoch) -> None:
        held = epochs.keys_back(self.base, self.envelope.vault_id, newest)
        for number, key in held.items():
            if number:
                self.envelope.add_epoch(number, key)
        log.info("sync: moved to key epoch %d", newest.number)
        mark = self.mark
        mark.save(replace(mark.high_water, revoked=dict(newest.revoked),
                          members=list(newest.devices),
                          epochs={str(n): k.hex() for n, k in held.items()}))

    def reseal_if_behind(self) -> None:
        """Move this device's local files to the newest key epoch it holds,
        if they are sealed under an older one (`HighWater.local_epoch`):
        after a rotation, a catch-up or a join of a rotated vault. Purely
        local; one that fails (a keyring locked now) is logged, changes
        nothing, and is tried again at the next round."""
        newest, mark = self.envelope.epoch, self.mark.high_water
        if self.reseal is None or mark.local_epoch >= newest:
            return
        moved = replace(mark, local_epoch=newest,
                        epochs={**mark.epochs, "0": self.envelope.key(0).hex()})
        try:
            self.mark.water_file = self.reseal(newest, self.envelope.key(newest), moved)
        except Exception as exc:
            status = self.mark.status
            status.errors = [*status.errors[-9:],
                             f"local files not moved to key epoch {newest}: {exc}"]
            log.warning("the local files stay under key epoch %d's key for now (%s); "
                        "the next round tries again", mark.local_epoch, exc)
            return
        self.mark.high_water = moved

    def rotate(self, revoke: frozenset[str] = frozenset(),
               keep: Callable[[str], None] | None = None) -> str:
        """Start a new key epoch, given to every registered device but
        `revoke` (ids); returns the new recovery key's text, which `keep`
        is given before the remote sees the epoch. The caller has synced
        first, so that the revocation's head is the remote's."""
        self.catch_up()
        vault_id, registry = self.envelope.vault_id, self.registry
        recipients = {d: r.receive for d, r in registry.records().items()
                      if d not in self.mark.high_water.revoked and registry.admits(r)}
        recipients[registry.device] = registry.keys.receive_public
        text, secret = recovery.new_recovery_key(vault_id)
        if keep is not None:
            keep(text)
        self._hold(epochs.start(self.base, vault_id, self.epoch(), registry.keys,
                                registry.device, recipients, secret,
                                head=self.mark.high_water.head, key_of=registry.key_of,
                                revoke=revoke))
        reached("rotate:granted")
        return text

    def _bind_token(self) -> None:
        """Bind this device's token to it on a memvault-server, so that the
        others can have it revoked (`revoke_token`). A token bound to another
        device (shared between two) is left as it is, and said in the log."""
        if not isinstance(self.base, DeviceTokens):
            return
        try:
            self.base.bind_device(self.registry.device, self.registry.keys.sign_public)
        except MemvaultError as exc:  # bound to another device, or an older server
            log.warning("sync: this device's token is not bound to it (%s); revoking this "
                        "device will not revoke its token", exc)

    def revoke_token(self, device: str) -> tuple[bool, str]:
        """Have a memvault-server revoke the token bound to `device`, asked
        with this device's key; returns (revoked, what happened), (False, "")
        on a remote of another kind."""
        if not isinstance(self.base, DeviceTokens):
            return False, ""
        try:
            name = self.base.revoke_device(device, self.registry.device,
                                           self.registry.keys.sign)
        except MemvaultError as exc:
            log.warning("sync: the server did not revoke device %s's token: %s", device, exc)
            return False, f"the server did not revoke its token: {exc}"
        return True, f"its token {name!r} is revoked on the server"
