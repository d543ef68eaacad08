/*
 * qrequant.h - TFLite's requantization (sy_q_requantize, qmath.c) on 16
 * int32 lanes with AVX-512, exactly, for the int8 kernels of issue 18
 * (qgemm_fast.c, qdepthwise.c): per-channel multipliers and shifts loaded
 * once per 16 channels (qg_req_load), then qg_requant16 per vector.
 * docs/design/int8-kernels.md says why each step is exact.
 */
#ifndef SY_QREQUANT_H
#define SY_QREQUANT_H

#include "cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && !defined(SY_QGEMM_PORTABLE)
#define SY_HAVE_QREQUANT16 1
#include <immintrin.h>

/* sy_q_requantize on 16 lanes, exactly (qmath.c): the wrapping left shift,
 * the doubled high product with halves rounded up -- ((x m) + 2^30) >> 31
 * in 64 bits, which is gemmlowp's nudge-and-truncate for both signs -- and
 * its one overflow, INT32_MIN x INT32_MIN, which alone yields 2^31 (read
 * back as INT32_MIN) and is saturated to INT32_MAX; then the right shift
 * with halves rounded away from zero. */
typedef struct qg_req {
    __m512i mult, mult_odd, left, right, rmask, rhalf;
    bool any_left, any_min; /* a lane shifts left; a lane's multiplier is INT32_MIN (steps skipped otherwise) */
} qg_req;

static inline qg_req qg_req_load(const sy_qgemm_params *p, int64_t c, __mmask16 lanes) {
    qg_req r;
    __m512i shift = _mm512_maskz_loadu_epi32(lanes, p->shift + c);
    r.mult = _mm512_maskz_loadu_epi32(lanes, p->mult + c);
    r.mult_odd = _mm512_srli_epi64(r.mult, 32);
    r.left = _mm512_max_epi32(shift, _mm512_setzero_si512());
    r.right = _mm512_max_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), shift), _mm512_setzero_si512());
    r.rmask = _mm512_sub_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), r.right), _mm512_set1_epi32(1));
    r.rhalf = _mm512_srli_epi32(r.rmask, 1);
    r.any_left = _mm512_test_epi32_mask(r.left, r.left) != 0;
    r.any_min = _mm512_cmpeq_epi32_mask(r.mult, _mm512_set1_epi32(INT32_MIN)) != 0;
    return r;
}

static inline __m512i qg_requant16(__m512i x, const qg_req *r) {
    __m512i s = r->any_left ? _mm512_sllv_epi32(x, r->left) : x;
    __m512i nudge = _mm512_set1_epi64((int64_t)1 << 30);
    __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(s, r->mult), nudge);
    __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(s, 32), r->mult_odd), nudge);
    /* bits 31..62 of each product: the even lanes' shifted down, the odd lanes' up into the high half */
    __m512i h = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 31), _mm512_slli_epi64(po, 1));
    if (r->any_min)
        h = _mm512_mask_mov_epi32(h, _mm512_cmpeq_epi32_mask(h, _mm512_set1_epi32(INT32_MIN)),
                                  _mm512_set1_epi32(INT32_MAX));
    __m512i fl = _mm512_srav_epi32(h, r->right);
    /* remainder > (mask >> 1) + (h < 0), as remainder - (h < 0) > mask >> 1 */
    __m512i t = _mm512_add_epi32(_mm512_and_si512(h, r->rmask), _mm512_srai_epi32(h, 31));
    return _mm512_mask_sub_epi32(fl, _mm512_cmpgt_epi32_mask(t, r->rhalf), fl, _mm512_set1_epi32(-1));
}

#endif
#endif
