/*
 * test_dataset.c - the input pipeline (systolic/data.h, "Datasets"): every
 * source and transformation, their element orders, shapes, specs and
 * cardinalities against tf.data's rules; shuffle's buffer semantics and
 * seeded determinism; map, interleave and prefetch on threads (input order
 * kept with a deliberately jittery function, the same output as the
 * sequential path, iterators freed while their threads run); the first
 * error of any stage reaching sy_iterator_next with the stage's name;
 * caches in memory and in files (written, read back by a new dataset,
 * partial and corrupt files rebuilt, foreign files refused); text,
 * fixed-length and TFRecord files this test writes, plain and compressed;
 * list_files. Interleave orders are checked against TensorFlow's
 * documented example and against a small model of its algorithm.
 */
#define _GNU_SOURCE /* nftw */
#include "check.h"
#include "data/data_internal.h"
#include "systolic.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char tmp_root[512];

static void tmp_path(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", tmp_root, name); }

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    SY_ASSERT(f);
    SY_ASSERT(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* data compressed as ZLIB (RFC 1950) or GZIP (RFC 1952), into path. */
static void write_compressed(const char *path, const void *data, size_t n, sy_compression c) {
    uLong cap = compressBound((uLong)n) + 64;
    uint8_t *buf = malloc(cap);
    z_stream z = {0};
    SY_ASSERT(deflateInit2(&z, 6, Z_DEFLATED, c == SY_COMPRESSION_GZIP ? 31 : 15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    SY_ASSERT(deflate(&z, Z_FINISH) == Z_STREAM_END);
    write_file(path, buf, z.total_out);
    deflateEnd(&z);
    free(buf);
}

/* A short pause that depends on v: threads finish out of order. */
static void jitter(int64_t v) {
    uint64_t h = sy_mix64((uint64_t)v);
    struct timespec ts = {0, (long)(h % 300) * 1000};
    nanosleep(&ts, NULL);
}

static sy_status put_i64(sy_element *out, int64_t v) {
    sy_status st = sy_tensor_new(SY_I64, sy_shape_of(0), &out->c[0]);
    if (st) return st;
    *(int64_t *)sy_tensor_data(out->c[0]) = v;
    out->n = 1;
    return SY_OK;
}

static int64_t i64_of(const sy_element *e) { return (int64_t)sy_tensor_get(e->c[0], 0); }

/* Iterate d to its end: the first component's first value of each element
 * into vals (up to max); the element count, or -1 after an error (whose
 * status goes to *status when given). */
static int64_t run_status(const sy_dataset *d, int64_t *vals, int64_t max, sy_status *status) {
    sy_iterator *it;
    sy_status st = sy_dataset_iterator(d, &it);
    int64_t n = 0;
    for (bool end = false; !st;) {
        sy_element e = {0};
        st = sy_iterator_next(it, &e, &end);
        if (st || end) break;
        if (n < max && vals) vals[n] = sy_tensor_count(e.c[0]) ? (int64_t)sy_tensor_get(e.c[0], 0) : -999;
        n++;
        sy_element_clear(&e);
    }
    sy_iterator_free(it);
    if (status) *status = st;
    return st ? -1 : n;
}

/* The next element into *e (cleared first): false at the end or on an
 * error (a failed check). */
static bool next_element(sy_iterator *it, sy_element *e) {
    bool end = true;
    sy_element_clear(e);
    CHECK_OK(sy_iterator_next(it, e, &end));
    return !end && e->n > 0;
}

static int64_t run(const sy_dataset *d, int64_t *vals, int64_t max) {
    sy_status st;
    int64_t n = run_status(d, vals, max, &st);
    CHECK(st == SY_OK, "iteration failed: %s", sy_last_error());
    return n;
}

static bool same(const int64_t *a, const int64_t *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

#define CHECK_SEQ(got, n_got, ...)                                                                 \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        int64_t nw_ = (int64_t)(sizeof want_ / sizeof want_[0]);                                   \
        CHECK((n_got) == nw_ && same((got), want_, nw_), "got %lld elements, want %lld",           \
              (long long)(n_got), (long long)nw_);                                                 \
    } while (0)

static sy_dataset *range(int64_t start, int64_t stop) {
    sy_dataset *d = NULL;
    CHECK_OK(sy_dataset_range(start, stop, 1, &d));
    return d;
}

/* ---- sources ------------------------------------------------------------------------------ */

static void test_range(void) {
    int64_t v[16];
    sy_dataset *d = range(0, 5);
    CHECK_SEQ(v, run(d, v, 16), 0, 1, 2, 3, 4);
    CHECK(sy_dataset_cardinality(d) == 5, "range card");
    sy_component_spec s = sy_dataset_component_spec(d, 0);
    CHECK(s.dtype == SY_I64 && s.shape.rank == 0, "range spec");
    CHECK(sy_dataset_component_spec(d, 1).dtype == SY_DTYPE_COUNT, "out of range spec");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_range(5, 0, -2, &d));
    CHECK(sy_dataset_cardinality(d) == 3, "card");
    CHECK_SEQ(v, run(d, v, 16), 5, 3, 1);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_range(3, 3, 1, &d));
    CHECK(run(d, v, 16) == 0 && sy_dataset_cardinality(d) == 0, "empty range");
    sy_dataset_free(d);
    CHECK_ERR(sy_dataset_range(0, 5, 0, &d), SY_ERR_INVALID_ARGUMENT, "range", "step");
    CHECK(d == NULL, "no dataset on failure");
    sy_dataset_free(NULL);
    sy_iterator_free(NULL);
    sy_element_clear(NULL);
}

static void test_tensor_sources(void) {
    sy_tensor *x, *y, *s, *bad;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, 4, 3), &x));
    CHECK_OK(sy_tensor_new(SY_I32, sy_shape_of(1, 4), &y));
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, 4), &s));
    CHECK_OK(sy_tensor_new(SY_U8, sy_shape_of(1, 5), &bad));
    for (int i = 0; i < 12; i++) ((float *)sy_tensor_data(x))[i] = (float)i;
    for (int i = 0; i < 4; i++) {
        ((int32_t *)sy_tensor_data(y))[i] = 10 + i;
        char word[16];
        snprintf(word, sizeof word, "w%d", i);
        CHECK_OK(sy_tensor_set_string(s, i, word, strlen(word)));
    }
    sy_tensor *ts[] = {x, y, s};
    sy_dataset *d;
    CHECK_OK(sy_dataset_from_tensor_slices(ts, 3, &d));
    sy_tensor_free(x); /* copied */
    CHECK(sy_dataset_cardinality(d) == 4 && sy_dataset_component_count(d) == 3, "slices: card and count");
    sy_component_spec c0 = sy_dataset_component_spec(d, 0);
    CHECK(c0.dtype == SY_F32 && c0.shape.rank == 1 && c0.shape.dims[0] == 3, "slice spec");
    sy_iterator *it;
    CHECK_OK(sy_dataset_iterator(d, &it));
    sy_element e = {0};
    int i = 0;
    for (; next_element(it, &e); i++) {
        CHECK(e.n == 3 && sy_tensor_shape(e.c[0]).rank == 1 && sy_tensor_get(e.c[0], 2) == 3 * i + 2, "slice x %d", i);
        CHECK(sy_tensor_shape(e.c[1]).rank == 0 && sy_tensor_get(e.c[1], 0) == 10 + i, "slice y %d", i);
        sy_string w = sy_tensor_string(e.c[2], 0);
        CHECK(w.size == 2 && w.data[1] == '0' + i, "slice string %d", i);
    }
    CHECK(i == 4, "4 slices");
    bool end;
    CHECK_OK(sy_iterator_next(it, &e, &end));
    CHECK(end && e.n == 0, "after the end, the end again");
    sy_iterator_free(it);
    sy_dataset_free(d);

    sy_tensor *pair[] = {y, bad};
    CHECK_ERR(sy_dataset_from_tensor_slices(pair, 2, &d), SY_ERR_SHAPE, "from_tensor_slices", "(4,)", "(5,)");
    CHECK_OK(sy_dataset_from_tensors(pair, 2, &d));
    CHECK(sy_dataset_cardinality(d) == 1, "from_tensors card");
    c0 = sy_dataset_component_spec(d, 1);
    CHECK(c0.dtype == SY_U8 && c0.shape.rank == 1 && c0.shape.dims[0] == 5, "from_tensors spec");
    int64_t v[4];
    CHECK(run(d, v, 4) == 1 && v[0] == 10, "one element");
    sy_dataset_free(d);
    sy_tensor_free(y);
    sy_tensor_free(s);
    sy_tensor_free(bad);
}

