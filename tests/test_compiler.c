/*
 * test_compiler.c - plans: no allocation while stepping, shared parameters,
 * liveness planning (and in place), fusion, determinism, learning, the Keras logits rule,
 * and errors at compile and run time.
 */
#include "check.h"
#include "systolic.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- an allocator that counts calls ------------------------------------------ */

static atomic_long alloc_calls;

static void *counting_alloc(void *ctx, size_t size, size_t align) {
    (void)ctx;
    atomic_fetch_add(&alloc_calls, 1);
    size_t rounded = (size + align - 1) / align * align;
    return aligned_alloc(align, rounded ? rounded : align);
}
static void counting_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

/* Process-wide malloc calls, to report what third-party code does. Not
 * under AddressSanitizer or ThreadSanitizer, which must own malloc. */
static atomic_long libc_calls;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
void *malloc(size_t n) {
    atomic_fetch_add_explicit(&libc_calls, 1, memory_order_relaxed);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    atomic_fetch_add_explicit(&libc_calls, 1, memory_order_relaxed);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&libc_calls, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}
int posix_memalign(void **p, size_t a, size_t n) {
    atomic_fetch_add_explicit(&libc_calls, 1, memory_order_relaxed);
    *p = __libc_memalign(a, n);
    return *p ? 0 : 12;
}
void *aligned_alloc(size_t a, size_t n) {
    atomic_fetch_add_explicit(&libc_calls, 1, memory_order_relaxed);
    return __libc_memalign(a, n);
}
#endif

/* ---- a small CNN like the Fashion-MNIST tutorial's --------------------------------- */

typedef struct cnn {
    sy_graph *g;
    sy_node x, y, logits, probs, loss, kernel, dense;
} cnn;

static cnn build_cnn(int64_t batch, float input_scale, bool with_dropout) {
    cnn m;
    sy_graph_new(&m.g);
    sy_graph *g = m.g;
    m.x = sy_graph_input(g, "x", SY_F32, sy_shape_of(4, batch, (int64_t)12, (int64_t)12, (int64_t)1));
    m.y = sy_graph_input(g, "y", SY_I32, sy_shape_of(1, batch));
    sy_graph_push_scope(g, "conv2d");
    m.kernel = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(4, (int64_t)3, (int64_t)3, (int64_t)1, (int64_t)8), sy_init_glorot_uniform(1));
    sy_node cb = sy_graph_param(g, "bias", SY_F32, sy_shape_of(1, (int64_t)8), sy_init_zeros());
    sy_node scaled = sy_graph_mul(g, m.x, sy_graph_fill(g, SY_F32, sy_shape_of(0), input_scale));
    sy_node h = sy_graph_relu(g, sy_graph_bias_add(g, sy_graph_conv2d(g, scaled, m.kernel, 1, 1, SY_PADDING_VALID), cb));
    sy_graph_pop_scope(g);
    h = sy_graph_max_pool2d(g, h, 2, 2, 2, 2, SY_PADDING_VALID);
    if (with_dropout) h = sy_graph_dropout(g, h, 0.25f, 7);
    h = sy_graph_reshape(g, h, sy_shape_of(2, batch, (int64_t)(5 * 5 * 8)));
    sy_graph_push_scope(g, "dense");
    m.dense = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, (int64_t)200, (int64_t)10), sy_init_glorot_uniform(2));
    sy_node db = sy_graph_param(g, "bias", SY_F32, sy_shape_of(1, (int64_t)10), sy_init_zeros());
    m.logits = sy_graph_bias_add(g, sy_graph_matmul(g, h, m.dense, false, false), db);
    sy_graph_pop_scope(g);
    m.probs = sy_graph_softmax(g, m.logits, -1);
    m.loss = sy_graph_reduce_mean(g, sy_graph_sparse_categorical_crossentropy(g, m.probs, m.y, false), NULL, 0, false);
    CHECK(sy_graph_status(g) == SY_OK, "cnn: %s", sy_graph_error(g));
    return m;
}

