/*
 * bf16.c - the cpu backend's copy and dropout, for float32 and for bfloat16
 * storage (issue 16, mixed_bfloat16; docs/design/mixed-precision.md), and
 * the conversions of whole runs that the plan and the kernels share.
 *
 * Under mixed_bfloat16 the plan stores the activations that hold bfloat16
 * numbers in 2-byte buffers. A kernel says through its bf16_io function
 * which operands it takes that way (backend_internal.h); it loads them
 * exactly (a bfloat16 is the top half of a float32), computes in float32
 * as the float32 kernel does, and stores by rounding to nearest even -- the
 * rounding the plan applies after a float32 kernel under the policy. So the
 * stored numbers are the float32 path's, bit for bit, in half the bytes.
 *
 * Copy is also the graph's cast: tf.cast(x, bfloat16) of a float32 input or
 * weight (rounds), the cast back to float32 of a float32 layer's input
 * (exact). Dropout computes x * scale where the step's mask keeps x, as
 * the ref kernel does, and rounds as it stores a bfloat16 result.
 *
 * Both are elementwise: parts of PART elements, whatever the thread count.
 */
#include "cpu_internal.h"

#define PART 16384

/* The plan's conversions at the boundary of a kernel that reads float32 only, and the kernels' own
 * packing (here for -O3, which vectorises them). */
void sy_bf16_load_all(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = sy_bf16_to_f32(src[i]);
}
void sy_bf16_store_all(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = sy_bf16_bits(src[i]);
}

typedef struct copy_job {
    const sy_kargs *k;
    int64_t n;
} copy_job;

static void copy_part(void *ctx, int64_t part) {
    const copy_job *j = ctx;
    const sy_kargs *k = j->k;
    int64_t b = part * PART, e = sy_min64(j->n, b + PART);
    bool xb = k->in_dtype[0] == SY_BF16, yb = k->dtype == SY_BF16;
    if (xb == yb) {
        size_t es = sy_dtype_size(k->dtype);
        memcpy((char *)k->out + b * es, (const char *)k->in[0] + b * es, (size_t)(e - b) * es);
    } else if (yb) {
        sy_bf16_store_all((uint16_t *)k->out + b, (const float *)k->in[0] + b, e - b);
    } else {
        sy_bf16_load_all((float *)k->out + b, (const uint16_t *)k->in[0] + b, e - b);
    }
}

static void copy_run(const sy_kargs *k) {
    copy_job j = {k, sy_shape_count(k->out_shape)};
    if (k->out != k->in[0]) sy_parallel_parts(k->ex, (j.n + PART - 1) / PART, copy_part, &j);
}

static uint32_t copy_io(const sy_kargs *k) {
    (void)k;
    return SY_BF16_IN(0) | SY_BF16_OUT;
}

typedef struct dropout_job {
    const sy_kargs *k;
    int64_t n;
    uint64_t key;
    double rate;
    float scale;
} dropout_job;

/* The ref kernel's arithmetic (ref_kernels.inc, dropout_fwd), element by element. */
static inline __attribute__((always_inline)) void dropout_span(const dropout_job *j, int64_t b,
                                                               int64_t e, bool xb, bool yb) {
    const sy_kargs *k = j->k;
    for (int64_t i = b; i < e; i++) {
        double u = sy_dropout_bits(j->key, k->ex->iterations, i) * (1.0 / 4294967296.0);
        sy_stf(k->out, i, u >= j->rate ? sy_ldf(k->in[0], i, xb) * j->scale : 0, yb);
    }
}

static void dropout_part(void *ctx, int64_t part) {
    const dropout_job *j = ctx;
    int64_t b = part * PART, e = sy_min64(j->n, b + PART);
    bool xb = j->k->in_dtype[0] == SY_BF16, yb = j->k->dtype == SY_BF16;
    if (xb && yb)
        dropout_span(j, b, e, true, true);
    else if (xb)
        dropout_span(j, b, e, true, false);
    else if (yb)
        dropout_span(j, b, e, false, true);
    else
        dropout_span(j, b, e, false, false);
}

static void dropout_run(const sy_kargs *k) {
    dropout_job j = {k, sy_shape_count(k->out_shape), sy_dropout_key(k), k->attr->dropout.rate, 0};
    j.scale = (float)(1.0 / (1.0 - j.rate));
    sy_parallel_parts(k->ex, (j.n + PART - 1) / PART, dropout_part, &j);
}

const sy_kernel sy_cpu_copy = {copy_run, NULL, copy_io};
const sy_kernel sy_cpu_dropout = {dropout_run, NULL, copy_io};
