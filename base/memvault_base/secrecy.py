"""What keeps a process's plaintext inside it: no core file, no dump, no
passphrase left in its environment, no private directory that another user
owns or can list.

The daemon (`memvaultd`) and its front process call `forbid_dumps()` first
thing: the core holds the vault key and every memory in clear, the front
every request and answer passing through it.

- `RLIMIT_CORE` (soft and hard) 0: a crash writes no core file, and the
  process cannot raise the limit again.
- Linux: `prctl(PR_SET_DUMPABLE, 0)`. The kernel then skips the core dump
  even where `core_pattern` pipes cores to a collector (systemd-coredump,
  apport), and `/proc/<pid>/{environ,mem,maps,...}` and ptrace are refused to
  every process without `CAP_SYS_PTRACE`, the user's own included.
- macOS has no `PR_SET_DUMPABLE`; the limit is what keeps cores off disk there
  (launchd's `HardResourceLimits` set it before the process starts too).

`scrub_environment(name)` removes a variable once its value was used, from
`os.environ` and from the C environment (`unsetenv`); on Linux it also zeroes
the value in the block the kernel copied at `exec`, which is what
`/proc/<pid>/environ` shows and which `unsetenv` leaves untouched.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import sys
from pathlib import Path

from memvault_base.errors import MemvaultError

__all__ = ["PR_GET_DUMPABLE", "PR_SET_DUMPABLE", "dumpable", "forbid_dumps", "linux_libc",
           "private_directory", "scrub_environment"]

# <linux/prctl.h>
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


@functools.cache
def linux_libc() -> ctypes.CDLL | None:
    """The C library, on Linux; None elsewhere.

    Reached through the process's own symbols (`dlopen(NULL)`), among which
    Python's C library is on Linux: `ctypes.util.find_library` runs
    `ldconfig -p` in a child process (2-10 ms), and asked once the daemon
    serves, that child stood beside the front as a second one."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


def forbid_dumps() -> None:
    """No core file and, on Linux, not dumpable; OSError if the kernel refuses."""
    import resource  # Unix only; memvaultd runs on Linux and macOS

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    libc = linux_libc()
    if libc is not None and libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_DUMPABLE, 0): {os.strerror(err)}")


def dumpable() -> bool | None:
    """Whether this process may be dumped (Linux); None elsewhere."""
    libc = linux_libc()
    return None if libc is None else bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))


def scrub_environment(name: str) -> None:
    """Forget the variable `name`: its value zeroed in the process's initial
    environment block (Linux), then removed from `os.environ` and the C
    environment."""
    libc = linux_libc()
    if libc is not None and name in os.environ:
        prefix = name.encode() + b"="
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
        index = 0
        while (address := environ[index]) is not None:
            entry = ctypes.string_at(address)
            if entry.startswith(prefix):
                ctypes.memset(address + len(prefix), 0, len(entry) - len(prefix))
            index += 1
    os.environ.pop(name, None)  # os.environ's own unsetenv


def private_directory(directory: Path, what: str) -> None:
    """Create `directory` 0700 if missing; refuse one that is a symlink, not a
    directory, or owned by another user; take group and others' rights away
    from one that has them. `what` names it in the error ("the socket's
    directory", "the cache")."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise MemvaultError(f"{directory} ({what}) is not a directory (a symlink?); "
                            "refusing to use it")
    if info.st_uid != os.getuid():
        raise MemvaultError(f"{directory} ({what}) belongs to uid {info.st_uid}, not to you "
                            f"(uid {os.getuid()}); refusing to use it")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(directory, 0o700)
