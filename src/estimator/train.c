/*
 * train.c - TPUEstimator.train(): the loop, TensorFlow's log lines, the
 * summaries and the checkpoints.
 *
 * A loop is one host round trip of iterations_per_loop steps under use_tpu
 * (replicas_train, steps_per_execution's machinery: the replicas run
 * forward and backward on their shards, their gradients are averaged and
 * one update applied, every step), one step without, as TPUEstimator runs
 * on a CPU; the last loop is cut short to end at max_steps. Between loops
 * the host does what TensorFlow's session hooks do, with the same timer
 * (SecondOrStepTimer: due the first time, then once `every` steps have
 * passed since it was last due):
 *
 *   LoggingTensorHook   "loss = L, step = S" every ceil(log_step_count_steps
 *                       / iterations_per_loop) loops, "(T sec)" after it
 *                       from the second on; L the last step's loss, the
 *                       mean of the cores' (TPUEstimator prints core 0's)
 *   ExamplesPerSecondHook "global_step/sec: G" and "examples/sec: E", and
 *                       their summaries, due every ceil(log_step_count_steps
 *                       / iterations_per_loop) steps (from the second time)
 *   SummarySaverHook    "loss" and "learning_rate" summaries every
 *                       save_summary_steps
 *   CheckpointSaverHook a checkpoint at the start (when none is at that
 *                       step), every save_checkpoints_steps or _secs, and
 *                       at the end: "Saving checkpoints for S into PATH."
 *   NanTensorHook       a NaN loss stops training: "Model diverged with
 *                       loss = NaN.", an error, no checkpoint written
 *
 * model_dir is held locked from before the newest checkpoint is restored
 * to after the last is written, as fit() holds it (keras/model_checkpoint.c
 * does both). Everything that can be refused -- the input, model_fn's
 * spec, the compile, another model's checkpoints -- is refused before the
 * first file is written. Summaries go to model_dir's event file (io/events.c),
 * opened at the first.
 */
#include "estimator_internal.h"

#include "../io/io_internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* TensorFlow's SecondOrStepTimer. */
typedef struct est_timer {
    int64_t every_steps; /* 0: not by steps */
    double every_secs;   /* 0: not by time */
    int64_t last_step;   /* -1: never due yet */
    double last_time;
} est_timer;

static est_timer timer_of(int64_t every_steps, double every_secs) {
    est_timer t = {every_steps, every_secs, -1, 0};
    return t;
}

static bool timer_due(const est_timer *t, int64_t step) {
    if (t->last_step < 0) return true;
    if (step == t->last_step) return false;
    if (t->every_secs > 0 && now() - t->last_time >= t->every_secs) return true;
    return t->every_steps > 0 && step >= t->last_step + t->every_steps;
}

static void timer_mark(est_timer *t, int64_t step) {
    t->last_step = step;
    t->last_time = now();
}

typedef struct train_run {
    sy_estimator *e;
    est_plan *p;
    float *losses; /* (loop steps, replicas) */
    io_events *events;
    est_timer log, rate, summary, ckpt;
    int64_t loops, global_batch;
    double log_time; /* the last loss line's */
    int64_t saved;   /* the step of the newest checkpoint, -1: none */
} train_run;

static void read_loss(void *ctx, int64_t step, int32_t replica, sy_plan *plan) {
    const est_run *run = ctx;
    const train_run *t = run->user;
    t->losses[step * run->replicas + replica] =
        *(const float *)sy_plan_output(plan, run->p->spec.loss);
}

static sy_status scalar(train_run *t, const char *tag, int64_t step, float value) {
    if (!t->e->model_dir) return SY_OK;
    sy_status st = t->events ? SY_OK : io_events_open(t->e->model_dir, &t->events);
    return st ? st : io_events_scalar(t->events, tag, step, value);
}

static sy_status save(train_run *t, int64_t step) {
    sy_estimator *e = t->e;
    if (!e->model_dir) return SY_OK;
    ckpt_owner w = est_owner(e, "train");
    sy_status st = ckpt_dir_save(&w, e->model_dir, e->o.config.keep_checkpoint_max, NULL);
    if (!st && t->events) st = io_events_flush(t->events);
    if (st) return st;
    char path[4096];
    ckpt_path(path, sizeof path, e->model_dir, step);
    sy_log(SY_LOG_INFO, "Saving checkpoints for %lld into %s.", (long long)step, path);
    t->saved = step;
    timer_mark(&t->ckpt, step);
    return SY_OK;
}

