/*
 * bench_pipeline.c - does the input pipeline keep up? The Fashion-MNIST
 * tutorial model (src/cli/builtin.c) trained at batch 1,000 with one
 * replica per core, fed two ways:
 *
 *   in memory  the training images already decoded, normalised to [0, 1]
 *              and flipped, as float32 tensors: fit() copies its batches
 *              out of them;
 *   pipeline   TFRecord files of tf.train.Examples (the raw bytes, as
 *              `systolic convert` writes them), read through
 *              TFRecordDataset (one file after another: parallel reads
 *              cost CPU the replicas want) -> zip with range (each
 *              element's number, for its random flip) -> shuffle(10,000)
 *              -> map on parallel threads: parse the Example, decode the
 *              bytes to float32, normalise to [0, 1], flip left-right with
 *              probability 1/2 -> batch(1,000, drop_remainder) -> repeat ->
 *              prefetch(AUTOTUNE), through fit_dataset().
 *
 * Both train for the same steps after the same warm-up, in 7 pairs of
 * runs, and the ratio reported is the median of the pairs'. The
 * pipeline's threads compete with the replicas for the two cores, which is
 * the point: the ratio says what feeding costs. Then the pipeline alone:
 * elements per second through it with nothing else running.
 *
 *   build/bench/bench_pipeline [--steps N] [--tpu SPEC] [--dir DIR]
 *
 * --dir: where the TFRecord files go (default: a new directory in /tmp,
 * removed at the end).
 */
#include "cli/cli_internal.h"
#include "core/core_internal.h" /* sy_error, sy_mix64 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH 1000
#define SHARDS 6
#define FLIP_SEED 0x5EED
#define PAIRS 7

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_pipeline: %s: %s\n", what, sy_last_error());
    exit(1);
}

/* Whether element i is flipped: a hash of its number, so the same element
 * gets the same flip whichever thread decodes it. */
static bool flipped(int64_t i) { return sy_mix64((uint64_t)i ^ FLIP_SEED) & 1; }

/* One 28 x 28 image's bytes into floats in [0, 1], flipped left-right when
 * asked. */
static void decode(float *restrict out, const uint8_t *restrict pixels, bool flip) {
    if (flip) /* two loops rather than a choice per pixel, so that each vectorizes */
        for (int r = 0; r < 28; r++)
            for (int c = 0; c < 28; c++) out[r * 28 + c] = (float)pixels[r * 28 + 27 - c] * (1.0f / 255.0f);
    else
        for (int i = 0; i < 28 * 28; i++) out[i] = (float)pixels[i] * (1.0f / 255.0f);
}

/* The pipeline's map: (record, number) -> (image float32 (28, 28, 1), label int64). */
static sy_status parse(void *ctx, const sy_element *in, sy_element *out) {
    (void)ctx;
    sy_string rec = sy_tensor_string(in->c[0], 0);
    sy_feature_spec specs[2] = {{"image", SY_FEATURE_FIXED_LEN, SY_STRING, sy_shape_of(0), NULL},
                                {"label", SY_FEATURE_FIXED_LEN, SY_I64, sy_shape_of(0), NULL}};
    sy_tensor *v[2];
    sy_status st = sy_parse_single_example(rec.data, (size_t)rec.size, specs, 2, v);
    if (st) return st;
    sy_string img = sy_tensor_string(v[0], 0);
    if (img.size != 784) st = sy_error(SY_ERR_CORRUPT, "an image of %lld bytes, not 784", (long long)img.size);
    if (!st) st = sy_tensor_new(SY_F32, sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1), &out->c[0]);
    if (!st) {
        decode(sy_tensor_data(out->c[0]), img.data, flipped(((const int64_t *)sy_tensor_data(in->c[1]))[0]));
        out->c[1] = v[1];
        out->n = 2;
    } else {
        sy_tensor_free(v[1]);
    }
    sy_tensor_free(v[0]);
    return st;
}

