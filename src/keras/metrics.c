/*
 * metrics.c - Keras's accuracy metrics, computed on the host from a step's
 * predictions and labels (docs/design/keras-semantics.md §6):
 *
 *   sparse_categorical_accuracy  argmax(pred) == label
 *   categorical_accuracy         argmax(pred) == argmax(target)
 *   binary_accuracy              mean over the last axis of target == (pred > 0.5 ? 1 : 0)
 *   mean_squared_error (mse)     mean over the last axis of (target - pred)^2
 *   mean_absolute_error (mae)    mean over the last axis of |target - pred|
 *
 * argmax takes the first of tied maxima, as tf.argmax does. Each metric is
 * a mean over samples, so fit() and evaluate() keep sums and counts, which
 * also leaves padded rows out exactly.
 *
 * issue 17, losses and metrics: the metrics users reach for beyond those,
 * each as Keras 2.15 computes and accumulates it (Keras's names; the logs'
 * names are Keras's defaults):
 *
 *   top_k_categorical_accuracy         tf.math.in_top_k(pred, argmax(target), k):
 *                                      fewer than k classes score strictly
 *                                      higher (ties at the boundary count in)
 *   sparse_top_k_categorical_accuracy  the same with class indices
 *   mean_absolute_percentage_error     as the loss (mape), a mean
 *   mean_squared_logarithmic_error     as the loss (msle), a mean
 *   RootMeanSquaredError               sqrt(sum of squared errors / count)
 *                                      over the epoch: the sqrt of the
 *                                      epoch's mean, not a mean of sqrts
 *   AUC                                tp and fp at num_thresholds thresholds
 *                                      (plus the positive and negative
 *                                      totals, from which fn and tn follow),
 *                                      Keras's bucketing: a prediction p is
 *                                      above thresholds 0 .. ceil(p (T - 1))
 *                                      - 1 (computed in float32), the first
 *                                      threshold -1e-7 and the last 1 + 1e-7;
 *                                      the curve by Keras's interpolation
 *                                      (ROC: trapezoids; PR: Davis &
 *                                      Goadrich, Keras's interpolate_pr_auc)
 *   Precision, Recall                  tp, fp (fn) at one threshold (0.5):
 *                                      pred > threshold, label != 0
 *
 * These are stateful as Keras's: the confusion counts add up over every
 * batch of the epoch and every replica's shard (fit.c folds the shards'
 * states in a fixed order) and the value is taken from the totals, never a
 * mean of batch values. Every element of the output counts (Keras's
 * multi_label=False flattens the labels and predictions).
 *
 * issue 17, metric options: AUC's multi_label (a curve per label of the
 * last axis, averaged or label_weights-weighted), label_weights (weighting
 * the labels' elements otherwise), from_logits (a sigmoid first) and
 * summation_method minoring/majoring; Precision and Recall's top_k (a
 * row's k highest, the rest -1e10, as _filter_top_k), class_id (one
 * column) and a list of one threshold.
 *
 * issue 17, masking: an update can weigh each row of predictions (a
 * masked output's mask, times the sample weights for weighted_metrics, as
 * Keras passes them to update_state as sample_weight): the means add
 * weight * value and keep the weights' sum as their count, the confusion
 * counts add the weight instead of 1 (update_rows, metric_update_masked).
 */
#include "keras_config.h"
#include "keras_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t argmax_row(const float *v, int64_t n) {
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++)
        if (v[j] > v[best]) best = j;
    return best;
}

/* issue 17, masking: what each row of predictions weighs in a metric's update -- its sample's
 * weight (sw, one per `steps` rows) times its step's mask -- as Keras passes a masked output's mask
 * (times the sample weights for weighted_metrics) to update_state; NULL: 1 each */
typedef struct row_weights {
    const float *sw, *mask;
    int64_t steps; /* rows per sample weight: a sample's steps, or 1 for temporal weights */
} row_weights;

static double weight_of(const row_weights *w, int64_t r) {
    if (!w) return 1.0;
    return (w->sw ? (double)w->sw[r / w->steps] : 1.0) * (w->mask ? (double)w->mask[r] : 1.0);
}

