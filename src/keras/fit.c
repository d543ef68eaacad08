/*
 * fit.c - fit(), evaluate() and predict(): the host loops around the
 * compiled plans.
 *
 * fit() treats the samples as an endless stream of passes over x, each pass
 * in a new order when shuffle is set (a Philox stream of the model's seed
 * and the fit seed), and takes every step's batch from it, so every step
 * runs the plan's static shape and no sample is dropped: a pass that does
 * not divide by the batch size runs on into the next. After each step the
 * host reads the loss of every sample and the predictions, and keeps the
 * epoch's sums; the logs it reports are running means over the epoch's
 * samples, as Keras's metrics are. A loss that stops being a finite number
 * is warned of once (sy_log); training goes on, as Keras's does, unless a
 * callback stops it (TerminateOnNaN): a stop asked for in
 * on_train_batch_end takes effect after that batch, and the epoch ends as
 * usual except for its checkpoint, which would claim a whole epoch.
 *
 * evaluate() and predict() walk the samples in order; the last batch is
 * padded with zero rows whose results are left out, so every sample counts
 * exactly once whatever the batch size.
 *
 * Data checks come first and name the argument, the shapes and, for a bad
 * label, its index and value: x must be (samples, input_shape...), labels
 * must be what the loss takes (class indices for sparse losses).
 *
 * A model with several inputs and outputs takes one array per input and
 * one label array per output (sy_model_fit_multi, ...; a dataset's
 * elements are (x1 .. xn, y1 .. ym)); the one-array entry points are the
 * case n = 1. Every array is fed through the same sample indices, so
 * shuffling, padding and the replicas' shards cut them all alike. The logs
 * are Keras's: loss, <output>_loss per output, <output>_<metric>.
 *
 * With a model_dir, fit() holds the directory's lock throughout, checkpoints
 * at each epoch's end and every save_checkpoints_steps steps
 * (model_checkpoint.c), and with resume starts where the newest valid
 * checkpoint left off: the feed is put back (the sample stream's pass and
 * place, or the dataset's random state and the batches taken, replayed)
 * and the epoch's running sums with it. A BackupAndRestore callback makes
 * its directory the model_dir; then the callback writes the checkpoints,
 * from its hooks (fit_live, backup_save).
 */
#include "keras_internal.h"

#include <math.h>
#include <string.h>

sy_fit_options sy_fit_options_default(void) {
    sy_fit_options o;
    memset(&o, 0, sizeof o);
    o.batch_size = 32;
    o.epochs = 1;
    o.validation_freq = 1;
    o.shuffle = true;
    o.verbose = 1;
    o.keep_checkpoint_max = 5;
    return o;
}

sy_evaluate_options sy_evaluate_options_default(void) {
    sy_evaluate_options o;
    memset(&o, 0, sizeof o);
    o.batch_size = 32;
    o.verbose = 1;
    return o;
}

/* ---- copying data ------------------------------------------------------------------- */

void keras_copy_row(void *dst, sy_dtype dst_type, const sy_tensor *t, int64_t row, int64_t count) {
    const char *src = (const char *)sy_tensor_data(t) + (size_t)(row * count) * sy_dtype_size(sy_tensor_dtype(t));
    sy_dtype st = sy_tensor_dtype(t);
    if (st == dst_type) {
        memcpy(dst, src, (size_t)count * sy_dtype_size(st));
        return;
    }
    /* each value converted to dst_type through type V, a loop per source type so that the conversions
     * run by vectors (a switch per value had cost 5% of the tutorial's training: 60,000 images of 784
     * bytes an epoch). V is double for float64, int32 and int64, as it always was (an int64 is rounded to a
     * double first); uint8 and float32 go through float, where a double changed nothing. */
#define COPY_AS(T, V)                                                                                       \
    do {                                                                                                   \
        const T *s_ = (const T *)(const void *)src;                                                        \
        if (dst_type == SY_I32)                                                                            \
            for (int64_t i = 0; i < count; i++) ((int32_t *)dst)[i] = (int32_t)(V)s_[i];                   \
        else                                                                                               \
            for (int64_t i = 0; i < count; i++) ((float *)dst)[i] = (float)(V)s_[i];                       \
    } while (0)
    switch (st) {
    case SY_F32: COPY_AS(float, float); break;
    case SY_F64: COPY_AS(double, double); break;
    case SY_I32: COPY_AS(int32_t, double); break;
    case SY_I64: COPY_AS(int64_t, double); break;
    default: COPY_AS(uint8_t, float); break;
    }
#undef COPY_AS
}

/* Running sums of an epoch or an evaluation (or of one replica's shard of
 * one step). */
typedef fit_sums sums;

/* One host round trip: the sample indices of each (step, replica) shard
 * and, per shard, the sums its replica read. idx holds `steps` global
 * batches; -1 marks a padding row. */
typedef struct trip {
    const sy_model *m;
    model_plan *p;
    const sy_tensor *const *x; /* arrays: one per model input */
    const sy_tensor *const *y; /* one per output; NULL: none (predict) */
    int64_t *idx;     /* (steps, replicas * per-replica batch) */
    sums *parts;      /* (steps, replicas) */
    float *pred_out[MODEL_MAX_IO]; /* predict: per output, rows land at their sample's index */
    int32_t replicas;
    /* From a dataset: step i's rows are those of batches[i] (the inputs,
     * then the labels), idx indexes them, and its predictions go to rows
     * base[i] + idx. */
    sy_element *batches;
    int64_t *base;
    /* issue 17, fit arguments: each sample's weight (arrays: indexed by sample; NULL: 1 each), or for a
     * dataset the class weights turning its labels into weights (NULL: its elements' weights, or 1) */
    const float *sw;
    const double *cw;
    int32_t n_cw;
} trip;

static const int64_t *shard(const trip *t, int64_t step, int32_t replica) {
    return t->idx + (step * t->replicas + replica) * t->p->batch;
}

/* The tensors a step's rows come from: input i's, output j's labels. */
static const sy_tensor *step_x(const trip *t, int64_t step, int32_t i) {
    return t->batches ? t->batches[step].c[i] : t->x[i];
}
static const sy_tensor *step_y(const trip *t, int64_t step, int32_t j) {
    int32_t k = t->m->n_inputs + j;
    if (t->batches) return t->batches[step].n > k ? t->batches[step].c[k] : NULL;
    return t->y ? t->y[j] : NULL;
}

/* issue 17, fit arguments: the weight of row i (-1: padding, 0) of step's data, of its step s with
 * temporal weights (per of them; 1 otherwise): a dataset element's sample_weight component or its
 * labels' class weight, an array's sample weight, else 1. */
static float row_weight(const trip *t, int64_t step, int64_t i, int64_t s, int64_t per) {
    if (i < 0) return 0;
    if (!t->batches) return t->sw ? t->sw[i * per + s] : 1.0f;
    const sy_element *e = &t->batches[step];
    int32_t k = t->m->n_inputs + t->m->n_outputs;
    float w = 1.0f;
    /* the element's weights: their steps were checked against the plan's */
    if (e->n > k)
        w = (float)sy_tensor_get(e->c[k], i * per + s);
    else if (t->cw) fit_class_weight_of("fit", t->cw, t->n_cw, e->c[t->m->n_inputs], i, &w); /* checked when taken */
    return w;
}

/* Rows idx[0 .. batch) of t, each `count` values, into dst as dtype dt;
 * padding rows (-1) zeros (class 0). */
static void copy_rows(char *dst, sy_dtype dt, const sy_tensor *t, const int64_t *idx, int64_t batch, int64_t count) {
    for (int64_t k = 0; k < batch; k++) { /* float32 or int32: 4 bytes either way */
        if (idx[k] >= 0) keras_copy_row(dst + (size_t)(k * count) * 4, dt, t, idx[k], count);
        else memset(dst + (size_t)(k * count) * 4, 0, (size_t)count * 4);
    }
}

/* Fill a replica's inputs with its shard: every model input, and every
 * output's labels when the plan takes them. */
static void feed_shard(void *ctx, int64_t step, int32_t replica, sy_plan *plan) {
    const trip *t = ctx;
    const model_plan *p = t->p;
    const sy_model *m = t->m;
    const int64_t *idx = shard(t, step, replica);
    for (int32_t i = 0; i < m->n_inputs; i++) {
        sy_shape in = model_input_shape_at(m, i);
        copy_rows(sy_plan_input(plan, p->x[i]), model_input_dtype(m, i), step_x(t, step, i), idx, p->batch,
                  sy_shape_count(&in));
    }
    for (int32_t j = 0; j < m->n_outputs && p->y[j] != SY_NONE; j++) {
        const sy_tensor *y = step_y(t, step, j);
        sy_shape ls = model_label_shape(m, j);
        if (y) copy_rows(sy_plan_input(plan, p->y[j]), model_label_dtype(m, j), y, idx, p->batch, sy_shape_count(&ls));
        /* issue 17: ignore_class's labels, class 0 for the loss (read_sums puts them back) */
        if (p->valid[j] != SY_NONE) {
            int32_t *lab = sy_plan_input(plan, p->y[j]), ignore = m->heads[j].args.ignore_class;
            float *valid = sy_plan_input(plan, p->valid[j]);
            for (int64_t k = 0; k < p->batch * sy_shape_count(&ls); k++) {
                valid[k] = lab[k] != ignore;
                if (!valid[k]) lab[k] = 0;
            }
        }
    }
    if (p->real != SY_NONE) { /* issue 17, masking: padding rows count in no loss's mask */
        float *real = sy_plan_input(plan, p->real);
        for (int64_t k = 0; k < p->batch; k++) real[k] = idx[k] >= 0;
    }
    if (p->sw != SY_NONE) { /* issue 17, fit arguments: (batch,) or per step (batch, T) */
        float *w = sy_plan_input(plan, p->sw);
        int64_t per = p->sw_steps ? p->sw_steps : 1;
        for (int64_t k = 0; k < p->batch; k++)
            for (int64_t s = 0; s < per; s++) w[k * per + s] = row_weight(t, step, idx[k], s, per);
    }
}

