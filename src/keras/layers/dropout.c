/*
 * dropout.c - Dropout: while training, zero each value with probability
 * `rate` and scale the rest by 1 / (1 - rate); in evaluation and prediction,
 * the identity. The mask is a function of the layer's seed, the replica, the
 * step and the element, so runs are reproducible.
 */
#include "../keras_internal.h"

static sy_status dropout_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    if (!(l->rate >= 0.0f && l->rate < 1.0f))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Dropout): rate must be in [0, 1), got %g", name,
                        (double)l->rate);
    *out = *in;
    return SY_OK;
}

static sy_node dropout_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)w;
    if (!ctx->training || l->rate == 0.0f) return x;
    return sy_graph_dropout(g, x, l->rate, ctx->seed);
}

const layer_impl keras_dropout = {
    .kind = SY_LAYER_DROPOUT,
    .class_name = "Dropout",
    .prefix = "dropout",
    .output_shape = dropout_output_shape,
    .weights = NULL,
    .build = dropout_build,
};
