/*
 * test_golden.c - systolic against tf.keras 2.15 on the same weights and
 * inputs: every layer's output and gradients (Dense, Conv2D, pooling,
 * activations, Embedding, LSTM, GRU), stacked models (a small CNN, two
 * stacked LSTMs, two stacked GRUs), every loss (with the softmax/sigmoid
 * logits shortcut), every metric, every optimizer, five training steps of
 * the Fashion-MNIST tutorial model and three of the IMDB LSTM model.
 *
 * The fixtures are .npz files written by tools/golden/make_fixtures.py,
 * which runs tf.keras; they are committed, so this test needs no Python.
 * tests/golden/README.md documents every array. The directory comes from
 * the build (SY_GOLDEN_DIR).
 *
 * A layer or model fixture holds the input x, the weights w_*, the output
 * y, a cotangent r and the gradients of sum(y * r): dx and dw_*. The test
 * sets the weights by their Keras names, compares predict()'s output with
 * y, and compiles a plan of sum(y * r) over the model's layers for the
 * gradients. Tolerances are |got - want| <= rtol |want| + atol max|want|,
 * so atol is relative to the array's largest magnitude (for the dx of an
 * (N, T, F) input, to the largest magnitude of each step).
 */
#include "check.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef SY_GOLDEN_DIR
#error "SY_GOLDEN_DIR must name tests/golden"
#endif

#include "golden_check.h"

/* ---- layers --------------------------------------------------------------------------- */


static sy_layer with_act(sy_layer l, sy_activation a) {
    l.activation = a;
    return l;
}
static sy_layer no_bias(sy_layer l) {
    l.use_bias = false;
    return l;
}
static sy_layer conv_opts(sy_layer l, int sh, int sw, sy_padding p) {
    l.strides[0] = sh;
    l.strides[1] = sw;
    l.padding = p;
    return l;
}
static sy_layer sequences(sy_layer l) {
    l.return_sequences = true;
    return l;
}
static sy_layer backwards(sy_layer l) {
    l.go_backwards = true;
    return l;
}
static sy_layer relu_tanh(sy_layer l) {
    l.activation = SY_ACTIVATION_RELU;
    l.recurrent_activation = SY_ACTIVATION_TANH;
    return l;
}
static sy_layer input_length(sy_layer l, int32_t n) {
    l.input_length = n;
    return l;
}

static void test_layers(void) {
    sy_padding S = SY_PADDING_SAME;
    sy_layer pool3 = sy_layer_max_pooling2d(3, 3), avg3 = sy_layer_average_pooling2d(3, 3);
    pool3.strides[0] = pool3.strides[1] = avg3.strides[0] = avg3.strides[1] = 2;
    pool3.padding = avg3.padding = S;
    const layer_case cases[] = {
        {"dense_linear", sy_layer_dense(5)},
        {"dense_relu", with_act(sy_layer_dense(6), SY_ACTIVATION_RELU)},
        {"dense_nobias_sigmoid", with_act(no_bias(sy_layer_dense(4)), SY_ACTIVATION_SIGMOID)},
        {"dense_softmax", with_act(sy_layer_dense(5), SY_ACTIVATION_SOFTMAX)},
        {"dense_tanh_rank3", with_act(sy_layer_dense(3), SY_ACTIVATION_TANH)},
        {"conv2d_valid", sy_layer_conv2d(4, 3, 3)},
        {"conv2d_same_s2", conv_opts(sy_layer_conv2d(5, 3, 2), 2, 2, S)},
        {"conv2d_relu_1ch", with_act(sy_layer_conv2d(8, 3, 3), SY_ACTIVATION_RELU)},
        {"conv2d_nobias", no_bias(sy_layer_conv2d(3, 2, 2))},
        {"conv2d_s12_tanh", with_act(conv_opts(sy_layer_conv2d(4, 3, 3), 1, 2, S), SY_ACTIVATION_TANH)},
        {"max_pooling2d", sy_layer_max_pooling2d(2, 2)},
        {"max_pooling2d_same", pool3},
        {"max_pooling2d_ties", sy_layer_max_pooling2d(2, 2)},
        {"average_pooling2d", sy_layer_average_pooling2d(2, 2)},
        {"average_pooling2d_same", avg3},
        {"activation_relu", sy_layer_activation(SY_ACTIVATION_RELU)},
        {"activation_sigmoid", sy_layer_activation(SY_ACTIVATION_SIGMOID)},
        {"activation_tanh", sy_layer_activation(SY_ACTIVATION_TANH)},
        {"activation_linear", sy_layer_activation(SY_ACTIVATION_LINEAR)},
        {"activation_softmax", sy_layer_activation(SY_ACTIVATION_SOFTMAX)},
        {"flatten", sy_layer_flatten()},
        {"reshape", sy_layer_reshape(sy_shape_of(2, (int64_t)6, (int64_t)4))},
        {"dropout_inference", sy_layer_dropout(0.5f)},
    };
    check_layers(cases, sizeof cases / sizeof cases[0], (tol){2e-5, 2e-6});
}

/* ---- recurrent layers ------------------------------------------------------------------ */

/* Tolerances of the recurrent cases, against the array's (for dx the
 * step's) largest magnitude. Measured: at most 4.6e-7 for the short LSTM
 * and GRU cases and the stacked models (float round-off: TF's Eigen
 * kernels and ours sum in different orders), so 2e-6 leaves 4x. No rtol:
 * round-off follows the array's scale, not each entry's. */
static const tol TOL_RNN = {0, 2e-6};
/* The 60-step cases: dx falls by 13 orders of magnitude from the last step
 * to the first (vanishing gradients; README), and matches step by step to
 * at most 8.0e-7 (LSTM) and 6.9e-7 (GRU) of that step's largest value --
 * the round-off of the backward pass compounds over the steps it chains
 * through -- so 4e-6 leaves 5x. y and the weights' gradients are within
 * 3.3e-7, as the short cases. */
static const tol TOL_RNN_LONG = {0, 4e-6};

/* The final h of a sequence fixture (the last step of its y, or its y_h)
 * against the same layer with return_sequences off, through predict(). */
static void check_final_h(const char *name, sy_layer cfg, const char *key, tol t) {
    char file[128], what[160];
    snprintf(file, sizeof file, "layer_%s.npz", name);
    sy_npz *z = open_fixture(file);
    sy_tensor *x = get(z, "x"), *want = get(z, key), *last = NULL;
    cfg.name = "layer";
    cfg.return_sequences = false;
    sy_model *m = x && want ? model_of(x, &cfg, 1) : NULL;
    if (m) {
        load_weights(z, m, "w", false);
        sy_shape s = sy_tensor_shape(want);
        if (s.rank == 3) { /* y (N, T, U): its last step */
            CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, s.dims[0], s.dims[2]), &last));
            float *l = sy_tensor_data(last);
            for (int64_t i = 0; i < s.dims[0] * s.dims[2]; i++)
                l[i] = (float)sy_tensor_get(want, (i / s.dims[2] * s.dims[1] + s.dims[1] - 1) * s.dims[2] + i % s.dims[2]);
        }
        sy_tensor *h = predict(m, x);
        snprintf(what, sizeof what, "%s: final h against %s%s", name, key, last ? "[:, -1]" : "");
        if (h) compare(what, sy_tensor_data(h), last ? last : want, t.rtol, t.atol);
        sy_tensor_free(h);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(want);
    sy_tensor_free(last);
    sy_npz_close(z);
}

/* A return_state case. There Keras's layer gives (sequence, h[, c]); a
 * Sequential model cannot pass several tensors on, so systolic refuses
 * return_state (as Keras's Sequential does) and the test checks the same
 * layer with return_state off (cfg: return_sequences on): its sequence is
 * the fixture's y, its final h y_h (check_final_h), and the cell state in
 * its scan's last row y_c. The fixture's gradients are of S = sum(y r) +
 * sum(y_h r_h) [+ sum(y_c r_c)]. y_h is y's last step, so for GRU S is
 * sum(y r') with r' = r plus r_h on the last step, and the gradients are
 * checked with r'. For LSTM the sum(y_c r_c) term has no counterpart in the
 * layer's output (the scan's c columns are working state, not
 * differentiable), so its gradients cannot be checked; the gradient through
 * c is covered by every other LSTM case, where c(t) feeds all later h. */