/* Output j's rows of predictions and the values per row its metrics see. */
static void output_rows(const sy_model *m, int32_t j, int64_t rows, int64_t *per_row, int64_t *rows_of_pred) {
    sy_shape out = model_output_shape_at(m, j);
    *per_row = out.dims[out.rank - 1];
    *rows_of_pred = rows * (sy_shape_count(&out) / *per_row);
}

/* A replica's loss and metric sums over the real rows of its shard (real
 * rows come first: padding only ever ends the last batch). */
static void read_sums(void *ctx, int64_t step, int32_t replica, sy_plan *plan) {
    const trip *t = ctx;
    const model_plan *p = t->p;
    const sy_model *m = t->m;
    const int64_t *idx = shard(t, step, replica);
    sums *s = &t->parts[step * t->replicas + replica];
    memset(s, 0, sizeof *s);
    int64_t rows = 0;
    while (rows < p->batch && idx[rows] >= 0) rows++;
    const float *l = sy_plan_output(plan, p->per_example); /* weighted in the plan when it takes weights */
    const float *w = p->sw != SY_NONE ? sy_plan_input(plan, p->sw) : NULL; /* issue 17, fit arguments */
    for (int64_t k = 0; k < rows; k++) s->loss += l[k];
    for (int32_t j = 0; j < m->n_outputs; j++) {
        if (m->n_outputs > 1) {
            const float *lj = sy_plan_output(plan, p->out_loss[j]);
            bool weigh = w && !p->sw_steps; /* temporal weights weighed it in the plan */
            for (int64_t k = 0; k < rows; k++)
                s->out_loss[j] += weigh ? (double)(w[k] * lj[k]) : lj[k];
        }
        const float *pred = sy_plan_output(plan, p->pred[j]);
        void *labels = sy_plan_input(plan, p->y[j]);
        if (p->valid[j] !=
            SY_NONE) { /* issue 17: the metrics see the labels given, ignore_class too (Keras's) */
            const float *valid = sy_plan_input(plan, p->valid[j]);
            sy_shape ls = model_label_shape(m, j);
            for (int64_t k = 0; k < rows * sy_shape_count(&ls); k++)
                if (!valid[k]) ((int32_t *)labels)[k] = m->heads[j].args.ignore_class;
        }
        int64_t per_row, rows_of_pred;
        output_rows(m, j, rows, &per_row, &rows_of_pred);
        /* issue 17, masking: a masked output's mask weights its metrics' rows (times the sample
         * weights for weighted_metrics), as Keras's MetricsContainer passes it as their
         * sample_weight */
        const float *mask = p->mask[j] != SY_NONE ? sy_plan_output(plan, p->mask[j]) : NULL;
        for (int32_t i = 0; i < m->heads[j].n_metrics; i++) { /* issue 17: each metric's own state */
            const metric_spec *ms = &m->heads[j].metrics[i];
            if (ms->masked)
                metric_update_masked(ms, pred, labels, ms->weighted ? w : NULL, mask, rows,
                                     rows ? rows_of_pred / rows : 0, per_row, p->sw_steps != 0,
                                     &s->metric[ms->state]);
            else if (ms->weighted) /* issue 17, fit arguments: weighted_metrics */
                metric_update_weighted(ms, pred, labels, w, rows, rows ? rows_of_pred / rows : 0,
                                       per_row, p->sw_steps != 0, &s->metric[ms->state]);
            else
                metric_update(ms, pred, labels, rows_of_pred, per_row, &s->metric[ms->state]);
        }
    }
    s->seen = rows;
}

/* predict: copy a replica's predictions to their samples' rows. */
static void read_predictions(void *ctx, int64_t step, int32_t replica, sy_plan *plan) {
    const trip *t = ctx;
    const int64_t *idx = shard(t, step, replica);
    int64_t base = t->base ? t->base[step] : 0;
    for (int32_t j = 0; j < t->m->n_outputs; j++) {
        sy_shape out_shape = model_output_shape_at(t->m, j);
        size_t row = (size_t)sy_shape_count(&out_shape) * sizeof(float);
        const char *pred = sy_plan_output(plan, t->p->pred[j]);
        for (int64_t k = 0; k < t->p->batch && idx[k] >= 0; k++)
            memcpy((char *)t->pred_out[j] + (size_t)(base + idx[k]) * row, pred + (size_t)k * row, row);
    }
}

/* Add shard sums in (step, replica) order: the same order whatever the
 * steps per execution, so the logs do not depend on it. */
static void fold(const trip *t, int64_t steps, sums *into) {
    int32_t n_metrics = model_metric_state_count(t->m); /* issue 17: confusion counts add up too */
    for (int64_t i = 0; i < steps * t->replicas; i++) {
        into->loss += t->parts[i].loss;
        for (int32_t j = 0; j < t->m->n_outputs; j++) into->out_loss[j] += t->parts[i].out_loss[j];
        for (int32_t k = 0; k < n_metrics; k++) into->metric[k] += t->parts[i].metric[k];
        into->seen += t->parts[i].seen;
    }
}

/* Keras's logs: loss; with several outputs <output>_loss each; then each
 * output's metrics, "<output>_<metric>" with several outputs. */
static void sums_to_logs(const sy_model *m, const sums *s, const char *prefix, sy_logs *logs) {
    char name[sizeof logs->names[0]];
    double n = s->seen ? (double)s->seen : 1.0;
    bool several = m->n_outputs > 1;
    snprintf(name, sizeof name, "%sloss", prefix);
    logs_set(logs, name, s->loss / n);
    for (int32_t j = 0; several && j < m->n_outputs; j++) {
        snprintf(name, sizeof name, "%s%s_loss", prefix, model_output_name(m, j));
        logs_set(logs, name, s->out_loss[j] / n);
    }
    for (int32_t pass = 0; pass < 2; pass++) /* issue 17, fit arguments: every output's metrics, then weighted ones */
    for (int32_t j = 0; j < m->n_outputs; j++) {
        int64_t per_row, rows_of_pred;
        output_rows(m, j, 1, &per_row, &rows_of_pred);
        for (int32_t i = 0; i < m->heads[j].n_metrics; i++) {
            if (m->heads[j].metrics[i].weighted != (pass == 1)) continue;
            if (several) snprintf(name, sizeof name, "%s%s_%s", prefix, model_output_name(m, j), m->heads[j].metrics[i].name);
            else snprintf(name, sizeof name, "%s%s", prefix, m->heads[j].metrics[i].name);
            const metric_spec *ms = &m->heads[j].metrics[i]; /* issue 17: from the epoch's state, as Keras's result() */
            bool counted =
                ms->weighted || ms->masked; /* issue 17: their weights' sum is their count */
            double count =
                counted ? s->metric[ms->state + ms->n_state - 1] : n * (double)rows_of_pred;
            logs_set(logs, name,
                     counted && count == 0 ? 0.0 : metric_value(ms, &s->metric[ms->state], count));
        }
    }
}

static FILE *progress_file(FILE *f) { return f ? f : stderr; }

static sy_status trip_alloc(trip *t, int64_t steps, int64_t global) {
    t->idx = sy_malloc((size_t)(steps * global) * sizeof *t->idx);
    t->parts = sy_calloc((size_t)(steps * t->replicas), sizeof *t->parts);
    if (!t->idx || !t->parts) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory for %lld steps of %lld samples",
                                              (long long)steps, (long long)global);
    return SY_OK;
}

static void trip_free(trip *t) {
    sy_free(t->idx);
    sy_free(t->parts);
}

/* ---- evaluate and predict ------------------------------------------------------------- */

/* Samples in order, batch_size at a time (rounded up to a multiple of the
 * replicas), max_steps batches at most (0: all); the last batch padded;
 * steps_per_execution batches a trip. */
