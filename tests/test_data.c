/*
 * test_data.c - the data module: SHA-256 against the standard vectors; the
 * IDX reader on files this test writes (every element type, plain and gzip,
 * and every kind of damage); the NPY reader on files this test writes
 * (every dtype, both byte orders, format versions 1-3, and the refusals);
 * the NPZ reader on archives NumPy wrote (tests/data, made by
 * tools/make_npy_fixtures.py); the fetcher against a temporary
 * $SYSTOLIC_DATASETS, a temporary cache and a small HTTP server this test
 * runs on 127.0.0.1; and, when $SYSTOLIC_DATASETS is set, the real
 * Fashion-MNIST and MNIST through the public API.
 */
#define _GNU_SOURCE /* nftw */
#include "check.h"
#include "data/data_internal.h"
#include "systolic.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- helpers ------------------------------------------------------------------------ */

typedef struct bytes {
    uint8_t p[1 << 15];
    size_t n;
} bytes;

static void put(bytes *b, const void *data, size_t n) {
    SY_ASSERT(b->n + n <= sizeof b->p);
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

/* value as `size` bytes, two's complement (or IEEE bits when is_float), in
 * big- or little-endian order. */
static void put_value(bytes *b, double value, int size, bool is_float, bool big) {
    uint64_t bits;
    if (is_float && size == 4) {
        float f = (float)value;
        uint32_t u;
        memcpy(&u, &f, 4);
        bits = u;
    } else if (is_float) {
        memcpy(&bits, &value, 8);
    } else {
        bits = (uint64_t)(int64_t)value;
    }
    for (int i = 0; i < size; i++) {
        int shift = 8 * (big ? size - 1 - i : i);
        uint8_t byte = (uint8_t)(bits >> shift);
        put(b, &byte, 1);
    }
}

static void check_shape(const sy_tensor *t, sy_shape want, const char *what) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    sy_shape got = sy_tensor_shape(t);
    CHECK(sy_shape_equal(&got, &want), "%s: shape %s, expected %s", what,
          sy_shape_format(&got, a, sizeof a), sy_shape_format(&want, b, sizeof b));
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static char tmp_root[512];

static void tmp_path(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", tmp_root, name);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Entries in dir other than . and .., joined with spaces into out. */
static int list_dir(const char *dir, char *out, size_t size) {
    int count = 0;
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%s%s", count ? " " : "", e->d_name);
        count++;
    }
    closedir(d);
    return count;
}

/* gzip (one member) of in into out. */
static void gzip(const uint8_t *in, size_t n, bytes *out) {
    z_stream s;
    memset(&s, 0, sizeof s);
    SY_ASSERT(deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    s.next_in = (Bytef *)in;
    s.avail_in = (uInt)n;
    s.next_out = out->p + out->n;
    s.avail_out = (uInt)(sizeof out->p - out->n);
    SY_ASSERT(deflate(&s, Z_FINISH) == Z_STREAM_END);
    out->n += s.total_out;
    deflateEnd(&s);
}

static void hex_of(const void *data, size_t n, char hex[65]) {
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, d);
    sha256_hex(d, hex);
}

/* ---- SHA-256 ------------------------------------------------------------------------ */

static void test_sha256(void) {
    char hex[65];
    hex_of("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
          "empty: %s", hex);
    hex_of("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
          "abc: %s", hex);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(two, strlen(two), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0,
          "448 bits: %s", hex);
    /* a million 'a', fed in uneven pieces to exercise the partial-block path */
    static char a[1000000];
    memset(a, 'a', sizeof a);
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    for (size_t done = 0, step = 1; done < sizeof a; done += step, step = step * 3 % 997 + 1)
        sha256_update(&c, a + done, sy_min64((int64_t)step, (int64_t)(sizeof a - done)));
    sha256_final(&c, d);
    sha256_hex(d, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
          "a million a: %s", hex);
    char path[600];
    tmp_path(path, sizeof path, "million-a");
    CHECK(write_file(path, a, sizeof a), "writing %s", path);
    CHECK_OK(sha256_file(path, hex));
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
          "file: %s", hex);
    remove(path);
    CHECK_ERR(sha256_file(path, hex), SY_ERR_IO, path);
}

/* ---- IDX ------------------------------------------------------------------------------ */

typedef struct idx_case {
    uint8_t code;
    int size;
    bool is_float;
    sy_dtype dtype;
    double values[6];
} idx_case;

static const idx_case idx_cases[] = {
    {0x08, 1, false, SY_U8, {0, 1, 2, 127, 200, 255}},
    {0x09, 1, false, SY_I32, {0, 1, -2, 127, -128, 100}},
    {0x0B, 2, false, SY_I32, {0, 1, -2, 32767, -32768, 1000}},
    {0x0C, 4, false, SY_I32, {0, 1, -2, 2147483647, -2147483648.0, 100000}},
    {0x0D, 4, true, SY_F32, {0, 1.5, -2.25, 1e10, -1e-3, 3}},
    {0x0E, 8, true, SY_F64, {0, 1.5, -2.25, 1e300, -1e-300, 3}},
};

/* An IDX file: magic, dims, then `count` elements of c (big-endian). */
static void idx_make(bytes *b, const idx_case *c, int rank, const uint32_t *dims, int count) {
    b->n = 0;
    uint8_t magic[4] = {0, 0, c->code, (uint8_t)rank};
    put(b, magic, 4);
    for (int i = 0; i < rank; i++) put_value(b, dims[i], 4, false, true);
    for (int i = 0; i < count; i++) put_value(b, c->values[i % 6], c->size, c->is_float, true);
}

static void check_values(const sy_tensor *t, const idx_case *c, const char *what) {
    for (int64_t i = 0; i < sy_tensor_count(t); i++) {
        double want =
            c->is_float && c->size == 4 ? (double)(float)c->values[i % 6] : c->values[i % 6];
        CHECK(sy_tensor_get(t, i) == want, "%s: element %lld is %.9g, expected %.9g", what, (long long)i,
              sy_tensor_get(t, i), want);
    }
}

