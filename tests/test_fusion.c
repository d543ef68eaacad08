/*
 * test_fusion.c - the conv -> pool fusion (issue 21, docs/design/fusion.md)
 * against the unfused graph, on training plans.
 *
 * Each case builds conv2d -> [bias_add] -> [activation] -> max|avg pool ->
 * [relu] as a Keras layer stack builds it, then the loss sum(out * W) (W a
 * fixed random input), and compiles the training step (SGD, so that the
 * gradients are the plan's gradient block) with the fusion and without it
 * ($SYSTOLIC_CONV_POOL=0), on the cpu backend. Checked:
 *
 *   - the fused plan runs conv2d_pool and conv2d_pool_backprop_filter and
 *     no step writes a value of the conv's full output shape (neither the
 *     conv's output nor its gradient exists);
 *   - the loss and the outputs are the unfused plan's bit for bit (the conv's
 *     values are computed by the same kernels in the same order), the kernel
 *     gradient too (the same products of the same values), the bias gradient
 *     to float rounding (its sum runs in another order). Two exceptions, to
 *     float rounding: a long window's conv (K > 32, im2col and oneDNN's
 *     sgemm, whose AVX2 kernels sum in an order that depends on the block's
 *     rows: the fused blocks are whole pooled rows, the unfused ones not),
 *     and the kernel gradient where convpool.c sums it window by window
 *     (by_windows: a one-channel input, a stride-1 conv of at most 3x3, an
 *     unpadded 2x2/2 max pool);
 *   - on two threads every number is the one-thread plan's, bit for bit;
 *   - under mixed_bfloat16 (every op a bf16 op, the leaves cast), with
 *     2-byte storage and without: the same bits either way, and the unfused
 *     plan's to a bfloat16 rounding of the bias gradient (on sim too);
 *   - on the sim backend (issue 16, the MXU's products), the same checks
 *     where its kernels fuse -- short windows; a long window's training
 *     plan stays unfused there -- and an inference plan fuses any window,
 *     its outputs the unfused plan's bit for bit; and the TPU's view of
 *     the step (tpu_view, for the cost model) is the unfused plan, and
 *     cannot be run;
 *   - a Flatten -> Dense after the pool (cases from DENSE_CASE): the filter
 *     gradient's kernel computes the Dense layer's input gradient dz w^T
 *     itself (dense_dy) and no step writes it; the same checks hold, but
 *     the kernel gradient is the unfused plan's to float rounding (the
 *     product's terms summed in another order); mixed_bfloat16 and
 *     sim keep the Dense product, as its own step;
 *   - what must not fuse does not: an overlapping pool, a conv whose input
 *     gradient is needed, a conv output a caller asked for, an average pool
 *     after an activation;
 *   - the Fashion-MNIST tutorial's CNN, as a user builds it with the Keras
 *     API, trained on real images (the first of the test set) on two
 *     replicas for three steps, fused and not: the same losses and weights
 *     to float rounding, the fused plan's arena a fraction of the unfused
 *     one's, and no reduction run as a step of its own (the Dense bias's
 *     gradient is its kernel gradient's side output, matmul_bias_grad).
 */
#include "check.h"
#include "compiler/compiler_internal.h"
#include "keras/keras_internal.h" /* model_plan_get: the fit's plans */
#include "systolic.h"
#include "tutorial_cnn.h"

#include <stdlib.h>
#include <string.h>

typedef struct conv_case {
    const char *name;
    int64_t n, h, w, c, o, k; /* x (n, h, w, c), a k x k conv to o channels */
    int stride;
    sy_padding padding;
    bool bias;
    int act; /* before the pool: 0 none, SY_ACT_RELU, _SIGMOID, _TANH */
    bool avg;
    int ph, pw, sh, sw; /* the pool */
    sy_padding pool_padding;
    bool post_relu;
    int64_t dense; /* > 0: Flatten -> Dense(dense) after, whose input gradient the filter's kernel computes */
} conv_case;

