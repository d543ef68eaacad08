/*
 * train.c - the commands that run a model: train, evaluate, predict and
 * summary. Each takes a built-in MODEL (builtin.c) and flags that mirror
 * Keras's compile() and fit() arguments; a flag not given keeps the
 * tutorial's value, which --help lists per model.
 */
#include "cli_internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct run_opts {
    int64_t epochs, steps_per_epoch, batch_size, validation_freq, validation_steps, eval_steps, seed, verbose, count,
        steps_per_execution;
    double learning_rate;
    const char *optimizer, *tpu, *data, *data_compression;
    bool skip_corrupt;
    /* a model from a file (model.json, model.h5) */
    const char *dataset, *loss, *metrics;
    /* saving */
    const char *save_weights, *load_weights, *save_model;
    /* checkpoints */
    const char *model_dir;
    int64_t save_checkpoints_steps, keep_checkpoints;
    bool resume;
    /* TensorBoard */
    const char *logdir;
    int64_t update_freq;
    /* CSV log and early stopping */
    const char *csv_log, *monitor;
    bool csv_append, restore_best_weights;
    int64_t patience;
    double min_delta;
} run_opts;

enum { F_EPOCHS, F_STEPS, F_BATCH, F_OPTIMIZER, F_LR, F_VALFREQ, F_VALSTEPS, F_EVALSTEPS, F_SEED, F_VERBOSE, F_COUNT, F_TPU, F_SPE,
       F_DATA, F_DATA_COMPRESSION, F_SKIP_CORRUPT,
       F_DATASET, F_LOSS, F_METRICS,
       F_SAVE_WEIGHTS, F_LOAD_WEIGHTS, F_SAVE_MODEL,
       F_MODEL_DIR, F_CKPT_STEPS, F_KEEP_CKPT, F_RESUME,
       F_LOGDIR, F_UPDATE_FREQ,
       F_CSV_LOG, F_CSV_APPEND, F_PATIENCE, F_MONITOR, F_MIN_DELTA, F_RESTORE_BEST,
       F_N };