/* The training split as SHARDS TFRecord files in dir. */
static void write_records(const sy_data_split *d, const char *dir, char paths[SHARDS][4096]) {
    int64_t n = sy_tensor_shape(d->x_train).dims[0];
    const uint8_t *x = sy_tensor_data(d->x_train), *y = sy_tensor_data(d->y_train);
    for (int s = 0; s < SHARDS; s++) {
        snprintf(paths[s], sizeof paths[s], "%s/train-%05d-of-%05d.tfrecord", dir, s, SHARDS);
        sy_tfrecord_writer *w;
        if (sy_tfrecord_writer_open(paths[s], SY_COMPRESSION_NONE, &w)) die(paths[s]);
        for (int64_t i = n * s / SHARDS; i < n * (s + 1) / SHARDS; i++) {
            sy_example *e;
            sy_tensor *bytes;
            int64_t label = y[i];
            sy_string image = {x + i * 784, 784};
            if (sy_example_new(&e) || sy_example_add_bytes(e, "image", &image, 1) ||
                sy_example_add_int64s(e, "label", &label, 1) || sy_example_serialize(e, &bytes))
                die("example");
            sy_string rec = sy_tensor_string(bytes, 0);
            if (sy_tfrecord_write(w, rec.data, (size_t)rec.size)) die(paths[s]);
            sy_tensor_free(bytes);
            sy_example_free(e);
        }
        if (sy_tfrecord_writer_close(w)) die(paths[s]);
    }
}

/* The pipeline of the top of the file; returns its last stage (the
 * earlier ones stay referenced by it). */
static sy_dataset *pipeline(char paths[SHARDS][4096]) {
    const char *files[SHARDS];
    for (int s = 0; s < SHARDS; s++) files[s] = paths[s];
    sy_dataset *rec, *num, *pair, *mixed, *parsed, *batched, *forever, *ready;
    sy_component_spec specs[2] = {{SY_F32, sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1)}, {SY_I64, sy_shape_of(0)}};
    if (sy_dataset_tfrecord(files, SHARDS, NULL, 1, &rec) || sy_dataset_range(0, INT64_MAX, 1, &num)) die("sources");
    const sy_dataset *both[2] = {rec, num};
    if (sy_dataset_zip(both, 2, &pair) || sy_dataset_shuffle(pair, 10000, 1, true, &mixed) ||
        sy_dataset_map(mixed, parse, NULL, SY_AUTOTUNE, specs, 2, &parsed) ||
        sy_dataset_batch(parsed, BATCH, true, &batched) || sy_dataset_repeat(batched, SY_INFINITE, &forever) ||
        sy_dataset_prefetch(forever, SY_AUTOTUNE, &ready))
        die("pipeline");
    sy_dataset *stages[] = {rec, num, pair, mixed, parsed, batched, forever};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) sy_dataset_free(stages[i]);
    return ready;
}

/* The in-memory baseline: every image decoded and flipped by the same rule
 * (by its index; the pipeline numbers its records in the order they are
 * read, which is the same, so the same images are flipped). */
static sy_tensor *decoded_images(const sy_data_split *d) {
    int64_t n = sy_tensor_shape(d->x_train).dims[0];
    sy_tensor *x;
    if (sy_tensor_new(SY_F32, sy_shape_of(4, n, (int64_t)28, (int64_t)28, (int64_t)1), &x)) die("images");
    const uint8_t *in = sy_tensor_data(d->x_train);
    for (int64_t i = 0; i < n; i++) decode((float *)sy_tensor_data(x) + i * 784, in + i * 784, flipped(i));
    return x;
}

typedef struct timing {
    int64_t warm;
    double t_start;
} timing;

static sy_status on_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)logs;
    timing *t = ctx;
    if (step == t->warm - 1) t->t_start = now();
    return SY_OK;
}

/* Samples/s of `steps` steps after two warm-up ones, from arrays (data
 * NULL) or from the dataset. */
static double train_rate(const builtin_model *b, sy_strategy *s, const sy_tensor *x, const sy_tensor *y,
                         const sy_dataset *data, int64_t steps) {
    sy_model *m;
    sy_strategy_scope_enter(s);
    if (b->build(0, &m)) die("model");
    sy_strategy_scope_exit(s);
    sy_compile_options c = sy_compile_options_default();
    if (sy_optimizer_from_name(b->optimizer, &c.optimizer)) die("optimizer");
    c.loss = b->loss;
    c.metrics = b->metrics;
    c.n_metrics = b->n_metrics;
    if (sy_model_compile(m, &c)) die("compile");
    timing t = {2, 0};
    sy_callback cb = {&t, NULL, NULL, on_batch_end, NULL, NULL, NULL};
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = BATCH;
    f.steps_per_epoch = t.warm + steps;
    f.verbose = 0;
    f.callbacks = &cb;
    f.n_callbacks = 1;
    if (data ? sy_model_fit_dataset(m, data, NULL, &f, NULL) : sy_model_fit(m, x, y, &f, NULL)) die("fit");
    double rate = (double)(steps * BATCH) / (now() - t.t_start);
    sy_model_free(m);
    return rate;
}

