/*
 * conv.c - fast float32 conv2d kernels: forward, backprop-input, backprop-filter.
 *
 * All three are products of the im2col matrix -- row p holds the window of
 * output pixel p, in (KH, KW, C) order, so it is (P, K) with P = N*OH*OW and
 * K = KH*KW*C -- with the filter viewed as (K, O):
 *
 *   forward          y (P, O)  = cols (P, K) x w (K, O), then bias and act
 *   backprop-input   dx        = col2im(dy (P, O) x w^T (O, K))
 *   backprop-filter  dw (K, O) = cols^T (K, P) x dy (P, O)
 *
 * The matrix is never built whole. Pixels are taken in blocks of rows sized
 * so that a block's slice of cols stays in L2 (COLS_BYTES); each block is
 * im2col'd into a per-thread scratch buffer from the plan's workspace and
 * multiplied with one single-threaded sgemm. Within a kernel row the window
 * is KW*C consecutive floats of x (NHWC), so im2col is a memcpy-like run
 * with zeros for the padding.
 *
 * Windows shorter than DIRECT_K (a first layer over 1-3 input channels:
 * K = 9 for the Fashion-MNIST CNN) make im2col + GEMM move more bytes than
 * it multiplies and run the GEMM at a third of its peak. For those, direct
 * kernels read each window straight from x through an offset table and keep
 * a tile of TILE pixels x NV vectors of output channels in registers
 * (measured on AVX2, forward at batch 128: 42 GFLOP/s against 23 through
 * im2col; docs/design/gemm.md). Interior pixels of one output row are a
 * "run" whose windows are stride*C floats apart; pixels whose windows touch
 * the padding are im2col'd into a small border buffer and read through the
 * identity table.
 *
 * Backprop-input multiplies dy by w^T and scatters each row back with
 * col2im; images are split into groups so that each thread owns the dx of
 * whole images (no two threads add into one pixel). Backprop-filter splits
 * the pixels into R ranges (each into its own partial dw, summed at the end
 * in a fixed order) and the window into S column slabs.
 *
 * Every split depends on the shapes only, never on the thread count, so the
 * result is bitwise the same on any number of threads.
 *
 * 3x3 stride-1 convs with enough channels (VGG's, ResNet's) take Winograd
 * F(4x4, 3x3) instead, in all three directions (winograd.c: 4x fewer
 * multiplications; $SYSTOLIC_WINOGRAD=0 turns it off).
 *
 * Issue 21's fused conv -> pool ops (conv2d_pool and its filter gradient) are
 * in convpool.c, on the same paths (conv_internal.h).
 *
 * All of this is for plain convs. A depthwise conv (groups = C, one input
 * channel per group: DepthwiseConv2D, SeparableConv2D) goes to depthwise.c;
 * other grouped or dilated convs run the ref kernels (see conv_general).
 */
#include "conv_internal.h"

/* Blocking, chosen by measurement on the benchmark's shapes: */
#define COLS_BYTES (512 * 1024) /* im2col block: stays in L2 */
#define MIN_ROWS 64             /* pixels per im2col block, at least */
#define TARGET_BLOCKS 16        /* forward blocks to aim for (threads up to 16 find work) */
#define R_ROWS 1024             /* backprop-filter: pixels per partial-dw range, at least */
#define MAX_PARTS 16            /* backprop-filter: ranges x slabs, at most */
#define S_MIN_ROWS 64           /* backprop-filter: window columns per slab, at least */


sy_conv_geom sy_conv_geom_make(const sy_shape *x, const sy_shape *w, const sy_attrs *a) {
    geom g;
    g.n = x->dims[0];
    g.h = x->dims[1];
    g.w = x->dims[2];
    g.c = x->dims[3];
    g.kh = w->dims[0];
    g.kw = w->dims[1];
    g.o = w->dims[3];
    g.sh = a->conv.stride[0];
    g.sw = a->conv.stride[1];
    sy_conv_out(g.h, g.kh, g.sh, a->conv.padding, &g.oh, &g.pt);
    sy_conv_out(g.w, g.kw, g.sw, a->conv.padding, &g.ow, &g.pl);
    g.P = g.n * g.oh * g.ow;
    g.K = g.kh * g.kw * g.c;
    return g;
}


/* Rows of the im2col matrix per block when it is `width` floats wide. */
int64_t sy_conv_block_rows(int64_t P, int64_t width, int64_t target_blocks) {
    int64_t pb = COLS_BYTES / (int64_t)sizeof(float) / sy_max64(width, 1);
    pb = clamp64(pb, MIN_ROWS, sy_max64(MIN_ROWS, ceil_div(P, target_blocks)));
    return sy_max64(1, sy_min64(pb, P));
}

/* ---- im2col ---------------------------------------------------------------
 * Row r of the im2col matrix holds the window of output pixel p0 + r,
 * columns [k0, k1) of its (KH, KW, C) layout. Within one kernel row kh the
 * window is KW * C consecutive floats of x (consecutive input columns are
 * consecutive in NHWC), so each kernel row is a zero run, a copy and a zero
 * run. */

/* round: the sim backend's MXU operands, rounded to bfloat16 as they are copied
 * (docs/design/mxu-numerics.md); xb: x is stored as bfloat16 (issue 16, bfloat16 storage), widened
 * as it is copied. */
static inline __attribute__((always_inline)) void seg_put(float *restrict d, const void *restrict x,
                                                          int64_t base, int64_t a, int64_t b,
                                                          int64_t vlo, int64_t vhi, bool round,
                                                          bool xb) {
    int64_t z = sy_min64(b, sy_max64(a, vlo)), e = sy_max64(z, sy_min64(b, vhi));
    for (int64_t j = a; j < z; j++) d[j - a] = 0;
    if (round)
        for (int64_t j = z; j < e; j++) d[j - a] = sy_bf16_round(((const float *)x)[base + j]);
    else
        for (int64_t j = z; j < e; j++) d[j - a] = sy_ldf(x, base + j, xb);
    for (int64_t j = e; j < b; j++) d[j - a] = 0;
}

