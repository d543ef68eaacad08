/*
 * op_rows.c - the op harness's table: a row (or more) per op of ops.def,
 * each a builder of one op on generated leaves (op_harness.h). The checks
 * that run the table are test_ops.c's and test_ops_bf16.c's.
 */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the leaves (op_harness.c), by their short names */
static sy_node var(ctx *c, sy_shape s, double lo, double hi) {
    return op_var(c, s, lo, hi);
}
static sy_node var_nz(ctx *c, sy_shape s) {
    return op_var_nz(c, s);
}
static sy_node cin(ctx *c, sy_shape s, double lo, double hi) {
    return op_cin(c, s, lo, hi);
}
static sy_node iin(ctx *c, sy_shape s, int lo, int hi) {
    return op_iin(c, s, lo, hi);
}

/* ---- builders ---------------------------------------------------------------- */

static sy_node add_op(ctx *c, sy_op op, const sy_node *in, int n, const sy_attrs *at,
                      const sy_shape *shape) {
    return graph_add(c->g, op, in, n, at, shape);
}

static sy_node b_input(ctx *c) {
    return sy_graph_mul(c->g, var(c, R(2, 3L, 4L), -1, 1), cin(c, R(2, 3L, 4L), -1, 1));
}
static sy_node b_param(ctx *c) {
    return sy_graph_reshape(c->g, var(c, R(2, 3L, 4L), -1, 1), R(1, 12L));
}
static sy_node b_fill(ctx *c) {
    return sy_graph_mul(c->g, var(c, R(2, 3L, 4L), -1, 1),
                        sy_graph_fill(c->g, c->dt, R(1, 4L), 2.5));
}

static sy_node b_matmul_nn(ctx *c) {
    return sy_graph_matmul(c->g, var(c, R(2, 5L, 7L), -1, 1), var(c, R(2, 7L, 3L), -1, 1), false,
                           false);
}
static sy_node b_matmul_nt(ctx *c) {
    return sy_graph_matmul(c->g, var(c, R(2, 5L, 7L), -1, 1), var(c, R(2, 3L, 7L), -1, 1), false,
                           true);
}
static sy_node b_matmul_tn(ctx *c) {
    return sy_graph_matmul(c->g, var(c, R(2, 7L, 5L), -1, 1), var(c, R(2, 7L, 3L), -1, 1), true,
                           false);
}
static sy_node b_matmul_tt(ctx *c) {
    return sy_graph_matmul(c->g, var(c, R(2, 7L, 5L), -1, 1), var(c, R(2, 3L, 7L), -1, 1), true,
                           true);
}
static sy_node b_matmul_big(ctx *c) {
    return sy_graph_matmul(c->g, var(c, R(2, 67L, 131L), -1, 1), var(c, R(2, 131L, 45L), -1, 1),
                           false, false);
}
static sy_node matmul_fused(ctx *c, int act, bool ta, bool tb) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.matmul.act = (uint8_t)act;
    at.matmul.ta = ta;
    at.matmul.tb = tb;
    sy_node in[3] = {var(c, ta ? R(2, 37L, 33L) : R(2, 33L, 37L), -1, 1),
                     var(c, tb ? R(2, 19L, 37L) : R(2, 37L, 19L), -1, 1), var(c, R(1, 19L), -1, 1)};
    return add_op(c, SY_OP_MATMUL, in, 3, &at, NULL);
}
static sy_node b_matmul_bias(ctx *c) {
    return matmul_fused(c, SY_ACT_NONE, false, false);
}
static sy_node b_matmul_relu(ctx *c) {
    return matmul_fused(c, SY_ACT_RELU, false, true);
}
static sy_node b_matmul_sigmoid(ctx *c) {
    return matmul_fused(c, SY_ACT_SIGMOID, true, false);
}
static sy_node b_matmul_tanh(ctx *c) {
    return matmul_fused(c, SY_ACT_TANH, true, true);
}

/* issue 21, the skinny kernels (gemm.c): at most 16 columns over a sum of 256 or more, a Dense layer with few
 * units over a wide input -- the forward (a remainder of rows and of the sum) and a^T b (a remainder of
 * columns, several parts) */
static sy_node skinny(ctx *c, int64_t m, int64_t k, int64_t n, bool ta, int act) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.matmul.act = (uint8_t)act;
    at.matmul.ta = ta;
    sy_node in[3] = {var(c, ta ? R(2, k, m) : R(2, m, k), -1, 1), var(c, R(2, k, n), -1, 1),
                     var(c, R(1, n), -1, 1)};
    return add_op(c, SY_OP_MATMUL, in, 3, &at, NULL);
}
static sy_node b_matmul_skinny(ctx *c) { return skinny(c, 9, 700, 10, false, SY_ACT_RELU); }
static sy_node b_matmul_skinny_wide(ctx *c) { return skinny(c, 5, 520, 16, false, SY_ACT_NONE); }
static sy_node b_matmul_skinny_ta(ctx *c) { return skinny(c, 300, 520, 10, true, SY_ACT_NONE); }
static sy_node b_matmul_skinny_ta13(ctx *c) { return skinny(c, 75, 600, 13, true, SY_ACT_SIGMOID); }

static sy_node b_bias_add(ctx *c) {
    return sy_graph_bias_add(c->g, var(c, R(3, 4L, 3L, 5L), -1, 1), var(c, R(1, 5L), -1, 1));
}
static sy_node b_add(ctx *c) {
    return sy_graph_add(c->g, var(c, R(3, 4L, 1L, 3L), -1, 1), var(c, R(2, 2L, 3L), -1, 1));
}
static sy_node b_add_scalar(ctx *c) {
    return sy_graph_add(c->g, var(c, R(2, 4L, 3L), -1, 1), var(c, S(0), -1, 1));
}
static sy_node b_sub(ctx *c) {
    return sy_graph_sub(c->g, var(c, R(2, 4L, 3L), -1, 1), var(c, R(2, 4L, 1L), -1, 1));
}
static sy_node b_mul(ctx *c) {
    return sy_graph_mul(c->g, var(c, R(3, 2L, 1L, 3L), -1, 1), var(c, R(3, 1L, 4L, 3L), -1, 1));
}
static sy_node b_div(ctx *c) {
    return sy_graph_div(c->g, var(c, R(2, 4L, 3L), -1, 1), var(c, R(1, 3L), 0.5, 2));
}
/* issue 15, keras.applications: the cpu backend's broadcasting kernels (broadcast.c):
 * squeeze-and-excitation's (N, 1, 1, C) * (N, H, W, C), over more than one part of rows; an operand
 * broadcast on its last axis; and reduce_mean's gradient broadcast back */
static sy_node b_mul_se(ctx *c) {
    return sy_graph_mul(c->g, var(c, R(4, 2L, 1L, 1L, 5L), -1, 1),
                        var(c, R(4, 2L, 9L, 10L, 5L), -1, 1));
}
static sy_node b_sub_lastaxis(ctx *c) {
    return sy_graph_sub(c->g, var(c, R(3, 3L, 4L, 1L), -1, 1), var(c, R(3, 1L, 4L, 6L), -1, 1));
}
static sy_node b_broadcast_to_se(ctx *c) {
    return sy_graph_broadcast_to(c->g, var(c, R(4, 2L, 1L, 1L, 5L), -1, 1), R(4, 2L, 9L, 10L, 5L));
}
static sy_node b_neg(ctx *c) {
    return sy_graph_neg(c->g, var(c, R(2, 4L, 3L), -1, 1));
}
static sy_node b_relu(ctx *c) {
    return sy_graph_relu(c->g, var_nz(c, R(2, 6L, 7L)));
}
static sy_node b_sigmoid(ctx *c) {
    return sy_graph_sigmoid(c->g, var(c, R(2, 6L, 7L), -4, 4));
}
static sy_node b_tanh(ctx *c) {
    return sy_graph_tanh(c->g, var(c, R(2, 6L, 7L), -3, 3));
}
static sy_node b_exp(ctx *c) {
    return sy_graph_exp(c->g, var(c, R(2, 6L, 7L), -2, 2));
}
/* normalization layers */
static sy_node b_rsqrt(ctx *c) {
    return sy_graph_rsqrt(c->g, var(c, R(2, 6L, 7L), 0.2, 3));
}
static sy_node b_log(ctx *c) {
    return sy_graph_log(c->g, var(c, R(2, 6L, 7L), 0.2, 3));
}
/* issue 15, activations: the activation op, one row per function */
#define ACT_ROW(name, fn, lo, hi, a, b, cc)                                                        \
    static sy_node b_act_##name(ctx *c) {                                                          \
        return graph_activation(c->g, op_add_leaf(c, LEAF_VAR, R(2, 6L, 7L), lo, hi, true), fn, a, \
                                b, cc);                                                            \
    }
ACT_ROW(leaky, SY_AF_RELU, -3, 3, 0.3f, INFINITY, 0)
ACT_ROW(relu_max_slope_thr, SY_AF_RELU, -3, 3, 0.1f, 2.0f, 0.5f)
ACT_ROW(relu_neg_thr, SY_AF_RELU, -3, 3, 0, INFINITY, -0.7f)
ACT_ROW(relu6, SY_AF_RELU, -8, 8, 0, 6.0f, 0)
ACT_ROW(elu, SY_AF_ELU, -3, 3, 1.0f, 0, 0)
ACT_ROW(elu_alpha, SY_AF_ELU, -3, 3, 0.4f, 0, 0)
ACT_ROW(selu, SY_AF_SELU, -3, 3, 0, 0, 0)
ACT_ROW(gelu, SY_AF_GELU, -4, 4, 0, 0, 0)
ACT_ROW(swish, SY_AF_SWISH, -6, 6, 0, 0, 0)
ACT_ROW(softplus, SY_AF_SOFTPLUS, -20, 20, 0, 0, 0)
ACT_ROW(softsign, SY_AF_SOFTSIGN, -4, 4, 0, 0, 0)
ACT_ROW(hard_sigmoid, SY_AF_HARD_SIGMOID, -4, 4, 0, 0, 0)
ACT_ROW(abs, SY_AF_ABS, -2, 2, 0, 0, 0)
#undef ACT_ROW
static sy_node b_act_grad(ctx *c) {
    sy_node in[2] = {cin(c, R(2, 5L, 6L), -1, 1), cin(c, R(2, 5L, 6L), -3, 3)};
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.act = (sy_act_params){.fn = SY_AF_ELU, .a = 0.7f};
    return add_op(c, SY_OP_ACT_GRAD, in, 2, &at, NULL);
}
/* a chain of activations the fusion pass folds (each instruction keeps its own parameters) */
static sy_node b_act_chain(ctx *c) {
    sy_graph *g = c->g;
    sy_node x = var(c, R(3, 3L, 4L, 37L), -2, 2), b = var(c, R(1, 37L), -1, 1);
    sy_node h = graph_activation(g, sy_graph_add(g, x, b), SY_AF_ELU, 0.5f, 0, 0);
    h = graph_activation(g, sy_graph_mul(g, h, x), SY_AF_RELU, 0.2f, 1.5f, 0.1f);
    h = graph_activation(g, sy_graph_sub(g, h, b), SY_AF_SOFTSIGN, 0, 0, 0);
    return graph_activation(g, sy_graph_add(g, h, x), SY_AF_SWISH, 0, 0, 0);
}

static sy_node b_copy(ctx *c) {
    sy_node x = var(c, R(2, 3L, 5L), -1, 1);
    return add_op(c, SY_OP_COPY, &x, 1, NULL, NULL);
}
static sy_node b_softmax(ctx *c) {
    return sy_graph_softmax(c->g, var(c, R(2, 5L, 7L), -3, 3), -1);
}
static sy_node b_softmax_axis1(ctx *c) {
    return sy_graph_softmax(c->g, var(c, R(3, 2L, 5L, 3L), -3, 3), 1);
}
static sy_node b_log_softmax(ctx *c) {
    return sy_graph_log_softmax(c->g, var(c, R(3, 2L, 3L, 6L), -3, 3), 2);
}

