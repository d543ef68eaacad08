/*
 * test_qgemm.c - the fast int8 product (src/backend/cpu/qgemm_fast.c)
 * against its contract, sy_qgemm_i8_ref (qgemm.c), bit for bit: every
 * output byte must be equal, because the int8 models' predictions are
 * checked against TFLite's exactly and the fast kernel is what they run.
 *
 * Shapes: m, n, k from 1 to a few hundred, primes and k not a multiple of
 * 4, the tutorial CNN's conv (im2col, k = 9) and dense (k = 10816) layers,
 * and ResNet-50's convs (7x7x3, 3x3x64 ... 3x3x512 = 4608, 1x1 up to 2048
 * channels) on a few hundred rows; strided x and y (the bytes between rows
 * must be left alone). Values: uniform int8, all -128 or all 127, zero
 * points -128 and 127, per-channel and per-tensor multipliers with shifts
 * from -31 to +4, multipliers near 2^31, negative ones and INT32_MIN
 * (TFLite's one saturating product), accumulators exactly at INT32_MIN,
 * INT32_MAX and at rounding halves, every clamp. Each product runs on the
 * calling thread, on an exec context of 1 thread and on a pool of 3 (the
 * same bits). 0.3 s in a release build, 2 s under ASan; TSan and the
 * portable path run the smaller shapes only (MAX_MACS).
 */
#include "backend/cpu/cpu_internal.h"
#include "check.h"
#include "xorshift.h"

#include <stdlib.h>

/* Under TSan (here for the threads, not the sums, and 10x slower on the reference's loops) and on the
 * portable path (scalar loops) only the smaller shapes run, and the extreme values on the smallest. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SY_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(SY_TEST_TSAN) || defined(SY_QGEMM_PORTABLE)
#define MAX_MACS 1.5e6
#define EXTRA_MACS 2e5
#else
#define MAX_MACS 1e15
#define EXTRA_MACS 4e6
#endif


typedef enum { V_RANDOM, V_MIN, V_MAX, V_MIXED } values;

static int8_t value(values v) {
    switch (v) {
    case V_MIN: return -128;
    case V_MAX: return 127;
    case V_MIXED: return next32() & 1 ? -128 : 127;
    default: return (int8_t)uniform(-128, 127);
    }
}

typedef struct qcase {
    int64_t m, n, k;
    const char *what;
} qcase;

static sy_pool *pool3;

/* y from the fast kernel on `threads` (0: ex NULL) equals ref, and the gaps between rows are untouched */
static void check_fast(const char *what, const int8_t *x, int64_t ldx, const int8_t *w, int64_t m, int64_t n,
                       int64_t k, const sy_qgemm_params *p, const int8_t *ref, int64_t ldy) {
    int64_t bytes = sy_qgemm_packed_bytes(n, k);
    void *packed = aligned_alloc(64, (size_t)sy_align_up(bytes, 64));
    sy_qgemm_pack(packed, w, n, k);
    int64_t ysize = (m - 1) * ldy + n;
    int8_t *y = malloc((size_t)ysize);
    for (int t = 0; t < 3; t++) {
        memset(y, 0x5A, (size_t)ysize);
        sy_exec ex = {.pool = t == 2 ? pool3 : NULL, .threads = t == 2 ? 3 : 1};
        if (t == 1) /* the one-shot call, packing into a scratch buffer */
            sy_qgemm_i8_unpacked(&ex, y, ldy, x, ldx, w, m, n, k, p, packed);
        else
            sy_qgemm_i8(t ? &ex : NULL, y, ldy, x, ldx, packed, m, n, k, p);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < ldy && i * ldy + j < ysize; j++) {
                int8_t want = j < n ? ref[i * ldy + j] : 0x5A;
                if (y[i * ldy + j] != want) {
                    if (first < 0) first = i * ldy + j;
                    bad++;
                }
            }
        CHECK(bad == 0, "%s (m %lld, n %lld, k %lld, %s): %lld bytes differ, first at row %lld col %lld: %d vs %d",
              what, (long long)m, (long long)n, (long long)k, t == 0 ? "calling thread" : t == 1 ? "unpacked" : "3 threads",
              (long long)bad, (long long)(first / ldy), (long long)(first % ldy), bad ? y[first] : 0,
              bad ? ref[first] : 0);
    }
    free(y);
    free(packed);
}

typedef enum { P_REALISTIC, P_PER_TENSOR, P_EXTREME } params_kind;

