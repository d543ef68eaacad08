/*
 * model.c - the Sequential model: adding layers, building them (output
 * shapes and weights) once the input shape is known, the weights in Keras's
 * order and names, and summary().
 *
 * Layers are built as soon as their input shape is known, so a layer that
 * cannot follow the previous one is refused when it is added, with both
 * shapes, as Keras refuses it. A layer's weights are variables of the
 * model's store named "<layer>/<weight>" ("conv2d/kernel"); plans compiled
 * later find them there by name, so training, evaluation and prediction
 * share them. Automatic names follow Keras ("conv2d", "conv2d_1", ...) but
 * count per model, not per process, so a model gets the same names however
 * many were built before it.
 */
#include "keras_internal.h"

#include <string.h>

sy_status sy_model_new(const char *name, sy_model **out) {
    *out = NULL;
    sy_model *m = sy_calloc(1, sizeof *m);
    if (!m) return sy_error(SY_ERR_OUT_OF_MEMORY, "model: out of memory");
    snprintf(m->name, sizeof m->name, "%s", name && *name ? name : "sequential");
    m->strategy = sy_strategy_current();
    m->steps_per_execution = 1;
    sy_status st = sy_vars_new(&m->vars);
    if (st) {
        sy_free(m);
        return st;
    }
    *out = m;
    return SY_OK;
}

void sy_model_free(sy_model *m) {
    if (!m) return;
    model_plans_free(m);
    sy_strategy_free(m->own_strategy);
    for (int64_t i = 0; m->layers && i < m->n_layers; i++) sy_model_free(m->layers[i].sub); /* nested models */
    if (!m->vars_borrowed) sy_vars_free(m->vars);
    sy_free(m->layers);
    sy_free(m->nodes);
    sy_free(m->edges);
    sy_free(m->order);
    sy_free(m);
}

const char *sy_model_name(const sy_model *m) { return m->name; }
int32_t sy_model_layer_count(const sy_model *m) { return (int32_t)m->n_layers; }
const sy_layer *sy_model_layer(const sy_model *m, int32_t i) {
    return i >= 0 && i < m->n_layers ? &m->layers[i].cfg : NULL;
}
sy_shape sy_model_input_shape(const sy_model *m) { return m->input_shape; }

sy_shape sy_model_output_shape(const sy_model *m, int32_t i) {
    sy_shape none = {0};
    if (i < 0) return model_output_shape(m);
    return m->built && i < m->n_layers && m->layers[i].calls > 0 ? m->layers[i].out_shape : none;
}

int64_t sy_model_param_count(const sy_model *m, int32_t i) {
    if (i >= 0) return i < m->n_layers ? m->layers[i].params : 0;
    int64_t n = 0;
    for (int64_t k = 0; k < m->n_layers; k++) n += m->layers[k].params;
    return n;
}

/* ---- building ----------------------------------------------------------------------- */

static bool name_taken(const sy_model *m, const char *name, int64_t upto) {
    for (int64_t i = 0; i < upto; i++)
        if (strcmp(m->layers[i].name, name) == 0) return true;
    return false;
}

/* Keras counts the layers of a class that were named automatically, so
 * Dense(name="hidden") then Dense() gives "hidden", "dense"; a name taken
 * by a layer named by hand is skipped (Keras would refuse the duplicate). */
static void auto_name(const sy_model *m, int64_t index, const char *prefix, char *out) {
    int64_t k = keras_auto_name_count(m, index, m->layers[index].cfg.kind);
    for (;; k++) {
        if (k == 0) snprintf(out, LAYER_NAME_MAX, "%s", prefix);
        else snprintf(out, LAYER_NAME_MAX, "%s_%lld", prefix, (long long)k);
        if (!name_taken(m, out, index)) return;
    }
}

/* The initializer of weight j of layer i: a seed of 0 means "derive one from
 * the model's seed", so every weight has its own reproducible stream. */
