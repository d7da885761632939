"""The background upkeep: the sweep once every `sweep.every_hours` per
vault, and the purge of what has been in the trash for `trash.retention_days`.

The sweep's schedule counts from the vault's last sweep on any device (an
upkeep record in the log, synced like any write), not from the daemon's
start: a laptop that starts every morning still sweeps once a day, and a
second device does not sweep again what the first just swept. The purge
looks at each trashed memory's own time, so whichever device checks first
purges it and the others receive the purge. The settings are read on every
check, so an edit of config.toml applies without a restart.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from memvault_base.errors import MemvaultError
from memvaultd.model.heat import SECONDS_PER_DAY

if TYPE_CHECKING:
    from memvaultd.vault.vault import Vault

log = logging.getLogger("memvaultd.upkeep")

# Checks every 10 minutes at most (a daily sweep or a 30-day purge is at
# most that late), and 4 times per period for the short periods of tests.
_MAX_CHECK_S = 600.0
_MIN_CHECK_S = 1.0
_HOUR_S = SECONDS_PER_DAY / 24


class SweepSchedule:
    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sweep-schedule", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _period_s(self) -> float:
        return self.vault.config.sweep.every_hours * _HOUR_S

    def _run(self) -> None:
        while not self._stop.wait(self._check_s()):
            if not self.vault.loaded:
                continue
            self._sweep()
            self._purge()

    def _sweep(self) -> None:
        period = self._period_s()
        if not period or time.time() - self.vault.last_upkeep("sweep") < period:
            return
        try:
            txid, plan = self.vault.sweep(dry_run=False)
        except MemvaultError as exc:  # a full disk, say: try at the next check
            log.warning("background sweep failed: %s", exc)
            return
        log.info("background sweep: %d of %d memories to the trash (%d exempt), txid %d",
                 len(plan.swept), plan.considered, plan.exempt, txid)

    def _purge(self) -> None:
        try:
            txid, ids = self.vault.purge_trash()
        except MemvaultError as exc:
            log.warning("purging the trash failed: %s", exc)
            return
        if ids:
            log.info("purged %d memories whose time in the trash was over, txid %d",
                     len(ids), txid)

    def _check_s(self) -> float:
        periods = [p for p in (self._period_s(), self.vault.config.trash.retention_s) if p]
        if not periods:
            return _MAX_CHECK_S
        return min(_MAX_CHECK_S, max(_MIN_CHECK_S, min(periods) / 4))