static void test_idx_valid(void) {
    uint32_t dims[2] = {2, 3};
    for (size_t k = 0; k < sizeof idx_cases / sizeof idx_cases[0]; k++) {
        const idx_case *c = &idx_cases[k];
        bytes raw, gz = {.n = 0};
        idx_make(&raw, c, 2, dims, 6);
        gzip(raw.p, raw.n, &gz);
        for (int z = 0; z < 2; z++) {
            char path[600], what[64];
            snprintf(what, sizeof what, "idx type 0x%02x %s", c->code, z ? "gzip" : "raw");
            snprintf(path, sizeof path, "%s/t%02x%s", tmp_root, c->code, z ? ".gz" : "");
            CHECK(write_file(path, z ? gz.p : raw.p, z ? gz.n : raw.n), "writing %s", path);
            sy_tensor *t = NULL;
            CHECK_OK(sy_idx_read(path, &t));
            if (!t) continue;
            CHECK(sy_tensor_dtype(t) == c->dtype, "%s: dtype %s", what,
                  sy_dtype_name(sy_tensor_dtype(t)));
            check_shape(t, sy_shape_of(2, (int64_t)2, (int64_t)3), what);
            check_values(t, c, what);
            sy_tensor_free(t);
            remove(path);
        }
    }
    /* a scalar (rank 0), an empty array, and a body split over two gzip members */
    bytes raw, gz = {.n = 0};
    sy_tensor *t = NULL;
    idx_make(&raw, &idx_cases[0], 0, NULL, 1);
    CHECK_OK(idx_parse(raw.p, raw.n, "scalar", &t));
    if (t) CHECK(sy_tensor_shape(t).rank == 0 && sy_tensor_get(t, 0) == 0, "scalar");
    sy_tensor_free(t);
    uint32_t empty_dims[2] = {0, 5};
    idx_make(&raw, &idx_cases[4], 2, empty_dims, 0);
    CHECK_OK(idx_parse(raw.p, raw.n, "empty", &t));
    if (t) check_shape(t, sy_shape_of(2, (int64_t)0, (int64_t)5), "empty");
    sy_tensor_free(t);
    uint32_t big[3] = {10, 28, 28};
    idx_make(&raw, &idx_cases[0], 3, big, 10 * 28 * 28);
    gzip(raw.p, 1000, &gz);
    gzip(raw.p + 1000, raw.n - 1000, &gz);
    CHECK_OK(idx_parse(gz.p, gz.n, "two members", &t));
    if (t) {
        check_shape(t, sy_shape_of(3, (int64_t)10, (int64_t)28, (int64_t)28), "two members");
        check_values(t, &idx_cases[0], "two members");
    }
    sy_tensor_free(t);
}

static void test_idx_corrupt(void) {
    uint32_t dims[2] = {2, 3};
    bytes raw, gz = {.n = 0}, b;
    idx_make(&raw, &idx_cases[2], 2, dims, 6); /* shorts: 12 header bytes, 12 body bytes */
    gzip(raw.p, raw.n, &gz);
    sy_tensor *t = NULL;

    /* names the file and the offset */
    char path[600];
    tmp_path(path, sizeof path, "bad-magic.idx");
    b = raw;
    b.p[0] = 1;
    CHECK(write_file(path, b.p, b.n), "writing");
    CHECK_ERR(sy_idx_read(path, &t), SY_ERR_CORRUPT, path, "bad magic", "byte 0");
    CHECK(t == NULL, "no tensor on failure");
    remove(path);
    CHECK_ERR(sy_idx_read(path, &t), SY_ERR_IO, path);

    b = raw;
    b.p[2] = 0x0A;
    CHECK_ERR(idx_parse(b.p, b.n, "f", &t), SY_ERR_CORRUPT, "type 0x0a", "byte 2");
    b.p[2] = 0x0B;
    b.p[3] = 9;
    CHECK_ERR(idx_parse(b.p, b.n, "f", &t), SY_ERR_UNSUPPORTED, "rank 9");
    CHECK_ERR(idx_parse(raw.p, 0, "f", &t), SY_ERR_CORRUPT, "truncated IDX header", "byte 0");
    CHECK_ERR(idx_parse(raw.p, 3, "f", &t), SY_ERR_CORRUPT, "truncated IDX header");
    CHECK_ERR(idx_parse(raw.p, 9, "f", &t), SY_ERR_CORRUPT, "truncated IDX header", "byte 9");
    CHECK_ERR(idx_parse(raw.p, raw.n - 1, "f", &t), SY_ERR_CORRUPT, "truncated IDX body",
              "from byte 12", "ends at byte 23", "1 bytes short");
    b = raw;
    put(&b, "x", 1);
    CHECK_ERR(idx_parse(b.p, b.n, "f", &t), SY_ERR_CORRUPT, "trailing bytes", "byte 24");
    /* absurd dims: refused before any allocation (ASan would abort on one) */
    uint32_t huge[3] = {2147483647, 2147483647, 2147483647};
    idx_make(&b, &idx_cases[5], 3, huge, 1);
    CHECK_ERR(idx_parse(b.p, b.n, "f", &t), SY_ERR_CORRUPT, "larger than the file can hold");
    uint32_t big2[2] = {60000, 784};
    idx_make(&b, &idx_cases[0], 2, big2, 100);
    CHECK_ERR(idx_parse(b.p, b.n, "f", &t), SY_ERR_CORRUPT, "truncated IDX body", "47040000");
    bytes bgz = {.n = 0};
    gzip(b.p, b.n, &bgz);
    CHECK_ERR(idx_parse(bgz.p, bgz.n, "f", &t), SY_ERR_CORRUPT, "larger than the file can hold");
    b = raw;
    b.p[4] = 0x80; /* a dimension of 2^31 or more */
    CHECK_ERR(idx_parse(b.p, b.n, "f", &t), SY_ERR_CORRUPT, "dimension 0", "byte 4");

    /* gzip damage */
    CHECK_ERR(idx_parse(gz.p, gz.n - 5, "g", &t), SY_ERR_CORRUPT, "truncated gzip");
    CHECK_ERR(idx_parse(gz.p, gz.n / 2, "g", &t), SY_ERR_CORRUPT, "g:");
    b = gz;
    b.p[b.n - 8] ^= 0xff; /* the CRC-32 */
    CHECK_ERR(idx_parse(b.p, b.n, "g", &t), SY_ERR_CORRUPT, "damaged gzip", "incorrect data check");
    b = gz;
    b.p[3] = 0xe0; /* reserved header flags */
    CHECK_ERR(idx_parse(b.p, b.n, "g", &t), SY_ERR_CORRUPT, "damaged gzip");
    b = gz;
    for (size_t i = 12; i < b.n - 8; i++) b.p[i] ^= 0x55; /* the deflate data */
    CHECK_ERR(idx_parse(b.p, b.n, "g", &t), SY_ERR_CORRUPT, "g:");
    b = gz;
    put(&b, "garbage", 7);
    CHECK_ERR(idx_parse(b.p, b.n, "g", &t), SY_ERR_CORRUPT, "trailing garbage", "7 bytes");
    /* a second member that adds data after the body */
    b = gz;
    gzip((const uint8_t *)"xy", 2, &b);
    CHECK_ERR(idx_parse(b.p, b.n, "g", &t), SY_ERR_CORRUPT, "trailing bytes", "decompressed");
    /* but an empty second member is fine */
    b = gz;
    gzip((const uint8_t *)"", 0, &b);
    CHECK_OK(idx_parse(b.p, b.n, "g", &t));
    sy_tensor_free(t);
    t = NULL;
    bytes short_gz = {.n = 0};
    gzip(raw.p, raw.n - 2, &short_gz);
    CHECK_ERR(idx_parse(short_gz.p, short_gz.n, "g", &t), SY_ERR_CORRUPT, "truncated IDX body",
              "decompressed");
    CHECK(t == NULL, "no tensor on failure");
}

/* ---- NPY ------------------------------------------------------------------------------ */

/* An .npy file of format `major` with the header dict `dict`, padded as
 * numpy pads it, then `data`. */
static size_t npy_pad = 64; /* what the header pads to: 64 as numpy writes it (older numpy: 16) */