static sy_init weight_init(const sy_model *m, int64_t i, int j, sy_init init) {
    i = m->layers[i].born;
    if (init.seed == 0) init.seed = sy_mix64(m->seed ^ sy_mix64(((uint64_t)i << 8) | (uint64_t)j) ^ 0x5EED0F1417ull);
    return init;
}

/* Output shape and weights of layer i from its first call's input shapes. */
static sy_status build_layer(sy_model *m, int64_t i, const sy_shape *in, int n_in) {
    model_layer *L = &m->layers[i];
    const layer_impl *impl = layer_impl_of(L->cfg.kind);
    if (impl->resolve) impl->resolve(&L->cfg, in); /* Keras's build(): BatchNormalization's axis -1 -> [rank] */
    sy_status st = L->cfg.kind == SY_LAYER_MODEL ? nested_check(m, i) : SY_OK; /* issue 15: before its shapes */
    if (st) return st;
    st = impl->output_shape(&L->cfg, L->name, in, n_in, &L->out_shape);
    if (st) return st;
    L->in_shape = in[0];
    if (L->cfg.kind == SY_LAYER_MODEL) return nested_build(m, i); /* issue 15: a model as a layer */
    layer_weight w[LAYER_MAX_WEIGHTS];
    L->n_weights = impl->weights ? impl->weights(&L->cfg, in, w) : 0;
    L->params = 0;
    L->non_trainable = 0;
    L->non_trainable_params = 0;
    L->int64_weights = 0;
    for (int j = 0; j < L->n_weights; j++) {
        char name[2 * LAYER_NAME_MAX];
        snprintf(name, sizeof name, "%s/%s", L->name, w[j].name);
        if ((st = sy_vars_add(m->vars, name, SY_F32, w[j].shape, weight_init(m, i, j, w[j].init), &L->weight_var[j])))
            return st;
        L->params += sy_shape_count(&w[j].shape);
        if (w[j].int64) L->int64_weights |= 1u << j;
        if (w[j].non_trainable) { /* state such as moving statistics: no optimizer, no gradient */
            L->non_trainable |= 1u << j;
            L->non_trainable_params += sy_shape_count(&w[j].shape);
        }
    }
    return SY_OK;
}

static const char *node_name(const sy_model *m, int32_t id) {
    const model_node *n = &m->nodes[id];
    return n->layer >= 0 ? m->layers[n->layer].name : m->inputs[n->input].name;
}

sy_status model_call(sy_model *m, int32_t layer, const int32_t *in, int n, int32_t *node) {
    model_layer *L = &m->layers[layer];
    const layer_impl *impl = layer_impl_of(L->cfg.kind);
    int lo = impl->max_inputs ? impl->min_inputs : 1, hi = impl->max_inputs ? impl->max_inputs : 1;
    if (n < lo || n > hi || !in) {
        if (hi == 1) return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s) takes one input, called on %d", L->name, impl->class_name, n);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s) takes %d to %d inputs, called on %d", L->name,
                        impl->class_name, lo, hi, n);
    }
    sy_shape shapes[LAYER_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        if (in[i] < 0 || in[i] >= m->n_nodes)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): input %d is %d, not a tensor of model '%s'",
                            L->name, impl->class_name, i, in[i], m->name);
        shapes[i] = m->nodes[in[i]].shape;
    }
    sy_status st;
    sy_shape out;
    if (L->calls == 0) {
        if ((st = build_layer(m, layer, shapes, n))) return st;
        out = L->out_shape;
    } else {
        /* a shared layer: its weights fix its input shape */
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        if (L->n_weights > 0 && !sy_shape_equal(&shapes[0], &L->in_shape))
            return sy_error(SY_ERR_SHAPE, "layer '%s' (%s) was built for inputs %s and is called again on '%s' %s; "
                            "a layer called twice shares its weights, so its inputs must have the same shape",
                            L->name, impl->class_name, keras_shape_str(&L->in_shape, a, sizeof a),
                            node_name(m, in[0]), keras_shape_str(&shapes[0], b, sizeof b));
        if ((st = impl->output_shape(&L->cfg, L->name, shapes, n, &out))) return st;
        if (!sy_shape_equal(&out, &L->out_shape)) L->multiple = true;
    }
    if (SY_GROW(m->nodes, m->cap_nodes, m->n_nodes + 1) || SY_GROW(m->edges, m->cap_edges, m->n_edges + n))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "model '%s': out of memory", m->name);
    memcpy(m->edges + m->n_edges, in, (size_t)n * sizeof *in);
    m->nodes[m->n_nodes] = (model_node){.layer = layer, .call = L->calls++, .in_off = (int32_t)m->n_edges, .n_in = n,
                                        .shape = out};
    m->n_edges += n;
    *node = (int32_t)m->n_nodes++;
    return SY_OK;
}

