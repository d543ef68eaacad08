/*
 * rng.c - Philox-4x32-10, the counter-based generator TensorFlow also uses for
 * its stateless random ops (Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11).
 *
 * A counter-based generator has no hidden state to share: the value at
 * (key, counter) is a pure function, so every replica, layer and pipeline
 * stage can draw from its own stream in any order and runs stay bitwise
 * reproducible. A stream's key is a hash of (seed, stream id).
 */
#include "core_internal.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void sy_philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
    uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint64_t sy_mix64(uint64_t x) {
    /* splitmix64's finalizer */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

sy_rng sy_rng_new(uint64_t seed, uint64_t stream) {
    sy_rng r;
    r.key = sy_mix64(seed ^ sy_mix64(stream + 0x51ED2701ull));
    r.counter = 0;
    return r;
}

/* Each Philox block gives four words; the stream position counts words. */
uint32_t sy_rng_u32(sy_rng *rng) {
    uint32_t out[4];
    sy_philox(rng->key, 0, rng->counter >> 2, out);
    return out[rng->counter++ & 3];
}

float sy_rng_uniform(sy_rng *rng) { return (float)(sy_rng_u32(rng) >> 8) * (1.0f / 16777216.0f); }

double sy_rng_uniform64(sy_rng *rng) {
    uint64_t hi, lo;
    if ((rng->counter & 3) <= 2) { /* both words from one Philox block: the same values, half the work */
        uint32_t out[4];
        sy_philox(rng->key, 0, rng->counter >> 2, out);
        hi = out[rng->counter & 3] >> 5;
        lo = out[(rng->counter & 3) + 1] >> 6;
        rng->counter += 2;
    } else {
        hi = sy_rng_u32(rng) >> 5;
        lo = sy_rng_u32(rng) >> 6;
    }
    return (double)(hi * 67108864.0 + (double)lo) * (1.0 / 9007199254740992.0);
}

double sy_rng_normal(sy_rng *rng) {
    double u1 = sy_rng_uniform64(rng), u2 = sy_rng_uniform64(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