static sy_status run_over(sy_model *m, plan_mode mode, const sy_tensor *const *x,
                          const sy_tensor *const *y, const float *sw, int64_t sw_steps,
                          int64_t batch_size, int64_t max_steps, int verbose, FILE *progress,
                          const char *prefix, sy_logs *logs, sy_tensor *const *pred_out) {
    int64_t n = fit_samples(x[0]), r = model_replicas(m);
    int64_t global = batch_size < n ? batch_size : n;
    if (!model_chief(m)) verbose = 0; /* issue 20: the chief alone prints */
    int64_t per = (global + r - 1) / r;
    global = per * r;
    model_plan *p;
    /* issue 17, fit arguments: sw has sw_steps per sample (0: one) */
    bool was_weighted = m->sample_weighted;
    int64_t was_steps = m->sample_weight_steps;
    if (sw) m->sample_weighted = true, m->sample_weight_steps = sw_steps;
    sy_status st = model_plan_get(m, mode, per, &p);
    m->sample_weighted = was_weighted;
    m->sample_weight_steps = was_steps;
    if (st) return st;
    int64_t steps = (n + global - 1) / global, spe = m->steps_per_execution;
    if (max_steps && max_steps < steps) steps = max_steps;
    trip t = {.m = m, .p = p, .x = x, .y = y, .replicas = (int32_t)r, .sw = sw};
    for (int32_t j = 0; pred_out && j < m->n_outputs; j++) t.pred_out[j] = sy_tensor_data(pred_out[j]);
    if ((st = trip_alloc(&t, spe < steps ? spe : steps, global))) {
        trip_free(&t);
        return st;
    }
    sums total;
    memset(&total, 0, sizeof total);
    progbar bar;
    if (verbose) progbar_init(&bar, progress_file(progress), verbose, steps);
    for (int64_t step = 0; step < steps; step += spe) {
        int64_t k = steps - step < spe ? steps - step : spe;
        for (int64_t i = 0; i < k * global; i++) {
            int64_t sample = (step * global) + i;
            t.idx[i] = sample < n ? sample : -1;
        }
        if (mode == MODE_EVAL) st = replicas_infer(p->rs, k, feed_shard, read_sums, &t);
        else st = replicas_infer(p->rs, k, feed_shard, read_predictions, &t);
        if (!st && mode == MODE_EVAL) st = replicas_share(p->rs, t.parts, sizeof(sums), k); /* issue 20 */
        if (st) {
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", sy_last_error());
            st = sy_error(st, "%s: batch %lld (samples from %lld): %s", mode == MODE_EVAL ? "evaluate" : "predict",
                          (long long)step, (long long)(step * global), msg);
            break;
        }
        sy_logs l = {0};
        if (mode == MODE_EVAL) {
            fold(&t, k, &total);
            sums_to_logs(m, &total, prefix, &l);
        }
        if (verbose) progbar_update(&bar, step + k, mode == MODE_EVAL ? &l : NULL, step + k == steps);
    }
    trip_free(&t);
    for (int32_t j = 0; !st && mode == MODE_PREDICT && j < m->n_outputs; j++) { /* issue 20: every host's rows */
        sy_shape out_shape = model_output_shape_at(m, j);
        st = replicas_share_rows(p->rs, t.pred_out[j], (size_t)sy_shape_count(&out_shape) * sizeof(float), n, per);
    }
    if (st == SY_OK && logs && mode == MODE_EVAL) sums_to_logs(m, &total, prefix, logs);
    return st;
}

static sy_status check_batch(const char *what, int64_t batch) {
    if (batch <= 0) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: batch_size must be positive, got %lld", what, (long long)batch);
    return SY_OK;
}

sy_status sy_model_evaluate_multi(sy_model *m, const sy_tensor *const *x, int32_t n_x, const sy_tensor *const *y,
                                  int32_t n_y, const sy_evaluate_options *o, sy_logs *results) {
    sy_evaluate_options d = sy_evaluate_options_default();
    if (!o) o = &d;
    if (results) memset(results, 0, sizeof *results);
    if (!m->compiled) return sy_error(SY_ERR_STATE, "evaluate: model '%s' must be compiled first", m->name);
    sy_status st = check_batch("evaluate", o->batch_size);
    if (!st && o->steps < 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "evaluate: steps must be >= 0 (0: all batches), got %lld",
                      (long long)o->steps);
    if (!st && !y) st = sy_error(SY_ERR_INVALID_ARGUMENT, "evaluate: no labels (y) given");
    if (!st) st = fit_check_data(m, "evaluate", "x", x, n_x, "y", y, n_y);
    if (!st) st = fit_check_weights(m, "evaluate", o->sample_weight, NULL, 0, fit_samples(x[0])); /* issue 17 */
    float *sw = NULL;
    if (!st) st = fit_sample_weights("evaluate", o->sample_weight, NULL, 0, NULL, fit_samples(x[0]), &sw);
    if (!st) st = fit_check_hosts(m, "evaluate", o->batch_size, fit_samples(x[0]), x, n_x, y, n_y, NULL); /* issue 20 */
    if (st) {
        sy_free(sw);
        return st;
    }
    sy_logs l = {0};
    st = run_over(m, MODE_EVAL, x, y, sw,
                  o->sample_weight ? fit_weight_steps(sy_tensor_shape(o->sample_weight)) : 0,
                  o->batch_size, o->steps, o->verbose, o->progress, "", &l, NULL);
    sy_free(sw);
    if (st == SY_OK && results) *results = l;
    return st;
}

sy_status sy_model_evaluate(sy_model *m, const sy_tensor *x, const sy_tensor *y, const sy_evaluate_options *o,
                            sy_logs *results) {
    return sy_model_evaluate_multi(m, &x, 1, &y, 1, o, results);
}

/* predict's n_out tensors, checked against the model's outputs. */
static sy_status check_predict_outputs(const sy_model *m, sy_tensor **out, int32_t n_out, const char *multi) {
    for (int32_t j = 0; out && j < n_out; j++) out[j] = NULL;
    if (!out || n_out != m->n_outputs) {
        char names[1024];
        fit_io_names(m, true, names, sizeof names);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "predict: model '%s' has %d output%s (%s) but room for %d was given%s",
                        m->name, m->n_outputs, m->n_outputs == 1 ? "" : "s", names, out ? n_out : 0,
                        n_out == 1 ? multi : "");
    }
    if (!m->built || m->n_layers == 0) return sy_error(SY_ERR_STATE, "predict: model '%s' has no input shape yet", m->name);
    return SY_OK;
}

sy_status sy_model_predict_multi(sy_model *m, const sy_tensor *const *x, int32_t n_x, const sy_evaluate_options *o,
                                 sy_tensor **out, int32_t n_out) {
    sy_evaluate_options d = sy_evaluate_options_default();
    if (!o) o = &d;
    sy_status st = check_predict_outputs(m, out, n_out, "; use sy_model_predict_multi for one tensor per output");
    if (!st) st = check_batch("predict", o->batch_size);
    if (!st) st = fit_check_data(m, "predict", "x", x, n_x, NULL, NULL, 0);
    if (!st) st = fit_check_hosts(m, "predict", o->batch_size, fit_samples(x[0]), x, n_x, NULL, 0, NULL); /* issue 20 */
    if (st) return st;
    sy_tensor *t[MODEL_MAX_IO] = {0};
    for (int32_t j = 0; !st && j < n_out; j++) {
        sy_shape out_shape = model_output_shape_at(m, j);
        st = sy_tensor_new(SY_F32, keras_batch_shape(fit_samples(x[0]), &out_shape), &t[j]);
    }
    if (!st)
        st = run_over(m, MODE_PREDICT, x, NULL, NULL, 0, o->batch_size, 0, o->verbose, o->progress,
                      "", NULL, t);
    for (int32_t j = 0; j < n_out; j++) {
        if (st) sy_tensor_free(t[j]);
        else out[j] = t[j];
    }
    return st;
}

sy_status sy_model_predict(sy_model *m, const sy_tensor *x, const sy_evaluate_options *o, sy_tensor **out) {
    return sy_model_predict_multi(m, &x, 1, o, out, 1);
}

/* ---- fit ------------------------------------------------------------------------------- */

typedef struct stream {
    int64_t *perm, n, pos, pass;
    bool shuffle;
    uint64_t seed;
} stream;

