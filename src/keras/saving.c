/*
 * saving.c - Keras's HDF5 files: model.save_weights / load_weights and
 * model.save / keras.models.load_model in tf.keras 2.15's .h5 layout
 * (keras/src/saving/legacy/hdf5_format.py), through io's h5.c.
 *
 * A weights file (or a full model's "model_weights" group) holds:
 *   attributes layer_names (every layer, in model order), backend
 *   ("tensorflow"), keras_version ("2.15.0", the layout's version);
 *   a group per layer, created in sorted name order as Keras does, with a
 *   weight_names attribute (empty for a layer without weights) and one
 *   float32 dataset per weight at the path of its name
 *   ("conv2d/conv2d/kernel:0");
 *   an empty group top_level_model_weights.
 * A full model file adds, on the root, model_config (model.to_json()),
 * training_config when the model is compiled (loss, metrics, weighted_metrics, optimizer
 * with its learning rate, in Keras's serialized form), backend and
 * keras_version; the weights go under "model_weights".
 *
 * optimizer_weights (issue 17, optimizer_weights.c). As Keras 2.15 with
 * include_optimizer=True: once the model has trained, its optimizer's
 * variables (iteration, then the slots in the order the optimizer built
 * them, "Adam/m/dense/kernel:0") go under optimizer_weights; load_model reads
 * them back after compiling from the training_config, so a run resumes in
 * either program with its optimizer state. A list that does not fit is
 * skipped with Keras's warning (a fresh optimizer), as Keras does.
 *
 * Loading matches as Keras's load_weights_from_hdf5_group: the file's
 * layers with at least one weight, in layer_names order, against the
 * model's layers with weights, in order; names need not agree (a file
 * saved from conv2d_3 loads into conv2d). Every count, dataset, dtype and
 * shape is checked and every value read into a staging copy before the
 * first weight of the model changes, so a failed load leaves the model as
 * it was. Keras's conversions of old formats (Keras 1, Theano kernels,
 * CuDNN RNN weights) are not done: such files are refused by their shapes.
 */
#include "keras_config.h" /* jw: training_config as json.dumps writes it */
#include "keras_internal.h"

#include "../io/io_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The layout written is tf.keras 2.15's; Keras reads keras_version to
 * decide on conversions of old files, which must not apply. */
#define SAVED_KERAS_VERSION "2.15.0"
#define SAVED_BACKEND "tensorflow"

/* A layer of the model with weights, as loading matches it: its
 * variables in the file's order (a nested model's all of them). */
typedef struct loaded_layer {
    const model_layer *L;
    int64_t index;
    int32_t *vars;
    int32_t n;
} loaded_layer;

static const char *weight_var_name(const sy_model *m, const loaded_layer *L, int j) {
    return model_var_keras_name(m, L->index, L->vars[j]);
}

/* ---- writing -------------------------------------------------------------------------- */

/* A group of the file: a layer of the model, or (Functional models) an
 * InputLayer, which Keras lists too, without weights. */
typedef struct group_entry {
    const char *name;
    int64_t layer; /* -1: an InputLayer */
} group_entry;

static int by_name(const void *a, const void *b) {
    return strcmp(((const group_entry *)a)->name, ((const group_entry *)b)->name);
}

/* The variables of layer i as Keras's .h5 lists them (a nested model's
 * all of them), in a new array (NULL when it has none or on failure). */
static int32_t *layer_vars(const sy_model *m, int64_t i, int32_t *n) {
    *n = model_layer_vars(m, i, true, NULL, 0);
    int32_t *v = *n ? sy_malloc((size_t)*n * sizeof *v) : NULL;
    if (v) model_layer_vars(m, i, true, v, *n);
    return v;
}

/* Whether variable v is one Keras writes as int64 (Normalization's count,
 * issue 15): its layer's int64_weights bit, nested models' layers too
 * (their weight_var index the outer model's store). */
static bool var_is_int64(const sy_model *m, int32_t v) {
    for (int64_t i = 0; i < m->n_layers; i++) {
        const model_layer *L = &m->layers[i];
        if (L->sub && var_is_int64(L->sub, v)) return true;
        for (int j = 0; j < L->n_weights; j++)
            if (L->weight_var[j] == v) return (L->int64_weights >> j) & 1u;
    }
    return false;
}

/* Keras's save_weights_to_hdf5_group into group g: layer_names is
 * model.layers -- a Functional model's InputLayers included (issue 15) --
 * and a nested model's group holds all its weights under the names the
 * inner model gave them ("features/dense/kernel:0"). */
static sy_status write_weights(h5_file *f, h5_id g, const sy_model *m) {
    int64_t n = m->functional ? m->n_order : m->n_layers;
    const char **names = sy_calloc((size_t)n + 1, sizeof *names);
    group_entry *order = sy_calloc((size_t)n + 1, sizeof *order);
    sy_status st = SY_OK;
    if (!names || !order) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", h5_path(f));
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t e = m->functional ? m->order[i] : i;
        order[i].layer = e >= 0 ? e : -1;
        names[i] = order[i].name = e >= 0 ? m->layers[e].name : m->inputs[-1 - e].name;
    }
    if ((st = h5_attr_write_strings(f, g, "layer_names", names, n)) ||
        (st = h5_attr_write_string(f, g, "backend", SAVED_BACKEND, false)) ||
        (st = h5_attr_write_string(f, g, "keras_version", SAVED_KERAS_VERSION, false)))
        goto done;
    qsort(order, (size_t)n, sizeof *order, by_name); /* Keras: "group names are strictly growing" */
    for (int64_t i = 0; i < n && !st; i++) {
        int32_t nv = 0, *vars = order[i].layer >= 0 ? layer_vars(m, order[i].layer, &nv) : NULL;
        char(*wnames)[4 * LAYER_NAME_MAX + 8] = sy_calloc((size_t)nv + 1, sizeof *wnames);
        const char **wp = sy_calloc((size_t)nv + 1, sizeof *wp);
        if ((nv && !vars) || !wnames || !wp) st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", h5_path(f));
        for (int32_t j = 0; j < nv && !st; j++) {
            snprintf(wnames[j], sizeof wnames[j], "%s:0", model_var_keras_name(m, order[i].layer, vars[j]));
            wp[j] = wnames[j];
        }
        h5_id lg;
        if (!st && !(st = h5_group_create(f, g, order[i].name, &lg))) {
            st = h5_attr_write_strings(f, lg, "weight_names", wp, nv);
            for (int32_t j = 0; j < nv && !st; j++) {
                sy_shape s = sy_vars_shape(m->vars, vars[j]);
                const float *v = sy_vars_data(m->vars, vars[j]);
                st = var_is_int64(m, vars[j]) ? h5_dataset_write_f32_as_i64(f, lg, wnames[j], &s, v) /* issue 15 */
                                              : h5_dataset_write_f32(f, lg, wnames[j], &s, v);
            }
            h5_group_close(f, lg);
        }
        sy_free(vars);
        sy_free(wnames);
        sy_free(wp);
    }
    if (!st) {
        h5_id top;
        if (!(st = h5_group_create(f, g, "top_level_model_weights", &top))) {
            st = h5_attr_write_strings(f, top, "weight_names", NULL, 0);
            h5_group_close(f, top);
        }
    }
