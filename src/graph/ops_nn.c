/*
 * ops_nn.c - convolution, pooling, dropout, the losses and the optimizer
 * updates: builder, shape inference and gradient rule of each.
 *
 * Losses follow tf.keras 2.15 (docs/design/keras-semantics.md): one value
 * per example with the last axis reduced; from probabilities they clip to
 * [1e-7, 1 - 1e-7]; and when the probabilities are the direct output of a
 * softmax (sigmoid for binary) the loss is computed from that op's logits,
 * as tf.keras does through `_keras_logits` and its op-type check. That last
 * rule is what lets the Fashion-MNIST tutorial, which feeds raw 0-255 pixels
 * into a softmax classifier, train at all: its softmax saturates at once and
 * clipped probabilities have no gradient.
 */
#include "graph_internal.h"

#include <string.h>

/* ---- conv2d ------------------------------------------------------------------------ */

sy_node sy_graph_conv2d(sy_graph *g, sy_node x, sy_node w, int stride_h, int stride_w, sy_padding padding) {
    sy_conv2d_options o = {{stride_h, stride_w}, padding, {1, 1}, 1};
    return sy_graph_conv2d_ex(g, x, w, &o);
}

static sy_attrs conv_attrs(const sy_conv2d_options *o) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.stride[0] = o->stride[0];
    at.conv.stride[1] = o->stride[1];
    at.conv.padding = o->padding;
    at.conv.dilation[0] = o->dilation[0];
    at.conv.dilation[1] = o->dilation[1];
    at.conv.groups = o->groups;
    return at;
}

sy_node sy_graph_conv2d_ex(sy_graph *g, sy_node x, sy_node w, const sy_conv2d_options *o) {
    sy_attrs at = conv_attrs(o);
    sy_node in[2] = {x, w};
    return graph_add(g, SY_OP_CONV2D, in, 2, &at, NULL);
}

sy_node sy_graph_conv2d_transpose(sy_graph *g, sy_node x, sy_node w, int64_t out_h, int64_t out_w,
                                  const sy_conv2d_options *o) {
    sy_attrs at = conv_attrs(o);
    sy_node in[2] = {x, w};
    bool ok = x >= 0 && x < sy_graph_node_count(g) && w >= 0 && w < sy_graph_node_count(g);
    sy_shape xs = ok ? sy_graph_shape(g, x) : sy_shape_of(0), ws = ok ? sy_graph_shape(g, w) : sy_shape_of(0);
    sy_shape out = sy_shape_of(4, xs.rank == 4 ? xs.dims[0] : 0, out_h, out_w,
                               ws.rank == 4 ? ws.dims[2] * (o->groups > 1 ? o->groups : 1) : 0);
    return graph_add(g, SY_OP_CONV2D_BACKPROP_INPUT, in, 2, &at, &out);
}

static sy_status check_window(sy_graph *g, sy_node_rec *n, const int32_t *stride, int padding) {
    if (stride[0] < 1 || stride[1] < 1)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "strides (%d, %d) must be positive", stride[0], stride[1]);
    if (padding != SY_PAD_VALID && padding != SY_PAD_SAME)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "padding %d is neither valid (0) nor same (1)", padding);
    return SY_OK;
}

/* Output (N, OH, OW, O) of a window op over x (N, H, W, C); an error if the
 * window (kh x kw, the extent after dilation) does not fit (valid padding
 * larger than the input). */
static sy_status window_out(sy_graph *g, sy_node_rec *n, const sy_shape *x, int64_t kh, int64_t kw, int64_t o,
                            const int32_t *stride, int padding, sy_shape *out) {
    int64_t oh, ow, p;
    sy_conv_out(x->dims[1], kh, stride[0], padding, &oh, &p);
    sy_conv_out(x->dims[2], kw, stride[1], padding, &ow, &p);
    if (oh < 1 || ow < 1) {
        char s[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "a %lldx%lld window with valid padding does not fit input %s",
                          (long long)kh, (long long)kw, sy_shape_format(x, s, sizeof s));
    }
    *out = sy_shape_of(4, x->dims[0], oh, ow, o);
    return SY_OK;
}

