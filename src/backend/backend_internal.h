/*
 * backend_internal.h - the contract between the compiler and the kernels.
 *
 * An op (ops.def) is executed by a kernel: a function that receives one
 * sy_kargs with its output buffer, its input buffers, their shapes, the op's
 * attributes, a workspace carved out of the plan's arena, and the runtime
 * context (thread pool, step counter, learning rate). A kernel never
 * allocates: whatever scratch it needs it declares up front through its
 * `workspace` function, and the compiler plans it.
 *
 * A backend is a table of kernels: `ref` has a plain scalar kernel for every
 * op in float32 and float64 (the oracle the op harness checks everything
 * against); `cpu` has fast float32 kernels for the hot ops and falls back to
 * `ref` for the rest. Raw kernels follow <op>_<fwd|bwd>_<dtype>_<impl>
 * naming with outputs first, then inputs, then sizes.
 */
#ifndef SY_BACKEND_INTERNAL_H
#define SY_BACKEND_INTERNAL_H

#include "../core/core_internal.h"
#include "systolic/backend.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef enum sy_op {
#define SY_OP(id, name, arity) SY_OP_##id,
#include "ops.def"
#undef SY_OP
    SY_OP_COUNT
} sy_op;

const char *sy_op_name(sy_op op);
int sy_op_arity(sy_op op); /* -1: variadic */

typedef enum sy_act { SY_ACT_NONE = 0, SY_ACT_RELU, SY_ACT_SIGMOID, SY_ACT_TANH } sy_act;
typedef enum sy_pad { SY_PAD_VALID = 0, SY_PAD_SAME } sy_pad;

/* The activation op's functions (attr.act.fn), each as Keras 2.15 computes
 * it through TensorFlow (ref_kernels.c has the formulas):
 *   RELU          backend.relu(x, alpha=a, max_value=b (INFINITY: None), threshold=c):
 *                 ReLU, LeakyReLU (tf.nn.leaky_relu when b is inf and c 0), relu6
 *   ELU           x > 0 ? x : a (e^x - 1)
 *   SELU          tf.nn.selu
 *   GELU          0.5 x (1 + erf(x / sqrt 2)) (approximate=False)
 *   SWISH         x sigmoid(x) (tf.nn.silu)
 *   SOFTPLUS      log(e^x + 1), TensorFlow's cut-offs at |x| > 13.94
 *   SOFTSIGN      x / (1 + |x|)
 *   HARD_SIGMOID  clip(0.2 x + 0.5, 0, 1)
 *   ABS           |x| (L1 penalties; its gradient is sign(x)) */
typedef enum sy_act_fn {
    SY_AF_RELU = 0, SY_AF_ELU, SY_AF_SELU, SY_AF_GELU, SY_AF_SWISH, SY_AF_SOFTPLUS, SY_AF_SOFTSIGN,
    SY_AF_HARD_SIGMOID, SY_AF_ABS, SY_AF_COUNT,
    /* issue 15, recurrent activations: the scans' general cell (graph/ops_rnn.c) also takes the functions the
     * graph has ops of its own for, which the activation op does not (it refuses fn >= SY_AF_COUNT) */
    SY_AF_LINEAR = SY_AF_COUNT, SY_AF_TANH, SY_AF_SIGMOID, SY_AF_EXP, SY_AF_SCAN_COUNT
} sy_act_fn;

typedef struct sy_act_params {
    int32_t fn; /* sy_act_fn */
    float a, b, c;
} sy_act_params;

/* The fused elementwise program: a straight line of instructions over
 * registers holding one tile of the output each. LD_* load input `a`
 * (full-size, a row vector broadcast along the last axis, or a scalar). */
typedef enum sy_eop {
    SY_E_LD_FULL, SY_E_LD_ROW, SY_E_LD_SCALAR,
    SY_E_ADD, SY_E_SUB, SY_E_MUL, SY_E_DIV,
    SY_E_NEG, SY_E_RELU, SY_E_SIGMOID, SY_E_TANH, SY_E_EXP, SY_E_LOG,
    SY_E_RELU_GRAD, SY_E_SIGMOID_GRAD, SY_E_TANH_GRAD,
    SY_E_ACT, SY_E_ACT_GRAD /* the activation op (act[] of the instruction) and its gradient (dy, x) */
} sy_eop;

