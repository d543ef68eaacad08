/*
 * bench_kernels.c - GFLOP/s of the cpu backend's matmul and conv2d kernels at
 * the shapes of the tutorial models, against this machine's measured GEMM
 * peak.
 *
 * The peak is a large SGEMM (2048^3) through the same oneDNN path, on one
 * thread and on all cores. Each kernel runs as a one-op plan (so what is
 * timed is exactly what a training step runs: kernel plus its planned
 * workspace), repeated until at least 0.25 s have passed, best of 3.
 *
 *   build/bench/bench_kernels [--threads N] [--quick] [--backend NAME] [--only TEXT] [--cpu-time]
 *
 * --backend: the kernels' backend (default cpu; issue 16: sim, the MXU's
 * numerics); --only: the rows whose model or kernel name contains TEXT;
 * --cpu-time: time by the calling thread's CPU time instead of the clock,
 * so that a shared machine's other jobs do not count (the 1-thread column
 * only: the other threads' time is not in it).
 *
 * Output: one line per (kernel, shape): time per call, GFLOP/s and the
 * fraction of the peak for the same thread count.
 */
#include "compiler/compiler_internal.h"
#include "systolic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 0.25;
static const char *backend = "cpu";
static bool cpu_time;

static double now(void) {
    if (!cpu_time) return sy_now();
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds per run of a plan: best of 3 rounds of enough repetitions. */
static double time_plan(sy_plan *p) {
    sy_plan_run(p); /* warm up */
    int reps = 1;
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        for (;;) {
            double t0 = now();
            for (int r = 0; r < reps; r++) sy_plan_run(p);
            double t = now() - t0;
            if (t >= min_seconds / 3 || reps > (1 << 20)) {
                if (t / reps < best) best = t / reps;
                break;
            }
            reps *= 2;
        }
    }
    return best;
}

static void fill_inputs(sy_plan *p, sy_graph *g) {
    for (int32_t i = 0; i < sy_graph_node_count(g); i++) {
        if (strcmp(sy_graph_op_name(g, i), "input") != 0) continue;
        float *x = sy_plan_input(p, i);
        sy_clear_error();
        if (!x) continue;
        sy_shape s = sy_graph_shape(g, i);
        int64_t n = sy_shape_count(&s);
        for (int64_t k = 0; k < n; k++) x[k] = (float)((k * 7919) % 1000) / 1000.0f - 0.5f;
    }
}

/* Time the last node of g as a one-op plan. */
static double time_graph(sy_graph *g, sy_pool *pool) {
    sy_node out = sy_graph_node_count(g) - 1;
    sy_plan_options o = sy_plan_options_default();
    o.outputs = &out;
    o.n_outputs = 1;
    o.pool = pool;
    o.backend = backend;
    sy_plan *p;
    if (sy_plan_compile(g, &o, &p)) {
        fprintf(stderr, "bench: %s\n", sy_last_error());
        exit(1);
    }
    fill_inputs(p, g);
    double t = time_plan(p);
    sy_plan_free(p);
    return t;
}

static sy_shape s2(int64_t a, int64_t b) { return sy_shape_of(2, a, b); }
static sy_shape s4(int64_t a, int64_t b, int64_t c, int64_t d) { return sy_shape_of(4, a, b, c, d); }

typedef enum { MM, CONV_FWD, CONV_BWD_INPUT, CONV_BWD_FILTER } kind;

typedef struct bench {
    const char *model, *what;
    kind k;
    int64_t m, n, kk;         /* matmul: (m, kk) x (kk, n) */
    bool ta, tb;
    int64_t b, h, w, c, o, kh; /* conv: x (b, h, w, c), w (kh, kh, c, o) */
    int padding;
} bench;

static sy_graph *build(const bench *bn, double *flops) {
    sy_graph *g;
    sy_graph_new(&g);
    if (bn->k == MM) {
        sy_node a = sy_graph_input(g, "a", SY_F32, bn->ta ? s2(bn->kk, bn->m) : s2(bn->m, bn->kk));
        sy_node b = sy_graph_input(g, "b", SY_F32, bn->tb ? s2(bn->n, bn->kk) : s2(bn->kk, bn->n));
        sy_graph_matmul(g, a, b, bn->ta, bn->tb);
        *flops = 2.0 * (double)bn->m * (double)bn->n * (double)bn->kk;
        return g;
    }
    int64_t oh, ow, pad;
    sy_conv_out(bn->h, bn->kh, 1, bn->padding, &oh, &pad);
    sy_conv_out(bn->w, bn->kh, 1, bn->padding, &ow, &pad);
    sy_shape xs = s4(bn->b, bn->h, bn->w, bn->c), ws = s4(bn->kh, bn->kh, bn->c, bn->o), ys = s4(bn->b, oh, ow, bn->o);
    /* useful FLOPs: 2 per multiply-add that touches a real (unpadded) pixel is
     * hard to count; use the dense count, as frameworks report */
    *flops = 2.0 * (double)(bn->b * oh * ow) * (double)bn->o * (double)(bn->kh * bn->kh * bn->c);
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.stride[0] = at.conv.stride[1] = 1;
    at.conv.padding = bn->padding;
    if (bn->k == CONV_FWD) {
        sy_graph_conv2d(g, sy_graph_input(g, "x", SY_F32, xs), sy_graph_input(g, "w", SY_F32, ws), 1, 1, bn->padding);
    } else if (bn->k == CONV_BWD_INPUT) {
        sy_node in[2] = {sy_graph_input(g, "dy", SY_F32, ys), sy_graph_input(g, "w", SY_F32, ws)};
        graph_add(g, SY_OP_CONV2D_BACKPROP_INPUT, in, 2, &at, &xs);
    } else {
        sy_node in[2] = {sy_graph_input(g, "x", SY_F32, xs), sy_graph_input(g, "dy", SY_F32, ys)};
        graph_add(g, SY_OP_CONV2D_BACKPROP_FILTER, in, 2, &at, &ws);
    }
    if (sy_graph_status(g)) {
        fprintf(stderr, "bench: %s\n", sy_graph_error(g));
        exit(1);
    }
    return g;
}