/* Dilation and groups: positive (0 is read as 1), and the groups divide
 * the input channels c and the filters o. */
static sy_status check_conv_attrs(sy_graph *g, sy_node_rec *n, int64_t c, int64_t o) {
    const sy_attrs *a = &n->attr;
    if (a->conv.dilation[0] < 0 || a->conv.dilation[1] < 0 || a->conv.groups < 0)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "dilation (%d, %d) and groups %d must be positive",
                          a->conv.dilation[0], a->conv.dilation[1], a->conv.groups);
    int64_t groups = sy_conv_groups(a);
    if (c % groups || o % groups)
        return graph_fail(g, n, SY_ERR_SHAPE, "%lld input channels and %lld filters must both be multiples of groups %lld",
                          (long long)c, (long long)o, (long long)groups);
    return SY_OK;
}

/* The conv's output for input x and kernel w (both rank 4), checked. */
sy_status graph_conv_out_shape(sy_graph *g, sy_node_rec *n, const sy_shape *x, const sy_shape *w,
                               sy_shape *out) {
    char sx[SY_SHAPE_STR_MAX], sw[SY_SHAPE_STR_MAX];
    sy_status st = check_conv_attrs(g, n, x->dims[3], w->dims[3]);
    if (st) return st;
    int64_t groups = sy_conv_groups(&n->attr);
    if (w->dims[2] * groups != x->dims[3]) {
        if (groups == 1)
            return graph_fail(g, n, SY_ERR_SHAPE, "input %s has %lld channels but kernel %s expects %lld",
                              sy_shape_format(x, sx, sizeof sx), (long long)x->dims[3],
                              sy_shape_format(w, sw, sizeof sw), (long long)w->dims[2]);
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s has %lld channels but kernel %s in %lld groups expects %lld",
                          sy_shape_format(x, sx, sizeof sx), (long long)x->dims[3], sy_shape_format(w, sw, sizeof sw),
                          (long long)groups, (long long)(w->dims[2] * groups));
    }
    if ((st = check_window(g, n, n->attr.conv.stride, n->attr.conv.padding))) return st;
    return window_out(g, n, x, sy_dilated(w->dims[0], sy_conv_dilation(&n->attr, 0)),
                      sy_dilated(w->dims[1], sy_conv_dilation(&n->attr, 1)), w->dims[3], n->attr.conv.stride,
                      n->attr.conv.padding, out);
}

sy_status infer_CONV2D(sy_graph *g, sy_node_rec *n) {
    if (n->n_in < 2 || n->n_in > 3) return graph_fail(g, n, SY_ERR_INTERNAL, "takes 2 or 3 inputs, got %d", n->n_in);
    sy_status st = require_float_inputs(g, n, n->n_in);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    char sx[SY_SHAPE_STR_MAX], sw[SY_SHAPE_STR_MAX];
    if (x->rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s must be (batch, height, width, channels)",
                          sy_shape_format(x, sx, sizeof sx));
    if (w->rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "kernel %s must be (height, width, in_channels, out_channels)",
                          sy_shape_format(w, sw, sizeof sw));
    if (n->n_in == 3) {
        const sy_shape *b = &graph_in_rec(g, n, 2)->shape;
        if (b->rank != 1 || b->dims[0] != w->dims[3])
            return graph_fail(g, n, SY_ERR_SHAPE, "bias %s does not match %lld filters", sy_shape_format(b, sx, sizeof sx),
                              (long long)w->dims[3]);
    }
    return graph_conv_out_shape(g, n, x, w, &n->shape);
}

