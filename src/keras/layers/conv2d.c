/*
 * conv2d.c - Conv2D: y = activation(conv(x, kernel) + bias) over NHWC
 * inputs, kernel (kh, kw, in_channels / groups, filters) (Keras's
 * channels_last and HWIO layouts), padding valid or same as TensorFlow
 * pads, with dilation_rate and groups as tf.nn.convolution takes them.
 *
 * Also the pieces every conv layer shares (conv_layers.h): the argument
 * checks Keras makes, the output size, and the head of the base Conv
 * class's get_config(), which Conv2D, DepthwiseConv2D, SeparableConv2D and
 * Conv2DTranspose all write in the same order.
 */
#include "conv_layers.h"

#include <string.h>

/* ---- shared by the conv layers ------------------------------------------------------ */

sy_status conv_check(const sy_layer *l, const char *name, const char *cls, const sy_shape *in) {
    char s[SY_SHAPE_STR_MAX];
    if (l->kernel_size[0] <= 0 || l->kernel_size[1] <= 0 || l->strides[0] <= 0 ||
        l->strides[1] <= 0)
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "layer '%s' (%s): kernel_size (%d, %d) and strides (%d, %d) must be positive", name,
            cls, l->kernel_size[0], l->kernel_size[1], l->strides[0], l->strides[1]);
    if (l->dilation_rate[0] < 0 || l->dilation_rate[1] < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (%s): dilation_rate (%d, %d) must be positive", name, cls,
                        l->dilation_rate[0], l->dilation_rate[1]);
    if ((l->strides[0] > 1 || l->strides[1] > 1) &&
        (conv_dilation(l, 0) > 1 || conv_dilation(l, 1) > 1))
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "layer '%s' (%s): `strides > 1` not supported in conjunction with `dilation_rate > 1`. "
            "Received: strides=(%d, %d) and dilation_rate=(%d, %d)",
            name, cls, l->strides[0], l->strides[1], conv_dilation(l, 0), conv_dilation(l, 1));
    if (l->padding != SY_PADDING_VALID && l->padding != SY_PADDING_SAME)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (%s): padding must be 'valid' or 'same'", name, cls);
    if (in->rank != 3)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (%s): expected an input of shape (None, height, width, channels), got %s",
            name, cls, keras_shape_str(in, s, sizeof s));
    return SY_OK;
}

sy_status conv_out_hw(const sy_layer *l, const char *name, const char *cls, const sy_shape *in,
                      int64_t *oh, int64_t *ow) {
    char s[SY_SHAPE_STR_MAX];
    int64_t pad;
    sy_conv_out(in->dims[0], sy_dilated(l->kernel_size[0], conv_dilation(l, 0)), l->strides[0],
                l->padding, oh, &pad);
    sy_conv_out(in->dims[1], sy_dilated(l->kernel_size[1], conv_dilation(l, 1)), l->strides[1],
                l->padding, ow, &pad);
    if (*oh <= 0 || *ow <= 0)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (%s): the %dx%d kernel%s does not fit in the input %s with "
                        "padding 'valid'; "
                        "the output would be empty",
                        name, cls, l->kernel_size[0], l->kernel_size[1],
                        conv_dilation(l, 0) > 1 || conv_dilation(l, 1) > 1 ? " (dilated)" : "",
                        keras_shape_str(in, s, sizeof s));
    return SY_OK;
}

sy_conv2d_options conv_options_of(const sy_layer *l) {
    return (sy_conv2d_options){
        {l->strides[0], l->strides[1]}, l->padding, {conv_dilation(l, 0), conv_dilation(l, 1)}, 1};
}

sy_status conv_json_read(const rd *r, sy_layer *l, bool filters) {
    static const char *const nulls[] = {"bias_constraint", NULL};
    sy_status st;
    int64_t groups;
    /* issue 15, regularizers: Conv2D's bias may carry one; the others' must be null */
    if ((st = l->kind == SY_LAYER_CONV2D ? rd_regularizer(r, "bias_regularizer", &l->bias_regularizer)
                                         : rd_null(r, "bias_regularizer")))
        return st;
    if ((filters && (st = rd_i32(r, "filters", true, 0, 1, &l->filters))) ||
        (st = rd_pair(r, "kernel_size", true, 0, l->kernel_size)) ||
        (st = rd_pair(r, "strides", false, 1, l->strides)) || (st = rd_padding(r, &l->padding)) ||
        (st = rd_data_format(r)) ||
        (st = rd_pair(r, "dilation_rate", false, 1, l->dilation_rate)) ||
        (st = rd_int(r, "groups", false, 1, 1, INT32_MAX, &groups)) ||
        (st = rd_activation(r, "activation", SY_ACTIVATION_LINEAR, false, &l->activation)) ||
        (st = rd_bool(r, "use_bias", true, &l->use_bias)) ||
        (st = rd_init(r, "bias_initializer", l->bias_initializer, &l->bias_initializer)) ||
        (st = rd_nulls(r, nulls)))
        return st;
    l->groups = (int32_t)groups;
    return SY_OK;
}

