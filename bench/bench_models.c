/*
 * bench_models.c - training and prediction throughput of the built-in
 * models (src/cli/builtin.c, compiled in: the models, data and optimizer
 * `systolic train MODEL` uses), end to end through the Keras-style API
 * (model.fit: input copy, forward, loss, backward, optimizer update,
 * metrics; model.predict), on the real dataset.
 *
 *   build/bench/bench_models [--model fashion_mnist_cnn|imdb_lstm] [--batch N] [--steps N]
 *                            [--threads N | --tpu SPEC] [--steps-per-execution N] [--predict]
 *   build/bench/bench_models --model imdb_lstm --dump-data DIR
 *   build/bench/bench_models --model vgg16|resnet50 --data DIR [--batch N] [--steps N] [--predict] [--runs N]
 *
 * vgg16 and resnet50 are keras.applications' VGG16 at 32x32x3 and
 * ResNet50 at 224x224x3 (weights=None, their 1,000-class softmax tops),
 * read from the model JSON tf.keras wrote (DIR/<model>.json, written by
 * `bench/train_peers.py --write-json DIR`), trained with SGD(0.001) on
 * sparse categorical crossentropy, on synthetic data: x uniform in [0, 1),
 * y uniform in 0..999, from a fixed-seed generator, as many samples as the
 * run takes (batch x (steps + 2) to train, batch x steps to predict).
 *
 * --threads N: one replica whose kernels use N threads (default: all
 * cores); --tpu SPEC: one replica per device of the spec (cpu:N, local),
 * as TPUStrategy runs them.
 *
 * Training: samples/s and ms/step over `steps` steps (the training data in
 * order: fit's shuffle is off, as in the peers) after two warm-up steps,
 * best of 3 runs. --predict: model.predict
 * over the first steps x batch test samples after a warm-up call, best of
 * 3. Then the achieved GFLOP/s (the model's dense FLOP count per sample,
 * below) as a fraction of this machine's GEMM peak (a 2048^3 sgemm through
 * the same oneDNN path, on the same number of threads).
 *
 * --dump-data DIR writes the model's data as NumPy files,
 * DIR/<model>_x_train.npy, _y_train.npy and _x_test.npy, so that
 * bench/train_peers.py trains TensorFlow and PyTorch on exactly the same
 * arrays (bench/compare_models.py does both and prints the ratios). For
 * the synthetic models it writes the arrays of the given --batch/--steps.
 *
 * --runs N: best of N runs instead of 3 (a ResNet-50 run is minutes).
 *
 * --backend A[,B...]: the kernels' backend (default cpu); with several,
 * each run measures every backend in turn, so that load from other jobs
 * falls on all alike, and the last line gives each one's time per step
 * against the first's (issue 16: sim, the MXU's numerics, against cpu).
 *
 * --dtype-policy P[,Q...] (issue 16, mixed_bfloat16): Keras's dtype policy
 * for every layer, float32 (default) or mixed_bfloat16, whose activations
 * the cpu backend stores as 2-byte bfloat16; "mixed_bfloat16:float32-storage"
 * is the same policy with its bfloat16 numbers in float32 buffers, the path
 * before 2-byte storage ($SYSTOLIC_BF16_STORAGE=0). Like --backend, each run
 * measures every backend and policy in turn:
 *
 *   build/bench/bench_models --dtype-policy float32,mixed_bfloat16:float32-storage,mixed_bfloat16
 */
#include "cli/cli_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --dtype-policy: mixed_bfloat16 with float32 storage of its activations (issue 16) */
#define F32_STORAGE "mixed_bfloat16:float32-storage"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_models: %s: %s\n", what, sy_last_error());
    exit(1);
}

/* Multiply-adds x 2 per sample of the products that dominate each model. */
typedef struct model_flops {
    const char *name;
    double train, predict;
} model_flops;

static const model_flops flops_table[] = {
    /* conv fwd + filter grad (no input grad: first layer), dense fwd + two grads */
    {"fashion_mnist_cnn", 2 * (2.0 * 26 * 26 * 64 * 9) + 3 * (2.0 * 10816 * 10),
     2.0 * 26 * 26 * 64 * 9 + 2.0 * 10816 * 10},
    /* 250 steps of the LSTM's input (32) and recurrent (100) products to
     * its 4 x 100 gates, then the dense; backward twice forward (both
     * gradients of each product: the embeddings are trained too) */
    {"imdb_lstm", 3 * (250 * 2.0 * (32 + 100) * 400 + 2.0 * 100), 250 * 2.0 * (32 + 100) * 400 + 2.0 * 100},    /* every Conv2D and Dense of the Keras model, 2 x output size x window
     * (bench/train_peers.py --flops prints them); training is three times
     * the forward less the first conv's input gradient */
    {"vgg16", 2013462528.0, 672333824.0},
    {"resnet50", 22911811584.0, 7715946496.0},
};