sy_status grad_CONV2D(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_node_rec *n = graph_node(g, y);
    if (n->n_in != 2 || n->attr.conv.act)
        return graph_fail(g, n, SY_ERR_INTERNAL, "a fused conv2d has no gradient rule (fusion runs after autodiff)");
    sy_attrs at = n->attr;
    sy_node x = graph_input(g, y, 0), w = graph_input(g, y, 1);
    sy_shape xs = graph_node(g, x)->shape, ws = graph_node(g, w)->shape;
    if (need[0]) {
        sy_node in[2] = {dy, w};
        dx[0] = graph_add(g, SY_OP_CONV2D_BACKPROP_INPUT, in, 2, &at, &xs);
    }
    if (need[1]) {
        sy_node in[2] = {x, dy};
        dx[1] = graph_add(g, SY_OP_CONV2D_BACKPROP_FILTER, in, 2, &at, &ws);
    }
    return sy_graph_status(g);
}

/* The preset output shape must be what the forward conv would consume. */
static sy_status check_backprop(sy_graph *g, sy_node_rec *n, const sy_shape *x, const sy_shape *w, const sy_shape *dy) {
    sy_shape expect;
    sy_status st = graph_conv_out_shape(g, n, x, w, &expect);
    if (st) return st;
    if (!sy_shape_equal(&expect, dy)) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "gradient %s does not match the convolution's output %s",
                          sy_shape_format(dy, a, sizeof a), sy_shape_format(&expect, b, sizeof b));
    }
    return SY_OK;
}

sy_status infer_CONV2D_BACKPROP_INPUT(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    if (n->shape.rank != 4 || graph_in_rec(g, n, 1)->shape.rank != 4 || graph_in_rec(g, n, 0)->shape.rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "expects rank-4 input, kernel and gradient");
    return check_backprop(g, n, &n->shape, &graph_in_rec(g, n, 1)->shape, &graph_in_rec(g, n, 0)->shape);
}

/* conv2d_backprop_input is also conv2d_transpose (Conv2DTranspose), so it
 * has a gradient: linear in its first input, whose adjoint is the forward
 * conv, and in the kernel, where it is the filter gradient of a conv over
 * dY with the first input as the output's gradient. */
sy_status grad_CONV2D_BACKPROP_INPUT(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_attrs at = graph_node(g, y)->attr;
    sy_node d = graph_input(g, y, 0), w = graph_input(g, y, 1);
    sy_shape ws = graph_node(g, w)->shape;
    if (need[0]) {
        sy_node in[2] = {dy, w};
        dx[0] = graph_add(g, SY_OP_CONV2D, in, 2, &at, NULL);
    }
    if (need[1]) {
        sy_node in[2] = {dy, d};
        dx[1] = graph_add(g, SY_OP_CONV2D_BACKPROP_FILTER, in, 2, &at, &ws);
    }
    return sy_graph_status(g);
}

sy_status infer_CONV2D_BACKPROP_FILTER(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    if (n->shape.rank != 4 || graph_in_rec(g, n, 1)->shape.rank != 4 || graph_in_rec(g, n, 0)->shape.rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "expects rank-4 input, kernel and gradient");
    return check_backprop(g, n, &graph_in_rec(g, n, 0)->shape, &n->shape, &graph_in_rec(g, n, 1)->shape);
}

/* ---- pooling ------------------------------------------------------------------------ */

static sy_node pool(sy_graph *g, sy_op op, sy_node x, int ph, int pw, int sh, int sw, sy_padding padding) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.pool.ksize[0] = ph;
    at.pool.ksize[1] = pw;
    at.pool.stride[0] = sh;
    at.pool.stride[1] = sw;
    at.pool.padding = padding;
    return graph_add(g, op, &x, 1, &at, NULL);
}

sy_node sy_graph_max_pool2d(sy_graph *g, sy_node x, int ph, int pw, int sh, int sw, sy_padding padding) {
    return pool(g, SY_OP_MAX_POOL2D, x, ph, pw, sh, sw, padding);
}
sy_node sy_graph_avg_pool2d(sy_graph *g, sy_node x, int ph, int pw, int sh, int sw, sy_padding padding) {
    return pool(g, SY_OP_AVG_POOL2D, x, ph, pw, sh, sw, padding);
}

