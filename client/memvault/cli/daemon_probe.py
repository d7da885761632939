"""Questions only the daemon's code can answer, asked of a short `python -c`.

The light client never imports the daemon or its libraries (tests/
test_layers.py): whether the config is valid as the daemon reads it, which
keyring backend is there, where the model's weights are, whether a passphrase
file opens the vault's key file. Each is a subprocess of the same interpreter
(the daemon is installed beside the CLI), with a timeout.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

__all__ = ["PROBE_TIMEOUT_S", "installed", "last_line", "run"]

# The Secret Service over D-Bus can take a second to start on first use.
PROBE_TIMEOUT_S = 20.0


def installed(name: str) -> bool:
    """Whether `name` could be imported, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def run(code: str, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """`code` run with `args` by this interpreter, in `env` (default: ours)."""
    env = dict(os.environ if env is None else env, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        # -P: nothing from the working directory on sys.path (`python -c` puts
        # it first, and a module planted there would run in the probe).
        return subprocess.run([sys.executable, "-P", "-c", code, *args], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess([], 1, "", f"no answer within {PROBE_TIMEOUT_S} s")


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
