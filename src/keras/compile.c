/*
 * compile.c - compile(): the loss, the metrics and the optimizer by Keras's
 * names; and the plans the model runs, one per mode, compiled from a graph
 * of the layers on first use at a given batch size.
 *
 * The graph of every mode is the model's graph of layer calls over one
 * input x per model input, each (batch, input_shape...); training builds
 * it with dropout active. Train and evaluate plans add labels y per output
 * and each output's loss per sample (batch,); the total per sample is
 * sum(loss_weight_j * loss_j) plus the regularization penalties once
 * (Keras's total loss), which is what evaluate() needs to leave padded rows
 * out; the train plan minimises its mean (Keras's SUM_OVER_BATCH_SIZE)
 * with the optimizer. The outputs' own losses (several outputs) and the
 * model's outputs are outputs of every plan, for the logs and predict().
 *
 * compile() takes Keras's forms of the loss (one for every output, a list
 * in output order, a dict by output name), loss_weights and metrics (a
 * flat list for every output, or per output) and keeps them per output
 * (model_head); a one-output model is the case n = 1. Everything is
 * checked before the model changes.
 * All plans share the model's variable store, so they share the weights;
 * the train plan adds the optimizer's slots to it.
 */
#include "keras_internal.h"

#include <math.h>
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

/* issue 17, optimizers: Keras's names (tf.keras.optimizers.get): the class
 * name in any case, each at tf.keras 2.15's defaults */
sy_status sy_optimizer_from_name(const char *name, sy_optimizer *out) {
    for (int k = SY_OPTIMIZER_SGD; name && k < SY_OPTIMIZER_KIND_COUNT; k++)
        if (strcasecmp(name, sy_optimizer_class_name((sy_optimizer_kind)k)) == 0) {
            *out = sy_optimizer_keras((sy_optimizer_kind)k);
            return SY_OK;
        }
    return sy_error(SY_ERR_NOT_FOUND,
                    "unknown optimizer '%s'; known: sgd, adam, rmsprop, adamw, adadelta, adagrad, adamax, adafactor, "
                    "nadam, ftrl, lion",
                    name ? name : "(null)");
}

/* Keras resolves "accuracy" by the shapes: a one-unit output is binary,
 * integer labels are sparse, anything else categorical. Labels here take
 * the loss's form, so the loss decides between sparse and categorical.
 * out_shape is the output the metric watches; h its loss. */
static sy_status resolve_metric(const char *where, const sy_shape *out_shape, const model_head *h, const char *name,
                                metric_spec *out) {
    int64_t classes = out_shape->dims[out_shape->rank - 1];
    bool sparse = h->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE;
    /* issue 17, losses and metrics: top-k, AUC, Precision, Recall, the mean errors, RMSE (metrics.c) */
    sy_status found = metric_resolve(where, name, sparse, out);
    if (found == SY_OK) return metric_check_output(where, out_shape, out);
    if (found != SY_ERR_NOT_FOUND) return found;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name ? name : "");
    if (name && (strcmp(name, "accuracy") == 0 || strcmp(name, "acc") == 0)) {
        out->kind = classes == 1 ? KERAS_METRIC_BINARY_ACCURACY
                    : sparse     ? KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY
                                 : KERAS_METRIC_CATEGORICAL_ACCURACY;
        return SY_OK;
    }
    if (name && strcmp(name, "sparse_categorical_accuracy") == 0) {
        if (!sparse)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: sparse_categorical_accuracy needs integer class labels, which only the "
                            "sparse_categorical_crossentropy loss takes; with '%s' use categorical_accuracy or accuracy",
                            where, h->loss_name);
        out->kind = KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY;
        return SY_OK;
    }
    static const struct {
        const char *name;
        keras_metric kind;
    } dense[] = {{"categorical_accuracy", KERAS_METRIC_CATEGORICAL_ACCURACY},
                 {"binary_accuracy", KERAS_METRIC_BINARY_ACCURACY},
                 {"mse", KERAS_METRIC_MSE},
                 {"mean_squared_error", KERAS_METRIC_MSE},
                 {"mae", KERAS_METRIC_MAE},
                 {"mean_absolute_error", KERAS_METRIC_MAE}};
    for (size_t i = 0; name && i < sizeof dense / sizeof dense[0]; i++)
        if (strcmp(name, dense[i].name) == 0) {
            if (sparse)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: %s compares with targets of the output's shape, but sparse_categorical_crossentropy "
                                "takes class indices; use sparse_categorical_accuracy or accuracy",
                                where, name);
            out->kind = dense[i].kind;
            return SY_OK;
        }
    return sy_error(SY_ERR_NOT_FOUND,
                    "%s: unknown metric '%s'; known: accuracy (acc), sparse_categorical_accuracy, "
                    "categorical_accuracy, binary_accuracy, mean_squared_error (mse), mean_absolute_error (mae), "
                    "mean_absolute_percentage_error (mape), mean_squared_logarithmic_error (msle), "
                    "top_k_categorical_accuracy, sparse_top_k_categorical_accuracy, and the classes AUC, Precision, "
                    "Recall, RootMeanSquaredError, MeanSquaredError, MeanAbsoluteError, "
                    "MeanAbsolutePercentageError, MeanSquaredLogarithmicError, TopKCategoricalAccuracy, "
                    "SparseTopKCategoricalAccuracy (with arguments: \"AUC(curve='PR')\")",
                    where, name ? name : "(null)");
}