static void accumulate_rows(keras_metric kind, const float *pred, const void *labels, int64_t rows,
                            int64_t per_row, const row_weights *w, double *sum) {
    double s = 0;
    switch (kind) {
    case KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY: {
        const int32_t *y = labels;
        for (int64_t r = 0; r < rows; r++)
            s += weight_of(w, r) * (argmax_row(pred + r * per_row, per_row) == y[r]);
        break;
    }
    case KERAS_METRIC_CATEGORICAL_ACCURACY: {
        const float *t = labels;
        for (int64_t r = 0; r < rows; r++)
            s += weight_of(w, r) *
                 (argmax_row(pred + r * per_row, per_row) == argmax_row(t + r * per_row, per_row));
        break;
    }
    case KERAS_METRIC_BINARY_ACCURACY: {
        const float *t = labels;
        for (int64_t r = 0; r < rows; r++) {
            int64_t hit = 0;
            for (int64_t j = 0; j < per_row; j++) hit += t[r * per_row + j] == (pred[r * per_row + j] > 0.5f ? 1.0f : 0.0f);
            s += weight_of(w, r) * ((double)hit / (double)per_row);
        }
        break;
    }
    case KERAS_METRIC_MSE:
    case KERAS_METRIC_MAE: { /* issue 15: a regression output's metrics */
        const float *t = labels;
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0; /* float32 per row, as Keras's mean over the last axis */
            for (int64_t j = 0; j < per_row; j++) {
                float d = t[r * per_row + j] - pred[r * per_row + j];
                acc += kind == KERAS_METRIC_MSE ? d * d : fabsf(d);
            }
            s += weight_of(w, r) * (double)(acc / (float)per_row);
        }
        break;
    }
    default: break; /* issue 17: the others are metric_update's */
    }
    *sum += s;
}

void metric_accumulate(keras_metric kind, const float *pred, const void *labels, int64_t rows,
                       int64_t per_row, double *sum) {
    accumulate_rows(kind, pred, labels, rows, per_row, NULL, sum);
}

/* ---- issue 17, losses and metrics ------------------------------------------------- */

typedef struct metric_def {
    const char *name;       /* as compile() takes it */
    keras_metric kind;
    bool cls;               /* a Keras metric class (else a function, MeanMetricWrapper) */
    const char *logs_name;  /* a class's default name; a function logs the name it was given */
    const char *fn;         /* a function's Keras name ("fn" of MeanMetricWrapper) */
} metric_def;

static const metric_def defs[] = {
    {"top_k_categorical_accuracy", KERAS_METRIC_TOP_K, false, NULL, "top_k_categorical_accuracy"},
    {"TopKCategoricalAccuracy", KERAS_METRIC_TOP_K, true, "top_k_categorical_accuracy", NULL},
    {"sparse_top_k_categorical_accuracy", KERAS_METRIC_SPARSE_TOP_K, false, NULL, "sparse_top_k_categorical_accuracy"},
    {"SparseTopKCategoricalAccuracy", KERAS_METRIC_SPARSE_TOP_K, true, "sparse_top_k_categorical_accuracy", NULL},
    {"mape", KERAS_METRIC_MAPE, false, NULL, "mean_absolute_percentage_error"},
    {"mean_absolute_percentage_error", KERAS_METRIC_MAPE, false, NULL, "mean_absolute_percentage_error"},
    {"MeanAbsolutePercentageError", KERAS_METRIC_MAPE, true, "mean_absolute_percentage_error", NULL},
    {"msle", KERAS_METRIC_MSLE, false, NULL, "mean_squared_logarithmic_error"},
    {"mean_squared_logarithmic_error", KERAS_METRIC_MSLE, false, NULL, "mean_squared_logarithmic_error"},
    {"MeanSquaredLogarithmicError", KERAS_METRIC_MSLE, true, "mean_squared_logarithmic_error", NULL},
    {"MeanSquaredError", KERAS_METRIC_MSE, true, "mean_squared_error", NULL},
    {"MeanAbsoluteError", KERAS_METRIC_MAE, true, "mean_absolute_error", NULL},
    {"RootMeanSquaredError", KERAS_METRIC_RMSE, true, "root_mean_squared_error", NULL},
    {"AUC", KERAS_METRIC_AUC, true, "auc", NULL},
    {"Precision", KERAS_METRIC_PRECISION, true, "precision", NULL},
    {"Recall", KERAS_METRIC_RECALL, true, "recall", NULL},
};
#define N_DEFS (sizeof defs / sizeof defs[0])

