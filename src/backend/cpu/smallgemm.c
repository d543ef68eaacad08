/*
 * smallgemm.c - C (M, N) (+)= A (M, K) x B (K, N) with B packed once and
 * used many times: the recurrent layers' per-step products (M = the batch,
 * K and N = units or 4 x units), where oneDNN's sgemm repacks B on every
 * call and ran at 50 GFLOP/s on the IMDB LSTM's (128, 100) x (100, 400)
 * against 80 for large products (docs/design/gemm.md).
 *
 * B is packed into panels of 16 columns, k-major, zero-padded to a whole
 * panel, so the inner loop reads 16 consecutive floats per k. The kernel
 * keeps a 6 x 16 tile of C in 12 eight-float registers and per k loads two
 * vectors of B and broadcasts six elements of A: 12 FMAs for 8 loads, the
 * shape that keeps both FMA units of an AVX2 core busy. Rows are split
 * among threads in blocks of 6, so each element of C is computed by one
 * thread in the same order whatever the thread count.
 *
 * (The MXU's products, bfloat16 pairs, have their own kernel: mxu_pairs.c.)
 */
#include "cpu_internal.h"

#define MR SY_SMALLGEMM_MR
#define NR 16

typedef float v8 __attribute__((vector_size(32)));

static inline v8 v8_load(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void v8_store(float *p, v8 v) { memcpy(p, &v, sizeof v); }

/* A broadcast straight from memory (a load, no shuffle): with only the
 * vector extensions, GCC broadcasts through a register and adds a scalar
 * add, which halved the kernel's speed on Zen 3. */
#if defined(__AVX__)
#include <immintrin.h>
static inline v8 broadcast(const float *p) { return (v8)_mm256_broadcast_ss(p); }
#else
static inline v8 broadcast(const float *p) { return (v8){*p, *p, *p, *p, *p, *p, *p, *p}; }
#endif

int64_t sy_pack_b_floats(int64_t k, int64_t n) { return k * ((n + NR - 1) / NR) * NR; }

/* B (K, N) into panels: element (kk, col) from the matrix b (stride ldb,
 * transposed when tb) or, when rows is given, from rows as sy_pack_b_rows
 * says. Columns past N are zeros. */
static void pack(float *restrict packed, const float *b, int64_t ldb, const float *const *rows, bool tb, int64_t k,
                 int64_t n) {
    int64_t panels = (n + NR - 1) / NR;
    if (!rows && !tb) { /* rows of B are runs of 16 floats: a loop GCC vectorises (the sim backend packs dy so),
                           row by row, so that B is read as one stream (panel by panel ran at a third of the speed) */
        for (int64_t kk = 0; kk < k; kk++) {
            if (kk + 8 < k) /* a row of dy is a few cache lines; the prefetchers alone left the loads waiting */
                for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(b + (kk + 8) * ldb + j);
            for (int64_t p = 0; p < panels; p++) {
                int64_t c0 = p * NR, nc = n - c0 < NR ? n - c0 : NR;
                float *restrict dst = packed + (p * k + kk) * NR;
                const float *restrict src = b + kk * ldb + c0;
                for (int64_t j = 0; j < nc; j++) dst[j] = src[j];
                for (int64_t j = nc; j < NR; j++) dst[j] = 0.0f;
            }
        }
        return;
    }
    for (int64_t p = 0; p < panels; p++)
        for (int64_t kk = 0; kk < k; kk++) {
            float *dst = packed + (p * k + kk) * NR;
            for (int64_t j = 0; j < NR; j++) {
                int64_t col = p * NR + j, r = tb ? col : kk, c = tb ? kk : col;
                const float *row = col >= n ? NULL : rows ? rows[r] : b + r * ldb;
                dst[j] = row ? row[c] : 0.0f;
            }
        }
}

void sy_pack_b(float *packed, const float *b, int64_t ldb, bool tb, int64_t k, int64_t n) {
    pack(packed, b, ldb, NULL, tb, k, n);
}

void sy_pack_b_rows(float *packed, const float *const *rows, bool transposed, int64_t k, int64_t n) {
    pack(packed, NULL, 0, rows, transposed, k, n);
}

void sy_packed_b_scale_columns(float *packed, int64_t k, int64_t n, int64_t c0, int64_t c1, float scale) {
    (void)n;
    for (int64_t col = c0; col < c1; col++)
        for (int64_t kk = 0; kk < k; kk++) packed[((col / NR) * k + kk) * NR + col % NR] *= scale;
}

/* One MR x NR tile (rows < MR or cols < NR at the edges go through a
 * buffer); `half` (a constant where inlined) computes only the first 8
 * columns, for an edge panel of 8 or fewer. */
static inline __attribute__((always_inline)) void tile(float *restrict c, int64_t ldc, const float *restrict a,
                                                       int64_t lda, const float *restrict bp, int64_t k, bool accumulate,
                                                       int64_t rows, int64_t cols, bool half) {
    v8 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = (v8){0};
    const float *ar[MR];
    for (int r = 0; r < MR; r++) ar[r] = a + (r < rows ? r : 0) * lda;
    for (int64_t kk = 0; kk < k; kk++) {
        v8 b0 = v8_load(bp + kk * NR), b1 = half ? b0 : v8_load(bp + kk * NR + 8);
        for (int r = 0; r < MR; r++) {
            v8 av = broadcast(&ar[r][kk]);
            acc[r][0] += av * b0;
            if (!half) acc[r][1] += av * b1;
        }
    }
    if (rows == MR && cols == NR) {
        for (int r = 0; r < MR; r++) {
            float *cr = c + r * ldc;
            if (accumulate) {
                v8_store(cr, v8_load(cr) + acc[r][0]);
                v8_store(cr + 8, v8_load(cr + 8) + acc[r][1]);
            } else {
                v8_store(cr, acc[r][0]);
                v8_store(cr + 8, acc[r][1]);
            }
        }
        return;
    }
    float buf[MR][NR];
    for (int r = 0; r < MR; r++) {
        v8_store(buf[r], acc[r][0]);
        v8_store(buf[r] + 8, acc[r][1]);
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) c[r * ldc + j] = accumulate ? c[r * ldc + j] + buf[r][j] : buf[r][j];
}

#if SY_HAVE_AVX2_FMA
/* The same for a whole MR = 6 rows with intrinsics and the twelve
 * accumulators as named variables: GCC kept the vector-extension tile's
 * array of accumulators in registers too, but its loop ran at 77 GFLOP/s on
 * the LSTM's (6 x 133) x (133 x 400) where this one runs at 89 (and 94
 * against 64 when B fits in L1). */
#define ROW(r, av)                                                                                                     \
    av = _mm256_broadcast_ss(a##r + kk);                                                                              \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                                                                        \
    if (!half) c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1)
static inline __attribute__((always_inline)) void tile6(float *restrict c, int64_t ldc, const float *restrict a,
                                                        int64_t lda, const float *restrict bp, int64_t k, bool accumulate,
                                                        int64_t rows, int64_t cols, bool half) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* a last block of fewer rows computes the last row again in the others (and stores only its own) */
    const float *a0 = a, *a1 = a + sy_min64(1, rows - 1) * lda, *a2 = a + sy_min64(2, rows - 1) * lda,
                *a3 = a + sy_min64(3, rows - 1) * lda, *a4 = a + sy_min64(4, rows - 1) * lda,
                *a5 = a + sy_min64(5, rows - 1) * lda;
    for (int64_t kk = 0; kk < k; kk++) {
        __m256 b0 = _mm256_load_ps(bp + kk * NR), b1 = half ? b0 : _mm256_load_ps(bp + kk * NR + 8), av;
        ROW(0, av);
        ROW(1, av);
        ROW(2, av);
        ROW(3, av);
        ROW(4, av);
        ROW(5, av);
    }
    __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    if (cols == NR || (half && cols == 8)) {
        for (int r = 0; r < rows; r++)
            for (int h = 0; h < (half ? 1 : 2); h++) {
                float *cr = c + r * ldc + 8 * h;
                _mm256_storeu_ps(cr, accumulate ? _mm256_add_ps(_mm256_loadu_ps(cr), acc[r][h]) : acc[r][h]);
            }
        return;
    }
    float buf[MR][NR];
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_ps(buf[r], acc[r][0]);
        _mm256_storeu_ps(buf[r] + 8, acc[r][1]);
    }
    for (int r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) c[r * ldc + j] = accumulate ? c[r * ldc + j] + buf[r][j] : buf[r][j];
}
#undef ROW
#endif