static void make_flags(flag *f, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->verbose = 1;
    o->count = 10;
    o->steps_per_execution = 1;
    f[F_EPOCHS] = (flag){"--epochs", FLAG_INT, &o->epochs, "N", "epochs to train", false};
    f[F_STEPS] = (flag){"--steps-per-epoch", FLAG_INT, &o->steps_per_epoch, "N", "steps per epoch (0: one pass over the training set)", false};
    f[F_BATCH] = (flag){"--batch-size", FLAG_INT, &o->batch_size, "N", "global batch size", false};
    f[F_OPTIMIZER] = (flag){"--optimizer", FLAG_STRING, &o->optimizer, "NAME", "sgd, adam or rmsprop, with Keras's defaults", false};
    f[F_LR] = (flag){"--learning-rate", FLAG_FLOAT, &o->learning_rate, "X", "the optimizer's learning rate", false};
    f[F_VALFREQ] = (flag){"--validation-freq", FLAG_INT, &o->validation_freq, "N", "validate on the test split after every N-th epoch", false};
    f[F_VALSTEPS] = (flag){"--validation-steps", FLAG_INT, &o->validation_steps, "N",
                           "validate on the first N batches of the test split only (default 0: all of it)", false};
    f[F_EVALSTEPS] = (flag){"--steps", FLAG_INT, &o->eval_steps, "N", "evaluate the first N batches only (default 0: all)", false};
    f[F_SEED] = (flag){"--seed", FLAG_INT, &o->seed, "N", "seed of the initial weights, dropout and shuffling (default 0)", false};
    f[F_VERBOSE] = (flag){"--verbose", FLAG_INT, &o->verbose, "N", "0 silent, 1 progress bar, 2 one line per epoch (default 1)", false};
    f[F_COUNT] = (flag){"--count", FLAG_INT, &o->count, "N", "predictions to print (default 10)", false};
    f[F_TPU] = (flag){"--tpu", FLAG_STRING, &o->tpu, "SPEC",
                      "devices to run replicas on: local, cpu, cpu:N (default $SYSTOLIC_TPU, else local: one per core)", false};
    f[F_DATA] = (flag){"--data", FLAG_STRING, &o->data, "tfrecord:GLOB",
                       "train from TFRecord files of tf.train.Examples (as `systolic convert` writes them) through the "
                       "input pipeline; validate on the files with \"test\" for the last \"train\" in their name",
                       false};
    f[F_DATA_COMPRESSION] = (flag){"--data-compression", FLAG_STRING, &o->data_compression, "NAME",
                                   "the --data files' compression: NONE, ZLIB or GZIP (default NONE)", false};
    f[F_SKIP_CORRUPT] = (flag){"--skip-corrupt", FLAG_BOOL, &o->skip_corrupt, "",
                               "skip the --data files' corrupt records, counting them per file on stderr, instead of "
                               "stopping at the first",
                               false};
    /* a model from a file */
    f[F_DATASET] = (flag){"--dataset", FLAG_STRING, &o->dataset, "NAME",
                          "a file model's data: fashion_mnist, mnist or imdb (train, test split)", false};
    f[F_LOSS] = (flag){"--loss", FLAG_STRING, &o->loss, "NAME", "a file model's loss (Keras's name)", false};
    f[F_METRICS] = (flag){"--metrics", FLAG_STRING, &o->metrics, "A,B", "a file model's metrics (Keras's names)", false};
    /* saving */
    f[F_SAVE_WEIGHTS] = (flag){"--save-weights", FLAG_STRING, &o->save_weights, "FILE",
                               "after training, save the weights as Keras's model.save_weights (HDF5)", false};
    f[F_LOAD_WEIGHTS] = (flag){"--load-weights", FLAG_STRING, &o->load_weights, "FILE",
                               "start from the weights in FILE (Keras HDF5 weights or a full model .h5)", false};
    f[F_SAVE_MODEL] = (flag){"--save-model", FLAG_STRING, &o->save_model, "FILE",
                             "after training, save the model as Keras's model.save (FILE.h5) or to_json (FILE.json)",
                             false};
    /* checkpoints */
    f[F_MODEL_DIR] = (flag){"--model-dir", FLAG_STRING, &o->model_dir, "DIR",
                            "write a checkpoint to DIR after every epoch (and --save-checkpoints-steps)", false};
    f[F_CKPT_STEPS] = (flag){"--save-checkpoints-steps", FLAG_INT, &o->save_checkpoints_steps, "N",
                             "also checkpoint every N training steps (needs --model-dir)", false};
    f[F_KEEP_CKPT] = (flag){"--keep-checkpoints", FLAG_INT, &o->keep_checkpoints, "N",
                            "keep the newest N checkpoints in --model-dir (default 5)", false};
    f[F_RESUME] = (flag){"--resume", FLAG_BOOL, &o->resume, "",
                         "continue from the newest checkpoint in --model-dir", false};
    /* TensorBoard */
    f[F_LOGDIR] = (flag){"--logdir", FLAG_STRING, &o->logdir, "DIR",
                         "write TensorBoard event files to DIR/train and DIR/validation", false};
    f[F_UPDATE_FREQ] = (flag){"--update-freq", FLAG_INT, &o->update_freq, "N",
                              "also write per-batch scalars every N steps to --logdir (default 0: epochs only)", false};
    /* CSV log and early stopping */
    f[F_CSV_LOG] = (flag){"--csv-log", FLAG_STRING, &o->csv_log, "FILE", "append each epoch's logs to FILE (Keras's CSVLogger)", false};
    f[F_CSV_APPEND] = (flag){"--csv-append", FLAG_BOOL, &o->csv_append, "", "keep what --csv-log's FILE holds and add to it", false};
    f[F_PATIENCE] = (flag){"--early-stopping", FLAG_INT, &o->patience, "PATIENCE",
                           "stop when --monitor has not improved for PATIENCE epochs (Keras's EarlyStopping)", false};
    f[F_MONITOR] = (flag){"--monitor", FLAG_STRING, &o->monitor, "NAME", "what early stopping watches (default val_loss)", false};
    f[F_MIN_DELTA] = (flag){"--min-delta", FLAG_FLOAT, &o->min_delta, "X",
                            "the least change early stopping counts as an improvement (default 0)", false};
    f[F_RESTORE_BEST] = (flag){"--restore-best-weights", FLAG_BOOL, &o->restore_best_weights, "",
                               "when early stopping stops, restore the best epoch's weights", false};
    f[F_SPE] = (flag){"--steps-per-execution", FLAG_INT, &o->steps_per_execution, "N",
                      "steps per host round trip; the progress bar updates every N steps (default 1)", false};
}

