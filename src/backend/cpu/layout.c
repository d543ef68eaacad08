/*
 * layout.c - slice and its gradient on the cpu backend, by contiguous runs.
 *
 * The reference kernels move one element at a time with index arithmetic,
 * which is fine for a test and ruinous for a recurrent layer that slices h
 * out of a (batch, 250, 6 * units) sequence every step. Here the box is
 * walked with an odometer over its outer axes and copied in runs: the run
 * is the innermost axis the box does not cover fully, times everything
 * inside it (which it does cover fully, so that stretch is contiguous in
 * both tensors).
 *
 * broadcast_to the same way: a run is the stretch of innermost axes where
 * the input is not broadcast (a BatchNormalization gradient's per-channel
 * row, (C,) -> (N, H, W, C), copies rows of C floats), spread over the
 * threads; an input of one element fills the output.
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

static void slice_fwd_f32_fast(const sy_kargs *k) {
    box_runs(k->in[0], k->out, &k->in_shape[0], k->out_shape, k->attr->slice.begin, sizeof(float), true);
}

static void slice_bwd_f32_fast(const sy_kargs *k) {
    memset(k->out, 0, (size_t)sy_shape_count(k->out_shape) * sizeof(float));
    box_runs(k->out, k->in[0], k->out_shape, &k->in_shape[0], k->attr->slice.begin, sizeof(float), false);
}

const sy_kernel sy_cpu_slice = {slice_fwd_f32_fast, NULL};
const sy_kernel sy_cpu_slice_grad = {slice_bwd_f32_fast, NULL};

/* ---- broadcast_to ---------------------------------------------------------- */

typedef struct bcast_job {
    const float *in;
    float *out;
    int rank, split;
    int64_t dims[SY_MAX_RANK], in_stride[SY_MAX_RANK]; /* output dims; input strides, 0 where broadcast */
    int64_t run, runs, parts;
} bcast_job;

static void bcast_part(void *ctx, int64_t part) {
    const bcast_job *j = ctx;
    int64_t r0, r1;
    sy_split_range(j->runs, (int)part, (int)j->parts, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = 0, q = r;
        for (int d = j->split - 1; d >= 0; d--) {
            off += (q % j->dims[d]) * j->in_stride[d];
            q /= j->dims[d];
        }
        memcpy(j->out + r * j->run, j->in + off, (size_t)j->run * sizeof(float));
    }
}

static void fill_part(void *ctx, int64_t part) {
    const bcast_job *j = ctx;
    int64_t b, e;
    sy_split_range(j->runs, (int)part, (int)j->parts, &b, &e);
    float v = j->in[0];
    for (int64_t i = b; i < e; i++) j->out[i] = v;
}

static void broadcast_to_f32_fast(const sy_kargs *k) {
    const sy_shape *xs = &k->in_shape[0], *ys = k->out_shape;
    int64_t n = sy_shape_count(ys);
    if (n == 0) return;
    bcast_job j = {.in = k->in[0], .out = k->out, .rank = ys->rank};
    int lead = ys->rank - xs->rank;
    int64_t stride = 1;
    for (int d = ys->rank - 1; d >= 0; d--) {
        int64_t xd = d >= lead ? xs->dims[d - lead] : 1;
        j.dims[d] = ys->dims[d];
        j.in_stride[d] = xd == 1 && ys->dims[d] != 1 ? 0 : stride;
        stride *= xd;
    }
    if (sy_shape_count(xs) == 1) {
        j.runs = n;
        j.parts = sy_max64(1, sy_min64(16, n / 65536));
        sy_parallel_parts(k->ex, j.parts, fill_part, &j);
        return;
    }
    j.split = ys->rank;
    j.run = 1;
    while (j.split > 0 && (j.in_stride[j.split - 1] != 0 || j.dims[j.split - 1] == 1)) j.run *= j.dims[--j.split];
    j.runs = n / j.run;
    j.parts = sy_max64(1, sy_min64(16, n / 65536));
    sy_parallel_parts(k->ex, j.parts, bcast_part, &j);
}

const sy_kernel sy_cpu_broadcast_to = {broadcast_to_f32_fast, NULL};
