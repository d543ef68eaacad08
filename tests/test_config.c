/*
 * test_config.c - Keras's model JSON (src/keras/config.c) against Keras's
 * own: tests/data/keras/<case>.json is model.to_json() as tf.keras 2.15
 * wrote it (tools/golden/make_model_json.py), <case>.expect.json the
 * layers, output shapes and weights Keras built from it.
 *
 *   - every file reads into the layers, shapes, parameter counts and weight
 *     names Keras has, and writes back the same JSON (parsed and byte for
 *     byte), twice over;
 *   - the built-in models of the command (src/cli/builtin.c) and models
 *     made in C write what Keras writes for them;
 *   - older Keras 2 forms read: no InputLayer, no module, VarianceScaling
 *     initializers, the layers as the whole config, initializers by name;
 *   - what is not supported is refused naming the layer, the argument, its
 *     value and what is supported; broken JSON with its line and column;
 *     wrong types and missing arguments clearly; every prefix of a file
 *     without a crash or a leak (ASan runs this test too).
 *
 * The directory comes from the build (SY_KERAS_JSON_DIR).
 */
#include "check.h"
#include "cli/cli_internal.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#ifndef SY_KERAS_JSON_DIR
#error "SY_KERAS_JSON_DIR must name tests/data/keras"
#endif

/* ---- files ------------------------------------------------------------------------------ */

/* tests/data/keras/<name> as a NUL-terminated string (free()), or NULL. */
static char *read_text(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_KERAS_JSON_DIR, name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    fclose(f);
    s[got] = '\0';
    return s;
}

static json_t *parse_json(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    CHECK(j != NULL, "test JSON does not parse: line %d: %s", e.line, e.text);
    return j;
}

static json_t *read_json(const char *name) {
    char *t = read_text(name);
    json_t *j = t ? parse_json(t) : NULL;
    free(t);
    return j;
}

/* A golden file with layers[layer].config[key] set to `value` (JSON text),
 * or deleted when value is NULL; layer -1 is the top-level object and -2
 * the model's config. A new string (free()). */
static char *mutate(const char *file, int layer, const char *key, const char *value) {
    json_t *root = read_json(file);
    if (!root) return NULL;
    json_t *config = json_object_get(root, "config"), *target = root;
    if (layer == -2) target = config;
    else if (layer >= 0) target = json_object_get(json_array_get(json_object_get(config, "layers"), (size_t)layer), "config");
    CHECK(json_is_object(target), "%s: no layer %d", file, layer);
    if (value) {
        json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
        CHECK(v != NULL, "bad test value %s", value);
        json_object_set_new(target, key, v);
    } else {
        json_object_del(target, key);
    }
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

/* layers[layer] (the whole entry) given a new class_name. */
static char *rename_class(const char *file, int layer, const char *cls) {
    json_t *root = read_json(file);
    json_t *e = json_array_get(json_object_get(json_object_get(root, "config"), "layers"), (size_t)layer);
    json_object_set_new(e, "class_name", json_string(cls));
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

static sy_shape shape_of_json(const json_t *a) {
    sy_shape s = {0};
    for (size_t i = 0; i < json_array_size(a) && i < SY_MAX_RANK; i++) s.dims[s.rank++] = json_integer_value(json_array_get(a, i));
    return s;
}

/* ---- round trips of Keras's files ------------------------------------------------------------ */

static const char *const cases[] = {"fashion_mnist_cnn", "imdb_lstm",   "conv_options", "recurrent_options",
                                    "embedding_options", "embedding_no_length", "initializers", "activations",
                                    "input_layer",       "built",       "functional_chain",
                                    /* the convolution family (issue 15) */
                                    "conv_family",       "conv_family_defaults",
                                    /* issue 15, activations and regularizers */
                                    "activation_layers", "regularizers",
                                    /* normalization layers */
                                    "normalization",
                                    /* issue 15, recurrent activations */
                                    "recurrent_activations", "softmax_axes"};

/* m has the layers, shapes and weights of <name>.expect.json. */
static void check_expect(const char *name, const sy_model *m) {
    char file[256];
    snprintf(file, sizeof file, "%s.expect.json", name);
    json_t *e = read_json(file);
    if (!e) return;
    json_t *layers = json_object_get(e, "layers"), *weights = json_object_get(e, "weights");
    CHECK(sy_model_layer_count(m) == (int32_t)json_array_size(layers), "%s: %d layers, Keras %zu", name,
          sy_model_layer_count(m), json_array_size(layers));
    sy_shape in = sy_model_input_shape(m), want_in = shape_of_json(json_object_get(e, "input_shape"));
    CHECK(sy_shape_equal(&in, &want_in), "%s: input shape", name);
    for (int32_t i = 0; i < sy_model_layer_count(m) && i < (int32_t)json_array_size(layers); i++) {
        json_t *L = json_array_get(layers, (size_t)i);
        const sy_layer *l = sy_model_layer(m, i);
        CHECK(!strcmp(l->name, json_string_value(json_object_get(L, "name"))), "%s: layer %d is '%s', Keras's '%s'",
              name, i, l->name, json_string_value(json_object_get(L, "name")));
        CHECK(!strcmp(sy_layer_class_name(l->kind), json_string_value(json_object_get(L, "class_name"))),
              "%s: layer %d's class", name, i);
        sy_shape got = sy_model_output_shape(m, i), want = shape_of_json(json_object_get(L, "output_shape"));
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        CHECK(sy_shape_equal(&got, &want), "%s: layer '%s' gives %s, Keras %s", name, l->name,
              sy_shape_format(&got, a, sizeof a), sy_shape_format(&want, b, sizeof b));
        CHECK(sy_model_param_count(m, i) == json_integer_value(json_object_get(L, "params")), "%s: layer '%s' has %lld "
              "parameters, Keras %lld", name, l->name, (long long)sy_model_param_count(m, i),
              (long long)json_integer_value(json_object_get(L, "params")));
    }
    CHECK(sy_model_param_count(m, -1) == json_integer_value(json_object_get(e, "params")), "%s: parameters", name);
    CHECK(sy_model_weight_count(m) == (int32_t)json_array_size(weights), "%s: %d weights, Keras %zu", name,
          sy_model_weight_count(m), json_array_size(weights));
    for (int32_t i = 0; i < sy_model_weight_count(m) && i < (int32_t)json_array_size(weights); i++) {
        json_t *w = json_array_get(weights, (size_t)i);
        const char *want = json_string_value(json_array_get(w, 0));
        CHECK(!strcmp(sy_model_weight_name(m, i), want), "%s: weight %d is '%s', Keras's '%s'", name, i,
              sy_model_weight_name(m, i), want);
        sy_shape got = sy_model_weight_shape(m, i), ws = shape_of_json(json_array_get(w, 1));
        CHECK(sy_shape_equal(&got, &ws), "%s: weight '%s''s shape", name, want);
    }
    json_decref(e);
}

/* got and want are the same JSON, parsed (key order aside) and, when
 * `bytes`, byte for byte. */
static void check_same_json(const char *what, const char *got, const char *want, bool bytes) {
    json_t *g = parse_json(got), *w = parse_json(want);
    CHECK(g && w && json_equal(g, w), "%s: the JSON differs from Keras's:\n  got  %.3000s\n  want %.3000s", what, got,
          want);
    if (bytes && g && w && json_equal(g, w))
        CHECK(!strcmp(got, want), "%s: the same JSON, but not byte for byte:\n  got  %.3000s\n  want %.3000s", what, got,
              want);
    json_decref(g);
    json_decref(w);
}

static void test_keras_files(void) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *name = cases[c];
        char file[256];
        snprintf(file, sizeof file, "%s.json", name);
        char *text = read_text(file);
        if (!text) continue;
        sy_model *m = NULL;
        sy_status st = sy_model_from_json(text, &m);
        CHECK(st == SY_OK, "%s: %s", name, sy_last_error());
        if (m) {
            check_expect(name, m);
            char *out = NULL;
            CHECK_OK(sy_model_to_json(m, &out));
            if (out) check_same_json(name, out, text, true); /* a Functional chain stays Functional */
            /* and again: what was written reads back and writes the same */
            sy_model *m2 = NULL;
            if (out) CHECK_OK(sy_model_from_json(out, &m2));
            if (m2) {
                check_expect(name, m2);
                char *out2 = NULL;
                CHECK_OK(sy_model_to_json(m2, &out2));
                CHECK(out2 && !strcmp(out, out2), "%s: a second round trip changed the JSON", name);
                sy_free(out2);
            }
            sy_model_free(m2);
            sy_free(out);
        }
        sy_model_free(m);
        free(text);
    }
}