static sy_node b_reshape(ctx *c) {
    return sy_graph_reshape(c->g, var(c, R(3, 2L, 3L, 4L), -1, 1), R(2, 6L, 4L));
}
static sy_node b_transpose(ctx *c) {
    int32_t perm[3] = {2, 0, 1};
    return sy_graph_transpose(c->g, var(c, R(3, 2L, 3L, 4L), -1, 1), perm);
}
static sy_node b_concat(ctx *c) {
    sy_node xs[3] = {var(c, R(3, 2L, 1L, 3L), -1, 1), var(c, R(3, 2L, 4L, 3L), -1, 1),
                     var(c, R(3, 2L, 2L, 3L), -1, 1)};
    return sy_graph_concat(c->g, xs, 3, 1);
}
static sy_node b_slice(ctx *c) {
    int64_t begin[3] = {1, 0, 2}, size[3] = {2, 3, 2};
    return sy_graph_slice(c->g, var(c, R(3, 4L, 3L, 5L), -1, 1), begin, size);
}
/* the cpu kernel's runs: inner axes covered fully, only the outer one cut, rank 1 */
static sy_node b_slice_rows(ctx *c) {
    int64_t begin[3] = {1, 0, 0}, size[3] = {2, 3, 5};
    return sy_graph_slice(c->g, var(c, R(3, 4L, 3L, 5L), -1, 1), begin, size);
}
static sy_node b_slice_middle(ctx *c) {
    int64_t begin[3] = {0, 1, 0}, size[3] = {4, 2, 5};
    return sy_graph_slice(c->g, var(c, R(3, 4L, 3L, 5L), -1, 1), begin, size);
}
static sy_node b_slice_1d(ctx *c) {
    int64_t begin[1] = {3}, size[1] = {4};
    return sy_graph_slice(c->g, var(c, R(1, 9L), -1, 1), begin, size);
}
static sy_node b_broadcast_to(ctx *c) {
    return sy_graph_broadcast_to(c->g, var(c, R(2, 1L, 3L), -1, 1), R(3, 2L, 4L, 3L));
}
/* issue 15 speed: the fast kernel's other cases: one element filling the output, a broadcast inner
 * axis */
static sy_node b_broadcast_to_scalar(ctx *c) {
    return sy_graph_broadcast_to(c->g, var(c, R(1, 1L), -1, 1), R(3, 2L, 3L, 5L));
}
static sy_node b_broadcast_to_inner(ctx *c) {
    return sy_graph_broadcast_to(c->g, var(c, R(3, 1L, 4L, 1L), -1, 1), R(3, 3L, 4L, 5L));
}

static sy_node b_conv_valid(ctx *c) {
    return sy_graph_conv2d(c->g, var(c, R(4, 2L, 7L, 6L, 3L), -1, 1),
                           var(c, R(4, 3L, 3L, 3L, 4L), -1, 1), 1, 1, SY_PADDING_VALID);
}
static sy_node b_conv_same_s2(ctx *c) {
    return sy_graph_conv2d(c->g, var(c, R(4, 2L, 7L, 8L, 2L), -1, 1),
                           var(c, R(4, 3L, 2L, 2L, 5L), -1, 1), 2, 2, SY_PADDING_SAME);
}
static sy_node b_conv_one_channel(ctx *c) { /* the Fashion-MNIST first layer's shape class: C = 1 */
    return sy_graph_conv2d(c->g, var(c, R(4, 3L, 9L, 9L, 1L), -1, 1),
                           var(c, R(4, 3L, 3L, 1L, 16L), -1, 1), 1, 1, SY_PADDING_VALID);
}
/* The cpu kernels' other paths: windows longer than the direct kernels take
 * (im2col + GEMM), output channels past a register tile (and a remainder),
 * and a 1x1 conv (the input is its own im2col matrix). */
static sy_node b_conv_im2col(ctx *c) {
    return sy_graph_conv2d(c->g, var(c, R(4, 2L, 6L, 7L, 8L), -1, 1),
                           var(c, R(4, 3L, 3L, 8L, 6L), -1, 1), 1, 1, SY_PADDING_SAME);
}
static sy_node b_conv_wide(ctx *c) {
    return sy_graph_conv2d(c->g, var(c, R(4, 2L, 7L, 6L, 2L), -1, 1),
                           var(c, R(4, 3L, 3L, 2L, 70L), -1, 1), 1, 1, SY_PADDING_SAME);
}
static sy_node b_conv_pointwise(ctx *c) {
    return sy_graph_conv2d(c->g, var(c, R(4, 2L, 5L, 4L, 8L), -1, 1),
                           var(c, R(4, 1L, 1L, 8L, 6L), -1, 1), 1, 1, SY_PADDING_VALID);
}
static sy_node conv_fused(ctx *c, int act, int padding) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.act = (uint8_t)act;
    at.conv.stride[0] = at.conv.stride[1] = 1;
    at.conv.padding = padding;
    sy_node in[3] = {var(c, R(4, 2L, 6L, 5L, 3L), -1, 1), var(c, R(4, 3L, 3L, 3L, 8L), -1, 1),
                     var(c, R(1, 8L), -1, 1)};
    return add_op(c, SY_OP_CONV2D, in, 3, &at, NULL);
}
static sy_node b_conv_bias_relu(ctx *c) {
    return conv_fused(c, SY_ACT_RELU, SY_PAD_VALID);
}
static sy_node b_conv_bias_tanh_same(ctx *c) {
    return conv_fused(c, SY_ACT_TANH, SY_PAD_SAME);
}
static sy_node b_maxpool(ctx *c) {
    return sy_graph_max_pool2d(c->g, var(c, R(4, 2L, 6L, 7L, 3L), -1, 1), 2, 2, 2, 2,
                               SY_PADDING_VALID);
}
static sy_node b_maxpool_same(ctx *c) {
    return sy_graph_max_pool2d(c->g, var(c, R(4, 2L, 7L, 6L, 2L), -1, 1), 3, 3, 2, 2,
                               SY_PADDING_SAME);
}
static sy_node b_avgpool(ctx *c) {
    return sy_graph_avg_pool2d(c->g, var(c, R(4, 2L, 6L, 7L, 3L), -1, 1), 2, 2, 2, 2,
                               SY_PADDING_VALID);
}
static sy_node b_avgpool_same(ctx *c) {
    return sy_graph_avg_pool2d(c->g, var(c, R(4, 2L, 7L, 5L, 2L), -1, 1), 3, 2, 2, 1,
                               SY_PADDING_SAME);
}
static sy_node b_dropout(ctx *c) {
    return sy_graph_dropout(c->g, var(c, R(2, 8L, 9L), -1, 1), 0.3f, 42);
}
static sy_node b_reduce_sum(ctx *c) {
    int32_t axes[2] = {0, 2};
    return sy_graph_reduce_sum(c->g, var(c, R(3, 3L, 4L, 5L), -1, 1), axes, 2, true);
}
static sy_node b_reduce_sum_last(ctx *c) {
    int32_t axes[1] = {-1};
    return sy_graph_reduce_sum(c->g, var(c, R(2, 6L, 5L), -1, 1), axes, 1, false);
}
static sy_node b_reduce_mean(ctx *c) {
    return sy_graph_reduce_mean(c->g, var(c, R(3, 3L, 4L, 5L), -1, 1), NULL, 0, false);
}
static sy_node b_gather(ctx *c) {
    return sy_graph_gather(c->g, var(c, R(2, 5L, 3L), -1, 1), iin(c, R(2, 4L, 3L), 0, 5));
}

static sy_node b_sparse_softmax_ce(ctx *c) {
    return sy_graph_sparse_softmax_cross_entropy(c->g, var(c, R(2, 6L, 5L), -3, 3),
                                                 iin(c, R(1, 6L), 0, 5));
}
static sy_node b_softmax_ce(ctx *c) {
    return sy_graph_softmax_cross_entropy(c->g, var(c, R(2, 6L, 5L), -3, 3),
                                          var(c, R(2, 6L, 5L), 0, 1));
}
static sy_node b_sigmoid_ce(ctx *c) {
    return sy_graph_sigmoid_cross_entropy(c->g, var(c, R(2, 6L, 3L), -4, 4),
                                          var(c, R(2, 6L, 3L), 0, 1));
}
static sy_node b_sparse_cat_ce(ctx *c) {
    return sy_graph_sparse_categorical_crossentropy(c->g, var(c, R(2, 6L, 5L), 0.05, 0.9),
                                                    iin(c, R(1, 6L), 0, 5), false);
}
static sy_node b_cat_ce(ctx *c) {
    return sy_graph_categorical_crossentropy(c->g, var(c, R(2, 6L, 5L), 0.05, 0.9),
                                             cin(c, R(2, 6L, 5L), 0, 1), false);
}
static sy_node b_binary_ce(ctx *c) {
    return sy_graph_binary_crossentropy(c->g, var(c, R(2, 6L, 3L), 0.05, 0.95),
                                        cin(c, R(2, 6L, 3L), 0, 1), false);
}
static sy_node b_mse(ctx *c) {
    return sy_graph_mean_squared_error(c->g, var(c, R(2, 6L, 4L), -2, 2),
                                       var(c, R(2, 6L, 4L), -2, 2));
}

/* gradient ops, forward only */
static sy_node grad2(ctx *c, sy_op op, double lo, double hi) {
    sy_node in[2] = {cin(c, R(2, 5L, 6L), -1, 1), cin(c, R(2, 5L, 6L), lo, hi)};
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.axis.axis = 1;
    return add_op(c, op, in, 2, &at, NULL);
}
static sy_node b_relu_grad(ctx *c) {
    return grad2(c, SY_OP_RELU_GRAD, -1, 1);
}
static sy_node b_sigmoid_grad(ctx *c) {
    return grad2(c, SY_OP_SIGMOID_GRAD, 0, 1);
}
static sy_node b_tanh_grad(ctx *c) {
    return grad2(c, SY_OP_TANH_GRAD, -1, 1);
}
static sy_node b_softmax_grad(ctx *c) {
    return grad2(c, SY_OP_SOFTMAX_GRAD, 0, 1);
}
static sy_node b_log_softmax_grad(ctx *c) {
    return grad2(c, SY_OP_LOG_SOFTMAX_GRAD, -3, 0);
}
static sy_node b_slice_grad(ctx *c) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.slice.begin[0] = 1;
    at.slice.begin[1] = 2;
    sy_shape out = R(2, 4L, 6L);
    sy_node dy = cin(c, R(2, 2L, 3L), -1, 1);
    return add_op(c, SY_OP_SLICE_GRAD, &dy, 1, &at, &out);
}
static sy_node conv_backprop_o(ctx *c, bool input, int stride, int padding, int64_t ch, int64_t o) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.stride[0] = at.conv.stride[1] = stride;
    at.conv.padding = padding;
    sy_shape xs = R(4, 2L, 7L, 6L, ch), ws = R(4, 3L, 3L, ch, o);
    int64_t oh, ow, p;
    sy_conv_out(7, 3, stride, padding, &oh, &p);
    sy_conv_out(6, 3, stride, padding, &ow, &p);
    sy_node dy = cin(c, R(4, 2L, oh, ow, o), -1, 1);
    if (input) {
        sy_node in[2] = {dy, cin(c, ws, -1, 1)};
        return add_op(c, SY_OP_CONV2D_BACKPROP_INPUT, in, 2, &at, &xs);
    }
    sy_node in[2] = {cin(c, xs, -1, 1), dy};
    return add_op(c, SY_OP_CONV2D_BACKPROP_FILTER, in, 2, &at, &ws);
}
static sy_node conv_backprop(ctx *c, bool input, int stride, int padding, int64_t ch) {
    return conv_backprop_o(c, input, stride, padding, ch, 5);
}
static sy_node b_conv_bp_input_wide(ctx *c) {
    return conv_backprop_o(c, true, 1, SY_PAD_SAME, 8, 70);
}
static sy_node b_conv_bp_filter_wide(ctx *c) {
    return conv_backprop_o(c, false, 1, SY_PAD_SAME, 8, 70);
}
static sy_node b_conv_bp_filter_direct_wide(ctx *c) {
    return conv_backprop_o(c, false, 1, SY_PAD_SAME, 2, 70);
}
static sy_node b_conv_bp_input(ctx *c) {
    return conv_backprop(c, true, 1, SY_PAD_VALID, 3);
}
static sy_node b_conv_bp_input_same(ctx *c) {
    return conv_backprop(c, true, 2, SY_PAD_SAME, 2);
}
static sy_node b_conv_bp_filter(ctx *c) {
    return conv_backprop(c, false, 1, SY_PAD_VALID, 3);
}
static sy_node b_conv_bp_filter_same(ctx *c) {
    return conv_backprop(c, false, 2, SY_PAD_SAME, 1);
}
static sy_node pool_grad(ctx *c, sy_op op, int k, int s, int padding) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.pool.ksize[0] = at.pool.ksize[1] = k;
    at.pool.stride[0] = at.pool.stride[1] = s;
    at.pool.padding = padding;
    sy_shape xs = R(4, 2L, 7L, 6L, 3L);
    int64_t oh, ow, p;
    sy_conv_out(7, k, s, padding, &oh, &p);
    sy_conv_out(6, k, s, padding, &ow, &p);
    sy_node dy = cin(c, R(4, 2L, oh, ow, 3L), -1, 1);
    if (op == SY_OP_AVG_POOL2D_GRAD) return add_op(c, op, &dy, 1, &at, &xs);
    sy_node x = cin(c, xs, -1, 1);
    sy_node y = add_op(c, SY_OP_MAX_POOL2D, &x, 1, &at, NULL);
    sy_node in[3] = {x, y, dy};
    return add_op(c, op, in, 3, &at, NULL);
}
static sy_node b_maxpool_grad(ctx *c) {
    return pool_grad(c, SY_OP_MAX_POOL2D_GRAD, 2, 2, SY_PAD_VALID);
}
static sy_node b_maxpool_grad_same(ctx *c) {
    return pool_grad(c, SY_OP_MAX_POOL2D_GRAD, 3, 2, SY_PAD_SAME);
}
static sy_node b_avgpool_grad(ctx *c) {
    return pool_grad(c, SY_OP_AVG_POOL2D_GRAD, 2, 2, SY_PAD_VALID);
}
static sy_node b_avgpool_grad_same(ctx *c) {
    return pool_grad(c, SY_OP_AVG_POOL2D_GRAD, 3, 2, SY_PAD_SAME);
}
/* Shapes for the fast kernels' other paths: channel blocks (C > 64), gaps
 * between windows (stride > ksize), ties in a window (x after a relu). */