/* Zero the optimizer's slots and step count: a new compile() is a new optimizer. */
static void reset_optimizer_state(sy_model *m) {
    sy_vars *v = m->vars;
    for (int64_t i = 0; i < v->n_vars; i++)
        if (v->vars[i].kind == SY_VAR_SLOT) memset(sy_vars_data(v, (int32_t)i), 0, (size_t)v->vars[i].bytes);
    v->iterations = 0;
}

/* "['cls', 'reg']": the model's output names as Python prints a list. */
static void output_names(const sy_model *m, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int32_t j = 0; j < m->n_outputs && len < size; j++)
        len += (size_t)snprintf(buf + len, size - len, "%s'%s'", j ? ", " : "", model_output_name(m, j));
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* Which entry of o->outputs is output j's (entry[j]), and the form the
 * losses take: Keras's list (by position) or dict (by output name). */
static sy_status match_outputs(const sy_model *m, const sy_compile_options *o, int32_t *entry, loss_form *form,
                               int32_t *dict_order) {
    char names[1024];
    output_names(m, names, sizeof names);
    int32_t n = m->n_outputs;
    *form = LOSS_SINGLE;
    for (int32_t j = 0; j < n; j++) entry[j] = -1;
    if (!o->outputs) return SY_OK;
    bool named = o->outputs[0].output != NULL;
    for (int32_t i = 0; i < o->n_outputs; i++)
        if ((o->outputs[i].output != NULL) != named)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "compile: outputs[%d] %s an output name but outputs[0] %s; give every entry by name (Keras's "
                            "dict) or none (a list in output order)",
                            i, named ? "lacks" : "has", named ? "has one" : "does not");
    if (!named) {
        if (o->n_outputs != n)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "compile: %d output entries (losses, metrics) given, but model '%s' has %d output%s %s; a "
                            "list gives one entry per output, in order",
                            o->n_outputs, m->name, n, n == 1 ? "" : "s", names);
        for (int32_t j = 0; j < n; j++) entry[j] = j;
        *form = LOSS_LIST;
        return SY_OK;
    }
    for (int32_t i = 0; i < o->n_outputs; i++) {
        int32_t j = 0;
        while (j < n && strcmp(model_output_name(m, j), o->outputs[i].output) != 0) j++;
        if (j == n)
            return sy_error(SY_ERR_NOT_FOUND,
                            "compile: found a loss or metrics for '%s', which is not an output of model '%s'; its "
                            "outputs are %s",
                            o->outputs[i].output, m->name, names);
        if (entry[j] >= 0)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: output '%s' is given twice", o->outputs[i].output);
        entry[j] = i;
        dict_order[i] = j;
    }
    for (int32_t j = 0; j < n; j++)
        if (entry[j] < 0)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "compile: output '%s' of model '%s' has no entry; give every output %s its loss", 
                            model_output_name(m, j), m->name, names);
    *form = LOSS_DICT;
    return SY_OK;
}

