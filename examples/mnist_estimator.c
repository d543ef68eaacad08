/*
 * mnist_estimator.c - TensorFlow's official mnist_tpu.py (tensorflow/tpu,
 * models/official/mnist) on systolic's TPUEstimator, in C.
 *
 * The same model_fn -- image / 255, Conv2D(32, 5x5, same, relu),
 * MaxPooling2D(2x2, same), Conv2D(32, 5x5, same, relu), MaxPooling2D,
 * Flatten, Dense(1024, relu), Dropout(0.4) in training, Dense(10) logits;
 * sparse softmax cross-entropy; SGD on exponential_decay(learning_rate,
 * global_step, 100000, 0.96), wrapped in a CrossShardOptimizer under
 * --use_tpu; eval_metrics (metric_fn, [labels, logits]) with
 * tf.metrics.accuracy of argmax(logits) -- the same flags and defaults:
 *
 *   --use_tpu[=true|false]  (true)    --tpu SPEC     (a device spec: cpu:8, sim:v3-8;
 *                                                     none: $SYSTOLIC_TPU, else local)
 *   --model_dir DIR         (none)    --batch_size N (1024, global)
 *   --train_steps N         (1000)    --eval_steps N (0)
 *   --learning_rate X       (0.05)    --iterations N (50, iterations_per_loop)
 *   --num_shards N          (8)       --enable_predict[=true|false] (true)
 *
 * and two the official script does not have: --dropout X (0.4, the
 * model's rate) -- dropout masks are drawn per core, so runs on 8 cores
 * and on 1 differ from the first step unless it is 0, which is how
 * tests/mnist_estimator_modes.sh compares the two modes step by step --
 * and --log_step_count_steps N (RunConfig's, 100), to see every step.
 *
 * The data: MNIST from $SYSTOLIC_DATASETS (the IDX files, all 60,000
 * training images; the official script reads TFRecords of 55,000), the
 * training input repeated, shuffled with a buffer of 50,000 and batched
 * with drop_remainder as train_input_fn does; evaluation on the 10,000
 * test images. Where the official script skips evaluation at --eval_steps
 * 0 -- TPUEstimator on a TPU needs a step count -- this evaluates the whole
 * test set once (the last batch of 784 runs as it is, or padded under
 * --use_tpu); N > 0 evaluates N batches. Then, as the official script,
 * predictions for the first 10 test images: 'Prediction is "7" (99.9%).'
 *
 *   SYSTOLIC_DATASETS=../shared/datasets build/examples/mnist_estimator --use_tpu --tpu cpu:8
 *   SYSTOLIC_DATASETS=../shared/datasets build/examples/mnist_estimator --use_tpu=false
 *
 * TensorFlow's INFO lines (loss = ..., step = ...; global_step/sec; the
 * evaluation's dict) go to stderr through sy_set_log. Exit status 0, 1
 * for a failure, 2 for a bad flag. Only the public API (systolic.h).
 */
#include <systolic.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct flags {
    bool use_tpu, enable_predict;
    const char *tpu, *model_dir;
    int64_t batch_size, train_steps, eval_steps, iterations, num_shards, log_step_count_steps;
    double learning_rate, dropout;
} flags;

typedef struct data {
    sy_data_split d;
    const flags *f;
} data;

/* ---- the model (mnist.py's, as mnist_tpu.py builds it) ------------------------------------------
 */

