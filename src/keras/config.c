/*
 * config.c - Keras's model JSON, written: model.to_json(), and the JSON
 * writer that formats as Python's json.dumps does (config_read.c reads).
 *
 * Writing gives what tf.keras 2.15's to_json() gives for the same
 * Sequential or Functional model, byte for byte (a Functional one with
 * each layer's name and inbound_nodes and the model's input_layers and
 * output_layers, its layers in Keras's model.layers order): the same keys in the same order, every
 * argument Keras writes (regularizers and constraints as null,
 * initializers as {"module": "keras.initializers", "class_name": ...,
 * "config": ..., "registered_name": null}), an InputLayer first when the
 * input shape is known, a build_config per built layer, and Python's json
 * formatting (", " and ": " separators, floats as repr() writes them,
 * non-ASCII as \uXXXX). tests/data/keras/ holds Keras's own output for the
 * built-in models and a spread of layer arguments (tools/golden/
 * make_model_json.py); test_config.c compares.
 *
 * What reading does not keep, and so is written back differently
 * (docs/design/model-files.md): a fixed batch dimension (the batch size is
 * fit()'s), a seed of 0 (0 means "from the model's seed" here; written
 * null), LSTM/GRU implementation (written as Keras 2.15 sets it: 1 with a
 * recurrent dropout, else 2; the same numbers either way), VarianceScaling (written
 * as the named initializer it equals), initializers null (Keras then uses
 * glorot_uniform; written so) or by name.
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

#define KERAS_VERSION "2.15.0"

/* ==== writing JSON as Python's json.dumps does =================================== */


static void jw_raw(jw *w, const char *s, size_t n) {
    if (w->failed || w->truncated) return;
    if (w->limit && w->len + n > w->limit) {
        w->truncated = true;
        return;
    }
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (cap < w->len + n + 1) cap *= 2;
        char *b = sy_realloc_array(w->buf, w->cap, cap, 1);
        if (!b) {
            w->failed = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void jw_puts(jw *w, const char *s) { jw_raw(w, s, strlen(s)); }

/* Before a value: the separator inside an array (inside an object the key
 * wrote it). */
static void jw_value(jw *w) {
    if (w->depth > 0 && w->array[w->depth - 1]) {
        if (!w->first[w->depth - 1]) jw_puts(w, ", ");
        w->first[w->depth - 1] = false;
    }
}

void jw_open(jw *w, bool array) {
    jw_value(w);
    jw_puts(w, array ? "[" : "{");
    if (w->depth < JW_DEPTH) {
        w->array[w->depth] = array;
        w->first[w->depth] = true;
    }
    w->depth++;
}

void jw_close(jw *w) {
    w->depth--;
    jw_puts(w, w->depth < JW_DEPTH && w->array[w->depth] ? "]" : "}");
}

/* A string as json.dumps(ensure_ascii=True) writes it. Bytes that are not
 * UTF-8 are taken as Latin-1 (never produced by a parsed file). */
static void jw_string_body(jw *w, const char *s) {
    char e[16];
    jw_puts(w, "\"");
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, cp = c;
        int n = 1;
        if (c >= 0x80) {
            int more = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : -1;
            cp = more == 3 ? c & 0x07 : more == 2 ? c & 0x0F : c & 0x1F;
            for (int k = 1; k <= more; k++) {
                if ((p[k] & 0xC0) != 0x80) {
                    more = -1;
                    break;
                }
                cp = cp << 6 | (p[k] & 0x3F);
            }
            if (more < 0 || (more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
                cp = c, n = 1;
            else
                n = more + 1;
        }
        p += n;
        if (cp == '"') jw_puts(w, "\\\"");
        else if (cp == '\\') jw_puts(w, "\\\\");
        else if (cp == '\n') jw_puts(w, "\\n");
        else if (cp == '\r') jw_puts(w, "\\r");
        else if (cp == '\t') jw_puts(w, "\\t");
        else if (cp == '\b') jw_puts(w, "\\b");
        else if (cp == '\f') jw_puts(w, "\\f");
        else if (cp < 0x20 || (cp >= 0x80 && cp < 0x10000)) {
            snprintf(e, sizeof e, "\\u%04x", cp);
            jw_puts(w, e);
        } else if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            jw_puts(w, e);
        } else {
            char ch = (char)cp;
            jw_raw(w, &ch, 1);
        }
    }
    jw_puts(w, "\"");
}

void jw_str(jw *w, const char *s) {
    jw_value(w);
    jw_string_body(w, s);
}

void jw_key(jw *w, const char *key) {
    if (w->depth > 0 && w->depth <= JW_DEPTH) {
        if (!w->first[w->depth - 1]) jw_puts(w, ", ");
        w->first[w->depth - 1] = false;
    }
    jw_string_body(w, key);
    jw_puts(w, ": ");
}

void jw_int(jw *w, long long v) {
    char b[32];
    jw_value(w);
    snprintf(b, sizeof b, "%lld", v);
    jw_puts(w, b);
}

void jw_bool(jw *w, bool v) {
    jw_value(w);
    jw_puts(w, v ? "true" : "false");
}

void jw_null(jw *w) {
    jw_value(w);
    jw_puts(w, "null");
}

/* The double closest to the shortest decimal that reads back as the float
 * x: a float field (a dropout rate of 0.1f) written as the Python float
 * Keras's config holds (0.1). */
double keras_float_as_decimal(float x) {
    char b[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)x);
        if ((float)strtod(b, NULL) == x) break;
    }
    return strtod(b, NULL);
}

