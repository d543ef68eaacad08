/*
 * model_checkpoint.c - fit()'s checkpoints in a model directory
 * (tf.estimator's RunConfig model_dir, save_checkpoints_steps,
 * keep_checkpoint_max; Keras's BackupAndRestore), and resuming from them.
 *
 * A checkpoint (io/checkpoint.c frames it) holds every variable of the
 * model's store -- the weights and the optimizer's slots -- and a JSON
 * manifest with the optimizer's step count, its learning rate (Keras's
 * learning_rate variable, which the callbacks may have set), the model's
 * seed (the dropout streams derive from it and the step), and fit()'s
 * position: the epoch, the steps run in it and their running sums (so the
 * epoch's logs come out as they would have), and where the input is -- for
 * arrays the sample stream's seed, pass and place in it; for a dataset
 * whether an iterator is open, the pipeline's random state when it was
 * opened and the elements taken from it since. Everything that decides the rest of the run is
 * there, and the loop is deterministic, so a run resumed from a checkpoint
 * finishes with the same weights, bit for bit, as one never interrupted.
 *
 * Loading checks the whole manifest against the model -- every variable's
 * name, dtype and shape, the seed, the optimizer -- before it writes
 * anything, so a checkpoint of another model is refused naming the layer
 * and both shapes, and the model is left as it was.
 *
 * A run holds the directory's lock (io/checkpoint.c's ckpt_lock) from
 * checkpoint_begin to checkpoint_end, so two runs never write one
 * directory: the second is refused at once, naming the first's pid. Under
 * the lock the temporary files a killed writer left are removed, and a
 * resume whose newest checkpoints are damaged (truncated, a bad CRC, a bad
 * manifest) goes on from the newest valid one, saying which it skipped and
 * why; a checkpoint of another model is never skipped, but refused.
 *
 * The directory's machinery is the owner's business only through
 * ckpt_owner (issue 19): fit() passes its model, whose layers name the
 * refusals and whose position and learning rate the manifest keeps; the
 * estimator passes its variable store alone, and its checkpoints hold the
 * variables and the global step (the input starts again at every train(),
 * as TensorFlow's Estimator starts it).
 *
 * issue 20, several hosts: the chief (host 0) alone takes the lock, writes
 * the checkpoints and looks for one to resume from; then it sends that
 * checkpoint's bytes to every other host, which loads the same bytes (the
 * hosts need no shared file system). Every host learns whether the chief's
 * write or resume failed (strategy_agree), so all stop together.
 */
#include "keras_internal.h"

#include "../io/io_internal.h"
#include "../data/data_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define FORMAT "systolic checkpoint"

/* Keras's class name of the model's optimizer (issue 17: any of them), "none" without one */
static const char *optimizer_name(const sy_model *m) {
    const char *name = sy_optimizer_class_name(m->optimizer.kind);
    return name ? name : "none";
}

/* uint64 values exactly (JSON numbers are doubles to most readers). */
static json_t *u64_json(uint64_t v) {
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

static bool json_u64(const json_t *j, uint64_t *v) {
    const char *s = json_string_value(j);
    if (!s || !*s) return false;
    char *end;
    *v = strtoull(s, &end, 10);
    return *end == '\0';
}

static json_t *u64_array(const uint64_t *v, int32_t n) {
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++) json_array_append_new(a, u64_json(v[i]));
    return a;
}

static json_t *shape_json(const sy_shape *s) {
    json_t *a = json_array();
    for (int i = 0; i < s->rank; i++) json_array_append_new(a, json_integer(s->dims[i]));
    return a;
}

ckpt_owner ckpt_owner_of(sy_model *m, const char *what) {
    ckpt_owner o = {what, m->name, m->vars, m->seed, optimizer_name(m), m};
    return o;
}

/* An estimator's manifest has fit's fields, the position at its start, so that either reads the other's
 * files and refuses them by their variables. */
