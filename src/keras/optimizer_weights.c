/*
 * optimizer_weights.c - issue 17, point 3: a full model file's
 * "optimizer_weights" group, as tf.keras 2.15 writes and reads it
 * (keras/src/saving/legacy/hdf5_format.py, save_optimizer_weights_to_hdf5_group),
 * so that a training run moves between Keras and systolic with its optimizer
 * state.
 *
 * Keras writes optimizer.variables in order: "iteration:0" (int64, a scalar),
 * then the slots as the optimizer's build() created them -- a loop over the
 * model's trainable variables per group of slots: Adam's m and v interleaved
 * per variable, then (amsgrad) every vhat; RMSprop every velocity, then every
 * momentum, then every average_gradient -- each named
 * "<optimizer name>/<slot>/<variable>:0" ("Adam/m/dense/kernel:0"), a path of
 * nested groups under optimizer_weights; weight_names lists them. Keras reads
 * them back by position (optimizer.set_weights), checking only the shapes.
 *
 * Here a slot is the store variable "<variable>/<slot>" (compiler/optimizer.c).
 * The names agree except SGD's: Keras keeps "m" even without momentum (zeros
 * then, written as zeros here), systolic "momentum" only with momentum.
 * Nadam's u_product is not among Keras's variables (Keras restarts it at 1 on
 * load); reading a file, it is recomputed here from the iteration count, the
 * value an uninterrupted run has.
 *
 * The group is written when the model has trained (its slots exist) and read
 * after load_model compiled the model from its training_config: the slots are
 * created in the store with the file's values, and the train plan, compiled
 * later, finds them. A file whose list does not match the optimizer's -- count,
 * names' order or shapes -- is loaded without its optimizer state, with
 * Keras's warning, as Keras does. The iteration count travels as float32
 * through io's reader, exact to 2^24 steps; more is refused when writing.
 */
#include "keras_internal.h"
#include "../io/io_internal.h"

#include <math.h>
#include <string.h>

/* One entry of Keras's list: its name and shape, and the store variable that holds it (ours;
 * absent: zeros) */
typedef struct opt_entry {
    char keras[4 * LAYER_NAME_MAX + 64];
    char ours[4 * LAYER_NAME_MAX + 32];
    sy_shape shape;
    int32_t var;      /* the weight it belongs to */
    const char *slot; /* Keras's slot name */
} opt_entry;

/* Keras's slots of an optimizer: groups, each one loop over the variables. A
 * slot of "r" or "c" exists only for a variable of rank >= 2 (Adafactor). */
typedef struct slot_spec {
    const char *keras, *ours;
} slot_spec;

static int slot_groups(const sy_optimizer *o, slot_spec groups[3][3], int sizes[3]) {
    memset(sizes, 0, 3 * sizeof *sizes);
#define ADD(g, k, s) (groups[g][sizes[g]++] = (slot_spec){k, s})
    switch (o->kind) {
    case SY_OPTIMIZER_SGD:
        ADD(0, "m", "momentum");
        return 1;
    case SY_OPTIMIZER_ADAM:
    case SY_OPTIMIZER_ADAMW:
        ADD(0, "m", "m"), ADD(0, "v", "v");
        if (o->amsgrad) ADD(1, "vhat", "vhat");
        return o->amsgrad ? 2 : 1;
    case SY_OPTIMIZER_RMSPROP: {
        int n = 0;
        ADD(n, "velocity", "velocity"), n++;
        if (o->momentum > 0) ADD(n, "momentum", "momentum"), n++;
        if (o->centered) ADD(n, "average_gradient", "average_gradient"), n++;
        return n;
    }
    case SY_OPTIMIZER_ADADELTA:
        ADD(0, "accumulated_grad", "accumulated_grad"),
            ADD(0, "accumulated_delta_var", "accumulated_delta_var");
        return 1;
    case SY_OPTIMIZER_ADAGRAD:
        ADD(0, "accumulator", "accumulator");
        return 1;
    case SY_OPTIMIZER_ADAMAX:
        ADD(0, "m", "m"), ADD(0, "u", "u");
        return 1;
    case SY_OPTIMIZER_ADAFACTOR:
        ADD(0, "r", "r"), ADD(0, "c", "c"), ADD(0, "v", "v");
        return 1;
    case SY_OPTIMIZER_NADAM:
        ADD(0, "m", "m"), ADD(0, "v", "v");
        return 1;
    case SY_OPTIMIZER_FTRL:
        ADD(0, "accumulator", "accumulator"), ADD(0, "linear", "linear");
        return 1;
    case SY_OPTIMIZER_LION:
        ADD(0, "m", "m");
        return 1;
    default:
        return 0;
    }
#undef ADD
}

