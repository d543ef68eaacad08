/*
 * wrappers.c - Bidirectional and TimeDistributed (issue 17): layers that
 * hold another layer.
 *
 * The wrapper's sy_layer carries the inner layer's arguments as its own
 * fields, with `wrapped` its kind and `wrapped_name` its name, so it is a
 * plain value like every other layer config; the inner layer is that
 * sy_layer with kind = wrapped (inner_of). Its JSON is Keras's nested
 * {"layer": {"class_name": ..., "config": ...}}, written and read by the
 * same code as a model's layers (keras_layer_config_write,
 * keras_layer_entry_read).
 *
 * Bidirectional(layer) runs an LSTM, GRU or SimpleRNN twice over the same
 * input: forwards, and with go_backwards flipped (Keras's default
 * backward_layer, a copy of the layer). With return_sequences the backward
 * output is reversed along the steps so both align, then they merge:
 * concat (forward first), sum, mul or ave. Weights: the forward layer's,
 * then the backward's, named forward_<inner>/<cell>/kernel ... as Keras
 * names them (bidirectional/forward_lstm/lstm_cell/kernel:0). Each
 * direction has its own dropout stream. A mask (issue 17, masking) goes to
 * both directions unchanged (the backward one reverses it with x); with
 * return_sequences each direction's outputs at masked steps are zeros, as
 * Keras's Bidirectional sets zero_output_for_mask on its layers.
 *
 * TimeDistributed(layer) runs the inner layer on (batch * steps, ...) --
 * a reshape, which costs nothing -- with one set of weights, named as the
 * wrapper's own (time_distributed/kernel:0, as Keras names them).
 */
#include "sequence_layers.h"

#include <string.h>

static sy_layer wrap(sy_layer_kind kind, const sy_layer *inner) {
    sy_layer l = *inner;
    l.kind = kind;
    l.wrapped = inner->kind;
    l.name = NULL;
    l.merge_mode = SY_MERGE_CONCAT;
    l.wrapped_auto_named = false;
    snprintf(l.wrapped_name, sizeof l.wrapped_name, "%s", inner->name ? inner->name : "");
    return l;
}

sy_layer sy_layer_bidirectional(const sy_layer *inner) {
    return wrap(SY_LAYER_BIDIRECTIONAL, inner);
}
sy_layer sy_layer_time_distributed(const sy_layer *inner) {
    return wrap(SY_LAYER_TIME_DISTRIBUTED, inner);
}

/* The inner layer's config: the wrapper's fields with its kind, no input shape. */
static sy_layer inner_of(const sy_layer *l) {
    sy_layer c = *l;
    c.kind = l->wrapped;
    c.name = l->wrapped_name;
    c.input_shape.rank = 0;
    c.wrapped = 0;
    return c;
}

/* ---- names ------------------------------------------------------------------------------ */

int64_t keras_auto_name_count(const sy_model *m, int64_t index, sy_layer_kind kind) {
    int64_t k = 0;
    for (int64_t i = 0; i < index; i++) {
        const model_layer *L = &m->layers[i];
        k += L->cfg.kind == kind && L->auto_named;
        k += L->cfg.wrapped == kind && L->cfg.wrapped_auto_named &&
             (L->cfg.kind == SY_LAYER_BIDIRECTIONAL || L->cfg.kind == SY_LAYER_TIME_DISTRIBUTED);
    }
    return k;
}

void keras_wrapper_name(sy_model *m, int64_t i) {
    sy_layer *l = &m->layers[i].cfg;
    if ((l->kind != SY_LAYER_BIDIRECTIONAL && l->kind != SY_LAYER_TIME_DISTRIBUTED) ||
        l->wrapped_name[0])
        return;
    const layer_impl *impl = layer_impl_of(l->wrapped);
    if (!impl) return; /* refused when built */
    int64_t k = keras_auto_name_count(m, i, l->wrapped);
    if (k == 0)
        snprintf(l->wrapped_name, sizeof l->wrapped_name, "%s", impl->prefix);
    else
        snprintf(l->wrapped_name, sizeof l->wrapped_name, "%s_%lld", impl->prefix, (long long)k);
    l->wrapped_auto_named = true;
}

/* ---- checks --------------------------------------------------------------------------------- */

static bool rnn_kind(sy_layer_kind k) {
    return k == SY_LAYER_LSTM || k == SY_LAYER_GRU || k == SY_LAYER_SIMPLE_RNN;
}

