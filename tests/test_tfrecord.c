/*
 * test_tfrecord.c - TFRecord files: CRC32C, the reader on files TensorFlow
 * wrote (tests/data/tfrecord, by tools/tfrecord_fixtures.py: the same
 * Examples plain, ZLIB and GZIP, and raw records) and what TensorFlow
 * parsed from them, the writer (byte for byte TensorFlow's framing;
 * atomic; full disks and unwritable places), and damaged files: a flipped
 * byte, a truncated record, a wrong length field, damaged compressed data
 * -- each error names the file, the record and the byte offset, and
 * skip_corrupt counts and skips.
 *
 *   test_tfrecord                          the tests
 *   test_tfrecord --write-for-tensorflow DIR
 *       writes Examples built here, in all three compressions, with what
 *       they hold (expected.json), for tests/tfrecord_tensorflow.py to read
 *       with TensorFlow (tests/tfrecord_tensorflow.sh runs both).
 *   test_tfrecord --check-convert DIR
 *       reads back what `systolic convert mnist DIR --compression GZIP`
 *       wrote: every record is MNIST's image and label of its index.
 */
#define _GNU_SOURCE
#include "check.h"
#include "files.h"

#include "data/data_internal.h"
#include "tfrecord_check.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *compression_suffix[] = {"", ".zlib", ".gzip"};

/* ---- reading whole files ------------------------------------------------------------ */

/* A file's records, each as hex, and how the reading ended. */
typedef struct recs {
    int64_t n, skipped;
    char *hex[64];
    sy_status st; /* the error that ended the reading, or SY_OK */
    char error[1024];
} recs;

static void recs_free(recs *r) {
    for (int64_t i = 0; i < r->n; i++) free(r->hex[i]);
    r->n = 0;
}

/* Read up to 64 records of path (all, when the file holds no more). */
static recs read_records(const char *path, sy_compression c, int64_t buffer_size, bool skip) {
    recs r = {0};
    sy_tfrecord_options o = sy_tfrecord_options_default();
    o.compression = c;
    o.buffer_size = buffer_size;
    o.skip_corrupt = skip;
    sy_tfrecord_reader *rd;
    r.st = sy_tfrecord_reader_open(path, &o, &rd);
    for (bool end = false; !r.st && !end && r.n < 64;) {
        const uint8_t *data;
        size_t n;
        r.st = sy_tfrecord_read(rd, &data, &n, &end);
        if (!r.st && !end) r.hex[r.n++] = bytes_hex(data, n);
    }
    if (r.st) {
        snprintf(r.error, sizeof r.error, "%s", sy_last_error());
        /* the error is sticky: the next read repeats it */
        const uint8_t *data;
        size_t n;
        bool end;
        if (rd)
            CHECK(sy_tfrecord_read(rd, &data, &n, &end) == r.st &&
                      !strcmp(sy_last_error(), r.error),
                  "a second read after '%s' gave '%s'", r.error, sy_last_error());
    }
    r.skipped = sy_tfrecord_reader_skipped(rd);
    sy_tfrecord_reader_close(rd);
    return r;
}

/* The records equal the hex strings of a JSON array. */
static void check_records(const recs *r, const json_t *want, const char *what) {
    CHECK(r->st == SY_OK, "%s: %s", what, r->error);
    CHECK(r->n == (int64_t)json_array_size(want), "%s: %lld records, expected %zu", what,
          (long long)r->n, json_array_size(want));
    for (int64_t i = 0; i < r->n && i < (int64_t)json_array_size(want); i++)
        CHECK(!strcmp(r->hex[i], json_string_value(json_array_get(want, (size_t)i))),
              "%s: record %lld differs", what, (long long)i);
}

/* ---- CRC32C ------------------------------------------------------------------------- */

static void test_crc32c(void) {
    CHECK(crc32c_extend(0, "123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = %08x",
          crc32c_extend(0, "123456789", 9));
    /* RFC 3720, B.4 */
    uint8_t b[32];
    memset(b, 0, 32);
    CHECK(crc32c_extend(0, b, 32) == 0x8A9136AAu, "32 zeros");
    memset(b, 0xff, 32);
    CHECK(crc32c_extend(0, b, 32) == 0x62A8AB43u, "32 0xff");
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(crc32c_extend(0, b, 32) == 0x46DD794Eu, "0..31");
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    CHECK(crc32c_extend(0, b, 32) == 0x113FDB5Cu, "31..0");
    CHECK(crc32c_extend(crc32c_extend(0, "1234", 4), "56789", 5) == 0xE3069283u, "extending a CRC");
    /* the hardware path (when the CPU has one) and the tables agree at every length and alignment
     */
    uint8_t data[600];
    sy_rng rng = sy_rng_new(3, 0);
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)sy_rng_u32(&rng);
    int bad = 0;
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof data; n += 1 + n / 16)
            bad += crc32c_extend(7, data + off, n) != crc32c_soft(7, data + off, n);
    CHECK(bad == 0, "%d lengths where the two CRC32C implementations differ", bad);
    CHECK(tfrecord_mask(0) == 0xa282ead8u && tfrecord_mask(0x8000) == 0xa282ead9u, "the mask");
}

static void test_compression_names(void) {
    sy_compression c;
    const char *names[] = {NULL, "", "NONE", "none", "ZLIB", "zlib", "GZIP", "Gzip"};
    const sy_compression want[] = {SY_COMPRESSION_NONE, SY_COMPRESSION_NONE, SY_COMPRESSION_NONE,
                                   SY_COMPRESSION_NONE, SY_COMPRESSION_ZLIB, SY_COMPRESSION_ZLIB,
                                   SY_COMPRESSION_GZIP, SY_COMPRESSION_GZIP};
    for (int i = 0; i < 8; i++) {
        CHECK_OK(sy_compression_from_name(names[i], &c));
        CHECK(c == want[i], "compression '%s'", names[i] ? names[i] : "NULL");
    }
    CHECK_ERR(sy_compression_from_name("BZ2", &c), SY_ERR_INVALID_ARGUMENT, "BZ2", "ZLIB", "GZIP");
}

