/*
 * metrics.c - the streaming metrics metric_fns update (tf.compat.v1.metrics)
 * and tf.argmax for them.
 *
 * TensorFlow's metric_fn returns {name: (value, update_op)} and the
 * evaluation runs every update_op once per batch; here the metric_fn is
 * called once per batch and each sy_metrics_* call is that batch's update.
 * A metric's state is TensorFlow's: a weighted total and a total weight
 * for the means (accuracy is the mean of labels == predictions, the
 * predictions cast to the labels' type first, as tf.metrics.accuracy casts
 * them), true and false positive and negative weights for precision and
 * recall, each divided only where the divisor is positive (0 otherwise).
 * Sums are in double; TensorFlow keeps float32 totals, which agree to
 * float32 rounding over an evaluation set.
 *
 * These are not Keras's metrics (keras/metrics.c): tf.metrics take class
 * ids where Keras's accuracies take scores, and cast to booleans where
 * Keras's Precision thresholds at 0.5.
 */
#include "estimator_internal.h"

#include <math.h>
#include <string.h>

typedef enum metric_kind {
    M_ACCURACY,
    M_MEAN,
    M_MAE,
    M_MSE,
    M_RMSE,
    M_PRECISION,
    M_RECALL
} metric_kind;

static const char *const kind_names[] = {
    "accuracy",  "mean",  "mean_absolute_error", "mean_squared_error", "root_mean_squared_error",
    "precision", "recall"};

typedef struct metric {
    char name[EST_NAME_MAX];
    metric_kind kind;
    double total, weight; /* the means: sum(w f), sum(w); precision, recall: tp and tp + fp (fn) */
} metric;

struct sy_metrics {
    metric *v;
    int64_t n, cap;
};

sy_status metrics_new(sy_metrics **out) {
    *out = sy_calloc(1, sizeof **out);
    return *out ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
}

void metrics_free(sy_metrics *m) {
    if (!m) return;
    sy_free(m->v);
    sy_free(m);
}

int32_t metrics_count(const sy_metrics *m) {
    return (int32_t)m->n;
}
const char *metrics_name(const sy_metrics *m, int32_t i) {
    return m->v[i].name;
}

/* The metric `name`, made at its first update as kind k. */
static sy_status metric_get(sy_metrics *m, const char *name, metric_kind k, metric **out) {
    if (!m || !name || !*name || strlen(name) >= EST_NAME_MAX)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "metric_fn: a metric needs a name of 1 to %d characters (%s)",
                        EST_NAME_MAX - 1, kind_names[k]);
    for (int64_t i = 0; i < m->n; i++) {
        if (strcmp(m->v[i].name, name)) continue;
        if (m->v[i].kind != k)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "metric_fn: metric '%s' is a %s, updated here as a %s: one name, "
                            "one metric",
                            name, kind_names[m->v[i].kind], kind_names[k]);
        *out = &m->v[i];
        return SY_OK;
    }
    if (!strcmp(name, "loss") || !strcmp(name, "global_step"))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "metric_fn: '%s' is evaluate()'s own result: name the metric "
                        "otherwise",
                        name);
    if (SY_GROW(m->v, m->cap, m->n + 1))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "metric_fn: out of memory");
    metric *v = &m->v[m->n++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->kind = k;
    *out = v;
    return SY_OK;
}

/* weights: NULL, one per value, or one per row of the first axis (broadcast over the rest). */
static sy_status check_weights(const metric *v, const sy_tensor *values, const sy_tensor *w,
                               int64_t *per) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    int64_t n = sy_tensor_count(values);
    sy_shape vs = sy_tensor_shape(values);
    *per = 1;
    if (!w) return SY_OK;
    int64_t nw = sy_tensor_count(w), rows = vs.rank ? vs.dims[0] : 1;
    if (nw == n) return SY_OK;
    if (nw == rows && rows > 0) {
        *per = n / rows;
        return SY_OK;
    }
    sy_shape ws = sy_tensor_shape(w);
    return sy_error(SY_ERR_SHAPE,
                    "metric '%s' (%s): weights of shape %s do not fit values of shape %s: give one "
                    "weight per value or per row",
                    v->name, kind_names[v->kind], sy_shape_format(&ws, a, sizeof a),
                    sy_shape_format(&vs, b, sizeof b));
}

static bool is_int(sy_dtype d) {
    return d == SY_I32 || d == SY_I64 || d == SY_U8;
}