static void next_pass(stream *s) {
    for (int64_t i = 0; i < s->n; i++) s->perm[i] = i;
    if (s->shuffle) {
        sy_rng r = sy_rng_new(s->seed, (uint64_t)s->pass);
        for (int64_t i = s->n - 1; i > 0; i--) { /* Fisher-Yates */
            uint64_t wide = ((uint64_t)sy_rng_u32(&r) << 32) | sy_rng_u32(&r);
            int64_t j = (int64_t)(wide % (uint64_t)(i + 1));
            int64_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    s->pass++;
    s->pos = 0;
}

static void take(stream *s, int64_t *idx, int64_t count) {
    for (int64_t k = 0; k < count; k++) {
        if (s->pos == s->n) next_pass(s);
        idx[k] = s->perm[s->pos++];
    }
}

#define CALLBACKS(o, hook, ...)                                                                    \
    for (int32_t c_ = 0; st == SY_OK && c_ < (o)->n_callbacks; c_++)                               \
        if ((o)->callbacks[c_].hook) st = (o)->callbacks[c_].hook((o)->callbacks[c_].ctx, m, ##__VA_ARGS__)

static sy_status check_fit_options(const sy_fit_options *o) {
    sy_status st = check_batch("fit", o->batch_size);
    if (st) return st;
    if (o->epochs < 0 || o->initial_epoch < 0 || o->steps_per_epoch < 0 || o->validation_freq < 1 ||
        o->validation_batch_size < 0 || o->validation_steps < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: epochs (%d), initial_epoch (%d), steps_per_epoch (%lld), validation_batch_size (%lld) "
                        "and validation_steps (%lld) must be >= 0 and validation_freq (%d) >= 1",
                        o->epochs, o->initial_epoch, (long long)o->steps_per_epoch,
                        (long long)o->validation_batch_size, (long long)o->validation_steps, o->validation_freq);
    if (o->verbose < 0 || o->verbose > 2)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: verbose must be 0, 1 or 2, got %d", o->verbose);
    if (o->n_callbacks < 0 || (o->n_callbacks > 0 && !o->callbacks))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: %d callbacks but no array", o->n_callbacks);
    if ((o->x_val == NULL) != (o->y_val == NULL))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: validation data needs both x_val and y_val");
    if ((o->x_val_list == NULL) != (o->y_val_list == NULL))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: validation data needs both x_val_list and y_val_list");
    if (o->x_val && o->x_val_list)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: validation data is given twice (x_val and x_val_list)");
    /* issue 17, fit arguments */
    if (!(o->validation_split >= 0 && o->validation_split < 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: validation_split must be a fraction in [0, 1), got %g",
                        o->validation_split);
    if (o->val_sample_weight && !o->x_val && !o->x_val_list)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: val_sample_weight given without validation data (x_val, y_val)");
    return SY_OK;
}

/* fit's validation arrays (x_val_list, or x_val as a list of one): NULL
 * when there are none. */
static const sy_tensor *const *val_x(const sy_fit_options *o, int32_t *n) {
    *n = o->x_val_list ? o->n_x_val : 1;
    return o->x_val_list ? o->x_val_list : o->x_val ? &o->x_val : NULL;
}
static const sy_tensor *const *val_y(const sy_fit_options *o, int32_t *n) {
    *n = o->y_val_list ? o->n_y_val : 1;
    return o->y_val_list ? o->y_val_list : o->y_val ? &o->y_val : NULL;
}

/* ---- datasets ---------------------------------------------------------------------------- *
 * The same loops fed by an iterator: each element is a batch, (x, y) or x.
 * Training takes whole batches of the static size (the plan's shape);
 * evaluate and predict cut an element larger than the compiled batch into
 * pieces and pad a smaller one, so any batching covers every sample once. */

static int64_t rows_of(const sy_element *e) { return fit_samples(e->c[0]); }

/* The dataset gives what `what` needs: elements (x1 .. xn) -- the model's
 * inputs -- then, with labels, (y1 .. ym) for its outputs; no sample
 * weights; each x's per-sample shape the model's where known. */
static sy_status check_dataset(const sy_model *m, const char *what, const sy_dataset *d, bool labels) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    int32_t n = sy_dataset_component_count(d), need = m->n_inputs + (labels ? m->n_outputs : 0);
    bool single = m->n_inputs == 1 && m->n_outputs == 1;
    if (n < need) {
        if (single)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the dataset's elements have %d component%s; expected (x, y) batches",
                            what, n, n == 1 ? "" : "s");
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: the dataset's elements have %d component%s; model '%s' takes (x1, ..., x%d%s): its %d "
                        "input%s%s",
                        what, n, n == 1 ? "" : "s", m->name, m->n_inputs, labels ? ", y1, ..., ym" : "", m->n_inputs,
                        m->n_inputs == 1 ? "" : "s", labels ? ", then a label for each output" : "");
    }
    if (labels && n == need + 1) { /* issue 17, fit arguments: (x, y, sample_weight) */
        sy_component_spec w = sy_dataset_component_spec(d, need);
        if (w.dtype == SY_STRING || fit_weight_steps(w.shape) < 0)
            return sy_error(
                SY_ERR_SHAPE,
                "%s: the dataset's component %d (sample_weight, after the labels) is %s; "
                "expected one number per sample, (batch,) or (batch, 1), or for a sequence output "
                "one per step, (batch, steps) with the steps known",
                what, need, sy_shape_format(&w.shape, a, sizeof a));
        if (fit_weight_steps(w.shape) > 0) {
            sy_status st = fit_check_weight_steps(m, what, &w.shape, fit_weight_steps(w.shape));
            if (st) return st;
        }
    } else if (labels && n > need) {
        if (single)
            return sy_error(SY_ERR_UNSUPPORTED,
                            "%s: the dataset's elements have %d components; give (x, y) or (x, y, sample_weight)",
                            what, n);
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: the dataset's elements have %d components, but model '%s' takes %d inputs and %d labels "
                        "(then, optionally, sample weights)",
                        what, n, m->name, m->n_inputs, m->n_outputs);
    }
    for (int32_t i = 0; i < m->n_inputs; i++) {
        sy_component_spec x = sy_dataset_component_spec(d, i);
        sy_shape in = model_input_shape_at(m, i);
        bool ok = x.shape.rank == in.rank + 1;
        for (int k = 0; ok && k < in.rank; k++) ok = x.shape.dims[k + 1] == -1 || x.shape.dims[k + 1] == in.dims[k];
        char input[LAYER_NAME_MAX + 32] = "";
        if (!single) snprintf(input, sizeof input, " (component %d, input '%s')", i, m->inputs[i].name);
        if (!ok)
            return sy_error(SY_ERR_SHAPE, "%s: the dataset's x%s is %s but model '%s' takes batches of %s", what, input,
                            sy_shape_format(&x.shape, a, sizeof a), m->name, keras_shape_str(&in, b, sizeof b));
        if (x.dtype == SY_STRING)
            return sy_error(SY_ERR_DTYPE, "%s: the dataset's x%s holds strings; a model takes numbers (parse them first)",
                            what, input);
    }
    return SY_OK;
}

/* issue 17, temporal sample weights: the steps of a dataset's sample weights (its component after
 * the labels, checked by check_dataset): 0 for one per sample or none, T for one per step. */
static int64_t dataset_weight_steps(const sy_model *m, const sy_dataset *d) {
    int32_t k = m->n_inputs + m->n_outputs;
    if (sy_dataset_component_count(d) <= k) return 0;
    int64_t steps = fit_weight_steps(sy_dataset_component_spec(d, k).shape);
    return steps > 0 ? steps : 0;
}

/* Rows [r0, r0 + n) of every component of e, as new tensors. */
static sy_status slice_rows(const sy_element *e, int64_t r0, int64_t n, sy_element *out) {
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < e->n; i++) {
        sy_shape s = sy_tensor_shape(e->c[i]);
        size_t row = sy_tensor_bytes(e->c[i]) / (size_t)(s.dims[0] ? s.dims[0] : 1);
        s.dims[0] = n;
        sy_status st = sy_tensor_new(sy_tensor_dtype(e->c[i]), s, &out->c[i]);
        if (st) {
            sy_element_clear(out);
            return st;
        }
        out->n = i + 1;
        memcpy(sy_tensor_data(out->c[i]), (const char *)sy_tensor_data(e->c[i]) + (size_t)r0 * row, (size_t)n * row);
    }
    return SY_OK;
}

/* Pieces of at most `global` rows from an iterator. */
typedef struct batch_feed {
    sy_iterator *it;
    sy_element cur; /* the element being cut (n 0: none) */
    int64_t row;    /* its next row */
} batch_feed;

static sy_status feed_next(batch_feed *f, int64_t global, sy_element *out, bool *end) {
    *end = false;
    memset(out, 0, sizeof *out);
    if (f->cur.n == 0) {
        sy_status st = sy_iterator_next(f->it, &f->cur, end);
        if (st || *end) return st;
        f->row = 0;
    }
    int64_t left = rows_of(&f->cur) - f->row;
    if (f->row == 0 && left <= global) { /* whole: no copy */
        *out = f->cur;
        memset(&f->cur, 0, sizeof f->cur);
        return SY_OK;
    }
    int64_t take = left < global ? left : global;
    sy_status st = slice_rows(&f->cur, f->row, take, out);
    f->row += take;
    if (f->row == rows_of(&f->cur)) sy_element_clear(&f->cur);
    return st;
}

static void feed_free(batch_feed *f) {
    sy_element_clear(&f->cur);
    sy_iterator_free(f->it);
    f->it = NULL;
}

/* Check a batch element as arrays are checked (shapes, labels; issue 17: its sample weights, with
 * the steps the plan takes, sw_steps, or its labels' classes against class_weight cw). */
static sy_status check_batch_element(const sy_model *m, const char *what, const sy_element *e,
                                     bool labels, int64_t number, const double *cw, int32_t n_cw,
                                     int64_t sw_steps) {
    const sy_tensor *const *c = (const sy_tensor *const *)e->c;
    sy_status st = fit_check_data(m, what, "x", c, m->n_inputs, "y", labels ? c + m->n_inputs : NULL, m->n_outputs);
    int32_t k = m->n_inputs + m->n_outputs;
    if (!st && labels) st = fit_check_weights(m, what, e->n > k ? c[k] : NULL, cw, n_cw, rows_of(e));
    if (!st && labels && e->n > k && fit_weight_steps(sy_tensor_shape(c[k])) != sw_steps)
        st = sy_error(SY_ERR_SHAPE,
                      "%s: sample_weight has %lld steps where the element spec has %lld", what,
                      (long long)fit_weight_steps(sy_tensor_shape(c[k])), (long long)sw_steps);
    float w;
    for (int64_t i = 0; !st && labels && cw && e->n == k && i < rows_of(e); i++)
        st = fit_class_weight_of(what, cw, n_cw, c[m->n_inputs], i, &w);
    if (st) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        return sy_error(st, "%s (dataset batch %lld)", msg, (long long)number);
    }
    return SY_OK;
}

static void clear_batches(sy_element *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) sy_element_clear(&b[i]);
}

/* evaluate and predict over a dataset: logs (MODE_EVAL) or a new tensor of
 * predictions (MODE_PREDICT). */