static sy_node conv_relu(sy_graph *g, sy_node x, const char *name, int64_t in) {
    char k[64], b[64];
    snprintf(k, sizeof k, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    /* tf.layers' default initializers: glorot_uniform kernels, zero biases */
    sy_node w =
        sy_graph_param(g, k, SY_F32, sy_shape_of(4, (int64_t)5, (int64_t)5, in, (int64_t)32),
                       sy_init_glorot_uniform(in == 1 ? 1 : 2));
    sy_node bias = sy_graph_param(g, b, SY_F32, sy_shape_of(1, (int64_t)32), sy_init_zeros());
    return sy_graph_relu(
        g, sy_graph_bias_add(g, sy_graph_conv2d(g, x, w, 1, 1, SY_PADDING_SAME), bias));
}

static sy_node dense(sy_graph *g, sy_node x, const char *name, int64_t in, int64_t out,
                     uint64_t seed) {
    char k[64], b[64];
    snprintf(k, sizeof k, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    sy_node w = sy_graph_param(g, k, SY_F32, sy_shape_of(2, in, out), sy_init_glorot_uniform(seed));
    sy_node bias = sy_graph_param(g, b, SY_F32, sy_shape_of(1, out), sy_init_zeros());
    return sy_graph_bias_add(g, sy_graph_matmul(g, x, w, false, false), bias);
}

/* metric_fn(labels, logits): {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))} */
static sy_status metric_fn(void *user, const sy_tensor *const *t, int32_t n, sy_metrics *m) {
    (void)user, (void)n;
    sy_tensor *classes;
    sy_status st = sy_tensor_argmax(t[1], &classes);
    if (!st) st = sy_metrics_accuracy(m, "accuracy", t[0], classes, NULL);
    sy_tensor_free(classes);
    return st;
}

static sy_status model_fn(void *user, sy_graph *g, const sy_node *features, int32_t n_features,
                          sy_node labels, sy_mode mode, const sy_params *params,
                          sy_estimator_spec *spec) {
    const flags *f = ((const data *)user)->f;
    (void)n_features;
    int64_t batch = sy_graph_shape(g, features[0]).dims[0];
    /* Normalize from [0, 255] to [0.0, 1.0] */
    sy_node image = sy_graph_div(g, features[0], sy_graph_fill(g, SY_F32, sy_shape_of(0), 255.0));
    sy_node y = conv_relu(g, image, "conv2d", 1);
    y = sy_graph_max_pool2d(g, y, 2, 2, 2, 2, SY_PADDING_SAME);
    y = conv_relu(g, y, "conv2d_1", 32);
    y = sy_graph_max_pool2d(g, y, 2, 2, 2, 2, SY_PADDING_SAME);
    y = sy_graph_reshape(g, y, sy_shape_of(2, batch, (int64_t)(7 * 7 * 32))); /* Flatten */
    y = sy_graph_relu(g, dense(g, y, "dense", 7 * 7 * 32, 1024, 3));
    if (mode == SY_MODE_TRAIN && f->dropout > 0) y = sy_graph_dropout(g, y, (float)f->dropout, 4);
    sy_node logits = dense(g, y, "dense_1", 1024, 10, 5);

    if (mode == SY_MODE_PREDICT) { /* class_ids: argmax of the probabilities, on the host */
        spec->predictions[0] = (sy_prediction){"probabilities", sy_graph_softmax(g, logits, -1)};
        spec->n_predictions = 1;
        return SY_OK;
    }
    spec->loss = sy_graph_reduce_mean(g, sy_graph_sparse_softmax_cross_entropy(g, logits, labels),
                                      NULL, 0, false);
    if (mode == SY_MODE_TRAIN) {
        sy_optimizer sgd = sy_optimizer_sgd((float)f->learning_rate, 0, false);
        sgd.schedule = sy_lr_exponential_decay(f->learning_rate, 100000, 0.96, false);
        spec->train_op = sy_params_get(params, "use_tpu") == 1
                             ? sy_cross_shard_optimizer_minimize(sgd, spec->loss)
                             : sy_optimizer_minimize(sgd, spec->loss);
        return SY_OK;
    }
    spec->eval_metrics = (sy_eval_metrics){metric_fn, NULL, {labels, logits}, 2};
    return SY_OK;
}

/* ---- the input_fns
 * ------------------------------------------------------------------------------- */

/* (images, labels) of a split, the first `take` (0: all), as a dataset of slices. */
static sy_status slices(sy_tensor *x, sy_tensor *y, int64_t take, sy_dataset **out) {
    sy_tensor *t[2] = {x, y};
    sy_dataset *d;
    sy_status st = sy_dataset_from_tensor_slices(t, 2, &d);
    if (st || !take) {
        *out = st ? NULL : d;
        return st;
    }
    st = sy_dataset_take(d, take, out);
    sy_dataset_free(d);
    return st;
}

static sy_status batched(sy_dataset *d, int64_t batch, bool drop, sy_dataset **out) {
    sy_status st = sy_dataset_batch(d, batch, drop, out);
    sy_dataset_free(d);
    return st;
}

/* dataset(train).cache().repeat().shuffle(buffer_size=50000).batch(batch_size, drop_remainder=True)
 */
static sy_status train_input_fn(void *user, const sy_params *params, sy_dataset **out) {
    data *dt = user;
    sy_dataset *d, *r, *s;
    sy_status st = slices(dt->d.x_train, dt->d.y_train, 0, &d);
    if (st) return st;
    st = sy_dataset_repeat(d, SY_INFINITE, &r);
    sy_dataset_free(d);
    if (st) return st;
    st = sy_dataset_shuffle(r, 50000, 0, true, &s);
    sy_dataset_free(r);
    return st ? st : batched(s, sy_params_batch_size(params), true, out);
}

/* the test images, every one: a last smaller batch is evaluated too */
static sy_status eval_input_fn(void *user, const sy_params *params, sy_dataset **out) {
    data *dt = user;
    sy_dataset *d;
    sy_status st = slices(dt->d.x_test, dt->d.y_test, 0, &d);
    return st ? st : batched(d, sy_params_batch_size(params), false, out);
}

/* dataset(test).take(10).batch(batch_size) */
static sy_status predict_input_fn(void *user, const sy_params *params, sy_dataset **out) {
    data *dt = user;
    sy_dataset *d;
    sy_status st = slices(dt->d.x_test, dt->d.y_test, 10, &d);
    return st ? st : batched(d, sy_params_batch_size(params), false, out);
}

/* ---- flags, as absl parses them
 * ------------------------------------------------------------------- */

static void log_line(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level >= SY_LOG_INFO)
        fprintf(stderr, "%s:systolic:%s\n",
                level == SY_LOG_INFO      ? "INFO"
                : level == SY_LOG_WARNING ? "WARNING"
                                          : "ERROR",
                message);
}

static int usage(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "mnist_estimator: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr,
            "\nusage: mnist_estimator [--use_tpu[=true|false]] [--tpu SPEC] [--model_dir DIR] "
            "[--batch_size N] [--train_steps N] [--eval_steps N] [--learning_rate X] "
            "[--iterations N] [--num_shards N] [--enable_predict[=true|false]] [--dropout X] "
            "[--log_step_count_steps N]\n");
    return 2;
}

