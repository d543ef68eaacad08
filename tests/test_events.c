/*
 * test_events.c - TensorBoard event files (src/io/events.c) and Keras's
 * TensorBoard callback (src/keras/tensorboard.c):
 *
 *   - the bytes: every record of an event file TensorFlow 2.15 wrote
 *     (tests/data/events, tools/tensorboard_fixtures.py) comes out the same
 *     from systolic's writer given the same wall time, tag, step and value,
 *     and files are named as TensorFlow names them;
 *   - the callback during real fits of a small model: the files read back
 *     with the TFRecord reader and protobuf-c hold the file_version record
 *     first, then Keras's tags (epoch_*, evaluation_*_vs_iterations,
 *     batch_*) at Keras's steps with the values of the fit's history and of
 *     the logs the batch hooks saw; a new file per fit; no validation/
 *     without validation; steps_per_execution;
 *   - mistakes and failures: a log dir that is a file or lies under one, a
 *     negative update_freq, a file that cannot grow (RLIMIT_FSIZE, as a
 *     full disk), an unwritable directory; each a clear error naming the
 *     path, and no existing file touched.
 * (TensorBoard's own reader reads what `systolic train --logdir` writes in
 * tests/tensorboard_reader.sh.)
 */
#define _GNU_SOURCE
#include "check.h"
#include "files.h"
#include "synthetic.h"
#include "systolic.h"

#include "io/io_internal.h"
#include "tensorflow/core/util/event.pb-c.h"

#include <dirent.h>
#include <regex.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading event files back ------------------------------------------------------ */

typedef struct rec {
    double wall_time;
    int64_t step;
    bool version; /* the file_version record */
    char tag[160];
    float value;
} rec;

typedef struct recs {
    rec r[256];
    int n;
} recs;

/* Every record of the event file at path, decoded; false (with a failed
 * check) when a record is not a first-version or scalar Event as
 * TensorFlow writes them. */
static bool read_events(const char *path, recs *out) {
    out->n = 0;
    sy_tfrecord_reader *r;
    CHECK_OK(sy_tfrecord_reader_open(path, NULL, &r));
    if (!r) return false;
    bool ok = true;
    for (;;) {
        const uint8_t *data;
        size_t n;
        bool end;
        sy_status st = sy_tfrecord_read(r, &data, &n, &end);
        CHECK_OK(st);
        if (st || end) {
            ok = !st;
            break;
        }
        Tensorflow__Event *e = tensorflow__event__unpack(NULL, n, data);
        CHECK(e, "%s: record %d is not an Event", path, out->n);
        if (!e || out->n == (int)(sizeof out->r / sizeof out->r[0])) {
            ok = false;
            tensorflow__event__free_unpacked(e, NULL);
            break;
        }
        rec *x = &out->r[out->n++];
        memset(x, 0, sizeof *x);
        x->wall_time = e->wall_time;
        x->step = e->step;
        if (e->what_case == TENSORFLOW__EVENT__WHAT_FILE_VERSION) {
            x->version = true;
            CHECK(!strcmp(e->file_version, "brain.Event:2"), "%s: file_version '%s'", path,
                  e->file_version);
            CHECK(e->source_metadata &&
                      !strcmp(e->source_metadata->writer, "tensorflow.core.util.events_writer"),
                  "%s: the first event names its writer", path);
        } else if (e->what_case == TENSORFLOW__EVENT__WHAT_SUMMARY && e->summary->n_value == 1) {
            Tensorflow__Summary__Value *v = e->summary->value[0];
            snprintf(x->tag, sizeof x->tag, "%s", v->tag);
            CHECK(v->metadata && v->metadata->plugin_data &&
                      !strcmp(v->metadata->plugin_data->plugin_name, "scalars"),
                  "%s: '%s' is for the scalars plugin", path, v->tag);
            bool scalar = v->value_case == TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR &&
                          v->tensor->dtype == TENSORFLOW__DATA_TYPE__DT_FLOAT &&
                          v->tensor->tensor_shape && v->tensor->tensor_shape->n_dim == 0 &&
                          v->tensor->tensor_content.len == 4;
            CHECK(scalar, "%s: '%s' is a DT_FLOAT scalar tensor", path, v->tag);
            if (scalar) {
                const uint8_t *c = v->tensor->tensor_content.data;
                uint32_t bits = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
                                (uint32_t)c[3] << 24;
                memcpy(&x->value, &bits, 4);
            }
        } else {
            CHECK(false, "%s: record %d is neither the file version nor one scalar", path,
                  out->n - 1);
        }
        tensorflow__event__free_unpacked(e, NULL);
    }
    sy_tfrecord_reader_close(r);
    return ok;
}