static sy_status run_over_dataset(sy_model *m, plan_mode mode, const sy_dataset *data, int64_t max_steps, int verbose,
                                  FILE *progress, const char *prefix, sy_logs *logs, sy_tensor **pred) {
    const char *what = mode == MODE_EVAL ? (prefix[0] ? "validation" : "evaluate") : "predict";
    sy_status st = check_dataset(m, what, data, mode == MODE_EVAL);
    if (st) return st;
    int64_t r = model_replicas(m), spe = m->steps_per_execution, global = sy_dataset_component_spec(data, 0).shape.dims[0];
    batch_feed f = {NULL, {0, {0}}, 0};
    sy_element first;
    bool end = false;
    if ((st = sy_dataset_iterator(data, &f.it)) || (st = feed_next(&f, INT64_MAX, &first, &end))) {
        feed_free(&f);
        return st;
    }
    if (end && model_hosts(m) < 2) { /* issue 20: a host's shard may be empty; then it pads */
        feed_free(&f);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the dataset gave no batch", what);
    }
    if (global <= 0) global = end ? 1 : rows_of(&first); /* not static: the first batch's size */
    /* issue 20: on several hosts the dataset is this host's own (sharded by host): its batches go to
     * this host's replicas, from row `off` of each step's global batch */
    int32_t first_replica, local = model_local_replicas(m, &first_replica);
    if (model_hosts(m) > 1) r = local;
    int64_t per = (global + r - 1) / r;
    r = model_replicas(m);
    global = per * r;
    int64_t off = per * first_replica;
    if (!model_chief(m)) verbose = 0;
    model_plan *p = NULL;
    trip t = {.m = m, .replicas = (int32_t)r, .batches = sy_calloc((size_t)spe, sizeof(sy_element)),
              .base = sy_calloc((size_t)spe, sizeof(int64_t))};
    size_t out_row[MODEL_MAX_IO];
    for (int32_t j = 0; j < m->n_outputs; j++) {
        sy_shape out_shape = model_output_shape_at(m, j);
        out_row[j] = (size_t)sy_shape_count(&out_shape);
    }
    int64_t cap = 0, seen = 0, step = 0;
    sums total;
    memset(&total, 0, sizeof total);
    progbar bar;
    if (verbose) progbar_init(&bar, progress_file(progress), verbose, 0);
    if (!t.batches || !t.base) st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    bool was_weighted = m->sample_weighted; /* issue 17, fit arguments: (x, y, sample_weight) elements */
    int64_t was_steps = m->sample_weight_steps;
    if (mode == MODE_EVAL && sy_dataset_component_count(data) > m->n_inputs + m->n_outputs)
        m->sample_weighted = true, m->sample_weight_steps = dataset_weight_steps(m, data);
    if (!st) st = model_plan_get(m, mode, per, &p);
    m->sample_weighted = was_weighted;
    m->sample_weight_steps = was_steps;
    t.p = p;
    if (!st) st = trip_alloc(&t, spe, global);
    /* the first element may be larger than the batch: put it back to be cut */
    if (!st && rows_of(&first) > global) {
        f.cur = first;
        f.row = 0;
        memset(&first, 0, sizeof first);
    }
    while (!st && (!max_steps || step < max_steps)) {
        int64_t k = 0, got;
        for (; !end && k < spe && (!max_steps || step + k < max_steps); k++) {
            sy_element *e = &t.batches[k];
            if (first.n) {
                *e = first;
                memset(&first, 0, sizeof first);
            } else if ((st = feed_next(&f, global, e, &end)) || end) {
                break;
            }
            if ((st = check_batch_element(m, what, e, mode == MODE_EVAL, step + k, NULL, 0,
                                          p->sw_steps)))
                break;
            int64_t n = rows_of(e);
            for (int64_t j = 0; j < global; j++) t.idx[k * global + j] = j >= off && j - off < n ? j - off : -1;
            t.base[k] = seen;
            seen += n;
        }
        /* issue 20: every host runs as many steps as the host with the most data, the others padding */
        got = k;
        st = replicas_agree_steps(p->rs, st, &got, true);
        if (st || got == 0) break;
        for (; k < got; k++) {
            for (int64_t j = 0; j < global; j++) t.idx[k * global + j] = -1;
            t.base[k] = seen;
        }
        if (mode == MODE_PREDICT && seen > cap) { /* room for these rows' predictions */
            int64_t want = cap ? cap : 1;
            while (want < seen) want *= 2;
            for (int32_t j = 0; !st && j < m->n_outputs; j++) {
                float *grown = sy_realloc_array(t.pred_out[j], (size_t)cap * out_row[j], (size_t)want * out_row[j],
                                                sizeof(float));
                if (!grown) st = sy_error(SY_ERR_OUT_OF_MEMORY, "predict: out of memory for %lld predictions", (long long)want);
                else t.pred_out[j] = grown;
            }
            if (st) break;
            cap = want;
        }
        st = replicas_infer(p->rs, k, feed_shard, mode == MODE_EVAL ? read_sums : read_predictions, &t);
        if (!st && mode == MODE_EVAL) st = replicas_share(p->rs, t.parts, sizeof(sums), k); /* issue 20 */
        if (st) {
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", sy_last_error());
            st = sy_error(st, "%s: dataset batch %lld: %s", what, (long long)step, msg);
        } else {
            sy_logs l = {0};
            if (mode == MODE_EVAL) {
                fold(&t, k, &total);
                sums_to_logs(m, &total, prefix, &l);
            }
            step += k;
            if (verbose) progbar_update(&bar, step, mode == MODE_EVAL ? &l : NULL, false);
        }
        clear_batches(t.batches, k);
    }
    if (!st && step == 0) /* issue 20: on several hosts, when every host's shard is empty */
        st = strategy_agree(m->strategy, sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the dataset gave no batch", what));
    if (!st && verbose) {
        sy_logs l = {0};
        if (mode == MODE_EVAL) sums_to_logs(m, &total, prefix, &l);
        bar.target = step;
        progbar_update(&bar, step, mode == MODE_EVAL ? &l : NULL, true);
    }
    if (!st && mode == MODE_EVAL && logs) sums_to_logs(m, &total, prefix, logs);
    for (int32_t j = 0; !st && mode == MODE_PREDICT && j < m->n_outputs && model_hosts(m) > 1; j++) {
        void *all; /* issue 20: every host's rows, in the order of the whole */
        int64_t n_all;
        st = replicas_gather_dealt(p->rs, t.pred_out[j], out_row[j] * sizeof(float), seen, &all, &n_all);
        if (!st) sy_free(t.pred_out[j]), t.pred_out[j] = all;
        if (!st && j == m->n_outputs - 1) seen = n_all;
    }
    for (int32_t j = 0; !st && mode == MODE_PREDICT && j < m->n_outputs; j++) {
        sy_shape out_shape = model_output_shape_at(m, j);
        st = sy_tensor_new(SY_F32, keras_batch_shape(seen, &out_shape), &pred[j]);
        if (!st) memcpy(sy_tensor_data(pred[j]), t.pred_out[j], (size_t)seen * out_row[j] * sizeof(float));
    }
    for (int32_t j = 0; st && mode == MODE_PREDICT && j < m->n_outputs; j++) {
        sy_tensor_free(pred[j]);
        pred[j] = NULL;
    }
    sy_element_clear(&first);
    if (t.batches) clear_batches(t.batches, spe);
    sy_free(t.batches);
    sy_free(t.base);
    for (int32_t j = 0; j < MODEL_MAX_IO; j++) sy_free(t.pred_out[j]);
    trip_free(&t);
    feed_free(&f);
    return st;
}

sy_status sy_model_evaluate_dataset(sy_model *m, const sy_dataset *data, const sy_evaluate_options *o,
                                    sy_logs *results) {
    sy_evaluate_options d = sy_evaluate_options_default();
    if (!o) o = &d;
    if (results) memset(results, 0, sizeof *results);
    if (!m->compiled) return sy_error(SY_ERR_STATE, "evaluate: model '%s' must be compiled first", m->name);
    if (o->steps < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "evaluate: steps must be >= 0 (0: all batches), got %lld",
                        (long long)o->steps);
    sy_logs l = {0};
    sy_status st = fit_check_hosts(m, "evaluate", sy_dataset_component_spec(data, 0).shape.dims[0], -1, NULL, 0, NULL, 0, NULL);
    if (!st) st = run_over_dataset(m, MODE_EVAL, data, o->steps, o->verbose, o->progress, "", &l, NULL);
    if (st == SY_OK && results) *results = l;
    return st;
}

sy_status sy_model_predict_dataset_multi(sy_model *m, const sy_dataset *data, const sy_evaluate_options *o,
                                         sy_tensor **out, int32_t n_out) {
    sy_evaluate_options d = sy_evaluate_options_default();
    if (!o) o = &d;
    sy_status st = check_predict_outputs(m, out, n_out, "; use sy_model_predict_dataset_multi for one tensor per output");
    if (!st) st = fit_check_hosts(m, "predict", sy_dataset_component_spec(data, 0).shape.dims[0], -1, NULL, 0, NULL, 0, NULL);
    if (st) return st;
    return run_over_dataset(m, MODE_PREDICT, data, 0, o->verbose, o->progress, "", NULL, out);
}

sy_status sy_model_predict_dataset(sy_model *m, const sy_dataset *data, const sy_evaluate_options *o, sy_tensor **out) {
    return sy_model_predict_dataset_multi(m, data, o, out, 1);
}

/* The next k training batches from it into t (fewer at the end of the
 * data), checked; *got says how many. issue 20: on several hosts a batch is
 * this host's share of the global batch, its replicas' shards. */
static sy_status next_train_batches(const sy_model *m, sy_iterator *it, trip *t, int64_t k, int64_t batch,
                                    int64_t first_step, int64_t *got) {
    int32_t first_replica;
    model_local_replicas(m, &first_replica);
    int64_t global = t->p->batch * t->replicas, off = t->p->batch * first_replica;
    *got = 0;
    for (int64_t s = 0; s < k; s++) {
        sy_element *e = &t->batches[s];
        bool end;
        sy_status st = sy_iterator_next(it, e, &end);
        if (st) return st;
        if (end) return SY_OK;
        if ((st = check_batch_element(m, "fit", e, true, first_step + s, t->cw, t->n_cw,
                                      t->p->sw_steps)))
            return st;
        if (rows_of(e) != batch)
            return sy_error(SY_ERR_SHAPE, "fit: dataset batch %lld has %lld samples where the model was compiled for %lld",
                            (long long)(first_step + s), (long long)rows_of(e), (long long)batch);
        for (int64_t j = 0; j < global; j++) t->idx[s * global + j] = j >= off && j - off < batch ? j - off : -1;
        (*got)++;
    }
    return SY_OK;
}

/* ---- the epochs of fit ----------------------------------------------------------------- */

/* What fit's steps come from: arrays (x and y through a permutation per
 * pass; validation on x_val and y_val) or a dataset's batches (validation
 * on a dataset). */
typedef struct fit_feed {
    stream s;                             /* arrays */
    const sy_dataset *train, *validation; /* a dataset: train not NULL */
    sy_iterator *it;
    int64_t steps;  /* an epoch's steps; 0: until the dataset ends */
    int64_t target; /* what the progress bar expects (0: not known) */
    /* for checkpoints: elements taken from it, and the pipeline's random
     * state when it was opened */
    int64_t consumed;
    int32_t n_rng;
    uint64_t rng_open[CKPT_RNG_MAX];
    const float *val_sw; /* issue 17, fit arguments: the validation arrays' sample weights; NULL: none */
    int32_t hosts;       /* issue 20: the model's hosts, each reading its own shard of a dataset */
} fit_feed;

/* A new iterator over the training data, its random state kept first. */
static sy_status open_train(fit_feed *f) {
    sy_iterator_free(f->it);
    f->it = NULL;
    f->consumed = 0;
    f->n_rng = sy_dataset_rng_state(f->train, f->rng_open, CKPT_RNG_MAX);
    if (f->n_rng > CKPT_RNG_MAX)
        return sy_error(SY_ERR_UNSUPPORTED, "fit: the dataset has %d reshuffling shuffles; checkpoints keep at most %d",
                        f->n_rng, CKPT_RNG_MAX);
    return sy_dataset_iterator(f->train, &f->it);
}

/* What a checkpoint saves of the loop and the feed. */
static fit_position position_now(const fit_feed *f, int32_t epoch, int64_t step, const sums *sm) {
    fit_position p;
    memset(&p, 0, sizeof p);
    p.epoch = epoch;
    p.step = step;
    if (sm) p.sums = *sm;
    p.stream_seed = f->s.seed;
    p.pass = f->s.pass;
    p.pos = f->s.pos;
    p.hosts = f->train ? f->hosts : 1; /* arrays: every host walks the whole stream */
    if (f->train) {
        p.iter_open = f->it != NULL;
        p.consumed = f->consumed;
        p.n_rng = sy_dataset_rng_state(f->train, p.rng_now, CKPT_RNG_MAX);
        memcpy(p.rng_open, f->rng_open, sizeof p.rng_open);
        if (!p.iter_open) memcpy(p.rng_open, p.rng_now, sizeof p.rng_open);
    }
    return p;
}

/* What a checkpoint saves at the end of epoch `epoch` (done): the next epoch from its start, with a
 * pass that ends with each epoch over (its iterator closed) even when the iterator is not closed
 * yet. */
static fit_position position_next_epoch(const fit_feed *f, const sy_fit_options *o, int32_t epoch) {
    fit_position p = position_now(f, epoch + 1, 0, NULL);
    if (f->train && !o->steps_per_epoch && p.iter_open) {
        p.iter_open = false;
        p.consumed = 0;
        memcpy(p.rng_open, p.rng_now, sizeof p.rng_open);
    }
    return p;
}

/* issue 17, BackupAndRestore: where run_epochs is, for the backups its callback writes from its
 * hooks (keras_backup_attach). Keras resumes a backup made at an epoch's last batch at the next
 * epoch. */
typedef struct fit_live {
    sy_model *m;
    const sy_fit_options *o; /* model_dir: the backup directory */
    const fit_feed *f;
    int32_t epoch;
    int64_t step; /* steps run in the epoch */
    const fit_sums *sm;
} fit_live;

static sy_status backup_save(void *ctx, bool epoch_end) {
    const fit_live *l = ctx;
    fit_position p = epoch_end || (l->f->steps && l->step >= l->f->steps)
                         ? position_next_epoch(l->f, l->o, l->epoch)
                         : position_now(l->f, l->epoch, l->step, l->sm);
    return checkpoint_save(l->m, l->o, &p);
}

/* Put the feed where a checkpoint left it. */
static sy_status resume_feed(fit_feed *f, const fit_position *p) {
    if (!f->train) {
        f->s.seed = p->stream_seed;
        if (p->pass > 0) {
            f->s.pass = p->pass - 1;
            next_pass(&f->s); /* the pass under way, drawn again */
            if (p->pos > f->s.n)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "fit: the checkpoint is %lld samples into a pass, but x has %lld samples: other data",
                                (long long)p->pos, (long long)f->s.n);
            f->s.pos = p->pos;
        }
        return SY_OK;
    }
    if (p->iter_open && p->hosts != f->hosts) /* issue 20: each host's elements were of its own shard */
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: resuming: the checkpoint was written part way through an epoch by a run on %d host%s, "
                        "each reading its own shard of the dataset, and this run has %d: resume on %d, or from a "
                        "checkpoint at an epoch's end",
                        p->hosts, p->hosts == 1 ? "" : "s", f->hosts, p->hosts);
    sy_status st = sy_dataset_set_rng_state(f->train, p->iter_open ? p->rng_open : p->rng_now, p->n_rng);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        return sy_error(st, "fit: resuming: %s", msg);
    }
    if (!p->iter_open) return SY_OK;
    if ((st = open_train(f))) return st;
    for (int64_t i = 0; i < p->consumed; i++) { /* replay the elements taken before */
        sy_element e;
        bool end;
        if ((st = sy_iterator_next(f->it, &e, &end))) return st;
        if (end)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "fit: resuming: the checkpoint had taken %lld batches from the dataset, but it ends after %lld: "
                            "another dataset",
                            (long long)p->consumed, (long long)i);
        sy_element_clear(&e);
    }
    f->consumed = p->consumed;
    return SY_OK;
}

