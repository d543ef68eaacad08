/*
 * estimator.c - the estimator itself: params and RunConfig, the plans it
 * compiles from model_fn's graphs, and the input it takes from input_fn.
 *
 * TPUEstimator builds one graph per call and mode; here model_fn is called
 * once per (mode, per-core shapes) and its graph compiled into one plan
 * per replica (replicas_compile), kept in a small cache: a training run
 * compiles once, an evaluation with a smaller last batch twice. Every
 * plan uses the estimator's one variable store, so a variable is its
 * graph param's name, shared by the modes and checkpointed whole.
 *
 * Under use_tpu the replicas are config.tpu's cores (sy_cluster_resolve);
 * without, one replica uses every core, TPUEstimator's CPU. The batch
 * params["batch_size"] gives, and how a step's data reach the replicas,
 * follow TPUEstimator's tpu_context.py: input_fn gets the per-core batch
 * (SY_PER_SHARD_V1, called once per core; SY_PER_HOST_V2, whose batches
 * go to the cores in turn) or the per-host one (SY_PER_HOST_V1, and
 * evaluate and predict always), split into equal shards; model_fn gets
 * the per-core batch. An evaluation or prediction batch smaller than the
 * rest (the last) is split into shards of ceil(rows / cores) rows, the
 * last shards padded with zero rows that no result sees.
 */
#include "estimator_internal.h"

#include "../io/io_internal.h" /* ckpt_path */

#include <math.h>
#include <string.h>

const char *sy_mode_name(sy_mode mode) {
    switch (mode) {
    case SY_MODE_TRAIN:
        return "train";
    case SY_MODE_EVAL:
        return "eval";
    case SY_MODE_PREDICT:
        return "infer";
    }
    return "?";
}

/* ---- params ------------------------------------------------------------------------------- */

sy_status sy_params_new(sy_params **out) {
    *out = sy_calloc(1, sizeof **out);
    return *out ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "params: out of memory");
}

void sy_params_free(sy_params *p) {
    if (!p) return;
    for (int64_t i = 0; i < p->n; i++) {
        sy_free(p->v[i].key);
        sy_free(p->v[i].str);
    }
    sy_free(p->v);
    sy_free(p);
}

static param_entry *find(const sy_params *p, const char *key) {
    for (int64_t i = 0; p && key && i < p->n; i++)
        if (strcmp(p->v[i].key, key) == 0) return &p->v[i];
    return NULL;
}

static sy_status set(sy_params *p, const char *key, const char *str, double num) {
    if (!key || !*key)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "params: a key must be a non-empty string");
    char *s = str ? sy_strdup(str) : NULL;
    if (str && !s) return sy_error(SY_ERR_OUT_OF_MEMORY, "params: out of memory");
    param_entry *v = find(p, key);
    if (!v) {
        char *k = sy_strdup(key);
        sy_status st = k ? SY_GROW(p->v, p->cap, p->n + 1) : SY_ERR_OUT_OF_MEMORY;
        if (st) {
            sy_free(k);
            sy_free(s);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "params: out of memory");
        }
        v = &p->v[p->n++];
        v->key = k;
        v->str = NULL;
    }
    sy_free(v->str);
    v->str = s;
    v->num = num;
    return SY_OK;
}

sy_status sy_params_set(sy_params *p, const char *key, double value) {
    return set(p, key, NULL, value);
}
sy_status sy_params_set_string(sy_params *p, const char *key, const char *value) {
    return set(p, key, value ? value : "", 0);
}
bool sy_params_has(const sy_params *p, const char *key) {
    return find(p, key) != NULL;
}

double sy_params_get(const sy_params *p, const char *key) {
    const param_entry *v = find(p, key);
    return v && !v->str ? v->num : NAN;
}

const char *sy_params_get_string(const sy_params *p, const char *key) {
    const param_entry *v = find(p, key);
    return v ? v->str : NULL;
}

int64_t sy_params_batch_size(const sy_params *p) {
    double b = sy_params_get(p, "batch_size");
    return isnan(b) ? 0 : (int64_t)b;
}

