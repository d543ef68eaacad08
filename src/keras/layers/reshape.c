/*
 * reshape.c - Reshape: the same elements in a new shape (batch axis kept),
 * one target dimension may be -1 and is inferred, as in Keras.
 */
#include "../keras_internal.h"

static sy_status reshape_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    const sy_shape *t = &l->target_shape;
    if (t->rank < 1 || t->rank >= SY_MAX_RANK)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Reshape): target_shape must have 1 to %d dimensions, got %d",
                        name, SY_MAX_RANK - 1, t->rank);
    int unknown = -1;
    int64_t known = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] == -1 && unknown < 0) {
            unknown = i;
        } else if (t->dims[i] <= 0) {
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "layer '%s' (Reshape): target_shape %s: dimensions must be positive, with at most one -1", name,
                            sy_shape_format(t, b, sizeof b));
        } else {
            known *= t->dims[i];
        }
    }
    int64_t total = sy_shape_count(in);
    *out = *t;
    if (unknown >= 0) {
        if (total % known != 0)
            return sy_error(SY_ERR_SHAPE, "layer '%s' (Reshape): cannot reshape %s (%lld values per sample) to %s", name,
                            keras_shape_str(in, a, sizeof a), (long long)total, sy_shape_format(t, b, sizeof b));
        out->dims[unknown] = total / known;
    } else if (known != total) {
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Reshape): cannot reshape %s (%lld values per sample) to %s (%lld values)", name,
                        keras_shape_str(in, a, sizeof a), (long long)total, sy_shape_format(t, b, sizeof b),
                        (long long)known);
    }
    return SY_OK;
}

static sy_node reshape_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)w, (void)ctx;
    sy_shape xs = sy_graph_shape(g, x), sample = xs, out;
    sample.rank--;
    for (int i = 0; i < sample.rank; i++) sample.dims[i] = xs.dims[i + 1];
    if (reshape_output_shape(l, "", &sample, 1, &out)) return SY_NONE;
    return sy_graph_reshape(g, x, keras_batch_shape(xs.dims[0], &out));
}

const layer_impl keras_reshape = {
    .kind = SY_LAYER_RESHAPE,
    .class_name = "Reshape",
    .prefix = "reshape",
    .output_shape = reshape_output_shape,
    .weights = NULL,
    .build = reshape_build,
};