/* One product: x, w of the given values, params of the given kind, strides padded by pad. */
static void run_case(const qcase *c, values xv, values wv, params_kind pk, int64_t pad) {
    int64_t m = c->m, n = c->n, k = c->k, ldx = k + pad, ldy = n + pad;
    int8_t *x = malloc((size_t)((m - 1) * ldx + k)), *w = malloc((size_t)(n * k));
    int8_t *ref = malloc((size_t)((m - 1) * ldy + n));
    for (int64_t i = 0; i < (m - 1) * ldx + k; i++) x[i] = value(xv);
    for (int64_t i = 0; i < n * k; i++) w[i] = value(wv);
    int32_t *bias = malloc((size_t)n * 4), *mult = malloc((size_t)n * 4), *shift = malloc((size_t)n * 4);
    sy_qgemm_params p = {.bias = next32() % 4 ? bias : NULL, .mult = mult, .shift = shift};
    int zps[] = {-128, 127, 0, uniform(-128, 127)};
    p.x_zp = zps[next32() % 4];
    p.y_zp = zps[next32() % 4];
    int clamp = (int)(next32() % 4);
    p.act_min = clamp == 0 ? -128 : clamp == 1 ? p.y_zp : uniform(-128, 0);
    p.act_max = clamp == 0 || clamp == 1 ? 127 : uniform(p.act_min, 127);
    /* an accumulator's typical size, so that realistic scales put outputs over the whole int8 range */
    double typical = 128.0 * 74.0 * sqrt((double)k) + 1.0;
    for (int64_t j = 0; j < n; j++) {
        /* |bias| + |sum| stays below 2^31: the reference's int32 sum must not overflow (it would be undefined) */
        bias[j] = uniform(-(1 << 24), 1 << 24);
        int s;
        if (pk == P_EXTREME) {
            uint32_t r = next32() % 8;
            mult[j] = r == 0 ? INT32_MIN : r == 1 ? INT32_MAX : r == 2 ? (1 << 30) : r == 3 ? INT32_MAX - 1
                      : r == 4 ? -(int32_t)(next32() >> 1) : (int32_t)(next32() >> 1) | (1 << 30);
            shift[j] = uniform(-31, 4);
        } else if (pk == P_PER_TENSOR && j > 0) {
            mult[j] = mult[0];
            shift[j] = shift[0];
        } else {
            sy_q_multiplier(100.0 / typical * (0.25 + (next32() % 1000) / 500.0), &mult[j], &s);
            shift[j] = s;
        }
    }
    sy_qgemm_i8_ref(ref, ldy, x, ldx, w, m, n, k, &p);
    for (int64_t i = 0; i + 1 < m; i++) memset(ref + i * ldy + n, 0x5A, (size_t)(ldy - n));
    char what[160];
    snprintf(what, sizeof what, "%s, x %d w %d params %d pad %lld zp %d/%d clamp [%d, %d]", c->what, xv, wv, pk,
             (long long)pad, p.x_zp, p.y_zp, p.act_min, p.act_max);
    check_fast(what, x, ldx, w, m, n, k, &p, ref, ldy);
    free(x), free(w), free(ref), free(bias), free(mult), free(shift);
}

/* The requantization at its edges: rows whose x is x_zp everywhere make the accumulator the bias, which here
 * takes INT32_MIN, INT32_MAX, powers of two and values a half away from a rounding step, against multipliers
 * INT32_MIN (with INT32_MIN: TFLite's saturation), INT32_MAX, 2^30 and others, and shifts -31..+4 (left
 * shifts that wrap). */