sy_status params_with(const sy_params *p, int64_t batch_size, int use_tpu, sy_params **out) {
    sy_status st = sy_params_new(out);
    for (int64_t i = 0; !st && p && i < p->n; i++)
        st = set(*out, p->v[i].key, p->v[i].str, p->v[i].num);
    if (!st && batch_size > 0) st = sy_params_set(*out, "batch_size", (double)batch_size);
    if (!st && use_tpu >= 0) st = sy_params_set(*out, "use_tpu", use_tpu);
    if (st) {
        sy_params_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- train_op ------------------------------------------------------------------------------ */

sy_train_op sy_optimizer_minimize(sy_optimizer optimizer, sy_node loss) {
    sy_train_op t = {optimizer, loss, false};
    return t;
}

sy_train_op sy_cross_shard_optimizer_minimize(sy_optimizer optimizer, sy_node loss) {
    sy_train_op t = {optimizer, loss, true};
    return t;
}

/* ---- RunConfig and the estimator ------------------------------------------------------------ */

sy_tpu_config sy_tpu_config_default(void) {
    sy_tpu_config c = {2, 0, SY_PER_HOST_V1};
    return c;
}

sy_run_config sy_run_config_default(void) {
    sy_run_config c;
    memset(&c, 0, sizeof c);
    c.save_summary_steps = 100;
    c.save_checkpoints_secs = 600;
    c.keep_checkpoint_max = 5;
    c.log_step_count_steps = 100;
    c.tpu_config = sy_tpu_config_default();
    return c;
}

sy_estimator_options sy_estimator_options_default(void) {
    sy_estimator_options o;
    memset(&o, 0, sizeof o);
    o.config = sy_run_config_default();
    o.use_tpu = true;
    o.n_features = 1;
    return o;
}

static sy_status check_options(const sy_estimator_options *o) {
    const sy_run_config *c = &o->config;
    const sy_tpu_config *t = &c->tpu_config;
    if (!o->model_fn) return sy_error(SY_ERR_INVALID_ARGUMENT, "estimator: no model_fn given");
    if (o->use_tpu && o->train_batch_size == 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: `train_batch_size` cannot be `None` under use_tpu: give "
                        "the global training batch size");
    const char *names[3] = {"train_batch_size", "eval_batch_size", "predict_batch_size"};
    int64_t sizes[3] = {o->train_batch_size, o->eval_batch_size, o->predict_batch_size};
    for (int i = 0; i < 3; i++)
        if (sizes[i] < 0)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "estimator: %s must be a positive integer, got %lld (0: not given)",
                            names[i], (long long)sizes[i]);
    if (o->n_features < 1 || o->n_features >= SY_ELEMENT_MAX)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: n_features is %d: the features are the first 1 to %d of "
                        "a dataset element's %d components, the labels the next",
                        o->n_features, SY_ELEMENT_MAX - 1, SY_ELEMENT_MAX);
    if (t->iterations_per_loop < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: TPUConfig iterations_per_loop must be positive, got %lld",
                        (long long)t->iterations_per_loop);
    if (t->num_shards < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: TPUConfig num_shards must be positive, got %d", t->num_shards);
    if (t->per_host_input_for_training < SY_PER_SHARD_V1 ||
        t->per_host_input_for_training > SY_PER_HOST_V2)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: TPUConfig per_host_input_for_training is %d: give "
                        "SY_PER_SHARD_V1, SY_PER_HOST_V1 or SY_PER_HOST_V2",
                        (int)t->per_host_input_for_training);
    if (c->save_summary_steps < 0 || c->save_checkpoints_steps < 0 ||
        !(c->save_checkpoints_secs >= 0) || c->log_step_count_steps < 0 ||
        c->keep_checkpoint_max < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: RunConfig save_summary_steps (%lld), "
                        "save_checkpoints_steps (%lld), save_checkpoints_secs (%g) and "
                        "log_step_count_steps (%lld) "
                        "must be >= 0 and keep_checkpoint_max (%d) >= 1",
                        (long long)c->save_summary_steps, (long long)c->save_checkpoints_steps,
                        c->save_checkpoints_secs, (long long)c->log_step_count_steps,
                        c->keep_checkpoint_max);
    if (sy_params_has(o->params, "batch_size") || sy_params_has(o->params, "context") ||
        sy_params_has(o->params, "context.invocation_index") ||
        sy_params_has(o->params, "context.total_invocations"))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "estimator: ['batch_size', 'context'] are reserved keys but existed "
                        "in params: TPUEstimator sets them");
    return SY_OK;
}

/* The replicas: config.tpu's cores under use_tpu, each batch size dividing among them. */
static sy_status make_strategy(sy_estimator *e) {
    const sy_estimator_options *o = &e->o;
    if (!o->use_tpu) return strategy_new(1, sy_cpu_count(), &e->strategy);
    sy_cluster *c;
    sy_status st = sy_cluster_resolve(o->config.tpu, &c);
    if (st) return st;
    int32_t r = sy_cluster_device_count(c);
    /* TPUConfig's num_shards is deprecated and ignored by TPUEstimator, which shards by the TPU's
     * cores; so here, with a warning where they differ (mnist_tpu.py's default of 8 on a 2-core
     * host), since the batch per core then differs from what the user may expect */
    if (o->config.tpu_config.num_shards && o->config.tpu_config.num_shards != r)
        sy_log(SY_LOG_WARNING,
               "estimator: TPUConfig num_shards is %d but the TPU '%s' has %d cores: the %d cores "
               "are used, as TPUEstimator ignores num_shards",
               o->config.tpu_config.num_shards, sy_cluster_spec(c), r, r);
    const char *names[3] = {"train", "eval", "predict"};
    int64_t sizes[3] = {o->train_batch_size, o->eval_batch_size, o->predict_batch_size};
    for (int i = 0; i < 3; i++)
        if (sizes[i] % r) {
            int64_t below = sizes[i] / r * r;
            st = sy_error(SY_ERR_INVALID_ARGUMENT,
                          "estimator: %s batch size %lld must be divisible by number of "
                          "replicas %d (the TPU '%s'): every core takes an equal shard; use a "
                          "multiple of %d, e.g. %lld",
                          names[i], (long long)sizes[i], r, sy_cluster_spec(c), r,
                          (long long)(below ? below : r));
            sy_cluster_free(c);
            return st;
        }
    st = sy_strategy_new(c, &e->strategy);
    sy_cluster_free(c);
    return st;
}

