/*
 * tensor.c - owned dense arrays: a header and the elements in one
 * allocation, the elements aligned to SY_ALIGN. A string tensor's elements
 * are sy_string views; each string's bytes (and a NUL) are an allocation of
 * their own, which the tensor frees. A mapped tensor (sy_tensor_map) holds
 * its elements in a private mapping of a file instead, which it unmaps.
 */
#include "core_internal.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>

struct sy_tensor {
    sy_dtype dtype;
    sy_shape shape;
    int64_t count;
    void *data;
    void *map; /* sy_tensor_map: the mapping (of map_bytes) data lies in; NULL: data follows the header */
    size_t map_bytes;
};

static sy_status tensor_alloc(sy_dtype dtype, sy_shape shape, bool zero, sy_tensor **out) {
    *out = NULL;
    if ((unsigned)dtype >= SY_DTYPE_COUNT) return sy_error(SY_ERR_DTYPE, "tensor: invalid dtype %d", (int)dtype);
    if (dtype == SY_BF16) /* a plan's storage only: nothing reads or writes tensors of it */
        return sy_error(SY_ERR_DTYPE,
                        "tensor: bfloat16 is a compiled plan's storage dtype, not a tensor's");
    int64_t size = 0, head = sy_align_up((int64_t)sizeof(sy_tensor), SY_ALIGN), whole;
    sy_status st = sy_shape_bytes(&shape, sy_dtype_size(dtype), &size);
    if (st || sy_add_overflow64(size, head, &whole) || (uint64_t)whole > SIZE_MAX) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", st ? sy_last_error() : "too large");
        return sy_error(SY_ERR_SHAPE, "tensor: %s", msg);
    }
    int64_t count = sy_shape_count(&shape);
    size_t bytes = (size_t)size;
    sy_tensor *t = sy_malloc_aligned((size_t)whole, SY_ALIGN);
    if (!t) {
        char buf[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_OUT_OF_MEMORY, "tensor: out of memory for %s %s (%zu bytes)", sy_dtype_name(dtype),
                        sy_shape_format(&shape, buf, sizeof buf), bytes);
    }
    t->dtype = dtype;
    t->shape = shape;
    t->count = count;
    t->data = (char *)t + head;
    t->map = NULL;
    t->map_bytes = 0;
    if (zero || dtype == SY_STRING) memset(t->data, 0, bytes);
    *out = t;
    return SY_OK;
}

sy_status sy_tensor_map(int fd, size_t file_bytes, size_t at, sy_dtype dtype, sy_shape shape, sy_tensor **out) {
    *out = NULL;
    int64_t size = 0;
    if ((unsigned)dtype >= SY_DTYPE_COUNT || dtype == SY_STRING || dtype == SY_BF16 || at % SY_ALIGN ||
        at > file_bytes || sy_shape_bytes(&shape, sy_dtype_size(dtype), &size) || (uint64_t)size > file_bytes - at) {
        sy_clear_error();
        return SY_OK;
    }
    sy_tensor *t = sy_malloc(sizeof *t);
    if (!t) return sy_error(SY_ERR_OUT_OF_MEMORY, "tensor: out of memory");
    void *map = mmap(NULL, file_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) { /* a file system without mmap, an address space too small: the caller reads it */
        sy_free(t);
        return SY_OK;
    }
    *t = (sy_tensor){dtype, shape, sy_shape_count(&shape), (char *)map + at, map, file_bytes};
    *out = t;
    return SY_OK;
}

sy_status sy_tensor_new(sy_dtype dtype, sy_shape shape, sy_tensor **out) { return tensor_alloc(dtype, shape, true, out); }

sy_status sy_tensor_new_uninit(sy_dtype dtype, sy_shape shape, sy_tensor **out) {
    return tensor_alloc(dtype, shape, false, out);
}

