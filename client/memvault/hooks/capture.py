"""Stop and PreCompact: store what is new in the session's transcript.

For each chunk of new lines (`transcript.chunks`), under the session's lock
(`offsets.SessionOffsets`):

1. each decision of the user's (`decisions`) is remembered, with the
   session, `source` "claude-code", a tag for its kind, and the project in
   its payload. A decision the daemon refuses as holding a credential
   (docs/secrets.md: the hooks never pass `allow_secret`) is counted and
   skipped, never stored;
2. the turns are appended to the session's transcript layer (the daemon
   redacts any credential in them);
3. the offset moves past the chunk.

In that order because a remember is safe to repeat (the same statement
again reinforces the memory it made) and an append is not: a hook that
fails between 1 and 3 stores the chunk's turns the next time, once.

A long session seen for the first time may hold thousands of lines:
chunks stop being started after `CAPTURE_BUDGET_S`, and the next Stop goes
on from there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from memvault.client import Client
from memvault.hooks.decisions import CORRECTION, Decision, decisions
from memvault.hooks.events import HookInput
from memvault.hooks.offsets import SessionOffsets
from memvault.hooks.project import Project
from memvault.hooks.transcript import chunks
from memvault_base.errors import InvalidArgument

__all__ = ["CAPTURE_BUDGET_S", "SOURCE", "Captured", "capture"]

SOURCE = "claude-code"
# Well under Claude Code's own per-hook limit (which install sets to 10 s):
# a chunk of 200 lines is embedded at ~250 turns/s, so one started just
# before 3 s ends before the limit on a busy machine.
CAPTURE_BUDGET_S = 3.0
# A request the user made in so many words ranks above an unrated memory
# (0.5); a correction the agent was given matters a little less.
_IMPORTANCE = {CORRECTION: 0.6}
_REQUEST_IMPORTANCE = 0.7


@dataclass
class Captured:
    turns: int = 0
    remembered: int = 0
    refused: list[str] = field(default_factory=list)
    more: bool = False


def capture(client: Client, hook: HookInput, project: Project, offsets: SessionOffsets,
            *, budget_s: float = CAPTURE_BUDGET_S) -> Captured:
    """Store the new turns and decisions of `hook`'s session."""
    done = Captured()
    if not hook.session_id or not hook.transcript_path:
        return done
    path = Path(hook.transcript_path).expanduser()
    if not path.is_file():
        return done
    deadline = time.monotonic() + budget_s
    with offsets.locked(hook.session_id):
        start = offsets.get(hook.session_id, hook.transcript_path)
        for chunk in chunks(path, start):
            if time.monotonic() > deadline:
                done.more = True
                break
            for decision in decisions(chunk.turns):
                _remember(client, hook, project, decision, done)
            if chunk.turns:
                client.append_turns(hook.session_id, [t.to_request() for t in chunk.turns])
                done.turns += len(chunk.turns)
            offsets.put(hook.session_id, hook.transcript_path, chunk.end)
    offsets.prune()
    return done


def _remember(client: Client, hook: HookInput, project: Project, decision: Decision,
              done: Captured) -> None:
    try:
        client.remember(decision.text, type="semantic", session=hook.session_id,
                        source=SOURCE, tags=(SOURCE, decision.kind),
                        importance=_IMPORTANCE.get(decision.kind, _REQUEST_IMPORTANCE),
                        payload=project.payload())
    except InvalidArgument as err:
        # The daemon names the kind and place of a credential, never the
        # credential itself (docs/secrets.md), so its message may be shown.
        done.refused.append(str(err))
        return
    done.remembered += 1
