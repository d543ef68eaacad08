/*
 * losses.c - compile()'s losses: every tf.keras 2.15 built-in loss by its
 * Keras names, aliases and class names, with its Loss class's arguments
 * (issue 17, losses and metrics); the graph of each output's loss; the
 * Loss object as training_config writes and reads it; and the warning
 * tf.keras gives when a crossentropy is told from_logits=True but the
 * model's output is a softmax's (a sigmoid's, for binary).
 *
 * The table below is keras.losses.get's: each loss's function name (the
 * canonical name, and the "fn" of its config), its class, the aliases
 * keras.losses exports, the arguments its class takes and the order its
 * get_config writes them in. The crossentropies and mean squared error have
 * ops of their own (graph/ops_nn.c); every other loss is the keras_loss op
 * with a sy_loss_fn. label_smoothing is applied to the targets in the
 * graph, as Keras does: y (1 - s) + s / C (categorical), + s / 2 (binary).
 * A loss is reduced as Keras's Loss objects reduce it
 * (SUM_OVER_BATCH_SIZE): the per-sample values (after the mean over the
 * last axis the function takes) averaged over every sample of the batch.
 *
 * issue 17: an axis other than the last is moved last (move_class_axis),
 * so the ops' reduction over the last axis is Keras's over `axis`; a
 * softmax's or sigmoid's output counts as its logits there, as Keras's
 * _keras_logits does for an activation over any axis.
 * SparseCategoricalCrossentropy's ignore_class: the host feeds the valid
 * labels (fit.c), which weight the loss as a mask does, divided by their
 * count (keras_loss_mask), Keras's apply_valid_mask.
 *
 * Refused, each with a message naming it: the batch axis, a reduction
 * other than "auto"/"sum_over_batch_size" in a file, an argument a loss's
 * class does not take.
 *
 * The warning: tf.keras 2.15 (backend._get_logits) computes such a loss
 * from the activation's logits whatever from_logits says, so the loss is
 * right either way; but with from_logits=True the user most likely meant a
 * linear output, and Keras says so with a UserWarning. Python shows a
 * warning once per place in the code; here it is logged once per
 * compile(), the first time a plan with the loss is built
 * (m->logits_warned is reset by compile), not once per plan: fit builds a
 * training and an evaluation plan. With several outputs each output's loss
 * is looked at; the first such output gives the warning.
 */
#include "keras_config.h"
#include "keras_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* arguments a Loss class takes, in its get_config's order */
enum {
    A_APPLY = 1 << 0,  /* apply_class_balancing */
    A_FOCAL = 1 << 1,  /* alpha, gamma */
    A_LOGITS = 1 << 2, /* from_logits */
    A_SMOOTH = 1 << 3, /* label_smoothing */
    A_AXIS = 1 << 4,   /* axis */
    A_IGNORE = 1 << 5, /* ignore_class */
    A_DELTA = 1 << 6,  /* delta */
};

typedef struct loss_def {
    const char *fn;         /* Keras's function: the canonical name and the config's "fn" */
    const char *class_name;
    const char *object_name; /* the object's default name */
    keras_loss kind;
    sy_loss_fn op_fn;        /* KERAS_LOSS_FN's */
    unsigned args;
    bool binary_smoothing;   /* label_smoothing toward 1/2, else 1/C */
    const char *aliases[4];  /* other names keras.losses.get takes */
} loss_def;

