/*
 * systolic/graph.h - building computation graphs with static shapes.
 *
 * A graph is a list of nodes, each the single output of one op; a node is
 * named by its index (sy_node). Builder calls infer the output's shape and
 * type at once, so a mismatch is found while the graph is built, and the
 * message names the op (with the current name scope) and both shapes:
 *
 *   matmul (dense_1/matmul): cannot multiply (128, 10816) by (10815, 10):
 *   inner dimensions 10816 and 10815 differ
 *
 * Errors are sticky: after the first failure every builder call returns
 * SY_NONE and sy_graph_status() reports the first error, so a model can be
 * built with no checks between calls and one check at the end.
 *
 * Layouts follow tf.keras: activations NHWC, Conv2D kernels HWIO
 * (kh, kw, in, out), Dense kernels (in, out). Negative axes count from the
 * end. Losses return one value per example (the last axis reduced); the
 * caller reduces over the batch (Keras's SUM_OVER_BATCH_SIZE is reduce_mean).
 */
#ifndef SYSTOLIC_GRAPH_H
#define SYSTOLIC_GRAPH_H

#include "systolic/backend.h"
#include "systolic/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t sy_node;
#define SY_NONE ((sy_node)-1)

typedef struct sy_graph sy_graph;

sy_status sy_graph_new(sy_graph **out);
void sy_graph_free(sy_graph *g);

/* SY_OK, or the first error met while building; its message is in
 * sy_graph_error() (and in sy_last_error() right after the failing call). */
sy_status sy_graph_status(const sy_graph *g);
const char *sy_graph_error(const sy_graph *g);

/* Name scopes prefix the names of the nodes built inside them, and so the
 * messages about them ("dense_1/matmul"). They nest. */
void sy_graph_push_scope(sy_graph *g, const char *name);
void sy_graph_pop_scope(sy_graph *g);

int32_t sy_graph_node_count(const sy_graph *g);
sy_shape sy_graph_shape(const sy_graph *g, sy_node node);
sy_dtype sy_graph_dtype(const sy_graph *g, sy_node node);
const char *sy_graph_name(const sy_graph *g, sy_node node);
const char *sy_graph_op_name(const sy_graph *g, sy_node node); /* "matmul" */

/* issue 16, mixed_bfloat16 (docs/design/mixed-precision.md). While on, every
 * node added computes in bfloat16 as TensorFlow's bfloat16 ops do: its
 * float32 result is rounded to bfloat16 (to nearest, ties to even) before
 * anything reads it; the values stay float32 in memory. Gradients follow
 * their forward op. Returns the previous setting. */
bool sy_graph_set_bf16(sy_graph *g, bool on);
/* Whether node's output is rounded to bfloat16. */
bool sy_graph_is_bf16(const sy_graph *g, sy_node node);
/* tf.cast(x, bfloat16): x (any shape, float32) rounded to bfloat16; its
 * gradient passes through (the cast back to float32 is exact). */
sy_node sy_graph_cast_bf16(sy_graph *g, sy_node x);

/* ---- leaves ------------------------------------------------------------ */

/* How a parameter's first value is drawn (tf.keras initializers). fan_in and
 * fan_out follow Keras: a (in, out) kernel has fan_in = in; a conv kernel
 * (kh, kw, in, out) has fan_in = kh * kw * in, fan_out = kh * kw * out. */
