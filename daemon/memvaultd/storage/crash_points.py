"""Named steps where a test may kill the daemon, or hold it for a moment.

    MEMVAULT_CRASH_AT=STEP   the process sends itself SIGKILL on reaching STEP
    MEMVAULT_STALL_AT=STEP   the thread reaching STEP sleeps `STALL_S` there

With neither variable set (as users run it) a point does nothing but read
the environment. The steps, where they are reached:

    first-start:key      `Vault.open`, a new vault's key stored, nothing else
    join:key             `join`, the joined vault's key stored in the keyring
                         (a key file's bytes are only in memory yet)
    join:log-staged      its log written in `join.staging/`
    join:staged          every file of it staged and fsynced, no journal yet
    join:journaled       the journal written (the commit point), nothing moved
    join:moving          the old log moved out and the new one in, the rest not
    join:moved           every file in place, the old ones not yet removed
    join:done            the join complete on disk, sync not started
    leave:stopped        `sync leave`: the worker stopped, `sync.state` still there
    leave:done           `sync leave`: `sync.state` removed
    move:stopped         `sync move`: the vault set up on the new remote, the
                         old remote's worker stopped, `sync.state` not replaced
    rotate:granted       `recovery-key rotate` / `devices revoke`: the epoch's
                         grant on the remote and taken here, the recovery
                         key kept in `sync.rotation`, no answer yet
    rekey:key            a rekey of the local files (`vault/rekey.py`): the
                         new key stored beside the old, nothing else
    rekey:staged         every file resealed in `rekey.staging/`, no journal yet
    rekey:journaled      the journal written (the commit point), nothing moved
    rekey:moving         the log moved in, the rest not
    rekey:moved          every file in place, the keyring entry copied, the
                         old files not yet removed
    rekey:done           the rekey complete on disk and in memory
    snapshot:captured    a background snapshot has cut the state and let the
                         write lock go, and has not written it yet

tests/test_join_crash.py, tests/test_leave_crash.py and
tests/test_local_rekey.py kill the daemon at each step and start it again.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["CRASH_ENV", "STALL_ENV", "STALL_S", "reached"]

CRASH_ENV = "MEMVAULT_CRASH_AT"
STALL_ENV = "MEMVAULT_STALL_AT"
# Long enough for a `join` of a small vault to run inside the window on a
# loaded 2-core machine (it takes ~0.3 s there), short enough for a test.
STALL_S = 3.0


def reached(step: str) -> None:
    """Mark `step`: a crash or a stall there if a test asked for one."""
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(STALL_ENV) == step:
        time.sleep(STALL_S)
