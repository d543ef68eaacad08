/*
 * loss.c - softmax, log-softmax and the fused sparse softmax cross-entropy
 * (forward and gradient) on the cpu backend.
 *
 * All four are row operations: a max over the row (for numerical
 * stability), a sum of exp(x - max), then a pass that writes the result. A
 * row is short (10 classes for MNIST-style heads, a few thousand for a
 * language model's), so each row is finished while it sits in L1 and the
 * tensor is read from memory once.
 *
 * Rows along the last axis (the common case, and the only one for the
 * losses) are contiguous. Max and sum are reduced in LANES independent
 * accumulators, so GCC can vectorise them without reassociating floats
 * (which it will not do on its own); the accumulation order depends on the
 * row length only. exp is the branch-free sy_vexpf, which vectorises.
 * Softmax stores exp(x - max) in the output and then scales it by 1 / sum,
 * so exp is evaluated once per element. A softmax over another axis is a
 * set of rows strided by `inner`: those are taken CHUNK columns at a time,
 * with per-column max and sum on the stack, so loops still run over
 * contiguous memory.
 *
 * The loss forward writes lse(x) - x[label] per row; the gradient writes
 * dl * (softmax(x) - onehot(label)) in one pass, reusing the output row for
 * the exponentials. Labels are checked before any work, on the calling
 * thread and in row order, so an out-of-range label is reported with the
 * same message (the reference's) for the same position whatever the thread
 * count; its row's loss is 0, and its gradient row has no one-hot term (the
 * forward already failed the run).
 *
 * Parts are runs of rows with about GRAIN elements each, fixed by the shape;
 * every output element is written by one part, in the same order always.
 */
#include "cpu_internal.h"

#define LANES 16
#define CHUNK 64
#define GRAIN 16384

/* ---- row kernels ----------------------------------------------------------- */

static inline float row_max(const float *restrict x, int64_t n) {
    float m = x[0];
    int64_t j = 1;
    if (n >= 2 * LANES) {
        float acc[LANES];
        for (int l = 0; l < LANES; l++) acc[l] = x[l];
        for (j = LANES; j + LANES <= n; j += LANES)
            for (int l = 0; l < LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
        m = acc[0];
        for (int l = 1; l < LANES; l++) m = acc[l] > m ? acc[l] : m;
    }
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* sum of exp(x - m); the exponentials go to e unless it is NULL. */
static inline float row_sum_exp(float *restrict e, const float *restrict x, float m, int64_t n) {
    float acc[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            float v = sy_vexpf(x[j + l] - m);
            if (e) e[j + l] = v;
            acc[l] += v;
        }
    for (int l = 0; j + l < n; l++) {
        float v = sy_vexpf(x[j + l] - m);
        if (e) e[j + l] = v;
        acc[l] += v;
    }
    float s = 0;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return s;
}

/* y (rows, n) = softmax of x (rows, n) along the rows */
static void softmax_fwd_f32_fast(float *restrict y, const float *restrict x, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++, x += n, y += n) {
        float m = row_max(x, n);
        float inv = 1.0f / row_sum_exp(y, x, m, n);
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    }
}

static void log_softmax_fwd_f32_fast(float *restrict y, const float *restrict x, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++, x += n, y += n) {
        float m = row_max(x, n);
        float lse = m + logf(row_sum_exp(NULL, x, m, n));
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - lse;
    }
}

/* Columns [i0, i0 + w) of one (n, inner) slab, w <= CHUNK: the softmax of
 * each column. */
static void softmax_cols_fwd_f32_fast(float *restrict y, const float *restrict x, bool log_form, int64_t n,
                                      int64_t inner, int64_t i0, int64_t w) {
    float m[CHUNK], s[CHUNK];
    x += i0;
    y += i0;
    for (int64_t l = 0; l < w; l++) {
        m[l] = x[l];
        s[l] = 0;
    }
    for (int64_t j = 1; j < n; j++)
        for (int64_t l = 0; l < w; l++) m[l] = x[j * inner + l] > m[l] ? x[j * inner + l] : m[l];
    for (int64_t j = 0; j < n; j++)
        for (int64_t l = 0; l < w; l++) {
            float v = sy_vexpf(x[j * inner + l] - m[l]);
            if (!log_form) y[j * inner + l] = v;
            s[l] += v;
        }
    if (log_form) {
        for (int64_t l = 0; l < w; l++) m[l] += logf(s[l]);
        for (int64_t j = 0; j < n; j++)
            for (int64_t l = 0; l < w; l++) y[j * inner + l] = x[j * inner + l] - m[l];
    } else {
        for (int64_t l = 0; l < w; l++) s[l] = 1.0f / s[l];
        for (int64_t j = 0; j < n; j++)
            for (int64_t l = 0; l < w; l++) y[j * inner + l] *= s[l];
    }
}

/* loss (rows) = logsumexp(x[r]) - x[r, label[r]]; 0 where the label is out
 * of range (reported by the caller). */
static void sparse_softmax_ce_fwd_f32_fast(float *restrict loss, const float *restrict x, const int32_t *restrict label,
                                           int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++, x += n) {
        int32_t t = label[r];
        if (t < 0 || t >= n) {
            loss[r] = 0;
            continue;
        }
        float m = row_max(x, n);
        loss[r] = m + logf(row_sum_exp(NULL, x, m, n)) - x[t];
    }
}

/* dx (rows, n) = dl[r] * (softmax(x[r]) - onehot(label[r])) */
static void sparse_softmax_ce_bwd_f32_fast(float *restrict dx, const float *restrict dl, const float *restrict x,
                                           const int32_t *restrict label, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++, x += n, dx += n) {
        float m = row_max(x, n);
        float scale = dl[r] / row_sum_exp(dx, x, m, n);
        for (int64_t j = 0; j < n; j++) dx[j] *= scale;
        int32_t t = label[r];
        if (t >= 0 && t < n) dx[t] -= dl[r];
    }
}