sy_status graph_pool_out_shape(sy_graph *g, sy_node_rec *n, const sy_shape *x, const int32_t *ksize,
                               const int32_t *stride, int padding, sy_shape *out) {
    char s[SY_SHAPE_STR_MAX];
    if (x->rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s must be (batch, height, width, channels)",
                          sy_shape_format(x, s, sizeof s));
    if (ksize[0] < 1 || ksize[1] < 1)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "pool size (%d, %d) must be positive",
                          ksize[0], ksize[1]);
    sy_status st = check_window(g, n, stride, padding);
    return st ? st : window_out(g, n, x, ksize[0], ksize[1], x->dims[3], stride, padding, out);
}

static sy_status infer_pool(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    return graph_pool_out_shape(g, n, &graph_in_rec(g, n, 0)->shape, n->attr.pool.ksize,
                                n->attr.pool.stride, n->attr.pool.padding, &n->shape);
}
sy_status infer_MAX_POOL2D(sy_graph *g, sy_node_rec *n) { return infer_pool(g, n); }
sy_status infer_AVG_POOL2D(sy_graph *g, sy_node_rec *n) { return infer_pool(g, n); }

sy_status grad_MAX_POOL2D(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_attrs at = graph_node(g, y)->attr;
    sy_node in[3] = {graph_input(g, y, 0), y, dy};
    dx[0] = graph_add(g, SY_OP_MAX_POOL2D_GRAD, in, 3, &at, NULL);
    return sy_graph_status(g);
}

sy_status grad_AVG_POOL2D(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_attrs at = graph_node(g, y)->attr;
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape;
    dx[0] = graph_add(g, SY_OP_AVG_POOL2D_GRAD, &dy, 1, &at, &xs);
    return sy_graph_status(g);
}

sy_status infer_MAX_POOL2D_GRAD(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 3);
    if (st) return st;
    n->shape = graph_in_rec(g, n, 0)->shape;
    if (!sy_shape_equal(&graph_in_rec(g, n, 1)->shape, &graph_in_rec(g, n, 2)->shape))
        return graph_fail(g, n, SY_ERR_SHAPE, "pooled output and its gradient differ in shape");
    return SY_OK;
}

sy_status infer_AVG_POOL2D_GRAD(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    sy_shape expect;
    if ((st = window_out(g, n, &n->shape, n->attr.pool.ksize[0], n->attr.pool.ksize[1], n->shape.dims[3],
                         n->attr.pool.stride, n->attr.pool.padding, &expect)))
        return st;
    if (!sy_shape_equal(&expect, &graph_in_rec(g, n, 0)->shape))
        return graph_fail(g, n, SY_ERR_SHAPE, "gradient does not match the pool's output shape");
    return SY_OK;
}

/* ---- dropout -------------------------------------------------------------------------- */

sy_node sy_graph_dropout(sy_graph *g, sy_node x, float rate, uint64_t seed) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.dropout.rate = rate;
    at.dropout.seed = seed;
    return graph_add(g, SY_OP_DROPOUT, &x, 1, &at, NULL);
}

sy_status infer_DROPOUT(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    float r = n->attr.dropout.rate;
    if (!(r >= 0.0f && r < 1.0f)) return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "rate %g is outside [0, 1)", (double)r);
    n->shape = graph_in_rec(g, n, 0)->shape;
    return SY_OK;
}

/* The mask is regenerated from (seed, stream, step, index), so the gradient
 * is the same dropout applied to dy. */
sy_status grad_DROPOUT(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_attrs at = graph_node(g, y)->attr;
    dx[0] = graph_add(g, SY_OP_DROPOUT, &dy, 1, &at, NULL);
    return sy_graph_status(g);
}

/* ---- losses ------------------------------------------------------------------------------ */

static sy_node loss2(sy_graph *g, sy_op op, sy_node a, sy_node b) {
    sy_node in[2] = {a, b};
    return graph_add(g, op, in, 2, NULL, NULL);
}

