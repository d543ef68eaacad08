/*
 * broadcast.c - float32 broadcasting on the cpu backend (issue 15,
 * keras.applications): add, sub, mul and div whose operands broadcast in
 * ways the elementwise interpreter does not read (it takes full, row and
 * scalar operands), such as squeeze-and-excitation's (N, 1, 1, C) * (N, H,
 * W, C) in EfficientNet and MobileNetV3; and broadcast_to, which the
 * gradients of reduce_mean (BatchNormalization, global pooling) make. Both
 * ran the reference kernels, which find every element's source by dividing
 * its index, at ~30 M elements/s.
 *
 * The output is walked as rows of its last (merged) axis: adjacent axes
 * that every operand reads alike (all contiguous, or all broadcast) merge
 * into one, so (N, 1, 1, C) against (N, H, W, C) is rows of C with the
 * operand's row advancing once per H * W rows. Within a row an operand is
 * a vector (stride 1) or a scalar (stride 0), loops GCC vectorises. Rows
 * are split over threads; each element's value is one IEEE operation, so
 * the results are the reference kernel's exactly, whatever the split.
 */
#include "cpu_internal.h"

#include <string.h>

#define BCAST_ROWS_PER_PART 64

/* The output's axes merged, and each operand's element strides over them. */
typedef struct bcast_plan {
    int rank;
    int64_t dims[SY_MAX_RANK];
    int n;                              /* operands */
    int64_t stride[2][SY_MAX_RANK];     /* 0 where broadcast */
} bcast_plan;

static void plan_of(bcast_plan *p, const sy_shape *out, const sy_shape *const *in, int n) {
    int64_t st[2][SY_MAX_RANK];
    for (int k = 0; k < n; k++) {
        int64_t s = 1;
        for (int i = out->rank - 1, j = in[k]->rank - 1; i >= 0; i--, j--) {
            bool real = j >= 0 && in[k]->dims[j] != 1;
            st[k][i] = real ? s : 0;
            if (j >= 0) s *= in[k]->dims[j];
        }
    }
    p->n = n;
    p->rank = 0;
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] == 1) continue; /* reads nothing */
        int r = p->rank;
        bool merge = r > 0;
        for (int k = 0; k < n && merge; k++) /* the previous axis continues into this one */
            merge = st[k][i] == 0 ? p->stride[k][r - 1] == 0 : p->stride[k][r - 1] == st[k][i] * out->dims[i];
        if (merge) {
            p->dims[r - 1] *= out->dims[i];
            for (int k = 0; k < n; k++) p->stride[k][r - 1] = st[k][i];
        } else {
            p->dims[r] = out->dims[i];
            for (int k = 0; k < n; k++) p->stride[k][r] = st[k][i];
            p->rank++;
        }
    }
    if (p->rank == 0) { /* a single element */
        p->rank = 1;
        p->dims[0] = 1;
        for (int k = 0; k < n; k++) p->stride[k][0] = 0;
    }
}

typedef struct bcast_job {
    bcast_plan p;
    sy_op op;
    const float *in[2];
    float *out;
    size_t esize; /* broadcast_to: bytes per element */
    int64_t rows, row;
} bcast_job;

/* The operands' offsets at the start of row r. */
static void row_offsets(const bcast_plan *p, int64_t r, int64_t *off) {
    for (int k = 0; k < p->n; k++) off[k] = 0;
    for (int d = p->rank - 2; d >= 0; d--) {
        int64_t q = r / p->dims[d], i = r - q * p->dims[d];
        for (int k = 0; k < p->n; k++) off[k] += i * p->stride[k][d];
        r = q;
    }
}

/* Advance the offsets by one row: an odometer over the outer axes. */
static void next_row(const bcast_plan *p, int64_t *idx, int64_t *off) {
    for (int d = p->rank - 2; d >= 0; d--) {
        for (int k = 0; k < p->n; k++) off[k] += p->stride[k][d];
        if (++idx[d] < p->dims[d]) return;
        for (int k = 0; k < p->n; k++) off[k] -= p->dims[d] * p->stride[k][d];
        idx[d] = 0;
    }
}

static void start_index(const bcast_plan *p, int64_t r, int64_t *idx) {
    for (int d = p->rank - 2; d >= 0; d--) {
        idx[d] = r % p->dims[d];
        r /= p->dims[d];
    }
}

