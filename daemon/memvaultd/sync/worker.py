"""The sync worker: pull what the remote has, push what it lacks.

One thread runs `sync_once` whenever something may have changed: a local
write (batched over a 0.2 s window), a `WatchHead` notice of a new version,
a 30 s timer, or `sync now`. Another thread waits on the remote's head.
Local remember/recall never wait on it: when the remote is down, slow or
answers errors, the worker backs off (`Backoff`: 1 s doubling to 64 s, with
jitter; local writes do not cut a back-off short) and every local operation
stays in the local log until the remote holds it.

    pull:  check the high-water mark (the chain is no shorter than the
           version this device saw last, and that version is still there,
           unchanged: see `_check_high_water` for when it is downloaded again),
           then open each newer version with (number, parent hash) in its
           associated data, apply its operations, advance the mark.
    push:  the local operations after `pushed_seq`, a version of at most
           1,000 operations (~2 MB) and 16 MiB sealed at a time (the largest
           object a remote takes: `next_version`), appended with the current
           head as parent; a lost race means pull, merge, retry. A version
           whose append failed without an answer may have landed anyway: the
           next pull that meets it counts it as pushed, so it is not sent
           again under another number.
    snapshot: once the versions since the newest remote snapshot hold as many
           operations as the vault holds memories (and at least 1,000), the
           full state at the head, published once, in chunks of at most
           4 MiB (`snapshots.py`), so a new device of any vault size
           bootstraps from it instead of replaying all history.

Every version is signed by the device that pushed it (`signatures.py`); one
that no device of the registry (`devices.py`) signed, such as one put by
someone holding only a server token, is refused: `sync status` lists it,
nothing of it is applied, and the chain goes on past it.
A rollback or fork (RollbackDetected) or a signed object that fails to open
(IntegrityError) stops sync: nothing of it is applied, and `sync status`
names the version. `repair` (`memvault sync repair`, once the user
confirms) moves the vault to a fresh chain (`moves.py`); a stopped worker
looks for such a move about once a minute and follows it, as every worker
does at its first round, at `sync now` and once an hour.
When the local log no longer holds every operation the remote lacks (sync
was stopped or offline past the backlog limit, `vault/snapshots.py`), the
next push puts the whole vault again (`PushedVault.repush`).
A remote that claims a longer chain than it hands over (`ChainWithheld`)
is retried with back-off like one that is down, and `sync status` names
the head it claims.
"""

from __future__ import annotations

import hashlib
import logging
import random
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from memvault_base.errors import (
    IntegrityError,
    InvalidArgument,
    MemvaultError,
    PermissionDenied,
    RollbackDetected,
    Unavailable,
)
from memvault_base.objects.names import MAX_OBJECT
from memvaultd.model.operations import ACCESS, Operation, decode, encode
from memvaultd.sync import epochs, moves, recovery, signatures, snapshots
from memvaultd.sync.devices import Registry
from memvaultd.sync.envelope import FIXED_MAX, VERSION, Envelope, UnknownEpoch, chain_context
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes import redact
from memvaultd.sync.remotes.base import DeviceTokens, Remote
from memvaultd.sync.vault_side import PushedVault
from memvaultd.sync.witness import View, Witness, check

log = logging.getLogger("memvaultd.sync")

