/*
 * qgemm.c - the int8 matrix product every int8 kernel of issue 18 shares,
 * in TensorFlow Lite's integer arithmetic: int8 inputs with a zero point,
 * symmetric int8 weights (zero point 0, one scale per output channel or one
 * for the tensor), an int32 bias, an int32 accumulator requantized to int8
 * by a Q31 multiplier and shift per output channel (qmath.c), the output's
 * zero point added and the fused activation applied as a clamp.
 *
 *     acc = bias[c] + sum_k (x[i][k] - x_zp) * w[c][k]
 *     y[i][c] = clamp(y_zp + requantize(acc, mult[c], shift[c]), act_min, act_max)
 *
 * exactly TFLite's reference_integer_ops::FullyConnected and ConvPerChannel
 * (tensorflow/lite/kernels/internal/reference/integer_ops/) after im2col.
 * The weights are laid out as TFLite stores them: (n, k) row-major, one row
 * per output channel -- FULLY_CONNECTED's (units, inputs), and CONV_2D's
 * (O, H, W, I) filter with k = H * W * I, which matches an NHWC im2col row.
 *
 * This scalar version is the reference: it defines the results. The fast
 * kernels (AVX2 / AVX-512 VNNI) compute the same integer sums in any order
 * -- int32 addition of these products cannot overflow for k < 2^16 and is
 * associative -- so they match it bit for bit, and the op harness checks it.
 */
#include "cpu_internal.h"

void sy_qgemm_i8_ref(int8_t *y, int64_t ldy, const int8_t *x, int64_t ldx, const int8_t *w, int64_t m, int64_t n,
                     int64_t k, const sy_qgemm_params *p) {
    for (int64_t i = 0; i < m; i++) {
        const int8_t *xi = x + i * ldx;
        for (int64_t c = 0; c < n; c++) {
            const int8_t *wc = w + c * k;
            /* int32 sums modulo 2^32, as the fast kernels' vector adds and TFLite's int32 (in practice) wrap,
             * without C's undefined signed overflow: a bias near INT32_MAX, or y_zp added to a requantized
             * value near it, wraps the same way everywhere */
            uint32_t acc = p->bias ? (uint32_t)p->bias[c] : 0u;
            for (int64_t kk = 0; kk < k; kk++) acc += (uint32_t)(((int32_t)xi[kk] - p->x_zp) * (int32_t)wc[kk]);
            int32_t v = (int32_t)((uint32_t)sy_q_requantize((int32_t)acc, p->mult[c], p->shift[c]) + (uint32_t)p->y_zp);
            v = v < p->act_min ? p->act_min : v > p->act_max ? p->act_max : v;
            y[i * ldy + c] = (int8_t)v;
        }
    }
}
