/*
 * dropout.c - Dropout: while training, zero each value with probability
 * `rate` and scale the rest by 1 / (1 - rate); in evaluation and prediction,
 * the identity. The mask is a function of the layer's seed, the replica, the
 * step and the element, so runs are reproducible.
 *
 * With a noise_shape (issue 15) the mask has that shape -- Keras's None
 * entries taking the input's dimension -- and is broadcast along the axes
 * where it is 1, so whole rows or channels drop together: the mask is
 * dropout applied to ones of that shape, multiplied into x.
 */
#include "../keras_internal.h"

static sy_status dropout_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    if (!(l->rate >= 0.0f && l->rate < 1.0f))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Dropout): rate must be in [0, 1), got %g", name,
                        (double)l->rate);
    if (l->noise_shape.rank) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        bool ok = l->noise_shape.rank == in->rank + 1;
        for (int i = 1; ok && i < l->noise_shape.rank; i++)
            ok = l->noise_shape.dims[i] < 0 || l->noise_shape.dims[i] == 1 || l->noise_shape.dims[i] == in->dims[i - 1];
        ok = ok && (l->noise_shape.dims[0] < 0 || l->noise_shape.dims[0] == 1);
        if (!ok) {
            int used = snprintf(a, sizeof a, "[");
            for (int i = 0; i < l->noise_shape.rank && used < (int)sizeof a - 1; i++)
                used += l->noise_shape.dims[i] < 0
                            ? snprintf(a + used, sizeof a - (size_t)used, "%sNone", i ? ", " : "")
                            : snprintf(a + used, sizeof a - (size_t)used, "%s%lld", i ? ", " : "", (long long)l->noise_shape.dims[i]);
            if (used < (int)sizeof a - 1) snprintf(a + used, sizeof a - (size_t)used, "]");
            return sy_error(SY_ERR_SHAPE,
                            "layer '%s' (Dropout): noise_shape %s does not fit the input %s: it needs one entry per "
                            "axis, batch first, each None, 1 or the input's dimension (the batch's: None or 1)",
                            name, a, keras_shape_str(in, b, sizeof b));
        }
    }
    *out = *in;
    return SY_OK;
}

static sy_node dropout_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)w;
    if (!ctx->training || l->rate == 0.0f) return x;
    if (!l->noise_shape.rank) return sy_graph_dropout(g, x, l->rate, ctx->seed);
    sy_shape xs = sy_graph_shape(g, x), ms = l->noise_shape;
    for (int i = 0; i < ms.rank; i++)
        if (ms.dims[i] < 0) ms.dims[i] = xs.dims[i];
    sy_node mask = sy_graph_dropout(g, sy_graph_fill(g, SY_F32, ms, 1.0), l->rate, ctx->seed); /* 0 or 1 / (1 - rate) */
    return sy_graph_mul(g, x, mask);
}

const layer_impl keras_dropout = {
    .kind = SY_LAYER_DROPOUT,
    .class_name = "Dropout",
    .prefix = "dropout",
    .output_shape = dropout_output_shape,
    .weights = NULL,
    .build = dropout_build,
};
