/*
 * lr_callbacks.c - the callbacks that set the learning rate, as tf.keras
 * 2.15's keras/src/callbacks.py has them: ReduceLROnPlateau and
 * LearningRateScheduler (docs/design/lr-schedules.md).
 *
 * Both set the rate through sy_model_set_learning_rate (Keras's
 * backend.set_value(optimizer.lr, v): a float32 variable), and both, at
 * each epoch's end, put the rate into the logs as "lr" -- fit()'s logs,
 * which the callbacks after them and the history then see, as Keras's
 * logs dict is shared. Keras's value there is an np.float32; here it is the
 * double closest to the float32's shortest decimal (0.1, not
 * 0.10000000149011612), which is what Python shows of an np.float32 and
 * what Keras's CSVLogger writes.
 *
 * Keras computes ReduceLROnPlateau's new rate in double (np.float32 times
 * a Python float is an np.float64), prints that double, and stores it
 * rounded to float32; so here. LearningRateScheduler hands the schedule
 * function float(lr) (the float32 rate widened) and prints the double the
 * function returned.
 *
 * With a learning-rate schedule Keras lets both set the rate, and the
 * next step computes the schedule's again (sy_model_set_learning_rate
 * does the same), so they change only the "lr" logged that epoch.
 */
#include "keras_config.h" /* keras_float_as_decimal */
#include "keras_internal.h"

#include <math.h>
#include <string.h>

static FILE *out_of(FILE *progress) { return progress ? progress : stderr; }

/* logs["lr"] = the optimizer's rate, as Keras's on_epoch_end does. fit()'s
 * logs are its own writable copy; the const of the hook is for the
 * callbacks that only read. */
static void log_lr(sy_model *m, const sy_logs *logs) {
    logs_set((sy_logs *)logs, "lr", keras_float_as_decimal((float)sy_model_learning_rate(m)));
}

/* ---- ReduceLROnPlateau ---------------------------------------------------------------------- */

typedef struct reduce_lr {
    sy_reduce_lr_options o; /* o.monitor points at monitor */
    char monitor[sizeof ((sy_logs *)0)->names[0]];
    bool greater; /* mode max (or auto with "acc" in the monitor's name) */
    sy_reduce_lr_state s;
} reduce_lr;

sy_reduce_lr_options sy_reduce_lr_options_default(void) {
    return (sy_reduce_lr_options){.monitor = "val_loss",
                                  .factor = 0.1,
                                  .patience = 10,
                                  .mode = "auto",
                                  .min_delta = 1e-4,
                                  .cooldown = 0,
                                  .min_lr = 0};
}

static sy_status rl_train_begin(void *ctx, sy_model *m) { /* Keras's _reset */
    (void)m;
    reduce_lr *r = ctx;
    r->s.best = r->greater ? -INFINITY : INFINITY;
    r->s.cooldown_counter = 0;
    r->s.wait = 0;
    return SY_OK;
}

static sy_status rl_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    reduce_lr *r = ctx;
    log_lr(m, logs);
    int32_t at = -1;
    for (int32_t i = 0; i < logs->n && at < 0; i++)
        if (strcmp(logs->names[i], r->monitor) == 0) at = i;
    if (at < 0) {
        char names[SY_LOGS_MAX * sizeof logs->names[0]];
        sy_log(SY_LOG_WARNING,
               "Learning rate reduction is conditioned on metric `%s` which is not available. Available metrics are: %s",
               r->monitor, logs_names_joined(logs, names, sizeof names));
        return SY_OK;
    }
    double current = logs->values[at];
    if (r->s.cooldown_counter > 0) {
        r->s.cooldown_counter--;
        r->s.wait = 0;
    }
    bool better = r->greater ? current > r->s.best + r->o.min_delta : current < r->s.best - r->o.min_delta;
    if (better) {
        r->s.best = current;
        r->s.wait = 0;
    } else if (r->s.cooldown_counter <= 0 && ++r->s.wait >= r->o.patience) {
        float old_lr = (float)sy_model_learning_rate(m);
        if (old_lr > (float)r->o.min_lr) {
            double new_lr = (double)old_lr * r->o.factor;
            if (r->o.min_lr > new_lr) new_lr = r->o.min_lr; /* Python's max(new_lr, min_lr) */
            sy_status st = sy_model_set_learning_rate(m, new_lr);
            if (st) return st;
            if (r->o.verbose > 0) {
                char v[32];
                fprintf(out_of(r->o.progress), "\nEpoch %d: ReduceLROnPlateau reducing learning rate to %s.\n",
                        epoch + 1, keras_float_repr(new_lr, v, sizeof v));
                fflush(out_of(r->o.progress));
            }
            r->s.cooldown_counter = r->o.cooldown;
            r->s.wait = 0;
        }
    }
    return SY_OK;
}