typedef enum sy_init_kind {
    SY_INIT_ZEROS,
    SY_INIT_ONES,
    SY_INIT_CONSTANT,         /* a */
    SY_INIT_UNIFORM,          /* [a, b) */
    SY_INIT_NORMAL,           /* mean a, stddev b */
    SY_INIT_TRUNCATED_NORMAL, /* mean a, stddev b, redrawn beyond 2 stddev */
    SY_INIT_GLOROT_UNIFORM,
    SY_INIT_GLOROT_NORMAL,
    SY_INIT_HE_UNIFORM,
    SY_INIT_HE_NORMAL,
    SY_INIT_LECUN_UNIFORM,
    SY_INIT_LECUN_NORMAL,
    SY_INIT_ORTHOGONAL,       /* gain a: Keras's Orthogonal (orthonormal rows or columns) */
    SY_INIT_UNIT_FORGET_BIAS, /* zeros, but ones in the second quarter (an LSTM's forget gate) */
    /* issue 15, keras.applications: VarianceScaling(scale a, mode, distribution) that is none of the
     * named ones above (EfficientNet's scale 2 with fan_out): b = mode + 3 * distribution, mode 0
     * fan_in, 1 fan_out, 2 fan_avg; distribution 0 truncated_normal, 1 untruncated_normal, 2 uniform */
    SY_INIT_VARIANCE_SCALING
} sy_init_kind;

typedef struct sy_init {
    sy_init_kind kind;
    double a, b;
    uint64_t seed;
} sy_init;

sy_init sy_init_zeros(void);
sy_init sy_init_constant(double value);
sy_init sy_init_uniform(double lo, double hi, uint64_t seed);
sy_init sy_init_normal(double mean, double stddev, uint64_t seed);
sy_init sy_init_glorot_uniform(uint64_t seed);
sy_init sy_init_orthogonal(double gain, uint64_t seed);

/* Fill `data` (count = product of shape) as `init` says, in double. */
sy_status sy_init_fill(const sy_init *init, const sy_shape *shape, double *data);

/* A value fed before each run (features, labels). */
sy_node sy_graph_input(sy_graph *g, const char *name, sy_dtype dtype, sy_shape shape);
/* A variable: a trainable weight unless marked otherwise. Its name is its
 * identity: plans that share a variable store share parameters by name. */
sy_node sy_graph_param(sy_graph *g, const char *name, sy_dtype dtype, sy_shape shape, sy_init init);
void sy_graph_set_trainable(sy_graph *g, sy_node param, bool trainable);
/* A constant tensor with every element `value`. */
sy_node sy_graph_fill(sy_graph *g, sy_dtype dtype, sy_shape shape, double value);

/* ---- ops --------------------------------------------------------------- */

/* a (M, K) x b (K, N) -> (M, N); transpose_a reads a as (K, M), transpose_b
 * reads b as (N, K). */
sy_node sy_graph_matmul(sy_graph *g, sy_node a, sy_node b, bool transpose_a, bool transpose_b);
/* x (..., C) + bias (C) */
sy_node sy_graph_bias_add(sy_graph *g, sy_node x, sy_node bias);

/* Elementwise with numpy broadcasting. */
sy_node sy_graph_add(sy_graph *g, sy_node a, sy_node b);
sy_node sy_graph_sub(sy_graph *g, sy_node a, sy_node b);
sy_node sy_graph_mul(sy_graph *g, sy_node a, sy_node b);
sy_node sy_graph_div(sy_graph *g, sy_node a, sy_node b);

sy_node sy_graph_neg(sy_graph *g, sy_node x);
sy_node sy_graph_relu(sy_graph *g, sy_node x);
sy_node sy_graph_sigmoid(sy_graph *g, sy_node x);
sy_node sy_graph_tanh(sy_graph *g, sy_node x);
sy_node sy_graph_exp(sy_graph *g, sy_node x);
sy_node sy_graph_log(sy_graph *g, sy_node x);
sy_node sy_graph_softmax(sy_graph *g, sy_node x, int axis);
sy_node sy_graph_log_softmax(sy_graph *g, sy_node x, int axis);

/* Same element count, new shape (no copy). */
sy_node sy_graph_reshape(sy_graph *g, sy_node x, sy_shape shape);
/* Output axis i is input axis perm[i]; perm has rank entries. */
sy_node sy_graph_transpose(sy_graph *g, sy_node x, const int32_t *perm);
sy_node sy_graph_concat(sy_graph *g, const sy_node *xs, int n, int axis);
/* The box of extent size[] at begin[] (both of x's rank). */
sy_node sy_graph_slice(sy_graph *g, sy_node x, const int64_t *begin, const int64_t *size);
sy_node sy_graph_broadcast_to(sy_graph *g, sy_node x, sy_shape shape);
/* x with the order of its elements along `axis` reversed. */
sy_node sy_graph_reverse(sy_graph *g, sy_node x, int axis);