/* "key=value" with the value's quotes (' or ") dropped; false if malformed */
static bool next_arg(const char **p, char *key, size_t ks, char *val, size_t vs) {
    const char *s = *p;
    while (*s == ' ' || *s == ',') s++;
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || (size_t)(eq - s) >= ks) return false;
    size_t kl = (size_t)(eq - s);
    while (kl && s[kl - 1] == ' ') kl--;
    memcpy(key, s, kl);
    key[kl] = 0;
    s = eq + 1;
    while (*s == ' ') s++;
    /* a quoted string, a [list] (issue 17: label_weights, thresholds) kept with its brackets, or a
     * word */
    char q = *s == '\'' || *s == '"' ? *s++ : *s == '[' ? ']' : 0;
    size_t vl = 0;
    while (*s && (q ? *s != q : *s != ',' && *s != ' ' && *s != ')') && vl + 1 < vs) val[vl++] = *s++;
    if (q == ']' && *s == ']' && vl + 1 < vs) val[vl++] = *s;
    val[vl] = 0;
    if (q && *s++ != q) return false;
    *p = s;
    return true;
}

/* "[a, b, ...]" of at most max numbers into v; how many, or -1 if malformed */
static int number_list(const char *text, double *v, int max) {
    if (*text++ != '[') return -1;
    int n = 0;
    while (*text == ' ') text++;
    if (*text == ']') return text[1] ? -1 : 0;
    for (;;) {
        char *e;
        double x = strtod(text, &e);
        if (e == text || n == max) return -1;
        v[n++] = x;
        for (text = e; *text == ' '; text++) {
        }
        if (*text == ']') return text[1] ? -1 : n;
        if (*text++ != ',') return -1;
        while (*text == ' ') text++;
    }
}

/* Python's and JSON's booleans */
static int boolean(const char *v) {
    return !strcmp(v, "True") || !strcmp(v, "true")     ? 1
           : !strcmp(v, "False") || !strcmp(v, "false") ? 0
                                                        : -1;
}

