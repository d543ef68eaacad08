/*
 * qconv.c - the cpu backend's fast int8 convolution, fully-connected and
 * pooling kernels and its int8 ADD (issue 18): the ops of qref.c (QCONV2D,
 * QFULLY_CONNECTED, QMAX_POOL2D, QAVG_POOL2D, QADD) over the
 * fast int8 product (qgemm_fast.c, AVX-512 VNNI) and the fast depthwise
 * conv (qdepthwise.c), on the exec context's threads. They compute exactly
 * what qref.c's kernels compute -- the same im2col (taps outside the image
 * hold the input zero point), the same integer sums, the same
 * requantization -- so the outputs are TFLite's reference kernels' bit for
 * bit; the op harness runs every int8 row on ref and cpu and compares.
 *
 * A convolution packs its weights once per call (O KH KW C bytes, small
 * beside the product), then walks the output rows in chunks of CHUNK
 * rows: the chunk's im2col rows are built in parallel (a 1x1, stride-1,
 * unpadded conv reads the input rows as they are), then multiplied. Chunks
 * and their parts are fixed by the shapes, so the bits do not depend on the
 * thread count. A depthwise conv (groups = C, one input channel a group)
 * runs sy_qdepthwise_i8 on the filter transposed to TFLite's
 * (1, KH, KW, C M); other grouped convs, and products of 2^16 terms or
 * more (past the fast product's int16-safe bound), run qref.c's kernels.
 *
 * The pools take the window's taps in qref.c's order, a whole pixel's
 * channels at a time (contiguous in NHWC, so the compiler vectorises the
 * max or the int32 sum), output rows spread over the threads; a maximum and
 * an integer sum do not depend on the order, so the bits are qref.c's.
 *
 * ADD (a residual connection) is three requantizations an element; it runs
 * them 16 lanes at a time with qrequant.h's exact requantization (the
 * scalar sy_q_requantize for the tail and without AVX-512), in parts of
 * ADD_PART elements over the threads; QUANTIZE from float32 likewise. (A
 * table of ADD's 65,536 outputs, one load an element, measured no faster on
 * ResNet-50: its loads miss L1.)
 */
#include "cpu_internal.h"
#include "qrequant.h"

#include <math.h>

#define CHUNK 3072 /* output rows per im2col chunk: 3072 x K bytes stay in L2 for K up to a few hundred */
#define ROWS_PER_PART 64

static bool pointwise(const sy_qconv_geom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->groups == 1;
}

static bool depthwise(const sy_qconv_geom *g) { return g->groups == g->c && g->cg == 1 && g->groups > 1; }

static sy_qgemm_params params(const sy_kargs *k, int64_t n_out) {
    const int32_t *bias = k->in[2], *m = k->in[3];
    return (sy_qgemm_params){k->attr->q.x_zp, k->attr->q.y_zp, k->attr->q.act_min, k->attr->q.act_max,
                             bias, m, m + n_out};
}

static size_t qconv_ws(const sy_kargs *k, int threads) {
    sy_qconv_geom g = sy_qconv_geometry(k);
    if (depthwise(&g)) return (size_t)(g.kh * g.kw * g.o);
    if (g.groups > 1 || g.k >= 65536) {
        const sy_kernel *ref = sy_qref_kernel(SY_OP_QCONV2D);
        return ref->workspace ? ref->workspace(k, threads) : 0;
    }
    size_t packed = (size_t)((sy_qgemm_packed_bytes(g.o, g.k) + 63) / 64 * 64);
    return packed + (pointwise(&g) ? 0 : (size_t)(CHUNK * g.k));
}

typedef struct im2col_job {
    const sy_qconv_geom *g;
    const int8_t *x;
    int8_t *col, zp;
    int64_t row0, rows; /* output rows [row0, row0 + rows) of the whole batch */
} im2col_job;

/* n bytes, inline for the few of a small conv's taps (a call each would cost more than the copy): two
 * overlapping fixed-size copies, the first and the last 16 (or 8) bytes */
