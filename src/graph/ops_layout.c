/*
 * ops_layout.c - ops that move or reduce data without arithmetic per pair of
 * elements: reshape, transpose, concat, slice, broadcast_to, the reductions
 * and the embedding gather. Layout ops accept any dtype, so labels and
 * indices can be reshaped and sliced like activations.
 */
#include "graph_internal.h"

#include <string.h>

/* ---- reshape ------------------------------------------------------------------ */

sy_node sy_graph_reshape(sy_graph *g, sy_node x, sy_shape shape) {
    if (shape.rank < 0 || shape.rank > SY_MAX_RANK) {
        graph_fail(g, NULL, SY_ERR_SHAPE, "reshape: rank %d is outside [0, %d]", shape.rank, SY_MAX_RANK);
        return SY_NONE;
    }
    return graph_add(g, SY_OP_RESHAPE, &x, 1, NULL, &shape);
}

sy_status infer_RESHAPE(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x = graph_in_rec(g, n, 0);
    n->dtype = x->dtype;
    if (sy_shape_count(&n->shape) != sy_shape_count(&x->shape)) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                          sy_shape_format(&x->shape, a, sizeof a), (long long)sy_shape_count(&x->shape),
                          sy_shape_format(&n->shape, b, sizeof b), (long long)sy_shape_count(&n->shape));
    }
    for (int i = 0; i < n->shape.rank; i++)
        if (n->shape.dims[i] <= 0) return graph_fail(g, n, SY_ERR_SHAPE, "dimension %d of the new shape is not positive", i);
    return SY_OK;
}

sy_status grad_RESHAPE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = sy_graph_reshape(g, dy, graph_node(g, graph_input(g, y, 0))->shape);
    return sy_graph_status(g);
}

/* ---- transpose ----------------------------------------------------------------- */

sy_node sy_graph_transpose(sy_graph *g, sy_node x, const int32_t *perm) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    int rank = x >= 0 && x < sy_graph_node_count(g) ? sy_graph_shape(g, x).rank : 0;
    for (int i = 0; i < rank; i++) at.transpose.perm[i] = perm[i];
    return graph_add(g, SY_OP_TRANSPOSE, &x, 1, &at, NULL);
}

sy_status infer_TRANSPOSE(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x = graph_in_rec(g, n, 0);
    n->dtype = x->dtype;
    n->shape.rank = x->shape.rank;
    uint32_t seen = 0;
    for (int i = 0; i < x->shape.rank; i++) {
        int p = n->attr.transpose.perm[i];
        if (p < 0 || p >= x->shape.rank || (seen & (1u << p))) {
            char s[SY_SHAPE_STR_MAX];
            return graph_fail(g, n, SY_ERR_SHAPE, "perm[%d] = %d is not a permutation of the axes of %s", i, p,
                              sy_shape_format(&x->shape, s, sizeof s));
        }
        seen |= 1u << p;
        n->shape.dims[i] = x->shape.dims[p];
    }
    return SY_OK;
}

sy_status grad_TRANSPOSE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    const sy_node_rec *n = graph_node(g, y);
    int32_t inv[SY_MAX_RANK];
    for (int i = 0; i < n->shape.rank; i++) inv[n->attr.transpose.perm[i]] = i;
    dx[0] = sy_graph_transpose(g, dy, inv);
    return sy_graph_status(g);
}

/* ---- concat -------------------------------------------------------------------- */

sy_node sy_graph_concat(sy_graph *g, const sy_node *xs, int count, int axis) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.axis.axis = axis;
    if (count < 1) {
        graph_fail(g, NULL, SY_ERR_INVALID_ARGUMENT, "concat: needs at least one input");
        return SY_NONE;
    }
    return graph_add(g, SY_OP_CONCAT, xs, count, &at, NULL);
}

sy_status infer_CONCAT(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x0 = graph_in_rec(g, n, 0);
    sy_status st = normalize_axis(g, n, x0->shape.rank);
    if (st) return st;
    int axis = n->attr.axis.axis;
    n->dtype = x0->dtype;
    n->shape = x0->shape;
    n->shape.dims[axis] = 0;
    for (int i = 0; i < n->n_in; i++) {
        const sy_node_rec *x = graph_in_rec(g, n, i);
        bool ok = x->dtype == x0->dtype && x->shape.rank == x0->shape.rank;
        for (int d = 0; ok && d < x0->shape.rank; d++)
            if (d != axis && x->shape.dims[d] != x0->shape.dims[d]) ok = false;
        if (!ok) {
            char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
            return graph_fail(g, n, SY_ERR_SHAPE, "input %d %s %s does not match input 0 %s %s outside axis %d", i,
                              sy_dtype_name(x->dtype), sy_shape_format(&x->shape, a, sizeof a), sy_dtype_name(x0->dtype),
                              sy_shape_format(&x0->shape, b, sizeof b), axis);
        }
        n->shape.dims[axis] += x->shape.dims[axis];
    }
    return SY_OK;
}

