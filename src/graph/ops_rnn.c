/*
 * ops_rnn.c - the recurrent scans: a whole LSTM or GRU sequence per op,
 * with shape inference and gradient rules.
 *
 * A scan takes the layer's input x (B, T, D), its kernel (D, gU), its
 * recurrent kernel (U, gU), an optional bias and an optional recurrent
 * dropout mask (B, U), runs the T steps, and returns everything a backward
 * pass needs, one row per (batch, step):
 *
 *   lstm_scan  i f g o | c | h | x | h(t-1) | 1
 *              (sy_lstm_layout in backend_internal.h: the activated gates,
 *              the cell state, the output, then the operand [x, h(t-1), 1]
 *              of the step's one product with [kernel; recurrent; bias])
 *   gru_scan   z r hh rh h     (5U: update and reset gates, the candidate,
 *                               the recurrent candidate input h.U_h + b_h
 *                               that r multiplies, the output)
 *
 * Keras's mask (issue 17, docs/design/masking.md) is an optional last
 * input, steps (B, T) of 0 and 1 (attr.rnn.has_steps; the grad ops take it
 * last too): a step of 0 keeps the previous h (and c) in its row, and
 * backwards gets no gate gradients and passes dh (and dc) on to the step
 * before unchanged. The mask gets a zero gradient (Keras's is a boolean).
 *
 * Activations: tanh, sigmoid, relu and none (sy_act codes) have the fast
 * cells, whose backward passes take the derivatives from the activated
 * gates. Any other Keras activation (issue 15: elu, gelu, hard_sigmoid,
 * ...) makes a `general` scan: attr.rnn.fn holds the activation's and the
 * recurrent activation's sy_act_params, and the gate columns (i f g o; z r
 * hh) hold the pre-activations instead, from which the backward pass
 * computes both the gates and their derivatives (gelu's or swish's
 * derivative cannot be had from its output).
 *
 * The layer reads h with a slice; only h is differentiable (the other
 * columns are the op's working state), and the gradient rule takes dh
 * straight from that slice's gradient, so no gradient of the whole rows is
 * ever made. The grad op runs the steps backwards. For LSTM it returns the
 * pre-activation gate gradients of every step and dx, which with dh(t-1)
 * come from the step's product with [kernel; recurrent]^T; lstm_scan_wgrad then
 * gives the gradients of kernel, recurrent kernel and bias at once, as one
 * product of the rows' [x, h(t-1), 1] columns with the gate gradients over
 * all B * T rows, at GEMM speed. For GRU the grad op returns the gate
 * gradients of the input and of the recurrent side (they differ because r
 * multiplies the latter), and the weights' gradients are matmuls over all
 * rows.
 *
 * Keras's recurrent dropout multiplies h(t-1) by a mask fixed for the
 * sequence (B, U); GRU, as Keras's GRUCell, then also blends the masked
 * h(t-1) into h. h(-1) and c(-1) are zeros (Keras's default initial state).
 * go_backwards is a reverse op on the input (the output stays in processing
 * order, as Keras returns it).
 */
#include "graph_internal.h"

#include <string.h>

static sy_node scan(sy_graph *g, sy_op op, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask,
                    sy_node steps, int act, int rec_act, const sy_act_params *fn, bool inference) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.rnn.inference = inference;
    at.rnn.act = (uint8_t)(fn ? SY_ACT_NONE : act);
    at.rnn.rec_act = (uint8_t)(fn ? SY_ACT_NONE : rec_act);
    if (fn) { /* issue 15, recurrent activations: the general cell */
        at.rnn.general = 1;
        at.rnn.fn[0] = fn[0];
        at.rnn.fn[1] = fn[1];
    }
    at.rnn.has_bias = bias != SY_NONE;
    at.rnn.has_mask = mask != SY_NONE;
    at.rnn.has_steps = steps != SY_NONE;
    sy_node in[6] = {x, kernel, recurrent};
    int n = 3;
    if (bias != SY_NONE) in[n++] = bias;
    if (mask != SY_NONE) in[n++] = mask;
    if (steps != SY_NONE) in[n++] = steps;
    return graph_add(g, op, in, n, &at, NULL);
}