typedef struct small_job {
    float *c;
    const float *a, *bp;
    int64_t m, n, k, lda, ldc, pstride; /* pstride: floats from a panel of B to the next */
    bool accumulate;
} small_job;

/* Rows [i0, i0 + rows) of C, rows <= MR, every panel. */
static void row_tiles(const small_job *j, int64_t i0, int64_t rows) {
    for (int64_t p = 0, c0 = 0; c0 < j->n; p++, c0 += NR) {
        int64_t cols = j->n - c0 < NR ? j->n - c0 : NR;
        float *c = j->c + i0 * j->ldc + c0;
        const float *a = j->a + i0 * j->lda, *bp = j->bp + p * j->pstride;
#if SY_HAVE_AVX2_FMA
#define TILE tile6
#else
#define TILE tile
#endif
        if (cols > 8)
            TILE(c, j->ldc, a, j->lda, bp, j->k, j->accumulate, rows, cols, false);
        else
            TILE(c, j->ldc, a, j->lda, bp, j->k, j->accumulate, rows, cols, true);
#undef TILE
    }
}

static void row_block(void *ctx, int64_t block) {
    const small_job *j = ctx;
    int64_t i0 = block * MR;
    row_tiles(j, i0, j->m - i0 < MR ? j->m - i0 : MR);
}

void sy_sgemm_packed_serial(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bpacked,
                            bool accumulate, float *c, int64_t ldc) {
    small_job j = {c, a, bpacked, m, n, k, lda, ldc, k * NR, accumulate};
    for (int64_t i0 = 0; i0 < m; i0 += MR) row_tiles(&j, i0, m - i0 < MR ? m - i0 : MR);
}

void sy_sgemm_packed(const sy_exec *ex, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *bpacked, bool accumulate, float *c, int64_t ldc) {
    small_job j = {c, a, bpacked, m, n, k, lda, ldc, k * NR, accumulate};
    sy_parallel_parts(ex, (m + MR - 1) / MR, row_block, &j);
}
