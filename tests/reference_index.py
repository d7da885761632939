"""The index as tests hold it: its exact search, a wait for its IVF, and
the keyword hits in order.

`search_exact` scores every row, the reference `MemoryIndex.search` (IVF
candidates above the threshold) is held to (test_index_equivalence.py,
test_restore.py). `wait_for_ivf` lets a test see the IVF the index builds
on a background thread once it is ready; it and `search_exact` read the
index's internals, as its own methods would. `ranked` lists a keyword
search's documents one id at a time, as the reference recall reads them;
`live_postings` reads a keyword index's postings of live documents, for
two indexes to be compared term by term.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from memvaultd.index import ivf as ann
from memvaultd.index.keyword import KeywordHits, KeywordIndex
from memvaultd.index.memory_index import MemoryIndex, Predicate, View
from memvaultd.model.memory import Memory
from memvaultd.model.vector import Vector


def search_exact(index: MemoryIndex, query: Vector, limit: int, keep: Predicate | None = None,
                 view: View | None = None) -> list[tuple[Memory, float]]:
    """`index.search` with every row scored: the same walk over the whole matrix."""
    view = view or index.view()
    if view.count == 0 or limit <= 0:
        return []
    rows = np.arange(view.count)
    return index._walk(view, rows, ann.scores(view.matrix[: view.count], query), limit, keep)


def wait_for_ivf(index: MemoryIndex, timeout: float = 60.0) -> bool:
    """Block until no IVF work is pending, starting it when it is due but
    not running (after a compaction, say); whether an IVF exists."""
    deadline = time.monotonic() + timeout
    with index._lock:
        stale = index._ivf_stale()
    if stale:
        index._maintain()
    while time.monotonic() < deadline:
        with index._lock:
            if not index._maintaining:
                return index._ivf is not None
        time.sleep(0.005)
    return False


def ranked(hits: KeywordHits) -> Iterator[str]:
    """The ids of the documents `hits` found, best score first (ties: first
    indexed first): `KeywordHits.ranked_windows` one id at a time."""
    for ordinals in hits.ranked_windows():
        yield from hits.ids_of(ordinals.tolist())


def live_postings(index: KeywordIndex) -> dict[int, tuple[list[int], list[int]]]:
    """Each term's postings of live documents (ordinals, counts) by its hash, checked
    against its count of live documents. Entries of removed documents are
    left out: when they are dropped depends on when the index merged, which
    differs between a restore and puts, and they score nothing."""
    postings = {}
    terms = index._terms
    for term, term_id in [*((key, at) for at, key in enumerate(terms.hashes.tolist())),
                          *terms.new.items()]:
        ords, tfs = index._entries(term_id)
        kept = index._lengths[ords] != 0  # 0: removed
        assert np.all(np.diff(ords) > 0), term
        assert int(np.count_nonzero(kept)) == index._live[term_id], term
        if index._live[term_id]:
            postings[term] = (ords[kept].tolist(), tfs[kept].tolist())
    return postings
