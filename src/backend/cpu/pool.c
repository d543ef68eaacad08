/*
 * pool.c - max and average pooling on the cpu backend, forward and backward,
 * NHWC.
 *
 * In NHWC the channels of one pixel are contiguous, so every loop here runs
 * over the channels innermost: a window is reduced by streaming its pixels
 * (kh-major, then kw, as the reference kernel scans them) and combining
 * whole channel vectors, which GCC vectorises. Pooling does next to no
 * arithmetic per byte, so the aim is to touch each input and output byte
 * once, at memory speed.
 *
 * Forward. Each output row (n, oh) is independent; parts are runs of rows,
 * sized from the shape. The max starts at -inf and takes `v > acc ? v : acc`
 * at each valid pixel, the average sums the valid pixels in scan order and
 * divides by their count: exactly the reference's operations in the same
 * order, so the results match it bit for bit. Padded positions are simply
 * outside the clipped window [h0, h1) x [w0, w1).
 *
 * Backward. With stride < ksize windows overlap and several windows add into
 * one dx element, so parts must own disjoint pieces of dx: a part is one
 * (image, block of 64 channels), which owns dx[n, :, :, block]. Inside a
 * part windows are visited in (oh, ow) order, as the reference does, so each
 * dx element sums the same terms in the same order whatever the thread
 * count. The max-pool gradient recomputes the argmax from x rather than
 * comparing with y: per channel it tracks the best value and the window
 * position that first reached it (strict >, so the first maximum in scan
 * order wins, as TensorFlow's CPU kernel and the reference do, and ties
 * between zeros after a relu are common), then writes dy to that position.
 * The y input is not needed.
 *
 * When windows do not overlap (stride >= ksize, the usual 2x2/2 pool), every
 * dx element belongs to at most one window, so it is assigned instead of
 * accumulated and only the elements no window covers are zeroed first: dx is
 * written once instead of cleared, read back and written again. Otherwise
 * the part's piece of dx is cleared while it is in cache and windows add
 * into it.
 *
 * bfloat16 storage (issue 16, mixed_bfloat16): x, y, dy and dx may be
 * 2-byte bfloat16 buffers. The same loops run on their widened values --
 * the forward in a block of channels on the stack, stored rounded (a
 * maximum stores exactly) -- so the results are float32 storage's and the
 * plan's rounding. A bfloat16 dx is written only where windows do not
 * overlap (assigned, never accumulated).
 */
#include "cpu_internal.h"

typedef struct pool_geom {
    int64_t n, h, w, c;     /* input (N, H, W, C) */
    int64_t kh, kw;         /* window */
    int64_t oh, ow;         /* output */
    int64_t sh, sw, pt, pl; /* strides, leading padding */
} pool_geom;

static pool_geom pool_geometry(const sy_shape *x, const sy_attrs *a) {
    pool_geom g;
    g.n = x->dims[0];
    g.h = x->dims[1];
    g.w = x->dims[2];
    g.c = x->dims[3];
    g.kh = a->pool.ksize[0];
    g.kw = a->pool.ksize[1];
    g.sh = a->pool.stride[0];
    g.sw = a->pool.stride[1];
    sy_conv_out(g.h, g.kh, g.sh, a->pool.padding, &g.oh, &g.pt);
    sy_conv_out(g.w, g.kw, g.sw, a->pool.padding, &g.ow, &g.pl);
    return g;
}

/* The window of output (oh, ow), clipped to the image. */
static inline void window_rows(const pool_geom *g, int64_t oh, int64_t *h0, int64_t *h1) {
    *h0 = sy_max64(oh * g->sh - g->pt, 0);
    *h1 = sy_min64(oh * g->sh - g->pt + g->kh, g->h);
}
static inline void window_cols(const pool_geom *g, int64_t ow, int64_t *w0, int64_t *w1) {
    *w0 = sy_max64(ow * g->sw - g->pl, 0);
    *w1 = sy_min64(ow * g->sw - g->pl + g->kw, g->w);
}

/* ---- forward --------------------------------------------------------------- */

/* y (N, OH, OW, C) for output rows [r0, r1) of the flattened (N, OH). */
static void max_pool2d_fwd_f32_fast(float *restrict y, const float *restrict x, const pool_geom *g, int64_t r0,
                                    int64_t r1) {
    const int64_t C = g->c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->oh, oh = r % g->oh, h0, h1;
        window_rows(g, oh, &h0, &h1);
        const float *xi = x + n * g->h * g->w * C;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1;
            window_cols(g, ow, &w0, &w1);
            float *restrict yp = y + (r * g->ow + ow) * C;
            for (int64_t c = 0; c < C; c++) yp[c] = -INFINITY;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) {
                    const float *restrict xp = xi + (ih * g->w + iw) * C;
                    for (int64_t c = 0; c < C; c++) yp[c] = xp[c] > yp[c] ? xp[c] : yp[c];
                }
        }
    }
}

