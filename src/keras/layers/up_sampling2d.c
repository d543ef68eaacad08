/*
 * up_sampling2d.c - UpSampling2D over NHWC inputs: each pixel repeated
 * size_h x size_w times ('nearest'), or interpolated as Keras 2.15 does it
 * through tf.image.resize's bilinear method, with half-pixel centers and no
 * antialiasing ('bilinear'); the upsample2d op computes both.
 */
#include "../keras_config.h"

#include <string.h>

sy_layer sy_layer_up_sampling2d(int32_t size_h, int32_t size_w) {
    sy_layer l = sy_layer_flatten();
    l.kind = SY_LAYER_UP_SAMPLING2D;
    l.size[0] = size_h;
    l.size[1] = size_w;
    return l;
}

static sy_status up_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                 sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->size[0] <= 0 || l->size[1] <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (UpSampling2D): size (%d, %d) must be positive", name,
                        l->size[0], l->size[1]);
    if (in->rank != 3)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (UpSampling2D): expected an input of shape (None, height, "
                        "width, channels), got %s",
                        name, keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(3, in->dims[0] * l->size[0], in->dims[1] * l->size[1], in->dims[2]);
    return SY_OK;
}

static sy_node up_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                        const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    return sy_graph_upsample2d(g, in[0], l->size[0], l->size[1], l->bilinear);
}

static const char *const up_keys[] = {"size", "data_format", "interpolation", NULL};

static sy_status up_json_read(const rd *r, sy_layer *l) {
    sy_status st;
    if ((st = rd_pair(r, "size", false, 2, l->size)) || (st = rd_data_format(r))) return st;
    json_t *v = rd_get(r, "interpolation");
    const char *s = v ? (json_is_string(v) ? json_string_value(v) : NULL) : "nearest";
    if (!s)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "interpolation must be a string, got %s",
                      keras_json_show(v).s);
    if (!strcmp(s, "nearest") || !strcmp(s, "bilinear")) {
        l->bilinear = !strcmp(s, "bilinear");
        return SY_OK;
    }
    return rd_err(r, SY_ERR_UNSUPPORTED,
                  "interpolation %s is not supported (supported: \"nearest\", \"bilinear\")",
                  keras_json_show(v).s);
}

static void up_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "size");
    jw_pair(w, l->size[0], l->size[1]);
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
    jw_key(w, "interpolation");
    jw_str(w, l->bilinear ? "bilinear" : "nearest");
}

static sy_layer up_defaults(void) {
    return sy_layer_up_sampling2d(2, 2);
}

const layer_impl keras_up_sampling2d = {
    .kind = SY_LAYER_UP_SAMPLING2D,
    .class_name = "UpSampling2D",
    .prefix = "up_sampling2d",
    .output_shape = up_output_shape,
    .weights = NULL,
    .build = up_build,
    .json_keys = up_keys,
    .json_read = up_json_read,
    .json_write = up_json_write,
    .defaults = up_defaults,
};
