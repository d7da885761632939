"""Moving the vault to a fresh chain (`moves.py`), and following a move.

A rollback or fork (RollbackDetected) or a signed object that fails to open
(IntegrityError) stops sync: nothing of it is applied, and `sync status`
names the version. `repair` (`memvault sync repair`, once the user
confirms) moves the vault to a fresh chain; a stopped worker looks for
such a move about once a minute and follows it, as every worker does at
its first round, at `sync now` and once an hour (`RECHECK_S`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from memvault_base.errors import InvalidArgument, RollbackDetected
from memvaultd.sync import mark as chain_mark
from memvaultd.sync import moves
from memvaultd.sync.high_water import HighWater
from memvaultd.sync.mark import ChainMark
from memvaultd.sync.remotes.base import Remote
from memvaultd.sync.status import SyncStatus
from memvaultd.sync.vault_side import PushedVault

log = logging.getLogger("memvaultd.sync")


class Repair:
    """`base` is the vault's own scope, where move notices live (the same
    remote as the chain's on chain 1); `open_scope` opens another scope of
    it; `forget` drops what the worker's parts knew of the chain left."""

    def __init__(self, mark: ChainMark, vault: PushedVault, base: Remote,
                 open_scope: Callable[[str], Remote] | None,
                 forget: Callable[[], None]) -> None:
        self.mark, self.vault, self.base = mark, vault, base
        self.open_scope, self.forget = open_scope, forget
        # When (monotonic) `moves/` was last looked at; None: not yet.
        self._seen_at: float | None = None

    def repair(self) -> None:
        """Move the vault to a fresh chain on the same remote (the user has
        confirmed): announce it under the vault's id, then follow the newest
        announced chain (this one, unless another device's repair raced it)."""
        status, envelope = self.mark.status, self.mark.envelope
        if status.state != "stopped" and not status.withheld_head:
            raise InvalidArgument(f"sync is {status.state}, not stopped: there is "
                                  "nothing to repair")
        vault_id = envelope.vault_id.hex()
        newest = moves.newest(self.base, envelope, vault_id)
        chain = max(self.mark.high_water.chain, newest.chain if newest else 0) + 1
        moves.announce(self.base, envelope, moves.new_move(vault_id, chain))
        if not self.follow(quiet=False):
            raise RollbackDetected("the remote does not show the move just written to it")

    def due(self) -> bool:
        return self._seen_at is None or time.monotonic() - self._seen_at >= chain_mark.RECHECK_S

    def follow(self, quiet: bool) -> bool:
        """Move to the newest chain announced, if it is newer than this
        device's; whether it moved. `quiet`: a remote that cannot be asked
        is no error (a stopped worker stays stopped)."""
        mark = self.mark
        try:
            move = moves.newest(self.base, mark.envelope, mark.envelope.vault_id.hex())
        except Exception as exc:
            if not quiet:
                raise
            log.debug("no look at moves/ (%s)", exc)
            return False
        self._seen_at = time.monotonic()
        if move is None or move.chain <= mark.high_water.chain or self.open_scope is None:
            return False
        log.warning("the vault moved to chain %d (a repair); putting the whole vault there",
                    move.chain)
        remote = self.open_scope(move.scope)
        before = self.vault.repush()
        if mark.remote is not self.base:
            mark.remote.close()
        mark.remote = remote
        old = mark.high_water
        mark.save(HighWater(old.remote, old.token, pushed_seq=before, chain=move.chain,
                            scope=move.scope, seen=old.seen, witness=old.witness,
                            witness_token=old.witness_token))
        mark.forget()
        self.forget()
        mark.status = SyncStatus(mark.status.remote, state="syncing", pushed_seq=before,
                                 chain=move.chain, errors=mark.status.errors,
                                 witness=mark.status.witness)
        return True
