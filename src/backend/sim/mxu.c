/*
 * mxu.c - the sim backend's fast MXU kernels: matmul and the three conv2d
 * ops, with the MXU's numerics (docs/design/mxu-numerics.md), equal bit for
 * bit to the scalar reference kernels of mxu_ref.c; and the conv -> pool
 * fusion's two kernels (issue 21) on the same products, equal bit for bit
 * to the unfused ops (the end of this file).
 *
 * One GEMM serves them all: C (M, N) = A (M, K) x B (K, N), its K taken in
 * chunks of SY_MXU_DEPTH (128), the MXU's depth. For each chunk the operands
 * are packed with every element rounded to bfloat16 as it is copied -- the
 * rounding costs no pass of its own -- two to a 32-bit word, and
 * cpu/mxu_pairs.c's micro-kernel (a 6 x 16 tile of float32 sums; with
 * AVX-512 BF16, 16 products an instruction) sums the chunk from 0 in the
 * reference's pair order and adds it to C (the first chunk stores it). Bias
 * and activation follow in float32 (sy_epilogue_f32).
 *
 *   B   packed whole, chunk after chunk (sy_mxu_pack_b), into the workspace
 *       before the product, over the threads; or, when it is as large as
 *       the activations (a backprop-filter's dy, VGG's 4096 x 4096 Dense
 *       kernel), packed chunk by chunk by each part for its columns, or
 *       built per chunk (b_rows: im2col with rounding) and packed;
 *   A   packed per (sub-block of MB rows, chunk) by the op's pack_a: a
 *       rounded copy of matrix rows (or columns, transposed), im2col with
 *       rounding (conv.c's, shared), or window taps gathered straight from
 *       x (pack_a_taps); then narrowed into pairs;
 *   C   split into parts by rows and columns (gemm_split: by the shape,
 *       and by the thread count where B is packed on the way); each
 *       element is computed whole by one part, so in the same order
 *       whatever the split.
 *
 *   forward          y (P, O)  = cols (P, K) x w (K, O), bias, act
 *   backprop-input   cols (P, K) = dy (P, O) x w^T (O, K), then col2im
 *                    into dx, by groups of whole images
 *   backprop-filter  dw (K, O) = cols^T (K, P) x dy (P, O), or for long
 *                    windows dw^T = dy^T x cols: P is never split across
 *                    threads (that would reorder its sum)
 *   matmul           C = op(A) op(B), or C^T = op(B)^T op(A)^T for a
 *                    weight gradient with few columns
 *
 * No Winograd (its transforms are not the MXU's arithmetic) and no direct
 * short-window kernels (their sums are not in the chunked order): every conv
 * is a product of windows. Grouped, dilated and depthwise convs run
 * mxu_ref.c's loops.
 */
#include "sim_internal.h"

#define MB 96                     /* rows per sub-block: A's chunk (48 KB) and C's rows stay in L2 */
#define KP (SY_MXU_DEPTH / 2)     /* pairs in a whole chunk */
#define MIN_TILES 4               /* tiles of SY_SMALLGEMM_MR rows per part, at least */
#define MAX_PARTS 16
#define WHOLE_B (4 << 20)         /* words of B packed whole, at most */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t floats_aligned(int64_t n) { return sy_align_up(n, SY_ALIGN / (int64_t)sizeof(float)); }
static int64_t npad(int64_t n) { return sy_mxu_b_words(2, n); } /* words of a pair of B's rows */

/* A's rows [i0, i0 + rows), columns [k0, k0 + kn), rounded, into dst (rows, kn). */
typedef void (*pack_a_fn)(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *dst);

typedef struct gemm {
    int64_t M, N, K;
    pack_a_fn pack_a;
    const void *actx;
    uint32_t *bp;   /* B packed whole, chunk after chunk; or NULL: each part packs its chunks of b as it goes */
    const float *b; /* B (K, N) (stride ldb; stored (N, K) when tb) */
    int64_t ldb;
    bool tb;
    float *c;
    int64_t ldc;
    const float *bias;
    int act;
    /* B built on the way (conv: im2col; a pooled gradient expanded): B's rows [k0, k0 + kn), columns [j0, j1),
     * into dst (kn, j1 - j0) -- rounded or not: the packing rounds them -- called once for each chunk by
     * each part, in order; NULL: B is the matrix b */
    void (*b_rows)(const void *ctx, int64_t k0, int64_t kn, int64_t j0, int64_t j1, float *dst);
    const void *bctx;
    int64_t pm, pn; /* parts by rows and by columns (gemm_run sets them) */
    float *chunks;  /* the chunks' sums, when K is split (gemm_run sets it) */
} gemm;

/* Per-part scratch: A's chunk rounded, then in pairs; B's chunk in pairs when it is packed on the way, and
 * as b_rows builds it. */
