/*
 * test_fit_args.c - fit()'s other arguments against tf.keras 2.15
 * (tools/golden/make_fit_args_fixtures.py): sample_weight, class_weight
 * and validation_split on a small model trained for a few steps (the
 * epochs' logs and the final weights Keras gave), evaluate with
 * sample_weight, a dataset's (x, y, sample_weight) elements and replicas
 * giving the same; ModelCheckpoint's saves, file names and messages on
 * scripted logs; BackupAndRestore resuming an interrupted run to the same
 * weights, bit for bit; and the refusals, with Keras's words.
 */
#define _GNU_SOURCE
#include "files.h"

#include "check.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include "golden_check.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the golden model: Dense(3, softmax) on 4 inputs, SGD(0.1) ----------------------------- */

/* m's Dense kernel and bias (its only weights) from the fixture's kernel0 and bias0, then compiled
 * with opt, sparse_categorical_crossentropy and metrics accuracy (weighted_metrics accuracy too,
 * with `weighted`). */
static sy_model *fixture_compiled(sy_model *m, const sy_npz *z, sy_optimizer opt, bool weighted) {
    sy_tensor *k = get(z, "kernel0"), *b = get(z, "bias0");
    memcpy(sy_model_weight_data(m, 0), sy_tensor_data(k), sy_tensor_bytes(k));
    memcpy(sy_model_weight_data(m, 1), sy_tensor_data(b), sy_tensor_bytes(b));
    sy_tensor_free(k);
    sy_tensor_free(b);
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = opt;
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    if (weighted) c.weighted_metrics = metrics, c.n_weighted_metrics = 1;
    CHECK_OK(sy_model_compile(m, &c));
    return m;
}

/* The golden model with optimizer opt */
static sy_model *golden_model_with(const sy_npz *z, sy_optimizer opt) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("fit_args", &m));
    sy_layer d = sy_layer_dense(3);
    d.activation = SY_ACTIVATION_SOFTMAX;
    d.input_shape = sy_shape_of(1, (int64_t)4);
    CHECK_OK(sy_model_add(m, &d));
    return fixture_compiled(m, z, opt, false);
}

static sy_model *golden_model(const sy_npz *z) {
    return golden_model_with(z, sy_optimizer_sgd(0.1f, 0.0, false));
}

static void check_case(const sy_npz *z, const char *name, const sy_history *h, sy_model *m) {
    sy_tensor *loss = getp(z, name, "loss"), *acc = getp(z, name, "acc"),
              *k = getp(z, name, "kernel"), *b = getp(z, name, "bias");
    CHECK(h && sy_history_epochs(h) == 2, "%s: 2 epochs", name);
    for (int32_t e = 0; h && e < 2; e++) {
        const sy_logs *l = sy_history_logs(h, e);
        CHECK_CLOSE(sy_logs_get(l, "loss"), sy_tensor_get(loss, e), 1e-5, 1e-6, "%s epoch %d loss",
                    name, e);
        CHECK_CLOSE(sy_logs_get(l, "accuracy"), sy_tensor_get(acc, e), 1e-6, 1e-6,
                    "%s epoch %d accuracy", name, e);
        if (has(z, "split_val_loss") && !strcmp(name, "split")) {
            sy_tensor *v = getp(z, name, "val_loss");
            CHECK_CLOSE(sy_logs_get(l, "val_loss"), sy_tensor_get(v, e), 1e-5, 1e-6,
                        "%s epoch %d val_loss", name, e);
            sy_tensor_free(v);
        }
    }
    for (int i = 0; i < 12; i++)
        CHECK_CLOSE(sy_model_weight_data(m, 0)[i], sy_tensor_get(k, i), 1e-5, 1e-6, "%s kernel[%d]",
                    name, i);
    for (int i = 0; i < 3; i++)
        CHECK_CLOSE(sy_model_weight_data(m, 1)[i], sy_tensor_get(b, i), 1e-5, 1e-6, "%s bias[%d]",
                    name, i);
    sy_tensor_free(loss);
    sy_tensor_free(acc);
    sy_tensor_free(k);
    sy_tensor_free(b);
}

static sy_fit_options golden_fit(void) {
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 4;
    o.epochs = 2;
    o.shuffle = false;
    o.verbose = 0;
    return o;
}

