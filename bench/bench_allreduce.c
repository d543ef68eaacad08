/*
 * bench_allreduce.c - systolic's all-reduce across hosts (issue 20, TPU
 * Pods) beside Open MPI's own MPI_Allreduce, on the same buffers, for the
 * gradient sizes of the built-in models. Run under mpirun, one rank a host:
 *
 *   mpirun --oversubscribe --allow-run-as-root -np 2 build/bench/bench_allreduce [--reps N]
 *          [--warmup N] [--block FLOATS] [--floats N[,N...]]
 *
 * The sizes are the trainable parameters (the gradient block) of
 * fashion_mnist_cnn and imdb_lstm (src/cli/builtin.c, compiled in) and of
 * keras.applications' ResNet50 at its default 224x224x3 and 1,000 classes
 * (25.6 M parameters, 25.58 M of them trainable), counted from the models
 * themselves; --floats gives other sizes instead (tests/bench_allreduce.sh).
 *
 * systolic's all-reduce is the chain of mpi.c (mpi_chain_*), driven as the
 * training step's phase 2 drives it on several hosts (replicas.c,
 * all_reduce_hosts) with one replica a host and one thread: block by block
 * (CHAIN_BLOCK floats, or --block), take the sum of the ranks before this
 * one, add this rank's gradients, pass the block on; the last rank's sum
 * comes back down the chain. The training step then scales by 1/R on the
 * last host; here it does not, so both sides compute MPI_SUM. MPI's side is
 * MPI_Allreduce(MPI_FLOAT, MPI_SUM) on MPI_COMM_WORLD, sendbuf apart from
 * recvbuf; systolic's reduces in place, so its buffer is refilled from the
 * same input before each call, outside the timing.
 *
 * Each rank's input is a fixed function of (rank, index), uniform in
 * [-1, 1). Each repetition starts after a barrier; its time is the slowest
 * rank's; the figure is the median of --reps (default 20) after --warmup
 * (default 3). Per size: bytes, the time of one all-reduce, the algorithm
 * bandwidth (bytes / time) and the bus bandwidth (2 (R - 1) / R x bytes /
 * time, NCCL's convention: what each rank's link carries in a ring), for
 * both, and systolic's time over MPI's.
 *
 * Checks, after the timing: systolic's result is bitwise the same on every
 * rank and bitwise the sum one process makes in rank order (((x0 + x1) +
 * x2) + ...), each rank recomputing every input; MPI's, which may add in
 * another order, is within R float roundings of it (|mpi - ref| <= R eps
 * sum |x_r|). The exit status is 1 when a check fails.
 */
#include "core/core_internal.h"
#include "distribute/distribute_internal.h"
#include "keras/keras_internal.h"
#include "cli/cli_internal.h"
#include "systolic/applications.h"

#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 16

static int rank, size;