#define SY_FUSED_MAX_INSNS 32
#define SY_FUSED_MAX_REGS 8
typedef struct sy_einsn {
    uint8_t op;  /* sy_eop */
    uint8_t dst; /* register */
    uint8_t a;   /* register, or input index for loads */
    uint8_t b;   /* register */
} sy_einsn;

typedef struct sy_eprog {
    int32_t n;      /* instructions; the result is in register `out` */
    int32_t out;
    sy_einsn insn[SY_FUSED_MAX_INSNS];
    sy_act_params act[SY_FUSED_MAX_INSNS]; /* SY_E_ACT, SY_E_ACT_GRAD: the function of instruction i */
} sy_eprog;

/* Attributes, per op. Zero-initialised; only the member of the node's op is
 * meaningful. Output shapes are not attributes: a kernel reads them from
 * its arguments (reshape, slice sizes, broadcast_to, backprop shapes). */
typedef union sy_attrs {
    struct { uint8_t ta, tb, act; } matmul;                        /* MATMUL */
    /* CONV2D and backprops: dilation 0 means 1, groups 0 means 1 (zeroed attrs are a plain conv); the
     * kernel is (KH, KW, C / groups, O) and group g maps input channels [g C/groups, (g+1) C/groups) to
     * output channels [g O/groups, (g+1) O/groups), as TensorFlow's grouped and depthwise convs */
    /* CONV2D_POOL and its gradient ops (issue 21, made by fusion): the pool over the conv's output
     * (window pool_ksize, never overlapping), average when pool_avg, else max; post_act (a sy_act,
     * none or relu) after it; round_bf16: the folded ops were bf16 ops (mixed_bfloat16), so the
     * kernel rounds where they would (docs/design/fusion.md); dense_dy (the filter gradient): the
     * pooled gradient is a Dense layer's input gradient, dz w^T (a flattened pool feeding the Dense
     * layer), which the kernel computes as it expands it -- its inputs (x, dz, w [, y] [, argmax]) */
    struct {
        int32_t stride[2];
        int32_t padding;
        uint8_t act;
        int32_t dilation[2];
        int32_t groups;
        int32_t pool_ksize[2], pool_stride[2], pool_padding;
        uint8_t pool_avg, post_act, round_bf16, dense_dy;
    } conv;
    struct { int32_t ksize[2], stride[2]; int32_t padding; } pool; /* pools and their grads */
    struct { int32_t axis; } axis;                                 /* softmaxes, concat, gather */
    struct { int32_t perm[SY_MAX_RANK]; } transpose;
    struct { int64_t begin[SY_MAX_RANK]; } slice;                  /* SLICE, SLICE_GRAD */
    struct { float rate; uint64_t seed; } dropout;
    /* LSTM_SCAN, GRU_SCAN, grads. act, rec_act: sy_act codes (the fast cells); with `general` they are
     * SY_ACT_NONE and fn[0] (activation), fn[1] (recurrent_activation) give any Keras activation, and the
     * scans keep the gates' pre-activations in their rows (sy_lstm_layout). has_steps (issue 17, masking): a
     * last input, the Keras mask (B, T) of 0/1, where a 0 step keeps the previous state (graph/ops_rnn.c) */
    struct { uint8_t act, rec_act, has_bias, has_mask, need_dx, inference, general, has_steps; sy_act_params fn[2]; } rnn;
    struct {
        uint32_t axes; /* bit i: reduce axis i */
        uint8_t keepdims;
        /* issue 16, mixed_bfloat16: a mean with TensorFlow's bfloat16 arithmetic (reduce() says when):
         * the values added one after the other, each sum rounded to bfloat16, divided by the count
         * rounded to bfloat16 */
        uint8_t bf16_seq;
    } reduce;
    struct { double value; } fill;
    struct { int32_t size[2]; uint8_t bilinear; } upsample;      /* UPSAMPLE2D and its grad */
    sy_act_params act;                                             /* ACT, ACT_GRAD */
    struct {
        float momentum, beta_1, beta_2, epsilon, rho;
        float one_minus_beta_1, one_minus_beta_2, one_minus_rho; /* from the doubles, as Keras rounds them */
        uint8_t nesterov, centered, amsgrad;
        /* issue 17, optimizers: the other rules' float32 constants, each rounded where Keras rounds it */
        float beta_2_decay, epsilon_1, epsilon_2, clip_threshold; /* Adafactor */
        uint8_t relative_step;                                    /* Adafactor */
        float lr_power, l1, l2, two_l2_shrinkage, ftrl_beta;      /* Ftrl */
    } opt;
    sy_eprog *fused;                                               /* FUSED_ELTWISE (owned by the graph) */
    struct { float decay; } moving;                                /* MOVING_AVERAGE: 1 - momentum, rounded as Keras does */
    /* issue 17, losses and metrics: KERAS_LOSS and its grad; a: Huber's delta or focal alpha, b: focal gamma */
    struct { uint8_t fn, from_logits, balance; float a, b; } loss;
    /* issue 18, CONSTANT: its bytes (the node's shape and dtype), owned by the graph */
    struct { void *data; } constant;
    /* issue 18, the int8 ops (graph/ops_quant.c says which fields each reads): TFLite's integer parameters,
     * computed from the file's float scales as TFLite's Prepare functions compute them (lite/lite_model.c) */
    struct {
        int32_t stride[2], dilation[2], padding, groups; /* QCONV2D; the pools take stride and padding */
        int32_t ksize[2];                                /* pools */
        int32_t x_zp, x2_zp, y_zp;                       /* zero points: input (QADD: inputs 1 and 2), output */
        int32_t act_min, act_max;                        /* the fused activation (or int8's range) as a clamp */
        int32_t mult[3], shift[3];                       /* Q31 multipliers (QUANTIZE int8 -> int8, QMEAN: [0];
                                                            QADD: input 1, input 2, output) */
        int32_t left_shift;                              /* QADD: 20 */
        float x_scale, y_scale, beta;                    /* QUANTIZE from float32: y_scale; DEQUANTIZE: x_scale;
                                                            QSOFTMAX: x_scale, y_scale, beta; QMEAN: both */
        uint32_t axes;                                   /* QMEAN: bit i reduces axis i */
        int64_t pad_before[SY_MAX_RANK];                 /* QPAD */
        /* QCONV2D_POOL (fusion.c): the max pool after the conv -- its window, strides, padding and clamp
         * (the pool's act_min, act_max); the conv's own fields as QCONV2D's */
        struct { int32_t ksize[2], stride[2], padding, act_min, act_max; } pool;
    } q;
    /* issue 18, dynamic-range quantization (HFULLY_CONNECTED, HLSTM; cpu/qhybrid.c): asymmetric: each float
     * row quantized with a zero point (TFLite's asymmetric_quantize_inputs), else symmetric; act:
     * HFULLY_CONNECTED's fused activation in TFLite's codes (0 none, 1 relu, 2 relu_n1_to_1, 3 relu6, 4 tanh,
     * 6 sigmoid); cell_clip: HLSTM's, 0 for none */
    struct { uint8_t asymmetric, act; float cell_clip; } hy;
} sy_attrs;