static sy_node pool_grad_x(ctx *c, sy_op op, sy_shape xs, int k, int s, int padding, bool ties) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.pool.ksize[0] = at.pool.ksize[1] = k;
    at.pool.stride[0] = at.pool.stride[1] = s;
    at.pool.padding = padding;
    int64_t oh, ow, p;
    sy_conv_out(xs.dims[1], k, s, padding, &oh, &p);
    sy_conv_out(xs.dims[2], k, s, padding, &ow, &p);
    sy_node dy = cin(c, R(4, xs.dims[0], oh, ow, xs.dims[3]), -1, 1);
    if (op == SY_OP_AVG_POOL2D_GRAD) return add_op(c, op, &dy, 1, &at, &xs);
    sy_node x = cin(c, xs, -1, 1);
    if (ties) x = sy_graph_relu(c->g, x);
    sy_node y = add_op(c, SY_OP_MAX_POOL2D, &x, 1, &at, NULL);
    sy_node in[3] = {x, y, dy};
    return add_op(c, op, in, 3, &at, NULL);
}
static sy_node b_maxpool_grad_ties(ctx *c) {
    return pool_grad_x(c, SY_OP_MAX_POOL2D_GRAD, R(4, 2L, 7L, 6L, 3L), 2, 2, SY_PAD_VALID, true);
}
static sy_node b_maxpool_grad_ties_same(ctx *c) {
    return pool_grad_x(c, SY_OP_MAX_POOL2D_GRAD, R(4, 2L, 7L, 6L, 3L), 3, 2, SY_PAD_SAME, true);
}
static sy_node b_maxpool_grad_gaps(ctx *c) {
    return pool_grad_x(c, SY_OP_MAX_POOL2D_GRAD, R(4, 2L, 8L, 7L, 3L), 2, 3, SY_PAD_VALID, false);
}
static sy_node b_avgpool_grad_gaps(ctx *c) {
    return pool_grad_x(c, SY_OP_AVG_POOL2D_GRAD, R(4, 2L, 8L, 7L, 3L), 2, 3, SY_PAD_VALID, false);
}
static sy_node b_maxpool_grad_c70(ctx *c) {
    return pool_grad_x(c, SY_OP_MAX_POOL2D_GRAD, R(4, 2L, 7L, 5L, 70L), 2, 2, SY_PAD_VALID, true);
}
static sy_node b_maxpool_grad_c70_same(ctx *c) {
    return pool_grad_x(c, SY_OP_MAX_POOL2D_GRAD, R(4, 2L, 7L, 5L, 70L), 3, 2, SY_PAD_SAME, false);
}
static sy_node b_avgpool_grad_c70(ctx *c) {
    return pool_grad_x(c, SY_OP_AVG_POOL2D_GRAD, R(4, 2L, 7L, 5L, 70L), 2, 2, SY_PAD_VALID, false);
}
static sy_node b_avgpool_grad_c70_same(ctx *c) {
    return pool_grad_x(c, SY_OP_AVG_POOL2D_GRAD, R(4, 2L, 7L, 5L, 70L), 3, 2, SY_PAD_SAME, false);
}
static sy_node b_maxpool_c70(ctx *c) {
    return sy_graph_max_pool2d(c->g, var(c, R(4, 2L, 5L, 6L, 70L), -1, 1), 3, 3, 2, 2,
                               SY_PADDING_SAME);
}
static sy_node b_avgpool_c70(ctx *c) {
    return sy_graph_avg_pool2d(c->g, var(c, R(4, 2L, 5L, 6L, 70L), -1, 1), 3, 3, 2, 2,
                               SY_PADDING_SAME);
}
static sy_node b_softmax_37(ctx *c) {
    return sy_graph_softmax(c->g, var(c, R(3, 2L, 4L, 37L), -3, 3), -1);
}
static sy_node b_log_softmax_100(ctx *c) {
    return sy_graph_log_softmax(c->g, var(c, R(2, 3L, 100L), -3, 3), -1);
}
static sy_node b_softmax_inner70(ctx *c) {
    return sy_graph_softmax(c->g, var(c, R(3, 2L, 5L, 70L), -3, 3), 1);
}
static sy_node b_log_softmax_axis0(ctx *c) {
    return sy_graph_log_softmax(c->g, var(c, R(2, 4L, 70L), -3, 3), 0);
}
static sy_node b_sparse_softmax_ce_37(ctx *c) {
    return sy_graph_sparse_softmax_cross_entropy(c->g, var(c, R(2, 9L, 37L), -3, 3),
                                                 iin(c, R(1, 9L), 0, 37));
}
static sy_node b_sparse_softmax_ce_grad_37(ctx *c) {
    sy_node in[3] = {cin(c, R(1, 9L), -1, 1), cin(c, R(2, 9L, 37L), -3, 3),
                     iin(c, R(1, 9L), 0, 37)};
    return add_op(c, SY_OP_SPARSE_SOFTMAX_CE_GRAD, in, 3, NULL, NULL);
}
static sy_node b_reverse(ctx *c) {
    return sy_graph_reverse(c->g, var(c, R(3, 2L, 5L, 3L), -1, 1), 1);
}
static sy_node b_reverse_last(ctx *c) {
    return sy_graph_reverse(c->g, var(c, R(2, 3L, 4L), -1, 1), -1);
}

/* recurrent scans: (B, T, D) = (3, 5, 2), 4 units, or with `big` (13, 4,
 * 10) and 9 units, which spans several row blocks and column panels of the
 * fast kernels; weights small enough that the gates stay away from
 * saturation, so finite differences are accurate. Only h is
 * differentiable, so the gradient rows read h through a slice, over every
 * step or at the last, as the layers do. */
typedef struct scan_opts {
    bool gru, bias, mask, last;
    int act, rec_act;
    bool big, inference;
} scan_opts;

typedef struct scan_dims {
    int64_t b, t, d, u;
} scan_dims;

/* issue 16, MXU recurrent products: while set, the scans' shapes, and their weights scaled down so
 * that sums over many terms leave the gates short of saturation (where a sigmoid's 1.0 would hide
 * any product) */
static const scan_dims *mxu_dims;

static scan_dims dims_of(scan_opts o) {
    if (mxu_dims) return *mxu_dims;
    return o.big ? (scan_dims){13, 4, 10, 9} : (scan_dims){3, 5, 2, 4};
}

/* fn: the general cell's activations {activation, recurrent_activation}, or NULL */
static sy_node scan_seq_fn(ctx *c, scan_opts o, const sy_act_params *fn) {
    scan_dims n = dims_of(o);
    int64_t gu = (o.gru ? 3 : 4) * n.u;
    double w = mxu_dims ? 0.15 : 1; /* issue 16, MXU recurrent products */
    sy_node x = var(c, R(3, n.b, n.t, n.d), -1, 1), k = var(c, R(2, n.d, gu), -0.6 * w, 0.6 * w),
            r = var(c, R(2, n.u, gu), -0.5 * w, 0.5 * w);
    sy_node b = o.bias ? var(c, o.gru ? R(2, 2L, gu) : R(1, gu), -0.5, 0.5) : SY_NONE;
    sy_node m = o.mask ? cin(c, R(2, n.b, n.u), 0, 2) : SY_NONE;
    return o.gru ? graph_gru_scan(c->g, x, k, r, b, m, o.act, o.rec_act, fn)
                 : graph_lstm_scan(c->g, x, k, r, b, m, o.act, o.rec_act, fn, o.inference);
}
static sy_node scan_seq(ctx *c, scan_opts o) {
    return scan_seq_fn(c, o, NULL);
}

static sy_node scan_h_fn(ctx *c, scan_opts o, const sy_act_params *fn) {
    scan_dims n = dims_of(o);
    sy_node seq = scan_seq_fn(c, o, fn);
    int64_t begin[3] = {0, o.last ? n.t - 1 : 0, graph_scan_h_column(c->g, seq)},
            size[3] = {n.b, o.last ? 1 : n.t, n.u};
    return sy_graph_slice(c->g, seq, begin, size);
}
static sy_node scan_h(ctx *c, scan_opts o) {
    return scan_h_fn(c, o, NULL);
}

#define TANH SY_ACT_TANH
#define SIGM SY_ACT_SIGMOID
static sy_node b_lstm_seq(ctx *c) {
    return scan_seq(c, (scan_opts){false, true, false, false, TANH, SIGM, false, false});
}
static sy_node b_lstm_seq_big(ctx *c) {
    return scan_seq(c, (scan_opts){false, true, true, false, TANH, SIGM, true, false});
}
static sy_node b_lstm(ctx *c) {
    return scan_h(c, (scan_opts){false, true, false, false, TANH, SIGM, false, false});
}
static sy_node b_lstm_big(ctx *c) {
    return scan_h(c, (scan_opts){false, true, true, false, TANH, SIGM, true, false});
}
static sy_node b_lstm_last_mask(ctx *c) {
    return scan_h(c, (scan_opts){false, false, true, true, TANH, SIGM, false, false});
}
static sy_node b_lstm_sigmoid_tanh(ctx *c) {
    return scan_h(c, (scan_opts){false, true, false, true, SIGM, TANH, false, false});
}
static sy_node b_lstm_inference(ctx *c) {
    return scan_h(c, (scan_opts){false, true, false, false, TANH, SIGM, false, true});
}
static sy_node b_lstm_inference_big(ctx *c) {
    return scan_h(c, (scan_opts){false, true, true, true, TANH, SIGM, true, true});
}
static sy_node b_lstm_inference_linear(ctx *c) {
    return scan_seq(c, (scan_opts){false, false, true, false, SY_ACT_NONE, SIGM, true, true});
}
static sy_node b_lstm_linear(ctx *c) {
    return scan_h(c, (scan_opts){false, true, true, false, SY_ACT_NONE, SIGM, false, false});
}
static sy_node b_gru_seq(ctx *c) {
    return scan_seq(c, (scan_opts){true, true, true, false, TANH, SIGM, false, false});
}
static sy_node b_gru(ctx *c) {
    return scan_h(c, (scan_opts){true, true, false, false, TANH, SIGM, false, false});
}
static sy_node b_gru_last_mask(ctx *c) {
    return scan_h(c, (scan_opts){true, false, true, true, TANH, SIGM, false, false});
}
static sy_node b_gru_sigmoid_tanh(ctx *c) {
    return scan_h(c, (scan_opts){true, true, true, true, SIGM, TANH, false, false});
}

/* the grad ops forward, on sequences the scans made */
static sy_node scan_grad_fn(ctx *c, scan_opts o, bool need_dx, const sy_act_params *fn) {
    scan_dims n = dims_of(o);
    sy_node seq = scan_seq_fn(c, o, fn);
    sy_attrs at = graph_node(c->g, seq)->attr;
    at.rnn.has_bias = 0;
    at.rnn.has_mask = o.mask;
    at.rnn.need_dx = need_dx;
    sy_node dh = cin(c, R(3, n.b, o.last ? 1L : n.t, n.u), -1, 1),
            mask = o.mask ? graph_input(c->g, seq, o.bias ? 4 : 3) : SY_NONE;
    if (o.gru) {
        sy_shape out = sy_graph_shape(c->g, seq);
        out.dims[2] = 6 * n.u;
        sy_node in[4] = {dh, seq, graph_input(c->g, seq, 2), mask};
        return add_op(c, SY_OP_GRU_SCAN_GRAD, in, o.mask ? 4 : 3, &at, &out);
    }
    sy_node in[5] = {dh, seq, graph_input(c->g, seq, 1), graph_input(c->g, seq, 2), mask};
    return add_op(c, SY_OP_LSTM_SCAN_GRAD, in, o.mask ? 5 : 4, &at, NULL);
}
static sy_node scan_grad(ctx *c, scan_opts o, bool need_dx) {
    return scan_grad_fn(c, o, need_dx, NULL);
}

