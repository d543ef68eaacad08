/*
 * conv2d_transpose.c - Conv2DTranspose: the transpose (gradient) of a
 * Conv2D, y = activation(conv2d_transpose(x, kernel) + bias), kernel
 * (kh, kw, filters, in_channels) as Keras stores it (a Conv2D kernel read
 * the other way round).
 *
 * The output size is Keras's deconv_output_length: without output_padding
 * H s + max(k - s, 0) for 'valid' and H s for 'same'; with it
 * (H - 1) s + k - 2 pad + output_padding, pad k // 2 for 'same' and 0 for
 * 'valid'. TensorFlow then computes conv2d_backprop_input for a conv whose
 * input has that size, so the graph op is conv2d_backprop_input (which is
 * differentiable for this reason), with TensorFlow's own padding for that
 * size. dilation_rate must be 1: Keras sends a dilated transpose through
 * tf.nn.atrous_conv2d_transpose with the first rate for both axes.
 */
#include "conv_layers.h"

#include <string.h>

sy_layer sy_layer_conv2d_transpose(int32_t filters, int32_t kernel_h, int32_t kernel_w) {
    sy_layer l = sy_layer_conv2d(filters, kernel_h, kernel_w);
    l.kind = SY_LAYER_CONV2D_TRANSPOSE;
    return l;
}

/* Keras's conv_utils.deconv_output_length with dilation 1. */
static int64_t deconv_length(int64_t in, int64_t k, int64_t s, sy_padding padding, bool has_op,
                             int64_t op) {
    if (!has_op) return padding == SY_PADDING_SAME ? in * s : in * s + (k - s > 0 ? k - s : 0);
    int64_t pad = padding == SY_PADDING_SAME ? k / 2 : 0;
    return (in - 1) * s + k - 2 * pad + op;
}

static sy_status convt_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                    int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->filters <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv2DTranspose): filters must be positive, got %d", name,
                        l->filters);
    if (conv_dilation(l, 0) != 1 || conv_dilation(l, 1) != 1 || conv_groups(l) != 1)
        return sy_error(
            SY_ERR_UNSUPPORTED,
            "layer '%s' (Conv2DTranspose): dilation_rate (%d, %d) and groups %d are not supported "
            "(supported: (1, 1) and 1)",
            name, conv_dilation(l, 0), conv_dilation(l, 1), conv_groups(l));
    sy_status st = conv_check(l, name, "Conv2DTranspose", in);
    if (st) return st;
    if (l->has_output_padding)
        for (int i = 0; i < 2; i++)
            if (l->output_padding[i] < 0 || l->output_padding[i] >= l->strides[i])
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "layer '%s' (Conv2DTranspose): Strides must be greater than output "
                                "padding. Received "
                                "strides=(%d, %d), output_padding=(%d, %d).",
                                name, l->strides[0], l->strides[1], l->output_padding[0],
                                l->output_padding[1]);
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        o[i] = deconv_length(in->dims[i], l->kernel_size[i], l->strides[i], l->padding,
                             l->has_output_padding, l->output_padding[i]);
        int64_t back, pad;
        sy_conv_out(o[i], l->kernel_size[i], l->strides[i], l->padding, &back, &pad);
        if (o[i] <= 0 || back != in->dims[i])
            return sy_error(
                SY_ERR_SHAPE,
                "layer '%s' (Conv2DTranspose): an output of %lld %s from the input %s is not what "
                "a "
                "%dx%d conv with strides (%d, %d) and padding '%s' would take back to it; "
                "TensorFlow refuses it too",
                name, (long long)o[i], i ? "columns" : "rows", keras_shape_str(in, s, sizeof s),
                l->kernel_size[0], l->kernel_size[1], l->strides[0], l->strides[1],
                l->padding == SY_PADDING_SAME ? "same" : "valid");
    }
    *out = sy_shape_of(3, o[0], o[1], (int64_t)l->filters);
    return SY_OK;
}

static int convt_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    w[0] = (layer_weight){.name = "kernel",
                          .shape =
                              sy_shape_of(4, (int64_t)l->kernel_size[0], (int64_t)l->kernel_size[1],
                                          (int64_t)l->filters, in->dims[2]),
                          .init = l->kernel_initializer};
    if (!l->use_bias) return 1;
    w[1] = (layer_weight){
        .name = "bias", .shape = sy_shape_of(1, (int64_t)l->filters), .init = l->bias_initializer};
    return 2;
}

static sy_node convt_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                           const sy_node *w, const layer_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    sy_shape xs = sy_graph_shape(g, in[0]);
    int64_t oh = deconv_length(xs.dims[1], l->kernel_size[0], l->strides[0], l->padding,
                               l->has_output_padding, l->output_padding[0]);
    int64_t ow = deconv_length(xs.dims[2], l->kernel_size[1], l->strides[1], l->padding,
                               l->has_output_padding, l->output_padding[1]);
    sy_conv2d_options o = conv_options_of(l);
    sy_node h = sy_graph_conv2d_transpose(g, in[0], w[0], oh, ow, &o);
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[1]);
    return keras_activate(g, l->activation, h);
}

static const char *const convt_keys[] = {CONV_BASE_KEYS, "output_padding", NULL};

static sy_status convt_json_read(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_regularizer", "kernel_constraint", NULL};
    sy_status st;
    if ((st = conv_json_read(r, l, true)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)) ||
        (st = rd_nulls(r, nulls)))
        return st;
    json_t *v = rd_get(r, "output_padding");
    l->has_output_padding = v && !json_is_null(v);
    if (!l->has_output_padding) return SY_OK;
    json_t *a = json_is_array(v) && json_array_size(v) == 2 ? json_array_get(v, 0) : v;
    json_t *b = json_is_array(v) && json_array_size(v) == 2 ? json_array_get(v, 1) : v;
    if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
        json_integer_value(b) < 0 || json_integer_value(a) > INT32_MAX ||
        json_integer_value(b) > INT32_MAX)
        return rd_err(
            r, SY_ERR_INVALID_ARGUMENT,
            "output_padding must be null, a non-negative integer or a list of two, got %s",
            keras_json_show(v).s);
    l->output_padding[0] = (int32_t)json_integer_value(a);
    l->output_padding[1] = (int32_t)json_integer_value(b);
    return SY_OK;
}

static void convt_json_write(jw *w, const sy_layer *l, const char **bad) {
    static const char *const nulls[] = {"kernel_regularizer",   "bias_regularizer",
                                        "activity_regularizer", "kernel_constraint",
                                        "bias_constraint",      NULL};
    conv_json_write(w, l, true);
    conv_json_init(w, "kernel_initializer", &l->kernel_initializer, bad);
    conv_json_init(w, "bias_initializer", &l->bias_initializer, bad);
    jw_nulls(w, nulls);
    jw_key(w, "output_padding");
    if (l->has_output_padding)
        jw_pair(w, l->output_padding[0], l->output_padding[1]);
    else
        jw_null(w);
}

static sy_layer convt_defaults(void) {
    return sy_layer_conv2d_transpose(0, 0, 0);
}

const layer_impl keras_conv2d_transpose = {
    .kind = SY_LAYER_CONV2D_TRANSPOSE,
    .class_name = "Conv2DTranspose",
    .prefix = "conv2d_transpose",
    .output_shape = convt_output_shape,
    .weights = convt_weights,
    .build = convt_build,
    .json_keys = convt_keys,
    .json_read = convt_json_read,
    .json_write = convt_json_write,
    .defaults = convt_defaults,
};