/* Runtime context of one plan instance (one replica). */
typedef struct sy_exec {
    sy_pool *pool;      /* for intra-op parallelism; may be NULL */
    int threads;        /* threads a kernel may use, <= sy_pool_size(pool) */
    int64_t iterations; /* optimizer steps applied before this one */
    uint64_t rng_key;   /* this replica's stream (dropout masks) */
    float learning_rate;
    /* A plan with no backward pass (predict, evaluate): kernels take their most accurate algorithm, the direct
     * convolution rather than Winograd, so that predictions agree with Keras's as closely as float32 allows
     * (docs/design/winograd.md); training takes the fast one. */
    bool inference;
    /* A kernel that meets bad data (an index out of range) records it here;
     * the first report wins and the plan's run returns it. */
    atomic_int failed;
    char error[512];
} sy_exec;

void sy_exec_fail(sy_exec *ex, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define SY_KMAX_IN 8 /* kernels with more inputs (concat) read in/in_shape arrays, which can be longer */

typedef struct sy_kargs {
    sy_op op;             /* kernels shared by several ops dispatch on it */
    const sy_attrs *attr;
    sy_dtype dtype;       /* of the output, or of the float operands for updates */
    const sy_shape *out_shape;
    void *out;
    int n_in;
    void *const *in;      /* input buffers */
    const sy_shape *in_shape;
    const sy_dtype *in_dtype;
    void *ws;             /* workspace of the size `workspace` asked for */
    void *aux;            /* issue 21: a second output, a side node's buffer (pool_argmax,
                             conv2d_pool_bias_grad); NULL: none */
    sy_exec *ex;
} sy_kargs;

typedef void (*sy_kernel_fn)(const sy_kargs *k);
typedef size_t (*sy_ws_fn)(const sy_kargs *k, int threads);

/* issue 16, bfloat16 storage (docs/design/mixed-precision.md): which operands a kernel of a
 * backend's SY_BF16 table reads or writes as 2-byte bfloat16 buffers, for the shapes and attributes
 * of k: input j if bit SY_BF16_IN(j), the output if SY_BF16_OUT; k->in_dtype[j] and k->dtype then
 * say which each one is, and every other float operand is float32. SY_BF16_UNIFORM (the layout
 * kernels, which move elements of one size): every float input and the output must be bfloat16
 * together. A kernel writing bfloat16 rounds each result to nearest even as it stores it, and a
 * product (matmul, conv2d) applies TensorFlow's bfloat16 epilogue (sy_bf16_epilogue), so the stored
 * numbers are the ones float32 storage holds after the plan's rounding. */
#define SY_BF16_IN(j)   (1u << (j))
#define SY_BF16_OUT     (1u << 30)
#define SY_BF16_UNIFORM (1u << 31)
typedef uint32_t (*sy_bf16_io_fn)(const sy_kargs *k);

typedef struct sy_kernel {
    sy_kernel_fn run;
    sy_ws_fn workspace;    /* NULL: needs none */
    sy_bf16_io_fn bf16_io; /* issue 16: what it takes as bfloat16 (above); NULL: float32 only */
} sy_kernel;
/* The bf16_io of the layout kernels: SY_BF16_UNIFORM. */
uint32_t sy_bf16_uniform(const sy_kargs *k);

typedef struct sy_backend {
    const char *name;
    const char *description;
    /* The kernel for (op, dtype), or NULL if this backend cannot run it. */
    const sy_kernel *(*kernel)(sy_op op, sy_dtype dtype);
    /* issue 21: whether the fusion pass may make the fused op `op` (conv2d_pool and its gradient;
     * matmul_bias_grad, k's attr and shapes the matmul's, whose kernel then writes it) for k's shapes, attributes and dtype (k->ex->inference set): the backend's kernels for it
     * compute what the ops they replace would, with this backend's numerics. NULL: it takes none.
     */
    bool (*fuses)(sy_op op, const sy_kargs *k);
} sy_backend;

extern const sy_backend sy_backend_ref;
extern const sy_backend sy_backend_cpu;
extern const sy_backend sy_backend_sim; /* issue 16: the emulated TPU (src/backend/sim/) */

/* Look a backend up by name ("ref", "cpu"). NULL with an error if unknown. */
const sy_backend *sy_backend_find(const char *name);
int sy_backend_count(void);
const sy_backend *sy_backend_at(int index);

/* Reference kernel lookups (ref_kernels.c). */
const sy_kernel *sy_ref_kernel(sy_op op, sy_dtype dtype);
/* issue 18: the int8 ops' kernels (cpu/qref.c), whatever the dtype asked; NULL for other ops. ref's table
 * includes them, so every backend runs them. */
const sy_kernel *sy_qref_kernel(sy_op op);
/* Fast CPU kernel lookup (cpu_kernels.c); NULL where ref is used. */
const sy_kernel *sy_cpu_kernel(sy_op op, sy_dtype dtype);
/* issue 21: the cpu backend's sy_backend.fuses (conv.c) */
bool sy_cpu_fuses(sy_op op, const sy_kargs *k);
/* issue 16: the sim backend's (sim/mxu.c) */
bool sy_sim_fuses(sy_op op, const sy_kargs *k);
/* The sim backend's own kernels (src/backend/sim/sim_kernels.c): the MXU's
 * ops with its numerics; NULL where the op runs as on the cpu backend. */
const sy_kernel *sy_sim_kernel(sy_op op, sy_dtype dtype);
/* issue 16, MXU numerics: the scalar reference of the sim backend's MXU ops (sim/mxu_ref.c), run by the
 * backend "sim-ref"; NULL for the other ops. */
const sy_kernel *sy_sim_ref_kernel(sy_op op, sy_dtype dtype);
extern const sy_backend sy_backend_sim_ref;

/* ---- helpers shared by kernels ----------------------------------------- */

/* Output size and leading padding of one spatial axis, as TensorFlow pads
 * (SAME: total padding split with the extra one at the end). */
static inline void sy_conv_out(int64_t in, int64_t k, int64_t stride, int padding, int64_t *out,
                               int64_t *pad_before) {
    if (padding == SY_PAD_SAME) {
        *out = (in + stride - 1) / stride;
        int64_t total = (*out - 1) * stride + k - in;
        if (total < 0) total = 0;
        *pad_before = total / 2;
    } else {
        *out = in >= k ? (in - k) / stride + 1 : 0;
        *pad_before = 0;
    }
}

/* issue 21, conv2d_pool (docs/design/fusion.md): whether its filter gradient reads the pooled
 * output y -- for a sigmoid's or tanh's gradient, or a relu's after an average pool. A relu after a
 * max pool (before or after it) needs only y > 0, which the argmax byte says: it is 255 (no place)
 * where y is not positive. */
static inline bool sy_conv_pool_reads_y(const sy_attrs *a) {
    return a->conv.act == SY_ACT_SIGMOID || a->conv.act == SY_ACT_TANH ||
           (a->conv.pool_avg && a->conv.post_act == SY_ACT_RELU);
}
static inline bool sy_conv_pool_relu_mask(const sy_attrs *a) {
    return !a->conv.pool_avg && (a->conv.act == SY_ACT_RELU || a->conv.post_act == SY_ACT_RELU);
}

/* A conv's dilation along axis i and its groups, 0 read as 1. */
static inline int64_t sy_conv_dilation(const sy_attrs *a, int i) {
    return a->conv.dilation[i] > 1 ? a->conv.dilation[i] : 1;
}
static inline int64_t sy_conv_groups(const sy_attrs *a) { return a->conv.groups > 1 ? a->conv.groups : 1; }
/* The extent of a k-tap window dilated by d: (k - 1) d + 1. */
static inline int64_t sy_dilated(int64_t k, int64_t d) { return (k - 1) * d + 1; }

/* The rows of the LSTM scan ops, per (batch, step), in elements:
 *
 *   lstm_scan       i f g o (activated gates; pre-activations with rnn.general) | c | h | x | h(t-1) | 1
 *   lstm_scan_grad  d gates (pre-activation) | dx (only with need_dx)
 *
 * each padded with zeros to a multiple of 16 elements, so that rows start
 * on cache lines (the cpu kernels write them whole with streaming stores).
 * A step's product [x, h(t-1), 1] (D + U + 1) x [kernel; recurrent; bias]
 * reads its operand straight from the row, so the kernels' gradient is one
 * product of those columns of every row with the d gates (lstm_scan_wgrad);
 * backwards, dx and dh(t-1) come from d gates x [kernel; recurrent]^T (dh
 * stays in the kernel). h(t-1) is stored times the recurrent dropout mask,
 * as the step uses it. act(c) is not stored: the backward pass computes it
 * again, which costs less than moving it through memory twice. An
 * lstm_scan for inference (no gradient) returns only h, (B, T, U). */
typedef struct sy_lstm_cols {
    int64_t gates, c, h, x, hp, one, width; /* lstm_scan */
    int64_t dgates, dx, grad_width;          /* lstm_scan_grad */
} sy_lstm_cols;

static inline sy_lstm_cols sy_lstm_layout(int64_t d, int64_t u, bool need_dx) {
    sy_lstm_cols l;
    l.gates = 0;
    l.c = 4 * u;
    l.h = 5 * u;
    l.x = 6 * u;
    l.hp = l.x + d;
    l.one = l.hp + u;
    l.width = (l.one + 1 + 15) / 16 * 16;
    l.dgates = 0;
    l.dx = 4 * u;
    l.grad_width = (l.dx + (need_dx ? d : 0) + 15) / 16 * 16;
    return l;
}

/* Run fn over `threads` parts on the exec context's pool. */
void sy_exec_parallel(const sy_exec *ex, int parts, sy_pool_fn fn, void *ctx);

/* Dropout keep mask for element i of this step: a pure function of (seed,
 * stream, iterations, i), so the backward pass regenerates the forward mask. */
static inline uint32_t sy_dropout_bits(uint64_t key, int64_t iterations, int64_t i) {
    uint32_t out[4];
    sy_philox(key, (uint64_t)iterations, (uint64_t)i >> 2, out);
    return out[i & 3];
}
static inline uint64_t sy_dropout_key(const sy_kargs *k) {
    return sy_mix64(k->attr->dropout.seed ^ k->ex->rng_key);
}

/* Adam's step size at step t (1-based), in float32 as Keras computes it:
 * lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) with float32 powers. */
static inline float sy_adam_alpha(float lr, float beta_1, float beta_2, int64_t t) {
    float b1p = powf(beta_1, (float)t), b2p = powf(beta_2, (float)t);
    return lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
}

/* The activation op's function and derivative at x, in double (the ref
 * kernels; ref_kernels.c). */
double sy_act_fn_ref(const sy_act_params *p, double x);
double sy_act_fn_grad_ref(const sy_act_params *p, double x);

/* issue 16, MXU numerics (docs/design/mxu-numerics.md): x rounded to bfloat16 -- 8 significant bits, round
 * to nearest, ties to even -- and returned as the float32 of the same value. Infinities stay infinite, a
 * NaN stays a NaN (quieted, sign kept), a finite value past bfloat16's largest rounds to infinity, as
 * round-to-nearest does; subnormals round like any other value (bfloat16 has float32's exponent range).
 * Branch-free, so that packing loops vectorise. */
static inline uint16_t sy_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
    uint32_t nan = u | 0x00400000u;
    return (uint16_t)(((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded) >> 16);
}
static inline float sy_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static inline float sy_bf16_round(float x) {
    return sy_bf16_to_f32(sy_bf16_bits(x));
}
/* issue 16, bfloat16 storage: a bfloat16 is the top 16 bits of the float32 of the same value, so
 * storing rounds (sy_bf16_bits above) and loading is exact (sy_bf16_to_f32). sy_ldf and sy_stf read
 * and write element i of a float operand stored either way; with a constant `bf16` they compile to
 * plain loops that vectorise. */
static inline float sy_ldf(const void *p, int64_t i, bool bf16) {
    return bf16 ? sy_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static inline void sy_stf(void *p, int64_t i, float v, bool bf16) {
    if (bf16)
        ((uint16_t *)p)[i] = sy_bf16_bits(v);
    else
        ((float *)p)[i] = v;
}
/* dst (n) = src (n) widened to float32, or narrowed to bfloat16 with rounding. */
void sy_bf16_load_all(float *dst, const uint16_t *src, int64_t n);
void sy_bf16_store_all(uint16_t *dst, const float *src, int64_t n);

/* issue 16, mixed_bfloat16: each of x[0 .. n) rounded to bfloat16 in place (docs/design/mixed-precision.md). */
void sy_bf16_round_all(float *x, int64_t n);
/* issue 16, mixed_bfloat16: a bf16 product's epilogue as tf.keras 2.15 runs it on CPU, where grappler fuses
 * MatMul/Conv2D with its BiasAdd (the bias added in float32, one rounding) and the activation is a bf16 op
 * of its own: y (rows, n) = round(act(round(y + bias))) (relu needs no rounding; sigmoid as
 * sy_bf16_sigmoid). bias (n) or NULL; act a sy_act. */
void sy_bf16_epilogue(float *y, int64_t rows, int64_t n, const float *bias, int act);
/* issue 16, bfloat16 storage: the same from a float32 block y (rows, n; row stride ldy) into
 * bfloat16 dst (row stride ldd) -- a product's kernel writing bfloat16 ends with it. */
void sy_bf16_epilogue_store(uint16_t *dst, int64_t ldd, const float *y, int64_t ldy, int64_t rows,
                            int64_t n, const float *bias, int act);
/* TensorFlow's bfloat16 sigmoid on CPU (Eigen's, in bfloat16 arithmetic): e = round(exp(x)), y =
 * round(e / round(1 + e)); y (n), x (n), may be the same. */
void sy_bf16_sigmoid(float *y, const float *x, int64_t n);
/* The depth of the MXU's systolic array: its products sum in chunks of this many terms. */
#define SY_MXU_DEPTH 128

/* issue 16, MXU numerics: below float32's smallest normal, a zero of x's sign -- the MXU flushes its
 * bfloat16 operands and its sums so (docs/design/mxu-numerics.md) */
static inline float sy_mxu_ftz(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }

/* issue 16, MXU numerics: one MXU sum, term by term, for the scalar reference loops (sim/mxu_ref.c, cpu/rnn.c's
 * reference products). Each term is the product of two operands rounded to bfloat16 (subnormals as zeros).
 * A chunk's terms go in pairs from its start: the odd term, then the even one, each added to the chunk's
 * float32 sum with one rounding (fmaf: the product is exact but for underflow) and the sum flushed
 * (sy_mxu_ftz); an unpaired last term pairs with 0 x 0. Every SY_MXU_DEPTH terms, and where a product's
 * operand changes segment (sy_mxu_flush: the recurrent scans' x then h(t-1)), the chunk ends: the first
 * chunk's sum becomes the accumulator, each later one is added to it in float32 (not flushed). That is
 * mxu_pairs.c's micro-kernel's arithmetic, VDPBF16PS's. */
typedef struct sy_mxu_acc {
    float acc, chunk, even_a, even_b; /* even_*: a pair's even term, waiting for its odd one */
    int64_t n;                        /* terms in the chunk */
    bool started;                     /* a chunk has ended: acc holds the sum */
} sy_mxu_acc;

static inline void sy_mxu_pair(sy_mxu_acc *s, float odd_a, float odd_b) {
    s->chunk = sy_mxu_ftz(fmaf(odd_a, odd_b, s->chunk));
    s->chunk = sy_mxu_ftz(fmaf(s->even_a, s->even_b, s->chunk));
}

static inline void sy_mxu_flush(sy_mxu_acc *s) {
    if (!s->n) return;
    if (s->n & 1) sy_mxu_pair(s, 0.0f, 0.0f);
    s->acc = s->started ? s->acc + s->chunk : s->chunk;
    s->started = true;
    s->chunk = 0;
    s->n = 0;
}

static inline void sy_mxu_term(sy_mxu_acc *s, float a, float b) {
    float ra = sy_mxu_ftz(sy_bf16_round(a)), rb = sy_mxu_ftz(sy_bf16_round(b));
    if (s->n & 1) {
        sy_mxu_pair(s, ra, rb);
    } else {
        s->even_a = ra;
        s->even_b = rb;
    }
    if (++s->n == SY_MXU_DEPTH) sy_mxu_flush(s);
}

static inline float sy_mxu_total(const sy_mxu_acc *s) {
    sy_mxu_acc t = *s;
    sy_mxu_flush(&t);
    return t.started ? t.acc : 0.0f;
}

/* ---- issue 18: TensorFlow Lite's integer arithmetic (qmath.c) ------------ */

/* A real multiplier as TFLite's QuantizeMultiplier holds it: real =
 * multiplier 2^(shift - 31), multiplier in [2^30, 2^31) (0 and shift 0 for
 * 0, for a non-finite value and below 2^-32). */
void sy_q_multiplier(double real, int32_t *multiplier, int *shift);
/* round(x multiplier 2^(shift - 31)) as tflite::MultiplyByQuantizedMultiplier
 * rounds it: sy_q_high_mul, then sy_q_rounding_shift by -shift. */
int32_t sy_q_requantize(int32_t x, int32_t multiplier, int shift);
/* gemmlowp's SaturatingRoundingDoublingHighMul: round(a b / 2^31), halves
 * toward +infinity (0.5 -> 1, -0.5 -> 0, -1.5 -> -1); INT32_MAX for
 * INT32_MIN squared. */
int32_t sy_q_high_mul(int32_t a, int32_t b);
/* gemmlowp's RoundingDivideByPOT: round(x / 2^exponent), halves away from
 * zero; exponent in [0, 31]. */
int32_t sy_q_rounding_shift(int32_t x, int exponent);

/* Keras's fuzz factor: probabilities are clipped to [eps, 1 - eps]. */
#define SY_KERAS_EPSILON 1e-7

#endif
