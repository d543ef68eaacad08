/*
 * conv_internal.h - what conv.c (the conv kernels) and convpool.c (issue 21's
 * conv -> pool kernels) share: the direct kernels' vector helpers, the jobs
 * of the forward and backprop-filter paths, and the functions each file
 * calls in the other. Private to those two files.
 */
#ifndef SY_CONV_INTERNAL_H
#define SY_CONV_INTERNAL_H

#include "cpu_internal.h"

/* The 64-byte vector types below are passed between static functions only, so
 * GCC's note that their ABI differs without AVX-512 does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef sy_conv_geom geom;    /* cpu_internal.h: shared with the sim backend's MXU convs */
typedef sy_pool_grad pool_bwd; /* and its conv -> pool */
typedef sy_pool_win pool_win;

/* A 1x1 conv with stride 1 and no padding: x viewed as (P, C) is its own
 * im2col matrix. */
static inline bool pointwise(const geom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0;
}

static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline int64_t floats_aligned(int64_t n) { return sy_align_up(n, SY_ALIGN / (int64_t)sizeof(float)); }

/* Not grouped, not dilated: the convs the fast paths take (others: depthwise.c, the ref kernels). */
static inline bool plain(const sy_attrs *a) {
    return sy_conv_groups(a) == 1 && sy_conv_dilation(a, 0) == 1 && sy_conv_dilation(a, 1) == 1;
}

/* ---- the direct kernels' tiles and vectors (conv.c) ---------------------- */
#define DIRECT_K 32
/* Tiles of TILE pixels (or window rows) x NV vectors of VL floats: as many
 * accumulators as the register file holds, with NV weight (or dy) vectors
 * and a broadcast beside them. AVX-512 has 32 registers of 16 floats
 * (6 x 4 = 24 accumulators); AVX2 has 16 of 8 (6 x 2 = 12). */
#if defined(__AVX512F__)
#define VL 16
#define NV 4
#else
#define VL 8
#define NV 2
#endif
#define UNROLL _Pragma("GCC unroll 8")
#define TILE 6
#define SUB 256    /* output pixels per sub-block: bounds the runs and border buffers */
#define DY_SUB (32 * 1024) /* floats of dy per backprop-filter sub-block: they stay in L2 across tiles */

typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VL * sizeof(int32_t))));
static inline vf vld(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vst(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* a ? x : y lane by lane, a a comparison's mask */
static inline vf vsel(vi a, vf x, vf y) {
    return (vf)((a & (vi)x) | (~a & (vi)y));
}
/* c > m ? c : m lane by lane -- maxps's own rule (a NaN c gives m), one instruction where there is one */
static inline vf vmax_gt(vf c, vf m) {
#if defined(__AVX512F__)
    return (vf)_mm512_max_ps((__m512)c, (__m512)m);
#elif defined(__AVX__)
    return (vf)_mm256_max_ps((__m256)c, (__m256)m);
#else
    return vsel(c > m, c, m);
#endif
}
/* max(v, 0), NaN giving 0 as in sy_act_f32 */
static inline vf vrelu(vf v) { return vmax_gt(v, (vf){0}); }
typedef uint8_t vb __attribute__((vector_size(VL)));
/* VL bytes widened to int32 lanes: GCC 12 turns __builtin_convertvector of a byte vector into
 * lane-by-lane inserts (measured: the pooled gradient's expansion at 2.5x its time), so the
 * zero-extending load where there is one */
static inline vi vld_u8(const uint8_t *p) {
#if defined(__AVX512F__)
    return (vi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
#elif defined(__AVX2__)
    return (vi)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
#else
    vi v;
    for (int l = 0; l < VL; l++) v[l] = p[l];
    return v;
#endif
}
/* and back: the lanes' low bytes (each 0-255; AVX2: by two packs, __builtin_convertvector again
 * extracting lane by lane) */
static inline void vst_u8(uint8_t *p, vi v) {
#if defined(__AVX512F__)
    _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8((__m512i)v));
#elif defined(__AVX2__)
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128((__m256i)v), _mm256_extracti128_si256((__m256i)v, 1));
    _mm_storel_epi64((__m128i *)(void *)p, _mm_packus_epi16(w, w));
#else
    vb b = __builtin_convertvector(v, vb);
    memcpy(p, &b, sizeof b);
#endif
}
/* issue 16, bfloat16 storage: sy_bf16_round and the top halves' store, VL lanes at a time */
typedef uint32_t vu __attribute__((vector_size(VL * sizeof(uint32_t))));
typedef uint16_t vh __attribute__((vector_size(VL * sizeof(uint16_t))));
static inline vf vbf16_round(vf v) {
    vu u = (vu)v, nan = (vu)((u & 0x7fffffffu) > 0x7f800000u);
    vu r = ((u + 0x7fffu + ((u >> 16) & 1u)) & ~nan) | ((u | 0x00400000u) & nan);
    return (vf)(r & 0xffff0000u);
}
static inline vf vld_bf16(const uint16_t *p) {
    vh h;
    memcpy(&h, p, sizeof h);
    return (vf)(__builtin_convertvector(h, vu) << 16);
}
static inline void vst_bf16(uint16_t *p, vf v) {
    vh h = __builtin_convertvector((vu)v >> 16, vh);
    memcpy(p, &h, sizeof h);
}

static inline bool direct(const geom *g) { return g->K <= DIRECT_K; }

/* Operands stored as bfloat16 (issue 16), widened in the packing -- x's windows, w and the bias
 * once per call, a block of dy -- and, for y, a float32 block that the bfloat16 epilogue stores. */
typedef struct conv_bf16 {
    bool x, w, bias, y;
} conv_bf16;

typedef struct fwd_job {
    const geom *g;
    const void *x;
    const float *w, *bias;
    void *y;
    const int64_t *off_in, *off_id;
    int64_t pb;
    int act;
    conv_bf16 b;
} fwd_job;

typedef struct bwd_filter_plan {
    int64_t R, S, width, pb;
} bwd_filter_plan;

/* x and dy stored as bfloat16 (issue 16): x's windows widened as they are packed, each block of dy
 * after the part's scratch; dw is float32 (a gradient's block, or a sum over parts). */
typedef sy_pool_grad pool_bwd;
typedef struct bwd_filter_job {
    const geom *g;
    bwd_filter_plan p;
    const void *x, *dy;
    float *dw, *partial;
    const int64_t *off_in, *off_id;
    bool xb, dyb;
    const pool_bwd *pool; /* issue 21: dy is a pool's gradient, expanded row by row (sy_conv_pool_unpool) */
    bool pool_regs;       /* or in registers (bf_pool_tile) */
} bwd_filter_job;

/* issue 21, dense_dy (convpool.c): a part's cache of the pooled gradient's rows */
typedef struct dense_cache {
    float *rows;    /* pooled rows [lo, hi) of (n, ph), PW O floats each */
    int64_t lo, hi;
} dense_cache;

/* conv.c, for convpool.c */
int64_t sy_conv_block_rows(int64_t P, int64_t width, int64_t target_blocks);
conv_bf16 sy_conv_bf16_of(const sy_kargs *k);
/* the forward's job over blocks of pb pixels, the workspace's head (offset tables, widened w and bias) filled */
fwd_job sy_conv_fwd_setup(const geom *g, const void *x, const void *w, const void *bias, int act, void *y, float *ws,
                          conv_bf16 b, int64_t pb);
int64_t sy_conv_fwd_head(const geom *g, conv_bf16 b);
int64_t sy_conv_fwd_scratch(const geom *g, int64_t pb, conv_bf16 b); /* a thread's, for blocks of pb pixels */
/* output pixels [p0, p0 + rows) into y_rows; cols: a thread's scratch */
void sy_conv_fwd_rows(const fwd_job *j, int64_t p0, int64_t rows, void *y_rows, float *cols);
bool sy_conv_wino_shape(const geom *g, bool dx, sy_wino_shape *s);
int64_t sy_conv_bf_sub(const geom *g); /* pixels a direct backprop-filter block */
/* the backprop-filter's workspace and run; pooled: dy is pool's gradient (issue 21) */
size_t sy_conv_filter_ws(const geom *g, int threads, bool xb, bool dyb, bool pooled, int64_t dense, int64_t wt);
void sy_conv_filter_run(const sy_kargs *k, const geom *g, pool_bwd *pool);

/* convpool.c, for conv.c's backprop-filter */
int64_t sy_conv_pool_cache_rows(const geom *g, int64_t rows);
int64_t sy_conv_pool_dense_prepare(pool_bwd *pool, const sy_exec *ex, const geom *g, float *ws);
void sy_conv_pool_rows(const pool_bwd *pool, const geom *g, dense_cache *dc, float *dst, int64_t p0, int64_t rows,
                       float *db);
bool sy_conv_bf_pool_in_registers(const geom *g, const pool_bwd *b, bool xb);
void sy_conv_bf_pool_registers(const bwd_filter_job *j, int64_t q0, int64_t q1, float *dw, float *db,
                               dense_cache *dc);

#endif
