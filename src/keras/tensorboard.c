/*
 * tensorboard.c - Keras's TensorBoard callback: the scalars Keras 2.15's
 * keras.callbacks.TensorBoard writes, in its layout, through the event
 * file writer of src/io/events.c (docs/design/tensorboard.md).
 *
 * Layout: log_dir/train and log_dir/validation, one event file each per
 * fit() (Keras makes new writers whenever the callback is given a model,
 * that is at every fit). The train file is opened at on_train_begin, the
 * validation file at the first epoch that validated (Keras opens it
 * lazily too, so a fit without validation leaves no validation/).
 *
 * What goes where, as Keras 2.15 writes it:
 *   - at every epoch's end, into train: epoch_<name> for each log without
 *     "val_" (epoch_loss, epoch_<metric>) at step = epoch (0-based), then
 *     epoch_learning_rate (sy_model_learning_rate; with a learning-rate
 *     schedule, as Keras's _collect_learning_rate, the schedule at the
 *     optimizer's iterations: the rate the next step will use);
 *   - into validation, when the epoch validated: first what Keras's
 *     on_test_end writes, evaluation_<name>_vs_iterations at step =
 *     optimizer iterations (sy_model_iterations), then epoch_<name> with
 *     "val_" stripped at step = epoch;
 *   - with update_freq N > 0, after each host round trip into train:
 *     batch_<name> for each of the logs (the epoch's running means, as
 *     Keras's logs are) at step = the steps this fit has run (Keras's
 *     model._train_counter, reset at every fit), when that step is a
 *     multiple of N (Keras's record_if(step % update_freq == 0)); with
 *     steps_per_execution > 1 the callback sees every n-th step, as Keras's
 *     does.
 * Both files are flushed (and fsynced) at every epoch's end, so TensorBoard
 * shows an epoch as soon as it ends, and closed at on_train_end, or when
 * the callback is freed after a fit that failed.
 *
 * What Keras writes and this does not (yet): the model's graph and its
 * Keras config ("keras" tag), weight histograms and images
 * (histogram_freq), embeddings, profiles. And one difference: Keras 2.15
 * writes epoch_learning_rate only when the learning rate is a schedule;
 * this writes it always (the constant rate), as the issue asks.
 */
#include "keras_internal.h"

#include "../io/io_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct tensorboard {
    char *train_dir, *val_dir;
    int64_t update_freq;
    io_events *train, *val;
    int64_t first_iteration; /* optimizer iterations when this fit began */
} tensorboard;

sy_tensorboard_options sy_tensorboard_options_default(void) {
    return (sy_tensorboard_options){.log_dir = "logs", .update_freq = 0};
}

/* Close both files: the first failure is returned, both are closed. */
static sy_status close_writers(tensorboard *t) {
    sy_status st = io_events_close(t->train), st2 = SY_OK;
    char msg[1024] = "";
    if (st) snprintf(msg, sizeof msg, "%s", sy_last_error());
    st2 = io_events_close(t->val);
    t->train = t->val = NULL;
    if (st && st2) return sy_error(st, "%s", msg);
    return st ? st : st2;
}

static sy_status tb_train_begin(void *ctx, sy_model *m) {
    tensorboard *t = ctx;
    sy_status st = close_writers(t); /* left open by a fit that failed */
    if (st) return st;
    t->first_iteration = sy_model_iterations(m);
    return io_events_open(t->train_dir, &t->train);
}

static bool is_val(const char *name) {
    return strncmp(name, "val_", 4) == 0;
}

static sy_status scalar(io_events *w, const char *prefix, const char *name, const char *suffix,
                        int64_t step, double value) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s%s%s", prefix, name, suffix);
    return io_events_scalar(w, tag, step, (float)value);
}