/* The synthetic-data models: input (h, w, c), classes. */
typedef struct synth_model {
    const char *name;
    int64_t h, w, c, classes;
} synth_model;

static const synth_model synth_table[] = {{"vgg16", 32, 32, 3, 1000}, {"resnet50", 224, 224, 3, 1000}};

static const synth_model *synth_find(const char *name) {
    for (size_t i = 0; i < sizeof synth_table / sizeof synth_table[0]; i++)
        if (!strcmp(synth_table[i].name, name)) return &synth_table[i];
    return NULL;
}

/* splitmix64: the same stream on every machine. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* x (n, h, w, c) float32 uniform in [0, 1); y (n,) int32 uniform over the classes. */
static void synth_data(const synth_model *sm, int64_t n_train, int64_t n_test, sy_data_split *d) {
    uint64_t seed = 2015;
    sy_tensor **xs[2] = {&d->x_train, &d->x_test}, **ys[2] = {&d->y_train, &d->y_test};
    int64_t ns[2] = {n_train, n_test};
    for (int k = 0; k < 2; k++) {
        if (sy_tensor_new(SY_F32, sy_shape_of(4, ns[k], sm->h, sm->w, sm->c), xs[k]) ||
            sy_tensor_new(SY_I32, sy_shape_of(1, ns[k]), ys[k]))
            die("synthetic data");
        float *x = sy_tensor_data(*xs[k]);
        int32_t *y = sy_tensor_data(*ys[k]);
        for (int64_t i = 0; i < ns[k] * sm->h * sm->w * sm->c; i++) x[i] = (float)(next_u64(&seed) >> 40) * 0x1p-24f;
        for (int64_t i = 0; i < ns[k]; i++) y[i] = (int32_t)(next_u64(&seed) % (uint64_t)sm->classes);
    }
}

/* The model tf.keras wrote, DIR/<model>.json, built and uncompiled. */
static sy_status synth_build(const char *dir, const char *model, sy_model **out) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", dir, model);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_models: %s not found; write it with bench/train_peers.py --write-json %s\n", path, dir);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *json = malloc((size_t)n + 1);
    if (!json || fread(json, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench_models: cannot read %s\n", path);
        exit(1);
    }
    json[n] = 0;
    fclose(f);
    sy_status st = sy_model_from_json(json, out);
    free(json);
    return st;
}

/* GFLOP/s of a 2048^3 matmul plan on `threads` threads. */
static double gemm_peak(int threads) {
    sy_graph *g;
    sy_graph_new(&g);
    sy_node a = sy_graph_input(g, "a", SY_F32, sy_shape_of(2, (int64_t)2048, (int64_t)2048));
    sy_node c = sy_graph_matmul(g, a, a, false, false);
    sy_pool *pool;
    if (sy_pool_new(threads, &pool)) die("pool");
    sy_plan_options o = sy_plan_options_default();
    o.outputs = &c;
    o.n_outputs = 1;
    o.pool = pool;
    sy_plan *p;
    if (sy_plan_compile(g, &o, &p)) die("peak plan");
    float *x = sy_plan_input(p, a);
    for (int64_t i = 0; i < 2048 * 2048; i++) x[i] = (float)(i % 7) * 0.1f;
    sy_plan_run(p);
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        sy_plan_run(p);
        double t = now() - t0;
        if (t < best) best = t;
    }
    sy_plan_free(p);
    sy_pool_free(pool);
    sy_graph_free(g);
    return 2.0 * 2048.0 * 2048.0 * 2048.0 / best * 1e-9;
}

/* Write t as DIR/<model>_<name>.npy (NumPy format 1.0). */
static void dump_npy(const char *dir, const char *model, const char *name, const sy_tensor *t) {
    char path[4096], header[256];
    snprintf(path, sizeof path, "%s/%s_%s.npy", dir, model, name);
    sy_shape s = sy_tensor_shape(t);
    sy_dtype dt = sy_tensor_dtype(t);
    const char *descr = dt == SY_I32 ? "<i4" : dt == SY_U8 ? "|u1" : dt == SY_F32 ? "<f4" : NULL;
    if (!descr) {
        fprintf(stderr, "bench_models: %s: no NumPy type for this dtype\n", path);
        exit(1);
    }
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < s.rank; i++)
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", (long long)s.dims[i], i + 1 < s.rank ? " " : "");
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    while ((10 + n + 1) % 64) header[n++] = ' '; /* the data starts 64-byte aligned */
    header[n++] = '\n';
    FILE *f = fopen(path, "wb");
    unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    if (!f || fwrite(magic, 1, 10, f) != 10 || fwrite(header, 1, (size_t)n, f) != (size_t)n ||
        fwrite(sy_tensor_data(t), 1, sy_tensor_bytes(t), f) != sy_tensor_bytes(t) || fclose(f) != 0) {
        fprintf(stderr, "bench_models: cannot write %s\n", path);
        exit(1);
    }
    printf("%s\n", path);
}

