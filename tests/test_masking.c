/*
 * test_masking.c - Keras's masks (issue 17) against tf.keras 2.15, on
 * padded sequences of mixed lengths (a full row, one step, three steps
 * then padding, a fully padded row, a gap in the middle):
 *
 *   - each mask_<case>.npz of tools/golden/make_mask_fixtures.py:
 *     Masking before LSTM, GRU, SimpleRNN (last output, sequences,
 *     go_backwards) and Bidirectional (concat, sum), a Dense then
 *     GlobalAveragePooling1D, and Embedding(mask_zero=True) before two
 *     recurrent layers: predict()'s output and the gradients of sum(y * r)
 *     wrt x and every weight (golden_check.h);
 *   - mask_loss.npz: a return_sequences model's mse, evaluate()'s loss
 *     sum(l mask) / sum(mask) and the weights after one SGD step;
 *   - the same masked model on two replicas and on the emulated TPU;
 *   - layers that drop the mask, and what is refused;
 *   - (the same checks on models read from Keras's JSON) Masking with
 *     mask_value 0.5 and the layers Keras passes a mask through (Dropout,
 *     Activation, Dense, LayerNormalization, TimeDistributed,
 *     BatchNormalization, ReLU, LeakyReLU, ELU, PReLU, SpatialDropout1D),
 *     Bidirectional with merge_mode mul and ave, the merge layers (the
 *     logical and of their masks; Concatenate along the steps
 *     concatenates them, and refuses what Keras cannot concatenate), and
 *     masks into, out of and made in nested models;
 *   - mask_metrics.npz: a masked output's metrics (binary accuracy, AUC,
 *     Precision, Recall, mse; weighted accuracy and AUC with sample
 *     weights) and loss from evaluate(), the last batch partial, as
 *     Keras's; the metrics again on two replicas, two steps per execution.
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

/* Measured: y, dx and dw within 3e-7 of their arrays' largest magnitudes
 * (dx step by step); 2e-6 as test_sequence.c's. */
static const tol TOL = {0, 2e-6};

static sy_layer seq(sy_layer l) {
    l.return_sequences = true;
    return l;
}
static sy_layer back(sy_layer l) {
    l.go_backwards = true;
    return l;
}
static sy_layer bidi(sy_layer inner, sy_merge_mode mode) {
    sy_layer l = sy_layer_bidirectional(&inner);
    l.merge_mode = mode;
    return l;
}

/* The fixture's model.to_json() read and written back unchanged (Masking's mask_value, Embedding's
 * mask_zero); the model it describes is the one made in C from layers (same weights' names) */
static void check_json(const char *file, const sy_layer *layers, int n) {
    sy_npz *z = open_fixture(file);
    sy_tensor *x = get(z, "x"), *kj = get(z, "json");
    char *keras = kj ? calloc((size_t)sy_tensor_count(kj) + 1, 1) : NULL;
    for (int64_t i = 0; keras && i < sy_tensor_count(kj); i++) keras[i] = (char)sy_tensor_get(kj, i);
    sy_model *m = x && keras ? model_of(x, layers, n) : NULL, *r = NULL;
    char *json = NULL;
    if (m) {
        CHECK_OK(sy_model_from_json(keras, &r));
        if (r) CHECK_OK(sy_model_to_json(r, &json));
        CHECK(json && !strcmp(json, keras), "%s: Keras's JSON read and written back differs:\n%s", file, json);
        sy_free(json);
        int32_t nw = r ? sy_model_weight_count(r) : -1;
        CHECK(nw == sy_model_weight_count(m), "%s: %d weights from the JSON, %d made in C", file, nw,
              sy_model_weight_count(m));
        for (int32_t i = 0; r && i < nw && i < sy_model_weight_count(m); i++)
            CHECK(!strcmp(sy_model_weight_name(r, i), sy_model_weight_name(m, i)), "%s: weight %d is %s, in C %s", file,
                  i, sy_model_weight_name(r, i), sy_model_weight_name(m, i));
    }
    sy_model_free(r);
    sy_model_free(m);
    free(keras);
    sy_tensor_free(kj);
    sy_tensor_free(x);
    sy_npz_close(z);
}