static inline void copy_bytes(int8_t *dst, const int8_t *src, int64_t n) {
    if (n > 32) {
        memcpy(dst, src, (size_t)n);
    } else if (n >= 16) {
        memcpy(dst, src, 16);
        memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
        memcpy(dst, src, 8);
        memcpy(dst + n - 8, src + n - 8, 8);
    } else {
        for (int64_t i = 0; i < n; i++) dst[i] = src[i];
    }
}

static void im2col_part(void *ctx, int64_t part) {
    const im2col_job *j = ctx;
    const sy_qconv_geom *g = j->g;
    int64_t r0 = part * ROWS_PER_PART, r1 = r0 + ROWS_PER_PART < j->rows ? r0 + ROWS_PER_PART : j->rows;
    const int64_t span = g->kw * g->cg; /* a filter row's taps: contiguous in x where dw = 1 and all inside */
    for (int64_t r = r0; r < r1; r++) {
        int64_t at = j->row0 + r, ox = at % g->ow, oy = (at / g->ow) % g->oh, b = at / (g->ow * g->oh);
        int8_t *dst = j->col + r * g->k;
        int64_t ix0 = ox * g->sw - g->pw;
        bool inside = g->dw == 1 && g->cg == g->c && ix0 >= 0 && ix0 + g->kw <= g->w;
        for (int64_t i = 0; i < g->kh; i++) {
            int64_t iy = oy * g->sh - g->ph + i * g->dh;
            if (iy < 0 || iy >= g->h) {
                memset(dst, j->zp, (size_t)span);
                dst += span;
                continue;
            }
            const int8_t *xrow = j->x + (b * g->h + iy) * g->w * g->c;
            if (inside) {
                copy_bytes(dst, xrow + ix0 * g->c, span);
                dst += span;
                continue;
            }
            for (int64_t t = 0; t < g->kw; t++, dst += g->cg) {
                int64_t ix = ix0 + t * g->dw;
                if (ix < 0 || ix >= g->w)
                    memset(dst, j->zp, (size_t)g->cg);
                else
                    copy_bytes(dst, xrow + ix * g->c, g->cg);
            }
        }
    }
}

static void qconv2d(const sy_kargs *k) {
    sy_qconv_geom g = sy_qconv_geometry(k);
    const int8_t *x = k->in[0], *w = k->in[1];
    int8_t *y = k->out;
    sy_qgemm_params p = params(k, g.o);
    if (depthwise(&g)) {
        int8_t *wt = k->ws; /* (O, KH, KW, 1) -> (1, KH, KW, O) */
        for (int64_t o = 0; o < g.o; o++)
            for (int64_t t = 0; t < g.kh * g.kw; t++) wt[t * g.o + o] = w[o * g.kh * g.kw + t];
        sy_qdw_geom d = {g.n, g.h, g.w, g.c, g.o / g.c, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.oh, g.ow};
        sy_qdepthwise_i8(k->ex, y, x, wt, &d, &p);
        return;
    }
    if (g.groups > 1 || g.k >= 65536) {
        sy_qref_kernel(SY_OP_QCONV2D)->run(k);
        return;
    }
    int8_t *packed = k->ws;
    sy_qgemm_pack(packed, w, g.o, g.k);
    int64_t m = g.n * g.oh * g.ow;
    if (pointwise(&g)) {
        sy_qgemm_i8(k->ex, y, g.o, x, g.c, packed, m, g.o, g.k, &p);
        return;
    }
    int8_t *col = packed + (sy_qgemm_packed_bytes(g.o, g.k) + 63) / 64 * 64;
    for (int64_t r0 = 0; r0 < m; r0 += CHUNK) {
        int64_t rows = m - r0 < CHUNK ? m - r0 : CHUNK;
        im2col_job j = {&g, x, col, (int8_t)k->attr->q.x_zp, r0, rows};
        sy_parallel_parts(k->ex, (rows + ROWS_PER_PART - 1) / ROWS_PER_PART, im2col_part, &j);
        sy_qgemm_i8(k->ex, y + r0 * g.o, g.o, col, g.k, packed, rows, g.o, g.k, &p);
    }
}