/* ---- files TensorFlow wrote --------------------------------------------------------- */

static void check_parsed(const json_t *expected, const json_t *examples_hex, const char *what) {
    json_t *specs_j = json_object_get(expected, "specs"),
           *parsed = json_object_get(expected, "parsed");
    int32_t n_specs = (int32_t)json_array_size(specs_j);
    sy_feature_spec specs[16];
    sy_tensor *defaults[16], *out[16], *splits[16];
    for (int32_t k = 0; k < n_specs; k++)
        specs[k] = spec_json(json_array_get(specs_j, (size_t)k), &defaults[k]);
    sy_tensor *batch = records_json(examples_hex);
    int64_t rows = sy_tensor_count(batch);
    CHECK_OK(sy_parse_example(batch, specs, n_specs, out, splits));
    for (int32_t k = 0; k < n_specs && out[0]; k++) {
        json_t *want = json_object_get(parsed, specs[k].key);
        char name[128];
        snprintf(name, sizeof name, "%s: feature '%s'", what, specs[k].key);
        check_values(out[k], 0, sy_tensor_count(out[k]), json_object_get(want, "values"), name);
        if (specs[k].kind == SY_FEATURE_VAR_LEN) {
            check_values(splits[k], 0, rows + 1, json_object_get(want, "row_splits"), name);
        } else {
            sy_shape s = sy_tensor_shape(out[k]);
            json_t *shape = json_object_get(want, "shape");
            bool same = s.rank == (int32_t)json_array_size(shape);
            for (int32_t d = 0; same && d < s.rank; d++)
                same = s.dims[d] == json_integer_value(json_array_get(shape, (size_t)d));
            CHECK(same, "%s: the shape", name);
        }
    }
    /* one at a time, each Example gives its row of the batch */
    for (int64_t b = 0; b < rows && out[0]; b++) {
        sy_tensor *one[16];
        sy_string s = sy_tensor_string(batch, b);
        CHECK_OK(sy_parse_single_example(s.data, (size_t)s.size, specs, n_specs, one));
        for (int32_t k = 0; k < n_specs && one[0]; k++) {
            int64_t begin, end;
            if (specs[k].kind == SY_FEATURE_VAR_LEN) {
                begin = (int64_t)sy_tensor_get(splits[k], b);
                end = (int64_t)sy_tensor_get(splits[k], b + 1);
            } else {
                begin = b * sy_shape_count(&specs[k].shape);
                end = begin + sy_shape_count(&specs[k].shape);
                sy_shape shape = sy_tensor_shape(one[k]);
                CHECK(sy_shape_equal(&shape, &specs[k].shape),
                      "single Example %lld, '%s': not the spec's shape", (long long)b,
                      specs[k].key);
            }
            json_t *row = json_array();
            for (int64_t i = begin; i < end; i++) json_array_append_new(row, value_json(out[k], i));
            char name[128];
            snprintf(name, sizeof name, "%s: single Example %lld, feature '%s'", what, (long long)b,
                     specs[k].key);
            check_values(one[k], 0, sy_tensor_count(one[k]), row, name);
            json_decref(row);
        }
        for (int32_t k = 0; k < n_specs; k++) sy_tensor_free(one[k]);
    }
    for (int32_t k = 0; k < n_specs; k++) {
        sy_tensor_free(out[k]);
        sy_tensor_free(splits[k]);
        sy_tensor_free(defaults[k]);
    }
    sy_tensor_free(batch);
}

static void test_tensorflow_files(void) {
    char path[1024];
    json_t *expected = load_fixture("expected.json");
    if (!expected) return;
    json_t *examples = json_object_get(expected, "examples");
    const int64_t buffers[] = {0, 1, 7, 4096};
    for (int c = 0; c < 3; c++)
        for (int b = 0; b < 4; b++) {
            snprintf(path, sizeof path, "%s/tfrecord/examples%s.tfrecord", fixture_dir,
                     compression_suffix[c]);
            recs r = read_records(path, (sy_compression)c, buffers[b], false);
            char what[1200];
            snprintf(what, sizeof what, "%s, buffer_size %lld", path, (long long)buffers[b]);
            check_records(&r, examples, what);
            recs_free(&r);
        }
    snprintf(path, sizeof path, "%s/tfrecord/raw.tfrecord", fixture_dir);
    for (int b = 0; b < 4; b++) {
        recs r = read_records(path, SY_COMPRESSION_NONE, buffers[b], false);
        check_records(&r, json_object_get(expected, "raw"), path);
        recs_free(&r);
    }
    check_parsed(expected, examples, "TensorFlow's Examples");

    /* gzip's concatenation rule: two GZIP files one after the other are one */
    snprintf(path, sizeof path, "%s/tfrecord/examples.gzip.tfrecord", fixture_dir);
    uint8_t *gz;
    size_t n;
    CHECK_OK(io_read_file(path, &gz, &n));
    buf twice = {0};
    buf_add(&twice, gz, n);
    buf_add(&twice, gz, n);
    in_tmp(path, sizeof path, "twice.gzip.tfrecord");
    write_bytes(path, twice.p, twice.n, false);
    recs r = read_records(path, SY_COMPRESSION_GZIP, 0, false);
    CHECK(r.st == SY_OK && r.n == 2 * (int64_t)json_array_size(examples),
          "two GZIP streams: %lld records (%s)", (long long)r.n, r.error);
    recs_free(&r);
    free(twice.p);
    sy_free(gz);

    /* systolic's writer frames records exactly as TensorFlow's: the same file, byte for byte */
    in_tmp(path, sizeof path, "ours.tfrecord");
    sy_tfrecord_writer *w;
    CHECK_OK(sy_tfrecord_writer_open(path, SY_COMPRESSION_NONE, &w));
    for (size_t i = 0; i < json_array_size(examples); i++) {
        uint8_t *p = hex_bytes(json_string_value(json_array_get(examples, i)), &n);
        CHECK_OK(sy_tfrecord_write(w, p, n));
        free(p);
    }
    CHECK_OK(sy_tfrecord_writer_close(w));
    uint8_t *ours, *theirs;
    size_t n_ours, n_theirs;
    char tf_path[1024];
    snprintf(tf_path, sizeof tf_path, "%s/tfrecord/examples.tfrecord", fixture_dir);
    CHECK_OK(io_read_file(path, &ours, &n_ours));
    CHECK_OK(io_read_file(tf_path, &theirs, &n_theirs));
    CHECK(n_ours == n_theirs && !memcmp(ours, theirs, n_ours),
          "our file of TensorFlow's records is not TensorFlow's");
    sy_free(ours);
    sy_free(theirs);
    json_decref(expected);
}

