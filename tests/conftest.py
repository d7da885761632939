from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .ceph import CephRGW, session_rgw
from .daemon_process import DaemonProcess
from .server_process import ServerProcess


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache for the whole session, in the environment every daemon
    inherits (`daemon_env`): the model exported once (`models/`, ~7 s, most of
    it importing torch) serves every test daemon, each on a fresh
    MEMVAULT_HOME, in ~0.4 s, and no test writes to the user's own cache
    (~/.cache/memvault/models)."""
    path = tmp_path_factory.mktemp("model-cache")
    before = os.environ.get("MEMVAULT_CACHE_DIR")
    os.environ["MEMVAULT_CACHE_DIR"] = str(path)
    yield path
    if before is None:
        os.environ.pop("MEMVAULT_CACHE_DIR", None)
    else:
        os.environ["MEMVAULT_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """One real daemon shared by the tests that only add to it."""
    with DaemonProcess(tmp_path_factory.mktemp("shared") / "home").start() as proc:
        yield proc
        proc.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A real memvault-server on loopback, of this test alone."""
    proc = ServerProcess(tmp_path / "server").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def rgw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CephRGW]:
    """A real S3 server (one-node Ceph RGW in RAM on loopback), started on first use."""
    yield from session_rgw(tmp_path_factory.mktemp("ceph"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"
