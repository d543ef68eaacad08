/*
 * dtype_policy.c - Keras's dtype policies (issue 16, mixed_bfloat16): the
 * global policy, a layer's policy in model JSON, and what a layer under
 * mixed_bfloat16 adds to the graph. docs/design/mixed-precision.md has the
 * semantics and how they were checked against tf.keras 2.15.
 *
 * A layer under "mixed_bfloat16" keeps its variables in float32 (the .h5
 * weights stay float32) and computes in bfloat16, as Keras's autocasting
 * does: its floating inputs and its variables are cast to bfloat16 when it
 * is called, and each op it adds is a bfloat16 op, whose float32 result is
 * rounded to bfloat16 (sy_graph_set_bf16; the plan rounds the op's output
 * after its kernel). Values stay float32 in memory: bfloat16 numbers with
 * float32 storage. The normalization layers compute in float32, as Keras's
 * do (their inputs cast up, statistics in float32), and round their output.
 *
 * In JSON a float32 layer writes "dtype": "float32" and a mixed one Keras's
 * Policy object; reading takes either form, a policy's name as a string,
 * or null (the global policy).
 */
#include "keras_config.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic int global_policy = SY_POLICY_FLOAT32;

/* The names tf.keras 2.15's Policy takes that systolic does not run. */
static const char *const other_policies[] = {"mixed_float16", "float16", "bfloat16", "float64", "_infer", NULL};

sy_status sy_dtype_policy_from_name(const char *name, const char *what, sy_dtype_policy *out) {
    const char *sep = what ? ": " : "";
    if (!what) what = "";
    if (!name) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s%sthe dtype policy is NULL", what, sep);
    if (!strcmp(name, "float32")) *out = SY_POLICY_FLOAT32;
    else if (!strcmp(name, "mixed_bfloat16")) *out = SY_POLICY_MIXED_BFLOAT16;
    else {
        for (const char *const *o = other_policies; *o; o++)
            if (!strcmp(name, *o))
                return sy_error(SY_ERR_UNSUPPORTED,
                                "%s%sdtype policy '%s' is not supported (supported: \"float32\", \"mixed_bfloat16\")",
                                what, sep, name);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s%s'%s' is not a dtype policy (Keras's are \"float32\", \"mixed_bfloat16\", "
                        "\"mixed_float16\", \"float16\", \"bfloat16\", \"float64\"; supported: \"float32\", "
                        "\"mixed_bfloat16\")",
                        what, sep, name);
    }
    return SY_OK;
}

sy_status sy_keras_set_global_policy(const char *name) {
    sy_dtype_policy p;
    sy_status st = sy_dtype_policy_from_name(name, "set_global_policy", &p);
    if (st) return st;
    atomic_store(&global_policy, (int)p);
    return SY_OK;
}

static sy_dtype_policy resolve(sy_dtype_policy p) {
    return p == SY_POLICY_GLOBAL ? (sy_dtype_policy)atomic_load(&global_policy) : p;
}

const char *sy_dtype_policy_name(sy_dtype_policy p) {
    return resolve(p) == SY_POLICY_MIXED_BFLOAT16 ? "mixed_bfloat16" : "float32";
}

const char *sy_keras_global_policy(void) { return sy_dtype_policy_name(SY_POLICY_GLOBAL); }

sy_status keras_policy_fix(sy_layer *l, const char *name) {
    if ((unsigned)l->dtype_policy > SY_POLICY_MIXED_BFLOAT16)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s': dtype_policy %d is not a sy_dtype_policy", name,
                        (int)l->dtype_policy);
    l->dtype_policy = resolve(l->dtype_policy);
    return SY_OK;
}

/* Keras computes these in float32 under a mixed policy: BatchNormalization casts a bfloat16 input to
 * float32, normalises with float32 variables and casts the result back; LayerNormalization normalises in a
 * fused op (float32 inside) but scales and shifts in bfloat16 -- here float32 too, rounded once
 * (docs/design/mixed-precision.md, "Not done"). */
static bool float32_inside(sy_layer_kind kind) {
    return kind == SY_LAYER_BATCH_NORMALIZATION || kind == SY_LAYER_LAYER_NORMALIZATION;
}

