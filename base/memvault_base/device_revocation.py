"""The bytes a device signs to ask memvault-server to revoke another
device's token (docs/format.md, "Device revocation request"): built by the
daemon, checked by the server (`memvault_server/revocation.py`)."""

from __future__ import annotations

LABEL = b"memvault revoke-device v1\0"
# 5 minutes: clocks kept by NTP agree within seconds, and a request is one
# call, sent within its deadline of 60 s.
WINDOW_MS = 300_000


def request_bytes(signer: str, target: str, issued_at: int) -> bytes:
    """LABEL, the signer's and the target's device ids (ASCII, each ended by
    a NUL) and `issued_at` (milliseconds since the Unix epoch, 8 bytes
    big-endian)."""
    return (LABEL + signer.encode("ascii") + b"\0" + target.encode("ascii") + b"\0"
            + issued_at.to_bytes(8, "big"))
