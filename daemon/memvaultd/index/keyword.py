"""The keyword channel: an incremental BM25 index over text, topic and tags.

BM25 (k1 = 1.2, b = 0.75, the textbook values) over lower-cased word tokens
with English stop words removed and Snowball's English stemmer ("running",
"runs" -> "run", "studies" -> "studi" as "study"). Questions and answers
rarely share inflections ("painted" / "paint"): on the LoCoMo turns of
`docs/benchmarks.md` the stemmer took hybrid recall's any@10 from 0.783 to
0.796 against a one-suffix stripper, and improved it on four of the five
conversations, each scored alone.

It is written here rather than taken from a library because it must follow
the vault's in-memory state write by write (add, replace, remove, about 10 µs
each) and answer over whichever memories the caller then filters;
libraries such as bm25s build a static index, and LanceDB's full-text index
would keep a second copy of every record and re-index on writes.

The postings are held in compressed sparse rows: one array of document
ordinals (int32) and one of term counts (one byte while every count fits)
for all terms, each term a slice of them; writes since go to small per-term
lists merged in when they pass an eighth of the arrays. An object with two
arrays per term cost ~400 bytes a term, and the benchmark's topics give each
memory a term of its own. A term is found by its 64-bit hash in a sorted
array (`_TermIds`), and a document's terms are found again from the fields
it was indexed from when it is removed or re-indexed: the index holds no
string of a term and no list of a document's terms. A daemon serving the
benchmark's 1M memories then held 2,146 against 2,262 MB resident (100k: 458
against 480 MB, median of six rounds, `scripts/bench_recall_ab.py`), at the
cost of ~20 us more a removal, which tokenises its fields again. A restore
builds the arrays 8,192 documents at a time, so the words of all documents
never exist at once. At 100k benchmark memories (in process, restore and
`finish_restore`): 95 MB held (tracemalloc) and a 298 MB peak in 2.7 s with
an object per term and all words at once, 37 MB and a 67 MB peak in 1.5 s in
rows and slices; the resident size grew by 238 MB against 65.

A search of 16,384 postings or more scores only the documents that can rank
in its first window, and the others when a caller reads past them
(`_Query.pruned`, `KeywordHits`): at the benchmark's 1M memories its 20
cached queries took 38.0 and 32.1 against 52.2 and 40.9 ms in two runs
(search, first window and 50 scores each: `scripts/bench_keywords.py`), the
answers the same to the bit.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, count, islice, repeat
from typing import Any

import numpy as np
import numpy.typing as npt
import Stemmer  # type: ignore[import-not-found]  # PyStemmer, a C extension, ships no stubs

from memvaultd.index import loops
from memvaultd.model import ints

K1 = 1.2
B = 0.75

WORD = re.compile(r"[^\W_]+", re.UNICODE)
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
_STEMMERS = threading.local()


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The Snowball (Porter 2) English stem of a lower-cased word.

    Cached: a vault's vocabulary is a few tens of thousands of words, and
    stemming was a fifth of the cost of storing a memory. One stemmer per
    thread: PyStemmer's objects are not safe to share between threads."""
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def _stemmer() -> Any:
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = Stemmer.Stemmer("english")
    return stemmer


def tokens(text: str) -> list[str]:
    return [t for w in WORD.findall(text.lower()) if (t := _term(w))]


@functools.lru_cache(maxsize=1 << 16)
def _term(word: str) -> str:
    """The indexed form of one lower-cased word; "" for a stop word. Cached
    with `stem`: per word, Python's work on a memory's ~12 words was half the
    cost of storing it and of loading a snapshot."""
    word = word.replace("'", "")
    return stem(word) if word and word not in STOP_WORDS else ""


def _terms_uncached(words: Iterable[str]) -> list[str]:
    """`_term` of each word, through neither cache, for a restore: its
    ~100k distinct words at 100k memories (in the benchmark, a number each
    from their topics) filled both caches (65,536 entries each) with words
    no later write or query may ask for, ~25 MB held after it; and a restore
    turns each distinct word of a slice into its term once anyway (7k of its
    107k calls were hits)."""
    cleaned = [word.replace("'", "") for word in words]
    stems = iter(_stemmer().stemWords([w for w in cleaned if w and w not in STOP_WORDS]))
    return [next(stems) if w and w not in STOP_WORDS else "" for w in cleaned]


