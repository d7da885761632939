"""A script that never closes its `Client` still exits, as users write it.

`c = Client(); c.recall("x")` and the end of the script: gRPC's channel,
left open, kept the interpreter waiting at exit for good (killed after 400 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from .daemon_process import DaemonProcess

# A script that exits on its own does so in well under a second once the
# imports are done; 30 s leaves room for a loaded 2-core machine.
_EXIT_WITHIN_S = 30


@pytest.mark.parametrize("call", ['c.recall("where is the config")', "c.status()",
                                  'c.remember("a script forgot to close its client")'])
def test_a_script_that_never_closes_its_client_exits(daemon: DaemonProcess, call: str) -> None:
    script = textwrap.dedent(f"""
        from memvault import Client
        c = Client(socket={str(daemon.socket)!r})
        {call}
        print("DONE")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=_EXIT_WITHIN_S, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert "DONE" in done.stdout
