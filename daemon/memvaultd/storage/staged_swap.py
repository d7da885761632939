"""Files of a data directory swapped for staged ones in one step that a
crash cannot split: what `join` (`join_journal.py`) and a rekey of the local
files (`rekey_journal.py`) share.

    data/<kind>.staging/   the new files, complete and fsynced
    data/<kind>.journal    {"format": 1, ..., "staged": [NAME, ...]}
    data/<kind>.replaced/  the current files, while they are moved out

The new files are written whole into `<kind>.staging/` (every file and
directory fsynced), then the journal (a temporary file, fsync, rename,
directory fsync): the journal's rename is the commit point. Then, for each
name in order, the current file moves into `<kind>.replaced/` and the staged
one into its place; last, `<kind>.replaced/`, `<kind>.staging/` and the
journal are removed.

At start, before anything else is read (`recover`): a journal means the swap
was committed, so it is rolled forward (each move redone or skipped as the
files show: a staged name still in `<kind>.staging/` has not moved in yet);
a `<kind>.staging/` without a journal means it was not, so it is removed and
the current files, untouched, open as they were.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from memvault_base.durable import replace_file, sync_dir
from memvault_base.errors import IntegrityError
from memvaultd.storage.crash_points import reached

log = logging.getLogger("memvaultd.storage")

FORMAT = 1


class StagedSwap:
    """One kind of swap. `names` in the order they move; `required`, the
    name without which nothing is committed; `replace_unstaged`: whether a
    current file the swap did not stage is moved out too (a join replaces a
    whole vault) or stays (a rekey reseals only what there is)."""

    kind: str
    names: tuple[str, ...]
    required: str
    replace_unstaged: bool

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.staging = data_dir / f"{self.kind}.staging"
        self.path = data_dir / f"{self.kind}.journal"
        self.replaced = data_dir / f"{self.kind}.replaced"

    def begin(self) -> Path:
        """An empty staging directory, whatever an earlier swap left there."""
        if self.path.exists():
            raise IntegrityError(f"{self.path}: a committed {self.kind} is not finished; "
                                 "restart the daemon to finish it")
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(mode=0o700)
        return self.staging

    def abandon(self) -> None:
        """Drop what was staged: the swap failed before its commit."""
        if not self.path.exists():
            shutil.rmtree(self.staging, ignore_errors=True)
            self._dropped()

    def _commit(self, fields: dict[str, Any]) -> None:
        """The commit point: the staged files are whole; from here on the
        swap is finished, now or at the next start."""
        staged = [name for name in self.names if (self.staging / name).exists()]
        if self.required not in staged:
            raise IntegrityError(f"{self.staging}: no {self.required} staged; the "
                                 f"{self.kind} is not made")
        sync_dir(self.staging)
        sync_dir(self.data_dir)
        doc = {"format": FORMAT, **fields, "staged": staged}
        replace_file(self.path, json.dumps(doc).encode())

    def roll_forward(self) -> None:
        """Put the staged files in place of the current ones; idempotent."""
        staged = self._read()
        self.replaced.mkdir(mode=0o700, exist_ok=True)
        for name in self.names:
            new, current = self.staging / name, self.data_dir / name
            if name in staged and not new.exists():
                continue  # moved in already
            if current.exists() and (name in staged or self.replace_unstaged):
                shutil.rmtree(self.replaced / name, ignore_errors=True)
                current.rename(self.replaced / name)
            if name in staged:
                new.rename(current)
            if name == self.names[0]:
                reached(f"{self.kind}:moving")
        sync_dir(self.data_dir)
        self._moved()
        reached(f"{self.kind}:moved")
        shutil.rmtree(self.replaced)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.path.unlink()
        sync_dir(self.data_dir)
        self._dropped()

    def recover(self) -> str:
        """At start: finish a committed swap, drop an uncommitted one.
        Returns what was done ("" for nothing), for the log."""
        if self.path.exists():
            self.roll_forward()
            log.warning("finished a %s that was cut short (journal %s)", self.kind, self.path)
            return "rolled forward"
        if self.staging.exists():
            shutil.rmtree(self.staging)
            sync_dir(self.data_dir)
            self._dropped()
            log.warning("dropped a %s that was cut short before its commit; %s", self.kind,
                        self.rolled_back)
            return "rolled back"
        return ""

    rolled_back = "the files are as they were"

    def _moved(self) -> None:
        """After the files moved in, before the journal goes."""

    def _dropped(self) -> None:
        """After the staging directory is gone, committed or not."""

    def _check(self, doc: dict[str, Any]) -> str | None:
        """What is wrong with the journal's own fields, if anything."""
        return None

    def _read(self) -> set[str]:
        try:
            doc = json.loads(self.path.read_text())
            staged = set(doc["staged"])
            wrong = self._check(doc)
            if doc["format"] != FORMAT or not staged <= set(self.names) or wrong:
                raise ValueError(f"format {doc['format']!r}, names {sorted(staged)}"
                                 + (f", {wrong}" if wrong else ""))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(f"{self.path}: unreadable ({exc}); the {self.kind} it "
                                 f"journals cannot be finished: see docs/format.md") from exc
        return staged