OPS_PER_VERSION = 1000
# A remote snapshot is due once the versions since the last one hold as many
# operations as the vault holds memories and turns, and at least this many.
# A joiner then downloads the snapshot and at most about as much again in
# versions; each snapshot is published once, so its cost is spread over
# that many operations (a 100k vault: 303 MiB over 100k operations of 2-4
# KiB each). 1,000: a small vault's snapshot every 1,000 operations.
SNAPSHOT_MIN_OPS = 1000
# After a failed publication (the remote refused or went away), the next
# try waits this long: each try seals and uploads the whole state (303 MiB
# at 100k), and the versions are pushed meanwhile regardless.
_SNAPSHOT_RETRY_S = 600.0
_TIMER_S = 30.0
# How often a stopped worker looks for a move to a fresh chain (one listing
# of `moves/` under the vault's id).
_STOPPED_LOOK_S = 60.0
_BATCH_WINDOW_S = 0.2
_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 64.0
# How long version `head`, once known to be on the remote, is trusted to be
# still there before a round that is not `sync now` downloads it again.
# Downloaded every round, it cost up to 3 MiB (a bulk version) for every
# write, notice and 30 s tick: bench_sync's device received 130 KiB per new
# memory, against 229 B with this check (docs/benchmarks.md). A version this
# device appended (the remote
# acknowledged it) or pulled (downloaded and hashed) is known; a fork built
# on top of it cannot hide anyway, since the next pulled version carries its
# parent's hash in its associated data.
_RECHECK_S = 3600.0
# Hashes of the versions this device pulled or appended, kept in memory so
# that checking another device's view at a recent version downloads
# nothing (`_hash_at`): 4,096 x 32 bytes, about an hour of a busy vault.
_KEPT_HASHES = 4096
# A device records its view on the witness at most this often, besides at
# every `sync now`: on memvault-server, where a device token cannot delete,
# each record stays (4 KiB), so a device writing all day leaves at most
# 288 a day (1.2 MiB); the others see a view at most 5 minutes old.
_WITNESS_EVERY_S = 300.0


def pack_ops(ops: list[Operation]) -> bytes:
    """version body := count:u32 | (len:u32 | operation record)*"""
    return _pack([encode(op) for op in ops])


def _pack(records: list[bytes]) -> bytes:
    parts = [struct.pack(">I", len(records))]
    parts += [struct.pack(">I", len(record)) + record for record in records]
    return b"".join(parts)


def next_version(pending: list[tuple[int, Operation]], start: int) -> tuple[int, bytes]:
    """The operations of the next version, from `pending[start]` on: at most
    OPS_PER_VERSION of them and, sealed and signed, at most `MAX_OBJECT` bytes, the
    largest object any remote takes (600 memories of 30 KiB made one 19 MB
    version of 600 operations). Returns (where the next one starts, the
    body); the first operation always goes, since one record is at most
    ~100 KiB (a memory's text, payload and vector)."""
    budget = MAX_OBJECT - FIXED_MAX - signatures.TRAILER - 4
    records: list[bytes] = []
    end = start
    for _, op in pending[start : start + OPS_PER_VERSION]:
        record = encode(op)
        budget -= 4 + len(record)
        if budget < 0 and records:
            break
        records.append(record)
        end += 1
    return end, _pack(records)


def _writers(ops: list[Operation]) -> dict[str, float]:
    """The devices that stamped `ops`, with the newest stamp of each (wall seconds)."""
    writers: dict[str, float] = {}
    for op in ops:
        writers[op.stamp.device] = max(op.stamp.wall_ms / 1000, writers.get(op.stamp.device, 0.0))
    return writers


def unpack_ops(body: bytes, name: str) -> list[Operation]:
    try:
        (count,) = struct.unpack_from(">I", body)
        ops, offset = [], 4
        for _ in range(count):
            (size,) = struct.unpack_from(">I", body, offset)
            if offset + 4 + size > len(body):
                raise struct.error("an operation runs past the end")
            ops.append(decode(body[offset + 4 : offset + 4 + size]))
            offset += 4 + size
    except struct.error as exc:
        raise IntegrityError(f"remote object {name}: operations do not parse") from exc
    return ops


class ChainWithheld(Unavailable):
    """The remote claims versions it does not hand over."""

    def __init__(self, claimed: int, head: int) -> None:
        super().__init__(f"the remote claims its chain reaches version {claimed} but withholds "
                         f"every version after {head}; retrying with back-off")
        self.claimed = claimed


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
    # The versions refused since the daemon started, newest last: (number,
    # why), e.g. signed by no registered device (`signatures.Refused`).
    refused: list[tuple[int, str]] = field(default_factory=list)


