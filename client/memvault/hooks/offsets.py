"""How far each session's transcript has been stored: a small file per
session in `state_dir/claude-code/` (both directories 0700), so a Stop that
comes again, or a PreCompact after a Stop, stores only what is new.

    state_dir/claude-code/<sha256(session_id)[:32]>.json
        {"transcript_path": "...", "offset": 48213}

The file name is a digest of the session id, so an id of any shape names a
file inside the directory and nothing else; the file holds a path and a
byte count, never any text of the session. It is written with
`memvault_base.durable.replace_file` (0600): a crash leaves the old offset
or the new one. While a hook reads and stores a session it holds an
exclusive lock on `<digest>.lock`, so a Stop and a PreCompact that run at
once store each turn once. Files untouched for `KEEP_DAYS` are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from memvault_base.durable import replace_file

__all__ = ["KEEP_DAYS", "SessionOffsets"]

# A session resumed after a month is read again from where it stopped only
# if its file is still there; 30 days covers a long project's pauses, and
# keeps the directory to a few hundred small files for a daily user.
KEEP_DAYS = 30


class SessionOffsets:
    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "claude-code"

    def _file(self, session_id: str, suffix: str) -> Path:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self.dir / f"{digest}{suffix}"

    @contextlib.contextmanager
    def locked(self, session_id: str) -> Iterator[None]:
        """Hold the session's lock (blocking: the other hook's store is short)."""
        for folder in (self.dir.parent, self.dir):  # the state dir, then ours in it
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(folder, 0o700)
        fd = os.open(self._file(session_id, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def get(self, session_id: str, transcript_path: str) -> int:
        """Bytes of `transcript_path` already stored; 0 for a session (or a
        transcript of it) not seen before, or a file that does not read."""
        try:
            saved = json.loads(self._file(session_id, ".json").read_bytes())
        except (OSError, ValueError):
            return 0
        if not isinstance(saved, dict) or saved.get("transcript_path") != transcript_path:
            return 0
        offset = saved.get("offset")
        return offset if isinstance(offset, int) and offset >= 0 else 0

    def put(self, session_id: str, transcript_path: str, offset: int) -> None:
        blob = json.dumps({"transcript_path": transcript_path, "offset": offset}).encode()
        replace_file(self._file(session_id, ".json"), blob)

    def prune(self, now: float | None = None) -> None:
        """Remove the files of sessions untouched for KEEP_DAYS."""
        cutoff = (time.time() if now is None else now) - KEEP_DAYS * 86400
        with contextlib.suppress(OSError):
            for path in self.dir.iterdir():
                with contextlib.suppress(OSError):
                    if path.stat().st_mtime < cutoff:
                        path.unlink()