/* Output j's loss, weight and metrics into h, from its entry e (NULL: the
 * options' single loss and flat metrics). */
static sy_status resolve_head(const sy_model *m, const sy_compile_options *o, int32_t j, const sy_compile_output *e,
                              double weight, model_head *h) {
    char where[LAYER_NAME_MAX + 32];
    if (m->n_outputs > 1) snprintf(where, sizeof where, "compile: output '%s'", model_output_name(m, j));
    else snprintf(where, sizeof where, "compile");
    memset(h, 0, sizeof *h);
    bool own = e && e->loss;
    h->weight = weight;
    sy_shape out = model_output_shape_at(m, j);
    /* issue 17: every Keras loss, with its Loss object's arguments */
    sy_status st = keras_loss_resolve(where, own ? e->loss : o->loss, own ? e->from_logits : o->from_logits,
                                      own ? e->loss_args : o->loss_args, &out, h);
    if (st) return st;
    const char *const *names = e && e->n_metrics ? e->metrics : o->metrics;
    int32_t n = e && e->n_metrics ? e->n_metrics : o->n_metrics;
    if (n < 0 || n > HEAD_MAX_METRICS || (n > 0 && !names))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %d metrics given; at most %d", where, n, HEAD_MAX_METRICS);
    for (int32_t i = 0; i < n; i++) {
        if ((st = resolve_metric(where, &out, h, names[i], &h->metrics[i]))) return st;
        snprintf(h->metrics[i].given, sizeof h->metrics[i].given, "%s", names[i]);
        for (int32_t k = 0; k < i; k++)
            if (strcmp(h->metrics[k].name, h->metrics[i].name) == 0)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: metric '%s' is listed twice", where, h->metrics[i].name);
        h->n_metrics = i + 1;
    }
    /* issue 17, fit arguments: weighted_metrics after them, "weighted_" when the name is taken (Keras's
     * _set_metric_names) */
    const char *const *wnames =
        e && e->n_weighted_metrics ? e->weighted_metrics : o->weighted_metrics;
    int32_t n_w = e && e->n_weighted_metrics ? e->n_weighted_metrics : o->n_weighted_metrics;
    if (n_w < 0 || h->n_metrics + n_w > HEAD_MAX_METRICS || (n_w > 0 && !wnames))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: %d metrics and %d weighted_metrics given; at most %d together", where,
                        h->n_metrics, n_w, HEAD_MAX_METRICS);
    for (int32_t i = 0; i < n_w; i++) {
        metric_spec *ms = &h->metrics[h->n_metrics];
        if ((st = resolve_metric(where, &out, h, wnames[i], ms))) return st;
        snprintf(ms->given, sizeof ms->given, "%s", wnames[i]);
        ms->weighted = true;
        for (int32_t k = 0; k < h->n_metrics; k++)
            if (strcmp(h->metrics[k].name, ms->name) == 0) {
                char renamed[sizeof ms->name];
                snprintf(renamed, sizeof renamed, "weighted_%.30s", ms->name);
                memcpy(ms->name, renamed, sizeof renamed);
                break;
            }
        for (int32_t k = 0; k < h->n_metrics; k++)
            if (strcmp(h->metrics[k].name, ms->name) == 0)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: Found two weighted metrics with the same name: %s", where,
                                ms->name);
        h->n_metrics++;
    }
    return SY_OK;
}

/* issue 17: each metric's place in the sums' state, every output's in turn; the metrics of a masked
 * output (masked[j]) and weighted ones keep their weights' sum after their state */
