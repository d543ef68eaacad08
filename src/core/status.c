/*
 * status.c - result codes and the per-thread last-error message.
 *
 * The message lives in a thread-local buffer so concurrent failures on
 * different threads (replicas, pipeline workers) do not garble each other.
 * Messages longer than the buffer are cut with "...".
 */
#include "core_internal.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[2048];

const char *sy_version(void) { return "0.1.0"; }

const char *sy_status_name(sy_status status) {
    switch (status) {
    case SY_OK: return "SY_OK";
    case SY_ERR_INVALID_ARGUMENT: return "SY_ERR_INVALID_ARGUMENT";
    case SY_ERR_SHAPE: return "SY_ERR_SHAPE";
    case SY_ERR_DTYPE: return "SY_ERR_DTYPE";
    case SY_ERR_OUT_OF_MEMORY: return "SY_ERR_OUT_OF_MEMORY";
    case SY_ERR_IO: return "SY_ERR_IO";
    case SY_ERR_CORRUPT: return "SY_ERR_CORRUPT";
    case SY_ERR_UNSUPPORTED: return "SY_ERR_UNSUPPORTED";
    case SY_ERR_NOT_FOUND: return "SY_ERR_NOT_FOUND";
    case SY_ERR_STATE: return "SY_ERR_STATE";
    case SY_ERR_INTERNAL: return "SY_ERR_INTERNAL";
    }
    return "SY_ERR_UNKNOWN";
}

const char *sy_last_error(void) { return last_error; }

void sy_clear_error(void) { last_error[0] = '\0'; }

sy_status sy_verror(sy_status status, const char *fmt, va_list ap) {
    char tmp[sizeof last_error];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n >= (int)sizeof tmp) memcpy(tmp + sizeof tmp - 4, "...", 4);
    memcpy(last_error, tmp, sizeof tmp);
    return status;
}

sy_status sy_error(sy_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sy_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

_Noreturn void sy_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "systolic: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    fflush(stderr);
    abort();
}

/* ---- dtypes and shapes --------------------------------------------------- */

size_t sy_dtype_size(sy_dtype dtype) {
    switch (dtype) {
    case SY_F32: return 4;
    case SY_F64: return 8;
    case SY_I32: return 4;
    case SY_U8: return 1;
    case SY_I64: return 8;
    case SY_STRING: return sizeof(sy_string);
    case SY_BF16:
        return 2;
    case SY_I8: return 1;
    default: return 0;
    }
}

const char *sy_dtype_name(sy_dtype dtype) {
    switch (dtype) {
    case SY_F32: return "float32";
    case SY_F64: return "float64";
    case SY_I32: return "int32";
    case SY_U8: return "uint8";
    case SY_I64: return "int64";
    case SY_STRING: return "string";
    case SY_BF16:
        return "bfloat16";
    case SY_I8: return "int8";
    default: return "invalid";
    }
}

sy_shape sy_shape_of(int rank, ...) {
    sy_shape s = {0};
    SY_ASSERT(rank >= 0 && rank <= SY_MAX_RANK);
    s.rank = rank;
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) s.dims[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}

sy_shape sy_shape_from(int rank, const int64_t *dims) {
    sy_shape s = {0};
    SY_ASSERT(rank >= 0 && rank <= SY_MAX_RANK);
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    return s;
}

int64_t sy_shape_count(const sy_shape *shape) {
    int64_t n = 1;
    for (int i = 0; i < shape->rank; i++)
        if (sy_mul_overflow64(n, shape->dims[i], &n)) return INT64_MAX;
    return n;
}

sy_status sy_shape_bytes(const sy_shape *shape, size_t elem_size, int64_t *bytes) {
    char buf[SY_SHAPE_STR_MAX];
    *bytes = 0;
    if (shape->rank < 0 || shape->rank > SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE, "shape: rank %d is outside [0, %d]", shape->rank, SY_MAX_RANK);
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] < 0)
            return sy_error(SY_ERR_SHAPE, "shape %s has a negative dimension", sy_shape_format(shape, buf, sizeof buf));
    int64_t n = 1; /* the count first: it must fit whatever the element size */
    bool over = elem_size > INT64_MAX;
    for (int i = 0; i < shape->rank && !over; i++) over = sy_mul_overflow64(n, shape->dims[i], &n);
    if (over || sy_mul_overflow64(n, (int64_t)elem_size, &n))
        return sy_error(SY_ERR_SHAPE, "shape %s of %zu-byte elements is too large: more than %lld bytes",
                        sy_shape_format(shape, buf, sizeof buf), elem_size, (long long)INT64_MAX);
    *bytes = n;
    return SY_OK;
}

bool sy_shape_equal(const sy_shape *a, const sy_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

char *sy_shape_format(const sy_shape *shape, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int n_ = snprintf(buf + used, used < size ? size - used : 0, __VA_ARGS__);                 \
        if (n_ > 0) used += (size_t)n_;                                                            \
    } while (0)
    PUT("(");
    for (int i = 0; i < shape->rank; i++) PUT(i ? ", %lld" : "%lld", (long long)shape->dims[i]);
    PUT(shape->rank == 1 ? ",)" : ")");
#undef PUT
    return buf;
}