static inline __attribute__((always_inline)) void im2col(float *restrict cols,
                                                         const void *restrict x, const geom *g,
                                                         int64_t p0, int64_t rows, int64_t k0,
                                                         int64_t k1, bool round, bool xb) {
    int64_t rowlen = g->kw * g->c, nk = k1 - k0;
    int64_t ow = p0 % g->ow, t = p0 / g->ow, oh = t % g->oh, n = t / g->oh;
    int64_t kh0 = k0 / rowlen, kh1 = ceil_div(k1, rowlen);
    for (int64_t r = 0; r < rows; r++) {
        float *dst = cols + r * nk;
        int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
        int64_t vlo = iw0 < 0 ? -iw0 * g->c : 0;
        int64_t vhi = (iw0 + g->kw > g->w ? g->w - iw0 : g->kw) * g->c;
        for (int64_t kh = kh0; kh < kh1; kh++) {
            int64_t a = sy_max64(k0 - kh * rowlen, 0), b = sy_min64(k1 - kh * rowlen, rowlen);
            float *d = dst + kh * rowlen + a - k0;
            int64_t ih = ih0 + kh;
            if (ih < 0 || ih >= g->h) {
                memset(d, 0, (size_t)(b - a) * sizeof *d);
                continue;
            }
            seg_put(d, x, ((n * g->h + ih) * g->w + iw0) * g->c, a, b, vlo, vhi, round, xb);
        }
        if (++ow == g->ow) {
            ow = 0;
            if (++oh == g->oh) {
                oh = 0;
                n++;
            }
        }
    }
}

void sy_im2col(float *restrict cols, const float *restrict x, const sy_conv_geom *g, int64_t p0,
               int64_t rows, int64_t k0, int64_t k1, bool bf16) {
    if (bf16)
        im2col(cols, x, g, p0, rows, k0, k1, true, false);
    else
        im2col(cols, x, g, p0, rows, k0, k1, false, false);
}

/* issue 16, bfloat16 storage: sy_im2col of x stored as bfloat16 (xb), or float32 */
static void im2col_any(float *restrict cols, const void *restrict x, bool xb, const geom *g,
                       int64_t p0, int64_t rows, int64_t k0, int64_t k1) {
    if (xb)
        im2col(cols, x, g, p0, rows, k0, k1, false, true);
    else
        im2col(cols, x, g, p0, rows, k0, k1, false, false);
}

/* The adjoint: dx += cols scattered back, window by window, in pixel order. */
void sy_col2im_add(float *restrict dx, const float *restrict cols, const sy_conv_geom *g, int64_t p0, int64_t rows) {
    int64_t rowlen = g->kw * g->c;
    int64_t ow = p0 % g->ow, t = p0 / g->ow, oh = t % g->oh, n = t / g->oh;
    for (int64_t r = 0; r < rows; r++) {
        const float *src = cols + r * g->K;
        int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
        int64_t vlo = iw0 < 0 ? -iw0 * g->c : 0;
        int64_t vhi = (iw0 + g->kw > g->w ? g->w - iw0 : g->kw) * g->c;
        for (int64_t kh = 0; kh < g->kh; kh++) {
            int64_t ih = ih0 + kh;
            if (ih < 0 || ih >= g->h) continue;
            float *d = dx + ((n * g->h + ih) * g->w + iw0) * g->c;
            const float *s = src + kh * rowlen;
            for (int64_t j = vlo; j < vhi; j++) d[j] += s[j];
        }
        if (++ow == g->ow) {
            ow = 0;
            if (++oh == g->oh) {
                oh = 0;
                n++;
            }
        }
    }
}

/* ---- running blocks with a scratch buffer per thread ----------------------- */

typedef struct blocks_job {
    sy_block_fn fn;
    void *ctx;
    int64_t blocks, buf_floats;
    float *buf;
} blocks_job;

static void blocks_thread(void *arg, int index, int count) {
    const blocks_job *j = arg;
    int64_t b, e;
    sy_split_range(j->blocks, index, count, &b, &e);
    float *buf = j->buf ? j->buf + index * j->buf_floats : NULL;
    for (int64_t i = b; i < e; i++) j->fn(j->ctx, i, buf);
}

int64_t sy_blocks_buffers(int threads, int64_t blocks) { return sy_max64(1, sy_min64(threads, blocks)); }

void sy_run_blocks(const sy_exec *ex, int64_t blocks, sy_block_fn fn, void *ctx, float *buf, int64_t buf_floats) {
    if (blocks <= 0) return;
    blocks_job j = {fn, ctx, blocks, buf_floats, buf};
    sy_exec_parallel(ex, (int)sy_blocks_buffers(ex->threads, blocks), blocks_thread, &j);
}

/* ---- direct kernels for short windows -------------------------------------
 * When the window is short (K = KH*KW*C <= DIRECT_K), im2col + GEMM moves
 * more bytes than it multiplies. These kernels read each window straight from
 * x through an offset table instead (an "indirect" convolution). Output
 * pixels are taken as runs: the interior pixels of one output row have their
 * windows `step` floats apart in x, element t of a window at off[t] from its
 * corner; consecutive pixels whose windows overlap the padding are im2col'd
 * into a small buffer and read through the identity table. Vectors run
 * along O. */

typedef struct run {
    const float *src;   /* window corner of the first pixel */
    const int64_t *off; /* element t of a window is at src[off[t]] */
    int64_t step, n;    /* n pixels, windows `step` floats apart */
} run;

/* off_in[t]: offset of window element t = (kh, kw, c) from the window's corner; off_id[t] = t. */
static void offsets(int64_t *off_in, int64_t *off_id, const geom *g) {
    for (int64_t kh = 0, t = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++)
            for (int64_t c = 0; c < g->c; c++, t++) {
                off_in[t] = (kh * g->w + kw) * g->c + c;
                off_id[t] = t;
            }
}

/* Each output row gives at most 3 runs (left border, interior, right border). */
static int64_t max_runs(const geom *g, int64_t rows) { return 3 * sy_min64(rows, ceil_div(rows, g->ow) + 1); }

/* Scratch floats for the runs of `rows` pixels. */
static int64_t runs_floats(const geom *g, int64_t rows) {
    return floats_aligned(max_runs(g, rows) * (int64_t)(sizeof(run) / sizeof(float)));
}

/* The runs of output pixels [p0, p0 + rows), in pixel order; border windows
 * go to `border` (rows * K floats at most). Returns the number of runs. */
