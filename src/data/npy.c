/*
 * npy.c - the NumPy .npy reader (format versions 1.0, 2.0 and 3.0).
 *
 * A .npy file (numpy.lib.format) is the magic "\x93NUMPY", a major and a
 * minor version byte, the header's length (little-endian: 2 bytes in
 * version 1, 4 bytes in versions 2 and 3), the header, then the elements.
 * The header is a Python dict literal with exactly three keys:
 *
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 *
 * padded with spaces and a newline. Version 3 only allows UTF-8 in the
 * header, which matters to structured dtypes' field names, and we refuse
 * those anyway. The header is parsed by a small recursive-descent reader that
 * accepts what numpy's writer produces and what its reader (ast.literal_eval)
 * would accept for these three keys: either quote, optional trailing commas,
 * Python 2's 'L' after integers.
 *
 * descr is a byte order ('<' little, '>' big, '|' not applicable, '=' this
 * machine's) then a kind and a size. What it becomes:
 *
 *   f4 -> SY_F32, f8 -> SY_F64, i4 -> SY_I32, u1 and b1 -> SY_U8,
 *   i1 i2 i8 u2 u4 u8 -> SY_I32 when every value fits (else
 *   SY_ERR_UNSUPPORTED naming the first value that does not).
 *
 * The element count is checked against the bytes that follow the header
 * before the tensor is allocated, so a forged shape cannot make us allocate
 * more than a small multiple of the input's size.
 */
#include "data_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct npy_header {
    char descr[32];
    bool fortran_order;
    sy_shape shape;
} npy_header;

/* A cursor over the header text; offsets in messages count from the file's
 * first byte. */
typedef struct npy_cursor {
    const char *what;
    const uint8_t *text;
    size_t pos, end, base; /* [pos, end) of text is left; base = the header's offset in the file */
} npy_cursor;

static sy_status header_error(const npy_cursor *c, const char *expected) {
    char got[24];
    size_t i = 0;
    for (size_t p = c->pos; p < c->end && i < 16; p++)
        got[i++] = isprint(c->text[p]) ? (char)c->text[p] : '?';
    got[i] = '\0';
    return sy_error(SY_ERR_CORRUPT, "%s: bad NPY header at byte %zu: expected %s, found %s%s%s",
                    c->what, c->base + c->pos, expected, i ? "'" : "the end of the header", got,
                    i ? "'" : "");
}

static void skip_space(npy_cursor *c) {
    while (c->pos < c->end && (c->text[c->pos] == ' ' || c->text[c->pos] == '\t' ||
                               c->text[c->pos] == '\n' || c->text[c->pos] == '\r'))
        c->pos++;
}

/* After optional spaces, the character `ch`: consume it and return true. */
static bool accept(npy_cursor *c, char ch) {
    skip_space(c);
    if (c->pos < c->end && c->text[c->pos] == ch) {
        c->pos++;
        return true;
    }
    return false;
}

/* A quoted string (no escapes: no valid key or descr has one) into out. */
static sy_status parse_string(npy_cursor *c, char *out, size_t size, const char *expected) {
    skip_space(c);
    if (c->pos >= c->end || (c->text[c->pos] != '\'' && c->text[c->pos] != '"'))
        return header_error(c, expected);
    uint8_t quote = c->text[c->pos];
    size_t start = c->pos + 1, p = start;
    while (p < c->end && c->text[p] != quote && c->text[p] != '\\') p++;
    if (p >= c->end || c->text[p] != quote || p - start >= size) return header_error(c, expected);
    memcpy(out, c->text + start, p - start);
    out[p - start] = '\0';
    c->pos = p + 1;
    return SY_OK;
}

