"""The TypeScript client (clients/typescript) against a real daemon.

Its own suite (clients/typescript/test, run by Node's test runner over the
compiled output) does the calls; this file builds it, starts the daemon, and
hands the suite the daemon's home and the sockets it must refuse. It also
keeps the client's promises to the rest of the project: the committed
generated code matches what ts-proto makes of proto/, and the client finds
the socket by the same rule as the Python client (memvault_base.paths).

Node and the client's node_modules come from scripts/setup; without them
these tests skip, unless MEMVAULT_REQUIRE_NODE=1 (scripts/test sets it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from memvault_base import paths

from .daemon_process import DaemonProcess

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "clients" / "typescript"
GENERATED = CLIENT / "src" / "gen"
OTHER_UID = 65534  # "nobody": exists everywhere, owns nothing of ours


def _need_node() -> str:
    node = shutil.which("node")
    missing = ("node is not installed" if node is None else
               "clients/typescript/node_modules is missing"
               if not (CLIENT / "node_modules" / ".bin" / "tsc").exists() else "")
    if missing:
        give_up = pytest.fail if os.environ.get("MEMVAULT_REQUIRE_NODE") == "1" else pytest.skip
        give_up(f"{missing}: run ./scripts/setup --system")
    assert node is not None
    return node


@pytest.fixture(scope="module")
def built() -> Path:
    """The client and its tests compiled into clients/typescript/dist (~5 s)."""
    _need_node()
    subprocess.run([str(CLIENT / "node_modules" / ".bin" / "tsc"), "-p", str(CLIENT)],
                   check=True, timeout=300)
    return CLIENT / "dist"


@pytest.fixture(scope="module")
def ts_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    with DaemonProcess(tmp_path_factory.mktemp("ts") / "home").start() as proc:
        yield proc
        assert proc.stop() == 0


def test_node_suite_against_a_real_daemon(
    built: Path, ts_daemon: DaemonProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    odd = tmp_path_factory.mktemp("odd")
    env = dict(os.environ, MEMVAULT_HOME=str(ts_daemon.home))
    with contextlib.ExitStack() as sockets:
        # Bound, never listening: a connect is refused, as at a dead daemon's socket.
        refusing = sockets.enter_context(socket.socket(socket.AF_UNIX))
        refusing.bind(str(odd / "refusing.sock"))
        env["MEMVAULT_TS_REFUSING_SOCKET"] = str(odd / "refusing.sock")
        # Listening, never answering: the kernel completes the connect, and the
        # HTTP/2 handshake waits, as at a hung daemon.
        silent = sockets.enter_context(socket.socket(socket.AF_UNIX))
        silent.bind(str(odd / "silent.sock"))
        silent.listen()
        env["MEMVAULT_TS_SILENT_SOCKET"] = str(odd / "silent.sock")
        (odd / "plain-file.sock").write_text("")
        env["MEMVAULT_TS_NOT_A_SOCKET"] = str(odd / "plain-file.sock")
        if os.getuid() == 0:  # only root can make a socket another uid owns
            foreign = sockets.enter_context(socket.socket(socket.AF_UNIX))
            foreign.bind(str(odd / "foreign.sock"))
            foreign.listen()  # listening: only the ownership check stands in the way
            os.chown(odd / "foreign.sock", OTHER_UID, OTHER_UID)
            env["MEMVAULT_TS_FOREIGN_SOCKET"] = str(odd / "foreign.sock")
        run = subprocess.run([_need_node(), "--test", str(built / "test")], env=env,
                             capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\n{ts_daemon.log[-4000:]}"
    assert "# fail 0" in run.stdout and "# pass 0" not in run.stdout, run.stdout


# Each case: the environment the client starts in (HOME, MEMVAULT_HOME and the
# XDG variables; nothing else is read).
SOCKET_RULE_CASES = {
    "MEMVAULT_HOME wins": {"MEMVAULT_HOME": "/srv/mv", "XDG_RUNTIME_DIR": "/run/user/7"},
    "MEMVAULT_HOME with ~": {"MEMVAULT_HOME": "~/mv-test", "HOME": "/home/ada"},
    "relative MEMVAULT_HOME": {"MEMVAULT_HOME": "rel/home"},
    "empty MEMVAULT_HOME is unset": {"MEMVAULT_HOME": "", "XDG_RUNTIME_DIR": "/run/user/7"},
    "runtime dir": {"XDG_RUNTIME_DIR": "/run/user/1000", "XDG_DATA_HOME": "/data"},
    "data home without a runtime dir": {"XDG_DATA_HOME": "/data", "HOME": "/home/ada"},
    "relative data home is ignored": {"XDG_DATA_HOME": "data", "HOME": "/home/ada"},
    "home alone": {"HOME": "/home/ada"},
    "relative HOME is ignored": {"HOME": "not/absolute"},
}


def test_the_socket_rule_is_the_python_clients(built: Path, tmp_path: Path) -> None:
    script = ("const {socketPath} = require(process.argv[1]);"
              "const cases = JSON.parse(process.argv[2]);"
              "const found = cases.map((env) => socketPath(undefined, env));"
              "process.stdout.write(JSON.stringify(found));")
    run = subprocess.run([_need_node(), "-e", script, str(built / "src" / "paths.js"),
                          json.dumps(list(SOCKET_RULE_CASES.values()))],
                         cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60)
    got = dict(zip(SOCKET_RULE_CASES, json.loads(run.stdout), strict=True))
    expected = {}
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        for name, env in SOCKET_RULE_CASES.items():
            with mock.patch.dict(os.environ, env, clear=True):
                # What memvault.Connection connects to when given no socket.
                expected[name] = str(paths.resolve().socket.expanduser().absolute())
    finally:
        os.chdir(cwd)
    assert got == expected


def test_committed_typescript_matches_the_protos(tmp_path: Path) -> None:
    _need_node()
    subprocess.run([str(CLIENT / "generate"), str(tmp_path)], check=True, timeout=120,
                   env=dict(os.environ, PYTHON=sys.executable))
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.ts"))
    assert generated, "ts-proto generated nothing"
    committed = sorted(p.relative_to(GENERATED) for p in GENERATED.rglob("*.ts"))
    assert committed == generated, "run scripts/gen-protos"
    for rel in generated:
        assert (GENERATED / rel).read_bytes() == (tmp_path / rel).read_bytes(), (
            f"clients/typescript/src/gen/{rel} is stale against proto/; run scripts/gen-protos"
        )