/* The argument mapping, on a few fields of each kind. */
static void test_fields(void) {
    char *text = read_text("conv_options.json");
    sy_model *m = NULL;
    if (text) CHECK_OK(sy_model_from_json(text, &m));
    free(text);
    if (m) {
        const sy_layer *c = sy_model_layer(m, 0), *a = sy_model_layer(m, 2), *p = sy_model_layer(m, 3);
        const sy_layer *d = sy_model_layer(m, 6), *drop = sy_model_layer(m, 7);
        CHECK(!strcmp(sy_model_name(m), "convnet"), "model name %s", sy_model_name(m));
        CHECK(c->filters == 8 && c->kernel_size[0] == 3 && c->kernel_size[1] == 5 && c->strides[0] == 2 &&
                  c->strides[1] == 1 && c->padding == SY_PADDING_SAME && !c->use_bias &&
                  c->activation == SY_ACTIVATION_TANH && c->kernel_initializer.kind == SY_INIT_HE_NORMAL &&
                  c->kernel_initializer.seed == 7,
              "Conv2D's arguments");
        CHECK(a->kind == SY_LAYER_AVERAGE_POOLING2D && a->pool_size[0] == 2 && a->pool_size[1] == 3 &&
                  a->strides[0] == 1 && a->strides[1] == 2 && a->padding == SY_PADDING_SAME,
              "AveragePooling2D's arguments");
        CHECK(p->pool_size[0] == 2 && p->padding == SY_PADDING_VALID, "MaxPooling2D's arguments");
        CHECK(d->kernel_initializer.kind == SY_INIT_NORMAL && d->kernel_initializer.a == 0.1 &&
                  d->kernel_initializer.b == 0.2 && d->kernel_initializer.seed == 3 && !d->use_bias,
              "Dense's RandomNormal(0.1, 0.2, seed 3)");
        CHECK(drop->rate == 0.25f && drop->seed == 5, "Dropout(0.25, seed=5)");
        CHECK(sy_model_layer(m, 1)->bias_initializer.kind == SY_INIT_CONSTANT &&
                  sy_model_layer(m, 1)->bias_initializer.a == 0.1,
              "Constant(0.1)");
    }
    sy_model_free(m);
    m = NULL;
    text = read_text("recurrent_options.json");
    if (text) CHECK_OK(sy_model_from_json(text, &m));
    free(text);
    if (m) {
        const sy_layer *l = sy_model_layer(m, 0), *g = sy_model_layer(m, 1);
        CHECK(l->kind == SY_LAYER_LSTM && l->units == 6 && l->return_sequences && l->go_backwards && l->dropout == 0.1f &&
                  l->recurrent_dropout == 0.2f && !l->use_bias && l->activation == SY_ACTIVATION_RELU &&
                  l->recurrent_activation == SY_ACTIVATION_TANH && !l->unit_forget_bias &&
                  l->recurrent_initializer.kind == SY_INIT_ORTHOGONAL && l->recurrent_initializer.a == 2.0 &&
                  l->recurrent_initializer.seed == 1,
              "LSTM's arguments");
        CHECK(g->kind == SY_LAYER_GRU && g->reset_after && g->activation == SY_ACTIVATION_SIGMOID &&
                  g->bias_initializer.kind == SY_INIT_UNIFORM && g->bias_initializer.a == -0.1,
              "GRU's arguments");
    }
    sy_model_free(m);
}

/* ---- writing models made in C ------------------------------------------------------------------ */

static void check_written(const char *what, sy_model *m, const char *file) {
    char *want = read_text(file), *got = NULL;
    CHECK_OK(sy_model_to_json(m, &got));
    if (want && got) check_same_json(what, got, want, true);
    sy_free(got);
    free(want);
}

static void test_builtins(void) {
    for (int i = 0; i < builtin_count(); i++) {
        const builtin_model *b = builtin_at(i);
        sy_model *m = NULL;
        CHECK_OK(b->build(0, &m));
        if (!m) continue;
        char file[256];
        const char *json = !strcmp(b->name, "mnist_cnn")             ? "fashion_mnist_cnn"
                           : !strcmp(b->name, "fashion_mnist_vgg16") ? "cifar10_vgg16"
                                                                     : b->name;
        snprintf(file, sizeof file, "%s.json", json); /* the same model on other data: one file */
        check_written(b->name, m, file);
        sy_model_free(m);
    }
}

static void add(sy_model *m, sy_layer l) { CHECK_OK(sy_model_add(m, &l)); }

