"""A put-if-absent store on a local directory: memvault-server's default
store (`DATA/store/`) and the daemon's `file://` remotes.

    <root>/<vault_id>/owner
    <root>/<vault_id>/objects/<name, "/" written as "+">
    <root>/<vault_id>/versions/<number:020d>
    <tmp>/<random>.tmp                   being written; never read

A write goes to `tmp` (mode 0600), is fsynced, then hard-linked to its final
name. `link(2)` fails with EEXIST when the name exists, so put-if-absent is
one atomic system call and a reader never sees a partial file; the directory
holding the new name is fsynced before the write is acknowledged. Names are
flat files ("+" is outside the name alphabet, so the mapping is one-to-one):
`a` and `a/b` can both exist, as on S3. The file system must support hard
links (every local POSIX one does; some SMB mounts do not).

Where `tmp` is, and when a file left in it is stale, is its owner's policy:
memvault-server uses `<root>/.tmp/` and clears it on start (one server per
directory), a `file://` remote uses `<root>/<vault_id>/tmp/` and clears only
files an hour old (other devices may be writing there). `tmp` must be inside
`root`, on its file system.

Every file this store touches is touched in this module.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from memvault_base.durable import sync_dir
from memvault_base.errors import NotFound

_SLASH = "+"


class DirectoryStore:
    """`Store` (store.py) over `root`; keys as `names.py` lays them out."""

    def __init__(self, root: Path, *, tmp: Path, shared: bool, stale_after: float) -> None:
        """Opens `root`, creating it and `tmp` as needed, and deletes what a
        crashed writer left in `tmp`: every file if `stale_after` is 0, else
        those last modified over `stale_after` seconds ago. `OSError` if the
        directories cannot be made."""
        self.root = root
        self.tmp = tmp
        self.shared = shared
        self._make_dir(tmp, mode=0o700)
        cutoff = time.time() - stale_after
        for stale in tmp.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if stale_after <= 0 or stale.stat().st_mtime < cutoff:
                    stale.unlink()

    def _path(self, key: str) -> Path:
        vault, _, rest = key.partition("/")
        kind, slash, name = rest.partition("/")
        if not slash:
            return self.root / vault / kind
        return self.root / vault / kind / name.replace("/", _SLASH)

    def _make_dir(self, path: Path, mode: int = 0o777) -> None:
        """`path` and its missing parents, each new entry fsynced into its
        parent up to `root`."""
        path.mkdir(parents=True, exist_ok=True, mode=mode)
        for directory in (path.parent, *path.parent.parents):
            sync_dir(directory)
            if directory == self.root:
                return

    def put_if_absent(self, key: str, data: bytes) -> bool:
        final = self._path(key)
        if not final.parent.is_dir():
            self._make_dir(final.parent)
        tmp = self.tmp / f"{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                return False
        finally:
            tmp.unlink(missing_ok=True)
        sync_dir(final.parent)
        return True

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no object {key!r}") from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        vault, _, rest = prefix.partition("/")
        kind, slash, _ = rest.partition("/")
        if not slash:
            raise ValueError(f"list needs a <vault>/<kind>/ prefix, got {prefix!r}")
        try:
            entries = os.listdir(self.root / vault / kind)
        except FileNotFoundError:
            return []
        keys = sorted(f"{vault}/{kind}/{entry.replace(_SLASH, '/')}" for entry in entries)
        found = [key for key in keys if key.startswith(prefix) and key > start_after]
        return found if limit is None else found[:limit]

    def inventory(self) -> Iterator[tuple[str, int]]:
        for vault in os.scandir(self.root):
            if not vault.is_dir(follow_symlinks=False) or Path(vault.path) == self.tmp:
                continue
            for kind in os.scandir(vault.path):
                if kind.is_file(follow_symlinks=False):
                    yield f"{vault.name}/{kind.name}", kind.stat(follow_symlinks=False).st_size
                elif kind.is_dir(follow_symlinks=False) and Path(kind.path) != self.tmp:
                    for entry in os.scandir(kind.path):
                        if entry.is_file(follow_symlinks=False):
                            yield (f"{vault.name}/{kind.name}/{entry.name.replace(_SLASH, '/')}",
                                   entry.stat(follow_symlinks=False).st_size)

    def delete(self, key: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            sync_dir(path.parent)

    def close(self) -> None:
        pass
