/*
 * npy_write.c - the NumPy .npy writer: a tensor of numbers as the file
 * np.save writes for the same array, read back by np.load (and by
 * sy_npy_read, data's reader).
 *
 * The file is format version 1.0: the magic "\x93NUMPY", bytes 1 and 0,
 * the header's length (2 bytes, little-endian), the header -- a Python dict
 * literal such as
 *
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 10), }
 *
 * padded with spaces and ended with a newline so that the data starts at a
 * multiple of 64 bytes, as numpy pads it -- then the elements in C order,
 * in this machine's byte order (which the descr states). Headers longer
 * than version 1.0's 65,535 bytes cannot happen: a shape of SY_MAX_RANK
 * 19-digit dimensions is a few hundred bytes.
 *
 * An .npz archive (issue 17: predict's outputs of a model with several) is
 * the zip np.savez writes: each array an .npy file, stored uncompressed,
 * under "NAME.npy"; a local header before each member, then the central
 * directory and its end record. Written without zip64 (numpy reads both),
 * so an archive past 4 GiB is refused; every member's time is 1980-01-01,
 * so the same arrays give the same bytes.
 *
 * Written through io_write_file_atomic: a failed or interrupted write
 * leaves any file already at the path as it was.
 */
#include "io_internal.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define NPY_HEADER_MAX 512 /* at most 10 + 60 + a shape's text, padded to 64 */

/* t's .npy header into header[NPY_HEADER_MAX]; *n its length. */
static sy_status npy_header(const char *path, const sy_tensor *t, char *header, size_t *n_out) {
    sy_dtype dt = sy_tensor_dtype(t);
    uint16_t probe = 1;
    char order = *(uint8_t *)&probe ? '<' : '>';
    const char *kind;
    switch (dt) {
    case SY_F32: kind = "f4"; break;
    case SY_F64: kind = "f8"; break;
    case SY_I32: kind = "i4"; break;
    case SY_I64: kind = "i8"; break;
    case SY_U8: kind = "u1", order = '|'; break;
    case SY_I8: kind = "i1", order = '|'; break; /* issue 18 */
    default:
        return sy_error(SY_ERR_DTYPE, "'%s': a %s tensor has no NPY form; numbers only", path, sy_dtype_name(dt));
    }
    sy_shape s = sy_tensor_shape(t);
    char dims[SY_MAX_RANK * 24 + 8];
    size_t k = 0;
    dims[k++] = '(';
    for (int i = 0; i < s.rank; i++)
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? ", " : "", (long long)s.dims[i]);
    k += (size_t)snprintf(dims + k, sizeof dims - k, "%s)", s.rank == 1 ? "," : ""); /* (3,) as Python writes it */
    int n = snprintf(header + 10, NPY_HEADER_MAX - 10,
                     "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }", order, kind, dims);
    size_t total = 10 + (size_t)n + 1, padded = (total + 63) / 64 * 64; /* + 1: the newline */
    memset(header + 10 + n, ' ', padded - 10 - (size_t)n - 1);
    header[padded - 1] = '\n';
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    header[8] = (char)((padded - 10) & 0xff);
    header[9] = (char)((padded - 10) >> 8);
    *n_out = padded;
    return SY_OK;
}

sy_status sy_npy_write(const char *path, const sy_tensor *t) {
    if (!path || !t)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_npy_write: a path and a tensor are required");
    char header[NPY_HEADER_MAX];
    size_t n;
    sy_status st = npy_header(path, t, header, &n);
    if (st) return st;
    const void *bufs[2] = {header, sy_tensor_data(t)};
    size_t sizes[2] = {n, (size_t)sy_tensor_count(t) * sy_dtype_size(sy_tensor_dtype(t))};
    return io_write_file_atomic(path, bufs, sizes, 2);
}

/* ---- .npz -------------------------------------------------------------------------------------
 */

#define NPZ_MAX       64   /* arrays in one archive */
#define ZIP_NAME_MAX  256  /* "NAME.npy" */
#define ZIP_DATE_1980 0x21 /* DOS date 1980-01-01: day 1, month 1, year 0 */

static uint8_t *put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
    return p + 2;
}
static uint8_t *put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
    return p + 4;
}

/* The fields a local header and a central directory entry share, from
 * "version needed" to the extra field's length. */
