/*
 * test_callbacks.c - CSVLogger and EarlyStopping against what tf.keras 2.15
 * did with the same logs (tests/data/callbacks, written by
 * tools/golden/make_callback_fixtures.py, which drove Keras's own
 * callbacks on a real Keras model):
 *
 *   - every EarlyStopping case (patience, min_delta, modes and the names
 *     auto reads as accuracies, baseline, restore_best_weights,
 *     start_from_epoch, a missing monitor, NaN and inf, initial_epoch, a
 *     reused callback) runs here on a real model whose weights are set to
 *     a per-epoch marker before each epoch's end, as in the script: the
 *     epochs that ran, stopped_epoch, best, best_epoch, wait, whose weights
 *     the model holds at the end, the verbose lines and the warnings must
 *     all be Keras's;
 *   - every CSVLogger case (columns, NA, val_ columns added, append with
 *     and without content, separators that force quoting, reuse) must
 *     leave the file Keras left, byte for byte;
 *   - Python's repr of 4,000 doubles (every power of two among them);
 *   - the refusals, an unwritable CSV path, and a real fit() that early
 *     stopping ends before its last epoch, restoring the best weights,
 *     with a CSV log whose rows are the history's values exactly.
 */
#define _GNU_SOURCE
#include "files.h"

#include "check.h"
#include "keras/keras_internal.h"
#include "synthetic.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* A whole file, NUL-terminated (NULL if it cannot be read); *n its size. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *p = malloc(cap);
    for (size_t got; (got = fread(p + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (cap - len < 2) p = realloc(p, cap *= 2);
    }
    fclose(f);
    p[len] = '\0';
    if (n) *n = len;
    return p;
}

static char *slurp_stream(FILE *f) {
    fflush(f);
    long n = ftell(f);
    char *p = calloc(1, (size_t)n + 1);
    rewind(f);
    if (n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n) p[0] = '\0';
    return p;
}

/* ---- the fixtures' lines -------------------------------------------------------------------- */

typedef struct lines {
    char *text;
    char **at;
    int n, i;
} lines;

static bool lines_open(lines *l, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/callbacks/%s", fixture_dir, name);
    memset(l, 0, sizeof *l);
    l->text = slurp(path, NULL);
    CHECK(l->text != NULL, "the fixture %s (tools/golden/make_callback_fixtures.py) cannot be read", path);
    if (!l->text) return false;
    int cap = 1024;
    l->at = malloc((size_t)cap * sizeof *l->at);
    for (char *s = l->text, *e; *s; s = e + 1) {
        e = strchr(s, '\n');
        SY_ASSERT(e);
        *e = '\0';
        if (l->n == cap) l->at = realloc(l->at, (size_t)(cap *= 2) * sizeof *l->at);
        l->at[l->n++] = s;
    }
    return true;
}

static void lines_close(lines *l) {
    free(l->text);
    free(l->at);
}

/* The next line if it starts with `word` and a space (or is `word`): the
 * text after them; else NULL. */
static const char *take(lines *l, const char *word) {
    if (l->i >= l->n) return NULL;
    const char *s = l->at[l->i];
    size_t k = strlen(word);
    if (strncmp(s, word, k) || (s[k] && s[k] != ' ')) return NULL;
    l->i++;
    return s[k] ? s + k + 1 : s + k;
}

/* "epoch N name=value ..." into logs, in order. */
static int32_t parse_epoch(const char *s, sy_logs *logs) {
    char *end;
    int32_t epoch = (int32_t)strtol(s, &end, 10);
    memset(logs, 0, sizeof *logs);
    for (char *p = end; *p == ' ';) {
        char *eq = strchr(++p, '=');
        SY_ASSERT(eq && eq - p < 48);
        char name[48];
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        logs_set(logs, name, strtod(eq + 1, &p));
    }
    return epoch;
}

/* ---- a real model whose weights say which epoch set them ------------------------------------ */

/* Every weight = epoch + 1 + index / 1000 (float32 arithmetic, as the
 * script's numpy). */
static void set_marker(sy_model *m, int32_t epoch) {
    for (int32_t w = 0; w < sy_model_weight_count(m); w++) {
        sy_shape s = sy_model_weight_shape(m, w);
        float *d = sy_model_weight_data(m, w);
        for (int64_t i = 0; i < sy_shape_count(&s); i++) d[i] = (float)(epoch + 1) + (float)i / 1000.0f;
    }
}

/* The epoch whose marker the weights hold; -1 for none. */
static int32_t marker_epoch(sy_model *m) {
    int32_t e = (int32_t)lround(sy_model_weight_data(m, 0)[0] - 1.0);
    for (int32_t w = 0; w < sy_model_weight_count(m); w++) {
        sy_shape s = sy_model_weight_shape(m, w);
        const float *d = sy_model_weight_data(m, w);
        for (int64_t i = 0; i < sy_shape_count(&s); i++)
            if (d[i] != (float)(e + 1) + (float)i / 1000.0f) return -1;
    }
    return e;
}

/* Warnings sy_log gave, one per line. */
static char warnings[8192];

static void capture_warning(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level != SY_LOG_WARNING) return;
    size_t n = strlen(warnings);
    snprintf(warnings + n, sizeof warnings - n, "%s\n", message);
}

