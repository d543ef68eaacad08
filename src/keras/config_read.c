/*
 * config_read.c - Keras's model JSON, read: model_from_json()
 * (config.c writes it).
 *
 * Reading takes the to_json() output of Keras 2.x: 2.15's, and the older
 * forms (no "module"/"registered_name", no InputLayer but a
 * batch_input_shape on the first layer, the layers as the whole config as
 * Keras 2.0 and 2.1 wrote them, initializers as {"class_name", "config"}
 * or a name, glorot_uniform and friends as VarianceScaling), and
 * Functional models (read_functional: inbound_nodes, input_layers,
 * output_layers, as keras.Model.from_config rebuilds them; a cycle, a
 * layer that leads to no output, a tensor index other than 0 or call
 * keyword arguments are refused naming the layer). A key that is absent
 * takes Keras 2.15's default. Every argument either maps to a sy_layer
 * field or must hold a value systolic implements; anything else is refused
 * naming the layer, the argument, its value (keras_json_show) and what is
 * supported, as is a layer class systolic lacks (with the list of those it
 * has) and an unknown argument. Invalid JSON is refused with jansson's
 * line and column. Refusals are SY_ERR_UNSUPPORTED for what Keras accepts
 * and systolic does not, SY_ERR_INVALID_ARGUMENT for everything else
 * (syntax, types, missing arguments, values Keras refuses too).
 */
#include "keras_config.h"

#include "../core/core_internal.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Per-sample values of any layer's output and values of any weight: past
 * this the sizes could overflow int64 arithmetic further on (2^40 floats
 * are 4 TiB, far past what any model here can hold). */
#define SIZE_LIMIT ((int64_t)1 << 40)

/* ==== reading ===================================================================== */

static const char SUPPORTED_ACTIVATIONS[] = KERAS_ACTIVATION_NAMES;


sy_status rd_err(const rd *r, sy_status st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sy_error(st, "model JSON: layer '%s' (%s): %s", r->name, r->cls, msg);
}

json_t *rd_get(const rd *r, const char *key) { return json_object_get(r->cfg, key); }

/* An integer argument in [lo, hi]; `def` when absent (required: no default). */
sy_status rd_int(const rd *r, const char *key, bool required, int64_t def, int64_t lo, int64_t hi,
                        int64_t *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        if (required) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument '%s' is missing", key);
        *out = def;
        return SY_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be an integer from %lld to %lld, got %s", key,
                      (long long)lo, (long long)hi, keras_json_show(v).s);
    *out = json_integer_value(v);
    return SY_OK;
}

sy_status rd_i32(const rd *r, const char *key, bool required, int32_t def, int32_t lo, int32_t *out) {
    int64_t v = 0;
    sy_status st = rd_int(r, key, required, def, lo, INT32_MAX, &v);
    if (!st) *out = (int32_t)v;
    return st;
}

/* A pair of positive integers: an integer n (n, n) or a list of two. */
sy_status rd_pair(const rd *r, const char *key, bool required, int32_t def, int32_t out[2]) {
    json_t *v = rd_get(r, key);
    if (!v) {
        if (required) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument '%s' is missing", key);
        out[0] = out[1] = def;
        return SY_OK;
    }
    json_t *a = json_is_array(v) && json_array_size(v) == 2 ? json_array_get(v, 0) : v;
    json_t *b = json_is_array(v) && json_array_size(v) == 2 ? json_array_get(v, 1) : v;
    if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 1 || json_integer_value(a) > INT32_MAX ||
        json_integer_value(b) < 1 || json_integer_value(b) > INT32_MAX)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be a positive integer or a list of two, got %s", key,
                      keras_json_show(v).s);
    out[0] = (int32_t)json_integer_value(a);
    out[1] = (int32_t)json_integer_value(b);
    return SY_OK;
}

sy_status rd_bool(const rd *r, const char *key, bool def, bool *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        *out = def;
        return SY_OK;
    }
    if (!json_is_boolean(v)) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be true or false, got %s", key, keras_json_show(v).s);
    *out = json_is_true(v);
    return SY_OK;
}

/* A boolean that must hold `want` (absent: Keras's default, which is want). */
sy_status rd_bool_only(const rd *r, const char *key, bool want) {
    bool b = want;
    sy_status st = rd_bool(r, key, want, &b);
    if (!st && b != want)
        return rd_err(r, SY_ERR_UNSUPPORTED, "%s %s is not supported (supported: %s)", key, b ? "true" : "false",
                      want ? "true" : "false");
    return st;
}

sy_status rd_float(const rd *r, const char *key, bool required, float def, float *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        if (required) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument '%s' is missing", key);
        *out = def;
        return SY_OK;
    }
    if (!json_is_number(v)) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be a number, got %s", key, keras_json_show(v).s);
    double d = json_number_value(v);
    *out = fabs(d) <= FLT_MAX ? (float)d : d > 0 ? INFINITY : -INFINITY; /* out of range: the layer refuses it */
    return SY_OK;
}

/* An argument that must be absent or null (regularizers, constraints, ...). */
sy_status rd_null(const rd *r, const char *key) {
    json_t *v = rd_get(r, key);
    if (v && !json_is_null(v)) return rd_err(r, SY_ERR_UNSUPPORTED, "%s %s is not supported (supported: null)", key, keras_json_show(v).s);
    return SY_OK;
}

sy_status rd_nulls(const rd *r, const char *const *keys) {
    for (; *keys; keys++) {
        sy_status st = rd_null(r, *keys);
        if (st) return st;
    }
    return SY_OK;
}

sy_status rd_data_format(const rd *r) {
    json_t *v = rd_get(r, "data_format");
    if (!v || json_is_null(v) || (json_is_string(v) && !strcmp(json_string_value(v), "channels_last"))) return SY_OK;
    if (!json_is_string(v))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "data_format must be a string, got %s", keras_json_show(v).s);
    return rd_err(r, SY_ERR_UNSUPPORTED, "data_format %s is not supported (supported: \"channels_last\")", keras_json_show(v).s);
}

sy_status rd_padding(const rd *r, sy_padding *out) {
    json_t *v = rd_get(r, "padding");
    const char *s = v && json_is_string(v) ? json_string_value(v) : NULL;
    if (!v) s = "valid";
    if (!s) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "padding must be a string, got %s", keras_json_show(v).s);
    if (!strcasecmp(s, "valid")) *out = SY_PADDING_VALID;
    else if (!strcasecmp(s, "same")) *out = SY_PADDING_SAME;
    else return rd_err(r, SY_ERR_UNSUPPORTED, "padding %s is not supported (supported: \"valid\", \"same\")", keras_json_show(v).s);
    return SY_OK;
}

/* Keras's activation argument: a name, null (linear), or the
 * {"class_name": "function", "config": NAME} of Keras's newer serializer. */
sy_status rd_activation(const rd *r, const char *key, sy_activation def, bool required, sy_activation *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        if (required) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument '%s' is missing", key);
        *out = def;
        return SY_OK;
    }
    json_t *name = v;
    if (json_is_object(v) && json_is_string(json_object_get(v, "config")) &&
        json_is_string(json_object_get(v, "class_name")) &&
        !strcmp(json_string_value(json_object_get(v, "class_name")), "function"))
        name = json_object_get(v, "config");
    if (json_is_null(name)) {
        *out = SY_ACTIVATION_LINEAR;
        return SY_OK;
    }
    if (!json_is_string(name) || sy_activation_from_name(json_string_value(name), out)) {
        sy_clear_error();
        return rd_err(r, json_is_string(name) || json_is_object(name) ? SY_ERR_UNSUPPORTED : SY_ERR_INVALID_ARGUMENT,
                      "%s %s is not supported (supported: %s)", key, keras_json_show(v).s, SUPPORTED_ACTIVATIONS);
    }
    return SY_OK;
}

/* ---- initializers ------------------------------------------------------------------ */

enum { P_NONE, P_VALUE, P_MINMAX, P_MEANSTD, P_GAIN, P_VARIANCE };

typedef struct init_class {
    const char *cls, *alias; /* Keras's class name and its snake_case name */
    sy_init_kind kind;
    int params;
    double a, b; /* defaults */
    bool seeded;
} init_class;