static json_t *manifest_new(const ckpt_owner *o, const fit_position *p) {
    static const fit_position none;
    const sy_model *m = o->m;
    if (!m) p = &none;
    json_t *layers = json_array(), *vars = json_array();
    for (int64_t i = 0; m && i < m->n_layers; i++)
        json_array_append_new(layers, json_pack("[s s]", m->layers[i].name, layer_impl_of(m->layers[i].cfg.kind)->class_name));
    int64_t offset = 0;
    for (int32_t i = 0; i < sy_vars_count(o->vars); i++) {
        sy_shape s = sy_vars_shape(o->vars, i);
        sy_dtype dt = sy_vars_dtype(o->vars, i);
        json_array_append_new(vars, json_pack("{s:s, s:s, s:o, s:I}", "name", sy_vars_name(o->vars, i), "dtype",
                                              sy_dtype_name(dt), "shape", shape_json(&s), "offset", (json_int_t)offset));
        offset += sy_shape_count(&s) * (int64_t)sy_dtype_size(dt);
    }
    json_t *metrics = json_array();
    for (int32_t i = 0; m && i < model_metric_state_count(m); i++) json_array_append_new(metrics, json_real(p->sums.metric[i]));
    json_t *pos = json_pack("{s:i, s:I, s:{s:f, s:o, s:I}}", "epoch", p->epoch, "step", (json_int_t)p->step, "sums",
                            "loss", p->sums.loss, "metrics", metrics, "seen", (json_int_t)p->sums.seen);
    if (m && m->n_outputs > 1) { /* each output's loss (issue 15) */
        json_t *out_loss = json_array();
        for (int32_t j = 0; j < m->n_outputs; j++) json_array_append_new(out_loss, json_real(p->sums.out_loss[j]));
        json_object_set_new(json_object_get(pos, "sums"), "output_losses", out_loss);
    }
    json_object_set_new(pos, "stream", json_pack("{s:o, s:I, s:I}", "seed", u64_json(p->stream_seed), "pass",
                                                 (json_int_t)p->pass, "pos", (json_int_t)p->pos));
    json_object_set_new(pos, "dataset", json_pack("{s:b, s:I, s:o, s:o, s:i}", "iterator_open", p->iter_open, "consumed",
                                                  (json_int_t)p->consumed, "rng_at_open",
                                                  u64_array(p->rng_open, p->n_rng), "rng",
                                                  u64_array(p->rng_now, p->n_rng), "hosts", p->hosts > 0 ? p->hosts : 1));
    /* Keras's optimizer.learning_rate variable, which its checkpoints (BackupAndRestore's) hold: a
     * rate that ReduceLROnPlateau or LearningRateScheduler set resumes with the run. A float32,
     * exact as a double. */
    json_t *man = json_pack("{s:s, s:i, s:s, s:o, s:s, s:I, s:o, s:o, s:o}", "format", FORMAT, "version", 1,
                            "model", o->name, "seed", u64_json(o->seed), "optimizer", o->optimizer, "global_step",
                            (json_int_t)sy_vars_iterations(o->vars), "layers", layers, "variables", vars,
                            "position", pos);
    if (m && man) json_object_set_new(man, "learning_rate", json_real((double)(float)sy_model_learning_rate(m)));
    return man;
}

