/*
 * qgemm_fast.c - the fast int8 matrix product of issue 18: qgemm.c's
 * contract (sy_qgemm_i8_ref defines every bit) on packed weights, over the
 * exec context's threads, with AVX-512 VNNI where the compiler targets it,
 * AVX2 (vpmovzxbw + vpmaddwd) where it has only that, and a portable C loop
 * elsewhere; all three on the same packed weights.
 * docs/design/int8-kernels.md.
 *
 * The instruction: vpdpbusd multiplies 4 unsigned bytes by 4 signed bytes
 * and adds the four products to an int32 lane, 64 products per zmm
 * instruction, wrapping (not saturating) in 32 bits. Its unsigned operand
 * is the weights moved to u8 (w + 128, the sign bit flipped at packing
 * time); its signed operand is the input itself, broadcast 4 bytes at a
 * time straight from x's rows (an embedded broadcast, no shuffle, no
 * conversion of x). So the kernel sums
 *
 *     S[i][c] = sum_k (w[c][k] + 128) x[i][k]
 *             = sum_k w[c][k] x[i][k] + 128 rowsum[i]        (rowsum[i] = sum_k x[i][k])
 *
 * and the contract's accumulator is
 *
 *     acc[i][c] = bias[c] + sum_k (x[i][k] - x_zp) w[c][k]
 *               = S[i][c] - 128 rowsum[i] + (bias[c] - x_zp sumw[c])   (sumw[c] = sum_k w[c][k])
 *
 * sumw is computed once at packing, rowsum once per block of rows. All of
 * it is int32 arithmetic modulo 2^32, where addition is associative: the
 * result equals the reference's accumulator whenever that one does not
 * overflow (k < 2^16 with in-range biases, qgemm.c), whatever the order or
 * the intermediate wraps. The requantization (TFLite's two roundings) is
 * then done 16 lanes at a time in exact integer steps (qrequant.h).
 *
 * Packed weights: a header (n, k), sumw (n rounded up to 16 int32), then
 * panels of 64 output channels (the last one 16, 32, 48 or 64 wide), each
 * k-major: for every group of 4 k's, the panel's channels' 4 bytes
 * w + 128 in a row, so that one zmm load is 16 channels x 4 k's. Channels
 * past n and k's past k are u8 zeros, which add nothing whatever x holds.
 *
 * The micro-kernel holds a 6-row x 64-channel tile in 24 zmm accumulators:
 * per 4 k's it loads 4 weight vectors and does 24 vpdpbusd, each row's 4
 * bytes broadcast from memory. Small tiles (the batch-1 dense layers) split
 * k over up to 4 accumulator sets so that the additions are not one
 * dependency chain. The epilogue requantizes, clamps and stores the tile
 * while it is still in registers.
 *
 * Parallelism: the output is cut into blocks of QG_MB rows x NB channels,
 * NB fixed by k (a block's weights stay in L2, <= QG_WBLOCK bytes), both by
 * the shapes alone; blocks are numbered channel-block-major so that a
 * thread's consecutive blocks share their weights. Each output element is
 * computed by one thread; integer sums make the bits the same on any
 * thread count anyway.
 */
#include "cpu_internal.h"
#include "qrequant.h"

#define QG_MR 6              /* rows of the micro-tile */
#define QG_NP 64             /* channels of a packed panel (4 zmm of 16 int32) */
#define QG_MB 48             /* rows of a parallel block: 8 micro-tiles */
#define QG_WBLOCK (256 << 10) /* bytes of weights a parallel block uses at most (Zen 4's L2 is 1 MB) */
#define QG_HEADER 64         /* bytes: n, k, padding */

typedef struct qg_header {
    int64_t n, k;
} qg_header;

static int64_t qg_np(int64_t n) { return (n + 15) / 16 * 16; }
static int64_t qg_kb(int64_t k) { return (k + 3) / 4; }
static int64_t qg_sumw_bytes(int64_t n) { return sy_align_up(qg_np(n) * 4, 64); }

int64_t sy_qgemm_packed_bytes(int64_t n, int64_t k) {
    return QG_HEADER + qg_sumw_bytes(n) + qg_np(n) * qg_kb(k) * 4;
}

