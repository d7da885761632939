"""What a hook prints on stdout, in the JSON Claude Code documents.

Exit code 0 with a JSON object: `hookSpecificOutput.additionalContext` adds
text to the agent's context (SessionStart, UserPromptSubmit), and
`systemMessage` is a warning shown to the user. A hook here never blocks
(no `decision`, no `continue: false`, never exit code 2): memory is a help
to the agent, not a gate in front of it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["context", "warning"]


def context(event: str, text: str) -> dict[str, Any]:
    """Add `text` to the agent's context at `event` (SessionStart or UserPromptSubmit)."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def warning(message: str) -> dict[str, Any]:
    """Tell the user, not the agent, that the hook did not do its work."""
    return {"systemMessage": f"memvault: {message}"}