static int64_t runs_of(run *rn, float *border, const geom *g, const float *x, const int64_t *off_in,
                       const int64_t *off_id, int64_t p0, int64_t rows) {
    /* output columns [a, b) have their windows inside x horizontally */
    int64_t a = clamp64(ceil_div(g->pl, g->sw), 0, g->ow);
    int64_t b = g->w - g->kw + g->pl < 0 ? 0 : clamp64((g->w - g->kw + g->pl) / g->sw + 1, a, g->ow);
    int64_t nr = 0, p = p0, end = p0 + rows;
    while (p < end) {
        int64_t ow = p % g->ow, t = p / g->ow, oh = t % g->oh, n = t / g->oh;
        int64_t row_end = sy_min64(end, p - ow + g->ow), ih0 = oh * g->sh - g->pt;
        bool inside = ih0 >= 0 && ih0 + g->kh <= g->h;
        int64_t cuts[3] = {inside ? sy_min64(row_end, p - ow + a) : row_end, inside ? p - ow + b : row_end, row_end};
        for (int i = 0; i < 3; i++) {
            int64_t q = sy_max64(p, sy_min64(cuts[i], row_end));
            if (q == p) continue;
            if (i == 1) {
                int64_t iw0 = (p - (t * g->ow)) * g->sw - g->pl;
                rn[nr++] = (run){x + ((n * g->h + ih0) * g->w + iw0) * g->c, off_in, g->sw * g->c, q - p};
            } else {
                sy_im2col(border, x, g, p, q - p, 0, g->K, false);
                rn[nr++] = (run){border, off_id, g->K, q - p};
                border += (q - p) * g->K;
            }
            p = q;
        }
    }
    return nr;
}

/* y (np pixels, nv vectors) = bias + windows x w, the np windows `step`
 * apart. np and nv are constants at every call, so the accumulators live in
 * registers. bf16 (issue 16): y is bfloat16, round(act(round(windows x w +
 * bias))) as sy_bf16_epilogue computes it (act none or relu). */
static inline __attribute__((always_inline)) void
fwd_tile(void *restrict y, int64_t ldy, const float *restrict src, int64_t step,
         const int64_t *restrict off, int64_t K, const float *restrict w, int64_t ldw,
         const float *bias, bool relu, bool bf16, int np, int nv) {
    vf acc[TILE][NV];
    UNROLL for (int v = 0; v < nv; v++) {
        vf b = bias && !bf16 ? vld(bias + v * VL) : (vf){0};
        UNROLL for (int i = 0; i < np; i++) acc[i][v] = b;
    }
    for (int64_t t = 0; t < K; t++) {
        vf wv[NV];
        UNROLL for (int v = 0; v < nv; v++) {
            wv[v] = vld(w + t * ldw + v * VL);
            IN_REGISTER(wv[v]);
        }
        const float *s = src + off[t];
        UNROLL for (int i = 0; i < np; i++) {
            float xs = s[i * step];
            UNROLL for (int v = 0; v < nv; v++) acc[i][v] += xs * wv[v];
        }
    }
    if (bf16) { /* sy_bf16_epilogue's roundings, in registers: the bias after the sum */
        UNROLL for (int v = 0; v < nv; v++) {
            vf b = bias ? vld(bias + v * VL) : (vf){0};
            UNROLL for (int i = 0; i < np; i++) {
                /* no bias, no + 0: it would turn a -0 into 0 */
                vf t = vbf16_round(bias ? acc[i][v] + b : acc[i][v]);
                vst_bf16((uint16_t *)y + i * ldy + v * VL, relu ? vrelu(t) : t);
            }
        }
        return;
    }
    UNROLL for (int i = 0; i < np; i++) UNROLL for (int v = 0; v < nv; v++)
        vst((float *)y + i * ldy + v * VL, relu ? vrelu(acc[i][v]) : acc[i][v]);
}

/* dw rows [k0, k0 + ks) x nv vectors += windows^T x dy over the pixels of
 * `nr` runs (dy row by row; dyb: dy stored as bfloat16, widened as it is
 * loaded, issue 16). */
static inline __attribute__((always_inline)) void bf_tile(float *restrict dw, int64_t ldw,
                                                          const run *rn, int64_t nr, int64_t k0,
                                                          const void *restrict dy, int64_t ldy,
                                                          int ks, int nv, bool dyb) {
    vf acc[TILE][NV];
    UNROLL for (int k = 0; k < ks; k++)
        UNROLL for (int v = 0; v < nv; v++) acc[k][v] = (vf){0};
    for (int64_t r = 0; r < nr; r++) {
        const float *s = rn[r].src;
        int64_t o[TILE];
        UNROLL for (int k = 0; k < ks; k++) o[k] = rn[r].off[k0 + k];
        for (int64_t p = 0; p < rn[r].n;
             p++, s += rn[r].step, dy = (const char *)dy + ldy * (dyb ? 2 : 4)) {
            vf d[NV];
            UNROLL for (int v = 0; v < nv; v++) {
                d[v] =
                    dyb ? vld_bf16((const uint16_t *)dy + v * VL) : vld((const float *)dy + v * VL);
                IN_REGISTER(d[v]);
            }
            UNROLL for (int k = 0; k < ks; k++) {
                float xs = s[o[k]];
                UNROLL for (int v = 0; v < nv; v++) acc[k][v] += xs * d[v];
            }
        }
    }
    UNROLL for (int k = 0; k < ks; k++)
        UNROLL for (int v = 0; v < nv; v++) vst(dw + k * ldw + v * VL, vld(dw + k * ldw + v * VL) + acc[k][v]);
}

/* One function per tile shape, so that each gets its own register allocation. */
#define TILE_FNS(N, V)                                                                             \
    static __attribute__((noinline)) void fwd_tile_##N##x##V(                                      \
        void *restrict y, int64_t ldy, const float *restrict src, int64_t step,                    \
        const int64_t *restrict off, int64_t K, const float *restrict w, int64_t ldw,              \
        const float *bias, bool relu, bool bf16) {                                                 \
        fwd_tile(y, ldy, src, step, off, K, w, ldw, bias, relu, bf16, N, V);                       \
    }                                                                                              \
    static __attribute__((noinline)) void bf_tile_##N##x##V(                                       \
        float *restrict dw, int64_t ldw, const run *rn, int64_t nr, int64_t k0,                    \
        const void *restrict dy, int64_t ldy) {                                                    \
        bf_tile(dw, ldw, rn, nr, k0, dy, ldy, N, V, false);                                        \
    }                                                                                              \
    static __attribute__((noinline)) void bf_tile_bf16_##N##x##V(                                  \
        float *restrict dw, int64_t ldw, const run *rn, int64_t nr, int64_t k0,                    \
        const void *restrict dy, int64_t ldy) {                                                    \
        bf_tile(dw, ldw, rn, nr, k0, dy, ldy, N, V, true);                                         \
    }
TILE_FNS(1, 1)
TILE_FNS(2, 1)
TILE_FNS(3, 1)
TILE_FNS(4, 1)
TILE_FNS(5, 1)
TILE_FNS(6, 1)
TILE_FNS(1, NV)
TILE_FNS(2, NV)
TILE_FNS(3, NV)
TILE_FNS(4, NV)
TILE_FNS(5, NV)
TILE_FNS(6, NV)
#undef TILE_FNS

typedef void (*fwd_tile_fn)(void *restrict, int64_t, const float *restrict, int64_t,
                            const int64_t *restrict, int64_t, const float *restrict, int64_t,
                            const float *, bool, bool);