static const conv_case cases[] = {
    /* the Fashion-MNIST tutorial's layer: the direct conv (K = 9) */
    {"tutorial 3x3x1->64, max 2x2/2, relu after", 4, 28, 28, 1, 64, 3, 1, SY_PADDING_VALID, true, 0,
     false, 2, 2, 2, 2, SY_PADDING_VALID, true, 0},
    {"same conv, relu before, max same with partial windows", 3, 11, 9, 3, 8, 3, 1, SY_PADDING_SAME,
     true, SY_ACT_RELU, false, 2, 2, 2, 2, SY_PADDING_SAME, false, 0},
    {"sigmoid before, max 3x3/3 leaving conv rows uncovered, 5 channels", 2, 13, 14, 2, 5, 2, 1,
     SY_PADDING_VALID, true, SY_ACT_SIGMOID, false, 3, 3, 3, 3, SY_PADDING_VALID, false, 0},
    {"stride-2 conv, tanh before, relu after", 2, 15, 15, 4, 12, 3, 2, SY_PADDING_VALID, true,
     SY_ACT_TANH, false, 2, 2, 2, 2, SY_PADDING_VALID, true, 0},
    {"average 2x2/2, relu after", 2, 10, 10, 3, 16, 3, 1, SY_PADDING_VALID, true, 0, true, 2, 2, 2,
     2, SY_PADDING_VALID, true, 0},
    {"average 3x2/(3,2) same", 2, 9, 8, 2, 8, 3, 1, SY_PADDING_SAME, true, 0, true, 3, 2, 3, 2,
     SY_PADDING_SAME, false, 0},
    {"im2col path (K = 72), 70 channels, relu before", 2, 12, 12, 8, 70, 3, 1, SY_PADDING_VALID,
     true, SY_ACT_RELU, false, 2, 2, 2, 2, SY_PADDING_VALID, false, 0},
    {"windows with gaps, max 2x2/3", 2, 14, 14, 3, 8, 3, 1, SY_PADDING_VALID, true, 0, false, 2, 2,
     3, 3, SY_PADDING_VALID, true, 0},
    {"no bias, relu after", 2, 10, 10, 1, 16, 3, 1, SY_PADDING_VALID, false, 0, false, 2, 2, 2, 2,
     SY_PADDING_VALID, true, 0},
    {"5x5 im2col (K = 75), average", 2, 12, 12, 3, 16, 5, 1, SY_PADDING_SAME, true, 0, true, 2, 2,
     2, 2, SY_PADDING_VALID, false, 0},
    /* conv.c's kernels with the pool in registers (pool_tile, bf_pool_tile): 2x2/2 max pools over direct convs
     * with no padding and 64 channels a tile -- a relu before, a stride-2 conv whose last row and column are in no
     * window; 128 channels, no bias */
    {"in registers: relu before, stride-2 conv, a row outside the windows", 3, 19, 19, 1, 64, 3, 2,
     SY_PADDING_VALID, true, SY_ACT_RELU, false, 2, 2, 2, 2, SY_PADDING_VALID, false, 0},
    {"in registers: 128 channels, no bias, relu after", 2, 12, 12, 1, 128, 3, 1, SY_PADDING_VALID, false, 0, false,
     2, 2, 2, 2, SY_PADDING_VALID, true, 0},
    /* a Dense layer after a Flatten: its input gradient computed in the filter's kernel (dense_dy) */
    {"tutorial, then Flatten -> Dense(10)", 5, 28, 28, 1, 64, 3, 1, SY_PADDING_VALID, true, 0, false, 2, 2, 2, 2,
     SY_PADDING_VALID, true, 10},
    {"sigmoid before, max same, Dense(7)", 3, 9, 11, 2, 24, 3, 1, SY_PADDING_SAME, true, SY_ACT_SIGMOID, false, 2,
     2, 2, 2, SY_PADDING_SAME, false, 7},
    {"im2col path (K = 72), Dense(3)", 2, 12, 12, 8, 70, 3, 1, SY_PADDING_VALID, true, SY_ACT_RELU, false, 2, 2,
     2, 2, SY_PADDING_VALID, false, 3},
    {"average 2x2/2, relu after, Dense(1)", 3, 10, 10, 3, 16, 3, 1, SY_PADDING_VALID, true, 0, true, 2, 2, 2, 2,
     SY_PADDING_VALID, true, 1},
};
enum { DENSE_CASE = 12 }; /* the first of them */

typedef struct built {
    sy_graph *g;
    sy_node x, kernel, bias, out, loss, wts;
    sy_shape conv_shape, flat_shape; /* the conv's full output; the pool's, flattened (a Dense layer's input) */
} built;

static double uniform(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1p-53;
}

/* The case as a layer stack builds it; bf16: as a mixed_bfloat16 layer (leaves cast, every op
 * bf16). */
