"""The fast recall path against the reference one, on random data.

The reference is `reference_index.search_exact` (every row scored, then the
predicate walked nearest first) and, for the keyword channel, BM25 written
out in plain Python over a dict. Sizes cross the IVF threshold, with and
without filters, with dead rows and re-vectored memories.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from memvaultd.index import ivf as ann
from memvaultd.index import keyword
from memvaultd.index.keyword import K1, B, KeywordIndex, tokens
from memvaultd.index.memory_index import REFINE_MIN, MemoryIndex, tail_limit
from memvaultd.model.memory import Memory
from memvaultd.recall.filter.parse import parse_filter

from .reference_index import live_postings, ranked, search_exact, wait_for_ivf

DIM = 32


def _clustered(n: int, rng: np.random.Generator, centres: int = 50) -> np.ndarray:
    middle = rng.normal(size=(centres, DIM)).astype(np.float32)
    middle /= np.linalg.norm(middle, axis=1, keepdims=True)
    vectors = middle[rng.integers(0, centres, size=n)] + rng.normal(
        0.0, 0.08, size=(n, DIM)).astype(np.float32)
    unit: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(
        np.float32)
    return unit


def _filled(n: int, seed: int, threshold: int) -> tuple[MemoryIndex, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = _clustered(n, rng)
    index = MemoryIndex(DIM)
    index.ivf_threshold = threshold
    for i, vector in enumerate(vectors):
        index.put(Memory(id=f"m{i}", text=f"memory {i}", category="even" if i % 2 else "odd",
                         tags=(f"t{i % 7}",)), vector)
    return index, vectors


def _ids(found: list[tuple[Memory, float]]) -> list[str]:
    return [memory.id for memory, _ in found]


def _same(fast: list[tuple[Memory, float]], exact: list[tuple[Memory, float]]) -> bool:
    """Same memories in the same order, distances equal to float32 rounding
    (a product over gathered rows may round the last bit differently)."""
    return _ids(fast) == _ids(exact) and all(
        math.isclose(a, b, abs_tol=1e-6) for (_, a), (_, b) in zip(fast, exact, strict=True))


@pytest.mark.parametrize("n", [500, 3000])
def test_exact_below_threshold(n: int) -> None:
    index, vectors = _filled(n, seed=n, threshold=10**9)
    rng = np.random.default_rng(1)
    keep_even = parse_filter({"category": "even"}).matches
    keep_rare = parse_filter({"tags": {"contains": "t3"}}).matches
    for query in _clustered(40, rng):
        reference = np.argsort(-(vectors @ query), kind="stable")
        assert _ids(index.search(query, 24)) == [f"m{i}" for i in reference[:24]]
        for keep in (keep_even, keep_rare):
            assert index.search(query, 24, keep) == search_exact(index, query, 24, keep)


def test_ivf_path_matches_the_exact_path() -> None:
    n = 6000
    index, _ = _filled(n, seed=7, threshold=2000)
    assert wait_for_ivf(index)
    rng = np.random.default_rng(2)
    keep_even = parse_filter({"category": "even"}).matches
    queries = _clustered(100, rng)
    overlap = []
    for query in queries:
        fast, exact = index.search(query, 10), search_exact(index, query, 10)
        overlap.append(len(set(_ids(fast)) & set(_ids(exact))) / 10)
        # Scores are exact float32 products whichever rows were read.
        distances = dict((m.id, d) for m, d in exact)
        assert all(math.isclose(d, distances[m.id], abs_tol=1e-6)
                   for m, d in fast if m.id in distances)
        filtered = index.search(query, 10, keep_even)
        assert all(keep_even(m) for m, _ in filtered) and len(filtered) == 10
    assert np.mean(overlap) >= 0.99
    # Probing every list is the exact search. A filter keeping 1 in 7 finds
    # ~18 of its 24 among the 128 rows scored first (`index.REFINE_MIN`), so
    # the search goes on to every probed row.
    index.nprobe = 10**6
    keep_rare = parse_filter({"tags": {"contains": "t3"}}).matches
    for query in queries[:20]:
        assert _same(index.search(query, 24), search_exact(index, query, 24))
        for keep in (keep_even, keep_rare):
            assert _same(index.search(query, 24, keep), search_exact(index, query, 24, keep))


def test_a_search_reads_exactly_the_nearest_lists() -> None:
    """The compiled loop (`loops.probed_lists`) returns the rows of the probed
    lists, in list order, with their products within the codes' rounding of
    NumPy's; `ann.exact` scores rows as NumPy does."""
    vectors = _clustered(3000, np.random.default_rng(11))
    ivf = ann.build(vectors, len(vectors))
    for query in _clustered(20, np.random.default_rng(12)):
        rows, products = ivf.search(query, nprobe=5)
        lists = np.sort(np.argpartition(-(ivf.centroids @ query), 4)[:5])
        expected = np.concatenate([ivf.order[ivf.offsets[i] : ivf.offsets[i + 1]]
                                   for i in lists])
        assert np.array_equal(rows, expected)
        exact = vectors[rows] @ query
        rounding = float(np.sum(np.abs(query) / (2 * ivf.scale)))
        assert np.all(np.abs(products - exact) <= rounding + 1e-6)
        assert not np.allclose(products, exact, atol=1e-6)  # they are the codes' products
        assert np.allclose(ann.exact(vectors, rows, query), exact, atol=1e-6)


