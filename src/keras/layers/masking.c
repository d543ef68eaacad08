/*
 * masking.c - Keras's masks (issue 17): the Masking layer, the mask each
 * layer's output carries, and the loss weighted by it.
 *
 * A mask is what tf.keras 2.15 keeps in a tensor's _keras_mask: one
 * boolean per step, here a float (batch, steps) of 0 and 1 beside the
 * tensor, built into the same graph (compile.c keeps one per model node).
 * Where it comes from and where it goes, as Keras's compute_mask does
 * (docs/design/masking.md):
 *
 *   Embedding(mask_zero=True)  ids != 0: a gather of the ids from a column
 *                              (input_dim, 1) of 0 then ones, so no new op;
 *   Masking(mask_value)        any(x != mask_value) over the features:
 *                              max |x - v| scaled past 1 and clipped to
 *                              [0, 1]; the masked steps' features zeroed;
 *   passed on                  Dropout, SpatialDropout1D, Activation,
 *                              Dense, TimeDistributed, the normalization
 *                              and activation layers; the merge layers
 *                              pass the logical and of theirs, and
 *                              Concatenate along the steps concatenates
 *                              them (merge_mask);
 *   consumed                   LSTM, GRU, SimpleRNN, Bidirectional (and
 *                              passed on with return_sequences),
 *                              GlobalAveragePooling1D;
 *   dropped                    every other layer, silently, as TF 2's
 *                              Keras does (Flatten, Conv1D, pooling,
 *                              GlobalMaxPooling1D, Reshape, ...).
 *
 * Softmax given a mask is refused: Keras adds -1e9 to its masked inputs,
 * which only fits when the mask has the input's shape.
 */
#include "sequence_layers.h"

sy_layer sy_layer_masking(double mask_value) {
    sy_layer l = sy_layer_dropout(0);
    l.kind = SY_LAYER_MASKING;
    l.mask_value = mask_value;
    return l;
}

/* (batch, steps) of 0/1 -> (batch, steps, 1), to multiply features */
static sy_node per_feature(sy_graph *g, sy_node mask) {
    sy_shape s = sy_graph_shape(g, mask);
    s.dims[s.rank++] = 1;
    return sy_graph_reshape(g, mask, s);
}

/* x (B, T, C) -> (B, T): 1 where some feature differs from v. max |x - v|
 * times 2^252 (in two factors: float32 stops at 2^128) is at least 1 for
 * any non-zero float, denormals included, and clipping to [0, 1] (relu
 * with max_value 1) leaves 0 or 1. */
static sy_node masking_mask(sy_graph *g, const sy_layer *l, sy_node x) {
    sy_node d =
        sy_graph_sub(g, x, sy_graph_fill(g, SY_F32, sy_shape_of(0), (double)(float)l->mask_value));
    d = graph_activation(g, d, SY_AF_ABS, 0, 0, 0);
    int32_t axis = -1;
    d = sy_graph_reduce_max(g, d, &axis, 1, false);
    sy_node big = sy_graph_fill(g, SY_F32, sy_shape_of(0), 0x1p126);
    d = sy_graph_mul(g, sy_graph_mul(g, d, big), big);
    return graph_activation(g, d, SY_AF_RELU, 0, 1.0f, 0);
}

/* ids (B, ...) -> (B, ...): 1 where the id is not 0 */
static sy_node embedding_mask(sy_graph *g, const sy_layer *l, sy_node ids) {
    sy_node col = sy_graph_fill(g, SY_F32, sy_shape_of(2, (int64_t)1, (int64_t)1), 0.0);
    if (l->input_dim > 1) {
        sy_node parts[2] = {
            col,
            sy_graph_fill(g, SY_F32, sy_shape_of(2, (int64_t)l->input_dim - 1, (int64_t)1), 1.0)};
        col = sy_graph_concat(g, parts, 2, 0);
    }
    return sy_graph_reshape(g, sy_graph_gather(g, col, ids), sy_graph_shape(g, ids));
}

static bool passes_mask(sy_layer_kind k) {
    static const sy_layer_kind on[] = {SY_LAYER_DROPOUT,
                                       SY_LAYER_SPATIAL_DROPOUT1D,
                                       SY_LAYER_ACTIVATION,
                                       SY_LAYER_DENSE,
                                       SY_LAYER_TIME_DISTRIBUTED,
                                       SY_LAYER_BATCH_NORMALIZATION,
                                       SY_LAYER_LAYER_NORMALIZATION,
                                       SY_LAYER_RELU,
                                       SY_LAYER_LEAKY_RELU,
                                       SY_LAYER_PRELU,
                                       SY_LAYER_ELU,
                                       SY_LAYER_MASKING};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
        if (on[i] == k) return true;
    return false;
}