sy_status ckpt_dir_save(const ckpt_owner *w, const char *dir, int32_t keep, const fit_position *p) {
    char path[4096];
    int64_t step = sy_vars_iterations(w->vars);
    ckpt_path(path, sizeof path, dir, step);
    json_t *man = manifest_new(w, p);
    char *text = man ? json_dumps(man, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(man);
    if (!text) return sy_error(SY_ERR_OUT_OF_MEMORY, "checkpoint '%s': out of memory", path);
    /* the variables, one after another in the store's order */
    size_t bytes = 0;
    for (int32_t i = 0; i < sy_vars_count(w->vars); i++) {
        sy_shape s = sy_vars_shape(w->vars, i);
        bytes += (size_t)sy_shape_count(&s) * sy_dtype_size(sy_vars_dtype(w->vars, i));
    }
    char *data = sy_malloc(bytes ? bytes : 1);
    sy_status st = SY_OK;
    if (!data) st = sy_error(SY_ERR_OUT_OF_MEMORY, "checkpoint '%s': out of memory for %zu bytes", path, bytes);
    size_t at = 0;
    for (int32_t i = 0; !st && i < sy_vars_count(w->vars); i++) {
        sy_shape s = sy_vars_shape(w->vars, i);
        size_t n = (size_t)sy_shape_count(&s) * sy_dtype_size(sy_vars_dtype(w->vars, i));
        memcpy(data + at, sy_vars_data(w->vars, i), n);
        at += n;
    }
    if (!st) st = ckpt_write(path, text, data, bytes);
    free(text);
    sy_free(data);
    if (st) return st;
    /* keep the newest keep_checkpoint_max */
    int64_t *steps;
    int32_t n;
    if ((st = ckpt_list(dir, &steps, &n))) return st;
    for (int32_t i = 0; i + keep < n; i++) {
        ckpt_path(path, sizeof path, dir, steps[i]);
        unlink(path);
    }
    sy_free(steps);
    return SY_OK;
}

sy_status checkpoint_save(sy_model *m, const sy_fit_options *o, const fit_position *p) {
    if (!o->model_dir) return SY_OK;
    ckpt_owner w = ckpt_owner_of(m, "fit");
    /* issue 20: one writer */
    return strategy_agree(m->strategy, model_chief(m) ? ckpt_dir_save(&w, o->model_dir, o->keep_checkpoint_max, p) : SY_OK);
}

/* ---- loading ------------------------------------------------------------------------ */

static const char *str_or(const char *s) { return s ? s : "?"; }

/* "conv2d/kernel/m" -> "conv2d" in buf: the longest of m's layer names
 * that var starts with before a '/' (a name may hold '/' itself, as
 * DenseNet's "conv1/conv"), else what precedes the first '/'. */
static const char *layer_of(const sy_model *m, const char *var, char *buf, size_t size) {
    const char *slash = strchr(var, '/');
    size_t best = slash ? (size_t)(slash - var) : strlen(var);
    for (int64_t i = 0; i < m->n_layers; i++) {
        size_t n = strlen(m->layers[i].name);
        if (n > best && strncmp(var, m->layers[i].name, n) == 0 && var[n] == '/') best = n;
    }
    snprintf(buf, size, "%.*s", (int)best, var);
    return buf;
}

static const char *class_of(const sy_model *m, const char *layer) {
    for (int64_t i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i].name, layer) == 0) return layer_impl_of(m->layers[i].cfg.kind)->class_name;
    return "?";
}

/* "conv2d (Conv2D), dense (Dense)" from the manifest's layers. */
static void layers_str(const json_t *layers, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(layers) && at < size; i++) {
        const json_t *l = json_array_get(layers, i);
        int n = snprintf(buf + at, size - at, "%s%s (%s)", i ? ", " : "", str_or(json_string_value(json_array_get(l, 0))),
                         str_or(json_string_value(json_array_get(l, 1))));
        if (n < 0) break;
        at += (size_t)n;
    }
}

static bool shape_of_json(const json_t *a, sy_shape *s) {
    memset(s, 0, sizeof *s);
    if (!json_is_array(a) || json_array_size(a) > SY_MAX_RANK) return false;
    s->rank = (int)json_array_size(a);
    for (int i = 0; i < s->rank; i++) {
        const json_t *d = json_array_get(a, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0) return false;
        s->dims[i] = json_integer_value(d);
    }
    return true;
}

static bool u64_list(const json_t *a, uint64_t *v, int32_t *n) {
    if (!json_is_array(a) || json_array_size(a) > CKPT_RNG_MAX) return false;
    *n = (int32_t)json_array_size(a);
    for (int32_t i = 0; i < *n; i++)
        if (!json_u64(json_array_get(a, (size_t)i), &v[i])) return false;
    return true;
}

