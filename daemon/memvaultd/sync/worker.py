"""The sync worker: pull what the remote has, push what it lacks.

One thread runs `sync_once` whenever something may have changed: a local
write (batched over a 0.2 s window), a `WatchHead` notice of a new version,
a 30 s timer, or `sync now`. Another thread waits on the remote's head.
Local remember/recall never wait on it: when the remote is down, slow or
answers errors, the worker backs off (`status.Backoff`: 1 s doubling to
64 s, with jitter; local writes do not cut a back-off short) and every
local operation stays in the local log until the remote holds it.

A round, in order (each step in its own module):

    moves:     follow a move to a fresh chain, at the first round, at
               `sync now` and once an hour (`repair.py`);
    witness:   read the other devices' views (`witnessing.py`);
    register:  this device's record and token, at the first round
               (`membership.py`);
    catch up:  the newest key epoch given to this device, and the local
               files moved to it (`membership.py`);
    pull/push: the versions (`exchange.py`), on the high-water mark
               (`mark.py`);
    witness:   check the views read, record this device's;
    snapshot:  publish one if due (`snapshot_publisher.py`).

A rollback or fork (RollbackDetected) or a signed object that fails to open
(IntegrityError) stops sync until `repair` or another device's move; a
revoked device (`epochs.Revoked`) stops with PermissionDenied.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memvault_base.errors import IntegrityError, PermissionDenied, RollbackDetected
from memvaultd.model.operations import Operation
from memvaultd.sync import epochs
from memvaultd.sync.devices import Registry
from memvaultd.sync.envelope import Envelope
from memvaultd.sync.exchange import ChainWithheld, VersionExchange
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.mark import ChainMark
from memvaultd.sync.membership import Membership, Reseal
from memvaultd.sync.remotes import redact
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.repair import Repair
from memvaultd.sync.snapshot_publisher import SnapshotPublisher
from memvaultd.sync.status import Backoff, SyncStatus
from memvaultd.sync.vault_side import PushedVault
from memvaultd.sync.witness import Witness
from memvaultd.sync.witnessing import Witnessing

log = logging.getLogger("memvaultd.sync")

_TIMER_S = 30.0
# How often a stopped worker looks for a move to a fresh chain (one listing
# of `moves/` under the vault's id).
_STOPPED_LOOK_S = 60.0
_BATCH_WINDOW_S = 0.2


class SyncWorker:
    """Sync of one vault on one remote. `remote` is the chain's scope,
    `base` the vault's own (where move notices live: the same remote on
    chain 1), and `open_scope` opens another scope of the same remote.
    `reseal` moves the local files to a newer key epoch (`Membership.reseal_if_behind`)."""

    def __init__(self, vault: PushedVault, remote: Remote, water_file: HighWaterFile,
                 high_water: HighWater, envelope: Envelope, *, registry: Registry,
                 device_name: str, base: Remote | None = None,
                 open_scope: Callable[[str], Remote] | None = None,
                 marks_every_s: float = 6 * 3600, reseal: Reseal | None = None) -> None:
        self.vault, self.envelope, self.registry = vault, envelope, registry
        self.base = base or remote
        status = SyncStatus(redact(high_water.remote), head=high_water.head,
                            pushed_seq=high_water.pushed_seq, chain=high_water.chain)
        self.mark = ChainMark(vault, remote, water_file, high_water, envelope, registry, status)
        self.membership = Membership(self.mark, self.base, device_name, reseal)
        self.exchange = VersionExchange(self.mark, vault, self.membership.catch_up,
                                        marks_every_s)
        self.witnessing = Witnessing(self.mark)
        self.repairs = Repair(self.mark, vault, self.base, open_scope, self._forget)
        self.snapshots = SnapshotPublisher(self.mark, vault)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _forget(self) -> None:
        self.exchange.forget()
        self.witnessing.forget()

    @property
    def status(self) -> SyncStatus:
        return self.mark.status

    @property
    def high_water(self) -> HighWater:
        return self.mark.high_water

    @high_water.setter
    def high_water(self, mark: HighWater) -> None:
        self.mark.high_water = mark

    @property
    def remote(self) -> Remote:
        return self.mark.remote

    @property
    def witness(self) -> Witness | None:
        return self.witnessing.witness

    @witness.setter
    def witness(self, witness: Witness | None) -> None:
        self.witnessing.witness = witness

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        for target, name in ((self._loop, "sync"), (self._watch, "sync-watch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self.poke()

    def stop(self, *, wait_round: bool = False) -> None:
        """Finish the round in progress; the watch thread (blocked on the
        remote for up to 20 s, a daemon thread) is not waited for.
        `wait_round`: return only once no round runs, not even one the 10 s
        wait gave up on (its calls fail as the remotes close), so that
        nothing it saves follows (`sync leave` removes the state it saves)."""
        self._stop.set()
        self._wake.set()
        self._threads[0].join(timeout=10)
        self.remote.close()
        self.witnessing.close()
        if self.base is not self.remote:
            self.base.close()
        if wait_round:
            with self._lock:
                pass

    def poke(self) -> None:
        self._wake.set()

    @contextmanager
    def between_rounds(self) -> Iterator[None]:
        """No round, rotation or move of the local files to a new key runs
        while this is held (the files `reseal` stages stay as they are)."""
        with self._lock:
            yield

    def _loop(self) -> None:
        backoff = Backoff()
        delay = 0.0  # after a failure: how long until the next try
        while not self._stop.is_set():
            if delay:
                # Only a stop ends a back-off early. Local writes keep poking
                # (an agent may write every 100 ms), and letting them through
                # would call a failing remote five times a second.
                self._stop.wait(delay)
            else:
                self._wake.wait(timeout=_TIMER_S)
            if self._stop.is_set():
                return
            time.sleep(_BATCH_WINDOW_S)  # let a burst of writes share one version
            self._wake.clear()
            try:
                self.sync_once(full_check=False)
                backoff.reset()
                delay = 0.0
            except (RollbackDetected, IntegrityError):
                # Recorded by sync_once. Until a person repairs it here, or
                # another device's repair is found, look now and then.
                delay = _STOPPED_LOOK_S
            except Exception as exc:  # the remote is down, slow or flaky: back off
                delay = backoff.next()  # recorded as offline by sync_once
                log.warning("sync failed (%s); retrying in %.2f s", exc, delay)

    def _watch(self) -> None:
        # Watch from the newest head heard of, not from the mark: until the
        # pull it triggers catches up, the mark is behind, and watching from
        # it would return at once, thousands of times a second.
        heard, chain = self.high_water.head, self.high_water.chain
        backoff = Backoff()
        while not self._stop.is_set():
            if self.high_water.chain != chain:  # moved: another chain counts from 1
                heard, chain = self.high_water.head, self.high_water.chain
            started = time.monotonic()
            try:
                head = self.remote.watch_head(max(heard, self.high_water.head), timeout=20.0)
            except Exception:
                self._stop.wait(backoff.next())
                continue
            backoff.reset()
            if head > max(heard, self.high_water.head):
                heard = head
                self.poke()
            # A remote that answers every watch at once (a claimed head that
            # keeps growing, a stream ended as soon as it starts) is asked
            # at most five times a second; the worker batches a notice over
            # the same 0.2 s anyway.
            self._stop.wait(max(0.0, started + _BATCH_WINDOW_S - time.monotonic()))

    # -- one round -----------------------------------------------------------

    def sync_once(self, *, full_check: bool = True, publish: bool = True) -> None:
        """One round. `full_check` downloads version `head` to check the mark
        whatever it was last known to be: `sync now`, `init` and `join` do;
        the worker's own rounds do once an hour (`ChainMark.check`).
        `publish`: a snapshot that is due is published in this round (`init`
        leaves it to the worker's next round, so that it returns once its
        versions are pushed)."""
        with self._lock:
            if self.status.state == "stopped" and not self.repairs.follow(quiet=True):
                raise RollbackDetected(self.status.last_error)
            # A retry stays "offline" until a round succeeds: the state says
            # whether the remote serves this device, and a retry's round read
            # as "syncing" said nothing was wrong (over 3 s of a remote that
            # withheld its chain, 3,077 status reads caught it).
            if self.status.state != "offline":
                self.status.state = "syncing"
            try:
                self.membership.reseal_if_behind()  # a switch a crash or a locked keyring put off
                # Read before the remote is called, so that while it is down or
                # slow the status shows what waits for it, not what waited after
                # the last round that succeeded.
                unpushed = self.vault.local_ops_after(self.high_water.pushed_seq)
                self.status.pending = self.exchange.pending(unpushed)
                self.status.repush = unpushed is None
                if (full_check or self.repairs.due()) and self.repairs.follow(quiet=False):
                    unpushed = self.vault.local_ops_after(self.high_water.pushed_seq)
                # Read before the pull: a device records only versions the
                # remote already holds, so the pull then reaches them.
                witnessed = self.witnessing.read()
                self.membership.register()
                self.membership.catch_up()
                self.membership.reseal_if_behind()
                self.exchange.pull(full_check)
                if unpushed is None:  # only once the remote answered
                    unpushed = self.exchange.repush()
                if not self.exchange.waits(unpushed):
                    self.exchange.push(*unpushed)
                self.witnessing.check(witnessed)
                self.witnessing.record(force=full_check)
                if publish:
                    self.snapshots.maybe_publish()
            except epochs.Revoked as exc:
                self.status.record(f"stopped: {exc}", "stopped")
                log.error("sync stopped: %s", exc)
                raise PermissionDenied(f"sync: {exc}") from None
            except (RollbackDetected, IntegrityError) as exc:
                self.status.record(f"stopped: {exc}", "stopped")
                log.error("sync stopped: %s (`memvault sync repair` moves the vault past it)",
                          exc)
                raise
            except Exception as exc:
                # Recorded here, not by the caller: a failed `sync now` reads
                # as offline at once, not at the worker's next round (30 s).
                self.status.withheld_head = exc.claimed if isinstance(exc, ChainWithheld) else 0
                self.status.record(f"{type(exc).__name__}: {exc}", "offline")
                raise
            self.status.state, self.status.last_error = "idle", ""
            self.status.withheld_head = self.status.bad_version = 0
            unpushed = self.vault.local_ops_after(self.high_water.pushed_seq)
            self.status.pending = self.exchange.pending(unpushed)

    def pull(self, full_check: bool = False) -> int:
        return self.exchange.pull(full_check)

    def push(self, pending: list[tuple[int, Operation]], scanned_to: int) -> int:
        return self.exchange.push(pending, scanned_to)

    # -- fingerprints: comparing views with another device (fingerprint.py) ---

    def view(self) -> tuple[int, str, int, bytes]:
        """What this device has seen: (chain, scope, head, sha256 of version head)."""
        with self._lock:
            return self.mark.view()

    def hash_at(self, number: int) -> bytes:
        """The sha256 of version `number` of the chain this device has seen
        (`ChainMark.hash_at`)."""
        with self._lock:
            return self.mark.hash_at(number)

    def attach_witness(self, witness: Witness, url: str, token: str | None) -> None:
        """Record this device's views on `witness` from now on (`Witnessing.attach`)."""
        with self._lock:
            self.witnessing.attach(witness, url, token)

    def stop_on(self, error: str) -> None:
        """Stop sync on `error`, found outside a round (a fingerprint that
        does not match): as a round stops on RollbackDetected."""
        with self._lock:
            self.status.record(f"stopped: {error}", "stopped")
        log.error("sync stopped: %s (`memvault sync repair` moves the vault past it)", error)

    def repair(self) -> None:
        """Move the vault to a fresh chain (`Repair.repair`), then sync."""
        with self._lock:
            self.repairs.repair()
        self.poke()

    # -- devices and key epochs (membership.py) --------------------------------

    def rotate(self, revoke: frozenset[str] = frozenset(),
               keep: Callable[[str], None] | None = None) -> str:
        """Start a new key epoch, given to every registered device but
        `revoke` (ids); returns the new recovery key's text, given to `keep`
        before the remote sees the epoch. Synced first, so that the
        revocation's head is the remote's."""
        self.sync_once(publish=False)
        with self._lock:
            text = self.membership.rotate(revoke, keep)
            self.membership.reseal_if_behind()
            return text

    def revoke_token(self, device: str) -> tuple[bool, str]:
        return self.membership.revoke_token(device)
