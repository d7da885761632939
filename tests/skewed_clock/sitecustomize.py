"""Loaded by a test daemon whose PYTHONPATH starts with this directory: its
wall clock runs MEMVAULT_TEST_CLOCK_SKEW_S seconds ahead (or behind), as a
machine's whose clock is wrong. Tests only (test_device_copy.py)."""

import os
import time

_SKEW_S = float(os.environ.get("MEMVAULT_TEST_CLOCK_SKEW_S", "0"))
if _SKEW_S:
    _real_time = time.time
    time.time = lambda: _real_time() + _SKEW_S
