"""A real memvault-server in a subprocess on an ephemeral loopback port, for tests.

It runs as users run it (`python -m memvault_server.main serve`), binds port
0 and is found by the `listening on HOST:PORT` line of its log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_LISTENING = re.compile(r"listening on [^\s]+:(\d+)")


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "memvault_server.main", *args]


def create_token(data_dir: Path, name: str, account: str | None = None,
                 admin: bool = False) -> str:
    argv = server_command("token", "create", name, "--data", str(data_dir))
    if account:
        argv += ["--account", account]
    if admin:
        argv.append("--admin")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


class ServerProcess:
    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = args
        self.env = dict(os.environ, **(env or {}))
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            server_command("serve", "--listen", "127.0.0.1:0", "--data", str(self.data_dir),
                           *self.args),
            env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:].decode(errors="replace")
            found = _LISTENING.search(text)
            if found:
                self.port = int(found.group(1))
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"memvault-server exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise TimeoutError(f"memvault-server not listening after {timeout} s:\n{self.log}")

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