static const fwd_tile_fn fwd_tiles[2][TILE] = {
    {fwd_tile_1x1, fwd_tile_2x1, fwd_tile_3x1, fwd_tile_4x1, fwd_tile_5x1, fwd_tile_6x1},
    {fwd_tile_1xNV, fwd_tile_2xNV, fwd_tile_3xNV, fwd_tile_4xNV, fwd_tile_5xNV, fwd_tile_6xNV},
};
typedef void (*bf_tile_fn)(float *restrict, int64_t, const run *, int64_t, int64_t,
                           const void *restrict, int64_t);
static const bf_tile_fn bf_tiles[2][2][TILE] = {
    {{bf_tile_1x1, bf_tile_2x1, bf_tile_3x1, bf_tile_4x1, bf_tile_5x1, bf_tile_6x1},
     {bf_tile_1xNV, bf_tile_2xNV, bf_tile_3xNV, bf_tile_4xNV, bf_tile_5xNV, bf_tile_6xNV}},
    /* issue 16: dy stored as bfloat16 */
    {{bf_tile_bf16_1x1, bf_tile_bf16_2x1, bf_tile_bf16_3x1, bf_tile_bf16_4x1, bf_tile_bf16_5x1,
      bf_tile_bf16_6x1},
     {bf_tile_bf16_1xNV, bf_tile_bf16_2xNV, bf_tile_bf16_3xNV, bf_tile_bf16_4xNV, bf_tile_bf16_5xNV,
      bf_tile_bf16_6xNV}},
};

/* y (pixels of the runs, O) = act(bias + windows x w); y row by row. bf16 (issue 16; act none or
 * relu): y is bfloat16, round(act(round(windows x w + bias))). */
static void fwd_direct(void *restrict y, const run *rn, int64_t nr, const geom *g,
                       const float *restrict w, const float *bias, int act, bool bf16) {
    int64_t O = g->o, K = g->K, rows = 0;
    bool relu = act == SY_ACT_RELU;
    SY_ASSERT(!bf16 || relu || act == SY_ACT_NONE);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t i = 0; i < rn[r].n;) {
            int64_t np = sy_min64(TILE, rn[r].n - i), o0 = 0, at = rows * O;
            const float *s = rn[r].src + i * rn[r].step;
            void *yr = bf16 ? (void *)((uint16_t *)y + at) : (void *)((float *)y + at);
            for (; o0 + NV * VL <= O; o0 += NV * VL)
                fwd_tiles[1][np - 1](
                    bf16 ? (void *)((uint16_t *)yr + o0) : (void *)((float *)yr + o0), O, s,
                    rn[r].step, rn[r].off, K, w + o0, O, bias ? bias + o0 : NULL, relu, bf16);
            for (; o0 + VL <= O; o0 += VL)
                fwd_tiles[0][np - 1](
                    bf16 ? (void *)((uint16_t *)yr + o0) : (void *)((float *)yr + o0), O, s,
                    rn[r].step, rn[r].off, K, w + o0, O, bias ? bias + o0 : NULL, relu, bf16);
            for (; o0 < O; o0++)
                for (int64_t q = 0; q < np; q++) {
                    float acc = bias && !bf16 ? bias[o0] : 0;
                    for (int64_t t = 0; t < K; t++) acc += s[q * rn[r].step + rn[r].off[t]] * w[t * O + o0];
                    if (bf16) {
                        float v = sy_bf16_round(bias ? acc + bias[o0] : acc);
                        ((uint16_t *)yr)[q * O + o0] = sy_bf16_bits(relu ? sy_act_f32(v, act) : v);
                    } else {
                        ((float *)yr)[q * O + o0] = relu ? sy_act_f32(acc, act) : acc;
                    }
                }
            rows += np;
            i += np;
        }
    }
    if (!relu && !bf16) sy_epilogue_f32(y, rows, O, O, NULL, 0, act);
}

/* dw (K, O) += windows^T x dy over the pixels of the runs; dy row by row. */
static void bf_direct(float *restrict dw, const run *rn, int64_t nr, const geom *g,
                      const void *restrict dy, bool dyb) {
    int64_t O = g->o, K = g->K, o0 = 0;
    int64_t slabs = ceil_div(K, TILE);
    size_t es = dyb ? 2 : 4;
    for (int nv = NV; nv >= 1; nv -= NV - 1)
        for (; o0 + nv * VL <= O; o0 += nv * VL)
            for (int64_t sl = 0; sl < slabs; sl++) {
                int64_t k0, k1;
                sy_split_range(K, (int)sl, (int)slabs, &k0, &k1);
                bf_tiles[dyb][nv == NV][k1 - k0 - 1](dw + k0 * O + o0, O, rn, nr, k0,
                                                     (const char *)dy + (size_t)o0 * es, O);
            }
    for (; o0 < O; o0++)
        for (int64_t k = 0; k < K; k++) {
            float acc = 0;
            int64_t d = o0;
            for (int64_t r = 0; r < nr; r++)
                for (int64_t p = 0; p < rn[r].n; p++, d += O)
                    acc += rn[r].src[p * rn[r].step + rn[r].off[k]] * sy_ldf(dy, d, dyb);
            dw[k * O + o0] += acc;
        }
}

/* issue 16, bfloat16 storage: the direct kernels read x's windows in place, so an x stored as
 * bfloat16 is widened first, a block's images at a time (a first layer's images are small: 3 KB
 * for Fashion-MNIST's): images_floats(g, rows) floats for the images of `rows` consecutive output
 * pixels. widen_images widens those of pixels [p0, p0 + rows) into xt and makes *gl the geometry
 * of those images alone; pixel p of g is pixel p - (the returned offset) of gl, its windows the
 * same numbers, so the runs (runs_of) and the sums are the same as on a float32 x. */
static int64_t images_floats(const geom *g, int64_t rows) {
    int64_t opix = sy_max64(g->oh * g->ow, 1);
    return floats_aligned(sy_min64(g->n, ceil_div(rows, opix) + 1) * g->h * g->w * g->c);
}
static int64_t widen_images(float *xt, const void *x, const geom *g, int64_t p0, int64_t rows,
                            geom *gl) {
    int64_t opix = g->oh * g->ow, img = g->h * g->w * g->c;
    int64_t n0 = p0 / opix, n1 = (p0 + rows - 1) / opix + 1;
    sy_bf16_load_all(xt, (const uint16_t *)x + n0 * img, (n1 - n0) * img);
    *gl = *g;
    gl->n = n1 - n0;
    gl->P = gl->n * opix;
    return n0 * opix;
}