def test_a_large_vault_reads_a_small_share_of_its_rows_and_finds_its_nearest() -> None:
    """A search reads `ann.PROBES` lists whatever the vault's size: 300k rows
    of the model's width (1,095 lists), float16 as a vault of that size
    holds them, and the best 128 by code scored exactly (what a recall of
    24 does) hold the exact top 10. 1/25 of the lists would read 4% of the
    rows for the same answers."""
    rng = np.random.default_rng(21)
    dims, n = 384, 300_000
    middle = rng.normal(size=(50, dims)).astype(np.float32)
    middle /= np.linalg.norm(middle, axis=1, keepdims=True)

    def clustered(count: int) -> np.ndarray:
        rows = middle[rng.integers(0, 50, size=count)] + rng.normal(
            0.0, 0.08, size=(count, dims)).astype(np.float32)
        unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return unit

    matrix = np.concatenate([clustered(50_000).astype(np.float16) for _ in range(n // 50_000)])
    ivf = ann.build(matrix, n)
    assert ivf.nlist == int(ann.LISTS_PER_SQRT_N * np.sqrt(n)) and ivf.nprobe == ann.PROBES
    overlap, read = [], []
    for query in clustered(40):
        rows, products = ivf.search(query)
        read.append(len(rows))
        best = rows[np.argpartition(-products, REFINE_MIN - 1)[:REFINE_MIN]]
        top = best[np.argsort(-ann.exact(matrix, best, query))[:10]]
        every = ann.exact(matrix, np.arange(n), query)
        overlap.append(len(set(top.tolist()) & set(np.argpartition(-every, 10)[:10].tolist())) / 10)
    assert np.mean(overlap) >= 0.99
    assert np.mean(read) < 0.03 * n


def test_ivf_follows_writes_removals_and_new_vectors() -> None:
    index, vectors = _filled(4000, seed=3, threshold=1000)
    assert wait_for_ivf(index)
    index.nprobe = 10**6
    rng = np.random.default_rng(4)
    fresh = _clustered(600, rng)
    for i, vector in enumerate(fresh):  # the tail, read by its codes
        index.put(Memory(id=f"new{i}", text="new"), vector)
    for i in range(0, 1500):  # past the compaction fraction: rows renumbered
        index.remove(f"m{i}")
    index.put(Memory(id="m2000", text="moved"), fresh[0])  # a new vector, a new row
    for query in _clustered(20, rng):
        assert _same(index.search(query, 24), search_exact(index, query, 24))
    assert wait_for_ivf(index)
    for query in _clustered(20, rng):
        assert _same(index.search(query, 24), search_exact(index, query, 24))
    assert index.search(fresh[0], 2)[0][0].id in ("new0", "m2000")
    assert "m5" not in _ids(index.search(vectors[5], 5))


def test_the_tail_competes_by_its_codes_and_rows_past_them_are_read_exactly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows written since the IVF was built are coded as they are written
    and ranked with the probed rows: the first candidate set stays the best
    `REFINE_MIN` (fails if the tail were added to it whole, as when it was
    read in float32). Rows past the tail's room are read exactly, so a
    search still finds every row while the IVF is behind."""
    index, _ = _filled(4000, seed=7, threshold=1000)
    assert wait_for_ivf(index)
    monkeypatch.setattr(index, "_maintain", lambda: None)  # the IVF stays behind
    room = 2 * tail_limit(4000)  # the tail's codes hold twice the extension size
    rng = np.random.default_rng(8)
    fresh = _clustered(room + 300, rng)
    for i, vector in enumerate(fresh):
        index.put(Memory(id=f"new{i}", text="new"), vector)
    view = index.view()
    assert len(view.tail_rows) == room and view.count == 4000 + room + 300
    first = next(index._candidates(view, fresh[0], 24))[0]
    assert len(first) == REFINE_MIN + 300  # the best 128 by code, and the uncoded rows
    index.nprobe = 10**6
    for query in [*_clustered(10, rng), fresh[5], fresh[room + 5]]:
        assert _same(index.search(query, 24), search_exact(index, query, 24))
    assert index.search(fresh[room + 5], 1)[0][0].id == f"new{room + 5}"
    assert index.search(fresh[5], 1)[0][0].id == "new5"


def test_filter_that_keeps_few_falls_back_to_the_exact_scan() -> None:
    index, _ = _filled(5000, seed=5, threshold=1000)
    assert wait_for_ivf(index)
    only = {"m17", "m4242", "m999"}
    for query in _clustered(10, np.random.default_rng(6)):
        found = index.search(query, 24, lambda memory: memory.id in only)
        assert {m.id for m, _ in found} == only
        assert _same(found, search_exact(index, query, 24, lambda memory: memory.id in only))


def _reference_bm25(docs: dict[str, list[str]], query: str) -> dict[str, float]:
    counts = {d: Counter(t for f in fields for t in tokens(f)) for d, fields in docs.items()}
    n = len(docs)
    average = sum(sum(c.values()) for c in counts.values()) / n
    scores: dict[str, float] = {}
    for term in set(tokens(query)):
        holders = [d for d, c in counts.items() if term in c]
        if not holders:
            continue
        idf = math.log(1 + (n - len(holders) + 0.5) / (len(holders) + 0.5))
        for d in holders:
            tf = counts[d][term]
            norm = K1 * (1 - B + B * sum(counts[d].values()) / average)
            scores[d] = scores.get(d, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
    return scores


def _keyword_docs() -> tuple[KeywordIndex, dict[str, list[str]]]:
    rng = np.random.default_rng(8)
    words = ["apple", "banana", "cherry", "deploy", "friday", "tests", "vitest", "jest"]
    # z<k>: a rare word (6 documents each), so that a query of those takes the
    # sparse summation rather than the dense one.
    docs = {f"d{i}": [" ".join(rng.choice(words, size=int(rng.integers(1, 9)))), f"t{i % 3}",
                      f"z{i % 500}"]
            for i in range(3000)}
    index = KeywordIndex()
    for doc_id, fields in docs.items():
        index.put(doc_id, fields)
    for i in range(0, 3000, 3):  # re-index a third, remove a tenth
        was, docs[f"d{i}"] = docs[f"d{i}"], ["deploy on friday", "ops"]
        index.put(f"d{i}", docs[f"d{i}"], was)
    for i in range(0, 3000, 10):
        index.remove(f"d{i}", docs.pop(f"d{i}"))
    return index, docs


_KEYWORD_QUERIES = ("apple tests", "deploy friday", "cherry", "t1 jest", "nothing here",
                    "z1 z2 z33", "z3 z400 z10", "apple banana cherry deploy ops z7 t2",
                    "deploy friday ops", "ops deploy friday z1 z4 t1")


@pytest.mark.parametrize("prune_from", [keyword.PRUNE_FROM, 1])
@pytest.mark.parametrize("merge_min", [keyword.MERGE_MIN, 40])
@pytest.mark.parametrize("compiled", [False, True])
def test_keyword_scores_match_plain_bm25(compiled: bool, merge_min: int, prune_from: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Also with the recent postings merged into the arrays every few puts
    and removals (`merge_min` 40), and not at all at 3,000 documents; and
    with every search of two terms or more holding only the documents that
    can rank first (`prune_from` 1)."""
    monkeypatch.setattr(keyword, "MERGE_MIN", merge_min)
    monkeypatch.setattr(keyword, "PRUNE_FROM", prune_from)
    index, docs = _keyword_docs()
    index._compiled = compiled  # False: the sums in NumPy only
    for query in _KEYWORD_QUERIES:
        expected = _reference_bm25(docs, query)
        hits = index.search(query)
        assert len(hits) == len(expected)
        # Every id: matched ones, ones that did not match, removed ids and ids
        # never indexed (0 for all but the first).
        asked = [*docs, "d0", "d10", "never-indexed"]
        for doc_id, score in zip(asked, hits.scores_of(asked), strict=True):
            assert math.isclose(score, expected.get(doc_id, 0.0), rel_tol=1e-9)
        in_order = list(ranked(hits))
        assert sorted(in_order) == sorted(expected)
        assert all(expected[a] >= expected[b] for a, b in itertools.pairwise(in_order))
        # Ties (many: the documents repeat a few words) come first indexed
        # first, across the growing windows `ranked` reads; every third
        # document was indexed again, after the first 3,000.
        score = dict(zip(in_order, hits.scores_of(in_order), strict=True))
        indexed = {d: 3000 + int(d[1:]) // 3 if int(d[1:]) % 3 == 0 else int(d[1:])
                   for d in in_order}
        assert in_order == sorted(in_order, key=lambda d: (-score[d], indexed[d]))



def _common_and_rare_docs() -> tuple[KeywordIndex, dict[str, list[str]]]:
    """A word in nine documents of ten, one in three of ten, ten in one of
    ten each, 50 in 100 each, and one document in seven 300 words long: in a
    query of a rare word and commoner ones, the commoner cannot lift a
    document into the first window (64) by themselves, yet a short document
    of "often" alone outscores a long one of the rare word."""
    rng = np.random.default_rng(11)
    docs = {f"d{i}": [" ".join(["common"] * int(rng.random() < 0.9)
                               + ["often"] * int(rng.random() < 0.3)
                               + [f"m{rng.integers(10)}", f"r{i % 50}"]
                               + ["filler"] * (300 if i % 7 == 3 else int(rng.integers(0, 6))))]
            for i in range(5000)}
    index = KeywordIndex()
    for doc_id, fields in docs.items():
        index.put(doc_id, fields)
    return index, docs


_PRUNED_QUERIES = ("often r7", "common r7", "common often m3 r9", "common m1",
                   "filler common r11 r12", "common filler")


def test_a_search_of_many_postings_holds_what_can_rank_first_and_answers_as_the_whole_sum(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer (the order read window by window, each id's score, the
    whole set) is the whole sum's to the bit; and "often r7" holds only
    documents of r7 until a window reads past them."""
    index, docs = _common_and_rare_docs()
    monkeypatch.setattr(keyword, "PRUNE_FROM", 10**12)
    whole = {query: index.search(query) for query in _PRUNED_QUERIES}
    monkeypatch.setattr(keyword, "PRUNE_FROM", 1)
    asked = [*docs, "never-indexed"]
    for query, expected in whole.items():
        hits = index.search(query)
        assert list(ranked(hits)) == list(ranked(expected)), query
        assert np.array(hits.scores_of(asked)).tobytes() == \
            np.array(expected.scores_of(asked)).tobytes(), query
        assert hits.scores.tobytes() == expected.scores.tobytes(), query
        assert hits.matched == expected.matched
    hits = index.search("often r7")
    assert len(hits._ords) == 100 < len(whole["often r7"].ords)
    first = hits.ids_of(next(hits.ranked_windows()).tolist())
    assert hits._query is not None  # the first window read, nothing more summed
    assert first == list(ranked(whole["often r7"]))[: len(first)]
    held = index.search("often r7")
    assert held.scores_of(["d1", "d7"]) == whole["often r7"].scores_of(["d1", "d7"])
    assert held._query is not None  # scored one by one



def test_a_pruned_search_whose_held_documents_all_tie_goes_on_past_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """100 documents of the rare word, one word long, tie at the floor: the
    first window takes every one of them, and the documents of the common
    word come after, as the whole sum ranks them."""
    index = KeywordIndex()
    for i in range(100):
        index.put(f"t{i}", ["tie"])
    for i in range(2000):
        index.put(f"o{i}", [" ".join(["often"] + ["filler"] * (i % 7))])
    expected = list(ranked(index.search("often tie")))
    monkeypatch.setattr(keyword, "PRUNE_FROM", 1)
    hits = index.search("often tie")
    assert len(hits._ords) == 100
    assert list(ranked(hits)) == expected
    assert len(expected) == 2100


def test_a_pruned_search_read_after_removals_leaves_them_out_and_nothing_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Removals after the search, enough to compact the common word's
    entries in place: the windows read past the held documents then sum
    the postings the search copied, and list each live document once."""
    monkeypatch.setattr(keyword, "PRUNE_FROM", 1)
    index, docs = _common_and_rare_docs()
    before = list(ranked(index.search("common often m3 r9")))
    hits = index.search("common often m3 r9")
    removed = {f"d{i}" for i in range(1, 5000, 2)}
    for doc_id in sorted(removed):
        index.remove(doc_id, docs.pop(doc_id))
    after = list(ranked(hits))
    assert after == [doc_id for doc_id in before if doc_id not in removed]
    assert len(set(after)) == len(after)


def test_terms_that_lose_every_document_are_merged_away_and_can_come_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round replaces every document's words, so the last round's terms
    lose all their documents: merges (every ~10 entries) drop those terms and
    renumber the others, and a term that comes back is found again."""
    monkeypatch.setattr(keyword, "MERGE_MIN", 10)
    index, docs = KeywordIndex(), {}
    for round_ in range(6):
        word = f"w{round_ % 3}"  # the first round's words come back in the fourth
        for i in range(60):
            was, docs[f"d{i}"] = docs.get(f"d{i}"), [f"{word}x{i % 7} common", f"t{i % 3}"]
            index.put(f"d{i}", docs[f"d{i}"], was)
        for i in range(round_, 60, 4):
            if f"d{i}" in docs:
                index.remove(f"d{i}", docs.pop(f"d{i}"))
        for query in ("common", f"{word}x3", f"{word}x1 t2", "w0x2 w1x2 w2x2 common"):
            expected = _reference_bm25(docs, query)
            hits = index.search(query)
            assert sorted(ranked(hits)) == sorted(expected), query
            for doc_id, score in zip(expected, hits.scores_of(list(expected)), strict=True):
                assert math.isclose(score, expected[doc_id], rel_tol=1e-9)
    assert len(index._terms) < 3 * 7 + 1 + 3  # the terms of one round and a few more


def test_a_removal_or_reindexing_from_other_fields_is_refused_and_changes_nothing() -> None:
    """The index keeps no list of a document's terms: a removal counts down
    the terms of the fields it is given, so fields other than those the
    document was indexed from (of another length, or with a term never
    indexed) are refused before anything changes."""
    index, docs = _keyword_docs()
    before = {query: index.search(query) for query in _KEYWORD_QUERIES}
    doc_id = next(iter(docs))
    for wrong in (["apple"] + docs[doc_id], ["unheard-of words"],
                  [docs[doc_id][0].replace(docs[doc_id][0].split()[0], "plum", 1),
                   *docs[doc_id][1:]]):
        with pytest.raises(ValueError, match=doc_id):
            index.remove(doc_id, wrong)
        with pytest.raises(ValueError, match=doc_id):
            index.put(doc_id, ["something new"], wrong)
    with pytest.raises(ValueError, match=doc_id):
        index.put(doc_id, ["something new"])  # indexed already: its fields are needed
    for query, hits in before.items():
        again = index.search(query)
        assert np.array_equal(again.ords, hits.ords) and again.scores.tobytes() == \
            hits.scores.tobytes()
    index.remove(doc_id, docs.pop(doc_id))
    for query in _KEYWORD_QUERIES:
        assert sorted(ranked(index.search(query))) == sorted(_reference_bm25(docs, query))


def test_two_terms_of_one_hash_share_their_postings_and_still_count_down(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Terms are held as their 64-bit hashes: two terms of one hash (odds of
    ~3e-8 among a million, salted per process) score as one term, and
    removing their documents leaves neither behind."""
    def colliding(value: object) -> int:
        return 7 if value in ("alpha", "beta") else hash(value)

    monkeypatch.setattr(keyword, "hash", colliding, raising=False)
    monkeypatch.setattr(keyword, "MERGE_MIN", 4)
    puts = {"a": ["alpha one"], "b": ["beta two"], "c": ["gamma three"],
            "e": ["alpha beta alpha"]}  # both in one document: one term counted thrice
    restored = KeywordIndex()
    restored.restore(list(puts), list(puts.values()))
    index = KeywordIndex()
    for doc_id, fields in puts.items():
        index.put(doc_id, fields)
    for each in (index, restored):
        assert sorted(ranked(each.search("alpha"))) == ["a", "b", "e"]
        assert sorted(ranked(each.search("beta alpha"))) == ["a", "b", "e"]
    assert live_postings(index) == live_postings(restored)
    assert index.search("alpha").scores.tolist() == restored.search("alpha").scores.tolist()
    for doc_id in ("a", "b", "e"):
        index.remove(doc_id, puts[doc_id])
    index.put("d", ["delta four"])  # past MERGE_MIN: a merge drops the shared term
    assert not len(index.search("alpha")) and not len(index.search("beta"))
    assert list(ranked(index.search("gamma delta"))) in (["c", "d"], ["d", "c"])
    assert len(index._terms) == 4  # gamma, three, delta, four: the others merged away


@pytest.mark.parametrize("merge_min", [keyword.MERGE_MIN, 40])
def test_compiled_keyword_sums_are_numpys_to_the_bit(merge_min: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways of summing (dense and merged, one term and many) give the
    same documents and the same float64 scores, so a long query summed in
    NumPy (past keyword.MERGED_TERMS_MAX terms) ranks as a short one summed
    by the compiled loop; also with the postings merged into the arrays every
    few writes (`merge_min` 40)."""
    monkeypatch.setattr(keyword, "MERGE_MIN", merge_min)
    plain, _ = _keyword_docs()
    plain._compiled = False
    fast, _ = _keyword_docs()
    # Three rare words in the same 60 documents, repeated 1-4 times: the
    # merged sum then adds three scores of different sizes per document.
    rng = np.random.default_rng(9)
    for index in (plain, fast):
        for i in range(3000):
            index.put(f"r{i}", [" ".join(f"{w}{i % 50} " * int(rng.integers(1, 5))
                                         for w in ("q", "r", "s")), "filler words"])
        rng = np.random.default_rng(9)
    long_query = "apple banana cherry deploy friday tests vitest jest ops t1 z1 q1"  # > 8 terms
    for query in (*_KEYWORD_QUERIES, "q1 r1 s1", "q7 s7 r7 z7", long_query):
        a, b = plain.search(query), fast.search(query)
        assert np.array_equal(a.ords, b.ords)
        assert a.scores.tobytes() == b.scores.tobytes(), query


@pytest.mark.parametrize("compiled", [False, True])
def test_a_document_past_65535_terms_widens_the_lengths_and_scores_as_plain_bm25(
        compiled: bool) -> None:
    """The lengths are held in uint16 until a document is longer
    (`keyword._holding`): that one widens them to uint32, every score stays
    plain BM25's, and once it is removed it matches nothing."""
    index, docs = _keyword_docs()
    index._compiled = compiled
    assert index._lengths.dtype == np.uint16
    docs["long"] = [" ".join(["apple"] * 40_000 + ["deploy"] * 30_000), "ops"]
    index.put("long", docs["long"])
    assert index._lengths.dtype == np.uint32
    asked = [*docs, "d0"]
    for query in ("apple tests", "deploy friday ops", "cherry"):
        expected = _reference_bm25(docs, query)
        for doc_id, score in zip(asked, index.search(query).scores_of(asked), strict=True):
            assert math.isclose(score, expected.get(doc_id, 0.0), rel_tol=1e-9), doc_id
    index.remove("long", docs.pop("long"))
    assert index.search("apple deploy").scores_of(["long"]) == [0.0]
    assert "long" not in set(ranked(index.search("apple deploy")))


def test_threshold_constant_is_what_the_docs_say() -> None:
    assert ann.IVF_THRESHOLD == 20_000
