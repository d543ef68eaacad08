/*
 * sample_weight.c - fit()'s and evaluate()'s sample_weight, class_weight and
 * validation_split, as tf.keras 2.15 has them (keras/src/engine/data_adapter.py,
 * compile_utils.py, losses_utils.compute_weighted_loss).
 *
 * A sample's weight multiplies its loss before the reduction, which stays
 * SUM_OVER_BATCH_SIZE: sum(w * loss) / batch_size, so weights do not
 * renormalise (a batch of weights 0.5 halves the loss). The compiled plan
 * takes the weights as one more input (compile.c, model_plan.sw) and
 * multiplies each sample's total loss by it before the regularization
 * penalties join, as Keras adds them after the weighted losses; the host
 * weighs each output's loss the same way from the plan's weight input. The
 * logged loss is Keras's Mean of batch losses weighted by batch size, which
 * is sum(w * loss) over the epoch's samples / their count.
 *
 * Temporal weights, (samples, T) (or (samples, T, 1)), weigh each step of
 * a sequence output whose loss has one value per step, (batch, T): Keras's
 * compute_weighted_loss multiplies the losses by weights of their rank
 * (squeeze_or_expand_dimensions squeezes a trailing 1 and expands a
 * (batch,) weight to (batch, 1)), then reduces SUM_OVER_BATCH_SIZE:
 * sum(w * loss) / (batch * T). The plan takes them as (batch, T) and
 * multiplies each output's loss per step before its mean over the steps
 * (compile.c), or before the mask's normalisation, which gives Keras's
 * sum(w * loss * mask) / sum(mask). Keras refuses them for an output whose
 * loss is one value per sample ("Can not squeeze dim[1]") or has another
 * number of steps ("Dimensions must be equal"), and so does fit_check_weights.
 * A weighted metric counts each step w times, as Keras's update_state with
 * a (batch, T) sample_weight.
 *
 * class_weight becomes sample weights from the labels as Keras's
 * _make_class_weight_map_fn does: the class of a label of rank >= 2 whose
 * last axis is > 1 is its argmax, else the label rounded; the weight is
 * class_weight[class]. Keras asks for every class from 0 up, refuses it
 * with several outputs and together with sample_weight, and this does the
 * same with its words.
 *
 * validation_split takes the last floor(n * (1 - split)) .. n samples of
 * every array, before any shuffling (Keras's train_validation_split), and
 * the same refusals: nothing left on one side, or a dataset.
 */
#include "keras_internal.h"

#include <math.h>
#include <string.h>

/* The class of row `row` of labels y, Keras's way: argmax of a last axis
 * wider than 1, else the value rounded (half to even, as tf.round). */
static int64_t label_class(const sy_tensor *y, int64_t row) {
    sy_shape s = sy_tensor_shape(y);
    int64_t per = s.rank >= 2 ? s.dims[s.rank - 1] : 1;
    int64_t per_row = s.rank ? sy_tensor_count(y) / (s.dims[0] ? s.dims[0] : 1) : 1;
    if (s.rank >= 2 && per > 1) {
        int64_t best = 0;
        for (int64_t j = 1; j < per; j++)
            if (sy_tensor_get(y, row * per_row + j) > sy_tensor_get(y, row * per_row + best))
                best = j;
        return best;
    }
    return (int64_t)nearbyint(sy_tensor_get(y, row * per_row));
}

int64_t fit_weight_steps(sy_shape s) {
    if (s.rank == 3 && s.dims[2] == 1) s.rank = 2; /* Keras squeezes a trailing 1 */
    if (s.rank == 1) return 0;
    if (s.rank == 2) return s.dims[1] == 1 ? 0 : s.dims[1];
    return -1;
}

