/*
 * global_pooling2d.c - GlobalAveragePooling2D and GlobalMaxPooling2D over
 * NHWC inputs: the mean (tf.reduce_mean) or the maximum (tf.reduce_max)
 * over height and width, (None, C), or (None, 1, 1, C) with keepdims. The
 * maximum's gradient is shared by tied maxima, as tf.reduce_max's is (a
 * channel a relu zeroed everywhere spreads it over every pixel), not given
 * to the first as MaxPooling2D's is.
 */
#include "../keras_config.h"

#include <string.h>

static sy_layer global_pool(sy_layer_kind kind) {
    sy_layer l = sy_layer_flatten();
    l.kind = kind;
    return l;
}

sy_layer sy_layer_global_average_pooling2d(void) {
    return global_pool(SY_LAYER_GLOBAL_AVERAGE_POOLING2D);
}
sy_layer sy_layer_global_max_pooling2d(void) {
    return global_pool(SY_LAYER_GLOBAL_MAX_POOLING2D);
}

static sy_status gp_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                 sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (in->rank != 3)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (%s): expected an input of shape (None, height, width, channels), got %s",
            name, sy_layer_class_name(l->kind), keras_shape_str(in, s, sizeof s));
    *out = l->keepdims ? sy_shape_of(3, (int64_t)1, (int64_t)1, in->dims[2])
                       : sy_shape_of(1, in->dims[2]);
    return SY_OK;
}

static sy_node gp_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                        const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    int32_t axes[2] = {1, 2};
    if (l->kind == SY_LAYER_GLOBAL_MAX_POOLING2D)
        return sy_graph_reduce_max(g, in[0], axes, 2, l->keepdims);
    return sy_graph_reduce_mean(g, in[0], axes, 2, l->keepdims);
}

static const char *const gp_keys[] = {"data_format", "keepdims", NULL};

static sy_status gp_json_read(const rd *r, sy_layer *l) {
    sy_status st = rd_data_format(r);
    return st ? st : rd_bool(r, "keepdims", false, &l->keepdims);
}

static void gp_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
    jw_key(w, "keepdims");
    jw_bool(w, l->keepdims);
}

const layer_impl keras_global_average_pooling2d = {
    .kind = SY_LAYER_GLOBAL_AVERAGE_POOLING2D,
    .class_name = "GlobalAveragePooling2D",
    .prefix = "global_average_pooling2d",
    .output_shape = gp_output_shape,
    .weights = NULL,
    .build = gp_build,
    .json_keys = gp_keys,
    .json_read = gp_json_read,
    .json_write = gp_json_write,
    .defaults = sy_layer_global_average_pooling2d,
};

const layer_impl keras_global_max_pooling2d = {
    .kind = SY_LAYER_GLOBAL_MAX_POOLING2D,
    .class_name = "GlobalMaxPooling2D",
    .prefix = "global_max_pooling2d",
    .output_shape = gp_output_shape,
    .weights = NULL,
    .build = gp_build,
    .json_keys = gp_keys,
    .json_read = gp_json_read,
    .json_write = gp_json_write,
    .defaults = sy_layer_global_max_pooling2d,
};
