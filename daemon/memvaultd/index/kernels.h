/* The vector loops of a search, in C: `loops.pyx` checks their arguments and
 * calls them without the interpreter lock.
 *
 * Each float product keeps 64 partial sums in eight vectors and adds them
 * in a fixed tree: vectorised without licence to reorder sums
 * (-ffast-math), and the same bits on every run of a machine (the probed
 * lists' sums are integers, exact in any order). On x86-64 Linux each loop is
 * built twice, for x86-64-v3 (AVX2 and FMA: a multiply and add rounded
 * once, so its products can differ from the baseline's in the last bit)
 * and for the baseline, and the loader picks the one the CPU runs (GCC's
 * target_clones); elsewhere the baseline only (NEON on arm64).
 * docs/decisions/0015-search-loops-compiled-at-install.md has the figures.
 */
#ifndef MEMVAULT_KERNELS_H
#define MEMVAULT_KERNELS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* fp-contract=fast: a multiply-add where the clone has FMA (the 100k search
 * 51 against 63 us); setup.py turns contraction off for everything else,
 * the BM25 sums that must stay NumPy's to the bit among it. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define MEMVAULT_CLONES \
    __attribute__((target_clones("arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
#else
#define MEMVAULT_CLONES
#endif

/* Helpers are always inlined: one GCC lowers by itself, built for the
 * baseline, splits its 32-byte vectors into 16-byte halves, and the AVX2
 * clone that calls it ran at half width. */
#define MEMVAULT_INLINE static inline __attribute__((always_inline))

/* 64 lanes as eight vectors of eight (GCC and clang vector extensions): one
 * AVX2 register each, two SSE2 registers each on the baseline. Eight, so
 * that eight additions are in flight at once: with two, each row waited
 * on a chain of 24 dependent additions, and a search of 3,900 rows (the
 * IVF's probed lists at 100k memories) took 72 us against 41 for numba. */
#define MEMVAULT_LANES 64
typedef float memvault_f8 __attribute__((vector_size(32)));
typedef uint32_t memvault_u8 __attribute__((vector_size(32)));
typedef uint16_t memvault_h8 __attribute__((vector_size(16)));

MEMVAULT_INLINE memvault_f8 memvault_load_f(const float *at) {
    memvault_f8 v;
    memcpy(&v, at, sizeof v);
    return v;
}

/* Float16 bits widened to float32: sign kept, exponent rebased from 15 to
 * 127, mantissa moved up 13 places. A subnormal (exponent 0) is rebased as if
 * its exponent were 1, 2^-14 x (1 + m/1024), and the bias (2^-14 with the
 * value's sign, 0x38800000 as float32 bits) takes the 2^-14 off again:
 * m x 2^-24, exactly, as NumPy widens it (but -0.0, read as +0.0). */
MEMVAULT_INLINE memvault_f8 memvault_load_h(const uint16_t *at) {
    memvault_h8 raw;
    memcpy(&raw, at, sizeof raw);
    memvault_u8 h = __builtin_convertvector(raw, memvault_u8);
    memvault_u8 normal = (memvault_u8)((h & 0x7C00u) != 0);  /* all ones where normal */
    memvault_u8 sign = (h & 0x8000u) << 16;
    memvault_u8 wide = sign | (((h & 0x7FFFu) << 13) + (0x38800000u - (normal & 0x800000u)));
    memvault_u8 bias = ~normal & (sign | 0x38800000u);
    memvault_f8 value, taken;
    memcpy(&value, &wide, sizeof value);
    memcpy(&taken, &bias, sizeof taken);
    return value - taken;
}

MEMVAULT_INLINE float memvault_widen(uint16_t half) {
    uint16_t eight[8] = {half};
    memvault_f8 v = memvault_load_h(eight);
    return v[0];
}