sy_status sy_estimator_new(const sy_estimator_options *options, sy_estimator **out) {
    *out = NULL;
    sy_estimator_options d = sy_estimator_options_default();
    const sy_estimator_options *o = options ? options : &d;
    sy_status st = check_options(o);
    if (st) return st;
    sy_estimator *e = sy_calloc(1, sizeof *e);
    if (!e) return sy_error(SY_ERR_OUT_OF_MEMORY, "estimator: out of memory");
    e->o = *o;
    const sy_run_config *c = &o->config;
    e->model_dir = c->model_dir ? sy_strdup(c->model_dir) : NULL;
    e->tpu = c->tpu ? sy_strdup(c->tpu) : NULL;
    e->name = sy_strdup(o->name ? o->name : "model_fn");
    if ((c->model_dir && !e->model_dir) || (c->tpu && !e->tpu) || !e->name)
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "estimator: out of memory");
    e->o.config.model_dir = e->model_dir;
    e->o.config.tpu = e->tpu;
    e->o.name = e->name;
    if (!st) st = params_with(o->params, 0, -1, &e->params);
    e->o.params = e->params;
    if (!st) st = make_strategy(e);
    if (!st) st = sy_vars_new(&e->vars);
    if (st) {
        sy_estimator_free(e);
        return st;
    }
    e->replicas = sy_strategy_num_replicas_in_sync(e->strategy);
    *out = e;
    return SY_OK;
}

static void plan_clear(est_plan *p) {
    replicas_free(p->rs);
    sy_graph_free(p->g);
    sy_free(p->in_ptr);
    sy_free(p->spare);
    memset(p, 0, sizeof *p);
}

void sy_estimator_free(sy_estimator *e) {
    if (!e) return;
    for (int i = 0; i < EST_PLANS; i++) plan_clear(&e->plans[i]);
    sy_vars_free(e->vars);
    sy_strategy_free(e->strategy);
    sy_params_free(e->params);
    sy_free(e->model_dir);
    sy_free(e->tpu);
    sy_free(e->name);
    sy_free(e);
}

int64_t sy_estimator_global_step(const sy_estimator *e) {
    return sy_vars_iterations(e->vars);
}
sy_vars *sy_estimator_vars(sy_estimator *e) {
    return e->vars;
}
int32_t sy_estimator_num_replicas(const sy_estimator *e) {
    return e->replicas;
}

ckpt_owner est_owner(sy_estimator *e, const char *what) {
    const char *opt = sy_optimizer_class_name(e->optimizer.kind);
    ckpt_owner w = {what, e->name, e->vars, e->o.config.tf_random_seed, opt ? opt : "none", NULL};
    return w;
}

sy_status est_restore(sy_estimator *e, const char *what) {
    if (!e->model_dir) return SY_OK;
    ckpt_owner w = est_owner(e, what);
    int64_t step;
    sy_status st = ckpt_dir_load_newest(&w, e->model_dir, &step);
    if (st) return st;
    char path[4096];
    if (step < 0) {
        sy_log(SY_LOG_INFO,
               "Could not find trained model in model_dir: %s, running initialization to %s.",
               e->model_dir, strcmp(what, "evaluate") ? what : "evaluate");
        return SY_OK;
    }
    ckpt_path(path, sizeof path, e->model_dir, step);
    sy_log(SY_LOG_INFO, "Restoring parameters from %s", path);
    return SY_OK;
}

const char *est_float(float v, char *buf, size_t size) {
    return keras_float32_repr(v, buf, size);
}

/* ---- the input ---------------------------------------------------------------------------- */

static const char *component_role(const est_input *in, int32_t c, int32_t n_features, char *buf,
                                  size_t size) {
    (void)in;
    if (c < n_features)
        snprintf(buf, size, "component %d (features%s)", c, n_features > 1 ? "" : "");
    else if (c == n_features)
        snprintf(buf, size, "component %d (the labels)", c);
    else
        snprintf(buf, size, "component %d", c);
    return buf;
}

