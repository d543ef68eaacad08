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
 *   - layers that drop the mask, and what is refused.
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

int main(void) {
    test_recurrent();
    test_pooling();
    test_words();
    test_strategies();
    test_loss();
    test_dropped();
    test_refused();
    return check_report("test_masking");
}
