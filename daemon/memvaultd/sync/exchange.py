"""Pulling the versions the remote has, pushing the operations it lacks.

    pull:  check the high-water mark (the chain is no shorter than the
           version this device saw last, and that version is still there,
           unchanged: see `ChainMark.check` for when it is downloaded again),
           then open each newer version with (number, parent hash) in its
           associated data, apply its operations, advance the mark.
    push:  the local operations after `pushed_seq`, a version of at most
           1,000 operations (~2 MB) and 16 MiB sealed at a time (the largest
           object a remote takes: `version_body.next_version`), appended with
           the current head as parent; a lost race means pull, merge, retry.
           A version whose append failed without an answer may have landed
           anyway: the next pull that meets it counts it as pushed, so it is
           not sent again under another number.

Every version is signed by the device that pushed it (`signatures.py`); one
that no device of the registry (`devices.py`) signed, such as one put by
someone holding only a server token, is refused: `sync status` lists it,
nothing of it is applied, and the chain goes on past it.
When the local log no longer holds every operation the remote lacks (sync
was stopped or offline past the backlog limit, `vault/snapshots.py`), the
next push puts the whole vault again (`PushedVault.repush`).
A remote that claims a longer chain than it hands over (`ChainWithheld`)
is retried with back-off like one that is down.
"""

from __future__ import annotations

import hashlib
import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence

from memvault_base.errors import IntegrityError, InvalidArgument, RollbackDetected, Unavailable
from memvaultd.model.operations import ACCESS, Operation
from memvaultd.sync import signatures
from memvaultd.sync.envelope import VERSION, UnknownEpoch, chain_context
from memvaultd.sync.mark import ChainMark
from memvaultd.sync.vault_side import PushedVault
from memvaultd.sync.version_body import next_version, unpack_ops, writers

log = logging.getLogger("memvaultd.sync")

Unpushed = tuple[list[tuple[int, Operation]], int]


class ChainWithheld(Unavailable):
    """The remote claims versions it does not hand over."""

    def __init__(self, claimed: int, head: int) -> None:
        super().__init__(f"the remote claims its chain reaches version {claimed} but withholds "
                         f"every version after {head}; retrying with back-off")
        self.claimed = claimed


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


