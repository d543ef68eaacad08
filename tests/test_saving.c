/*
 * test_saving.c - Keras's HDF5 files (src/keras/saving.c, src/io/h5.c).
 *
 * - Files Keras wrote (tests/data/keras, tools/golden/make_keras_h5.py):
 *   the weights of three models that use every layer kind load into the
 *   same architectures built here, which then predict what Keras
 *   predicted; also the older attribute forms (fixed-length strings,
 *   chunked layer_names) and a full model file's model_weights.
 * - Round trips: weights saved and loaded into a model with other initial
 *   weights come back bit for bit, and predictions agree exactly.
 * - Refusals, each with its message checked and the model's weights
 *   unchanged after it: another architecture (layer count), a wrong shape
 *   (the layer and both shapes named), a missing dataset, integer data,
 *   Keras 3's layout, a file that is not HDF5, truncated copies of a
 *   fixture at several lengths, a model without weights yet.
 * - Failed saves (a file-size limit, a missing directory, a directory as
 *   the target) leave an existing file as it was and no temporary behind.
 * - With $SYSTOLIC_SAVE_DIR set (keras_h5_tensorflow.sh), it writes the
 *   three models' weights and inputs there for tf.keras to read.
 */
#define _GNU_SOURCE
#include "files.h"

#include "check.h"
#include "keras/keras_internal.h" /* the loaded model's loss and metrics */
#include "io/io_internal.h"       /* issue 15: the layout of the files written */
#include "systolic.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the fixtures' architectures (make_keras_h5.py) ------------------------------------ */

static sy_model *build(const char *which, uint64_t seed) {
    sy_model *m;
    SY_ASSERT(sy_model_new(NULL, &m) == SY_OK);
    sy_model_set_seed(m, seed);
    sy_layer l[8];
    int n = 0;
    if (!strcmp(which, "cnn")) {
        l[n] = sy_layer_conv2d(4, 3, 3);
        l[n++].input_shape = sy_shape_of(3, (int64_t)10, (int64_t)10, (int64_t)1);
        l[n] = sy_layer_max_pooling2d(2, 2);
        l[n].strides[0] = l[n].strides[1] = 2;
        n++;
        l[n++] = sy_layer_activation(SY_ACTIVATION_RELU);
        l[n++] = sy_layer_flatten();
        l[n++] = sy_layer_dense(10);
        l[n++] = sy_layer_activation(SY_ACTIVATION_SOFTMAX);
    } else if (!strcmp(which, "cnn12")) { /* cnn with Dense(12): a wrong shape */
        l[n] = sy_layer_conv2d(4, 3, 3);
        l[n++].input_shape = sy_shape_of(3, (int64_t)10, (int64_t)10, (int64_t)1);
        l[n++] = sy_layer_max_pooling2d(2, 2);
        l[n++] = sy_layer_flatten();
        l[n++] = sy_layer_dense(12);
    } else if (!strcmp(which, "lstm")) {
        l[n] = sy_layer_embedding(50, 8);
        l[n++].input_length = 12;
        l[n++] = sy_layer_lstm(6);
        l[n] = sy_layer_dense(1);
        l[n++].activation = SY_ACTIVATION_SIGMOID;
    } else {
        SY_ASSERT(!strcmp(which, "mixed"));
        l[n] = sy_layer_conv2d(3, 3, 3);
        l[n].input_shape = sy_shape_of(3, (int64_t)8, (int64_t)8, (int64_t)2);
        l[n].padding = SY_PADDING_SAME;
        l[n].activation = SY_ACTIVATION_RELU;
        l[n++].use_bias = false;
        l[n++] = sy_layer_average_pooling2d(2, 2);
        l[n++] = sy_layer_dropout(0.25f);
        l[n++] = sy_layer_reshape(sy_shape_of(2, (int64_t)16, (int64_t)3));
        l[n] = sy_layer_gru(5);
        l[n++].return_sequences = true;
        l[n++] = sy_layer_lstm(4);
        l[n] = sy_layer_dense(3);
        l[n++].activation = SY_ACTIVATION_TANH;
        l[n] = sy_layer_dense(2);
        l[n++].use_bias = false;
    }
    for (int i = 0; i < n; i++) SY_ASSERT(sy_model_add(m, &l[i]) == SY_OK);
    return m;
}

