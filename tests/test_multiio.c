/*
 * test_multiio.c - Functional models with several inputs and several
 * outputs, against tf.keras 2.15 (issue 15): a loss, loss weight and
 * metrics per output, compiled, evaluated, trained and saved as Keras does.
 *
 * The model and its numbers come from tools/golden/make_multiio_fixtures.py
 * (tests/golden/multiio.npz; Keras's own .h5 files in tests/data/keras):
 * two inputs (4,) and (3,), a Dense layer called on both, a Concatenate,
 * and two heads -- a softmax classifier (sparse categorical crossentropy,
 * accuracy) and a regression (mse with loss weight 0.5, mae). The test
 * builds the same model through the C API, sets Keras's weights, and
 * checks evaluate (every log, named and ordered as Keras's) to 1e-6,
 * predict, the weights after one SGD and one Adam step to 1e-5, fit's
 * history names, that training lowers the loss, the same through datasets,
 * replicas and steps_per_execution, Keras's .h5 files (list and dict forms
 * of the losses) loaded, evaluated and their training_config written back
 * byte for byte, and the refusals of bad arguments.
 */
#include "check.h"
#include "io/io_internal.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SY_GOLDEN_DIR
#error "SY_GOLDEN_DIR must name tests/golden"
#endif
#ifndef SY_KERAS_JSON_DIR
#error "SY_KERAS_JSON_DIR must name tests/data/keras"
#endif

static const char *const EVAL_NAMES[] = {"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"};
static const char *const DICT_NAMES[] = {"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mse", "reg_mae"};
#define N_EVAL 5
#define N_DICT 6

static sy_npz *fixture;

static sy_tensor *get(const char *name) {
    sy_tensor *t = NULL;
    sy_status st = fixture ? sy_npz_get(fixture, name, &t) : SY_ERR_NOT_FOUND;
    CHECK(st == SY_OK, "fixture array '%s': %s", name, sy_last_error());
    return t;
}

static double value(const sy_tensor *t, int64_t i) { return t ? sy_tensor_get(t, i) : NAN; }

/* Keras's model, through the C API. */
static sy_model *build(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new_functional("multiio", &m));
    if (!m) return NULL;
    int32_t a, b, pa, pb, ha, hb, h, out[2];
    sy_layer proj_a = sy_layer_dense(5), proj_b = sy_layer_dense(5), shared = sy_layer_dense(6),
             concat = sy_layer_concatenate(-1), cls = sy_layer_dense(3), reg = sy_layer_dense(2);
    proj_a.name = "proj_a";
    proj_b.name = "proj_b";
    shared.name = "shared";
    shared.activation = SY_ACTIVATION_TANH;
    concat.name = "concat";
    cls.name = "cls";
    cls.activation = SY_ACTIVATION_SOFTMAX;
    reg.name = "reg";
    CHECK_OK(sy_model_input(m, sy_shape_of(1, (int64_t)4), "in_a", NULL, &a));
    CHECK_OK(sy_model_input(m, sy_shape_of(1, (int64_t)3), "in_b", NULL, &b));
    CHECK_OK(sy_model_call(m, &proj_a, &a, 1, &pa));
    CHECK_OK(sy_model_call(m, &shared, &pa, 1, &ha));
    CHECK_OK(sy_model_call(m, &proj_b, &b, 1, &pb));
    CHECK_OK(sy_model_call_again(m, "shared", &pb, 1, &hb));
    int32_t both[2] = {ha, hb};
    CHECK_OK(sy_model_call(m, &concat, both, 2, &h));
    CHECK_OK(sy_model_call(m, &cls, &h, 1, &out[0]));
    CHECK_OK(sy_model_call(m, &reg, &h, 1, &out[1]));
    CHECK_OK(sy_model_set_outputs(m, out, 2));
    return m;
}