/* A row's product with the query, `LOAD` reading eight of its values as
 * float32: eight vectors of partial sums, named so that they stay in
 * registers (GCC 12 kept an array of them in memory: 138 against 63 us for
 * the 100k search), lane l of vector v summing the positions p with
 * p % 64 == 8 v + l. They are added in a fixed tree, then the positions
 * past the last whole 64 one by one. */
#define MEMVAULT_DOT(LOAD, row, query, dims, result)                                    \
    do {                                                                                \
        memvault_f8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                             \
        memvault_f8 a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};                             \
        int64_t j = 0;                                                                  \
        for (; j + MEMVAULT_LANES <= (dims); j += MEMVAULT_LANES) {                      \
            a0 += LOAD((row) + j) * memvault_load_f((query) + j);                       \
            a1 += LOAD((row) + j + 8) * memvault_load_f((query) + j + 8);               \
            a2 += LOAD((row) + j + 16) * memvault_load_f((query) + j + 16);             \
            a3 += LOAD((row) + j + 24) * memvault_load_f((query) + j + 24);             \
            a4 += LOAD((row) + j + 32) * memvault_load_f((query) + j + 32);             \
            a5 += LOAD((row) + j + 40) * memvault_load_f((query) + j + 40);             \
            a6 += LOAD((row) + j + 48) * memvault_load_f((query) + j + 48);             \
            a7 += LOAD((row) + j + 56) * memvault_load_f((query) + j + 56);             \
        }                                                                               \
        memvault_f8 folded = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7));         \
        float total = ((folded[0] + folded[4]) + (folded[2] + folded[6]))               \
                      + ((folded[1] + folded[5]) + (folded[3] + folded[7]));            \
        for (; j < (dims); j++) total += memvault_scalar_##LOAD((row) + j) * (query)[j]; \
        (result) = total;                                                               \
    } while (0)

MEMVAULT_INLINE float memvault_scalar_memvault_load_f(const float *at) { return *at; }

MEMVAULT_INLINE float memvault_scalar_memvault_load_h(const uint16_t *at) {
    return memvault_widen(*at);
}

/* Every probed list's rows: codes[starts[i]:ends[i]] for each i, their matrix
 * row numbers (order) into rows_out and their products with query into
 * products_out, in that order. The query comes as whole steps of `step`
 * (loops.pyx), so a product is a sum of integers: exact in any order, which
 * lets the compiler vectorise it as it likes (AVX2's vpmaddwd: 16 products
 * an instruction), the same on every clone. The caller keeps the sums in
 * int32: |code| <= 128 and |query| <= 2^31 / (128 dims). Side by side over
 * 1M random codes, 26 lists of ~980 rows took 1.24-1.30 against 1.47-1.55 ms
 * with float products (memory-bound: 10 MB read), 4 lists in cache 72-74
 * against 103-145 us. */
MEMVAULT_CLONES
static void memvault_probed_lists(const int8_t *codes, int64_t dims, const int64_t *order,
                                  const int64_t *starts, const int64_t *ends, int64_t lists,
                                  const int16_t *query, float step, int64_t *rows_out,
                                  float *products_out) {
    int64_t k = 0;
    for (int64_t i = 0; i < lists; i++) {
        for (int64_t r = starts[i]; r < ends[i]; r++, k++) {
            const int8_t *row = codes + r * dims;
            int32_t total = 0;
            for (int64_t j = 0; j < dims; j++) total += (int32_t)row[j] * (int32_t)query[j];
            products_out[k] = (float)total * step;
            rows_out[k] = order[r];
        }
    }
}

