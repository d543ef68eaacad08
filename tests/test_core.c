/*
 * test_core.c - status messages, shapes, the thread pool, random streams,
 * the allocator and the parameter initializers.
 */
#include "check.h"
#include "core/core_internal.h"
#include "systolic.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static void test_status_and_shapes(void) {
    CHECK(strcmp(sy_status_name(SY_ERR_SHAPE), "SY_ERR_SHAPE") == 0, "%s", sy_status_name(SY_ERR_SHAPE));
    CHECK(sy_error(SY_ERR_IO, "cannot read '%s'", "x.idx") == SY_ERR_IO, "sy_error returns its status");
    CHECK(strcmp(sy_last_error(), "cannot read 'x.idx'") == 0, "%s", sy_last_error());
    sy_clear_error();
    CHECK(sy_last_error()[0] == 0, "cleared");
    char buf[SY_SHAPE_STR_MAX];
    sy_shape s = sy_shape_of(4, (int64_t)128, (int64_t)28, (int64_t)28, (int64_t)1);
    CHECK(strcmp(sy_shape_format(&s, buf, sizeof buf), "(128, 28, 28, 1)") == 0, "%s", buf);
    CHECK(sy_shape_count(&s) == 128 * 28 * 28, "count");
    s = sy_shape_of(1, (int64_t)5);
    CHECK(strcmp(sy_shape_format(&s, buf, sizeof buf), "(5,)") == 0, "Python's 1-tuple: %s", buf);
    s = sy_shape_of(0);
    CHECK(strcmp(sy_shape_format(&s, buf, sizeof buf), "()") == 0 && sy_shape_count(&s) == 1, "scalar: %s", buf);
    char tiny[8];
    s = sy_shape_of(3, (int64_t)100000, (int64_t)200000, (int64_t)300000);
    sy_shape_format(&s, tiny, sizeof tiny);
    CHECK(strlen(tiny) == 7, "a short buffer is cut, not overrun: %s", tiny);
    /* a long message is cut with ... rather than overrunning */
    char big[4000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    sy_error(SY_ERR_IO, "%s", big);
    CHECK(strlen(sy_last_error()) < 2048 && strstr(sy_last_error(), "..."), "long message handling");
}

/* int64 and string tensors: values, copies, bounds and freeing (ASan
 * checks that every string's bytes are freed with its tensor). */
static void test_tensors(void) {
    sy_tensor *t, *c;
    CHECK_OK(sy_tensor_new(SY_I64, sy_shape_of(1, (int64_t)2), &t));
    if (t) {
        ((int64_t *)sy_tensor_data(t))[1] = -((int64_t)1 << 40);
        CHECK(sy_tensor_get(t, 1) == -1099511627776.0 && sy_tensor_bytes(t) == 16, "int64 element");
        CHECK(!strcmp(sy_dtype_name(SY_I64), "int64"), "int64 name");
        sy_tensor_free(t);
    }
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(2, (int64_t)2, (int64_t)2), &t));
    if (!t) return;
    CHECK(sy_tensor_string(t, 3).size == 0 && sy_tensor_string(t, 3).data[0] == 0, "unset strings are empty");
    const char bin[5] = {'a', 0, 'b', 0, 'c'};
    CHECK_OK(sy_tensor_set_string(t, 1, bin, sizeof bin));
    CHECK_OK(sy_tensor_set_string(t, 2, "first", 5));
    CHECK_OK(sy_tensor_set_string(t, 2, "second", 6)); /* the old bytes are freed */
    sy_string s = sy_tensor_string(t, 1);
    CHECK(s.size == 5 && !memcmp(s.data, bin, 5) && s.data[5] == 0, "bytes with NULs, NUL-terminated");
    CHECK(isnan(sy_tensor_get(t, 1)), "a string has no number");
    CHECK(sy_tensor_set_string(t, 4, "x", 1) == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "index 4"),
          "index out of range: %s", sy_last_error());
    CHECK_OK(sy_tensor_clone(t, &c));
    if (c) {
        CHECK_OK(sy_tensor_set_string(t, 2, "changed", 7));
        sy_string cs = sy_tensor_string(c, 2);
        CHECK(cs.size == 6 && !memcmp(cs.data, "second", 6), "a clone owns its own bytes");
        sy_tensor_free(c);
    }
    sy_tensor_free(t);
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(1, (int64_t)1), &t));
    if (t) {
        CHECK(sy_tensor_set_string(t, 0, "x", 1) == SY_ERR_DTYPE, "a float tensor holds no strings");
        sy_tensor_free(t);
    }
}

