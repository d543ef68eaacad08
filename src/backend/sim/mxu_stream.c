/*
 * mxu_stream.c - the MXU product for a B too large to pack: one chunk
 * C (rows, n) (+)= A (rows, kn) x bf16(B (kn, n)), B read straight from
 * memory and rounded to bfloat16 in registers as it is loaded.
 *
 * A backprop-filter's B is dy, as large as the layer's activations, and
 * its A (the window elements) has few rows: 9 for a 3 x 3 x 1 window.
 * Packing dy into smallgemm.c's panels first made the product wait on
 * memory twice and its 6-row tile computed 12 rows for 9. Here a tile is
 * up to TR rows by one or two vectors of columns: per k, the vectors of B
 * are loaded and rounded once, then each row's A element is broadcast and
 * multiplied in -- the accumulators start at 0 and run over k in order,
 * exactly as the reference sums a chunk (products of bfloat16 values are
 * exact, so contracting to FMA changes nothing). Columns past the last
 * whole vector take a scalar loop with the same order.
 */
#include "sim_internal.h"

/* The 64-byte vector type is passed between static functions only. */
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__AVX512F__)
#define VL 16
#define TR 12 /* 24 accumulators, 2 B vectors and a broadcast: 27 of 32 registers */
#else
#define VL 8
#define TR 6 /* 12 of 16 registers as accumulators */
#endif
#define UNROLL _Pragma("GCC unroll 16")

typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef uint32_t vu __attribute__((vector_size(VL * sizeof(float))));

static inline vf vld(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vst(float *p, vf v) { memcpy(p, &v, sizeof v); }

/* sy_bf16_round on VL lanes, bit for bit */
static inline vf vround(vf x) {
    vu u = (vu)x;
    vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    vu nan = (u | 0x00400000u) & 0xffff0000u;
    vu is_nan = (vu)((u & 0x7fffffffu) > 0x7f800000u);
    return (vf)((nan & is_nan) | (rounded & ~is_nan));
}

/* rows x nv vectors of C at c; rows and nv are constants where inlined */
static inline __attribute__((always_inline)) void tile(float *restrict c, int64_t ldc, const float *restrict a,
                                                       const float *restrict b, int64_t ldb, int64_t kn, bool accumulate,
                                                       int rows, int nv) {
    vf s[TR][2];
    UNROLL for (int r = 0; r < rows; r++) UNROLL for (int v = 0; v < nv; v++) s[r][v] = (vf){0};
    for (int64_t kk = 0; kk < kn; kk++) {
        vf bv[2];
        /* B's rows are far apart (a backprop-filter's dy: 256 bytes), and the loads waited on memory for half
         * the tile's time with the hardware prefetchers alone */
        UNROLL for (int v = 0; v < nv; v++) __builtin_prefetch(b + (kk + 16) * ldb + v * VL);
        UNROLL for (int v = 0; v < nv; v++) bv[v] = vround(vld(b + kk * ldb + v * VL));
        UNROLL for (int r = 0; r < rows; r++) {
            float ar = a[r * kn + kk];
            UNROLL for (int v = 0; v < nv; v++) s[r][v] += ar * bv[v];
        }
    }
    UNROLL for (int r = 0; r < rows; r++) UNROLL for (int v = 0; v < nv; v++) {
            float *p = c + r * ldc + v * VL;
            vst(p, accumulate ? vld(p) + s[r][v] : s[r][v]);
        }
}

#define TILE_FN(r, v)                                                                                                \
    static void tile_##r##_##v(float *restrict c, int64_t ldc, const float *restrict a, const float *restrict b,     \
                               int64_t ldb, int64_t kn, bool accumulate) {                                          \
        tile(c, ldc, a, b, ldb, kn, accumulate, r, v);                                                               \
    }
#define TILE_FNS(r) TILE_FN(r, 1) TILE_FN(r, 2)
TILE_FNS(1)
TILE_FNS(2)
TILE_FNS(3)
TILE_FNS(4)
TILE_FNS(5)
TILE_FNS(6)
#if TR > 6
TILE_FNS(7)
TILE_FNS(8)
TILE_FNS(9)
TILE_FNS(10)
TILE_FNS(11)
TILE_FNS(12)
#endif

typedef void (*tile_fn)(float *restrict, int64_t, const float *restrict, const float *restrict, int64_t, int64_t, bool);
#define TILE_PAIR(r) {tile_##r##_1, tile_##r##_2}
static const tile_fn tiles[TR][2] = {
    TILE_PAIR(1), TILE_PAIR(2), TILE_PAIR(3), TILE_PAIR(4), TILE_PAIR(5), TILE_PAIR(6),
#if TR > 6
    TILE_PAIR(7), TILE_PAIR(8), TILE_PAIR(9), TILE_PAIR(10), TILE_PAIR(11), TILE_PAIR(12),
#endif
};

void sy_mxu_stream_chunk(float *c, int64_t ldc, const float *a, const float *b, int64_t ldb, int64_t rows, int64_t n,
                         int64_t kn, bool accumulate) {
    for (int64_t r0 = 0; r0 < rows; r0 += TR) {
        int64_t nr = sy_min64(TR, rows - r0), j = 0;
        const float *ar = a + r0 * kn;
        float *cr = c + r0 * ldc;
        for (; j + 2 * VL <= n; j += 2 * VL) tiles[nr - 1][1](cr + j, ldc, ar, b + j, ldb, kn, accumulate);
        for (; j + VL <= n; j += VL) tiles[nr - 1][0](cr + j, ldc, ar, b + j, ldb, kn, accumulate);
        for (; j < n; j++)
            for (int64_t r = 0; r < nr; r++) {
                float s = 0;
                for (int64_t kk = 0; kk < kn; kk++) s += ar[r * kn + kk] * sy_bf16_round(b[kk * ldb + j]);
                cr[r * ldc + j] = accumulate ? cr[r * ldc + j] + s : s;
            }
    }
}