static const init_class init_classes[] = {
    {"Zeros", "zeros", SY_INIT_ZEROS, P_NONE, 0, 0, false},
    {"Ones", "ones", SY_INIT_ONES, P_NONE, 0, 0, false},
    {"Constant", "constant", SY_INIT_CONSTANT, P_VALUE, 0, 0, false},
    {"RandomUniform", "random_uniform", SY_INIT_UNIFORM, P_MINMAX, -0.05, 0.05, true},
    {"RandomNormal", "random_normal", SY_INIT_NORMAL, P_MEANSTD, 0, 0.05, true},
    {"TruncatedNormal", "truncated_normal", SY_INIT_TRUNCATED_NORMAL, P_MEANSTD, 0, 0.05, true},
    {"GlorotUniform", "glorot_uniform", SY_INIT_GLOROT_UNIFORM, P_NONE, 0, 0, true},
    {"GlorotNormal", "glorot_normal", SY_INIT_GLOROT_NORMAL, P_NONE, 0, 0, true},
    {"HeUniform", "he_uniform", SY_INIT_HE_UNIFORM, P_NONE, 0, 0, true},
    {"HeNormal", "he_normal", SY_INIT_HE_NORMAL, P_NONE, 0, 0, true},
    {"LecunUniform", "lecun_uniform", SY_INIT_LECUN_UNIFORM, P_NONE, 0, 0, true},
    {"LecunNormal", "lecun_normal", SY_INIT_LECUN_NORMAL, P_NONE, 0, 0, true},
    {"Orthogonal", "orthogonal", SY_INIT_ORTHOGONAL, P_GAIN, 1.0, 0, true},
    {"VarianceScaling", "variance_scaling", SY_INIT_GLOROT_UNIFORM, P_VARIANCE, 1.0, 0, true},
    /* Keras's other aliases */
    {"RandomUniform", "uniform", SY_INIT_UNIFORM, P_MINMAX, -0.05, 0.05, true},
    {"RandomNormal", "normal", SY_INIT_NORMAL, P_MEANSTD, 0, 0.05, true},
    {"Zeros", "zero", SY_INIT_ZEROS, P_NONE, 0, 0, false},
    {"Ones", "one", SY_INIT_ONES, P_NONE, 0, 0, false},
};

static const char SUPPORTED_INITS[] =
    "Zeros, Ones, Constant, RandomUniform, RandomNormal, TruncatedNormal, GlorotUniform, GlorotNormal, HeUniform, "
    "HeNormal, LecunUniform, LecunNormal, Orthogonal, VarianceScaling";

static sy_status init_number(const rd *r, const char *key, const char *cls, json_t *cfg, const char *arg, double def,
                             double *out) {
    json_t *v = json_object_get(cfg, arg);
    if (!v || json_is_null(v)) {
        *out = def;
        return SY_OK;
    }
    if (!json_is_number(v))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s %s: %s must be a number, got %s", key, cls, arg, keras_json_show(v).s);
    *out = json_number_value(v);
    return SY_OK;
}

/* VarianceScaling(scale, mode, distribution) as the named initializer it is. */
static sy_status variance_scaling(const rd *r, const char *key, json_t *cfg, sy_init *out) {
    double scale = 1.0;
    sy_status st = init_number(r, key, "VarianceScaling", cfg, "scale", 1.0, &scale);
    if (st) return st;
    json_t *mv = json_object_get(cfg, "mode"), *dv = json_object_get(cfg, "distribution");
    const char *mode = !mv || json_is_null(mv) ? "fan_in" : json_is_string(mv) ? json_string_value(mv) : NULL;
    const char *dist = !dv || json_is_null(dv) ? "truncated_normal" : json_is_string(dv) ? json_string_value(dv) : NULL;
    if (!mode || !dist)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s VarianceScaling: mode and distribution must be strings", key);
    bool uniform = !strcmp(dist, "uniform"), normal = !strcmp(dist, "truncated_normal") || !strcmp(dist, "normal");
    int which = !strcmp(mode, "fan_avg") && scale == 1.0  ? 0
                : !strcmp(mode, "fan_in") && scale == 2.0 ? 1
                : !strcmp(mode, "fan_in") && scale == 1.0 ? 2
                                                          : -1;
    /* issue 15: any other VarianceScaling (EfficientNet's scale 2 with fan_out), kept as written */
    int m = !strcmp(mode, "fan_in") ? 0 : !strcmp(mode, "fan_out") ? 1 : !strcmp(mode, "fan_avg") ? 2 : -1;
    int d = normal ? 0 : !strcmp(dist, "untruncated_normal") ? 1 : uniform ? 2 : -1;
    if (m < 0 || d < 0 || !(scale > 0))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                      "%s VarianceScaling(scale=%g, mode=%s, distribution=%s): scale must be positive, mode one of "
                      "fan_in, fan_out, fan_avg, distribution one of truncated_normal, untruncated_normal, uniform",
                      key, scale, keras_json_show(mv).s, keras_json_show(dv).s);
    if (which < 0 || d == 1) {
        out->kind = SY_INIT_VARIANCE_SCALING;
        out->a = scale;
        out->b = m + 3 * d;
        return SY_OK;
    }
    static const sy_init_kind kinds[3][2] = {{SY_INIT_GLOROT_UNIFORM, SY_INIT_GLOROT_NORMAL},
                                             {SY_INIT_HE_UNIFORM, SY_INIT_HE_NORMAL},
                                             {SY_INIT_LECUN_UNIFORM, SY_INIT_LECUN_NORMAL}};
    out->kind = kinds[which][normal];
    return SY_OK;
}

/* An initializer argument: Keras's {"class_name", "config"} (with or
 * without module and registered_name), a name, or null (Keras then uses
 * glorot_uniform). */
sy_status rd_init(const rd *r, const char *key, sy_init def, sy_init *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        *out = def;
        return SY_OK;
    }
    if (json_is_null(v)) {
        *out = sy_init_glorot_uniform(0);
        return SY_OK;
    }
    json_t *cn = json_is_object(v) ? json_object_get(v, "class_name") : v;
    json_t *cfg = json_is_object(v) ? json_object_get(v, "config") : NULL;
    if (!json_is_string(cn) || (cfg && !json_is_object(cfg) && !json_is_null(cfg)))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                      "%s must be an initializer ({\"class_name\": ..., \"config\": {...}} or a name), got %s", key,
                      keras_json_show(v).s);
    const char *name = json_string_value(cn);
    const init_class *c = NULL;
    for (size_t i = 0; i < sizeof init_classes / sizeof init_classes[0] && !c; i++)
        if (!strcmp(name, init_classes[i].cls) || !strcmp(name, init_classes[i].alias)) c = &init_classes[i];
    if (!c) return rd_err(r, SY_ERR_UNSUPPORTED, "%s %s is not supported (supported: %s)", key, keras_json_show(cn).s, SUPPORTED_INITS);
    /* the config's keys: the class's arguments, seed, and the dtype older versions wrote */
    static const char *const args[][4] = {[P_NONE] = {NULL}, [P_VALUE] = {"value", NULL},
                                          [P_MINMAX] = {"minval", "maxval", NULL},
                                          [P_MEANSTD] = {"mean", "stddev", NULL}, [P_GAIN] = {"gain", NULL},
                                          [P_VARIANCE] = {"scale", "mode", "distribution", NULL}};
    const char *k;
    json_t *x;
    if (json_is_object(cfg)) {
        json_object_foreach(cfg, k, x) {
            bool known = (c->seeded && !strcmp(k, "seed")) || !strcmp(k, "dtype");
            for (int i = 0; args[c->params][i] && !known; i++) known = !strcmp(k, args[c->params][i]);
            if (!known) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s %s: unknown argument '%s'", key, c->cls, k);
        }
    }
    json_t *dt = cfg ? json_object_get(cfg, "dtype") : NULL;
    if (dt && !json_is_null(dt) && !(json_is_string(dt) && !strcmp(json_string_value(dt), "float32")))
        return rd_err(r, SY_ERR_UNSUPPORTED, "%s %s: dtype %s is not supported (supported: \"float32\")", key, c->cls,
                      keras_json_show(dt).s);
    sy_init in = {c->kind, c->a, c->b, 0};
    sy_status st = SY_OK;
    switch (c->params) {
    case P_VALUE: st = init_number(r, key, c->cls, cfg, "value", c->a, &in.a); break;
    case P_MINMAX:
        if (!(st = init_number(r, key, c->cls, cfg, "minval", c->a, &in.a)))
            st = init_number(r, key, c->cls, cfg, "maxval", c->b, &in.b);
        break;
    case P_MEANSTD:
        if (!(st = init_number(r, key, c->cls, cfg, "mean", c->a, &in.a)))
            st = init_number(r, key, c->cls, cfg, "stddev", c->b, &in.b);
        break;
    case P_GAIN: st = init_number(r, key, c->cls, cfg, "gain", c->a, &in.a); break;
    case P_VARIANCE: st = variance_scaling(r, key, cfg, &in); break;
    default: break;
    }
    if (st) return st;
    json_t *seed = cfg ? json_object_get(cfg, "seed") : NULL;
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s %s: seed must be an integer or null, got %s", key, c->cls,
                      keras_json_show(seed).s);
    in.seed = seed && json_is_integer(seed) ? (uint64_t)json_integer_value(seed) : 0;
    *out = in;
    return SY_OK;
}