/* ---- map, filter ------------------------------------------------------------------------------- */

typedef struct map_ctx {
    bool jitter;
    int64_t fail_at; /* -1: never */
    atomic_int calls;
} map_ctx;

static sy_status times_two(void *ctx, const sy_element *in, sy_element *out) {
    map_ctx *m = ctx;
    int64_t v = i64_of(in);
    if (m) atomic_fetch_add(&m->calls, 1);
    if (m && m->jitter) jitter(v);
    if (m && v == m->fail_at) return sy_error(SY_ERR_CORRUPT, "bad value %lld", (long long)v);
    return put_i64(out, 2 * v);
}

static const sy_component_spec i64_scalar = {SY_I64, {0, {0}}};

static sy_dataset *mapped(const sy_dataset *in, map_ctx *m, int32_t threads) {
    sy_dataset *d = NULL;
    CHECK_OK(sy_dataset_map(in, times_two, m, threads, &i64_scalar, 1, &d));
    return d;
}

/* A vector of v % 4 + 1 values, all v: different shapes per element. */
static sy_status ragged(void *ctx, const sy_element *in, sy_element *out) {
    (void)ctx;
    int64_t v = i64_of(in);
    sy_status st = sy_tensor_new(SY_I32, sy_shape_of(1, v % 4 + 1), &out->c[0]);
    if (st) return st;
    for (int64_t i = 0; i <= v % 4; i++) ((int32_t *)sy_tensor_data(out->c[0]))[i] = (int32_t)v;
    out->n = 1;
    return SY_OK;
}

static const sy_component_spec i32_vector = {SY_I32, {1, {-1}}};

static void test_map(void) {
    int64_t v[1000], want[1000];
    sy_dataset *r = range(0, 200);
    for (int threads = 0; threads <= 4; threads += 2) {
        map_ctx m = {.jitter = threads > 0, .fail_at = -1};
        sy_dataset *d = mapped(r, &m, threads == 0 ? 1 : threads);
        CHECK(sy_dataset_cardinality(d) == 200, "map keeps the cardinality");
        for (int i = 0; i < 200; i++) want[i] = 2 * i;
        CHECK(run(d, v, 1000) == 200 && same(v, want, 200), "map order with %d threads", threads);
        CHECK(atomic_load(&m.calls) == 200, "one call per element");
        sy_dataset_free(d);
    }
    /* AUTOTUNE works and keeps order */
    sy_dataset *d = mapped(r, NULL, SY_AUTOTUNE);
    CHECK(run(d, v, 1000) == 200 && v[199] == 398, "autotuned map");
    sy_dataset_free(d);

    /* errors: from fn, at element 7, after elements 0..6; sticky */
    for (int threads = 1; threads <= 3; threads += 2) {
        map_ctx m = {.jitter = true, .fail_at = 7};
        d = mapped(r, &m, threads);
        sy_iterator *it;
        CHECK_OK(sy_dataset_iterator(d, &it));
        int got = 0;
        sy_status st = SY_OK;
        for (bool end = false; !st && !end;) {
            sy_element e = {0};
            st = sy_iterator_next(it, &e, &end);
            if (!st && !end) CHECK(i64_of(&e) == 2 * got++, "before the error");
            sy_element_clear(&e);
        }
        CHECK(got == 7, "7 elements before the error (%d threads), got %d", threads, got);
        CHECK(st == SY_ERR_CORRUPT, "the function's status: %s", sy_status_name(st));
        CHECK(strstr(sy_last_error(), "map") && strstr(sy_last_error(), "element 7") &&
                  strstr(sy_last_error(), "bad value 7"),
              "message: %s", sy_last_error());
        sy_element e = {0};
        bool end;
        CHECK_ERR(sy_iterator_next(it, &e, &end), SY_ERR_CORRUPT, "bad value 7");
        sy_iterator_free(it);
        sy_dataset_free(d);
    }
    /* the same with a fast function, whose workers take chunks of elements */
    map_ctx fast = {.fail_at = 150};
    d = mapped(r, &fast, 3);
    sy_status st;
    CHECK(run_status(d, v, 1000, &st) == -1 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), "element 150"),
          "fast map error: %s", sy_last_error());
    sy_dataset_free(d);
    /* output checked against the declared specs */
    sy_component_spec wrong = {SY_I32, {0, {0}}};
    CHECK_OK(sy_dataset_map(r, times_two, NULL, 2, &wrong, 1, &d));
    CHECK(run_status(d, v, 10, &st) == -1 && st == SY_ERR_DTYPE, "spec mismatch");
    CHECK(strstr(sy_last_error(), "map") && strstr(sy_last_error(), "int64 ()") && strstr(sy_last_error(), "int32 ()"),
          "names both specs: %s", sy_last_error());
    sy_dataset_free(d);
    CHECK_ERR(sy_dataset_map(r, times_two, NULL, -5, &i64_scalar, 1, &d), SY_ERR_INVALID_ARGUMENT, "map",
              "num_parallel_calls");
    CHECK_ERR(sy_dataset_map(r, times_two, NULL, 1, &i64_scalar, 0, &d), SY_ERR_INVALID_ARGUMENT, "map");
    sy_dataset_free(r);
}

static sy_status is_even(void *ctx, const sy_element *e, bool *keep) {
    (void)ctx;
    if (i64_of(e) == 13) return sy_error(SY_ERR_INVALID_ARGUMENT, "thirteen");
    *keep = i64_of(e) % 2 == 0;
    return SY_OK;
}

static void test_filter(void) {
    int64_t v[16];
    sy_dataset *r = range(0, 10), *d;
    CHECK_OK(sy_dataset_filter(r, is_even, NULL, &d));
    CHECK(sy_dataset_cardinality(d) == SY_UNKNOWN, "filter: unknown");
    CHECK_SEQ(v, run(d, v, 16), 0, 2, 4, 6, 8);
    sy_dataset_free(d);
    sy_dataset_free(r);
    r = range(0, 20);
    CHECK_OK(sy_dataset_filter(r, is_even, NULL, &d));
    sy_status st;
    CHECK(run_status(d, v, 16, &st) == -1 && st == SY_ERR_INVALID_ARGUMENT, "predicate error");
    CHECK(strstr(sy_last_error(), "filter") && strstr(sy_last_error(), "thirteen"), "%s", sy_last_error());
    sy_dataset_free(d);
    sy_dataset_free(r);
}

/* ---- shuffle ----------------------------------------------------------------------------------- */

static void test_shuffle(void) {
    int64_t a[100], b[100], c[100];
    sy_dataset *r = range(0, 100), *s1, *s2, *s3;
    CHECK_OK(sy_dataset_shuffle(r, 10, 42, true, &s1));
    CHECK_OK(sy_dataset_shuffle(r, 10, 42, true, &s2));
    CHECK_OK(sy_dataset_shuffle(r, 10, 43, true, &s3));
    CHECK(sy_dataset_cardinality(s1) == 100, "shuffle keeps the cardinality");
    CHECK(run(s1, a, 100) == 100 && run(s2, b, 100) == 100 && run(s3, c, 100) == 100, "counts");
    CHECK(same(a, b, 100), "same seed, same order");
    CHECK(!same(a, c, 100), "another seed, another order");
    bool seen[100] = {0}, in_window = true, moved = false;
    for (int i = 0; i < 100; i++) {
        seen[a[i]] = true;
        in_window = in_window && a[i] < i + 10; /* a buffer of 10: output k comes from the first k + 10 */
        moved = moved || a[i] != i;
    }
    bool all = true;
    for (int i = 0; i < 100; i++) all = all && seen[i];
    CHECK(all && in_window && moved, "a permutation within the buffer's reach");
    /* reshuffle_each_iteration: the second pass differs; the sequence of passes is the seed's */
    CHECK(run(s1, b, 100) == 100 && !same(a, b, 100), "reshuffled on the second pass");
    CHECK(run(s2, c, 100) == 100 && same(c, b, 100), "s2's second pass is s1's second");
    sy_dataset_free(s1);
    sy_dataset_free(s2);
    sy_dataset_free(s3);
    CHECK_OK(sy_dataset_shuffle(r, 1000, 7, false, &s1));
    CHECK(run(s1, a, 100) == 100 && run(s1, b, 100) == 100 && same(a, b, 100), "no reshuffle: same each pass");
    /* shuffle then repeat: each epoch a new order */
    CHECK_OK(sy_dataset_repeat(s1, 2, &s2));
    int64_t two[200];
    CHECK(run(s2, two, 200) == 200 && same(two, two + 100, 100), "no reshuffle across repeat");
    sy_dataset_free(s2);
    sy_dataset_free(s1);
    CHECK_OK(sy_dataset_shuffle(r, 1000, 7, true, &s1));
    CHECK_OK(sy_dataset_repeat(s1, 2, &s2));
    CHECK(run(s2, two, 200) == 200 && !same(two, two + 100, 100), "reshuffled across repeat");
    sy_dataset_free(s2);
    sy_dataset_free(s1);
    /* determinism through a jittery parallel map */
    map_ctx m = {.jitter = true, .fail_at = -1};
    sy_dataset *mp = mapped(r, &m, 4);
    CHECK_OK(sy_dataset_shuffle(mp, 16, 5, true, &s1));
    CHECK_OK(sy_dataset_shuffle(mp, 16, 5, true, &s2));
    CHECK(run(s1, a, 100) == 100 && run(s2, b, 100) == 100 && same(a, b, 100), "deterministic over threads");
    sy_dataset_free(s1);
    sy_dataset_free(s2);
    sy_dataset_free(mp);
    CHECK_ERR(sy_dataset_shuffle(r, 0, 1, true, &s1), SY_ERR_INVALID_ARGUMENT, "shuffle", "buffer_size");
    sy_dataset_free(r);
}

