/*
 * read.c - what the dataset readers share: a file read whole and handed to
 * a parser (data_with_file, data_parse_file), byte order, and data_stream,
 * the bytes of a buffer as they are, or inflated when the buffer is gzip'd.
 *
 * Files are opened and read by io (src/io/file.c): without blocking, only
 * when they are regular files, and whole, so the parsers work from memory
 * (and fuzz targets can feed them bytes). The files this module reads are
 * tens of megabytes, small next to the tensors made from them; what a
 * gzip'd file holds is never inflated whole: data_stream inflates as its
 * reader asks for bytes (the IDX reader straight into a tensor, the tar
 * reader one member at a time).
 *
 * Gzip is recognised by its magic (1f 8b). A gzip file may hold several
 * members one after the other (gzip's own concatenation rule); their
 * contents are read as one stream. Anything after the last member that is
 * not another member is an error. Messages give the byte offset in the
 * compressed file for damaged compressed data, and `out`, the offset in the
 * decompressed stream, lets readers name where their own format broke.
 */
#include "data_internal.h"

#include <string.h>

sy_status data_with_file(const char *path, data_bytes_fn fn, void *ctx) {
    uint8_t *buf;
    size_t n;
    sy_status st = io_read_file(path, &buf, &n);
    if (st) return st;
    st = fn(buf, n, path, ctx);
    sy_free(buf);
    return st;
}

typedef struct tensor_parse {
    data_parser parse;
    sy_tensor **out;
} tensor_parse;

static sy_status parse_tensor(const uint8_t *buf, size_t n, const char *path, void *ctx) {
    tensor_parse *t = ctx;
    return t->parse(buf, n, path, t->out);
}

sy_status data_parse_file(const char *path, data_parser parse, sy_tensor **out) {
    *out = NULL;
    tensor_parse t = {parse, out};
    return data_with_file(path, parse_tensor, &t);
}

void data_byteswap(void *data, int64_t count, size_t size) {
    uint8_t *p = data;
    for (int64_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* ---- data_stream: the bytes of a buffer, plain or gzip'd ------------------------ */

sy_status data_stream_open(data_stream *s, const uint8_t *buf, size_t n, const char *what) {
    memset(s, 0, sizeof *s);
    s->buf = buf;
    s->n = n;
    s->what = what;
    s->gz = n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
    /* zlib counts input in uInt; the datasets' files are far below 4 GiB. */
    if (s->gz && n > UINT32_MAX)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: gzip files over 4 GiB are not supported (%zu bytes)", what, n);
    s->z.next_in = (Bytef *)buf;
    s->z.avail_in = (uInt)n;
    return SY_OK;
}

void data_stream_close(data_stream *s) {
    if (s->z_init) inflateEnd(&s->z);
    s->z_init = false;
}

static size_t gz_pos(const data_stream *s) {
    return (size_t)(s->z.next_in - s->buf);
}

/* Start the next gzip member at the current input position. */
static sy_status gz_begin_member(data_stream *s) {
    size_t at = gz_pos(s);
    if (s->n - at < 2 || s->buf[at] != 0x1f || s->buf[at + 1] != 0x8b)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: %zu bytes of trailing garbage after the gzip stream, at byte %zu",
                        s->what, s->n - at, at);
    int rc = s->z_init ? inflateReset(&s->z) : inflateInit2(&s->z, 16 + MAX_WBITS);
    if (rc != Z_OK)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: cannot start zlib (error %d)", s->what, rc);
    s->z_init = true;
    s->in_member = true;
    return SY_OK;
}

sy_status data_stream_read(data_stream *s, void *dst, size_t len, size_t *got) {
    *got = 0;
    if (!s->gz) {
        size_t take = len < s->n - s->pos ? len : s->n - s->pos;
        memcpy(dst, s->buf + s->pos, take);
        s->pos += take;
        s->out += take;
        *got = take;
        return SY_OK;
    }
    while (*got < len) {
        if (!s->in_member) {
            if (gz_pos(s) == s->n) break; /* the end of the last member: the end of the stream */
            sy_status st = gz_begin_member(s);
            if (st) return st;
        }
        size_t want = len - *got < (1u << 30) ? len - *got : (1u << 30);
        s->z.next_out = (Bytef *)dst + *got;
        s->z.avail_out = (uInt)want;
        int rc = inflate(&s->z, Z_NO_FLUSH);
        size_t made = want - s->z.avail_out;
        *got += made;
        s->out += made;
        if (rc == Z_STREAM_END) {
            s->in_member = false;
        } else if (rc == Z_BUF_ERROR || (rc == Z_OK && s->z.avail_in == 0 && s->z.avail_out > 0)) {
            return sy_error(
                SY_ERR_CORRUPT,
                "%s: truncated gzip stream: the file ends at byte %zu inside a compressed member "
                "(after %llu bytes of data); the file is incomplete, download it again",
                s->what, s->n, (unsigned long long)s->out);
        } else if (rc != Z_OK) {
            return sy_error(SY_ERR_CORRUPT,
                            "%s: damaged gzip stream near byte %zu (%s, after %llu bytes of data)",
                            s->what, gz_pos(s), s->z.msg ? s->z.msg : zError(rc),
                            (unsigned long long)s->out);
        }
    }
    return SY_OK;
}

uint64_t data_stream_room(const data_stream *s) {
    return s->gz ? data_inflate_bound(s->n) : (uint64_t)(s->n - s->pos);
}

const char *data_stream_where(const data_stream *s) {
    return s->gz ? " of the decompressed data" : "";
}