static void requant_edges(void) {
    const int32_t biases[] = {INT32_MIN, INT32_MAX, 0, 1, -1, 1 << 30, -(1 << 30), INT32_MIN + 1, 3, -3, 5, -5,
                              (1 << 20) + (1 << 19), -((1 << 20) + (1 << 19)), 0x40000000 + 0x20000000, 0x7FFF8000,
                              -0x7FFF8000, 1 << 27, -(1 << 27), 12345678, -12345678};
    const int32_t mults[] = {INT32_MIN, INT32_MAX, 1 << 30, INT32_MAX - 1, 1518500250, -1518500250, 1, -1, 0x60000000};
    int nb = (int)(sizeof biases / sizeof *biases), nm = (int)(sizeof mults / sizeof *mults);
    int64_t n = (int64_t)nb * nm * 4, k = 7, m = 3;
    int8_t *w = malloc((size_t)(n * k)), x[3 * 7], *ref = malloc((size_t)(m * n));
    int32_t *bias = malloc((size_t)n * 4), *mult = malloc((size_t)n * 4), *shift = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n * k; i++) w[i] = value(V_RANDOM);
    const int shifts[] = {0, 1, -1, -31, -30, -16, 4, -2};
    for (int64_t j = 0; j < n; j++) {
        bias[j] = biases[j % nb];
        mult[j] = mults[(j / nb) % nm];
        shift[j] = shifts[(j / nb / nm + j) % 8];
    }
    /* y_zp 0: requantized values reach INT32_MIN + 1 and INT32_MAX here, and adding a zero point to them
     * overflows int32 in the reference (as in TFLite: undefined; the fast kernels wrap) */
    for (int zi = 0; zi < 2; zi++) {
        sy_qgemm_params p = {.x_zp = zi ? 127 : -128, .y_zp = 0, .act_min = -128, .act_max = 127, .bias = bias,
                             .mult = mult, .shift = shift};
        for (int i = 0; i < 3 * 7; i++) x[i] = (int8_t)p.x_zp;
        sy_qgemm_i8_ref(ref, n, x, k, w, m, n, k, &p);
        check_fast("requantization edges", x, k, w, m, n, k, &p, ref, n);
        p.act_min = -3, p.act_max = 5; /* a narrow clamp */
        sy_qgemm_i8_ref(ref, n, x, k, w, m, n, k, &p);
        check_fast("requantization edges, clamp [-3, 5]", x, k, w, m, n, k, &p, ref, n);
    }
    /* the saturation is really met: INT32_MIN x INT32_MIN, shift 0, gives INT32_MAX before the clamp */
    CHECK(sy_q_requantize(INT32_MIN, INT32_MIN, 0) == INT32_MAX, "saturation");
    free(w), free(ref), free(bias), free(mult), free(shift);
}

int main(void) {
    rng = 0x9E3779B97F4A7C15ull;
    CHECK(sy_pool_new(3, &pool3) == SY_OK, "pool");
    const qcase cases[] = {
        {1, 1, 1, "1x1x1"},
        {1, 1, 5, "single output"},
        {2, 3, 4, "tiny"},
        {7, 13, 5, "primes"},
        {6, 64, 4, "one whole tile"},
        {5, 17, 3, "k 3"},
        {13, 65, 67, "a channel past a panel"},
        {97, 31, 129, "odd"},
        {1, 129, 251, "one row"},
        {49, 48, 64, "a row past a block"},
        {101, 200, 300, "larger"},
        {211, 97, 577, "primes, k past 4 x 144"},
        {3, 300, 1030, "wide"},
        {1, 10, 10816, "Fashion-MNIST dense, batch 1"},
        {8, 10, 10816, "Fashion-MNIST dense, batch 8"},
        {676, 64, 9, "Fashion-MNIST conv, im2col, batch 1"},
        {2 * 676, 64, 9, "Fashion-MNIST conv, im2col, batch 2"},
        {150, 64, 147, "ResNet-50 conv1 7x7x3"},
        {100, 64, 576, "ResNet-50 3x3x64"},
        {120, 256, 64, "ResNet-50 1x1 64 -> 256"},
        {30, 128, 1152, "ResNet-50 3x3x128"},
        {9, 512, 4608, "ResNet-50 3x3x512"},
        {14, 2048, 512, "ResNet-50 1x1 512 -> 2048"},
        {12, 512, 2048, "ResNet-50 1x1 2048 -> 512"},
    };
    int nc = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < nc; i++) {
        const qcase *c = &cases[i];
        double macs = (double)c->m * (double)c->n * (double)c->k;
        if (macs > MAX_MACS) continue;
        run_case(c, V_RANDOM, V_RANDOM, P_REALISTIC, 0);
        run_case(c, V_RANDOM, V_RANDOM, P_PER_TENSOR, i % 3 + 1);
        if (macs > EXTRA_MACS) continue; /* the rest on the smaller shapes, to keep the test fast under ASan */
        run_case(c, V_RANDOM, V_RANDOM, P_EXTREME, 5);
        run_case(c, V_MIN, V_MAX, P_REALISTIC, 0);
        run_case(c, V_MAX, V_MIN, P_EXTREME, 1);
        run_case(c, V_MIN, V_MIN, P_PER_TENSOR, 0);
        run_case(c, V_MIXED, V_MIXED, P_REALISTIC, 3);
        run_case(c, V_MAX, V_MAX, P_EXTREME, 0);
    }
    requant_edges();
    sy_pool_free(pool3);
    return check_report("test_qgemm");
}