sy_status metric_resolve(const char *where, const char *text, bool sparse, metric_spec *out) {
    if (!text) return SY_ERR_NOT_FOUND;
    char name[40];
    const char *paren = strchr(text, '(');
    size_t nl = paren ? (size_t)(paren - text) : strlen(text);
    if (nl >= sizeof name) return SY_ERR_NOT_FOUND;
    memcpy(name, text, nl);
    name[nl] = 0;
    const metric_def *d = NULL;
    for (size_t i = 0; i < N_DEFS && !d; i++)
        if (!strcmp(defs[i].name, name)) d = &defs[i];
    if (!d) return SY_ERR_NOT_FOUND;
    memset(out, 0, sizeof *out);
    out->kind = d->kind;
    out->cls = d->cls;
    out->k = 5;
    out->num_thresholds = 200;
    out->threshold = 0.5;
    out->class_id = -1;
    snprintf(out->name, sizeof out->name, "%s", d->cls ? d->logs_name : d->name);
    if (paren) { /* the class's arguments */
        const char *p = paren + 1, *end = strrchr(text, ')');
        if (!end || end[1] || !d->cls)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: metric '%s': arguments are written Class(key=value, ...)%s",
                            where, text, d->cls ? "" : "; a function's name takes none, use its class");
        char key[32], val[512];
        while (p < end) {
            const char *at = p;
            while (*at == ' ') at++;
            if (at == end) break;
            if (!next_arg(&p, key, sizeof key, val, sizeof val) || p > end)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: metric '%s': cannot read its arguments near '%s'", where,
                                text, at);
            char *e = NULL;
            double v = strtod(val, &e);
            bool num = e && e != val && !*e;
            bool ok = true;
            if (!strcmp(key, "name") && val[0] && strlen(val) < sizeof out->name) {
                snprintf(out->name, sizeof out->name, "%s", val);
            } else if (!strcmp(key, "k") && (d->kind == KERAS_METRIC_TOP_K || d->kind == KERAS_METRIC_SPARSE_TOP_K)) {
                ok = num && v >= 1 && v <= 1e6 && v == floor(v);
                out->k = (int32_t)v;
            } else if (!strcmp(key, "num_thresholds") && d->kind == KERAS_METRIC_AUC) {
                ok = num && v > 1 && v == floor(v) && 2 * v + 2 <= METRIC_STATE_MAX;
                out->num_thresholds = (int32_t)v;
            } else if (!strcmp(key, "curve") && d->kind == KERAS_METRIC_AUC) {
                ok = !strcmp(val, "ROC") || !strcmp(val, "PR");
                out->pr = !strcmp(val, "PR");
            } else if (!strcmp(key, "summation_method") && d->kind == KERAS_METRIC_AUC) {
                out->summation = !strcmp(val, "interpolation") ? 0
                                 : !strcmp(val, "minoring")    ? 1
                                 : !strcmp(val, "majoring")    ? 2
                                                               : -1;
                ok = out->summation >= 0;
            } else if (!strcmp(key, "multi_label") && d->kind == KERAS_METRIC_AUC) {
                ok = boolean(val) >= 0;
                out->multi_label = boolean(val) == 1;
            } else if (!strcmp(key, "from_logits") && d->kind == KERAS_METRIC_AUC) {
                ok = boolean(val) >= 0;
                out->from_logits = boolean(val) == 1;
            } else if (!strcmp(key, "num_labels") && d->kind == KERAS_METRIC_AUC) {
                ok = !strcmp(val, "None") ||
                     (num && v >= 1 && v <= METRIC_LABEL_WEIGHTS_MAX && v == floor(v));
                out->num_labels = num ? (int32_t)v : 0;
            } else if (!strcmp(key, "label_weights") && d->kind == KERAS_METRIC_AUC) {
                double lw[METRIC_LABEL_WEIGHTS_MAX];
                int n = !strcmp(val, "None") ? 0 : number_list(val, lw, METRIC_LABEL_WEIGHTS_MAX);
                ok = n >= 0 && strcmp(val, "[]");
                for (int i = 0; ok && i < n; i++) { /* Keras keeps them in float32; none negative */
                    ok = isfinite(lw[i]) && lw[i] >= 0;
                    out->label_weights[i] = (float)lw[i];
                }
                out->n_label_weights = n > 0 ? n : 0;
            } else if (!strcmp(key, "thresholds") &&
                       (d->kind == KERAS_METRIC_PRECISION || d->kind == KERAS_METRIC_RECALL)) {
                double t[2]; /* a list of one threshold gives Keras's scalar result too; of several,
                                a vector */
                int n = val[0] == '[' ? number_list(val, t, 2) : -1;
                if (n == 1) v = t[0], num = true, out->threshold_list = true;
                if (n > 1 || n == 0)
                    return sy_error(
                        SY_ERR_UNSUPPORTED,
                        "%s: metric '%s': thresholds=%s gives one value per threshold (Keras's "
                        "result is "
                        "a vector), which the logs cannot hold; give one threshold per metric",
                        where, text, val);
                ok = !strcmp(val, "None") || (num && v >= 0 && v <= 1);
                out->has_threshold = num;
                out->threshold = num ? v : 0.5;
            } else if ((!strcmp(key, "top_k") || !strcmp(key, "class_id")) &&
                       (d->kind == KERAS_METRIC_PRECISION || d->kind == KERAS_METRIC_RECALL)) {
                bool top = key[0] == 't';
                ok = !strcmp(val, "None") ||
                     (num && v >= (top ? 1 : 0) && v <= 1e6 && v == floor(v));
                if (top)
                    out->top_k = num ? (int32_t)v : 0;
                else
                    out->class_id = num ? (int32_t)v : -1;
            } else {
                return sy_error(
                    SY_ERR_INVALID_ARGUMENT,
                    "%s: metric '%s': '%s' is not an argument systolic takes for %s (k: top-k; "
                    "num_thresholds, curve, summation_method, multi_label, num_labels, "
                    "label_weights, "
                    "from_logits: AUC; thresholds, top_k, class_id: Precision, Recall; name)",
                    where, text, key, d->name);
            }
            if (!ok)
                return sy_error(
                    SY_ERR_INVALID_ARGUMENT,
                    "%s: metric '%s': %s=%s is not allowed (k, top_k: a whole number >= 1; "
                    "class_id: "
                    "one >= 0; num_thresholds: 2 to %d; curve: ROC or PR; summation_method: "
                    "interpolation, minoring or majoring; multi_label, from_logits: True or False; "
                    "num_labels: 1 to %d; label_weights: a list of numbers >= 0; thresholds: one "
                    "number "
                    "in [0, 1])",
                    where, text, key, val, METRIC_STATE_MAX / 2 - 1, METRIC_LABEL_WEIGHTS_MAX);
        }
    }
    bool wants_sparse = d->kind == KERAS_METRIC_SPARSE_TOP_K;
    if (sparse != wants_sparse)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: metric '%s' %s, but the loss takes %s; %s", where, text,
                        wants_sparse ? "takes class indices" : "compares with targets of the output's shape",
                        sparse ? "class indices (sparse_categorical_crossentropy)" : "targets of the output's shape",
                        wants_sparse ? "use top_k_categorical_accuracy" : "use the sparse form of the metric");
    return SY_OK;
}

