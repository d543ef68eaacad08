/*
 * ops_math.c - dense algebra and elementwise ops: builder, shape inference
 * and gradient rule of each, side by side.
 *
 * Gradient rules are graph rewrites: they add ordinary ops (matmul with
 * transposes, reduce_sum to undo broadcasting, the *_grad elementwise ops)
 * that the compiler then plans, fuses and lowers like any other node.
 */
#include "graph_internal.h"

#include <string.h>

static bool is_float(sy_dtype t) { return t == SY_F32 || t == SY_F64; }

/* All inputs float and of one dtype; sets n->dtype. */
sy_status require_float_inputs(sy_graph *g, sy_node_rec *n, int count) {
    for (int i = 0; i < count; i++) {
        sy_dtype t = graph_in_rec(g, n, i)->dtype;
        if (!is_float(t))
            return graph_fail(g, n, SY_ERR_DTYPE, "input %d is %s; expected float32 or float64", i, sy_dtype_name(t));
        if (t != graph_in_rec(g, n, 0)->dtype)
            return graph_fail(g, n, SY_ERR_DTYPE, "inputs mix %s and %s", sy_dtype_name(graph_in_rec(g, n, 0)->dtype),
                              sy_dtype_name(t));
    }
    n->dtype = graph_in_rec(g, n, 0)->dtype;
    return SY_OK;
}

static sy_node unary(sy_graph *g, sy_op op, sy_node x) { return graph_add(g, op, &x, 1, NULL, NULL); }
static sy_node binary(sy_graph *g, sy_op op, sy_node a, sy_node b) {
    sy_node in[2] = {a, b};
    return graph_add(g, op, in, 2, NULL, NULL);
}

/* ---- matmul -------------------------------------------------------------------- */

sy_node sy_graph_matmul(sy_graph *g, sy_node a, sy_node b, bool ta, bool tb) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.matmul.ta = ta;
    at.matmul.tb = tb;
    sy_node in[2] = {a, b};
    return graph_add(g, SY_OP_MATMUL, in, 2, &at, NULL);
}

sy_status infer_MATMUL(sy_graph *g, sy_node_rec *n) {
    if (n->n_in < 2 || n->n_in > 3) return graph_fail(g, n, SY_ERR_INTERNAL, "takes 2 or 3 inputs, got %d", n->n_in);
    sy_status st = require_float_inputs(g, n, n->n_in);
    if (st) return st;
    const sy_shape *a = &graph_in_rec(g, n, 0)->shape, *b = &graph_in_rec(g, n, 1)->shape;
    char sa[SY_SHAPE_STR_MAX], sb[SY_SHAPE_STR_MAX];
    if (a->rank != 2 || b->rank != 2)
        return graph_fail(g, n, SY_ERR_SHAPE, "cannot multiply %s by %s: both operands must be matrices (rank 2)",
                          sy_shape_format(a, sa, sizeof sa), sy_shape_format(b, sb, sizeof sb));
    int64_t m = n->attr.matmul.ta ? a->dims[1] : a->dims[0], k1 = n->attr.matmul.ta ? a->dims[0] : a->dims[1];
    int64_t k2 = n->attr.matmul.tb ? b->dims[1] : b->dims[0], nn = n->attr.matmul.tb ? b->dims[0] : b->dims[1];
    if (k1 != k2)
        return graph_fail(g, n, SY_ERR_SHAPE, "cannot multiply %s%s by %s%s: inner dimensions %lld and %lld differ",
                          sy_shape_format(a, sa, sizeof sa), n->attr.matmul.ta ? " (transposed)" : "",
                          sy_shape_format(b, sb, sizeof sb), n->attr.matmul.tb ? " (transposed)" : "", (long long)k1,
                          (long long)k2);
    if (n->n_in == 3) {
        const sy_shape *bias = &graph_in_rec(g, n, 2)->shape;
        if (bias->rank != 1 || bias->dims[0] != nn)
            return graph_fail(g, n, SY_ERR_SHAPE, "bias %s does not match %lld output columns",
                              sy_shape_format(bias, sa, sizeof sa), (long long)nn);
    }
    n->shape = sy_shape_of(2, m, nn);
    return SY_OK;
}