done:
    sy_free(names);
    sy_free(order);
    return st;
}

static sy_status check_built(const sy_model *m, const char *what, const char *path) {
    if (!m->built)
        return sy_error(SY_ERR_STATE, "%s '%s': model '%s' has no weights yet (no input shape: give the first layer "
                                      "an input_shape or call sy_model_build)",
                        what, path ? path : "(null)", m->name);
    return SY_OK;
}

sy_status sy_model_save_weights(const sy_model *m, const char *path) {
    sy_status st = check_built(m, "save_weights", path);
    if (st) return st;
    h5_file *f;
    if ((st = h5_create(path, &f))) return st;
    if ((st = write_weights(f, h5_root(f), m))) {
        h5_close(f);
        return st;
    }
    return h5_commit(f);
}

/* ---- loading ---------------------------------------------------------------------------- */

/* One layer of the file with weights. */
typedef struct saved_layer {
    const char *name; /* in the file's layer_names */
    h5_id group;
    h5_strings weights;
} saved_layer;

static void saved_free(h5_file *f, saved_layer *s, int64_t n) {
    for (int64_t i = 0; s && i < n; i++) {
        h5_group_close(f, s[i].group);
        h5_strings_free(&s[i].weights);
    }
    sy_free(s);
}

static void join_names(char *buf, size_t size, const char *const *names, int64_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n && used + 8 < size; i++) {
        int k = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
        if (k < 0) break;
        used += (size_t)k;
    }
    if (used >= size) memcpy(buf + size - 4, "...", 4);
}

/* Keras's load_weights_from_hdf5_group: g is a weights group (the root of
 * a weights file or a full file's model_weights). */
