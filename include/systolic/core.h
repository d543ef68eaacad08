/*
 * systolic/core.h - status codes, errors, allocator, shapes, dtypes, the
 * thread pool, seeded random streams and the log callback.
 *
 * Every fallible call in systolic returns an sy_status; SY_OK is zero. The
 * human-readable detail of the most recent failure on the calling thread is
 * in sy_last_error(): it names what went wrong, where, and what was expected.
 * The library never prints to stdout and never calls exit(); diagnostics go
 * through the log callback (stderr by default, warnings and errors only).
 */
#ifndef SYSTOLIC_CORE_H
#define SYSTOLIC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SY_VERSION_MAJOR 0
#define SY_VERSION_MINOR 1
#define SY_VERSION_PATCH 0

/* "0.1.0" */
const char *sy_version(void);

/* ---- status and errors ------------------------------------------------ */

typedef enum sy_status {
    SY_OK = 0,
    SY_ERR_INVALID_ARGUMENT, /* a bad option, flag or argument value */
    SY_ERR_SHAPE,            /* shapes that do not fit together */
    SY_ERR_DTYPE,            /* an element type an op does not take */
    SY_ERR_OUT_OF_MEMORY,    /* the allocator returned NULL */
    SY_ERR_IO,               /* a file could not be read or written */
    SY_ERR_CORRUPT,          /* a file's contents are damaged */
    SY_ERR_UNSUPPORTED,      /* valid, but not implemented here */
    SY_ERR_NOT_FOUND,        /* a name that does not exist */
    SY_ERR_STATE,            /* a call made at the wrong time */
    SY_ERR_INTERNAL          /* a broken invariant: a bug in systolic */
} sy_status;

/* A constant name such as "SY_ERR_SHAPE". */
const char *sy_status_name(sy_status status);

/* The message of the last failure on this thread; "" if none. The pointer
 * stays valid until the next failing call on this thread. */
const char *sy_last_error(void);

/* Forget the last failure on this thread. */
void sy_clear_error(void);

/* ---- element types ------------------------------------------------------ */

typedef enum sy_dtype {
    SY_F32 = 0, /* float: what models train in */
    SY_F64,     /* double: reference kernels only (gradient checks) */
    SY_I32,     /* int32_t: labels and indices */
    SY_U8,      /* uint8_t: raw pixels and labels as datasets store them (tensors only, not graph values) */
    SY_I64,     /* int64_t: tf.train.Example's integers (tensors only) */
    SY_STRING,  /* byte strings (sy_string): records, lines, file names (tensors only) */
    /* issue 16: bfloat16, 2 bytes, how a compiled plan stores activations under mixed_bfloat16; neither a
     * tensor's nor a graph value's dtype */
    SY_BF16,
    /* issue 18: int8, TensorFlow Lite's quantized values (docs/design/tflite.md): a tensor's and a graph
     * value's dtype; what the numbers mean (scale, zero point) is the ops' business, in their attributes */
    SY_I8,
    SY_DTYPE_COUNT
} sy_dtype;

/* Bytes of one element: sizeof(sy_string) for SY_STRING. */
size_t sy_dtype_size(sy_dtype dtype);
/* "float32", "float64", "int32", "uint8", "int64", "string", "bfloat16", "int8" */
const char *sy_dtype_name(sy_dtype dtype);

/* An element of a SY_STRING tensor, tf.string's: `size` bytes (any
 * bytes, NULs included) followed by a NUL that `size` does not count. The
 * tensor owns them. */
typedef struct sy_string {
    const uint8_t *data;
    int64_t size;
} sy_string;

/* ---- shapes ------------------------------------------------------------- */

#define SY_MAX_RANK 8

/* A static shape: rank 0 is a scalar. Dimensions are always known. */
typedef struct sy_shape {
    int32_t rank;
    int64_t dims[SY_MAX_RANK];
} sy_shape;

/* sy_shape_of(2, 128, 10) is the shape (128, 10). rank <= SY_MAX_RANK. */
sy_shape sy_shape_of(int rank, ...);
sy_shape sy_shape_from(int rank, const int64_t *dims);
/* The product of the dims; 1 for a scalar. A product past INT64_MAX gives
 * INT64_MAX (never wraps): sy_shape_bytes says so as an error. */
int64_t sy_shape_count(const sy_shape *shape);
/* The bytes of a dense array of `shape` with elements of `elem_size`
 * bytes, in *bytes: the one checked product every size of an array is
 * computed with. SY_ERR_SHAPE naming the shape for a negative dimension or
 * a size past INT64_MAX bytes (*bytes is then 0). */
sy_status sy_shape_bytes(const sy_shape *shape, size_t elem_size, int64_t *bytes);
bool sy_shape_equal(const sy_shape *a, const sy_shape *b);
/* Writes "(128, 28, 28, 1)" (Python's tuple notation) into buf; returns buf. */
char *sy_shape_format(const sy_shape *shape, char *buf, size_t size);
#define SY_SHAPE_STR_MAX 192

/* ---- tensors ------------------------------------------------------------ */