static const loss_def defs[] = {
    {"sparse_categorical_crossentropy", "SparseCategoricalCrossentropy", "sparse_categorical_crossentropy",
     KERAS_LOSS_SPARSE_CATEGORICAL_CE, 0, A_LOGITS | A_IGNORE, false, {NULL}},
    {"categorical_crossentropy", "CategoricalCrossentropy", "categorical_crossentropy", KERAS_LOSS_CATEGORICAL_CE, 0,
     A_LOGITS | A_SMOOTH | A_AXIS, false, {NULL}},
    {"binary_crossentropy", "BinaryCrossentropy", "binary_crossentropy", KERAS_LOSS_BINARY_CE, 0,
     A_LOGITS | A_SMOOTH | A_AXIS, true, {"bce", "BCE"}},
    {"mean_squared_error", "MeanSquaredError", "mean_squared_error", KERAS_LOSS_MSE, 0, 0, false, {"mse", "MSE"}},
    {"mean_absolute_error", "MeanAbsoluteError", "mean_absolute_error", KERAS_LOSS_FN, SY_LOSS_MAE, 0, false,
     {"mae", "MAE"}},
    {"mean_absolute_percentage_error", "MeanAbsolutePercentageError", "mean_absolute_percentage_error", KERAS_LOSS_FN,
     SY_LOSS_MAPE, 0, false, {"mape", "MAPE"}},
    {"mean_squared_logarithmic_error", "MeanSquaredLogarithmicError", "mean_squared_logarithmic_error", KERAS_LOSS_FN,
     SY_LOSS_MSLE, 0, false, {"msle", "MSLE"}},
    {"kl_divergence", "KLDivergence", "kl_divergence", KERAS_LOSS_FN, SY_LOSS_KLD, 0, false,
     {"kld", "KLD", "kullback_leibler_divergence"}},
    {"huber", "Huber", "huber_loss", KERAS_LOSS_FN, SY_LOSS_HUBER, A_DELTA, false, {"huber_loss"}},
    {"log_cosh", "LogCosh", "log_cosh", KERAS_LOSS_FN, SY_LOSS_LOG_COSH, 0, false, {"logcosh"}},
    {"poisson", "Poisson", "poisson", KERAS_LOSS_FN, SY_LOSS_POISSON, 0, false, {NULL}},
    {"hinge", "Hinge", "hinge", KERAS_LOSS_FN, SY_LOSS_HINGE, 0, false, {NULL}},
    {"squared_hinge", "SquaredHinge", "squared_hinge", KERAS_LOSS_FN, SY_LOSS_SQUARED_HINGE, 0, false, {NULL}},
    {"categorical_hinge", "CategoricalHinge", "categorical_hinge", KERAS_LOSS_FN, SY_LOSS_CATEGORICAL_HINGE, 0, false,
     {NULL}},
    {"cosine_similarity", "CosineSimilarity", "cosine_similarity", KERAS_LOSS_FN, SY_LOSS_COSINE_SIMILARITY, A_AXIS,
     false, {NULL}},
    {"binary_focal_crossentropy", "BinaryFocalCrossentropy", "binary_focal_crossentropy", KERAS_LOSS_FN,
     SY_LOSS_BINARY_FOCAL, A_APPLY | A_FOCAL | A_LOGITS | A_SMOOTH | A_AXIS, true, {NULL}},
    {"categorical_focal_crossentropy", "CategoricalFocalCrossentropy", "categorical_focal_crossentropy", KERAS_LOSS_FN,
     SY_LOSS_CATEGORICAL_FOCAL, A_FOCAL | A_LOGITS | A_SMOOTH | A_AXIS, false, {NULL}},
};
#define N_DEFS (sizeof defs / sizeof defs[0])

sy_loss_args sy_loss_args_default(void) {
    return (sy_loss_args){.label_smoothing = 0, .axis = -1, .delta = 1.0, .alpha = 0.25, .gamma = 2.0,
                          .apply_class_balancing = false, .has_ignore_class = false, .ignore_class = 0, .name = NULL};
}

/* The definition named `name` (function, alias or class name), or NULL. */
static const loss_def *def_named(const char *name) {
    for (size_t i = 0; name && i < N_DEFS; i++) {
        if (!strcmp(name, defs[i].fn) || !strcmp(name, defs[i].class_name)) return &defs[i];
        for (int k = 0; k < 4 && defs[i].aliases[k]; k++)
            if (!strcmp(name, defs[i].aliases[k])) return &defs[i];
    }
    return NULL;
}

static const loss_def *def_of(const model_head *h) {
    for (size_t i = 0; i < N_DEFS; i++)
        if (defs[i].kind == h->loss && (h->loss != KERAS_LOSS_FN || defs[i].op_fn == h->fn)) return &defs[i];
    return &defs[0];
}