sy_status metric_check_output(const char *where, const sy_shape *out, metric_spec *ms) {
    int64_t classes = out->rank ? out->dims[out->rank - 1] : 1;
    char sh[SY_SHAPE_STR_MAX];
    keras_shape_str(out, sh, sizeof sh);
    ms->labels = (int32_t)(classes < METRIC_LABEL_WEIGHTS_MAX ? classes : METRIC_LABEL_WEIGHTS_MAX);
    if (ms->class_id >= classes || ms->top_k > classes)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: metric '%s': %s=%d, but the output %s has %lld classes", where,
                        ms->name, ms->top_k > classes ? "top_k" : "class_id",
                        ms->top_k > classes ? ms->top_k : ms->class_id, sh, (long long)classes);
    if (ms->n_label_weights && ms->n_label_weights != classes)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: metric '%s': %d label_weights, but the output %s has %lld labels "
                        "(Keras: \"Number of "
                        "labels is not consistent\")",
                        where, ms->name, ms->n_label_weights, sh, (long long)classes);
    if (ms->multi_label && (out->rank != 1 || classes > METRIC_LABEL_WEIGHTS_MAX ||
                            (ms->num_labels && ms->num_labels != classes)))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: metric '%s': a multi-label AUC takes an output of (None, labels) with "
                        "at most %d labels "
                        "(num_labels, if given, the same), but the output is %s",
                        where, ms->name, METRIC_LABEL_WEIGHTS_MAX, sh);
    return SY_OK;
}

int32_t metric_state_size(const metric_spec *ms) {
    switch (ms->kind) {
    case KERAS_METRIC_AUC: /* tp[T], fp[T], positives, negatives; per label for multi_label */
        return (2 * ms->num_thresholds + 2) * (ms->multi_label ? ms->labels : 1);
    case KERAS_METRIC_PRECISION:
    case KERAS_METRIC_RECALL: return 3; /* tp, fp, positives */
    default: return 1;
    }
}

/* in_top_k: fewer than k entries of row score strictly more than row[t] */
static bool in_top_k(const float *row, int64_t n, int64_t t, int32_t k) {
    if (t < 0 || t >= n || !isfinite(row[t])) return false;
    int64_t above = 0;
    for (int64_t j = 0; j < n; j++) above += row[j] > row[t];
    return above < k;
}