static void npy_make(bytes *b, int major, const char *dict, const bytes *data) {
    b->n = 0;
    uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', (uint8_t)major, 0};
    put(b, magic, 8);
    size_t prefix = major == 1 ? 10 : 12, len = strlen(dict) + 1;
    size_t padded = (prefix + len + npy_pad - 1) / npy_pad * npy_pad - prefix;
    put_value(b, (double)padded, major == 1 ? 2 : 4, false, false);
    put(b, dict, strlen(dict));
    for (size_t i = len; i < padded; i++) put(b, " ", 1);
    put(b, "\n", 1);
    if (data) put(b, data->p, data->n);
}

typedef struct npy_case {
    const char *descr;
    sy_dtype dtype;
    double values[6];
} npy_case;

static const npy_case npy_cases[] = {
    {"<f4", SY_F32, {0, 1.5, -2.25, 3, 1e10, -7}},
    {">f4", SY_F32, {0, 1.5, -2.25, 3, 1e10, -7}},
    {"<f8", SY_F64, {0, 1.5, -2.25, 3, 1e300, -7}},
    {">f8", SY_F64, {0, 1.5, -2.25, 3, 1e300, -7}},
    {"<i4", SY_I32, {0, 1, -2, 2147483647, -2147483648.0, 5}},
    {">i4", SY_I32, {0, 1, -2, 2147483647, -2147483648.0, 5}},
    {"|u1", SY_U8, {0, 1, 2, 100, 200, 255}},
    {"|b1", SY_U8, {0, 1, 1, 0, 1, 0}},
    {"<i8", SY_I32, {0, 1, -2, 2147483647, -2147483648.0, 5}},
    {">i8", SY_I32, {0, 1, -2, 2147483647, -2147483648.0, 5}},
    {"<i2", SY_I32, {0, 1, -2, 32767, -32768, 5}},
    {">i2", SY_I32, {0, 1, -2, 32767, -32768, 5}},
    {"|i1", SY_I32, {0, 1, -2, 127, -128, 5}},
    {"<u2", SY_I32, {0, 1, 2, 65535, 300, 5}},
    {">u2", SY_I32, {0, 1, 2, 65535, 300, 5}},
    {"<u4", SY_I32, {0, 1, 2, 2147483647, 300, 5}},
    {">u8", SY_I32, {0, 1, 2, 2147483647, 300, 5}},
};

static void npy_data(bytes *data, const char *descr, const double *values, int count) {
    data->n = 0;
    int size = atoi(descr + 2);
    for (int i = 0; i < count; i++)
        put_value(data, values[i % 6], size, descr[1] == 'f', descr[0] == '>');
}

static void test_npy_valid(void) {
    for (size_t k = 0; k < sizeof npy_cases / sizeof npy_cases[0]; k++) {
        const npy_case *c = &npy_cases[k];
        bytes data, file;
        npy_data(&data, c->descr, c->values, 6);
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }",
                 c->descr);
        npy_make(&file, 1, dict, &data);
        sy_tensor *t = NULL;
        CHECK_OK(npy_parse(file.p, file.n, c->descr, &t));
        if (!t) continue;
        CHECK(sy_tensor_dtype(t) == c->dtype, "%s: dtype %s", c->descr,
              sy_dtype_name(sy_tensor_dtype(t)));
        check_shape(t, sy_shape_of(2, (int64_t)2, (int64_t)3), c->descr);
        for (int i = 0; i < 6; i++) {
            double want = c->descr[1] == 'f' && c->descr[2] == '4' ? (double)(float)c->values[i]
                                                                   : c->values[i];
            CHECK(sy_tensor_get(t, i) == want, "%s[%d]: %.9g, expected %.9g", c->descr, i, sy_tensor_get(t, i), want);
        }
        sy_tensor_free(t);
    }
    /* format versions 2 and 3, from a file */
    bytes data, file;
    npy_data(&data, "<f4", npy_cases[0].values, 6);
    for (int major = 1; major <= 3; major++) {
        npy_make(&file, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", &data);
        char path[600];
        tmp_path(path, sizeof path, "v.npy");
        CHECK(write_file(path, file.p, file.n), "writing %s", path);
        sy_tensor *t = NULL;
        CHECK_OK(sy_npy_read(path, &t));
        if (t) CHECK(sy_tensor_count(t) == 6 && sy_tensor_get(t, 2) == -2.25, "version %d", major);
        sy_tensor_free(t);
        remove(path);
    }
    /* a bool byte other than 0/1 reads as 1; double quotes, Python 2 longs,
     * no trailing comma, other key order; a scalar; a 1-D array in "Fortran" order */
    sy_tensor *t = NULL;
    bytes one = {.n = 0};
    put(&one, "\x07", 1);
    npy_make(&file, 1, "{\"shape\": (1L,), \"fortran_order\": False, \"descr\": \"|b1\"}", &one);
    CHECK_OK(npy_parse(file.p, file.n, "b", &t));
    if (t) CHECK(sy_tensor_get(t, 0) == 1 && sy_tensor_dtype(t) == SY_U8, "bool normalised");
    sy_tensor_free(t);
    npy_data(&data, "<f8", npy_cases[2].values, 1);
    npy_make(&file, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", &data);
    CHECK_OK(npy_parse(file.p, file.n, "scalar", &t));
    if (t) CHECK(sy_tensor_shape(t).rank == 0 && sy_tensor_get(t, 0) == 0, "scalar");
    sy_tensor_free(t);
    npy_data(&data, "<i4", npy_cases[4].values, 3);
    npy_make(&file, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }", &data);
    CHECK_OK(npy_parse(file.p, file.n, "1-D Fortran", &t));
    sy_tensor_free(t);
    npy_make(&file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", NULL);
    CHECK_OK(npy_parse(file.p, file.n, "empty", &t));
    if (t) check_shape(t, sy_shape_of(2, (int64_t)0, (int64_t)3), "empty");
    sy_tensor_free(t);
}

/* A file of 1 MB or more whose elements need no conversion is mapped (sy_tensor_map), or read straight into
 * the tensor where its elements do not start at a multiple of 64 bytes (npy.c's direct read): the same
 * values, the same refusals of a truncated or padded file as the whole-file path, and a file that needs
 * converting (int64) still converted. Writing a mapped tensor leaves the file as it was. */
static void npy_big(const char *name, int major, const char *descr, int64_t count, int elem, long extra,
                    char *path, size_t path_size) {
    bytes head;
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld,), }", descr,
             (long long)count);
    npy_make(&head, major, dict, NULL);
    tmp_path(path, path_size, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "creating %s", path);
    if (!f) return;
    fwrite(head.p, 1, head.n, f);
    for (int64_t i = 0; i < count + (extra > 0 ? extra : 0) / elem + 1; i++) {
        if ((i + 1) * elem > count * elem + extra) break;
        if (elem == 4) {
            float v = (float)i * 0.5f - 7.0f;
            fwrite(&v, 4, 1, f);
        } else {
            int64_t v = i - 3;
            fwrite(&v, 8, 1, f);
        }
    }
    if (extra > 0 && extra % elem) fwrite("zzzzzzz", 1, (size_t)(extra % elem), f);
    fclose(f);
}