sy_status grad_MATMUL(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_node_rec *n = graph_node(g, y);
    if (n->n_in != 2 || n->attr.matmul.act)
        return graph_fail(g, n, SY_ERR_INTERNAL, "a fused matmul has no gradient rule (fusion runs after autodiff)");
    sy_node a = graph_input(g, y, 0), b = graph_input(g, y, 1);
    bool ta = n->attr.matmul.ta, tb = n->attr.matmul.tb;
    /* b's gradient first: the schedule follows node order, so `a` (a layer's input, often large)
     * may die before a's gradient is allocated and lend it its buffer (issue 21: the tutorial CNN's
     * pooled activations and their gradient, 43 MB each at batch 1,000) */
    if (need[1]) {
        if (!tb) dx[1] = ta ? sy_graph_matmul(g, a, dy, false, false) : sy_graph_matmul(g, a, dy, true, false);
        else dx[1] = ta ? sy_graph_matmul(g, dy, a, true, true) : sy_graph_matmul(g, dy, a, true, false);
    }
    if (need[0]) {
        if (!ta)
            dx[0] = tb ? sy_graph_matmul(g, dy, b, false, false)
                       : sy_graph_matmul(g, dy, b, false, true);
        else
            dx[0] =
                tb ? sy_graph_matmul(g, b, dy, true, true) : sy_graph_matmul(g, b, dy, false, true);
    }
    return sy_graph_status(g);
}

/* ---- bias_add ------------------------------------------------------------------ */

sy_node sy_graph_bias_add(sy_graph *g, sy_node x, sy_node bias) { return binary(g, SY_OP_BIAS_ADD, x, bias); }

sy_status infer_BIAS_ADD(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *b = &graph_in_rec(g, n, 1)->shape;
    char sx[SY_SHAPE_STR_MAX], sb[SY_SHAPE_STR_MAX];
    if (x->rank < 1 || b->rank != 1 || b->dims[0] != x->dims[x->rank - 1])
        return graph_fail(g, n, SY_ERR_SHAPE, "bias %s does not match the last axis of %s",
                          sy_shape_format(b, sb, sizeof sb), sy_shape_format(x, sx, sizeof sx));
    n->shape = *x;
    return SY_OK;
}

sy_status grad_BIAS_ADD(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    int rank = graph_node(g, y)->shape.rank;
    if (need[0]) dx[0] = dy;
    if (need[1]) {
        int32_t axes[SY_MAX_RANK];
        for (int i = 0; i < rank - 1; i++) axes[i] = i;
        dx[1] = rank > 1 ? sy_graph_reduce_sum(g, dy, axes, rank - 1, false) : dy;
    }
    return sy_graph_status(g);
}

/* ---- broadcasting binary ops --------------------------------------------------- */

sy_node sy_graph_add(sy_graph *g, sy_node a, sy_node b) { return binary(g, SY_OP_ADD, a, b); }
sy_node sy_graph_sub(sy_graph *g, sy_node a, sy_node b) { return binary(g, SY_OP_SUB, a, b); }
sy_node sy_graph_mul(sy_graph *g, sy_node a, sy_node b) { return binary(g, SY_OP_MUL, a, b); }
sy_node sy_graph_div(sy_graph *g, sy_node a, sy_node b) { return binary(g, SY_OP_DIV, a, b); }

static sy_status infer_broadcast(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    const sy_shape *a = &graph_in_rec(g, n, 0)->shape, *b = &graph_in_rec(g, n, 1)->shape;
    sy_shape out;
    out.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < out.rank; i++) {
        int ia = i - (out.rank - a->rank), ib = i - (out.rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[SY_SHAPE_STR_MAX], sb[SY_SHAPE_STR_MAX];
            return graph_fail(g, n, SY_ERR_SHAPE, "cannot broadcast %s with %s: axis %d has %lld and %lld",
                              sy_shape_format(a, sa, sizeof sa), sy_shape_format(b, sb, sizeof sb), i, (long long)da,
                              (long long)db);
        }
        out.dims[i] = da == 1 ? db : da;
    }
    n->shape = out;
    return SY_OK;
}
sy_status infer_ADD(sy_graph *g, sy_node_rec *n) { return infer_broadcast(g, n); }
sy_status infer_SUB(sy_graph *g, sy_node_rec *n) { return infer_broadcast(g, n); }
sy_status infer_MUL(sy_graph *g, sy_node_rec *n) { return infer_broadcast(g, n); }
sy_status infer_DIV(sy_graph *g, sy_node_rec *n) { return infer_broadcast(g, n); }

static sy_shape in_shape(sy_graph *g, sy_node y, int i) { return graph_node(g, graph_input(g, y, i))->shape; }

sy_status grad_ADD(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_shape sa = in_shape(g, y, 0), sb = in_shape(g, y, 1);
    if (need[0]) dx[0] = graph_unbroadcast(g, dy, &sa);
    if (need[1]) dx[1] = graph_unbroadcast(g, dy, &sb);
    return sy_graph_status(g);
}

