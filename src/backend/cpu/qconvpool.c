/*
 * qconvpool.c - the cpu backend's QCONV2D_POOL (issue 18): an int8 conv and
 * the max pool after it in one pass, as the compiler's fusion pass makes
 * it (compiler/fusion.c says when, and why taking the largest int32
 * accumulator of a window and requantizing it alone gives the byte that
 * requantizing all of them and pooling the bytes gives). qref.c's
 * QCONV2D_POOL -- the conv, then the pool -- defines the results; this one
 * matches it bit for bit (tests/test_qconv_pool.c).
 *
 * A direct convolution, no im2col (which took a quarter of the Fashion-MNIST
 * CNN's int8 predict, with K = 9): with AVX-512 VNNI, `vpdpbusd` multiplies
 * 4 unsigned bytes of input by 4 signed bytes of weights into 16 int32
 * lanes. A kernel row of taps -- KW pixels of C channels -- is KW C bytes
 * adjacent in an NHWC image (stride or not: the row's taps start at the
 * output pixel's first column), so the input is read in place, 4 bytes a
 * broadcast, each row's bytes rounded up to a multiple of 4 with zero
 * weights (whatever the 1 to 3 bytes past it hold, they add nothing):
 *
 *   - the input is copied once per call as unsigned bytes (x + 128, i.e.
 *     x ^ 0x80), padded with the zero point (x_zp + 128: those taps add
 *     (x_zp - x_zp) w = 0, as the reference's im2col does) to the rows and
 *     columns the windows reach, plus 3 bytes a row;
 *   - the weights are packed per call, per block of 64 output channels:
 *     for each kernel row and each 4 bytes of it, 4 vectors of 16 channels
 *     x 4 bytes, signed;
 *   - sum (x + 128) w = sum x w + 128 sum w, so each channel's accumulators
 *     start at bias - (x_zp + 128) sum w, and end at the reference's
 *     accumulator exactly (int32 arithmetic modulo 2^32, associative; the
 *     fusion pass's bound keeps it from wrapping).
 *
 * Each pooled pixel's window of conv pixels is taken 4 (or 2, or 1) pixels
 * at a time, x 1 to 4 vectors of channels: 16 accumulators, 4 weight
 * vectors and 4 broadcasts in registers; the window's maximum is
 * requantized with qrequant.h's exact arithmetic, offset, clamped by the
 * conv's activation and then the pool's, and stored: a 2x2 pool writes and
 * requantizes a quarter of what the conv then pool did. Parallel parts:
 * the copy by images, the product by pooled output rows (fixed by the
 * shapes; integer results do not depend on the order anyway).
 *
 * Without VNNI (and for grouped or dilated convs) it runs the cpu backend's
 * QCONV2D (im2col and qgemm_fast.c's AVX2 or portable product) into the
 * workspace, then its QMAX_POOL2D: the same bits, without the saving.
 */
#include "cpu_internal.h"
#include "qrequant.h"

#if defined(SY_HAVE_QREQUANT16) && defined(__AVX512VNNI__) && !defined(SY_QGEMM_NO_VNNI)
#define QCP_DIRECT 1
#endif

static size_t align64(int64_t bytes) { return (size_t)((bytes + 63) / 64 * 64); }

/* The geometry of the direct pass: the conv's, the pool's, and the padded copy's. */
typedef struct qcp_geom {
    sy_qconv_geom g;
    int64_t pk[2], ps[2], ppt, ppl, poh, pow_; /* the pool's window, strides, leading padding, output */
    int64_t kr, groups4;                       /* bytes of a kernel row rounded up to 4; kr / 4 */
    int64_t prows, pcols, rs, image;           /* padded rows, columns, bytes a row, bytes an image */
    int64_t blocks;                            /* blocks of 64 output channels */
} qcp_geom;

static qcp_geom qcp_geometry(const sy_kargs *k) {
    qcp_geom q;
    q.g = sy_qconv_geometry(k);
    const sy_attrs *a = k->attr;
    for (int i = 0; i < 2; i++) q.pk[i] = a->q.pool.ksize[i], q.ps[i] = a->q.pool.stride[i];
    sy_conv_out(q.g.oh, q.pk[0], q.ps[0], a->q.pool.padding, &q.poh, &q.ppt);
    sy_conv_out(q.g.ow, q.pk[1], q.ps[1], a->q.pool.padding, &q.pow_, &q.ppl);
    q.kr = (q.g.kw * q.g.c + 3) / 4 * 4;
    q.groups4 = q.kr / 4;
    q.prows = (q.g.oh - 1) * q.g.sh + q.g.kh;
    q.pcols = (q.g.ow - 1) * q.g.sw + q.g.kw;
    q.rs = q.pcols * q.g.c + 3;
    q.image = q.prows * q.rs;
    q.blocks = (q.g.o + 63) / 64;
    return q;
}

