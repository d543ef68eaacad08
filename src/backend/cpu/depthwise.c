/*
 * depthwise.c - fast float32 kernels for the depthwise conv: conv2d with
 * groups = C and one input channel per group (DepthwiseConv2D, the first
 * half of SeparableConv2D), with any stride, padding and dilation.
 *
 * A depthwise conv multiplies each channel by its own small filter, so it
 * is not a product of matrices and im2col + GEMM would waste its work; nor
 * is it run as a dense conv with zero weights. Each kernel walks one output
 * row at a time (an "output row" is OW pixels x O channels, contiguous in
 * NHWC) and, for each kernel tap, adds a channel-wise product of an input
 * row segment and the tap's weights: the inner loop runs along the O
 * channels, contiguous in x, w and y, which GCC vectorises. With a depth
 * multiplier M, output channel o = c M + m reads input channel c.
 *
 *   forward          y rows, one thread per block of rows; bias and the
 *                    activation once the row is summed
 *   backprop-input   dx rows: each input row gathers the (output row, tap)
 *                    pairs that read it, so a thread owns whole dx rows
 *   backprop-filter  the output rows are cut into R ranges fixed by the
 *                    shape, each summed into its own partial dw (KH KW O
 *                    floats, small), and the partials added in order
 *
 * Every split depends on the shapes only, so results are bitwise the same
 * on any number of threads. conv.c sends conv2d here when groups = C and
 * groups > 1; other grouped or dilated convs run the ref kernels.
 */
#include "cpu_internal.h"

typedef struct dw_geom {
    int64_t n, h, w, c;     /* input */
    int64_t kh, kw, m, o;   /* taps, depth multiplier, output channels C M */
    int64_t sh, sw, dh, dw; /* strides, dilation */
    int64_t pt, pl, oh, ow; /* leading padding, output */
} dw_geom;

static dw_geom dw_make(const sy_shape *x, const sy_shape *w, const sy_attrs *a) {
    dw_geom g;
    g.n = x->dims[0];
    g.h = x->dims[1];
    g.w = x->dims[2];
    g.c = x->dims[3];
    g.kh = w->dims[0];
    g.kw = w->dims[1];
    g.o = w->dims[3];
    g.m = g.c ? g.o / g.c : 0;
    g.sh = a->conv.stride[0];
    g.sw = a->conv.stride[1];
    g.dh = sy_conv_dilation(a, 0);
    g.dw = sy_conv_dilation(a, 1);
    sy_conv_out(g.h, sy_dilated(g.kh, g.dh), g.sh, a->conv.padding, &g.oh, &g.pt);
    sy_conv_out(g.w, sy_dilated(g.kw, g.dw), g.sw, a->conv.padding, &g.ow, &g.pl);
    return g;
}

bool sy_cpu_conv_is_depthwise(const sy_attrs *a, const sy_shape *w) {
    return sy_conv_groups(a) > 1 && w->dims[2] == 1;
}

/* Output columns [*a, *b) whose tap kw reads inside the input row. */
static void valid_cols(const dw_geom *g, int64_t kw, int64_t *a, int64_t *b) {
    int64_t off = kw * g->dw - g->pl; /* iw = ow sw + off */
    int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t hi = g->w - off <= 0 ? 0 : (g->w - off - 1) / g->sw + 1;
    *a = lo;
    *b = hi < g->ow ? hi : g->ow;
    if (*b < *a) *b = *a;
}

/* acc (O) += x (C) spread over the multiplier x w (O) */
static inline void madd(float *restrict acc, const float *restrict x, const float *restrict w,
                        int64_t c, int64_t m) {
    if (m == 1) {
        for (int64_t i = 0; i < c; i++) acc[i] += x[i] * w[i];
        return;
    }
    for (int64_t i = 0; i < c; i++)
        for (int64_t j = 0; j < m; j++) acc[i * m + j] += x[i] * w[i * m + j];
}

/* ---- forward ----------------------------------------------------------------- */

typedef struct dw_fwd_job {
    dw_geom g;
    const float *x, *w, *bias;
    float *y;
    int act;
    int64_t rows, parts;
} dw_fwd_job;

static void dw_fwd_part(void *ctx, int64_t part) {
    const dw_fwd_job *j = ctx;
    const dw_geom *g = &j->g;
    int64_t r0, r1;
    sy_split_range(j->rows, (int)part, (int)j->parts, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->oh, oh = r % g->oh;
        float *y = j->y + r * g->ow * g->o;
        memset(y, 0, (size_t)(g->ow * g->o) * sizeof(float));
        for (int64_t kh = 0; kh < g->kh; kh++) {
            int64_t ih = oh * g->sh - g->pt + kh * g->dh;
            if (ih < 0 || ih >= g->h) continue;
            const float *xrow = j->x + (n * g->h + ih) * g->w * g->c;
            for (int64_t kw = 0; kw < g->kw; kw++) {
                const float *w = j->w + (kh * g->kw + kw) * g->o;
                int64_t a, b;
                valid_cols(g, kw, &a, &b);
                for (int64_t ow = a; ow < b; ow++)
                    madd(y + ow * g->o, xrow + (ow * g->sw - g->pl + kw * g->dw) * g->c, w, g->c,
                         g->m);
            }
        }
        sy_epilogue_f32(y, g->ow, g->o, g->o, j->bias, 0, j->act);
    }
}

