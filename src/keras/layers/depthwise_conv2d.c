/*
 * depthwise_conv2d.c - DepthwiseConv2D and SeparableConv2D.
 *
 * DepthwiseConv2D convolves each input channel with depth_multiplier
 * filters of its own: depthwise_kernel (kh, kw, C, M) as Keras stores it,
 * output channel c M + m (tf.nn.depthwise_conv2d's order). In the graph it
 * is a conv2d with groups = C over the same kernel read as (kh, kw, 1,
 * C M) (a reshape, no copy): group c maps input channel c to output
 * channels [c M, (c + 1) M), which is exactly that order, and the cpu
 * backend runs it with its depthwise kernels (never as a dense conv).
 *
 * SeparableConv2D is that depthwise conv (no bias) followed by a 1x1 conv,
 * pointwise_kernel (1, 1, C M, filters), then bias and activation, as
 * tf.nn.separable_conv2d computes it. Its config carries Conv's
 * kernel_initializer too, unused by Keras; it is kept and written back.
 */
#include "conv_layers.h"

#include <string.h>

static sy_status depthwise_check(const sy_layer *l, const char *name, const char *cls,
                                 const sy_shape *in, int64_t *oh, int64_t *ow) {
    if (l->depth_multiplier <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (%s): depth_multiplier must be positive, got %d", name, cls,
                        l->depth_multiplier);
    if (conv_groups(l) != 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): groups must be 1, got %d", name,
                        cls, l->groups);
    sy_status st = conv_check(l, name, cls, in);
    if (st) return st;
    return conv_out_hw(l, name, cls, in, oh, ow);
}

/* x (N, H, W, C) through the depthwise kernel k (kh, kw, C, M). */
static sy_node depthwise(sy_graph *g, const sy_layer *l, sy_node x, sy_node k) {
    sy_shape ks = sy_graph_shape(g, k);
    sy_node k1 = sy_graph_reshape(
        g, k, sy_shape_of(4, ks.dims[0], ks.dims[1], (int64_t)1, ks.dims[2] * ks.dims[3]));
    sy_conv2d_options o = conv_options_of(l);
    o.groups = (int)ks.dims[2];
    return sy_graph_conv2d_ex(g, x, k1, &o);
}

static layer_weight depthwise_kernel(const sy_layer *l, const sy_shape *in) {
    return (layer_weight){.name = "depthwise_kernel",
                          .shape =
                              sy_shape_of(4, (int64_t)l->kernel_size[0], (int64_t)l->kernel_size[1],
                                          in->dims[2], (int64_t)l->depth_multiplier),
                          .init = l->depthwise_initializer};
}

static sy_layer depthwise_base(sy_layer_kind kind, int32_t kernel_h, int32_t kernel_w) {
    sy_layer l = sy_layer_conv2d(0, kernel_h, kernel_w);
    l.kind = kind;
    l.depth_multiplier = 1;
    l.depthwise_initializer = sy_init_glorot_uniform(0);
    l.pointwise_initializer = sy_init_glorot_uniform(0);
    return l;
}

/* ---- DepthwiseConv2D ------------------------------------------------------------------ */

sy_layer sy_layer_depthwise_conv2d(int32_t kernel_h, int32_t kernel_w) {
    return depthwise_base(SY_LAYER_DEPTHWISE_CONV2D, kernel_h, kernel_w);
}

static sy_status dw_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                 sy_shape *out) {
    (void)n_in;
    int64_t oh, ow;
    sy_status st = depthwise_check(l, name, "DepthwiseConv2D", in, &oh, &ow);
    if (st) return st;
    *out = sy_shape_of(3, oh, ow, in->dims[2] * l->depth_multiplier);
    return SY_OK;
}

static int dw_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    w[0] = depthwise_kernel(l, in);
    if (!l->use_bias) return 1;
    w[1] = (layer_weight){.name = "bias",
                          .shape = sy_shape_of(1, in->dims[2] * l->depth_multiplier),
                          .init = l->bias_initializer};
    return 2;
}

static sy_node dw_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                        const sy_node *w, const layer_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    sy_node h = depthwise(g, l, in[0], w[0]);
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[1]);
    return keras_activate(g, l->activation, h);
}

static const char *const dw_keys[] = {"kernel_size",
                                      "strides",
                                      "padding",
                                      "data_format",
                                      "dilation_rate",
                                      "groups",
                                      "activation",
                                      "use_bias",
                                      "bias_initializer",
                                      "bias_regularizer",
                                      "bias_constraint",
                                      "depth_multiplier",
                                      "depthwise_initializer",
                                      "depthwise_regularizer",
                                      "depthwise_constraint",
                                      NULL};

/* groups is Conv's argument, which Keras's depthwise layers write as 1. */
static sy_status read_groups_one(const rd *r, const sy_layer *l) {
    if (l->groups != 1)
        return rd_err(r, SY_ERR_UNSUPPORTED, "groups %s is not supported (supported: 1)",
                      keras_json_show(rd_get(r, "groups")).s);
    return SY_OK;
}

static sy_status dw_json_read(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"depthwise_regularizer", "depthwise_constraint", NULL};
    sy_status st;
    if ((st = conv_json_read(r, l, false)) || (st = read_groups_one(r, l)) ||
        (st = rd_i32(r, "depth_multiplier", false, 1, 1, &l->depth_multiplier)) ||
        (st = rd_init(r, "depthwise_initializer", l->depthwise_initializer,
                      &l->depthwise_initializer)))
        return st;
    return rd_nulls(r, nulls);
}

