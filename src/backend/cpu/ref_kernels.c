/*
 * ref_kernels.c - the reference backend: one plain scalar kernel per op.
 *
 * These kernels are the oracle. They are written for clarity, index by
 * index, with no blocking and no threads, and they exist in float32 and
 * float64 (ref_kernels.inc is included once per type), so the op harness can
 * check gradients against central differences in double precision and every
 * fast kernel against them. Layout ops (transpose, concat, slice, ...) move
 * bytes and are written once for every element size, so they also work on
 * int32 labels and indices.
 */
#include "../backend_internal.h"

#include <math.h>
#include <string.h>

/* Strides of an input broadcast (numpy rules, aligned right) against the
 * output shape: 0 along broadcast axes. */
static void bcast_strides(const sy_shape *in, const sy_shape *out, int64_t *strides) {
    int64_t s = 1;
    for (int i = out->rank - 1, j = in->rank - 1; i >= 0; i--, j--) {
        if (j >= 0 && in->dims[j] != 1) {
            strides[i] = s;
            s *= in->dims[j];
        } else {
            strides[i] = 0;
            if (j >= 0) s *= in->dims[j];
        }
    }
}

/* Offset into a broadcast input of output element `i`. */
static int64_t bcast_offset(int64_t i, const sy_shape *out, const int64_t *strides) {
    int64_t off = 0;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t q = i / out->dims[d];
        off += (i - q * out->dims[d]) * strides[d];
        i = q;
    }
    return off;
}

/* View a shape as (outer, n, inner) around `axis`. */
static void axis_split(const sy_shape *s, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->dims[i];
    *n = s->dims[axis];
    for (int i = axis + 1; i < s->rank; i++) *inner *= s->dims[i];
}

static int norm_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* ---- layout kernels, for any element size ------------------------------- */

static size_t esize(const sy_kargs *k) { return sy_dtype_size(k->dtype); }

static void copy_any(const sy_kargs *k) {
    if (k->out != k->in[0]) memcpy(k->out, k->in[0], (size_t)sy_shape_count(k->out_shape) * esize(k));
}

static void transpose_any(const sy_kargs *k) {
    const sy_shape *in = &k->in_shape[0], *out = k->out_shape;
    size_t es = esize(k);
    int64_t in_strides[SY_MAX_RANK], perm_strides[SY_MAX_RANK];
    int64_t s = 1;
    for (int d = in->rank - 1; d >= 0; d--) {
        in_strides[d] = s;
        s *= in->dims[d];
    }
    for (int d = 0; d < out->rank; d++) perm_strides[d] = in_strides[k->attr->transpose.perm[d]];
    int64_t n = sy_shape_count(out);
    const char *src = k->in[0];
    char *dst = k->out;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0, r = i;
        for (int d = out->rank - 1; d >= 0; d--) {
            int64_t q = r / out->dims[d];
            off += (r - q * out->dims[d]) * perm_strides[d];
            r = q;
        }
        memcpy(dst + i * es, src + off * es, es);
    }
}

static void concat_any(const sy_kargs *k) {
    const sy_shape *out = k->out_shape;
    int axis = k->attr->axis.axis;
    size_t es = esize(k);
    int64_t outer, n, inner;
    axis_split(out, axis, &outer, &n, &inner);
    char *dst = k->out;
    for (int64_t o = 0; o < outer; o++) {
        for (int j = 0; j < k->n_in; j++) {
            int64_t chunk = k->in_shape[j].dims[axis] * inner;
            memcpy(dst, (const char *)k->in[j] + o * chunk * es, (size_t)chunk * es);
            dst += chunk * es;
        }
    }
}

/* Copy the box at `begin` with the extent of `small` between a big tensor and
 * a small one; to_small selects the direction. */
static void box_copy(char *big, char *small, const sy_shape *bigs, const sy_shape *smalls,
                     const int64_t *begin, size_t es, bool to_small) {
    int64_t n = sy_shape_count(smalls);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0, r = i, stride = 1;
        for (int d = smalls->rank - 1; d >= 0; d--) {
            int64_t q = r / smalls->dims[d];
            off += (r - q * smalls->dims[d] + begin[d]) * stride;
            stride *= bigs->dims[d];
            r = q;
        }
        if (to_small)
            memcpy(small + i * es, big + off * es, es);
        else
            memcpy(big + off * es, small + i * es, es);
    }
}