static built build(const conv_case *cc, bool bf16) {
    built b;
    memset(&b, 0, sizeof b);
    sy_graph_new(&b.g);
    sy_graph *g = b.g;
    b.x = sy_graph_input(g, "x", SY_F32, sy_shape_of(4, cc->n, cc->h, cc->w, cc->c));
    b.kernel = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(4, cc->k, cc->k, cc->c, cc->o),
                              sy_init_glorot_uniform(7));
    b.bias = cc->bias ? sy_graph_param(g, "bias", SY_F32, sy_shape_of(1, cc->o),
                                       sy_init_uniform(-0.3, 0.3, 8))
                      : SY_NONE;
    sy_graph_set_bf16(g, bf16);
    sy_node x = bf16 ? sy_graph_cast_bf16(g, b.x) : b.x,
            k = bf16 ? sy_graph_cast_bf16(g, b.kernel) : b.kernel;
    sy_node t = sy_graph_conv2d(g, x, k, cc->stride, cc->stride, cc->padding);
    b.conv_shape = sy_graph_shape(g, t);
    if (cc->bias) t = sy_graph_bias_add(g, t, bf16 ? sy_graph_cast_bf16(g, b.bias) : b.bias);
    if (cc->act == SY_ACT_RELU) t = sy_graph_relu(g, t);
    if (cc->act == SY_ACT_SIGMOID) t = sy_graph_sigmoid(g, t);
    if (cc->act == SY_ACT_TANH) t = sy_graph_tanh(g, t);
    t = cc->avg ? sy_graph_avg_pool2d(g, t, cc->ph, cc->pw, cc->sh, cc->sw, cc->pool_padding)
                : sy_graph_max_pool2d(g, t, cc->ph, cc->pw, cc->sh, cc->sw, cc->pool_padding);
    if (cc->post_relu) t = sy_graph_relu(g, t);
    if (cc->dense) {
        sy_shape ps = sy_graph_shape(g, t);
        b.flat_shape = sy_shape_of(2, ps.dims[0], ps.dims[1] * ps.dims[2] * ps.dims[3]);
        sy_node wd = sy_graph_param(g, "dense", SY_F32, sy_shape_of(2, b.flat_shape.dims[1], cc->dense),
                                    sy_init_glorot_uniform(9));
        t = sy_graph_matmul(g, sy_graph_reshape(g, t, b.flat_shape), bf16 ? sy_graph_cast_bf16(g, wd) : wd, false,
                            false);
    }
    sy_graph_set_bf16(g, false);
    b.out = bf16 ? graph_add(g, SY_OP_COPY, &t, 1, NULL, NULL) : t; /* read back as float32 */
    b.wts = sy_graph_input(g, "w", SY_F32, sy_graph_shape(g, b.out));
    b.loss = sy_graph_reduce_sum(g, sy_graph_mul(g, b.out, b.wts), NULL, 0, false);
    CHECK(sy_graph_status(g) == SY_OK, "%s: building failed: %s", cc->name, sy_graph_error(g));
    return b;
}

typedef struct result {
    float loss, *out, *dw, *db;
    int64_t n_out, n_dw, n_db;
    bool fused;     /* ran conv2d_pool and its filter gradient */
    bool full_size; /* some step wrote a value of the conv's full output shape */
    bool dense_dy;  /* the filter gradient computed the Dense layer's input gradient */
    bool flat_size; /* some step wrote a value of the Dense layer's input shape (its gradient) */
    int64_t arena;
} result;

static float *copy_floats(const void *src, int64_t n) {
    float *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    if (src)
        memcpy(d, src, (size_t)n * sizeof *d);
    else
        memset(d, 0, (size_t)n * sizeof *d);
    return d;
}

/* One SGD step of the case's training plan on a backend (NULL: the default, cpu); fuse: the conv ->
 * pool fusion on. */
static result train_on(const char *backend, const conv_case *cc, bool bf16, bool fuse, bool storage,
                       sy_pool *pool) {
    result r;
    memset(&r, 0, sizeof r);
    built b = build(cc, bf16);
    setenv("SYSTOLIC_CONV_POOL", fuse ? "1" : "0", 1);
    setenv("SYSTOLIC_BF16_STORAGE", storage ? "1" : "0", 1);
    sy_plan_options o = sy_plan_options_default();
    o.loss = b.loss;
    o.outputs = &b.out;
    o.n_outputs = 1;
    o.optimizer = sy_optimizer_sgd(0.0f, 0.0f, false);
    o.pool = pool;
    if (backend) o.backend = backend;
    sy_plan *p = NULL;
    sy_status st = sy_plan_compile(b.g, &o, &p);
    unsetenv("SYSTOLIC_CONV_POOL");
    unsetenv("SYSTOLIC_BF16_STORAGE");
    CHECK(st == SY_OK, "%s: compile failed: %s", cc->name, sy_last_error());
    if (!p) {
        sy_graph_free(b.g);
        return r;
    }
    uint64_t seed = 21;
    float *x = sy_plan_input(p, b.x), *w = sy_plan_input(p, b.wts);
    sy_shape xs = sy_graph_shape(b.g, b.x), os = sy_graph_shape(b.g, b.out);
    for (int64_t i = 0; i < sy_shape_count(&xs); i++) x[i] = (float)(uniform(&seed) * 4 - 2);
    for (int64_t i = 0; i < sy_shape_count(&os); i++) w[i] = (float)(uniform(&seed) * 2 - 1);
    CHECK_OK(sy_plan_run(p));
    r.loss = *(const float *)sy_plan_output(p, b.loss);
    r.n_out = sy_shape_count(&os);
    r.out = copy_floats(sy_plan_output(p, b.out), r.n_out);
    sy_shape ks = sy_graph_shape(b.g, b.kernel);
    r.n_dw = sy_shape_count(&ks);
    r.dw = copy_floats(sy_plan_gradient(p, b.kernel), r.n_dw);
    r.n_db = cc->bias ? cc->o : 0;
    r.db = copy_floats(cc->bias ? sy_plan_gradient(p, b.bias) : NULL, r.n_db);
    bool conv_pool = false, filter = false;
    const sy_graph *pg = plan_graph(p);
    for (int32_t s = 0; s < plan_step_count(p); s++) {
        const sy_node_rec *n = &pg->nodes[plan_step_node(p, s)];
        conv_pool |= n->op == SY_OP_CONV2D_POOL;
        filter |= n->op == SY_OP_CONV2D_POOL_BACKPROP_FILTER;
        r.dense_dy |= n->op == SY_OP_CONV2D_POOL_BACKPROP_FILTER && n->attr.conv.dense_dy;
        r.full_size |= sy_shape_equal(&n->shape, &b.conv_shape);
        r.flat_size |= cc->dense && sy_shape_equal(&n->shape, &b.flat_shape);
    }
    r.fused = conv_pool && filter;
    sy_plan_info info;
    sy_plan_get_info(p, &info);
    r.arena = info.arena_bytes;
    sy_plan_free(p);
    sy_graph_free(b.g);
    return r;
}