/* Set (or compare, to tol) every weight from the fixture's "<prefix>.<layer>.<weight>". */
static void weights(sy_model *m, const char *prefix, bool set, double tol) {
    for (int32_t i = 0; m && i < sy_model_weight_count(m); i++) {
        char key[160];
        const char *name = sy_model_weight_name(m, i);
        snprintf(key, sizeof key, "%s.%s", prefix, name);
        for (char *c = key + strlen(prefix) + 1; *c; c++)
            if (*c == '/') *c = '.';
        char *colon = strrchr(key, ':');
        if (colon) *colon = 0;
        sy_tensor *t = get(key);
        sy_shape s = sy_model_weight_shape(m, i);
        float *w = sy_model_weight_data(m, i);
        CHECK(t && sy_tensor_count(t) == sy_shape_count(&s), "%s: %lld values", key, (long long)sy_shape_count(&s));
        for (int64_t k = 0; t && k < sy_shape_count(&s); k++) {
            if (set) w[k] = (float)sy_tensor_get(t, k);
            else CHECK_CLOSE(w[k], sy_tensor_get(t, k), tol, tol, "%s[%lld]", key, (long long)k);
        }
        sy_tensor_free(t);
    }
}

/* Keras's compile(opt, loss=["sparse_categorical_crossentropy", "mse"],
 * loss_weights=[1.0, 0.5], metrics=[["accuracy"], ["mae"]]). */
static void compile_list(sy_model *m, sy_optimizer opt) {
    static const char *const acc[] = {"accuracy"}, *const mae[] = {"mae"};
    static const double lw[] = {1.0, 0.5};
    sy_compile_output outs[2] = {{.loss = "sparse_categorical_crossentropy", .metrics = acc, .n_metrics = 1},
                                 {.loss = "mse", .metrics = mae, .n_metrics = 1}};
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = opt;
    c.outputs = outs;
    c.n_outputs = 2;
    c.loss_weights = lw;
    c.n_loss_weights = 2;
    CHECK_OK(sy_model_compile(m, &c));
}

typedef struct data {
    sy_tensor *x[2], *y[2];
} data;

static data batch(void) {
    data d = {{get("x_a"), get("x_b")}, {get("y_cls"), get("y_reg")}};
    return d;
}

static void data_free(data *d) {
    for (int i = 0; i < 2; i++) {
        sy_tensor_free(d->x[i]);
        sy_tensor_free(d->y[i]);
    }
}

#define X(d) ((const sy_tensor *const *)(d).x)
#define Y(d) ((const sy_tensor *const *)(d).y)

static sy_evaluate_options quiet(int64_t batch_size) {
    sy_evaluate_options o = sy_evaluate_options_default();
    o.batch_size = batch_size;
    o.verbose = 0;
    return o;
}

/* logs hold exactly `names`, in that order, with the values of `want`
 * (NULL: names only) to tol. */
static void check_logs(const char *what, const sy_logs *l, const char *const *names, int n, const sy_tensor *want,
                       double tol) {
    CHECK(l->n == n, "%s: %d logs, Keras has %d", what, l->n, n);
    for (int i = 0; i < n && i < l->n; i++) {
        CHECK(!strcmp(l->names[i], names[i]), "%s: log %d is '%s', Keras's '%s'", what, i, l->names[i], names[i]);
        if (want) CHECK_CLOSE(l->values[i], value(want, i), tol, tol, "%s: %s", what, names[i]);
    }
}

/* ---- against Keras ------------------------------------------------------------------------ */

