/*
 * tfrecord.c - TensorFlow's TFRecord files: reading record by record,
 * and writing them atomically.
 *
 * A TFRecord file is a sequence of records, each framed as
 *
 *   uint64 length           little-endian
 *   uint32 masked CRC32C    of the 8 length bytes
 *   byte   data[length]
 *   uint32 masked CRC32C    of the data
 *
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (crc32c.c,
 * tfrecord_mask). The whole file may be one compressed stream: "ZLIB" is a
 * zlib stream (RFC 1950), "GZIP" a gzip stream (RFC 1952), as TensorFlow's
 * ZlibOutputBuffer writes them; several streams one after another are read
 * as one (gzip's own concatenation rule, and what `cat a.gz b.gz` makes).
 * Nothing in the file says which compression it has: the reader is told,
 * as TFRecordDataset is.
 *
 * Reading. The reader reads buffer_size bytes at a time (TFRecordDataset's
 * buffer_size, 256 KiB by default) and, when compressed, inflates them into
 * a window of the same size; records are copied out of that window into a
 * record buffer the reader owns. A record's buffer grows as its bytes
 * actually arrive, never to the length its header claims, so a forged
 * length cannot make the reader allocate more than the file holds.
 *
 * Damage, and what the reader does with it. Every error names the file,
 * the record's index (0-based, damaged records counted) and the byte
 * offset where the record starts (in the decompressed stream when
 * compressed; damaged compressed data also gives its offset in the file):
 *
 *   - the data's checksum does not match: the length was good (its own
 *     checksum matched), so the next record is found where it should be;
 *     with skip_corrupt the record is counted and skipped;
 *   - the length's checksum does not match, the file ends inside a header
 *     or inside the data (a truncated file, or a length field that is
 *     wrong but has a matching checksum), or the compressed stream is
 *     damaged: nothing after this point can be found reliably (a length is
 *     the only way to the next record, and deflate cannot be resumed in
 *     the middle), so with skip_corrupt the record is counted and the file
 *     ends there. The records before it have all been delivered.
 * Without skip_corrupt the first damage is SY_ERR_CORRUPT, and the reader
 * keeps returning that error. A failing read() is SY_ERR_IO, never
 * skipped: it says nothing about the data.
 *
 * Writing. Records go through a 256 KiB buffer (deflated on the way when
 * compressed) to a temporary file beside the target, ".<name>.tmp-XXXXXX"
 * (mkstemp), so the rename at close is atomic; close flushes, fsyncs,
 * renames and fsyncs the directory. A failure at any step (a full disk, a
 * file past RLIMIT_FSIZE) is SY_ERR_IO naming the target and the reason,
 * removes the temporary file and leaves an earlier file of the target's
 * name as it was; after the first failed write every later call repeats
 * that error, so a loop of writes can check only the close.
 */
#define _GNU_SOURCE /* mkostemp: the temporary file with O_CLOEXEC */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define TFRECORD_BUFFER (256 * 1024) /* TFRecordDataset's default buffer_size */
#define HEADER_BYTES    12           /* length, its masked CRC */
#define FOOTER_BYTES    4            /* the data's masked CRC */
#define RECORD_GROWTH   (64 * 1024)  /* a record's buffer grows by at least this much */
#define ZLIB_CHUNK      (1u << 30)   /* zlib counts bytes in uInt: at most this per call */

static const char *compression_names[] = {"NONE", "ZLIB", "GZIP"};

sy_status sy_compression_from_name(const char *name, sy_compression *out) {
    *out = SY_COMPRESSION_NONE;
    if (!name || !*name) return SY_OK;
    for (int c = 0; c < 3; c++)
        if (!strcasecmp(name, compression_names[c])) {
            *out = (sy_compression)c;
            return SY_OK;
        }
    return sy_error(SY_ERR_INVALID_ARGUMENT,
                    "unknown compression '%s': expected \"\" or \"NONE\", \"ZLIB\" or \"GZIP\"",
                    name);
}