static int64_t scratch_floats(int64_t N) { return MB * SY_MXU_DEPTH + MB * KP + KP * npad(N) + SY_MXU_DEPTH * npad(N); }
/* B packed whole: a chunk's panels in KP * npad(N) words, chunk after chunk */
static int64_t packed_b_floats(int64_t K, int64_t N) { return floats_aligned(ceil_div(K, SY_MXU_DEPTH) * KP * npad(N)); }

/* B's rows [k0, k0 + kn), columns [j0, j0 + n), rounded, in pairs (sy_mxu_pack_b) */
static void pack_b_block(uint32_t *bp, const float *b, int64_t ldb, bool tb, int64_t k0, int64_t kn, int64_t j0, int64_t n) {
    sy_mxu_pack_b(bp, tb ? b + j0 * ldb + k0 : b + k0 * ldb + j0, ldb, tb, kn, n);
}

/* ---- B: packed whole, chunk after chunk, rounded ------------------------------ */

static void pack_b_chunk(void *ctx, int64_t chunk) {
    const gemm *g = ctx;
    int64_t k0 = chunk * SY_MXU_DEPTH;
    pack_b_block(g->bp + chunk * KP * npad(g->N), g->b, g->ldb, g->tb, k0, sy_min64(SY_MXU_DEPTH, g->K - k0), 0, g->N);
}

static void pack_b(const sy_exec *ex, const gemm *g) { sy_parallel_parts(ex, ceil_div(g->K, SY_MXU_DEPTH), pack_b_chunk, (void *)g); }

/* ---- the product --------------------------------------------------------------- */

/* One chunk (terms [k0, k0 + kn)) of C's rows [r0, r0 + rows), n columns, into c (row r0, the first column),
 * with B's chunk bpc (panels pstride words apart): A packed (af rounded, then ap in pairs), then the
 * micro-kernel, which adds the chunk's sum to C, or (!acc) stores it. */
static void gemm_chunk(const gemm *g, int64_t r0, int64_t rows, int64_t n, int64_t k0, const uint32_t *bpc,
                       int64_t pstride, bool acc, float *c, float *af, uint32_t *ap) {
    int64_t kn = sy_min64(SY_MXU_DEPTH, g->K - k0), kp = sy_mxu_pairs(kn);
    g->pack_a(g->actx, r0, rows, k0, kn, af);
    sy_mxu_pack_a(ap, kp, af, kn, false, rows, kn, true);
    sy_mxu_chunk(rows, n, kp, ap, kp, bpc, pstride, acc, c, g->ldc);
}

/* Rows [i0, i1), columns [j0, j1) of C into c (row i0 of C, column 0), summed over the chunks of terms [ka, kb)
 * (ka a whole chunk's start), the first stored. With B packed whole: sub-block by sub-block of MB rows, chunk by
 * chunk within, so that a sub-block of C stays in cache; else chunk by chunk, B's chunk packed once for all the
 * rows (the parts of such products have few rows). Either way each element of C sums its chunks in order. */
static void gemm_range(const gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t ka, int64_t kb, float *c,
                       float *scratch) {
    float *af = scratch;
    uint32_t *ap = (uint32_t *)(af + MB * SY_MXU_DEPTH), *bbuf = ap + MB * KP;
    float *brows = (float *)(bbuf + KP * npad(g->N));
    if (g->bp) {
        for (int64_t r0 = i0; r0 < i1; r0 += MB)
            for (int64_t k0 = ka; k0 < kb; k0 += SY_MXU_DEPTH) {
                int64_t kp = sy_mxu_pairs(sy_min64(SY_MXU_DEPTH, g->K - k0));
                const uint32_t *bpc = g->bp + k0 / SY_MXU_DEPTH * KP * npad(g->N) + j0 / 16 * 16 * kp;
                gemm_chunk(g, r0, sy_min64(MB, i1 - r0), j1 - j0, k0, bpc, kp * 16, k0 > ka,
                           c + (r0 - i0) * g->ldc + j0, af, ap);
            }
    } else {
        for (int64_t k0 = ka; k0 < kb; k0 += SY_MXU_DEPTH) {
            int64_t kn = sy_min64(SY_MXU_DEPTH, g->K - k0);
            if (!g->tb && i1 - i0 <= 12) { /* few rows: B's rows paired in registers where it can */
                int64_t kp = sy_mxu_pairs(kn), ldb = g->b_rows ? j1 - j0 : g->ldb;
                const float *b = g->b_rows ? brows : g->b + k0 * g->ldb + j0;
                if (g->b_rows) g->b_rows(g->bctx, k0, kn, j0, j1, brows);
                g->pack_a(g->actx, i0, i1 - i0, k0, kn, af);
                sy_mxu_pack_a(ap, kp, af, kn, false, i1 - i0, kn, true);
                if (!sy_mxu_chunk_rows(i1 - i0, j1 - j0, kn, ap, kp, b, ldb, k0 > ka, c + j0, g->ldc)) {
                    sy_mxu_pack_b(bbuf, b, ldb, false, kn, j1 - j0);
                    sy_mxu_chunk(i1 - i0, j1 - j0, kp, ap, kp, bbuf, kp * 16, k0 > ka, c + j0, g->ldc);
                }
                continue;
            }
            if (g->b_rows) {
                g->b_rows(g->bctx, k0, kn, j0, j1, brows);
                sy_mxu_pack_b(bbuf, brows, j1 - j0, false, kn, j1 - j0);
            } else {
                pack_b_block(bbuf, g->b, g->ldb, g->tb, k0, kn, j0, j1 - j0);
            }
            for (int64_t r0 = i0; r0 < i1; r0 += MB)
                gemm_chunk(g, r0, sy_min64(MB, i1 - r0), j1 - j0, k0, bbuf, sy_mxu_pairs(kn) * 16, k0 > ka,
                           c + (r0 - i0) * g->ldc + j0, af, ap);
        }
    }
}