/* ---- shapes ---------------------------------------------------------------------- */

/* A shape given as a JSON list: with the batch axis first (batch_input_shape,
 * whose batch may be null or a number, ignored) or without. *known is false
 * when a dimension is null (unknown: shapes here are static). */
sy_status rd_shape(const rd *r, const char *key, json_t *v, bool batch, sy_shape *out, bool *known) {
    memset(out, 0, sizeof *out);
    *known = true;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    size_t first = batch ? 1 : 0;
    if (!json_is_array(v) || n < first + 1 || n - first >= SY_MAX_RANK)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be a list of 1 to %d dimensions%s, got %s", key,
                      SY_MAX_RANK - 1, batch ? " after the batch's" : "", keras_json_show(v).s);
    if (batch) {
        json_t *b = json_array_get(v, 0);
        if (!json_is_null(b) && !(json_is_integer(b) && json_integer_value(b) > 0))
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s: the batch dimension must be null or positive, got %s", key,
                          keras_json_show(v).s);
    }
    int64_t count = 1;
    for (size_t i = first; i < n; i++) {
        json_t *d = json_array_get(v, i);
        if (json_is_null(d)) {
            *known = false;
            continue;
        }
        if (!json_is_integer(d) || json_integer_value(d) < 1 || json_integer_value(d) > INT32_MAX)
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s %s: dimensions must be positive integers (or null)", key,
                          keras_json_show(v).s);
        out->dims[out->rank] = json_integer_value(d);
        if (__builtin_mul_overflow(count, out->dims[out->rank], &count) || count > SIZE_LIMIT)
            return rd_err(r, SY_ERR_UNSUPPORTED, "%s %s: more than 2^40 values per sample are not supported", key,
                          keras_json_show(v).s);
        out->rank++;
    }
    if (!*known) out->rank = 0;
    return SY_OK;
}

/* ---- layers ------------------------------------------------------------------------- */

/* What every layer takes besides its own arguments (Keras's base Layer). */
static const char *const common_keys[] = {"name",    "trainable", "dtype",   "batch_input_shape",    "input_shape",
                                          "batch_size", "weights", "autocast", "activity_regularizer", NULL};

typedef struct layer_kind_info {
    const char *cls;
    sy_layer_kind kind;
    const char *const keys[28]; /* its own arguments (Keras 2.x's get_config) */
} layer_kind_info;

static const layer_kind_info kinds[] = {
    {"Dense", SY_LAYER_DENSE,
     {"units", "activation", "use_bias", "kernel_initializer", "bias_initializer", "kernel_regularizer",
      "bias_regularizer", "kernel_constraint", "bias_constraint", "input_dim", NULL}},
    {"MaxPooling2D", SY_LAYER_MAX_POOLING2D, {"pool_size", "strides", "padding", "data_format", "input_dim", NULL}},
    {"AveragePooling2D", SY_LAYER_AVERAGE_POOLING2D,
     {"pool_size", "strides", "padding", "data_format", "input_dim", NULL}},
    {"Activation", SY_LAYER_ACTIVATION, {"activation", "input_dim", NULL}},
    {"Flatten", SY_LAYER_FLATTEN, {"data_format", "input_dim", NULL}},
    {"Reshape", SY_LAYER_RESHAPE, {"target_shape", "input_dim", NULL}},
    {"Dropout", SY_LAYER_DROPOUT, {"rate", "noise_shape", "seed", "input_dim", NULL}},
    {"Embedding", SY_LAYER_EMBEDDING,
     {"input_dim", "output_dim", "embeddings_initializer", "embeddings_regularizer", "embeddings_constraint",
      "mask_zero", "input_length", "sparse", NULL}},
    {"LSTM", SY_LAYER_LSTM,
     {"units", "activation", "recurrent_activation", "use_bias", "kernel_initializer", "recurrent_initializer",
      "bias_initializer", "unit_forget_bias", "kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
      "kernel_constraint", "recurrent_constraint", "bias_constraint", "dropout", "recurrent_dropout",
      "implementation", "return_sequences", "return_state", "go_backwards", "stateful", "unroll", "time_major",
      "input_dim", NULL}},
    {"GRU", SY_LAYER_GRU,
     {"units", "activation", "recurrent_activation", "use_bias", "kernel_initializer", "recurrent_initializer",
      "bias_initializer", "kernel_regularizer", "recurrent_regularizer", "bias_regularizer", "kernel_constraint",
      "recurrent_constraint", "bias_constraint", "dropout", "recurrent_dropout", "implementation", "reset_after",
      "return_sequences", "return_state", "go_backwards", "stateful", "unroll", "time_major", "input_dim", NULL}},
};

static bool in_list(const char *const *list, const char *key) {
    for (; *list; list++)
        if (!strcmp(*list, key)) return true;
    return false;
}

/* The dtype argument: null, a policy's name, or a Policy (issue 16, mixed_bfloat16: dtype_policy.c). */
static sy_status rd_dtype(const rd *r, sy_layer *l) { return keras_policy_read(r, rd_get(r, "dtype"), &l->dtype_policy); }

/* The arguments every kind shares: trainable, dtype, the input shape a first
 * layer may carry (batch_input_shape, input_shape, or Dense's legacy
 * input_dim), weights, autocast. */
static sy_status rd_common(const rd *r, sy_layer_kind kind, sy_layer *l) {
    sy_status st;
    if ((st = rd_bool_only(r, "trainable", true)) || (st = rd_dtype(r, l)) || (st = rd_null(r, "weights")))
        return st;
    /* issue 15: an activity regularizer on the kinds whose config holds one */
    if (kind == SY_LAYER_DENSE || kind == SY_LAYER_CONV2D || kind == SY_LAYER_EMBEDDING)
        st = rd_regularizer(r, "activity_regularizer", &l->activity_regularizer);
    else st = rd_null(r, "activity_regularizer");
    if (st) return st;
    bool b;
    if ((st = rd_bool(r, "autocast", true, &b))) return st;
    json_t *bs = rd_get(r, "batch_size");
    if (bs && !json_is_null(bs) && !(json_is_integer(bs) && json_integer_value(bs) > 0))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "batch_size must be a positive integer or null, got %s", keras_json_show(bs).s);
    json_t *v = rd_get(r, "batch_input_shape");
    bool batch = true;
    if (!v || json_is_null(v)) v = rd_get(r, "input_shape"), batch = false;
    if (v && !json_is_null(v)) {
        bool known;
        if ((st = rd_shape(r, batch ? "batch_input_shape" : "input_shape", v, batch, &l->input_shape, &known)))
            return st;
    } else if (kind != SY_LAYER_EMBEDDING && rd_get(r, "input_dim")) {
        int64_t d;
        if ((st = rd_int(r, "input_dim", false, 0, 1, INT32_MAX, &d))) return st;
        l->input_shape = sy_shape_of(1, d);
    }
    return SY_OK;
}

static sy_status rd_dense(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_constraint", "bias_constraint", NULL};
    sy_status st;
    if ((st = rd_i32(r, "units", true, 0, 1, &l->units)) ||
        (st = rd_activation(r, "activation", SY_ACTIVATION_LINEAR, false, &l->activation)) ||
        (st = rd_bool(r, "use_bias", true, &l->use_bias)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)) ||
        (st = rd_init(r, "bias_initializer", l->bias_initializer, &l->bias_initializer)) ||
        (st = rd_regularizer(r, "kernel_regularizer", &l->kernel_regularizer)) ||
        (st = rd_regularizer(r, "bias_regularizer", &l->bias_regularizer)))
        return st;
    return rd_nulls(r, nulls);
}

