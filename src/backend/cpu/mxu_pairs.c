/*
 * mxu_pairs.c - the MXU's products on the CPU, bit for bit as
 * docs/design/mxu-numerics.md defines them: operands rounded to bfloat16
 * and held two to a 32-bit word, and a micro-kernel that sums one chunk of
 * them -- the sim backend's convs and matmuls (sim/mxu.c) and the recurrent
 * scans' products (rnn.c) all run on it.
 *
 * The order of a chunk's sum is the one AVX-512 BF16's VDPBF16PS computes
 * (Intel's pseudocode, and AMD Zen 4's hardware, checked against it on 96
 * million lanes, 64 million of them near the smallest normal): terms go in pairs
 * (k = 2q, 2q + 1) and each pair adds its odd term, then its even one, to
 * the chunk's float32 sum, every sum flushed to zero when below float32's
 * smallest normal and every operand that is subnormal as bfloat16 taken as
 * zero. A chunk of odd length ends in a pair whose odd term is 0 x 0. With
 * that instruction (built with -march=native on such a CPU) a 6 x 16 tile
 * of float32 sums takes 16 products an instruction, twice a float32 FMA's
 * 8; with AVX2 alone, two FMAs a pair under MXCSR's flush-to-zero; elsewhere
 * a portable loop computes the same bits: fmaf, then the flush
 * (sy_mxu_ftz).
 *
 * Layouts (words are uint32: a pair, the even term's bfloat16 in the low
 * half, the odd term's in the high half, as VDPBF16PS reads them):
 *   A  rows of sy_mxu_pairs(k) words: row r's pair q is (A[r][2q], A[r][2q+1]),
 *      so that a row is simply its k bfloat16 values in order (and a 0 when
 *      k is odd);
 *   B  panels of 16 columns, pair after pair: word (p * pairs + q) * 16 + j
 *      is (B[2q][16p + j], B[2q + 1][16p + j]); zeros past k and n.
 * A chunk's B is a B of its own (its pairs counted from the chunk's start):
 * the sim backend packs B chunk after chunk.
 */
#include "cpu_internal.h"

#if defined(__AVX512BF16__) && defined(__AVX512VL__)
#define SY_MXU_DPBF16 1
#endif

#define MR SY_SMALLGEMM_MR
#define NR 16

static inline uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* x rounded to bfloat16 (sy_bf16_bits): its 16 bits */
static inline uint32_t half(float x) { return sy_bf16_bits(x); }
/* the pair (x0, x1) rounded; rounded: both are bfloat16 values already, so their top halves */
static inline uint32_t pair(float x0, float x1, bool rounded) {
    return rounded ? bits(x0) >> 16 | (bits(x1) & 0xffff0000u) : half(x0) | half(x1) << 16;
}

int64_t sy_mxu_pairs(int64_t k) { return (k + 1) / 2; }
int64_t sy_mxu_b_words(int64_t k, int64_t n) { return sy_mxu_pairs(k) * ((n + NR - 1) / NR) * NR; }

void sy_mxu_pack_b(uint32_t *restrict bp, const float *b, int64_t ldb, bool tb, int64_t k, int64_t n) {
    int64_t pairs = sy_mxu_pairs(k), panels = (n + NR - 1) / NR;
    if (!tb) { /* rows 2q and 2q + 1, 16 columns at a time: a loop GCC vectorises */
        for (int64_t q = 0; q < pairs; q++) {
            const float *r0 = b + 2 * q * ldb, *r1 = 2 * q + 1 < k ? r0 + ldb : NULL;
            for (int64_t p = 0; p < panels; p++) {
                int64_t c0 = p * NR, nc = n - c0 < NR ? n - c0 : NR;
                uint32_t *restrict dst = bp + (p * pairs + q) * NR;
                if (r1 && nc == NR)
                    for (int64_t j = 0; j < NR; j++) dst[j] = half(r0[c0 + j]) | half(r1[c0 + j]) << 16;
                else
                    for (int64_t j = 0; j < NR; j++)
                        dst[j] = j >= nc ? 0 : half(r0[c0 + j]) | (r1 ? half(r1[c0 + j]) << 16 : 0);
            }
        }
        return;
    }
    /* B^T stored (n, k): a column's pair is two adjacent floats. A panel's 16 columns are made into pairs, QB
     * at a time, in rows of their own (contiguous: a loop GCC vectorises), which are then written across
     * (VGG16's Dense w^T, 4096 x 4096, took 3x as long gathered pair by pair) */
    enum { QB = 256 };
    uint32_t rowbuf[NR][QB];
    for (int64_t p = 0; p < panels; p++)
        for (int64_t q0 = 0; q0 < pairs; q0 += QB) {
            int64_t qn = sy_min64(QB, pairs - q0), kn = sy_min64(2 * qn, k - 2 * q0);
            for (int64_t j = 0; j < NR; j++) {
                int64_t col = p * NR + j;
                const float *restrict src = b + col * ldb + 2 * q0;
                uint32_t *restrict d = rowbuf[j];
                if (col >= n) {
                    memset(d, 0, (size_t)qn * sizeof *d);
                    continue;
                }
                for (int64_t q = 0; q < kn / 2; q++) d[q] = pair(src[2 * q], src[2 * q + 1], false);
                if (kn & 1) d[kn / 2] = half(src[kn - 1]);
            }
            uint32_t *restrict dst = bp + (p * pairs + q0) * NR;
            for (int64_t q = 0; q < qn; q++)
                for (int64_t j = 0; j < NR; j++) dst[q * NR + j] = rowbuf[j][q];
        }
}

