/*
 * tar.c - a tar archive reader, front to back, for the IMDB reviews
 * (aclImdb_v1_labeled.tar.gz: 50,014 members, 108 MB once inflated) and
 * CIFAR-10's batches (cifar-10-binary.tar.gz: 6 members of 30.7 MB).
 *
 * A tar archive is a sequence of 512-byte blocks: each member is a header
 * block followed by its data, padded with zeros to a whole block; a zero
 * block ends the archive (writers put two, then pad to a 10 KiB record;
 * nothing after the first is read as members, as in Python's tarfile). The
 * header fields read here:
 *
 *   offset size  field
 *        0  100  name (NUL-terminated unless it fills the field)
 *      124   12  size (octal digits, or base-256 when the first byte has its
 *                high bit set: GNU's form for members over 8 GiB)
 *      148    8  chksum: the sum of the header's bytes, the field itself
 *                counted as spaces (unsigned, or signed as some old tars did)
 *      156    1  typeflag
 *      257    6  magic: "ustar\0" (POSIX), "ustar " (old GNU), or none (v7)
 *      345  155  prefix (POSIX ustar only): the path is prefix/name
 *
 * Longer paths come from the member before: a GNU 'L' member holds the next
 * member's name as its data, a pax 'x' member holds "<len> path=<value>\n"
 * records (and "size=" for members too large for the octal field). GNU 'K'
 * (long link names) and pax 'g' (global headers) are skipped. Links,
 * directories and devices ('1'-'6') have no data whatever their size field
 * says, as Python's tarfile and GNU tar read them; other types have their
 * size's worth of data.
 *
 * The archive is held in memory (28.6 MB for IMDB) and read through
 * data_stream, which inflates it as the members are read, so the inflated
 * archive is never held whole. A member's data is read into a buffer that
 * grows as the bytes arrive, so a forged size field cannot make the reader
 * allocate more than the archive actually holds. After the end marker the
 * rest of the stream is read too, so that gzip's CRC and length are checked.
 *
 * Errors are SY_ERR_CORRUPT with the archive's name and the byte offset in
 * the (decompressed) archive: a header whose checksum does not match, a
 * number that is not octal, a member whose data runs past the end, an
 * archive that ends without its end marker, damaged gzip data.
 */
#include "data_internal.h"

#include <string.h>

#define TAR_BLOCK      512
#define TAR_MAX_HEADER (1 << 20) /* a GNU long name or a pax header larger than this is damage */

struct tar_reader {
    data_stream s;
    uint8_t *owned; /* the file's bytes, when tar_open_file read them */
    char *what;
    tar_entry entry;
    char *name;         /* entry.name */
    char *long_name;    /* from a GNU 'L' or pax 'x' member, for the next member */
    uint64_t long_size; /* from a pax "size=" record; UINT64_MAX when none */
    uint64_t left;      /* data of the current member not yet read */
    uint64_t pad;       /* zeros after it, to the next block */
    uint8_t *data;      /* tar_read's buffer */
    size_t data_cap;
    bool done;
};

static sy_status tar_open(tar_reader *r, const uint8_t *buf, size_t n, const char *what) {
    r->long_size = UINT64_MAX;
    r->what = sy_strdup(what);
    if (!r->what) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory opening '%s'", what);
    return data_stream_open(&r->s, buf, n, r->what);
}

void tar_close(tar_reader *r) {
    if (!r) return;
    data_stream_close(&r->s);
    sy_free(r->owned);
    sy_free(r->what);
    sy_free(r->name);
    sy_free(r->long_name);
    sy_free(r->data);
    sy_free(r);
}

sy_status tar_open_memory(const uint8_t *buf, size_t n, const char *what, tar_reader **out) {
    *out = NULL;
    tar_reader *r = sy_calloc(1, sizeof *r);
    if (!r) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory opening '%s'", what);
    sy_status st = tar_open(r, buf, n, what);
    if (st) {
        tar_close(r);
        return st;
    }
    *out = r;
    return SY_OK;
}