/* ---- batch, padded_batch ------------------------------------------------------------------------- */

static sy_status to_row(void *ctx, const sy_element *in, sy_element *out) {
    /* v -> (float (2,) [v, -v], string "s<v>") */
    (void)ctx;
    int64_t v = i64_of(in);
    sy_status st = sy_tensor_new(SY_F32, sy_shape_of(1, 2), &out->c[0]);
    if (!st) st = sy_tensor_new(SY_STRING, sy_shape_of(0), &out->c[1]);
    out->n = 2;
    if (st) return st;
    ((float *)sy_tensor_data(out->c[0]))[0] = (float)v;
    ((float *)sy_tensor_data(out->c[0]))[1] = (float)-v;
    char s[16];
    snprintf(s, sizeof s, "s%lld", (long long)v);
    return sy_tensor_set_string(out->c[1], 0, s, strlen(s));
}

static void test_batch(void) {
    int64_t v[16];
    sy_dataset *r = range(0, 10), *rows, *b, *bd;
    const sy_component_spec row_specs[] = {{SY_F32, {1, {2}}}, {SY_STRING, {0, {0}}}};
    CHECK_OK(sy_dataset_map(r, to_row, NULL, 1, row_specs, 2, &rows));
    CHECK_OK(sy_dataset_batch(rows, 3, false, &b));
    CHECK_OK(sy_dataset_batch(rows, 3, true, &bd));
    CHECK(sy_dataset_cardinality(b) == 4 && sy_dataset_cardinality(bd) == 3, "batch cardinalities");
    sy_component_spec s = sy_dataset_component_spec(b, 0), sd = sy_dataset_component_spec(bd, 0);
    CHECK(s.shape.rank == 2 && s.shape.dims[0] == -1 && s.shape.dims[1] == 2, "batch dim unknown");
    CHECK(sd.shape.rank == 2 && sd.shape.dims[0] == 3 && sd.shape.dims[1] == 2, "drop_remainder: static");
    sd = sy_dataset_component_spec(bd, 1);
    CHECK(sd.dtype == SY_STRING && sd.shape.rank == 1 && sd.shape.dims[0] == 3, "string batch spec");
    sy_iterator *it;
    CHECK_OK(sy_dataset_iterator(b, &it));
    int64_t sizes[8], n = 0;
    sy_element e = {0};
    for (; next_element(it, &e); n++) {
        sy_shape sh = sy_tensor_shape(e.c[0]);
        sizes[n] = sh.dims[0];
        CHECK(sh.rank == 2 && sh.dims[1] == 2, "rows stacked");
        CHECK(sy_tensor_get(e.c[0], 0) == 3 * n && sy_tensor_get(e.c[0], 1) == -3 * n, "batch %lld values",
              (long long)n);
        sy_string str = sy_tensor_string(e.c[1], sh.dims[0] - 1);
        char want[32];
        snprintf(want, sizeof want, "s%lld", (long long)(3 * n + sh.dims[0] - 1));
        CHECK(sy_tensor_shape(e.c[1]).rank == 1 && str.size == (int64_t)strlen(want) &&
                  memcmp(str.data, want, strlen(want)) == 0,
              "strings batched (B,)");
    }
    sy_iterator_free(it);
    CHECK_SEQ(sizes, n, 3, 3, 3, 1);
    CHECK(run(bd, v, 16) == 3, "the last partial batch dropped");
    sy_dataset_free(b);
    sy_dataset_free(bd);
    sy_dataset_free(rows);

    /* different shapes in one batch */
    sy_dataset *rag;
    CHECK_OK(sy_dataset_map(r, ragged, NULL, 1, &i32_vector, 1, &rag));
    CHECK_OK(sy_dataset_batch(rag, 2, false, &b));
    sy_status st;
    CHECK(run_status(b, v, 16, &st) == -1 && st == SY_ERR_SHAPE, "ragged batch refused");
    CHECK(strstr(sy_last_error(), "batch: component 0 has shape (2,) in element 1 but (1,) in the first element of "
                                  "the batch"),
          "%s", sy_last_error());
    sy_dataset_free(b);

    /* padded_batch: to the longest, with a value; to a fixed shape; strings with "" */
    double pad = -1;
    CHECK_OK(sy_dataset_padded_batch(rag, 3, NULL, &pad, false, &b));
    s = sy_dataset_component_spec(b, 0);
    CHECK(s.shape.rank == 2 && s.shape.dims[0] == -1 && s.shape.dims[1] == -1, "padded spec (None, None)");
    CHECK_OK(sy_dataset_iterator(b, &it));
    bool end;
    CHECK_OK(sy_iterator_next(it, &e, &end));
    sy_shape sh = sy_tensor_shape(e.c[0]);
    CHECK(sh.rank == 2 && sh.dims[0] == 3 && sh.dims[1] == 3, "padded to the longest (3)");
    const int32_t want0[] = {0, -1, -1, 1, 1, -1, 2, 2, 2};
    CHECK(memcmp(sy_tensor_data(e.c[0]), want0, sizeof want0) == 0, "padded values");
    sy_element_clear(&e);
    sy_iterator_free(it);
    sy_dataset_free(b);
    sy_shape fixed = sy_shape_of(1, 5);
    CHECK_OK(sy_dataset_padded_batch(rag, 4, &fixed, NULL, true, &b));
    s = sy_dataset_component_spec(b, 0);
    CHECK(s.shape.dims[0] == 4 && s.shape.dims[1] == 5, "padded spec (4, 5)");
    CHECK(run(b, v, 16) == 2 && sy_dataset_cardinality(b) == 2, "two padded batches");
    sy_dataset_free(b);
    fixed = sy_shape_of(1, 3);
    CHECK_OK(sy_dataset_padded_batch(rag, 4, &fixed, NULL, false, &b));
    CHECK(run_status(b, v, 16, &st) == -1 && st == SY_ERR_SHAPE, "longer than the padded shape");
    CHECK(strstr(sy_last_error(), "padded_batch") && strstr(sy_last_error(), "element 3") &&
              strstr(sy_last_error(), "(4,)"),
          "%s", sy_last_error());
    sy_dataset_free(b);
    fixed = sy_shape_of(2, 3, 3);
    CHECK_ERR(sy_dataset_padded_batch(rag, 4, &fixed, NULL, false, &b), SY_ERR_SHAPE, "padded_batch", "rank");
    pad = 0.5;
    CHECK_ERR(sy_dataset_padded_batch(rag, 4, NULL, &pad, false, &b), SY_ERR_INVALID_ARGUMENT, "padding value",
              "int32");
    sy_dataset_free(rag);

    /* strings of different shapes pad with "" */
    sy_tensor *t1, *t2;
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, 1), &t1));
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, 2), &t2));
    CHECK_OK(sy_tensor_set_string(t1, 0, "a", 1));
    CHECK_OK(sy_tensor_set_string(t2, 0, "b", 1));
    CHECK_OK(sy_tensor_set_string(t2, 1, "cc", 2));
    sy_dataset *d1, *d2, *cat;
    CHECK_OK(sy_dataset_from_tensors(&t1, 1, &d1));
    CHECK_OK(sy_dataset_from_tensors(&t2, 1, &d2));
    CHECK_OK(sy_dataset_concatenate(d1, d2, &cat));
    s = sy_dataset_component_spec(cat, 0);
    CHECK(s.shape.rank == 1 && s.shape.dims[0] == -1, "concatenate: differing dims unknown");
    CHECK_OK(sy_dataset_padded_batch(cat, 2, NULL, NULL, false, &b));
    CHECK_OK(sy_dataset_iterator(b, &it));
    CHECK_OK(sy_iterator_next(it, &e, &end));
    sh = sy_tensor_shape(e.c[0]);
    CHECK(sh.rank == 2 && sh.dims[0] == 2 && sh.dims[1] == 2, "string padded shape");
    CHECK(sy_tensor_string(e.c[0], 0).size == 1 && sy_tensor_string(e.c[0], 1).size == 0 &&
              sy_tensor_string(e.c[0], 3).size == 2,
          "padded with \"\"");
    sy_element_clear(&e);
    sy_iterator_free(it);
    sy_dataset_free(b);
    sy_dataset_free(cat);
    sy_dataset_free(d1);
    sy_dataset_free(d2);
    sy_tensor_free(t1);
    sy_tensor_free(t2);
    CHECK_ERR(sy_dataset_batch(r, 0, false, &b), SY_ERR_INVALID_ARGUMENT, "batch", "batch_size");
    sy_dataset_free(r);
}

