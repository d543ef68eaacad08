/*
 * test_applications.c - keras.applications (issue 15, point 3).
 *
 * Without arguments: the C constructors sy_applications_vgg16 and
 * sy_applications_resnet50 against tf.keras 2.15's to_json() of the same
 * calls, byte for byte (tests/data/keras/applications/, written by
 * tools/keras_applications.py variants), Keras's parameter counts, and
 * Keras's argument errors.
 *
 * With arguments (tests/keras_applications.sh drives these, on files
 * tools/keras_applications.py makes at test time):
 *
 *   test_applications variants DIR
 *       every DIR/NAME.json of `keras_applications.py variants` against
 *       the constructor called with NAME's arguments, byte for byte
 *   test_applications run DIR KEY [train]
 *       DIR/KEY.json read and written back byte for byte; DIR/KEY.h5
 *       loaded; its predictions on DIR/KEY_x.npy into DIR/KEY_pred.npy;
 *       with `train`, one SGD step of the .h5's training_config on
 *       (KEY_x, KEY_y1): the loss is finite and every trainable weight
 *       checked changed; then saved as DIR/KEY_sy.h5, whose predictions go
 *       to DIR/KEY_sy.npy (tf.keras loads the file and compares)
 */
#include "check.h"
#include "systolic.h"
#include "core/core_internal.h" /* sy_free */

#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* The first byte where a and b differ, shown with some context. */
static void check_same_json(const char *what, const char *mine, const char *keras) {
    size_t i = 0;
    while (mine[i] && mine[i] == keras[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    CHECK(mine[i] == keras[i], "%s: to_json differs from Keras's at byte %zu:\n  systolic: ...%.120s\n  keras:    ...%.120s",
          what, i, mine + from, keras + from);
}

static int64_t trainable_params(const sy_model *m) {
    int64_t n = 0;
    for (int32_t i = 0; i < sy_model_layer_count(m); i++) n += sy_model_param_count(m, i);
    return n;
}

/* The options of a variant's name: vgg16_notop_avg_48 (include_top False,
 * pooling avg, input 48x40x3 as the script writes it), ..._top_32_c10. */
typedef struct variant {
    const char *name;
    bool resnet, top;
    const char *pooling;
    int64_t h, w;
    int32_t classes;
    const char *activation;
} variant;

static const variant variants[] = {
    {"vgg16_notop_32", false, false, NULL, 32, 32, 1000, "softmax"},
    {"vgg16_top_32_c10", false, true, NULL, 32, 32, 10, NULL},
    {"vgg16_notop_avg_48", false, false, "avg", 48, 40, 1000, "softmax"},
    {"vgg16_top_224", false, true, NULL, 0, 0, 1000, "softmax"},
    {"resnet50_notop_max_64", true, false, "max", 64, 64, 1000, "softmax"},
    {"resnet50_top_32_c10", true, true, NULL, 32, 32, 10, "softmax"},
    {"resnet50_top_224", true, true, NULL, 0, 0, 1000, "softmax"},
};

static sy_status make_variant(const variant *v, sy_model **m) {
    sy_applications_options o = sy_applications_options_default();
    o.include_top = v->top;
    o.pooling = v->pooling;
    o.classes = v->classes;
    o.classifier_activation = v->activation;
    if (v->h) o.input_shape = sy_shape_of(3, v->h, v->w, (int64_t)3);
    return v->resnet ? sy_applications_resnet50(&o, m) : sy_applications_vgg16(&o, m);
}

/* The variant against DIR/NAME.json and DIR/NAME.params; false if the files are absent. */
static bool check_variant(const variant *v, const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.json", dir, v->name);
    char *keras = slurp(path);
    if (!keras) return false;
    snprintf(path, sizeof path, "%s/%s.params", dir, v->name);
    char *params = slurp(path);
    sy_model *m = NULL;
    CHECK_OK(make_variant(v, &m));
    if (m) {
        char *json = NULL;
        CHECK_OK(sy_model_to_json(m, &json));
        if (json) check_same_json(v->name, json, keras);
        sy_free(json);
        long long total = -1, trainable = -1, non_trainable = -1;
        if (params) sscanf(params, "%lld %lld %lld", &total, &trainable, &non_trainable);
        CHECK(sy_model_param_count(m, -1) == total, "%s: %lld parameters, Keras counts %lld", v->name,
              (long long)sy_model_param_count(m, -1), total);
        (void)trainable_params;
        sy_model_free(m);
    }
    free(params);
    free(keras);
    return true;
}

/* Keras's Normalization layers (tools/golden/make_preprocessing_fixtures.py):
 * read and written back byte for byte. */
static void test_normalization_json(void) {
    char *keras = slurp(SY_KERAS_JSON_DIR "/preprocessing.json");
    CHECK(keras != NULL, "cannot read preprocessing.json");
    sy_model *m = NULL;
    if (keras) CHECK_OK(sy_model_from_json(keras, &m));
    char *json = NULL;
    if (m) CHECK_OK(sy_model_to_json(m, &json));
    if (json) check_same_json("preprocessing.json", json, keras);
    if (m) {
        /* weights only where mean and variance are not given: 3 + 3 + 1 (count), ... */
        CHECK(sy_model_param_count(m, -1) == 7 + 25 + 3, "Normalization weights: %lld",
              (long long)sy_model_param_count(m, -1));
        sy_layer bad = sy_layer_normalization();
        bad.mean = sy_numbers_scalar(1.0);
        sy_model *b = NULL;
        CHECK_OK(sy_model_new(NULL, &b));
        bad.input_shape = sy_shape_of(2, (int64_t)4, (int64_t)3);
        CHECK_ERR(sy_model_add(b, &bad), SY_ERR_INVALID_ARGUMENT, "both `mean` and `variance` must be set");
        bad.variance = sy_numbers_scalar(1.0);
        bad.n_axes = 1;
        bad.axes[0] = 3;
        CHECK_ERR(sy_model_add(b, &bad), SY_ERR_SHAPE, "All `axis` values must be in the range [-ndim, ndim)");
        bad.axes[0] = 0;
        CHECK_ERR(sy_model_add(b, &bad), SY_ERR_SHAPE, "the batch axis");
        bad.axes[0] = -1;
        CHECK_OK(sy_model_add(b, &bad));
        sy_tensor *t = NULL;
        CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(3, (int64_t)2, (int64_t)4, (int64_t)3), &t));
        CHECK_ERR(sy_model_adapt_normalization(b, sy_model_layer(b, 0)->name, t, 0), SY_ERR_INVALID_ARGUMENT,
                  "Cannot `adapt`");
        sy_tensor_free(t);
        sy_model_free(b);
    }
    sy_free(json);
    sy_model_free(m);
    free(keras);
}

