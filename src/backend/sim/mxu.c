/*
 * mxu.c - the sim backend's fast MXU kernels: matmul and the three conv2d
 * ops, with the MXU's numerics (docs/design/mxu-numerics.md), equal bit for
 * bit to the scalar reference kernels of mxu_ref.c.
 *
 * One GEMM serves them all: C (M, N) = A (M, K) x B (K, N), its K taken in
 * chunks of SY_MXU_DEPTH (128), the MXU's depth. For each chunk the operands
 * are packed with every element rounded to bfloat16 as it is copied -- the
 * rounding costs no pass of its own -- and smallgemm.c's micro-kernel (a
 * 6 x 16 tile of float32 accumulators, k in order, vectors across output
 * columns) sums the chunk from 0 and adds it to C (the first chunk stores
 * it). Each product of two bfloat16 values is exact in float32, so a fused
 * multiply-add gives the same bits as a multiply and an add, and the tile's
 * order per element -- chunk sums in k order, added in chunk order -- is
 * the reference's. Bias and activation follow in float32 (sy_epilogue_f32).
 *
 *   B   packed whole, chunk after chunk (sy_pack_b_bf16), into the
 *       workspace before the product, over the threads;
 *   A   packed per (sub-block of MB rows, chunk) by the op's pack_a: a
 *       rounded copy of matrix rows, or im2col with rounding (conv.c's,
 *       shared), or im2col transposed (backprop-filter's A = cols^T);
 *   C   rows split into parts fixed by the shape; each element is computed
 *       by one part, in the same order whatever the thread count.
 *
 *   forward          y (P, O)  = cols (P, K) x w (K, O), bias, act
 *   backprop-input   cols (P, K) = dy (P, O) x w^T (O, K), then col2im
 *                    into dx, by groups of whole images
 *   backprop-filter  dw (K, O) = cols^T (K, P) x dy (P, O): K is never
 *                    split across threads (that would reorder its sum), so
 *                    parts are rows of dw
 *
 * No Winograd (its transforms are not the MXU's arithmetic) and no direct
 * short-window kernels: every conv is im2col + the MXU GEMM. Grouped,
 * dilated and depthwise convs run mxu_ref.c's loops.
 */
#include "sim_internal.h"

#define MB 96           /* rows per sub-block: A's chunk (48 KB) and C's rows stay in L2 */
#define MIN_TILES 4     /* tiles of SY_SMALLGEMM_MR rows per part, at least */
#define MAX_PARTS 16

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t floats_aligned(int64_t n) { return sy_align_up(n, SY_ALIGN / (int64_t)sizeof(float)); }
static int64_t npad(int64_t n) { return sy_pack_b_floats(1, n); }

/* A's rows [i0, i0 + rows), columns [k0, k0 + kn), rounded, into dst (rows, kn); tmp: MB x DEPTH floats. */
typedef void (*pack_a_fn)(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *dst, float *tmp);

typedef struct gemm {
    int64_t M, N, K;
    pack_a_fn pack_a;
    const void *actx;
    const float *bp; /* pack_b's */
    float *c;
    int64_t ldc;
    const float *bias;
    int act;
} gemm;

static int64_t scratch_floats(void) { return 2 * MB * SY_MXU_DEPTH; }
static int64_t packed_b_floats(int64_t K, int64_t N) { return floats_aligned(K * npad(N)); }

/* ---- B: packed chunk after chunk, rounded ----------------------------------- */

typedef struct pack_b_job {
    float *bp;
    const float *b;
    int64_t ldb, K, N;
    bool tb;
} pack_b_job;

static void pack_b_chunk(void *ctx, int64_t chunk) {
    const pack_b_job *j = ctx;
    int64_t k0 = chunk * SY_MXU_DEPTH, kn = sy_min64(SY_MXU_DEPTH, j->K - k0);
    sy_pack_b_bf16(j->bp + k0 * npad(j->N), j->tb ? j->b + k0 : j->b + k0 * j->ldb, j->ldb, j->tb, kn, j->N);
}

/* B (K, N) from b (stride ldb; stored (N, K) when tb) */
static void pack_b(const sy_exec *ex, float *bp, const float *b, int64_t ldb, bool tb, int64_t K, int64_t N) {
    pack_b_job j = {bp, b, ldb, K, N, tb};
    sy_parallel_parts(ex, ceil_div(K, SY_MXU_DEPTH), pack_b_chunk, &j);
}

/* ---- the product --------------------------------------------------------------- */

/* Rows [i0, i1) of C into c (row i0 of C), sub-block by sub-block, chunk by chunk. */
static void gemm_rows(const gemm *g, int64_t i0, int64_t i1, float *c, float *scratch) {
    float *a = scratch, *tmp = scratch + MB * SY_MXU_DEPTH;
    for (int64_t r0 = i0; r0 < i1; r0 += MB) {
        int64_t rows = sy_min64(MB, i1 - r0);
        float *cr = c + (r0 - i0) * g->ldc;
        if (g->K == 0)
            for (int64_t r = 0; r < rows; r++) memset(cr + r * g->ldc, 0, (size_t)g->N * sizeof(float));
        for (int64_t k0 = 0; k0 < g->K; k0 += SY_MXU_DEPTH) {
            int64_t kn = sy_min64(SY_MXU_DEPTH, g->K - k0);
            g->pack_a(g->actx, r0, rows, k0, kn, a, tmp);
            sy_sgemm_packed_serial(rows, g->N, kn, a, kn, g->bp + k0 * npad(g->N), k0 > 0, cr, g->ldc);
        }
        sy_epilogue_f32(cr, rows, g->N, g->ldc, g->bias, 0, g->act);
    }
}