static sy_status rd_pooling(const rd *r, sy_layer *l) {
    sy_status st;
    if ((st = rd_pair(r, "pool_size", false, 2, l->pool_size)) || (st = rd_padding(r, &l->padding)) ||
        (st = rd_data_format(r)))
        return st;
    json_t *s = rd_get(r, "strides");
    if (!s || json_is_null(s)) l->strides[0] = l->strides[1] = 0; /* the pool size */
    else if ((st = rd_pair(r, "strides", false, 0, l->strides))) return st;
    return SY_OK;
}

static sy_status rd_activation_layer(const rd *r, sy_layer *l) {
    return rd_activation(r, "activation", SY_ACTIVATION_LINEAR, true, &l->activation);
}

static sy_status rd_flatten(const rd *r, sy_layer *l) {
    (void)l;
    return rd_data_format(r);
}

static sy_status rd_reshape(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "target_shape");
    if (!v) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument 'target_shape' is missing");
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 1 || n >= SY_MAX_RANK)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "target_shape must be a list of 1 to %d dimensions, got %s",
                      SY_MAX_RANK - 1, keras_json_show(v).s);
    int64_t count = 1;
    l->target_shape.rank = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(v, i);
        json_int_t x = json_is_integer(d) ? json_integer_value(d) : 0;
        if (!json_is_integer(d) || x == 0 || x < -1 || x > INT32_MAX)
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "target_shape %s: dimensions must be positive integers or -1",
                          keras_json_show(v).s);
        l->target_shape.dims[i] = x;
        if (x > 0 && (__builtin_mul_overflow(count, (int64_t)x, &count) || count > SIZE_LIMIT))
            return rd_err(r, SY_ERR_UNSUPPORTED, "target_shape %s: more than 2^40 values are not supported", keras_json_show(v).s);
    }
    return SY_OK;
}

sy_status rd_seed(const rd *r, uint64_t *out) {
    json_t *v = rd_get(r, "seed");
    if (v && !json_is_null(v) && !json_is_integer(v))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "seed must be an integer or null, got %s", keras_json_show(v).s);
    *out = v && json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
    return SY_OK;
}

/* ---- issue 15: regularizers, number lists, Dropout's noise_shape -------------------- */

sy_status rd_regularizer(const rd *r, const char *key, sy_regularizer *out) {
    json_t *v = rd_get(r, key);
    memset(out, 0, sizeof *out);
    if (!v || json_is_null(v)) return SY_OK;
    const char *cls = json_is_string(v) ? json_string_value(v) : NULL;
    json_t *cfg = NULL;
    if (json_is_object(v)) {
        json_t *c = json_object_get(v, "class_name");
        cls = json_is_string(c) ? json_string_value(c) : NULL;
        cfg = json_object_get(v, "config");
        if (cfg && !json_is_object(cfg)) cls = NULL;
    }
    bool string = json_is_string(v);
    if (cls && (!strcmp(cls, "L1") || !strcmp(cls, "l1"))) *out = sy_regularizer_l1(0.01f);
    else if (cls && (!strcmp(cls, "L2") || !strcmp(cls, "l2"))) *out = sy_regularizer_l2(0.01f);
    else if (cls && (!strcmp(cls, "L1L2") || !strcmp(cls, "l1_l2")))
        *out = string ? sy_regularizer_l1_l2(0.01f, 0.01f) : sy_regularizer_l1_l2(0, 0); /* the function l1_l2() or the class */
    else
        return rd_err(r, json_is_string(v) || json_is_object(v) ? SY_ERR_UNSUPPORTED : SY_ERR_INVALID_ARGUMENT,
                      "%s %s is not supported (supported: null, \"l1\", \"l2\", \"l1_l2\", L1, L2, L1L2)", key,
                      keras_json_show(v).s);
    const char *const names[] = {"l1", "l2"};
    float *fields[] = {&out->l1, &out->l2};
    const char *k;
    json_t *x;
    json_object_foreach(cfg, k, x) {
        int i = !strcmp(k, "l1") ? 0 : !strcmp(k, "l2") ? 1 : -1;
        if (i < 0 || (out->kind == SY_REGULARIZER_L1 && i == 1) || (out->kind == SY_REGULARIZER_L2 && i == 0))
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s %s: unknown argument '%s'", key, keras_json_show(v).s, k);
        if (!json_is_number(x) || !(json_number_value(x) >= 0) || json_number_value(x) > FLT_MAX)
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s %s: %s must be a number >= 0, got %s", key,
                          keras_json_show(v).s, names[i], keras_json_show(x).s);
        *fields[i] = (float)json_number_value(x); /* float32, as Keras's cast_to_floatx */
    }
    return SY_OK;
}

sy_status rd_numbers(const rd *r, const char *key, sy_numbers def, sy_numbers *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        *out = def;
        return SY_OK;
    }
    memset(out, 0, sizeof *out);
    out->list = json_is_array(v);
    size_t n = out->list ? json_array_size(v) : 1;
    if (n < 1 || n > SY_NUMBERS_MAX)
        return rd_err(r, out->list ? SY_ERR_UNSUPPORTED : SY_ERR_INVALID_ARGUMENT,
                      "%s %s: a number or a list of 1 to %d numbers is supported", key, keras_json_show(v).s,
                      SY_NUMBERS_MAX);
    for (size_t i = 0; i < n; i++) {
        json_t *x = out->list ? json_array_get(v, i) : v;
        if (!json_is_number(x) || !isfinite(json_number_value(x)))
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be a number or a list of numbers, got %s", key,
                          keras_json_show(v).s);
        out->v[i] = json_number_value(x);
        if (json_is_integer(x)) out->integer |= 1u << i;
    }
    out->n = (int32_t)n;
    return SY_OK;
}

static sy_status rd_dropout(const rd *r, sy_layer *l) {
    sy_status st;
    float rate32;
    if ((st = rd_float(r, "rate", true, 0, &rate32)) || (st = rd_seed(r, &l->seed))) return st;
    l->rate = json_number_value(rd_get(r, "rate")); /* the double Keras wrote (EfficientNet's 0.07500000000000001) */
    json_t *v = rd_get(r, "noise_shape");
    if (!v || json_is_null(v)) return SY_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 1 || n > SY_MAX_RANK)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "noise_shape must be null or a list of 1 to %d dimensions, got %s",
                      SY_MAX_RANK, keras_json_show(v).s);
    l->noise_shape.rank = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(v, i);
        if (json_is_null(d)) l->noise_shape.dims[i] = -1;
        else if (json_is_integer(d) && json_integer_value(d) >= 1 && json_integer_value(d) <= INT32_MAX)
            l->noise_shape.dims[i] = json_integer_value(d);
        else
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "noise_shape %s: dimensions must be positive integers or null",
                          keras_json_show(v).s);
    }
    return SY_OK;
}

static sy_status rd_embedding(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"embeddings_constraint", NULL};
    sy_status st;
    if ((st = rd_i32(r, "input_dim", true, 0, 1, &l->input_dim)) ||
        (st = rd_i32(r, "output_dim", true, 0, 1, &l->output_dim)) ||
        (st = rd_init(r, "embeddings_initializer", l->embeddings_initializer, &l->embeddings_initializer)) ||
        (st = rd_nulls(r, nulls)) || (st = rd_regularizer(r, "embeddings_regularizer", &l->embeddings_regularizer)) ||
        (st = rd_bool(r, "mask_zero", false, &l->mask_zero)) || (st = rd_bool_only(r, "sparse", false)))
        return st;
    json_t *v = rd_get(r, "input_length");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "input_length must be a positive integer or null, got %s", keras_json_show(v).s);
        l->input_length = (int32_t)json_integer_value(v); /* 0: None, as Keras's `if input_length:` */
    }
    return SY_OK;
}

