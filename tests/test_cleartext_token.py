"""A device token is not sent in clear across a network unless the user says so.

`grpc://` has no TLS: the token in every call's header is readable by anyone
on the path. `init` and `join` refuse it to a host other than this one
(anything but "localhost" and loopback addresses; names are not resolved)
unless `--allow-cleartext-token` is given, and say to use `grpcs://`. A
device set up with the flag resumes after a restart without it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from memvault_base.errors import InvalidArgument
from memvaultd.sync.remotes import open_remote

from .daemon_process import DaemonProcess
from .server_process import ServerProcess, create_token
from .test_cli import memvault

OTHER_HOSTS = ["203.0.113.7", "10.0.0.1", "sync.example.org", "[2001:db8::1]"]
THIS_HOST = ["127.0.0.1", "127.8.9.10", "localhost", "[::1]"]


@pytest.mark.parametrize("host", OTHER_HOSTS)
def test_a_token_in_clear_to_another_host_needs_the_flag(host: str) -> None:
    url = f"grpc://{host}:7433"
    with pytest.raises(InvalidArgument, match="grpcs://") as refused:
        open_remote(url, token="mvs_secret", vault_id="v", setting_up=True)
    assert "--allow-cleartext-token" in str(refused.value)
    assert "mvs_secret" not in str(refused.value)
    for allowed in (
            {"url": url, "token": "mvs_secret", "allow_cleartext_token": True},
            {"url": f"grpcs://{host}:7433", "token": "mvs_secret"},
            {"url": url, "token": None}):  # no token, nothing to read
        open_remote(allowed.pop("url"), vault_id="v", setting_up=True, **allowed).close()


@pytest.mark.parametrize("host", THIS_HOST)
def test_a_token_to_this_host_is_fine(host: str) -> None:
    open_remote(f"grpc://{host}:7433", token="t", vault_id="v", setting_up=True).close()


def _address_of_this_host() -> str | None:
    """An address of this machine other than loopback, if it has one: the
    one a packet to a documentation address would leave from (UDP's
    connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def _status(home: Path) -> dict[str, object]:
    done = memvault(home, "sync", "status", "--json")
    assert done.returncode == 0, done.stderr
    status: dict[str, object] = json.loads(done.stdout)
    return status


def test_init_and_join_in_clear_through_the_cli(tmp_path: Path) -> None:
    host = _address_of_this_host()
    if host is None:
        pytest.skip("this machine has no address but loopback")
    data = tmp_path / "server"
    data.mkdir()
    token = create_token(data, "devices")
    a = DaemonProcess(tmp_path / "a").start(wait=False)
    b = DaemonProcess(tmp_path / "b").start(wait=False)
    with a, b, ServerProcess(data, "--listen", "0.0.0.0:0").start() as server:
        a.wait_serving()
        b.wait_serving()
        url = f"grpc://{host}:{server.port}"
        refused = memvault(a.home, "init", "--remote", url, "--token", token)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "grpcs://" in refused.stderr and "--allow-cleartext-token" in refused.stderr
        assert _status(a.home)["configured"] is False

        done = memvault(a.home, "init", "--remote", url, "--token", token,
                        "--allow-cleartext-token", "--json")
        assert done.returncode == 0, done.stderr
        key = json.loads(done.stdout)["recovery_key"]
        joining = ["join", "--remote", url, "--token", token, "--recovery-key", key]
        refused = memvault(b.home, *joining)
        assert refused.returncode == 2 and "grpcs://" in refused.stderr
        done = memvault(b.home, *joining, "--allow-cleartext-token")
        assert done.returncode == 0, done.stderr

        a.stop()
        a.start()  # resumes what was set up, with no flag to give
        assert memvault(a.home, "remember", "written after a restart").returncode == 0
        assert memvault(a.home, "sync", "now").returncode == 0
        status = _status(a.home)
        assert status["configured"] is True and status["state"] == "idle", status
        a.stop()
        b.stop()