static void avg_pool2d_fwd_f32_fast(float *restrict y, const float *restrict x, const pool_geom *g, int64_t r0,
                                    int64_t r1) {
    const int64_t C = g->c;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->oh, oh = r % g->oh, h0, h1;
        window_rows(g, oh, &h0, &h1);
        const float *xi = x + n * g->h * g->w * C;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1;
            window_cols(g, ow, &w0, &w1);
            float *restrict yp = y + (r * g->ow + ow) * C;
            for (int64_t c = 0; c < C; c++) yp[c] = 0;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) {
                    const float *restrict xp = xi + (ih * g->w + iw) * C;
                    for (int64_t c = 0; c < C; c++) yp[c] += xp[c];
                }
            int64_t cnt = (h1 - h0) * (w1 - w0);
            float div = (float)(cnt > 0 ? cnt : 1);
            for (int64_t c = 0; c < C; c++) yp[c] = yp[c] / div;
        }
    }
}

/* Either pooling with x or y stored as bfloat16: the loops above, by blocks of CBLK channels on the
 * stack. */
#define CBLK 64
static inline __attribute__((always_inline)) void
pool2d_fwd_bf16(void *restrict y, const void *restrict x, const pool_geom *g, int64_t r0,
                int64_t r1, bool is_max, bool xb, bool yb) {
    const int64_t C = g->c;
    float acc[CBLK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->oh, oh = r % g->oh, h0, h1;
        window_rows(g, oh, &h0, &h1);
        int64_t xi = n * g->h * g->w * C;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1;
            window_cols(g, ow, &w0, &w1);
            int64_t yp = (r * g->ow + ow) * C;
            for (int64_t c0 = 0; c0 < C; c0 += CBLK) {
                int64_t cn = sy_min64(CBLK, C - c0);
                for (int64_t c = 0; c < cn; c++) acc[c] = is_max ? -INFINITY : 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        int64_t xp = xi + (ih * g->w + iw) * C + c0;
                        for (int64_t c = 0; c < cn; c++) {
                            float v = sy_ldf(x, xp + c, xb);
                            acc[c] = is_max ? (v > acc[c] ? v : acc[c]) : acc[c] + v;
                        }
                    }
                float div = (float)((h1 - h0) * (w1 - w0) > 0 ? (h1 - h0) * (w1 - w0) : 1);
                if (!is_max)
                    for (int64_t c = 0; c < cn; c++) acc[c] = acc[c] / div;
                for (int64_t c = 0; c < cn; c++) sy_stf(y, yp + c0 + c, acc[c], yb);
            }
        }
    }
}

/* About this many input-element visits per part: large enough that a part
 * outweighs handing it to a thread. */
#define FWD_GRAIN 32768

typedef struct pool_job {
    const sy_kargs *k;
    pool_geom g;
    bool is_max;
    int64_t rows, parts; /* forward: output rows (N * OH) in `parts` runs */
    int64_t blocks;      /* backward: channel blocks per image */
} pool_job;

static void pool_fwd_part(void *ctx, int64_t part) {
    const pool_job *j = ctx;
    int64_t r0, r1;
    sy_split_range(j->rows, (int)part, (int)j->parts, &r0, &r1);
    bool xb = j->k->in_dtype[0] == SY_BF16, yb = j->k->dtype == SY_BF16;
    if (xb && yb && j->is_max)
        pool2d_fwd_bf16(j->k->out, j->k->in[0], &j->g, r0, r1, true, true, true);
    else if (xb && yb)
        pool2d_fwd_bf16(j->k->out, j->k->in[0], &j->g, r0, r1, false, true, true);
    else if (xb || yb)
        pool2d_fwd_bf16(j->k->out, j->k->in[0], &j->g, r0, r1, j->is_max, xb, yb);
    else if (j->is_max)
        max_pool2d_fwd_f32_fast(j->k->out, j->k->in[0], &j->g, r0, r1);
    else
        avg_pool2d_fwd_f32_fast(j->k->out, j->k->in[0], &j->g, r0, r1);
}

static void pool_fwd(const sy_kargs *k, bool is_max) {
    pool_job j = {.k = k, .g = pool_geometry(&k->in_shape[0], k->attr), .is_max = is_max};
    j.rows = j.g.n * j.g.oh;
    int64_t work = j.rows * j.g.ow * j.g.c * j.g.kh * j.g.kw;
    j.parts = sy_max64(1, sy_min64(sy_min64(j.rows, work / FWD_GRAIN), 1 << 20));
    sy_parallel_parts(k->ex, j.parts, pool_fwd_part, &j);
}