/* ---- repeat, take, skip, zip, concatenate ------------------------------------------------------- */

static sy_status never(void *ctx, const sy_element *e, bool *keep) {
    (void)ctx, (void)e;
    *keep = false;
    return SY_OK;
}

static void test_counting(void) {
    int64_t v[32];
    sy_dataset *r = range(0, 3), *d, *d2, *inf;
    CHECK_OK(sy_dataset_repeat(r, 2, &d));
    CHECK(sy_dataset_cardinality(d) == 6, "repeat(2) card");
    CHECK_SEQ(v, run(d, v, 32), 0, 1, 2, 0, 1, 2);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_repeat(r, 0, &d));
    CHECK(sy_dataset_cardinality(d) == 0 && run(d, v, 32) == 0, "repeat(0)");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_repeat(r, SY_INFINITE, &inf));
    CHECK(sy_dataset_cardinality(inf) == SY_INFINITE, "repeat forever");
    CHECK_OK(sy_dataset_take(inf, 7, &d));
    CHECK(sy_dataset_cardinality(d) == 7, "take of infinite");
    CHECK_SEQ(v, run(d, v, 32), 0, 1, 2, 0, 1, 2, 0);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_skip(inf, 4, &d));
    CHECK(sy_dataset_cardinality(d) == SY_INFINITE, "skip of infinite");
    CHECK_OK(sy_dataset_take(d, 4, &d2));
    CHECK_SEQ(v, run(d2, v, 32), 1, 2, 0, 1);
    sy_dataset_free(d2);
    sy_dataset_free(d);
    CHECK_ERR(sy_dataset_skip(inf, -1, &d), SY_ERR_INVALID_ARGUMENT, "skip", "infinite");
    /* take/skip on finite: cardinalities and bounds */
    CHECK_OK(sy_dataset_take(r, 10, &d));
    CHECK(sy_dataset_cardinality(d) == 3 && run(d, v, 32) == 3, "take more than there is");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_take(r, -1, &d));
    CHECK(sy_dataset_cardinality(d) == 3 && run(d, v, 32) == 3, "take(-1): all");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_skip(r, 2, &d));
    CHECK(sy_dataset_cardinality(d) == 1, "skip(2) card");
    CHECK_SEQ(v, run(d, v, 32), 2);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_skip(r, 5, &d));
    CHECK(sy_dataset_cardinality(d) == 0 && run(d, v, 32) == 0, "skip past the end");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_skip(r, -1, &d));
    CHECK(sy_dataset_cardinality(d) == 0 && run(d, v, 32) == 0, "skip(-1): none");
    sy_dataset_free(d);
    /* issue 20: shard(H, h), a host's share, with tf.data's elements, cardinalities and words
     * (TensorFlow 2.15: range(10).shard(3, i) gives 0 3 6 9 / 1 4 7 / 2 5 8, cardinality 4, 3, 3) */
    sy_dataset *ten = range(0, 10);
    CHECK_OK(sy_dataset_shard(ten, 3, 0, &d));
    CHECK(sy_dataset_cardinality(d) == 4, "shard(3, 0) card");
    CHECK_SEQ(v, run(d, v, 32), 0, 3, 6, 9);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_shard(ten, 3, 2, &d));
    CHECK(sy_dataset_cardinality(d) == 3, "shard(3, 2) card");
    CHECK_SEQ(v, run(d, v, 32), 2, 5, 8);
    CHECK_SEQ(v, run(d, v, 32), 2, 5, 8); /* each pass alike */
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_shard(inf, 2, 1, &d));
    CHECK(sy_dataset_cardinality(d) == SY_INFINITE, "shard of infinite");
    CHECK_OK(sy_dataset_take(d, 4, &d2));
    CHECK_SEQ(v, run(d2, v, 32), 1, 0, 2, 1);
    sy_dataset_free(d2);
    sy_dataset_free(d);
    CHECK_ERR(sy_dataset_shard(ten, 3, 3, &d), SY_ERR_INVALID_ARGUMENT, "Index must be between 0 and 2",
              "currently index = 3");
    CHECK_ERR(sy_dataset_shard(ten, 0, 0, &d), SY_ERR_INVALID_ARGUMENT, "Number of shards must be greater than zero",
              "num_shards = 0");
    sy_dataset_free(ten);
    /* skip then take then repeat: per pass */
    CHECK_OK(sy_dataset_skip(r, 1, &d));
    CHECK_OK(sy_dataset_repeat(d, 3, &d2));
    CHECK(sy_dataset_cardinality(d2) == 6, "card");
    CHECK_SEQ(v, run(d2, v, 32), 1, 2, 1, 2, 1, 2);
    sy_dataset_free(d2);
    sy_dataset_free(d);
    /* repeating an empty pass forever ends (TensorFlow's rule) */
    sy_dataset *f;
    CHECK_OK(sy_dataset_filter(r, never, NULL, &f));
    CHECK_OK(sy_dataset_repeat(f, SY_INFINITE, &d));
    CHECK(sy_dataset_cardinality(d) == SY_INFINITE, "tf says infinite");
    CHECK(run(d, v, 32) == 0, "an empty pass repeated forever ends");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_repeat(f, 3, &d));
    CHECK(sy_dataset_cardinality(d) == SY_UNKNOWN, "repeat of unknown");
    sy_dataset_free(d);

    /* zip: the shortest; components side by side */
    sy_dataset *r10 = range(10, 15);
    const sy_dataset *zin[] = {r, r10, inf};
    CHECK_OK(sy_dataset_zip(zin, 3, &d));
    CHECK(sy_dataset_cardinality(d) == 3 && sy_dataset_component_count(d) == 3, "zip card and components");
    sy_iterator *it;
    CHECK_OK(sy_dataset_iterator(d, &it));
    sy_element e = {0};
    int i = 0;
    for (; next_element(it, &e); i++)
        CHECK(e.n == 3 && sy_tensor_get(e.c[0], 0) == i && sy_tensor_get(e.c[1], 0) == 10 + i &&
                  sy_tensor_get(e.c[2], 0) == i % 3,
              "zip %d", i);
    CHECK(i == 3, "3 zipped");
    sy_iterator_free(it);
    sy_dataset_free(d);
    const sy_dataset *zf[] = {f, inf};
    CHECK_OK(sy_dataset_zip(zf, 2, &d));
    CHECK(sy_dataset_cardinality(d) == SY_UNKNOWN, "zip with unknown");
    sy_dataset_free(d);
    const sy_dataset *zi[] = {inf, inf};
    CHECK_OK(sy_dataset_zip(zi, 2, &d));
    CHECK(sy_dataset_cardinality(d) == SY_INFINITE, "zip of infinites");
    sy_dataset_free(d);

    /* concatenate */
    CHECK_OK(sy_dataset_concatenate(r, r10, &d));
    CHECK(sy_dataset_cardinality(d) == 8, "concatenate card");
    CHECK_SEQ(v, run(d, v, 32), 0, 1, 2, 10, 11, 12, 13, 14);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_concatenate(r, inf, &d));
    CHECK(sy_dataset_cardinality(d) == SY_INFINITE, "concatenate infinite");
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_concatenate(f, r, &d));
    CHECK(sy_dataset_cardinality(d) == SY_UNKNOWN, "concatenate unknown");
    sy_dataset_free(d);
    sy_dataset *two;
    CHECK_OK(sy_dataset_zip(zin, 2, &two));
    CHECK_ERR(sy_dataset_concatenate(r, two, &d), SY_ERR_INVALID_ARGUMENT, "concatenate", "components");
    sy_dataset *flt;
    sy_component_spec fs = {SY_F32, {0, {0}}};
    CHECK_OK(sy_dataset_map(r, times_two, NULL, 1, &fs, 1, &flt));
    CHECK_ERR(sy_dataset_concatenate(r, flt, &d), SY_ERR_DTYPE, "concatenate", "int64 ()", "float32 ()");
    sy_dataset_free(flt);
    sy_dataset_free(two);
    sy_dataset_free(f);
    sy_dataset_free(inf);
    sy_dataset_free(r10);
    sy_dataset_free(r);
}