void sy_mxu_pack_b_rows(uint32_t *restrict bp, const float *const *rows, bool transposed, int64_t k, int64_t n) {
    int64_t pairs = sy_mxu_pairs(k), panels = (n + NR - 1) / NR;
    for (int64_t p = 0; p < panels; p++)
        for (int64_t q = 0; q < pairs; q++)
            for (int64_t j = 0; j < NR; j++) {
                int64_t col = p * NR + j;
                uint32_t w = 0;
                for (int64_t e = 0; e < 2 && col < n; e++) {
                    int64_t kk = 2 * q + e;
                    const float *row = kk >= k ? NULL : transposed ? rows[col] : rows[kk];
                    if (row) w |= half(transposed ? row[kk] : row[col]) << (16 * e);
                }
                bp[(p * pairs + q) * NR + j] = w;
            }
}

/* A bfloat16 doubled, exactly where the result is a normal bfloat16 (the LSTM's doubled g columns) */
static uint32_t twice(uint32_t h) {
    float x = sy_bf16_to_f32((uint16_t)h) * 2.0f;
    return sy_bf16_bits(x);
}

void sy_mxu_b_double_columns(uint32_t *bp, int64_t k, int64_t c0, int64_t c1) {
    int64_t pairs = sy_mxu_pairs(k);
    for (int64_t col = c0; col < c1; col++)
        for (int64_t q = 0; q < pairs; q++) {
            uint32_t *w = bp + ((col / NR) * pairs + q) * NR + col % NR;
            *w = twice(*w & 0xffffu) | twice(*w >> 16) << 16;
        }
}

void sy_mxu_pack_a(uint32_t *ap, int64_t ldp, const float *a, int64_t lda, bool ta, int64_t m, int64_t k, bool rounded) {
    for (int64_t r = 0; r < m; r++) {
        uint32_t *restrict d = ap + r * ldp;
        if (ta)
            for (int64_t q = 0; q < k / 2; q++) d[q] = pair(a[2 * q * lda + r], a[(2 * q + 1) * lda + r], rounded);
        else if (rounded) /* a loop GCC vectorises */
            for (int64_t q = 0; q < k / 2; q++) d[q] = pair(a[r * lda + 2 * q], a[r * lda + 2 * q + 1], true);
        else
            for (int64_t q = 0; q < k / 2; q++) d[q] = pair(a[r * lda + 2 * q], a[r * lda + 2 * q + 1], false);
        if (k & 1) d[k / 2] = half(a[ta ? (k - 1) * lda + r : r * lda + k - 1]);
    }
}

/* ---- the chunk's tile -------------------------------------------------------------- */

#if defined(__AVX2__)
#include <immintrin.h>
/* A tile's sums v: a whole tile stored, or added, to C from the registers (true); else into acc's rows */
static inline __attribute__((always_inline)) bool tile_out(__m256 v[MR][2], float acc[MR][NR], int64_t rows,
                                                           int64_t cols, float *c, int64_t ldc, bool accumulate) {
    if (rows == MR && cols == NR) {
        for (int r = 0; r < MR; r++)
            for (int h = 0; h < 2; h++) {
                float *cr = c + r * ldc + 8 * h;
                _mm256_storeu_ps(cr, accumulate ? _mm256_add_ps(_mm256_loadu_ps(cr), v[r][h]) : v[r][h]);
            }
        return true;
    }
    for (int r = 0; r < rows; r++) _mm256_storeu_ps(acc[r], v[r][0]), _mm256_storeu_ps(acc[r] + 8, v[r][1]);
    return false;
}
#endif

