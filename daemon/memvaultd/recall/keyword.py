"""The keyword channel: an incremental BM25 index over text, topic and tags.

BM25 (k1 = 1.2, b = 0.75, the textbook values) over lower-cased word tokens
with English stop words removed and a light suffix stemmer ("running",
"runs" -> "run"). On the LoCoMo turns of `docs/benchmarks.md`, stop words and
stemming lift BM25's any@10 from 0.592 to 0.668: questions and answers rarely
share inflections ("painted" / "paint").

It is written here rather than taken from a library because it must follow
the vault's in-memory state write by write (add, replace, remove, about 10 µs
each) and answer over whichever memories the caller then filters;
libraries such as bm25s build a static index, and LanceDB's full-text index
would keep a second copy of every record and re-index on writes.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Iterable

K1 = 1.2
B = 0.75

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP_WORDS_TEXT = """
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing don down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves im ive id youre thats its
dont doesnt didnt isnt wasnt s t d ll m re ve
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
_SUFFIXES = ("ingly", "edly", "ing", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    """Strip one common English suffix, keeping at least three letters."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    words = (w.replace("'", "") for w in _WORD.findall(text.lower()))
    return [stem(w) for w in words if w and w not in STOP_WORDS]


class KeywordIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def put(self, doc_id: str, fields: Iterable[str]) -> None:
        """Index (or re-index) a document from its text fields."""
        counts = Counter(t for field in fields for t in tokens(field))
        with self._lock:
            self._drop(doc_id)
            for term, tf in counts.items():
                self._postings.setdefault(term, {})[doc_id] = tf
            length = sum(counts.values())
            self._lengths[doc_id] = length
            self._terms[doc_id] = tuple(counts)
            self._total += length

    def remove(self, doc_id: str) -> None:
        with self._lock:
            self._drop(doc_id)

    def _drop(self, doc_id: str) -> None:
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return
        self._total -= length
        for term in self._terms.pop(doc_id, ()):
            docs = self._postings[term]
            del docs[doc_id]
            if not docs:
                del self._postings[term]

    def search(self, query: str) -> tuple[dict[str, float], list[str]]:
        """BM25 score of every document sharing a term with `query`, and the
        query terms that matched anything."""
        terms = set(tokens(query))
        scores: dict[str, float] = {}
        matched: list[str] = []
        with self._lock:
            n = len(self._lengths)
            if not n:
                return scores, matched
            average = self._total / n or 1.0
            for term in terms:
                docs = self._postings.get(term)
                if not docs:
                    continue
                matched.append(term)
                idf = math.log(1 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
                for doc_id, tf in docs.items():
                    norm = K1 * (1 - B + B * self._lengths[doc_id] / average)
                    scores[doc_id] = scores.get(doc_id, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        return scores, sorted(matched)
