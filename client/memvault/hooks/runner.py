"""One hook run: read the input, do the event's work, answer; fail open.

Whatever goes wrong (no daemon, a hung daemon, input that does not parse, a
transcript that does not read, a bug) ends the same way: exit code 0, a
`systemMessage` warning for the user on stdout and the same line on
stderr, and the agent goes on without what the hook would have added.
A hook that stopped the agent because its memory was away would be worse
than no hook.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar

from memvault.hooks import answers, events, injection
from memvault.hooks.capture import capture
from memvault.hooks.offsets import SessionOffsets
from memvault.hooks.project import Project
from memvault.hooks.project import of as project_of
from memvault.hooks.vault import open_client
from memvault_base import paths
from memvault_base.errors import InvalidArgument

__all__ = ["ALL", "AUTO", "Answer", "Options", "run", "scopes_of"]

AUTO = "auto"  # the session's project
ALL = "all"  # every scope: no declaration


@dataclass(frozen=True)
class Options:
    """The command line's options, as given: checked inside `run`, so that a
    bad one fails open like everything else. None: the event's default."""

    home: str | None = None
    socket: str | None = None
    max_tokens: str | None = None
    min_relevance: str | None = None
    scopes: tuple[str, ...] = ()  # `--scope`s given; none: AUTO
    ignored: tuple[str, ...] = ()
    usage_error: str = ""  # the command line did not parse


@dataclass(frozen=True)
class Answer:
    """What the hook prints: `stdout` as JSON (None: nothing), `stderr` as a line."""

    stdout: dict[str, Any] | None = None
    stderr: str = ""


def run(name: str, raw: str, options: Options) -> Answer:
    """Run hook `name` ("session-start", "prompt", "stop", "pre-compact") on input `raw`."""
    event = events.EVENTS.get(name, name)
    try:
        if options.usage_error:
            raise InvalidArgument(options.usage_error)
        if name not in events.EVENTS:
            raise InvalidArgument(f"no hook {name!r}; use one of {', '.join(events.EVENTS)}")
        max_tokens = _number(options.max_tokens, "--max-tokens", int, 1, None)
        min_relevance = _number(options.min_relevance, "--min-relevance", float, 0, 1)
        hook = events.parse(raw, event)
        project = project_of(hook.cwd)
        with open_client(options.home, options.socket,
                         scopes_of(options.scopes, project)) as client:
            if name == "session-start":
                text = injection.for_session(
                    client, project,
                    max_tokens=max_tokens or injection.SESSION_MAX_TOKENS,
                    min_relevance=_or(min_relevance, injection.SESSION_MIN_RELEVANCE))
                answer = Answer(answers.context(event, text) if text else None)
            elif name == "prompt":
                text = injection.for_prompt(
                    client, hook.prompt,
                    max_tokens=max_tokens or injection.PROMPT_MAX_TOKENS,
                    min_relevance=_or(min_relevance, injection.PROMPT_MIN_RELEVANCE))
                answer = Answer(answers.context(event, text) if text else None)
            else:
                offsets = SessionOffsets(paths.resolve(options.home).state_dir)
                done = capture(client, hook, project, offsets)
                answer = Answer()
                if done.refused:
                    note = (f"{len(done.refused)} request(s) to remember not stored: "
                            f"{done.refused[0]}")
                    answer = Answer(answers.warning(note), f"memvault: {note}")
    except Exception as err:  # fail open, whatever it was: the agent must go on
        message = " ".join(str(err).split()) or type(err).__name__
        note = f"{event + ' ' if event else ''}hook skipped: {message}"
        return Answer(answers.warning(note), f"memvault: {note}")
    if options.ignored:
        ignored = f"memvault: {event} hook ignored {' '.join(options.ignored)}"
        return Answer(answer.stdout, "\n".join(filter(None, (answer.stderr, ignored))))
    return answer


def scopes_of(given: tuple[str, ...], project: Project) -> tuple[str, ...]:
    """The scopes a hook declares (docs/hooks.md): `auto` (the default) is
    the session's project, `project:NAME`; `all` declares none, so the hook
    reaches every scope; any other value is a scope, checked by the daemon."""
    if given == (ALL,):
        return ()
    if ALL in given:
        raise InvalidArgument(f"--scope {ALL} reaches every scope; give it alone")
    return tuple(dict.fromkeys(project.scope if s == AUTO else s for s in given or (AUTO,)))


_N = TypeVar("_N", int, float)


def _number(text: str | None, option: str, kind: type[_N], low: _N, high: _N | None
            ) -> _N | None:
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise InvalidArgument(f"{option}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidArgument(f"{option}: must be {bound}, not {text}")
    return value


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
