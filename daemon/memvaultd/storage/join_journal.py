"""The join journal: `join` swaps a data directory's vault for another in one
step that a crash cannot split.

    data/join.staging/    the joined vault's files, complete and fsynced:
                          log/ snapshots/ vault.json sync.state [vault.key]
    data/join.journal     {"format": 1, "vault_id": NEW_HEX, "replaces": OLD_HEX,
                           "staged": [NAME, ...]}
    data/join.replaced/   the current vault's files, while they are moved out

The steps, the commit point and the recovery at start are
`staged_swap.py`'s. Every one of `NAMES` the current vault has moves out,
staged or not: a joined vault whose key is in the keyring has no
`vault.key`, and the current one's must not stay.
"""

from __future__ import annotations

from memvaultd.storage.staged_swap import StagedSwap

__all__ = ["JOURNAL", "NAMES", "STAGING", "JoinJournal"]

STAGING = "join.staging"
JOURNAL = "join.journal"
# Everything that makes a data directory one vault. vault.json, which names
# the vault, moves last.
NAMES = ("log", "snapshots", "sync.state", "vault.key", "vault.json")


class JoinJournal(StagedSwap):
    kind = "join"
    names = NAMES
    required = "vault.json"
    replace_unstaged = True
    rolled_back = "this device's vault is as it was"

    def commit(self, vault_id: str, replaces: str) -> None:
        """The commit point: the staged files are whole; from here on the
        join is finished, now or at the next start."""
        self._commit({"vault_id": vault_id, "replaces": replaces})