static void max_pool2d_run(const sy_kargs *k) { pool_fwd(k, true); }
static void avg_pool2d_run(const sy_kargs *k) { pool_fwd(k, false); }

/* ---- backward ------------------------------------------------------------- */

/* Channels per backward part (CBLK), which is also the width of the per-channel state a max-pool
 * window keeps on the stack. */

static bool windows_overlap(const pool_geom *g) { return g->sh < g->kh || g->sw < g->kw; }

/* Does some window cover input row ih (column iw)? Only asked when windows
 * do not overlap, so the window is the one starting at or before it. */
static bool row_covered(const pool_geom *g, int64_t ih) {
    int64_t o = (ih + g->pt) / g->sh;
    return o < g->oh && ih + g->pt - o * g->sh < g->kh;
}
static bool col_covered(const pool_geom *g, int64_t iw) {
    int64_t o = (iw + g->pl) / g->sw;
    return o < g->ow && iw + g->pl - o * g->sw < g->kw;
}

/* Zero channels [c0, c0 + cn) of image dxi (elements of es bytes): all pixels if `all`, else the
 * pixels no window covers. */
static void clear_block(char *dxi, size_t es, const pool_geom *g, int64_t c0, int64_t cn,
                        bool all) {
    if (all && cn == g->c) {
        memset(dxi, 0, (size_t)(g->h * g->w * g->c) * es);
        return;
    }
    for (int64_t ih = 0; ih < g->h; ih++) {
        bool row = all || !row_covered(g, ih);
        for (int64_t iw = 0; iw < g->w; iw++)
            if (row || !col_covered(g, iw))
                memset(dxi + ((ih * g->w + iw) * g->c + c0) * es, 0, (size_t)cn * es);
    }
}

/* dx (N, H, W, C) channels [c0, c0 + cn) of image n, from x and dy (N, OH, OW, C); xb, dyb, dxb:
 * which are stored as bfloat16 (constants at each call, so each variant compiles to its own plain
 * loops; a bfloat16 dx only where windows do not overlap). */
static inline __attribute__((always_inline)) void
max_pool2d_bwd(void *restrict dx, const void *restrict x, const void *restrict dy,
               const pool_geom *g, int64_t n, int64_t c0, int64_t cn, bool xb, bool dyb, bool dxb) {
    const int64_t C = g->c;
    const bool assign = !windows_overlap(g);
    SY_ASSERT(assign || !dxb);
    int64_t dxi = n * g->h * g->w * C, xi = n * g->h * g->w * C;
    clear_block((char *)dx + dxi * (dxb ? 2 : 4), dxb ? 2 : 4, g, c0, cn, !assign);
    float best[CBLK];
    int32_t arg[CBLK];
    for (int64_t oh = 0; oh < g->oh; oh++) {
        int64_t h0, h1;
        window_rows(g, oh, &h0, &h1);
        for (int64_t ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1;
            window_cols(g, ow, &w0, &w1);
            if (h0 >= h1 || w0 >= w1) continue;
            int64_t dyp = ((n * g->oh + oh) * g->ow + ow) * C + c0;
            int32_t p = 0;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++, p++) {
                    int64_t xp = xi + (ih * g->w + iw) * C + c0;
                    if (p == 0) {
                        for (int64_t c = 0; c < cn; c++) {
                            best[c] = sy_ldf(x, xp + c, xb);
                            arg[c] = 0;
                        }
                        continue;
                    }
                    for (int64_t c = 0; c < cn; c++) {
                        float v = sy_ldf(x, xp + c, xb);
                        bool gt = v > best[c];
                        best[c] = gt ? v : best[c];
                        arg[c] = gt ? p : arg[c];
                    }
                }
            p = 0;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++, p++) {
                    int64_t dxp = dxi + (ih * g->w + iw) * C + c0;
                    if (assign)
                        for (int64_t c = 0; c < cn; c++)
                            sy_stf(dx, dxp + c, arg[c] == p ? sy_ldf(dy, dyp + c, dyb) : 0.0f, dxb);
                    else
                        for (int64_t c = 0; c < cn; c++)
                            ((float *)dx)[dxp + c] += arg[c] == p ? sy_ldf(dy, dyp + c, dyb) : 0.0f;
                }
        }
    }
}

/* dx (N, H, W, C) channels [c0, c0 + cn) of image n, from dy (N, OH, OW, C): each window spreads dy
 * / (its valid count) over its valid pixels. dyb, dxb as above. */
