/*
 * compile.c - compile(): the loss, the metrics and the optimizer by Keras's
 * names; and the plans the model runs, one per mode, compiled from a graph
 * of the layers on first use at a given batch size.
 *
 * The graph of every mode is the same layer stack over an input x of shape
 * (batch, input_shape...); training builds it with dropout active. Train
 * and evaluate plans add the labels y and the loss per sample (batch,),
 * which is what evaluate() needs to leave padded rows out; the train plan
 * minimises its mean (Keras's SUM_OVER_BATCH_SIZE) with the optimizer. The
 * model's output is an output of every plan, for metrics and predict().
 * All plans share the model's variable store, so they share the weights;
 * the train plan adds the optimizer's slots to it.
 */
#include "keras_internal.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>

sy_compile_options sy_compile_options_default(void) {
    sy_compile_options o;
    memset(&o, 0, sizeof o);
    o.optimizer = sy_optimizer_rmsprop(0.001f);
    o.backend = "cpu";
    return o;
}

sy_status sy_optimizer_from_name(const char *name, sy_optimizer *out) {
    if (name && strcasecmp(name, "sgd") == 0) *out = sy_optimizer_sgd(0.01f, 0.0f, false);
    else if (name && strcasecmp(name, "adam") == 0) *out = sy_optimizer_adam(0.001f);
    else if (name && strcasecmp(name, "rmsprop") == 0) *out = sy_optimizer_rmsprop(0.001f);
    else return sy_error(SY_ERR_NOT_FOUND, "unknown optimizer '%s'; known: sgd, adam, rmsprop", name ? name : "(null)");
    return SY_OK;
}

static const struct {
    const char *name;
    keras_loss loss;
} losses[] = {
    {"sparse_categorical_crossentropy", KERAS_LOSS_SPARSE_CATEGORICAL_CE},
    {"categorical_crossentropy", KERAS_LOSS_CATEGORICAL_CE},
    {"binary_crossentropy", KERAS_LOSS_BINARY_CE},
    {"mean_squared_error", KERAS_LOSS_MSE},
    {"mse", KERAS_LOSS_MSE},
    {"MSE", KERAS_LOSS_MSE},
};

static sy_status resolve_loss(sy_model *m, const char *name) {
    for (size_t i = 0; name && i < sizeof losses / sizeof losses[0]; i++)
        if (strcmp(name, losses[i].name) == 0) {
            m->loss = losses[i].loss;
            snprintf(m->loss_name, sizeof m->loss_name, "%s", name);
            return SY_OK;
        }
    return sy_error(SY_ERR_NOT_FOUND,
                    "compile: unknown loss '%s'; known: sparse_categorical_crossentropy, categorical_crossentropy, "
                    "binary_crossentropy, mean_squared_error (mse)",
                    name ? name : "(none given)");
}

/* Keras resolves "accuracy" by the shapes: a one-unit output is binary,
 * integer labels are sparse, anything else categorical. Labels here take
 * the loss's form, so the loss decides between sparse and categorical. */
static sy_status resolve_metric(sy_model *m, const char *name, metric_spec *out) {
    sy_shape out_shape = model_output_shape(m);
    int64_t classes = out_shape.dims[out_shape.rank - 1];
    snprintf(out->name, sizeof out->name, "%s", name ? name : "");
    if (name && (strcmp(name, "accuracy") == 0 || strcmp(name, "acc") == 0)) {
        out->kind = classes == 1                                   ? KERAS_METRIC_BINARY_ACCURACY
                    : m->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE ? KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY
                                                                   : KERAS_METRIC_CATEGORICAL_ACCURACY;
        return SY_OK;
    }
    if (name && strcmp(name, "sparse_categorical_accuracy") == 0) {
        if (m->loss != KERAS_LOSS_SPARSE_CATEGORICAL_CE)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "compile: sparse_categorical_accuracy needs integer class labels, which only the "
                            "sparse_categorical_crossentropy loss takes; with '%s' use categorical_accuracy or accuracy",
                            m->loss_name);
        out->kind = KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY;
        return SY_OK;
    }
    if (name && (strcmp(name, "categorical_accuracy") == 0 || strcmp(name, "binary_accuracy") == 0)) {
        if (m->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "compile: %s compares with targets of the output's shape, but sparse_categorical_crossentropy "
                            "takes class indices; use sparse_categorical_accuracy or accuracy",
                            name);
        out->kind = name[0] == 'c' ? KERAS_METRIC_CATEGORICAL_ACCURACY : KERAS_METRIC_BINARY_ACCURACY;
        return SY_OK;
    }
    return sy_error(SY_ERR_NOT_FOUND,
                    "compile: unknown metric '%s'; known: accuracy (acc), sparse_categorical_accuracy, "
                    "categorical_accuracy, binary_accuracy",
                    name ? name : "(null)");
}