sy_status tar_open_file(const char *path, tar_reader **out) {
    *out = NULL;
    uint8_t *buf;
    size_t n;
    sy_status st = io_read_file(path, &buf, &n);
    if (st) return st;
    if ((st = tar_open_memory(buf, n, path, out))) {
        sy_free(buf);
        return st;
    }
    (*out)->owned = buf;
    return SY_OK;
}

const char *tar_name(const tar_reader *r) {
    return r->what;
}

/* "damaged tar archive at byte <at>: <damage><detail>" */
static sy_status corrupt(const tar_reader *r, uint64_t at, const char *damage, const char *detail) {
    return sy_error(SY_ERR_CORRUPT, "%s: damaged tar archive at byte %llu%s: %s%s", r->what,
                    (unsigned long long)at, data_stream_where(&r->s), damage, detail ? detail : "");
}

/* Read and drop `n` bytes; *got says how many there were. */
static sy_status skip(tar_reader *r, uint64_t n, uint64_t *got) {
    uint8_t scratch[16384];
    *got = 0;
    while (*got < n) {
        size_t want = n - *got < sizeof scratch ? (size_t)(n - *got) : sizeof scratch, part;
        sy_status st = data_stream_read(&r->s, scratch, want, &part);
        if (st) return st;
        *got += part;
        if (part < want) break;
    }
    return SY_OK;
}

/* The archive ends inside the current member's data or padding. */
static sy_status truncated(const tar_reader *r) {
    return sy_error(SY_ERR_CORRUPT,
                    "%s: truncated tar archive: it ends at byte %llu%s, inside the member '%s' "
                    "(header at byte %llu, %llu bytes of data); the file is incomplete",
                    r->what, (unsigned long long)r->s.out, data_stream_where(&r->s),
                    r->entry.name ? r->entry.name : "", (unsigned long long)r->entry.offset,
                    (unsigned long long)r->entry.size);
}

/* Skip what is left of the current member: its unread data and padding. */
static sy_status skip_rest(tar_reader *r) {
    uint64_t need = r->left + r->pad, got;
    sy_status st = skip(r, need, &got);
    if (st) return st;
    if (got < need) return truncated(r);
    r->left = r->pad = 0;
    return SY_OK;
}

/* A numeric field: octal digits between optional spaces, ended by NUL or
 * the field's end (Python's tarfile reads them the same way), or base-256. */
static bool tar_number(const uint8_t *p, size_t len, uint64_t *value) {
    *value = 0;
    if (p[0] & 0x80) {
        if (p[0] != 0x80) return false; /* negative, or beyond 2^(8 * (len - 1)) */
        for (size_t i = 1; i < len; i++) {
            if (*value >> 55) return false;
            *value = *value << 8 | p[i];
        }
        return true;
    }
    size_t end = 0;
    while (end < len && p[end]) end++;
    size_t i = 0;
    while (i < end && p[i] == ' ') i++;
    while (end > i && p[end - 1] == ' ') end--;
    for (; i < end; i++) {
        if (p[i] < '0' || p[i] > '7' || *value >> 60) return false;
        *value = *value << 3 | (uint64_t)(p[i] - '0');
    }
    return true;
}

/* Whether the header's checksum field matches its bytes. */
static bool checksum_ok(const uint8_t *h, uint64_t *stored, uint64_t *computed) {
    uint64_t u = 0;
    int64_t s = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        uint8_t b = i >= 148 && i < 156 ? ' ' : h[i];
        u += b;
        s += (int8_t)b;
    }
    *computed = u;
    return tar_number(h + 148, 8, stored) && (*stored == u || (int64_t)*stored == s);
}

/* A member's data, read whole into r->data (NUL-terminated): GNU long
 * names and pax headers, bounded by TAR_MAX_HEADER. */
