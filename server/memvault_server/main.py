"""`memvault-server`: the sync endpoint's command line.

The sync protocol (proto/memvault/v1/sync.proto) and its storage are not
built yet; until they are, the command says so plainly instead of pretending.
"""

from __future__ import annotations

import sys

from . import __version__


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        print(f"memvault-server {__version__}")
        return
    print("memvault-server: sync is not available in this version yet; the daemon works "
          "on its own without it", file=sys.stderr)
    sys.exit(2)
