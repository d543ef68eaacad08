/*
 * recurrent.c - LSTM and GRU, as tf.keras 2.x defines them.
 *
 * Both take (batch, steps, features) and give the last output (batch,
 * units) or, with return_sequences, all of them (batch, steps, units). The
 * layer is built from the graph's scan ops (graph/ops_rnn.c):
 *
 *   x -> [dropout mask, fixed over the steps] -> [reverse, go_backwards]
 *     -> scan: x . kernel + bias for all steps at once (one GEMM), then the
 *        steps with the recurrent kernel [recurrent dropout: a mask on
 *        h(t-1), fixed over the steps]
 *     -> h: the last step, or every step (in processing order, as Keras)
 *
 * Weights and their Keras names: LSTM kernel (features, 4 units), gates in
 * the order i, f, c, o, recurrent_kernel (units, 4 units), bias (4 units);
 * GRU (reset_after, Keras 2's default) kernel (features, 3 units), gates z,
 * r, h, recurrent_kernel (units, 3 units), bias (2, 3 units): the input
 * bias, then the recurrent one. Variables are "<layer>/lstm_cell/kernel" as
 * Keras names them. Initializers: glorot_uniform kernel, orthogonal
 * recurrent kernel, zero bias with the forget gate's quarter at one
 * (unit_forget_bias).
 *
 * return_state gives three tensors (output, h, c), which a Sequential model
 * cannot pass on, so it is refused there, as Keras refuses it.
 *
 * A mask (issue 17, docs/design/masking.md) enters the scan as its steps'
 * mask (batch, steps), reversed with x for go_backwards: a masked step
 * keeps h and c, so its output is the previous one (zeros before the
 * first unmasked step) and the last output is the last unmasked step's,
 * as Keras's backend.rnn with zero_output_for_mask=False.
 */
#include "../keras_internal.h"

static int gates_of(const sy_layer *l) { return l->kind == SY_LAYER_LSTM ? 4 : 3; }

static sy_status rnn_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    const char *cls = sy_layer_class_name(l->kind);
    char s[SY_SHAPE_STR_MAX];
    if (l->units <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): units must be positive, got %d", name, cls, l->units);
    if (in->rank != 2)
        return sy_error(SY_ERR_SHAPE, "layer '%s' (%s): expected an input of shape (None, steps, features), got %s", name,
                        cls, keras_shape_str(in, s, sizeof s));
    if (!(l->dropout >= 0 && l->dropout < 1) || !(l->recurrent_dropout >= 0 && l->recurrent_dropout < 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): dropout %g and recurrent_dropout %g must be in [0, 1)",
                        name, cls, (double)l->dropout, (double)l->recurrent_dropout);
    /* the scans apply their activations inside the cell, elementwise: softmax cannot be one */
    for (int i = 0; i < 2; i++) {
        sy_activation a = i ? l->recurrent_activation : l->activation;
        sy_act_params p;
        if (!keras_act_params(a, &p))
            return sy_error(SY_ERR_UNSUPPORTED, "layer '%s' (%s): %s '%s' is not supported in a recurrent layer; use "
                            "one of linear, relu, sigmoid, tanh, elu, selu, gelu, swish (silu), softplus, softsign, "
                            "hard_sigmoid, exponential, relu6", name, cls, i ? "recurrent_activation" : "activation",
                            sy_activation_name(a));
    }
    if (l->kind == SY_LAYER_GRU && !l->reset_after)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "layer '%s' (GRU): reset_after=False (the Keras 1 form) is not supported; use the default "
                        "reset_after=True",
                        name);
    if (l->return_state)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "layer '%s' (%s): return_state=True gives several outputs, which a Sequential model cannot pass "
                        "to its next layer (Keras refuses it too); build the graph with the states instead",
                        name, cls);
    *out = l->return_sequences ? sy_shape_of(2, in->dims[0], (int64_t)l->units) : sy_shape_of(1, (int64_t)l->units);
    return SY_OK;
}

