/*
 * callbacks.c - Keras's CSVLogger and EarlyStopping (tf.keras 2.15,
 * keras/src/callbacks.py), as sy_callback hooks that fit() calls.
 *
 * CSVLogger opens its file at train begin, so that a path that cannot be
 * written fails before any training; but like Keras's file (a GFile, which
 * opens its file at the first write) it changes nothing until the first
 * row: then the file is truncated, or with append kept, where the header
 * is written only if the file was missing or empty when training began (as
 * Keras reads its first line); a run without epochs leaves a file as it
 * was and removes the one it created. The columns are fixed at the first
 * epoch's end -- the logs'
 * names sorted by code point, and when none starts with "val_", "val_" + each
 * of them appended, so a run validating every other epoch still has its
 * columns -- and writes one row per epoch exactly as Python's
 * csv.DictWriter with the excel dialect does: "\r\n" line ends, a field
 * quoted (and its '"' doubled) when it holds the separator, '"', '\r' or
 * '\n', a missing value written NA, numbers as Python's str(float) (the
 * shortest string that reads back to the same double: keras_float_repr).
 * Each row (with the header, when it comes first) is made in memory and
 * written whole: should the write fail part way (a full disk, a file size
 * limit), the file is cut back to its length before the row, so that a
 * later --csv-append never joins its row onto a torn one; the epoch's
 * error says so. The path must be a regular file or nothing: a FIFO or a
 * directory is refused at train begin, naming it, instead of blocking or
 * being replaced. The file is closed at train end. The columns stay those
 * of the first run when the callback is reused, as Keras's do.
 *
 * EarlyStopping follows Keras's on_epoch_end step for step: the monitored
 * value missing warns (sy_log) with the names present and is skipped, as
 * are epochs before start_from_epoch; wait counts epochs since the last
 * improvement (current - min_delta beyond best, min_delta's sign set by the
 * mode); an improvement that does not also beat the baseline does not reset
 * wait; once wait >= patience (never at epoch 0) training stops, and with
 * restore_best_weights the best epoch's weights -- copied at each
 * improvement, and at the first monitored epoch -- are written back. Like
 * Keras 2.15, running out of epochs without stopping restores nothing.
 * tests/test_callbacks.c compares both with what Keras itself did
 * (tools/golden/make_callback_fixtures.py).
 *
 * TerminateOnNaN is Keras's too: after each batch (each host round trip
 * here), a "loss" in the logs that is NaN or infinite prints "Batch N:
 * Invalid loss, terminating training" and stops training after that
 * batch; fit() still ends the epoch (validation, on_epoch_end) as Keras's
 * does.
 */
#include "keras_internal.h"

#include "../io/io_internal.h" /* io_file_kind */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Python's repr of a float ------------------------------------------------------------ */

/* The shortest decimal digits that read back as a (> 0, finite; with
 * single, as the float32 a is), and the exponent with a = 0.digits * 10^decpt. Of the p-digit decimals, the
 * correctly rounded one is the nearest, so it round-trips if any does --
 * except at a power of two, whose rounding interval is narrower below than
 * above: there the next p-digit decimal up may round-trip when the nearest
 * does not, and David Gay's dtoa (Python's repr) takes it. */