conv_bf16 sy_conv_bf16_of(const sy_kargs *k) {
    return (conv_bf16){k->in_dtype[0] == SY_BF16, k->in_dtype[1] == SY_BF16,
                       k->n_in > 2 && k->in_dtype[2] == SY_BF16, k->dtype == SY_BF16};
}

/* ---- forward ------------------------------------------------------------- */

/* A bfloat16 y: the bare product goes to a float32 block (after the block's scratch), the epilogue
 * stores it: round(act(round(sum + bias))), TensorFlow's roundings, as the plan does after a
 * float32 kernel. */
/* Output pixels [p0, p0 + rows) into y_rows, their first row (bfloat16 when j->b.y, else float32);
 * cols: the thread's scratch (fwd_scratch). */
void sy_conv_fwd_rows(const fwd_job *j, int64_t p0, int64_t rows, void *y_rows, float *cols) {
    const geom *g = j->g;
    float *y = j->b.y ? NULL : (float *)y_rows;
    if (direct(g)) {
        run *rn = (run *)(void *)cols;
        float *border = cols + runs_floats(g, SUB), *yt = border + floats_aligned(SUB * g->K);
        float *xt = yt + (j->b.y ? floats_aligned(SUB * g->o) : 0);
        const float *x = j->x;
        const geom *gx = g;
        geom gl;
        int64_t base = 0;
        if (j->b.x) {
            base = widen_images(xt, j->x, g, p0, rows, &gl);
            x = xt;
            gx = &gl;
        }
        for (int64_t s = 0; s < rows; s += SUB) {
            int64_t n = sy_min64(SUB, rows - s);
            int64_t nr = runs_of(rn, border, gx, x, j->off_in, j->off_id, p0 + s - base, n);
            if (!j->b.y) {
                fwd_direct(y + s * g->o, rn, nr, g, j->w, j->bias, j->act, false);
            } else if (j->act == SY_ACT_NONE ||
                       j->act == SY_ACT_RELU) { /* the epilogue in registers */
                fwd_direct((uint16_t *)y_rows + s * g->o, rn, nr, g, j->w, j->bias, j->act, true);
            } else {
                fwd_direct(yt, rn, nr, g, j->w, NULL, SY_ACT_NONE, false);
                sy_bf16_epilogue_store((uint16_t *)y_rows + s * g->o, g->o, yt, g->o, n, g->o,
                                       j->bias, j->act);
            }
        }
        return;
    }
    im2col_any(cols, j->x, j->b.x, g, p0, rows, 0, g->K);
    float *yt = j->b.y ? cols + floats_aligned(j->pb * g->K) : y;
    sy_sgemm(false, false, rows, g->o, g->K, 1.0f, cols, g->K, j->w, g->o, 0.0f, yt, g->o);
    if (j->b.y)
        sy_bf16_epilogue_store((uint16_t *)y_rows, g->o, yt, g->o, rows, g->o, j->bias, j->act);
    else
        sy_epilogue_f32(y, rows, g->o, g->o, j->bias, 0, j->act);
}

static void fwd_block(void *ctx, int64_t block, float *cols) {
    const fwd_job *j = ctx;
    int64_t p0 = block * j->pb, rows = sy_min64(j->pb, j->g->P - p0);
    sy_conv_fwd_rows(j, p0, rows, (char *)j->y + (size_t)(p0 * j->g->o) * (j->b.y ? 2 : 4), cols);
}

static int64_t fwd_rows(const geom *g) {
    if (direct(g)) return sy_max64(SUB, sy_align_up(ceil_div(g->P, TARGET_BLOCKS), SUB));
    return sy_conv_block_rows(g->P, g->K + g->o, TARGET_BLOCKS);
}

/* Per-thread scratch: the im2col block, or the direct kernel's windows and border copies; and a
 * bfloat16 y's float32 block, a bfloat16 x's widened images. */
int64_t sy_conv_fwd_scratch(const geom *g, int64_t pb, conv_bf16 b) {
    int64_t y = b.y ? floats_aligned((direct(g) ? SUB : pb) * g->o) : 0;
    if (direct(g))
        return runs_floats(g, SUB) + floats_aligned(SUB * g->K) + y +
               (b.x ? images_floats(g, pb) : 0);
    return floats_aligned(pb * g->K) + y;
}

/* Ahead of the threads' scratch: the offset tables, then w and the bias widened when stored as
 * bfloat16. */
int64_t sy_conv_fwd_head(const geom *g, conv_bf16 b) {
    return 2 * floats_aligned(2 * g->K) + (b.w ? floats_aligned(g->K * g->o) : 0) +
           (b.bias ? floats_aligned(g->o) : 0);
}

static size_t fwd_ws(const geom *g, int threads, conv_bf16 b) {
    if (pointwise(g) || g->P == 0) return 0;
    int64_t pb = fwd_rows(g);
    return (size_t)(sy_conv_fwd_head(g, b) +
                    sy_blocks_buffers(threads, ceil_div(g->P, pb)) * sy_conv_fwd_scratch(g, pb, b)) *
           sizeof(float);
}

/* The job of blocks of pb pixels, with the head of the workspace filled: the offset tables, and w
 * and the bias widened when stored as bfloat16. */
fwd_job sy_conv_fwd_setup(const geom *g, const void *x, const void *w, const void *bias, int act,
                         void *y, float *ws, conv_bf16 b, int64_t pb) {
    int64_t *off_in = (int64_t *)(void *)ws, *off_id = off_in + g->K;
    if (direct(g)) offsets(off_in, off_id, g);
    float *wide = ws + 2 * floats_aligned(2 * g->K);
    if (b.w) {
        sy_bf16_load_all(wide, w, g->K * g->o);
        w = wide;
        wide += floats_aligned(g->K * g->o);
    }
    if (b.bias) {
        sy_bf16_load_all(wide, bias, g->o);
        bias = wide;
    }
    return (fwd_job){g, x, w, bias, y, off_in, off_id, pb, act, b};
}

static void fwd_run(const sy_exec *ex, const geom *g, const void *x, const void *w,
                    const void *bias, int act, void *y, float *ws, conv_bf16 b) {
    if (g->P == 0) return;
    if (pointwise(g)) { /* float32 only (conv2d_bf16_io) */
        sy_sgemm_parallel(ex, false, false, g->P, g->o, g->c, 1.0f, x, g->c, w, g->o, 0.0f, y, g->o,
                          bias, act);
        return;
    }
    int64_t pb = fwd_rows(g);
    fwd_job j = sy_conv_fwd_setup(g, x, w, bias, act, y, ws, b, pb);
    sy_run_blocks(ex, ceil_div(g->P, pb), fwd_block, &j, ws + sy_conv_fwd_head(g, b),
                  sy_conv_fwd_scratch(g, pb, b));
}

