/*
 * gemm.c - single-precision GEMM for the cpu backend, and the matmul kernel.
 *
 * The multiply itself is oneDNN's dnnl_sgemm: measured on this project's
 * machines it is the fastest SGEMM Debian ships, on every shape that
 * matters (docs/design/gemm.md). oneDNN threads with OpenMP; systolic
 * threads with its own pool (one replica per core, DESIGN.md §5), so every
 * thread that calls sgemm first pins its OpenMP team to one thread, and
 * parallelism comes from splitting C into blocks:
 *
 *   - rows of C when M is large enough, else columns (oneDNN's small-M path
 *     sums in a different order when M changes, its column split does not);
 *   - the block count depends on the shape only, so results are bitwise
 *     identical for any number of threads;
 *   - each block gets its epilogue (bias, activation) right after its
 *     multiply, while it is still in cache.
 */
#include "cpu_internal.h"

#include <dnnl.h>
#include <omp.h>

static _Thread_local bool omp_pinned;

void sy_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* oneDNN rejects K = 0; the product is empty */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
        return;
    }
    if (!omp_pinned) {
        omp_set_num_threads(1);
        omp_pinned = true;
    }
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    SY_ASSERT(st == dnnl_success);
}

void sy_epilogue_f32(float *c, int64_t rows, int64_t n, int64_t ldc, const float *bias, int64_t col0, int act) {
    if (!bias && act == SY_ACT_NONE) return;
    for (int64_t i = 0; i < rows; i++) {
        float *r = c + i * ldc;
        if (bias)
            for (int64_t j = 0; j < n; j++) r[j] += bias[col0 + j];
        switch (act) {
        case SY_ACT_RELU:
            for (int64_t j = 0; j < n; j++) r[j] = r[j] > 0 ? r[j] : 0;
            break;
        case SY_ACT_SIGMOID:
            for (int64_t j = 0; j < n; j++) r[j] = sy_vsigmoidf(r[j]);
            break;
        case SY_ACT_TANH:
            for (int64_t j = 0; j < n; j++) r[j] = sy_vtanhf(r[j]);
            break;
        default: break;
        }
    }
}

/* issue 16, mixed_bfloat16 (backend_internal.h) */
void sy_bf16_sigmoid(float *y, const float *x, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        float e = sy_bf16_round(sy_vexpf(x[j]));
        y[j] = sy_bf16_round(e / sy_bf16_round(1.0f + e));
    }
}

/* One row: t (n) = round(act(round(y + bias))). t may be y. Each loop simple enough to vectorise
 * (sy_bf16_round is branch-free). */
static void bf16_epilogue_row(float *t, const float *y, const float *bias, int64_t n, int act) {
    if (bias)
        for (int64_t j = 0; j < n; j++) t[j] = sy_bf16_round(y[j] + bias[j]);
    else
        for (int64_t j = 0; j < n; j++) t[j] = sy_bf16_round(y[j]);
    if (act == SY_ACT_RELU)
        for (int64_t j = 0; j < n; j++) t[j] = t[j] > 0 ? t[j] : 0;
    else if (act == SY_ACT_SIGMOID)
        sy_bf16_sigmoid(t, t, n);
    else if (act != SY_ACT_NONE)
        for (int64_t j = 0; j < n; j++) t[j] = sy_bf16_round(sy_act_f32(t[j], act));
}

void sy_bf16_epilogue(float *y, int64_t rows, int64_t n, const float *bias, int act) {
    for (int64_t i = 0; i < rows; i++) bf16_epilogue_row(y + i * n, y + i * n, bias, n, act);
}

/* issue 16, bfloat16 storage: the same numbers, each exactly a bfloat16, stored in 2 bytes through
 * a chunk on the stack */
#define EPI_CHUNK 256
void sy_bf16_epilogue_store(uint16_t *dst, int64_t ldd, const float *y, int64_t ldy, int64_t rows,
                            int64_t n, const float *bias, int act) {
    float t[EPI_CHUNK];
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j0 = 0; j0 < n; j0 += EPI_CHUNK) {
            int64_t m = sy_min64(EPI_CHUNK, n - j0);
            bf16_epilogue_row(t, y + i * ldy + j0, bias ? bias + j0 : NULL, m, act);
            uint16_t *d = dst + i * ldd + j0;
            for (int64_t j = 0; j < m; j++) d[j] = sy_bf16_bits(t[j]);
        }
}