static bool distributable(sy_layer_kind k) {
    static const sy_layer_kind ok[] = {SY_LAYER_DENSE,
                                       SY_LAYER_CONV1D,
                                       SY_LAYER_CONV2D,
                                       SY_LAYER_MAX_POOLING1D,
                                       SY_LAYER_AVERAGE_POOLING1D,
                                       SY_LAYER_MAX_POOLING2D,
                                       SY_LAYER_AVERAGE_POOLING2D,
                                       SY_LAYER_GLOBAL_MAX_POOLING1D,
                                       SY_LAYER_GLOBAL_AVERAGE_POOLING1D,
                                       SY_LAYER_GLOBAL_MAX_POOLING2D,
                                       SY_LAYER_GLOBAL_AVERAGE_POOLING2D,
                                       SY_LAYER_FLATTEN,
                                       SY_LAYER_ACTIVATION,
                                       SY_LAYER_DROPOUT,
                                       SY_LAYER_RESHAPE};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (ok[i] == k) return true;
    return false;
}

static sy_status check_inner(const sy_layer *l, const char *name) {
    const char *cls = sy_layer_class_name(l->kind);
    const layer_impl *impl = layer_impl_of(l->wrapped);
    if (l->kind == SY_LAYER_BIDIRECTIONAL && !rnn_kind(l->wrapped))
        return sy_error(SY_ERR_UNSUPPORTED,
                        "layer '%s' (Bidirectional): the layer it wraps must be LSTM, GRU or "
                        "SimpleRNN, got %s",
                        name, impl ? impl->class_name : "nothing");
    if (l->kind == SY_LAYER_TIME_DISTRIBUTED && !distributable(l->wrapped))
        return sy_error(
            SY_ERR_UNSUPPORTED,
            "layer '%s' (TimeDistributed): %s inside TimeDistributed is not supported; supported: "
            "Dense, "
            "Conv1D, Conv2D, MaxPooling1D, AveragePooling1D, MaxPooling2D, AveragePooling2D, "
            "GlobalMaxPooling1D, GlobalAveragePooling1D, GlobalMaxPooling2D, "
            "GlobalAveragePooling2D, "
            "Flatten, Activation, Dropout, Reshape",
            name, impl ? impl->class_name : "nothing");
    if (l->kind == SY_LAYER_BIDIRECTIONAL && (unsigned)l->merge_mode > SY_MERGE_AVE)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): unknown merge_mode %d", name,
                        cls, (int)l->merge_mode);
    return SY_OK;
}

/* ---- Bidirectional -------------------------------------------------------------------------- */

static sy_status bidi_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                   int n_in, sy_shape *out) {
    sy_status st = check_inner(l, name);
    if (st) return st;
    sy_layer inner = inner_of(l);
    char full[2 * LAYER_NAME_MAX + 16]; /* messages name the inner layer inside the wrapper */
    snprintf(full, sizeof full, "%s/forward_%s", name, l->wrapped_name);
    if ((st = layer_impl_of(l->wrapped)->output_shape(&inner, full, in, n_in, out))) return st;
    if (l->merge_mode == SY_MERGE_CONCAT) out->dims[out->rank - 1] *= 2;
    return SY_OK;
}

/* The names live in a per-thread table until the next call: the model
 * copies them into its variables' names at once. */
static int bidi_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    static _Thread_local char names[LAYER_MAX_WEIGHTS][160];
    sy_layer inner = inner_of(l);
    const layer_impl *impl = layer_impl_of(l->wrapped);
    if (!impl || !impl->weights) return 0;
    layer_weight one[LAYER_MAX_WEIGHTS];
    int n = impl->weights(&inner, in, one);
    for (int d = 0; d < 2; d++)
        for (int j = 0; j < n; j++) {
            char *s = names[d * n + j];
            snprintf(s, sizeof names[0], "%s_%s/%s", d ? "backward" : "forward", l->wrapped_name,
                     one[j].name);
            w[d * n + j] = one[j];
            w[d * n + j].name = s;
        }
    return 2 * n;
}