static sy_status check_input_shape(const sy_shape *s, const char *what) {
    char buf[SY_SHAPE_STR_MAX];
    if (s->rank < 1 || s->rank >= SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE, "%s: input_shape %s must have 1 to %d dimensions (without the batch axis)", what,
                        sy_shape_format(s, buf, sizeof buf), SY_MAX_RANK - 1);
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] <= 0)
            return sy_error(SY_ERR_SHAPE, "%s: input_shape %s must have positive dimensions", what,
                            sy_shape_format(s, buf, sizeof buf));
    return SY_OK;
}

sy_status model_new_layer(sy_model *m, const sy_layer *layer, int32_t *index) {
    const layer_impl *impl = layer_impl_of(layer->kind);
    if (!impl) return sy_error(SY_ERR_INVALID_ARGUMENT, "model '%s': unknown layer kind %d", m->name, (int)layer->kind);
    if (SY_GROW(m->layers, m->cap_layers, m->n_layers + 1)) return sy_error(SY_ERR_OUT_OF_MEMORY, "model: out of memory");
    for (int64_t k = 0; k < m->n_layers; k++) m->layers[k].cfg.name = m->layers[k].name; /* the array may have moved */
    int64_t i = m->n_layers;
    model_layer *L = &m->layers[i];
    memset(L, 0, sizeof *L);
    L->cfg = *layer;
    L->born = (int32_t)i;
    sy_status pst = keras_policy_fix(&L->cfg, layer->name ? layer->name : impl->prefix); /* issue 16, mixed_bfloat16 */
    if (pst) return pst;
    if (layer->name && *layer->name) {
        /* '/' is allowed, as Keras allows it (DenseNet's "conv1/conv"): the
         * layer's .h5 group is then a path of nested groups, as h5py makes it */
        if (strlen(layer->name) >= LAYER_NAME_MAX)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer name '%s': names are at most %d characters",
                            layer->name, LAYER_NAME_MAX - 1);
        bool input_named = false;
        for (int k = 0; m->functional && k < m->n_inputs; k++) input_named |= strcmp(m->inputs[k].name, layer->name) == 0;
        if (name_taken(m, layer->name, i) || input_named)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "model '%s': a layer named '%s' already exists; all layers of a model must have unique names",
                            m->name, layer->name);
        snprintf(L->name, sizeof L->name, "%s", layer->name);
    } else {
        auto_name(m, i, impl->prefix, L->name);
        L->auto_named = true;
    }
    L->cfg.name = L->name;
    keras_wrapper_name(m, i); /* issue 17: a wrapper's inner layer, named as Keras names it */
    m->n_layers++;
    *index = (int32_t)i;
    return SY_OK;
}