/* ---- static specs through a pipeline ---------------------------------------------------------- */

static sy_status to_image(void *ctx, const sy_element *in, sy_element *out) {
    (void)ctx;
    sy_status st = sy_tensor_new(SY_F32, sy_shape_of(2, 28, 28), &out->c[0]);
    if (!st) st = sy_tensor_new(SY_I32, sy_shape_of(0), &out->c[1]);
    out->n = 2;
    if (!st) ((int32_t *)sy_tensor_data(out->c[1]))[0] = (int32_t)(i64_of(in) % 10);
    return st;
}

static void test_specs(void) {
    sy_dataset *r = range(0, 100), *img, *b, *p, *rep;
    const sy_component_spec specs[] = {{SY_F32, {2, {28, 28}}}, {SY_I32, {0, {0}}}};
    CHECK_OK(sy_dataset_map(r, to_image, NULL, 2, specs, 2, &img));
    CHECK_OK(sy_dataset_repeat(img, SY_INFINITE, &rep));
    CHECK_OK(sy_dataset_batch(rep, 32, true, &b));
    CHECK_OK(sy_dataset_prefetch(b, SY_AUTOTUNE, &p));
    sy_component_spec s = sy_dataset_component_spec(p, 0), l = sy_dataset_component_spec(p, 1);
    CHECK(s.dtype == SY_F32 && s.shape.rank == 3 && s.shape.dims[0] == 32 && s.shape.dims[1] == 28 &&
              s.shape.dims[2] == 28,
          "(32, 28, 28) static");
    CHECK(l.dtype == SY_I32 && l.shape.rank == 1 && l.shape.dims[0] == 32, "(32,) labels");
    CHECK(sy_dataset_cardinality(p) == SY_INFINITE, "infinite batches");
    char buf[DS_SPEC_STR_MAX];
    s.shape.dims[0] = -1;
    CHECK(strcmp(ds_spec_format(&s, buf, sizeof buf), "float32 (None, 28, 28)") == 0, "%s", buf);
    /* an infinite prefetched pipeline, read a little and freed */
    sy_iterator *it;
    CHECK_OK(sy_dataset_iterator(p, &it));
    for (int i = 0; i < 5; i++) {
        sy_element e = {0};
        bool end;
        CHECK_OK(sy_iterator_next(it, &e, &end));
        CHECK(!end && e.n == 2 && sy_tensor_get(e.c[1], 31) == (i * 32 + 31) % 100 % 10, "batch %d labels", i);
        sy_element_clear(&e);
    }
    sy_iterator_free(it);
    sy_dataset_free(p);
    sy_dataset_free(b);
    sy_dataset_free(rep);
    sy_dataset_free(img);
    sy_dataset_free(r);
}

/* ---- prefetch, early frees ----------------------------------------------------------------------- */

static void test_prefetch(void) {
    int64_t v[300], want[300];
    sy_dataset *r = range(0, 300), *p;
    for (int i = 0; i < 300; i++) want[i] = i;
    const int64_t sizes[] = {0, 1, 7, SY_AUTOTUNE};
    for (int k = 0; k < 4; k++) {
        CHECK_OK(sy_dataset_prefetch(r, sizes[k], &p));
        CHECK(sy_dataset_cardinality(p) == 300, "prefetch card");
        CHECK(run(p, v, 300) == 300 && same(v, want, 300), "prefetch(%lld) order", (long long)sizes[k]);
        sy_dataset_free(p);
    }
    CHECK_ERR(sy_dataset_prefetch(r, -5, &p), SY_ERR_INVALID_ARGUMENT, "prefetch", "buffer_size");
    /* an error through prefetch, after the elements before it */
    map_ctx m = {.jitter = true, .fail_at = 50};
    sy_dataset *mp = mapped(r, &m, 3), *p2;
    CHECK_OK(sy_dataset_prefetch(mp, SY_AUTOTUNE, &p));
    CHECK_OK(sy_dataset_prefetch(p, 2, &p2));
    sy_status st;
    int64_t n = run_status(p2, v, 300, &st);
    CHECK(n == -1 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), "map") && strstr(sy_last_error(), "element 50"),
          "prefetched error: %s", sy_last_error());
    sy_dataset_free(p2);
    sy_dataset_free(p);
    sy_dataset_free(mp);
    sy_dataset_free(r);
}

static void test_early_free(void) {
    /* iterators freed while their threads run, over an endless input: no
     * hang, no leak, no race (TSan) */
    sy_dataset *r = range(0, INT64_MAX), *m1, *m2, *p;
    map_ctx m = {.jitter = true, .fail_at = -1};
    m1 = mapped(r, &m, 4);
    CHECK_OK(sy_dataset_prefetch(m1, 8, &p));
    m2 = mapped(p, &m, 2);
    for (int reads = 0; reads < 4; reads++) {
        sy_iterator *it;
        CHECK_OK(sy_dataset_iterator(m2, &it));
        for (int i = 0; i < reads * 5; i++) {
            sy_element e = {0};
            bool end;
            CHECK_OK(sy_iterator_next(it, &e, &end));
            CHECK(i64_of(&e) == 4 * i, "order");
            sy_element_clear(&e);
        }
        sy_iterator_free(it);
    }
    sy_dataset_free(m2);
    sy_dataset_free(p);
    sy_dataset_free(m1);
    sy_dataset_free(r);
}

/* ---- interleave ------------------------------------------------------------------------------------ */

/* from_tensors(x).repeat(6), as TensorFlow's documentation has it */
static sy_status six_of(void *ctx, const sy_element *e, sy_dataset **out) {
    (void)ctx;
    sy_dataset *one;
    sy_status st = sy_dataset_from_tensors(&e->c[0], 1, &one);
    if (st) return st;
    st = sy_dataset_repeat(one, 6, out);
    sy_dataset_free(one);
    return st;
}

/* x -> range(100 x, 100 x + len(x)), len(x) = x * 7 % 5 (0 to 4: some empty), jittered */
typedef struct il_ctx {
    int64_t fail_at;
} il_ctx;

static int64_t inner_len(int64_t x) { return x * 7 % 5; }

static sy_status inner_range(void *ctx, const sy_element *e, sy_dataset **out) {
    il_ctx *c = ctx;
    int64_t x = i64_of(e);
    if (c && x == c->fail_at) return sy_error(SY_ERR_NOT_FOUND, "no dataset for %lld", (long long)x);
    sy_dataset *r;
    sy_status st = sy_dataset_range(100 * x, 100 * x + inner_len(x), 1, &r);
    if (st) return st;
    map_ctx *m = NULL;
    static map_ctx jittery = {.jitter = true, .fail_at = -1};
    if (c) m = &jittery;
    st = sy_dataset_map(r, times_two, m, 1, &i64_scalar, 1, out);
    sy_dataset_free(r);
    return st;
}

/* inner_range's datasets on threads of their own: prefetch(map(4 threads)) */
static sy_status inner_threaded(void *ctx, const sy_element *e, sy_dataset **out) {
    sy_dataset *r;
    sy_status st = inner_range(NULL, e, &r);
    if (st) return st;
    static map_ctx jittery = {.jitter = true, .fail_at = -1};
    sy_dataset *m = NULL;
    st = sy_dataset_map(r, times_two, &jittery, 4, &i64_scalar, 1, &m);
    if (!st) st = sy_dataset_prefetch(m, SY_AUTOTUNE, out);
    sy_dataset_free(m);
    sy_dataset_free(r);
    return st;
}

/* x -> map(range(100 x, 100 x + 50)), failing on the value 120 */
static sy_status inner_failing(void *ctx, const sy_element *e, sy_dataset **out) {
    static map_ctx fail = {.fail_at = 120};
    sy_dataset *r;
    sy_status st = sy_dataset_range(100 * i64_of(e), 100 * i64_of(e) + 50, 1, &r);
    if (st) return st;
    st = sy_dataset_map(r, times_two, &fail, 1, &i64_scalar, 1, out);
    sy_dataset_free(r);
    return st;
}