/* x (B, T, D) -> the merged outputs: (B, [T,] 2U) with concat, else (B, [T,] U) */
static sy_node bidi_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                          const sy_node *w, const layer_ctx *ctx) {
    const layer_impl *impl = layer_impl_of(l->wrapped);
    sy_layer fwd = inner_of(l), bwd = fwd;
    bwd.go_backwards = !fwd.go_backwards;
    layer_weight lw[LAYER_MAX_WEIGHTS];
    sy_shape xs = sy_graph_shape(g, in[0]), sample = sy_shape_of(2, xs.dims[1], xs.dims[2]);
    int n = impl->weights(&fwd, &sample, lw);
    layer_ctx back = *ctx;
    back.seed = sy_mix64(ctx->seed ^ 0xB1D1ull);
    sy_node y = impl->build(g, &fwd, in, n_in, w, ctx);
    sy_node y_rev = impl->build(g, &bwd, in, n_in, w + n, &back);
    if (l->return_sequences) y_rev = sy_graph_reverse(g, y_rev, 1);
    if (l->return_sequences && ctx->mask != SY_NONE) { /* issue 17, masking: zero_output_for_mask */
        sy_shape ms = sy_graph_shape(g, ctx->mask);
        sy_node m = sy_graph_reshape(g, ctx->mask, sy_shape_of(3, ms.dims[0], ms.dims[1], (int64_t)1));
        y = sy_graph_mul(g, y, m);
        y_rev = sy_graph_mul(g, y_rev, m);
    }
    switch (l->merge_mode) {
    case SY_MERGE_SUM:
        return sy_graph_add(g, y, y_rev);
    case SY_MERGE_MUL:
        return sy_graph_mul(g, y, y_rev);
    case SY_MERGE_AVE: /* (y + y_rev) / 2: halving is exact, as Keras's division by 2 */
        return sy_graph_mul(g, sy_graph_add(g, y, y_rev),
                            sy_graph_fill(g, SY_F32, sy_graph_shape(g, y), 0.5));
    default: {
        sy_node both[2] = {y, y_rev};
        return sy_graph_concat(g, both, 2, -1);
    }
    }
}

static const char *const merge_names[] = {"concat", "sum", "mul", "ave"};

/* "layer": the inner entry into l's fields, keeping the wrapper's own. */
static sy_status read_inner(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "layer");
    if (!v) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument 'layer' is missing");
    /* refused before it is read: a wrapper in a wrapper would recurse as deep as hostile JSON nests
     */
    json_t *cn = json_is_object(v) ? json_object_get(v, "class_name") : NULL;
    if (json_is_string(cn) && (!strcmp(json_string_value(cn), "Bidirectional") ||
                               !strcmp(json_string_value(cn), "TimeDistributed")))
        return rd_err(r, SY_ERR_UNSUPPORTED, "a %s inside a wrapper is not supported",
                      json_string_value(cn));
    sy_layer inner;
    sy_status st = keras_layer_entry_read(v, 0, &inner);
    if (st) return st;
    if (inner.input_shape.rank)
        return rd_err(r, SY_ERR_UNSUPPORTED,
                      "the wrapped layer has an input shape of its own; give it to the wrapper");
    if (strlen(inner.name ? inner.name : "") >= sizeof l->wrapped_name)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                      "the wrapped layer's name is longer than %zu characters",
                      sizeof l->wrapped_name - 1);
    sy_layer outer = *l;
    *l = wrap(outer.kind, &inner);
    l->name = outer.name;
    l->input_shape = outer.input_shape;
    return check_inner(l, r->name);
}

static const char *const bidi_keys[] = {"layer", "merge_mode", "backward_layer", "input_dim", NULL};

static sy_status bidi_json_read(const rd *r, sy_layer *l) {
    sy_status st = read_inner(r, l);
    if (st) return st;
    json_t *v = rd_get(r, "backward_layer");
    if (v && !json_is_null(v))
        return rd_err(r, SY_ERR_UNSUPPORTED,
                      "backward_layer is not supported: the backward layer is the layer's copy "
                      "with go_backwards "
                      "flipped (Keras's default)");
    v = rd_get(r, "merge_mode");
    const char *s = v && json_is_string(v) ? json_string_value(v) : v ? NULL : "concat";
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, merge_names[i])) {
            l->merge_mode = (sy_merge_mode)i;
            return SY_OK;
        }
    if (v && json_is_null(v))
        return rd_err(r, SY_ERR_UNSUPPORTED,
                      "merge_mode null (both directions as two outputs) is not supported; use "
                      "concat, sum, mul or ave");
    return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                  "merge_mode must be \"concat\", \"sum\", \"mul\" or \"ave\", got %s",
                  keras_json_show(v).s);
}

static void write_inner(jw *w, const sy_layer *l, const char **bad) {
    sy_layer inner = inner_of(l);
    jw_key(w, "layer");
    jw_open(w, false);
    jw_key(w, "module");
    jw_str(w, "keras.layers");
    jw_key(w, "class_name");
    jw_str(w, sy_layer_class_name(l->wrapped));
    jw_key(w, "config");
    const char *b = keras_layer_config_write(w, &inner, l->wrapped_name);
    if (b && !*bad) *bad = b;
    jw_key(w, "registered_name");
    jw_null(w);
    jw_close(w);
}