static const int32_t *qg_sumw(const void *packed) { return (const int32_t *)((const char *)packed + QG_HEADER); }
static const uint8_t *qg_panels(const void *packed, int64_t n) {
    return (const uint8_t *)packed + QG_HEADER + qg_sumw_bytes(n);
}

void sy_qgemm_pack(void *packed, const int8_t *w, int64_t n, int64_t k) {
    SY_ASSERT(n > 0 && k > 0 && k < (1 << 16));
    memset(packed, 0, (size_t)sy_qgemm_packed_bytes(n, k));
    qg_header h = {n, k};
    memcpy(packed, &h, sizeof h);
    int32_t *sumw = (int32_t *)((char *)packed + QG_HEADER);
    uint8_t *panels = (uint8_t *)packed + QG_HEADER + qg_sumw_bytes(n);
    int64_t np = qg_np(n), kb = qg_kb(k);
    for (int64_t c = 0; c < n; c++) {
        const int8_t *wc = w + c * k;
        int64_t p0 = c / QG_NP * QG_NP, width = np - p0 < QG_NP ? np - p0 : QG_NP, lane = c - p0;
        uint8_t *dst = panels + p0 * kb * 4 + lane * 4;
        int32_t s = 0;
        for (int64_t kk = 0; kk < k; kk++) s += wc[kk];
        sumw[c] = s;
        /* 4 k's at a time: the group's 4 bytes are adjacent in w and in the panel (a byte at a time, the
         * packing of ResNet-50's 25 MB of weights took 4% of its int8 predict) */
        int64_t groups = k / 4, g = 0;
        for (; g < groups; g++) {
            uint32_t v;
            memcpy(&v, wc + 4 * g, 4);
            v ^= 0x80808080u;
            memcpy(dst + g * width * 4, &v, 4);
        }
        for (int64_t kk = 4 * g; kk < k; kk++) dst[g * width * 4 + kk % 4] = (uint8_t)((uint8_t)wc[kk] ^ 0x80u);
    }
}

typedef struct qg_job {
    int8_t *y;
    const int8_t *x;
    const void *packed;
    const sy_qgemm_params *p;
    int64_t ldy, ldx, m, n, k, nb, rblocks, cblocks;
    const int32_t *rowc; /* VNNI: 128 rowsum of each row, computed up front (qg_rowc_part); NULL: per block */
} qg_job;

/* colc[c] = bias[c] - x_zp sumw[c], modulo 2^32 (unsigned: no signed overflow for any bias) */
static inline int32_t qg_colc(const qg_job *j, int64_t c) {
    uint32_t b = j->p->bias ? (uint32_t)j->p->bias[c] : 0u;
    return (int32_t)(b - (uint32_t)j->p->x_zp * (uint32_t)qg_sumw(j->packed)[c]);
}


#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__) && !defined(SY_QGEMM_NO_VNNI) &&      \
    !defined(SY_QGEMM_PORTABLE)
#include <immintrin.h>

/* loops over the tile's rows, vectors and sets unrolled early, so that its accumulators become registers */
#define QG_UNROLL _Pragma("GCC unroll 8")

static inline int32_t qg_load32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
/* 1-3 bytes, the rest zeros (a byte loop: memcpy of a variable size is a call, per row of every tile) */
static inline int32_t qg_load_tail(const int8_t *p, int64_t bytes) {
    uint32_t v = 0;
    for (int64_t b = 0; b < bytes; b++) v |= (uint32_t)(uint8_t)p[b] << (8 * b);
    return (int32_t)v;
}

/* rowsum of each of rows rows of x (k bytes): the unsigned sum of x ^ 0x80 by vpsadbw, less 128 k */
static void qg_rowsums(const int8_t *x, int64_t ldx, int64_t rows, int64_t k, int32_t *out) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t r = 0; r < rows; r++) {
        const int8_t *xr = x + r * ldx;
        __m512i s = _mm512_setzero_si512();
        int64_t kk = 0;
        for (; kk + 64 <= k; kk += 64)
            s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(xr + kk), flip),
                                                    _mm512_setzero_si512()));
        if (kk < k) {
            __mmask64 lanes = _bzhi_u64(~0ull, (unsigned)(k - kk));
            /* masked-off bytes load as 0, which ^ 0x80 makes 128: load them as 0x80 (x = -128) instead and flip */
            __m512i v = _mm512_mask_loadu_epi8(flip, lanes, xr + kk);
            s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_xor_si512(v, flip), _mm512_setzero_si512()));
        }
        out[r] = (int32_t)(_mm512_reduce_add_epi64(s) - 128 * k);
    }
}

