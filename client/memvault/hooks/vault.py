"""The one `Client` the hooks make: every hook reaches the daemon through
`open_client`, so what a hook's client carries (its socket, its time limit,
and whatever else a later client takes) is decided here once.

A hook runs while the agent waits. 2 s bounds both the connection and each
call: a running daemon answers a hook's recall in ~10 ms and its writes in
tens of ms, so 2 s is only reached by a daemon that is hung, and the hook
then gives up and lets the agent go on. A missing socket or a refused
connection fails at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from memvault.client import Client

__all__ = ["CALL_TIMEOUT_S", "open_client"]

CALL_TIMEOUT_S = 2.0


def open_client(home: str | None, socket: str | None, scopes: Sequence[str] = ()) -> Client:
    """The client of a hook run, for the daemon `--home` / `--socket` name,
    declaring `scopes` (none: every scope)."""
    return Client(socket, home=home, timeout=CALL_TIMEOUT_S, scopes=scopes)