/* tf.data's interleave on the same inputs, written out plainly. */
static int64_t model_interleave(int64_t inputs, int cycle, int block, int64_t *out) {
    int64_t cur[64], pos[64], next = 0, n = 0;
    bool open[64] = {0};
    int ci = 0, bi = 0, num_open = 0;
    bool end_of_input = false;
    while (!end_of_input || num_open > 0) {
        if (open[ci]) {
            if (pos[ci] < inner_len(cur[ci])) {
                out[n++] = 2 * (100 * cur[ci] + pos[ci]++);
                if (++bi == block) bi = 0, ci = (ci + 1) % cycle;
                continue;
            }
            open[ci] = false;
            num_open--;
            bi = 0, ci = (ci + 1) % cycle;
        } else if (next < inputs) {
            cur[ci] = next++;
            pos[ci] = 0;
            open[ci] = true;
            num_open++;
        } else {
            end_of_input = true;
            bi = 0, ci = (ci + 1) % cycle;
        }
    }
    return n;
}

static void test_interleave(void) {
    int64_t v[400], want[400];
    sy_dataset *r = range(1, 6), *d;
    /* TensorFlow's documented example: cycle_length 2, block_length 4 */
    for (int threads = 1; threads <= 3; threads += 2) {
        CHECK_OK(sy_dataset_interleave(r, six_of, NULL, 2, 4, threads, &i64_scalar, 1, &d));
        CHECK(sy_dataset_cardinality(d) == SY_UNKNOWN, "interleave: unknown");
        CHECK_SEQ(v, run(d, v, 400), 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5,
                  5, 5, 5);
        sy_dataset_free(d);
    }
    sy_dataset_free(r);
    /* against the model, datasets of 0 to 4 elements, several shapes of cycle */
    r = range(0, 40);
    il_ctx c = {.fail_at = -1};
    const int cycles[] = {1, 3, 4, 7}, blocks[] = {1, 2, 3, 1};
    for (int k = 0; k < 4; k++) {
        int64_t n = model_interleave(40, cycles[k], blocks[k], want);
        for (int threads = 0; threads <= 4; threads += 4) {
            CHECK_OK(sy_dataset_interleave(r, inner_range, threads ? &c : NULL, cycles[k], blocks[k], threads,
                                           &i64_scalar, 1, &d));
            CHECK(run(d, v, 400) == n && same(v, want, n), "interleave cycle %d block %d threads %d", cycles[k],
                  blocks[k], threads);
            sy_dataset_free(d);
        }
    }
    /* nested threads: parallel interleave of prefetched parallel maps */
    int64_t n = model_interleave(40, 3, 2, want);
    for (int i = 0; i < n; i++) want[i] *= 2;
    CHECK_OK(sy_dataset_interleave(r, inner_threaded, NULL, 3, 2, 3, &i64_scalar, 1, &d));
    CHECK(run(d, v, 400) == n && same(v, want, n), "nested parallel stages keep the order");
    for (int reads = 1; reads < 40; reads += 13) { /* and stop cleanly when freed early */
        sy_iterator *it;
        CHECK_OK(sy_dataset_iterator(d, &it));
        for (int i = 0; i < reads; i++) {
            sy_element e = {0};
            bool end;
            CHECK_OK(sy_iterator_next(it, &e, &end));
            CHECK(!end && i64_of(&e) == want[i], "nested, element %d", i);
            sy_element_clear(&e);
        }
        sy_iterator_free(it);
    }
    sy_dataset_free(d);
    /* an error from the function at input element 9 */
    c.fail_at = 9;
    for (int threads = 0; threads <= 3; threads += 3) {
        CHECK_OK(sy_dataset_interleave(r, inner_range, &c, 3, 1, threads, &i64_scalar, 1, &d));
        sy_status st;
        CHECK(run_status(d, v, 400, &st) == -1 && st == SY_ERR_NOT_FOUND, "fn error (%d threads)", threads);
        CHECK(strstr(sy_last_error(), "interleave") && strstr(sy_last_error(), "element 9") &&
                  strstr(sy_last_error(), "no dataset for 9"),
              "%s", sy_last_error());
        sy_dataset_free(d);
    }
    /* an error inside an inner dataset, after the elements before it */
    sy_dataset *three = range(0, 3);
    for (int threads = 0; threads <= 2; threads += 2) {
        CHECK_OK(sy_dataset_interleave(three, inner_failing, NULL, 1, 1, threads, &i64_scalar, 1, &d));
        sy_status st;
        sy_iterator *it;
        CHECK_OK(sy_dataset_iterator(d, &it));
        int got = 0;
        for (bool end = false;;) {
            sy_element e = {0};
            st = sy_iterator_next(it, &e, &end);
            if (st || end) break;
            CHECK(i64_of(&e) == 2 * (got < 50 ? got : 100 + got - 50), "element %d", got);
            got++;
            sy_element_clear(&e);
        }
        sy_iterator_free(it);
        CHECK(got == 70 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), "bad value 120"),
              "%d elements, then: %s (%d threads)", got, sy_last_error(), threads);
        sy_dataset_free(d);
    }
    sy_dataset_free(three);
    /* declared specs checked */
    sy_component_spec wrong = {SY_F32, {0, {0}}};
    CHECK_OK(sy_dataset_interleave(r, inner_range, NULL, 2, 1, 2, &wrong, 1, &d));
    sy_status st;
    CHECK(run_status(d, v, 400, &st) == -1 && st == SY_ERR_SHAPE && strstr(sy_last_error(), "interleave"),
          "%s", sy_last_error());
    sy_dataset_free(d);
    /* freed early, with its workers reading ahead */
    sy_dataset *inf;
    CHECK_OK(sy_dataset_repeat(r, SY_INFINITE, &inf));
    c.fail_at = -1;
    CHECK_OK(sy_dataset_interleave(inf, inner_range, &c, 4, 2, SY_AUTOTUNE, &i64_scalar, 1, &d));
    for (int reads = 0; reads < 3; reads++) {
        sy_iterator *it;
        CHECK_OK(sy_dataset_iterator(d, &it));
        for (int i = 0; i < reads * 7; i++) {
            sy_element e = {0};
            bool end;
            CHECK_OK(sy_iterator_next(it, &e, &end));
            sy_element_clear(&e);
        }
        sy_iterator_free(it);
    }
    sy_dataset_free(d);
    sy_dataset_free(inf);
    CHECK_ERR(sy_dataset_interleave(r, inner_range, NULL, 0, 1, 1, &i64_scalar, 1, &d), SY_ERR_INVALID_ARGUMENT,
              "interleave", "cycle_length");
    sy_dataset_free(r);
}

/* ---- cache ----------------------------------------------------------------------------------------- */

static sy_status with_string(void *ctx, const sy_element *in, sy_element *out) {
    map_ctx *m = ctx;
    atomic_fetch_add(&m->calls, 1);
    int64_t v = i64_of(in);
    sy_status st = put_i64(out, v);
    if (!st) st = sy_tensor_new(SY_STRING, sy_shape_of(1, 2), &out->c[1]);
    if (!st) out->n = 2;
    char s[32];
    snprintf(s, sizeof s, "value %lld", (long long)v);
    if (!st) st = sy_tensor_set_string(out->c[1], 1, s, strlen(s));
    return st;
}

static const sy_component_spec cache_specs[] = {{SY_I64, {0, {0}}}, {SY_STRING, {1, {2}}}};

static void log_quiet(void *ctx, sy_log_level level, const char *message) {
    (void)level;
    atomic_fetch_add((atomic_int *)ctx, 1);
    (void)message;
}

