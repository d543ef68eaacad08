/*
 * cpu_internal.h - what the fast CPU kernels share: the GEMM (oneDNN's
 * sgemm, one call per block, blocks spread over the exec context's threads),
 * GEMM epilogues, branch-free vector math, and the kernel objects the cpu
 * backend's table (cpu_kernels.c) lists.
 *
 * Determinism: every parallel kernel partitions its work by the shapes
 * alone, never by the thread count, and each output element is computed by
 * exactly one thread in a fixed order. So a result is bitwise the same on 1
 * thread or 16.
 */
#ifndef SY_CPU_INTERNAL_H
#define SY_CPU_INTERNAL_H

#include "../backend_internal.h"

#include <math.h>
#include <string.h>

/* C (M, N) = alpha * op(A) (M, K) x op(B) (K, N) + beta * C, row-major, on
 * the calling thread. op(A) = A^T when ta (A is stored (K, M)). */
void sy_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
              const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The same over ex's threads, in blocks of rows of C (or of columns when M
 * is small) fixed by the shape; after each block, bias (N, may be NULL) and
 * the activation are applied to it while it is in cache. */
void sy_sgemm_parallel(const sy_exec *ex, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                       const float *bias, int act);

/* Products with one B used many times (smallgemm.c): pack B (K, N) -- or
 * B^T when tb, B then stored (N, K) -- into sy_pack_b_floats(k, n) floats,
 * then C (M, N) (+)= A (M, K) x B over ex's threads. */
int64_t sy_pack_b_floats(int64_t k, int64_t n);
void sy_pack_b(float *packed, const float *b, int64_t ldb, bool tb, int64_t k, int64_t n);
void sy_sgemm_packed(const sy_exec *ex, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *bpacked, bool accumulate, float *c, int64_t ldc);
/* The same on the calling thread, for kernels that split rows themselves
 * (best in blocks of SY_SMALLGEMM_MR rows, the kernel's tile height). */
#define SY_SMALLGEMM_MR 6
void sy_sgemm_packed_serial(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bpacked,
                            bool accumulate, float *c, int64_t ldc);
/* issue 16, MXU numerics (mxu_pairs.c, docs/design/mxu-numerics.md): operands rounded to bfloat16, two
 * to a word -- A as rows of sy_mxu_pairs(k) words, B in panels of 16 columns (sy_mxu_b_words) -- and one
 * chunk of an MXU sum: C (m, n) = or += A (m, 2 kp) x B (2 kp, n), the chunk's sum started from 0 in pair
 * order; pstride: words from a panel of B to the next. */
int64_t sy_mxu_pairs(int64_t k);
int64_t sy_mxu_b_words(int64_t k, int64_t n);
/* B (k, n), stride ldb (stored (n, k) when tb), rounded into panels */
void sy_mxu_pack_b(uint32_t *bp, const float *b, int64_t ldb, bool tb, int64_t k, int64_t n);
/* B given by rows as sy_pack_b_rows takes it (NULL: zeros), rounded into panels */
void sy_mxu_pack_b_rows(uint32_t *bp, const float *const *rows, bool transposed, int64_t k, int64_t n);
/* columns [c0, c1) of a packed B of k rows doubled (exact for normal values) */
void sy_mxu_b_double_columns(uint32_t *bp, int64_t k, int64_t c0, int64_t c1);
/* A (m, k), stride lda (stored (k, m) when ta), into rows of ldp words; rounded: A's values are bfloat16
 * already (a rounded copy), so packing only narrows them */
void sy_mxu_pack_a(uint32_t *ap, int64_t ldp, const float *a, int64_t lda, bool ta, int64_t m, int64_t k, bool rounded);
void sy_mxu_chunk(int64_t m, int64_t n, int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *bp, int64_t pstride,
                  bool accumulate, float *c, int64_t ldc);
/* one chunk of kn terms (kp = sy_mxu_pairs(kn) pairs of A) with B's rows [0, kn) read from b (stride ldb,
 * floats) and paired in registers, for a product of at most 12 rows and n a multiple of 16; false (nothing
 * done) where it does not apply or the CPU lacks AVX-512 BF16: pack B then */
bool sy_mxu_chunk_rows(int64_t m, int64_t n, int64_t kn, const uint32_t *a, int64_t lda, const float *b, int64_t ldb,
                       bool accumulate, float *c, int64_t ldc);
