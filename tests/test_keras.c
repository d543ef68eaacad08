/*
 * test_keras.c - the Keras-style API: the summary table Keras prints, the
 * mistakes refused at add/compile/fit with names and shapes, learning on a
 * small problem, evaluate's padding, predict, determinism, the progress bar
 * formats, callbacks and the weights API. (Numerics against tf.keras are in
 * test_golden.c.)
 */
#include "check.h"
#include "synthetic.h"
#include "systolic.h"
#include "core/core_internal.h" /* sy_free, for to_json's strings */

#include <fcntl.h>
#include <math.h>
#include <pty.h>
#include <regex.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static bool contains(const char *haystack, const char *needle) { return strstr(haystack, needle) != NULL; }

#define CHECK_ERROR(expr, status, ...)                                                             \
    do {                                                                                           \
        sy_status st_ = (expr);                                                                    \
        CHECK(st_ == (status), "%s: expected %s, got %s (%s)", #expr, sy_status_name(status),      \
              sy_status_name(st_), sy_last_error());                                               \
        const char *needles_[] = {__VA_ARGS__};                                                    \
        for (size_t k_ = 0; k_ < sizeof needles_ / sizeof needles_[0]; k_++)                       \
            CHECK(contains(sy_last_error(), needles_[k_]), "%s: message '%s' lacks '%s'", #expr,   \
                  sy_last_error(), needles_[k_]);                                                  \
    } while (0)

/* The tutorial's model. */
static sy_model *tutorial_model(uint64_t seed) {
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_model_set_seed(m, seed);
    sy_layer l[6] = {sy_layer_conv2d(64, 3, 3), sy_layer_max_pooling2d(2, 2), sy_layer_activation(SY_ACTIVATION_RELU),
                     sy_layer_flatten(), sy_layer_dense(10), sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
    l[0].input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
    for (int i = 0; i < 6; i++) CHECK_OK(sy_model_add(m, &l[i]));
    return m;
}

static char *read_all(FILE *f) {
    long n = ftell(f);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = '\0';
    return s;
}

/* Keras 2.15's model.summary() of the tutorial model, byte for byte. */
static void test_summary(void) {
    static const char *expected =
        "Model: \"sequential\"\n"
        "_________________________________________________________________\n"
        " Layer (type)                Output Shape              Param #   \n"
        "=================================================================\n"
        " conv2d (Conv2D)             (None, 26, 26, 64)        640       \n"
        "                                                                 \n"
        " max_pooling2d (MaxPooling2  (None, 13, 13, 64)        0         \n"
        " D)                                                              \n"
        "                                                                 \n"
        " activation (Activation)     (None, 13, 13, 64)        0         \n"
        "                                                                 \n"
        " flatten (Flatten)           (None, 10816)             0         \n"
        "                                                                 \n"
        " dense (Dense)               (None, 10)                108170    \n"
        "                                                                 \n"
        " activation_1 (Activation)   (None, 10)                0         \n"
        "                                                                 \n"
        "=================================================================\n"
        "Total params: 108810 (425.04 KB)\n"
        "Trainable params: 108810 (425.04 KB)\n"
        "Non-trainable params: 0 (0.00 Byte)\n"
        "_________________________________________________________________\n";
    sy_model *m = tutorial_model(0);
    FILE *f = tmpfile();
    sy_model_summary(m, f);
    char *s = read_all(f);
    CHECK(strcmp(s, expected) == 0, "summary differs from Keras's:\n%s", s);
    free(s);
    fclose(f);
    CHECK(sy_model_param_count(m, -1) == 108810, "params %lld", (long long)sy_model_param_count(m, -1));
    sy_model_free(m);
}

static void test_weights_api(void) {
    sy_model *m = tutorial_model(1);
    CHECK(sy_model_weight_count(m) == 4, "weights %d", sy_model_weight_count(m));
    const char *names[4] = {"conv2d/kernel:0", "conv2d/bias:0", "dense/kernel:0", "dense/bias:0"};
    for (int i = 0; i < 4; i++) CHECK(strcmp(sy_model_weight_name(m, i), names[i]) == 0, "weight %d is %s", i, sy_model_weight_name(m, i));
    sy_shape k = sy_model_weight_shape(m, 0), dk = sy_model_weight_shape(m, 2);
    CHECK(k.rank == 4 && k.dims[0] == 3 && k.dims[1] == 3 && k.dims[2] == 1 && k.dims[3] == 64, "conv kernel HWIO");
    CHECK(dk.rank == 2 && dk.dims[0] == 10816 && dk.dims[1] == 10, "dense kernel (in, out)");
    CHECK(sy_model_find_weight(m, "dense/bias") == 3 && sy_model_find_weight(m, "dense/bias:0") == 3, "find by name");
    CHECK(sy_model_find_weight(m, "nope") == -1, "unknown weight");
    /* glorot_uniform: limit sqrt(6 / (fan_in + fan_out)); biases zero */
    const float *w = sy_model_weight_data(m, 2), *b = sy_model_weight_data(m, 3);
    double limit = sqrt(6.0 / (10816 + 10)), mx = 0, sum = 0;
    for (int i = 0; i < 108160; i++) {
        mx = fmax(mx, fabs(w[i]));
        sum += w[i];
    }
    CHECK(mx <= limit && mx > 0.99 * limit, "glorot_uniform limit %g, max |w| %g", limit, mx);
    CHECK(fabs(sum / 108160) < 0.01 * limit, "glorot_uniform mean %g", sum / 108160);
    for (int i = 0; i < 10; i++) CHECK(b[i] == 0.0f, "bias %d = %g", i, b[i]);
    /* the same seed gives the same weights; another seed others */
    sy_model *same = tutorial_model(1), *other = tutorial_model(2);
    CHECK(memcmp(sy_model_weight_data(same, 0), sy_model_weight_data(m, 0), 576 * 4) == 0, "seeded weights repeat");
    CHECK(memcmp(sy_model_weight_data(other, 0), sy_model_weight_data(m, 0), 576 * 4) != 0, "another seed differs");
    sy_model_free(same);
    sy_model_free(other);
    sy_model_free(m);
}

static void test_build_errors(void) {
    sy_model *m;
    CHECK_OK(sy_model_new("bad", &m));
    sy_layer flat = sy_layer_flatten();
    flat.input_shape = sy_shape_of(3, (int64_t)8, (int64_t)8, (int64_t)3);
    CHECK_OK(sy_model_add(m, &flat));
    sy_layer conv = sy_layer_conv2d(4, 3, 3);
    CHECK_ERROR(sy_model_add(m, &conv), SY_ERR_SHAPE, "conv2d", "(None, 192)", "(None, height, width, channels)");
    CHECK(sy_model_layer_count(m) == 1, "the refused layer is not added");
    sy_layer dense = sy_layer_dense(0);
    CHECK_ERROR(sy_model_add(m, &dense), SY_ERR_INVALID_ARGUMENT, "dense", "units");
    sy_layer r = sy_layer_reshape(sy_shape_of(2, (int64_t)5, (int64_t)-1));
    CHECK_ERROR(sy_model_add(m, &r), SY_ERR_SHAPE, "reshape", "192", "(5, -1)");
    sy_layer named = sy_layer_dense(3);
    named.name = "flatten";
    CHECK_ERROR(sy_model_add(m, &named), SY_ERR_INVALID_ARGUMENT, "'flatten' already exists");
    sy_model_free(m);

    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer big = sy_layer_conv2d(4, 5, 5);
    big.input_shape = sy_shape_of(3, (int64_t)3, (int64_t)3, (int64_t)1);
    CHECK_ERROR(sy_model_add(m, &big), SY_ERR_SHAPE, "conv2d", "5x5", "(None, 3, 3, 1)");
    sy_layer pool = sy_layer_max_pooling2d(4, 4);
    pool.input_shape = sy_shape_of(2, (int64_t)8, (int64_t)8);
    CHECK_ERROR(sy_model_add(m, &pool), SY_ERR_SHAPE, "max_pooling2d", "(None, 8, 8)");
    sy_layer drop = sy_layer_dropout(1.5f);
    drop.input_shape = sy_shape_of(1, (int64_t)4);
    CHECK_ERROR(sy_model_add(m, &drop), SY_ERR_INVALID_ARGUMENT, "dropout", "[0, 1)");
    sy_model_free(m);

    /* layers added before the input shape are built by sy_model_build */
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer d1 = sy_layer_dense(4), d2 = sy_layer_dense(2);
    CHECK_OK(sy_model_add(m, &d1));
    CHECK_OK(sy_model_add(m, &d2));
    sy_compile_options c = sy_compile_options_default();
    c.loss = "mse";
    CHECK_ERROR(sy_model_compile(m, &c), SY_ERR_STATE, "input");
    CHECK_OK(sy_model_build(m, sy_shape_of(1, (int64_t)5)));
    CHECK(sy_model_param_count(m, -1) == 5 * 4 + 4 + 4 * 2 + 2, "params after build");
    CHECK_OK(sy_model_compile(m, &c));
    sy_model_free(m);
}

static void test_compile_errors(void) {
    sy_model *m = tutorial_model(0);
    sy_compile_options c = sy_compile_options_default();
    c.loss = "sparse_categorical_crossentropyy";
    CHECK_ERROR(sy_model_compile(m, &c), SY_ERR_NOT_FOUND, "sparse_categorical_crossentropyy", "known:");
    c.loss = "sparse_categorical_crossentropy";
    const char *bad[] = {"accuracy", "f1"};
    c.metrics = bad;
    c.n_metrics = 2;
    CHECK_ERROR(sy_model_compile(m, &c), SY_ERR_NOT_FOUND, "'f1'", "known:");
    const char *mismatch[] = {"categorical_accuracy"};
    c.metrics = mismatch;
    c.n_metrics = 1;
    CHECK_ERROR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "categorical_accuracy", "sparse");
    sy_optimizer o;
    CHECK_ERROR(sy_optimizer_from_name("adamx", &o), SY_ERR_NOT_FOUND, "adamx", "sgd, adam, rmsprop");
    CHECK_OK(sy_optimizer_from_name("Adam", &o));
    CHECK(o.kind == SY_OPTIMIZER_ADAM && o.learning_rate == 0.001f && o.epsilon == 1e-7 && o.beta_1 == 0.9 && o.beta_2 == 0.999 && !o.amsgrad, "Keras's Adam defaults");
    c.optimizer = sy_optimizer_adam(-1);
    c.n_metrics = 0;
    CHECK_ERROR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "learning_rate");
    sy_model_free(m);

    /* a sparse loss on a one-unit output */
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer d = sy_layer_dense(1);
    d.input_shape = sy_shape_of(1, (int64_t)3);
    CHECK_OK(sy_model_add(m, &d));
    c = sy_compile_options_default();
    c.loss = "sparse_categorical_crossentropy";
    CHECK_ERROR(sy_model_compile(m, &c), SY_ERR_SHAPE, "(None, 1)", "binary_crossentropy");
    sy_model_free(m);
}

