/*
 * test_winograd.c - the cpu backend's Winograd F(4x4, 3x3) convs
 * (src/backend/cpu/winograd.c) against a float64 direct convolution: the
 * forward (with bias and ReLU), the input gradient and the kernel gradient,
 * over shapes with odd H and W, 'valid' and 'same' padding, and channel
 * counts that are not multiples of the 16-float vectors. Each kernel is
 * called through the cpu backend's conv kernels (conv.c), which must pick
 * Winograd for these shapes, on 1 thread and on 2 (bitwise the same).
 *
 * Error measure: max |got - ref| / max |ref| over the tensor (an element's
 * own relative error means nothing where the sum cancels to near zero).
 * Measured on these shapes (inputs uniform in [-1, 1)): from 1.6e-6 at
 * K = 9 x 16 terms per output to 1.0e-5 (forward) and 1.4e-5 (input
 * gradient) at VGG16's deepest layer, K = 9 x 512, growing about as
 * sqrt(K); the float32 im2col path gives 1e-7 to 5e-7 on the same shapes
 * (run with $SYSTOLIC_WINOGRAD=0 to see them). Winograd's transforms scale
 * by up to 8 and 1/24 and add 6 terms per stage, which costs F(4,3) a few
 * bits (Lavin & Gray 2016; Barabasz et al. 2020 measure the same order).
 * TOL = 5e-5 leaves a margin of 3.5x over the worst seen and is still
 * 1,000x below what a wrong transform coefficient or a tile off by one
 * gives (errors of 1e-1 or more).
 */
#include "backend/cpu/cpu_internal.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

#define TOL 5e-5

typedef struct shape {
    int64_t n, h, w, c, o;
    int padding;
    int act;
} shape;

static uint64_t rng_state = 12345;
static float uniform(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 40) * 0x1p-24) * 2.0f - 1.0f;
}

static float *random_floats(int64_t n) {
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = uniform();
    return p;
}

/* Run kernel kn (op) on `threads` threads; out gets out_shape's elements. */
static void run_kernel(const sy_kernel *kn, sy_op op, const sy_attrs *a, int threads, void *const *in,
                       const sy_shape *in_shape, const sy_shape *out_shape, float *out) {
    sy_pool *pool = NULL;
    if (threads > 1) CHECK(sy_pool_new(threads, &pool) == SY_OK, "pool");
    sy_exec ex = {.pool = pool, .threads = threads};
    sy_dtype dt[3] = {SY_F32, SY_F32, SY_F32};
    sy_kargs k = {.op = op, .attr = a, .dtype = SY_F32, .out_shape = out_shape, .out = out, .n_in = in[2] ? 3 : 2,
                  .in = in, .in_shape = in_shape, .in_dtype = dt, .ex = &ex};
    size_t ws = kn->workspace ? kn->workspace(&k, threads) : 0;
    k.ws = ws ? aligned_alloc(SY_ALIGN, sy_align_up((int64_t)ws, SY_ALIGN)) : NULL;
    kn->run(&k);
    free(k.ws);
    sy_pool_free(pool);
}

static double rel_err(const float *got, const double *ref, int64_t n) {
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        e = d > e ? d : e;
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
    }
    return e / (m > 0 ? m : 1);
}

