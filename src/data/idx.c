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
 * All reading goes through data_stream (read.c), which hands out the next
 * bytes of the (decompressed) stream. The header is read first; the size it
 * implies is checked against what the input can possibly hold (its exact
 * length for a plain file, deflate's 1032:1 limit for gzip) before the
 * tensor is
 * allocated, and the body is then read straight into the tensor's memory and
 * widened/byte-swapped in place, so the file's data is never copied twice.
 */
#include "data_internal.h"

#include <string.h>

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

static sy_status idx_header(data_stream *s, const idx_type **type, sy_shape *shape,
                            uint64_t *body) {
    uint8_t head[4 + 4 * 255];
    size_t got;
    sy_status st = data_stream_read(s, head, 4, &got);
    if (st) return st;
    if (got < 4)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: truncated IDX header: the data ends at byte %zu%s, before the 4-byte magic",
            s->what, got, data_stream_where(s));
    if (head[0] != 0 || head[1] != 0)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: bad magic %02x %02x %02x %02x at byte 0%s: not an IDX file (expected "
                        "00 00, a type "
                        "code and the rank)",
                        s->what, head[0], head[1], head[2], head[3], data_stream_where(s));
    *type = NULL;
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
        if (idx_types[i].code == head[2]) *type = &idx_types[i];
    if (!*type)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: unknown IDX element type 0x%02x at byte 2%s (expected 0x08, 0x09, "
                        "0x0B, 0x0C, 0x0D or 0x0E)",
                        s->what, head[2], data_stream_where(s));
    int rank = head[3];
    if (rank > SY_MAX_RANK)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: IDX rank %d at byte 3%s: at most %d dimensions are supported", s->what,
                        rank, data_stream_where(s), SY_MAX_RANK);
    if ((st = data_stream_read(s, head + 4, 4 * (size_t)rank, &got))) return st;
    if (got < 4 * (size_t)rank)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: truncated IDX header: %d dimensions need %d bytes from byte 4, but "
                        "the data ends at byte "
                        "%zu%s",
                        s->what, rank, 4 * rank, 4 + got, data_stream_where(s));
    shape->rank = rank;
    uint64_t count = 1;
    bool overflow = false;
    for (int i = 0; i < rank; i++) {
        uint32_t d = io_be32(head + 4 + 4 * i);
        if (d > INT32_MAX)
            return sy_error(SY_ERR_CORRUPT,
                            "%s: IDX dimension %d is %u at byte %d%s: more than 2^31 - 1", s->what,
                            i, d, 4 + 4 * i, data_stream_where(s));
        shape->dims[i] = d;
        if (d && count > UINT64_MAX / 8 / d) overflow = true;
        count = overflow ? 0 : count * d;
    }
    for (int i = 0; i < rank && overflow; i++)
        if (shape->dims[i] == 0) overflow = false; /* a zero dimension: an empty array after all */
    *body = count * (*type)->size;
    /* The most the rest of the input can hold: its exact length when plain,
     * deflate's ratio limit when compressed. */
    uint64_t room = data_stream_room(s);
    if (overflow || *body > room) {
        char buf[SY_SHAPE_STR_MAX];
        if (overflow || s->gz)
            return sy_error(
                SY_ERR_CORRUPT,
                "%s: the IDX header's shape %s of %s at byte 4%s is larger than the file can hold "
                "(%zu bytes); the header is damaged",
                s->what, sy_shape_format(shape, buf, sizeof buf), (*type)->name,
                data_stream_where(s), s->n);
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

static sy_status idx_body(data_stream *s, const idx_type *type, const sy_shape *shape,
                          uint64_t body, sy_tensor **out) {
    sy_tensor *t;
    sy_status st = sy_tensor_new(type->dtype, *shape, &t);
    if (st) return st;
    uint64_t start = s->out;
    size_t got;
    if ((st = data_stream_read(s, sy_tensor_data(t), (size_t)body, &got))) goto fail;
    if (got < body) {
        char buf[SY_SHAPE_STR_MAX];
        st = sy_error(SY_ERR_CORRUPT,
                      "%s: truncated IDX body: shape %s of %s needs %llu bytes from byte %llu, but "
                      "the data ends at "
                      "byte %llu%s (%llu bytes short)",
                      s->what, sy_shape_format(shape, buf, sizeof buf), type->name,
                      (unsigned long long)body, (unsigned long long)start,
                      (unsigned long long)(start + got), data_stream_where(s),
                      (unsigned long long)(body - got));
        goto fail;
    }
    /* Nothing may follow the body (for gzip, this also reads the last
     * member's trailer, so its CRC and length are checked). */
    uint8_t extra;
    uint64_t end = s->out;
    if ((st = data_stream_read(s, &extra, 1, &got))) goto fail;
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
    data_stream s;
    sy_status st = data_stream_open(&s, buf, n, what);
    if (st) return st;
    const idx_type *type = NULL;
    sy_shape shape;
    uint64_t body = 0;
    st = idx_header(&s, &type, &shape, &body);
    if (!st) st = idx_body(&s, type, &shape, body, out);
    data_stream_close(&s);
    return st;
}

sy_status sy_idx_read(const char *path, sy_tensor **out) {
    return data_parse_file(path, idx_parse, out);
}