static void shortest_digits(double a, bool single, char *digits, int *decpt) {
    for (int p = 1; p <= 17; p++) {
        char buf[48];
        snprintf(buf, sizeof buf, "%.*e", p - 1, a);
        /* the digits and exponent, read without the locale's decimal point */
        unsigned long long mant = 0;
        const char *c = buf;
        for (; *c && *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') mant = mant * 10 + (unsigned long long)(*c - '0');
        int e10 = atoi(c + 1) - (p - 1); /* a ~ mant * 10^e10 */
        unsigned long long candidates[3] = {mant, mant + 1, mant - 1};
        for (int k = 0; k < 3; k++) {
            char try[48];
            snprintf(try, sizeof try, "%llue%d", candidates[k], e10);
            if ((single ? (double)strtof(try, NULL) : strtod(try, NULL)) != a) continue;
            snprintf(buf, sizeof buf, "%llu", candidates[k]);
            int n = (int)strlen(buf);
            *decpt = e10 + n;
            while (n > 1 && buf[n - 1] == '0') buf[--n] = '\0';
            memcpy(digits, buf, (size_t)n + 1);
            return;
        }
    }
    SY_ASSERT(!"17 significant digits always round-trip a double");
}

/* Python's repr(float) (str() is the same): "0.5", "1e-05", "1e+16",
 * "0.30000000000000004", "100.0", "-0.0", "nan", "inf", "-inf". Fixed
 * notation while 1e-4 <= |v| < 1e16, else exponent notation with at least
 * two exponent digits. */
static char *float_repr(double v, bool single, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return buf;
    }
    if (isinf(v)) {
        snprintf(buf, size, v < 0 ? "-inf" : "inf");
        return buf;
    }
    if (v == 0) {
        snprintf(buf, size, "%s", signbit(v) ? "-0.0" : "0.0");
        return buf;
    }
    char d[24], out[48];
    int decpt, k = 0;
    shortest_digits(fabs(v), single, d, &decpt);
    int n = (int)strlen(d);
    if (signbit(v)) out[k++] = '-';
    if (decpt <= -4 || decpt > 16) { /* d.ddde-XX */
        out[k++] = d[0];
        if (n > 1) k += sprintf(out + k, ".%s", d + 1);
        k += sprintf(out + k, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
    } else if (decpt <= 0) { /* 0.000ddd */
        k += sprintf(out + k, "0.");
        for (int i = 0; i < -decpt; i++) out[k++] = '0';
        k += sprintf(out + k, "%s", d);
    } else { /* ddd.ddd, ddd00.0 */
        for (int i = 0; i < decpt; i++) out[k++] = i < n ? d[i] : '0';
        k += sprintf(out + k, ".%s", decpt < n ? d + decpt : "0");
    }
    out[k] = '\0';
    snprintf(buf, size, "%s", out);
    return buf;
}

char *keras_float_repr(double v, char *buf, size_t size) { return float_repr(v, false, buf, size); }

/* issue 19: numpy's str of an np.float32, which TensorFlow's logs print: the same notation, the
 * shortest digits that read back to the float32 ("0.55", not 0.550000011920929). */
char *keras_float32_repr(float v, char *buf, size_t size) { return float_repr(v, true, buf, size); }

/* ---- CSVLogger ---------------------------------------------------------------------------- */

#define CSV_MAX_KEYS (2 * SY_LOGS_MAX)

typedef struct csv_logger {
    char *filename;
    char sep;
    bool append;
    int fd;         /* open from train begin to train end, else -1 */
    bool created;   /* the file did not exist when this run began */
    bool header;    /* write the header with the first row of this run */
    bool started;   /* the first row of this run is written (Keras's self.writer) */
    int32_t n_keys; /* -1 until the first epoch's end fixes the columns */
    char keys[CSV_MAX_KEYS][sizeof ((sy_logs *)0)->names[0]];
} csv_logger;

static int cmp_key(const void *a, const void *b) { return strcmp(a, b); }

/* One field, quoted as csv's QUOTE_MINIMAL does. */
static void csv_field(FILE *f, const char *s, char sep) {
    bool quote = strchr(s, sep) || strpbrk(s, "\"\r\n");
    if (!quote) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static sy_status csv_train_begin(void *ctx, sy_model *m) {
    (void)m;
    csv_logger *c = ctx;
    if (c->fd >= 0) close(c->fd); /* a run before that failed without reaching its end */
    c->fd = -1;
    /* appending even without append: nothing is lost before the first row.
     * O_NONBLOCK so that a FIFO cannot block the open; fstat then refuses
     * whatever is not a regular file. */
    struct stat sb;
    bool exists = stat(c->filename, &sb) == 0;
    c->created = !exists && errno == ENOENT;
    if (exists && !S_ISREG(sb.st_mode))
        return sy_error(SY_ERR_IO, "CSVLogger: cannot write '%s': it is %s, not a regular file", c->filename,
                        io_file_kind(sb.st_mode));
    c->fd = open(c->filename, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
    if (c->fd < 0)
        return sy_error(SY_ERR_IO, "CSVLogger: cannot open '%s' for %s: %s", c->filename,
                        c->append ? "appending" : "writing", strerror(errno));
    if (fstat(c->fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(c->fd);
        c->fd = -1;
        return sy_error(SY_ERR_IO, "CSVLogger: cannot write '%s': it is %s, not a regular file", c->filename,
                        io_file_kind(sb.st_mode));
    }
    fcntl(c->fd, F_SETFL, O_APPEND);
    /* Keras (append): the header only if the file's first line is empty,
     * which (as readline() keeps the newline) means a missing or empty file */
    c->header = !c->append || sb.st_size == 0;
    c->started = false;
    return SY_OK;
}

/* Write the row (len bytes) at the file's end whole, or leave the file as
 * it was: a short write is cut back off. */
static sy_status csv_write_row(csv_logger *c, int32_t epoch, const char *row, size_t len) {
    off_t before = lseek(c->fd, 0, SEEK_END);
    size_t done = 0;
    int err = 0;
    while (done < len) {
        ssize_t w = write(c->fd, row + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            err = w < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)w;
    }
    if (!err) return SY_OK;
    bool restored = before >= 0 && (done == 0 || ftruncate(c->fd, before) == 0);
    return sy_error(SY_ERR_IO, "CSVLogger: writing epoch %d to '%s': %s (%s)", epoch, c->filename, strerror(err),
                    restored ? "the file is as it was before this row" : "a partial row may remain");
}

static sy_status csv_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m;
    csv_logger *c = ctx;
    if (c->fd < 0) return sy_error(SY_ERR_STATE, "CSVLogger '%s': epoch %d ended before training began", c->filename, epoch);
    if (c->n_keys < 0) {
        c->n_keys = 0;
        bool val = false;
        for (int32_t i = 0; i < logs->n; i++) {
            memcpy(c->keys[c->n_keys++], logs->names[i], sizeof c->keys[0]);
            val = val || strncmp(logs->names[i], "val_", 4) == 0;
        }
        qsort(c->keys, (size_t)c->n_keys, sizeof c->keys[0], cmp_key);
        for (int32_t i = 0, n = c->n_keys; !val && i < n; i++) /* "val_" + each, after the sorted names */
            snprintf(c->keys[c->n_keys++], sizeof c->keys[0], "val_%.*s", (int)sizeof c->keys[0] - 5, c->keys[i]);
    }
    char sep[2] = {c->sep, '\0'};
    if (!c->started && !c->append && ftruncate(c->fd, 0) != 0)
        return sy_error(SY_ERR_IO, "CSVLogger: cannot truncate '%s': %s", c->filename, strerror(errno));
    char *row = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&row, &len);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "CSVLogger '%s': out of memory for a row", c->filename);
    bool header = !c->started && c->header;
    if (header) {
        csv_field(f, "epoch", c->sep);
        for (int32_t i = 0; i < c->n_keys; i++) {
            fputs(sep, f);
            csv_field(f, c->keys[i], c->sep);
        }
        fputs("\r\n", f);
    }
    fprintf(f, "%d", epoch);
    for (int32_t i = 0; i < c->n_keys; i++) {
        char value[40] = "NA";
        for (int32_t j = 0; j < logs->n; j++)
            if (strcmp(logs->names[j], c->keys[i]) == 0) keras_float_repr(logs->values[j], value, sizeof value);
        fputs(sep, f);
        csv_field(f, value, c->sep);
    }
    fputs("\r\n", f);
    bool oom = ferror(f) != 0;
    if (fclose(f) != 0 || oom) {
        free(row);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "CSVLogger '%s': out of memory for a row", c->filename);
    }
    sy_status st = csv_write_row(c, epoch, row, len);
    free(row);
    if (!st) c->started = true; /* a header that did not land is written with the next row */
    return st;
}