sy_node graph_lstm_scan(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask, int act,
                        int rec_act, const sy_act_params *fn, bool inference) {
    return scan(g, SY_OP_LSTM_SCAN, x, kernel, recurrent, bias, mask, SY_NONE, act, rec_act, fn, inference);
}

sy_node graph_gru_scan(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask, int act,
                       int rec_act, const sy_act_params *fn) {
    return scan(g, SY_OP_GRU_SCAN, x, kernel, recurrent, bias, mask, SY_NONE, act, rec_act, fn, false);
}

/* issue 17, masking */
sy_node graph_lstm_scan_masked(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask,
                               sy_node steps, int act, int rec_act, const sy_act_params *fn, bool inference) {
    return scan(g, SY_OP_LSTM_SCAN, x, kernel, recurrent, bias, mask, steps, act, rec_act, fn, inference);
}

sy_node graph_gru_scan_masked(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask,
                              sy_node steps, int act, int rec_act, const sy_act_params *fn) {
    return scan(g, SY_OP_GRU_SCAN, x, kernel, recurrent, bias, mask, steps, act, rec_act, fn, false);
}

/* The optional inputs' positions. */
static int bias_input(const sy_node_rec *n) { return n->attr.rnn.has_bias ? 3 : -1; }
static int mask_input(const sy_node_rec *n) { return n->attr.rnn.has_mask ? 3 + n->attr.rnn.has_bias : -1; }
/* issue 17, masking: the steps' mask, the scan's last input */
static int steps_input(const sy_node_rec *n) {
    return n->attr.rnn.has_steps ? 3 + n->attr.rnn.has_bias + n->attr.rnn.has_mask : -1;
}

/* x (B, T, D), kernel (D, gU), recurrent (U, gU), bias (gU) or (2, gU),
 * mask (B, U); sets the output (B, T, row) with row(D, U) floats a step. */
static sy_status infer_scan(sy_graph *g, sy_node_rec *n, int gates, int bias_rows,
                            int64_t (*row)(const sy_node_rec *, int64_t, int64_t)) {
    int want = 3 + n->attr.rnn.has_bias + n->attr.rnn.has_mask + n->attr.rnn.has_steps;
    if (n->n_in != want) return graph_fail(g, n, SY_ERR_INTERNAL, "takes %d inputs here, got %d", want, n->n_in);
    sy_status st = require_float_inputs(g, n, n->n_in);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *k = &graph_in_rec(g, n, 1)->shape, *r = &graph_in_rec(g, n, 2)->shape;
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (x->rank != 3)
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s must be (batch, steps, features)", sy_shape_format(x, a, sizeof a));
    if (r->rank != 2 || r->dims[1] != gates * r->dims[0])
        return graph_fail(g, n, SY_ERR_SHAPE, "recurrent kernel %s must be (units, %d * units)", sy_shape_format(r, b, sizeof b),
                          gates);
    int64_t u = r->dims[0];
    if (k->rank != 2 || k->dims[0] != x->dims[2] || k->dims[1] != gates * u)
        return graph_fail(g, n, SY_ERR_SHAPE, "kernel %s does not match input %s and %lld units (expected (%lld, %lld))",
                          sy_shape_format(k, b, sizeof b), sy_shape_format(x, a, sizeof a), (long long)u,
                          (long long)x->dims[2], (long long)(gates * u));
    if (bias_input(n) >= 0) {
        const sy_shape *bs = &graph_in_rec(g, n, bias_input(n))->shape;
        bool ok = bias_rows == 1 ? bs->rank == 1 && bs->dims[0] == gates * u
                                 : bs->rank == 2 && bs->dims[0] == bias_rows && bs->dims[1] == gates * u;
        if (!ok)
            return graph_fail(g, n, SY_ERR_SHAPE, "bias %s must be %s(%lld)", sy_shape_format(bs, b, sizeof b),
                              bias_rows == 1 ? "" : "(2, ) x ", (long long)(gates * u));
    }
    if (mask_input(n) >= 0) {
        const sy_shape *m = &graph_in_rec(g, n, mask_input(n))->shape;
        if (m->rank != 2 || m->dims[0] != x->dims[0] || m->dims[1] != u)
            return graph_fail(g, n, SY_ERR_SHAPE, "recurrent dropout mask %s must be (%lld, %lld)",
                              sy_shape_format(m, b, sizeof b), (long long)x->dims[0], (long long)u);
    }
    if (steps_input(n) >= 0) { /* issue 17, masking */
        const sy_shape *m = &graph_in_rec(g, n, steps_input(n))->shape;
        if (m->rank != 2 || m->dims[0] != x->dims[0] || m->dims[1] != x->dims[1])
            return graph_fail(g, n, SY_ERR_SHAPE, "the steps' mask %s must be (%lld, %lld)", sy_shape_format(m, b, sizeof b),
                              (long long)x->dims[0], (long long)x->dims[1]);
    }
    if (n->attr.rnn.act > SY_ACT_TANH || n->attr.rnn.rec_act > SY_ACT_TANH)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "unknown activation %d or %d", n->attr.rnn.act, n->attr.rnn.rec_act);
    for (int i = 0; n->attr.rnn.general && i < 2; i++)
        if ((unsigned)n->attr.rnn.fn[i].fn >= SY_AF_SCAN_COUNT)
            return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "unknown activation function %d", n->attr.rnn.fn[i].fn);
    n->shape = sy_shape_of(3, x->dims[0], x->dims[1], row(n, x->dims[2], u));
    return SY_OK;
}