static sy_status place_metric_states(model_head *heads, int32_t n_outputs, const bool *masked) {
    int32_t at = 0;
    for (int32_t j = 0; j < n_outputs; j++)
        for (int32_t i = 0; i < heads[j].n_metrics; i++) {
            metric_spec *ms = &heads[j].metrics[i];
            ms->state = at;
            ms->masked = masked[j];
            ms->n_state = metric_state_size(ms) + (ms->weighted || ms->masked);
            at += ms->n_state;
            if (at > METRIC_STATE_MAX)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "compile: the metrics' running state needs more than %d numbers (metric '%s' and "
                                "those before it); give AUC fewer num_thresholds or fewer metrics",
                                METRIC_STATE_MAX, ms->name);
        }
    return SY_OK;
}

static bool has_mask_source(const sy_model *m) {
    for (int64_t i = 0; i < m->n_layers; i++) {
        const model_layer *L = &m->layers[i];
        if (L->cfg.kind == SY_LAYER_MASKING ||
            (L->cfg.kind == SY_LAYER_EMBEDDING && L->cfg.mask_zero) ||
            (L->sub && has_mask_source(L->sub)))
            return true;
    }
    return false;
}

/* issue 17, masking: which outputs carry a Keras mask, from a graph of the layers at batch 1 (built
 * only for a model with an Embedding(mask_zero) or a Masking layer); a graph that fails says
 * nothing here -- the plan reports it */