static sy_status csv_train_end(void *ctx, sy_model *m, const sy_logs *logs) {
    (void)m, (void)logs;
    csv_logger *c = ctx;
    if (c->fd < 0) return SY_OK;
    int rc = close(c->fd);
    c->fd = -1;
    if (!c->started && c->created) remove(c->filename); /* Keras would not have made it */
    c->started = false;
    if (rc) return sy_error(SY_ERR_IO, "CSVLogger: closing '%s': %s", c->filename, strerror(errno));
    return SY_OK;
}

static void csv_free(void *ctx) {
    csv_logger *c = ctx;
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    sy_free(c->filename);
    sy_free(c);
}

sy_status sy_callback_csv_logger(const char *filename, char separator, bool append, sy_callback *out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "CSVLogger: no callback to fill in (out is NULL)");
    memset(out, 0, sizeof *out);
    if (!filename || !*filename) return sy_error(SY_ERR_INVALID_ARGUMENT, "CSVLogger: the filename is empty");
    if (separator == '\0')
        return sy_error(SY_ERR_INVALID_ARGUMENT, "CSVLogger '%s': the separator is NUL; expected a character such as ','",
                        filename);
    csv_logger *c = sy_calloc(1, sizeof *c);
    if (c) c->fd = -1;
    if (c) c->filename = sy_strdup(filename);
    if (!c || !c->filename) {
        csv_free(c);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "CSVLogger '%s': out of memory", filename);
    }
    c->sep = separator;
    c->append = append;
    c->n_keys = -1;
    *out = (sy_callback){.ctx = c,
                         .on_train_begin = csv_train_begin,
                         .on_epoch_end = csv_epoch_end,
                         .on_train_end = csv_train_end,
                         .free = csv_free};
    return SY_OK;
}