static sy_status rd_recurrent(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                                        "kernel_constraint", "recurrent_constraint", "bias_constraint", NULL};
    sy_status st;
    int64_t impl;
    if ((st = rd_i32(r, "units", true, 0, 1, &l->units)) ||
        (st = rd_activation(r, "activation", SY_ACTIVATION_TANH, false, &l->activation)) ||
        (st = rd_activation(r, "recurrent_activation", SY_ACTIVATION_SIGMOID, false, &l->recurrent_activation)) ||
        (st = rd_bool(r, "use_bias", true, &l->use_bias)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)) ||
        (st = rd_init(r, "recurrent_initializer", l->recurrent_initializer, &l->recurrent_initializer)) ||
        (st = rd_init(r, "bias_initializer", l->bias_initializer, &l->bias_initializer)) || (st = rd_nulls(r, nulls)) ||
        (st = rd_float(r, "dropout", false, 0, &l->dropout)) ||
        (st = rd_float(r, "recurrent_dropout", false, 0, &l->recurrent_dropout)) ||
        (st = rd_int(r, "implementation", false, 2, 0, 2, &impl)) ||
        (st = rd_bool(r, "return_sequences", false, &l->return_sequences)) ||
        (st = rd_bool_only(r, "return_state", false)) || (st = rd_bool(r, "go_backwards", false, &l->go_backwards)) ||
        (st = rd_bool_only(r, "stateful", false)) || (st = rd_bool_only(r, "unroll", false)) ||
        (st = rd_bool_only(r, "time_major", false)))
        return st;
    if (l->kind == SY_LAYER_GRU) return rd_bool_only(r, "reset_after", true);
    if ((st = rd_bool(r, "unit_forget_bias", true, &l->unit_forget_bias))) return st;
    /* Keras starts the bias as bias_initializer with the forget gate's
     * quarter at one; systolic's unit_forget_bias starts the rest at zero */
    if (l->use_bias && l->unit_forget_bias && l->bias_initializer.kind != SY_INIT_ZEROS)
        return rd_err(r, SY_ERR_UNSUPPORTED,
                      "bias_initializer %s with unit_forget_bias true is not supported (supported: Zeros, or "
                      "unit_forget_bias false)",
                      keras_json_show(rd_get(r, "bias_initializer")).s);
    return SY_OK;
}

typedef sy_status (*rd_fn)(const rd *r, sy_layer *l);

static rd_fn reader_of(sy_layer_kind kind) {
    const layer_impl *impl = layer_impl_of(kind);
    if (impl && impl->json_read) return impl->json_read;
    switch (kind) {
    case SY_LAYER_DENSE: return rd_dense;
    case SY_LAYER_MAX_POOLING2D:
    case SY_LAYER_AVERAGE_POOLING2D: return rd_pooling;
    case SY_LAYER_ACTIVATION: return rd_activation_layer;
    case SY_LAYER_FLATTEN: return rd_flatten;
    case SY_LAYER_RESHAPE: return rd_reshape;
    case SY_LAYER_DROPOUT: return rd_dropout;
    case SY_LAYER_EMBEDDING: return rd_embedding;
    default: return rd_recurrent;
    }
}

static sy_layer layer_defaults(sy_layer_kind kind) {
    const layer_impl *impl = layer_impl_of(kind);
    if (impl && impl->defaults) return impl->defaults();
    switch (kind) {
    case SY_LAYER_DENSE: return sy_layer_dense(0);
    case SY_LAYER_MAX_POOLING2D: return sy_layer_max_pooling2d(2, 2);
    case SY_LAYER_AVERAGE_POOLING2D: return sy_layer_average_pooling2d(2, 2);
    case SY_LAYER_ACTIVATION: return sy_layer_activation(SY_ACTIVATION_LINEAR);
    case SY_LAYER_FLATTEN: return sy_layer_flatten();
    case SY_LAYER_RESHAPE: return sy_layer_reshape(sy_shape_of(0));
    case SY_LAYER_DROPOUT: return sy_layer_dropout(0);
    case SY_LAYER_EMBEDDING: return sy_layer_embedding(0, 0);
    case SY_LAYER_LSTM: return sy_layer_lstm(0);
    default: return sy_layer_gru(0);
    }
}

/* ---- the model ------------------------------------------------------------------------ */

/* What the file says, before anything is built. Strings point into the
 * parsed JSON. */
typedef struct parsed {
    const char *name;
    sy_layer *layers;
    int64_t n;
    sy_shape input_shape; /* the InputLayer's (or build_input_shape); rank 0: none */
    bool input_known;     /* an InputLayer with every dimension known */
    const char *input_name, *input_dtype;
    json_t *functional; /* a Functional model's config: read by read_functional */
    /* issue 15, nested models: the models the layers use (sy_layer.model), freed after the outer model is made */
    sy_model **nested;
    int64_t n_nested;
    int64_t max_params;
    int depth; /* of nesting: 0 for the file's model */
} parsed;

#define NESTED_DEPTH_MAX 16

static sy_status read_functional(json_t *config, parsed *p, int64_t max_params, sy_model **out);
static sy_status build(const parsed *p, int64_t max_params, sy_model **out);
static sy_status read_model(json_t *root, parsed *p);

static bool is_model_class(const char *cls) {
    return !strcmp(cls, "Sequential") || !strcmp(cls, "Functional") || !strcmp(cls, "Model");
}

static void parsed_free(parsed *p) {
    for (int64_t i = 0; i < p->n_nested; i++) sy_model_free(p->nested[i]);
    sy_free(p->nested);
    sy_free(p->layers);
    p->nested = NULL, p->layers = NULL, p->n_nested = 0;
}

/* issue 15: a layer entry that is a model (class Sequential, Functional or
 * Model), read as a model of its own and kept in p->nested until the
 * outer model has copied it; *layer is the layer that uses it. */
static sy_status read_nested(json_t *entry, const char *cls, json_t *cfg, const char *name, parsed *p,
                             sy_layer *layer) {
    if (p->depth >= NESTED_DEPTH_MAX)
        return sy_error(SY_ERR_UNSUPPORTED, "model JSON: layer '%s' (%s): models nested more than %d deep are not "
                        "supported", name ? name : "?", cls, NESTED_DEPTH_MAX);
    (void)entry;
    json_t *root = json_object();
    sy_model **grown = sy_realloc_array(p->nested, (size_t)p->n_nested, (size_t)p->n_nested + 1, sizeof *grown);
    if (!root || !grown || json_object_set_new(root, "class_name", json_string(cls)) ||
        json_object_set(root, "config", cfg)) {
        json_decref(root);
        if (grown) p->nested = grown;
        return sy_error(SY_ERR_OUT_OF_MEMORY, "model JSON: out of memory");
    }
    p->nested = grown;
    parsed q;
    memset(&q, 0, sizeof q);
    q.max_params = p->max_params;
    q.depth = p->depth + 1;
    sy_model *inner = NULL;
    sy_status st = read_model(root, &q);
    if (!st) st = q.functional ? read_functional(q.functional, &q, p->max_params, &inner) : build(&q, p->max_params, &inner);
    parsed_free(&q);
    json_decref(root);
    if (st) { /* name the nested model, once */
        char msg[1536];
        const char *e = sy_last_error();
        snprintf(msg, sizeof msg, "%s", strncmp(e, "model JSON: ", 12) ? e : e + 12);
        if (strncmp(msg, "nested model", 12) == 0) return sy_error(st, "model JSON: %s", msg);
        return sy_error(st, "model JSON: nested model '%s' (%s): %s", name ? name : "?", cls, msg);
    }
    if (name && strcmp(name, inner->name) != 0) { /* the entry's name is the model's */
        sy_model_free(inner);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "model JSON: nested model '%s' is listed under the name '%s'",
                        inner->name, name);
    }
    p->nested[p->n_nested++] = inner;
    *layer = sy_layer_model(inner);
    return SY_OK;
}

static sy_status model_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static sy_status model_err(const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sy_error(SY_ERR_INVALID_ARGUMENT, "model JSON: %s", msg);
}