static void bidi_json_write(jw *w, const sy_layer *l, const char **bad) {
    write_inner(w, l, bad);
    jw_key(w, "merge_mode");
    jw_str(w, merge_names[(unsigned)l->merge_mode <= SY_MERGE_AVE ? l->merge_mode : 0]);
}

static sy_layer bidi_defaults(void) {
    sy_layer l = sy_layer_lstm(0);
    return sy_layer_bidirectional(&l);
}

const layer_impl keras_bidirectional = {
    .kind = SY_LAYER_BIDIRECTIONAL,
    .class_name = "Bidirectional",
    .prefix = "bidirectional",
    .output_shape = bidi_output_shape,
    .weights = bidi_weights,
    .build = bidi_build,
    .json_keys = bidi_keys,
    .json_read = bidi_json_read,
    .json_write = bidi_json_write,
    .defaults = bidi_defaults,
};

/* ---- TimeDistributed ---------------------------------------------------------------------- */

static sy_status td_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                 sy_shape *out) {
    char s[SY_SHAPE_STR_MAX];
    sy_status st = check_inner(l, name);
    if (st) return st;
    if (in->rank < 2)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (TimeDistributed): expected an input of shape (None, steps, ...), got %s",
            name, keras_shape_str(in, s, sizeof s));
    sy_layer inner = inner_of(l);
    sy_shape step, o;
    step.rank = in->rank - 1;
    for (int i = 0; i < step.rank; i++) step.dims[i] = in->dims[i + 1];
    char full[2 * LAYER_NAME_MAX + 16];
    snprintf(full, sizeof full, "%s/%s", name, l->wrapped_name);
    if ((st = layer_impl_of(l->wrapped)->output_shape(&inner, full, &step, n_in, &o))) return st;
    if (o.rank + 1 >= SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (TimeDistributed): the output would have more than %d axes",
                        name, SY_MAX_RANK);
    out->rank = o.rank + 1;
    out->dims[0] = in->dims[0];
    for (int i = 0; i < o.rank; i++) out->dims[i + 1] = o.dims[i];
    return SY_OK;
}

static int td_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    const layer_impl *impl = layer_impl_of(l->wrapped);
    if (!impl || !impl->weights) return 0;
    sy_layer inner = inner_of(l);
    sy_shape step;
    step.rank = in->rank - 1;
    for (int i = 0; i < step.rank; i++) step.dims[i] = in->dims[i + 1];
    return impl->weights(&inner, &step, w);
}

/* x (B, T, ...) -> (B * T, ...) -> the inner layer -> (B, T, ...') */
static sy_node td_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                        const sy_node *w, const layer_ctx *ctx) {
    sy_layer inner = inner_of(l);
    sy_shape xs = sy_graph_shape(g, in[0]), flat;
    flat.rank = xs.rank - 1;
    flat.dims[0] = xs.dims[0] * xs.dims[1];
    for (int i = 2; i < xs.rank; i++) flat.dims[i - 1] = xs.dims[i];
    sy_node x = sy_graph_reshape(g, in[0], flat);
    layer_ctx each = *ctx; /* issue 17, masking: the inner layer sees single steps; the mask passes around it */
    each.mask = SY_NONE;
    sy_node y = layer_impl_of(l->wrapped)->build(g, &inner, &x, n_in, w, &each);
    sy_shape ys = sy_graph_shape(g, y), out;
    out.rank = ys.rank + 1;
    out.dims[0] = xs.dims[0];
    out.dims[1] = xs.dims[1];
    for (int i = 1; i < ys.rank; i++) out.dims[i + 1] = ys.dims[i];
    return sy_graph_reshape(g, y, out);
}

static const char *const td_keys[] = {"layer", "input_dim", NULL};

static void td_json_write(jw *w, const sy_layer *l, const char **bad) {
    write_inner(w, l, bad);
}

static sy_layer td_defaults(void) {
    sy_layer l = sy_layer_dense(0);
    return sy_layer_time_distributed(&l);
}

const layer_impl keras_time_distributed = {
    .kind = SY_LAYER_TIME_DISTRIBUTED,
    .class_name = "TimeDistributed",
    .prefix = "time_distributed",
    .output_shape = td_output_shape,
    .weights = td_weights,
    .build = td_build,
    .json_keys = td_keys,
    .json_read = read_inner,
    .json_write = td_json_write,
    .defaults = td_defaults,
};
