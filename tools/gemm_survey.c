/*
 * gemm_survey.c - how fast is each SGEMM Debian ships on the shapes systolic
 * needs, and does it allocate per call? The measurement behind
 * docs/design/gemm.md; gemm_survey.sh builds it once per library.
 *
 * Shapes: a large square product (the peak), the Fashion-MNIST CNN's conv
 * (as im2col GEMMs, K = 9) and Dense layer at batch 128 and 1000, the IMDB
 * LSTM's gate products, and VGG16's 3x3 convs on 32x32 inputs (batch 16).
 * Row-major C = op(A) op(B), best rate over repetitions lasting >= 0.3 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef USE_DNNL
#include <dnnl.h>
#include <omp.h>
#else
#include <cblas.h>
#endif

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static long mallocs;
void *malloc(size_t n) { mallocs++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { mallocs++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { mallocs++; return __libc_realloc(p, n); }
int posix_memalign(void **p, size_t a, size_t n) { mallocs++; *p = __libc_memalign(a, n); return *p ? 0 : 12; }
void *aligned_alloc(size_t a, size_t n) { mallocs++; return __libc_memalign(a, n); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct shape { const char *name; int m, n, k, ta, tb; } shape;

static void gemm(const shape *s, const float *a, const float *b, float *c) {
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
#ifdef USE_DNNL
    dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, s->n);
#else
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k,
                1.0f, a, lda, b, ldb, 0.0f, c, s->n);
#endif
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
#ifdef USE_DNNL
    omp_set_num_threads(threads);
#else
    (void)threads; /* set OPENBLAS_NUM_THREADS / BLIS_NUM_THREADS */
#endif
    const shape shapes[] = {
        {"peak 2048^3", 2048, 2048, 2048, 0, 0},
        {"fmnist conv fwd b128", 86528, 64, 9, 0, 0},
        {"fmnist conv dW b128", 9, 64, 86528, 1, 0},
        {"fmnist conv dX b128", 86528, 9, 64, 0, 1},
        {"fmnist dense fwd b128", 128, 10, 10816, 0, 0},
        {"fmnist dense fwd b1000", 1000, 10, 10816, 0, 0},
        {"fmnist dense dW b128", 10816, 10, 128, 1, 0},
        {"fmnist dense dX b128", 128, 10816, 10, 0, 1},
        {"lstm gates b64", 64, 400, 132, 0, 0},
        {"lstm gates b256", 256, 400, 132, 0, 0},
        {"vgg 32x32 64->64 b16", 16384, 64, 576, 0, 0},
        {"vgg 16x16 128->128 b16", 4096, 128, 1152, 0, 0},
        {"vgg 8x8 256->256 b16", 1024, 256, 2304, 0, 0},
        {"vgg 4x4 512->512 b16", 256, 512, 4608, 0, 0},
        {"vgg 2x2 512->512 b16", 64, 512, 4608, 0, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
        float *a = __libc_memalign(64, na * 4), *b = __libc_memalign(64, nb * 4), *c = __libc_memalign(64, nc * 4);
        for (size_t j = 0; j < na; j++) a[j] = (float)(j % 7) * 0.1f;
        for (size_t j = 0; j < nb; j++) b[j] = (float)(j % 5) * 0.1f;
        gemm(s, a, b, c);
        long m0 = mallocs;
        gemm(s, a, b, c);
        long per_call = mallocs - m0;
        double best = 0;
        for (int round = 0; round < 3; round++) {
            int reps = 1;
            for (;;) {
                double t0 = now();
                for (int r = 0; r < reps; r++) gemm(s, a, b, c);
                double t = now() - t0;
                if (t > 0.1) {
                    double rate = 2.0 * s->m * s->n * s->k * reps / t * 1e-9;
                    if (rate > best) best = rate;
                    break;
                }
                reps *= 2;
            }
        }
        printf("%-24s M=%6d N=%5d K=%6d  %7.1f GFLOP/s  %ld malloc/call\n", s->name, s->m, s->n, s->k, best, per_call);
        free(a);
        free(b);
        free(c);
    }
    return 0;
}