static void test_weights_golden(void) {
    sy_npz *z = open_fixture("fit_args.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *w = get(z, "w");
    static const double cw[] = {1.0, 3.0, 0.5};
    const char *names[] = {"plain", "sw", "cw", "split"};
    for (int c = 0; c < 4; c++) {
        sy_model *m = golden_model(z);
        sy_fit_options o = golden_fit();
        if (c == 1 || c == 3) o.sample_weight = w;
        if (c == 2) o.class_weight = cw, o.n_class_weight = 3;
        if (c == 3) o.validation_split = 0.333;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(m, x, y, &o, &h));
        check_case(z, names[c], h, m);
        sy_history_free(h);
        sy_model_free(m);
    }
    /* evaluate(x, y, sample_weight=w, batch_size=5): a padded last batch, weights left out with it
     */
    sy_model *m = golden_model(z);
    sy_evaluate_options e = sy_evaluate_options_default();
    e.batch_size = 5;
    e.verbose = 0;
    e.sample_weight = w;
    sy_logs l;
    CHECK_OK(sy_model_evaluate(m, x, y, &e, &l));
    sy_tensor *el = get(z, "eval_loss"), *ea = get(z, "eval_acc");
    CHECK_CLOSE(sy_logs_get(&l, "loss"), sy_tensor_get(el, 0), 1e-5, 1e-6,
                "evaluate's weighted loss");
    CHECK_CLOSE(sy_logs_get(&l, "accuracy"), sy_tensor_get(ea, 0), 1e-6, 1e-6,
                "evaluate's accuracy (metrics unweighted)");
    sy_tensor_free(el);
    sy_tensor_free(ea);
    sy_model_free(m);

    /* weighted_metrics: "accuracy" again is "weighted_accuracy", weighted where "accuracy" is not
     */
    m = fixture_compiled(golden_model(z), z, sy_optimizer_sgd(0.1f, 0.0, false), true);
    sy_fit_options wo = golden_fit();
    wo.sample_weight = w;
    sy_history *wh = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &wo, &wh));
    sy_tensor *wacc = get(z, "wm_weighted_acc"), *weval = get(z, "wm_eval_weighted_acc");
    for (int32_t ep = 0; wh && ep < 2; ep++) {
        const sy_logs *hl = sy_history_logs(wh, ep);
        CHECK(hl->n == 3 && !strcmp(hl->names[1], "accuracy") &&
                  !strcmp(hl->names[2], "weighted_accuracy"),
              "Keras's logs: loss, accuracy, weighted_accuracy (%d names)", hl->n);
        CHECK_CLOSE(sy_logs_get(hl, "weighted_accuracy"), sy_tensor_get(wacc, ep), 1e-6, 1e-6,
                    "epoch %d weighted_accuracy", ep);
    }
    check_case(z, "wm", wh, m);
    CHECK_OK(sy_model_evaluate(m, x, y, &e, &l));
    CHECK_CLOSE(sy_logs_get(&l, "weighted_accuracy"), sy_tensor_get(weval, 0), 1e-6, 1e-6,
                "evaluate's weighted_accuracy");
    sy_tensor_free(wacc);
    sy_tensor_free(weval);
    sy_history_free(wh);
    sy_model_free(m);

    /* the same weights as a dataset's third component: the same run as the arrays' */
    sy_tensor *parts[3] = {x, y, w};
    sy_dataset *d = NULL, *batched = NULL;
    CHECK_OK(sy_dataset_from_tensor_slices(parts, 3, &d));
    CHECK_OK(sy_dataset_batch(d, 4, true, &batched));
    m = golden_model(z);
    sy_fit_options o = golden_fit();
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit_dataset(m, batched, NULL, &o, &h));
    check_case(z, "sw", h, m);
    sy_history_free(h);
    sy_model_free(m);
    sy_dataset_free(batched);
    sy_dataset_free(d);

    /* two replicas, each with its shard of every batch and of its weights: Keras's numbers still */
    sy_cluster *cluster = NULL;
    sy_strategy *strategy = NULL;
    CHECK_OK(sy_cluster_resolve("cpu:2", &cluster));
    CHECK_OK(sy_strategy_new(cluster, &strategy));
    sy_strategy_scope_enter(strategy);
    m = golden_model(z);
    sy_strategy_scope_exit(strategy);
    o = golden_fit();
    o.sample_weight = w;
    CHECK_OK(sy_model_fit(m, x, y, &o, &h));
    check_case(z, "sw", h, m);
    sy_history_free(h);
    sy_model_free(m);
    sy_strategy_free(strategy);
    sy_cluster_free(cluster);

    /* weights of 1 change nothing, bit for bit */
    sy_tensor *ones = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(1, (int64_t)12), &ones));
    for (int i = 0; i < 12; i++) ((float *)sy_tensor_data(ones))[i] = 1.0f;
    sy_model *a = golden_model(z), *b = golden_model(z);
    sy_fit_options oa = golden_fit(), ob = golden_fit();
    ob.sample_weight = ones;
    CHECK_OK(sy_model_fit(a, x, y, &oa, NULL));
    CHECK_OK(sy_model_fit(b, x, y, &ob, NULL));
    CHECK(!memcmp(sy_model_weight_data(a, 0), sy_model_weight_data(b, 0), 12 * sizeof(float)),
          "sample weights of 1 train exactly as none");
    sy_model_free(a);
    sy_model_free(b);
    sy_tensor_free(ones);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(w);
    sy_npz_close(z);
}

static void test_refusals(void) {
    sy_npz *z = open_fixture("fit_args.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *w = get(z, "w");
    sy_model *m = golden_model(z);
    static const double cw[] = {1.0, 3.0, 0.5}, cw2[] = {1.0, 2.0};
    sy_fit_options o = golden_fit();
    o.sample_weight = w;
    o.class_weight = cw;
    o.n_class_weight = 3;
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_INVALID_ARGUMENT,
              "You cannot `class_weight` and `sample_weight`");
    o = golden_fit();
    o.class_weight = cw2;
    o.n_class_weight = 2;
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_INVALID_ARGUMENT,
              "class_weight gives weights for classes 0 to 1");
    o = golden_fit();
    o.validation_split = 0.95;
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_INVALID_ARGUMENT,
              "Training data contains 12 samples", "`validation_split=0.95`");
    o.validation_split = 1.5;
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_INVALID_ARGUMENT, "validation_split", "1.5");
    sy_tensor *short_w = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(1, (int64_t)5), &short_w));
    o = golden_fit();
    o.sample_weight = short_w;
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_SHAPE, "sample_weight has shape (5,)",
              "(12,)");
    sy_tensor *parts[2] = {x, y};
    sy_dataset *d = NULL, *batched = NULL;
    CHECK_OK(sy_dataset_from_tensor_slices(parts, 2, &d));
    CHECK_OK(sy_dataset_batch(d, 4, true, &batched));
    o = golden_fit();
    o.validation_split = 0.25;
    CHECK_ERR(sy_model_fit_dataset(m, batched, NULL, &o, NULL), SY_ERR_INVALID_ARGUMENT,
              "`validation_split` is only supported for Tensors or NumPy arrays");
    sy_dataset_free(batched);
    sy_dataset_free(d);
    sy_tensor_free(short_w);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(w);
    sy_npz_close(z);
}

/* ---- ModelCheckpoint against Keras on scripted logs ---------------------------------------- */

/* "name=value ..." into logs */
static void parse_logs(const char *s, sy_logs *l) {
    memset(l, 0, sizeof *l);
    while (*s == ' ') s++;
    while (*s) {
        const char *eq = strchr(s, '=');
        if (!eq) break;
        snprintf(l->names[l->n], sizeof l->names[0], "%.*s", (int)(eq - s), s);
        char *end;
        l->values[l->n++] = strtod(eq + 1, &end);
        s = end;
        while (*s == ' ') s++;
    }
}

