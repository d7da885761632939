"""The high-water mark and what a device knows of the chain behind it.

`ChainMark` holds the chain's remote, the mark (`high_water.py`, saved in
`sync.state` at every move) and the hashes of the versions this device
pulled or appended, and checks that what this device saw is still there:
Borg's replay defence (`check`), and the hash of any earlier version read
back and linked up to the head (`hash_at`). The worker's other parts
(`exchange.py`, `membership.py`, `repair.py`, `witnessing.py`,
`snapshot_publisher.py`) move the mark only through it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from memvault_base.errors import IntegrityError, InvalidArgument, RollbackDetected
from memvaultd.sync import signatures
from memvaultd.sync.devices import Registry
from memvaultd.sync.envelope import Envelope
from memvaultd.sync.high_water import HighWater, HighWaterFile
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.status import SyncStatus
from memvaultd.sync.vault_side import PushedVault

# How long version `head`, once known to be on the remote, is trusted to be
# still there before a round that is not `sync now` downloads it again.
# Downloaded every round, it cost up to 3 MiB (a bulk version) for every
# write, notice and 30 s tick: bench_sync's device received 130 KiB per new
# memory, against 229 B with this check (docs/benchmarks.md). A version this
# device appended (the remote
# acknowledged it) or pulled (downloaded and hashed) is known; a fork built
# on top of it cannot hide anyway, since the next pulled version carries its
# parent's hash in its associated data.
RECHECK_S = 3600.0
# Hashes of the versions this device pulled or appended, kept in memory so
# that checking another device's view at a recent version downloads
# nothing (`hash_at`): 4,096 x 32 bytes, about an hour of a busy vault.
_KEPT_HASHES = 4096


class ChainMark:
    """The mark of one worker on its chain's `remote` (which a move to a
    fresh chain replaces), saved to `water_file` at every move."""

    def __init__(self, vault: PushedVault, remote: Remote, water_file: HighWaterFile,
                 high_water: HighWater, envelope: Envelope, registry: Registry,
                 status: SyncStatus) -> None:
        self.vault, self.remote, self.water_file = vault, remote, water_file
        self.high_water, self.envelope, self.registry = high_water, envelope, registry
        self.status = status
        # When (time.monotonic) the mark was last known to match the remote:
        # checked in full, or moved to a version just pulled or appended.
        # See `check`.
        self.known_at: float | None = None
        self.hashes: dict[int, bytes] = {}  # number -> sha256, see `_KEPT_HASHES`

    def forget(self) -> None:
        """Another chain: nothing known of this one counts there."""
        self.known_at, self.hashes = None, {}

    def check(self, full: bool) -> int:
        """Borg's replay defence: what this device saw must still be there.
        Returns the remote's head.

        The chain's length is asked every round (one small call). Version
        `head` itself is downloaded and hashed when `full`, on the first
        round of the worker, and when it was last known to match over
        `RECHECK_S` ago; so a version replaced in place on an idle remote
        is reported at the next `sync now`, restart or within the hour.
        """
        head = self.remote.head()
        if self.high_water.head == 0:
            return head
        if head < self.high_water.head:
            raise RollbackDetected(f"the remote's chain ends at version {head}, but this "
                                   f"device has seen version {self.high_water.head}: rollback")
        if (not full and self.known_at is not None
                and time.monotonic() - self.known_at < RECHECK_S):
            return head
        seen = self.remote.versions_after(self.high_water.head - 1, limit=1)
        if not seen or hashlib.sha256(seen[0][1]).hexdigest() != self.high_water.head_hash:
            raise RollbackDetected(f"version {self.high_water.head} on the remote is not the one "
                                   "this device saw: the history was forked or replaced")
        self.known_at = time.monotonic()
        return head

    def advance(self, number: int, digest: bytes, pushed_seq: int | None = None,
                ops: int = 0, writers: dict[str, float] | None = None,
                signed: bool = False) -> None:
        """Move the mark to version `number`, which this device has just
        pulled or had acknowledged (holding `ops` operations, of `writers`),
        so it is known to be on the remote."""
        if number != self.high_water.head:
            self.known_at = time.monotonic()
        self.hashes[number] = digest
        if len(self.hashes) > _KEPT_HASHES:
            del self.hashes[next(iter(self.hashes))]
        self.save(self.high_water.advanced(number, digest, pushed_seq, ops, writers, signed))

    def save(self, mark: HighWater) -> None:
        self.high_water = mark
        self.water_file.save(mark)
        self.vault.keep_log_from(self.high_water.pushed_seq)
        self.status.head, self.status.pushed_seq = self.high_water.head, self.high_water.pushed_seq

    def head_hash(self) -> bytes:
        return bytes.fromhex(self.high_water.head_hash) if self.high_water.head_hash else b""

    def view(self) -> tuple[int, str, int, bytes]:
        """What this device has seen: (chain, scope, head, sha256 of version head)."""
        mark = self.high_water
        return mark.chain, mark.scope, mark.head, self.head_hash()

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
        mark = self.high_water
        if number > mark.head:
            raise InvalidArgument(f"version {number} is past this device's head {mark.head}")
        if number == mark.head:
            return self.head_hash()
        if number == 0:
            return b""
        if number in self.hashes:
            return self.hashes[number]
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
        if previous != self.head_hash():
            raise RollbackDetected(f"version {mark.head} on the remote is not the one this "
                                   "device saw: the history was forked or replaced")
        return first

    def _link(self, number: int, blob: bytes, parent: bytes) -> None:
        """Version `number` opens on `parent`, else RollbackDetected: it
        opened on this device's chain when pulled, so now it is replaced. A
        version no registered device signed was passed over when pulled: its
        bytes are bound by the next version's parent, or by the head's hash."""
        try:
            signatures.open_version(self.envelope, blob, number, parent,
                                    self.signer_of(number), unsigned_ok=True)
        except signatures.Refused:
            return
        except IntegrityError as exc:
            raise RollbackDetected(f"version {number} or {number - 1} on the remote is not the "
                                   "one this device saw: the history was forked or replaced"
                                   ) from exc

    def signer_of(self, number: int) -> Callable[[str], bytes | None]:
        """The signing key of a registered device, for version `number`:
        None for a device revoked before it (`epochs.Epoch.refuses`)."""
        revoked = self.high_water.revoked

        def key_of(device: str) -> bytes | None:
            if device in revoked and number > revoked[device]:
                return None
            return self.registry.key_of(device)
        return key_of