/* argv[*i] is --name, --name=value or --noname; the value (after '=' or the next argument). */
static int parse(int argc, char **argv, flags *f) {
    struct {
        const char *name;
        char kind; /* b bool, s string, i integer >= 0, p integer > 0, d number */
        void *at;
    } known[] = {{"use_tpu", 'b', &f->use_tpu},
                 {"enable_predict", 'b', &f->enable_predict},
                 {"tpu", 's', &f->tpu},
                 {"model_dir", 's', &f->model_dir},
                 {"batch_size", 'p', &f->batch_size},
                 {"train_steps", 'p', &f->train_steps},
                 {"eval_steps", 'i', &f->eval_steps},
                 {"iterations", 'p', &f->iterations},
                 {"num_shards", 'p', &f->num_shards},
                 {"learning_rate", 'd', &f->learning_rate},
                 {"dropout", 'd', &f->dropout},
                 {"log_step_count_steps", 'i', &f->log_step_count_steps}};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) return usage("unexpected argument '%s'%s", arg, "");
        const char *name = arg + 2, *eq = strchr(name, '='), *value = eq ? eq + 1 : NULL;
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        bool negated = false;
        int k = -1;
        for (int j = 0; j < (int)(sizeof known / sizeof known[0]) && k < 0; j++) {
            if (strlen(known[j].name) == len && !strncmp(name, known[j].name, len))
                k = j;
            else if (known[j].kind == 'b' && !eq && !strncmp(name, "no", 2) &&
                     !strcmp(name + 2, known[j].name))
                k = j, negated = true;
        }
        if (k < 0) return usage("unknown flag '%s'%s", arg, "");
        if (known[k].kind == 'b') {
            bool v = !negated;
            if (value && (!strcmp(value, "false") || !strcmp(value, "0")))
                v = false;
            else if (value && strcmp(value, "true") && strcmp(value, "1"))
                return usage("--%s expects true or false, got '%s'", known[k].name, value);
            *(bool *)known[k].at = v;
            continue;
        }
        if (!value) {
            if (i + 1 >= argc) return usage("--%s expects a value%s", known[k].name, "");
            value = argv[++i];
        }
        char *end;
        errno = 0;
        if (known[k].kind == 's') {
            *(const char **)known[k].at = value;
        } else if (known[k].kind == 'd') {
            double v = strtod(value, &end);
            if (!*value || *end || errno || !isfinite(v) || v < 0)
                return usage("--%s expects a number >= 0, got '%s'", known[k].name, value);
            *(double *)known[k].at = v;
        } else {
            long long v = strtoll(value, &end, 10);
            if (!*value || *end || errno || v < (known[k].kind == 'p') || v > (1LL << 40))
                return usage(known[k].kind == 'p' ? "--%s expects a positive integer, got '%s'"
                                                  : "--%s expects an integer >= 0, got '%s'",
                             known[k].name, value);
            *(int64_t *)known[k].at = v;
        }
    }
    if (f->dropout >= 1) return usage("--dropout expects a rate below 1%s%s", "", "");
    return 0;
}

