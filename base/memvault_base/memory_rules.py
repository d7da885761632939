"""What a memory's numbers mean, as the daemon, the client and the CLI all read them.

The daemon enforces them (`memvaultd.model`); the client and the CLI show
them (`Memory.pinned`, the help of `--importance`). One place, so the two
sides never disagree on what "pinned" is.
"""

from __future__ import annotations

# A memory nobody rated: halfway, so that a rating can raise or lower it.
DEFAULT_IMPORTANCE = 0.5
# At or above this a memory is pinned: decay does not hide it and the sweep
# never forgets it (docs/upkeep.md).
PINNED_IMPORTANCE = 0.9