static void test_model_checkpoint_golden(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fit_args/model_checkpoint.txt", fixture_dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "the fixture %s (tools/golden/make_fit_args_fixtures.py) cannot be read",
          path);
    if (!f) return;
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    CHECK(chdir(tmp_root) == 0, "chdir %s", tmp_root);
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("ckpt", &m));
    sy_layer d = sy_layer_dense(2);
    d.input_shape = sy_shape_of(1, (int64_t)3);
    CHECK_OK(sy_model_add(m, &d));
    char line[2048], name[2048] = "", filepath[512] = "", monitor[128] = "val_loss",
                     mode[16] = "auto";
    sy_model_checkpoint_options o = sy_model_checkpoint_options_default();
    sy_callback cb = {0};
    FILE *out = NULL;
    int32_t epoch_begun = -1, cases = 0;
    bool failed = false;
    char *printed = NULL;
    size_t printed_at = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "case ", 5)) {
            snprintf(name, sizeof name, "%s", line + 5);
            o = sy_model_checkpoint_options_default();
            snprintf(monitor, sizeof monitor, "val_loss");
            snprintf(mode, sizeof mode, "auto");
            epoch_begun = -1;
            failed = false;
            cases++;
            continue;
        }
        if (!strncmp(line, "option ", 7)) {
            char *k = line + 7, *v = strchr(k, ' ');
            *v++ = 0;
            if (!strcmp(k, "filepath"))
                snprintf(filepath, sizeof filepath, "%s", v), o.filepath = filepath;
            else if (!strcmp(k, "verbose"))
                o.verbose = atoi(v);
            else if (!strcmp(k, "save_best_only"))
                o.save_best_only = !strcmp(v, "True");
            else if (!strcmp(k, "monitor"))
                snprintf(monitor, sizeof monitor, "%s", v);
            else if (!strcmp(k, "mode"))
                snprintf(mode, sizeof mode, "%s", v);
            else if (!strcmp(k, "save_freq"))
                o.save_freq = atoll(v);
            else if (!strcmp(k, "initial_value_threshold"))
                o.has_initial_value_threshold = true, o.initial_value_threshold = atof(v);
            continue;
        }
        bool is_epoch = !strncmp(line, "epoch ", 6), is_batch = !strncmp(line, "batch ", 6);
        if ((is_epoch || is_batch) && !cb.ctx) { /* the options are complete: make the callback */
            o.monitor = monitor;
            o.mode = mode;
            free(printed);
            printed = NULL;
            printed_at = 0;
            out = tmpfile();
            o.progress = out;
            CHECK_OK(sy_callback_model_checkpoint(&o, &cb));
            if (cb.on_train_begin) CHECK_OK(cb.on_train_begin(cb.ctx, m));
        }
        if (is_epoch || is_batch) {
            char *end;
            long long n = strtoll(line + 6, &end, 10);
            sy_logs l;
            parse_logs(end, &l);
            sy_status st;
            if (is_epoch) {
                if (epoch_begun != n) cb.on_epoch_begin(cb.ctx, m, (int32_t)n);
                epoch_begun = (int32_t)n;
                st = cb.on_epoch_end(cb.ctx, m, (int32_t)n, &l);
            } else {
                int32_t e = (int32_t)(n >> 16);
                if (epoch_begun != e) cb.on_epoch_begin(cb.ctx, m, e);
                epoch_begun = e;
                st = cb.on_train_batch_end(cb.ctx, m, n & 0xFFFF, &l);
            }
            if (st) failed = true;
            free(printed);
            printed = NULL;
            fflush(out);
            long size = ftell(out);
            printed = calloc(1, (size_t)size + 1);
            rewind(out);
            if (size > 0 && fread(printed, 1, (size_t)size, out) != (size_t)size) printed[0] = 0;
            continue;
        }
        if (!strncmp(line, "save ", 5)) {
            CHECK(access(line + 5, F_OK) == 0, "%s: Keras saved '%s'; no such file here", name,
                  line + 5);
            unlink(line + 5);
        } else if (!strncmp(line, "print ", 6)) {
            const char *at = printed ? strstr(printed + printed_at, line + 6) : NULL;
            CHECK(at != NULL, "%s: Keras printed '%s'; here: '%s'", name, line + 6,
                  printed ? printed + printed_at : "");
            if (at) printed_at = (size_t)(at - printed) + strlen(line + 6);
        } else if (!strncmp(line, "error ", 6)) {
            CHECK(failed && strstr(sy_last_error(), line + 6), "%s: Keras raised '%s'; here: %s",
                  name, line + 6, failed ? sy_last_error() : "no error");
        } else if (!strcmp(line, "end")) {
            sy_callback_free(&cb);
            memset(&cb, 0, sizeof cb);
            if (out) fclose(out);
            out = NULL;
        }
    }
    fclose(f);
    free(printed);
    CHECK(cases >= 10, "the fixture holds %d cases", cases);
    /* every save was one Keras made (each was removed when matched): nothing else is left */
    DIR *dir = opendir(".");
    for (struct dirent *e; dir && (e = readdir(dir));)
        CHECK(!strstr(e->d_name, ".h5"), "ModelCheckpoint saved '%s', which Keras did not",
              e->d_name);
    if (dir) closedir(dir);
    sy_model_free(m);
    CHECK(chdir(cwd) == 0, "chdir back");
}

/* A whole-model save, and a weights save that loads back. */
static void test_model_checkpoint_files(void) {
    sy_npz *z = open_fixture("fit_args.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    sy_model *m = golden_model(z);
    char pattern[1024], file[1024];
    in_tmp(pattern, sizeof pattern, "ck/sub/w-{epoch:02d}-{loss:.2f}.h5");
    sy_model_checkpoint_options c = sy_model_checkpoint_options_default();
    c.filepath = pattern;
    c.save_weights_only = true;
    sy_callback cb;
    CHECK_OK(sy_callback_model_checkpoint(&c, &cb));
    sy_fit_options o = golden_fit();
    o.callbacks = &cb;
    o.n_callbacks = 1;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &o, &h));
    char loss[32];
    snprintf(loss, sizeof loss, "%.2f", h ? sy_logs_get(sy_history_logs(h, 1), "loss") : 0.0);
    snprintf(file, sizeof file, "%s/ck/sub/w-02-%s.h5", tmp_root, loss);
    sy_model *back = golden_model(z);
    CHECK_OK(sy_model_load_weights(back, file));
    CHECK(!memcmp(sy_model_weight_data(back, 0), sy_model_weight_data(m, 0), 12 * sizeof(float)),
          "the epoch 2 weights file holds the trained weights");
    sy_history_free(h);
    sy_callback_free(&cb);
    /* a pattern naming a log fit never gives fails with Keras's words */
    in_tmp(pattern, sizeof pattern, "x-{val_acc:.2f}.h5");
    CHECK_OK(sy_callback_model_checkpoint(&c, &cb));
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_NOT_FOUND,
              "Failed to format this callback filepath", "Reason: 'val_acc'");
    sy_callback_free(&cb);
    c.filepath = "bad-{loss:.q}.h5";
    CHECK_ERR(sy_callback_model_checkpoint(&c, &cb), SY_ERR_INVALID_ARGUMENT,
              "Invalid format specifier");
    sy_model_free(back);
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

/* ---- BackupAndRestore --------------------------------------------------------------------- */

static sy_status fail_after(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m, (void)logs;
    if (epoch == *(int32_t *)ctx)
        return sy_error(SY_ERR_INTERNAL, "interrupted after epoch %d", epoch + 1);
    return SY_OK;
}