typedef struct cb_log {
    char events[64][24];
    int n;
    int stop_at_epoch;
} cb_log;

static void note(cb_log *l, const char *what, long long k) {
    if (l->n < 64) snprintf(l->events[l->n++], sizeof l->events[0], "%s %lld", what, k);
}
static sy_status cb_train_begin(void *ctx, sy_model *m) {
    (void)m;
    note(ctx, "train_begin", 0);
    return SY_OK;
}
static sy_status cb_epoch_begin(void *ctx, sy_model *m, int32_t epoch) {
    (void)m;
    note(ctx, "epoch_begin", epoch);
    return SY_OK;
}
static sy_status cb_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m;
    CHECK(!isnan(sy_logs_get(logs, "loss")), "batch logs carry the loss");
    note(ctx, "batch_end", step);
    return SY_OK;
}
static sy_status cb_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    cb_log *l = ctx;
    CHECK(!isnan(sy_logs_get(logs, "val_accuracy")), "epoch logs carry val_accuracy");
    note(l, "epoch_end", epoch);
    if (epoch == l->stop_at_epoch) sy_model_stop_training(m);
    return SY_OK;
}
static sy_status cb_train_end(void *ctx, sy_model *m, const sy_logs *logs) {
    (void)m, (void)logs;
    note(ctx, "train_end", 0);
    return SY_OK;
}

