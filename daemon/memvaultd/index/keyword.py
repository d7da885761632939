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
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, count, repeat

import numpy as np
import numpy.typing as npt
import Stemmer  # type: ignore[import-not-found]  # PyStemmer, a C extension, ships no stubs

log = logging.getLogger("memvaultd.keyword")

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
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = Stemmer.Stemmer("english")
    stemmed: str = stemmer.stemWord(word)
    return stemmed


def tokens(text: str) -> list[str]:
    return [t for w in WORD.findall(text.lower()) if (t := _term(w))]


@functools.lru_cache(maxsize=1 << 16)
def _term(word: str) -> str:
    """The indexed form of one lower-cased word; "" for a stop word. Cached
    with `stem`: per word, Python's work on a memory's ~12 words was half the
    cost of storing it and of loading a snapshot."""
    word = word.replace("'", "")
    return stem(word) if word and word not in STOP_WORDS else ""


class KeywordHits:
    """The documents that share a term with a query, and their BM25 scores.

    Held as two arrays (document ordinals ascending, scores) rather than a
    dict: at 1M documents a common word matches ~100k of them, and building a
    dict of those costs more than the whole vector search."""

    def __init__(self, ords: npt.NDArray[np.int64], scores: npt.NDArray[np.float64],
                 doc_ids: list[str | None], ordinals: dict[str, int], matched: list[str]
                 ) -> None:
        self.ords, self.scores, self.matched = ords, scores, matched
        self._doc_ids, self._ordinals = doc_ids, ordinals

    @classmethod
    def empty(cls) -> KeywordHits:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0), [], {}, [])

    def __len__(self) -> int:
        return len(self.ords)

    def scores_of(self, doc_ids: Sequence[str]) -> list[float]:
        """The score of each id (0 where it matched nothing), in one search: a
        hybrid recall looks up ~50 candidates and their session neighbours,
        and one `searchsorted` each was ~0.1 ms of it."""
        if not len(self.ords) or not doc_ids:
            return [0.0] * len(doc_ids)
        wanted = np.fromiter(map(self._ordinals.get, doc_ids, repeat(-1)), dtype=np.int64,
                             count=len(doc_ids))
        at = np.minimum(np.searchsorted(self.ords, wanted), len(self.ords) - 1)
        found = self.scores[at] * (self.ords[at] == wanted)
        return found.tolist()  # type: ignore[no-any-return]  # float64 -> list[float]

    def ids_of(self, ordinals: list[int]) -> list[str]:
        """The ids of documents `ordinals`, leaving out those removed since."""
        return [i for i in map(self._doc_ids.__getitem__, ordinals) if i is not None]

    def ranked_windows(self) -> Iterator[npt.NDArray[np.int64]]:
        """Document ordinals, best score first (ties: first indexed first), in
        growing windows (64, then 4 x more each time, and every tie of a
        window's last score), so a caller that stops after 24 sorts ~64.

        `ords` ascend, and so does every pool of positions here: a stable
        sort by score alone then puts ties in ordinal order. That, and the
        window's last score read by `np.partition` rather than located by
        `argpartition`, took the first window from 0.10 to 0.07-0.09 ms on
        the benchmark's queries at 100k (1k-15k hits, ~330 ties in a
        window). The partition is of the negated scores with a small `kth`:
        the same selection as the `len - window`th of the scores took 0.29."""
        scores, window = self.scores, 64
        pool = np.arange(len(scores))
        while len(pool):
            if len(pool) > window:
                part = -scores[pool]
                pool = pool[part <= np.partition(part, window - 1)[window - 1]]
            pool = pool[np.argsort(-scores[pool], kind="stable")]
            yield self.ords[pool]
            pool, window = np.flatnonzero(scores < scores[pool[-1]]), window * 4


class _Postings:
    """One term's (document ordinal, term frequency) pairs, append-only;
    entries of dead ordinals are dropped when they are half the list.

    Stored in `array.array`s: an append costs ~50 ns against ~300 ns for a
    NumPy element store, and a search reads them as NumPy arrays without a
    copy (`np.frombuffer`, under the index lock, released before the next
    append)."""

    __slots__ = ("live", "ords", "tfs")

    def __init__(self) -> None:
        self.ords = array("q")
        self.tfs = array("d")
        self.live = 0

    def compact(self, alive: npt.NDArray[np.bool_]) -> None:
        ords = np.frombuffer(self.ords, dtype=np.int64)
        keep = alive[ords]
        kept_ords, kept_tfs = ords[keep], np.frombuffer(self.tfs, dtype=np.float64)[keep]
        del ords, keep
        self.ords, self.tfs = array("q", kept_ords.tobytes()), array("d", kept_tfs.tobytes())
        self.live = len(self.ords)