static void test_backup_and_restore(void) {
    sy_npz *z = open_fixture("fit_args.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    char dir[1024];
    in_tmp(dir, sizeof dir, "backup");
    for (int64_t freq = 0; freq <= 2; freq += 2) { /* 'epoch', then every 2 steps */
        sy_model *whole = golden_model(z), *cut = golden_model(z);
        sy_fit_options o = golden_fit();
        o.epochs = 4;
        o.shuffle = true;
        o.seed = 7;
        CHECK_OK(sy_model_fit(whole, x, y, &o, NULL));
        sy_callback cbs[2];
        /* 'epoch': interrupted after epoch 2's backup (the callback runs first); every 2 steps:
         * after the backup at epoch 3's second step, so the run goes on in the middle of epoch 3
         * with the shuffled batches */
        int32_t stop_at = freq ? 2 : 1;
        CHECK_OK(sy_callback_backup_and_restore(dir, freq, true, &cbs[0]));
        cbs[1] = (sy_callback){.ctx = &stop_at, .on_epoch_end = fail_after};
        o.callbacks = cbs;
        o.n_callbacks = 2;
        CHECK_ERR(sy_model_fit(cut, x, y, &o, NULL), SY_ERR_INTERNAL, "interrupted after epoch");
        CHECK(access(dir, F_OK) == 0, "the backup stays after an interruption");
        stop_at = -1;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(cut, x, y, &o, &h));
        CHECK(h && sy_history_epochs(h) == 2 && sy_history_epoch(h, 0) == 2,
              "save_freq %lld: the resumed run goes on at epoch 3 (0-based 2), got %d",
              (long long)freq, h ? sy_history_epoch(h, 0) : -1);
        CHECK(!memcmp(sy_model_weight_data(whole, 0), sy_model_weight_data(cut, 0),
                      12 * sizeof(float)) &&
                  !memcmp(sy_model_weight_data(whole, 1), sy_model_weight_data(cut, 1),
                          3 * sizeof(float)),
              "save_freq %lld: resumed weights identical to the uninterrupted run's",
              (long long)freq);
        CHECK(access(dir, F_OK) != 0, "the backup is deleted when training ends");
        sy_history_free(h);
        sy_callback_free(&cbs[0]);
        sy_model_free(whole);
        sy_model_free(cut);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

/* ---- Keras's fixtures as lines ------------------------------------------------------------ */

/* The lines of a text fixture in tests/data/fit_args (NULL-terminated, freed with free_lines). */
static char **read_lines(const char *name) {
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%s/fit_args/%s", fixture_dir, name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "the fixture %s (tools/golden/make_fit_args_fixtures.py) cannot be read",
          path);
    size_t n = 0, cap = 64;
    char **lines = calloc(cap, sizeof *lines);
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (n + 1 >= cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = strdup(line);
        lines[n] = NULL;
    }
    if (f) fclose(f);
    return lines;
}

static void free_lines(char **lines) {
    for (size_t i = 0; lines && lines[i]; i++) free(lines[i]);
    free(lines);
}

/* The next "case NAME" line's NAME, from lines[*i] on, *i past it; NULL at the end. */
static const char *next_case(char **lines, size_t *i) {
    while (lines && lines[*i] && strncmp(lines[*i], "case ", 5)) (*i)++;
    return lines && lines[*i] ? lines[(*i)++] + 5 : NULL;
}

/* What a file the test wrote holds (rewound; a new string to free). */
static char *file_text(FILE *f) {
    fflush(f);
    long size = ftell(f);
    char *text = calloc(1, (size_t)(size > 0 ? size : 0) + 1);
    rewind(f);
    if (size > 0 && fread(text, 1, (size_t)size, f) != (size_t)size) text[0] = 0;
    return text;
}

/* part (n bytes) is a time of Keras's progress bar: digits then s, ms or us, with /epoch or /step
 * or not */
static bool is_time(const char *part, size_t n) {
    static const char *const units[] = {"s",        "ms",     "us",      "s/epoch", "ms/epoch",
                                        "us/epoch", "s/step", "ms/step", "us/step"};
    size_t d = 0;
    while (d < n && part[d] >= '0' && part[d] <= '9') d++;
    for (size_t u = 0; d > 0 && u < sizeof units / sizeof units[0]; u++)
        if (strlen(units[u]) == n - d && !strncmp(part + d, units[u], n - d)) return true;
    return false;
}

/* A verbose-2 progress line without its times ("0s", "12ms/epoch", "4ms/step"), which no two runs
 * share. */
static void untimed(const char *line, char *out, size_t size) {
    size_t at = 0;
    out[0] = 0;
    for (const char *part = line; part;) {
        const char *end = strstr(part, " - ");
        size_t n = end ? (size_t)(end - part) : strlen(part);
        if (!is_time(part, n) && at + n + 4 < size)
            at += (size_t)snprintf(out + at, size - at, "%s%.*s", at ? " - " : "", (int)n, part);
        part = end ? end + 3 : NULL;
    }
}

/* The printed text's non-empty lines, untimed, each checked against the fixture's next "print" line
 * from *i on (only those starting with `only`, when given). */
static void check_printed(const char *what, char **lines, size_t *i, const char *text,
                          const char *only) {
    char got[4096], want[4096];
    const char *at = text;
    for (; lines[*i] && !strncmp(lines[*i], "print ", 6); (*i)++) {
        if (only && strncmp(lines[*i] + 6, only, strlen(only))) continue;
        got[0] = 0;
        while (*at) {
            size_t n = strcspn(at, "\n");
            snprintf(want, sizeof want, "%.*s", (int)n, at);
            at += n + (at[n] == '\n');
            if (!want[0] || (only && strncmp(want, only, strlen(only)))) continue;
            untimed(want, got, sizeof got);
            break;
        }
        CHECK(!strcmp(got, lines[*i] + 6), "%s: Keras printed '%s', here '%s'", what, lines[*i] + 6,
              got);
    }
    while (*at == '\n') at++;
    if (!only) CHECK(!*at, "%s: printed more than Keras: '%s'", what, at);
}

/* "name=value ..." against logs: the same names in the same order, the values within float32
 * training's rounding (NaN as NaN); values_too false compares names only. */
static void check_logs_line(const char *what, const char *want, const sy_logs *got,
                            bool values_too) {
    sy_logs w;
    parse_logs(want, &w);
    CHECK(w.n == got->n, "%s: Keras logged %d values (%s), here %d", what, w.n, want, got->n);
    for (int32_t k = 0; k < w.n && k < got->n; k++) {
        CHECK(!strcmp(w.names[k], got->names[k]), "%s: Keras's log %d is '%s', here '%s'", what, k,
              w.names[k], got->names[k]);
        if (!values_too && strcmp(w.names[k], "lr")) continue;
        if (isnan(w.values[k]))
            CHECK(isnan(got->values[k]), "%s: Keras's %s is nan, here %g", what, w.names[k],
                  got->values[k]);
        else if (!strcmp(w.names[k], "lr")) /* a float32 variable in both */
            CHECK((float)w.values[k] == (float)got->values[k], "%s: lr %.9g, here %.9g", what,
                  w.values[k], got->values[k]);
        else
            CHECK_CLOSE(got->values[k], w.values[k], 1e-5, 1e-6, "%s: %s", what, w.names[k]);
    }
}

/* ---- TerminateOnNaN against Keras ------------------------------------------------------------ */

/* Every callback call, as the fixture's "event" lines (values compared apart). */
typedef struct recorder {
    char lines[16][512];
    sy_logs logs[16];
    int n;
} recorder;

static sy_status rec_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m;
    recorder *r = ctx;
    if (r->n < 16) {
        snprintf(r->lines[r->n], sizeof r->lines[0], "event batch_end %lld", (long long)step);
        memset(&r->logs[r->n], 0, sizeof r->logs[0]);
        logs_set(&r->logs[r->n++], "loss", sy_logs_get(logs, "loss"));
    }
    return SY_OK;
}