static int64_t lstm_row(const sy_node_rec *n, int64_t d, int64_t u) {
    return n->attr.rnn.inference ? u : sy_lstm_layout(d, u, false).width;
}
static int64_t gru_row(const sy_node_rec *n, int64_t d, int64_t u) { return (void)n, (void)d, 5 * u; }

sy_status infer_LSTM_SCAN(sy_graph *g, sy_node_rec *n) { return infer_scan(g, n, 4, 1, lstm_row); }
sy_status infer_GRU_SCAN(sy_graph *g, sy_node_rec *n) { return infer_scan(g, n, 3, 2, gru_row); }

/* (dh (B, T or 1, U), seq, [kernel,] recurrent [, mask] [, steps]): the
 * inputs' count and dh's shape; u receives the units. */
static sy_status check_scan_grad(sy_graph *g, sy_node_rec *n, int weights, int64_t *u) {
    int want = 2 + weights + n->attr.rnn.has_mask + n->attr.rnn.has_steps;
    if (n->n_in != want) return graph_fail(g, n, SY_ERR_INTERNAL, "takes %d inputs here, got %d", want, n->n_in);
    sy_status st = require_float_inputs(g, n, n->n_in);
    if (st) return st;
    const sy_shape *dh = &graph_in_rec(g, n, 0)->shape, *seq = &graph_in_rec(g, n, 1)->shape;
    *u = graph_in_rec(g, n, 1 + weights)->shape.dims[0];
    if (dh->rank != 3 || dh->dims[0] != seq->dims[0] || (dh->dims[1] != seq->dims[1] && dh->dims[1] != 1) ||
        dh->dims[2] != *u)
        return graph_fail(g, n, SY_ERR_SHAPE, "dh must be (batch, steps or 1, units)");
    return SY_OK;
}