sy_node sy_graph_sparse_softmax_cross_entropy(sy_graph *g, sy_node logits, sy_node labels) {
    return loss2(g, SY_OP_SPARSE_SOFTMAX_CE, logits, labels);
}
sy_node sy_graph_softmax_cross_entropy(sy_graph *g, sy_node logits, sy_node targets) {
    return loss2(g, SY_OP_SOFTMAX_CE, logits, targets);
}
sy_node sy_graph_sigmoid_cross_entropy(sy_graph *g, sy_node logits, sy_node targets) {
    return loss2(g, SY_OP_SIGMOID_CE, logits, targets);
}

/* (pred (..., C), labels int32 (...)) -> (...) */
static sy_status infer_sparse_loss(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *p = graph_in_rec(g, n, 0), *l = graph_in_rec(g, n, 1);
    char sp[SY_SHAPE_STR_MAX], sl[SY_SHAPE_STR_MAX];
    if (p->dtype != SY_F32 && p->dtype != SY_F64)
        return graph_fail(g, n, SY_ERR_DTYPE, "predictions are %s; expected float", sy_dtype_name(p->dtype));
    if (l->dtype != SY_I32)
        return graph_fail(g, n, SY_ERR_DTYPE, "labels are %s; expected int32 class indices", sy_dtype_name(l->dtype));
    bool ok = p->shape.rank >= 1 && l->shape.rank == p->shape.rank - 1;
    for (int i = 0; ok && i < l->shape.rank; i++) ok = l->shape.dims[i] == p->shape.dims[i];
    if (!ok)
        return graph_fail(g, n, SY_ERR_SHAPE, "labels %s do not match predictions %s: expected the predictions' shape without its last (class) axis",
                          sy_shape_format(&l->shape, sl, sizeof sl), sy_shape_format(&p->shape, sp, sizeof sp));
    n->dtype = p->dtype;
    n->shape = l->shape;
    return SY_OK;
}

/* (pred (..., C), targets (..., C)) -> (...) */
static sy_status infer_dense_loss(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    const sy_shape *p = &graph_in_rec(g, n, 0)->shape, *t = &graph_in_rec(g, n, 1)->shape;
    if (!sy_shape_equal(p, t) || p->rank < 1) {
        char sp[SY_SHAPE_STR_MAX], st2[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "targets %s do not match predictions %s", sy_shape_format(t, st2, sizeof st2),
                          sy_shape_format(p, sp, sizeof sp));
    }
    n->shape = *p;
    n->shape.rank--;
    return SY_OK;
}

sy_status infer_SPARSE_SOFTMAX_CE(sy_graph *g, sy_node_rec *n) { return infer_sparse_loss(g, n); }
sy_status infer_SPARSE_CATEGORICAL_CE(sy_graph *g, sy_node_rec *n) { return infer_sparse_loss(g, n); }
sy_status infer_SOFTMAX_CE(sy_graph *g, sy_node_rec *n) { return infer_dense_loss(g, n); }
sy_status infer_SIGMOID_CE(sy_graph *g, sy_node_rec *n) { return infer_dense_loss(g, n); }
sy_status infer_CATEGORICAL_CE(sy_graph *g, sy_node_rec *n) { return infer_dense_loss(g, n); }
sy_status infer_BINARY_CE(sy_graph *g, sy_node_rec *n) { return infer_dense_loss(g, n); }
sy_status infer_MSE(sy_graph *g, sy_node_rec *n) { return infer_dense_loss(g, n); }

/* (dl (...), pred (..., C), targets) -> d pred */
static sy_status infer_loss_grad(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *dl = graph_in_rec(g, n, 0), *p = graph_in_rec(g, n, 1);
    if (dl->dtype != p->dtype) return graph_fail(g, n, SY_ERR_DTYPE, "gradient and predictions differ in dtype");
    n->dtype = p->dtype;
    n->shape = p->shape;
    return SY_OK;
}
sy_status infer_SPARSE_SOFTMAX_CE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }
sy_status infer_SOFTMAX_CE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }
sy_status infer_SIGMOID_CE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }
sy_status infer_SPARSE_CATEGORICAL_CE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }
sy_status infer_CATEGORICAL_CE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }
sy_status infer_BINARY_CE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }
sy_status infer_MSE_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }

static sy_node loss_grad(sy_graph *g, sy_op op, sy_node y, sy_node dy) {
    sy_node in[3] = {dy, graph_input(g, y, 0), graph_input(g, y, 1)};
    return graph_add(g, op, in, 3, NULL, NULL);
}

/* dl (...) as (..., 1), to broadcast against (..., C) */
static sy_node expand_last(sy_graph *g, sy_node dl) {
    sy_shape s = graph_node(g, dl)->shape;
    s.dims[s.rank++] = 1;
    return sy_graph_reshape(g, dl, s);
}

static sy_status no_target_grad(sy_graph *g, sy_node y, const bool *need) {
    if (need[1])
        return graph_fail(g, graph_node(g, y), SY_ERR_UNSUPPORTED,
                          "the gradient with respect to the targets is not supported; stop it at the targets");
    return SY_OK;
}

sy_status grad_SPARSE_SOFTMAX_CE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = loss_grad(g, SY_OP_SPARSE_SOFTMAX_CE_GRAD, y, dy);
    return sy_graph_status(g);
}
sy_status grad_SPARSE_CATEGORICAL_CE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = loss_grad(g, SY_OP_SPARSE_CATEGORICAL_CE_GRAD, y, dy);
    return sy_graph_status(g);
}

sy_status grad_SOFTMAX_CE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = loss_grad(g, SY_OP_SOFTMAX_CE_GRAD, y, dy);
    if (need[1]) /* d/dt of -sum(t log_softmax(x)) = -log_softmax(x) */
        dx[1] = sy_graph_mul(g, sy_graph_neg(g, sy_graph_log_softmax(g, graph_input(g, y, 0), -1)), expand_last(g, dy));
    return sy_graph_status(g);
}

sy_status grad_SIGMOID_CE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = loss_grad(g, SY_OP_SIGMOID_CE_GRAD, y, dy);
    if (need[1]) { /* d/dz of mean(max(x,0) - x z + ...) = -x / C */
        sy_node x = graph_input(g, y, 0);
        sy_shape xs = graph_node(g, x)->shape;
        sy_node scale = sy_graph_fill(g, graph_node(g, x)->dtype, sy_shape_of(0), -1.0 / (double)xs.dims[xs.rank - 1]);
        dx[1] = sy_graph_mul(g, sy_graph_mul(g, x, scale), expand_last(g, dy));
    }
    return sy_graph_status(g);
}

sy_status grad_CATEGORICAL_CE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_status st = no_target_grad(g, y, need);
    if (st) return st;
    if (need[0]) dx[0] = loss_grad(g, SY_OP_CATEGORICAL_CE_GRAD, y, dy);
    return sy_graph_status(g);
}

sy_status grad_BINARY_CE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_status st = no_target_grad(g, y, need);
    if (st) return st;
    if (need[0]) dx[0] = loss_grad(g, SY_OP_BINARY_CE_GRAD, y, dy);
    return sy_graph_status(g);
}

sy_status grad_MSE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0] || need[1]) {
        sy_node d = loss_grad(g, SY_OP_MSE_GRAD, y, dy);
        if (need[0]) dx[0] = d;
        if (need[1]) dx[1] = sy_graph_neg(g, d);
    }
    return sy_graph_status(g);
}

/* The producer of y_pred if it is `op` over the last axis, else SY_NONE. */
static sy_node logits_of(const sy_graph *g, sy_node y_pred, sy_op op) {
    if (y_pred < 0 || y_pred >= sy_graph_node_count(g)) return SY_NONE;
    const sy_node_rec *n = graph_node(g, y_pred);
    if (n->op != op) return SY_NONE;
    if (op == SY_OP_SOFTMAX && n->attr.axis.axis != n->shape.rank - 1) return SY_NONE;
    return graph_input(g, y_pred, 0);
}