/* the same over ex's threads, in blocks of SY_SMALLGEMM_MR rows */
void sy_mxu_chunk_par(const sy_exec *ex, int64_t m, int64_t n, int64_t kp, const uint32_t *a, int64_t lda,
                      const uint32_t *bp, int64_t pstride, bool accumulate, float *c, int64_t ldc);
/* Pack B (K, N) given by rows: row kk of B is rows[kk] (N floats; NULL:
 * zeros); or, when transposed, column j of B is rows[j] (K floats). For B
 * stacked from several matrices, as the LSTM's [kernel; recurrent; bias]. */
void sy_pack_b_rows(float *packed, const float *const *rows, bool transposed, int64_t k, int64_t n);
/* Multiply columns [c0, c1) of a packed B (K, N) by scale. */
void sy_packed_b_scale_columns(float *packed, int64_t k, int64_t n, int64_t c0, int64_t c1, float scale);

/* issue 16, MXU recurrent products */
/* The recurrent scans' products (rnn.c): float32 (the cpu backend), or with the MXU's numerics
 * (docs/design/mxu-numerics.md), by chunked bfloat16 products on the micro-kernel (the sim backend) or by
 * scalar reference loops (sim-ref). The gates, cells, masks and layouts are the same code in all three. */
typedef enum { SY_RNN_F32, SY_RNN_MXU, SY_RNN_MXU_REF } sy_rnn_numerics;
/* The scan op's kernel (lstm_scan, gru_scan and their gradients) with the products of `numerics`; NULL
 * for any other op. */
const sy_kernel *sy_rnn_kernel(sy_op op, sy_rnn_numerics numerics);
/* An MXU GEMM (sim/mxu.c), for the scans' whole-sequence products: C (M, N) = op(A) (M, K) x B (K, N)
 * [+ bias (N)] with A stored (K, M) when ta (stride lda), B's stride ldb, C's ldc; K in chunks of
 * SY_MXU_DEPTH in order, results the same on any number of threads. ws: sy_mxu_gemm_ws_floats floats. */
int64_t sy_mxu_gemm_ws_floats(int64_t M, int64_t N, int64_t K, int threads);
void sy_mxu_gemm(const sy_exec *ex, bool ta, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float *c, int64_t ldc, const float *bias, float *ws);

/* rows x n block of C (row stride ldc, column offset col0 into bias):
 * c += bias[col0 + j]; c = act(c). */
void sy_epilogue_f32(float *c, int64_t rows, int64_t n, int64_t ldc, const float *bias, int64_t col0, int act);

/* GCC folds a vector load into every FMA that uses it, which makes register tiles load-bound
 * (measured on conv.c's: 1.7x slower); an empty asm pins the value in a register instead. */
#if defined(__GNUC__) && defined(__AVX512F__)
#define IN_REGISTER(v) __asm__("" : "+v"(v))
#elif defined(__GNUC__) && defined(__AVX__)
#define IN_REGISTER(v) __asm__("" : "+x"(v))
#else
#define IN_REGISTER(v) ((void)0)
#endif

/* dst (cols, rows) = src (rows, cols)^T, over ex's threads (gemm.c) */
void sy_transpose(const sy_exec *ex, float *dst, const float *src, int64_t rows, int64_t cols);

/* Run fn(ctx, part) for part in [0, parts) over ex's threads; parts are
 * fixed by the caller from shapes, threads take them in contiguous runs. */
typedef void (*sy_part_fn)(void *ctx, int64_t part);
void sy_parallel_parts(const sy_exec *ex, int64_t parts, sy_part_fn fn, void *ctx);

/* ---- branch-free float math that GCC vectorises ---------------------------
 * exp: Cody-Waite reduction and a degree-6 polynomial, ~2 ulp on
 * [-87.3, 88.3] (inputs are clamped to it). sigmoid and tanh are built on it.
 * A NaN passes the clamp (both compares are false) and comes out NaN, as
 * from expf: a diverged model's loss must show NaN, not a number. The
 * exponent is taken from the bits of the rounding sum in unsigned
 * arithmetic, so no input, NaN included, reaches a signed shift or a
 * float-to-int conversion out of range. */
