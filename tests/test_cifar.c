/*
 * test_cifar.c - CIFAR-10 (src/data/cifar.c): the binary batches read into
 * Keras's arrays from archives this test writes with the exact record layout
 * (1 label byte, then the red, green and blue planes, each 32 x 32
 * row-major; every value a formula of its batch, record, channel, row and
 * column) and from one Python's tarfile wrote (tests/data/cifar_tiny.tar.gz,
 * with what Keras's own load_data steps make of it beside it,
 * tools/make_cifar_fixtures.py); every kind of damage; a full-size archive
 * (10,000 records a batch) found in $SYSTOLIC_DATASETS and verified by the
 * fetcher with its checksum, then loaded, as sy_cifar10_load_data does; the
 * zoo's entry (its checksum, its URL, the not-found message); and, when
 * $SYSTOLIC_DATASETS holds cifar10/cifar-10-binary.tar.gz, the real data.
 */
#define _GNU_SOURCE /* nftw, in files.h */
#include "check.h"
#include "data/data_internal.h"
#include "files.h"
#include "systolic.h"

#include <limits.h>
#include <sys/stat.h>

#define RECORD 3073
#define TRAIN  5 /* training batches */

static const char *const batches[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                       "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
static const char bin_dir[] = "cifar-10-batches-bin/";

/* The published archive's SHA-256 (the zoo's). */
static const char published_sha256[] =
    "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd";

/* ---- records and archives ---------------------------------------------------------------- */

/* Batch b's record i: its label, and the byte of channel c at (h, w). The
 * coefficients differ, so any mix-up of channel, row and column shows. */
static uint8_t label_of(int b, int64_t i) {
    return (uint8_t)((b * 3 + i * 7) % 10);
}
static uint8_t pixel_of(int b, int64_t i, int c, int h, int w) {
    return (uint8_t)(b * 37 + i * 11 + c * 85 + h * 7 + w * 3);
}

/* One record as the binary version lays it out. */
static void make_record(uint8_t rec[RECORD], int b, int64_t i) {
    rec[0] = label_of(b, i);
    for (int c = 0; c < 3; c++)
        for (int h = 0; h < 32; h++)
            for (int w = 0; w < 32; w++) rec[1 + c * 1024 + h * 32 + w] = pixel_of(b, i, c, h, w);
}

/* Batch b's `records` records, appended to d. */
static void batch_bytes(buf *d, int b, int64_t records) {
    uint8_t rec[RECORD];
    for (int64_t i = 0; i < records; i++) {
        make_record(rec, b, i);
        buf_add(d, rec, sizeof rec);
    }
}

/* A member as GNU tar writes it (old GNU header). */
static void add_member(buf *t, const char *name, char type, const void *data, size_t n) {
    header_spec h = {name, NULL, type, n, OLD_GNU, false};
    tar_member(t, &h, data, n);
}

static void batch_name(char *out, size_t size, const char *dir, int b) {
    snprintf(out, size, "%s%s", dir, batches[b]);
}

/* The order the batches are written in: any order must do. */
static const int order[6] = {5, 2, 4, 0, 3, 1};

/* An archive of the six batches of `records` records each, among the
 * members that are not read, under `dir`; batch `odd` (-1: none) is the
 * bytes `data` instead, or is left out when data is NULL. */
static void make_archive(buf *t, int64_t records, const char *dir, int odd, const buf *data) {
    char name[128];
    add_member(t, dir, '5', NULL, 0);
    snprintf(name, sizeof name, "%sbatches.meta.txt", dir);
    add_member(t, name, '0', "airplane\nautomobile\n", 20);
    for (int k = 0; k < 6; k++) {
        int b = order[k];
        batch_name(name, sizeof name, dir, b);
        if (b == odd) {
            if (data) add_member(t, name, '0', data->p, data->n);
            continue;
        }
        buf d = {0};
        batch_bytes(&d, b, records);
        add_member(t, name, '0', d.p, d.n);
        free(d.p);
    }
    snprintf(name, sizeof name, "%sreadme.html", dir);
    add_member(t, name, '0', "<html>", 6);
    tar_end(t);
}

/* Where the first header of the member `name` at or after `from` starts. */
static uint64_t header_after(const buf *t, const char *name, size_t from) {
    for (size_t at = from; at + 512 <= t->n; at += 512)
        if (strncmp((const char *)t->p + at, name, 100) == 0) return at;
    SY_ASSERT(!"no such member");
    return 0;
}

static uint64_t header_at(const buf *t, const char *name) {
    return header_after(t, name, 0);
}

/* ---- checking a load --------------------------------------------------------------------- */

static void check_shape(const sy_tensor *t, sy_shape want, const char *what) {
    char a[SY_SHAPE_STR_MAX] = "", b[SY_SHAPE_STR_MAX];
    sy_shape got = t ? sy_tensor_shape(t) : sy_shape_of(0);
    CHECK(t && sy_tensor_dtype(t) == SY_U8 && sy_shape_equal(&got, &want),
          "%s: %s %s, expected uint8 %s", what, t ? sy_dtype_name(sy_tensor_dtype(t)) : "NULL",
          sy_shape_format(&got, a, sizeof a), sy_shape_format(&want, b, sizeof b));
}

/* x (N, 32, 32, 3) and y (N, 1) for each split, N = 5 * records, records. */
static bool check_shapes(const sy_data_split *d, int64_t records, const char *what) {
    int before = check_failures;
    int64_t n = TRAIN * records;
    check_shape(d->x_train, sy_shape_of(4, n, (int64_t)32, (int64_t)32, (int64_t)3), what);
    check_shape(d->y_train, sy_shape_of(2, n, (int64_t)1), what);
    check_shape(d->x_test, sy_shape_of(4, records, (int64_t)32, (int64_t)32, (int64_t)3), what);
    check_shape(d->y_test, sy_shape_of(2, records, (int64_t)1), what);
    return check_failures == before;
}

/* Every label and pixel against the formulas: x[n, h, w, c] is byte
 * 1 + 1024 c + 32 h + w of record n, the training batches in order. */
static void check_values(const sy_data_split *d, int64_t records, const char *what) {
    if (!check_shapes(d, records, what)) return;
    for (int b = 0; b < 6; b++) {
        bool test = b == TRAIN;
        const uint8_t *x = sy_tensor_data(test ? d->x_test : d->x_train),
                      *y = sy_tensor_data(test ? d->y_test : d->y_train);
        int64_t first = test ? 0 : b * records, bad = 0, where = -1;
        for (int64_t i = 0; i < records; i++) {
            const uint8_t *img = x + (first + i) * 3072;
            if (y[first + i] != label_of(b, i) && !bad++) where = (first + i) * 3072;
            for (int h = 0; h < 32; h++)
                for (int w = 0; w < 32; w++)
                    for (int c = 0; c < 3; c++)
                        if (img[(h * 32 + w) * 3 + c] != pixel_of(b, i, c, h, w) && !bad++)
                            where = (first + i) * 3072 + (h * 32 + w) * 3 + c;
        }
        CHECK(!bad, "%s: %s: %lld wrong values, the first at byte %lld of x or row %lld of y", what,
              batches[b], (long long)bad, (long long)where, (long long)(where / 3072));
    }
}

static bool split_empty(const sy_data_split *d) {
    return !d->x_train && !d->y_train && !d->x_test && !d->y_test;
}

/* ---- tests ------------------------------------------------------------------------------- */

/* Archives of 3 records a batch, plain and gzip'd, members in any order,
 * the directory spelled with and without "./". */
static void test_layout(void) {
    char path[PATH_MAX];
    const char *dirs[2] = {bin_dir, "./cifar-10-batches-bin/"};
    for (int k = 0; k < 4; k++) {
        buf t = {0};
        make_archive(&t, 3, dirs[k / 2], -1, NULL);
        in_tmp(path, sizeof path, k % 2 ? "layout.tar.gz" : "layout.tar");
        write_bytes(path, t.p, t.n, k % 2);
        sy_data_split d;
        CHECK_OK(cifar10_load_file(path, 3, &d));
        check_values(&d, 3, path);
        if (check_shapes(&d, 3, path)) {
            /* the transposition spelled out: x[7, 1, 2, c] is record 1 of
             * data_batch_3, byte 1 + 1024 c + 32 + 2 */
            const uint8_t *x = sy_tensor_data(d.x_train), *y = sy_tensor_data(d.y_train);
            uint8_t rec[RECORD];
            make_record(rec, 2, 1);
            for (int c = 0; c < 3; c++)
                CHECK(x[((7 * 32 + 1) * 32 + 2) * 3 + c] == rec[1 + c * 1024 + 32 + 2],
                      "x_train[7, 1, 2, %d]", c);
            CHECK(y[7] == rec[0], "y_train[7] = %d, expected %d", y[7], rec[0]);
        }
        sy_data_split_free(&d);
        free(t.p);
    }
}

/* The archive Python's tarfile wrote, against Keras's steps run by NumPy
 * on the same records. */
static void test_fixture(void) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cifar_tiny.tar.gz", fixture_dir);
    sy_data_split d;
    CHECK_OK(cifar10_load_file(path, 1, &d));
    if (!check_shapes(&d, 1, path)) return;
    snprintf(path, sizeof path, "%s/cifar_tiny_expected.npz", fixture_dir);
    sy_npz *z = NULL;
    CHECK_OK(sy_npz_open(path, &z));
    const char *names[4] = {"x_train", "y_train", "x_test", "y_test"};
    sy_tensor *got[4] = {d.x_train, d.y_train, d.x_test, d.y_test};
    for (int k = 0; k < 4 && z; k++) {
        sy_tensor *want = NULL;
        CHECK_OK(sy_npz_get(z, names[k], &want));
        if (!want) continue;
        sy_shape a = sy_tensor_shape(want), b = sy_tensor_shape(got[k]);
        CHECK(sy_shape_equal(&a, &b) && sy_tensor_dtype(want) == SY_U8, "%s: shape", names[k]);
        CHECK(sy_shape_equal(&a, &b) &&
                  memcmp(sy_tensor_data(want), sy_tensor_data(got[k]), sy_tensor_bytes(want)) == 0,
              "%s differs from Keras's", names[k]);
        sy_tensor_free(want);
    }
    const uint8_t *y = sy_tensor_data(d.y_train);
    CHECK(y[0] == 0 && y[1] == 9 && y[4] == 5 && *(uint8_t *)sy_tensor_data(d.y_test) == 2,
          "the fixture's labels");
    sy_npz_close(z);
    sy_data_split_free(&d);
}

