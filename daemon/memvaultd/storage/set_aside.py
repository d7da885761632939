"""Files of a vault that are no longer used but must not be deleted.

A snapshot the daemon started without because it does not authenticate, and
the log and snapshots `memvault check --repair` replaced, are moved (renamed:
the same file system, so no byte is copied or lost) under the data
directory::

    damaged/<UTC time>/<the file's path under the data directory>
    damaged/<UTC time>/why.txt     one line per file: its path, then why

and nothing there is read or written again by memvault. They are the user's
to keep, look at or delete; `memvault check` lists the folders.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from memvault_base.durable import sync_dir

__all__ = ["DIR_NAME", "set_aside", "set_aside_folders"]

DIR_NAME = "damaged"


def set_aside(data_dir: Path, files: Sequence[tuple[Path, str]]) -> Path:
    """Move each (path, why) under a new `damaged/<time>/`, durably; returns that folder.

    Every path is a file or folder inside `data_dir`."""
    target = _new_folder(data_dir / DIR_NAME)
    parents = {target}
    lines = []
    for path, why in files:
        relative = path.relative_to(data_dir)
        destination = target / relative
        destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.rename(destination)
        parents |= {path.parent, destination.parent}
        lines.append(f"{relative}: {' '.join(why.split())}\n")
    fd = os.open(target / "why.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.writelines(lines)
        out.flush()
        os.fsync(out.fileno())
    for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        sync_dir(parent)
    sync_dir(target.parent)
    sync_dir(data_dir)
    return target


def set_aside_folders(data_dir: Path) -> list[Path]:
    """The folders files were set aside in, oldest first."""
    root = data_dir / DIR_NAME
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _new_folder(root: Path) -> Path:
    root.mkdir(mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for attempt in range(1, 1000):
        folder = root / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return folder
    raise FileExistsError(f"{root}: no free name for {stamp}")