/* Rows [i0, i1), columns [j0, j1) of C, whole: every chunk, then bias and activation. */
static void gemm_rows(const gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, float *c, float *scratch) {
    if (g->K == 0)
        for (int64_t r = i0; r < i1; r++) memset(c + (r - i0) * g->ldc + j0, 0, (size_t)(j1 - j0) * sizeof(float));
    gemm_range(g, i0, i1, j0, j1, 0, g->K, c, scratch);
    sy_epilogue_f32(c + j0, i1 - i0, j1 - j0, g->ldc, g->bias ? g->bias + j0 : NULL, 0, g->act);
}

/* Parts: with B packed whole, rows of C in runs of whole tiles, and when that leaves parts to spare,
 * columns in runs of whole panels. When each part packs (or builds: b_rows) B's chunks on the way, every
 * row part would pack all of them again, and every column part packs A again: then columns only, a part
 * a thread (A, the smaller, packed once a thread: the Fashion-MNIST CNN's first backprop-filter, 9 rows,
 * took 1.2x as long on 2 threads in 4 column parts). The split never changes a result: each element of C
 * is summed by one part, whole. */
static void gemm_split(int64_t M, int64_t N, bool on_the_way, int threads, int64_t *pm, int64_t *pn) {
    if (on_the_way) {
        *pm = 1;
        *pn = sy_max64(1, sy_min64(sy_min64(ceil_div(N, 16), threads), MAX_PARTS));
        return;
    }
    *pm = sy_max64(1, sy_min64(MAX_PARTS, ceil_div(M, SY_SMALLGEMM_MR) / MIN_TILES));
    *pn = sy_max64(1, sy_min64(ceil_div(N, 16), MAX_PARTS / *pm));
}

static void gemm_part(void *ctx, int64_t part, float *scratch) {
    const gemm *g = ctx;
    int64_t pm = g->pm, pn = g->pn, t0, t1, q0, q1;
    sy_split_range(ceil_div(g->M, SY_SMALLGEMM_MR), (int)(part / pn), (int)pm, &t0, &t1);
    sy_split_range(ceil_div(g->N, 16), (int)(part % pn), (int)pn, &q0, &q1);
    int64_t i0 = t0 * SY_SMALLGEMM_MR, i1 = sy_min64(g->M, t1 * SY_SMALLGEMM_MR);
    gemm_rows(g, i0, i1, q0 * 16, sy_min64(g->N, q1 * 16), g->c + i0 * g->ldc, scratch);
}

/* ---- K split by chunks --------------------------------------------------------------
 * A product with few elements of C and long sums (a first layer's backprop-filter: 9 x 64 sums of every
 * output pixel) has too few columns to share among threads without each packing all of A, and its sums
 * cannot be split (that would reorder them) -- but its chunks' sums can: each is summed from 0 on its own.
 * So the parts take runs of chunks and store each chunk's sum in a buffer of its own, and C is then those
 * sums added in chunk order, which is the order the MXU adds them: the same bits as one part doing all. Up
 * to KSPLIT floats of sums (16 MB; the CNN's at batch 1,000: 12 MB). */
#define KSPLIT (4 << 20)

static int64_t ksplit_floats(int64_t M, int64_t N, int64_t K, bool whole) {
    int64_t chunks = ceil_div(K, SY_MXU_DEPTH);
    return !whole && M <= 12 && chunks >= 2 && chunks * M * N <= KSPLIT ? floats_aligned(chunks * M * N) : 0;
}

static int64_t ksplit_parts(const gemm *g) { return sy_min64(ceil_div(g->K, SY_MXU_DEPTH), MAX_PARTS); }

