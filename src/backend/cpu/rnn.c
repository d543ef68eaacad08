/*
 * rnn.c - the recurrent scans on the cpu backend: LSTM and GRU forward and
 * backward over a whole sequence (graph/ops_rnn.c says what they compute,
 * docs/design/recurrent.md why they are built this way).
 *
 * LSTM. The rows of a batch never meet, so the batch is cut into blocks of
 * SY_SMALLGEMM_MR (6) rows, the small GEMM's tile height, and each block
 * goes through all T steps on whichever thread takes it, with no
 * synchronisation between steps; results do not depend on the threads. A
 * block's rows are assembled in images in L1 (sy_lstm_layout's rows):
 *
 *   forward   x(t) copied in beside h(t-1) and 1; one product
 *             [x, h(t-1), 1] (6, D + U + 1) x [kernel; recurrent; bias]
 *             into the gate columns; the cell; the row streamed out to
 *             the sequence tensor (for inference only h is copied out);
 *             h times the mask becomes the next step's h(t-1);
 *   backward  dh(t) = the layer's gradient + dh(t-1) of the later step
 *             (times the mask); the gate gradients; one product d gates
 *             (6, 4U) x [kernel; recurrent]^T giving dx and dh(t-1); the
 *             grad row streamed out;
 *   weights   one GEMM over all B * T rows, [x, h(t-1), 1]^T d gates,
 *             through the rows' strides (lstm_scan_wgrad).
 *
 * The step products run on smallgemm.c's 6 x 16 tile with the stacked
 * weights packed once per call. With AVX2 the gates' activations are one
 * sigmoid pass (g's weights are packed doubled, exactly, and tanh(z) = 2
 * sigmoid(2z) - 1) and the cell uses cpu_internal.h's eight-lane exp,
 * sigmoid and tanh; other activations take the generic loops, and those
 * outside tanh, sigmoid, relu and none (issue 15: elu, gelu, ...) the
 * general cell: scalar loops through sy_act_fn_ref on the pre-activations,
 * which the rows then keep (graph/ops_rnn.c).
 *
 * GRU. A step is one GEMM plus elementwise work on (B, U) rows: the input
 * half x . kernel + bias for all B * T rows is one GEMM written straight
 * into the gate columns of the (B, T, 5U) rows; each step adds h(t-1) .
 * recurrent through the small GEMM (rows split over the replica's threads
 * by shape) and applies the gates row by row; backwards the gate gradients
 * row by row, then dh(t-1) = d inner x recurrent^T.
 *
 * Masks (issue 17, masking): with a steps mask (B, T), a masked step's
 * row keeps c(t-1) and h(t-1) (LSTM: saved from the image before the cell
 * and put back; GRU: h copied from the previous row), and backwards its
 * gate gradients are zeros and dh (and dc) go to the step before as they
 * are: the LSTM's rows carry dh in a per-row buffer beside the product's
 * dh(t-1), which the recurrent dropout mask multiplies and the carry not.
 *
 * Products (issue 16, MXU recurrent products). Every product goes through
 * one of three numerics (sy_rnn_numerics): float32 (the cpu backend, the
 * code above, untouched), or the MXU's (the sim backend: operands rounded
 * to bfloat16, sums in chunks of 128; docs/design/mxu-numerics.md) by
 * mxu_pairs.c's micro-kernel run chunk by chunk over part of a B packed in
 * bfloat16 pairs (sy_mxu_chunk) or by scalar loops (sim-ref, the reference the
 * fast path equals bit for bit). With the MXU's numerics the bias is not a
 * row of B but added after the sum in float32; the gates, cells, masks and
 * layouts are the same code for all three, so sim and sim-ref differ only
 * in how a product is summed.
 */
#include "cpu_internal.h"

/* v = act(v) over n floats */
static void apply(float *restrict v, int64_t n, int act) {
    switch (act) {
    case SY_ACT_RELU:
        for (int64_t i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : 0;
        break;
    case SY_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++) v[i] = sy_vsigmoidf(v[i]);
        break;
    case SY_ACT_TANH:
        for (int64_t i = 0; i < n; i++) v[i] = sy_vtanhf(v[i]);
        break;
    default: break;
    }
}

/* d = act'(at the point that gave y) over n floats */
static void slope(float *restrict d, const float *restrict y, int64_t n, int act) {
    switch (act) {
    case SY_ACT_RELU:
        for (int64_t i = 0; i < n; i++) d[i] = y[i] > 0 ? 1.0f : 0.0f;
        break;
    case SY_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++) d[i] = y[i] * (1 - y[i]);
        break;
    case SY_ACT_TANH:
        for (int64_t i = 0; i < n; i++) d[i] = 1 - y[i] * y[i];
        break;
    default:
        for (int64_t i = 0; i < n; i++) d[i] = 1;
        break;
    }
}

/* The general cell's activation p (attr.rnn.fn[]) at the pre-activation v,
 * and its derivative there. */
static inline float gen_act(const sy_act_params *p, float v) { return (float)sy_act_fn_ref(p, v); }
static inline float gen_slope(const sy_act_params *p, float v) { return (float)sy_act_fn_grad_ref(p, v); }

static int64_t floats_aligned_rnn(int64_t n) { return sy_align_up(n, SY_ALIGN / (int64_t)sizeof(float)); }

typedef struct scan_dims {
    int64_t b, t, d, u;
    int act, rec_act;
} scan_dims;

/* seq (B, T, ...) gives B and T, the recurrent kernel (input `rec`) U. */
static scan_dims dims_of(const sy_kargs *k, const sy_shape *seq, int rec) {
    scan_dims d = {seq->dims[0], seq->dims[1], 0, k->in_shape[rec].dims[0], k->attr->rnn.act, k->attr->rnn.rec_act};
    return d;
}

static const float *scan_bias(const sy_kargs *k) { return k->attr->rnn.has_bias ? k->in[3] : NULL; }
static const float *scan_mask(const sy_kargs *k) { return k->attr->rnn.has_mask ? k->in[3 + k->attr->rnn.has_bias] : NULL; }
/* issue 17, masking: the steps' mask (B, T), the last input; first: where it would be without a dropout mask */
static const float *scan_steps(const sy_kargs *k, int first) {
    return k->attr->rnn.has_steps ? k->in[first + k->attr->rnn.has_mask] : NULL;
}

/* GRU: the A operand of a step's GEMM: h(t-1) rows (stride ld), times the
 * mask into tmp when there is one. */
static const float *masked_prev(const float *h, int64_t ld, const float *mask, float *tmp, const scan_dims *d,
                                int64_t *lda) {
    if (!mask) {
        *lda = ld;
        return h;
    }
    for (int64_t b = 0; b < d->b; b++)
        for (int64_t j = 0; j < d->u; j++) tmp[b * d->u + j] = h[b * ld + j] * mask[b * d->u + j];
    *lda = d->u;
    return tmp;
}

/* GRU: the gates of every step, x (B*T, D) . kernel (D, gU) [+ bias], into
 * the first gU columns of the packed rows (stride ld): one GEMM over all
 * rows. */
static void input_gates(const sy_kargs *k, float *seq, int64_t ld, int64_t gu, const float *bias) {
    const sy_shape *xs = &k->in_shape[0];
    int64_t rows = xs->dims[0] * xs->dims[1], d = xs->dims[2];
    sy_sgemm_parallel(k->ex, false, false, rows, gu, d, 1.0f, k->in[0], d, k->in[1], gu, 0.0f, seq, ld, bias, SY_ACT_NONE);
}

/* GRU: dh reaching step t of row b, added to acc (U floats): all steps, or
 * the last. */
