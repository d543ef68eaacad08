/*
 * nested.c - a model used as a layer of another (issue 15): Keras's
 * `outer(inner(x))` where inner is a Sequential or Functional model, and a
 * model added to a Sequential one.
 *
 * The layer (kind SY_LAYER_MODEL, sy_layer_model) names the inner model;
 * when the outer model builds it (its first call, or sy_model_add) the
 * outer model makes its own copy of the inner one (model_layer.sub): the
 * layers, the graph of their calls and the weights as they are then. The
 * copy keeps its variables in the outer model's store, named
 * "<nested model>/<layer>/<weight>" ("features/dense/kernel"), so the
 * graph built for the outer model -- the nested model's layers built
 * under its name's scope (compile.c) -- finds them there, and training,
 * saving and loading the outer model handle them as its own. A copy and
 * not the caller's object, because a model owns its store and its plans:
 * the caller's model stays whole and usable, and freeing either is safe.
 * Keras shares one object between both; what the two agree on is the
 * outer model's behaviour, its weights, files and names.
 *
 * Keras names a nested model's variables as the inner model made them
 * ("dense/kernel:0", no model name), lists them in the outer .h5 under a
 * group named after the nested model (model_var_keras_name), and counts a
 * nested model's calls in the outer JSON from 1: node 0 is the inner
 * model's own call on its inputs (model_node_index).
 */
#include "keras_internal.h"

#include <string.h>

sy_layer sy_layer_model(const sy_model *inner) {
    sy_layer l;
    memset(&l, 0, sizeof l);
    l.kind = SY_LAYER_MODEL;
    l.name = inner ? inner->name : NULL;
    l.model = inner;
    return l;
}

const char *model_layer_class(const model_layer *L) {
    if (!L->sub) return sy_layer_class_name(L->cfg.kind);
    return L->sub->functional ? "Functional" : "Sequential";
}

int32_t model_node_index(const sy_model *m, const model_node *n) {
    return n->layer >= 0 && m->layers[n->layer].sub ? n->call + 1 : n->call;
}

/* ---- the layer -------------------------------------------------------------------------- */

static sy_status usable(const sy_model *inner, const char *name) {
    if (!inner) return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s': sy_layer_model(NULL): no model", name);
    if (!inner->built || inner->n_layers == 0 || (inner->functional && inner->n_outputs == 0))
        return sy_error(SY_ERR_STATE, "model '%s' is used as a layer before it is built: give it an input shape%s",
                        inner->name, inner->functional ? " and its outputs (sy_model_set_outputs)" : "");
    if (inner->n_inputs != 1 || inner->n_outputs != 1)
        return sy_error(SY_ERR_UNSUPPORTED, "model '%s' has %d inputs and %d outputs; a model used as a layer must "
                        "have one of each here", inner->name, inner->n_inputs, inner->n_outputs);
    return SY_OK;
}

static sy_status nested_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                     sy_shape *out) {
    (void)n_in;
    sy_status st = usable(l->model, name);
    if (st) return st;
    const sy_model *inner = l->model;
    if (!sy_shape_equal(&in[0], &inner->inputs[0].shape)) { /* Keras's input_spec check */
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_SHAPE, "Input 0 of layer \"%s\" is incompatible with the layer: expected shape=%s, "
                        "found shape=%s (model '%s' used as a layer takes the input it was built for)",
                        name, keras_shape_str(&inner->inputs[0].shape, a, sizeof a), keras_shape_str(&in[0], b, sizeof b),
                        inner->name);
    }
    *out = model_output_shape(inner);
    return SY_OK;
}

/* Never called: keras_build_layers builds a nested model's layers itself
 * (they have weights of their own and penalties to add). */
static sy_node nested_build_node(sy_graph *g, const sy_layer *l, const sy_node *x, int n_in, const sy_node *w,
                                 const layer_ctx *ctx) {
    (void)g, (void)l, (void)n_in, (void)w, (void)ctx;
    return x[0];
}

const layer_impl keras_model_layer = {
    .kind = SY_LAYER_MODEL,
    .class_name = "Functional",
    .prefix = "model",
    .output_shape = nested_output_shape,
    .build = nested_build_node,
};

/* ---- the copy ----------------------------------------------------------------------------- */

static void *dup_array(const void *src, int64_t n, size_t size, bool *failed) {
    void *p = sy_malloc((size_t)(n > 0 ? n : 1) * size);
    if (!p) {
        *failed = true;
        return NULL;
    }
    if (n > 0) memcpy(p, src, (size_t)n * size);
    return p;
}

/* Copy `inner` into a model whose variables live in `store`, named
 * prefix + each variable's name within its own model. */