/* One dataset of input_fn against what the mode needs. */
static sy_status check_dataset(const sy_estimator *e, sy_mode mode, const est_input *in,
                               const sy_dataset *d) {
    char role[64], shape[SY_SHAPE_STR_MAX];
    int32_t nf = e->o.n_features, n = sy_dataset_component_count(d);
    if (n < nf)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: the input_fn's dataset has %d component%s per element, but the "
                        "estimator takes %d as features (n_features)",
                        in->what, n, n == 1 ? "" : "s", nf);
    bool static_batch = e->o.use_tpu && mode == SY_MODE_TRAIN;
    for (int32_t c = 0; c < in->n_fed; c++) {
        sy_component_spec s = sy_dataset_component_spec(d, c);
        component_role(in, c, nf, role, sizeof role);
        sy_shape_format(&s.shape, shape, sizeof shape);
        if (s.dtype == SY_STRING || s.dtype == SY_BF16)
            return sy_error(
                SY_ERR_DTYPE,
                "%s: the input_fn's %s holds %s; a model takes numbers (parse or decode them "
                "in the input_fn)",
                in->what, role, sy_dtype_name(s.dtype));
        if (s.shape.rank < 1)
            return sy_error(
                SY_ERR_SHAPE,
                "%s: the input_fn's %s is a scalar %s; the elements must be batches (batch "
                "the dataset)",
                in->what, role, shape);
        for (int i = 0; i < s.shape.rank; i++) {
            if (s.shape.dims[i] >= 0) continue;
            if (i == 0 && !static_batch)
                continue; /* a last smaller batch: its own plan, or padding */
            if (i == 0)
                return sy_error(
                    SY_ERR_SHAPE,
                    "%s: the features and labels to the model returned by input_fn must have "
                    "static shape under use_tpu, but the %s has shape %s: dimension 0 (the batch) "
                    "is not "
                    "known; batch the dataset with drop_remainder (sy_dataset_batch(..., true)), "
                    "as a TPU "
                    "runs one compiled shape",
                    in->what, role, shape);
            return sy_error(
                SY_ERR_SHAPE,
                "%s: the input_fn's %s has shape %s: dimension %d is not known; every "
                "dimension past the batch must be (pad it to a fixed size: padded_batch)",
                in->what, role, shape, i);
        }
        if (static_batch && s.shape.dims[0] % in->split)
            return sy_error(
                SY_ERR_SHAPE,
                "%s: the input_fn's batches have %lld rows (%s), which do not divide among the "
                "%d cores: make params[\"batch_size\"] the batch size",
                in->what, (long long)s.shape.dims[0], role, in->split);
    }
    if (mode != SY_MODE_TRAIN && sy_dataset_cardinality(d) == SY_INFINITE)
        return SY_OK; /* evaluate with steps may take a part of it; checked there */
    return SY_OK;
}

/* The mode's global batch size (0: not given). */
static int64_t mode_batch(const sy_estimator *e, sy_mode mode) {
    return mode == SY_MODE_TRAIN  ? e->o.train_batch_size
           : mode == SY_MODE_EVAL ? e->o.eval_batch_size
                                  : e->o.predict_batch_size;
}

sy_status est_input_open(sy_estimator *e, sy_mode mode, sy_input_fn input_fn, est_input *in) {
    memset(in, 0, sizeof *in);
    in->what = mode == SY_MODE_TRAIN ? "train" : mode == SY_MODE_EVAL ? "evaluate" : "predict";
    in->replicas = e->replicas;
    if (!input_fn) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: no input_fn given", in->what);
    int64_t global = mode_batch(e, mode);
    if (e->o.use_tpu && !global)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: %s_batch_size in TPUEstimator constructor cannot be `None` if "
                        ".%s is running on TPU",
                        in->what, mode == SY_MODE_EVAL ? "eval" : "predict", in->what);
    sy_input_pipeline how =
        mode == SY_MODE_TRAIN ? e->o.config.tpu_config.per_host_input_for_training : SY_PER_HOST_V1;
    int64_t batch = global;
    in->n = 1, in->take = 1, in->split = 1;
    if (e->o.use_tpu) {
        bool per_core = how != SY_PER_HOST_V1;
        batch = per_core ? global / e->replicas : global;
        if (how == SY_PER_SHARD_V1) in->n = e->replicas;
        if (how == SY_PER_HOST_V2) in->take = e->replicas;
        if (how == SY_PER_HOST_V1) in->split = e->replicas;
    }
    in->ds = sy_calloc((size_t)in->n, sizeof *in->ds);
    in->it = sy_calloc((size_t)in->n, sizeof *in->it);
    if (!in->ds || !in->it) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", in->what);
    sy_params *p;
    sy_status st = params_with(e->params, batch, -1, &p);
    for (int32_t i = 0; !st && i < in->n; i++) {
        /* TPUContext.current_input_fn_deployment()'s invocation_index and total_invocations: which
         * core's input this call makes under SY_PER_SHARD_V1 (else the one host's, 0 of 1) */
        st = sy_params_set(p, "context.invocation_index", i);
        if (!st) st = sy_params_set(p, "context.total_invocations", in->n);
        if (!st) st = input_fn(e->o.user, p, &in->ds[i]);
        if (st == SY_OK && !in->ds[i])
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "%s: input_fn gave no dataset", in->what);
        if (st) break;
        int32_t n = sy_dataset_component_count(in->ds[i]);
        /* the labels: the component after the features, when the dataset has one and the mode takes
         * them */
        int32_t fed = e->o.n_features + (mode != SY_MODE_PREDICT && n > e->o.n_features);
        if (i == 0)
            in->n_fed = fed, in->labels = fed > e->o.n_features;
        else if (fed != in->n_fed)
            st = sy_error(SY_ERR_INVALID_ARGUMENT,
                          "%s: input_fn gave datasets of different components to the cores",
                          in->what);
        if (!st) st = check_dataset(e, mode, in, in->ds[i]);
        if (!st) st = sy_dataset_iterator(in->ds[i], &in->it[i]);
    }
    sy_params_free(p);
    return st;
}