typedef struct parts_job {
    sy_part_fn fn;
    void *ctx;
    int64_t parts;
} parts_job;

static void parts_thread(void *arg, int index, int count) {
    parts_job *j = arg;
    int64_t b, e;
    sy_split_range(j->parts, index, count, &b, &e);
    for (int64_t p = b; p < e; p++) j->fn(j->ctx, p);
}

void sy_parallel_parts(const sy_exec *ex, int64_t parts, sy_part_fn fn, void *ctx) {
    if (parts <= 0) return;
    parts_job j = {fn, ctx, parts};
    int threads = ex->threads < parts ? ex->threads : (int)parts;
    sy_exec_parallel(ex, threads, parts_thread, &j);
}

/* ---- sy_transpose (cpu_internal.h) ------------------------------------------------
 * dst (cols, rows) = src (rows, cols)^T in 16 x 16 blocks over ex's threads, by blocks of 16 columns, or
 * of rows when there are few columns (a Dense kernel of 10 units). (The sim backend's VGG16 last
 * backprop-filter, 512 x 4608, took 5 ms element by element.) */
typedef struct transpose_job {
    float *dst;
    const float *src;
    int64_t rows, cols, parts;
} transpose_job;

static void transpose_part(void *ctx, int64_t part) {
    const transpose_job *t = ctx;
    int64_t i0 = 0, i1 = t->rows, j0 = 0, j1 = t->cols;
    if (t->cols >= 32) j0 = part * 16, j1 = sy_min64(t->cols, j0 + 16);
    else sy_split_range(t->rows, (int)part, (int)t->parts, &i0, &i1);
    for (int64_t ib = i0; ib < i1; ib += 16)
        for (int64_t j = j0; j < j1; j++)
            for (int64_t i = ib; i < sy_min64(i1, ib + 16); i++) t->dst[j * t->rows + i] = t->src[i * t->cols + j];
}

void sy_transpose(const sy_exec *ex, float *dst, const float *src, int64_t rows, int64_t cols) {
    transpose_job t = {dst, src, rows, cols, 0};
    t.parts = cols >= 32 ? (cols + 15) / 16 : sy_min64(16, sy_max64(1, rows * cols / 16384));
    sy_parallel_parts(ex, t.parts, transpose_part, &t);
}

typedef struct gemm_job {
    bool ta, tb, by_rows;
    int64_t M, N, K, lda, ldb, ldc, blocks;
    float alpha, beta;
    const float *A, *B, *bias;
    float *C;
    int act;
} gemm_job;

static void gemm_block(void *arg, int64_t part) {
    const gemm_job *j = arg;
    int64_t b, e;
    if (j->by_rows) {
        sy_split_range(j->M, (int)part, (int)j->blocks, &b, &e);
        const float *a = j->ta ? j->A + b : j->A + b * j->lda;
        sy_sgemm(j->ta, j->tb, e - b, j->N, j->K, j->alpha, a, j->lda, j->B, j->ldb, j->beta, j->C + b * j->ldc, j->ldc);
        sy_epilogue_f32(j->C + b * j->ldc, e - b, j->N, j->ldc, j->bias, 0, j->act);
    } else {
        sy_split_range(j->N, (int)part, (int)j->blocks, &b, &e);
        const float *bm = j->tb ? j->B + b * j->ldb : j->B + b;
        sy_sgemm(j->ta, j->tb, j->M, e - b, j->K, j->alpha, j->A, j->lda, bm, j->ldb, j->beta, j->C + b, j->ldc);
        sy_epilogue_f32(j->C + b, j->M, e - b, j->ldc, j->bias, b, j->act);
    }
}

/* Blocks: enough work per sgemm call (>= ~1 MFLOP) and at most 16 of them.
 * Each call repacks the operand it shares with the other blocks, and
 * oneDNN takes a slower path for M <= 256 when that operand is large
 * (measured on 2048^3: 512-row blocks run at 97% of one call, 256-row
 * blocks at 49%), so blocks are at least 512 rows (columns) when the
 * shared operand is over 1 MiB, else 64. The count depends on the shape
 * only, so any thread count gives the same bits. */