static void ksplit_part(void *ctx, int64_t part, float *scratch) {
    gemm m = *(const gemm *)ctx;
    int64_t c0, c1, size = m.M * m.N;
    sy_split_range(ceil_div(m.K, SY_MXU_DEPTH), (int)part, (int)ksplit_parts(&m), &c0, &c1);
    m.ldc = m.N;
    for (int64_t ch = c0; ch < c1; ch++)
        gemm_range(&m, 0, m.M, 0, m.N, ch * SY_MXU_DEPTH, sy_min64(m.K, (ch + 1) * SY_MXU_DEPTH), m.chunks + ch * size,
                   scratch);
}

static void ksplit_sum(void *ctx, int64_t row) {
    const gemm *g = ctx;
    int64_t chunks = ceil_div(g->K, SY_MXU_DEPTH), size = g->M * g->N;
    float *c = g->c + row * g->ldc;
    const float *s = g->chunks + row * g->N;
    memcpy(c, s, (size_t)g->N * sizeof *c);
    for (int64_t ch = 1; ch < chunks; ch++)
        for (int64_t j = 0; j < g->N; j++) c[j] += s[ch * size + j];
    sy_epilogue_f32(c, 1, g->N, g->ldc, g->bias, 0, g->act);
}

/* Workspace: B packed whole (when `whole`), or the chunks' sums (K split), then the parts' scratch. */
static int64_t gemm_ws_floats(int64_t M, int64_t N, int64_t K, bool whole, int threads) {
    int64_t pm, pn, bm, bn; /* either split: a bound on the buffers */
    gemm_split(M, N, false, threads, &pm, &pn);
    gemm_split(M, N, true, threads, &bm, &bn);
    int64_t parts = sy_max64(sy_max64(pm * pn, bm * bn), sy_min64(ceil_div(K, SY_MXU_DEPTH), MAX_PARTS));
    return (whole ? packed_b_floats(K, N) : 0) + ksplit_floats(M, N, K, whole) +
           sy_blocks_buffers(threads, parts) * scratch_floats(N);
}

/* C = A B on ex's threads; g->bp, when set, is the workspace and gets B packed whole first. */
static void gemm_run(const sy_exec *ex, gemm *g, float *ws) {
    if (g->M <= 0 || g->N <= 0) return;
    int64_t ks = ksplit_floats(g->M, g->N, g->K, g->bp != NULL);
    if (ks && ex->threads > 1) { /* (one thread: the parts' buffers and their sum would be a pass for nothing) */
        g->chunks = ws;
        sy_run_blocks(ex, ksplit_parts(g), ksplit_part, g, ws + ks, scratch_floats(g->N));
        sy_parallel_parts(ex, g->M, ksplit_sum, g);
        return;
    }
    if (g->bp) pack_b(ex, g);
    gemm_split(g->M, g->N, !g->bp, ex->threads, &g->pm, &g->pn);
    sy_run_blocks(ex, g->pm * g->pn, gemm_part, g, ws + (g->bp ? packed_b_floats(g->K, g->N) : 0), scratch_floats(g->N));
}

/* ---- A operands ------------------------------------------------------------------ */

typedef struct matrix {
    const float *a;
    int64_t lda;
    bool ta; /* A stored (K, M) */
} matrix;

