/*
 * qref.c - the int8 ops' kernels (issue 18): scalar loops in TensorFlow
 * Lite's integer arithmetic, each the reference kernel TFLite 2.15's
 * BUILTIN_REF resolver runs, so that a .tflite model's outputs are TFLite's
 * bit for bit. docs/design/tflite.md names the TFLite source of each.
 *
 * Every convolution and fully-connected product goes through
 * sy_qgemm_i8_ref (qgemm.c), the one int8 product contract: a convolution
 * is an im2col of each output row -- taps outside the image hold the input
 * zero point, so they add (zp - zp) w = 0, as TFLite's loops skip them --
 * times the (O, KH, KW, C / groups) filter, group by group (a depthwise
 * conv is groups = C). The parameters (multipliers, shifts, zero points,
 * clamps) are the node's attr.q, derived where the graph is built
 * (lite/lite_model.c) as TFLite's Prepare functions derive them.
 *
 * These kernels serve every backend (backend.c's lookups fall back to
 * ref's table); they run on one thread.
 */
#include "cpu_internal.h"

#include <math.h>

/* The QCONV2D geometry both int8 conv kernels read (this file's and qconv.c's). */
sy_qconv_geom sy_qconv_geometry(const sy_kargs *k) {
    const sy_shape *x = &k->in_shape[0], *w = &k->in_shape[1];
    const sy_attrs *a = k->attr;
    sy_qconv_geom g;
    g.n = x->dims[0], g.h = x->dims[1], g.w = x->dims[2], g.c = x->dims[3];
    g.o = w->dims[0], g.kh = w->dims[1], g.kw = w->dims[2], g.cg = w->dims[3];
    g.groups = a->q.groups > 1 ? a->q.groups : 1;
    g.og = g.o / g.groups;
    g.sh = a->q.stride[0], g.sw = a->q.stride[1];
    g.dh = a->q.dilation[0] > 1 ? a->q.dilation[0] : 1, g.dw = a->q.dilation[1] > 1 ? a->q.dilation[1] : 1;
    sy_conv_out(g.h, sy_dilated(g.kh, g.dh), g.sh, a->q.padding, &g.oh, &g.ph);
    sy_conv_out(g.w, sy_dilated(g.kw, g.dw), g.sw, a->q.padding, &g.ow, &g.pw);
    g.k = g.kh * g.kw * g.cg;
    return g;
}