/* ---- EarlyStopping ------------------------------------------------------------------------ */

static void early_stopping_option(sy_early_stopping_options *o, const char *s, char *monitor, char *mode) {
    char key[32], value[64];
    SY_ASSERT(sscanf(s, "%31s %63s", key, value) == 2);
    bool t = !strcmp(value, "True");
    if (!strcmp(key, "monitor")) o->monitor = strcpy(monitor, value);
    else if (!strcmp(key, "mode")) o->mode = strcpy(mode, value);
    else if (!strcmp(key, "min_delta")) o->min_delta = strtod(value, NULL);
    else if (!strcmp(key, "patience")) o->patience = atoi(value);
    else if (!strcmp(key, "verbose")) o->verbose = atoi(value);
    else if (!strcmp(key, "baseline")) o->has_baseline = true, o->baseline = strtod(value, NULL);
    else if (!strcmp(key, "restore_best_weights")) o->restore_best_weights = t;
    else if (!strcmp(key, "start_from_epoch")) o->start_from_epoch = atoi(value);
    else SY_ASSERT(!"an option the fixture script does not write");
}

static bool same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* One run ("train" ... up to the next "train" or "end") of case `name`. */
static void early_stopping_run(lines *l, const char *name, int run, sy_callback *cb, sy_model *m, FILE *progress) {
    sy_logs logs[32];
    int32_t epochs[32], n = 0;
    for (const char *s; (s = take(l, "epoch"));) {
        SY_ASSERT(n < 32);
        epochs[n] = parse_epoch(s, &logs[n]);
        n++;
    }
    char ran[256] = "", *r = ran;
    warnings[0] = '\0';
    CHECK(ftruncate(fileno(progress), 0) == 0, "the verbose output's temporary file can be emptied");
    rewind(progress);
    sy_set_log(capture_warning, NULL);
    m->stop_training = false;
    CHECK_OK(cb->on_train_begin(cb->ctx, m));
    for (int i = 0; i < n; i++) {
        set_marker(m, epochs[i]);
        CHECK_OK(cb->on_epoch_end(cb->ctx, m, epochs[i], &logs[i]));
        r += sprintf(r, "%s%d", i ? " " : "", epochs[i]);
        if (m->stop_training) break;
    }
    CHECK_OK(cb->on_train_end(cb->ctx, m, n ? &logs[n - 1] : &logs[0]));
    sy_set_log(NULL, NULL);
    sy_early_stopping_state st = {0};
    CHECK_OK(sy_callback_early_stopping_state(cb, &st));

    const char *s = take(l, "ran");
    CHECK(s && !strcmp(s, ran), "%s, run %d: the epochs run: Keras %s, here %s", name, run, s ? s : "?", ran);
    char want_warnings[8192] = "", want_print[4096] = "";
    for (; (s = take(l, "result"));) {
        char key[32];
        double v;
        SY_ASSERT(sscanf(s, "%31s", key) == 1);
        v = strtod(s + strlen(key) + 1, NULL);
        double got = !strcmp(key, "stopped_epoch")   ? st.stopped_epoch
                     : !strcmp(key, "best")          ? st.best
                     : !strcmp(key, "best_epoch")    ? st.best_epoch
                     : !strcmp(key, "wait")          ? st.wait
                     : !strcmp(key, "weights_epoch") ? marker_epoch(m)
                                                     : NAN;
        CHECK(same_double(got, v), "%s, run %d: %s: Keras %.17g, here %.17g", name, run, key, v, got);
    }
    for (; (s = take(l, "print"));) snprintf(want_print + strlen(want_print), sizeof want_print - strlen(want_print), "%s\n", s);
    for (; (s = take(l, "warning"));)
        snprintf(want_warnings + strlen(want_warnings), sizeof want_warnings - strlen(want_warnings), "%s\n", s);
    char *printed = slurp_stream(progress);
    CHECK(!strcmp(printed, want_print), "%s, run %d: verbose output: Keras\n%s--- here\n%s---", name, run, want_print,
          printed);
    CHECK(!strcmp(warnings, want_warnings), "%s, run %d: warnings: Keras\n%s--- here\n%s---", name, run, want_warnings,
          warnings);
    free(printed);
}