#define ROW_LOOP(expr)                                                                                                 \
    do {                                                                                                               \
        if (sa && sb)                                                                                                  \
            for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[i]; y_[i] = (expr); }                              \
        else if (sa)                                                                                                   \
            for (int64_t i = 0; i < n; i++) { float x = a[i], y = b[0]; y_[i] = (expr); }                              \
        else if (sb)                                                                                                   \
            for (int64_t i = 0; i < n; i++) { float x = a[0], y = b[i]; y_[i] = (expr); }                              \
        else                                                                                                           \
            for (int64_t i = 0; i < n; i++) { float x = a[0], y = b[0]; y_[i] = (expr); }                              \
    } while (0)

static void binary_part(void *ctx, int64_t part) {
    const bcast_job *j = ctx;
    const bcast_plan *p = &j->p;
    int64_t r0 = part * BCAST_ROWS_PER_PART, r1 = sy_min64(j->rows, r0 + BCAST_ROWS_PER_PART), n = j->row;
    int64_t idx[SY_MAX_RANK] = {0}, off[2];
    start_index(p, r0, idx);
    row_offsets(p, r0, off);
    bool sa = p->stride[0][p->rank - 1] != 0, sb = p->stride[1][p->rank - 1] != 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *a = j->in[0] + off[0], *b = j->in[1] + off[1];
        float *y_ = j->out + r * n;
        switch (j->op) {
        case SY_OP_ADD: ROW_LOOP(x + y); break;
        case SY_OP_SUB: ROW_LOOP(x - y); break;
        case SY_OP_MUL: ROW_LOOP(x * y); break;
        default: ROW_LOOP(x / y); break;
        }
        next_row(p, idx, off);
    }
}

void sy_cpu_bcast_binary(const sy_kargs *k) {
    bcast_job j;
    memset(&j, 0, sizeof j);
    const sy_shape *in[2] = {&k->in_shape[0], &k->in_shape[1]};
    plan_of(&j.p, k->out_shape, in, 2);
    j.op = k->op;
    j.in[0] = k->in[0];
    j.in[1] = k->in[1];
    j.out = k->out;
    j.row = j.p.dims[j.p.rank - 1];
    j.rows = sy_shape_count(k->out_shape) / (j.row ? j.row : 1);
    if (j.rows == 0 || j.row == 0) return;
    sy_parallel_parts(k->ex, (j.rows + BCAST_ROWS_PER_PART - 1) / BCAST_ROWS_PER_PART, binary_part, &j);
}

static void broadcast_part(void *ctx, int64_t part) {
    const bcast_job *j = ctx;
    const bcast_plan *p = &j->p;
    int64_t r0 = part * BCAST_ROWS_PER_PART, r1 = sy_min64(j->rows, r0 + BCAST_ROWS_PER_PART), n = j->row;
    int64_t idx[SY_MAX_RANK] = {0}, off[1];
    start_index(p, r0, idx);
    row_offsets(p, r0, off);
    bool contiguous = p->stride[0][p->rank - 1] != 0;
    size_t es = j->esize;
    const char *x = (const char *)j->in[0];
    char *y = (char *)j->out;
    for (int64_t r = r0; r < r1; r++) {
        char *dst = y + (size_t)(r * n) * es;
        const char *src = x + (size_t)off[0] * es;
        if (contiguous) {
            memcpy(dst, src, (size_t)n * es);
        } else if (es == sizeof(float)) {
            float v;
            memcpy(&v, src, sizeof v);
            for (int64_t i = 0; i < n; i++) ((float *)(void *)dst)[i] = v;
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, src, es);
        }
        next_row(p, idx, off);
    }
}

static void broadcast_to_fast(const sy_kargs *k) {
    bcast_job j;
    memset(&j, 0, sizeof j);
    const sy_shape *in[1] = {&k->in_shape[0]};
    plan_of(&j.p, k->out_shape, in, 1);
    j.in[0] = k->in[0];
    j.out = k->out;
    j.esize = sy_dtype_size(k->dtype);
    j.row = j.p.dims[j.p.rank - 1];
    j.rows = sy_shape_count(k->out_shape) / (j.row ? j.row : 1);
    if (j.rows == 0 || j.row == 0) return;
    sy_parallel_parts(k->ex, (j.rows + BCAST_ROWS_PER_PART - 1) / BCAST_ROWS_PER_PART, broadcast_part, &j);
}

const sy_kernel sy_cpu_broadcast_to = {broadcast_to_fast, NULL,
                                       sy_bf16_uniform}; /* any element size */