/* A number as Python's json.dumps writes it: repr(float) (of the shortest
 * decimal of the float x when single), with NaN and Infinity for the
 * values JSON has no word for. */
void jw_real(jw *w, double x, bool single) {
    char b[48];
    jw_value(w);
    if (isnan(x)) jw_puts(w, "NaN");
    else if (isinf(x)) jw_puts(w, x > 0 ? "Infinity" : "-Infinity");
    else jw_puts(w, keras_float_repr(single ? keras_float_as_decimal((float)x) : x, b, sizeof b));
}

/* Any parsed value, for messages (jw's limit cuts it short). */
void jw_json(jw *w, const json_t *v) {
    if (w->depth >= JW_DEPTH) {
        jw_value(w);
        jw_puts(w, "...");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        jw_open(w, false);
        json_object_foreach((json_t *)v, k, x) {
            jw_key(w, k);
            jw_json(w, x);
            if (w->truncated) break;
        }
        jw_close(w);
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        jw_open(w, true);
        json_array_foreach(v, i, x) {
            jw_json(w, x);
            if (w->truncated) break;
        }
        jw_close(w);
        break;
    }
    case JSON_STRING: jw_str(w, json_string_value(v)); break;
    case JSON_INTEGER: jw_int(w, (long long)json_integer_value(v)); break;
    case JSON_REAL: jw_real(w, json_real_value(v), false); break;
    case JSON_TRUE: jw_bool(w, true); break;
    case JSON_FALSE: jw_bool(w, false); break;
    default: jw_null(w); break;
    }
}

keras_shown keras_json_show(const json_t *v) {
    keras_shown r;
    jw w;
    memset(&w, 0, sizeof w);
    w.limit = 100;
    if (v) jw_json(&w, v);
    else jw_puts(&w, "(absent)");
    snprintf(r.s, sizeof r.s, "%s%s", w.buf ? w.buf : "?", w.truncated ? "..." : "");
    sy_free(w.buf);
    return r;
}

/* ==== to_json ==================================================================== */

void jw_shape(jw *w, const sy_shape *s, bool batch) {
    jw_open(w, true);
    if (batch) jw_null(w);
    for (int i = 0; i < s->rank; i++) jw_int(w, (long long)s->dims[i]);
    jw_close(w);
}

void jw_pair(jw *w, int32_t a, int32_t b) {
    jw_open(w, true);
    jw_int(w, a);
    jw_int(w, b);
    jw_close(w);
}