static void test_early_stopping_golden(void) {
    lines l;
    if (!lines_open(&l, "early_stopping.txt")) return;
    sy_model *m = make_mlp(NULL, 1, 5, false, 1);
    FILE *progress = tmpfile();
    int cases = 0;
    for (const char *name; (name = take(&l, "case"));) {
        char case_name[64], monitor[64], mode[16];
        snprintf(case_name, sizeof case_name, "%s", name);
        sy_early_stopping_options o = sy_early_stopping_options_default();
        for (const char *s; (s = take(&l, "option"));) early_stopping_option(&o, s, monitor, mode);
        o.progress = progress;
        sy_callback cb;
        CHECK_OK(sy_callback_early_stopping(&o, &cb));
        for (int run = 1; take(&l, "train"); run++) early_stopping_run(&l, case_name, run, &cb, m, progress);
        sy_callback_free(&cb);
        CHECK(take(&l, "end") != NULL, "early_stopping.txt: case %s: line %d unexpected", case_name, l.i + 1);
        if (l.i < l.n && strncmp(l.at[l.i], "case ", 5)) break;
        cases++;
    }
    CHECK(cases >= 35 && l.i == l.n, "every case of early_stopping.txt read (%d cases, stopped at line %d of %d)", cases,
          l.i + 1, l.n);
    fclose(progress);
    sy_model_free(m);
    lines_close(&l);
}

/* ---- CSVLogger ---------------------------------------------------------------------------- */

static void test_csv_logger_golden(void) {
    lines l;
    if (!lines_open(&l, "csv_logger.txt")) return;
    int cases = 0;
    for (const char *name; (name = take(&l, "case"));) {
        char case_name[64], path[1024], want_path[1024];
        snprintf(case_name, sizeof case_name, "%s", name);
        in_tmp(path, sizeof path, case_name);
        snprintf(want_path, sizeof want_path, "%s/callbacks/%s.csv", fixture_dir, case_name);
        const char *sep = take(&l, "option separator"), *append = take(&l, "option append"),
                   *before = take(&l, "option before");
        SY_ASSERT(sep && append && before);
        remove(path);
        if (strcmp(before, "none")) { /* hex, or "-": an empty file */
            FILE *f = fopen(path, "wb");
            for (const char *h = before; strcmp(before, "-") && *h; h += 2) {
                unsigned byte;
                SY_ASSERT(sscanf(h, "%2x", &byte) == 1);
                fputc((int)byte, f);
            }
            fclose(f);
        }
        sy_callback cb;
        CHECK_OK(sy_callback_csv_logger(path, (char)atoi(sep), atoi(append) != 0, &cb));
        while (take(&l, "train")) {
            CHECK_OK(cb.on_train_begin(cb.ctx, NULL));
            sy_logs logs = {0};
            for (const char *s; (s = take(&l, "epoch"));) {
                int32_t epoch = parse_epoch(s, &logs);
                CHECK_OK(cb.on_epoch_end(cb.ctx, NULL, epoch, &logs));
            }
            CHECK_OK(cb.on_train_end(cb.ctx, NULL, &logs));
        }
        sy_callback_free(&cb);
        CHECK(take(&l, "end") != NULL, "csv_logger.txt: case %s: line %d unexpected", case_name, l.i + 1);
        size_t n_got = 0, n_want = 0;
        char *got = slurp(path, &n_got), *want = slurp(want_path, &n_want);
        CHECK((!got && !want) || (got && want && n_got == n_want && !memcmp(got, want, n_got)),
              "%s: the CSV file differs from Keras's (%s):\n--- Keras\n%s--- here\n%s---", case_name, want_path,
              want ? want : "(none)", got ? got : "(none)");
        free(got);
        free(want);
        cases++;
    }
    CHECK(cases >= 20 && l.i == l.n, "every case of csv_logger.txt read (%d cases, stopped at line %d of %d)", cases,
          l.i + 1, l.n);
    lines_close(&l);
}