/* Whether store variable v is trainable: no layer (nested models' too) marks it non_trainable */
static bool var_trainable(const sy_model *m, int32_t v) {
    for (int64_t i = 0; i < m->n_layers; i++) {
        const model_layer *L = &m->layers[i];
        if (L->sub && !var_trainable(L->sub, v)) return false;
        for (int j = 0; j < L->n_weights; j++)
            if (L->weight_var[j] == v) return !((L->non_trainable >> j) & 1u);
    }
    return true;
}

/* The model's trainable variables in Keras's model.trainable_variables
 * order, with their Keras names: into vars/names (at most max); returns how many. */
static int32_t trainable_vars(const sy_model *m, int32_t *vars, const char **names, int32_t max) {
    int32_t n = 0;
    int64_t count = m->functional ? m->n_order : m->n_layers;
    for (int64_t k = 0; k < count; k++) {
        int64_t i = m->functional ? m->order[k] : k;
        if (i < 0) continue; /* an InputLayer */
        int32_t nv = model_layer_vars(m, i, true, NULL, 0);
        int32_t *lv = nv ? sy_malloc((size_t)nv * sizeof *lv) : NULL;
        if (!lv)
            continue; /* none, or out of memory: the caller's count then disagrees and it stops */
        model_layer_vars(m, i, true, lv, nv);
        for (int32_t j = 0; j < nv; j++) {
            if (!var_trainable(m, lv[j])) continue;
            bool seen = false; /* a shared layer or model lists its weights once, as Keras's
                                  trainable_variables */
            for (int32_t q = 0; q < n && q < max && !seen; q++) seen = vars[q] == lv[j];
            if (seen) continue;
            if (n < max) {
                vars[n] = lv[j];
                names[n] = model_var_keras_name(m, i, lv[j]);
            }
            n++;
        }
        sy_free(lv);
    }
    return n;
}

/* Keras's list for m's optimizer (without "iteration:0"): a new array of *n entries, or NULL */
static opt_entry *entry_list(const sy_model *m, int32_t *n, sy_status *st) {
    slot_spec groups[3][3];
    int sizes[3];
    int n_groups = slot_groups(&m->optimizer, groups, sizes);
    int32_t nt =
        trainable_vars(m, NULL, NULL, 0); /* an upper bound: shared weights counted at each use */
    int32_t *vars = sy_calloc((size_t)nt + 1, sizeof *vars);
    const char **names = sy_calloc((size_t)nt + 1, sizeof *names);
    opt_entry *e = sy_calloc((size_t)nt * 3 * 3 + 1, sizeof *e);
    *n = 0;
    *st = SY_OK;
    if (!vars || !names || !e) {
        sy_free(vars), sy_free(names), sy_free(e);
        *st = sy_error(SY_ERR_OUT_OF_MEMORY, "optimizer_weights: out of memory");
        return NULL;
    }
    nt = trainable_vars(m, vars, names, nt); /* without repeats: at most the first count */
    const char *opt = sy_optimizer_class_name(m->optimizer.kind);
    for (int gi = 0; gi < n_groups; gi++)
        for (int32_t v = 0; v < nt; v++) {
            sy_shape s = sy_vars_shape(m->vars, vars[v]);
            for (int k = 0; k < sizes[gi]; k++) {
                const slot_spec *sp = &groups[gi][k];
                bool factored = !strcmp(sp->ours, "r") || !strcmp(sp->ours, "c");
                if (factored && m->optimizer.kind == SY_OPTIMIZER_ADAFACTOR && s.rank < 2) continue;
                opt_entry *x = &e[(*n)++];
                snprintf(x->keras, sizeof x->keras, "%s/%s/%s:0", opt, sp->keras, names[v]);
                x->var = vars[v];
                x->slot = sp->keras;
                snprintf(x->ours, sizeof x->ours, "%s/%s", sy_vars_name(m->vars, vars[v]),
                         sp->ours);
                x->shape = s;
                if (factored) { /* r: the shape without its last axis; c: without the next-to-last
                                 */
                    x->shape.rank--;
                    if (sp->ours[0] == 'c') x->shape.dims[x->shape.rank - 1] = s.dims[s.rank - 1];
                }
            }
        }
    /* weights Keras would name alike (a nested model's layer and an outer one of the same name)
     * take their store names ("features/dense/kernel"), which are unique; Keras reads by position
     */
    bool *clash = sy_calloc((size_t)*n + 1, sizeof *clash);
    for (int32_t i = 0; clash && i < *n; i++)
        for (int32_t j = i + 1; j < *n; j++)
            if (!strcmp(e[i].keras, e[j].keras)) clash[i] = clash[j] = true;
    for (int32_t i = 0; clash && i < *n; i++)
        if (clash[i])
            snprintf(e[i].keras, sizeof e[i].keras, "%s/%s/%s:0", opt, e[i].slot,
                     sy_vars_name(m->vars, e[i].var));
    if (!clash) {
        sy_free(e);
        e = NULL;
        *st = sy_error(SY_ERR_OUT_OF_MEMORY, "optimizer_weights: out of memory");
    }
    sy_free(clash);
    sy_free(vars);
    sy_free(names);
    return e;
}

