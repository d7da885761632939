"""`file:///path`: a directory as a remote (a NAS mount, a synced folder, tests).

    <root>/<vault_id>/objects/<name, "/" written as "+">
    <root>/<vault_id>/versions/<number:020d>
    <root>/<vault_id>/tmp/<random>.tmp       being written; never read

The directory store memvault-server keeps its vaults in
(`memvault_base.objects.directory`: write to `tmp/`, fsync, `link(2)` to the
final name, fsync the directory), with this remote's own temporaries: each
vault's `tmp/`, where a file is stale only after an hour, because other
devices may be writing there right now and no write takes an hour.

`watch_head` polls every 0.5 s: a listing of `versions/` costs ~1 ms per
1,000 versions, and half a second is well inside the sync worker's 1 s goal.
"""

from __future__ import annotations

from pathlib import Path

from memvault_base.errors import Unavailable
from memvault_base.objects.directory import DirectoryStore
from memvaultd.sync.remotes.blobs import BlobRemote

POLL_INTERVAL = 0.5
_STALE_TMP_S = 3600.0


def open_directory(url: str, root: Path, vault_id: str) -> BlobRemote:
    try:
        store = DirectoryStore(root, tmp=root / vault_id / "tmp", shared=True,
                               stale_after=_STALE_TMP_S)
    except OSError as exc:
        raise Unavailable(f"cannot use {root} as a remote: {exc}") from exc
    return BlobRemote(url, store, vault_id, POLL_INTERVAL)