/* ---- Winograd ------------------------------------------------------------
 * The forward conv of g as winograd.c sees it, or (dx) the conv of dy whose
 * output is dx: the same 3x3 window over dy with the padding that puts each
 * dx pixel's window where the forward's windows came from (2 - pt). */
bool sy_conv_wino_shape(const geom *g, bool dx, sy_wino_shape *s) {
    if (g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1) return false;
    if (dx) *s = (sy_wino_shape){g->n, g->oh, g->ow, g->o, g->c, 2 - g->pt, 2 - g->pl, g->h, g->w};
    else *s = (sy_wino_shape){g->n, g->h, g->w, g->c, g->o, g->pt, g->pl, g->oh, g->ow};
    return sy_winograd_fits(s);
}

/* ---- convs the fast paths above do not take ---------------------------------
 * Depthwise convs (groups = C) go to depthwise.c; other grouped or dilated
 * convs (rare: none of keras.applications' models has one) run the ref
 * kernels, single-threaded but exact. */
static void conv_general(const sy_kargs *k, sy_op op, const sy_shape *w) {
    if (sy_cpu_conv_is_depthwise(k->attr, w)) {
        if (op == SY_OP_CONV2D) sy_cpu_depthwise_fwd(k);
        else if (op == SY_OP_CONV2D_BACKPROP_INPUT) sy_cpu_depthwise_bwd_data(k);
        else sy_cpu_depthwise_bwd_filter(k);
        return;
    }
    sy_ref_kernel(op, SY_F32)->run(k);
}

static size_t conv2d_fwd_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    sy_wino_shape ws;
    if (!k->ex->inference && sy_conv_wino_shape(&g, false, &ws)) return sy_winograd_fwd_ws(&ws, threads);
    return fwd_ws(&g, threads, sy_conv_bf16_of(k));
}

static void conv2d_fwd_f32_fast(const sy_kargs *k) {
    if (!plain(k->attr)) {
        conv_general(k, SY_OP_CONV2D, &k->in_shape[1]);
        return;
    }
    geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    const float *bias = k->n_in > 2 ? k->in[2] : NULL;
    sy_wino_shape ws;
    if (!k->ex->inference && sy_conv_wino_shape(&g, false, &ws)) { /* sy_exec.inference: the direct conv at inference */
        sy_winograd_fwd(k->ex, &ws, k->in[0], k->in[1], false, bias, k->attr->conv.act, k->out, k->ws);
        return;
    }
    fwd_run(k->ex, &g, k->in[0], k->in[1], bias, k->attr->conv.act, k->out, k->ws, sy_conv_bf16_of(k));
}

/* ---- backprop-input ------------------------------------------------------ */

/* dy (and w) stored as bfloat16 (issue 16): each block of dy widened after the block's cols, w once
 * ahead of the threads' scratch; dx is float32 (col2im adds into it). */
typedef struct bwd_data_job {
    const geom *g;
    const void *dy;
    const float *w;
    float *dx;
    int64_t pb, groups;
    bool dyb;
} bwd_data_job;

static void bwd_data_group(void *ctx, int64_t group, float *cols) {
    const bwd_data_job *j = ctx;
    const geom *g = j->g;
    int64_t n0, n1;
    sy_split_range(g->n, (int)group, (int)j->groups, &n0, &n1);
    int64_t img = g->h * g->w * g->c, opix = g->oh * g->ow;
    float *dyt = cols + floats_aligned(j->pb * g->K);
    memset(j->dx + n0 * img, 0, (size_t)((n1 - n0) * img) * sizeof(float));
    for (int64_t p0 = n0 * opix; p0 < n1 * opix; p0 += j->pb) {
        int64_t rows = sy_min64(j->pb, n1 * opix - p0);
        const float *dy = (const float *)j->dy + p0 * g->o;
        if (j->dyb) {
            sy_bf16_load_all(dyt, (const uint16_t *)j->dy + p0 * g->o, rows * g->o);
            dy = dyt;
        }
        sy_sgemm(false, true, rows, g->K, g->o, 1.0f, dy, g->o, j->w, g->o, 0.0f, cols, g->K);
        sy_col2im_add(j->dx, cols, g, p0, rows);
    }
}

static int64_t bwd_data_groups(const geom *g, int64_t pb) { return clamp64(g->P / pb, 1, sy_min64(g->n, 64)); }
static int64_t bwd_data_scratch(const geom *g, int64_t pb, bool dyb) {
    return floats_aligned(pb * g->K) + (dyb ? floats_aligned(pb * g->o) : 0);
}

static size_t conv2d_bwd_data_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr)) return 0;
    geom g = sy_conv_geom_make(k->out_shape, &k->in_shape[1], k->attr);
    if (pointwise(&g) || g.P == 0) return 0;
    sy_wino_shape ws;
    if (sy_conv_wino_shape(&g, true, &ws)) return sy_winograd_fwd_ws(&ws, threads);
    int64_t pb = sy_conv_block_rows(g.P, g.K, TARGET_BLOCKS);
    conv_bf16 b = sy_conv_bf16_of(k);
    return (size_t)((b.w ? floats_aligned(g.K * g.o) : 0) +
                    sy_blocks_buffers(threads, bwd_data_groups(&g, pb)) *
                        bwd_data_scratch(&g, pb, b.x)) *
           sizeof(float);
}

static void conv2d_bwd_data_f32_fast(const sy_kargs *k) {
    if (!plain(k->attr)) {
        conv_general(k, SY_OP_CONV2D_BACKPROP_INPUT, &k->in_shape[1]);
        return;
    }
    geom g = sy_conv_geom_make(k->out_shape, &k->in_shape[1], k->attr);
    const float *dy = k->in[0], *w = k->in[1];
    float *dx = k->out;
    if (g.P == 0) {
        memset(dx, 0, (size_t)sy_shape_count(k->out_shape) * sizeof(float));
        return;
    }
    if (pointwise(&g)) {
        sy_sgemm_parallel(k->ex, false, true, g.P, g.c, g.o, 1.0f, dy, g.o, w, g.o, 0.0f, dx, g.c, NULL, SY_ACT_NONE);
        return;
    }
    sy_wino_shape ws;
    if (sy_conv_wino_shape(&g, true, &ws)) {
        sy_winograd_fwd(k->ex, &ws, dy, w, true, NULL, SY_ACT_NONE, dx, k->ws);
        return;
    }
    int64_t pb = sy_conv_block_rows(g.P, g.K, TARGET_BLOCKS);
    conv_bf16 b = sy_conv_bf16_of(k); /* b.x: dy */
    float *scratch = k->ws;
    if (b.w) {
        sy_bf16_load_all(scratch, k->in[1], g.K * g.o);
        w = scratch;
        scratch += floats_aligned(g.K * g.o);
    }
    bwd_data_job j = {&g, k->in[0], w, dx, pb, bwd_data_groups(&g, pb), b.x};
    sy_run_blocks(k->ex, j.groups, bwd_data_group, &j, scratch, bwd_data_scratch(&g, pb, b.x));
}