sy_tfrecord_options sy_tfrecord_options_default(void) {
    return (sy_tfrecord_options){
        .compression = SY_COMPRESSION_NONE, .buffer_size = 0, .skip_corrupt = false};
}

static bool valid_compression(sy_compression c) {
    return c == SY_COMPRESSION_NONE || c == SY_COMPRESSION_ZLIB || c == SY_COMPRESSION_GZIP;
}

/* ==== reading ======================================================================= */

struct sy_tfrecord_reader {
    char *path; /* the file's path, or the name given to a reader of memory */
    sy_tfrecord_options o;
    bool compressed;
    /* the raw bytes: a file read through `in`, or memory handed out in chunks */
    int fd; /* -1 for memory */
    const uint8_t *mem;
    size_t mem_n, mem_pos;
    uint8_t *in;
    size_t in_cap;
    const uint8_t *raw; /* the latest raw chunk */
    size_t raw_n;
    uint64_t raw_read; /* raw bytes taken in so far */
    bool raw_eof;
    /* the decoded stream: the window the records are copied out of */
    const uint8_t *win;
    size_t win_len, win_pos;
    uint8_t *out; /* inflate's output (the window, when compressed) */
    size_t out_cap;
    z_stream z;
    bool z_init, z_in_stream;
    uint64_t offset; /* bytes of the decoded stream handed out */
    /* records */
    uint8_t *rec;
    size_t rec_cap;
    int64_t index, skipped;
    bool done;
    bool warned;
    sy_status z_pending; /* damage found after the bytes inflate gave last: reported when they are
                            used up */
    sy_status failed;    /* sticky: every later read repeats it */
    char *failure;
    char detail[256]; /* why the compressed stream failed, for the record's message */
};

/* Take the next raw chunk: from the file into `in`, or the next part of
 * memory. SY_ERR_IO for a failing read(). */
static sy_status raw_more(sy_tfrecord_reader *r) {
    r->raw_n = 0;
    if (r->fd < 0) {
        size_t left = r->mem_n - r->mem_pos;
        r->raw = r->mem + r->mem_pos;
        r->raw_n = left < ZLIB_CHUNK ? left : ZLIB_CHUNK;
        r->mem_pos += r->raw_n;
    } else {
        ssize_t k;
        do k = read(r->fd, r->in, r->in_cap);
        while (k < 0 && errno == EINTR);
        if (k < 0) return sy_error(SY_ERR_IO, "cannot read '%s': %s", r->path, strerror(errno));
        r->raw = r->in;
        r->raw_n = (size_t)k;
    }
    r->raw_read += r->raw_n;
    if (r->raw_n == 0) r->raw_eof = true;
    return SY_OK;
}

/* Where the inflater is in the file. */
static uint64_t raw_position(const sy_tfrecord_reader *r) {
    return r->raw_read - r->z.avail_in;
}

/* Inflate the next bytes into the window; none at the end of the last
 * stream. SY_ERR_CORRUPT for damaged or truncated compressed data, with
 * the reason in r->detail (the caller names the record). */
