/*
 * checkpoint_callbacks.c - Keras's ModelCheckpoint and BackupAndRestore
 * (tf.keras 2.15, keras/src/callbacks.py), as sy_callback hooks.
 *
 * ModelCheckpoint follows Keras's _save_model step for step. The file name
 * is filepath formatted as Python's str.format(epoch=epoch + 1, **logs),
 * with batch=batch + 1 too when saving on batches (keras_format_path: a
 * field is {name} or {name:spec}, spec Python's format mini-language
 * [[fill]align][sign][0][width][.precision][type] with the types d, x, X,
 * o, f, F, e, E, g, G and %; a name the logs lack fails as Keras's
 * KeyError does, with its words). With save_freq 'epoch' (0 here) it saves
 * at each epoch's end; with an integer N it counts the batches seen, as
 * _should_save_on_batch does (a host round trip of several steps counts
 * them all), and saves once N are reached. save_best_only compares the
 * monitored value with the best so far (np.less or np.greater: a NaN never
 * improves; auto mode is max when the name contains "acc" or starts with
 * "fmeasure", Keras's test, which differs from EarlyStopping's), starting
 * from initial_value_threshold or +-inf; a missing monitored value warns
 * and skips. Verbose messages are Keras's, to `progress`. A save is an
 * HDF5 file, whole model (sy_model_save) or weights (sy_model_save_weights),
 * written to a temporary name and renamed, in a directory made if missing.
 * tests/test_fit_args.c compares the decisions, the names and the messages
 * with Keras's own on scripted logs (tools/golden/make_fit_args_fixtures.py).
 *
 * BackupAndRestore(backup_dir, save_freq, delete_checkpoint) is fit()'s
 * model_dir machinery (model_checkpoint.c): fit() finds the callback among
 * its callbacks (keras_backup_of) and runs as with model_dir = backup_dir,
 * resume on, one checkpoint kept, writing no checkpoint of its own; it
 * lends the callback a way to write one of where the run is
 * (keras_backup_attach), which the callback's hooks use when Keras's
 * would: at its on_epoch_end with save_freq 'epoch', after every
 * save_freq-th on_train_batch_end call otherwise (counted on across fit()
 * calls, as Keras's _batches_count) -- at its place among the callbacks, so
 * a callback after it that fails finds the backup made, and a rate set
 * after it is not in it. A run interrupted (killed, or stopped by an error)
 * and started again resumes where the backup was made (an epoch's last
 * step: the next epoch, as Keras) with the input where it was, so it ends
 * with the weights of a run never interrupted, bit for bit. When training
 * ends (also when a callback stopped it, as Keras's on_train_end), the
 * backup is deleted unless delete_checkpoint is false.
 */
#include "keras_internal.h"

#include "../io/io_internal.h" /* io_make_dirs, ckpt_list, ckpt_path */

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Python's str.format for ModelCheckpoint's filepath
 * ------------------------------------------ */

typedef struct fmt_spec {
    char fill, align, sign, type;
    bool zero;
    int width, precision; /* -1: not given */
} fmt_spec;

static bool parse_spec(const char *s, size_t n, fmt_spec *f) {
    *f = (fmt_spec){.fill = ' ', .width = -1, .precision = -1};
    size_t i = 0;
    if (n >= 2 && strchr("<>=^", s[1]))
        f->fill = s[0], f->align = s[1], i = 2;
    else if (n >= 1 && strchr("<>=^", s[0]))
        f->align = s[0], i = 1;
    if (i < n && strchr("+- ", s[i])) f->sign = s[i++];
    if (i < n && s[i] == '0') {
        f->zero = true;
        i++;
    }
    if (i < n && isdigit((unsigned char)s[i])) {
        f->width = 0;
        while (i < n && isdigit((unsigned char)s[i]) && f->width < 1000)
            f->width = f->width * 10 + (s[i++] - '0');
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !isdigit((unsigned char)s[i])) return false;
        f->precision = 0;
        while (i < n && isdigit((unsigned char)s[i]) && f->precision < 100)
            f->precision = f->precision * 10 + (s[i++] - '0');
    }
    if (i < n && strchr("dxXofFeEgG%", s[i])) f->type = s[i++];
    return i == n;
}

/* One value formatted by spec into out; false when Python would raise (an integer code for a
 * float). */
