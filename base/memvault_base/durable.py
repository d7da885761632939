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

__all__ = ["replace_file", "sync_dir", "write_all"]


def sync_dir(path: Path) -> None:
    """fsync the directory `path`, so entries created or renamed in it last."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: Path, blob: bytes) -> None:
    """Put `blob` at `path` so that a crash leaves the old file or the whole
    new one: a 0600 temporary file beside it (`.NAME.tmp`, overwritten by the
    next attempt if a crash leaves it), fsync, rename, fsync of the directory."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode is masked by umask and ignored for an old file
        write_all(fd, blob)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    sync_dir(path.parent)  # the rename is durable only once the directory entry is


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (one `os.write` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
