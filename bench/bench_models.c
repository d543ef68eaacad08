/*
 * bench_models.c - training throughput of the tutorial models, end to end
 * through the Keras-style API (model.fit: input copy, forward, loss,
 * backward, optimizer update, metrics), on the real dataset.
 *
 *   build/bench/bench_models [--model fashion_mnist_cnn] [--batch N] [--steps N]
 *                            [--threads N | --tpu SPEC] [--steps-per-execution N]
 *
 * --threads N: one replica whose kernels use N threads (default: all
 * cores); --tpu SPEC: one replica per device of the spec (cpu:N), as
 * TPUStrategy runs them.
 *
 * Prints samples/s and ms/step over `steps` steps after two warm-up steps,
 * best of 3 runs, and the achieved GFLOP/s (the model's dense FLOP count
 * per sample) as a fraction of this machine's GEMM peak (a 2048^3 sgemm
 * through the same oneDNN path, on the same number of threads).
 * bench/compare_models.py runs the same model in TensorFlow and PyTorch on
 * the same data and prints the ratios.
 */
#include "systolic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_models: %s: %s\n", what, sy_last_error());
    exit(1);
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

int main(int argc, char **argv) {
    const char *model = "fashion_mnist_cnn", *tpu = NULL;
    int64_t batch = 1000, steps = 20;
    int threads = sy_cpu_count(), spe = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tpu") && i + 1 < argc) tpu = argv[++i];
        else if (!strcmp(argv[i], "--steps-per-execution") && i + 1 < argc) spe = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_models [--model fashion_mnist_cnn] [--batch N] [--steps N] [--threads N | "
                            "--tpu SPEC] [--steps-per-execution N]\n");
            return 2;
        }
    }
    if (strcmp(model, "fashion_mnist_cnn") != 0) {
        fprintf(stderr, "bench_models: unknown model '%s' (fashion_mnist_cnn)\n", model);
        return 2;
    }
    sy_data_split d;
    if (sy_fashion_mnist_load_data(&d)) die("loading fashion_mnist");
    sy_tensor_reshape(d.x_train, sy_shape_of(4, (int64_t)-1, (int64_t)28, (int64_t)28, (int64_t)1));
    /* conv fwd + filter grad (no input grad: first layer), dense fwd + two grads */
    double flops = 2 * (2.0 * 26 * 26 * 64 * 9) + 3 * (2.0 * 10816 * 10);
    sy_strategy *strategy = NULL;
    int replicas = 1;
    if (tpu) {
        sy_cluster *cluster;
        if (sy_cluster_resolve(tpu, &cluster) || sy_strategy_new(cluster, &strategy)) die("--tpu");
        replicas = sy_cluster_device_count(cluster);
        threads = sy_strategy_threads(strategy) * (replicas < sy_cpu_count() ? sy_cpu_count() / replicas : 1);
        sy_cluster_free(cluster);
    }
    double best = 0;
    for (int run = 0; run < 3; run++) {
        sy_model *m;
        if (strategy) sy_strategy_scope_enter(strategy);
        sy_model_new(NULL, &m);
        if (strategy) sy_strategy_scope_exit(strategy);
        sy_layer l[6] = {sy_layer_conv2d(64, 3, 3), sy_layer_max_pooling2d(2, 2), sy_layer_activation(SY_ACTIVATION_RELU),
                         sy_layer_flatten(), sy_layer_dense(10), sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
        l[0].input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
        for (int i = 0; i < 6; i++)
            if (sy_model_add(m, &l[i])) die("model");
        sy_compile_options c = sy_compile_options_default();
        c.optimizer = sy_optimizer_adam(1e-3f);
        c.loss = "sparse_categorical_crossentropy";
        const char *metrics[] = {"sparse_categorical_accuracy"};
        c.metrics = metrics;
        c.n_metrics = 1;
        c.threads = threads;
        c.steps_per_execution = spe;
        if (sy_model_compile(m, &c)) die("compile");
        int64_t warm = spe * ((2 + spe - 1) / spe); /* whole executions, at least two steps */
        timing t = {warm, 0, 0};
        sy_callback cb = {&t, NULL, NULL, on_batch_end, NULL, NULL};
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = batch;
        f.steps_per_epoch = warm + steps;
        f.verbose = 0;
        f.callbacks = &cb;
        f.n_callbacks = 1;
        if (sy_model_fit(m, d.x_train, d.y_train, &f, NULL)) die("fit");
        double rate = (double)(steps * batch) / (now() - t.t_start);
        if (rate > best) best = rate;
        sy_model_free(m);
    }
    double peak = gemm_peak(threads);
    printf("systolic %s: batch %lld, %d replica%s, %d threads, %d steps/execution: %.0f samples/s (%.1f ms/step); %.1f GFLOP/s = %.0f%% of the %.1f "
           "GFLOP/s GEMM peak\n",
           model, (long long)batch, replicas, replicas == 1 ? "" : "s", threads, spe, best, 1e3 * (double)batch / best, best * flops * 1e-9,
           100 * best * flops * 1e-9 / peak, peak);
    sy_data_split_free(&d);
    sy_strategy_free(strategy);
    return 0;
}