static int rnn_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    int64_t gu = (int64_t)gates_of(l) * l->units;
    bool lstm = l->kind == SY_LAYER_LSTM;
    w[0] = (layer_weight){.name = lstm ? "lstm_cell/kernel" : "gru_cell/kernel",
                          .shape = sy_shape_of(2, in->dims[1], gu),
                          .init = l->kernel_initializer};
    w[1] = (layer_weight){.name = lstm ? "lstm_cell/recurrent_kernel" : "gru_cell/recurrent_kernel",
                          .shape = sy_shape_of(2, (int64_t)l->units, gu),
                          .init = l->recurrent_initializer};
    if (!l->use_bias) return 2;
    sy_init bias = l->bias_initializer;
    if (lstm && l->unit_forget_bias) bias = (sy_init){SY_INIT_UNIT_FORGET_BIAS, 0, 0, 0};
    w[2] = (layer_weight){.name = lstm ? "lstm_cell/bias" : "gru_cell/bias",
                          .shape = lstm ? sy_shape_of(1, gu) : sy_shape_of(2, (int64_t)2, gu),
                          .init = bias};
    return 3;
}

/* A dropout mask of ones (batch, 1 or units), scaled by 1 / (1 - rate). */
static sy_node mask(sy_graph *g, sy_shape s, float rate, uint64_t seed) {
    return sy_graph_dropout(g, sy_graph_fill(g, SY_F32, s, 1.0), rate, seed);
}

static sy_node rnn_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in;
    sy_shape xs = sy_graph_shape(g, x);
    int64_t b = xs.dims[0], t = xs.dims[1], d = xs.dims[2], u = l->units;
    bool lstm = l->kind == SY_LAYER_LSTM;
    if (ctx->training && l->dropout > 0) x = sy_graph_mul(g, x, mask(g, sy_shape_of(3, b, (int64_t)1, d), l->dropout, ctx->seed));
    sy_node steps = keras_steps_mask(g, ctx, x, sy_layer_class_name(l->kind)); /* issue 17, masking */
    if (ctx->mask != SY_NONE && steps == SY_NONE) return SY_NONE;
    if (l->go_backwards) x = sy_graph_reverse(g, x, 1);
    if (l->go_backwards && steps != SY_NONE) steps = sy_graph_reverse(g, steps, 1);
    sy_node rec_mask = SY_NONE;
    if (ctx->training && l->recurrent_dropout > 0)
        rec_mask = mask(g, sy_shape_of(2, b, u), l->recurrent_dropout, sy_mix64(ctx->seed + 0x2EC));
    sy_node bias = l->use_bias ? w[2] : SY_NONE;
    int act = keras_act_code(l->activation), rec_act = keras_act_code(l->recurrent_activation);
    /* tanh, sigmoid, relu and linear have the scans' fast cells; any other activation the general one */
    sy_act_params fn[2], *general = NULL;
    keras_act_params(l->activation, &fn[0]);
    keras_act_params(l->recurrent_activation, &fn[1]);
    for (int i = 0; i < 2; i++)
        if (fn[i].fn != SY_AF_LINEAR && keras_act_code(i ? l->recurrent_activation : l->activation) == SY_ACT_NONE)
            general = fn;
    sy_node seq = lstm ? graph_lstm_scan_masked(g, x, w[0], w[1], bias, rec_mask, steps, act, rec_act, general,
                                                !ctx->gradients)
                       : graph_gru_scan_masked(g, x, w[0], w[1], bias, rec_mask, steps, act, rec_act, general);
    int64_t h_at = graph_scan_h_column(g, seq);
    if (l->return_sequences) {
        int64_t begin[3] = {0, 0, h_at}, size[3] = {b, t, u};
        return sy_graph_slice(g, seq, begin, size);
    }
    int64_t begin[3] = {0, t - 1, h_at}, size[3] = {b, 1, u};
    return sy_graph_reshape(g, sy_graph_slice(g, seq, begin, size), sy_shape_of(2, b, u));
}

const layer_impl keras_lstm = {
    .kind = SY_LAYER_LSTM,
    .class_name = "LSTM",
    .prefix = "lstm",
    .output_shape = rnn_output_shape,
    .weights = rnn_weights,
    .build = rnn_build,
};
const layer_impl keras_gru = {
    .kind = SY_LAYER_GRU,
    .class_name = "GRU",
    .prefix = "gru",
    .output_shape = rnn_output_shape,
    .weights = rnn_weights,
    .build = rnn_build,
};