/* Load `t` (gzip'd when the file's name ends in .gz) and expect
 * SY_ERR_CORRUPT naming the file and each of the strings; nothing is
 * returned. */
static void expect_corrupt(const buf *t, int64_t records, const char *file, const char *a,
                           const char *b, const char *c) {
    char path[PATH_MAX];
    in_tmp(path, sizeof path, file);
    size_t len = strlen(file);
    write_bytes(path, t->p, t->n, len > 3 && strcmp(file + len - 3, ".gz") == 0);
    sy_data_split d;
    CHECK_ERR(cifar10_load_file(path, records, &d), SY_ERR_CORRUPT, path, a, b, c);
    CHECK(split_empty(&d), "%s: all NULL on failure", file);
}

static void test_damaged(void) {
    char name[128], s1[256], s2[160];
    const int64_t R = 3;

    /* a batch that is not a whole number of records */
    buf d = {0}, t = {0};
    batch_bytes(&d, 2, R);
    buf_zeros(&d, 5);
    make_archive(&t, R, bin_dir, 2, &d);
    batch_name(name, sizeof name, bin_dir, 2);
    snprintf(s1, sizeof s1, "'%s' (header at byte %llu) has %d bytes", name,
             (unsigned long long)header_at(&t, name), (int)(R * RECORD + 5));
    expect_corrupt(&t, R, "ragged.tar", s1, "not a whole number of 3073-byte records",
                   "3 records and 5 bytes more");
    free(d.p), free(t.p);

    /* a batch of the wrong number of records, each whole */
    d = (buf){0}, t = (buf){0};
    batch_bytes(&d, 5, R + 1);
    make_archive(&t, R, bin_dir, 5, &d);
    batch_name(name, sizeof name, bin_dir, 5);
    snprintf(s1, sizeof s1, "'%s' (header at byte %llu) holds 4 records", name,
             (unsigned long long)header_at(&t, name));
    expect_corrupt(&t, R, "count.tar", s1, "expected 3 (9219 bytes)", "");
    free(d.p), free(t.p);

    /* an empty batch */
    d = (buf){0}, t = (buf){0};
    make_archive(&t, R, bin_dir, 0, &d);
    expect_corrupt(&t, R, "empty-batch.tar", "data_batch_1.bin", "holds 0 records", "");
    free(t.p);

    /* a label of 10, and of 255: the record and both offsets */
    const struct {
        int batch, record;
        uint8_t label;
    } labels[2] = {{3, 1, 10}, {5, 0, 255}};
    for (int k = 0; k < 2; k++) {
        d = (buf){0}, t = (buf){0};
        batch_bytes(&d, labels[k].batch, R);
        d.p[labels[k].record * RECORD] = labels[k].label;
        make_archive(&t, R, bin_dir, labels[k].batch, &d);
        batch_name(name, sizeof name, bin_dir, labels[k].batch);
        snprintf(s1, sizeof s1, "'%s', record %d (byte %d of the member, byte %llu of", name,
                 labels[k].record, labels[k].record * RECORD,
                 (unsigned long long)(header_at(&t, name) + 512 + labels[k].record * RECORD));
        snprintf(s2, sizeof s2, "label %d, expected 0..9", labels[k].label);
        expect_corrupt(&t, R, "label.tar", s1, s2, "");
        free(d.p), free(t.p);
    }

    /* a batch missing; the Python version's members */
    t = (buf){0};
    make_archive(&t, R, bin_dir, 4, NULL);
    expect_corrupt(&t, R, "missing.tar", "no member cifar-10-batches-bin/data_batch_5.bin",
                   "data_batch_1.bin .. data_batch_5.bin and test_batch.bin", "");
    CHECK(!strstr(sy_last_error(), "Python"), "no word of the Python version: %s", sy_last_error());
    free(t.p);
    t = (buf){0};
    make_archive(&t, R, "cifar-10-batches-py/", -1, NULL);
    expect_corrupt(&t, R, "python.tar", "no member cifar-10-batches-bin/data_batch_1.bin",
                   "holds the Python version", "cifar-10-python.tar.gz");
    free(t.p);
    t = (buf){0};
    tar_end(&t);
    expect_corrupt(&t, R, "no-members.tar", "no member cifar-10-batches-bin/data_batch_1.bin", "",
                   "");
    free(t.p);

    /* a batch twice; a batch that is a link */
    t = (buf){0};
    d = (buf){0};
    batch_bytes(&d, 1, R);
    batch_name(name, sizeof name, bin_dir, 1);
    add_member(&t, name, '0', d.p, d.n);
    size_t first_end = t.n;
    make_archive(&t, R, bin_dir, -1, NULL);
    snprintf(s1, sizeof s1, "'%s' appears twice (headers at bytes 0 and %llu)", name,
             (unsigned long long)header_after(&t, name, first_end));
    expect_corrupt(&t, R, "twice.tar", s1, "", "");
    free(d.p), free(t.p);
    t = (buf){0};
    batch_name(name, sizeof name, bin_dir, 0);
    add_member(&t, name, '2', NULL, 0);
    make_archive(&t, R, bin_dir, 0, NULL);
    expect_corrupt(&t, R, "link.tar", name, "(header at byte 0) is not a regular file", "type '2'");
    free(t.p);
}