static void add_dh(float *restrict acc, const sy_kargs *k, int64_t b, int64_t t, const scan_dims *d) {
    const float *dh = k->in[0];
    int64_t th = k->in_shape[0].dims[1];
    const float *src = th == d->t ? dh + (b * d->t + t) * d->u : t == d->t - 1 ? dh + b * d->u : NULL;
    if (src)
        for (int64_t j = 0; j < d->u; j++) acc[j] += src[j];
}

/* ---- issue 16, MXU recurrent products --------------------------------------------
 * With the MXU's numerics (docs/design/mxu-numerics.md) a product's operands
 * are rounded to bfloat16 and each output sums its K products in chunks of
 * SY_MXU_DEPTH (each chunk's terms in pairs, from 0), the chunks added in
 * order to a float32 accumulator; K may come in two segments (a step's x
 * then h(t-1)), and a chunk never spans both. The fast path (sim) packs A
 * and B in bfloat16 pairs (mxu_pairs.c), each segment on its own (B: one
 * packed B a segment, one after the other), and runs the micro-kernel once
 * per chunk; the reference (sim-ref) is a scalar loop over B by rows
 * (sy_pack_b_rows's pointers). Bias terms are added afterwards in float32,
 * by the callers. */
typedef struct rnn_b {
    sy_rnn_numerics num;
    const uint32_t *bp;       /* B (K, N) packed in pairs, segment by segment (SY_RNN_MXU: rnn_pack_b) */
    const float *const *rows; /* B by rows or, transposed, by columns (SY_RNN_MXU_REF) */
    bool transposed;
    int64_t k, n, seg; /* seg: where B's second segment starts (K: one segment) */
} rnn_b;

/* B's rows by segment into bp (SY_RNN_MXU): rows[0 .. seg) then rows[seg .. k) (transposed, rows are
 * B's columns: one segment); at most sy_pack_b_floats(k, n) words */
static void rnn_pack_b(uint32_t *bp, const float *const *rows, bool transposed, int64_t k, int64_t n, int64_t seg) {
    sy_mxu_pack_b_rows(bp, rows, transposed, seg, n);
    if (seg < k) sy_mxu_pack_b_rows(bp + sy_mxu_b_words(seg, n), rows + seg, false, k - seg, n);
}

/* C (m, N) = A (m, K) x B with the MXU's numerics; A's stride lda, C's ldc;
 * abuf m x K floats of scratch (the fast path's A in pairs); ex NULL: on
 * the calling thread. */
static void rnn_product(const rnn_b *p, const sy_exec *ex, int64_t m, const float *a, int64_t lda, float *c, int64_t ldc,
                        float *abuf) {
    if (p->num == SY_RNN_MXU_REF) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < p->n; j++) {
                sy_mxu_acc s = {0};
                for (int64_t kk = 0; kk < p->k; kk++) {
                    if (kk == p->seg) sy_mxu_flush(&s);
                    sy_mxu_term(&s, a[i * lda + kk], p->transposed ? p->rows[j][kk] : p->rows[kk][j]);
                }
                c[i * ldc + j] = sy_mxu_total(&s);
            }
        return;
    }
    uint32_t *ap = (uint32_t *)abuf;
    int64_t len[2] = {p->seg, p->k - p->seg}, ldp = sy_mxu_pairs(len[0]) + sy_mxu_pairs(len[1]);
    const uint32_t *bseg = p->bp;
    for (int s = 0, a0 = 0; s < 2; s++) {
        sy_mxu_pack_a(ap + a0, ldp, a + (s ? p->seg : 0), lda, false, m, len[s], false);
        for (int64_t k0 = 0; k0 < len[s]; k0 += SY_MXU_DEPTH) {
            int64_t kp = sy_mxu_pairs(sy_min64(SY_MXU_DEPTH, len[s] - k0)), pstride = sy_mxu_pairs(len[s]) * 16;
            const uint32_t *apc = ap + a0 + k0 / 2, *bpc = bseg + k0 / 2 * 16;
            bool acc = s > 0 || k0 > 0;
            if (ex)
                sy_mxu_chunk_par(ex, m, p->n, kp, apc, ldp, bpc, pstride, acc, c, ldc);
            else
                sy_mxu_chunk(m, p->n, kp, apc, ldp, bpc, pstride, acc, c, ldc);
        }
        a0 += (int)sy_mxu_pairs(len[s]);
        bseg += sy_mxu_b_words(len[s], p->n);
    }
}

/* C (M, N) = op(A) (M, K) x B (K, N) [+ bias] over a whole sequence (the
 * GRU's input gates, the LSTM's weight gradient): sim/mxu.c's GEMM, or the
 * reference loop; ws sy_mxu_gemm_ws_floats floats. */
static void rnn_gemm(sy_rnn_numerics num, const sy_exec *ex, bool ta, int64_t M, int64_t N, int64_t K, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc, const float *bias, float *ws) {
    if (num == SY_RNN_MXU) {
        sy_mxu_gemm(ex, ta, M, N, K, a, lda, b, ldb, c, ldc, bias, ws);
        return;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            sy_mxu_acc s = {0};
            for (int64_t p = 0; p < K; p++) sy_mxu_term(&s, ta ? a[p * lda + i] : a[i * lda + p], b[p * ldb + j]);
            c[i * ldc + j] = bias ? sy_mxu_total(&s) + bias[j] : sy_mxu_total(&s);
        }
}

/* ---- LSTM -------------------------------------------------------------------- */

/* Keras's default activations (tanh, sigmoid gates): the gates i f g o
 * activated in place, c = f c(t-1) + i g over c(t-1) in place, and
 * h = o act(c). */
#if SY_HAVE_AVX2_FMA
/* With AVX2 the product gives g's columns doubled (their packed weights are
 * doubled, which is exact), so that one sigmoid pass over the 4U gates
 * serves all four: tanh(z) = 2 sigmoid(2 z) - 1. Four vectors per
 * iteration: one sigmoid is a chain of some 20 dependent instructions, and
 * independent chains side by side keep both FMA pipes busy (17 cycles a
 * vector alone, 12 four at a time). */
static inline __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* dst[j] = f(src[j]) over n floats (dst may be src), four vectors an
 * iteration; f is a constant where this is inlined. */
static inline __attribute__((always_inline)) void map8(float *dst, const float *src, int64_t n, __m256 (*f)(__m256)) {
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 a = f(_mm256_loadu_ps(src + j)), b = f(_mm256_loadu_ps(src + j + 8)),
               c = f(_mm256_loadu_ps(src + j + 16)), d = f(_mm256_loadu_ps(src + j + 24));
        _mm256_storeu_ps(dst + j, a);
        _mm256_storeu_ps(dst + j + 8, b);
        _mm256_storeu_ps(dst + j + 16, c);
        _mm256_storeu_ps(dst + j + 24, d);
    }
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, f(_mm256_loadu_ps(src + j)));
    if (j < n) {
        __m256i m = tail_mask(n - j);
        _mm256_maskstore_ps(dst + j, m, f(_mm256_maskload_ps(src + j, m)));
    }
}

static void sigmoid_in_place(float *p, int64_t n) { map8(p, p, n, sy_sigmoid8); }

/* Eight units of the state, g still sigmoid(2 z), c holding c(t-1);
 * `full` is a constant where this is inlined, so the masked loads and
 * stores of the last units cost nothing elsewhere. */
#define LD(p) (full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask))
#define ST(p, v) (full ? _mm256_storeu_ps(p, v) : _mm256_maskstore_ps(p, mask, v))
static inline __attribute__((always_inline)) void lstm_state8(const float *i, const float *f, float *g, const float *o,
                                                               float *c, float *h, bool full, __m256i mask) {
    __m256 gv = _mm256_fmsub_ps(_mm256_set1_ps(2.0f), LD(g), _mm256_set1_ps(1.0f)), ig = _mm256_mul_ps(LD(i), gv);
    __m256 cv = _mm256_fmadd_ps(LD(f), LD(c), ig);
    ST(g, gv);
    ST(c, cv);
    ST(h, _mm256_mul_ps(LD(o), sy_tanh8(cv)));
}