/* Zero the optimizer's slots and step count: a new compile() is a new optimizer. */
static void reset_optimizer_state(sy_model *m) {
    sy_vars *v = m->vars;
    for (int64_t i = 0; i < v->n_vars; i++)
        if (v->vars[i].kind == SY_VAR_SLOT) memset(sy_vars_data(v, (int32_t)i), 0, (size_t)v->vars[i].bytes);
    v->iterations = 0;
}

sy_status sy_model_compile(sy_model *m, const sy_compile_options *o) {
    if (!m->built || m->n_layers == 0)
        return sy_error(SY_ERR_STATE,
                        "compile: model '%s' has %s; give the first layer an input_shape or call sy_model_build first",
                        m->name, m->n_layers ? "no input shape yet" : "no layers");
    sy_status st = model_runnable(m, "compile");
    if (st) return st;
    if ((st = optimizer_check(&o->optimizer))) return st;
    if (o->optimizer.kind == SY_OPTIMIZER_NONE)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: an optimizer is required (sgd, adam or rmsprop)");
    if (o->n_metrics < 0 || o->n_metrics > (int32_t)(sizeof m->metrics / sizeof m->metrics[0]) ||
        (o->n_metrics > 0 && !o->metrics))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: %d metrics given; at most %d", o->n_metrics,
                        (int)(sizeof m->metrics / sizeof m->metrics[0]));
    if (o->threads < 0 || o->threads > 1024)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: threads %d must be 0 (one per core) to 1024", o->threads);
    const sy_backend *backend = sy_backend_find(o->backend ? o->backend : "cpu");
    if (!backend) return SY_ERR_NOT_FOUND;
    sy_model saved = *m;
    if ((st = resolve_loss(m, o->loss))) goto fail;
    if (o->from_logits && m->loss == KERAS_LOSS_MSE) { /* Keras's MeanSquaredError has no from_logits */
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "compile: from_logits is an argument of the crossentropy losses, not of '%s'",
                      m->loss_name);
        goto fail;
    }
    sy_shape out = model_output_shape(m);
    if (m->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE && out.dims[out.rank - 1] < 2) {
        char s[SY_SHAPE_STR_MAX];
        st = sy_error(SY_ERR_SHAPE,
                      "compile: sparse_categorical_crossentropy needs one output per class, but the model's output is %s; "
                      "for two classes with one sigmoid unit use binary_crossentropy",
                      keras_shape_str(&out, s, sizeof s));
        goto fail;
    }
    m->n_metrics = 0;
    for (int32_t i = 0; i < o->n_metrics; i++) {
        if ((st = resolve_metric(m, o->metrics[i], &m->metrics[i]))) goto fail;
        for (int32_t j = 0; j < i; j++)
            if (strcmp(m->metrics[j].name, m->metrics[i].name) == 0) {
                st = sy_error(SY_ERR_INVALID_ARGUMENT, "compile: metric '%s' is listed twice", m->metrics[i].name);
                goto fail;
            }
        m->n_metrics = i + 1;
    }
    model_plans_free(m);
    m->optimizer = o->optimizer;
    m->from_logits = o->from_logits;
    m->logits_warned = false;
    snprintf(m->backend, sizeof m->backend, "%s", backend->name);
    if (o->steps_per_execution < 0) {
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "compile: steps_per_execution must be >= 1, got %d", o->steps_per_execution);
        goto fail;
    }
    if (!m->strategy) { /* outside any scope: one replica, kernels on every core (or o->threads) */
        sy_strategy *own;
        if ((st = strategy_new(1, o->threads ? o->threads : sy_cpu_count(), &own))) goto fail;
        sy_strategy_free(m->own_strategy);
        m->own_strategy = own;
    }
    m->steps_per_execution = o->steps_per_execution ? o->steps_per_execution : 1;
    reset_optimizer_state(m);
    m->compiled = true;
    return SY_OK;