/* What the hooks do after a loop that ended at global step `step` with `loss`. */
static sy_status after_loop(train_run *t, int64_t step, float loss) {
    const sy_run_config *c = &t->e->o.config;
    char v[32];
    sy_status st = SY_OK;
    if (isnan(loss)) {
        sy_log(SY_LOG_ERROR, "Model diverged with loss = NaN.");
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "train: NaN loss during training, at step %lld (TensorFlow's "
                        "NanLossDuringTrainingError); the checkpoints before it are kept",
                        (long long)step);
    }
    if (c->log_step_count_steps && timer_due(&t->log, t->loops)) {
        double at = now();
        if (t->log.last_step < 0)
            sy_log(SY_LOG_INFO, "loss = %s, step = %lld", est_float(loss, v, sizeof v),
                   (long long)step);
        else
            sy_log(SY_LOG_INFO, "loss = %s, step = %lld (%.3f sec)", est_float(loss, v, sizeof v),
                   (long long)step, at - t->log_time);
        t->log_time = at;
        timer_mark(&t->log, t->loops);
    }
    if (c->log_step_count_steps && timer_due(&t->rate, step)) {
        bool first = t->rate.last_step < 0;
        int64_t steps = step - t->rate.last_step;
        double secs = now() - t->rate.last_time;
        timer_mark(&t->rate, step);
        if (!first && secs > 0) {
            double per_sec = (double)steps / secs;
            sy_log(SY_LOG_INFO, "global_step/sec: %g", per_sec);
            sy_log(SY_LOG_INFO, "examples/sec: %g", per_sec * (double)t->global_batch);
            if (c->save_summary_steps) {
                st = scalar(t, "global_step/sec", step, (float)per_sec);
                if (!st)
                    st =
                        scalar(t, "examples/sec", step, (float)(per_sec * (double)t->global_batch));
            }
        }
    }
    if (!st && c->save_summary_steps && timer_due(&t->summary, step)) {
        timer_mark(&t->summary, step);
        st = scalar(t, "loss", step, loss);
        if (!st) st = scalar(t, "learning_rate", step, sy_plan_learning_rate(t->p->rs->plans[0]));
    }
    if (!st && timer_due(&t->ckpt, step)) st = save(t, step);
    t->loops++;
    return st;
}

static sy_status check_steps(const sy_estimator *e, int64_t steps, int64_t max_steps) {
    if (steps < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "train: Must specify steps > 0, given: %lld",
                        (long long)steps);
    if (max_steps < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "train: Must specify max_steps > 0, given: %lld",
                        (long long)max_steps);
    if (steps && max_steps)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "train: Can not provide both steps and max_steps (%lld and %lld)",
                        (long long)steps, (long long)max_steps);
    if (e->o.use_tpu && !steps && !max_steps)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "train: For TPU training, one of `steps` or `max_steps` must be set. "
                        "Cannot be both `None`.");
    return SY_OK;
}

/* The loops, from the global step restored to target (or the input's end). */
static sy_status loops(train_run *t, est_input *in, est_step *buf, int64_t ipl, int64_t target,
                       float *last) {
    sy_estimator *e = t->e;
    bool end = false;
    int64_t pending = 1; /* buf[0] holds the step the plan was built from */
    while (!end && sy_vars_iterations(e->vars) < target) {
        int64_t gs = sy_vars_iterations(e->vars), want = sy_min64(ipl, target - gs), k = pending;
        pending = 0;
        sy_status st = SY_OK;
        while (k < want && !(st = est_input_next(in, &buf[k], &end)) && !end) k++;
        if (st) return st;
        if (k == 0) break;
        /* with use_tpu false a batch of another size (the last) runs on its own plan; one step a
         * loop */
        if ((st = est_plan_get(e, SY_MODE_TRAIN, in, &buf[0], &t->p))) return st;
        est_run run = {t->p, buf, e->replicas, read_loss, t};
        if ((st = replicas_train(t->p->rs, k, est_feed, read_loss, &run))) {
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", sy_last_error());
            return sy_error(st, "train: step %lld: %s", (long long)sy_vars_iterations(e->vars) + 1,
                            msg);
        }
        double sum = 0;
        for (int32_t r = 0; r < e->replicas; r++) sum += t->losses[(k - 1) * e->replicas + r];
        *last = (float)(sum / e->replicas);
        if ((st = after_loop(t, sy_vars_iterations(e->vars), *last))) return st;
    }
    return SY_OK;
}