static inline int32_t clamp32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* TfLiteRound (std::round): halves away from zero, in float. As truncation plus a step where the fraction,
 * exact in float, is at least a half: roundf's results (NaN stays NaN), in a form GCC vectorises where
 * roundf is a call per element (the QUANTIZE of ResNet-50's 224x224x3 input took 2% of its time). */
static inline float round_away(float x) {
    float t = truncf(x);
    return t + copysignf((float)(fabsf(x - t) >= 0.5f), x); /* no branch: the fractions are random */
}

/* A float result of TFLite's rounding into [lo, hi]: clamped as a float first, so that an out-of-range
 * (or NaN) value never reaches a cast. */
static inline int32_t float_to_q(float v, int32_t lo, int32_t hi) {
    if (!(v >= (float)lo)) return lo;
    if (v > (float)hi) return hi;
    return (int32_t)v;
}

/* ---- QUANTIZE, DEQUANTIZE (reference_ops::AffineQuantize, Requantize, Dequantize) ---- */

static void quantize(const sy_kargs *k) {
    const sy_attrs *a = k->attr;
    int64_t n = sy_shape_count(k->out_shape);
    int8_t *y = k->out;
    if (k->in_dtype[0] == SY_F32) { /* round(x / scale) + zero point, the division in float */
        const float *x = k->in[0];
        for (int64_t i = 0; i < n; i++) {
            float q = round_away(x[i] / a->q.y_scale);
            /* q + zp in int32 as TFLite adds them; q clamped first so that the sum cannot overflow */
            int32_t v = float_to_q(q, -(1 << 24), 1 << 24) + a->q.y_zp;
            y[i] = (int8_t)clamp32(v, -128, 127);
        }
        return;
    }
    const int8_t *x = k->in[0];
    for (int64_t i = 0; i < n; i++) {
        int32_t v = sy_q_requantize((int32_t)x[i] - a->q.x_zp, a->q.mult[0], a->q.shift[0]) + a->q.y_zp;
        y[i] = (int8_t)clamp32(v, -128, 127);
    }
}

static void dequantize(const sy_kargs *k) {
    int64_t n = sy_shape_count(k->out_shape);
    const int8_t *x = k->in[0];
    float *y = k->out;
    double scale = k->attr->q.x_scale; /* DequantizationParams holds it as a double */
    for (int64_t i = 0; i < n; i++) y[i] = (float)(scale * (double)((int32_t)x[i] - k->attr->q.x_zp));
}

/* ---- products ---------------------------------------------------------------------------- */

static sy_qgemm_params product_params(const sy_kargs *k, int64_t n_out, int64_t first) {
    const int32_t *bias = k->in[2], *m = k->in[3];
    return (sy_qgemm_params){k->attr->q.x_zp, k->attr->q.y_zp, k->attr->q.act_min, k->attr->q.act_max,
                             bias + first, m + first, m + n_out + first};
}

/* One output row's im2col for one group: (OW, KH KW Cg), taps outside the image the zero point. */
static size_t qconv_ws(const sy_kargs *k, int threads) {
    (void)threads;
    sy_qconv_geom g = sy_qconv_geometry(k);
    return (size_t)(g.ow * g.k);
}

static void qconv2d(const sy_kargs *k) {
    sy_qconv_geom g = sy_qconv_geometry(k);
    const int8_t *x = k->in[0], *w = k->in[1];
    int8_t *y = k->out, *col = k->ws;
    int8_t zp = (int8_t)k->attr->q.x_zp;
    for (int64_t b = 0; b < g.n; b++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t gr = 0; gr < g.groups; gr++) {
                for (int64_t ox = 0; ox < g.ow; ox++) {
                    int8_t *r = col + ox * g.k;
                    for (int64_t i = 0; i < g.kh; i++) {
                        int64_t iy = oy * g.sh - g.ph + i * g.dh;
                        for (int64_t j = 0; j < g.kw; j++, r += g.cg) {
                            int64_t ix = ox * g.sw - g.pw + j * g.dw;
                            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) {
                                memset(r, zp, (size_t)g.cg);
                                continue;
                            }
                            memcpy(r, x + ((b * g.h + iy) * g.w + ix) * g.c + gr * g.cg, (size_t)g.cg);
                        }
                    }
                }
                sy_qgemm_params p = product_params(k, g.o, gr * g.og);
                sy_qgemm_i8_ref(y + ((b * g.oh + oy) * g.ow) * g.o + gr * g.og, g.o, col, g.k, w + gr * g.og * g.k,
                                g.ow, g.og, g.k, &p);
            }
}

static void qfully_connected(const sy_kargs *k) {
    const sy_shape *w = &k->in_shape[1];
    int64_t units = w->dims[0], depth = w->dims[1], rows = sy_shape_count(&k->in_shape[0]) / depth;
    sy_qgemm_params p = product_params(k, units, 0);
    sy_qgemm_i8_ref(k->out, units, k->in[0], depth, k->in[1], rows, units, depth, &p);
}

/* ---- QADD (reference_integer_ops::Add, AddElementwise) ----------------------------------- */

static void qadd(const sy_kargs *k) {
    const sy_attrs *a = k->attr;
    const int8_t *x1 = k->in[0], *x2 = k->in[1];
    int8_t *y = k->out;
    int64_t n = sy_shape_count(k->out_shape);
    for (int64_t i = 0; i < n; i++) {
        int32_t v1 = ((int32_t)x1[i] - a->q.x_zp) * (1 << a->q.left_shift);
        int32_t v2 = ((int32_t)x2[i] - a->q.x2_zp) * (1 << a->q.left_shift);
        int32_t s1 = sy_q_requantize(v1, a->q.mult[0], a->q.shift[0]);
        int32_t s2 = sy_q_requantize(v2, a->q.mult[1], a->q.shift[1]);
        int32_t out = sy_q_requantize(s1 + s2, a->q.mult[2], a->q.shift[2]) + a->q.y_zp;
        y[i] = (int8_t)clamp32(out, a->q.act_min, a->q.act_max);
    }
}