/* The manifest's position into p; false if a field is missing or mistyped. */
static bool position_of(const json_t *j, const sy_model *m, fit_position *p) {
    memset(p, 0, sizeof *p);
    json_t *sums = json_object_get(j, "sums"), *stream = json_object_get(j, "stream"), *ds = json_object_get(j, "dataset");
    json_t *metrics = json_object_get(sums, "metrics");
    if (!json_is_integer(json_object_get(j, "epoch")) || !json_is_integer(json_object_get(j, "step")) ||
        !json_is_number(json_object_get(sums, "loss")) || !json_is_integer(json_object_get(sums, "seen")) ||
        !json_is_array(metrics) || json_array_size(metrics) != (size_t)model_metric_state_count(m))
        return false;
    p->epoch = (int32_t)json_integer_value(json_object_get(j, "epoch"));
    p->step = json_integer_value(json_object_get(j, "step"));
    p->sums.loss = json_number_value(json_object_get(sums, "loss"));
    p->sums.seen = json_integer_value(json_object_get(sums, "seen"));
    for (int32_t i = 0; i < model_metric_state_count(m); i++) {
        if (!json_is_number(json_array_get(metrics, (size_t)i))) return false;
        p->sums.metric[i] = json_number_value(json_array_get(metrics, (size_t)i));
    }
    json_t *out_loss = json_object_get(sums, "output_losses");
    if (m->n_outputs > 1 && (!json_is_array(out_loss) || json_array_size(out_loss) != (size_t)m->n_outputs)) return false;
    for (int32_t k = 0; m->n_outputs > 1 && k < m->n_outputs; k++) {
        if (!json_is_number(json_array_get(out_loss, (size_t)k))) return false;
        p->sums.out_loss[k] = json_number_value(json_array_get(out_loss, (size_t)k));
    }
    int32_t n_open, n_now;
    if (!json_u64(json_object_get(stream, "seed"), &p->stream_seed) || !json_is_integer(json_object_get(stream, "pass")) ||
        !json_is_integer(json_object_get(stream, "pos")) || !json_is_boolean(json_object_get(ds, "iterator_open")) ||
        !json_is_integer(json_object_get(ds, "consumed")) ||
        !u64_list(json_object_get(ds, "rng_at_open"), p->rng_open, &n_open) ||
        !u64_list(json_object_get(ds, "rng"), p->rng_now, &n_now) || n_open != n_now)
        return false;
    p->pass = json_integer_value(json_object_get(stream, "pass"));
    p->pos = json_integer_value(json_object_get(stream, "pos"));
    p->iter_open = json_is_true(json_object_get(ds, "iterator_open"));
    p->consumed = json_integer_value(json_object_get(ds, "consumed"));
    p->n_rng = n_open;
    /* issue 20: absent in checkpoints from before it, all of one host's */
    json_t *hosts = json_object_get(ds, "hosts");
    if (hosts && !json_is_integer(hosts)) return false;
    p->hosts = hosts ? (int32_t)json_integer_value(hosts) : 1;
    if (p->hosts < 1) return false;
    return p->epoch >= 0 && p->step >= 0 && p->sums.seen >= 0 && p->pass >= 0 && p->pos >= 0 && p->consumed >= 0;
}

/* A variable's place in refusals: "layer 'dense' (Dense) weight 'dense/kernel'" for fit's model,
 * "variable 'dense/kernel'" for an estimator's store. */
static const char *var_place(const ckpt_owner *o, const char *var, bool slot, char *buf, size_t size) {
    if (!o->m) {
        snprintf(buf, size, "%s '%s'", slot ? "optimizer slot" : "variable", var);
        return buf;
    }
    char layer[LAYER_NAME_MAX];
    layer_of(o->m, var, layer, sizeof layer);
    snprintf(buf, size, "layer '%s' (%s) %s '%s'", layer, class_of(o->m, layer), slot ? "optimizer slot" : "weight",
             var);
    return buf;
}

/* Check the manifest against the owner's variables and, only if all of it
 * fits, copy the variables in and set the step count. p: fit's position
 * (only with o->m). */