/* The micro-tile: acc[r][v] = S for rows [0, MR) of x and channel vectors
 * [0, NV) of the panel wp (width panel bytes per 4 k's), over k. KU
 * accumulator sets take alternate groups of 4 k's. The constant MR, NV and
 * KU of each instance let GCC keep acc in registers. */
static inline __attribute__((always_inline)) void qg_tile(const int MR, const int NV, const int KU, const int8_t *x,
                                                         int64_t ldx, const uint8_t *wp, int64_t width, int64_t k,
                                                         __m512i out[QG_MR][4]) {
    __m512i acc[4][QG_MR][4];
    QG_UNROLL
    for (int u = 0; u < KU; u++)
        QG_UNROLL
        for (int r = 0; r < MR; r++)
            QG_UNROLL
            for (int v = 0; v < NV; v++) acc[u][r][v] = _mm512_setzero_si512();
    int64_t kbf = k / 4, kb = 0;
    const int64_t wstep = width * 4;
    for (; kb + KU <= kbf; kb += KU) {
        QG_UNROLL
        for (int u = 0; u < KU; u++) {
            const uint8_t *w = wp + (kb + u) * wstep;
            __m512i wv[4];
            QG_UNROLL
            for (int v = 0; v < NV; v++) wv[v] = _mm512_loadu_si512(w + v * 64);
            QG_UNROLL
            for (int r = 0; r < MR; r++) {
                __m512i xb = _mm512_set1_epi32(qg_load32(x + r * ldx + (kb + u) * 4));
                QG_UNROLL
                for (int v = 0; v < NV; v++) acc[u][r][v] = _mm512_dpbusd_epi32(acc[u][r][v], wv[v], xb);
            }
        }
    }
    for (; kb <= kbf; kb++) { /* the groups left over, and the last one with 1-3 k's (read without overrunning x) */
        int64_t left = k - kb * 4;
        if (left <= 0) break;
        const uint8_t *w = wp + kb * wstep;
        __m512i wv[4];
        QG_UNROLL
        for (int v = 0; v < NV; v++) wv[v] = _mm512_loadu_si512(w + v * 64);
        QG_UNROLL
        for (int r = 0; r < MR; r++) {
            int32_t xv = left >= 4 ? qg_load32(x + r * ldx + kb * 4) : qg_load_tail(x + r * ldx + kb * 4, left);
            __m512i xb = _mm512_set1_epi32(xv);
            QG_UNROLL
            for (int v = 0; v < NV; v++) acc[0][r][v] = _mm512_dpbusd_epi32(acc[0][r][v], wv[v], xb);
        }
    }
    QG_UNROLL
    for (int r = 0; r < MR; r++)
        QG_UNROLL
        for (int v = 0; v < NV; v++) {
            __m512i s = acc[0][r][v];
            QG_UNROLL
            for (int u = 1; u < KU; u++) s = _mm512_add_epi32(s, acc[u][r][v]);
            out[r][v] = s;
        }
}