static void test_errors(void) {
    sy_applications_options o = sy_applications_options_default();
    sy_model *m = NULL;
    o.input_shape = sy_shape_of(3, (int64_t)31, (int64_t)32, (int64_t)3);
    CHECK_ERR(sy_applications_vgg16(&o, &m), SY_ERR_INVALID_ARGUMENT,
              "Input size must be at least 32x32; Received: input_shape=(31, 32, 3)");
    o.input_shape = sy_shape_of(2, (int64_t)32, (int64_t)32);
    CHECK_ERR(sy_applications_resnet50(&o, &m), SY_ERR_INVALID_ARGUMENT, "must be a tuple of three integers");
    o = sy_applications_options_default();
    o.weights = "imagenet";
    o.classes = 10;
    CHECK_ERR(sy_applications_vgg16(&o, &m), SY_ERR_INVALID_ARGUMENT, "`classes` should be 1000",
              "Received `classes=10`");
    o.classes = 1000;
    CHECK_ERR(sy_applications_resnet50(&o, &m), SY_ERR_UNSUPPORTED, "weights 'imagenet' is not supported");
    o = sy_applications_options_default();
    o.classifier_activation = "softmaks";
    CHECK_ERR(sy_applications_vgg16(&o, &m), SY_ERR_NOT_FOUND, "softmaks");
    o = sy_applications_options_default();
    o.include_top = false;
    CHECK_ERR(sy_applications_vgg16(&o, &m), SY_ERR_UNSUPPORTED, "(None, None, 3)", "give input_shape");
    o.input_shape = sy_shape_of(3, (int64_t)32, (int64_t)32, (int64_t)3);
    o.pooling = "mean";
    CHECK_ERR(sy_applications_resnet50(&o, &m), SY_ERR_INVALID_ARGUMENT, "pooling 'mean'");
    o.pooling = NULL;
    o.weights = "/nonexistent/weights.h5";
    CHECK(sy_applications_vgg16(&o, &m) != SY_OK, "a missing weights file is an error");
    CHECK(m == NULL, "no model on errors");
}

/* Keras's counts of the defaults (224x224x3, 1,000 classes), as summary() prints them. */
static void test_defaults(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_applications_vgg16(NULL, &m));
    if (m) {
        CHECK(sy_model_param_count(m, -1) == 138357544, "VGG16: %lld parameters", (long long)sy_model_param_count(m, -1));
        CHECK(strcmp(sy_model_name(m), "vgg16") == 0, "name %s", sy_model_name(m));
        sy_model_free(m);
    }
    CHECK_OK(sy_applications_resnet50(NULL, &m));
    if (m) {
        CHECK(sy_model_param_count(m, -1) == 25636712, "ResNet50: %lld parameters",
              (long long)sy_model_param_count(m, -1));
        sy_model_free(m);
    }
}

/* ---- run: one Keras-written application model ------------------------------------ */

static sy_tensor *read_npy(const char *dir, const char *key, const char *suffix) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", dir, key, suffix);
    sy_tensor *t = NULL;
    CHECK_OK(sy_npy_read(path, &t));
    return t;
}

static void write_npy(const char *dir, const char *key, const char *suffix, const sy_tensor *t) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", dir, key, suffix);
    CHECK_OK(sy_npy_write(path, t));
}