static inline float sy_vexpf(float x) {
    x = x < -87.3f ? -87.3f : x > 88.3f ? 88.3f : x;
    /* round to nearest by the 1.5 * 2^23 trick: plain adds, which vectorise
     * (roundf is a library call GCC will not inline without -ffast-math);
     * t's low mantissa bits then hold n + 0x400000 */
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint32_t e = (tb - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    return p * scale;
}
static inline float sy_vsigmoidf(float x) { return 1.0f / (1.0f + sy_vexpf(-x)); }
static inline float sy_vtanhf(float x) {
    float t = sy_vexpf(-2.0f * fabsf(x));
    float y = (1.0f - t) / (1.0f + t);
    return x < 0 ? -y : y;
}
static inline float sy_vlogf(float x) { return logf(x); }

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SY_HAVE_AVX2_FMA 1
/* Eight lanes of sy_vexpf, sy_vsigmoidf and sy_vtanhf with intrinsics,
 * for the hottest loops (the LSTM cell): GCC turns the scalar versions'
 * clamps into compares and blends and keeps the divisions, about three
 * times the instructions of min/max and a reciprocal refined by one Newton
 * step (within 2 ulp of the division). tanh is 2 sigmoid(2x) - 1, which
 * near 0 is as accurate (to 1e-7 absolutely) as sy_vtanhf's (1 - t)/(1 + t). */
static inline __m256 sy_exp8(__m256 x) {
    /* max/min return their second operand when either is NaN: x second,
     * so a NaN lane stays NaN (as in sy_vexpf) instead of clamping to 0 */
    x = _mm256_min_ps(_mm256_set1_ps(88.3f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
    __m256 magic = _mm256_set1_ps(12582912.0f);
    __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic), magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
static inline __m256 sy_sigmoid8(__m256 x) {
    __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), sy_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x)));
    __m256 r = _mm256_rcp_ps(d);
    return _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(2.0f)));
}
static inline __m256 sy_tanh8(__m256 x) {
    return _mm256_fmsub_ps(_mm256_set1_ps(2.0f), sy_sigmoid8(_mm256_add_ps(x, x)), _mm256_set1_ps(1.0f));
}
#endif

static inline float sy_act_f32(float v, int act) {
    switch (act) {
    case SY_ACT_RELU: return v > 0 ? v : 0;
    case SY_ACT_SIGMOID: return sy_vsigmoidf(v);
    case SY_ACT_TANH: return sy_vtanhf(v);
    default: return v;
    }
}

/* ---- the kernels (a kernel with run == NULL falls back to ref) --------- */
extern const sy_kernel sy_cpu_matmul;
extern const sy_kernel sy_cpu_conv2d, sy_cpu_conv2d_backprop_input, sy_cpu_conv2d_backprop_filter;
extern const sy_kernel sy_cpu_conv2d_pool, sy_cpu_conv2d_pool_backprop_filter; /* issue 21 */
extern const sy_kernel sy_cpu_max_pool2d, sy_cpu_avg_pool2d, sy_cpu_max_pool2d_grad, sy_cpu_avg_pool2d_grad;
extern const sy_kernel sy_cpu_fused_eltwise, sy_cpu_unary, sy_cpu_binary, sy_cpu_bias_add, sy_cpu_eltwise_grad;
/* issue 15, keras.applications (broadcast.c): add/sub/mul/div of operands broadcast in any numpy way, and
 * broadcast_to, float32 */
void sy_cpu_bcast_binary(const sy_kargs *k);
extern const sy_kernel sy_cpu_broadcast_to;
extern const sy_kernel sy_cpu_reduce_sum, sy_cpu_reduce_mean;
extern const sy_kernel sy_cpu_softmax, sy_cpu_log_softmax;
extern const sy_kernel sy_cpu_sparse_softmax_ce, sy_cpu_sparse_softmax_ce_grad;
extern const sy_kernel sy_cpu_sgd_update, sy_cpu_adam_update, sy_cpu_rmsprop_update;
extern const sy_kernel sy_cpu_slice, sy_cpu_slice_grad;
/* Winograd F(4x4, 3x3) (winograd.c): a 3x3, stride-1, undilated, ungrouped
 * conv of x (N, H, W, C) with leading padding (pt, pl) to y (N, OH, OW, O).
 * The forward takes w (3, 3, C, O), or with flip the kernel of the conv
 * whose input gradient this is, (3, 3, O, C), flipped in space. */