typedef struct command_spec {
    const char *name, *summary;
    const int *flags; /* indices into the flag table, -1 terminated */
} command_spec;

static const int train_flags[] = {F_EPOCHS,     F_STEPS,      F_BATCH,      F_OPTIMIZER,  F_LR,           F_VALFREQ,
                                  F_VALSTEPS,   F_SEED,       F_VERBOSE,    F_TPU,        F_SPE,          F_DATA,
                                  F_DATA_COMPRESSION, F_SKIP_CORRUPT, F_DATASET, F_LOSS,    F_METRICS,      F_SAVE_WEIGHTS,
                                  F_LOAD_WEIGHTS, F_SAVE_MODEL, F_MODEL_DIR, F_CKPT_STEPS,  F_KEEP_CKPT,    F_RESUME,
                                  F_LOGDIR,     F_UPDATE_FREQ, F_CSV_LOG,   F_CSV_APPEND,  F_PATIENCE,     F_MONITOR,
                                  F_MIN_DELTA,  F_RESTORE_BEST, -1};
static const int eval_flags[] = {F_BATCH, F_EVALSTEPS, F_SEED, F_VERBOSE, F_TPU, F_SPE, F_DATASET, F_LOSS, F_METRICS,
                                 F_LOAD_WEIGHTS, -1};
static const int predict_flags[] = {F_BATCH, F_SEED, F_VERBOSE, F_COUNT, F_TPU, F_SPE, F_DATASET, F_LOAD_WEIGHTS, -1};
static const int summary_flags[] = {F_SEED, F_LOAD_WEIGHTS, -1};

static void print_models(FILE *out, bool with_defaults) {
    fprintf(out, "\nmodels%s:\n", with_defaults ? " and the defaults they train with" : "");
    for (int i = 0; i < builtin_count(); i++) {
        const builtin_model *b = builtin_at(i);
        fprintf(out, "  %-18s %s\n", b->name, b->description);
        if (with_defaults)
            fprintf(out, "  %-18s   --epochs %d --steps-per-epoch %lld --batch-size %lld --optimizer %s --learning-rate %g --validation-freq %d\n",
                    "", b->epochs, (long long)b->steps_per_epoch, (long long)b->batch_size, b->optimizer,
                    (double)b->learning_rate, b->validation_freq);
    }
}