#define GEMM_MAX_BLOCKS 16
static int64_t min_split(int64_t shared_floats, double flops_per_line) {
    int64_t lines = shared_floats * (int64_t)sizeof(float) > (1 << 20) ? 512 : 64;
    return sy_max64(lines, (int64_t)(1e6 / flops_per_line));
}

/* j->by_rows and j->blocks for its shape */
static void gemm_split(gemm_job *j) {
    int64_t k1 = j->K > 0 ? j->K : 1;
    int64_t min_rows = min_split(k1 * j->N, 2.0 * (double)j->N * (double)k1);
    j->by_rows = j->M >= 2 * min_rows;
    if (j->by_rows) {
        j->blocks = sy_min64(GEMM_MAX_BLOCKS, j->M / min_rows);
    } else {
        int64_t min_cols = min_split(k1 * j->M, 2.0 * (double)j->M * (double)k1);
        j->blocks = j->N >= 2 * min_cols ? sy_min64(GEMM_MAX_BLOCKS, j->N / min_cols) : 1;
    }
}

void sy_sgemm_parallel(const sy_exec *ex, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                       const float *bias, int act) {
    gemm_job j = {ta, tb, true, M, N, K, lda, ldb, ldc, 1, alpha, beta, A, B, bias, C, act};
    gemm_split(&j);
    sy_parallel_parts(ex, j.blocks, gemm_block, &j);
}

/* ---- skinny products: at most 16 columns over a long sum (issue 21) --------------
 * A Dense layer with few units over a wide input -- the tutorial CNN's Dense(10) over 10,816
 * pooled features -- gives oneDNN an N of 10, where it ran at 30-40% of the GEMM peak (2.5 ms
 * forward, 3.5 ms for the kernel's gradient at batch 1,000 on two threads, against 0.85 ms to read
 * the 43 MB input once). Two kernels of their own, both with every output computed by one thread
 * in a fixed order (any thread count, the same bits):
 *
 *   forward  c (M, N) = a (M, K) b (K, N): b transposed into the workspace, vectors along K, R rows
 *            of a by N columns of accumulators, each reduced lane by lane at the end;
 *   gradient c (M, N) = a^T (K, M) b (K, N) (a Dense kernel's, x^T dy): vectors along M, V vectors
 *            of a's row by N broadcasts of b's, down the K rows in order. */
#if defined(__AVX512F__)
#define SK_VL 16
#else
#define SK_VL 8
#endif
#define SK_UNROLL _Pragma("GCC unroll 16")
#define SK_MIN_K 256 /* the sum's length at least: below, oneDNN's call costs little */
typedef float skv __attribute__((vector_size(SK_VL * sizeof(float))));
static inline skv sk_ld(const float *p) {
    skv v;
    memcpy(&v, p, sizeof v);
    return v;
}

typedef struct skinny_job {
    const float *a, *b;
    float *c;
    int64_t M, N, K, lda, ldb, ldc, parts;
    const float *bias;
    int act;
} skinny_job;

/* Blocking: the gradient's rows of a by chunks of SK_KR (they stay in L2 across the part's columns;
 * the accumulators wait in the part's scratch between chunks, so each lane still sums its terms in
 * order); the forward prefetches SK_AHEAD floats ahead along a's rows, whose few KB each are too
 * short for the hardware's prefetcher (measured at batch 1,000: 2.0 ms against 3.1 without). */
#define SK_KR 16
#define SK_AHEAD 512

/* rows [i, i + R) of c, columns [u0, u0 + NU), from bt (N, K): each lane's terms in order, then the
 * lanes in order, then the sum's last terms */
static inline __attribute__((always_inline)) void sk_fwd_tile(const skinny_job *j, const float *bt, int64_t i,
                                                              int64_t u0, int R, int NU) {
    skv acc[4][12];
    SK_UNROLL for (int r = 0; r < R; r++) SK_UNROLL for (int u = 0; u < NU; u++) acc[r][u] = (skv){0};
    int64_t K = j->K, k = 0;
    const float *a = j->a + i * j->lda, *b = bt + u0 * K;
    for (; k + SK_VL <= K; k += SK_VL) {
        skv x[4];
        SK_UNROLL for (int r = 0; r < R; r++) {
            x[r] = sk_ld(a + r * j->lda + k);
            __builtin_prefetch(a + r * j->lda + k + SK_AHEAD);
        }
        SK_UNROLL for (int u = 0; u < NU; u++) {
            skv w = sk_ld(b + u * K + k);
            IN_REGISTER(w);
            SK_UNROLL for (int r = 0; r < R; r++) acc[r][u] += x[r] * w;
        }
    }
    SK_UNROLL for (int r = 0; r < R; r++) SK_UNROLL for (int u = 0; u < NU; u++) {
        float sum = 0;
        for (int l = 0; l < SK_VL; l++) sum += acc[r][u][l];
        for (int64_t t = k; t < K; t++) sum += a[r * j->lda + t] * b[u * K + t];
        j->c[(i + r) * j->ldc + u0 + u] = sum;
    }
}