class KeywordHits:
    """The documents that share a term with a query, and their BM25 scores.

    Held as two arrays (document ordinals ascending, scores) rather than a
    dict: at 1M documents a common word matches ~100k of them, and building a
    dict of those costs more than the whole vector search.

    A search of many postings holds only the documents that can rank among
    the first FIRST_WINDOW, every one scoring `floor` or more (`_Query.pruned`),
    and scores the others when asked: `scores_of` one by one, `ranked_windows`
    all of them once it reads past those. Either way every answer is the one
    the whole sum gives, to the bit."""

    def __init__(self, ords: npt.NDArray[np.int64], scores: npt.NDArray[np.float64],
                 doc_ids: list[str | None], ordinals: dict[str, int], matched: list[str],
                 query: _Query | None = None, floor: float = 0.0) -> None:
        self._ords, self._scores, self.matched = ords, scores, matched
        self._doc_ids, self._ordinals = doc_ids, ordinals
        self._query, self._floor = query, floor  # query None: every match held

    @classmethod
    def empty(cls) -> KeywordHits:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0), [], {}, [])

    @property
    def ords(self) -> npt.NDArray[np.int64]:
        """Every matching document's ordinal, ascending."""
        self._complete()
        return self._ords

    @property
    def scores(self) -> npt.NDArray[np.float64]:
        """The score of each of `ords`."""
        self._complete()
        return self._scores

    def __len__(self) -> int:
        return len(self.ords)

    def _complete(self) -> None:
        """Every matching document held, from the whole sum."""
        if self._query is not None:
            self._ords, self._scores = self._query.sums()
            self._query = None

    def scores_of(self, doc_ids: Sequence[str]) -> list[float]:
        """The score of each id (0 where it matched nothing), in one search: a
        hybrid recall looks up ~50 candidates and their session neighbours,
        and one `searchsorted` each was ~0.1 ms of it. Ids not held (under
        the floor) are scored from the query's postings."""
        ords = self._ords
        if not doc_ids or (not len(ords) and self._query is None):
            return [0.0] * len(doc_ids)
        wanted = np.fromiter(map(self._ordinals.get, doc_ids, repeat(-1)), dtype=np.int64,
                             count=len(doc_ids))
        if len(ords):
            at = np.minimum(np.searchsorted(ords, wanted), len(ords) - 1)
            held = ords[at] == wanted
            found = self._scores[at] * held
        else:
            held, found = np.zeros(len(wanted), dtype=bool), np.zeros(len(wanted))
        if self._query is not None:
            others = ~held & (wanted >= 0)
            if others.any():
                asked, where = np.unique(wanted[others], return_inverse=True)
                found[others] = self._query.at(asked)[where]
        return found.tolist()  # type: ignore[no-any-return]  # float64 -> list[float]

    def ids_of(self, ordinals: list[int]) -> list[str]:
        """The ids of documents `ordinals`, leaving out those removed since."""
        return [i for i in map(self._doc_ids.__getitem__, ordinals) if i is not None]

    def ranked_windows(self) -> Iterator[npt.NDArray[np.int64]]:
        """Document ordinals, best score first (ties: first indexed first), in
        growing windows (FIRST_WINDOW, then 4 x more each time, and every tie
        of a window's last score), so a caller that stops after 24 sorts ~64.

        `ords` ascend, and so does every pool of positions here: a stable
        sort by score alone then puts ties in ordinal order. Each window is
        cut and sorted in one compiled call (`loops.best_first`).

        Where the held documents are those at the floor or above, a window
        whose last score is under it, or the end of them, is where the
        whole sum is made, and the windows go on from the last score read."""
        scores, window = self._scores, FIRST_WINDOW
        pool, last = np.arange(len(scores)), math.inf
        while True:
            if not len(pool):
                if self._query is None:
                    return
                pool = self._rest(last)
                scores = self._scores
                continue
            pool = loops.best_first(scores, pool, window)
            if self._query is not None and scores[pool[-1]] < self._floor:
                pool = self._rest(last)
                scores = self._scores
                continue
            yield self._ords[pool]
            last, window = scores[pool[-1]], window * 4
            pool = np.flatnonzero(scores < last)

    def _rest(self, last: float) -> npt.NDArray[np.int64]:
        """Every match held, and the positions of those scoring under `last`."""
        self._complete()
        return np.flatnonzero(self._scores < last)


# A restore indexes this many documents at a time (`_Slices`): ~150k words
# of the benchmark's memories a slice, against 1.8M at once at 100k.
RESTORE_SLICE = 8192
# Recent postings (and holes left by removals) are merged into the arrays
# once they are more than 1 / MERGE_SHARE of them, and MERGE_MIN at least: a
# merge rewrites every entry (0.08-0.2 s at 100k benchmark memories, 1.2
# million entries, on a busy 2-core machine), so a put pays ~8 entries'
# worth of merging, and the recent lists hold ~150k entries at most there.
MERGE_SHARE = 8
MERGE_MIN = 16_384


class _Recent:
    """One term's (document ordinal, term frequency) pairs put since the
    last merge, append-only.

    Stored in `array.array`s: an append costs ~50 ns against ~300 ns for a
    NumPy element store, and a search reads them through `np.frombuffer`
    (under the index lock, its views let go before the next append)."""

    __slots__ = ("ords", "tfs")

    def __init__(self) -> None:
        self.ords = array("q")
        self.tfs = array("q")

    def compact(self, lengths: npt.NDArray[Any]) -> None:
        """Drop the pairs of removed documents (length 0, `KeywordIndex._lengths`)."""
        ords = np.frombuffer(self.ords, dtype=np.int64)
        keep = lengths[ords] != 0
        kept_ords, kept_tfs = ords[keep], np.frombuffer(self.tfs, dtype=np.int64)[keep]
        del ords, keep
        self.ords, self.tfs = array("q", kept_ords.tobytes()), array("q", kept_tfs.tobytes())