/* ---- writing and reading back ----------------------------------------------------- */

static void test_roundtrip(void) {
    /* records of 0, 1, 1 MiB and many small sizes, through buffers of every size */
    enum { N = 40 };
    static uint8_t big[(1 << 20) + N];
    sy_rng rng = sy_rng_new(5, 0);
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)sy_rng_u32(&rng);
    size_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = i == 2 ? 1 << 20 : i == 5 ? 70000 : (size_t)(i * 37 % 300);
    for (int c = 0; c < 3; c++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/roundtrip%s.tfrecord", tmp_root, compression_suffix[c]);
        sy_tfrecord_writer *w;
        CHECK_OK(sy_tfrecord_writer_open(path, (sy_compression)c, &w));
        for (int i = 0; i < N; i++) CHECK_OK(sy_tfrecord_write(w, big + i, sizes[i]));
        CHECK_OK(sy_tfrecord_writer_close(w));
        const int64_t buffers[] = {0, 3, 65536};
        for (int b = 0; b < 3; b++) {
            sy_tfrecord_options o = sy_tfrecord_options_default();
            o.compression = (sy_compression)c;
            o.buffer_size = buffers[b];
            sy_tfrecord_reader *r;
            CHECK_OK(sy_tfrecord_reader_open(path, &o, &r));
            int i = 0;
            for (bool end = false; r && !end;) {
                const uint8_t *data;
                size_t n;
                sy_status st = sy_tfrecord_read(r, &data, &n, &end);
                CHECK(st == SY_OK, "%s: %s", path, sy_last_error());
                if (st) break;
                if (end) break;
                CHECK(i < N && n == sizes[i] && !memcmp(data, big + i, n),
                      "%s, buffer %lld: record %d", path, (long long)buffers[b], i);
                i++;
            }
            CHECK(i == N, "%s: %d records, expected %d", path, i, N);
            sy_tfrecord_reader_close(r);
        }
        /* a file with no records */
        CHECK_OK(sy_tfrecord_writer_open(path, (sy_compression)c, &w));
        CHECK_OK(sy_tfrecord_writer_close(w));
        recs r = read_records(path, (sy_compression)c, 0, false);
        CHECK(r.st == SY_OK && r.n == 0, "%s: an empty file gave %lld records (%s)", path,
              (long long)r.n, r.error);
    }
}

/* ---- damage ----------------------------------------------------------------------- */

enum { DAMAGE_RECORDS = 5 };

/* A plain file of 5 records of 10, 20, ... 50 bytes; off[i] is where record i starts. */
static void damage_source(buf *b, size_t off[DAMAGE_RECORDS + 1], sy_compression c) {
    char path[1024];
    in_tmp(path, sizeof path, "source.tfrecord");
    sy_tfrecord_writer *w;
    CHECK_OK(sy_tfrecord_writer_open(path, c, &w));
    off[0] = 0;
    for (int i = 0; i < DAMAGE_RECORDS; i++) {
        uint8_t rec[50];
        memset(rec, 'a' + i, sizeof rec);
        CHECK_OK(sy_tfrecord_write(w, rec, 10 * (size_t)(i + 1)));
        off[i + 1] = off[i] + 12 + 10 * (size_t)(i + 1) + 4;
    }
    CHECK_OK(sy_tfrecord_writer_close(w));
    uint8_t *p;
    size_t n;
    CHECK_OK(io_read_file(path, &p, &n));
    b->n = 0;
    buf_add(b, p, n);
    sy_free(p);
}

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A length field set to len with a matching checksum. */
static void set_length(uint8_t *head, uint64_t len) {
    put_le64(head, len);
    uint32_t c = tfrecord_mask(crc32c_extend(0, head, 8));
    for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(c >> (8 * i));
}

typedef struct damage_case {
    const char *name;
    int record;       /* the record the error names */
    const char *says; /* the message says this */
    const char *read; /* with skip_corrupt: the records read, as letters ("abde") */
    int skipped;
} damage_case;