/* columns per group and rows per tile: about 24 accumulators (on AVX2 too, spilling some: 1 row, no
 * spills, measured slower -- 3.6 ms against 2.6-2.9 at batch 1,000 -- as a's row is loaded once for
 * twice the products) */
#define SK_FWD(R, NU)                                                                                      \
    case NU:                                                                                               \
        for (i = b; i + R <= e; i += R) sk_fwd_tile(j, bt, i, u0, R, NU);                                  \
        for (; i < e; i++) sk_fwd_tile(j, bt, i, u0, 1, NU);                                               \
        break;

static void sk_fwd_part(void *ctx, int64_t part, float *scratch) {
    (void)scratch;
    const skinny_job *j = ctx;
    const float *bt = j->b; /* (the workspace's b^T) */
    int64_t b, e, i;
    sy_split_range(j->M, (int)part, (int)j->parts, &b, &e);
    for (int64_t u0 = 0; u0 < j->N; u0 += 12) switch (sy_min64(12, j->N - u0)) {
            SK_FWD(4, 1) SK_FWD(4, 2) SK_FWD(4, 3) SK_FWD(4, 4) SK_FWD(4, 5) SK_FWD(4, 6)
            SK_FWD(3, 7) SK_FWD(3, 8) SK_FWD(2, 9) SK_FWD(2, 10) SK_FWD(2, 11) SK_FWD(2, 12)
        }
    sy_epilogue_f32(j->c + b * j->ldc, e - b, j->N, j->ldc, j->bias, 0, j->act);
}

/* c rows [m, m + V SK_VL) (a's columns), all N columns, over a's rows [k0, k1); acc: theirs, V N vectors */
static inline __attribute__((always_inline)) void sk_grad_tile(const skinny_job *j, skv *acc_m, int64_t m, int64_t k0,
                                                               int64_t k1, int V, int N) {
    skv acc[8][16];
    SK_UNROLL for (int v = 0; v < V; v++) SK_UNROLL for (int u = 0; u < N; u++) acc[v][u] = acc_m[v * N + u];
    for (int64_t k = k0; k < k1; k++) {
        const float *a = j->a + k * j->lda + m, *b = j->b + k * j->ldb;
        skv x[8];
        SK_UNROLL for (int v = 0; v < V; v++) {
            x[v] = sk_ld(a + v * SK_VL);
            IN_REGISTER(x[v]);
        }
        SK_UNROLL for (int u = 0; u < N; u++) {
            float bu = b[u];
            SK_UNROLL for (int v = 0; v < V; v++) acc[v][u] += x[v] * bu;
        }
    }
    SK_UNROLL for (int v = 0; v < V; v++) SK_UNROLL for (int u = 0; u < N; u++) acc_m[v * N + u] = acc[v][u];
}

/* vectors a tile for N columns: about 24 accumulators on AVX-512 (32 registers), 12 on AVX2 (16: two
 * vectors by 10 columns had spilled, 4.6 ms against 3.8 at batch 1,000), from 1 to 8 */
#define SK_ACC (SK_VL == 16 ? 24 : 12)
#define SK_V(N) (SK_ACC / (N) > 8 ? 8 : SK_ACC / (N) < 1 ? 1 : SK_ACC / (N))
#define SK_GRAD(N)                                                                                         \
    case N:                                                                                                \
        for (m = m0; m + SK_V(N) * SK_VL <= vec_end; m += SK_V(N) * SK_VL)                                 \
            sk_grad_tile(j, acc + (m - m0) / SK_VL * N, m, k0, k1, SK_V(N), N);                            \
        for (; m + SK_VL <= vec_end; m += SK_VL) sk_grad_tile(j, acc + (m - m0) / SK_VL * N, m, k0, k1, 1, N); \
        break;