/* Deterministic synthetic data: images whose label is the brightest quadrant-ish. */
static void feed_batch(sy_plan *p, const cnn *m, int64_t batch, int step) {
    float *x = sy_plan_input(p, m->x);
    int32_t *y = sy_plan_input(p, m->y);
    sy_rng r = sy_rng_new(1000 + (uint64_t)step, 0);
    for (int64_t i = 0; i < batch; i++) {
        int label = (int)(sy_rng_u32(&r) % 10);
        for (int64_t k = 0; k < 144; k++) {
            int row = (int)(k / 12), col = (int)(k % 12);
            float signal = (row + col) % 10 == label ? 1.0f : 0.0f;
            x[i * 144 + k] = signal + 0.3f * sy_rng_uniform(&r);
        }
        if (y) y[i] = label;
    }
}

/* Options for a plan of *out (and loss; SY_NONE: none) over vars, on pool (NULL: one thread). */
static sy_plan_options out_options(const sy_node *out, sy_node loss, sy_vars *vars, sy_pool *pool) {
    sy_plan_options o = sy_plan_options_default();
    o.outputs = out;
    o.n_outputs = 1;
    o.loss = loss;
    o.vars = vars;
    o.pool = pool;
    return o;
}

static sy_plan *compile_train(const cnn *m, sy_pool *pool, bool fuse, sy_vars *vars) {
    sy_plan_options o = sy_plan_options_default();
    o.loss = m->loss;
    o.optimizer = sy_optimizer_adam(1e-2f);
    o.pool = pool;
    o.fuse = fuse;
    o.vars = vars;
    o.outputs = &m->probs;
    o.n_outputs = 1;
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(m->g, &o, &p));
    return p;
}

static void test_no_allocation(sy_pool *pool) {
    cnn m = build_cnn(16, 1.0f, true);
    sy_vars *vars;
    CHECK_OK(sy_vars_new(&vars));
    sy_plan *train = compile_train(&m, pool, true, vars);
    sy_plan_options o = out_options(&m.probs, m.loss, vars, pool);
    sy_plan *eval;
    CHECK_OK(sy_plan_compile(m.g, &o, &eval));
    if (!train || !eval) return;
    for (int s = 0; s < 3; s++) { /* warm up: threads, oneDNN's JIT */
        feed_batch(train, &m, 16, s);
        CHECK_OK(sy_plan_run(train));
        feed_batch(eval, &m, 16, s);
        CHECK_OK(sy_plan_run(eval));
    }
    long before = atomic_load(&alloc_calls), libc_before = atomic_load(&libc_calls);
    const int steps = 100;
    for (int s = 0; s < steps; s++) {
        CHECK_OK(sy_plan_run(train));
        CHECK_OK(sy_plan_run(eval));
    }
    long calls = atomic_load(&alloc_calls) - before, libc = atomic_load(&libc_calls) - libc_before;
    CHECK(calls == 0, "%ld calls to systolic's allocator in %d train + eval steps; expected none", calls, steps);
    fprintf(stderr, "no_allocation: systolic allocator calls per step: %ld; process-wide malloc calls per train+eval step: %.1f"
                    " (oneDNN's sgemm packing buffer, one per call; see docs/design/gemm.md)\n",
            calls, (double)libc / steps);
    sy_plan_free(train);
    sy_plan_free(eval);
    sy_vars_free(vars);
    sy_graph_free(m.g);
}