sy_status fit_check_weight_steps(const sy_model *m, const char *what, const sy_shape *s,
                                 int64_t steps) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    for (int32_t j = 0; j < m->n_outputs; j++) {
        sy_shape out = model_output_shape_at(m, j);
        if (out.rank == 2 && out.dims[0] == steps) continue;
        char output[LAYER_NAME_MAX + 16] = "the output";
        if (m->n_outputs > 1)
            snprintf(output, sizeof output, "output '%s'", model_output_name(m, j));
        if (out.rank != 2)
            return sy_error(SY_ERR_SHAPE,
                            "%s: sample_weight has shape %s, a weight per step, but the loss of %s "
                            "%s is one value "
                            "per sample: give one weight per sample, (samples,)",
                            what, sy_shape_format(s, a, sizeof a), output,
                            keras_shape_str(&out, b, sizeof b));
        return sy_error(SY_ERR_SHAPE,
                        "%s: sample_weight has shape %s, a weight for each of %lld steps, but the "
                        "loss of %s %s has "
                        "%lld steps: give (samples, %lld), or one weight per sample, (samples,)",
                        what, sy_shape_format(s, a, sizeof a), (long long)steps, output,
                        keras_shape_str(&out, b, sizeof b), (long long)out.dims[0],
                        (long long)out.dims[0]);
    }
    return SY_OK;
}

sy_status fit_check_weights(const sy_model *m, const char *what, const sy_tensor *sw,
                            const double *cw, int32_t n_cw, int64_t n) {
    if (cw || n_cw) {
        if (!cw || n_cw < 1)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: class_weight has %d entries; give one weight per class, from "
                            "class 0 up",
                            what, n_cw);
        if (sw)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: You cannot `class_weight` and `sample_weight` at the same time.",
                            what);
        if (m->n_outputs > 1)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: `class_weight` is only supported for Models with a single output "
                            "(model '%s' has %d)",
                            what, m->name, m->n_outputs);
        for (int32_t c = 0; c < n_cw; c++)
            if (!isfinite(cw[c]))
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: class_weight[%d] = %g is not a finite number", what, c, cw[c]);
    }
    if (sw) {
        sy_shape s = sy_tensor_shape(sw);
        char a[SY_SHAPE_STR_MAX];
        int64_t steps = fit_weight_steps(s);
        if (sy_tensor_dtype(sw) == SY_STRING || steps < 0 || (n >= 0 && s.dims[0] != n))
            return sy_error(
                SY_ERR_SHAPE,
                "%s: sample_weight has shape %s; expected one number per sample, (%lld,) or "
                "(%lld, 1), or for a sequence output one per step, (%lld, steps)",
                what, sy_shape_format(&s, a, sizeof a), (long long)n, (long long)n, (long long)n);
        sy_status st = steps ? fit_check_weight_steps(m, what, &s, steps) : SY_OK;
        if (st) return st;
        int64_t k = sy_tensor_count(sw);
        for (int64_t i = 0; i < k; i++)
            if (!isfinite(sy_tensor_get(sw, i)))
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: sample_weight[%lld] = %g is not a finite number", what,
                                (long long)i, sy_tensor_get(sw, i));
    }
    return SY_OK;
}

sy_status fit_class_weight_of(const char *what, const double *cw, int32_t n_cw, const sy_tensor *y,
                              int64_t row, float *out) {
    int64_t c = label_class(y, row);
    if (c < 0 || c >= n_cw)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: y[%lld] is of class %lld, but class_weight gives weights for "
                        "classes 0 to %d only",
                        what, (long long)row, (long long)c, n_cw - 1);
    *out = (float)cw[c];
    return SY_OK;
}

sy_status fit_sample_weights(const char *what, const sy_tensor *sw, const double *cw, int32_t n_cw,
                             const sy_tensor *y, int64_t n, float **out) {
    *out = NULL;
    if (!sw && !cw) return SY_OK;
    int64_t per =
        sw && fit_weight_steps(sy_tensor_shape(sw)) > 0 ? fit_weight_steps(sy_tensor_shape(sw)) : 1;
    float *w = sy_malloc((size_t)(n ? n * per : 1) * sizeof *w);
    if (!w)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld sample weights", what,
                        (long long)(n * per));
    for (int64_t i = 0; i < n * per; i++) {
        if (sw) {
            w[i] = (float)sy_tensor_get(sw, i); /* Keras casts the weights to float32 */
            continue;
        }
        sy_status st = fit_class_weight_of(what, cw, n_cw, y, i, &w[i]);
        if (st) {
            sy_free(w);
            return st;
        }
    }
    *out = w;
    return SY_OK;
}

