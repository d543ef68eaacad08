/*
 * sequence_shape.c - RepeatVector and Permute (issue 17): layers that only
 * move values.
 *
 * RepeatVector(n): (batch, features) -> (batch, n, features), a broadcast
 * of the (batch, 1, features) view, whose gradient is the sum over the n
 * copies. Permute(dims): the axes after the batch in the order dims gives
 * them, 1-based as Keras writes them (Permute((2, 1)) swaps steps and
 * features), a transpose whose gradient is the inverse transpose.
 */
#include "sequence_layers.h"

#include <string.h>

static sy_layer plain(sy_layer_kind kind) {
    sy_layer l = sy_layer_flatten();
    l.kind = kind;
    return l;
}

sy_layer sy_layer_repeat_vector(int32_t n) {
    sy_layer l = plain(SY_LAYER_REPEAT_VECTOR);
    l.repeat_n = n;
    return l;
}

sy_layer sy_layer_permute(const int32_t *dims, int32_t n_dims) {
    sy_layer l = plain(SY_LAYER_PERMUTE);
    for (int32_t i = 0; i < n_dims && i < SY_MAX_RANK; i++) l.dims[i] = dims[i];
    l.n_dims = n_dims;
    return l;
}

/* ---- RepeatVector --------------------------------------------------------------------------- */

static sy_status repeat_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                     int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    if (l->repeat_n <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (RepeatVector): n must be a positive integer, got %d", name,
                        l->repeat_n);
    if (in->rank != 1)
        return sy_error(
            SY_ERR_SHAPE,
            "layer '%s' (RepeatVector): expected an input of shape (None, features), got %s", name,
            keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(2, (int64_t)l->repeat_n, in->dims[0]);
    return SY_OK;
}

/* x (B, F) -> (B, n, F) */
static sy_node repeat_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                            const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    sy_shape s = sy_graph_shape(g, in[0]);
    sy_node x = sy_graph_reshape(g, in[0], sy_shape_of(3, s.dims[0], (int64_t)1, s.dims[1]));
    return sy_graph_broadcast_to(g, x, sy_shape_of(3, s.dims[0], (int64_t)l->repeat_n, s.dims[1]));
}

static const char *const repeat_keys[] = {"n", "input_dim", NULL};

static sy_status repeat_json_read(const rd *r, sy_layer *l) {
    return rd_i32(r, "n", true, 0, 1, &l->repeat_n);
}

static void repeat_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "n");
    jw_int(w, l->repeat_n);
}

static sy_layer repeat_defaults(void) {
    return sy_layer_repeat_vector(0);
}

const layer_impl keras_repeat_vector = {
    .kind = SY_LAYER_REPEAT_VECTOR,
    .class_name = "RepeatVector",
    .prefix = "repeat_vector",
    .output_shape = repeat_output_shape,
    .build = repeat_build,
    .json_keys = repeat_keys,
    .json_read = repeat_json_read,
    .json_write = repeat_json_write,
    .defaults = repeat_defaults,
};

/* ---- Permute ------------------------------------------------------------------------------ */

static sy_status permute_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                      int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX], d[64];
    int used = snprintf(d, sizeof d, "(");
    for (int32_t i = 0; i < l->n_dims && i < SY_MAX_RANK && used < (int)sizeof d; i++)
        used += snprintf(d + used, sizeof d - (size_t)used, "%s%d", i ? ", " : "", l->dims[i]);
    if (used < (int)sizeof d)
        snprintf(d + used, sizeof d - (size_t)used, l->n_dims == 1 ? ",)" : ")");
    bool seen[SY_MAX_RANK + 1] = {false};
    bool ok = l->n_dims >= 1 && l->n_dims < SY_MAX_RANK;
    for (int32_t i = 0; ok && i < l->n_dims; i++) {
        ok = l->dims[i] >= 1 && l->dims[i] <= l->n_dims && !seen[l->dims[i]];
        if (ok) seen[l->dims[i]] = true;
    }
    if (!ok)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Permute): Invalid permutation argument `dims` for Permute "
                        "Layer. The set of "
                        "indices in `dims` must be consecutive and start from 1. Received dims=%s",
                        name, d);
    if (in->rank != l->n_dims)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Permute): dims %s reorder %d axes, but the input %s has %d",
                        name, d, l->n_dims, keras_shape_str(in, s, sizeof s), in->rank);
    out->rank = in->rank;
    for (int32_t i = 0; i < l->n_dims; i++) out->dims[i] = in->dims[l->dims[i] - 1];
    return SY_OK;
}

/* x (B, d1, ..., dn) -> (B, d[dims[0]], ..., d[dims[n-1]]) */
static sy_node permute_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                             const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)w, (void)ctx;
    int32_t perm[SY_MAX_RANK] = {0};
    for (int32_t i = 0; i < l->n_dims; i++) perm[i + 1] = l->dims[i];
    return sy_graph_transpose(g, in[0], perm);
}

static const char *const permute_keys[] = {"dims", "input_dim", NULL};

static sy_status permute_json_read(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "dims");
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 1 || n >= SY_MAX_RANK)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "dims must be a list of 1 to %d axes, got %s",
                      SY_MAX_RANK - 1, keras_json_show(v).s);
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(v, i);
        if (!json_is_integer(d) || json_integer_value(d) < 1 ||
            json_integer_value(d) > (json_int_t)n)
            return rd_err(
                r, SY_ERR_INVALID_ARGUMENT,
                "dims %s: each must be an axis from 1 to %zu (the batch axis is not counted)",
                keras_json_show(v).s, n);
        l->dims[i] = (int32_t)json_integer_value(d);
    }
    l->n_dims = (int32_t)n;
    return SY_OK;
}

static void permute_json_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "dims");
    jw_open(w, true);
    for (int32_t i = 0; i < l->n_dims; i++) jw_int(w, l->dims[i]);
    jw_close(w);
}

static sy_layer permute_defaults(void) {
    return sy_layer_permute(NULL, 0);
}

const layer_impl keras_permute = {
    .kind = SY_LAYER_PERMUTE,
    .class_name = "Permute",
    .prefix = "permute",
    .output_shape = permute_output_shape,
    .build = permute_build,
    .json_keys = permute_keys,
    .json_read = permute_json_read,
    .json_write = permute_json_write,
    .defaults = permute_defaults,
};