/* Elements/s through the pipeline alone, `batches` batches after one. */
static double pipeline_rate(const sy_dataset *data, int64_t batches) {
    sy_iterator *it;
    sy_element e = {0};
    bool end;
    if (sy_dataset_iterator(data, &it) || sy_iterator_next(it, &e, &end)) die("iterate");
    sy_element_clear(&e);
    double t0 = now();
    for (int64_t i = 0; i < batches; i++) {
        if (sy_iterator_next(it, &e, &end) || end) die("iterate");
        sy_element_clear(&e);
    }
    double rate = (double)(batches * BATCH) / (now() - t0);
    sy_iterator_free(it);
    return rate;
}

int main(int argc, char **argv) {
    int64_t steps = 20;
    const char *tpu = "local", *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--tpu") && i + 1 < argc) tpu = argv[++i];
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_pipeline [--steps N] [--tpu SPEC] [--dir DIR]\n");
            return 2;
        }
    }
    char tmp[] = "/tmp/bench_pipeline_XXXXXX";
    if (!dir && !(dir = mkdtemp(tmp))) {
        perror("bench_pipeline: mkdtemp");
        return 1;
    }
    const builtin_model *b = builtin_find("fashion_mnist_cnn");
    sy_data_split d;
    if (b->load(&d)) die("fashion_mnist");
    char paths[SHARDS][4096];
    write_records(&d, dir, paths);
    sy_tensor *x = decoded_images(&d);
    sy_dataset *data = pipeline(paths);
    sy_cluster *cl;
    sy_strategy *s;
    if (sy_cluster_resolve(tpu, &cl) || sy_strategy_new(cl, &s)) die("--tpu");
    /* This machine's speed drifts with its neighbours from minute to
     * minute, so the two are run in pairs, one right after the other, and
     * the ratio is the median of the pairs'. */
    double mem = 0, piped = 0, ratio[PAIRS];
    for (int r = 0; r < PAIRS; r++) {
        double a = train_rate(b, s, x, d.y_train, NULL, steps), p = train_rate(b, s, NULL, NULL, data, steps);
        if (a > mem) mem = a;
        if (p > piped) piped = p;
        ratio[r] = p / a;
    }
    for (int i = 1; i < PAIRS; i++) /* insertion sort, for the median */
        for (int j = i; j > 0 && ratio[j] < ratio[j - 1]; j--) {
            double t = ratio[j];
            ratio[j] = ratio[j - 1];
            ratio[j - 1] = t;
        }
    double alone = 0;
    for (int r = 0; r < 3; r++) {
        double v = pipeline_rate(data, steps);
        if (v > alone) alone = v;
    }
    printf("fashion_mnist_cnn, batch %d, %d replicas, %lld steps after 2, %d pairs of runs:\n", BATCH,
           sy_strategy_num_replicas_in_sync(s), (long long)steps, PAIRS);
    printf("  from in-memory tensors:                   %6.0f samples/s (best)\n", mem);
    printf("  from TFRecord files through the pipeline: %6.0f samples/s (best)\n", piped);
    printf("  pipeline / in-memory, pair by pair: median %.1f%% (from %.1f%% to %.1f%%)\n", 100 * ratio[PAIRS / 2],
           100 * ratio[0], 100 * ratio[PAIRS - 1]);
    printf("  the pipeline alone (parse, decode, normalise, flip): %.0f samples/s\n", alone);
    sy_dataset_free(data);
    sy_tensor_free(x);
    sy_data_split_free(&d);
    sy_strategy_free(s);
    sy_cluster_free(cl);
    if (dir == tmp) {
        for (int k = 0; k < SHARDS; k++) remove(paths[k]);
        rmdir(dir);
    }
    return 0;
}