/* (dh, seq, kernel, recurrent [, mask]) -> (B, T, the grad row) */
sy_status infer_LSTM_SCAN_GRAD(sy_graph *g, sy_node_rec *n) {
    int64_t u = 0;
    sy_status st = check_scan_grad(g, n, 2, &u);
    if (st) return st;
    const sy_shape *seq = &graph_in_rec(g, n, 1)->shape;
    int64_t d = graph_in_rec(g, n, 2)->shape.dims[0];
    n->shape = sy_shape_of(3, seq->dims[0], seq->dims[1], sy_lstm_layout(d, u, n->attr.rnn.need_dx).grad_width);
    return SY_OK;
}

/* (dh, seq, recurrent [, mask]) -> the preset shape */
sy_status infer_GRU_SCAN_GRAD(sy_graph *g, sy_node_rec *n) {
    int64_t u = 0;
    return check_scan_grad(g, n, 1, &u);
}

/* (seq, grads, kernel (D, 4U)) -> (D + U + 1, 4U) */
sy_status infer_LSTM_SCAN_WGRAD(sy_graph *g, sy_node_rec *n) {
    sy_status st = require_float_inputs(g, n, 3);
    if (st) return st;
    const sy_shape *seq = &graph_in_rec(g, n, 0)->shape, *gr = &graph_in_rec(g, n, 1)->shape,
                   *k = &graph_in_rec(g, n, 2)->shape;
    int64_t d = k->dims[0], u = k->dims[1] / 4;
    sy_lstm_cols l = sy_lstm_layout(d, u, false);
    if (seq->rank != 3 || seq->dims[2] != l.width || gr->rank != 3 || gr->dims[0] != seq->dims[0] ||
        gr->dims[1] != seq->dims[1] || gr->dims[2] < 4 * u)
        return graph_fail(g, n, SY_ERR_SHAPE, "sequence and gradient rows do not match the kernel");
    n->shape = sy_shape_of(2, d + u + 1, 4 * u);
    return SY_OK;
}

/* h(t-1) for every step, (B * T, U), times the mask if there is one: the
 * outputs shifted one step later, with zeros first. */
static sy_node previous_outputs(sy_graph *g, sy_node seq, int64_t h_offset, int64_t u, sy_node mask) {
    sy_shape s = graph_node(g, seq)->shape;
    int64_t b = s.dims[0], t = s.dims[1];
    sy_node zeros = sy_graph_fill(g, graph_node(g, seq)->dtype, sy_shape_of(3, b, (int64_t)1, u), 0.0);
    sy_node prev = zeros;
    if (t > 1) {
        int64_t begin[3] = {0, 0, h_offset}, size[3] = {b, t - 1, u};
        sy_node parts[2] = {zeros, sy_graph_slice(g, seq, begin, size)};
        prev = sy_graph_concat(g, parts, 2, 1);
    }
    if (mask != SY_NONE) prev = sy_graph_mul(g, prev, sy_graph_reshape(g, mask, sy_shape_of(3, b, (int64_t)1, u)));
    return sy_graph_reshape(g, prev, sy_shape_of(2, b * t, u));
}

/* dh (B, T or 1, U): what reaches the scan y through a slice of its h
 * columns, over every step or the last; anything else is refused. */
static sy_node h_gradient(sy_graph *g, sy_node y, sy_node dy, int64_t h_at, int64_t u) {
    const sy_node_rec *d = graph_node(g, dy), *n = graph_node(g, y);
    int64_t t = n->shape.dims[1];
    if (d->op == SY_OP_SLICE_GRAD) {
        const sy_shape *hs = &graph_in_rec(g, d, 0)->shape;
        const int64_t *begin = d->attr.slice.begin;
        bool all = begin[1] == 0 && hs->dims[1] == t, last = begin[1] == t - 1 && hs->dims[1] == 1;
        if (begin[0] == 0 && begin[2] == h_at && hs->dims[2] == u && (all || last)) return graph_input(g, dy, 0);
    }
    graph_fail(g, n, SY_ERR_UNSUPPORTED,
               "the gradient reaches the scan's working state or part of its steps; only h, over every step or at the "
               "last one, is differentiable");
    return SY_NONE;
}