void est_input_close(est_input *in) {
    for (int32_t i = 0; i < in->n; i++) {
        if (in->it) sy_iterator_free(in->it[i]);
        if (in->ds) sy_dataset_free(in->ds[i]);
    }
    sy_free(in->it);
    sy_free(in->ds);
    memset(in, 0, sizeof *in);
}

sy_status est_step_alloc(const est_input *in, est_step *s) {
    memset(s, 0, sizeof *s);
    s->elems = sy_calloc((size_t)(in->n * in->take), sizeof *s->elems);
    s->shards = sy_calloc((size_t)in->replicas, sizeof *s->shards);
    return s->elems && s->shards ? SY_OK
                                 : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", in->what);
}

void est_step_clear(est_step *s) {
    for (int32_t i = 0; i < s->n_elems; i++) sy_element_clear(&s->elems[i]);
    s->n_elems = 0;
}

void est_step_free(est_step *s) {
    if (s->elems) est_step_clear(s);
    sy_free(s->elems);
    sy_free(s->shards);
    memset(s, 0, sizeof *s);
}

static int64_t rows_of(const sy_element *e) {
    return sy_tensor_shape(e->c[0]).dims[0];
}

sy_status est_input_next(est_input *in, est_step *s, bool *end) {
    est_step_clear(s);
    *end = false;
    for (int32_t i = 0; i < in->n; i++)
        for (int32_t k = 0; k < in->take; k++) {
            sy_status st = sy_iterator_next(in->it[i], &s->elems[s->n_elems], end);
            if (st) return st;
            if (*end)
                return SY_OK; /* no whole step: a partial one is dropped, as the cores need one each
                               */
            s->n_elems++;
        }
    /* every component of an element has its rows */
    for (int32_t i = 0; i < s->n_elems; i++)
        for (int32_t c = 1; c < in->n_fed; c++)
            if (sy_tensor_shape(s->elems[i].c[c]).dims[0] != rows_of(&s->elems[i]))
                return sy_error(
                    SY_ERR_SHAPE,
                    "%s: an element of input_fn's dataset has %lld rows in component 0 but "
                    "%lld in component %d: every component must be a batch of the same rows",
                    in->what, (long long)rows_of(&s->elems[i]),
                    (long long)sy_tensor_shape(s->elems[i].c[c]).dims[0], c);
    s->rows = 0;
    if (in->split == 1) { /* an element per replica */
        s->batch = rows_of(&s->elems[0]);
        for (int32_t r = 0; r < in->replicas; r++) {
            const sy_element *el = &s->elems[in->replicas == s->n_elems ? r : 0];
            if (rows_of(el) != s->batch)
                return sy_error(
                    SY_ERR_SHAPE,
                    "%s: the cores' batches of one step have %lld and %lld rows; input_fn "
                    "must give batches of one size (drop_remainder)",
                    in->what, (long long)s->batch, (long long)rows_of(el));
            s->shards[r] = (est_shard){el, 0, rows_of(el)};
            s->rows += rows_of(el);
        }
        return SY_OK;
    }
    /* one host batch split among the replicas: ceil(rows / replicas) each, the last shards padded
     */
    int64_t rows = rows_of(&s->elems[0]);
    s->batch = (rows + in->split - 1) / in->split;
    for (int32_t r = 0; r < in->replicas; r++) {
        int64_t from = sy_min64((int64_t)r * s->batch, rows), to = sy_min64(from + s->batch, rows);
        s->shards[r] = (est_shard){&s->elems[0], from, to - from};
    }
    s->rows = rows;
    return SY_OK;
}

/* ---- plans -------------------------------------------------------------------------------- */