sy_status grad_SUB(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_shape sa = in_shape(g, y, 0), sb = in_shape(g, y, 1);
    if (need[0]) dx[0] = graph_unbroadcast(g, dy, &sa);
    if (need[1]) dx[1] = graph_unbroadcast(g, sy_graph_neg(g, dy), &sb);
    return sy_graph_status(g);
}

sy_status grad_MUL(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_node a = graph_input(g, y, 0), b = graph_input(g, y, 1);
    sy_shape sa = in_shape(g, y, 0), sb = in_shape(g, y, 1);
    if (need[0]) dx[0] = graph_unbroadcast(g, sy_graph_mul(g, dy, b), &sa);
    if (need[1]) dx[1] = graph_unbroadcast(g, sy_graph_mul(g, dy, a), &sb);
    return sy_graph_status(g);
}

/* y = a / b: da = dy / b, db = -dy * y / b */
sy_status grad_DIV(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_node b = graph_input(g, y, 1);
    sy_shape sa = in_shape(g, y, 0), sb = in_shape(g, y, 1);
    if (need[0]) dx[0] = graph_unbroadcast(g, sy_graph_div(g, dy, b), &sa);
    if (need[1]) dx[1] = graph_unbroadcast(g, sy_graph_neg(g, sy_graph_div(g, sy_graph_mul(g, dy, y), b)), &sb);
    return sy_graph_status(g);
}

/* ---- elementwise unary ---------------------------------------------------------- */

sy_node sy_graph_neg(sy_graph *g, sy_node x) { return unary(g, SY_OP_NEG, x); }
sy_node sy_graph_relu(sy_graph *g, sy_node x) { return unary(g, SY_OP_RELU, x); }
sy_node sy_graph_sigmoid(sy_graph *g, sy_node x) { return unary(g, SY_OP_SIGMOID, x); }
sy_node sy_graph_tanh(sy_graph *g, sy_node x) { return unary(g, SY_OP_TANH, x); }
sy_node sy_graph_exp(sy_graph *g, sy_node x) { return unary(g, SY_OP_EXP, x); }
sy_node sy_graph_log(sy_graph *g, sy_node x) { return unary(g, SY_OP_LOG, x); }

static sy_status infer_unary(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    n->shape = graph_in_rec(g, n, 0)->shape;
    return SY_OK;
}
sy_status infer_NEG(sy_graph *g, sy_node_rec *n) { return infer_unary(g, n); }
sy_status infer_RELU(sy_graph *g, sy_node_rec *n) { return infer_unary(g, n); }
sy_status infer_SIGMOID(sy_graph *g, sy_node_rec *n) { return infer_unary(g, n); }
sy_status infer_TANH(sy_graph *g, sy_node_rec *n) { return infer_unary(g, n); }
sy_status infer_EXP(sy_graph *g, sy_node_rec *n) { return infer_unary(g, n); }
sy_status infer_LOG(sy_graph *g, sy_node_rec *n) { return infer_unary(g, n); }

/* copy keeps any dtype (the compiler uses it to pin a value into a block) */
sy_status infer_COPY(sy_graph *g, sy_node_rec *n) {
    n->dtype = graph_in_rec(g, n, 0)->dtype;
    n->shape = graph_in_rec(g, n, 0)->shape;
    return SY_OK;
}

sy_status grad_NEG(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    (void)y;
    if (need[0]) dx[0] = sy_graph_neg(g, dy);
    return sy_graph_status(g);
}
sy_status grad_COPY(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    (void)g, (void)y;
    if (need[0]) dx[0] = dy;
    return SY_OK;
}
sy_status grad_RELU(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = binary(g, SY_OP_RELU_GRAD, dy, y);
    return sy_graph_status(g);
}
sy_status grad_SIGMOID(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = binary(g, SY_OP_SIGMOID_GRAD, dy, y);
    return sy_graph_status(g);
}
sy_status grad_TANH(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = binary(g, SY_OP_TANH_GRAD, dy, y);
    return sy_graph_status(g);
}
sy_status grad_EXP(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = sy_graph_mul(g, dy, y);
    return sy_graph_status(g);
}
sy_status grad_LOG(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = sy_graph_div(g, dy, graph_input(g, y, 0));
    return sy_graph_status(g);
}

/* ---- the activation op (issue 15, activations) --------------------------------- */

sy_node graph_activation(sy_graph *g, sy_node x, int fn, float a, float b, float c) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.act = (sy_act_params){.fn = fn, .a = a, .b = b, .c = c};
    return graph_add(g, SY_OP_ACT, &x, 1, &at, NULL);
}

