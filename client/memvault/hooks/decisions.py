"""What a session decided that it can tell from the user's own words:
requests to remember something, and corrections of the agent.

Only a turn of the user's that *opens* with one of the phrases below counts,
and only its first sentence is kept (a request often goes on with the task:
"remember that we deploy with uv. Now fix the build"):

- remember: "remember (that) X", "please remember X", "don't forget (that)
  X", "keep in mind (that) X", "note that X", "for future reference, X";
  and standing instructions, kept whole: "from now on, X", "going forward,
  X", "remember to X";
- correction: "no, actually X", "actually, no, X", "that's wrong, X",
  "that's not right, X", "that's incorrect, X", "correction: X".

A question ("remember what we did?") is not a request. A bare "always
..." or "never ..." is not taken: "never mind, ..." and "always fails
when ..." open the same way. A statement of
fewer than 3 words ("no, actually stop") says too little to keep. The
phrases are English only; a missed decision is still in the stored turns,
found by `recall --turns`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memvault.hooks.transcript import Turn

__all__ = ["CORRECTION", "REMEMBER", "Decision", "decisions"]

REMEMBER = "remember"
CORRECTION = "correction"

_LEAD = r"^\s*(?:(?:please|pls|and|also|ok(?:ay)?|oh)[,]?\s+)*"
# The statement after the phrase is kept.
_REQUEST = re.compile(
    _LEAD + r"(?:remember|memori[sz]e|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind"
    r"|note|for\s+future\s+reference)(?:\s+that)?\s*[,:;-]*\s+(?P<text>.+)", re.I | re.S)
# The whole sentence is kept: the phrase is part of what it means.
_INSTRUCTION = re.compile(
    _LEAD + r"(?P<text>(?:from\s+now\s+on|going\s+forward|remember\s+to)\b.+)",
    re.I | re.S)
_CORRECTION = re.compile(
    r"^\s*(?:no[,.!]*\s+actually|actually[,]?\s+no|no[,.!]*\s+that'?s\s+(?:wrong|not\s+right)"
    r"|that'?s\s+(?:wrong|not\s+right|incorrect|not\s+true)"
    r"|that\s+is\s+(?:wrong|not\s+right|incorrect|not\s+true)|correction)"
    r"\s*[,.:;!-]*\s+(?P<text>.+)", re.I | re.S)
# A sentence ends at ., ! or ? before a space and a capital, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|\n")
_MIN_WORDS = 3


@dataclass(frozen=True)
class Decision:
    kind: str
    text: str


def decisions(turns: Iterable[Turn]) -> list[Decision]:
    """The decisions in the user's turns, in order."""
    found = []
    for turn in turns:
        if turn.speaker == "user":
            decision = of(turn.text)
            if decision is not None:
                found.append(decision)
    return found


def of(text: str) -> Decision | None:
    """The decision `text` states, if it opens with one of the phrases."""
    for kind, pattern in ((REMEMBER, _INSTRUCTION), (REMEMBER, _REQUEST),
                          (CORRECTION, _CORRECTION)):
        match = pattern.match(text)
        if match is None:
            continue
        statement = _first_sentence(match["text"])
        if statement.endswith("?") or len(statement.split()) < _MIN_WORDS:
            return None
        return Decision(kind, statement[0].upper() + statement[1:])
    return None


def _first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].strip()
