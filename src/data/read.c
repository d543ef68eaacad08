/*
 * read.c - what the readers share: a whole file into memory, byte order,
 * and data_stream, the bytes of a buffer as they are, or inflated when the
 * buffer is gzip'd.
 *
 * Every file the library reads is opened through data_open_read: without
 * blocking (a FIFO put where a file was expected would otherwise hang the
 * open for ever), and refused, naming what it is, unless it is a regular
 * file -- a directory, a FIFO, a device such as /dev/zero (endless) all
 * get a message instead of a hang or an unbounded read.
 *
 * The readers parse from memory (so fuzz targets can feed them bytes), so a
 * file is read whole, once, into an sy_malloc'd buffer, exactly as many
 * bytes as fstat reported, and no more than the caller's format can hold. The files this module
 * reads are tens of megabytes, small next to the tensors made from them; what
 * a gzip'd file holds is never inflated whole: data_stream inflates as its
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

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *data_file_kind(unsigned mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

/* O_NONBLOCK: open() of a FIFO with no writer returns at once instead of
 * waiting for one, and fstat then says what it is; a regular file ignores
 * the flag, which is cleared all the same before any read. */
sy_status data_open_read(const char *path, const char *what, int *fd, int64_t *size) {
    *fd = -1;
    const char *sep = what ? ": " : "";
    if (!what) what = "";
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) {
        int err = errno;
        return sy_error(SY_ERR_IO, "%s%scannot open '%s': %s", what, sep, path, strerror(err));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int err = errno;
        close(f);
        return sy_error(SY_ERR_IO, "%s%scannot read '%s': %s", what, sep, path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        if (S_ISDIR(st.st_mode))
            return sy_error(SY_ERR_IO, "%s%scannot read '%s': it is a directory", what, sep, path);
        return sy_error(SY_ERR_IO, "%s%scannot read '%s': it is %s, not a regular file", what, sep,
                        path, data_file_kind(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0) fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    if (size) *size = (int64_t)st.st_size;
    return SY_OK;
}

sy_status data_fopen_read(const char *path, const char *what, FILE **out, int64_t *size) {
    *out = NULL;
    int fd;
    sy_status st = data_open_read(path, what, &fd, size);
    if (st) return st;
    *out = fdopen(fd, "rb");
    if (!*out) {
        int err = errno;
        close(fd);
        return sy_error(SY_ERR_IO, "%s%scannot read '%s': %s", what ? what : "", what ? ": " : "",
                        path, strerror(err));
    }
    return SY_OK;
}

sy_status data_read_file_max(const char *path, size_t max, const char *format, uint8_t **buf,
                             size_t *n) {
    *buf = NULL;
    *n = 0;
    int fd;
    int64_t size64;
    sy_status st = data_open_read(path, NULL, &fd, &size64);
    if (st) return st;
    size_t size = (size_t)size64;
    if (max && size > max) {
        close(fd);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "cannot read '%s': it holds %zu bytes, more than %s can (%zu)", path, size,
                        format ? format : "this reader takes", max);
    }
    uint8_t *p = sy_malloc(size ? size : 1);
    if (!p) {
        close(fd);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading '%s' (%zu bytes)", path, size);
    }
    /* Exactly the size fstat gave: a file growing while it is read (or
     * one that reports a size it does not have) cannot make this read
     * more than it planned. */
    size_t got = 0;
    int err = 0;
    while (got < size) {
        ssize_t r = read(fd, p + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            err = r < 0 ? errno : 0;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (got != size) {
        sy_free(p);
        return sy_error(SY_ERR_IO, "cannot read '%s': %s", path,
                        err ? strerror(err) : "the file shrank while it was read");
    }
    *buf = p;
    *n = size;
    return SY_OK;
}

sy_status data_read_file(const char *path, uint8_t **buf, size_t *n) {
    return data_read_file_max(path, 0, NULL, buf, n);
}

sy_status data_with_file(const char *path, data_bytes_fn fn, void *ctx) {
    uint8_t *buf;
    size_t n;
    sy_status st = data_read_file(path, &buf, &n);
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
