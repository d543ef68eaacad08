/*
 * ops_spatial.c - the ops the convolution family's layers add besides
 * conv2d's own (ops_nn.c): zero padding (ZeroPadding2D), upsampling
 * (UpSampling2D) and the max reduction (GlobalMaxPooling2D): builder, shape
 * inference and gradient rule of each.
 *
 * pad is slice's adjoint: its gradient is the slice of dy that x occupied,
 * and its kernels are slice_grad's (dy placed in zeros). reduce_max shares
 * its gradient equally among tied maxima, as TensorFlow's _MinOrMaxGrad
 * does (indicators / their count * dy), not the first maximum as max_pool2d
 * does: a channel that a relu zeroed everywhere spreads its gradient over
 * every pixel in tf.keras's GlobalMaxPooling2D.
 */
#include "graph_internal.h"

#include <string.h>

/* ---- pad ------------------------------------------------------------------------ */

sy_node sy_graph_pad(sy_graph *g, sy_node x, const int64_t *before, const int64_t *after) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    if (g->status != SY_OK || x < 0 || x >= sy_graph_node_count(g))
        return graph_add(g, SY_OP_PAD, &x, 1, &at, NULL);
    sy_shape out = sy_graph_shape(g, x);
    for (int i = 0; i < out.rank; i++) {
        if (before[i] < 0 || after[i] < 0) {
            char s[SY_SHAPE_STR_MAX];
            graph_fail(g, NULL, SY_ERR_INVALID_ARGUMENT,
                       "pad: axis %d of %s: pads (%lld, %lld) must not be negative", i,
                       sy_shape_format(&out, s, sizeof s), (long long)before[i],
                       (long long)after[i]);
            return SY_NONE;
        }
        at.slice.begin[i] = before[i];
        out.dims[i] += before[i] + after[i];
    }
    return graph_add(g, SY_OP_PAD, &x, 1, &at, &out);
}

sy_status infer_PAD(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x = graph_in_rec(g, n, 0);
    n->dtype = x->dtype;
    bool ok = n->shape.rank == x->shape.rank;
    for (int i = 0; ok && i < x->shape.rank; i++)
        ok = n->attr.slice.begin[i] >= 0 &&
             n->attr.slice.begin[i] + x->shape.dims[i] <= n->shape.dims[i];
    if (!ok) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "%s does not fit in the padded %s at its offsets",
                          sy_shape_format(&x->shape, a, sizeof a),
                          sy_shape_format(&n->shape, b, sizeof b));
    }
    return SY_OK;
}

sy_status grad_PAD(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    int64_t begin[SY_MAX_RANK];
    const sy_node_rec *n = graph_node(g, y);
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape;
    for (int i = 0; i < xs.rank; i++) begin[i] = n->attr.slice.begin[i];
    dx[0] = sy_graph_slice(g, dy, begin, xs.dims);
    return sy_graph_status(g);
}

/* ---- upsample2d ------------------------------------------------------------------- */

sy_node sy_graph_upsample2d(sy_graph *g, sy_node x, int size_h, int size_w, bool bilinear) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.upsample.size[0] = size_h;
    at.upsample.size[1] = size_w;
    at.upsample.bilinear = bilinear;
    return graph_add(g, SY_OP_UPSAMPLE2D, &x, 1, &at, NULL);
}

sy_status infer_UPSAMPLE2D(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    char s[SY_SHAPE_STR_MAX];
    if (x->rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s must be (batch, height, width, channels)",
                          sy_shape_format(x, s, sizeof s));
    if (n->attr.upsample.size[0] < 1 || n->attr.upsample.size[1] < 1)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "size (%d, %d) must be positive",
                          n->attr.upsample.size[0], n->attr.upsample.size[1]);
    n->shape = sy_shape_of(4, x->dims[0], x->dims[1] * n->attr.upsample.size[0],
                           x->dims[2] * n->attr.upsample.size[1], x->dims[3]);
    return SY_OK;
}

sy_status grad_UPSAMPLE2D(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_attrs at = graph_node(g, y)->attr;
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape;
    dx[0] = graph_add(g, SY_OP_UPSAMPLE2D_GRAD, &dy, 1, &at, &xs);
    return sy_graph_status(g);
}

sy_status infer_UPSAMPLE2D_GRAD(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    const sy_shape *dy = &graph_in_rec(g, n, 0)->shape, *x = &n->shape;
    bool ok = dy->rank == 4 && x->rank == 4 && dy->dims[0] == x->dims[0] &&
              dy->dims[1] == x->dims[1] * n->attr.upsample.size[0] &&
              dy->dims[2] == x->dims[2] * n->attr.upsample.size[1] && dy->dims[3] == x->dims[3];
    if (!ok) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "gradient %s is not %s upsampled by (%d, %d)",
                          sy_shape_format(dy, a, sizeof a), sy_shape_format(x, b, sizeof b),
                          n->attr.upsample.size[0], n->attr.upsample.size[1]);
    }
    n->dtype = graph_in_rec(g, n, 0)->dtype;
    return SY_OK;
}

/* ---- reduce_max ---------------------------------------------------------------------- */

sy_node sy_graph_reduce_max(sy_graph *g, sy_node x, const int32_t *axes, int n_axes,
                            bool keepdims) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.reduce.keepdims = keepdims;
    int rank = x >= 0 && x < sy_graph_node_count(g) ? sy_graph_shape(g, x).rank : 0;
    if (n_axes == 0) at.reduce.axes = rank ? (1u << rank) - 1 : 0;
    for (int i = 0; i < n_axes; i++) {
        int a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= rank) {
            sy_shape s = sy_graph_shape(g, x);
            char buf[SY_SHAPE_STR_MAX];
            graph_fail(g, NULL, SY_ERR_SHAPE, "reduce_max: axis %d is out of range for %s", axes[i],
                       sy_shape_format(&s, buf, sizeof buf));
            return SY_NONE;
        }
        at.reduce.axes |= 1u << a;
    }
    return graph_add(g, SY_OP_REDUCE_MAX, &x, 1, &at, NULL);
}

sy_status infer_REDUCE_MAX(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    n->shape.rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!(n->attr.reduce.axes & (1u << i)))
            n->shape.dims[n->shape.rank++] = x->dims[i];
        else if (n->attr.reduce.keepdims)
            n->shape.dims[n->shape.rank++] = 1;
        else if (x->dims[i] == 0)
            return graph_fail(g, n, SY_ERR_SHAPE, "the maximum over an empty axis %d is undefined",
                              i);
    }
    return SY_OK;
}

sy_status grad_REDUCE_MAX(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_attrs at = graph_node(g, y)->attr;
    sy_node x = graph_input(g, y, 0), in[3] = {x, y, dy};
    sy_shape xs = graph_node(g, x)->shape;
    dx[0] = graph_add(g, SY_OP_REDUCE_MAX_GRAD, in, 3, &at, &xs);
    return sy_graph_status(g);
}

sy_status infer_REDUCE_MAX_GRAD(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 3);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *y = &graph_in_rec(g, n, 1)->shape,
                   *dy = &graph_in_rec(g, n, 2)->shape;
    int64_t kept = 1;
    for (int i = 0; i < x->rank; i++)
        if (!(n->attr.reduce.axes & (1u << i))) kept *= x->dims[i];
    if (!sy_shape_equal(y, dy) || sy_shape_count(y) != kept || !sy_shape_equal(&n->shape, x))
        return graph_fail(g, n, SY_ERR_SHAPE,
                          "the maximum, its gradient and the input do not agree in shape");
    return SY_OK;
}
