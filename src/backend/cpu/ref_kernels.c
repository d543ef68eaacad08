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
#ifdef __AVX__
#include <immintrin.h>
#endif

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

/* ---- the activation op (issue 15, activations): Keras 2.15's formulas, in
 * double. RELU follows backend.relu(x, alpha=a, max_value=b, threshold=c)
 * op for op: leaky_relu when there is neither a max nor a threshold;
 * otherwise x * (x > c) (or relu(x)), clipped to [0, b] when b is given,
 * minus a * relu(c - x). Derivatives are TensorFlow's at the kinks too:
 * relu's 0 at 0, relu6's 0 at 0 and 6, clip_by_value's pass-through at its
 * bounds. */

#define SELU_SCALE 1.0507009873554804934193349852946
#define SELU_SCALE_ALPHA 1.7580993408473768599402175208123

double sy_act_fn_ref(const sy_act_params *p, double x) {
    double a = p->a, b = p->b, c = p->c, y;
    switch ((sy_act_fn)p->fn) {
    case SY_AF_RELU:
        if (a != 0 && isinf(b) && c == 0) return x > 0 ? x : x * a;
        y = c != 0 ? (x > c ? x : 0) : (x > 0 ? x : 0);
        if (!isinf(b)) y = y < 0 ? 0 : y > b ? b : y;
        return a != 0 ? y - a * (c - x > 0 ? c - x : 0) : y;
    case SY_AF_ELU: return x > 0 ? x : a * (exp(x) - 1);
    case SY_AF_SELU: return x < 0 ? SELU_SCALE_ALPHA * (exp(x) - 1) : SELU_SCALE * x;
    case SY_AF_GELU: return 0.5 * x * (1 + erf(x / 1.4142135623730951));
    case SY_AF_SWISH: return x / (1 + exp(-x));
    case SY_AF_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    case SY_AF_SOFTSIGN: return x / (1 + fabs(x));
    case SY_AF_HARD_SIGMOID: y = x * 0.2 + 0.5; return y < 0 ? 0 : y > 1 ? 1 : y;
    case SY_AF_ABS: return fabs(x);
    case SY_AF_TANH: return tanh(x);
    case SY_AF_SIGMOID: return 1 / (1 + exp(-x));
    case SY_AF_EXP: return exp(x);
    default: return x; /* SY_AF_LINEAR */
    }
}

double sy_act_fn_grad_ref(const sy_act_params *p, double x) {
    double a = p->a, b = p->b, c = p->c, d, s;
    switch ((sy_act_fn)p->fn) {
    case SY_AF_RELU: {
        if (a != 0 && isinf(b) && c == 0) return x > 0 ? 1 : a;
        double pre = c != 0 ? (x > c ? x : 0) : (x > 0 ? x : 0);
        d = c != 0 ? (x > c) : (x > 0);
        if (b == 6 && c == 0) d = x > 0 && x < 6; /* tf.nn.relu6 */
        else if (!isinf(b) && (pre < 0 || pre > b)) d = 0;
        return a != 0 && c - x > 0 ? d + a : d;
    }
    case SY_AF_ELU: return x > 0 ? 1 : a * exp(x);
    case SY_AF_SELU: return x < 0 ? SELU_SCALE_ALPHA * exp(x) : SELU_SCALE;
    case SY_AF_GELU: return 0.5 * (1 + erf(x / 1.4142135623730951)) + x * exp(-0.5 * x * x) * 0.3989422804014327;
    case SY_AF_SWISH: s = 1 / (1 + exp(-x)); return s * (1 + x * (1 - s));
    case SY_AF_SOFTPLUS: return 1 / (1 + exp(-x));
    case SY_AF_SOFTSIGN: d = 1 + fabs(x); return 1 / (d * d);
    case SY_AF_HARD_SIGMOID: s = x * 0.2 + 0.5; return s >= 0 && s <= 1 ? 0.2 : 0;
    case SY_AF_ABS: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case SY_AF_TANH: d = tanh(x); return 1 - d * d;
    case SY_AF_SIGMOID: s = 1 / (1 + exp(-x)); return s * (1 - s);
    case SY_AF_EXP: return exp(x);
    default: return 1; /* SY_AF_LINEAR */
    }
}