static bool format_value(double v, bool integer, const fmt_spec *f, char *out, size_t size) {
    char body[512], cf[32];
    const char *sign = f->sign == '+' ? "+" : f->sign == ' ' ? " " : "";
    int p = f->precision < 0 ? 6 : f->precision;
    switch (f->type) {
    case 'd':
    case 'x':
    case 'X':
    case 'o':
        if (!integer || f->precision >= 0) return false;
        snprintf(cf, sizeof cf, "%%%s%s", sign,
                 f->type == 'd'   ? "lld"
                 : f->type == 'x' ? "llx"
                 : f->type == 'X' ? "llX"
                                  : "llo");
        if (f->type != 'd' && v < 0) { /* Python writes -ff, not two's complement */
            snprintf(body, sizeof body,
                     f->type == 'x'   ? "-%llx"
                     : f->type == 'X' ? "-%llX"
                                      : "-%llo",
                     (long long)-v);
            break;
        }
        snprintf(body, sizeof body, cf, (long long)v);
        break;
    case '%':
        snprintf(cf, sizeof cf, "%%%s.%df%%%%", sign, p);
        snprintf(body, sizeof body, cf, v * 100);
        break;
    case 0:
        if (integer && f->precision < 0) {
            snprintf(cf, sizeof cf, "%%%slld", sign);
            snprintf(body, sizeof body, cf, (long long)v);
        } else if (f->precision < 0) { /* str(float): the shortest repr */
            char r[64];
            keras_float_repr(v, r, sizeof r);
            snprintf(body, sizeof body, "%s%s", v >= 0 && !signbit(v) ? sign : "", r);
        } else {
            snprintf(cf, sizeof cf, "%%%s.%dg", sign, p ? p : 1);
            snprintf(body, sizeof body, cf, v);
        }
        break;
    default:
        snprintf(cf, sizeof cf, "%%%s.%d%c", sign, p, f->type);
        snprintf(body, sizeof body, cf, v);
        break;
    }
    int len = (int)strlen(body), pad = f->width > len ? f->width - len : 0;
    char fill = f->fill, align = f->align;
    if (!align && f->zero) fill = '0', align = '=';
    if (!align) align = '>'; /* numbers go right */
    size_t at = 0;
    int lead = align == '<' ? 0 : align == '^' ? pad / 2 : pad;
    if (align == '=') { /* after the sign */
        int s = body[0] == '+' || body[0] == '-' || body[0] == ' ';
        if (s && at + 1 < size) out[at++] = body[0];
        for (int i = 0; i < pad && at + 1 < size; i++) out[at++] = fill;
        snprintf(out + at, size - at, "%s", body + s);
        return true;
    }
    for (int i = 0; i < lead && at + 1 < size; i++) out[at++] = fill;
    for (int i = 0; i < len && at + 1 < size; i++) out[at++] = body[i];
    for (int i = lead; i < pad && at + 1 < size; i++) out[at++] = fill;
    out[at] = 0;
    return true;
}