/* What the tar reader and zlib find, through the loader. */
static void test_damaged_archive(void) {
    char path[PATH_MAX];
    const int64_t R = 2;
    buf t = {0};
    make_archive(&t, R, bin_dir, -1, NULL);
    sy_data_split d;

    /* cut inside a batch: plain, the header's size is seen to be too
     * large; gzip'd (a whole gzip stream), the data ends inside the member */
    char name[128];
    batch_name(name, sizeof name, bin_dir, 0);
    buf cut = {t.p, header_at(&t, name) + 512 + 1000, 0};
    expect_corrupt(&cut, R, "cut.tar", "size field claims 6146 bytes of data, more than the 1000",
                   "for the member 'cifar-10-batches-bin/data_batch_1.bin'", "truncated");
    expect_corrupt(&cut, R, "cut.tar.gz", "truncated tar archive", "of the decompressed data",
                   "inside the member 'cifar-10-batches-bin/data_batch_1.bin'");

    /* a damaged header */
    buf bad = {0};
    buf_add(&bad, t.p, t.n);
    bad.p[512 * 3 + 10] ^= 0x40;
    expect_corrupt(&bad, R, "header.tar", "damaged tar archive at byte 1536",
                   "checksum does not match", "");
    free(bad.p);

    /* gzip'd: whole, truncated, a flipped byte, then not an archive at all */
    in_tmp(path, sizeof path, "good.tar.gz");
    write_bytes(path, t.p, t.n, true);
    CHECK_OK(cifar10_load_file(path, R, &d));
    check_values(&d, R, path);
    sy_data_split_free(&d);
    uint8_t *gz;
    size_t n;
    CHECK_OK(io_read_file(path, &gz, &n));
    buf half = {gz, n / 2, 0};
    expect_corrupt(&half, R, "half.tgz", "truncated gzip stream", "the file is incomplete", "");
    int flipped = 0;
    for (size_t at = 40; at < n - 8; at += (n - 48) / 7) {
        gz[at] ^= 0x55;
        char file[64];
        snprintf(file, sizeof file, "flipped-%zu.tar.gz", at);
        in_tmp(path, sizeof path, file);
        write_bytes(path, gz, n, false);
        CHECK_ERR(cifar10_load_file(path, R, &d), SY_ERR_CORRUPT, path);
        CHECK(split_empty(&d), "all NULL on failure");
        gz[at] ^= 0x55;
        flipped++;
    }
    CHECK(flipped >= 7, "%d damaged copies", flipped);
    sy_free(gz);
    buf junk = {(uint8_t *)"not a tar archive", 17, 0};
    expect_corrupt(&junk, R, "junk.tar", "junk.tar", "", "");

    in_tmp(path, sizeof path, "absent.tar.gz");
    CHECK_ERR(cifar10_load_file(path, R, &d), SY_ERR_IO, path);
    CHECK(split_empty(&d), "all NULL on failure");
    free(t.p);
}

