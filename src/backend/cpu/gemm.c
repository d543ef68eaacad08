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

void sy_bf16_epilogue(float *y, int64_t rows, int64_t n, const float *bias, int act) {
    /* row by row, each loop simple enough to vectorise (sy_bf16_round is branch-free) */
    for (int64_t i = 0; i < rows; i++) {
        float *restrict r = y + i * n;
        if (bias)
            for (int64_t j = 0; j < n; j++) r[j] = sy_bf16_round(r[j] + bias[j]);
        else
            for (int64_t j = 0; j < n; j++) r[j] = sy_bf16_round(r[j]);
        if (act == SY_ACT_RELU)
            for (int64_t j = 0; j < n; j++) r[j] = r[j] > 0 ? r[j] : 0;
        else if (act == SY_ACT_SIGMOID)
            sy_bf16_sigmoid(r, r, n);
        else if (act != SY_ACT_NONE)
            for (int64_t j = 0; j < n; j++) r[j] = sy_bf16_round(sy_act_f32(r[j], act));
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

void sy_sgemm_parallel(const sy_exec *ex, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                       const float *bias, int act) {
    gemm_job j = {ta, tb, true, M, N, K, lda, ldb, ldc, 1, alpha, beta, A, B, bias, C, act};
    int64_t k1 = K > 0 ? K : 1;
    int64_t min_rows = min_split(k1 * N, 2.0 * (double)N * (double)k1);
    if (M >= 2 * min_rows) {
        j.blocks = sy_min64(GEMM_MAX_BLOCKS, M / min_rows);
    } else {
        int64_t min_cols = min_split(k1 * M, 2.0 * (double)M * (double)k1);
        j.by_rows = false;
        j.blocks = N >= 2 * min_cols ? sy_min64(GEMM_MAX_BLOCKS, N / min_cols) : 1;
    }
    sy_parallel_parts(ex, j.blocks, gemm_block, &j);
}

/* ---- the matmul kernel: c (M, N) = op(a) op(b) [+ bias], act --------------- */

static void matmul_fwd_f32_fast(const sy_kargs *k) {
    bool ta = k->attr->matmul.ta, tb = k->attr->matmul.tb;
    const sy_shape *as = &k->in_shape[0], *bs = &k->in_shape[1];
    int64_t M = k->out_shape->dims[0], N = k->out_shape->dims[1], K = ta ? as->dims[0] : as->dims[1];
    sy_sgemm_parallel(k->ex, ta, tb, M, N, K, 1.0f, k->in[0], as->dims[1], k->in[1], bs->dims[1], 0.0f, k->out, N,
                      k->n_in > 2 ? k->in[2] : NULL, k->attr->matmul.act);
}

const sy_kernel sy_cpu_matmul = {matmul_fwd_f32_fast, NULL};
