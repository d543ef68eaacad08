/*
 * flatten.c - Flatten: (batch, d1, d2, ...) -> (batch, d1 * d2 * ...), a
 * view (no copy) in row-major order, as Keras's channels_last Flatten.
 */
#include "../keras_internal.h"

static sy_status flatten_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    (void)l, (void)name;
    *out = sy_shape_of(1, sy_shape_count(in));
    return SY_OK;
}

static sy_node flatten_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)l, (void)w, (void)ctx;
    sy_shape xs = sy_graph_shape(g, x);
    return sy_graph_reshape(g, x, sy_shape_of(2, xs.dims[0], sy_shape_count(&xs) / xs.dims[0]));
}

const layer_impl keras_flatten = {
    .kind = SY_LAYER_FLATTEN,
    .class_name = "Flatten",
    .prefix = "flatten",
    .output_shape = flatten_output_shape,
    .weights = NULL,
    .build = flatten_build,
};