static sy_status load_weights_group(sy_model *m, h5_file *f, h5_id g) {
    const char *path = h5_path(f);
    h5_strings layer_names;
    bool found;
    sy_status st = h5_attr_read_strings(f, g, "layer_names", &layer_names, &found);
    if (st) return st;
    if (!found && h5_is_group(f, g, "layers") && !h5_attr_exists(f, g, "model_config")) {
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s holds Keras 3's weights layout (layers/<name>/vars/0, ..., which Keras 2.15's "
                        "save_weights writes for a name ending in .weights.h5), not tf.keras 2's HDF5 layout "
                        "(layer_names, weight_names) read here: save it again under a name ending in .h5 only",
                        path);
    }
    if (!found) {
        char where[256];
        return sy_error(SY_ERR_CORRUPT,
                        "%s: no layer_names attribute in '%s'; expected a Keras weights file (model.save_weights) or "
                        "a full model file (model.save) in HDF5",
                        path, h5_name(f, g, where, sizeof where));
    }
    saved_layer *saved = sy_calloc((size_t)layer_names.n + 1, sizeof *saved);
    float **staged = NULL;
    int64_t n_saved = 0, n_staged = 0;
    const char **mine = sy_calloc((size_t)m->n_layers + 1, sizeof *mine);
    const char **theirs = sy_calloc((size_t)layer_names.n + 1, sizeof *theirs);
    loaded_layer *filtered = sy_calloc((size_t)m->n_layers + 1, sizeof *filtered);
    if (!saved || !mine || !theirs || !filtered) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (int64_t i = 0; i < layer_names.n; i++) saved[i].group = -1;
    for (int64_t i = 0; i < layer_names.n && !st; i++) {
        saved_layer *s = &saved[n_saved];
        s->name = layer_names.v[i];
        if ((st = h5_group_open(f, g, s->name, &s->group))) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", sy_last_error());
            st = sy_error(SY_ERR_CORRUPT, "layer '%s' is listed in layer_names but its group is missing: %s", s->name,
                          msg);
            break;
        }
        if ((st = h5_attr_read_strings(f, s->group, "weight_names", &s->weights, &found))) break;
        if (s->weights.n == 0) {
            h5_group_close(f, s->group);
            s->group = -1;
            h5_strings_free(&s->weights);
            continue;
        }
        theirs[n_saved++] = s->name;
    }
    if (st) goto done;
    int64_t n_filtered = 0;
    for (int64_t i = 0; i < m->n_layers; i++) {
        int32_t nv = 0, *vars = layer_vars(m, i, &nv);
        if (nv > 0 && !vars) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            goto done;
        }
        if (nv > 0) {
            filtered[n_filtered] = (loaded_layer){&m->layers[i], i, vars, nv};
            mine[n_filtered++] = m->layers[i].name;
        }
    }
    if (n_saved != n_filtered) {
        char a[512], b[512];
        join_names(a, sizeof a, mine, n_filtered);
        join_names(b, sizeof b, theirs, n_saved);
        st = sy_error(SY_ERR_SHAPE,
                      "%s: layer count mismatch when loading weights: model '%s' expected %lld layers with weights "
                      "(%s), found %lld saved layers with weights (%s)",
                      path, m->name, (long long)n_filtered, a, (long long)n_saved, b);
        goto done;
    }
    /* Every count, dataset and shape first ... */
    for (int64_t k = 0; k < n_saved && !st; k++) {
        const loaded_layer *F = &filtered[k];
        const model_layer *L = F->L;
        const saved_layer *s = &saved[k];
        if (s->weights.n != F->n) {
            st = sy_error(SY_ERR_SHAPE,
                          "%s: weight count mismatch for layer #%lld (named %s in the current model, %s in the save "
                          "file): the layer expects %d weight(s), received %lld saved weight(s)",
                          path, (long long)k, L->name, s->name, F->n, (long long)s->weights.n);
            break;
        }
        for (int j = 0; j < F->n && !st; j++) {
            sy_shape want = sy_vars_shape(m->vars, F->vars[j]), got;
            st = h5_dataset_shape_ex(f, s->group, s->weights.v[j], var_is_int64(m, F->vars[j]), &got); /* issue 15 */
            if (st) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", sy_last_error());
                st = sy_error(st == SY_ERR_NOT_FOUND ? SY_ERR_CORRUPT : st,
                              "%s (weight %s:0 of layer #%lld, named %s in the current model, %s in the save file)",
                              msg, weight_var_name(m, F, j), (long long)k, L->name, s->name);
            } else if (!sy_shape_equal(&want, &got)) {
                char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
                st = sy_error(SY_ERR_SHAPE,
                              "%s: shape mismatch in layer #%lld (named %s in the current model, %s in the save file) "
                              "for weight %s:0: the weight expects shape %s, received saved weight '%s' with shape %s",
                              path, (long long)k, L->name, s->name, weight_var_name(m, F, j),
                              sy_shape_format(&want, a, sizeof a), s->weights.v[j], sy_shape_format(&got, b, sizeof b));
            }
        }
    }
    if (st) goto done;
    if (h5_is_group(f, g, "top_level_model_weights")) {
        h5_id top;
        h5_strings tw;
        if (!(st = h5_group_open(f, g, "top_level_model_weights", &top))) {
            st = h5_attr_read_strings(f, top, "weight_names", &tw, &found);
            h5_group_close(f, top);
            if (!st && tw.n > 0)
                st = sy_error(SY_ERR_SHAPE,
                              "%s: weight count mismatch for top-level weights: model '%s' expects 0 top-level "
                              "weight(s), received %lld saved top-level weight(s)",
                              path, m->name, (long long)tw.n);
            if (!st) h5_strings_free(&tw);
        }
        if (st) goto done;
    }
    /* ... then every value into a staging copy ... */
    int32_t total = sy_model_weight_count(m);
    if (!(staged = sy_calloc((size_t)total + 1, sizeof *staged))) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (int64_t k = 0; k < n_saved && !st; k++) {
        const loaded_layer *F = &filtered[k];
        for (int j = 0; j < F->n && !st; j++) {
            sy_shape s = sy_vars_shape(m->vars, F->vars[j]);
            float *buf = sy_malloc((size_t)sy_shape_count(&s) * sizeof(float));
            if (!buf) {
                st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for weight %s", path, weight_var_name(m, F, j));
                break;
            }
            staged[n_staged++] = buf;
            st = h5_dataset_read_f32_ex(f, saved[k].group, saved[k].weights.v[j], var_is_int64(m, F->vars[j]), &s, buf);
        }
    }
    if (st) goto done;
    /* ... and only then into the model. */
    for (int64_t k = 0, w = 0; k < n_saved; k++) {
        const loaded_layer *F = &filtered[k];

        for (int j = 0; j < F->n; j++) {
            sy_shape s = sy_vars_shape(m->vars, F->vars[j]);
            memcpy(sy_vars_data(m->vars, F->vars[j]), staged[w++], (size_t)sy_shape_count(&s) * sizeof(float));
        }
    }
done:
    for (int64_t i = 0; i < n_staged && staged; i++) sy_free(staged[i]);
    sy_free(staged);
    saved_free(f, saved, layer_names.n);
    sy_free(mine);
    sy_free(theirs);
    for (int64_t k = 0; filtered && k < m->n_layers; k++) sy_free(filtered[k].vars);
    sy_free(filtered);
    h5_strings_free(&layer_names);
    return st;
}

/* The weights group of an open file: the root of a weights file, or a full
 * model file's model_weights (Keras's load_weights takes both). */
static sy_status weights_group(h5_file *f, h5_id *g, bool *opened) {
    h5_id root = h5_root(f);
    *g = root;
    *opened = false;
    if (h5_attr_exists(f, root, "layer_names") || h5_attr_exists(f, root, "layer_names0") ||
        !h5_is_group(f, root, "model_weights"))
        return SY_OK;
    sy_status st = h5_group_open(f, root, "model_weights", g);
    *opened = st == SY_OK;
    return st;
}

sy_status sy_model_load_weights(sy_model *m, const char *path) {
    sy_status st = check_built(m, "load_weights", path);
    if (st) return st;
    h5_file *f;
    if ((st = h5_open(path, &f))) return st;
    h5_id g;
    bool opened;
    if (!(st = weights_group(f, &g, &opened))) st = load_weights_group(m, f, g);
    if (opened) h5_group_close(f, g);
    sy_status lost = h5_lost(f); /* libhdf5 died: a "no" it answered meant nothing */
    if (lost) st = lost;
    h5_close(f);
    return st;
}

/* ---- full models: training_config ------------------------------------------------------ */