static sy_status restore(const ckpt_owner *o, const char *path, const json_t *man, const uint8_t *data,
                         size_t data_size, fit_position *p) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX], layer[LAYER_NAME_MAX], theirs[1024], place[2 * LAYER_NAME_MAX + 512];
    const json_t *vars = json_object_get(man, "variables"), *layers = json_object_get(man, "layers");
    const char *format = json_string_value(json_object_get(man, "format"));
    sy_model *m = o->m;
    uint64_t seed;
    json_t *step = json_object_get(man, "global_step");
    if (!format || strcmp(format, FORMAT) != 0 || json_integer_value(json_object_get(man, "version")) != 1 ||
        !json_is_array(vars) || !json_is_array(layers) || !json_is_integer(step) || json_integer_value(step) < 0 ||
        !json_u64(json_object_get(man, "seed"), &seed) || !json_string_value(json_object_get(man, "optimizer")))
        return sy_error(SY_ERR_CORRUPT, "checkpoint '%s': its manifest is not a version 1 systolic checkpoint's", path);
    layers_str(layers, theirs, sizeof theirs);
    const char *model = str_or(json_string_value(json_object_get(man, "model")));
    char whose[1200]; /* "('mnist': conv2d (Conv2D), ...)", or "('mnist')" for a model without layers */
    snprintf(whose, sizeof whose, "('%s'%s%s)", model, *theirs ? ": " : "", theirs);
    /* every variable of this model, in the checkpoint with its shape */
    for (int32_t i = 0; i < sy_vars_count(o->vars); i++) {
        const char *name = sy_vars_name(o->vars, i);
        sy_shape want = sy_vars_shape(o->vars, i), got;
        const json_t *v = NULL;
        for (size_t k = 0; k < json_array_size(vars) && !v; k++) {
            const char *n = json_string_value(json_object_get(json_array_get(vars, k), "name"));
            if (n && strcmp(n, name) == 0) v = json_array_get(vars, k);
        }
        bool slot = o->vars->vars[i].kind == SY_VAR_SLOT;
        if (!v) {
            if (slot)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "checkpoint '%s' was written with the optimizer %s, which keeps no '%s'; this model "
                                "trains with %s: compile it with %s to resume",
                                path, json_string_value(json_object_get(man, "optimizer")), name, o->optimizer,
                                json_string_value(json_object_get(man, "optimizer")));
            if (!m)
                return sy_error(SY_ERR_SHAPE,
                                "checkpoint '%s' is of another model %s: it has no variable '%s', which this "
                                "model_fn's graph has, %s",
                                path, whose, name, sy_shape_format(&want, a, sizeof a));
            layer_of(m, name, layer, sizeof layer);
            return sy_error(SY_ERR_SHAPE,
                            "checkpoint '%s' is of another model %s: it has no weight '%s' for layer '%s' "
                            "(%s), which expects %s",
                            path, whose, name, layer, class_of(m, layer), sy_shape_format(&want, a, sizeof a));
        }
        const char *dt = json_string_value(json_object_get(v, "dtype"));
        json_t *off = json_object_get(v, "offset");
        if (!shape_of_json(json_object_get(v, "shape"), &got) || !dt || !json_is_integer(off) || json_integer_value(off) < 0)
            return sy_error(SY_ERR_CORRUPT, "checkpoint '%s': variable '%s' has no valid shape, dtype or offset", path, name);
        if (!sy_shape_equal(&want, &got) || strcmp(dt, sy_dtype_name(sy_vars_dtype(o->vars, i))) != 0)
            return sy_error(SY_ERR_SHAPE, "checkpoint '%s' is of another model %s: %s expects %s %s but the checkpoint "
                            "holds %s %s",
                            path, whose, var_place(o, name, slot, place, sizeof place),
                            sy_dtype_name(sy_vars_dtype(o->vars, i)), sy_shape_format(&want, a, sizeof a), dt,
                            sy_shape_format(&got, b, sizeof b));
        size_t bytes = (size_t)sy_shape_count(&got) * sy_dtype_size(sy_vars_dtype(o->vars, i));
        if ((uint64_t)json_integer_value(off) > data_size || bytes > data_size - (size_t)json_integer_value(off))
            return sy_error(SY_ERR_CORRUPT, "checkpoint '%s': variable '%s' lies past the end of its data (%zu bytes)",
                            path, name, data_size);
    }
    /* nothing in it that this model lacks */
    for (size_t k = 0; k < json_array_size(vars); k++) {
        const char *n = json_string_value(json_object_get(json_array_get(vars, k), "name"));
        if (!n) return sy_error(SY_ERR_CORRUPT, "checkpoint '%s': variable %zu has no name", path, k);
        if (sy_vars_find(o->vars, n) < 0) {
            sy_shape got;
            shape_of_json(json_object_get(json_array_get(vars, k), "shape"), &got);
            if (!m)
                return sy_error(SY_ERR_SHAPE,
                                "checkpoint '%s' is of another model %s: it holds '%s' %s, which this model_fn's "
                                "graph does not have",
                                path, whose, n, sy_shape_format(&got, a, sizeof a));
            return sy_error(SY_ERR_SHAPE,
                            "checkpoint '%s' is of another model %s: it holds '%s' %s, which model '%s' (%lld "
                            "layers) does not have",
                            path, whose, n, sy_shape_format(&got, a, sizeof a), m->name, (long long)m->n_layers);
        }
    }
    /* an estimator's seed decides its dropout masks only, and TensorFlow restores whatever
     * tf_random_seed says: only fit's model is held to its seed */
    if (m && seed != m->seed)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "checkpoint '%s' was written by a model seeded %" PRIu64 " (its dropout streams follow the seed); "
                        "this model's seed is %" PRIu64 ": resume with seed %" PRIu64,
                        path, seed, m->seed, seed);
    if (m && !position_of(json_object_get(man, "position"), m, p))
        return sy_error(SY_ERR_CORRUPT, "checkpoint '%s': its training position is missing or malformed", path);
    /* the learning rate (absent from checkpoints written before it was kept: the compiled rate
     * stays) */
    const json_t *lr = m ? json_object_get(man, "learning_rate") : NULL;
    if (lr &&
        (!json_is_number(lr) || !(json_number_value(lr) >= 0) || isinf(json_number_value(lr))))
        return sy_error(SY_ERR_CORRUPT,
                        "checkpoint '%s': its learning_rate is not a finite number >= 0", path);
    /* all checked: now change the model */
    for (int32_t i = 0; i < sy_vars_count(o->vars); i++) {
        const char *name = sy_vars_name(o->vars, i);
        for (size_t k = 0; k < json_array_size(vars); k++) {
            const json_t *v = json_array_get(vars, k);
            if (strcmp(json_string_value(json_object_get(v, "name")), name) != 0) continue;
            sy_shape s = sy_vars_shape(o->vars, i);
            memcpy(sy_vars_data(o->vars, i), data + json_integer_value(json_object_get(v, "offset")),
                   (size_t)sy_shape_count(&s) * sy_dtype_size(sy_vars_dtype(o->vars, i)));
            break;
        }
    }
    o->vars->iterations = json_integer_value(step);
    /* after the step count: with a schedule the rate set holds until the next step computes the
     * schedule's, as Keras's restored _current_learning_rate */
    if (lr && m->compiled) return sy_model_set_learning_rate(m, json_number_value(lr));
    return SY_OK;
}

