# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The numeric loops of a search, compiled ahead of time, run without the
interpreter lock.

The daemon serves recalls on a pool of threads that share one interpreter
lock: whatever a recall computes in Python, it computes alone. NumPy releases
the lock inside each large call, but a recall's arrays are small (the ~26
probed IVF lists at 100k memories are ~150 rows each), so a search spent a
third of its time in Python between NumPy calls and took the lock back 26
times. Each loop here does such work in one call with the lock released
(docs/decisions/0015-search-loops-compiled-at-install.md).

Built when the package is installed (setup.py: Cython, then the C compiler);
the vector loops themselves are C (`kernels.h`). Loading this module costs
under 1 MB of resident memory.

Every array argument is checked for its type, shape and contiguity as it is
passed, and every row number or ordinal against what it indexes (one
comparison a row, beside the row's 384 multiply-adds): a wrong one raises
ValueError and nothing is read outside an array or written.
"""

import numpy as np

from cython.view cimport array as cython_array
from libc.stdlib cimport free, malloc
from libc.math cimport fabsf, isfinite, lrintf
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

# A keyword posting's document ordinal and term count, in the types the
# index stores them (`keyword.py`): int32 ordinals, counts in the narrowest
# unsigned type that holds them. Read as stored, a search's postings need no
# widened copy: at 1M memories the keyword channel's median over
# scripts/bench_keywords.py's 20 queries went from 1,296-1,390 to
# 1,200-1,220 us (two runs of each, alternating).
ctypedef fused count_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t

# A document's length in terms, 0 once it is removed (`keyword.py`): uint16
# while every length fits, else uint32. Read once per posting, at an ordinal
# spread over every document: at 1M documents the lengths as float64 (8 MB)
# beside a removed flag (1 MB) missed the 2 MB L2 on most postings, and a
# term of 36,921 postings took 647 us to score; in uint16 (2 MB) it takes 239.
ctypedef fused length_t:
    uint16_t
    uint32_t

ctypedef fused sorted_t:
    int32_t
    int64_t


cdef extern from "kernels.h" nogil:
    void memvault_probed_lists(const int8_t *codes, int64_t dims, const int64_t *order,
                               const int64_t *starts, const int64_t *ends, int64_t lists,
                               const int16_t *query, float step, int64_t *rows_out,
                               float *products_out)
    void memvault_probed_lists_vnni(const int8_t *codes, int64_t dims, const int64_t *order,
                                    const int64_t *starts, const int64_t *ends, int64_t lists,
                                    const int16_t *query, float step, int64_t *rows_out,
                                    float *products_out)
    int memvault_probed_lists_vnni_ok()
    void memvault_scores(const float *matrix, int64_t n, int64_t dims, const float *query,
                         float *out)
    void memvault_best(const float *values, int64_t n, int64_t k, int64_t *out)
    void memvault_exact(const float *matrix, int64_t dims, const int64_t *rows, int64_t count,
                        const float *query, float *out)
    void memvault_half_products(const uint16_t *bits, int64_t dims, const int64_t *rows,
                                int64_t count, const float *query, float *out)
    void memvault_half_widen(const uint16_t *bits, int64_t dims, const int64_t *rows,
                             int64_t count, float *out)


cdef inline void _fits(Py_ssize_t dims, Py_ssize_t query) except *:
    if dims != query:
        raise ValueError(f"the query has {query} dimensions, the rows {dims}")


cdef inline void _within(const int64_t[::1] rows, Py_ssize_t n) except *:
    cdef Py_ssize_t k
    for k in range(rows.shape[0]):
        if not 0 <= rows[k] < n:
            raise ValueError(f"row {rows[k]} is outside a matrix of {n} rows")


cdef Py_ssize_t _steps(const float *query, const float *scale, Py_ssize_t dims, int16_t *out,
                       float *step) noexcept nogil:
    """`query` (divided by `scale` where it is not NULL) as whole steps into
    `out`, and the step: max|value| / 32767, or coarser where
    128 x dims x 32767 would not fit an int32 (past 512 dimensions). -1, or
    the first value that is not finite (nothing is then written)."""
    cdef Py_ssize_t j
    cdef float largest = 0, value
    for j in range(dims):
        value = query[j] / scale[j] if scale != NULL else query[j]
        if not isfinite(value):
            return j
        if fabsf(value) > largest:
            largest = fabsf(value)
    cdef int64_t steps = min(32767, 2147483647 // (128 * max(1, dims)))
    step[0] = largest / steps if largest > 0 else 1.0
    for j in range(dims):
        value = query[j] / scale[j] if scale != NULL else query[j]
        out[j] = <int16_t>lrintf(value / step[0])
    return -1


cdef tuple _in_steps(const float[::1] query):
    """`query` as whole steps (int16), and the step (`_steps`)."""
    cdef Py_ssize_t dims = query.shape[0]
    stepped = np.empty(dims, np.int16)
    cdef int16_t[::1] out = stepped
    cdef float step = 1.0
    cdef Py_ssize_t bad = _steps(&query[0] if dims else NULL, NULL, dims,
                                 &out[0] if dims else NULL, &step)
    if bad >= 0:
        raise ValueError(f"the query's value {bad} is not finite")
    return stepped, step


# Whether `probed_lists` runs its AVX-512 VNNI loop (kernels.h): this CPU has it.
VNNI = bool(memvault_probed_lists_vnni_ok())


def probed_lists(const int8_t[:, ::1] codes, const int64_t[::1] order,
                 const int64_t[::1] starts, const int64_t[::1] ends,
                 const float[::1] query, *, bint widest=True):
    """The rows of `codes[starts[i]:ends[i]]` for every i, as matrix row
    numbers (`order`), and their inner products with `query` (already divided
    by the codes' scale), in list order: every list an IVF search probes, in
    one call. With one `np.dot` per list (25 at 100k, ~150 rows each) a
    search took 210 us and took the lock back 25 times; here 62 us
    (scripts/bench_loops.py).

    The query is read in whole steps (`_in_steps`): a product moves by at
    most sum|code| x step / 2, which is at most 127 max|q| / (32767 mean|q|)
    of the bound on the codes' own rounding (`ivf.py`): under 2% for a query
    whose largest value is under 5 times its mean.

    `widest`: the AVX-512 VNNI loop where the CPU has it (`VNNI`), else the
    portable one, which gives the same products to the bit (tests compare
    the two with `widest=False`)."""
    _fits(codes.shape[1], query.shape[0])
    stepped, step_value = _in_steps(query)
    cdef const int16_t[::1] whole = stepped
    cdef float step = step_value
    if starts.shape[0] != ends.shape[0]:
        raise ValueError(f"{starts.shape[0]} list starts against {ends.shape[0]} ends")
    cdef Py_ssize_t i, total = 0
    for i in range(starts.shape[0]):
        if not 0 <= starts[i] <= ends[i] <= codes.shape[0] or ends[i] > order.shape[0]:
            raise ValueError(f"list {i} [{starts[i]}, {ends[i]}) is outside "
                             f"{codes.shape[0]} codes")
        total += ends[i] - starts[i]
    rows = np.empty(total, np.int64)
    products = np.empty(total, np.float32)
    cdef int64_t[::1] rows_out = rows
    cdef float[::1] products_out = products
    cdef bint vnni = widest and VNNI
    if total:
        with nogil:
            _probe(vnni, &codes[0, 0], codes.shape[1], &order[0], &starts[0], &ends[0],
                   starts.shape[0], &whole[0], step, &rows_out[0], &products_out[0])
    return rows, products


cdef inline void _probe(bint vnni, const int8_t *codes, int64_t dims, const int64_t *order,
                        const int64_t *starts, const int64_t *ends, int64_t lists,
                        const int16_t *query, float step, int64_t *rows_out,
                        float *products_out) noexcept nogil:
    """The probed lists' loop: the AVX-512 VNNI one where `vnni`, else the portable one."""
    if vnni:
        memvault_probed_lists_vnni(codes, dims, order, starts, ends, lists, query, step,
                                   rows_out, products_out)
    else:
        memvault_probed_lists(codes, dims, order, starts, ends, lists, query, step, rows_out,
                              products_out)


cdef object _owned(void *data, Py_ssize_t count, Py_ssize_t itemsize, str kind):
    """An array of `count` values at `data` (from malloc) that frees it when
    it goes."""
    cdef cython_array held = cython_array(shape=(max(count, 1),), itemsize=itemsize,
                                          format=kind, mode="c", allocate_buffer=False)
    held.data = <char *>data
    held.callback_free_data = free
    return np.asarray(held)[:count]


def ivf_search(const float[:, ::1] centroids, const int64_t[::1] offsets,
               const int8_t[:, ::1] codes, const int64_t[::1] order,
               const int8_t[:, ::1] tail_codes, const int64_t[::1] tail_rows,
               const float[::1] scale, const float[::1] query, Py_ssize_t probe,
               matrix, Py_ssize_t best, *, bint widest=True):
    """An IVF search in one call, the lock released once: the `probe` lists
    whose centroids score highest with `query`, every row of theirs and of
    the coded tail (`tail_rows`, coded `tail_codes`) with its product from
    the codes, as `probed_lists` gives them (lists in ascending order, then
    the tail); and the positions among those of the `best` by that product
    (ascending; of equal products the earlier), with their exact products
    from `matrix` (float32, or float16; None where `best` is 0: none).

    Returns (rows, products, positions, exact). List l's codes are
    `codes[offsets[l]:offsets[l + 1]]`, its rows `order[...]` the same;
    `scale` divides `query` before it meets the codes (`ivf.py`).

    Why one call: as five, a search takes the lock back five times, and at
    1M memories, with the keyword search beside it (`columnar.py`), each of
    those waits on the keyword thread's Python. Over the socket, hybrid p50
    3.98 ms against 4.77 (`bench_recall_ab.py`, 4 alternating rounds)."""
    cdef Py_ssize_t dims = query.shape[0], lists = centroids.shape[0], tail = tail_rows.shape[0]
    _fits(centroids.shape[1], dims)
    _fits(codes.shape[1], dims)
    _fits(scale.shape[0], dims)
    if tail:
        _fits(tail_codes.shape[1], dims)
    if tail > tail_codes.shape[0]:
        raise ValueError(f"{tail} tail rows against {tail_codes.shape[0]} tail codes")
    if offsets.shape[0] != lists + 1:
        raise ValueError(f"{offsets.shape[0]} list offsets for {lists} lists")
    if lists == 0 or dims == 0:
        raise ValueError(f"a search of {lists} lists of {dims} dimensions")
    cdef Py_ssize_t i
    if offsets[0] < 0 or offsets[lists] > codes.shape[0] or offsets[lists] > order.shape[0]:
        raise ValueError(f"the lists [{offsets[0]}, {offsets[lists]}) are outside "
                         f"{min(codes.shape[0], order.shape[0])} codes")
    for i in range(lists):
        if offsets[i] > offsets[i + 1]:
            raise ValueError(f"list {i} ends at {offsets[i + 1]} before it starts at {offsets[i]}")
    if probe < 1 or best < 0:
        raise ValueError(f"a search of {probe} lists keeping {best} rows")
    probe = min(probe, lists)
    cdef const float[:, ::1] floats
    cdef const uint16_t[:, ::1] bits
    cdef bint half = False
    cdef Py_ssize_t height = 0
    if matrix is None:
        if best:
            raise ValueError(f"{best} rows to score exactly and no matrix to score them from")
    elif matrix.dtype == np.float16:
        half = True
        bits = matrix.view(np.uint16)
        _fits(bits.shape[1], dims)
        height = bits.shape[0]
    else:
        floats = matrix
        _fits(floats.shape[1], dims)
        height = floats.shape[0]
    cdef bint vnni = widest and VNNI
    cdef Py_ssize_t total = 0, kept = 0, bad_value = -1, bad_row = -1
    cdef float step = 1.0
    cdef float *scores = NULL
    cdef float *products = NULL
    cdef float *exact_out = NULL
    cdef int64_t *chosen = NULL
    cdef int64_t *starts = NULL
    cdef int64_t *rows = NULL
    cdef int64_t *positions = NULL
    cdef int64_t *picked = NULL
    cdef int16_t *whole = NULL
    cdef int64_t zero = 0
    cdef int64_t tail_end = tail
    cdef bint starved = False
    with nogil:
        scores = <float *>malloc(lists * sizeof(float))
        chosen = <int64_t *>malloc(probe * sizeof(int64_t))
        starts = <int64_t *>malloc(2 * probe * sizeof(int64_t))
        whole = <int16_t *>malloc(dims * sizeof(int16_t))
        if scores == NULL or chosen == NULL or starts == NULL or whole == NULL:
            starved = True
        else:
            bad_value = _steps(&query[0], &scale[0], dims, whole, &step)
        if not starved and bad_value < 0:
            memvault_scores(&centroids[0, 0], lists, dims, &query[0], scores)
            memvault_best(scores, lists, probe, chosen)
            for i in range(probe):
                starts[i] = offsets[chosen[i]]
                starts[probe + i] = offsets[chosen[i] + 1]
                total += starts[probe + i] - starts[i]
            total += tail
            kept = min(best, total)
            rows = <int64_t *>malloc(max(total, 1) * sizeof(int64_t))
            products = <float *>malloc(max(total, 1) * sizeof(float))
            positions = <int64_t *>malloc(max(kept, 1) * sizeof(int64_t))
            picked = <int64_t *>malloc(max(kept, 1) * sizeof(int64_t))
            exact_out = <float *>malloc(max(kept, 1) * sizeof(float))
            starved = (rows == NULL or products == NULL or positions == NULL or picked == NULL
                     or exact_out == NULL)
        if not starved and bad_value < 0:
            _probe(vnni, &codes[0, 0], dims, &order[0], starts, starts + probe, probe, whole,
                   step, rows, products)
            if tail:
                _probe(vnni, &tail_codes[0, 0], dims, &tail_rows[0], &zero, &tail_end, 1, whole,
                       step, rows + total - tail, products + total - tail)
            if kept:
                memvault_best(products, total, kept, positions)
                for i in range(kept):
                    picked[i] = rows[positions[i]]
                    if not 0 <= picked[i] < height:
                        bad_row = picked[i]
                        break
            if kept and bad_row < 0:
                if half:
                    memvault_half_products(&bits[0, 0], dims, picked, kept, &query[0], exact_out)
                else:
                    memvault_exact(&floats[0, 0], dims, picked, kept, &query[0], exact_out)
        free(scores)
        free(chosen)
        free(starts)
        free(whole)
        free(picked)
    if starved or bad_value >= 0 or bad_row >= 0:
        free(rows)
        free(products)
        free(positions)
        free(exact_out)
        if starved:
            raise MemoryError(f"an IVF search of {total} rows")
        if bad_value >= 0:
            raise ValueError(f"the query's value {bad_value} is not finite")
        raise ValueError(f"row {bad_row} is outside a matrix of {height} rows")
    return (_owned(rows, total, sizeof(int64_t), "q"), _owned(products, total, sizeof(float), "f"),
            _owned(positions, kept, sizeof(int64_t), "q"),
            _owned(exact_out, kept, sizeof(float), "f"))


cdef _products_of(Py_ssize_t n, Py_ssize_t dims, const int64_t[::1] rows,
                  Py_ssize_t query):
    """The array for the products of `rows` of an n x dims matrix with a
    query of `query` values, once the rows and the query fit the matrix."""
    _fits(dims, query)
    _within(rows, n)
    return np.empty(rows.shape[0], np.float32)


def exact(const float[:, ::1] matrix, const int64_t[::1] rows, const float[::1] query):
    """`matrix[rows] @ query` without the copy of the rows."""
    products = _products_of(matrix.shape[0], matrix.shape[1], rows, query.shape[0])
    cdef float[::1] out = products
    if rows.shape[0]:
        with nogil:
            memvault_exact(&matrix[0, 0], matrix.shape[1], &rows[0], rows.shape[0],
                           &query[0], &out[0])
    return products


def half_products(const uint16_t[:, ::1] bits, const int64_t[::1] rows,
                  const float[::1] query):
    """`bits[rows] @ query`, `bits` being float16 values, widened as read."""
    products = _products_of(bits.shape[0], bits.shape[1], rows, query.shape[0])
    cdef float[::1] out = products
    if rows.shape[0]:
        with nogil:
            memvault_half_products(&bits[0, 0], bits.shape[1], &rows[0], rows.shape[0],
                                   &query[0], &out[0])
    return products


def half_widen(const uint16_t[:, ::1] bits, const int64_t[::1] rows, float[:, ::1] out):
    """`out[k] = bits[rows[k]]` widened to float32."""
    if out.shape[0] != rows.shape[0] or out.shape[1] != bits.shape[1]:
        raise ValueError(f"out is {out.shape[0]} x {out.shape[1]}, "
                         f"the rows {rows.shape[0]} x {bits.shape[1]}")
    _within(rows, bits.shape[0])
    if rows.shape[0] and bits.shape[1]:  # nothing to write otherwise
        with nogil:
            memvault_half_widen(&bits[0, 0], bits.shape[1], &rows[0], rows.shape[0],
                                &out[0, 0])


cdef inline Py_ssize_t _first_at_least(const sorted_t[::1] values, Py_ssize_t lo,
                                        Py_ssize_t hi, int64_t key) noexcept nogil:
    """The first place in values[lo:hi] (ascending) holding `key` or more; `hi` if none."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if values[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline void _postings_agree(Py_ssize_t count, Py_ssize_t counts,
                                 const int64_t[::1] bounds, Py_ssize_t terms) except *:
    """`count` postings, `counts` term counts and the bounds of `terms` terms
    agree: each term's postings a slice of them, in order."""
    cdef Py_ssize_t t
    if counts != count or bounds.shape[0] != terms + 1 or bounds[0] != 0 \
            or bounds[terms] != count:
        raise ValueError(f"{count} postings, {counts} counts, {terms} terms "
                         f"and {bounds.shape[0]} bounds do not agree")
    for t in range(terms):
        if bounds[t] > bounds[t + 1]:
            raise ValueError(f"term {t}'s postings end before they start")


def bm25_sums(const int32_t[::1] ords, const count_t[::1] tfs, const int64_t[::1] bounds,
              const double[::1] idfs, const length_t[::1] lengths,
              double average, Py_ssize_t ordinal_count, double k1, double b):
    """Each posting's BM25 score, summed per document: term t's postings are
    ords[bounds[t]:bounds[t + 1]]; `k1` and `b` are BM25's. Each score is
    the same float64 operations in the same order as keyword.py's NumPy
    version, and each document's sum adds its terms' scores in term order,
    as `np.bincount` does: the same bits (setup.py compiles without
    contracting a multiply and an add).
    NumPy's version makes ~8 array passes and temporaries a term, all of
    them holding the lock: a 3-term query at 100k 80 us, here 42."""
    cdef Py_ssize_t count = ords.shape[0], terms = idfs.shape[0]
    cdef Py_ssize_t t, i, m = 0, wrong = -1
    _postings_agree(count, tfs.shape[0], bounds, terms)
    if ordinal_count < 0:
        raise ValueError(f"{ordinal_count} documents")
    # An ordinal indexes lengths and the sums: one unsigned comparison each
    # (a negative one wraps past the limit).
    cdef size_t limit = min(ordinal_count, lengths.shape[0])
    scores_array = np.empty(count, np.float64)
    cdef double[::1] scores = scores_array
    cdef double idf, tf, norm
    # Once, as NumPy's version computes them once for a whole array.
    cdef double k1_plus_1 = k1 + 1, one_minus_b = 1 - b
    cdef int64_t o
    cdef double[::1] total
    with nogil:
        for t in range(terms):
            idf = idfs[t]
            for i in range(bounds[t], bounds[t + 1]):
                o = ords[i]
                if <size_t>o >= limit:
                    wrong = i
                    break
                tf = <double>tfs[i]
                norm = k1 * (one_minus_b + b * <double>lengths[o] / average)
                scores[i] = idf * tf * k1_plus_1 / (tf + norm) * (lengths[o] != 0)
            if wrong >= 0:
                break
    if wrong >= 0:
        raise ValueError(f"posting {wrong} names document {ords[wrong]} of {limit}")
    if count * 3 > ordinal_count:  # `_dense`, as keyword.py's `_summed` decides
        total_array = np.zeros(ordinal_count, np.float64)
        total = total_array
        with nogil:
            for i in range(count):
                total[ords[i]] += scores[i]
        dense = np.flatnonzero(total_array)
        return dense.astype(np.int64), total_array[dense]
    # Merge the terms' ascending runs a term at a time, in term order: the
    # run so far (each document's sum over the terms before) with the next
    # term's, a document in both taking `sum + score`. Each sum is added in
    # term order from 0.0, as a walk of every term's head per document adds
    # it ((0.0 + s0) + s1 ...: the same bits), but each step of a two-way
    # merge is one comparison, not a scan of every term's head. At 1M documents
    # (scripts/bench_loops.py --rows 1000000, against NumPy in the same run):
    # 3 terms of 20k postings 1.57 -> 1.20 ms, 8 terms 7.65 -> 3.97 ms.
    # Dead documents (a sum of zeros) are dropped at the end.
    run_ords = np.empty(max(count, 1), np.int64)
    run_sums = np.empty(max(count, 1), np.float64)
    spare_ords = np.empty(max(count, 1), np.int64)
    spare_sums = np.empty(max(count, 1), np.float64)
    cdef int64_t[::1] run_o = run_ords, spare_o = spare_ords
    cdef double[::1] run_s = run_sums, spare_s = spare_sums
    cdef int64_t *a_ords = &run_o[0]
    cdef int64_t *b_ords = &spare_o[0]
    cdef double *a_sums = &run_s[0]
    cdef double *b_sums = &spare_s[0]
    cdef Py_ssize_t held = 0, j, end, out
    with nogil:
        for t in range(terms):
            i, j, end, out = 0, bounds[t], bounds[t + 1], 0
            while i < held and j < end:
                if a_ords[i] < ords[j]:
                    b_ords[out] = a_ords[i]
                    b_sums[out] = a_sums[i]
                    i += 1
                elif a_ords[i] > ords[j]:
                    b_ords[out] = ords[j]
                    b_sums[out] = 0.0 + scores[j]
                    j += 1
                else:
                    b_ords[out] = a_ords[i]
                    b_sums[out] = a_sums[i] + scores[j]
                    i += 1
                    j += 1
                out += 1
            while i < held:
                b_ords[out] = a_ords[i]
                b_sums[out] = a_sums[i]
                i += 1
                out += 1
            while j < end:
                b_ords[out] = ords[j]
                b_sums[out] = 0.0 + scores[j]
                j += 1
                out += 1
            held = out
            a_ords, b_ords = b_ords, a_ords
            a_sums, b_sums = b_sums, a_sums
        for i in range(held):
            if a_sums[i] != 0:
                a_ords[m] = a_ords[i]
                a_sums[m] = a_sums[i]
                m += 1
    # The run the last term merged into: the first merges into `spare_*`.
    if terms % 2:
        return spare_ords[:m], spare_sums[:m]
    return run_ords[:m], run_sums[:m]


def bm25_at(const int64_t[::1] wanted, const int32_t[::1] ords, const count_t[::1] tfs,
            const int64_t[::1] bounds, const double[::1] idfs, const length_t[::1] lengths,
            double average, double k1, double b):
    """The BM25 score of each document of `wanted` (ordinals, ascending) over
    the postings as `bm25_sums` takes them: the same float64 operations,
    added in term order from zero, so the same bits as its sum for that
    document (0 for one it would leave out). Each term's postings are
    searched from where the last wanted document was found, by doubling
    steps then halving them: ~|wanted| x log(gap) reads a term, so scoring
    the 20k documents of a rare word against a common word's 125k postings
    reads a few of the common word's entries each, not all 125k."""
    cdef Py_ssize_t count = ords.shape[0], terms = idfs.shape[0], n = wanted.shape[0]
    cdef Py_ssize_t t, w, p, end, lo, hi, step
    _postings_agree(count, tfs.shape[0], bounds, terms)
    # A found ordinal is one of `wanted`, the only ordinals read through.
    cdef size_t limit = lengths.shape[0]
    for w in range(n):
        if <size_t>wanted[w] >= limit:
            raise ValueError(f"document {wanted[w]} of {limit}")
        if w and wanted[w] < wanted[w - 1]:
            raise ValueError("the documents wanted are not in ascending order")
    out_array = np.zeros(n, np.float64)
    cdef double[::1] out = out_array
    cdef double idf, tf, norm
    cdef double k1_plus_1 = k1 + 1, one_minus_b = 1 - b
    cdef int64_t target
    with nogil:
        for t in range(terms):
            idf = idfs[t]
            p, end = bounds[t], bounds[t + 1]
            for w in range(n):
                if p >= end:
                    break
                target = wanted[w]
                if ords[p] < target:
                    # ords[lo] < target; hi is `end` or ords[hi] >= target.
                    lo, step, hi = p, 1, p + 1
                    while hi < end and ords[hi] < target:
                        lo = hi
                        step *= 2
                        hi = lo + step
                    if hi > end:
                        hi = end
                    p = _first_at_least(ords, lo + 1, hi, target)
                if p < end and ords[p] == target:
                    tf = <double>tfs[p]
                    norm = k1 * (one_minus_b + b * <double>lengths[target] / average)
                    out[w] += idf * tf * k1_plus_1 / (tf + norm) * (lengths[target] != 0)
    return out_array


def term_ids(const int64_t[::1] hashes, list keys):
    """The place of each of `keys` in `hashes` (ascending), -1 where it is
    not: the keyword index's ids of a document's or a query's terms, found
    by their hashes (keyword.py). A binary search a key, under the lock (the
    answer is a list): 12 keys in a sorted 100k took 16 us in NumPy's six
    calls, mostly their overhead, against a dict's 1.4 us for strings."""
    cdef Py_ssize_t n = hashes.shape[0], lo
    cdef int64_t key
    out = []
    for value in keys:
        key = value
        lo = _first_at_least(hashes, 0, n, key)
        out.append(lo if lo < n and hashes[lo] == key else -1)
    return out


def best_first(const double[::1] scores, const int64_t[::1] pool, Py_ssize_t window):
    """The positions of `pool` (into `scores`) whose scores are among its
    `window` best, and every tie of the last of them, best first, ties in
    the order of `pool`: a stable sort of `pool` by descending score, cut
    after the `window`th and its ties (`keyword.KeywordHits.ranked_windows`).

    One pass keeps the `window` best in a heap, a second collects those above
    its least, which are fewer than `window` and sorted as they come, and
    its ties. At 1M memories a search of the benchmark's holds ~21k
    documents and its first window ~3,300 ties: that window took 208-218 us
    in NumPy (a negated copy, a partition, two masks, a sort) and 121 us
    with this (one process, its 20 cached queries ten times)."""
    if window < 1:
        raise ValueError(f"a window of {window} scores")
    cdef Py_ssize_t n = pool.shape[0], count = scores.shape[0], i, j, k
    cdef Py_ssize_t kept = min(n, window), above = 0, tied = 0, bad = -1
    out_array = np.empty(n, np.int64)
    ties_array = np.empty(n, np.int64)
    heap_array = np.empty(max(kept, 1), np.float64)
    cdef int64_t[::1] out = out_array, ties = ties_array
    cdef double[::1] heap = heap_array
    cdef double value, least
    cdef int64_t position
    with nogil:
        # A min-heap of the `kept` best so far: its root is the `kept`th best.
        for i in range(n):
            position = pool[i]
            if not 0 <= position < count:
                bad = i
                break
            value = scores[position]
            if i < kept:
                j = i
                while j > 0 and heap[(j - 1) // 2] > value:
                    heap[j] = heap[(j - 1) // 2]
                    j = (j - 1) // 2
                heap[j] = value
            elif value > heap[0]:
                j = 0
                while True:
                    k = 2 * j + 1
                    if k >= kept:
                        break
                    if k + 1 < kept and heap[k + 1] < heap[k]:
                        k += 1
                    if heap[k] >= value:
                        break
                    heap[j] = heap[k]
                    j = k
                heap[j] = value
        if bad < 0 and n:
            least = heap[0]
            for i in range(n):
                position = pool[i]
                value = scores[position]
                if value > least:  # after every one scoring as much or more
                    j = above
                    while j > 0 and scores[out[j - 1]] < value:
                        out[j] = out[j - 1]
                        j -= 1
                    out[j] = position
                    above += 1
                elif value == least:
                    ties[tied] = position
                    tied += 1
            for i in range(tied):
                out[above + i] = ties[i]
    if bad >= 0:
        raise ValueError(f"position {pool[bad]} is outside {count} scores")
    return out_array[: above + tied]