/* Compile as make_keras_h5.py does. */
static void compile_like_keras(sy_model *m, const char *which) {
    sy_compile_options c = sy_compile_options_default();
    const char *sparse[] = {"sparse_categorical_accuracy"}, *acc[] = {"accuracy"};
    if (!strcmp(which, "cnn")) {
        c.optimizer = sy_optimizer_adam(0.002f);
        c.loss = "sparse_categorical_crossentropy";
        c.metrics = sparse;
        c.n_metrics = 1;
    } else if (!strcmp(which, "lstm")) {
        c.optimizer = sy_optimizer_adam(0.001f);
        c.loss = "binary_crossentropy";
        c.metrics = acc;
        c.n_metrics = 1;
    } else {
        c.optimizer = sy_optimizer_sgd(0.05f, 0.9, false);
        c.loss = "mse";
    }
    CHECK_OK(sy_model_compile(m, &c));
}

static void fixture(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/keras/%s", fixture_dir, name);
}

static sy_tensor *npz_array(const char *npz_name, const char *array) {
    char path[1024];
    fixture(path, sizeof path, npz_name);
    sy_npz *z;
    sy_tensor *t = NULL;
    SY_ASSERT(sy_npz_open(path, &z) == SY_OK);
    SY_ASSERT(sy_npz_get(z, array, &t) == SY_OK);
    sy_npz_close(z);
    return t;
}

static sy_tensor *predict(sy_model *m, const sy_tensor *x) {
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_tensor *p = NULL;
    CHECK_OK(sy_model_predict(m, x, &eo, &p));
    return p;
}

/* All the model's weights, one after another. */
static float *snapshot(sy_model *m, size_t *n) {
    size_t total = 0;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        total += (size_t)sy_shape_count(&s);
    }
    float *v = malloc(total * sizeof *v + 1), *p = v;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        memcpy(p, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof *p);
        p += sy_shape_count(&s);
    }
    *n = total;
    return v;
}

static bool same_weights(sy_model *m, const float *before, size_t n) {
    size_t now_n;
    float *now = snapshot(m, &now_n);
    bool same = now_n == n && memcmp(now, before, n * sizeof *now) == 0;
    free(now);
    return same;
}

/* ---- Keras's files ------------------------------------------------------------------- */