static bool accept_word(npy_cursor *c, const char *word) {
    skip_space(c);
    size_t len = strlen(word);
    if (c->end - c->pos < len || memcmp(c->text + c->pos, word, len) != 0) return false;
    if (c->pos + len < c->end && (isalnum(c->text[c->pos + len]) || c->text[c->pos + len] == '_'))
        return false;
    c->pos += len;
    return true;
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. */
static sy_status parse_shape(npy_cursor *c, sy_shape *shape) {
    if (!accept(c, '(')) return header_error(c, "'(' to start the shape tuple");
    shape->rank = 0;
    for (;;) {
        if (accept(c, ')')) return SY_OK;
        skip_space(c);
        if (c->pos >= c->end || !isdigit(c->text[c->pos]))
            return header_error(c, "a dimension (an integer >= 0) or ')'");
        if (shape->rank == SY_MAX_RANK)
            return sy_error(SY_ERR_UNSUPPORTED,
                            "%s: NPY shape at byte %zu has more than %d dimensions", c->what,
                            c->base + c->pos, SY_MAX_RANK);
        int64_t d = 0;
        while (c->pos < c->end && isdigit(c->text[c->pos])) {
            if (d > (INT64_MAX - 9) / 10) return header_error(c, "a dimension below 2^63");
            d = d * 10 + (c->text[c->pos++] - '0');
        }
        if (c->pos < c->end && c->text[c->pos] == 'L') c->pos++; /* Python 2's long */
        shape->dims[shape->rank++] = d;
        if (!accept(c, ',')) {
            if (accept(c, ')')) return SY_OK;
            return header_error(c, "',' or ')' in the shape tuple");
        }
    }
}

static sy_status parse_header(npy_cursor *c, npy_header *h) {
    bool seen[3] = {false, false, false};
    if (!accept(c, '{')) return header_error(c, "'{' to start the header dict");
    for (;;) {
        if (accept(c, '}')) break;
        char key[32];
        sy_status st =
            parse_string(c, key, sizeof key, "a key ('descr', 'fortran_order' or 'shape') or '}'");
        if (st) return st;
        int which = strcmp(key, "descr") == 0           ? 0
                    : strcmp(key, "fortran_order") == 0 ? 1
                    : strcmp(key, "shape") == 0         ? 2
                                                        : -1;
        if (which < 0 || seen[which])
            return sy_error(SY_ERR_CORRUPT,
                            "%s: bad NPY header at byte %zu: %s key '%s' (the keys are 'descr', "
                            "'fortran_order' and 'shape', once each)",
                            c->what, c->base + c->pos, which < 0 ? "unexpected" : "repeated", key);
        seen[which] = true;
        if (!accept(c, ':')) return header_error(c, "':' after the key");
        if (which == 0) {
            if (accept(c, '['))
                return sy_error(SY_ERR_UNSUPPORTED,
                                "%s: the NPY array has a structured dtype (a list of fields at "
                                "byte %zu); only plain numeric dtypes are supported",
                                c->what, c->base + c->pos - 1);
            if ((st =
                     parse_string(c, h->descr, sizeof h->descr, "the dtype string, such as '<f4'")))
                return st;
        } else if (which == 1) {
            if (accept_word(c, "True"))
                h->fortran_order = true;
            else if (accept_word(c, "False"))
                h->fortran_order = false;
            else
                return header_error(c, "True or False");
        } else if ((st = parse_shape(c, &h->shape))) {
            return st;
        }
        if (!accept(c, ',')) {
            if (accept(c, '}')) break;
            return header_error(c, "',' or '}' after a value");
        }
    }
    skip_space(c);
    if (c->pos != c->end) return header_error(c, "only spaces after the header dict");
    for (int i = 0; i < 3; i++)
        if (!seen[i])
            return sy_error(SY_ERR_CORRUPT, "%s: the NPY header at byte %zu has no '%s' key",
                            c->what, c->base,
                            i == 0   ? "descr"
                            : i == 1 ? "fortran_order"
                                     : "shape");
    return SY_OK;
}

/* What a descr becomes. */
typedef struct npy_type {
    char kind; /* 'f', 'i', 'u', 'b' */
    int size;  /* bytes per element in the file */
    bool big;  /* big-endian in the file */
    sy_dtype dtype;
    bool same; /* the file's bits are the tensor's, up to byte order */
} npy_type;

static sy_status parse_descr(const char *what, const char *descr, npy_type *t) {
    char order = descr[0], kind = descr[0] ? descr[1] : 0;
    char *end;
    long size = kind ? strtol(descr + 2, &end, 10) : 0;
    bool ok_order = order == '<' || order == '>' || order == '|' || order == '=';
    bool ok = ok_order && kind && descr[2] && isdigit((unsigned char)descr[2]) && *end == '\0';
    if (ok && order == '|' && size != 1) ok = false; /* '|' only for single bytes */
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->size = (int)size;
    uint16_t probe = 1;
    bool host_big = *(uint8_t *)&probe == 0;
    t->big = order == '>' || (order == '=' && host_big);
    if (ok && kind == 'f' && (size == 4 || size == 8)) {
        t->dtype = size == 4 ? SY_F32 : SY_F64;
        t->same = true;
    } else if (ok && kind == 'i' && (size == 1 || size == 2 || size == 4 || size == 8)) {
        t->dtype = SY_I32;
        t->same = size == 4;
    } else if (ok && kind == 'u' && (size == 1 || size == 2 || size == 4 || size == 8)) {
        t->dtype = size == 1 ? SY_U8 : SY_I32;
        t->same = size == 1;
    } else if (ok && kind == 'b' && size == 1) {
        t->dtype = SY_U8;
    } else {
        const char *why = ok_order && kind == 'O' ? " (object arrays hold Python objects)" : "";
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: NPY dtype '%s'%s is not supported: float32/64, int8/16/32/64, "
                        "uint8/16/32/64 and bool "
                        "are ('<f4', '<f8', '<i4', '|u1', ...)",
                        what, descr, why);
    }
    return SY_OK;
}