void jw_seed(jw *w, uint64_t seed) {
    jw_key(w, "seed");
    if (seed) jw_int(w, (long long)(int64_t)seed);
    else jw_null(w);
}

/* An initializer as Keras serializes it; false for one Keras has no name for. */
bool jw_init(jw *w, const sy_init *in) {
    static const char *const names[] = {
        [SY_INIT_ZEROS] = "Zeros",           [SY_INIT_ONES] = "Ones",
        [SY_INIT_CONSTANT] = "Constant",     [SY_INIT_UNIFORM] = "RandomUniform",
        [SY_INIT_NORMAL] = "RandomNormal",   [SY_INIT_TRUNCATED_NORMAL] = "TruncatedNormal",
        [SY_INIT_GLOROT_UNIFORM] = "GlorotUniform", [SY_INIT_GLOROT_NORMAL] = "GlorotNormal",
        [SY_INIT_HE_UNIFORM] = "HeUniform",  [SY_INIT_HE_NORMAL] = "HeNormal",
        [SY_INIT_LECUN_UNIFORM] = "LecunUniform", [SY_INIT_LECUN_NORMAL] = "LecunNormal",
        [SY_INIT_ORTHOGONAL] = "Orthogonal", [SY_INIT_VARIANCE_SCALING] = "VarianceScaling",
    };
    if ((unsigned)in->kind >= sizeof names / sizeof names[0] || !names[in->kind]) return false;
    jw_open(w, false);
    jw_key(w, "module");
    jw_str(w, "keras.initializers");
    jw_key(w, "class_name");
    jw_str(w, names[in->kind]);
    jw_key(w, "config");
    jw_open(w, false);
    switch (in->kind) {
    case SY_INIT_ZEROS:
    case SY_INIT_ONES: break;
    case SY_INIT_CONSTANT:
        jw_key(w, "value");
        jw_real(w, in->a, false);
        break;
    case SY_INIT_UNIFORM:
        jw_key(w, "minval");
        jw_real(w, in->a, false);
        jw_key(w, "maxval");
        jw_real(w, in->b, false);
        jw_seed(w, in->seed);
        break;
    case SY_INIT_NORMAL:
    case SY_INIT_TRUNCATED_NORMAL:
        jw_key(w, "mean");
        jw_real(w, in->a, false);
        jw_key(w, "stddev");
        jw_real(w, in->b, false);
        jw_seed(w, in->seed);
        break;
    case SY_INIT_ORTHOGONAL:
        jw_key(w, "gain");
        jw_real(w, in->a, false);
        jw_seed(w, in->seed);
        break;
    case SY_INIT_VARIANCE_SCALING: { /* issue 15 */
        static const char *const modes[] = {"fan_in", "fan_out", "fan_avg"},
                                 *const dists[] = {"truncated_normal", "untruncated_normal", "uniform"};
        int b = (int)in->b;
        jw_key(w, "scale");
        jw_real(w, in->a, false);
        jw_key(w, "mode");
        jw_str(w, modes[b % 3]);
        jw_key(w, "distribution");
        jw_str(w, dists[(b / 3) % 3]);
        jw_seed(w, in->seed);
        break;
    }
    default: jw_seed(w, in->seed); break;
    }
    jw_close(w);
    jw_key(w, "registered_name");
    jw_null(w);
    jw_close(w);
    return true;
}

/* ---- issue 15: regularizers and number lists ---------------------------------------- */