static bool direct(const qcp_geom *q) {
#ifdef QCP_DIRECT
    return q->g.groups == 1 && q->g.dh == 1 && q->g.dw == 1;
#else
    (void)q;
    return false;
#endif
}

/* The direct pass's workspace: packed weights, per-channel starts, the padded unsigned copy. */
static int64_t packed_bytes(const qcp_geom *q) { return q->blocks * q->g.kh * q->kr * 64; }

static size_t qcp_ws(const sy_kargs *k, int threads) {
    qcp_geom q = qcp_geometry(k);
    if (direct(&q)) return align64(packed_bytes(&q)) + align64(q.blocks * 64 * 4) + align64(q.g.n * q.image);
    sy_qconv_pool_parts s;
    sy_qconv_pool_split(k, NULL, &s);
    return sy_qconv_pool_conv_bytes(k) + sy_cpu_qconv2d.workspace(&s.conv, threads);
}

#ifdef QCP_DIRECT

#define QCP_UNROLL _Pragma("GCC unroll 4")

typedef struct qcp_job {
    const sy_kargs *k;
    const qcp_geom *q;
    const int8_t *packed;
    const int32_t *start; /* bias - (x_zp + 128) sum w, per channel (blocks x 64) */
    uint8_t *xp;          /* the padded unsigned copy, n images */
} qcp_job;

/* One image of the padded copy: x ^ 0x80 inside, x_zp ^ 0x80 outside, 0 in the 3 bytes past each row. */
static void qcp_copy_part(void *ctx, int64_t b) {
    const qcp_job *j = ctx;
    const qcp_geom *q = j->q;
    const sy_qconv_geom *g = &q->g;
    const int8_t *x = j->k->in[0];
    uint8_t zp = (uint8_t)(j->k->attr->q.x_zp ^ 0x80);
    int64_t c = g->c, ix0 = -g->pw, in0 = ix0 < 0 ? 0 : ix0, in1 = ix0 + q->pcols < g->w ? ix0 + q->pcols : g->w;
    for (int64_t r = 0; r < q->prows; r++) {
        uint8_t *dst = j->xp + b * q->image + r * q->rs;
        int64_t iy = r - g->ph;
        memset(dst, zp, (size_t)(q->pcols * c));
        memset(dst + q->pcols * c, 0, 3);
        if (iy < 0 || iy >= g->h || in1 <= in0) continue;
        const int8_t *src = x + ((b * g->h + iy) * g->w + in0) * c;
        uint8_t *d = dst + (in0 - ix0) * c;
        for (int64_t i = 0; i < (in1 - in0) * c; i++) d[i] = (uint8_t)(src[i] ^ 0x80);
    }
}

/* P conv pixels (their first tap's bytes at px[0 .. P)) x NV vectors of 16 channels: accumulators from
 * the channels' starts through every kernel row, then into the window's maxima mx. */
static inline __attribute__((always_inline)) void qcp_dot(const uint8_t *const *px, const int P, const int NV,
                                                          const int8_t *wb, int64_t kh, int64_t g4, int64_t rs,
                                                          const __m512i *start, __m512i *mx) {
    __m512i acc[4][4];
    QCP_UNROLL for (int p = 0; p < P; p++) {
        QCP_UNROLL for (int v = 0; v < NV; v++) acc[p][v] = start[v];
    }
    for (int64_t i = 0; i < kh; i++) {
        const int8_t *wr = wb + i * g4 * 256;
        for (int64_t t = 0; t < g4; t++) {
            __m512i w[4];
            QCP_UNROLL for (int v = 0; v < NV; v++) w[v] = _mm512_loadu_si512(wr + t * 256 + v * 64);
            QCP_UNROLL for (int p = 0; p < P; p++) {
                int32_t four;
                memcpy(&four, px[p] + i * rs + 4 * t, 4);
                __m512i b = _mm512_set1_epi32(four);
                QCP_UNROLL for (int v = 0; v < NV; v++) acc[p][v] = _mm512_dpbusd_epi32(acc[p][v], b, w[v]);
            }
        }
    }
    QCP_UNROLL for (int p = 0; p < P; p++) {
        QCP_UNROLL for (int v = 0; v < NV; v++) mx[v] = _mm512_max_epi32(mx[v], acc[p][v]);
    }
}