static sy_status read_meta(tar_reader *r, const char *kind, uint8_t **data, size_t *n) {
    if (r->entry.size > TAR_MAX_HEADER) {
        char detail[160];
        snprintf(detail, sizeof detail, "%llu bytes, more than the %d a path or pax header needs",
                 (unsigned long long)r->entry.size, TAR_MAX_HEADER);
        return corrupt(r, r->entry.offset, kind, detail);
    }
    return tar_read(r, data, n);
}

/* Set the next member's name from a GNU 'L' member's data. */
static sy_status gnu_long_name(tar_reader *r) {
    uint8_t *data;
    size_t n;
    sy_status st = read_meta(r, "a GNU long name of ", &data, &n);
    if (st) return st;
    sy_free(r->long_name);
    r->long_name = sy_strdup((const char *)data); /* up to its first NUL */
    return r->long_name ? SY_OK
                        : sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", r->what);
}

/* Read a pax 'x' member's records: "<length> <key>=<value>\n", where the
 * length counts the whole record. Keeps path and size for the next member. */
static sy_status pax_header(tar_reader *r) {
    uint8_t *data;
    size_t n;
    uint64_t at = r->entry.offset + TAR_BLOCK;
    sy_status st = read_meta(r, "a pax header of ", &data, &n);
    if (st) return st;
    for (size_t i = 0; i < n;) {
        size_t len = 0, j = i;
        while (j < n && data[j] >= '0' && data[j] <= '9' && len < n)
            len = len * 10 + (data[j++] - '0');
        if (j == i || j >= n || data[j] != ' ' || len <= j - i + 1 || len > n - i ||
            data[i + len - 1] != '\n')
            return corrupt(r, at + i, "a malformed pax record", NULL);
        char *key = (char *)data + j + 1, *end = (char *)data + i + len - 1;
        char *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq) return corrupt(r, at + i, "a pax record without '='", NULL);
        *eq = *end = '\0';
        const char *value = eq + 1;
        if (strcmp(key, "path") == 0) {
            sy_free(r->long_name);
            if (!(r->long_name = sy_strdup(value)))
                return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", r->what);
        } else if (strcmp(key, "size") == 0) {
            uint64_t v = 0;
            const char *c = value;
            for (; *c >= '0' && *c <= '9' && v < (UINT64_MAX - 9) / 10; c++)
                v = v * 10 + (uint64_t)(*c - '0');
            if (c == value || *c)
                return corrupt(r, at + i, "a pax size that is not a number", NULL);
            r->long_size = v;
        }
        i += len;
    }
    return SY_OK;
}

/* The member's path: a long name from the member before, else prefix/name. */
static sy_status set_name(tar_reader *r, const uint8_t *h, bool posix) {
    char buf[100 + 1 + 155 + 1];
    size_t len = 0;
    if (posix && h[345]) {
        len = strnlen((const char *)h + 345, 155);
        memcpy(buf, h + 345, len);
        buf[len++] = '/';
    }
    size_t name_len = strnlen((const char *)h, 100);
    memcpy(buf + len, h, name_len);
    buf[len + name_len] = '\0';
    sy_free(r->name);
    r->name = r->long_name ? r->long_name : sy_strdup(buf);
    r->long_name = NULL;
    r->entry.name = r->name;
    return r->name ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", r->what);
}

/* The end marker was read: read the rest of the stream, so that a gzip'd
 * archive's CRC is checked (the record padding after the marker is ignored). */