void sy_cpu_depthwise_fwd(const sy_kargs *k) {
    dw_fwd_job j = {dw_make(&k->in_shape[0], &k->in_shape[1], k->attr),
                    k->in[0],
                    k->in[1],
                    k->n_in > 2 ? k->in[2] : NULL,
                    k->out,
                    k->attr->conv.act,
                    0,
                    0};
    j.rows = j.g.n * j.g.oh;
    j.parts = sy_max64(1, sy_min64(j.rows, 64));
    sy_parallel_parts(k->ex, j.parts, dw_fwd_part, &j);
}

/* ---- backprop-input ------------------------------------------------------------ */

typedef struct dw_bwd_job {
    dw_geom g;
    const float *dy, *w;
    float *dx;
    int64_t rows, parts;
} dw_bwd_job;

/* dx (C) += sum over the multiplier of dy (O) x w (O) */
static inline void madd_back(float *restrict dx, const float *restrict dy, const float *restrict w,
                             int64_t c, int64_t m) {
    if (m == 1) {
        for (int64_t i = 0; i < c; i++) dx[i] += dy[i] * w[i];
        return;
    }
    for (int64_t i = 0; i < c; i++) {
        float s = 0;
        for (int64_t j = 0; j < m; j++) s += dy[i * m + j] * w[i * m + j];
        dx[i] += s;
    }
}

static void dw_bwd_part(void *ctx, int64_t part) {
    const dw_bwd_job *j = ctx;
    const dw_geom *g = &j->g;
    int64_t r0, r1;
    sy_split_range(j->rows, (int)part, (int)j->parts, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->h, ih = r % g->h;
        float *dx = j->dx + r * g->w * g->c;
        memset(dx, 0, (size_t)(g->w * g->c) * sizeof(float));
        for (int64_t kh = 0; kh < g->kh; kh++) {
            int64_t t = ih + g->pt - kh * g->dh; /* = oh sh */
            if (t < 0 || t % g->sh) continue;
            int64_t oh = t / g->sh;
            if (oh >= g->oh) continue;
            const float *dyrow = j->dy + (n * g->oh + oh) * g->ow * g->o;
            for (int64_t kw = 0; kw < g->kw; kw++) {
                const float *w = j->w + (kh * g->kw + kw) * g->o;
                int64_t a, b;
                valid_cols(g, kw, &a, &b);
                for (int64_t ow = a; ow < b; ow++)
                    madd_back(dx + (ow * g->sw - g->pl + kw * g->dw) * g->c, dyrow + ow * g->o, w,
                              g->c, g->m);
            }
        }
    }
}

void sy_cpu_depthwise_bwd_data(const sy_kargs *k) {
    dw_bwd_job j = {
        dw_make(k->out_shape, &k->in_shape[1], k->attr), k->in[0], k->in[1], k->out, 0, 0};
    j.rows = j.g.n * j.g.h;
    j.parts = sy_max64(1, sy_min64(j.rows, 64));
    sy_parallel_parts(k->ex, j.parts, dw_bwd_part, &j);
}

/* ---- backprop-filter ------------------------------------------------------------- */

typedef struct dw_filter_job {
    dw_geom g;
    const float *x, *dy;
    float *dw, *partial;
    int64_t rows, parts;
} dw_filter_job;

/* Ranges of output rows, each with its own partial dw. */
static int64_t filter_parts(const dw_geom *g) {
    return sy_max64(1, sy_min64(16, g->n * g->oh / 4));
}

static void dw_filter_part(void *ctx, int64_t part) {
    const dw_filter_job *j = ctx;
    const dw_geom *g = &j->g;
    int64_t r0, r1, taps = g->kh * g->kw;
    sy_split_range(j->rows, (int)part, (int)j->parts, &r0, &r1);
    float *acc = part == 0 ? j->dw : j->partial + (part - 1) * taps * g->o;
    memset(acc, 0, (size_t)(taps * g->o) * sizeof(float));
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / g->oh, oh = r % g->oh;
        const float *dyrow = j->dy + r * g->ow * g->o;
        for (int64_t kh = 0; kh < g->kh; kh++) {
            int64_t ih = oh * g->sh - g->pt + kh * g->dh;
            if (ih < 0 || ih >= g->h) continue;
            const float *xrow = j->x + (n * g->h + ih) * g->w * g->c;
            for (int64_t kw = 0; kw < g->kw; kw++) {
                float *a_ = acc + (kh * g->kw + kw) * g->o;
                int64_t a, b;
                valid_cols(g, kw, &a, &b);
                for (int64_t ow = a; ow < b; ow++)
                    madd(a_, xrow + (ow * g->sw - g->pl + kw * g->dw) * g->c, dyrow + ow * g->o,
                         g->c, g->m);
            }
        }
    }
}

size_t sy_cpu_depthwise_bwd_filter_ws(const sy_kargs *k, int threads) {
    (void)threads;
    dw_geom g = dw_make(&k->in_shape[0], k->out_shape, k->attr);
    return (size_t)((filter_parts(&g) - 1) * g.kh * g.kw * g.o) * sizeof(float);
}

void sy_cpu_depthwise_bwd_filter(const sy_kargs *k) {
    dw_filter_job j = {
        dw_make(&k->in_shape[0], k->out_shape, k->attr), k->in[0], k->in[1], k->out, k->ws, 0, 0};
    j.rows = j.g.n * j.g.oh;
    j.parts = filter_parts(&j.g);
    sy_parallel_parts(k->ex, j.parts, dw_filter_part, &j);
    int64_t n = j.g.kh * j.g.kw * j.g.o;
    for (int64_t p = 1; p < j.parts; p++) {
        const float *src = j.partial + (p - 1) * n;
        for (int64_t i = 0; i < n; i++) j.dw[i] += src[i];
    }
}