/* Train, evaluate and predict plans of different batch sizes share parameters. */
static void test_shared_parameters(void) {
    cnn tm = build_cnn(16, 1.0f, false), pm = build_cnn(5, 1.0f, false);
    sy_vars *vars;
    CHECK_OK(sy_vars_new(&vars));
    sy_plan *train = compile_train(&tm, NULL, true, vars);
    sy_plan_options o = sy_plan_options_default();
    o.outputs = &pm.probs;
    o.n_outputs = 1;
    o.vars = vars;
    sy_plan *predict;
    CHECK_OK(sy_plan_compile(pm.g, &o, &predict));
    if (!train || !predict) return;
    CHECK(sy_vars_count(vars) == 4 + 8, "store holds %d variables; expected 4 parameters and 8 Adam slots", sy_vars_count(vars));
    feed_batch(predict, &pm, 5, 0);
    CHECK_OK(sy_plan_run(predict));
    float before[50], after[50];
    memcpy(before, sy_plan_output(predict, pm.probs), sizeof before);
    for (int s = 0; s < 5; s++) {
        feed_batch(train, &tm, 16, s);
        CHECK_OK(sy_plan_run(train));
    }
    CHECK(sy_vars_iterations(vars) == 5, "iterations %lld", (long long)sy_vars_iterations(vars));
    CHECK_OK(sy_plan_run(predict));
    memcpy(after, sy_plan_output(predict, pm.probs), sizeof after);
    double diff = 0;
    for (int i = 0; i < 50; i++) diff += fabs(after[i] - before[i]);
    CHECK(diff > 1e-4, "predictions did not change after training (sum of |change| %g): parameters not shared", diff);

    /* a graph whose parameter of the same name has another shape is refused by name */
    sy_graph *g;
    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, (int64_t)4, (int64_t)7));
    sy_graph_push_scope(g, "dense");
    sy_node k = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, (int64_t)7, (int64_t)10), sy_init_zeros());
    sy_graph_pop_scope(g);
    sy_node out = sy_graph_matmul(g, x, k, false, false);
    sy_plan_options bad = sy_plan_options_default();
    bad.outputs = &out;
    bad.n_outputs = 1;
    bad.vars = vars;
    sy_plan *p = NULL;
    sy_status st = sy_plan_compile(g, &bad, &p);
    CHECK(st == SY_ERR_SHAPE && p == NULL, "mismatched variable accepted: %s", sy_status_name(st));
    CHECK(strstr(sy_last_error(), "dense/kernel") && strstr(sy_last_error(), "(200, 10)") && strstr(sy_last_error(), "(7, 10)"),
          "message should name the variable and both shapes: %s", sy_last_error());
    CHECK(sy_vars_count(vars) == 12, "a failed compile changed the store (%d variables)", sy_vars_count(vars));
    sy_graph_free(g);
    sy_plan_free(train);
    sy_plan_free(predict);
    sy_vars_free(vars);
    sy_graph_free(tm.g);
    sy_graph_free(pm.g);
}

/* A deep chain reuses arena memory; the whole training step fits in far
 * less than the sum of its tensors. */
static void test_memory_planning(void) {
    sy_graph *g;
    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, (int64_t)64, (int64_t)256));
    sy_node h = x;
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        sy_node w = sy_graph_param(g, name, SY_F32, sy_shape_of(2, (int64_t)256, (int64_t)256), sy_init_glorot_uniform((uint64_t)i));
        h = sy_graph_tanh(g, sy_graph_matmul(g, h, w, false, false));
    }
    sy_node loss = sy_graph_reduce_mean(g, sy_graph_mul(g, h, h), NULL, 0, false);
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.optimizer = sy_optimizer_sgd(0.01f, 0.9f, false);
    sy_plan *p;
    CHECK_OK(sy_plan_compile(g, &o, &p));
    if (p) {
        sy_plan_info info;
        sy_plan_get_info(p, &info);
        CHECK(info.arena_bytes * 2 < info.unplanned_bytes, "arena %lld bytes vs %lld unplanned: liveness saved too little",
              (long long)info.arena_bytes, (long long)info.unplanned_bytes);
        CHECK(info.param_bytes == 20 * 256 * 256 * 4, "param block %lld bytes", (long long)info.param_bytes);
        CHECK(info.grad_bytes == info.param_bytes, "gradient block %lld bytes", (long long)info.grad_bytes);
        CHECK(info.slot_bytes == info.param_bytes, "momentum slot block %lld bytes", (long long)info.slot_bytes);
        fprintf(stderr, "memory_planning: arena %.2f MB planned vs %.2f MB unplanned, %d steps, %d ops fused\n",
                info.arena_bytes / 1e6, info.unplanned_bytes / 1e6, info.steps, info.fused);
        float *xin = sy_plan_input(p, x);
        for (int i = 0; i < 64 * 256; i++) xin[i] = (float)sin(i);
        float first = 0, last = 0;
        for (int s = 0; s < 20; s++) {
            CHECK_OK(sy_plan_run(p));
            last = *(const float *)sy_plan_output(p, loss);
            if (s == 0) first = last;
        }
        CHECK(last < first, "loss rose from %g to %g", first, last);
    }
    sy_plan_free(p);
    sy_graph_free(g);
}

