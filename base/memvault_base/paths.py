"""Where memvault keeps its config, data, socket and cache.

One rule, used by the daemon and every client alike, so that `Client()` finds
the socket the daemon bound without being told:

1. `MEMVAULT_HOME=DIR` (or `--home DIR`): everything under DIR —
   `DIR/config.toml`, `DIR/data/`, `DIR/run/memvault.sock`, `DIR/cache/`,
   `DIR/state/`.
   Tests, benchmarks and several instances on one machine stay apart this way.
2. Otherwise the platform's directories (platformdirs): on Linux
   `~/.config/memvault/config.toml`, `~/.local/share/memvault/`,
   `$XDG_RUNTIME_DIR/memvault/memvault.sock` (falling back to the data dir's
   `run/` when there is no runtime dir), `~/.cache/memvault/`,
   `~/.local/state/memvault/`.

The state directory holds a client's small bookkeeping that is neither user
data nor derived from public inputs: how far the Claude Code hooks have read
each session's transcript (`memvault.hooks.offsets`), never any text of it.

The cache holds only files derived from public inputs, never user data, so
it is plaintext and may be deleted at any time. `MEMVAULT_CACHE_DIR` moves
it, under either rule.

The embedding model exported to ONNX (~90 MB, 8 s to make) is the same for
every home of a user, so it has one cache per user under neither rule:
`~/.cache/memvault/models` (the platform's cache), or `MEMVAULT_CACHE_DIR/models`
when that is set (tests and benchmarks keep the user's own cache untouched
this way). Its files are named by the model's content
(`memvaultd.embedding.onnx_cache`): homes and installs share one export.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

SOCKET_NAME = "memvault.sock"
# A vault whose key is not in the OS keyring keeps it here, in its data
# directory, wrapped under a passphrase: the daemon reads it, and the client
# (`doctor`, `service install`) tells such a vault by it.
KEY_FILE_NAME = "vault.key"


@dataclass(frozen=True)
class Paths:
    config_file: Path
    data_dir: Path
    socket: Path
    cache_dir: Path
    model_cache: Path
    state_dir: Path

    @property
    def run_dir(self) -> Path:
        return self.socket.parent

    @property
    def key_file(self) -> Path:
        return self.data_dir / KEY_FILE_NAME


def resolve(home: str | os.PathLike[str] | None = None) -> Paths:
    """The paths for `home`, else `$MEMVAULT_HOME`, else the platform defaults."""
    home = home or os.environ.get("MEMVAULT_HOME") or None
    cache = os.environ.get("MEMVAULT_CACHE_DIR")
    cache_dir = Path(cache).expanduser().absolute() if cache else None
    user_cache = Path(platformdirs.user_cache_dir("memvault", appauthor=False))
    model_cache = (cache_dir or user_cache) / "models"
    if home:
        root = Path(home).expanduser().absolute()
        return Paths(root / "config.toml", root / "data", root / "run" / SOCKET_NAME,
                     cache_dir or root / "cache", model_cache, root / "state")
    config_dir = Path(platformdirs.user_config_dir("memvault", appauthor=False))
    data_dir = Path(platformdirs.user_data_dir("memvault", appauthor=False))
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    run_dir = Path(runtime) / "memvault" if runtime else data_dir / "run"
    state_dir = Path(platformdirs.user_state_dir("memvault", appauthor=False))
    return Paths(config_dir / "config.toml", data_dir, run_dir / SOCKET_NAME,
                 cache_dir or user_cache, model_cache, state_dir)