static inline __attribute__((always_inline)) void
avg_pool2d_bwd(void *restrict dx, const void *restrict dy, const pool_geom *g, int64_t n,
               int64_t c0, int64_t cn, bool dyb, bool dxb) {
    const int64_t C = g->c;
    const bool assign = !windows_overlap(g);
    SY_ASSERT(assign || !dxb);
    int64_t dxi = n * g->h * g->w * C;
    clear_block((char *)dx + dxi * (dxb ? 2 : 4), dxb ? 2 : 4, g, c0, cn, !assign);
    for (int64_t oh = 0; oh < g->oh; oh++) {
        int64_t h0, h1;
        window_rows(g, oh, &h0, &h1);
        for (int64_t ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1;
            window_cols(g, ow, &w0, &w1);
            if (h0 >= h1 || w0 >= w1) continue;
            int64_t dyp = ((n * g->oh + oh) * g->ow + ow) * C + c0;
            const float inv = 1.0f / (float)((h1 - h0) * (w1 - w0));
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) {
                    int64_t dxp = dxi + (ih * g->w + iw) * C + c0;
                    if (assign)
                        for (int64_t c = 0; c < cn; c++)
                            sy_stf(dx, dxp + c, sy_ldf(dy, dyp + c, dyb) * inv, dxb);
                    else
                        for (int64_t c = 0; c < cn; c++)
                            ((float *)dx)[dxp + c] += sy_ldf(dy, dyp + c, dyb) * inv;
                }
        }
    }
}

static void pool_bwd_part(void *ctx, int64_t part) {
    const pool_job *j = ctx;
    const sy_kargs *k = j->k;
    int64_t n = part / j->blocks, c0 = part % j->blocks * CBLK, cn = sy_min64(CBLK, j->g.c - c0);
    bool xb = k->in_dtype[0] == SY_BF16, dyb = k->in_dtype[j->is_max ? 2 : 0] == SY_BF16,
         dxb = k->dtype == SY_BF16;
    if (!j->is_max) {
        if (dyb && dxb)
            avg_pool2d_bwd(k->out, k->in[0], &j->g, n, c0, cn, true, true);
        else if (dyb || dxb)
            avg_pool2d_bwd(k->out, k->in[0], &j->g, n, c0, cn, dyb, dxb);
        else
            avg_pool2d_bwd(k->out, k->in[0], &j->g, n, c0, cn, false, false);
    } else if (xb && dyb && dxb) { /* mixed_bfloat16's usual case */
        max_pool2d_bwd(k->out, k->in[0], k->in[2], &j->g, n, c0, cn, true, true, true);
    } else if (xb || dyb || dxb) {
        max_pool2d_bwd(k->out, k->in[0], k->in[2], &j->g, n, c0, cn, xb, dyb, dxb);
    } else {
        max_pool2d_bwd(k->out, k->in[0], k->in[2], &j->g, n, c0, cn, false, false, false);
    }
}

/* max: inputs (x, y, dy), dx shaped like x; avg: input dy, dx of out_shape. */
static void pool_bwd(const sy_kargs *k, bool is_max) {
    pool_job j = {.k = k, .g = pool_geometry(is_max ? &k->in_shape[0] : k->out_shape, k->attr), .is_max = is_max};
    if (j.g.c <= 0) return;
    j.blocks = (j.g.c + CBLK - 1) / CBLK;
    sy_parallel_parts(k->ex, j.g.n * j.blocks, pool_bwd_part, &j);
}

static void max_pool2d_grad_run(const sy_kargs *k) { pool_bwd(k, true); }
static void avg_pool2d_grad_run(const sy_kargs *k) { pool_bwd(k, false); }

/* issue 16, bfloat16 storage: every operand, but a gradient into overlapping windows stays float32
 * (it sums) */
static uint32_t pool_bf16_io(const sy_kargs *k) {
    uint32_t io = SY_BF16_IN(0) | SY_BF16_IN(1) | SY_BF16_IN(2) | SY_BF16_OUT;
    if (k->op == SY_OP_MAX_POOL2D_GRAD || k->op == SY_OP_AVG_POOL2D_GRAD) {
        pool_geom g =
            pool_geometry(k->op == SY_OP_MAX_POOL2D_GRAD ? &k->in_shape[0] : k->out_shape, k->attr);
        if (windows_overlap(&g)) io &= ~SY_BF16_OUT;
    }
    return io;
}

const sy_kernel sy_cpu_max_pool2d = {max_pool2d_run, NULL, pool_bf16_io};
const sy_kernel sy_cpu_avg_pool2d = {avg_pool2d_run, NULL, pool_bf16_io};
const sy_kernel sy_cpu_max_pool2d_grad = {max_pool2d_grad_run, NULL, pool_bf16_io};
const sy_kernel sy_cpu_avg_pool2d_grad = {avg_pool2d_grad_run, NULL, pool_bf16_io};