static void test_npy_large(void) {
    char path[600];
    sy_tensor *t = NULL;
    const int64_t n = 300000; /* 1.2 MB of float32 */
    for (int major = 1; major <= 2; major++)
        for (int pad = 16; pad <= 64; pad *= 4) { /* data at 128 (mapped), or at 16 x k (read) */
            npy_pad = (size_t)pad;
            npy_big("big.npy", major, "<f4", n, 4, 0, path, sizeof path);
            npy_pad = 64;
            for (int twice = 0; twice < 2; twice++) {
                CHECK_OK(sy_npy_read(path, &t));
                if (t) {
                    float *d = sy_tensor_data(t);
                    CHECK((uintptr_t)d % 64 == 0, "version %d, header padded to %d: the elements 64-byte aligned",
                          major, pad);
                    CHECK(sy_tensor_dtype(t) == SY_F32 && sy_tensor_count(t) == n && d[0] == -7.0f &&
                              d[n - 1] == (float)(n - 1) * 0.5f - 7.0f && d[12345] == 12345 * 0.5f - 7.0f,
                          "version %d, header padded to %d, %s read: %lld float32 values", major, pad,
                          twice ? "second" : "first", (long long)n);
                    d[0] = d[n - 1] = 99.0f; /* the tensor's own: the second read sees the file unchanged */
                }
                sy_tensor_free(t);
                t = NULL;
            }
        }
    npy_big("short.npy", 1, "<f4", n, 4, -1, path, sizeof path); /* its last element missing */
    CHECK_ERR(sy_npy_read(path, &t), SY_ERR_CORRUPT, path, "truncated NPY data", "needs 1200000 bytes");
    npy_big("long.npy", 1, "<f4", n, 4, 2, path, sizeof path); /* two bytes too many */
    CHECK_ERR(sy_npy_read(path, &t), SY_ERR_CORRUPT, path, "2 trailing bytes");
    npy_big("wide.npy", 1, "<i8", 200000, 8, 0, path, sizeof path); /* converted to int32: the whole-file path */
    CHECK_OK(sy_npy_read(path, &t));
    if (t) CHECK(sy_tensor_dtype(t) == SY_I32 && sy_tensor_get(t, 0) == -3 && sy_tensor_get(t, 199999) == 199996,
                 "int64 converted");
    sy_tensor_free(t);
    remove(path);
}

static void test_npy_refused(void) {
    sy_tensor *t = NULL;
    bytes data, file, b;
    npy_data(&data, "<f4", npy_cases[0].values, 6);
    npy_make(&file, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", &data);
    CHECK_ERR(npy_parse(file.p, file.n, "f.npy", &t), SY_ERR_UNSUPPORTED, "f.npy", "Fortran");
    /* dtypes */
    const char *descrs[] = {"|O", "<U5", "<f2", "<c8", "|S3", "<M8[ns]", "|V4", "<i3"};
    for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++) {
        char dict[128], want[32];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (1,), }",
                 descrs[i]);
        snprintf(want, sizeof want, "'%s'", descrs[i]);
        npy_make(&file, 1, dict, &data);
        CHECK_ERR(npy_parse(file.p, file.n, "d.npy", &t), SY_ERR_UNSUPPORTED, "d.npy", want);
    }
    npy_make(&file, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", &data);
    CHECK_ERR(npy_parse(file.p, file.n, "s.npy", &t), SY_ERR_UNSUPPORTED, "structured");
    /* int64 values that do not fit in int32, and a uint64 one */
    double wide[6] = {1, -3, 4294967296.0, 0, 0, 0};
    npy_data(&data, "<i8", wide, 6);
    npy_make(&file, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }", &data);
    CHECK_ERR(npy_parse(file.p, file.n, "w.npy", &t), SY_ERR_UNSUPPORTED, "value 4294967296",
              "index 2", "'<i8'");
    double wide2[6] = {1, 2147483648.0, 0, 0, 0, 0};
    npy_data(&data, "<u4", wide2, 6);
    npy_make(&file, 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (6,), }", &data);
    CHECK_ERR(npy_parse(file.p, file.n, "w.npy", &t), SY_ERR_UNSUPPORTED, "value 2147483648",
              "index 1");
    b = file;
    b.p[6] = 4;
    CHECK_ERR(npy_parse(b.p, b.n, "v.npy", &t), SY_ERR_UNSUPPORTED, "version 4.0");
    CHECK(t == NULL, "no tensor on failure");
}