/* A full-size archive, 10,000 records a batch (184 MB inflated; gzip'd
 * fast, the values being regular), written record by record. */
static void write_full_archive(const char *path) {
    gzFile f = gzopen(path, "wb1");
    SY_ASSERT(f);
    static const uint8_t zeros[512];
    uint8_t rec[RECORD];
    char name[128];
    for (int k = 0; k < 6; k++) {
        int b = order[k];
        uint64_t size = (uint64_t)CIFAR10_RECORDS * RECORD;
        buf h = {0};
        batch_name(name, sizeof name, bin_dir, b);
        header_spec spec = {name, NULL, '0', size, OLD_GNU, false};
        tar_header(&h, &spec);
        SY_ASSERT(gzwrite(f, h.p, (unsigned)h.n) == (int)h.n);
        free(h.p);
        for (int64_t i = 0; i < CIFAR10_RECORDS; i++) {
            make_record(rec, b, i);
            SY_ASSERT(gzwrite(f, rec, RECORD) == RECORD);
        }
        unsigned pad = (unsigned)((512 - size % 512) % 512);
        SY_ASSERT(gzwrite(f, zeros, pad) == (int)pad);
    }
    for (int k = 0; k < 2; k++) SY_ASSERT(gzwrite(f, zeros, 512) == 512);
    SY_ASSERT(gzclose(f) == Z_OK);
}

