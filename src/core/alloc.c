/*
 * alloc.c - the pluggable allocator, logging and the clock.
 *
 * All memory systolic owns comes from the installed sy_allocator. The default
 * is malloc's, aligned by hand (default_alloc). Every successful call is
 * counted (a relaxed atomic), so a test can assert that running a compiled
 * plan makes no allocation at all.
 */
#include "core_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The default allocator: malloc's block with room for the alignment and a
 * pointer back to the block's start, kept just below the address handed
 * out. memalign and aligned_alloc would do the same job but carve each
 * block out of a bigger one and free the pieces, which costs several
 * times more than malloc for the small tensors an input pipeline makes and
 * frees by the hundred thousand per second; malloc's per-thread caches
 * serve these. */
static void *default_alloc(void *ctx, size_t size, size_t align) {
    (void)ctx;
    if (size > SIZE_MAX - align - sizeof(void *)) return NULL;
    char *block = malloc(size + align - 1 + sizeof(void *));
    if (!block) return NULL;
    uintptr_t at = ((uintptr_t)(block + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)at)[-1] = block;
    return (void *)at;
}

static void default_free(void *ctx, void *ptr) {
    (void)ctx;
    free(((void **)ptr)[-1]);
}

static sy_allocator allocator = {default_alloc, default_free, NULL};
static atomic_uint_fast64_t alloc_calls;

void sy_set_allocator(const sy_allocator *a) {
    if (a) {
        allocator = *a;
    } else {
        allocator.alloc = default_alloc;
        allocator.free = default_free;
        allocator.ctx = NULL;
    }
}

uint64_t sy_alloc_count(void) { return atomic_load_explicit(&alloc_calls, memory_order_relaxed); }

void *sy_malloc_aligned(size_t size, size_t align) {
    if (align < sizeof(void *)) align = sizeof(void *);
    void *p = allocator.alloc(allocator.ctx, size ? size : 1, align);
    if (p) atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed);
    return p;
}

void *sy_malloc(size_t size) { return sy_malloc_aligned(size, 16); }

void *sy_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = sy_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void sy_free(void *ptr) {
    if (ptr) allocator.free(allocator.ctx, ptr);
}

void *sy_realloc_array(void *ptr, size_t old_count, size_t new_count, size_t elem) {
    if (elem && new_count > SIZE_MAX / elem) return NULL;
    void *p = sy_malloc(new_count * elem);
    if (!p) return NULL;
    if (ptr) memcpy(p, ptr, (old_count < new_count ? old_count : new_count) * elem);
    sy_free(ptr);
    return p;
}

sy_status sy_grow_impl(void **arr, int64_t *cap, int64_t need, size_t elem) {
    int64_t n = *cap ? *cap : 8;
    while (n < need) n *= 2;
    void *p = sy_realloc_array(*arr, (size_t)*cap, (size_t)n, elem);
    if (!p) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory growing an array to %lld elements", (long long)n);
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
    *arr = p;
    *cap = n;
    return SY_OK;
}

char *sy_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = sy_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---- logging ------------------------------------------------------------- */

static void default_log(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level < SY_LOG_WARNING) return;
    fprintf(stderr, "systolic: %s: %s\n", level == SY_LOG_WARNING ? "warning" : "error", message);
}

static sy_log_fn log_fn = default_log;
static void *log_ctx;

void sy_set_log(sy_log_fn fn, void *ctx) {
    log_fn = fn ? fn : default_log;
    log_ctx = fn ? ctx : NULL;
}

void sy_log(sy_log_level level, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(log_ctx, level, buf);
}

double sy_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