sy_status sy_model_add(sy_model *m, const sy_layer *layer) {
    if (m->functional)
        return sy_error(SY_ERR_STATE, "model '%s' is Functional: call layers on its tensors (sy_model_call) instead "
                        "of adding them", m->name);
    model_plans_free(m); /* the graph changes: plans are compiled again on use */
    int32_t i;
    sy_status st = model_new_layer(m, layer, &i);
    if (st) return st;
    model_layer *L = &m->layers[i];
    if (i == 0 && layer->input_shape.rank == 0 && layer->kind == SY_LAYER_EMBEDDING && layer->input_length > 0)
        L->cfg.input_shape = sy_shape_of(1, (int64_t)layer->input_length); /* Keras: input_length sets the input */
    if (i == 0 && !m->built && layer->kind == SY_LAYER_MODEL && layer->model && layer->model->built &&
        layer->model->n_inputs == 1) /* issue 15: a built model first sets the input, as in Keras */
        L->cfg.input_shape = layer->model->inputs[0].shape;
    if (i == 0 && L->cfg.input_shape.rank > 0) {
        if ((st = check_input_shape(&L->cfg.input_shape, L->name))) {
            m->n_layers--;
            return st;
        }
        m->input_shape = L->cfg.input_shape;
        m->built = true;
    }
    if (m->built) {
        const sy_shape *in = i == 0 ? &m->input_shape : &m->layers[i - 1].out_shape;
        if ((st = build_layer(m, i, in, 1))) {
            m->n_layers--; /* not counted: the model is as it was */
            if (i == 0) m->built = false;
            return st;
        }
    }
    return model_chain_nodes(m);
}

sy_status sy_model_build(sy_model *m, sy_shape input_shape) {
    sy_status st = check_input_shape(&input_shape, m->name);
    if (st) return st;
    if (m->built) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
        if (sy_shape_equal(&m->input_shape, &input_shape)) return SY_OK;
        return sy_error(SY_ERR_SHAPE, "model '%s' is already built for inputs %s, not %s", m->name,
                        keras_shape_str(&m->input_shape, a, sizeof a), keras_shape_str(&input_shape, b, sizeof b));
    }
    m->input_shape = input_shape;
    m->built = true;
    for (int64_t i = 0; i < m->n_layers; i++) {
        if ((st = build_layer(m, i, i == 0 ? &m->input_shape : &m->layers[i - 1].out_shape, 1))) {
            m->built = false;
            return st;
        }
    }
    return model_chain_nodes(m);
}

void sy_model_set_seed(sy_model *m, uint64_t seed) {
    m->seed = seed;
    if (!m->built) return;
    for (int64_t i = 0; i < m->n_layers; i++) {
        model_layer *L = &m->layers[i];
        const layer_impl *impl = layer_impl_of(L->cfg.kind);
        layer_weight w[LAYER_MAX_WEIGHTS];
        int n = impl->weights && L->calls > 0 && !L->sub ? impl->weights(&L->cfg, &L->in_shape, w) : 0;
        for (int j = 0; j < n && j < L->n_weights; j++) sy_vars_reset(m->vars, L->weight_var[j], weight_init(m, i, j, w[j].init));
    }
}

void sy_model_stop_training(sy_model *m) { m->stop_training = true; }

int64_t sy_model_iterations(const sy_model *m) { return sy_vars_iterations(m->vars); }

void sy_callback_free(sy_callback *cb) {
    if (cb && cb->free) cb->free(cb->ctx);
    if (cb) cb->free = NULL, cb->ctx = NULL;
}

/* ---- weights -------------------------------------------------------------------------- */

/* Layer and variable of weight `index` (Keras's model.weights order, a
 * nested model's in its own order); false if out of range. */
static bool weight_at(const sy_model *m, int32_t index, int64_t *layer, int32_t *var) {
    if (index < 0) return false;
    for (int64_t i = 0; i < m->n_layers; i++) {
        int32_t n = model_layer_vars(m, i, false, NULL, 0);
        if (index < n) {
            *layer = i;
            if (!m->layers[i].sub) {
                *var = m->layers[i].weight_var[index];
                return true;
            }
            int32_t *vars = sy_malloc((size_t)n * sizeof *vars);
            if (!vars) return false;
            model_layer_vars(m, i, false, vars, n);
            *var = vars[index];
            sy_free(vars);
            return true;
        }
        index -= n;
    }
    return false;
}