def marks_wait(pending: Sequence[tuple[int, Operation]], now_s: float, every_s: float) -> bool:
    """Whether `pending` waits: it holds access marks alone (what recalls
    log), all made in the period of the fixed schedule that `now_s` is in
    (periods of `every_s` seconds since the epoch). They then go out with the
    next write, or at the first round of the next period. Pushed as they
    came, each recall's marks reached the remote within a worker round
    (30 s) in a version whose size grew with `top_k`, telling it when, and
    roughly how much, the user reads; held, it learns at most that some
    recall happened in a period (docs/threat-model.md). They still travel:
    heat and the forgetting sweep on the other devices count them, and a
    memory used only on this device must not look unused, and be swept,
    there."""
    if not pending or any(op.kind != ACCESS for _, op in pending):
        return False
    period = int(now_s // every_s)
    return all(int(op.stamp.wall_ms / 1000 // every_s) == period for _, op in pending)


class SyncWorker:
    """Sync of one vault on one remote. `remote` is the chain's scope,
    `base` the vault's own (where move notices live: the same remote on
    chain 1), and `open_scope` opens another scope of the same remote."""

    def __init__(self, vault: PushedVault, remote: Remote, water_file: HighWaterFile,
                 high_water: HighWater, envelope: Envelope, *, registry: Registry,
                 device_name: str, base: Remote | None = None,
                 open_scope: Callable[[str], Remote] | None = None,
                 marks_every_s: float = 6 * 3600) -> None:
        self.vault = vault
        # This device's record is published in the first round that reaches
        # the remote, before anything it pushes (`devices.py`).
        self.registry, self.device_name, self._registered = registry, device_name, False
        self.marks_every_s = marks_every_s  # see `marks_wait`
        self.remote = remote
        self.base = base or remote
        self.open_scope = open_scope
        self.water_file = water_file
        self.high_water = high_water
        self.envelope = envelope
        for number, key in high_water.epochs.items():
            envelope.add_epoch(int(number), bytes.fromhex(key))
        # A revoked device counts for its versions up to its revocation's
        # head (`_signer_of`), the same on every device.
        registry.admits = lambda record: epochs.admits(
            self.envelope.epoch, {*self.high_water.members, *self.high_water.revoked},
            record.device, record.epoch)
        self.status = SyncStatus(redact(high_water.remote), head=high_water.head,
                                 pushed_seq=high_water.pushed_seq, chain=high_water.chain)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # (number, sha256, last local seq) of the version being appended
        # until the remote answers: see `_own_version`.
        self._unanswered: tuple[int, bytes, int] | None = None
        # When (time.monotonic) the mark was last known to match the remote:
        # checked in full, or moved to a version just pulled or appended.
        # See `_check_high_water`.
        self._known_at: float | None = None
        # When a snapshot may next be tried, after one failed (monotonic).
        self._snapshot_retry_at = 0.0
        self.status.snapshot = high_water.snapshot
        # When (monotonic) `moves/` was last looked at; None: not yet.
        self._moves_seen_at: float | None = None
        # The witness (`witness.py`), if one is set; the versions' hashes
        # this device knows (number -> sha256, see `_KEPT_HASHES`); the
        # other devices' views already found consistent with this one's.
        self.witness: Witness | None = None
        self._hashes: dict[int, bytes] = {}
        self._witnessed: set[tuple[str, int, bytes]] = set()
        self._witness_recorded_at: float | None = None

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
        if self.witness is not None:
            self.witness.close()
        if self.base is not self.remote:
            self.base.close()
        if wait_round:
            with self._lock:
                pass

    def poke(self) -> None:
        self._wake.set()

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
                delay = backoff.next()
                self.status.withheld_head = exc.claimed if isinstance(exc, ChainWithheld) else 0
                self._record(f"{type(exc).__name__}: {exc}", "offline")
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

    def _record(self, error: str, state: str) -> None:
        self.status.last_error, self.status.state = error, state
        self.status.errors = [*self.status.errors[-9:], error]

    # -- one round -----------------------------------------------------------

    def sync_once(self, *, full_check: bool = True, publish: bool = True) -> None:
        """One round. `full_check` downloads version `head` to check the mark
        whatever it was last known to be: `sync now`, `init` and `join` do;
        the worker's own rounds do once an hour (`_check_high_water`).
        `publish`: a snapshot that is due is published in this round (`init`
        leaves it to the worker's next round, so that it returns once its
        versions are pushed)."""
        with self._lock:
            if self.status.state == "stopped" and not self._follow_a_move(quiet=True):
                raise RollbackDetected(self.status.last_error)
            self.status.state = "syncing"
            # Read before the remote is called, so that while it is down or
            # slow the status shows what waits for it, not what waited after
            # the last round that succeeded.
            unpushed = self.vault.local_ops_after(self.high_water.pushed_seq)
            self.status.pending = self._pending(unpushed)
            self.status.repush = unpushed is None
            try:
                if (full_check or self._moves_due()) and self._follow_a_move(quiet=False):
                    unpushed = self.vault.local_ops_after(self.high_water.pushed_seq)
                # Read before the pull: a device records only versions the
                # remote already holds, so the pull then reaches them.
                witnessed = self._read_witness()
                if not self._registered:
                    self.registry.register(self.device_name)
                    self._bind_token()
                    self._registered = True
                self._catch_up()
                self.pull(full_check)
                if unpushed is None:  # only once the remote answered
                    unpushed = self._repush()
                if not marks_wait(unpushed[0], time.time(), self.marks_every_s):
                    self.push(*unpushed)
                self._check_witnessed(witnessed)
                self._record_witness(force=full_check)
                if publish:
                    self._maybe_snapshot()
            except epochs.Revoked as exc:
                self._record(f"stopped: {exc}", "stopped")
                log.error("sync stopped: %s", exc)
                raise PermissionDenied(f"sync: {exc}") from None
            except (RollbackDetected, IntegrityError) as exc:
                self._record(f"stopped: {exc}", "stopped")
                log.error("sync stopped: %s (`memvault sync repair` moves the vault past it)",
                          exc)
                raise
            self.status.state, self.status.last_error = "idle", ""
            self.status.withheld_head = self.status.bad_version = 0
            unpushed = self.vault.local_ops_after(self.high_water.pushed_seq)
            self.status.pending = self._pending(unpushed)

    def _pending(self, unpushed: tuple[list[tuple[int, Operation]], int] | None) -> int:
        """What waits to be pushed, for `sync status`: access marks that
        wait for the schedule (`marks_wait`) are not counted."""
        if not unpushed or marks_wait(unpushed[0], time.time(), self.marks_every_s):
            return 0
        return len(unpushed[0])

    def pull(self, full_check: bool = False) -> int:
        """Apply the versions the remote has beyond the mark; returns how many.

        The remote's head is read first: an honest remote then hands over at
        least every version up to it. One that does not is `ChainWithheld`,
        never a loop: a push refused by such a remote (its chain is "longer")
        pulled nothing and retried at once, under the worker's lock: 1,123
        times in 3 s through memvault-server (its rate limit answered the rest).
        """
        claimed = self._check_high_water(full_check)
        pulled = 0
        while True:
            batch = self.remote.versions_after(self.high_water.head, limit=50)
            for number, blob in batch:
                if number != self.high_water.head + 1:
                    raise RollbackDetected(f"version {self.high_water.head + 1} is missing from "
                                           f"the remote (it offered {number})")
                try:
                    ops, signed = self._open_version(number, blob)
                except signatures.Refused as exc:
                    self._refuse(number, blob, str(exc))
                    continue
                except IntegrityError:
                    # A version `head` replaced since it was last checked
                    # reads as a fork, not as a damaged object.
                    self._check_high_water(full=True)
                    self.status.bad_version = number
                    raise
                self.vault.apply_remote(ops)
                digest = hashlib.sha256(blob).digest()
                self._advance(number, digest, pushed_seq=self._own_version(number, digest),
                              ops=len(ops), writers=_writers(ops), signed=signed)
                pulled += 1
            if len(batch) < 50:
                break
        if claimed > self.high_water.head:
            raise ChainWithheld(claimed, self.high_water.head)
        self.status.last_pull = time.time()
        return pulled

    def push(self, pending: list[tuple[int, Operation]], scanned_to: int) -> int:
        """Append `pending` (this device's operations up to log seq
        `scanned_to`, read by `Vault.local_ops_after`) as versions."""
        pushed = 0
        # `pending` is in log order: what is left of it is what follows the
        # mark's `pushed_seq`, which a pull (of versions of this device's
        # own) may move too. Found by bisection: filtering the whole list
        # again after each version of 1,000 is quadratic, and for the 1M
        # puts of `init` on a 1M vault those 1,000 filters alone took 88-94 s
        # of the interpreter (0.9 s at 100k), every write waiting its turn.
        seqs = [seq for seq, _ in pending]
        start = bisect_right(seqs, self.high_water.pushed_seq)
        while start < len(pending):
            end, body = next_version(pending, start)
            chunk = pending[start:end]
            number, parent = self.high_water.head + 1, self._head_hash()
            blob = signatures.sign(
                self.registry.keys, self.registry.device, self.envelope.vault_id, number,
                self.envelope.seal(VERSION, body, chain_context(number, parent),
                                   reserve=signatures.TRAILER))
            digest = hashlib.sha256(blob).digest()
            self._unanswered = (number, digest, chunk[-1][0])
            try:
                appended = self.remote.append_version(number, parent, blob)
            except InvalidArgument:
                # memvault-server refuses a parent that is not its version
                # `head`: say whether that version was replaced.
                self._check_high_water(full=True)
                raise
            if appended:
                self._unanswered = None
                self._advance(number, digest, pushed_seq=chunk[-1][0], ops=len(chunk),
                              signed=True)
                pushed += len(chunk)
                self.status.last_push = time.time()
            elif not self.pull() and self.remote.head() <= self.high_water.head:
                # Refused, yet nothing newer to merge: the remote's version
                # `head` is not the one this device built on.
                raise RollbackDetected(f"the remote refused version {number} on top of "
                                       f"version {self.high_water.head}, and offers nothing newer:"
                                       " its history was forked or replaced")
            start = bisect_right(seqs, self.high_water.pushed_seq)
        if scanned_to > self.high_water.pushed_seq:
            # Everything of this device up to `scanned_to` is on the remote;
            # the pulled records in between need not be read again.
            self._advance(self.high_water.head, self._head_hash(), pushed_seq=scanned_to)
        return pushed

    def _own_version(self, number: int, digest: bytes) -> int | None:
        """The last local seq version `number` carries, if it is the one this
        device appended without hearing back (the remote went away after
        storing it, `Remote.append_version`); else None.

        Without this, the ops of a version whose reply was lost were sent
        again under the next number: harmless to the state (operations apply
        once by id) but a second copy on the remote, up to 1,000 operations
        (~2 MB), for every lost reply.
        """
        if self._unanswered is None or self._unanswered[0] != number:
            return None
        _, sent, last_seq = self._unanswered
        self._unanswered = None  # whoever's version this is, the attempt is over
        return last_seq if sent == digest else None

    def _open_version(self, number: int, blob: bytes) -> tuple[list[Operation], bool]:
        """(operations, whether signed) of version `number`: Refused if no
        registered device signed it, IntegrityError if signed but it does
        not open (`signatures.open_version`)."""
        try:
            body, signed = signatures.open_version(
                self.envelope, blob, number, self._head_hash(), self._signer_of(number),
                unsigned_ok=not self.high_water.signed)
        except UnknownEpoch:
            # Sealed under an epoch started since this round caught up.
            self._catch_up()
            body, signed = signatures.open_version(
                self.envelope, blob, number, self._head_hash(), self._signer_of(number),
                unsigned_ok=not self.high_water.signed)
        return unpack_ops(body, f"version {number}"), signed

    def _signer_of(self, number: int) -> Callable[[str], bytes | None]:
        """The signing key of a registered device, for version `number`:
        None for a device revoked before it (`epochs.Epoch.refuses`)."""
        revoked = self.high_water.revoked

        def key_of(device: str) -> bytes | None:
            if device in revoked and number > revoked[device]:
                return None
            return self.registry.key_of(device)
        return key_of

    # -- key epochs (epochs.py) ----------------------------------------------

    def _epoch(self) -> epochs.Epoch:
        number = self.envelope.epoch
        return epochs.Epoch(number, self.envelope.key(number),
                            revoked=tuple(sorted(self.high_water.revoked.items())))

    def _catch_up(self) -> None:
        """Move to the newest key epoch given to this device, if newer."""
        current = self._epoch()
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
        self._save(replace(self.high_water, revoked=dict(newest.revoked),
                           members=list(newest.devices),
                           epochs={str(n): k.hex() for n, k in held.items() if n}))

    def rotate(self, revoke: frozenset[str] = frozenset()) -> str:
        """Start a new key epoch, given to every registered device but
        `revoke` (ids); returns the new recovery key's text. Synced first,
        so that the revocation's head is the remote's."""
        self.sync_once(publish=False)
        with self._lock:
            self._catch_up()
            vault_id = self.envelope.vault_id
            recipients = {d: r.receive for d, r in self.registry.records().items()
                          if d not in self.high_water.revoked and self.registry.admits(r)}
            recipients[self.registry.device] = self.registry.keys.receive_public
            text, secret = recovery.new_recovery_key(vault_id)
            self._hold(epochs.start(self.base, vault_id, self._epoch(), self.registry.keys,
                                    self.registry.device, recipients, secret,
                                    head=self.high_water.head, key_of=self.registry.key_of,
                                    revoke=revoke))
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

    def _refuse(self, number: int, blob: bytes, why: str) -> None:
        """Pass version `number` over: nothing of it is applied, and the
        next version links to it, as on every device that refuses it."""
        log.warning("version %d refused: %s; sync goes on past it", number, why)
        self.status.refused = [*self.status.refused[-9:], (number, why)]
        digest = hashlib.sha256(blob).digest()
        self._advance(number, digest, pushed_seq=self._own_version(number, digest))

    def _check_high_water(self, full: bool) -> int:
        """Borg's replay defence: what this device saw must still be there.
        Returns the remote's head.

        The chain's length is asked every round (one small call). Version
        `head` itself is downloaded and hashed when `full`, on the first
        round of the worker, and when it was last known to match over
        `_RECHECK_S` ago; so a version replaced in place on an idle remote
        is reported at the next `sync now`, restart or within the hour.
        """
        head = self.remote.head()
        if self.high_water.head == 0:
            return head
        if head < self.high_water.head:
            raise RollbackDetected(f"the remote's chain ends at version {head}, but this "
                                   f"device has seen version {self.high_water.head}: rollback")
        if (not full and self._known_at is not None
                and time.monotonic() - self._known_at < _RECHECK_S):
            return head
        seen = self.remote.versions_after(self.high_water.head - 1, limit=1)
        if not seen or hashlib.sha256(seen[0][1]).hexdigest() != self.high_water.head_hash:
            raise RollbackDetected(f"version {self.high_water.head} on the remote is not the one "
                                   "this device saw: the history was forked or replaced")
        self._known_at = time.monotonic()
        return head

    def _advance(self, number: int, digest: bytes, pushed_seq: int | None = None,
                 ops: int = 0, writers: dict[str, float] | None = None,
                 signed: bool = False) -> None:
        """Move the mark to version `number`, which this device has just
        pulled or had acknowledged (holding `ops` operations, of `writers`),
        so it is known to be on the remote."""
        if number != self.high_water.head:
            self._known_at = time.monotonic()
        self._hashes[number] = digest
        if len(self._hashes) > _KEPT_HASHES:
            del self._hashes[next(iter(self._hashes))]
        self._save(self.high_water.advanced(number, digest, pushed_seq, ops, writers, signed))

    def _save(self, mark: HighWater) -> None:
        self.high_water = mark
        self.water_file.save(mark)
        self.vault.keep_log_from(self.high_water.pushed_seq)
        self.status.head, self.status.pushed_seq = self.high_water.head, self.high_water.pushed_seq

    def _head_hash(self) -> bytes:
        return bytes.fromhex(self.high_water.head_hash) if self.high_water.head_hash else b""

    # -- fingerprints: comparing views with another device (fingerprint.py) ---

    def view(self) -> tuple[int, str, int, bytes]:
        """What this device has seen: (chain, scope, head, sha256 of version head)."""
        with self._lock:
            mark = self.high_water
            return mark.chain, mark.scope, mark.head, self._head_hash()

    def hash_at(self, number: int) -> bytes:
        """The sha256 of version `number` (at most the head) of the chain
        this device has seen.

        Only the head's hash is kept, so an earlier one is read back from
        the remote: versions `number` to the head, each opened with its
        predecessor's hash as parent (as a pull opens them) and the last
        hashing to the mark. A remote that hands over anything else cannot
        make it link up without the vault key: RollbackDetected. Costs a
        download of the versions between (~4 KiB each for a few writes).
        """
        with self._lock:
            return self._hash_at(number)

    def _hash_at(self, number: int) -> bytes:
        mark = self.high_water
        if number > mark.head:
            raise InvalidArgument(f"version {number} is past this device's head {mark.head}")
        if number == mark.head:
            return self._head_hash()
        if number == 0:
            return b""
        if number in self._hashes:
            return self._hashes[number]
        first, previous, after = b"", b"", number - 1
        while after < mark.head:
            batch = self.remote.versions_after(after, limit=min(50, mark.head - after))
            if not batch:
                raise RollbackDetected(f"version {after + 1} is no longer on the remote, "
                                       f"yet this device has seen version {mark.head}")
            for found, blob in batch[: mark.head - after]:
                if found != after + 1:
                    raise RollbackDetected(f"version {after + 1} is missing from the remote "
                                           f"(it offered {found})")
                if found > number:
                    self._link(found, blob, previous)
                previous, after = hashlib.sha256(blob).digest(), found
                first = first or previous
        if previous != self._head_hash():
            raise RollbackDetected(f"version {mark.head} on the remote is not the one this "
                                   "device saw: the history was forked or replaced")
        return first

    # -- the witness (witness.py) ---------------------------------------------

    def attach_witness(self, witness: Witness, url: str, token: str | None) -> None:
        """Record this device's views on `witness` from now on, and check
        the other devices' there; kept in `sync.state` for the next start."""
        with self._lock:
            if self.witness is not None:
                self.witness.close()
            self.witness, self._witnessed = witness, set()
            self.status.witness = witness.url
            self._save(replace(self.high_water, witness=url, witness_token=token))

    def _read_witness(self) -> list[View]:
        if self.witness is None:
            return []
        try:
            return self.witness.others()
        except Exception as exc:  # a witness that is down never stops sync
            self._witness_failed(exc)
            return []

    def _record_witness(self, force: bool) -> None:
        if self.witness is None or (
                not force and self._witness_recorded_at is not None
                and time.monotonic() - self._witness_recorded_at < _WITNESS_EVERY_S):
            return
        mark = self.high_water
        try:
            self.witness.record(mark.chain, mark.scope, mark.head, self._head_hash())
            self._witness_recorded_at = time.monotonic()
        except Exception as exc:
            self._witness_failed(exc)

    def _witness_failed(self, exc: Exception) -> None:
        url = self.witness.url if self.witness else ""
        self.status.errors = [*self.status.errors[-9:], f"witness {url}: {exc}"]
        log.warning("the witness %s failed (%s); sync goes on without it this round", url, exc)

    def _check_witnessed(self, views: list[View]) -> None:
        """The other devices' views, read before this round's pull, agree
        with this device's (`witness.check`): ForkDetected if not."""
        if self.witness is not None:
            mark = self.high_water
            check(views, mark.chain, mark.scope, mark.head, self._hash_at, self._witnessed,
                  self.witness.url)

    def _link(self, number: int, blob: bytes, parent: bytes) -> None:
        """Version `number` opens on `parent`, else RollbackDetected: it
        opened on this device's chain when pulled, so now it is replaced. A
        version no registered device signed was passed over when pulled: its
        bytes are bound by the next version's parent, or by the head's hash."""
        try:
            signatures.open_version(self.envelope, blob, number, parent,
                                    self._signer_of(number), unsigned_ok=True)
        except signatures.Refused:
            return
        except IntegrityError as exc:
            raise RollbackDetected(f"version {number} or {number - 1} on the remote is not the "
                                   "one this device saw: the history was forked or replaced"
                                   ) from exc

    def stop_on(self, error: str) -> None:
        """Stop sync on `error`, found outside a round (a fingerprint that
        does not match): as a round stops on RollbackDetected."""
        with self._lock:
            self._record(f"stopped: {error}", "stopped")
        log.error("sync stopped: %s (`memvault sync repair` moves the vault past it)", error)

    # -- repair: moving to a fresh chain (moves.py) ---------------------------

    def repair(self) -> None:
        """Move the vault to a fresh chain on the same remote (the user has
        confirmed): announce it under the vault's id, then follow the newest
        announced chain (this one, unless another device's repair raced it)."""
        with self._lock:
            if self.status.state != "stopped" and not self.status.withheld_head:
                raise InvalidArgument(f"sync is {self.status.state}, not stopped: there is "
                                      "nothing to repair")
            vault_id = self.envelope.vault_id.hex()
            newest = moves.newest(self.base, self.envelope, vault_id)
            chain = max(self.high_water.chain, newest.chain if newest else 0) + 1
            moves.announce(self.base, self.envelope, moves.new_move(vault_id, chain))
            if not self._follow_a_move(quiet=False):
                raise RollbackDetected("the remote does not show the move just written to it")
        self.poke()

    def _moves_due(self) -> bool:
        return (self._moves_seen_at is None
                or time.monotonic() - self._moves_seen_at >= _RECHECK_S)

    def _follow_a_move(self, quiet: bool) -> bool:
        """Move to the newest chain announced, if it is newer than this
        device's; whether it moved. `quiet`: a remote that cannot be asked
        is no error (a stopped worker stays stopped)."""
        try:
            move = moves.newest(self.base, self.envelope, self.envelope.vault_id.hex())
        except Exception as exc:
            if not quiet:
                raise
            log.debug("no look at moves/ (%s)", exc)
            return False
        self._moves_seen_at = time.monotonic()
        if move is None or move.chain <= self.high_water.chain or self.open_scope is None:
            return False
        log.warning("the vault moved to chain %d (a repair); putting the whole vault there",
                    move.chain)
        remote = self.open_scope(move.scope)
        before = self.vault.repush()
        if self.remote is not self.base:
            self.remote.close()
        self.remote = remote
        self._save(HighWater(self.high_water.remote, self.high_water.token, pushed_seq=before,
                             chain=move.chain, scope=move.scope, seen=self.high_water.seen,
                             witness=self.high_water.witness,
                             witness_token=self.high_water.witness_token))
        self._unanswered, self._known_at = None, None
        self._hashes, self._witnessed = {}, set()
        self.status = SyncStatus(self.status.remote, state="syncing", pushed_seq=before,
                                 chain=move.chain, errors=self.status.errors,
                                 witness=self.status.witness)
        return True

    def _repush(self) -> tuple[list[tuple[int, Operation]], int]:
        """The log no longer holds every operation the remote lacks: log the
        whole vault again and push from there."""
        before = self.vault.repush()
        log.warning("the log lost operations the remote lacks (sync backlog); re-putting the "
                    "whole vault")
        self._advance(self.high_water.head, self._head_hash(), pushed_seq=before)
        unpushed = self.vault.local_ops_after(before)
        if unpushed is None:
            raise IntegrityError("log: the records just written for the remote are gone")
        self.status.repush = False
        return unpushed

    # -- snapshots -----------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        """Publish the state at the head, once, if a snapshot is due.

        Due by this device's count of the operations since the newest
        snapshot it knows (`HighWater.ops_since_snapshot`); then the remote
        is asked whether another device published one meanwhile (one
        listing, only when due), so a snapshot is sealed and uploaded once
        per due point, not once per round (while the head rests on a due
        point, each round would upload the whole state again: 45 MiB in 5
        idle rounds for an 8 MiB state). A publication that fails is
        logged and tried again after `_SNAPSHOT_RETRY_S`; it never fails
        the round, whose versions are pushed.
        """
        mark = self.high_water
        if (mark.head == 0 or mark.snapshot >= mark.head
                or mark.ops_since_snapshot < max(SNAPSHOT_MIN_OPS, self.vault.size())
                or time.monotonic() < self._snapshot_retry_at):
            return
        try:
            newest = snapshots.newest_published(self.remote, self.envelope, mark.head)
            if newest > mark.snapshot:
                self._snapshot_known(newest)
                return
            body = self.vault.state_at_sync(mark.pushed_seq)
            if body is None:
                return  # a local write arrived meanwhile; a later round snapshots
            published = snapshots.publish(self.remote, self.envelope, mark.head,
                                          self._head_hash(), body)
        except (RollbackDetected, IntegrityError):
            raise
        except Exception as exc:
            self._snapshot_retry_at = time.monotonic() + _SNAPSHOT_RETRY_S
            self.status.errors = [*self.status.errors[-9:],
                                  f"snapshot at version {mark.head} not published: {exc}"]
            log.warning("snapshot at version %d not published (%s); next try in %.0f s",
                        mark.head, exc, _SNAPSHOT_RETRY_S)
            return
        self._snapshot_known(published.number)
        log.info("published the snapshot at version %d (%d bytes in %s)", published.number,
                 len(body), published.name)

    def _snapshot_known(self, number: int) -> None:
        self._save(self.high_water.snapshot_at(number))
        self.status.snapshot = number