sy_status keras_format_path(const char *filepath, int32_t epoch, int64_t batch, const sy_logs *logs,
                            char *out, size_t size) {
    size_t at = 0;
    bool batch_in_logs = false;
    for (int32_t i = 0; logs && i < logs->n; i++) batch_in_logs |= !strcmp(logs->names[i], "batch");
    for (const char *s = filepath; *s;) {
        if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
            if (at + 1 < size) out[at++] = s[0];
            s += 2;
            continue;
        }
        if (*s == '}')
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "ModelCheckpoint: filepath \"%s\": Single '}' encountered in format "
                            "string",
                            filepath);
        if (*s != '{') {
            if (at + 1 < size) out[at++] = *s;
            s++;
            continue;
        }
        const char *end = strchr(s, '}');
        if (!end)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "ModelCheckpoint: filepath \"%s\": Single '{' encountered in format "
                            "string",
                            filepath);
        const char *colon = memchr(s + 1, ':', (size_t)(end - s - 1));
        size_t name_len = (size_t)((colon ? colon : end) - s - 1);
        char name[sizeof logs->names[0]];
        if (name_len == 0 || name_len >= sizeof name)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "ModelCheckpoint: filepath \"%s\": a field needs a name: {epoch}, "
                            "{batch} or a log's name such as {val_loss:.2f}",
                            filepath);
        memcpy(name, s + 1, name_len);
        name[name_len] = 0;
        double v = 0;
        bool found = false, integer = false;
        for (int32_t i = 0; logs && i < logs->n && !found; i++)
            if (!strcmp(logs->names[i], name)) v = logs->values[i], found = true;
        if (!found && !strcmp(name, "epoch")) v = epoch + 1, found = integer = true;
        if (!found && !strcmp(name, "batch") && batch >= 0 && !batch_in_logs)
            v = (double)(batch + 1), found = integer = true;
        if (!found) {
            char names[SY_LOGS_MAX * 8] = "";
            size_t len =
                (size_t)snprintf(names, sizeof names, "epoch%s", batch >= 0 ? ", batch" : "");
            for (int32_t i = 0; logs && i < logs->n && len < sizeof names; i++)
                len += (size_t)snprintf(names + len, sizeof names - len, ", %s", logs->names[i]);
            return sy_error(SY_ERR_NOT_FOUND,
                            "Failed to format this callback filepath: \"%s\". Reason: '%s' (the "
                            "names it may use: %s)",
                            filepath, name, names);
        }
        fmt_spec f;
        char piece[1024];
        if (colon && !parse_spec(colon + 1, (size_t)(end - colon - 1), &f))
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "ModelCheckpoint: filepath \"%s\": Invalid format specifier '%.*s' "
                            "(systolic takes [[fill]align][sign][0][width][.precision][type], type "
                            "one of dxXofFeEgG%%)",
                            filepath, (int)(end - colon - 1), colon + 1);
        if (!colon) f = (fmt_spec){.fill = ' ', .width = -1, .precision = -1};
        if (!format_value(v, integer, &f, piece, sizeof piece))
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "ModelCheckpoint: filepath \"%s\": Unknown format code '%c' for "
                            "object of type 'float' ({%s} is a number with decimals)",
                            filepath, f.type, name);
        for (const char *c = piece; *c && at + 1 < size; c++) out[at++] = *c;
        s = end + 1;
    }
    if (at + 1 >= size)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ModelCheckpoint: filepath \"%s\" formats to a path longer than %zu "
                        "characters",
                        filepath, size - 1);
    out[at] = 0;
    return SY_OK;
}

/* ---- ModelCheckpoint
 * ------------------------------------------------------------------------------ */

typedef struct model_checkpoint {
    sy_model_checkpoint_options o; /* o.filepath, o.monitor point at the copies below */
    char filepath[1024], monitor[sizeof((sy_logs *)0)->names[0]];
    bool greater;
    double best;
    int32_t epoch;
    int64_t since_save, last_batch;
} model_checkpoint;

static FILE *mc_out(const model_checkpoint *c) {
    return c->o.progress ? c->o.progress : stderr;
}

static sy_status mc_save(model_checkpoint *c, sy_model *m, int32_t epoch, int64_t batch,
                         const sy_logs *logs) {
    char path[1024];
    sy_status st = keras_format_path(c->o.filepath, epoch, batch, logs, path, sizeof path);
    if (st) return st;
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) { /* Keras makes the directory */
        char dir[1024];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        if ((st = io_make_dirs(dir))) return st;
    }
    if (c->o.save_best_only) {
        double current = sy_logs_get(logs, c->monitor);
        bool present = false;
        for (int32_t i = 0; i < logs->n; i++) present |= !strcmp(logs->names[i], c->monitor);
        if (!present) {
            sy_log(SY_LOG_WARNING, "Can save best model only with %s available, skipping.",
                   c->monitor);
            return SY_OK;
        }
        if (!(c->greater ? current > c->best : current < c->best)) {
            if (c->o.verbose > 0)
                fprintf(mc_out(c), "\nEpoch %d: %s did not improve from %.5f\n", epoch + 1,
                        c->monitor, c->best);
            return SY_OK;
        }
        if (c->o.verbose > 0)
            fprintf(mc_out(c), "\nEpoch %d: %s improved from %.5f to %.5f, saving model to %s\n",
                    epoch + 1, c->monitor, c->best, current, path);
        c->best = current;
    } else if (c->o.verbose > 0) {
        fprintf(mc_out(c), "\nEpoch %d: saving model to %s\n", epoch + 1, path);
    }
    if (c->o.verbose > 0) fflush(mc_out(c));
    st = c->o.save_weights_only ? sy_model_save_weights(m, path) : sy_model_save(m, path);
    if (st) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        return sy_error(st, "ModelCheckpoint: epoch %d: %s", epoch + 1, msg);
    }
    return SY_OK;
}

static sy_status mc_train_begin(void *ctx, sy_model *m) {
    (void)ctx, (void)m;
    return SY_OK;
}

static sy_status mc_epoch_begin(void *ctx, sy_model *m, int32_t epoch) {
    (void)m;
    ((model_checkpoint *)ctx)->epoch = epoch;
    return SY_OK;
}