static void test_npy_corrupt(void) {
    sy_tensor *t = NULL;
    bytes data, file, b;
    npy_data(&data, "<f4", npy_cases[0].values, 6);
    npy_make(&file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &data);
    char path[600];
    tmp_path(path, sizeof path, "bad.npy");
    b = file;
    b.p[1] = 'X';
    CHECK(write_file(path, b.p, b.n), "writing %s", path);
    CHECK_ERR(sy_npy_read(path, &t), SY_ERR_CORRUPT, path, "bad magic", "byte 0");
    remove(path);
    CHECK_ERR(npy_parse(file.p, 7, "n", &t), SY_ERR_CORRUPT, "n:");
    CHECK_ERR(npy_parse(file.p, 9, "n", &t), SY_ERR_CORRUPT, "truncated NPY header");
    CHECK_ERR(npy_parse(file.p, 40, "n", &t), SY_ERR_CORRUPT, "truncated NPY header",
              "from byte 10");
    CHECK_ERR(npy_parse(file.p, file.n - 1, "n", &t), SY_ERR_CORRUPT, "truncated NPY data",
              "needs 24 bytes", "from byte 128", "byte 151");
    b = file;
    put(&b, "zz", 2);
    CHECK_ERR(npy_parse(b.p, b.n, "n", &t), SY_ERR_CORRUPT, "2 trailing bytes", "byte 152");
    /* header syntax: each names the byte where it went wrong */
    struct {
        const char *dict, *needle;
    } bad[] = {
        {"'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "expected '{'"},
        {"{'descr': '<f4', 'fortran_order': False, }", "no 'shape' key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", "unexpected key 'x'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
         "repeated key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3), }", "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "a dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", "'('"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }", "bad NPY header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", "only spaces"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", "',' or '}'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
         "below 2^63"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
         "more than 8 dimensions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        npy_make(&b, 1, bad[i].dict, &data);
        sy_status want = strstr(bad[i].needle, "more than 8") ? SY_ERR_UNSUPPORTED : SY_ERR_CORRUPT;
        CHECK_ERR(npy_parse(b.p, b.n, "h.npy", &t), want, bad[i].needle, "byte");
    }
    /* a shape of exabytes: refused before allocating */
    npy_make(&b, 1,
             "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 65536), }",
             &data);
    CHECK_ERR(npy_parse(b.p, b.n, "h.npy", &t), SY_ERR_CORRUPT, "truncated NPY data", "or more");
    npy_make(&b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000), }", &data);
    CHECK_ERR(npy_parse(b.p, b.n, "h.npy", &t), SY_ERR_CORRUPT, "needs 80000000000 bytes");
    CHECK(t == NULL, "no tensor on failure");
}

/* ---- NPZ (written by NumPy: tools/make_npy_fixtures.py) ---------------------------------- */

static char data_dir[512];
static char real_datasets[1024]; /* $SYSTOLIC_DATASETS as the test found it; "" if unset */

static sy_tensor *npz_array(const sy_npz *z, const char *name, sy_dtype dtype, sy_shape shape) {
    sy_tensor *t = NULL;
    sy_status st = sy_npz_get(z, name, &t);
    CHECK(st == SY_OK, "array '%s': %s", name, sy_last_error());
    if (!t) return NULL;
    CHECK(sy_tensor_dtype(t) == dtype, "%s: dtype %s", name, sy_dtype_name(sy_tensor_dtype(t)));
    check_shape(t, shape, name);
    return t;
}

static void check_fixture(const char *file, bool all) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", data_dir, file);
    sy_npz *z = NULL;
    CHECK_OK(sy_npz_open(path, &z));
    if (!z) return;
    CHECK(sy_npz_count(z) == (all ? 15 : 2), "%s: %d arrays", file, sy_npz_count(z));
    CHECK(sy_npz_name(z, 0) && strcmp(sy_npz_name(z, 0), "x_f32") == 0, "first name %s",
          sy_npz_name(z, 0));
    CHECK(sy_npz_name(z, -1) == NULL && sy_npz_name(z, 99) == NULL, "out of range names");
    sy_tensor *t =
        npz_array(z, "x_f32", SY_F32, sy_shape_of(3, (int64_t)2, (int64_t)3, (int64_t)4));
    for (int i = 0; t && i < 24; i++)
        CHECK(sy_tensor_get(t, i) == i / 4.0 - 1, "%s x_f32[%d] = %g", file, i, sy_tensor_get(t, i));
    sy_tensor_free(t);
    t = npz_array(z, "big", SY_U8, sy_shape_of(1, (int64_t)10000));
    for (int i = 0; t && i < 10000; i++)
        if (sy_tensor_get(t, i) != i % 10) {
            CHECK(false, "%s big[%d] = %g", file, i, sy_tensor_get(t, i));
            break;
        }
    sy_tensor_free(t);
    if (all) {
        t = npz_array(z, "x_f64", SY_F64, sy_shape_of(1, (int64_t)5));
        for (int i = 0; t && i < 5; i++)
            CHECK(sy_tensor_get(t, i) == -1 + 0.5 * i, "x_f64[%d] = %g", i, sy_tensor_get(t, i));
        sy_tensor_free(t);
        static const double y_i32[] = {3, -7, 2147483647, -2147483648.0};
        t = npz_array(z, "y_i32", SY_I32, sy_shape_of(1, (int64_t)4));
        for (int i = 0; t && i < 4; i++) CHECK(sy_tensor_get(t, i) == y_i32[i], "y_i32[%d] = %g", i, sy_tensor_get(t, i));
        sy_tensor_free(t);
        t = npz_array(z, "y_u8", SY_U8, sy_shape_of(2, (int64_t)16, (int64_t)16));
        for (int i = 0; t && i < 256; i++) CHECK(sy_tensor_get(t, i) == i, "y_u8[%d] = %g", i, sy_tensor_get(t, i));
        sy_tensor_free(t);
        t = npz_array(z, "mask", SY_U8, sy_shape_of(1, (int64_t)3));
        if (t) CHECK(sy_tensor_get(t, 0) == 1 && sy_tensor_get(t, 1) == 0 && sy_tensor_get(t, 2) == 1, "mask");
        sy_tensor_free(t);
        t = npz_array(z, "i64", SY_I32, sy_shape_of(1, (int64_t)4));
        static const double i64[] = {-5, 0, 2147483647, -2147483648.0};
        for (int i = 0; t && i < 4; i++) CHECK(sy_tensor_get(t, i) == i64[i], "i64[%d] = %g", i, sy_tensor_get(t, i));
        sy_tensor_free(t);
        t = npz_array(z, "i16_be", SY_I32, sy_shape_of(1, (int64_t)6));
        for (int i = 0; t && i < 6; i++) CHECK(sy_tensor_get(t, i) == i - 3, "i16_be[%d] = %g", i, sy_tensor_get(t, i));
        sy_tensor_free(t);
        t = npz_array(z, "u16", SY_I32, sy_shape_of(1, (int64_t)3));
        if (t) CHECK(sy_tensor_get(t, 0) == 0 && sy_tensor_get(t, 1) == 1 && sy_tensor_get(t, 2) == 65535, "u16");
        sy_tensor_free(t);
        t = npz_array(z, "i8", SY_I32, sy_shape_of(1, (int64_t)4));
        if (t) CHECK(sy_tensor_get(t, 0) == -128 && sy_tensor_get(t, 1) == -1 && sy_tensor_get(t, 3) == 127, "i8");
        sy_tensor_free(t);
        t = npz_array(z, "f32_be", SY_F32, sy_shape_of(1, (int64_t)2));
        if (t) CHECK(sy_tensor_get(t, 0) == 1.5 && sy_tensor_get(t, 1) == -2.25, "f32_be");
        sy_tensor_free(t);
        t = npz_array(z, "scalar", SY_F32, sy_shape_of(0));
        if (t) CHECK(sy_tensor_get(t, 0) == 2.5, "scalar");
        sy_tensor_free(t);
        t = npz_array(z, "empty", SY_F32, sy_shape_of(2, (int64_t)0, (int64_t)3));
        sy_tensor_free(t);
        t = NULL;
        CHECK_ERR(sy_npz_get(z, "i64_big", &t), SY_ERR_UNSUPPORTED, "value 1099511627776",
                  "i64_big");
        CHECK_ERR(sy_npz_get(z, "fortran", &t), SY_ERR_UNSUPPORTED, "Fortran", path);
        CHECK(t == NULL, "no tensor on failure");
    }
    t = NULL;
    CHECK_ERR(sy_npz_get(z, "nope", &t), SY_ERR_NOT_FOUND, "'nope'", "'x_f32'", "'big'", path);
    sy_npz_close(z);
}