static void outputs_masked(sy_model *m, bool *masked) {
    for (int32_t j = 0; j < MODEL_MAX_IO; j++) masked[j] = false;
    sy_graph *g = NULL;
    if (!has_mask_source(m) || sy_graph_new(&g)) return;
    sy_node x[MODEL_MAX_IO], out[MODEL_MAX_IO], mask[MODEL_MAX_IO];
    for (int32_t i = 0; i < m->n_inputs; i++) {
        sy_shape in = model_input_shape_at(m, i);
        x[i] = sy_graph_input(g, "x", model_input_dtype(m, i), keras_batch_shape(1, &in));
    }
    if (keras_build_layers_masked(m, g, x, out, mask, false, false, NULL) && !sy_graph_status(g))
        for (int32_t j = 0; j < m->n_outputs; j++) masked[j] = mask[j] != SY_NONE;
    sy_graph_free(g);
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
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: an optimizer is required (sgd, adam, rmsprop, adamw, "
                                                 "adadelta, adagrad, adamax, adafactor, nadam, ftrl or lion)");
    if (o->n_metrics < 0 || o->n_metrics > HEAD_MAX_METRICS || (o->n_metrics > 0 && !o->metrics))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: %d metrics given; at most %d", o->n_metrics, HEAD_MAX_METRICS);
    if (o->threads < 0 || o->threads > 1024)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: threads %d must be 0 (one per core) to 1024", o->threads);
    if (o->steps_per_execution < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: steps_per_execution must be >= 1, got %d", o->steps_per_execution);
    if (o->n_outputs < 0 || o->n_outputs > MODEL_MAX_IO || (o->n_outputs > 0) != (o->outputs != NULL))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: outputs (%s) and n_outputs (%d) disagree",
                        o->outputs ? "given" : "NULL", o->n_outputs);
    const sy_backend *backend = sy_backend_find(o->backend ? o->backend : "cpu");
    if (!backend) return SY_ERR_NOT_FOUND;
    /* the outputs' entries, weights and metrics, all checked before anything changes */
    int32_t entry[MODEL_MAX_IO], dict_order[MODEL_MAX_IO] = {0};
    loss_form form;
    if ((st = match_outputs(m, o, entry, &form, dict_order))) return st;
    int32_t n_entries = o->outputs ? o->n_outputs : m->n_outputs;
    if (o->loss_weights && o->n_loss_weights != n_entries) {
        char names[1024];
        output_names(m, names, sizeof names);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "compile: %d loss_weights given, but model '%s' has %d output%s %s; give one per output",
                        o->n_loss_weights, m->name, m->n_outputs, m->n_outputs == 1 ? "" : "s", names);
    }
    bool per_output_metrics = false, per_output_weighted = false, own_loss = false;
    for (int32_t i = 0; o->outputs && i < o->n_outputs; i++) {
        per_output_metrics |= o->outputs[i].n_metrics > 0;
        per_output_weighted |= o->outputs[i].n_weighted_metrics > 0;
        own_loss |= o->outputs[i].loss != NULL;
    }
    if ((per_output_metrics && o->n_metrics > 0) ||
        (per_output_weighted && o->n_weighted_metrics > 0))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "compile: %smetrics are given both as a flat list (for every output) and "
                        "per output; give one",
                        per_output_weighted && o->n_weighted_metrics > 0 ? "weighted_" : "");
    if (!own_loss) form = LOSS_SINGLE; /* entries for metrics alone: the loss is still one for all */
    model_head heads[MODEL_MAX_IO];
    for (int32_t j = 0; j < m->n_outputs; j++) {
        int32_t e = entry[j];
        double w = !o->loss_weights ? 1.0 : o->loss_weights[e >= 0 ? e : j];
        if (!isfinite(w))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "compile: the loss weight of output '%s' is %g; it must be finite",
                            model_output_name(m, j), w);
        if ((st = resolve_head(m, o, j, e >= 0 ? &o->outputs[e] : NULL, w, &heads[j]))) return st;
    }
    bool masked[MODEL_MAX_IO];
    outputs_masked(m, masked);
    if ((st = place_metric_states(heads, m->n_outputs, masked))) return st;
    if (!m->strategy) { /* outside any scope: one replica, kernels on every core (or o->threads) */
        sy_strategy *own;
        if ((st = strategy_new(1, o->threads ? o->threads : sy_cpu_count(), &own))) return st;
        sy_strategy_free(m->own_strategy);
        m->own_strategy = own;
    }
    model_plans_free(m);
    memcpy(m->heads, heads, sizeof heads[0] * (size_t)m->n_outputs);
    m->form = form;
    memcpy(m->dict_order, dict_order, sizeof dict_order);
    m->loss_weights_given = o->loss_weights != NULL;
    m->optimizer = o->optimizer;
    m->lr_set_at = 0; /* issue 17, learning-rate schedules */
    m->logits_warned = false;
    snprintf(m->backend, sizeof m->backend, "%s", backend->name);
    m->steps_per_execution = o->steps_per_execution ? o->steps_per_execution : 1;
    reset_optimizer_state(m);
    m->compiled = true;
    return SY_OK;
}

/* ---- plans ----------------------------------------------------------------------------- */

sy_shape model_output_shape_at(const sy_model *m, int32_t j) {
    return j == 0 || j >= m->n_outputs ? model_output_shape(m) : m->nodes[m->outputs[j]].shape;
}

const char *model_output_name(const sy_model *m, int32_t j) {
    if (j < 0 || j >= m->n_outputs) return m->n_layers ? m->layers[m->n_layers - 1].name : m->name;
    const model_node *n = &m->nodes[m->outputs[j]];
    return n->layer >= 0 ? m->layers[n->layer].name : m->inputs[n->input].name;
}

sy_shape model_input_shape_at(const sy_model *m, int32_t i) {
    return i > 0 && i < m->n_inputs ? m->inputs[i].shape : m->input_shape;
}

int32_t model_metric_state_count(const sy_model *m) {
    int32_t n = 0;
    for (int32_t j = 0; j < m->n_outputs; j++)
        for (int32_t i = 0; i < m->heads[j].n_metrics; i++) n += m->heads[j].metrics[i].n_state;
    return n;
}

int32_t model_metric_count(const sy_model *m) {
    int32_t n = 0;
    for (int32_t j = 0; j < m->n_outputs; j++) n += m->heads[j].n_metrics;
    return n;
}