static void pack_a_matrix(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *restrict dst) {
    const matrix *m = ctx;
    if (m->ta) { /* 16 rows of dst at a time, so that few of its lines are written at once (issue 16, MXU
                    recurrent products: with all MB rows at once this gather took 17% of imdb_lstm's sim training
                    profile, for the LSTM's weight gradient; 6% so) */
        for (int64_t r0 = 0; r0 < rows; r0 += 16) {
            int64_t nr = sy_min64(16, rows - r0);
            for (int64_t kk = 0; kk < kn; kk++) {
                const float *src = m->a + (k0 + kk) * m->lda + i0 + r0;
                for (int64_t r = 0; r < nr; r++) dst[(r0 + r) * kn + kk] = sy_bf16_round(src[r]);
            }
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

/* backprop-filter's A = cols^T: row t is window element t = (kh, kw, c) over output pixels [k0, k0 + kn),
 * gathered straight from x output row by output row (along one, consecutive pixels read x sw*C floats
 * apart), zeros where the window reaches into the padding. (im2col and a transpose took three times as
 * long on a first layer's 3 x 3 x 1 windows.) */
static void pack_a_taps(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *restrict dst) {
    const conv_src *s = ctx;
    const sy_conv_geom *g = s->g;
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = i0 + r, c = t % g->c, kw = t / g->c % g->kw, kh = t / g->c / g->kw;
        float *d = dst + r * kn;
        for (int64_t p = k0, seg; p < k0 + kn; p += seg, d += seg) {
            int64_t ow = p % g->ow, rest = p / g->ow, oh = rest % g->oh, n = rest / g->oh;
            int64_t ih = oh * g->sh - g->pt + kh;
            seg = sy_min64(k0 + kn - p, g->ow - ow);
            if (ih < 0 || ih >= g->h) {
                memset(d, 0, (size_t)seg * sizeof(float));
                continue;
            }
            /* pixels [qa, qb) of the segment have their tap inside the row: iw = (ow + q) sw - pl + kw */
            int64_t q0 = (ow * g->sw - g->pl + kw), qa = q0 >= 0 ? 0 : ceil_div(-q0, g->sw);
            int64_t qb = q0 > g->w - 1 ? 0 : (g->w - 1 - q0) / g->sw + 1;
            qa = sy_min64(qa, seg);
            qb = sy_max64(qa, sy_min64(qb, seg));
            int64_t step = g->sw * g->c;
            for (int64_t q = 0; q < qa; q++) d[q] = 0.0f;
            if (qa < qb) {
                const float *xr = s->x + ((n * g->h + ih) * g->w + q0 + qa * g->sw) * g->c + c; /* pixel qa's tap */
                if (step == 1) /* a first layer's single channel: a run GCC vectorises */
                    for (int64_t q = qa; q < qb; q++) d[q] = sy_bf16_round(xr[q - qa]);
                else
                    for (int64_t q = qa; q < qb; q++) d[q] = sy_bf16_round(xr[(q - qa) * step]);
            }
            for (int64_t q = qb; q < seg; q++) d[q] = 0.0f;
        }
    }
}

/* forward: rows are output pixels, columns window elements: im2col with rounding; or for a short window (a
 * first layer's 3 x 3 x 1), whose rows im2col builds a few floats at a time, pack_a_taps's rows (one per
 * window element, runs along output rows) transposed -- in the part of dst that A does not use (measured:
 * im2col took more time than the product on Fashion-MNIST's first layer) */
#define SHORT_WINDOW 32

static void pack_a_im2col(const void *ctx, int64_t i0, int64_t rows, int64_t k0, int64_t kn, float *restrict dst) {
    const conv_src *s = ctx;
    if (s->g->K > SHORT_WINDOW) {
        sy_im2col(dst, s->x, s->g, i0, rows, k0, k0 + kn, true);
        return;
    }
    float *restrict taps = dst + MB * SHORT_WINDOW; /* dst has MB x DEPTH floats, A takes rows x kn of them */
    pack_a_taps(ctx, k0, kn, i0, rows, taps);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < kn; t++) dst[r * kn + t] = taps[t * rows + r];
}

/* ---- matmul: c (M, N) = op(a) op(b) [+ bias], act ---------------------------- */

static void matmul_dims(const sy_kargs *k, int64_t *M, int64_t *N, int64_t *K) {
    *M = k->out_shape->dims[0];
    *N = k->out_shape->dims[1];
    *K = k->attr->matmul.ta ? k->in_shape[0].dims[0] : k->in_shape[0].dims[1];
}

/* B packed whole unless past WHOLE_B words (VGG's 4096 x 4096 Dense kernel): then packed chunk by chunk by each
 * part, for its columns */
static bool whole_b(int64_t K, int64_t N) { return packed_b_floats(K, N) <= WHOLE_B; }

/* A weight gradient, x^T dy with x (K, M) and few columns N (a Dense layer's units, the classes): computed
 * as C^T = dy^T x, so that x -- the large operand -- streams into B's panels row by row instead of being
 * gathered column by column into A's rows (measured: 3x faster on Fashion-MNIST's (10816, 10)); each
 * element's sum is the same, in the same order. C^T lands in the workspace, then transposed. */
static bool matmul_transposed(const sy_kargs *k, int64_t M, int64_t N) { return k->attr->matmul.ta && N < M; }

static size_t matmul_ws(const sy_kargs *k, int threads) {
    int64_t M, N, K;
    matmul_dims(k, &M, &N, &K);
    if (matmul_transposed(k, M, N))
        return (size_t)(floats_aligned(M * N) + gemm_ws_floats(N, M, K, whole_b(K, M), threads)) * sizeof(float);
    return (size_t)gemm_ws_floats(M, N, K, whole_b(K, N), threads) * sizeof(float);
}

static void matmul_fwd_f32_mxu(const sy_kargs *k) {
    int64_t M, N, K;
    matmul_dims(k, &M, &N, &K);
    bool ta = k->attr->matmul.ta, tb = k->attr->matmul.tb;
    const float *bias = k->n_in > 2 ? k->in[2] : NULL;
    int64_t lda = k->in_shape[0].dims[1], ldb = k->in_shape[1].dims[1];
    float *c = k->out, *ws = k->ws;
    if (matmul_transposed(k, M, N)) {
        matrix a = {k->in[1], ldb, !tb};
        float *ct = ws;
        ws += floats_aligned(M * N);
        gemm g = {N, M, K, pack_a_matrix, &a, whole_b(K, M) ? (uint32_t *)ws : NULL, k->in[0], lda, false, ct, M, NULL, SY_ACT_NONE, NULL, NULL, 0, 0, NULL};
        gemm_run(k->ex, &g, ws);
        sy_transpose(k->ex, c, ct, N, M);
        sy_epilogue_f32(c, M, N, N, bias, 0, k->attr->matmul.act);
        return;
    }
    matrix a = {k->in[0], lda, ta};
    gemm g = {M, N, K, pack_a_matrix, &a, whole_b(K, N) ? (uint32_t *)ws : NULL, k->in[1], ldb, tb, c, N, bias, k->attr->matmul.act, NULL, NULL, 0, 0, NULL};
    gemm_run(k->ex, &g, ws);
}

/* issue 16, MXU recurrent products: the scans' whole-sequence products (cpu/rnn.c) */
int64_t sy_mxu_gemm_ws_floats(int64_t M, int64_t N, int64_t K, int threads) {
    return gemm_ws_floats(M, N, K, whole_b(K, N), threads);
}

void sy_mxu_gemm(const sy_exec *ex, bool ta, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float *c, int64_t ldc, const float *bias, float *ws) {
    matrix am = {a, lda, ta};
    gemm g = {M, N, K, pack_a_matrix, &am, whole_b(K, N) ? (uint32_t *)ws : NULL, b, ldb, false, c, ldc, bias, SY_ACT_NONE, NULL, NULL, 0, 0, NULL};
    gemm_run(ex, &g, ws);
}

/* ---- conv2d ------------------------------------------------------------------------ */

static bool plain(const sy_attrs *a) {
    return sy_conv_groups(a) == 1 && sy_conv_dilation(a, 0) == 1 && sy_conv_dilation(a, 1) == 1;
}

static size_t conv2d_fwd_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    return (size_t)gemm_ws_floats(g.P, g.o, g.K, true, threads) * sizeof(float);
}