void jw_regularizer(jw *w, const sy_regularizer *r) {
    static const char *const cls[] = {[SY_REGULARIZER_L1] = "L1", [SY_REGULARIZER_L2] = "L2", [SY_REGULARIZER_L1L2] = "L1L2"};
    if (r->kind == SY_REGULARIZER_NONE || (unsigned)r->kind > SY_REGULARIZER_L1L2) {
        jw_null(w);
        return;
    }
    jw_open(w, false);
    jw_key(w, "module");
    jw_str(w, "keras.regularizers");
    jw_key(w, "class_name");
    jw_str(w, cls[r->kind]);
    jw_key(w, "config");
    jw_open(w, false);
    if (r->kind != SY_REGULARIZER_L2) { /* Keras keeps float32 and writes float(that) */
        jw_key(w, "l1");
        jw_real(w, (double)r->l1, false);
    }
    if (r->kind != SY_REGULARIZER_L1) {
        jw_key(w, "l2");
        jw_real(w, (double)r->l2, false);
    }
    jw_close(w);
    jw_key(w, "registered_name");
    jw_null(w);
    jw_close(w);
}

static void jw_number(jw *w, double v, bool integer) {
    if (integer) jw_int(w, (long long)v);
    else jw_real(w, v, false);
}

void jw_numbers(jw *w, const sy_numbers *v) {
    if (!v->list) {
        jw_number(w, v->v[0], v->integer & 1u);
        return;
    }
    jw_open(w, true);
    for (int i = 0; i < v->n; i++) jw_number(w, v->v[i], (v->integer >> i) & 1u);
    jw_close(w);
}

void jw_nulls(jw *w, const char *const *keys) {
    for (; *keys; keys++) {
        jw_key(w, *keys);
        jw_null(w);
    }
}

/* The RNN layers' (LSTM, GRU, SimpleRNN) config from return_sequences to
 * units, in Keras's base RNN order; stateful and time_major are refused on
 * reading, unroll is kept where the layer reads it. */
void keras_rnn_json_head(jw *w, const sy_layer *l) {
    jw_key(w, "return_sequences");
    jw_bool(w, l->return_sequences);
    jw_key(w, "return_state");
    jw_bool(w, l->return_state);
    jw_key(w, "go_backwards");
    jw_bool(w, l->go_backwards);
    jw_key(w, "stateful");
    jw_bool(w, false);
    jw_key(w, "unroll");
    jw_bool(w, l->unroll);
    jw_key(w, "time_major");
    jw_bool(w, false);
    jw_key(w, "units");
    jw_int(w, l->units);
}

/* A layer's config dict, in the order of Keras's get_config(). Returns the
 * name of an initializer argument Keras cannot hold, else NULL. */
static const char *write_layer_config(jw *w, const model_layer *L) { return keras_layer_config_write(w, &L->cfg, L->name); }