int32_t sy_model_weight_count(const sy_model *m) {
    int32_t n = 0;
    for (int64_t i = 0; i < m->n_layers; i++) n += model_layer_vars(m, i, false, NULL, 0);
    return n;
}

const char *sy_model_weight_name(const sy_model *m, int32_t index) {
    static _Thread_local char buf[4 * LAYER_NAME_MAX + 8];
    int64_t l;
    int32_t v;
    if (!weight_at(m, index, &l, &v)) return NULL;
    snprintf(buf, sizeof buf, "%s:0", model_var_keras_name(m, l, v));
    return buf;
}

sy_shape sy_model_weight_shape(const sy_model *m, int32_t index) {
    sy_shape none = {0};
    int64_t l;
    int32_t v;
    return weight_at(m, index, &l, &v) ? sy_vars_shape(m->vars, v) : none;
}

float *sy_model_weight_data(sy_model *m, int32_t index) {
    int64_t l;
    int32_t v;
    return weight_at(m, index, &l, &v) ? sy_vars_data(m->vars, v) : NULL;
}

/* By the variable's name in the model ("features/dense/kernel" for a
 * nested model's), or else by Keras's ("dense/kernel"). */
int32_t sy_model_find_weight(const sy_model *m, const char *name) {
    size_t n = strlen(name);
    if (n >= 2 && strcmp(name + n - 2, ":0") == 0) n -= 2;
    int32_t count = sy_model_weight_count(m);
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < count; i++) {
            int64_t l = 0;
            int32_t var = 0;
            weight_at(m, i, &l, &var);
            const char *v = pass == 0 ? sy_vars_name(m->vars, var) : model_var_keras_name(m, l, var);
            if (strlen(v) == n && strncmp(v, name, n) == 0) return i;
        }
    return -1;
}

/* ---- summary ---------------------------------------------------------------------------- */

/* Keras's print_row: columns end at positions[], wrapped over several lines
 * when a field does not fit, breaking after "),"-style punctuation. */
static void print_row(FILE *out, const char *const *fields, const int *positions, int n) {
    char left[4][1024];
    for (int c = 0; c < n; c++) snprintf(left[c], sizeof left[c], "%s", fields[c]);
    for (;;) {
        bool any = false;
        for (int c = 0; c < n; c++) any |= left[c][0] != '\0';
        if (!any) return;
        char line[2048];
        int len = 0;
        for (int c = 0; c < n; c++) {
            int start = c > 0 ? positions[c - 1] : 0, space = c != n - 1 ? 2 : 0;
            int cutoff = positions[c] - start - space - (c != n - 1 ? 1 : 0);
            int avail = (int)strlen(left[c]);
            int take = avail < cutoff ? avail : cutoff;
            static const char *const breaks[] = {"),", "},", "],", "',"};
            int best = -1;
            for (int b = 0; b < 4; b++) {
                char tmp[1024];
                snprintf(tmp, sizeof tmp, "%.*s", take, left[c]);
                char *f = strstr(tmp, breaks[b]);
                if (f && (best < 0 || (int)(f - tmp) + 2 < best)) best = (int)(f - tmp) + 2;
            }
            if (best >= 0) take = best;
            if (c == 0) line[len++] = ' ';
            memcpy(line + len, left[c], (size_t)take);
            len += take;
            for (int s = 0; s < space; s++) line[len++] = ' ';
            memmove(left[c], left[c] + take, strlen(left[c] + take) + 1);
            while (len < positions[c]) line[len++] = ' ';
        }
        line[len] = '\0';
        fprintf(out, "%s\n", line);
    }
}

static void readable_size(double bytes, char *buf, size_t size) {
    static const char *const units[] = {"Byte", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (u < 5 && bytes / 1024 >= 1) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, size, "%.2f %s", bytes, units[u]);
}