static void check_predicts_like_keras(sy_model *m, const char *name) {
    char npz[64];
    snprintf(npz, sizeof npz, "%s.npz", name);
    sy_tensor *x = npz_array(npz, "x"), *y = npz_array(npz, "y");
    sy_tensor *p = predict(m, x);
    if (p) {
        CHECK(sy_tensor_count(p) == sy_tensor_count(y), "%s: %lld predictions, Keras %lld", name,
              (long long)sy_tensor_count(p), (long long)sy_tensor_count(y));
        const float *a = sy_tensor_data(p), *b = sy_tensor_data(y);
        for (int64_t i = 0; i < sy_tensor_count(y) && i < sy_tensor_count(p); i++)
            CHECK_CLOSE(a[i], b[i], 1e-5, 1e-6, "%s: prediction %lld against Keras's", name, (long long)i);
    }
    sy_tensor_free(p);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

static void test_keras_files(void) {
    static const char *const names[] = {"cnn", "lstm", "mixed"};
    for (int k = 0; k < 3; k++) {
        char file[64], path[1024];
        /* save_weights' file, then a full model file's model_weights */
        for (int full = 0; full < 2; full++) {
            snprintf(file, sizeof file, full ? "%s.h5" : "%s_weights.h5", names[k]);
            fixture(path, sizeof path, file);
            sy_model *m = build(names[k], 99);
            CHECK_OK(sy_model_load_weights(m, path));
            check_predicts_like_keras(m, names[k]);
            sy_model_free(m);
        }
    }
    /* keras.models.load_model: the architecture, the weights, compiled
     * with the optimizer and learning rate Keras trained with */
    static const float rates[] = {0.002f, 0.001f, 0.05f};
    static const char *const losses[] = {"sparse_categorical_crossentropy", "binary_crossentropy", "mse"};
    for (int k = 0; k < 3; k++) {
        char file[64], path[1024];
        snprintf(file, sizeof file, "%s.h5", names[k]);
        fixture(path, sizeof path, file);
        sy_model *m = NULL;
        CHECK_OK(sy_model_load(path, &m));
        if (!m) continue;
        sy_model *ref = build(names[k], 0);
        CHECK(sy_model_layer_count(m) == sy_model_layer_count(ref), "%s: %d layers, Keras's %d", names[k],
              sy_model_layer_count(m), sy_model_layer_count(ref));
        sy_model_free(ref);
        check_predicts_like_keras(m, names[k]);
        CHECK_CLOSE(sy_model_learning_rate(m), rates[k], 0, 0, "%s: the learning rate of the loaded model", names[k]);
        CHECK(!strcmp(m->heads[0].loss_name, losses[k]), "%s: loss %s, Keras's %s", names[k], m->heads[0].loss_name, losses[k]);
        sy_model_free(m);
    }
    /* fixed-length strings and layer_names0, layer_names1 */
    char path[1024];
    fixture(path, sizeof path, "forms_weights.h5");
    sy_model *m = build("cnn", 5);
    CHECK_OK(sy_model_load_weights(m, path));
    check_predicts_like_keras(m, "cnn");
    sy_model_free(m);
}

/* ---- round trips ---------------------------------------------------------------------- */

static void test_round_trip(void) {
    static const char *const names[] = {"cnn", "lstm", "mixed"};
    for (int k = 0; k < 3; k++) {
        char path[1024], npz[64];
        snprintf(npz, sizeof npz, "%s.npz", names[k]);
        in_tmp(path, sizeof path, "round_trip.h5");
        sy_model *a = build(names[k], 1), *b = build(names[k], 2);
        size_t n, nb;
        float *wa = snapshot(a, &n), *wb = snapshot(b, &nb);
        CHECK(n == nb && memcmp(wa, wb, n * sizeof *wa) != 0, "%s: seeds 1 and 2 should give other weights",
              names[k]);
        CHECK_OK(sy_model_save_weights(a, path));
        CHECK_OK(sy_model_load_weights(b, path));
        CHECK(same_weights(b, wa, n), "%s: weights after save and load differ from those saved", names[k]);
        sy_tensor *x = npz_array(npz, "x");
        sy_tensor *pa = predict(a, x), *pb = predict(b, x);
        CHECK(pa && pb && sy_tensor_count(pa) == sy_tensor_count(pb) &&
                  memcmp(sy_tensor_data(pa), sy_tensor_data(pb), sy_tensor_bytes(pa)) == 0,
              "%s: predictions after the round trip differ", names[k]);
        /* saving over an existing file replaces it */
        CHECK_OK(sy_model_save_weights(b, path));
        CHECK_OK(sy_model_load_weights(a, path));
        CHECK(same_weights(a, wa, n), "%s: a second save over the file", names[k]);
        sy_tensor_free(pa);
        sy_tensor_free(pb);
        sy_tensor_free(x);
        free(wa);
        free(wb);
        sy_model_free(a);
        sy_model_free(b);
    }
}

/* model.save and load_model: architecture, weights, loss, metrics and
 * optimizer come back. */
static void test_full_round_trip(void) {
    static const char *const names[] = {"cnn", "lstm", "mixed"};
    for (int k = 0; k < 3; k++) {
        char path[1024], npz[64];
        snprintf(npz, sizeof npz, "%s.npz", names[k]);
        in_tmp(path, sizeof path, "full.h5");
        sy_model *a = build(names[k], 4), *b = NULL;
        compile_like_keras(a, names[k]);
        CHECK_OK(sy_model_save(a, path));
        CHECK_OK(sy_model_load(path, &b));
        if (!b) {
            sy_model_free(a);
            continue;
        }
        size_t n;
        float *wa = snapshot(a, &n);
        CHECK(same_weights(b, wa, n), "%s: weights after model.save and load_model", names[k]);
        CHECK(b->compiled && b->heads[0].loss == a->heads[0].loss && b->heads[0].n_metrics == a->heads[0].n_metrics &&
                  b->optimizer.kind == a->optimizer.kind && b->optimizer.learning_rate == a->optimizer.learning_rate &&
                  b->optimizer.momentum == a->optimizer.momentum,
              "%s: compiled as it was", names[k]);
        for (int32_t i = 0; i < a->heads[0].n_metrics && i < b->heads[0].n_metrics; i++)
            CHECK(!strcmp(a->heads[0].metrics[i].name, b->heads[0].metrics[i].name) &&
                      a->heads[0].metrics[i].kind == b->heads[0].metrics[i].kind,
                  "%s: metric %s, saved %s", names[k], b->heads[0].metrics[i].name, a->heads[0].metrics[i].name);
        sy_tensor *x = npz_array(npz, "x"), *pa = predict(a, x), *pb = predict(b, x);
        CHECK(pa && pb && memcmp(sy_tensor_data(pa), sy_tensor_data(pb), sy_tensor_bytes(pa)) == 0,
              "%s: predictions after model.save and load_model", names[k]);
        /* a full file also serves load_weights, as in Keras */
        sy_model *c = build(names[k], 8);
        CHECK_OK(sy_model_load_weights(c, path));
        CHECK(same_weights(c, wa, n), "%s: load_weights of a full model file", names[k]);
        free(wa);
        sy_tensor_free(x);
        sy_tensor_free(pa);
        sy_tensor_free(pb);
        sy_model_free(a);
        sy_model_free(b);
        sy_model_free(c);
    }
    /* uncompiled: no training_config, and the loaded model is not compiled */
    char path[1024];
    in_tmp(path, sizeof path, "uncompiled.h5");
    sy_model *a = build("cnn", 4), *b = NULL;
    CHECK_OK(sy_model_save(a, path));
    CHECK_OK(sy_model_load(path, &b));
    CHECK(b && !b->compiled, "a model saved uncompiled loads uncompiled");
    sy_model_free(a);
    sy_model_free(b);
    /* a weights file has no model */
    fixture(path, sizeof path, "cnn_weights.h5");
    CHECK_ERR(sy_model_load(path, &b), SY_ERR_CORRUPT, "cnn_weights.h5", "no model config");
    CHECK(b == NULL, "no model after a failed load");
}

/* ---- refusals ------------------------------------------------------------------------- */

/* `path` is refused with `status` and a message mentioning each needle;
 * the model's weights do not change. */
#define CHECK_REFUSED(model, path, status, ...)                                                                    \
    do {                                                                                                           \
        size_t n_;                                                                                                 \
        float *before_ = snapshot(model, &n_);                                                                     \
        CHECK_ERR(sy_model_load_weights(model, path), status, __VA_ARGS__);                                        \
        CHECK(same_weights(model, before_, n_), "the weights changed after a failed load of %s", path);           \
        free(before_);                                                                                             \
    } while (0)

static void copy_prefix(const char *from, const char *to, long n) {
    FILE *f = fopen(from, "rb");
    SY_ASSERT(f);
    char *bytes = malloc((size_t)n + 1);
    SY_ASSERT(fread(bytes, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    write_bytes(to, bytes, (size_t)n, false);
    free(bytes);
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void test_refusals(void) {
    char cnn_w[1024], path[1024];
    fixture(cnn_w, sizeof cnn_w, "cnn_weights.h5");
    sy_model *lstm = build("lstm", 3), *cnn = build("cnn", 3), *cnn12 = build("cnn12", 3);

    /* another architecture: Keras's count check, both lists of layers */
    CHECK_REFUSED(lstm, cnn_w, SY_ERR_SHAPE, "cnn_weights.h5", "layer count mismatch", "expected 3 layers",
                  "found 2 saved layers", "(embedding, lstm, dense)", "(conv2d, dense)");
    /* a wrong shape: the layer (both names) and both shapes */
    CHECK_REFUSED(cnn12, cnn_w, SY_ERR_SHAPE, "shape mismatch in layer #1 (named dense in the current model, dense in "
                                              "the save file)",
                  "dense/kernel:0", "expects shape (64, 12)", "with shape (64, 10)");
    /* a dataset missing, integer data, Keras 3's layout */
    fixture(path, sizeof path, "cnn_no_bias.h5");
    CHECK_REFUSED(cnn, path, SY_ERR_CORRUPT, "dense/bias:0", "layer #1", "no dataset");
    fixture(path, sizeof path, "cnn_int_kernel.h5");
    CHECK_REFUSED(cnn, path, SY_ERR_DTYPE, "dense/kernel:0", "integers", "expected float32");
    fixture(path, sizeof path, "cnn_keras3.weights.h5");
    CHECK_REFUSED(cnn, path, SY_ERR_UNSUPPORTED, "Keras 3", ".weights.h5");
    /* not HDF5; not there; a directory */
    in_tmp(path, sizeof path, "not_hdf5.h5");
    write_bytes(path, "{\"class_name\": \"Sequential\"}\n", 29, false);
    CHECK_REFUSED(cnn, path, SY_ERR_CORRUPT, "not_hdf5.h5 is not an HDF5 file");
    in_tmp(path, sizeof path, "absent.h5");
    CHECK_REFUSED(cnn, path, SY_ERR_IO, "absent.h5", "No such file");
    CHECK_REFUSED(cnn, tmp_root, SY_ERR_IO, "it is a directory");
    /* truncated copies: before, inside and after the superblock, in the
     * middle, one byte short */
    long size = file_size(cnn_w);
    const long cuts[] = {0, 7, 40, 200, 1000, size / 2, size - 100, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        in_tmp(path, sizeof path, "truncated.h5");
        copy_prefix(cnn_w, path, cuts[i]);
        size_t n;
        float *before = snapshot(cnn, &n);
        sy_status st = sy_model_load_weights(cnn, path);
        CHECK(st == SY_ERR_CORRUPT, "%s cut at %ld of %ld bytes: %s (%s)", cnn_w, cuts[i], size, sy_status_name(st),
              sy_last_error());
        CHECK(strstr(sy_last_error(), "truncated.h5"), "the message names the file: %s", sy_last_error());
        CHECK(same_weights(cnn, before, n), "weights changed after the cut at %ld", cuts[i]);
        free(before);
    }
    in_tmp(path, sizeof path, "truncated.h5");
    copy_prefix(cnn_w, path, size / 2);
    CHECK_REFUSED(cnn, path, SY_ERR_CORRUPT, "truncated file");
    /* a model without an input shape has no weights to load or save */
    sy_model *empty;
    SY_ASSERT(sy_model_new(NULL, &empty) == SY_OK);
    sy_layer d = sy_layer_dense(3);
    SY_ASSERT(sy_model_add(empty, &d) == SY_OK);
    CHECK_ERR(sy_model_load_weights(empty, cnn_w), SY_ERR_STATE, "no input shape");
    in_tmp(path, sizeof path, "empty.h5");
    CHECK_ERR(sy_model_save_weights(empty, path), SY_ERR_STATE, "no input shape");
    sy_model_free(empty);
    sy_model_free(lstm);
    sy_model_free(cnn);
    sy_model_free(cnn12);
}

/* ---- failed saves ----------------------------------------------------------------------- */

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return n;
}

static void test_failed_saves(void) {
    char dir[1024], path[1100];
    in_tmp(dir, sizeof dir, "saves");
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/model.h5", dir);
    sy_model *small = build("lstm", 1), *big = build("mixed", 1);
    CHECK_OK(sy_model_save_weights(small, path));
    long before = file_size(path);
    size_t n;
    float *w = snapshot(small, &n);

    /* a file that may not grow past 4 KiB fails as a full disk does */
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit limit = {4 * 1024, old.rlim_max};
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &limit) == 0) {
        CHECK_ERR(sy_model_save_weights(big, path), SY_ERR_IO, "model.h5", "left as it was");
        setrlimit(RLIMIT_FSIZE, &old);
    } else {
        fprintf(stderr, "test_saving: cannot set RLIMIT_FSIZE (%s): the file-size test is skipped\n", strerror(errno));
    }
    signal(SIGXFSZ, old_handler);
    CHECK(file_size(path) == before, "the earlier file changed size: %ld, was %ld", file_size(path), before);
    CHECK(count_entries(dir) == 1, "a temporary file was left in %s (%d entries)", dir, count_entries(dir));
    sy_model *again = build("lstm", 9);
    CHECK_OK(sy_model_load_weights(again, path));
    CHECK(same_weights(again, w, n), "the earlier file no longer holds the weights saved in it");

    /* a directory that does not exist; a directory as the target */
    snprintf(path, sizeof path, "%s/no_such_dir/model.h5", dir);
    CHECK_ERR(sy_model_save_weights(small, path), SY_ERR_IO, "no_such_dir", "temporary file");
    CHECK_ERR(sy_model_save_weights(small, dir), SY_ERR_IO, "names a directory");
    free(w);
    sy_model_free(again);
    sy_model_free(small);
    sy_model_free(big);
}

/* ---- files for tf.keras (keras_h5_tensorflow.sh) ------------------------------------------ */

/* Write into dir, for each fixture model with weights from seed 11:
 * <name>_systolic_weights.h5 (save_weights), <name>_systolic.h5 (save,
 * compiled as make_keras_h5.py compiles), <name>_systolic.f32 (the
 * predictions for the fixture's inputs, raw float32); and, where
 * <name>_keras_weights.h5 is there, systolic's predictions with those
 * weights in <name>_keras_loaded.f32. */
static int write_for_tensorflow(const char *dir) {
    static const char *const names[] = {"cnn", "lstm", "mixed"};
    for (int k = 0; k < 3; k++) {
        char path[1024], npz[64];
        snprintf(npz, sizeof npz, "%s.npz", names[k]);
        sy_model *m = build(names[k], 11);
        snprintf(path, sizeof path, "%s/%s_systolic_weights.h5", dir, names[k]);
        CHECK_OK(sy_model_save_weights(m, path));
        compile_like_keras(m, names[k]);
        snprintf(path, sizeof path, "%s/%s_systolic.h5", dir, names[k]);
        CHECK_OK(sy_model_save(m, path));
        sy_tensor *x = npz_array(npz, "x"), *p = predict(m, x);
        snprintf(path, sizeof path, "%s/%s_systolic.f32", dir, names[k]);
        if (p) write_bytes(path, sy_tensor_data(p), sy_tensor_bytes(p), false);
        sy_tensor_free(p);
        /* and the weights Keras saved in <name>_keras_weights.h5, if there */
        snprintf(path, sizeof path, "%s/%s_keras_weights.h5", dir, names[k]);
        if (file_size(path) > 0) {
            CHECK_OK(sy_model_load_weights(m, path));
            p = predict(m, x);
            snprintf(path, sizeof path, "%s/%s_keras_loaded.f32", dir, names[k]);
            if (p) write_bytes(path, sy_tensor_data(p), sy_tensor_bytes(p), false);
            sy_tensor_free(p);
        }
        sy_tensor_free(x);
        sy_model_free(m);
    }
    /* issue 15: Keras's model with a nested Sequential one, its weights scaled so they are systolic's own */
    char path[1024];
    fixture(path, sizeof path, "nested_seq_in_fn.h5");
    sy_model *m = NULL;
    CHECK_OK(sy_model_load(path, &m));
    if (m) {
        for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
            sy_shape s = sy_model_weight_shape(m, i);
            float *w = sy_model_weight_data(m, i);
            for (int64_t k = 0; k < sy_shape_count(&s); k++) w[k] = w[k] * 0.75f + 0.01f * (float)(k % 5);
        }
        snprintf(path, sizeof path, "%s/nested_systolic_weights.h5", dir);
        CHECK_OK(sy_model_save_weights(m, path));
        snprintf(path, sizeof path, "%s/nested_systolic.h5", dir);
        CHECK_OK(sy_model_save(m, path));
        sy_tensor *x = npz_array("nested.npz", "x"), *p = predict(m, x);
        snprintf(path, sizeof path, "%s/nested_systolic.f32", dir);
        if (p) write_bytes(path, sy_tensor_data(p), sy_tensor_bytes(p), false);
        sy_tensor_free(p);
        sy_tensor_free(x);
        sy_model_free(m);
    }
    return check_report("test_saving --for-tensorflow");
}