static void check_return_state(const char *name, sy_layer cfg, tol t) {
    char file[128], what[160];
    snprintf(file, sizeof file, "layer_%s.npz", name);
    sy_npz *z = open_fixture(file);
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *r = get(z, "r"), *r_h = get(z, "r_h");
    bool lstm = cfg.kind == SY_LAYER_LSTM;
    sy_tensor *y_c = lstm ? get(z, "y_c") : NULL;
    cfg.name = "layer";
    sy_model *m = x && y && r && r_h && (y_c || !lstm) ? model_of(x, &cfg, 1) : NULL;
    if (m) {
        sy_model *refused;
        CHECK_OK(sy_model_new(NULL, &refused));
        cfg.return_state = true;
        cfg.input_shape = sy_model_input_shape(m);
        CHECK_ERR(sy_model_add(refused, &cfg), SY_ERR_UNSUPPORTED, "return_state");
        sy_model_free(refused);
        load_weights(z, m, "w", false);
        sy_shape ys = sy_tensor_shape(y);
        int64_t b = ys.dims[0], steps = ys.dims[1], u = ys.dims[2];
        float *rv = sy_tensor_data(r); /* r' (float32, as every cotangent) */
        for (int64_t i = 0; i < b * u; i++) rv[(i / u * steps + steps - 1) * u + i % u] += (float)sy_tensor_get(r_h, i);
        grad_run g = grad_plan(m, x, r, dot_loss);
        if (g.p) {
            snprintf(what, sizeof what, "%s: y", name);
            compare(what, sy_plan_output(g.p, g.y), y, t.rtol, t.atol);
            if (lstm) { /* an LSTM scan's row holds c right after its four gates (graph/ops_rnn.c) */
                const float *scan = sy_plan_output(g.p, g.scan);
                int64_t width = sy_graph_shape(g.g, g.scan).dims[2];
                float *c = malloc((size_t)(b * u) * sizeof *c);
                for (int64_t i = 0; scan && i < b * u; i++) c[i] = scan[(i / u * steps + steps - 1) * width + 4 * u + i % u];
                snprintf(what, sizeof what, "%s: y_c", name);
                compare(what, scan ? c : NULL, y_c, t.rtol, t.atol);
                free(c);
            } else {
                compare_dx(file, z, &g, t);
                snprintf(what, sizeof what, "%s: gradient", name);
                compare_weights(what, z, m, "dw", false, &g, t);
            }
        }
        grad_run_free(&g);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(y_c);
    sy_tensor_free(r);
    sy_tensor_free(r_h);
    sy_npz_close(z);
    cfg.return_state = false;
    check_final_h(name, cfg, "y_h", t);
}

static void test_recurrent_layers(void) {
    sy_layer lstm5 = sy_layer_lstm(5), lstm4 = sy_layer_lstm(4), gru5 = sy_layer_gru(5), gru4 = sy_layer_gru(4);
    /* Embedding: y is a copy of rows and dw sums each index's rows in the
     * order the indices come, as TensorFlow does (README: bit-identical to
     * np.add.at), so both are exact. */
    const layer_case embedding[] = {
        {"embedding", sy_layer_embedding(20, 4)},
        {"embedding_input_length", input_length(sy_layer_embedding(50, 8), 5)},
    };
    check_layers(embedding, 2, (tol){0, 0});
    const layer_case cases[] = {
        {"lstm", lstm5},
        {"lstm_return_sequences", sequences(lstm5)},
        {"lstm_go_backwards", sequences(backwards(lstm4))},
        {"lstm_go_backwards_last", backwards(lstm4)},
        {"lstm_no_bias", no_bias(sy_layer_lstm(3))},
        {"lstm_relu_tanh", relu_tanh(lstm4)},
        {"gru", gru5},
        {"gru_return_sequences", sequences(gru5)},
        {"gru_go_backwards", sequences(backwards(gru4))},
        {"gru_no_bias", no_bias(sy_layer_gru(3))},
        {"gru_relu_tanh", relu_tanh(gru4)},
    };
    check_layers(cases, sizeof cases / sizeof cases[0], TOL_RNN);
    const layer_case long_cases[] = {{"lstm_long", sy_layer_lstm(8)}, {"gru_long", sy_layer_gru(8)}};
    check_layers(long_cases, 2, TOL_RNN_LONG);
    const char *state_cases[] = {"lstm_return_state", "gru_return_state"};
    for (int i = 0; i < 2; i++) {
        int before = check_failures;
        check_return_state(state_cases[i], sequences(i ? gru4 : lstm4), TOL_RNN);
        fprintf(stderr, "layer %-28s %s\n", state_cases[i], check_failures == before ? "ok" : "FAILED");
    }
    /* GRU go_backwards without return_sequences has no fixture of its own
     * (LSTM's is lstm_go_backwards_last): its output is the last step of
     * gru_go_backwards's sequence. Forward only. */
    int before = check_failures;
    check_final_h("gru_go_backwards", backwards(gru4), "y", TOL_RNN);
    fprintf(stderr, "layer %-28s %s\n", "gru_go_backwards (last h)", check_failures == before ? "ok" : "FAILED");
}

/* ---- the convolution family (issue 15; tools/golden/make_conv_fixtures.py) ------------- */

static sy_layer dilated(sy_layer l, int dh, int dw) {
    l.dilation_rate[0] = dh;
    l.dilation_rate[1] = dw;
    return l;
}
static sy_layer grouped(sy_layer l, int groups) {
    l.groups = groups;
    return l;
}
static sy_layer multiplier(sy_layer l, int m) {
    l.depth_multiplier = m;
    return l;
}
static sy_layer out_padding(sy_layer l, int a, int b) {
    l.has_output_padding = true;
    l.output_padding[0] = a;
    l.output_padding[1] = b;
    return l;
}
static sy_layer bilinear(sy_layer l) {
    l.bilinear = true;
    return l;
}
static sy_layer keepdims(sy_layer l) {
    l.keepdims = true;
    return l;
}

static void test_conv_family(void) {
    sy_padding S = SY_PADDING_SAME, V = SY_PADDING_VALID;
    const layer_case cases[] = {
        {"conv2d_dilated", dilated(sy_layer_conv2d(4, 3, 3), 2, 2)},
        {"conv2d_dilated_same_relu", with_act(dilated(conv_opts(sy_layer_conv2d(3, 3, 2), 1, 1, S), 2, 3), SY_ACTIVATION_RELU)},
        {"conv2d_groups", grouped(conv_opts(sy_layer_conv2d(6, 3, 3), 2, 2, S), 3)},
        {"conv2d_groups_dilated", no_bias(grouped(dilated(sy_layer_conv2d(4, 2, 2), 2, 2), 2))},
        {"depthwise_conv2d", sy_layer_depthwise_conv2d(3, 3)},
        {"depthwise_conv2d_same_s2_m2_relu",
         with_act(multiplier(conv_opts(sy_layer_depthwise_conv2d(3, 3), 2, 2, S), 2), SY_ACTIVATION_RELU)},
        {"depthwise_conv2d_dilated_m3_nobias", no_bias(multiplier(dilated(sy_layer_depthwise_conv2d(2, 3), 2, 2), 3))},
        {"separable_conv2d", sy_layer_separable_conv2d(4, 3, 3)},
        {"separable_conv2d_same_s2_m2_tanh",
         with_act(multiplier(conv_opts(sy_layer_separable_conv2d(5, 3, 3), 2, 2, S), 2), SY_ACTIVATION_TANH)},
        {"separable_conv2d_dilated_nobias", no_bias(dilated(sy_layer_separable_conv2d(3, 2, 2), 2, 2))},
        {"conv2d_transpose", sy_layer_conv2d_transpose(4, 3, 3)},
        {"conv2d_transpose_same_s2", conv_opts(sy_layer_conv2d_transpose(3, 3, 3), 2, 2, S)},
        {"conv2d_transpose_valid_s2_op1_relu",
         with_act(out_padding(conv_opts(sy_layer_conv2d_transpose(2, 3, 2), 2, 2, V), 1, 1), SY_ACTIVATION_RELU)},
        {"conv2d_transpose_same_s3_op21_nobias", no_bias(out_padding(conv_opts(sy_layer_conv2d_transpose(3, 4, 4), 3, 3, S), 2, 1))},
        {"zero_padding2d", sy_layer_zero_padding2d(1, 1, 1, 1)},
        {"zero_padding2d_asymmetric", sy_layer_zero_padding2d(1, 2, 0, 3)},
        {"cropping2d", sy_layer_cropping2d(1, 0, 2, 1)},
        {"cropping2d_pair", sy_layer_cropping2d(1, 1, 2, 2)},
        {"up_sampling2d", sy_layer_up_sampling2d(2, 2)},
        {"up_sampling2d_23", sy_layer_up_sampling2d(2, 3)},
        {"up_sampling2d_bilinear", bilinear(sy_layer_up_sampling2d(2, 3))},
        {"up_sampling2d_bilinear_3", bilinear(sy_layer_up_sampling2d(3, 3))},
        {"global_average_pooling2d", sy_layer_global_average_pooling2d()},
        {"global_average_pooling2d_keepdims", keepdims(sy_layer_global_average_pooling2d())},
        {"global_max_pooling2d", sy_layer_global_max_pooling2d()},
        {"global_max_pooling2d_ties_keepdims", keepdims(sy_layer_global_max_pooling2d())},
    };
    check_layers(cases, sizeof cases / sizeof cases[0], (tol){2e-5, 2e-6});

    /* a MobileNet-like stack of all of them */
    sy_layer l[11] = {sy_layer_zero_padding2d(0, 1, 0, 1),
                      with_act(conv_opts(sy_layer_conv2d(8, 3, 3), 2, 2, V), SY_ACTIVATION_RELU),
                      with_act(conv_opts(sy_layer_depthwise_conv2d(3, 3), 1, 1, S), SY_ACTIVATION_RELU),
                      sy_layer_conv2d(6, 1, 1),
                      with_act(multiplier(conv_opts(sy_layer_separable_conv2d(5, 3, 3), 1, 1, S), 2), SY_ACTIVATION_RELU),
                      conv_opts(sy_layer_conv2d_transpose(4, 2, 2), 2, 2, V),
                      sy_layer_cropping2d(1, 1, 1, 1),
                      bilinear(sy_layer_up_sampling2d(2, 2)),
                      keepdims(sy_layer_global_max_pooling2d()),
                      sy_layer_global_average_pooling2d(),
                      with_act(sy_layer_dense(3), SY_ACTIVATION_SOFTMAX)};
    const char *names[11] = {"pad", "stem", "dw", "pw", "sep", "up", "crop", "bilinear", "gmp", "gap", "dense"};
    for (int i = 0; i < 11; i++) l[i].name = names[i];
    check_model("model_conv_family.npz", l, 11, true, (tol){2e-5, 1e-6}, (tol){1e-4, 2e-6});
    fprintf(stderr, "model conv_family done\n");
}

/* ---- stacked models -------------------------------------------------------------------- */

static void test_small_cnn(void) {
    sy_layer l[4] = {sy_layer_conv2d(4, 3, 3), sy_layer_max_pooling2d(2, 2), sy_layer_flatten(), sy_layer_dense(3)};
    l[0].activation = SY_ACTIVATION_RELU;
    l[3].activation = SY_ACTIVATION_SOFTMAX;
    check_model("model_small_cnn.npz", l, 4, true, (tol){2e-5, 1e-6}, (tol){1e-4, 1e-6});
    fprintf(stderr, "model small_cnn done\n");
}

static void test_stacked_recurrent(void) {
    sy_layer lstm[2] = {sequences(sy_layer_lstm(6)), sy_layer_lstm(4)};
    check_model("model_lstm_stacked.npz", lstm, 2, true, TOL_RNN, TOL_RNN);
    sy_layer gru[2] = {sequences(sy_layer_gru(6)), sy_layer_gru(4)};
    check_model("model_gru_stacked.npz", gru, 2, true, TOL_RNN, TOL_RNN);
    fprintf(stderr, "models lstm_stacked, gru_stacked done\n");
}

/* ---- losses ----------------------------------------------------------------------------- */

typedef enum { SCCE, CCE, BCE, MSE } loss_kind;

typedef struct loss_case {
    const char *name;
    loss_kind kind;
    bool from_logits;
    int shortcut; /* 0: none; 1: softmax(z) feeds the loss; 2: sigmoid(z) */
} loss_case;

static sy_node make_loss(sy_graph *g, loss_kind k, sy_node pred, sy_node truth, bool logits) {
    switch (k) {
    case SCCE: return sy_graph_sparse_categorical_crossentropy(g, pred, truth, logits);
    case CCE: return sy_graph_categorical_crossentropy(g, pred, truth, logits);
    case BCE: return sy_graph_binary_crossentropy(g, pred, truth, logits);
    default: return sy_graph_mean_squared_error(g, pred, truth);
    }
}

static void check_loss(const sy_npz *z, const loss_case *c) {
    char key[96], what[128];
    sy_tensor *pred = getp(z, c->name, c->shortcut ? "z" : "y_pred");
    sy_tensor *truth = getp(z, c->name, "y_true");
    sy_tensor *want_loss = getp(z, c->name, "loss");
    sy_tensor *want_grad = getp(z, c->name, "grad");
    snprintf(key, sizeof key, "%s_per_example", c->name);
    sy_tensor *want_per = has(z, key) ? get(z, key) : NULL;
    if (!pred || !truth || !want_loss || !want_grad) goto done;
    sy_shape ps = sy_tensor_shape(pred), ts = sy_tensor_shape(truth);
    if (c->kind == SCCE) ts = sy_shape_of(1, ps.dims[0]); /* (N, 1) labels are (N,) labels */
    sy_graph *g;
    sy_graph_new(&g);
    sy_node p = sy_graph_param(g, "pred", SY_F32, ps, sy_init_zeros());
    sy_node t = sy_graph_input(g, "truth", c->kind == SCCE ? SY_I32 : SY_F32, ts);
    sy_node in = c->shortcut == 1 ? sy_graph_softmax(g, p, -1) : c->shortcut == 2 ? sy_graph_sigmoid(g, p) : p;
    sy_node per = make_loss(g, c->kind, in, t, c->from_logits);
    sy_node loss = sy_graph_reduce_mean(g, per, NULL, 0, false);
    CHECK(sy_graph_status(g) == SY_OK, "%s: %s", c->name, sy_graph_error(g));
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.outputs = &per;
    o.n_outputs = 1;
    sy_plan *plan = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &plan));
    if (plan) {
        set_var(sy_plan_vars(plan), "pred", pred);
        void *tin = sy_plan_input(plan, t);
        for (int64_t i = 0; i < sy_tensor_count(truth); i++) {
            if (c->kind == SCCE) ((int32_t *)tin)[i] = (int32_t)sy_tensor_get(truth, i);
            else ((float *)tin)[i] = (float)sy_tensor_get(truth, i);
        }
        CHECK_OK(sy_plan_run(plan));
        snprintf(what, sizeof what, "%s: loss", c->name);
        compare(what, sy_plan_output(plan, loss), want_loss, 1e-5, 0);
        if (want_per && sy_tensor_count(want_per) == sy_shape_count(&(sy_shape){1, {ps.dims[0]}})) {
            snprintf(what, sizeof what, "%s: per-example loss", c->name);
            compare(what, sy_plan_output(plan, per), want_per, 1e-5, 1e-7);
        }
        snprintf(what, sizeof what, "%s: gradient", c->name);
        compare(what, sy_plan_gradient(plan, p), want_grad, 1e-4, 1e-6);
    }
    sy_plan_free(plan);
    sy_graph_free(g);
