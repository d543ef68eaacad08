/*
 * qhybrid.c - the hybrid ops' kernels (issue 18, dynamic-range
 * quantization): int8 weights, float32 activations, as TensorFlow Lite's
 * hybrid FULLY_CONNECTED and UNIDIRECTIONAL_SEQUENCE_LSTM compute them
 * (fully_connected.cc EvalHybrid, lstm_eval.cc LstmStepHybrid, over
 * tensor_utils' portable and SSE MatrixBatchVectorMultiplyAccumulate).
 * docs/design/tflite.md, "Dynamic-range quantization".
 *
 * A hybrid product takes float rows, quantizes each row on the fly to int8
 * -- asymmetric_quantize_inputs: scale (max - min) / 255 and a zero point
 * (AsymmetricQuantizeFloats); else symmetric, max |x| / 127
 * (SymmetricQuantizeFloats) -- multiplies the int8 row by the int8 weights
 * in exact int32 arithmetic, subtracts the zero point times the weight
 * row's sum, and adds the int32 result, converted to float and times the
 * row's scale x the weights' scale, to the float accumulator that starts
 * at the bias. The float operations are TFLite's, one rounding each, in
 * its order (this file is compiled with -ffp-contract=off so that GCC does
 * not fuse a multiply and an add that TFLite rounds apart).
 *
 * The LSTM (Keras's: gates i, f, c, o; sigmoid gates, tanh cell, no
 * peephole, projection or layer norm) runs the steps of each sequence in
 * order, its input x_t and its state h quantized afresh at each step;
 * c and h start at zero for every sequence, as a Keras model's do (TFLite
 * keeps them in variable tensors between invocations; a fresh interpreter
 * or reset_all_variables() starts them at zero). Where TFLite evaluates
 * sigmoid and tanh with Eigen's vectorised rational approximations, these
 * loops use expf and tanhf: the two differ in the last bits of a gate,
 * which can move the next step's int8 quantization of h by one step in
 * rare elements (the outputs' difference is measured in tflite.md).
 *
 * Scalar loops on one thread, the same on every backend (qref.c's table
 * lists them); the cpu backend runs HLSTM's sequences on its threads, a
 * row each, with the same results (sy_cpu_hlstm).
 */
#include "cpu_internal.h"

/* TfLiteRound: halves away from zero. */
static inline float round_away(float x) { return roundf(x); }