/* Read the damaged bytes without and with skip_corrupt. */
static void check_damage(const damage_case *d, const buf *b, size_t at, sy_compression c) {
    char path[1024], rec_name[32], byte_name[64];
    snprintf(path, sizeof path, "%s/%s.tfrecord", tmp_root, d->name);
    write_bytes(path, b->p, b->n, false);
    snprintf(rec_name, sizeof rec_name, "record %d ", d->record);
    snprintf(byte_name, sizeof byte_name, "at byte %zu", at);
    recs r = read_records(path, c, 0, false);
    CHECK(r.st == SY_ERR_CORRUPT, "%s: %s instead of SY_ERR_CORRUPT", d->name,
          sy_status_name(r.st));
    const char *needles[] = {path, rec_name, byte_name, d->says};
    for (int k = 0; k < 4; k++)
        CHECK(strstr(r.error, needles[k]), "%s: the message should mention '%s': %s", d->name,
              needles[k], r.error);
    CHECK(r.n == d->record, "%s: %lld records before the error, expected %d", d->name,
          (long long)r.n, d->record);
    recs_free(&r);
    r = read_records(path, c, 0, true);
    char letters[DAMAGE_RECORDS + 1] = "";
    for (int64_t i = 0; i < r.n && i < DAMAGE_RECORDS; i++) {
        size_t n;
        uint8_t *p = hex_bytes(r.hex[i], &n);
        letters[i] = n ? (char)p[0] : '?';
        letters[i + 1] = '\0';
        free(p);
    }
    CHECK(r.st == SY_OK && !strcmp(letters, d->read) && r.skipped == d->skipped,
          "%s with skip_corrupt: read '%s' and skipped %lld (%s), expected '%s' and %d", d->name,
          letters, (long long)r.skipped, r.error, d->read, d->skipped);
    recs_free(&r);
}

static void test_damage(void) {
    buf b = {0};
    size_t off[DAMAGE_RECORDS + 1];
    damage_source(&b, off, SY_COMPRESSION_NONE);
    buf good = {0};
    buf_add(&good, b.p, b.n);
    const damage_case cases[] = {
        {"flipped_data_byte", 2, "data's checksum does not match", "abde", 1},
        {"flipped_length_byte", 2, "length field's checksum does not match", "ab", 1},
        {"flipped_length_crc", 2, "length field's checksum does not match", "ab", 1},
        {"flipped_data_crc", 2, "data's checksum does not match", "abde", 1},
        {"truncated_data", 3, "truncated", "abc", 1},
        {"truncated_header", 3, "truncated: the file ends 5 bytes into the record's 12-byte header",
         "abc", 1},
        {"length_past_end", 4, "length field says 1000 bytes of data", "abcd", 1},
        /* one byte short, with a matching checksum: the data's checksum fails,
         * and the next header is read one byte early, so its checksum fails too */
        {"length_one_short", 2, "data's checksum does not match", "ab", 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const damage_case *d = &cases[k];
        memcpy(b.p, good.p, good.n);
        b.n = good.n;
        size_t at = off[d->record];
        if (!strcmp(d->name, "flipped_data_byte")) b.p[at + 12 + 5] ^= 1;
        if (!strcmp(d->name, "flipped_length_byte")) b.p[at] ^= 1;
        if (!strcmp(d->name, "flipped_length_crc")) b.p[at + 9] ^= 0x40;
        if (!strcmp(d->name, "flipped_data_crc")) b.p[off[d->record + 1] - 2] ^= 1;
        if (!strcmp(d->name, "truncated_data")) b.n = at + 12 + 10;
        if (!strcmp(d->name, "truncated_header")) b.n = at + 5;
        if (!strcmp(d->name, "length_past_end")) set_length(b.p + at, 1000);
        if (!strcmp(d->name, "length_one_short")) set_length(b.p + at, 29);
        check_damage(d, &b, at, SY_COMPRESSION_NONE);
    }

    /* compressed: the offsets are in the decompressed data */
    damage_source(&b, off, SY_COMPRESSION_GZIP);
    char path[1024];
    in_tmp(path, sizeof path, "truncated.gzip.tfrecord");
    write_bytes(path, b.p, b.n / 2, false);
    recs r = read_records(path, SY_COMPRESSION_GZIP, 0, false);
    CHECK(r.st == SY_ERR_CORRUPT && strstr(r.error, path) &&
              strstr(r.error, "of the decompressed data") &&
              strstr(r.error, "GZIP stream is truncated"),
          "a truncated GZIP file: %s", r.error);
    recs_free(&r);
    r = read_records(path, SY_COMPRESSION_GZIP, 0, true);
    CHECK(r.st == SY_OK && r.skipped == 1,
          "a truncated GZIP file with skip_corrupt: %s, %lld skipped", r.error,
          (long long)r.skipped);
    recs_free(&r);
    /* damaged deflate data, or a damaged gzip trailer: a damaged record or stream, never a crash */
    for (size_t at = 10; at < b.n; at += 7) {
        buf bad = {0};
        buf_add(&bad, b.p, b.n);
        bad.p[at] ^= 0x55;
        in_tmp(path, sizeof path, "flipped.gzip.tfrecord");
        write_bytes(path, bad.p, bad.n, false);
        free(bad.p);
        r = read_records(path, SY_COMPRESSION_GZIP, 5, false);
        if (r.st != SY_OK)
            CHECK(r.st == SY_ERR_CORRUPT && strstr(r.error, path) &&
                      strstr(r.error, "corrupt record"),
                  "byte %zu of a GZIP file flipped: %s", at, r.error);
        recs_free(&r);
    }
    in_tmp(path, sizeof path, "gzip-trailer.tfrecord");
    b.p[b.n - 6] ^= 1; /* the CRC-32 in gzip's trailer */
    write_bytes(path, b.p, b.n, false);
    r = read_records(path, SY_COMPRESSION_GZIP, 0, false);
    CHECK(r.st == SY_ERR_CORRUPT && r.n == DAMAGE_RECORDS && strstr(r.error, "damaged GZIP data") &&
              strstr(r.error, "record 5 "),
          "a bad gzip CRC after the last record: %lld records, %s", (long long)r.n, r.error);
    recs_free(&r);
    /* the wrong compression */
    damage_source(&b, off, SY_COMPRESSION_ZLIB);
    in_tmp(path, sizeof path, "zlib.tfrecord");
    write_bytes(path, b.p, b.n, false);
    r = read_records(path, SY_COMPRESSION_GZIP, 0, false);
    CHECK(r.st == SY_ERR_CORRUPT && strstr(r.error, "GZIP") &&
              strstr(r.error, "record 0 at byte 0"),
          "ZLIB read as GZIP: %s", r.error);
    recs_free(&r);
    r = read_records(path, SY_COMPRESSION_NONE, 0, false);
    CHECK(r.st == SY_ERR_CORRUPT && strstr(r.error, "record 0 at byte 0"), "ZLIB read as plain: %s",
          r.error);
    recs_free(&r);
    in_tmp(path, sizeof path, "source.tfrecord");
    r = read_records(path, SY_COMPRESSION_ZLIB, 0, false);
    CHECK(r.st == SY_OK && r.n == DAMAGE_RECORDS, "the ZLIB file itself: %s", r.error);
    recs_free(&r);
    free(b.p);
    free(good.p);
}

static void test_reader_errors(void) {
    sy_tfrecord_reader *r;
    char path[1024];
    in_tmp(path, sizeof path, "no-such-file.tfrecord");
    CHECK_ERR(sy_tfrecord_reader_open(path, NULL, &r), SY_ERR_IO, path, "No such file");
    CHECK(r == NULL, "no reader on failure");
    CHECK_ERR(sy_tfrecord_reader_open(tmp_root, NULL, &r), SY_ERR_IO, tmp_root, "directory");
    in_tmp(path, sizeof path, "source.tfrecord");
    sy_tfrecord_options o = sy_tfrecord_options_default();
    o.buffer_size = -1;
    CHECK_ERR(sy_tfrecord_reader_open(path, &o, &r), SY_ERR_INVALID_ARGUMENT, "buffer_size");
    o = sy_tfrecord_options_default();
    o.compression = (sy_compression)7;
    CHECK_ERR(sy_tfrecord_reader_open(path, &o, &r), SY_ERR_INVALID_ARGUMENT, "compression");
    const uint8_t *data;
    size_t n;
    bool end;
    CHECK_ERR(sy_tfrecord_read(NULL, &data, &n, &end), SY_ERR_INVALID_ARGUMENT, "NULL");
    CHECK(sy_tfrecord_reader_skipped(NULL) == 0, "skipped(NULL)");
    sy_tfrecord_reader_close(NULL);
    /* a reader of memory: what the fuzz target reads through */
    CHECK_OK(tfrecord_reader_open_memory((const uint8_t *)"", 0, "nothing", NULL, &r));
    CHECK_OK(sy_tfrecord_read(r, &data, &n, &end));
    CHECK(end, "no bytes, no records");
    sy_tfrecord_reader_close(r);
}

/* ---- the writer: atomic, and failing cleanly ------------------------------------------- */

/* Files in dir whose name holds ".tmp-": the writer's temporary files. */
static int temp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    return n;
}