static uint8_t *zip_common(uint8_t *p, uint32_t crc, uint32_t size, size_t name_len) {
    p = put16(p, 20); /* version needed: 2.0 */
    p = put16(p, 0);  /* flags */
    p = put16(p, 0);  /* stored */
    p = put16(p, 0);  /* time 00:00:00 */
    p = put16(p, ZIP_DATE_1980);
    p = put32(p, crc);
    p = put32(p, size); /* compressed: stored, the same */
    p = put32(p, size);
    p = put16(p, (uint32_t)name_len);
    return put16(p, 0); /* no extra field */
}

sy_status sy_npz_write(const char *path, const char *const *names, const sy_tensor *const *arrays,
                       int32_t n) {
    if (!path || n < 1 || n > NPZ_MAX || !names || !arrays)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_npz_write: a path and 1 to %d named arrays are required", NPZ_MAX);
    for (int32_t i = 0; i < n; i++) {
        if (!names[i] || !arrays[i] || !names[i][0] || strlen(names[i]) + 4 > ZIP_NAME_MAX)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s': array %d needs a name of 1 to %d bytes",
                            path, i, ZIP_NAME_MAX - 4);
        for (int32_t j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s': two arrays are named '%s'", path,
                                names[i]);
    }
    /* the headers and the directory: tens of KiB, off the stack */
    struct npz_parts {
        char headers[NPZ_MAX][NPY_HEADER_MAX];
        uint8_t local[NPZ_MAX][30 + ZIP_NAME_MAX];
        uint8_t central[NPZ_MAX * (46 + ZIP_NAME_MAX) + 22];
        const void *bufs[3 * NPZ_MAX + 1];
        size_t sizes[3 * NPZ_MAX + 1];
    } *z = sy_malloc(sizeof *z);
    if (!z)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': no memory for the archive's headers", path);
    size_t total = 0;
    uint8_t *c = z->central;
    sy_status st = SY_OK;
    for (int32_t i = 0; i < n && !st; i++) {
        size_t h;
        if ((st = npy_header(path, arrays[i], z->headers[i], &h))) break;
        size_t data =
            (size_t)sy_tensor_count(arrays[i]) * sy_dtype_size(sy_tensor_dtype(arrays[i]));
        size_t name_len = strlen(names[i]) + 4, member = h + data;
        if (member > UINT32_MAX || total + 30 + name_len + member > UINT32_MAX) {
            st = sy_error(SY_ERR_UNSUPPORTED,
                          "'%s': the arrays take more than 4 GiB, past what a zip archive "
                          "without zip64 holds",
                          path);
            break;
        }
        uint32_t crc = (uint32_t)crc32_z(crc32_z(0, (const Bytef *)z->headers[i], h),
                                         (const Bytef *)sy_tensor_data(arrays[i]), data);
        uint8_t *p = put32(z->local[i], 0x04034b50u);
        p = zip_common(p, crc, (uint32_t)member, name_len);
        memcpy(p, names[i], name_len - 4);
        memcpy(p + name_len - 4, ".npy", 4);
        c = put32(c, 0x02014b50u);
        c = put16(c, 20); /* made by: 2.0, MS-DOS attributes */
        c = zip_common(c, crc, (uint32_t)member, name_len);
        c = put16(c, 0); /* comment */
        c = put16(c, 0); /* disk */
        c = put16(c, 0); /* internal attributes */
        c = put32(c, 0); /* external attributes */
        c = put32(c, (uint32_t)total);
        memcpy(c, p, name_len);
        c += name_len;
        z->bufs[3 * i] = z->local[i], z->sizes[3 * i] = 30 + name_len;
        z->bufs[3 * i + 1] = z->headers[i], z->sizes[3 * i + 1] = h;
        z->bufs[3 * i + 2] = sy_tensor_data(arrays[i]), z->sizes[3 * i + 2] = data;
        total += 30 + name_len + member;
    }
    size_t directory = (size_t)(c - z->central);
    if (!st && total + directory > UINT32_MAX)
        st = sy_error(SY_ERR_UNSUPPORTED,
                      "'%s': the arrays take more than 4 GiB, past what a zip archive without "
                      "zip64 holds",
                      path);
    if (st) {
        sy_free(z);
        return st;
    }
    c = put32(c, 0x06054b50u);
    c = put16(c, 0); /* this disk */
    c = put16(c, 0); /* the directory's disk */
    c = put16(c, (uint32_t)n);
    c = put16(c, (uint32_t)n);
    c = put32(c, (uint32_t)directory);
    c = put32(c, (uint32_t)total);
    c = put16(c, 0); /* comment */
    z->bufs[3 * n] = z->central, z->sizes[3 * n] = (size_t)(c - z->central);
    st = io_write_file_atomic(path, z->bufs, z->sizes, 3 * n + 1);
    sy_free(z);
    return st;
}