/* Masking() then the case's layer, Keras's automatic names (GOLDEN_FULL_NAMES keys) */
static void check_after_masking(const char *name, sy_layer l) {
    char file[96];
    snprintf(file, sizeof file, "mask_%s.npz", name);
    int before = check_failures;
    sy_layer layers[2] = {sy_layer_masking(0.0), l};
    check_model(file, layers, 2, GOLDEN_FULL_NAMES, TOL, TOL);
    check_json(file, layers, 2);
    fprintf(stderr, "mask %-26s %s\n", name, check_failures == before ? "ok" : "FAILED");
}

static void test_recurrent(void) {
    check_after_masking("lstm", sy_layer_lstm(3));
    check_after_masking("lstm_seq", seq(sy_layer_lstm(3)));
    check_after_masking("lstm_back_seq", seq(back(sy_layer_lstm(3))));
    check_after_masking("gru", sy_layer_gru(3));
    check_after_masking("gru_seq_back", seq(back(sy_layer_gru(3))));
    check_after_masking("simple_rnn", sy_layer_simple_rnn(3));
    check_after_masking("simple_rnn_seq", seq(sy_layer_simple_rnn(3)));
    check_after_masking("bidi_lstm_seq", bidi(seq(sy_layer_lstm(3)), SY_MERGE_CONCAT));
    check_after_masking("bidi_gru_sum", bidi(sy_layer_gru(3), SY_MERGE_SUM));
    check_after_masking("bidi_simple_rnn_seq_sum", bidi(seq(sy_layer_simple_rnn(2)), SY_MERGE_SUM));
    check_after_masking("bidi_lstm", bidi(sy_layer_lstm(2), SY_MERGE_CONCAT));
}

/* the mask passes a Dense and GlobalAveragePooling1D averages the unmasked steps */
static void test_pooling(void) {
    sy_layer l[3] = {sy_layer_masking(0.0), sy_layer_dense(4), sy_layer_global_average_pooling1d()};
    check_model("mask_gap.npz", l, 3, GOLDEN_FULL_NAMES, TOL, TOL);
}

/* Embedding(12, 4, mask_zero=True) -> Bidirectional(LSTM(3, return_sequences)) -> LSTM(2) ->
 * Dense(1) */
static void words_layers(sy_layer *l) {
    l[0] = sy_layer_embedding(12, 4);
    l[0].mask_zero = true;
    l[1] = bidi(seq(sy_layer_lstm(3)), SY_MERGE_CONCAT);
    l[2] = sy_layer_lstm(2);
    l[3] = sy_layer_dense(1);
}

static void test_words(void) {
    sy_layer l[4];
    words_layers(l);
    check_model("mask_words.npz", l, 4, GOLDEN_FULL_NAMES, TOL, TOL);
    check_json("mask_words.npz", l, 4);
}

/* The words model's predictions on a strategy (cpu:2: equal to one
 * replica's to float round-off; sim:v2-8: within bf16 round-off). */
