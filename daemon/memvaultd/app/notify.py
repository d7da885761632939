"""Tell the service manager how start-up goes (the sd_notify protocol).

systemd (`Type=notify`) passes `NOTIFY_SOCKET`, a unix datagram socket (a
path, or "@name" in the abstract namespace); each datagram is newline-separated
`KEY=value` lines: `READY=1` once the socket is bound, `STATUS=...` as the
memories load and the model warms, `STOPPING=1` on SIGTERM. Without the
variable (a foreground run, launchd) every call is a no-op. Fifteen lines of
protocol do not justify a dependency.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("memvaultd.notify")


def notify(*lines: str) -> bool:
    """Send `lines` (e.g. "READY=1", "STATUS=warming the model"); True if sent."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall("\n".join(lines).encode())
    except OSError as exc:  # the manager went away: serving matters more than telling
        log.warning("could not notify the service manager at %s: %s", address, exc)
        return False
    return True