static bool file_is(const char *path, const char *content) {
    uint8_t *p;
    size_t n;
    if (io_read_file(path, &p, &n)) return false;
    bool same = n == strlen(content) && !memcmp(p, content, n);
    sy_free(p);
    return same;
}

/* Write 300 KiB of records over `path`, which holds "old": the error must
 * come (from a write or the close), name the path and `reason`, and leave
 * "old" and no temporary file. */
static void check_write_fails(const char *dir, const char *path, const char *reason) {
    write_bytes(path, "old", 3, false);
    static uint8_t rec[1024];
    sy_tfrecord_writer *w;
    CHECK_OK(sy_tfrecord_writer_open(path, SY_COMPRESSION_NONE, &w));
    sy_status st = SY_OK;
    for (int i = 0; i < 300 && !st; i++) st = sy_tfrecord_write(w, rec, sizeof rec);
    if (st) {
        CHECK(st == SY_ERR_IO && strstr(sy_last_error(), path) && strstr(sy_last_error(), reason),
              "the failed write: %s", sy_last_error());
        CHECK_ERR(sy_tfrecord_write(w, rec, sizeof rec), SY_ERR_IO, reason); /* sticky */
    }
    CHECK_ERR(sy_tfrecord_writer_close(w), SY_ERR_IO, path, reason, "left as it was");
    CHECK(file_is(path, "old"), "%s: the earlier file must be left as it was", path);
    CHECK(temp_files(dir) == 0, "%s: a temporary file was left behind", dir);
}