/* The public path with a checksum under the test's control: the archive is
 * found in $SYSTOLIC_DATASETS/cifar10/ and verified by the fetcher, then
 * loaded as sy_cifar10_load_data loads it. sy_cifar10_load_data itself
 * finds the same file and refuses it: not the published bytes. */
static void test_full_size(void) {
    char dir[PATH_MAX], path[PATH_MAX], found[PATH_MAX], hex[65];
    in_tmp(dir, sizeof dir, "datasets");
    mkdir(dir, 0755);
    in_tmp(path, sizeof path, "datasets/cifar10");
    mkdir(path, 0755);
    in_tmp(path, sizeof path, "datasets/cifar10/cifar-10-binary.tar.gz");
    write_full_archive(path);
    CHECK_OK(sha256_file(path, hex));
    struct stat sb;
    SY_ASSERT(stat(path, &sb) == 0);
    setenv("SYSTOLIC_DATASETS", dir, 1);
    unsetenv("SYSTOLIC_DATASETS_MIRROR");

    static const char *const no_urls[] = {NULL};
    data_file_spec spec = {"cifar10", "cifar-10-binary.tar.gz", hex, (int64_t)sb.st_size, no_urls,
                           NULL};
    CHECK_OK(data_fetch(&spec, found, sizeof found));
    CHECK(strcmp(found, path) == 0, "found %s", found);
    sy_data_split d;
    CHECK_OK(cifar10_load_file(found, CIFAR10_RECORDS, &d));
    check_values(&d, CIFAR10_RECORDS, "full size");
    int64_t counts[2][10] = {{0}};
    if (check_shapes(&d, CIFAR10_RECORDS, "full size")) {
        const uint8_t *y = sy_tensor_data(d.y_train), *yt = sy_tensor_data(d.y_test);
        for (int64_t i = 0; i < 50000; i++) counts[0][y[i] % 10]++;
        for (int64_t i = 0; i < 10000; i++) counts[1][yt[i] % 10]++;
    }
    for (int c = 0; c < 10; c++)
        CHECK(counts[0][c] == 5000 && counts[1][c] == 1000, "class %d: %lld and %lld", c,
              (long long)counts[0][c], (long long)counts[1][c]);
    sy_data_split_free(&d);

    char size_note[96];
    snprintf(size_note, sizeof size_note, "It has %lld bytes where the original has 170052171",
             (long long)sb.st_size);
    CHECK_ERR(sy_cifar10_load_data(&d), SY_ERR_CORRUPT, path, "wrong SHA-256", hex,
              published_sha256, size_note,
              "from https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz");
    CHECK(split_empty(&d), "all NULL on failure");
    CHECK(stat(path, &sb) == 0, "a file in $SYSTOLIC_DATASETS is never deleted");
}