/* The class name and config of a layer entry ({"class_name", "config", ...}). */
static sy_status entry_parts(json_t *e, size_t index, const char **cls, json_t **cfg, const char **name) {
    json_t *cn = json_is_object(e) ? json_object_get(e, "class_name") : NULL;
    *cfg = json_is_object(e) ? json_object_get(e, "config") : NULL;
    if (!json_is_string(cn) || !json_is_object(*cfg))
        return model_err("layer %zu must be an object with \"class_name\" (a string) and \"config\" (an object), got %s",
                         index, keras_json_show(e).s);
    *cls = json_string_value(cn);
    json_t *n = json_object_get(*cfg, "name");
    if (n && !json_is_string(n)) return model_err("layer %zu (%s): name must be a string, got %s", index, *cls, keras_json_show(n).s);
    *name = n ? json_string_value(n) : NULL;
    return SY_OK;
}

/* An InputLayer's config: its shape, name and dtype. */
static sy_status read_input_layer(json_t *cfg, const char *name, parsed *p) {
    rd r = {name ? name : "input", "InputLayer", cfg};
    static const char *const keys[] = {"batch_input_shape", "batch_shape", "input_shape", "batch_size", "dtype",
                                       "sparse", "ragged", "name", "input_tensor", "type_spec", NULL};
    const char *k;
    json_t *x;
    json_object_foreach(cfg, k, x) {
        if (!in_list(keys, k)) return rd_err(&r, SY_ERR_INVALID_ARGUMENT, "unknown argument '%s'", k);
    }
    sy_status st;
    if ((st = rd_bool_only(&r, "sparse", false)) || (st = rd_bool_only(&r, "ragged", false)) ||
        (st = rd_null(&r, "input_tensor")) || (st = rd_null(&r, "type_spec")))
        return st;
    json_t *dt = rd_get(&r, "dtype");
    static const char *const dtypes[] = {"float32", "float64", "float16", "int32", "int64", "uint8", NULL};
    if (dt && !json_is_null(dt) && !(json_is_string(dt) && in_list(dtypes, json_string_value(dt))))
        return rd_err(&r, SY_ERR_UNSUPPORTED,
                      "dtype %s is not supported (supported: \"float32\"; \"int32\", \"int64\", \"uint8\", \"float16\" "
                      "and \"float64\" inputs are fed as the first layer takes them)",
                      keras_json_show(dt).s);
    p->input_dtype = dt && json_is_string(dt) ? json_string_value(dt) : NULL;
    p->input_name = name;
    json_t *v = rd_get(&r, "batch_input_shape");
    const char *key = "batch_input_shape";
    if (!v) v = rd_get(&r, "batch_shape"), key = "batch_shape";
    bool batch = true;
    if (!v) v = rd_get(&r, "input_shape"), key = "input_shape", batch = false;
    if (!v || json_is_null(v)) return rd_err(&r, SY_ERR_INVALID_ARGUMENT, "the input shape (batch_input_shape) is missing");
    if ((st = rd_shape(&r, key, v, batch, &p->input_shape, &p->input_known))) return st;
    if (!p->input_known)
        return rd_err(&r, SY_ERR_UNSUPPORTED,
                      "%s %s has unknown dimensions; systolic compiles static shapes, so every dimension but the "
                      "batch must be given",
                      key, keras_json_show(v).s);
    return SY_OK;
}

static const layer_kind_info *kind_of(const char *cls) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kinds[i].cls, cls)) return &kinds[i];
    return NULL;
}

/* One layer's config into p->layers[p->n]. */
static sy_status read_layer(json_t *entry, size_t index, parsed *p) {
    const char *cls = NULL, *name = NULL;
    json_t *cfg = NULL;
    sy_status st = entry_parts(entry, index, &cls, &cfg, &name);
    if (st) return st;
    /* issue 15, keras.applications: a Lambda's function is Python code (marshalled bytecode in the JSON) */
    if (!strcmp(cls, "Lambda"))
        return sy_error(SY_ERR_UNSUPPORTED,
                        "model JSON: layer '%s': Lambda is not supported: its function is Python code, which "
                        "systolic cannot run; write the computation with Keras layers",
                        name ? name : "?");
    if (is_model_class(cls)) { /* issue 15: a nested model */
        sy_layer l;
        if ((st = read_nested(entry, cls, cfg, name, p, &l))) return st;
        p->layers[p->n++] = l;
        return SY_OK;
    }
    sy_layer l;
    if ((st = keras_layer_entry_read(entry, index, &l))) return st;
    p->layers[p->n++] = l;
    return SY_OK;
}

/* issue 17: also a wrapper layer's inner one (keras_config.h) */
sy_status keras_layer_entry_read(json_t *entry, size_t index, sy_layer *out) {
    const char *cls = NULL, *name = NULL;
    json_t *cfg = NULL;
    sy_status st = entry_parts(entry, index, &cls, &cfg, &name);
    if (st) return st;
    const layer_kind_info *k = kind_of(cls);
    const layer_impl *impl = k ? layer_impl_of(k->kind) : layer_impl_by_class(cls);
    if (!impl) {
        char supported[1024];
        keras_layer_names(supported, sizeof supported);
        return sy_error(SY_ERR_UNSUPPORTED, "model JSON: layer '%s': %s is not supported; supported layers: %s",
                        name ? name : "?", cls, supported);
    }
    const char *const *own = k ? k->keys : impl->json_keys;
    static const char *const none[] = {NULL};
    rd r = {name ? name : "?", impl->class_name, cfg};
    const char *key;
    json_t *x;
    json_object_foreach(cfg, key, x) {
        if (!in_list(common_keys, key) && !in_list(own ? own : none, key))
            return rd_err(&r, SY_ERR_INVALID_ARGUMENT, "unknown argument '%s'", key);
    }
    sy_layer l = layer_defaults(impl->kind);
    l.name = name;
    if ((st = rd_common(&r, impl->kind, &l)) || (st = reader_of(impl->kind)(&r, &l))) return st;
    *out = l;
    return SY_OK;
}



/* The model's config into p. */
static sy_status read_model(json_t *root, parsed *p) {
    if (!json_is_object(root)) return model_err("expected an object (model.to_json()), got %s", keras_json_show(root).s);
    json_t *cn = json_object_get(root, "class_name"), *config = json_object_get(root, "config");
    if (!json_is_string(cn)) return model_err("\"class_name\" must be a string, got %s", keras_json_show(cn).s);
    const char *cls = json_string_value(cn);
    bool functional = !strcmp(cls, "Functional") || !strcmp(cls, "Model");
    if (strcmp(cls, "Sequential") && !functional)
        return sy_error(SY_ERR_UNSUPPORTED, "model JSON: a %s model is not supported; only Sequential models (and "
                        "Functional ones that are a plain chain) are", keras_json_show(cn).s);
    json_t *layers = json_is_array(config) && !functional ? config : json_object_get(config, "layers");
    if (!json_is_object(config) && !(json_is_array(config) && !functional))
        return model_err("\"config\" must be an object, got %s", keras_json_show(config).s);
    if (!json_is_array(layers)) return model_err("\"config\" must hold \"layers\", a list, got %s", keras_json_show(layers).s);
    json_t *name = json_is_object(config) ? json_object_get(config, "name") : NULL;
    if (name && !json_is_string(name)) return model_err("the model's name must be a string, got %s", keras_json_show(name).s);
    p->name = name ? json_string_value(name) : "sequential";
    if (strlen(p->name) >= LAYER_NAME_MAX)
        return model_err("the model's name '%s' is longer than %d characters", p->name, LAYER_NAME_MAX - 1);
    if (functional) {
        json_t *tr = json_object_get(config, "trainable");
        if (tr && !json_is_true(tr))
            return sy_error(SY_ERR_UNSUPPORTED, "model JSON: trainable %s is not supported (supported: true)", keras_json_show(tr).s);
    }
    if (functional) {
        p->functional = config;
        return SY_OK;
    }
    size_t n = json_array_size(layers);
    size_t *order = sy_malloc((n ? n : 1) * sizeof *order);
    p->layers = sy_calloc(n ? n : 1, sizeof *p->layers);
    if (!order || !p->layers) {
        sy_free(order);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "model JSON: out of memory");
    }
    sy_status st = SY_OK;
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 0; i < n && !st; i++) {
        json_t *e = json_array_get(layers, order[i]);
        const char *lcls, *lname;
        json_t *cfg;
        if ((st = entry_parts(e, order[i], &lcls, &cfg, &lname))) break;
        if (strcmp(lcls, "InputLayer")) {
            st = read_layer(e, order[i], p);
        } else if (i != 0) {
            st = sy_error(SY_ERR_UNSUPPORTED, "model JSON: an InputLayer ('%s') after the first layer is not supported",
                          lname ? lname : "?");
        } else {
            st = read_input_layer(cfg, lname, p);
            if (!st && lname && strlen(lname) >= LAYER_NAME_MAX)
                st = model_err("the input layer's name '%s' is longer than %d characters", lname, LAYER_NAME_MAX - 1);
        }
    }
    sy_free(order);
    if (st) return st;
    json_t *bis = json_is_object(config) ? json_object_get(config, "build_input_shape") : NULL;
    if (!p->input_known && bis && !json_is_null(bis) && p->n > 0) {
        rd r = {p->layers[0].name, sy_layer_class_name(p->layers[0].kind), config};
        bool known;
        if ((st = rd_shape(&r, "build_input_shape", bis, true, &p->input_shape, &known))) return st;
        p->input_known = known;
    }
    return SY_OK;
}

