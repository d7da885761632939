"""A real memvaultd in a subprocess, on a temporary MEMVAULT_HOME, for tests.

It runs exactly as users run it (`python -m memvaultd.app.main`), with the real
model, and is stopped with SIGTERM or killed with SIGKILL like a crash.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

PASSPHRASE = "correct horse battery staple"


def daemon_env(home: Path, **extra: str) -> dict[str, str]:
    # os.environ carries MEMVAULT_CACHE_DIR (conftest.py's `model_cache`): the
    # model exported once there serves every test daemon, and the user's own
    # model cache is never written.
    env = dict(os.environ)
    env.update(
        MEMVAULT_HOME=str(home),
        MEMVAULT_PASSPHRASE=PASSPHRASE,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        # A daemon that hangs shows its threads' stacks (DaemonProcess.stop).
        PYTHONFAULTHANDLER="1",
        # The key-file path unless a test asks for the keyring.
        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
    )
    env.update(extra)
    # An empty value in `extra` means "not set at all".
    return {key: value for key, value in env.items() if value != "" or key not in extra}


class DaemonProcess:
    def __init__(self, home: Path, **env: str) -> None:
        self.home = home
        self.socket = home / "run" / "memvault.sock"
        self.log_path = home.parent / f"{home.name}-daemon.log"
        self.env = daemon_env(home, **env)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True, timeout: float = 90.0, cwd: Path | None = None,
              preexec: Callable[[], None] | None = None) -> DaemonProcess:
        """`preexec` runs in the child before the daemon does (e.g. to enter a
        cgroup: tests/memory_cgroup.py)."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        # -P: as the `memvaultd` script runs, with no working directory on
        # sys.path (tests/test_working_directory.py).
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "memvaultd.app.main"],
            env=self.env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=preexec,
        )
        log.close()
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"memvaultd exited with {self.proc.returncode}:\n{self.log}")
            if self.health() == "SERVING":
                return
            time.sleep(0.1)
        raise TimeoutError(f"memvaultd not SERVING after {timeout} s:\n{self.log}")

    def health(self) -> str:
        if not self.socket.exists():
            return "NO_SOCKET"
        with grpc.insecure_channel(f"unix://{self.socket}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                reply = stub.Check(
                    health_pb2.HealthCheckRequest(service="memvault.v1.Memory"), timeout=1.0
                )
            except grpc.RpcError:
                return "UNREACHABLE"
            return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Where it hangs: on SIGABRT, faulthandler (PYTHONFAULTHANDLER,
            # daemon_env) writes every thread's stack to the log.
            self.proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            raise TimeoutError(f"memvaultd not stopped {timeout} s after SIGTERM; its log:\n"
                               f"{self.log[-30_000:]}") from None

    def front_pid(self) -> int:
        """The pid of the daemon's front process (`memvaultd.serve.front`), its one child."""
        assert self.proc is not None
        children = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                children += (task / "children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])

    def kill_all(self) -> None:
        """SIGKILL to the daemon and its front at once, as a service manager
        kills a unit's processes: neither can clean up after the other."""
        front = self.front_pid()
        os.kill(front, signal.SIGSTOP)  # frozen: it cannot see the daemon end
        self.kill()
        os.kill(front, signal.SIGKILL)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
