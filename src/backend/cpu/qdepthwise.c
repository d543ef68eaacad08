/*
 * qdepthwise.c - the int8 depthwise conv of issue 18 (TFLite's
 * DEPTHWISE_CONV_2D with per-channel quantization): a reference twin that
 * is TFLite's arithmetic, and a fast version over the exec context's
 * threads that matches it bit for bit.
 *
 * x (N, H, W, C) int8 NHWC, the filter (1, KH, KW, C * mult) int8 as TFLite
 * stores it, output channel oc = ic * mult + m, y (N, OH, OW, C * mult):
 *
 *     acc = bias[oc] + sum over taps inside the image of (x[iy][ix][ic] - x_zp) w[ky][kx][oc]
 *     y   = clamp(y_zp + requantize(acc, mult[oc], shift[oc]), act_min, act_max)
 *
 * iy = oy * sh - pt + ky * dh (and the same in x): taps in the padding are
 * left out, which is padding x by x_zp -- exactly
 * tflite::reference_integer_ops::DepthwiseConvPerChannel (TensorFlow 2.15,
 * tensorflow/lite/kernels/internal/reference/integer_ops/depthwise_conv.h),
 * whose sums are int32 and whose requantization is sy_q_requantize.
 *
 * The fast version (AVX-512, depth multiplier 1, the case of the ResNet-like
 * and MobileNet-style models): per output row, per 16 channels, the filter
 * widened to int32 once, then each pixel's sum over its taps as 16 int32
 * lanes (the x bytes sign-extended, x_zp subtracted, vpmulld), requantized
 * by qrequant.h and stored while in registers. Integer sums in any order
 * are the reference's (modulo 2^32, k = KH KW < 2^16 terms). Other depth
 * multipliers and other machines run the reference's loop on the same
 * row partition. Parts are output rows (n, oy), fixed by the shapes.
 */
#include "cpu_internal.h"
#include "qrequant.h"

/* Output rows [row0, row1) of rows numbered n * oh + oy, by the reference's loops. */
static void qdw_ref_rows(int8_t *y, const int8_t *x, const int8_t *w, const sy_qdw_geom *g,
                         const sy_qgemm_params *p, int64_t row0, int64_t row1) {
    int64_t oc_n = g->c * g->mult;
    for (int64_t row = row0; row < row1; row++) {
        int64_t b = row / g->oh, oy = row % g->oh;
        for (int64_t ox = 0; ox < g->ow; ox++)
            for (int64_t ic = 0; ic < g->c; ic++)
                for (int64_t m = 0; m < g->mult; m++) {
                    int64_t oc = ic * g->mult + m;
                    int32_t acc = 0;
                    for (int64_t ky = 0; ky < g->kh; ky++) {
                        int64_t iy = oy * g->sh - g->pt + ky * g->dh;
                        if (iy < 0 || iy >= g->h) continue;
                        for (int64_t kx = 0; kx < g->kw; kx++) {
                            int64_t ix = ox * g->sw - g->pl + kx * g->dw;
                            if (ix < 0 || ix >= g->w) continue;
                            int32_t xv = x[((b * g->h + iy) * g->w + ix) * g->c + ic];
                            acc += (int32_t)w[(ky * g->kw + kx) * oc_n + oc] * (xv - p->x_zp);
                        }
                    }
                    if (p->bias) acc += p->bias[oc];
                    int32_t v = sy_q_requantize(acc, p->mult[oc], p->shift[oc]) + p->y_zp;
                    v = v < p->act_min ? p->act_min : v > p->act_max ? p->act_max : v;
                    y[((b * g->oh + oy) * g->ow + ox) * oc_n + oc] = (int8_t)v;
                }
    }
}

void sy_qdepthwise_i8_ref(int8_t *y, const int8_t *x, const int8_t *w, const sy_qdw_geom *g,
                          const sy_qgemm_params *p) {
    qdw_ref_rows(y, x, w, g, p, 0, g->n * g->oh);
}

