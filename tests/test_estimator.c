/*
 * test_estimator.c - the estimator (issue 19) against TensorFlow 2.15's
 * TPUEstimator, and its refusals.
 *
 * tools/golden/make_estimator_fixtures.py ran a small model_fn (Dense(4,
 * relu), Dense(2), sparse softmax cross-entropy, SGD on an exponential
 * decay) in TPUEstimator(use_tpu=False): train(max_steps=6), evaluate(),
 * train(steps=2) resumed from model_dir, predict(). The same model_fn here,
 * from the same initial weights, on the same data:
 *   - use_tpu false: every step's loss (from the "loss = ..., step = ..."
 *     lines), the weights after steps 6 and 8, evaluate's dict (the last
 *     batch of 2 rows on a plan of its own), the predictions, the
 *     checkpoints left in model_dir, the log lines' form, resuming past a
 *     damaged newest checkpoint;
 *   - use_tpu on cpu:2 with CrossShardOptimizer, the host's batch split
 *     (SY_PER_HOST_V1), per-core batches in turn (SY_PER_HOST_V2) and
 *     input_fn once per core, sharding by its invocation index
 *     (SY_PER_SHARD_V1): the same numbers, step by step, to float tolerance;
 *   - use_tpu on cpu:4, a last batch of 5 rows in shards of 2, 2, 1, 0:
 *     predict gives each example once, evaluate's metrics leave the
 *     zero-weight padding out;
 *   - the refusals of issue 19 point 6 and others, each leaving model_dir
 *     as it was.
 */
#include "check.h"
#include "keras/keras_internal.h"
#include "io/io_internal.h" /* ckpt_list */
#include "systolic.h"
#include "golden_check.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static sy_npz *fx;
static const char *const WEIGHTS[4] = {"dense/kernel", "dense/bias", "dense_1/kernel",
                                       "dense_1/bias"};
static const char *const KEYS[4] = {"dense_kernel", "dense_bias", "dense_1_kernel", "dense_1_bias"};

/* ---- the log ---------------------------------------------------------------------------- */

static char logbuf[1 << 16];
static size_t loglen;

static void capture(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level < SY_LOG_INFO) return;
    int n = snprintf(logbuf + loglen, sizeof logbuf - loglen, "%s\n", message);
    if (n > 0 && loglen + (size_t)n < sizeof logbuf) loglen += (size_t)n;
}

static void log_clear(void) {
    loglen = 0;
    logbuf[0] = '\0';
}

/* The "loss = L, step = S" lines since the last clear: losses[S - 1] = L. */
static int log_losses(float *losses, int max) {
    int n = 0;
    for (const char *p = strstr(logbuf, "loss = "); p; p = strstr(p + 1, "loss = ")) {
        if (p != logbuf && p[-1] != '\n') continue;
        float l;
        long long s;
        if (sscanf(p, "loss = %g, step = %lld", &l, &s) == 2 && s >= 1 && s <= max) {
            losses[s - 1] = l;
            n++;
        }
    }
    return n;
}

/* ---- the model_fn and input_fns ---------------------------------------------------------- */

typedef struct run_ctx {
    const sy_tensor *x, *y;
    int64_t take;        /* examples the input gives: 0 all */
    bool drop_remainder; /* train: batch with drop_remainder */
    int input_calls;
    int64_t input_batch; /* params["batch_size"] input_fn got */
    int64_t model_batch; /* and model_fn */
    int use_tpu_param;
    /* what model_fn does wrong, for the refusals */
    bool no_loss, no_metrics, cross_shard, plain, bad_loss_shape, wider, no_predictions, no_relu;
} run_ctx;

static sy_status metric_fn(void *user, const sy_tensor *const *t, int32_t n, sy_metrics *m) {
    (void)user;
    CHECK(n == 2, "metric_fn got %d tensors", n);
    sy_tensor *classes, *p1;
    sy_status st = sy_tensor_argmax(t[1], &classes);
    if (st) return st;
    int64_t rows = sy_shape_count(&(sy_shape){1, {sy_tensor_shape(t[1]).dims[0]}});
    if ((st = sy_tensor_new(SY_F32, sy_shape_of(1, rows), &p1))) {
        sy_tensor_free(classes);
        return st;
    }
    const float *logits = sy_tensor_data(t[1]);
    for (int64_t r = 0; r < rows; r++) /* softmax(logits)[:, 1] */
        ((float *)sy_tensor_data(p1))[r] = 1.0f / (1.0f + expf(logits[2 * r] - logits[2 * r + 1]));
    if (!st) st = sy_metrics_accuracy(m, "accuracy", t[0], classes, NULL);
    if (!st) st = sy_metrics_precision(m, "precision", t[0], classes, NULL);
    if (!st) st = sy_metrics_recall(m, "recall", t[0], classes, NULL);
    if (!st) st = sy_metrics_mean_absolute_error(m, "mae", t[0], p1, NULL);
    if (!st) st = sy_metrics_mean(m, "mean_p", p1, NULL);
    sy_tensor_free(classes);
    sy_tensor_free(p1);
    return st;
}