/* issue 15, recurrent activations: the general cell, any Keras activation */
static const sy_act_params gelu_hard_sigmoid[2] = {{.fn = SY_AF_GELU}, {.fn = SY_AF_HARD_SIGMOID}};
static const sy_act_params swish_softsign[2] = {{.fn = SY_AF_SWISH}, {.fn = SY_AF_SOFTSIGN}};
static const sy_act_params elu_sigmoid[2] = {{.fn = SY_AF_ELU, .a = 1.0f}, {.fn = SY_AF_SIGMOID}};
static const sy_act_params softplus_selu[2] = {{.fn = SY_AF_SOFTPLUS}, {.fn = SY_AF_SELU}};
static const sy_act_params exp_relu6[2] = {{.fn = SY_AF_EXP}, {.fn = SY_AF_RELU, .b = 6.0f}};
static const sy_act_params tanh_linear[2] = {{.fn = SY_AF_TANH}, {.fn = SY_AF_LINEAR}};
static sy_node b_lstm_gelu(ctx *c) {
    return scan_h_fn(c, (scan_opts){false, true, false, false, 0, 0, false, false},
                     gelu_hard_sigmoid);
}
static sy_node b_lstm_elu_big(ctx *c) {
    return scan_h_fn(c, (scan_opts){false, true, true, false, 0, 0, true, false}, elu_sigmoid);
}
static sy_node b_lstm_exp_last(ctx *c) {
    return scan_h_fn(c, (scan_opts){false, false, true, true, 0, 0, false, false}, exp_relu6);
}
static sy_node b_lstm_seq_gelu(ctx *c) {
    return scan_seq_fn(c, (scan_opts){false, true, true, false, 0, 0, true, false},
                       gelu_hard_sigmoid);
}
static sy_node b_lstm_inference_gelu(ctx *c) {
    return scan_h_fn(c, (scan_opts){false, true, true, true, 0, 0, true, true}, gelu_hard_sigmoid);
}
static sy_node b_gru_swish(ctx *c) {
    return scan_h_fn(c, (scan_opts){true, true, false, false, 0, 0, false, false}, swish_softsign);
}
static sy_node b_gru_softplus_mask_last(ctx *c) {
    return scan_h_fn(c, (scan_opts){true, true, true, true, 0, 0, false, false}, softplus_selu);
}
static sy_node b_gru_tanh_linear_big(ctx *c) {
    return scan_h_fn(c, (scan_opts){true, false, true, false, 0, 0, true, false}, tanh_linear);
}
static sy_node b_gru_seq_swish(ctx *c) {
    return scan_seq_fn(c, (scan_opts){true, true, true, false, 0, 0, true, false}, swish_softsign);
}
static sy_node b_lstm_grad_gelu(ctx *c) {
    return scan_grad_fn(c, (scan_opts){false, true, true, false, 0, 0, true, false}, true,
                        gelu_hard_sigmoid);
}
static sy_node b_gru_grad_swish(ctx *c) {
    return scan_grad_fn(c, (scan_opts){true, true, true, true, 0, 0, true, false}, false,
                        swish_softsign);
}
static sy_node b_lstm_grad(ctx *c) {
    return scan_grad(c, (scan_opts){false, true, false, false, TANH, SIGM, false, false}, true);
}
static sy_node b_lstm_grad_mask_last(ctx *c) {
    return scan_grad(c, (scan_opts){false, true, true, true, TANH, SIGM, false, false}, false);
}
static sy_node b_lstm_grad_big(ctx *c) {
    return scan_grad(c, (scan_opts){false, true, true, false, TANH, SIGM, true, false}, true);
}
static sy_node b_lstm_grad_linear(ctx *c) {
    return scan_grad(c, (scan_opts){false, false, false, true, SY_ACT_NONE, SIGM, true, false},
                     true);
}
static sy_node b_gru_grad(ctx *c) {
    return scan_grad(c, (scan_opts){true, true, false, false, TANH, SIGM, false, false}, false);
}
static sy_node b_gru_grad_mask_last(ctx *c) {
    return scan_grad(c, (scan_opts){true, true, true, true, TANH, SIGM, false, false}, false);
}
static sy_node lstm_wgrad(ctx *c, bool big) {
    sy_node grads =
        scan_grad(c, (scan_opts){false, true, big, false, TANH, SIGM, big, false}, true);
    sy_node seq = graph_input(c->g, grads, 1), in[3] = {seq, grads, graph_input(c->g, seq, 1)};
    return add_op(c, SY_OP_LSTM_SCAN_WGRAD, in, 3, NULL, NULL);
}
static sy_node b_lstm_wgrad(ctx *c) {
    return lstm_wgrad(c, false);
}
static sy_node b_lstm_wgrad_big(ctx *c) {
    return lstm_wgrad(c, true);
}

/* issue 16, MXU recurrent products: D and U not multiples of the MXU's 128, D + U (a step's forward
 * sum) past 128, 4U and 3U (the backward sums) past 256, B * T (the weight gradient's sum) past
 * 128, and 13 rows, which the fast kernels split between two threads */
static const scan_dims mxu_scan_dims = {13, 11, 150, 130}, mxu_scan_dims_small = {7, 3, 100, 45};
#define MXU_SCAN(name, dims, expr)                                                                 \
    static sy_node name(ctx *c) {                                                                  \
        mxu_dims = &dims;                                                                          \
        sy_node y = expr;                                                                          \
        mxu_dims = NULL;                                                                           \
        return y;                                                                                  \
    }
/* issue 17, masking: the scans with Keras's mask over the steps (B, T) of 0 and 1, drawn as int32
 * ids and gathered from the column [0; 1] (as an Embedding's mask_zero does); a masked step keeps
 * the state */
static sy_node steps_mask(ctx *c, int64_t b, int64_t t) {
    sy_node col[2] = {sy_graph_fill(c->g, c->dt, R(2, 1L, 1L), 0.0),
                      sy_graph_fill(c->g, c->dt, R(2, 1L, 1L), 1.0)};
    sy_node ids = iin(c, R(2, b, t), 0, 2);
    return sy_graph_reshape(c->g, sy_graph_gather(c->g, sy_graph_concat(c->g, col, 2, 0), ids),
                            R(2, b, t));
}
static sy_node masked_seq(ctx *c, scan_opts o, const sy_act_params *fn) {
    scan_dims n = dims_of(o);
    int64_t gu = (o.gru ? 3 : 4) * n.u;
    double w = mxu_dims ? 0.15 : 1;
    sy_node x = var(c, R(3, n.b, n.t, n.d), -1, 1), k = var(c, R(2, n.d, gu), -0.6 * w, 0.6 * w),
            r = var(c, R(2, n.u, gu), -0.5 * w, 0.5 * w);
    sy_node b = o.bias ? var(c, o.gru ? R(2, 2L, gu) : R(1, gu), -0.5, 0.5) : SY_NONE;
    sy_node m = o.mask ? cin(c, R(2, n.b, n.u), 0, 2) : SY_NONE, st = steps_mask(c, n.b, n.t);
    return o.gru
               ? graph_gru_scan_masked(c->g, x, k, r, b, m, st, o.act, o.rec_act, fn)
               : graph_lstm_scan_masked(c->g, x, k, r, b, m, st, o.act, o.rec_act, fn, o.inference);
}
static sy_node masked_h(ctx *c, scan_opts o, const sy_act_params *fn) {
    scan_dims n = dims_of(o);
    sy_node seq = masked_seq(c, o, fn);
    int64_t begin[3] = {0, o.last ? n.t - 1 : 0, graph_scan_h_column(c->g, seq)},
            size[3] = {n.b, o.last ? 1 : n.t, n.u};
    return sy_graph_slice(c->g, seq, begin, size);
}
/* the grad ops forward, on a masked scan's rows */
static sy_node masked_grad(ctx *c, scan_opts o, bool need_dx) {
    scan_dims n = dims_of(o);
    sy_node seq = masked_seq(c, o, NULL);
    const sy_node_rec *sr = graph_node(c->g, seq);
    sy_attrs at = sr->attr;
    at.rnn.has_bias = 0;
    at.rnn.need_dx = need_dx;
    int last = sr->n_in - 1; /* the steps' mask; the dropout mask before it */
    sy_node dh = cin(c, R(3, n.b, o.last ? 1L : n.t, n.u), -1, 1), in[6];
    int k = 0;
    in[k++] = dh;
    in[k++] = seq;
    if (!o.gru) in[k++] = graph_input(c->g, seq, 1);
    in[k++] = graph_input(c->g, seq, 2);
    if (o.mask) in[k++] = graph_input(c->g, seq, last - 1);
    in[k++] = graph_input(c->g, seq, last);
    if (o.gru) {
        sy_shape out = sy_graph_shape(c->g, seq);
        out.dims[2] = 6 * n.u;
        return add_op(c, SY_OP_GRU_SCAN_GRAD, in, k, &at, &out);
    }
    return add_op(c, SY_OP_LSTM_SCAN_GRAD, in, k, &at, NULL);
}
static sy_node b_lstm_steps(ctx *c) {
    return masked_h(c, (scan_opts){false, true, false, false, TANH, SIGM, false, false}, NULL);
}
static sy_node b_lstm_steps_big_last(ctx *c) {
    return masked_h(c, (scan_opts){false, true, true, true, TANH, SIGM, true, false}, NULL);
}
static sy_node b_lstm_steps_gelu(ctx *c) {
    return masked_h(c, (scan_opts){false, true, false, false, 0, 0, false, false},
                    gelu_hard_sigmoid);
}
static sy_node b_lstm_steps_inference(ctx *c) {
    return masked_h(c, (scan_opts){false, true, true, false, TANH, SIGM, true, true}, NULL);
}
static sy_node b_gru_steps(ctx *c) {
    return masked_h(c, (scan_opts){true, true, false, false, TANH, SIGM, false, false}, NULL);
}
static sy_node b_gru_steps_big_last(ctx *c) {
    return masked_h(c, (scan_opts){true, true, true, true, TANH, SIGM, true, false}, NULL);
}
static sy_node b_gru_steps_swish(ctx *c) {
    return masked_h(c, (scan_opts){true, true, true, false, 0, 0, false, false}, swish_softsign);
}
static sy_node b_lstm_steps_grad(ctx *c) {
    return masked_grad(c, (scan_opts){false, true, true, false, TANH, SIGM, true, false}, true);
}
static sy_node b_lstm_steps_grad_last(ctx *c) {
    return masked_grad(c, (scan_opts){false, true, false, true, TANH, SIGM, true, false}, false);
}
static sy_node b_gru_steps_grad(ctx *c) {
    return masked_grad(c, (scan_opts){true, true, true, false, TANH, SIGM, true, false}, false);
}
static sy_node b_gru_steps_grad_last(ctx *c) {
    return masked_grad(c, (scan_opts){true, true, false, true, TANH, SIGM, true, false}, false);
}
MXU_SCAN(b_lstm_steps_mxu, mxu_scan_dims,
         masked_seq(c, (scan_opts){false, true, true, false, TANH, SIGM, false, false}, NULL))
MXU_SCAN(b_lstm_steps_grad_mxu, mxu_scan_dims,
         masked_grad(c, (scan_opts){false, true, true, false, TANH, SIGM, false, false}, true))
MXU_SCAN(b_gru_steps_mxu, mxu_scan_dims,
         masked_seq(c, (scan_opts){true, true, true, false, TANH, SIGM, false, false}, NULL))
MXU_SCAN(b_gru_steps_grad_mxu, mxu_scan_dims,
         masked_grad(c, (scan_opts){true, true, true, false, TANH, SIGM, false, false}, false))

MXU_SCAN(b_lstm_seq_mxu, mxu_scan_dims,
         scan_seq(c, (scan_opts){false, true, true, false, TANH, SIGM, false, false}))
MXU_SCAN(b_lstm_nobias_mxu, mxu_scan_dims_small,
         scan_h(c, (scan_opts){false, false, false, true, TANH, SIGM, false, false}))
MXU_SCAN(b_lstm_any_mxu, mxu_scan_dims_small,
         scan_seq(c, (scan_opts){false, true, true, false, SIGM, TANH, false, false}))
MXU_SCAN(b_lstm_gelu_mxu, mxu_scan_dims_small,
         scan_seq_fn(c, (scan_opts){false, true, false, false, 0, 0, false, false},
                     gelu_hard_sigmoid))
MXU_SCAN(b_lstm_inference_mxu, mxu_scan_dims,
         scan_h(c, (scan_opts){false, true, true, true, TANH, SIGM, false, true}))
MXU_SCAN(b_lstm_grad_mxu, mxu_scan_dims,
         scan_grad(c, (scan_opts){false, true, true, false, TANH, SIGM, false, false}, true))
