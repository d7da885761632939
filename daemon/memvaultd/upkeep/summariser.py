"""Summarisers: what one consolidated memory says about its cluster.

The interface is one callable, so a user can plug in their own (a local
language model, say) with `consolidation.summariser = "module:attribute"`
in config.toml:

    def summarise(memories: Sequence[Memory]) -> Summary

The default, `extractive`, needs no model: it splits each memory into
sentences, keeps every distinct one (compared case- and space-insensitively,
ignoring end punctuation), first wording first, each with the ids of the
memories it came from. Nothing is paraphrased, so nothing can be lost or
invented: every sentence of every source is in the summary.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memvault_base.errors import InvalidArgument
from memvaultd.model.memory import MAX_TEXT_BYTES, Memory

# A sentence ends at . ! or ? followed by space, or at a line break; list
# markers at a line's start are not part of the fact.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_END_PUNCTUATION = ".!?;:,"


@dataclass(frozen=True)
class Fact:
    text: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    text: str
    facts: tuple[Fact, ...]


Summariser = Callable[[Sequence[Memory]], Summary]


def sentences(text: str) -> list[str]:
    out = []
    for piece in _SENTENCE_END.split(text):
        piece = _MARKER.sub("", piece).strip()
        if piece:
            out.append(piece)
    return out


def fact_key(sentence: str) -> str:
    """What two wordings of one fact share: case, spacing and end marks aside."""
    return " ".join(sentence.casefold().split()).rstrip(_END_PUNCTUATION)


def extractive(memories: Sequence[Memory]) -> Summary:
    facts: dict[str, tuple[str, list[str]]] = {}
    for memory in memories:
        for sentence in sentences(memory.text):
            _, sources = facts.setdefault(fact_key(sentence), (sentence, []))
            if memory.id not in sources:
                sources.append(memory.id)
    kept = tuple(Fact(text, tuple(sources)) for text, sources in facts.values())
    return Summary("\n".join(f"- {fact.text}" for fact in kept), kept)


def load(spec: str) -> Summariser:
    """The summariser named `module:attribute`, or the extractive one for ''."""
    if not spec:
        return extractive
    module_name, _, attribute = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InvalidArgument(f"consolidation.summariser: cannot load {spec!r}: {exc}") from exc
    if not callable(found):
        raise InvalidArgument(f"consolidation.summariser: {spec!r} is not callable")
    return found  # type: ignore[no-any-return]


def checked(summary: object, spec: str) -> Summary:
    """A plugged-in summariser's answer, refused unless it is a usable Summary."""
    if not isinstance(summary, Summary) or not summary.text.strip():
        raise InvalidArgument(f"consolidation.summariser {spec!r}: returned no summary text")
    if len(summary.text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        raise InvalidArgument(f"consolidation.summariser {spec!r}: summary over "
                              f"{MAX_TEXT_BYTES} bytes")
    return summary