/* Keras's name of a metric's function, as MeanMetricWrapper's "fn". */
static const char *metric_fn(keras_metric kind) {
    switch (kind) {
    case KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY: return "sparse_categorical_accuracy";
    case KERAS_METRIC_CATEGORICAL_ACCURACY: return "categorical_accuracy";
    case KERAS_METRIC_BINARY_ACCURACY: return "binary_accuracy";
    case KERAS_METRIC_MSE: return "mean_squared_error";
    case KERAS_METRIC_MAE: return "mean_absolute_error";
    /* issue 17, losses and metrics: the functions among them (the classes write their own, metric_json) */
    case KERAS_METRIC_TOP_K: return "top_k_categorical_accuracy";
    case KERAS_METRIC_SPARSE_TOP_K: return "sparse_top_k_categorical_accuracy";
    case KERAS_METRIC_MAPE: return "mean_absolute_percentage_error";
    case KERAS_METRIC_MSLE: return "mean_squared_logarithmic_error";
    default: break;
    }
    return "accuracy";
}

/* A float32 hyperparameter as Keras's get_config gives it: the float32
 * value widened to a double (0.0010000000474974513). */
static json_t *f32_real(double v) { return json_real((double)(float)v); }

/* 0 (not set) as Keras's None, else the number */
static json_t *real_or_null(double v) { return v != 0 ? json_real(v) : json_null(); }

/* The optimizer as tf.keras 2.15's get_config gives it (issue 17: every
 * built-in): the base optimizer's arguments in its order, then the class's
 * own, compared byte for byte with files Keras wrote (tests/keras_h5_*). */
static json_t *optimizer_config(const sy_optimizer *o) {
    const char *name = sy_optimizer_class_name(o->kind);
    sy_optimizer_kind k = o->kind;
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name));
    /* AdamW's weight_decay is required: written even when 0 */
    json_object_set_new(c, "weight_decay", k == SY_OPTIMIZER_ADAMW ? json_real(o->weight_decay) : real_or_null(o->weight_decay));
    json_object_set_new(c, "clipnorm", real_or_null(o->clipnorm));
    json_object_set_new(c, "global_clipnorm", real_or_null(o->global_clipnorm));
    json_object_set_new(c, "clipvalue", real_or_null(o->clipvalue));
    json_object_set_new(c, "use_ema", json_false());
    json_object_set_new(c, "ema_momentum", json_real(0.99));
    json_object_set_new(c, "ema_overwrite_frequency", k == SY_OPTIMIZER_RMSPROP ? json_integer(100) : json_null());
    json_object_set_new(c, "jit_compile", json_false());
    json_object_set_new(c, "is_legacy_optimizer", json_false());
    json_object_set_new(c, "learning_rate", o->schedule.kind != SY_LR_SCHEDULE_NONE ? keras_lr_schedule_json(&o->schedule)
                                                                                 : f32_real(o->learning_rate));
    switch (k) {
    case SY_OPTIMIZER_SGD:
        json_object_set_new(c, "momentum", json_real(o->momentum));
        json_object_set_new(c, "nesterov", json_boolean(o->nesterov));
        break;
    case SY_OPTIMIZER_RMSPROP:
        json_object_set_new(c, "rho", json_real(o->rho));
        json_object_set_new(c, "momentum", json_real(o->momentum));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        json_object_set_new(c, "centered", json_boolean(o->centered));
        break;
    case SY_OPTIMIZER_ADAM:
    case SY_OPTIMIZER_ADAMW:
    case SY_OPTIMIZER_ADAMAX:
    case SY_OPTIMIZER_NADAM:
        json_object_set_new(c, "beta_1", json_real(o->beta_1));
        json_object_set_new(c, "beta_2", json_real(o->beta_2));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        if (k == SY_OPTIMIZER_ADAM || k == SY_OPTIMIZER_ADAMW) json_object_set_new(c, "amsgrad", json_boolean(o->amsgrad));
        break;
    case SY_OPTIMIZER_ADADELTA:
        json_object_set_new(c, "rho", json_real(o->rho));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        break;
    case SY_OPTIMIZER_ADAGRAD:
        json_object_set_new(c, "initial_accumulator_value", json_real(o->initial_accumulator_value));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        break;
    case SY_OPTIMIZER_ADAFACTOR:
        json_object_set_new(c, "beta_2_decay", json_real(o->beta_2_decay));
        json_object_set_new(c, "epsilon_1", json_real(o->epsilon_1));
        json_object_set_new(c, "epsilon_2", json_real(o->epsilon_2));
        json_object_set_new(c, "clip_threshold", json_real(o->clip_threshold));
        json_object_set_new(c, "relative_step", json_boolean(o->relative_step));
        break;
    case SY_OPTIMIZER_FTRL:
        json_object_set_new(c, "learning_rate_power", json_real(o->learning_rate_power));
        json_object_set_new(c, "initial_accumulator_value", json_real(o->initial_accumulator_value));
        json_object_set_new(c, "l1_regularization_strength", json_real(o->l1_regularization_strength));
        json_object_set_new(c, "l2_regularization_strength", json_real(o->l2_regularization_strength));
        json_object_set_new(c, "l2_shrinkage_regularization_strength",
                            json_real(o->l2_shrinkage_regularization_strength));
        json_object_set_new(c, "beta", json_real(o->beta));
        break;
    default: /* Lion */
        json_object_set_new(c, "beta_1", json_real(o->beta_1));
        json_object_set_new(c, "beta_2", json_real(o->beta_2));
        break;
    }
    json_t *wrap = json_object();
    char class_name[32];
    snprintf(class_name, sizeof class_name, "Custom>%s", name); /* as Keras 2.15 registers its optimizers */
    json_object_set_new(wrap, "class_name", json_string(class_name));
    json_object_set_new(wrap, "config", c);
    return wrap;
}

/* The metrics (or with weighted, the weighted_metrics) as training_config
 * writes them: a list per output, each metric under its logs name
 * ("<output>_<metric>" with several outputs; a weighted one renamed
 * "weighted_<name>" as compile() named it); null when there are none. */