static void usage(FILE *out, const command_spec *c, const flag *all) {
    fprintf(out, "usage: systolic %s MODEL [flags]\n\n%s\n\nflags:\n", c->name, c->summary);
    flag shown[F_N];
    int n = 0;
    for (const int *k = c->flags; *k >= 0; k++) shown[n++] = all[*k];
    flags_help(out, shown, n);
    print_models(out, c->flags == train_flags);
    fprintf(out, "\nDatasets are read from $SYSTOLIC_DATASETS, then the cache, else downloaded (but IMDB's review archive\n"
                 "has no public download: put aclImdb_v1_labeled.tar.gz in $SYSTOLIC_DATASETS/imdb/).\n");
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool save_model_name_ok(const char *path) {
    return ends_with(path, ".h5") || ends_with(path, ".hdf5") || ends_with(path, ".json");
}

/* Parse the command line; returns -1 to go on, else an exit status. */
static int parse(const command_spec *c, int argc, char **argv, flag *f, run_opts *o, const builtin_model **model) {
    make_flags(f, o);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, c, f);
            return 0;
        }
    flag allowed[F_N];
    int n = 0;
    for (const int *k = c->flags; *k >= 0; k++) allowed[n++] = f[*k];
    const char *pos[1];
    int n_pos;
    int rc = flags_parse(argc, argv, allowed, n, pos, 1, &n_pos, c->name);
    if (rc) return rc;
    n = 0;
    for (const int *k = c->flags; *k >= 0; k++) f[*k].set = allowed[n++].set;
    if (n_pos == 0) {
        fprintf(stderr, "systolic %s: which model? (see systolic %s --help)\n", c->name, c->name);
        return 2;
    }
    *model = builtin_find(pos[0]);
    if (!*model) {
        fprintf(stderr, "systolic %s: unknown model '%s'; built-in models:", c->name, pos[0]);
        for (int i = 0; i < builtin_count(); i++) fprintf(stderr, " %s", builtin_at(i)->name);
        fprintf(stderr, "\n");
        return 2;
    }
    const builtin_model *b = *model;
    if (!f[F_EPOCHS].set) o->epochs = b->epochs;
    if (!f[F_STEPS].set) o->steps_per_epoch = b->steps_per_epoch;
    if (!f[F_BATCH].set) o->batch_size = b->batch_size;
    if (!f[F_OPTIMIZER].set) o->optimizer = b->optimizer;
    if (!f[F_LR].set) o->learning_rate = b->learning_rate;
    if (!f[F_VALFREQ].set) o->validation_freq = b->validation_freq;
    const char *bad = o->epochs < 0                ? "--epochs must be >= 0"
                      : o->steps_per_epoch < 0     ? "--steps-per-epoch must be >= 0"
                      : o->batch_size <= 0         ? "--batch-size must be positive"
                      : o->validation_freq <= 0    ? "--validation-freq must be positive"
                      : o->validation_steps < 0    ? "--validation-steps must be >= 0"
                      : o->eval_steps < 0          ? "--steps must be >= 0"
                      : o->verbose < 0 || o->verbose > 2 ? "--verbose must be 0, 1 or 2"
                      : !(o->learning_rate >= 0) || isinf(o->learning_rate) ? "--learning-rate must be a number >= 0"
                      : o->seed < 0                ? "--seed must be >= 0"
                      : o->count < 0               ? "--count must be >= 0"
                      : o->steps_per_execution < 1 ? "--steps-per-execution must be >= 1"
                      : o->save_model && !save_model_name_ok(o->save_model)
                          ? "--save-model FILE: the name must end in .h5 or .hdf5 (a full Keras model) or .json (its "
                            "architecture)"
                      : !o->data && (o->data_compression || o->skip_corrupt)
                          ? "--data-compression and --skip-corrupt describe --data's files: give --data tfrecord:GLOB"
                          : NULL;
    if (bad) {
        fprintf(stderr, "systolic %s: %s\n", c->name, bad);
        return 2;
    }
    return -1;
}

static int fail(const char *command, const char *what) {
    fprintf(stderr, "systolic %s: %s%s%s\n", command, what ? what : "", what ? ": " : "", sy_last_error());
    return 1;
}

/* Resolve the devices, build and compile the model in the strategy's
 * scope; load its data. */
static int prepare(const char *command, const builtin_model *b, const run_opts *o, sy_strategy **s, sy_model **m,
                   sy_data_split *d, bool with_data) {
    memset(d, 0, sizeof *d);
    sy_cluster *cluster;
    if (sy_cluster_resolve(o->tpu, &cluster)) return fail(command, "--tpu");
    sy_status st = sy_strategy_new(cluster, s);
    sy_cluster_free(cluster);
    if (st) return fail(command, NULL);
    sy_strategy_scope_enter(*s);
    st = b->build((uint64_t)o->seed, m);
    sy_strategy_scope_exit(*s);
    if (st) return fail(command, b->name);
    sy_compile_options c = sy_compile_options_default();
    if (sy_optimizer_from_name(o->optimizer, &c.optimizer)) return fail(command, NULL);
    c.optimizer.learning_rate = (float)o->learning_rate;
    c.loss = b->loss;
    c.metrics = b->metrics;
    c.n_metrics = b->n_metrics;
    c.steps_per_execution = (int32_t)o->steps_per_execution;
    if (sy_model_compile(*m, &c)) return fail(command, b->name);
    if (o->load_weights && sy_model_load_weights(*m, o->load_weights)) return fail(command, "--load-weights");
    if (with_data && b->load(d)) return fail(command, NULL);
    return 0;
}