static void test_writer(void) {
    char path[1100], dir[1024]; /* path: dir and a name */
    in_tmp(dir, sizeof dir, "atomic");
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/data.tfrecord", dir);
    write_bytes(path, "old", 3, false);
    sy_tfrecord_writer *w;
    CHECK_OK(sy_tfrecord_writer_open(path, SY_COMPRESSION_GZIP, &w));
    CHECK_OK(sy_tfrecord_write(w, "new", 3));
    CHECK(file_is(path, "old") && temp_files(dir) == 1,
          "while writing, the old file stays and a temporary file grows");
    sy_tfrecord_writer_abort(w);
    CHECK(file_is(path, "old") && temp_files(dir) == 0,
          "abort leaves the old file and removes the temporary one");
    CHECK_OK(sy_tfrecord_writer_open(path, SY_COMPRESSION_NONE, &w));
    CHECK_OK(sy_tfrecord_write(w, "new", 3));
    CHECK_OK(sy_tfrecord_writer_close(w));
    recs r = read_records(path, SY_COMPRESSION_NONE, 0, false);
    CHECK(r.n == 1 && !strcmp(r.hex[0], "6e6577") && temp_files(dir) == 0,
          "close renames the new file into place");
    recs_free(&r);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644,
          "the file is readable by all (mode %o)", sb.st_mode & 0777);
    sy_tfrecord_writer_abort(NULL);
    CHECK_OK(sy_tfrecord_writer_close(NULL));

    /* through a symbolic link: its target gets the file, the link stays */
    char link[1200];
    snprintf(link, sizeof link, "%s/link.tfrecord", dir);
    CHECK(symlink("data.tfrecord", link) == 0, "symlink %s", link);
    CHECK_OK(sy_tfrecord_writer_open(link, SY_COMPRESSION_NONE, &w));
    CHECK_OK(sy_tfrecord_write(w, "via", 3));
    CHECK_OK(sy_tfrecord_writer_close(w));
    r = read_records(path, SY_COMPRESSION_NONE, 0, false);
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode) && r.n == 1 && !strcmp(r.hex[0], "766961"),
          "writing through a link replaces its target and keeps the link");
    recs_free(&r);
    /* a FIFO is refused, and left a FIFO */
    snprintf(link, sizeof link, "%s/fifo.tfrecord", dir);
    CHECK(mkfifo(link, 0600) == 0, "mkfifo %s", link);
    CHECK_ERR(sy_tfrecord_writer_open(link, SY_COMPRESSION_NONE, &w), SY_ERR_IO, link, "it is a FIFO");
    CHECK(lstat(link, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is left as it was");
    remove(link);

    /* places that cannot be written */
    snprintf(path, sizeof path, "%s/no-such-dir/data.tfrecord", dir);
    CHECK_ERR(sy_tfrecord_writer_open(path, SY_COMPRESSION_NONE, &w), SY_ERR_IO, path,
              "No such file");
    CHECK(w == NULL, "no writer on failure");
    snprintf(path, sizeof path, "%s/data.tfrecord/x.tfrecord", dir); /* under a regular file */
    CHECK_ERR(sy_tfrecord_writer_open(path, SY_COMPRESSION_NONE, &w), SY_ERR_IO, path,
              "Not a directory");
    CHECK_ERR(sy_tfrecord_writer_open(dir, SY_COMPRESSION_NONE, &w), SY_ERR_IO, dir, "directory");
    CHECK_ERR(sy_tfrecord_writer_open("", SY_COMPRESSION_NONE, &w), SY_ERR_INVALID_ARGUMENT,
              "no path");
    CHECK_ERR(sy_tfrecord_writer_open("x", (sy_compression)9, &w), SY_ERR_INVALID_ARGUMENT,
              "compression");
    CHECK_ERR(sy_tfrecord_write(NULL, "x", 1), SY_ERR_INVALID_ARGUMENT, "NULL");

    /* a file that may not grow past 64 KiB fails as a full disk does (write() returns EFBIG) */
    snprintf(path, sizeof path, "%s/limited.tfrecord", dir);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {64 * 1024, old.rlim_max};
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
        check_write_fails(dir, path, "File too large");
        setrlimit(RLIMIT_FSIZE, &old);
    } else {
        fprintf(stderr,
                "test_tfrecord: cannot set RLIMIT_FSIZE (%s): the file-size test is skipped\n",
                strerror(errno));
    }
    signal(SIGXFSZ, old_handler);

    /* a real full disk: a 64 KiB tmpfs, where this process may mount one (root) */
    in_tmp(dir, sizeof dir, "full");
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    if (geteuid() == 0 && mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0) {
        snprintf(path, sizeof path, "%s/data.tfrecord", dir);
        check_write_fails(dir, path, "No space left on device");
        CHECK(umount2(dir, MNT_DETACH) == 0, "umount %s: %s", dir, strerror(errno));
    } else {
        fprintf(stderr, "test_tfrecord: cannot mount a small tmpfs (not root, or not allowed): the "
                        "full-disk test "
                        "is skipped\n");
    }
}

/* ---- Examples for TensorFlow to read ----------------------------------------------- */

#define TF_EXAMPLES 20

/* Accumulates what the Examples hold, in the fixtures' JSON. */
typedef struct tf_feature {
    const char *key;
    bool var;
    sy_dtype dtype;
    int32_t rank;
    int64_t dims[2];
    json_t *values, *splits;
    int64_t total;
} tf_feature;

/* Not inlined: GCC would see the string branch reached with float arrays
 * and warn (-Warray-bounds) of a path the dtype rules out. */
static __attribute__((noinline)) void append_values(tf_feature *f, const void *values, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (f->dtype == SY_F32) {
            uint32_t bits;
            memcpy(&bits, (const float *)values + i, 4);
            json_array_append_new(f->values, json_integer(bits));
        } else if (f->dtype == SY_I64) {
            json_array_append_new(f->values, json_integer(((const int64_t *)values)[i]));
        } else {
            const sy_string *s = (const sy_string *)values + i;
            char *hex = bytes_hex(s->data, (size_t)s->size);
            json_array_append_new(f->values, json_string(hex));
            free(hex);
        }
    }
    f->total += n;
}

static void add_feature(sy_example *e, tf_feature *f, const void *values, int64_t n) {
    if (f->dtype == SY_F32) CHECK_OK(sy_example_add_floats(e, f->key, values, n));
    if (f->dtype == SY_I64) CHECK_OK(sy_example_add_int64s(e, f->key, values, n));
    if (f->dtype == SY_STRING) CHECK_OK(sy_example_add_bytes(e, f->key, values, n));
    append_values(f, values, n);
}