static size_t qfc_ws(const sy_kargs *k, int threads) {
    (void)threads;
    const sy_shape *w = &k->in_shape[1];
    if (w->dims[1] >= 65536) return 0;
    return (size_t)sy_qgemm_packed_bytes(w->dims[0], w->dims[1]);
}

static void qfully_connected(const sy_kargs *k) {
    const sy_shape *w = &k->in_shape[1];
    int64_t units = w->dims[0], depth = w->dims[1], rows = sy_shape_count(&k->in_shape[0]) / depth;
    sy_qgemm_params p = params(k, units);
    if (depth >= 65536) {
        sy_qref_kernel(SY_OP_QFULLY_CONNECTED)->run(k);
        return;
    }
    sy_qgemm_i8_unpacked(k->ex, k->out, units, k->in[0], depth, k->in[1], rows, units, depth, &p, k->ws);
}

/* ---- pools ------------------------------------------------------------------------------- */

typedef struct qpool_job {
    const sy_kargs *k;
    bool avg;
    int64_t n, h, w, c, oh, ow, ph, pw;
} qpool_job;

static void sum_taps(int32_t *restrict acc, const int8_t *restrict v, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] += v[i];
}
static void max_taps(int32_t *restrict acc, const int8_t *restrict v, int64_t n) {
    for (int64_t i = 0; i < n; i++) acc[i] = v[i] > acc[i] ? v[i] : acc[i];
}

static void qpool_part(void *ctx, int64_t part) { /* part: one output row (b, oy) */
    const qpool_job *j = ctx;
    const sy_attrs *a = j->k->attr;
    const int8_t *x = j->k->in[0];
    int64_t b = part / j->oh, oy = part % j->oh, c = j->c;
    int32_t acc[256];
    for (int64_t ox = 0; ox < j->ow; ox++) {
        int64_t y0 = oy * a->q.stride[0] - j->ph, x0 = ox * a->q.stride[1] - j->pw;
        int64_t i0 = y0 < 0 ? -y0 : 0, i1 = j->h - y0 < a->q.ksize[0] ? j->h - y0 : a->q.ksize[0];
        int64_t t0 = x0 < 0 ? -x0 : 0, t1 = j->w - x0 < a->q.ksize[1] ? j->w - x0 : a->q.ksize[1];
        int32_t count = (int32_t)((i1 > i0 ? i1 - i0 : 0) * (t1 > t0 ? t1 - t0 : 0));
        int8_t *y = (int8_t *)j->k->out + ((b * j->oh + oy) * j->ow + ox) * c;
        for (int64_t c0 = 0; c0 < c; c0 += 256) {
            int64_t cn = c - c0 < 256 ? c - c0 : 256;
            for (int64_t ch = 0; ch < cn; ch++) acc[ch] = j->avg ? 0 : -128;
            for (int64_t i = i0; i < i1; i++)
                for (int64_t t = t0; t < t1; t++) {
                    const int8_t *restrict v = x + ((b * j->h + y0 + i) * j->w + x0 + t) * c + c0;
                    if (j->avg)
                        sum_taps(acc, v, cn);
                    else
                        max_taps(acc, v, cn);
                }
            if (j->avg && count) /* to the nearest, halves away from zero, as qref.c */
                for (int64_t ch = 0; ch < cn; ch++)
                    acc[ch] = acc[ch] > 0 ? (acc[ch] + count / 2) / count : (acc[ch] - count / 2) / count;
            int32_t lo = a->q.act_min, hi = a->q.act_max;
            for (int64_t ch = 0; ch < cn; ch++) {
                int32_t v = acc[ch] < lo ? lo : acc[ch];
                y[c0 + ch] = (int8_t)(v > hi ? hi : v);
            }
        }
    }
}