static void test_learning_and_callbacks(void) {
    sy_tensor *x, *y, *xv, *yv;
    make_data(600, &x, &y, 1);
    make_data(203, &xv, &yv, 2);
    sy_model *m = make_mlp(NULL, 3, 16, true, 1);
    cb_log log = {.stop_at_epoch = 3};
    sy_callback cb = {&log, cb_train_begin, cb_epoch_begin, cb_batch_end, cb_epoch_end, cb_train_end, NULL};
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 50;
    f.epochs = 10;
    f.x_val = xv;
    f.y_val = yv;
    f.verbose = 0;
    f.callbacks = &cb;
    f.n_callbacks = 1;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &f, &h));
    if (h) {
        CHECK(sy_history_epochs(h) == 4, "stop_training after epoch 3: %d epochs", sy_history_epochs(h));
        double first = sy_logs_get(sy_history_logs(h, 0), "loss"), last = sy_logs_get(sy_history_logs(h, 3), "loss");
        double acc = sy_logs_get(sy_history_logs(h, 3), "val_accuracy");
        CHECK(last < 0.7 * first, "loss falls: %g -> %g", first, last);
        CHECK(acc > 0.9, "val_accuracy %g on a separable problem", acc);
        const sy_logs *l = sy_history_logs(h, 0);
        CHECK(l->n == 4 && !strcmp(l->names[0], "loss") && !strcmp(l->names[1], "accuracy") &&
                  !strcmp(l->names[2], "val_loss") && !strcmp(l->names[3], "val_accuracy"),
              "Keras's log order");
        sy_history_free(h);
    }
    CHECK(log.n == 1 + 4 * (1 + 12 + 1) + 1, "callback count %d", log.n);
    CHECK(!strcmp(log.events[0], "train_begin 0") && !strcmp(log.events[1], "epoch_begin 0") &&
              !strcmp(log.events[2], "batch_end 0") && !strcmp(log.events[13], "batch_end 11") &&
              !strcmp(log.events[14], "epoch_end 0") && !strcmp(log.events[log.n - 1], "train_end 0"),
          "callback order");

    /* evaluate covers every sample exactly: batch 7 (203 = 29 * 7) and 64 (padded) agree with 203 */
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_logs r1, r2, r3;
    eo.batch_size = 203;
    CHECK_OK(sy_model_evaluate(m, xv, yv, &eo, &r1));
    eo.batch_size = 7;
    CHECK_OK(sy_model_evaluate(m, xv, yv, &eo, &r2));
    eo.batch_size = 64;
    CHECK_OK(sy_model_evaluate(m, xv, yv, &eo, &r3));
    CHECK_CLOSE(sy_logs_get(&r2, "loss"), sy_logs_get(&r1, "loss"), 1e-5, 0, "evaluate loss, batch 7 vs 203");
    CHECK_CLOSE(sy_logs_get(&r3, "loss"), sy_logs_get(&r1, "loss"), 1e-5, 0, "evaluate loss, batch 64 (padded) vs 203");
    CHECK(sy_logs_get(&r3, "accuracy") == sy_logs_get(&r1, "accuracy"), "accuracy counts every sample once");

    /* steps (Keras's evaluate(steps=)): the first 2 batches of 7 are the first 14 samples */
    sy_tensor *head[2];
    const sy_tensor *whole[2] = {xv, yv};
    for (int k = 0; k < 2; k++) {
        sy_shape hs = sy_tensor_shape(whole[k]);
        size_t row = sy_tensor_bytes(whole[k]) / (size_t)hs.dims[0];
        hs.dims[0] = 14;
        CHECK_OK(sy_tensor_new(sy_tensor_dtype(whole[k]), hs, &head[k]));
        memcpy(sy_tensor_data(head[k]), sy_tensor_data(whole[k]), 14 * row);
    }
    sy_logs r4, r5;
    eo.batch_size = 7;
    eo.steps = 2;
    CHECK_OK(sy_model_evaluate(m, xv, yv, &eo, &r4));
    eo.steps = 0;
    CHECK_OK(sy_model_evaluate(m, head[0], head[1], &eo, &r5));
    CHECK(sy_logs_get(&r4, "loss") == sy_logs_get(&r5, "loss") &&
              sy_logs_get(&r4, "accuracy") == sy_logs_get(&r5, "accuracy"),
          "evaluate steps=2: %g against %g over the first 14 samples", sy_logs_get(&r4, "loss"), sy_logs_get(&r5, "loss"));
    eo.steps = -1;
    CHECK(sy_model_evaluate(m, xv, yv, &eo, &r4) == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "steps"),
          "negative steps refused: %s", sy_last_error());
    eo.steps = 0;
    sy_tensor_free(head[0]);
    sy_tensor_free(head[1]);

    /* predict: any batch size gives the same rows; rows are probabilities */
    sy_tensor *p1, *p2;
    eo.batch_size = 64;
    CHECK_OK(sy_model_predict(m, xv, &eo, &p1));
    eo.batch_size = 203;
    CHECK_OK(sy_model_predict(m, xv, &eo, &p2));
    sy_shape ps = sy_tensor_shape(p1);
    CHECK(ps.rank == 2 && ps.dims[0] == 203 && ps.dims[1] == 3, "predict shape");
    const float *a = sy_tensor_data(p1), *b = sy_tensor_data(p2);
    double worst = 0, correct = 0;
    const int32_t *labels = sy_tensor_data(yv);
    for (int i = 0; i < 203; i++) {
        double s = 0;
        int best = 0;
        for (int j = 0; j < 3; j++) {
            worst = fmax(worst, fabs(a[i * 3 + j] - b[i * 3 + j]));
            s += a[i * 3 + j];
            if (a[i * 3 + j] > a[i * 3 + best]) best = j;
        }
        CHECK_CLOSE(s, 1.0, 0, 1e-5, "probabilities of row %d sum to 1", i);
        correct += best == labels[i];
    }
    CHECK(worst < 1e-6, "predict rows differ by batch size: %g", worst);
    CHECK(fabs(correct / 203 - sy_logs_get(&r1, "accuracy")) < 1e-9, "predict agrees with evaluate's accuracy");
    sy_tensor_free(p1);
    sy_tensor_free(p2);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(xv);
    sy_tensor_free(yv);
}