static void test_golden(void) {
    sy_model *m = build();
    if (!m) return;
    weights(m, "init", true, 0);
    compile_list(m, sy_optimizer_sgd(0.1f, 0.0f, false));
    data d = batch();
    sy_tensor *want = get("eval"), *pred[2] = {NULL, NULL};
    sy_evaluate_options eo = quiet(8);
    sy_logs l;
    CHECK_OK(sy_model_evaluate_multi(m, X(d), 2, Y(d), 2, &eo, &l));
    check_logs("evaluate", &l, EVAL_NAMES, N_EVAL, want, 1e-6);
    /* another batch size (a padded last batch) gives the same */
    eo.batch_size = 3;
    CHECK_OK(sy_model_evaluate_multi(m, X(d), 2, Y(d), 2, &eo, &l));
    check_logs("evaluate in batches of 3", &l, EVAL_NAMES, N_EVAL, want, 1e-6);
    CHECK_OK(sy_model_predict_multi(m, X(d), 2, &eo, pred, 2));
    const char *keys[2] = {"pred_cls", "pred_reg"};
    for (int j = 0; j < 2; j++) {
        sy_tensor *p = get(keys[j]);
        CHECK(pred[j] && p && sy_tensor_count(pred[j]) == sy_tensor_count(p), "%s: one tensor per output", keys[j]);
        for (int64_t k = 0; pred[j] && p && k < sy_tensor_count(p); k++)
            CHECK_CLOSE(sy_tensor_get(pred[j], k), sy_tensor_get(p, k), 1e-6, 1e-6, "%s[%lld]", keys[j], (long long)k);
        sy_tensor_free(p);
        sy_tensor_free(pred[j]);
    }
    /* one SGD step on the whole batch */
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 8;
    f.shuffle = false;
    f.verbose = 0;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, &h));
    if (h) check_logs("fit's history", sy_history_logs(h, 0), EVAL_NAMES, N_EVAL, want, 1e-6);
    sy_history_free(h);
    weights(m, "sgd", false, 1e-5);
    /* one Adam step from the same weights */
    weights(m, "init", true, 0);
    compile_list(m, sy_optimizer_adam(0.01f));
    CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, NULL));
    weights(m, "adam", false, 1e-5);
    /* fit's history with validation data: Keras's names, in Keras's order */
    static const char *const history[] = {"loss",     "cls_loss",     "reg_loss",     "cls_accuracy",     "reg_mae",
                                          "val_loss", "val_cls_loss", "val_reg_loss", "val_cls_accuracy", "val_reg_mae"};
    f.batch_size = 4;
    f.x_val_list = X(d);
    f.n_x_val = 2;
    f.y_val_list = Y(d);
    f.n_y_val = 2;
    CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, &h));
    if (h) check_logs("history with validation", sy_history_logs(h, 0), history, 10, NULL, 0);
    sy_history_free(h);
    sy_tensor_free(want);
    data_free(&d);
    sy_model_free(m);
}

/* ---- training ------------------------------------------------------------------------------- */

/* n samples whose class is where a + b's sums fall and whose targets are
 * smooth functions of them: something to learn. */
static data synthetic(int64_t n) {
    data d;
    sy_tensor_new(SY_F32, sy_shape_of(2, n, (int64_t)4), &d.x[0]);
    sy_tensor_new(SY_F32, sy_shape_of(2, n, (int64_t)3), &d.x[1]);
    sy_tensor_new(SY_I32, sy_shape_of(1, n), &d.y[0]);
    sy_tensor_new(SY_F32, sy_shape_of(2, n, (int64_t)2), &d.y[1]);
    float *a = sy_tensor_data(d.x[0]), *b = sy_tensor_data(d.x[1]), *r = sy_tensor_data(d.y[1]);
    int32_t *c = sy_tensor_data(d.y[0]);
    for (int64_t i = 0; i < n; i++) {
        float sa = 0, sb = 0;
        for (int k = 0; k < 4; k++) sa += a[i * 4 + k] = (float)((i * 7 + k * 13) % 17) / 17.0f - 0.5f;
        for (int k = 0; k < 3; k++) sb += b[i * 3 + k] = (float)((i * 5 + k * 11) % 13) / 13.0f - 0.5f;
        c[i] = sa + sb > 0.3f ? 2 : sa + sb < -0.3f ? 0 : 1;
        r[i * 2] = 0.5f * sa - sb;
        r[i * 2 + 1] = sa * sb;
    }
    return d;
}