static result train(const conv_case *cc, bool bf16, bool fuse, bool storage, sy_pool *pool) {
    return train_on(NULL, cc, bf16, fuse, storage, pool);
}

static void result_free(result *r) {
    free(r->out);
    free(r->dw);
    free(r->db);
}

static int64_t bits_differ(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

/* |a - b| within tol of the largest |b| */
static void check_near(const char *what, const char *name, const float *a, const float *b,
                       int64_t n, double tol) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    CHECK(worst <= tol * (scale + 1e-30), "%s: %s differs by %.3g (of %.3g)", name, what, worst,
          scale);
}

/* The conv's values by im2col and oneDNN's sgemm (conv.c's DIRECT_K) */
static bool im2col(const conv_case *cc) { return cc->k * cc->k * cc->c > 32; }

/* convpool.c's filter gradient window by window (by_windows, where the channels fill its tiles) */
static bool by_windows(const conv_case *cc) {
    return cc->c == 1 && cc->stride == 1 && cc->k <= 3 && cc->padding == SY_PADDING_VALID && !cc->avg &&
           (cc->act == 0 || cc->act == SY_ACT_RELU) && cc->ph == 2 && cc->pw == 2 && cc->sh == 2 && cc->sw == 2 &&
           cc->pool_padding == SY_PADDING_VALID;
}

static void check_case(const conv_case *cc, sy_pool *pool2) {
    int before = check_failures;
    result f = train(cc, false, true, true, NULL), u = train(cc, false, false, true, NULL);
    result f2 = train(cc, false, true, true, pool2);
    CHECK(f.fused && !f.full_size,
          "%s: fused plan: conv2d_pool and its gradient %s, a full-size value %s", cc->name,
          f.fused ? "run" : "do not run", f.full_size ? "written" : "not written");
    CHECK(!u.fused && u.full_size, "%s: $SYSTOLIC_CONV_POOL=0 still fused", cc->name);
    CHECK(f.dense_dy == (cc->dense > 0) && !f.flat_size && u.flat_size == (cc->dense > 0) && !u.dense_dy,
          "%s: the Dense layer's input gradient %s computed in the filter's kernel, %s written", cc->name,
          f.dense_dy ? "is" : "is not", f.flat_size ? "and" : "not");
    /* (at these toy sizes the kernels' workspaces can outweigh the activations; the tutorial's is
     * the realistic case) */
    CHECK(cc != &cases[0] || f.arena * 2 < u.arena,
          "%s: the fused arena %lld is not under half of %lld", cc->name, (long long)f.arena,
          (long long)u.arena);
    if (im2col(cc)) {
        check_near("the loss", cc->name, &f.loss, &u.loss, 1, 1e-5);
        check_near("the outputs", cc->name, f.out, u.out, f.n_out, 1e-5);
    } else {
        CHECK(memcmp(&f.loss, &u.loss, sizeof f.loss) == 0, "%s: loss %.9g fused, %.9g not", cc->name, f.loss,
              u.loss);
        CHECK(bits_differ(f.out, u.out, f.n_out) == 0, "%s: %lld outputs differ from the unfused plan's", cc->name,
              (long long)bits_differ(f.out, u.out, f.n_out));
    }
    /* (dense_dy: the Dense product's U terms summed in order, oneDNN's sgemm in its own) */
    if (cc->dense || im2col(cc) || by_windows(cc))
        check_near("the kernel gradient", cc->name, f.dw, u.dw, f.n_dw, 1e-5);
    else
        CHECK(bits_differ(f.dw, u.dw, f.n_dw) == 0,
              "%s: %lld of %lld kernel gradients differ from the unfused plan's", cc->name,
              (long long)bits_differ(f.dw, u.dw, f.n_dw), (long long)f.n_dw);
    check_near("the bias gradient", cc->name, f.db, u.db, f.n_db, 1e-5);
    CHECK(memcmp(&f.loss, &f2.loss, sizeof f.loss) == 0 && !bits_differ(f.out, f2.out, f.n_out) &&
              !bits_differ(f.dw, f2.dw, f.n_dw) && !bits_differ(f.db, f2.db, f.n_db),
          "%s: two threads differ from one", cc->name);
    result_free(&f);
    result_free(&u);
    result_free(&f2);
    fprintf(stderr, "%-64s %s\n", cc->name, check_failures == before ? "ok" : "FAILED");
}