sy_status keras_loss_resolve(const char *where, const char *name, bool from_logits, const sy_loss_args *args,
                             const sy_shape *out, model_head *h) {
    const loss_def *d = def_named(name);
    if (!d)
        return sy_error(SY_ERR_NOT_FOUND,
                        "%s: unknown loss '%s'; known: sparse_categorical_crossentropy, "
                        "categorical_crossentropy, binary_crossentropy (bce), mean_squared_error (mse), "
                        "mean_absolute_error (mae), mean_absolute_percentage_error (mape), "
                        "mean_squared_logarithmic_error (msle), kl_divergence (kld), huber (huber_loss), log_cosh "
                        "(logcosh), poisson, hinge, squared_hinge, categorical_hinge, cosine_similarity, "
                        "binary_focal_crossentropy, categorical_focal_crossentropy (tf.keras 2.15's built-in losses), or their "
                        "class names (Huber, ...)",
                        where, name ? name : "(none given)");
    sy_loss_args a = args ? *args : sy_loss_args_default(), def = sy_loss_args_default();
    h->loss = d->kind;
    h->fn = d->op_fn;
    h->object = args != NULL || from_logits;
    h->from_logits = from_logits;
    snprintf(h->loss_name, sizeof h->loss_name, "%s", name);
    /* an argument away from its default must be one the class takes */
    const char *bad = NULL;
    if (from_logits && !(d->args & A_LOGITS)) bad = "from_logits";
    else if (a.label_smoothing != 0 && !(d->args & A_SMOOTH)) bad = "label_smoothing";
    else if (a.delta != def.delta && !(d->args & A_DELTA)) bad = "delta";
    else if ((a.alpha != def.alpha || a.gamma != def.gamma) && !(d->args & A_FOCAL)) bad = "alpha/gamma";
    else if (a.apply_class_balancing && !(d->args & A_APPLY)) bad = "apply_class_balancing";
    else if (a.has_ignore_class && !(d->args & A_IGNORE)) bad = "ignore_class";
    if (bad)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s is not an argument of Keras's %s (loss '%s')", where, bad,
                        d->class_name, name);
    if (!isfinite(a.label_smoothing) || a.label_smoothing < 0 || a.label_smoothing > 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: label_smoothing %g must be in [0, 1]", where, a.label_smoothing);
    if (!isfinite(a.delta) || a.delta < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: Huber's delta %g must be a finite number >= 0", where, a.delta);
    if (!isfinite(a.alpha) || !isfinite(a.gamma) || a.gamma < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: focal alpha %g and gamma %g must be finite, gamma >= 0", where,
                        a.alpha, a.gamma);
    /* Keras's axis counts the batch axis, which a loss per sample cannot reduce */
    if (a.axis != -1 && (a.axis < -out->rank || a.axis == 0 || a.axis > out->rank)) {
        char sh[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: %s with axis=%d: the output %s has axes 1 to %d (or -1 to -%d); the "
                        "batch axis 0 is "
                        "not one a loss per sample can reduce",
                        where, d->class_name, a.axis, keras_shape_str(out, sh, sizeof sh),
                        out->rank, out->rank);
    }
    if (a.name && strlen(a.name) >= sizeof h->object_name)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the loss's name '%s' is longer than %zu characters", where,
                        a.name, sizeof h->object_name - 1);
    snprintf(h->object_name, sizeof h->object_name, "%s", a.name ? a.name : d->object_name);
    a.name = NULL;
    h->args = a;
    if (d->kind == KERAS_LOSS_SPARSE_CATEGORICAL_CE && out->dims[out->rank - 1] < 2) {
        char s[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_SHAPE,
                        "%s: sparse_categorical_crossentropy needs one output per class, but the model's output is %s; "
                        "for two classes with one sigmoid unit use binary_crossentropy",
                        where, keras_shape_str(out, s, sizeof s));
    }
    return SY_OK;
}

sy_node keras_loss_build(sy_model *m, int32_t j, sy_graph *g, sy_node pred, sy_node y) {
    return keras_loss_build_masked(m, j, g, pred, y, SY_NONE, SY_NONE, SY_NONE, SY_NONE);
}