static atomic_long hits[64];

static void count_fn(void *ctx, int index, int count) {
    (void)ctx;
    atomic_fetch_add(&hits[index], 1);
    SY_ASSERT(count >= 1);
}

static void test_pool(void) {
    sy_pool *p;
    CHECK(sy_pool_new(-1, &p) == SY_ERR_INVALID_ARGUMENT && p == NULL, "negative thread count refused");
    CHECK_OK(sy_pool_new(4, &p));
    CHECK(sy_pool_size(p) == 4, "size %d", sy_pool_size(p));
    for (int round = 0; round < 20000; round++) sy_pool_run(p, count_fn, NULL, 1 + round % 4);
    long expect[4] = {20000, 15000, 10000, 5000};
    for (int i = 0; i < 4; i++) CHECK(atomic_load(&hits[i]) == expect[i], "thread %d ran %ld times, expected %ld", i, atomic_load(&hits[i]), expect[i]);
    sy_pool_free(p);
    sy_pool_free(NULL);
    CHECK(sy_cpu_count() >= 1, "cpu count");
}

static void test_rng(void) {
    sy_rng a = sy_rng_new(42, 0), b = sy_rng_new(42, 0), c = sy_rng_new(42, 1), d = sy_rng_new(43, 0);
    int same_c = 0, same_d = 0;
    double sum = 0, sum2 = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        uint32_t x = sy_rng_u32(&a), y = sy_rng_u32(&b);
        CHECK(x == y || i > 0, "same seed and stream agree");
        if (x != y) {
            CHECK(false, "streams with one seed diverged at %d", i);
            break;
        }
        same_c += x == sy_rng_u32(&c);
        same_d += x == sy_rng_u32(&d);
    }
    CHECK(same_c < 3 && same_d < 3, "different streams/seeds collide %d/%d times", same_c, same_d);
    sy_rng r = sy_rng_new(7, 3);
    for (int i = 0; i < n; i++) {
        float u = sy_rng_uniform(&r);
        CHECK(u >= 0 && u < 1, "uniform %g out of [0, 1)", u);
        sum += u;
    }
    CHECK_CLOSE(sum / n, 0.5, 0, 0.01, "uniform mean");
    sum = 0;
    for (int i = 0; i < n; i++) {
        double z = sy_rng_normal(&r);
        sum += z;
        sum2 += z * z;
    }
    CHECK_CLOSE(sum / n, 0.0, 0, 0.02, "normal mean");
    CHECK_CLOSE(sum2 / n, 1.0, 0, 0.03, "normal variance");
}

static atomic_long n_alloc, n_free;
static void *my_alloc(void *ctx, size_t size, size_t align) {
    (void)ctx;
    atomic_fetch_add(&n_alloc, 1);
    return aligned_alloc(align, (size + align - 1) / align * align);
}
static void my_free(void *ctx, void *p) {
    (void)ctx;
    atomic_fetch_add(&n_free, 1);
    free(p);
}

static void test_allocator(void) {
    sy_allocator a = {my_alloc, my_free, NULL};
    sy_set_allocator(&a);
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    sy_graph_input(g, "x", SY_F32, sy_shape_of(1, (int64_t)3));
    sy_graph_free(g);
    sy_set_allocator(NULL);
    CHECK(atomic_load(&n_alloc) > 0 && atomic_load(&n_alloc) == atomic_load(&n_free),
          "every allocation goes through the allocator and is freed: %ld allocs, %ld frees", atomic_load(&n_alloc),
          atomic_load(&n_free));
    void *p = sy_malloc_aligned(100, 64);
    CHECK(((uintptr_t)p & 63) == 0, "alignment");
    sy_free(p);
}