static int write_for_tensorflow(const char *dir) {
    static const float edge_f[] = {0.0f,   -0.0f,         1.0f / 0.0f, -1.0f / 0.0f,
                                   1e-45f, 3.4028235e38f, -2.5f,       0.1f};
    static const int64_t edge_i[] = {0, -1, 1, INT64_MIN, INT64_MAX, 127, 128, -129, 1LL << 40};
    tf_feature fs[] = {
        {"label", false, SY_I64, 0, {0}, NULL, NULL, 0},
        {"coords", false, SY_F32, 1, {3}, NULL, NULL, 0},
        {"image", false, SY_STRING, 0, {0}, NULL, NULL, 0},
        {"score", false, SY_F32, 0, {0}, NULL, NULL, 0},
        {"matrix", false, SY_I64, 2, {2, 2}, NULL, NULL, 0},
        {"tokens", true, SY_I64, 0, {0}, NULL, NULL, 0},
        {"weights", true, SY_F32, 0, {0}, NULL, NULL, 0},
        {"names", true, SY_STRING, 0, {0}, NULL, NULL, 0},
    };
    enum { NF = sizeof fs / sizeof fs[0] };
    json_t *specs = json_array(), *examples = json_array(), *parsed = json_object();
    for (int k = 0; k < NF; k++) {
        fs[k].values = json_array();
        fs[k].splits = json_array();
        json_array_append_new(fs[k].splits, json_integer(0));
        json_t *s = json_pack("{s:s, s:s, s:s}", "key", fs[k].key, "kind",
                              fs[k].var ? "var" : "fixed", "dtype", sy_dtype_name(fs[k].dtype));
        json_t *shape = json_array();
        for (int d = 0; d < fs[k].rank; d++)
            json_array_append_new(shape, json_integer(fs[k].dims[d]));
        json_object_set_new(s, "shape", shape);
        if (!strcmp(fs[k].key, "score")) json_object_set_new(s, "default", json_pack("[f]", -1.0));
        json_array_append_new(specs, s);
    }
    sy_rng rng = sy_rng_new(11, 0);
    sy_tfrecord_writer *w[3];
    char path[1024];
    for (int c = 0; c < 3; c++) {
        snprintf(path, sizeof path, "%s/examples%s.tfrecord", dir, compression_suffix[c]);
        CHECK_OK(sy_tfrecord_writer_open(path, (sy_compression)c, &w[c]));
    }
    for (int i = 0; i < TF_EXAMPLES; i++) {
        sy_example *e;
        CHECK_OK(sy_example_new(&e));
        int64_t label = sy_rng_u32(&rng) % 10,
                matrix[4] = {i, -i, edge_i[i % 9], edge_i[(i + 4) % 9]};
        float coords[3] = {sy_rng_uniform(&rng), edge_f[i % 8], (float)sy_rng_normal(&rng)},
              score = -1.0f;
        uint8_t image[16];
        for (int k = 0; k < 16; k++) image[k] = (uint8_t)sy_rng_u32(&rng);
        sy_string image_s = {image, 16};
        add_feature(e, &fs[0], &label, 1);
        add_feature(e, &fs[1], coords, 3);
        add_feature(e, &fs[2], &image_s, 1);
        if (i % 3) {
            score = sy_rng_uniform(&rng);
            add_feature(e, &fs[3], &score, 1);
        } else {
            append_values(&fs[3], &score, 1); /* the default */
        }
        add_feature(e, &fs[4], matrix, 4);
        int64_t tokens[12];
        for (int k = 0; k < i % 12; k++) tokens[k] = edge_i[(i + k) % 9] ^ (int64_t)k;
        add_feature(e, &fs[5], tokens, i % 12);
        float weights[5];
        for (int k = 0; k < i % 5; k++) weights[k] = edge_f[(i * 3 + k) % 8];
        if (i % 4 != 2) add_feature(e, &fs[6], weights, i % 5);
        static const char *words[] = {"", "a\0b", "\xff\xfe", "caf\xc3\xa9", "longer word"};
        static const int64_t word_len[] = {0, 3, 2, 5, 11};
        sy_string names[3];
        for (int k = 0; k < i % 3; k++)
            names[k] = (sy_string){(const uint8_t *)words[(i + k) % 5], word_len[(i + k) % 5]};
        if (i % 5 != 4) add_feature(e, &fs[7], names, i % 3);
        for (int k = 5; k < NF; k++) json_array_append_new(fs[k].splits, json_integer(fs[k].total));
        sy_tensor *ser;
        CHECK_OK(sy_example_serialize(e, &ser));
        sy_string s = sy_tensor_string(ser, 0);
        char *hex = bytes_hex(s.data, (size_t)s.size);
        json_array_append_new(examples, json_string(hex));
        free(hex);
        for (int c = 0; c < 3; c++) CHECK_OK(sy_tfrecord_write(w[c], s.data, (size_t)s.size));
        sy_tensor_free(ser);
        sy_example_free(e);
    }
    for (int c = 0; c < 3; c++) CHECK_OK(sy_tfrecord_writer_close(w[c]));
    for (int k = 0; k < NF; k++) {
        json_t *f = json_pack("{s:o}", "values", fs[k].values);
        if (fs[k].var) {
            json_object_set_new(f, "row_splits", fs[k].splits);
        } else {
            json_decref(fs[k].splits);
            json_t *shape = json_pack("[i]", TF_EXAMPLES);
            for (int d = 0; d < fs[k].rank; d++)
                json_array_append_new(shape, json_integer(fs[k].dims[d]));
            json_object_set_new(f, "shape", shape);
        }
        json_object_set_new(parsed, fs[k].key, f);
    }
    /* raw records: empty, an empty Example, and one larger than TFRecordDataset's 256 KiB buffer */
    json_t *raw = json_array();
    snprintf(path, sizeof path, "%s/raw.tfrecord", dir);
    sy_tfrecord_writer *rw;
    CHECK_OK(sy_tfrecord_writer_open(path, SY_COMPRESSION_NONE, &rw));
    static uint8_t big[300000];
    for (size_t k = 0; k < sizeof big; k++) big[k] = (uint8_t)(k * 7 + k / 256);
    sy_example *empty;
    sy_tensor *empty_ser;
    CHECK_OK(sy_example_new(&empty));
    CHECK_OK(sy_example_serialize(empty, &empty_ser));
    sy_string es = sy_tensor_string(empty_ser, 0);
    const sy_string raws[] = {
        {(const uint8_t *)"", 0}, es, {big, sizeof big}, {(const uint8_t *)"\0\1\2", 3}};
    for (int k = 0; k < 4; k++) {
        CHECK_OK(sy_tfrecord_write(rw, raws[k].data, (size_t)raws[k].size));
        char *hex = bytes_hex(raws[k].data, (size_t)raws[k].size);
        json_array_append_new(raw, json_string(hex));
        free(hex);
    }
    CHECK_OK(sy_tfrecord_writer_close(rw));
    sy_tensor_free(empty_ser);
    sy_example_free(empty);
    json_t *all = json_pack("{s:s, s:o, s:o, s:o, s:o}", "systolic", sy_version(), "examples",
                            examples, "specs", specs, "parsed", parsed, "raw", raw);
    snprintf(path, sizeof path, "%s/expected.json", dir);
    CHECK(json_dump_file(all, path, JSON_INDENT(1)) == 0, "cannot write %s", path);
    json_decref(all);
    /* what was written reads back here as built */
    json_t *expected = load_json(path);
    if (expected)
        check_parsed(expected, json_object_get(expected, "examples"), "systolic's Examples");
    json_decref(expected);
    return check_report("test_tfrecord --write-for-tensorflow");
}