/* A layer's output shape and weights, checked against the limits before
 * sy_model_add allocates them. */
static sy_status check_sizes(const sy_layer *l, const sy_shape *in, int n_in, int64_t *params, int64_t max_params) {
    const layer_impl *impl = layer_impl_of(l->kind);
    const char *name = l->name ? l->name : impl->prefix; /* sy_model_add gives the automatic name */
    sy_shape out;
    int lo = impl->max_inputs ? impl->min_inputs : 1, hi = impl->max_inputs ? impl->max_inputs : 1;
    if (n_in < lo || n_in > hi) {
        if (hi == 1)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s) takes one input, called on %d", name,
                            impl->class_name, n_in);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s) takes %d to %d inputs, called on %d", name,
                        impl->class_name, lo, hi, n_in);
    }
    sy_status st = impl->output_shape(l, name, in, n_in, &out);
    if (st) return st;
    int64_t count = 1;
    for (int i = 0; i < out.rank; i++)
        if (__builtin_mul_overflow(count, out.dims[i], &count) || count > SIZE_LIMIT)
            return sy_error(SY_ERR_UNSUPPORTED, "layer '%s' (%s): more than 2^40 output values per sample are not "
                            "supported", name, sy_layer_class_name(l->kind));
    layer_weight w[LAYER_MAX_WEIGHTS];
    int n = impl->weights ? impl->weights(l, in, w) : 0;
    for (int j = 0; j < n; j++) {
        int64_t c = 1;
        for (int i = 0; i < w[j].shape.rank; i++)
            if (__builtin_mul_overflow(c, w[j].shape.dims[i], &c) || c > SIZE_LIMIT) c = SIZE_LIMIT + 1;
        if (c > max_params - *params)
            return sy_error(SY_ERR_UNSUPPORTED, "layer '%s' (%s): the model's weights would hold more than %lld values",
                            name, sy_layer_class_name(l->kind), (long long)max_params);
        *params += c;
    }
    return SY_OK;
}

static sy_status build(const parsed *p, int64_t max_params, sy_model **out) {
    if (p->n == 0) return model_err("the model has no layers");
    sy_layer *first = &p->layers[0];
    /* Keras's Embedding sets its input shape from input_length */
    if (first->input_shape.rank == 0 && first->kind == SY_LAYER_EMBEDDING && first->input_length > 0)
        first->input_shape = sy_shape_of(1, (int64_t)first->input_length);
    if (first->input_shape.rank > 0 && p->input_known && !sy_shape_equal(&first->input_shape, &p->input_shape)) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return model_err("the input layer's shape %s and layer '%s''s input shape %s differ",
                         keras_shape_str(&p->input_shape, a, sizeof a), first->name ? first->name : "?",
                         keras_shape_str(&first->input_shape, b, sizeof b));
    }
    if (first->input_shape.rank == 0 && !p->input_known)
        return model_err("the model has no input shape: give its first layer batch_input_shape, or an InputLayer "
                         "(keras.Input(shape=...)) before it, as to_json() writes for a built model");
    sy_model *m;
    sy_status st = sy_model_new(p->name, &m);
    if (st) return st;
    if (first->input_shape.rank == 0) st = sy_model_build(m, p->input_shape);
    int64_t params = 0;
    for (int64_t i = 0; i < p->n && !st; i++) {
        const sy_shape *in = i ? &m->layers[i - 1].out_shape : first->input_shape.rank ? &first->input_shape : &p->input_shape;
        if (!(st = check_sizes(&p->layers[i], in, 1, &params, max_params))) st = sy_model_add(m, &p->layers[i]);
    }
    if (st) {
        sy_model_free(m);
        return sy_error(st, "model JSON: %s", sy_last_error());
    }
    if (p->input_name) snprintf(m->inputs[0].name, sizeof m->inputs[0].name, "%s", p->input_name);
    if (p->input_dtype) snprintf(m->inputs[0].dtype, sizeof m->inputs[0].dtype, "%s", p->input_dtype);
    *out = m;
    return SY_OK;
}

/* ---- Functional models --------------------------------------------------------------- */

/* A tensor reference [layer name, node index, tensor index(, kwargs)] of
 * inbound_nodes, input_layers or output_layers. */
static sy_status tensor_ref(json_t *t, const char *where, const char **layer, int64_t *node) {
    json_t *kw = json_is_array(t) ? json_array_get(t, 3) : NULL;
    if (!json_is_array(t) || json_array_size(t) < 3 || json_array_size(t) > 4 || !json_is_string(json_array_get(t, 0)) ||
        !json_is_integer(json_array_get(t, 1)) || json_integer_value(json_array_get(t, 1)) < 0 ||
        !json_is_integer(json_array_get(t, 2)))
        return model_err("%s: expected [layer name, node index, tensor index, {}], got %s", where, keras_json_show(t).s);
    if (json_integer_value(json_array_get(t, 2)) != 0)
        return sy_error(SY_ERR_UNSUPPORTED, "model JSON: %s: tensor %s of layer '%s' is not supported: every layer "
                        "here has one output (tensor 0)", where, keras_json_show(json_array_get(t, 2)).s,
                        json_string_value(json_array_get(t, 0)));
    if (kw && !(json_is_object(kw) && json_object_size(kw) == 0))
        return sy_error(SY_ERR_UNSUPPORTED, "model JSON: %s: call arguments %s are not supported (supported: {})",
                        where, keras_json_show(kw).s);
    *layer = json_string_value(json_array_get(t, 0));
    *node = json_integer_value(json_array_get(t, 1));
    return SY_OK;
}

/* The model node made by call `call` of the entry named `name`, or -1. */
typedef struct fn_entry {
    const char *name;
    bool input;
    int32_t index;     /* layer or input index in the model */
    json_t *nodes;     /* inbound_nodes */
    int32_t done;      /* calls made */
    int32_t *made;     /* model node of each call */
    bool nested;       /* issue 15: a model; its calls count from 1 in the file (node 0 is its own) */
} fn_entry;

static int32_t find_made(const fn_entry *e, size_t n, const char *name, int64_t call) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].name, name)) {
            if (e[i].nested) call--;
            return call >= 0 && call < e[i].done ? e[i].made[call] : -1;
        }
    return -1;
}

static const fn_entry *find_entry(const fn_entry *e, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].name, name)) return &e[i];
    return NULL;
}

static sy_status functional_calls(sy_model *m, json_t *config, fn_entry *E, size_t n, int64_t max_params);

/* keras.Model.from_config: the InputLayers (in input_layers' order), the
 * layers (in the file's order, which names them), then their calls as
 * Keras makes them -- pass after pass over the layers, each making its
 * next call once the tensors it takes exist -- and the outputs. */
