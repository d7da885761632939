"""A put-if-absent store on a local directory: memvault-server's default
store (`DATA/store/`) and the daemon's `file://` remotes.

    <root>/<vault_id>/owner
    <root>/<vault_id>/objects/<name, "/" written as "+">
    <root>/<vault_id>/versions/<number:020d>
    <tmp>/<writer><random:16 hex>.tmp    being written; never read

A write goes to `tmp` (mode 0600), is fsynced, then hard-linked to its final
name. `link(2)` fails with EEXIST when the name exists, so put-if-absent is
one atomic system call and a reader never sees a partial file; the directory
holding the new name is fsynced before the write is acknowledged. Names are
flat files ("+" is outside the name alphabet, so the mapping is one-to-one):
`a` and `a/b` can both exist, as on S3. The file system must support hard
links (every local POSIX one does; some SMB mounts do not).

The folder may be shared with people the device does not trust (a NAS, a
Syncthing or Dropbox folder), so nothing inside `root` is taken on faith:

- `root` itself is opened by the path its owner gave, at every call (a
  remounted NAS is found again); every directory below it is opened relative
  to the one above (`openat`), never through a symbolic link (`O_NOFOLLOW`),
  so no component can be swapped for a link out of the folder mid-call;
- only regular files are read, checked before and after opening
  (`O_NONBLOCK`, so a FIFO cannot block the open), and at most `max_object`
  bytes of one (the daemon's remotes: `names.MAX_OBJECT`; memvault-server
  bounds what it stores as it takes it, `--max-object-bytes`);
- the only files deleted besides objects asked for by name are this writer's
  own leftovers in `tmp`: names made of its `writer` prefix and 16 random
  hex digits, which no other writer of the folder makes.

A symbolic link, FIFO, device, directory or oversized file where a file or
directory of this store belongs is `IntegrityError` naming it: memvault
never makes one, so someone who can write the folder did. A `root` that
cannot be opened (an unmounted share) is `Unavailable`.

memvault-server's store is the server's own directory, with one writer: its
`tmp` is `<root>/.tmp/` and every leftover there is its own. A `file://`
remote's is `<root>/<vault_id>/tmp/`, shared by every device, each with its
own `writer` prefix (`sync/remotes/directory.py`). `tmp` must be inside
`root`, on its file system.

Every file this store touches is touched in this module.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from heapq import nsmallest
from pathlib import Path, PurePosixPath

from memvault_base.durable import sync_dir, write_all
from memvault_base.errors import IntegrityError, NotFound, Unavailable

log = logging.getLogger(__name__)

_SLASH = "+"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_CHUNK = 1 << 20
# What opening a symbolic link with O_NOFOLLOW, or a non-directory with
# O_DIRECTORY, fails with (Linux: ELOOP; FreeBSD and macOS: EMLINK, ENOTDIR).
_NOT_FOLLOWED = (errno.ELOOP, errno.EMLINK, errno.ENOTDIR)
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISREG, "a regular file"))


class DirectoryStore:
    """`Store` (store.py) over `root`; keys as `names.py` lays them out."""

    def __init__(self, root: Path, *, tmp: Path, shared: bool, writer: str | None = None,
                 stale_after: float = 0.0, max_object: int | None = None) -> None:
        """Opens `root`, creating it and `tmp` as needed, and deletes what a
        crash of this writer left in `tmp`: the files named with its `writer`
        prefix last modified over `stale_after` seconds ago (every one if 0).
        `writer` defaults to "" for a store that is the one writer of `tmp`
        and to a random prefix for a `shared` one (which then has no
        leftovers to find). `max_object` bounds every read (None: no
        bound). `OSError` if `root` cannot be made."""
        self.root = root
        self.tmp = tmp
        self.shared = shared
        self.max_object = max_object
        self._tmp = PurePosixPath(tmp.relative_to(root)).parts
        if writer is None:
            writer = f"{secrets.token_hex(8)}-" if shared else ""
        self._writer = writer
        self._leftover = re.compile(re.escape(writer) + r"[0-9a-f]{16}\.tmp")
        if not root.is_dir():
            root.mkdir(parents=True, exist_ok=True)
            sync_dir(root.parent)
        self._clear_leftovers(stale_after)

    # -- the store ---------------------------------------------------------------

    def put_if_absent(self, key: str, data: bytes) -> bool:
        parts, name = _place(key)
        tmp_fd = self._open_dir(self._tmp, create=True, mode=0o700)
        assert tmp_fd is not None
        try:
            dir_fd = self._open_dir(parts, create=True)
            assert dir_fd is not None
            try:
                return self._link_new(tmp_fd, dir_fd, name, data)
            finally:
                os.close(dir_fd)
        finally:
            os.close(tmp_fd)

    def get(self, key: str) -> bytes:
        parts, name = _place(key)
        dir_fd = self._open_dir(parts, create=False)
        if dir_fd is None:
            raise NotFound(f"no object {key!r}")
        try:
            return self._read(dir_fd, name, (*parts, name), key)
        finally:
            os.close(dir_fd)

    def exists(self, key: str) -> bool:
        parts, name = _place(key)
        dir_fd = self._open_dir(parts, create=False)
        if dir_fd is None:
            return False
        try:
            found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        finally:
            os.close(dir_fd)
        if not stat.S_ISREG(found.st_mode):
            raise self._refusal((*parts, name), found.st_mode, "a regular file")
        return True

    def list(self, prefix: str, start_after: str = "", limit: int | None = None) -> list[str]:
        vault, _, rest = prefix.partition("/")
        kind, slash, _ = rest.partition("/")
        if not slash:
            raise ValueError(f"list needs a <vault>/<kind>/ prefix, got {prefix!r}")
        dir_fd = self._open_dir(_checked((vault, kind)), create=False)
        if dir_fd is None:
            return []
        try:
            # Streamed, so a folder planted with millions of names costs time,
            # not memory, when a limit is given.
            with os.scandir(dir_fd) as entries:
                keys = (f"{vault}/{kind}/{entry.name.replace(_SLASH, '/')}"
                        for entry in entries)
                found = (key for key in keys if key.startswith(prefix) and key > start_after)
                return sorted(found) if limit is None else nsmallest(limit, found)
        finally:
            os.close(dir_fd)

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
        parts, name = _place(key)
        dir_fd = self._open_dir(parts, create=False)
        if dir_fd is None:
            return
        try:
            try:
                os.unlink(name, dir_fd=dir_fd)  # removes a link itself, never its target
            except FileNotFoundError:
                return
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        pass

    # -- files -----------------------------------------------------------------

    def _link_new(self, tmp_fd: int, dir_fd: int, name: str, data: bytes) -> bool:
        tmp_name = f"{self._writer}{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp_name, _CREATE, 0o600, dir_fd=tmp_fd)
        try:
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                # linkat(2) without AT_SYMLINK_FOLLOW: the new name is the file
                # just written, whatever is planted where.
                os.link(tmp_name, name, src_dir_fd=tmp_fd, dst_dir_fd=dir_fd,
                        follow_symlinks=False)
            except FileExistsError:
                return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name, dir_fd=tmp_fd)
        os.fsync(dir_fd)
        return True

    def _read(self, dir_fd: int, name: str, rel: tuple[str, ...], key: str) -> bytes:
        # Checked before opening, so that no FIFO or device is ever opened
        # (opening some devices acts), and again after, on what was opened.
        try:
            self._check_file(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), rel)
            fd = os.open(name, _READ, dir_fd=dir_fd)
        except FileNotFoundError:
            raise NotFound(f"no object {key!r}") from None
        except OSError as exc:
            if exc.errno in _NOT_FOLLOWED:  # swapped for a link since the check
                raise self._refusal(rel, stat.S_IFLNK, "a regular file") from None
            raise
        try:
            self._check_file(os.fstat(fd), rel)
            chunks: list[bytes] = []
            got = 0
            limit = None if self.max_object is None else self.max_object + 1
            while limit is None or got < limit:
                want = _READ_CHUNK if limit is None else min(_READ_CHUNK, limit - got)
                chunk = os.read(fd, want)
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        finally:
            os.close(fd)
        if self.max_object is not None and got > self.max_object:  # it grew since fstat
            raise self._too_big(rel, got)
        return b"".join(chunks)

    def _check_file(self, found: os.stat_result, rel: tuple[str, ...]) -> None:
        if not stat.S_ISREG(found.st_mode):
            raise self._refusal(rel, found.st_mode, "a regular file")
        if self.max_object is not None and found.st_size > self.max_object:
            raise self._too_big(rel, found.st_size)

    # -- directories -------------------------------------------------------------

    def _open_dir(self, parts: tuple[str, ...], *, create: bool, mode: int = 0o777
                  ) -> int | None:
        """A descriptor of `root/parts...`, each component opened relative to
        the one above and never through a link. Missing components are made
        when `create` (each new entry fsynced into its parent), else the
        answer is None."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise Unavailable(f"cannot open {self.root}: {exc.strerror}") from exc
        try:
            for depth, part in enumerate(parts):
                child = self._child_dir(fd, part, parts[: depth + 1], create, mode)
                os.close(fd)
                fd = child
                if fd < 0:
                    return None
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        return fd

    def _child_dir(self, fd: int, part: str, rel: tuple[str, ...], create: bool,
                   mode: int) -> int:
        """The descriptor of directory `part` in `fd`; -1 if it is missing and
        not to be made."""
        for _ in range(2):
            try:
                return os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    return -1
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
                os.fsync(fd)
            except OSError as exc:
                if exc.errno not in _NOT_FOLLOWED:
                    raise
                mode_found = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                raise self._refusal(rel, mode_found, "a directory") from None
        raise FileNotFoundError(errno.ENOENT, f"{self.root.joinpath(*rel)} vanished as made")

    def _clear_leftovers(self, stale_after: float) -> None:
        try:
            fd = self._open_dir(self._tmp, create=True, mode=0o700)
        except IntegrityError as exc:
            # Reported by the first write, which needs `tmp`; nothing is
            # deleted through what is there instead.
            log.warning("%s; no leftovers cleared", exc)
            return
        assert fd is not None
        cutoff = time.time() - stale_after
        try:
            with os.scandir(fd) as entries:
                names = [entry.name for entry in entries if self._leftover.fullmatch(entry.name)]
            for name in names:
                with contextlib.suppress(OSError):
                    found = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISREG(found.st_mode) and (stale_after <= 0
                                                        or found.st_mtime < cutoff):
                        os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    # -- errors ------------------------------------------------------------------

    def _refusal(self, rel: tuple[str, ...], mode: int, wanted: str) -> IntegrityError:
        found = next((what for test, what in _KINDS if test(mode)), "something else")
        return IntegrityError(f"{self.root.joinpath(*rel)} is {found}, not {wanted}: memvault "
                              "never makes one there, so someone who can write the folder "
                              "did; refused")

    def _too_big(self, rel: tuple[str, ...], size: int) -> IntegrityError:
        return IntegrityError(f"{self.root.joinpath(*rel)} is over {self.max_object} bytes "
                              f"({size}), more than memvault ever writes; refused unread")


def _place(key: str) -> tuple[tuple[str, ...], str]:
    """(directories under root, file name) of `key`."""
    vault, _, rest = key.partition("/")
    kind, slash, name = rest.partition("/")
    if not slash:
        return _checked((vault,)), _checked((kind,))[0]
    return _checked((vault, kind)), _checked((name.replace("/", _SLASH),))[0]


def _checked(parts: tuple[str, ...]) -> tuple[str, ...]:
    # names.py never lets these through; a component that is one would reach
    # outside the directory the descriptors walk.
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\0" in part:
            raise ValueError(f"a key component may not be {part!r}")
    return parts
