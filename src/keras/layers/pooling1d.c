/*
 * pooling1d.c - MaxPooling1D, AveragePooling1D, GlobalMaxPooling1D and
 * GlobalAveragePooling1D (issue 17) over (batch, steps, channels).
 *
 * The windowed poolings run as the 2D ones on a (batch, 1, steps,
 * channels) view with a (1, pool_size) window -- tf.keras computes them
 * the same way, through an expanded axis -- so 'same' padding never lets a
 * padded step win a max or count in an average, and the max's gradient
 * goes to the first maximum of a window, as TensorFlow's does. Strides
 * default to the pool size (Keras's strides=None), written back as it.
 *
 * The global poolings are tf.reduce_max / tf.reduce_mean over the steps:
 * (None, channels), or (None, 1, channels) with keepdims; the maximum's
 * gradient is shared by tied maxima, as tf.reduce_max's is.
 */
#include "sequence_layers.h"

#include <string.h>

static sy_layer pooling1d(sy_layer_kind kind, int32_t pool_size) {
    sy_layer l = sy_layer_max_pooling2d(1, pool_size);
    l.kind = kind;
    l.pool_size[0] = pool_size;
    return l;
}

sy_layer sy_layer_max_pooling1d(int32_t pool_size) {
    return pooling1d(SY_LAYER_MAX_POOLING1D, pool_size);
}
sy_layer sy_layer_average_pooling1d(int32_t pool_size) {
    return pooling1d(SY_LAYER_AVERAGE_POOLING1D, pool_size);
}

static int32_t pool_stride(const sy_layer *l) {
    return l->strides[0] ? l->strides[0] : l->pool_size[0];
}

static sy_status pool1d_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                     int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    const char *cls = sy_layer_class_name(l->kind);
    sy_status st = seq_check_rank2(name, cls, in);
    if (st) return st;
    if (l->pool_size[0] <= 0 || pool_stride(l) <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (%s): pool_size %d and strides %d must be positive", name, cls,
                        l->pool_size[0], pool_stride(l));
    if (l->padding != SY_PADDING_VALID && l->padding != SY_PADDING_SAME)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (%s): padding must be 'valid' or 'same'", name, cls);
    int64_t steps, pad;
    sy_conv_out(in->dims[0], l->pool_size[0], pool_stride(l), l->padding, &steps, &pad);
    if (steps <= 0)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (%s): the pool of %d steps does not fit in the input %s with "
                        "padding 'valid'; the "
                        "output would be empty",
                        name, cls, l->pool_size[0], keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(2, steps, in->dims[1]);
    return SY_OK;
}

/* x (B, T, C) -> (B, T', C) */
static sy_node pool1d_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                            const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    sy_node x = seq_as_2d(g, in[0]);
    if (l->kind == SY_LAYER_MAX_POOLING1D)
        return seq_from_2d(
            g, sy_graph_max_pool2d(g, x, 1, l->pool_size[0], 1, pool_stride(l), l->padding));
    return seq_from_2d(
        g, sy_graph_avg_pool2d(g, x, 1, l->pool_size[0], 1, pool_stride(l), l->padding));
}

static const char *const pool1d_keys[] = {"strides",     "pool_size", "padding",
                                          "data_format", "input_dim", NULL};

static sy_status pool1d_json_read(const rd *r, sy_layer *l) {
    sy_status st;
    json_t *s = rd_get(r, "strides");
    if ((st = rd_single(r, "pool_size", false, 2, &l->pool_size[0])) ||
        (st = rd_padding(r, &l->padding)) || (st = rd_data_format(r)))
        return st;
    l->strides[0] = 0;
    return s && !json_is_null(s) ? rd_single(r, "strides", false, 0, &l->strides[0]) : SY_OK;
}

static void pool1d_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "strides");
    jw_single(w, pool_stride(l));
    jw_key(w, "pool_size");
    jw_single(w, l->pool_size[0]);
    jw_key(w, "padding");
    jw_str(w, l->padding == SY_PADDING_SAME ? "same" : "valid");
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
}

static sy_layer max_pool1d_defaults(void) {
    return sy_layer_max_pooling1d(2);
}
static sy_layer avg_pool1d_defaults(void) {
    return sy_layer_average_pooling1d(2);
}