static void qpool(const sy_kargs *k, bool avg) {
    const sy_attrs *a = k->attr;
    const sy_shape *xs = &k->in_shape[0];
    qpool_job j = {k, avg, xs->dims[0], xs->dims[1], xs->dims[2], xs->dims[3], 0, 0, 0, 0};
    sy_conv_out(j.h, a->q.ksize[0], a->q.stride[0], a->q.padding, &j.oh, &j.ph);
    sy_conv_out(j.w, a->q.ksize[1], a->q.stride[1], a->q.padding, &j.ow, &j.pw);
    sy_parallel_parts(k->ex, j.n * j.oh, qpool_part, &j);
}

static void qmax_pool2d(const sy_kargs *k) { qpool(k, false); }
static void qavg_pool2d(const sy_kargs *k) { qpool(k, true); }

/* ---- ADD (reference_integer_ops::Add) -------------------------------------------------------- */

#define ADD_PART 16384

static int32_t add_one(const sy_attrs *a, int32_t x1, int32_t x2) { /* qref.c's qadd, one element */
    int32_t v1 = (x1 - a->q.x_zp) * (1 << a->q.left_shift), v2 = (x2 - a->q.x2_zp) * (1 << a->q.left_shift);
    int32_t s1 = sy_q_requantize(v1, a->q.mult[0], a->q.shift[0]);
    int32_t s2 = sy_q_requantize(v2, a->q.mult[1], a->q.shift[1]);
    int32_t out = sy_q_requantize(s1 + s2, a->q.mult[2], a->q.shift[2]) + a->q.y_zp;
    return out < a->q.act_min ? a->q.act_min : out > a->q.act_max ? a->q.act_max : out;
}

static void qadd_part(void *ctx, int64_t part) {
    const sy_kargs *k = ctx;
    const sy_attrs *a = k->attr;
    const int8_t *x1 = k->in[0], *x2 = k->in[1];
    int8_t *y = k->out;
    int64_t n = sy_shape_count(k->out_shape), i = part * ADD_PART, end = i + ADD_PART < n ? i + ADD_PART : n;
#ifdef SY_HAVE_QREQUANT16
    int32_t mult[3][16], shift[3][16];
    qg_req r[3];
    for (int j = 0; j < 3; j++) {
        for (int l = 0; l < 16; l++) mult[j][l] = a->q.mult[j], shift[j][l] = a->q.shift[j];
        sy_qgemm_params p = {.mult = mult[j], .shift = shift[j]};
        r[j] = qg_req_load(&p, 0, 0xFFFF);
    }
    __m512i zp1 = _mm512_set1_epi32(a->q.x_zp), zp2 = _mm512_set1_epi32(a->q.x2_zp);
    __m512i yzp = _mm512_set1_epi32(a->q.y_zp), lo = _mm512_set1_epi32(a->q.act_min);
    __m512i hi = _mm512_set1_epi32(a->q.act_max);
    for (; i + 16 <= end; i += 16) {
        __m512i v1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x1 + i)));
        __m512i v2 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x2 + i)));
        /* (x - zp) << 20 stays below 2^28: the shift is the multiplication qref.c does */
        v1 = _mm512_slli_epi32(_mm512_sub_epi32(v1, zp1), (unsigned)a->q.left_shift);
        v2 = _mm512_slli_epi32(_mm512_sub_epi32(v2, zp2), (unsigned)a->q.left_shift);
        __m512i sum = _mm512_add_epi32(qg_requant16(v1, &r[0]), qg_requant16(v2, &r[1]));
        __m512i out = _mm512_add_epi32(qg_requant16(sum, &r[2]), yzp);
        out = _mm512_min_epi32(_mm512_max_epi32(out, lo), hi);
        _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(out));
    }
#endif
    for (; i < end; i++) y[i] = (int8_t)add_one(a, x1[i], x2[i]);
}

static void qadd(const sy_kargs *k) {
    int64_t n = sy_shape_count(k->out_shape);
    sy_parallel_parts(k->ex, (n + ADD_PART - 1) / ADD_PART, qadd_part, (void *)k);
}

