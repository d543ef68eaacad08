/*
 * npz.c - the NumPy .npz reader: a zip archive of .npy files, as np.savez
 * (members stored) and np.savez_compressed (members deflated) write it.
 *
 * A zip archive is read from its end: the end-of-central-directory record
 * (EOCD, "PK\5\6", within the last 64 KiB + 22 bytes because of the archive
 * comment) gives the central directory's offset and entry count; when the
 * zip64 locator ("PK\6\7") sits right before it, the zip64 EOCD ("PK\6\6")
 * gives 64-bit values instead. Each central directory entry ("PK\1\2") has
 * the member's name, compression method, CRC-32, sizes and the offset of its
 * local header ("PK\3\4"), after which the data starts; sizes or offsets of
 * 0xFFFFFFFF are in the entry's zip64 extra field (id 1). The central
 * directory is authoritative: numpy writes members with force_zip64, so
 * local headers may carry 0xFFFFFFFF and a data descriptor after the data.
 *
 * sy_npz_open reads the file whole and validates every entry (in bounds,
 * method stored or deflated, not encrypted); sy_npz_get inflates a member
 * when it is asked for (raw deflate, its size bounded by deflate's 1032:1
 * limit before anything is allocated), checks its CRC-32 and hands the bytes
 * to npy_parse. Stored members are parsed in place, without a copy.
 */
#include "data_internal.h"

#include <string.h>
#include <zlib.h>

typedef struct npz_member {
    char *name;      /* without ".npy" */
    uint16_t method; /* 0 stored, 8 deflated */
    uint32_t crc;
    uint64_t csize; /* compressed bytes */
    uint64_t usize; /* uncompressed bytes */
    uint64_t data;  /* offset of the (compressed) data */
} npz_member;

struct sy_npz {
    char *what;     /* the path, for messages */
    uint8_t *owned; /* the file's bytes, when sy_npz_open read them */
    const uint8_t *buf;
    size_t n;
    npz_member *members;
    int32_t count;
};

#define ZIP_EOCD      0x06054b50u
#define ZIP64_LOCATOR 0x07064b50u
#define ZIP64_EOCD    0x06064b50u
#define ZIP_CENTRAL   0x02014b50u
#define ZIP_LOCAL     0x04034b50u

static sy_status zip_error(const sy_npz *z, size_t at, const char *fmt, const char *detail) {
    return sy_error(SY_ERR_CORRUPT, "%s: damaged zip archive at byte %zu: %s%s", z->what, at, fmt,
                    detail ? detail : "");
}

/* Find the EOCD and the central directory's extent. */
static sy_status find_directory(const sy_npz *z, uint64_t *cd_at, uint64_t *cd_size,
                                uint64_t *entries) {
    const uint8_t *b = z->buf;
    size_t n = z->n;
    if (n < 22)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: not a zip archive (.npz): %zu bytes is too short for one", z->what, n);
    size_t lowest = n - 22 > 65535 ? n - 22 - 65535 : 0, eocd = SIZE_MAX;
    for (size_t p = n - 22 + 1; p-- > lowest;)
        if (io_le32(b + p) == ZIP_EOCD && p + 22 + io_le16(b + p + 20) <= n) {
            eocd = p;
            break;
        }
    if (eocd == SIZE_MAX)
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: not a zip archive (.npz): no end-of-central-directory record in its last "
            "%zu bytes; the file is not an .npz or it is truncated",
            z->what, n - lowest);
    if (io_le16(b + eocd + 4) != 0 || io_le16(b + eocd + 6) != 0)
        return sy_error(SY_ERR_UNSUPPORTED, "%s: multi-part zip archives are not supported",
                        z->what);
    *entries = io_le16(b + eocd + 10);
    *cd_size = io_le32(b + eocd + 12);
    *cd_at = io_le32(b + eocd + 16);
    if (eocd >= 20 && io_le32(b + eocd - 20) == ZIP64_LOCATOR) {
        uint64_t at = io_le64(b + eocd - 20 + 8);
        if (at > eocd - 20 || eocd - 20 - at < 56)
            return zip_error(z, eocd - 20, "the zip64 locator points outside the archive", NULL);
        if (io_le32(b + at) != ZIP64_EOCD)
            return zip_error(z, (size_t)at, "no zip64 end-of-central-directory record", NULL);
        *entries = io_le64(b + at + 32);
        *cd_size = io_le64(b + at + 40);
        *cd_at = io_le64(b + at + 48);
    }
    if (*cd_at > eocd || *cd_size > eocd - *cd_at)
        return zip_error(z, eocd, "the central directory lies outside the archive", NULL);
    if (*entries > *cd_size / 46)
        return zip_error(z, eocd, "more entries than the central directory can hold", NULL);
    return SY_OK;
}

