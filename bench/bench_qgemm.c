/*
 * bench_qgemm.c - the int8 product (sy_qgemm_i8, src/backend/cpu/qgemm_fast.c)
 * beside the float32 one (sy_sgemm_parallel, oneDNN) at the same (m, n, k):
 * the shapes the int8 models of issue 18 run -- the tutorial CNN's conv as
 * im2col rows (batch 1,000 and 1) and its dense layer, ResNet-50's convs at
 * batch 32 (7x7 stem, 3x3 and 1x1 layers) -- on 1 thread and on all cores.
 *
 *   build/bench/bench_qgemm [--threads N] [--quick] [--only TEXT] [--cpu-time]
 *
 * Both products are timed as a plan runs them: the int8 weights packed once
 * beforehand (sy_qgemm_pack), the float32 weights as a dense layer holds
 * them ((n, k), transposed by the GEMM) with the bias and ReLU epilogue; the
 * int8 one requantizes, clamps and stores int8. GOPS counts 2 m n k
 * operations for both. Each repeated until 0.2 s have passed (0.03 with
 * --quick), best of 3. Needs a quiet machine for numbers worth recording;
 * --cpu-time times the 1-thread columns by the thread's CPU time, so that a
 * shared machine's other jobs count less (the N-thread columns stay wall
 * clock).
 */
#include "backend/cpu/cpu_internal.h"
#include "systolic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 0.2;
static bool cpu_time;