static void die(const char *what) {
    fprintf(stderr, "bench_allreduce: rank %d: %s: %s\n", rank, what, sy_last_error());
    sy_cluster_abort(1);
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Rank r's gradient element j. */
static float input(int r, int64_t j) {
    uint64_t h = sy_mix64(sy_mix64(0xA11BEDull + (uint64_t)r) ^ (uint64_t)j);
    return (float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static int64_t trainable(sy_model *m) {
    int64_t frozen = 0;
    for (int64_t i = 0; i < m->n_layers; i++) frozen += m->layers[i].non_trainable_params;
    return sy_model_param_count(m, -1) - frozen;
}

static int64_t builtin_size(const char *name) {
    const builtin_model *b = builtin_find(name);
    sy_model *m;
    if (!b || b->build(1, &m)) die(name);
    int64_t n = trainable(m);
    sy_model_free(m);
    return n;
}

static int64_t resnet50_size(void) {
    sy_applications_options o = sy_applications_options_default(); /* 224x224x3, 1,000 classes */
    sy_model *m;
    if (sy_applications_resnet50(&o, &m)) die("ResNet50");
    int64_t n = trainable(m);
    sy_model_free(m);
    return n;
}

/* systolic's all-reduce across hosts: replicas.c's phase 2 with one replica a host. */
static void chain_all_reduce(mpi_chain *c, float *g, int64_t n, int64_t block) {
    if (mpi_chain_start(c)) die("mpi_chain_start");
    for (int64_t b = 0, blocks = (n + block - 1) / block; b < blocks; b++) {
        const float *partial;
        if (mpi_chain_partial(c, b, &partial)) die("mpi_chain_partial");
        int64_t first = b * block, end = first + block < n ? first + block : n;
        if (partial)
            for (int64_t j = first; j < end; j++) g[j] = partial[j - first] + g[j];
        if (mpi_chain_pass(c, b, g + first)) die("mpi_chain_pass");
    }
    if (mpi_chain_finish(c, g)) die("mpi_chain_finish");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The slowest rank's time of each repetition; their median. */
static double median(double *t, int reps) {
    MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

static uint64_t hash(const float *g, int64_t n) {
    uint64_t h = 0;
    for (int64_t j = 0; j < n; j++) {
        uint32_t u;
        memcpy(&u, &g[j], sizeof u);
        h = sy_mix64(h ^ u);
    }
    return h;
}

/* The checks above; prints one line on rank 0; true when they pass. */
static bool check(const char *name, const float *sys, const float *mpi, int64_t n) {
    uint64_t h[2] = {hash(sys, n), 0};
    h[1] = ~h[0];
    MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    bool same_on_ranks = h[1] == ~h[0]; /* the greatest hash and the least agree */
    int64_t differ = 0, mpi_differ = 0;
    double worst = 0; /* MPI's greatest error, in units of the bound */
    for (int64_t j = 0; j < n; j++) {
        float ref = input(0, j), mag = fabsf(ref);
        for (int r = 1; r < size; r++) {
            float x = input(r, j);
            ref = ref + x;
            mag += fabsf(x);
        }
        if (memcmp(&ref, &sys[j], sizeof ref)) differ++;
        if (memcmp(&ref, &mpi[j], sizeof ref)) mpi_differ++;
        double bound = (double)size * FLT_EPSILON * mag, e = fabs((double)mpi[j] - ref);
        if (bound > 0 && e / bound > worst)
            worst = e / bound;
        else if (bound == 0 && e > 0)
            worst = INFINITY;
    }
    MPI_Allreduce(MPI_IN_PLACE, &differ, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mpi_differ, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    bool ok = same_on_ranks && differ == 0 && worst <= 1;
    if (rank == 0)
        printf("  check %s: systolic: %s on every rank, %s one process's sum in rank order%s; "
               "MPI: %lld of %lld sums differ from it, the worst by %.3g x R eps sum|x| -- %s\n",
               name, same_on_ranks ? "identical" : "DIFFERENT", differ ? "NOT" : "bitwise",
               differ ? " (elements differ)" : "", (long long)mpi_differ / size, (long long)n,
               worst, ok ? "ok" : "FAILED");
    return ok;
}

static void usage(void) {
    fprintf(stderr, "usage: mpirun -np R bench_allreduce [--reps N] [--warmup N] [--block FLOATS] "
                    "[--floats N[,N...]]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int reps = 20, warmup = 3;
    int64_t block = CHAIN_BLOCK;
    const char *names[MAX_SIZES];
    int64_t n[MAX_SIZES];
    int sizes = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup"))
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--block"))
            block = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--floats")) {
            for (char *s = argv[++i], *e; *s && sizes < MAX_SIZES; s = *e ? e + 1 : e) {
                n[sizes] = strtoll(s, &e, 10);
                if (e == s || n[sizes] < 1 || (*e && *e != ',')) usage();
                names[sizes++] = "floats";
            }
        } else
            usage();
    }
    if (reps < 1 || warmup < 0 || block < 1) usage();

    mpi_host mine = {.replicas = 1, .cores = 1};
    mpi_host *hosts;
    int32_t r32, s32;
    if (mpi_join(&mine, &hosts, &r32, &s32)) die("joining the job");
    sy_free(hosts);
    rank = r32;
    size = s32;
    if (size < 2) {
        fprintf(stderr, "bench_allreduce: run it under mpirun -np R with R >= 2 (the chain is "
                        "the all-reduce across hosts; one host has none)\n");
        sy_cluster_shutdown(true);
        return 2;
    }
    if (!sizes) {
        names[0] = "fashion_mnist_cnn";
        names[1] = "imdb_lstm";
        names[2] = "resnet50_224";
        if (rank == 0) {
            n[0] = builtin_size(names[0]);
            n[1] = builtin_size(names[1]);
            n[2] = resnet50_size();
        }
        MPI_Bcast(n, 3, MPI_INT64_T, 0, MPI_COMM_WORLD);
        sizes = 3;
    }

    if (rank == 0) {
        printf("all-reduce of float32 gradients (sum) over %d ranks: systolic's chain (mpi.c, "
               "%lld-float blocks) against MPI_Allreduce; median of %d after %d warm-up; "
               "busbw = 2(R-1)/R x bytes/time\n",
               size, (long long)block, reps, warmup);
        printf("%-18s %10s %12s | %10s %9s %9s | %10s %9s %9s | %8s\n", "size", "floats", "bytes",
               "systolic", "algbw", "busbw", "MPI", "algbw", "busbw", "sys/MPI");
        printf("%-18s %10s %12s | %10s %9s %9s | %10s %9s %9s | %8s\n", "", "", "", "ms", "GB/s",
               "GB/s", "ms", "GB/s", "GB/s", "time");
    }
    bool ok = true;
    double *t = malloc((size_t)reps * sizeof *t);
    for (int k = 0; k < sizes && t; k++) {
        size_t bytes = (size_t)n[k] * sizeof(float);
        float *x = sy_malloc(bytes), *g = sy_malloc(bytes), *y = sy_malloc(bytes);
        mpi_chain *c;
        if (!x || !g || !y) die("out of memory");
        if (mpi_chain_new(n[k], block, &c)) die("mpi_chain_new");
        for (int64_t j = 0; j < n[k]; j++) x[j] = input(rank, j);
        double ms[2];
        for (int side = 0; side < 2; side++) {
            for (int i = -warmup; i < reps; i++) {
                if (side == 0) memcpy(g, x, bytes);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now();
                if (side == 0)
                    chain_all_reduce(c, g, n[k], block);
                else if (MPI_Allreduce(x, y, (int)n[k], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
                         MPI_SUCCESS)
                    die("MPI_Allreduce");
                if (i >= 0) t[i] = now() - t0;
            }
            ms[side] = median(t, reps) * 1e3;
        }
        if (rank == 0) {
            double busf = 2.0 * (size - 1) / size, a0 = (double)bytes / ms[0] * 1e-6,
                   a1 = (double)bytes / ms[1] * 1e-6;
            printf("%-18s %10lld %12zu | %10.3f %9.3f %9.3f | %10.3f %9.3f %9.3f | %8.2f\n",
                   names[k], (long long)n[k], bytes, ms[0], a0, a0 * busf, ms[1], a1, a1 * busf,
                   ms[0] / ms[1]);
            fflush(stdout);
        }
        ok = check(names[k], g, y, n[k]) && ok;
        mpi_chain_free(c);
        sy_free(x);
        sy_free(g);
        sy_free(y);
    }
    free(t);
    sy_cluster_shutdown(true);
    return ok ? 0 : 1;
}