typedef struct qdw_job {
    int8_t *y;
    const int8_t *x, *w;
    const sy_qdw_geom *g;
    const sy_qgemm_params *p;
} qdw_job;

#if defined(SY_HAVE_QREQUANT16)
#define QDW_MAX_TAPS 64 /* filters of up to 8 x 8 taps keep their widened weights on the stack */

static void qdw_row_fast(const qdw_job *j, int64_t row) {
    const sy_qdw_geom *g = j->g;
    const sy_qgemm_params *p = j->p;
    int64_t b = row / g->oh, oy = row % g->oh, c = g->c, taps = g->kh * g->kw;
    const __m512i xzp = _mm512_set1_epi32(p->x_zp), yzp = _mm512_set1_epi32(p->y_zp);
    const __m512i lo = _mm512_set1_epi32(p->act_min), hi = _mm512_set1_epi32(p->act_max);
    /* the taps' rows inside the image for this output row (the same for every pixel of it) */
    int64_t ky0 = 0, ky1 = g->kh;
    while (ky0 < g->kh && oy * g->sh - g->pt + ky0 * g->dh < 0) ky0++;
    while (ky1 > ky0 && oy * g->sh - g->pt + (ky1 - 1) * g->dh >= g->h) ky1--;
    for (int64_t c0 = 0; c0 < c; c0 += 16) {
        int64_t valid = c - c0 < 16 ? c - c0 : 16;
        __mmask16 lanes = (__mmask16)_bzhi_u32(0xFFFFu, (unsigned)valid);
        __m512i wv[QDW_MAX_TAPS];
        for (int64_t t = 0; t < taps; t++)
            wv[t] = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, j->w + t * c + c0));
        qg_req rq = qg_req_load(p, c0, lanes);
        __m512i bias = p->bias ? _mm512_maskz_loadu_epi32(lanes, p->bias + c0) : _mm512_setzero_si512();
        for (int64_t ox = 0; ox < g->ow; ox++) {
            __m512i acc = bias;
            for (int64_t ky = ky0; ky < ky1; ky++) {
                int64_t iy = oy * g->sh - g->pt + ky * g->dh;
                const int8_t *xrow = j->x + ((b * g->h + iy) * g->w) * c + c0;
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t ix = ox * g->sw - g->pl + kx * g->dw;
                    if (ix < 0 || ix >= g->w) continue;
                    __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, xrow + ix * c));
                    acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_sub_epi32(xv, xzp), wv[ky * g->kw + kx]));
                }
            }
            __m512i o = _mm512_add_epi32(qg_requant16(acc, &rq), yzp);
            o = _mm512_min_epi32(_mm512_max_epi32(o, lo), hi);
            _mm512_mask_cvtepi32_storeu_epi8(j->y + ((b * g->oh + oy) * g->ow + ox) * c + c0, lanes, o);
        }
    }
}

static void qdw_part(void *ctx, int64_t row) {
    const qdw_job *j = ctx;
    if (j->g->mult == 1 && j->g->kh * j->g->kw <= QDW_MAX_TAPS)
        qdw_row_fast(j, row);
    else
        qdw_ref_rows(j->y, j->x, j->w, j->g, j->p, row, row + 1);
}
#else
static void qdw_part(void *ctx, int64_t row) {
    const qdw_job *j = ctx;
    qdw_ref_rows(j->y, j->x, j->w, j->g, j->p, row, row + 1);
}
#endif

void sy_qdepthwise_i8(const sy_exec *ex, int8_t *y, const int8_t *x, const int8_t *w, const sy_qdw_geom *g,
                      const sy_qgemm_params *p) {
    qdw_job j = {y, x, w, g, p};
    int64_t rows = g->n * g->oh;
    if (!ex || ex->threads <= 1) {
        for (int64_t r = 0; r < rows; r++) qdw_part(&j, r);
        return;
    }
    sy_parallel_parts(ex, rows, qdw_part, &j);
}
