/*
 * tflite.c - TensorFlow Lite model files (.tflite), read: the C half of the
 * reader. It takes the file's bytes (a copy: the tensors' constant data
 * point into it), hands them to tflite_fb.cc, which verifies them with
 * flatbuffers' Verifier and copies the first subgraph out, and turns its
 * message into SY_ERR_CORRUPT naming the file. It also names TFLite's
 * types and operators for other modules' messages. What it gives is a
 * file's contents, nothing of a model: the keras module builds a graph from
 * it. docs/design/tflite.md.
 */
#include "io_internal.h"

#include <string.h>

size_t io_tflite_type_size(int32_t type) {
    switch (type) {
    case IO_TFLITE_FLOAT32:
    case IO_TFLITE_INT32: return 4;
    case IO_TFLITE_INT64: return 8;
    case IO_TFLITE_INT16: return 2;
    case IO_TFLITE_UINT8:
    case IO_TFLITE_INT8: return 1;
    default: return 0;
    }
}

const char *io_tflite_type_name(int32_t type) {
    static const char *names[] = {"float32", "float16",   "int32",      "uint8",  "int64",   "string",
                                  "bool",    "int16",     "complex64",  "int8",   "float64", "complex128",
                                  "uint64",  "resource",  "variant",    "uint32", "uint16",  "int4"};
    if (type >= 0 && type < (int32_t)(sizeof names / sizeof *names)) return names[type];
    return "an unknown type";
}

void io_tflite_free(io_tflite *m) {
    if (!m) return;
    for (int32_t i = 0; m->tensors && i < m->n_tensors; i++) {
        sy_free(m->tensors[i].name);
        sy_free(m->tensors[i].scale);
        sy_free(m->tensors[i].zero_point);
    }
    for (int32_t i = 0; m->ops && i < m->n_ops; i++) {
        sy_free(m->ops[i].custom_code);
        sy_free(m->ops[i].inputs);
        sy_free(m->ops[i].outputs);
    }
    sy_free(m->tensors);
    sy_free(m->ops);
    sy_free(m->inputs);
    sy_free(m->outputs);
    sy_free(m->bytes);
    sy_free(m->path);
    sy_free(m);
}

/* Takes ownership of bytes (sy_malloc'd, non-NULL). */
static sy_status decode(uint8_t *bytes, size_t n, const char *what, io_tflite **out) {
    *out = NULL;
    io_tflite *m = sy_calloc(1, sizeof *m);
    char *path = sy_strdup(what);
    if (!m || !path) {
        sy_free(m);
        sy_free(path);
        sy_free(bytes);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", what);
    }
    m->path = path;
    m->bytes = bytes;
    m->size = n;
    char err[512];
    if (io_tflite_decode(m, err, sizeof err) != 0) {
        io_tflite_free(m);
        if (strcmp(err, "out of memory") == 0) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", what);
        return sy_error(SY_ERR_CORRUPT, "'%s' is not a valid TFLite model: %s", what, err);
    }
    *out = m;
    return SY_OK;
}

sy_status io_tflite_parse(const uint8_t *buf, size_t n, const char *what, io_tflite **out) {
    *out = NULL;
    /* sy_malloc aligns to 16 bytes, as the Verifier's alignment checks assume of the buffer's start */
    uint8_t *copy = sy_malloc(n);
    if (!copy) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", what);
    if (n) memcpy(copy, buf, n);
    return decode(copy, n, what, out);
}

sy_status io_tflite_read(const char *path, io_tflite **out) {
    *out = NULL;
    uint8_t *bytes = NULL;
    size_t n = 0;
    /* a flatbuffer cannot pass 2 GB; the file is refused before it is read */
    sy_status st = io_read_file_max(path, (size_t)1 << 31, "a TFLite model", &bytes, &n);
    if (st != SY_OK) return st;
    return decode(bytes, n, path, out);
}

sy_status io_tflite_write(const char *path, const io_tflite *m, const io_tflite_write_options *wo) {
    uint8_t *bytes = NULL;
    size_t n = 0;
    char err[512];
    if (io_tflite_encode(m, wo, &bytes, &n, err, sizeof err) != 0) {
        if (strcmp(err, "out of memory") == 0) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "cannot write '%s' as a TFLite model: %s", path, err);
    }
    const void *bufs[1] = {bytes};
    size_t sizes[1] = {n};
    sy_status st = io_write_file_atomic(path, bufs, sizes, 1);
    sy_free(bytes);
    return st;
}