/* The integer at p, of t->size bytes in the file's byte order. */
static uint64_t load_uint(const uint8_t *p, const npy_type *t) {
    uint64_t v = 0;
    for (int i = 0; i < t->size; i++) v |= (uint64_t)p[t->big ? t->size - 1 - i : i] << (8 * i);
    return v;
}

static sy_status npy_convert(const char *what, const npy_type *t, const char *descr,
                             const uint8_t *src, sy_tensor *out) {
    int64_t count = sy_tensor_count(out);
    void *dst = sy_tensor_data(out);
    if (t->same) {
        memcpy(dst, src, (size_t)count * (size_t)t->size);
        uint16_t probe = 1;
        bool host_big = *(uint8_t *)&probe == 0;
        if (t->size > 1 && t->big != host_big) data_byteswap(dst, count, (size_t)t->size);
        return SY_OK;
    }
    if (t->kind == 'b') {
        uint8_t *d = dst;
        for (int64_t i = 0; i < count; i++) d[i] = src[i] != 0;
        return SY_OK;
    }
    int32_t *d = dst;
    int shift = 64 - 8 * t->size;
    for (int64_t i = 0; i < count; i++) {
        uint64_t u = load_uint(src + i * t->size, t);
        if (t->kind == 'i') {
            int64_t v = (int64_t)(u << shift) >> shift; /* sign-extend */
            if (v < INT32_MIN || v > INT32_MAX)
                return sy_error(SY_ERR_UNSUPPORTED,
                                "%s: value %lld at flat index %lld does not fit in int32 ('%s' "
                                "arrays load as int32 only when every value fits)",
                                what, (long long)v, (long long)i, descr);
            d[i] = (int32_t)v;
        } else {
            if (u > INT32_MAX)
                return sy_error(SY_ERR_UNSUPPORTED,
                                "%s: value %llu at flat index %lld does not fit in int32 ('%s' "
                                "arrays load as int32 only when every value fits)",
                                what, (unsigned long long)u, (long long)i, descr);
            d[i] = (int32_t)u;
        }
    }
    return SY_OK;
}

/* The header of a file of n bytes whose first `avail` bytes are buf, checked against n: its type, shape and
 * where the data starts. *short_header: the header runs past avail (nothing else set; only when avail < n). */
static sy_status npy_layout(const uint8_t *buf, size_t avail, size_t n, const char *what, npy_header *hp,
                            npy_type *tp, size_t *data_atp, bool *short_header) {
    *short_header = false;
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (n < 6 || memcmp(buf, magic, 6) != 0)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: bad magic at byte 0: not an NPY file (expected \\x93NUMPY)", what);
    if (n < 8)
        return sy_error(SY_ERR_CORRUPT, "%s: truncated NPY header: the file ends at byte %zu", what,
                        n);
    int major = buf[6], minor = buf[7];
    if (major < 1 || major > 3)
        return sy_error(
            SY_ERR_UNSUPPORTED,
            "%s: NPY format version %d.%d at byte 6 is not supported (1.0, 2.0, 3.0 are)", what,
            major, minor);
    size_t len_size = major == 1 ? 2 : 4, start = 8 + len_size;
    if (n < start)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: truncated NPY header: the file ends at byte %zu, inside the header length", what,
            n);
    size_t hlen = major == 1 ? io_le16(buf + 8) : io_le32(buf + 8);
    if (hlen <= n - start && hlen > avail - start) {
        *short_header = true;
        return SY_OK;
    }
    if (hlen > n - start)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: truncated NPY header: %zu header bytes from byte %zu, but the file ends at "
            "byte %zu",
            what, hlen, start, n);
    npy_cursor c = {what, buf + start, 0, hlen, start};
    npy_header h;
    memset(&h, 0, sizeof h);
    sy_status st = parse_header(&c, &h);
    if (st) return st;
    npy_type t;
    if ((st = parse_descr(what, h.descr, &t))) return st;
    if (h.fortran_order && h.shape.rank > 1)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: the NPY array is in Fortran (column-major) order; save it in C order "
                        "(np.ascontiguousarray) to read it here",
                        what);
    size_t data_at = start + hlen, have = n - data_at;
    uint64_t count = 1;
    for (int i = 0; i < h.shape.rank; i++) {
        uint64_t d = (uint64_t)h.shape.dims[i];
        count = d && count > UINT64_MAX / d ? UINT64_MAX : count * d;
    }
    for (int i = 0; i < h.shape.rank; i++)
        if (h.shape.dims[i] == 0) count = 0;
    char sbuf[SY_SHAPE_STR_MAX];
    uint64_t bytes = count > UINT64_MAX / (uint64_t)t.size ? UINT64_MAX : count * (uint64_t)t.size;
    if (bytes > have)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: truncated NPY data: shape %s of '%s' needs %llu%s bytes from byte %zu, but "
            "the file ends at byte %zu",
            what, sy_shape_format(&h.shape, sbuf, sizeof sbuf), h.descr, (unsigned long long)bytes,
            bytes == UINT64_MAX ? " or more" : "", data_at, n);
    if (bytes < have)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: %llu trailing bytes after the NPY data: shape %s of '%s' ends at byte %llu", what,
            (unsigned long long)(have - bytes), sy_shape_format(&h.shape, sbuf, sizeof sbuf),
            h.descr, (unsigned long long)(data_at + bytes));
    *hp = h, *tp = t, *data_atp = data_at;
    return SY_OK;
}

