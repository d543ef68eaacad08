/*
 * autodiff.c - reverse-mode automatic differentiation as a graph rewrite.
 *
 * Nodes are stored in topological order, so one sweep from the loss down to
 * node 0 visits every consumer before its producers. A node is on the path
 * if the loss depends on it and it depends on a trainable parameter; only
 * those get gradients, so e.g. a first conv layer never computes the
 * gradient of its input image. Each visited node sums the contributions its
 * consumers left (in a fixed order, so results are deterministic) and calls
 * its op's gradient rule, which adds ordinary ops to the graph.
 */
#include "compiler_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct contrib {
    sy_node *items;
    int64_t n, cap;
} contrib;

static bool float_type(sy_dtype t) { return t == SY_F32 || t == SY_F64; }

sy_status autodiff(sy_graph *g, sy_node loss, const sy_node *params, int n_params, sy_node *grads,
                   sy_node *grad_of) {
    int64_t n = g->n_nodes;
    sy_status st = SY_OK;
    bool *depends = sy_calloc((size_t)n, sizeof *depends); /* depends on a trainable param */
    bool *path = sy_calloc((size_t)n, sizeof *path);       /* ... and the loss depends on it */
    contrib *acc = sy_calloc((size_t)n, sizeof *acc);
    sy_node *total = sy_malloc((size_t)n * sizeof *total);
    if (!depends || !path || !acc || !total) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "autodiff: out of memory");
        goto done;
    }
    for (int i = 0; i < n_params; i++) depends[params[i]] = true;
    for (int64_t i = 0; i < n; i++) {
        const sy_node_rec *r = &g->nodes[i];
        total[i] = SY_NONE;
        if (!float_type(r->dtype) || (sy_op_def_of(r->op)->flags & SY_OPF_UPDATE)) continue;
        for (int j = 0; j < r->n_in && !depends[i]; j++) depends[i] = depends[graph_input(g, (sy_node)i, j)];
    }
    path[loss] = depends[loss];
    for (int64_t i = loss; i >= 0; i--) {
        if (!path[i]) continue;
        const sy_node_rec *r = &g->nodes[i];
        for (int j = 0; j < r->n_in; j++) {
            sy_node in = graph_input(g, (sy_node)i, j);
            if (depends[in]) path[in] = true;
        }
    }

    /* seed: d loss / d loss = 1 */
    sy_node seed = sy_graph_fill(g, g->nodes[loss].dtype, g->nodes[loss].shape, 1.0);
    if (seed == SY_NONE || SY_GROW(acc[loss].items, acc[loss].cap, 1)) {
        st = sy_graph_status(g) ? sy_graph_status(g) : SY_ERR_OUT_OF_MEMORY;
        goto done;
    }
    acc[loss].items[acc[loss].n++] = seed;

    for (int64_t i = loss; i >= 0; i--) {
        if (!path[i] || acc[i].n == 0) continue;
        /* issue 16, mixed_bfloat16: a bf16 op's gradient ops are bf16 ops too, as TensorFlow's gradients of a
         * bfloat16 op are (the sum of its consumers' gradients included) */
        sy_graph_set_bf16(g, g->nodes[i].bf16);
        sy_node dy = acc[i].items[0];
        for (int64_t j = 1; j < acc[i].n; j++) dy = sy_graph_add(g, dy, acc[i].items[j]);
        if (dy == SY_NONE) {
            st = sy_graph_status(g);
            goto done;
        }
        total[i] = dy;
        sy_node_rec *r = &g->nodes[i];
        if (r->op == SY_OP_PARAM) continue;
        const sy_op_def *def = sy_op_def_of(r->op);
        if (!def->grad) {
            st = graph_fail(g, r, SY_ERR_UNSUPPORTED, "this op has no gradient, but the loss depends on it through a trainable parameter");
            goto done;
        }
        int n_in = r->n_in;
        bool need[64];
        sy_node dx[64];
        if (n_in > 64) {
            st = graph_fail(g, r, SY_ERR_UNSUPPORTED, "autodiff handles at most 64 inputs per op, this one has %d", n_in);
            goto done;
        }
        for (int j = 0; j < n_in; j++) {
            need[j] = path[graph_input(g, (sy_node)i, j)];
            dx[j] = SY_NONE;
        }
        /* issue 16, cost model: a gradient's ops are named in its forward op's layer scope, so plan dumps and
         * `systolic profile` charge the backward pass to the layers */
        char outer[sizeof g->scope];
        memcpy(outer, g->scope, sizeof outer);
        const char *name = g->nodes[i].name, *slash = name ? strrchr(name, '/') : NULL;
        snprintf(g->scope, sizeof g->scope, "%.*s", slash ? (int)(slash - name) : 0, slash ? name : "");
        st = def->grad(g, (sy_node)i, dy, need, dx);
        /* issue 16, mixed_bfloat16: the gradient of a bfloat16 value is bfloat16. Where a float32
         * op reads one (a BatchNormalization, a dtype='float32' layer), Keras casts it up, and the
         * cast's gradient rounds the float32 gradient to bfloat16 -- and a TPU stores it in
         * bfloat16 */
        for (int j = 0; st == SY_OK && j < n_in; j++) {
            const sy_node_rec *x = &g->nodes[graph_input(g, (sy_node)i, j)];
            if (need[j] && dx[j] != SY_NONE && !g->nodes[i].bf16 && x->bf16 && x->dtype == SY_F32 &&
                !(sy_op_def_of(x->op)->flags & SY_OPF_LEAF) && g->nodes[dx[j]].dtype == SY_F32 &&
                !g->nodes[dx[j]].bf16)
                if ((dx[j] = sy_graph_cast_bf16(g, dx[j])) == SY_NONE) st = sy_graph_status(g);
        }
        memcpy(g->scope, outer, sizeof outer);
        if (st != SY_OK) goto done;
        for (int j = 0; j < n_in; j++) {
            if (!need[j]) continue;
            sy_node in = graph_input(g, (sy_node)i, j);
            if (dx[j] == SY_NONE) {
                st = graph_fail(g, &g->nodes[i], SY_ERR_INTERNAL, "gradient rule gave no gradient for input %d", j);
                goto done;
            }
            if (SY_GROW(acc[in].items, acc[in].cap, acc[in].n + 1)) {
                st = SY_ERR_OUT_OF_MEMORY;
                goto done;
            }
            acc[in].items[acc[in].n++] = dx[j];
        }
    }
    for (int i = 0; i < n_params; i++) grads[i] = total[params[i]];
    if (grad_of) memcpy(grad_of, total, (size_t)n * sizeof *grad_of);

done:
    sy_graph_set_bf16(g, false);
    if (acc)
        for (int64_t i = 0; i < n; i++) sy_free(acc[i].items);
    sy_free(acc);
    sy_free(depends);
    sy_free(path);
    sy_free(total);
    return st;
}
