from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .ceph import CephRGW, session_rgw
from .daemon_process import DaemonProcess


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One real daemon shared by the tests that only add to it."""
    with DaemonProcess(tmp_path_factory.mktemp("shared") / "home").start() as proc:
        yield proc
        proc.stop()


@pytest.fixture(scope="session")
def rgw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CephRGW]:
    """A real S3 server (one-node Ceph RGW in RAM on loopback), started on first use."""
    yield from session_rgw(tmp_path_factory.mktemp("ceph"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"