const layer_impl keras_max_pooling1d = {
    .kind = SY_LAYER_MAX_POOLING1D,
    .class_name = "MaxPooling1D",
    .prefix = "max_pooling1d",
    .output_shape = pool1d_output_shape,
    .build = pool1d_build,
    .json_keys = pool1d_keys,
    .json_read = pool1d_json_read,
    .json_write = pool1d_json_write,
    .defaults = max_pool1d_defaults,
};

const layer_impl keras_average_pooling1d = {
    .kind = SY_LAYER_AVERAGE_POOLING1D,
    .class_name = "AveragePooling1D",
    .prefix = "average_pooling1d",
    .output_shape = pool1d_output_shape,
    .build = pool1d_build,
    .json_keys = pool1d_keys,
    .json_read = pool1d_json_read,
    .json_write = pool1d_json_write,
    .defaults = avg_pool1d_defaults,
};

/* ---- GlobalMaxPooling1D, GlobalAveragePooling1D -------------------------------------- */

static sy_layer global_pool1d(sy_layer_kind kind) {
    sy_layer l = sy_layer_flatten();
    l.kind = kind;
    return l;
}

sy_layer sy_layer_global_max_pooling1d(void) {
    return global_pool1d(SY_LAYER_GLOBAL_MAX_POOLING1D);
}
sy_layer sy_layer_global_average_pooling1d(void) {
    return global_pool1d(SY_LAYER_GLOBAL_AVERAGE_POOLING1D);
}

static sy_status gp1d_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                   int n_in, sy_shape *out) {
    (void)n_in;
    sy_status st = seq_check_rank2(name, sy_layer_class_name(l->kind), in);
    if (st) return st;
    *out = l->keepdims ? sy_shape_of(2, (int64_t)1, in->dims[1]) : sy_shape_of(1, in->dims[1]);
    return SY_OK;
}

/* x (B, T, C) -> (B, C) or (B, 1, C) */
static sy_node gp1d_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                          const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w;
    int32_t axis = 1;
    if (l->kind == SY_LAYER_GLOBAL_MAX_POOLING1D) /* as Keras's, it ignores a mask */
        return sy_graph_reduce_max(g, in[0], &axis, 1, l->keepdims);
    sy_node m = keras_steps_mask(g, ctx, in[0], "GlobalAveragePooling1D");
    if (ctx->mask != SY_NONE && m == SY_NONE) return SY_NONE;
    if (m != SY_NONE) { /* issue 17, masking: sum(x m) / sum(m) over the steps (a fully masked row: NaN, as Keras's) */
        sy_shape ms = sy_graph_shape(g, m);
        m = sy_graph_reshape(g, m, sy_shape_of(3, ms.dims[0], ms.dims[1], (int64_t)1));
        return sy_graph_div(g, sy_graph_reduce_sum(g, sy_graph_mul(g, in[0], m), &axis, 1, l->keepdims),
                            sy_graph_reduce_sum(g, m, &axis, 1, l->keepdims));
    }
    return sy_graph_reduce_mean(g, in[0], &axis, 1, l->keepdims);
}

static const char *const gp1d_keys[] = {"data_format", "keepdims", "input_dim", NULL};

static sy_status gp1d_json_read(const rd *r, sy_layer *l) {
    sy_status st = rd_data_format(r);
    return st ? st : rd_bool(r, "keepdims", false, &l->keepdims);
}

static void gp1d_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
    jw_key(w, "keepdims");
    jw_bool(w, l->keepdims);
}

static sy_layer gmp1d_defaults(void) {
    return sy_layer_global_max_pooling1d();
}
static sy_layer gap1d_defaults(void) {
    return sy_layer_global_average_pooling1d();
}

const layer_impl keras_global_max_pooling1d = {
    .kind = SY_LAYER_GLOBAL_MAX_POOLING1D,
    .class_name = "GlobalMaxPooling1D",
    .prefix = "global_max_pooling1d",
    .output_shape = gp1d_output_shape,
    .build = gp1d_build,
    .json_keys = gp1d_keys,
    .json_read = gp1d_json_read,
    .json_write = gp1d_json_write,
    .defaults = gmp1d_defaults,
};

const layer_impl keras_global_average_pooling1d = {
    .kind = SY_LAYER_GLOBAL_AVERAGE_POOLING1D,
    .class_name = "GlobalAveragePooling1D",
    .prefix = "global_average_pooling1d",
    .output_shape = gp1d_output_shape,
    .build = gp1d_build,
    .json_keys = gp1d_keys,
    .json_read = gp1d_json_read,
    .json_write = gp1d_json_write,
    .defaults = gap1d_defaults,
};