#if SY_MXU_DPBF16
#define ROW(r)                                                                                                         \
    av = (__m256bh)_mm256_set1_epi32((int)a##r[q]);                                                                    \
    c##r##0 = _mm256_dpbf16_ps(c##r##0, av, b0);                                                                       \
    c##r##1 = _mm256_dpbf16_ps(c##r##1, av, b1)

/* rows <= MR rows (a short block computes its last row again in the others, and stores only its own) by 16
 * columns, kp pairs: a whole tile stored or added to C from the registers, else the sums into acc[r][0 .. 16)
 * (returns false) */
static inline __attribute__((always_inline)) bool tile(float acc[MR][NR], const uint32_t *a, int64_t lda,
                                                       const uint32_t *bp, int64_t kp, int64_t rows, int64_t cols,
                                                       float *c, int64_t ldc, bool accumulate) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const uint32_t *a0 = a, *a1 = a + sy_min64(1, rows - 1) * lda, *a2 = a + sy_min64(2, rows - 1) * lda,
                   *a3 = a + sy_min64(3, rows - 1) * lda, *a4 = a + sy_min64(4, rows - 1) * lda,
                   *a5 = a + sy_min64(5, rows - 1) * lda;
    for (int64_t q = 0; q < kp; q++) {
        __m256bh b0 = (__m256bh)_mm256_loadu_si256((const __m256i *)(bp + q * NR)),
                 b1 = (__m256bh)_mm256_loadu_si256((const __m256i *)(bp + q * NR + 8)), av;
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
        ROW(4);
        ROW(5);
    }
    __m256 v[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    return tile_out(v, acc, rows, cols, c, ldc, accumulate);
}
#undef ROW
#elif defined(__AVX2__) && defined(__FMA__)
/* Without AVX-512 BF16: per pair, B's 16 words split into their even and odd values (4 vectors), each row's
 * word into its two, and the odd products, then the even ones, as FMAs with MXCSR's FTZ and DAZ on -- an FMA
 * so gives ftz(fmaf(a, b, s)) with subnormal operands taken as zeros, the rule's step (checked on this
 * project's Zen 4 on 32 million lanes, most of them around 2^-126). Three rows at a time: 6 sums, 4 B
 * vectors and A's 2 in the 16 registers. The empty asm statements keep the compiler from moving the
 * products across the MXCSR writes, which it does not know they depend on. */

static inline __attribute__((always_inline)) void rows3(__m256 s[3][2], const uint32_t *const ar[3],
                                                        const uint32_t *bp, int64_t kp) {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 s00 = _mm256_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00;
    for (int64_t q = 0; q < kp; q++) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(bp + q * NR)),
                w1 = _mm256_loadu_si256((const __m256i *)(bp + q * NR + 8));
        __m256 be0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), bo0 = _mm256_castsi256_ps(_mm256_and_si256(w0, hi));
        __m256 be1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)), bo1 = _mm256_castsi256_ps(_mm256_and_si256(w1, hi));
#define ROW3(r)                                                                                                        \
    {                                                                                                                  \
        __m256i aw = _mm256_set1_epi32((int)ar[r][q]);                                                                 \
        __m256 ae = _mm256_castsi256_ps(_mm256_slli_epi32(aw, 16)), ao = _mm256_castsi256_ps(_mm256_and_si256(aw, hi)); \
        s##r##0 = _mm256_fmadd_ps(ao, bo0, s##r##0);                                                                   \
        s##r##1 = _mm256_fmadd_ps(ao, bo1, s##r##1);                                                                   \
        s##r##0 = _mm256_fmadd_ps(ae, be0, s##r##0);                                                                   \
        s##r##1 = _mm256_fmadd_ps(ae, be1, s##r##1);                                                                   \
    }
        ROW3(0)
        ROW3(1)
        ROW3(2)
#undef ROW3
    }
    __asm__ volatile("" : "+x"(s00), "+x"(s01), "+x"(s10), "+x"(s11), "+x"(s20), "+x"(s21));
    s[0][0] = s00, s[0][1] = s01, s[1][0] = s10, s[1][1] = s11, s[2][0] = s20, s[2][1] = s21;
}