/* (x (N, H, W, C), w (KH, KW, C, O) [, bias (O)]) -> y (N, OH, OW, O) */
static void conv2d_fwd_f32_mxu(const sy_kargs *k) {
    if (!plain(k->attr)) {
        sy_sim_ref_kernel(SY_OP_CONV2D, SY_F32)->run(k);
        return;
    }
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    conv_src s = {&g, k->in[0]};
    gemm m = {g.P, g.o, g.K, pack_a_im2col, &s, k->ws, k->in[1], g.o, false, k->out, g.o, k->n_in > 2 ? k->in[2] : NULL,
              k->attr->conv.act, NULL, NULL, 0, 0, NULL};
    gemm_run(k->ex, &m, k->ws);
}

/* backprop-input: images in groups, each group's pixels in blocks of MB rows */
typedef struct bwd_data_job {
    const sy_conv_geom *g;
    gemm m; /* dy x w^T, C = the block's cols */
    float *dx;
    int64_t groups;
} bwd_data_job;

static int64_t bwd_data_groups(const sy_conv_geom *g) { return sy_max64(1, sy_min64(g->n, MAX_PARTS)); }
static int64_t bwd_data_scratch(const sy_conv_geom *g) { return scratch_floats(g->K) + floats_aligned(MB * g->K); }

static void bwd_data_group(void *ctx, int64_t group, float *scratch) {
    const bwd_data_job *j = ctx;
    const sy_conv_geom *g = j->g;
    int64_t n0, n1, img = g->h * g->w * g->c, opix = g->oh * g->ow;
    sy_split_range(g->n, (int)group, (int)j->groups, &n0, &n1);
    memset(j->dx + n0 * img, 0, (size_t)((n1 - n0) * img) * sizeof(float));
    float *cols = scratch + scratch_floats(g->K);
    for (int64_t p0 = n0 * opix; p0 < n1 * opix; p0 += MB) {
        int64_t rows = sy_min64(MB, n1 * opix - p0);
        gemm_rows(&j->m, p0, p0 + rows, 0, g->K, cols, scratch);
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
    matrix a = {k->in[0], g.o, false};
    bwd_data_job j = {&g, {g.P, g.K, g.o, pack_a_matrix, &a, k->ws, k->in[1], g.o, true, NULL, g.K, NULL, SY_ACT_NONE, NULL, NULL, 0, 0, NULL},
                      k->out, bwd_data_groups(&g)};
    pack_b(k->ex, &j.m);
    sy_run_blocks(k->ex, j.groups, bwd_data_group, &j, (float *)k->ws + packed_b_floats(g.o, g.K), bwd_data_scratch(&g));
}

/* B = dy is as large as the activations: packed chunk by chunk, never whole. With a short window (a first
 * layer's 3 x 3 x 1) dw has few rows, A = cols^T is gathered tap by tap and dy packed per chunk. A long
 * window (VGG's 3 x 3 x 64 = 576) would make that gather cost as much as the product -- each element of A
 * serves only O columns -- so the product runs transposed, dw^T (O, K) = dy^T (O, P) x cols (P, K): dy^T
 * is gathered (each element then serves K columns), cols comes from im2col in runs of KW x C floats
 * (measured on VGG16's 32x32x64 layer, one thread, the machine shared: 50 -> 43 ms) and is packed in pairs per
 * chunk. Either way each element of dw sums the same products in the same order; dw^T is transposed into dw at
 * the end. */
static bool bwd_filter_transposed(const sy_conv_geom *g) { return g->K > SHORT_WINDOW; }

static size_t conv2d_bwd_filter_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    if (bwd_filter_transposed(&g))
        return (size_t)(floats_aligned(g.o * g.K) + gemm_ws_floats(g.o, g.K, g.P, false, threads)) * sizeof(float);
    return (size_t)gemm_ws_floats(g.K, g.o, g.P, false, threads) * sizeof(float);
}