/* One batch of (labels, predictions) (labels NULL: values alone, for mean). */
static sy_status update(sy_metrics *m, const char *name, metric_kind k, const sy_tensor *labels,
                        const sy_tensor *predictions, const sy_tensor *weights) {
    metric *v = NULL;
    sy_status st = metric_get(m, name, k, &v);
    if (st) return st;
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (!predictions || (k != M_MEAN && !labels))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "metric '%s' (%s): no %s given", name,
                        kind_names[k],
                        predictions   ? "labels"
                        : k == M_MEAN ? "values"
                                      : "predictions");
    int64_t n = sy_tensor_count(predictions), per;
    if (labels && sy_tensor_count(labels) != n) {
        sy_shape ls = sy_tensor_shape(labels), ps = sy_tensor_shape(predictions);
        return sy_error(
            SY_ERR_SHAPE,
            "metric '%s' (%s): labels of shape %s and predictions of shape %s do not have "
            "the same values%s",
            name, kind_names[k], sy_shape_format(&ls, a, sizeof a),
            sy_shape_format(&ps, b, sizeof b),
            k == M_ACCURACY ? " (class ids: take tf.argmax of the scores, sy_tensor_argmax)" : "");
    }
    if ((st = check_weights(v, predictions, weights, &per))) return st;
    /* tf.metrics.accuracy casts the predictions to the labels' type */
    bool cast =
        k == M_ACCURACY && is_int(sy_tensor_dtype(labels)) && !is_int(sy_tensor_dtype(predictions));
    for (int64_t i = 0; i < n; i++) {
        double w = weights ? sy_tensor_get(weights, i / per) : 1.0,
               p = sy_tensor_get(predictions, i);
        double l = labels ? sy_tensor_get(labels, i) : 0, f = 0;
        if (cast) p = trunc(p);
        switch (k) {
        case M_ACCURACY:
            f = p == l;
            break;
        case M_MEAN:
            f = p;
            break;
        case M_MAE:
            f = fabs(p - l);
            break;
        case M_MSE:
        case M_RMSE:
            f = (p - l) * (p - l);
            break;
        case M_PRECISION: /* tp over predicted positives */
            if (p == 0) continue;
            f = l != 0;
            break;
        case M_RECALL: /* tp over actual positives */
            if (l == 0) continue;
            f = p != 0;
            break;
        }
        v->total += w * f;
        v->weight += w;
    }
    return SY_OK;
}

sy_status sy_metrics_accuracy(sy_metrics *m, const char *name, const sy_tensor *labels,
                              const sy_tensor *predictions, const sy_tensor *weights) {
    return update(m, name, M_ACCURACY, labels, predictions, weights);
}
sy_status sy_metrics_mean(sy_metrics *m, const char *name, const sy_tensor *values,
                          const sy_tensor *weights) {
    return update(m, name, M_MEAN, NULL, values, weights);
}
sy_status sy_metrics_mean_absolute_error(sy_metrics *m, const char *name, const sy_tensor *labels,
                                         const sy_tensor *predictions, const sy_tensor *weights) {
    return update(m, name, M_MAE, labels, predictions, weights);
}
sy_status sy_metrics_mean_squared_error(sy_metrics *m, const char *name, const sy_tensor *labels,
                                        const sy_tensor *predictions, const sy_tensor *weights) {
    return update(m, name, M_MSE, labels, predictions, weights);
}
sy_status sy_metrics_root_mean_squared_error(sy_metrics *m, const char *name,
                                             const sy_tensor *labels, const sy_tensor *predictions,
                                             const sy_tensor *weights) {
    return update(m, name, M_RMSE, labels, predictions, weights);
}
sy_status sy_metrics_precision(sy_metrics *m, const char *name, const sy_tensor *labels,
                               const sy_tensor *predictions, const sy_tensor *weights) {
    return update(m, name, M_PRECISION, labels, predictions, weights);
}
sy_status sy_metrics_recall(sy_metrics *m, const char *name, const sy_tensor *labels,
                            const sy_tensor *predictions, const sy_tensor *weights) {
    return update(m, name, M_RECALL, labels, predictions, weights);
}

double sy_metrics_value(const sy_metrics *m, const char *name) {
    for (int64_t i = 0; m && name && i < m->n; i++) {
        const metric *v = &m->v[i];
        if (strcmp(v->name, name)) continue;
        double mean = v->weight > 0 ? v->total / v->weight : 0.0;
        return v->kind == M_RMSE ? sqrt(mean) : mean;
    }
    return NAN;
}

sy_status sy_tensor_argmax(const sy_tensor *x, sy_tensor **out) {
    *out = NULL;
    char a[SY_SHAPE_STR_MAX];
    sy_shape s = sy_tensor_shape(x);
    if (s.rank < 1 || s.dims[s.rank - 1] < 1)
        return sy_error(SY_ERR_SHAPE,
                        "argmax: x of shape %s has no last axis to take the largest value along",
                        sy_shape_format(&s, a, sizeof a));
    if (sy_tensor_dtype(x) == SY_STRING)
        return sy_error(SY_ERR_DTYPE, "argmax: x holds strings, not numbers");
    int64_t c = s.dims[s.rank - 1], rows = sy_tensor_count(x) / c;
    s.rank--;
    sy_status st = sy_tensor_new(SY_I32, s, out);
    if (st) return st;
    int32_t *o = sy_tensor_data(*out);
    for (int64_t r = 0; r < rows; r++) {
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (sy_tensor_get(x, r * c + j) > sy_tensor_get(x, r * c + best)) best = j;
        o[r] = (int32_t)best;
    }
    return SY_OK;
}