static inline __attribute__((always_inline)) bool tile(float acc[MR][NR], const uint32_t *a, int64_t lda,
                                                       const uint32_t *bp, int64_t kp, int64_t rows, int64_t cols,
                                                       float *c, int64_t ldc, bool accumulate) {
    __m256 v[MR][2];
    const uint32_t *ar[MR];
    for (int r = 0; r < MR; r++) ar[r] = a + sy_min64(r, rows - 1) * lda; /* a short block repeats its last row */
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u); /* FTZ | DAZ */
    __asm__ volatile("" ::: "memory");
    rows3(v, ar, bp, kp);
    if (rows > 3) rows3(v + 3, ar + 3, bp, kp);
    _mm_setcsr(csr);
    __asm__ volatile("" ::: "memory");
    return tile_out(v, acc, rows, cols, c, ldc, accumulate);
}
#else
static inline float lo(uint32_t w) { return sy_mxu_ftz(sy_bf16_to_f32((uint16_t)(w & 0xffffu))); }
static inline float hi(uint32_t w) { return sy_mxu_ftz(sy_bf16_to_f32((uint16_t)(w >> 16))); }

static bool tile(float acc[MR][NR], const uint32_t *a, int64_t lda, const uint32_t *bp, int64_t kp, int64_t rows,
                 int64_t cols, float *c, int64_t ldc, bool accumulate) {
    (void)cols, (void)c, (void)ldc, (void)accumulate;
    for (int64_t r = 0; r < rows; r++) {
        float *s = acc[r];
        for (int j = 0; j < NR; j++) s[j] = 0.0f;
        for (int64_t q = 0; q < kp; q++) {
            uint32_t aw = a[r * lda + q];
            float ao = hi(aw), ae = lo(aw);
            for (int j = 0; j < NR; j++) {
                uint32_t bw = bp[q * NR + j];
                s[j] = sy_mxu_ftz(fmaf(ao, hi(bw), s[j]));
                s[j] = sy_mxu_ftz(fmaf(ae, lo(bw), s[j]));
            }
        }
    }
    return false;
}
#endif

void sy_mxu_chunk(int64_t m, int64_t n, int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *bp, int64_t pstride,
                  bool accumulate, float *c, int64_t ldc) {
    float acc[MR][NR];
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
        int64_t rows = sy_min64(MR, m - i0);
        for (int64_t p = 0, c0 = 0; c0 < n; p++, c0 += NR) {
            int64_t cols = sy_min64(NR, n - c0);
            float *ct = c + i0 * ldc + c0;
            if (tile(acc, a + i0 * lda, lda, bp + p * pstride, kp, rows, cols, ct, ldc, accumulate)) continue;
            for (int64_t r = 0; r < rows; r++) {
                float *cr = c + (i0 + r) * ldc + c0;
                if (accumulate)
                    for (int64_t j = 0; j < cols; j++) cr[j] += acc[r][j];
                else
                    for (int64_t j = 0; j < cols; j++) cr[j] = acc[r][j];
            }
        }
    }
}

typedef struct chunk_job {
    int64_t m, n, kp, lda, pstride, ldc;
    const uint32_t *a, *bp;
    bool accumulate;
    float *c;
} chunk_job;

static void chunk_block(void *ctx, int64_t block) {
    const chunk_job *j = ctx;
    int64_t i0 = block * MR;
    sy_mxu_chunk(sy_min64(MR, j->m - i0), j->n, j->kp, j->a + i0 * j->lda, j->lda, j->bp, j->pstride, j->accumulate,
                 j->c + i0 * j->ldc, j->ldc);
}

void sy_mxu_chunk_par(const sy_exec *ex, int64_t m, int64_t n, int64_t kp, const uint32_t *a, int64_t lda,
                      const uint32_t *bp, int64_t pstride, bool accumulate, float *c, int64_t ldc) {
    chunk_job j = {m, n, kp, lda, pstride, ldc, a, bp, accumulate, c};
    sy_parallel_parts(ex, (m + MR - 1) / MR, chunk_block, &j);
}

/* ---- B read straight from its rows (a backprop-filter's dy) ---------------------------------------------
 * For a product with few rows (a first layer's 9 window taps) each element of B serves only those rows, and
 * packing B first -- a write and a read of every element -- cost more than the products (the Fashion-MNIST
 * CNN's first backprop-filter took 1.6x the FMA tile's time that way). Here a tile of up to 12 rows by one
 * or two vectors of 16 columns reads rows 2q and 2q + 1 of B, rounds them and pairs them in registers, and
 * multiplies each row's A word in: the same pairs, the same instruction, so the same bits. */
#if SY_MXU_DPBF16 && defined(__AVX512F__)
#define TR 12
#define UNROLL _Pragma("GCC unroll 16")