static void sk_grad_part(void *ctx, int64_t part, float *scratch) {
    const skinny_job *j = ctx;
    skv *acc = (skv *)(void *)scratch;
    int64_t b, e, last = part == j->parts - 1, m;
    sy_split_range(j->M / SK_VL, (int)part, (int)j->parts, &b, &e); /* in vectors; the last part the rest */
    int64_t m0 = b * SK_VL, m1 = last ? j->M : e * SK_VL, vec_end = e * SK_VL;
    memset(acc, 0, (size_t)((e - b) * j->N) * sizeof *acc);
    for (int64_t k0 = 0; k0 < j->K; k0 += SK_KR) {
        int64_t k1 = sy_min64(j->K, k0 + SK_KR);
        switch (j->N) {
            SK_GRAD(1) SK_GRAD(2) SK_GRAD(3) SK_GRAD(4) SK_GRAD(5) SK_GRAD(6) SK_GRAD(7) SK_GRAD(8)
            SK_GRAD(9) SK_GRAD(10) SK_GRAD(11) SK_GRAD(12) SK_GRAD(13) SK_GRAD(14) SK_GRAD(15) SK_GRAD(16)
        }
    }
    for (m = m0; m < vec_end; m++)
        for (int64_t u = 0; u < j->N; u++) j->c[m * j->ldc + u] = acc[(m - m0) / SK_VL * j->N + u][(m - m0) % SK_VL];
    for (m = vec_end; m < m1; m++) /* the last columns of a, one by one */
        for (int64_t u = 0; u < j->N; u++) {
            float sum = 0;
            for (int64_t k = 0; k < j->K; k++) sum += j->a[k * j->lda + m] * j->b[k * j->ldb + u];
            j->c[m * j->ldc + u] = sum;
        }
    sy_epilogue_f32(j->c + m0 * j->ldc, m1 - m0, j->N, j->ldc, j->bias, 0, j->act);
}

/* Whether the matmul takes a skinny kernel (above): f32, at most 16 columns over a long sum. */
static bool skinny(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
    if (tb || N < 1 || N > 16 || K < SK_MIN_K) return false;
    return ta ? M >= SK_VL : M >= 1;
}

/* The parts (fixed by the shape) and each one's scratch floats: the accumulators between chunks. */
static int64_t skinny_parts(bool ta, int64_t M) {
    return ta ? sy_min64(64, sy_max64(1, M / (4 * SK_VL))) : sy_min64(64, sy_max64(1, M / 8));
}
static int64_t skinny_scratch(bool ta, int64_t M, int64_t N) {
    return ta ? sy_align_up((M / SK_VL / skinny_parts(ta, M) + 1) * N * SK_VL, 16) : 0;
}
/* Workspace: b^T (the forward), then the threads' scratch */
static int64_t skinny_ws_floats(bool ta, int64_t M, int64_t N, int64_t K, int threads) {
    return (ta ? 0 : sy_align_up(N * K, 16)) +
           sy_blocks_buffers(threads, skinny_parts(ta, M)) * skinny_scratch(ta, M, N) + 16;
}

static void skinny_run(const sy_exec *ex, bool ta, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float *c, const float *bias, int act, float *ws) {
    skinny_job j = {a, b, c, M, N, K, lda, ldb, N, skinny_parts(ta, M), bias, act};
    ws = (float *)sy_align_up((intptr_t)ws, 64); /* (the vectors' alignment) */
    if (!ta) {
        SY_ASSERT(ldb == N);
        sy_transpose(ex, ws, b, K, N); /* b^T, (N, K) */
        j.b = ws;
        ws += sy_align_up(N * K, 16);
    }
    sy_run_blocks(ex, j.parts, ta ? sk_grad_part : sk_fwd_part, &j, ws, skinny_scratch(ta, M, N));
}

/* ---- the matmul kernel: c (M, N) = op(a) op(b) [+ bias], act --------------- */

/* issue 16, bfloat16 storage: any operand may be a bfloat16 buffer. The products are the float32
 * path's, call for call -- the same blocks (gemm_split), each one sgemm of the same shape -- on
 * operands widened first: b and the bias whole, once; a by blocks of rows of op(a) into the
 * thread's scratch (whole, once, when the blocks are columns and share it). A bfloat16 c is a
 * float32 block in the scratch that the bfloat16 epilogue stores (round(act(round(sum + bias)))).
 */