static void update_rows(const metric_spec *ms, const float *pred, const void *labels, int64_t rows,
                        int64_t per_row, const row_weights *w, double *state) {
    const float *t = labels;
    int64_t n = rows * per_row;
    switch (ms->kind) {
    case KERAS_METRIC_TOP_K:
        for (int64_t r = 0; r < rows; r++)
            state[0] += weight_of(w, r) * in_top_k(pred + r * per_row, per_row,
                                                   argmax_row(t + r * per_row, per_row), ms->k);
        return;
    case KERAS_METRIC_SPARSE_TOP_K:
        for (int64_t r = 0; r < rows; r++)
            state[0] += weight_of(w, r) *
                        in_top_k(pred + r * per_row, per_row, ((const int32_t *)labels)[r], ms->k);
        return;
    case KERAS_METRIC_MAPE:
    case KERAS_METRIC_MSLE:
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0; /* float32 per row, as Keras's mean over the last axis */
            for (int64_t j = 0; j < per_row; j++) {
                float y = t[r * per_row + j], p = pred[r * per_row + j];
                if (ms->kind == KERAS_METRIC_MAPE) {
                    float den = fabsf(y) > 1e-7f ? fabsf(y) : 1e-7f;
                    acc += fabsf((y - p) / den);
                } else {
                    float d = log1pf(p > 1e-7f ? p : 1e-7f) - log1pf(y > 1e-7f ? y : 1e-7f);
                    acc += d * d;
                }
            }
            state[0] += weight_of(w, r) * (double)(acc / (float)per_row) *
                        (ms->kind == KERAS_METRIC_MAPE ? 100.0 : 1.0);
        }
        return;
    case KERAS_METRIC_RMSE:
        accumulate_rows(KERAS_METRIC_MSE, pred, labels, rows, per_row, w, state);
        return;
    case KERAS_METRIC_AUC: {
        int32_t T = ms->num_thresholds;
        for (int64_t i = 0; i < n; i++) {
            /* from_logits: Keras's sigmoid first, in float32 */
            float x = ms->from_logits ? 1.0f / (1.0f + expf(-pred[i])) : pred[i];
            /* Keras's bucketing for evenly spaced thresholds, in float32, of the prediction clipped to [0, 1] */
            float p = x < 0 ? 0 : x > 1 ? 1 : x;
            float b = ceilf(p * (float)(T - 1)) - 1;
            int64_t bucket = b > 0 ? (int64_t)b : 0, c = i % per_row;
            if (isnan(x)) continue;
            bool pos = t[i] != 0;
            /* a row's weight broadcast over its predictions; label_weights weight the labels unless
             * each has its own curve (multi_label), whose state is label c's */
            double wi = weight_of(w, i / per_row);
            if (ms->n_label_weights && !ms->multi_label) wi *= ms->label_weights[c];
            double *tp = state + (ms->multi_label ? c * (2 * T + 2) : 0), *fp = tp + T;
            /* above thresholds 0 .. bucket: kept per bucket here, summed from the top in
             * metric_value */
            if (pos)
                tp[bucket] += wi, tp[2 * T] += wi;
            else
                fp[bucket] += wi, tp[2 * T + 1] += wi;
        }
        return;
    }
    case KERAS_METRIC_PRECISION:
    case KERAS_METRIC_RECALL: {
        /* Keras's default threshold is 0.5, or with top_k -1e10: the top k predictions of a row
         * count as positive (_filter_top_k sets the others to -1e10, ties going to the lower index,
         * as tf.math.top_k's); class_id looks at that column only */
        float th = ms->has_threshold ? (float)ms->threshold : ms->top_k ? -1e10f : 0.5f;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = i % per_row, r = i - c;
            if (ms->class_id >= 0 && c != ms->class_id) continue;
            float x = pred[i];
            if (ms->top_k) {
                int64_t rank = 0;
                for (int64_t j = 0; j < per_row; j++)
                    rank += pred[r + j] > x || (pred[r + j] == x && j < c);
                if (rank >= ms->top_k) x = -1e10f;
            }
            bool pos = t[i] != 0, above = x > th;
            double wi = weight_of(w, i / per_row);
            state[0] += (pos && above) * wi;
            state[1] += (!pos && above) * wi;
            state[2] += pos * wi;
        }
        return;
    }
    default:
        accumulate_rows(ms->kind, pred, labels, rows, per_row, w, state);
    }
}

void metric_update(const metric_spec *ms, const float *pred, const void *labels, int64_t rows,
                   int64_t per_row, double *state) {
    update_rows(ms, pred, labels, rows, per_row, NULL, state);
}

void metric_update_masked(const metric_spec *ms, const float *pred, const void *labels,
                          const float *sw, const float *mask, int64_t rows, int64_t steps,
                          int64_t per_row, bool per_step, double *state) {
    row_weights w = {sw, mask, per_step || steps <= 0 ? 1 : steps};
    update_rows(ms, pred, labels, rows * steps, per_row, &w, state);
    double total = 0;
    for (int64_t r = 0; r < rows * steps; r++) total += weight_of(&w, r);
    state[ms->n_state - 1] += total;
}