static int64_t gemm_parts(int64_t M) {
    return sy_max64(1, sy_min64(MAX_PARTS, ceil_div(M, SY_SMALLGEMM_MR) / MIN_TILES));
}

static void gemm_part(void *ctx, int64_t part, float *scratch) {
    const gemm *g = ctx;
    int64_t t0, t1, tiles = ceil_div(g->M, SY_SMALLGEMM_MR);
    sy_split_range(tiles, (int)part, (int)gemm_parts(g->M), &t0, &t1);
    int64_t i0 = t0 * SY_SMALLGEMM_MR, i1 = sy_min64(g->M, t1 * SY_SMALLGEMM_MR);
    gemm_rows(g, i0, i1, g->c + i0 * g->ldc, scratch);
}

/* Workspace after the packed B: the parts' scratch. */
static int64_t gemm_ws_floats(int64_t M, int threads) {
    return sy_blocks_buffers(threads, gemm_parts(M)) * scratch_floats();
}

static void gemm_run(const sy_exec *ex, const gemm *g, float *scratch) {
    if (g->M <= 0 || g->N <= 0) return;
    sy_run_blocks(ex, gemm_parts(g->M), gemm_part, (void *)g, scratch, scratch_floats());
}

/* ---- A operands ------------------------------------------------------------------ */

typedef struct matrix {
    const float *a;
    int64_t lda;
    bool ta; /* A stored (K, M) */
} matrix;

static void pack_a_matrix(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *restrict dst,
                          float *tmp) {
    const matrix *m = ctx;
    (void)tmp;
    if (m->ta) {
        for (int64_t kk = 0; kk < kn; kk++) {
            const float *src = m->a + (k0 + kk) * m->lda + i0;
            for (int64_t r = 0; r < rows; r++) dst[r * kn + kk] = sy_bf16_round(src[r]);
        }
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *src = m->a + (i0 + r) * m->lda + k0;
        for (int64_t kk = 0; kk < kn; kk++) dst[r * kn + kk] = sy_bf16_round(src[kk]);
    }
}

typedef struct conv_src {
    const sy_conv_geom *g;
    const float *x;
} conv_src;

/* forward: rows are output pixels, columns window elements */
static void pack_a_im2col(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *dst, float *tmp) {
    const conv_src *s = ctx;
    (void)tmp;
    sy_im2col(dst, s->x, s->g, i0, rows, k0, k0 + kn, true);
}

/* backprop-filter: rows are window elements, columns output pixels */
static void pack_a_im2col_t(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *restrict dst,
                            float *tmp) {
    const conv_src *s = ctx;
    sy_im2col(tmp, s->x, s->g, k0, kn, i0, i0 + rows, true);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t kk = 0; kk < kn; kk++) dst[r * kn + kk] = tmp[kk * rows + r];
}

/* ---- matmul: c (M, N) = op(a) op(b) [+ bias], act ---------------------------- */

static void matmul_dims(const sy_kargs *k, int64_t *M, int64_t *N, int64_t *K) {
    *M = k->out_shape->dims[0];
    *N = k->out_shape->dims[1];
    *K = k->attr->matmul.ta ? k->in_shape[0].dims[0] : k->in_shape[0].dims[1];
}

static size_t matmul_ws(const sy_kargs *k, int threads) {
    int64_t M, N, K;
    matmul_dims(k, &M, &N, &K);
    return (size_t)(packed_b_floats(K, N) + gemm_ws_floats(M, threads)) * sizeof(float);
}

static void matmul_fwd_f32_mxu(const sy_kargs *k) {
    int64_t M, N, K;
    matmul_dims(k, &M, &N, &K);
    float *bp = k->ws;
    pack_b(k->ex, bp, k->in[1], k->in_shape[1].dims[1], k->attr->matmul.tb, K, N);
    matrix a = {k->in[0], k->in_shape[0].dims[1], k->attr->matmul.ta};
    gemm g = {M, N, K, pack_a_matrix, &a, bp, k->out, N, k->n_in > 2 ? k->in[2] : NULL, k->attr->matmul.act};
    gemm_run(k->ex, &g, bp + packed_b_floats(K, N));
}

/* ---- conv2d ------------------------------------------------------------------------ */

static bool plain(const sy_attrs *a) {
    return sy_conv_groups(a) == 1 && sy_conv_dilation(a, 0) == 1 && sy_conv_dilation(a, 1) == 1;
}

static size_t conv2d_fwd_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    return (size_t)(packed_b_floats(g.K, g.o) + gemm_ws_floats(g.P, threads)) * sizeof(float);
}

