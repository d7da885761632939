"""What the hooks add to the agent's context: at session start, the memories
of the project; at each prompt, the memories that answer it.

Session start gathers two kinds, in this order, until the token budget is
spent:

1. what the hooks stored for this project (`Project.filter`: its
   remembered requests and corrections), most recently used first: said in
   this project, so relevant to it by construction;
2. what a recall by the project's name and remote finds with a relevance
   of at least `SESSION_MIN_RELEVANCE`, best first.

The recall is a preview (`mark_accessed=False`): session start injects
the same memories into every session, and counting each as a use would
heat them for ever whether or not the agent ever needed them.

A prompt's recall keeps the best `PROMPT_TOP_K` hits whose relevance is at
least `PROMPT_MIN_RELEVANCE`, within `PROMPT_MAX_TOKENS`; it counts as a use.

Both thresholds are on a hit's relevance (`breakdown.fusion`, 0..1: how
well it matches the query), not on its score, which multiplies relevance
by decay, reinforcement and importance (docs/recall.md): on the score, a
memory that fits a prompt exactly would stop being added once it is a few
months old, and a much-repeated loose match would start. The values were
measured with `scripts/bench_hooks.py` (docs/hooks.md gives the figures).

Tokens are counted as the daemon counts them for `max_tokens`: UTF-8 bytes
/ 4, rounded up (docs/recall.md). English text runs at about 4 bytes per
token for the common tokenizers; code and non-Latin scripts run denser, so a
budget is approximate, on the generous side of what it allows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from memvault.client import Client
from memvault.hooks.project import Project
from memvault.types import Memory

__all__ = [
    "PROMPT_MAX_TOKENS", "PROMPT_MIN_RELEVANCE", "PROMPT_TOP_K", "SESSION_MAX_TOKENS",
    "SESSION_MIN_RELEVANCE", "approximate_tokens", "for_prompt", "for_session",
]

BYTES_PER_TOKEN = 4
# 1,500 tokens: about 20 one-line memories, under 1% of a 200k-token context
# window, so a session starts informed without crowding the task it is for.
SESSION_MAX_TOKENS = 1500
# A short prompt seldom needs more than three memories (the daemon's default
# top_k); 600 tokens leaves room for three long ones.
PROMPT_TOP_K = 3
PROMPT_MAX_TOKENS = 600
# Measured on tests/data/claude_code/prompt_relevance.json: F0.5 (precision
# counted twice) is 0.77-0.79 from 0.52 to 0.56 and falls on both sides
# (0.70 at 0.50, 0.65 at 0.58). On 40 prompts one hit moves it by ~0.02, so
# the plateau's low end rather than its peak: precision 0.86, recall 0.55,
# and 1 of 14 prompts of an unrelated task given a memory.
PROMPT_MIN_RELEVANCE = 0.52
# A recall by a project's name: the memories naming the project measured
# 0.46-0.57, the others at most 0.22 (scripts/bench_hooks.py); 0.35 is
# between them with room on both sides.
SESSION_MIN_RELEVANCE = 0.35
# How many of the project's own memories, and of the recall's hits, session
# start looks at before its budget decides.
_SESSION_CANDIDATES = 30
# A prompt this short ("ok", "go on", "y") asks nothing to recall by.
_MIN_PROMPT_CHARS = 8


def approximate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode("utf-8", "surrogatepass")) / BYTES_PER_TOKEN))


def for_session(client: Client, project: Project, *, max_tokens: int = SESSION_MAX_TOKENS,
                min_relevance: float = SESSION_MIN_RELEVANCE) -> str:
    """The context a session in `project` starts with; "" when memvault knows nothing of it."""
    page = client.list_memories(filter=project.filter(), sort="last_used",
                                limit=_SESSION_CANDIDATES)
    hits = client.recall(project.query, top_k=_SESSION_CANDIDATES, mark_accessed=False)
    memories = [listed.memory for listed in page.memories]
    memories += [hit.memory for hit in hits if hit.breakdown.fusion >= min_relevance]
    header = f"Memories from memvault about this project ({project.label}):"
    return _within(header, memories, max_tokens)


def for_prompt(client: Client, prompt: str, *, max_tokens: int = PROMPT_MAX_TOKENS,
               min_relevance: float = PROMPT_MIN_RELEVANCE) -> str:
    """The context a prompt is answered with; "" when no memory is relevant enough."""
    text = prompt.strip()
    if len(text) < _MIN_PROMPT_CHARS or text.startswith("/"):
        return ""  # a slash command is Claude Code's, not a question
    hits = client.recall(text, top_k=PROMPT_TOP_K)
    header = "Memories from memvault that may bear on this prompt:"
    return _within(header, [hit.memory for hit in hits
                            if hit.breakdown.fusion >= min_relevance], max_tokens)


def _within(header: str, memories: Iterable[Memory], max_tokens: int) -> str:
    """`header` and one line per memory (each once, in order) while the whole
    stays within `max_tokens`; "" when not one memory fits."""
    lines, seen = [header], set()
    spent = approximate_tokens(header)
    for memory in memories:
        if memory.id in seen:
            continue
        seen.add(memory.id)
        line = f"- [{memory.id[:8]}] {' '.join(memory.text.split())}"
        cost = approximate_tokens(line + "\n")
        if spent + cost > max_tokens:
            continue  # a shorter one further down may still fit
        lines.append(line)
        spent += cost
    return "\n".join(lines) if len(lines) > 1 else ""