/* x (batch, ...) with axis a (Keras's count, the batch axis 0) moved last, the others in order */
static sy_node axis_last(sy_graph *g, sy_node x, int a) {
    sy_shape s = sy_graph_shape(g, x);
    int32_t perm[SY_MAX_RANK], k = 0;
    for (int i = 0; i < s.rank; i++)
        if (i != a) perm[k++] = i;
    perm[k] = a;
    return sy_graph_transpose(g, x, perm);
}

/* A loss with axis other than the last: pred and the targets with that axis moved last, so that the
 * ops' reduction over the last axis is Keras's over `axis` (label_smoothing's class count follows).
 * A softmax's or sigmoid's output counts as its logits, as Keras's _keras_logits does for an
 * activation over any axis. */
static sy_node move_class_axis(sy_graph *g, const model_head *h, sy_node pred, sy_node *y,
                               bool *from_logits) {
    int rank = sy_graph_shape(g, pred).rank,
        a = h->args.axis < 0 ? h->args.axis + rank : h->args.axis;
    if (a == rank - 1) return pred;
    const sy_node_rec *n = graph_node(g, pred);
    bool binary = h->loss == KERAS_LOSS_BINARY_CE ||
                  (h->loss == KERAS_LOSS_FN && h->fn == SY_LOSS_BINARY_FOCAL);
    if (h->loss != KERAS_LOSS_FN || h->fn != SY_LOSS_COSINE_SIMILARITY) {
        if (n->op == (binary ? SY_OP_SIGMOID : SY_OP_SOFTMAX)) {
            pred = graph_input(g, pred, 0);
            *from_logits = true;
        }
    }
    *y = axis_last(g, *y, a);
    return axis_last(g, pred, a);
}

sy_node keras_loss_build_masked(sy_model *m, int32_t j, sy_graph *g, sy_node pred, sy_node y,
                                sy_node mask, sy_node valid, sy_node real, sy_node step_weight) {
    const model_head *h = &m->heads[j];
    const loss_def *d = def_of(h);
    keras_loss_warn_logits(m, j, g, pred);
    /* issue 16, mixed_bfloat16: tf.keras 2.15 computes a loss in y_pred's dtype, so a bfloat16 output gets a
     * bfloat16 loss (docs/design/mixed-precision.md) */
    bool was_bf16 = sy_graph_set_bf16(g, sy_graph_is_bf16(g, pred));
    bool from_logits = h->from_logits;
    /* C: the classes along the loss's axis -- but Keras's categorical_focal_crossentropy smooths by
     * the last axis's size whatever its axis */
    sy_shape ps = sy_graph_shape(g, pred);
    if (d->args & A_AXIS) pred = move_class_axis(g, h, pred, &y, &from_logits);
    if (h->loss != KERAS_LOSS_FN || h->fn != SY_LOSS_CATEGORICAL_FOCAL)
        ps = sy_graph_shape(g, pred);
    double s = h->args.label_smoothing;
    if (s != 0) { /* y (1 - s) + s / C, or s / 2 for the binary losses */
        double to = d->binary_smoothing ? 0.5 * s : s / (double)ps.dims[ps.rank - 1];
        y = sy_graph_add(g, sy_graph_mul(g, y, sy_graph_fill(g, SY_F32, sy_shape_of(0), (double)(1.0f - (float)s))),
                         sy_graph_fill(g, SY_F32, sy_shape_of(0), (double)(float)to));
    }
    sy_node l;
    switch (h->loss) {
    case KERAS_LOSS_SPARSE_CATEGORICAL_CE:
        l = sy_graph_sparse_categorical_crossentropy(g, pred, y, from_logits);
        break;
    case KERAS_LOSS_CATEGORICAL_CE:
        l = sy_graph_categorical_crossentropy(g, pred, y, from_logits);
        break;
    case KERAS_LOSS_BINARY_CE:
        l = sy_graph_binary_crossentropy(g, pred, y, from_logits);
        break;
    case KERAS_LOSS_MSE: l = sy_graph_mean_squared_error(g, pred, y); break;
    default: {
        sy_loss_params p = {.delta = h->args.delta,
                            .alpha = h->args.alpha,
                            .gamma = h->args.gamma,
                            .apply_class_balancing = h->args.apply_class_balancing,
                            .from_logits = from_logits};
        l = sy_graph_loss(g, h->fn, pred, y, &p);
        break;
    }
    }
    /* issue 17: ignore_class's valid labels (Keras's loss mask), and the output's mask, weight the
     * entries; Keras's apply_valid_mask then divides by their count (keras_loss_mask) */
    if (valid != SY_NONE) mask = mask == SY_NONE ? valid : sy_graph_mul(g, mask, valid);
    sy_shape ls = sy_graph_shape(g, l);
    /* issue 17, temporal sample weights: Keras's losses * sample_weight, per step */
    if (step_weight != SY_NONE) l = sy_graph_mul(g, l, step_weight);
    if (mask != SY_NONE) /* issue 17, masking: the output's mask weights the steps */
        l = keras_loss_mask(g, l, mask, real);
    else if (ls.rank > 1) { /* (batch, T, ...): the mean over the rest is each sample's loss */
        int32_t axes[SY_MAX_RANK];
        for (int i = 1; i < ls.rank; i++) axes[i - 1] = i;
        l = sy_graph_reduce_mean(g, l, axes, ls.rank - 1, false);
    }
    sy_graph_set_bf16(g, was_bf16);
    return l;
}

