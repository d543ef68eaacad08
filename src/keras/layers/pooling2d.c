/*
 * pooling2d.c - MaxPooling2D and AveragePooling2D over NHWC inputs. Strides
 * default to the pool size (Keras's strides=None); 'same' padding never lets
 * a padded position win a max or count in an average, as TensorFlow does.
 */
#include "../keras_internal.h"

void keras_pool2d_strides(const sy_layer *l, int32_t s[2]) {
    s[0] = l->strides[0] ? l->strides[0] : l->pool_size[0];
    s[1] = l->strides[1] ? l->strides[1] : l->pool_size[1];
}

static sy_status pool_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    const char *cls = sy_layer_class_name(l->kind);
    int32_t st[2];
    keras_pool2d_strides(l, st);
    if (l->pool_size[0] <= 0 || l->pool_size[1] <= 0 || st[0] <= 0 || st[1] <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): pool_size (%d, %d) and strides (%d, %d) must be positive",
                        name, cls, l->pool_size[0], l->pool_size[1], st[0], st[1]);
    if (l->padding != SY_PADDING_VALID && l->padding != SY_PADDING_SAME)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): padding must be 'valid' or 'same'", name, cls);
    if (in->rank != 3)
        return sy_error(SY_ERR_SHAPE, "layer '%s' (%s): expected an input of shape (None, height, width, channels), got %s",
                        name, cls, keras_shape_str(in, s, sizeof s));
    int64_t oh, ow, pad;
    sy_conv_out(in->dims[0], l->pool_size[0], st[0], l->padding, &oh, &pad);
    sy_conv_out(in->dims[1], l->pool_size[1], st[1], l->padding, &ow, &pad);
    if (oh <= 0 || ow <= 0)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (%s): the %dx%d pool does not fit in the input %s with padding 'valid'; the output "
                        "would be empty",
                        name, cls, l->pool_size[0], l->pool_size[1], keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(3, oh, ow, in->dims[2]);
    return SY_OK;
}

static sy_node pool_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)w, (void)ctx;
    int32_t st[2];
    keras_pool2d_strides(l, st);
    if (l->kind == SY_LAYER_MAX_POOLING2D)
        return sy_graph_max_pool2d(g, x, l->pool_size[0], l->pool_size[1], st[0], st[1], l->padding);
    return sy_graph_avg_pool2d(g, x, l->pool_size[0], l->pool_size[1], st[0], st[1], l->padding);
}

const layer_impl keras_max_pooling2d = {
    .kind = SY_LAYER_MAX_POOLING2D,
    .class_name = "MaxPooling2D",
    .prefix = "max_pooling2d",
    .output_shape = pool_output_shape,
    .weights = NULL,
    .build = pool_build,
};
const layer_impl keras_average_pooling2d = {
    .kind = SY_LAYER_AVERAGE_POOLING2D,
    .class_name = "AveragePooling2D",
    .prefix = "average_pooling2d",
    .output_shape = pool_output_shape,
    .weights = NULL,
    .build = pool_build,
};
