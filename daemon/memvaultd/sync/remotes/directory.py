"""`file:///path`: a directory as a remote (a NAS mount, a synced folder, tests).

    <root>/<vault_id>/objects/<name, "/" written as "+">
    <root>/<vault_id>/versions/<number:020d>
    <root>/<vault_id>/tmp/<random>.tmp       being written; never read

Names are flat files ("+" is outside the name alphabet, so the mapping is
one-to-one): `a` and `a/b` can both exist, as on S3. A write goes to `tmp/`,
is fsynced, then hard-linked to its final name: `link(2)` fails with EEXIST
if the name exists, which is put-if-absent atomically, and a reader never sees
a partial file. The directory is fsynced after the link. The file system must
support hard links (every local POSIX one does; some SMB mounts do not).

`watch_head` polls every 0.5 s: a listing of `versions/` costs ~1 ms per
1,000 versions, and half a second is well inside the sync worker's 1 s goal.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

from memvault_base.durable import sync_dir
from memvault_base.errors import NotFound, Unavailable
from memvaultd.sync.remotes.blobs import BlobRemote

POLL_INTERVAL = 0.5
_SLASH = "+"
_KINDS = ("objects", "versions", "tmp")
_STALE_TMP_S = 3600.0


class DirectoryBlobs:
    def __init__(self, root: Path, vault_id: str) -> None:
        self.base = root / vault_id
        try:
            for kind in _KINDS:
                (self.base / kind).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Unavailable(f"cannot use {root} as a remote: {exc}") from exc
        sync_dir(self.base)
        sync_dir(root)
        # Left by a writer that crashed. Only old ones: another device may be
        # writing into tmp/ right now, and no write takes an hour.
        cutoff = time.time() - _STALE_TMP_S
        for stale in (self.base / "tmp").iterdir():
            with contextlib.suppress(FileNotFoundError):
                if stale.stat().st_mtime < cutoff:
                    stale.unlink()

    def _path(self, key: str) -> Path:
        kind, _, rest = key.partition("/")
        return self.base / kind / rest.replace("/", _SLASH)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        final = self._path(key)
        tmp = self.base / "tmp" / f"{secrets.token_hex(8)}.tmp"
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
            raise NotFound(f"no object {key!r} in {self.base}") from None

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        kind = prefix.partition("/")[0]
        keys = sorted(f"{kind}/{entry.replace(_SLASH, '/')}"
                      for entry in os.listdir(self.base / kind))
        found = [key for key in keys if key.startswith(prefix) and key > start_after]
        return found if limit is None else found[:limit]

    def delete(self, key: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            sync_dir(path.parent)

    def close(self) -> None:
        pass


def open_directory(url: str, root: Path, vault_id: str) -> BlobRemote:
    return BlobRemote(url, DirectoryBlobs(root, vault_id), POLL_INTERVAL)