static void test_float_repr_golden(void) {
    lines l;
    if (!lines_open(&l, "float_repr.txt")) return;
    int wrong = 0;
    for (int i = 0; i < l.n; i++) {
        unsigned long long bits;
        char want[64], got[40];
        SY_ASSERT(sscanf(l.at[i], "%llx %63s", &bits, want) == 2);
        double v;
        memcpy(&v, &bits, sizeof v);
        keras_float_repr(v, got, sizeof got);
        if (strcmp(got, want) && wrong++ < 10) CHECK(false, "repr of %016llx: Python %s, here %s", bits, want, got);
    }
    CHECK(wrong == 0 && l.n > 4000, "Python's repr of %d doubles: %d differ", l.n, wrong);
    lines_close(&l);
}

/* ---- refusals and errors ------------------------------------------------------------------ */

static void test_refusals(void) {
    sy_callback cb;
    sy_early_stopping_options o = sy_early_stopping_options_default();
    o.mode = "maximum";
    CHECK_ERR(sy_callback_early_stopping(&o, &cb), SY_ERR_INVALID_ARGUMENT, "mode 'maximum'", "auto, min or max");
    o = sy_early_stopping_options_default();
    o.patience = -1;
    CHECK_ERR(sy_callback_early_stopping(&o, &cb), SY_ERR_INVALID_ARGUMENT, "patience", "-1");
    o = sy_early_stopping_options_default();
    o.monitor = "";
    CHECK_ERR(sy_callback_early_stopping(&o, &cb), SY_ERR_INVALID_ARGUMENT, "monitor");
    o = sy_early_stopping_options_default();
    o.start_from_epoch = -2;
    CHECK_ERR(sy_callback_early_stopping(&o, &cb), SY_ERR_INVALID_ARGUMENT, "start_from_epoch", "-2");
    o = sy_early_stopping_options_default();
    o.min_delta = NAN;
    CHECK_ERR(sy_callback_early_stopping(&o, &cb), SY_ERR_INVALID_ARGUMENT, "min_delta");
    o = sy_early_stopping_options_default();
    o.has_baseline = true;
    o.baseline = NAN;
    CHECK_ERR(sy_callback_early_stopping(&o, &cb), SY_ERR_INVALID_ARGUMENT, "baseline");
    CHECK_ERR(sy_callback_csv_logger("", ',', false, &cb), SY_ERR_INVALID_ARGUMENT, "filename");
    CHECK_ERR(sy_callback_csv_logger("log.csv", '\0', false, &cb), SY_ERR_INVALID_ARGUMENT, "log.csv", "separator");

    CHECK_OK(sy_callback_csv_logger("log.csv", ',', false, &cb));
    sy_early_stopping_state st;
    CHECK_ERR(sy_callback_early_stopping_state(&cb, &st), SY_ERR_INVALID_ARGUMENT, "sy_callback_early_stopping");
    sy_callback_free(&cb);
    sy_callback_free(&cb); /* freed twice, or never made: nothing happens */
    sy_callback_free(NULL);

    /* a path that cannot be written: refused at train begin, naming it */
    char path[1024];
    in_tmp(path, sizeof path, "no_such_dir/log.csv");
    CHECK_OK(sy_callback_csv_logger(path, ',', false, &cb));
    CHECK_ERR(cb.on_train_begin(cb.ctx, NULL), SY_ERR_IO, path, "No such file or directory");
    sy_callback_free(&cb);
    CHECK_OK(sy_callback_csv_logger(path, ',', true, &cb));
    CHECK_ERR(cb.on_train_begin(cb.ctx, NULL), SY_ERR_IO, path, "appending");
    sy_callback_free(&cb);

    /* ... and fit() returns that error before training */
    sy_model *m = make_mlp(NULL, 3, 5, false, 1);
    sy_tensor *x, *y;
    make_data(64, &x, &y, 4);
    CHECK_OK(sy_callback_csv_logger(path, ',', false, &cb));
    sy_fit_options f = sy_fit_options_default();
    f.verbose = 0;
    f.callbacks = &cb;
    f.n_callbacks = 1;
    sy_history *h = NULL;
    CHECK_ERR(sy_model_fit(m, x, y, &f, &h), SY_ERR_IO, "CSVLogger", path);
    CHECK(sy_model_iterations(m) == 0, "no step runs when the CSV log cannot be opened (%lld)",
          (long long)sy_model_iterations(m));
    sy_history_free(h);
    sy_callback_free(&cb);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_model_free(m);
}

