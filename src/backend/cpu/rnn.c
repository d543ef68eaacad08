/*
 * rnn.c - the recurrent scans on the cpu backend: LSTM and GRU forward and
 * backward over a whole sequence (graph/ops_rnn.c says what they compute).
 *
 * A step is one GEMM plus elementwise work on (B, U) rows:
 *
 *   forward   gates (B, gU) = xw(t) + h(t-1) (B, U) x kernel (U, gU), then
 *             the gates' activations and the state update, row by row;
 *   backward  the gate gradients row by row, then dh(t-1) (B, U) =
 *             dgates(t) (B, gU) x kernel^T (gU, U).
 *
 * The input half x . kernel + bias for all B * T rows is one GEMM written
 * straight into the gate columns of the packed rows. Rows of step t lie T
 * steps apart in the (B, T, k U) tensors, so the step GEMMs read and add
 * into them in place through their leading dimension; nothing is copied.
 * The step products run on smallgemm.c's kernel with the recurrent kernel
 * packed once per call (89 GFLOP/s on the IMDB LSTM's step against
 * oneDNN's 50, which repacks it every step). The
 * elementwise passes run over U-long rows that sit in L1, one simple loop
 * per activation (sy_vsigmoidf and friends vectorise there; a switch inside
 * the loop would not). The GEMMs split over the replica's kernel threads as
 * sy_sgemm_parallel does, by shape, so results do not depend on threads.
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

static int64_t floats_aligned_rnn(int64_t n) { return sy_align_up(n, SY_ALIGN / (int64_t)sizeof(float)); }

typedef struct scan_dims {
    int64_t b, t, d, u;
    int act, rec_act;
} scan_dims;

static scan_dims dims_of(const sy_kargs *k, const sy_shape *seq) {
    scan_dims d = {seq->dims[0], seq->dims[1], 0, k->in_shape[2].dims[0], k->attr->rnn.act, k->attr->rnn.rec_act};
    return d;
}

static const float *scan_bias(const sy_kargs *k) { return k->attr->rnn.has_bias ? k->in[3] : NULL; }
static const float *scan_mask(const sy_kargs *k) { return k->attr->rnn.has_mask ? k->in[3 + k->attr->rnn.has_bias] : NULL; }

/* The A operand of a step's GEMM: h(t-1) rows (stride ld), times the mask
 * into tmp when there is one. */
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

/* The gates of every step, x (B*T, D) . kernel (D, gU) [+ bias], into the
 * first gU columns of the packed rows (stride ld): one GEMM over all rows. */
static void input_gates(const sy_kargs *k, float *seq, int64_t ld, int64_t gu, const float *bias) {
    const sy_shape *xs = &k->in_shape[0];
    int64_t rows = xs->dims[0] * xs->dims[1], d = xs->dims[2];
    sy_sgemm_parallel(k->ex, false, false, rows, gu, d, 1.0f, k->in[0], d, k->in[1], gu, 0.0f, seq, ld, bias, SY_ACT_NONE);
}

/* dh reaching step t of row b, added to acc (U floats): all steps, or the last. */
static void add_dh(float *restrict acc, const sy_kargs *k, int64_t b, int64_t t, const scan_dims *d) {
    const float *dh = k->in[0];
    int64_t th = k->in_shape[0].dims[1];
    const float *src = th == d->t ? dh + (b * d->t + t) * d->u : t == d->t - 1 ? dh + b * d->u : NULL;
    if (src)
        for (int64_t j = 0; j < d->u; j++) acc[j] += src[j];
}

/* ---- LSTM -------------------------------------------------------------------- */

/* The recurrent kernel (U, gU) packed for the steps' products, or its
 * transpose for the backward ones; SY_ALIGN-aligned floats. */
static int64_t packed_floats(int64_t u, int64_t gu, bool backward) {
    return floats_aligned_rnn(backward ? sy_pack_b_floats(gu, u) : sy_pack_b_floats(u, gu));
}

static size_t lstm_fwd_ws(const sy_kargs *k, int threads) {
    (void)threads;
    int64_t u = k->in_shape[2].dims[0];
    return (size_t)(packed_floats(u, 4 * u, false) + k->in_shape[0].dims[0] * u) * sizeof(float);
}