/* issue 16: the sim backend's fused kernels (sim/mxu.c), the MXU's products, against its unfused plan: the
 * same bits but the bias gradient's, on one thread and two. A long window (K > 32) fuses in inference plans
 * only there: its training plan must stay unfused, and its inference plan fuse and give the same outputs. */
static void check_sim(const conv_case *cc, sy_pool *pool2) {
    int before = check_failures;
    bool trains_fused = (int64_t)cc->k * cc->k * cc->c <= 32;
    result f = train_on("sim", cc, false, true, true, NULL), u = train_on("sim", cc, false, false, true, NULL);
    result f2 = train_on("sim", cc, false, true, true, pool2);
    CHECK(f.fused == trains_fused && f.full_size != trains_fused && !u.fused,
          "%s (sim): the training plan %s fused (%s expected)", cc->name, f.fused ? "is" : "is not",
          trains_fused ? "fused" : "unfused");
    CHECK(memcmp(&f.loss, &u.loss, sizeof f.loss) == 0 && !bits_differ(f.out, u.out, f.n_out),
          "%s (sim): the loss %.9g or %lld outputs differ from the unfused plan's (%.9g)", cc->name, f.loss,
          (long long)bits_differ(f.out, u.out, f.n_out), u.loss);
    CHECK(!bits_differ(f.dw, u.dw, f.n_dw), "%s (sim): %lld of %lld kernel gradients differ from the unfused plan's",
          cc->name, (long long)bits_differ(f.dw, u.dw, f.n_dw), (long long)f.n_dw);
    check_near("the bias gradient (sim)", cc->name, f.db, u.db, f.n_db, 1e-5);
    CHECK(memcmp(&f.loss, &f2.loss, sizeof f.loss) == 0 && !bits_differ(f.out, f2.out, f.n_out) &&
              !bits_differ(f.dw, f2.dw, f.n_dw) && !bits_differ(f.db, f2.db, f.n_db),
          "%s (sim): two threads differ from one", cc->name);
    /* inference: the forward alone, fused for any window */
    built b = build(cc, false);
    for (int fuse = 1; fuse >= 0; fuse--) {
        setenv("SYSTOLIC_CONV_POOL", fuse ? "1" : "0", 1);
        sy_plan_options o = sy_plan_options_default();
        o.backend = "sim";
        o.outputs = &b.out;
        o.n_outputs = 1;
        o.pool = fuse ? pool2 : NULL;
        sy_plan *p = NULL;
        CHECK_OK(sy_plan_compile(b.g, &o, &p));
        unsetenv("SYSTOLIC_CONV_POOL");
        if (!p) break;
        uint64_t seed = 21;
        float *x = sy_plan_input(p, b.x);
        sy_shape xs = sy_graph_shape(b.g, b.x);
        for (int64_t i = 0; i < sy_shape_count(&xs); i++) x[i] = (float)(uniform(&seed) * 4 - 2);
        CHECK_OK(sy_plan_run(p));
        bool conv_pool = false;
        for (int32_t s = 0; s < plan_step_count(p); s++)
            conv_pool |= plan_graph(p)->nodes[plan_step_node(p, s)].op == SY_OP_CONV2D_POOL;
        CHECK(conv_pool == (fuse == 1), "%s (sim): the inference plan %s conv2d_pool", cc->name,
              conv_pool ? "runs" : "does not run");
        if (fuse)
            f2.out = memcpy(realloc(f2.out, (size_t)f.n_out * sizeof(float)), sy_plan_output(p, b.out),
                            (size_t)f.n_out * sizeof(float));
        else
            CHECK(!bits_differ(f2.out, sy_plan_output(p, b.out), f.n_out),
                  "%s (sim): %lld inference outputs differ from the unfused plan's", cc->name,
                  (long long)bits_differ(f2.out, sy_plan_output(p, b.out), f.n_out));
        sy_plan_free(p);
    }
    sy_graph_free(b.g);
    result_free(&f);
    result_free(&u);
    result_free(&f2);
    fprintf(stderr, "%-64s %s\n", cc->name, check_failures == before ? "ok (sim)" : "FAILED (sim)");
}

/* issue 16: the TPU's view of a sim training step (sy_plan_options.tpu_view), which the cost model and the HBM
 * check read: the unfused graph's steps and arena, nothing allocated, and running it refused. */
