"""What `sync status` shows of a worker (`SyncStatus`), and how long the
worker waits on a remote that fails (`Backoff`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 64.0


class Backoff:
    """How long to wait before calling a remote that failed `failures` times in a row.

    The nominal wait doubles from 1 s to 64 s: a remote that is down for an
    hour costs ~70 calls per device and thread, and one that comes back is
    tried again within about a minute. Each wait is drawn from the upper half
    of its nominal value ("equal jitter"): devices that lost the same server
    at the same moment spread their retries over half a window instead of
    arriving together, yet no wait is shorter than the nominal value before
    it, so the gaps never shrink while the remote stays down: 0.5-1 s, 1-2 s,
    2-4 s, ..., 16-32 s, then 32-64 s each.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self.failures = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        nominal = min(_MAX_BACKOFF_S, _FIRST_BACKOFF_S * 2.0 ** min(self.failures, 16))
        self.failures += 1
        return nominal * (0.5 + 0.5 * self._rng.random())

    def reset(self) -> None:
        self.failures = 0


@dataclass
class SyncStatus:
    remote: str
    state: str = "idle"
    head: int = 0
    pushed_seq: int = 0
    pending: int = 0
    last_push: float = 0.0
    last_pull: float = 0.0
    last_error: str = ""
    errors: list[str] = field(default_factory=list)
    bad_version: int = 0  # the version sync stopped on, that failed to open (0: none)
    withheld_head: int = 0  # the head a withholding remote claims (0: none)
    repush: bool = False  # the log lost records the remote lacks: re-put the vault
    chain: int = 1  # which chain of the vault: one more per repair
    snapshot: int = 0  # the version of the newest remote snapshot known (0: none)
    # Other devices whose newest pulled operation is older than
    # `freeze_bound_s`: (device id, that operation's wall time), set by
    # `Syncing.status` (a frozen view, docs/threat-model.md).
    silent: list[tuple[str, float]] = field(default_factory=list)
    freeze_bound_s: float = 0.0
    witness: str = ""  # the witness remote's URL without secrets ("": none)
    witness_error: str = ""  # why the witness failed this round ("": it answered)
    # The versions refused since the daemon started, newest last: (number,
    # why), e.g. signed by no registered device (`signatures.Refused`).
    refused: list[tuple[int, str]] = field(default_factory=list)

    def record(self, error: str, state: str) -> None:
        self.last_error, self.state = error, state
        self.errors = [*self.errors[-9:], error]
