/*
 * test_sequence.c - the sequence layers (issue 17) against tf.keras 2.15:
 * Conv1D, MaxPooling1D, AveragePooling1D, GlobalMaxPooling1D,
 * GlobalAveragePooling1D, SimpleRNN, RepeatVector, Permute,
 * SpatialDropout1D and SpatialDropout2D.
 *
 *   - each layer_<case>.npz of tools/golden/make_sequence_fixtures.py:
 *     predict()'s output, and the gradients of sum(y * r) wrt the input
 *     and every weight (golden_check.h);
 *   - model_sequence.npz, a Sequential model of them: the same numbers,
 *     model.to_json() byte for byte (written from the model made in C, and
 *     read and written back), model.summary() byte for byte, and the .h5
 *     file Keras's save_weights() wrote, loaded by its weight names, then
 *     written by systolic and read back;
 *   - SpatialDropout while training drops whole channels, seeded;
 *   - what Keras refuses is refused with the layer's name and the values.
 */
#include "check.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SY_GOLDEN_DIR
#error "SY_GOLDEN_DIR must name tests/golden"
#endif

#include "golden_check.h"

/* Measured: every single-layer case's y, dx and dw are within 3e-7 of
 * their array's largest magnitude (an (N, T, F) dx: of its step's); the
 * model's dx, whose gradient chains back through two SimpleRNNs, within
 * 1e-6 (between 6e-7 and 1e-6; float round-off, TF's Eigen kernels
 * summing in other orders), so 2e-6 leaves 2x. */
static const tol TOL_SEQ = {0, 2e-6};
/* model_wrappers chains five recurrent layers (ten scans with both
 * directions): its gradients are within 1.6e-6 to 2e-6 of their arrays'
 * largest magnitudes (round-off compounding over the chain, as the
 * 60-step LSTM's in test_golden.c), so 4e-6 as there. */
static const tol TOL_DEEP = {0, 4e-6};

static sy_layer opts1d(sy_layer l, int32_t strides, sy_padding p, sy_activation a) {
    l.strides[0] = strides;
    l.padding = p;
    l.activation = a;
    return l;
}

static void test_layers(void) {
    const sy_padding V = SY_PADDING_VALID, S = SY_PADDING_SAME;
    sy_layer causal = sy_layer_conv1d(3, 3), groups = sy_layer_conv1d(4, 2),
             gap = sy_layer_global_average_pooling1d();
    causal.causal = true;
    causal.dilation_rate[0] = 2;
    groups.groups = 2;
    groups.use_bias = false;
    groups.activation = SY_ACTIVATION_TANH;
    gap.keepdims = true;
    sy_layer seq = sy_layer_simple_rnn(4), back = sy_layer_simple_rnn(3);
    seq.activation = SY_ACTIVATION_RELU;
    seq.return_sequences = back.return_sequences = back.go_backwards = true;
    back.use_bias = false;
    const int32_t swap[2] = {2, 1}, rot[3] = {3, 1, 2};
    const layer_case cases[] = {
        {"conv1d", sy_layer_conv1d(4, 3)},
        {"conv1d_same_s2_relu", opts1d(sy_layer_conv1d(5, 3), 2, S, SY_ACTIVATION_RELU)},
        {"conv1d_causal_dilated", causal},
        {"conv1d_groups_nobias_tanh", groups},
        {"max_pooling1d", sy_layer_max_pooling1d(2)},
        {"max_pooling1d_same_s2", opts1d(sy_layer_max_pooling1d(3), 2, S, SY_ACTIVATION_LINEAR)},
        {"average_pooling1d", sy_layer_average_pooling1d(3)},
        {"average_pooling1d_same_s2",
         opts1d(sy_layer_average_pooling1d(3), 2, S, SY_ACTIVATION_LINEAR)},
        {"global_max_pooling1d", sy_layer_global_max_pooling1d()},
        {"global_average_pooling1d_keepdims", gap},
        {"simple_rnn", sy_layer_simple_rnn(4)},
        {"simple_rnn_seq_relu", seq},
        {"simple_rnn_backwards_nobias", back},
        {"repeat_vector", sy_layer_repeat_vector(3)},
        {"permute", sy_layer_permute(swap, 2)},
        {"permute_3d", sy_layer_permute(rot, 3)},
        {"spatial_dropout1d_inference", sy_layer_spatial_dropout1d(0.5)},
        {"spatial_dropout2d_inference", sy_layer_spatial_dropout2d(0.5)},
    };
    (void)V;
    check_layers(cases, sizeof cases / sizeof cases[0], TOL_SEQ);
}

