"""A caller's declared access, as gRPC metadata: the keys both sides name.

A client that runs for an agent (the MCP bridge, the hooks, a script) may
declare, with every call, what it may reach (docs/scopes.md):

    memvault-scopes     project:api,agent:reviewer   the scopes it works in ("user" is
                                                     always readable; writable only if named)
    memvault-topics     work.*,user.preferences      the topics it may see and write
    memvault-read-only  1                            no call that changes anything

Lists are comma-separated, and a key sent twice counts as one list. A call
without any of them has full access, as every call had before scopes. The
daemon checks the values (`memvaultd.model.scopes`) and enforces them; this
module only names the keys and writes the values, so that the client and
the daemon never spell them differently.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PREFIX", "READ_ONLY", "SCOPES", "TOPICS", "metadata"]

PREFIX = "memvault-"  # the keys the daemon's front hands on to its core
SCOPES = "memvault-scopes"
TOPICS = "memvault-topics"
READ_ONLY = "memvault-read-only"


def metadata(scopes: Sequence[str] = (), topics: Sequence[str] = (),
             read_only: bool = False) -> tuple[tuple[str, str], ...]:
    """The metadata that declares this access; empty for full access."""
    pairs: list[tuple[str, str]] = []
    if scopes:
        pairs.append((SCOPES, ",".join(scopes)))
    if topics:
        pairs.append((TOPICS, ",".join(topics)))
    if read_only:
        pairs.append((READ_ONLY, "1"))
    return tuple(pairs)
