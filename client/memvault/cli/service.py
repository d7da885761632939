"""`memvault service install | uninstall | status`: run memvaultd at login.

Linux: a systemd user unit, `~/.config/systemd/user/memvaultd.service`,
enabled and started with `systemctl --user`. macOS: a launchd agent,
`~/Library/LaunchAgents/dev.memvault.memvaultd.plist`, loaded with
`launchctl bootstrap gui/$UID`. `--dry-run` prints the file and the commands
and touches nothing; `--platform` renders either on any machine. The files
themselves are written in `service_templates.py`.

The unit runs the `memvaultd` installed beside this Python (a virtualenv's
`bin/`), found once at install time and written as an absolute path: a user
manager's PATH is not the shell's.

A vault whose key is in a key file gets its passphrase from a file named at
install (`--passphrase-file`, `$MEMVAULT_PASSPHRASE_FILE`, or typed at the
prompt and kept beside config.toml; `passphrase_file.py`), checked to open
the key file before anything is written.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import click

from memvault.cli import output
from memvault.cli.passphrase_file import for_service as passphrase_file_for_service
from memvault.cli.service_templates import (
    AGENT_LABEL,
    PASSPHRASE_FILE_ENV,
    SERVICE_ENVIRONMENT,
    UNIT_NAME,
    agent_plist,
    in_private_tmp,
    render_unit,
    unit_environment,
)
from memvault_base import paths
from memvault_base.errors import MemvaultError

__all__ = ["ServicePlan", "installed_settings", "manager_passphrase", "plan", "service",
           "service_file"]

Platform = Literal["linux", "macos"]


@dataclass(frozen=True)
class ServicePlan:
    """What install writes and runs, and what uninstall undoes."""

    platform: Platform
    path: Path
    content: bytes
    install: list[list[str]]
    uninstall: list[list[str]]
    status: list[list[str]]
    make_dirs: list[Path] = field(default_factory=list)
    passphrase_file: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "path": str(self.path),
            "content": self.content.decode(),
            "install": [" ".join(c) for c in self.install],
            "uninstall": [" ".join(c) for c in self.uninstall],
            "passphrase_file": str(self.passphrase_file) if self.passphrase_file else None,
        }


def current_platform() -> Platform:
    return "macos" if sys.platform == "darwin" else "linux"


def find_daemon() -> Path:
    """The `memvaultd` beside this interpreter, else the first on PATH."""
    beside = Path(sys.executable).parent / "memvaultd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.absolute()
    found = shutil.which("memvaultd")
    if found is None:
        raise MemvaultError("memvaultd is not installed here; install memvault[daemon] first "
                            "(the service runs the daemon, this client only talks to it)")
    return Path(found).absolute()


def service_file(platform: Platform, user_home: Path | None = None) -> Path:
    """Where the unit (or plist) of this user (or `user_home`) is installed."""
    user_home = user_home or Path.home()
    if platform == "linux":
        return user_home / ".config" / "systemd" / "user" / UNIT_NAME
    return user_home / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"


def installed_settings(platform: Platform, path: Path) -> tuple[str | None, Path | None]:
    """(MEMVAULT_HOME, passphrase file) of the service installed at `path`."""
    if platform == "linux":
        environment = unit_environment(path.read_text(encoding="utf-8"))
    else:
        with path.open("rb") as file:
            environment = plistlib.load(file).get("EnvironmentVariables", {})
    given = environment.get(PASSPHRASE_FILE_ENV)
    return environment.get("MEMVAULT_HOME"), Path(given) if given else None


def manager_passphrase(platform: Platform) -> str | None:
    """Which of MEMVAULT_PASSPHRASE and MEMVAULT_PASSPHRASE_FILE the systemd
    user manager's own environment sets (`systemctl --user set-environment`,
    inherited by every unit), if any; never on macOS."""
    if platform != "linux":
        return None
    try:
        done = _run(["systemctl", "--user", "show-environment"], check=False)
    except MemvaultError:
        return None
    names = {line.partition("=")[0] for line in done.stdout.splitlines()}
    return next((name for name in ("MEMVAULT_PASSPHRASE", PASSPHRASE_FILE_ENV) if name in names),
                None)


def plan(platform: Platform, *, daemon: Path, home: str | None = None,
         user_home: Path | None = None, uid: int | None = None,
         passphrase_file: Path | None = None) -> ServicePlan:
    """The service for `platform`, running `daemon`, for this user (or
    `user_home`), reading its key file's passphrase from `passphrase_file`."""
    user_home = user_home or Path.home()
    environment = dict(SERVICE_ENVIRONMENT)
    if home:
        environment["MEMVAULT_HOME"] = str(Path(home).expanduser().absolute())
    if os.environ.get("MEMVAULT_CACHE_DIR"):  # the service uses the cache this shell does
        environment["MEMVAULT_CACHE_DIR"] = str(paths.resolve(home).cache_dir)
    if passphrase_file is not None:
        environment[PASSPHRASE_FILE_ENV] = str(passphrase_file)
    if platform == "linux":
        return _systemd_plan(daemon, environment, user_home, passphrase_file)
    return _launchd_plan(daemon, environment, user_home, os.getuid() if uid is None else uid,
                         passphrase_file)