static sy_status rec_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m;
    recorder *r = ctx;
    if (r->n < 16) {
        snprintf(r->lines[r->n], sizeof r->lines[0], "event epoch_end %d", epoch);
        r->logs[r->n++] = *logs;
    }
    return SY_OK;
}

static sy_status rec_train_end(void *ctx, sy_model *m, const sy_logs *logs) {
    (void)m, (void)logs;
    recorder *r = ctx;
    if (r->n < 16) {
        snprintf(r->lines[r->n], sizeof r->lines[0], "event train_end");
        memset(&r->logs[r->n++], 0, sizeof r->logs[0]);
    }
    return SY_OK;
}

/* Keras's TerminateOnNaN on scripted logs, then real fits whose sample 6 holds a NaN (batch 1 of
 * 3): the batch that stops, what is printed (verbose 0 and 2; 1 and 2 steps per execution), every
 * callback call (validation and on_epoch_end still run), the history and the weights. */
static void test_terminate_on_nan_golden(void) {
    char **lines = read_lines("terminate_on_nan.txt");
    sy_npz *z = open_fixture("fit_args.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *xv = NULL, *yv = NULL;
    ((float *)sy_tensor_data(x))[6 * 4 + 2] = NAN;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)4, (int64_t)4), &xv));
    CHECK_OK(sy_tensor_new(sy_tensor_dtype(y), sy_shape_of(1, (int64_t)4), &yv));
    memcpy(sy_tensor_data(xv), sy_tensor_data(x), 16 * sizeof(float));
    memcpy(sy_tensor_data(yv), sy_tensor_data(y), 4 * sy_dtype_size(sy_tensor_dtype(y)));
    int cases = 0;
    const char *name;
    for (size_t i = 0; (name = next_case(lines, &i)); cases++) {
        if (!strcmp(name, "scripted")) {
            sy_model *m = golden_model(z);
            FILE *out = tmpfile();
            sy_callback cb;
            CHECK_OK(sy_callback_terminate_on_nan(out, &cb));
            while (lines[i] && !strncmp(lines[i], "batch ", 6)) {
                char *end;
                long long n = strtoll(lines[i] + 6, &end, 10);
                sy_logs l;
                parse_logs(end, &l);
                m->stop_training = false;
                long before = ftell(out);
                CHECK_OK(cb.on_train_batch_end(cb.ctx, m, n, &l));
                char *text = file_text(out);
                i++;
                check_printed(lines[i - 1], lines, &i, text + before, NULL);
                CHECK(lines[i] && !strncmp(lines[i], "stop ", 5) &&
                          m->stop_training == (atoi(lines[i] + 5) == 1),
                      "%s: Keras's stop_training %s, here %d", lines[i - 1],
                      lines[i] ? lines[i] + 5 : "?", m->stop_training);
                i++;
                free(text);
            }
            fclose(out);
            sy_model_free(m);
            continue;
        }
        int verbose = -1, spe = 0;
        CHECK(sscanf(name, "fit verbose=%d steps_per_execution=%d", &verbose, &spe) == 2,
              "case '%s'", name);
        sy_model *m = golden_model(z);
        m->steps_per_execution = spe;
        FILE *out = tmpfile();
        recorder rec = {0};
        sy_callback cbs[2];
        CHECK_OK(sy_callback_terminate_on_nan(out, &cbs[0]));
        cbs[1] = (sy_callback){.ctx = &rec,
                               .on_train_batch_end = rec_batch_end,
                               .on_epoch_end = rec_epoch_end,
                               .on_train_end = rec_train_end};
        sy_fit_options o = golden_fit();
        o.epochs = 3;
        o.verbose = verbose;
        o.progress = out;
        o.x_val = xv;
        o.y_val = yv;
        o.callbacks = cbs;
        o.n_callbacks = 2;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(m, x, y, &o, &h));
        char *text = file_text(out);
        check_printed(name, lines, &i, text, NULL);
        int ev = 0;
        for (; lines[i] && !strncmp(lines[i], "event ", 6); i++, ev++) {
            CHECK(ev < rec.n && !strncmp(lines[i], rec.lines[ev], strlen(rec.lines[ev])),
                  "%s: Keras's call '%s', here '%s'", name, lines[i],
                  ev < rec.n ? rec.lines[ev] : "none");
            const char *values = strchr(lines[i] + 6, ' ');
            if (ev < rec.n && strncmp(lines[i], "event train_end", 15) && values)
                values = strchr(values + 1, ' ');
            if (ev < rec.n && values) check_logs_line(lines[i], values, &rec.logs[ev], true);
        }
        CHECK(ev == rec.n, "%s: Keras made %d callback calls, here %d", name, ev, rec.n);
        int32_t epochs = 0;
        for (; lines[i] && !strncmp(lines[i], "history ", 8); i++, epochs++) {
            char *end;
            long e = strtol(lines[i] + 8, &end, 10);
            CHECK(h && epochs < sy_history_epochs(h) && sy_history_epoch(h, epochs) == e, "%s: %s",
                  name, lines[i]);
            if (h && epochs < sy_history_epochs(h))
                check_logs_line(lines[i], end, sy_history_logs(h, epochs), true);
        }
        CHECK(h && sy_history_epochs(h) == epochs, "%s: Keras's history holds %d epochs, here %d",
              name, epochs, h ? sy_history_epochs(h) : -1);
        if (lines[i] && !strncmp(lines[i], "weights_nan ", 12)) {
            bool all_nan = true;
            for (int k = 0; k < 12; k++) all_nan &= isnan(sy_model_weight_data(m, 0)[k]);
            CHECK(all_nan == (atoi(lines[i] + 12) == 1), "%s: %s", name, lines[i]);
            i++;
        }
        free(text);
        fclose(out);
        sy_history_free(h);
        sy_model_free(m);
    }
    CHECK(cases == 5, "the fixture holds %d cases", cases);
    free_lines(lines);
    sy_tensor_free(xv);
    sy_tensor_free(yv);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

/* ---- BackupAndRestore against Keras -------------------------------------------------------- */

/* An exception from a callback, as the fixture's Interrupt raises it */
typedef struct interrupter {
    bool at_batch;
    int32_t epoch, now;
    int64_t batch;
} interrupter;

static sy_status int_epoch_begin(void *ctx, sy_model *m, int32_t epoch) {
    (void)m;
    ((interrupter *)ctx)->now = epoch;
    return SY_OK;
}

static sy_status int_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)logs;
    const interrupter *t = ctx;
    if (t->at_batch && t->now == t->epoch && step == t->batch)
        return sy_error(SY_ERR_INTERNAL, "interrupted at epoch %d, batch %lld", t->epoch,
                        (long long)step);
    return SY_OK;
}

