"""Load, short form: 16 clients for ~10 s of mixed remember/recall/update/forget
against a real daemon; no errors, no acknowledged write lost or altered.

The code is `scripts/load_test.py`'s (loaded from its file), which runs the
long form (60 s) and prints the figures for docs/reliability.md.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .daemon_process import DaemonProcess

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "load_test.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memvault_load_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_sixteen_clients_lose_nothing(home: Path) -> None:
    load = _load_script()
    with DaemonProcess(home).start() as daemon:
        report = load.run_load(daemon.socket, clients=16, seconds=10.0, seed=16)
        load.print_report(report)
        assert report.errors == 0, report.error_samples
        assert report.lost == 0, report.lost_samples
        assert report.counts["remember"] > 0 and report.counts["update"] > 0
        assert report.counts["forget"] > 0 and report.counts["recall"] > 0
        # Every remembered id was read back: present, or gone because forgotten.
        assert report.checked_memories + report.checked_forgotten == report.counts["remember"]
        assert daemon.stop() == 0, daemon.log