/* The zoo's entry, without the network: $SYSTOLIC_DATASETS_MIRROR (a
 * file:// URL) replaces the publisher's URL. */
static void test_zoo(void) {
    char empty[PATH_MAX], cache[PATH_MAX], mirror[PATH_MAX], url[PATH_MAX + 16], path[PATH_MAX];
    in_tmp(empty, sizeof empty, "empty-datasets");
    in_tmp(cache, sizeof cache, "cache");
    in_tmp(mirror, sizeof mirror, "mirror");
    mkdir(empty, 0755);
    mkdir(mirror, 0755);
    snprintf(url, sizeof url, "file://%s", mirror);
    setenv("SYSTOLIC_DATASETS", empty, 1);
    setenv("SYSTOLIC_CACHE_DIR", cache, 1);
    setenv("SYSTOLIC_DATASETS_MIRROR", url, 1);
    sy_data_split d;
    CHECK_ERR(sy_cifar10_load_data(&d), SY_ERR_IO, "cifar10/cifar-10-binary.tar.gz: not found",
              "empty-datasets/cifar10/cifar-10-binary.tar.gz", "$SYSTOLIC_DATASETS_MIRROR",
              published_sha256);
    CHECK(split_empty(&d), "all NULL on failure");

    /* a mirror serving other bytes: refused, and nothing reaches the cache */
    in_tmp(path, sizeof path, "mirror/cifar10");
    mkdir(path, 0755);
    in_tmp(path, sizeof path, "mirror/cifar10/cifar-10-binary.tar.gz");
    write_bytes(path, "not CIFAR-10", 12, false);
    CHECK_ERR(sy_cifar10_load_data(&d), SY_ERR_CORRUPT, "got 12 bytes with SHA-256",
              published_sha256, "discarded");
    in_tmp(path, sizeof path, "cache/datasets/cifar10/cifar-10-binary.tar.gz");
    struct stat sb;
    CHECK(stat(path, &sb) != 0, "nothing is left in the cache");
    unsetenv("SYSTOLIC_DATASETS_MIRROR");

    CHECK_ERR(sy_dataset_file("cifar10", "cifar-10-python.tar.gz", path, sizeof path),
              SY_ERR_NOT_FOUND, "'cifar10' has no file 'cifar-10-python.tar.gz'",
              "cifar-10-binary.tar.gz");
    CHECK_ERR(sy_dataset_file("cifar100", "x", path, sizeof path), SY_ERR_NOT_FOUND, "cifar10");
}

