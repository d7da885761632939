"""The join journal: `join` swaps a data directory's vault for another in one
step that a crash cannot split.

    data/join.staging/    the joined vault's files, complete and fsynced:
                          log/ snapshots/ vault.json sync.state [vault.key]
    data/join.journal     {"format": 1, "vault_id": NEW_HEX, "replaces": OLD_HEX,
                           "staged": [NAME, ...]}
    data/join.replaced/   the current vault's files, while they are moved out

A join writes `join.staging/` whole (every file fsynced, every directory
fsynced), then the journal (a temporary file, fsync, rename, directory
fsync): the journal's rename is the commit point. Then, for each of `NAMES`
in order, the current file moves into `join.replaced/` and the staged one
into its place; last, `join.replaced/` and `join.staging/` are removed and
the journal with them.

At start, before anything else is read (`recover`): a journal means the
join was committed, so it is rolled forward (each move is redone or skipped
as the files show: a staged name still in `join.staging/` has not moved in
yet); a `join.staging/` without a journal means it was not, so it is
removed and the current vault, untouched, opens as it was.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from memvault_base.durable import replace_file, sync_dir
from memvault_base.errors import IntegrityError
from memvaultd.storage.crash_points import reached

__all__ = ["JOURNAL", "NAMES", "STAGING", "JoinJournal"]

log = logging.getLogger("memvaultd.storage")

STAGING = "join.staging"
JOURNAL = "join.journal"
REPLACED = "join.replaced"
FORMAT = 1
# Everything that makes a data directory one vault. vault.json, which names
# the vault, moves last.
NAMES = ("log", "snapshots", "sync.state", "vault.key", "vault.json")


class JoinJournal:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.staging = data_dir / STAGING
        self.path = data_dir / JOURNAL

    def begin(self) -> Path:
        """An empty `join.staging/`, whatever an earlier join left there."""
        if self.path.exists():
            raise IntegrityError(f"{self.path}: a committed join is not finished; restart "
                                 "the daemon to finish it")
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(mode=0o700)
        return self.staging

    def abandon(self) -> None:
        """Drop what was staged: the join failed before its commit."""
        if not self.path.exists():
            shutil.rmtree(self.staging, ignore_errors=True)

    def commit(self, vault_id: str, replaces: str) -> None:
        """The commit point: the staged files are whole; from here on the
        join is finished, now or at the next start."""
        staged = [name for name in NAMES if (self.staging / name).exists()]
        if "vault.json" not in staged:
            raise IntegrityError(f"{self.staging}: no vault.json staged; the join is not made")
        sync_dir(self.staging)
        sync_dir(self.data_dir)
        doc = {"format": FORMAT, "vault_id": vault_id, "replaces": replaces, "staged": staged}
        replace_file(self.path, json.dumps(doc).encode())

    def roll_forward(self) -> None:
        """Put the staged files in place of the current ones; idempotent."""
        staged = self._read()
        replaced = self.data_dir / REPLACED
        replaced.mkdir(mode=0o700, exist_ok=True)
        for name in NAMES:
            new, current = self.staging / name, self.data_dir / name
            if name in staged and not new.exists():
                continue  # moved in already
            if current.exists():
                current.rename(replaced / name)
            if name in staged:
                new.rename(current)
            if name == NAMES[0]:
                reached("join:moving")
        sync_dir(self.data_dir)
        reached("join:moved")
        shutil.rmtree(replaced)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.path.unlink()
        sync_dir(self.data_dir)

    def recover(self) -> str:
        """At start: finish a committed join, drop an uncommitted one.
        Returns what was done ("" for nothing), for the log."""
        if self.path.exists():
            self.roll_forward()
            log.warning("finished a join that was cut short (journal %s)", self.path)
            return "rolled forward"
        if self.staging.exists():
            shutil.rmtree(self.staging)
            sync_dir(self.data_dir)
            log.warning("dropped a join that was cut short before its commit; "
                        "this device's vault is as it was")
            return "rolled back"
        return ""

    def _read(self) -> set[str]:
        try:
            doc = json.loads(self.path.read_text())
            staged = set(doc["staged"])
            if doc["format"] != FORMAT or not staged <= set(NAMES):
                raise ValueError(f"format {doc['format']!r}, names {sorted(staged)}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(f"{self.path}: unreadable ({exc}); the join it journals "
                                 f"cannot be finished: see docs/format.md") from exc
        return staged