sy_node keras_policy_build(sy_graph *g, const layer_impl *impl, const sy_layer *l, const sy_node *x, int n_in,
                           const sy_node *w, int n_w, const layer_ctx *ctx) {
    if (l->dtype_policy != SY_POLICY_MIXED_BFLOAT16) return impl->build(g, l, x, n_in, w, ctx);
    if (float32_inside(l->kind)) { /* its inputs are bfloat16 numbers already: the cast up is exact */
        sy_node y = impl->build(g, l, x, n_in, w, ctx);
        return y == SY_NONE ? y : sy_graph_cast_bf16(g, y);
    }
    /* autocasting: floating inputs and variables cast to bfloat16 (an input that is a bfloat16 op's output
     * already holds bfloat16 numbers; integer ones, such as Embedding's indices, are not cast) */
    sy_node in[LAYER_MAX_INPUTS], wb[LAYER_MAX_WEIGHTS];
    for (int k = 0; k < n_in; k++)
        in[k] = sy_graph_dtype(g, x[k]) == SY_F32 && !sy_graph_is_bf16(g, x[k]) ? sy_graph_cast_bf16(g, x[k]) : x[k];
    for (int j = 0; j < n_w && j < LAYER_MAX_WEIGHTS; j++) wb[j] = sy_graph_cast_bf16(g, w[j]);
    bool was = sy_graph_set_bf16(g, true);
    sy_node y = impl->build(g, l, in, n_in, wb, ctx);
    sy_graph_set_bf16(g, was);
    return y;
}

sy_status keras_policy_read(const rd *r, const json_t *v, sy_dtype_policy *out) {
    *out = SY_POLICY_GLOBAL;
    if (!v || json_is_null(v)) return SY_OK;
    const json_t *name = v;
    if (json_is_object(v)) { /* {"module": "keras.mixed_precision", "class_name": "Policy", "config": {"name": ...}} */
        const json_t *cls = json_object_get(v, "class_name"), *cfg = json_object_get(v, "config");
        name = json_is_object(cfg) ? json_object_get(cfg, "name") : NULL;
        if (!json_is_string(cls) || strcmp(json_string_value(cls), "Policy") || !json_is_string(name))
            return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                          "dtype %s is not a dtype policy (a name, or {\"class_name\": \"Policy\", \"config\": "
                          "{\"name\": ...}})",
                          keras_json_show(v).s);
    }
    if (!json_is_string(name))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "dtype %s must be a policy's name or a Policy",
                      keras_json_show(v).s);
    sy_status st = sy_dtype_policy_from_name(json_string_value(name), NULL, out);
    return st ? rd_err(r, st, "%s", sy_last_error()) : SY_OK;
}

void keras_policy_write(jw *w, sy_dtype_policy p) {
    /* tf.keras 2.15's policy.serialize: a policy equivalent to a dtype is written as its name, any other as
     * the Policy object */
    if (resolve(p) != SY_POLICY_MIXED_BFLOAT16) {
        jw_str(w, "float32");
        return;
    }
    jw_open(w, false);
    jw_key(w, "module");
    jw_str(w, "keras.mixed_precision");
    jw_key(w, "class_name");
    jw_str(w, "Policy");
    jw_key(w, "config");
    jw_open(w, false);
    jw_key(w, "name");
    jw_str(w, "mixed_bfloat16");
    jw_close(w);
    jw_key(w, "registered_name");
    jw_null(w);
    jw_close(w);
}

static void set_all(sy_model *m, sy_dtype_policy p) {
    model_plans_free(m); /* the graph changes: plans are compiled again on use */
    for (int64_t i = 0; i < m->n_layers; i++) {
        m->layers[i].cfg.dtype_policy = p;
        if (m->layers[i].sub) set_all(m->layers[i].sub, p);
    }
}

sy_status sy_model_set_dtype_policy(sy_model *m, const char *name) {
    if (!m) return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_model_set_dtype_policy: the model is NULL");
    sy_dtype_policy p;
    sy_status st = sy_dtype_policy_from_name(name, "sy_model_set_dtype_policy", &p);
    if (st) return st;
    set_all(m, p);
    return SY_OK;
}