/* Keras's _should_save_on_batch: batches counted from the last one seen, a smaller index a new
 * epoch's. */
static sy_status mc_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    model_checkpoint *c = ctx;
    if (!c->o.save_freq) return SY_OK;
    c->since_save += step <= c->last_batch ? step + 1 : step - c->last_batch;
    c->last_batch = step;
    if (c->since_save < c->o.save_freq) return SY_OK;
    c->since_save = 0;
    return mc_save(c, m, c->epoch, step, logs);
}

static sy_status mc_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    model_checkpoint *c = ctx;
    return c->o.save_freq ? SY_OK : mc_save(c, m, epoch, -1, logs);
}

sy_model_checkpoint_options sy_model_checkpoint_options_default(void) {
    return (sy_model_checkpoint_options){.monitor = "val_loss", .mode = "auto"};
}

sy_status sy_callback_model_checkpoint(const sy_model_checkpoint_options *options,
                                       sy_callback *out) {
    if (!out)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ModelCheckpoint: no callback to fill in (out is NULL)");
    memset(out, 0, sizeof *out);
    sy_model_checkpoint_options o = options ? *options : sy_model_checkpoint_options_default();
    if (!o.filepath || !*o.filepath)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ModelCheckpoint: filepath is empty; expected a file name such as "
                        "\"w-{epoch:02d}-{val_loss:.2f}.h5\"");
    if (strlen(o.filepath) >= sizeof((model_checkpoint *)0)->filepath)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ModelCheckpoint: filepath is longer than %d characters",
                        (int)sizeof((model_checkpoint *)0)->filepath - 1);
    if (!o.monitor || !*o.monitor || strlen(o.monitor) >= sizeof((model_checkpoint *)0)->monitor)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ModelCheckpoint: monitor '%s' is not a log's name such as \"val_loss\"",
                        o.monitor ? o.monitor : "");
    if (o.save_freq < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "ModelCheckpoint: Unrecognized save_freq: %lld. Expected save_freq are "
                        "\"epoch\" (0) or a number of batches >= 1",
                        (long long)o.save_freq);
    if (o.verbose < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ModelCheckpoint: verbose must be 0 or 1, got %d",
                        o.verbose);
    if (o.has_initial_value_threshold && isnan(o.initial_value_threshold))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "ModelCheckpoint: initial_value_threshold is NaN");
    /* a test of the pattern now, on logs holding every name it asks for, so a bad spec fails before
     * training */
    sy_logs probe = {0};
    char path[1024];
    for (const char *s = strchr(o.filepath, '{'); s && probe.n < SY_LOGS_MAX;
         s = strchr(s + 1, '{')) {
        if (s[1] == '{') {
            s++;
            continue;
        }
        size_t n = strcspn(s + 1, ":}");
        if (n && n < sizeof probe.names[0] && strncmp(s + 1, "epoch", n) &&
            strncmp(s + 1, "batch", n)) {
            snprintf(probe.names[probe.n], sizeof probe.names[0], "%.*s", (int)n, s + 1);
            probe.values[probe.n++] = 0.5;
        }
    }
    sy_status st =
        keras_format_path(o.filepath, 0, o.save_freq ? 0 : -1, &probe, path, sizeof path);
    if (st) return st;
    const char *mode = o.mode ? o.mode : "auto";
    if (strcmp(mode, "auto") && strcmp(mode, "min") && strcmp(mode, "max")) {
        sy_log(SY_LOG_WARNING, "ModelCheckpoint mode %s is unknown, fallback to auto mode.", mode);
        mode = "auto";
    }
    model_checkpoint *c = sy_calloc(1, sizeof *c);
    if (!c) return sy_error(SY_ERR_OUT_OF_MEMORY, "ModelCheckpoint: out of memory");
    snprintf(c->filepath, sizeof c->filepath, "%s", o.filepath);
    snprintf(c->monitor, sizeof c->monitor, "%s", o.monitor);
    o.filepath = c->filepath;
    o.monitor = c->monitor;
    o.mode = !strcmp(mode, "min") ? "min" : !strcmp(mode, "max") ? "max" : "auto";
    c->o = o;
    c->greater =
        !strcmp(mode, "max") ||
        (!strcmp(mode, "auto") && (strstr(o.monitor, "acc") || !strncmp(o.monitor, "fmeasure", 8)));
    c->best = o.has_initial_value_threshold ? o.initial_value_threshold
              : c->greater                  ? -INFINITY
                                            : INFINITY;
    c->last_batch = -1;
    *out = (sy_callback){.ctx = c,
                         .on_train_begin = mc_train_begin,
                         .on_epoch_begin = mc_epoch_begin,
                         .on_train_batch_end = mc_batch_end,
                         .on_epoch_end = mc_epoch_end,
                         .free = sy_free};
    return SY_OK;
}