static void dw_json_write(jw *w, const sy_layer *l, const char **bad) {
    static const char *const nulls[] = {"bias_regularizer", "activity_regularizer",
                                        "bias_constraint", NULL};
    static const char *const nulls2[] = {"depthwise_regularizer", "depthwise_constraint", NULL};
    conv_json_write(w, l, false);
    conv_json_init(w, "bias_initializer", &l->bias_initializer, bad);
    jw_nulls(w, nulls);
    jw_key(w, "depth_multiplier");
    jw_int(w, l->depth_multiplier);
    conv_json_init(w, "depthwise_initializer", &l->depthwise_initializer, bad);
    jw_nulls(w, nulls2);
}

static sy_layer dw_defaults(void) {
    return sy_layer_depthwise_conv2d(0, 0);
}

const layer_impl keras_depthwise_conv2d = {
    .kind = SY_LAYER_DEPTHWISE_CONV2D,
    .class_name = "DepthwiseConv2D",
    .prefix = "depthwise_conv2d",
    .output_shape = dw_output_shape,
    .weights = dw_weights,
    .build = dw_build,
    .json_keys = dw_keys,
    .json_read = dw_json_read,
    .json_write = dw_json_write,
    .defaults = dw_defaults,
};

/* ---- SeparableConv2D ------------------------------------------------------------------ */

sy_layer sy_layer_separable_conv2d(int32_t filters, int32_t kernel_h, int32_t kernel_w) {
    sy_layer l = depthwise_base(SY_LAYER_SEPARABLE_CONV2D, kernel_h, kernel_w);
    l.filters = filters;
    return l;
}

static sy_status sep_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                  sy_shape *out) {
    (void)n_in;
    if (l->filters <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (SeparableConv2D): filters must be positive, got %d", name,
                        l->filters);
    int64_t oh, ow;
    sy_status st = depthwise_check(l, name, "SeparableConv2D", in, &oh, &ow);
    if (st) return st;
    *out = sy_shape_of(3, oh, ow, (int64_t)l->filters);
    return SY_OK;
}

static int sep_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    w[0] = depthwise_kernel(l, in);
    w[1] =
        (layer_weight){.name = "pointwise_kernel",
                       .shape = sy_shape_of(4, (int64_t)1, (int64_t)1,
                                            in->dims[2] * l->depth_multiplier, (int64_t)l->filters),
                       .init = l->pointwise_initializer};
    if (!l->use_bias) return 2;
    w[2] = (layer_weight){
        .name = "bias", .shape = sy_shape_of(1, (int64_t)l->filters), .init = l->bias_initializer};
    return 3;
}

static sy_node sep_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                         const sy_node *w, const layer_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    sy_node h = sy_graph_conv2d(g, depthwise(g, l, in[0], w[0]), w[1], 1, 1, SY_PADDING_VALID);
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[2]);
    return keras_activate(g, l->activation, h);
}

static const char *const sep_keys[] = {CONV_BASE_KEYS,          "depth_multiplier",      "depthwise_initializer",
                                       "pointwise_initializer", "depthwise_regularizer", "pointwise_regularizer",
                                       "depthwise_constraint",  "pointwise_constraint",  NULL};

static sy_status sep_json_read(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_regularizer",
                                        "kernel_constraint",
                                        "depthwise_regularizer",
                                        "pointwise_regularizer",
                                        "depthwise_constraint",
                                        "pointwise_constraint",
                                        NULL};
    sy_status st;
    if ((st = conv_json_read(r, l, true)) || (st = read_groups_one(r, l)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)) ||
        (st = rd_i32(r, "depth_multiplier", false, 1, 1, &l->depth_multiplier)) ||
        (st = rd_init(r, "depthwise_initializer", l->depthwise_initializer,
                      &l->depthwise_initializer)) ||
        (st = rd_init(r, "pointwise_initializer", l->pointwise_initializer,
                      &l->pointwise_initializer)))
        return st;
    return rd_nulls(r, nulls);
}

static void sep_json_write(jw *w, const sy_layer *l, const char **bad) {
    static const char *const nulls[] = {"kernel_regularizer",   "bias_regularizer",
                                        "activity_regularizer", "kernel_constraint",
                                        "bias_constraint",      NULL};
    static const char *const nulls2[] = {"depthwise_regularizer", "pointwise_regularizer",
                                         "depthwise_constraint", "pointwise_constraint", NULL};
    conv_json_write(w, l, true);
    conv_json_init(w, "kernel_initializer", &l->kernel_initializer, bad);
    conv_json_init(w, "bias_initializer", &l->bias_initializer, bad);
    jw_nulls(w, nulls);
    jw_key(w, "depth_multiplier");
    jw_int(w, l->depth_multiplier);
    conv_json_init(w, "depthwise_initializer", &l->depthwise_initializer, bad);
    conv_json_init(w, "pointwise_initializer", &l->pointwise_initializer, bad);
    jw_nulls(w, nulls2);
}

static sy_layer sep_defaults(void) {
    return sy_layer_separable_conv2d(0, 0, 0);
}

const layer_impl keras_separable_conv2d = {
    .kind = SY_LAYER_SEPARABLE_CONV2D,
    .class_name = "SeparableConv2D",
    .prefix = "separable_conv2d",
    .output_shape = sep_output_shape,
    .weights = sep_weights,
    .build = sep_build,
    .json_keys = sep_keys,
    .json_read = sep_json_read,
    .json_write = sep_json_write,
    .defaults = sep_defaults,
};