class _RestoredTerms:
    """The distinct terms of each document `restore` indexed, by ordinal, as
    arrays (what `_drop` walks): a tuple of strings per document cost 0.17 s
    and ~14 MB at 100k memories."""

    __slots__ = ("ends", "names", "terms")

    def __init__(self, names: list[str], terms: npt.NDArray[np.int64],
                 ends: npt.NDArray[np.int64]) -> None:
        self.names, self.terms, self.ends = names, terms, ends

    def of(self, ordinal: int) -> list[str]:
        if ordinal >= len(self.ends):
            return []
        start = int(self.ends[ordinal - 1]) if ordinal else 0
        return [self.names[t] for t in self.terms[start : int(self.ends[ordinal])].tolist()]


class KeywordIndex:
    """Documents are numbered (ordinals) in the order they are indexed; a
    re-indexed document gets a new ordinal and its old one dies, so postings
    only ever grow at the end and a search reads them as NumPy slices."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._postings: dict[str, _Postings] = {}
        self._ordinals: dict[str, int] = {}
        self._doc_ids: list[str | None] = []
        self._lengths = np.zeros(1024, dtype=np.float64)
        self._alive = np.zeros(1024, dtype=bool)
        self._terms: dict[str, tuple[str, ...]] = {}  # of documents `put`
        self._restored = _RestoredTerms([], np.zeros(0, dtype=np.int64), np.zeros(0, np.int64))
        self._total = 0
        self._compiled: _Sums | None = None  # `_bm25_sums`, once a thread has compiled it
        self._compiling = False
        # Documents `restore_later` took and no one has indexed yet, and the
        # lock under which one caller indexes them while the others wait.
        self._pending: tuple[Sequence[str], Iterable[Iterable[str]]] | None = None
        self._pending_lock = threading.Lock()

    def __len__(self) -> int:
        pending = self._pending
        return len(pending[0]) if pending is not None else len(self._ordinals)

    def put(self, doc_id: str, fields: Iterable[str]) -> None:
        """Index (or re-index) a document from its text fields."""
        counts: dict[str, int] = {}
        for field in fields:  # `tokens` inlined: this loop is most of a snapshot load
            for word in WORD.findall(field.lower()):
                if term := _term(word):
                    counts[term] = counts.get(term, 0) + 1
        self.finish_restore()
        with self._lock:
            self._drop(doc_id)
            ordinal = len(self._doc_ids)
            if ordinal == len(self._lengths):
                self._lengths = np.resize(self._lengths, 2 * ordinal)
                self._alive = np.resize(self._alive, 2 * ordinal)
            self._doc_ids.append(doc_id)
            self._ordinals[doc_id] = ordinal
            for term, tf in counts.items():
                postings = self._postings.get(term)
                if postings is None:
                    postings = self._postings[term] = _Postings()
                postings.ords.append(ordinal)
                postings.tfs.append(tf)
                postings.live += 1
            length = sum(counts.values())
            self._lengths[ordinal] = length
            self._alive[ordinal] = True
            self._terms[doc_id] = tuple(counts)
            self._total += length
            self._compile_when_large()

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
        """`restore`'s indexing (the caller holds `_pending_lock`).

        Built per term rather than per document: the words of each document
        are found by one `findall` over its fields joined by spaces (a space
        ends a word and breaks the context of lower-casing, so the words are
        those of each field), every distinct word is turned into its term
        once, and the (term, document) counts are one NumPy `unique`. 100k
        memories of ~18 words: 1.2 s against 1.45 s for a `put` of each with
        the collector paused (1.9 s with it running)."""
        words = [WORD.findall(" ".join(doc).lower()) for doc in fields]
        if len(words) != len(doc_ids):
            raise ValueError(f"{len(doc_ids)} ids for {len(words)} documents")
        n = len(doc_ids)
        # Word -> id -> term id through C-level maps: a Python loop per word
        # (1.8M words at 100k memories) cost 0.6 s, these ~0.15 s.
        vocabulary = dict(zip(dict.fromkeys(chain.from_iterable(words)), count()))
        word_ids = np.fromiter(map(vocabulary.__getitem__, chain.from_iterable(words)),
                               dtype=np.int64)
        term_of_vocabulary = list(map(_term, vocabulary))
        term_ids = dict(zip(dict.fromkeys(filter(None, term_of_vocabulary)), count()))
        term_of_word = np.fromiter(map(term_ids.get, term_of_vocabulary, repeat(-1)),
                                   dtype=np.int64, count=len(vocabulary))
        token_terms = term_of_word[word_ids]
        token_docs = np.repeat(np.arange(n, dtype=np.int64),
                               np.fromiter(map(len, words), dtype=np.int64, count=n))
        kept = token_terms >= 0  # stop words are no terms
        # One key per (term, document): sorted, they are the postings term
        # by term, each in ascending document order, as `put` appends them.
        pairs, tfs = np.unique(token_terms[kept] * max(n, 1) + token_docs[kept],
                               return_counts=True)
        pair_terms, pair_docs = np.divmod(pairs, max(n, 1))
        lengths = np.bincount(token_docs[kept], minlength=n).astype(np.float64)
        postings = _postings_by_term(list(term_ids), pair_terms, pair_docs, tfs)
        by_doc = np.argsort(pair_docs, kind="stable")
        restored = _RestoredTerms(list(term_ids), pair_terms[by_doc],
                                  np.cumsum(np.bincount(pair_docs, minlength=n)))
        capacity = _capacity(n)
        with self._lock:
            self._postings = postings
            self._ordinals = dict(zip(doc_ids, range(n), strict=True))
            self._doc_ids = list(doc_ids)
            self._lengths = np.zeros(capacity, dtype=np.float64)
            self._lengths[:n] = lengths
            self._alive = np.zeros(capacity, dtype=bool)
            self._alive[:n] = True
            self._restored = restored
            self._total = int(lengths.sum())
            self._compile_when_large()

    def remove(self, doc_id: str) -> None:
        self.finish_restore()
        with self._lock:
            self._drop(doc_id)

    def _drop(self, doc_id: str) -> None:
        ordinal = self._ordinals.pop(doc_id, None)
        if ordinal is None:
            return
        self._alive[ordinal] = False
        self._doc_ids[ordinal] = None
        self._total -= int(self._lengths[ordinal])
        terms = self._terms.pop(doc_id, None)
        for term in self._restored.of(ordinal) if terms is None else terms:
            postings = self._postings[term]
            postings.live -= 1
            if not postings.live:
                del self._postings[term]
            elif postings.live < len(postings.ords) // 2:
                postings.compact(self._alive)

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
            found = [(term, p) for term in terms if (p := self._postings.get(term)) is not None]
            if not found:
                return KeywordHits.empty()
            idfs = [math.log(1 + (n - p.live + 0.5) / (p.live + 0.5)) for _, p in found]
            hits = self._sums([p for _, p in found], idfs, average, len(self._doc_ids))
            return KeywordHits(*hits, self._doc_ids, self._ordinals,
                               sorted(term for term, _ in found))

    def _sums(self, postings: list[_Postings], idfs: list[float], average: float,
              ordinal_count: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Each posting's BM25 score, summed per document: in the compiled
        loop once there is one, unless a long query's sum is a merge
        (MERGED_TERMS_MAX), else in NumPy. The caller holds the lock."""
        counts = [len(p.ords) for p in postings]
        if self._compiled is not None and (len(postings) <= MERGED_TERMS_MAX
                                           or _dense(sum(counts), ordinal_count)):
            return _summed_compiled(self._compiled, postings, counts, idfs, self._lengths,
                                    self._alive, average, ordinal_count)
        ords, scores = [], []
        for entry, idf in zip(postings, idfs, strict=True):
            o = np.frombuffer(entry.ords, dtype=np.int64)
            tf = np.frombuffer(entry.tfs, dtype=np.float64)
            norm = K1 * (1 - B + B * self._lengths[o] / average)
            ords.append(o.copy())
            scores.append(idf * tf * (K1 + 1) / (tf + norm) * self._alive[o])
            del o, tf  # the buffers must be free before the next append
        return _summed(np.concatenate(ords), np.concatenate(scores), ordinal_count)

    def _compile_when_large(self) -> None:
        """From COMPILED_FROM documents on, have a thread compile
        `_bm25_sums`, which searches then use; the caller holds the lock."""
        if self._compiling or len(self._ordinals) < COMPILED_FROM:
            return
        self._compiling = True
        threading.Thread(target=self._compile, name="bm25-compile", daemon=True).start()

    def _compile(self) -> None:
        try:
            sums = compiled_sums()
            one = np.ones(1)
            sums(np.zeros(1, dtype=np.int64), one, np.array([0, 1], dtype=np.int64), one, one,
                 np.ones(1, dtype=bool), 1.0, 1)  # the first call compiles or loads it
        except Exception as exc:  # NumPy's sums stay: the same answers, slower
            log.warning("keyword sums not compiled (%s); searches use NumPy", exc)
            return
        with self._lock:
            self._compiled = sums