static void tanh_into(float *p, const float *c, int64_t n) { map8(p, c, n, sy_tanh8); }

static void lstm_cell_default(float *s, float *c, float *h, int64_t u) {
    sigmoid_in_place(s, 4 * u);
    float *i = s, *f = s + u, *g = s + 2 * u, *o = s + 3 * u;
    int64_t j = 0;
    __m256i all = _mm256_setzero_si256();
    for (; j + 16 <= u; j += 16) {
        lstm_state8(i + j, f + j, g + j, o + j, c + j, h + j, true, all);
        lstm_state8(i + j + 8, f + j + 8, g + j + 8, o + j + 8, c + j + 8, h + j + 8, true, all);
    }
    for (; j + 8 <= u; j += 8) lstm_state8(i + j, f + j, g + j, o + j, c + j, h + j, true, all);
    if (j < u) lstm_state8(i + j, f + j, g + j, o + j, c + j, h + j, false, tail_mask(u - j));
}

#undef LD
#undef ST
#define LSTM_G_DOUBLED 1
#else
/* Each column gets its own restrict pointer: with one pointer and offsets
 * GCC cannot prove the stores and loads apart and leaves the loop scalar. */
static void lstm_cell_columns(float *restrict i, float *restrict f, float *restrict g, float *restrict o,
                              float *restrict c, float *restrict h, int64_t u) {
    for (int64_t j = 0; j < u; j++) {
        float ij = sy_vsigmoidf(i[j]), fj = sy_vsigmoidf(f[j]), gj = sy_vtanhf(g[j]), oj = sy_vsigmoidf(o[j]);
        float cj = fj * c[j] + ij * gj;
        i[j] = ij;
        f[j] = fj;
        g[j] = gj;
        o[j] = oj;
        c[j] = cj;
        h[j] = oj * sy_vtanhf(cj);
    }
}

static void lstm_cell_default(float *s, float *c, float *h, int64_t u) {
    lstm_cell_columns(s, s + u, s + 2 * u, s + 3 * u, c, h, u);
}

static void tanh_into(float *restrict p, const float *restrict c, int64_t n) {
    for (int64_t j = 0; j < n; j++) p[j] = sy_vtanhf(c[j]);
}
#define LSTM_G_DOUBLED 0
#endif

/* Any activations: the gates of row s (i f g o, then c holding c(t-1), h). */
static void lstm_cell_any(float *s, const sy_lstm_cols *l, int64_t u, int act, int rec_act) {
    apply(s, u, rec_act);
    apply(s + u, u, rec_act);
    apply(s + 2 * u, u, act);
    apply(s + 3 * u, u, rec_act);
    float *c = s + l->c, *h = s + l->h;
    for (int64_t j = 0; j < u; j++) c[j] = s[u + j] * c[j] + s[j] * s[2 * u + j];
    memcpy(h, c, (size_t)u * sizeof(float));
    apply(h, u, act);
    for (int64_t j = 0; j < u; j++) h[j] *= s[3 * u + j];
}

/* The general cell (fn: activation, recurrent activation): the gate
 * columns of row s keep their pre-activations z; c holds c(t-1). */
static void lstm_cell_general(float *s, const sy_lstm_cols *l, int64_t u, const sy_act_params *fn) {
    float *c = s + l->c, *h = s + l->h;
    for (int64_t j = 0; j < u; j++) {
        float i = gen_act(&fn[1], s[j]), f = gen_act(&fn[1], s[u + j]), g = gen_act(&fn[0], s[2 * u + j]);
        c[j] = f * c[j] + i * g;
        h[j] = gen_act(&fn[1], s[3 * u + j]) * gen_act(&fn[0], c[j]);
    }
}

/* The general cell's gate gradients from the pre-activations in row s. */
static void lstm_cell_grad_general(float *dz, float *dc, const float *dh, const float *s, const sy_lstm_cols *l,
                                   const float *cp, int64_t u, const sy_act_params *fn) {
    for (int64_t j = 0; j < u; j++) {
        const float zi = s[j], zf = s[u + j], zg = s[2 * u + j], zo = s[3 * u + j], c = s[l->c + j];
        float i = gen_act(&fn[1], zi), f = gen_act(&fn[1], zf), g = gen_act(&fn[0], zg), o = gen_act(&fn[1], zo);
        float ac = gen_act(&fn[0], c), c_grad = dc[j] + dh[j] * o * gen_slope(&fn[0], c);
        dz[j] = c_grad * g * gen_slope(&fn[1], zi);
        dz[u + j] = cp ? c_grad * cp[j] * gen_slope(&fn[1], zf) : 0.0f;
        dz[2 * u + j] = c_grad * i * gen_slope(&fn[0], zg);
        dz[3 * u + j] = dh[j] * ac * gen_slope(&fn[1], zo);
        dc[j] = c_grad * f;
    }
}

/* The gate gradients from dh and dc (the later step's, becoming this
 * step's) and act(c); has_cp a constant where inlined (the test outside the
 * loop, so that GCC vectorises both cases). */
static inline __attribute__((always_inline)) void lstm_grad_loop(float *restrict di, float *restrict df,
                                                                  float *restrict dg, float *restrict dout,
                                                                  float *restrict dc, const float *restrict dh,
                                                                  const float *restrict i, const float *restrict f,
                                                                  const float *restrict g, const float *restrict o,
                                                                  const float *restrict ac, const float *restrict cp,
                                                                  bool has_cp, int64_t u) {
    for (int64_t j = 0; j < u; j++) {
        float ij = i[j], fj = f[j], gj = g[j], oj = o[j], tc = ac[j];
        float c_grad = dc[j] + dh[j] * oj * (1 - tc * tc);
        di[j] = c_grad * gj * ij * (1 - ij);
        df[j] = has_cp ? c_grad * cp[j] * fj * (1 - fj) : 0.0f;
        dg[j] = c_grad * ij * (1 - gj * gj);
        dout[j] = dh[j] * tc * oj * (1 - oj);
        dc[j] = c_grad * fj;
    }
}
/* dh(t) of one row, into dh: the layer's gradient at step t (from_y, or
 * NULL) plus dh(t-1) of the later step (later, or NULL) times the mask (m,
 * or NULL). */
static void lstm_dh(float *restrict dh, const float *restrict from_y, const float *restrict later,
                    const float *restrict m, int64_t u) {
    if (!later)
        for (int64_t q = 0; q < u; q++) dh[q] = from_y ? from_y[q] : 0.0f;
    else if (m)
        for (int64_t q = 0; q < u; q++) dh[q] = (from_y ? from_y[q] : 0.0f) + later[q] * m[q];
    else
        for (int64_t q = 0; q < u; q++) dh[q] = (from_y ? from_y[q] : 0.0f) + later[q];
}

/* The gate gradients of one row for Keras's default activations; act(c)
 * is computed again into ac (U floats of scratch): a pass of its own, where
 * the tanh chains of neighbouring vectors overlap (inside the gradient loop
 * they made it slower than reading act(c) back from memory). */
static void lstm_cell_grad_default(float *di, float *df, float *dg, float *dout, float *dc, const float *dh,
                                   const float *i, const float *f, const float *g, const float *o, const float *c,
                                   const float *cp, float *ac, int64_t u) {
    tanh_into(ac, c, u);
    if (cp)
        lstm_grad_loop(di, df, dg, dout, dc, dh, i, f, g, o, ac, cp, true, u);
    else
        lstm_grad_loop(di, df, dg, dout, dc, dh, i, f, g, o, ac, ac, false, u);
}

