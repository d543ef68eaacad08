/*
 * spatial_dropout.c - SpatialDropout1D and SpatialDropout2D (issue 17):
 * Dropout that drops whole channels. While training, each (sample,
 * channel) is kept with probability 1 - rate and scaled by 1 / (1 - rate)
 * at every step (1D: input (steps, channels), Keras's noise shape (batch,
 * 1, channels)) or pixel (2D: (height, width, channels), noise (batch, 1,
 * 1, channels)); in evaluation and prediction the identity. The mask is
 * Dropout's -- dropout of ones of the noise shape, seeded by the layer's
 * stream like Dropout's -- multiplied into x.
 */
#include "sequence_layers.h"

static sy_layer spatial(sy_layer_kind kind, double rate) {
    sy_layer l = sy_layer_dropout(rate);
    l.kind = kind;
    return l;
}

sy_layer sy_layer_spatial_dropout1d(double rate) {
    return spatial(SY_LAYER_SPATIAL_DROPOUT1D, rate);
}
sy_layer sy_layer_spatial_dropout2d(double rate) {
    return spatial(SY_LAYER_SPATIAL_DROPOUT2D, rate);
}

static int spatial_rank(const sy_layer *l) {
    return l->kind == SY_LAYER_SPATIAL_DROPOUT1D ? 2 : 3;
}

static sy_status spatial_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                      int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    const char *cls = sy_layer_class_name(l->kind);
    if (!(l->rate >= 0.0 && l->rate < 1.0))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): rate must be in [0, 1), got %g",
                        name, cls, l->rate);
    if (in->rank != spatial_rank(l))
        return sy_error(
            SY_ERR_SHAPE, "layer '%s' (%s): expected an input of shape %s, got %s", name, cls,
            spatial_rank(l) == 2 ? "(None, steps, channels)" : "(None, height, width, channels)",
            keras_shape_str(in, s, sizeof s));
    *out = *in;
    return SY_OK;
}

/* x (B, ..., C) -> the same, whole channels zeroed */
static sy_node spatial_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                             const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w;
    if (!ctx->training || l->rate == 0.0) return in[0];
    sy_shape xs = sy_graph_shape(g, in[0]), ms = xs;
    for (int i = 1; i < ms.rank - 1; i++) ms.dims[i] = 1;
    sy_node mask =
        sy_graph_dropout(g, sy_graph_fill(g, SY_F32, ms, 1.0), (float)l->rate, ctx->seed);
    return sy_graph_mul(g, in[0], mask);
}

static const char *const spatial_keys[] = {"rate",        "noise_shape", "seed",
                                           "data_format", "input_dim",   NULL};

static sy_status spatial_json_read(const rd *r, sy_layer *l) {
    sy_status st;
    float rate32;
    if ((st = rd_float(r, "rate", true, 0, &rate32)) || (st = rd_seed(r, &l->seed)) ||
        (st = rd_data_format(r)))
        return st;
    l->rate = json_number_value(rd_get(r, "rate"));
    return rd_null(r, "noise_shape"); /* Keras sets it from the input: a saved one is always null */
}

static void spatial_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "rate");
    jw_real(w, l->rate, false);
    jw_key(w, "noise_shape");
    jw_null(w);
    jw_seed(w, l->seed);
}

static sy_layer spatial1d_defaults(void) {
    return sy_layer_spatial_dropout1d(0);
}
static sy_layer spatial2d_defaults(void) {
    return sy_layer_spatial_dropout2d(0);
}

const layer_impl keras_spatial_dropout1d = {
    .kind = SY_LAYER_SPATIAL_DROPOUT1D,
    .class_name = "SpatialDropout1D",
    .prefix = "spatial_dropout1d",
    .output_shape = spatial_output_shape,
    .build = spatial_build,
    .json_keys = spatial_keys,
    .json_read = spatial_json_read,
    .json_write = spatial_json_write,
    .defaults = spatial1d_defaults,
};

const layer_impl keras_spatial_dropout2d = {
    .kind = SY_LAYER_SPATIAL_DROPOUT2D,
    .class_name = "SpatialDropout2D",
    .prefix = "spatial_dropout2d",
    .output_shape = spatial_output_shape,
    .build = spatial_build,
    .json_keys = spatial_keys,
    .json_read = spatial_json_read,
    .json_write = spatial_json_write,
    .defaults = spatial2d_defaults,
};
