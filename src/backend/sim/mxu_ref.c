/*
 * mxu_ref.c - the scalar reference kernels of the MXU's ops: plain loops
 * that define what the sim backend computes (docs/design/mxu-numerics.md).
 *
 * Every output element is one MXU sum (mxu_acc): each term the product of
 * two operands rounded to bfloat16 -- exact in float32, 8 x 8 significant
 * bits -- added in order k = 0, 1, ... into a float32 chunk sum that starts
 * at 0 and, every SY_MXU_DEPTH terms (and after the last), is added to the
 * float32 accumulator. A padded window position is a term of 0 and still
 * takes its place in the count, as it takes a row of the systolic array.
 * Bias and activation follow in float32 through sy_epilogue_f32, the very
 * loop the fast kernels use, so both give the same bits there too.
 *
 * The convs take dilation and groups (depthwise included): on the TPU every
 * convolution, depthwise too, is an XLA Convolution the MXU runs. The fast
 * kernels (mxu.c) hand such convs to these loops.
 *
 * These kernels are also the sim backend's own path for grouped and dilated
 * convs, so they run inside plans: no allocation, single-threaded.
 *
 * The recurrent scans (issue 16, MXU recurrent products) are not here: their
 * reference is cpu/rnn.c's scan code with scalar MXU products (the same
 * sy_mxu_acc), so that the cells' float32 arithmetic -- which is not the
 * MXU's -- is the same code in sim and sim-ref.
 */
#include "sim_internal.h"

/* One MXU sum per output element: backend_internal.h's sy_mxu_acc. */
typedef sy_mxu_acc mxu_acc;
#define mxu_term sy_mxu_term
#define mxu_total sy_mxu_total

/* c (M, N) = op(a) (M, K) x op(b) (K, N) [+ bias (N)], then act */
static void matmul_fwd_f32_mxuref(const sy_kargs *k) {
    const float *a = k->in[0], *b = k->in[1], *bias = k->n_in > 2 ? k->in[2] : NULL;
    float *c = k->out;
    bool ta = k->attr->matmul.ta, tb = k->attr->matmul.tb;
    int64_t M = k->out_shape->dims[0], N = k->out_shape->dims[1];
    int64_t K = ta ? k->in_shape[0].dims[0] : k->in_shape[0].dims[1];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            mxu_acc s = {0};
            for (int64_t p = 0; p < K; p++) mxu_term(&s, ta ? a[p * M + i] : a[i * K + p], tb ? b[j * K + p] : b[p * N + j]);
            c[i * N + j] = mxu_total(&s);
        }
    sy_epilogue_f32(c, M, N, N, bias, 0, k->attr->matmul.act);
}

/* A conv's geometry with dilation and groups: window tap (kh, kw) of output
 * pixel (oh, ow) reads input pixel (oh sh - pt + kh dh, ow sw - pl + kw dw);
 * output channel o is in group o / og, which reads input channels
 * [group cg, (group + 1) cg) (kernel (KH, KW, cg, O)). */
typedef struct cgeom {
    int64_t n, h, w, c, kh, kw, o, sh, sw, pt, pl, oh, ow, dh, dw, cg, og;
} cgeom;

static cgeom cgeom_make(const sy_shape *x, const sy_shape *w, const sy_attrs *a) {
    cgeom g = {.n = x->dims[0], .h = x->dims[1], .w = x->dims[2], .c = x->dims[3], .kh = w->dims[0], .kw = w->dims[1],
               .o = w->dims[3], .sh = a->conv.stride[0], .sw = a->conv.stride[1], .dh = sy_conv_dilation(a, 0),
               .dw = sy_conv_dilation(a, 1), .cg = w->dims[2]};
    g.og = g.o / sy_conv_groups(a);
    sy_conv_out(g.h, sy_dilated(g.kh, g.dh), g.sh, a->conv.padding, &g.oh, &g.pt);
    sy_conv_out(g.w, sy_dilated(g.kw, g.dw), g.sw, a->conv.padding, &g.ow, &g.pl);
    return g;
}

/* The input offset of tap (kh, kw) of pixel (n, oh, ow), channel 0; -1 in the padding. */
static int64_t tap(const cgeom *g, int64_t n, int64_t oh, int64_t ow, int64_t kh, int64_t kw) {
    int64_t ih = oh * g->sh - g->pt + kh * g->dh, iw = ow * g->sw - g->pl + kw * g->dw;
    return ih < 0 || ih >= g->h || iw < 0 || iw >= g->w ? -1 : ((n * g->h + ih) * g->w + iw) * g->c;
}

/* y (N, OH, OW, O) = act(conv(x (N, H, W, C), w (KH, KW, Cg, O)) + bias (O));
 * each y element sums its window in (KH, KW, Cg) order */