static sy_status inflate_more(sy_tfrecord_reader *r) {
    const char *kind = compression_names[r->o.compression];
    if (r->z_pending) return r->z_pending;
    for (;;) {
        if (r->z.avail_in == 0 && !r->raw_eof) {
            sy_status st = raw_more(r);
            if (st) return st;
            r->z.next_in = (Bytef *)r->raw;
            r->z.avail_in = (uInt)r->raw_n;
            continue;
        }
        if (!r->z_in_stream) {
            if (r->z.avail_in == 0) return SY_OK; /* the end of the last stream */
            int bits = r->o.compression == SY_COMPRESSION_GZIP ? 16 + MAX_WBITS : MAX_WBITS;
            int rc = r->z_init ? inflateReset(&r->z) : inflateInit2(&r->z, bits);
            if (rc != Z_OK) {
                snprintf(r->detail, sizeof r->detail, "cannot start zlib (error %d)", rc);
                return SY_ERR_OUT_OF_MEMORY;
            }
            r->z_init = r->z_in_stream = true;
        }
        r->z.next_out = r->out;
        r->z.avail_out = (uInt)r->out_cap;
        int rc = inflate(&r->z, Z_NO_FLUSH);
        size_t made = r->out_cap - r->z.avail_out;
        if (rc == Z_STREAM_END) {
            r->z_in_stream = false;
        } else if (rc == Z_BUF_ERROR || (rc == Z_OK && made == 0)) {
            if (r->raw_eof && r->z.avail_in == 0) {
                snprintf(r->detail, sizeof r->detail,
                         "the %s stream is truncated: the file ends at byte %llu inside it", kind,
                         (unsigned long long)r->raw_read);
                return SY_ERR_CORRUPT;
            }
        } else if (rc != Z_OK) {
            snprintf(r->detail, sizeof r->detail, "damaged %s data near byte %llu of the file (%s)",
                     kind, (unsigned long long)raw_position(r), r->z.msg ? r->z.msg : zError(rc));
            if (!made) return SY_ERR_CORRUPT;
            r->z_pending = SY_ERR_CORRUPT; /* the records before the damage come first */
        }
        if (made) {
            r->win = r->out;
            r->win_len = made;
            r->win_pos = 0;
            return SY_OK;
        }
    }
}

/* Up to len more bytes of the decoded stream into dst; *got < len only at
 * its end. */
static sy_status read_bytes(sy_tfrecord_reader *r, uint8_t *dst, size_t len, size_t *got) {
    *got = 0;
    while (*got < len) {
        if (r->win_pos == r->win_len) {
            r->win_len = r->win_pos = 0;
            sy_status st;
            if (r->compressed) {
                st = inflate_more(r);
            } else if (!r->raw_eof) {
                st = raw_more(r);
                r->win = r->raw;
                r->win_len = r->raw_n;
            } else {
                st = SY_OK;
            }
            if (st) return st;
            if (r->win_len == 0) {
                if (r->compressed || r->raw_eof) break;
                continue;
            }
        }
        size_t take = sy_min64((int64_t)(len - *got), (int64_t)(r->win_len - r->win_pos));
        memcpy(dst + *got, r->win + r->win_pos, take);
        r->win_pos += take;
        *got += take;
        r->offset += take;
    }
    return SY_OK;
}

static void reader_fail(sy_tfrecord_reader *r, sy_status st) {
    r->failed = st;
    r->failure = sy_strdup(sy_last_error());
    r->done = true;
}

/* A damaged record: SY_ERR_CORRUPT naming it, or with skip_corrupt counted
 * and skipped (SY_OK). `ends`: no later record can be found. */
static sy_status __attribute__((format(printf, 5, 6)))
damaged(sy_tfrecord_reader *r, int64_t index, uint64_t at, bool ends, const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    sy_status st = sy_error(SY_ERR_CORRUPT, "%s: corrupt record %lld at byte %llu%s: %s%s", r->path,
                            (long long)index, (unsigned long long)at,
                            r->compressed ? " of the decompressed data" : "", why,
                            ends ? "; no later record can be found in this file" : "");
    r->index = index + 1;
    if (ends) r->done = true;
    if (!r->o.skip_corrupt) {
        reader_fail(r, st);
        return st;
    }
    r->skipped++;
    sy_log(r->warned ? SY_LOG_INFO : SY_LOG_WARNING, "skipping a corrupt record (skip_corrupt): %s",
           sy_last_error());
    r->warned = true;
    sy_clear_error();
    return SY_OK;
}

/* A status from read_bytes: IO failures are the reader's end, damaged
 * compressed data ends the file as a damaged record. */
static sy_status read_failed(sy_tfrecord_reader *r, sy_status st, int64_t index, uint64_t at) {
    if (st != SY_ERR_CORRUPT) {
        if (st == SY_ERR_OUT_OF_MEMORY) sy_error(st, "%s: %s", r->path, r->detail);
        reader_fail(r, st);
        return st;
    }
    return damaged(r, index, at, true, "%s", r->detail);
}