static json_t *metrics_json(const sy_model *m, bool weighted) {
    bool any = false;
    for (int32_t j = 0; j < m->n_outputs; j++)
        for (int32_t i = 0; i < m->heads[j].n_metrics; i++)
            any |= m->heads[j].metrics[i].weighted == weighted;
    if (!any) return json_null();
    json_t *outer = json_array(); /* one list per output */
    for (int32_t j = 0; j < m->n_outputs; j++) {
        json_t *list = json_array();
        for (int32_t i = 0; i < m->heads[j].n_metrics; i++) {
            const metric_spec *ms = &m->heads[j].metrics[i];
            if (ms->weighted != weighted) continue;
            char name[LAYER_NAME_MAX + sizeof ms->name + 1];
            if (m->n_outputs > 1)
                snprintf(name, sizeof name, "%s_%s", model_output_name(m, j), ms->name);
            else
                snprintf(name, sizeof name, "%s", ms->name);
            if (ms->cls) { /* issue 17: a Keras metric class, its config */
                json_array_append_new(list, metric_json(ms, name));
                continue;
            }
            json_t *c = json_object(), *w = json_object();
            json_object_set_new(c, "name", json_string(name));
            json_object_set_new(c, "dtype", json_string("float32"));
            json_object_set_new(c, "fn", json_string(metric_fn(ms->kind)));
            json_object_set_new(w, "class_name", json_string("MeanMetricWrapper"));
            json_object_set_new(w, "config", c);
            json_array_append_new(list, w);
        }
        json_array_append_new(outer, list);
    }
    return outer;
}

/* model.compile()'s arguments as Keras 2.15's model_metadata writes them
 * (json.dumps of its get_compile_config): the loss as it was given -- one,
 * a list in output order, or a dict by output name in the order given --
 * the metrics as a list per output (named "<output>_<metric>" with
 * several outputs), the loss weights (null when none were given) and the
 * optimizer. A new string (free with sy_free), or NULL when out of memory. */
static char *training_config(const sy_model *m) {
    json_t *t = json_object();
    if (!t) return NULL;
    json_t *loss;
    if (m->form == LOSS_SINGLE) {
        loss = keras_loss_json(&m->heads[0]);
    } else if (m->form == LOSS_LIST) {
        loss = json_array();
        for (int32_t j = 0; j < m->n_outputs; j++) json_array_append_new(loss, keras_loss_json(&m->heads[j]));
    } else {
        loss = json_object();
        for (int32_t i = 0; i < m->n_outputs; i++) {
            int32_t j = m->dict_order[i];
            json_object_set_new(loss, model_output_name(m, j), keras_loss_json(&m->heads[j]));
        }
    }
    json_object_set_new(t, "loss", loss);
    json_object_set_new(t, "metrics", metrics_json(m, false));
    json_object_set_new(t, "weighted_metrics", metrics_json(m, true)); /* issue 17 */
    json_t *weights = json_null();
    if (m->loss_weights_given && m->form == LOSS_DICT) {
        weights = json_object();
        for (int32_t i = 0; i < m->n_outputs; i++) {
            int32_t j = m->dict_order[i];
            json_object_set_new(weights, model_output_name(m, j), json_real(m->heads[j].weight));
        }
    } else if (m->loss_weights_given) {
        weights = json_array();
        for (int32_t j = 0; j < m->n_outputs; j++) json_array_append_new(weights, json_real(m->heads[j].weight));
    }
    json_object_set_new(t, "loss_weights", weights);
    json_object_set_new(t, "optimizer_config", optimizer_config(&m->optimizer));
    jw w; /* Python's json.dumps: ", " and ": ", floats as repr() */
    memset(&w, 0, sizeof w);
    jw_json(&w, t);
    json_decref(t);
    if (w.failed) {
        sy_free(w.buf);
        return NULL;
    }
    return w.buf;
}

sy_status sy_model_save(const sy_model *m, const char *path) {
    sy_status st = check_built(m, "save", path);
    if (st) return st;
    char *config = NULL, *training = NULL;
    if ((st = sy_model_to_json(m, &config))) return st;
    if (m->compiled && !(training = training_config(m))) {
        sy_free(config);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "save '%s': out of memory for the training_config", path);
    }
    h5_file *f = NULL;
    h5_id weights = -1;
    if (!(st = h5_create(path, &f))) {
        h5_id root = h5_root(f);
        if (!(st = h5_attr_write_string(f, root, "keras_version", SAVED_KERAS_VERSION, true)) &&
            !(st = h5_attr_write_string(f, root, "backend", SAVED_BACKEND, true)) &&
            !(st = h5_attr_write_string(f, root, "model_config", config, false)) &&
            !(st = training ? h5_attr_write_string(f, root, "training_config", training, false) : SY_OK) &&
            !(st = h5_group_create(f, root, "model_weights", &weights)) && !(st = write_weights(f, weights, m)))
            st = optimizer_weights_write(f, root, m); /* issue 17 */
        h5_group_close(f, weights);
        if (st) h5_close(f);
        else st = h5_commit(f);
    }
    sy_free(config);
    sy_free(training);
    return st;
}

/* ---- full models: loading ---------------------------------------------------------------- */

static const char *json_str(const json_t *o, const char *key) {
    return json_string_value(json_object_get(o, key));
}

/* A metric of a training_config as a name compile() takes. With several
 * outputs Keras names it "<output>_<name>" (prefix: "<output>_"), and the
 * name compile() takes is what follows. */