/* The event files in dir, sorted by name (TensorBoard's order); returns
 * how many (up to max). */
static int event_files(const char *dir, char names[][1024], int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, "tfevents") && n < max)
            snprintf(names[n++], 1024, "%s/%s", dir, de->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[1024];
            memcpy(t, names[j], 1024);
            memcpy(names[j], names[j - 1], 1024);
            memcpy(names[j - 1], t, 1024);
        }
    return n;
}

/* The records of the only (or the index-th) event file in dir. */
static bool read_dir(const char *dir, int index, int expect_files, recs *out) {
    char names[8][1024];
    int n = event_files(dir, names, 8);
    CHECK(n == expect_files, "%s holds %d event files, expected %d", dir, n, expect_files);
    if (index >= n) return false;
    return read_events(names[index], out);
}

/* The record of tag at step; NULL if none, and a failed check if several. */
static const rec *find(const recs *rs, const char *tag, int64_t step) {
    const rec *found = NULL;
    for (int i = 0; i < rs->n; i++)
        if (!rs->r[i].version && !strcmp(rs->r[i].tag, tag) && rs->r[i].step == step) {
            CHECK(!found, "'%s' at step %lld written twice", tag, (long long)step);
            found = &rs->r[i];
        }
    return found;
}

static int count_prefix(const recs *rs, const char *prefix) {
    int n = 0;
    for (int i = 0; i < rs->n; i++)
        n += !rs->r[i].version && !strncmp(rs->r[i].tag, prefix, strlen(prefix));
    return n;
}

#define CHECK_SCALAR(rs, tag, step, expected)                                                      \
    do {                                                                                           \
        const rec *r_ = find(rs, tag, step);                                                       \
        CHECK(r_, "'%s' at step %lld is missing", tag, (long long)(step));                         \
        if (r_)                                                                                    \
            CHECK(r_->value == (float)(expected), "'%s' at step %lld: %.9g, expected %.9g", tag,   \
                  (long long)(step), (double)r_->value, (double)(float)(expected));                \
    } while (0)

/* ---- the bytes, against TensorFlow's ----------------------------------------------- */

/* tools/tensorboard_fixtures.py's SCALARS */
static const struct {
    const char *tag;
    int64_t step;
    float value;
} tf_scalars[] = {
    {"epoch_loss", 0, 0.5f},
    {"epoch_sparse_categorical_accuracy", 0, 0.8125f},
    {"epoch_learning_rate", 0, 0.001f},
    {"epoch_loss", 1, 0.25f},
    {"batch_loss", 7, 1.0e-8f},
    {"evaluation_loss_vs_iterations", 600, -3.75f},
    {"a/b c", 123456789012, 3.0e38f},
    {"inf", 2, INFINITY},
};
#define TF_SCALARS (int)(sizeof tf_scalars / sizeof tf_scalars[0])

/* events.out.tfevents.<10 digits>.HOST.PID.<n>.v2 */
static bool tf_name_form(const char *name) {
    regex_t re;
    SY_ASSERT(regcomp(&re, "^events\\.out\\.tfevents\\.[0-9]{10}\\.HOST\\.PID\\.[0-9]+\\.v2$",
                      REG_EXTENDED) == 0);
    bool ok = regexec(&re, name, 0, NULL, 0) == 0;
    regfree(&re);
    return ok;
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    uint8_t *p = malloc(size > 0 ? (size_t)size : 1);
    if (p && fread(p, 1, (size_t)size, f) == (size_t)size) *n = (size_t)size;
    fclose(f);
    return p;
}

