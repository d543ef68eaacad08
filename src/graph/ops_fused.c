/*
 * ops_fused.c - shape inference of the ops the compiler's fusion pass makes
 * out of a convolution and the pooling after it (issue 21,
 * docs/design/fusion.md). Nobody builds them with the graph API: fusion
 * (compiler/fusion.c) rewrites, after autodiff,
 *
 *   conv2d -> bias_add -> [relu|sigmoid|tanh] -> max|avg_pool2d -> [relu]
 *
 * and its gradient ops into
 *
 *   conv2d_pool (x, w [, bias])               the pooled output only
 *   pool_argmax (conv2d_pool)                 where each maximum was: a byte per output
 *   conv2d_pool_backprop_filter (x, dy [, y] [, argmax])   d kernel, from the pooled gradient
 *     or, dense_dy, (x, dz, w [, y] [, argmax]): the pooled gradient is dz w^T, a Dense
 *     layer's input gradient after a Flatten, never written (the kernel computes its rows)
 *   conv2d_pool_bias_grad (that)              d bias
 *
 * and, beside them, a Dense layer's bias gradient (the reduce_sum of its output gradient) as a
 * side output of its kernel gradient's product x^T dy:
 *
 *   matmul_bias_grad (matmul a^T b)            b's column sums
 *
 * pool_argmax and the *_bias_grad ops are side outputs (SY_OPF_SIDE): the
 * kernel of their input writes them, so that the conv's full-size output
 * and its full-size gradient never exist. attr.conv holds the conv's
 * attributes and the pool's (pool_*). The windows never overlap (stride >=
 * size), so each conv output belongs to at most one window, and a window
 * has at most 255 places, so a byte names one (255: none).
 *
 * None of them has a gradient rule: fusion runs after autodiff.
 */
#include "graph_internal.h"

/* The pool over the conv's output of x by w (kernel shape). */
static sy_status pooled_shape(sy_graph *g, sy_node_rec *n, const sy_shape *x, const sy_shape *w,
                              sy_shape *out) {
    const sy_attrs *a = &n->attr;
    if (sy_conv_groups(a) != 1 || sy_conv_dilation(a, 0) != 1 || sy_conv_dilation(a, 1) != 1)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT,
                          "fuses only undilated, ungrouped convolutions");
    if (a->conv.pool_stride[0] < a->conv.pool_ksize[0] ||
        a->conv.pool_stride[1] < a->conv.pool_ksize[1] ||
        (int64_t)a->conv.pool_ksize[0] * a->conv.pool_ksize[1] > 255)
        return graph_fail(
            g, n, SY_ERR_INVALID_ARGUMENT,
            "pool %dx%d with strides (%d, %d): fused pools' windows must not overlap and hold at "
            "most 255 places",
            a->conv.pool_ksize[0], a->conv.pool_ksize[1], a->conv.pool_stride[0],
            a->conv.pool_stride[1]);
    if (a->conv.act > SY_ACT_TANH ||
        (a->conv.post_act != SY_ACT_NONE && a->conv.post_act != SY_ACT_RELU))
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT,
                          "activations %d before and %d after the pool", a->conv.act,
                          a->conv.post_act);
    sy_shape conv;
    sy_status st = graph_conv_out_shape(g, n, x, w, &conv);
    return st ? st
              : graph_pool_out_shape(g, n, &conv, a->conv.pool_ksize, a->conv.pool_stride,
                                     a->conv.pool_padding, out);
}

sy_status infer_CONV2D_POOL(sy_graph *g, sy_node_rec *n) {
    sy_status st = infer_CONV2D(g, n); /* the conv's own checks (ranks, channels, bias) */
    return st ? st
              : pooled_shape(g, n, &graph_in_rec(g, n, 0)->shape, &graph_in_rec(g, n, 1)->shape,
                             &n->shape);
}