static double div_no_nan(double a, double b) { return b == 0 ? 0 : a / b; }

/* Keras's AUC of one curve from per-bucket counts (state: tp[T], fp[T], positives, negatives):
 * tp[i], fp[i] become the counts above threshold i (sums from the top, into tp: 2T scratch
 * doubles), fn and tn the rest. PR with interpolation is Keras's interpolate_pr_auc; otherwise the
 * Riemann sum of the curve (ROC: recall over the false positive rate; PR: precision over recall),
 * heights the mean, the minimum (minoring) or the maximum (majoring) of neighbouring points. */
static double auc_curve(const metric_spec *ms, const double *state, double *tp) {
    int32_t T = ms->num_thresholds;
    double P = state[2 * T], N = state[2 * T + 1];
    double *fp = tp + T, a = 0, b = 0;
    for (int32_t i = T - 1; i >= 0; i--) {
        a += state[i];
        b += state[T + i];
        tp[i] = a;
        fp[i] = b;
    }
    double auc = 0;
    for (int32_t i = 0; i + 1 < T; i++) {
        if (ms->pr && ms->summation == 0) { /* interpolate_pr_auc */
            double dtp = tp[i] - tp[i + 1], p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1], dp = p0 - p1;
            double slope = div_no_nan(dtp, dp > 0 ? dp : 0), intercept = tp[i + 1] - slope * p1;
            double ratio = p0 > 0 && p1 > 0 ? div_no_nan(p0, p1 > 0 ? p1 : 0) : 1;
            double fn1 = P - tp[i + 1];
            auc += div_no_nan(slope * (dtp + intercept * log(ratio)), tp[i + 1] + fn1 > 0 ? tp[i + 1] + fn1 : 0);
            continue;
        }
        double r0 = div_no_nan(tp[i], P), r1 = div_no_nan(tp[i + 1], P), x0, x1, y0, y1;
        if (ms->pr) { /* precision over recall */
            x0 = r0, x1 = r1;
            y0 = div_no_nan(tp[i], tp[i] + fp[i]),
            y1 = div_no_nan(tp[i + 1], tp[i + 1] + fp[i + 1]);
        } else { /* recall over the false positive rate */
            x0 = div_no_nan(fp[i], N), x1 = div_no_nan(fp[i + 1], N), y0 = r0, y1 = r1;
        }
        double h = ms->summation == 1   ? fmin(y0, y1)
                   : ms->summation == 2 ? fmax(y0, y1)
                                        : (y0 + y1) / 2;
        auc += (x0 - x1) * h;
    }
    return auc;
}

/* A multi-label AUC is the mean of its labels' curves, or their label_weights-weighted mean */
static double auc_value(const metric_spec *ms, const double *state) {
    double *tp = malloc(2 * (size_t)ms->num_thresholds * sizeof *tp);
    if (!tp) return NAN;
    double auc = 0, wsum = 0;
    int32_t L = ms->multi_label ? ms->labels : 1;
    for (int32_t l = 0; l < L; l++) {
        double a = auc_curve(ms, state + (size_t)l * (2 * (size_t)ms->num_thresholds + 2), tp);
        double wl = ms->multi_label && ms->n_label_weights ? ms->label_weights[l] : 1;
        auc += a * wl;
        wsum += wl;
    }
    free(tp);
    return ms->multi_label ? div_no_nan(auc, wsum) : auc;
}

double metric_value(const metric_spec *ms, const double *state, double count) {
    switch (ms->kind) {
    case KERAS_METRIC_AUC: return auc_value(ms, state);
    case KERAS_METRIC_PRECISION: return div_no_nan(state[0], state[0] + state[1]);
    case KERAS_METRIC_RECALL: return div_no_nan(state[0], state[2]);
    case KERAS_METRIC_RMSE: return sqrt(state[0] / count);
    default: return state[0] / count;
    }
}