/* ---- a real fit() ------------------------------------------------------------------------- */

typedef struct weights_at {
    int32_t epoch;
    float w[256];
    int64_t n;
} weights_at;

/* Keeps the weights as they were at the end of epoch `epoch`. */
static sy_status keep_weights(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)logs;
    weights_at *k = ctx;
    if (epoch != k->epoch) return SY_OK;
    k->n = 0;
    for (int32_t w = 0; w < sy_model_weight_count(m); w++) {
        sy_shape s = sy_model_weight_shape(m, w);
        SY_ASSERT(k->n + sy_shape_count(&s) <= 256);
        memcpy(k->w + k->n, sy_model_weight_data(m, w), (size_t)sy_shape_count(&s) * sizeof(float));
        k->n += sy_shape_count(&s);
    }
    return SY_OK;
}

static bool weights_equal(sy_model *m, const weights_at *k) {
    int64_t at = 0;
    for (int32_t w = 0; w < sy_model_weight_count(m); w++) {
        sy_shape s = sy_model_weight_shape(m, w);
        if (memcmp(k->w + at, sy_model_weight_data(m, w), (size_t)sy_shape_count(&s) * sizeof(float))) return false;
        at += sy_shape_count(&s);
    }
    return at == k->n;
}

static void test_fit(void) {
    sy_model *m = make_mlp(NULL, 7, 5, false, 1);
    sy_tensor *x, *y, *xv, *yv;
    make_data(256, &x, &y, 8);
    make_data(64, &xv, &yv, 9);
    char path[1024];
    in_tmp(path, sizeof path, "fit.csv");

    /* val_loss improves by less than min_delta = 100 after the first epoch,
     * so with patience 2 training stops after the third of 8 epochs and the
     * first epoch's weights come back */
    weights_at first = {.epoch = 0};
    sy_callback cbs[3];
    cbs[0] = (sy_callback){.ctx = &first, .on_epoch_end = keep_weights};
    CHECK_OK(sy_callback_csv_logger(path, ';', false, &cbs[1]));
    sy_early_stopping_options o = sy_early_stopping_options_default();
    o.min_delta = 100;
    o.patience = 2;
    o.restore_best_weights = true;
    o.verbose = 1;
    FILE *progress = tmpfile();
    o.progress = progress;
    CHECK_OK(sy_callback_early_stopping(&o, &cbs[2]));
    sy_fit_options f = sy_fit_options_default();
    f.epochs = 8;
    f.batch_size = 32;
    f.x_val = xv;
    f.y_val = yv;
    f.verbose = 0;
    f.callbacks = cbs;
    f.n_callbacks = 3;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &f, &h));
    sy_early_stopping_state st = {0};
    CHECK_OK(sy_callback_early_stopping_state(&cbs[2], &st));
    CHECK(h && sy_history_epochs(h) == 3 && st.stopped_epoch == 2 && st.best_epoch == 0,
          "early stopping ends fit after 3 of 8 epochs (%d epochs, stopped_epoch %d, best_epoch %d)",
          h ? sy_history_epochs(h) : -1, st.stopped_epoch, st.best_epoch);
    CHECK(weights_equal(m, &first), "restore_best_weights: the weights are those at the end of epoch 1");
    char *printed = slurp_stream(progress);
    CHECK(!strcmp(printed, "Restoring model weights from the end of the best epoch: 1.\nEpoch 3: early stopping\n"),
          "the verbose messages, as Keras words them: %s", printed);
    free(printed);
    fclose(progress);

    /* the CSV: Keras's header, one row per epoch, each value the history's exactly */
    char *csv = slurp(path, NULL);
    CHECK(csv && !strncmp(csv, "epoch;accuracy;loss;val_accuracy;val_loss\r\n", 43), "the CSV header: %s",
          csv ? csv : "(none)");
    const char *names[] = {"accuracy", "loss", "val_accuracy", "val_loss"};
    int rows = 0;
    for (char *line = csv ? strstr(csv, "\r\n") + 2 : NULL; line && *line && h; rows++) {
        char *end = strstr(line, "\r\n");
        CHECK(end != NULL, "row %d ends with \\r\\n", rows);
        if (!end) break;
        *end = '\0';
        char *p = line, *q;
        CHECK(strtol(p, &q, 10) == sy_history_epoch(h, rows) && *q == ';', "row %d: the epoch: %s", rows, line);
        for (int k = 0; k < 4 && rows < sy_history_epochs(h); k++) {
            double v = strtod(q + 1, &q);
            CHECK(v == sy_logs_get(sy_history_logs(h, rows), names[k]), "row %d, %s: %.17g, history %.17g", rows,
                  names[k], v, sy_logs_get(sy_history_logs(h, rows), names[k]));
        }
        CHECK(*q == '\0', "row %d has 5 fields: %s", rows, line);
        line = end + 2;
    }
    CHECK(h && rows == sy_history_epochs(h), "one CSV row per epoch run (%d rows)", rows);
    free(csv);
    sy_history_free(h);

    /* appending: a second fit() adds its rows under the first's, no header */
    sy_callback_free(&cbs[1]);
    CHECK_OK(sy_callback_csv_logger(path, ';', true, &cbs[1]));
    f.callbacks = &cbs[1];
    f.n_callbacks = 1;
    f.epochs = 2;
    CHECK_OK(sy_model_fit(m, x, y, &f, &h));
    csv = slurp(path, NULL);
    int headers = 0, lines_n = 0;
    for (char *p = csv; p && (p = strstr(p, "\r\n")); p += 2) lines_n++;
    for (char *p = csv; p && (p = strstr(p, "epoch;")); p++) headers++;
    CHECK(headers == 1 && lines_n == 1 + 3 + 2, "append: one header and 5 rows (%d headers, %d lines)", headers,
          lines_n);
    free(csv);
    sy_history_free(h);

    for (int i = 0; i < 3; i++) sy_callback_free(&cbs[i]);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(xv);
    sy_tensor_free(yv);
    sy_model_free(m);
}