/* Any activations; s the row (i f g o c ...), dz its gate gradients, sl
 * scratch for 5 x U. */
static void lstm_cell_grad_any(float *dz, float *dc, const float *dh, const float *s, const sy_lstm_cols *l,
                               const float *cp, float *sl, int64_t u, int act, int rec_act) {
    float *ac = sl, *s_ac = sl + u, *s_i = sl + 2 * u, *s_f = sl + 3 * u, *s_o = sl + 4 * u;
    const float *i = s, *f = s + u, *g = s + 2 * u, *o = s + 3 * u;
    memcpy(ac, s + l->c, (size_t)u * sizeof(float));
    apply(ac, u, act);
    slope(s_ac, ac, u, act);
    slope(s_i, i, u, rec_act);
    slope(s_f, f, u, rec_act);
    slope(s_o, o, u, rec_act);
    slope(dz + 2 * u, g, u, act); /* the candidate's slope, multiplied in below */
    for (int64_t j = 0; j < u; j++) {
        float c_grad = dc[j] + dh[j] * o[j] * s_ac[j];
        dz[j] = c_grad * g[j] * s_i[j];
        dz[u + j] = cp ? c_grad * cp[j] * s_f[j] : 0.0f;
        dz[2 * u + j] *= c_grad * i[j];
        dz[3 * u + j] = dh[j] * ac[j] * s_o[j];
        dc[j] = c_grad * f[j];
    }
}

typedef struct lstm_job {
    const sy_kargs *k;
    sy_lstm_cols l;
    int64_t b, t, d, u;
    int act, rec_act;
    bool need_dx, inference;
    const float *bp, *mask;
    float *scratch;             /* per row block: block_floats() */
    const sy_act_params *fn;    /* the general cell's activations, or NULL */
    /* issue 16, MXU recurrent products: the step product's B and numerics, the rows' rounded A (abuf_floats a
     * block), the bias added after the product (g's columns doubled when the cell wants them so) and whether
     * the reference's product must double g's columns itself (the fast path's packed weights are doubled) */
    rnn_b prod;
    float *abuf;
    int64_t abuf_floats;
    const float *bias;
    bool ref_doubles_g;
    const float *steps; /* issue 17, masking: (B, T) of 0/1, or NULL */
} lstm_job;

#define MR SY_SMALLGEMM_MR

/* A row block's scratch. Forward: the rows' images. Backward: the grad
 * rows' images, the step product's rows [dx, dh(t-1)] (prod_stride
 * floats), dc and dh (U each a row), 5U for the generic cell. */
static int64_t prod_stride(int64_t n) { return (n + 15) / 16 * 16; }

static int64_t block_floats(const sy_lstm_cols *l, int64_t d, int64_t u, bool need_dx, bool backward) {
    /* issue 17, masking: forward c(t-1) and h(t-1) of a row (2U), backward the dh a masked step carries (MR x U) */
    if (!backward) return floats_aligned_rnn(MR * l->width + 2 * u);
    return floats_aligned_rnn(MR * (l->grad_width + prod_stride((need_dx ? d : 0) + u) + 3 * u) + 5 * u);
}

/* A finished row image out to its place in the tensor. The rows are
 * written once and read only by later ops, so with AVX streaming stores
 * take them past the cache: no read of the old line first (which plain
 * stores of lines not in cache cost), and no eviction of the weights and
 * images the next steps use. Both pointers are 64-byte aligned and n a
 * multiple of 16 (sy_lstm_layout's padding). */
static void stream_row(float *restrict dst, const float *restrict src, int64_t n) {
#if defined(__AVX__)
    for (int64_t j = 0; j < n; j += 8) _mm256_stream_ps(dst + j, _mm256_load_ps(src + j));
#else
    memcpy(dst, src, (size_t)n * sizeof(float));
#endif
}

static void stream_done(void) {
#if defined(__AVX__)
    _mm_sfence(); /* streaming stores are weakly ordered: finish them before the next op reads */
#endif
}

/* The step's product for the block's nr rows of images img: [x, h(t-1), 1]
 * x [kernel; recurrent; bias] in float32, or with the MXU's numerics
 * [x, h(t-1)] x [kernel; recurrent] (x's D columns, then h's U) and the
 * bias added afterwards. */
static void lstm_fwd_product(const lstm_job *j, int64_t part, int64_t nr, float *img) {
    const sy_lstm_cols *l = &j->l;
    int64_t u = j->u, w = l->width;
    if (j->prod.num == SY_RNN_F32) {
        sy_sgemm_packed_serial(nr, 4 * u, j->d + u + 1, img + l->x, w, j->bp, false, img + l->gates, w);
        return;
    }
    rnn_product(&j->prod, NULL, nr, img + l->x, w, img + l->gates, w, j->abuf + part * j->abuf_floats);
    for (int64_t r = 0; r < nr; r++) {
        float *g = img + r * w + l->gates;
        for (int64_t q = 2 * u; j->ref_doubles_g && q < 3 * u; q++) g[q] *= 2.0f; /* exact, as the packed doubling */
        for (int64_t q = 0; j->bias && q < 4 * u; q++) g[q] += j->bias[q];
    }
}

/* Forward, rows [MR part, MR part + MR) through every step. Each row is
 * built in an image in L1 -- x(t) copied in beside h(t-1) and 1, one
 * product [x, h(t-1), 1] x [kernel; recurrent; bias] for the block's rows
 * into the gate columns, the cell (c(t-1) is still in the image's c
 * columns) -- then streamed out (for inference only h is copied out), and
 * h (times the mask) becomes the next step's h(t-1). Rows never meet, so
 * blocks run on any thread without a barrier between steps. */
static void lstm_fwd_rows(void *ctx, int64_t part) {
    const lstm_job *j = ctx;
    const sy_lstm_cols *l = &j->l;
    const float *x = j->k->in[0];
    float *seq = j->k->out;
    int64_t u = j->u, d = j->d, w = l->width, r0 = part * MR, nr = sy_min64(MR, j->b - r0);
    float *img = j->scratch + part * block_floats(l, d, u, false, false);
    bool fast = j->act == SY_ACT_TANH && j->rec_act == SY_ACT_SIGMOID;
    memset(img, 0, (size_t)(nr * w) * sizeof(float)); /* h(-1), c(-1) and the padding are zeros */
    for (int64_t r = 0; r < nr; r++) img[r * w + l->one] = 1.0f;
    for (int64_t t = 0; t < j->t; t++) {
        for (int64_t r = 0; r < nr; r++)
            memcpy(img + r * w + l->x, x + ((r0 + r) * j->t + t) * d, (size_t)d * sizeof(float));
        lstm_fwd_product(j, part, nr, img);
        for (int64_t r = 0; r < nr; r++) {
            float *s = img + r * w, *kept = img + MR * w;
            bool masked = j->steps && j->steps[(r0 + r) * j->t + t] == 0;
            if (masked) { /* issue 17, masking: the step keeps c(t-1) and h(t-1), which the cell overwrites */
                memcpy(kept, s + l->c, (size_t)u * sizeof(float));
                memcpy(kept + u, s + l->h, (size_t)u * sizeof(float));
            }
            if (fast)
                lstm_cell_default(s, s + l->c, s + l->h, u);
            else if (j->fn)
                lstm_cell_general(s, l, u, j->fn);
            else
                lstm_cell_any(s, l, u, j->act, j->rec_act);
            if (masked) {
                memcpy(s + l->c, kept, (size_t)u * sizeof(float));
                memcpy(s + l->h, kept + u, (size_t)u * sizeof(float));
            }
            if (j->inference)
                memcpy(seq + ((r0 + r) * j->t + t) * u, s + l->h, (size_t)u * sizeof(float));
            else
                stream_row(seq + ((r0 + r) * j->t + t) * w, s, w);
            const float *h = s + l->h, *m = j->mask ? j->mask + (r0 + r) * u : NULL;
            float *hp = s + l->hp;
            for (int64_t q = 0; q < u; q++) hp[q] = m ? h[q] * m[q] : h[q];
        }
    }
    stream_done();
}