static void test_cache(void) {
    int64_t v[64], want[64];
    for (int i = 0; i < 20; i++) want[i] = i;
    atomic_int warnings = 0;
    sy_set_log(log_quiet, &warnings);
    sy_dataset *r = range(0, 20), *m, *c, *rep, *t;
    /* in memory: the input runs once */
    map_ctx mc = {.fail_at = -1};
    CHECK_OK(sy_dataset_map(r, with_string, &mc, 1, cache_specs, 2, &m));
    CHECK_OK(sy_dataset_cache(m, NULL, &c));
    CHECK(sy_dataset_cardinality(c) == 20, "cache card");
    CHECK_OK(sy_dataset_take(c, 5, &t));
    CHECK(run(t, v, 64) == 5, "a partial pass");
    CHECK(atomic_load(&warnings) == 1, "the partial cache is discarded with a warning");
    CHECK_OK(sy_dataset_repeat(c, 3, &rep));
    CHECK(run(rep, v, 64) == 60 && same(v, want, 20) && same(v + 40, want, 20), "cached passes");
    CHECK(atomic_load(&mc.calls) == 25, "the input ran for the partial pass and once more: %d",
          atomic_load(&mc.calls));
    CHECK(run(c, v, 64) == 20 && atomic_load(&mc.calls) == 25, "a new iterator reads the memory");
    sy_dataset_free(rep);
    sy_dataset_free(t);
    sy_dataset_free(c);

    /* in a file: written when the pass completes, read back by a new dataset */
    char path[600], tmp[700];
    tmp_path(path, sizeof path, "cache.bin");
    CHECK_OK(sy_dataset_cache(m, path, &c));
    CHECK_OK(sy_dataset_take(c, 3, &t));
    CHECK(run(t, v, 64) == 3 && access(path, F_OK) != 0, "no file after a partial pass");
    sy_dataset_free(t);
    atomic_store(&mc.calls, 0);
    CHECK(run(c, v, 64) == 20 && same(v, want, 20) && access(path, F_OK) == 0, "the file after a whole pass");
    CHECK(run(c, v, 64) == 20 && same(v, want, 20) && atomic_load(&mc.calls) == 20, "then read from the file");
    sy_dataset_free(c);
    CHECK_OK(sy_dataset_cache(m, path, &c));
    sy_iterator *it;
    CHECK_OK(sy_dataset_iterator(c, &it));
    sy_element e = {0};
    bool end;
    CHECK_OK(sy_iterator_next(it, &e, &end));
    sy_element_clear(&e);
    CHECK_OK(sy_iterator_next(it, &e, &end));
    sy_iterator_free(it);
    CHECK(e.n == 2 && i64_of(&e) == 1 && sy_tensor_string(e.c[1], 1).size == 7 &&
              memcmp(sy_tensor_string(e.c[1], 1).data, "value 1", 7) == 0 && sy_tensor_string(e.c[1], 0).size == 0,
          "strings from the file");
    sy_element_clear(&e);
    CHECK(atomic_load(&mc.calls) == 20, "a new dataset reads the whole file");
    sy_dataset_free(c);

    /* a flipped byte: found, not trusted, rebuilt */
    FILE *f = fopen(path, "r+b");
    SY_ASSERT(f);
    fseek(f, 100, SEEK_SET);
    int byte = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(byte ^ 0x40, f);
    fclose(f);
    int before = atomic_load(&warnings);
    CHECK_OK(sy_dataset_cache(m, path, &c));
    CHECK(run(c, v, 64) == 20 && same(v, want, 20) && atomic_load(&mc.calls) == 40, "a corrupt file is rebuilt");
    CHECK(atomic_load(&warnings) == before + 1, "with a warning");
    CHECK(run(c, v, 64) == 20 && atomic_load(&mc.calls) == 40, "the rebuilt file is read");
    sy_dataset_free(c);
    /* a truncated one: the same */
    struct stat sb;
    stat(path, &sb);
    CHECK(truncate(path, sb.st_size - 5) == 0, "truncate");
    CHECK_OK(sy_dataset_cache(m, path, &c));
    CHECK(run(c, v, 64) == 20 && atomic_load(&mc.calls) == 60, "a truncated file is rebuilt");
    stat(path, &sb);
    sy_dataset_free(c);
    /* damaged after it was checked: SY_ERR_CORRUPT names the file */
    CHECK_OK(sy_dataset_cache(m, path, &c));
    CHECK(run(c, v, 64) == 20 && atomic_load(&mc.calls) == 60, "checked and read");
    f = fopen(path, "r+b");
    fseek(f, sb.st_size - 30, SEEK_SET);
    byte = fgetc(f);
    fseek(f, sb.st_size - 30, SEEK_SET);
    fputc(byte ^ 1, f);
    fclose(f);
    struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    utimensat(AT_FDCWD, path, times, 0); /* the same identity: not checked again */
    sy_status st;
    CHECK(run_status(c, v, 64, &st) == -1 && st == SY_ERR_CORRUPT, "damage found while reading");
    CHECK(strstr(sy_last_error(), "cache") && strstr(sy_last_error(), path) && strstr(sy_last_error(), "element 19"),
          "%s", sy_last_error());
    sy_dataset_free(c);
    /* a file that is not a cache is refused and left alone */
    tmp_path(tmp, sizeof tmp, "not-a-cache.txt");
    write_file(tmp, "hello, world\n", 13);
    CHECK_OK(sy_dataset_cache(m, tmp, &c));
    CHECK(run_status(c, v, 64, &st) == -1 && st == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "not a systolic"),
          "%s", sy_last_error());
    stat(tmp, &sb);
    CHECK(sb.st_size == 13, "left as it was");
    sy_dataset_free(c);
    /* another dataset's cache file is refused */
    CHECK_OK(sy_dataset_cache(r, path, &c));
    CHECK(run_status(c, v, 64, &st) == -1 && st == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "another"),
          "%s", sy_last_error());
    sy_dataset_free(c);
    sy_dataset_free(m);
    sy_dataset_free(r);
    sy_set_log(NULL, NULL);
}

/* ---- files ---------------------------------------------------------------------------------------------- */

/* Iterate a string dataset: the elements joined with '|' into out. */
static int64_t strings_of(const sy_dataset *d, char *out, size_t size, sy_status *status) {
    sy_iterator *it;
    sy_status st = sy_dataset_iterator(d, &it);
    int64_t n = 0;
    out[0] = '\0';
    for (bool end = false; !st;) {
        sy_element e = {0};
        st = sy_iterator_next(it, &e, &end);
        if (st || end) break;
        sy_string s = sy_tensor_string(e.c[0], 0);
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%s%.*s", n ? "|" : "", (int)s.size, (const char *)s.data);
        n++;
        sy_element_clear(&e);
    }
    sy_iterator_free(it);
    *status = st;
    return n;
}

static sy_status string_length(void *ctx, const sy_element *in, sy_element *out) {
    (void)ctx;
    return put_i64(out, sy_tensor_string(in->c[0], 0).size);
}