const char *keras_layer_config_write(jw *w, const sy_layer *l, const char *name) {
    const char *bad = NULL;
#define INIT(key, init)                                                                                                \
    do {                                                                                                               \
        jw_key(w, key);                                                                                                \
        if (!jw_init(w, &(init)) && !bad) bad = key;                                                                   \
    } while (0)
    /* issue 15: kernel, bias and activity regularizers, in Keras's order */
#define REGULARIZERS(l)                                                                                                \
    do {                                                                                                               \
        jw_key(w, "kernel_regularizer");                                                                               \
        jw_regularizer(w, &(l)->kernel_regularizer);                                                                   \
        jw_key(w, "bias_regularizer");                                                                                 \
        jw_regularizer(w, &(l)->bias_regularizer);                                                                     \
        jw_key(w, "activity_regularizer");                                                                             \
        jw_regularizer(w, &(l)->activity_regularizer);                                                                 \
    } while (0)
    jw_open(w, false);
    jw_key(w, "name");
    jw_str(w, name);
    jw_key(w, "trainable");
    jw_bool(w, true);
    jw_key(w, "dtype");
    keras_policy_write(w, l->dtype_policy); /* issue 16, mixed_bfloat16 */
    if (l->input_shape.rank > 0) {
        jw_key(w, "batch_input_shape");
        jw_shape(w, &l->input_shape, true);
    } else if (l->kind == SY_LAYER_EMBEDDING) { /* Keras's Embedding always has one: (None, input_length) */
        jw_key(w, "batch_input_shape");
        jw_open(w, true);
        jw_null(w);
        if (l->input_length > 0) jw_int(w, l->input_length);
        else jw_null(w);
        jw_close(w);
    }
    const layer_impl *impl = layer_impl_of(l->kind);
    if (impl->json_write) impl->json_write(w, l, &bad);
    else switch (l->kind) {
    case SY_LAYER_DENSE: {
        static const char *const nulls[] = {"kernel_constraint", "bias_constraint", NULL};
        jw_key(w, "units");
        jw_int(w, l->units);
        jw_key(w, "activation");
        jw_str(w, sy_activation_name(l->activation));
        jw_key(w, "use_bias");
        jw_bool(w, l->use_bias);
        INIT("kernel_initializer", l->kernel_initializer);
        INIT("bias_initializer", l->bias_initializer);
        REGULARIZERS(l);
        jw_nulls(w, nulls);
        break;
    }
    case SY_LAYER_MAX_POOLING2D:
    case SY_LAYER_AVERAGE_POOLING2D:
        jw_key(w, "pool_size");
        jw_pair(w, l->pool_size[0], l->pool_size[1]);
        jw_key(w, "padding");
        jw_str(w, l->padding == SY_PADDING_SAME ? "same" : "valid");
        jw_key(w, "strides"); /* Keras's strides=None is written as the pool size */
        int32_t st[2];
        keras_pool2d_strides(l, st);
        jw_pair(w, st[0], st[1]);
        jw_key(w, "data_format");
        jw_str(w, "channels_last");
        break;
    case SY_LAYER_ACTIVATION:
        jw_key(w, "activation");
        jw_str(w, sy_activation_name(l->activation));
        break;
    case SY_LAYER_FLATTEN:
        jw_key(w, "data_format");
        jw_str(w, "channels_last");
        break;
    case SY_LAYER_RESHAPE:
        jw_key(w, "target_shape");
        jw_shape(w, &l->target_shape, false);
        break;
    case SY_LAYER_DROPOUT:
        jw_key(w, "rate");
        jw_real(w, l->rate, false);
        jw_key(w, "noise_shape"); /* issue 15: a list with null for the input's dimensions */
        if (l->noise_shape.rank == 0) jw_null(w);
        else {
            jw_open(w, true);
            for (int i = 0; i < l->noise_shape.rank; i++) {
                if (l->noise_shape.dims[i] < 0) jw_null(w);
                else jw_int(w, (long long)l->noise_shape.dims[i]);
            }
            jw_close(w);
        }
        jw_seed(w, l->seed);
        break;
    case SY_LAYER_EMBEDDING: {
        jw_key(w, "input_dim");
        jw_int(w, l->input_dim);
        jw_key(w, "output_dim");
        jw_int(w, l->output_dim);
        INIT("embeddings_initializer", l->embeddings_initializer);
        jw_key(w, "embeddings_regularizer");
        jw_regularizer(w, &l->embeddings_regularizer);
        jw_key(w, "activity_regularizer");
        jw_regularizer(w, &l->activity_regularizer);
        jw_key(w, "embeddings_constraint");
        jw_null(w);
        jw_key(w, "mask_zero");
        jw_bool(w, l->mask_zero);
        jw_key(w, "input_length");
        if (l->input_length > 0) jw_int(w, l->input_length);
        else jw_null(w);
        break;
    }
    case SY_LAYER_LSTM:
    case SY_LAYER_GRU: {
        static const char *const nulls[] = {"kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                                            "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                                            "bias_constraint", NULL};
        keras_rnn_json_head(w, l);
        jw_key(w, "activation");
        jw_str(w, sy_activation_name(l->activation));
        jw_key(w, "recurrent_activation");
        jw_str(w, sy_activation_name(l->recurrent_activation));
        jw_key(w, "use_bias");
        jw_bool(w, l->use_bias);
        INIT("kernel_initializer", l->kernel_initializer);
        INIT("recurrent_initializer", l->recurrent_initializer);
        INIT("bias_initializer", l->bias_initializer);
        if (l->kind == SY_LAYER_LSTM) {
            jw_key(w, "unit_forget_bias");
            jw_bool(w, l->unit_forget_bias);
        }
        jw_nulls(w, nulls);
        jw_key(w, "dropout");
        jw_real(w, l->dropout, true);
        jw_key(w, "recurrent_dropout");
        jw_real(w, l->recurrent_dropout, true);
        jw_key(w, "implementation"); /* Keras sets 1 when there is a recurrent dropout */
        jw_int(w, l->recurrent_dropout != 0 ? 1 : 2);
        if (l->kind == SY_LAYER_GRU) {
            jw_key(w, "reset_after");
            jw_bool(w, l->reset_after);
        }
        break;
    }
    default: break;
    }
    jw_close(w);
#undef INIT
#undef REGULARIZERS
    return bad;
}