static sy_node dense(sy_graph *g, sy_node x, const char *name, int64_t in, int64_t out) {
    char k[64], b[64];
    snprintf(k, sizeof k, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    sy_node w = sy_graph_param(g, k, SY_F32, sy_shape_of(2, in, out), sy_init_glorot_uniform(7));
    sy_node bias = sy_graph_param(g, b, SY_F32, sy_shape_of(1, out), sy_init_zeros());
    return sy_graph_bias_add(g, sy_graph_matmul(g, x, w, false, false), bias);
}

static sy_status model_fn(void *user, sy_graph *g, const sy_node *features, int32_t n_features,
                          sy_node labels, sy_mode mode, const sy_params *params,
                          sy_estimator_spec *spec) {
    run_ctx *c = user;
    CHECK(n_features == 1, "n_features %d", n_features);
    c->model_batch = sy_params_batch_size(params);
    c->use_tpu_param = (int)sy_params_get(params, "use_tpu");
    sy_node h = dense(g, features[0], "dense", 3, c->wider ? 5 : 4);
    if (!c->no_relu) h = sy_graph_relu(g, h);
    sy_node logits = dense(g, h, "dense_1", c->wider ? 5 : 4, 2);
    if (mode == SY_MODE_PREDICT) {
        spec->predictions[0] = (sy_prediction){"logits", logits};
        spec->predictions[1] = (sy_prediction){"probabilities", sy_graph_softmax(g, logits, -1)};
        spec->n_predictions = c->no_predictions ? 0 : 2;
        return SY_OK;
    }
    sy_node per = sy_graph_sparse_softmax_cross_entropy(g, logits, labels);
    if (!c->no_loss)
        spec->loss = c->bad_loss_shape ? per : sy_graph_reduce_mean(g, per, NULL, 0, false);
    if (mode == SY_MODE_TRAIN) {
        sy_optimizer sgd = sy_optimizer_sgd(0.5f, 0, false);
        sgd.schedule = sy_lr_exponential_decay(0.5, 3, 0.5, false);
        bool wrap = c->cross_shard || (!c->plain && sy_params_get(params, "use_tpu") == 1);
        spec->train_op = wrap ? sy_cross_shard_optimizer_minimize(sgd, spec->loss)
                              : sy_optimizer_minimize(sgd, spec->loss);
    } else if (!c->no_metrics) {
        spec->eval_metrics = (sy_eval_metrics){metric_fn, NULL, {labels, logits}, 2};
    }
    return SY_OK;
}

/* (x, y) slices, the first `take` of them, batched. */
/* Rows from, from + step, ... of t: tf.data's shard(step, from). */
static sy_status every_row(const sy_tensor *t, int64_t from, int64_t step, sy_tensor **out) {
    sy_shape sh = sy_tensor_shape(t);
    int64_t rows = sh.dims[0], row_bytes = (int64_t)sy_tensor_bytes(t) / rows;
    sh.dims[0] = (rows - from + step - 1) / step;
    sy_status st = sy_tensor_new(sy_tensor_dtype(t), sh, out);
    for (int64_t r = 0; !st && r < sh.dims[0]; r++)
        memcpy((char *)sy_tensor_data(*out) + r * row_bytes,
               (const char *)sy_tensor_data(t) + (from + r * step) * row_bytes, (size_t)row_bytes);
    return st;
}

/* The input of c: under SY_PER_SHARD_V1 (several invocations) each core's call shards it by its
 * invocation index, as TensorFlow's per-shard input_fns do with current_input_fn_deployment(). */
static sy_status dataset(run_ctx *c, const sy_params *params, bool labels, bool repeat, bool drop,
                         sy_dataset **out) {
    c->input_calls++;
    c->input_batch = sy_params_batch_size(params);
    sy_tensor *t[2] = {(sy_tensor *)c->x, (sy_tensor *)c->y}, *own[2] = {NULL, NULL};
    int64_t index = (int64_t)sy_params_get(params, "context.invocation_index"),
            total = (int64_t)sy_params_get(params, "context.total_invocations");
    CHECK(total >= 1 && index >= 0 && index < total, "input_fn: invocation %lld of %lld",
          (long long)index, (long long)total);
    sy_dataset *d, *a, *b;
    sy_status st = SY_OK;
    for (int k = 0; total > 1 && !st && k < 2; k++)
        if (!(st = every_row(t[k], index, total, &own[k]))) t[k] = own[k];
    if (!st) st = sy_dataset_from_tensor_slices(t, labels ? 2 : 1, &d);
    sy_tensor_free(own[0]);
    sy_tensor_free(own[1]);
    if (st) return st;
    if (c->take) {
        st = sy_dataset_take(d, c->take, &a);
        sy_dataset_free(d);
        if (st) return st;
        d = a;
    }
    if (repeat) {
        st = sy_dataset_repeat(d, SY_INFINITE, &a);
        sy_dataset_free(d);
        if (st) return st;
        d = a;
    }
    st = sy_dataset_batch(d, c->input_batch, drop, &b);
    sy_dataset_free(d);
    *out = b;
    return st;
}

static sy_status train_input(void *user, const sy_params *params, sy_dataset **out) {
    run_ctx *c = user;
    return dataset(c, params, true, true, c->drop_remainder, out);
}
static sy_status eval_input(void *user, const sy_params *params, sy_dataset **out) {
    return dataset(user, params, true, false, false, out);
}
static sy_status predict_input(void *user, const sy_params *params, sy_dataset **out) {
    return dataset(user, params, false, false, false, out);
}
static sy_status forever_input(void *user, const sy_params *params, sy_dataset **out) {
    return dataset(user, params, true, true, false, out);
}

/* ---- helpers --------------------------------------------------------------------------------- */

static char *temp_dir(void) {
    char templ[] = "/tmp/systolic-estimator-XXXXXX";
    char *d = mkdtemp(templ);
    return d ? strdup(d) : NULL;
}

static void remove_dir(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The fixture's weights <prefix>_<weight> as e's variables, before model_fn makes them. */
static void set_weights(sy_estimator *e, const char *prefix) {
    for (int i = 0; i < 4; i++) {
        sy_tensor *w = getp(fx, prefix, KEYS[i]);
        int32_t idx;
        CHECK_OK(sy_vars_add(sy_estimator_vars(e), WEIGHTS[i], SY_F32, sy_tensor_shape(w),
                             sy_init_zeros(), &idx));
        memcpy(sy_vars_data(sy_estimator_vars(e), idx), sy_tensor_data(w), sy_tensor_bytes(w));
        sy_tensor_free(w);
    }
}

/* The estimator of the golden run, its variables set to the fixture's initial weights. */
static sy_estimator *golden_estimator(run_ctx *c, const char *model_dir, const char *tpu,
                                      sy_input_pipeline how, int ipl) {
    sy_estimator_options o = sy_estimator_options_default();
    o.model_fn = model_fn;
    o.user = c;
    o.config.model_dir = model_dir;
    o.config.save_summary_steps = 2;
    o.config.save_checkpoints_steps = 4;
    o.config.log_step_count_steps = 1;
    o.config.tpu_config.iterations_per_loop = ipl;
    o.config.tpu_config.per_host_input_for_training = how;
    o.use_tpu = tpu != NULL;
    o.config.tpu = tpu;
    o.train_batch_size = 4;
    o.eval_batch_size = o.predict_batch_size = 6;
    sy_estimator *e = NULL;
    CHECK_OK(sy_estimator_new(&o, &e));
    if (!e) return NULL;
    set_weights(e, "w0");
    return e;
}

static void check_weights(sy_estimator *e, const char *prefix, double rtol) {
    char what[64];
    for (int i = 0; i < 4; i++) {
        sy_vars *v = sy_estimator_vars(e);
        int32_t idx = sy_vars_find(v, WEIGHTS[i]);
        sy_tensor *want = getp(fx, prefix, KEYS[i]);
        snprintf(what, sizeof what, "%s %s", prefix, WEIGHTS[i]);
        compare(what, idx >= 0 ? sy_vars_data(v, idx) : NULL, want, rtol, 1e-6);
        sy_tensor_free(want);
    }
}

/* Steps from + 1 .. to ran in loops of ipl steps: a loss line at each loop's end, TensorFlow's loss
 * of that step. */
static void check_losses(const char *what, int from, int to, int ipl, double rtol) {
    float got[8] = {0};
    int n = log_losses(got, 8);
    CHECK(n == (to - from) / ipl, "%s: %d loss lines, expected %d:\n%s", what, n, (to - from) / ipl,
          logbuf);
    sy_tensor *want = get(fx, "train_loss");
    for (int s = from + ipl; s <= to; s += ipl)
        CHECK_CLOSE(got[s - 1], sy_tensor_get(want, s - 1), rtol, 1e-7, "%s: the loss of step %d",
                    what, s);
    sy_tensor_free(want);
}

static void check_eval(const char *what, const sy_logs *r, bool loss) {
    static const char *const names[] = {"accuracy", "global_step", "loss",  "mae",
                                        "mean_p",   "precision",   "recall"};
    CHECK(r->n == 7, "%s: %d results", what, r->n);
    for (int i = 0; i < 7 && i < r->n; i++)
        CHECK(!strcmp(r->names[i], names[i]), "%s: result %d is %s", what, i, r->names[i]);
    char key[64];
    for (int i = 0; i < 7; i++) {
        if (!loss && !strcmp(names[i], "loss")) continue;
        snprintf(key, sizeof key, "eval_%s", names[i]);
        sy_tensor *want = get(fx, key);
        CHECK_CLOSE(sy_logs_get(r, names[i]), sy_tensor_get(want, 0), 1e-5, 1e-7, "%s: %s", what,
                    names[i]);
        sy_tensor_free(want);
    }
}

static void check_predictions(const char *what, const sy_predictions *p, int64_t examples) {
    CHECK(sy_predictions_examples(p) == examples, "%s: %lld examples", what,
          (long long)sy_predictions_examples(p));
    CHECK(sy_predictions_count(p) == 2 && !strcmp(sy_predictions_name(p, 0), "logits"),
          "%s: the predictions' keys", what);
    const char *names[2] = {"logits", "probabilities"},
               *keys[2] = {"pred_logits", "pred_probabilities"};
    for (int i = 0; i < 2; i++) {
        const sy_tensor *t = sy_predictions_get(p, names[i]);
        sy_tensor *want = get(fx, keys[i]);
        CHECK(t && sy_tensor_shape(t).dims[0] == examples && sy_tensor_shape(t).dims[1] == 2,
              "%s: %s", what, names[i]);
        if (t) {
            const float *g = sy_tensor_data(t);
            for (int64_t k = 0; k < examples * 2; k++)
                CHECK_CLOSE(g[k], sy_tensor_get(want, k), 1e-5, 1e-6, "%s: %s[%lld]", what,
                            names[i], (long long)k);
        }
        sy_tensor_free(want);
    }
}

/* The checkpoint steps in dir, as a list "0 4 6 8". */
static void ckpt_steps(const char *dir, char *buf, size_t size) {
    int64_t *steps;
    int32_t n;
    buf[0] = '\0';
    if (ckpt_list(dir, &steps, &n)) return;
    size_t at = 0;
    for (int32_t i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? " " : "", (long long)steps[i]);
    sy_free(steps);
}

/* ---- the golden run ----------------------------------------------------------------------------
 */

/* TPUEstimator(use_tpu=False)'s run (iterations_per_loop 2, which on a CPU only sets how often
 * TensorFlow logs), or under use_tpu on tpu with pipeline how and ipl steps a loop; in the model
 * directory keep when given, left for the reader. */
static void golden_run(const char *label, const char *tpu, sy_input_pipeline how, int ipl,
                       double rtol, const char *keep) {
    run_ctx c = {.drop_remainder = true};
    sy_tensor *x = get(fx, "x"), *y = get(fx, "y");
    c.x = x, c.y = y;
    char *dir = keep ? strdup(keep) : temp_dir(),
         what[128]; /* keep: model_dir, left for the reader */
    sy_estimator *e = golden_estimator(&c, dir, tpu, how, tpu ? ipl : 2);
    int loop = tpu ? ipl : 1;
    if (!e || !dir) goto out;
    snprintf(what, sizeof what, "%s: train(max_steps=6)", label);
    log_clear();
    CHECK_OK(sy_estimator_train(e, train_input, 0, 6));
    int64_t per_core = tpu ? 4 / sy_estimator_num_replicas(e) : 4;
    CHECK(c.model_batch == per_core && c.use_tpu_param == (tpu != NULL),
          "%s: model_fn's batch_size %lld, use_tpu %d", what, (long long)c.model_batch,
          c.use_tpu_param);
    CHECK(c.input_batch == (how == SY_PER_HOST_V1 || !tpu ? 4 : per_core),
          "%s: input_fn's batch_size %lld", what, (long long)c.input_batch);
    CHECK(c.input_calls == (tpu && how == SY_PER_SHARD_V1 ? 2 : 1), "%s: input_fn called %d times",
          what, c.input_calls);
    check_losses(what, 0, 6, loop, rtol);
    check_weights(e, "w6", 10 * rtol);
    CHECK(sy_estimator_global_step(e) == 6, "%s: global step %lld", what,
          (long long)sy_estimator_global_step(e));
    if (!tpu) {
        CHECK(strstr(logbuf, "Saving checkpoints for 0 into ") &&
                  strstr(logbuf, "Saving checkpoints for 4 into ") &&
                  strstr(logbuf, "Saving checkpoints for 6 into ") &&
                  strstr(logbuf, "\nLoss for final step: 0.76447"),
              "%s: TensorFlow's lines:\n%s", what, logbuf);
        CHECK(strstr(logbuf, "\nglobal_step/sec: ") && strstr(logbuf, "\nexamples/sec: "),
              "%s: steps per second:\n%s", what, logbuf);
    }

    snprintf(what, sizeof what, "%s: evaluate", label);
    log_clear();
    sy_logs r;
    CHECK_OK(sy_estimator_evaluate(e, eval_input, 0, NULL, &r));
    check_eval(what, &r, true);
    CHECK(c.input_batch == 6, "%s: input_fn's batch_size %lld", what, (long long)c.input_batch);
    CHECK(strstr(logbuf, "Restoring parameters from ") && strstr(logbuf, "ckpt-6.syckpt"),
          "%s: restores:\n%s", what, logbuf);
    CHECK(strstr(logbuf,
                 "Saving dict for global step 6: accuracy = 0.5, global_step = 6, loss = 0.69"),
          "%s: TensorFlow's line:\n%s", what, logbuf);

    snprintf(what, sizeof what, "%s: train(steps=2)", label);
    log_clear();
    CHECK_OK(sy_estimator_train(e, train_input, 2, 0));
    check_losses(what, 6, 8, loop, rtol);
    check_weights(e, "w8", 10 * rtol);
    CHECK(strstr(logbuf, "Restoring parameters from ") &&
              !strstr(logbuf, "Saving checkpoints for 6 "),
          "%s: resumes from step 6 without saving it again:\n%s", what, logbuf);

    snprintf(what, sizeof what, "%s: predict", label);
    sy_predictions *p = NULL;
    CHECK_OK(sy_estimator_predict(e, predict_input, &p));
    if (p) check_predictions(what, p, 20);
    sy_predictions_free(p);

    char steps[128];
    ckpt_steps(dir, steps, sizeof steps);
    CHECK(!strcmp(steps, "0 4 6 8"), "%s: checkpoints at %s, TensorFlow's at 0 4 6 8", label,
          steps);
    struct stat sb;
    char eval_dir[1200];
    snprintf(eval_dir, sizeof eval_dir, "%s/eval", dir);
    CHECK(stat(eval_dir, &sb) == 0 && S_ISDIR(sb.st_mode), "%s: no %s", label, eval_dir);

    /* max_steps already reached: nothing runs, nothing is written */
    log_clear();
    CHECK_OK(sy_estimator_train(e, train_input, 0, 6));
    CHECK(strstr(logbuf, "Skipping training since max_steps has already saved.") &&
              sy_estimator_global_step(e) == 8,
          "%s: train(max_steps=6) at step 8:\n%s", label, logbuf);
    ckpt_steps(dir, steps, sizeof steps);
    CHECK(!strcmp(steps, "0 4 6 8"), "%s: checkpoints at %s after skipping", label, steps);

    /* a damaged newest checkpoint (a crash's torn file): resume skips it, naming it, and steps 7
     * and 8 run again from step 6 as TensorFlow ran them */
    if (!tpu && !keep) {
        char path[1300];
        struct stat cs;
        snprintf(path, sizeof path, "%s/ckpt-8.syckpt", dir);
        CHECK(stat(path, &cs) == 0 && truncate(path, cs.st_size / 2) == 0, "%s: truncating %s",
              label, path);
        snprintf(what, sizeof what, "%s: train(max_steps=8) past a damaged ckpt-8", label);
        log_clear();
        CHECK_OK(sy_estimator_train(e, train_input, 0, 8));
        CHECK(strstr(logbuf, "damaged checkpoint") && strstr(logbuf, "ckpt-8.syckpt") &&
                  strstr(logbuf, "ckpt-6.syckpt") && sy_estimator_global_step(e) == 8,
              "%s:\n%s", what, logbuf);
        check_losses(what, 6, 8, loop, rtol);
        check_weights(e, "w8", 10 * rtol);
        ckpt_steps(dir, steps, sizeof steps);
        CHECK(!strcmp(steps, "0 4 6 8"), "%s: checkpoints at %s", what, steps);
    }
out:
    sy_estimator_free(e);
    if (dir && !keep) remove_dir(dir);
    free(dir);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* ---- padding under use_tpu ------------------------------------------------------------------- */

/* cpu:4 from step 8's weights on the first 13 examples in batches of 8: the last batch of 5 rows
 * splits 2, 2, 1, 0, so shard 2 holds a zero row of padding and shard 3 only padding. */
static void padded_run(void) {
    run_ctx c = {.take = 13};
    sy_tensor *x = get(fx, "x"), *y = get(fx, "y");
    c.x = x, c.y = y;
    sy_estimator_options o = sy_estimator_options_default();
    o.model_fn = model_fn;
    o.user = &c;
    o.config.tpu = "cpu:4";
    o.train_batch_size = 4;
    o.eval_batch_size = o.predict_batch_size = 8;
    sy_estimator *e = NULL;
    CHECK_OK(sy_estimator_new(&o, &e));
    if (!e) goto out;
    set_weights(e, "w8");
    sy_predictions *p = NULL;
    CHECK_OK(sy_estimator_predict(e, predict_input, &p));
    if (p) check_predictions("cpu:4, 13 examples in batches of 8: predict", p, 13);
    sy_predictions_free(p);
    /* the metrics over exactly the 13 examples, from TensorFlow's logits at step 8 */
    sy_tensor *logits = get(fx, "pred_logits");
    double right = 0, tp = 0, fp = 0, fn = 0, p1 = 0, mae = 0;
    for (int k = 0; k < 13; k++) {
        int cls = sy_tensor_get(logits, 2 * k + 1) > sy_tensor_get(logits, 2 * k),
            label = (int)sy_tensor_get(y, k);
        double prob =
            1 / (1 + exp(sy_tensor_get(logits, 2 * k) - sy_tensor_get(logits, 2 * k + 1)));
        right += cls == label, tp += cls && label, fp += cls && !label, fn += !cls && label;
        p1 += prob, mae += fabs(prob - label);
    }
    sy_tensor_free(logits);
    sy_logs r;
    CHECK_OK(sy_estimator_evaluate(e, eval_input, 0, NULL, &r));
    const char *what = "cpu:4, 13 examples in batches of 8: evaluate";
    CHECK_CLOSE(sy_logs_get(&r, "accuracy"), right / 13, 1e-6, 0, "%s: accuracy", what);
    CHECK_CLOSE(sy_logs_get(&r, "precision"), tp / (tp + fp), 1e-6, 0, "%s: precision", what);
    CHECK_CLOSE(sy_logs_get(&r, "recall"), tp / (tp + fn), 1e-6, 0, "%s: recall", what);
    CHECK_CLOSE(sy_logs_get(&r, "mean_p"), p1 / 13, 1e-5, 0, "%s: mean_p", what);
    CHECK_CLOSE(sy_logs_get(&r, "mae"), mae / 13, 1e-5, 0, "%s: mae", what);
    CHECK(c.input_batch == 8, "%s: input_fn's batch_size %lld (per host)", what,
          (long long)c.input_batch);
out:
    sy_estimator_free(e);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* ---- refusals ----------------------------------------------------------------------------------
 */

/* Names, sizes and modification times of dir's files: what a refused run must leave alone. */
static void dir_state(const char *dir, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(buf, size, "(none)");
        return;
    }
    char names[64][256];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 64;)
        if (de->d_name[0] != '.') /* not .lock, where every run writes its pid */
            snprintf(names[n++], 256, "%s", de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n && at < size; i++) {
        char path[1400]; /* dir is a temporary directory, names[i] a file name */
        struct stat sb;
        snprintf(path, sizeof path, "%.1100s/%.255s", dir, names[i]);
        stat(path, &sb);
        at += (size_t)snprintf(buf + at, size - at, "%s:%lld:%lld.%09ld ", names[i],
                               (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
                               sb.st_mtim.tv_nsec);
    }
}

static sy_estimator *simple(run_ctx *c, const char *dir, const char *tpu, int64_t train_batch) {
    sy_estimator_options o = sy_estimator_options_default();
    o.model_fn = model_fn;
    o.user = c;
    o.config.model_dir = dir;
    o.config.tpu = tpu;
    o.use_tpu = tpu != NULL;
    o.train_batch_size = train_batch;
    o.eval_batch_size = o.predict_batch_size = 6;
    sy_estimator *e = NULL;
    CHECK_OK(sy_estimator_new(&o, &e));
    return e;
}

static void refusals(void) {
    sy_tensor *x = get(fx, "x"), *y = get(fx, "y");
    char *dir = temp_dir(), sub[1200], before[8192], after[8192];
    if (!dir) return;
    snprintf(sub, sizeof sub, "%s/md", dir);
    run_ctx c = {.x = x, .y = y, .drop_remainder = true};
    sy_estimator *e;

    /* TRAIN without a loss: refused before model_dir is made */
    c.no_loss = true;
    e = simple(&c, sub, NULL, 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_INVALID_ARGUMENT,
              "no loss in TRAIN mode", "Missing loss");
    sy_estimator_free(e);
    c.no_loss = false;
    dir_state(sub, after, sizeof after);
    CHECK(!strcmp(after, "(none)"), "a refused train made model_dir: %s", after);
    c.bad_loss_shape = true;
    e = simple(&c, NULL, NULL, 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_SHAPE, "must be a float32 scalar",
              "(4,)");
    sy_estimator_free(e);
    c.bad_loss_shape = false;

    /* the CrossShardOptimizer: required on several cores, refused without a TPU */
    c.cross_shard = true;
    e = simple(&c, NULL, NULL, 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_INVALID_ARGUMENT,
              "CrossShardOptimizer", "use_tpu is false");
    sy_estimator_free(e);
    c.cross_shard = false, c.plain = true;
    e = simple(&c, NULL, "cpu:2", 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_INVALID_ARGUMENT,
              "CrossShardOptimizer must be used for model training on TPUs");
    sy_estimator_free(e);
    c.plain = false;

    /* batches without drop_remainder: refused under use_tpu, naming the dimension; run without */
    c.drop_remainder = false;
    e = simple(&c, sub, "cpu:2", 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_SHAPE, "static shape", "dimension 0",
              "drop_remainder", "(-1, 3)");
    sy_estimator_free(e);
    dir_state(sub, after, sizeof after);
    CHECK(!strcmp(after, "(none)"), "a refused train made model_dir: %s", after);
    e = simple(&c, NULL, NULL, 4);
    CHECK_OK(sy_estimator_train(e, train_input, 3, 0));
    CHECK(sy_estimator_global_step(e) == 3, "without drop_remainder, use_tpu false: step %lld",
          (long long)sy_estimator_global_step(e));
    sy_estimator_free(e);
    c.drop_remainder = true;

    /* EVAL without eval_metrics under use_tpu; without a TPU the loss alone */
    c.no_metrics = true;
    e = simple(&c, NULL, "cpu:2", 4);
    sy_logs r;
    CHECK_ERR(sy_estimator_evaluate(e, eval_input, 0, NULL, &r), SY_ERR_INVALID_ARGUMENT,
              "no eval_metrics in EVAL mode under use_tpu");
    sy_estimator_free(e);
    e = simple(&c, NULL, NULL, 4);
    CHECK_OK(sy_estimator_evaluate(e, eval_input, 0, NULL, &r));
    CHECK(r.n == 2 && !strcmp(r.names[0], "global_step") && !strcmp(r.names[1], "loss"),
          "evaluate without metrics: %d results", r.n);
    sy_estimator_free(e);
    c.no_metrics = false;

    /* PREDICT without predictions; an eval input that never ends, without steps */
    c.no_predictions = true;
    e = simple(&c, NULL, NULL, 4);
    sy_predictions *p = NULL;
    CHECK_ERR(sy_estimator_predict(e, predict_input, &p), SY_ERR_INVALID_ARGUMENT,
              "0 predictions in PREDICT mode");
    c.no_predictions = false;
    CHECK_ERR(sy_estimator_evaluate(e, forever_input, 0, NULL, &r), SY_ERR_INVALID_ARGUMENT,
              "repeats forever", "give steps");
    CHECK_OK(sy_estimator_evaluate(e, forever_input, 5, NULL, &r));
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 3), SY_ERR_INVALID_ARGUMENT,
              "Can not provide both steps and max_steps");
    CHECK_ERR(sy_estimator_train(e, train_input, -1, 0), SY_ERR_INVALID_ARGUMENT,
              "Must specify steps > 0");
    sy_estimator_free(e);

    /* options: batch sizes that do not divide by the cores, reserved params, num_shards */
    sy_estimator_options o = sy_estimator_options_default();
    o.model_fn = model_fn;
    o.config.tpu = "cpu:2";
    o.train_batch_size = 5;
    e = NULL;
    CHECK_ERR(sy_estimator_new(&o, &e), SY_ERR_INVALID_ARGUMENT,
              "train batch size 5 must be divisible by number of replicas 2");
    o.train_batch_size = 4, o.eval_batch_size = 7;
    CHECK_ERR(sy_estimator_new(&o, &e), SY_ERR_INVALID_ARGUMENT,
              "eval batch size 7 must be divisible", "e.g. 6");
    o.eval_batch_size = 0, o.train_batch_size = 0;
    CHECK_ERR(sy_estimator_new(&o, &e), SY_ERR_INVALID_ARGUMENT,
              "`train_batch_size` cannot be `None`");
    o.train_batch_size = 4, o.config.tpu_config.num_shards = 8;
    log_clear();
    CHECK_OK(sy_estimator_new(&o, &e)); /* ignored, as TPUEstimator ignores it */
    CHECK(e && sy_estimator_num_replicas(e) == 2 && strstr(logbuf, "num_shards is 8") &&
              strstr(logbuf, "has 2 cores"),
          "num_shards 8 on cpu:2:\n%s", logbuf);
    sy_estimator_free(e);
    e = NULL;
    o.config.tpu_config.num_shards = 0;
    sy_params *params;
    CHECK_OK(sy_params_new(&params));
    CHECK_OK(sy_params_set(params, "batch_size", 3));
    o.params = params;
    CHECK_ERR(sy_estimator_new(&o, &e), SY_ERR_INVALID_ARGUMENT, "reserved keys");
    sy_params_free(params);
    CHECK(e == NULL, "a refused estimator was made");
    o.params = NULL;
    CHECK_OK(sy_estimator_new(&o, &e));
    CHECK_ERR(sy_estimator_evaluate(e, eval_input, 0, NULL, &r), SY_ERR_INVALID_ARGUMENT,
              "eval_batch_size in TPUEstimator constructor cannot be `None`");
    CHECK_ERR(sy_estimator_train(e, train_input, 0, 0), SY_ERR_INVALID_ARGUMENT,
              "one of `steps` or `max_steps`");
    sy_estimator_free(e);

    /* a model_dir holding another model's checkpoints: refused, nothing in it changed */
    e = simple(&c, sub, NULL, 4);
    CHECK_OK(sy_estimator_train(e, train_input, 2, 0));
    sy_estimator_free(e);
    dir_state(sub, before, sizeof before);
    c.wider = true;
    e = simple(&c, sub, NULL, 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_SHAPE, "is of another model",
              "dense/kernel", "(3, 5)", "(3, 4)");
    CHECK_ERR(sy_estimator_evaluate(e, eval_input, 0, NULL, &r), SY_ERR_SHAPE,
              "is of another model");
    sy_estimator_free(e);
    c.wider = false;
    dir_state(sub, after, sizeof after);
    CHECK(!strcmp(before, after), "another model's run changed model_dir:\n%s\n%s", before, after);

    /* a model_dir another run holds */
    int lock = -1;
    CHECK_OK(ckpt_lock(sub, &lock));
    e = simple(&c, sub, NULL, 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 2, 0), SY_ERR_STATE, "is in use by another run");
    sy_estimator_free(e);
    ckpt_unlock(lock);
    dir_state(sub, after, sizeof after);
    CHECK(!strcmp(before, after), "a refused run changed model_dir:\n%s\n%s", before, after);

    /* a NaN loss stops training with TensorFlow's words, and no checkpoint claims the NaN weights
     */
    sy_tensor *xn;
    CHECK_OK(sy_tensor_clone(x, &xn));
    ((float *)sy_tensor_data(xn))[13] = NAN; /* row 4: the second batch's */
    c.x = xn;
    c.no_relu = true; /* systolic's relu gives 0 for NaN where TensorFlow's gives NaN */
    log_clear();
    e = simple(&c, sub, NULL, 4);
    CHECK_ERR(sy_estimator_train(e, train_input, 4, 0), SY_ERR_INVALID_ARGUMENT,
              "NaN loss during training", "step 4");
    CHECK(strstr(logbuf, "Model diverged with loss = NaN."), "the NaN's line:\n%s", logbuf);
    sy_estimator_free(e);
    char steps[64];
    ckpt_steps(sub, steps, sizeof steps);
    CHECK(!strcmp(steps, "0 2"), "checkpoints after the NaN: %s", steps);
    c.x = x, c.no_relu = false;
    sy_tensor_free(xn);

    remove_dir(dir);
    free(dir);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* test_estimator --model-dir DIR: the golden run with use_tpu false, its model_dir DIR left for
 * tests/estimator_tensorboard.py to read with TensorBoard's reader. */
int main(int argc, char **argv) {
    sy_set_log(capture, NULL);
    fx = open_fixture("estimator.npz");
    if (!fx) return check_report("test_estimator");
    if (argc == 3 && !strcmp(argv[1], "--model-dir")) {
        golden_run("use_tpu false", NULL, SY_PER_HOST_V1, 0, 1e-5, argv[2]);
        sy_npz_close(fx);
        return check_report("test_estimator");
    }
    golden_run("use_tpu false", NULL, SY_PER_HOST_V1, 0, 1e-5, NULL);
    golden_run("cpu:2, per host, a step a loop", "cpu:2", SY_PER_HOST_V1, 1, 1e-5, NULL);
    golden_run("cpu:2, per host v2, 2 steps a loop", "cpu:2", SY_PER_HOST_V2, 2, 1e-5, NULL);
    golden_run("cpu:2, per shard, 2 steps a loop", "cpu:2", SY_PER_SHARD_V1, 2, 1e-5, NULL);
    padded_run();
    refusals();
    sy_npz_close(fx);
    sy_set_log(NULL, NULL);
    return check_report("test_estimator");
}
