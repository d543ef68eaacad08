/*
 * xorshift.h - the small deterministic generator the int8 kernel tests
 * draw their shapes' values from (test_qgemm, test_qdepthwise,
 * test_qconv_pool): xorshift64, each test seeding it with its own constant
 * so that a failure reproduces.
 */
#ifndef SY_TEST_XORSHIFT_H
#define SY_TEST_XORSHIFT_H

#include <stdint.h>

static uint64_t rng;

static uint32_t next32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Uniform in [lo, hi] (near enough for tests). */
static int32_t uniform(int32_t lo, int32_t hi) { return lo + (int32_t)(next32() % (uint32_t)(hi - lo + 1)); }

#endif
