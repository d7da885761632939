"""The compiled search loops (`memvaultd.index.loops`): the same products
NumPy gives, arguments checked before any byte is read or written, and a
daemon whose vault is past the IVF threshold serving with them and without a
JIT compiler in its memory."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from memvault import Client
from memvaultd.index import ivf as ann
from memvaultd.index import keyword, loops

from .daemon_process import DaemonProcess

# Dimensions: the model's, one under a vector, and some that leave a tail
# past the last whole 64 lanes (the loops' scalar end).
DIMS = [384, 7, 70, 130]


def _unit(rng: np.random.Generator, rows: int, dims: int) -> np.ndarray:
    matrix = rng.normal(size=(rows, dims)).astype(np.float32)
    unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


@pytest.mark.parametrize("dims", DIMS)
def test_products_are_numpys_within_float32_rounding(dims: int) -> None:
    rng = np.random.default_rng(dims)
    matrix = _unit(rng, 500, dims)
    query = _unit(rng, 1, dims)[0]
    rows = rng.integers(0, 500, 97).astype(np.int64)
    expected = matrix[rows].astype(np.float64) @ query.astype(np.float64)
    assert np.allclose(loops.exact(matrix, rows, query), expected, atol=2e-6)

    half = matrix.astype(np.float16)
    widened = half[rows].astype(np.float32)
    bits = half.view(np.uint16)
    assert np.allclose(loops.half_products(bits, rows, query),
                       widened.astype(np.float64) @ query, atol=2e-6)
    out = np.empty((len(rows), dims), np.float32)
    loops.half_widen(bits, rows, out)
    assert np.array_equal(out, widened)

    codes = rng.integers(-127, 128, size=(500, dims), dtype=np.int8)
    order = rng.permutation(500).astype(np.int64)
    starts, ends = np.array([0, 40, 300], np.int64), np.array([10, 40, 380], np.int64)
    got_rows, products = loops.probed_lists(codes, order, starts, ends, query)
    spans = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends, strict=True)])
    assert np.array_equal(got_rows, order[spans])
    _within_the_query_steps(codes[spans], query, products)


def _within_the_query_steps(codes: np.ndarray, query: np.ndarray, products: np.ndarray) -> None:
    """The codes' products are read with the query in whole steps (`loops._in_steps`):
    each within sum|code| x step / 2 of NumPy's, and float32's rounding of the sum."""
    steps = min(32767, (2**31 - 1) // (128 * len(query)))
    step = float(np.abs(query).max()) / steps
    exact = codes.astype(np.float64) @ query.astype(np.float64)
    bound = np.abs(codes.astype(np.float64)).sum(axis=1) * step / 2 + np.abs(exact) * 1e-6
    assert np.all(np.abs(products - exact) <= bound + 1e-9)
    assert np.corrcoef(products, exact)[0, 1] > 0.999999


@pytest.mark.parametrize("dims", [*DIMS, 1024])
def test_the_widest_probe_loop_gives_the_portable_ones_products_to_the_bit(dims: int) -> None:
    """AVX-512 VNNI where this CPU has it (`loops.VNNI`), else the same loop:
    lists of odd and even lengths (it reads two rows at a time), dimensions
    past the last whole 32 (its scalar end), codes at their extremes."""
    rng = np.random.default_rng(dims)
    codes = rng.integers(-128, 128, size=(400, dims), dtype=np.int8)
    codes[:3] = [[-128], [127], [0]]
    order = rng.permutation(400).astype(np.int64)
    starts, ends = np.array([0, 5, 100, 399], np.int64), np.array([3, 5, 258, 400], np.int64)
    for query in (_unit(rng, 1, dims)[0], np.full(dims, 0.03125, np.float32)):
        widest = loops.probed_lists(codes, order, starts, ends, query)
        portable = loops.probed_lists(codes, order, starts, ends, query, widest=False)
        assert np.array_equal(widest[0], portable[0])
        assert widest[1].tobytes() == portable[1].tobytes()


def test_wide_codes_at_their_extremes_stay_within_an_int32_sum() -> None:
    """1,024 dimensions of codes at -128 and a query at its largest everywhere:
    summed in steps of 32767, the total would pass 2^31."""
    dims = 1024
    codes = np.full((3, dims), -128, np.int8)
    codes[1] = 127
    codes[2, ::2] = 127
    query = np.full(dims, 0.03125, np.float32)
    rows, products = loops.probed_lists(codes, np.arange(3, dtype=np.int64), np.array([0]),
                                        np.array([3]), query)
    assert rows.tolist() == [0, 1, 2]
    _within_the_query_steps(codes, query, products)
    assert products[0] < 0 < products[1]


def test_float16_is_widened_exactly_as_numpy_does() -> None:
    """Every finite float16, subnormals included, to the bit; -0.0 is read as
    +0.0 (its subnormal rebasing subtracts 2^-14 from -2^-14), which no
    product can tell apart."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    finite = every[np.isfinite(every.view(np.float16))]
    bits = finite[: len(finite) // 16 * 16].reshape(-1, 16)
    out = np.empty(bits.shape, np.float32)
    loops.half_widen(bits, np.arange(len(bits), dtype=np.int64), out)
    expected = bits.view(np.float16).astype(np.float32)
    negative_zero = bits == 0x8000
    assert out[~negative_zero].tobytes() == expected[~negative_zero].tobytes()
    assert np.all(out[negative_zero] == 0.0)


def test_a_product_is_the_same_bits_every_time() -> None:
    rng = np.random.default_rng(5)
    matrix = _unit(rng, 300, 384)
    rows = np.arange(300, dtype=np.int64)
    first = loops.exact(matrix, rows, matrix[0])
    assert all(loops.exact(matrix, rows, matrix[0]).tobytes() == first.tobytes()
               for _ in range(5))


def _search_parts(rng: np.random.Generator, dims: int, lists: int = 12, rows: int = 900
                  ) -> dict[str, Any]:
    """An IVF's arrays as `ivf.InvertedLists` holds them, over random codes,
    with a tail of 37 coded rows past them, and a float16 matrix of every row."""
    labels = rng.integers(0, lists, rows)
    order = np.argsort(labels, kind="stable").astype(np.int64)
    offsets = np.searchsorted(labels[order], np.arange(lists + 1)).astype(np.int64)
    return {"centroids": _unit(rng, lists, dims), "offsets": offsets,
            "codes": rng.integers(-127, 128, size=(rows, dims), dtype=np.int8), "order": order,
            "tail_codes": rng.integers(-127, 128, size=(40, dims), dtype=np.int8),
            "tail_rows": np.arange(rows, rows + 37, dtype=np.int64),
            "scale": rng.uniform(50, 200, dims).astype(np.float32),
            "matrix": _unit(rng, rows + 37, dims).astype(np.float16)}


def _search(parts: dict[str, Any], query: np.ndarray, probe: int, best: int,
            **flags: Any) -> tuple[np.ndarray, ...]:
    return loops.ivf_search(parts["centroids"], parts["offsets"], parts["codes"],
                            parts["order"], parts["tail_codes"], parts["tail_rows"],
                            parts["scale"], query, probe, parts["matrix"], best, **flags)


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize(("probe", "best"), [(4, 128), (12, 50), (30, 5000), (1, 0)])
def test_an_ivf_search_is_its_parts_in_numpy(dims: int, probe: int, best: int) -> None:
    """`ivf_search` picks the lists NumPy's product and partition pick, reads
    them and the tail as `probed_lists` does, keeps the `best` by product
    as a stable sort would, and scores those as `half_products` does."""
    rng = np.random.default_rng(dims + probe)
    parts = _search_parts(rng, dims)
    for query in _unit(rng, 5, dims):
        rows, products, positions, exact = _search(parts, query, probe, best)
        probe_ = min(probe, len(parts["centroids"]))
        lists = np.sort(np.argsort(-(parts["centroids"] @ query), kind="stable")[:probe_])
        scaled = (query / parts["scale"]).astype(np.float32)
        want_rows, want_products = loops.probed_lists(
            parts["codes"], parts["order"], parts["offsets"][lists], parts["offsets"][lists + 1],
            scaled)
        tail_rows, tail_products = loops.probed_lists(
            parts["tail_codes"], parts["tail_rows"], np.array([0]), np.array([37]), scaled)
        assert np.array_equal(rows, np.concatenate([want_rows, tail_rows]))
        assert np.array_equal(products, np.concatenate([want_products, tail_products]))
        kept = np.sort(np.argsort(-products, kind="stable")[:best])
        assert np.array_equal(positions, kept)
        assert np.array_equal(exact, loops.half_products(
            parts["matrix"].view(np.uint16), rows[kept], query))
        portable = _search(parts, query, probe, best, widest=False)
        assert all(np.array_equal(a, b) for a, b in zip(portable, (rows, products, positions,
                                                                   exact), strict=True))


def test_an_ivf_search_keeps_the_earlier_of_equal_products() -> None:
    rng = np.random.default_rng(5)
    parts = _search_parts(rng, 64, lists=3, rows=300)
    parts["codes"][:] = 1  # every row's product the same
    parts["tail_codes"][:] = 1
    _, products, positions, _ = _search(parts, _unit(rng, 1, 64)[0], 3, 20)
    assert len(set(products.tolist())) == 1 and positions.tolist() == list(range(20))


def test_an_ivf_search_scores_a_float32_matrix() -> None:
    rng = np.random.default_rng(6)
    parts = _search_parts(rng, 384)
    parts["matrix"] = parts["matrix"].astype(np.float32)
    query = _unit(rng, 1, 384)[0]
    rows, _, positions, exact = _search(parts, query, 5, 60)
    assert np.array_equal(exact, loops.exact(parts["matrix"], rows[positions], query))


@pytest.mark.parametrize(("name", "change", "message"), [
    ("a query of the wrong size", {"query": slice(None, -1)}, "dimensions"),
    ("a query that is not finite", {"nan": 7}, "value 7 is not finite"),
    ("a list that ends before it starts", {"offsets": (4, 10**6)}, "before it starts"),
    ("lists past the codes", {"offsets": (12, 10**6)}, "outside"),
    ("too few offsets", {"offsets": "short"}, "offsets for 12 lists"),
    ("a row past the matrix", {"matrix": 500}, "outside a matrix of 500 rows"),
    ("more tail rows than codes", {"tail_rows": 41}, "tail codes"),
    ("no lists to probe", {"probe": 0}, "0 lists"),
    ("rows to score and no matrix", {"no_matrix": True}, "no matrix"),
])
def test_an_ivf_search_refuses_bad_arguments(name: str, change: dict[str, Any],
                                              message: str) -> None:
    rng = np.random.default_rng(8)
    parts = _search_parts(rng, 384)
    query = _unit(rng, 1, 384)[0]
    probe = change.get("probe", 12)
    if "query" in change:
        query = query[change["query"]]
    if "nan" in change:
        query = query.copy()
        query[change["nan"]] = np.nan
    if change.get("offsets") == "short":
        parts["offsets"] = parts["offsets"][:-1]
    elif "offsets" in change:
        at, value = change["offsets"]
        parts["offsets"] = parts["offsets"].copy()
        parts["offsets"][at] = value
    if "matrix" in change:
        parts["matrix"] = parts["matrix"][: change["matrix"]]
    if "no_matrix" in change:
        parts["matrix"] = None
    if "tail_rows" in change:
        parts["tail_rows"] = np.arange(900, 900 + change["tail_rows"], dtype=np.int64)
    with pytest.raises(ValueError, match=message):
        _search(parts, query, probe, 900)


def _bm25_args(rng: np.random.Generator, ordinals: int, terms: int, per: int,
               counts: type[np.unsignedinteger[Any]] = np.uint8,
               lengths: type[np.unsignedinteger[Any]] = np.uint16) -> list[Any]:
    """Postings as the keyword index stores them: int32 ordinals, counts in
    an unsigned type (up to its largest value, past 255 where it is wider),
    and the documents' lengths, a fifth of them 0 (removed)."""
    posts = [np.sort(rng.choice(ordinals, per, replace=False)) for _ in range(terms)]
    bounds = np.zeros(terms + 1, np.int64)
    np.cumsum([per] * terms, out=bounds[1:])
    top = min(int(np.iinfo(counts).max), 70_000)
    return [np.concatenate(posts).astype(np.int32),
            rng.integers(1, top, terms * per, endpoint=True).astype(counts), bounds,
            rng.random(terms) * 4, _lengths(rng, ordinals, lengths), 17.5, ordinals,
            keyword.K1, keyword.B]


def _lengths(rng: np.random.Generator, ordinals: int,
             kind: type[np.unsignedinteger[Any]] = np.uint16) -> npt.NDArray[Any]:
    """Lengths of 3 to 40 terms (past 65,535 in uint32), a fifth of them 0: removed."""
    top = 40 if kind == np.uint16 else 100_000
    lengths = rng.integers(3, top, ordinals).astype(kind)
    lengths[rng.random(ordinals) < 0.2] = 0
    return lengths


@pytest.mark.parametrize(("name", "call"), [
    ("a query of the wrong size", lambda m, c, r, q: loops.exact(m, r, q[:-1])),
    ("a row past the matrix", lambda m, c, r, q: loops.exact(m, np.array([0, 300]), q)),
    ("a negative row", lambda m, c, r, q: loops.half_products(
        m.astype(np.float16).view(np.uint16), np.array([-1]), q)),
    ("a float64 matrix", lambda m, c, r, q: loops.exact(m.astype(np.float64), r, q)),
    ("a list past the codes", lambda m, c, r, q: loops.probed_lists(
        c, r, np.array([250]), np.array([301]), q)),
    ("a list that ends before it starts", lambda m, c, r, q: loops.probed_lists(
        c, r, np.array([20]), np.array([10]), q)),
    ("a query that is not finite", lambda m, c, r, q: loops.probed_lists(
        c, r, np.array([0]), np.array([10]), np.where(np.arange(len(q)) == 7, np.nan, q)
        .astype(np.float32))),
    ("an output of the wrong shape", lambda m, c, r, q: loops.half_widen(
        m.astype(np.float16).view(np.uint16), r, np.empty((len(r), 3), np.float32))),
])
def test_bad_arguments_raise_before_the_loop_runs(name: str, call: Any) -> None:
    rng = np.random.default_rng(1)
    matrix = _unit(rng, 300, 384)
    codes = rng.integers(-127, 128, size=(300, 384), dtype=np.int8)
    rows = np.arange(300, dtype=np.int64)
    with pytest.raises(ValueError):
        call(matrix, codes, rows, matrix[0])


def test_bm25_loops_refuse_postings_of_other_types() -> None:
    # Widened copies are what the stored types spare (`keyword.py`): a
    # caller that made one is told, not served slowly.
    args = _bm25_args(np.random.default_rng(3), 1000, 3, 50)
    refused = pytest.raises((TypeError, ValueError), match=r"dtype|signature|argument types")
    with refused:
        loops.bm25_sums(args[0].astype(np.int64), *args[1:])
    with refused:
        loops.bm25_sums(args[0], args[1].astype(np.float64), *args[2:])
    with refused:
        loops.bm25_at(np.arange(3), args[0].astype(np.int64), *args[1:6], *args[7:])
    with refused:  # lengths as float64
        loops.bm25_sums(*args[:4], args[4].astype(np.float64), *args[5:])


def test_bm25_sums_refuse_an_ordinal_outside_the_documents() -> None:
    args = _bm25_args(np.random.default_rng(2), 1000, 3, 50)
    args[0] = args[0].copy()
    args[0][70] = 1000  # one past the last document
    with pytest.raises(ValueError, match="posting 70 names document 1000"):
        loops.bm25_sums(*args)
    args[0][70] = -3
    with pytest.raises(ValueError, match="posting 70"):
        loops.bm25_sums(*args)


@pytest.mark.parametrize("lengths", [np.uint16, np.uint32])
@pytest.mark.parametrize("counts", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize(("ordinals", "per"), [(1000, 50), (300, 200)])  # merged, dense
def test_bm25_sums_are_numpys_to_the_bit(ordinals: int, per: int,
                                        counts: type[np.unsignedinteger[Any]],
                                        lengths: type[np.unsignedinteger[Any]]) -> None:
    """Both ways of summing against keyword.py's NumPy version (which
    `test_index_equivalence.py` checks against a plain BM25), whatever
    unsigned types hold the counts and the lengths."""
    rng = np.random.default_rng(ordinals)
    args = _bm25_args(rng, ordinals, 4, per, counts, lengths)
    ords, tfs, bounds, idfs, _, average = args[:6]
    index = keyword.KeywordIndex()
    index._compiled = False
    index._lengths = args[4]
    postings = [(ords[bounds[t]:bounds[t + 1]], tfs[bounds[t]:bounds[t + 1]])
                for t in range(len(idfs))]
    expected = index._sums(postings, list(idfs), average, ordinals)
    found, sums = loops.bm25_sums(*args)
    assert np.array_equal(found, expected[0])
    assert sums.tobytes() == expected[1].tobytes()



@pytest.mark.parametrize("terms", [1, 2, 3, 5, 9])
def test_bm25_sums_of_terms_of_every_size_are_numpys_to_the_bit(terms: int) -> None:
    """The merge of runs of unlike lengths (none, one posting, hundreds), a
    document in several runs or in one, dead ones among them: the same
    documents and the same sums as NumPy's. Never dense: at most 9 x 900
    postings over 30,000 documents."""
    rng = np.random.default_rng(40 + terms)
    ordinals = 30_000
    for _ in range(20):
        sizes = rng.choice([0, 1, 2, 40, 300, 900], size=terms)
        posts = [np.sort(rng.choice(ordinals, size, replace=False)) for size in sizes]
        # One document the first and last terms hold (and never no postings).
        posts[0] = np.union1d(posts[0], [7])
        posts[-1] = np.union1d(posts[-1], [7])
        bounds = np.zeros(terms + 1, np.int64)
        np.cumsum([len(p) for p in posts], out=bounds[1:])
        ords = np.concatenate(posts).astype(np.int32)
        tfs = rng.integers(1, 5, len(ords)).astype(np.uint8)
        idfs = rng.random(terms) * 4
        lengths = _lengths(rng, ordinals)
        index = keyword.KeywordIndex()
        index._compiled = False
        index._lengths = lengths
        expected = index._sums([(ords[bounds[t]:bounds[t + 1]], tfs[bounds[t]:bounds[t + 1]])
                                for t in range(terms)], list(idfs), 17.5, ordinals)
        found, sums = loops.bm25_sums(ords, tfs, bounds, idfs, lengths, 17.5, ordinals,
                                      keyword.K1, keyword.B)
        assert np.array_equal(found, expected[0])
        assert sums.tobytes() == expected[1].tobytes()


@pytest.mark.parametrize(("counts", "lengths"), [(np.uint8, np.uint16), (np.uint32, np.uint32)])
@pytest.mark.parametrize(("ordinals", "per"), [(1000, 50), (300, 200), (100_000, 3000)])
def test_bm25_at_is_bm25_sums_to_the_bit_for_each_document(
        ordinals: int, per: int, counts: type[np.unsignedinteger[Any]],
        lengths: type[np.unsignedinteger[Any]]) -> None:
    """Every document asked (those that match, those that match nothing,
    dead ones, the first and the last, one asked twice) scores what the
    whole sum gives it, to the bit, and 0 where the sum leaves it out."""
    rng = np.random.default_rng(ordinals + 1)
    args = _bm25_args(rng, ordinals, 4, per, counts, lengths)
    ords, tfs, bounds, idfs, held, average, _, k1, b = args
    found, sums = loops.bm25_sums(*args)
    whole = np.zeros(ordinals)
    whole[found] = sums
    wanted = np.sort(np.concatenate([rng.choice(ordinals, 400), [0, ordinals - 1, 5, 5]]))
    scores = loops.bm25_at(wanted, ords, tfs, bounds, idfs, held, average, k1, b)
    assert scores.tobytes() == whole[wanted].tobytes()
    every = np.arange(ordinals, dtype=np.int64)
    assert loops.bm25_at(every, ords, tfs, bounds, idfs, held, average, k1,
                         b).tobytes() == whole.tobytes()
    assert len(loops.bm25_at(np.zeros(0, np.int64), ords, tfs, bounds, idfs, held,
                             average, k1, b)) == 0


@pytest.mark.parametrize(("wanted", "message"), [
    ([3, 2], "not in ascending order"), ([5, 1000], "document 1000 of 1000"),
    ([-1], "document -1")])
def test_bm25_at_refuses_documents_out_of_order_or_outside(wanted: list[int],
                                                          message: str) -> None:
    ords, tfs, bounds, idfs, lengths, average = _bm25_args(
        np.random.default_rng(5), 1000, 3, 50)[:6]
    with pytest.raises(ValueError, match=message):
        loops.bm25_at(np.array(wanted, np.int64), ords, tfs, bounds, idfs, lengths,
                      average, keyword.K1, keyword.B)


def test_term_ids_are_numpys_searchsorted_where_found() -> None:
    """Each key's place in the sorted hashes, -1 where it is not one: also
    below the first, past the last, at the int64 ends and in an empty array."""
    rng = np.random.default_rng(4)
    hashes = np.unique(rng.integers(-(2**63), 2**63 - 1, size=5000, dtype=np.int64))
    hashes[0], hashes[-1] = -(2**63), 2**63 - 1
    keys = [*hashes[::7].tolist(), *rng.integers(-(2**63), 2**63 - 1, size=500).tolist(),
            -(2**63), 2**63 - 1, 0]
    at = np.minimum(np.searchsorted(hashes, keys), len(hashes) - 1)
    expected = np.where(hashes[at] == keys, at, -1).tolist()
    assert loops.term_ids(hashes, keys) == expected
    assert loops.term_ids(np.zeros(0, dtype=np.int64), [1, 2]) == [-1, -1]
    assert loops.term_ids(hashes, []) == []
    with pytest.raises(OverflowError):
        loops.term_ids(hashes, [2**63])


def _maps(pid: int, pattern: str) -> bool:
    return re.search(pattern, Path(f"/proc/{pid}/maps").read_text()) is not None


@pytest.mark.parametrize("window", [1, 3, 64, 500])
def test_best_first_is_a_stable_sort_cut_after_the_window_and_its_ties(window: int) -> None:
    """Scores with many ties (as templated memories give), pools ascending
    (as `ranked_windows` passes them) and shuffled, and pools smaller than
    the window."""
    rng = np.random.default_rng(window)
    for size, kinds in ((2000, 7), (300, 300), (40, 3), (1, 1), (0, 1)):
        scores = rng.integers(0, kinds, 3000).astype(np.float64) / 3
        for pool in (np.sort(rng.choice(3000, size, replace=False)),
                     rng.choice(3000, size, replace=False)):
            ranked = pool[np.argsort(-scores[pool], kind="stable")]
            expected = ranked[scores[ranked] >= scores[ranked[min(window, size) - 1]]] if size \
                else ranked
            assert loops.best_first(scores, pool, window).tolist() == expected.tolist()


@pytest.mark.parametrize(("pool", "window"), [([0, 5, 10], 0), ([0, 10, 3], 2), ([-1], 1)])
def test_best_first_refuses_a_window_under_one_and_a_position_outside(pool: list[int],
                                                                     window: int) -> None:
    with pytest.raises(ValueError, match=r"window|outside"):
        loops.best_first(np.zeros(10), np.array(pool, np.int64), window)


def test_a_vault_past_the_ivf_threshold_serves_without_a_jit_compiler(home: Path) -> None:
    """Past 20k memories the daemon builds its IVF and searches it with the
    compiled loops: recall finds the same memory before and after, and the
    process never maps LLVM or numba (they cost ~120 MB of resident memory)."""
    rng = np.random.default_rng(3)
    vectors = _unit(rng, ann.IVF_THRESHOLD + 500, 384)

    def batch(start: int, stop: int) -> list[dict[str, Any]]:
        return [{"text": f"note {i} about deploys", "topic": f"t.{i}",
                 "vector": vectors[i].tolist()} for i in range(start, stop)]

    daemon = DaemonProcess(home)
    with daemon.start(), Client(daemon.socket, timeout=60.0) as client:
        assert daemon.proc is not None
        client.remember_batch(batch(0, 1000))
        hits = client.recall("deploys", query_vector=vectors[7].tolist(), top_k=1)
        assert hits[0].memory.text == "note 7 about deploys"
        for start in range(1000, len(vectors), 5000):
            client.remember_batch(batch(start, min(start + 5000, len(vectors))))
        deadline = time.monotonic() + 90
        while "ivf ready" not in daemon.log and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "ivf ready" in daemon.log
        for i in (7, 12_345, ann.IVF_THRESHOLD + 400):
            hits = client.recall("deploys", query_vector=vectors[i].tolist(), top_k=1)
            assert hits[0].memory.text == f"note {i} about deploys"
        assert _maps(daemon.proc.pid, r"/memvaultd/index/loops\.")
        assert not _maps(daemon.proc.pid, r"llvmlite|/numba/")
        assert daemon.stop() == 0
