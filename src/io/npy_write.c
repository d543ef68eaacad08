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
 * Written through io_write_file_atomic: a failed or interrupted write
 * leaves any file already at the path as it was.
 */
#include "io_internal.h"

#include <stdio.h>
#include <string.h>

sy_status sy_npy_write(const char *path, const sy_tensor *t) {
    if (!path || !t) return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_npy_write: a path and a tensor are required");
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
    char header[512]; /* at most 10 + 60 + sizeof dims, padded to 64 */
    int n = snprintf(header + 10, sizeof header - 10, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                     order, kind, dims);
    size_t total = 10 + (size_t)n + 1, padded = (total + 63) / 64 * 64; /* + 1: the newline */
    memset(header + 10 + n, ' ', padded - 10 - (size_t)n - 1);
    header[padded - 1] = '\n';
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    header[8] = (char)((padded - 10) & 0xff);
    header[9] = (char)((padded - 10) >> 8);
    const void *bufs[2] = {header, sy_tensor_data(t)};
    size_t sizes[2] = {padded, (size_t)sy_tensor_count(t) * sy_dtype_size(dt)};
    return io_write_file_atomic(path, bufs, sizes, 2);
}
