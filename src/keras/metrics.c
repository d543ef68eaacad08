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
 */
#include "keras_internal.h"

#include <math.h>

static int64_t argmax_row(const float *v, int64_t n) {
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++)
        if (v[j] > v[best]) best = j;
    return best;
}

void metric_accumulate(keras_metric kind, const float *pred, const void *labels, int64_t rows, int64_t per_row,
                       double *sum) {
    double s = 0;
    switch (kind) {
    case KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY: {
        const int32_t *y = labels;
        for (int64_t r = 0; r < rows; r++) s += argmax_row(pred + r * per_row, per_row) == y[r];
        break;
    }
    case KERAS_METRIC_CATEGORICAL_ACCURACY: {
        const float *t = labels;
        for (int64_t r = 0; r < rows; r++)
            s += argmax_row(pred + r * per_row, per_row) == argmax_row(t + r * per_row, per_row);
        break;
    }
    case KERAS_METRIC_BINARY_ACCURACY: {
        const float *t = labels;
        for (int64_t r = 0; r < rows; r++) {
            int64_t hit = 0;
            for (int64_t j = 0; j < per_row; j++) hit += t[r * per_row + j] == (pred[r * per_row + j] > 0.5f ? 1.0f : 0.0f);
            s += (double)hit / (double)per_row;
        }
        break;
    }
    case KERAS_METRIC_MSE:
    case KERAS_METRIC_MAE: { /* issue 15: a regression output's metrics */
        const float *t = labels;
        for (int64_t r = 0; r < rows; r++) {
            double e = 0; /* float32 per row, as Keras's mean over the last axis */
            float acc = 0;
            for (int64_t j = 0; j < per_row; j++) {
                float d = t[r * per_row + j] - pred[r * per_row + j];
                acc += kind == KERAS_METRIC_MSE ? d * d : fabsf(d);
            }
            e = (double)(acc / (float)per_row);
            s += e;
        }
        break;
    }
    }
    *sum += s;
}