/* Row pointers of [kernel; recurrent] (without the kernel's rows unless
 * with_x), for sy_pack_b_rows; returns how many. */
static int64_t lstm_weight_rows(const float **rows, const float *kernel, const float *recurrent, int64_t d, int64_t u,
                                bool with_x) {
    int64_t n = 0;
    for (int64_t p = 0; with_x && p < d; p++) rows[n++] = kernel + p * 4 * u;
    for (int64_t p = 0; p < u; p++) rows[n++] = recurrent + p * 4 * u;
    return n;
}

/* issue 16, MXU recurrent products: the MXU path's workspace besides the
 * float32 one: the bias (4U) and each row block's rounded A (MR x k). */
static int64_t mxu_extra_floats(sy_rnn_numerics num, int64_t blocks, int64_t gu, int64_t k) {
    return num == SY_RNN_F32 ? 0 : floats_aligned_rnn(gu) + blocks * floats_aligned_rnn(MR * k);
}

/* workspace: the packed weights, the blocks' scratch, (MXU) the bias and the
 * rounded A, the row pointers */
static size_t lstm_fwd_ws(const sy_kargs *k, sy_rnn_numerics num) {
    int64_t b = k->in_shape[0].dims[0], d = k->in_shape[1].dims[0], u = k->in_shape[2].dims[0], kk = d + u + 1,
            blocks = (b + MR - 1) / MR;
    sy_lstm_cols l = sy_lstm_layout(d, u, false);
    return (size_t)(floats_aligned_rnn(sy_pack_b_floats(kk, 4 * u)) + blocks * block_floats(&l, d, u, false, false) +
                    mxu_extra_floats(num, blocks, 4 * u, d + u)) *
               sizeof(float) +
           (size_t)kk * sizeof(float *);
}

/* (x, kernel, recurrent [, bias] [, mask]) -> rows of sy_lstm_layout. With
 * the MXU's numerics B is [kernel; recurrent] (K = D + U, rounded), the bias
 * added after the product. */
static void lstm_scan_fwd(const sy_kargs *k, sy_rnn_numerics num) {
    scan_dims sd = dims_of(k, k->out_shape, 2);
    int64_t d = k->in_shape[1].dims[0], u = sd.u, kk = d + u + 1, blocks = (sd.b + MR - 1) / MR;
    sy_lstm_cols l = sy_lstm_layout(d, u, false);
    float *bp = k->ws, *scratch = bp + floats_aligned_rnn(sy_pack_b_floats(kk, 4 * u));
    float *extra = scratch + blocks * block_floats(&l, d, u, false, false), *bias = NULL;
    const float **rows = (const float **)(extra + mxu_extra_floats(num, blocks, 4 * u, d + u));
    bool doubled = LSTM_G_DOUBLED && sd.act == SY_ACT_TANH && sd.rec_act == SY_ACT_SIGMOID, mxu = num != SY_RNN_F32;
    rows[lstm_weight_rows(rows, k->in[1], k->in[2], d, u, true)] = scan_bias(k); /* NULL: zeros */
    if (!mxu)
        sy_pack_b_rows(bp, rows, false, kk, 4 * u);
    else if (num == SY_RNN_MXU)
        rnn_pack_b((uint32_t *)bp, rows, false, d + u, 4 * u, d);
    if (doubled && num == SY_RNN_F32) /* lstm_cell_default's doubled g */
        sy_packed_b_scale_columns(bp, kk, 4 * u, 2 * u, 3 * u, 2.0f);
    if (doubled && num == SY_RNN_MXU) {
        sy_mxu_b_double_columns((uint32_t *)bp, d, 2 * u, 3 * u);
        sy_mxu_b_double_columns((uint32_t *)bp + sy_mxu_b_words(d, 4 * u), u, 2 * u, 3 * u);
    }
    if (mxu && scan_bias(k)) {
        bias = extra;
        for (int64_t q = 0; q < 4 * u; q++)
            bias[q] = scan_bias(k)[q] * (doubled && q >= 2 * u && q < 3 * u ? 2.0f : 1.0f);
    }
    lstm_job j = {k, l, sd.b, sd.t, d, u, sd.act, sd.rec_act, false, k->attr->rnn.inference, bp, scan_mask(k), scratch,
                  k->attr->rnn.general ? k->attr->rnn.fn : NULL, {num, (uint32_t *)bp, rows, false, d + u, 4 * u, d},
                  extra + floats_aligned_rnn(4 * u), floats_aligned_rnn(MR * (d + u)), bias,
                  doubled && num == SY_RNN_MXU_REF, scan_steps(k, 3 + k->attr->rnn.has_bias)};
    sy_parallel_parts(k->ex, blocks, lstm_fwd_rows, &j);
}

/* Backward, rows [MR part, MR part + MR) from the last step to the first:
 * dh = the layer's dh + dh(t-1) of the later step (times the mask), the
 * gate gradients into the grad row's image, then one product d gates x
 * [kernel; recurrent]^T giving dx, copied into the image, which is then
 * streamed out, and dh(t-1) for the next (earlier) step. The scan rows
 * come from memory, written long ago, one row's 2 KB at a time 2.9 KB
 * lower each step, which the hardware prefetchers do not follow: they are
 * prefetched into L2 two steps ahead (the backward scan 54.7 -> 52.2 ms,
 * best of 12; one step ahead or into L1 gained less). */
static void lstm_bwd_rows(void *ctx, int64_t part) {
    const lstm_job *j = ctx;
    const sy_lstm_cols *l = &j->l;
    const float *dy = j->k->in[0], *seq = j->k->in[1];
    float *grads = j->k->out;
    int64_t u = j->u, dx = j->need_dx ? j->d : 0, n = dx + u, ps = prod_stride(n), w = l->width, gw = l->grad_width,
            r0 = part * MR, nr = sy_min64(MR, j->b - r0), ty = j->k->in_shape[0].dims[1];
    float *img = j->scratch + part * block_floats(l, j->d, u, j->need_dx, true), *prod = img + MR * gw,
          *dc = prod + MR * ps, *dh = dc + MR * u, *carry = dh + MR * u, *sl = carry + MR * u;
    bool fast = j->act == SY_ACT_TANH && j->rec_act == SY_ACT_SIGMOID;
    memset(img, 0, (size_t)(MR * gw) * sizeof(float)); /* the padding */
    memset(dc, 0, (size_t)(MR * u) * sizeof(float));  /* no later step */
    memset(carry, 0, (size_t)(MR * u) * sizeof(float));
    for (int64_t t = j->t - 1; t >= 0; t--) {
        for (int64_t r = 0; t > 2 && r < nr; r++) { /* two steps ahead, into L2 */
            const char *next = (const char *)(seq + ((r0 + r) * j->t + t - 2) * w);
            for (int64_t off = 0; off < (l->c + u) * (int64_t)sizeof(float); off += 64)
                __builtin_prefetch(next + off, 0, 2); /* prefetcht1 */
        }
        for (int64_t r = 0; r < nr; r++) {
            const float *s = seq + ((r0 + r) * j->t + t) * w, *cp = t > 0 ? s - w + l->c : NULL;
            float *gi = img + r * gw, *dhr = dh + r * u;
            const float *from_y = ty == j->t ? dy + ((r0 + r) * j->t + t) * u : t == j->t - 1 ? dy + (r0 + r) * u : NULL;
            lstm_dh(dhr, from_y, t + 1 < j->t ? prod + r * ps + dx : NULL, j->mask ? j->mask + (r0 + r) * u : NULL, u);
            float *dz = gi + l->dgates, *dcr = dc + r * u;
            if (j->steps) { /* issue 17, masking: what masked later steps carried; a masked step passes dh and dc on */
                float *cr = carry + r * u;
                for (int64_t q = 0; q < u; q++) dhr[q] += cr[q], cr[q] = 0;
                if (j->steps[(r0 + r) * j->t + t] == 0) {
                    memcpy(cr, dhr, (size_t)u * sizeof(float));
                    memset(dz, 0, (size_t)(4 * u) * sizeof(float));
                    continue;
                }
            }
            if (fast)
                lstm_cell_grad_default(dz, dz + u, dz + 2 * u, dz + 3 * u, dcr, dhr, s, s + u, s + 2 * u, s + 3 * u,
                                       s + l->c, cp, sl, u);
            else if (j->fn)
                lstm_cell_grad_general(dz, dcr, dhr, s, l, cp, u, j->fn);
            else
                lstm_cell_grad_any(dz, dcr, dhr, s, l, cp, sl, u, j->act, j->rec_act);
        }
        if (j->prod.num == SY_RNN_F32)
            sy_sgemm_packed_serial(nr, n, 4 * u, img + l->dgates, gw, j->bp, false, prod, ps);
        else /* issue 16, MXU recurrent products: K = 4U, one segment */
            rnn_product(&j->prod, NULL, nr, img + l->dgates, gw, prod, ps, j->abuf + part * j->abuf_floats);
        for (int64_t r = 0; r < nr; r++) {
            memcpy(img + r * gw + l->dx, prod + r * ps, (size_t)dx * sizeof(float));
            stream_row(grads + ((r0 + r) * j->t + t) * gw, img + r * gw, gw);
        }
    }
    stream_done();
}