def _capacity(count: int) -> int:
    """The array size `put` reaches for `count` documents: 1024, doubled."""
    capacity = 1024
    while capacity < count:
        capacity *= 2
    return capacity


def _postings_by_term(names: list[str], pair_terms: npt.NDArray[np.int64],
                      pair_docs: npt.NDArray[np.int64], tfs: npt.NDArray[np.int64]
                      ) -> dict[str, _Postings]:
    """Each term's postings from the (term, document, count) triples sorted
    by term then document."""
    ends = np.cumsum(np.bincount(pair_terms, minlength=len(names))).tolist()
    ords, counts = memoryview(pair_docs.tobytes()), memoryview(tfs.astype(np.float64).tobytes())
    postings: dict[str, _Postings] = {}
    start = 0
    for name, end in zip(names, ends, strict=True):
        entry = postings[name] = _Postings()
        entry.ords.frombytes(ords[8 * start : 8 * end])
        entry.tfs.frombytes(counts[8 * start : 8 * end])
        entry.live = end - start
        start = end
    return postings


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


_Sums = Callable[..., tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]
# Vaults of this many documents and more sum their postings in one compiled
# loop (`_bm25_sums`); the IVF loads numba from the same size on
# (`ann.IVF_THRESHOLD`), so a small vault still never loads it (+~120 MB).
COMPILED_FROM = 20_000
# The compiled merge reads every term's head for each document it emits:
# O(postings x terms), where NumPy's stable sort of the runs is O(postings x
# log terms). At 1M ordinals, 20k postings a term (random ordinals): 8 terms
# 4.4-4.9 ms compiled against 6.2 in NumPy, 12 terms 9.3-10.5 against
# 10.0-10.5. So past 8 matched terms (a long query) NumPy merges, unless the
# sum is dense, where the compiled pass stays ~3 x faster (12 terms at 140k
# ordinals: 3.0 against 9.1 ms).
MERGED_TERMS_MAX = 8