static void test_c_models(void) {
    /* conv_options, as the C API makes it (pooling strides left to the pool size) */
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("convnet", &m));
    sy_layer l = sy_layer_conv2d(8, 3, 5);
    l.name = "features";
    l.input_shape = sy_shape_of(3, (int64_t)9, (int64_t)10, (int64_t)3);
    l.strides[0] = 2;
    l.padding = SY_PADDING_SAME;
    l.use_bias = false;
    l.activation = SY_ACTIVATION_TANH;
    l.kernel_initializer = (sy_init){SY_INIT_HE_NORMAL, 0, 0, 7};
    add(m, l);
    l = sy_layer_conv2d(4, 2, 2);
    l.activation = SY_ACTIVATION_RELU;
    l.bias_initializer = sy_init_constant(0.1);
    add(m, l);
    l = sy_layer_average_pooling2d(2, 3);
    l.strides[0] = 1, l.strides[1] = 2;
    l.padding = SY_PADDING_SAME;
    add(m, l);
    add(m, sy_layer_max_pooling2d(2, 2));
    add(m, sy_layer_activation(SY_ACTIVATION_SIGMOID));
    add(m, sy_layer_flatten());
    l = sy_layer_dense(5);
    l.activation = SY_ACTIVATION_RELU;
    l.use_bias = false;
    l.kernel_initializer = sy_init_normal(0.1, 0.2, 3);
    add(m, l);
    l = sy_layer_dropout(0.25f);
    l.seed = 5;
    add(m, l);
    l = sy_layer_dense(3);
    l.activation = SY_ACTIVATION_SOFTMAX;
    l.bias_initializer = (sy_init){SY_INIT_ONES, 0, 0, 0};
    add(m, l);
    check_written("conv_options from C", m, "conv_options.json");
    sy_model_free(m);

    /* conv_family_defaults, from the constructors' defaults (issue 15) */
    CHECK_OK(sy_model_new(NULL, &m));
    l = sy_layer_zero_padding2d(1, 1, 1, 1);
    l.input_shape = sy_shape_of(3, (int64_t)8, (int64_t)7, (int64_t)3);
    add(m, l);
    add(m, sy_layer_depthwise_conv2d(3, 3));
    add(m, sy_layer_separable_conv2d(4, 2, 2));
    add(m, sy_layer_conv2d_transpose(2, 3, 3));
    add(m, sy_layer_cropping2d(2, 2, 2, 2));
    add(m, sy_layer_up_sampling2d(2, 2));
    add(m, sy_layer_global_max_pooling2d());
    check_written("conv_family_defaults from C", m, "conv_family_defaults.json");
    sy_model_free(m);

    /* no input shape: no InputLayer, no build_config */
    CHECK_OK(sy_model_new(NULL, &m));
    add(m, sy_layer_dense(3));
    add(m, sy_layer_dropout(0.1));
    add(m, sy_layer_dense(1));
    check_written("unbuilt from C", m, "unbuilt.json");
    sy_model_free(m);

    /* built later (Keras's model.build): the first layer has no batch_input_shape */
    CHECK_OK(sy_model_new("built_later", &m));
    l = sy_layer_dense(2);
    l.name = "hidden";
    add(m, l);
    add(m, sy_layer_dense(1));
    CHECK_OK(sy_model_build(m, sy_shape_of(1, (int64_t)3)));
    check_written("built from C", m, "built.json");

    /* an initializer Keras has no name for is refused */
    sy_model *u = NULL;
    CHECK_OK(sy_model_new(NULL, &u));
    l = sy_layer_dense(2);
    l.input_shape = sy_shape_of(1, (int64_t)3);
    l.kernel_initializer = (sy_init){SY_INIT_UNIT_FORGET_BIAS, 0, 0, 0};
    add(u, l);
    char *json = NULL;
    CHECK_ERR(sy_model_to_json(u, &json), SY_ERR_UNSUPPORTED, "layer 'dense' (Dense)", "kernel_initializer");
    CHECK(json == NULL, "no JSON on failure");
    sy_model_free(u);
    sy_model_free(m);
}

/* Floats as Python's repr() writes them, strings as json.dumps escapes them. */
static void test_formatting(void) {
    static const struct {
        double value;
        const char *text;
    } reals[] = {{0.1, "0.1"},     {-0.75, "-0.75"},     {1.0, "1.0"},       {123.0, "123.0"},
                 {1e-4, "0.0001"}, {1e-5, "1e-05"},      {1.5e-7, "1.5e-07"}, {1e15, "1000000000000000.0"},
                 {1e16, "1e+16"},  {2.5e100, "2.5e+100"}, {0.0, "0.0"},       {-0.0, "-0.0"},
                 {1.0 / 3, "0.3333333333333333"}, {5e-324, "5e-324"}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        sy_model *m = NULL;
        CHECK_OK(sy_model_new(NULL, &m));
        sy_layer l = sy_layer_dense(1);
        l.input_shape = sy_shape_of(1, (int64_t)1);
        l.bias_initializer = sy_init_constant(reals[i].value);
        add(m, l);
        char *json = NULL, want[64];
        CHECK_OK(sy_model_to_json(m, &json));
        snprintf(want, sizeof want, "{\"value\": %s}", reals[i].text);
        CHECK(json && strstr(json, want), "%.17g should be written %s", reals[i].value, want);
        sy_free(json);
        sy_model_free(m);
    }
    /* the rate, a double as Keras keeps it: written as Python's repr writes it */
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("caf\xc3\xa9 \"\\\t\xf0\x9f\x98\x80", &m));
    sy_layer l = sy_layer_dropout(0.1);
    l.input_shape = sy_shape_of(1, (int64_t)4);
    add(m, l);
    l = sy_layer_dropout(1e-5);
    add(m, l);
    char *json = NULL;
    CHECK_OK(sy_model_to_json(m, &json));
    CHECK(json && strstr(json, "\"rate\": 0.1,") && strstr(json, "\"rate\": 1e-05,"), "float32 rates: %s", json);
    CHECK(json && strstr(json, "\"name\": \"caf\\u00e9 \\\"\\\\\\t\\ud83d\\ude00\""), "escaped name: %.200s", json);
    sy_model *back = NULL;
    if (json) CHECK_OK(sy_model_from_json(json, &back));
    CHECK(back && !strcmp(sy_model_name(back), sy_model_name(m)), "the escaped name reads back");
    sy_model_free(back);
    sy_free(json);
    sy_model_free(m);
}

/* ---- older Keras 2 forms ------------------------------------------------------------------------- */

/* Keras 2.2.4's to_json of the tutorial CNN: no InputLayer (the first
 * layer's batch_input_shape), no module or registered_name, dtype after
 * batch_input_shape, VarianceScaling for glorot_uniform, no groups. */
static const char keras_224[] =
    "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"sequential_1\", \"layers\": ["
    "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"conv2d_1\", \"trainable\": true, \"batch_input_shape\": "
    "[null, 28, 28, 1], \"dtype\": \"float32\", \"filters\": 64, \"kernel_size\": [3, 3], \"strides\": [1, 1], "
    "\"padding\": \"valid\", \"data_format\": \"channels_last\", \"dilation_rate\": [1, 1], \"activation\": "
    "\"linear\", \"use_bias\": true, \"kernel_initializer\": {\"class_name\": \"VarianceScaling\", \"config\": "
    "{\"scale\": 1.0, \"mode\": \"fan_avg\", \"distribution\": \"uniform\", \"seed\": null}}, \"bias_initializer\": "
    "{\"class_name\": \"Zeros\", \"config\": {}}, \"kernel_regularizer\": null, \"bias_regularizer\": null, "
    "\"activity_regularizer\": null, \"kernel_constraint\": null, \"bias_constraint\": null}}, "
    "{\"class_name\": \"MaxPooling2D\", \"config\": {\"name\": \"max_pooling2d_1\", \"trainable\": true, "
    "\"pool_size\": [2, 2], \"padding\": \"valid\", \"strides\": [2, 2], \"data_format\": \"channels_last\"}}, "
    "{\"class_name\": \"Activation\", \"config\": {\"name\": \"activation_1\", \"trainable\": true, \"activation\": "
    "\"relu\"}}, {\"class_name\": \"Flatten\", \"config\": {\"name\": \"flatten_1\", \"trainable\": true, "
    "\"data_format\": \"channels_last\"}}, {\"class_name\": \"Dense\", \"config\": {\"name\": \"dense_1\", "
    "\"trainable\": true, \"units\": 10, \"activation\": \"linear\", \"use_bias\": true, \"kernel_initializer\": "
    "{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 1.0, \"mode\": \"fan_avg\", \"distribution\": "
    "\"uniform\", \"seed\": null}}, \"bias_initializer\": {\"class_name\": \"Zeros\", \"config\": {}}, "
    "\"kernel_regularizer\": null, \"bias_regularizer\": null, \"activity_regularizer\": null, "
    "\"kernel_constraint\": null, \"bias_constraint\": null}}, {\"class_name\": \"Activation\", \"config\": "
    "{\"name\": \"activation_2\", \"trainable\": true, \"activation\": \"softmax\"}}]}, \"keras_version\": "
    "\"2.2.4\", \"backend\": \"tensorflow\"}";

/* Keras 2.0/2.1: the config is the list of layers; initializers by name,
 * a TF 1 GlorotUniform with its dtype, a legacy input_dim. */