class VersionExchange:
    """The pull and the push of one worker, on `mark`'s chain. `catch_up`
    moves to the newest key epoch (`Membership.catch_up`), for a version
    sealed under an epoch started since the round caught up."""

    def __init__(self, mark: ChainMark, vault: PushedVault, catch_up: Callable[[], None],
                 marks_every_s: float) -> None:
        self.mark, self.vault, self.catch_up = mark, vault, catch_up
        self.marks_every_s = marks_every_s  # see `marks_wait`
        # (number, sha256, last local seq) of the version being appended
        # until the remote answers: see `_own_version`.
        self._unanswered: tuple[int, bytes, int] | None = None

    def forget(self) -> None:
        """Another chain: no append there is waiting for its answer."""
        self._unanswered = None

    def pending(self, unpushed: Unpushed | None) -> int:
        """What waits to be pushed, for `sync status`: access marks that
        wait for the schedule (`marks_wait`) are not counted."""
        if not unpushed or marks_wait(unpushed[0], time.time(), self.marks_every_s):
            return 0
        return len(unpushed[0])

    def waits(self, unpushed: Unpushed) -> bool:
        return marks_wait(unpushed[0], time.time(), self.marks_every_s)

    def pull(self, full_check: bool = False) -> int:
        """Apply the versions the remote has beyond the mark; returns how many.

        The remote's head is read first: an honest remote then hands over at
        least every version up to it. One that does not is `ChainWithheld`,
        never a loop: a push refused by such a remote (its chain is "longer")
        pulled nothing and retried at once, under the worker's lock: 1,123
        times in 3 s through memvault-server (its rate limit answered the rest).
        """
        mark = self.mark
        claimed = mark.check(full_check)
        pulled = 0
        while True:
            batch = mark.remote.versions_after(mark.high_water.head, limit=50)
            for number, blob in batch:
                if number != mark.high_water.head + 1:
                    raise RollbackDetected(f"version {mark.high_water.head + 1} is missing from "
                                           f"the remote (it offered {number})")
                try:
                    ops, signed = self._open_version(number, blob)
                except signatures.Refused as exc:
                    self._refuse(number, blob, str(exc))
                    continue
                except IntegrityError:
                    # A version `head` replaced since it was last checked
                    # reads as a fork, not as a damaged object.
                    mark.check(full=True)
                    mark.status.bad_version = number
                    raise
                self.vault.apply_remote(ops)
                digest = hashlib.sha256(blob).digest()
                mark.advance(number, digest, pushed_seq=self._own_version(number, digest),
                             ops=len(ops), writers=writers(ops), signed=signed)
                pulled += 1
            if len(batch) < 50:
                break
        if claimed > mark.high_water.head:
            raise ChainWithheld(claimed, mark.high_water.head)
        mark.status.last_pull = time.time()
        return pulled

    def push(self, pending: list[tuple[int, Operation]], scanned_to: int) -> int:
        """Append `pending` (this device's operations up to log seq
        `scanned_to`, read by `Vault.local_ops_after`) as versions."""
        mark, registry, envelope = self.mark, self.mark.registry, self.mark.envelope
        pushed = 0
        # `pending` is in log order: what is left of it is what follows the
        # mark's `pushed_seq`, which a pull (of versions of this device's
        # own) may move too. Found by bisection: filtering the whole list
        # again after each version of 1,000 is quadratic, and for the 1M
        # puts of `init` on a 1M vault those 1,000 filters alone took 88-94 s
        # of the interpreter (0.9 s at 100k), every write waiting its turn.
        seqs = [seq for seq, _ in pending]
        start = bisect_right(seqs, mark.high_water.pushed_seq)
        while start < len(pending):
            end, body = next_version(pending, start)
            chunk = pending[start:end]
            number, parent = mark.high_water.head + 1, mark.head_hash()
            blob = signatures.sign(
                registry.keys, registry.device, envelope.vault_id, number,
                envelope.seal(VERSION, body, chain_context(number, parent),
                              reserve=signatures.TRAILER))
            digest = hashlib.sha256(blob).digest()
            self._unanswered = (number, digest, chunk[-1][0])
            try:
                appended = mark.remote.append_version(number, parent, blob)
            except InvalidArgument:
                # memvault-server refuses a parent that is not its version
                # `head`: say whether that version was replaced.
                mark.check(full=True)
                raise
            if appended:
                self._unanswered = None
                mark.advance(number, digest, pushed_seq=chunk[-1][0], ops=len(chunk),
                             signed=True)
                pushed += len(chunk)
                mark.status.last_push = time.time()
            elif not self.pull() and mark.remote.head() <= mark.high_water.head:
                # Refused, yet nothing newer to merge: the remote's version
                # `head` is not the one this device built on.
                raise RollbackDetected(f"the remote refused version {number} on top of "
                                       f"version {mark.high_water.head}, and offers nothing newer:"
                                       " its history was forked or replaced")
            start = bisect_right(seqs, mark.high_water.pushed_seq)
        if scanned_to > mark.high_water.pushed_seq:
            # Everything of this device up to `scanned_to` is on the remote;
            # the pulled records in between need not be read again.
            mark.advance(mark.high_water.head, mark.head_hash(), pushed_seq=scanned_to)
        return pushed

    def repush(self) -> Unpushed:
        """The log no longer holds every operation the remote lacks: log the
        whole vault again and push from there."""
        before = self.vault.repush()
        log.warning("the log lost operations the remote lacks (sync backlog); re-putting the "
                    "whole vault")
        self.mark.advance(self.mark.high_water.head, self.mark.head_hash(), pushed_seq=before)
        unpushed = self.vault.local_ops_after(before)
        if unpushed is None:
            raise IntegrityError("log: the records just written for the remote are gone")
        self.mark.status.repush = False
        return unpushed

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
        mark = self.mark
        try:
            body, signed = signatures.open_version(
                mark.envelope, blob, number, mark.head_hash(), mark.signer_of(number),
                unsigned_ok=not mark.high_water.signed)
        except UnknownEpoch:
            # Sealed under an epoch started since this round caught up.
            self.catch_up()
            body, signed = signatures.open_version(
                mark.envelope, blob, number, mark.head_hash(), mark.signer_of(number),
                unsigned_ok=not mark.high_water.signed)
        return unpack_ops(body, f"version {number}"), signed

    def _refuse(self, number: int, blob: bytes, why: str) -> None:
        """Pass version `number` over: nothing of it is applied, and the
        next version links to it, as on every device that refuses it."""
        log.warning("version %d refused: %s; sync goes on past it", number, why)
        self.mark.status.refused = [*self.mark.status.refused[-9:], (number, why)]
        digest = hashlib.sha256(blob).digest()
        self.mark.advance(number, digest, pushed_seq=self._own_version(number, digest))