/* Rows [0, mr) x channels [c0, c0 + 16 nv) of the block: the tile, then the epilogue. */
static void qg_tile_store(const qg_job *j, const int8_t *x, const int32_t *rowc, int64_t mr, int64_t c0, int nv,
                          int8_t *y) {
    const uint8_t *panels = qg_panels(j->packed, j->n);
    int64_t kb = qg_kb(j->k), np = qg_np(j->n);
    int64_t p0 = c0 / QG_NP * QG_NP, width = np - p0 < QG_NP ? np - p0 : QG_NP;
    const uint8_t *wp = panels + p0 * kb * 4 + (c0 - p0) * 4;
    __m512i acc[QG_MR][4];
    /* every (rows, vectors) pair its own instance; tiles of few accumulators split k over more sets */
#define QG_CASE(R, V)                                                                                              \
    case (R) * 8 + (V):                                                                                            \
        qg_tile(R, V, (R) * (V) <= 2 ? 4 : (R) * (V) <= 8 ? 2 : 1, x, j->ldx, wp, width, j->k, acc);             \
        break;
#define QG_ROW(R) QG_CASE(R, 1) QG_CASE(R, 2) QG_CASE(R, 3) QG_CASE(R, 4)
    switch (mr * 8 + nv) {
        QG_ROW(1) QG_ROW(2) QG_ROW(3) QG_ROW(4) QG_ROW(5) QG_ROW(6)
    default: SY_ASSERT(!"qgemm tile shape");
    }
#undef QG_ROW
#undef QG_CASE
    const sy_qgemm_params *p = j->p;
    const __m512i zp = _mm512_set1_epi32(p->y_zp);
    const int32_t *sumw = qg_sumw(j->packed);
    for (int v = 0; v < nv; v++) {
        int64_t c = c0 + v * 16, valid = j->n - c < 16 ? j->n - c : 16;
        __mmask16 lanes = (__mmask16)_bzhi_u32(0xFFFFu, (unsigned)valid);
        qg_req rq = qg_req_load(p, c, lanes);
        /* bias - x_zp sumw, wrapping (the padded lanes' sumw are zeros) */
        __m512i colc = _mm512_sub_epi32(p->bias ? _mm512_maskz_loadu_epi32(lanes, p->bias + c) : _mm512_setzero_si512(),
                                        _mm512_mullo_epi32(_mm512_set1_epi32(p->x_zp), _mm512_loadu_si512(sumw + c)));
        for (int64_t r = 0; r < mr; r++) {
            __m512i a = _mm512_sub_epi32(_mm512_add_epi32(acc[r][v], colc), _mm512_set1_epi32(rowc[r]));
            acc[r][v] = _mm512_add_epi32(qg_requant16(a, &rq), zp);
        }
    }
    /* each row's vectors to bytes with saturating packs -- the clamp to [act_min, act_max] within [-128, 127]
     * makes saturating first the same as clamping the int32 -- then one store of the row's channels. The
     * packs work within 128-bit lanes: dword 4 L + q of the result holds vector q's lane L, which the
     * permutation puts at 4 q + L. */
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    const __m512i lo = _mm512_set1_epi8((char)p->act_min), hi = _mm512_set1_epi8((char)p->act_max);
    int64_t valid = j->n - c0 < 16 * nv ? j->n - c0 : 16 * nv;
    __mmask64 bytes = _bzhi_u64(~0ull, (unsigned)valid);
    for (int v = nv; v < 4; v++)
        for (int64_t r = 0; r < mr; r++) acc[r][v] = _mm512_setzero_si512();
    for (int64_t r = 0; r < mr; r++) {
        __m512i b = _mm512_packs_epi16(_mm512_packs_epi32(acc[r][0], acc[r][1]), _mm512_packs_epi32(acc[r][2], acc[r][3]));
        b = _mm512_min_epi8(_mm512_max_epi8(_mm512_permutexvar_epi32(order, b), lo), hi);
        _mm512_mask_storeu_epi8(y + r * j->ldy + c0, bytes, b);
    }
}

static void qg_block(void *ctx, int64_t part) {
    const qg_job *j = ctx;
    int64_t cb = part / j->rblocks, rb = part % j->rblocks;
    int64_t r0 = rb * QG_MB, r1 = r0 + QG_MB < j->m ? r0 + QG_MB : j->m;
    int64_t c0 = cb * j->nb, c1 = c0 + j->nb < j->n ? c0 + j->nb : j->n;
    for (int64_t r = r0; r < r1; r += QG_MR) {
        int64_t mr = r1 - r < QG_MR ? r1 - r : QG_MR;
        const int8_t *x = j->x + r * j->ldx;
        int32_t own[QG_MR];
        const int32_t *rowc = j->rowc ? j->rowc + r : own;
        if (!j->rowc) {
            qg_rowsums(x, j->ldx, mr, j->k, own);
            for (int64_t i = 0; i < mr; i++) own[i] = (int32_t)((uint32_t)own[i] * 128u);
        }
        for (int64_t c = c0; c < c1; c += QG_NP) {
            int64_t nc = c1 - c < QG_NP ? c1 - c : QG_NP;
            qg_tile_store(j, x, rowc, mr, c, (int)((nc + 15) / 16), j->y + r * j->ldy);
        }
    }
}

/* Where several channel blocks share rows, their rowsums once, up front: QG_MB rows a part into j->rowc
 * (the deep layers' blocks recomputed them for each of up to 8 channel blocks). */
