/*
 * idx.c - the IDX reader (LeCun's format for MNIST, also used by
 * Fashion-MNIST), plain or gzip-compressed.
 *
 * An IDX file is a 4-byte magic (0, 0, a type code, the rank), the rank's
 * dimensions as big-endian int32, then the elements, big-endian, row-major:
 *
 *   0x08 unsigned byte -> SY_U8      0x0C int    -> SY_I32
 *   0x09 signed byte   -> SY_I32     0x0D float  -> SY_F32
 *   0x0B short         -> SY_I32     0x0E double -> SY_F64
 *
 * Files as published are gzip'd; gzip is recognised by its magic (1f 8b)
 * and inflated with zlib as the bytes are needed. A gzip file may hold
 * several members one after the other (gzip's own concatenation rule); their
 * contents are read as one stream. Anything after the last member that is
 * not another member is an error, as are bytes after the IDX body.
 *
 * All reading goes through idx_src, which hands out the next bytes of the
 * (decompressed) stream. The header is read first; the size it implies is
 * checked against what the input can possibly hold (its exact length for a
 * plain file, deflate's 1032:1 limit for gzip) before the tensor is
 * allocated, and the body is then read straight into the tensor's memory and
 * widened/byte-swapped in place, so the file's data is never copied twice.
 */
#include "data_internal.h"

#include <string.h>
#include <zlib.h>

typedef struct idx_src {
    const uint8_t *buf;
    size_t n;
    const char *what;
    bool gz;
    size_t pos;     /* plain: offset of the next byte */
    uint64_t out;   /* bytes handed out so far (= the stream offset) */
    z_stream z;     /* gzip: the inflater; next_in is the compressed position */
    bool z_init;    /* inflateInit2 was called (inflateEnd is due) */
    bool in_member; /* inside a gzip member (between header and trailer) */
} idx_src;

static size_t gz_pos(const idx_src *s) {
    return (size_t)(s->z.next_in - s->buf);
}

/* Start the next gzip member at the current input position. */
static sy_status gz_begin_member(idx_src *s) {
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

/* Up to `len` more bytes of the stream into dst; *got < len only at the end. */
static sy_status src_read(idx_src *s, void *dst, size_t len, size_t *got) {
    *got = 0;
    if (!s->gz) {
        size_t take = sy_min64((int64_t)len, (int64_t)(s->n - s->pos));
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
        size_t want = sy_min64((int64_t)(len - *got), 1 << 30);
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

/* "at byte 12" for a plain file; "at byte 12 of the decompressed data" for gzip. */
static const char *where(const idx_src *s) {
    return s->gz ? " of the decompressed data" : "";
}

typedef struct idx_type {
    uint8_t code;
    const char *name;
    size_t size; /* bytes per element in the file */
    sy_dtype dtype;
} idx_type;

static const idx_type idx_types[] = {
    {0x08, "unsigned byte", 1, SY_U8}, {0x09, "signed byte", 1, SY_I32},
    {0x0B, "short", 2, SY_I32},        {0x0C, "int", 4, SY_I32},
    {0x0D, "float", 4, SY_F32},        {0x0E, "double", 8, SY_F64},
};

/* The body (count elements of type t, big-endian) is at the start of the
 * tensor's memory; make it the tensor's dtype, in place. Widening runs from
 * the last element down, so each source element is read before it is
 * overwritten. */
static void idx_convert(const idx_type *t, void *data, int64_t count) {
    if (t->code == 0x09) {
        const int8_t *src = data;
        int32_t *dst = data;
        for (int64_t i = count - 1; i >= 0; i--) dst[i] = src[i];
    } else if (t->code == 0x0B) {
        const uint8_t *src = data;
        int32_t *dst = data;
        for (int64_t i = count - 1; i >= 0; i--)
            dst[i] = (int16_t)(src[2 * i] << 8 | src[2 * i + 1]);
    } else if (t->size > 1) {
        uint16_t probe = 1;
        if (*(uint8_t *)&probe == 1) data_byteswap(data, count, t->size);
    }
}

static sy_status idx_header(idx_src *s, const idx_type **type, sy_shape *shape, uint64_t *body) {
    uint8_t head[4 + 4 * 255];
    size_t got;
    sy_status st = src_read(s, head, 4, &got);
    if (st) return st;
    if (got < 4)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: truncated IDX header: the data ends at byte %zu%s, before the 4-byte magic",
            s->what, got, where(s));
    if (head[0] != 0 || head[1] != 0)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: bad magic %02x %02x %02x %02x at byte 0%s: not an IDX file (expected "
                        "00 00, a type "
                        "code and the rank)",
                        s->what, head[0], head[1], head[2], head[3], where(s));
    *type = NULL;
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
        if (idx_types[i].code == head[2]) *type = &idx_types[i];
    if (!*type)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: unknown IDX element type 0x%02x at byte 2%s (expected 0x08, 0x09, "
                        "0x0B, 0x0C, 0x0D or 0x0E)",
                        s->what, head[2], where(s));
    int rank = head[3];
    if (rank > SY_MAX_RANK)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: IDX rank %d at byte 3%s: at most %d dimensions are supported", s->what,
                        rank, where(s), SY_MAX_RANK);
    if ((st = src_read(s, head + 4, 4 * (size_t)rank, &got))) return st;
    if (got < 4 * (size_t)rank)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: truncated IDX header: %d dimensions need %d bytes from byte 4, but "
                        "the data ends at byte "
                        "%zu%s",
                        s->what, rank, 4 * rank, 4 + got, where(s));
    shape->rank = rank;
    uint64_t count = 1;
    bool overflow = false;
    for (int i = 0; i < rank; i++) {
        uint32_t d = data_be32(head + 4 + 4 * i);
        if (d > INT32_MAX)
            return sy_error(SY_ERR_CORRUPT,
                            "%s: IDX dimension %d is %u at byte %d%s: more than 2^31 - 1", s->what,
                            i, d, 4 + 4 * i, where(s));
        shape->dims[i] = d;
        if (d && count > UINT64_MAX / 8 / d) overflow = true;
        count = overflow ? 0 : count * d;
    }
    for (int i = 0; i < rank && overflow; i++)
        if (shape->dims[i] == 0) overflow = false; /* a zero dimension: an empty array after all */
    *body = count * (*type)->size;
    /* The most the rest of the input can hold: its exact length when plain,
     * deflate's ratio limit when compressed. */
    uint64_t room = s->gz ? data_inflate_bound(s->n) : (uint64_t)(s->n - s->pos);
    if (overflow || *body > room) {
        char buf[SY_SHAPE_STR_MAX];
        if (overflow || s->gz)
            return sy_error(
                SY_ERR_CORRUPT,
                "%s: the IDX header's shape %s of %s at byte 4%s is larger than the file can hold "
                "(%zu bytes); the header is damaged",
                s->what, sy_shape_format(shape, buf, sizeof buf), (*type)->name, where(s), s->n);
        return sy_error(SY_ERR_CORRUPT,
                        "%s: truncated IDX body: shape %s of %s needs %llu bytes from byte %zu, "
                        "but the file ends at "
                        "byte %zu (%llu bytes short)",
                        s->what, sy_shape_format(shape, buf, sizeof buf), (*type)->name,
                        (unsigned long long)*body, s->pos, s->n,
                        (unsigned long long)(*body - room));
    }
    return SY_OK;
}