/* cols's rows [k0, k0 + kn) (output pixels), columns [j0, j1) (window elements), rounded */
static void b_rows_im2col(const void *ctx, int64_t k0, int64_t kn, int64_t j0, int64_t j1, float *dst) {
    const conv_src *s = ctx;
    sy_im2col(dst, s->x, s->g, k0, kn, j0, j1, true);
}

/* (x (N, H, W, C), dy (N, OH, OW, O)) -> dw (KH, KW, C, O) */
static void conv2d_bwd_filter_f32_mxu(const sy_kargs *k) {
    if (!plain(k->attr)) {
        sy_sim_ref_kernel(SY_OP_CONV2D_BACKPROP_FILTER, SY_F32)->run(k);
        return;
    }
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    conv_src s = {&g, k->in[0]};
    if (!bwd_filter_transposed(&g)) {
        gemm m = {g.K, g.o, g.P, pack_a_taps, &s, NULL, k->in[1], g.o, false, k->out, g.o, NULL, SY_ACT_NONE, NULL, NULL, 0, 0, NULL};
        gemm_run(k->ex, &m, k->ws);
        return;
    }
    float *dwt = k->ws, *dw = k->out;
    matrix dyt = {k->in[1], g.o, true};
    gemm m = {g.o, g.K, g.P, pack_a_matrix, &dyt, NULL, NULL, 0, false, dwt, g.K, NULL, SY_ACT_NONE, b_rows_im2col, &s, 0, 0, NULL};
    gemm_run(k->ex, &m, dwt + floats_aligned(g.o * g.K));
    sy_transpose(k->ex, dw, dwt, g.o, g.K);
}

/* ---- issue 16 + 21: conv -> pool fused, with the MXU's products -------------------------------------------
 * cpu/conv.c's conv2d_pool and conv2d_pool_backprop_filter (docs/design/fusion.md), their products the MXU's:
 * the forward's parts compute their conv rows as conv2d does here (the same GEMM, w packed whole first, each
 * element summed whole in the same order), then pool them in cache; the filter gradient is dw = cols^T x dy
 * with dy expanded from the pooled gradient chunk by chunk as B's rows (sy_conv_pool_unpool), each column
 * part summing its channels' bias gradient over all pixels in order on the way. So the conv's values and dw
 * are the unfused graph's bit for bit and the bias gradient its to float rounding (tests/test_fusion.c). Only
 * short windows fuse in training: a long window's dw is computed transposed, dy^T being A, which each column
 * part would expand again. */

typedef struct conv_rows_job {
    gemm m; /* C = cv, the part's block of conv rows */
} conv_rows_job;

static void conv_rows_mxu(const void *ctx, int64_t p0, int64_t rows, const float *bias, int act, float *cv,
                          float *scratch) {
    gemm m = ((const conv_rows_job *)ctx)->m;
    m.bias = bias;
    m.act = act;
    gemm_rows(&m, p0, p0 + rows, 0, m.N, cv, scratch);
}

static size_t conv2d_pool_ws(const sy_kargs *k, int threads) {
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    sy_conv_rows r = {conv_rows_mxu, NULL, scratch_floats(g.o), NULL};
    return (size_t)packed_b_floats(g.K, g.o) * sizeof(float) + sy_conv2d_pool_ws(k, threads, &r);
}

/* (x, w [, bias]) -> y (N, PH, PW, O); aux: max pooling's argmax in a training plan */
static void conv2d_pool_fwd_f32_mxu(const sy_kargs *k) {
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    conv_src s = {&g, k->in[0]};
    conv_rows_job j = {{g.P, g.o, g.K, pack_a_im2col, &s, k->ws, k->in[1], g.o, false, NULL, g.o, NULL, SY_ACT_NONE,
                        NULL, NULL, 1, 1, NULL}};
    pack_b(k->ex, &j.m);
    /* (one chunk: convpool.c may compute the pixels in registers, as this product would) */
    sy_conv_rows r = {conv_rows_mxu, &j, scratch_floats(g.o), g.K <= SY_MXU_DEPTH ? j.m.bp : NULL};
    sy_conv2d_pool_run(k, (float *)k->ws + packed_b_floats(g.K, g.o), &r);
}