static void qcp_dot_any(const uint8_t *const *px, int P, int NV, const int8_t *wb, int64_t kh, int64_t g4,
                        int64_t rs, const __m512i *start, __m512i *mx) {
#define QCP_CASE(PP, VV)                                                                                           \
    if (P == PP && NV == VV) {                                                                                     \
        qcp_dot(px, PP, VV, wb, kh, g4, rs, start, mx);                                                            \
        return;                                                                                                    \
    }
#define QCP_ROW(PP) QCP_CASE(PP, 1) QCP_CASE(PP, 2) QCP_CASE(PP, 3) QCP_CASE(PP, 4)
    QCP_ROW(4) QCP_ROW(2) QCP_ROW(1)
#undef QCP_ROW
#undef QCP_CASE
    for (int p = 0; p < P; p++) qcp_dot_any(px + p, 1, NV, wb, kh, g4, rs, start, mx); /* P = 3 */
}

/* qcp_dot for kernels of R <= 3 groups of 4 bytes in all (KH x the row's groups: the Fashion-MNIST CNN's 3x3x1
 * is 3), with the R x NV weight vectors held in registers by the caller for a whole output row, rather than
 * loaded for every group of pixels (16 accumulators + 12 weights + a broadcast fit AVX-512's 32 registers). */
static inline __attribute__((always_inline)) void qcp_dot_reg(const uint8_t *const *px, const int P, const int NV,
                                                              const int R, const int64_t *roff,
                                                              const __m512i (*w)[4], const __m512i *start,
                                                              __m512i *mx) {
    __m512i acc[4][4];
    QCP_UNROLL for (int p = 0; p < P; p++) {
        QCP_UNROLL for (int v = 0; v < NV; v++) acc[p][v] = start[v];
    }
    QCP_UNROLL for (int r = 0; r < R; r++) {
        QCP_UNROLL for (int p = 0; p < P; p++) {
            int32_t four;
            memcpy(&four, px[p] + roff[r], 4);
            __m512i b = _mm512_set1_epi32(four);
            QCP_UNROLL for (int v = 0; v < NV; v++) acc[p][v] = _mm512_dpbusd_epi32(acc[p][v], b, w[r][v]);
        }
    }
    QCP_UNROLL for (int p = 0; p < P; p++) {
        QCP_UNROLL for (int v = 0; v < NV; v++) mx[v] = _mm512_max_epi32(mx[v], acc[p][v]);
    }
}

/* What one pooled output row's blocks share. */
typedef struct qcp_row {
    const qcp_job *j;
    const uint8_t *xb; /* the image's padded copy */
    int8_t *out;       /* the row's first output byte */
    int64_t y0, y1;    /* the conv rows its windows cover */
    int64_t c0, cn;    /* the block's first channel and its channels */
    int nv;            /* vectors of 16 channels: (cn + 15) / 16 */
    const int8_t *wb;  /* the block's packed weights */
    const qg_req *req;
    const __m512i *start;
} qcp_row;

/* One block of channels over every pooled pixel of the row: each window's conv pixels 4 at a time (the rest one
 * by one), the maximum requantized, offset, clamped by the conv's activation and then the pool's, stored. R > 0:
 * the kernel's R groups of 4 bytes, NV vectors, weights in registers (qcp_dot_reg); R = 0: any kernel, c->nv
 * vectors (qcp_dot_any). */