static bool merges_masks(sy_layer_kind k) {
    return k == SY_LAYER_ADD || k == SY_LAYER_SUBTRACT || k == SY_LAYER_MULTIPLY ||
           k == SY_LAYER_AVERAGE || k == SY_LAYER_MAXIMUM || k == SY_LAYER_MINIMUM ||
           k == SY_LAYER_CONCATENATE;
}

static sy_status merge_mask_refused(sy_graph *g, const sy_layer *l, const char *name,
                                    const sy_shape *a, const sy_shape *b) {
    char sa[SY_SHAPE_STR_MAX], sb[SY_SHAPE_STR_MAX];
    return graph_fail(g, NULL, SY_ERR_SHAPE,
                      "layer '%s' (%s): its inputs' masks cannot be merged, as in Keras: %s and %s "
                      "(a mask from an Embedding with mask_zero or a Masking layer; Concatenate "
                      "joins an input without one as all ones of the input's shape)",
                      name, sy_layer_class_name(l->kind), sy_shape_format(a, sa, sizeof sa),
                      sy_shape_format(b, sb, sizeof sb));
}

/* Keras's merge masks. _Merge.compute_mask: the logical and of the masks
 * given (an input without one does not count; all must have one shape).
 * Concatenate.compute_mask: each input's mask with a last axis of 1 added
 * (when it has fewer axes than the input), or all ones of the input's
 * shape for an input without one, concatenated along the layer's axis,
 * then all() over the last axis. Along the last axis that is again the
 * logical and; along another (the steps), the masks are concatenated. */
static sy_status merge_mask(sy_graph *g, const sy_layer *l, const char *name, const sy_node *in,
                            const sy_node *in_mask, int n_in, sy_node *out) {
    int first = 0;
    while (first < n_in && in_mask[first] == SY_NONE) first++;
    if (first == n_in) return SY_OK;
    sy_node piece[LAYER_MAX_INPUTS];
    sy_shape ps[LAYER_MAX_INPUTS];
    ps[0] = sy_shape_of(0);
    for (int i = 0; i < n_in; i++) {
        sy_shape xs = sy_graph_shape(g, in[i]);
        if (l->kind != SY_LAYER_CONCATENATE || in_mask[i] == SY_NONE) {
            piece[i] = in_mask[i] == SY_NONE ? sy_graph_fill(g, SY_F32, xs, 1.0) : in_mask[i];
            ps[i] = l->kind == SY_LAYER_CONCATENATE ? xs : sy_graph_shape(g, in_mask[i]);
            continue;
        }
        ps[i] = sy_graph_shape(g, in_mask[i]);
        piece[i] = in_mask[i];
        if (ps[i].rank < xs.rank) {
            ps[i].dims[ps[i].rank++] = 1;
            piece[i] = sy_graph_reshape(g, in_mask[i], ps[i]);
        }
    }
    if (l->kind != SY_LAYER_CONCATENATE) {
        *out = in_mask[first];
        for (int i = first + 1; i < n_in; i++) {
            if (in_mask[i] == SY_NONE) continue;
            if (!sy_shape_equal(&ps[i], &ps[first]))
                return merge_mask_refused(g, l, name, &ps[first], &ps[i]);
            *out = sy_graph_mul(g, *out, in_mask[i]);
        }
        return sy_graph_status(g);
    }
    int rank = ps[0].rank, axis = l->axis < 0 ? l->axis + rank : l->axis;
    for (int i = 1; i < n_in; i++) {
        bool fits = ps[i].rank == rank;
        for (int d = 0; fits && d < rank; d++) fits = d == axis || ps[i].dims[d] == ps[0].dims[d];
        if (!fits) return merge_mask_refused(g, l, name, &ps[0], &ps[i]);
    }
    /* all() over the last axis of 0/1 values: 1 - max(1 - m) */
    sy_node one = sy_graph_fill(g, SY_F32, sy_shape_of(0), 1.0);
    sy_node cat = n_in == 1 ? piece[0] : sy_graph_concat(g, piece, n_in, axis);
    int32_t last = -1;
    *out = sy_graph_sub(g, one, sy_graph_reduce_max(g, sy_graph_sub(g, one, cat), &last, 1, false));
    return sy_graph_status(g);
}

