"""One hook run: read the input, do the event's work, answer; fail open.

Whatever goes wrong (no daemon, a hung daemon, input that does not parse, a
transcript that does not read, a bug) ends the same way: exit code 0, a
`systemMessage` warning for the user on stdout and the same line on
stderr, and the agent goes on without what the hook would have added.
A hook that stopped the agent because its memory was away would be worse
than no hook.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memvault.hooks import answers, events, injection
from memvault.hooks.capture import capture
from memvault.hooks.offsets import SessionOffsets
from memvault.hooks.project import of as project_of
from memvault.hooks.vault import open_client
from memvault_base import paths

__all__ = ["Answer", "Options", "run"]


@dataclass(frozen=True)
class Options:
    home: str | None = None
    socket: str | None = None
    max_tokens: int | None = None  # None: the event's default
    min_relevance: float | None = None  # None: the event's default


@dataclass(frozen=True)
class Answer:
    """What the hook prints: `stdout` as JSON (None: nothing), `stderr` as a line."""

    stdout: dict[str, Any] | None = None
    stderr: str = ""


def run(name: str, raw: str, options: Options) -> Answer:
    """Run hook `name` ("session-start", "prompt", "stop", "pre-compact") on input `raw`."""
    event = events.EVENTS[name]
    try:
        hook = events.parse(raw, event)
        with open_client(options.home, options.socket) as client:
            if name == "session-start":
                text = injection.for_session(
                    client, project_of(hook.cwd),
                    max_tokens=options.max_tokens or injection.SESSION_MAX_TOKENS,
                    min_relevance=_or(options.min_relevance,
                                      injection.SESSION_MIN_RELEVANCE))
                return Answer(answers.context(event, text) if text else None)
            if name == "prompt":
                text = injection.for_prompt(
                    client, hook.prompt,
                    max_tokens=options.max_tokens or injection.PROMPT_MAX_TOKENS,
                    min_relevance=_or(options.min_relevance,
                                      injection.PROMPT_MIN_RELEVANCE))
                return Answer(answers.context(event, text) if text else None)
            offsets = SessionOffsets(paths.resolve(options.home).state_dir)
            done = capture(client, hook, project_of(hook.cwd), offsets)
            if done.refused:
                note = (f"{len(done.refused)} request(s) to remember not stored: "
                        f"{done.refused[0]}")
                return Answer(answers.warning(note), f"memvault: {note}")
            return Answer()
    except Exception as err:  # fail open, whatever it was: the agent must go on
        message = " ".join(str(err).split()) or type(err).__name__
        note = f"{event} hook skipped: {message}"
        return Answer(answers.warning(note), f"memvault: {note}")


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
