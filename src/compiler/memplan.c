/*
 * memplan.c - offsets for the activation arena from buffer lifetimes.
 *
 * Greedy by size (as in TensorFlow Lite's arena planner): place the largest
 * buffer first, each at the lowest offset where it overlaps no buffer
 * already placed whose lifetime intersects its own. Deterministic: ties
 * break on first use, then input order.
 */
#include "compiler_internal.h"

#include <stdlib.h>

typedef struct order_item {
    int64_t bytes;
    int32_t first;
    int64_t index;
} order_item;

static int by_size(const void *a, const void *b) {
    const order_item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

typedef struct span {
    int64_t lo, hi;
} span;

static int by_lo(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

sy_status memplan(sy_buffer_req *bufs, int64_t n, int64_t *total) {
    *total = 0;
    if (n == 0) return SY_OK;
    order_item *ord = sy_malloc((size_t)n * sizeof *ord);
    int64_t *placed = sy_malloc((size_t)n * sizeof *placed);
    span *busy = sy_malloc((size_t)n * sizeof *busy);
    if (!ord || !placed || !busy) {
        sy_free(ord);
        sy_free(placed);
        sy_free(busy);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "memory planner: out of memory");
    }
    for (int64_t i = 0; i < n; i++) ord[i] = (order_item){sy_align_up(bufs[i].bytes, SY_ALIGN), bufs[i].first, i};
    qsort(ord, (size_t)n, sizeof *ord, by_size);
    int64_t n_placed = 0;
    for (int64_t k = 0; k < n; k++) {
        sy_buffer_req *b = &bufs[ord[k].index];
        int64_t size = ord[k].bytes, nb = 0;
        for (int64_t j = 0; j < n_placed; j++) {
            sy_buffer_req *o = &bufs[placed[j]];
            if (o->first <= b->last && b->first <= o->last)
                busy[nb++] = (span){o->offset, o->offset + sy_align_up(o->bytes, SY_ALIGN)};
        }
        qsort(busy, (size_t)nb, sizeof *busy, by_lo);
        int64_t at = 0;
        for (int64_t j = 0; j < nb; j++) {
            if (busy[j].lo >= at + size) break;
            if (busy[j].hi > at) at = busy[j].hi;
        }
        b->offset = at;
        if (at + size > *total) *total = at + size;
        placed[n_placed++] = ord[k].index;
    }
    sy_free(ord);
    sy_free(placed);
    sy_free(busy);
    return SY_OK;
}