static sy_status tb_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    tensorboard *t = ctx;
    (void)step; /* the step in the epoch; Keras counts the fit's steps */
    int64_t count = sy_model_iterations(m) - t->first_iteration;
    if (t->update_freq <= 0 || count % t->update_freq != 0 || !t->train) return SY_OK;
    sy_status st = SY_OK;
    for (int32_t i = 0; !st && i < logs->n; i++)
        st = scalar(t->train, "batch_", logs->names[i], "", count, logs->values[i]);
    return st;
}

static sy_status tb_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    tensorboard *t = ctx;
    if (!t->train)
        return sy_error(SY_ERR_STATE, "TensorBoard callback: on_epoch_end before on_train_begin");
    sy_status st = SY_OK;
    bool validated = false;
    for (int32_t i = 0; !st && i < logs->n; i++) {
        if (is_val(logs->names[i]))
            validated = true;
        else
            st = scalar(t->train, "epoch_", logs->names[i], "", epoch, logs->values[i]);
    }
    /* issue 17, learning-rate schedules: Keras's _collect_learning_rate writes schedule(iterations), the
     * rate of the next step */
    double lr = m->optimizer.schedule.kind != SY_LR_SCHEDULE_NONE
                    ? sy_lr_schedule_value(&m->optimizer.schedule, sy_model_iterations(m))
                    : sy_model_learning_rate(m);
    if (!st) st = scalar(t->train, "epoch_", "learning_rate", "", epoch, lr);
    if (!st) st = io_events_flush(t->train);
    if (st || !validated) return st;
    if (!t->val && (st = io_events_open(t->val_dir, &t->val))) return st;
    int64_t iterations = sy_model_iterations(m);
    for (int32_t i = 0; !st && i < logs->n; i++)
        if (is_val(logs->names[i]))
            st = scalar(t->val, "evaluation_", logs->names[i] + 4, "_vs_iterations", iterations,
                        logs->values[i]);
    for (int32_t i = 0; !st && i < logs->n; i++)
        if (is_val(logs->names[i]))
            st = scalar(t->val, "epoch_", logs->names[i] + 4, "", epoch, logs->values[i]);
    if (!st) st = io_events_flush(t->val);
    return st;
}

static sy_status tb_train_end(void *ctx, sy_model *m, const sy_logs *logs) {
    (void)m, (void)logs;
    return close_writers(ctx);
}

static void tb_free(void *ctx) {
    tensorboard *t = ctx;
    if (!t) return;
    io_events_close(t->train);
    io_events_close(t->val);
    sy_free(t->train_dir);
    sy_free(t->val_dir);
    sy_free(t);
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = sy_malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

sy_status sy_callback_tensorboard(const sy_tensorboard_options *options, sy_callback *out) {
    memset(out, 0, sizeof *out);
    sy_tensorboard_options o = options ? *options : sy_tensorboard_options_default();
    if (!o.log_dir || !*o.log_dir)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "TensorBoard: log_dir is empty: expected a directory for the event files");
    if (o.update_freq < 0)
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "TensorBoard: update_freq is %lld: expected 0 (per epoch, Keras's \"epoch\") or N > 0 "
            "(also every N training steps)",
            (long long)o.update_freq);
    /* a mistake found now rather than after the data has loaded; the
     * directories themselves are made when the files are */
    struct stat sb;
    if (stat(o.log_dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return sy_error(SY_ERR_IO,
                        "TensorBoard: the log directory '%s' exists and is not a directory",
                        o.log_dir);
    tensorboard *t = sy_calloc(1, sizeof *t);
    if (t) {
        t->update_freq = o.update_freq;
        t->train_dir = join(o.log_dir, "train");
        t->val_dir = join(o.log_dir, "validation");
    }
    if (!t || !t->train_dir || !t->val_dir) {
        tb_free(t);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "TensorBoard: out of memory");
    }
    *out = (sy_callback){.ctx = t,
                         .on_train_begin = tb_train_begin,
                         .on_train_batch_end = o.update_freq > 0 ? tb_batch_end : NULL,
                         .on_epoch_end = tb_epoch_end,
                         .on_train_end = tb_train_end,
                         .free = tb_free};
    return SY_OK;
}