class KeywordIndex:
    """Documents are numbered (ordinals) in the order they are indexed; a
    re-indexed document gets a new ordinal and its old one dies, so a term's
    postings only ever grow at the end and a search reads them as slices.

    Terms are numbered too (term ids: at each merge, in the order of their
    hashes; a term first put since takes the next id, `_TermIds`). A term's
    postings are its slice of the merged arrays (`_ords`, `_tfs`: `_count[t]`
    entries from `_start[t]`, ordinals ascending) followed by those put since
    (`_recent`), whose ordinals are all larger. A removal or a re-indexing
    is given the fields the document was indexed from, and counts their
    terms down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._terms = _TermIds()
        self._live = array("q")  # per term id: its live documents
        self._start = array("q")  # per term id: its first merged entry
        self._count = array("q")  # per term id: its merged entries
        self._ords: npt.NDArray[Any] = np.zeros(0, dtype=np.int32)
        self._tfs: npt.NDArray[Any] = np.zeros(0, dtype=np.uint8)
        self._holes = 0  # merged entries dropped in place since the merge
        self._removed = 0  # documents removed or replaced since the merge
        self._recent: dict[int, _Recent] = {}
        self._recent_size = 0
        self._ordinals: dict[str, int] = {}
        self._doc_ids: list[str | None] = []
        # Per ordinal: the document's length in terms, 0 once it is removed
        # (a document of no terms has no postings that would read it), in
        # the narrowest of uint16 and uint32 that holds them (`loops.pyx`,
        # `length_t`: the footprint the scoring reads at random).
        self._lengths: npt.NDArray[Any] = np.zeros(1024, dtype=np.uint16)
        self._total = 0
        self._shortest = math.inf  # the fewest terms of a document indexed (but 0)
        self._compiled: bool = True  # the sums in `loops.bm25_sums`; False: in NumPy
        # Documents `restore_later` took and no one has indexed yet, and the
        # lock under which one caller indexes them while the others wait.
        self._pending: tuple[Sequence[str], Iterable[Iterable[str]]] | None = None
        self._pending_lock = threading.Lock()

    def __len__(self) -> int:
        pending = self._pending
        return len(pending[0]) if pending is not None else len(self._ordinals)

    def put(self, doc_id: str, fields: Iterable[str], was: Iterable[str] | None = None
            ) -> None:
        """Index a document from its text fields; one indexed already is
        re-indexed, and `was` are the fields it was indexed from."""
        counts = _counted(fields)
        self.finish_restore()
        with self._lock:
            self._drop(doc_id, was)
            ordinal = len(self._doc_ids)
            length = sum(counts.values())
            held = len(self._lengths)
            if ordinal == held or length > np.iinfo(self._lengths.dtype).max:
                self._lengths = _holding(self._lengths, 2 * held if ordinal == held else held,
                                         length)
            self._doc_ids.append(doc_id)
            self._ordinals[doc_id] = ordinal
            live, recent = self._live, self._recent
            keys = list(counts)
            for key, tf, term_id in zip(keys, counts.values(), self._terms.of(keys), strict=True):
                if term_id < 0:
                    term_id = self._terms.add(key)
                    live.append(0)
                    self._start.append(0)
                    self._count.append(0)
                postings = recent.get(term_id)
                if postings is None:
                    postings = recent[term_id] = _Recent()
                postings.ords.append(ordinal)
                postings.tfs.append(tf)
                live[term_id] += 1
            self._recent_size += len(keys)
            self._lengths[ordinal] = length
            self._total += length
            if length:
                self._shortest = min(self._shortest, length)
            self._merge_when_large()

    def restore(self, doc_ids: Sequence[str], fields: Iterable[Iterable[str]]) -> None:
        """Index many documents (distinct ids) into an empty index at once:
        the ordinals, postings and lengths of a `put` of each in order."""
        self.restore_later(doc_ids, fields)
        self.finish_restore()

    def restore_later(self, doc_ids: Sequence[str], fields: Iterable[Iterable[str]]) -> None:
        """`restore`, with the indexing itself left to `finish_restore`: to
        a thread of the caller's once the vault serves, or to the first
        search, put or remove, whichever comes first (it waits for the
        other). At 100k memories the indexing is 1.2 s of a 2.8 s start, and
        a recall in `mode="vector"` never needs it."""
        with self._lock:
            if self._ordinals or self._pending is not None:
                raise ValueError("restore fills an empty keyword index")
            self._pending = (doc_ids, fields)

    def finish_restore(self) -> None:
        """Index the documents `restore_later` took, if no one has yet."""
        if self._pending is None:
            return
        with self._pending_lock:
            pending = self._pending
            if pending is None:  # indexed while this caller waited
                return
            self._index_restored(*pending)
            self._pending = None

    def _index_restored(self, doc_ids: Sequence[str], fields: Iterable[Iterable[str]]) -> None:
        """`restore`'s indexing (the caller holds `_pending_lock`), RESTORE_SLICE
        documents at a time (`_Slices`), straight into the merged arrays."""
        slices = _Slices()
        documents = iter(fields)
        while chunk := list(islice(documents, RESTORE_SLICE)):
            slices.add(chunk)
        n = slices.documents
        if n != len(doc_ids):
            raise ValueError(f"{len(doc_ids)} ids for {n} documents")
        terms, ords, tfs, lengths = slices.joined()
        live = np.bincount(terms, minlength=len(slices.hashes))
        ends = np.cumsum(live)
        capacity = _capacity(n)
        with self._lock:
            self._terms = _TermIds(slices.hashes)
            self._live = array("q", live.tobytes())
            self._count = array("q", live.tobytes())
            self._start = array("q", (ends - live).tobytes())
            self._ords, self._tfs = ords.astype(np.int32, copy=False), _narrowest(tfs)
            # Left by puts whose documents were all removed since.
            self._recent, self._recent_size, self._holes, self._removed = {}, 0, 0, 0
            self._ordinals = dict(zip(doc_ids, ints.shared(0, n), strict=True))
            self._doc_ids = list(doc_ids)
            self._lengths = _holding(np.zeros(0, dtype=np.uint16), capacity,
                                     int(lengths.max()) if n else 0)
            self._lengths[:n] = lengths
            self._total = int(lengths.sum())
            counted = lengths[lengths > 0]
            self._shortest = float(counted.min()) if len(counted) else math.inf

    def remove(self, doc_id: str, was: Iterable[str]) -> None:
        """Remove a document; `was` are the fields it was indexed from."""
        self.finish_restore()
        with self._lock:
            self._drop(doc_id, was)
            self._merge_when_large()

    def _drop(self, doc_id: str, was: Iterable[str] | None) -> None:
        """Take out `doc_id`, indexed from the fields `was` (the caller holds
        the lock). Refused, changing nothing, where `was` cannot be those
        fields: none given, of another length in terms, or with a term the
        index does not hold."""
        ordinal = self._ordinals.get(doc_id)
        if ordinal is None:
            return
        counts = _counted(was if was is not None else ())
        term_ids = self._terms.of(list(counts))
        if was is None or sum(counts.values()) != self._lengths[ordinal] or -1 in term_ids:
            raise ValueError(f"keyword index: {doc_id!r} was not indexed from the fields given")
        del self._ordinals[doc_id]
        self._doc_ids[ordinal] = None
        self._total -= int(self._lengths[ordinal])
        self._lengths[ordinal] = 0
        self._removed += 1
        for term_id in term_ids:
            self._live[term_id] -= 1
            live, size = self._live[term_id], self._count[term_id]
            recent = self._recent.get(term_id)
            if not live:
                self._holes += size
                self._count[term_id] = 0
                if recent is not None:
                    self._recent_size -= len(recent.ords)
                    del self._recent[term_id]
            elif live < (size + (len(recent.ords) if recent else 0)) // 2:
                self._compact(term_id, recent)

    def _compact(self, term_id: int, recent: _Recent | None) -> None:
        """Drop a term's entries of dead documents, in its merged slice and in
        `_recent`, when they are half its entries (the caller holds the lock)."""
        start, size = self._start[term_id], self._count[term_id]
        ords = self._ords[start : start + size]
        keep = self._lengths[ords] != 0
        kept = int(np.count_nonzero(keep))
        ords[:kept] = ords[keep]
        tfs = self._tfs[start : start + size]
        tfs[:kept] = tfs[keep]
        self._count[term_id] = kept
        self._holes += size - kept
        if recent is not None:
            self._recent_size -= len(recent.ords)
            recent.compact(self._lengths)
            self._recent_size += len(recent.ords)

    def _merge_when_large(self) -> None:
        """Merge `_recent` into the arrays once it and the holes are a
        MERGE_SHARE of them, at least MERGE_MIN entries (the caller holds the
        lock): each merge rewrites every entry, so a put costs a constant
        share of one."""
        if self._recent_size + self._holes > max(MERGE_MIN, len(self._ords) // MERGE_SHARE):
            self._merge()

    def _merge(self) -> None:
        """The merged arrays rewritten with the recent postings, without the
        entries of documents removed since the last merge, nor terms left
        without documents; term ids renumbered (the caller holds the lock).

        Each pass is skipped where nothing needs it (no holes, no removals,
        no term gone): after a restore of 100k benchmark memories and 2,000
        puts, the whole merge took 0.30 s, a third of it in dropping dead
        entries from arrays that held none."""
        live = np.frombuffer(self._live, dtype=np.int64)
        size = np.frombuffer(self._count, dtype=np.int64)
        if self._holes:  # the merged slices, term by term, without their holes
            start = np.frombuffer(self._start, dtype=np.int64)
            at = np.repeat(start - np.cumsum(size) + size, size) + np.arange(int(size.sum()))
            ords, tfs = self._ords[at], self._tfs[at]
            del start, at
        else:
            ords, tfs = self._ords, self._tfs
        recent = sorted(self._recent.items())
        terms = np.concatenate([
            np.repeat(np.arange(len(size), dtype=np.int32), size),
            np.repeat(np.array([t for t, _ in recent], dtype=np.int32),
                      np.array([len(p.ords) for _, p in recent], dtype=np.int64))])
        ords = np.concatenate([ords, *(np.frombuffer(p.ords, dtype=np.int64) for _, p in recent)],
                              dtype=np.int32)
        tfs = np.concatenate([tfs, *(np.frombuffer(p.tfs, dtype=np.int64) for _, p in recent)],
                             dtype=np.int64)
        if self._removed:
            keep = self._lengths[ords] != 0
            terms, ords, tfs = terms[keep], ords[keep], tfs[keep]
            del keep
        # Terms without documents dropped, the others numbered by hash.
        old_ids, self._terms = self._terms.merged(live > 0)
        if old_ids is not None:
            renumbered = np.full(len(live), -1, dtype=np.int32)
            renumbered[old_ids] = np.arange(len(old_ids), dtype=np.int32)
            terms, live = renumbered[terms], live[old_ids]
            del renumbered
        if recent:  # sorted by term but for the recent part: a stable sort is one merge
            order = np.argsort(terms, kind="stable")
            terms, ords, tfs = terms[order], ords[order], tfs[order]
            del order
        counts = np.bincount(terms, minlength=len(live))
        ends = np.cumsum(counts)
        self._ords, self._tfs = ords, _narrowest(tfs)
        self._live = array("q", live.tobytes())
        self._count = array("q", counts.tobytes())
        self._start = array("q", (ends - counts).tobytes())
        self._recent, self._recent_size, self._holes, self._removed = {}, 0, 0, 0

    def _entries(self, term_id: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """A term's postings (ordinals ascending, counts): views of the merged
        arrays, or new arrays where it has recent ones (the caller holds the
        lock, and lets go of them before it). Either way int32 ordinals and
        the counts in an unsigned type that holds them, as `loops` reads them."""
        start, size = self._start[term_id], self._count[term_id]
        ords, tfs = self._ords[start : start + size], self._tfs[start : start + size]
        recent = self._recent.get(term_id)
        if recent is None:
            return ords, tfs
        counts = _narrowest(np.frombuffer(recent.tfs, dtype=np.int64))
        return (np.concatenate([ords, np.frombuffer(recent.ords, dtype=np.int64)],
                               dtype=np.int32),
                np.concatenate([tfs, counts], dtype=np.promote_types(tfs.dtype, counts.dtype)))

    def search(self, query: str, without: frozenset[str] = frozenset()) -> KeywordHits:
        """BM25 score of every document sharing a term with `query` (its terms
        but those `without`), and the query terms that matched anything."""
        terms = set(tokens(query)) - without
        self.finish_restore()
        with self._lock:
            n = len(self._ordinals)
            if not n:
                return KeywordHits.empty()
            average = self._total / n or 1.0
            asked = list(terms)
            found, seen = [], set()  # a term id once, should two terms share one
            for term, t in zip(asked, self._terms.of(list(map(hash, asked))), strict=True):
                if t >= 0 and self._live[t] and t not in seen:
                    seen.add(t)
                    found.append((term, t))
            if not found:
                return KeywordHits.empty()
            live = [self._live[t] for _, t in found]
            idfs = [math.log(1 + (n - k + 0.5) / (k + 0.5)) for k in live]
            postings = [self._entries(t) for _, t in found]
            matched = sorted(term for term, _ in found)
            if self._prunes(postings):
                scoring = _Query(self, postings, idfs, average)
                pruned = scoring.pruned(self._shortest)
                if pruned is None:
                    return KeywordHits(*scoring.held_sums(), self._doc_ids, self._ordinals,
                                       matched)
                ords, scores, floor = pruned
                return KeywordHits(ords, scores, self._doc_ids, self._ordinals, matched, scoring,
                                   floor)
            hits = self._sums(postings, idfs, average, len(self._doc_ids))
            return KeywordHits(*hits, self._doc_ids, self._ordinals, matched)

    def _prunes(self, postings: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]]) -> bool:
        """Whether a search of `postings` holds only the documents that can
        rank first (`_Query.pruned`): where they are many (PRUNE_FROM) and
        the whole sum would be the compiled one."""
        total = sum(len(ords) for ords, _ in postings)
        return (self._compiled and len(postings) > 1 and total >= PRUNE_FROM
                and (len(postings) <= MERGED_TERMS_MAX or _dense(total, len(self._doc_ids))))

    def _sums(self, postings: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]],
              idfs: list[float], average: float, ordinal_count: int
              ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Each posting's BM25 score, summed per document: in the compiled
        loop (`loops.bm25_sums`), unless a long query's sum is a merge
        (MERGED_TERMS_MAX), else in NumPy. The caller holds the lock.

        The compiled loop reads the ordinals and counts in the types they are
        stored in, NumPy widens the counts to float64: the same numbers, so
        the same scores to the bit."""
        counts = [len(ords) for ords, _ in postings]
        if self._compiled and (len(postings) <= MERGED_TERMS_MAX
                               or _dense(sum(counts), ordinal_count)):
            bounds = np.zeros(len(postings) + 1, dtype=np.int64)
            np.cumsum(counts, out=bounds[1:])
            return loops.bm25_sums(np.concatenate([o for o, _ in postings]),
                                   np.concatenate([tf for _, tf in postings]),
                                   bounds, np.array(idfs), self._lengths, average,
                                   ordinal_count, K1, B)
        ords, scores = [], []
        for (o, counted), idf in zip(postings, idfs, strict=True):
            tf = counted.astype(np.float64)
            norm = K1 * (1 - B + B * self._lengths[o] / average)
            ords.append(o)
            scores.append(idf * tf * (K1 + 1) / (tf + norm) * (self._lengths[o] != 0))
        return _summed(np.concatenate(ords, dtype=np.int64), np.concatenate(scores),
                       ordinal_count)