static size_t lstm_bwd_ws(const sy_kargs *k, sy_rnn_numerics num) {
    int64_t b = k->in_shape[1].dims[0], d = k->in_shape[2].dims[0], u = k->in_shape[3].dims[0];
    bool need_dx = k->attr->rnn.need_dx;
    int64_t n = (need_dx ? d : 0) + u, blocks = (b + MR - 1) / MR;
    sy_lstm_cols l = sy_lstm_layout(d, u, need_dx);
    return (size_t)(floats_aligned_rnn(sy_pack_b_floats(4 * u, n)) + blocks * block_floats(&l, d, u, need_dx, true) +
                    mxu_extra_floats(num, blocks, 4 * u, 4 * u)) *
               sizeof(float) +
           (size_t)n * sizeof(float *);
}

/* (dh, seq, kernel, recurrent [, mask]) -> rows of sy_lstm_layout: d gates,
 * dx */
static void lstm_scan_bwd(const sy_kargs *k, sy_rnn_numerics num) {
    scan_dims sd = dims_of(k, &k->in_shape[1], 3);
    int64_t d = k->in_shape[2].dims[0], u = sd.u, blocks = (sd.b + MR - 1) / MR;
    bool need_dx = k->attr->rnn.need_dx;
    int64_t n = (need_dx ? d : 0) + u;
    sy_lstm_cols l = sy_lstm_layout(d, u, need_dx);
    float *bp = k->ws, *scratch = bp + floats_aligned_rnn(sy_pack_b_floats(4 * u, n));
    float *extra = scratch + blocks * block_floats(&l, d, u, need_dx, true);
    const float **rows = (const float **)(extra + mxu_extra_floats(num, blocks, 4 * u, 4 * u));
    lstm_weight_rows(rows, k->in[2], k->in[3], d, u, need_dx);
    if (num == SY_RNN_F32)
        sy_pack_b_rows(bp, rows, true, 4 * u, n);
    else if (num == SY_RNN_MXU)
        rnn_pack_b((uint32_t *)bp, rows, true, 4 * u, n, 4 * u);
    lstm_job j = {k, l, sd.b, sd.t, d, u, sd.act, sd.rec_act, need_dx, false, bp,
                  k->attr->rnn.has_mask ? k->in[4] : NULL, scratch, k->attr->rnn.general ? k->attr->rnn.fn : NULL,
                  {num, (uint32_t *)bp, rows, true, 4 * u, n, 4 * u}, extra + floats_aligned_rnn(4 * u),
                  floats_aligned_rnn(MR * 4 * u), NULL, false, scan_steps(k, 4)};
    sy_parallel_parts(k->ex, blocks, lstm_bwd_rows, &j);
}

/* (seq, grads, kernel) -> (D + U + 1, 4U) = [x, h(t-1), 1]^T d gates over all
 * rows: one GEMM through the rows' strides. */
static void lstm_scan_wgrad(const sy_kargs *k, sy_rnn_numerics num) {
    int64_t rows = k->in_shape[0].dims[0] * k->in_shape[0].dims[1], d = k->in_shape[2].dims[0],
            gu = k->in_shape[2].dims[1], gw = k->in_shape[1].dims[2];
    sy_lstm_cols l = sy_lstm_layout(d, gu / 4, false);
    const float *seq = k->in[0], *grads = k->in[1];
    float *out = k->out;
    if (num == SY_RNN_F32) {
        sy_sgemm_parallel(k->ex, true, false, d + gu / 4 + 1, gu, rows, 1.0f, seq + l.x, l.width, grads, gw, 0.0f, out,
                          gu, NULL, SY_ACT_NONE);
        return;
    }
    /* issue 16, MXU recurrent products: [x, h(t-1)]^T d gates on the MXU, K = the B * T rows in (b, t) order;
     * the bias's row a float32 sum over the rows in the same order (the vector unit's reduction, as
     * BiasAddGrad) */
    rnn_gemm(num, k->ex, true, d + gu / 4, gu, rows, seq + l.x, l.width, grads, gw, out, gu, NULL, k->ws);
    float *db = out + (d + gu / 4) * gu;
    memset(db, 0, (size_t)gu * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < gu; j++) db[j] += grads[r * gw + j];
}

static size_t lstm_wgrad_ws(const sy_kargs *k, sy_rnn_numerics num, int threads) {
    int64_t rows = k->in_shape[0].dims[0] * k->in_shape[0].dims[1], d = k->in_shape[2].dims[0],
            gu = k->in_shape[2].dims[1];
    return num == SY_RNN_MXU ? (size_t)sy_mxu_gemm_ws_floats(d + gu / 4, gu, rows, threads) * sizeof(float) : 0;
}

/* The recurrent kernel (U, gU) packed for the steps' products, or its
 * transpose for the backward ones; SY_ALIGN-aligned floats. */
static int64_t packed_floats(int64_t u, int64_t gu, bool backward) {
    return floats_aligned_rnn(backward ? sy_pack_b_floats(gu, u) : sy_pack_b_floats(u, gu));
}

/* ---- GRU (reset_after) ----------------------------------------------------------- */

/* issue 16, MXU recurrent products: the GRU's workspace besides the float32
 * one: the rounded A (B x 3U at most), the product (B x U, backward), the
 * row pointers of B (3U), the input gates' GEMM. */
static int64_t gru_mxu_floats(const sy_kargs *k, sy_rnn_numerics num, int threads, bool backward) {
    if (num == SY_RNN_F32) return 0;
    int64_t b = k->in_shape[backward].dims[0], u = k->in_shape[2].dims[0];
    int64_t n = floats_aligned_rnn(3 * b * u) + floats_aligned_rnn(b * u) + floats_aligned_rnn(3 * u * 2);
    if (!backward && num == SY_RNN_MXU)
        n += sy_mxu_gemm_ws_floats(b * k->in_shape[0].dims[1], 3 * u, k->in_shape[0].dims[2], threads);
    return n;
}