static sy_status finish(tar_reader *r) {
    uint64_t got;
    r->done = true;
    return skip(r, UINT64_MAX, &got);
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

sy_status tar_next(tar_reader *r, const tar_entry **entry) {
    *entry = NULL;
    if (r->done) return SY_OK;
    for (;;) {
        sy_status st = skip_rest(r);
        if (st) return st;
        uint8_t h[TAR_BLOCK];
        uint64_t at = r->s.out;
        size_t got;
        if ((st = data_stream_read(&r->s, h, sizeof h, &got))) return st;
        if (got == 0)
            return sy_error(SY_ERR_CORRUPT,
                            "%s: truncated tar archive: it ends at byte %llu%s without the "
                            "end-of-archive marker (a block of zeros); the file is incomplete",
                            r->what, (unsigned long long)at, data_stream_where(&r->s));
        if (got < sizeof h) {
            char detail[96];
            snprintf(detail, sizeof detail, "%zu of its 512 bytes (the archive ends there)", got);
            return corrupt(r, at, "a truncated header: ", detail);
        }
        if (all_zero(h, sizeof h)) return finish(r);
        uint64_t stored, computed, size;
        if (!checksum_ok(h, &stored, &computed)) {
            char detail[128];
            snprintf(detail, sizeof detail, " (the header says %llo, its bytes sum to %llo)",
                     (unsigned long long)stored, (unsigned long long)computed);
            return corrupt(r, at, "a header whose checksum does not match", detail);
        }
        if (!tar_number(h + 124, 12, &size))
            return corrupt(r, at + 124, "the size field is not an octal number", NULL);
        char type = (char)h[156];
        if (type == '\0' || type == '7') type = '0';
        bool has_data = !(type >= '1' && type <= '6');
        if (has_data && r->long_size != UINT64_MAX && type != 'x' && type != 'g' && type != 'L' &&
            type != 'K')
            size = r->long_size;
        r->entry.type = type;
        r->entry.offset = at;
        r->entry.size = has_data ? size : 0;
        r->left = r->entry.size;
        r->pad = (TAR_BLOCK - r->left % TAR_BLOCK) % TAR_BLOCK;
        bool meta = type == 'L' || type == 'x' || type == 'K' || type == 'g';
        if (!meta && (st = set_name(r, h, memcmp(h + 257, "ustar\0", 6) == 0))) return st;
        uint64_t room = data_stream_room(&r->s);
        if (r->left > room) {
            char detail[400];
            snprintf(detail, sizeof detail,
                     "%llu bytes of data, more than the %llu the rest of the archive can hold%s"
                     "%.200s%s (the file is truncated, or the header damaged)",
                     (unsigned long long)r->left, (unsigned long long)room,
                     meta ? "" : ", for the member '", meta ? "" : r->entry.name, meta ? "" : "'");
            return corrupt(r, at + 124, "the size field claims ", detail);
        }
        if (type == 'L' || type == 'x') {
            r->entry.name = type == 'L' ? "(GNU long name)" : "(pax header)";
            if ((st = type == 'L' ? gnu_long_name(r) : pax_header(r))) return st;
            continue;
        }
        if (type == 'K' || type == 'g') continue; /* skipped with the rest at the loop's top */
        r->long_size = UINT64_MAX;
        *entry = &r->entry;
        return SY_OK;
    }
}

sy_status tar_read(tar_reader *r, uint8_t **data, size_t *n) {
    *data = NULL;
    *n = 0;
    uint64_t size = r->left, done = 0;
    if (size > SIZE_MAX - 1)
        return corrupt(r, r->entry.offset, "a member too large for memory", NULL);
    for (;;) {
        /* grow by doubling, from 64 KiB, never past what is still to come */
        size_t want =
            (size_t)sy_min64((int64_t)size + 1, sy_max64(65536, 2 * (int64_t)r->data_cap));
        if (r->data_cap < want) {
            uint8_t *p = sy_malloc(want);
            if (!p)
                return sy_error(SY_ERR_OUT_OF_MEMORY,
                                "%s: out of memory reading the member '%s' (%llu bytes)", r->what,
                                r->entry.name ? r->entry.name : "", (unsigned long long)size);
            if (done) memcpy(p, r->data, (size_t)done);
            sy_free(r->data);
            r->data = p;
            r->data_cap = want;
        }
        size_t part,
            chunk = (size_t)sy_min64((int64_t)(size - done), (int64_t)(r->data_cap - 1 - done));
        sy_status st = data_stream_read(&r->s, r->data + done, chunk, &part);
        if (st) return st;
        done += part;
        r->left -= part;
        if (part < chunk) return truncated(r);
        if (done == size) break;
    }
    r->data[done] = '\0';
    *data = r->data;
    *n = (size_t)done;
    return SY_OK;
}