sy_status grad_CONCAT(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    int n_in = graph_node(g, y)->n_in, axis = graph_node(g, y)->attr.axis.axis;
    int64_t begin[SY_MAX_RANK] = {0};
    for (int i = 0; i < n_in; i++) {
        sy_shape s = graph_node(g, graph_input(g, y, i))->shape;
        if (need[i]) dx[i] = sy_graph_slice(g, dy, begin, s.dims);
        begin[axis] += s.dims[axis];
    }
    return sy_graph_status(g);
}

/* ---- slice ---------------------------------------------------------------------- */

sy_node sy_graph_slice(sy_graph *g, sy_node x, const int64_t *begin, const int64_t *size) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    if (g->status != SY_OK || x < 0 || x >= sy_graph_node_count(g)) return graph_add(g, SY_OP_SLICE, &x, 1, &at, NULL);
    sy_shape out = sy_graph_shape(g, x);
    for (int i = 0; i < out.rank; i++) {
        at.slice.begin[i] = begin[i];
        out.dims[i] = size[i];
    }
    return graph_add(g, SY_OP_SLICE, &x, 1, &at, &out);
}

sy_status infer_SLICE(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x = graph_in_rec(g, n, 0);
    n->dtype = x->dtype;
    for (int i = 0; i < x->shape.rank; i++) {
        int64_t b = n->attr.slice.begin[i], s = n->shape.dims[i];
        if (b < 0 || s < 1 || b + s > x->shape.dims[i]) {
            char a[SY_SHAPE_STR_MAX];
            return graph_fail(g, n, SY_ERR_SHAPE, "axis %d: [%lld, %lld) is not inside %s", i, (long long)b,
                              (long long)(b + s), sy_shape_format(&x->shape, a, sizeof a));
        }
    }
    return SY_OK;
}

sy_status grad_SLICE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_attrs at = graph_node(g, y)->attr;
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape;
    dx[0] = graph_add(g, SY_OP_SLICE_GRAD, &dy, 1, &at, &xs);
    return sy_graph_status(g);
}

sy_status infer_SLICE_GRAD(sy_graph *g, sy_node_rec *n) {
    n->dtype = graph_in_rec(g, n, 0)->dtype;
    return SY_OK;
}

/* ---- broadcast_to ---------------------------------------------------------------- */

sy_node sy_graph_broadcast_to(sy_graph *g, sy_node x, sy_shape shape) {
    return graph_add(g, SY_OP_BROADCAST_TO, &x, 1, NULL, &shape);
}

sy_status infer_BROADCAST_TO(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x = graph_in_rec(g, n, 0);
    n->dtype = x->dtype;
    bool ok = x->shape.rank <= n->shape.rank;
    for (int i = 0; ok && i < x->shape.rank; i++) {
        int64_t d = x->shape.dims[x->shape.rank - 1 - i], t = n->shape.dims[n->shape.rank - 1 - i];
        if (d != 1 && d != t) ok = false;
    }
    if (!ok) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "cannot broadcast %s to %s", sy_shape_format(&x->shape, a, sizeof a),
                          sy_shape_format(&n->shape, b, sizeof b));
    }
    return SY_OK;
}

sy_status grad_BROADCAST_TO(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape;
    if (need[0]) dx[0] = graph_unbroadcast(g, dy, &xs);
    return sy_graph_status(g);
}

/* ---- reductions ------------------------------------------------------------------ */

/* issue 16, mixed_bfloat16: whether TensorFlow reduces x over `axes` as an outer reduction -- the
 * last of its axes longer than 1 kept -- which for a bfloat16 mean adds the values one after the
 * other in bfloat16 and divides by the count in bfloat16 (measured in TensorFlow 2.15.1 on CPU:
 * GlobalAveragePooling1D and 2D; docs/design/mixed-precision.md). Over the last axis TensorFlow
 * takes another order, which systolic does not reproduce: such a mean is the float32 one, rounded. */
static bool outer_reduction(const sy_graph *g, sy_node x, uint32_t axes) {
    if (x < 0 || x >= sy_graph_node_count(g)) return false;
    sy_shape s = sy_graph_shape(g, x);
    for (int d = s.rank - 1; d >= 0; d--)
        if (s.dims[d] > 1) return !(axes & (1u << d)) && (axes & ((1u << d) - 1));
    return false;
}

static sy_node reduce(sy_graph *g, sy_op op, sy_node x, const int32_t *axes, int n_axes, bool keepdims) {
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
            graph_fail(g, NULL, SY_ERR_SHAPE, "%s: axis %d is out of range for %s", sy_op_name(op), axes[i],
                       sy_shape_format(&s, buf, sizeof buf));
            return SY_NONE;
        }
        at.reduce.axes |= 1u << a;
    }
    at.reduce.bf16_seq = op == SY_OP_REDUCE_MEAN && g->bf16 && outer_reduction(g, x, at.reduce.axes);
    return graph_add(g, op, &x, 1, &at, NULL);
}