json_t *metric_json(const metric_spec *ms, const char *name) {
    static const char *const classes[] = {
        [KERAS_METRIC_TOP_K] = "TopKCategoricalAccuracy",  [KERAS_METRIC_SPARSE_TOP_K] = "SparseTopKCategoricalAccuracy",
        [KERAS_METRIC_MAPE] = "MeanAbsolutePercentageError", [KERAS_METRIC_MSLE] = "MeanSquaredLogarithmicError",
        [KERAS_METRIC_MSE] = "MeanSquaredError",             [KERAS_METRIC_MAE] = "MeanAbsoluteError",
        [KERAS_METRIC_RMSE] = "RootMeanSquaredError",        [KERAS_METRIC_AUC] = "AUC",
        [KERAS_METRIC_PRECISION] = "Precision",              [KERAS_METRIC_RECALL] = "Recall",
    };
    json_t *c = json_object(), *w = json_object();
    json_object_set_new(c, "name", json_string(name));
    json_object_set_new(c, "dtype", json_string("float32"));
    if (ms->kind == KERAS_METRIC_TOP_K || ms->kind == KERAS_METRIC_SPARSE_TOP_K) json_object_set_new(c, "k", json_integer(ms->k));
    if (ms->kind == KERAS_METRIC_AUC) {
        static const char *const summation[] = {"interpolation", "minoring", "majoring"};
        json_t *lw = ms->n_label_weights ? json_array() : json_null();
        for (int32_t i = 0; i < ms->n_label_weights;
             i++) /* float32 widened, as Keras writes them */
            json_array_append_new(lw, json_real((double)ms->label_weights[i]));
        json_object_set_new(c, "num_thresholds", json_integer(ms->num_thresholds));
        json_object_set_new(c, "curve", json_string(ms->pr ? "PR" : "ROC"));
        json_object_set_new(c, "summation_method", json_string(summation[ms->summation]));
        json_object_set_new(c, "multi_label", json_boolean(ms->multi_label));
        json_object_set_new(c, "num_labels",
                            ms->num_labels ? json_integer(ms->num_labels) : json_null());
        json_object_set_new(c, "label_weights", lw);
        json_object_set_new(c, "from_logits", json_boolean(ms->from_logits));
    }
    if (ms->kind == KERAS_METRIC_PRECISION || ms->kind == KERAS_METRIC_RECALL) {
        json_t *th = ms->has_threshold ? json_real(ms->threshold) : json_null();
        if (ms->threshold_list) { /* as given: [0.5] */
            json_t *list = json_array();
            json_array_append_new(list, th);
            th = list;
        }
        json_object_set_new(c, "thresholds", th);
        json_object_set_new(c, "top_k", ms->top_k ? json_integer(ms->top_k) : json_null());
        json_object_set_new(c, "class_id",
                            ms->class_id >= 0 ? json_integer(ms->class_id) : json_null());
    }
    json_object_set_new(w, "class_name", json_string(classes[ms->kind]));
    json_object_set_new(w, "config", c);
    return w;
}

const char *metric_text_from_json(const json_t *v, const char *prefix, char *buf, size_t size) {
    const char *cls = json_string_value(json_object_get(v, "class_name"));
    const json_t *c = json_object_get(v, "config");
    const metric_def *d = NULL;
    for (size_t i = 0; cls && i < N_DEFS && !d; i++)
        if (defs[i].cls && !strcmp(defs[i].name, cls)) d = &defs[i];
    if (!d) return NULL;
    const char *name = json_string_value(json_object_get(c, "name"));
    if (name && prefix[0] && !strncmp(name, prefix, strlen(prefix))) name += strlen(prefix);
    size_t len = (size_t)snprintf(buf, size, "%s(", cls);
    if (name && strcmp(name, d->logs_name))
        len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "name='%s', ", name);
    /* every other argument as key=value, for metric_resolve to take or refuse by name (null and
     * false are the classes' defaults: left out) */
    const char *key;
    const json_t *arg;
    json_object_foreach((json_t *)c, key, arg) {
        if (!strcmp(key, "name") || !strcmp(key, "dtype") || json_is_null(arg) ||
            json_is_false(arg))
            continue;
        char *text =
            json_is_string(arg)
                ? NULL
                : json_dumps(arg, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (json_is_string(arg))
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s='%s', ", key,
                                    json_string_value(arg));
        else
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s=%s, ", key,
                                    text ? text : "?");
        free(text);
    }
    if (len >= size) return NULL;
    if (buf[len - 1] == '(') buf[len - 1] = 0; /* no arguments: the bare class name */
    else buf[len - 2] = ')', buf[len - 1] = 0;
    return buf;
}