/* Make room for `need` bytes of a record that has `have`: growing as the
 * bytes arrive, so a forged length costs no more than the file holds. */
static sy_status record_room(sy_tfrecord_reader *r, size_t have, size_t need, size_t *room) {
    if (r->rec_cap <= have) {
        size_t cap = r->rec_cap * 2 > have + RECORD_GROWTH ? r->rec_cap * 2 : have + RECORD_GROWTH;
        if (cap > need) cap = need;
        uint8_t *p = sy_realloc_array(r->rec, r->rec_cap, cap, 1);
        if (!p)
            return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for a record of %zu bytes",
                            r->path, need - FOOTER_BYTES);
        r->rec = p;
        r->rec_cap = cap;
    }
    *room = (r->rec_cap < need ? r->rec_cap : need) - have;
    return SY_OK;
}

/* issue 17: why a plain file's first header is bad, when the file is
 * compressed and read as if it were not (nothing in a TFRecord file says
 * which; TensorFlow only reports a corrupt record). gzip streams start
 * 1f 8b; zlib's start 78 with a check that makes the first two bytes, big
 * endian, a multiple of 31. */
static const char *compressed_hint(const sy_tfrecord_reader *r, uint64_t at, const uint8_t *head) {
    if (r->compressed || at != 0) return "";
    if (head[0] == 0x1f && head[1] == 0x8b)
        return "; the file looks GZIP-compressed (it starts with gzip's magic bytes 1f 8b): read it with "
               "compression GZIP";
    if (head[0] == 0x78 && (head[0] << 8 | head[1]) % 31 == 0)
        return "; the file looks ZLIB-compressed (it starts with a zlib header): read it with compression ZLIB";
    return "";
}

/* One record: in *data, or *end, or neither when a damaged record was
 * counted and skipped (skip_corrupt): the caller then tries again. */
static sy_status next_record(sy_tfrecord_reader *r, const uint8_t **data, size_t *n, bool *end) {
    if (r->done) {
        *end = true;
        return SY_OK;
    }
    int64_t index = r->index;
    uint64_t at = r->offset;
    uint8_t head[HEADER_BYTES];
    size_t got;
    sy_status st = read_bytes(r, head, HEADER_BYTES, &got);
    if (st) return read_failed(r, st, index, at);
    if (got == 0) {
        r->done = *end = true;
        return SY_OK;
    }
    if (got < HEADER_BYTES)
        return damaged(r, index, at, true,
                       "truncated: the file ends %zu bytes into the record's %d-byte header", got,
                       HEADER_BYTES);
    uint64_t len = io_le64(head);
    uint32_t stored = io_le32(head + 8), computed = tfrecord_mask(crc32c_extend(0, head, 8));
    if (stored != computed)
        return damaged(r, index, at, true,
                       "the length field's checksum does not match (stored %08x, computed %08x), "
                       "so its length (%llu) cannot be trusted%s",
                       stored, computed, (unsigned long long)len, compressed_hint(r, at, head));
    if (len > SIZE_MAX - FOOTER_BYTES)
        return damaged(r, index, at, true, "a length of %llu bytes is more than memory can hold",
                       (unsigned long long)len);
    size_t need = (size_t)len + FOOTER_BYTES, have = 0;
    while (have < need) {
        size_t room = 0;
        if ((st = record_room(r, have, need, &room))) {
            reader_fail(r, st);
            return st;
        }
        if ((st = read_bytes(r, r->rec + have, room, &got))) return read_failed(r, st, index, at);
        have += got;
        if (got < room) break;
    }
    if (have < need)
        return damaged(r, index, at, true,
                       "truncated: its length field says %llu bytes of data and a 4-byte checksum "
                       "follow, the file ends after %zu",
                       (unsigned long long)len, have);
    stored = io_le32(r->rec + len);
    computed = tfrecord_mask(crc32c_extend(0, r->rec, (size_t)len));
    if (stored != computed)
        return damaged(r, index, at, false,
                       "the data's checksum does not match (stored %08x, computed %08x): its %llu "
                       "bytes are damaged",
                       stored, computed, (unsigned long long)len);
    r->index = index + 1;
    *data = r->rec; /* never NULL: the buffer holds at least the checksum */
    *n = (size_t)len;
    return SY_OK;
}