sy_node sy_graph_reduce_sum(sy_graph *g, sy_node x, const int32_t *axes, int n_axes, bool keepdims) {
    return reduce(g, SY_OP_REDUCE_SUM, x, axes, n_axes, keepdims);
}
sy_node sy_graph_reduce_mean(sy_graph *g, sy_node x, const int32_t *axes, int n_axes, bool keepdims) {
    return reduce(g, SY_OP_REDUCE_MEAN, x, axes, n_axes, keepdims);
}

static sy_status infer_reduce(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    n->shape.rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!(n->attr.reduce.axes & (1u << i)))
            n->shape.dims[n->shape.rank++] = x->dims[i];
        else if (n->attr.reduce.keepdims)
            n->shape.dims[n->shape.rank++] = 1;
    }
    return SY_OK;
}
sy_status infer_REDUCE_SUM(sy_graph *g, sy_node_rec *n) { return infer_reduce(g, n); }
sy_status infer_REDUCE_MEAN(sy_graph *g, sy_node_rec *n) { return infer_reduce(g, n); }

/* dy reshaped with the reduced axes kept as 1, then broadcast back. */
static sy_node spread(sy_graph *g, sy_node y, sy_node dy) {
    const sy_node_rec *n = graph_node(g, y);
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape, kept = xs;
    for (int i = 0; i < xs.rank; i++)
        if (n->attr.reduce.axes & (1u << i)) kept.dims[i] = 1;
    return sy_graph_broadcast_to(g, sy_graph_reshape(g, dy, kept), xs);
}

sy_status grad_REDUCE_SUM(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = spread(g, y, dy);
    return sy_graph_status(g);
}

sy_status grad_REDUCE_MEAN(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    const sy_node_rec *n = graph_node(g, y);
    sy_shape xs = graph_node(g, graph_input(g, y, 0))->shape;
    sy_dtype dt = n->dtype;
    double count = (double)sy_shape_count(&xs) / (double)sy_shape_count(&n->shape);
    if (n->attr.reduce.bf16_seq) { /* TensorFlow's _MeanGrad in bfloat16: dy / bfloat16(count) */
        sy_node c = sy_graph_fill(g, dt, sy_shape_of(0), (double)sy_bf16_round((float)count));
        dx[0] = sy_graph_div(g, spread(g, y, dy), c);
        return sy_graph_status(g);
    }
    sy_node scale = sy_graph_fill(g, dt, sy_shape_of(0), 1.0 / count);
    dx[0] = sy_graph_mul(g, spread(g, y, dy), scale);
    return sy_graph_status(g);
}

/* ---- gather ----------------------------------------------------------------------- */

sy_node sy_graph_gather(sy_graph *g, sy_node params, sy_node indices) {
    sy_node in[2] = {params, indices};
    return graph_add(g, SY_OP_GATHER, in, 2, NULL, NULL);
}

sy_status infer_GATHER(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *p = graph_in_rec(g, n, 0), *ix = graph_in_rec(g, n, 1);
    if (ix->dtype != SY_I32)
        return graph_fail(g, n, SY_ERR_DTYPE, "indices are %s; expected int32", sy_dtype_name(ix->dtype));
    if (p->shape.rank < 1) return graph_fail(g, n, SY_ERR_SHAPE, "params must have at least one axis");
    if (ix->shape.rank + p->shape.rank - 1 > SY_MAX_RANK)
        return graph_fail(g, n, SY_ERR_SHAPE, "result would have rank %d > %d", ix->shape.rank + p->shape.rank - 1,
                          SY_MAX_RANK);
    n->dtype = p->dtype;
    n->shape = ix->shape;
    for (int i = 1; i < p->shape.rank; i++) n->shape.dims[n->shape.rank++] = p->shape.dims[i];
    return SY_OK;
}

sy_status grad_GATHER(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_shape ps = graph_node(g, graph_input(g, y, 0))->shape;
    sy_node in[2] = {dy, graph_input(g, y, 1)};
    dx[0] = graph_add(g, SY_OP_GATHER_GRAD, in, 2, NULL, &ps);
    return sy_graph_status(g);
}

sy_status infer_GATHER_GRAD(sy_graph *g, sy_node_rec *n) {
    n->dtype = graph_in_rec(g, n, 0)->dtype;
    return SY_OK;
}

/* ---- reverse ------------------------------------------------------------------- */

sy_node sy_graph_reverse(sy_graph *g, sy_node x, int axis) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.axis.axis = axis;
    return graph_add(g, SY_OP_REVERSE, &x, 1, &at, NULL);
}

sy_status infer_REVERSE(sy_graph *g, sy_node_rec *n) {
    const sy_node_rec *x = graph_in_rec(g, n, 0);
    if (x->shape.rank < 1) return graph_fail(g, n, SY_ERR_SHAPE, "needs at least one axis; got a scalar");
    n->dtype = x->dtype;
    n->shape = x->shape;
    return normalize_axis(g, n, x->shape.rank);
}

sy_status grad_REVERSE(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (need[0]) dx[0] = sy_graph_reverse(g, dy, graph_node(g, y)->attr.axis.axis);
    return sy_graph_status(g);
}