/* The next `want` steps' rows into t; *got fewer when a dataset ends. */
static sy_status feed_steps(const sy_model *m, fit_feed *f, trip *t, int64_t want, int64_t batch, int64_t step,
                            int64_t *got) {
    if (f->train) {
        sy_status st = next_train_batches(m, f->it, t, want, batch, step, got);
        f->consumed += *got;
        return st;
    }
    take(&f->s, t->idx, want * batch);
    *got = want;
    return SY_OK;
}

/* fit's epochs, callbacks, progress and validation, from either feed,
 * going on from *at when resumed from a checkpoint; an entry in h per
 * epoch. */
static sy_status run_epochs(sy_model *m, const sy_fit_options *o, model_plan *p, trip *t,
                            fit_feed *f, int64_t batch, sy_history *h, bool resumed,
                            const fit_position *at, fit_live *live) {
    sy_status st = SY_OK;
    int64_t spe = m->steps_per_execution;
    FILE *progress = progress_file(o->progress);
    sy_logs logs = {0};
    bool warned_nan = false;
    m->stop_training = false;
    fit_position resumed_at = *at;
    if (resumed && (st = resume_feed(f, &resumed_at))) return st;
    /* a BackupAndRestore callback saves from its own hooks */
    int64_t ckpt_every = o->model_dir && !live ? o->save_checkpoints_steps : 0;
    char tpu_name[32] = ""; /* issue 16, trace and roofline: the emulated chip's time per step, once */
    double tpu_step = o->verbose ? progbar_tpu_step(m, p, tpu_name, sizeof tpu_name) : 0;
    CALLBACKS(o, on_train_begin);
    for (int32_t epoch = resumed ? resumed_at.epoch : o->initial_epoch; st == SY_OK && epoch < o->epochs && !m->stop_training;
         epoch++) {
        CALLBACKS(o, on_epoch_begin, epoch);
        if (st) break;
        /* a pass per epoch (closed at its end), or one iteration across epochs */
        if (f->train && !f->it && (st = open_train(f))) break;
        progbar bar;
        if (o->verbose) {
            if (o->epochs > 1) fprintf(progress, "Epoch %d/%d\n", epoch + 1, o->epochs);
            progbar_init(&bar, progress, o->verbose, f->target);
            bar.tpu_step_s = tpu_step;
            memcpy(bar.tpu_name, tpu_name, sizeof bar.tpu_name);
        }
        sums sm;
        memset(&sm, 0, sizeof sm);
        memset(&logs, 0, sizeof logs);
        int64_t step = 0;
        if (resumed && epoch == resumed_at.epoch && resumed_at.step > 0) { /* mid-epoch */
            step = resumed_at.step;
            sm = resumed_at.sums;
            sums_to_logs(m, &sm, "", &logs);
            if (o->verbose == 1) progbar_update(&bar, step, &logs, false);
        }
        bool ran_out = false, stopped_in_epoch = false;
        while (st == SY_OK && (!f->steps || step < f->steps)) {
            int64_t want = f->steps && f->steps - step < spe ? f->steps - step : spe, k = 0;
            bool fed = (st = feed_steps(m, f, t, want, batch, step, &k)) == SY_OK;
            /* issue 20: a host whose input failed or ended ends the round trip for all */
            st = replicas_agree_steps(p->rs, st, &k, false);
            fed = fed && !st;
            if (!st && k) st = replicas_train(p->rs, k, feed_shard, read_sums, t);
            if (!st && k) st = replicas_share(p->rs, t->parts, sizeof(sums), k);
            if (t->batches) clear_batches(t->batches, spe);
            if (st) {
                char msg[2048];
                snprintf(msg, sizeof msg, "%s", sy_last_error());
                if (fed && k > 1)
                    st = sy_error(st, "fit: epoch %d, steps %lld-%lld: %s", epoch + 1, (long long)step,
                                  (long long)(step + k - 1), msg);
                else /* the step being fed, or the only one run */
                    st = sy_error(st, "fit: epoch %d, step %lld: %s", epoch + 1, (long long)(fed ? step : step + k), msg);
                break;
            }
            if (k) {
                int64_t before = sy_model_iterations(m) - k;
                fold(t, k, &sm);
                sums_to_logs(m, &sm, "", &logs);
                step += k;
                if (live) live->epoch = epoch, live->step = step, live->sm = &sm;
                /* Keras's ProgbarLogger is the last callback: a callback's line comes before the
                 * bar's update */
                CALLBACKS(o, on_train_batch_end, step - 1, &logs);
                if (o->verbose == 1) progbar_update(&bar, step, &logs, false);
                double loss = sy_logs_get(&logs, "loss");
                if (!isfinite(loss) && !warned_nan && !m->stop_training) { /* once a fit: it stays so */
                    warned_nan = true;
                    sy_log(SY_LOG_WARNING,
                           "fit: epoch %d, step %lld: the loss is %s; training goes on, as Keras's does (a "
                           "TerminateOnNaN callback, --terminate-on-nan, stops it); a lower learning rate may help",
                           epoch + 1, (long long)step, isnan(loss) ? "nan" : "infinite");
                }
                if (m->stop_training) { /* from a batch callback: after this batch, as Keras */
                    stopped_in_epoch = !(f->steps && step == f->steps);
                    break;
                }
                /* every ckpt_every steps, unless the epoch's end is here (its checkpoint follows) */
                if (!st && ckpt_every && sy_model_iterations(m) / ckpt_every > before / ckpt_every &&
                    !(f->steps && step == f->steps)) {
                    fit_position now = position_now(f, epoch, step, &sm);
                    st = checkpoint_save(m, o, &now);
                }
            }
            if (k < want) {
                ran_out = f->steps != 0; /* a dataset shorter than steps_per_epoch asks */
                break;
            }
        }
        if (st) break;
        if (step == 0) {
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "fit: the dataset gave no batch in epoch %d", epoch + 1);
            break;
        }
        if ((epoch + 1) % o->validation_freq == 0) {
            int64_t vb = o->validation_batch_size ? o->validation_batch_size : batch;
            if (f->validation)
                st = run_over_dataset(m, MODE_EVAL, f->validation, o->validation_steps, 0, NULL, "val_", &logs, NULL);
            else if (o->x_val || o->x_val_list) {
                int32_t nx, ny;
                const sy_tensor *vw = o->val_sample_weight;
                st = run_over(m, MODE_EVAL, val_x(o, &nx), val_y(o, &ny), f->val_sw,
                              vw ? fit_weight_steps(sy_tensor_shape(vw)) : 0, vb,
                              o->validation_steps, 0, NULL, "val_", &logs, NULL);
            }
            if (st) break;
        }
        if (live) live->epoch = epoch, live->step = step, live->sm = &sm;
        CALLBACKS(o, on_epoch_end, epoch, &logs);
        { /* issue 17, lr callbacks: Keras's History runs after the callbacks and keeps the "lr" they add */
            sy_status hs = history_append(h, epoch, &logs);
            if (!st) st = hs;
        }
        if (st) break;
        /* Keras's ProgbarLogger, last: the logs as the callbacks left them ("lr"), at the epoch's
         * target even when a callback stopped it early */
        if (o->verbose) {
            if (!bar.target) bar.target = step;
            progbar_update(&bar, bar.target, &logs, true);
        }
        if (f->train && !o->steps_per_epoch) { /* this epoch's pass is over */
            sy_iterator_free(f->it);
            f->it = NULL;
        }
        /* a checkpoint says the epoch was whole */
        if (o->model_dir && !live && !stopped_in_epoch) {
            fit_position next = position_next_epoch(f, o, epoch);
            if ((st = checkpoint_save(m, o, &next))) break;
        }
        if (ran_out) {
            sy_log(SY_LOG_WARNING,
                   "fit: the input ran out of data after %lld of %lld steps in epoch %d; training stops. Make sure "
                   "the dataset gives at least steps_per_epoch * epochs batches (repeat())",
                   (long long)step, (long long)o->steps_per_epoch, epoch + 1);
            break;
        }
    }
    CALLBACKS(o, on_train_end, &logs);
    return st;
}