static inline __attribute__((always_inline)) void qcp_block(const qcp_row *c, const int R, const int NV) {
    const qcp_geom *q = c->j->q;
    const sy_qconv_geom *g = &q->g;
    const sy_attrs *a = c->j->k->attr;
    const int nv = NV ? NV : c->nv;
    __m512i w[3][4];
    int64_t roff[3];
    QCP_UNROLL for (int r = 0; r < R; r++) {
        roff[r] = r / q->groups4 * q->rs + 4 * (r % q->groups4);
        QCP_UNROLL for (int v = 0; v < NV; v++) w[r][v] = _mm512_loadu_si512(c->wb + r * 256 + v * 64);
    }
    const __m512i yzp = _mm512_set1_epi32(a->q.y_zp);
    /* the conv's clamp, then the pool's: one clamp to where they overlap when they do */
    int32_t l1 = a->q.act_min, h1 = a->q.act_max, l2 = a->q.pool.act_min, h2 = a->q.pool.act_max;
    if ((l1 > l2 ? l1 : l2) <= (h1 < h2 ? h1 : h2)) l1 = l2 = l1 > l2 ? l1 : l2, h1 = h2 = h1 < h2 ? h1 : h2;
    const __m512i lo1 = _mm512_set1_epi32(l1), hi1 = _mm512_set1_epi32(h1);
    const __m512i lo2 = _mm512_set1_epi32(l2), hi2 = _mm512_set1_epi32(h2);
    const bool twice = l1 != l2 || h1 != h2;
    /* a window with no conv pixel (TFLite's padding leaves none): the reference pool's -128, clamped */
    int32_t empty = -128 < a->q.pool.act_min ? a->q.pool.act_min : -128 > a->q.pool.act_max ? a->q.pool.act_max : -128;
    /* a whole 2x2 window (the tutorial's MaxPooling2D(2) over the conv's interior): its two rows of two
     * pixels straight to qcp_dot_reg, no list of pixels, so the maxima stay in registers */
    const bool two = R && q->pk[0] == 2 && q->pk[1] == 2 && c->y1 - c->y0 == 2;
    const int64_t step = g->sw * g->c, down = g->sh * q->rs;
    for (int64_t px = 0; px < q->pow_; px++) {
        int64_t cx0 = px * q->ps[1] - q->ppl, x0 = cx0 < 0 ? 0 : cx0;
        int64_t x1 = cx0 + q->pk[1] < g->ow ? cx0 + q->pk[1] : g->ow;
        int8_t *y = c->out + px * g->o + c->c0;
        if (c->y1 <= c->y0 || x1 <= x0) {
            memset(y, (int8_t)empty, (size_t)c->cn);
            continue;
        }
        __m512i mx[4];
        for (int v = 0; v < 4; v++) mx[v] = _mm512_set1_epi32(INT32_MIN);
        if (two && x1 - x0 == 2) {
            const uint8_t *r0 = c->xb + c->y0 * down + x0 * step;
            const uint8_t *top[2] = {r0, r0 + step}, *bottom[2] = {r0 + down, r0 + down + step};
            qcp_dot_reg(top, 2, NV, R, roff, (const __m512i(*)[4])w, c->start, mx);
            qcp_dot_reg(bottom, 2, NV, R, roff, (const __m512i(*)[4])w, c->start, mx);
        } else {
            const uint8_t *pix[4];
            int np = 0;
            for (int64_t cy = c->y0; cy < c->y1; cy++)
                for (int64_t cx = x0; cx < x1; cx++) {
                    pix[np++] = c->xb + cy * down + cx * step;
                    if (np < (R ? 2 : 4)) continue;
                    if (R) qcp_dot_reg(pix, 2, NV, R, roff, (const __m512i(*)[4])w, c->start, mx);
                    else qcp_dot_any(pix, 4, nv, c->wb, g->kh, q->groups4, q->rs, c->start, mx);
                    np = 0;
                }
            if (R)
                for (int p = 0; p < np; p++) qcp_dot_reg(pix + p, 1, NV, R, roff, (const __m512i(*)[4])w, c->start, mx);
            else if (np)
                qcp_dot_any(pix, np, nv, c->wb, g->kh, q->groups4, q->rs, c->start, mx);
        }
        __m128i bytes[4];
        for (int v = 0; v < nv; v++) {
            __m512i o = _mm512_add_epi32(qg_requant16(mx[v], &c->req[v]), yzp);
            o = _mm512_max_epi32(_mm512_min_epi32(o, hi1), lo1);
            if (twice) o = _mm512_max_epi32(_mm512_min_epi32(o, hi2), lo2);
            bytes[v] = _mm512_cvtsepi32_epi8(o);
        }
        if (NV == 4) { /* a whole block: one 64-byte store */
            __m512i all = _mm512_inserti32x4(_mm512_castsi128_si512(bytes[0]), bytes[1], 1);
            all = _mm512_inserti32x4(_mm512_inserti32x4(all, bytes[2], 2), bytes[3], 3);
            _mm512_storeu_si512(y, all);
            continue;
        }
        for (int v = 0; v < nv; v++) {
            int64_t left = c->cn - v * 16;
            __mmask16 lanes = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            _mm_mask_storeu_epi8(y + v * 16, lanes, bytes[v]);
        }
    }
}