static const char *metric_name(const json_t *v, const char *prefix, char *buf, size_t size) {
    if (json_is_string(v)) return json_string_value(v);
    const char *text = metric_text_from_json(v, prefix, buf, size); /* issue 17: AUC, Precision, ... */
    if (text) return text;
    const char *cls = json_str(v, "class_name");
    const json_t *c = json_object_get(v, "config");
    if (!cls) return NULL;
    if (!strcmp(cls, "MeanMetricWrapper")) {
        /* a name compile() knows stays as given ("accuracy" and "acc" are
         * resolved by the loss and the output, as Keras does; "mse" keeps
         * its log name), else the function's */
        static const char *const known[] = {"accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy",
                                            "binary_accuracy", "mse", "mean_squared_error", "mae",
                                            "mean_absolute_error", "mape", "msle"};
        const char *name = json_str(c, "name"), *fn = json_str(c, "fn");
        if (name && prefix[0] && !strncmp(name, prefix, strlen(prefix))) name += strlen(prefix);
        for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++)
            if (!strcmp(name, known[i])) return name;
        return fn ? fn : name;
    }
    if (!strcmp(cls, "SparseCategoricalAccuracy")) return "sparse_categorical_accuracy";
    if (!strcmp(cls, "CategoricalAccuracy")) return "categorical_accuracy";
    if (!strcmp(cls, "BinaryAccuracy")) return "binary_accuracy";
    return json_str(c, "name") ? json_str(c, "name") : cls;
}

static double num(const json_t *o, const char *key, double fallback) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

/* One loss of a training_config (a name or a Loss object) into e, its
 * arguments into args (issue 17: every Keras loss class, losses.c). */
static sy_status loss_entry(const char *path, const json_t *loss, sy_compile_output *e, sy_loss_args *args) {
    bool has_args;
    sy_status st = keras_loss_from_json(path, loss, &e->loss, &e->from_logits, args, &has_args);
    e->loss_args = has_args ? args : NULL;
    return st;
}

/* Output j of m named `name`, or -1. */
static int32_t output_named(const sy_model *m, const char *name) {
    for (int32_t j = 0; j < m->n_outputs; j++)
        if (!strcmp(model_output_name(m, j), name)) return j;
    return -1;
}

/* The compile options' per-output part of a training_config: its loss (a
 * name or Loss object for every output, a list in output order, or a dict
 * by output name), its loss_weights (a list in output order or a dict) and
 * its metrics (a list per output, or a flat list), into c (entries in e,
 * metric names in names, weights in weights). */
typedef struct config_outputs {
    sy_compile_output e[MODEL_MAX_IO];
    const char *names[MODEL_MAX_IO][HEAD_MAX_METRICS];
    const char *wnames[MODEL_MAX_IO][HEAD_MAX_METRICS]; /* issue 17: weighted_metrics */
    char wtexts[MODEL_MAX_IO][HEAD_MAX_METRICS][METRIC_TEXT_MAX];
    double weights[MODEL_MAX_IO];
    int32_t entry_of[MODEL_MAX_IO]; /* output j's entry */
    sy_loss_args args[MODEL_MAX_IO + 1]; /* issue 17: each entry's loss arguments; the last: the single loss's */
    char texts[MODEL_MAX_IO][HEAD_MAX_METRICS]
              [METRIC_TEXT_MAX]; /* issue 17: metric classes as "AUC(curve='PR')" */
} config_outputs;

/* A weighted metric's name in a file: "weighted_<name>" when an unweighted metric of its output
 * (plain, in the file's metrics) has <name> -- Keras's _set_metric_names renamed it so, compile()
 * renames it again. */
static const char *unweighted_name(const json_t *plain, const char *prefix, const char *name) {
    static const char w[] = "weighted_";
    if (!name || strncmp(name, w, sizeof w - 1)) return name;
    size_t i;
    const json_t *v;
    json_array_foreach(plain, i, v) {
        const char *n = json_is_string(v) ? json_string_value(v)
                                          : json_str(json_object_get(v, "config"), "name");
        if (n && prefix[0] && !strncmp(n, prefix, strlen(prefix))) n += strlen(prefix);
        if (n && !strcmp(n, name + sizeof w - 1)) return name + sizeof w - 1;
    }
    return name;
}

/* The metrics of a training_config (a list per output, or one flat list for every output) into c
 * and co; with plain (the file's metrics), they are its weighted_metrics. */
static sy_status metric_lists(const sy_model *m, const char *path, const json_t *ms,
                              const json_t *plain, sy_compile_options *c, config_outputs *co) {
    if (!json_is_array(ms)) return SY_OK;
    int32_t n = m->n_outputs;
    bool weighted = plain != NULL;
    bool per_output = json_array_size(ms) == (size_t)n;
    for (size_t i = 0; per_output && i < json_array_size(ms); i++)
        per_output = json_is_array(json_array_get(ms, i));
    bool plain_per_output = json_is_array(plain) && json_array_size(plain) == (size_t)n;
    for (size_t i = 0; plain_per_output && i < json_array_size(plain); i++)
        plain_per_output = json_is_array(json_array_get(plain, i));
    for (int32_t j = 0; j < (per_output ? n : 1); j++) {
        const json_t *list = per_output ? json_array_get(ms, (size_t)j) : ms;
        const json_t *others = plain_per_output ? json_array_get(plain, (size_t)j) : plain;
        char prefix[LAYER_NAME_MAX + 1] = "", text[METRIC_TEXT_MAX];
        if (n > 1) snprintf(prefix, sizeof prefix, "%s_", model_output_name(m, j));
        const char **names = weighted ? co->wnames[j] : co->names[j];
        size_t i;
        const json_t *v;
        json_array_foreach(list, i, v) {
            if (i >= HEAD_MAX_METRICS) break;
            char(*texts)[METRIC_TEXT_MAX] = weighted ? co->wtexts[j] : co->texts[j];
            const json_t *src = v;
            json_t *copy = NULL;
            if (weighted &&
                json_is_object(v)) { /* the name as given: without the "weighted_" Keras added */
                const char *given = json_str(json_object_get(v, "config"), "name");
                if (given && prefix[0] && !strncmp(given, prefix, strlen(prefix)))
                    given += strlen(prefix);
                const char *bare = unweighted_name(others, prefix, given);
                if (bare != given && (copy = json_deep_copy(v))) {
                    snprintf(text, sizeof text, "%s%s", prefix, bare);
                    json_object_set_new(json_object_get(copy, "config"), "name", json_string(text));
                    src = copy;
                }
            }
            const char *name = metric_name(src, prefix, texts[i], sizeof texts[i]);
            if (name && copy && name != texts[i]) { /* it outlives the copy */
                snprintf(text, sizeof text, "%s", name);
                name = strcpy(texts[i], text);
            }
            json_decref(copy);
            names[i] = name;
            if (!name) break;
        }
        if (i < json_array_size(list))
            return sy_error(SY_ERR_UNSUPPORTED,
                            "%s: training_config: %smetric #%zu is not one this model can compute",
                            path, weighted ? "weighted " : "", i);
        int32_t count = (int32_t)json_array_size(list);
        if (!per_output) {
            if (weighted)
                c->weighted_metrics = co->wnames[0], c->n_weighted_metrics = count;
            else
                c->metrics = co->names[0], c->n_metrics = count;
        } else if (count > 0) {
            if (!c->outputs) { /* one loss, metrics per output: entries with metrics alone */
                c->outputs = co->e;
                c->n_outputs = n;
            }
            sy_compile_output *e = &co->e[co->entry_of[j]];
            if (weighted)
                e->weighted_metrics = names, e->n_weighted_metrics = count;
            else
                e->metrics = names, e->n_metrics = count;
        }
    }
    return SY_OK;
}