static void test_npz(void) {
    check_fixture("arrays.npz", true);
    check_fixture("arrays_compressed.npz", true);
    check_fixture("zip64.npz", false);
    sy_npz_close(NULL);
    CHECK(sy_npz_count(NULL) == 0, "count of NULL");

    /* damage: each from an archive read into memory */
    char path[700];
    snprintf(path, sizeof path, "%s/arrays_compressed.npz", data_dir);
    uint8_t *buf = NULL;
    size_t n = 0;
    CHECK_OK(io_read_file(path, &buf, &n));
    if (!buf) return;
    sy_npz *z = NULL;
    sy_tensor *t = NULL;
    CHECK_ERR(npz_parse(buf, n - 30, "cut.npz", &z), SY_ERR_CORRUPT, "cut.npz",
              "end-of-central-directory");
    CHECK_ERR(npz_parse(buf, 10, "tiny.npz", &z), SY_ERR_CORRUPT, "too short");
    CHECK_ERR(npz_parse(buf, n / 2, "half.npz", &z), SY_ERR_CORRUPT, "half.npz");
    CHECK(z == NULL, "no archive on failure");
    uint8_t *copy = malloc(n);
    /* the central directory pointing past the end */
    memcpy(copy, buf, n);
    for (size_t p = n - 22;; p--)
        if (io_le32(copy + p) == 0x06054b50u) {
            copy[p + 19] = 0x7f;
            break;
        }
    CHECK_ERR(npz_parse(copy, n, "cd.npz", &z), SY_ERR_CORRUPT, "central directory", "byte");
    /* a deflated member with damaged data, then one with a wrong CRC */
    memcpy(copy, buf, n);
    CHECK_OK(npz_parse(copy, n, "d.npz", &z));
    if (z) {
        /* the first member's data: after its 30-byte local header, name and extra field */
        size_t first = 30 + io_le16(copy + 26) + io_le16(copy + 28);
        for (size_t i = first + 2; i < first + 40; i++) copy[i] ^= 0xa5;
        CHECK_ERR(sy_npz_get(z, "x_f32", &t), SY_ERR_CORRUPT, "d.npz, array 'x_f32'");
        sy_npz_close(z);
    }
    memcpy(copy, buf, n);
    for (size_t p = 0; p + 4 < n; p++)
        if (io_le32(copy + p) == 0x02014b50u) {
            copy[p + 16] ^= 1;
            break;
        }
    CHECK_OK(npz_parse(copy, n, "c.npz", &z));
    if (z) {
        CHECK_ERR(sy_npz_get(z, "x_f32", &t), SY_ERR_CORRUPT, "CRC-32");
        sy_npz_close(z);
    }
    free(copy);
    sy_free(buf);
    CHECK_ERR(sy_npz_open("/nonexistent/x.npz", &z), SY_ERR_IO, "/nonexistent/x.npz");
    CHECK(t == NULL && z == NULL, "nothing on failure");
}

/* issue 17: sy_npz_write's archive read back, as np.load reads it (the
 * interop test cli_multiio_keras checks numpy itself) */
static void test_npz_write(void) {
    char path[700], files[800];
    tmp_path(path, sizeof path, "out.npz");
    sy_tensor *a = NULL, *b = NULL, *back = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)3, (int64_t)2), &a));
    CHECK_OK(sy_tensor_new(SY_I64, sy_shape_of(1, (int64_t)5), &b));
    if (!a || !b) return;
    for (int i = 0; i < 6; i++) ((float *)sy_tensor_data(a))[i] = (float)i * 0.25f - 1;
    for (int i = 0; i < 5; i++) ((int64_t *)sy_tensor_data(b))[i] = (int64_t)i * -3000000000LL;
    const char *names[] = {"cls", "reg"};
    const sy_tensor *arrays[] = {a, b};
    CHECK_OK(sy_npz_write(path, names, arrays, 2));
    sy_npz *z = NULL;
    CHECK_OK(sy_npz_open(path, &z));
    if (z) {
        CHECK(sy_npz_count(z) == 2 && !strcmp(sy_npz_name(z, 0), "cls") &&
                  !strcmp(sy_npz_name(z, 1), "reg"),
              "npz_write: two members, in order, named");
        CHECK_OK(sy_npz_get(z, "cls", &back));
        if (back) {
            check_shape(back, sy_shape_of(2, (int64_t)3, (int64_t)2), "npz_write cls");
            CHECK(sy_tensor_dtype(back) == SY_F32 &&
                      !memcmp(sy_tensor_data(back), sy_tensor_data(a), 6 * sizeof(float)),
                  "npz_write: the float32 values back");
            sy_tensor_free(back);
            back = NULL;
        }
        /* int64 reads back as int32 where every value fits; these do not, and say so */
        CHECK_ERR(sy_npz_get(z, "reg", &back), SY_ERR_UNSUPPORTED, "reg");
        sy_npz_close(z);
    }
    /* refused before anything is written: the file already there stays */
    const char *twice[] = {"x", "x"};
    CHECK_ERR(sy_npz_write(path, twice, arrays, 2), SY_ERR_INVALID_ARGUMENT,
              "two arrays are named 'x'");
    const char *empty[] = {""};
    CHECK_ERR(sy_npz_write(path, empty, arrays, 1), SY_ERR_INVALID_ARGUMENT,
              "array 0 needs a name");
    CHECK_OK(sy_npz_open(path, &z));
    CHECK(z && sy_npz_count(z) == 2, "a refused write keeps the archive there");
    sy_npz_close(z);
    tmp_path(files, sizeof files, "no/such/dir/out.npz");
    CHECK_ERR(sy_npz_write(files, names, arrays, 2), SY_ERR_IO, "no/such/dir/out.npz");
    remove(path);
    sy_tensor_free(a);
    sy_tensor_free(b);
}

/* ---- a small HTTP server on 127.0.0.1 ---------------------------------------------- */

typedef struct route {
    const char *path;
    const uint8_t *body;
    size_t size;
} route;

typedef struct server {
    int fd, port;
    pthread_t thread;
    atomic_bool stop;
    atomic_int requests;
    const route *routes;
    int route_count;
    const char *zoo_root; /* the real datasets, served under /zoo/ (NULL: none) */
} server;

static void send_all(int fd, const void *data, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = send(fd, (const char *)data + done, n - done, MSG_NOSIGNAL);
        if (w <= 0) return;
        done += (size_t)w;
    }
}

static void respond(int fd, int code, const uint8_t *body, size_t size) {
    char head[160];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %d %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", code,
                     code == 200 ? "OK" : "Not Found", size);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, size);
}

static void handle(server *s, int fd) {
    char req[4096] = "";
    size_t n = 0;
    while (n < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
        ssize_t r = recv(fd, req + n, sizeof req - 1 - n, 0);
        if (r <= 0) return;
        n += (size_t)r;
        req[n] = '\0';
    }
    char path[1024] = "";
    if (sscanf(req, "GET %1023s", path) != 1) return;
    atomic_fetch_add(&s->requests, 1);
    for (int i = 0; i < s->route_count; i++)
        if (strcmp(path, s->routes[i].path) == 0) {
            respond(fd, 200, s->routes[i].body, s->routes[i].size);
            return;
        }
    if (s->zoo_root && strncmp(path, "/zoo/", 5) == 0 && !strstr(path, "..")) {
        /* /zoo/fashion_mnist/F is <zoo_root>/fashion-mnist/F, as the shared directory spells it */
        char rel[1024], file[2048];
        snprintf(rel, sizeof rel, "%s", path + 5);
        char *slash = strchr(rel, '/');
        for (char *c = rel; slash && c < slash; c++)
            if (*c == '_') *c = '-';
        snprintf(file, sizeof file, "%s/%s", s->zoo_root, rel);
        uint8_t *body = NULL;
        size_t size = 0;
        if (io_read_file(file, &body, &size) == SY_OK) {
            respond(fd, 200, body, size);
            sy_free(body);
            return;
        }
    }
    respond(fd, 404, (const uint8_t *)"not found\n", 10);
}

static void *serve(void *arg) {
    server *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) continue;
        handle(s, c);
        close(c);
    }
    return NULL;
}

/* A listening socket on 127.0.0.1 with an ephemeral port. */
static int listen_local(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static bool server_start(server *s) {
    if ((s->fd = listen_local(&s->port)) < 0) return false;
    return pthread_create(&s->thread, NULL, serve, s) == 0;
}

static void server_stop(server *s) {
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    close(s->fd);
}

/* ---- fetch ------------------------------------------------------------------------------ */

static char log_text[4096];

static void capture_log(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level < SY_LOG_INFO) return;
    size_t len = strlen(log_text);
    snprintf(log_text + len, sizeof log_text - len, "%s\n", message);
}