static sy_status idx_body(idx_src *s, const idx_type *type, const sy_shape *shape, uint64_t body,
                          sy_tensor **out) {
    sy_tensor *t;
    sy_status st = sy_tensor_new(type->dtype, *shape, &t);
    if (st) return st;
    uint64_t start = s->out;
    size_t got;
    if ((st = src_read(s, sy_tensor_data(t), (size_t)body, &got))) goto fail;
    if (got < body) {
        char buf[SY_SHAPE_STR_MAX];
        st =
            sy_error(SY_ERR_CORRUPT,
                     "%s: truncated IDX body: shape %s of %s needs %llu bytes from byte %llu, but "
                     "the data ends at "
                     "byte %llu%s (%llu bytes short)",
                     s->what, sy_shape_format(shape, buf, sizeof buf), type->name,
                     (unsigned long long)body, (unsigned long long)start,
                     (unsigned long long)(start + got), where(s), (unsigned long long)(body - got));
        goto fail;
    }
    /* Nothing may follow the body (for gzip, this also reads the last
     * member's trailer, so its CRC and length are checked). */
    uint8_t extra;
    uint64_t end = s->out;
    if ((st = src_read(s, &extra, 1, &got))) goto fail;
    if (got) {
        st = s->gz ? sy_error(SY_ERR_CORRUPT,
                              "%s: trailing bytes after the IDX body: the decompressed data should "
                              "end at byte %llu "
                              "but goes on",
                              s->what, (unsigned long long)end)
                   : sy_error(SY_ERR_CORRUPT,
                              "%s: %zu trailing bytes after the IDX body, from byte %llu", s->what,
                              s->n - (size_t)end, (unsigned long long)end);
        goto fail;
    }
    idx_convert(type, sy_tensor_data(t), sy_tensor_count(t));
    *out = t;
    return SY_OK;
fail:
    sy_tensor_free(t);
    return st;
}

sy_status idx_parse(const uint8_t *buf, size_t n, const char *what, sy_tensor **out) {
    *out = NULL;
    idx_src s;
    memset(&s, 0, sizeof s);
    s.buf = buf;
    s.n = n;
    s.what = what;
    s.gz = n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
    /* zlib counts input in uInt; the datasets' files are far below 4 GiB. */
    if (s.gz && n > UINT32_MAX)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: gzip files over 4 GiB are not supported (%zu bytes)", what, n);
    s.z.next_in = (Bytef *)buf;
    s.z.avail_in = (uInt)n;
    const idx_type *type = NULL;
    sy_shape shape;
    uint64_t body = 0;
    sy_status st = idx_header(&s, &type, &shape, &body);
    if (!st) st = idx_body(&s, type, &shape, body, out);
    if (s.z_init) inflateEnd(&s.z);
    return st;
}

sy_status sy_idx_read(const char *path, sy_tensor **out) {
    return data_parse_file(path, idx_parse, out);
}