static sy_status load_bytes(const ckpt_owner *o, const uint8_t *buf, size_t n, const char *what, fit_position *p) {
    char *text;
    const uint8_t *data;
    size_t data_size;
    sy_status st = ckpt_parse(buf, n, what, &text, &data, &data_size);
    if (st) return st;
    json_error_t err;
    json_t *man = json_loads(text, 0, &err);
    if (!man)
        st = sy_error(SY_ERR_CORRUPT, "checkpoint '%s': its manifest is not JSON (line %d, column %d: %s)", what, err.line,
                      err.column, err.text);
    else
        st = restore(o, what, man, data, data_size, p);
    json_decref(man);
    sy_free(text);
    return st;
}

static sy_status load_file(const ckpt_owner *o, const char *path, fit_position *p) {
    uint8_t *file;
    size_t size;
    sy_status st = io_read_file(path, &file, &size);
    if (st) return st;
    st = load_bytes(o, file, size, path, p);
    sy_free(file);
    return st;
}

sy_status checkpoint_load_bytes(sy_model *m, const uint8_t *buf, size_t n, const char *what, fit_position *p) {
    ckpt_owner o = ckpt_owner_of(m, "fit");
    return load_bytes(&o, buf, n, what, p);
}

sy_status checkpoint_load(sy_model *m, const char *path, fit_position *p) {
    ckpt_owner o = ckpt_owner_of(m, "fit");
    return load_file(&o, path, p);
}