sy_status sy_estimator_train(sy_estimator *e, sy_input_fn input_fn, int64_t steps,
                             int64_t max_steps) {
    sy_status st = check_steps(e, steps, max_steps);
    if (st) return st;
    const sy_run_config *c = &e->o.config;
    int64_t ipl = e->o.use_tpu ? c->tpu_config.iterations_per_loop : 1;
    est_input in;
    est_step *buf = sy_calloc((size_t)ipl, sizeof *buf);
    train_run t = {.e = e, .saved = -1};
    t.losses = sy_malloc((size_t)(ipl * e->replicas) * sizeof *t.losses);
    if (!buf || !t.losses) {
        sy_free(buf);
        sy_free(t.losses);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "train: out of memory");
    }
    st = est_input_open(e, SY_MODE_TRAIN, input_fn, &in);
    for (int64_t i = 0; !st && i < ipl; i++) st = est_step_alloc(&in, &buf[i]);
    bool end = false;
    if (!st) st = est_input_next(&in, &buf[0], &end);
    if (!st && end)
        sy_log(SY_LOG_WARNING, "train: the input_fn's dataset gave no batch: nothing to train on");
    /* model_fn's spec and the compile are checked before model_dir is touched */
    if (!st && !end) st = est_plan_get(e, SY_MODE_TRAIN, &in, &buf[0], &t.p);
    int lock = -1;
    int64_t restored = -1;
    if (!st && !end && e->model_dir) {
        ckpt_owner w = est_owner(e, "train");
        st = ckpt_dir_begin(&w, e->model_dir, true, NULL, &restored, &lock);
        char path[4096];
        if (!st && restored >= 0) {
            ckpt_path(path, sizeof path, e->model_dir, restored);
            sy_log(SY_LOG_INFO, "Restoring parameters from %s", path);
        }
    }
    float last = NAN;
    int64_t gs = sy_vars_iterations(e->vars);
    if (!st && !end && max_steps && gs >= max_steps) {
        sy_log(SY_LOG_INFO, "Skipping training since max_steps has already saved.");
        end = true;
    }
    if (!st && !end) {
        t.saved = restored;
        t.global_batch = e->o.train_batch_size ? e->o.train_batch_size : buf[0].rows;
        /* TPUEstimator's log_every_n_steps, by the configured loop also on a CPU, as TensorFlow */
        int64_t loop = c->tpu_config.iterations_per_loop,
                every = (c->log_step_count_steps + loop - 1) / loop;
        t.log = timer_of(every, 0);
        t.rate = timer_of(every, 0);
        t.summary = timer_of(c->save_summary_steps, 0);
        t.ckpt = timer_of(c->save_checkpoints_steps,
                          c->save_checkpoints_steps ? 0 : c->save_checkpoints_secs);
        timer_mark(&t.ckpt, gs); /* CheckpointSaverHook starts its timer at the first step */
        if (restored != gs) st = save(&t, gs);
        int64_t target = max_steps ? max_steps : steps ? gs + steps : INT64_MAX;
        if (!st) st = loops(&t, &in, buf, ipl, target, &last);
        if (!st && t.saved != sy_vars_iterations(e->vars))
            st = save(&t, sy_vars_iterations(e->vars));
        if (!st) {
            char v[32];
            sy_log(SY_LOG_INFO, "Loss for final step: %s.",
                   isnan(last) ? "None" : est_float(last, v, sizeof v));
        }
    }
    sy_status cs = io_events_close(t.events);
    if (!st) st = cs;
    checkpoint_end(lock);
    for (int64_t i = 0; i < ipl; i++) est_step_free(&buf[i]);
    est_input_close(&in);
    sy_free(buf);
    sy_free(t.losses);
    return st;
}