/* Two runs with one seed: bitwise the same weights, dropout included. */
static void test_determinism(void) {
    sy_tensor *x, *y;
    make_data(300, &x, &y, 5);
    float *w[2];
    for (int run = 0; run < 2; run++) {
        sy_model *m = make_mlp(NULL, 9, 16, true, 1);
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 30;
        f.epochs = 3;
        f.verbose = 0;
        f.seed = 4;
        CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
        w[run] = malloc(64 * 4);
        memcpy(w[run], sy_model_weight_data(m, 0), 64 * 4);
        sy_model_free(m);
    }
    CHECK(memcmp(w[0], w[1], 64 * 4) == 0, "same seed, same weights");
    free(w[0]);
    free(w[1]);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

static void test_fit_errors(void) {
    sy_model *m = make_mlp(NULL, 0, 16, false, 1);
    sy_tensor *x, *y, *x3, *ybad, *yshort;
    make_data(20, &x, &y, 1);
    sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)20, (int64_t)3), &x3);
    sy_tensor_new(SY_F32, sy_shape_of(1, (int64_t)20), &ybad);
    sy_tensor_new(SY_I32, sy_shape_of(1, (int64_t)19), &yshort);
    ((float *)sy_tensor_data(ybad))[7] = 3.0f;
    sy_fit_options f = sy_fit_options_default();
    f.verbose = 0;
    CHECK_ERROR(sy_model_fit(m, x3, y, &f, NULL), SY_ERR_SHAPE, "x", "(20, 3)", "(None, 4)");
    CHECK_ERROR(sy_model_fit(m, x, yshort, &f, NULL), SY_ERR_SHAPE, "20 samples", "19");
    CHECK_ERROR(sy_model_fit(m, x, ybad, &f, NULL), SY_ERR_INVALID_ARGUMENT, "y[7] = 3", "[0, 3)");
    ((float *)sy_tensor_data(ybad))[7] = 1.5f;
    CHECK_ERROR(sy_model_fit(m, x, ybad, &f, NULL), SY_ERR_INVALID_ARGUMENT, "y[7] = 1.5");
    f.batch_size = 0;
    CHECK_ERROR(sy_model_fit(m, x, y, &f, NULL), SY_ERR_INVALID_ARGUMENT, "batch_size");
    f.batch_size = 8;
    f.x_val = x;
    CHECK_ERROR(sy_model_fit(m, x, y, &f, NULL), SY_ERR_INVALID_ARGUMENT, "x_val and y_val");
    sy_evaluate_options eo = sy_evaluate_options_default();
    sy_tensor *p = NULL;
    CHECK_ERROR(sy_model_predict(m, x3, &eo, &p), SY_ERR_SHAPE, "(20, 3)");
    CHECK(p == NULL, "no output on failure");
    /* an uncompiled model cannot fit */
    sy_model *u;
    CHECK_OK(sy_model_new(NULL, &u));
    sy_layer d = sy_layer_dense(2);
    d.input_shape = sy_shape_of(1, (int64_t)4);
    CHECK_OK(sy_model_add(u, &d));
    f = sy_fit_options_default();
    CHECK_ERROR(sy_model_fit(u, x, y, &f, NULL), SY_ERR_STATE, "compile");
    sy_model_free(u);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(x3);
    sy_tensor_free(ybad);
    sy_tensor_free(yshort);
}

static bool matches(const char *text, const char *pattern) {
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE)) return false;
    bool ok = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