/* Load the newest checkpoint in dir (steps[0..n), ascending) that is not
 * damaged: the damaged newer ones (SY_ERR_CORRUPT) are skipped, each with a
 * warning, and -- by a run holding the lock (rename) -- once one loads they
 * are renamed "*.damaged", out of the listing, so that keep_checkpoint_max
 * does not keep them in place of this run's. Any other refusal (another
 * model, optimizer or seed; a file that cannot be read) stops: the
 * directory is not this model's, and an older checkpoint would hide that.
 * *loaded: the index in steps of the one loaded. */
static sy_status load_newest_valid(const ckpt_owner *o, const char *dir, const int64_t *steps, int32_t n, bool rename_damaged,
                                   fit_position *p, int32_t *loaded) {
    char path[4096], why[2048], skipped[1536] = "";
    size_t at = 0;
    int32_t i = n - 1;
    sy_status st = SY_OK;
    for (; i >= 0; i--) {
        ckpt_path(path, sizeof path, dir, steps[i]);
        if ((st = load_file(o, path, p)) != SY_ERR_CORRUPT) break;
        snprintf(why, sizeof why, "%s", sy_last_error());
        sy_log(SY_LOG_WARNING, "%s: %s the damaged checkpoint '%s': %s", o->what, o->m ? "resume skips" : "skipping",
               path, why);
        if (at < sizeof skipped) {
            int k = snprintf(skipped + at, sizeof skipped - at, "%s%s", at ? "; " : "", why);
            if (k > 0) at += (size_t)k;
        }
    }
    if (i < 0)
        return sy_error(SY_ERR_CORRUPT, "%s: nothing to %s from in '%s': all %d checkpoints are damaged: %s", o->what,
                        o->m ? "resume" : "restore", dir, n, skipped);
    if (st) return st;
    *loaded = i;
    for (int32_t k = i + 1; rename_damaged && k < n; k++) {
        char from[4096], to[4200];
        ckpt_path(from, sizeof from, dir, steps[k]);
        snprintf(to, sizeof to, "%s.damaged", from);
        if (rename(from, to) != 0)
            return sy_error(SY_ERR_IO, "%s: cannot move the damaged checkpoint '%s' aside to '%s': %s", o->what, from,
                            to, strerror(errno));
    }
    ckpt_path(path, sizeof path, dir, steps[i]);
    if (i < n - 1 && o->m)
        sy_log(SY_LOG_WARNING,
               "%s: resumed from '%s' (epoch %d, step %lld), the newest valid checkpoint; the %d "
               "newer, damaged, "
               "renamed '<name>.damaged'",
               o->what, path, p->epoch + 1, (long long)p->step, n - 1 - i);
    else if (i < n - 1)
        sy_log(SY_LOG_WARNING, "%s: restored '%s', the newest valid checkpoint; the %d newer are damaged%s", o->what,
               path, n - 1 - i, rename_damaged ? ", renamed '<name>.damaged'" : "");
    else if (o->m)
        sy_log(SY_LOG_INFO, "%s: resumed from '%s': epoch %d, step %lld", o->what, path, p->epoch + 1, (long long)p->step);
    return SY_OK;
}