sy_status infer_POOL_ARGMAX(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *y = graph_in_rec(g, n, 0);
    if (y->op != SY_OP_CONV2D_POOL || y->attr.conv.pool_avg)
        return graph_fail(g, n, SY_ERR_INTERNAL,
                          "is a side output of a max-pooling conv2d_pool, not of %s",
                          sy_op_name(y->op));
    n->shape = y->shape;
    n->dtype = SY_U8;
    return SY_OK;
}

/* (x, dy [, y] [, argmax]) -> dw, its shape preset: dy the pooled output's shape, y (where
 * sy_conv_pool_reads_y) too, argmax (max pooling) too, as uint8. dense_dy: dy is given as dz (N, U)
 * and w (F, U), dy = dz w^T with F the pooled output's PH * PW * O, read in its row-major order (a
 * flattened pool feeding a Dense layer) */
sy_status infer_CONV2D_POOL_BACKPROP_FILTER(sy_graph *g, sy_node_rec *n) {
    bool y = sy_conv_pool_reads_y(&n->attr), arg = !n->attr.conv.pool_avg;
    int d = n->attr.conv.dense_dy != 0;
    if (n->n_in != 2 + d + y + arg)
        return graph_fail(g, n, SY_ERR_INTERNAL, "takes %d inputs, got %d", 2 + d + y + arg, n->n_in);
    sy_status st = require_float_inputs(g, n, 2 + d + y);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    if (x->rank != 4 || n->shape.rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "expects a rank-4 input and kernel");
    sy_shape expect;
    if ((st = pooled_shape(g, n, x, &n->shape, &expect))) return st;
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX], e[SY_SHAPE_STR_MAX];
    if (d) {
        const sy_shape *dz = &graph_in_rec(g, n, 1)->shape, *w = &graph_in_rec(g, n, 2)->shape;
        int64_t f = expect.dims[1] * expect.dims[2] * expect.dims[3];
        if (dz->rank != 2 || w->rank != 2 || dz->dims[0] != expect.dims[0] || w->dims[0] != f ||
            w->dims[1] != dz->dims[1])
            return graph_fail(g, n, SY_ERR_SHAPE, "dz %s and w %s do not give the pooled output's %s as dz w^T",
                              sy_shape_format(dz, a, sizeof a), sy_shape_format(w, b, sizeof b),
                              sy_shape_format(&expect, e, sizeof e));
    }
    for (int j = 1 + 2 * d; j < n->n_in; j++) {
        const sy_node_rec *in = graph_in_rec(g, n, j);
        bool bytes = arg && j == n->n_in - 1;
        if (!sy_shape_equal(&in->shape, &expect) || (bytes && in->dtype != SY_U8)) {
            return graph_fail(g, n, SY_ERR_SHAPE, "input %d %s %s is not the pooled output's %s%s",
                              j, sy_dtype_name(in->dtype), sy_shape_format(&in->shape, a, sizeof a),
                              sy_shape_format(&expect, b, sizeof b), bytes ? " in uint8" : "");
        }
    }
    return SY_OK;
}

/* (matmul a^T b) -> b's column sums: a Dense layer's bias gradient beside its kernel's, x^T dy */
sy_status infer_MATMUL_BIAS_GRAD(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *m = graph_in_rec(g, n, 0);
    if (m->op != SY_OP_MATMUL || !m->attr.matmul.ta || m->attr.matmul.tb || m->n_in != 2)
        return graph_fail(g, n, SY_ERR_INTERNAL, "is a side output of a matmul a^T b, not of %s", sy_op_name(m->op));
    n->shape = sy_shape_of(1, m->shape.dims[1]);
    n->dtype = m->dtype;
    return SY_OK;
}

sy_status infer_CONV2D_POOL_BIAS_GRAD(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *f = graph_in_rec(g, n, 0);
    if (f->op != SY_OP_CONV2D_POOL_BACKPROP_FILTER)
        return graph_fail(g, n, SY_ERR_INTERNAL,
                          "is a side output of conv2d_pool_backprop_filter, not of %s",
                          sy_op_name(f->op));
    n->shape = sy_shape_of(1, f->shape.dims[3]);
    n->dtype = f->dtype;
    return SY_OK;
}