static void slice_any(const sy_kargs *k) {
    box_copy(k->in[0], k->out, &k->in_shape[0], k->out_shape, k->attr->slice.begin, esize(k), true);
}

static void slice_grad_any(const sy_kargs *k) {
    memset(k->out, 0, (size_t)sy_shape_count(k->out_shape) * esize(k));
    box_copy(k->out, k->in[0], k->out_shape, &k->in_shape[0], k->attr->slice.begin, esize(k), false);
}

static void reverse_any(const sy_kargs *k) {
    int64_t outer, n, inner;
    axis_split(k->out_shape, k->attr->axis.axis, &outer, &n, &inner);
    size_t run = (size_t)inner * esize(k);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)k->out + ((size_t)(o * n + i)) * run, (const char *)k->in[0] + ((size_t)(o * n + n - 1 - i)) * run,
                   run);
}

static void broadcast_to_any(const sy_kargs *k) {
    int64_t strides[SY_MAX_RANK];
    size_t es = esize(k);
    bcast_strides(&k->in_shape[0], k->out_shape, strides);
    int64_t n = sy_shape_count(k->out_shape);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)k->out + i * es, (const char *)k->in[0] + bcast_offset(i, k->out_shape, strides) * es, es);
}

static void gather_any(const sy_kargs *k) {
    const sy_shape *ps = &k->in_shape[0];
    const int32_t *idx = k->in[1];
    int64_t rows = ps->dims[0], row = sy_shape_count(ps) / (rows ? rows : 1);
    int64_t n = sy_shape_count(&k->in_shape[1]);
    size_t rb = (size_t)row * esize(k);
    for (int64_t i = 0; i < n; i++) {
        char *dst = (char *)k->out + i * rb;
        if (idx[i] < 0 || idx[i] >= rows) {
            sy_exec_fail(k->ex, "gather: index %d at position %lld is out of range [0, %lld)", idx[i],
                         (long long)i, (long long)rows);
            memset(dst, 0, rb);
        } else {
            memcpy(dst, (const char *)k->in[0] + idx[i] * rb, rb);
        }
    }
}

/* Labels of sparse losses must lie in [0, classes). */
static bool label_ok(const sy_kargs *k, int32_t label, int64_t classes, int64_t i) {
    if (label >= 0 && label < classes) return true;
    sy_exec_fail(k->ex, "received a label value of %d at position %lld, which is outside the valid range of [0, %lld)",
                 label, (long long)i, (long long)classes);
    return false;
}

#define T float
#define SFX f32
#include "ref_kernels.inc"
#undef T
#undef SFX

#define T double
#define SFX f64
#include "ref_kernels.inc"
#undef T
#undef SFX

static const sy_kernel layout_kernels[SY_OP_COUNT] = {
    [SY_OP_COPY] = {copy_any, NULL},
    [SY_OP_RESHAPE] = {copy_any, NULL},
    [SY_OP_TRANSPOSE] = {transpose_any, NULL},
    [SY_OP_CONCAT] = {concat_any, NULL},
    [SY_OP_SLICE] = {slice_any, NULL},
    [SY_OP_SLICE_GRAD] = {slice_grad_any, NULL},
    [SY_OP_BROADCAST_TO] = {broadcast_to_any, NULL},
    [SY_OP_GATHER] = {gather_any, NULL},
    [SY_OP_REVERSE] = {reverse_any, NULL},
    [SY_OP_PAD] = {slice_grad_any, NULL}, /* zeros around x: slice_grad's placement */
};

const sy_kernel *sy_ref_kernel(sy_op op, sy_dtype dtype) {
    if ((unsigned)op >= SY_OP_COUNT) return NULL;
    if (layout_kernels[op].run) return &layout_kernels[op];
    const sy_kernel *table = dtype == SY_F32 ? ref_table_f32 : dtype == SY_F64 ? ref_table_f64 : NULL;
    if (!table || !table[op].run) return NULL;
    return &table[op];
}