#define QG_ROWC 1
#define QG_RCHUNK (85 * QG_MB) /* rows a product's up-front rowsums cover at a time: 16 KB of stack */
static void qg_rowc_part(void *ctx, int64_t part) {
    const qg_job *j = ctx;
    int64_t r0 = part * QG_MB, rows = j->m - r0 < QG_MB ? j->m - r0 : QG_MB;
    int32_t *out = (int32_t *)j->rowc + r0;
    qg_rowsums(j->x + r0 * j->ldx, j->ldx, rows, j->k, out);
    for (int64_t i = 0; i < rows; i++) out[i] = (int32_t)((uint32_t)out[i] * 128u);
}

#elif defined(__AVX2__) && !defined(SY_QGEMM_PORTABLE)
/* AVX2 without VNNI: the same packed bytes, widened to int16 (vpmovzxbw: w + 128 is 0..255) and multiplied
 * by x's 4 bytes sign-extended, in pairs summed to int32 by vpmaddwd -- exact, unlike vpmaddubsw, whose int16
 * pair sums saturate (255 x -128 x 2 does not fit). An accumulator holds 4 channels x 2 pair sums; vphaddd
 * folds the pairs at the end. Tiles of 2 rows x 16 channels (8 accumulators, 4 widened weight vectors). */
#include <immintrin.h>

#define QG_MR2 2

/* x's 4 bytes at group kb of a row as 4 int16 repeated over the vector; qg_xwords_tail: the last group's
 * 1-3 bytes, without reading past k */
static inline __m256i qg_xwords(const int8_t *xr, int64_t kb) {
    int32_t v;
    memcpy(&v, xr + kb * 4, 4);
    return _mm256_cvtepi8_epi16(_mm_set1_epi32(v));
}
static inline __m256i qg_xwords_tail(const int8_t *xr, int64_t kb, int64_t k) {
    uint32_t v = 0;
    for (int64_t b = 0; b < k - kb * 4; b++) v |= (uint32_t)(uint8_t)xr[kb * 4 + b] << (8 * b);
    return _mm256_cvtepi8_epi16(_mm_set1_epi32((int32_t)v));
}

static inline __m256i qg_requant8(__m256i x, __m256i m, __m256i sh) {
    const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
    __m256i left = _mm256_max_epi32(sh, zero), right = _mm256_max_epi32(_mm256_sub_epi32(zero, sh), zero);
    __m256i s = _mm256_sllv_epi32(x, left);
    __m256i nudge = _mm256_set1_epi64x((int64_t)1 << 30);
    __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(s, m), nudge);
    __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(s, 32), _mm256_srli_epi64(m, 32)), nudge);
    __m256i h = _mm256_blend_epi32(_mm256_srli_epi64(pe, 31), _mm256_slli_epi64(po, 1), 0xAA);
    h = _mm256_blendv_epi8(h, _mm256_set1_epi32(INT32_MAX), _mm256_cmpeq_epi32(h, _mm256_set1_epi32(INT32_MIN)));
    __m256i rmask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    __m256i fl = _mm256_srav_epi32(h, right);
    __m256i t = _mm256_add_epi32(_mm256_and_si256(h, rmask), _mm256_srai_epi32(h, 31));
    return _mm256_sub_epi32(fl, _mm256_cmpgt_epi32(t, _mm256_srli_epi32(rmask, 1))); /* true is -1: adds 1 */
}

static inline __attribute__((always_inline)) void qg_tile2(const int MR, const int8_t *x, int64_t ldx,
                                                          const uint8_t *wp, int64_t wstep, int64_t k,
                                                          __m256i out[QG_MR2][2]) {
    __m256i acc[QG_MR2][4];
    for (int r = 0; r < MR; r++)
        for (int q = 0; q < 4; q++) acc[r][q] = _mm256_setzero_si256();
    int64_t kbs = (k + 3) / 4, kbf = k / 4;
    for (int64_t kb = 0; kb < kbs; kb++) {
        const uint8_t *w = wp + kb * wstep;
        __m256i wz[4];
        for (int q = 0; q < 4; q++) wz[q] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(w + 16 * q)));
        for (int r = 0; r < MR; r++) {
            __m256i xb = kb < kbf ? qg_xwords(x + r * ldx, kb) : qg_xwords_tail(x + r * ldx, kb, k);
            for (int q = 0; q < 4; q++) acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(wz[q], xb));
        }
    }
    /* [c0 c1 c4 c5 | c2 c3 c6 c7] by vphaddd, put in order by 64-bit units (0, 2, 1, 3) */
    for (int r = 0; r < MR; r++) {
        out[r][0] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
        out[r][1] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][2], acc[r][3]), 0xD8);
    }
}

