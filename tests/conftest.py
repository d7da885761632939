from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon_process import DaemonProcess


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One real daemon shared by the tests that only add to it."""
    with DaemonProcess(tmp_path_factory.mktemp("shared") / "home").start() as proc:
        yield proc
        proc.stop()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"