typedef struct sy_wino_shape {
    int64_t n, h, w, c, o, pt, pl, oh, ow;
} sy_wino_shape;
bool sy_winograd_enabled(void); /* $SYSTOLIC_WINOGRAD is not 0 */
bool sy_winograd_fits(const sy_wino_shape *s);
size_t sy_winograd_fwd_ws(const sy_wino_shape *s, int threads);
void sy_winograd_fwd(const sy_exec *ex, const sy_wino_shape *s, const float *x, const float *w, bool flip,
                     const float *bias, int act, float *y, float *ws);
/* dw (3, 3, C, O) from x and dy (N, OH, OW, O). */
size_t sy_winograd_bwd_filter_ws(const sy_wino_shape *s, int threads);
void sy_winograd_bwd_filter(const sy_exec *ex, const sy_wino_shape *s, const float *x, const float *dy, float *dw,
                            float *ws);

/* issue 16, MXU numerics: conv.c's geometry and im2col, shared with the sim backend's convs (sim/mxu.c). */
typedef struct sy_conv_geom {
    int64_t n, h, w, c;     /* input (N, H, W, C) */
    int64_t kh, kw, o;      /* filter (KH, KW, C, O) */
    int64_t sh, sw, pt, pl; /* strides, leading padding */
    int64_t oh, ow;         /* output (N, OH, OW, O) */
    int64_t P, K;           /* output pixels N*OH*OW; window length KH*KW*C */
} sy_conv_geom;
/* The geometry of a plain (undilated, ungrouped) conv of x by w. */
sy_conv_geom sy_conv_geom_make(const sy_shape *x, const sy_shape *w, const sy_attrs *a);
/* cols (rows, k1 - k0): columns [k0, k1) of the im2col rows of output pixels [p0, p0 + rows), in (KH, KW, C)
 * order, zeros for the padding; each element rounded to bfloat16 when bf16. */
void sy_im2col(float *restrict cols, const float *restrict x, const sy_conv_geom *g, int64_t p0, int64_t rows,
               int64_t k0, int64_t k1, bool bf16);
/* Run fn(ctx, block, buf) for block in [0, blocks) over ex's threads, each thread with its own scratch buf of
 * buf_floats floats from buf (sy_blocks_buffers(threads, blocks) of them). */
typedef void (*sy_block_fn)(void *ctx, int64_t block, float *buf);
int64_t sy_blocks_buffers(int threads, int64_t blocks);
void sy_run_blocks(const sy_exec *ex, int64_t blocks, sy_block_fn fn, void *ctx, float *buf, int64_t buf_floats);
/* dx += cols (rows, K) scattered back window by window, pixel by pixel, each window in (KH, KW, C) order. */
void sy_col2im_add(float *restrict dx, const float *restrict cols, const sy_conv_geom *g, int64_t p0, int64_t rows);

/* issue 16, the sim backend's conv -> pool (sim/mxu.c): conv.c's conv2d_pool and the expansion of its pooled
 * gradient, with the conv's values computed by another product (the MXU's). */
typedef struct sy_pool_win {
    int64_t kh, kw, sh, sw, pt, pl; /* window, strides, leading padding */
    int64_t ph, pw;                 /* the pooled output's height and width */
} sy_pool_win;
typedef struct sy_pool_grad {
    sy_pool_win p;
    const void *dy, *y;  /* (N, PH, PW, O), float32 or bfloat16 (dyb, yb); y or NULL */
    int64_t dy_off;      /* the pooled element dy[0] holds (0; a dense_dy kernel's rows, computed) */
    const float *dz, *wd; /* dense_dy: dy = dz (N, U) wd^T, wd (F, U); NULL otherwise */
    int64_t units;       /* U */
    const uint8_t *arg;  /* max pooling's argmax; NULL for average pooling */
    bool dyb, yb, round; /* round: bf16 ops, rounded where they would round */
    int act, post_act;   /* before and after the pool */
    float *db, *db_part; /* d bias (O) or NULL; the ranges' partial sums after the first's */
} sy_pool_grad;
/* conv2d_pool_backprop_filter's operands (x, dy [, y] [, argmax]) -> dw, aux d bias, as a pooled gradient */
sy_pool_grad sy_conv_pool_grad(const sy_kargs *k, const sy_conv_geom *g);
/* Rows [p0, p0 + rows) of the conv's output gradient (N, OH, OW, O), channels [c0, c1), into dst (ldd floats a
 * row); each row added to db (c1 - c0 floats) when db is not NULL. */