/* tensor_utils' BatchQuantizeFloats for one row of n values: q, its scale, its zero point. */
static void quantize_row(const float *x, int64_t n, bool asymmetric, int8_t *q, float *scale, int32_t *zp) {
    float lo = n ? x[0] : 0, hi = lo;
    for (int64_t i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *zp = 0;
    if (!asymmetric) { /* PortableSymmetricQuantizeFloats */
        float range = fmaxf(fabsf(lo), fabsf(hi));
        if (!(range > 0)) { /* zeros (or a NaN row, which TFLite would not survive either) */
            memset(q, 0, (size_t)n);
            *scale = 1;
            return;
        }
        *scale = range / 127.0f;
        const float inv = 127.0f / range;
        for (int64_t i = 0; i < n; i++) {
            float v = round_away(x[i] * inv);
            q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        return;
    }
    /* PortableAsymmetricQuantizeFloats: the range widened to hold 0, in double; the zero point nudged */
    const double qmin = -128, qmax = 127;
    double rmin = fmin(0.0, (double)lo), rmax = fmax(0.0, (double)hi);
    if (rmin == rmax || !(rmax - rmin == rmax - rmin)) {
        memset(q, 0, (size_t)n);
        *scale = 1;
        return;
    }
    double s = (rmax - rmin) / (qmax - qmin);
    double zp_min = qmin - rmin / s, zp_max = qmax - rmax / s;
    double err_min = fabs(qmin) + fabs(rmin / s), err_max = fabs(qmax) + fabs(rmax / s);
    double z = err_min < err_max ? zp_min : zp_max;
    *zp = z <= qmin ? -128 : z >= qmax ? 127 : (int32_t)round(z);
    *scale = (float)s;
    const float inv = (float)(1.0 / (double)*scale);
    for (int64_t i = 0; i < n; i++) {
        float v = round_away((float)*zp + x[i] * inv);
        q[i] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
}

/* MatrixBatchVectorMultiplyAccumulate for one quantized row: acc[r] += (float)(w[r] . q - sums[r] zp) *
 * (scale x wscale[r]) for the m rows of w (m, n); per-tensor weights repeat one wscale (wstride 0). */
static void accumulate(float *acc, const int8_t *w, int64_t m, int64_t n, const int8_t *q, const int32_t *sums,
                       int32_t zp, float scale, const float *wscale, int64_t wstride) {
    for (int64_t r = 0; r < m; r++, w += n) {
        int32_t dot = 0;
        for (int64_t i = 0; i < n; i++) dot += (int32_t)w[i] * (int32_t)q[i];
        dot -= sums[r] * zp;
        float s = wstride ? wscale[r] * scale : scale * wscale[0];
        acc[r] += (float)dot * s;
    }
}

static void row_sums(int32_t *sums, const int8_t *w, int64_t m, int64_t n) {
    for (int64_t r = 0; r < m; r++) {
        int32_t s = 0;
        for (int64_t i = 0; i < n; i++) s += w[r * n + i];
        sums[r] = s;
    }
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* TFLite's fused activations on floats (ApplyActivationToVector): 0 none, 1 relu, 2 relu_n1_to_1, 3 relu6,
 * 4 tanh, 6 sigmoid. */
static inline float fused(int act, float v) {
    switch (act) {
    case 1: return v < 0 ? 0 : v;
    case 2: return v < -1 ? -1 : v > 1 ? 1 : v;
    case 3: return v < 0 ? 0 : v > 6 ? 6 : v;
    case 4: return tanhf(v);
    case 6: return sigmoidf(v);
    default: return v;
    }
}

/* ---- HFULLY_CONNECTED: (x (..., K) f32, w (N, K) i8, scales (N) or (1) f32 [, bias (N) f32]) ---- */

static size_t hfc_ws(const sy_kargs *k, int threads) {
    (void)threads;
    const sy_shape *w = &k->in_shape[1];
    return (size_t)w->dims[0] * sizeof(int32_t) + (size_t)w->dims[1] + 16;
}

static void hfully_connected(const sy_kargs *k) {
    const sy_shape *ws = &k->in_shape[1];
    int64_t units = ws->dims[0], depth = ws->dims[1];
    int64_t rows = depth ? sy_shape_count(&k->in_shape[0]) / depth : 0;
    const float *x = k->in[0], *scales = k->in[2], *bias = k->n_in > 3 ? k->in[3] : NULL;
    const int8_t *w = k->in[1];
    bool per_channel = sy_shape_count(&k->in_shape[2]) > 1;
    int32_t *sums = k->ws;
    int8_t *q = (int8_t *)(sums + units);
    float *y = k->out;
    const bool asym = k->attr->hy.asymmetric;
    if (asym) row_sums(sums, w, units, depth);
    else memset(sums, 0, (size_t)units * sizeof *sums);
    for (int64_t r = 0; r < rows; r++, x += depth, y += units) {
        for (int64_t u = 0; u < units; u++) y[u] = bias ? bias[u] : 0.0f;
        float sf;
        int32_t zp;
        quantize_row(x, depth, asym, q, &sf, &zp);
        /* per tensor: the row's scale times the weights' (scaling_factors_ptr[b] *= filter scale); per
         * channel: the channel's scale times the row's */
        accumulate(y, w, units, depth, q, sums, zp, sf, scales, per_channel ? 1 : 0);
        for (int64_t u = 0; u < units; u++) y[u] = fused(k->attr->hy.act, y[u]);
    }
}

/* ---- HLSTM: (x (B, T, I) f32, wx (4U, I) i8, wh (4U, U) i8, bias (4U) f32, scales (8) f32) -> (B, T, U) ----
 * the gates' rows i, f, c, o; scales: wx's four gates', then wh's. Each sequence (row b) runs alone: the
 * workspace holds the weights' row sums (shared, read-only) and one scratch area per row, so that the cpu
 * backend's kernel can run rows on several threads with the results of one. */

typedef struct hlstm_job {
    const sy_kargs *k;
    int64_t T, I, U;
    const int32_t *sum_x, *sum_h;
    char *scratch; /* per row: gates (4U), h (U), c (U) floats, then qx (I), qh (U) bytes */
    size_t row_bytes;
} hlstm_job;

static size_t hlstm_row_bytes(int64_t in, int64_t u) {
    return ((size_t)(6 * u) * sizeof(float) + (size_t)(in + u) + 15) / 16 * 16;
}

static size_t hlstm_ws_size(const sy_kargs *k, int threads) {
    (void)threads;
    int64_t u = k->in_shape[2].dims[1];
    return (size_t)(8 * u) * sizeof(int32_t) + 16 +
           (size_t)k->in_shape[0].dims[0] * hlstm_row_bytes(k->in_shape[0].dims[2], u);
}

static void hlstm_row(void *ctx, int64_t b) {
    const hlstm_job *j = ctx;
    const sy_kargs *k = j->k;
    int64_t T = j->T, I = j->I, U = j->U;
    const float *x = k->in[0], *bias = k->in[3], *scales = k->in[4];
    const int8_t *wx = k->in[1], *wh = k->in[2];
    const bool asym = k->attr->hy.asymmetric;
    const float clip = k->attr->hy.cell_clip;
    float *gates = (float *)(j->scratch + (size_t)b * j->row_bytes), *h = gates + 4 * U, *cs = h + U;
    int8_t *qx = (int8_t *)(cs + U), *qh = qx + I;
    float sx, sh;
    int32_t zx, zh;
    memset(h, 0, (size_t)U * sizeof(float));
    memset(cs, 0, (size_t)U * sizeof(float));
    for (int64_t t = 0; t < T; t++) {
        quantize_row(x + (b * T + t) * I, I, asym, qx, &sx, &zx);
        quantize_row(h, U, asym, qh, &sh, &zh);
        /* each gate: its bias, then + the input's product, then + the state's (CalculateLstmGateHybrid) */
        for (int g = 0; g < 4; g++) {
            float *gate = gates + g * U;
            memcpy(gate, bias + g * U, (size_t)U * sizeof(float));
            accumulate(gate, wx + g * U * I, U, I, qx, j->sum_x + g * U, zx, sx, scales + g, 0);
            accumulate(gate, wh + g * U * U, U, U, qh, j->sum_h + g * U, zh, sh, scales + 4 + g, 0);
        }
        float *ig = gates, *fg = gates + U, *cg = gates + 2 * U, *og = gates + 3 * U;
        for (int64_t u = 0; u < U; u++) {
            ig[u] = sigmoidf(ig[u]);
            fg[u] = sigmoidf(fg[u]);
            cg[u] = tanhf(cg[u]);
        }
        /* UpdateLstmCellFloat: c = f c, then c += g i, then the clip */
        for (int64_t u = 0; u < U; u++) {
            float c = fg[u] * cs[u];
            c += cg[u] * ig[u];
            if (clip > 0) c = c < -clip ? -clip : c > clip ? clip : c;
            cs[u] = c;
        }
        float *yt = (float *)k->out + (b * T + t) * U;
        for (int64_t u = 0; u < U; u++) {
            h[u] = sigmoidf(og[u]) * tanhf(cs[u]);
            yt[u] = h[u];
        }
    }
}

static hlstm_job hlstm_setup(const sy_kargs *k) {
    const sy_shape *xs = &k->in_shape[0];
    hlstm_job j = {k, xs->dims[1], xs->dims[2], k->in_shape[2].dims[1], NULL, NULL, NULL, 0};
    int32_t *sum_x = k->ws, *sum_h = sum_x + 4 * j.U;
    /* the zero points' corrections need the rows' sums; symmetric inputs have zero points of 0 */
    if (k->attr->hy.asymmetric) {
        row_sums(sum_x, k->in[1], 4 * j.U, j.I);
        row_sums(sum_h, k->in[2], 4 * j.U, j.U);
    } else {
        memset(sum_x, 0, (size_t)(8 * j.U) * sizeof(int32_t));
    }
    j.sum_x = sum_x, j.sum_h = sum_h;
    j.scratch = (char *)k->ws + ((size_t)(8 * j.U) * sizeof(int32_t) + 15) / 16 * 16;
    j.row_bytes = hlstm_row_bytes(j.I, j.U);
    return j;
}

static void hlstm(const sy_kargs *k) { /* the reference: the rows in order, on this thread */
    hlstm_job j = hlstm_setup(k);
    for (int64_t b = 0; b < k->in_shape[0].dims[0]; b++) hlstm_row(&j, b);
}

static void hlstm_threads(const sy_kargs *k) { /* the cpu backend's: a row per part, over ex's threads */
    hlstm_job j = hlstm_setup(k);
    sy_parallel_parts(k->ex, k->in_shape[0].dims[0], hlstm_row, &j);
}

const sy_kernel sy_qhybrid_fully_connected = {hfully_connected, hfc_ws, NULL};
const sy_kernel sy_qhybrid_lstm = {hlstm, hlstm_ws_size, NULL};
const sy_kernel sy_cpu_hlstm = {hlstm_threads, hlstm_ws_size, NULL};