/* ---- wrappers: weights keyed by their whole names (GOLDEN_FULL_NAMES) --------------------------
 */

static sy_layer merged(sy_layer inner, sy_merge_mode mode) {
    sy_layer l = sy_layer_bidirectional(&inner);
    l.merge_mode = mode;
    return l;
}

static void test_wrappers(void) {
    sy_layer lstm = sy_layer_lstm(3), gru = sy_layer_gru(3), rnn = sy_layer_simple_rnn(3),
             back = sy_layer_lstm(2);
    lstm.return_sequences = rnn.return_sequences = true;
    back.go_backwards = true;
    sy_layer dense = sy_layer_dense(4), conv = sy_layer_conv2d(3, 2, 2);
    dense.activation = SY_ACTIVATION_TANH;
    const layer_case cases[] = {
        {"bidirectional_lstm_seq", merged(lstm, SY_MERGE_CONCAT)},
        {"bidirectional_gru_sum", merged(gru, SY_MERGE_SUM)},
        {"bidirectional_simple_rnn_mul_seq", merged(rnn, SY_MERGE_MUL)},
        {"bidirectional_lstm_ave_backwards", merged(back, SY_MERGE_AVE)},
        {"time_distributed_dense", sy_layer_time_distributed(&dense)},
        {"time_distributed_conv2d", sy_layer_time_distributed(&conv)},
    };
    check_layers_keyed(cases, sizeof cases / sizeof cases[0], TOL_SEQ, GOLDEN_FULL_NAMES);
}

/* ---- the model ------------------------------------------------------------------------- */

#define N_MODEL_LAYERS 11

/* make_sequence_fixtures.py's model_fixture(), layer by layer. */
static void model_layers(sy_layer *l) {
    l[0] = sy_layer_conv1d(6, 3);
    l[0].causal = true;
    l[0].dilation_rate[0] = 2;
    l[0].activation = SY_ACTIVATION_RELU;
    l[1] = sy_layer_max_pooling1d(2);
    l[2] = sy_layer_spatial_dropout1d(0.25);
    l[3] = sy_layer_conv1d(5, 2);
    l[3].padding = SY_PADDING_SAME;
    l[4] = sy_layer_average_pooling1d(2);
    l[4].strides[0] = 1;
    l[5] = sy_layer_simple_rnn(4);
    l[5].return_sequences = true;
    const int32_t swap[2] = {2, 1};
    l[6] = sy_layer_permute(swap, 2);
    l[7] = sy_layer_global_max_pooling1d();
    l[8] = sy_layer_repeat_vector(3);
    l[9] = sy_layer_simple_rnn(3);
    l[9].go_backwards = true;
    l[10] = sy_layer_dense(2);
}

/* A fixture's uint8 array as a string (free()). */
static char *fixture_text(const sy_npz *z, const char *name) {
    sy_tensor *t = get(z, name);
    if (!t) return NULL;
    int64_t n = sy_tensor_count(t);
    char *s = calloc((size_t)n + 1, 1);
    for (int64_t i = 0; i < n; i++) s[i] = (char)sy_tensor_get(t, i);
    sy_tensor_free(t);
    return s;
}

static char *summary_of(const sy_model *m) {
    FILE *f = tmpfile();
    sy_model_summary(m, f);
    long n = ftell(f);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = '\0';
    fclose(f);
    return s;
}

/* <name>.npz's JSON and summary against the model made in C from layers,
 * and <name>.h5 (Keras's save_weights()) loaded into the model Keras's
 * JSON makes, then written by systolic and read back; keys: the fixture's
 * weight keys (check_model's model_file). */
