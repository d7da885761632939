"""`file:///path`: a directory as a remote (a NAS mount, a synced folder, tests).

    <root>/<vault_id>/objects/<name, "/" written as "+">
    <root>/<vault_id>/versions/<number:020d>
    <root>/<vault_id>/tmp/<writer>-<random>.tmp   being written; never read

The directory store memvault-server keeps its vaults in
(`memvault_base.objects.directory`: write to `tmp/`, fsync, `link(2)` to the
final name, fsync the directory), with this remote's own temporaries: each
vault's `tmp/`, shared by every device of the vault. Whoever else can write
the folder is not trusted: the store opens nothing through a symbolic link,
reads only regular files of at most `names.MAX_OBJECT` bytes, and deletes in
`tmp/` only this device's own leftovers. A device's `writer` prefix is 16 hex
digits of sha256 of its device id (the id itself stays inside the sealed
operations), the same at every start: the leftovers of a crash are found by
the next start, and no other device's file is ever taken for one, however
old (a device on a slow link may be writing one for minutes).

`watch_head` polls every 0.5 s: a listing of `versions/` costs ~1 ms per
1,000 versions, and half a second is well inside the sync worker's 1 s goal.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from memvault_base.errors import Unavailable
from memvault_base.objects.directory import DirectoryStore
from memvault_base.objects.names import MAX_OBJECT
from memvaultd.sync.remotes.blobs import BlobRemote

POLL_INTERVAL = 0.5


def open_directory(url: str, root: Path, vault_id: str, device: str = "") -> BlobRemote:
    """The remote in `root` for `vault_id`, writing as `device` (without
    one, as a writer of its own that leaves no leftovers to find later)."""
    writer = None
    if device:
        writer = hashlib.sha256(f"memvault/remote-tmp/{device}".encode()).hexdigest()[:16] + "-"
    try:
        store = DirectoryStore(root, tmp=root / vault_id / "tmp", shared=True, writer=writer,
                               max_object=MAX_OBJECT)
    except OSError as exc:
        raise Unavailable(f"cannot use {root} as a remote: {exc}") from exc
    return BlobRemote(url, store, vault_id, POLL_INTERVAL)