static void test_bytes_match_tensorflow(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/events/tensorflow.tfevents", fixture_dir);
    recs tf;
    if (!read_events(path, &tf)) return;
    CHECK(tf.n == 1 + TF_SCALARS, "TensorFlow's file holds %d records", tf.n);
    if (tf.n != 1 + TF_SCALARS) return;
    CHECK(tf.r[0].version, "TensorFlow's first record is the file version");

    /* each record, packed here from what it holds, is TensorFlow's record byte for byte */
    sy_tfrecord_reader *r;
    CHECK_OK(sy_tfrecord_reader_open(path, NULL, &r));
    for (int i = 0; r && i < tf.n; i++) {
        const uint8_t *data;
        size_t n;
        bool end;
        CHECK_OK(sy_tfrecord_read(r, &data, &n, &end));
        io_event e = {.wall_time = tf.r[i].wall_time, .step = tf.r[i].step};
        if (i == 0) {
            e.file_version = "brain.Event:2";
        } else {
            CHECK(!strcmp(tf.r[i].tag, tf_scalars[i - 1].tag) &&
                      tf.r[i].step == tf_scalars[i - 1].step &&
                      tf.r[i].value == tf_scalars[i - 1].value,
                  "record %d is %s at %lld, the fixture's list says %s at %lld", i, tf.r[i].tag,
                  (long long)tf.r[i].step, tf_scalars[i - 1].tag,
                  (long long)tf_scalars[i - 1].step);
            e.tag = tf_scalars[i - 1].tag;
            e.value = tf_scalars[i - 1].value;
        }
        uint8_t mine[512];
        size_t m = io_event_pack(&e, mine, sizeof mine);
        CHECK(m == n && !memcmp(mine, data, n),
              "record %d (%s): systolic packs %zu bytes, TensorFlow wrote %zu%s", i,
              i ? e.tag : "file_version", m, n, m == n ? " that differ" : "");
    }
    sy_tfrecord_reader_close(r);

    /* a whole file through the writer: after the first record (stamped with
     * the time it was opened) the same bytes, framing included */
    char dir[1024];
    in_tmp(dir, sizeof dir, "bytes");
    io_events *w = NULL;
    CHECK_OK(io_events_open(dir, &w));
    if (!w) return;
    char mine_path[1024];
    snprintf(mine_path, sizeof mine_path, "%s", io_events_path(w));
    for (int i = 1; i < tf.n; i++) {
        io_event e = {.wall_time = tf.r[i].wall_time,
                      .step = tf.r[i].step,
                      .tag = tf_scalars[i - 1].tag,
                      .value = tf_scalars[i - 1].value};
        CHECK_OK(io_events_write(w, &e));
    }
    CHECK_OK(io_events_close(w));
    size_t tf_n, my_n;
    uint8_t *tf_bytes = slurp(path, &tf_n), *my_bytes = slurp(mine_path, &my_n);
    size_t tf_first = 16 + (size_t)tf_bytes[0], my_first = 16 + (size_t)my_bytes[0];
    CHECK(tf_n - tf_first == my_n - my_first &&
              !memcmp(tf_bytes + tf_first, my_bytes + my_first, tf_n - tf_first),
          "the scalars' records: %zu bytes written, TensorFlow's %zu", my_n - my_first,
          tf_n - tf_first);
    free(tf_bytes);
    free(my_bytes);

    /* named as TensorFlow names its files */
    char tf_name[256] = "";
    snprintf(path, sizeof path, "%s/events/tensorflow_name.txt", fixture_dir);
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(tf_name, sizeof tf_name, f), "%s can be read", path);
    if (f) fclose(f);
    tf_name[strcspn(tf_name, "\n")] = '\0';
    CHECK(tf_name_form(tf_name), "TensorFlow's name '%s' has the expected form", tf_name);
    char host[256], mine_name[1024], pid[32];
    gethostname(host, sizeof host);
    snprintf(pid, sizeof pid, ".%ld.", (long)getpid());
    const char *base = strrchr(mine_path, '/') + 1;
    char *h = strstr(base, host), *p;
    snprintf(mine_name, sizeof mine_name, "%.*sHOST%s", h ? (int)(h - base) : 0, base,
             h ? h + strlen(host) : "");
    if ((p = strstr(mine_name, pid))) {
        char rest[512];
        snprintf(rest, sizeof rest, "%s", p + strlen(pid));
        snprintf(p, sizeof mine_name - (size_t)(p - mine_name), ".PID.%s", rest);
    }
    CHECK(h && tf_name_form(mine_name), "systolic's file '%s' is named as TensorFlow's ('%s')",
          base, tf_name);
}