/* Losses of n training steps. */
static void trajectory(const cnn *m, sy_pool *pool, bool fuse, int n, float *losses, float *kernel_out) {
    sy_plan *p = compile_train(m, pool, fuse, NULL);
    if (!p) return;
    for (int s = 0; s < n; s++) {
        feed_batch(p, m, 16, s);
        CHECK_OK(sy_plan_run(p));
        losses[s] = *(const float *)sy_plan_output(p, m->loss);
    }
    sy_vars *v = sy_plan_vars(p);
    memcpy(kernel_out, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), 2000 * sizeof(float));
    sy_plan_free(p);
}

static void test_fusion_and_determinism(sy_pool *pool) {
    cnn m = build_cnn(16, 1.0f, true);
    enum { N = 8 };
    float a[N], b[N], c[N], d[N];
    static float ka[2000], kb[2000], kc[2000], kd[2000];
    trajectory(&m, NULL, true, N, a, ka);
    trajectory(&m, NULL, true, N, b, kb);
    trajectory(&m, pool, true, N, c, kc);
    trajectory(&m, NULL, false, N, d, kd);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(ka, kb, sizeof ka) == 0, "two runs with the same seed differ");
    CHECK(memcmp(a, c, sizeof a) == 0 && memcmp(ka, kc, sizeof ka) == 0,
          "1 thread and 2 threads differ: loss %.9g vs %.9g after %d steps", a[N - 1], c[N - 1], N);
    for (int s = 0; s < N; s++) CHECK_CLOSE(d[s], a[s], 1e-4, 1e-5, "step %d: unfused vs fused loss", s);
    CHECK(a[N - 1] < a[0], "loss did not fall: %g -> %g", a[0], a[N - 1]);

    sy_plan *p = compile_train(&m, NULL, true, NULL);
    sy_plan_info info;
    sy_plan_get_info(p, &info);
    /* conv+bias+relu and matmul+bias become epilogues, and the gradient chains fuse */
    CHECK(info.fused >= 3, "only %d ops fused", info.fused);
    sy_plan_free(p);
    sy_graph_free(m.g);
}

/* ---- issue 15: BatchNormalization after a conv, fused and not ---- */

/* conv (3x3, 24 -> 20 channels, so Winograd takes it) + bias -> BatchNormalization as Keras builds it -> ReLU,
 * with the BN's moving statistics (training false) or the batch's (training true). */
static sy_node build_conv_bn(sy_graph *g, sy_node x, bool training) {
    sy_node k = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(4, 3L, 3L, 24L, 20L), sy_init_glorot_uniform(3));
    sy_node b = sy_graph_param(g, "bias", SY_F32, sy_shape_of(1, 20L), sy_init_uniform(-0.5, 0.5, 4));
    sy_node gamma = sy_graph_param(g, "gamma", SY_F32, sy_shape_of(1, 20L), sy_init_uniform(0.5, 1.5, 5));
    sy_node beta = sy_graph_param(g, "beta", SY_F32, sy_shape_of(1, 20L), sy_init_uniform(-0.5, 0.5, 6));
    sy_node mean = sy_graph_param(g, "moving_mean", SY_F32, sy_shape_of(1, 20L), sy_init_uniform(-0.3, 0.3, 7));
    sy_node var = sy_graph_param(g, "moving_variance", SY_F32, sy_shape_of(1, 20L), sy_init_uniform(0.5, 2, 8));
    sy_node t = sy_graph_bias_add(g, sy_graph_conv2d(g, x, k, 1, 1, SY_PADDING_SAME), b);
    if (training) {
        static const int32_t red[3] = {0, 1, 2};
        mean = sy_graph_reduce_mean(g, t, red, 3, false);
        sy_node c = sy_graph_sub(g, t, mean);
        var = sy_graph_reduce_mean(g, sy_graph_mul(g, c, c), red, 3, false);
    }
    sy_node inv = sy_graph_mul(g, sy_graph_rsqrt(g, sy_graph_add(g, var, sy_graph_fill(g, SY_F32, sy_shape_of(0), 1.001e-5))),
                               gamma);
    return sy_graph_relu(g, sy_graph_add(g, sy_graph_mul(g, sy_graph_sub(g, t, mean), inv), beta));
}