static void check_tpu_view(sy_pool *pool2) {
    int before = check_failures;
    built b = build(&cases[0], false);
    sy_plan *p[2] = {NULL, NULL};
    for (int view = 0; view < 2; view++) {
        setenv("SYSTOLIC_CONV_POOL", view ? "1" : "0", 1);
        sy_plan_options o = sy_plan_options_default();
        o.backend = "sim";
        o.loss = b.loss;
        o.outputs = &b.out;
        o.n_outputs = 1;
        o.optimizer = sy_optimizer_sgd(0.0f, 0.0f, false);
        o.tpu_view = view;
        o.pool = view ? pool2 : NULL; /* (the view ignores the pool: its workspaces are one thread's) */
        CHECK_OK(sy_plan_compile(b.g, &o, &p[view]));
        unsetenv("SYSTOLIC_CONV_POOL");
    }
    if (p[0] && p[1]) {
        int steps[2] = {plan_step_count(p[0]), plan_step_count(p[1])};
        bool conv_pool = false, same = steps[0] == steps[1];
        for (int32_t s = 0; s < steps[1]; s++) {
            sy_op op = plan_graph(p[1])->nodes[plan_step_node(p[1], s)].op;
            conv_pool |= op == SY_OP_CONV2D_POOL || op == SY_OP_CONV2D_POOL_BACKPROP_FILTER;
            same = same && op == plan_graph(p[0])->nodes[plan_step_node(p[0], s)].op;
        }
        sy_plan_info a, v;
        sy_plan_get_info(p[0], &a);
        sy_plan_get_info(p[1], &v);
        CHECK(!conv_pool && same && a.arena_bytes == v.arena_bytes,
              "tpu_view: %d steps (conv -> pool fused: %s), arena %lld; the unfused plan %d steps, arena %lld", steps[1],
              conv_pool ? "yes" : "no", (long long)v.arena_bytes, steps[0], (long long)a.arena_bytes);
        CHECK(sy_plan_run(p[1]) == SY_ERR_STATE && strstr(sy_last_error(), "tpu_view"),
              "tpu_view: running the cost model's plan was not refused (%s)", sy_last_error());
    }
    sy_plan_free(p[0]);
    sy_plan_free(p[1]);
    sy_graph_free(b.g);
    fprintf(stderr, "%-64s %s\n", "tpu_view: the unfused steps, nothing allocated, not run",
            check_failures == before ? "ok" : "FAILED");
}

/* mixed_bfloat16: 2-byte storage against float32 storage (the same bits), fused against unfused */
static void check_bf16(const char *backend, const conv_case *cc, sy_pool *pool2) {
    int before = check_failures;
    result two = train_on(backend, cc, true, true, true, NULL), four = train_on(backend, cc, true, true, false, NULL);
    result two2 = train_on(backend, cc, true, true, true, pool2), u = train_on(backend, cc, true, false, true, NULL);
    CHECK(two.fused && four.fused, "%s (mixed_bfloat16): not fused", cc->name);
    CHECK(!two.dense_dy, "%s (mixed_bfloat16): the Dense layer's bf16 product folded into the filter's kernel",
          cc->name);
    CHECK(memcmp(&two.loss, &four.loss, sizeof two.loss) == 0 &&
              !bits_differ(two.out, four.out, two.n_out) &&
              !bits_differ(two.dw, four.dw, two.n_dw) && !bits_differ(two.db, four.db, two.n_db),
          "%s (mixed_bfloat16): 2-byte storage differs from float32 storage", cc->name);
    CHECK(memcmp(&two.loss, &two2.loss, sizeof two.loss) == 0 &&
              !bits_differ(two.dw, two2.dw, two.n_dw) && !bits_differ(two.db, two2.db, two.n_db),
          "%s (mixed_bfloat16): two threads differ from one", cc->name);
    CHECK(
        memcmp(&two.loss, &u.loss, sizeof two.loss) == 0 &&
            !bits_differ(two.out, u.out, two.n_out) && !bits_differ(two.dw, u.dw, two.n_dw),
        "%s (mixed_bfloat16): the loss, outputs or kernel gradient differ from the unfused plan's",
        cc->name);
    check_near("the bias gradient (mixed_bfloat16)", cc->name, two.db, u.db, two.n_db, 1.0 / 128);
    result_free(&two);
    result_free(&four);
    result_free(&two2);
    result_free(&u);
    fprintf(stderr, "%-64s %s (mixed_bfloat16%s)\n", cc->name, check_failures == before ? "ok" : "FAILED",
            backend ? ", sim" : "");
}

/* Does the training plan of g's loss run conv2d_pool? */
static bool fuses(sy_graph *g, sy_node loss, const sy_node *outputs, int n_outputs) {
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.outputs = outputs;
    o.n_outputs = n_outputs;
    o.optimizer = sy_optimizer_sgd(0.0f, 0.0f, false);
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &p));
    bool found = false;
    for (int32_t s = 0; p && s < plan_step_count(p); s++)
        found |= plan_graph(p)->nodes[plan_step_node(p, s)].op == SY_OP_CONV2D_POOL;
    sy_plan_free(p);
    return found;
}