static void print_logs(FILE *out, const sy_logs *l) {
    for (int32_t i = 0; i < l->n; i++) fprintf(out, "%s%s: %.4f", i ? " - " : "", l->names[i], l->values[i]);
    fprintf(out, "\n");
}

/* What a command does once its model is built and compiled and its data
 * loaded; returns the exit status. */
typedef int (*body_fn)(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                       const sy_data_split *d);

static int run(const command_spec *c, int argc, char **argv, bool with_data, body_fn body) {
    flag f[F_N];
    run_opts o;
    const builtin_model *b = NULL;
    int rc = parse(c, argc, argv, f, &o, &b);
    if (rc >= 0) return rc;
    sy_model *m = NULL;
    sy_strategy *s = NULL;
    sy_data_split d;
    rc = prepare(c->name, b, &o, &s, &m, &d, with_data && !o.data);
    if (rc == 0) rc = body(c, b, &o, m, &d);
    sy_data_split_free(&d);
    sy_model_free(m);
    sy_strategy_free(s);
    return rc;
}

/* Counts the steps fit runs (the epochs of a dataset have no length known
 * ahead): the hook sees the last step of each host round trip. */
typedef struct step_count {
    int64_t epoch, total;
} step_count;

static sy_status count_steps(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)logs;
    ((step_count *)ctx)->epoch = step + 1;
    return SY_OK;
}

static sy_status count_epoch(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m, (void)epoch, (void)logs;
    step_count *c = ctx;
    c->total += c->epoch;
    c->epoch = 0;
    return SY_OK;
}

/* --save-model FILE: a full Keras .h5 (Keras's save_format "h5" for .h5
 * and .hdf5 names) or the model's JSON; returns non-zero after the
 * message. */
static int save_model(const char *command, const sy_model *m, const char *path) {
    if (ends_with(path, ".h5") || ends_with(path, ".hdf5"))
        return sy_model_save(m, path) ? fail(command, "--save-model") : 0;
    fprintf(stderr, "systolic %s: --save-model %s: only .h5 and .hdf5 (a full Keras model) are written here\n",
            command, path);
    return 1;
}

static int train_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                      const sy_data_split *d) {
    sy_fit_options fo = sy_fit_options_default();
    fo.batch_size = o->batch_size;
    fo.epochs = (int32_t)o->epochs;
    fo.steps_per_epoch = o->steps_per_epoch;
    fo.validation_freq = (int32_t)o->validation_freq;
    fo.validation_steps = o->validation_steps;
    fo.x_val = d->x_test;
    fo.y_val = d->y_test;
    fo.seed = (uint64_t)o->seed;
    fo.verbose = (int32_t)o->verbose;
    step_count count = {0, 0};
    /* Each feature's callback goes into cbs; all are freed at the end. */
    sy_callback cbs[8];
    int32_t n_cbs = 0;
    cbs[n_cbs++] = (sy_callback){&count, NULL, NULL, count_steps, count_epoch, NULL, NULL};
    sy_status st = SY_OK;
    fo.callbacks = cbs;
    sy_history *h = NULL;
    fo.n_callbacks = n_cbs;
    double t0 = now_seconds();
    if (st) {
        /* a callback could not be made: st and its message stand */
    } else if (o->data) {
        sy_tfrecord_options to = sy_tfrecord_options_default();
        to.skip_corrupt = o->skip_corrupt;
        sy_dataset *train = NULL, *val = NULL;
        record_parse parse;
        st = o->data_compression ? sy_compression_from_name(o->data_compression, &to.compression) : SY_OK;
        if (!st)
            st = records_datasets(b, o->data, &to, o->batch_size, o->steps_per_epoch, (uint64_t)o->seed, &parse, &train,
                                  &val);
        if (!st) st = sy_model_fit_dataset(m, train, val, &fo, &h);
        sy_dataset_free(train);
        sy_dataset_free(val);
    } else {
        st = sy_model_fit(m, d->x_train, d->y_train, &fo, &h);
    }
    for (int32_t i = 0; i < n_cbs; i++) sy_callback_free(&cbs[i]);
    if (st) return fail(c->name, b->name);
    if (o->save_weights && sy_model_save_weights(m, o->save_weights)) {
        sy_history_free(h);
        return fail(c->name, "--save-weights");
    }
    if (o->save_model && save_model(c->name, m, o->save_model)) {
        sy_history_free(h);
        return 1;
    }
    double secs = now_seconds() - t0;
    int32_t n = sy_history_epochs(h);
    int64_t steps = count.total, per_epoch = n ? steps / n : 0;
    printf("%s: %d epoch%s of %lld steps in %.1f s (%.0f samples/s)", b->name, n, n == 1 ? "" : "s",
           (long long)per_epoch, secs, secs > 0 ? (double)(steps * o->batch_size) / secs : 0.0);
    if (n > 0) {
        printf("; ");
        print_logs(stdout, sy_history_logs(h, n - 1));
    } else {
        printf("\n");
    }
    sy_history_free(h);
    return 0;
}