/* Fused and unfused plans agree. Mode 0, inference: the BN is not folded into the conv's kernel but runs in Keras's
 * order, one fused elementwise pass after the conv, and both plans take the direct conv (sy_exec.inference), so they
 * agree bit for bit. Mode 1, training: the batch statistics depend on the conv and nothing past the bias folds;
 * the fused plan's conv is Winograd's, the unfused one's too, in a different grouping. */
static void test_bn_after_conv(sy_pool *pool) {
    for (int mode = 0; mode < 2; mode++) {
        sy_graph *g;
        sy_graph_new(&g);
        sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(4, 2L, 9L, 7L, 24L));
        sy_node y = build_conv_bn(g, x, mode == 1);
        static const int32_t all[4] = {0, 1, 2, 3};
        sy_node loss = mode ? sy_graph_reduce_sum(g, y, all, 4, false) : SY_NONE;
        CHECK(sy_graph_status(g) == SY_OK, "conv_bn: %s", sy_graph_error(g));
        sy_vars *vars;
        CHECK_OK(sy_vars_new(&vars));
        float *out[2] = {NULL, NULL};
        int64_t n = 2 * 9 * 7 * 20;
        int32_t fused = 0;
        for (int f = 0; f < 2; f++) {
            sy_plan_options o = out_options(&y, loss, vars, pool);
            o.fuse = f == 1;
            sy_plan *p = NULL;
            CHECK_OK(sy_plan_compile(g, &o, &p));
            if (!p) break;
            float *xi = sy_plan_input(p, x);
            for (int64_t i = 0; i < 2 * 9 * 7 * 24; i++) xi[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
            CHECK_OK(mode ? sy_plan_run_gradients(p) : sy_plan_run(p));
            out[f] = malloc((size_t)n * sizeof(float));
            memcpy(out[f], sy_plan_output(p, y), (size_t)n * sizeof(float));
            sy_plan_info info;
            sy_plan_get_info(p, &info);
            if (f) fused = info.fused;
            sy_plan_free(p);
        }
        if (out[0] && out[1]) {
            double e = 0, m = 0;
            for (int64_t i = 0; i < n; i++) {
                e = fmax(e, fabs((double)out[0][i] - out[1][i]));
                m = fmax(m, fabs((double)out[0][i]));
            }
            if (mode) CHECK(e <= 1e-5 * m, "mode %d: fused vs unfused differ by %g (largest output %g)", mode, e, m);
            else CHECK(e == 0, "inference: fused vs unfused differ by %g (largest output %g), not bit for bit", e, m);
        }
        if (mode == 0) CHECK(fused >= 2, "inference: only %d ops fused (the bias into the conv, the BN chain)", fused);
        free(out[0]);
        free(out[1]);
        sy_vars_free(vars);
        sy_graph_free(g);
    }
}

/* issue 21, in place: an elementwise step whose input dies at it writes over that input. A product with
 * its tanh epilogue, then an elementwise pass over it (* scale) and another over that (x * x + x, relu; x is
 * read three times, so the passes do not fuse into one): with $SYSTOLIC_IN_PLACE=0 and without, on one thread
 * and two, the outputs are the same bits, and in place the inference arena holds one buffer fewer (what each
 * value's own buffer would take, unplanned_bytes, is the same). Training plans too (their gradient steps read
 * the forward values, so fewer steps qualify): the same outputs and gradients. */