/* ---- backprop-filter ----------------------------------------------------- */

static bwd_filter_plan bwd_filter_plan_make(const geom *g) {
    bwd_filter_plan p;
    p.R = clamp64(g->P / R_ROWS, 1, MAX_PARTS);
    p.S = direct(g) ? 1 : clamp64(MAX_PARTS / p.R, 1, sy_max64(1, g->K / S_MIN_ROWS));
    p.width = ceil_div(g->K, p.S);
    p.pb = sy_conv_block_rows(ceil_div(g->P, p.R), p.width, 1);
    return p;
}

/* Pixels per sub-block of the direct backprop-filter. */
int64_t sy_conv_bf_sub(const geom *g) { return clamp64(DY_SUB / sy_max64(g->o, 1), 16, 1024); }

static float *pool_bias_part(const bwd_filter_job *j, int64_t r) {
    if (!j->pool || !j->pool->db) return NULL;
    return r == 0 ? j->pool->db : j->pool->db_part + (r - 1) * j->g->o;
}

/* Rows [p0, p0 + rows) of dy as float32: in place, widened into dyt, or (issue 21) expanded from
 * the pooled gradient into dyt (dense_dy: its rows computed into the part's cache first), their
 * sums added to db (when not NULL). */
static const float *dy_rows(const bwd_filter_job *j, float *dyt, dense_cache *dc, int64_t p0, int64_t rows,
                            float *db) {
    if (j->pool) { /* (dense_dy: wd is w transposed by now, sy_conv_filter_run) */
        sy_conv_pool_rows(j->pool, j->g, dc, dyt, p0, rows, db);
        return dyt;
    }
    if (!j->dyb) return (const float *)j->dy + p0 * j->g->o;
    sy_bf16_load_all(dyt, (const uint16_t *)j->dy + p0 * j->g->o, rows * j->g->o);
    return dyt;
}

static void bwd_filter_part(void *ctx, int64_t part, float *cols) {
    const bwd_filter_job *j = ctx;
    const geom *g = j->g;
    int64_t r = part / j->p.S, s = part % j->p.S, q0, q1, k0, k1;
    sy_split_range(g->P, (int)r, (int)j->p.R, &q0, &q1);
    sy_split_range(g->K, (int)s, (int)j->p.S, &k0, &k1);
    float *dst = (r == 0 ? j->dw : j->partial + (r - 1) * g->K * g->o) + k0 * g->o;
    float *db = s == 0 ? pool_bias_part(j, r) : NULL; /* issue 21: the range's d bias, once */
    if (db) memset(db, 0, (size_t)g->o * sizeof *db);
    dense_cache dc = {NULL, 0, 0};
    if (direct(g)) {
        int64_t sub = sy_conv_bf_sub(g);
        run *rn = (run *)(void *)cols;
        float *border = cols + runs_floats(g, sub), *xt = border + floats_aligned(sub * g->K);
        float *dyt = xt + (j->xb ? images_floats(g, ceil_div(g->P, j->p.R)) : 0);
        dc.rows = dyt + (j->pool ? floats_aligned(sy_min64(sub, ceil_div(g->P, j->p.R)) * g->o) : 0);
        if (j->pool_regs) {
            sy_conv_bf_pool_registers(j, q0, q1, dst, db, &dc);
            return;
        }
        const float *x = j->x;
        const geom *gx = g;
        geom gl;
        int64_t base = 0;
        if (j->xb && q1 > q0) {
            base = widen_images(xt, j->x, g, q0, q1 - q0, &gl);
            x = xt;
            gx = &gl;
        }
        memset(dst, 0, (size_t)(g->K * g->o) * sizeof(float));
        for (int64_t p0 = q0; p0 < q1; p0 += sub) {
            int64_t n = sy_min64(sub, q1 - p0);
            int64_t nr = runs_of(rn, border, gx, x, j->off_in, j->off_id, p0 - base, n);
            if (j->pool)
                bf_direct(dst, rn, nr, g, dy_rows(j, dyt, &dc, p0, n, db), false);
            else
                bf_direct(dst, rn, nr, g,
                          (const char *)j->dy + (size_t)(p0 * g->o) * (j->dyb ? 2 : 4), j->dyb);
        }
        return;
    }
    bool pw = pointwise(g); /* float32 only (conv2d_bf16_io) */
    float *dyt = cols + (pw ? 0 : floats_aligned(j->p.pb * j->p.width));
    dc.rows = dyt + floats_aligned(j->p.pb * g->o);
    for (int64_t p0 = q0; p0 < q1; p0 += j->p.pb) {
        int64_t rows = sy_min64(j->p.pb, q1 - p0);
        const float *a = pw ? (const float *)j->x + p0 * g->c + k0 : cols;
        int64_t lda = pw ? g->c : k1 - k0;
        if (!pw) im2col_any(cols, j->x, j->xb, g, p0, rows, k0, k1);
        sy_sgemm(true, false, k1 - k0, g->o, rows, 1.0f, a, lda, dy_rows(j, dyt, &dc, p0, rows, db),
                 g->o, p0 == q0 ? 0.0f : 1.0f, dst, g->o);
    }
}

typedef struct sum_job {
    float *dw;
    const float *partial;
    int64_t n, parts, count;
} sum_job;

static void sum_part(void *ctx, int64_t part) {
    const sum_job *j = ctx;
    int64_t b, e;
    sy_split_range(j->n, (int)part, (int)j->parts, &b, &e);
    for (int64_t r = 0; r < j->count; r++) {
        const float *p = j->partial + r * j->n;
        for (int64_t i = b; i < e; i++) j->dw[i] += p[i];
    }
}

/* and, stored as bfloat16 (issue 16): x's widened images (direct: its tiles read dy as it is), a
 * block of dy widened (im2col) */
/* (issue 21: a pooled dy's rows, expanded into the part's scratch; dense_dy, `dense` the pooled
 * rows' floats PW O: the cache of its rows after them) */
