"""The systemd user unit and the launchd agent plist: the one place they are written.

Both run `memvaultd` in the foreground as the user, restart it when it fails,
keep the model offline (it ships in a package; a daemon must not stall on the
network at login) and create files for the user alone (umask 077).

Why these hardening options and not others (systemd 252 user manager):

- `ProtectSystem=strict` makes the whole tree read-only, so the data directory
  (or `MEMVAULT_HOME`) and the model cache (`~/.cache/memvault`, the exported
  model) are given back with `ReadWritePaths=`; the socket lives in
  `RuntimeDirectory=memvault` (`$XDG_RUNTIME_DIR/memvault`, where clients look
  for it), created 0700 by the manager and removed when the daemon stops.
- `MemoryDenyWriteExecute=` is left out on purpose: torch's CPU kernels
  (oneDNN) and cffi callbacks (argon2-cffi) map writable+executable pages, and
  the daemon would die with SIGSYS on the first recall.
- `RestrictAddressFamilies=` keeps AF_INET/AF_INET6 for sync and AF_NETLINK for
  address lookups; `ProtectHome=` is left out because the data lives in home.
- `SystemCallFilter=@system-service` with `SystemCallErrorNumber=EPERM`: a
  call outside the set fails with EPERM instead of killing the daemon.
  `systemd-analyze security --offline=true` rates the unit 2.6 ("OK"); it
  was 6.0 ("MEDIUM") without the options from `ProtectHostname=` to this one.
- `PrivateTmp=yes` is left out, with a comment saying why, when the daemon
  or a directory it writes is under /tmp or /var/tmp: a /tmp of its own
  would hide it (a virtualenv made in /tmp fails with status 203/EXEC). The
  shared /tmp is then read-only (`ProtectSystem=strict`), so `TMPDIR` points
  at the model cache: exporting the model needs a temporary directory, and
  without one the daemon fell back to torch and failed to start.
- `LimitCORE=0`: the daemon holds the vault key and every memory in clear,
  and a core file would put them on disk. The daemon also sets its own
  `RLIMIT_CORE` to 0 and `PR_SET_DUMPABLE` to 0 (`memvault_base.secrecy`),
  so it holds under any manager; the unit makes it true from the first
  instruction. The plist's `HardResourceLimits`/`SoftResourceLimits` `Core`
  0 are launchd's equivalent.
- Exit status 2 means "cannot start" (bad config, key locked, socket in use):
  restarting cannot fix it, so `RestartPreventExitStatus=2`.
- A vault whose key is in a key file needs its passphrase at every start,
  and a service has no terminal to ask on: the unit and the plist name the
  file `install` was given in `MEMVAULT_PASSPHRASE_FILE`. Not a credential
  (`LoadCredential=`): under the systemd 252 user manager the tests start,
  a sandboxed unit that loads one created `/run/credentials` on the host,
  after which every sandboxed unit of that manager failed with
  226/NAMESPACE (docs/service.md); a plain file behaves the same under any
  systemd and launchd. The daemon reads the file itself and
  refuses it if its group or others may read it.
"""

from __future__ import annotations

import shlex
from typing import Any

UNIT_NAME = "memvaultd.service"
AGENT_LABEL = "dev.memvault.memvaultd"
PASSPHRASE_FILE_ENV = "MEMVAULT_PASSPHRASE_FILE"

UNIT_TEMPLATE = """\
[Unit]
Description=memvault daemon: encrypted local memory for AI agents

[Service]
Type=notify
ExecStart={exec_start}
{environment}Restart=on-failure
RestartSec=2
RestartPreventExitStatus=2
TimeoutStopSec=90
KillMode=mixed
RuntimeDirectory=memvault
RuntimeDirectoryMode=0700
UMask=0077
LimitCORE=0
{writable}NoNewPrivileges=yes
ProtectSystem=strict
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
ProtectHostname=yes
ProtectClock=yes
CapabilityBoundingSet=
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK

[Install]
WantedBy=default.target
"""

# Read by the daemon at start; the model ships inside a package, so the Hub is
# never needed and an offline login must not wait for it.
SERVICE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def systemd_quote(value: str) -> str:
    """`value` as one word of a unit file: quoted if need be, `%` escaped."""
    value = value.replace("%", "%%")
    if value and not any(c in value for c in " \t\"'\\;"):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# What `PrivateTmp=yes` replaces with directories of the unit's own.
PRIVATE_TMP = ("/tmp", "/var/tmp")


def in_private_tmp(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in PRIVATE_TMP)


def render_unit(exec_start: str, writable: list[str], environment: dict[str, str],
                tmp_hidden: str | None = None) -> str:
    """The unit; `tmp_hidden` names what a private /tmp would hide from the
    daemon, and leaves `PrivateTmp=yes` out."""
    lines = "".join(f"Environment={systemd_quote(f'{key}={value}')}\n"
                    for key, value in environment.items())
    paths = "".join(f"ReadWritePaths={systemd_quote(path)}\n" for path in writable)
    unit = UNIT_TEMPLATE.format(exec_start=systemd_quote(exec_start), writable=paths,
                                environment=lines)
    if tmp_hidden:
        unit = unit.replace("PrivateTmp=yes\n", "# PrivateTmp=yes is left out: it would hide "
                            f"{tmp_hidden} from the daemon\n")
    return unit


def unit_environment(unit: str) -> dict[str, str]:
    """The `Environment=` settings of a unit `render_unit` wrote."""
    found = {}
    for line in unit.splitlines():
        if line.startswith("Environment="):
            # systemd_quote's quoting is the shell's double quotes.
            key, _, value = shlex.split(line.removeprefix("Environment="))[0].partition("=")
            found[key] = value.replace("%%", "%")
    return found


def agent_plist(exec_start: str, log_file: str, environment: dict[str, str]) -> dict[str, Any]:
    """The launchd agent, as the dict plistlib writes."""
    return {
        "Label": AGENT_LABEL,
        "ProgramArguments": [exec_start],
        "EnvironmentVariables": dict(environment),
        "RunAtLoad": True,
        # Restart after a crash, not after a clean stop (launchd throttles
        # restarts to one per ThrottleInterval, 10 s by default).
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": log_file,
        "StandardErrorPath": log_file,
        "Umask": 0o077,
        # The daemon holds the vault key and memories in clear: no core file,
        # as the unit's LimitCORE=0 (the daemon sets RLIMIT_CORE 0 itself too).
        "SoftResourceLimits": {"Core": 0},
        "HardResourceLimits": {"Core": 0},
        "ExitTimeOut": 90,  # as the systemd unit's TimeoutStopSec (service.md says why)
        "ProcessType": "Interactive",  # recall latency matters: no background throttling
    }