sy_status ckpt_dir_begin(const ckpt_owner *o, const char *dir, bool resume, fit_position *p, int64_t *step, int *lock) {
    *step = -1;
    *lock = -1;
    sy_status st = io_make_dirs(dir);
    if (!st) st = ckpt_lock(dir, lock);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        if (st == SY_ERR_STATE) return sy_error(st, "%s: %s; wait for it to end, or give another model_dir", o->what, msg);
        return sy_error(st, "%s: model_dir: %s", o->what, msg);
    }
    /* the directory is this run's now: what a killed writer left can go */
    ckpt_remove_temporaries(dir);
    int64_t *steps;
    int32_t n, at;
    if ((st = ckpt_list(dir, &steps, &n))) return st;
    if (n == 0) {
        if (resume && o->m) sy_log(SY_LOG_INFO, "%s: no checkpoint in '%s' yet: training from the start", o->what, dir);
    } else if (!resume) {
        char path[4096];
        ckpt_path(path, sizeof path, dir, steps[n - 1]);
        st = sy_error(SY_ERR_INVALID_ARGUMENT,
                      "%s: the model directory '%s' already holds checkpoints (the newest: '%s'); "
                      "resume from it, "
                      "or give an empty or new directory",
                      o->what, dir, path);
    } else if (!(st = load_newest_valid(o, dir, steps, n, true, p, &at))) {
        *step = steps[at];
    }
    sy_free(steps);
    return st;
}

sy_status ckpt_dir_load_newest(const ckpt_owner *o, const char *dir, int64_t *step) {
    *step = -1;
    int64_t *steps;
    int32_t n, at;
    sy_status st = ckpt_list(dir, &steps, &n);
    if (!st && n > 0 && !(st = load_newest_valid(o, dir, steps, n, false, NULL, &at))) *step = steps[at];
    sy_free(steps);
    return st;
}

/* issue 20: the chief's outcome on every host: whether it resumed, and
 * from which checkpoint, whose bytes each host loads as the chief did. */
static sy_status begin_hosts(const ckpt_owner *w, const sy_fit_options *o, fit_position *p, bool *resumed, int *lock) {
    sy_model *m = w->m;
    struct {
        int64_t size;
        char path[4096];
    } head;
    memset(&head, 0, sizeof head);
    uint8_t *bytes = NULL;
    size_t size = 0;
    sy_status st = SY_OK;
    if (model_chief(m)) {
        int64_t step;
        st = ckpt_dir_begin(w, o->model_dir, o->resume, p, &step, lock);
        *resumed = !st && step >= 0;
        if (*resumed) {
            ckpt_path(head.path, sizeof head.path, o->model_dir, step);
            st = io_read_file(head.path, &bytes, &size);
        }
        head.size = (int64_t)size;
    }
    st = strategy_agree(m->strategy, st);
    if (!st) st = strategy_bcast(m->strategy, &head, sizeof head, "fit: resuming: sending the checkpoint");
    if (!st && !model_chief(m) && head.size > 0 && !(bytes = sy_malloc((size_t)head.size)))
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "fit: resuming: out of memory for '%s' (%lld bytes)", head.path,
                      (long long)head.size);
    st = strategy_agree(m->strategy, st);
    if (!st) st = strategy_bcast(m->strategy, bytes, head.size, "fit: resuming: sending the checkpoint");
    if (!st && !model_chief(m) && head.size > 0) {
        st = checkpoint_load_bytes(m, bytes, (size_t)head.size, head.path, p);
        *resumed = st == SY_OK;
    }
    sy_free(bytes);
    return strategy_agree(m->strategy, st);
}

sy_status checkpoint_begin(sy_model *m, const sy_fit_options *o, fit_position *p, bool *resumed, int *lock) {
    *resumed = false;
    *lock = -1;
    if (!o->model_dir) {
        if (o->resume || o->save_checkpoints_steps)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: %s needs a model_dir to %s checkpoints",
                            o->resume ? "resume" : "save_checkpoints_steps", o->resume ? "resume from" : "write");
        return SY_OK;
    }
    if (o->save_checkpoints_steps < 0 || o->keep_checkpoint_max < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: save_checkpoints_steps (%lld) must be >= 0 and keep_checkpoint_max (%d) >= 1",
                        (long long)o->save_checkpoints_steps, o->keep_checkpoint_max);
    ckpt_owner w = ckpt_owner_of(m, "fit");
    if (model_hosts(m) > 1) return begin_hosts(&w, o, p, resumed, lock);
    int64_t step;
    sy_status st = ckpt_dir_begin(&w, o->model_dir, o->resume, p, &step, lock);
    *resumed = !st && step >= 0;
    return st;
}

void checkpoint_end(int lock) {
    ckpt_unlock(lock);
}