static sy_status read_functional(json_t *config, parsed *p, int64_t max_params, sy_model **out) {
    json_t *layers = json_object_get(config, "layers");
    size_t n = json_array_size(layers);
    fn_entry *E = sy_calloc(n ? n : 1, sizeof *E);
    sy_model *m = NULL;
    if (!p->layers) p->layers = sy_calloc(1, sizeof *p->layers);
    sy_status st = E && p->layers ? sy_model_new_functional(p->name, &m) : sy_error(SY_ERR_OUT_OF_MEMORY, "model JSON: out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        json_t *e = json_array_get(layers, i), *cfg;
        const char *cls, *lname;
        if ((st = entry_parts(e, i, &cls, &cfg, &lname))) break;
        json_t *nm = json_object_get(e, "name"), *nodes = json_object_get(e, "inbound_nodes");
        if (!json_is_string(nm) || !json_is_array(nodes)) {
            st = model_err("Functional model: layer %zu needs \"name\" (a string) and \"inbound_nodes\" (a list), got "
                           "%s", i, keras_json_show(e).s);
            break;
        }
        E[i].name = json_string_value(nm);
        E[i].nodes = nodes;
        if (strlen(E[i].name) >= LAYER_NAME_MAX) {
            st = model_err("layer name '%s' is longer than %d characters", E[i].name, LAYER_NAME_MAX - 1);
            break;
        }
        for (size_t k = 0; k < i && !st; k++)
            if (!strcmp(E[k].name, E[i].name))
                st = model_err("the name \"%s\" is used 2 times in the model; all layer names should be unique", E[i].name);
        if (st) break;
        E[i].made = sy_calloc(json_array_size(nodes) + 1, sizeof *E[i].made);
        if (!E[i].made) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "model JSON: out of memory");
            break;
        }
        if (!strcmp(cls, "InputLayer")) {
            E[i].input = true;
            if (json_array_size(nodes) != 0) st = model_err("InputLayer '%s' has inbound nodes %s", E[i].name, keras_json_show(nodes).s);
            continue;
        }
        p->n = 0;
        if ((st = read_layer(e, i, p))) break;
        E[i].nested = p->layers[0].kind == SY_LAYER_MODEL;
        p->layers[0].name = E[i].name;
        if ((st = model_new_layer(m, &p->layers[0], &E[i].index))) break;
    }
    if (!st) st = functional_calls(m, config, E, n, max_params);
    for (size_t i = 0; i < n && E; i++) sy_free(E[i].made);
    sy_free(E);
    if (st) {
        sy_model_free(m);
        if (strncmp(sy_last_error(), "model JSON: ", 12) == 0) return st;
        return sy_error(st, "model JSON: %s", sy_last_error());
    }
    *out = m;
    return SY_OK;
}

static sy_status functional_calls(sy_model *m, json_t *config, fn_entry *E, size_t n, int64_t max_params) {
    sy_status st;
    /* the inputs, in input_layers' order */
    json_t *ins = json_object_get(config, "input_layers"), *outs = json_object_get(config, "output_layers");
    if (json_is_array(ins) && json_array_size(ins) == 3 && json_is_string(json_array_get(ins, 0))) {
        /* a single reference, as Keras writes one input sometimes */
    } else if (!json_is_array(ins) || json_array_size(ins) == 0) {
        return model_err("Functional model: \"input_layers\" must be a non-empty list, got %s", keras_json_show(ins).s);
    }
    bool single = json_is_string(json_array_get(ins, 0));
    size_t n_ins = single ? 1 : json_array_size(ins);
    for (size_t k = 0; k < n_ins; k++) {
        const char *lname;
        int64_t node;
        if ((st = tensor_ref(single ? ins : json_array_get(ins, k), "input_layers", &lname, &node))) return st;
        fn_entry *e = (fn_entry *)find_entry(E, n, lname);
        if (!e || !e->input)
            return model_err("Functional model: input_layers names '%s', which is not an InputLayer of the model", lname);
        if (e->done) return model_err("Functional model: input_layers names '%s' twice", lname);
        json_t *entry = NULL;
        for (size_t i = 0; i < n; i++)
            if (&E[i] == e) entry = json_array_get(json_object_get(config, "layers"), i);
        parsed q;
        memset(&q, 0, sizeof q);
        if ((st = read_input_layer(json_object_get(entry, "config"), lname, &q))) return st;
        if ((st = sy_model_input(m, q.input_shape, lname, q.input_dtype, &e->made[0]))) return st;
        e->done = 1;
    }
    for (size_t i = 0; i < n; i++)
        if (E[i].input && !E[i].done)
            return model_err("Functional model: InputLayer '%s' is not among its input_layers %s", E[i].name,
                             keras_json_show(ins).s);
    /* the calls */
    int64_t params = 0;
    for (bool progress = true; progress;) {
        progress = false;
        for (size_t i = 0; i < n; i++) {
            fn_entry *e = &E[i];
            if (e->input || e->done >= (int32_t)json_array_size(e->nodes)) continue;
            json_t *node = json_array_get(e->nodes, (size_t)e->done);
            if (!json_is_array(node) || json_array_size(node) == 0 || json_array_size(node) > LAYER_MAX_INPUTS)
                return model_err("Functional model: layer '%s': inbound node %d must be a list of 1 to %d tensors, got "
                                 "%s", e->name, e->done, LAYER_MAX_INPUTS, keras_json_show(node).s);
            int32_t in[LAYER_MAX_INPUTS];
            sy_shape shapes[LAYER_MAX_INPUTS];
            size_t k, nk = json_array_size(node);
            char where[2 * LAYER_NAME_MAX];
            snprintf(where, sizeof where, "layer '%s'", e->name);
            for (k = 0; k < nk; k++) {
                const char *from;
                int64_t call;
                if ((st = tensor_ref(json_array_get(node, k), where, &from, &call))) return st;
                if (!find_entry(E, n, from))
                    return model_err("Functional model: layer '%s' takes its input from '%s', which is not a layer of "
                                     "the model", e->name, from);
                if ((in[k] = find_made(E, n, from, call)) < 0) break;
                shapes[k] = m->nodes[in[k]].shape;
            }
            if (k < nk) continue; /* an input is not made yet */
            model_layer *L = &m->layers[e->index];
            if (L->calls == 0 && (st = check_sizes(&L->cfg, shapes, (int)nk, &params, max_params))) return st;
            if ((st = model_call(m, e->index, in, (int)nk, &e->made[e->done]))) return st;
            e->done++;
            progress = true;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!E[i].input && E[i].done < (int32_t)json_array_size(E[i].nodes)) {
            json_t *node = json_array_get(E[i].nodes, (size_t)E[i].done);
            return model_err("Functional model: layer '%s' can never be called on %s: the tensors it takes are never "
                             "made (a cycle, or a node that does not exist)", E[i].name, keras_json_show(node).s);
        }
    /* the outputs */
    if (!json_is_array(outs) || json_array_size(outs) == 0)
        return model_err("Functional model: \"output_layers\" must be a non-empty list, got %s", keras_json_show(outs).s);
    single = json_is_string(json_array_get(outs, 0));
    size_t n_outs = single ? 1 : json_array_size(outs);
    if (n_outs > MODEL_MAX_IO) return model_err("Functional model: %zu outputs; at most %d", n_outs, MODEL_MAX_IO);
    int32_t out_nodes[MODEL_MAX_IO];
    for (size_t k = 0; k < n_outs; k++) {
        const char *lname;
        int64_t call;
        if ((st = tensor_ref(single ? outs : json_array_get(outs, k), "output_layers", &lname, &call))) return st;
        if ((out_nodes[k] = find_made(E, n, lname, call)) < 0)
            return model_err("Functional model: output_layers names node %lld of '%s', which the model does not make",
                             (long long)call, lname);
    }
    for (size_t i = 0; i < n; i++)
        if (!E[i].input && json_array_size(E[i].nodes) == 0)
            return sy_error(SY_ERR_UNSUPPORTED, "model JSON: layer '%s' is never called (no inbound nodes)", E[i].name);
    return sy_model_set_outputs(m, out_nodes, (int)n_outs);
}

sy_status keras_model_from_json_bytes(const char *json, size_t size, int64_t max_params, sy_model **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(json, size, 0, &err);
    if (!root)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "model JSON, line %d column %d: %s", err.line, err.column, err.text);
    parsed p;
    memset(&p, 0, sizeof p);
    p.max_params = max_params;
    sy_status st = read_model(root, &p);
    if (!st) st = p.functional ? read_functional(p.functional, &p, max_params, out) : build(&p, max_params, out);
    parsed_free(&p);
    json_decref(root);
    return st;
}

sy_status sy_model_from_json(const char *json, sy_model **out) {
    *out = NULL;
    if (!json) return sy_error(SY_ERR_INVALID_ARGUMENT, "model JSON: NULL");
    return keras_model_from_json_bytes(json, strlen(json), SIZE_LIMIT, out);
}