static void check_files(const char *name, const sy_layer *l, int n, int keys) {
    char file[128];
    snprintf(file, sizeof file, "%s.npz", name);
    sy_npz *z = open_fixture(file);
    char *keras_json = fixture_text(z, "json"), *keras_summary = fixture_text(z, "summary");
    sy_tensor *x = get(z, "x");
    sy_model *m = x ? model_of(x, l, n) : NULL;
    if (m && keras_json && keras_summary) {
        char *json = NULL;
        CHECK_OK(sy_model_to_json(m, &json));
        CHECK(json && !strcmp(json, keras_json),
              "%s: to_json differs from Keras's:\n%s\nKeras:\n%s", name, json, keras_json);
        sy_free(json);
        char *s = summary_of(m);
        CHECK(!strcmp(s, keras_summary), "%s: summary differs from Keras's:\n%s\nKeras:\n%s", name,
              s, keras_summary);
        free(s);

        /* Keras's JSON read and written back unchanged, its .h5 weights loaded by name */
        sy_model *r = NULL;
        CHECK_OK(sy_model_from_json(keras_json, &r));
        if (r) {
            CHECK_OK(sy_model_to_json(r, &json));
            CHECK(json && !strcmp(json, keras_json), "%s: JSON read and written back differs:\n%s",
                  name, json);
            sy_free(json);
            char h5[1024];
            snprintf(h5, sizeof h5, "%s/%s.h5", SY_GOLDEN_DIR, name);
            CHECK_OK(sy_model_load_weights(r, h5));
            compare_weights("h5 loaded", z, r, "w", keys, NULL, (tol){0, 0});
            /* written by systolic, read into the model made in C */
            char out[] = "seq_weights_XXXXXX";
            int fd = mkstemp(out);
            CHECK(fd >= 0, "mkstemp");
            if (fd >= 0) close(fd);
            char path[64];
            snprintf(path, sizeof path, "%s.h5", out);
            CHECK_OK(sy_model_save_weights(r, path));
            CHECK_OK(sy_model_load_weights(m, path));
            compare_weights("h5 written and read back", z, m, "w", keys, NULL, (tol){0, 0});
            remove(path);
            remove(out);
            sy_model_free(r);
        }
    }
    free(keras_json);
    free(keras_summary);
    sy_tensor_free(x);
    sy_model_free(m);
    sy_npz_close(z);
}

static void test_model(void) {
    sy_layer l[N_MODEL_LAYERS];
    model_layers(l);
    check_model("model_sequence.npz", l, N_MODEL_LAYERS, true, TOL_SEQ, TOL_SEQ);
    check_files("model_sequence", l, N_MODEL_LAYERS, true);
}

/* make_sequence_fixtures.py's wrappers_model_fixture(), layer by layer. */
static void wrappers_model_layers(sy_layer *l) {
    sy_layer dense = sy_layer_dense(4), lstm = sy_layer_lstm(3), rnn = sy_layer_simple_rnn(2),
             gru = sy_layer_gru(2);
    dense.activation = SY_ACTIVATION_RELU;
    lstm.return_sequences = rnn.return_sequences = true;
    const sy_layer all[6] = {sy_layer_time_distributed(&dense), sy_layer_lstm(4),
                             merged(lstm, SY_MERGE_CONCAT),     merged(rnn, SY_MERGE_SUM),
                             merged(gru, SY_MERGE_AVE),         sy_layer_dense(1)};
    memcpy(l, all, sizeof all);
    l[1].return_sequences = true;
}

/* The inner layers named among the others as Keras names them (dense,
 * lstm_1, ...). */
static void test_wrappers_model(void) {
    sy_layer l[6];
    wrappers_model_layers(l);
    check_model("model_wrappers.npz", l, 6, GOLDEN_FULL_NAMES, TOL_DEEP, TOL_DEEP);
    check_files("model_wrappers", l, 6, GOLDEN_FULL_NAMES);
}

/* ---- the emulated TPU -------------------------------------------------------------------- */

/* The wrappers model (SimpleRNN, LSTM and GRU in both directions, a
 * TimeDistributed Dense) on sim:v2-8: predict() within bf16 round-off of
 * Keras's float32 numbers but not equal to them (the products are the
 * MXU's, bf16 x bf16 -> fp32), and a training step runs. */