/* GRU: the gradients of x, kernel, recurrent kernel and bias from the gate
 * gradients: dgates (B * T, 3U) of the input side, dinner of the recurrent
 * side. */
static void gru_weight_grads(sy_graph *g, sy_node y, const bool *need, sy_node *dx, sy_node dgates, sy_node dinner,
                             int64_t h_at) {
    const sy_node_rec *n = graph_node(g, y);
    int bi = bias_input(n), mi = mask_input(n);
    sy_node x = graph_input(g, y, 0), kernel = graph_input(g, y, 1), mask = mi >= 0 ? graph_input(g, y, mi) : SY_NONE;
    sy_shape xs = graph_node(g, x)->shape;
    int64_t b = xs.dims[0], t = xs.dims[1], d = xs.dims[2], u = graph_node(g, graph_input(g, y, 2))->shape.dims[0];
    if (need[0]) dx[0] = sy_graph_reshape(g, sy_graph_matmul(g, dgates, kernel, false, true), xs);
    if (need[1]) dx[1] = sy_graph_matmul(g, sy_graph_reshape(g, x, sy_shape_of(2, b * t, d)), dgates, true, false);
    if (need[2]) dx[2] = sy_graph_matmul(g, previous_outputs(g, y, h_at, u, mask), dinner, true, false);
    if (bi >= 0 && need[bi]) { /* (input bias; recurrent bias) */
        int32_t axis0 = 0;
        sy_shape row = sy_shape_of(2, (int64_t)1, 3 * u);
        sy_node rows[2] = {sy_graph_reshape(g, sy_graph_reduce_sum(g, dgates, &axis0, 1, false), row),
                           sy_graph_reshape(g, sy_graph_reduce_sum(g, dinner, &axis0, 1, false), row)};
        dx[bi] = sy_graph_concat(g, rows, 2, 0);
    }
}

static sy_status no_mask_grad(sy_graph *g, sy_node y, const bool *need) {
    int mi = mask_input(graph_node(g, y));
    if (mi >= 0 && need[mi])
        return graph_fail(g, graph_node(g, y), SY_ERR_UNSUPPORTED, "the recurrent dropout mask is not differentiable");
    return SY_OK;
}

/* issue 17, masking: the steps' mask is Keras's boolean mask cast to 0/1: no gradient reaches it (a Masking
 * layer's mask is computed from a tensor that may need one). */
static void steps_grad(sy_graph *g, sy_node y, const bool *need, sy_node *dx) {
    int si = steps_input(graph_node(g, y));
    if (si >= 0 && need[si]) {
        sy_node s = graph_input(g, y, si);
        dx[si] = sy_graph_fill(g, graph_node(g, s)->dtype, graph_node(g, s)->shape, 0.0);
    }
}

/* LSTM: dh from the h slice; the grad op gives the gate gradients and dx
 * per row; lstm_scan_wgrad the weights' gradients, stacked
 * [kernel; recurrent; bias], which slices hand out. */