/* The MXU path's B: the recurrent kernel (U, 3U), or its transpose, by rows
 * (rows: 3U pointers of scratch) and packed rounded into bp. */
static rnn_b gru_rec_b(sy_rnn_numerics num, const float *rk, int64_t u, bool backward, float *bp, const float **rows) {
    for (int64_t p = 0; p < (backward ? u : 3 * u) && num == SY_RNN_MXU_REF; p++)
        rows[p] = rk + p * 3 * u; /* row p of recurrent: B's row p, or (backward) B^T's column p */
    if (num == SY_RNN_MXU) sy_mxu_pack_b((uint32_t *)bp, rk, 3 * u, backward, backward ? 3 * u : u, backward ? u : 3 * u);
    return (rnn_b){num, (uint32_t *)bp, rows, backward, backward ? 3 * u : u, backward ? u : 3 * u, backward ? 3 * u : u};
}

/* workspace: inner (B, 3U), masked h(t-1) (B, U) */
static size_t gru_fwd_ws(const sy_kargs *k, sy_rnn_numerics num, int threads) {
    int64_t b = k->in_shape[0].dims[0], u = k->in_shape[2].dims[0];
    return (size_t)(packed_floats(u, 3 * u, false) + floats_aligned_rnn(4 * b * u) +
                    gru_mxu_floats(k, num, threads, false)) *
           sizeof(float);
}

/* (x, kernel, recurrent [, bias (2, 3U)] [, mask]) -> (B,T,5U): z r hh rh h.
 * The input gates land in the z, r, hh columns and are replaced there. */
static void gru_scan_fwd(const sy_kargs *k, sy_rnn_numerics num) {
    scan_dims d = dims_of(k, k->out_shape, 2);
    const float *rk = k->in[2], *bias = scan_bias(k), *mask = scan_mask(k), *steps = scan_steps(k, 3 + k->attr->rnn.has_bias);
    int64_t u = d.u, ld = d.t * 5 * u;
    float *seq = k->out, *bp = k->ws, *inner = bp + packed_floats(u, 3 * u, false), *hpm = inner + 3 * d.b * u;
    float *abuf = inner + floats_aligned_rnn(4 * d.b * u),
          *rows = abuf + floats_aligned_rnn(3 * d.b * u) + floats_aligned_rnn(d.b * u);
    const sy_act_params *fn = k->attr->rnn.general ? k->attr->rnn.fn : NULL;
    rnn_b rb = {0};
    if (num == SY_RNN_F32) {
        sy_pack_b(bp, rk, 3 * u, false, u, 3 * u);
        input_gates(k, seq, 5 * u, 3 * u, bias);
    } else { /* issue 16, MXU recurrent products: x . kernel over D, then the bias, for all rows */
        rb = gru_rec_b(num, rk, u, false, bp, (const float **)rows);
        const sy_shape *xs = &k->in_shape[0];
        rnn_gemm(num, k->ex, false, xs->dims[0] * xs->dims[1], 3 * u, xs->dims[2], k->in[0], xs->dims[2], k->in[1], 3 * u,
                 seq, 5 * u, bias, rows + floats_aligned_rnn(3 * u * 2));
    }
    for (int64_t t = 0; t < d.t; t++) {
        for (int64_t b = 0; b < d.b && (num == SY_RNN_F32 || t == 0); b++) {
            if (bias) memcpy(inner + b * 3 * u, bias + 3 * u, (size_t)(3 * u) * sizeof(float));
            else memset(inner + b * 3 * u, 0, (size_t)(3 * u) * sizeof(float));
        }
        const float *hp = NULL;
        int64_t lda = 0;
        if (t > 0) {
            hp = masked_prev(seq + (t - 1) * 5 * u + 4 * u, ld, mask, hpm, &d, &lda);
            if (num == SY_RNN_F32)
                sy_sgemm_packed(k->ex, d.b, 3 * u, u, hp, lda, bp, true, inner, 3 * u);
            else { /* h(t-1) . recurrent over U, then the recurrent bias */
                rnn_product(&rb, k->ex, d.b, hp, lda, inner, 3 * u, abuf);
                for (int64_t q = 0; bias && q < d.b * 3 * u; q++) inner[q] += bias[3 * u + q % (3 * u)];
            }
        }
        for (int64_t b = 0; b < d.b; b++) {
            float *s = seq + b * ld + t * 5 * u, *in = inner + b * 3 * u;
            if (fn) { /* the general cell: z, r, hh keep their pre-activations */
                const float *h_prev = hp ? hp + b * lda : NULL;
                for (int64_t j = 0; j < u; j++) {
                    s[j] += in[j];
                    s[u + j] += in[u + j];
                    s[3 * u + j] = in[2 * u + j];
                    s[2 * u + j] += gen_act(&fn[1], s[u + j]) * in[2 * u + j];
                    float z = gen_act(&fn[1], s[j]), hh = gen_act(&fn[0], s[2 * u + j]);
                    s[4 * u + j] = (h_prev ? z * h_prev[j] : 0.0f) + (1 - z) * hh;
                }
                continue;
            }
            for (int64_t j = 0; j < 2 * u; j++) s[j] += in[j];
            apply(s, 2 * u, d.rec_act); /* z, r */
            for (int64_t j = 0; j < u; j++) {
                s[3 * u + j] = in[2 * u + j];
                s[2 * u + j] += s[u + j] * in[2 * u + j];
            }
            apply(s + 2 * u, u, d.act); /* hh */
            if (hp) {
                const float *h_prev = hp + b * lda;
                for (int64_t j = 0; j < u; j++) s[4 * u + j] = s[j] * h_prev[j] + (1 - s[j]) * s[2 * u + j];
            } else {
                for (int64_t j = 0; j < u; j++) s[4 * u + j] = (1 - s[j]) * s[2 * u + j];
            }
        }
        for (int64_t b = 0; steps && b < d.b; b++) /* issue 17, masking: a masked step keeps h(t-1), unmasked */
            if (steps[b * d.t + t] == 0) {
                float *h = seq + b * ld + t * 5 * u + 4 * u;
                if (t > 0) memcpy(h, h - 5 * u, (size_t)u * sizeof(float));
                else memset(h, 0, (size_t)u * sizeof(float));
            }
    }
}

/* workspace: dh (B, U), dh * z (B, U), masked h(t-1) (B, U), slopes 3 x U,
 * the general cell's gates 3 x U */
static size_t gru_bwd_ws(const sy_kargs *k, sy_rnn_numerics num, int threads) {
    int64_t b = k->in_shape[1].dims[0], u = k->in_shape[2].dims[0];
    return (size_t)(packed_floats(u, 3 * u, true) + floats_aligned_rnn(3 * b * u + 6 * u) +
                    gru_mxu_floats(k, num, threads, true)) *
           sizeof(float);
}