static void qg_block(void *ctx, int64_t part) {
    const qg_job *j = ctx;
    int64_t cb = part / j->rblocks, rb = part % j->rblocks;
    int64_t r0 = rb * QG_MB, r1 = r0 + QG_MB < j->m ? r0 + QG_MB : j->m;
    int64_t c0 = cb * j->nb, c1 = c0 + j->nb < j->n ? c0 + j->nb : j->n;
    const uint8_t *panels = qg_panels(j->packed, j->n);
    int64_t kb = qg_kb(j->k), np = qg_np(j->n);
    const sy_qgemm_params *p = j->p;
    int32_t rowc[QG_MB];
    for (int64_t i = r0; i < r1; i++) {
        const int8_t *xi = j->x + i * j->ldx;
        int32_t s = 0;
        for (int64_t kk = 0; kk < j->k; kk++) s += xi[kk];
        rowc[i - r0] = (int32_t)((uint32_t)s * 128u);
    }
    const __m256i zp = _mm256_set1_epi32(p->y_zp);
    const __m128i lo = _mm_set1_epi8((char)p->act_min), hi = _mm_set1_epi8((char)p->act_max);
    for (int64_t c = c0; c < c1; c += 16) {
        int64_t p0 = c / QG_NP * QG_NP, width = np - p0 < QG_NP ? np - p0 : QG_NP;
        const uint8_t *wp = panels + p0 * kb * 4 + (c - p0) * 4;
        int64_t valid = c1 - c < 16 ? c1 - c : 16;
        int32_t mult[16] = {0}, shift[16] = {0}, colc[16] = {0};
        for (int64_t i = 0; i < valid; i++) {
            mult[i] = p->mult[c + i];
            shift[i] = p->shift[c + i];
            colc[i] = qg_colc(j, c + i);
        }
        __m256i mv[2], sv[2], cv[2];
        for (int h = 0; h < 2; h++) {
            mv[h] = _mm256_loadu_si256((const __m256i *)(mult + 8 * h));
            sv[h] = _mm256_loadu_si256((const __m256i *)(shift + 8 * h));
            cv[h] = _mm256_loadu_si256((const __m256i *)(colc + 8 * h));
        }
        for (int64_t r = r0; r < r1; r += QG_MR2) {
            int mr = r1 - r < QG_MR2 ? (int)(r1 - r) : QG_MR2;
            __m256i acc[QG_MR2][2];
            if (mr == 2)
                qg_tile2(2, j->x + r * j->ldx, j->ldx, wp, width * 4, j->k, acc);
            else
                qg_tile2(1, j->x + r * j->ldx, j->ldx, wp, width * 4, j->k, acc);
            for (int i = 0; i < mr; i++) {
                __m256i rc = _mm256_set1_epi32(rowc[r - r0 + i]), o[2];
                for (int h = 0; h < 2; h++)
                    o[h] = _mm256_add_epi32(
                        qg_requant8(_mm256_sub_epi32(_mm256_add_epi32(acc[i][h], cv[h]), rc), mv[h], sv[h]), zp);
                /* saturating packs, then the clamp within [-128, 127] (the same as clamping the int32) */
                __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(o[0], o[1]), 0xD8);
                __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
                b = _mm_min_epi8(_mm_max_epi8(b, lo), hi);
                int8_t *yr = j->y + (r + i) * j->ldy + c;
                if (valid == 16)
                    _mm_storeu_si128((__m128i *)yr, b);
                else {
                    int8_t tmp[16];
                    _mm_storeu_si128((__m128i *)tmp, b);
                    memcpy(yr, tmp, (size_t)valid);
                }
            }
        }
    }
}

#else /* portable: the same algebra on the same packed layout, one output at a time */

