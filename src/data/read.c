/*
 * read.c - what the readers share: a whole file into memory, and byte order.
 *
 * The readers parse from memory (so fuzz targets can feed them bytes), so a
 * file is read whole, once, into an sy_malloc'd buffer. The files this module
 * reads are tens of megabytes, small next to the tensors made from them.
 */
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

sy_status data_read_file(const char *path, uint8_t **buf, size_t *n) {
    *buf = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sy_error(SY_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return sy_error(SY_ERR_IO, "cannot read '%s': %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return sy_error(SY_ERR_IO, "cannot read '%s': it is not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *p = sy_malloc(size);
    if (!p) {
        fclose(f);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading '%s' (%zu bytes)", path, size);
    }
    size_t got = fread(p, 1, size, f);
    int failed = ferror(f), err = errno;
    fclose(f);
    if (failed || got != size) {
        sy_free(p);
        return sy_error(SY_ERR_IO, "cannot read '%s': %s", path,
                        failed ? strerror(err) : "the file shrank while it was read");
    }
    *buf = p;
    *n = size;
    return SY_OK;
}

sy_status data_parse_file(const char *path, data_parser parse, sy_tensor **out) {
    *out = NULL;
    uint8_t *buf;
    size_t n;
    sy_status st = data_read_file(path, &buf, &n);
    if (st) return st;
    st = parse(buf, n, path, out);
    sy_free(buf);
    return st;
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