MXU_SCAN(b_lstm_grad_last_mxu, mxu_scan_dims_small,
         scan_grad(c, (scan_opts){false, false, true, true, TANH, SIGM, false, false}, false))
MXU_SCAN(b_lstm_wgrad_mxu, mxu_scan_dims, lstm_wgrad(c, true))
MXU_SCAN(b_gru_seq_mxu, mxu_scan_dims,
         scan_seq(c, (scan_opts){true, true, true, false, TANH, SIGM, false, false}))
MXU_SCAN(b_gru_nobias_mxu, mxu_scan_dims_small,
         scan_h(c, (scan_opts){true, false, false, true, TANH, SIGM, false, false}))
MXU_SCAN(b_gru_swish_mxu, mxu_scan_dims_small,
         scan_seq_fn(c, (scan_opts){true, true, true, false, 0, 0, false, false}, swish_softsign))
MXU_SCAN(b_gru_grad_mxu, mxu_scan_dims,
         scan_grad(c, (scan_opts){true, true, true, false, TANH, SIGM, false, false}, false))
MXU_SCAN(b_gru_grad_last_mxu, mxu_scan_dims_small,
         scan_grad(c, (scan_opts){true, false, false, true, TANH, SIGM, false, false}, false))

static sy_node b_gather_grad(ctx *c) {
    sy_shape ps = R(2, 5L, 3L);
    sy_node in[2] = {cin(c, R(3, 4L, 3L, 3L), -1, 1), iin(c, R(2, 4L, 3L), 0, 5)};
    return add_op(c, SY_OP_GATHER_GRAD, in, 2, NULL, &ps);
}
static sy_node loss_grad(ctx *c, sy_op op,
                         int kind) { /* kind 0: sparse labels, 1: targets, 2: probs + targets */
    sy_node dl = cin(c, R(1, 6L), -1, 1);
    sy_node x = kind == 2 ? cin(c, R(2, 6L, 5L), 0.05, 0.9) : cin(c, R(2, 6L, 5L), -3, 3);
    sy_node t = kind == 0 ? iin(c, R(1, 6L), 0, 5) : cin(c, R(2, 6L, 5L), 0, 1);
    sy_node in[3] = {dl, x, t};
    return add_op(c, op, in, 3, NULL, NULL);
}
static sy_node b_sparse_softmax_ce_grad(ctx *c) {
    return loss_grad(c, SY_OP_SPARSE_SOFTMAX_CE_GRAD, 0);
}
static sy_node b_softmax_ce_grad(ctx *c) {
    return loss_grad(c, SY_OP_SOFTMAX_CE_GRAD, 1);
}
static sy_node b_sigmoid_ce_grad(ctx *c) {
    return loss_grad(c, SY_OP_SIGMOID_CE_GRAD, 1);
}
static sy_node b_sparse_cat_ce_grad(ctx *c) {
    sy_node dl = cin(c, R(1, 6L), -1, 1), p = cin(c, R(2, 6L, 5L), 0.05, 0.9),
            l = iin(c, R(1, 6L), 0, 5);
    sy_node in[3] = {dl, p, l};
    return add_op(c, SY_OP_SPARSE_CATEGORICAL_CE_GRAD, in, 3, NULL, NULL);
}
static sy_node b_cat_ce_grad(ctx *c) {
    return loss_grad(c, SY_OP_CATEGORICAL_CE_GRAD, 2);
}
static sy_node b_binary_ce_grad(ctx *c) {
    return loss_grad(c, SY_OP_BINARY_CE_GRAD, 2);
}
static sy_node b_mse_grad(ctx *c) {
    return loss_grad(c, SY_OP_MSE_GRAD, 1);
}

/* ---- issue 17, losses and metrics: the other Keras losses (KERAS_LOSS), ranges clear of their
 * kinks ---- */
static sy_node kloss(ctx *c, sy_loss_fn fn, double plo, double phi, double tlo, double thi,
                     const sy_loss_params *p) {
    return sy_graph_loss(c->g, fn, var(c, R(2, 6L, 5L), plo, phi), cin(c, R(2, 6L, 5L), tlo, thi),
                         p);
}
static sy_node b_kl_mae(ctx *c) {
    return kloss(c, SY_LOSS_MAE, -2, 2, -2, 2, NULL);
}
static sy_node b_kl_mape(ctx *c) {
    return kloss(c, SY_LOSS_MAPE, -2, 2, 0.5, 2, NULL);
}
static sy_node b_kl_msle(ctx *c) {
    return kloss(c, SY_LOSS_MSLE, 0.1, 3, 0, 3, NULL);
}
static sy_node b_kl_huber(ctx *c) {
    sy_loss_params p = sy_loss_params_default();
    p.delta = 0.5;
    return kloss(c, SY_LOSS_HUBER, -2, 2, -2, 2, &p);
}
static sy_node b_kl_logcosh(ctx *c) {
    return kloss(c, SY_LOSS_LOG_COSH, -3, 3, -1, 1, NULL);
}
static sy_node b_kl_kld(ctx *c) {
    return kloss(c, SY_LOSS_KLD, 0.05, 0.9, 0, 1, NULL);
}
static sy_node b_kl_poisson(ctx *c) {
    return kloss(c, SY_LOSS_POISSON, 0.1, 3, 0, 3, NULL);
}
static sy_node b_kl_hinge(ctx *c) {
    return kloss(c, SY_LOSS_HINGE, -2, 2, -1, 1, NULL);
}
static sy_node b_kl_sq_hinge(ctx *c) {
    return kloss(c, SY_LOSS_SQUARED_HINGE, -2, 2, -1, 1, NULL);
}
static sy_node b_kl_cat_hinge(ctx *c) {
    return kloss(c, SY_LOSS_CATEGORICAL_HINGE, -2, 2, 0, 1, NULL);
}
static sy_node b_kl_cosine(ctx *c) {
    return kloss(c, SY_LOSS_COSINE_SIMILARITY, -2, 2, -1, 1, NULL);
}
static sy_node b_kl_bfocal(ctx *c) {
    return kloss(c, SY_LOSS_BINARY_FOCAL, 0.05, 0.9, 0, 1, NULL);
}
static sy_node b_kl_bfocal_logits(ctx *c) {
    sy_loss_params p = sy_loss_params_default();
    p.from_logits = p.apply_class_balancing = true;
    p.gamma = 1.5;
    return kloss(c, SY_LOSS_BINARY_FOCAL, -3, 3, 0, 1, &p);
}
static sy_node b_kl_cfocal(ctx *c) {
    return kloss(c, SY_LOSS_CATEGORICAL_FOCAL, 0.05, 0.9, 0, 1, NULL);
}
static sy_node b_kl_cfocal_logits(ctx *c) {
    sy_loss_params p = sy_loss_params_default();
    p.from_logits = true;
    return kloss(c, SY_LOSS_CATEGORICAL_FOCAL, -3, 3, 0, 1, &p);
}
static sy_node b_kl_grad(ctx *c) {
    sy_loss_params p = sy_loss_params_default();
    p.delta = 0.5;
    sy_node y = kloss(c, SY_LOSS_HUBER, -2, 2, -2, 2, &p);
    sy_node in[3] = {cin(c, R(1, 6L), -1, 1), graph_input(c->g, y, 0), graph_input(c->g, y, 1)};
    sy_attrs at = graph_node(c->g, y)->attr;
    return add_op(c, SY_OP_KERAS_LOSS_GRAD, in, 3, &at, NULL);
}

/* ---- the convolution family (issue 15) ---- */
static sy_conv2d_options conv_o(int s, sy_padding p, int dh, int dw, int groups) {
    return (sy_conv2d_options){{s, s}, p, {dh, dw}, groups};
}
static sy_node conv_ex(ctx *c, sy_shape xs, sy_shape ws, sy_conv2d_options o) {
    return sy_graph_conv2d_ex(c->g, var(c, xs, -1, 1), var(c, ws, -1, 1), &o);
}
static sy_node b_conv_dilated(ctx *c) {
    return conv_ex(c, R(4, 2L, 9L, 8L, 3L), R(4, 3L, 2L, 3L, 4L),
                   conv_o(1, SY_PADDING_VALID, 2, 3, 1));
}
static sy_node b_conv_dilated_same(ctx *c) {
    return conv_ex(c, R(4, 2L, 7L, 8L, 2L), R(4, 3L, 3L, 2L, 5L),
                   conv_o(1, SY_PADDING_SAME, 2, 2, 1));
}
static sy_node b_conv_groups(ctx *c) {
    return conv_ex(c, R(4, 2L, 6L, 7L, 6L), R(4, 3L, 3L, 2L, 9L),
                   conv_o(2, SY_PADDING_SAME, 1, 1, 3));
}
static sy_node b_depthwise(ctx *c) {
    return conv_ex(c, R(4, 2L, 7L, 8L, 5L), R(4, 3L, 3L, 1L, 5L),
                   conv_o(2, SY_PADDING_SAME, 1, 1, 5));
}
static sy_node b_depthwise_m3_dilated(ctx *c) {
    return conv_ex(c, R(4, 2L, 9L, 7L, 4L), R(4, 3L, 2L, 1L, 12L),
                   conv_o(1, SY_PADDING_SAME, 2, 2, 4));
}
static sy_node b_depthwise_valid_wide(ctx *c) {
    return conv_ex(c, R(4, 3L, 6L, 6L, 37L), R(4, 3L, 3L, 1L, 37L),
                   conv_o(1, SY_PADDING_VALID, 1, 1, 37));
}
static sy_node b_depthwise_bias_relu(ctx *c) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.act = SY_ACT_RELU;
    at.conv.stride[0] = at.conv.stride[1] = 2;
    at.conv.padding = SY_PAD_SAME;
    at.conv.groups = 6;
    sy_node in[3] = {var(c, R(4, 2L, 7L, 6L, 6L), -1, 1), var(c, R(4, 3L, 3L, 1L, 12L), -1, 1),
                     var(c, R(1, 12L), -1, 1)};
    return add_op(c, SY_OP_CONV2D, in, 3, &at, NULL);
}
/* conv2d_backprop_input as conv2d_transpose: differentiable in both inputs */
static sy_node b_conv_transpose(ctx *c) {
    sy_conv2d_options o = conv_o(2, SY_PADDING_SAME, 1, 1, 1);
    return sy_graph_conv2d_transpose(c->g, var(c, R(4, 2L, 3L, 4L, 5L), -1, 1),
                                     var(c, R(4, 3L, 3L, 2L, 5L), -1, 1), 6, 8, &o);
}
static sy_node b_conv_transpose_valid(ctx *c) {
    sy_conv2d_options o = conv_o(2, SY_PADDING_VALID, 1, 1, 1);
    return sy_graph_conv2d_transpose(c->g, var(c, R(4, 2L, 3L, 3L, 4L), -1, 1),
                                     var(c, R(4, 3L, 2L, 3L, 4L), -1, 1), 8, 7, &o);
}
/* the backprops of grouped, depthwise and dilated convs, forward on every backend */
static sy_node conv_bp_ex(ctx *c, bool input, sy_shape xs, sy_shape ws, sy_conv2d_options o) {
    sy_graph *g = c->g;
    sy_node x = cin(c, xs, -1, 1), w = cin(c, ws, -1, 1);
    sy_node y = sy_graph_conv2d_ex(g, x, w, &o);
    sy_node dy = cin(c, sy_graph_shape(g, y), -1, 1);
    sy_attrs at = graph_node(g, y)->attr;
    if (input) {
        sy_node in[2] = {dy, w};
        return add_op(c, SY_OP_CONV2D_BACKPROP_INPUT, in, 2, &at, &xs);
    }
    sy_node in[2] = {x, dy};
    return add_op(c, SY_OP_CONV2D_BACKPROP_FILTER, in, 2, &at, &ws);
}
static sy_node b_dw_bp_input(ctx *c) {
    return conv_bp_ex(c, true, R(4, 2L, 7L, 8L, 5L), R(4, 3L, 3L, 1L, 5L),
                      conv_o(2, SY_PADDING_SAME, 1, 1, 5));
}
static sy_node b_dw_bp_input_m2(ctx *c) {
    return conv_bp_ex(c, true, R(4, 2L, 9L, 7L, 4L), R(4, 3L, 2L, 1L, 8L),
                      conv_o(1, SY_PADDING_SAME, 2, 2, 4));
}
static sy_node b_dw_bp_filter(ctx *c) {
    return conv_bp_ex(c, false, R(4, 3L, 9L, 8L, 37L), R(4, 3L, 3L, 1L, 37L),
                      conv_o(2, SY_PADDING_SAME, 1, 1, 37));
}
static sy_node b_dw_bp_filter_m2(ctx *c) {
    return conv_bp_ex(c, false, R(4, 2L, 9L, 7L, 4L), R(4, 3L, 2L, 1L, 8L),
                      conv_o(1, SY_PADDING_VALID, 2, 1, 4));
}
static sy_node b_groups_bp_input(ctx *c) {
    return conv_bp_ex(c, true, R(4, 2L, 6L, 7L, 6L), R(4, 3L, 3L, 2L, 9L),
                      conv_o(2, SY_PADDING_SAME, 1, 1, 3));
}
static sy_node b_dilated_bp_filter(ctx *c) {
    return conv_bp_ex(c, false, R(4, 2L, 9L, 8L, 3L), R(4, 3L, 2L, 3L, 4L),
                      conv_o(1, SY_PADDING_SAME, 2, 3, 1));
}
static sy_node b_pad(ctx *c) {
    int64_t before[4] = {0, 1, 3, 0}, after[4] = {0, 2, 0, 1};
    return sy_graph_pad(c->g, var(c, R(4, 2L, 3L, 4L, 3L), -1, 1), before, after);
}
static sy_node b_upsample_nearest(ctx *c) {
    return sy_graph_upsample2d(c->g, var(c, R(4, 2L, 3L, 4L, 3L), -1, 1), 2, 3, false);
}
static sy_node b_upsample_bilinear(ctx *c) {
    return sy_graph_upsample2d(c->g, var(c, R(4, 2L, 3L, 4L, 3L), -1, 1), 3, 2, true);
}
static sy_node upsample_grad(ctx *c, bool bilinear) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.upsample.size[0] = 2;
    at.upsample.size[1] = 3;
    at.upsample.bilinear = bilinear;
    sy_shape xs = R(4, 2L, 3L, 4L, 5L);
    sy_node dy = cin(c, R(4, 2L, 6L, 12L, 5L), -1, 1);
    return add_op(c, SY_OP_UPSAMPLE2D_GRAD, &dy, 1, &at, &xs);
}
static sy_node b_upsample_grad(ctx *c) {
    return upsample_grad(c, false);
}
static sy_node b_upsample_grad_bilinear(ctx *c) {
    return upsample_grad(c, true);
}
static sy_node b_reduce_max(ctx *c) {
    int32_t axes[2] = {1, 2};
    return sy_graph_reduce_max(c->g, var(c, R(4, 2L, 3L, 4L, 5L), -1, 1), axes, 2, false);
}
static sy_node b_reduce_max_keepdims(ctx *c) {
    int32_t axes[1] = {0};
    return sy_graph_reduce_max(c->g, var(c, R(3, 4L, 3L, 5L), -1, 1), axes, 1, true);
}
/* ties: x after a relu, so whole groups of zeros share the gradient */
static sy_node b_reduce_max_grad_ties(ctx *c) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.reduce.axes = (1u << 1) | (1u << 2);
    sy_node x = sy_graph_relu(c->g, sy_graph_add(c->g, cin(c, R(4, 2L, 3L, 2L, 6L), -1, 1),
                                                 sy_graph_fill(c->g, c->dt, S(0), -0.6)));
    int32_t axes[2] = {1, 2};
    sy_node y = sy_graph_reduce_max(c->g, x, axes, 2, false);
    sy_node in[3] = {x, y, cin(c, R(2, 2L, 6L), -1, 1)};
    sy_shape xs = R(4, 2L, 3L, 2L, 6L);
    return add_op(c, SY_OP_REDUCE_MAX_GRAD, in, 3, &at, &xs);
}