/* (x, kernel, recurrent [, bias] [, mask]) -> seq (B,T,6U): i f g o c h */
static void lstm_scan_fwd_f32_fast(const sy_kargs *k) {
    scan_dims d = dims_of(k, k->out_shape);
    const float *rk = k->in[2], *mask = scan_mask(k);
    int64_t u = d.u, ld = d.t * 6 * u;
    float *seq = k->out, *bp = k->ws, *tmp = bp + packed_floats(u, 4 * u, false);
    sy_pack_b(bp, rk, 4 * u, false, u, 4 * u);
    input_gates(k, seq, 6 * u, 4 * u, scan_bias(k));
    for (int64_t t = 0; t < d.t; t++) {
        float *gates = seq + t * 6 * u;
        if (t > 0) {
            int64_t lda;
            const float *a = masked_prev(gates - 6 * u + 5 * u, ld, mask, tmp, &d, &lda);
            sy_sgemm_packed(k->ex, d.b, 4 * u, u, a, lda, bp, true, gates, ld);
        }
        for (int64_t b = 0; b < d.b; b++) {
            float *s = gates + b * ld, *c = s + 4 * u, *h = s + 5 * u;
            apply(s, u, d.rec_act);
            apply(s + u, u, d.rec_act);
            apply(s + 2 * u, u, d.act);
            apply(s + 3 * u, u, d.rec_act);
            if (t > 0) {
                const float *cp = s - 6 * u + 4 * u;
                for (int64_t j = 0; j < u; j++) c[j] = s[u + j] * cp[j] + s[j] * s[2 * u + j];
            } else {
                for (int64_t j = 0; j < u; j++) c[j] = s[j] * s[2 * u + j];
            }
            memcpy(h, c, (size_t)u * sizeof(float));
            apply(h, u, d.act);
            for (int64_t j = 0; j < u; j++) h[j] *= s[3 * u + j];
        }
    }
}

/* workspace: dh, dc (B, U) each; the masked-GEMM result (B, U); per row
 * act(c) and four slopes (U each) */
static size_t lstm_bwd_ws(const sy_kargs *k, int threads) {
    (void)threads;
    int64_t b = k->in_shape[1].dims[0], u = k->in_shape[2].dims[0];
    return (size_t)(packed_floats(u, 4 * u, true) + 3 * b * u + 5 * u) * sizeof(float);
}

/* (dh, seq, recurrent [, mask]) -> d gates (B,T,4U) */
static void lstm_scan_bwd_f32_fast(const sy_kargs *k) {
    scan_dims d = dims_of(k, &k->in_shape[1]);
    const float *seq = k->in[1], *rk = k->in[2], *mask = k->attr->rnn.has_mask ? k->in[3] : NULL;
    float *dgates = k->out;
    int64_t u = d.u, ld = d.t * 6 * u;
    float *bp = k->ws, *dh = bp + packed_floats(u, 4 * u, true), *dc = dh + d.b * u, *gemm = dc + d.b * u,
          *ac = gemm + d.b * u, *s_ac = ac + u, *s_i = s_ac + u, *s_f = s_i + u, *s_o = s_f + u;
    sy_pack_b(bp, rk, 4 * u, true, 4 * u, u);
    memset(dh, 0, (size_t)(2 * d.b * u) * sizeof(float));
    for (int64_t t = d.t - 1; t >= 0; t--) {
        for (int64_t b = 0; b < d.b; b++) {
            const float *s = seq + b * ld + t * 6 * u;
            const float *i = s, *f = s + u, *g = s + 2 * u, *o = s + 3 * u, *c = s + 4 * u;
            float *dz = dgates + (b * d.t + t) * 4 * u, *dhb = dh + b * u, *dcb = dc + b * u;
            add_dh(dhb, k, b, t, &d);
            memcpy(ac, c, (size_t)u * sizeof(float));
            apply(ac, u, d.act);
            slope(s_ac, ac, u, d.act);
            slope(s_i, i, u, d.rec_act);
            slope(s_f, f, u, d.rec_act);
            slope(s_o, o, u, d.rec_act);
            slope(dz + 2 * u, g, u, d.act); /* the candidate's slope, multiplied in below */
            for (int64_t j = 0; j < u; j++) {
                float c_grad = dcb[j] + dhb[j] * o[j] * s_ac[j];
                dz[j] = c_grad * g[j] * s_i[j];
                dz[2 * u + j] *= c_grad * i[j];
                dz[3 * u + j] = dhb[j] * ac[j] * s_o[j];
                dcb[j] = c_grad;
            }
            if (t > 0) {
                const float *cp = s - 6 * u + 4 * u;
                for (int64_t j = 0; j < u; j++) dz[u + j] = dcb[j] * cp[j] * s_f[j];
            } else {
                for (int64_t j = 0; j < u; j++) dz[u + j] = 0;
            }
            for (int64_t j = 0; j < u; j++) dcb[j] *= f[j]; /* dc of step t - 1 */
        }
        if (t > 0) {
            sy_sgemm_packed(k->ex, d.b, u, 4 * u, dgates + t * 4 * u, d.t * 4 * u, bp, false, mask ? gemm : dh, u);
            if (mask)
                for (int64_t q = 0; q < d.b * u; q++) dh[q] = gemm[q] * mask[q];
        }
    }
}