static const char keras_20[] =
    "{\"class_name\": \"Sequential\", \"config\": [{\"class_name\": \"Dense\", \"config\": {\"name\": \"dense_1\", "
    "\"input_dim\": 4, \"units\": 8, \"activation\": \"relu\", \"kernel_initializer\": \"he_normal\", "
    "\"bias_initializer\": \"zeros\"}}, {\"class_name\": \"Dropout\", \"config\": {\"name\": \"dropout_1\", \"rate\": "
    "0.5}}, {\"class_name\": \"Dense\", \"config\": {\"name\": \"dense_2\", \"units\": 1, \"activation\": "
    "\"sigmoid\", \"kernel_initializer\": {\"class_name\": \"GlorotUniform\", \"config\": {\"seed\": null, "
    "\"dtype\": \"float32\"}}}}], \"keras_version\": \"2.0.8\", \"backend\": \"tensorflow\"}";

static void test_older_forms(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_from_json(keras_224, &m));
    if (m) {
        CHECK(!strcmp(sy_model_name(m), "sequential_1") && sy_model_layer_count(m) == 6, "Keras 2.2.4's CNN");
        CHECK(sy_model_layer(m, 0)->kernel_initializer.kind == SY_INIT_GLOROT_UNIFORM &&
                  sy_model_layer(m, 4)->kernel_initializer.kind == SY_INIT_GLOROT_UNIFORM,
              "VarianceScaling(1, fan_avg, uniform) is glorot_uniform");
        CHECK(sy_model_find_weight(m, "conv2d_1/kernel:0") == 0 && sy_model_find_weight(m, "dense_1/bias:0") == 3,
              "Keras's weight names from the file's layer names");
        CHECK(sy_model_param_count(m, -1) == 108810, "the tutorial's parameters");
        /* written as 2.15 writes it: the same model as the 2.15 file but for the names */
        char *out = NULL;
        CHECK_OK(sy_model_to_json(m, &out));
        CHECK(out && strstr(out, "\"name\": \"conv2d_1_input\"") && strstr(out, "\"class_name\": \"GlorotUniform\""),
              "written in 2.15's form: %.300s", out);
        sy_free(out);
    }
    sy_model_free(m);
    m = NULL;
    CHECK_OK(sy_model_from_json(keras_20, &m));
    if (m) {
        sy_shape in = sy_model_input_shape(m), want = sy_shape_of(1, (int64_t)4);
        CHECK(sy_shape_equal(&in, &want) && sy_model_layer_count(m) == 3 && !strcmp(sy_model_name(m), "sequential"),
              "Keras 2.0's list of layers");
        CHECK(sy_model_layer(m, 0)->kernel_initializer.kind == SY_INIT_HE_NORMAL &&
                  sy_model_layer(m, 0)->activation == SY_ACTIVATION_RELU && sy_model_layer(m, 1)->rate == 0.5f &&
                  sy_model_layer(m, 2)->activation == SY_ACTIVATION_SIGMOID,
              "initializers by name, arguments absent take Keras's defaults");
    }
    sy_model_free(m);

    /* every VarianceScaling that is a named initializer */
    static const struct {
        const char *config;
        sy_init_kind kind;
    } vs[] = {{"{\"scale\": 1.0, \"mode\": \"fan_avg\", \"distribution\": \"truncated_normal\"}", SY_INIT_GLOROT_NORMAL},
              {"{\"scale\": 2.0, \"mode\": \"fan_in\", \"distribution\": \"uniform\"}", SY_INIT_HE_UNIFORM},
              {"{\"scale\": 2, \"mode\": \"fan_in\", \"distribution\": \"normal\"}", SY_INIT_HE_NORMAL},
              {"{\"scale\": 1.0, \"mode\": \"fan_in\", \"distribution\": \"uniform\", \"seed\": 9}", SY_INIT_LECUN_UNIFORM},
              {"{}", SY_INIT_LECUN_NORMAL}};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        char init[256];
        snprintf(init, sizeof init, "{\"class_name\": \"VarianceScaling\", \"config\": %s}", vs[i].config);
        char *text = mutate("fashion_mnist_cnn.json", 5, "kernel_initializer", init);
        m = NULL;
        CHECK_OK(sy_model_from_json(text, &m));
        CHECK(m && sy_model_layer(m, 4)->kernel_initializer.kind == vs[i].kind, "VarianceScaling %s", vs[i].config);
        sy_model_free(m);
        free(text);
    }

    /* a fixed batch dimension is the batch size's business: accepted, written null */
    char *text = mutate("fashion_mnist_cnn.json", 0, "batch_input_shape", "[1000, 28, 28, 1]");
    m = NULL;
    CHECK_OK(sy_model_from_json(text, &m));
    sy_model_free(m);
    free(text);

    /* an int32 input (keras.Input(dtype="int32")) is kept */
    text = mutate("imdb_lstm.json", 0, "dtype", "\"int32\"");
    m = NULL;
    CHECK_OK(sy_model_from_json(text, &m));
    char *out = NULL;
    if (m) CHECK_OK(sy_model_to_json(m, &out));
    if (out) check_same_json("an int32 input", out, text, false);
    sy_free(out);
    sy_model_free(m);
    free(text);
}

/* ---- refusals ------------------------------------------------------------------------------------ */

typedef struct refusal {
    const char *file;
    int layer;                /* -1: top level, -2: the model's config */
    const char *key, *value;  /* value NULL: the key deleted */
    sy_status status;
    const char *message[3];
} refusal;