static int evaluate_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                         const sy_data_split *d) {
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = o->batch_size;
    eo.steps = o->eval_steps;
    eo.verbose = (int32_t)o->verbose;
    sy_logs l;
    if (sy_model_evaluate(m, d->x_test, d->y_test, &eo, &l)) return fail(c->name, b->name);
    print_logs(stdout, &l);
    return 0;
}

/* Predictions of the first --count test samples (each sample's prediction
 * is the same whatever else is in its batch). A one-unit output is a
 * sigmoid's probability of class 1: the predicted class is 1 above 0.5, as
 * binary_accuracy counts it, and the probability printed is that class's. */
static int predict_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                        const sy_data_split *d) {
    int64_t samples = sy_tensor_shape(d->x_test).dims[0], n = samples < o->count ? samples : o->count;
    printf("sample label predicted probability\n");
    if (n == 0) return 0;
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = o->batch_size;
    eo.verbose = (int32_t)o->verbose;
    sy_tensor *x = NULL, *p = NULL;
    if (builtin_head(d->x_test, n, &x) || sy_model_predict(m, x, &eo, &p)) {
        sy_tensor_free(x);
        return fail(c->name, b->name);
    }
    sy_tensor_free(x);
    sy_shape s = sy_tensor_shape(p);
    int64_t classes = s.dims[s.rank - 1];
    const float *v = sy_tensor_data(p);
    for (int64_t i = 0; i < n; i++) {
        const float *row = v + i * classes;
        int64_t best = 0;
        float prob = row[0];
        if (classes == 1) {
            best = row[0] > 0.5f;
            prob = best ? row[0] : 1.0f - row[0];
        }
        for (int64_t j = 1; j < classes; j++)
            if (row[j] > row[best]) best = j, prob = row[j];
        printf("%6lld %5.0f %9lld %11.4f\n", (long long)i, sy_tensor_get(d->y_test, i), (long long)best, prob);
    }
    sy_tensor_free(p);
    return 0;
}

static int summary_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                        const sy_data_split *d) {
    (void)c, (void)b, (void)o, (void)d;
    sy_model_summary(m, stdout);
    return 0;
}

int cmd_train(int argc, char **argv) {
    static const command_spec c = {"train", "Train a built-in model on its dataset (model.fit), validating on its test split.",
                                   train_flags};
    return run(&c, argc, argv, true, train_body);
}

int cmd_evaluate(int argc, char **argv) {
    static const command_spec c = {"evaluate",
                                   "Evaluate a built-in model on its test split (model.evaluate): loss and metrics over "
                                   "every test sample. The weights are the model's initial ones (seeded).",
                                   eval_flags};
    return run(&c, argc, argv, true, evaluate_body);
}

int cmd_predict(int argc, char **argv) {
    static const command_spec c = {"predict",
                                   "Run a built-in model on the first --count samples of its test split (model.predict) and "
                                   "print its predictions: sample, label, predicted class and its probability (for a "
                                   "one-unit sigmoid output, class 1 when the output is above 0.5).",
                                   predict_flags};
    return run(&c, argc, argv, true, predict_body);
}

int cmd_summary(int argc, char **argv) {
    static const command_spec c = {"summary", "Print a built-in model's Keras summary: layers, output shapes, parameters.",
                                   summary_flags};
    return run(&c, argc, argv, false, summary_body);
}
