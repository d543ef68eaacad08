/*
 * simple_rnn.c - SimpleRNN (issue 17), as tf.keras 2.15's SimpleRNNCell
 * computes it:
 *
 *   h(t) = activation(x(t) . kernel + bias + h(t-1) . recurrent_kernel)
 *
 * over (batch, steps, features), h(-1) = 0, giving the last h (batch,
 * units) or, with return_sequences, every h (batch, steps, units) in
 * processing order. Weights as Keras names them:
 * simple_rnn_cell/kernel (features, units), simple_rnn_cell/
 * recurrent_kernel (units, units), simple_rnn_cell/bias (units);
 * glorot_uniform, orthogonal and zeros to start.
 *
 * The layer is built from ordinary graph ops, unrolled over the steps
 * (what Keras's unroll=True does): one product x . kernel + bias for all
 * steps at once, then per step a slice, a (batch, units) x (units, units)
 * product and the activation. So every backend runs it with its own
 * kernels -- on the emulated TPU the products are the MXU's, rounded to
 * bf16 as LSTM's and GRU's are -- and the gradients are the ops' own. The
 * graph grows by a few nodes a step; a scan op like LSTM's would keep it
 * constant for long sequences (docs/design/sequence-layers.md).
 *
 * dropout multiplies x by a mask fixed over the steps (batch, 1, features)
 * and recurrent_dropout h(t-1) by one (batch, units), as Keras's cell does
 * while training. go_backwards reverses the input. return_state (several
 * outputs) is refused as for LSTM. A mask (issue 17, masking): where a
 * step is masked h(t) = h(t-1), as m h_new + (1 - m) h(t-1) with m 0 or 1,
 * which is exact (Keras's tf.where), reversed with x for go_backwards.
 */
#include "sequence_layers.h"

sy_layer sy_layer_simple_rnn(int32_t units) {
    sy_layer l = sy_layer_lstm(units);
    l.kind = SY_LAYER_SIMPLE_RNN;
    l.unit_forget_bias = false;
    l.reset_after = false;
    return l;
}

static sy_status srnn_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                   int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->units <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (SimpleRNN): units must be positive, got %d", name, l->units);
    if (in->rank != 2)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (SimpleRNN): expected an input of shape (None, steps, features), got %s",
            name, keras_shape_str(in, s, sizeof s));
    if (!(l->dropout >= 0 && l->dropout < 1) ||
        !(l->recurrent_dropout >= 0 && l->recurrent_dropout < 1))
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "layer '%s' (SimpleRNN): dropout %g and recurrent_dropout %g must be in [0, 1)", name,
            (double)l->dropout, (double)l->recurrent_dropout);
    if (l->return_state)
        return sy_error(
            SY_ERR_UNSUPPORTED,
            "layer '%s' (SimpleRNN): return_state=True gives several outputs, which a model here "
            "cannot "
            "pass to its next layer; use return_sequences and slice the last step instead",
            name);
    *out = l->return_sequences ? sy_shape_of(2, in->dims[0], (int64_t)l->units)
                               : sy_shape_of(1, (int64_t)l->units);
    return SY_OK;
}

static int srnn_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    int64_t u = l->units;
    w[0] = (layer_weight){.name = "simple_rnn_cell/kernel",
                          .shape = sy_shape_of(2, in->dims[1], u),
                          .init = l->kernel_initializer};
    w[1] = (layer_weight){.name = "simple_rnn_cell/recurrent_kernel",
                          .shape = sy_shape_of(2, u, u),
                          .init = l->recurrent_initializer};
    if (!l->use_bias) return 2;
    w[2] = (layer_weight){
        .name = "simple_rnn_cell/bias", .shape = sy_shape_of(1, u), .init = l->bias_initializer};
    return 3;
}

/* x (B, T, D), kernel (D, U), recurrent (U, U), bias (U) -> (B, T, U) or (B, U) */
static sy_node srnn_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                          const sy_node *w, const layer_ctx *ctx) {
    (void)n_in;
    sy_node x = in[0];
    sy_shape xs = sy_graph_shape(g, x);
    int64_t b = xs.dims[0], t = xs.dims[1], d = xs.dims[2], u = l->units;
    if (ctx->training && l->dropout > 0) {
        sy_node ones = sy_graph_fill(g, SY_F32, sy_shape_of(3, b, (int64_t)1, d), 1.0);
        x = sy_graph_mul(g, x, sy_graph_dropout(g, ones, l->dropout, ctx->seed));
    }
    sy_node rec_mask = SY_NONE;
    if (ctx->training && l->recurrent_dropout > 0)
        rec_mask = sy_graph_dropout(g, sy_graph_fill(g, SY_F32, sy_shape_of(2, b, u), 1.0),
                                    l->recurrent_dropout, sy_mix64(ctx->seed + 0x2EC));
    sy_node keep = keras_steps_mask(g, ctx, x, "SimpleRNN"); /* issue 17, masking */
    if (ctx->mask != SY_NONE && keep == SY_NONE) return SY_NONE;
    if (l->go_backwards) x = sy_graph_reverse(g, x, 1);
    if (l->go_backwards && keep != SY_NONE) keep = sy_graph_reverse(g, keep, 1);
    sy_node xw =
        sy_graph_matmul(g, sy_graph_reshape(g, x, sy_shape_of(2, b * t, d)), w[0], false, false);
    if (l->use_bias) xw = sy_graph_bias_add(g, xw, w[2]);
    xw = sy_graph_reshape(g, xw, sy_shape_of(3, b, t, u));
    sy_node h = SY_NONE, *outs = l->return_sequences ? sy_malloc((size_t)t * sizeof *outs) : NULL;
    if (l->return_sequences && !outs) return SY_NONE;
    for (int64_t i = 0; i < t; i++) {
        int64_t begin[3] = {0, i, 0}, size[3] = {b, 1, u};
        sy_node z = sy_graph_reshape(g, sy_graph_slice(g, xw, begin, size), sy_shape_of(2, b, u));
        if (h != SY_NONE) {
            sy_node prev = rec_mask != SY_NONE ? sy_graph_mul(g, h, rec_mask) : h;
            z = sy_graph_add(g, z, sy_graph_matmul(g, prev, w[1], false, false));
        }
        sy_node h_new = keras_activate(g, l->activation, z);
        if (keep != SY_NONE) { /* h = m h_new + (1 - m) h(t-1), m (B, 1) */
            int64_t mb[2] = {0, i}, msz[2] = {b, 1};
            sy_node m = sy_graph_slice(g, keep, mb, msz);
            h_new = sy_graph_mul(g, h_new, m);
            sy_node one = sy_graph_fill(g, SY_F32, sy_shape_of(0), 1.0);
            if (h != SY_NONE)
                h_new = sy_graph_add(g, h_new, sy_graph_mul(g, h, sy_graph_sub(g, one, m)));
        }
        h = h_new;
        if (outs) outs[i] = sy_graph_reshape(g, h, sy_shape_of(3, b, (int64_t)1, u));
    }
    if (!outs) return h;
    sy_node y = sy_graph_concat(g, outs, (int)t, 1);
    sy_free(outs);
    return y;
}

