"""memvault: encrypted, local-first memory for AI agents — the light client.

    import memvault

    with memvault.Client() as mv:
        mv.remember("the user prefers pytest", topic="user.preferences.testing")
        hits = mv.recall("which test runner?")

This package is the light install (grpcio, protobuf, click, rich, platformdirs):
it talks to the `memvaultd` daemon over its local socket and never imports the
daemon, an embedding model or an index.
"""

from memvault.client import Client, EventStream
from memvault.errors import (
    IntegrityError,
    InvalidArgument,
    Locked,
    MemvaultError,
    NotFound,
    ResourceExhausted,
    RollbackDetected,
    Unavailable,
)
from memvault.types import Event, Hit, Memory, RememberResult, Status

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Event",
    "EventStream",
    "Hit",
    "IntegrityError",
    "InvalidArgument",
    "Locked",
    "Memory",
    "MemvaultError",
    "NotFound",
    "RememberResult",
    "ResourceExhausted",
    "RollbackDetected",
    "Status",
    "Unavailable",
    "__version__",
]