bool sy_graph_is_activation_output(const sy_graph *g, sy_node y_pred, bool sigmoid) {
    return logits_of(g, y_pred, sigmoid ? SY_OP_SIGMOID : SY_OP_SOFTMAX) != SY_NONE;
}

/* tf.keras 2.15's backend._get_logits: an activation's output is replaced
 * by its logits whatever from_logits says (with from_logits=True Keras
 * warns that the output "does not represent logits" and still uses the
 * logits; keras/compile.c gives that warning, once per compile). */
static sy_node keras_loss(sy_graph *g, sy_node y_pred, sy_node y_true, bool from_logits, sy_op act, sy_op with_logits,
                          sy_op from_probs) {
    sy_node logits = logits_of(g, y_pred, act);
    if (logits != SY_NONE) return loss2(g, with_logits, logits, y_true);
    return loss2(g, from_logits ? with_logits : from_probs, y_pred, y_true);
}

sy_node sy_graph_sparse_categorical_crossentropy(sy_graph *g, sy_node y_pred, sy_node labels, bool from_logits) {
    return keras_loss(g, y_pred, labels, from_logits, SY_OP_SOFTMAX, SY_OP_SPARSE_SOFTMAX_CE, SY_OP_SPARSE_CATEGORICAL_CE);
}
sy_node sy_graph_categorical_crossentropy(sy_graph *g, sy_node y_pred, sy_node targets, bool from_logits) {
    return keras_loss(g, y_pred, targets, from_logits, SY_OP_SOFTMAX, SY_OP_SOFTMAX_CE, SY_OP_CATEGORICAL_CE);
}
sy_node sy_graph_binary_crossentropy(sy_graph *g, sy_node y_pred, sy_node targets, bool from_logits) {
    return keras_loss(g, y_pred, targets, from_logits, SY_OP_SIGMOID, SY_OP_SIGMOID_CE, SY_OP_BINARY_CE);
}
sy_node sy_graph_mean_squared_error(sy_graph *g, sy_node y_pred, sy_node targets) {
    return loss2(g, SY_OP_MSE, y_pred, targets);
}

/* ---- issue 17, losses and metrics: KERAS_LOSS ----------------------------------------------- */

sy_status infer_KERAS_LOSS(sy_graph *g, sy_node_rec *n) {
    if (n->attr.loss.fn < SY_LOSS_MAE || n->attr.loss.fn > SY_LOSS_CATEGORICAL_FOCAL)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "unknown loss function %d", n->attr.loss.fn);
    return infer_dense_loss(g, n);
}
sy_status infer_KERAS_LOSS_GRAD(sy_graph *g, sy_node_rec *n) { return infer_loss_grad(g, n); }

sy_status grad_KERAS_LOSS(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_status st = no_target_grad(g, y, need);
    if (st) return st;
    if (need[0]) {
        sy_node in[3] = {dy, graph_input(g, y, 0), graph_input(g, y, 1)};
        sy_attrs at = graph_node(g, y)->attr;
        dx[0] = graph_add(g, SY_OP_KERAS_LOSS_GRAD, in, 3, &at, NULL);
    }
    return sy_graph_status(g);
}

sy_loss_params sy_loss_params_default(void) {
    return (sy_loss_params){.delta = 1.0, .alpha = 0.25, .gamma = 2.0, .apply_class_balancing = false, .from_logits = false};
}