json_t *keras_loss_json(const model_head *h) {
    if (!h->object) return json_string(h->loss_name);
    const loss_def *d = def_of(h);
    json_t *c = json_object(), *loss = json_object();
    json_object_set_new(c, "reduction", json_string("auto"));
    json_object_set_new(c, "name", json_string(h->object_name));
    if (d->args & A_DELTA) json_object_set_new(c, "delta", json_real(h->args.delta));
    if (d->args & A_APPLY) json_object_set_new(c, "apply_class_balancing", json_boolean(h->args.apply_class_balancing));
    if (d->args & A_FOCAL) {
        json_object_set_new(c, "alpha", json_real(h->args.alpha));
        json_object_set_new(c, "gamma", json_real(h->args.gamma));
    }
    if (d->args & A_LOGITS) json_object_set_new(c, "from_logits", json_boolean(h->from_logits));
    if (d->args & A_SMOOTH) json_object_set_new(c, "label_smoothing", json_real(h->args.label_smoothing));
    if (d->args & A_AXIS) json_object_set_new(c, "axis", json_integer(h->args.axis));
    if (d->args & A_IGNORE)
        json_object_set_new(c, "ignore_class",
                            h->args.has_ignore_class ? json_integer(h->args.ignore_class)
                                                     : json_null());
    json_object_set_new(c, "fn", json_string(d->fn));
    json_object_set_new(loss, "class_name", json_string(d->class_name));
    json_object_set_new(loss, "config", c);
    return loss;
}