static void test_in_place(sy_pool *pool) {
    for (int mode = 0; mode < 2; mode++) {
        sy_graph *g;
        sy_graph_new(&g);
        sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 64L, 256L));
        sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(2, 256L, 256L), sy_init_glorot_uniform(1));
        sy_node big = sy_graph_param(g, "scale", SY_F32, sy_shape_of(2, 64L, 256L), sy_init_uniform(-1, 1, 9));
        sy_node t = sy_graph_mul(g, sy_graph_tanh(g, sy_graph_matmul(g, x, w, false, false)), big);
        sy_node y = sy_graph_relu(g, sy_graph_add(g, sy_graph_mul(g, t, t), t));
        static const int32_t all[2] = {0, 1};
        sy_node loss = mode ? sy_graph_reduce_sum(g, y, all, 2, false) : SY_NONE;
        CHECK(sy_graph_status(g) == SY_OK, "in place: %s", sy_graph_error(g));
        sy_vars *vars;
        CHECK_OK(sy_vars_new(&vars));
        int64_t n = 64 * 256;
        float *out[3] = {NULL, NULL, NULL};
        sy_plan_info info[3];
        for (int v = 0; v < 3; v++) { /* in place, one thread; not in place; in place, two threads */
            setenv("SYSTOLIC_IN_PLACE", v == 1 ? "0" : "1", 1);
            sy_plan_options o = out_options(&y, loss, vars, v == 2 ? pool : NULL);
            sy_plan *p = NULL;
            CHECK_OK(sy_plan_compile(g, &o, &p));
            unsetenv("SYSTOLIC_IN_PLACE");
            if (!p) break;
            float *xi = sy_plan_input(p, x);
            for (int64_t i = 0; i < n; i++) xi[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
            CHECK_OK(mode ? sy_plan_run_gradients(p) : sy_plan_run(p));
            out[v] = malloc((size_t)n * sizeof(float));
            memcpy(out[v], sy_plan_output(p, y), (size_t)n * sizeof(float));
            if (mode) { /* and the scale's gradient */
                out[v] = realloc(out[v], (size_t)(2 * n) * sizeof(float));
                memcpy(out[v] + n, sy_plan_gradient(p, big), (size_t)n * sizeof(float));
            }
            sy_plan_get_info(p, &info[v]);
            sy_plan_free(p);
        }
        int64_t m = mode ? 2 * n : n;
        if (out[0] && out[1] && out[2])
            CHECK(!memcmp(out[0], out[1], (size_t)m * sizeof(float)) && !memcmp(out[0], out[2], (size_t)m * sizeof(float)),
                  "in place (%s): the outputs differ from the plan without it, or on two threads",
                  mode ? "training" : "inference");
        CHECK(info[0].unplanned_bytes == info[1].unplanned_bytes,
              "in place (%s): %lld bytes of values, %lld without", mode ? "training" : "inference",
              (long long)info[0].unplanned_bytes, (long long)info[1].unplanned_bytes);
        if (mode == 0) /* x, and one buffer for the product, * scale and the tail: two, against three */
            CHECK(info[0].arena_bytes * 3 == info[1].arena_bytes * 2, "in place (inference): arena %lld bytes, %lld without",
                  (long long)info[0].arena_bytes, (long long)info[1].arena_bytes);
        fprintf(stderr, "in_place (%s): arena %lld bytes in place, %lld without\n", mode ? "training" : "inference",
                (long long)info[0].arena_bytes, (long long)info[1].arena_bytes);
        for (int v = 0; v < 3; v++) free(out[v]);
        sy_vars_free(vars);
        sy_graph_free(g);
    }
}

/* Learning: the CNN separates the synthetic classes. */
static void test_learning(sy_pool *pool) {
    cnn m = build_cnn(32, 1.0f, false);
    sy_plan *p = compile_train(&m, pool, true, NULL);
    if (!p) return;
    int correct = 0, total = 0;
    for (int s = 0; s < 300; s++) {
        feed_batch(p, &m, 32, s);
        CHECK_OK(sy_plan_run(p));
        if (s >= 280) {
            const float *probs = sy_plan_output(p, m.probs);
            const int32_t *y = sy_plan_input(p, m.y);
            for (int i = 0; i < 32; i++) {
                int best = 0;
                for (int j = 1; j < 10; j++)
                    if (probs[i * 10 + j] > probs[i * 10 + best]) best = j;
                correct += best == y[i];
                total++;
            }
        }
    }
    double acc = (double)correct / total;
    fprintf(stderr, "learning: training accuracy over the last 20 steps %.3f\n", acc);
    CHECK(acc > 0.9, "training accuracy %.3f after 300 steps; expected > 0.9", acc);
    sy_plan_free(p);
    sy_graph_free(m.g);
}

/* tf.keras computes a cross-entropy of softmax outputs from the logits: with
 * raw 0-255 pixels the softmax saturates and clipped probabilities give no
 * gradient, so without this rule the model cannot learn. */
