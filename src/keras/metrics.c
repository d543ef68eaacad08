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
    int64_t steps;
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
    char q = *s == '\'' || *s == '"' ? *s++ : 0;
    size_t vl = 0;
    while (*s && (q ? *s != q : *s != ',' && *s != ' ' && *s != ')') && vl + 1 < vs) val[vl++] = *s++;
    val[vl] = 0;
    if (q && *s++ != q) return false;
    *p = s;
    return true;
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
    snprintf(out->name, sizeof out->name, "%s", d->cls ? d->logs_name : d->name);
    if (paren) { /* the class's arguments */
        const char *p = paren + 1, *end = strrchr(text, ')');
        if (!end || end[1] || !d->cls)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: metric '%s': arguments are written Class(key=value, ...)%s",
                            where, text, d->cls ? "" : "; a function's name takes none, use its class");
        char key[32], val[64];
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
                ok = !strcmp(val, "interpolation");
            } else if (!strcmp(key, "thresholds") &&
                       (d->kind == KERAS_METRIC_PRECISION || d->kind == KERAS_METRIC_RECALL)) {
                ok = num && v >= 0 && v <= 1;
                out->has_threshold = true;
                out->threshold = v;
            } else {
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: metric '%s': '%s' is not an argument systolic takes for %s (k: top-k; "
                                "num_thresholds, curve, summation_method: AUC; thresholds: Precision, Recall; name)",
                                where, text, key, d->name);
            }
            if (!ok)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: metric '%s': %s=%s is not allowed (k: a whole number >= 1; num_thresholds: 2 to "
                                "%d; curve: ROC or PR; summation_method: interpolation; thresholds: one number in "
                                "[0, 1])",
                                where, text, key, val, METRIC_STATE_MAX / 2 - 1);
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

int32_t metric_state_size(const metric_spec *ms) {
    switch (ms->kind) {
    case KERAS_METRIC_AUC: return 2 * ms->num_thresholds + 2; /* tp[T], fp[T], positives, negatives */
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
        double *tp = state, *fp = state + T;
        for (int64_t i = 0; i < n; i++) {
            /* Keras's bucketing for evenly spaced thresholds, in float32, of the prediction clipped to [0, 1] */
            float p = pred[i] < 0 ? 0 : pred[i] > 1 ? 1 : pred[i];
            float b = ceilf(p * (float)(T - 1)) - 1;
            int64_t bucket = b > 0 ? (int64_t)b : 0;
            if (isnan(pred[i])) continue;
            bool pos = t[i] != 0;
            double wi =
                weight_of(w, i / per_row); /* a row's weight broadcast over its predictions */
            /* above thresholds 0 .. bucket: kept per bucket here, summed from the top in
             * metric_value */
            if (pos)
                tp[bucket] += wi, state[2 * T] += wi;
            else
                fp[bucket] += wi, state[2 * T + 1] += wi;
        }
        return;
    }
    case KERAS_METRIC_PRECISION:
    case KERAS_METRIC_RECALL:
        for (int64_t i = 0; i < n; i++) {
            bool pos = t[i] != 0, above = pred[i] > (float)ms->threshold;
            double wi = weight_of(w, i / per_row);
            state[0] += (pos && above) * wi;
            state[1] += (!pos && above) * wi;
            state[2] += pos * wi;
        }
        return;
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
                          int64_t per_row, double *state) {
    row_weights w = {sw, mask, steps > 0 ? steps : 1};
    update_rows(ms, pred, labels, rows * steps, per_row, &w, state);
    double total = 0;
    for (int64_t r = 0; r < rows * steps; r++) total += weight_of(&w, r);
    state[ms->n_state - 1] += total;
}

static double div_no_nan(double a, double b) { return b == 0 ? 0 : a / b; }

/* Keras's AUC from per-bucket counts: tp[i], fp[i] become the counts above
 * threshold i (sums from the top), fn and tn the rest */
static double auc_value(const metric_spec *ms, const double *state) {
    int32_t T = ms->num_thresholds;
    double P = state[2 * T], N = state[2 * T + 1];
    double *tp = malloc(2 * (size_t)T * sizeof *tp);
    if (!tp) return NAN;
    double *fp = tp + T, a = 0, b = 0;
    for (int32_t i = T - 1; i >= 0; i--) {
        a += state[i];
        b += state[T + i];
        tp[i] = a;
        fp[i] = b;
    }
    double auc = 0;
    for (int32_t i = 0; i + 1 < T; i++) {
        if (ms->pr) { /* interpolate_pr_auc */
            double dtp = tp[i] - tp[i + 1], p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1], dp = p0 - p1;
            double slope = div_no_nan(dtp, dp > 0 ? dp : 0), intercept = tp[i + 1] - slope * p1;
            double ratio = p0 > 0 && p1 > 0 ? div_no_nan(p0, p1 > 0 ? p1 : 0) : 1;
            double fn1 = P - tp[i + 1];
            auc += div_no_nan(slope * (dtp + intercept * log(ratio)), tp[i + 1] + fn1 > 0 ? tp[i + 1] + fn1 : 0);
        } else { /* ROC: recall against the false positive rate, trapezoids */
            double r0 = div_no_nan(tp[i], P), r1 = div_no_nan(tp[i + 1], P);
            double f0 = div_no_nan(fp[i], N), f1 = div_no_nan(fp[i + 1], N);
            auc += (f0 - f1) * (r0 + r1) / 2;
        }
    }
    free(tp);
    return auc;
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
        json_object_set_new(c, "num_thresholds", json_integer(ms->num_thresholds));
        json_object_set_new(c, "curve", json_string(ms->pr ? "PR" : "ROC"));
        json_object_set_new(c, "summation_method", json_string("interpolation"));
        json_object_set_new(c, "multi_label", json_false());
        json_object_set_new(c, "num_labels", json_null());
        json_object_set_new(c, "label_weights", json_null());
        json_object_set_new(c, "from_logits", json_false());
    }
    if (ms->kind == KERAS_METRIC_PRECISION || ms->kind == KERAS_METRIC_RECALL) {
        json_object_set_new(c, "thresholds", ms->has_threshold ? json_real(ms->threshold) : json_null());
        json_object_set_new(c, "top_k", json_null());
        json_object_set_new(c, "class_id", json_null());
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
    if (name && strcmp(name, d->logs_name)) len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "name='%s', ", name);
    const json_t *k = json_object_get(c, "k"), *nt = json_object_get(c, "num_thresholds"),
                 *curve = json_object_get(c, "curve"), *th = json_object_get(c, "thresholds");
    if (json_is_integer(k)) len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "k=%lld, ", (long long)json_integer_value(k));
    if (json_is_integer(nt))
        len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "num_thresholds=%lld, ", (long long)json_integer_value(nt));
    if (json_is_string(curve)) len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "curve='%s', ", json_string_value(curve));
    if (json_is_number(th)) len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "thresholds=%.17g, ", json_number_value(th));
    else if (th && !json_is_null(th)) return NULL; /* a list of thresholds */
    if (len >= size) return NULL;
    if (buf[len - 1] == '(') buf[len - 1] = 0; /* no arguments: the bare class name */
    else buf[len - 2] = ')', buf[len - 1] = 0;
    return buf;
}