/* run_epochs holding the model_dir's lock from its checkpoints' start
 * (and resume) to its end, callbacks included, whether it succeeds or
 * fails. */
static sy_status fit_epochs(sy_model *m, const sy_fit_options *o, model_plan *p, trip *t, fit_feed *f, int64_t batch,
                            sy_history *h) {
    fit_position at;
    memset(&at, 0, sizeof at);
    bool resumed = false;
    int lock = -1;
    sy_fit_options quiet = *o; /* issue 20: the chief alone prints */
    if (!model_chief(m)) quiet.verbose = 0, o = &quiet;
    /* issue 17, fit arguments: BackupAndRestore is the model_dir machinery, resuming, one checkpoint kept */
    sy_fit_options with_backup = *o;
    const char *backup_dir = NULL;
    bool delete_backup = false;
    int64_t backup_freq = 0;
    const sy_callback *backup = NULL;
    for (int32_t c = 0; c < o->n_callbacks && !backup_dir; c++)
        if (keras_backup_of(&o->callbacks[c], &backup_dir, &backup_freq, &delete_backup)) {
            backup = &o->callbacks[c];
            if (o->model_dir)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "fit: a BackupAndRestore callback (backup_dir '%s') and "
                                "model_dir '%s' both checkpoint the run: give one", backup_dir, o->model_dir);
            with_backup.model_dir = backup_dir;
            with_backup.resume = true;
            with_backup.keep_checkpoint_max = 1;
            with_backup.save_checkpoints_steps = 0; /* the callback saves, from its hooks */
            o = &with_backup;
        }
    sy_status st = checkpoint_begin(m, o, &at, &resumed, &lock);
    fit_live live = {.m = m, .o = o, .f = f};
    keras_backup_attach(backup, backup_save, &live);
    if (!st) st = run_epochs(m, o, p, t, f, batch, h, resumed, &at, backup ? &live : NULL);
    keras_backup_attach(backup, NULL, NULL);
    checkpoint_end(lock);
    if (!st && backup_dir && delete_backup && model_chief(m))
        keras_backup_delete(backup_dir); /* training ended: Keras's on_train_end */
    return st;
}

/* issue 17, fit arguments: validation_split as Keras's train_validation_split -- every array (the inputs, the
 * labels, the sample weights) cut in two before any shuffling -- and fit on the first part, validating on the
 * last. */
static sy_status fit_split(sy_model *m, const sy_tensor *const *x, int32_t n_x, const sy_tensor *const *y, int32_t n_y,
                           const sy_fit_options *o, sy_history **history) {
    const sy_tensor *all[2 * MODEL_MAX_IO + 1] = {0};
    sy_tensor *train[2 * MODEL_MAX_IO + 1], *val[2 * MODEL_MAX_IO + 1];
    int32_t n = 0;
    for (int32_t i = 0; i < n_x; i++) all[n++] = x[i];
    for (int32_t j = 0; j < n_y; j++) all[n++] = y[j];
    all[n++] = o->sample_weight;
    sy_status st = fit_validation_split(o->validation_split, all, n, train, val);
    if (st) return st;
    sy_fit_options cut = *o;
    cut.validation_split = 0;
    cut.x_val = cut.y_val = NULL;
    cut.x_val_list = (const sy_tensor *const *)val;
    cut.n_x_val = n_x;
    cut.y_val_list = (const sy_tensor *const *)val + n_x;
    cut.n_y_val = n_y;
    cut.sample_weight = train[n - 1];
    cut.val_sample_weight = val[n - 1];
    st = sy_model_fit_multi(m, (const sy_tensor *const *)train, n_x, (const sy_tensor *const *)train + n_x, n_y, &cut,
                            history);
    for (int32_t i = 0; i < n; i++) {
        sy_tensor_free(train[i]);
        sy_tensor_free(val[i]);
    }
    return st;
}