static const char *const srnn_keys[] = {"return_sequences",
                                        "return_state",
                                        "go_backwards",
                                        "stateful",
                                        "unroll",
                                        "time_major",
                                        "units",
                                        "activation",
                                        "use_bias",
                                        "kernel_initializer",
                                        "recurrent_initializer",
                                        "bias_initializer",
                                        "kernel_regularizer",
                                        "recurrent_regularizer",
                                        "bias_regularizer",
                                        "kernel_constraint",
                                        "recurrent_constraint",
                                        "bias_constraint",
                                        "dropout",
                                        "recurrent_dropout",
                                        "input_dim",
                                        NULL};

static sy_status srnn_json_read(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_regularizer",
                                        "recurrent_regularizer",
                                        "bias_regularizer",
                                        "kernel_constraint",
                                        "recurrent_constraint",
                                        "bias_constraint",
                                        NULL};
    bool unroll;
    sy_status st;
    if ((st = rd_i32(r, "units", true, 0, 1, &l->units)) ||
        (st = rd_activation(r, "activation", SY_ACTIVATION_TANH, false, &l->activation)) ||
        (st = rd_bool(r, "use_bias", true, &l->use_bias)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)) ||
        (st = rd_init(r, "recurrent_initializer", l->recurrent_initializer,
                      &l->recurrent_initializer)) ||
        (st = rd_init(r, "bias_initializer", l->bias_initializer, &l->bias_initializer)) ||
        (st = rd_nulls(r, nulls)) || (st = rd_float(r, "dropout", false, 0, &l->dropout)) ||
        (st = rd_float(r, "recurrent_dropout", false, 0, &l->recurrent_dropout)) ||
        (st = rd_bool(r, "return_sequences", false, &l->return_sequences)) ||
        (st = rd_bool_only(r, "return_state", false)) ||
        (st = rd_bool(r, "go_backwards", false, &l->go_backwards)) ||
        (st = rd_bool_only(r, "stateful", false)) || (st = rd_bool(r, "unroll", false, &unroll)) ||
        (st = rd_bool_only(r, "time_major", false)))
        return st;
    l->unroll = unroll; /* the graph is unrolled either way: kept to be written back */
    return SY_OK;
}

static void srnn_json_write(jw *w, const sy_layer *l, const char **bad) {
    static const char *const nulls[] = {
        "kernel_regularizer", "recurrent_regularizer", "bias_regularizer", "activity_regularizer",
        "kernel_constraint",  "recurrent_constraint",  "bias_constraint",  NULL};
    keras_rnn_json_head(w, l);
    jw_key(w, "activation");
    jw_str(w, sy_activation_name(l->activation));
    jw_key(w, "use_bias");
    jw_bool(w, l->use_bias);
    jw_key(w, "kernel_initializer");
    if (!jw_init(w, &l->kernel_initializer) && !*bad) *bad = "kernel_initializer";
    jw_key(w, "recurrent_initializer");
    if (!jw_init(w, &l->recurrent_initializer) && !*bad) *bad = "recurrent_initializer";
    jw_key(w, "bias_initializer");
    if (!jw_init(w, &l->bias_initializer) && !*bad) *bad = "bias_initializer";
    jw_nulls(w, nulls);
    jw_key(w, "dropout");
    jw_real(w, l->dropout, true);
    jw_key(w, "recurrent_dropout");
    jw_real(w, l->recurrent_dropout, true);
}

static sy_layer srnn_defaults(void) {
    return sy_layer_simple_rnn(0);
}

const layer_impl keras_simple_rnn = {
    .kind = SY_LAYER_SIMPLE_RNN,
    .class_name = "SimpleRNN",
    .prefix = "simple_rnn",
    .output_shape = srnn_output_shape,
    .weights = srnn_weights,
    .build = srnn_build,
    .json_keys = srnn_keys,
    .json_read = srnn_json_read,
    .json_write = srnn_json_write,
    .defaults = srnn_defaults,
};