static int64_t bwd_filter_scratch(const geom *g, const bwd_filter_plan *p, bool xb, bool dyb,
                                  bool pooled, int64_t dense) {
    if (direct(g)) {
        int64_t block = sy_min64(sy_conv_bf_sub(g), ceil_div(g->P, p->R));
        return runs_floats(g, sy_conv_bf_sub(g)) + floats_aligned(sy_conv_bf_sub(g) * g->K) +
               (xb ? images_floats(g, ceil_div(g->P, p->R)) : 0) +
               (pooled ? floats_aligned(block * g->o) : 0) + floats_aligned(dense * sy_conv_pool_cache_rows(g, block));
    }
    return pointwise(g) ? 0
                        : floats_aligned(p->pb * p->width) +
                              (dyb || pooled ? floats_aligned(p->pb * g->o) : 0) +
                              floats_aligned(dense * sy_conv_pool_cache_rows(g, p->pb));
}

/* Workspace: offset tables, R - 1 partial dw (and, issue 21, R - 1 partial d bias; dense_dy, w
 * transposed, wt floats, and `dense` = PW O floats a pooled row), per-thread scratch. */
size_t sy_conv_filter_ws(const geom *g, int threads, bool xb, bool dyb, bool pooled, int64_t dense, int64_t wt) {
    bwd_filter_plan p = bwd_filter_plan_make(g);
    int64_t n = 2 * floats_aligned(2 * g->K) + floats_aligned((p.R - 1) * g->K * g->o) +
                (pooled ? floats_aligned((p.R - 1) * g->o) : 0) + floats_aligned(wt) +
                sy_blocks_buffers(threads, p.R * p.S) * bwd_filter_scratch(g, &p, xb, dyb, pooled, dense);
    return (size_t)n * sizeof(float);
}

static size_t conv2d_bwd_filter_ws(const sy_kargs *k, int threads) {
    if (!plain(k->attr))
        return sy_cpu_conv_is_depthwise(k->attr, k->out_shape) ? sy_cpu_depthwise_bwd_filter_ws(k, threads) : 0;
    geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    if (g.P == 0) return 0;
    sy_wino_shape ws;
    if (sy_conv_wino_shape(&g, false, &ws)) return sy_winograd_bwd_filter_ws(&ws, threads);
    return sy_conv_filter_ws(&g, threads, k->in_dtype[0] == SY_BF16, k->in_dtype[1] == SY_BF16, false, 0, 0);
}

/* dw (and, pooled, the bias gradient) by the direct or im2col path: the ranges' partial dw, then
 * their sum in a fixed order. */
void sy_conv_filter_run(const sy_kargs *k, const geom *g, pool_bwd *pool) {
    float *ws = k->ws;
    bwd_filter_plan p = bwd_filter_plan_make(g);
    int64_t *off_in = (int64_t *)(void *)ws, *off_id = off_in + g->K;
    float *partial = ws + 2 * floats_aligned(2 * g->K);
    float *scratch = partial + floats_aligned((p.R - 1) * g->K * g->o);
    if (pool) {
        pool->db_part = scratch;
        scratch += floats_aligned((p.R - 1) * g->o);
    }
    if (pool) scratch += sy_conv_pool_dense_prepare(pool, k->ex, g, scratch); /* dense_dy: w transposed, once */
    if (direct(g)) offsets(off_in, off_id, g);
    bwd_filter_job j = {g,
                        p,
                        k->in[0],
                        k->in[1],
                        k->out,
                        partial,
                        off_in,
                        off_id,
                        k->in_dtype[0] == SY_BF16,
                        k->in_dtype[1] == SY_BF16,
                        pool,
                        pool && sy_conv_bf_pool_in_registers(g, pool, k->in_dtype[0] == SY_BF16)};
    sy_run_blocks(k->ex, p.R * p.S, bwd_filter_part, &j, scratch,
                  bwd_filter_scratch(g, &p, j.xb, j.dyb, pool != NULL, pool && pool->wd ? pool->p.pw * g->o : 0));
    if (p.R > 1) {
        int64_t n = g->K * g->o;
        sum_job s = {k->out, partial, n, clamp64(n / 4096, 1, 16), p.R - 1};
        sy_parallel_parts(k->ex, s.parts, sum_part, &s);
    }
    for (int64_t r = 1; pool && pool->db && r < p.R; r++) /* in range order */
        for (int64_t c = 0; c < g->o; c++) pool->db[c] += pool->db_part[(r - 1) * g->o + c];
}

static void conv2d_bwd_filter_f32_fast(const sy_kargs *k) {
    if (!plain(k->attr)) {
        conv_general(k, SY_OP_CONV2D_BACKPROP_FILTER, k->out_shape);
        return;
    }
    geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    float *dw = k->out, *ws = k->ws;
    if (g.P == 0) {
        memset(dw, 0, (size_t)sy_shape_count(k->out_shape) * sizeof(float));
        return;
    }
    sy_wino_shape wsh;
    if (sy_conv_wino_shape(&g, false, &wsh)) {
        sy_winograd_bwd_filter(k->ex, &wsh, k->in[0], k->in[1], dw, ws);
        return;
    }
    sy_conv_filter_run(k, &g, NULL);
}

/* issue 16, bfloat16 storage: what the im2col and direct paths take as bfloat16 -- all of the
 * forward's operands; x (or dy) and w (or dy) of the backprops, whose outputs are sums kept in
 * float32. Pointwise, Winograd, depthwise and other grouped or dilated convs read float32 only. */
static uint32_t conv2d_bf16_io(const sy_kargs *k) {
    if (!plain(k->attr)) return 0;
    bool fwd = k->op == SY_OP_CONV2D, dx = k->op == SY_OP_CONV2D_BACKPROP_INPUT;
    geom g = sy_conv_geom_make(dx ? k->out_shape : &k->in_shape[0],
                               fwd || dx ? &k->in_shape[1] : k->out_shape, k->attr);
    sy_wino_shape ws;
    bool wino = sy_conv_wino_shape(&g, dx, &ws) && !(fwd && k->ex->inference); /* as the kernels choose */
    if (pointwise(&g) || g.P == 0 || wino) return 0;
    return SY_BF16_IN(0) | SY_BF16_IN(1) | (fwd ? SY_BF16_IN(2) | SY_BF16_OUT : 0);
}

const sy_kernel sy_cpu_conv2d = {conv2d_fwd_f32_fast, conv2d_fwd_ws, conv2d_bf16_io};
const sy_kernel sy_cpu_conv2d_backprop_input = {conv2d_bwd_data_f32_fast, conv2d_bwd_data_ws,
                                                conv2d_bf16_io};
const sy_kernel sy_cpu_conv2d_backprop_filter = {conv2d_bwd_filter_f32_fast, conv2d_bwd_filter_ws,
                                                 conv2d_bf16_io};
