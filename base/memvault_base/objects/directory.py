"""The server's default store: a local directory.

    <root>/<vault_id>/owner
    <root>/<vault_id>/objects/<name, "/" written as "+">
    <root>/<vault_id>/versions/<number:020d>
    <root>/.tmp/<random>.tmp             being written; removed on start

A write goes to `.tmp/` (mode 0600), is fsynced, then hard-linked to its
final name. `link(2)` fails with EEXIST when the name exists, so put-if-absent
is one atomic system call and a reader never sees a partial file; the
directory holding the new name is fsynced before the write is acknowledged.
Names are flat files ("+" is outside the name alphabet): `a` and `a/b` can
both exist, as on S3. One server process per directory: the chain's head is
cached in memory (`shared = False`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from memvault_base.durable import sync_dir
from memvault_base.errors import NotFound

_SLASH = "+"


class DirStore:
    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / ".tmp"
        self.tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
        for stale in self.tmp.iterdir():  # a crash mid-write; only this process writes here
            stale.unlink(missing_ok=True)
        sync_dir(root)

    def _path(self, key: str) -> Path:
        vault, _, rest = key.partition("/")
        kind, slash, name = rest.partition("/")
        if not slash:
            return self.root / vault / kind
        return self.root / vault / kind / name.replace("/", _SLASH)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        final = self._path(key)
        if not final.parent.is_dir():
            final.parent.mkdir(parents=True, exist_ok=True)
            sync_dir(final.parent.parent)
            sync_dir(self.root)
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

    def delete(self, key: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            sync_dir(path.parent)

    def close(self) -> None:
        pass