/* Rows are written whole or not at all: a row that does not fit (a full
 * disk; here a file size limit that stops the write part way, as a full
 * disk does) leaves the file as it was, so the next row (this run's, or a
 * later --csv-append run's) starts on a line of its own. A FIFO at the
 * path is refused at train begin instead of blocking. */
static void test_csv_logger_whole_rows(void) {
    char path[1024];
    in_tmp(path, sizeof path, "torn.csv");
    remove(path);
    sy_logs logs = {.n = 2, .names = {"loss", "accuracy"}, .values = {39.536529541015625, 0.125}};
    sy_callback cb;
    CHECK_OK(sy_callback_csv_logger(path, ',', true, &cb));
    CHECK_OK(cb.on_train_begin(cb.ctx, NULL));
    CHECK_OK(cb.on_epoch_end(cb.ctx, NULL, 0, &logs));
    size_t before_n = 0;
    char *before = slurp(path, &before_n);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    lim = old;
    lim.rlim_cur = (rlim_t)before_n + 5; /* room for "1,39." and no more */
    void (*handler)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    CHECK_ERR(cb.on_epoch_end(cb.ctx, NULL, 1, &logs), SY_ERR_IO, path, "epoch 1", "as it was before this row");
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0, "setrlimit back");
    signal(SIGXFSZ, handler);
    size_t after_n = 0;
    char *after = slurp(path, &after_n);
    CHECK(before && after && after_n == before_n && !memcmp(before, after, before_n),
          "a row that did not fit left %zu bytes where there were %zu: %s", after_n, before_n, after ? after : "");
    free(after);
    CHECK_OK(cb.on_epoch_end(cb.ctx, NULL, 2, &logs));
    CHECK_OK(cb.on_train_end(cb.ctx, NULL, &logs));
    after = slurp(path, NULL);
    CHECK(after && !strcmp(after, "epoch,accuracy,loss,val_accuracy,val_loss\r\n"
                              "0,0.125,39.536529541015625,NA,NA\r\n2,0.125,39.536529541015625,NA,NA\r\n"),
          "after a failed row the next is whole, on its own line: %s", after ? after : "(none)");
    free(before);
    free(after);
    sy_callback_free(&cb);

    in_tmp(path, sizeof path, "fifo.csv");
    remove(path);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    CHECK_OK(sy_callback_csv_logger(path, ',', true, &cb));
    CHECK_ERR(cb.on_train_begin(cb.ctx, NULL), SY_ERR_IO, path, "it is a FIFO, not a regular file");
    sy_callback_free(&cb);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is left as it was");
    remove(path);
}

int main(void) {
    if (!files_setup("test_callbacks", __FILE__)) return 1;
    test_float_repr_golden();
    test_csv_logger_golden();
    test_csv_logger_whole_rows();
    test_early_stopping_golden();
    test_refusals();
    test_fit();
    files_cleanup();
    return check_report("test_callbacks");
}
