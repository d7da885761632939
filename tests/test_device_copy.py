"""A copied data directory (a backup restored beside the original, a cloned
machine) is a device of its own, and operations stamped far in the future
are refused: real daemons syncing through a directory remote.

Two copies that kept one device id draw equal hybrid-clock stamps whenever
their clocks stand at the same point, and an equal stamp is broken by the
order operations arrive in: each copy keeps its own write and they never
converge. The copies here are made to draw equal stamps on purpose: the
original's clock ran 10 minutes ahead (`skewed_clock/sitecustomize.py`) for
its last writes, so the first write of each copy, both started with the true
clock, is stamped from the same clock state.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from memvault import Client
from memvault_base.errors import MemvaultError

from .daemon_process import DaemonProcess
from .test_remote_faults import batch, eventually

START_S = 120.0
SYNC_S = 60.0
SKEWED_CLOCK = Path(__file__).resolve().parent / "skewed_clock"


def _skewed(seconds: float) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(SKEWED_CLOCK), os.environ.get("PYTHONPATH", "")]),
            "MEMVAULT_TEST_CLOCK_SKEW_S": str(seconds)}


def _device_id(home: Path) -> str:
    device_id: str = json.loads((home / "data" / "vault.json").read_text())["device_id"]
    return device_id


def _versions(remote_dir: Path) -> int:
    return len(list(remote_dir.glob("*/versions/*")))


def test_a_copied_data_directory_becomes_a_device_of_its_own(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    original, copy = tmp_path / "original", tmp_path / "copy"
    rng = np.random.default_rng(7)
    with DaemonProcess(original, **_skewed(600)).start(timeout=START_S) as o, \
            Client(socket=o.socket) as co:
        memory = co.remember_batch(batch(rng, 1, "shared"))[0].id
        co.init_sync(shared.as_uri())
        eventually(lambda: co.sync_status().pending == 0, SYNC_S, "the original pushed")
        pushed = _versions(shared)
        # Acknowledged, then killed before its push (0.2 s later): only the
        # log holds it, under the original's device id.
        unpushed = co.remember_batch(batch(rng, 1, "unpushed"))[0].id
        o.kill()
    assert _versions(shared) == pushed
    shutil.copytree(original, copy, ignore=shutil.ignore_patterns("run"))

    # The copy alone first, as when a data directory is moved to a new disk:
    # what the original wrote and never pushed is pushed by the copy.
    with DaemonProcess(copy).start(timeout=START_S) as c, Client(socket=c.socket) as cc:
        assert cc.get(unpushed)
        cc.sync_now()
        assert _versions(shared) == pushed + 1, "the copy pushed the original's last write"
        with DaemonProcess(original).start(timeout=START_S) as o, \
                Client(socket=o.socket) as co:
            co.update(memory, category="set on the original")
            cc.update(memory, category="set on the copy")

            def converged() -> bool:
                try:
                    co.sync_now()
                    cc.sync_now()
                    heads = co.sync_status().head, cc.sync_status().head
                    views = co.get(memory).category, cc.get(memory).category
                except MemvaultError:
                    return False
                return heads[0] == heads[1] >= pushed + 3 and views[0] == views[1]

            eventually(converged, SYNC_S, "the original and the copy converge")
            assert _device_id(original) != _device_id(copy)
            o.stop()
        c.stop()
    # A restart keeps each one's id: only a new copy is a new device.
    ids = _device_id(original), _device_id(copy)
    with DaemonProcess(copy).start(timeout=START_S) as c:
        c.stop()
    assert (_device_id(original), _device_id(copy)) == ids


def test_operations_stamped_far_ahead_are_refused(tmp_path: Path) -> None:
    """A device whose clock runs two days ahead: what it writes is refused
    by the others (never applied, never moving their clocks) until their
    own clock comes within a day of it, and the refusal says why."""
    shared = (tmp_path / "shared").as_uri()
    rng = np.random.default_rng(11)
    with DaemonProcess(tmp_path / "a").start(timeout=START_S) as a, \
            DaemonProcess(tmp_path / "b").start(timeout=START_S) as b, \
            Client(socket=a.socket) as ca, Client(socket=b.socket) as cb:
        key = ca.init_sync(shared).recovery_key
        cb.join_sync(shared, key)
        a.stop()
    with DaemonProcess(tmp_path / "a", **_skewed(2 * 86400)).start(timeout=START_S) as a, \
            DaemonProcess(tmp_path / "b").start(timeout=START_S) as b, \
            Client(socket=a.socket) as ca, Client(socket=b.socket) as cb:
        head = ca.sync_status().head
        ahead = ca.remember_batch(batch(rng, 1, "ahead"))[0].id
        eventually(lambda: ca.sync_status().head > head, SYNC_S, "the skewed device pushed")
        with pytest.raises(MemvaultError, match="ahead of this device's clock"):
            cb.sync_now()
        with pytest.raises(MemvaultError):
            cb.get(ahead)
        mine = cb.remember_batch(batch(rng, 1, "behind"))[0].id  # wakes the worker up
        assert cb.get(mine)
        eventually(lambda: "ahead of this device's clock" in cb.sync_status().last_error,
                   SYNC_S, "the worker's status says why")
        a.stop()
        b.stop()