/* One layer's row: Keras's print_layer_summary(_with_connections). `entry`
 * is an index of m->layers, or -1 - input for an InputLayer. */
static void summary_row(const sy_model *m, int32_t entry, bool connections, const int *positions, FILE *out) {
    char name[160], shape[SY_SHAPE_STR_MAX + 4], params[32], conn[1024];
    int used = snprintf(conn, sizeof conn, "[");
    if (entry < 0) {
        const model_input *in = &m->inputs[-1 - entry];
        char s[SY_SHAPE_STR_MAX];
        snprintf(name, sizeof name, "%s (InputLayer)", in->name);
        snprintf(shape, sizeof shape, "[%s]", keras_shape_str(&in->shape, s, sizeof s));
        snprintf(params, sizeof params, "0");
    } else {
        const model_layer *L = &m->layers[entry];
        snprintf(name, sizeof name, "%s (%s)", L->name, model_layer_class(L));
        if (m->built && !L->multiple) keras_shape_str(&L->out_shape, shape, sizeof shape);
        else snprintf(shape, sizeof shape, "multiple");
        snprintf(params, sizeof params, "%lld", (long long)L->params);
        for (int64_t k = 0; connections && k < m->n_nodes; k++) {
            const model_node *n = &m->nodes[k];
            if (n->layer != entry) continue;
            for (int i = 0; i < n->n_in && used < (int)sizeof conn; i++) {
                const model_node *from = &m->nodes[m->edges[n->in_off + i]];
                const char *fname = from->layer >= 0 ? m->layers[from->layer].name : m->inputs[from->input].name;
                used += snprintf(conn + used, sizeof conn - (size_t)used, "%s'%s[%d][0]'", used > 1 ? ", " : "", fname,
                                 from->call);
            }
        }
    }
    if (used < (int)sizeof conn - 1) snprintf(conn + used, sizeof conn - (size_t)used, "]");
    const char *fields[4] = {name, shape, params, conn};
    print_row(out, fields, positions, connections ? 4 : 3);
}

void sy_model_summary(const sy_model *m, FILE *out) {
    bool connections = !functional_sequential_like(m);
    const int width = connections ? 98 : 65;
    const int seq_positions[3] = {29, 55, 65}, fn_positions[4] = {29, 58, 68, 98};
    const int *positions = connections ? fn_positions : seq_positions;
    char rule[128];
    fprintf(out, "Model: \"%s\"\n", m->name);
    memset(rule, '_', (size_t)width);
    rule[width] = '\0';
    fprintf(out, "%s\n", rule);
    const char *head[4] = {"Layer (type)", "Output Shape", "Param #", "Connected to"};
    print_row(out, head, positions, connections ? 4 : 3);
    memset(rule, '=', (size_t)width);
    fprintf(out, "%s\n", rule);
    if (m->functional) {
        for (int32_t k = 0; k < m->n_order; k++) {
            summary_row(m, m->order[k], connections, positions, out);
            fprintf(out, "%*s\n", width, "");
        }
    } else {
        for (int64_t i = 0; i < m->n_layers; i++) {
            summary_row(m, (int32_t)i, false, positions, out);
            fprintf(out, "%*s\n", width, "");
        }
    }
    fprintf(out, "%s\n", rule);
    int64_t total = sy_model_param_count(m, -1), frozen = 0;
    for (int64_t i = 0; i < m->n_layers; i++) frozen += m->layers[i].non_trainable_params;
    char size[32];
    readable_size((double)total * 4, size, sizeof size);
    fprintf(out, "Total params: %lld (%s)\n", (long long)total, size);
    readable_size((double)(total - frozen) * 4, size, sizeof size);
    fprintf(out, "Trainable params: %lld (%s)\n", (long long)(total - frozen), size);
    readable_size((double)frozen * 4, size, sizeof size);
    fprintf(out, "Non-trainable params: %lld (%s)\n", (long long)frozen, size);
    memset(rule, '_', (size_t)width);
    fprintf(out, "%s\n", rule);
}