static const refusal refusals[] = {
    /* what Keras has and systolic does not, named with the supported values */
    /* the convolution family (issue 15): Keras's own refusals, and what systolic lacks */
    {"conv_options.json", 1, "dilation_rate", "[2, 2]", SY_ERR_INVALID_ARGUMENT,
     {"layer 'features' (Conv2D): `strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
      "strides=(2, 1) and dilation_rate=(2, 2)"}},
    {"fashion_mnist_cnn.json", 1, "groups", "2", SY_ERR_SHAPE,
     {"layer 'conv2d' (Conv2D): The number of input channels must be evenly divisible by the number of groups. "
      "Received groups=2, but the input has 1 channels (full input shape is (None, 28, 28, 1))"}},
    {"fashion_mnist_cnn.json", 1, "groups", "3", SY_ERR_INVALID_ARGUMENT,
     {"The number of filters must be evenly divisible by the number of groups. Received: groups=3, filters=64"}},
    {"conv_family.json", 3, "groups", "2", SY_ERR_UNSUPPORTED,
     {"layer 'depthwise_conv2d' (DepthwiseConv2D): groups 2 is not supported (supported: 1)"}},
    {"conv_family.json", 3, "depthwise_regularizer", "{\"class_name\": \"L2\", \"config\": {}}", SY_ERR_UNSUPPORTED,
     {"depthwise_regularizer"}},
    {"conv_family.json", 3, "depth_multiplier", "0", SY_ERR_INVALID_ARGUMENT, {"depth_multiplier must be an integer from 1"}},
    {"conv_family.json", 4, "pointwise_constraint", "{\"class_name\": \"MaxNorm\", \"config\": {}}", SY_ERR_UNSUPPORTED,
     {"layer 'separable_conv2d' (SeparableConv2D): pointwise_constraint"}},
    {"conv_family.json", 5, "output_padding", "[2, 0]", SY_ERR_INVALID_ARGUMENT,
     {"layer 'conv2d_transpose' (Conv2DTranspose): Strides must be greater than output padding. Received "
      "strides=(2, 3), output_padding=(2, 0)."}},
    {"conv_family.json", 5, "output_padding", "[1]", SY_ERR_INVALID_ARGUMENT, {"output_padding must be null"}},
    {"conv_family.json", 6, "dilation_rate", "[2, 2]", SY_ERR_UNSUPPORTED,
     {"layer 'conv2d_transpose_1' (Conv2DTranspose): dilation_rate (2, 2) and groups 1 are not supported"}},
    {"conv_family.json", 5, "output_padding", "[0, 0]", SY_ERR_SHAPE,
     {"layer 'conv2d_transpose' (Conv2DTranspose): an output of 15 columns from the input (None, 3, 6, 6) is not what "
      "a 3x2 conv with strides (2, 3) and padding 'same' would take back to it; TensorFlow refuses it too"}},
    {"conv_family.json", 1, "padding", "[[1, -1], [0, 0]]", SY_ERR_INVALID_ARGUMENT,
     {"layer 'pad' (ZeroPadding2D): padding must be a non-negative integer, a list of two, or two lists of two, got "
      "[[1, -1], [0, 0]]"}},
    {"conv_family.json", 7, "cropping", "[[5, 5], [0, 0]]", SY_ERR_SHAPE,
     {"layer 'cropping2d' (Cropping2D): cropping ((5, 5), (0, 0)) leaves nothing of the input (None, 7, 18, 3)"}},
    {"conv_family.json", 8, "interpolation", "\"bicubic\"", SY_ERR_UNSUPPORTED,
     {"layer 'up_sampling2d' (UpSampling2D): interpolation \"bicubic\" is not supported (supported: \"nearest\", "
      "\"bilinear\")"}},
    {"conv_family.json", 10, "keepdims", "1", SY_ERR_INVALID_ARGUMENT, {"keepdims must be true or false"}},
    {"conv_family.json", 11, "data_format", "\"channels_first\"", SY_ERR_UNSUPPORTED,
     {"layer 'global_average_pooling2d' (GlobalAveragePooling2D): data_format \"channels_first\""}},
    {"fashion_mnist_cnn.json", 1, "data_format", "\"channels_first\"", SY_ERR_UNSUPPORTED,
     {"data_format \"channels_first\" is not supported (supported: \"channels_last\")"}},
    {"fashion_mnist_cnn.json", 4, "data_format", "\"channels_first\"", SY_ERR_UNSUPPORTED,
     {"layer 'flatten' (Flatten): data_format \"channels_first\""}},
    {"fashion_mnist_cnn.json", 1, "padding", "\"causal\"", SY_ERR_UNSUPPORTED,
     {"padding \"causal\" is not supported (supported: \"valid\", \"same\")"}},
    {"fashion_mnist_cnn.json", 1, "kernel_regularizer",
     "{\"module\": \"keras.regularizers\", \"class_name\": \"OrthogonalRegularizer\", \"config\": {\"factor\": 0.01}}",
     SY_ERR_UNSUPPORTED,
     {"kernel_regularizer {\"module\": \"keras.regularizers\", \"class_name\": \"OrthogonalRegularizer\"",
      "(supported: null, \"l1\", \"l2\", \"l1_l2\", L1, L2, L1L2)"}},
    {"fashion_mnist_cnn.json", 5, "kernel_regularizer", "{\"class_name\": \"L2\", \"config\": {\"l2\": -1}}",
     SY_ERR_INVALID_ARGUMENT, {"l2 must be a number >= 0, got -1"}},
    {"fashion_mnist_cnn.json", 5, "bias_constraint", "{\"class_name\": \"NonNeg\", \"config\": {}}",
     SY_ERR_UNSUPPORTED, {"layer 'dense' (Dense): bias_constraint"}},
    {"fashion_mnist_cnn.json", 3, "activity_regularizer", "{\"class_name\": \"L1\", \"config\": {\"l1\": 0.1}}",
     SY_ERR_UNSUPPORTED, {"layer 'activation' (Activation): activity_regularizer"}},
    {"fashion_mnist_cnn.json", 1, "activation", "\"mish\"", SY_ERR_UNSUPPORTED,
     {"activation \"mish\" is not supported (supported: linear, relu, sigmoid, tanh, softmax, elu, selu, gelu, "
      "swish (silu), softplus, softsign, hard_sigmoid, exponential, relu6)"}},
    {"fashion_mnist_cnn.json", 3, "activation", "\"mish\"", SY_ERR_UNSUPPORTED,
     {"layer 'activation' (Activation): activation \"mish\""}},
    {"fashion_mnist_cnn.json", 1, "kernel_initializer", "{\"class_name\": \"Identity\", \"config\": {\"gain\": 1.0}}",
     SY_ERR_UNSUPPORTED, {"kernel_initializer \"Identity\" is not supported (supported: Zeros, Ones, Constant"}},
    {"fashion_mnist_cnn.json", 1, "kernel_initializer",
     "{\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 3.0, \"mode\": \"fan_sideways\"}}",
     SY_ERR_INVALID_ARGUMENT, {"VarianceScaling(scale=3", "mode one of fan_in, fan_out, fan_avg"}},
    {"fashion_mnist_cnn.json", 1, "dtype", "\"float16\"", SY_ERR_UNSUPPORTED,
     {"dtype policy 'float16' is not supported (supported: \"float32\", \"mixed_bfloat16\")"}},
    {"fashion_mnist_cnn.json", 1, "dtype",
     "{\"module\": \"keras.mixed_precision\", \"class_name\": \"Policy\", \"config\": {\"name\": \"mixed_float16\"}}",
     SY_ERR_UNSUPPORTED, {"dtype policy 'mixed_float16' is not supported"}}, /* issue 16, mixed_bfloat16 */
    {"fashion_mnist_cnn.json", 5, "trainable", "false", SY_ERR_UNSUPPORTED,
     {"layer 'dense' (Dense): trainable false is not supported (supported: true)"}},
    {"fashion_mnist_cnn.json", 0, "sparse", "true", SY_ERR_UNSUPPORTED, {"(InputLayer): sparse true"}},
    {"fashion_mnist_cnn.json", 0, "batch_input_shape", "[null, null, 28, 1]", SY_ERR_UNSUPPORTED,
     {"batch_input_shape [null, null, 28, 1] has unknown dimensions"}},
    {"fashion_mnist_cnn.json", 0, "dtype", "\"string\"", SY_ERR_UNSUPPORTED, {"(InputLayer): dtype \"string\""}},
    /* issue 17, masking: mask_zero true is read now (imdb_bilstm.json, test_masking.c); a value that is no
     * boolean is refused */
    {"imdb_lstm.json", 1, "mask_zero", "1", SY_ERR_INVALID_ARGUMENT, {"mask_zero"}},
    {"imdb_lstm.json", 1, "embeddings_regularizer", "{\"class_name\": \"OrthogonalRegularizer\", \"config\": {}}",
     SY_ERR_UNSUPPORTED, {"embeddings_regularizer"}},
    {"imdb_lstm.json", 2, "stateful", "true", SY_ERR_UNSUPPORTED, {"layer 'lstm' (LSTM): stateful true"}},
    {"imdb_lstm.json", 2, "unroll", "true", SY_ERR_UNSUPPORTED, {"unroll true is not supported (supported: false)"}},
    {"imdb_lstm.json", 2, "time_major", "true", SY_ERR_UNSUPPORTED, {"time_major true"}},
    {"imdb_lstm.json", 2, "return_state", "true", SY_ERR_UNSUPPORTED, {"return_state true"}},
    {"imdb_lstm.json", 2, "recurrent_constraint", "{\"class_name\": \"MaxNorm\", \"config\": {}}", SY_ERR_UNSUPPORTED,
     {"recurrent_constraint"}},
    {"imdb_lstm.json", 2, "bias_initializer", "{\"class_name\": \"Ones\", \"config\": {}}", SY_ERR_UNSUPPORTED,
     {"bias_initializer", "with unit_forget_bias true is not supported"}},
    {"recurrent_options.json", 2, "reset_after", "false", SY_ERR_UNSUPPORTED,
     {"layer 'gru' (GRU): reset_after false is not supported (supported: true)"}},
    {"recurrent_options.json", 1, "recurrent_activation", "\"softmax\"", SY_ERR_UNSUPPORTED,
     {"recurrent_activation 'softmax' is not supported in a recurrent layer", "hard_sigmoid, exponential, relu6"}},
    {"conv_options.json", 8, "noise_shape", "[null, 0]", SY_ERR_INVALID_ARGUMENT,
     {"layer 'dropout' (Dropout): noise_shape [null, 0]: dimensions must be positive integers or null"}},
    /* what Keras refuses too, or what is not Keras's */
    {"fashion_mnist_cnn.json", 1, "foo", "1", SY_ERR_INVALID_ARGUMENT, {"layer 'conv2d' (Conv2D): unknown argument 'foo'"}},
    {"fashion_mnist_cnn.json", 1, "filters", "\"64\"", SY_ERR_INVALID_ARGUMENT,
     {"filters must be an integer from 1 to 2147483647, got \"64\""}},
    {"fashion_mnist_cnn.json", 1, "filters", NULL, SY_ERR_INVALID_ARGUMENT, {"the argument 'filters' is missing"}},
    {"fashion_mnist_cnn.json", 1, "kernel_size", "[3]", SY_ERR_INVALID_ARGUMENT,
     {"kernel_size must be a positive integer or a list of two, got [3]"}},
    {"fashion_mnist_cnn.json", 1, "use_bias", "1", SY_ERR_INVALID_ARGUMENT, {"use_bias must be true or false"}},
    {"fashion_mnist_cnn.json", 1, "name", "5", SY_ERR_INVALID_ARGUMENT, {"name must be a string"}},
    {"fashion_mnist_cnn.json", 1, "kernel_initializer", "[1]", SY_ERR_INVALID_ARGUMENT,
     {"kernel_initializer must be an initializer"}},
    {"fashion_mnist_cnn.json", 1, "kernel_initializer", "{\"class_name\": \"RandomUniform\", \"config\": {\"minval\": \"a\"}}",
     SY_ERR_INVALID_ARGUMENT, {"kernel_initializer RandomUniform: minval must be a number"}},
    {"fashion_mnist_cnn.json", 1, "kernel_initializer", "{\"class_name\": \"Zeros\", \"config\": {\"seed\": 1}}",
     SY_ERR_INVALID_ARGUMENT, {"kernel_initializer Zeros: unknown argument 'seed'"}},
    {"fashion_mnist_cnn.json", 5, "units", "0", SY_ERR_INVALID_ARGUMENT, {"units must be an integer from 1"}},
    {"fashion_mnist_cnn.json", 5, "name", "\"conv2d\"", SY_ERR_INVALID_ARGUMENT,
     {"model JSON: model 'sequential': a layer named 'conv2d' already exists"}},
    {"fashion_mnist_cnn.json", 1, "kernel_size", "[30, 3]", SY_ERR_SHAPE,
     {"model JSON: layer 'conv2d' (Conv2D): the 30x3 kernel does not fit"}},
    {"fashion_mnist_cnn.json", 5, "units", "2147483647", SY_ERR_UNSUPPORTED,
     {"layer 'dense' (Dense): the model's weights would hold more than"}},
    {"fashion_mnist_cnn.json", 0, "batch_input_shape", "[null, 2147483647, 2147483647, 1]", SY_ERR_UNSUPPORTED,
     {"more than 2^40 values per sample"}},
    {"fashion_mnist_cnn.json", 1, "batch_input_shape", "[null, 28, 27, 1]", SY_ERR_INVALID_ARGUMENT,
     {"the input layer's shape (None, 28, 28, 1) and layer 'conv2d''s input shape (None, 28, 27, 1) differ"}},
    {"conv_options.json", 8, "rate", "1.5", SY_ERR_INVALID_ARGUMENT, {"rate must be in [0, 1), got 1.5"}},
    {"conv_options.json", 8, "rate", "1e300", SY_ERR_INVALID_ARGUMENT, {"rate must be in [0, 1)"}},
    {"embedding_options.json", 2, "target_shape", "[5, -1]", SY_ERR_SHAPE, {"layer 'reshape' (Reshape): cannot reshape"}},
    {"embedding_options.json", 2, "target_shape", "[0]", SY_ERR_INVALID_ARGUMENT, {"positive integers or -1"}},
    /* the model */
    {"fashion_mnist_cnn.json", -1, "class_name", "\"Graph\"", SY_ERR_UNSUPPORTED,
     {"model JSON: a \"Graph\" model is not supported; only Sequential models"}},
    {"fashion_mnist_cnn.json", -1, "config", NULL, SY_ERR_INVALID_ARGUMENT, {"\"config\" must be an object"}},
    {"fashion_mnist_cnn.json", -2, "layers", "{}", SY_ERR_INVALID_ARGUMENT, {"must hold \"layers\", a list"}},
    {"fashion_mnist_cnn.json", -2, "layers", "[]", SY_ERR_INVALID_ARGUMENT, {"the model has no layers"}},
    {"fashion_mnist_cnn.json", -2, "layers", "[{\"class_name\": \"Dense\"}]", SY_ERR_INVALID_ARGUMENT,
     {"layer 0 must be an object with \"class_name\""}},
    {"fashion_mnist_cnn.json", -2, "name", "7", SY_ERR_INVALID_ARGUMENT, {"the model's name must be a string"}},
};

