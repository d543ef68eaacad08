/*
 * rescaling.c - Rescaling(scale, offset): y = x * scale + offset, as Keras
 * computes it (the two float32 constants, a multiply and then an add, which
 * the compiler fuses into one pass).
 *
 * scale and offset are numbers or lists broadcast against the input as
 * numpy broadcasts them, so a list is one value per channel of the last
 * axis (or a single value). The config keeps them as written -- 2 stays
 * an integer, [1.0, 2.0] a list -- because Keras writes back whatever it
 * was given.
 */
#include "../keras_config.h"

#include <string.h>

sy_numbers sy_numbers_scalar(double v) {
    sy_numbers n;
    memset(&n, 0, sizeof n);
    n.n = 1;
    n.v[0] = v;
    return n;
}

sy_layer sy_layer_rescaling(double scale, double offset) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_RESCALING;
    l.scale = sy_numbers_scalar(scale);
    l.offset = sy_numbers_scalar(offset);
    return l;
}

static sy_layer rescaling_defaults(void) { return sy_layer_rescaling(1.0, 0.0); }

static sy_status rescaling_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    const sy_numbers *v[2] = {&l->scale, &l->offset};
    for (int i = 0; i < 2; i++) {
        if (v[i]->n < 1 || v[i]->n > SY_NUMBERS_MAX)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Rescaling): %s has %d values", name, i ? "offset" : "scale",
                            v[i]->n);
        if (v[i]->list && v[i]->n != 1 && (in->rank < 1 || in->dims[in->rank - 1] != v[i]->n))
            return sy_error(SY_ERR_SHAPE,
                            "layer '%s' (Rescaling): %s has %d values, which do not broadcast against the input %s (one "
                            "per channel of the last axis, or one)",
                            name, i ? "offset" : "scale", v[i]->n, keras_shape_str(in, s, sizeof s));
    }
    *out = *in;
    return SY_OK;
}

/* The float32 constant: a scalar, or (n,) assembled from fills. */
static sy_node constant(sy_graph *g, const sy_numbers *v) {
    if (!v->list || v->n == 1) return sy_graph_fill(g, SY_F32, sy_shape_of(0), (double)(float)v->v[0]);
    sy_node parts[SY_NUMBERS_MAX];
    for (int i = 0; i < v->n; i++) parts[i] = sy_graph_fill(g, SY_F32, sy_shape_of(1, (int64_t)1), (double)(float)v->v[i]);
    return sy_graph_concat(g, parts, v->n, 0);
}

static sy_node rescaling_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w,
                               const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    return sy_graph_add(g, sy_graph_mul(g, in[0], constant(g, &l->scale)), constant(g, &l->offset));
}

static const char *const rescaling_keys[] = {"scale", "offset", NULL};

static sy_status rescaling_read(const rd *r, sy_layer *l) {
    sy_status st;
    if (!rd_get(r, "scale")) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument 'scale' is missing");
    sy_numbers zero = sy_numbers_scalar(0.0);
    if ((st = rd_numbers(r, "scale", l->scale, &l->scale)) || (st = rd_numbers(r, "offset", zero, &l->offset))) return st;
    return SY_OK;
}

static void rescaling_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "scale");
    jw_numbers(w, &l->scale);
    jw_key(w, "offset");
    jw_numbers(w, &l->offset);
}

const layer_impl keras_rescaling = {
    .kind = SY_LAYER_RESCALING,
    .class_name = "Rescaling",
    .prefix = "rescaling",
    .output_shape = rescaling_output_shape,
    .weights = NULL,
    .build = rescaling_build,
    .json_keys = rescaling_keys,
    .json_read = rescaling_read,
    .json_write = rescaling_write,
    .defaults = rescaling_defaults,
};