/* Keras's progress bar formats, as written to a file (not a terminal). */
static void test_progress_bar(void) {
    sy_tensor *x, *y;
    make_data(120, &x, &y, 1);
    sy_model *m = make_mlp(NULL, 0, 16, false, 1);
    for (int verbose = 0; verbose <= 2; verbose++) {
        FILE *out = tmpfile();
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 40;
        f.epochs = 2;
        f.verbose = verbose;
        f.progress = out;
        f.x_val = x;
        f.y_val = y;
        CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
        char *s = read_all(out);
        if (verbose == 0) CHECK(s[0] == '\0', "verbose 0 prints nothing: '%s'", s);
        if (verbose == 1)
            CHECK(matches(s, "^Epoch 1/2\n3/3 \\[==============================\\] - [0-9]+s [0-9]+(ms|us|s)/step - "
                             "loss: [0-9.]+ - accuracy: [0-9.]+ - val_loss: [0-9.]+ - val_accuracy: [0-9.]+\n"
                             "Epoch 2/2\n3/3 \\[=+\\] - .*\n$"),
                  "verbose 1 output:\n%s", s);
        if (verbose == 2)
            CHECK(matches(s, "^Epoch 1/2\n3/3 - [0-9]+s - loss: [0-9.]+ - accuracy: [0-9.]+ - val_loss: [0-9.]+ - "
                             "val_accuracy: [0-9.]+ - [0-9]+(ms|us|s)/epoch - [0-9]+(ms|us|s)/step\nEpoch 2/2\n"),
                  "verbose 2 output:\n%s", s);
        free(s);
        fclose(out);
    }
    /* evaluate's bar */
    FILE *out = tmpfile();
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = 50;
    eo.progress = out;
    CHECK_OK(sy_model_evaluate(m, x, y, &eo, NULL));
    char *s = read_all(out);
    CHECK(matches(s, "^3/3 \\[==============================\\] - [0-9]+s [0-9]+(ms|us|s)/step - loss: [0-9.e+-]+ - "
                     "accuracy: [0-9.]+\n$"),
          "evaluate's bar:\n%s", s);
    free(s);
    fclose(out);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* On a terminal the bar is redrawn in place ("\r") with an ETA. */
static void test_progress_bar_terminal(void) {
    int master, slave;
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0) {
        CHECK(false, "openpty failed");
        return;
    }
    FILE *out = fdopen(slave, "w");
    sy_tensor *x, *y;
    make_data(100, &x, &y, 1);
    sy_model *m = make_mlp(NULL, 0, 16, false, 1);
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 10;
    f.verbose = 1;
    f.progress = out;
    CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
    fflush(out);
    /* the terminal delivers what was written a little later: read until
     * the last line is in (or 5 s have passed) */
    char buf[8192] = "";
    size_t len = 0;
    fcntl(master, F_SETFL, O_NONBLOCK);
    for (int tries = 0; tries < 500; tries++) {
        const char *last = strstr(buf, "10/10 [=");
        if (last && strchr(last, '\n')) break;
        ssize_t n = read(master, buf + len, sizeof buf - 1 - len);
        if (n > 0) len += (size_t)n;
        buf[len] = '\0';
        if (n <= 0) usleep(10000);
    }
    CHECK(contains(buf, "\r 1/10 [==>...........................] - ETA: "), "first update drawn: '%s'", buf);
    CHECK(contains(buf, "ETA: "), "an ETA while running: '%s'", buf);
    CHECK(contains(buf, "\r10/10 [==============================] - "), "redrawn in place to the end: '%s'", buf);
    fclose(out);
    close(master);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* Embedding, LSTM and GRU: Keras's defaults, shapes, refusals, and a
 * sequence task they learn. */
static void test_recurrent_layers(void) {
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer e = sy_layer_embedding(50, 8), l = sy_layer_lstm(6), d = sy_layer_dense(1);
    e.input_length = 12; /* sets the model's input, as in Keras */
    d.activation = SY_ACTIVATION_SIGMOID;
    CHECK_OK(sy_model_add(m, &e));
    CHECK_OK(sy_model_add(m, &l));
    CHECK_OK(sy_model_add(m, &d));
    sy_shape in = sy_model_input_shape(m), out = sy_model_output_shape(m, 1);
    CHECK(in.rank == 1 && in.dims[0] == 12, "input_length gives the input shape");
    CHECK(out.rank == 1 && out.dims[0] == 6, "LSTM output (None, 6)");
    CHECK(sy_model_param_count(m, 1) == 4 * 6 * (8 + 6 + 1), "LSTM params %lld", (long long)sy_model_param_count(m, 1));
    CHECK(!strcmp(sy_model_weight_name(m, 0), "embedding/embeddings:0") &&
              !strcmp(sy_model_weight_name(m, 1), "lstm/lstm_cell/kernel:0") &&
              !strcmp(sy_model_weight_name(m, 2), "lstm/lstm_cell/recurrent_kernel:0") &&
              !strcmp(sy_model_weight_name(m, 3), "lstm/lstm_cell/bias:0"),
          "Keras's weight names");
    /* embeddings uniform(-0.05, 0.05); forget-gate biases 1, others 0;
     * the recurrent kernel (6, 24) has orthonormal rows */
    const float *emb = sy_model_weight_data(m, 0), *bias = sy_model_weight_data(m, 3), *rec = sy_model_weight_data(m, 2);
    float lo = 1, hi = -1;
    for (int i = 0; i < 50 * 8; i++) {
        lo = fminf(lo, emb[i]);
        hi = fmaxf(hi, emb[i]);
    }
    CHECK(lo >= -0.05f && hi <= 0.05f && hi - lo > 0.09f, "embeddings in [-0.05, 0.05]: [%g, %g]", lo, hi);
    for (int j = 0; j < 24; j++) CHECK(bias[j] == (j >= 6 && j < 12 ? 1.0f : 0.0f), "bias[%d] = %g", j, bias[j]);
    double worst = 0;
    for (int a = 0; a < 6; a++)
        for (int c = 0; c < 6; c++) {
            double dot = 0;
            for (int j = 0; j < 24; j++) dot += rec[a * 24 + j] * rec[c * 24 + j];
            worst = fmax(worst, fabs(dot - (a == c)));
        }
    CHECK(worst < 1e-5, "orthogonal recurrent kernel: rows orthonormal to %g", worst);
    /* learn: label = whether word 7 occurs in the sequence */
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_adam(0.01f);
    c.loss = "binary_crossentropy";
    const char *metrics[] = {"accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    CHECK_OK(sy_model_compile(m, &c));
    sy_tensor *x, *y;
    sy_tensor_new(SY_I32, sy_shape_of(2, (int64_t)512, (int64_t)12), &x);
    sy_tensor_new(SY_F32, sy_shape_of(1, (int64_t)512), &y);
    int32_t *xd = sy_tensor_data(x);
    float *yd = sy_tensor_data(y);
    sy_rng r = sy_rng_new(5, 1);
    for (int i = 0; i < 512; i++) {
        yd[i] = 0;
        for (int t = 0; t < 12; t++) {
            xd[i * 12 + t] = 1 + (int32_t)(sy_rng_u32(&r) % 49);
            if (i % 2 == 0 && xd[i * 12 + t] == 7) xd[i * 12 + t] = 8;
        }
        if (i % 2) xd[i * 12 + (int)(sy_rng_u32(&r) % 12)] = 7;
        for (int t = 0; t < 12; t++) yd[i] = yd[i] || xd[i * 12 + t] == 7;
    }
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 32;
    f.epochs = 12;
    f.verbose = 0;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &f, &h));
    if (h) {
        double acc = sy_logs_get(sy_history_logs(h, sy_history_epochs(h) - 1), "accuracy");
        CHECK(acc > 0.9, "the LSTM learns whether word 7 occurs: accuracy %g", acc);
        sy_history_free(h);
    }
    xd[5] = 50;
    sy_status st = sy_model_fit(m, x, y, &f, NULL);
    CHECK(st == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "x[5] = 50") && strstr(sy_last_error(), "[0, 50)"),
          "a word index past input_dim is refused: %s", sy_last_error());
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);

    /* refusals */
    CHECK_OK(sy_model_new(NULL, &m)); /* (issue 17: mask_zero is accepted now; tests/test_masking.c) */
    sy_layer first = sy_layer_embedding(10, 4);
    first.input_shape = sy_shape_of(1, (int64_t)5);
    CHECK_OK(sy_model_add(m, &first));
    sy_layer st_lstm = sy_layer_lstm(3);
    st_lstm.return_state = true;
    CHECK_ERROR(sy_model_add(m, &st_lstm), SY_ERR_UNSUPPORTED, "return_state", "Sequential");
    sy_layer gru = sy_layer_gru(3);
    gru.reset_after = false;
    CHECK_ERROR(sy_model_add(m, &gru), SY_ERR_UNSUPPORTED, "reset_after");
    sy_layer seq = sy_layer_gru(3);
    seq.return_sequences = true;
    CHECK_OK(sy_model_add(m, &seq));
    CHECK(sy_model_output_shape(m, -1).rank == 2 && sy_model_output_shape(m, -1).dims[0] == 5, "return_sequences (None, 5, 3)");
    CHECK(!strcmp(sy_model_weight_name(m, 3), "gru/gru_cell/bias:0") && sy_model_weight_shape(m, 3).rank == 2,
          "GRU bias (2, 9) named as Keras names it");
    sy_layer flat = sy_layer_flatten(), lstm2 = sy_layer_lstm(2);
    CHECK_OK(sy_model_add(m, &flat));
    CHECK_ERROR(sy_model_add(m, &lstm2), SY_ERR_SHAPE, "lstm", "(None, 15)", "(None, steps, features)");
    sy_model_free(m);
}

/* fit, evaluate and predict from a dataset agree with the same from
 * arrays, bitwise where the arithmetic is the same; and the dataset-only
 * mistakes are refused by name. */
static sy_dataset *slices_batched(sy_tensor *x, sy_tensor *y, int64_t batch, bool drop) {
    sy_tensor *t[2] = {x, y};
    sy_dataset *s = NULL, *b = NULL;
    CHECK_OK(sy_dataset_from_tensor_slices(t, y ? 2 : 1, &s));
    if (s) CHECK_OK(sy_dataset_batch(s, batch, drop, &b));
    sy_dataset_free(s);
    return b;
}