static void test_refusals(void) {
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const refusal *r = &refusals[i];
        char *text = mutate(r->file, r->layer, r->key, r->value);
        if (!text) continue;
        sy_model *m = (sy_model *)1;
        sy_status st = sy_model_from_json(text, &m);
        CHECK(st == r->status, "%s with %s = %s: %s instead of %s (%s)", r->file, r->key, r->value ? r->value : "(deleted)",
              sy_status_name(st), sy_status_name(r->status), sy_last_error());
        CHECK(m == NULL, "no model on failure");
        for (int k = 0; k < 3 && r->message[k]; k++)
            CHECK(strstr(sy_last_error(), r->message[k]), "%s with %s = %s: the message should say '%s': %s", r->file,
                  r->key, r->value ? r->value : "(deleted)", r->message[k], sy_last_error());
        sy_model_free(m);
        free(text);
    }

    /* a layer systolic lacks, from Keras's own file */
    char *text = read_text("unsupported_layer.json");
    sy_model *m = NULL;
    if (text)
        CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_UNSUPPORTED,
                  "model JSON: layer 'unit_normalization': UnitNormalization is not supported; supported layers: "
                  "Activation, Add, Average, AveragePooling1D, AveragePooling2D, BatchNormalization, Bidirectional, "
                  "Concatenate, Conv1D, Conv2D, Conv2DTranspose, Cropping2D, Dense, DepthwiseConv2D, Dropout, ELU, "
                  "Embedding, Flatten, GRU, GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalMaxPooling1D, "
                  "GlobalMaxPooling2D, InputLayer, LSTM, LayerNormalization, LeakyReLU, Masking, MaxPooling1D, MaxPooling2D, "
                  "Maximum, Minimum, Multiply, Normalization, PReLU, Permute, ReLU, RepeatVector, Rescaling, Reshape, "
                  "SeparableConv2D, SimpleRNN, Softmax, SpatialDropout1D, SpatialDropout2D, Subtract, "
                  "TimeDistributed, UpSampling2D, ZeroPadding2D");
    free(text);
    text = read_text("unsupported_argument.json");
    if (text)
        CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_UNSUPPORTED,
                  "layer 'conv2d' (Conv2D): data_format \"channels_first\" is not supported (supported: "
                  "\"channels_last\")");
    free(text);
    text = read_text("unbuilt.json");
    if (text) CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "the model has no input shape");
    free(text);
    text = rename_class("fashion_mnist_cnn.json", 2, "Sequential");
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "nested model 'max_pooling2d' (Sequential): \"config\" must "
              "hold \"layers\", a list");
    free(text);
    text = rename_class("fashion_mnist_cnn.json", 3, "InputLayer");
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_UNSUPPORTED, "an InputLayer ('activation') after the first layer");
    free(text);
    text = rename_class("imdb_lstm.json", 2, "ConvLSTM1D"); /* issue 17: SimpleRNN, which this was, is read now */
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_UNSUPPORTED, "layer 'lstm': ConvLSTM1D is not supported; supported layers: Activation");
    free(text);
    CHECK(m == NULL, "no model on failure");
}