/* (dh, seq, recurrent [, mask]) -> (B,T,6U): d input gates then d inner */
static void gru_scan_bwd(const sy_kargs *k, sy_rnn_numerics num) {
    scan_dims d = dims_of(k, &k->in_shape[1], 2);
    const float *seq = k->in[1], *rk = k->in[2], *mask = k->attr->rnn.has_mask ? k->in[3] : NULL, *steps = scan_steps(k, 3);
    float *out = k->out;
    int64_t u = d.u, ld = d.t * 5 * u, ldo = d.t * 6 * u;
    float *bp = k->ws, *dh = bp + packed_floats(u, 3 * u, true), *dhz = dh + d.b * u, *hpm = dhz + d.b * u,
          *sl_z = hpm + d.b * u, *sl_r = sl_z + u, *sl_h = sl_r + u, *gates = sl_h + u;
    float *abuf = dh + floats_aligned_rnn(3 * d.b * u + 6 * u), *prod = abuf + floats_aligned_rnn(3 * d.b * u),
          *rows = prod + floats_aligned_rnn(d.b * u);
    const sy_act_params *fn = k->attr->rnn.general ? k->attr->rnn.fn : NULL;
    rnn_b rb = {0};
    if (num == SY_RNN_F32)
        sy_pack_b(bp, rk, 3 * u, true, 3 * u, u);
    else
        rb = gru_rec_b(num, rk, u, true, bp, (const float **)rows);
    memset(dh, 0, (size_t)(d.b * u) * sizeof(float));
    for (int64_t t = d.t - 1; t >= 0; t--) {
        const float *hp = NULL;
        int64_t lda = 0;
        if (t > 0) hp = masked_prev(seq + (t - 1) * 5 * u + 4 * u, ld, mask, hpm, &d, &lda);
        for (int64_t b = 0; b < d.b; b++) {
            const float *s = seq + b * ld + t * 5 * u;
            const float *z = s, *r = s + u, *hh = s + 2 * u, *rh = s + 3 * u;
            float *dx = out + b * ldo + t * 6 * u, *din = dx + 3 * u, *dhb = dh + b * u, *dhzb = dhz + b * u;
            add_dh(dhb, k, b, t, &d);
            if (fn) { /* the general cell: the gates and slopes from the pre-activations */
                for (int64_t j = 0; j < 3 * u; j++) {
                    const sy_act_params *p = &fn[j < 2 * u];
                    gates[j] = gen_act(p, s[j]);
                    sl_z[j] = gen_slope(p, s[j]); /* sl_z, sl_r, sl_h are adjacent */
                }
                z = gates, r = gates + u, hh = gates + 2 * u;
            } else {
                slope(sl_z, z, u, d.rec_act);
                slope(sl_r, r, u, d.rec_act);
                slope(sl_h, hh, u, d.act);
            }
            if (hp) {
                const float *h_prev = hp + b * lda;
                for (int64_t j = 0; j < u; j++) dx[j] = dhb[j] * (h_prev[j] - hh[j]) * sl_z[j];
            } else {
                for (int64_t j = 0; j < u; j++) dx[j] = -dhb[j] * hh[j] * sl_z[j];
            }
            for (int64_t j = 0; j < u; j++) {
                float dhh = dhb[j] * (1 - z[j]) * sl_h[j];
                din[j] = dx[j];
                dx[u + j] = din[u + j] = dhh * rh[j] * sl_r[j];
                dx[2 * u + j] = dhh;
                din[2 * u + j] = dhh * r[j];
                dhzb[j] = dhb[j] * z[j];
            }
            if (steps && steps[b * d.t + t] == 0) { /* issue 17, masking: no gate gradients; dh passes on */
                memset(dx, 0, (size_t)(6 * u) * sizeof(float));
                memcpy(dhzb, dhb, (size_t)u * sizeof(float));
            }
        }
        if (t > 0) {
            /* dh(t-1) = (dh z + d inner x recurrent^T) * mask */
            if (num == SY_RNN_F32) {
                sy_sgemm_packed(k->ex, d.b, u, 3 * u, out + t * 6 * u + 3 * u, ldo, bp, true, dhz, u);
            } else { /* issue 16, MXU recurrent products: the product over 3U, then added to dh z */
                rnn_product(&rb, k->ex, d.b, out + t * 6 * u + 3 * u, ldo, prod, u, abuf);
                for (int64_t q = 0; q < d.b * u; q++) dhz[q] += prod[q];
            }
            for (int64_t q = 0; q < d.b * u; q++)
                dh[q] = mask && !(steps && steps[(q / u) * d.t + t] == 0) ? dhz[q] * mask[q] : dhz[q];
        }
    }
}

/* The kernels per numerics: the cpu backend's float32 ones, and (issue 16, MXU recurrent products) the sim
 * backend's (SY_RNN_MXU) and sim-ref's (SY_RNN_MXU_REF). */
#define RNN_KERNELS(sfx, num)                                                                                          \
    static void lstm_fwd_##sfx(const sy_kargs *k) { lstm_scan_fwd(k, num); }                                           \
    static size_t lstm_fwd_ws_##sfx(const sy_kargs *k, int threads) {                                                 \
        (void)threads;                                                                                                 \
        return lstm_fwd_ws(k, num);                                                                                    \
    }                                                                                                                  \
    static void lstm_bwd_##sfx(const sy_kargs *k) { lstm_scan_bwd(k, num); }                                           \
    static size_t lstm_bwd_ws_##sfx(const sy_kargs *k, int threads) {                                                 \
        (void)threads;                                                                                                 \
        return lstm_bwd_ws(k, num);                                                                                    \
    }                                                                                                                  \
    static void lstm_wgrad_##sfx(const sy_kargs *k) { lstm_scan_wgrad(k, num); }                                       \
    static size_t lstm_wgrad_ws_##sfx(const sy_kargs *k, int threads) { return lstm_wgrad_ws(k, num, threads); }      \
    static void gru_fwd_##sfx(const sy_kargs *k) { gru_scan_fwd(k, num); }                                          \
    static size_t gru_fwd_ws_##sfx(const sy_kargs *k, int threads) { return gru_fwd_ws(k, num, threads); }            \
    static void gru_bwd_##sfx(const sy_kargs *k) { gru_scan_bwd(k, num); }                                             \
    static size_t gru_bwd_ws_##sfx(const sy_kargs *k, int threads) { return gru_bwd_ws(k, num, threads); }            \
    static const sy_kernel rnn_kernels_##sfx[5] = {{lstm_fwd_##sfx, lstm_fwd_ws_##sfx, NULL},                         \
                                                   {lstm_bwd_##sfx, lstm_bwd_ws_##sfx, NULL},                         \
                                                   {lstm_wgrad_##sfx, lstm_wgrad_ws_##sfx, NULL},                     \
                                                   {gru_fwd_##sfx, gru_fwd_ws_##sfx, NULL},                           \
                                                   {gru_bwd_##sfx, gru_bwd_ws_##sfx, NULL}};

RNN_KERNELS(f32_fast, SY_RNN_F32)
RNN_KERNELS(f32_mxu, SY_RNN_MXU)
RNN_KERNELS(f32_mxuref, SY_RNN_MXU_REF)

const sy_kernel sy_cpu_lstm_scan = {lstm_fwd_f32_fast, lstm_fwd_ws_f32_fast, NULL};
const sy_kernel sy_cpu_lstm_scan_grad = {lstm_bwd_f32_fast, lstm_bwd_ws_f32_fast, NULL};
const sy_kernel sy_cpu_lstm_scan_wgrad = {lstm_wgrad_f32_fast, NULL, NULL};
const sy_kernel sy_cpu_gru_scan = {gru_fwd_f32_fast, gru_fwd_ws_f32_fast, NULL};
const sy_kernel sy_cpu_gru_scan_grad = {gru_bwd_f32_fast, gru_bwd_ws_f32_fast, NULL};

const sy_kernel *sy_rnn_kernel(sy_op op, sy_rnn_numerics numerics) {
    static const sy_op ops[5] = {SY_OP_LSTM_SCAN, SY_OP_LSTM_SCAN_GRAD, SY_OP_LSTM_SCAN_WGRAD, SY_OP_GRU_SCAN,
                                 SY_OP_GRU_SCAN_GRAD};
    const sy_kernel *table = numerics == SY_RNN_MXU ? rnn_kernels_f32_mxu
                             : numerics == SY_RNN_MXU_REF ? rnn_kernels_f32_mxuref
                                                          : rnn_kernels_f32_fast;
    for (int i = 0; i < 5; i++)
        if (ops[i] == op) return &table[i];
    return NULL;
}