done:
    sy_tensor_free(pred);
    sy_tensor_free(truth);
    sy_tensor_free(want_loss);
    sy_tensor_free(want_grad);
    sy_tensor_free(want_per);
}

static void test_losses(void) {
    sy_npz *z = open_fixture("losses.npz");
    if (!z) return;
    const loss_case cases[] = {
        {"scce_probs", SCCE, false, 0},
        {"scce_probs_labels_2d", SCCE, false, 0},
        {"scce_logits", SCCE, true, 0},
        {"cce_probs", CCE, false, 0},
        {"cce_probs_unnormalized", CCE, false, 0},
        {"cce_soft_targets", CCE, false, 0},
        {"cce_logits", CCE, true, 0},
        {"bce_probs", BCE, false, 0},
        {"bce_soft_targets", BCE, false, 0},
        {"bce_saturated", BCE, false, 0},
        {"bce_logits", BCE, true, 0},
        {"mse", MSE, false, 0},
        {"softmax_shortcut", SCCE, false, 1},
        {"sigmoid_shortcut", BCE, false, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int before = check_failures;
        check_loss(z, &cases[i]);
        fprintf(stderr, "loss %-30s %s\n", cases[i].name, check_failures == before ? "ok" : "FAILED");
    }
    sy_npz_close(z);
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void check_metric(const sy_npz *z, const char *name, keras_metric kind) {
    sy_tensor *truth = getp(z, name, "y_true");
    sy_tensor *pred = getp(z, name, "y_pred");
    sy_tensor *value = getp(z, name, "value");
    if (truth && pred && value) {
        sy_shape ps = sy_tensor_shape(pred);
        int64_t per_row = ps.dims[ps.rank - 1], rows = sy_tensor_count(pred) / per_row;
        float *p = as_f32(pred);
        void *labels;
        if (kind == KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY) {
            int32_t *l = malloc((size_t)rows * sizeof *l);
            for (int64_t i = 0; i < rows; i++) l[i] = (int32_t)sy_tensor_get(truth, i);
            labels = l;
        } else {
            labels = as_f32(truth);
        }
        double sum = 0;
        metric_accumulate(kind, p, labels, rows, per_row, &sum);
        CHECK_CLOSE(sum / (double)rows, sy_tensor_get(value, 0), 1e-6, 1e-7, "metric %s", name);
        free(p);
        free(labels);
    }
    sy_tensor_free(truth);
    sy_tensor_free(pred);
    sy_tensor_free(value);
}

/* 'accuracy' resolved by compile() and reported by evaluate() under that name. */
static void check_accuracy_resolution(const sy_npz *z, const char *name, const char *loss) {
    sy_tensor *truth = getp(z, name, "y_true");
    sy_tensor *pred = getp(z, name, "y_pred");
    sy_tensor *value = getp(z, name, "value");
    if (truth && pred && value) {
        sy_model *m;
        CHECK_OK(sy_model_new(NULL, &m));
        sy_shape ps = sy_tensor_shape(pred);
        sy_layer a = sy_layer_activation(SY_ACTIVATION_LINEAR);
        a.input_shape = sy_shape_of(1, ps.dims[1]);
        CHECK_OK(sy_model_add(m, &a));
        sy_compile_options c = sy_compile_options_default();
        c.loss = loss;
        const char *metrics[] = {"accuracy"};
        c.metrics = metrics;
        c.n_metrics = 1;
        CHECK_OK(sy_model_compile(m, &c));
        sy_evaluate_options eo = sy_evaluate_options_default();
        eo.verbose = 0;
        eo.batch_size = 8;
        sy_logs l;
        CHECK_OK(sy_model_evaluate(m, pred, truth, &eo, &l));
        CHECK_CLOSE(sy_logs_get(&l, "accuracy"), sy_tensor_get(value, 0), 1e-6, 1e-7, "%s: evaluate's 'accuracy'", name);
        sy_model_free(m);
    }
    sy_tensor_free(truth);
    sy_tensor_free(pred);
    sy_tensor_free(value);
}

static void test_metrics(void) {
    sy_npz *z = open_fixture("metrics.npz");
    if (!z) return;
    check_metric(z, "sparse_categorical_accuracy", KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY);
    check_metric(z, "sparse_categorical_accuracy_labels_2d", KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY);
    check_metric(z, "categorical_accuracy", KERAS_METRIC_CATEGORICAL_ACCURACY);
    check_metric(z, "binary_accuracy", KERAS_METRIC_BINARY_ACCURACY);
    check_accuracy_resolution(z, "accuracy_with_scce", "sparse_categorical_crossentropy");
    check_accuracy_resolution(z, "accuracy_with_cce", "categorical_crossentropy");
    check_accuracy_resolution(z, "accuracy_with_bce", "binary_crossentropy");
    check_accuracy_resolution(z, "accuracy_with_bce_multilabel", "binary_crossentropy");
    sy_npz_close(z);
    fprintf(stderr, "metrics done\n");
}

/* ---- optimizers ---------------------------------------------------------------------------- */

static void check_optimizer(const sy_npz *z, const char *name, sy_optimizer opt) {
    sy_tensor *w0 = getp(z, name, "w0");
    sy_tensor *grads = getp(z, name, "grads");
    sy_tensor *want = getp(z, name, "w");
    if (w0 && grads && want) {
        int64_t n = sy_tensor_count(w0);
        sy_graph *g;
        sy_graph_new(&g);
        sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(1, n), sy_init_zeros());
        sy_node gin = sy_graph_input(g, "g", SY_F32, sy_shape_of(1, n));
        sy_node loss = sy_graph_reduce_sum(g, sy_graph_mul(g, w, gin), NULL, 0, false); /* d/dw = g */
        sy_plan_options o = sy_plan_options_default();
        o.loss = loss;
        o.optimizer = opt;
        sy_plan *p = NULL;
        CHECK_OK(sy_plan_compile(g, &o, &p));
        if (p) {
            sy_vars *v = sy_plan_vars(p);
            set_var(v, "w", w0);
            float *gv = as_f32(grads), *wv = as_f32(want);
            for (int s = 0; s < 5; s++) {
                memcpy(sy_plan_input(p, gin), gv + s * n, (size_t)n * sizeof(float));
                CHECK_OK(sy_plan_run(p));
                /* bit for bit here (float32 constants and rounding as Keras's);
                 * an ulp of slack for another libm's powf */
                const float *cur = sy_vars_data(v, sy_vars_find(v, "w"));
                for (int64_t i = 0; i < n; i++)
                    CHECK_CLOSE(cur[i], wv[s * n + i], 2e-7, 0, "%s: w[%lld] after step %d", name, (long long)i, s + 1);
            }
            free(gv);
            free(wv);
        }
        sy_plan_free(p);
        sy_graph_free(g);
    }
    sy_tensor_free(w0);
    sy_tensor_free(grads);
    sy_tensor_free(want);
}

static void test_optimizers(void) {
    sy_npz *z = open_fixture("optimizers.npz");
    if (!z) return;
    sy_optimizer rms = sy_optimizer_rmsprop(0.01f);
    sy_optimizer rmc = rms;
    rmc.momentum = 0.5f;
    rmc.centered = true;
    check_optimizer(z, "sgd", sy_optimizer_sgd(0.1f, 0, false));
    check_optimizer(z, "sgd_momentum", sy_optimizer_sgd(0.05f, 0.9f, false));
    check_optimizer(z, "sgd_nesterov", sy_optimizer_sgd(0.05f, 0.9f, true));
    check_optimizer(z, "adam", sy_optimizer_adam(0.01f));
    check_optimizer(z, "adam_default", sy_optimizer_adam(0.001f));
    sy_optimizer ams = sy_optimizer_adam(0.01f);
    ams.amsgrad = true;
    check_optimizer(z, "adam_amsgrad", ams);
    check_optimizer(z, "rmsprop", rms);
    check_optimizer(z, "rmsprop_momentum_centered", rmc);
    sy_npz_close(z);
    fprintf(stderr, "optimizers done\n");
}

/* ---- the tutorial models: a few training steps ------------------------------------------- */

typedef struct step_log {
    const char *metric; /* the name the logs give the model's accuracy */
    double mean_loss[8], mean_acc[8];
    int n;
} step_log;

static sy_status record_step(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m;
    step_log *l = ctx;
    if (step < 8) {
        l->mean_loss[step] = sy_logs_get(logs, "loss");
        l->mean_acc[step] = sy_logs_get(logs, l->metric);
        l->n = (int)step + 1;
    }
    return SY_OK;
}

/* fit() `steps` steps on batches of `batch` in order, checking each step's
 * loss (to loss_rtol) and accuracy against the fixture's loss and acc: the
 * logs' running means give each step's value. */
static void check_steps(sy_model *m, const sy_tensor *x, const sy_tensor *y, int64_t batch, int steps,
                        const char *metric, const sy_npz *z, double loss_rtol) {
    sy_tensor *loss = get(z, "loss"), *acc = get(z, "acc");
    step_log log = {metric, {0}, {0}, 0};
    sy_callback cb = {&log, NULL, NULL, record_step, NULL, NULL, NULL};
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = batch;
    f.steps_per_epoch = steps;
    f.shuffle = false;
    f.verbose = 0;
    f.callbacks = &cb;
    f.n_callbacks = 1;
    CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
    CHECK(log.n == steps, "%d steps logged: %d", steps, log.n);
    for (int s = 0; loss && acc && s < log.n; s++) {
        double step_loss = (s + 1) * log.mean_loss[s] - s * (s ? log.mean_loss[s - 1] : 0);
        double step_acc = (s + 1) * log.mean_acc[s] - s * (s ? log.mean_acc[s - 1] : 0);
        CHECK_CLOSE(step_loss, sy_tensor_get(loss, s), loss_rtol, 0, "step %d loss", s);
        CHECK_CLOSE(step_acc, sy_tensor_get(acc, s), 0, 1e-6, "step %d accuracy", s);
    }
    sy_tensor_free(loss);
    sy_tensor_free(acc);
}

/* evaluate() on all of (x, y) in batches of `batch`: the loss against the
 * fixture's scalar `loss_key` (to rtol) and, with acc_key, the accuracy. */
static void check_evaluate(sy_model *m, const sy_tensor *x, const sy_tensor *y, int64_t batch, const char *metric,
                           const sy_npz *z, const char *loss_key, const char *acc_key, double rtol) {
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    eo.batch_size = batch;
    sy_logs r;
    CHECK_OK(sy_model_evaluate(m, x, y, &eo, &r));
    sy_tensor *want = get(z, loss_key);
    if (want) CHECK_CLOSE(sy_logs_get(&r, "loss"), sy_tensor_get(want, 0), rtol, 0, "evaluate: %s", loss_key);
    sy_tensor_free(want);
    if (!acc_key) return;
    want = get(z, acc_key);
    if (want) CHECK_CLOSE(sy_logs_get(&r, metric), sy_tensor_get(want, 0), 0, 1e-6, "evaluate: %s", acc_key);
    sy_tensor_free(want);
}

/* model_of(x, layers, n) compiled with one optimizer, loss and metric. */
static sy_model *compiled(const sy_tensor *x, const sy_layer *layers, int n, sy_optimizer opt, const char *loss,
                          const char *metric) {
    sy_model *m = model_of(x, layers, n);
    if (!m) return NULL;
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = opt;
    c.loss = loss;
    c.metrics = &metric;
    c.n_metrics = 1;
    CHECK_OK(sy_model_compile(m, &c));
    return m;
}

static void test_fashion_mnist_trajectory(void) {
    sy_npz *z = open_fixture("fashion_mnist_cnn.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *pred = get(z, "pred");
    sy_layer l[6] = {sy_layer_conv2d(64, 3, 3), sy_layer_max_pooling2d(2, 2), sy_layer_activation(SY_ACTIVATION_RELU),
                     sy_layer_flatten(), sy_layer_dense(10), sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
    const char *acc = "sparse_categorical_accuracy";
    sy_model *m = x && y && pred ? compiled(x, l, 6, sy_optimizer_adam(1e-3f), "sparse_categorical_crossentropy", acc)
                                 : NULL;
    if (m) {
        load_weights(z, m, "w0", true);
        check_evaluate(m, x, y, 160, acc, z, "eval0_loss", "eval0_acc", 1e-5);
        check_steps(m, x, y, 32, 5, acc, z, 2e-4);
        /* Adam normalises every step to about lr, so round-off in a
         * near-zero gradient moves a weight by up to ~1e-5 */
        compare_weights("weights after 5 steps", z, m, "w5", true, NULL, (tol){0, 3e-4});
        sy_tensor *p = predict(m, x);
        /* The logits are in the hundreds (raw pixels), so the weights' Adam
         * round-off above moves a logit by ~1e-3 and an unsaturated
         * probability by up to p(1-p) times that. */
        if (p) compare("predictions after 5 steps", sy_tensor_data(p), pred, 0, 2e-3);
        sy_tensor_free(p);
        check_evaluate(m, x, y, 160, acc, z, "eval_loss", "eval_acc", 1e-4);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(pred);
    sy_npz_close(z);
    fprintf(stderr, "fashion_mnist_cnn trajectory done\n");
}

/* The IMDB tutorial model in small (Embedding(30, 8) over 10 tokens,
 * LSTM(6), Dense(1, sigmoid); Adam(0.01) on binary_crossentropy): its
 * predictions, loss and gradients at the initial weights, three training
 * steps on batches of 8 (the third repeats the first batch, as fit's
 * stream of passes over the 16 samples does), the weights after them and
 * an evaluation. Measured: predictions and gradients within 3.6e-7 of the
 * arrays' largest values (TOL_RNN), losses within 6e-8 relative (1e-6:
 * a step's value is recovered from the logs' running means, which
 * multiplies their round-off by up to 2s+1), the weights after 3 steps
 * within 4.0e-7 of the largest |w| (0.52). Adam divides each step by
 * sqrt(v), so round-off in a gradient near 0 moves its weight by a larger
 * share of lr = 0.01; the README's replay puts the formula differences at
 * 6e-8. 2e-6 (about 1e-6 absolute) leaves 5x. */
static void test_imdb_trajectory(void) {
    sy_npz *z = open_fixture("imdb_lstm.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *pred0 = get(z, "pred0");
    sy_layer l[3] = {input_length(sy_layer_embedding(30, 8), 10), sy_layer_lstm(6),
                     with_act(sy_layer_dense(1), SY_ACTIVATION_SIGMOID)};
    sy_model *m = x && y && pred0 ? compiled(x, l, 3, sy_optimizer_adam(0.01f), "binary_crossentropy", "accuracy")
                                  : NULL;
    if (m) {
        load_weights(z, m, "w0", true);
        sy_tensor *p = predict(m, x);
        if (p) compare("imdb: predictions at w0", sy_tensor_data(p), pred0, TOL_RNN.rtol, TOL_RNN.atol);
        sy_tensor_free(p);
        sy_tensor_reshape(y, sy_shape_of(2, sy_tensor_count(y), (int64_t)1)); /* labels as the (16, 1) output */
        grad_run g = grad_plan(m, x, y, bce_loss);
        sy_tensor *loss0 = get(z, "loss0");
        if (g.p && loss0) compare("imdb: loss at w0", sy_plan_output(g.p, g.loss), loss0, 1e-6, 0);
        if (g.p) compare_weights("imdb: gradient at w0", z, m, "grad0", true, &g, TOL_RNN);
        sy_tensor_free(loss0);
        grad_run_free(&g);
        check_evaluate(m, x, y, 16, "accuracy", z, "loss0", NULL, 1e-6);
        check_steps(m, x, y, 8, 3, "accuracy", z, 1e-6);
        compare_weights("imdb: weights after 3 steps", z, m, "w3", true, NULL, (tol){0, 2e-6});
        check_evaluate(m, x, y, 16, "accuracy", z, "eval_loss", "eval_acc", 1e-6);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(pred0);
    sy_npz_close(z);
    fprintf(stderr, "imdb_lstm trajectory done\n");
}

/* ---- issue 15: the activation family and regularizers ---------------------------------------- */

static sy_layer relu_opts(float max_value, float slope, float threshold) {
    sy_layer l = sy_layer_relu();
    l.max_value = max_value;
    l.negative_slope = slope;
    l.threshold = threshold;
    return l;
}
static sy_layer shared_axes_12(sy_layer l) {
    l.shared_axes[0] = 1;
    l.shared_axes[1] = 2;
    l.n_shared_axes = 2;
    return l;
}
static sy_layer rescaling_lists(void) {
    sy_layer l = sy_layer_rescaling(0, 0);
    const double s[3] = {0.5, 2.0, -1.0}, o[3] = {0.1, 0.2, 0.3};
    l.scale.list = l.offset.list = true;
    l.scale.n = l.offset.n = 3;
    for (int i = 0; i < 3; i++) l.scale.v[i] = s[i], l.offset.v[i] = o[i];
    return l;
}

/* Dropout(0.5, noise_shape=(None, 1, 4)) while training: each (sample,
 * channel) is kept or dropped along the whole middle axis, and a kept value
 * is x / (1 - rate); TensorFlow's random stream is not ours, so the mask's
 * form is checked, not its draws. */
static void check_dropout_noise_shape(void) {
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer d = sy_layer_dropout(0.5f);
    d.input_shape = sy_shape_of(2, (int64_t)5, (int64_t)4);
    d.noise_shape = sy_shape_of(3, (int64_t)-1, (int64_t)1, (int64_t)-1);
    CHECK_OK(sy_model_add(m, &d));
    sy_graph *g;
    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(3, (int64_t)16, (int64_t)5, (int64_t)4));
    sy_node y = SY_NONE;
    keras_build_layers(m, g, &x, &y, true, false, NULL);
    sy_plan_options o = sy_plan_options_default();
    o.outputs = &y;
    o.n_outputs = 1;
    o.vars = m->vars;
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &p));
    if (p) {
        float *in = sy_plan_input(p, x);
        for (int i = 0; i < 16 * 5 * 4; i++) in[i] = 1.0f + (float)i;
        CHECK_OK(sy_plan_run(p));
        const float *out = sy_plan_output(p, y);
        int kept = 0, broken = 0;
        for (int b = 0; b < 16; b++)
            for (int c = 0; c < 4; c++) {
                bool keep = out[(b * 5) * 4 + c] != 0;
                kept += keep;
                for (int t = 0; t < 5; t++) {
                    int i = (b * 5 + t) * 4 + c;
                    if (out[i] != (keep ? 2.0f * in[i] : 0.0f)) broken++;
                }
            }
        CHECK(broken == 0, "Dropout noise_shape (None, 1, 4): %d values break the shared mask", broken);
        CHECK(kept > 12 && kept < 52, "Dropout noise_shape: %d of 64 (sample, channel) pairs kept", kept);
    }
    sy_plan_free(p);
    sy_graph_free(g);
    sy_model_free(m);
}

/* model_regularizers.npz: one SGD step of fit on a model whose layers carry
 * every kind of regularizer; the loss fit reports, the weights after the
 * step (and so the gradient of the loss with its penalties) and evaluate's
 * loss, at a batch that divides the data and one that does not. */
static void check_regularized_model(void) {
    sy_npz *z = open_fixture("model_regularizers.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    sy_layer l[6] = {sy_layer_embedding(10, 3), sy_layer_reshape(sy_shape_of(3, (int64_t)4, (int64_t)3, (int64_t)1)),
                     sy_layer_conv2d(2, 2, 2), sy_layer_flatten(), sy_layer_dense(3), sy_layer_prelu()};
    l[0].input_length = 4;
    l[0].embeddings_regularizer = sy_regularizer_l1(0.002f);
    l[0].activity_regularizer = sy_regularizer_l2(0.01f);
    l[2].activation = SY_ACTIVATION_ELU;
    l[2].kernel_regularizer = sy_regularizer_l2(0.05f);
    l[2].bias_regularizer = sy_regularizer_l1(0.02f);
    l[2].activity_regularizer = sy_regularizer_l1_l2(0.01f, 0.02f);
    l[4].activation = SY_ACTIVATION_SELU;
    l[4].kernel_regularizer = sy_regularizer_l1_l2(0.01f, 0.01f);
    l[4].bias_regularizer = sy_regularizer_l2(0.01f);
    l[4].activity_regularizer = sy_regularizer_l1(0.01f);
    l[5].alpha_regularizer = sy_regularizer_l1_l2(0.003f, 0);
    sy_model *m = x && y ? model_of(x, l, 6) : NULL;
    if (m) {
        sy_compile_options c = sy_compile_options_default();
        c.optimizer = sy_optimizer_sgd(0.5f, 0, false);
        c.loss = "mse";
        CHECK_OK(sy_model_compile(m, &c));
        load_weights(z, m, "w0", true);
        int32_t n = sy_model_weight_count(m);
        float *w0[16];
        for (int32_t i = 0; i < n && i < 16; i++) {
            sy_shape s = sy_model_weight_shape(m, i);
            w0[i] = malloc((size_t)sy_shape_count(&s) * sizeof(float));
            memcpy(w0[i], sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof(float));
        }
        sy_tensor *loss0 = get(z, "loss0");
        step_log log = {"loss", {0}, {0}, 0};
        sy_callback cb = {&log, NULL, NULL, record_step, NULL, NULL, NULL};
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 8;
        f.shuffle = false;
        f.verbose = 0;
        f.callbacks = &cb;
        f.n_callbacks = 1;
        CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
        if (loss0) CHECK_CLOSE(log.mean_loss[0], sy_tensor_get(loss0, 0), 2e-6, 0, "regularized model: fit's loss");
        sy_tensor_free(loss0);
        compare_weights("regularized model: after one step", z, m, "w1", true, NULL, (tol){0, 2e-6});
        for (int32_t i = 0; i < n && i < 16; i++) { /* the gradient: (w0 - w1) / lr */
            weight_name w = weight_of(m, i, "grad", true);
            sy_tensor *want = get(z, w.key);
            sy_shape s = sy_model_weight_shape(m, i);
            float *gd = malloc((size_t)sy_shape_count(&s) * sizeof(float));
            for (int64_t k = 0; k < sy_shape_count(&s); k++) gd[k] = (w0[i][k] - sy_model_weight_data(m, i)[k]) / 0.5f;
            char label[200];
            snprintf(label, sizeof label, "regularized model: %s", w.key);
            if (want) compare(label, gd, want, 0, 2e-5);
            free(gd);
            free(w0[i]);
            sy_tensor_free(want);
        }
        check_evaluate(m, x, y, 8, NULL, z, "eval_loss", NULL, 2e-6);
        check_evaluate(m, x, y, 3, NULL, z, "eval_loss_batch3", NULL, 2e-6);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

/* Softmax(axis=[a, b]) (issue 15); b 0: the list [a] */
static sy_layer softmax_axes(int32_t a, int32_t b) {
    sy_layer l = sy_layer_softmax(-1);
    l.axes[0] = a;
    l.axes[1] = b;
    l.n_axes = b ? 2 : 1;
    return l;
}

static void test_activation_family(void) {
    const layer_case cases[] = {
        {"activation_elu", sy_layer_activation(SY_ACTIVATION_ELU)},
        {"activation_selu", sy_layer_activation(SY_ACTIVATION_SELU)},
        {"activation_gelu", sy_layer_activation(SY_ACTIVATION_GELU)},
        {"activation_swish", sy_layer_activation(SY_ACTIVATION_SWISH)},
        {"activation_silu", sy_layer_activation(SY_ACTIVATION_SWISH)},
        {"activation_softplus", sy_layer_activation(SY_ACTIVATION_SOFTPLUS)},
        {"activation_softsign", sy_layer_activation(SY_ACTIVATION_SOFTSIGN)},
        {"activation_hard_sigmoid", sy_layer_activation(SY_ACTIVATION_HARD_SIGMOID)},
        {"activation_exponential", sy_layer_activation(SY_ACTIVATION_EXPONENTIAL)},
        {"activation_relu6", sy_layer_activation(SY_ACTIVATION_RELU6)},
        {"dense_gelu", with_act(sy_layer_dense(4), SY_ACTIVATION_GELU)},
        {"dense_selu_rank3", with_act(sy_layer_dense(3), SY_ACTIVATION_SELU)},
        {"conv2d_swish", with_act(sy_layer_conv2d(3, 2, 2), SY_ACTIVATION_SWISH)},
        {"conv2d_elu_same", with_act(conv_opts(sy_layer_conv2d(2, 3, 3), 1, 1, SY_PADDING_SAME), SY_ACTIVATION_ELU)},
        {"relu_default", sy_layer_relu()},
        {"relu_options", relu_opts(1.5f, 0.2f, 0.3f)},
        {"relu_max6", relu_opts(6.0f, 0, 0)},
        {"relu_slope", relu_opts(INFINITY, 0.1f, 0)},
        {"leaky_relu", sy_layer_leaky_relu(0.3f)},
        {"leaky_relu_alpha", sy_layer_leaky_relu(0.05f)},
        {"prelu", sy_layer_prelu()},
        {"prelu_shared_axes", shared_axes_12(sy_layer_prelu())},
        {"elu", sy_layer_elu(1.0f)},
        {"elu_alpha", sy_layer_elu(0.5f)},
        {"softmax", sy_layer_softmax(-1)},
        {"softmax_axis1", sy_layer_softmax(1)},
        {"softmax_axes_1_2", softmax_axes(1, 2)},
        {"softmax_axes_neg1_1", softmax_axes(-1, 1)},
        {"softmax_axes_list_of_one", softmax_axes(1, 0)},
        {"rescaling", sy_layer_rescaling(1.0 / 255, 0)},
        {"rescaling_lists", rescaling_lists()},
    };
    check_layers(cases, sizeof cases / sizeof cases[0], (tol){2e-5, 2e-6});
    int before = check_failures;
    check_dropout_noise_shape();
    fprintf(stderr, "layer %-28s %s\n", "dropout noise_shape", check_failures == before ? "ok" : "FAILED");
    before = check_failures;
    check_regularized_model();
    fprintf(stderr, "model %-28s %s\n", "regularizers", check_failures == before ? "ok" : "FAILED");
}

/* ---- normalization layers (tools/golden/make_norm_fixtures.py) ------------------------- */

static sy_layer bn_with(int32_t axis, double momentum) {
    sy_layer l = sy_layer_batch_normalization();
    l.axes[0] = axis;
    l.momentum = momentum;
    return l;
}
static sy_layer norm_plain(sy_layer l, double epsilon) {
    l.center = l.use_scale = false;
    l.epsilon = epsilon;
    return l;
}
static sy_layer ln_axes(int n, int32_t a0, int32_t a1) {
    sy_layer l = sy_layer_layer_normalization();
    l.n_axes = n;
    l.axes[0] = a0;
    l.axes[1] = a1;
    return l;
}

/* The trainable weights' gradients in r's plan against "<prefix>_<weight>";
 * the moving statistics have none. */
static void compare_trainable_grads(const char *what, const sy_npz *z, sy_model *m, const char *prefix,
                                    const grad_run *r, tol t) {
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        weight_name w = weight_of(m, i, prefix, false);
        bool moving = strstr(w.var, "/moving_") != NULL;
        sy_node pn = find_node(r->g, "param", w.var);
        const float *got = sy_plan_gradient(r->p, pn);
        if (moving) {
            CHECK(!has(z, w.key), "%s: %s is a state, not a trainable weight", what, w.var);
            continue;
        }
        char label[320];
        snprintf(label, sizeof label, "%s: %s", what, w.key);
        sy_tensor *want = get(z, w.key);
        if (want) compare(label, got, want, t.rtol, t.atol);
        sy_tensor_free(want);
    }
}

/* A layer_<case>.npz of make_norm_fixtures.py: inference output (predict)
 * and gradients; with `training`, the training-mode output and gradients
 * (batch statistics) and the moving statistics after that one step. */
static void check_norm_layer(const char *name, sy_layer cfg, bool training, tol t) {
    char file[128], what[192];
    int before = check_failures;
    snprintf(file, sizeof file, "layer_%s.npz", name);
    sy_npz *z = open_fixture(file);
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *r = get(z, "r");
    cfg.name = "layer";
    sy_model *m = x && y && r ? model_of(x, &cfg, 1) : NULL;
    if (m) {
        load_weights(z, m, "w", false);
        sy_tensor *out = predict(m, x);
        snprintf(what, sizeof what, "%s: y", file);
        if (out) compare(what, sy_tensor_data(out), y, t.rtol, t.atol);
        sy_tensor_free(out);
        grad_run g = grad_plan(m, x, r, dot_loss);
        if (g.p) {
            compare_dx(file, z, &g, t);
            snprintf(what, sizeof what, "%s: gradient", file);
            compare_trainable_grads(what, z, m, "dw", &g, t);
        }
        grad_run_free(&g);
        if (training) { /* the same sum(y * r) with the layer in training mode */
            grad_run tr = {NULL, NULL, SY_NONE, SY_NONE, SY_NONE, SY_NONE};
            CHECK_OK(sy_graph_new(&tr.g));
            tr.x = sy_graph_param(tr.g, "x", SY_F32, sy_tensor_shape(x), sy_init_zeros());
            tr.y = SY_NONE;
            keras_build_layers(m, tr.g, &tr.x, &tr.y, true, true, NULL);
            sy_node rn = sy_graph_input(tr.g, "t", SY_F32, sy_tensor_shape(r));
            tr.loss = dot_loss(tr.g, tr.y, rn);
            sy_plan_options o = sy_plan_options_default();
            o.loss = tr.loss;
            o.vars = m->vars;
            o.outputs = &tr.y;
            o.n_outputs = 1;
            CHECK_OK(sy_plan_compile(tr.g, &o, &tr.p));
            if (tr.p) {
                set_var(m->vars, "x", x);
                float *rv = as_f32(r);
                memcpy(sy_plan_input(tr.p, rn), rv, (size_t)sy_tensor_count(r) * sizeof(float));
                free(rv);
                CHECK_OK(sy_plan_run(tr.p));
                sy_tensor *want = get(z, "y_train");
                snprintf(what, sizeof what, "%s: y_train", file);
                if (want) compare(what, sy_plan_output(tr.p, tr.y), want, t.rtol, t.atol);
                sy_tensor_free(want);
                want = get(z, "dx_train");
                snprintf(what, sizeof what, "%s: dx_train", file);
                if (want) compare(what, sy_plan_gradient(tr.p, tr.x), want, t.rtol, t.atol);
                sy_tensor_free(want);
                snprintf(what, sizeof what, "%s: training gradient", file);
                compare_trainable_grads(what, z, m, "dw_train", &tr, t);
                static const char *const stats[] = {"moving_mean", "moving_variance"};
                for (int k = 0; k < 2; k++) {
                    char key[64], var[64];
                    snprintf(key, sizeof key, "%s_after", stats[k]);
                    snprintf(var, sizeof var, "layer/%s", stats[k]);
                    want = get(z, key);
                    snprintf(what, sizeof what, "%s: %s after a training step", file, stats[k]);
                    if (want) compare(what, sy_vars_data(m->vars, sy_vars_find(m->vars, var)), want, 1e-6, 1e-7);
                    sy_tensor_free(want);
                }
            }
            grad_run_free(&tr);
        }
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(r);
    sy_npz_close(z);
    fprintf(stderr, "layer %-28s %s\n", name, check_failures == before ? "ok" : "FAILED");
}

/* Conv2D -> BatchNormalization -> Flatten -> Dense trained three SGD steps
 * by fit(): every weight after them, moving statistics included, and the
 * prediction with the moving statistics; then the same with two replicas
 * (each normalising by its half of the batch) agrees with one replica on
 * the moving mean's update to round-off only where the statistics are
 * linear, so only determinism is checked there. */
static void check_bn_model(tol t) {
    int before = check_failures;
    sy_npz *z = open_fixture("model_bn_sgd.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *pred = get(z, "pred");
    sy_layer l[4] = {sy_layer_conv2d(3, 2, 2), sy_layer_batch_normalization(), sy_layer_flatten(), sy_layer_dense(2)};
    sy_model *m = x && y ? compiled(x, l, 4, sy_optimizer_sgd(0.1f, 0, false), "mse", "accuracy") : NULL;
    if (m) {
        load_weights(z, m, "w", true);
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 4;
        f.shuffle = false;
        f.verbose = 0;
        CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
        compare_weights("model_bn_sgd.npz: after 3 steps", z, m, "f", true, NULL, t);
        sy_tensor *out = predict(m, x);
        if (out && pred) compare("model_bn_sgd.npz: pred", sy_tensor_data(out), pred, t.rtol, t.atol);
        sy_tensor_free(out);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(pred);
    sy_npz_close(z);
    fprintf(stderr, "model %-28s %s\n", "bn_sgd", check_failures == before ? "ok" : "FAILED");
}

static void test_normalization(void) {
    const tol t = {2e-5, 2e-6};
    check_norm_layer("batch_normalization_2d", sy_layer_batch_normalization(), true, t);
    check_norm_layer("batch_normalization_4d", sy_layer_batch_normalization(), true, t);
    check_norm_layer("batch_normalization_rank3", sy_layer_batch_normalization(), true, t);
    check_norm_layer("batch_normalization_4d_axis1", bn_with(1, 0.9), true, t);
    check_norm_layer("batch_normalization_plain", norm_plain(sy_layer_batch_normalization(), 0.01), true, t);
    check_norm_layer("layer_normalization", sy_layer_layer_normalization(), false, t);
    check_norm_layer("layer_normalization_axes12", ln_axes(2, 1, 2), false, t);
    check_norm_layer("layer_normalization_axis1", ln_axes(1, 1, 0), false, t);
    check_norm_layer("layer_normalization_plain", norm_plain(sy_layer_layer_normalization(), 1e-6), false, t);
    check_bn_model(t);
}

/* ---- issue 15: merge layers, multi-input Functional models ------------------------------------------------- */

/* A merge layer fixture (make_merge_fixtures.py): a Functional model of n Inputs x0, x1, ... and the layer; y and
 * the gradients dx0, dx1, ... of sum(y * r). Predict takes one input, so the forward pass is the gradient plan's:
 * every input a parameter "x<i>" of the model's store, the layers built by keras_build_layers over them. */
static void check_merge(const char *file, sy_layer cfg, tol t) {
    char what[160];
    sy_npz *z = open_fixture(file);
    int n = 0;
    while (n < 8) {
        char key[8];
        snprintf(key, sizeof key, "x%d", n);
        if (!has(z, key)) break;
        n++;
    }
    sy_tensor *xs[8] = {NULL}, *y = get(z, "y"), *r = get(z, "r");
    sy_model *m = NULL;
    CHECK_OK(sy_model_new_functional(NULL, &m));
    int32_t in[8], out = -1;
    for (int i = 0; i < n; i++) {
        char key[8];
        snprintf(key, sizeof key, "x%d", i);
        xs[i] = get(z, key);
        sy_shape s = xs[i] ? sy_tensor_shape(xs[i]) : (sy_shape){0}, inner = {.rank = s.rank - 1};
        for (int d = 1; d < s.rank; d++) inner.dims[d - 1] = s.dims[d];
        CHECK_OK(sy_model_input(m, inner, NULL, NULL, &in[i]));
    }
    CHECK_OK(sy_model_call(m, &cfg, in, n, &out));
    CHECK_OK(sy_model_set_outputs(m, &out, 1));
    sy_graph *g = NULL;
    sy_plan *p = NULL;
    sy_graph_new(&g);
    sy_node xn[8], yn = SY_NONE;
    for (int i = 0; i < n && xs[i]; i++) {
        char key[8];
        snprintf(key, sizeof key, "x%d", i);
        xn[i] = sy_graph_param(g, key, SY_F32, sy_tensor_shape(xs[i]), sy_init_zeros());
    }
    CHECK(n >= 2 && y && r && keras_build_layers(m, g, xn, &yn, false, true, NULL), "%s: building the layers: %s", file,
          sy_graph_error(g));
    sy_node tn = r ? sy_graph_input(g, "t", SY_F32, sy_tensor_shape(r)) : SY_NONE;
    sy_node loss = yn != SY_NONE && tn != SY_NONE ? dot_loss(g, yn, tn) : SY_NONE;
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.vars = m->vars;
    o.outputs = &yn;
    o.n_outputs = 1;
    if (loss != SY_NONE && sy_graph_status(g) == SY_OK) CHECK_OK(sy_plan_compile(g, &o, &p));
    if (p) {
        for (int i = 0; i < n; i++) {
            char key[8];
            snprintf(key, sizeof key, "x%d", i);
            set_var(m->vars, key, xs[i]);
        }
        float *tv = as_f32(r);
        memcpy(sy_plan_input(p, tn), tv, (size_t)sy_tensor_count(r) * sizeof(float));
        free(tv);
        CHECK_OK(sy_plan_run(p));
        snprintf(what, sizeof what, "%s: y", file);
        compare(what, sy_plan_output(p, yn), y, t.rtol, t.atol);
        for (int i = 0; i < n; i++) {
            char key[8];
            snprintf(key, sizeof key, "dx%d", i);
            sy_tensor *dx = get(z, key);
            snprintf(what, sizeof what, "%s: %s", file, key);
            if (dx) compare(what, sy_plan_gradient(p, xn[i]), dx, t.rtol, t.atol);
            sy_tensor_free(dx);
        }
    }
    sy_plan_free(p);
    sy_graph_free(g);
    sy_model_free(m);
    for (int i = 0; i < n; i++) sy_tensor_free(xs[i]);
    sy_tensor_free(y);
    sy_tensor_free(r);
    sy_npz_close(z);
}

static void test_merge_layers(void) {
    static const tol exact = {1e-6, 1e-7};
    check_merge("layer_merge_add.npz", sy_layer_add(), exact);
    check_merge("layer_merge_add3_4d.npz", sy_layer_add(), exact);
    check_merge("layer_merge_subtract.npz", sy_layer_subtract(), exact);
    check_merge("layer_merge_multiply.npz", sy_layer_multiply(), exact);
    check_merge("layer_merge_average.npz", sy_layer_average(), exact);
    check_merge("layer_merge_maximum.npz", sy_layer_maximum(), exact);
    check_merge("layer_merge_minimum.npz", sy_layer_minimum(), exact);
    check_merge("layer_merge_concatenate.npz", sy_layer_concatenate(-1), exact);
    check_merge("layer_merge_concatenate_axis1.npz", sy_layer_concatenate(1), exact);
    check_merge("layer_merge_concatenate_4d_axis2.npz", sy_layer_concatenate(2), exact);
}

/* ---- issue 15, recurrent activations (tools/golden/make_rnn_activation_fixtures.py) ------- */

static sy_layer rnn_act(sy_layer l, sy_activation act, sy_activation rec, bool seqs, bool back) {
    l.activation = act;
    l.recurrent_activation = rec;
    l.return_sequences = seqs;
    l.go_backwards = back;
    return l;
}

static void test_rnn_activations(void) {
    sy_layer lstm4 = sy_layer_lstm(4), lstm3 = sy_layer_lstm(3), gru4 = sy_layer_gru(4), gru3 = sy_layer_gru(3);
    const layer_case cases[] = {
        {"rnn_act_lstm_gelu_hard_sigmoid", rnn_act(lstm4, SY_ACTIVATION_GELU, SY_ACTIVATION_HARD_SIGMOID, false, false)},
        {"rnn_act_lstm_elu_softsign_seq", rnn_act(lstm4, SY_ACTIVATION_ELU, SY_ACTIVATION_SOFTSIGN, true, false)},
        {"rnn_act_lstm_selu_swish_seq", rnn_act(lstm3, SY_ACTIVATION_SELU, SY_ACTIVATION_SWISH, true, false)},
        {"rnn_act_lstm_exponential_sigmoid", rnn_act(lstm3, SY_ACTIVATION_EXPONENTIAL, SY_ACTIVATION_SIGMOID, false, false)},
        {"rnn_act_lstm_relu6_hard_sigmoid_backwards",
         rnn_act(lstm4, SY_ACTIVATION_RELU6, SY_ACTIVATION_HARD_SIGMOID, true, true)},
        {"rnn_act_lstm_softplus_linear", rnn_act(lstm3, SY_ACTIVATION_SOFTPLUS, SY_ACTIVATION_LINEAR, false, false)},
        {"rnn_act_lstm_tanh_gelu_seq", rnn_act(lstm3, SY_ACTIVATION_TANH, SY_ACTIVATION_GELU, true, false)},
        {"rnn_act_gru_swish_softsign", rnn_act(gru4, SY_ACTIVATION_SWISH, SY_ACTIVATION_SOFTSIGN, false, false)},
        {"rnn_act_gru_gelu_hard_sigmoid_seq", rnn_act(gru4, SY_ACTIVATION_GELU, SY_ACTIVATION_HARD_SIGMOID, true, false)},
        {"rnn_act_gru_elu_sigmoid_seq", rnn_act(gru3, SY_ACTIVATION_ELU, SY_ACTIVATION_SIGMOID, true, false)},
        {"rnn_act_gru_selu_softplus", rnn_act(gru3, SY_ACTIVATION_SELU, SY_ACTIVATION_SOFTPLUS, false, false)},
        {"rnn_act_gru_exponential_relu6_seq", rnn_act(gru3, SY_ACTIVATION_EXPONENTIAL, SY_ACTIVATION_RELU6, true, false)},
        {"rnn_act_gru_softsign_exponential_backwards",
         rnn_act(gru3, SY_ACTIVATION_SOFTSIGN, SY_ACTIVATION_EXPONENTIAL, false, true)},
        {"rnn_act_gru_linear_selu_seq", rnn_act(gru3, SY_ACTIVATION_LINEAR, SY_ACTIVATION_SELU, true, false)},
    };
    check_layers(cases, sizeof cases / sizeof cases[0], TOL_RNN);
}

/* ---- issue 15, keras.applications: the Normalization preprocessing layer ---------------- */

/* layer_<name>.npz: the layer with the fixture's weights (w_mean,
 * w_variance, w_count; none for constants): y and dx. */
static void check_preprocessing(const char *name, sy_layer cfg, tol t) {
    char file[128], what[192];
    int before = check_failures;
    snprintf(file, sizeof file, "layer_%s.npz", name);
    sy_npz *z = open_fixture(file);
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *r = get(z, "r");
    cfg.name = "layer";
    sy_model *m = x && y && r ? model_of(x, &cfg, 1) : NULL;
    if (m) {
        load_weights(z, m, "w", false);
        sy_tensor *out = predict(m, x);
        snprintf(what, sizeof what, "%s: y", file);
        if (out) compare(what, sy_tensor_data(out), y, t.rtol, t.atol);
        sy_tensor_free(out);
        grad_run g = grad_plan(m, x, r, dot_loss);
        if (g.p) compare_dx(file, z, &g, t);
        grad_run_free(&g);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(r);
    sy_npz_close(z);
    fprintf(stderr, "layer %-28s %s\n", name, check_failures == before ? "ok" : "FAILED");
}

static sy_layer normalization_axes(int n, int32_t a0, int32_t a1, bool invert) {
    sy_layer l = sy_layer_normalization();
    l.n_axes = n;
    l.axes[0] = a0;
    l.axes[1] = a1;
    l.invert = invert;
    return l;
}

static void test_preprocessing_normalization(void) {
    const tol t = {2e-6, 1e-6};
    check_preprocessing("preprocessing_normalization", sy_layer_normalization(), t);
    check_preprocessing("preprocessing_normalization_axes12", normalization_axes(2, 1, 2, false), t);
    check_preprocessing("preprocessing_normalization_invert", normalization_axes(1, -1, 0, true), t);
    check_preprocessing("preprocessing_normalization_none", normalization_axes(0, 0, 0, false), t);
    sy_layer c = sy_layer_normalization();
    c.mean.list = c.variance.list = true;
    c.mean.n = c.variance.n = 3;
    double mean[3] = {0.5, -1.0, 2.0}, var[3] = {4.0, 0.25, 0.0};
    for (int i = 0; i < 3; i++) c.mean.v[i] = mean[i], c.variance.v[i] = var[i];
    check_preprocessing("preprocessing_normalization_constants", c, t);
    /* adapt(x_adapt, batch_size=4): Keras's mean, variance and count, then y */
    sy_npz *z = open_fixture("layer_preprocessing_normalization_adapt.npz");
    sy_tensor *data = get(z, "x_adapt"), *x = get(z, "x"), *y = get(z, "y");
    sy_layer l = sy_layer_normalization();
    l.name = "norm";
    sy_model *m = data && x && y ? model_of(x, &l, 1) : NULL;
    if (m) {
        CHECK_OK(sy_model_adapt_normalization(m, "norm", data, 4));
        const char *keys[3] = {"adapt_mean", "adapt_variance", "adapt_count"};
        for (int i = 0; i < 3; i++) {
            sy_tensor *want = get(z, keys[i]);
            if (want) compare(keys[i], sy_model_weight_data(m, i), want, 1e-6, 1e-6);
            sy_tensor_free(want);
        }
        sy_tensor *out = predict(m, x);
        if (out) compare("adapt: y", sy_tensor_data(out), y, t.rtol, t.atol);
        sy_tensor_free(out);
        CHECK(sy_model_adapt_normalization(m, "nope", data, 4) == SY_ERR_NOT_FOUND, "an unknown layer");
        sy_model_free(m);
    }
    sy_tensor_free(data);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

int main(void) {
    test_activation_family(); /* issue 15 */
    test_rnn_activations();   /* issue 15, recurrent activations */
    test_layers();
    test_recurrent_layers();
    test_conv_family();
    test_small_cnn();
    test_stacked_recurrent();
    test_losses();
    test_metrics();
    test_optimizers();
    test_fashion_mnist_trajectory();
    test_imdb_trajectory();
    test_normalization();
    test_merge_layers(); /* issue 15, merge layers */
    test_preprocessing_normalization(); /* issue 15, keras.applications */
    return check_report("test_golden");
}
