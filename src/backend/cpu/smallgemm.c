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
 * buffer). */
static inline __attribute__((always_inline)) void tile(float *restrict c, int64_t ldc, const float *restrict a,
                                                       int64_t lda, const float *restrict bp, int64_t k, bool accumulate,
                                                       int64_t rows, int64_t cols) {
    v8 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = (v8){0};
    const float *ar[MR];
    for (int r = 0; r < MR; r++) ar[r] = a + (r < rows ? r : 0) * lda;
    for (int64_t kk = 0; kk < k; kk++) {
        v8 b0 = v8_load(bp + kk * NR), b1 = v8_load(bp + kk * NR + 8);
        for (int r = 0; r < MR; r++) {
            v8 av = broadcast(&ar[r][kk]);
            acc[r][0] += av * b0;
            acc[r][1] += av * b1;
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

typedef struct small_job {
    float *c;
    const float *a, *bp;
    int64_t m, n, k, lda, ldc;
    bool accumulate;
} small_job;

/* Rows [i0, i0 + rows) of C, rows <= MR, every panel. */
static void row_tiles(const small_job *j, int64_t i0, int64_t rows) {
    for (int64_t p = 0, c0 = 0; c0 < j->n; p++, c0 += NR) {
        int64_t cols = j->n - c0 < NR ? j->n - c0 : NR;
        tile(j->c + i0 * j->ldc + c0, j->ldc, j->a + i0 * j->lda, j->lda, j->bp + p * j->k * NR, j->k, j->accumulate, rows,
             cols);
    }
}

static void row_block(void *ctx, int64_t block) {
    const small_job *j = ctx;
    int64_t i0 = block * MR;
    row_tiles(j, i0, j->m - i0 < MR ? j->m - i0 : MR);
}

void sy_sgemm_packed_serial(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bpacked,
                            bool accumulate, float *c, int64_t ldc) {
    small_job j = {c, a, bpacked, m, n, k, lda, ldc, accumulate};
    for (int64_t i0 = 0; i0 < m; i0 += MR) row_tiles(&j, i0, m - i0 < MR ? m - i0 : MR);
}

void sy_sgemm_packed(const sy_exec *ex, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *bpacked, bool accumulate, float *c, int64_t ldc) {
    small_job j = {c, a, bpacked, m, n, k, lda, ldc, accumulate};
    sy_parallel_parts(ex, (m + MR - 1) / MR, row_block, &j);
}