/* An InputLayer's entry of the layers list. */
static void write_input_layer(jw *w, const sy_model *m, int input, bool functional) {
    const model_input *in = &m->inputs[input];
    char name[2 * LAYER_NAME_MAX];
    if (in->name[0]) snprintf(name, sizeof name, "%s", in->name);
    else snprintf(name, sizeof name, "%s_input", m->layers[0].name); /* Sequential's default */
    jw_open(w, false);
    jw_key(w, "module");
    jw_str(w, "keras.layers");
    jw_key(w, "class_name");
    jw_str(w, "InputLayer");
    jw_key(w, "config");
    jw_open(w, false);
    jw_key(w, "batch_input_shape");
    jw_shape(w, &in->shape, true);
    jw_key(w, "dtype");
    jw_str(w, in->dtype[0] ? in->dtype : "float32");
    jw_key(w, "sparse");
    jw_bool(w, false);
    jw_key(w, "ragged");
    jw_bool(w, false);
    jw_key(w, "name");
    jw_str(w, name);
    jw_close(w);
    jw_key(w, "registered_name");
    jw_null(w);
    if (functional) {
        jw_key(w, "name");
        jw_str(w, name);
        jw_key(w, "inbound_nodes");
        jw_open(w, true);
        jw_close(w);
    }
    jw_close(w);
}

static const char *node_layer_name(const sy_model *m, const model_node *n) {
    return n->layer >= 0 ? m->layers[n->layer].name : m->inputs[n->input].name;
}

/* A layer's entry: class, config, build_config and, in a Functional
 * model, its name and inbound nodes. Returns the argument Keras cannot
 * hold, or NULL. */
static const char *write_model_config(jw *w, const sy_model *m, const model_layer **bad_layer);

static const char *write_layer_entry(jw *w, const sy_model *m, int64_t i, const model_layer **bad_layer) {
    const model_layer *L = &m->layers[i];
    const char *bad;
    jw_open(w, false);
    if (L->sub) { /* issue 15: a nested model, its config inline as Keras 2.15 writes it */
        jw_key(w, "module");
        jw_str(w, L->sub->functional ? "keras.src.engine.functional" : "keras");
        jw_key(w, "class_name");
        jw_str(w, model_layer_class(L));
        jw_key(w, "config");
        bad = write_model_config(w, L->sub, bad_layer);
        jw_key(w, "registered_name");
        if (L->sub->functional) jw_str(w, "Functional");
        else jw_null(w);
    } else {
        jw_key(w, "module");
        jw_str(w, "keras.layers");
        jw_key(w, "class_name");
        jw_str(w, sy_layer_class_name(L->cfg.kind));
        jw_key(w, "config");
        bad = write_layer_config(w, L);
        if (bad) *bad_layer = L;
        jw_key(w, "registered_name");
        jw_null(w);
    }
    const model_node *first = NULL;
    for (int64_t k = 0; k < m->n_nodes && !first; k++)
        if (m->nodes[k].layer == i) first = &m->nodes[k];
    if (m->built && first) {
        jw_key(w, "build_config");
        jw_open(w, false);
        jw_key(w, "input_shape");
        if (first->n_in == 1) {
            jw_shape(w, &m->nodes[m->edges[first->in_off]].shape, true);
        } else {
            jw_open(w, true);
            for (int k = 0; k < first->n_in; k++) jw_shape(w, &m->nodes[m->edges[first->in_off + k]].shape, true);
            jw_close(w);
        }
        jw_close(w);
    }
    if (m->functional) {
        jw_key(w, "name");
        jw_str(w, L->name);
        jw_key(w, "inbound_nodes");
        jw_open(w, true);
        for (int64_t k = 0; k < m->n_nodes; k++) {
            const model_node *n = &m->nodes[k];
            if (n->layer != i) continue;
            jw_open(w, true);
            for (int e = 0; e < n->n_in; e++) {
                const model_node *from = &m->nodes[m->edges[n->in_off + e]];
                jw_open(w, true);
                jw_str(w, node_layer_name(m, from));
                jw_int(w, model_node_index(m, from));
                jw_int(w, 0);
                jw_open(w, false);
                jw_close(w);
                jw_close(w);
            }
            jw_close(w);
        }
        jw_close(w);
    }
    jw_close(w);
    return bad;
}

