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
from memvault.types import (
    AppendResult,
    Event,
    Facet,
    ForgetResult,
    Hit,
    Hits,
    ImportResult,
    ListedMemory,
    Memory,
    MemoryPage,
    ReinforceResult,
    RememberResult,
    ScoreBreakdown,
    Status,
    TurnHit,
    UpdateResult,
)
from memvault_base.errors import (
    ForkDetected,
    IntegrityError,
    InvalidArgument,
    Locked,
    MemvaultError,
    NotFound,
    ResourceExhausted,
    RollbackDetected,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "AppendResult",
    "Client",
    "Event",
    "EventStream",
    "Facet",
    "ForgetResult",
    "ForkDetected",
    "Hit",
    "Hits",
    "ImportResult",
    "IntegrityError",
    "InvalidArgument",
    "ListedMemory",
    "Locked",
    "Memory",
    "MemoryPage",
    "MemvaultError",
    "NotFound",
    "ReinforceResult",
    "RememberResult",
    "ResourceExhausted",
    "RollbackDetected",
    "ScoreBreakdown",
    "Status",
    "TurnHit",
    "Unavailable",
    "UpdateResult",
    "__version__",
]