static void predict_to(sy_model *m, const sy_tensor *x, const char *dir, const char *key, const char *suffix) {
    sy_evaluate_options e = sy_evaluate_options_default();
    e.batch_size = sy_tensor_shape(x).dims[0];
    e.verbose = 0;
    sy_tensor *y = NULL;
    CHECK_OK(sy_model_predict(m, x, &e, &y));
    if (y) write_npy(dir, key, suffix, y);
    sy_tensor_free(y);
}

static int run(const char *dir, const char *key, bool train) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.json", dir, key);
    char *keras = slurp(path);
    CHECK(keras != NULL, "cannot read %s", path);
    if (keras) {
        sy_model *j = NULL;
        CHECK_OK(sy_model_from_json(keras, &j));
        char *json = NULL;
        if (j) CHECK_OK(sy_model_to_json(j, &json));
        if (json) check_same_json(key, json, keras);
        sy_free(json);
        sy_model_free(j);
        free(keras);
    }
    snprintf(path, sizeof path, "%s/%s.h5", dir, key);
    sy_model *m = NULL;
    CHECK_OK(sy_model_load(path, &m));
    sy_tensor *x = read_npy(dir, key, "_x.npy"), *xt = read_npy(dir, key, "_xt.npy"), *yt = read_npy(dir, key, "_yt.npy");
    if (!m || !x || !xt || !yt) return check_report("test_applications");
    predict_to(m, x, dir, key, "_pred.npy");
    if (train) {
        /* the first and the last kernels before the step */
        int32_t n = sy_model_weight_count(m), watch[2] = {-1, -1};
        bool dropout = false;
        for (int32_t i = 0; i < n; i++)
            if (strstr(sy_model_weight_name(m, i), "kernel")) watch[watch[0] < 0 ? 0 : 1] = i;
        for (int32_t i = 0; i < sy_model_layer_count(m); i++) dropout |= sy_model_layer(m, i)->kind == SY_LAYER_DROPOUT;
        if (watch[1] < 0) watch[1] = watch[0];
        float *before[2];
        for (int k = 0; k < 2; k++) {
            sy_shape s = sy_model_weight_shape(m, watch[k]);
            size_t bytes = (size_t)sy_shape_count(&s) * sizeof(float);
            before[k] = malloc(bytes);
            memcpy(before[k], sy_model_weight_data(m, watch[k]), bytes);
        }
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = sy_tensor_shape(xt).dims[0];
        f.steps_per_epoch = 1;
        f.shuffle = false;
        f.verbose = 0;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(m, xt, yt, &f, &h));
        double loss = h ? sy_logs_get(sy_history_logs(h, 0), "loss") : NAN;
        CHECK(isfinite(loss), "%s: training loss %g", key, loss);
        for (int k = 0; k < 2; k++) {
            sy_shape s = sy_model_weight_shape(m, watch[k]);
            bool changed = memcmp(before[k], sy_model_weight_data(m, watch[k]),
                                  (size_t)sy_shape_count(&s) * sizeof(float)) != 0;
            CHECK(changed, "%s: weight %s did not change in a training step", key, sy_model_weight_name(m, watch[k]));
            free(before[k]);
        }
        snprintf(path, sizeof path, "%s/%s.loss", dir, key);
        char *keras_loss = slurp(path);
        /* Keras's own step on the same weights and batch: the same loss,
         * to 1e-3, but for dropout masks (MobileNet's top, EfficientNet's
         * blocks and top), which are drawn differently: 10% there */
        double theirs = keras_loss ? strtod(keras_loss, NULL) : NAN;
        CHECK(fabs(loss - theirs) <= (dropout ? 0.1 : 1e-3) * fabs(theirs), "%s: training step loss %.7g, Keras's %.7g", key, loss, theirs);
        printf("%s: one training step, loss %.6g (Keras %.6g)\n", key, loss, theirs);
        free(keras_loss);
        sy_history_free(h);
    }
    snprintf(path, sizeof path, "%s/%s_sy.h5", dir, key);
    CHECK_OK(sy_model_save(m, path));
    predict_to(m, x, dir, key, "_sy.npy");
    sy_tensor_free(x);
    sy_tensor_free(xt);
    sy_tensor_free(yt);
    sy_model_free(m);
    return check_report("test_applications");
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "run") == 0) return run(argv[2], argv[3], argc > 4 && !strcmp(argv[4], "train"));
    if (argc == 3 && strcmp(argv[1], "variants") == 0) {
        int found = 0;
        for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) found += check_variant(&variants[i], argv[2]);
        CHECK(found == (int)(sizeof variants / sizeof variants[0]), "%d of the variants' files found in %s", found,
              argv[2]);
        printf("test_applications: %d constructor variants equal tf.keras's to_json byte for byte\n", found);
        return check_report("test_applications");
    }
    const char *dir = SY_KERAS_JSON_DIR "/applications";
    int found = 0;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) found += check_variant(&variants[i], dir);
    CHECK(found >= 2, "only %d committed fixtures found in %s", found, dir);
    test_errors();
    test_normalization_json();
    test_defaults();
    return check_report("test_applications");
}
