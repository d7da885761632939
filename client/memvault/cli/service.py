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
from memvault.cli.service_templates import (
    AGENT_LABEL,
    SERVICE_ENVIRONMENT,
    UNIT_NAME,
    agent_plist,
    in_private_tmp,
    render_unit,
)
from memvault_base import paths
from memvault_base.errors import MemvaultError

__all__ = ["ServicePlan", "plan", "service"]

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "path": str(self.path),
            "content": self.content.decode(),
            "install": [" ".join(c) for c in self.install],
            "uninstall": [" ".join(c) for c in self.uninstall],
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


def plan(platform: Platform, *, daemon: Path, home: str | None = None,
         user_home: Path | None = None, uid: int | None = None) -> ServicePlan:
    """The service for `platform`, running `daemon`, for this user (or `user_home`)."""
    user_home = user_home or Path.home()
    environment = dict(SERVICE_ENVIRONMENT)
    if home:
        environment["MEMVAULT_HOME"] = str(Path(home).expanduser().absolute())
    if os.environ.get("MEMVAULT_CACHE_DIR"):  # the service uses the cache this shell does
        environment["MEMVAULT_CACHE_DIR"] = str(paths.resolve(home).cache_dir)
    if platform == "linux":
        return _systemd_plan(daemon, environment, user_home)
    return _launchd_plan(daemon, environment, user_home, os.getuid() if uid is None else uid)


def _systemd_plan(daemon: Path, environment: dict[str, str], user_home: Path) -> ServicePlan:
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
        path=user_home / ".config" / "systemd" / "user" / UNIT_NAME,
        content=unit.encode(),
        install=[[*systemctl, "daemon-reload"], [*systemctl, "enable", "--now", UNIT_NAME]],
        uninstall=[[*systemctl, "disable", "--now", UNIT_NAME]],
        status=[[*systemctl, "is-active", UNIT_NAME], [*systemctl, "is-enabled", UNIT_NAME]],
        make_dirs=writable,
    )


def _launchd_plan(daemon: Path, environment: dict[str, str], user_home: Path,
                  uid: int) -> ServicePlan:
    logs = user_home / "Library" / "Logs" / "memvault"
    path = user_home / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"
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


def _plan_from_context(platform: str | None) -> ServicePlan:
    home = click.get_current_context().find_root().params.get("home")
    chosen: Platform = "macos" if (platform or current_platform()) == "macos" else "linux"
    return plan(chosen, daemon=find_daemon(), home=home or os.environ.get("MEMVAULT_HOME"))


@click.group()
def service() -> None:
    """Run memvaultd at login (systemd user unit or launchd agent)."""


@service.command("install")
@platform_option
@dry_run_option
@json_option
def install_command(platform: str | None, dry_run: bool, as_json: bool) -> None:
    """Write the unit (or plist), then enable and start it."""
    service_plan = _plan_from_context(platform)
    if dry_run:
        _show_plan(service_plan, service_plan.install, as_json)
        return
    install(service_plan)
    if as_json:
        output.echo_json({**service_plan.to_dict(), "installed": True})
    else:
        click.echo(f"installed {service_plan.path} and started memvaultd")


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
    result = state(_plan_from_context(platform))
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