sy_status sy_model_fit_multi(sy_model *m, const sy_tensor *const *x, int32_t n_x, const sy_tensor *const *y,
                             int32_t n_y, const sy_fit_options *o, sy_history **history) {
    sy_fit_options d = sy_fit_options_default();
    if (!o) o = &d;
    if (history) *history = NULL;
    if (!m->compiled) return sy_error(SY_ERR_STATE, "fit: model '%s' must be compiled (sy_model_compile) first", m->name);
    sy_status st = check_fit_options(o);
    if (!st && !y) st = sy_error(SY_ERR_INVALID_ARGUMENT, "fit: no labels (y) given");
    if (!st) st = fit_check_data(m, "fit", "x", x, n_x, "y", y, n_y);
    int32_t nvx, nvy;
    const sy_tensor *const *vx = val_x(o, &nvx), *const *vy = val_y(o, &nvy);
    if (!st && vx) st = fit_check_data(m, "fit", "validation x", vx, nvx, "validation y", vy, nvy);
    /* issue 17, fit arguments: weights checked, then validation_split done by fitting on the cut arrays */
    if (!st) st = fit_check_weights(m, "fit", o->sample_weight, o->class_weight, o->n_class_weight, fit_samples(x[0]));
    if (!st && vx && o->val_sample_weight)
        st = fit_check_weights(m, "fit: validation", o->val_sample_weight, NULL, 0, fit_samples(vx[0]));
    if (st) return st;
    if (o->validation_split > 0 && !vx) return fit_split(m, x, n_x, y, n_y, o, history);
    int64_t n = fit_samples(x[0]), batch = o->batch_size, r = model_replicas(m);
    if (batch % r != 0) {
        int64_t below = batch / r * r, above = below + r; /* batch < INT64_MAX - r: no overflow */
        if (batch > INT64_MAX - 2 * r) above = below;
        char eg[64];
        if (!below || above == below) snprintf(eg, sizeof eg, "%lld", (long long)(below ? below : above));
        else snprintf(eg, sizeof eg, "%lld or %lld", (long long)below, (long long)above);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: the global batch size %lld does not divide among the %lld replicas in sync; every "
                        "replica takes an equal shard, so use a multiple of %lld (e.g. %s)",
                        (long long)batch, (long long)r, (long long)r, eg);
    }
    int64_t steps = o->steps_per_epoch ? o->steps_per_epoch : n / batch + (n % batch != 0), spe = m->steps_per_execution;
    model_plan *p;
    m->sample_weighted = o->sample_weight || o->class_weight; /* issue 17, fit arguments: plans that take weights */
    m->sample_weight_steps =
        o->sample_weight ? fit_weight_steps(sy_tensor_shape(o->sample_weight)) : 0;
    if ((st = model_plan_get(m, MODE_TRAIN, batch / r, &p))) {
        m->sample_weighted = false;
        m->sample_weight_steps = 0;
        return st;
    }
    sy_history *h = NULL;
    fit_feed f = {{sy_malloc((size_t)n * sizeof(int64_t)), n, n, 0, o->shuffle, sy_mix64(m->seed ^ sy_mix64(o->seed + 0x5F1F))},
                  NULL, NULL, NULL, steps, steps, 0, 0, {0}, NULL, model_hosts(m)};
    trip t = {.m = m, .p = p, .x = x, .y = y, .replicas = (int32_t)r};
    st = fit_check_hosts(m, "fit", batch, n, x, n_x, y, n_y, o); /* issue 20 */
    if (!f.s.perm || st || (st = trip_alloc(&t, spe < steps ? spe : steps, batch)) || (st = history_new(&h))) {
        if (!st) st = sy_error(SY_ERR_OUT_OF_MEMORY, "fit: out of memory");
    }
    /* issue 17, fit arguments: every sample's weight, and the plans that take them */
    float *sw = NULL, *val_sw = NULL;
    if (!st) st = fit_sample_weights("fit", o->sample_weight, o->class_weight, o->n_class_weight, y[0], n, &sw);
    if (!st && vx) st = fit_sample_weights("fit: validation", o->val_sample_weight, NULL, 0, NULL, fit_samples(vx[0]), &val_sw);
    t.sw = sw;
    f.val_sw = val_sw;
    if (!st) st = fit_epochs(m, o, p, &t, &f, batch, h);
    m->sample_weighted = false;
    m->sample_weight_steps = 0;
    sy_free(sw);
    sy_free(val_sw);
    sy_free(f.s.perm);
    trip_free(&t);
    if (history && st == SY_OK) *history = h;
    else sy_history_free(h);
    return st;
}

sy_status sy_model_fit(sy_model *m, const sy_tensor *x, const sy_tensor *y, const sy_fit_options *o,
                       sy_history **history) {
    return sy_model_fit_multi(m, &x, 1, &y, 1, o, history);
}

sy_status sy_model_fit_dataset(sy_model *m, const sy_dataset *train, const sy_dataset *validation,
                               const sy_fit_options *o, sy_history **history) {
    sy_fit_options d = sy_fit_options_default();
    if (!o) o = &d;
    if (history) *history = NULL;
    if (!m->compiled) return sy_error(SY_ERR_STATE, "fit: model '%s' must be compiled (sy_model_compile) first", m->name);
    sy_status st = check_fit_options(o);
    if (!st && (o->x_val || o->x_val_list))
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "fit: with a dataset, validation data is a dataset too (validation), not "
                                               "x_val and y_val");
    /* issue 17, fit arguments: a dataset's weights are its elements' */
    if (!st && o->validation_split != 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "fit: `validation_split` is only supported for Tensors or NumPy arrays, "
                      "found a dataset in the input; give the validation data as a dataset (validation)");
    if (!st && (o->sample_weight || o->val_sample_weight))
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "fit: `sample_weight` argument is not supported when using a dataset as "
                      "input; give elements (x, y, sample_weight)");
    if (!st) st = fit_check_weights(m, "fit", NULL, o->class_weight, o->n_class_weight, -1);
    if (!st) st = check_dataset(m, "fit", train, true);
    if (!st && validation) st = check_dataset(m, "fit: validation", validation, true);
    if (st) return st;
    /* issue 20: on several hosts the dataset is this host's: its batches feed this host's replicas */
    int32_t first_replica, local = model_local_replicas(m, &first_replica);
    int64_t batch = sy_dataset_component_spec(train, 0).shape.dims[0], r = model_hosts(m) > 1 ? local : model_replicas(m),
            card = sy_dataset_cardinality(train);
    if (batch <= 0)
        return sy_error(SY_ERR_SHAPE,
                        "fit: the dataset's batches have no static size; training compiles one static shape, so batch "
                        "with drop_remainder (as a TPU needs)");
    if (batch % r != 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: the dataset's batch size %lld does not divide among the %lld replicas %s; batch by "
                        "a multiple of %lld",
                        (long long)batch, (long long)r, model_hosts(m) > 1 ? "of this host" : "in sync", (long long)r);
    if (!o->steps_per_epoch && card == SY_INFINITE)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "fit: the dataset repeats forever, so an epoch has no end: give steps_per_epoch");
    int64_t spe = m->steps_per_execution;
    model_plan *p;
    /* issue 17, fit arguments: (x, y, sample_weight) elements or class_weight: plans that take weights */
    m->sample_weighted = o->class_weight || sy_dataset_component_count(train) > m->n_inputs + m->n_outputs;
    m->sample_weight_steps = dataset_weight_steps(m, train);
    if ((st = model_plan_get(m, MODE_TRAIN, batch / r, &p))) {
        m->sample_weighted = false;
        m->sample_weight_steps = 0;
        return st;
    }
    sy_history *h = NULL;
    fit_feed f = {{NULL, 0, 0, 0, false, 0}, train, validation, NULL, o->steps_per_epoch,
                  o->steps_per_epoch ? o->steps_per_epoch : card >= 0 ? card : 0, 0, 0, {0}, NULL, model_hosts(m)};
    trip t = {.m = m, .p = p, .replicas = model_replicas(m), .batches = sy_calloc((size_t)spe, sizeof(sy_element)),
              .cw = o->class_weight, .n_cw = o->n_class_weight};
    if (!st) st = fit_check_hosts(m, "fit", batch, -1, NULL, 0, NULL, 0, o); /* issue 20: hosts' shards may differ in size */
    if (!t.batches || st || (st = trip_alloc(&t, spe, batch / r * t.replicas)) || (st = history_new(&h))) {
        if (!st) st = sy_error(SY_ERR_OUT_OF_MEMORY, "fit: out of memory");
    }
    if (!st) st = fit_epochs(m, o, p, &t, &f, batch, h);
    m->sample_weighted = false;
    m->sample_weight_steps = 0;
    sy_iterator_free(f.it);
    if (t.batches) clear_batches(t.batches, spe);
    sy_free(t.batches);
    trip_free(&t);
    if (history && st == SY_OK) *history = h;
    else sy_history_free(h);
    return st;
}
