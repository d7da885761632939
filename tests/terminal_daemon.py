"""A real memvaultd started as a person starts it on a headless machine: on a
terminal, `MEMVAULT_PASSPHRASE` unset, the passphrase typed at its prompt
(README, "Headless machines"). The daemon's terminal is a pseudo-terminal
whose other end this helper holds, answering every passphrase prompt."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from pathlib import Path

from .daemon_process import PASSPHRASE, DaemonProcess

# In the child, after setsid: stdin (the pseudo-terminal) becomes the
# controlling terminal, the /dev/tty getpass reads from; then the command.
# A small program of its own rather than Popen's preexec_fn: preexec_fn makes
# Popen fork where it would vfork, and grpcio 1.85's fork handlers, run in a
# child of this test process (which holds live channels), abort that child
# before its exec now and then (grpc/grpc#43055: 8 of 300 such starts, 0 of
# 300 without preexec_fn, on this suite's machine).
_TAKE_THE_TERMINAL = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                      "os.execv(sys.argv[1], sys.argv[1:])")


def on_its_terminal(command: list[str]) -> list[str]:
    """`command`, run so that its stdin (a pseudo-terminal) is its
    controlling terminal; start it with `start_new_session=True`."""
    return [sys.executable, "-c", _TAKE_THE_TERMINAL, *command]


class TerminalDaemon(DaemonProcess):
    def __init__(self, home: Path, **env: str) -> None:
        super().__init__(home, MEMVAULT_PASSPHRASE="", **env)
        self.prompts = 0
        self._master: int | None = None

    def start(self, wait: bool = True, timeout: float = 90.0) -> TerminalDaemon:
        master, slave = os.openpty()
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            on_its_terminal([sys.executable, "-m", "memvaultd.app.main"]), env=self.env,
            stdin=slave, stdout=log, stderr=log, start_new_session=True)
        os.close(slave)
        log.close()
        # Held open while the daemon runs: closing it hangs the terminal up,
        # and SIGHUP would end the daemon.
        self._master = master
        threading.Thread(target=self._answer, args=(master,), daemon=True).start()
        if wait:
            self.wait_serving(timeout)
        return self

    def _answer(self, master: int) -> None:
        seen = b""
        while True:
            try:
                ready, _, _ = select.select([master], [], [], 1.0)
                if not ready:
                    if self.proc is None or self.proc.poll() is not None:
                        return
                    continue
                chunk = os.read(master, 1024)
            except OSError:  # the daemon is gone, or the terminal was closed
                return
            if not chunk:
                return
            seen += chunk
            if seen.rstrip().endswith(b"passphrase:"):
                self.prompts += 1
                seen = b""
                os.write(master, PASSPHRASE.encode() + b"\n")

    def _close_terminal(self) -> None:
        if self._master is not None:
            os.close(self._master)
            self._master = None

    def stop(self, timeout: float = 30.0) -> int:
        try:
            return super().stop(timeout)
        finally:
            self._close_terminal()

    def kill(self) -> None:
        try:
            super().kill()
        finally:
            self._close_terminal()

    def wait_killed(self, timeout: float = 60.0) -> int:
        """The exit status once the daemon has ended by itself (a crash point)."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        finally:
            self._close_terminal()
