/*
 * fuzz_tfrecord.c - libFuzzer target for the TFRecord reader: any bytes
 * must give records or an error, never a crash, a leak, undefined
 * behaviour or an allocation out of proportion to the input.
 *
 * Each input is read four ways, through a buffer of 1 to 64 bytes (so
 * headers and records straddle the buffer's edges): as a plain file, with
 * and without skip_corrupt; as a GZIP and as a ZLIB file (for compressed
 * seeds, and zlib's own handling of garbage). Then the input is compressed
 * here, both ways, and read again: the decompressing path must give the
 * same records, the same count of skipped ones and the same ending -- the
 * same error at the same record and byte offset -- as the plain one.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_tfrecord CORPUS_DIR tests/fuzz/corpus/fuzz_tfrecord
 */
#include "data/data_internal.h"

#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a reading gave: the records (their CRCs chained), how it ended. */
typedef struct outcome {
    uint32_t crc;
    int64_t records, skipped, bad_record;
    unsigned long long bad_byte;
    sy_status st;
} outcome;

static outcome read_all(const uint8_t *data, size_t size, sy_compression c, bool skip,
                        int64_t buffer) {
    outcome o = {0, 0, 0, -1, 0, SY_OK};
    sy_tfrecord_options opt = sy_tfrecord_options_default();
    opt.compression = c;
    opt.skip_corrupt = skip;
    opt.buffer_size = buffer;
    sy_tfrecord_reader *r;
    SY_ASSERT(tfrecord_reader_open_memory(data, size, "fuzz", &opt, &r) == SY_OK);
    for (bool end = false; !end;) {
        const uint8_t *rec;
        size_t n;
        o.st = sy_tfrecord_read(r, &rec, &n, &end);
        if (o.st) {
            const char *at = strstr(sy_last_error(), "corrupt record ");
            SY_ASSERT(o.st == SY_ERR_CORRUPT && at);
            SY_ASSERT(sscanf(at, "corrupt record %lld at byte %llu", (long long *)&o.bad_record,
                             &o.bad_byte) == 2);
            break;
        }
        if (end) break;
        uint8_t len[8];
        for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
        o.crc = crc32c_extend(crc32c_extend(o.crc, len, 8), rec, n);
        o.records++;
    }
    o.skipped = sy_tfrecord_reader_skipped(r);
    SY_ASSERT(skip ? o.st == SY_OK : o.skipped == 0);
    sy_tfrecord_reader_close(r);
    return o;
}

/* The input as one zlib (window bits 15) or gzip (31) stream. */
static uint8_t *compress_input(const uint8_t *data, size_t size, int bits, size_t *n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    SY_ASSERT(deflateInit2(&z, 1, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    size_t cap = deflateBound(&z, (uLong)size) + 32;
    uint8_t *out = sy_malloc(cap);
    SY_ASSERT(out);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    SY_ASSERT(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *n = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static void same(const outcome *a, const outcome *b) {
    SY_ASSERT(a->crc == b->crc && a->records == b->records && a->skipped == b->skipped &&
              a->st == b->st);
    SY_ASSERT(a->bad_record == b->bad_record && a->bad_byte == b->bad_byte);
}

/* skip_corrupt's warnings, one per damaged record: not wanted a million
 * times on stderr. */
static void quiet(void *ctx, sy_log_level level, const char *message) { (void)ctx, (void)level, (void)message; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_set_log(quiet, NULL);
    int64_t buffer = 1 + (int64_t)(size % 64);
    outcome plain = read_all(data, size, SY_COMPRESSION_NONE, false, buffer);
    outcome skipping = read_all(data, size, SY_COMPRESSION_NONE, true, buffer);
    SY_ASSERT(skipping.records >= plain.records);
    read_all(data, size, SY_COMPRESSION_GZIP, size % 2, buffer);
    read_all(data, size, SY_COMPRESSION_ZLIB, size % 2, buffer);
    if (size > (1u << 20)) return 0;
    for (int bits = 15; bits <= 31; bits += 16) {
        size_t n;
        uint8_t *z = compress_input(data, size, bits, &n);
        sy_compression c = bits == 31 ? SY_COMPRESSION_GZIP : SY_COMPRESSION_ZLIB;
        outcome again = read_all(z, n, c, false, 64 - buffer + 1);
        same(&plain, &again);
        again = read_all(z, n, c, true, buffer);
        same(&skipping, &again);
        sy_free(z);
    }
    return 0;
}