/* The zip64 extra field (id 1) holds, in this order, those of usize, csize
 * and offset that are 0xFFFFFFFF in the entry. */
static sy_status read_zip64_extra(const sy_npz *z, size_t at, size_t len, uint64_t *usize,
                                  uint64_t *csize, uint64_t *offset) {
    const uint8_t *b = z->buf;
    for (size_t p = at; p + 4 <= at + len;) {
        size_t id = io_le16(b + p), size = io_le16(b + p + 2), q = p + 4;
        if (size > at + len - q) return zip_error(z, p, "an extra field runs past its entry", NULL);
        if (id == 1) {
            uint64_t *fields[3] = {usize, csize, offset};
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xFFFFFFFFu) continue;
                if (q + 8 > p + 4 + size)
                    return zip_error(z, q, "the zip64 extra field is too short", NULL);
                *fields[i] = io_le64(b + q);
                q += 8;
            }
        }
        p += 4 + size;
    }
    return SY_OK;
}

/* Parse the central directory entry at *at into m and advance *at past it. */
static sy_status read_entry(sy_npz *z, size_t *at, npz_member *m) {
    const uint8_t *b = z->buf;
    size_t p = *at;
    if (z->n - p < 46 || io_le32(b + p) != ZIP_CENTRAL)
        return zip_error(z, p, "expected a central directory entry (PK\\1\\2)", NULL);
    uint16_t flags = io_le16(b + p + 8);
    m->method = io_le16(b + p + 10);
    m->crc = io_le32(b + p + 16);
    m->csize = io_le32(b + p + 20);
    m->usize = io_le32(b + p + 24);
    size_t name_len = io_le16(b + p + 28), extra_len = io_le16(b + p + 30),
           comment_len = io_le16(b + p + 32);
    uint64_t local = io_le32(b + p + 42);
    if (name_len + extra_len + comment_len > z->n - p - 46)
        return zip_error(z, p, "a central directory entry runs past the end of the archive", NULL);
    sy_status st = read_zip64_extra(z, p + 46 + name_len, extra_len, &m->usize, &m->csize, &local);
    if (st) return st;
    *at = p + 46 + name_len + extra_len + comment_len;
    const char *name = (const char *)b + p + 46;
    size_t keep =
        name_len >= 4 && memcmp(name + name_len - 4, ".npy", 4) == 0 ? name_len - 4 : name_len;
    m->name = sy_malloc(keep + 1);
    if (!m->name) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", z->what);
    memcpy(m->name, name, keep);
    m->name[keep] = '\0';
    if (flags & 1)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: member '%s' is encrypted; encrypted archives are not supported",
                        z->what, m->name);
    if (m->method != 0 && m->method != 8)
        return sy_error(
            SY_ERR_UNSUPPORTED,
            "%s: member '%s' uses zip compression method %u; only stored (0) and "
            "deflated (8) are supported, as np.savez and np.savez_compressed write them",
            z->what, m->name, m->method);
    if (local > z->n || z->n - local < 30 || io_le32(b + local) != ZIP_LOCAL)
        return zip_error(
            z, p, "the entry's local header offset does not point at a local header (PK\\3\\4): ",
            m->name);
    m->data = local + 30 + io_le16(b + local + 26) + io_le16(b + local + 28);
    if (m->data > z->n || m->csize > z->n - m->data)
        return zip_error(z, (size_t)local,
                         "a member's data runs past the end of the archive: ", m->name);
    if (m->method == 0 && m->csize != m->usize)
        return zip_error(z, p,
                         "a stored member's compressed and uncompressed sizes differ: ", m->name);
    return SY_OK;
}