typedef struct matmul_bf16_job {
    gemm_job g;
    const sy_kargs *k;
    bool ab, cb;
    int64_t rows; /* of a block of op(a) */
} matmul_bf16_job;

/* Scratch per thread, in floats: a block of op(a) (by rows) and a block of c. */
static int64_t matmul_block_a(const matmul_bf16_job *j) {
    return j->ab && j->g.by_rows ? sy_align_up(j->rows * j->g.K, 16) : 0;
}
static int64_t matmul_block_c(const matmul_bf16_job *j) {
    return j->cb ? sy_align_up(j->g.by_rows ? j->rows * j->g.N
                                            : j->g.M * ((j->g.N + j->g.blocks - 1) / j->g.blocks),
                               16)
                 : 0;
}

static void matmul_bf16_block(void *ctx, int64_t part, float *buf) {
    const matmul_bf16_job *j = ctx;
    const gemm_job *g = &j->g;
    float *cs = buf + matmul_block_a(j);
    int64_t b, e;
    if (g->by_rows) {
        sy_split_range(g->M, (int)part, (int)g->blocks, &b, &e);
        const float *a = g->ta ? g->A + b : g->A + b * g->lda;
        int64_t lda = g->lda;
        if (j->ab) { /* rows [b, e) of op(a): a's rows, or with ta its columns */
            const uint16_t *a16 = j->k->in[0];
            if (g->ta) {
                for (int64_t kk = 0; kk < g->K; kk++)
                    sy_bf16_load_all(buf + kk * (e - b), a16 + kk * g->lda + b, e - b);
                lda = e - b;
            } else {
                sy_bf16_load_all(buf, a16 + b * g->lda, (e - b) * g->lda);
            }
            a = buf;
        }
        float *c = j->cb ? cs : g->C + b * g->ldc;
        int64_t ldc = j->cb ? g->N : g->ldc;
        sy_sgemm(g->ta, g->tb, e - b, g->N, g->K, 1.0f, a, lda, g->B, g->ldb, 0.0f, c, ldc);
        if (j->cb)
            sy_bf16_epilogue_store((uint16_t *)j->k->out + b * g->ldc, g->ldc, c, ldc, e - b, g->N,
                                   g->bias, g->act);
        else
            sy_epilogue_f32(c, e - b, g->N, ldc, g->bias, 0, g->act);
    } else {
        sy_split_range(g->N, (int)part, (int)g->blocks, &b, &e);
        const float *bm = g->tb ? g->B + b * g->ldb : g->B + b;
        float *c = j->cb ? cs : g->C + b;
        int64_t ldc = j->cb ? e - b : g->ldc;
        sy_sgemm(g->ta, g->tb, g->M, e - b, g->K, 1.0f, g->A, g->lda, bm, g->ldb, 0.0f, c, ldc);
        if (j->cb)
            sy_bf16_epilogue_store((uint16_t *)j->k->out + b, g->ldc, c, ldc, g->M, e - b,
                                   g->bias ? g->bias + b : NULL, g->act);
        else
            sy_epilogue_f32(c, g->M, e - b, ldc, g->bias, b, g->act);
    }
}

static matmul_bf16_job matmul_bf16_plan(const sy_kargs *k, int threads, int64_t *head,
                                        int64_t *per_thread) {
    bool ta = k->attr->matmul.ta, tb = k->attr->matmul.tb;
    const sy_shape *as = &k->in_shape[0], *bs = &k->in_shape[1];
    int64_t M = k->out_shape->dims[0], N = k->out_shape->dims[1],
            K = ta ? as->dims[0] : as->dims[1];
    matmul_bf16_job j = {{ta, tb, true, M, N, K, as->dims[1], bs->dims[1], N, 1, 1.0f, 0.0f, NULL,
                          NULL, NULL, NULL, k->attr->matmul.act},
                         k,
                         k->in_dtype[0] == SY_BF16,
                         k->dtype == SY_BF16,
                         0};
    gemm_split(&j.g);
    j.rows = (M + j.g.blocks - 1) / j.g.blocks;
    bool bb = k->in_dtype[1] == SY_BF16, biasb = k->n_in > 2 && k->in_dtype[2] == SY_BF16;
    *head = (bb ? sy_align_up(K * N, 16) : 0) + (biasb ? sy_align_up(N, 16) : 0) +
            (j.ab && !j.g.by_rows ? sy_align_up(M * K, 16) : 0);
    *per_thread = matmul_block_a(&j) + matmul_block_c(&j);
    (void)threads;
    return j;
}