fail:
    m->loss = saved.loss;
    m->n_metrics = saved.n_metrics;
    memcpy(m->metrics, saved.metrics, sizeof m->metrics);
    memcpy(m->loss_name, saved.loss_name, sizeof m->loss_name);
    return st;
}

/* ---- plans ----------------------------------------------------------------------------- */

sy_shape model_label_shape(const sy_model *m) {
    sy_shape s = model_output_shape(m);
    if (m->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE) s.rank--;
    return s;
}

sy_dtype model_input_dtype(const sy_model *m) {
    if (m->n_inputs > 0 && m->inputs[0].dtype[0] && strncmp(m->inputs[0].dtype, "int", 3) == 0) return SY_I32;
    const model_layer *first = model_first_layer(m);
    if (first && first->sub) return model_input_dtype(first->sub); /* issue 15: a nested model's first layer */
    return first && first->cfg.kind == SY_LAYER_EMBEDDING ? SY_I32 : SY_F32;
}

sy_dtype model_label_dtype(const sy_model *m) {
    return m->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE ? SY_I32 : SY_F32;
}

static void plan_clear(model_plan *p) {
    replicas_free(p->rs);
    sy_graph_free(p->g);
    memset(p, 0, sizeof *p);
}

void model_plans_free(sy_model *m) {
    for (int i = 0; i < MODE_COUNT; i++) plan_clear(&m->plans[i]);
}

sy_status model_runnable(const sy_model *m, const char *what) {
    if (m->functional && m->n_outputs == 0)
        return sy_error(SY_ERR_STATE, "%s: Functional model '%s' has no outputs yet (sy_model_set_outputs)", what, m->name);
    if (m->n_inputs > 1 || m->n_outputs > 1)
        return sy_error(SY_ERR_UNSUPPORTED, "%s: model '%s' has %d inputs and %d outputs; compiling, training and "
                        "running a model with several inputs or outputs is not supported yet (its JSON, weights and "
                        "summary are)", what, m->name, m->n_inputs, m->n_outputs);
    return SY_OK;
}

/* The params a model's layers made (per layer, LAYER_MAX_WEIGHTS of them)
 * and, for a nested model, its own (issue 15): made at a layer's first
 * call, reused by the later ones -- a nested model called twice shares
 * its weights too. */
typedef struct param_cache {
    sy_node *w;
    struct param_cache *sub; /* per layer; a nested model's cache, NULL: not made yet */
} param_cache;

static void cache_free(param_cache *c, const sy_model *m) {
    if (!c) return;
    for (int64_t i = 0; c->sub && i < m->n_layers; i++)
        if (c->sub[i].w) cache_free(&c->sub[i], m->layers[i].sub);
    sy_free(c->w);
    sy_free(c->sub);
}

/* first: this is the first time m's graph is built here (a nested model's
 * later calls add no weight penalties again). */
