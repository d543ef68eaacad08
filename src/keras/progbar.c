/*
 * progbar.c - Keras 2's progress bar (keras.utils.Progbar), on any FILE.
 *
 * verbose 1 on a terminal redraws one line in place:
 *
 *   23/60 [===========>..................] - ETA: 1s - loss: 0.9123 - sparse_categorical_accuracy: 0.7004
 *
 * and finishes the epoch with the elapsed time and time per step:
 *
 *   60/60 [==============================] - 1s 23ms/step - loss: 0.7600 - ...
 *
 * verbose 1 elsewhere (a file, a pipe) prints only that final line, once per
 * epoch; verbose 2 prints "60/60 - 1s - loss: ... - 1s/epoch - 23ms/step".
 * The values shown are the logs as given: fit() passes running means over
 * the epoch, as Keras's stateful metrics are. Formatting follows Keras 2.15:
 * four decimals, or %.4e below 1e-3, "nan" for a NaN whatever its sign
 * bit (C's printf would write "-nan"); the time per step ignores the first
 * step once there are more.
 *
 * On an emulated TPU (issue 16) the time per step is followed by the
 * chip's, from the cost model (systolic/profile.h), computed once when fit
 * starts: "- 1s 45ms/step (TPU v2-8: 4.77ms/step) - loss: ...". It costs
 * the plan fit runs, so the model's dtype policy is in it (mixed_bfloat16's
 * values in bfloat16, as the chip stores them). On the CPU the line is
 * Keras's, byte for byte.
 */
#include "keras_internal.h"
#include "systolic/profile.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

void progbar_init(progbar *p, FILE *out, int verbose, int64_t target) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->verbose = verbose;
    p->target = target > 0 ? target : 0; /* 0: not known (a dataset of unknown length), as Keras's None */
    p->dynamic = isatty(fileno(out));
    p->start = sy_now();
    p->after_first_step = -1;
}

/* Keras's _format_time: " 23ms/step", " 1s/epoch", " 850us/step". */
static void format_time(char *buf, size_t size, double t, const char *unit) {
    if (t >= 1 || t == 0) snprintf(buf, size, " %.0fs/%s", t, unit);
    else if (t >= 1e-3) snprintf(buf, size, " %.0fms/%s", t * 1e3, unit);
    else snprintf(buf, size, " %.0fus/%s", t * 1e6, unit);
}

/* issue 16, trace and roofline: " (TPU v2-8: 4.77ms/step)", three significant figures, as the model
 * has them to spare and a rounded "2ms" would hide the difference between configurations */
static int append_tpu_step(const progbar *p, char *buf, size_t size, int len);

double progbar_tpu_step(const sy_model *m, const model_plan *p, char *name, size_t size) {
    const sy_tpu_chip *chip = m->strategy ? sy_strategy_chip(m->strategy) : NULL;
    if (!chip || !p || !p->rs || p->rs->n < 1) return 0;
    sy_profile_options o = sy_profile_options_default();
    o.replicas = sy_strategy_num_replicas_in_sync(m->strategy);
    o.steps_per_execution = m->steps_per_execution > 0 ? m->steps_per_execution : 1;
    sy_profile *prof;
    if (sy_plan_profile(p->rs->tpu ? p->rs->tpu : p->rs->plans[0], chip, &o, &prof)) {
        sy_log(SY_LOG_WARNING, "fit: the emulated TPU's time per step is not shown: %s", sy_last_error());
        return 0;
    }
    double t = prof->step_s;
    snprintf(name, size, "%s-%lld", chip->name,
             (long long)o.replicas * chip->cores / (chip->replicas > 0 ? chip->replicas : 1));
    sy_profile_free(prof);
    return t;
}

static double step_duration(progbar *p, int64_t current, double now) {
    if (!current) return 0;
    double t = p->after_first_step >= 0 && current > 1 ? (now - p->after_first_step) / (double)(current - 1)
                                                        : (now - p->start) / (double)current;
    if (current == 1) p->after_first_step = now;
    return t;
}