static bool same_weights(sy_model *a, sy_model *b) {
    for (int32_t i = 0; i < sy_model_weight_count(a); i++) {
        sy_shape s = sy_model_weight_shape(a, i);
        if (memcmp(sy_model_weight_data(a, i), sy_model_weight_data(b, i), (size_t)sy_shape_count(&s) * sizeof(float)))
            return false;
    }
    return true;
}

static char warned[512];
static void capture_warning(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level == SY_LOG_WARNING) snprintf(warned, sizeof warned, "%s", message);
}

static void test_datasets(void) {
    sy_tensor *x, *y, *xv, *yv;
    make_data(600, &x, &y, 1);
    make_data(203, &xv, &yv, 2);
    sy_model *a = make_mlp(NULL, 3, 16, false, 1), *b = make_mlp(NULL, 3, 16, false, 1);
    /* one epoch in order at batch 50 (600 divides): the same steps, the same weights */
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 50;
    f.shuffle = false;
    f.verbose = 0;
    f.epochs = 2;
    CHECK_OK(sy_model_fit(a, x, y, &f, NULL));
    sy_dataset *train = slices_batched(x, y, 50, true), *val = slices_batched(xv, yv, 64, false);
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit_dataset(b, train, val, &f, &h));
    CHECK(same_weights(a, b), "fit from a dataset gives the weights fit from arrays gives");
    CHECK(h && sy_history_epochs(h) == 2 && !isnan(sy_logs_get(sy_history_logs(h, 1), "val_accuracy")),
          "two epochs, validated on a dataset");
    sy_history_free(h);

    /* five replicas, three steps an execution: the global batch is split the same way */
    sy_cluster *cl = NULL;
    sy_strategy *st4 = NULL;
    CHECK_OK(sy_cluster_resolve("cpu:5", &cl));
    if (cl) CHECK_OK(sy_strategy_new(cl, &st4));
    if (st4) {
        sy_model *c4 = make_mlp(st4, 3, 16, false, 3), *d4 = make_mlp(st4, 3, 16, false, 3);
        CHECK_OK(sy_model_fit(c4, x, y, &f, NULL));
        CHECK_OK(sy_model_fit_dataset(d4, train, NULL, &f, NULL));
        CHECK(same_weights(c4, d4), "5 replicas: fit from a dataset and from arrays agree");
        sy_model_free(c4);
        sy_model_free(d4);
    }
    sy_strategy_free(st4);
    sy_cluster_free(cl);

    /* evaluate and predict: any batching, the last batch padded, the same numbers */
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    eo.batch_size = 64;
    sy_logs r1, r2;
    CHECK_OK(sy_model_evaluate(b, xv, yv, &eo, &r1));
    CHECK_OK(sy_model_evaluate_dataset(b, val, &eo, &r2));
    CHECK(sy_logs_get(&r1, "loss") == sy_logs_get(&r2, "loss") && sy_logs_get(&r1, "accuracy") == sy_logs_get(&r2, "accuracy"),
          "evaluate from a dataset: loss %g against %g", sy_logs_get(&r2, "loss"), sy_logs_get(&r1, "loss"));
    sy_dataset *big = slices_batched(xv, yv, 150, false); /* batches larger than the first: cut */
    sy_dataset *tail = slices_batched(xv, yv, 7, false);
    CHECK_OK(sy_model_evaluate_dataset(b, big, &eo, &r2));
    CHECK(fabs(sy_logs_get(&r1, "loss") - sy_logs_get(&r2, "loss")) < 1e-6 && sy_logs_get(&r1, "accuracy") == sy_logs_get(&r2, "accuracy"),
          "evaluate over batches of 150: every sample once (loss %g against %g)", sy_logs_get(&r2, "loss"),
          sy_logs_get(&r1, "loss"));
    sy_tensor *p1 = NULL, *p2 = NULL, *p3 = NULL;
    CHECK_OK(sy_model_predict(b, xv, &eo, &p1));
    CHECK_OK(sy_model_predict_dataset(b, val, &eo, &p2));
    CHECK_OK(sy_model_predict_dataset(b, tail, &eo, &p3));
    if (p1 && p2 && p3) {
        sy_shape s1 = sy_tensor_shape(p1), s2 = sy_tensor_shape(p2);
        CHECK(sy_shape_equal(&s1, &s2) && !memcmp(sy_tensor_data(p1), sy_tensor_data(p2), sy_tensor_bytes(p1)),
              "predict from a dataset: the same rows");
        CHECK(sy_tensor_bytes(p3) == sy_tensor_bytes(p1), "predict over batches of 7: every sample once");
    }
    sy_tensor_free(p1);
    sy_tensor_free(p2);
    sy_tensor_free(p3);

    /* steps_per_epoch across epochs; running out stops training with a warning */
    sy_dataset *five = NULL;
    CHECK_OK(sy_dataset_take(train, 5, &five));
    f.steps_per_epoch = 3;
    f.epochs = 4;
    h = NULL;
    warned[0] = 0;
    sy_set_log(capture_warning, NULL);
    CHECK_OK(sy_model_fit_dataset(b, five, NULL, &f, &h));
    sy_set_log(NULL, NULL);
    CHECK(h && sy_history_epochs(h) == 2, "5 batches at 3 a step: a second, short epoch, then training stops (%d epochs)",
          h ? sy_history_epochs(h) : -1);
    CHECK(contains(warned, "ran out of data after 2 of 3 steps in epoch 2"), "the warning Keras gives: %s", warned);
    sy_history_free(h);

    /* refusals */
    f.steps_per_epoch = 0;
    sy_dataset *unbatched = slices_batched(x, y, 64, false), *forever = NULL, *xonly = slices_batched(x, NULL, 50, true);
    CHECK_ERROR(sy_model_fit_dataset(b, unbatched, NULL, &f, NULL), SY_ERR_SHAPE, "static", "drop_remainder");
    CHECK_OK(sy_dataset_repeat(train, SY_INFINITE, &forever));
    CHECK_ERROR(sy_model_fit_dataset(b, forever, NULL, &f, NULL), SY_ERR_INVALID_ARGUMENT, "steps_per_epoch");
    CHECK_ERROR(sy_model_fit_dataset(b, xonly, NULL, &f, NULL), SY_ERR_INVALID_ARGUMENT, "(x, y)");
    sy_tensor *wrong;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)10, (int64_t)5), &wrong));
    sy_dataset *misshapen = slices_batched(wrong, NULL, 5, true);
    CHECK_ERROR(sy_model_predict_dataset(b, misshapen, &eo, &p1), SY_ERR_SHAPE, "(5, 5)", "(None, 4)");
    sy_tensor_free(wrong);
    f.x_val = xv;
    f.y_val = yv;
    CHECK_ERROR(sy_model_fit_dataset(b, train, NULL, &f, NULL), SY_ERR_INVALID_ARGUMENT, "validation");
    sy_dataset_free(misshapen);
    sy_dataset_free(unbatched);
    sy_dataset_free(forever);
    sy_dataset_free(xonly);
    sy_dataset_free(five);
    sy_dataset_free(big);
    sy_dataset_free(tail);
    sy_dataset_free(train);
    sy_dataset_free(val);
    sy_model_free(a);
    sy_model_free(b);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(xv);
    sy_tensor_free(yv);
}