/* (x (N, H, W, C), w (KH, KW, C, O) [, bias (O)]) -> y (N, OH, OW, O) */
static void conv2d_fwd_f32_mxu(const sy_kargs *k) {
    if (!plain(k->attr)) {
        sy_sim_ref_kernel(SY_OP_CONV2D, SY_F32)->run(k);
        return;
    }
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    float *bp = k->ws;
    pack_b(k->ex, bp, k->in[1], g.o, false, g.K, g.o);
    conv_src s = {&g, k->in[0]};
    gemm m = {g.P, g.o, g.K, pack_a_im2col, &s, bp, k->out, g.o, k->n_in > 2 ? k->in[2] : NULL, k->attr->conv.act};
    gemm_run(k->ex, &m, bp + packed_b_floats(g.K, g.o));
}

/* backprop-input: images in groups, each group's pixels in blocks of MB rows */
typedef struct bwd_data_job {
    const sy_conv_geom *g;
    gemm m; /* dy x w^T, C = the block's cols */
    float *dx;
    int64_t groups;
} bwd_data_job;

static int64_t bwd_data_groups(const sy_conv_geom *g) { return sy_max64(1, sy_min64(g->n, MAX_PARTS)); }
static int64_t bwd_data_scratch(const sy_conv_geom *g) { return scratch_floats() + floats_aligned(MB * g->K); }

static void bwd_data_group(void *ctx, int64_t group, float *scratch) {
    const bwd_data_job *j = ctx;
    const sy_conv_geom *g = j->g;
    int64_t n0, n1, img = g->h * g->w * g->c, opix = g->oh * g->ow;
    sy_split_range(g->n, (int)group, (int)j->groups, &n0, &n1);
    memset(j->dx + n0 * img, 0, (size_t)((n1 - n0) * img) * sizeof(float));
    float *cols = scratch + scratch_floats();
    for (int64_t p0 = n0 * opix; p0 < n1 * opix; p0 += MB) {
        int64_t rows = sy_min64(MB, n1 * opix - p0);
        gemm_rows(&j->m, p0, p0 + rows, cols, scratch);
        sy_col2im_add(j->dx, cols, g, p0, rows);
    }
}

static size_t conv2d_bwd_data_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    sy_conv_geom g = sy_conv_geom_make(k->out_shape, &k->in_shape[1], k->attr);
    return (size_t)(packed_b_floats(g.o, g.K) + sy_blocks_buffers(threads, bwd_data_groups(&g)) * bwd_data_scratch(&g)) *
           sizeof(float);
}

/* (dy (N, OH, OW, O), w (KH, KW, C, O)) -> dx (N, H, W, C) */
static void conv2d_bwd_data_f32_mxu(const sy_kargs *k) {
    if (!plain(k->attr)) {
        sy_sim_ref_kernel(SY_OP_CONV2D_BACKPROP_INPUT, SY_F32)->run(k);
        return;
    }
    sy_conv_geom g = sy_conv_geom_make(k->out_shape, &k->in_shape[1], k->attr);
    float *bp = k->ws;
    pack_b(k->ex, bp, k->in[1], g.o, true, g.o, g.K);
    matrix a = {k->in[0], g.o, false};
    bwd_data_job j = {&g, {g.P, g.K, g.o, pack_a_matrix, &a, bp, NULL, g.K, NULL, SY_ACT_NONE}, k->out,
                      bwd_data_groups(&g)};
    sy_run_blocks(k->ex, j.groups, bwd_data_group, &j, bp + packed_b_floats(g.o, g.K), bwd_data_scratch(&g));
}

static size_t conv2d_bwd_filter_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    return (size_t)(packed_b_floats(g.P, g.o) + gemm_ws_floats(g.K, threads)) * sizeof(float);
}

/* (x (N, H, W, C), dy (N, OH, OW, O)) -> dw (KH, KW, C, O) */
static void conv2d_bwd_filter_f32_mxu(const sy_kargs *k) {
    if (!plain(k->attr)) {
        sy_sim_ref_kernel(SY_OP_CONV2D_BACKPROP_FILTER, SY_F32)->run(k);
        return;
    }
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    float *bp = k->ws;
    pack_b(k->ex, bp, k->in[1], g.o, false, g.P, g.o);
    conv_src s = {&g, k->in[0]};
    gemm m = {g.K, g.o, g.P, pack_a_im2col_t, &s, bp, k->out, g.o, NULL, SY_ACT_NONE};
    gemm_run(k->ex, &m, bp + packed_b_floats(g.P, g.o));
}

const sy_kernel sy_sim_matmul = {matmul_fwd_f32_mxu, matmul_ws};
const sy_kernel sy_sim_conv2d = {conv2d_fwd_f32_mxu, conv2d_fwd_ws};
const sy_kernel sy_sim_conv2d_backprop_input = {conv2d_bwd_data_f32_mxu, conv2d_bwd_data_ws};
const sy_kernel sy_sim_conv2d_backprop_filter = {conv2d_bwd_filter_f32_mxu, conv2d_bwd_filter_ws};