static int append(char *buf, size_t size, int len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char *buf, size_t size, int len, const char *fmt, ...) {
    if (len >= (int)size) return len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + len, size - (size_t)len, fmt, ap);
    va_end(ap);
    return n > 0 ? (len + n < (int)size ? len + n : (int)size - 1) : len;
}

static int append_tpu_step(const progbar *p, char *buf, size_t size, int len) {
    double t = p->tpu_step_s;
    if (t <= 0) return len;
    if (t >= 1) return append(buf, size, len, " (TPU %s: %.3gs/step)", p->tpu_name, t);
    if (t >= 1e-3) return append(buf, size, len, " (TPU %s: %.3gms/step)", p->tpu_name, t * 1e3);
    return append(buf, size, len, " (TPU %s: %.3gus/step)", p->tpu_name, t * 1e6);
}

static int append_values(char *buf, size_t size, int len, const sy_logs *logs) {
    for (int32_t i = 0; logs && i < logs->n; i++) {
        char value[64];
        sy_logs_format_value(value, sizeof value, logs->values[i]);
        len = append(buf, size, len, " - %s: %s", logs->names[i], value);
    }
    return len;
}

static int digits(int64_t n) {
    int d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

void progbar_update(progbar *p, int64_t current, const sy_logs *logs, bool finalize) {
    double now = sy_now();
    char line[2048], t[64];
    int len = 0;
    double per_step = step_duration(p, current, now);
    if (p->verbose == 1) {
        if (!finalize && (!p->dynamic || now - p->last_update < 0.05)) return;
        p->last_update = now;
        if (p->target) {
            len = append(line, sizeof line, len, "%*lld/%lld [", digits(p->target), (long long)current,
                         (long long)p->target);
            int width = 30, prog = (int)(width * (double)current / (double)p->target);
            for (int i = 0; i < prog - 1; i++) line[len++] = '=';
            if (prog > 0) line[len++] = current < p->target ? '>' : '=';
            for (int i = prog; i < width; i++) line[len++] = '.';
            line[len++] = ']';
            line[len] = '\0';
        } else { /* Keras: "     37/Unknown" */
            len = append(line, sizeof line, len, "%7lld/Unknown", (long long)current);
        }
        if (finalize || !p->target) {
            format_time(t, sizeof t, per_step, "step");
            len = append(line, sizeof line, len, " - %.0fs%s", now - p->start, t);
            len = append_tpu_step(p, line, sizeof line, len);
        } else {
            double eta = per_step * (double)(p->target - current);
            if (eta > 3600) len = append(line, sizeof line, len, " - ETA: %d:%02d:%02d", (int)(eta / 3600), (int)fmod(eta, 3600) / 60, (int)fmod(eta, 60));
            else if (eta > 60) len = append(line, sizeof line, len, " - ETA: %d:%02d", (int)(eta / 60), (int)fmod(eta, 60));
            else len = append(line, sizeof line, len, " - ETA: %ds", (int)eta);
        }
        len = append_values(line, sizeof line, len, logs);
        int prev = p->total_width;
        p->total_width = len;
        if (p->dynamic) fputc('\r', p->out);
        fputs(line, p->out);
        if (p->dynamic && prev > len) fprintf(p->out, "%*s", prev - len, "");
        if (finalize) fputc('\n', p->out);
        fflush(p->out);
    } else if (p->verbose == 2 && finalize) {
        if (!p->target) p->target = current > 0 ? current : 1;
        len = append(line, sizeof line, len, "%*lld/%lld - %.0fs", digits(p->target), (long long)current,
                     (long long)p->target, now - p->start);
        len = append_values(line, sizeof line, len, logs);
        format_time(t, sizeof t, now - p->start, "epoch");
        len = append(line, sizeof line, len, " -%s", t);
        format_time(t, sizeof t, (now - p->start) / (double)p->target, "step");
        len = append(line, sizeof line, len, " -%s", t);
        len = append_tpu_step(p, line, sizeof line, len);
        fprintf(p->out, "%s\n", line);
        fflush(p->out);
    }
}