static void test_logits_rule(void) {
    sy_graph *g;
    sy_graph_new(&g);
    sy_node z = sy_graph_param(g, "z", SY_F32, sy_shape_of(2, (int64_t)2, (int64_t)3), sy_init_zeros());
    sy_node labels = sy_graph_input(g, "labels", SY_I32, sy_shape_of(1, (int64_t)2));
    sy_node p = sy_graph_softmax(g, z, -1);
    sy_node via_softmax = sy_graph_reduce_mean(g, sy_graph_sparse_categorical_crossentropy(g, p, labels, false), NULL, 0, false);
    sy_node copy = sy_graph_reshape(g, sy_graph_reshape(g, p, sy_shape_of(1, (int64_t)6)), sy_shape_of(2, (int64_t)2, (int64_t)3));
    sy_node clipped = sy_graph_reduce_mean(g, sy_graph_sparse_categorical_crossentropy(g, copy, labels, false), NULL, 0, false);
    CHECK(sy_graph_status(g) == SY_OK, "%s", sy_graph_error(g));
    CHECK(strcmp(sy_graph_op_name(g, via_softmax - 1), "sparse_softmax_cross_entropy") == 0,
          "softmax output + sparse_categorical_crossentropy built %s, expected the logits form", sy_graph_op_name(g, via_softmax - 1));
    sy_node losses[2] = {via_softmax, clipped};
    float grad_norm[2], value[2];
    for (int i = 0; i < 2; i++) {
        sy_plan_options o = sy_plan_options_default();
        o.loss = losses[i];
        sy_plan *plan;
        CHECK_OK(sy_plan_compile(g, &o, &plan));
        if (!plan) return;
        float *zv = sy_vars_data(sy_plan_vars(plan), 0);
        float saturated[6] = {500, 0, -300, 0, 900, 10}; /* like logits from raw pixels */
        memcpy(zv, saturated, sizeof saturated);
        int32_t *l = sy_plan_input(plan, labels);
        l[0] = 1; /* wrong and confident */
        l[1] = 1;
        CHECK_OK(sy_plan_run(plan));
        value[i] = *(const float *)sy_plan_output(plan, losses[i]);
        const float *gz = sy_plan_gradient(plan, z);
        grad_norm[i] = 0;
        for (int k = 0; k < 6; k++) grad_norm[i] += fabsf(gz[k]);
        sy_plan_free(plan);
    }
    /* row 0 is confidently wrong (loss 500), row 1 confidently right (loss 0) */
    CHECK_CLOSE(value[0], 500 / 2.0, 1e-5, 1e-3, "logits-form loss");
    CHECK(grad_norm[0] > 0.99f, "logits form gives gradient norm %g; expected 1", grad_norm[0]);
    CHECK_CLOSE(value[1], 0.5 * -log(1e-7), 1e-4, 1e-4, "clipped-probability loss");
    CHECK(grad_norm[1] < 1e-3f, "clipped probabilities should give (almost) no gradient, got %g", grad_norm[1]);
    sy_graph_free(g);
}

/* Bad data is reported with the op and position; the failed step changes nothing. */
static void test_run_errors(void) {
    cnn m = build_cnn(16, 1.0f, false);
    sy_plan *p = compile_train(&m, NULL, true, NULL);
    if (!p) return;
    feed_batch(p, &m, 16, 0);
    CHECK_OK(sy_plan_run(p));
    sy_vars *v = sy_plan_vars(p);
    static float before[2000];
    memcpy(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before);
    int32_t *y = sy_plan_input(p, m.y);
    y[3] = 12;
    sy_status st = sy_plan_run(p);
    CHECK(st == SY_ERR_INVALID_ARGUMENT, "a label of 12 with 10 classes ran: %s", sy_status_name(st));
    CHECK(strstr(sy_last_error(), "label value of 12") && strstr(sy_last_error(), "position 3") &&
              strstr(sy_last_error(), "[0, 10)"),
          "message: %s", sy_last_error());
    CHECK(memcmp(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before) == 0,
          "a failed step changed the parameters");
    CHECK(sy_vars_iterations(v) == 1, "a failed step counted as an iteration");
    y[3] = 2;
    CHECK_OK(sy_plan_run(p));
    sy_plan_free(p);
    sy_graph_free(m.g);
}

