/*
 * regularizers.c - Keras's regularizers (L1, L2, L1L2) as graph nodes: the
 * penalties on a layer's weights (kernel_regularizer, bias_regularizer,
 * PReLU's alpha_regularizer, Embedding's embeddings_regularizer) and on its
 * output (activity_regularizer), and their place in the loss.
 *
 * Keras adds every penalty to the loss it minimises and reports, in fit and
 * in evaluate (LossesContainer adds model.losses to the compiled loss). A
 * weight penalty is one scalar per step; an activity penalty is
 * regularizer(y) / batch size (base Layer's _handle_activity_regularization),
 * which is the mean over the samples of each sample's penalty. So both join
 * the per-sample loss: the activity penalty as a per-sample term, the
 * weight penalties added to every sample. The mean of that is Keras's total
 * loss, the train plan differentiates it, and evaluate's mean over the real
 * rows of a padded last batch is Keras's mean over that smaller batch.
 * Which weight has which regularizer comes from the layer's weights()
 * (layer_weight.regularizer), so any layer kind gets its penalties here.
 */
#include "keras_internal.h"

#include <string.h>

sy_regularizer sy_regularizer_l1(float l1) { return (sy_regularizer){.kind = SY_REGULARIZER_L1, .l1 = l1}; }
sy_regularizer sy_regularizer_l2(float l2) { return (sy_regularizer){.kind = SY_REGULARIZER_L2, .l2 = l2}; }
sy_regularizer sy_regularizer_l1_l2(float l1, float l2) {
    return (sy_regularizer){.kind = SY_REGULARIZER_L1L2, .l1 = l1, .l2 = l2};
}

static sy_node add_opt(sy_graph *g, sy_node a, sy_node b) {
    return a == SY_NONE ? b : b == SY_NONE ? a : sy_graph_add(g, a, b);
}

/* factor * sum(f(v)) over `axes` (n 0: all), f = |.| or the square. */
static sy_node term(sy_graph *g, float factor, sy_node v, bool square, const int32_t *axes, int n) {
    sy_node f = square ? sy_graph_mul(g, v, v) : graph_activation(g, v, SY_AF_ABS, 0, 0, 0);
    return sy_graph_mul(g, sy_graph_fill(g, SY_F32, sy_shape_of(0), factor), sy_graph_reduce_sum(g, f, axes, n, false));
}

/* L1L2.__call__: 0, + l1 * sum|v| if l1, + l2 * sum(v^2) if l2. */
static sy_node penalty(sy_graph *g, const sy_regularizer *r, sy_node v, const int32_t *axes, int n) {
    if (r->kind == SY_REGULARIZER_NONE) return SY_NONE;
    sy_node p = SY_NONE;
    if (r->l1 != 0 && r->kind != SY_REGULARIZER_L2) p = term(g, r->l1, v, false, axes, n);
    if (r->l2 != 0 && r->kind != SY_REGULARIZER_L1) p = add_opt(g, p, term(g, r->l2, v, true, axes, n));
    return p;
}

sy_node keras_penalty(sy_graph *g, const sy_regularizer *r, sy_node w) { return penalty(g, r, w, NULL, 0); }

sy_node keras_layer_penalties(sy_graph *g, const sy_layer *l, sy_node x, const sy_node *w, sy_node y, sy_node acc) {
    const layer_impl *impl = layer_impl_of(l->kind);
    if (impl && impl->weights && w) {
        sy_shape xs = sy_graph_shape(g, x), in;
        memset(&in, 0, sizeof in);
        in.rank = xs.rank - 1;
        for (int i = 1; i < xs.rank; i++) in.dims[i - 1] = xs.dims[i];
        layer_weight lw[LAYER_MAX_WEIGHTS];
        memset(lw, 0, sizeof lw);
        int n = impl->weights(l, &in, lw);
        for (int j = 0; j < n; j++) acc = add_opt(g, acc, keras_penalty(g, &lw[j].regularizer, w[j]));
    }
    if (l->activity_regularizer.kind != SY_REGULARIZER_NONE) {
        sy_shape ys = sy_graph_shape(g, y);
        if (ys.rank == 1) { /* (batch,): one value per sample, summed over a unit axis */
            y = sy_graph_reshape(g, y, sy_shape_of(2, ys.dims[0], (int64_t)1));
            ys = sy_graph_shape(g, y);
        }
        int32_t axes[SY_MAX_RANK]; /* every axis but the batch's: each sample's penalty */
        for (int i = 1; i < ys.rank; i++) axes[i - 1] = i;
        acc = add_opt(g, acc, penalty(g, &l->activity_regularizer, y, axes, ys.rank - 1));
    }
    return acc;
}

sy_node keras_regularization_loss(sy_graph *g, sy_node per_example, sy_node penalties) {
    return penalties == SY_NONE ? per_example : sy_graph_add(g, per_example, penalties);
}