void sy_conv_pool_unpool(const sy_pool_grad *b, const sy_conv_geom *g, float *restrict dst, int64_t ldd, int64_t p0,
                         int64_t rows, int64_t c0, int64_t c1, float *restrict db);
/* The conv's pixels [p0, p0 + rows) into cv (rows, O), float32, bias (or NULL) and act applied; scratch: its
 * scratch_floats. */
typedef struct sy_conv_rows {
    void (*fn)(const void *ctx, int64_t p0, int64_t rows, const float *bias, int act, float *cv, float *scratch);
    const void *ctx;
    int64_t scratch_floats;
    /* the MXU's products (the sim backend's): w rounded in pairs, one chunk (sy_mxu_pack_b), or NULL; with it,
     * convpool.c may compute a pixel's chunk itself, in registers, in the same order (VDPBF16PS) */
    const uint32_t *mxu_w;
} sy_conv_rows;
/* conv2d_pool with the conv's values from rows (NULL: conv.c's own), its workspace from ws */
size_t sy_conv2d_pool_ws(const sy_kargs *k, int threads, const sy_conv_rows *rows);
void sy_conv2d_pool_run(const sy_kargs *k, float *ws, const sy_conv_rows *rows);

/* The depthwise conv (depthwise.c): conv2d with groups = C > 1, one input
 * channel per group; conv.c's kernels hand such convs over. */
bool sy_cpu_conv_is_depthwise(const sy_attrs *a, const sy_shape *w);
void sy_cpu_depthwise_fwd(const sy_kargs *k);
void sy_cpu_depthwise_bwd_data(const sy_kargs *k);
void sy_cpu_depthwise_bwd_filter(const sy_kargs *k);
size_t sy_cpu_depthwise_bwd_filter_ws(const sy_kargs *k, int threads);
extern const sy_kernel sy_cpu_lstm_scan, sy_cpu_lstm_scan_grad, sy_cpu_lstm_scan_wgrad, sy_cpu_gru_scan, sy_cpu_gru_scan_grad;
/* issue 18, int8 products (qgemm.c): y (m, n) int8, row stride ldy = clamp(y_zp + requantize(bias[c] +
 * sum_k (x[i][k] - x_zp) w[c][k], mult[c], shift[c]), act_min, act_max) for x (m, k) int8 with row stride
 * ldx and w (n, k) int8 row-major (TFLite's FULLY_CONNECTED and (O, H, W, I) CONV_2D layouts), symmetric.
 * mult and shift (n): per output channel (a per-tensor scale repeated); bias (n) int32 or NULL; k < 2^16.
 * sy_qgemm_i8_ref defines the results; fast kernels match it bit for bit. */
typedef struct sy_qgemm_params {
    int32_t x_zp, y_zp;       /* zero points of the input and the output */
    int32_t act_min, act_max; /* the fused activation as a clamp, within [-128, 127] */
    const int32_t *bias;      /* (n) or NULL */
    const int32_t *mult;      /* (n) Q31 multipliers, sy_q_multiplier */
    const int32_t *shift;     /* (n) their shifts */
} sy_qgemm_params;
void sy_qgemm_i8_ref(int8_t *y, int64_t ldy, const int8_t *x, int64_t ldx, const int8_t *w, int64_t m, int64_t n,
                     int64_t k, const sy_qgemm_params *p);
/* The fast version (qgemm_fast.c, AVX-512 VNNI; portable C elsewhere), bit for bit sy_qgemm_i8_ref: pack the
 * weights w (n, k) once into sy_qgemm_packed_bytes(n, k) bytes (64-byte aligned is best; the packing holds
 * per-channel weight sums, independent of the params), then y = the product over ex's threads (ex may be NULL:
 * the calling thread), blocks fixed by the shapes. sy_qgemm_i8_unpacked packs w into ws (that many bytes)
 * on every call, for callers without a plan-time packing step. 1 <= k < 2^16. */