/* ---- the callback during fit --------------------------------------------------------- */

/* What the batch hooks saw: the fit's step count and the logs. */
typedef struct seen {
    int64_t first_iteration;
    int64_t count[64];
    sy_logs logs[64];
    int n;
} seen;

static sy_status seen_begin(void *ctx, sy_model *m) {
    seen *s = ctx;
    s->first_iteration = sy_model_iterations(m);
    s->n = 0;
    return SY_OK;
}

static sy_status seen_batch(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)step;
    seen *s = ctx;
    if (s->n < 64) {
        s->count[s->n] = sy_model_iterations(m) - s->first_iteration;
        s->logs[s->n++] = *logs;
    }
    return SY_OK;
}

static void test_fit(void) {
    sy_tensor *x, *y, *xv, *yv;
    make_data(160, &x, &y, 1);
    make_data(48, &xv, &yv, 2);
    sy_model *m = make_mlp(NULL, 7, 8, false, 1);
    char logdir[1024], train_dir[1100], val_dir[1100];
    in_tmp(logdir, sizeof logdir, "fit/logs");
    snprintf(train_dir, sizeof train_dir, "%s/train", logdir);
    snprintf(val_dir, sizeof val_dir, "%s/validation", logdir);

    sy_tensorboard_options to = sy_tensorboard_options_default();
    CHECK(!strcmp(to.log_dir, "logs") && to.update_freq == 0, "Keras's defaults");
    to.log_dir = logdir;
    to.update_freq = 2;
    sy_callback cbs[2];
    CHECK_OK(sy_callback_tensorboard(&to, &cbs[0]));
    seen s = {0};
    cbs[1] =
        (sy_callback){.ctx = &s, .on_train_begin = seen_begin, .on_train_batch_end = seen_batch};
    sy_fit_options fo = sy_fit_options_default();
    fo.batch_size = 16;
    fo.epochs = 3;
    fo.steps_per_epoch = 5;
    fo.x_val = xv;
    fo.y_val = yv;
    fo.verbose = 0;
    fo.callbacks = cbs;
    fo.n_callbacks = 2;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &fo, &h));

    recs tr, va;
    if (read_dir(train_dir, 0, 1, &tr) && read_dir(val_dir, 0, 1, &va) && h) {
        CHECK(tr.r[0].version && va.r[0].version, "each file opens with its file_version record");
        CHECK(tr.r[0].wall_time == floor(tr.r[0].wall_time) && tr.r[0].wall_time > 1.5e9,
              "the first record's wall time is whole seconds, as TensorFlow's: %f",
              tr.r[0].wall_time);
        for (int32_t e = 0; e < sy_history_epochs(h); e++) {
            const sy_logs *l = sy_history_logs(h, e);
            CHECK_SCALAR(&tr, "epoch_loss", e, sy_logs_get(l, "loss"));
            CHECK_SCALAR(&tr, "epoch_accuracy", e, sy_logs_get(l, "accuracy"));
            CHECK_SCALAR(&tr, "epoch_learning_rate", e, 0.01);
            CHECK_SCALAR(&va, "epoch_loss", e, sy_logs_get(l, "val_loss"));
            CHECK_SCALAR(&va, "epoch_accuracy", e, sy_logs_get(l, "val_accuracy"));
            /* Keras's on_test_end: at the optimizer's iterations */
            CHECK_SCALAR(&va, "evaluation_loss_vs_iterations", 5 * (e + 1),
                         sy_logs_get(l, "val_loss"));
            CHECK_SCALAR(&va, "evaluation_accuracy_vs_iterations", 5 * (e + 1),
                         sy_logs_get(l, "val_accuracy"));
        }
        CHECK(count_prefix(&tr, "epoch_") == 9 && count_prefix(&va, "epoch_") == 6 &&
                  count_prefix(&va, "evaluation_") == 6 && count_prefix(&tr, "val_") == 0 &&
                  count_prefix(&tr, "epoch_val") == 0,
              "the epoch scalars, nothing more: train %d, validation %d",
              count_prefix(&tr, "epoch_"), count_prefix(&va, "epoch_"));
        /* batch_<name> every 2nd of the fit's 15 steps, with the logs the hooks saw then */
        CHECK(s.n == 15, "the batch hook ran %d times", s.n);
        for (int i = 0; i < s.n; i++) {
            if (s.count[i] % 2) {
                CHECK(!find(&tr, "batch_loss", s.count[i]), "no batch_loss at step %lld",
                      (long long)s.count[i]);
                continue;
            }
            CHECK_SCALAR(&tr, "batch_loss", s.count[i], sy_logs_get(&s.logs[i], "loss"));
            CHECK_SCALAR(&tr, "batch_accuracy", s.count[i], sy_logs_get(&s.logs[i], "accuracy"));
        }
        CHECK(count_prefix(&tr, "batch_") == 14, "7 steps of 15 wrote batch scalars: %d",
              count_prefix(&tr, "batch_"));
        bool ordered = true;
        for (int i = 2; i < tr.n; i++) ordered &= tr.r[i].wall_time >= tr.r[i - 1].wall_time;
        CHECK(ordered, "wall times never go back");
    }
    sy_history_free(h);

    /* a second fit: new files (Keras makes new writers), batch steps counted
     * from this fit's start (Keras's _train_counter) */
    fo.epochs = 1;
    fo.steps_per_epoch = 4;
    CHECK_OK(sy_model_fit(m, x, y, &fo, NULL));
    if (read_dir(train_dir, 1, 2, &tr)) {
        CHECK(find(&tr, "batch_loss", 2) && find(&tr, "batch_loss", 4) &&
                  count_prefix(&tr, "batch_loss") == 2,
              "the second fit's batch steps are 2 and 4");
        CHECK(find(&tr, "epoch_loss", 0), "the second fit's epoch 0");
    }
    read_dir(val_dir, 1, 2, &va);
    sy_callback_free(&cbs[0]);
    sy_model_free(m);

    /* update_freq 0, no validation: epochs only, and no validation/ */
    m = make_mlp(NULL, 7, 8, false, 3);
    in_tmp(logdir, sizeof logdir, "fit/epochs_only");
    snprintf(train_dir, sizeof train_dir, "%s/train", logdir);
    snprintf(val_dir, sizeof val_dir, "%s/validation", logdir);
    to.log_dir = logdir;
    to.update_freq = 0;
    CHECK_OK(sy_callback_tensorboard(&to, &cbs[0]));
    fo.x_val = fo.y_val = NULL;
    fo.n_callbacks = 1;
    fo.epochs = 2;
    fo.steps_per_epoch = 6;
    CHECK_OK(sy_model_fit(m, x, y, &fo, NULL));
    sy_callback_free(&cbs[0]);
    struct stat sb;
    CHECK(stat(val_dir, &sb) != 0, "no validation directory without validation");
    if (read_dir(train_dir, 0, 1, &tr))
        CHECK(tr.n == 1 + 6 && count_prefix(&tr, "batch_") == 0 && find(&tr, "epoch_loss", 1),
              "epochs only: %d records", tr.n);

    /* steps_per_execution 3, update_freq 2: the hooks see steps 3, 6, 9,
     * 12, and steps 6 and 12 are even */
    in_tmp(logdir, sizeof logdir, "fit/spe");
    snprintf(train_dir, sizeof train_dir, "%s/train", logdir);
    to.log_dir = logdir;
    to.update_freq = 2;
    CHECK_OK(sy_callback_tensorboard(&to, &cbs[0]));
    fo.epochs = 2;
    CHECK_OK(sy_model_fit(m, x, y, &fo, NULL));
    sy_callback_free(&cbs[0]);
    if (read_dir(train_dir, 0, 1, &tr))
        CHECK(count_prefix(&tr, "batch_loss") == 2 && find(&tr, "batch_loss", 6) &&
                  find(&tr, "batch_loss", 12),
              "with 3 steps per execution, batch scalars at steps 6 and 12");
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(xv);
    sy_tensor_free(yv);
}