static void conv2d_fwd_f32_mxuref(const sy_kargs *k) {
    cgeom g = cgeom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    const float *x = k->in[0], *w = k->in[1], *bias = k->n_in > 2 ? k->in[2] : NULL;
    float *y = k->out;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t oh = 0; oh < g.oh; oh++)
            for (int64_t ow = 0; ow < g.ow; ow++)
                for (int64_t o = 0; o < g.o; o++) {
                    mxu_acc s = {0};
                    int64_t c0 = o / g.og * g.cg;
                    for (int64_t kh = 0; kh < g.kh; kh++)
                        for (int64_t kw = 0; kw < g.kw; kw++) {
                            int64_t at = tap(&g, n, oh, ow, kh, kw);
                            for (int64_t c = 0; c < g.cg; c++)
                                mxu_term(&s, at < 0 ? 0.0f : x[at + c0 + c], w[((kh * g.kw + kw) * g.cg + c) * g.o + o]);
                        }
                    y[((n * g.oh + oh) * g.ow + ow) * g.o + o] = mxu_total(&s);
                }
    sy_epilogue_f32(y, g.n * g.oh * g.ow, g.o, g.o, bias, 0, k->attr->conv.act);
}

/* dx (N, H, W, C) from dy (N, OH, OW, O) and w (KH, KW, Cg, O): each window
 * tap's product over the group's output channels is one MXU sum; the taps
 * are added into dx in float32 in pixel order, then (kh, kw, c) order, as a
 * transposed conv's col2im scatters them */
static void conv2d_bwd_data_f32_mxuref(const sy_kargs *k) {
    cgeom g = cgeom_make(k->out_shape, &k->in_shape[1], k->attr);
    const float *dy = k->in[0], *w = k->in[1];
    float *dx = k->out;
    memset(dx, 0, (size_t)sy_shape_count(k->out_shape) * sizeof(float));
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t oh = 0; oh < g.oh; oh++)
            for (int64_t ow = 0; ow < g.ow; ow++)
                for (int64_t kh = 0; kh < g.kh; kh++)
                    for (int64_t kw = 0; kw < g.kw; kw++) {
                        int64_t at = tap(&g, n, oh, ow, kh, kw);
                        if (at < 0) continue;
                        const float *d = dy + ((n * g.oh + oh) * g.ow + ow) * g.o;
                        for (int64_t c = 0; c < g.c; c++) {
                            mxu_acc s = {0};
                            int64_t grp = c / g.cg, ci = c % g.cg;
                            for (int64_t o = grp * g.og; o < (grp + 1) * g.og; o++)
                                mxu_term(&s, d[o], w[((kh * g.kw + kw) * g.cg + ci) * g.o + o]);
                            dx[at + c] += mxu_total(&s);
                        }
                    }
}

/* dw (KH, KW, Cg, O) from x (N, H, W, C) and dy (N, OH, OW, O): each dw
 * element sums over the output pixels in order (N, OH, OW) */
static void conv2d_bwd_filter_f32_mxuref(const sy_kargs *k) {
    cgeom g = cgeom_make(&k->in_shape[0], k->out_shape, k->attr);
    const float *x = k->in[0], *dy = k->in[1];
    float *dw = k->out;
    for (int64_t kh = 0; kh < g.kh; kh++)
        for (int64_t kw = 0; kw < g.kw; kw++)
            for (int64_t c = 0; c < g.cg; c++)
                for (int64_t o = 0; o < g.o; o++) {
                    mxu_acc s = {0};
                    int64_t xc = o / g.og * g.cg + c;
                    for (int64_t n = 0; n < g.n; n++)
                        for (int64_t oh = 0; oh < g.oh; oh++)
                            for (int64_t ow = 0; ow < g.ow; ow++) {
                                int64_t at = tap(&g, n, oh, ow, kh, kw);
                                mxu_term(&s, at < 0 ? 0.0f : x[at + xc], dy[((n * g.oh + oh) * g.ow + ow) * g.o + o]);
                            }
                    dw[((kh * g.kw + kw) * g.cg + c) * g.o + o] = mxu_total(&s);
                }
}

static const sy_kernel ref_matmul = {matmul_fwd_f32_mxuref, NULL, NULL};
static const sy_kernel ref_conv2d = {conv2d_fwd_f32_mxuref, NULL, NULL};
static const sy_kernel ref_conv2d_bwd_data = {conv2d_bwd_data_f32_mxuref, NULL, NULL};
static const sy_kernel ref_conv2d_bwd_filter = {conv2d_bwd_filter_f32_mxuref, NULL, NULL};

static const sy_kernel *const mxu_ref[SY_OP_COUNT] = {
    [SY_OP_MATMUL] = &ref_matmul,
    [SY_OP_CONV2D] = &ref_conv2d,
    [SY_OP_CONV2D_BACKPROP_INPUT] = &ref_conv2d_bwd_data,
    [SY_OP_CONV2D_BACKPROP_FILTER] = &ref_conv2d_bwd_filter,
};

const sy_kernel *sy_sim_ref_kernel(sy_op op, sy_dtype dtype) {
    if (dtype != SY_F32) return NULL;
    /* issue 16, MXU recurrent products: the scans with scalar reference products (cpu/rnn.c's cells) */
    const sy_kernel *rnn = sy_rnn_kernel(op, SY_RNN_MXU_REF);
    if (rnn) return rnn;
    return (unsigned)op < SY_OP_COUNT ? mxu_ref[op] : NULL;
}