typedef enum sy_padding { SY_PADDING_VALID = 0, SY_PADDING_SAME = 1 } sy_padding;

/* x (N, H, W, C) conv w (KH, KW, C, O) -> (N, OH, OW, O). SAME pads as
 * TensorFlow does (the odd pixel at the bottom/right). */
sy_node sy_graph_conv2d(sy_graph *g, sy_node x, sy_node w, int stride_h, int stride_w, sy_padding padding);
/* x (N, H, W, C) -> (N, OH, OW, C). Padded positions never win a max and do
 * not count in an average. */
sy_node sy_graph_max_pool2d(sy_graph *g, sy_node x, int pool_h, int pool_w, int stride_h, int stride_w,
                            sy_padding padding);
sy_node sy_graph_avg_pool2d(sy_graph *g, sy_node x, int pool_h, int pool_w, int stride_h, int stride_w,
                            sy_padding padding);

/* ---- the convolution family (issue 15: Conv2D's dilation and groups,
 * DepthwiseConv2D, SeparableConv2D, Conv2DTranspose, padding, cropping,
 * upsampling, global pooling) ---- */

/* conv2d's arguments beyond sy_graph_conv2d's, as tf.nn.convolution takes
 * them: dilation (0 or 1: none) spreads the kernel's taps dilation pixels
 * apart; groups (0 or 1: one) splits the C input channels and the O
 * filters into groups convolved separately, so w is (KH, KW, C / groups,
 * O). A depthwise conv is groups = C with its (KH, KW, C, M) kernel read
 * as (KH, KW, 1, C * M): output channel c M + m, as TensorFlow orders it. */
typedef struct sy_conv2d_options {
    int stride[2];
    sy_padding padding;
    int dilation[2];
    int groups;
} sy_conv2d_options;

sy_node sy_graph_conv2d_ex(sy_graph *g, sy_node x, sy_node w, const sy_conv2d_options *o);
/* The transpose of that conv (tf.nn.conv2d_transpose): x (N, H, W, O) and
 * w (KH, KW, C, O) -> (N, out_h, out_w, C), where a conv with options o of
 * an (out_h, out_w) input gives H x W. Differentiable in x and w. */
sy_node sy_graph_conv2d_transpose(sy_graph *g, sy_node x, sy_node w, int64_t out_h, int64_t out_w,
                                  const sy_conv2d_options *o);
/* x with before[i] zeros ahead of it and after[i] behind it along each
 * axis i (all >= 0; tf.pad with zeros). Cropping is sy_graph_slice. */
sy_node sy_graph_pad(sy_graph *g, sy_node x, const int64_t *before, const int64_t *after);
/* x (N, H, W, C) -> (N, H size_h, W size_w, C): each pixel repeated
 * (nearest), or interpolated as tf.image.resize's bilinear with half-pixel
 * centers (Keras 2.15's UpSampling2D). */
sy_node sy_graph_upsample2d(sy_graph *g, sy_node x, int size_h, int size_w, bool bilinear);
/* The largest element over the listed axes (n_axes 0: all); its gradient
 * is shared equally by tied maxima, as tf.reduce_max's. */
sy_node sy_graph_reduce_max(sy_graph *g, sy_node x, const int32_t *axes, int n_axes, bool keepdims);

/* Zeroes each element with probability rate and scales the rest by
 * 1 / (1 - rate). The mask is a function of (seed, the plan's replica
 * stream, the step, the element index): new every step, reproducible. */
sy_node sy_graph_dropout(sy_graph *g, sy_node x, float rate, uint64_t seed);

/* Reduce over the listed axes (n_axes 0: all of them). */
sy_node sy_graph_reduce_sum(sy_graph *g, sy_node x, const int32_t *axes, int n_axes, bool keepdims);
sy_node sy_graph_reduce_mean(sy_graph *g, sy_node x, const int32_t *axes, int n_axes, bool keepdims);