/* How a component is fed: floating data as float32, integers as int32, but uint8 features as
 * float32 (images, as Keras casts them) -- uint8 labels are class ids. */
static sy_dtype fed_dtype(sy_dtype d, bool label) {
    if (d == SY_F32 || d == SY_F64) return SY_F32;
    return d == SY_U8 && !label ? SY_F32 : SY_I32;
}

/* The per-replica specs of the step's components. */
static void step_specs(const est_input *in, const est_step *s, sy_component_spec *specs) {
    for (int32_t c = 0; c < in->n_fed; c++) {
        const sy_tensor *t = s->shards[0].e->c[c];
        specs[c].dtype = fed_dtype(sy_tensor_dtype(t), c == in->n_fed - 1 && in->labels);
        specs[c].shape = sy_tensor_shape(t);
        specs[c].shape.dims[0] = s->batch;
    }
}

static bool same_specs(const est_plan *p, sy_mode mode, const sy_component_spec *specs, int32_t n) {
    if (!p->used || p->mode != mode || p->n_in != n) return false;
    for (int32_t c = 0; c < n; c++)
        if (p->in[c].dtype != specs[c].dtype || !sy_shape_equal(&p->in[c].shape, &specs[c].shape))
            return false;
    return true;
}

static const char *spec_what(sy_mode mode) {
    return mode == SY_MODE_TRAIN ? "TRAIN" : mode == SY_MODE_EVAL ? "EVAL" : "PREDICT";
}

static bool valid_node(const sy_graph *g, sy_node n) {
    return n >= 0 && n < sy_graph_node_count(g);
}

/* A node whose rows are the batch's: its first dimension the per-core batch. */
static sy_status check_batch_major(const est_plan *p, const char *what, sy_node n,
                                   const char *role) {
    char shape[SY_SHAPE_STR_MAX];
    if (!valid_node(p->g, n))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: model_fn's %s is not a node of its graph",
                        what, role);
    sy_shape s = sy_graph_shape(p->g, n);
    sy_dtype d = sy_graph_dtype(p->g, n);
    if (s.rank < 1 || s.dims[0] != p->in[0].shape.dims[0])
        return sy_error(
            SY_ERR_SHAPE,
            "%s: model_fn's %s '%s' has shape %s, but its first axis must be the batch (%lld "
            "rows per core): the shards' rows are concatenated along it",
            what, role, sy_graph_name(p->g, n), sy_shape_format(&s, shape, sizeof shape),
            (long long)p->in[0].shape.dims[0]);
    if (d != SY_F32 && d != SY_I32)
        return sy_error(SY_ERR_DTYPE, "%s: model_fn's %s '%s' is %s; give float32 or int32", what,
                        role, sy_graph_name(p->g, n), sy_dtype_name(d));
    return SY_OK;
}