/* tf.math.rsqrt in float32 as TensorFlow 2.15's CPU kernel computes it, so
 * that BatchNormalization (y = (x - mean) * rsqrt(var + eps) ...) gives
 * Keras's numbers bit for bit. That kernel is Eigen's scalar_rsqrt_op on an
 * AVX build: whole packets of 8 take rsqrtps's approximation r refined by
 * one Newton step written as
 *     h = (x * r) * r - 1;   y = r + (-0.5 * r) * h
 * with every multiply and add rounded on its own (the wheel is built
 * without FMA), and the n % 8 elements left at the end take 1.0f / sqrtf(x).
 * The result is not correctly rounded: about a quarter of values differ by
 * an ulp from 1 / sqrt, and deep BatchNormalization stacks amplify that
 * (measured in docs/design/keras-applications.md). rsqrtps's table is the
 * CPU's own, as it is for TensorFlow on the same CPU. Measured on this
 * project's machine: identical to tf.math.rsqrt on 4,096 values spanning
 * e^-8..e^4 and on every length 1..80 (tools/golden/check_rsqrt.py). Without
 * AVX, 1.0f / sqrtf everywhere. */
static void rsqrt_tf(const float *x, float *y, int64_t n) {
    int64_t i = 0;
#ifdef __AVX__
    const __m256 minus_half = _mm256_set1_ps(-0.5f), minus_one = _mm256_set1_ps(-1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i), r = _mm256_rsqrt_ps(a);
        __m256 r2 = _mm256_mul_ps(a, r), half_r = _mm256_mul_ps(r, minus_half);
        __m256 t = _mm256_mul_ps(r2, r);
        __asm__("" : "+x"(t)); /* keep the multiply and the add apart: no FMA contraction */
        __m256 h = _mm256_add_ps(t, minus_one), u = _mm256_mul_ps(half_r, h);
        __asm__("" : "+x"(u));
        __m256 out = _mm256_add_ps(u, r);
        /* Eigen returns the approximation itself where it is 0 or infinite */
        __m256 keep = _mm256_or_ps(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_EQ_OQ),
                                   _mm256_cmp_ps(r, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(out, r, keep));
    }
#endif
    for (; i < n; i++) y[i] = 1.0f / sqrtf(x[i]);
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

/* issue 16, bfloat16 storage: elements of one size in, the same out -- bfloat16 ones as well, when
 * every float operand is bfloat16 (sy_bf16_uniform) */
static const sy_kernel layout_kernels[SY_OP_COUNT] = {
    [SY_OP_COPY] = {copy_any, NULL, sy_bf16_uniform},
    [SY_OP_RESHAPE] = {copy_any, NULL, sy_bf16_uniform},
    [SY_OP_TRANSPOSE] = {transpose_any, NULL, sy_bf16_uniform},
    [SY_OP_CONCAT] = {concat_any, NULL, sy_bf16_uniform},
    [SY_OP_SLICE] = {slice_any, NULL, sy_bf16_uniform},
    [SY_OP_SLICE_GRAD] = {slice_grad_any, NULL, sy_bf16_uniform},
    [SY_OP_BROADCAST_TO] = {broadcast_to_any, NULL, sy_bf16_uniform},
    [SY_OP_GATHER] = {gather_any, NULL, sy_bf16_uniform},
    [SY_OP_REVERSE] = {reverse_any, NULL, sy_bf16_uniform},
    [SY_OP_PAD] = {slice_grad_any, NULL,
                   sy_bf16_uniform}, /* zeros around x: slice_grad's placement */
};

const sy_kernel *sy_ref_kernel(sy_op op, sy_dtype dtype) {
    if ((unsigned)op >= SY_OP_COUNT) return NULL;
    if (layout_kernels[op].run) return &layout_kernels[op];
    const sy_kernel *q = sy_qref_kernel(op); /* issue 18: int8 */
    if (q) return q;
    const sy_kernel *table = dtype == SY_F32 ? ref_table_f32 : dtype == SY_F64 ? ref_table_f64 : NULL;
    if (!table || !table[op].run) return NULL;
    return &table[op];
}