/* ---- Functional models ------------------------------------------------------------------------ */

/* A residual model with a layer called twice: built through the C API,
 * refused where Keras refuses, trained (the shared kernel gets both calls'
 * gradients), and saved to JSON and a full .h5 that give it back whole. */

/* 256 samples of 8 features in three classes by a linear score: data a
 * small model learns in a few epochs. */
static void three_classes(sy_tensor **x, sy_tensor **y) {
    *x = *y = NULL;
    sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)256, (int64_t)8), x);
    sy_tensor_new(SY_I32, sy_shape_of(1, (int64_t)256), y);
    if (!*x || !*y) return;
    float *xd = sy_tensor_data(*x);
    int32_t *yd = sy_tensor_data(*y);
    for (int i = 0; i < 256; i++) {
        float sum = 0;
        for (int j = 0; j < 8; j++) xd[i * 8 + j] = (float)((i * 7 + j * 13) % 17) / 17.0f - 0.5f, sum += xd[i * 8 + j] * (float)(j % 3 - 1);
        yd[i] = sum > 0.2f ? 2 : sum < -0.2f ? 0 : 1;
    }
}

static void test_functional(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new_functional("res", &m));
    if (!m) return;
    int32_t x, a, b, s, c, y, bad;
    CHECK_OK(sy_model_input(m, sy_shape_of(1, (int64_t)8), NULL, NULL, &x));
    sy_layer d1 = sy_layer_dense(8), sh = sy_layer_dense(8), add = sy_layer_add(), out = sy_layer_dense(3);
    d1.activation = SY_ACTIVATION_RELU;
    sh.name = "shared";
    out.activation = SY_ACTIVATION_SOFTMAX;
    CHECK_OK(sy_model_call(m, &d1, &x, 1, &a));
    CHECK_OK(sy_model_call(m, &sh, &a, 1, &b));
    CHECK_OK(sy_model_call_again(m, "shared", &b, 1, &s));
    int32_t two[2] = {a, s};
    /* refusals at the call, the model unchanged */
    sy_layer narrow = sy_layer_dense(5);
    int32_t mixed[2];
    CHECK_OK(sy_model_call(m, &narrow, &x, 1, &mixed[1]));
    mixed[0] = a;
    CHECK_ERR(sy_model_call(m, &add, mixed, 2, &bad), SY_ERR_SHAPE, "layer 'add' (Add)", "(None, 8)", "(None, 5)");
    CHECK_ERR(sy_model_call_again(m, "shared", &mixed[1], 1, &bad), SY_ERR_SHAPE, "layer 'shared'", "shares its weights");
    CHECK_ERR(sy_model_call(m, &d1, two, 2, &bad), SY_ERR_INVALID_ARGUMENT, "takes one input, called on 2");
    sy_layer dup = sy_layer_dense(2);
    dup.name = "shared";
    CHECK_ERR(sy_model_call(m, &dup, &x, 1, &bad), SY_ERR_INVALID_ARGUMENT, "a layer named 'shared' already exists");
    CHECK_OK(sy_model_call(m, &add, two, 2, &c));
    CHECK_OK(sy_model_call(m, &out, &c, 1, &y));
    /* dense_1 (the 5-unit layer) leads nowhere */
    CHECK_ERR(sy_model_set_outputs(m, &y, 1), SY_ERR_INVALID_ARGUMENT, "does not lead to any output");
    sy_model_free(m);

    CHECK_OK(sy_model_new_functional("res", &m));
    sy_model_input(m, sy_shape_of(1, (int64_t)8), NULL, NULL, &x);
    sy_model_call(m, &d1, &x, 1, &a);
    sy_model_call(m, &sh, &a, 1, &b);
    sy_model_call_again(m, "shared", &b, 1, &s);
    two[1] = s;
    sy_model_call(m, &add, two, 2, &c);
    CHECK_OK(sy_model_call(m, &out, &c, 1, &y));
    CHECK_OK(sy_model_set_outputs(m, &y, 1));
    CHECK(sy_model_weight_count(m) == 6 && sy_model_param_count(m, -1) == 72 + 72 + 27,
          "shared layer's weights counted once: %d weights, %lld params", sy_model_weight_count(m),
          (long long)sy_model_param_count(m, -1));
    sy_compile_options co = sy_compile_options_default();
    co.optimizer = sy_optimizer_adam(1e-2f);
    co.loss = "sparse_categorical_crossentropy";
    CHECK_OK(sy_model_compile(m, &co));
    sy_tensor *xt = NULL, *yt = NULL;
    three_classes(&xt, &yt);
    sy_fit_options f = sy_fit_options_default();
    f.epochs = 20;
    f.verbose = 0;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, xt, yt, &f, &h));
    if (h) {
        double first = sy_logs_get(sy_history_logs(h, 0), "loss"), last = sy_logs_get(sy_history_logs(h, 19), "loss");
        CHECK(last < 0.1 * first, "a Functional model learns: loss %g -> %g", first, last);
    }
    sy_history_free(h);
    char path[] = "/tmp/systolic_functional_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    sy_model *back = NULL;
    CHECK_OK(sy_model_save(m, path));
    CHECK_OK(sy_model_load(path, &back));
    unlink(path);
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_tensor *p1 = NULL, *p2 = NULL;
    CHECK_OK(sy_model_predict(m, xt, &eo, &p1));
    if (back) CHECK_OK(sy_model_predict(back, xt, &eo, &p2));
    CHECK(p1 && p2 && memcmp(sy_tensor_data(p1), sy_tensor_data(p2), 256 * 3 * sizeof(float)) == 0,
          "a Functional model's full .h5 gives back the same predictions");
    char *j1 = NULL, *j2 = NULL;
    CHECK_OK(sy_model_to_json(m, &j1));
    if (back) CHECK_OK(sy_model_to_json(back, &j2));
    CHECK(j1 && j2 && strcmp(j1, j2) == 0 && strstr(j1, "\"inbound_nodes\": [[[\"dense\", 0, 0, {}]], [[\"shared\", 0, 0, {}]]]"),
          "the shared layer's two calls in its JSON");
    sy_free(j1);
    sy_free(j2);
    sy_tensor_free(p1);
    sy_tensor_free(p2);
    sy_tensor_free(xt);
    sy_tensor_free(yt);
    sy_model_free(back);
    sy_model_free(m);
}