sy_status sy_tfrecord_read(sy_tfrecord_reader *r, const uint8_t **data, size_t *n, bool *end) {
    *data = NULL;
    *n = 0;
    *end = false;
    if (!r) return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_tfrecord_read: the reader is NULL");
    if (r->failed)
        return sy_error(r->failed, "%s", r->failure ? r->failure : "the reader failed before");
    sy_status st;
    do st = next_record(r, data, n, end);
    while (!st && !*data && !*end);
    return st;
}

int64_t sy_tfrecord_reader_skipped(const sy_tfrecord_reader *r) {
    return r ? r->skipped : 0;
}

int64_t sy_tfrecord_reader_records(const sy_tfrecord_reader *r) { return r ? r->index : 0; }

void sy_tfrecord_reader_close(sy_tfrecord_reader *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    if (r->z_init) inflateEnd(&r->z);
    sy_free(r->path);
    sy_free(r->in);
    sy_free(r->out);
    sy_free(r->rec);
    sy_free(r->failure);
    sy_free(r);
}

/* A reader with its buffers, reading nothing yet. */
static sy_status reader_new(const char *what, const sy_tfrecord_options *options, bool file,
                            sy_tfrecord_reader **out) {
    *out = NULL;
    sy_tfrecord_options o = options ? *options : sy_tfrecord_options_default();
    if (!valid_compression(o.compression))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: invalid compression %d (SY_COMPRESSION_NONE, _ZLIB, _GZIP)", what,
                        (int)o.compression);
    if (o.buffer_size < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: buffer_size %lld is negative (0: %d bytes)",
                        what, (long long)o.buffer_size, TFRECORD_BUFFER);
    size_t size = o.buffer_size ? (size_t)sy_min64(o.buffer_size, ZLIB_CHUNK) : TFRECORD_BUFFER;
    sy_tfrecord_reader *r = sy_calloc(1, sizeof *r);
    if (!r) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for a TFRecord reader", what);
    r->fd = -1;
    r->o = o;
    r->compressed = o.compression != SY_COMPRESSION_NONE;
    r->path = sy_strdup(what);
    bool ok = r->path != NULL;
    if (file) {
        r->in_cap = size;
        ok = ok && (r->in = sy_malloc(size));
    }
    if (r->compressed) {
        r->out_cap = size;
        ok = ok && (r->out = sy_malloc(size));
    }
    if (!ok) {
        sy_tfrecord_reader_close(r);
        return sy_error(SY_ERR_OUT_OF_MEMORY,
                        "%s: out of memory for a TFRecord reader's %zu-byte buffers", what, size);
    }
    *out = r;
    return SY_OK;
}

sy_status sy_tfrecord_reader_open(const char *path, const sy_tfrecord_options *options,
                                  sy_tfrecord_reader **out) {
    *out = NULL;
    if (!path)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_tfrecord_reader_open: the path is NULL");
    int fd;
    sy_status st = io_open_read(path, NULL, &fd, NULL);
    if (st) return st;
    st = reader_new(path, options, true, out);
    if (st) {
        close(fd);
        return st;
    }
    (*out)->fd = fd;
    return SY_OK;
}

sy_status tfrecord_reader_open_memory(const uint8_t *buf, size_t n, const char *what,
                                      const sy_tfrecord_options *options,
                                      sy_tfrecord_reader **out) {
    sy_status st = reader_new(what, options, false, out);
    if (st) return st;
    (*out)->mem = buf;
    (*out)->mem_n = n;
    return SY_OK;
}

/* ==== writing ======================================================================= */

