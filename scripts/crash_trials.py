#!/usr/bin/env python3
"""The long crash campaign: kill -9 the real daemon at random moments.

    .venv/bin/python scripts/crash_trials.py [--trials 100] [--seed N] [--keep DIR]

Each trial starts memvaultd on one vault, checks that it comes up holding
every memory acknowledged so far, byte for byte, streams `Remember` and
`RememberBatch` calls from three writers, and kills the daemon with SIGKILL
at a random moment (one trial in four during start-up instead). After the
last trial the daemon is started until SERVING and every vector is checked
too, then stopped cleanly and started from its snapshot. The trial code is
`tests/test_crash.py`'s, which the suite runs with 10 trials.

Exit status 0 when nothing acknowledged was lost or altered and every start
succeeded; 1 otherwise. The figures go to `docs/reliability.md`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.test_crash import CrashCampaign  # noqa: E402 - after the path is set


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--keep", type=Path, help="keep the vault in this directory")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="memvault-crash-") as scratch:
        home = (args.keep or Path(scratch)) / "home"
        started = time.monotonic()
        campaign = CrashCampaign(home, args.seed, report=lambda line: print(line, flush=True))
        figures = campaign.run(args.trials)
        elapsed = time.monotonic() - started

    print(f"seed {args.seed}: {figures.trials} trials in {elapsed:.0f} s "
          f"({figures.stream_kills} killed mid-stream, {figures.startup_kills} during start-up)")
    print(f"acknowledged writes: {figures.acknowledged}; in flight when killed (unacknowledged): "
          f"{figures.unacknowledged_attempts}")
    print(f"lost: {figures.lost}; altered: {figures.altered}; "
          f"slowest start to a loaded vault: {figures.slowest_start_s:.1f} s")
    for failure in figures.failures:
        print("FAILURE:", failure)
    return 0 if not figures.failures and not figures.lost and not figures.altered else 1


if __name__ == "__main__":
    sys.exit(main())