/* ---- pools (reference_integer_ops::MaxPool, AveragePool) ---------------------------------- */

static void qpool(const sy_kargs *k, bool avg) {
    const sy_attrs *a = k->attr;
    const sy_shape *xs = &k->in_shape[0];
    int64_t n = xs->dims[0], h = xs->dims[1], w = xs->dims[2], c = xs->dims[3];
    int64_t oh, ow, ph, pw;
    sy_conv_out(h, a->q.ksize[0], a->q.stride[0], a->q.padding, &oh, &ph);
    sy_conv_out(w, a->q.ksize[1], a->q.stride[1], a->q.padding, &ow, &pw);
    const int8_t *x = k->in[0];
    int8_t *y = k->out;
    for (int64_t b = 0; b < n; b++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t y0 = oy * a->q.stride[0] - ph, x0 = ox * a->q.stride[1] - pw;
                int64_t i0 = y0 < 0 ? -y0 : 0, i1 = h - y0 < a->q.ksize[0] ? h - y0 : a->q.ksize[0];
                int64_t j0 = x0 < 0 ? -x0 : 0, j1 = w - x0 < a->q.ksize[1] ? w - x0 : a->q.ksize[1];
                for (int64_t ch = 0; ch < c; ch++) {
                    int32_t acc = avg ? 0 : -128, count = 0;
                    for (int64_t i = i0; i < i1; i++)
                        for (int64_t j = j0; j < j1; j++) {
                            int32_t v = x[((b * h + y0 + i) * w + x0 + j) * c + ch];
                            if (avg) acc += v;
                            else if (v > acc) acc = v;
                            count++;
                        }
                    if (avg && count) /* to the nearest, halves away from zero */
                        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
                    y[((b * oh + oy) * ow + ox) * c + ch] = (int8_t)clamp32(acc, a->q.act_min, a->q.act_max);
                }
            }
}

static void qmax_pool2d(const sy_kargs *k) { qpool(k, false); }
static void qavg_pool2d(const sy_kargs *k) { qpool(k, true); }

/* ---- QCONV2D_POOL (made by fusion.c): the conv, then the max pool over its output -- its definition, which
 * the fast kernel (qconvpool.c) matches bit for bit ---- */

void sy_qconv_pool_split(const sy_kargs *k, void *conv_out, sy_qconv_pool_parts *s) {
    sy_qconv_geom g = sy_qconv_geometry(k);
    s->conv = *k;
    s->conv.op = SY_OP_QCONV2D;
    s->conv_shape = sy_shape_of(4, g.n, g.oh, g.ow, g.o);
    s->conv.out_shape = &s->conv_shape;
    s->conv.out = conv_out;
    s->conv.ws = NULL;
    memset(&s->pool_attr, 0, sizeof s->pool_attr);
    const sy_attrs *a = k->attr;
    for (int i = 0; i < 2; i++) s->pool_attr.q.ksize[i] = a->q.pool.ksize[i], s->pool_attr.q.stride[i] = a->q.pool.stride[i];
    s->pool_attr.q.padding = a->q.pool.padding;
    s->pool_attr.q.act_min = a->q.pool.act_min, s->pool_attr.q.act_max = a->q.pool.act_max;
    s->pool_in[0] = conv_out;
    s->pool = *k;
    s->pool.op = SY_OP_QMAX_POOL2D;
    s->pool.attr = &s->pool_attr;
    s->pool.n_in = 1;
    s->pool.in = s->pool_in;
    s->pool.in_shape = &s->conv_shape;
    s->pool.ws = NULL;
}

size_t sy_qconv_pool_conv_bytes(const sy_kargs *k) {
    sy_qconv_geom g = sy_qconv_geometry(k);
    return (size_t)((g.n * g.oh * g.ow * g.o + 63) / 64 * 64);
}

static size_t qconv_pool_ws(const sy_kargs *k, int threads) {
    return sy_qconv_pool_conv_bytes(k) + qconv_ws(k, threads);
}

