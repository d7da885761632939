"""Who is on the other end of a unix socket: the kernel's word, not the peer's.

Linux answers `SO_PEERCRED` with the credentials the peer had when it called
connect(); macOS and the BSDs answer `LOCAL_PEERCRED` (level `SOL_LOCAL`)
with an `xucred`. Neither can be forged by the peer, which is why the socket
guard trusts them and nothing the client sends.

    Linux   struct ucred  { pid_t pid; uid_t uid; gid_t gid; }          3 x int32
    macOS   struct xucred { u_int cr_version; uid_t cr_uid;             uint32, uint32,
                            short cr_ngroups; gid_t cr_groups[16]; }    int16, 16 x uint32
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass

from memvault_base.errors import MemvaultError

_UCRED = struct.Struct("3i")
# The xucred header up to cr_uid; the group list after it is not needed.
_XUCRED_HEAD = struct.Struct("2I")
_XUCRED_SIZE = 4 + 4 + 2 + 2 + 16 * 4  # with the padding after cr_ngroups: 76 bytes
# <sys/un.h>: SOL_LOCAL 0, LOCAL_PEERCRED 1, LOCAL_PEERPID 2 (macOS only).
_SOL_LOCAL = 0
_LOCAL_PEERCRED = getattr(socket, "LOCAL_PEERCRED", 1)
_LOCAL_PEERPID = 2


@dataclass(frozen=True)
class PeerCredentials:
    uid: int
    pid: int  # 0 where the platform does not say


def peer_credentials(conn: socket.socket) -> PeerCredentials:
    """The uid (and pid, where known) of the process that connected `conn`."""
    if sys.platform.startswith("linux"):
        pid, uid, _gid = _UCRED.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        return PeerCredentials(uid=uid, pid=pid)
    if sys.platform == "darwin" or "bsd" in sys.platform:
        raw = conn.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
        _version, uid = _XUCRED_HEAD.unpack_from(raw)
        pid = 0
        if sys.platform == "darwin":
            pid = struct.unpack("i", conn.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, 4))[0]
        return PeerCredentials(uid=uid, pid=pid)
    raise MemvaultError(f"cannot tell who connected to a unix socket on {sys.platform}; "
                        "memvaultd runs on Linux and macOS")
