"""A hook's input: the JSON object Claude Code writes to the hook's stdin.

Every event carries `session_id`, `transcript_path`, `cwd` and
`hook_event_name`; SessionStart adds `source` (startup, resume, clear,
compact), UserPromptSubmit `prompt`, Stop `stop_hook_active`, PreCompact
`trigger` (manual, auto) and `custom_instructions`. Fields this package does
not use are ignored, and a field missing from the input reads as empty: a
newer Claude Code that adds or drops one must not stop the hook.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memvault_base.errors import InvalidArgument

__all__ = ["EVENTS", "HookInput", "parse"]

# The name `memvault hooks run` takes -> the event's name in Claude Code.
EVENTS = {
    "session-start": "SessionStart",
    "prompt": "UserPromptSubmit",
    "stop": "Stop",
    "pre-compact": "PreCompact",
}


@dataclass(frozen=True)
class HookInput:
    event: str
    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    prompt: str = ""
    source: str = ""
    trigger: str = ""
    stop_hook_active: bool = False


def parse(raw: str, event: str) -> HookInput:
    """The input of hook `event` (Claude Code's name) from the text on stdin;
    InvalidArgument when it is not a JSON object or a field has the wrong type."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError as err:
        raise InvalidArgument(f"hook input is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"hook input must be a JSON object, not {type(value).__name__}")
    strings = {key: _string(value, key) for key in
               ("session_id", "transcript_path", "cwd", "prompt", "source", "trigger")}
    active = value.get("stop_hook_active", False)
    if not isinstance(active, bool):
        raise InvalidArgument("hook input: stop_hook_active must be true or false")
    return HookInput(event=event, stop_hook_active=active, **strings)


def _string(value: dict[str, Any], key: str) -> str:
    got = value.get(key)
    if got is None:
        return ""
    if not isinstance(got, str):
        raise InvalidArgument(f"hook input: {key} must be a string")
    return got