def _systemd_plan(daemon: Path, environment: dict[str, str], user_home: Path,
                  passphrase_file: Path | None) -> ServicePlan:
    home = environment.get("MEMVAULT_HOME")
    # Only what the daemon writes is writable: its data (or all of MEMVAULT_HOME,
    # which holds data and socket), its cache, and the user's model cache
    # (shared by every home): without it the first start could not write the
    # exported model and would stop. The runtime directory is the manager's.
    writable = [Path(home) if home else paths.resolve().data_dir]
    cache = paths.resolve(home).cache_dir
    for path in (cache, paths.resolve(home).model_cache):
        if not any(path.is_relative_to(done) for done in writable):
            writable.append(path)
    # A private /tmp would hide a daemon or data under /tmp (service_templates.py).
    hidden = next((str(path) for path in (daemon, *writable) if in_private_tmp(str(path))), None)
    if hidden:
        environment = environment | {"TMPDIR": str(cache)}
    unit = render_unit(str(daemon), [str(path) for path in writable], environment, hidden)
    systemctl = ["systemctl", "--user"]
    return ServicePlan(
        platform="linux",
        path=service_file("linux", user_home),
        content=unit.encode(),
        install=[[*systemctl, "daemon-reload"], [*systemctl, "enable", "--now", UNIT_NAME]],
        uninstall=[[*systemctl, "disable", "--now", UNIT_NAME]],
        status=[[*systemctl, "is-active", UNIT_NAME], [*systemctl, "is-enabled", UNIT_NAME]],
        make_dirs=writable,
        passphrase_file=passphrase_file,
    )


def _launchd_plan(daemon: Path, environment: dict[str, str], user_home: Path,
                  uid: int, passphrase_file: Path | None) -> ServicePlan:
    logs = user_home / "Library" / "Logs" / "memvault"
    path = service_file("macos", user_home)
    content = plistlib.dumps(agent_plist(str(daemon), str(logs / "memvaultd.log"), environment))
    domain = f"gui/{uid}"
    return ServicePlan(
        platform="macos",
        path=path,
        content=content,
        install=[["launchctl", "bootstrap", domain, str(path)]],
        uninstall=[["launchctl", "bootout", f"{domain}/{AGENT_LABEL}"]],
        status=[["launchctl", "print", f"{domain}/{AGENT_LABEL}"]],
        make_dirs=[logs],
        passphrase_file=passphrase_file,
    )


def install(service_plan: ServicePlan) -> None:
    for directory in service_plan.make_dirs:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    service_plan.path.parent.mkdir(parents=True, exist_ok=True)
    temporary = service_plan.path.with_suffix(".tmp")
    temporary.write_bytes(service_plan.content)
    temporary.replace(service_plan.path)
    for command in service_plan.install:
        _run(command)


def uninstall(service_plan: ServicePlan) -> bool:
    """Stop and remove the service; False if it was not installed."""
    if not service_plan.path.exists():
        return False
    for command in service_plan.uninstall:
        _run(command, check=False)  # already stopped is fine
    service_plan.path.unlink()
    if service_plan.platform == "linux":
        _run(["systemctl", "--user", "daemon-reload"])
    return True


def state(service_plan: ServicePlan) -> dict[str, Any]:
    """Installed? Current with what install would write? What the manager says."""
    installed = service_plan.path.exists()
    manager: list[str] = []
    if installed:
        for command in service_plan.status:
            done = _run(command, check=False)
            manager.append((done.stdout or done.stderr).strip().splitlines()[0]
                           if (done.stdout or done.stderr).strip() else f"exit {done.returncode}")
    return {
        "platform": service_plan.platform,
        "path": str(service_plan.path),
        "installed": installed,
        "current": installed and service_plan.path.read_bytes() == service_plan.content,
        "manager": manager,
    }