static void test_training(void) {
    sy_model *m = build();
    if (!m) return;
    compile_list(m, sy_optimizer_adam(0.02f));
    data d = synthetic(128);
    sy_fit_options f = sy_fit_options_default();
    f.epochs = 15;
    f.batch_size = 16;
    f.verbose = 0;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, &h));
    if (h) {
        const sy_logs *first = sy_history_logs(h, 0), *last = sy_history_logs(h, 14);
        for (int i = 0; i < 3; i++)
            CHECK(sy_logs_get(last, EVAL_NAMES[i]) < 0.6 * sy_logs_get(first, EVAL_NAMES[i]), "%s falls: %g -> %g",
                  EVAL_NAMES[i], sy_logs_get(first, EVAL_NAMES[i]), sy_logs_get(last, EVAL_NAMES[i]));
        CHECK_CLOSE(sy_logs_get(last, "loss"), sy_logs_get(last, "cls_loss") + 0.5 * sy_logs_get(last, "reg_loss"), 1e-5,
                    1e-6, "loss = cls_loss + 0.5 reg_loss");
    }
    sy_history_free(h);

    /* the same numbers from a dataset of (x_a, x_b, y_cls, y_reg) batches */
    sy_evaluate_options eo = quiet(16);
    sy_logs arrays, from_ds;
    CHECK_OK(sy_model_evaluate_multi(m, X(d), 2, Y(d), 2, &eo, &arrays));
    sy_tensor *parts[4] = {d.x[0], d.x[1], d.y[0], d.y[1]};
    sy_dataset *slices = NULL, *ds = NULL;
    CHECK_OK(sy_dataset_from_tensor_slices(parts, 4, &slices));
    if (slices) CHECK_OK(sy_dataset_batch(slices, 16, true, &ds));
    if (ds) {
        CHECK_OK(sy_model_evaluate_dataset(m, ds, &eo, &from_ds));
        check_logs("evaluate_dataset", &from_ds, EVAL_NAMES, N_EVAL, NULL, 0);
        for (int i = 0; i < N_EVAL; i++)
            CHECK_CLOSE(from_ds.values[i], arrays.values[i], 1e-6, 1e-7, "dataset's %s", EVAL_NAMES[i]);
        sy_tensor *pa[2] = {NULL, NULL}, *pd[2] = {NULL, NULL};
        CHECK_OK(sy_model_predict_multi(m, X(d), 2, &eo, pa, 2));
        CHECK_OK(sy_model_predict_dataset_multi(m, ds, &eo, pd, 2));
        for (int j = 0; j < 2; j++) {
            CHECK(pa[j] && pd[j] && sy_tensor_count(pa[j]) == sy_tensor_count(pd[j]) &&
                      !memcmp(sy_tensor_data(pa[j]), sy_tensor_data(pd[j]), (size_t)sy_tensor_count(pa[j]) * 4),
                  "predict_dataset_multi: output %d as predict_multi's", j);
            sy_tensor_free(pa[j]);
            sy_tensor_free(pd[j]);
        }
        sy_tensor *one = NULL;
        CHECK_ERR(sy_model_predict_dataset(m, ds, &eo, &one), SY_ERR_INVALID_ARGUMENT, "2 outputs (cls, reg)",
                  "sy_model_predict_dataset_multi");
        sy_history *hd = NULL;
        f.epochs = 2;
        CHECK_OK(sy_model_fit_dataset(m, ds, ds, &f, &hd));
        if (hd) CHECK(sy_history_logs(hd, 1)->n == 10 && !strcmp(sy_history_logs(hd, 1)->names[9], "val_reg_mae"),
                      "fit_dataset's history has Keras's 10 names");
        sy_history_free(hd);
        /* elements that lack a label */
        sy_dataset *three = NULL, *tb = NULL;
        CHECK_OK(sy_dataset_from_tensor_slices(parts, 3, &three));
        if (three) CHECK_OK(sy_dataset_batch(three, 16, true, &tb));
        if (tb) CHECK_ERR(sy_model_fit_dataset(m, tb, NULL, &f, NULL), SY_ERR_INVALID_ARGUMENT, "3 components",
                          "(x1, ..., x2, y1, ..., ym)");
        sy_dataset_free(three);
        sy_dataset_free(tb);
    }
    sy_dataset_free(slices);
    sy_dataset_free(ds);
    data_free(&d);
    sy_model_free(m);
}

/* Replicas (each input and label sharded) and steps_per_execution give
 * what one replica, one step per trip, gives. */