static uint8_t good_body[3000], bad_body[3000];

static void test_fetch(void) {
    for (size_t i = 0; i < sizeof good_body; i++) {
        good_body[i] = (uint8_t)(i * 7 + 1);
        bad_body[i] = (uint8_t)(i * 7 + 2);
    }
    char good_hex[65];
    hex_of(good_body, sizeof good_body, good_hex);

    /* $SYSTOLIC_DATASETS with the dataset spelled with a dash, and a cache */
    char datasets[600], dir[700], cache[600], cache_dir[800], path[1024], file[1024], listing[1024];
    tmp_path(datasets, sizeof datasets, "datasets");
    tmp_path(cache, sizeof cache, "cache");
    snprintf(dir, sizeof dir, "%s/my-set", datasets);
    snprintf(cache_dir, sizeof cache_dir, "%s/datasets/my_set", cache);
    mkdir(datasets, 0755);
    mkdir(dir, 0755);
    snprintf(file, sizeof file, "%s/local.bin", dir);
    CHECK(write_file(file, good_body, sizeof good_body), "writing %s", file);
    snprintf(file, sizeof file, "%s/damaged.bin", dir);
    CHECK(write_file(file, bad_body, sizeof bad_body), "writing %s", file);
    setenv("SYSTOLIC_DATASETS", datasets, 1);
    setenv("SYSTOLIC_CACHE_DIR", cache, 1);
    unsetenv("SYSTOLIC_DATASETS_MIRROR");
    setenv("no_proxy", "127.0.0.1,localhost", 1);
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);

    server s;
    memset(&s, 0, sizeof s);
    route routes[] = {
        {"/files/remote.bin", good_body, sizeof good_body},
        {"/files/wrong.bin", bad_body, sizeof bad_body},
        {"/files/toolong.bin", good_body, sizeof good_body},
        {"/mirror/my_set/mirrored.bin", good_body, sizeof good_body},
    };
    s.routes = routes;
    s.route_count = 4;
    s.zoo_root = real_datasets[0] ? real_datasets : NULL;
    if (!server_start(&s)) {
        CHECK(false, "cannot start the test's HTTP server: %s", strerror(errno));
        return;
    }
    int dead_port = 0, dead = listen_local(&dead_port);
    close(dead); /* nobody listens there now */
    char dead_url[64], live_url[64];
    snprintf(dead_url, sizeof dead_url, "http://127.0.0.1:%d/files/", dead_port);
    snprintf(live_url, sizeof live_url, "http://127.0.0.1:%d/files/", s.port);
    const char *urls[] = {dead_url, live_url, NULL};
    sy_set_log(capture_log, NULL);

    /* found in $SYSTOLIC_DATASETS: no request */
    data_file_spec spec = {"my_set", "local.bin", good_hex, sizeof good_body, urls, NULL};
    CHECK_OK(data_fetch(&spec, path, sizeof path));
    snprintf(file, sizeof file, "%s/local.bin", dir);
    CHECK(strcmp(path, file) == 0, "found at %s", path);
    CHECK(atomic_load(&s.requests) == 0, "no download for a local file");
    CHECK_ERR(data_fetch(&spec, path, 8), SY_ERR_INVALID_ARGUMENT, "does not fit");

    /* damaged in $SYSTOLIC_DATASETS: an error, and the file stays */
    spec.file = "damaged.bin";
    snprintf(file, sizeof file, "%s/damaged.bin", dir);
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_CORRUPT, file, "wrong SHA-256", good_hex,
              "never changes", "replace it");
    struct stat sb;
    CHECK(stat(file, &sb) == 0, "a file in $SYSTOLIC_DATASETS is never deleted");

    /* downloaded: the dead mirror first, then the live one; then from the cache */
    spec.file = "remote.bin";
    CHECK_OK(data_fetch(&spec, path, sizeof path));
    snprintf(file, sizeof file, "%s/remote.bin", cache_dir);
    CHECK(strcmp(path, file) == 0, "downloaded to %s", path);
    uint8_t *got = NULL;
    size_t n = 0;
    CHECK_OK(io_read_file(file, &got, &n));
    CHECK(got && n == sizeof good_body && memcmp(got, good_body, n) == 0,
          "the cached file is the served one");
    sy_free(got);
    CHECK(strstr(log_text, "Downloading data from http://127.0.0.1:") &&
              strstr(log_text, "/files/remote.bin"),
          "log: %s", log_text);
    int before = atomic_load(&s.requests);
    CHECK(before == 1, "%d requests", before);
    CHECK_OK(data_fetch(&spec, path, sizeof path));
    CHECK(atomic_load(&s.requests) == before, "the second call uses the cache");
    CHECK(list_dir(cache_dir, listing, sizeof listing) == 1, "cache holds: %s", listing);

    /* a served file with the wrong checksum: discarded, nothing left */
    spec.file = "wrong.bin";
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_CORRUPT, "my_set/wrong.bin",
              "/files/wrong.bin", "discarded", good_hex, dead_url);
    CHECK(list_dir(cache_dir, listing, sizeof listing) == 1, "nothing left behind: %s", listing);

    /* more bytes than the file has: stopped */
    spec.file = "toolong.bin";
    spec.size = 100;
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_IO, "more than the file's 100 bytes");
    spec.size = sizeof good_body;
    CHECK(list_dir(cache_dir, listing, sizeof listing) == 1, "nothing left behind: %s", listing);

    /* 404 everywhere: what was searched, tried, and how to fix it */
    spec.file = "missing.bin";
    snprintf(file, sizeof file, "%s/missing.bin", cache_dir);
    char in_datasets[1024];
    snprintf(in_datasets, sizeof in_datasets, "%s/my-set/missing.bin", datasets);
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_IO, "my_set/missing.bin: not found",
              in_datasets, file, "404", dead_url, "onnect",
              "set SYSTOLIC_DATASETS to a directory holding my_set/missing.bin", "place it at");
    CHECK(list_dir(cache_dir, listing, sizeof listing) == 1, "nothing left behind: %s", listing);

    /* a damaged cache file: reported with what to do, and kept */
    snprintf(file, sizeof file, "%s/cached.bin", cache_dir);
    CHECK(write_file(file, bad_body, 100), "writing %s", file);
    spec.file = "cached.bin";
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_CORRUPT, file, "wrong SHA-256",
              "delete it to download it again", "100 bytes");
    CHECK(stat(file, &sb) == 0, "the damaged cache file is the user's to delete");
    remove(file);

    /* $SYSTOLIC_DATASETS_MIRROR replaces the list: <mirror>/<dataset>/<file> */
    char mirror[96];
    snprintf(mirror, sizeof mirror, "http://127.0.0.1:%d/mirror/", s.port);
    setenv("SYSTOLIC_DATASETS_MIRROR", mirror, 1);
    const char *only_dead[] = {dead_url, NULL};
    spec.urls = only_dead;
    spec.file = "mirrored.bin";
    CHECK_OK(data_fetch(&spec, path, sizeof path));
    CHECK(strstr(path, "my_set/mirrored.bin") != NULL, "mirrored to %s", path);
    spec.file = "absent.bin";
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_IO, "SYSTOLIC_DATASETS_MIRROR",
              "/mirror/my_set/absent.bin");

    /* the zoo's own files through a mirror, when the real ones are at hand */
    if (s.zoo_root) {
        unsetenv("SYSTOLIC_DATASETS");
        snprintf(mirror, sizeof mirror, "http://127.0.0.1:%d/zoo", s.port);
        setenv("SYSTOLIC_DATASETS_MIRROR", mirror, 1);
        CHECK_OK(sy_dataset_file("mnist", "t10k-labels-idx1-ubyte.gz", path, sizeof path));
        snprintf(file, sizeof file, "%s/datasets/mnist/t10k-labels-idx1-ubyte.gz", cache);
        CHECK(strcmp(path, file) == 0, "zoo file at %s", path);
        sy_tensor *t = NULL;
        CHECK_OK(sy_idx_read(path, &t));
        if (t)
            CHECK(sy_tensor_count(t) == 10000 && sy_tensor_get(t, 0) == 7 && sy_tensor_get(t, 1) == 2 && sy_tensor_get(t, 2) == 1,
                  "mnist t10k labels");
        sy_tensor_free(t);
    }
    unsetenv("SYSTOLIC_DATASETS_MIRROR");
    sy_set_log(NULL, NULL);
    server_stop(&s);

    /* no cache directory at all: said, with what to set */
    char home[1024];
    snprintf(home, sizeof home, "%s", getenv("HOME") ? getenv("HOME") : "");
    unsetenv("SYSTOLIC_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    spec.file = "nowhere.bin";
    CHECK_ERR(data_fetch(&spec, path, sizeof path), SY_ERR_IO, "my_set/nowhere.bin", "nowhere to download",
              "set SYSTOLIC_CACHE_DIR");
    if (home[0]) setenv("HOME", home, 1);
    setenv("SYSTOLIC_CACHE_DIR", cache, 1);

    /* the zoo's names */
    CHECK_ERR(sy_dataset_file("cifar11", "x", path, sizeof path), SY_ERR_NOT_FOUND, "'cifar11'",
              "fashion_mnist, mnist");
    CHECK_ERR(sy_dataset_file("fashion-mnist", "x.gz", path, sizeof path), SY_ERR_NOT_FOUND,
              "'x.gz'", "train-images-idx3-ubyte.gz");
}

