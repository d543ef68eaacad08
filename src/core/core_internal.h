/*
 * core_internal.h - the back door into core for the other modules: setting
 * errors, allocating through the installed allocator, invariants, logging,
 * and the small helpers every module uses.
 */
#ifndef SY_CORE_INTERNAL_H
#define SY_CORE_INTERNAL_H

#include "systolic/core.h"

#include <stdarg.h>
#include <stdio.h>

/* Record a failure for sy_last_error() and return `status`, so a call site
 * reads: return sy_error(SY_ERR_SHAPE, "matmul: ..."). */
sy_status sy_error(sy_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sy_status sy_verror(sy_status status, const char *fmt, va_list ap);

/* Allocation through the installed allocator. SY_ALIGN is the alignment every
 * tensor buffer gets (a cache line, and an AVX-512 vector). sy_malloc of 0
 * bytes returns a valid unique pointer. sy_alloc_count() counts successful
 * calls to the allocator since start (tests use it to prove that a compiled
 * step allocates nothing). */
#define SY_ALIGN 64
void *sy_malloc(size_t size);
void *sy_calloc(size_t count, size_t size);
void *sy_malloc_aligned(size_t size, size_t align);
void *sy_realloc_array(void *ptr, size_t old_count, size_t new_count, size_t elem);
char *sy_strdup(const char *s);
uint64_t sy_alloc_count(void);

/* sy_tensor_new without zeroing the data, for a caller that writes every
 * element (SY_STRING tensors are zeroed all the same: their strings are
 * pointers). */
sy_status sy_tensor_new_uninit(sy_dtype dtype, sy_shape shape, sy_tensor **out);

/* A tensor whose elements are the bytes of the open file fd (file_bytes long) from offset `at` on, as they
 * are: the file mapped privately (copy on write: writing the tensor leaves the file as it is), not read. Pages
 * already in the page cache are mapped, not copied, and nothing is zeroed, so a large .npy costs next to
 * nothing to open (sy_npy_read). *out NULL (and SY_OK) where it cannot map: `at` not a multiple of SY_ALIGN,
 * the elements past the file's end, mmap refused; the caller reads the file then. The file may be closed
 * afterwards. As with any mapping, a file truncated by another process while the tensor is alive makes
 * reading the lost part fault (SIGBUS). */
sy_status sy_tensor_map(int fd, size_t file_bytes, size_t at, sy_dtype dtype, sy_shape shape, sy_tensor **out);

/* Grow a dynamic array so that index `need - 1` fits. */
#define SY_GROW(arr, count_cap, need)                                                              \
    ((need) <= (count_cap) ? SY_OK : sy_grow_impl((void **)&(arr), &(count_cap), (need), sizeof *(arr)))
sy_status sy_grow_impl(void **arr, int64_t *cap, int64_t need, size_t elem);

/* Invariant checks stay on in release builds: a broken invariant is a bug in
 * systolic, reported with file and line before abort(). */
#define SY_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) sy_assert_fail(#cond, __FILE__, __LINE__);                                    \
    } while (0)
_Noreturn void sy_assert_fail(const char *cond, const char *file, int line);

void sy_log(sy_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline int64_t sy_align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
/* Checked int64 arithmetic for sizes: true (and *out unspecified) when the
 * result does not fit. Sizes built from shapes go through these or
 * sy_shape_bytes, never a bare `*`. */
static inline bool sy_mul_overflow64(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }
static inline bool sy_add_overflow64(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }
static inline int64_t sy_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t sy_max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Split [0, n) into `count` contiguous parts; part `index` is [*begin, *end). */
static inline void sy_split_range(int64_t n, int index, int count, int64_t *begin, int64_t *end) {
    int64_t q = n / count, r = n % count;
    *begin = index * q + (index < r ? index : r);
    *end = *begin + q + (index < r ? 1 : 0);
}

/* A reusable barrier for `count` threads (C11 atomics and a condition
 * variable: waiters spin briefly on the generation, then sleep). */
typedef struct sy_barrier {
    void *impl;
} sy_barrier;
sy_status sy_barrier_init(sy_barrier *b, int count);
void sy_barrier_destroy(sy_barrier *b);
void sy_barrier_wait(sy_barrier *b);

/* Monotonic seconds, for benchmarks and the progress bar. */
double sy_now(void);

/* Philox-4x32-10 block: four 32-bit outputs for (key, counter). */
void sy_philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);
/* A well-mixed 64-bit hash, to derive keys from seeds and stream ids. */
uint64_t sy_mix64(uint64_t x);

#endif
