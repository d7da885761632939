"""The front process (`front/`), as the core starts, watches and stops it.

It runs as `python -m memvaultd.serve.front` with the core's interpreter:
started by `start`, which returns once it serves the public socket (it
writes READY on its stdout); its stdin is a pipe from the core whose end
tells it that the core is gone, however the core ended. A front that exits
unasked is reported (`on_exit`); `stop` asks it to finish its calls and
exit (SIGTERM), and kills it if it does not.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memvault_base.errors import MemvaultError
from memvaultd.serve.front.link import READY

log = logging.getLogger("memvaultd.front")

# Python and the front's imports take ~0.15 s on the idle 2-core machine of
# docs/benchmarks.md. Generous, for a machine busy loading a large vault.
_START_TIMEOUT_S = 30.0


def _environment() -> dict[str, str]:
    """What the front needs of the daemon's environment: where Python and its
    packages are, the locale, grpc's own settings. Not the passphrase
    (MEMVAULT_PASSPHRASE), a remote's credentials or NOTIFY_SOCKET: it has
    no use for them, and a process holds no secret it was never given."""
    names = {"PATH", "HOME", "TMPDIR", "VIRTUAL_ENV", "LANG"}
    return {name: value for name, value in os.environ.items()
            if name in names or name.startswith(("PYTHON", "LC_", "GRPC_"))}


class FrontProcess:
    """Started by `start`, which returns once it serves the public socket;
    `on_exit` is called (from a thread) if it ever exits unasked."""

    def __init__(self, public: Path, inner: Path, link: Path, grace: float,
                 on_exit: Callable[[int], None]) -> None:
        # -P: nothing from the working directory on sys.path; `python -m`
        # puts it first, and a module planted there would relay the socket.
        self._command = [sys.executable, "-P", "-m", "memvaultd.serve.front",
                         "--public", str(public), "--inner", str(inner), "--link", str(link),
                         "--grace", str(grace),
                         "--log-level", logging.getLevelName(logging.getLogger().level)]
        self._on_exit = on_exit
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False

    def start(self) -> None:
        # stdin: a pipe the front reads to its end, which comes when this
        # process exits however it exits. stdout: its one line, READY.
        # stderr: the daemon's own, so its log lines land in the same place.
        proc = self._proc = subprocess.Popen(self._command, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, env=_environment())
        assert proc.stdout is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            readable, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
            if not readable:
                break
            chunk = os.read(proc.stdout.fileno(), 64)
            if not chunk:
                break
            line += chunk
        proc.stdout.close()
        if line != READY:
            proc.kill()
            code = proc.wait()
            raise MemvaultError(f"the front process did not start (exit status {code}); "
                                "see the log above")
        threading.Thread(target=self._watch, name="front-watch", daemon=True).start()

    def _watch(self) -> None:
        assert self._proc is not None
        code = self._proc.wait()
        if not self._stopping:
            self._on_exit(code)

    def stop(self, timeout: float) -> None:
        """Ask it to finish its calls in flight and exit; kill it after `timeout` s."""
        proc = self._proc
        if proc is None:
            return
        self._stopping = True
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("the front process did not stop within %.0f s; killing it", timeout)
                proc.kill()
                proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