static void test_sim(void) {
    sy_strategy *s = strategy_of("sim:v2-8");
    if (!s) return;
    sy_strategy_scope_enter(s);
    sy_layer l[6];
    wrappers_model_layers(l);
    sy_npz *z = open_fixture("model_wrappers.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    sy_model *m = x && y ? model_of(x, l, 6) : NULL;
    if (m) {
        load_weights(z, m, "w", GOLDEN_FULL_NAMES);
        sy_tensor *out = predict(m, x);
        double scale, worst = largest_difference(out, y, &scale);
        CHECK(out && worst <= 2e-2 * scale && worst > 0,
              "sim:v2-8: largest difference %g of %g (bf16 products)", worst, scale);
        sy_tensor_free(out);
        sy_compile_options co = sy_compile_options_default();
        co.optimizer = sy_optimizer_adam(1e-3f);
        co.loss = "mse";
        CHECK_OK(sy_model_compile(m, &co));
        /* one global batch of 64, 8 samples a replica (fewer draws a warning): x and y 32 times
         * over */
        sy_tensor *xs[2] = {x, y}, *big[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            sy_shape bs = sy_tensor_shape(xs[k]);
            int64_t n = sy_tensor_count(xs[k]);
            bs.dims[0] *= 32;
            CHECK_OK(sy_tensor_new(SY_F32, bs, &big[k]));
            for (int64_t i = 0; big[k] && i < 32 * n; i++)
                ((float *)sy_tensor_data(big[k]))[i] = (float)sy_tensor_get(xs[k], i % n);
        }
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 64;
        f.verbose = 0;
        sy_history *h = NULL;
        if (big[0] && big[1]) CHECK_OK(sy_model_fit(m, big[0], big[1], &f, &h));
        sy_history_free(h);
        sy_tensor_free(big[0]);
        sy_tensor_free(big[1]);
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
    sy_strategy_scope_exit(s);
    sy_strategy_free(s);
}

/* ---- SpatialDropout while training ---------------------------------------------------- */

/* Training with rate 0.5 over ones: every (sample, channel) is all 0 or
 * all 2 over its steps or pixels, both occur, and the same seed gives the
 * same mask. */
static void spatial_training(sy_layer l, sy_shape in, const char *what) {
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    l.input_shape = in;
    l.seed = 7;
    CHECK_OK(sy_model_add(m, &l));
    float out[2][256];
    int64_t c = in.dims[in.rank - 1], per = sy_shape_count(&in) / c, batch = 4;
    for (int run = 0; run < 2; run++) {
        sy_graph *g;
        sy_graph_new(&g);
        sy_node x = sy_graph_fill(g, SY_F32, keras_batch_shape(batch, &in), 1.0), y = SY_NONE;
        CHECK(keras_build_layers(m, g, &x, &y, true, false, NULL), "%s: training graph: %s", what,
              sy_graph_error(g));
        sy_plan_options o = sy_plan_options_default();
        o.outputs = &y;
        o.n_outputs = 1;
        sy_plan *p = NULL;
        CHECK_OK(sy_plan_compile(g, &o, &p));
        if (p) {
            CHECK_OK(sy_plan_run(p));
            memcpy(out[run], sy_plan_output(p, y), (size_t)(batch * per * c) * sizeof(float));
        }
        sy_plan_free(p);
        sy_graph_free(g);
    }
    int zeros = 0, kept = 0, mixed = 0;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t k = 0; k < c; k++) {
            float first = out[0][b * per * c + k];
            for (int64_t i = 0; i < per; i++) mixed += out[0][(b * per + i) * c + k] != first;
            zeros += first == 0.0f;
            kept += first == 2.0f;
        }
    CHECK(mixed == 0, "%s: %d values differ within their channel", what, mixed);
    CHECK(zeros > 0 && kept > 0 && zeros + kept == batch * c,
          "%s: %d channels dropped, %d kept of %lld", what, zeros, kept, (long long)(batch * c));
    CHECK(!memcmp(out[0], out[1], (size_t)(batch * per * c) * sizeof(float)),
          "%s: the same seed, another mask", what);
    sy_model_free(m);
}

static void test_spatial_dropout_training(void) {
    spatial_training(sy_layer_spatial_dropout1d(0.5), sy_shape_of(2, (int64_t)5, (int64_t)8),
                     "SpatialDropout1D");
    spatial_training(sy_layer_spatial_dropout2d(0.5),
                     sy_shape_of(3, (int64_t)3, (int64_t)2, (int64_t)8), "SpatialDropout2D");
}

/* ---- refusals ------------------------------------------------------------------------------ */

static void refused(sy_layer l, sy_shape in, const char *a, const char *b) {
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    l.input_shape = in;
    sy_status st = sy_model_add(m, &l);
    CHECK(st != SY_OK, "%s accepted", sy_layer_class_name(l.kind));
    CHECK(strstr(sy_last_error(), a) && strstr(sy_last_error(), b), "message: %s", sy_last_error());
    sy_model_free(m);
}

static void test_refusals(void) {
    sy_shape seq = sy_shape_of(2, (int64_t)6, (int64_t)4),
             img = sy_shape_of(3, (int64_t)4, (int64_t)4, (int64_t)2);
    refused(sy_layer_conv1d(3, 3), img, "Conv1D", "(None, 4, 4, 2)");
    refused(sy_layer_conv1d(3, 7), seq, "kernel", "(None, 6, 4)");
    sy_layer dil = sy_layer_conv1d(3, 2);
    dil.strides[0] = 2;
    dil.dilation_rate[0] = 2;
    refused(dil, seq, "strides > 1", "dilation_rate");
    refused(sy_layer_max_pooling1d(7), seq, "MaxPooling1D", "empty");
    refused(sy_layer_global_average_pooling1d(), img, "GlobalAveragePooling1D",
            "(None, steps, channels)");
    refused(sy_layer_repeat_vector(3), seq, "RepeatVector", "(None, features)");
    refused(sy_layer_repeat_vector(0), sy_shape_of(1, (int64_t)4), "RepeatVector", "n must be");
    const int32_t bad[2] = {1, 3}, three[3] = {1, 2, 3};
    refused(sy_layer_permute(bad, 2), seq, "Permute", "dims=(1, 3)");
    refused(sy_layer_permute(three, 3), seq, "Permute", "has 2");
    sy_layer state = sy_layer_simple_rnn(3);
    state.return_state = true;
    refused(state, seq, "SimpleRNN", "return_state");
    refused(sy_layer_simple_rnn(3), img, "SimpleRNN", "(None, steps, features)");
    refused(sy_layer_spatial_dropout1d(0.5), img, "SpatialDropout1D", "(None, steps, channels)");
    refused(sy_layer_spatial_dropout2d(1.0), img, "SpatialDropout2D", "rate");
    sy_layer dense = sy_layer_dense(3), lstm = sy_layer_lstm(3);
    refused(sy_layer_bidirectional(&dense), seq, "Bidirectional",
            "must be LSTM, GRU or SimpleRNN, got Dense");
    refused(sy_layer_time_distributed(&lstm), seq, "TimeDistributed",
            "LSTM inside TimeDistributed is not supported");
    refused(sy_layer_time_distributed(&dense), sy_shape_of(1, (int64_t)4), "TimeDistributed",
            "(None, steps, ...)");
    refused(sy_layer_bidirectional(&lstm), img, "'bidirectional/forward_lstm' (LSTM)",
            "(None, steps, features)");
}

/* Keras JSON refused: a fixture's (model_wrappers.npz's, model_sequence.npz's) with one change. */
static void json_refused(const char *fixture, const char *from, const char *to, const char *a,
                         const char *b) {
    sy_npz *z = open_fixture(fixture);
    char *json = fixture_text(z, "json");
    sy_npz_close(z);
    char *at = json ? strstr(json, from) : NULL;
    CHECK(at != NULL, "'%s' not in the fixture's JSON", from);
    if (!at) {
        free(json);
        return;
    }
    size_t n = strlen(json) + strlen(to) + 1;
    char *text = malloc(n);
    snprintf(text, n, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
    sy_model *m = NULL;
    sy_status st = sy_model_from_json(text, &m);
    CHECK(st != SY_OK && !m, "accepted: %s -> %s", from, to);
    CHECK(strstr(sy_last_error(), a) && strstr(sy_last_error(), b), "message: %s", sy_last_error());
    sy_model_free(m);
    free(text);
    free(json);
}

static void test_json_refusals(void) {
    json_refused("model_wrappers.npz", "\"merge_mode\": \"sum\"", "\"merge_mode\": null",
                 "bidirectional_1", "merge_mode null");
    json_refused("model_wrappers.npz", "\"merge_mode\": \"sum\"", "\"merge_mode\": \"max\"",
                 "bidirectional_1", "\"max\"");
    json_refused("model_wrappers.npz", "\"merge_mode\": \"sum\"",
                 "\"merge_mode\": \"sum\", \"backward_layer\": {}", "bidirectional_1",
                 "backward_layer is not supported");
    json_refused("model_wrappers.npz", "\"class_name\": \"SimpleRNN\"", "\"class_name\": \"Dense\"",
                 "simple_rnn", "unknown argument");
    json_refused("model_wrappers.npz", "\"name\": \"dense\", \"trainable\"",
                 "\"name\": \"dense\", \"bogus\": 1, \"trainable\"", "dense",
                 "unknown argument 'bogus'");
    json_refused("model_wrappers.npz",
                 "\"class_name\": \"Dense\", \"config\": {\"name\": \"dense\"",
                 "\"class_name\": \"TimeDistributed\", \"config\": {\"name\": \"dense\"",
                 "time_distributed", "a TimeDistributed inside a wrapper is not supported");
    json_refused("model_sequence.npz", "\"padding\": \"causal\"", "\"padding\": \"full\"", "conv1d",
                 "\"valid\", \"same\" or \"causal\"");
    json_refused("model_sequence.npz", "\"dims\": [2, 1]", "\"dims\": [2, 0]", "permute",
                 "from 1 to 2");
}

int main(void) {
    test_layers();
    test_model();
    test_wrappers();
    test_wrappers_model();
    test_sim();
    test_spatial_dropout_training();
    test_refusals();
    test_json_refusals();
    return check_report("test_sequence");
}
