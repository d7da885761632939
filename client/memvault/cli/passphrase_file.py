"""The passphrase file a service unlocks a key-file vault with.

A vault on a machine without an OS keyring keeps its key in `data/vault.key`,
wrapped under a passphrase (docs/format.md), which the daemon needs at every
start. A service has no terminal to ask on, so `memvault service install`
points it at a file holding the passphrase (`MEMVAULT_PASSPHRASE_FILE`), and
`memvault doctor` checks that the installed service can unlock the vault with
it. The file is the user's, a regular file that only they may read (the
daemon refuses one its group or others may read); its first line counts.

Whether a file opens the key file is asked of the daemon's own code
(`daemon_probe.py`): it reads `vault.key` and runs Argon2id once (0.09 s);
it starts no daemon and writes nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import click

from memvault.cli.daemon_probe import last_line
from memvault.cli.daemon_probe import run as run_probe
from memvault.cli.input import secret
from memvault.cli.service_templates import PASSPHRASE_FILE_ENV
from memvault_base.durable import sync_dir
from memvault_base.errors import InvalidArgument, Locked
from memvault_base.paths import Paths

__all__ = ["ENV", "check", "default_location", "for_service", "unlocks"]

ENV = PASSPHRASE_FILE_ENV

_UNLOCK_PROBE = """
import sys
from pathlib import Path
from memvault_base.errors import MemvaultError
from memvaultd.storage.keys import load_vault_key
from memvaultd.storage.vault_info import VaultInfo
data = Path(sys.argv[1])
try:
    info = VaultInfo.load(data)
    if info is None:
        raise SystemExit(f"no vault in {data} (no vault.json)")
    print(load_vault_key(data, info.vault_id_bytes, prompt=False).detail)
except MemvaultError as err:
    raise SystemExit(" ".join(str(err).split()))
"""


def default_location(paths: Paths) -> Path:
    """Where `service install` keeps a passphrase typed at its prompt: beside
    config.toml (`~/.config/memvault/passphrase`, or `MEMVAULT_HOME/passphrase`)."""
    return paths.config_file.parent / "passphrase"


def check(path: Path) -> None:
    """InvalidArgument unless `path` is a regular file of this user's that
    only they may read."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InvalidArgument(f"the passphrase file {path} does not exist") from None
    except OSError as err:
        raise InvalidArgument(f"the passphrase file {path} cannot be read: {err.strerror}"
                              ) from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidArgument(f"the passphrase file {path} is not a regular file")
    if info.st_uid != os.getuid():
        raise InvalidArgument(f"the passphrase file {path} belongs to uid {info.st_uid}, not "
                              f"you: the daemon runs as you and keeps it so")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise InvalidArgument(f"the passphrase file {path} is mode {mode:o}: other users may "
                              f"read it; chmod 600 {path}")


def unlocks(paths: Paths, path: Path) -> str:
    """How the vault of `paths` opens with the passphrase in `path` (the
    daemon's words); Locked, saying why, when it does not."""
    env = {k: v for k, v in os.environ.items() if k != "MEMVAULT_PASSPHRASE"}
    done = run_probe(_UNLOCK_PROBE, str(paths.data_dir), env=env | {ENV: str(path)})
    if done.returncode != 0:
        raise Locked(last_line(done.stderr))
    return done.stdout.strip()


def for_service(paths: Paths, given: Path | None, *, dry_run: bool,
                from_manager: Callable[[], str | None]) -> Path | None:
    """The passphrase file the service is to read, checked: `given`, else
    `$MEMVAULT_PASSPHRASE_FILE`, else, for a vault whose key is in a key
    file, the one at `default_location` or the passphrase typed at the
    terminal and kept there. None: the service needs none (the key is in the
    OS keyring, or there is no vault yet), or the service manager's own
    environment gives one (`from_manager` names the variable)."""
    if given is None and os.environ.get(ENV):
        given = Path(os.environ[ENV])
    key_file = paths.key_file
    if given is None:
        if not key_file.exists():
            return None
        variable = from_manager()
        if variable is not None:
            click.echo(f"the service's passphrase comes from the service manager's environment "
                       f"({variable}), not checked; `--passphrase-file FILE` is checked, and "
                       "seen by this service alone", err=True)
            return None
        given = default_location(paths)
        if not given.exists() and not dry_run:
            _ask_and_keep(paths, given)
    path = given.expanduser().absolute()
    if dry_run:
        return path
    check(path)
    if key_file.exists():
        try:
            unlocks(paths, path)
        except Locked as err:  # the file given cannot serve: bad input, as for the daemon
            raise InvalidArgument(str(err)) from None
    return path


def _ask_and_keep(paths: Paths, path: Path) -> None:
    """Ask for the key file's passphrase and keep it in `path`, 0600, once it
    has opened the key file."""
    passphrase = secret(
        "Passphrase of the vault's key file", f"the passphrase of the key file {paths.key_file}",
        f"give --passphrase-file FILE (the passphrase on its first line, mode 0600) or set {ENV}")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    trial = path.with_name(path.name + ".tmp")
    trial.unlink(missing_ok=True)
    descriptor = os.open(trial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(passphrase + "\n")
        file.flush()
        os.fsync(file.fileno())
    try:
        unlocks(paths, trial)
    except Locked as err:
        trial.unlink()
        raise InvalidArgument(f"the passphrase typed does not open the key file {paths.key_file}"
                              f" ({err}): nothing was written") from None
    trial.replace(path)
    sync_dir(path.parent)
    click.echo(f"kept the passphrase in {path} (mode 600), for the service", err=True)