struct sy_tfrecord_writer {
    char *path, *tmp, *dir;
    int fd;
    sy_compression compression;
    z_stream z;
    bool z_init;
    uint8_t *buf; /* bytes on their way to the file */
    size_t cap, len;
    sy_status failed; /* sticky: every later call repeats it */
    char *failure;
};

static sy_status writer_fail(sy_tfrecord_writer *w, sy_status st) {
    if (!w->failed) {
        w->failed = st;
        w->failure = sy_strdup(sy_last_error());
    }
    return st;
}

static sy_status write_failed(sy_tfrecord_writer *w, int err) {
    return writer_fail(w, sy_error(SY_ERR_IO,
                                   "cannot write '%s' (through its temporary file '%s'): %s",
                                   w->path, w->tmp, strerror(err)));
}

static sy_status flush_buf(sy_tfrecord_writer *w) {
    for (size_t done = 0; done < w->len;) {
        ssize_t k = write(w->fd, w->buf + done, w->len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return write_failed(w, k < 0 ? errno : ENOSPC);
        done += (size_t)k;
    }
    w->len = 0;
    return SY_OK;
}

/* Deflate n bytes (or finish the stream) into the buffer, flushing it to
 * the file as it fills. */
static sy_status deflate_bytes(sy_tfrecord_writer *w, const uint8_t *p, size_t n, int flush) {
    for (;;) {
        uInt chunk = (uInt)(n < ZLIB_CHUNK ? n : ZLIB_CHUNK);
        w->z.next_in = (Bytef *)p;
        w->z.avail_in = chunk;
        int rc;
        do {
            if (w->len == w->cap && flush_buf(w)) return w->failed;
            w->z.next_out = w->buf + w->len;
            w->z.avail_out = (uInt)(w->cap - w->len);
            rc = deflate(&w->z, chunk == n ? flush : Z_NO_FLUSH);
            w->len = w->cap - w->z.avail_out;
            if (rc == Z_STREAM_ERROR)
                return writer_fail(w,
                                   sy_error(SY_ERR_INTERNAL, "%s: zlib's deflate failed", w->path));
        } while (w->z.avail_out == 0 || (flush == Z_FINISH && chunk == n && rc != Z_STREAM_END));
        n -= chunk;
        if (!n) return SY_OK;
        p += chunk;
    }
}

void tfrecord_frame(const void *data, size_t n, uint8_t head[12], uint8_t foot[4]) {
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t c = tfrecord_mask(crc32c_extend(0, head, 8)),
             d = tfrecord_mask(crc32c_extend(0, data, n));
    for (int i = 0; i < 4; i++) {
        head[8 + i] = (uint8_t)(c >> (8 * i));
        foot[i] = (uint8_t)(d >> (8 * i));
    }
}

static sy_status emit(sy_tfrecord_writer *w, const void *data, size_t n) {
    if (w->compression != SY_COMPRESSION_NONE)
        return n ? deflate_bytes(w, data, n, Z_NO_FLUSH) : SY_OK;
    const uint8_t *p = data;
    while (n) {
        if (w->len == w->cap && flush_buf(w)) return w->failed;
        size_t take = n < w->cap - w->len ? n : w->cap - w->len;
        memcpy(w->buf + w->len, p, take);
        w->len += take;
        p += take;
        n -= take;
    }
    return SY_OK;
}

static void writer_free(sy_tfrecord_writer *w) {
    if (w->fd >= 0) close(w->fd);
    if (w->tmp && w->tmp[0]) unlink(w->tmp);
    if (w->z_init) deflateEnd(&w->z);
    sy_free(w->path);
    sy_free(w->tmp);
    sy_free(w->dir);
    sy_free(w->buf);
    sy_free(w->failure);
    sy_free(w);
}

sy_status sy_tfrecord_writer_open(const char *path, sy_compression compression,
                                  sy_tfrecord_writer **out) {
    *out = NULL;
    if (!path || !*path)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_tfrecord_writer_open: no path");
    if (!valid_compression(compression))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: invalid compression %d (SY_COMPRESSION_NONE, _ZLIB, _GZIP)", path,
                        (int)compression);
    /* through a symbolic link to its target; never over a FIFO or device */
    char target[PATH_MAX];
    int mode;
    sy_status tst = io_write_target(path, target, sizeof target, &mode);
    if (tst) return tst;
    const char *named = path;
    path = target;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return sy_error(SY_ERR_IO, "cannot write '%s': it names a directory", named);
    sy_tfrecord_writer *w = sy_calloc(1, sizeof *w);
    if (!w) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for a TFRecord writer", path);
    w->fd = -1;
    w->compression = compression;
    /* the directory: "." for a bare name, "/" for a name in the root */
    size_t dir_len = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    w->path = sy_strdup(path);
    w->dir = sy_malloc(dir_len + 1);
    w->tmp = sy_malloc(dir_len + strlen(base) + 16);
    w->cap = TFRECORD_BUFFER;
    w->buf = sy_malloc(w->cap);
    if (!w->path || !w->dir || !w->tmp || !w->buf) {
        writer_free(w);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for a TFRecord writer", path);
    }
    memcpy(w->dir, slash ? path : ".", dir_len);
    w->dir[dir_len] = '\0';
    sprintf(w->tmp, "%s/.%s.tmp-XXXXXX", w->dir, base);
    w->fd = mkostemp(w->tmp, O_CLOEXEC);
    if (w->fd < 0) {
        int err = errno;
        w->tmp[0] = '\0';
        sy_status st =
            sy_error(SY_ERR_IO, "cannot write '%s': cannot create a temporary file in '%s': %s",
                     path, w->dir, strerror(err));
        writer_free(w);
        return st;
    }
    if (compression != SY_COMPRESSION_NONE) {
        int bits = compression == SY_COMPRESSION_GZIP ? 16 + MAX_WBITS : MAX_WBITS;
        if (deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) !=
            Z_OK) {
            writer_free(w);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: cannot start zlib's deflate", path);
        }
        w->z_init = true;
    }
    *out = w;
    return SY_OK;
}

