"""The hook entries `memvault hooks install claude-code` writes into Claude
Code's settings, and how they are told apart from everything else there.

Claude Code reads hooks from `~/.claude/settings.json` (the user's) and
`PROJECT/.claude/settings.json` (a project's), under `"hooks"`: per event
name a list of matcher groups, each `{"matcher": ..., "hooks": [{"type":
"command", "command": ..., "timeout": seconds}]}`. The four groups written
here have no matcher: SessionStart then runs for every source (startup,
resume, clear, compact) and PreCompact for either trigger.

An entry is memvault's when its command runs a program named `memvault`
with the arguments `hooks run`: so uninstall finds the entries of any
earlier install (from another virtualenv, with other options) and touches
no other hook. Install replaces memvault's entries of an event with the one
it writes, in place, and appends a group when the event had none: a second
install changes nothing.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memvault.hooks.events import EVENTS
from memvault_base.durable import replace_file
from memvault_base.errors import InvalidArgument

__all__ = ["TIMEOUT_S", "commands", "installed", "is_ours", "read", "uninstalled", "write"]

# Claude Code's own limit on each hook, in seconds (its default is 60). A
# hook here bounds its work well inside it (`memvault.hooks.vault`,
# `memvault.hooks.capture`); this is the backstop that keeps a stuck
# interpreter from holding the agent for a minute.
TIMEOUT_S = 10


def commands(program: str, before: Sequence[str] = (),
             after: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:
    """Claude Code event -> the command line of its hook: `program` (the
    `memvault` script), the group options `before` (`--home DIR`), `hooks run
    NAME`, and the options `after[NAME]`."""
    after = after or {}
    return {event: shlex.join([program, *before, "hooks", "run", name, *after.get(name, ())])
            for name, event in EVENTS.items()}


def is_ours(command: object) -> bool:
    """Whether a hook command runs `memvault ... hooks run ...`."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if not argv or Path(argv[0]).name != "memvault":
        return False
    return any(argv[i:i + 2] == ["hooks", "run"] for i in range(1, len(argv) - 1))


def _entry(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": TIMEOUT_S}


def installed(settings: dict[str, Any], wanted: dict[str, str]) -> dict[str, Any]:
    """`settings` with memvault's hook for each event of `wanted` (event ->
    command), every other key and hook as it was."""
    out = copy.deepcopy(settings)
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument('settings: "hooks" is not a JSON object; fix it by hand first')
    for event, command in wanted.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f'settings: "hooks.{event}" is not a list; fix it by hand first')
        placed = False
        for group in list(groups):
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            kept = []
            for entry in entries:
                if isinstance(entry, dict) and is_ours(entry.get("command")):
                    if placed:
                        continue  # one memvault entry per event
                    entry, placed = _entry(command), True
                kept.append(entry)
            if entries and not kept:
                groups.remove(group)  # held only a second memvault entry
            else:
                group["hooks"] = kept
        if not placed:
            groups.append({"hooks": [_entry(command)]})
    return out


def uninstalled(settings: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """`settings` without memvault's hook entries, and how many there were.
    A group, an event or `"hooks"` left empty by that goes too; what was
    empty before stays."""
    out = copy.deepcopy(settings)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out, 0
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                kept_groups.append(group)
                continue
            kept = [e for e in entries if not (isinstance(e, dict) and is_ours(e.get("command")))]
            removed += len(entries) - len(kept)
            if kept or not entries:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups or not groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if not hooks and removed:
        del out["hooks"]
    return out, removed


def read(path: Path) -> dict[str, Any]:
    """The settings at `path`; {} when there is no file. A file that is not a
    JSON object is refused, never overwritten."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise InvalidArgument(f"{path} is not valid JSON ({err}); fix it by hand first") \
            from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{path} is not a JSON object; fix it by hand first")
    return value


def write(path: Path, settings: dict[str, Any]) -> None:
    """Write `settings` to `path` atomically (a crash leaves the old file or
    the new), keeping the old file's permissions (a new file is 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    blob = (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode()
    replace_file(path, blob)
    if mode is not None:
        os.chmod(path, mode)