/* A model Keras wrote (<name>.json, its to_json(); <name>.summary.txt, its
 * summary()): read, written back byte for byte, summarised byte for byte. */
static void check_keras_model(const char *name) {
    char file[128];
    snprintf(file, sizeof file, "%s.json", name);
    char *keras_json = read_text(file);
    snprintf(file, sizeof file, "%s.summary.txt", name);
    char *keras_summary = read_text(file);
    sy_model *fm = NULL;
    if (keras_json) CHECK_OK(sy_model_from_json(keras_json, &fm));
    if (fm) {
        char *out = NULL;
        CHECK_OK(sy_model_to_json(fm, &out));
        if (out) check_same_json(name, out, keras_json, true);
        sy_free(out);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        sy_model_summary(fm, f);
        fclose(f);
        CHECK(keras_summary && !strcmp(buf, keras_summary), "%s: summary differs from Keras's:\n%s", name, buf);
        free(buf);
        sy_model_free(fm);
    }
    free(keras_json);
    free(keras_summary);
}

/* Functional models: a chain is read, anything else refused. */
static void test_functional(void) {
    json_t *root = read_json("functional_chain.json");
    if (!root) return;
    json_t *layers = json_object_get(json_object_get(root, "config"), "layers");
    sy_model *m = NULL;
    /* out of order in the file: followed through inbound_nodes */
    json_t *copy = json_deep_copy(root), *cl = json_object_get(json_object_get(copy, "config"), "layers");
    json_t *last = json_incref(json_array_get(cl, 3));
    json_array_remove(cl, 3);
    json_array_insert_new(cl, 1, last);
    char *text = json_dumps(copy, 0);
    CHECK_OK(sy_model_from_json(text, &m));
    CHECK(m && !strcmp(sy_model_layer(m, 2)->name, "out") && !strcmp(sy_model_name(m), "chain"),
          "the chain's order, not the file's");
    sy_model_free(m);
    m = NULL;
    free(text);
    json_decref(copy);
    /* a layer fed from two places */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    json_t *nodes = json_object_get(json_array_get(cl, 3), "inbound_nodes");
    json_array_append_new(json_array_get(nodes, 0), json_pack("[s,i,i,{}]", "pixels", 0, 0));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "layer 'out' (Dense) takes one input, called on 2");
    free(text);
    json_decref(copy);
    /* two layers on the input, one leading nowhere */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    json_t *flat_nodes = json_object_get(json_array_get(cl, 2), "inbound_nodes");
    json_array_set_new(json_array_get(json_array_get(flat_nodes, 0), 0), 0, json_string("pixels"));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "layer 'conv2d' does not lead to any output");
    free(text);
    json_decref(copy);
    /* called with keyword arguments */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    nodes = json_object_get(json_array_get(cl, 1), "inbound_nodes");
    json_array_set_new(json_array_get(json_array_get(nodes, 0), 0), 3, json_pack("{s:b}", "training", 0));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_UNSUPPORTED, "call arguments {\"training\": false} are not supported");
    free(text);
    json_decref(copy);
    /* an output that is not the chain's end */
    copy = json_deep_copy(root);
    json_object_set_new(json_object_get(copy, "config"), "output_layers", json_pack("[[s,i,i]]", "flatten", 0, 0));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "layer 'out' does not lead to any output");
    free(text);
    json_decref(copy);
    /* a cycle: conv2d takes its input from out */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    nodes = json_object_get(json_array_get(cl, 1), "inbound_nodes");
    json_array_set_new(json_array_get(json_array_get(nodes, 0), 0), 0, json_string("out"));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "can never be called", "a cycle");
    free(text);
    json_decref(copy);
    /* a name used twice */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    json_object_set_new(json_array_get(cl, 2), "name", json_string("conv2d"));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "the name \"conv2d\" is used 2 times");
    free(text);
    json_decref(copy);
    /* Keras's own non-chain models: JSON byte for byte both ways, summary byte for byte */
    static const char *const dags[] = {"functional_dag", "functional_cnn"};
    for (size_t d = 0; d < sizeof dags / sizeof dags[0]; d++) check_keras_model(dags[d]);
    (void)layers;
    json_decref(root);
    CHECK(m == NULL, "no model on failure");
}

/* issue 15, nested models: Keras's models with a model as a layer (make_nested_json.py), JSON byte for byte
 * both ways and summary byte for byte; the refusals. */