/* An owned, dense, row-major array with a dtype and a shape: what datasets
 * load, what fit() and evaluate() read and what predict() returns. Unlike
 * graph shapes, a tensor's dimensions may be 0 (an empty array). A string
 * tensor's data is an array of sy_string views of bytes it owns: set them
 * with sy_tensor_set_string, copy the tensor with sy_tensor_clone. */
typedef struct sy_tensor sy_tensor;

/* A zero-filled tensor. SY_ERR_SHAPE for a negative dimension or a rank
 * outside [0, SY_MAX_RANK]; SY_ERR_OUT_OF_MEMORY. */
sy_status sy_tensor_new(sy_dtype dtype, sy_shape shape, sy_tensor **out);
void sy_tensor_free(sy_tensor *t);
sy_dtype sy_tensor_dtype(const sy_tensor *t);
sy_shape sy_tensor_shape(const sy_tensor *t);
int64_t sy_tensor_count(const sy_tensor *t); /* elements */
size_t sy_tensor_bytes(const sy_tensor *t);
/* The elements, row-major, sy_tensor_bytes() of them; the tensor owns them. */
void *sy_tensor_data(const sy_tensor *t);
/* Element `index` (row-major) as a double, whatever the dtype (NAN for a
 * string). */
double sy_tensor_get(const sy_tensor *t, int64_t index);
/* A string tensor's element `index` (an empty string until set), and
 * setting it to a copy of n bytes. SY_ERR_DTYPE for another dtype; an
 * index outside the tensor is SY_ERR_INVALID_ARGUMENT. */
sy_string sy_tensor_string(const sy_tensor *t, int64_t index);
sy_status sy_tensor_set_string(sy_tensor *t, int64_t index, const void *data, size_t n);
/* A new tensor equal to t (strings copied). */
sy_status sy_tensor_clone(const sy_tensor *t, sy_tensor **out);
/* Give the tensor a new shape with the same element count (no copy), as
 * numpy's reshape; one dimension may be -1 (inferred). SY_ERR_SHAPE names
 * both shapes when the counts differ. */
sy_status sy_tensor_reshape(sy_tensor *t, sy_shape shape);

/* ---- memory ------------------------------------------------------------- */

/* Every allocation systolic makes goes through this allocator. alloc returns
 * memory aligned to `align` (a power of two, at most 4096) or NULL. */
typedef struct sy_allocator {
    void *(*alloc)(void *ctx, size_t size, size_t align);
    void (*free)(void *ctx, void *ptr);
    void *ctx;
} sy_allocator;

/* Install an allocator for all later allocations (NULL restores the default,
 * aligned_alloc/free). Memory must be freed by the allocator that made it, so
 * set this before creating any object. Not thread-safe against concurrent
 * allocation. */
void sy_set_allocator(const sy_allocator *allocator);

/* Free memory systolic made and handed to the caller as a plain pointer
 * (sy_model_to_json's string), through the allocator that made it. NULL
 * is a no-op. */
void sy_free(void *ptr);

/* ---- thread pool -------------------------------------------------------- */

/* A persistent pool of worker threads. sy_pool_run(pool, fn, ctx, n) calls
 * fn(ctx, i, n) for i in [0, n) on n threads (the caller is thread 0) and
 * returns when all have returned. n may be at most sy_pool_size(pool). Calls
 * to sy_pool_run on one pool must not overlap. */
typedef struct sy_pool sy_pool;
typedef void (*sy_pool_fn)(void *ctx, int index, int count);

/* threads: total threads including the caller; 0 means one per core. */
sy_status sy_pool_new(int threads, sy_pool **out);
void sy_pool_free(sy_pool *pool);
int sy_pool_size(const sy_pool *pool);
void sy_pool_run(sy_pool *pool, sy_pool_fn fn, void *ctx, int count);

/* Cores this process may run on (sched_getaffinity), at least 1. */
int sy_cpu_count(void);

/* ---- random numbers ----------------------------------------------------- */

/* A counter-based stream (Philox-4x32-10): the same (seed, stream) always gives
 * the same numbers, whichever thread draws them and in which order streams
 * are used. Derive one stream per replica, layer or pipeline stage. */
typedef struct sy_rng {
    uint64_t key;
    uint64_t counter;
} sy_rng;

sy_rng sy_rng_new(uint64_t seed, uint64_t stream);
uint32_t sy_rng_u32(sy_rng *rng);
float sy_rng_uniform(sy_rng *rng);   /* [0, 1) with 24 random bits */
double sy_rng_uniform64(sy_rng *rng); /* [0, 1) with 53 random bits */
double sy_rng_normal(sy_rng *rng);   /* standard normal (Box-Muller) */

/* ---- logging ------------------------------------------------------------ */

typedef enum sy_log_level { SY_LOG_DEBUG, SY_LOG_INFO, SY_LOG_WARNING, SY_LOG_ERROR } sy_log_level;
typedef void (*sy_log_fn)(void *ctx, sy_log_level level, const char *message);

/* Route diagnostics to fn (NULL restores the default: stderr, warnings and
 * above). */
void sy_set_log(sy_log_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