int64_t sy_qgemm_packed_bytes(int64_t n, int64_t k);
void sy_qgemm_pack(void *packed, const int8_t *w, int64_t n, int64_t k);
void sy_qgemm_i8(const sy_exec *ex, int8_t *y, int64_t ldy, const int8_t *x, int64_t ldx, const void *packed,
                 int64_t m, int64_t n, int64_t k, const sy_qgemm_params *p);
void sy_qgemm_i8_unpacked(const sy_exec *ex, int8_t *y, int64_t ldy, const int8_t *x, int64_t ldx, const int8_t *w,
                          int64_t m, int64_t n, int64_t k, const sy_qgemm_params *p, void *ws);
/* issue 18, the int8 depthwise conv (qdepthwise.c): TFLite's DEPTHWISE_CONV_2D, per channel. x (n, h, w, c)
 * int8, the filter (1, kh, kw, c * mult) as TFLite stores it, y (n, oh, ow, c * mult); output channel
 * ic * mult + m; strides, dilations and leading padding (taps in the padding left out: x padded by x_zp).
 * p's bias, mult and shift have c * mult entries. sy_qdepthwise_i8_ref is TFLite's
 * reference_integer_ops::DepthwiseConvPerChannel; sy_qdepthwise_i8 (over ex's threads, ex may be NULL)
 * matches it bit for bit. */
typedef struct sy_qdw_geom {
    int64_t n, h, w, c, mult; /* input (n, h, w, c), depth multiplier */
    int64_t kh, kw;           /* filter taps */
    int64_t sh, sw, dh, dw;   /* strides, dilations */
    int64_t pt, pl;           /* leading padding */
    int64_t oh, ow;           /* output size */
} sy_qdw_geom;
void sy_qdepthwise_i8_ref(int8_t *y, const int8_t *x, const int8_t *w, const sy_qdw_geom *g,
                          const sy_qgemm_params *p);
void sy_qdepthwise_i8(const sy_exec *ex, int8_t *y, const int8_t *x, const int8_t *w, const sy_qdw_geom *g,
                      const sy_qgemm_params *p);

/* issue 18: a QCONV2D's geometry from its shapes and attr.q (qref.c), which both int8 conv kernels read */
typedef struct sy_qconv_geom {
    int64_t n, h, w, c, o, kh, kw, cg, og, oh, ow, groups, sh, sw, dh, dw, ph, pw, k;
} sy_qconv_geom;
sy_qconv_geom sy_qconv_geometry(const sy_kargs *k);
/* issue 18: QCONV2D_POOL (fusion.c's qconv2d -> qmax_pool2d) as its two ops (qref.c): the conv's kargs, writing
 * its full output to conv_out (sy_qconv_pool_conv_bytes of them; the conv's workspace left to the caller), and the
 * pool's, reading it. s must stay where it is while they are used (they point into it). */
typedef struct sy_qconv_pool_parts {
    sy_kargs conv, pool;
    sy_attrs pool_attr;
    sy_shape conv_shape;
    void *pool_in[1];
} sy_qconv_pool_parts;
void sy_qconv_pool_split(const sy_kargs *k, void *conv_out, sy_qconv_pool_parts *s);
size_t sy_qconv_pool_conv_bytes(const sy_kargs *k);
/* issue 18 (qconvpool.c): QCONV2D_POOL in one pass (AVX-512 VNNI), else the cpu conv then the cpu pool */
extern const sy_kernel sy_cpu_qconv2d_pool;
/* issue 18 (qconv.c): QCONV2D and QFULLY_CONNECTED over the fast int8 product and depthwise kernels, and
 * the int8 pools, ADD and QUANTIZE over the threads */
extern const sy_kernel sy_cpu_qconv2d, sy_cpu_qfully_connected, sy_cpu_qmax_pool2d, sy_cpu_qavg_pool2d, sy_cpu_qadd,
    sy_cpu_quantize;
/* issue 18, dynamic-range quantization (qhybrid.c): TFLite's hybrid FULLY_CONNECTED and LSTM, scalar loops */
extern const sy_kernel sy_qhybrid_fully_connected, sy_qhybrid_lstm, sy_cpu_hlstm;

/* issue 16, bfloat16 storage (bf16.c): the cast between float32 and bfloat16 buffers, and dropout
 */
extern const sy_kernel sy_cpu_copy, sy_cpu_dropout;

#endif