static void check_unfusable(void) {
    /* an overlapping pool, a conv output a caller reads, an average pool after a relu */
    for (int which = 0; which < 3; which++) {
        sy_graph *g;
        sy_graph_new(&g);
        sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(4, 2L, 10L, 10L, 1L));
        sy_node k = sy_graph_param(g, "k", SY_F32, sy_shape_of(4, 3L, 3L, 1L, 8L),
                                   sy_init_glorot_uniform(1));
        sy_node c = sy_graph_conv2d(g, x, k, 1, 1, SY_PADDING_VALID);
        sy_node t = which == 2 ? sy_graph_relu(g, c) : c;
        sy_node p = which == 0   ? sy_graph_max_pool2d(g, t, 3, 3, 2, 2, SY_PADDING_VALID)
                    : which == 1 ? sy_graph_max_pool2d(g, t, 2, 2, 2, 2, SY_PADDING_VALID)
                                 : sy_graph_avg_pool2d(g, t, 2, 2, 2, 2, SY_PADDING_VALID);
        sy_node loss = sy_graph_reduce_sum(g, p, NULL, 0, false);
        CHECK(!fuses(g, loss, &c, which == 1 ? 1 : 0), "case %d fused", which);
        sy_graph_free(g);
    }
    /* two conv -> pool blocks: the first fuses, the second's input gradient is needed, so it does
     * not */
    sy_graph *g;
    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(4, 2L, 20L, 20L, 1L));
    sy_node k1 =
        sy_graph_param(g, "k1", SY_F32, sy_shape_of(4, 3L, 3L, 1L, 8L), sy_init_glorot_uniform(1));
    sy_node k2 =
        sy_graph_param(g, "k2", SY_F32, sy_shape_of(4, 5L, 5L, 8L, 8L), sy_init_glorot_uniform(2));
    sy_node h =
        sy_graph_max_pool2d(g, sy_graph_relu(g, sy_graph_conv2d(g, x, k1, 1, 1, SY_PADDING_VALID)),
                            2, 2, 2, 2, SY_PADDING_VALID);
    h = sy_graph_max_pool2d(g, sy_graph_relu(g, sy_graph_conv2d(g, h, k2, 1, 1, SY_PADDING_VALID)),
                            2, 2, 2, 2, SY_PADDING_VALID);
    sy_node loss = sy_graph_reduce_sum(g, h, NULL, 0, false);
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.optimizer = sy_optimizer_sgd(0.0f, 0.0f, false);
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &p));
    int conv_pool = 0, pool_grad = 0;
    for (int32_t s = 0; p && s < plan_step_count(p); s++) {
        sy_op op = plan_graph(p)->nodes[plan_step_node(p, s)].op;
        conv_pool += op == SY_OP_CONV2D_POOL;
        pool_grad += op == SY_OP_MAX_POOL2D_GRAD;
    }
    CHECK(conv_pool == 1 && pool_grad == 1,
          "two blocks: %d fused, %d pool gradients (expected 1 and 1)", conv_pool, pool_grad);
    sy_plan_free(p);
    sy_graph_free(g);
}

/* ---- the tutorial CNN (src/cli/builtin.c, fashion_mnist_cnn), fit fused and not --------- */

enum { TUT_ROWS = 32, TUT_BATCH = 32, TUT_STEPS = 3 };

typedef struct tutorial_run {
    double loss[TUT_STEPS];
    sy_plan_info info;
    bool reduce_step, bias_side; /* a reduce_sum step runs; the Dense bias's gradient is matmul_bias_grad */
    sy_model *m; /* trained; freed with its strategy and cluster by tutorial_free */
    sy_strategy *s;
    sy_cluster *c;
} tutorial_run;

/* The tutorial's CNN (tutorial_cnn.h): TUT_STEPS epochs of one step (a loss each) on two
 * replicas, with $SYSTOLIC_CONV_POOL as `fuse` says. */
static void fit_tutorial(bool fuse, const sy_tensor *x, const sy_tensor *y, tutorial_run *r) {
    memset(r, 0, sizeof *r);
    setenv("SYSTOLIC_CONV_POOL", fuse ? "1" : "0", 1);
    sy_cluster *c = NULL;
    sy_strategy *s = NULL;
    CHECK_OK(sy_cluster_resolve("cpu:2", &c));
    CHECK_OK(sy_strategy_new(c, &s));
    if (s) sy_strategy_scope_enter(s);
    sy_model *m = tutorial_cnn("float32");
    if (s) sy_strategy_scope_exit(s);
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = TUT_BATCH;
    f.epochs = TUT_STEPS;
    f.steps_per_epoch = 1;
    f.shuffle = false;
    f.verbose = 0;
    sy_history *h = NULL;
    if (m) CHECK_OK(sy_model_fit(m, x, y, &f, &h));
    for (int32_t e = 0; h && e < TUT_STEPS && e < sy_history_epochs(h); e++)
        r->loss[e] = sy_logs_get(sy_history_logs(h, e), "loss");
    sy_history_free(h);
    model_plan *mp = NULL;
    if (m) CHECK_OK(model_plan_get(m, MODE_TRAIN, TUT_BATCH / 2, &mp));
    if (mp) sy_plan_get_info(mp->rs->plans[0], &r->info);
    const sy_plan *p = mp ? mp->rs->plans[0] : NULL;
    for (int32_t i = 0; p && i < plan_step_count(p); i++)
        r->reduce_step |= plan_graph(p)->nodes[plan_step_node(p, i)].op == SY_OP_REDUCE_SUM;
    for (int64_t i = 0; p && i < plan_graph(p)->n_nodes; i++)
        r->bias_side |= plan_graph(p)->nodes[i].op == SY_OP_MATMUL_BIAS_GRAD;
    r->m = m, r->s = s, r->c = c;
    unsetenv("SYSTOLIC_CONV_POOL");
}