static void test_replicas(void) {
    data d = synthetic(96);
    sy_logs logs[3];
    float first_weight[3] = {0};
    for (int k = 0; k < 3; k++) {
        sy_cluster *c = NULL;
        sy_strategy *s = NULL;
        if (k == 1) {
            CHECK_OK(sy_cluster_resolve("cpu:4", &c));
            if (c) CHECK_OK(sy_strategy_new(c, &s));
            if (s) sy_strategy_scope_enter(s);
        }
        sy_model *m = build();
        if (s) sy_strategy_scope_exit(s);
        if (m) {
            weights(m, "init", true, 0);
            static const char *const acc[] = {"accuracy"}, *const mae[] = {"mae"};
            static const double lw[] = {1.0, 0.5};
            sy_compile_output outs[2] = {{.loss = "sparse_categorical_crossentropy", .metrics = acc, .n_metrics = 1},
                                         {.loss = "mse", .metrics = mae, .n_metrics = 1}};
            sy_compile_options co = sy_compile_options_default();
            co.optimizer = sy_optimizer_sgd(0.05f, 0.0f, false);
            co.outputs = outs;
            co.n_outputs = 2;
            co.loss_weights = lw;
            co.n_loss_weights = 2;
            co.steps_per_execution = k == 2 ? 3 : 1;
            CHECK_OK(sy_model_compile(m, &co));
            sy_fit_options f = sy_fit_options_default();
            f.batch_size = 16;
            f.epochs = 2;
            f.verbose = 0;
            CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, NULL));
            sy_evaluate_options eo = quiet(20);
            CHECK_OK(sy_model_evaluate_multi(m, X(d), 2, Y(d), 2, &eo, &logs[k]));
            first_weight[k] = sy_model_weight_data(m, 0)[0];
        }
        sy_model_free(m);
        sy_strategy_free(s);
        sy_cluster_free(c);
    }
    for (int k = 1; k < 3; k++) {
        check_logs(k == 1 ? "4 replicas" : "steps_per_execution 3", &logs[k], EVAL_NAMES, N_EVAL, NULL, 0);
        for (int i = 0; i < N_EVAL && i < logs[k].n; i++)
            CHECK_CLOSE(logs[k].values[i], logs[0].values[i], 1e-4, 1e-5, "%s: %s",
                        k == 1 ? "4 replicas" : "steps_per_execution 3", EVAL_NAMES[i]);
        CHECK_CLOSE(first_weight[k], first_weight[0], 1e-4, 1e-5, "%s: a trained weight",
                    k == 1 ? "4 replicas" : "steps_per_execution 3");
    }
    data_free(&d);
}

/* A fit stopped after 2 of 3 epochs and resumed from its checkpoint ends
 * with the weights of one never stopped: each output's running loss sums
 * travel in the checkpoint too. */
static void test_checkpoint(void) {
    data d = synthetic(40);
    char dir[] = "/tmp/systolic_multiio_ckpt_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    float *w[2] = {NULL, NULL};
    size_t count = 0;
    for (int run = 0; run < 2; run++) {
        for (int part = 0; part < (run ? 2 : 1); part++) {
            sy_model *m = build();
            if (!m) continue;
            weights(m, "init", true, 0);
            compile_list(m, sy_optimizer_adam(0.01f));
            sy_fit_options f = sy_fit_options_default();
            f.batch_size = 8;
            f.verbose = 0;
            f.epochs = run && part == 0 ? 2 : 3;
            f.model_dir = run ? dir : NULL;
            f.resume = run && part == 1;
            CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, NULL));
            if (part == (run ? 1 : 0)) { /* the final weights, one after another */
                count = 0;
                for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
                    sy_shape s = sy_model_weight_shape(m, i);
                    count += (size_t)sy_shape_count(&s);
                }
                w[run] = malloc(count * sizeof(float));
                size_t at = 0;
                for (int32_t i = 0; w[run] && i < sy_model_weight_count(m); i++) {
                    sy_shape s = sy_model_weight_shape(m, i);
                    memcpy(w[run] + at, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof(float));
                    at += (size_t)sy_shape_count(&s);
                }
            }
            sy_model_free(m);
        }
    }
    CHECK(w[0] && w[1] && !memcmp(w[0], w[1], count * sizeof(float)),
          "resumed from the epoch-2 checkpoint: the weights of an uninterrupted fit, bit for bit");
    free(w[0]);
    free(w[1]);
    DIR *dh = opendir(dir);
    for (struct dirent *e; dh && (e = readdir(dh));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (dh) closedir(dh);
    rmdir(dir);
    data_free(&d);
}

