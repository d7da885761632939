"""The worker's side of the witness (`witness.py`): recording this
device's view there, and checking the other devices' views against it.

A witness that is down never stops sync: the round goes on without it and
`sync status` names the witness as failing, with the error, until it
answers again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from memvaultd.sync.mark import ChainMark
from memvaultd.sync.witness import View, Witness, check

log = logging.getLogger("memvaultd.sync")

# A device records its view on the witness at most this often, besides at
# every `sync now`: on memvault-server, where a device token cannot delete,
# each record stays (4 KiB), so a device writing all day leaves at most
# 288 a day (1.2 MiB); the others see a view at most 5 minutes old.
_WITNESS_EVERY_S = 300.0


class Witnessing:
    def __init__(self, mark: ChainMark) -> None:
        self.mark = mark
        self.witness: Witness | None = None
        # The other devices' views already found consistent with this one's.
        self._witnessed: set[tuple[str, int, bytes]] = set()
        self._recorded_at: float | None = None

    def forget(self) -> None:
        """Another chain: the views checked on this one count no more."""
        self._witnessed = set()

    def attach(self, witness: Witness, url: str, token: str | None) -> None:
        """Record this device's views on `witness` from now on, and check
        the other devices' there; kept in `sync.state` for the next start."""
        if self.witness is not None:
            self.witness.close()
        self.witness, self._witnessed = witness, set()
        self.mark.status.witness = witness.url
        self.mark.save(replace(self.mark.high_water, witness=url, witness_token=token))

    def close(self) -> None:
        if self.witness is not None:
            self.witness.close()

    def read(self) -> list[View]:
        if self.witness is None:
            return []
        try:
            views = self.witness.others()
        except Exception as exc:  # a witness that is down never stops sync
            self._failed(exc)
            return []
        self.mark.status.witness_error = ""
        return views

    def record(self, force: bool) -> None:
        if self.witness is None or (
                not force and self._recorded_at is not None
                and time.monotonic() - self._recorded_at < _WITNESS_EVERY_S):
            return
        try:
            self.witness.record(*self.mark.view())
            self._recorded_at = time.monotonic()
            self.mark.status.witness_error = ""
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        url = self.witness.url if self.witness else ""
        status = self.mark.status
        status.errors = [*status.errors[-9:], f"witness {url}: {exc}"]
        status.witness_error = str(exc) or type(exc).__name__
        log.warning("the witness %s failed (%s); sync goes on without it this round", url, exc)

    def check(self, views: list[View]) -> None:
        """The other devices' views, read before this round's pull, agree
        with this device's (`witness.check`): ForkDetected if not."""
        if self.witness is not None:
            mark = self.mark.high_water
            check(views, mark.chain, mark.scope, mark.head, self.mark.hash_at, self._witnessed,
                  self.witness.url)