void conv_json_write(jw *w, const sy_layer *l, bool filters) {
    if (filters) {
        jw_key(w, "filters");
        jw_int(w, l->filters);
    }
    jw_key(w, "kernel_size");
    jw_pair(w, l->kernel_size[0], l->kernel_size[1]);
    jw_key(w, "strides");
    jw_pair(w, l->strides[0], l->strides[1]);
    jw_key(w, "padding");
    jw_str(w, l->padding == SY_PADDING_SAME ? "same" : "valid");
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
    jw_key(w, "dilation_rate");
    jw_pair(w, conv_dilation(l, 0), conv_dilation(l, 1));
    jw_key(w, "groups");
    jw_int(w, conv_groups(l));
    jw_key(w, "activation");
    jw_str(w, sy_activation_name(l->activation));
    jw_key(w, "use_bias");
    jw_bool(w, l->use_bias);
}

void conv_json_init(jw *w, const char *key, const sy_init *init, const char **bad) {
    jw_key(w, key);
    if (!jw_init(w, init) && !*bad) *bad = key;
}

/* ---- Conv2D --------------------------------------------------------------------------- */

static sy_status conv2d_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                     int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->filters <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv2D): filters must be positive, got %d", name, l->filters);
    if (l->groups < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv2D): groups must be positive, got %d", name, l->groups);
    if (l->filters % conv_groups(l))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv2D): The number of filters must be evenly divisible by "
                        "the number of groups. "
                        "Received: groups=%d, filters=%d",
                        name, conv_groups(l), l->filters);
    sy_status st = conv_check(l, name, "Conv2D", in);
    if (st) return st;
    if (in->dims[2] % conv_groups(l))
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (Conv2D): The number of input channels must be evenly divisible by the "
            "number of "
            "groups. Received groups=%d, but the input has %lld channels (full input shape is %s)",
            name, conv_groups(l), (long long)in->dims[2], keras_shape_str(in, s, sizeof s));
    int64_t oh, ow;
    if ((st = conv_out_hw(l, name, "Conv2D", in, &oh, &ow))) return st;
    *out = sy_shape_of(3, oh, ow, (int64_t)l->filters);
    return SY_OK;
}

int conv_kernel_bias(const sy_layer *l, sy_shape kernel, layer_weight *w) {
    w[0] = (layer_weight){
        .name = "kernel", .shape = kernel, .init = l->kernel_initializer, .regularizer = l->kernel_regularizer};
    if (!l->use_bias) return 1;
    w[1] = (layer_weight){.name = "bias",
                          .shape = sy_shape_of(1, (int64_t)l->filters),
                          .init = l->bias_initializer,
                          .regularizer = l->bias_regularizer};
    return 2;
}

static int conv2d_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    return conv_kernel_bias(l,
                            sy_shape_of(4, (int64_t)l->kernel_size[0], (int64_t)l->kernel_size[1],
                                        in->dims[2] / conv_groups(l), (int64_t)l->filters),
                            w);
}

static sy_node conv2d_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                            const sy_node *w, const layer_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    sy_conv2d_options o = conv_options_of(l);
    o.groups = conv_groups(l);
    sy_node h = sy_graph_conv2d_ex(g, in[0], w[0], &o);
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[1]);
    return keras_activate(g, l->activation, h);
}

static const char *const conv2d_keys[] = {CONV_BASE_KEYS, "input_dim", NULL};

static sy_status conv2d_json_read(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_constraint", NULL};
    sy_status st;
    if ((st = conv_json_read(r, l, true)) ||
        (st = rd_regularizer(r, "kernel_regularizer", &l->kernel_regularizer)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)))
        return st;
    return rd_nulls(r, nulls);
}

static void conv2d_json_write(jw *w, const sy_layer *l, const char **bad) {
    conv_json_write(w, l, true);
    conv_json_write_tail(w, l, bad);
}

void conv_json_write_tail(jw *w, const sy_layer *l, const char **bad) {
    static const char *const nulls[] = {"kernel_constraint", "bias_constraint", NULL};
    conv_json_init(w, "kernel_initializer", &l->kernel_initializer, bad);
    conv_json_init(w, "bias_initializer", &l->bias_initializer, bad);
    jw_key(w, "kernel_regularizer");
    jw_regularizer(w, &l->kernel_regularizer);
    jw_key(w, "bias_regularizer");
    jw_regularizer(w, &l->bias_regularizer);
    jw_key(w, "activity_regularizer");
    jw_regularizer(w, &l->activity_regularizer);
    jw_nulls(w, nulls);
}

static sy_layer conv2d_defaults(void) {
    return sy_layer_conv2d(0, 0, 0);
}

const layer_impl keras_conv2d = {
    .kind = SY_LAYER_CONV2D,
    .class_name = "Conv2D",
    .prefix = "conv2d",
    .output_shape = conv2d_output_shape,
    .weights = conv2d_weights,
    .build = conv2d_build,
    .json_keys = conv2d_keys,
    .json_read = conv2d_json_read,
    .json_write = conv2d_json_write,
    .defaults = conv2d_defaults,
};