/* The "config" object of a model: Sequential's name and layers, or
 * Functional's name, trainable, layers, input_layers and output_layers.
 * Returns the argument Keras cannot hold (its layer in *bad_layer), or NULL. */
static const char *write_model_config(jw *w, const sy_model *m, const model_layer **bad_layer) {
    const char *bad = NULL;
    jw_open(w, false);
    jw_key(w, "name");
    jw_str(w, m->name);
    if (m->functional) {
        jw_key(w, "trainable");
        jw_bool(w, true);
    }
    jw_key(w, "layers");
    jw_open(w, true);
    if (m->functional) {
        for (int32_t k = 0; k < m->n_order; k++) {
            int32_t e = m->order[k];
            if (e < 0) {
                write_input_layer(w, m, -1 - e, true);
                continue;
            }
            const char *b = write_layer_entry(w, m, e, bad_layer);
            if (b && !bad) bad = b;
        }
    } else {
        if (m->built && m->n_layers > 0) write_input_layer(w, m, 0, false);
        for (int64_t i = 0; i < m->n_layers; i++) {
            const char *b = write_layer_entry(w, m, i, bad_layer);
            if (b && !bad) bad = b;
        }
    }
    jw_close(w);
    if (m->functional) {
        static const char *const keys[2] = {"input_layers", "output_layers"};
        for (int io = 0; io < 2; io++) {
            jw_key(w, keys[io]);
            jw_open(w, true);
            int n = io ? m->n_outputs : m->n_inputs;
            for (int k = 0; k < n; k++) {
                const model_node *node = &m->nodes[io ? m->outputs[k] : m->inputs[k].node];
                jw_open(w, true);
                jw_str(w, node_layer_name(m, node));
                jw_int(w, model_node_index(m, node));
                jw_int(w, 0);
                jw_close(w);
            }
            jw_close(w);
        }
    }
    jw_close(w);
    return bad;
}

sy_status sy_model_to_json(const sy_model *m, char **json) {
    *json = NULL;
    jw w;
    memset(&w, 0, sizeof w);
    const model_layer *bad_layer = NULL;
    jw_open(&w, false);
    jw_key(&w, "class_name");
    jw_str(&w, m->functional ? "Functional" : "Sequential");
    jw_key(&w, "config");
    const char *bad = write_model_config(&w, m, &bad_layer);
    jw_key(&w, "keras_version");
    jw_str(&w, KERAS_VERSION);
    jw_key(&w, "backend");
    jw_str(&w, "tensorflow");
    jw_close(&w);
    if (w.failed || bad) {
        sy_free(w.buf);
        if (bad)
            return sy_error(SY_ERR_UNSUPPORTED, "to_json: layer '%s' (%s): its %s has no Keras equivalent",
                            bad_layer->name, sy_layer_class_name(bad_layer->cfg.kind), bad);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "to_json: out of memory");
    }
    *json = w.buf;
    return SY_OK;
}