# A search holds only the documents that can rank among the first window of
# `KeywordHits.ranked_windows` once its terms have this many postings (below,
# the whole sum is a few hundred microseconds at most).
PRUNE_FROM = 16_384
FIRST_WINDOW = 64
# A term's bound is raised by this share before it is compared: a sum of
# float64 scores and a sum of their bounds round differently, by ~1e-16 of them.
BOUND_SLACK = 1e-9
# The rarest terms' documents, scored to find the floor, are at most this
# share of a search's postings: scoring a document against every term costs
# a few times what adding one posting does.
SEED_SHARE = 8


class _Query:
    """A search's postings, copied out of the index (a removal compacts a
    term's merged entries in place), with what scoring them reads: the whole
    sum, the documents that can rank first, the score of any document. The
    public methods take the index's lock; those named `held_` expect the
    caller to hold it."""

    __slots__ = ("_average", "_bounds", "_count", "_idfs", "_index", "_ords", "_tfs")

    def __init__(self, index: KeywordIndex,
                 postings: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]],
                 idfs: list[float], average: float) -> None:
        self._index, self._average, self._count = index, average, len(index._doc_ids)
        self._bounds = np.zeros(len(postings) + 1, dtype=np.int64)
        np.cumsum([len(ords) for ords, _ in postings], out=self._bounds[1:])
        # In their stored types (`_entries`): no widened copy.
        self._ords = np.concatenate([ords for ords, _ in postings])
        self._tfs = np.concatenate([tfs for _, tfs in postings])
        self._idfs = np.array(idfs, dtype=np.float64)

    def sums(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        with self._index._lock:
            return self.held_sums()

    def at(self, wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        with self._index._lock:
            return self.held_at(wanted)

    def held_sums(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Every matching document and its score (`loops.bm25_sums`)."""
        index = self._index
        return loops.bm25_sums(self._ords, self._tfs, self._bounds, self._idfs, index._lengths,
                               self._average, self._count, K1, B)

    def held_at(self, wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The score of each of `wanted` (ordinals, ascending), 0 for those
        that match nothing: `held_sums`'s, to the bit (`loops.bm25_at`)."""
        index = self._index
        return loops.bm25_at(wanted.astype(np.int64, copy=False), self._ords, self._tfs,
                             self._bounds, self._idfs, index._lengths, self._average, K1, B)

    def pruned(self, shortest: float
               ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], float] | None:
        """The documents that can rank among the first FIRST_WINDOW, with
        their scores, and the floor: every document scoring the
        floor or more is among them. None where no term can be left out.

        MaxScore (Turtle and Flood, 1995), term at a time: the documents of
        the rarest terms, scored in full, give a floor (the FIRST_WINDOW-th
        best of them, so at most the FIRST_WINDOW-th best of all), and a
        term scores at most its largest count over the shortest document
        could. The commonest terms whose bounds together stay under the
        floor can only add to documents found by the others: only the
        others' documents are scored, each against every term. On the
        benchmark's 1M memories "where did we put the macros notes?" then
        scores the ~10k documents of "macro", not the 147k that share a term
        with it (`scripts/bench_keywords.py`)."""
        bounds, ords = self._bounds, self._ords
        counts = np.diff(bounds)
        by_count = np.argsort(counts, kind="stable")
        fewest = np.searchsorted(np.cumsum(counts[by_count]), FIRST_WINDOW) + 1
        if counts[by_count[:fewest]].sum() * SEED_SHARE > len(ords):
            return None  # scoring the seed would cost about what the whole sum does
        seeds = sorted(by_count[:fewest].tolist())
        seed = _union([ords[bounds[t]:bounds[t + 1]] for t in seeds])
        seed_scores = self.held_at(seed)
        if np.count_nonzero(seed_scores) < FIRST_WINDOW:
            return None
        floor = float(np.partition(seed_scores, len(seed) - FIRST_WINDOW)[len(seed) - FIRST_WINDOW])
        most = np.maximum.reduceat(self._tfs, bounds[:-1])
        norm = K1 * (1 - B + B * shortest / self._average)
        bound = self._idfs * most * (K1 + 1) / (most + norm) * (1 + BOUND_SLACK)
        by_bound = np.argsort(bound, kind="stable")
        left_out = np.cumsum(bound[by_bound]) < floor
        if not left_out.any():
            return None
        kept = np.sort(by_bound[~left_out]).tolist()
        if kept == seeds:  # the seed is what is kept: it is scored already
            found, scores = seed, seed_scores
        else:
            found = _union([ords[bounds[t]:bounds[t + 1]] for t in kept])
            scores = self.held_at(found)
        live = scores != 0
        return found[live], scores[live], floor


def _union(runs: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """The values of ascending runs (ordinals, hashes), ascending, once each.
    NumPy 2.4's `np.unique` without `return_*` took 30 ms for one run of
    136k ordinals and 0.52-0.63 s for 1M hashes; a sort of them 1.5 and 14."""
    if len(runs) == 1:
        return runs[0]
    joined = np.sort(np.concatenate(runs))
    return joined[np.concatenate(([True], joined[1:] != joined[:-1]))]


def _capacity(count: int) -> int:
    """The array size `put` reaches for `count` documents: 1024, doubled."""
    capacity = 1024
    while capacity < count:
        capacity *= 2
    return capacity


def _dense(postings: int, ordinal_count: int) -> bool:
    """Whether summing `postings` is one pass over every ordinal rather than
    a merge of the terms' runs (`_summed` says where it pays)."""
    return postings * 3 > ordinal_count


def _summed(ords: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], ordinal_count: int
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Scores summed per ordinal, ordinals ascending, dead (zero) ones dropped.

    `ords` is one ascending run per query term. A stable sort of such runs is
    a merge (timsort), and `bincount` over each ordinal's position among the
    distinct ones then sums its postings in term order, as the dense branch
    does, so both give the same bits. (`np.add.reduceat` would not: it adds
    the first term's score to the pairwise sum of the others, which rounds
    differently for a document matching three terms or more; it was also
    slower, 0.11 against 0.09 ms for 3 x 3,300 postings.) Measured
    (3 terms, random ordinals): at 100k documents, 10k postings 0.14 ms
    merged against 0.39 ms for `unique` + `bincount` and 0.35 ms dense; the
    dense pass wins from ~0.3 x the ordinals on (0.74 against 1.77 ms at half
    of them; at 1M, 8.2 against 23 ms).
    """
    if _dense(len(ords), ordinal_count):  # one pass over every ordinal, no sort
        total = np.bincount(ords, weights=scores, minlength=ordinal_count)
        found = np.flatnonzero(total).astype(np.int64)
        return found, total[found].astype(np.float64)
    order = np.argsort(ords, kind="stable")
    merged = ords[order]
    first = np.concatenate(([True], merged[1:] != merged[:-1]))
    total = np.bincount(np.cumsum(first) - 1, weights=scores[order])
    live = total != 0
    return merged[first][live], total[live]


# The compiled sum merges the terms' runs a term at a time into the run so
# far: O(postings x terms) at worst, where NumPy's stable sort of the runs
# is O(postings x log terms). At 1M ordinals (random ordinals, in process,
# 7 Dec): 8 terms of 20k postings 4.8 ms compiled against 9.9 in NumPy, 16
# of 10k 5.9 against 11.3, 48 of 4k 12.5 against 15.5. Past 8 matched terms
# (a long query) NumPy merges all the same, unless the sum is dense, where
# the compiled pass stays ~3 x faster (12 terms at 140k ordinals: 3.0
# against 9.1 ms): a search of up to 48 terms summed compiled, and pruned,
# was no faster on the benchmark's 1M memories (queries of 12-33 terms,
# 16-90 ms a search and its first window either way).
MERGED_TERMS_MAX = 8


class _Slices:
    """The postings of a restore, built RESTORE_SLICE documents at a time.

    Per slice rather than per document: the words of each document are found
    by one `findall` over its fields joined by spaces (a space ends a word and
    breaks the context of lower-casing, so the words are those of each
    field), every distinct word is turned into its term once, and the (term,
    document) counts are one NumPy `unique`. A slice at a time so that the
    words of all documents never exist at once: at 100k memories of ~18 words
    they were 1.8M strings, a transient of ~200 MB whose freed small objects
    stayed resident. A slice keeps its terms' hashes, not the terms."""

    def __init__(self) -> None:
        self.hashes = np.zeros(0, dtype=np.int64)  # every term's, ascending, once `joined`
        self.documents = 0
        self._parts: list[tuple[npt.NDArray[Any], ...]] = []

    def add(self, documents: list[Iterable[str]]) -> None:
        words = [WORD.findall(" ".join(doc).lower()) for doc in documents]
        m = len(words)
        # Word -> id -> term through C-level maps: a Python loop per word
        # (1.8M words at 100k memories) cost 0.6 s, these ~0.15 s.
        vocabulary = dict(zip(dict.fromkeys(chain.from_iterable(words)), count()))
        word_ids = np.fromiter(map(vocabulary.__getitem__, chain.from_iterable(words)),
                               dtype=np.int64)
        term_of_vocabulary = _terms_uncached(vocabulary)
        is_term = np.fromiter(map(bool, term_of_vocabulary), dtype=bool, count=len(vocabulary))
        keys = np.fromiter(map(hash, term_of_vocabulary), dtype=np.int64, count=len(vocabulary))
        local, term_of_key = np.unique(keys[is_term], return_inverse=True)
        term_of_word = np.full(len(vocabulary), -1, dtype=np.int64)
        term_of_word[is_term] = term_of_key
        token_terms = term_of_word[word_ids]
        token_docs = np.repeat(np.arange(m, dtype=np.int64),
                               np.fromiter(map(len, words), dtype=np.int64, count=m))
        del words, vocabulary, word_ids, term_of_vocabulary, is_term, keys
        kept = token_terms >= 0  # stop words are no terms
        # One key per (term, document): sorted, they are the slice's postings
        # term by term, each in ascending document order, as `put` appends them.
        pairs, tfs = np.unique(token_terms[kept] * m + token_docs[kept], return_counts=True)
        pair_terms, pair_docs = np.divmod(pairs, m)
        self._parts.append((local, pair_terms, (pair_docs + self.documents).astype(np.int32),
                            tfs, np.bincount(token_docs[kept], minlength=m)))
        self.documents += m

    def joined(self) -> tuple[npt.NDArray[Any], ...]:
        """The postings of all slices sorted by term then document (term ids,
        ordinals, counts), and each document's length. Term ids are the
        places of the terms' hashes in `hashes`."""
        if not self._parts:
            return tuple(np.zeros(0, dtype=np.int64) for _ in range(4))
        parts, self._parts = self._parts, []
        self.hashes = _union([part[0] for part in parts])
        terms = np.concatenate([np.searchsorted(self.hashes, local)[pair_terms]
                                for local, pair_terms, *_ in parts]).astype(np.int32)
        ords, tfs, lengths = (np.concatenate(column) for column in zip(
            *(part[2:] for part in parts), strict=True))
        del parts
        # Each slice is sorted by term id (its hashes' order is theirs here):
        # a stable sort of them is a merge.
        order = np.argsort(terms, kind="stable")
        return terms[order], ords[order], tfs[order], lengths.astype(np.float64)


class _TermIds:
    """Each term's id, found by the term's hash (Python's `hash` of the
    string: 64 bits, salted per process unless PYTHONHASHSEED fixes it, so a
    text cannot be written in advance to collide; two of a million terms
    share one with odds of ~3e-8, and then share their postings, in this
    process only: their scores, never a memory, are what it changes).

    The terms of the last merge are `hashes`, ascending, term id t the t-th;
    a term first put since takes the next id (`new`). 8 bytes a term against
    ~90 for its string and dict entry."""

    __slots__ = ("hashes", "new")

    def __init__(self, hashes: npt.NDArray[np.int64] | None = None) -> None:
        self.hashes = np.zeros(0, dtype=np.int64) if hashes is None else hashes
        self.new: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.hashes) + len(self.new)

    def of(self, keys: list[int]) -> list[int]:
        """The id of the term of each hash, -1 for a term not held."""
        found = loops.term_ids(self.hashes, keys)
        if self.new:
            new = self.new.get
            return [new(key, -1) if term_id < 0 else term_id
                    for key, term_id in zip(keys, found, strict=True)]
        return found

    def add(self, key: int) -> int:
        """The id of a new term of hash `key`."""
        term_id = len(self)
        self.new[key] = term_id
        return term_id

    def merged(self, kept: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64] | None, _TermIds]:
        """The terms `kept` (a flag a term id), numbered in the order of their
        hashes, and the old id of each new one (None where every id stays)."""
        if not self.new and kept.all():
            return None, self
        keys = np.concatenate([self.hashes,
                               np.fromiter(self.new, dtype=np.int64, count=len(self.new))])
        old = np.flatnonzero(kept)
        old = old[np.argsort(keys[old])]
        return old, _TermIds(keys[old])


def _counted(fields: Iterable[str]) -> dict[int, int]:
    """How many times each term of `fields` occurs, by the term's hash (two
    terms of one hash are one term, as a restore counts them: `_Slices`)."""
    counts: dict[int, int] = {}
    for field in fields:  # `tokens` inlined: this loop is most of a snapshot load
        for word in WORD.findall(field.lower()):
            if term := _term(word):
                key = hash(term)
                counts[key] = counts.get(key, 0) + 1
    return counts


def _holding(lengths: npt.NDArray[Any], size: int, longest: int) -> npt.NDArray[Any]:
    """`lengths` copied into `size` entries (zeros past them) of a type that
    holds `longest`: uint16, else uint32 (a document of 4 billion terms is
    past any message the daemon takes)."""
    wide = lengths.dtype if longest <= np.iinfo(lengths.dtype).max else np.dtype(np.uint32)
    grown = np.zeros(max(size, len(lengths)), dtype=wide)
    grown[: len(lengths)] = lengths
    return grown


def _narrowest(counts: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """Term frequencies in the narrowest unsigned type that holds them exactly
    (nearly always one byte: a word is rarely in a memory more than 255 times)."""
    top = int(counts.max()) if len(counts) else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.uint64)