/* The spec model_fn returned, against TPUEstimatorSpec's rules for the mode. */
static sy_status check_spec(const sy_estimator *e, est_plan *p, const char *what) {
    sy_estimator_spec *s = &p->spec;
    char shape[SY_SHAPE_STR_MAX], role[EST_NAME_MAX + 32];
    const char *mode = spec_what(p->mode);
    if (p->mode != SY_MODE_PREDICT) {
        if (s->loss == SY_NONE)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: model_fn returned no loss in %s mode; TPUEstimatorSpec needs "
                            "one (TensorFlow: Missing loss.)",
                            what, mode);
        if (!valid_node(p->g, s->loss))
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: model_fn's loss is not a node of its graph", what);
        sy_shape ls = sy_graph_shape(p->g, s->loss);
        if (ls.rank != 0 || sy_graph_dtype(p->g, s->loss) != SY_F32)
            return sy_error(
                SY_ERR_SHAPE,
                "%s: model_fn's loss '%s' must be a float32 scalar, given: %s %s (reduce it, "
                "e.g. sy_graph_reduce_mean)",
                what, sy_graph_name(p->g, s->loss), sy_dtype_name(sy_graph_dtype(p->g, s->loss)),
                sy_shape_format(&ls, shape, sizeof shape));
    }
    if (p->mode == SY_MODE_TRAIN) {
        const sy_train_op *t = &s->train_op;
        if (t->optimizer.kind == SY_OPTIMIZER_NONE)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: model_fn returned no train_op in TRAIN mode; give an "
                            "optimizer's minimize (TensorFlow: Missing train_op.)",
                            what);
        if (!valid_node(p->g, t->loss) || sy_graph_shape(p->g, t->loss).rank != 0)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: the train_op minimizes no scalar of model_fn's graph", what);
        if (e->o.use_tpu && e->replicas > 1 && !t->cross_shard)
            return sy_error(
                SY_ERR_INVALID_ARGUMENT,
                "%s: CrossShardOptimizer must be used for model training on TPUs: "
                "the %d cores' gradients are averaged by it (sy_cross_shard_optimizer_minimize)",
                what, e->replicas);
        if (!e->o.use_tpu && t->cross_shard)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: the train_op's optimizer is wrapped in a CrossShardOptimizer, "
                            "which sums gradients across TPU shards, but use_tpu is false: there "
                            "are none (TensorFlow "
                            "fails running its CrossReplicaSum on a CPU); wrap it only when "
                            "params[\"use_tpu\"] is set",
                            what);
    }
    if (p->mode == SY_MODE_EVAL) {
        const sy_eval_metrics *m = &s->eval_metrics;
        if (!m->metric_fn && e->o.use_tpu)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: model_fn returned no eval_metrics in EVAL mode under use_tpu: "
                            "TPUEstimator evaluates with eval_metrics = (metric_fn, tensors), the "
                            "tensors gathered "
                            "from every core",
                            what);
        if (m->n_tensors < 0 || m->n_tensors > SY_SPEC_TENSORS_MAX ||
            (m->metric_fn && m->n_tensors == 0))
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: eval_metrics has %d tensors: give 1 to %d", what, m->n_tensors,
                            SY_SPEC_TENSORS_MAX);
        for (int32_t i = 0; m->metric_fn && i < m->n_tensors; i++) {
            snprintf(role, sizeof role, "eval_metrics tensor %d", i);
            sy_status st = check_batch_major(p, what, m->tensors[i], role);
            if (st) return st;
        }
    }
    if (p->mode == SY_MODE_PREDICT) {
        if (s->n_predictions < 1 || s->n_predictions > SY_PREDICTIONS_MAX)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: model_fn returned %d predictions in PREDICT mode: give 1 to %d "
                            "(TensorFlow: Missing predictions.)",
                            what, s->n_predictions, SY_PREDICTIONS_MAX);
        for (int32_t i = 0; i < s->n_predictions; i++) {
            const char *name = s->predictions[i].name;
            if (!name || !*name || strlen(name) >= EST_NAME_MAX)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: prediction %d needs a name of 1 to %d characters", what, i,
                                EST_NAME_MAX - 1);
            for (int32_t k = 0; k < i; k++)
                if (strcmp(s->predictions[k].name, name) == 0)
                    return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: two predictions are named '%s'",
                                    what, name);
            snprintf(role, sizeof role, "prediction '%s'", name);
            sy_status st = check_batch_major(p, what, s->predictions[i].node, role);
            if (st) return st;
            snprintf(p->names[i], sizeof p->names[i], "%s", name);
        }
        for (int32_t i = 0; i < s->n_predictions; i++) s->predictions[i].name = p->names[i];
    }
    return SY_OK;
}

static bool is_input(const est_plan *p, sy_node n) {
    for (int32_t c = 0; c < p->n_in; c++)
        if (p->inputs[c] == n) return true;
    return false;
}

