/*
 * op_rows_fused.c - the op harness's rows for the ops the compiler's
 * conv -> pool fusion makes (issue 21, docs/design/fusion.md). Nobody
 * builds those ops directly: each row builds the unfused chain
 *
 *   conv2d -> [bias_add] -> [activation] -> max|avg pool -> [relu]
 *
 * as a Keras layer stack does, and the plans the checks compile fuse it.
 * FWD compares inference plans (conv2d_pool alone) with the ref backend's
 * unfused graph; GRAD differentiates the row on the ref backend in float64
 * (through the ref kernels of conv2d_pool_backprop_filter) against finite
 * differences; FUSED_TRAIN compares the training plans' gradients, fused,
 * with the unfused graph's and checks that the plan runs the row's op
 * (test_ops.c).
 */
#include "op_harness.h"

#include <string.h>

typedef struct chain {
    int64_t n, h, w, c, o, k;
    sy_padding padding;
    bool bias;
    int act; /* SY_ACT_* before the pool */
    bool avg;
    int pk, ps;
    sy_padding pool_padding;
    bool post_relu;
} chain;

static sy_node conv_pool_chain(ctx *c, chain ch) {
    sy_graph *g = c->g;
    /* the input is not differentiated: a first layer, whose input gradient nobody needs */
    sy_node t = sy_graph_conv2d(g, op_cin(c, R(4, ch.n, ch.h, ch.w, ch.c), -1, 1),
                                op_var(c, R(4, ch.k, ch.k, ch.c, ch.o), -1, 1), 1, 1, ch.padding);
    if (ch.bias) t = sy_graph_bias_add(g, t, op_var(c, R(1, ch.o), -0.5, 0.5));
    if (ch.act == SY_ACT_RELU) t = sy_graph_relu(g, t);
    if (ch.act == SY_ACT_SIGMOID) t = sy_graph_sigmoid(g, t);
    if (ch.act == SY_ACT_TANH) t = sy_graph_tanh(g, t);
    t = ch.avg ? sy_graph_avg_pool2d(g, t, ch.pk, ch.pk, ch.ps, ch.ps, ch.pool_padding)
               : sy_graph_max_pool2d(g, t, ch.pk, ch.pk, ch.ps, ch.ps, ch.pool_padding);
    return ch.post_relu ? sy_graph_relu(g, t) : t;
}

/* the tutorial CNN's layers: the direct conv, max pool, relu after */
sy_node op_b_conv_pool_max_relu(ctx *c) {
    return conv_pool_chain(c, (chain){2, 9, 8, 3, 8, 3, SY_PADDING_VALID, true, 0, false, 2, 2,
                                      SY_PADDING_VALID, true});
}
/* a sigmoid before a 'same' max pool with partial windows */
sy_node op_b_conv_pool_sigmoid_same(ctx *c) {
    return conv_pool_chain(c, (chain){2, 7, 9, 2, 5, 3, SY_PADDING_SAME, true, SY_ACT_SIGMOID,
                                      false, 2, 2, SY_PADDING_SAME, false});
}
/* an average pool over a window with a gap after it, no bias */
sy_node op_b_conv_pool_avg(ctx *c) {
    return conv_pool_chain(c, (chain){2, 10, 9, 3, 6, 2, SY_PADDING_VALID, false, 0, true, 2, 3,
                                      SY_PADDING_VALID, false});
}
/* the im2col conv (a window of 72), tanh before */
sy_node op_b_conv_pool_im2col_tanh(ctx *c) {
    return conv_pool_chain(c, (chain){2, 8, 8, 8, 12, 3, SY_PADDING_VALID, true, SY_ACT_TANH, false,
                                      2, 2, SY_PADDING_VALID, false});
}
/* an average pool with a relu after it, whose gradient reads the pooled output */
sy_node op_b_conv_pool_avg_relu(ctx *c) {
    return conv_pool_chain(
        c, (chain){2, 9, 9, 2, 7, 3, SY_PADDING_SAME, true, 0, true, 3, 3, SY_PADDING_SAME, true});
}
/* the tutorial's layers, then Flatten -> Dense(5): the Dense layer's input gradient computed in the
 * filter gradient's kernel (dense_dy), never written */
sy_node op_b_conv_pool_dense(ctx *c) {
    sy_node t = conv_pool_chain(c, (chain){2, 9, 8, 3, 8, 3, SY_PADDING_VALID, true, 0, false, 2, 2,
                                           SY_PADDING_VALID, true});
    sy_shape s = sy_graph_shape(c->g, t);
    int64_t f = s.dims[1] * s.dims[2] * s.dims[3];
    t = sy_graph_reshape(c->g, t, sy_shape_of(2, s.dims[0], f));
    return sy_graph_matmul(c->g, t, op_var(c, R(2, f, 5L), -0.5, 0.5), false, false);
}
/* issue 21, matmul_bias_grad: a Dense layer (x w + b, x an input) whose bias gradient, the reduce_sum of its
 * output gradient, the kernel gradient's product x^T dy computes beside it */
sy_node op_b_dense_bias(ctx *c) {
    sy_node x = op_cin(c, R(2, 7L, 13L), -1, 1);
    return sy_graph_bias_add(c->g, sy_graph_matmul(c->g, x, op_var(c, R(2, 13L, 5L), -1, 1), false, false),
                             op_var(c, R(1, 5L), -1, 1));
}

/* conv.c's pool in registers (pool_tile, bf_pool_tile): 64 channels, a relu before, an odd conv output */
sy_node op_b_conv_pool_registers(ctx *c) {
    return conv_pool_chain(c, (chain){2, 10, 9, 1, 64, 3, SY_PADDING_VALID, true, SY_ACT_RELU, false, 2, 2,
                                      SY_PADDING_VALID, false});
}