#define FMNIST(b)                                                                                  \
    {"fashion_mnist b" #b, "conv2d fwd 28x28x1->64", CONV_FWD, 0, 0, 0, 0, 0, b, 28, 28, 1, 64, 3, 0},           \
    {"fashion_mnist b" #b, "conv2d bwd filter", CONV_BWD_FILTER, 0, 0, 0, 0, 0, b, 28, 28, 1, 64, 3, 0},          \
    {"fashion_mnist b" #b, "dense fwd", MM, b, 10, 10816, 0, 0, 0, 0, 0, 0, 0, 0, 0},                             \
    {"fashion_mnist b" #b, "dense bwd kernel", MM, 10816, 10, b, 1, 0, 0, 0, 0, 0, 0, 0, 0},                      \
    {"fashion_mnist b" #b, "dense bwd input", MM, b, 10816, 10, 0, 1, 0, 0, 0, 0, 0, 0, 0}

#define LSTM(b)                                                                                    \
    {"imdb_lstm b" #b, "gates fwd (B,132)x(132,400)", MM, b, 400, 132, 0, 0, 0, 0, 0, 0, 0, 0, 0},              \
    {"imdb_lstm b" #b, "gates bwd kernel", MM, 132, 400, b, 1, 0, 0, 0, 0, 0, 0, 0, 0},                           \
    {"imdb_lstm b" #b, "gates bwd input", MM, b, 132, 400, 0, 1, 0, 0, 0, 0, 0, 0, 0}

#define VGG(hw, c, o)                                                                              \
    {"vgg16 32x32 b32", "conv2d fwd " #hw "x" #hw "x" #c "->" #o, CONV_FWD, 0, 0, 0, 0, 0, 32, hw, hw, c, o, 3, 1}, \
    {"vgg16 32x32 b32", "conv bwd input " #hw "x" #hw "x" #c "->" #o, CONV_BWD_INPUT, 0, 0, 0, 0, 0, 32, hw, hw, c, o, 3, 1},               \
    {"vgg16 32x32 b32", "conv bwd filter " #hw "x" #hw "x" #c "->" #o, CONV_BWD_FILTER, 0, 0, 0, 0, 0, 32, hw, hw, c, o, 3, 1}

static const bench benches[] = {
    FMNIST(128), FMNIST(1000), LSTM(64), LSTM(256),
    VGG(32, 3, 64), VGG(32, 64, 64), VGG(16, 64, 128), VGG(16, 128, 128), VGG(8, 128, 256),
    VGG(8, 256, 256), VGG(4, 256, 512), VGG(4, 512, 512), VGG(2, 512, 512),
};

int main(int argc, char **argv) {
    int threads = sy_cpu_count();
    bool quick = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--cpu-time")) cpu_time = true;
        else {
            fprintf(stderr, "usage: bench_kernels [--threads N] [--quick] [--backend NAME] [--only TEXT] [--cpu-time]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    if (quick) min_seconds = 0.05;
    sy_pool *pool;
    if (sy_pool_new(threads, &pool)) {
        fprintf(stderr, "bench: %s\n", sy_last_error());
        return 1;
    }
    bench peak_b = {"peak", "sgemm 2048^3", MM, 2048, 2048, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    double flops;
    sy_graph *g = build(&peak_b, &flops);
    const char *chosen = backend;
    backend = "cpu"; /* the peak is the cpu backend's sgemm, whatever the rows run on */
    double peak1 = flops / time_graph(g, NULL) * 1e-9, peakn = flops / time_graph(g, pool) * 1e-9;
    backend = chosen;
    sy_graph_free(g);
    printf("systolic kernel benchmark: %s backend (peak: oneDNN sgemm on cpu), %d cores\n", backend, sy_cpu_count());
    printf("GEMM peak (sgemm 2048^3): %.1f GFLOP/s on 1 thread, %.1f on %d threads\n\n", peak1, peakn, threads);
    printf("%-20s %-30s %10s %9s %6s %10s %9s %6s\n", "model", "kernel", "1T ms", "GFLOP/s", "peak", "NT ms", "GFLOP/s", "peak");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) {
        const bench *bn = &benches[i];
        if (only && !strstr(bn->model, only) && !strstr(bn->what, only)) continue;
        g = build(bn, &flops);
        double t1 = time_graph(g, NULL), tn = time_graph(g, pool);
        sy_graph_free(g);
        double g1 = flops / t1 * 1e-9, gn = flops / tn * 1e-9;
        printf("%-20s %-30s %10.3f %9.1f %5.0f%% %10.3f %9.1f %5.0f%%\n", bn->model, bn->what, t1 * 1e3, g1,
               100 * g1 / peak1, tn * 1e3, gn, 100 * gn / peakn);
        fflush(stdout);
    }
    sy_pool_free(pool);
    return 0;
}