const model_layer *model_first_layer_of(const sy_model *m, int32_t i) {
    if (i == 0 || !m->functional) return model_first_layer(m);
    for (int64_t k = 0; k < m->n_nodes; k++) {
        const model_node *n = &m->nodes[k];
        if (n->layer >= 0 && n->n_in > 0 && m->edges[n->in_off] == m->inputs[i].node) return &m->layers[n->layer];
    }
    return NULL;
}

sy_shape model_label_shape(const sy_model *m, int32_t j) {
    sy_shape s = model_output_shape_at(m, j);
    if (m->heads[j].loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE) s.rank--;
    return s;
}

sy_dtype model_input_dtype(const sy_model *m, int32_t i) {
    if (i < m->n_inputs && m->inputs[i].dtype[0] && strncmp(m->inputs[i].dtype, "int", 3) == 0) return SY_I32;
    const model_layer *first = model_first_layer_of(m, i);
    if (first && first->sub) return model_input_dtype(first->sub, 0); /* issue 15: a nested model's first layer */
    return first && first->cfg.kind == SY_LAYER_EMBEDDING ? SY_I32 : SY_F32;
}

sy_dtype model_label_dtype(const sy_model *m, int32_t j) {
    return m->heads[j].loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE ? SY_I32 : SY_F32;
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
 * later calls add no weight penalties again). in_masks: the inputs' Keras
 * masks (NULL: none), as a nested model gets its caller's (Keras's
 * Functional.call(inputs, mask) sets them on its inputs); out_masks (NULL:
 * not wanted) receives the outputs'. */
