/*
 * embedding.c - Embedding: integer word indices (batch, ...) to rows of
 * the embeddings matrix (input_dim, output_dim), (batch, ..., output_dim).
 * A gather; its gradient adds up the rows of repeated indices. Weights
 * start uniform in [-0.05, 0.05], as Keras's. Indices outside
 * [0, input_dim) are refused when the data is checked (fit, evaluate,
 * predict) and, should one get through, fail the step with its position.
 * mask_zero=True (issue 17): index 0 is padding and the output carries
 * the mask ids != 0 (layers/masking.c computes it).
 */
#include "../keras_internal.h"

static sy_status embedding_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->input_dim <= 0 || l->output_dim <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Embedding): input_dim %d and output_dim %d must be positive",
                        name, l->input_dim, l->output_dim);
    if (in->rank < 1 || in->rank >= SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE, "layer '%s' (Embedding): input %s must be (None, length, ...)", name,
                        keras_shape_str(in, s, sizeof s));
    if (l->input_length > 0 && (in->rank != 1 || in->dims[0] != l->input_length))
        return sy_error(SY_ERR_SHAPE, "layer '%s' (Embedding): input_length is %d but the input is %s", name,
                        l->input_length, keras_shape_str(in, s, sizeof s));
    *out = *in;
    out->dims[out->rank++] = l->output_dim;
    return SY_OK;
}

static int embedding_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    (void)in;
    w[0] = (layer_weight){.name = "embeddings",
                          .shape = sy_shape_of(2, (int64_t)l->input_dim, (int64_t)l->output_dim),
                          .init = l->embeddings_initializer,
                          .regularizer = l->embeddings_regularizer};
    return 1;
}

static sy_node embedding_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    (void)l, (void)ctx;
    return sy_graph_gather(g, w[0], x);
}

const layer_impl keras_embedding = {
    .kind = SY_LAYER_EMBEDDING,
    .class_name = "Embedding",
    .prefix = "embedding",
    .output_shape = embedding_output_shape,
    .weights = embedding_weights,
    .build = embedding_build,
};