/* ---- kernels ---------------------------------------------------------------- */

typedef struct loss_job {
    const sy_kargs *k;
    int64_t outer, n, inner; /* the tensor as (outer, n, inner) around the axis */
    int64_t chunks;          /* column chunks per slab when inner > 1 */
    int64_t units, parts;    /* rows (or slab chunks), in `parts` runs */
} loss_job;

static void axis_split(const sy_shape *s, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->dims[i];
    *n = s->rank ? s->dims[axis] : 1;
    for (int i = axis + 1; i < s->rank; i++) *inner *= s->dims[i];
}

static void plan_parts(loss_job *j, int64_t units, int64_t unit_elems) {
    j->units = units;
    j->parts = sy_max64(1, sy_min64(units, units * unit_elems / GRAIN));
}

static void softmax_part(void *ctx, int64_t part) {
    const loss_job *j = ctx;
    const sy_kargs *k = j->k;
    bool log_form = k->op == SY_OP_LOG_SOFTMAX;
    const float *x = k->in[0];
    float *y = k->out;
    int64_t u0, u1;
    sy_split_range(j->units, (int)part, (int)j->parts, &u0, &u1);
    if (j->inner == 1) {
        if (log_form)
            log_softmax_fwd_f32_fast(y + u0 * j->n, x + u0 * j->n, u1 - u0, j->n);
        else
            softmax_fwd_f32_fast(y + u0 * j->n, x + u0 * j->n, u1 - u0, j->n);
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / j->chunks, i0 = u % j->chunks * CHUNK, off = o * j->n * j->inner;
        softmax_cols_fwd_f32_fast(y + off, x + off, log_form, j->n, j->inner, i0, sy_min64(CHUNK, j->inner - i0));
    }
}

/* softmax and log_softmax along attr.axis */
static void softmax_run(const sy_kargs *k) {
    loss_job j = {.k = k};
    int axis = k->attr->axis.axis < 0 ? k->attr->axis.axis + k->out_shape->rank : k->attr->axis.axis;
    axis_split(k->out_shape, axis, &j.outer, &j.n, &j.inner);
    if (j.outer * j.n * j.inner == 0) return;
    if (j.inner == 1) {
        plan_parts(&j, j.outer, j.n);
    } else {
        j.chunks = (j.inner + CHUNK - 1) / CHUNK;
        plan_parts(&j, j.outer * j.chunks, j.n * sy_min64(CHUNK, j.inner));
    }
    sy_parallel_parts(k->ex, j.parts, softmax_part, &j);
}

static void last_axis(const sy_shape *s, int64_t *rows, int64_t *c) {
    *c = s->rank ? s->dims[s->rank - 1] : 1;
    *rows = sy_shape_count(s) / (*c ? *c : 1);
}

static void ce_fwd_part(void *ctx, int64_t part) {
    const loss_job *j = ctx;
    int64_t r0, r1;
    sy_split_range(j->units, (int)part, (int)j->parts, &r0, &r1);
    sparse_softmax_ce_fwd_f32_fast((float *)j->k->out + r0, (const float *)j->k->in[0] + r0 * j->n,
                                   (const int32_t *)j->k->in[1] + r0, r1 - r0, j->n);
}

/* (logits (..., C), labels (...) int32) -> loss (...) */
static void sparse_softmax_ce_run(const sy_kargs *k) {
    loss_job j = {.k = k};
    last_axis(&k->in_shape[0], &j.units, &j.n);
    const int32_t *label = k->in[1];
    for (int64_t r = 0; r < j.units; r++)
        if (label[r] < 0 || label[r] >= j.n) {
            sy_exec_fail(k->ex,
                         "received a label value of %d at position %lld, which is outside the valid range of [0, %lld)",
                         label[r], (long long)r, (long long)j.n);
            break;
        }
    if (j.n == 0) {
        memset(k->out, 0, (size_t)j.units * sizeof(float));
        return;
    }
    plan_parts(&j, j.units, j.n);
    sy_parallel_parts(k->ex, j.parts, ce_fwd_part, &j);
}

static void ce_bwd_part(void *ctx, int64_t part) {
    const loss_job *j = ctx;
    int64_t r0, r1;
    sy_split_range(j->units, (int)part, (int)j->parts, &r0, &r1);
    sparse_softmax_ce_bwd_f32_fast((float *)j->k->out + r0 * j->n, (const float *)j->k->in[0] + r0,
                                   (const float *)j->k->in[1] + r0 * j->n, (const int32_t *)j->k->in[2] + r0, r1 - r0,
                                   j->n);
}

/* (dl (...), logits (..., C), labels (...)) -> d logits (..., C) */
static void sparse_softmax_ce_grad_run(const sy_kargs *k) {
    loss_job j = {.k = k};
    last_axis(&k->in_shape[1], &j.units, &j.n);
    if (j.n == 0) return;
    plan_parts(&j, j.units, j.n);
    sy_parallel_parts(k->ex, j.parts, ce_bwd_part, &j);
}

const sy_kernel sy_cpu_softmax = {softmax_run, NULL, NULL};
const sy_kernel sy_cpu_log_softmax = {softmax_run, NULL, NULL};
const sy_kernel sy_cpu_sparse_softmax_ce = {sparse_softmax_ce_run, NULL, NULL};
const sy_kernel sy_cpu_sparse_softmax_ce_grad = {sparse_softmax_ce_grad_run, NULL, NULL};