/* model_fn's graph for p's mode and shapes, compiled on the replicas. */
static sy_status build(sy_estimator *e, est_plan *p, const char *what) {
    sy_status st = sy_graph_new(&p->g);
    if (st) return st;
    char name[32];
    for (int32_t c = 0; c < p->n_in; c++) {
        bool label = c == e->o.n_features;
        if (label)
            snprintf(name, sizeof name, "labels");
        else if (e->o.n_features == 1)
            snprintf(name, sizeof name, "features");
        else
            snprintf(name, sizeof name, "features_%d", c);
        p->inputs[c] = sy_graph_input(p->g, name, p->in[c].dtype, p->in[c].shape);
    }
    sy_node labels = p->n_in > e->o.n_features ? p->inputs[e->o.n_features] : SY_NONE;
    sy_params *params;
    /* model_fn's batch: the mode's, per core under use_tpu (tpu_context's batch_size_for_model_fn),
     * global without -- whatever the rows of the batch the graph is for, as TensorFlow gives it */
    int64_t batch = mode_batch(e, p->mode);
    if ((st = params_with(e->params, e->o.use_tpu ? batch / e->replicas : batch, e->o.use_tpu,
                          &params)))
        return st;
    memset(&p->spec, 0, sizeof p->spec);
    p->spec.loss = SY_NONE;
    p->spec.train_op.loss = SY_NONE;
    st = e->o.model_fn(e->o.user, p->g, p->inputs, e->o.n_features, labels, p->mode, params,
                       &p->spec);
    sy_params_free(params);
    if (st) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        return sy_error(st, "%s: model_fn (mode %s) failed: %s", what, sy_mode_name(p->mode), msg);
    }
    if (sy_graph_status(p->g))
        return sy_error(sy_graph_status(p->g), "%s: model_fn's graph (mode %s): %s", what,
                        sy_mode_name(p->mode), sy_graph_error(p->g));
    if ((st = check_spec(e, p, what))) return st;
    /* what the host reads after a step: the loss, the metrics' tensors, the predictions */
    sy_node outs[1 + SY_SPEC_TENSORS_MAX + SY_PREDICTIONS_MAX];
    int n = 0;
    const sy_estimator_spec *s = &p->spec;
    if (s->loss != SY_NONE) outs[n++] = s->loss;
    for (int32_t i = 0;
         p->mode == SY_MODE_EVAL && s->eval_metrics.metric_fn && i < s->eval_metrics.n_tensors; i++)
        if (!is_input(p, s->eval_metrics.tensors[i])) outs[n++] = s->eval_metrics.tensors[i];
    for (int32_t i = 0; p->mode == SY_MODE_PREDICT && i < s->n_predictions; i++)
        if (!is_input(p, s->predictions[i].node)) outs[n++] = s->predictions[i].node;
    sy_plan_options o = sy_plan_options_default();
    o.vars = e->vars;
    o.outputs = outs;
    o.n_outputs = n;
    o.seed = e->o.config.tf_random_seed;
    if (p->mode == SY_MODE_TRAIN) {
        o.loss = s->train_op.loss;
        o.optimizer = s->train_op.optimizer;
    }
    if ((st = replicas_compile(e->strategy, p->g, &o, &p->rs))) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        return sy_error(st, "%s: compiling model_fn's graph (mode %s): %s", what,
                        sy_mode_name(p->mode), msg);
    }
    /* where each replica's inputs go; one model_fn's graph does not read (labels a metric_fn
     * takes as they are) goes to a host buffer of the plan's instead */
    int64_t unread = 0;
    for (int32_t c = 0; c < p->n_in; c++)
        if (!sy_plan_input(p->rs->plans[0], p->inputs[c]))
            unread += sy_shape_count(&p->in[c].shape);
    p->in_ptr = sy_calloc((size_t)(e->replicas * p->n_in), sizeof *p->in_ptr);
    p->spare = sy_malloc((size_t)(e->replicas * unread) * 4);
    if (!p->in_ptr || !p->spare) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    char *next = p->spare;
    for (int32_t r = 0; r < e->replicas; r++)
        for (int32_t c = 0; c < p->n_in; c++) {
            void *at = sy_plan_input(p->rs->plans[r], p->inputs[c]);
            if (!at) {
                at = next;
                next += (size_t)sy_shape_count(&p->in[c].shape) * 4;
            }
            p->in_ptr[r * p->n_in + c] = at;
        }
    if (p->mode == SY_MODE_TRAIN) e->optimizer = s->train_op.optimizer;
    return SY_OK;
}

sy_status est_plan_get(sy_estimator *e, sy_mode mode, const est_input *in, const est_step *s,
                       est_plan **out) {
    sy_component_spec specs[SY_ELEMENT_MAX];
    step_specs(in, s, specs);
    est_plan *slot = &e->plans[0];
    for (int i = 0; i < EST_PLANS; i++) {
        est_plan *p = &e->plans[i];
        if (same_specs(p, mode, specs, in->n_fed)) {
            p->stamp = ++e->clock;
            *out = p;
            return SY_OK;
        }
        if (!p->used ? slot->used : slot->used && p->stamp < slot->stamp)
            slot = p; /* a free one, else the oldest */
    }
    plan_clear(slot);
    slot->mode = mode;
    slot->n_in = in->n_fed;
    memcpy(slot->in, specs, sizeof specs[0] * (size_t)in->n_fed);
    sy_status st = build(e, slot, in->what);
    if (st) {
        plan_clear(slot);
        return st;
    }
    slot->used = true;
    slot->stamp = ++e->clock;
    *out = slot;
    return SY_OK;
}

void est_feed(void *ctx, int64_t step, int32_t replica, sy_plan *plan) {
    (void)plan;
    const est_run *run = ctx;
    const est_plan *p = run->p;
    const est_shard *sh = &run->steps[step].shards[replica];
    int64_t batch = p->in[0].shape.dims[0];
    for (int32_t c = 0; c < p->n_in; c++) {
        char *dst = p->in_ptr[replica * p->n_in + c];
        sy_shape s = p->in[c].shape;
        int64_t per =
            sy_shape_count(&s) / batch; /* values per row; fed as 4-byte float32 or int32 */
        for (int64_t k = 0; k < sh->rows; k++)
            keras_copy_row(dst + (size_t)(k * per) * 4, p->in[c].dtype, sh->e->c[c], sh->row + k,
                           per);
        memset(dst + (size_t)(sh->rows * per) * 4, 0, (size_t)((batch - sh->rows) * per) * 4);
    }
}

const void *est_node_value(const est_plan *p, int32_t replica, sy_plan *plan, sy_node node) {
    for (int32_t c = 0; c < p->n_in; c++)
        if (p->inputs[c] == node) return p->in_ptr[replica * p->n_in + c];
    return sy_plan_output(plan, node);
}