/* ---- the real datasets ----------------------------------------------------------------- */

static void check_real(const char *name, sy_status (*load)(sy_data_split *), const int *train_first,
                       const int *test_first, const int64_t *train_counts, uint64_t x_train_sum) {
    sy_data_split d;
    sy_status st = load(&d);
    CHECK(st == SY_OK, "%s: %s", name, sy_last_error());
    if (st) {
        CHECK(!d.x_train && !d.y_train && !d.x_test && !d.y_test, "%s: all NULL on failure", name);
        return;
    }
    check_shape(d.x_train, sy_shape_of(3, (int64_t)60000, (int64_t)28, (int64_t)28), name);
    check_shape(d.y_train, sy_shape_of(1, (int64_t)60000), name);
    check_shape(d.x_test, sy_shape_of(3, (int64_t)10000, (int64_t)28, (int64_t)28), name);
    check_shape(d.y_test, sy_shape_of(1, (int64_t)10000), name);
    CHECK(sy_tensor_dtype(d.x_train) == SY_U8 && sy_tensor_dtype(d.y_test) == SY_U8, "%s: uint8",
          name);
    const uint8_t *y = sy_tensor_data(d.y_train), *yt = sy_tensor_data(d.y_test),
                  *x = sy_tensor_data(d.x_train);
    for (int i = 0; i < 4; i++)
        CHECK(y[i] == train_first[i], "%s y_train[%d] = %d, expected %d", name, i, y[i],
              train_first[i]);
    for (int i = 0; i < 3; i++)
        CHECK(yt[i] == test_first[i], "%s y_test[%d] = %d, expected %d", name, i, yt[i],
              test_first[i]);
    int64_t counts[10] = {0};
    for (int i = 0; i < 60000; i++) counts[y[i] < 10 ? y[i] : 0]++;
    for (int c = 0; c < 10; c++)
        CHECK(counts[c] == train_counts[c], "%s: %lld of class %d", name, (long long)counts[c], c);
    uint64_t sum = 0;
    for (size_t i = 0; i < sy_tensor_bytes(d.x_train); i++) sum += x[i];
    CHECK(sum == x_train_sum, "%s: pixel sum %llu, expected %llu", name, (unsigned long long)sum,
          (unsigned long long)x_train_sum);
    sy_data_split_free(&d);
    CHECK(!d.x_train && !d.y_test, "freed members are NULL");
    sy_data_split_free(&d);
    sy_data_split_free(NULL);
}

static void test_real(void) {
    /* verified with NumPy: labels and pixel sums of the official files */
    static const int f_train[] = {9, 0, 0, 3}, f_test[] = {9, 2, 1}, m_train[] = {5, 0, 4, 1},
                     m_test[] = {7, 2, 1};
    static const int64_t f_counts[] = {6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000};
    static const int64_t m_counts[] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    check_real("fashion_mnist", sy_fashion_mnist_load_data, f_train, f_test, f_counts,
               3431114169ull);
    check_real("mnist", sy_mnist_load_data, m_train, m_test, m_counts, 1567298545ull);
    char path[4096];
    CHECK_OK(sy_dataset_file("fashion_mnist", "train-labels-idx1-ubyte.gz", path, sizeof path));
    CHECK(strstr(path, "fashion-mnist/train-labels-idx1-ubyte.gz") != NULL,
          "the dashed directory: %s", path);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/systolic-test-data-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "test_data: cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    /* tests/data beside this source file (CMake compiles it by its full path) */
    const char *env_dir = getenv("SY_TEST_DATA_DIR");
    if (env_dir) {
        snprintf(data_dir, sizeof data_dir, "%s", env_dir);
    } else {
        snprintf(data_dir, sizeof data_dir, "%s", __FILE__);
        char *slash = strrchr(data_dir, '/');
        snprintf(slash ? slash + 1 : data_dir,
                 sizeof data_dir - (size_t)(slash ? slash + 1 - data_dir : 0), "data");
    }
    const char *real = getenv("SYSTOLIC_DATASETS");
    snprintf(real_datasets, sizeof real_datasets, "%s", real ? real : "");

    test_sha256();
    test_idx_valid();
    test_idx_corrupt();
    test_npy_valid();
    test_npy_refused();
    test_npy_corrupt();
    test_npy_large();
    test_npz();
    test_npz_write();
    test_fetch();
    if (real_datasets[0]) {
        setenv("SYSTOLIC_DATASETS", real_datasets, 1);
        test_real();
    } else {
        fprintf(
            stderr,
            "test_data: SYSTOLIC_DATASETS is not set: skipping the real Fashion-MNIST and MNIST\n");
    }
    nftw(tmp_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return check_report("test_data");
}
