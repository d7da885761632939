"""Making a rename or a new file durable: fsync of the directory holding it.

Shared by the daemon and the sync server (both write files by write, fsync,
rename), so it lives in the base package both depend on.

A file written, fsynced and renamed into place survives a crash only once
its directory entry does, which takes an fsync of the directory itself
(POSIX leaves it to the application; ext4 and XFS both need it).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["sync_dir"]


def sync_dir(path: Path) -> None:
    """fsync the directory `path`, so entries created or renamed in it last."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