sy_status grad_LSTM_SCAN(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_status st = no_mask_grad(g, y, need);
    if (st) return st;
    sy_node_rec *n = graph_node(g, y);
    if (n->attr.rnn.inference)
        return graph_fail(g, n, SY_ERR_UNSUPPORTED, "an LSTM scan built for inference keeps no state for a gradient");
    sy_attrs at = n->attr;
    sy_shape ys = n->shape;
    sy_node kernel = graph_input(g, y, 1), recurrent = graph_input(g, y, 2);
    int64_t b = ys.dims[0], t = ys.dims[1], d = graph_node(g, kernel)->shape.dims[0],
            u = graph_node(g, recurrent)->shape.dims[0];
    int mi = mask_input(n), bi = bias_input(n);
    sy_lstm_cols l = sy_lstm_layout(d, u, need[0]);
    sy_node dh = h_gradient(g, y, dy, l.h, u);
    if (dh == SY_NONE) return sy_graph_status(g);
    at.rnn.has_bias = 0;
    at.rnn.need_dx = need[0];
    sy_node in[6] = {dh, y, kernel, recurrent};
    int n_in = 4, si = steps_input(n);
    if (mi >= 0) in[n_in++] = graph_input(g, y, mi);
    if (si >= 0) in[n_in++] = graph_input(g, y, si);
    sy_node grads = graph_add(g, SY_OP_LSTM_SCAN_GRAD, in, n_in, &at, NULL);
    steps_grad(g, y, need, dx);
    if (need[0]) {
        int64_t begin[3] = {0, 0, l.dx}, size[3] = {b, t, d};
        dx[0] = sy_graph_slice(g, grads, begin, size);
    }
    if (need[1] || need[2] || (bi >= 0 && need[bi])) {
        sy_node wg_in[3] = {y, grads, kernel};
        sy_node w = graph_add(g, SY_OP_LSTM_SCAN_WGRAD, wg_in, 3, NULL, NULL);
        int64_t k_begin[2] = {0, 0}, k_size[2] = {d, 4 * u}, r_begin[2] = {d, 0}, r_size[2] = {u, 4 * u},
                b_begin[2] = {d + u, 0}, b_size[2] = {1, 4 * u};
        if (need[1]) dx[1] = sy_graph_slice(g, w, k_begin, k_size);
        if (need[2]) dx[2] = sy_graph_slice(g, w, r_begin, r_size);
        if (bi >= 0 && need[bi])
            dx[bi] = sy_graph_reshape(g, sy_graph_slice(g, w, b_begin, b_size), sy_shape_of(1, 4 * u));
    }
    return sy_graph_status(g);
}

/* GRU: dh from the h slice, the grad op (the gate gradients of the input
 * and of the recurrent side, side by side), then the weights' matmuls. */
sy_status grad_GRU_SCAN(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx) {
    sy_status st = no_mask_grad(g, y, need);
    if (st) return st;
    sy_node_rec *n = graph_node(g, y);
    sy_attrs at = n->attr;
    sy_shape ys = n->shape;
    int64_t u = ys.dims[2] / 5, b = ys.dims[0], t = ys.dims[1], gu = 3 * u, h_at = 4 * u;
    int mi = mask_input(n);
    sy_node dh = h_gradient(g, y, dy, h_at, u);
    if (dh == SY_NONE) return sy_graph_status(g);
    at.rnn.has_bias = 0;
    sy_node in[5] = {dh, y, graph_input(g, y, 2)};
    int n_in = 3, si = steps_input(n);
    if (mi >= 0) in[n_in++] = graph_input(g, y, mi);
    if (si >= 0) in[n_in++] = graph_input(g, y, si);
    sy_shape gs = sy_shape_of(3, b, t, 2 * gu), flat = sy_shape_of(2, b * t, gu);
    sy_node grads = graph_add(g, SY_OP_GRU_SCAN_GRAD, in, n_in, &at, &gs);
    steps_grad(g, y, need, dx);
    int64_t begin_x[3] = {0, 0, 0}, begin_inner[3] = {0, 0, gu}, size[3] = {b, t, gu};
    sy_node dgates = sy_graph_reshape(g, sy_graph_slice(g, grads, begin_x, size), flat);
    sy_node dinner = sy_graph_reshape(g, sy_graph_slice(g, grads, begin_inner, size), flat);
    gru_weight_grads(g, y, need, dx, dgates, dinner, h_at);
    return sy_graph_status(g);
}

/* The column of h in a scan's rows (the layers slice it out). */
int64_t graph_scan_h_column(const sy_graph *g, sy_node scan) {
    const sy_node_rec *n = graph_node(g, scan);
    int64_t d = graph_node(g, graph_input(g, scan, 1))->shape.dims[0];
    int64_t u = graph_node(g, graph_input(g, scan, 2))->shape.dims[0];
    if (n->op == SY_OP_LSTM_SCAN) return n->attr.rnn.inference ? 0 : sy_lstm_layout(d, u, false).h;
    return 4 * u;
}