/* Rows [r0, r1) of t as a new tensor. */
static sy_status rows_copy(const sy_tensor *t, int64_t r0, int64_t r1, sy_tensor **out) {
    sy_shape s = sy_tensor_shape(t);
    size_t row = sy_tensor_bytes(t) / (size_t)(s.dims[0] ? s.dims[0] : 1);
    s.dims[0] = r1 - r0;
    sy_status st = sy_tensor_new(sy_tensor_dtype(t), s, out);
    if (!st)
        memcpy(sy_tensor_data(*out), (const char *)sy_tensor_data(t) + (size_t)r0 * row,
               (size_t)(r1 - r0) * row);
    return st;
}

sy_status fit_validation_split(double split, const sy_tensor *const *arrays, int32_t n_arrays,
                               sy_tensor **train, sy_tensor **val) {
    for (int32_t i = 0; i < n_arrays; i++) train[i] = val[i] = NULL;
    if (!(split > 0 && split < 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: validation_split must be a number in (0, 1), got %g", split);
    sy_shape s = sy_tensor_shape(arrays[0]);
    int64_t n = s.rank ? s.dims[0] : 0, at = (int64_t)floor((double)n * (1.0 - split));
    if (at == 0 || at == n)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: Training data contains %lld samples, which is not sufficient to "
                        "split it into a validation "
                        "and training set as specified by `validation_split=%g`. Either provide "
                        "more data, or a "
                        "different value for the `validation_split` argument.",
                        (long long)n, split);
    sy_status st = SY_OK;
    for (int32_t i = 0; i < n_arrays && !st; i++) {
        if (!arrays[i]) continue;
        st = rows_copy(arrays[i], 0, at, &train[i]);
        if (!st) st = rows_copy(arrays[i], at, n, &val[i]);
    }
    if (st)
        for (int32_t i = 0; i < n_arrays; i++) {
            sy_tensor_free(train[i]);
            sy_tensor_free(val[i]);
            train[i] = val[i] = NULL;
        }
    return st;
}

/* A weighted metric: each sample's own update, in a scratch state, added in times its weight --
 * Keras's update_state(y, pred, sample_weight) for the means (sum(w v) / sum(w)) and the confusion
 * counts alike. With per_step weights, each of a sample's pred_rows rows (a sequence output's
 * steps) is one update with its own weight, w[r * pred_rows + t]. */
void metric_update_weighted(const metric_spec *ms, const float *pred, const void *labels,
                            const float *w, int64_t rows, int64_t pred_rows, int64_t per_row,
                            bool per_step, double *state) {
    static _Thread_local double one[METRIC_STATE_MAX];
    int32_t n = ms->n_state - 1;
    bool sparse = ms->kind == KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY ||
                  ms->kind == KERAS_METRIC_SPARSE_TOP_K;
    int64_t label_row =
        sparse ? 1 : per_row; /* int32 class indices, or float targets, per pred row */
    int64_t unit = per_step ? 1 : pred_rows; /* pred rows per update */
    for (int64_t u = 0; u < rows * pred_rows / (unit ? unit : 1); u++) {
        double wr = w ? w[u] : 1.0;
        memset(one, 0, (size_t)n * sizeof *one);
        const void *lab = sparse ? (const void *)((const int32_t *)labels + u * unit * label_row)
                                 : (const void *)((const float *)labels + u * unit * label_row);
        metric_update(ms, pred + u * unit * per_row, lab, unit, per_row, one);
        for (int32_t k = 0; k < n; k++) state[k] += wr * one[k];
        state[n] += wr * (double)unit;
    }
}