sy_status npz_parse(const uint8_t *buf, size_t n, const char *what, sy_npz **out) {
    *out = NULL;
    sy_npz *z = sy_calloc(1, sizeof *z);
    if (!z || !(z->what = sy_strdup(what))) {
        sy_free(z);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    z->buf = buf;
    z->n = n;
    uint64_t cd_at = 0, cd_size = 0, entries = 0;
    sy_status st = find_directory(z, &cd_at, &cd_size, &entries);
    if (!st && entries > INT32_MAX)
        st = sy_error(SY_ERR_UNSUPPORTED, "%s: %llu members are more than this reader takes", what,
                      (unsigned long long)entries);
    if (!st && !(z->members = sy_calloc((size_t)entries + 1, sizeof *z->members)))
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    size_t at = (size_t)cd_at;
    for (uint64_t i = 0; !st && i < entries; i++) {
        st = read_entry(z, &at, &z->members[i]);
        z->count = (int32_t)i + 1; /* so that sy_npz_close frees the name */
        if (!st && at > cd_at + cd_size)
            st = zip_error(z, (size_t)cd_at, "the central directory's entries run past its end",
                           NULL);
    }
    if (st) {
        sy_npz_close(z);
        return st;
    }
    *out = z;
    return SY_OK;
}

sy_status sy_npz_open(const char *path, sy_npz **out) {
    *out = NULL;
    uint8_t *buf;
    size_t n;
    sy_status st = io_read_file(path, &buf, &n);
    if (st) return st;
    if ((st = npz_parse(buf, n, path, out))) {
        sy_free(buf);
        return st;
    }
    (*out)->owned = buf;
    return SY_OK;
}

void sy_npz_close(sy_npz *z) {
    if (!z) return;
    for (int32_t i = 0; i < z->count; i++) sy_free(z->members[i].name);
    sy_free(z->members);
    sy_free(z->owned);
    sy_free(z->what);
    sy_free(z);
}

int32_t sy_npz_count(const sy_npz *z) {
    return z ? z->count : 0;
}

const char *sy_npz_name(const sy_npz *z, int32_t index) {
    return z && index >= 0 && index < z->count ? z->members[index].name : NULL;
}

/* Inflate member m (raw deflate) into a new buffer of exactly m->usize bytes. */
static sy_status inflate_member(const sy_npz *z, const npz_member *m, const char *what,
                                uint8_t **out) {
    *out = NULL;
    if (m->usize > data_inflate_bound((size_t)m->csize))
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: the archive says it inflates to %llu bytes, more than %llu compressed bytes "
            "can hold; the archive is damaged",
            what, (unsigned long long)m->usize, (unsigned long long)m->csize);
    if (m->csize > UINT32_MAX || m->usize > UINT32_MAX)
        return sy_error(SY_ERR_UNSUPPORTED, "%s: compressed members over 4 GiB are not supported",
                        what);
    uint8_t *dst = sy_malloc((size_t)m->usize);
    if (!dst)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu bytes", what,
                        (unsigned long long)m->usize);
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK) {
        sy_free(dst);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: cannot start zlib", what);
    }
    s.next_in = (Bytef *)z->buf + m->data;
    s.avail_in = (uInt)m->csize;
    s.next_out = dst;
    s.avail_out = (uInt)m->usize;
    int rc = inflate(&s, Z_FINISH);
    uint64_t made = s.total_out;
    size_t stop = (size_t)(s.next_in - z->buf);
    const char *msg = s.msg;
    inflateEnd(&s);
    if (rc == Z_STREAM_END && made == m->usize) {
        *out = dst;
        return SY_OK;
    }
    sy_free(dst);
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: damaged deflate data near byte %zu of the archive (%s)", what, stop,
                        msg ? msg : "invalid data");
    return sy_error(SY_ERR_CORRUPT,
                    "%s: the deflate data %s after %llu bytes, but the archive says %llu", what,
                    made == m->usize ? "goes on" : "ends", (unsigned long long)made,
                    (unsigned long long)m->usize);
}

sy_status sy_npz_get(const sy_npz *z, const char *name, sy_tensor **out) {
    *out = NULL;
    const npz_member *m = NULL;
    for (int32_t i = 0; i < z->count && !m; i++)
        if (strcmp(z->members[i].name, name) == 0) m = &z->members[i];
    if (!m) {
        char names[1024] = "";
        size_t len = 0;
        for (int32_t i = 0; i < z->count && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s'%s'", i ? ", " : "",
                                    z->members[i].name);
        return sy_error(SY_ERR_NOT_FOUND, "%s: no array '%s' in the archive; it has %s%s", z->what,
                        name, z->count ? "" : "none", names);
    }
    char what[1280];
    snprintf(what, sizeof what, "%s, array '%s' (member data at byte %llu)", z->what, m->name,
             (unsigned long long)m->data);
    const uint8_t *bytes = z->buf + m->data;
    uint8_t *inflated = NULL;
    if (m->method == 8) {
        sy_status st = inflate_member(z, m, what, &inflated);
        if (st) return st;
        bytes = inflated;
    }
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    for (uint64_t done = 0; done < m->usize;) {
        uInt step = (uInt)sy_min64((int64_t)(m->usize - done), 1 << 30);
        crc = (uint32_t)crc32(crc, bytes + done, step);
        done += step;
    }
    sy_status st = crc == m->crc
                       ? npy_parse(bytes, (size_t)m->usize, what, out)
                       : sy_error(SY_ERR_CORRUPT,
                                  "%s: CRC-32 is %08x, the archive says %08x; the member is "
                                  "damaged",
                                  what, crc, m->crc);
    sy_free(inflated);
    return st;
}