/* A chain the fusion pass folds into one fused_eltwise op. */
static sy_node b_fused_chain(ctx *c) {
    sy_graph *g = c->g;
    sy_node x = var(c, R(3, 3L, 4L, 37L), -1, 1), y = var(c, R(3, 3L, 4L, 37L), -1, 1),
            b = var(c, R(1, 37L), -1, 1);
    sy_node s = sy_graph_fill(g, c->dt, S(0), 0.75);
    sy_node t = sy_graph_tanh(g, sy_graph_add(g, sy_graph_mul(g, x, y), b));
    sy_node u = sy_graph_sigmoid(g, sy_graph_sub(g, t, sy_graph_mul(g, s, x)));
    return sy_graph_div(g, sy_graph_exp(g, sy_graph_neg(g, u)),
                        sy_graph_add(g, sy_graph_relu(g, y), sy_graph_fill(g, c->dt, S(0), 1.5)));
}

/* issue 16, MXU numerics: shapes whose sums span several of the MXU's 128-term chunks, with odd
 * sizes and rows enough for the sim kernels to split them between two threads */
static sy_node b_matmul_mxu_chunks(ctx *c) {
    return sy_graph_matmul(c->g, var(c, R(2, 300L, 50L), -1, 1), var(c, R(2, 21L, 300L), -1, 1),
                           true, true);
}
static sy_node b_conv_mxu_chunks(ctx *c) { /* window 3 x 3 x 16 = 144 */
    return sy_graph_conv2d(c->g, var(c, R(4, 2L, 9L, 8L, 16L), -1, 1),
                           var(c, R(4, 3L, 3L, 16L, 13L), -1, 1), 2, 2, SY_PADDING_SAME);
}
static sy_node b_conv_bp_input_mxu_chunks(ctx *c) {
    return conv_backprop_o(c, true, 2, SY_PAD_SAME, 20, 150);
}
/* a 3 x 3 backprop-filter, stride 1, SAME, over x (n, h, w, ci) and dy (n, h, w, co) */
static sy_node bp_filter_3x3(ctx *c, int64_t n, int64_t h, int64_t w, int64_t ci, int64_t co) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.stride[0] = at.conv.stride[1] = 1;
    at.conv.padding = SY_PAD_SAME;
    sy_shape ws = R(4, 3L, 3L, ci, co);
    sy_node in[2] = {cin(c, R(4, n, h, w, ci), -1, 1), cin(c, R(4, n, h, w, co), -1, 1)};
    return add_op(c, SY_OP_CONV2D_BACKPROP_FILTER, in, 2, &at, &ws);
}
static sy_node b_conv_bp_filter_mxu_taps(ctx *c) { /* 675 pixels (the last chunk 35), window 3 x 3 x 1, 48 channels */
    return bp_filter_3x3(c, 3, 15, 15, 1, 48);
}
static sy_node b_conv_bp_filter_mxu_chunks(ctx *c) { /* 270 pixels, window 54 */
    return bp_filter_3x3(c, 3, 9, 10, 6, 7);
}

/* ---- the table ------------------------------------------------------------------ */

