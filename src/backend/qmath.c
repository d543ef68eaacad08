/*
 * qmath.c - TensorFlow Lite's reference integer arithmetic (issue 18), the
 * fixed-point steps every int8 kernel shares: a real multiplier (input
 * scale x weight scale / output scale, one per output channel) held as a
 * Q31 integer and a power-of-two shift, and the requantization of an int32
 * accumulator by it, rounded exactly as tflite::MultiplyByQuantizedMultiplier
 * in TensorFlow 2.15 (tensorflow/lite/kernels/internal/common.h, the
 * default build: not TFLITE_SINGLE_ROUNDING) -- gemmlowp's
 * SaturatingRoundingDoublingHighMul (the high 32 bits of the doubled
 * product, halves rounded toward +infinity) followed by RoundingDivideByPOT
 * (the right shift, halves rounded away from zero). Both roundings matter: a single
 * rounding of the exact product differs from TFLite by one in about one
 * result in a few thousand.
 *
 * Integer overflow is written out instead of relied on: products are
 * formed in 64 bits, and the pre-shift of a left shift wraps in unsigned
 * arithmetic as TFLite's int32 multiply does on every platform it ships.
 * docs/design/tflite.md.
 */
#include "backend_internal.h"

#include <math.h>

int32_t sy_q_high_mul(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
    /* C's division truncates toward zero, as gemmlowp's does */
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

int32_t sy_q_rounding_shift(int32_t x, int exponent) {
    SY_ASSERT(exponent >= 0 && exponent <= 31);
    int64_t mask = ((int64_t)1 << exponent) - 1;
    int64_t remainder = (int64_t)x & mask;
    int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    /* an arithmetic right shift, floor division by 2^exponent */
    int64_t floor = ((int64_t)x - remainder) / ((int64_t)1 << exponent);
    return (int32_t)(floor + (remainder > threshold ? 1 : 0));
}

int32_t sy_q_requantize(int32_t x, int32_t multiplier, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int32_t shifted = (int32_t)((uint32_t)x << left);
    return sy_q_rounding_shift(sy_q_high_mul(shifted, multiplier), right);
}

void sy_q_multiplier(double real, int32_t *multiplier, int *shift) {
    *multiplier = 0;
    *shift = 0;
    if (real == 0.0 || !isfinite(real)) return;
    double q = frexp(real, shift); /* real = q 2^shift, q in [0.5, 1) */
    int64_t fixed = (int64_t)round(q * (double)((int64_t)1 << 31));
    if (fixed == (int64_t)1 << 31) {
        fixed /= 2;
        ++*shift;
    }
    if (*shift < -31) {
        *shift = 0;
        fixed = 0;
    }
    *multiplier = (int32_t)fixed;
}