/* The probed lists' loop with AVX-512 VNNI, where the CPU has it
 * (`memvault_probed_lists_vnni_ok`): 32 codes a step, widened to int16 and
 * multiplied-and-added into int32 by one instruction (vpdpwssd, which wraps as
 * the loop above does and never saturates), two rows at a time so that their
 * sums are in flight together. The same integer sums, so the same products to
 * the bit. On 26 lists of ~500 rows of 1M random codes (13k rows, 5 MB), read
 * cold: 373-461 against 564-629 us for the x86-64-v3 clone above, and
 * 287-358 against 445-500 us read again at once (from the L3 cache); in a
 * 1M vault's recalls, in process, 0.66 against 0.75 ms a search (medians of
 * 8 alternating rounds). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMVAULT_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

MEMVAULT_VNNI_TARGET MEMVAULT_INLINE
__m512i memvault_vnni_step(__m512i sum, const int8_t *codes, const int16_t *query) {
    __m512i wide = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)codes));
    return _mm512_dpwssd_epi32(sum, wide, _mm512_loadu_si512((const void *)query));
}

MEMVAULT_VNNI_TARGET MEMVAULT_INLINE
int32_t memvault_vnni_tail(const int8_t *row, const int16_t *query, int64_t from, int64_t dims) {
    int32_t total = 0;
    for (int64_t j = from; j < dims; j++) total += (int32_t)row[j] * (int32_t)query[j];
    return total;
}

MEMVAULT_VNNI_TARGET
static void memvault_probed_lists_vnni(const int8_t *codes, int64_t dims, const int64_t *order,
                                       const int64_t *starts, const int64_t *ends, int64_t lists,
                                       const int16_t *query, float step, int64_t *rows_out,
                                       float *products_out) {
    const int64_t whole = dims / 32 * 32;
    int64_t k = 0;
    for (int64_t i = 0; i < lists; i++) {
        int64_t r = starts[i];
        for (; r + 2 <= ends[i]; r += 2, k += 2) {
            const int8_t *a = codes + r * dims, *b = a + dims;
            __m512i sa = _mm512_setzero_si512(), sb = _mm512_setzero_si512();
            for (int64_t j = 0; j < whole; j += 32) {
                sa = memvault_vnni_step(sa, a + j, query + j);
                sb = memvault_vnni_step(sb, b + j, query + j);
            }
            int32_t ta = _mm512_reduce_add_epi32(sa) + memvault_vnni_tail(a, query, whole, dims);
            int32_t tb = _mm512_reduce_add_epi32(sb) + memvault_vnni_tail(b, query, whole, dims);
            products_out[k] = (float)ta * step;
            products_out[k + 1] = (float)tb * step;
            rows_out[k] = order[r];
            rows_out[k + 1] = order[r + 1];
        }
        for (; r < ends[i]; r++, k++) {
            const int8_t *a = codes + r * dims;
            __m512i sa = _mm512_setzero_si512();
            for (int64_t j = 0; j < whole; j += 32) sa = memvault_vnni_step(sa, a + j, query + j);
            products_out[k] = (float)(_mm512_reduce_add_epi32(sa)
                                      + memvault_vnni_tail(a, query, whole, dims)) * step;
            rows_out[k] = order[r];
        }
    }
}

static int memvault_probed_lists_vnni_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
           && __builtin_cpu_supports("avx512vnni");
}
#else
static void memvault_probed_lists_vnni(const int8_t *codes, int64_t dims, const int64_t *order,
                                       const int64_t *starts, const int64_t *ends, int64_t lists,
                                       const int16_t *query, float step, int64_t *rows_out,
                                       float *products_out) {
    memvault_probed_lists(codes, dims, order, starts, ends, lists, query, step, rows_out,
                          products_out);
}

static int memvault_probed_lists_vnni_ok(void) { return 0; }
#endif

/* Rows picked by number from a matrix of hundreds of MB (the best of a
 * search's rows, scored exactly) are each a cache and TLB miss: the loops
 * below ask for the row MEMVAULT_AHEAD rows on while they read one, so that
 * several misses are in flight at once. 128 random rows of a 1M vault's
 * float16 matrix (`memvault_half_products`): 34-51 us against 76-101
 * (one process, 6 alternating rounds of 300); 8 rows on did no better. */
#define MEMVAULT_AHEAD 4