static void test_compile_errors(void) {
    sy_graph *g;
    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, (int64_t)4, (int64_t)3));
    sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(2, (int64_t)3, (int64_t)2), sy_init_zeros());
    sy_node y = sy_graph_matmul(g, x, w, false, false);
    sy_node not_param = sy_graph_reduce_sum(g, sy_graph_mul(g, x, x), NULL, 0, false);
    sy_plan *p = NULL;

    sy_plan_options o = sy_plan_options_default();
    o.optimizer = sy_optimizer_adam(1e-3f);
    o.outputs = &y;
    o.n_outputs = 1;
    CHECK(sy_plan_compile(g, &o, &p) == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "needs a loss"), "%s", sy_last_error());

    o = sy_plan_options_default();
    o.loss = not_param;
    o.optimizer = sy_optimizer_sgd(0.1f, 0, false);
    CHECK(sy_plan_compile(g, &o, &p) == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "no gradients"), "%s", sy_last_error());

    o = sy_plan_options_default();
    o.outputs = &y;
    o.n_outputs = 1;
    o.backend = "tpu9";
    CHECK(sy_plan_compile(g, &o, &p) == SY_ERR_NOT_FOUND && strstr(sy_last_error(), "tpu9") && strstr(sy_last_error(), "cpu"),
          "%s", sy_last_error());

    o = sy_plan_options_default();
    o.loss = not_param;
    o.optimizer = sy_optimizer_adam(-1.0f);
    CHECK(sy_plan_compile(g, &o, &p) == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "learning_rate"), "%s", sy_last_error());

    o = sy_plan_options_default();
    CHECK(sy_plan_compile(g, &o, &p) == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "nothing to compute"), "%s", sy_last_error());

    sy_graph_matmul(g, w, w, false, false); /* (3, 2) x (3, 2): fails, graph is now broken */
    o.outputs = &y;
    o.n_outputs = 1;
    CHECK(sy_plan_compile(g, &o, &p) == SY_ERR_SHAPE && strstr(sy_last_error(), "failed to build"), "%s", sy_last_error());
    CHECK(p == NULL, "a failed compile returned a plan");
    sy_graph_free(g);
}

/* A gradients-only plan leaves parameters alone; the learning rate can change. */
static void test_gradients_only_and_learning_rate(void) {
    cnn m = build_cnn(16, 1.0f, false);
    sy_plan_options o = sy_plan_options_default();
    o.loss = m.loss;
    sy_plan *p;
    CHECK_OK(sy_plan_compile(m.g, &o, &p));
    if (!p) return;
    feed_batch(p, &m, 16, 0);
    sy_vars *v = sy_plan_vars(p);
    static float before[2000];
    memcpy(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before);
    CHECK_OK(sy_plan_run(p));
    CHECK(memcmp(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before) == 0, "gradients-only plan changed weights");
    CHECK(sy_plan_gradient(p, m.dense) != NULL && sy_plan_gradient(p, m.x) == NULL, "gradient lookup");
    sy_plan_free(p);

    o.optimizer = sy_optimizer_sgd(0.5f, 0, false);
    CHECK_OK(sy_plan_compile(m.g, &o, &p));
    sy_plan_set_learning_rate(p, 0.0f);
    feed_batch(p, &m, 16, 0);
    v = sy_plan_vars(p);
    memcpy(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before);
    CHECK_OK(sy_plan_run(p));
    CHECK(memcmp(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before) == 0, "learning rate 0 changed weights");
    sy_plan_set_learning_rate(p, 0.5f);
    CHECK_OK(sy_plan_run(p));
    CHECK(memcmp(before, sy_vars_data(v, sy_vars_find(v, "dense/kernel")), sizeof before) != 0, "learning rate 0.5 changed nothing");
    sy_plan_free(p);
    sy_graph_free(m.g);
}

int main(void) {
    sy_allocator a = {counting_alloc, counting_free, NULL};
    sy_set_allocator(&a);
    sy_pool *pool;
    CHECK_OK(sy_pool_new(2, &pool));
    test_no_allocation(pool);
    test_shared_parameters();
    test_memory_planning();
    test_fusion_and_determinism(pool);
    test_bn_after_conv(pool); /* issue 15 */
    test_in_place(pool);      /* issue 21 */
    test_learning(pool);
    test_logits_rule();
    test_run_errors();
    test_compile_errors();
    test_gradients_only_and_learning_rate();
    sy_pool_free(pool);
    return check_report("test_compiler");
}
