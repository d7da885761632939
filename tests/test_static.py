"""ruff and mypy --strict stay clean on the project's own code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["base/memvault_base", "client/memvault", "daemon/memvaultd", "server/memvault_server"]


def test_ruff_is_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", *PACKAGES], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