/* ---- normalization layers ------------------------------------------------------------------ */

/* Keras's normalization_weights.h5 (LayerNormalization and
 * BatchNormalization, moving statistics trained away from their initial
 * values) into the model of normalization.json: Keras's predictions; then
 * written by systolic and read back, the same weights, moving statistics
 * included. */
static void test_normalization_h5(void) {
    char path[1024], tmp[1024];
    fixture(path, sizeof path, "normalization.json");
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "%s", path);
    if (!f) return;
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    sy_model *m = NULL, *m2 = NULL;
    CHECK_OK(sy_model_from_json(text, &m));
    if (!m) return;
    fixture(path, sizeof path, "normalization_weights.h5");
    CHECK_OK(sy_model_load_weights(m, path));
    check_predicts_like_keras(m, "normalization");
    int32_t mv = sy_model_find_weight(m, "batch_normalization/moving_variance");
    CHECK(mv >= 0 && sy_model_weight_data(m, mv)[0] != 1.0f, "the moving variance comes from the file");
    in_tmp(tmp, sizeof tmp, "normalization.h5");
    CHECK_OK(sy_model_save_weights(m, tmp));
    CHECK_OK(sy_model_from_json(text, &m2));
    if (m2) {
        CHECK_OK(sy_model_load_weights(m2, tmp));
        size_t na;
        float *a = snapshot(m, &na);
        CHECK(same_weights(m2, a, na), "normalization: weights written and read back differ");
        free(a);
    }
    sy_model_free(m2);
    sy_model_free(m);
}