/* Rows of params (V, D...) at int32 indices (any shape) -> indices.shape + (D...).
 * An index outside [0, V) fails the run with its position. */
sy_node sy_graph_gather(sy_graph *g, sy_node params, sy_node indices);

/* ---- normalization layers (ops_norm.c) ---------------------------------- */

/* 1 / sqrt(x), elementwise (tf.math.rsqrt). */
sy_node sy_graph_rsqrt(sy_graph *g, sy_node x);
/* A state update: after a training step the non-trainable parameter
 * `param` becomes param - (param - value) * (1 - momentum), Keras's
 * moving average (BatchNormalization's moving_mean and moving_variance).
 * value has param's shape. The compiler plans it like a gradient: value is
 * written to the plan's gradient block, averaged over replicas with the
 * gradients, and applied in the update phase (docs/design/state-updates.md).
 * Returns the update node (no value). */
sy_node sy_graph_moving_average(sy_graph *g, sy_node param, sy_node value, double momentum);

/* ---- losses (per example; the last axis is the class axis) -------------- */

/* From logits: labels int32 of shape logits.shape[:-1]. */
sy_node sy_graph_sparse_softmax_cross_entropy(sy_graph *g, sy_node logits, sy_node labels);
sy_node sy_graph_softmax_cross_entropy(sy_graph *g, sy_node logits, sy_node targets);
/* Mean over the last axis of the elementwise sigmoid cross-entropy. */
sy_node sy_graph_sigmoid_cross_entropy(sy_graph *g, sy_node logits, sy_node targets);

/* The Keras losses. With from_logits false, y_pred are probabilities and are
 * clipped to [1e-7, 1 - 1e-7] as Keras clips them -- except, as in tf.keras,
 * when y_pred is the direct output of a softmax (sigmoid for binary): then
 * the loss is computed from that op's logits, so a saturated output still
 * gets a gradient; tf.keras does so with from_logits true as well. */
sy_node sy_graph_sparse_categorical_crossentropy(sy_graph *g, sy_node y_pred, sy_node labels, bool from_logits);
sy_node sy_graph_categorical_crossentropy(sy_graph *g, sy_node y_pred, sy_node targets, bool from_logits);
sy_node sy_graph_binary_crossentropy(sy_graph *g, sy_node y_pred, sy_node targets, bool from_logits);
/* Whether y_pred is the direct output of a softmax over the last axis
 * (sigmoid: of a sigmoid), whose logits the losses above take whatever
 * from_logits says, as tf.keras 2.15 does. They do not warn: a caller that
 * passes from_logits=true for such an output gives Keras's warning (the
 * keras module does, once per compile). */
bool sy_graph_is_activation_output(const sy_graph *g, sy_node y_pred, bool sigmoid);
/* Mean over the last axis of (y_pred - targets)^2. */
sy_node sy_graph_mean_squared_error(sy_graph *g, sy_node y_pred, sy_node targets);

/* issue 17, losses and metrics: tf.keras 2.15's other built-in losses, each
 * per row of the last axis, (..., C) -> (...), as keras.losses' functions
 * (docs/design/losses-metrics.md gives each formula). Targets get no
 * gradient. */
/* sy_loss_fn: include/systolic/backend.h (its kernels dispatch on it). */

typedef struct sy_loss_params {
    double delta;               /* Huber: 1 */
    double alpha, gamma;        /* focal: 0.25, 2 */
    bool apply_class_balancing; /* binary focal */
    bool from_logits;           /* focal: y_pred are logits */
} sy_loss_params;

/* Keras's defaults for every loss. */
sy_loss_params sy_loss_params_default(void);
/* As the crossentropies, a focal loss over the direct output of a sigmoid
 * (softmax for categorical) takes that op's logits. */
sy_node sy_graph_loss(sy_graph *g, sy_loss_fn fn, sy_node y_pred, sy_node targets, const sy_loss_params *p);

#ifdef __cplusplus
}
#endif
#endif