static void qconv_pool(const sy_kargs *k) {
    sy_qconv_pool_parts s;
    sy_qconv_pool_split(k, k->ws, &s);
    s.conv.ws = (int8_t *)k->ws + sy_qconv_pool_conv_bytes(k);
    qconv2d(&s.conv);
    qpool(&s.pool, false);
}

/* ---- QMEAN (reduce.cc's EvalMean for int8 as TF 2.15 runs it: one integer requantize of the sum, the
 * multiplier divided by the count; the float formulation of later versions differs by one in places) ---- */

/* Sums over the reduced axes: out index i's sum in sum[i] (int32, as TFLite's temp_sum). */
static int64_t reduce_sums(const sy_kargs *k, int32_t *sum, int64_t n_out) {
    const sy_shape *xs = &k->in_shape[0];
    uint32_t axes = k->attr->q.axes;
    const int8_t *x = k->in[0];
    memset(sum, 0, (size_t)n_out * sizeof *sum);
    int64_t n = sy_shape_count(xs), per = 1;
    int first = -1, last = -1;
    for (int d = 0; d < xs->rank; d++)
        if (axes >> d & 1) {
            per *= xs->dims[d];
            first = first < 0 ? d : first;
            last = d;
        }
    if (first >= 0 && (axes >> first) == (1u << (last - first + 1)) - 1) {
        /* the reduced axes are consecutive (a global pool's H and W): x is (outer, per, inner) and out
         * (outer, inner), summed along the inner rows; the same integer sums in another order */
        int64_t inner = 1;
        for (int d = last + 1; d < xs->rank; d++) inner *= xs->dims[d];
        int64_t outer = inner && per ? n / (per * inner) : 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t r = 0; r < per; r++) {
                const int8_t *row = x + (o * per + r) * inner;
                int32_t *s = sum + o * inner;
                for (int64_t i = 0; i < inner; i++) s[i] += row[i];
            }
        return per;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, out = 0, mul = 1;
        for (int d = xs->rank - 1; d >= 0; d--) {
            int64_t idx = rest % xs->dims[d];
            rest /= xs->dims[d];
            if (!(axes >> d & 1)) {
                out += idx * mul;
                mul *= xs->dims[d];
            }
        }
        sum[out] += x[i];
    }
    return per;
}

static size_t qmean_ws(const sy_kargs *k, int threads) {
    (void)threads;
    return (size_t)sy_shape_count(k->out_shape) * sizeof(int32_t);
}

static void qmean(const sy_kargs *k) {
    const sy_attrs *a = k->attr;
    int64_t n_out = sy_shape_count(k->out_shape);
    int32_t *sum = k->ws;
    int64_t per = reduce_sums(k, sum, n_out);
    int8_t *y = k->out;
    if (per <= 0) return; /* nothing to average: the graph refuses empty values; no division by 0 */
    if (a->q.x_zp == a->q.y_zp && a->q.x_scale == a->q.y_scale) { /* the same meaning: the integer mean, truncated */
        for (int64_t i = 0; i < n_out; i++) y[i] = (int8_t)(sum[i] / (int32_t)per);
        return;
    }
    /* the input-to-output multiplier divided by the count: shifted up by floor(log2(count)) (at most 32, and
     * so that the shift stays >= -31), then an integer division */
    int shift = 0;
    for (int64_t c = per; c > 1; c >>= 1) shift++;
    if (shift > 32) shift = 32;
    if (shift > 31 + a->q.shift[0]) shift = 31 + a->q.shift[0];
    int32_t mult = (int32_t)(((int64_t)a->q.mult[0] << shift) / per);
    for (int64_t i = 0; i < n_out; i++) {
        int32_t v = sy_q_requantize(sum[i] - a->q.x_zp * (int32_t)per, mult, a->q.shift[0] - shift) + a->q.y_zp;
        y[i] = (int8_t)clamp32(v, -128, 127);
    }
}

/* ---- QSOFTMAX (optimized_ops::Softmax with PopulateSoftmaxLookupTable, which the reference
 * resolver's SOFTMAX runs for int8 too) ---- */

static size_t qsoftmax_ws(const sy_kargs *k, int threads) {
    (void)k, (void)threads;
    return 256 * sizeof(float);
}

