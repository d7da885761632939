"""The plain values `memvault.Client` returns, so that callers never handle protobuf.

All are frozen dataclasses, except `Hits`, a list of `Hit` that also carries
the reply's `has_more` and `turns`. Times are seconds since the Unix epoch as
floats (0.0 means "unset"), `payload` is the decoded JSON object, sequences
are tuples. `to_dict()` gives the JSON shape the `memvault` CLI prints with
`--json`; `vector` appears in it only when the daemon returned one (it does so
only on request), so that a recall's JSON does not carry 384 floats per hit.
`Memory.from_dict()` reads that shape back (an export line, for import).

Each family has its own module (`memvault.memory`, `memvault.read_results`,
`memvault.write_results`, `memvault.status`); this one gathers them all in one
place. Translation from and to the wire messages lives in `memvault.wire`.
"""

from __future__ import annotations

from memvault.memory import Memory
from memvault.read_results import (
    Facet,
    FacetCounts,
    Hit,
    Hits,
    ListedMemory,
    MemoryPage,
    ScoreBreakdown,
    TurnHit,
)
from memvault.status import DeviceInfo as DeviceInfo
from memvault.status import Event, Status
from memvault.status import SyncInfo as SyncInfo
from memvault.status import SyncVerdict as SyncVerdict
from memvault.write_results import (
    AppendResult,
    ForgetResult,
    ImportResult,
    ReinforceResult,
    RememberResult,
    UpdateResult,
)
from memvault.write_results import InitResult as InitResult
from memvault.write_results import JoinResult as JoinResult
from memvault.write_results import LeaveResult as LeaveResult
from memvault.write_results import RotateResult as RotateResult

__all__ = [
    "AppendResult",
    "Event",
    "Facet",
    "FacetCounts",
    "ForgetResult",
    "Hit",
    "Hits",
    "ImportResult",
    "ListedMemory",
    "Memory",
    "MemoryPage",
    "ReinforceResult",
    "RememberResult",
    "ScoreBreakdown",
    "Status",
    "TurnHit",
    "UpdateResult",
]