MEMVAULT_INLINE void memvault_prefetch(const void *row, int64_t bytes) {
    for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch((const char *)row + at, 0, 0);
}

/* matrix[rows] @ query, matrix float32 (n x dims). */
MEMVAULT_CLONES
static void memvault_exact(const float *matrix, int64_t dims, const int64_t *rows, int64_t count,
                           const float *query, float *out) {
    for (int64_t k = 0; k < count; k++) {
        const float *row = matrix + rows[k] * dims;
        if (k + MEMVAULT_AHEAD < count)
            memvault_prefetch(matrix + rows[k + MEMVAULT_AHEAD] * dims, dims * 4);
        MEMVAULT_DOT(memvault_load_f, row, query, dims, out[k]);
    }
}

/* bits[rows] @ query, bits float16 values (n x dims), each widened as read. */
MEMVAULT_CLONES
static void memvault_half_products(const uint16_t *bits, int64_t dims, const int64_t *rows,
                                   int64_t count, const float *query, float *out) {
    for (int64_t k = 0; k < count; k++) {
        const uint16_t *row = bits + rows[k] * dims;
        if (k + MEMVAULT_AHEAD < count)
            memvault_prefetch(bits + rows[k + MEMVAULT_AHEAD] * dims, dims * 2);
        MEMVAULT_DOT(memvault_load_h, row, query, dims, out[k]);
    }
}

/* out[k] = bits[rows[k]] widened to float32. */
MEMVAULT_CLONES
static void memvault_half_widen(const uint16_t *bits, int64_t dims, const int64_t *rows,
                                int64_t count, float *out) {
    for (int64_t k = 0; k < count; k++) {
        const uint16_t *row = bits + rows[k] * dims;
        float *into = out + k * dims;
        int64_t j = 0;
        for (; j + 8 <= dims; j += 8) {
            memvault_f8 v = memvault_load_h(row + j);
            memcpy(into + j, &v, sizeof v);
        }
        for (; j < dims; j++) into[j] = memvault_widen(row[j]);
    }
}

/* matrix @ query, matrix float32 (n x dims), read in order: the centroids
 * of an IVF search (2,000 x 384 at 1M memories). */
MEMVAULT_CLONES
static void memvault_scores(const float *matrix, int64_t n, int64_t dims, const float *query,
                            float *out) {
    for (int64_t k = 0; k < n; k++)
        MEMVAULT_DOT(memvault_load_f, matrix + k * dims, query, dims, out[k]);
}

/* Whether position a ranks below position b: a lower value, or an equal one
 * at a later position. */
MEMVAULT_INLINE int memvault_below(const float *values, int64_t a, int64_t b) {
    return values[a] < values[b] || (values[a] == values[b] && a > b);
}

static int memvault_ascending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The positions of the k largest of values[0:n] (0 < k <= n), ascending, into
 * out; of equal values the earlier position. One pass keeps the k best so
 * far in a min-heap (its root the kth best): once it is full, a value below
 * the root costs one comparison, and most are (13,000 products a search at
 * 1M memories, 128 kept). */
static void memvault_best(const float *values, int64_t n, int64_t k, int64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j;
        if (i < k) {
            for (j = i; j > 0 && memvault_below(values, i, out[(j - 1) / 2]); j = (j - 1) / 2)
                out[j] = out[(j - 1) / 2];
        } else {
            /* i comes after every kept position, so it ranks above the root
             * only with a larger value. */
            if (!(values[i] > values[out[0]])) continue;
            j = 0;
            for (;;) {
                int64_t c = 2 * j + 1;
                if (c >= k) break;
                if (c + 1 < k && memvault_below(values, out[c + 1], out[c])) c++;
                if (!memvault_below(values, out[c], i)) break;
                out[j] = out[c];
                j = c;
            }
        }
        out[j] = i;
    }
    qsort(out, (size_t)k, sizeof *out, memvault_ascending);
}

#endif