static bool build_model(sy_model *m, sy_graph *g, const sy_node *inputs, const sy_node *in_masks,
                        sy_node *outputs, sy_node *out_masks, bool training, bool gradients,
                        sy_node *penalties, param_cache *cache, bool first, sy_node *all) {
    /* one graph node per model node; a layer's weights are params made at
     * its first call and used by every call, so shared layers share them */
    sy_node *value = sy_calloc((size_t)m->n_nodes + 1, sizeof *value);
    /* issue 17, masking: each node's Keras mask (docs/design/masking.md), SY_NONE: none */
    sy_node *mask = sy_calloc((size_t)m->n_nodes + 1, sizeof *mask);
    bool ok = false;
    if (!cache->w) {
        cache->w = sy_calloc((size_t)m->n_layers * LAYER_MAX_WEIGHTS + 1, sizeof *cache->w);
        cache->sub = sy_calloc((size_t)m->n_layers + 1, sizeof *cache->sub);
    }
    if (!value || !mask || !cache->w || !cache->sub) goto done;
    for (int64_t i = 0; i < m->n_nodes; i++) {
        const model_node *n = &m->nodes[i];
        mask[i] = SY_NONE;
        if (n->layer < 0) {
            value[i] = inputs[n->input];
            if (in_masks) mask[i] = in_masks[n->input];
            continue;
        }
        model_layer *L = &m->layers[n->layer];
        const layer_impl *impl = layer_impl_of(L->cfg.kind);
        sy_node *w = cache->w + (size_t)n->layer * LAYER_MAX_WEIGHTS, in[LAYER_MAX_INPUTS], in_mask[LAYER_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) {
            in[k] = value[m->edges[n->in_off + k]];
            in_mask[k] = mask[m->edges[n->in_off + k]];
        }
        sy_graph_push_scope(g, L->name);
        /* issue 15: a nested model, its layers under its name's scope; issue 17: masks cross it */
        if (L->sub) {
            bool again = cache->sub[n->layer].w != NULL;
            bool built = build_model(L->sub, g, in, in_mask, &value[i], &mask[i], training,
                                     gradients, penalties, &cache->sub[n->layer], first && !again, NULL);
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
        layer_ctx ctx = {.training = training,
                         .seed = L->cfg.seed ? L->cfg.seed
                                             : sy_mix64(m->seed ^ sy_mix64((uint64_t)L->born + 0xD0D0ull)) + (uint64_t)n->call,
                         .gradients = gradients,
                         .mask = n->n_in == 1 ? in_mask[0] : SY_NONE};
        value[i] = keras_policy_build(g, impl, &L->cfg, in, n->n_in, w, L->n_weights, &ctx);
        if (value[i] != SY_NONE && keras_output_mask(g, &L->cfg, L->name, in, in_mask, n->n_in, &mask[i])) {
            sy_graph_pop_scope(g);
            goto done;
        }
        /* the layer's weight penalties once (at its first call), its activity penalty at every call */
        if (penalties && value[i] != SY_NONE)
            *penalties = keras_layer_penalties(g, &L->cfg, in[0], n->call == 0 && first ? w : NULL, value[i], *penalties);
        sy_graph_pop_scope(g);
        if (value[i] == SY_NONE) goto done;
    }
    for (int32_t j = 0; j < m->n_outputs; j++) outputs[j] = value[m->outputs[j]];
    for (int32_t j = 0; out_masks && j < m->n_outputs; j++) out_masks[j] = mask[m->outputs[j]];
    if (all) memcpy(all, value, (size_t)m->n_nodes * sizeof *all);
    ok = m->n_outputs > 0;
done:
    sy_free(value);
    sy_free(mask);
    return ok;
}

bool keras_build_layers_masked(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *outputs, sy_node *out_masks,
                               bool training, bool gradients, sy_node *penalties) {
    param_cache cache = {NULL, NULL};
    if (penalties) *penalties = SY_NONE;
    bool ok = build_model(m, g, inputs, NULL, outputs, out_masks, training, gradients, penalties,
                          &cache, true, NULL);
    cache_free(&cache, m);
    return ok;
}

bool keras_build_nodes(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *values) {
    param_cache cache = {NULL, NULL};
    sy_node outputs[MODEL_MAX_IO];
    bool ok = build_model(m, g, inputs, NULL, outputs, NULL, false, false, NULL, &cache, true, values);
    cache_free(&cache, m);
    return ok;
}

bool keras_build_layers(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *outputs, bool training, bool gradients,
                        sy_node *penalties) {
    return keras_build_layers_masked(m, g, inputs, outputs, NULL, training, gradients, penalties);
}

static sy_strategy *model_strategy(const sy_model *m) { return m->strategy ? m->strategy : m->own_strategy; }

/* "x", "x_1", ...: the graph's name of input (or label) i. */
static const char *io_name(const char *base, int32_t i, char *buf, size_t size) {
    if (i == 0) snprintf(buf, size, "%s", base);
    else snprintf(buf, size, "%s_%d", base, i);
    return buf;
}

static sy_status compile_plan(sy_model *m, plan_mode mode, int64_t batch, model_plan *p) {
    sy_status st = sy_graph_new(&p->g);
    if (st) return st;
    sy_graph *g = p->g;
    char name[32];
    p->batch = batch;
    for (int32_t i = 0; i < m->n_inputs; i++) {
        sy_shape in = model_input_shape_at(m, i);
        p->x[i] = sy_graph_input(g, io_name("x", i, name, sizeof name), model_input_dtype(m, i),
                                 keras_batch_shape(batch, &in));
    }
    /* issue 17, fit arguments: sw; masking: real */
    p->per_example = p->loss = p->sw = p->real = SY_NONE;
    p->weighted = false;
    p->sw_steps = 0;
    for (int32_t j = 0; j < MODEL_MAX_IO; j++)
        p->y[j] = p->pred[j] = p->out_loss[j] = p->mask[j] = p->valid[j] = SY_NONE;
    sy_node penalties = SY_NONE, out_mask[MODEL_MAX_IO]; /* issue 17, masking: the outputs' masks weight the losses */
    for (int32_t j = 0; j < MODEL_MAX_IO; j++) out_mask[j] = SY_NONE;
    keras_build_layers_masked(m, g, p->x, p->pred, out_mask, mode == MODE_TRAIN, mode == MODE_TRAIN,
                              mode == MODE_PREDICT ? NULL : &penalties);
    sy_node outputs[3 * MODEL_MAX_IO + 1];
    int n_out = 0;
    sy_plan_options o = sy_plan_options_default();
    if (mode != MODE_PREDICT && !sy_graph_status(g)) {
        /* issue 17, masking: a loss over masked or ignored entries counts them over the real rows
         * only; the masks go to the host for the metrics */
        bool counted = false;
        for (int32_t j = 0; j < m->n_outputs; j++) {
            counted |= out_mask[j] != SY_NONE || m->heads[j].args.has_ignore_class;
            if ((p->mask[j] = out_mask[j]) != SY_NONE) outputs[n_out++] = p->mask[j];
        }
        if (counted)
            p->real = sy_graph_input(g, "real_rows", SY_F32, sy_shape_of(1, (int64_t)batch));
        /* Keras's total: sum(loss_weight_j * loss_j), the penalties once */
        sy_node total = SY_NONE;
        for (int32_t j = 0; j < m->n_outputs; j++) {
            sy_shape ls = model_label_shape(m, j);
            p->y[j] = sy_graph_input(g, io_name("y", j, name, sizeof name), model_label_dtype(m, j),
                                     keras_batch_shape(batch, &ls));
            /* issue 17, temporal sample weights: (batch, T), weighing each output's steps */
            if (j == 0 && m->sample_weighted && m->sample_weight_steps)
                p->sw = sy_graph_input(g, "sample_weight", SY_F32,
                                       sy_shape_of(2, (int64_t)batch, m->sample_weight_steps));
            if (m->heads[j].args.has_ignore_class)
                p->valid[j] = sy_graph_input(g, io_name("valid", j, name, sizeof name), SY_F32,
                                             keras_batch_shape(batch, &ls));
            sy_node l = p->out_loss[j] = keras_loss_build_masked(m, j, g, p->pred[j], p->y[j], out_mask[j],
                                                                 p->valid[j], p->real, p->sw);
            if (m->heads[j].weight != 1.0)
                l = sy_graph_mul(g, l, sy_graph_fill(g, SY_F32, sy_shape_of(0), m->heads[j].weight));
            total = total == SY_NONE ? l : sy_graph_add(g, total, l);
        }
        /* issue 17, fit arguments: each sample's weight multiplies its loss, before the penalties (Keras's
         * compute_weighted_loss, then the regularization losses added) */
        p->weighted = m->sample_weighted;
        p->sw_steps = p->weighted ? m->sample_weight_steps : 0;
        if (p->weighted && !p->sw_steps) {
            p->sw = sy_graph_input(g, "sample_weight", SY_F32, sy_shape_of(1, (int64_t)batch));
            total = sy_graph_mul(g, total, p->sw);
        }
        /* issue 15, regularizers: Keras's loss includes them, in fit and in evaluate */
        p->per_example = keras_regularization_loss(g, total, penalties);
        outputs[n_out++] = p->per_example;
        for (int32_t j = 0; m->n_outputs > 1 && j < m->n_outputs; j++) outputs[n_out++] = p->out_loss[j];
        if (mode == MODE_TRAIN) {
            /* issue 16, mixed_bfloat16: Keras's reduction of a bfloat16 loss is bfloat16 too */
            bool was_bf16 = sy_graph_set_bf16(g, sy_graph_is_bf16(g, p->per_example));
            p->loss = sy_graph_reduce_mean(g, p->per_example, NULL, 0, false);
            sy_graph_set_bf16(g, was_bf16);
            o.loss = p->loss;
            o.optimizer = m->optimizer;
        }
    }
    for (int32_t j = 0; j < m->n_outputs; j++) outputs[n_out++] = p->pred[j];
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
    if (p->rs && p->batch == batch && p->weighted == (m->sample_weighted && mode != MODE_PREDICT) &&
        p->sw_steps == (p->weighted ? m->sample_weight_steps : 0)) { /* issue 17: sw */
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