void sy_tensor_free(sy_tensor *t) {
    if (t && t->dtype == SY_STRING)
        for (int64_t i = 0; i < t->count; i++) sy_free((void *)((sy_string *)t->data)[i].data);
    if (t && t->map) munmap(t->map, t->map_bytes);
    sy_free(t);
}
sy_dtype sy_tensor_dtype(const sy_tensor *t) { return t->dtype; }
sy_shape sy_tensor_shape(const sy_tensor *t) { return t->shape; }
int64_t sy_tensor_count(const sy_tensor *t) { return t->count; }
size_t sy_tensor_bytes(const sy_tensor *t) { return (size_t)t->count * sy_dtype_size(t->dtype); }
void *sy_tensor_data(const sy_tensor *t) { return t->data; }

double sy_tensor_get(const sy_tensor *t, int64_t i) {
    switch (t->dtype) {
    case SY_F32: return ((const float *)t->data)[i];
    case SY_F64: return ((const double *)t->data)[i];
    case SY_I32: return ((const int32_t *)t->data)[i];
    case SY_I64: return (double)((const int64_t *)t->data)[i];
    case SY_STRING: return NAN;
    default: return ((const uint8_t *)t->data)[i];
    }
}

static sy_status check_string(const sy_tensor *t, int64_t index, const char *what) {
    if (t->dtype != SY_STRING)
        return sy_error(SY_ERR_DTYPE, "%s: the tensor is %s, not string", what, sy_dtype_name(t->dtype));
    if (index < 0 || index >= t->count)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: index %lld is outside [0, %lld)", what, (long long)index,
                        (long long)t->count);
    return SY_OK;
}

sy_string sy_tensor_string(const sy_tensor *t, int64_t index) {
    sy_string empty = {(const uint8_t *)"", 0};
    if (t->dtype != SY_STRING || index < 0 || index >= t->count) return empty;
    sy_string s = ((const sy_string *)t->data)[index];
    return s.data ? s : empty;
}

sy_status sy_tensor_set_string(sy_tensor *t, int64_t index, const void *data, size_t n) {
    sy_status st = check_string(t, index, "tensor string");
    if (st) return st;
    uint8_t *copy = sy_malloc(n + 1);
    if (!copy) return sy_error(SY_ERR_OUT_OF_MEMORY, "tensor string: out of memory for %zu bytes", n);
    if (n) memcpy(copy, data, n);
    copy[n] = 0;
    sy_string *s = (sy_string *)t->data + index;
    sy_free((void *)s->data);
    *s = (sy_string){copy, (int64_t)n};
    return SY_OK;
}

sy_status sy_tensor_clone(const sy_tensor *t, sy_tensor **out) {
    sy_status st = sy_tensor_new(t->dtype, t->shape, out);
    if (st) return st;
    if (t->dtype != SY_STRING) {
        memcpy((*out)->data, t->data, sy_tensor_bytes(t));
        return SY_OK;
    }
    for (int64_t i = 0; i < t->count && !st; i++) {
        sy_string s = sy_tensor_string(t, i);
        if (s.size) st = sy_tensor_set_string(*out, i, s.data, (size_t)s.size);
    }
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

sy_status sy_tensor_reshape(sy_tensor *t, sy_shape shape) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (shape.rank < 0 || shape.rank > SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE, "reshape: rank %d is outside [0, %d]", shape.rank, SY_MAX_RANK);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < shape.rank; i++) {
        if (shape.dims[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (shape.dims[i] < 0)
            return sy_error(SY_ERR_SHAPE, "reshape: cannot reshape %s to %s: at most one dimension may be -1",
                            sy_shape_format(&t->shape, a, sizeof a), sy_shape_format(&shape, b, sizeof b));
        known *= shape.dims[i];
    }
    if (infer >= 0) {
        if (known == 0 || t->count % known != 0)
            return sy_error(SY_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s",
                            sy_shape_format(&t->shape, a, sizeof a), (long long)t->count,
                            sy_shape_format(&shape, b, sizeof b));
        shape.dims[infer] = t->count / known;
        known = t->count;
    }
    if (known != t->count)
        return sy_error(SY_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
                        sy_shape_format(&t->shape, a, sizeof a), (long long)t->count,
                        sy_shape_format(&shape, b, sizeof b), (long long)known);
    t->shape = shape;
    return SY_OK;
}