static void test_initializers(void) {
    /* Keras: glorot_uniform limit sqrt(6 / (fan_in + fan_out)); a conv kernel
     * (3, 3, 1, 64) has fan_in 9 and fan_out 576. */
    sy_shape s = sy_shape_of(4, (int64_t)3, (int64_t)3, (int64_t)1, (int64_t)64);
    int64_t n = sy_shape_count(&s);
    double *v = malloc((size_t)n * sizeof *v), lo = 1e9, hi = -1e9, sum2 = 0;
    sy_init init = sy_init_glorot_uniform(3);
    CHECK_OK(sy_init_fill(&init, &s, v));
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
        sum2 += v[i] * v[i];
    }
    double limit = sqrt(6.0 / (9 + 576));
    CHECK(lo >= -limit && hi <= limit && hi > 0.9 * limit && lo < -0.9 * limit, "range [%g, %g] vs limit %g", lo, hi, limit);
    CHECK_CLOSE(sum2 / n, limit * limit / 3, 0.15, 0, "uniform variance");
    double *w = malloc((size_t)n * sizeof *w);
    CHECK_OK(sy_init_fill(&init, &s, w));
    CHECK(memcmp(v, w, (size_t)n * sizeof *v) == 0, "same seed, same values");
    init.seed = 4;
    CHECK_OK(sy_init_fill(&init, &s, w));
    CHECK(memcmp(v, w, (size_t)n * sizeof *v) != 0, "another seed, other values");
    sy_init he = {SY_INIT_HE_NORMAL, 0, 0, 1};
    sy_shape d = sy_shape_of(2, (int64_t)400, (int64_t)300);
    double *x = malloc(120000 * sizeof *x);
    CHECK_OK(sy_init_fill(&he, &d, x));
    sum2 = 0;
    for (int i = 0; i < 120000; i++) sum2 += x[i] * x[i];
    CHECK_CLOSE(sum2 / 120000, 2.0 / 400, 0.05, 0, "he_normal variance 2 / fan_in");
    free(v);
    free(w);
    free(x);
}

/* Issue 13: a batch of INT64_MAX overflowed sy_shape_count (signed
 * overflow, UBSan). Products past INT64_MAX saturate, and sy_shape_bytes,
 * the checked size every array is allocated with, refuses them. */
static void test_shape_overflow(void) {
    sy_shape big = sy_shape_of(4, INT64_MAX, (int64_t)28, (int64_t)28, (int64_t)1);
    CHECK(sy_shape_count(&big) == INT64_MAX, "saturates: %lld", (long long)sy_shape_count(&big));
    sy_shape wrap = sy_shape_of(2, (int64_t)1 << 32, (int64_t)1 << 32); /* 2^64: wraps to 0 unchecked */
    CHECK(sy_shape_count(&wrap) == INT64_MAX, "2^64 saturates: %lld", (long long)sy_shape_count(&wrap));
    int64_t bytes = -1;
    CHECK(sy_shape_bytes(&wrap, 4, &bytes) == SY_ERR_SHAPE && bytes == 0, "2^64 elements refused");
    CHECK(strstr(sy_last_error(), "(4294967296, 4294967296) of 4-byte elements is too large"), "%s", sy_last_error());
    sy_shape edge = sy_shape_of(2, (int64_t)1 << 31, (int64_t)1 << 30); /* 2^61 elements: the count fits, the bytes do not */
    CHECK(sy_shape_count(&edge) == (int64_t)1 << 61, "2^61");
    CHECK(sy_shape_bytes(&edge, 4, &bytes) == SY_ERR_SHAPE, "2^63 bytes refused");
    CHECK_OK(sy_shape_bytes(&edge, 2, &bytes));
    CHECK(bytes == (int64_t)1 << 62, "2^62 bytes: %lld", (long long)bytes);
    sy_shape zero = sy_shape_of(3, INT64_MAX, (int64_t)0, INT64_MAX);
    CHECK(sy_shape_count(&zero) == 0, "a zero dimension: %lld", (long long)sy_shape_count(&zero));
    sy_shape neg = sy_shape_of(2, (int64_t)-1, (int64_t)3);
    CHECK(sy_shape_bytes(&neg, 4, &bytes) == SY_ERR_SHAPE && strstr(sy_last_error(), "negative"), "%s", sy_last_error());
    sy_shape scalar = sy_shape_of(0);
    CHECK(sy_shape_bytes(&scalar, 8, &bytes) == SY_OK && bytes == 8, "a scalar");
    sy_tensor *t = NULL;
    CHECK(sy_tensor_new(SY_F32, big, &t) == SY_ERR_SHAPE && !t, "tensor of INT64_MAX rows refused");
    CHECK(strstr(sy_last_error(), "tensor: shape (9223372036854775807, 28, 28, 1)"), "%s", sy_last_error());
    CHECK(sy_tensor_new(SY_F64, edge, &t) == SY_ERR_SHAPE && !t, "2^64 bytes of f64 refused");
}

int main(void) {
    test_status_and_shapes();
    test_shape_overflow();
    test_tensors();
    test_pool();
    test_rng();
    test_allocator();
    test_initializers();
    return check_report("test_core");
}
