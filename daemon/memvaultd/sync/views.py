"""Comparing what this device has seen of the chain with what others have:
fingerprints (`memvault sync verify`) and silent devices (a frozen view).

A remote can show two devices two histories (a fork) or keep showing one
device an old one (a freeze). Neither can be seen from one device alone;
both show once two views meet:

verify: the other device's fingerprint names its chain, its head N and a
keyed digest of version N's hash (`fingerprint.py`). This device
  - is on the same chain, at N or past it: recomputes its own digest at N
    (`SyncWorker.hash_at`) and compares: equal, or `forked`;
  - is behind (an older chain, or a head under N): syncs now; if it is
    still behind, the remote withholds what the other device saw from it:
    `forked` as well (a frozen or forked view);
  - is on a newer chain than the other: `undecided` until the other
    device syncs (it has not followed a repair yet).
A fork stops sync here, as RollbackDetected does (`SyncWorker.stop_on`).

silent: an operation carries the stamp of the device that wrote it; every
pull keeps the newest stamp of each device (`HighWater.seen`). A device
that wrote before and whose newest pulled operation is older than
`freeze_bound_hours` is listed by `sync status`: it is idle, gone, or the
remote hides its versions from this one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memvaultd.sync.fingerprint import Fingerprint, FingerprintKey
from memvaultd.sync.worker import SyncWorker

__all__ = ["Verdict", "silent_devices", "verify"]


@dataclass(frozen=True)
class Verdict:
    mine: Fingerprint  # this device's fingerprint, after any catching up
    compared_at: int = 0  # the version both fingerprints were compared at
    agreed: bool = False
    forked: str = ""  # why the views differ (a fork or a withheld history)
    undecided: str = ""  # why they could not be compared yet


def verify(worker: SyncWorker, key: FingerprintKey, other_text: str | None,
           catch_up: Callable[[], None]) -> Verdict:
    """This device's fingerprint, compared with `other_text` if given.
    `catch_up` runs a round of sync now (for when this device is behind)."""
    other = Fingerprint.parse(other_text) if other_text is not None else None
    mine = _mine(worker, key)
    if other is None:
        return Verdict(mine)
    if (other.chain, other.head) > (mine.chain, mine.head):
        catch_up()
        mine = _mine(worker, key)
    if other.chain < mine.chain:
        return Verdict(mine, undecided=(
            f"the other device is on chain {other.chain}, this one on chain {mine.chain} "
            "(a repair moved the vault): run `memvault sync now` there and compare again"))
    if (other.chain, other.head) > (mine.chain, mine.head):
        return _forked(worker, mine, other.head, (
            f"the other device has seen version {other.head} of chain {other.chain}, but the "
            f"remote shows this device only version {mine.head} of chain {mine.chain}: it "
            "withholds versions from this device (a frozen or forked view)"))
    chain, scope, _, _ = worker.view()
    at = key.of(chain, scope, other.head, worker.hash_at(other.head))
    if at.digits != other.digits:
        return _forked(worker, mine, other.head, (
            f"the other device's fingerprint differs from this device's at version "
            f"{other.head} of chain {other.chain}: the remote showed the two devices "
            "different histories (a fork)"))
    return Verdict(mine, compared_at=other.head, agreed=True)


def _mine(worker: SyncWorker, key: FingerprintKey) -> Fingerprint:
    chain, scope, head, head_hash = worker.view()
    return key.of(chain, scope, head, head_hash)


def _forked(worker: SyncWorker, mine: Fingerprint, at: int, why: str) -> Verdict:
    worker.stop_on(f"ForkDetected: {why}")
    return Verdict(mine, compared_at=at, forked=why)


def silent_devices(seen: Mapping[str, float], is_own: Callable[[str], bool], now: float,
                   bound_s: float) -> list[tuple[str, float]]:
    """The other devices whose newest pulled operation is older than
    `bound_s` seconds: (device id, that operation's wall time), the longest
    silent first."""
    return sorted(((device, wall_s) for device, wall_s in seen.items()
                   if not is_own(device) and now - wall_s > bound_s), key=lambda item: item[1])