sy_node sy_graph_loss(sy_graph *g, sy_loss_fn fn, sy_node y_pred, sy_node targets, const sy_loss_params *p) {
    sy_loss_params d = sy_loss_params_default();
    if (!p) p = &d;
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.loss.fn = (uint8_t)fn;
    at.loss.from_logits = p->from_logits;
    at.loss.balance = p->apply_class_balancing;
    at.loss.a = (float)(fn == SY_LOSS_HUBER ? p->delta : p->alpha);
    at.loss.b = (float)p->gamma;
    if (fn == SY_LOSS_BINARY_FOCAL || fn == SY_LOSS_CATEGORICAL_FOCAL) { /* backend._get_logits, as the crossentropies */
        sy_node logits = logits_of(g, y_pred, fn == SY_LOSS_BINARY_FOCAL ? SY_OP_SIGMOID : SY_OP_SOFTMAX);
        if (logits != SY_NONE) {
            y_pred = logits;
            at.loss.from_logits = 1;
        }
    }
    sy_node in[2] = {y_pred, targets};
    return graph_add(g, SY_OP_KERAS_LOSS, in, 2, &at, NULL);
}

/* ---- optimizer updates (added by the compiler) ----------------------------------------- */

/* (param, grad, slots...): all float, the first `same` of the param's shape. */
static sy_status infer_update_first(sy_graph *g, sy_node_rec *n, int same) {
    sy_status st = require_float_inputs(g, n, n->n_in);
    if (st) return st;
    const sy_shape *p = &graph_in_rec(g, n, 0)->shape;
    for (int i = 1; i < same; i++)
        if (!sy_shape_equal(p, &graph_in_rec(g, n, i)->shape)) {
            char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
            return graph_fail(g, n, SY_ERR_SHAPE, "input %d %s does not match the parameter %s", i,
                              graph_in_shape_str(g, n, i, a), sy_shape_format(p, b, sizeof b));
        }
    n->shape = sy_shape_of(0);
    return SY_OK;
}
static sy_status infer_update(sy_graph *g, sy_node_rec *n) { return infer_update_first(g, n, n->n_in); }
sy_status infer_SGD_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
sy_status infer_ADAM_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
sy_status infer_RMSPROP_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
/* issue 17, optimizers */
sy_status infer_ADADELTA_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
sy_status infer_ADAGRAD_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
sy_status infer_ADAMAX_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
sy_status infer_FTRL_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
sy_status infer_LION_UPDATE(sy_graph *g, sy_node_rec *n) { return infer_update(g, n); }
/* (param, grad, m, v, u_product): the last a scalar shared by every weight */
sy_status infer_NADAM_UPDATE(sy_graph *g, sy_node_rec *n) {
    char a[SY_SHAPE_STR_MAX];
    if (graph_in_rec(g, n, 4)->shape.rank != 0)
        return graph_fail(g, n, SY_ERR_SHAPE, "u_product %s must be a scalar", graph_in_shape_str(g, n, 4, a));
    return infer_update_first(g, n, 4);
}
/* (param, grad, v [, r, c]): r and c, Adafactor's factored second moments of a
 * rank >= 2 weight, are its shape without the last axis and without the next-to-last */
sy_status infer_ADAFACTOR_UPDATE(sy_graph *g, sy_node_rec *n) {
    if (n->n_in != 3 && n->n_in != 5)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "takes 3 or 5 inputs, not %d", n->n_in);
    sy_status st = infer_update_first(g, n, 3);
    if (st || n->n_in == 3) return st;
    const sy_shape *p = &graph_in_rec(g, n, 0)->shape;
    if (p->rank < 2) return graph_fail(g, n, SY_ERR_SHAPE, "factored slots need a weight of rank >= 2, not %d", p->rank);
    sy_shape r = *p, c = *p;
    r.rank--;
    c.rank--;
    c.dims[c.rank - 1] = p->dims[p->rank - 1];
    for (int i = 0; i < 2; i++) {
        const sy_shape *want = i ? &c : &r;
        if (!sy_shape_equal(want, &graph_in_rec(g, n, 3 + i)->shape)) {
            char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
            return graph_fail(g, n, SY_ERR_SHAPE, "slot %s is %s; expected %s", i ? "c" : "r",
                              graph_in_shape_str(g, n, 3 + i, a), sy_shape_format(want, b, sizeof b));
        }
    }
    return SY_OK;
}