/* ---- Keras's files ---------------------------------------------------------------------------- */

static char *training_config_of(const char *path) {
    h5_file *f = NULL;
    char *s = NULL;
    CHECK_OK(h5_open(path, &f));
    if (f) CHECK_OK(h5_attr_read_string(f, h5_root(f), "training_config", &s));
    if (f) h5_close(f);
    return s;
}

/* Load Keras's file, evaluate it against `want`, and save it: its
 * training_config comes back byte for byte. */
static sy_model *keras_file(const char *file, const char *want_key, const char *const *names, int n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_KERAS_JSON_DIR, file);
    sy_model *m = NULL;
    CHECK_OK(sy_model_load(path, &m));
    if (!m) return NULL;
    data d = batch();
    sy_tensor *want = get(want_key);
    sy_evaluate_options eo = quiet(8);
    sy_logs l;
    CHECK_OK(sy_model_evaluate_multi(m, X(d), 2, Y(d), 2, &eo, &l));
    check_logs(file, &l, names, n, want, 1e-6);
    char out[] = "/tmp/systolic_multiio_XXXXXX";
    int fd = mkstemp(out);
    if (fd >= 0) close(fd);
    CHECK_OK(sy_model_save(m, out));
    char *keras = training_config_of(path), *ours = training_config_of(out);
    CHECK(keras && ours && !strcmp(keras, ours), "%s: training_config written back as Keras wrote it:\n%s\n%s", file,
          keras ? keras : "(none)", ours ? ours : "(none)");
    sy_model *back = NULL;
    CHECK_OK(sy_model_load(out, &back));
    if (back) {
        sy_logs l2;
        CHECK_OK(sy_model_evaluate_multi(back, X(d), 2, Y(d), 2, &eo, &l2));
        check_logs("saved again", &l2, names, n, want, 1e-6);
    }
    unlink(out);
    sy_free(keras);
    sy_free(ours);
    sy_model_free(back);
    sy_tensor_free(want);
    data_free(&d);
    return m;
}

static void test_keras_files(void) {
    sy_model *m = keras_file("multiio.h5", "eval", EVAL_NAMES, N_EVAL);
    if (m) {
        CHECK(m->form == LOSS_LIST && m->heads[1].weight == 0.5 && m->loss_weights_given, "the list form, read");
        /* its weights are the fixture's: one SGD step gives Keras's */
        data d = batch();
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 8;
        f.verbose = 0;
        CHECK_OK(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, NULL));
        weights(m, "sgd", false, 1e-5);
        data_free(&d);
    }
    sy_model_free(m);
    m = keras_file("multiio_dict.h5", "eval_dict", DICT_NAMES, N_DICT);
    if (m) CHECK(m->form == LOSS_DICT && m->dict_order[0] == 1 && m->dict_order[1] == 0 && m->heads[0].from_logits &&
                     !m->heads[1].from_logits && m->heads[0].weight == 2.0 && m->heads[1].weight == 0.25,
                 "the dict form, read: reg first, cls from logits, weights 2 and 0.25");
    sy_model_free(m);
}

/* ---- refusals ------------------------------------------------------------------------------------ */