static bool build_model(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *outputs, bool training,
                        bool gradients, sy_node *penalties, param_cache *cache, bool first) {
    /* one graph node per model node; a layer's weights are params made at
     * its first call and used by every call, so shared layers share them */
    sy_node *value = sy_calloc((size_t)m->n_nodes + 1, sizeof *value);
    bool ok = false;
    if (!cache->w) {
        cache->w = sy_calloc((size_t)m->n_layers * LAYER_MAX_WEIGHTS + 1, sizeof *cache->w);
        cache->sub = sy_calloc((size_t)m->n_layers + 1, sizeof *cache->sub);
    }
    if (!value || !cache->w || !cache->sub) goto done;
    for (int64_t i = 0; i < m->n_nodes; i++) {
        const model_node *n = &m->nodes[i];
        if (n->layer < 0) {
            value[i] = inputs[n->input];
            continue;
        }
        model_layer *L = &m->layers[n->layer];
        const layer_impl *impl = layer_impl_of(L->cfg.kind);
        sy_node *w = cache->w + (size_t)n->layer * LAYER_MAX_WEIGHTS, in[LAYER_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = value[m->edges[n->in_off + k]];
        sy_graph_push_scope(g, L->name);
        if (L->sub) { /* issue 15: a nested model, its layers under its name's scope */
            bool again = cache->sub[n->layer].w != NULL;
            bool built = build_model(L->sub, g, in, &value[i], training, gradients, penalties, &cache->sub[n->layer],
                                     first && !again);
            sy_graph_pop_scope(g);
            if (!built) goto done;
            continue;
        }
        if (n->call == 0 && first)
            for (int j = 0; j < L->n_weights; j++) {
                const char *full = sy_vars_name(m->vars, L->weight_var[j]);
                const char *leaf = full + m->var_prefix + strlen(L->name) + 1; /* the name within the layer's scope */
                w[j] = sy_graph_param(g, leaf, SY_F32, sy_vars_shape(m->vars, L->weight_var[j]), sy_init_zeros());
                if (L->non_trainable & (1u << j)) sy_graph_set_trainable(g, w[j], false); /* moving statistics */
            }
        layer_ctx ctx = {training,
                         L->cfg.seed ? L->cfg.seed : sy_mix64(m->seed ^ sy_mix64((uint64_t)L->born + 0xD0D0ull)) + (uint64_t)n->call,
                         gradients};
        value[i] = impl->build(g, &L->cfg, in, n->n_in, w, &ctx);
        /* the layer's weight penalties once (at its first call), its activity penalty at every call */
        if (penalties && value[i] != SY_NONE)
            *penalties = keras_layer_penalties(g, &L->cfg, in[0], n->call == 0 && first ? w : NULL, value[i], *penalties);
        sy_graph_pop_scope(g);
        if (value[i] == SY_NONE) goto done;
    }
    for (int32_t j = 0; j < m->n_outputs; j++) outputs[j] = value[m->outputs[j]];
    ok = m->n_outputs > 0;
done:
    sy_free(value);
    return ok;
}

bool keras_build_layers(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *outputs, bool training, bool gradients,
                        sy_node *penalties) {
    param_cache cache = {NULL, NULL};
    if (penalties) *penalties = SY_NONE;
    bool ok = build_model(m, g, inputs, outputs, training, gradients, penalties, &cache, true);
    cache_free(&cache, m);
    return ok;
}

static sy_node build_loss(sy_model *m, sy_graph *g, sy_node pred, sy_node y) {
    sy_node l;
    keras_loss_warn_logits(m, g, pred);
    switch (m->loss) {
    case KERAS_LOSS_SPARSE_CATEGORICAL_CE: l = sy_graph_sparse_categorical_crossentropy(g, pred, y, m->from_logits); break;
    case KERAS_LOSS_CATEGORICAL_CE: l = sy_graph_categorical_crossentropy(g, pred, y, m->from_logits); break;
    case KERAS_LOSS_BINARY_CE: l = sy_graph_binary_crossentropy(g, pred, y, m->from_logits); break;
    default: l = sy_graph_mean_squared_error(g, pred, y); break;
    }
    sy_shape ls = sy_graph_shape(g, l);
    if (ls.rank > 1) { /* (batch, T, ...): the mean over the rest is each sample's loss */
        int32_t axes[SY_MAX_RANK];
        for (int i = 1; i < ls.rank; i++) axes[i - 1] = i;
        l = sy_graph_reduce_mean(g, l, axes, ls.rank - 1, false);
    }
    return l;
}

static sy_strategy *model_strategy(const sy_model *m) { return m->strategy ? m->strategy : m->own_strategy; }

static sy_status compile_plan(sy_model *m, plan_mode mode, int64_t batch, model_plan *p) {
    sy_status st = sy_graph_new(&p->g);
    if (st) return st;
    sy_graph *g = p->g;
    p->batch = batch;
    p->x = sy_graph_input(g, "x", model_input_dtype(m), keras_batch_shape(batch, &m->input_shape));
    p->y = p->per_example = p->loss = SY_NONE;
    sy_node penalties = SY_NONE;
    p->pred = SY_NONE;
    keras_build_layers(m, g, &p->x, &p->pred, mode == MODE_TRAIN, mode == MODE_TRAIN,
                       mode == MODE_PREDICT ? NULL : &penalties);
    sy_node outputs[2];
    int n_out = 0;
    sy_plan_options o = sy_plan_options_default();
    if (mode != MODE_PREDICT) {
        sy_shape ls = model_label_shape(m);
        p->y = sy_graph_input(g, "y", model_label_dtype(m), keras_batch_shape(batch, &ls));
        /* issue 15, regularizers: Keras's loss includes them, in fit and in evaluate */
        p->per_example = keras_regularization_loss(g, build_loss(m, g, p->pred, p->y), penalties);
        outputs[n_out++] = p->per_example;
        if (mode == MODE_TRAIN) {
            p->loss = sy_graph_reduce_mean(g, p->per_example, NULL, 0, false);
            o.loss = p->loss;
            o.optimizer = m->optimizer;
        }
    }
    outputs[n_out++] = p->pred;
    if (sy_graph_status(g))
        return sy_error(sy_graph_status(g), "model '%s': %s", m->name, sy_graph_error(g));
    o.outputs = outputs;
    o.n_outputs = n_out;
    o.vars = m->vars;
    o.backend = m->backend;
    o.seed = m->seed;
    return replicas_compile(model_strategy(m), g, &o, &p->rs);
}

int32_t model_replicas(const sy_model *m) { return m->strategy ? sy_strategy_num_replicas_in_sync(m->strategy) : 1; }

/* Fewer than 8 rows per replica leave a core too little work per step; the
 * TPU guides warn about it, and so does systolic, once per process. */
static void warn_small_batch(const sy_model *m, int64_t batch) {
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (batch >= 8 || atomic_flag_test_and_set(&warned)) return;
    int32_t r = model_replicas(m);
    sy_log(SY_LOG_WARNING,
           "fit: a global batch of %lld over %d replica%s gives %lld samples per replica; with fewer than 8 each core "
           "has too little work per step (the TPU guides advise 8 or more, ideally 128). Use a global batch of at "
           "least %d (--batch-size), or fewer replicas (--tpu cpu:N).",
           (long long)(batch * r), r, r == 1 ? "" : "s", (long long)batch, 8 * r);
}

sy_status model_plan_get(sy_model *m, plan_mode mode, int64_t batch, model_plan **out) {
    model_plan *p = &m->plans[mode];
    *out = NULL;
    if (!m->compiled && mode != MODE_PREDICT)
        return sy_error(SY_ERR_STATE, "model '%s' must be compiled (sy_model_compile) before fit or evaluate", m->name);
    if (!m->built) return sy_error(SY_ERR_STATE, "model '%s' has no input shape yet", m->name);
    sy_status runnable = model_runnable(m, mode == MODE_PREDICT ? "predict" : "fit");
    if (runnable) return runnable;
    if (p->rs && p->batch == batch) {
        *out = p;
        return SY_OK;
    }
    plan_clear(p);
    if (!m->strategy && !m->own_strategy) { /* predict before any compile() */
        sy_status st = strategy_new(1, sy_cpu_count(), &m->own_strategy);
        if (st) return st;
    }
    if (!m->backend[0]) snprintf(m->backend, sizeof m->backend, "cpu");
    if (mode == MODE_TRAIN) warn_small_batch(m, batch);
    sy_status st = compile_plan(m, mode, batch, p);
    if (st) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        plan_clear(p);
        return sy_error(st, "%s", msg);
    }
    *out = p;
    return SY_OK;
}