static void on_strategy(const char *spec, double rel) {
    sy_strategy *s = strategy_of(spec);
    if (!s) return;
    sy_strategy_scope_enter(s);
    sy_layer l[4];
    words_layers(l);
    sy_npz *z = open_fixture("mask_words.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    sy_model *m = x && y ? model_of(x, l, 4) : NULL;
    if (m) {
        load_weights(z, m, "w", GOLDEN_FULL_NAMES);
        sy_tensor *out = predict(m, x);
        double scale, worst = largest_difference(out, y, &scale);
        CHECK(out && worst <= rel * scale, "%s: largest difference %g of %g", spec, worst, scale);
        sy_tensor_free(out);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
    sy_strategy_scope_exit(s);
    sy_strategy_free(s);
}

static void test_strategies(void) {
    on_strategy("cpu:2", 1e-6);
    on_strategy("sim:v2-8", 2e-2);
}

/* Masking -> LSTM(3, return_sequences) -> Dense(1), mse: the loss weights the steps by the mask */
static void test_loss(void) {
    sy_npz *z = open_fixture("mask_loss.npz");
    sy_tensor *x = get(z, "x"), *t = get(z, "t"), *loss = get(z, "loss");
    sy_layer l[3] = {sy_layer_masking(0.0), seq(sy_layer_lstm(3)), sy_layer_dense(1)};
    sy_model *m = x && t && loss ? model_of(x, l, 3) : NULL;
    if (m) {
        load_weights(z, m, "w", GOLDEN_FULL_NAMES);
        sy_compile_options co = sy_compile_options_default();
        co.optimizer = sy_optimizer_sgd(0.1f, 0, false);
        co.loss = "mse";
        CHECK_OK(sy_model_compile(m, &co));
        sy_evaluate_options eo = sy_evaluate_options_default();
        eo.batch_size = 4;
        eo.verbose = 0;
        sy_logs logs;
        CHECK_OK(sy_model_evaluate(m, x, t, &eo, &logs));
        double got = sy_logs_get(&logs, "loss"), want = sy_tensor_get(loss, 0);
        CHECK(fabs(got - want) <= 1e-6 * fabs(want), "masked mse: %.8g, Keras %.8g", got, want);
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 4;
        f.shuffle = false;
        f.verbose = 0;
        CHECK_OK(sy_model_fit(m, x, t, &f, NULL));
        compare_weights("after one SGD step", z, m, "after", GOLDEN_FULL_NAMES, NULL, TOL);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(t);
    sy_tensor_free(loss);
    sy_npz_close(z);
}

/* A layer that cannot take a mask drops it, as TF 2's Keras: Flatten after a masked Embedding
 * builds and runs. */
static void test_dropped(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer e = sy_layer_embedding(10, 3), f = sy_layer_flatten(), d = sy_layer_dense(1);
    e.mask_zero = true;
    e.input_shape = sy_shape_of(1, (int64_t)4);
    CHECK_OK(sy_model_add(m, &e));
    CHECK_OK(sy_model_add(m, &f));
    CHECK_OK(sy_model_add(m, &d));
    sy_tensor *x = NULL;
    CHECK_OK(sy_tensor_new(SY_I32, sy_shape_of(2, (int64_t)2, (int64_t)4), &x));
    if (x) memset(sy_tensor_data(x), 0, sy_tensor_bytes(x));
    sy_tensor *out = x ? predict(m, x) : NULL;
    CHECK(out != NULL, "Flatten after a masked Embedding: %s", sy_last_error());
    sy_tensor_free(out);
    sy_tensor_free(x);
    sy_model_free(m);
}

/* Softmax given a mask is refused, naming the layer */
static void test_refused(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer e = sy_layer_embedding(10, 3), s = sy_layer_softmax(-1);
    e.mask_zero = true;
    e.input_shape = sy_shape_of(1, (int64_t)4);
    s.name = "probabilities";
    CHECK_OK(sy_model_add(m, &e));
    CHECK_OK(sy_model_add(m, &s));
    sy_tensor *x = NULL, *out = NULL;
    CHECK_OK(sy_tensor_new(SY_I32, sy_shape_of(2, (int64_t)2, (int64_t)4), &x));
    if (x) memset(sy_tensor_data(x), 0, sy_tensor_bytes(x));
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_status st = x ? sy_model_predict(m, x, &eo, &out) : SY_OK;
    CHECK(st != SY_OK && strstr(sy_last_error(), "probabilities") &&
              strstr(sy_last_error(), "mask"),
          "Softmax with a mask: status %d, %s", (int)st, sy_last_error());
    sy_tensor_free(out);
    sy_tensor_free(x);
    sy_model_free(m);
}

/* ---- issue 17: the pass-through layers, the merges, nested models, metrics ----------------------
 */

/* The fixture's Keras JSON as a model (a Functional one, nested models), or NULL after a failed
 * check. */
static sy_model *model_from_fixture(const sy_npz *z, const char *file) {
    sy_tensor *kj = get(z, "json");
    char *keras = kj ? calloc((size_t)sy_tensor_count(kj) + 1, 1) : NULL;
    for (int64_t i = 0; keras && i < sy_tensor_count(kj); i++)
        keras[i] = (char)sy_tensor_get(kj, i);
    sy_model *m = NULL;
    if (keras) CHECK(sy_model_from_json(keras, &m) == SY_OK, "%s: %s", file, sy_last_error());
    free(keras);
    sy_tensor_free(kj);
    return m;
}

/* A model fixture whose model is its Keras JSON, the weights keyed by their Keras names: predict()
 * against y, dx and every trainable weight's gradient of sum(y * r) against Keras's. */
static void check_keras_model(const char *name) {
    char file[96];
    snprintf(file, sizeof file, "mask_%s.npz", name);
    int before = check_failures;
    sy_npz *z = open_fixture(file);
    sy_model *m = z ? model_from_fixture(z, file) : NULL;
    sy_npz_close(z);
    if (m) check_model_of(file, m, NULL, 0, GOLDEN_KERAS_NAMES, TOL, TOL);
    fprintf(stderr, "mask %-26s %s\n", name, check_failures == before ? "ok" : "FAILED");
}

/* Masking (mask_value 0.5 in the first) then layers Keras passes the mask through, a recurrent
 * layer last; and Bidirectional's merge modes mul and ave */
static void test_pass_through(void) {
    static const char *const cases[] = {"pass_dropout_dense", "pass_norm_td",
                                        "pass_activations",   "bidi_lstm_seq_mul",
                                        "bidi_gru_ave",       "bidi_simple_rnn_seq_ave"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_keras_model(cases[i]);
}

/* the merge layers' masks, Concatenate along the features and the steps; masks into, out of and
 * made in nested models */
static void test_merges_nested(void) {
    static const char *const cases[] = {"merge_add_plain", "merge_concat_plain", "merge_multiply",
                                        "merge_average",   "merge_maximum",      "merge_subtract",
                                        "merge_concat",    "merge_concat_steps", "nested_seq",
                                        "nested_words"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_keras_model(cases[i]);
}

/* Concatenate along the steps of a masked input and an unmasked one with more than one feature:
 * Keras cannot concatenate their masks ((None, 6, 1) and (None, 6, 2)) and refuses the model; so
 * does systolic, naming the layer and both shapes */
static void test_concat_refused(void) {
    sy_model *m = NULL;
    int32_t in, a, b, c, o;
    CHECK_OK(sy_model_new_functional("joined_model", &m));
    sy_layer masking = sy_layer_masking(0.0), dense = sy_layer_dense(2),
             cat = sy_layer_concatenate(1), lstm = sy_layer_lstm(2);
    cat.name = "joined";
    CHECK_OK(sy_model_input(m, sy_shape_of(2, (int64_t)6, (int64_t)2), NULL, NULL, &in));
    CHECK_OK(sy_model_call(m, &masking, &in, 1, &a));
    CHECK_OK(sy_model_call(m, &dense, &in, 1, &b));
    int32_t ab[2] = {a, b};
    CHECK_OK(sy_model_call(m, &cat, ab, 2, &c));
    CHECK_OK(sy_model_call(m, &lstm, &c, 1, &o));
    CHECK_OK(sy_model_set_outputs(m, &o, 1));
    sy_tensor *x = NULL, *out = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(3, (int64_t)2, (int64_t)6, (int64_t)2), &x));
    if (x) memset(sy_tensor_data(x), 0, sy_tensor_bytes(x));
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_status st = x ? sy_model_predict(m, x, &eo, &out) : SY_OK;
    CHECK(st == SY_ERR_SHAPE && strstr(sy_last_error(), "'joined' (Concatenate)") &&
              strstr(sy_last_error(), ", 6, 1)") && strstr(sy_last_error(), ", 6, 2)"),
          "Concatenate(axis=1) of a masked and an unmasked input: status %d, %s", (int)st,
          sy_last_error());
    sy_tensor_free(out);
    sy_tensor_free(x);
    sy_model_free(m);
}

/* mask_metrics.npz: a return_sequences model's evaluate() with sample weights: the loss, and the
 * metrics -- binary accuracy, AUC, Precision, Recall, mse, and the weighted accuracy and AUC --
 * over the unmasked steps only, as Keras weights them by the output's mask (times the sample
 * weights for weighted_metrics). One replica in batches of 3 (the last partial: loss and metrics as
 * Keras's); then two replicas with two steps per execution, where the metrics (additive states)
 * must not change and the loss is per replica. */
static void check_masked_metrics(const char *spec, int64_t batch, int32_t steps_per_execution) {
    static const char *const names[] = {"accuracy",          "auc", "precision", "recall", "mse",
                                        "weighted_accuracy", "wauc"};
    sy_strategy *s = spec ? strategy_of(spec) : NULL;
    if (spec && !s) return;
    if (s) sy_strategy_scope_enter(s);
    sy_npz *z = open_fixture("mask_metrics.npz");
    sy_tensor *x = get(z, "x"), *t = get(z, "t"), *sw = get(z, "sw");
    sy_layer l[3] = {sy_layer_masking(0.0), seq(sy_layer_lstm(4)), sy_layer_dense(1)};
    l[2].activation = SY_ACTIVATION_SIGMOID;
    sy_model *m = x && t && sw ? model_of(x, l, 3) : NULL;
    if (m) {
        load_weights(z, m, "w", GOLDEN_FULL_NAMES);
        const char *metrics[] = {"accuracy", "AUC", "Precision", "Recall", "mse"};
        const char *weighted[] = {"accuracy", "AUC(name='wauc')"};
        sy_compile_options co = sy_compile_options_default();
        co.optimizer = sy_optimizer_sgd(0.1f, 0, false);
        co.loss = "binary_crossentropy";
        co.metrics = metrics;
        co.n_metrics = 5;
        co.weighted_metrics = weighted;
        co.n_weighted_metrics = 2;
        co.steps_per_execution = steps_per_execution;
        CHECK_OK(sy_model_compile(m, &co));
        sy_evaluate_options eo = sy_evaluate_options_default();
        eo.batch_size = batch;
        eo.verbose = 0;
        eo.sample_weight = sw;
        sy_logs logs;
        CHECK_OK(sy_model_evaluate(m, x, t, &eo, &logs));
        for (size_t i = 0; i < sizeof names / sizeof names[0] + (spec == NULL); i++) {
            const char *name = i < sizeof names / sizeof names[0] ? names[i] : "loss";
            char key[64];
            snprintf(key, sizeof key, "eval_%s", name);
            sy_tensor *want = get(z, key);
            double got = sy_logs_get(&logs, name), w = want ? sy_tensor_get(want, 0) : NAN;
            CHECK(fabs(got - w) <= 1e-6 * fmax(1, fabs(w)), "%s, batch %lld: %s %.9g, Keras %.9g",
                  spec ? spec : "one replica", (long long)batch, name, got, w);
            sy_tensor_free(want);
        }
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(t);
    sy_tensor_free(sw);
    sy_npz_close(z);
    if (s) {
        sy_strategy_scope_exit(s);
        sy_strategy_free(s);
    }
}

static void test_metrics(void) {
    check_masked_metrics(NULL, 3, 1);
    check_masked_metrics("cpu:2", 4, 2);
}

int main(void) {
    test_pass_through();
    test_merges_nested();
    test_concat_refused();
    test_metrics();
    test_recurrent();
    test_pooling();
    test_words();
    test_strategies();
    test_loss();
    test_dropped();
    test_refused();
    return check_report("test_masking");
}
