"""The background sweep: once every `sweep.every_hours` per vault.

The schedule counts from the vault's last sweep on any device (an upkeep
record in the log, synced like any write), not from the daemon's start: a
laptop that starts every morning still sweeps once a day, and a second
device does not sweep again what the first just swept. The setting is read
on every check, so an edit of config.toml applies without a restart.
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

# Checks every 10 minutes at most (a daily sweep is at most that late), and
# 4 times per period for the short periods of tests.
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
            period = self._period_s()
            if not period or not self.vault.loaded:
                continue
            if time.time() - self.vault.last_upkeep("sweep") < period:
                continue
            try:
                txid, plan = self.vault.sweep(dry_run=False)
            except MemvaultError as exc:  # a full disk, say: try at the next check
                log.warning("background sweep failed: %s", exc)
                continue
            log.info("background sweep: %d of %d memories forgotten (%d exempt), txid %d",
                     len(plan.swept), plan.considered, plan.exempt, txid)

    def _check_s(self) -> float:
        period = self._period_s()
        return _MAX_CHECK_S if not period else min(_MAX_CHECK_S,
                                                   max(_MIN_CHECK_S, period / 4))