sy_status keras_loss_from_json(const char *path, const json_t *loss, const char **name, bool *from_logits,
                               sy_loss_args *args, bool *has_args) {
    *from_logits = *has_args = false;
    *args = sy_loss_args_default();
    if (json_is_string(loss)) {
        *name = json_string_value(loss);
        return SY_OK;
    }
    if (!json_is_object(loss))
        return sy_error(SY_ERR_UNSUPPORTED, "%s: training_config: a loss must be a name or a Loss object", path);
    const char *cls = json_string_value(json_object_get(loss, "class_name"));
    const json_t *cfg = json_object_get(loss, "config");
    const loss_def *d = NULL;
    for (size_t i = 0; cls && i < N_DEFS; i++)
        if (!strcmp(cls, defs[i].class_name)) d = &defs[i];
    if (!d)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: training_config: loss class '%s' is not one of tf.keras 2.15's built-in losses "
                        "(docs/design/losses-metrics.md lists them)",
                        path, cls ? cls : "(none)");
    if (cfg && !json_is_object(cfg))
        return sy_error(SY_ERR_CORRUPT, "%s: training_config: loss %s's config is not a JSON object", path, cls);
    *name = d->fn;
    *has_args = true;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)cfg, key, v) {
        bool ok = true;
        const char *want = "";
        unsigned need = 0;
        if (!strcmp(key, "from_logits")) {
            need = A_LOGITS, ok = json_is_boolean(v), want = "true or false";
            if (ok) *from_logits = json_is_true(v);
        } else if (!strcmp(key, "label_smoothing")) {
            need = A_SMOOTH, ok = json_is_number(v), want = "a number in [0, 1]";
            if (ok) args->label_smoothing = json_number_value(v);
        } else if (!strcmp(key, "delta")) {
            need = A_DELTA, ok = json_is_number(v), want = "a number";
            if (ok) args->delta = json_number_value(v);
        } else if (!strcmp(key, "alpha") || !strcmp(key, "gamma")) {
            need = A_FOCAL, ok = json_is_number(v), want = "a number";
            if (ok) *(key[0] == 'a' ? &args->alpha : &args->gamma) = json_number_value(v);
        } else if (!strcmp(key, "apply_class_balancing")) {
            need = A_APPLY, ok = json_is_boolean(v), want = "true or false";
            if (ok) args->apply_class_balancing = json_is_true(v);
        } else if (!strcmp(key, "reduction")) {
            ok = json_is_string(v) && (!strcmp(json_string_value(v), "auto") ||
                                       !strcmp(json_string_value(v), "sum_over_batch_size"));
            want = "\"auto\" or \"sum_over_batch_size\" (the mean over the batch)";
        } else if (!strcmp(key, "axis")) {
            need = A_AXIS, want = "an axis of the output (an integer)";
            ok = json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
                 json_integer_value(v) <= INT32_MAX;
            if (ok) args->axis = (int32_t)json_integer_value(v);
        } else if (!strcmp(key, "ignore_class")) {
            need = A_IGNORE, want = "null (no class ignored) or a class index (an integer)";
            ok = json_is_null(v) || (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
                                     json_integer_value(v) <= INT32_MAX);
            if (ok && !json_is_null(v))
                args->has_ignore_class = true, args->ignore_class = (int32_t)json_integer_value(v);
        } else if (!strcmp(key, "name")) {
            ok = json_is_string(v), want = "a string";
            if (ok) args->name = json_string_value(v);
        } else if (!strcmp(key, "fn")) {
            ok = json_is_string(v) && !strcmp(json_string_value(v), d->fn), want = d->fn;
        } else {
            need = ~0u;
        }
        if (need && !(d->args & need))
            return sy_error(SY_ERR_UNSUPPORTED, "%s: training_config: loss %s has an argument '%s' that its Keras class "
                            "does not take", path, cls, key);
        if (!ok) {
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            sy_status st = sy_error(SY_ERR_UNSUPPORTED, "%s: training_config: loss %s with %s=%s is not supported; "
                                    "systolic takes %s only", path, cls, key, text ? text : "?", want);
            free(text);
            return st;
        }
    }
    return SY_OK;
}

void keras_loss_warn_logits(sy_model *m, int32_t j, const sy_graph *g, sy_node pred) {
    const model_head *h = &m->heads[j];
    if (!h->from_logits || m->logits_warned) return;
    bool binary = h->loss == KERAS_LOSS_BINARY_CE;
    if (h->loss != KERAS_LOSS_SPARSE_CATEGORICAL_CE && h->loss != KERAS_LOSS_CATEGORICAL_CE && !binary) return;
    if (!sy_graph_is_activation_output(g, pred, binary)) return;
    m->logits_warned = true;
    const char *fn = h->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE ? "sparse_categorical_crossentropy"
                     : binary                                    ? "binary_crossentropy"
                                                                 : "categorical_crossentropy";
    /* Keras's text, word for word (op types as TensorFlow names them) */
    sy_log(SY_LOG_WARNING,
           "\"`%s` received `from_logits=True`, but the `output` argument was produced by a %s activation and thus "
           "does not represent logits. Was this intended?\"",
           fn, binary ? "Sigmoid" : "Softmax");
}
