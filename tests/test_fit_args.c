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

static sy_model *golden_model(const sy_npz *z) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("fit_args", &m));
    sy_layer d = sy_layer_dense(3);
    d.activation = SY_ACTIVATION_SOFTMAX;
    d.input_shape = sy_shape_of(1, (int64_t)4);
    CHECK_OK(sy_model_add(m, &d));
    sy_tensor *k = get(z, "kernel0"), *b = get(z, "bias0");
    memcpy(sy_model_weight_data(m, 0), sy_tensor_data(k), 12 * sizeof(float));
    memcpy(sy_model_weight_data(m, 1), sy_tensor_data(b), 3 * sizeof(float));
    sy_tensor_free(k);
    sy_tensor_free(b);
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_sgd(0.1f, 0.0, false);
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    CHECK_OK(sy_model_compile(m, &c));
    return m;
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
    m = golden_model(z);
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_sgd(0.1f, 0.0, false);
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"accuracy"};
    c.metrics = c.weighted_metrics = metrics;
    c.n_metrics = c.n_weighted_metrics = 1;
    CHECK_OK(sy_model_compile(m, &c));
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
        int32_t stop_at = 1;
        CHECK_OK(sy_callback_backup_and_restore(dir, freq, true, &cbs[0]));
        cbs[1] = (sy_callback){.ctx = &stop_at, .on_epoch_end = fail_after};
        o.callbacks = cbs;
        o.n_callbacks = 2;
        CHECK_ERR(sy_model_fit(cut, x, y, &o, NULL), SY_ERR_INTERNAL, "interrupted after epoch 2");
        CHECK(access(dir, F_OK) == 0, "the backup stays after an interruption");
        stop_at = -1;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(cut, x, y, &o, &h));
        CHECK(h && sy_history_epochs(h) >= 1 && sy_history_epoch(h, 0) == (freq ? 1 : 1),
              "save_freq %lld: the resumed run goes on at epoch 2 (0-based 1), got %d",
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

int main(void) {
    if (!files_setup("fit_args", __FILE__)) return 1;
    test_weights_golden();
    test_refusals();
    test_model_checkpoint_golden();
    test_model_checkpoint_files();
    test_backup_and_restore();
    files_cleanup();
    return check_report("test_fit_args");
}