/* ---- EarlyStopping ------------------------------------------------------------------------ */

typedef struct early_stopping {
    sy_early_stopping_options o; /* o.monitor points at monitor */
    char monitor[sizeof ((sy_logs *)0)->names[0]];
    bool greater;     /* mode max */
    double min_delta; /* signed as Keras keeps it: + in max mode, - in min mode */
    sy_early_stopping_state s;
    float *best_weights; /* every weight, in order; NULL or n_best floats */
    int64_t n_best;
    bool have_best;
} early_stopping;

static FILE *es_out(const early_stopping *e) { return e->o.progress ? e->o.progress : stderr; }

static bool improves(const early_stopping *e, double value, double reference) {
    double v = value - e->min_delta;
    return e->greater ? v > reference : v < reference;
}

/* Copy every weight of m to (to_model false) or from (true) best_weights. */
static sy_status es_copy_weights(early_stopping *e, sy_model *m, bool to_model) {
    int64_t total = 0;
    int32_t n = sy_model_weight_count(m);
    for (int32_t i = 0; i < n; i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        total += sy_shape_count(&s);
    }
    if (to_model) SY_ASSERT(e->best_weights && total == e->n_best);
    if (!to_model && total != e->n_best) {
        sy_free(e->best_weights);
        e->best_weights = sy_malloc((size_t)(total ? total : 1) * sizeof(float));
        e->n_best = e->best_weights ? total : 0;
        if (!e->best_weights)
            return sy_error(SY_ERR_OUT_OF_MEMORY, "EarlyStopping: out of memory for a copy of %lld weights",
                            (long long)total);
    }
    float *p = e->best_weights;
    for (int32_t i = 0; i < n; i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        size_t bytes = (size_t)sy_shape_count(&s) * sizeof(float);
        if (to_model)
            memcpy(sy_model_weight_data(m, i), p, bytes);
        else
            memcpy(p, sy_model_weight_data(m, i), bytes);
        p += sy_shape_count(&s);
    }
    e->have_best = true;
    return SY_OK;
}

static sy_status es_train_begin(void *ctx, sy_model *m) {
    (void)m;
    early_stopping *e = ctx;
    e->s.wait = 0;
    e->s.stopped_epoch = 0;
    e->s.best = e->greater ? -INFINITY : INFINITY;
    e->s.best_epoch = 0;
    e->have_best = false;
    return SY_OK;
}

static sy_status es_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    early_stopping *e = ctx;
    int32_t at = -1;
    for (int32_t i = 0; i < logs->n && at < 0; i++)
        if (strcmp(logs->names[i], e->monitor) == 0) at = i;
    if (at < 0) {
        char names[SY_LOGS_MAX * sizeof logs->names[0]];
        sy_log(SY_LOG_WARNING,
               "Early stopping conditioned on metric `%s` which is not available. Available metrics are: %s",
               e->monitor, logs_names_joined(logs, names, sizeof names));
        return SY_OK;
    }
    if (epoch < e->o.start_from_epoch) return SY_OK;
    double current = logs->values[at];
    sy_status st;
    /* the first monitored epoch's weights, in case nothing ever improves */
    if (e->o.restore_best_weights && !e->have_best && (st = es_copy_weights(e, m, false))) return st;
    e->s.wait++;
    if (improves(e, current, e->s.best)) {
        e->s.best = current;
        e->s.best_epoch = epoch;
        if (e->o.restore_best_weights && (st = es_copy_weights(e, m, false))) return st;
        /* wait restarts only when the baseline is beaten too */
        if (!e->o.has_baseline || improves(e, current, e->o.baseline)) e->s.wait = 0;
        return SY_OK;
    }
    if (e->s.wait >= e->o.patience && epoch > 0) {
        e->s.stopped_epoch = epoch;
        sy_model_stop_training(m);
        if (e->o.restore_best_weights && e->have_best) {
            if (e->o.verbose > 0) {
                fprintf(es_out(e), "Restoring model weights from the end of the best epoch: %d.\n", e->s.best_epoch + 1);
                fflush(es_out(e));
            }
            return es_copy_weights(e, m, true);
        }
    }
    return SY_OK;
}