sy_status npy_parse(const uint8_t *buf, size_t n, const char *what, sy_tensor **out) {
    *out = NULL;
    npy_header h;
    npy_type t;
    size_t data_at;
    bool short_header;
    sy_status st = npy_layout(buf, n, n, what, &h, &t, &data_at, &short_header);
    if (st) return st;
    /* npy_convert writes every element (or fails, and the tensor goes) */
    if ((st = sy_tensor_new_uninit(t.dtype, h.shape, out))) return st;
    if ((st = npy_convert(what, &t, h.descr, buf + data_at, *out))) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

/* A file of this size or more whose elements are the tensor's bits as they are (no conversion, no byte
 * swap) is mapped (sy_tensor_map), or where it cannot be, read straight into the tensor: reading the whole
 * file and then copying it took three passes (the buffer, the zeroed tensor, the copy) and two sets of page
 * faults -- a fifth of `systolic predict`'s time on the 10,000 Fashion-MNIST test images -- and even the one
 * read costs the fresh memory's faults and zeroing (15 ms of 31 MB on this VM) where mapping the page
 * cache's pages costs well under 1 ms. */
#define NPY_DIRECT_MIN (1 << 20)
#define NPY_HEAD 4096 /* bytes read for the header; numpy's are 128 or a few hundred */

/* The direct read, or *done false to leave it to npy_parse (small files, conversions, headers past
 * NPY_HEAD, any error opening or reading the start: npy_parse reports those as it always has). */
static sy_status npy_read_direct(const char *path, sy_tensor **out, bool *done) {
    *done = false;
    int fd;
    int64_t size;
    if (io_open_read(path, NULL, &fd, &size)) {
        sy_clear_error();
        return SY_OK;
    }
    uint8_t head[NPY_HEAD];
    ssize_t got = size >= NPY_DIRECT_MIN ? pread(fd, head, sizeof head, 0) : -1;
    npy_header h;
    npy_type t;
    size_t data_at;
    bool short_header = true;
    uint16_t probe = 1;
    bool host_big = *(uint8_t *)&probe == 0;
    if (got == (ssize_t)sizeof head &&
        npy_layout(head, sizeof head, (size_t)size, path, &h, &t, &data_at, &short_header) != SY_OK) {
        close(fd); /* a damaged header: npy_parse says so, from the whole file */
        sy_clear_error();
        return SY_OK;
    }
    if (short_header || !t.same || (t.size > 1 && t.big != host_big)) {
        close(fd);
        return SY_OK;
    }
    *done = true;
    sy_status st = sy_tensor_map(fd, (size_t)size, data_at, t.dtype, h.shape, out);
    if (st || *out) {
        close(fd);
        return st;
    }
    if ((st = sy_tensor_new_uninit(t.dtype, h.shape, out))) {
        close(fd);
        return st;
    }
    /* npy_layout checked: the rest of the file is exactly the elements' bytes */
    st = io_read_at(fd, path, sy_tensor_data(*out), (size_t)size - data_at, (int64_t)data_at);
    close(fd);
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

sy_status sy_npy_read(const char *path, sy_tensor **out) {
    *out = NULL;
    bool done;
    sy_status st = npy_read_direct(path, out, &done);
    return done ? st : data_parse_file(path, npy_parse, out);
}