static void check_shape(const shape *s) {
    int64_t oh, ow, pt, pl;
    sy_conv_out(s->h, 3, 1, s->padding, &oh, &pt);
    sy_conv_out(s->w, 3, 1, s->padding, &ow, &pl);
    sy_wino_shape ws = {s->n, s->h, s->w, s->c, s->o, pt, pl, oh, ow};
    bool wino = sy_winograd_enabled();
    CHECK(!wino || sy_winograd_fits(&ws), "conv.c takes Winograd for this shape");
    int64_t nx = s->n * s->h * s->w * s->c, nw = 9 * s->c * s->o, ny = s->n * oh * ow * s->o;
    float *x = random_floats(nx), *w = random_floats(nw), *dy = random_floats(ny), *bias = random_floats(s->o);
    double *y_ref = calloc((size_t)ny, sizeof(double)), *dx_ref = calloc((size_t)nx, sizeof(double));
    double *dw_ref = calloc((size_t)nw, sizeof(double));
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++)
                for (int64_t kh = 0; kh < 3; kh++)
                    for (int64_t kw = 0; kw < 3; kw++) {
                        int64_t ih = i + kh - pt, iw = j + kw - pl;
                        if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                        const float *xp = x + ((n * s->h + ih) * s->w + iw) * s->c;
                        double *dxp = dx_ref + ((n * s->h + ih) * s->w + iw) * s->c;
                        const float *dyp = dy + ((n * oh + i) * ow + j) * s->o;
                        double *yp = y_ref + ((n * oh + i) * ow + j) * s->o;
                        for (int64_t c = 0; c < s->c; c++) {
                            const float *wp = w + ((kh * 3 + kw) * s->c + c) * s->o;
                            double *dwp = dw_ref + ((kh * 3 + kw) * s->c + c) * s->o;
                            for (int64_t o = 0; o < s->o; o++) {
                                yp[o] += (double)xp[c] * wp[o];
                                dxp[c] += (double)dyp[o] * wp[o];
                                dwp[o] += (double)xp[c] * dyp[o];
                            }
                        }
                    }
    if (s->act == SY_ACT_RELU)
        for (int64_t i = 0; i < ny; i++) {
            double v = y_ref[i] + bias[i % s->o];
            y_ref[i] = v > 0 ? v : 0;
        }
    sy_attrs a = {.conv = {.stride = {1, 1}, .padding = s->padding, .act = (uint8_t)s->act}};
    sy_shape xs = sy_shape_of(4, s->n, s->h, s->w, s->c), wsh = sy_shape_of(4, 3L, 3L, s->c, s->o);
    sy_shape ys = sy_shape_of(4, s->n, oh, ow, s->o), b_s = sy_shape_of(1, s->o);
    float *got[2][3];
    for (int t = 0; t < 2; t++) {
        got[t][0] = malloc((size_t)ny * sizeof(float));
        got[t][1] = malloc((size_t)nx * sizeof(float));
        got[t][2] = malloc((size_t)nw * sizeof(float));
        void *fin[3] = {x, w, s->act ? bias : NULL};
        sy_shape fsh[3] = {xs, wsh, b_s};
        run_kernel(&sy_cpu_conv2d, SY_OP_CONV2D, &a, t + 1, fin, fsh, &ys, got[t][0]);
        sy_attrs plain = a;
        plain.conv.act = 0;
        void *din[3] = {dy, w, NULL};
        sy_shape dsh[2] = {ys, wsh};
        run_kernel(&sy_cpu_conv2d_backprop_input, SY_OP_CONV2D_BACKPROP_INPUT, &plain, t + 1, din, dsh, &xs, got[t][1]);
        void *win[3] = {x, dy, NULL};
        sy_shape wish[2] = {xs, ys};
        run_kernel(&sy_cpu_conv2d_backprop_filter, SY_OP_CONV2D_BACKPROP_FILTER, &plain, t + 1, win, wish, &wsh,
                   got[t][2]);
    }
    double e[3] = {rel_err(got[0][0], y_ref, ny), rel_err(got[0][1], dx_ref, nx), rel_err(got[0][2], dw_ref, nw)};
    printf("winograd (%lld, %lld, %lld, %lld) -> %lld, %s%s: forward %.2g, input gradient %.2g, kernel gradient %.2g\n",
           (long long)s->n, (long long)s->h, (long long)s->w, (long long)s->c, (long long)s->o,
           s->padding == SY_PAD_SAME ? "same" : "valid", s->act ? " + bias, relu" : "", e[0], e[1], e[2]);
    for (int i = 0; i < 3; i++) CHECK(!wino || e[i] < TOL, "error %d: %g", i, e[i]);
    CHECK(!memcmp(got[0][0], got[1][0], (size_t)ny * sizeof(float)), "forward: 1 thread and 2 agree bitwise");
    CHECK(!memcmp(got[0][1], got[1][1], (size_t)nx * sizeof(float)), "input gradient: 1 thread and 2 agree bitwise");
    CHECK(!memcmp(got[0][2], got[1][2], (size_t)nw * sizeof(float)), "kernel gradient: 1 thread and 2 agree bitwise");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 3; i++) free(got[t][i]);
    free(x), free(w), free(dy), free(bias), free(y_ref), free(dx_ref), free(dw_ref);
}

int main(void) {
    if (!sy_winograd_enabled()) /* the same shapes through im2col + GEMM, for the errors it gives */
        printf("$SYSTOLIC_WINOGRAD=0: the im2col path's errors, for comparison (not checked)\n");
    static const shape shapes[] = {
        {2, 7, 9, 17, 19, SY_PAD_SAME, SY_ACT_NONE},    /* odd H, W: partial tiles; C, O not multiples of 16 */
        {3, 6, 11, 16, 33, SY_PAD_VALID, SY_ACT_NONE},  /* 'valid': the input gradient pads by 2 */
        {2, 13, 8, 40, 16, SY_PAD_SAME, SY_ACT_RELU},   /* bias and ReLU in the output transform */
        {1, 9, 9, 21, 23, SY_PAD_VALID, SY_ACT_RELU},   /* 'valid', odd: 7x7 outputs in 2x2 tiles */
        {2, 16, 16, 64, 48, SY_PAD_SAME, SY_ACT_NONE},  /* a VGG-like layer: K = 576 terms per output */
        {5, 30, 29, 16, 24, SY_PAD_SAME, SY_ACT_RELU},  /* 320 tiles: the blocked form, its last block partial */
        {1, 8, 8, 256, 130, SY_PAD_SAME, SY_ACT_NONE},  /* deep: K = 2304 terms */
        {2, 4, 4, 512, 512, SY_PAD_SAME, SY_ACT_NONE},  /* VGG16's deepest: K = 4608, one tile per image */
        {3, 16, 15, 200, 160, SY_PAD_VALID, SY_ACT_NONE}, /* U over 4 MB: the phased form, 48 tiles in 2 parts */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i]);
    return check_report("test_winograd");
}