const row op_rows[] = {
    {"input", SY_OP_INPUT, b_input, FWD | GRAD},
    {"param", SY_OP_PARAM, b_param, FWD | GRAD},
    {"fill", SY_OP_FILL, b_fill, FWD | GRAD},
    {"matmul", SY_OP_MATMUL, b_matmul_nn, FWD | GRAD},
    {"matmul transpose_b", SY_OP_MATMUL, b_matmul_nt, FWD | GRAD},
    {"matmul transpose_a", SY_OP_MATMUL, b_matmul_tn, FWD | GRAD},
    {"matmul transpose_a transpose_b", SY_OP_MATMUL, b_matmul_tt, FWD | GRAD},
    {"matmul 67x131x45", SY_OP_MATMUL, b_matmul_big, FWD | GRAD},
    {"matmul + bias", SY_OP_MATMUL, b_matmul_bias, FWD},
    {"matmul + bias + relu", SY_OP_MATMUL, b_matmul_relu, FWD},
    {"matmul + bias + sigmoid", SY_OP_MATMUL, b_matmul_sigmoid, FWD},
    {"matmul + bias + tanh", SY_OP_MATMUL, b_matmul_tanh, FWD},
    {"matmul skinny 9x700x10 + bias + relu", SY_OP_MATMUL, b_matmul_skinny, FWD},
    {"matmul skinny 5x520x16 + bias", SY_OP_MATMUL, b_matmul_skinny_wide, FWD},
    {"matmul skinny transpose_a 300x520x10 + bias", SY_OP_MATMUL, b_matmul_skinny_ta, FWD},
    {"matmul skinny transpose_a 75x600x13 + bias + sigmoid", SY_OP_MATMUL, b_matmul_skinny_ta13, FWD},
    {"bias_add", SY_OP_BIAS_ADD, b_bias_add, FWD | GRAD},
    {"add broadcast", SY_OP_ADD, b_add, FWD | GRAD},
    {"add scalar", SY_OP_ADD, b_add_scalar, FWD | GRAD},
    {"sub", SY_OP_SUB, b_sub, FWD | GRAD},
    {"mul broadcast", SY_OP_MUL, b_mul, FWD | GRAD},
    {"div", SY_OP_DIV, b_div, FWD | GRAD},
    /* issue 15, keras.applications */
    {"mul squeeze-excite broadcast", SY_OP_MUL, b_mul_se, FWD | GRAD},
    {"sub broadcast on the last axis", SY_OP_SUB, b_sub_lastaxis, FWD | GRAD},
    {"broadcast_to squeeze-excite", SY_OP_BROADCAST_TO, b_broadcast_to_se, FWD | GRAD},
    {"neg", SY_OP_NEG, b_neg, FWD | GRAD},
    {"relu", SY_OP_RELU, b_relu, FWD | GRAD},
    {"sigmoid", SY_OP_SIGMOID, b_sigmoid, FWD | GRAD},
    {"tanh", SY_OP_TANH, b_tanh, FWD | GRAD},
    {"exp", SY_OP_EXP, b_exp, FWD | GRAD},
    {"log", SY_OP_LOG, b_log, FWD | GRAD},
    {"copy", SY_OP_COPY, b_copy, FWD | GRAD},
    /* issue 15, activations */
    {"activation leaky_relu", SY_OP_ACT, b_act_leaky, FWD | GRAD},
    {"activation relu max_value negative_slope threshold", SY_OP_ACT, b_act_relu_max_slope_thr,
     FWD | GRAD},
    {"activation relu negative threshold", SY_OP_ACT, b_act_relu_neg_thr, FWD | GRAD},
    {"activation relu6", SY_OP_ACT, b_act_relu6, FWD | GRAD},
    {"activation elu", SY_OP_ACT, b_act_elu, FWD | GRAD},
    {"activation elu alpha 0.4", SY_OP_ACT, b_act_elu_alpha, FWD | GRAD},
    {"activation selu", SY_OP_ACT, b_act_selu, FWD | GRAD},
    {"activation gelu", SY_OP_ACT, b_act_gelu, FWD | GRAD},
    {"activation swish", SY_OP_ACT, b_act_swish, FWD | GRAD},
    {"activation softplus", SY_OP_ACT, b_act_softplus, FWD | GRAD},
    {"activation softsign", SY_OP_ACT, b_act_softsign, FWD | GRAD},
    {"activation hard_sigmoid", SY_OP_ACT, b_act_hard_sigmoid, FWD | GRAD},
    {"activation abs", SY_OP_ACT, b_act_abs, FWD | GRAD},
    {"activation chain, fused", SY_OP_ACT, b_act_chain, FWD | GRAD | CHECK_FUSED},
    {"softmax", SY_OP_SOFTMAX, b_softmax, FWD | GRAD},
    {"softmax axis 1", SY_OP_SOFTMAX, b_softmax_axis1, FWD | GRAD},
    {"log_softmax", SY_OP_LOG_SOFTMAX, b_log_softmax, FWD | GRAD},
    {"reshape", SY_OP_RESHAPE, b_reshape, FWD | GRAD},
    {"transpose", SY_OP_TRANSPOSE, b_transpose, FWD | GRAD},
    {"concat", SY_OP_CONCAT, b_concat, FWD | GRAD},
    {"slice", SY_OP_SLICE, b_slice, FWD | GRAD},
    {"slice whole rows", SY_OP_SLICE, b_slice_rows, FWD | GRAD},
    {"slice middle axis", SY_OP_SLICE, b_slice_middle, FWD | GRAD},
    {"slice rank 1", SY_OP_SLICE, b_slice_1d, FWD | GRAD},
    {"broadcast_to", SY_OP_BROADCAST_TO, b_broadcast_to, FWD | GRAD},
    {"broadcast_to_scalar", SY_OP_BROADCAST_TO, b_broadcast_to_scalar,
     FWD | GRAD}, /* issue 15 speed */
    {"broadcast_to_inner", SY_OP_BROADCAST_TO, b_broadcast_to_inner, FWD | GRAD},
    {"conv2d valid", SY_OP_CONV2D, b_conv_valid, FWD | GRAD},
    {"conv2d same stride 2", SY_OP_CONV2D, b_conv_same_s2, FWD | GRAD},
    {"conv2d one input channel", SY_OP_CONV2D, b_conv_one_channel, FWD | GRAD},
    {"conv2d im2col path", SY_OP_CONV2D, b_conv_im2col, FWD | GRAD},
    {"conv2d 70 output channels", SY_OP_CONV2D, b_conv_wide, FWD | GRAD},
    {"conv2d 1x1", SY_OP_CONV2D, b_conv_pointwise, FWD | GRAD},
    {"conv2d + bias + relu", SY_OP_CONV2D, b_conv_bias_relu, FWD},
    {"conv2d + bias + tanh same", SY_OP_CONV2D, b_conv_bias_tanh_same, FWD},
    {"max_pool2d", SY_OP_MAX_POOL2D, b_maxpool, FWD | GRAD},
    {"max_pool2d same 3x3/2", SY_OP_MAX_POOL2D, b_maxpool_same, FWD | GRAD},
    {"avg_pool2d", SY_OP_AVG_POOL2D, b_avgpool, FWD | GRAD},
    {"avg_pool2d same 3x2/2x1", SY_OP_AVG_POOL2D, b_avgpool_same, FWD | GRAD},
    {"dropout", SY_OP_DROPOUT, b_dropout, FWD | GRAD},
    {"reduce_sum keepdims", SY_OP_REDUCE_SUM, b_reduce_sum, FWD | GRAD},
    {"reduce_sum last axis", SY_OP_REDUCE_SUM, b_reduce_sum_last, FWD | GRAD},
    {"reduce_mean", SY_OP_REDUCE_MEAN, b_reduce_mean, FWD | GRAD},
    {"gather", SY_OP_GATHER, b_gather, FWD | GRAD},
    {"sparse_softmax_cross_entropy", SY_OP_SPARSE_SOFTMAX_CE, b_sparse_softmax_ce, FWD | GRAD},
    {"softmax_cross_entropy", SY_OP_SOFTMAX_CE, b_softmax_ce, FWD | GRAD},
    {"sigmoid_cross_entropy", SY_OP_SIGMOID_CE, b_sigmoid_ce, FWD | GRAD},
    {"sparse_categorical_crossentropy", SY_OP_SPARSE_CATEGORICAL_CE, b_sparse_cat_ce, FWD | GRAD},
    {"categorical_crossentropy", SY_OP_CATEGORICAL_CE, b_cat_ce, FWD | GRAD},
    {"binary_crossentropy", SY_OP_BINARY_CE, b_binary_ce, FWD | GRAD},
    {"mean_squared_error", SY_OP_MSE, b_mse, FWD | GRAD},
    {"relu_grad", SY_OP_RELU_GRAD, b_relu_grad, FWD},
    {"sigmoid_grad", SY_OP_SIGMOID_GRAD, b_sigmoid_grad, FWD},
    {"tanh_grad", SY_OP_TANH_GRAD, b_tanh_grad, FWD},
    {"softmax_grad", SY_OP_SOFTMAX_GRAD, b_softmax_grad, FWD},
    {"log_softmax_grad", SY_OP_LOG_SOFTMAX_GRAD, b_log_softmax_grad, FWD},
    {"activation_grad", SY_OP_ACT_GRAD, b_act_grad, FWD}, /* issue 15, activations */
    {"slice_grad", SY_OP_SLICE_GRAD, b_slice_grad, FWD},
    {"conv2d_backprop_input", SY_OP_CONV2D_BACKPROP_INPUT, b_conv_bp_input, FWD},
    {"conv2d_backprop_input same stride 2", SY_OP_CONV2D_BACKPROP_INPUT, b_conv_bp_input_same, FWD},
    {"conv2d_backprop_input im2col 70 channels", SY_OP_CONV2D_BACKPROP_INPUT, b_conv_bp_input_wide,
     FWD},
    {"conv2d_backprop_filter im2col 70 channels", SY_OP_CONV2D_BACKPROP_FILTER,
     b_conv_bp_filter_wide, FWD},
    {"conv2d_backprop_filter direct 70 channels", SY_OP_CONV2D_BACKPROP_FILTER,
     b_conv_bp_filter_direct_wide, FWD},
    {"conv2d_backprop_filter", SY_OP_CONV2D_BACKPROP_FILTER, b_conv_bp_filter, FWD},
    {"conv2d_backprop_filter same stride 2", SY_OP_CONV2D_BACKPROP_FILTER, b_conv_bp_filter_same,
     FWD},
    /* issue 16, MXU numerics */
    {"matmul 50x300x21 MXU chunks", SY_OP_MATMUL, b_matmul_mxu_chunks, FWD},
    {"conv2d window 144 MXU chunks", SY_OP_CONV2D, b_conv_mxu_chunks, FWD},
    {"conv2d_backprop_input 150 channels MXU chunks", SY_OP_CONV2D_BACKPROP_INPUT,
     b_conv_bp_input_mxu_chunks, FWD},
    {"conv2d_backprop_filter 270 pixels MXU chunks", SY_OP_CONV2D_BACKPROP_FILTER,
     b_conv_bp_filter_mxu_chunks, FWD},
    /* a first layer's 9 taps: dy's rows paired in registers (mxu_pairs.c's sy_mxu_chunk_rows) */
    {"conv2d_backprop_filter 9 taps x 48 channels MXU rows", SY_OP_CONV2D_BACKPROP_FILTER,
     b_conv_bp_filter_mxu_taps, FWD},
    /* issue 16, MXU recurrent products: 13 x 11 x 150, 130 units; 7 x 3 x 100, 45 units */
    {"lstm_scan MXU 13x11x150 u130, mask", SY_OP_LSTM_SCAN, b_lstm_seq_mxu, FWD},
    {"lstm_scan MXU 7x3x100 u45, last, no bias", SY_OP_LSTM_SCAN, b_lstm_nobias_mxu, FWD},
    {"lstm_scan MXU 7x3x100 u45, sigmoid cell, mask", SY_OP_LSTM_SCAN, b_lstm_any_mxu, FWD},
    {"lstm_scan MXU 7x3x100 u45, gelu", SY_OP_LSTM_SCAN, b_lstm_gelu_mxu, FWD},
    {"lstm_scan MXU inference 13x11x150 u130, mask", SY_OP_LSTM_SCAN, b_lstm_inference_mxu, FWD},
    {"lstm_scan_grad MXU 13x11x150 u130, mask, dx", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad_mxu, FWD},
    {"lstm_scan_grad MXU 7x3x100 u45, last, no dx", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad_last_mxu,
     FWD},
    {"lstm_scan_wgrad MXU 13x11x150 u130, mask", SY_OP_LSTM_SCAN_WGRAD, b_lstm_wgrad_mxu, FWD},
    {"gru_scan MXU 13x11x150 u130, mask", SY_OP_GRU_SCAN, b_gru_seq_mxu, FWD},
    {"gru_scan MXU 7x3x100 u45, last, no bias", SY_OP_GRU_SCAN, b_gru_nobias_mxu, FWD},
    {"gru_scan MXU 7x3x100 u45, swish, mask", SY_OP_GRU_SCAN, b_gru_swish_mxu, FWD},
    {"gru_scan_grad MXU 13x11x150 u130, mask", SY_OP_GRU_SCAN_GRAD, b_gru_grad_mxu, FWD},
    {"gru_scan_grad MXU 7x3x100 u45, last, no bias", SY_OP_GRU_SCAN_GRAD, b_gru_grad_last_mxu, FWD},
    {"max_pool2d_grad", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad, FWD},
    {"max_pool2d_grad same", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad_same, FWD},
    {"avg_pool2d_grad", SY_OP_AVG_POOL2D_GRAD, b_avgpool_grad, FWD},
    {"avg_pool2d_grad same", SY_OP_AVG_POOL2D_GRAD, b_avgpool_grad_same, FWD},
    {"gather_grad", SY_OP_GATHER_GRAD, b_gather_grad, FWD},
    {"sparse_softmax_cross_entropy_grad", SY_OP_SPARSE_SOFTMAX_CE_GRAD, b_sparse_softmax_ce_grad,
     FWD},
    {"softmax_cross_entropy_grad", SY_OP_SOFTMAX_CE_GRAD, b_softmax_ce_grad, FWD},
    {"sigmoid_cross_entropy_grad", SY_OP_SIGMOID_CE_GRAD, b_sigmoid_ce_grad, FWD},
    {"sparse_categorical_crossentropy_grad", SY_OP_SPARSE_CATEGORICAL_CE_GRAD, b_sparse_cat_ce_grad,
     FWD},
    {"categorical_crossentropy_grad", SY_OP_CATEGORICAL_CE_GRAD, b_cat_ce_grad, FWD},
    {"binary_crossentropy_grad", SY_OP_BINARY_CE_GRAD, b_binary_ce_grad, FWD},
    {"mean_squared_error_grad", SY_OP_MSE_GRAD, b_mse_grad, FWD},
    {"max_pool2d 70 channels", SY_OP_MAX_POOL2D, b_maxpool_c70, FWD},
    {"avg_pool2d 70 channels", SY_OP_AVG_POOL2D, b_avgpool_c70, FWD},
    {"max_pool2d_grad ties", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad_ties, FWD},
    {"max_pool2d_grad ties same", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad_ties_same, FWD},
    {"max_pool2d_grad gaps 2x2/3", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad_gaps, FWD},
    {"avg_pool2d_grad gaps 2x2/3", SY_OP_AVG_POOL2D_GRAD, b_avgpool_grad_gaps, FWD},
    {"max_pool2d_grad 70 channels ties", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad_c70, FWD},
    {"max_pool2d_grad 70 channels same", SY_OP_MAX_POOL2D_GRAD, b_maxpool_grad_c70_same, FWD},
    {"avg_pool2d_grad 70 channels", SY_OP_AVG_POOL2D_GRAD, b_avgpool_grad_c70, FWD},
    {"avg_pool2d_grad 70 channels same", SY_OP_AVG_POOL2D_GRAD, b_avgpool_grad_c70_same, FWD},
    {"softmax 37 classes", SY_OP_SOFTMAX, b_softmax_37, FWD},
    {"log_softmax 100 classes", SY_OP_LOG_SOFTMAX, b_log_softmax_100, FWD},
    {"softmax axis 1 inner 70", SY_OP_SOFTMAX, b_softmax_inner70, FWD},
    {"log_softmax axis 0", SY_OP_LOG_SOFTMAX, b_log_softmax_axis0, FWD},
    {"sparse_softmax_cross_entropy 37 classes", SY_OP_SPARSE_SOFTMAX_CE, b_sparse_softmax_ce_37,
     FWD},
    {"sparse_softmax_cross_entropy_grad 37 classes", SY_OP_SPARSE_SOFTMAX_CE_GRAD,
     b_sparse_softmax_ce_grad_37, FWD},
    {"reverse", SY_OP_REVERSE, b_reverse, FWD | GRAD},
    {"reverse last axis", SY_OP_REVERSE, b_reverse_last, FWD | GRAD},
    /* issue 17, masking: the steps' mask */
    {"lstm_scan masked steps", SY_OP_LSTM_SCAN, b_lstm_steps, FWD | GRAD},
    {"lstm_scan masked steps, 13 x 4 x 10, dropout mask, last step", SY_OP_LSTM_SCAN,
     b_lstm_steps_big_last, FWD | GRAD},
    {"lstm_scan masked steps, gelu, hard_sigmoid", SY_OP_LSTM_SCAN, b_lstm_steps_gelu, FWD | GRAD},
    {"lstm_scan inference, masked steps, 13 x 4 x 10", SY_OP_LSTM_SCAN, b_lstm_steps_inference,
     FWD},
    {"gru_scan masked steps", SY_OP_GRU_SCAN, b_gru_steps, FWD | GRAD},
    {"gru_scan masked steps, 13 x 4 x 10, dropout mask, last step", SY_OP_GRU_SCAN,
     b_gru_steps_big_last, FWD | GRAD},
    {"gru_scan masked steps, swish, softsign, dropout mask", SY_OP_GRU_SCAN, b_gru_steps_swish,
     FWD | GRAD},
    {"lstm_scan_grad masked steps, 13 x 4 x 10, dropout mask, dx", SY_OP_LSTM_SCAN_GRAD,
     b_lstm_steps_grad, FWD},
    {"lstm_scan_grad masked steps, 13 x 4 x 10, last step", SY_OP_LSTM_SCAN_GRAD,
     b_lstm_steps_grad_last, FWD},
    {"gru_scan_grad masked steps, 13 x 4 x 10, dropout mask", SY_OP_GRU_SCAN_GRAD, b_gru_steps_grad,
     FWD},
    {"gru_scan_grad masked steps, 13 x 4 x 10, last step", SY_OP_GRU_SCAN_GRAD,
     b_gru_steps_grad_last, FWD},
    {"lstm_scan MXU 13x11x150 u130, masked steps", SY_OP_LSTM_SCAN, b_lstm_steps_mxu, FWD},
    {"lstm_scan_grad MXU 13x11x150 u130, masked steps, dx", SY_OP_LSTM_SCAN_GRAD,
     b_lstm_steps_grad_mxu, FWD},
    {"gru_scan MXU 13x11x150 u130, masked steps", SY_OP_GRU_SCAN, b_gru_steps_mxu, FWD},
    {"gru_scan_grad MXU 13x11x150 u130, masked steps", SY_OP_GRU_SCAN_GRAD, b_gru_steps_grad_mxu,
     FWD},
    {"lstm_scan packed sequence", SY_OP_LSTM_SCAN, b_lstm_seq, FWD},
    {"lstm_scan packed sequence, 13 x 4 x 10, 9 units, mask", SY_OP_LSTM_SCAN, b_lstm_seq_big, FWD},
    {"lstm_scan h every step, 13 x 4 x 10, 9 units, mask", SY_OP_LSTM_SCAN, b_lstm_big, FWD | GRAD},
    {"lstm_scan h every step", SY_OP_LSTM_SCAN, b_lstm, FWD | GRAD},
    {"lstm_scan h last step, mask, no bias", SY_OP_LSTM_SCAN, b_lstm_last_mask, FWD | GRAD},
    {"lstm_scan sigmoid cell, tanh gates", SY_OP_LSTM_SCAN, b_lstm_sigmoid_tanh, FWD | GRAD},
    {"lstm_scan linear cell, mask", SY_OP_LSTM_SCAN, b_lstm_linear, FWD | GRAD},
    {"lstm_scan inference", SY_OP_LSTM_SCAN, b_lstm_inference, FWD},
    {"lstm_scan inference, 13 x 4 x 10, mask, last step", SY_OP_LSTM_SCAN, b_lstm_inference_big,
     FWD},
    {"lstm_scan inference, linear cell, mask, no bias", SY_OP_LSTM_SCAN, b_lstm_inference_linear,
     FWD},
    {"gru_scan packed sequence, mask", SY_OP_GRU_SCAN, b_gru_seq, FWD},
    {"gru_scan h every step", SY_OP_GRU_SCAN, b_gru, FWD | GRAD},
    {"gru_scan h last step, mask, no bias", SY_OP_GRU_SCAN, b_gru_last_mask, FWD | GRAD},
    {"gru_scan sigmoid candidate, tanh gates, mask", SY_OP_GRU_SCAN, b_gru_sigmoid_tanh,
     FWD | GRAD},
    {"lstm_scan_grad", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad, FWD},
    /* issue 15, recurrent activations: the general cell */
    {"lstm_scan gelu cell, hard_sigmoid gates", SY_OP_LSTM_SCAN, b_lstm_gelu, FWD | GRAD},
    {"lstm_scan elu cell, sigmoid gates, 13 x 4 x 10, mask", SY_OP_LSTM_SCAN, b_lstm_elu_big,
     FWD | GRAD},
    {"lstm_scan exponential cell, relu6 gates, last step, mask, no bias", SY_OP_LSTM_SCAN,
     b_lstm_exp_last, FWD | GRAD},
    {"lstm_scan packed sequence, gelu, hard_sigmoid, 13 x 4 x 10", SY_OP_LSTM_SCAN, b_lstm_seq_gelu,
     FWD},
    {"lstm_scan inference, gelu, hard_sigmoid, 13 x 4 x 10", SY_OP_LSTM_SCAN, b_lstm_inference_gelu,
     FWD},
    {"gru_scan swish candidate, softsign gates", SY_OP_GRU_SCAN, b_gru_swish, FWD | GRAD},
    {"gru_scan softplus candidate, selu gates, mask, last step", SY_OP_GRU_SCAN,
     b_gru_softplus_mask_last, FWD | GRAD},
    {"gru_scan general tanh, linear gates, 13 x 4 x 10, no bias", SY_OP_GRU_SCAN,
     b_gru_tanh_linear_big, FWD | GRAD | MXU_GROWS},
    {"gru_scan packed sequence, swish, softsign, 13 x 4 x 10", SY_OP_GRU_SCAN, b_gru_seq_swish,
     FWD},
    {"lstm_scan_grad gelu, hard_sigmoid, 13 x 4 x 10", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad_gelu, FWD},
    {"gru_scan_grad swish, softsign, mask, last step", SY_OP_GRU_SCAN_GRAD, b_gru_grad_swish, FWD},
    {"lstm_scan_grad mask, last step, no dx", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad_mask_last, FWD},
    {"lstm_scan_grad 13 x 4 x 10, 9 units, mask", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad_big, FWD},
    {"lstm_scan_grad linear cell, last step, no bias", SY_OP_LSTM_SCAN_GRAD, b_lstm_grad_linear,
     FWD},
    {"lstm_scan_wgrad", SY_OP_LSTM_SCAN_WGRAD, b_lstm_wgrad, FWD},
    {"lstm_scan_wgrad 13 x 4 x 10, 9 units, mask", SY_OP_LSTM_SCAN_WGRAD, b_lstm_wgrad_big, FWD},
    {"gru_scan_grad", SY_OP_GRU_SCAN_GRAD, b_gru_grad, FWD},
    {"gru_scan_grad mask, last step", SY_OP_GRU_SCAN_GRAD, b_gru_grad_mask_last, FWD},
    {"fused_eltwise", SY_OP_FUSED_ELTWISE, b_fused_chain, FWD | GRAD | CHECK_FUSED},
    /* the convolution family (issue 15) */
    {"conv2d dilated (2, 3)", SY_OP_CONV2D, b_conv_dilated, FWD | GRAD},
    {"conv2d dilated same", SY_OP_CONV2D, b_conv_dilated_same, FWD | GRAD},
    {"conv2d 3 groups stride 2", SY_OP_CONV2D, b_conv_groups, FWD | GRAD},
    {"conv2d depthwise stride 2", SY_OP_CONV2D, b_depthwise, FWD | GRAD},
    {"conv2d depthwise x3 dilated", SY_OP_CONV2D, b_depthwise_m3_dilated, FWD | GRAD},
    {"conv2d depthwise 37 channels", SY_OP_CONV2D, b_depthwise_valid_wide, FWD | GRAD},
    {"conv2d depthwise x2 + bias + relu", SY_OP_CONV2D, b_depthwise_bias_relu, FWD},
    {"conv2d_backprop_input as conv2d_transpose", SY_OP_CONV2D_BACKPROP_INPUT, b_conv_transpose,
     FWD | GRAD},
    {"conv2d_transpose valid 3x2/2", SY_OP_CONV2D_BACKPROP_INPUT, b_conv_transpose_valid,
     FWD | GRAD},
    {"conv2d_backprop_input depthwise", SY_OP_CONV2D_BACKPROP_INPUT, b_dw_bp_input, FWD},
    {"conv2d_backprop_input depthwise x2 dilated", SY_OP_CONV2D_BACKPROP_INPUT, b_dw_bp_input_m2,
     FWD},
    {"conv2d_backprop_input 3 groups", SY_OP_CONV2D_BACKPROP_INPUT, b_groups_bp_input, FWD},
    {"conv2d_backprop_filter depthwise 37", SY_OP_CONV2D_BACKPROP_FILTER, b_dw_bp_filter, FWD},
    {"conv2d_backprop_filter depthwise x2 dilated", SY_OP_CONV2D_BACKPROP_FILTER, b_dw_bp_filter_m2,
     FWD},
    {"conv2d_backprop_filter dilated", SY_OP_CONV2D_BACKPROP_FILTER, b_dilated_bp_filter, FWD},
    {"pad", SY_OP_PAD, b_pad, FWD | GRAD},
    {"upsample2d nearest", SY_OP_UPSAMPLE2D, b_upsample_nearest, FWD | GRAD},
    {"upsample2d bilinear", SY_OP_UPSAMPLE2D, b_upsample_bilinear, FWD | GRAD},
    {"upsample2d_grad nearest", SY_OP_UPSAMPLE2D_GRAD, b_upsample_grad, FWD},
    {"upsample2d_grad bilinear", SY_OP_UPSAMPLE2D_GRAD, b_upsample_grad_bilinear, FWD},
    {"reduce_max", SY_OP_REDUCE_MAX, b_reduce_max, FWD | GRAD},
    {"reduce_max keepdims", SY_OP_REDUCE_MAX, b_reduce_max_keepdims, FWD | GRAD},
    {"reduce_max_grad ties", SY_OP_REDUCE_MAX_GRAD, b_reduce_max_grad_ties, FWD},
    /* optimizer updates: see check_optimizers() */
    /* normalization layers (moving_average: see check_moving_average()) */
    {"rsqrt", SY_OP_RSQRT, b_rsqrt, FWD | GRAD},
    /* issue 17, losses and metrics */
    {"keras_loss mean_absolute_error", SY_OP_KERAS_LOSS, b_kl_mae, FWD | GRAD},
    {"keras_loss mean_absolute_percentage_error", SY_OP_KERAS_LOSS, b_kl_mape, FWD | GRAD},
    {"keras_loss mean_squared_logarithmic_error", SY_OP_KERAS_LOSS, b_kl_msle, FWD | GRAD},
    {"keras_loss huber delta 0.5", SY_OP_KERAS_LOSS, b_kl_huber, FWD | GRAD},
    {"keras_loss log_cosh", SY_OP_KERAS_LOSS, b_kl_logcosh, FWD | GRAD},
    {"keras_loss kl_divergence", SY_OP_KERAS_LOSS, b_kl_kld, FWD | GRAD},
    {"keras_loss poisson", SY_OP_KERAS_LOSS, b_kl_poisson, FWD | GRAD},
    {"keras_loss hinge", SY_OP_KERAS_LOSS, b_kl_hinge, FWD | GRAD},
    {"keras_loss squared_hinge", SY_OP_KERAS_LOSS, b_kl_sq_hinge, FWD | GRAD},
    {"keras_loss categorical_hinge", SY_OP_KERAS_LOSS, b_kl_cat_hinge, FWD | GRAD},
    {"keras_loss cosine_similarity", SY_OP_KERAS_LOSS, b_kl_cosine, FWD | GRAD},
    {"keras_loss binary_focal_crossentropy", SY_OP_KERAS_LOSS, b_kl_bfocal, FWD | GRAD},
    {"keras_loss binary_focal_crossentropy logits balanced", SY_OP_KERAS_LOSS, b_kl_bfocal_logits,
     FWD | GRAD},
    {"keras_loss categorical_focal_crossentropy", SY_OP_KERAS_LOSS, b_kl_cfocal, FWD | GRAD},
    {"keras_loss categorical_focal_crossentropy logits", SY_OP_KERAS_LOSS, b_kl_cfocal_logits,
     FWD | GRAD},
    {"keras_loss_grad", SY_OP_KERAS_LOSS_GRAD, b_kl_grad, FWD},
    /* issue 21, conv -> pool fusion (op_rows_fused.c) */
    {"conv2d_pool max, relu after", SY_OP_CONV2D_POOL, op_b_conv_pool_max_relu, FWD | FUSED_TRAIN},
    {"conv2d_pool sigmoid, max same", SY_OP_CONV2D_POOL, op_b_conv_pool_sigmoid_same,
     FWD | GRAD | FUSED_TRAIN},
    {"conv2d_pool average 2x2/3", SY_OP_CONV2D_POOL, op_b_conv_pool_avg, FWD | GRAD | FUSED_TRAIN},
    {"pool_argmax", SY_OP_POOL_ARGMAX, op_b_conv_pool_max_relu, FUSED_TRAIN},
    {"conv2d_pool_backprop_filter im2col, tanh", SY_OP_CONV2D_POOL_BACKPROP_FILTER,
     op_b_conv_pool_im2col_tanh, FWD | GRAD | FUSED_TRAIN},
    {"conv2d_pool_bias_grad average, relu after", SY_OP_CONV2D_POOL_BIAS_GRAD,
     op_b_conv_pool_avg_relu, FWD | GRAD | FUSED_TRAIN},
    {"conv2d_pool_backprop_filter, Flatten -> Dense (dense_dy)", SY_OP_CONV2D_POOL_BACKPROP_FILTER,
     op_b_conv_pool_dense, FWD | GRAD | FUSED_TRAIN},
    {"conv2d_pool 64 channels, relu before (in registers)", SY_OP_CONV2D_POOL, op_b_conv_pool_registers,
     FWD | FUSED_TRAIN},
    {"matmul_bias_grad (a Dense layer's bias)", SY_OP_MATMUL_BIAS_GRAD, op_b_dense_bias, FUSED_TRAIN},
};
const int op_n_rows = (int)(sizeof op_rows / sizeof op_rows[0]);

sy_node op_inference_scan(ctx *c) {
    return scan_h(c, (scan_opts){false, true, false, true, TANH, SIGM, false, true});
}