static bool matmul_any_bf16(const sy_kargs *k) {
    bool any = k->dtype == SY_BF16;
    for (int i = 0; i < k->n_in; i++) any |= k->in_dtype[i] == SY_BF16;
    return any;
}

static size_t matmul_ws(const sy_kargs *k, int threads) {
    if (!matmul_any_bf16(k)) {
        bool ta = k->attr->matmul.ta, tb = k->attr->matmul.tb;
        int64_t M = k->out_shape->dims[0], N = k->out_shape->dims[1];
        int64_t K = ta ? k->in_shape[0].dims[0] : k->in_shape[0].dims[1];
        return skinny(ta, tb, M, N, K) ? (size_t)skinny_ws_floats(ta, M, N, K, threads) * sizeof(float) : 0;
    }
    int64_t head, per_thread;
    matmul_bf16_job j = matmul_bf16_plan(k, threads, &head, &per_thread);
    return (size_t)(head + sy_blocks_buffers(threads, j.g.blocks) * per_thread + 16) *
           sizeof(float);
}

static void matmul_fwd_f32_fast(const sy_kargs *k) {
    bool ta = k->attr->matmul.ta, tb = k->attr->matmul.tb;
    const sy_shape *as = &k->in_shape[0], *bs = &k->in_shape[1];
    int64_t M = k->out_shape->dims[0], N = k->out_shape->dims[1], K = ta ? as->dims[0] : as->dims[1];
    if (matmul_any_bf16(k)) {
        int64_t head, per_thread;
        matmul_bf16_job j = matmul_bf16_plan(k, k->ex->threads, &head, &per_thread);
        float *ws = k->ws;
        j.g.A = k->in[0];
        j.g.B = k->in[1];
        j.g.bias = k->n_in > 2 ? k->in[2] : NULL;
        j.g.C = k->out;
        if (k->in_dtype[1] == SY_BF16) {
            sy_bf16_load_all(ws, k->in[1], K * N);
            j.g.B = ws;
            ws += sy_align_up(K * N, 16);
        }
        if (k->n_in > 2 && k->in_dtype[2] == SY_BF16) {
            sy_bf16_load_all(ws, k->in[2], N);
            j.g.bias = ws;
            ws += sy_align_up(N, 16);
        }
        if (j.ab && !j.g.by_rows) {
            sy_bf16_load_all(ws, k->in[0], M * K);
            j.g.A = ws;
            ws += sy_align_up(M * K, 16);
            j.ab = false;
        }
        sy_run_blocks(k->ex, j.g.blocks, matmul_bf16_block, &j, ws, per_thread);
        return;
    }
    if (k->aux) { /* issue 21, matmul_bias_grad (fusion.c): b's column sums, row by row (a^T b only) */
        const float *b = k->in[1];
        float *db = k->aux;
        memset(db, 0, (size_t)N * sizeof *db);
        for (int64_t r = 0; r < K; r++)
            for (int64_t u = 0; u < N; u++) db[u] += b[r * bs->dims[1] + u];
    }
    if (skinny(ta, tb, M, N, K))
        skinny_run(k->ex, ta, M, N, K, k->in[0], as->dims[1], k->in[1], bs->dims[1], k->out, k->n_in > 2 ? k->in[2] : NULL,
                   k->attr->matmul.act, k->ws);
    else
        sy_sgemm_parallel(k->ex, ta, tb, M, N, K, 1.0f, k->in[0], as->dims[1], k->in[1], bs->dims[1], 0.0f, k->out,
                          N, k->n_in > 2 ? k->in[2] : NULL, k->attr->matmul.act);
}

static uint32_t matmul_bf16_io(const sy_kargs *k) {
    (void)k;
    return SY_BF16_IN(0) | SY_BF16_IN(1) | SY_BF16_IN(2) | SY_BF16_OUT;
}

const sy_kernel sy_cpu_matmul = {matmul_fwd_f32_fast, matmul_ws, matmul_bf16_io};