/* ---- issue 15: nested models and Functional weights files -------------------------------------------------- */

/* The names attribute `attr` of group `group` ("" for the file's weights group) of an .h5 file, joined with
 * commas; the weights group is the root of a weights file or a full file's model_weights. */
static void h5_names(const char *path, const char *group, const char *attr, char *out, size_t size) {
    out[0] = '\0';
    h5_file *f = NULL;
    if (h5_open(path, &f)) return;
    h5_id g = h5_root(f), w = -1, lg = -1;
    if (h5_is_group(f, g, "model_weights") && !h5_group_open(f, g, "model_weights", &w)) g = w;
    if (*group && !h5_group_open(f, g, group, &lg)) g = lg;
    h5_strings names;
    bool found = false;
    if (!h5_attr_read_strings(f, g, attr, &names, &found) && found) {
        size_t used = 0;
        for (int64_t i = 0; i < names.n && used < size; i++)
            used += (size_t)snprintf(out + used, size - used, "%s%s", i ? "," : "", names.v[i]);
        h5_strings_free(&names);
    }
    if (lg >= 0) h5_group_close(f, lg);
    if (w >= 0) h5_group_close(f, w);
    h5_close(f);
}

static void test_nested_h5(void) {
    char path[1024], mine[1024], theirs[1024], a[1024], b[1024];
    /* Keras's full .h5 of a Functional model with a Sequential one inside: loaded, predicts as Keras did */
    fixture(path, sizeof path, "nested_seq_in_fn.h5");
    sy_model *m = NULL;
    CHECK_OK(sy_model_load(path, &m));
    if (m) check_predicts_like_keras(m, "nested");
    /* its save_weights file into the model read from its JSON */
    char *json = NULL;
    if (m) CHECK_OK(sy_model_to_json(m, &json));
    sy_model *fresh = NULL;
    if (json) CHECK_OK(sy_model_from_json(json, &fresh));
    sy_free(json);
    fixture(theirs, sizeof theirs, "nested_seq_in_fn_weights.h5");
    if (fresh) {
        CHECK_OK(sy_model_load_weights(fresh, theirs));
        check_predicts_like_keras(fresh, "nested");
    }
    /* written as Keras writes it: InputLayer listed, the nested model's group with the inner names */
    in_tmp(mine, sizeof mine, "nested_weights.h5");
    if (m) CHECK_OK(sy_model_save_weights(m, mine));
    static const char *const groups[] = {"", "features", "dense_2", "input_1"};
    for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++) {
        const char *attr = k ? "weight_names" : "layer_names";
        h5_names(mine, groups[k], attr, a, sizeof a);
        h5_names(theirs, groups[k], attr, b, sizeof b);
        CHECK(!strcmp(a, b), "nested weights file, group '%s' %s: systolic [%s], Keras [%s]", groups[k], attr, a, b);
    }
    h5_names(theirs, "features", "weight_names", b, sizeof b);
    CHECK(!strcmp(b, "dense/kernel:0,dense/bias:0,dense_1/kernel:0,dense_1/bias:0"), "Keras's nested names: %s", b);
    /* systolic's files read back: weights and full model */
    sy_model *back = NULL;
    if (fresh) {
        char *j = NULL;
        if (fresh) CHECK_OK(sy_model_to_json(fresh, &j));
        if (j) CHECK_OK(sy_model_from_json(j, &back));
        sy_free(j);
    }
    if (back) {
        CHECK_OK(sy_model_load_weights(back, mine));
        check_predicts_like_keras(back, "nested");
    }
    sy_model_free(back);
    back = NULL;
    in_tmp(mine, sizeof mine, "nested_full.h5");
    if (m) CHECK_OK(sy_model_save(m, mine));
    CHECK_OK(sy_model_load(mine, &back));
    if (back) check_predicts_like_keras(back, "nested");
    h5_names(mine, "features", "weight_names", a, sizeof a);
    CHECK(!strcmp(a, b), "full file's nested group: %s", a);
    sy_model_free(back);
    sy_model_free(fresh);
    sy_model_free(m);

    /* Functional weights files list their InputLayers (Keras's functional_cnn_weights.h5) */
    fixture(path, sizeof path, "functional_cnn.json");
    FILE *jf = fopen(path, "rb");
    char *text = NULL;
    if (jf) {
        fseek(jf, 0, SEEK_END);
        long n = ftell(jf);
        fseek(jf, 0, SEEK_SET);
        text = calloc((size_t)n + 1, 1);
        if (text && fread(text, 1, (size_t)n, jf) != (size_t)n) text[0] = '\0';
        fclose(jf);
    }
    m = NULL;
    if (text) CHECK_OK(sy_model_from_json(text, &m));
    free(text);
    fixture(theirs, sizeof theirs, "functional_cnn_weights.h5");
    in_tmp(mine, sizeof mine, "functional_cnn_weights.h5");
    if (m) {
        CHECK_OK(sy_model_load_weights(m, theirs));
        CHECK_OK(sy_model_save_weights(m, mine));
        h5_names(mine, "", "layer_names", a, sizeof a);
        h5_names(theirs, "", "layer_names", b, sizeof b);
        CHECK(!strcmp(a, b) && !strncmp(a, "image,conv2d,", 13), "Functional layer_names: systolic [%s], Keras [%s]", a, b);
        size_t n;
        float *w = snapshot(m, &n);
        CHECK_OK(sy_model_load_weights(m, mine));
        CHECK(same_weights(m, w, n), "a Functional weights file written here reads back the same");
        free(w);
    }
    sy_model_free(m);
}

int main(void) {
    if (!files_setup("test-saving", __FILE__)) return 1;
    const char *out = getenv("SYSTOLIC_SAVE_DIR");
    if (out && *out) {
        int rc = write_for_tensorflow(out);
        files_cleanup();
        return rc;
    }
    test_keras_files();
    test_round_trip();
    test_full_round_trip();
    test_refusals();
    test_failed_saves();
    test_normalization_h5();
    test_nested_h5(); /* issue 15 */
    files_cleanup();
    return check_report("test_saving");
}