static void tutorial_free(tutorial_run *r) {
    sy_model_free(r->m);
    sy_strategy_free(r->s);
    sy_cluster_free(r->c);
}

/* A Fashion-MNIST file as uint8 (the test set's: the smaller files, cheap under the sanitizers
 * too), or NULL and a failed check. */
static sy_tensor *fashion_file(const char *file) {
    char path[4096];
    sy_tensor *t = NULL;
    sy_status st = sy_dataset_file("fashion_mnist", file, path, sizeof path);
    if (!st) st = sy_idx_read(path, &t);
    CHECK(st == SY_OK, "Fashion-MNIST's %s: %s", file, sy_last_error());
    return t;
}

static void check_tutorial(void) {
    sy_tensor *px = fashion_file("t10k-images-idx3-ubyte.gz"),
              *py = fashion_file("t10k-labels-idx1-ubyte.gz");
    sy_tensor *x = NULL, *y = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(4, TUT_ROWS, 28, 28, 1), &x));
    CHECK_OK(sy_tensor_new(SY_I32, sy_shape_of(1, TUT_ROWS), &y));
    if (x && y && px && py && sy_tensor_count(px) >= sy_tensor_count(x) &&
        sy_tensor_count(py) >= TUT_ROWS) { /* the tutorial's raw 0-255 pixels */
        const uint8_t *pxs = sy_tensor_data(px), *pys = sy_tensor_data(py);
        float *xs = sy_tensor_data(x);
        int32_t *ys = sy_tensor_data(y);
        for (int64_t i = 0; i < sy_tensor_count(x); i++) xs[i] = pxs[i];
        for (int64_t i = 0; i < TUT_ROWS; i++) ys[i] = pys[i];
        tutorial_run f, u;
        fit_tutorial(true, x, y, &f);
        fit_tutorial(false, x, y, &u);
        fprintf(stderr,
                "tutorial CNN, %d steps of %d on 2 replicas: losses fused %.7g .. %.7g, unfused "
                "%.7g .. %.7g; arena %lld bytes fused, %lld unfused\n",
                TUT_STEPS, TUT_BATCH, f.loss[0], f.loss[TUT_STEPS - 1], u.loss[0],
                u.loss[TUT_STEPS - 1], (long long)f.info.arena_bytes,
                (long long)u.info.arena_bytes);
        CHECK(f.info.fused > u.info.fused,
              "tutorial CNN: fusion folded %d ops with conv -> pool fusion, %d without",
              f.info.fused, u.info.fused);
        /* both biases' gradients ride on their products' kernels: no reduction runs on its own */
        CHECK(f.bias_side && !f.reduce_step, "tutorial CNN: the Dense bias's gradient %s matmul_bias_grad, %s",
              f.bias_side ? "is" : "is not", f.reduce_step ? "a reduce_sum step runs" : "no reduce_sum step");
        /* the conv's 26x26x64 output and its gradient are gone from the arena */
        CHECK(f.info.arena_bytes * 4 < u.info.arena_bytes,
              "tutorial CNN: the fused arena %lld is not under a quarter of %lld",
              (long long)f.info.arena_bytes, (long long)u.info.arena_bytes);
        for (int e = 0; e < TUT_STEPS; e++)
            CHECK(isfinite(f.loss[e]) && fabs(f.loss[e] - u.loss[e]) <= 1e-5 * fabs(u.loss[e]),
                  "tutorial CNN: step %d's loss %.9g fused, %.9g unfused", e + 1, f.loss[e],
                  u.loss[e]);
        int32_t n = f.m && u.m ? sy_model_weight_count(f.m) : 0;
        CHECK(n == 4 && sy_model_weight_count(u.m) == n, "tutorial CNN: %d weights", n);
        for (int32_t i = 0; i < n; i++) { /* each kernel and bias after training */
            sy_shape ws = sy_model_weight_shape(f.m, i);
            check_near(sy_model_weight_name(f.m, i), "tutorial CNN", sy_model_weight_data(f.m, i),
                       sy_model_weight_data(u.m, i), sy_shape_count(&ws), 1e-5);
        }
        tutorial_free(&f);
        tutorial_free(&u);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(px);
    sy_tensor_free(py);
}

int main(void) {
    sy_pool *pool2;
    CHECK_OK(sy_pool_new(2, &pool2));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], pool2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_sim(&cases[i], pool2);
    check_tpu_view(pool2);
    check_bf16(NULL, &cases[0], pool2);
    check_bf16(NULL, &cases[1], pool2);
    check_bf16(NULL, &cases[4], pool2);
    check_bf16(NULL, &cases[6], pool2);
    check_bf16(NULL, &cases[DENSE_CASE], pool2); /* (mixed_bfloat16 keeps the Dense product: not folded) */
    check_bf16("sim", &cases[0], pool2);
    check_bf16("sim", &cases[1], pool2);
    check_bf16("sim", &cases[4], pool2);
    check_unfusable();
    check_tutorial();
    sy_pool_free(pool2);
    return check_report("test_fusion");
}