static double now(bool thread_clock) {
    if (!thread_clock) return sy_now();
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct shape {
    const char *what;
    int64_t m, n, k;
} shape;

static const shape shapes[] = {
    {"fmnist conv b1000 (im2col)", 1000 * 26 * 26, 64, 9},
    {"fmnist conv b1 (im2col)", 26 * 26, 64, 9},
    {"fmnist dense b1000", 1000, 10, 13 * 13 * 64},
    {"fmnist dense b1", 1, 10, 13 * 13 * 64},
    {"resnet50 conv1 7x7x3 b32", 32 * 112 * 112, 64, 147},
    {"resnet50 3x3x64 b32", 32 * 56 * 56, 64, 576},
    {"resnet50 1x1 64->256 b32", 32 * 56 * 56, 256, 64},
    {"resnet50 1x1 256->64 b32", 32 * 56 * 56, 64, 256},
    {"resnet50 3x3x128 b32", 32 * 28 * 28, 128, 1152},
    {"resnet50 1x1 512->128 b32", 32 * 28 * 28, 128, 512},
    {"resnet50 3x3x256 b32", 32 * 14 * 14, 256, 2304},
    {"resnet50 1x1 1024->256 b32", 32 * 14 * 14, 256, 1024},
    {"resnet50 3x3x512 b32", 32 * 7 * 7, 512, 4608},
    {"resnet50 1x1 512->2048 b32", 32 * 7 * 7, 2048, 512},
    {"resnet50 fc b32", 32, 1000, 2048},
};

typedef struct job {
    const sy_exec *ex;
    const shape *s;
    int8_t *x, *y;
    void *packed;
    sy_qgemm_params p;
    float *xf, *wf, *yf, *bias;
} job;

static void run_int8(const job *j) {
    sy_qgemm_i8(j->ex, j->y, j->s->n, j->x, j->s->k, j->packed, j->s->m, j->s->n, j->s->k, &j->p);
}
static void run_f32(const job *j) {
    sy_sgemm_parallel(j->ex, false, true, j->s->m, j->s->n, j->s->k, 1.0f, j->xf, j->s->k, j->wf, j->s->k, 0.0f, j->yf,
                      j->s->n, j->bias, SY_ACT_RELU);
}

/* seconds per call, best of 3 rounds of enough calls */
static double time_it(void (*fn)(const job *), const job *j) {
    fn(j);
    bool thread_clock = cpu_time && j->ex->threads == 1;
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        int reps = 1;
        for (;;) {
            double t0 = now(thread_clock);
            for (int r = 0; r < reps; r++) fn(j);
            double t = now(thread_clock) - t0;
            if (t >= min_seconds / 3 || reps > (1 << 20)) {
                if (t / reps < best) best = t / reps;
                break;
            }
            reps *= 2;
        }
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = sy_cpu_count();
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) min_seconds = 0.03;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--cpu-time")) cpu_time = true;
        else {
            fprintf(stderr, "usage: bench_qgemm [--threads N] [--quick] [--only TEXT] [--cpu-time]\n");
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    sy_pool *pool = NULL;
    if (threads > 1 && sy_pool_new(threads, &pool)) {
        fprintf(stderr, "bench_qgemm: %s\n", sy_last_error());
        return 1;
    }
    sy_exec ex1 = {.threads = 1}, exn = {.pool = pool, .threads = threads};
    printf("int8 product (sy_qgemm_i8) vs float32 (sy_sgemm_parallel), GOPS = 2 m n k / s; %d threads in the NT columns\n",
           threads);
    printf("%-28s %7s %5s %5s | %8s %8s %6s | %8s %8s %6s\n", "shape", "m", "n", "k", "i8 1T", "f32 1T", "ratio",
           "i8 NT", "f32 NT", "ratio");
    uint64_t seed = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const shape *s = &shapes[si];
        if (only && !strstr(s->what, only)) continue;
        job j = {.s = s};
        int64_t xn = s->m * s->k, wn = s->n * s->k, yn = s->m * s->n;
        j.x = malloc((size_t)xn);
        j.y = malloc((size_t)yn);
        j.xf = malloc((size_t)xn * sizeof(float));
        j.yf = malloc((size_t)yn * sizeof(float));
        j.wf = malloc((size_t)wn * sizeof(float));
        j.bias = calloc((size_t)s->n, sizeof(float));
        int8_t *w = malloc((size_t)wn);
        int32_t *qbias = calloc((size_t)s->n, 4), *mult = malloc((size_t)s->n * 4), *shift = malloc((size_t)s->n * 4);
        if (!j.x || !j.y || !j.xf || !j.yf || !j.wf || !j.bias || !w || !qbias || !mult || !shift) {
            fprintf(stderr, "bench_qgemm: out of memory at %s\n", s->what);
            return 1;
        }
        for (int64_t i = 0; i < xn; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            j.x[i] = (int8_t)(seed >> 56);
            j.xf[i] = (float)j.x[i] / 128.0f;
        }
        for (int64_t i = 0; i < wn; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            w[i] = (int8_t)(seed >> 56);
            j.wf[i] = (float)w[i] / 128.0f;
        }
        for (int64_t c = 0; c < s->n; c++) {
            int sh;
            sy_q_multiplier(1.0 / (100.0 * sqrt((double)s->k)), &mult[c], &sh);
            shift[c] = sh;
        }
        j.packed = aligned_alloc(64, (size_t)sy_align_up(sy_qgemm_packed_bytes(s->n, s->k), 64));
        sy_qgemm_pack(j.packed, w, s->n, s->k);
        j.p = (sy_qgemm_params){.x_zp = -3, .y_zp = -128, .act_min = -128, .act_max = 127, .bias = qbias,
                                .mult = mult, .shift = shift};
        double ops = 2.0 * (double)s->m * (double)s->n * (double)s->k * 1e-9;
        double r[4];
        for (int t = 0; t < 2; t++) {
            j.ex = t ? &exn : &ex1;
            r[2 * t] = ops / time_it(run_int8, &j);
            r[2 * t + 1] = ops / time_it(run_f32, &j);
        }
        printf("%-28s %7lld %5lld %5lld | %8.1f %8.1f %5.2fx | %8.1f %8.1f %5.2fx\n", s->what, (long long)s->m,
               (long long)s->n, (long long)s->k, r[0], r[1], r[0] / r[1], r[2], r[3], r[2] / r[3]);
        fflush(stdout);
        free(j.x), free(j.y), free(j.xf), free(j.yf), free(j.wf), free(j.bias), free(w), free(qbias), free(mult),
            free(shift), free(j.packed);
    }
    sy_pool_free(pool);
    return 0;
}