static sy_status int_epoch_end(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m, (void)logs;
    const interrupter *t = ctx;
    if (!t->at_batch && epoch == t->epoch)
        return sy_error(SY_ERR_INTERNAL, "interrupted at epoch %d's end", epoch);
    return SY_OK;
}

static double halve(void *user, int32_t epoch, double lr) {
    (void)user, (void)epoch;
    return lr * 0.5;
}

/* The golden model with Adam(0.01), as the fixture's */
static sy_model *adam_model(const sy_npz *z) {
    return golden_model_with(z, sy_optimizer_adam(0.01f));
}

static void lr_callback(const char *kind, sy_callback *out) {
    if (!strcmp(kind, "scheduler")) {
        CHECK_OK(sy_callback_learning_rate_scheduler(halve, NULL, 0, NULL, out));
        return;
    }
    sy_reduce_lr_options r = sy_reduce_lr_options_default();
    r.monitor = "loss";
    r.factor = 0.5;
    r.patience = 0;
    r.min_delta = 10.0;
    CHECK_OK(sy_callback_reduce_lr_on_plateau(&r, out));
}

static bool dir_has_files(const char *dir) {
    DIR *d = opendir(dir);
    bool any = false;
    for (struct dirent *e; d && (e = readdir(d));) any |= e->d_name[0] != '.';
    if (d) closedir(d);
    return any;
}

/* Keras's BackupAndRestore: a fit interrupted by an exception from a callback, then resumed by a
 * new model with new callbacks on the same directory: where it goes on (epoch, and step with an
 * integer save_freq), the rate it had (a LearningRateScheduler's, a ReduceLROnPlateau's; not
 * ReduceLROnPlateau's own state, which Keras does not keep), the optimizer's state and step count,
 * the logs, the printed lines and the weights. Where Keras resumes in the middle of an epoch it
 * restarts its data iterator (same_data 0), so there only the position, the epochs and the rates
 * are compared. */
static void test_backup_and_restore_golden(void) {
    char **lines = read_lines("backup_and_restore.txt");
    sy_npz *z = open_fixture("fit_args.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    char dir[1024];
    int cases = 0;
    const char *name;
    for (size_t i = 0; (name = next_case(lines, &i)); cases++) {
        char kind[32] = "";
        int64_t save_freq = 0;
        interrupter stop = {.epoch = -1};
        bool interrupted = false, interrupt_first = false, same_data = true;
        snprintf(dir, sizeof dir, "%s/backup_%s", tmp_root, name);
        for (; lines[i] && !strncmp(lines[i], "option ", 7); i++) {
            const char *v = lines[i] + 7;
            if (!strncmp(v, "save_freq ", 10))
                save_freq = strcmp(v + 10, "epoch") ? atoll(v + 10) : 0;
            else if (!strncmp(v, "lr_callback ", 12))
                snprintf(kind, sizeof kind, "%s", v + 12);
            else if (!strncmp(v, "interrupt_first ", 16))
                interrupt_first = atoi(v + 16) == 1;
            else if (!strncmp(v, "interrupt batch ", 16)) {
                interrupted = stop.at_batch = true;
                CHECK(sscanf(v + 16, "%d %lld", &stop.epoch, (long long *)&stop.batch) == 2, "%s",
                      v);
            } else if (!strncmp(v, "interrupt epoch ", 16)) {
                interrupted = true;
                stop.epoch = atoi(v + 16);
            }
        }
        sy_fit_options o = golden_fit();
        o.epochs = 4;
        if (!strcmp(name, "keep")) { /* delete_checkpoint false: the finished run's backup stays */
            sy_model *first = adam_model(z), *second = adam_model(z);
            sy_callback cb;
            CHECK_OK(sy_callback_backup_and_restore(dir, 0, false, &cb));
            o.callbacks = &cb;
            o.n_callbacks = 1;
            CHECK_OK(sy_model_fit(first, x, y, &o, NULL));
            CHECK(lines[i] && !strncmp(lines[i], "backup_left ", 12) &&
                      dir_has_files(dir) == (atoi(lines[i] + 12) == 1),
                  "%s: %s", name, lines[i]);
            sy_history *h = NULL;
            CHECK_OK(sy_model_fit(second, x, y, &o, &h));
            CHECK(h && sy_history_epochs(h) == 0 && !strcmp(lines[i + 1], "resumed_epochs "),
                  "keep: Keras's second fit runs no epoch (%s), here %d", lines[i + 1],
                  h ? sy_history_epochs(h) : -1);
            CHECK(sy_model_iterations(second) == atoll(lines[i + 2] + 11), "keep: %s, here %lld",
                  lines[i + 2], (long long)sy_model_iterations(second));
            for (int k = 0; k < 12; k++)
                CHECK(sy_model_weight_data(second, 0)[k] == sy_model_weight_data(first, 0)[k],
                      "keep: the finished run's weights restored");
            i += 3;
            sy_history_free(h);
            sy_callback_free(&cb);
            sy_model_free(first);
            sy_model_free(second);
            continue;
        }
        if (interrupted) {
            sy_model *m = adam_model(z);
            sy_callback cbs[3];
            CHECK_OK(sy_callback_backup_and_restore(dir, save_freq, true,
                                                    &cbs[interrupt_first ? 1 : 0]));
            cbs[interrupt_first ? 0 : 1] = (sy_callback){.ctx = &stop,
                                                         .on_epoch_begin = int_epoch_begin,
                                                         .on_train_batch_end = int_batch_end,
                                                         .on_epoch_end = int_epoch_end};
            lr_callback(kind, &cbs[2]);
            o.callbacks = cbs;
            o.n_callbacks = 3;
            CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_INTERNAL, "interrupted at epoch");
            CHECK(lines[i] && !strncmp(lines[i], "interrupted_iterations ", 23) &&
                      sy_model_iterations(m) == atoll(lines[i] + 23),
                  "%s: Keras's %s, here %lld", name, lines[i] ? lines[i] : "?",
                  (long long)sy_model_iterations(m));
            i++;
            sy_callback_free(&cbs[interrupt_first ? 1 : 0]);
            sy_callback_free(&cbs[2]);
            sy_model_free(m);
        }
        if (lines[i] && !strncmp(lines[i], "same_data ", 10))
            same_data = atoi(lines[i++] + 10) == 1;
        /* a new process: a new model and callbacks, the same directory */
        sy_model *m = adam_model(z);
        sy_callback cbs[2];
        CHECK_OK(sy_callback_backup_and_restore(dir, save_freq, true, &cbs[0]));
        lr_callback(kind, &cbs[1]);
        FILE *out = tmpfile();
        o.callbacks = cbs;
        o.n_callbacks = 2;
        o.verbose = 2;
        o.progress = out;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(m, x, y, &o, &h));
        int32_t n = 0;
        CHECK(lines[i] && !strncmp(lines[i], "resumed_epochs", 14), "%s: %s", name, lines[i]);
        for (char *s = lines[i] + 14, *end; *s; s = end, n++) {
            long e = strtol(s, &end, 10);
            if (end == s) break;
            CHECK(h && n < sy_history_epochs(h) && sy_history_epoch(h, n) == e,
                  "%s: Keras resumed with epochs %s", name, lines[i] + 14);
        }
        CHECK(h && sy_history_epochs(h) == n, "%s: Keras ran %d epochs, here %d", name, n,
              h ? sy_history_epochs(h) : -1);
        i++;
        for (int32_t e = 0; lines[i] && !strncmp(lines[i], "history ", 8); i++, e++) {
            char *end;
            strtol(lines[i] + 8, &end, 10);
            if (h && e < sy_history_epochs(h))
                check_logs_line(lines[i], end, sy_history_logs(h, e), same_data);
        }
        char *text = file_text(out);
        check_printed(name, lines, &i, text, same_data ? NULL : "Epoch ");
        for (; lines[i] && strcmp(lines[i], "end"); i++) {
            const char *l = lines[i];
            if (!strncmp(l, "iterations ", 11))
                CHECK(sy_model_iterations(m) == atoll(l + 11), "%s: %s, here %lld", name, l,
                      (long long)sy_model_iterations(m));
            else if (!strncmp(l, "learning_rate ", 14))
                CHECK((float)sy_model_learning_rate(m) == (float)atof(l + 14), "%s: %s, here %.9g",
                      name, l, sy_model_learning_rate(m));
            else if (!strncmp(l, "backup_left ", 12))
                CHECK(dir_has_files(dir) == (atoi(l + 12) == 1), "%s: %s", name, l);
            else if (same_data && (!strncmp(l, "kernel ", 7) || !strncmp(l, "bias ", 5))) {
                bool kernel = l[0] == 'k';
                const char *s = l + (kernel ? 7 : 5);
                for (int k = 0; k < (kernel ? 12 : 3); k++) {
                    char *end;
                    double v = strtod(s, &end);
                    s = end;
                    CHECK_CLOSE(sy_model_weight_data(m, kernel ? 0 : 1)[k], v, 1e-5, 1e-6,
                                "%s: %s[%d]", name, kernel ? "kernel" : "bias", k);
                }
            }
        }
        free(text);
        fclose(out);
        sy_history_free(h);
        sy_callback_free(&cbs[0]);
        sy_callback_free(&cbs[1]);
        sy_model_free(m);
    }
    CHECK(cases == 11, "the fixture holds %d cases", cases);
    free_lines(lines);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