static sy_status es_train_end(void *ctx, sy_model *m, const sy_logs *logs) {
    (void)m, (void)logs;
    early_stopping *e = ctx;
    if (e->s.stopped_epoch > 0 && e->o.verbose > 0) {
        fprintf(es_out(e), "Epoch %d: early stopping\n", e->s.stopped_epoch + 1);
        fflush(es_out(e));
    }
    return SY_OK;
}

static void es_free(void *ctx) {
    early_stopping *e = ctx;
    if (!e) return;
    sy_free(e->best_weights);
    sy_free(e);
}

sy_early_stopping_options sy_early_stopping_options_default(void) {
    return (sy_early_stopping_options){.monitor = "val_loss", .mode = "auto"};
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

sy_status sy_callback_early_stopping(const sy_early_stopping_options *options, sy_callback *out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: no callback to fill in (out is NULL)");
    memset(out, 0, sizeof *out);
    sy_early_stopping_options o = options ? *options : sy_early_stopping_options_default();
    if (!o.monitor || !*o.monitor)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: monitor is empty; expected a name from the logs "
                                                 "such as \"val_loss\" or \"val_accuracy\"");
    if (strlen(o.monitor) >= sizeof ((early_stopping *)0)->monitor)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: monitor '%s' is longer than any log name (%d characters)",
                        o.monitor, (int)sizeof ((early_stopping *)0)->monitor - 1);
    const char *mode = o.mode ? o.mode : "auto";
    if (strcmp(mode, "auto") && strcmp(mode, "min") && strcmp(mode, "max"))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: mode '%s' is unknown; expected auto, min or max", mode);
    if (o.patience < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: patience must be >= 0 epochs, got %d", o.patience);
    if (o.start_from_epoch < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: start_from_epoch must be >= 0, got %d",
                        o.start_from_epoch);
    if (o.verbose < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: verbose must be 0 or 1, got %d", o.verbose);
    if (!isfinite(o.min_delta))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: min_delta must be a finite number, got %g", o.min_delta);
    if (o.has_baseline && isnan(o.baseline))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "EarlyStopping: baseline is NaN; expected a number (or no baseline)");
    early_stopping *e = sy_calloc(1, sizeof *e);
    if (!e) return sy_error(SY_ERR_OUT_OF_MEMORY, "EarlyStopping: out of memory");
    snprintf(e->monitor, sizeof e->monitor, "%s", o.monitor);
    o.monitor = e->monitor;
    o.mode = !strcmp(mode, "min") ? "min" : !strcmp(mode, "max") ? "max" : "auto";
    e->o = o;
    e->greater = !strcmp(mode, "max") || (!strcmp(mode, "auto") && (ends_with(o.monitor, "acc") ||
                                                                     ends_with(o.monitor, "accuracy") ||
                                                                     ends_with(o.monitor, "auc")));
    e->min_delta = e->greater ? fabs(o.min_delta) : -fabs(o.min_delta);
    e->s.best = e->greater ? -INFINITY : INFINITY;
    *out = (sy_callback){.ctx = e,
                         .on_train_begin = es_train_begin,
                         .on_epoch_end = es_epoch_end,
                         .on_train_end = es_train_end,
                         .free = es_free};
    return SY_OK;
}

sy_status sy_callback_early_stopping_state(const sy_callback *cb, sy_early_stopping_state *out) {
    if (!cb || cb->on_epoch_end != es_epoch_end || !cb->ctx)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "EarlyStopping state: the callback was not made by sy_callback_early_stopping");
    *out = ((const early_stopping *)cb->ctx)->s;
    return SY_OK;
}

/* ---- TerminateOnNaN ------------------------------------------------------------- */

/* Keras's on_batch_end: a loss in the logs that is NaN or infinite stops
 * training after this batch, with Keras's message. */
static sy_status tn_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    FILE *out = ctx ? ctx : stderr;
    for (int32_t i = 0; i < logs->n; i++)
        if (!strcmp(logs->names[i], "loss") && !isfinite(logs->values[i])) {
            fprintf(out, "Batch %lld: Invalid loss, terminating training\n", (long long)step);
            fflush(out);
            sy_model_stop_training(m);
        }
    return SY_OK;
}

sy_status sy_callback_terminate_on_nan(FILE *progress, sy_callback *out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "TerminateOnNaN: no callback to fill in (out is NULL)");
    *out = (sy_callback){.ctx = progress, .on_train_batch_end = tn_batch_end};
    return SY_OK;
}
