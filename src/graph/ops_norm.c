/*
 * ops_norm.c - the two ops the normalization layers add: rsqrt, and the
 * moving-average state update. Builder, shape inference and gradient rule
 * of each.
 *
 * BatchNormalization and LayerNormalization are built from ordinary ops
 * (reduce_mean for the moments, broadcasting sub/mul/add for the affine
 * part, rsqrt for 1 / sqrt(variance + epsilon)), so autodiff derives their
 * gradients, through the batch statistics too, from the rules already
 * here. moving_average is not differentiable: it is an update, like the
 * optimizers', that the compiler schedules after the step (plan.c).
 */
#include "graph_internal.h"

#include <string.h>

sy_node sy_graph_rsqrt(sy_graph *g, sy_node x) { return graph_add(g, SY_OP_RSQRT, &x, 1, NULL, NULL); }

sy_status infer_RSQRT(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 1);
    if (st) return st;
    n->shape = graph_in_rec(g, n, 0)->shape;
    return SY_OK;
}

/* y = x^-1/2: dy/dx = -1/2 x^-3/2 = -1/2 y^3 */
sy_status grad_RSQRT(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    if (!need[0]) return SY_OK;
    sy_node half = sy_graph_fill(g, graph_node(g, y)->dtype, sy_shape_of(0), -0.5);
    sy_node y3 = sy_graph_mul(g, y, sy_graph_mul(g, y, y));
    dx[0] = sy_graph_mul(g, dy, sy_graph_mul(g, y3, half));
    return sy_graph_status(g);
}

sy_node sy_graph_moving_average(sy_graph *g, sy_node param, sy_node value, double momentum) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    /* Keras: decay = 1.0 - momentum with momentum a float32 tensor */
    at.moving.decay = 1.0f - (float)momentum;
    sy_node in[2] = {param, value};
    return graph_add(g, SY_OP_MOVING_AVERAGE, in, 2, &at, NULL);
}

sy_status infer_MOVING_AVERAGE(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 2);
    if (st) return st;
    const sy_node_rec *p = graph_in_rec(g, n, 0);
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (p->op != SY_OP_PARAM) return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "input 0 must be a parameter");
    if (!sy_shape_equal(&p->shape, &graph_in_rec(g, n, 1)->shape))
        return graph_fail(g, n, SY_ERR_SHAPE, "value %s does not match the parameter %s", graph_in_shape_str(g, n, 1, a),
                          sy_shape_format(&p->shape, b, sizeof b));
    if (!(n->attr.moving.decay >= 0.0f && n->attr.moving.decay <= 1.0f))
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "momentum %g is outside [0, 1]",
                          1.0 - (double)n->attr.moving.decay);
    n->shape = sy_shape_of(0);
    return SY_OK;
}