def _run(command: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise MemvaultError(f"{command[0]} not found: is this the right --platform?") from None
    if check and done.returncode != 0:
        why = " ".join((done.stderr or done.stdout).split()) or f"exit {done.returncode}"
        raise MemvaultError(f"`{' '.join(command)}` failed: {why}")
    return done


# -- the commands -------------------------------------------------------------------------

platform_option = click.option(
    "--platform", type=click.Choice(["linux", "macos"]), default=None,
    help="Render for this platform (default: this machine's).")
dry_run_option = click.option("--dry-run", is_flag=True,
                              help="Print what would be written and run; change nothing.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _home() -> str | None:
    home: str | None = click.get_current_context().find_root().params.get("home")
    return home or os.environ.get("MEMVAULT_HOME")


def _platform(platform: str | None) -> Platform:
    return "macos" if (platform or current_platform()) == "macos" else "linux"


def _plan_from_context(platform: str | None, passphrase: Path | None = None) -> ServicePlan:
    return plan(_platform(platform), daemon=find_daemon(), home=_home(),
                passphrase_file=passphrase)


@click.group()
def service() -> None:
    """Run memvaultd at login (systemd user unit or launchd agent)."""


@service.command("install")
@platform_option
@click.option("--passphrase-file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, metavar="FILE",
              help="For a vault whose key is in a key file: the file whose first line is its "
                   "passphrase (yours, mode 0600). Default: $MEMVAULT_PASSPHRASE_FILE, else "
                   "asked for at the terminal and kept beside config.toml.")
@dry_run_option
@json_option
def install_command(platform: str | None, passphrase_file: Path | None, dry_run: bool,
                    as_json: bool) -> None:
    """Write the unit (or plist), then enable and start it."""
    chosen = _platform(platform)
    passphrase = passphrase_file_for_service(
        paths.resolve(_home()), passphrase_file, dry_run=dry_run,
        from_manager=lambda: manager_passphrase(chosen))
    service_plan = _plan_from_context(chosen, passphrase)
    if dry_run:
        _show_plan(service_plan, service_plan.install, as_json)
        return
    install(service_plan)
    if as_json:
        output.echo_json({**service_plan.to_dict(), "installed": True})
    else:
        reads = (f", which reads its passphrase from {passphrase}" if passphrase else "")
        click.echo(f"installed {service_plan.path} and started memvaultd{reads}")


@service.command("uninstall")
@platform_option
@dry_run_option
@json_option
def uninstall_command(platform: str | None, dry_run: bool, as_json: bool) -> None:
    """Stop the service and remove its file."""
    service_plan = _plan_from_context(platform)
    if dry_run:
        commands = [*service_plan.uninstall, ["rm", str(service_plan.path)]]
        if service_plan.platform == "linux":
            commands.append(["systemctl", "--user", "daemon-reload"])
        _show_plan(service_plan, commands, as_json, content=False)
        return
    removed = uninstall(service_plan)
    if as_json:
        output.echo_json({"path": str(service_plan.path), "removed": removed})
    else:
        click.echo(f"removed {service_plan.path}" if removed else "not installed")


@service.command("status")
@platform_option
@json_option
def status_command(platform: str | None, as_json: bool) -> None:
    """Whether the service is installed, current, and running."""
    chosen = _platform(platform)
    where = service_file(chosen)
    # Current: what install would write with the passphrase file it was given.
    passphrase = installed_settings(chosen, where)[1] if where.exists() else None
    result = state(_plan_from_context(chosen, passphrase))
    if as_json:
        output.echo_json(result)
        return
    if not result["installed"]:
        click.echo(f"not installed ({result['path']} does not exist)")
        return
    current = "current" if result["current"] else "differs from what install would write"
    click.echo(f"installed: {result['path']} ({current})")
    for line in result["manager"]:
        click.echo(f"  {line}")


def _show_plan(service_plan: ServicePlan, commands: list[list[str]], as_json: bool,
               *, content: bool = True) -> None:
    if as_json:
        shown = service_plan.to_dict()
        shown["commands"] = [" ".join(c) for c in commands]
        output.echo_json(shown)
        return
    if content:
        click.echo(f"# {service_plan.path}")
        click.echo(service_plan.content.decode(), nl=False)
        click.echo()
    for command in commands:
        click.echo("$ " + " ".join(command))