typedef struct unpool_src {
    sy_pool_grad b;
    const sy_conv_geom *g;
    float *db; /* each chunk's bias gradient (chunks, O), when the bias has one */
} unpool_src;

/* dy's rows [k0, k0 + kn) (conv pixels, one chunk), channels [j0, j1), expanded; their sums into the chunk's
 * bias gradient */
static void b_rows_unpool(const void *ctx, int64_t k0, int64_t kn, int64_t j0, int64_t j1, float *dst) {
    const unpool_src *u = ctx;
    float *db = u->db ? u->db + k0 / SY_MXU_DEPTH * u->g->o + j0 : NULL;
    if (db) memset(db, 0, (size_t)(j1 - j0) * sizeof *db);
    sy_conv_pool_unpool(&u->b, u->g, dst, j1 - j0, k0, kn, j0, j1, db);
}

static int64_t db_floats(const sy_conv_geom *g) { return floats_aligned(ceil_div(g->P, SY_MXU_DEPTH) * g->o); }

static size_t conv2d_pool_bwd_filter_ws(const sy_kargs *k, int threads) {
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    return (size_t)(db_floats(&g) + gemm_ws_floats(g.K, g.o, g.P, false, threads)) * sizeof(float);
}

/* (x, dy [, y] [, argmax]) -> dw (KH, KW, C, O); aux: d bias (O), the chunks' sums added in order (so that
 * however the product is split, the same bits) */
static void conv2d_pool_bwd_filter_f32_mxu(const sy_kargs *k) {
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    unpool_src u = {sy_conv_pool_grad(k, &g), &g, k->aux ? (float *)k->ws : NULL};
    conv_src s = {&g, k->in[0]};
    gemm m = {g.K, g.o, g.P, pack_a_taps, &s, NULL, NULL, 0, false, k->out, g.o, NULL, SY_ACT_NONE, b_rows_unpool, &u,
              0, 0, NULL};
    gemm_run(k->ex, &m, (float *)k->ws + db_floats(&g));
    if (u.b.db) {
        memset(u.b.db, 0, (size_t)g.o * sizeof(float));
        for (int64_t ch = 0; ch < ceil_div(g.P, SY_MXU_DEPTH); ch++)
            for (int64_t c = 0; c < g.o; c++) u.b.db[c] += u.db[ch * g.o + c];
    }
    if (!u.b.round) return; /* bf16 ops (not fused here: sy_sim_fuses), rounded as conv.c's kernel rounds */
    sy_bf16_round_all(k->out, sy_shape_count(k->out_shape));
    if (u.b.db) sy_bf16_round_all(u.b.db, g.o);
}

/* sy_backend.fuses: float32 conv -> pools; in a training plan only with a short window (above). */
bool sy_sim_fuses(sy_op op, const sy_kargs *k) {
    if (op != SY_OP_CONV2D_POOL && op != SY_OP_CONV2D_POOL_BACKPROP_FILTER) return false;
    /* (a Dense layer's input gradient stays the MXU's product: no dense_dy) */
    if (k->dtype != SY_F32 || !plain(k->attr) || k->attr->conv.dense_dy) return false;
    const sy_shape *w = op == SY_OP_CONV2D_POOL ? &k->in_shape[1] : k->out_shape;
    sy_conv_geom g = sy_conv_geom_make(&k->in_shape[0], w, k->attr);
    return g.P > 0 && (!bwd_filter_transposed(&g) || (op == SY_OP_CONV2D_POOL && k->ex->inference));
}

const sy_kernel sy_sim_matmul = {matmul_fwd_f32_mxu, matmul_ws, NULL};
const sy_kernel sy_sim_conv2d = {conv2d_fwd_f32_mxu, conv2d_fwd_ws, NULL};
const sy_kernel sy_sim_conv2d_backprop_input = {conv2d_bwd_data_f32_mxu, conv2d_bwd_data_ws, NULL};
const sy_kernel sy_sim_conv2d_backprop_filter = {conv2d_bwd_filter_f32_mxu, conv2d_bwd_filter_ws,
                                                 NULL};
const sy_kernel sy_sim_conv2d_pool = {conv2d_pool_fwd_f32_mxu, conv2d_pool_ws, NULL};
const sy_kernel sy_sim_conv2d_pool_backprop_filter = {conv2d_pool_bwd_filter_f32_mxu, conv2d_pool_bwd_filter_ws,
                                                      NULL};