static sy_status outputs_from_config(const sy_model *m, const char *path, const json_t *t, sy_compile_options *c,
                                     config_outputs *co) {
    const json_t *loss = json_object_get(t, "loss"), *ms = json_object_get(t, "metrics"),
                 *lw = json_object_get(t, "loss_weights");
    int32_t n = m->n_outputs;
    sy_status st = SY_OK;
    memset(co, 0, sizeof *co);
    for (int32_t j = 0; j < n; j++) co->entry_of[j] = j;
    bool dict = json_is_object(loss) && !json_object_get(loss, "class_name");
    if (json_is_array(loss)) { /* a list: one per output */
        if (json_array_size(loss) != (size_t)n)
            return sy_error(SY_ERR_CORRUPT, "%s: training_config: a list of %zu losses for a model with %d outputs",
                            path, json_array_size(loss), n);
        for (int32_t j = 0; !st && j < n; j++) st = loss_entry(path, json_array_get(loss, (size_t)j), &co->e[j], &co->args[j]);
        c->outputs = co->e;
        c->n_outputs = n;
    } else if (dict) { /* a dict by output name, in the file's order */
        const char *key;
        const json_t *v;
        int32_t i = 0;
        json_object_foreach((json_t *)loss, key, v) {
            int32_t j = output_named(m, key);
            if (j < 0 || i >= n)
                return sy_error(SY_ERR_CORRUPT, "%s: training_config: a loss for '%s', which is not an output of "
                                "model '%s'", path, key, m->name);
            co->e[i].output = key;
            co->entry_of[j] = i;
            if ((st = loss_entry(path, v, &co->e[i], &co->args[i]))) return st;
            i++;
        }
        c->outputs = co->e;
        c->n_outputs = i; /* compile names an output left out */
    } else if (json_is_string(loss) || json_is_object(loss)) { /* one for every output */
        sy_compile_output one = {0};
        st = loss_entry(path, loss, &one, &co->args[MODEL_MAX_IO]);
        c->loss = one.loss;
        c->from_logits = one.from_logits;
        c->loss_args = one.loss_args;
    } else {
        st = sy_error(SY_ERR_UNSUPPORTED, "%s: training_config: the loss must be a name, a Loss object, a list or a "
                      "dict of them", path);
    }
    if (st) return st;
    /* loss weights: in output order (a list) or by name */
    if (json_is_array(lw) || json_is_object(lw)) {
        size_t size = json_is_array(lw) ? json_array_size(lw) : json_object_size(lw);
        if (size != (size_t)n)
            return sy_error(SY_ERR_CORRUPT, "%s: training_config: %zu loss_weights for a model with %d outputs", path,
                            size, n);
        for (int32_t j = 0; j < n; j++) {
            const json_t *v = json_is_array(lw) ? json_array_get(lw, (size_t)j)
                                                : json_object_get(lw, model_output_name(m, j));
            if (!json_is_number(v))
                return sy_error(SY_ERR_CORRUPT, "%s: training_config: loss_weights has no number for output '%s'",
                                path, model_output_name(m, j));
            co->weights[co->entry_of[j]] = json_number_value(v);
        }
        c->loss_weights = co->weights;
        c->n_loss_weights = c->outputs ? c->n_outputs : n;
    } else if (!json_is_null(lw) && lw) {
        return sy_error(SY_ERR_UNSUPPORTED, "%s: training_config: loss_weights must be a list or a dict", path);
    }
    if ((st = metric_lists(m, path, ms, NULL, c, co))) return st;
    return metric_lists(m, path, json_object_get(t, "weighted_metrics"), ms, c, co);
}

/* issue 17, optimizers: the arguments of a Keras optimizer config that
 * every optimizer or only the newer ones take (the rest are read by
 * compile_from); Keras's None reads as 0, "not set". What Keras can do and
 * this library cannot (use_ema, a learning-rate schedule) is refused. */
static double num_or_zero(const json_t *oc, const char *key, double fallback) {
    const json_t *v = json_object_get(oc, key);
    return json_is_null(v) ? 0 : num(oc, key, fallback);
}