sy_status optimizer_weights_write(h5_file *f, h5_id root, const sy_model *m) {
    if (!m->compiled || m->optimizer.kind == SY_OPTIMIZER_NONE) return SY_OK;
    sy_status st;
    int32_t n;
    opt_entry *e = entry_list(m, &n, &st);
    if (!e) return st;
    bool trained = false; /* the slots exist once a train plan was compiled */
    for (int32_t i = 0; i < n; i++) trained |= sy_vars_find(m->vars, e[i].ours) >= 0;
    if (!trained) {
        sy_free(e);
        return SY_OK;
    }
    if (m->vars->iterations > (1 << 24)) {
        sy_free(e);
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: the optimizer's iteration count %lld is past 2^24, which its "
                        "optimizer_weights cannot "
                        "hold exactly here; save a checkpoint instead",
                        h5_path(f), (long long)m->vars->iterations);
    }
    const char **names = sy_calloc((size_t)n + 2, sizeof *names);
    h5_id g = -1;
    if (!names) st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", h5_path(f));
    if (!st && !(st = h5_group_create(f, root, "optimizer_weights", &g))) {
        names[0] = "iteration:0";
        for (int32_t i = 0; i < n; i++) names[i + 1] = e[i].keras;
        st = h5_attr_write_strings(f, g, "weight_names", names, n + 1);
        float it = (float)m->vars->iterations;
        sy_shape scalar = sy_shape_of(0);
        if (!st) st = h5_dataset_write_f32_as_i64(f, g, "iteration:0", &scalar, &it);
        for (int32_t i = 0; i < n && !st; i++) {
            int32_t v = sy_vars_find(m->vars, e[i].ours);
            int64_t count = sy_shape_count(&e[i].shape);
            float *zeros = v < 0 ? sy_calloc((size_t)count + 1, sizeof *zeros) : NULL;
            if (v < 0 && !zeros)
                st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", h5_path(f));
            else
                st = h5_dataset_write_f32(f, g, e[i].keras, &e[i].shape,
                                          v < 0 ? zeros : sy_vars_data(m->vars, v));
            sy_free(zeros);
        }
    }
    h5_group_close(f, g);
    sy_free(names);
    sy_free(e);
    return st;
}

/* Keras's warning when a file's optimizer state does not fit its optimizer */
static sy_status mismatch(const char *path, const char *why) {
    sy_log(SY_LOG_WARNING,
           "%s: error in loading the saved optimizer state (%s). As a result, your model is "
           "starting with a freshly "
           "initialized optimizer.",
           path, why);
    return SY_OK;
}