def _bm25_sums(ords: npt.NDArray[np.int64], tfs: npt.NDArray[np.float64],
               bounds: npt.NDArray[np.int64], idfs: npt.NDArray[np.float64],
               lengths: npt.NDArray[np.float64], alive: npt.NDArray[np.bool_], average: float,
               ordinal_count: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """`KeywordIndex._sums` in one loop without the interpreter lock: term t's
    postings are ords[bounds[t]:bounds[t + 1]]; each posting's score is the
    same float64 operations in the same order, and each document's sum adds
    its terms' scores in term order, as `np.bincount` does.

    Why: NumPy's version makes ~8 array passes and temporaries per query
    term, all of them holding the interpreter lock. On the benchmark's
    queries a search took 0.15 ms at 100k memories and 1.6 ms at 1M, against
    0.10 and 1.1 ms here (docs/benchmarks.md)."""
    count = len(ords)
    scores = np.empty(count, np.float64)
    for t in range(len(idfs)):
        idf = idfs[t]
        for i in range(bounds[t], bounds[t + 1]):
            o = ords[i]
            tf = tfs[i]
            norm = K1 * (1 - B + B * lengths[o] / average)
            scores[i] = idf * tf * (K1 + 1) / (tf + norm) * alive[o]
    if count * 3 > ordinal_count:  # `_dense`, as `_summed` decides
        total = np.zeros(ordinal_count, np.float64)
        for i in range(count):
            total[ords[i]] += scores[i]
        dense = np.flatnonzero(total)
        return dense.astype(np.int64), total[dense]
    # Merge the terms' ascending runs: the smallest head ordinal, summed
    # over the terms holding it in term order. (numba's stable sort, O(n log
    # n), took longer than NumPy's whole version.)
    heads = bounds[:-1].copy()
    found = np.empty(count, np.int64)
    sums = np.empty(count, np.float64)
    m = 0
    while True:
        low = -1
        for t in range(len(idfs)):
            if heads[t] < bounds[t + 1] and (low < 0 or ords[heads[t]] < low):
                low = ords[heads[t]]
        if low < 0:
            return found[:m], sums[:m]
        acc = 0.0
        for t in range(len(idfs)):
            if heads[t] < bounds[t + 1] and ords[heads[t]] == low:
                acc += scores[heads[t]]
                heads[t] += 1
        if acc != 0:
            found[m], sums[m] = low, acc
            m += 1


@functools.cache
def compiled_sums() -> _Sums:
    """`_bm25_sums` compiled (numba: `compiled.py`), without `fastmath`: the
    scores must stay the NumPy version's, bit for bit."""
    from memvaultd.index.compiled import nogil

    return nogil()(_bm25_sums)


def _summed_compiled(sums: _Sums, postings: list[_Postings], counts: list[int],
                     idfs: list[float], lengths: npt.NDArray[np.float64],
                     alive: npt.NDArray[np.bool_], average: float, ordinal_count: int
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The postings' arrays (`counts` entries each) joined, as copies so the
    buffers are free again when this returns, and summed by `sums`."""
    bounds = np.zeros(len(postings) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    ords = np.concatenate([np.frombuffer(p.ords, dtype=np.int64) for p in postings])
    tfs = np.concatenate([np.frombuffer(p.tfs, dtype=np.float64) for p in postings])
    return sums(ords, tfs, bounds, np.array(idfs), lengths, alive, average, ordinal_count)
