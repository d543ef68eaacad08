/*
 * conv2d.c - Conv2D: y = activation(conv(x, kernel) + bias) over NHWC
 * inputs, kernel (kh, kw, in_channels, filters) (Keras's channels_last and
 * HWIO layouts), padding valid or same as TensorFlow pads.
 */
#include "../keras_internal.h"

static sy_status conv2d_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->filters <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Conv2D): filters must be positive, got %d", name, l->filters);
    if (l->kernel_size[0] <= 0 || l->kernel_size[1] <= 0 || l->strides[0] <= 0 || l->strides[1] <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv2D): kernel_size (%d, %d) and strides (%d, %d) must be positive", name,
                        l->kernel_size[0], l->kernel_size[1], l->strides[0], l->strides[1]);
    if (l->padding != SY_PADDING_VALID && l->padding != SY_PADDING_SAME)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Conv2D): padding must be 'valid' or 'same'", name);
    if (in->rank != 3)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Conv2D): expected an input of shape (None, height, width, channels), got %s", name,
                        keras_shape_str(in, s, sizeof s));
    int64_t oh, ow, pad;
    sy_conv_out(in->dims[0], l->kernel_size[0], l->strides[0], l->padding, &oh, &pad);
    sy_conv_out(in->dims[1], l->kernel_size[1], l->strides[1], l->padding, &ow, &pad);
    if (oh <= 0 || ow <= 0)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Conv2D): the %dx%d kernel does not fit in the input %s with padding 'valid'; "
                        "the output would be empty",
                        name, l->kernel_size[0], l->kernel_size[1], keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(3, oh, ow, (int64_t)l->filters);
    return SY_OK;
}

static int conv2d_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    w[0] = (layer_weight){.name = "kernel",
                          .shape = sy_shape_of(4, (int64_t)l->kernel_size[0], (int64_t)l->kernel_size[1], in->dims[2],
                                               (int64_t)l->filters),
                          .init = l->kernel_initializer,
                          .regularizer = l->kernel_regularizer};
    if (!l->use_bias) return 1;
    w[1] = (layer_weight){.name = "bias",
                          .shape = sy_shape_of(1, (int64_t)l->filters),
                          .init = l->bias_initializer,
                          .regularizer = l->bias_regularizer};
    return 2;
}

static sy_node conv2d_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)ctx;
    sy_node h = sy_graph_conv2d(g, x, w[0], l->strides[0], l->strides[1], l->padding);
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[1]);
    return keras_activate(g, l->activation, h);
}

const layer_impl keras_conv2d = {
    .kind = SY_LAYER_CONV2D,
    .class_name = "Conv2D",
    .prefix = "conv2d",
    .output_shape = conv2d_output_shape,
    .weights = conv2d_weights,
    .build = conv2d_build,
};