/* ---- QUANTIZE float32 -> int8 (reference_ops::AffineQuantize, qref.c's) ------------------------------------
 * The first op of every int8 model with float inputs: qref.c's loop, single-threaded, with a division and a
 * roundf call per value, took as long as the Fashion-MNIST CNN's fused conv. Here 16 lanes at a time over the
 * threads, in the same steps: the IEEE division (vdivps rounds as divss does), TfLiteRound's halves away from
 * zero as truncation plus one step away from zero where the dropped part is at least a half (exact: the
 * fraction is an exact difference, and below 2^23 t +- 1 is exact; above it every float is an integer), the
 * float clamp to +-2^24 with NaN going to the low end (as qref.c's float_to_q), then the zero point and the
 * int8 clamp in int32. An int8 input (requantize) runs qref.c's loop. */

static void quantize_part(void *ctx, int64_t part) {
    const sy_kargs *k = ctx;
    const sy_attrs *a = k->attr;
    const float *x = k->in[0];
    int8_t *y = k->out;
    int64_t n = sy_shape_count(k->out_shape), i = part * ADD_PART, end = i + ADD_PART < n ? i + ADD_PART : n;
#ifdef SY_HAVE_QREQUANT16
    const __m512 scale = _mm512_set1_ps(a->q.y_scale), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 lo = _mm512_set1_ps(-(float)(1 << 24)), hi = _mm512_set1_ps((float)(1 << 24));
    const __m512i zp = _mm512_set1_epi32(a->q.y_zp), i8lo = _mm512_set1_epi32(-128), i8hi = _mm512_set1_epi32(127);
    const __m512 zero = _mm512_setzero_ps();
    for (; i + 16 <= end; i += 16) {
        __m512 d = _mm512_div_ps(_mm512_loadu_ps(x + i), scale);
        __m512 t = _mm512_roundscale_ps(d, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m512 f = _mm512_abs_ps(_mm512_sub_ps(d, t));
        __mmask16 up = _mm512_cmp_ps_mask(f, half, _CMP_GE_OQ), pos = _mm512_cmp_ps_mask(d, zero, _CMP_GT_OQ);
        __m512 q = _mm512_mask_add_ps(t, up & pos, t, one);
        q = _mm512_mask_sub_ps(q, up & (__mmask16)~pos, q, one);
        q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(q, lo, _CMP_GE_OQ), lo, q); /* NaN and below: lo */
        q = _mm512_min_ps(q, hi);
        __m512i v = _mm512_add_epi32(_mm512_cvttps_epi32(q), zp);
        v = _mm512_min_epi32(_mm512_max_epi32(v, i8lo), i8hi);
        _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(v));
    }
#endif
    for (; i < end; i++) { /* qref.c's steps, one value */
        float q = roundf(x[i] / a->q.y_scale);
        int32_t v = !(q >= -(float)(1 << 24)) ? -(1 << 24) : q > (float)(1 << 24) ? 1 << 24 : (int32_t)q;
        v += a->q.y_zp;
        y[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
    }
}

static void quantize(const sy_kargs *k) {
    if (k->in_dtype[0] != SY_F32) {
        sy_qref_kernel(SY_OP_QUANTIZE)->run(k);
        return;
    }
    int64_t n = sy_shape_count(k->out_shape);
    sy_parallel_parts(k->ex, (n + ADD_PART - 1) / ADD_PART, quantize_part, (void *)k);
}

const sy_kernel sy_cpu_qconv2d = {qconv2d, qconv_ws, NULL};
const sy_kernel sy_cpu_quantize = {quantize, NULL, NULL};
const sy_kernel sy_cpu_qadd = {qadd, NULL, NULL};
const sy_kernel sy_cpu_qmax_pool2d = {qmax_pool2d, NULL, NULL};
const sy_kernel sy_cpu_qavg_pool2d = {qavg_pool2d, NULL, NULL};
const sy_kernel sy_cpu_qfully_connected = {qfully_connected, qfc_ws, NULL};