static void test_errors(void) {
    sy_model *m = build();
    if (!m) return;
    data d = batch();
    sy_evaluate_options eo = quiet(8);
    sy_logs l;
    /* compile */
    sy_compile_options c = sy_compile_options_default();
    sy_compile_output one[1] = {{.loss = "mse"}};
    c.outputs = one;
    c.n_outputs = 1;
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "1 output entries", "2 outputs ['cls', 'reg']");
    sy_compile_output named[2] = {{.output = "cls", .loss = "sparse_categorical_crossentropy"},
                                  {.output = "foo", .loss = "mse"}};
    c.outputs = named;
    c.n_outputs = 2;
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_NOT_FOUND, "'foo'", "not an output", "['cls', 'reg']");
    named[1].output = "cls";
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "'cls' is given twice");
    named[1].output = NULL;
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "by name");
    sy_compile_output bad_loss[2] = {{.loss = "sparse_categorical_crossentropy"}, {.loss = "hinge_loss"}};
    c.outputs = bad_loss;
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_NOT_FOUND, "output 'reg'", "unknown loss 'hinge_loss'");
    static const char *const acc[] = {"sparse_categorical_accuracy"};
    sy_compile_output bad_metric[2] = {{.loss = "sparse_categorical_crossentropy"},
                                       {.loss = "mse", .metrics = acc, .n_metrics = 1}};
    c.outputs = bad_metric;
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "output 'reg'", "sparse_categorical_accuracy");
    static const double lw[] = {1.0};
    sy_compile_output ok[2] = {{.loss = "sparse_categorical_crossentropy"}, {.loss = "mse"}};
    c.outputs = ok;
    c.loss_weights = lw;
    c.n_loss_weights = 1;
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "1 loss_weights", "2 outputs");
    CHECK(!m->compiled, "refused compiles leave the model uncompiled");
    c.loss_weights = NULL;
    c.n_loss_weights = 0;
    CHECK_OK(sy_model_compile(m, &c));
    /* data */
    CHECK_ERR(sy_model_evaluate_multi(m, X(d), 1, Y(d), 2, &eo, &l), SY_ERR_INVALID_ARGUMENT,
              "expects 2 input arrays (in_a, in_b), but it received 1");
    CHECK_ERR(sy_model_evaluate_multi(m, X(d), 2, Y(d), 1, &eo, &l), SY_ERR_INVALID_ARGUMENT, "2 outputs (cls, reg)",
              "received 1");
    CHECK_ERR(sy_model_evaluate(m, d.x[0], d.y[0], &eo, &l), SY_ERR_INVALID_ARGUMENT, "expects 2 input arrays");
    const sy_tensor *swapped[2] = {d.x[1], d.x[0]};
    CHECK_ERR(sy_model_evaluate_multi(m, swapped, 2, Y(d), 2, &eo, &l), SY_ERR_SHAPE, "x[0]", "(8, 3)", "input 'in_a'",
              "(None, 4)");
    const sy_tensor *labels_swapped[2] = {d.y[1], d.y[0]};
    CHECK_ERR(sy_model_evaluate_multi(m, X(d), 2, labels_swapped, 2, &eo, &l), SY_ERR_SHAPE, "y[0]", "output 'cls'",
              "has shape (8, 2) but", "takes () per sample");
    sy_tensor *short_b = NULL;
    sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)5, (int64_t)3), &short_b);
    const sy_tensor *ragged[2] = {d.x[0], short_b};
    CHECK_ERR(sy_model_fit_multi(m, ragged, 2, Y(d), 2, NULL, NULL), SY_ERR_SHAPE, "cardinality", "x sizes: 8, 5",
              "y sizes: 8, 8");
    sy_fit_options f = sy_fit_options_default();
    f.verbose = 0;
    f.x_val_list = X(d);
    f.n_x_val = 2;
    f.y_val_list = Y(d);
    f.n_y_val = 1;
    CHECK_ERR(sy_model_fit_multi(m, X(d), 2, Y(d), 2, &f, NULL), SY_ERR_INVALID_ARGUMENT, "validation");
    sy_tensor *out[2] = {NULL, NULL};
    CHECK_ERR(sy_model_predict(m, d.x[0], &eo, out), SY_ERR_INVALID_ARGUMENT, "2 outputs", "sy_model_predict_multi");
    CHECK_ERR(sy_model_predict_multi(m, X(d), 2, &eo, out, 1), SY_ERR_INVALID_ARGUMENT, "2 outputs");
    CHECK(!out[0] && !out[1], "nothing given back on a refusal");
    sy_tensor_free(short_b);
    data_free(&d);
    sy_model_free(m);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/multiio.npz", SY_GOLDEN_DIR);
    CHECK_OK(sy_npz_open(path, &fixture));
    test_golden();
    test_training();
    test_replicas();
    test_checkpoint();
    test_keras_files();
    test_errors();
    sy_npz_close(fixture);
    return check_report("test_multiio");
}