/* issue 15: a model used as a layer -- a Sequential feature extractor with BatchNormalization and Dropout inside a
 * Functional model, and a Functional block called twice (shared weights) -- trains: the nested weights change, the loss falls,
 * the BatchNormalization's moving statistics move (the training flag reaches it), and its full .h5 round-trips. */
static void test_nested_training(void) {
    sy_model *base = NULL, *m = NULL;
    CHECK_OK(sy_model_new("features", &base));
    sy_layer d1 = sy_layer_dense(16), bn = sy_layer_batch_normalization(), drop = sy_layer_dropout(0.1f),
             d2 = sy_layer_dense(8);
    d1.input_shape = sy_shape_of(1, (int64_t)8);
    d1.activation = SY_ACTIVATION_RELU;
    CHECK_OK(sy_model_add(base, &d1));
    CHECK_OK(sy_model_add(base, &bn));
    CHECK_OK(sy_model_add(base, &drop));
    CHECK_OK(sy_model_add(base, &d2));
    CHECK_OK(sy_model_new_functional("outer", &m));
    if (!m || !base) return;
    int32_t x, h1, h2, s, y;
    CHECK_OK(sy_model_input(m, sy_shape_of(1, (int64_t)8), NULL, NULL, &x));
    sy_layer nested = sy_layer_model(base);
    CHECK_OK(sy_model_call(m, &nested, &x, 1, &h1));
    /* a second nested model (Functional), called twice */
    sy_model *block = NULL;
    CHECK_OK(sy_model_new_functional("block", &block));
    int32_t bi, bo, b1;
    CHECK_OK(sy_model_input(block, sy_shape_of(1, (int64_t)8), NULL, NULL, &bi));
    sy_layer bd = sy_layer_dense(8);
    bd.name = "block_dense";
    bd.activation = SY_ACTIVATION_TANH;
    CHECK_OK(sy_model_call(block, &bd, &bi, 1, &bo));
    CHECK_OK(sy_model_set_outputs(block, &bo, 1));
    sy_layer shared = sy_layer_model(block);
    CHECK_OK(sy_model_call(m, &shared, &h1, 1, &b1));
    sy_model_free(block);
    sy_layer pre = sy_layer_dense(8);
    int32_t t;
    CHECK_OK(sy_model_call(m, &pre, &x, 1, &t));
    CHECK_OK(sy_model_call_again(m, "block", &t, 1, &h2));
    sy_layer add = sy_layer_add(), out = sy_layer_dense(3);
    out.activation = SY_ACTIVATION_SOFTMAX;
    int32_t both[2] = {b1, h2};
    CHECK_OK(sy_model_call(m, &add, both, 2, &s));
    CHECK_OK(sy_model_call(m, &out, &s, 1, &y));
    CHECK_OK(sy_model_set_outputs(m, &y, 1));
    sy_model_free(base);
    int32_t k0 = sy_model_find_weight(m, "features/dense/kernel"), mm = sy_model_find_weight(m, "features/batch_normalization/moving_mean");
    CHECK(k0 >= 0 && mm >= 0 && sy_model_param_count(m, -1) == (8 * 16 + 16) + 4 * 16 + (16 * 8 + 8) + 72 + 72 + 27,
          "nested weights found: %d %d, %lld params", k0, mm, (long long)sy_model_param_count(m, -1));
    if (k0 < 0 || mm < 0) {
        sy_model_free(m);
        return;
    }
    float k_before[128], mm_before[16];
    memcpy(k_before, sy_model_weight_data(m, k0), sizeof k_before);
    memcpy(mm_before, sy_model_weight_data(m, mm), sizeof mm_before);
    sy_compile_options co = sy_compile_options_default();
    co.optimizer = sy_optimizer_adam(1e-2f);
    co.loss = "sparse_categorical_crossentropy";
    CHECK_OK(sy_model_compile(m, &co));
    sy_tensor *xt = NULL, *yt = NULL;
    three_classes(&xt, &yt);
    sy_fit_options f = sy_fit_options_default();
    f.epochs = 15;
    f.verbose = 0;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, xt, yt, &f, &h));
    if (h) {
        double first = sy_logs_get(sy_history_logs(h, 0), "loss"), last = sy_logs_get(sy_history_logs(h, 14), "loss");
        CHECK(last < 0.5 * first, "a model with a nested one learns: loss %g -> %g", first, last);
    }
    sy_history_free(h);
    CHECK(memcmp(k_before, sy_model_weight_data(m, k0), sizeof k_before) != 0, "the nested model's kernel was trained");
    CHECK(memcmp(mm_before, sy_model_weight_data(m, mm), sizeof mm_before) != 0,
          "the nested BatchNormalization's moving mean moved (trained in training mode)");
    char path[] = "/tmp/systolic_nested_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    sy_model *back = NULL;
    CHECK_OK(sy_model_save(m, path));
    CHECK_OK(sy_model_load(path, &back));
    unlink(path);
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_tensor *p1 = NULL, *p2 = NULL;
    CHECK_OK(sy_model_predict(m, xt, &eo, &p1));
    if (back) CHECK_OK(sy_model_predict(back, xt, &eo, &p2));
    CHECK(p1 && p2 && memcmp(sy_tensor_data(p1), sy_tensor_data(p2), 256 * 3 * sizeof(float)) == 0,
          "a model with a nested one gives back the same predictions from its full .h5");
    sy_tensor_free(p1);
    sy_tensor_free(p2);
    sy_tensor_free(xt);
    sy_tensor_free(yt);
    sy_model_free(back);
    sy_model_free(m);
}

int main(void) {
    test_summary();
    test_weights_api();
    test_build_errors();
    test_compile_errors();
    test_learning_and_callbacks();
    test_determinism();
    test_fit_errors();
    test_progress_bar();
    test_progress_bar_terminal();
    test_recurrent_layers();
    test_datasets();
    test_functional();
    test_nested_training(); /* issue 15, nested models */
    return check_report("test_keras");
}
