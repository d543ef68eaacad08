/*
 * keras_config.h - the pieces of Keras's model JSON that layer files share:
 * reading one layer's config (rd_*, config_read.c) and writing it as
 * Python's json.dumps does (jw_*, config.c).
 *
 * A layer kind describes its own JSON in its layer_impl (json_keys,
 * json_read, json_write), so a new layer is one file: its shapes, weights,
 * graph and config together. config_read.c checks the keys every layer
 * shares (name, trainable, dtype, the input shape) and then calls the
 * kind's json_read on a sy_layer holding the kind's defaults; config.c
 * writes name, trainable, dtype and the input shape and then calls
 * json_write for the rest, in the order of Keras's get_config().
 */
#ifndef SY_KERAS_CONFIG_H
#define SY_KERAS_CONFIG_H

#include "keras_internal.h"

#include <jansson.h>

/* ---- reading ------------------------------------------------------------------- */

/* One layer's config being read: its name and class for messages. */
typedef struct rd {
    const char *name, *cls;
    json_t *cfg;
} rd;

/* "model JSON: layer 'NAME' (CLASS): ..." with status st. */
sy_status rd_err(const rd *r, sy_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
json_t *rd_get(const rd *r, const char *key);
/* An integer in [lo, hi]; absent: def, or an error when required. */
sy_status rd_int(const rd *r, const char *key, bool required, int64_t def, int64_t lo, int64_t hi, int64_t *out);
sy_status rd_i32(const rd *r, const char *key, bool required, int32_t def, int32_t lo, int32_t *out);
/* A pair of positive integers: n (n, n) or [a, b]. */
sy_status rd_pair(const rd *r, const char *key, bool required, int32_t def, int32_t out[2]);
sy_status rd_bool(const rd *r, const char *key, bool def, bool *out);
/* The key may be absent or hold `want`; anything else is refused as unsupported. */
sy_status rd_bool_only(const rd *r, const char *key, bool want);
sy_status rd_float(const rd *r, const char *key, bool required, float def, float *out);
/* The key may be absent or null; anything else is refused as unsupported. */
sy_status rd_null(const rd *r, const char *key);
sy_status rd_nulls(const rd *r, const char *const *keys);
/* data_format: absent, null or "channels_last". */
sy_status rd_data_format(const rd *r);
sy_status rd_padding(const rd *r, sy_padding *out);
sy_status rd_activation(const rd *r, const char *key, sy_activation def, bool required, sy_activation *out);
sy_status rd_init(const rd *r, const char *key, sy_init def, sy_init *out);
/* A shape list; batch: the first entry is the batch axis (ignored). *known:
 * every other dimension is a number. */
sy_status rd_shape(const rd *r, const char *key, json_t *v, bool batch, sy_shape *out, bool *known);
sy_status rd_seed(const rd *r, uint64_t *out);
/* issue 15: a regularizer: null, 'l1', 'l2', 'l1_l2', or {"class_name": "L1" | "L2" | "L1L2", "config": {...}}. */
sy_status rd_regularizer(const rd *r, const char *key, sy_regularizer *out);
/* A number or a list of numbers (Rescaling's scale); absent: def. */
sy_status rd_numbers(const rd *r, const char *key, sy_numbers def, sy_numbers *out);

/* ---- writing --------------------------------------------------------------------- */

#define JW_DEPTH 32

typedef struct jw {
    char *buf;
    size_t len, cap;
    size_t limit; /* 0: none; else stop, marking truncated, past this many bytes */
    bool failed;  /* out of memory */
    bool truncated;
    int depth;
    bool array[JW_DEPTH], first[JW_DEPTH];
} jw;

void jw_open(jw *w, bool array); /* "{" or "[" */
void jw_close(jw *w);
void jw_key(jw *w, const char *key);
void jw_str(jw *w, const char *s);
void jw_int(jw *w, long long v);
void jw_bool(jw *w, bool v);
void jw_null(jw *w);
/* A number as Python's repr(float) writes it; single: the float32 value's
 * shortest decimal (Keras stores float32 arguments as Python floats). */
void jw_real(jw *w, double x, bool single);
void jw_json(jw *w, const json_t *v);
/* A shape list; batch: with a leading null. */
void jw_shape(jw *w, const sy_shape *s, bool batch);
void jw_pair(jw *w, int32_t a, int32_t b);
void jw_seed(jw *w, uint64_t seed);
/* An initializer as Keras 2.15 writes it; false if Keras has none equal. */
bool jw_init(jw *w, const sy_init *in);
/* issue 15: a regularizer as Keras 2.15 serializes it (null for none). */
void jw_regularizer(jw *w, const sy_regularizer *r);
/* A number or list of numbers as read (integers stay integers). */
void jw_numbers(jw *w, const sy_numbers *v);
/* The RNN layers' config from return_sequences to units (config.c). */
void keras_rnn_json_head(jw *w, const sy_layer *l);
/* Each key with the value null. */
void jw_nulls(jw *w, const char *const *keys);

/* issue 17, sequence layers: a layer's whole config dict (name, trainable,
 * dtype, input shape, then its own arguments), as a wrapper layer
 * (Bidirectional, TimeDistributed) writes its inner one. Returns the
 * argument Keras could not hold, or NULL. */
const char *keras_layer_config_write(jw *w, const sy_layer *l, const char *name);
/* And read: a {"class_name", "config"} entry into *l (l->name points into
 * the JSON), its keys checked as a model's layer's are. */
sy_status keras_layer_entry_read(json_t *entry, size_t index, sy_layer *l);
/* issue 16, mixed_bfloat16 (dtype_policy.c): a layer's dtype argument -- null (the global policy), a
 * policy's name, or Keras's Policy object -- and its writing as tf.keras 2.15's policy.serialize does. */
sy_status keras_policy_read(const rd *r, const json_t *v, sy_dtype_policy *out);
void keras_policy_write(jw *w, sy_dtype_policy p);

/* issue 17, learning-rate schedules (lr_schedule_config.c): a schedule as tf.keras 2.15
 * serializes it into an optimizer's config (a new reference; NULL for NONE), and read back from
 * that form or the legacy one without "module"; `where` prefixes the errors. */
json_t *keras_lr_schedule_json(const sy_lr_schedule *s);
sy_status keras_lr_schedule_read(const json_t *j, const char *where, sy_lr_schedule *out);
/* The double closest to the shortest decimal of the float x (0.1f -> 0.1): what Python shows of a
 * float32 value that Keras holds as np.float32 (config.c). */
double keras_float_as_decimal(float x);

#endif