sy_status infer_ACT(sy_graph *g, sy_node_rec *n) {
    if ((unsigned)n->attr.act.fn >= SY_AF_COUNT)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "unknown activation function %d", (int)n->attr.act.fn);
    return infer_unary(g, n);
}

/* dx = activation_grad(dy, x): the derivative at the input (most of these
 * functions cannot be inverted from their output) */
sy_status grad_ACT(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) {
        sy_attrs at = graph_node(g, y)->attr;
        sy_node in[2] = {dy, graph_input(g, y, 0)};
        dx[0] = graph_add(g, SY_OP_ACT_GRAD, in, 2, &at, NULL);
    }
    return sy_graph_status(g);
}

/* (dy, y) -> dx: same shape, same float dtype */
static sy_status infer_same2(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    const sy_shape *a = &graph_in_rec(g, n, 0)->shape, *b = &graph_in_rec(g, n, 1)->shape;
    if (!sy_shape_equal(a, b)) {
        char sa[SY_SHAPE_STR_MAX], sb[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "gradient %s and value %s differ in shape", sy_shape_format(a, sa, sizeof sa),
                          sy_shape_format(b, sb, sizeof sb));
    }
    n->shape = *a;
    return SY_OK;
}
sy_status infer_RELU_GRAD(sy_graph *g, sy_node_rec *n) { return infer_same2(g, n); }
sy_status infer_SIGMOID_GRAD(sy_graph *g, sy_node_rec *n) { return infer_same2(g, n); }
sy_status infer_TANH_GRAD(sy_graph *g, sy_node_rec *n) { return infer_same2(g, n); }
sy_status infer_SOFTMAX_GRAD(sy_graph *g, sy_node_rec *n) { return infer_same2(g, n); }
sy_status infer_LOG_SOFTMAX_GRAD(sy_graph *g, sy_node_rec *n) { return infer_same2(g, n); }
sy_status infer_ACT_GRAD(sy_graph *g, sy_node_rec *n) { return infer_same2(g, n); }

/* ---- softmax -------------------------------------------------------------------- */

static sy_node with_axis(sy_graph *g, sy_op op, sy_node x, int axis) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.axis.axis = axis;
    return graph_add(g, op, &x, 1, &at, NULL);
}
sy_node sy_graph_softmax(sy_graph *g, sy_node x, int axis) { return with_axis(g, SY_OP_SOFTMAX, x, axis); }
sy_node sy_graph_log_softmax(sy_graph *g, sy_node x, int axis) { return with_axis(g, SY_OP_LOG_SOFTMAX, x, axis); }

/* Normalise n->attr.axis.axis against the rank of input 0. */
sy_status normalize_axis(sy_graph *g, sy_node_rec *n, int rank) {
    int axis = n->attr.axis.axis;
    if (axis < -rank || axis >= rank) {
        char s[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "axis %d is out of range for %s", axis, graph_in_shape_str(g, n, 0, s));
    }
    n->attr.axis.axis = axis < 0 ? axis + rank : axis;
    return SY_OK;
}

static sy_status infer_softmax(sy_graph *g, sy_node_rec *n) {
    sy_status st = infer_unary(g, n);
    if (st) return st;
    if (n->shape.rank < 1) return graph_fail(g, n, SY_ERR_SHAPE, "needs at least one axis; got a scalar");
    return normalize_axis(g, n, n->shape.rank);
}
sy_status infer_SOFTMAX(sy_graph *g, sy_node_rec *n) { return infer_softmax(g, n); }
sy_status infer_LOG_SOFTMAX(sy_graph *g, sy_node_rec *n) { return infer_softmax(g, n); }

static sy_status grad_softmaxes(sy_graph *g, sy_node y, sy_node dy, sy_node *dx, sy_op op) {
    sy_attrs at = graph_node(g, y)->attr;
    sy_node in[2] = {dy, y};
    dx[0] = graph_add(g, op, in, 2, &at, NULL);
    return sy_graph_status(g);
}
sy_status grad_SOFTMAX(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    return need[0] ? grad_softmaxes(g, y, dy, dx, SY_OP_SOFTMAX_GRAD) : SY_OK;
}
sy_status grad_LOG_SOFTMAX(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    return need[0] ? grad_softmaxes(g, y, dy, dx, SY_OP_LOG_SOFTMAX_GRAD) : SY_OK;
}

/* ---- fused elementwise (made by compiler/fusion.c) ------------------------------ */

sy_status infer_FUSED_ELTWISE(sy_graph *g, sy_node_rec *n) {
    /* the fusion pass presets the shape; inputs share the float dtype */
    if (n->n_in < 1) return graph_fail(g, n, SY_ERR_INTERNAL, "fused op without inputs");
    return require_float_inputs(g, n, n->n_in);
}