static void test_text_lines(void) {
    char a[600], b[600], z[600], g[600], missing[600], out[512];
    tmp_path(a, sizeof a, "a.txt");
    tmp_path(b, sizeof b, "b.txt");
    tmp_path(z, sizeof z, "c.txt.zz");
    tmp_path(g, sizeof g, "d.txt.gz");
    tmp_path(missing, sizeof missing, "missing.txt");
    const char *text = "one\ntwo\r\n\nthree";
    write_file(a, text, strlen(text));
    write_file(b, "x\n", 2);
    write_compressed(z, text, strlen(text), SY_COMPRESSION_ZLIB);
    write_compressed(g, text, strlen(text), SY_COMPRESSION_GZIP);
    const char *files[] = {a, b};
    sy_dataset *d;
    sy_status st;
    CHECK_OK(sy_dataset_text_lines(files, 2, SY_COMPRESSION_NONE, &d));
    sy_component_spec s = sy_dataset_component_spec(d, 0);
    CHECK(s.dtype == SY_STRING && s.shape.rank == 0 && sy_dataset_cardinality(d) == SY_UNKNOWN, "text spec");
    CHECK(strings_of(d, out, sizeof out, &st) == 5 && !st && strcmp(out, "one|two||three|x") == 0, "lines: %s", out);
    sy_dataset_free(d);
    const char *zf[] = {z}, *gf[] = {g}, *mf[] = {b, missing};
    CHECK_OK(sy_dataset_text_lines(zf, 1, SY_COMPRESSION_ZLIB, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 4 && !st && strcmp(out, "one|two||three") == 0, "zlib: %s", out);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_text_lines(gf, 1, SY_COMPRESSION_GZIP, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 4 && !st && strcmp(out, "one|two||three") == 0, "gzip: %s", out);
    sy_dataset_free(d);
    /* gzip read as zlib: damaged */
    CHECK_OK(sy_dataset_text_lines(gf, 1, SY_COMPRESSION_ZLIB, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 0 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), g), "%s",
          sy_last_error());
    sy_dataset_free(d);
    /* truncated gzip */
    FILE *f = fopen(g, "rb");
    uint8_t buf[256];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_file(g, buf, n - 6);
    CHECK_OK(sy_dataset_text_lines(gf, 1, SY_COMPRESSION_GZIP, &d));
    strings_of(d, out, sizeof out, &st);
    CHECK(st == SY_ERR_CORRUPT && strstr(sy_last_error(), "truncated"), "%s", sy_last_error());
    sy_dataset_free(d);
    /* a missing file fails after the first file's lines, through a parallel map and prefetch */
    CHECK_OK(sy_dataset_text_lines(mf, 2, SY_COMPRESSION_NONE, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 1 && st == SY_ERR_IO && strstr(sy_last_error(), "text_lines") &&
              strstr(sy_last_error(), missing),
          "%s", sy_last_error());
    sy_dataset *p, *lens;
    CHECK_OK(sy_dataset_map(d, string_length, NULL, 3, &i64_scalar, 1, &lens));
    int64_t v[8];
    CHECK(run_status(lens, v, 8, &st) == -1 && st == SY_ERR_IO && strstr(sy_last_error(), "text_lines") &&
              strstr(sy_last_error(), missing),
          "a file's error through a parallel map: %s", sy_last_error());
    sy_dataset_free(lens);
    CHECK_OK(sy_dataset_prefetch(d, 4, &p));
    CHECK(strings_of(p, out, sizeof out, &st) == 1 && st == SY_ERR_IO && strstr(sy_last_error(), missing), "%s",
          sy_last_error());
    sy_dataset_free(p);
    sy_dataset_free(d);
    CHECK_ERR(sy_dataset_text_lines(mf, 2, (sy_compression)7, &d), SY_ERR_INVALID_ARGUMENT, "compression");
}

static void test_fixed_length(void) {
    char p[600], q[600], bad[600], out[512];
    tmp_path(p, sizeof p, "fixed.bin");
    tmp_path(q, sizeof q, "fixed.bin.gz");
    tmp_path(bad, sizeof bad, "fixed-bad.bin");
    const char *body = "HDRaaaaabbbbbcccccFT"; /* header 3, records of 5, footer 2 */
    write_file(p, body, strlen(body));
    write_compressed(q, body, strlen(body), SY_COMPRESSION_GZIP);
    write_file(bad, "HDRaaaaabbbFT", 13);
    const char *files[] = {p, p};
    sy_dataset *d;
    sy_status st;
    CHECK_OK(sy_dataset_fixed_length_records(files, 2, 5, 3, 2, SY_COMPRESSION_NONE, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 6 && !st && strcmp(out, "aaaaa|bbbbb|ccccc|aaaaa|bbbbb|ccccc") == 0,
          "%s", out);
    sy_dataset_free(d);
    const char *gz[] = {q};
    CHECK_OK(sy_dataset_fixed_length_records(gz, 1, 5, 3, 2, SY_COMPRESSION_GZIP, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 3 && !st && strcmp(out, "aaaaa|bbbbb|ccccc") == 0, "gzip: %s", out);
    sy_dataset_free(d);
    const char *bf[] = {p, bad};
    CHECK_OK(sy_dataset_fixed_length_records(bf, 2, 5, 3, 2, SY_COMPRESSION_NONE, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 3 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), bad) &&
              strstr(sy_last_error(), "whole number"),
          "%s", sy_last_error());
    sy_dataset_free(d);
    write_compressed(q, "HDRaaaaabbbFT", 13, SY_COMPRESSION_GZIP);
    CHECK_OK(sy_dataset_fixed_length_records(gz, 1, 5, 3, 2, SY_COMPRESSION_GZIP, &d));
    CHECK(strings_of(d, out, sizeof out, &st) == 1 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), q), "%s",
          sy_last_error());
    sy_dataset_free(d);
    CHECK_ERR(sy_dataset_fixed_length_records(gz, 1, 0, 0, 0, SY_COMPRESSION_NONE, &d), SY_ERR_INVALID_ARGUMENT,
              "fixed_length_records", "record_bytes");
}

static void test_tfrecord(void) {
    /* three files of 2, 3 and 4 records "f<i>r<j>", in each compression */
    const sy_compression comps[] = {SY_COMPRESSION_NONE, SY_COMPRESSION_GZIP};
    for (int k = 0; k < 2; k++) {
        char names[3][600];
        const char *files[3];
        for (int i = 0; i < 3; i++) {
            char name[32];
            snprintf(name, sizeof name, "t%d-%d.tfrecord", k, i);
            tmp_path(names[i], sizeof names[i], name);
            files[i] = names[i];
            sy_tfrecord_writer *w;
            CHECK_OK(sy_tfrecord_writer_open(names[i], comps[k], &w));
            for (int j = 0; j < 2 + i; j++) {
                char rec[16];
                snprintf(rec, sizeof rec, "f%dr%d", i, j);
                CHECK_OK(sy_tfrecord_write(w, rec, strlen(rec)));
            }
            CHECK_OK(sy_tfrecord_writer_close(w));
        }
        sy_tfrecord_options o = sy_tfrecord_options_default();
        o.compression = comps[k];
        sy_dataset *d;
        char out[512];
        sy_status st;
        CHECK_OK(sy_dataset_tfrecord(files, 3, &o, 0, &d));
        CHECK(strings_of(d, out, sizeof out, &st) == 9 && !st &&
                  strcmp(out, "f0r0|f0r1|f1r0|f1r1|f1r2|f2r0|f2r1|f2r2|f2r3") == 0,
              "files in order: %s", out);
        sy_dataset_free(d);
        /* two at a time, a record from each in turn; when the first ends, the
         * cycle moves on to the second, then the third file takes the first's
         * place (tf.data's interleave, cycle_length 2, block_length 1) */
        CHECK_OK(sy_dataset_tfrecord(files, 3, &o, 2, &d));
        sy_component_spec s = sy_dataset_component_spec(d, 0);
        CHECK(s.dtype == SY_STRING && s.shape.rank == 0, "tfrecord spec");
        CHECK(strings_of(d, out, sizeof out, &st) == 9 && !st &&
                  strcmp(out, "f0r0|f1r0|f0r1|f1r1|f1r2|f2r0|f2r1|f2r2|f2r3") == 0,
              "num_parallel_reads 2: %s", out);
        sy_dataset_free(d);
        if (k) continue;
        /* a flipped byte in the second file's data */
        FILE *f = fopen(names[1], "r+b");
        fseek(f, 13, SEEK_SET);
        fputc('X', f);
        fclose(f);
        CHECK_OK(sy_dataset_tfrecord(files, 3, &o, 0, &d));
        CHECK(strings_of(d, out, sizeof out, &st) == 2 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), "tfrecord") &&
                  strstr(sy_last_error(), names[1]),
              "%s", sy_last_error());
        sy_dataset_free(d);
        CHECK_OK(sy_dataset_tfrecord(files, 3, &o, 3, &d));
        CHECK(strings_of(d, out, sizeof out, &st) >= 1 && st == SY_ERR_CORRUPT && strstr(sy_last_error(), names[1]),
              "parallel: %s", sy_last_error());
        sy_dataset_free(d);
    }
}

static void test_list_files(void) {
    char dir[600], pattern[700], out[4096];
    tmp_path(dir, sizeof dir, "shards");
    CHECK(mkdir(dir, 0755) == 0, "mkdir");
    const char *names[] = {"train-00002", "train-00000", "train-00001", "test-00000", "train-00003"};
    for (int i = 0; i < 5; i++) {
        char p[800];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        write_file(p, "x", 1);
    }
    snprintf(pattern, sizeof pattern, "%s/train-*", dir);
    sy_dataset *d;
    sy_status st;
    CHECK_OK(sy_dataset_list_files(pattern, false, 0, &d));
    CHECK(sy_dataset_cardinality(d) == 4, "4 files");
    CHECK(strings_of(d, out, sizeof out, &st) == 4 && !st, "listed");
    char want[4096];
    snprintf(want, sizeof want, "%s/train-00000|%s/train-00001|%s/train-00002|%s/train-00003", dir, dir, dir, dir);
    CHECK(strcmp(out, want) == 0, "sorted: %s", out);
    sy_dataset_free(d);
    char first[4096], again[4096];
    CHECK_OK(sy_dataset_list_files(pattern, true, 3, &d));
    strings_of(d, first, sizeof first, &st);
    sy_dataset_free(d);
    CHECK_OK(sy_dataset_list_files(pattern, true, 3, &d));
    strings_of(d, again, sizeof again, &st);
    CHECK(strcmp(first, again) == 0 && strlen(first) == strlen(want), "shuffled with the seed: %s", first);
    sy_dataset_free(d);
    snprintf(pattern, sizeof pattern, "%s/none-*", dir);
    CHECK_ERR(sy_dataset_list_files(pattern, false, 0, &d), SY_ERR_NOT_FOUND, "list_files", "none-*");
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/systolic-test-dataset-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "test_dataset: cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    test_range();
    test_tensor_sources();
    test_map();
    test_filter();
    test_shuffle();
    test_batch();
    test_counting();
    test_specs();
    test_prefetch();
    test_early_free();
    test_interleave();
    test_cache();
    test_text_lines();
    test_fixed_length();
    test_tfrecord();
    test_list_files();
    nftw(tmp_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_report("test_dataset");
}