/* ---- temporal sample weights against Keras ----------------------------------------------------
 */

/* Dense(4, softmax) over (5 steps, 3 features), Masking(0.0) before it with `masked`, SGD(0.1),
 * sparse categorical crossentropy, metrics and weighted_metrics accuracy, with the fixture's
 * initial weights. */
static sy_model *sequence_model(const sy_npz *z, bool masked) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("temporal", &m));
    if (masked) {
        sy_layer mask = sy_layer_masking(0.0);
        mask.input_shape = sy_shape_of(2, (int64_t)5, (int64_t)3);
        CHECK_OK(sy_model_add(m, &mask));
    }
    sy_layer d = sy_layer_dense(4);
    d.activation = SY_ACTIVATION_SOFTMAX;
    if (!masked) d.input_shape = sy_shape_of(2, (int64_t)5, (int64_t)3);
    CHECK_OK(sy_model_add(m, &d));
    return fixture_compiled(m, z, sy_optimizer_sgd(0.1f, 0.0, false), true);
}

/* The fit's logs (loss, and accuracy and weighted_accuracy when acc is given) and weights against
 * Keras's */
static void check_temporal(const sy_npz *z, const char *what, const sy_history *h, sy_model *m,
                           const char *loss, const char *acc, const char *wacc, const char *kernel,
                           const char *bias) {
    sy_tensor *l = get(z, loss), *a = acc ? get(z, acc) : NULL, *wa = wacc ? get(z, wacc) : NULL,
              *k = get(z, kernel), *b = get(z, bias);
    CHECK(h && sy_history_epochs(h) == 2, "%s: 2 epochs", what);
    for (int32_t e = 0; h && e < sy_history_epochs(h); e++) {
        const sy_logs *lg = sy_history_logs(h, e);
        CHECK_CLOSE(sy_logs_get(lg, "loss"), sy_tensor_get(l, e), 1e-5, 1e-6, "%s: epoch %d loss",
                    what, e);
        if (a)
            CHECK_CLOSE(sy_logs_get(lg, "accuracy"), sy_tensor_get(a, e), 1e-6, 1e-6,
                        "%s: epoch %d accuracy", what, e);
        if (wa)
            CHECK_CLOSE(sy_logs_get(lg, "weighted_accuracy"), sy_tensor_get(wa, e), 1e-6, 1e-6,
                        "%s: epoch %d weighted_accuracy", what, e);
    }
    for (int i = 0; i < 12; i++)
        CHECK_CLOSE(sy_model_weight_data(m, 0)[i], sy_tensor_get(k, i), 1e-5, 1e-6,
                    "%s: kernel[%d]", what, i);
    for (int i = 0; i < 4; i++)
        CHECK_CLOSE(sy_model_weight_data(m, 1)[i], sy_tensor_get(b, i), 1e-5, 1e-6, "%s: bias[%d]",
                    what, i);
    sy_tensor_free(l);
    sy_tensor_free(a);
    sy_tensor_free(wa);
    sy_tensor_free(k);
    sy_tensor_free(b);
}

static sy_fit_options temporal_fit(const sy_tensor *sw) {
    sy_fit_options o = golden_fit();
    o.batch_size = 2;
    o.sample_weight = sw;
    return o;
}

/* Weights per step, (samples, 5), of a sequence output as Keras takes them
 * (tools/golden/make_fit_args_fixtures.py, temporal_fixtures): fit's logs and weights, evaluate
 * with a padded last batch, (samples, 5, 1) alike, a dataset's third component, two replicas, a
 * mask with them, weights per sample of the same model, and the refusals. */