sy_status sy_tfrecord_write(sy_tfrecord_writer *w, const void *data, size_t n) {
    if (!w) return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_tfrecord_write: the writer is NULL");
    if (w->failed)
        return sy_error(w->failed, "%s", w->failure ? w->failure : "an earlier write failed");
    if (!data && n)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: a record of %zu bytes at NULL", w->path, n);
    uint8_t head[HEADER_BYTES], foot[FOOTER_BYTES];
    tfrecord_frame(data, n, head, foot);
    sy_status st = emit(w, head, sizeof head);
    if (!st) st = emit(w, data, n);
    if (!st) st = emit(w, foot, sizeof foot);
    return st;
}

sy_status sy_tfrecord_writer_close(sy_tfrecord_writer *w) {
    if (!w) return SY_OK;
    sy_status st = w->failed;
    if (st) sy_error(st, "%s", w->failure ? w->failure : "an earlier write failed");
    if (!st && w->compression != SY_COMPRESSION_NONE) st = deflate_bytes(w, NULL, 0, Z_FINISH);
    if (!st) st = flush_buf(w);
    if (!st && (fchmod(w->fd, 0644) != 0 || fsync(w->fd) != 0)) st = write_failed(w, errno);
    if (!st) {
        int rc = close(w->fd);
        w->fd = -1;
        if (rc != 0) st = write_failed(w, errno);
    }
    if (!st && rename(w->tmp, w->path) != 0)
        st = writer_fail(w, sy_error(SY_ERR_IO, "cannot rename '%s' to '%s': %s", w->tmp, w->path,
                                     strerror(errno)));
    if (!st) {
        w->tmp[0] = '\0'; /* renamed: nothing to remove */
        io_sync_dir(w->dir);
    } else if (w->failure) {
        sy_error(st, "%s; the temporary file was removed and any earlier '%s' left as it was",
                 w->failure, w->path);
    }
    writer_free(w);
    return st;
}

void sy_tfrecord_writer_abort(sy_tfrecord_writer *w) {
    if (w) writer_free(w);
}