sy_status keras_output_mask(sy_graph *g, const sy_layer *l, const char *name, const sy_node *in,
                            const sy_node *in_mask, int n_in, sy_node *out) {
    *out = SY_NONE;
    sy_node m = n_in == 1 ? in_mask[0] : SY_NONE;
    switch (l->kind) {
    case SY_LAYER_EMBEDDING:
        if (l->mask_zero) *out = embedding_mask(g, l, in[0]);
        break;
    case SY_LAYER_MASKING:
        *out = masking_mask(g, l, in[0]);
        break;
    case SY_LAYER_LSTM:
    case SY_LAYER_GRU:
    case SY_LAYER_SIMPLE_RNN:
    case SY_LAYER_BIDIRECTIONAL:
        if (l->return_sequences) *out = m;
        break;
    case SY_LAYER_SOFTMAX:
        if (m != SY_NONE)
            return graph_fail(
                g, NULL, SY_ERR_UNSUPPORTED,
                "layer '%s' (Softmax): given a mask (from an Embedding with mask_zero or a Masking "
                "layer before it), which Keras adds to its inputs and which does not fit them "
                "here; "
                "put a layer that drops the mask (Flatten, GlobalMaxPooling1D, ...) before it",
                name);
        break;
    default:
        if (passes_mask(l->kind))
            *out = m;
        else if (merges_masks(l->kind))
            return merge_mask(g, l, name, in, in_mask, n_in, out);
        break;
    }
    return sy_graph_status(g);
}

sy_node keras_steps_mask(sy_graph *g, const layer_ctx *ctx, sy_node x, const char *cls) {
    if (ctx->mask == SY_NONE) return SY_NONE;
    sy_shape ms = sy_graph_shape(g, ctx->mask), xs = sy_graph_shape(g, x);
    if (ms.rank != 2 || xs.rank < 2 || ms.dims[0] != xs.dims[0] || ms.dims[1] != xs.dims[1]) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        graph_fail(
            g, NULL, SY_ERR_SHAPE,
            "%s: its input's mask %s does not fit its input %s: a mask holds one value per step",
            cls, sy_shape_format(&ms, a, sizeof a), sy_shape_format(&xs, b, sizeof b));
        return SY_NONE;
    }
    return ctx->mask;
}

sy_node keras_loss_mask(sy_graph *g, sy_node l, sy_node mask, sy_node real) {
    sy_shape ls = sy_graph_shape(g, l), ms = sy_graph_shape(g, mask);
    if (!sy_shape_equal(&ls, &ms)) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        graph_fail(g, NULL, SY_ERR_SHAPE,
                   "the model's output carries a mask %s (from an Embedding with mask_zero or a "
                   "Masking layer), but "
                   "its loss has one value per %s; a masked output needs a loss per step",
                   sy_shape_format(&ms, a, sizeof a), sy_shape_format(&ls, b, sizeof b));
        return SY_NONE;
    }
    int32_t axes[SY_MAX_RANK];
    for (int i = 1; i < ls.rank; i++) axes[i - 1] = i;
    sy_node per = sy_graph_mul(g, l, mask);
    if (ls.rank > 1) per = sy_graph_reduce_sum(g, per, axes, ls.rank - 1, false);
    /* rows / sum(mask): the mean of the samples' losses is then sum(l mask) / sum(mask), Keras's
     * apply_valid_mask (a batch with nothing unmasked gives NaN there too). evaluate() pads its
     * last batch with rows Keras never sees: they count in neither. */
    sy_node rows = sy_graph_fill(g, SY_F32, sy_shape_of(0), (double)ls.dims[0]);
    if (real != SY_NONE) {
        sy_shape rs = ls;
        for (int i = 1; i < rs.rank; i++) rs.dims[i] = 1;
        mask = sy_graph_mul(g, mask, sy_graph_reshape(g, real, rs));
        rows = sy_graph_reduce_sum(g, real, NULL, 0, false);
    }
    sy_node scale = sy_graph_div(g, rows, sy_graph_reduce_sum(g, mask, NULL, 0, false));
    return sy_graph_mul(g, per, scale);
}

/* ---- the Masking layer ----------------------------------------------------------------- */

static sy_status masking_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                      int n_in, sy_shape *out) {
    (void)l, (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (in->rank < 2)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (Masking): expected an input of shape (None, steps, features), got %s",
            name, keras_shape_str(in, s, sizeof s));
    *out = *in;
    return SY_OK;
}

/* x (B, T, C) -> x with the masked steps' features zeroed, as Keras's inputs * mask */
static sy_node masking_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                             const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    return sy_graph_mul(g, in[0], per_feature(g, masking_mask(g, l, in[0])));
}

static const char *const masking_keys[] = {"mask_value", "input_dim", NULL};

static sy_status masking_json_read(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "mask_value");
    if (v && !json_is_number(v))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "mask_value must be a number, got %s",
                      keras_json_show(v).s);
    l->mask_value = v ? json_number_value(v) : 0.0;
    return SY_OK;
}

static void masking_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "mask_value");
    jw_real(w, l->mask_value, false);
}

static sy_layer masking_defaults(void) {
    return sy_layer_masking(0.0);
}

const layer_impl keras_masking = {
    .kind = SY_LAYER_MASKING,
    .class_name = "Masking",
    .prefix = "masking",
    .output_shape = masking_output_shape,
    .build = masking_build,
    .json_keys = masking_keys,
    .json_read = masking_json_read,
    .json_write = masking_json_write,
    .defaults = masking_defaults,
};