/* ---- BackupAndRestore
 * ----------------------------------------------------------------------------- */

typedef struct backup {
    char dir[1024];
    int64_t save_freq;
    bool delete_checkpoint;
    /* Keras's _batches_count: round trips since the last save, kept across fit() calls */
    int64_t batches_count;
    /* lent by fit() for its run (keras_backup_attach); NULL outside fit */
    keras_backup_save_fn save;
    void *save_ctx;
} backup;

static sy_status backup_train_begin(void *ctx, sy_model *m) {
    (void)ctx, (void)m; /* fit() restores, before any callback runs (keras_backup_of) */
    return SY_OK;
}

/* Keras's on_train_batch_end with an integer save_freq: a backup every save_freq batch-end calls
 * (a round trip of steps_per_execution steps is one), counted on from the callback's last fit() */
static sy_status backup_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)step, (void)logs;
    backup *b = ctx;
    if (!b->save_freq || ++b->batches_count < b->save_freq) return SY_OK;
    b->batches_count = 0;
    return b->save ? b->save(b->save_ctx, false) : SY_OK;
}

/* Keras's on_epoch_end with save_freq 'epoch': a backup of the epoch as done, at this callback's
 * place among the callbacks (a rate ReduceLROnPlateau sets after it is not in it) */
static sy_status backup_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m, (void)epoch, (void)logs;
    backup *b = ctx;
    return !b->save_freq && b->save ? b->save(b->save_ctx, true) : SY_OK;
}

sy_status sy_callback_backup_and_restore(const char *backup_dir, int64_t save_freq,
                                         bool delete_checkpoint, sy_callback *out) {
    if (!out)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "BackupAndRestore: no callback to fill in (out is NULL)");
    memset(out, 0, sizeof *out);
    if (!backup_dir || !*backup_dir)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "BackupAndRestore: backup_dir is empty; expected a directory");
    if (strlen(backup_dir) >= sizeof((backup *)0)->dir)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "BackupAndRestore: backup_dir is longer than %d characters",
                        (int)sizeof((backup *)0)->dir - 1);
    if (save_freq < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "BackupAndRestore: save_freq must be \"epoch\" (0) or a number of "
                        "batches >= 1, got %lld",
                        (long long)save_freq);
    backup *b = sy_calloc(1, sizeof *b);
    if (!b) return sy_error(SY_ERR_OUT_OF_MEMORY, "BackupAndRestore: out of memory");
    snprintf(b->dir, sizeof b->dir, "%s", backup_dir);
    b->save_freq = save_freq;
    b->delete_checkpoint = delete_checkpoint;
    *out = (sy_callback){.ctx = b,
                         .on_train_begin = backup_train_begin,
                         .on_train_batch_end = backup_batch_end,
                         .on_epoch_end = backup_epoch_end,
                         .free = sy_free};
    return SY_OK;
}

bool keras_backup_of(const sy_callback *cb, const char **dir, int64_t *save_freq,
                     bool *delete_checkpoint) {
    if (!cb || cb->on_train_begin != backup_train_begin || !cb->ctx) return false;
    const backup *b = cb->ctx;
    *dir = b->dir;
    *save_freq = b->save_freq;
    *delete_checkpoint = b->delete_checkpoint;
    return true;
}

void keras_backup_attach(const sy_callback *cb, keras_backup_save_fn save, void *ctx) {
    if (!cb || cb->on_train_begin != backup_train_begin || !cb->ctx) return;
    backup *b = cb->ctx;
    b->save = save;
    b->save_ctx = ctx;
}

void keras_backup_delete(const char *dir) {
    int64_t *steps = NULL;
    int32_t n = 0;
    if (ckpt_list(dir, &steps, &n) == SY_OK) {
        char path[1200];
        for (int32_t i = 0; i < n; i++) {
            ckpt_path(path, sizeof path, dir, steps[i]);
            unlink(path);
        }
    }
    sy_free(steps);
    char lock[1200];
    snprintf(lock, sizeof lock, "%s/%s", dir, CKPT_LOCK);
    unlink(lock);
    rmdir(dir); /* only if nothing else is there, as it is Keras's own directory */
}
