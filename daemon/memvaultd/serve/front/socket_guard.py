"""The socket's directory, its permissions, and the one-daemon rule.

The directory is created 0700 and must be owned by us, not a symlink, and
not open to others (`memvault_base.secrecy.private_directory`, which the
model cache shares); the socket is created under umask 077 so it is 0600 from
the moment it exists. A socket file that answers belongs to a running daemon
(we refuse to start); one that refuses is left over from a crash (we replace it).
"""

from __future__ import annotations

import socket
from pathlib import Path

from memvault_base.errors import MemvaultError
from memvault_base.secrecy import private_directory


class SocketInUse(MemvaultError):
    """Another memvaultd already serves this socket."""


def prepare_socket_dir(path: Path) -> None:
    private_directory(path.parent, "the socket's directory")


def claim_socket(path: Path) -> None:
    """Remove a stale socket file; refuse when a live daemon answers on it."""
    if not path.exists() and not path.is_symlink():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()  # nobody listens: left by a crash
        return
    finally:
        probe.close()
    raise SocketInUse(f"another memvaultd is already running on {path}; stop it first "
                      "(or use another MEMVAULT_HOME)")