static sy_status optimizer_from_config(sy_optimizer *o, const char *path, const json_t *oc) {
    if (json_is_true(json_object_get(oc, "use_ema")))
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: training_config: the optimizer's use_ema=True (a moving average of the weights) is not "
                        "supported; save the model with use_ema=False",
                        path);
    o->weight_decay = num_or_zero(oc, "weight_decay", o->weight_decay);
    o->clipnorm = num_or_zero(oc, "clipnorm", 0);
    o->clipvalue = num_or_zero(oc, "clipvalue", 0);
    o->global_clipnorm = num_or_zero(oc, "global_clipnorm", 0);
    o->initial_accumulator_value = num(oc, "initial_accumulator_value", o->initial_accumulator_value);
    o->beta_2_decay = num(oc, "beta_2_decay", o->beta_2_decay);
    o->epsilon_1 = num(oc, "epsilon_1", o->epsilon_1);
    o->epsilon_2 = num(oc, "epsilon_2", o->epsilon_2);
    o->clip_threshold = num(oc, "clip_threshold", o->clip_threshold);
    if (json_object_get(oc, "relative_step")) o->relative_step = json_is_true(json_object_get(oc, "relative_step"));
    o->learning_rate_power = num(oc, "learning_rate_power", o->learning_rate_power);
    o->l1_regularization_strength = num(oc, "l1_regularization_strength", o->l1_regularization_strength);
    o->l2_regularization_strength = num(oc, "l2_regularization_strength", o->l2_regularization_strength);
    o->l2_shrinkage_regularization_strength =
        num(oc, "l2_shrinkage_regularization_strength", o->l2_shrinkage_regularization_strength);
    o->beta = num(oc, "beta", o->beta);
    return SY_OK;
}

/* Compile m with a training_config's loss, metrics and optimizer. */
static sy_status compile_from(sy_model *m, const char *path, const char *text) {
    json_error_t err;
    json_t *t = json_loads(text, 0, &err);
    if (!t || !json_is_object(t)) {
        json_decref(t);
        return sy_error(SY_ERR_CORRUPT, "%s: training_config is not a JSON object (line %d, column %d: %s)", path,
                        err.line, err.column, t ? "not an object" : err.text);
    }
    sy_compile_options c = sy_compile_options_default();
    config_outputs *co =
        sy_malloc(sizeof *co); /* metric texts of every output: too big for a small stack */
    const json_t *opt = json_object_get(t, "optimizer_config");
    sy_status st =
        co ? outputs_from_config(m, path, t, &c, co)
           : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory reading the training_config", path);
    /* the optimizer and its hyperparameters */
    if (!st) {
        const char *cls = json_str(opt, "class_name");
        const json_t *oc = json_object_get(opt, "config");
        if (cls && !strncmp(cls, "Custom>", 7)) cls += 7;
        const json_t *lr = json_object_get(oc, "learning_rate");
        if (!lr) lr = json_object_get(oc, "lr"); /* Keras before 2.3 */
        if (!cls || !json_is_object(oc)) {
            st = sy_error(SY_ERR_CORRUPT, "%s: training_config has no optimizer_config", path);
        } else if ((st = sy_optimizer_from_name(cls, &c.optimizer))) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", sy_last_error());
            st = sy_error(st, "%s: training_config: %s", path, msg);
        } else if (!json_is_number(lr) && !json_is_object(lr)) {
            st = sy_error(SY_ERR_CORRUPT,
                          "%s: training_config: the optimizer's learning_rate must be a number or a learning rate "
                          "schedule",
                          path);
        } else {
            sy_optimizer *o = &c.optimizer;
            st = optimizer_from_config(o, path, oc);
            if (json_is_number(lr)) {
                o->learning_rate = (float)json_number_value(lr);
            } else if (!st) { /* issue 17, learning-rate schedules */
                char where[1100];
                snprintf(where, sizeof where, "%s: training_config: the optimizer's learning_rate", path);
                st = keras_lr_schedule_read(lr, where, &o->schedule);
            }
            o->momentum = num(oc, "momentum", o->momentum);
            o->nesterov = json_is_true(json_object_get(oc, "nesterov"));
            o->beta_1 = num(oc, "beta_1", o->beta_1);
            o->beta_2 = num(oc, "beta_2", o->beta_2);
            o->epsilon = num(oc, "epsilon", o->epsilon);
            o->amsgrad = json_is_true(json_object_get(oc, "amsgrad"));
            o->rho = num(oc, "rho", o->rho);
            o->centered = json_is_true(json_object_get(oc, "centered"));
        }
    }
    if (!st && (st = sy_model_compile(m, &c))) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        st = sy_error(st, "%s: compiling with its training_config: %s", path, msg);
    }
    sy_free(co);
    json_decref(t);
    return st;
}

sy_status sy_model_load(const char *path, sy_model **out) {
    *out = NULL;
    h5_file *f;
    sy_status st = h5_open(path, &f);
    if (st) return st;
    h5_id root = h5_root(f), weights = -1;
    char *config = NULL, *training = NULL;
    sy_model *m = NULL;
    if ((st = h5_attr_read_string(f, root, "model_config", &config))) {
        if (st == SY_ERR_NOT_FOUND)
            st = sy_error(SY_ERR_CORRUPT,
                          "%s: no model config found in the file (a full model file from model.save has "
                          "model_config; for a weights file use load_weights)",
                          path);
        goto done;
    }
    if ((st = sy_model_from_json(config, &m))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        st = sy_error(st, "%s: model_config: %s", path, msg);
        goto done;
    }
    if (!(st = h5_group_open(f, root, "model_weights", &weights))) st = load_weights_group(m, f, weights);
    if (st) goto done;
    if (h5_attr_exists(f, root, "training_config") && !(st = h5_attr_read_string(f, root, "training_config", &training)))
        st = compile_from(m, path, training);
    if (!st && training) st = optimizer_weights_read(m, f, root); /* issue 17 */
done:
    h5_group_close(f, weights);
    sy_status lost = h5_lost(f); /* libhdf5 died: a "no" it answered meant nothing */
    if (lost) st = lost;
    h5_close(f);
    sy_free(config);
    sy_free(training);
    if (st) sy_model_free(m);
    else *out = m;
    return st;
}