/* ---- what `systolic convert mnist DIR --compression GZIP` wrote ------------------------ */

/* Every record of DIR's shards is the MNIST image and label of its index,
 * with its dimensions beside it. */
static int check_converted(const char *dir) {
    sy_data_split d;
    CHECK_OK(sy_mnist_load_data(&d));
    if (!d.x_train) return check_report("test_tfrecord --check-convert");
    sy_tensor *dims;
    CHECK_OK(sy_tensor_new(SY_I64, sy_shape_of(0), &dims));
    const sy_feature_spec specs[] = {
        {"image", SY_FEATURE_FIXED_LEN, SY_STRING, {0, {0}}, NULL},
        {"label", SY_FEATURE_FIXED_LEN, SY_I64, {0, {0}}, NULL},
        {"height", SY_FEATURE_FIXED_LEN, SY_I64, {0, {0}}, NULL},
        {"width", SY_FEATURE_FIXED_LEN, SY_I64, {0, {0}}, NULL},
        {"channels",
         SY_FEATURE_FIXED_LEN,
         SY_I64,
         {0, {0}},
         dims}, /* a default: the file must hold 1 anyway */
    };
    for (int split = 0; split < 2; split++) {
        const sy_tensor *x = split ? d.x_test : d.x_train, *y = split ? d.y_test : d.y_train;
        int64_t n = sy_tensor_shape(x).dims[0], shards = split ? 1 : 6, i = 0, bad = 0;
        for (int64_t k = 0; k < shards; k++) {
            char path[2048];
            snprintf(path, sizeof path, "%s/%s-%05lld-of-%05lld.tfrecord", dir,
                     split ? "test" : "train", (long long)k, (long long)shards);
            sy_tfrecord_options o = sy_tfrecord_options_default();
            o.compression = SY_COMPRESSION_GZIP;
            sy_tfrecord_reader *r;
            CHECK_OK(sy_tfrecord_reader_open(path, &o, &r));
            for (bool end = false; r && !end;) {
                const uint8_t *data;
                size_t size;
                sy_tensor *out[5];
                if (sy_tfrecord_read(r, &data, &size, &end) || end) break;
                CHECK_OK(sy_parse_single_example(data, size, specs, 5, out));
                if (!out[0] || i >= n) {
                    bad++;
                    break;
                }
                sy_string img = sy_tensor_string(out[0], 0);
                bad += img.size != 784 ||
                       memcmp(img.data, (const uint8_t *)sy_tensor_data(x) + i * 784, 784) ||
                       sy_tensor_get(out[1], 0) != sy_tensor_get(y, i) ||
                       sy_tensor_get(out[2], 0) != 28 || sy_tensor_get(out[3], 0) != 28 ||
                       sy_tensor_get(out[4], 0) != 1;
                for (int f = 0; f < 5; f++) sy_tensor_free(out[f]);
                i++;
            }
            CHECK(sy_tfrecord_reader_skipped(r) == 0, "%s: damaged records", path);
            sy_tfrecord_reader_close(r);
        }
        CHECK(i == n && bad == 0, "%s: %lld of %lld records read, %lld differ from the IDX files",
              split ? "test" : "train", (long long)i, (long long)n, (long long)bad);
    }
    sy_tensor_free(dims);
    sy_data_split_free(&d);
    return check_report("test_tfrecord --check-convert");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-for-tensorflow"))
        return write_for_tensorflow(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--check-convert")) return check_converted(argv[2]);
    if (!files_setup("tfrecord", __FILE__)) return 1;
    test_crc32c();
    test_compression_names();
    test_tensorflow_files();
    test_roundtrip();
    test_damage();
    test_reader_errors();
    test_writer();
    files_cleanup();
    return check_report("test_tfrecord");
}