static void test_nested(void) {
    static const char *const nested_cases[] = {"nested_seq_in_fn", "nested_shared_block", "nested_fn_in_seq"};
    for (size_t d = 0; d < sizeof nested_cases / sizeof nested_cases[0]; d++) check_keras_model(nested_cases[d]);
    /* refusals, from Keras's file changed */
    json_t *root = read_json("nested_shared_block.json");
    if (!root) return;
    sy_model *m = NULL;
    json_t *copy = json_deep_copy(root), *cl = json_object_get(json_object_get(copy, "config"), "layers");
    /* the block called on the wrong shape: x is (None, 4), made (None, 7) */
    json_t *x_cfg = json_object_get(json_array_get(cl, 0), "config");
    json_object_set_new(x_cfg, "batch_input_shape", json_pack("[n,i]", 7));
    json_t *d2 = json_object_get(json_array_get(cl, 1), "build_config");
    (void)d2;
    char *text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_SHAPE, "Input 0 of layer \"block\" is incompatible with the layer: "
              "expected shape=(None, 4), found shape=(None, 7)");
    free(text);
    json_decref(copy);
    /* the nested model's name used by an outer layer too */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    json_object_set_new(json_array_get(cl, 1), "name", json_string("block"));
    json_object_set_new(json_object_get(json_array_get(cl, 1), "config"), "name", json_string("block"));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "the name \"block\" is used 2 times");
    free(text);
    json_decref(copy);
    /* node 0 of a nested model is its own: the outer model never makes it */
    copy = json_deep_copy(root);
    cl = json_object_get(json_object_get(copy, "config"), "layers");
    json_t *nodes = json_object_get(json_array_get(cl, 3), "inbound_nodes");
    json_array_set_new(json_array_get(json_array_get(nodes, 0), 0), 1, json_integer(0));
    text = json_dumps(copy, 0);
    CHECK_ERR(sy_model_from_json(text, &m), SY_ERR_INVALID_ARGUMENT, "layer 'add' can never be called");
    free(text);
    json_decref(copy);
    json_decref(root);
    CHECK(m == NULL, "no model on failure");

    /* the C API: a Sequential feature extractor called in a Functional model, then the Functional model added to a
     * Sequential one; a model nested into itself and one built for another shape are refused */
    sy_model *base = NULL, *outer = NULL, *seq = NULL;
    CHECK_OK(sy_model_new("features", &base));
    sy_layer d = sy_layer_dense(8);
    d.input_shape = sy_shape_of(1, (int64_t)6);
    CHECK_OK(sy_model_add(base, &d));
    sy_layer d5 = sy_layer_dense(5);
    CHECK_OK(sy_model_add(base, &d5));
    sy_model *unbuilt = NULL, *two_in = NULL;
    CHECK_OK(sy_model_new("unbuilt", &unbuilt));
    sy_layer plain = sy_layer_dense(2);
    CHECK_OK(sy_model_add(unbuilt, &plain));
    sy_layer not_yet = sy_layer_model(unbuilt);
    CHECK_ERR(sy_model_add(base, &not_yet), SY_ERR_STATE, "model 'unbuilt' is used as a layer before it is built");
    CHECK_OK(sy_model_new_functional("two_in", &two_in));
    int32_t i2[2], o2;
    CHECK_OK(sy_model_input(two_in, sy_shape_of(1, (int64_t)5), NULL, NULL, &i2[0]));
    CHECK_OK(sy_model_input(two_in, sy_shape_of(1, (int64_t)5), NULL, NULL, &i2[1]));
    sy_layer add2 = sy_layer_add();
    CHECK_OK(sy_model_call(two_in, &add2, i2, 2, &o2));
    CHECK_OK(sy_model_set_outputs(two_in, &o2, 1));
    sy_layer several = sy_layer_model(two_in);
    CHECK_ERR(sy_model_add(base, &several), SY_ERR_UNSUPPORTED, "model 'two_in' has 2 inputs and 1 outputs");
    CHECK(sy_model_layer_count(base) == 2, "refused nested models leave the model as it was");
    sy_model_free(unbuilt);
    sy_model_free(two_in);
    sy_layer self = sy_layer_model(base);
    CHECK_ERR(sy_model_add(base, &self), SY_ERR_INVALID_ARGUMENT, "model 'features' cannot be used as a layer of itself");
    CHECK_OK(sy_model_new_functional(NULL, &outer));
    int32_t x, h, y, wrong;
    CHECK_OK(sy_model_input(outer, sy_shape_of(1, (int64_t)6), NULL, NULL, &x));
    CHECK_OK(sy_model_input(outer, sy_shape_of(1, (int64_t)3), "other", NULL, &wrong));
    sy_layer nested = sy_layer_model(base);
    CHECK_ERR(sy_model_call(outer, &nested, &wrong, 1, &h), SY_ERR_SHAPE, "Input 0 of layer \"features\" is incompatible "
              "with the layer: expected shape=(None, 6), found shape=(None, 3)");
    sy_model_free(outer);
    CHECK_OK(sy_model_new_functional(NULL, &outer));
    CHECK_OK(sy_model_input(outer, sy_shape_of(1, (int64_t)6), NULL, NULL, &x));
    CHECK_OK(sy_model_call(outer, &nested, &x, 1, &h));
    sy_layer clash = sy_layer_dense(3);
    clash.name = "features";
    CHECK_ERR(sy_model_call(outer, &clash, &h, 1, &y), SY_ERR_INVALID_ARGUMENT, "a layer named 'features' already exists");
    sy_layer top = sy_layer_dense(3);
    CHECK_OK(sy_model_call(outer, &top, &h, 1, &y));
    CHECK_OK(sy_model_set_outputs(outer, &y, 1));
    sy_model_free(base); /* the outer model holds its own copy */
    CHECK(sy_model_weight_count(outer) == 6 && !strcmp(sy_model_weight_name(outer, 0), "dense/kernel:0") &&
          !strcmp(sy_model_weight_name(outer, 4), "dense/kernel:0") && sy_model_param_count(outer, -1) == 56 + 45 + 18,
          "nested weights: %d, %s", sy_model_weight_count(outer), sy_model_weight_name(outer, 0));
    CHECK(sy_model_find_weight(outer, "features/dense_1/bias") == 3, "a nested weight by its full name");
    CHECK_OK(sy_model_new("seq", &seq));
    sy_layer as_layer = sy_layer_model(outer);
    CHECK_OK(sy_model_add(seq, &as_layer));
    sy_layer last = sy_layer_dense(2);
    CHECK_OK(sy_model_add(seq, &last));
    char *json = NULL;
    CHECK_OK(sy_model_to_json(seq, &json));
    sy_model *back = NULL;
    if (json) CHECK_OK(sy_model_from_json(json, &back));
    char *again = NULL;
    if (back) CHECK_OK(sy_model_to_json(back, &again));
    CHECK(json && again && !strcmp(json, again), "a twice-nested model's JSON read back differs");
    CHECK(back && sy_model_param_count(back, -1) == 119 + 8, "params of the twice-nested model");
    sy_free(json);
    sy_free(again);
    sy_model_free(back);
    sy_model_free(seq);
    sy_model_free(outer);
}

/* ---- broken JSON ------------------------------------------------------------------------------------ */

static void test_malformed(void) {
    sy_model *m = NULL;
    CHECK_ERR(sy_model_from_json("{\n  \"class_name\": \"Sequential\",\n  \"config\": {\n    \"name\": x\n  }\n}", &m),
              SY_ERR_INVALID_ARGUMENT, "model JSON, line 4 column");
    CHECK_ERR(sy_model_from_json("", &m), SY_ERR_INVALID_ARGUMENT, "model JSON, line 1 column");
    CHECK_ERR(sy_model_from_json("[1, 2]", &m), SY_ERR_INVALID_ARGUMENT, "expected an object (model.to_json()), got [1, 2]");
    CHECK_ERR(sy_model_from_json("{\"class_name\": 3}", &m), SY_ERR_INVALID_ARGUMENT, "\"class_name\" must be a string");
    CHECK_ERR(sy_model_from_json(NULL, &m), SY_ERR_INVALID_ARGUMENT, "model JSON");
    CHECK(m == NULL, "no model on failure");
    /* every proper prefix of a file fails cleanly */
    char *text = read_text("recurrent_options.json");
    size_t n = text ? strlen(text) : 0;
    int wrong = 0;
    for (size_t k = 0; k < n; k++) {
        sy_model *p = NULL;
        if (keras_model_from_json_bytes(text, k, 1 << 20, &p) == SY_OK || p) wrong++;
        sy_model_free(p);
    }
    CHECK(wrong == 0, "%d prefixes of recurrent_options.json were read as models", wrong);
    free(text);
    /* the size limit, before anything is allocated */
    text = read_text("imdb_lstm.json");
    if (text)
        CHECK_ERR(keras_model_from_json_bytes(text, strlen(text), 100000, &m), SY_ERR_UNSUPPORTED,
                  "layer 'embedding' (Embedding): the model's weights would hold more than 100000 values");
    free(text);
}

int main(void) {
    test_keras_files();
    test_fields();
    test_builtins();
    test_c_models();
    test_formatting();
    test_older_forms();
    test_refusals();
    test_functional();
    test_nested(); /* issue 15, nested models */
    test_malformed();
    return check_report("test_config");
}