/* The real archive: the publisher's counts (5,000 images of each class in
 * the training batches, 1,000 in the test batch). */
static void test_real(const char *datasets) {
    setenv("SYSTOLIC_DATASETS", datasets, 1);
    sy_data_split d;
    CHECK_OK(sy_cifar10_load_data(&d));
    if (!check_shapes(&d, CIFAR10_RECORDS, "cifar10")) return;
    const uint8_t *y = sy_tensor_data(d.y_train), *yt = sy_tensor_data(d.y_test);
    int64_t counts[2][10] = {{0}}, bad = 0;
    for (int64_t i = 0; i < 50000; i++) y[i] < 10 ? counts[0][y[i]]++ : bad++;
    for (int64_t i = 0; i < 10000; i++) yt[i] < 10 ? counts[1][yt[i]]++ : bad++;
    CHECK(!bad, "%lld labels above 9", (long long)bad);
    for (int c = 0; c < 10; c++)
        CHECK(counts[0][c] == 5000 && counts[1][c] == 1000, "class %d: %lld train, %lld test", c,
              (long long)counts[0][c], (long long)counts[1][c]);
    sy_data_split_free(&d);
}

int main(void) {
    if (!files_setup("test-cifar", __FILE__)) return 1;

    test_layout();
    test_fixture();
    test_damaged();
    test_damaged_archive();
    test_full_size();
    test_zoo();
    char archive[PATH_MAX + 64];
    snprintf(archive, sizeof archive, "%s/cifar10/cifar-10-binary.tar.gz", real_datasets);
    struct stat sb;
    if (real_datasets[0] && stat(archive, &sb) == 0)
        test_real(real_datasets);
    else
        fprintf(stderr, "test_cifar: no cifar10/cifar-10-binary.tar.gz in $SYSTOLIC_DATASETS: "
                        "skipping the real CIFAR-10\n");
    files_cleanup();
    return check_report("test_cifar");
}