static void test_temporal_weights_golden(void) {
    sy_npz *z = open_fixture("fit_args_temporal.npz");
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *sw = get(z, "sw"), *w = get(z, "w"),
              *mx = get(z, "mask_x");
    sy_model *m = sequence_model(z, false);
    sy_fit_options o = temporal_fit(sw);
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &o, &h));
    check_temporal(z, "temporal", h, m, "t_loss", "t_acc", "t_wacc", "t_kernel", "t_bias");
    sy_history_free(h);
    sy_evaluate_options e = sy_evaluate_options_default();
    e.batch_size = 4;
    e.verbose = 0;
    e.sample_weight = sw;
    sy_logs l;
    CHECK_OK(sy_model_evaluate(m, x, y, &e, &l));
    sy_tensor *te = get(z, "t_eval");
    CHECK_CLOSE(sy_logs_get(&l, "loss"), sy_tensor_get(te, 0), 1e-5, 1e-6,
                "evaluate's loss, weighted per step");
    CHECK_CLOSE(sy_logs_get(&l, "accuracy"), sy_tensor_get(te, 1), 1e-6, 1e-6,
                "evaluate's accuracy");
    CHECK_CLOSE(sy_logs_get(&l, "weighted_accuracy"), sy_tensor_get(te, 2), 1e-6, 1e-6,
                "evaluate's weighted_accuracy");
    sy_model_free(m);

    /* (samples, 5, 1): Keras squeezes the last axis; the same run, bit for bit */
    sy_tensor *sw3 = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(3, (int64_t)6, (int64_t)5, (int64_t)1), &sw3));
    memcpy(sy_tensor_data(sw3), sy_tensor_data(sw), 30 * sizeof(float));
    sy_model *a = sequence_model(z, false), *b = sequence_model(z, false);
    sy_fit_options oa = temporal_fit(sw), ob = temporal_fit(sw3);
    CHECK_OK(sy_model_fit(a, x, y, &oa, NULL));
    CHECK_OK(sy_model_fit(b, x, y, &ob, NULL));
    CHECK(!memcmp(sy_model_weight_data(a, 0), sy_model_weight_data(b, 0), 12 * sizeof(float)),
          "weights (6, 5, 1) train as (6, 5)");
    sy_model_free(a);
    sy_model_free(b);

    /* a dataset's (x, y, sample_weight) elements, and two replicas with a shard of every batch each
     */
    sy_tensor *parts[3] = {x, y, sw};
    sy_dataset *d = NULL, *batched = NULL;
    CHECK_OK(sy_dataset_from_tensor_slices(parts, 3, &d));
    CHECK_OK(sy_dataset_batch(d, 2, true, &batched));
    m = sequence_model(z, false);
    o = temporal_fit(NULL);
    CHECK_OK(sy_model_fit_dataset(m, batched, NULL, &o, &h));
    check_temporal(z, "temporal, from a dataset", h, m, "t_loss", "t_acc", "t_wacc", "t_kernel",
                   "t_bias");
    sy_history_free(h);
    CHECK_OK(sy_model_evaluate_dataset(m, batched, &e, &l));
    CHECK_CLOSE(sy_logs_get(&l, "weighted_accuracy"), sy_tensor_get(te, 2), 1e-6, 1e-6,
                "evaluate's weighted_accuracy from a dataset");
    sy_model_free(m);
    sy_cluster *cluster = NULL;
    sy_strategy *strategy = NULL;
    CHECK_OK(sy_cluster_resolve("cpu:2", &cluster));
    CHECK_OK(sy_strategy_new(cluster, &strategy));
    sy_strategy_scope_enter(strategy);
    m = sequence_model(z, false);
    sy_strategy_scope_exit(strategy);
    o = temporal_fit(sw);
    CHECK_OK(sy_model_fit(m, x, y, &o, &h));
    check_temporal(z, "temporal, 2 replicas", h, m, "t_loss", "t_acc", "t_wacc", "t_kernel",
                   "t_bias");
    sy_history_free(h);
    sy_model_free(m);
    sy_strategy_free(strategy);
    sy_cluster_free(cluster);

    /* one weight per sample for the same sequence output: Keras expands it over the steps */
    m = sequence_model(z, false);
    o = temporal_fit(w);
    CHECK_OK(sy_model_fit(m, x, y, &o, &h));
    check_temporal(z, "per sample, sequence output", h, m, "s_loss", NULL, NULL, "s_kernel",
                   "s_bias");
    sy_history_free(h);
    sy_model_free(m);

    /* a mask with them: sum(loss * w * mask) / sum(mask) */
    m = sequence_model(z, true);
    o = temporal_fit(sw);
    CHECK_OK(sy_model_fit(m, mx, y, &o, &h));
    check_temporal(z, "temporal, masked", h, m, "m_loss", NULL, NULL, "m_kernel", "m_bias");
    sy_tensor *me = get(z, "m_eval");
    for (int k = 0; k < 2; k++) { /* batches of 3, and of 4: a padded last batch, whose padding rows
                                     the mask's count leaves out */
        e.batch_size = 3 + k;
        CHECK_OK(sy_model_evaluate(m, mx, y, &e, &l));
        CHECK_CLOSE(sy_logs_get(&l, "loss"), sy_tensor_get(me, k), 1e-5, 1e-6,
                    "evaluate's masked loss, batch %d", 3 + k);
    }
    sy_tensor_free(me);
    sy_history_free(h);
    sy_model_free(m);

    /* refused as Keras refuses them: another number of steps; a model whose loss is one value per
     * sample */
    sy_tensor *sw4 = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)6, (int64_t)4), &sw4));
    m = sequence_model(z, false);
    o = temporal_fit(sw4);
    CHECK_ERR(sy_model_fit(m, x, y, &o, NULL), SY_ERR_SHAPE, "sample_weight has shape (6, 4)",
              "has 5 steps", "(samples, 5)");
    sy_tensor *parts4[3] = {x, y, sw4};
    sy_dataset *d4 = NULL, *b4 = NULL;
    CHECK_OK(sy_dataset_from_tensor_slices(parts4, 3, &d4));
    CHECK_OK(sy_dataset_batch(d4, 2, true, &b4));
    o = temporal_fit(NULL);
    CHECK_ERR(sy_model_fit_dataset(m, b4, NULL, &o, NULL), SY_ERR_SHAPE, "has 5 steps");
    sy_dataset_free(b4);
    sy_dataset_free(d4);
    sy_model_free(m);
    sy_npz *g = open_fixture("fit_args.npz");
    sy_tensor *gx = get(g, "x"), *gy = get(g, "y"), *gw = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)12, (int64_t)5), &gw));
    m = golden_model(g);
    o = golden_fit();
    o.sample_weight = gw;
    CHECK_ERR(sy_model_fit(m, gx, gy, &o, NULL), SY_ERR_SHAPE, "a weight per step",
              "one value per sample");
    sy_model_free(m);
    sy_tensor_free(gw);
    sy_tensor_free(gx);
    sy_tensor_free(gy);
    sy_npz_close(g);

    sy_tensor_free(sw4);
    sy_tensor_free(te);
    sy_dataset_free(batched);
    sy_dataset_free(d);
    sy_tensor_free(sw3);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(sw);
    sy_tensor_free(w);
    sy_tensor_free(mx);
    sy_npz_close(z);
}

int main(void) {
    if (!files_setup("fit_args", __FILE__)) return 1;
    test_weights_golden();
    test_refusals();
    test_model_checkpoint_golden();
    test_model_checkpoint_files();
    test_backup_and_restore();
    test_terminate_on_nan_golden();
    test_backup_and_restore_golden();
    test_temporal_weights_golden();
    files_cleanup();
    return check_report("test_fit_args");
}