static void qg_block(void *ctx, int64_t part) {
    const qg_job *j = ctx;
    int64_t cb = part / j->rblocks, rb = part % j->rblocks;
    int64_t r0 = rb * QG_MB, r1 = r0 + QG_MB < j->m ? r0 + QG_MB : j->m;
    int64_t c0 = cb * j->nb, c1 = c0 + j->nb < j->n ? c0 + j->nb : j->n;
    const uint8_t *panels = qg_panels(j->packed, j->n);
    int64_t kb = qg_kb(j->k), np = qg_np(j->n);
    const sy_qgemm_params *p = j->p;
    for (int64_t i = r0; i < r1; i++) {
        const int8_t *xi = j->x + i * j->ldx;
        uint32_t rowsum = 0;
        for (int64_t kk = 0; kk < j->k; kk++) rowsum += (uint32_t)(int32_t)xi[kk];
        for (int64_t c = c0; c < c1; c++) {
            int64_t p0 = c / QG_NP * QG_NP, width = np - p0 < QG_NP ? np - p0 : QG_NP;
            const uint8_t *wc = panels + p0 * kb * 4 + (c - p0) * 4;
            uint32_t s = 0;
            for (int64_t kk = 0; kk < j->k; kk++)
                s += (uint32_t)wc[(kk / 4) * width * 4 + kk % 4] * (uint32_t)(int32_t)xi[kk];
            int32_t acc = (int32_t)(s - 128u * rowsum + (uint32_t)qg_colc(j, c));
            int32_t v = sy_q_requantize(acc, p->mult[c], p->shift[c]) + p->y_zp;
            v = v < p->act_min ? p->act_min : v > p->act_max ? p->act_max : v;
            j->y[i * j->ldy + c] = (int8_t)v;
        }
    }
}
#endif

static void qg_run(const sy_exec *ex, void (*fn)(void *, int64_t), qg_job *j, int64_t parts) {
    if (!ex || ex->threads <= 1 || parts == 1) {
        for (int64_t part = 0; part < parts; part++) fn(j, part);
        return;
    }
    sy_parallel_parts(ex, parts, fn, j);
}

void sy_qgemm_i8(const sy_exec *ex, int8_t *y, int64_t ldy, const int8_t *x, int64_t ldx, const void *packed,
                 int64_t m, int64_t n, int64_t k, const sy_qgemm_params *p) {
    if (m <= 0 || n <= 0) return;
    qg_header h;
    memcpy(&h, packed, sizeof h);
    SY_ASSERT(h.n == n && h.k == k); /* packed by sy_qgemm_pack for these weights' shape */
    qg_job j = {.y = y, .x = x, .packed = packed, .p = p, .ldy = ldy, .ldx = ldx, .m = m, .n = n, .k = k};
    /* channels per block: whole panels whose weights fit QG_WBLOCK, at least one panel */
    int64_t nb = QG_WBLOCK / (qg_kb(k) * 4) / QG_NP * QG_NP;
    j.nb = nb < QG_NP ? QG_NP : nb;
    j.rblocks = (m + QG_MB - 1) / QG_MB;
    j.cblocks = (n + j.nb - 1) / j.nb;
#ifdef QG_ROWC
    if (j.cblocks > 1) {
        int32_t rowc[QG_RCHUNK];
        for (int64_t r0 = 0; r0 < m; r0 += QG_RCHUNK) {
            qg_job c = j;
            c.y = y + r0 * ldy, c.x = x + r0 * ldx, c.m = m - r0 < QG_RCHUNK ? m - r0 : QG_RCHUNK;
            c.rblocks = (c.m + QG_MB - 1) / QG_MB, c.rowc = rowc;
            qg_run(ex, qg_rowc_part, &c, c.rblocks);
            qg_run(ex, qg_block, &c, c.rblocks * c.cblocks);
        }
        return;
    }
#endif
    qg_run(ex, qg_block, &j, j.rblocks * j.cblocks);
}

void sy_qgemm_i8_unpacked(const sy_exec *ex, int8_t *y, int64_t ldy, const int8_t *x, int64_t ldx, const int8_t *w,
                          int64_t m, int64_t n, int64_t k, const sy_qgemm_params *p, void *ws) {
    if (m <= 0 || n <= 0) return;
    sy_qgemm_pack(ws, w, n, k);
    sy_qgemm_i8(ex, y, ldy, x, ldx, ws, m, n, k, p);
}
