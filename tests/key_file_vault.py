"""A vault whose key is in a passphrase-wrapped key file, as the first start of
memvaultd leaves it on a machine without an OS keyring (`Vault.open`: the
vault named in `vault.json`, then its key sealed in `vault.key`), made
without starting a daemon, in a subprocess running the daemon's own code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import sys
from pathlib import Path
from memvaultd.embedding.embedder import DEFAULT_MODEL, KNOWN_DIMENSIONS
from memvaultd.storage.keys import create_vault_key
from memvaultd.storage.vault_info import VaultInfo, copy_mark
data = Path(sys.argv[1])
data.mkdir(mode=0o700, parents=True)
info = VaultInfo.new(DEFAULT_MODEL, KNOWN_DIMENSIONS[DEFAULT_MODEL], copy_mark(data))
info.save(data)
create_vault_key(data, info.vault_id_bytes, storage="keyfile", prompt=False)
"""


def make_key_file_vault(data_dir: Path, passphrase: str) -> Path:
    """A new vault in `data_dir` (which must not exist), its key under `passphrase`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(MEMVAULT_PASSPHRASE=passphrase,
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    done = subprocess.run([sys.executable, "-P", "-c", _SCRIPT, str(data_dir)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (data_dir / "vault.key").is_file()
    return data_dir