/* ---- mistakes and failures ----------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f, "create %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static bool holds(const char *path, const char *text) {
    size_t n;
    uint8_t *p = slurp(path, &n);
    bool same = p && n == strlen(text) && !memcmp(p, text, n);
    free(p);
    return same;
}

static void test_errors(void) {
    sy_tensor *x, *y;
    make_data(64, &x, &y, 3);
    sy_model *m = make_mlp(NULL, 7, 4, false, 1);
    sy_fit_options fo = sy_fit_options_default();
    fo.batch_size = 16;
    fo.steps_per_epoch = 2;
    fo.verbose = 0;
    sy_callback cb;
    sy_tensorboard_options to = sy_tensorboard_options_default();

    /* the log dir is a file: refused at once, the file untouched */
    char file[1024], under[1100];
    in_tmp(file, sizeof file, "a_file");
    write_text(file, "keep me\n");
    to.log_dir = file;
    CHECK_ERR(sy_callback_tensorboard(&to, &cb), SY_ERR_IO, file, "not a directory");
    CHECK(cb.ctx == NULL && cb.free == NULL, "no callback on failure");
    sy_callback_free(&cb);

    /* under a file: found when fit opens the files; fit stops with the path */
    snprintf(under, sizeof under, "%s/logs", file);
    to.log_dir = under;
    CHECK_OK(sy_callback_tensorboard(&to, &cb));
    fo.callbacks = &cb;
    fo.n_callbacks = 1;
    CHECK_ERR(sy_model_fit(m, x, y, &fo, NULL), SY_ERR_IO, file, "Not a directory");
    sy_callback_free(&cb);
    CHECK(holds(file, "keep me\n"), "%s is as it was", file);

    to.log_dir = "";
    CHECK_ERR(sy_callback_tensorboard(&to, &cb), SY_ERR_INVALID_ARGUMENT, "log_dir");
    to.log_dir = "logs";
    to.update_freq = -1;
    CHECK_ERR(sy_callback_tensorboard(&to, &cb), SY_ERR_INVALID_ARGUMENT, "update_freq", "-1");
    CHECK_ERR(io_events_open(NULL, &(io_events *){NULL}), SY_ERR_INVALID_ARGUMENT, "log directory");

    /* a file that may not grow past 300 bytes fails as a full disk does:
     * fit stops with the file's path and the reason */
    char logdir[1024];
    in_tmp(logdir, sizeof logdir, "limited");
    to.log_dir = logdir;
    to.update_freq = 1;
    CHECK_OK(sy_callback_tensorboard(&to, &cb));
    fo.epochs = 3;
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {300, old.rlim_max};
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
        CHECK_ERR(sy_model_fit(m, x, y, &fo, NULL), SY_ERR_IO, logdir,
                  "/train/events.out.tfevents.", "File too large");
        setrlimit(RLIMIT_FSIZE, &old);
    } else {
        fprintf(stderr,
                "test_events: cannot set RLIMIT_FSIZE (%s): the file-size test is skipped\n",
                strerror(errno));
    }
    signal(SIGXFSZ, old_handler);
    sy_callback_free(&cb);

    /* a directory this process may not write (not for root, whom no mode stops) */
    in_tmp(logdir, sizeof logdir, "read_only");
    CHECK(mkdir(logdir, 0555) == 0, "mkdir %s", logdir);
    if (geteuid() != 0) {
        to.log_dir = logdir;
        CHECK_OK(sy_callback_tensorboard(&to, &cb));
        CHECK_ERR(sy_model_fit(m, x, y, &fo, NULL), SY_ERR_IO, logdir, "Permission denied");
        sy_callback_free(&cb);
    }
    chmod(logdir, 0755);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

int main(void) {
    if (!files_setup("events", __FILE__)) return 1;
    test_bytes_match_tensorflow();
    test_fit();
    test_errors();
    files_cleanup();
    return check_report("test_events");
}