/* One pooled output row (b, py): every block of channels over every pooled pixel. */
static void qcp_part(void *ctx, int64_t part) {
    const qcp_job *j = ctx;
    const qcp_geom *q = j->q;
    const sy_qconv_geom *g = &q->g;
    const sy_qgemm_params p = {.mult = (const int32_t *)j->k->in[3], .shift = (const int32_t *)j->k->in[3] + g->o};
    int64_t b = part / q->poh, py = part % q->poh, cy0 = py * q->ps[0] - q->ppt;
    qcp_row c = {.j = j, .xb = j->xp + b * q->image, .out = (int8_t *)j->k->out + (b * q->poh + py) * q->pow_ * g->o,
                 .y0 = cy0 < 0 ? 0 : cy0, .y1 = cy0 + q->pk[0] < g->oh ? cy0 + q->pk[0] : g->oh};
    int64_t groups = g->kh * q->groups4;
    for (int64_t cb = 0; cb < q->blocks; cb++) {
        c.c0 = cb * 64, c.cn = g->o - c.c0 < 64 ? g->o - c.c0 : 64;
        c.nv = (int)((c.cn + 15) / 16);
        qg_req r[4];
        __m512i start[4];
        for (int v = 0; v < c.nv; v++) {
            int64_t left = c.cn - v * 16;
            __mmask16 lanes = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            r[v] = qg_req_load(&p, c.c0 + v * 16, lanes);
            start[v] = _mm512_loadu_si512(j->start + c.c0 + v * 16);
        }
        c.req = r, c.start = start;
        c.wb = j->packed + cb * g->kh * q->kr * 64;
        if (c.nv == 4 && groups == 3) qcp_block(&c, 3, 4);
        else if (c.nv == 4 && groups == 2) qcp_block(&c, 2, 4);
        else if (c.nv == 4 && groups == 1) qcp_block(&c, 1, 4);
        else qcp_block(&c, 0, 0);
    }
}

static void qcp_direct(const sy_kargs *k, const qcp_geom *q) {
    const sy_qconv_geom *g = &q->g;
    const int8_t *w = k->in[1];
    const int32_t *bias = k->in[2];
    int8_t *packed = k->ws;
    int32_t *start = (int32_t *)(packed + align64(packed_bytes(q)));
    uint8_t *xp = (uint8_t *)start + align64(q->blocks * 64 * 4);
    /* weights: block, kernel row, 4 bytes of it, 4 vectors of 16 channels x 4 bytes; zero past the row's
     * KW C bytes and past the last channel */
    memset(packed, 0, (size_t)packed_bytes(q));
    int64_t row = g->kw * g->c;
    for (int64_t ch = 0; ch < g->o; ch++) {
        int64_t cb = ch / 64, v = ch % 64 / 16, lane = ch % 16;
        uint32_t sum = 0;
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t t = 0; t < row; t++) {
                int8_t wv = w[ch * g->k + i * row + t];
                sum += (uint32_t)(int32_t)wv;
                packed[((cb * g->kh + i) * q->groups4 + t / 4) * 256 + v * 64 + lane * 4 + t % 4] = wv;
            }
        /* bias - (x_zp + 128) sum w, modulo 2^32 */
        start[ch] = (int32_t)((uint32_t)bias[ch] - (uint32_t)(k->attr->q.x_zp + 128) * sum);
    }
    for (int64_t ch = g->o; ch < q->blocks * 64; ch++) start[ch] = 0;
    qcp_job j = {k, q, packed, start, xp};
    sy_parallel_parts(k->ex, g->n, qcp_copy_part, &j);
    sy_parallel_parts(k->ex, g->n * q->poh, qcp_part, &j);
}

#endif /* QCP_DIRECT */

static void qconv2d_pool(const sy_kargs *k) {
#ifdef QCP_DIRECT
    qcp_geom q = qcp_geometry(k);
    if (direct(&q)) {
        qcp_direct(k, &q);
        return;
    }
#endif
    sy_qconv_pool_parts s;
    sy_qconv_pool_split(k, k->ws, &s);
    s.conv.ws = (int8_t *)k->ws + sy_qconv_pool_conv_bytes(k);
    sy_cpu_qconv2d.run(&s.conv);
    sy_cpu_qmax_pool2d.run(&s.pool);
}

const sy_kernel sy_cpu_qconv2d_pool = {qconv2d_pool, qcp_ws, NULL};