static void qsoftmax(const sy_kargs *k) {
    const sy_attrs *a = k->attr;
    float *table = k->ws;
    const float scale = -a->q.x_scale * a->q.beta;
    for (int32_t v = 0; v <= 255; v++) table[255 - v] = expf(scale * (float)v);
    int64_t depth = k->in_shape[0].dims[k->in_shape[0].rank - 1];
    if (depth <= 0) return;
    int64_t rows = sy_shape_count(k->out_shape) / depth;
    const int8_t *x = k->in[0];
    int8_t *y = k->out;
    for (int64_t r = 0; r < rows; r++, x += depth, y += depth) {
        int32_t max = -128;
        for (int64_t j = 0; j < depth; j++) max = x[j] > max ? x[j] : max;
        const float *t = table + 255 - max;
        float sum = 0;
        for (int64_t j = 0; j < depth; j++) sum += t[x[j]];
        const float inv = 1.0f / (sum * a->q.y_scale);
        for (int64_t j = 0; j < depth; j++) {
            float p = t[x[j]] * inv;
            y[j] = (int8_t)clamp32(float_to_q(round_away(p), -(1 << 24), 1 << 24) + a->q.y_zp, -128, 127);
        }
    }
}

/* ---- QPAD (reference_ops::Pad with the output's zero point as the value) ------------------ */

static void qpad(const sy_kargs *k) {
    const sy_shape *xs = &k->in_shape[0], *ys = k->out_shape;
    int8_t *y = k->out;
    const int8_t *x = k->in[0];
    memset(y, (int8_t)k->attr->q.y_zp, (size_t)sy_shape_count(ys));
    /* copied in runs: the innermost padded axis and the unpadded ones inside it, contiguous in x and in y
     * (the stem's PAD of (16, 224, 224, 3): rows of 224 x 3 bytes) */
    int cut = xs->rank - 1;
    while (cut > 0 && xs->dims[cut] == ys->dims[cut]) cut--;
    int64_t n = sy_shape_count(xs), last = 1;
    for (int d = cut < 0 ? 0 : cut; d < xs->rank; d++) last *= xs->dims[d];
    if (last <= 0) return;
    for (int64_t i = 0; i < n; i += last) { /* run by run */
        int64_t rest = i, off = 0, mul = 1;
        for (int d = xs->rank - 1; d >= 0; d--) {
            int64_t idx = rest % xs->dims[d];
            rest /= xs->dims[d];
            off += (idx + k->attr->q.pad_before[d]) * mul;
            mul *= ys->dims[d];
        }
        memcpy(y + off, x + i, (size_t)last);
    }
}

static const sy_kernel qref_table[SY_OP_COUNT] = {
    [SY_OP_QUANTIZE] = {quantize, NULL, NULL},
    [SY_OP_DEQUANTIZE] = {dequantize, NULL, NULL},
    [SY_OP_QCONV2D] = {qconv2d, qconv_ws, NULL},
    [SY_OP_QFULLY_CONNECTED] = {qfully_connected, NULL, NULL},
    [SY_OP_QADD] = {qadd, NULL, NULL},
    [SY_OP_QMAX_POOL2D] = {qmax_pool2d, NULL, NULL},
    [SY_OP_QAVG_POOL2D] = {qavg_pool2d, NULL, NULL},
    [SY_OP_QMEAN] = {qmean, qmean_ws, NULL},
    [SY_OP_QSOFTMAX] = {qsoftmax, qsoftmax_ws, NULL},
    [SY_OP_QPAD] = {qpad, NULL, NULL},
    [SY_OP_QCONV2D_POOL] = {qconv_pool, qconv_pool_ws, NULL},
};

const sy_kernel *sy_qref_kernel(sy_op op) {
    /* the hybrid ops (dynamic-range quantization, qhybrid.c) are scalar references too */
    if (op == SY_OP_HFULLY_CONNECTED) return &sy_qhybrid_fully_connected;
    if (op == SY_OP_HLSTM) return &sy_qhybrid_lstm;
    return (unsigned)op < SY_OP_COUNT && qref_table[op].run ? &qref_table[op] : NULL;
}