/* the words of 16 columns: (bf16(r0[j]), bf16(r1[j])), r1 NULL: 0 */
static inline __m512i pair16(const float *r0, const float *r1) {
    const __m512i mag = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    __m512i w[2];
    for (int e = 0; e < 2; e++) {
        const float *r = e ? r1 : r0;
        if (!r) {
            w[e] = _mm512_setzero_si512();
            continue;
        }
        __m512i u = _mm512_loadu_si512(r); /* sy_bf16_bits, lane by lane: nearest even, NaNs quieted */
        __m512i up = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                          _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, mag), inf);
        up = _mm512_mask_or_epi32(up, nan, u, _mm512_set1_epi32(0x00400000));
        w[e] = _mm512_srli_epi32(up, 16);
    }
    return _mm512_or_si512(w[0], _mm512_slli_epi32(w[1], 16));
}

static inline __attribute__((always_inline)) void rows_tile(float *c, int64_t ldc, const uint32_t *a, int64_t lda,
                                                            const float *b, int64_t ldb, int64_t kn, bool accumulate,
                                                            int rows, int nv) {
    __m512 s[TR][2];
    UNROLL for (int r = 0; r < rows; r++) UNROLL for (int v = 0; v < nv; v++) s[r][v] = _mm512_setzero_ps();
    for (int64_t q = 0; 2 * q < kn; q++) {
        const float *r0 = b + 2 * q * ldb, *r1 = 2 * q + 1 < kn ? r0 + ldb : NULL;
        __m512i bv[2];
        UNROLL for (int v = 0; v < nv; v++) {
            __builtin_prefetch(r0 + 16 * ldb + 16 * v);
            bv[v] = pair16(r0 + 16 * v, r1 ? r1 + 16 * v : NULL);
        }
        UNROLL for (int r = 0; r < rows; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * lda + q]);
            UNROLL for (int v = 0; v < nv; v++) s[r][v] = _mm512_dpbf16_ps(s[r][v], av, (__m512bh)bv[v]);
        }
    }
    UNROLL for (int r = 0; r < rows; r++) UNROLL for (int v = 0; v < nv; v++) {
            float *p = c + r * ldc + 16 * v;
            _mm512_storeu_ps(p, accumulate ? _mm512_add_ps(_mm512_loadu_ps(p), s[r][v]) : s[r][v]);
        }
}

#define ROWS_FN(r, v)                                                                                                  \
    static void rows_##r##_##v(float *c, int64_t ldc, const uint32_t *a, int64_t lda, const float *b, int64_t ldb,     \
                               int64_t kn, bool accumulate) {                                                          \
        rows_tile(c, ldc, a, lda, b, ldb, kn, accumulate, r, v);                                                       \
    }
#define ROWS_FNS(r) ROWS_FN(r, 1) ROWS_FN(r, 2)
ROWS_FNS(1)
ROWS_FNS(2)
ROWS_FNS(3)
ROWS_FNS(4)
ROWS_FNS(5)
ROWS_FNS(6)
ROWS_FNS(7)
ROWS_FNS(8)
ROWS_FNS(9)
ROWS_FNS(10)
ROWS_FNS(11)
ROWS_FNS(12)
typedef void (*rows_fn)(float *, int64_t, const uint32_t *, int64_t, const float *, int64_t, int64_t, bool);
#define ROWS_PAIR(r) {rows_##r##_1, rows_##r##_2}
static const rows_fn rows_tiles[TR][2] = {ROWS_PAIR(1), ROWS_PAIR(2), ROWS_PAIR(3),  ROWS_PAIR(4),
                                          ROWS_PAIR(5), ROWS_PAIR(6), ROWS_PAIR(7),  ROWS_PAIR(8),
                                          ROWS_PAIR(9), ROWS_PAIR(10), ROWS_PAIR(11), ROWS_PAIR(12)};

bool sy_mxu_chunk_rows(int64_t m, int64_t n, int64_t kn, const uint32_t *a, int64_t lda, const float *b, int64_t ldb,
                       bool accumulate, float *c, int64_t ldc) {
    if (m > TR || n % 16) return false;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) rows_tiles[m - 1][1](c + j, ldc, a, lda, b + j, ldb, kn, accumulate);
    for (; j < n; j += 16) rows_tiles[m - 1][0](c + j, ldc, a, lda, b + j, ldb, kn, accumulate);
    return true;
}
#else
bool sy_mxu_chunk_rows(int64_t m, int64_t n, int64_t kn, const uint32_t *a, int64_t lda, const float *b, int64_t ldb,
                       bool accumulate, float *c, int64_t ldc) {
    (void)m, (void)n, (void)kn, (void)a, (void)lda, (void)b, (void)ldb, (void)accumulate, (void)c, (void)ldc;
    return false;
}
#endif
