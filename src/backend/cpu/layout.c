/*
 * layout.c - slice and its gradient on the cpu backend, by contiguous runs.
 *
 * The reference kernels move one element at a time with index arithmetic,
 * which is fine for a test and ruinous for a recurrent layer that slices h
 * out of a (batch, 250, 6 * units) sequence every step. Here the box is
 * walked with an odometer over its outer axes and copied in runs: the run
 * is the innermost axis the box does not cover fully, times everything
 * inside it (which it does cover fully, so that stretch is contiguous in
 * both tensors). (broadcast_to, which moves runs too, is broadcast.c's,
 * with the broadcasting binary ops.)
 */
#include "cpu_internal.h"

/* Copy the box of extent `small` at `begin` between big and small. */
static void box_runs(char *big, char *small, const sy_shape *bigs, const sy_shape *smalls, const int64_t *begin,
                     size_t es, bool to_small) {
    int rank = smalls->rank;
    if (rank == 0) {
        memcpy(to_small ? small : big, to_small ? big : small, es);
        return;
    }
    /* axes [split, rank) form one contiguous run */
    int split = rank - 1;
    while (split > 0 && smalls->dims[split] == bigs->dims[split]) split--;
    size_t run = es;
    for (int d = split; d < rank; d++) run *= (size_t)smalls->dims[d];
    int64_t big_stride[SY_MAX_RANK], stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        big_stride[d] = stride;
        stride *= bigs->dims[d];
    }
    int64_t idx[SY_MAX_RANK] = {0}, runs = 1;
    for (int d = 0; d < split; d++) runs *= smalls->dims[d];
    for (int64_t r = 0; r < runs; r++) {
        int64_t off = begin[split] * big_stride[split];
        for (int d = 0; d < split; d++) off += (begin[d] + idx[d]) * big_stride[d];
        for (int d = split + 1; d < rank; d++) off += begin[d] * big_stride[d];
        char *b = big + (size_t)off * es, *s = small + (size_t)r * run;
        memcpy(to_small ? s : b, to_small ? b : s, run);
        for (int d = split - 1; d >= 0 && ++idx[d] == smalls->dims[d]; d--) idx[d] = 0;
    }
}

/* Elements of k->dtype's size: float32, or bfloat16 storage (issue 16) */
static void slice_fwd_f32_fast(const sy_kargs *k) {
    box_runs(k->in[0], k->out, &k->in_shape[0], k->out_shape, k->attr->slice.begin,
             sy_dtype_size(k->dtype), true);
}

static void slice_bwd_f32_fast(const sy_kargs *k) {
    size_t es = sy_dtype_size(k->dtype);
    memset(k->out, 0, (size_t)sy_shape_count(k->out_shape) * es);
    box_runs(k->out, k->in[0], k->out_shape, &k->in_shape[0], k->attr->slice.begin, es, false);
}

const sy_kernel sy_cpu_slice = {slice_fwd_f32_fast, NULL, sy_bf16_uniform};
const sy_kernel sy_cpu_slice_grad = {slice_bwd_f32_fast, NULL, sy_bf16_uniform};
