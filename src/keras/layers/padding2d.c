/*
 * padding2d.c - ZeroPadding2D and Cropping2D over NHWC inputs: zeros added
 * around the height and width axes (the pad op), or rows and columns cut
 * from their edges (a slice). Both take Keras's three forms, an int n
 * (n on every side), a pair (symmetric height pad, symmetric width pad) or
 * ((top, bottom), (left, right)), and write the last in their configs.
 */
#include "../keras_config.h"

#include <string.h>

static sy_layer margins_layer(sy_layer_kind kind, int32_t top, int32_t bottom, int32_t left,
                              int32_t right) {
    sy_layer l = sy_layer_flatten();
    l.kind = kind;
    l.margins[0][0] = top;
    l.margins[0][1] = bottom;
    l.margins[1][0] = left;
    l.margins[1][1] = right;
    return l;
}

sy_layer sy_layer_zero_padding2d(int32_t top, int32_t bottom, int32_t left, int32_t right) {
    return margins_layer(SY_LAYER_ZERO_PADDING2D, top, bottom, left, right);
}
sy_layer sy_layer_cropping2d(int32_t top, int32_t bottom, int32_t left, int32_t right) {
    return margins_layer(SY_LAYER_CROPPING2D, top, bottom, left, right);
}

static sy_status margins_check(const sy_layer *l, const char *name, const char *cls,
                               const char *arg, const sy_shape *in) {
    char s[SY_SHAPE_STR_MAX];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (l->margins[i][j] < 0)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "layer '%s' (%s): %s ((%d, %d), (%d, %d)) must not be negative",
                                name, cls, arg, l->margins[0][0], l->margins[0][1],
                                l->margins[1][0], l->margins[1][1]);
    if (in->rank != 3)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (%s): expected an input of shape (None, height, width, channels), got %s",
            name, cls, keras_shape_str(in, s, sizeof s));
    return SY_OK;
}

/* ---- ZeroPadding2D ------------------------------------------------------------------- */

static sy_status zp_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                 sy_shape *out) {
    (void)n_in;
    sy_status st = margins_check(l, name, "ZeroPadding2D", "padding", in);
    if (st) return st;
    *out = sy_shape_of(3, in->dims[0] + l->margins[0][0] + l->margins[0][1],
                       in->dims[1] + l->margins[1][0] + l->margins[1][1], in->dims[2]);
    return SY_OK;
}

static sy_node zp_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                        const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    int64_t before[4] = {0, l->margins[0][0], l->margins[1][0], 0},
            after[4] = {0, l->margins[0][1], l->margins[1][1], 0};
    return sy_graph_pad(g, in[0], before, after);
}

/* ---- Cropping2D ---------------------------------------------------------------------- */

static sy_status crop_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                   int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    sy_status st = margins_check(l, name, "Cropping2D", "cropping", in);
    if (st) return st;
    int64_t h = in->dims[0] - l->margins[0][0] - l->margins[0][1],
            w = in->dims[1] - l->margins[1][0] - l->margins[1][1];
    if (h <= 0 || w <= 0)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (Cropping2D): cropping ((%d, %d), (%d, %d)) leaves nothing of the input %s",
            name, l->margins[0][0], l->margins[0][1], l->margins[1][0], l->margins[1][1],
            keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(3, h, w, in->dims[2]);
    return SY_OK;
}

static sy_node crop_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                          const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    sy_shape xs = sy_graph_shape(g, in[0]);
    int64_t begin[4] = {0, l->margins[0][0], l->margins[1][0], 0};
    int64_t size[4] = {xs.dims[0], xs.dims[1] - l->margins[0][0] - l->margins[0][1],
                       xs.dims[2] - l->margins[1][0] - l->margins[1][1], xs.dims[3]};
    return sy_graph_slice(g, in[0], begin, size);
}

/* ---- their JSON -------------------------------------------------------------------------- */

static bool nonneg(json_t *v) {
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX;
}

/* n, [h, w] or [[top, bottom], [left, right]] under `key`; absent: def. */
static sy_status rd_margins(const rd *r, const char *key, int32_t def, int32_t m[2][2]) {
    json_t *v = rd_get(r, key);
    if (!v) {
        m[0][0] = m[0][1] = m[1][0] = m[1][1] = def;
        return SY_OK;
    }
    if (nonneg(v)) {
        m[0][0] = m[0][1] = m[1][0] = m[1][1] = (int32_t)json_integer_value(v);
        return SY_OK;
    }
    bool ok = json_is_array(v) && json_array_size(v) == 2;
    for (size_t i = 0; ok && i < 2; i++) {
        json_t *a = json_array_get(v, i);
        if (nonneg(a)) {
            m[i][0] = m[i][1] = (int32_t)json_integer_value(a);
        } else if (json_is_array(a) && json_array_size(a) == 2 && nonneg(json_array_get(a, 0)) &&
                   nonneg(json_array_get(a, 1))) {
            m[i][0] = (int32_t)json_integer_value(json_array_get(a, 0));
            m[i][1] = (int32_t)json_integer_value(json_array_get(a, 1));
        } else {
            ok = false;
        }
    }
    if (!ok)
        return rd_err(
            r, SY_ERR_INVALID_ARGUMENT,
            "%s must be a non-negative integer, a list of two, or two lists of two, got %s", key,
            keras_json_show(v).s);
    return SY_OK;
}

static void jw_margins(jw *w, const char *key, const int32_t m[2][2]) {
    jw_key(w, key);
    jw_open(w, true);
    jw_pair(w, m[0][0], m[0][1]);
    jw_pair(w, m[1][0], m[1][1]);
    jw_close(w);
}

static const char *const zp_keys[] = {"padding", "data_format", NULL};
static const char *const crop_keys[] = {"cropping", "data_format", NULL};

static sy_status zp_json_read(const rd *r, sy_layer *l) {
    sy_status st = rd_margins(r, "padding", 1, l->margins);
    return st ? st : rd_data_format(r);
}
static sy_status crop_json_read(const rd *r, sy_layer *l) {
    sy_status st = rd_margins(r, "cropping", 0, l->margins);
    return st ? st : rd_data_format(r);
}

static void zp_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_margins(w, "padding", l->margins);
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
}
static void crop_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_margins(w, "cropping", l->margins);
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
}

static sy_layer zp_defaults(void) {
    return sy_layer_zero_padding2d(1, 1, 1, 1);
}
static sy_layer crop_defaults(void) {
    return sy_layer_cropping2d(0, 0, 0, 0);
}

const layer_impl keras_zero_padding2d = {
    .kind = SY_LAYER_ZERO_PADDING2D,
    .class_name = "ZeroPadding2D",
    .prefix = "zero_padding2d",
    .output_shape = zp_output_shape,
    .weights = NULL,
    .build = zp_build,
    .json_keys = zp_keys,
    .json_read = zp_json_read,
    .json_write = zp_json_write,
    .defaults = zp_defaults,
};

const layer_impl keras_cropping2d = {
    .kind = SY_LAYER_CROPPING2D,
    .class_name = "Cropping2D",
    .prefix = "cropping2d",
    .output_shape = crop_output_shape,
    .weights = NULL,
    .build = crop_build,
    .json_keys = crop_keys,
    .json_read = crop_json_read,
    .json_write = crop_json_write,
    .defaults = crop_defaults,
};