static sy_status copy_model(sy_vars *store, const sy_model *inner, const char *prefix, uint64_t seed, sy_model **out) {
    *out = NULL;
    sy_model *c = sy_calloc(1, sizeof *c);
    if (!c) return sy_error(SY_ERR_OUT_OF_MEMORY, "model '%s': out of memory", inner->name);
    *c = *inner;
    c->layers = NULL, c->nodes = NULL, c->edges = NULL, c->order = NULL;
    memset(c->plans, 0, sizeof c->plans);
    c->strategy = NULL, c->own_strategy = NULL, c->compiled = false;
    c->vars = store;
    c->vars_borrowed = true;
    c->var_prefix = (int32_t)strlen(prefix);
    c->seed = seed;
    bool failed = false;
    c->layers = dup_array(inner->layers, inner->n_layers, sizeof *c->layers, &failed);
    c->nodes = dup_array(inner->nodes, inner->n_nodes, sizeof *c->nodes, &failed);
    c->edges = dup_array(inner->edges, inner->n_edges, sizeof *c->edges, &failed);
    c->order = dup_array(inner->order, inner->n_order, sizeof *c->order, &failed);
    c->cap_layers = inner->n_layers, c->cap_nodes = inner->n_nodes, c->cap_edges = inner->n_edges;
    sy_status st = failed ? sy_error(SY_ERR_OUT_OF_MEMORY, "model '%s': out of memory", inner->name) : SY_OK;
    for (int64_t i = 0; c->layers && i < c->n_layers; i++) c->layers[i].sub = NULL; /* not yet ours */
    for (int64_t i = 0; !st && i < c->n_layers; i++) {
        model_layer *L = &c->layers[i];
        const model_layer *I = &inner->layers[i];
        L->cfg.name = L->name;
        char name[4 * LAYER_NAME_MAX + 64];
        if (I->sub) {
            snprintf(name, sizeof name, "%s%s/", prefix, L->name);
            if (!(st = copy_model(store, I->sub, name, sy_mix64(seed ^ (uint64_t)i), &L->sub))) L->cfg.model = L->sub;
            continue;
        }
        for (int j = 0; j < I->n_weights && !st; j++) {
            int32_t v = I->weight_var[j];
            snprintf(name, sizeof name, "%s%s", prefix, sy_vars_name(inner->vars, v) + inner->var_prefix);
            sy_shape s = sy_vars_shape(inner->vars, v);
            if ((st = sy_vars_add(store, name, SY_F32, s, sy_init_zeros(), &L->weight_var[j]))) break;
            memcpy(sy_vars_data(store, L->weight_var[j]), sy_vars_data(inner->vars, v),
                   (size_t)sy_shape_count(&s) * sizeof(float));
        }
    }
    if (st) {
        sy_model_free(c);
        return st;
    }
    *out = c;
    return SY_OK;
}

static bool contains(const sy_model *m, const sy_model *x) {
    if (m == x) return true;
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].sub && contains(m->layers[i].sub, x)) return true;
    return false;
}

sy_status nested_check(const sy_model *m, int64_t i) {
    const model_layer *L = &m->layers[i];
    const sy_model *inner = L->cfg.model;
    if (inner && contains(inner, m))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s': model '%s' cannot be used as a layer of itself (a "
                        "cycle)", L->name, m->name);
    return usable(inner, L->name);
}

sy_status nested_build(sy_model *m, int64_t i) {
    model_layer *L = &m->layers[i];
    const sy_model *inner = L->cfg.model;
    sy_status st = nested_check(m, i);
    if (st) return st;
    char prefix[LAYER_NAME_MAX + 2];
    snprintf(prefix, sizeof prefix, "%s/", L->name);
    if ((st = copy_model(m->vars, inner, prefix, sy_mix64(m->seed ^ (uint64_t)L->born ^ 0x4E57ull), &L->sub))) return st;
    L->cfg.model = L->sub;
    L->n_weights = 0;
    L->params = sy_model_param_count(L->sub, -1);
    L->non_trainable_params = 0;
    for (int64_t k = 0; k < L->sub->n_layers; k++) L->non_trainable_params += L->sub->layers[k].non_trainable_params;
    return SY_OK;
}

/* ---- its variables ------------------------------------------------------------------------- */

/* Every variable of layer i, with whether it is trainable, in layer order. */
static void collect(const sy_model *m, int64_t i, int32_t *vars, bool *frozen, int32_t *n, int32_t max) {
    const model_layer *L = &m->layers[i];
    if (L->sub) {
        for (int64_t k = 0; k < L->sub->n_layers; k++) collect(L->sub, k, vars, frozen, n, max);
        return;
    }
    for (int j = 0; j < L->n_weights; j++, (*n)++)
        if (vars && *n < max) vars[*n] = L->weight_var[j], frozen[*n] = (L->non_trainable >> j) & 1u;
}

int32_t model_layer_vars(const sy_model *m, int64_t i, bool legacy, int32_t *vars, int32_t max) {
    const model_layer *L = &m->layers[i];
    if (!L->sub) {
        for (int j = 0; vars && j < L->n_weights && j < max; j++) vars[j] = L->weight_var[j];
        return L->n_weights;
    }
    int32_t n = 0;
    collect(m, i, NULL, NULL, &n, 0);
    if (!vars) return n;
    int32_t *all = sy_malloc((size_t)n * sizeof *all + 1);
    bool *frozen = sy_malloc((size_t)n * sizeof *frozen + 1);
    int32_t got = 0, k = 0;
    if (all && frozen) {
        collect(m, i, all, frozen, &got, n);
        for (int pass = 0; pass < (legacy ? 2 : 1); pass++) /* Keras's _legacy_weights: trainable first */
            for (int32_t j = 0; j < n; j++)
                if (!legacy || frozen[j] == (pass == 1))
                    if (k < max) vars[k++] = all[j];
    }
    sy_free(all);
    sy_free(frozen);
    return n;
}

static bool owns(const sy_model *m, int64_t i, int32_t v) {
    const model_layer *L = &m->layers[i];
    if (!L->sub) {
        for (int j = 0; j < L->n_weights; j++)
            if (L->weight_var[j] == v) return true;
        return false;
    }
    for (int64_t k = 0; k < L->sub->n_layers; k++)
        if (owns(L->sub, k, v)) return true;
    return false;
}

const char *model_var_keras_name(const sy_model *m, int64_t i, int32_t v) {
    const model_layer *L = &m->layers[i];
    if (L->sub)
        for (int64_t k = 0; k < L->sub->n_layers; k++)
            if (owns(L->sub, k, v)) return model_var_keras_name(L->sub, k, v);
    return sy_vars_name(m->vars, v) + m->var_prefix;
}