/* ---- main(), as mnist_tpu.py's
 * ------------------------------------------------------------------- */

static int fail(const char *what) {
    fprintf(stderr, "mnist_estimator: %s: %s\n", what, sy_last_error());
    return 1;
}

int main(int argc, char **argv) {
    flags f = {true, true, NULL, NULL, 1024, 1000, 0, 50, 8, 100, 0.05, 0.4};
    int rc = parse(argc, argv, &f);
    if (rc) return rc;
    sy_set_log(log_line, NULL); /* logging.set_verbosity(logging.INFO) */

    data dt = {.f = &f};
    if (sy_mnist_load_data(&dt.d)) return fail("loading MNIST");
    /* image = tf.reshape(image, [28, 28, 1]) */
    sy_shape nhwc = sy_shape_of(4, (int64_t)-1, (int64_t)28, (int64_t)28, (int64_t)1);
    sy_tensor_reshape(dt.d.x_train, nhwc);
    sy_tensor_reshape(dt.d.x_test, nhwc);

    sy_estimator_options o = sy_estimator_options_default();
    o.model_fn = model_fn;
    o.user = &dt;
    o.use_tpu = f.use_tpu;
    o.config.model_dir = f.model_dir;
    o.config.tpu = f.tpu;
    o.config.tpu_config.iterations_per_loop = f.iterations;
    o.config.tpu_config.num_shards = (int32_t)f.num_shards;
    o.config.log_step_count_steps = f.log_step_count_steps;
    o.train_batch_size = o.eval_batch_size = o.predict_batch_size = f.batch_size;
    o.name = "mnist";
    sy_estimator *e = NULL;
    sy_predictions *p = NULL;
    sy_logs results;
    if (sy_estimator_new(&o, &e)) rc = fail("TPUEstimator");
    /* TPUEstimator.train *requires* a max_steps argument. */
    else if (sy_estimator_train(e, train_input_fn, 0, f.train_steps))
        rc = fail("train");
    else if (sy_estimator_evaluate(e, eval_input_fn, f.eval_steps, NULL, &results))
        rc = fail("evaluate");
    else if (f.enable_predict && sy_estimator_predict(e, predict_input_fn, &p))
        rc = fail("predict");
    if (!rc) {
        printf("accuracy %.4f loss %.4f global_step %.0f\n", sy_logs_get(&results, "accuracy"),
               sy_logs_get(&results, "loss"), sy_logs_get(&results, "global_step"));
        fflush(stdout); /* before the predictions' lines on stderr */
        const sy_tensor *prob = sy_predictions_get(p, "probabilities");
        for (int64_t i = 0; prob && i < sy_predictions_examples(p); i++) {
            const float *row = (const float *)sy_tensor_data(prob) + i * 10;
            int best = 0;
            for (int k = 1; k < 10; k++)
                if (row[k] > row[best]) best = k;
            char line[64];
            snprintf(line, sizeof line, "Prediction is \"%d\" (%.1f%%).", best, 100 * row[best]);
            log_line(NULL, SY_LOG_INFO, line);
        }
    }
    sy_predictions_free(p);
    sy_estimator_free(e);
    sy_data_split_free(&dt.d);
    return rc;
}