sy_status sy_callback_reduce_lr_on_plateau(const sy_reduce_lr_options *options, sy_callback *out) {
    if (!out || !options)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ReduceLROnPlateau: options and out must not be NULL");
    const sy_reduce_lr_options *o = options;
    const char *mode = o->mode ? o->mode : "auto";
    if (!o->monitor || !*o->monitor || strlen(o->monitor) >= sizeof ((reduce_lr *)0)->monitor)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ReduceLROnPlateau: monitor '%s' must be a log's name (1 to %zu characters)",
                        o->monitor ? o->monitor : "(null)", sizeof ((reduce_lr *)0)->monitor - 1);
    if (!(o->factor < 1.0))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ReduceLROnPlateau does not support a factor >= 1.0. Got %g", o->factor);
    if (!(o->factor >= 0))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ReduceLROnPlateau: factor %g must be >= 0 (new_lr = lr * factor)",
                        o->factor);
    if (o->patience < 0 || o->cooldown < 0 || o->verbose < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ReduceLROnPlateau: patience %d, cooldown %d and verbose %d must be >= 0",
                        o->patience, o->cooldown, o->verbose);
    if (!isfinite(o->min_delta) || !(o->min_lr >= 0) || isinf(o->min_lr))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ReduceLROnPlateau: min_delta %g must be a finite number and min_lr %g a finite number >= 0",
                        o->min_delta, o->min_lr);
    reduce_lr *r = sy_calloc(1, sizeof *r);
    if (!r) return sy_error(SY_ERR_OUT_OF_MEMORY, "ReduceLROnPlateau: out of memory");
    r->o = *o;
    snprintf(r->monitor, sizeof r->monitor, "%s", o->monitor);
    r->o.monitor = r->monitor;
    if (strcmp(mode, "auto") && strcmp(mode, "min") && strcmp(mode, "max")) {
        sy_log(SY_LOG_WARNING, "Learning rate reduction mode %s is unknown, fallback to auto mode.", mode);
        mode = "auto";
    }
    r->o.mode = NULL; /* the caller's string is not kept */
    /* Keras's ReduceLROnPlateau reads "acc" anywhere in the name as an accuracy (EarlyStopping differs) */
    r->greater = !strcmp(mode, "max") || (!strcmp(mode, "auto") && strstr(r->monitor, "acc"));
    rl_train_begin(r, NULL);
    *out = (sy_callback){.ctx = r, .on_train_begin = rl_train_begin, .on_epoch_end = rl_epoch_end, .free = sy_free};
    return SY_OK;
}

sy_status sy_callback_reduce_lr_state(const sy_callback *cb, sy_reduce_lr_state *out) {
    if (!cb || cb->on_epoch_end != rl_epoch_end || !out)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "reduce_lr_state: not a ReduceLROnPlateau callback");
    *out = ((const reduce_lr *)cb->ctx)->s;
    return SY_OK;
}

/* ---- LearningRateScheduler ------------------------------------------------------------------ */

typedef struct lr_scheduler {
    sy_lr_schedule_fn fn;
    void *user;
    int32_t verbose;
    FILE *progress;
} lr_scheduler;

static sy_status ls_epoch_begin(void *ctx, sy_model *m, int32_t epoch) {
    lr_scheduler *l = ctx;
    double lr = l->fn(l->user, epoch, (double)(float)sy_model_learning_rate(m));
    if (!isfinite(lr) || lr < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "LearningRateScheduler: the schedule function gave %g for epoch %d; the learning rate must be a "
                        "finite number >= 0",
                        lr, epoch);
    sy_status st = sy_model_set_learning_rate(m, lr);
    if (st) return st;
    if (l->verbose > 0) {
        char v[32];
        fprintf(out_of(l->progress), "\nEpoch %d: LearningRateScheduler setting learning rate to %s.\n", epoch + 1,
                keras_float_repr(lr, v, sizeof v));
        fflush(out_of(l->progress));
    }
    return SY_OK;
}

static sy_status ls_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)ctx, (void)epoch;
    log_lr(m, logs);
    return SY_OK;
}

sy_status sy_callback_learning_rate_scheduler(sy_lr_schedule_fn schedule, void *user, int32_t verbose, FILE *progress,
                                              sy_callback *out) {
    if (!out || !schedule)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "LearningRateScheduler: the schedule function and out must not be NULL");
    if (verbose < 0) return sy_error(SY_ERR_INVALID_ARGUMENT, "LearningRateScheduler: verbose %d must be >= 0", verbose);
    lr_scheduler *l = sy_calloc(1, sizeof *l);
    if (!l) return sy_error(SY_ERR_OUT_OF_MEMORY, "LearningRateScheduler: out of memory");
    *l = (lr_scheduler){.fn = schedule, .user = user, .verbose = verbose, .progress = progress};
    *out = (sy_callback){.ctx = l, .on_epoch_begin = ls_epoch_begin, .on_epoch_end = ls_epoch_end, .free = sy_free};
    return SY_OK;
}