typedef struct timing {
    int64_t steps, step; /* steps: the warm-up steps */
    double t_start;
} timing;

static sy_status on_batch_end(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)logs;
    timing *t = ctx;
    if (step == t->steps - 1) t->t_start = now(); /* after the warm-up steps */
    t->step = step;
    return SY_OK;
}

/* Samples/s of `steps` training steps after the warm-up ones. */
static double train_rate(sy_model *m, const sy_data_split *d, int64_t batch, int64_t steps, int spe) {
    int64_t warm = spe * ((2 + spe - 1) / spe); /* whole executions, at least two steps */
    timing t = {warm, 0, 0};
    sy_callback cb = {&t, NULL, NULL, on_batch_end, NULL, NULL, NULL};
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = batch;
    f.steps_per_epoch = warm + steps;
    f.shuffle = false; /* the training data in order, as the peers take it (bench/train_peers.py) */
    f.verbose = 0;
    f.callbacks = &cb;
    f.n_callbacks = 1;
    if (sy_model_fit(m, d->x_train, d->y_train, &f, NULL)) die("fit");
    return (double)(steps * batch) / (now() - t.t_start);
}

/* Samples/s of model.predict over the first steps x batch test samples. */
static double predict_rate(sy_model *m, const sy_data_split *d, int64_t batch, int64_t steps) {
    int64_t n = steps * batch;
    if (n > sy_tensor_shape(d->x_test).dims[0]) {
        fprintf(stderr, "bench_models: --steps %lld x --batch %lld is more than the %lld test samples\n", (long long)steps,
                (long long)batch, (long long)sy_tensor_shape(d->x_test).dims[0]);
        exit(2);
    }
    sy_tensor *x, *p;
    if (builtin_head(d->x_test, n, &x)) die("test samples");
    sy_evaluate_options o = sy_evaluate_options_default();
    o.batch_size = batch;
    o.verbose = 0;
    if (sy_model_predict(m, x, &o, &p)) die("predict"); /* warm-up: compiles the predict plan */
    sy_tensor_free(p);
    double t0 = now();
    if (sy_model_predict(m, x, &o, &p)) die("predict");
    double rate = (double)n / (now() - t0);
    sy_tensor_free(p);
    sy_tensor_free(x);
    return rate;
}

