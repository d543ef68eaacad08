/*
 * activation.c - Activation: one of Keras's activations applied elementwise
 * (softmax over the last axis), any input shape.
 */
#include "../keras_internal.h"

static sy_status activation_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if ((unsigned)l->activation > KERAS_ACTIVATION_LAST)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Activation): unknown activation %d", name, (int)l->activation);
    if (l->activation == SY_ACTIVATION_SOFTMAX && in->rank < 1)
        return sy_error(SY_ERR_SHAPE, "layer '%s' (Activation): softmax needs an axis; the input is %s", name,
                        keras_shape_str(in, s, sizeof s));
    *out = *in;
    return SY_OK;
}

static sy_node activation_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)w, (void)ctx;
    return keras_activate(g, l->activation, x);
}

const layer_impl keras_activation_layer = {
    .kind = SY_LAYER_ACTIVATION,
    .class_name = "Activation",
    .prefix = "activation",
    .output_shape = activation_output_shape,
    .weights = NULL,
    .build = activation_build,
};