sy_status optimizer_weights_read(sy_model *m, h5_file *f, h5_id root) {
    if (!m->compiled || m->optimizer.kind == SY_OPTIMIZER_NONE ||
        !h5_is_group(f, root, "optimizer_weights"))
        return SY_OK;
    const char *path = h5_path(f);
    sy_status st;
    int32_t n;
    opt_entry *e = entry_list(m, &n, &st);
    if (!e) return st;
    h5_id g = -1;
    h5_strings names = {0};
    bool found = false;
    float *values = NULL;
    sy_var_request *req = NULL;
    char why[512];
    if ((st = h5_group_open(f, root, "optimizer_weights", &g)) ||
        (st = h5_attr_read_strings(f, g, "weight_names", &names, &found)))
        goto done;
    if (found && names.n == 1 && strcmp(names.v[0], "iteration:0") == 0)
        n = 0; /* an optimizer that never stepped (Keras builds its slots at the first): only the
                  count */
    else if (!found || names.n != n + 1 || strcmp(names.v[0], "iteration:0") != 0) {
        snprintf(why, sizeof why,
                 "%lld weights in the file, %s expects %lld: iteration:0 and its slots",
                 (long long)(found ? names.n : 0), sy_optimizer_class_name(m->optimizer.kind),
                 (long long)n + 1);
        st = mismatch(path, why);
        goto done;
    }
    /* every shape checked, every value read, before the store changes */
    int64_t total = 1;
    for (int32_t i = 0; i < n; i++) total += sy_shape_count(&e[i].shape);
    values = sy_malloc((size_t)total * sizeof *values);
    req = sy_calloc((size_t)n + 2, sizeof *req);
    if (!values || !req) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for the optimizer's weights", path);
        goto done;
    }
    sy_shape s, scalar = sy_shape_of(0);
    if ((st = h5_dataset_shape_ex(f, g, "iteration:0", true, &s)) || !sy_shape_equal(&s, &scalar) ||
        (st = h5_dataset_read_f32_ex(f, g, "iteration:0", true, &scalar, values))) {
        if (!st)
            st =
                sy_error(SY_ERR_CORRUPT, "%s: optimizer_weights/iteration:0 is not a scalar", path);
        goto done;
    }
    int64_t off = 1;
    for (int32_t i = 0; i < n; i++) {
        const char *name = names.v[i + 1];
        /* Keras matches by position; a slot of another kind in this place means another optimizer
         */
        const char *slot = strchr(name, '/'), *want = strchr(e[i].keras, '/');
        size_t len = want ? (size_t)(strchr(want + 1, '/') - want) : 0;
        if (!slot || !want || strncmp(slot, want, len + 1) != 0) {
            snprintf(why, sizeof why, "weight %d is '%s' where %s keeps '%s'", (int)i + 1, name,
                     sy_optimizer_class_name(m->optimizer.kind), e[i].keras);
            st = mismatch(path, why);
            goto done;
        }
        if ((st = h5_dataset_shape(f, g, name, &s))) goto done;
        if (!sy_shape_equal(&s, &e[i].shape)) {
            char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
            snprintf(why, sizeof why, "'%s' is %s, the model's %s", name,
                     sy_shape_format(&s, a, sizeof a), sy_shape_format(&e[i].shape, b, sizeof b));
            st = mismatch(path, why);
            goto done;
        }
        if ((st = h5_dataset_read_f32(f, g, name, &s, values + off))) goto done;
        off += sy_shape_count(&s);
    }
    /* the slots into the store: found (a plan made them) or created now, then filled */
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        bool sgd_unused = m->optimizer.kind == SY_OPTIMIZER_SGD && !(m->optimizer.momentum > 0);
        if (sgd_unused) continue; /* Keras's zeros for a momentum SGD does not have */
        req[k++] =
            (sy_var_request){e[i].ours, SY_VAR_SLOT, SY_F32, e[i].shape, sy_init_zeros(), -1};
    }
    if (m->optimizer.kind == SY_OPTIMIZER_NADAM)
        req[k++] =
            (sy_var_request){NADAM_U_PRODUCT, SY_VAR_SLOT, SY_F32, scalar, sy_init_constant(1), -1};
    if ((st = vars_resolve(m->vars, req, k))) goto done;
    int64_t iterations = (int64_t)values[0];
    off = 1;
    k = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t c = sy_shape_count(&e[i].shape);
        if (!(m->optimizer.kind == SY_OPTIMIZER_SGD && !(m->optimizer.momentum > 0)))
            memcpy(sy_vars_data(m->vars, req[k++].index), values + off, (size_t)c * sizeof *values);
        off += c;
    }
    if (m->optimizer.kind == SY_OPTIMIZER_NADAM) { /* u_1 ... u_t, as the steps multiplied it */
        float prod = 1, b1 = (float)m->optimizer.beta_1;
        for (int64_t t = 1; t <= iterations; t++)
            prod = prod * (b1 * (1.0f - 0.5f * powf(0.96f, (float)t)));
        *(float *)sy_vars_data(m->vars, req[k].index) = prod;
    }
    m->vars->iterations = iterations;
done:
    h5_strings_free(&names);
    h5_group_close(f, g);
    sy_free(values);
    sy_free(req);
    sy_free(e);
    return st;
}
