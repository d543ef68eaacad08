/*
 * dense.c - Dense: y = activation(x . kernel + bias), kernel (in, units).
 *
 * As in Keras, an input of rank > 2 is multiplied along its last axis
 * (tensordot): (batch, ..., in) is viewed as (rows, in), multiplied, and
 * viewed back as (batch, ..., units). The matmul, bias and activation are
 * separate graph ops; the compiler fuses them into one GEMM with an
 * epilogue.
 */
#include "../keras_internal.h"

static sy_status dense_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->units <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Dense): units must be positive, got %d", name, l->units);
    if (in->rank < 1)
        return sy_error(SY_ERR_SHAPE, "layer '%s' (Dense): the input %s has no axis to multiply; Dense needs at least (None, features)",
                        name, keras_shape_str(in, s, sizeof s));
    *out = *in;
    out->dims[out->rank - 1] = l->units;
    return SY_OK;
}

static int dense_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    w[0] = (layer_weight){.name = "kernel",
                          .shape = sy_shape_of(2, in->dims[in->rank - 1], (int64_t)l->units),
                          .init = l->kernel_initializer,
                          .regularizer = l->kernel_regularizer};
    if (!l->use_bias) return 1;
    w[1] = (layer_weight){.name = "bias",
                          .shape = sy_shape_of(1, (int64_t)l->units),
                          .init = l->bias_initializer,
                          .regularizer = l->bias_regularizer};
    return 2;
}

static sy_node dense_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)ctx;
    sy_shape xs = sy_graph_shape(g, x);
    int64_t features = xs.dims[xs.rank - 1];
    sy_node h = xs.rank == 2 ? x : sy_graph_reshape(g, x, sy_shape_of(2, sy_shape_count(&xs) / features, features));
    h = sy_graph_matmul(g, h, w[0], false, false);
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[1]);
    if (xs.rank != 2) {
        sy_shape ys = xs;
        ys.dims[ys.rank - 1] = l->units;
        h = sy_graph_reshape(g, h, ys);
    }
    return keras_activate(g, l->activation, h);
}

const layer_impl keras_dense = {
    .kind = SY_LAYER_DENSE,
    .class_name = "Dense",
    .prefix = "dense",
    .output_shape = dense_output_shape,
    .weights = dense_weights,
    .build = dense_build,
};