int main(int argc, char **argv) {
    const char *model = "fashion_mnist_cnn", *tpu = NULL, *dump = NULL, *data = NULL;
    const char *backends[8] = {"cpu"}, *policies[8] = {"float32"};
    int n_backends = 1, n_policies = 1;
    char backend_list[256] = "", policy_list[256] = "";
    int64_t batch = 1000, steps = 20;
    int threads = sy_cpu_count(), spe = 1, runs = 3;
    bool predict = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tpu") && i + 1 < argc) tpu = argv[++i];
        else if (!strcmp(argv[i], "--steps-per-execution") && i + 1 < argc) spe = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump-data") && i + 1 < argc) dump = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--predict")) predict = true;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            snprintf(backend_list, sizeof backend_list, "%s", argv[++i]);
            n_backends = 0;
            for (char *tok = strtok(backend_list, ","); tok && n_backends < 8; tok = strtok(NULL, ",")) backends[n_backends++] = tok;
        } else if (!strcmp(argv[i], "--dtype-policy") && i + 1 < argc) {
            snprintf(policy_list, sizeof policy_list, "%s", argv[++i]);
            n_policies = 0;
            for (char *tok = strtok(policy_list, ","); tok && n_policies < 8;
                 tok = strtok(NULL, ",")) {
                const char *name = strcmp(tok, F32_STORAGE) ? tok : "mixed_bfloat16";
                sy_dtype_policy policy;
                if (sy_dtype_policy_from_name(name, NULL, &policy)) {
                    fprintf(stderr, "bench_models: --dtype-policy: %s\n", sy_last_error());
                    return 2;
                }
                policies[n_policies++] = tok;
            }
        } else {
            fprintf(stderr, "usage: bench_models [--model fashion_mnist_cnn|imdb_lstm|vgg16|resnet50] [--batch N] "
                            "[--steps N] [--threads N | --tpu SPEC] [--steps-per-execution N] [--predict] "
                            "[--dump-data DIR] [--data DIR] [--runs N] [--backend A[,B...]] [--dtype-policy P[,Q...]]\n");
            return 2;
        }
    }
    const builtin_model *b = builtin_find(model);
    const synth_model *sm = synth_find(model);
    const model_flops *flops = NULL;
    for (size_t i = 0; i < sizeof flops_table / sizeof flops_table[0]; i++)
        if (!strcmp(flops_table[i].name, model)) flops = &flops_table[i];
    if ((!b && !sm) || !flops || batch <= 0 || steps <= 0 || runs <= 0 || (sm && !data && !dump)) {
        fprintf(stderr, "bench_models: unknown model '%s' (fashion_mnist_cnn, imdb_lstm, vgg16, resnet50), --batch, "
                        "--steps or --runs not positive, or --data DIR missing for vgg16/resnet50\n",
                model);
        return 2;
    }
    sy_data_split d = {0};
    if (sm) synth_data(sm, batch * (steps + 2 * spe), batch * steps, &d);
    else if (b->load(&d)) die(model);
    if (dump) {
        dump_npy(dump, model, "x_train", d.x_train);
        dump_npy(dump, model, "y_train", d.y_train);
        dump_npy(dump, model, "x_test", d.x_test);
        sy_data_split_free(&d);
        return 0;
    }
    sy_strategy *strategy = NULL;
    int replicas = 1;
    if (tpu) {
        sy_cluster *cluster;
        if (sy_cluster_resolve(tpu, &cluster) || sy_strategy_new(cluster, &strategy)) die("--tpu");
        replicas = sy_cluster_device_count(cluster);
        threads = sy_strategy_threads(strategy) * (replicas < sy_cpu_count() ? sy_cpu_count() / replicas : 1);
        sy_cluster_free(cluster);
    }
    double bests[64] = {0};
    char storage_env_copy[16];
    const char *storage_env = getenv("SYSTOLIC_BF16_STORAGE");
    if (storage_env) storage_env = strncpy(storage_env_copy, storage_env, sizeof storage_env_copy - 1);
    storage_env_copy[sizeof storage_env_copy - 1] = 0;
    int n_variants = n_backends * n_policies;
    for (int run = 0; run < runs * n_variants; run++) {
        int vi = run % n_variants, bi = vi / n_policies, pi = vi % n_policies;
        bool f32_storage = !strcmp(policies[pi], F32_STORAGE);
        sy_model *m;
        if (strategy) sy_strategy_scope_enter(strategy);
        sy_status st = sm ? synth_build(data, model, &m) : b->build(0, &m);
        if (strategy) sy_strategy_scope_exit(strategy);
        if (st) die("model");
        if (sy_model_set_dtype_policy(m, f32_storage ? "mixed_bfloat16" : policies[pi]))
            die("--dtype-policy");
        if (f32_storage && setenv("SYSTOLIC_BF16_STORAGE", "0", 1)) die("setenv");
        sy_compile_options c = sy_compile_options_default();
        static const char *const synth_metrics[] = {"sparse_categorical_accuracy"};
        if (sy_optimizer_from_name(sm ? "sgd" : b->optimizer, &c.optimizer)) die("optimizer");
        c.optimizer.learning_rate = sm ? 0.001f : b->learning_rate;
        c.loss = sm ? "sparse_categorical_crossentropy" : b->loss;
        c.metrics = sm ? synth_metrics : b->metrics;
        c.n_metrics = sm ? 1 : b->n_metrics;
        c.threads = threads;
        c.steps_per_execution = spe;
        c.backend = backends[bi];
        if (sy_model_compile(m, &c)) die("compile");
        double rate = predict ? predict_rate(m, &d, batch, steps) : train_rate(m, &d, batch, steps, spe);
        if (rate > bests[vi]) bests[vi] = rate;
        sy_model_free(m);
        if (f32_storage && (storage_env ? setenv("SYSTOLIC_BF16_STORAGE", storage_env, 1) : unsetenv("SYSTOLIC_BF16_STORAGE")))
            die("setenv");
    }
    double peak = gemm_peak(threads), per_sample = predict ? flops->predict : flops->train;
    for (int vi = 0; vi < n_variants; vi++) {
        double best = bests[vi];
        printf("systolic %s %s on %s, %s: batch %lld, %d replica%s, %d threads, %d "
               "steps/execution: %.*f samples/s "
               "(%.1f ms/step); %.1f GFLOP/s = %.0f%% of the %.1f GFLOP/s GEMM peak\n",
               model, predict ? "predict" : "train", backends[vi / n_policies],
               policies[vi % n_policies], (long long)batch, replicas, replicas == 1 ? "" : "s",
               threads, spe, best < 100 ? 1 : 0, best, 1e3 * (double)batch / best,
               best * per_sample * 1e-9, 100 * best * per_sample * 1e-9 / peak, peak);
    }
    for (int vi = 1; vi < n_variants; vi++)
        printf("time per step, %s %s / %s %s: %.2f\n", backends[vi / n_policies],
               policies[vi % n_policies], backends[0], policies[0], bests[0] / bests[vi]);
    sy_data_split_free(&d);
    sy_strategy_free(strategy);
    return 0;
}