/* ---- GRU (reset_after) ----------------------------------------------------------- */

/* workspace: inner (B, 3U), masked h(t-1) (B, U) */
static size_t gru_fwd_ws(const sy_kargs *k, int threads) {
    (void)threads;
    int64_t b = k->in_shape[0].dims[0], u = k->in_shape[2].dims[0];
    return (size_t)(packed_floats(u, 3 * u, false) + 4 * b * u) * sizeof(float);
}

/* (x, kernel, recurrent [, bias (2, 3U)] [, mask]) -> (B,T,5U): z r hh rh h.
 * The input gates land in the z, r, hh columns and are replaced there. */
static void gru_scan_fwd_f32_fast(const sy_kargs *k) {
    scan_dims d = dims_of(k, k->out_shape);
    const float *rk = k->in[2], *bias = scan_bias(k), *mask = scan_mask(k);
    int64_t u = d.u, ld = d.t * 5 * u;
    float *seq = k->out, *bp = k->ws, *inner = bp + packed_floats(u, 3 * u, false), *hpm = inner + 3 * d.b * u;
    sy_pack_b(bp, rk, 3 * u, false, u, 3 * u);
    input_gates(k, seq, 5 * u, 3 * u, bias);
    for (int64_t t = 0; t < d.t; t++) {
        for (int64_t b = 0; b < d.b; b++) {
            if (bias) memcpy(inner + b * 3 * u, bias + 3 * u, (size_t)(3 * u) * sizeof(float));
            else memset(inner + b * 3 * u, 0, (size_t)(3 * u) * sizeof(float));
        }
        const float *hp = NULL;
        int64_t lda = 0;
        if (t > 0) {
            hp = masked_prev(seq + (t - 1) * 5 * u + 4 * u, ld, mask, hpm, &d, &lda);
            sy_sgemm_packed(k->ex, d.b, 3 * u, u, hp, lda, bp, true, inner, 3 * u);
        }
        for (int64_t b = 0; b < d.b; b++) {
            float *s = seq + b * ld + t * 5 * u, *in = inner + b * 3 * u;
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
    }
}

/* workspace: dh (B, U), dh * z (B, U), masked h(t-1) (B, U), slopes 3 x U */
static size_t gru_bwd_ws(const sy_kargs *k, int threads) {
    (void)threads;
    int64_t b = k->in_shape[1].dims[0], u = k->in_shape[2].dims[0];
    return (size_t)(packed_floats(u, 3 * u, true) + 3 * b * u + 3 * u) * sizeof(float);
}

/* (dh, seq, recurrent [, mask]) -> (B,T,6U): d input gates then d inner */
static void gru_scan_bwd_f32_fast(const sy_kargs *k) {
    scan_dims d = dims_of(k, &k->in_shape[1]);
    const float *seq = k->in[1], *rk = k->in[2], *mask = k->attr->rnn.has_mask ? k->in[3] : NULL;
    float *out = k->out;
    int64_t u = d.u, ld = d.t * 5 * u, ldo = d.t * 6 * u;
    float *bp = k->ws, *dh = bp + packed_floats(u, 3 * u, true), *dhz = dh + d.b * u, *hpm = dhz + d.b * u,
          *sl_z = hpm + d.b * u, *sl_r = sl_z + u, *sl_h = sl_r + u;
    sy_pack_b(bp, rk, 3 * u, true, 3 * u, u);
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
            slope(sl_z, z, u, d.rec_act);
            slope(sl_r, r, u, d.rec_act);
            slope(sl_h, hh, u, d.act);
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
        }
        if (t > 0) {
            /* dh(t-1) = (dh z + d inner x recurrent^T) * mask */
            sy_sgemm_packed(k->ex, d.b, u, 3 * u, out + t * 6 * u + 3 * u, ldo, bp, true, dhz, u);
            for (int64_t q = 0; q < d.b * u; q++) dh[q] = mask ? dhz[q] * mask[q] : dhz[q];
        }
    }
}

const sy_kernel sy_cpu_lstm_scan = {lstm_scan_fwd_f32_fast, lstm_fwd_ws};
const sy_kernel sy_cpu_lstm_scan_grad = {lstm_scan_bwd_f32_fast, lstm_bwd_ws};
const sy_kernel sy_cpu_gru_scan = {gru_scan_fwd_f32_fast, gru_fwd_ws};
const sy_kernel sy_cpu_gru_scan_grad = {gru_scan_bwd_f32_fast, gru_bwd_ws};
