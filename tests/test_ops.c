/*
 * test_ops.c - the op harness: one table, a row (or more) per op.
 *
 * For every row:
 *   forward   the row's graph is compiled for every backend (cpu with one
 *             thread and with two, fused and unfused) and its output compared
 *             with the ref backend's;
 *   gradient  for differentiable rows, the graph is rebuilt in float64, the
 *             loss sum(out * W) (W random) is differentiated by the compiler
 *             on the ref backend and every parameter's gradient is compared
 *             with central finite differences of the same loss.
 * Rows for gradient ops (conv2d_backprop_input, ...) check their forward on
 * every backend; their math is checked through their primal op's gradient.
 * The optimizer updates and the fused elementwise op have their own checks.
 * An op of ops.def without a row fails the harness.
 */
#include "check.h"
#include "compiler/compiler_internal.h" /* issue 21: the plan's steps */
#include "op_harness.h"

#include <stdlib.h>
#include <string.h>

static sy_node build(const row *r, ctx *c, sy_dtype dt, uint64_t seed) {
    sy_node out = op_build(r, c, dt, seed, false);
    CHECK(sy_graph_status(c->g) == SY_OK, "%s: building failed: %s", r->name, sy_graph_error(c->g));
    return out;
}

/* Output of the row's graph (float32) on a backend; NULL on failure. */
static double *forward(const row *r, const char *backend, sy_pool *pool, bool fuse, int64_t *count, int32_t *fused) {
    ctx c;
    sy_node out = build(r, &c, SY_F32, 1234);
    double *res = NULL;
    sy_plan_options o = sy_plan_options_default();
    o.backend = backend;
    o.outputs = &out;
    o.n_outputs = 1;
    o.pool = pool;
    o.fuse = fuse;
    sy_plan *p;
    sy_status st = sy_plan_compile(c.g, &o, &p);
    CHECK(st == SY_OK, "%s on %s: compile failed: %s", r->name, backend, sy_last_error());
    if (st == SY_OK) {
        op_feed(&c, p);
        st = sy_plan_run(p);
        CHECK(st == SY_OK, "%s on %s: run failed: %s", r->name, backend, sy_last_error());
        sy_shape s = sy_graph_shape(c.g, out);
        *count = sy_shape_count(&s);
        const void *y = sy_plan_output(p, out);
        res = malloc((size_t)*count * sizeof *res);
        for (int64_t i = 0; i < *count; i++) res[i] = op_read_val(y, sy_graph_dtype(c.g, out), i);
        sy_plan_info info;
        sy_plan_get_info(p, &info);
        if (fused) *fused = info.fused;
        sy_plan_free(p);
    }
    op_free_ctx(&c);
    return res;
}

/* Output of the row on a backend (forward), or (issue 21) its gradients (fused_grads), in float32;
 * *info: what fusion folded, or whether the plan runs the row's op. */
typedef double *(*run_fn)(const row *r, const char *backend, sy_pool *pool, bool fuse,
                          int64_t *count, int32_t *info);
static double *fused_grads(const row *r, const char *backend, sy_pool *pool, bool fuse,
                           int64_t *count, int32_t *has_op);

/* The row on every backend, fused and not, against the ref backend's unfused graph. */
static void check_variants(const row *r, sy_pool *pool2, bool training) {
    run_fn run = training ? fused_grads : forward;
    int64_t n_ref, n;
    int32_t info = 0;
    double *ref = run(r, "ref", NULL, false, &n_ref, &info);
    if (!ref) return;
    double scale = 0;
    for (int64_t i = 0; i < n_ref; i++) scale = fmax(scale, fabs(ref[i]));
    struct {
        const char *backend;
        sy_pool *pool;
        bool fuse;
    } variants[] = {{"ref", NULL, true}, {"cpu", NULL, false}, {"cpu", NULL, true}, {"cpu", pool2, true}};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        info = 0;
        double *y = run(r, variants[v].backend, variants[v].pool, variants[v].fuse, &n, &info);
        if (!y) continue;
        int bad = 0;
        CHECK(n == n_ref, "%s: %lld values on %s, %lld on ref", r->name, (long long)n,
              variants[v].backend, (long long)n_ref);
        for (int64_t i = 0; i < n && i < n_ref && bad < 3; i++) {
            double tol = 2e-5 * (1 + scale) + 2e-5 * fabs(ref[i]);
            if (!(fabs(y[i] - ref[i]) <= tol)) {
                bad++;
                CHECK(false, "%s: %s (%d thread%s, fusion %s) %s[%lld] = %.8g but ref gives %.8g",
                      r->name, variants[v].backend, sy_pool_size(variants[v].pool),
                      variants[v].pool ? "s" : "", variants[v].fuse ? "on" : "off",
                      training ? "gradient " : "", (long long)i, y[i], ref[i]);
            }
        }
        if (!training && (r->checks & CHECK_FUSED) && variants[v].fuse)
            CHECK(info >= 5, "%s: fusion folded %d ops; expected the whole chain", r->name, info);
        if (training && variants[v].fuse)
            CHECK(info, "%s: the fused training plan on %s does not run %s", r->name,
                  variants[v].backend, sy_op_name(r->op));
        free(y);
    }
    free(ref);
}

/* Gradient of sum(out * W) w.r.t. every variable leaf, float64, ref backend,
 * against central differences. */
static void check_gradient(const row *r) {
    ctx c;
    sy_node out = build(r, &c, SY_F64, 99);
    if (sy_graph_status(c.g)) {
        op_free_ctx(&c);
        return;
    }
    sy_shape os = sy_graph_shape(c.g, out);
    sy_node w = op_cin(&c, os, -1, 1);
    sy_node loss = sy_graph_reduce_sum(c.g, sy_graph_mul(c.g, out, w), NULL, 0, false);
    sy_plan_options o = sy_plan_options_default();
    o.backend = "ref";
    o.loss = loss;
    sy_plan *train = NULL, *eval = NULL;
    sy_status st = sy_plan_compile(c.g, &o, &train);
    CHECK(st == SY_OK, "%s: compiling the gradient failed: %s", r->name, sy_last_error());
    if (st) goto done;
    sy_plan_options oe = sy_plan_options_default();
    oe.backend = "ref";
    oe.outputs = &loss;
    oe.n_outputs = 1;
    oe.vars = sy_plan_vars(train);
    CHECK_OK(sy_plan_compile(c.g, &oe, &eval));
    if (!eval) goto done;
    op_feed(&c, train);
    op_feed(&c, eval);
    CHECK_OK(sy_plan_run(train));
    sy_vars *v = sy_plan_vars(train);
    for (int i = 0; i < c.n_leaves; i++) {
        leaf *l = &c.leaves[i];
        if (l->kind != LEAF_VAR) continue;
        const double *grad = sy_plan_gradient(train, l->node);
        CHECK(grad != NULL, "%s: no gradient for %s", r->name, sy_graph_name(c.g, l->node));
        if (!grad) continue;
        double *x = sy_vars_data(v, sy_vars_find(v, sy_graph_name(c.g, l->node)));
        int64_t n = sy_shape_count(&l->shape);
        int64_t stride = n > 40 ? n / 40 : 1; /* a spread sample of at most ~40 elements */
        int bad = 0;
        for (int64_t k = 0; k < n && bad < 3; k += stride) {
            double x0 = x[k], h = 1e-6 * fmax(1.0, fabs(x0));
            x[k] = x0 + h;
            sy_plan_run(eval);
            double lp = *(const double *)sy_plan_output(eval, loss);
            x[k] = x0 - h;
            sy_plan_run(eval);
            double lm = *(const double *)sy_plan_output(eval, loss);
            x[k] = x0;
            double num = (lp - lm) / (2 * h);
            if (fabs(num - grad[k]) > 1e-6 + 1e-5 * fabs(num)) {
                bad++;
                CHECK(false, "%s: d loss / d %s[%lld]: autodiff %.10g, finite differences %.10g", r->name,
                      sy_graph_name(c.g, l->node), (long long)k, grad[k], num);
            }
        }
    }
done:
    sy_plan_free(eval);
    sy_plan_free(train);
    op_free_ctx(&c);
}

/* ---- issue 21: rows the compiler fuses, trained ---------------------------------------- */

/* The gradients of sum(out * W) w.r.t. the row's variables (concatenated, float32) from the
 * training plan on `backend`, with the conv -> pool fusion or not; *has_op: the plan runs the row's
 * op (as a step or a side output). */
static double *fused_grads(const row *r, const char *backend, sy_pool *pool, bool fuse,
                           int64_t *count, int32_t *has_op) {
    ctx c;
    sy_node out = build(r, &c, SY_F32, 77);
    sy_node w = op_cin(&c, sy_graph_shape(c.g, out), -1, 1);
    sy_node loss = sy_graph_reduce_sum(c.g, sy_graph_mul(c.g, out, w), NULL, 0, false);
    sy_plan_options o = sy_plan_options_default();
    o.backend = backend;
    o.loss = loss;
    o.pool = pool;
    setenv("SYSTOLIC_CONV_POOL", fuse ? "1" : "0", 1);
    sy_plan *p = NULL;
    sy_status st = sy_plan_compile(c.g, &o, &p);
    unsetenv("SYSTOLIC_CONV_POOL");
    CHECK(st == SY_OK, "%s on %s: compiling the gradient failed: %s", r->name, backend,
          sy_last_error());
    double *g = NULL;
    *count = 0;
    *has_op = 0;
    if (p) {
        op_feed(&c, p);
        CHECK_OK(sy_plan_run(p));
        for (int32_t s = 0; s < plan_step_count(p); s++) {
            sy_node side = plan_step_side(p, s);
            *has_op |= plan_graph(p)->nodes[plan_step_node(p, s)].op == r->op ||
                       (side != SY_NONE && plan_graph(p)->nodes[side].op == r->op);
        }
        for (int i = 0; i < c.n_leaves; i++) {
            leaf *l = &c.leaves[i];
            if (l->kind != LEAF_VAR) continue;
            const float *d = sy_plan_gradient(p, l->node);
            int64_t n = sy_shape_count(&l->shape);
            g = realloc(g, (size_t)(*count + n) * sizeof *g);
            for (int64_t k = 0; k < n; k++) g[*count + k] = d ? d[k] : NAN;
            *count += n;
        }
        sy_plan_free(p);
    }
    op_free_ctx(&c);
    return g;
}

/* ---- optimizer updates ----------------------------------------------------------- */

/* Independent transcription of tf.keras 2.15's rules (docs/design/keras-semantics.md),
 * in double, for one parameter with a constant gradient g over `steps` steps. */
static void keras_update(const sy_optimizer *o, double *w, const double *g, int64_t n, int steps) {
    double *m = calloc((size_t)n, sizeof *m), *v = calloc((size_t)n, sizeof *v), *mg = calloc((size_t)n, sizeof *mg);
    double *vhat = calloc((size_t)n, sizeof *vhat);
    for (int t = 1; t <= steps; t++) {
        for (int64_t i = 0; i < n; i++) {
            double lr = o->learning_rate;
            if (o->kind == SY_OPTIMIZER_SGD) {
                if (o->momentum > 0) {
                    m[i] = -g[i] * lr + m[i] * o->momentum;
                    w[i] += o->nesterov ? -g[i] * lr + m[i] * o->momentum : m[i];
                } else {
                    w[i] -= lr * g[i];
                }
            } else if (o->kind == SY_OPTIMIZER_ADAM) {
                double alpha = lr * sqrt(1 - pow(o->beta_2, t)) / (1 - pow(o->beta_1, t));
                m[i] += (g[i] - m[i]) * (1 - o->beta_1);
                v[i] += (g[i] * g[i] - v[i]) * (1 - o->beta_2);
                vhat[i] = fmax(vhat[i], v[i]);
                w[i] -= m[i] * alpha / (sqrt(o->amsgrad ? vhat[i] : v[i]) + o->epsilon);
            } else {
                v[i] = o->rho * v[i] + (1 - o->rho) * g[i] * g[i];
                double denom = v[i];
                if (o->centered) {
                    mg[i] = o->rho * mg[i] + (1 - o->rho) * g[i];
                    denom -= mg[i] * mg[i];
                }
                double inc = lr * g[i] / sqrt(denom + o->epsilon);
                if (o->momentum > 0) {
                    m[i] = o->momentum * m[i] + inc;
                    w[i] -= m[i];
                } else {
                    w[i] -= inc;
                }
            }
        }
    }
    free(m);
    free(v);
    free(mg);
    free(vhat);
}

static void check_optimizer(const char *name, sy_optimizer opt, bool *covered) {
    const int steps = 5;
    const int64_t n = 37;
    for (int b = 0; b < 2; b++) {
        const char *backend = b ? "cpu" : "ref";
        sy_graph *g;
        sy_graph_new(&g);
        sy_node w = sy_graph_param(g, "w", SY_F32, R(1, n), sy_init_uniform(-1, 1, 5));
        sy_node gin = sy_graph_input(g, "g", SY_F32, R(1, n));
        /* loss = sum(w * g): its gradient is g */
        sy_node loss = sy_graph_reduce_sum(g, sy_graph_mul(g, w, gin), NULL, 0, false);
        sy_plan_options o = sy_plan_options_default();
        o.backend = backend;
        o.loss = loss;
        o.optimizer = opt;
        sy_plan *p;
        sy_status st = sy_plan_compile(g, &o, &p);
        CHECK(st == SY_OK, "%s: %s", name, sy_last_error());
        if (st) {
            sy_graph_free(g);
            continue;
        }
        sy_vars *v = sy_plan_vars(p);
        float *wd = sy_vars_data(v, sy_vars_find(v, "w"));
        double w0[37], gd[37];
        for (int64_t i = 0; i < n; i++) {
            w0[i] = wd[i];
            gd[i] = 0.3 * sin((double)i) + (i % 3 == 0 ? 1e-3 : 0.5);
        }
        for (int s = 0; s < steps; s++) {
            float *gi = sy_plan_input(p, gin);
            for (int64_t i = 0; i < n; i++) gi[i] = (float)gd[i];
            CHECK_OK(sy_plan_run(p));
        }
        CHECK(sy_vars_iterations(v) == steps, "%s: iterations %lld after %d steps", name, (long long)sy_vars_iterations(v), steps);
        keras_update(&opt, w0, gd, n, steps);
        for (int64_t i = 0; i < n; i++)
            CHECK_CLOSE(wd[i], w0[i], 1e-5, 1e-6, "%s on %s: w[%lld] after %d steps", name, backend, (long long)i, steps);
        sy_plan_free(p);
        sy_graph_free(g);
    }
    covered[opt.kind == SY_OPTIMIZER_SGD ? SY_OP_SGD_UPDATE : opt.kind == SY_OPTIMIZER_ADAM ? SY_OP_ADAM_UPDATE : SY_OP_RMSPROP_UPDATE] = true;
}

static void check_optimizers(bool *covered) {
    check_optimizer("SGD", sy_optimizer_sgd(0.1f, 0, false), covered);
    check_optimizer("SGD momentum", sy_optimizer_sgd(0.05f, 0.9f, false), covered);
    check_optimizer("SGD nesterov", sy_optimizer_sgd(0.05f, 0.9f, true), covered);
    check_optimizer("Adam", sy_optimizer_adam(0.01f), covered);
    sy_optimizer ams = sy_optimizer_adam(0.01f);
    ams.amsgrad = true;
    check_optimizer("Adam amsgrad", ams, covered);
    sy_optimizer rms = sy_optimizer_rmsprop(0.01f);
    check_optimizer("RMSprop", rms, covered);
    rms.momentum = 0.5f;
    rms.centered = true;
    check_optimizer("RMSprop momentum centered", rms, covered);
}

/* issue 17, optimizers: the update ops of the other optimizers, whose one
 * kernel serves ref and cpu: its float64 instance against its float32 one
 * over five steps of a varying gradient on a (3, 5) weight and a (5,) one
 * (Adafactor's factored and whole second moments), with weight decay and
 * global clipping in the prologue. test_optimizers checks the float32
 * results against tf.keras's own. */
static void run_update_dtype(sy_optimizer opt, sy_dtype dt, double *out /* 20 */) {
    sy_graph *g;
    sy_graph_new(&g);
    sy_node w = sy_graph_param(g, "w", dt, R(2, 3L, 5L), sy_init_uniform(-1, 1, 5));
    sy_node b = sy_graph_param(g, "b", dt, R(1, 5L), sy_init_uniform(-1, 1, 6));
    sy_node gin = sy_graph_input(g, "g", dt, R(2, 3L, 5L));
    /* loss = sum(w * g) + sum(b * g[0]) through a mean: gradients g and g's column means, times 3 */
    int32_t axis0 = 0;
    sy_node loss = sy_graph_add(g, sy_graph_reduce_sum(g, sy_graph_mul(g, w, gin), NULL, 0, false),
                                sy_graph_reduce_sum(g, sy_graph_mul(g, b, sy_graph_reduce_sum(g, gin, &axis0, 1, false)), NULL, 0, false));
    sy_plan_options o = sy_plan_options_default();
    o.backend = "ref";
    o.loss = loss;
    o.optimizer = opt;
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &p));
    for (int s = 0; p && s < 5; s++) {
        void *gi = sy_plan_input(p, gin);
        for (int64_t i = 0; i < 15; i++) {
            double v = 0.3 * sin((double)(i + 7 * s)) + (i % 4 == 0 ? 1e-3 : 0.2);
            if (dt == SY_F64) ((double *)gi)[i] = (float)v;
            else ((float *)gi)[i] = (float)v;
        }
        CHECK_OK(sy_plan_run(p));
    }
    sy_vars *v = p ? sy_plan_vars(p) : NULL;
    for (int k = 0; v && k < 2; k++) {
        const void *d = sy_vars_data(v, sy_vars_find(v, k ? "b" : "w"));
        for (int64_t i = 0; i < (k ? 5 : 15); i++)
            out[k * 15 + i] = dt == SY_F64 ? ((const double *)d)[i] : ((const float *)d)[i];
    }
    sy_plan_free(p);
    sy_graph_free(g);
}

static void check_more_optimizers(bool *covered) {
    static const struct {
        sy_optimizer_kind kind;
        sy_op op;
    } opt_rows[] = {{SY_OPTIMIZER_ADADELTA, SY_OP_ADADELTA_UPDATE}, {SY_OPTIMIZER_ADAGRAD, SY_OP_ADAGRAD_UPDATE},
                {SY_OPTIMIZER_ADAMAX, SY_OP_ADAMAX_UPDATE},     {SY_OPTIMIZER_ADAFACTOR, SY_OP_ADAFACTOR_UPDATE},
                {SY_OPTIMIZER_NADAM, SY_OP_NADAM_UPDATE},       {SY_OPTIMIZER_FTRL, SY_OP_FTRL_UPDATE},
                {SY_OPTIMIZER_LION, SY_OP_LION_UPDATE}};
    for (size_t r = 0; r < sizeof opt_rows / sizeof opt_rows[0]; r++) {
        sy_optimizer opt = sy_optimizer_keras(opt_rows[r].kind);
        opt.learning_rate = 0.05f;
        opt.weight_decay = 0.01;
        opt.global_clipnorm = 2;
        double a[20] = {0}, b[20] = {0};
        run_update_dtype(opt, SY_F32, a);
        run_update_dtype(opt, SY_F64, b);
        for (int i = 0; i < 20; i++)
            CHECK_CLOSE(a[i], b[i], 1e-5, 1e-6, "%s: float32 against float64, weight %d after 5 steps",
                        sy_optimizer_class_name(opt_rows[r].kind), i);
        covered[opt_rows[r].op] = true;
    }
}

/* The moving-average state update (normalization layers): a non-trainable
 * p (5) moves towards the column means v of an input x (4, 5), planned like
 * a gradient (v readable as p's "gradient"), on every backend, three runs. */
static void check_moving_average(bool *covered) {
    static const char *const backends[] = {"ref", "cpu"};
    for (int b = 0; b < 2; b++) {
        sy_graph *g;
        CHECK_OK(sy_graph_new(&g));
        sy_node p = sy_graph_param(g, "p", SY_F32, R(1, 5L), sy_init_zeros());
        sy_graph_set_trainable(g, p, false);
        sy_node x = sy_graph_input(g, "x", SY_F32, R(2, 4L, 5L));
        int32_t axis0 = 0;
        sy_node v = sy_graph_reduce_mean(g, x, &axis0, 1, false);
        sy_graph_moving_average(g, p, v, 0.9);
        sy_node y = sy_graph_mul(g, x, p);
        sy_plan_options o = sy_plan_options_default();
        o.backend = backends[b];
        o.outputs = &y;
        o.n_outputs = 1;
        sy_plan *plan = NULL;
        CHECK_OK(sy_plan_compile(g, &o, &plan));
        if (plan) {
            sy_vars *vs = sy_plan_vars(plan);
            float *pd = sy_vars_data(vs, sy_vars_find(vs, "p")), want[5];
            for (int i = 0; i < 5; i++) pd[i] = want[i] = 1.0f + 0.25f * (float)i;
            for (int run = 0; run < 3; run++) {
                float *xd = sy_plan_input(plan, x), mean[5] = {0};
                for (int i = 0; i < 20; i++) xd[i] = (float)sin(1.0 + i * (run + 1)) * 2;
                for (int i = 0; i < 20; i++) mean[i % 5] += xd[i] / 4;
                CHECK_OK(sy_plan_run(plan));
                const float *got_v = sy_plan_gradient(plan, p);
                CHECK(got_v != NULL, "moving_average on %s: the value is not in the gradient block", backends[b]);
                for (int i = 0; i < 5; i++) {
                    if (got_v) CHECK_CLOSE(got_v[i], mean[i], 1e-6, 1e-6, "moving_average on %s: value[%d]", backends[b], i);
                    want[i] -= (want[i] - mean[i]) * (1.0f - 0.9f);
                    CHECK_CLOSE(pd[i], want[i], 1e-6, 1e-6, "moving_average on %s: p[%d] after run %d", backends[b], i, run);
                }
            }
            CHECK(sy_vars_iterations(vs) == 0, "moving_average on %s: a state update is not an optimizer step", backends[b]);
        }
        sy_plan_free(plan);
        /* a trainable parameter is refused */
        sy_graph_set_trainable(g, p, true);
        sy_status st = sy_plan_compile(g, &o, &plan);
        CHECK(st != SY_OK && strstr(sy_last_error(), "trainable"), "moving_average of a trainable parameter: %s",
              sy_last_error());
        if (st == SY_OK) sy_plan_free(plan);
        sy_graph_free(g);
    }
    covered[SY_OP_MOVING_AVERAGE] = true;
}

/* An LSTM scan built for inference keeps only h: differentiating it is
 * refused by name when the gradient is built, not at run time. */
static void check_inference_scan_has_no_gradient(void) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.dt = SY_F32;
    c.seed = 7;
    CHECK_OK(sy_graph_new(&c.g));
    sy_node h = op_inference_scan(&c);
    sy_node loss = sy_graph_reduce_sum(c.g, h, NULL, 0, false);
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    sy_plan *p = NULL;
    sy_status st = sy_plan_compile(c.g, &o, &p);
    CHECK(st == SY_ERR_UNSUPPORTED && strstr(sy_last_error(), "lstm_scan") && strstr(sy_last_error(), "inference"),
          "gradient of an inference scan: %s (%s)", sy_status_name(st), sy_last_error());
    sy_plan_free(p);
    op_free_ctx(&c);
}

/* A NaN in gives NaN out, as in TensorFlow, through every kernel built on
 * the fast exp (exp, sigmoid, tanh, softmax, the recurrent cells' gates):
 * a model whose weights went NaN must show a NaN loss, not a plausible
 * number. (The eight-lane exp once clamped NaN to exp(-87.3); the scalar
 * one reached a signed shift of a negative value, which UBSan reports.) */
static void check_nan_propagates(sy_pool *pool2) {
    /* rows without a mask, so that every output depends on the NaN */
    static const char *const names[] = {"exp",
                                        "sigmoid",
                                        "tanh",
                                        "softmax 37 classes",
                                        "log_softmax",
                                        "matmul + bias + sigmoid",
                                        "matmul + bias + tanh",
                                        "lstm_scan h every step",
                                        "lstm_scan inference",
                                        "gru_scan h every step"};
    op_poison_first_leaf = true;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const row *r = NULL;
        for (int i = 0; i < op_n_rows && !r; i++)
            if (!strcmp(op_rows[i].name, names[k])) r = &op_rows[i];
        CHECK(r != NULL, "check_nan_propagates: no row '%s'", names[k]);
        if (!r) continue;
        for (int v = 0; v < 3; v++) {
            int64_t n = 0;
            double *y = forward(r, "cpu", v == 2 ? pool2 : NULL, v > 0, &n, NULL);
            if (!y) continue;
            int64_t finite = 0;
            for (int64_t i = 0; i < n; i++) finite += !isnan(y[i]);
            CHECK(finite == 0, "%s on cpu (variant %d) with NaN input: %lld of %lld outputs are not NaN", r->name, v,
                  (long long)finite, (long long)n);
            free(y);
        }
    }
    op_poison_first_leaf = false;
}

/* ---- issue 16, MXU numerics ------------------------------------------------------
 * The sim backend's MXU ops equal their scalar reference (backend "sim-ref") bit for bit, on one thread and
 * two, fused or not; and that reference is the float32 result to bfloat16's precision. */
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_mxu(const row *r, sy_pool *pool2) {
    if (!sy_sim_ref_kernel(r->op, SY_F32)) return;
    int64_t n_want, n_ref, n;
    double *want = forward(r, "sim-ref", NULL, false, &n_want, NULL), *ref = forward(r, "ref", NULL, false, &n_ref, NULL);
    if (!want || !ref) goto done;
    double scale = 0;
    for (int64_t i = 0; i < n_ref; i++) scale = fmax(scale, fabs(ref[i]));
    int bad = 0;
    double tol = r->checks & MXU_GROWS ? 5e-2 : 1e-2;
    for (int64_t i = 0; i < n_want && bad < 3; i++)
        if (!(fabs(want[i] - ref[i]) <= tol * (1 + scale))) {
            bad++;
            CHECK(false, "%s: sim-ref [%lld] = %.8g, float32 ref %.8g: beyond bfloat16's precision", r->name, (long long)i,
                  want[i], ref[i]);
        }
    for (int v = 0; v < 3; v++) {
        sy_pool *pool = v == 2 ? pool2 : NULL;
        double *y = forward(r, "sim", pool, v > 0, &n, NULL);
        if (!y) continue;
        bad = 0;
        CHECK(n == n_want, "%s: sim gives %lld values, sim-ref %lld", r->name, (long long)n, (long long)n_want);
        for (int64_t i = 0; i < n && i < n_want && bad < 3; i++) {
            float a = (float)y[i], b = (float)want[i];
            if (f32_bits(a) != f32_bits(b) && !(isnan(a) && isnan(b))) {
                bad++;
                CHECK(false, "%s: sim (%d thread%s, fusion %s) [%lld] = %.9g (0x%08x) but sim-ref gives %.9g (0x%08x)",
                      r->name, sy_pool_size(pool), pool ? "s" : "", v > 0 ? "on" : "off", (long long)i, a, f32_bits(a), b,
                      f32_bits(b));
            }
        }
        free(y);
    }
done:
    free(want);
    free(ref);
}

/* bfloat16 rounding: to nearest, ties to even; infinities, NaN, overflow and subnormals */
static void check_bf16_rounding(void) {
    static const uint32_t cases[][2] = {
        {0x3F800000u, 0x3F800000u}, /* 1 */
        {0x3F808000u, 0x3F800000u}, /* 1 + 2^-8: a tie, to the even 1 */
        {0x3F818000u, 0x3F820000u}, /* 1 + 3 2^-8: a tie, to the even 1 + 2^-6 */
        {0x3F808001u, 0x3F810000u}, /* just past the tie: up */
        {0x3F807FFFu, 0x3F800000u}, /* just short of it: down */
        {0xBF808000u, 0xBF800000u}, /* negative tie */
        {0xBF818000u, 0xBF820000u},
        {0x80000000u, 0x80000000u}, /* -0 */
        {0x7F800000u, 0x7F800000u}, /* inf */
        {0xFF800000u, 0xFF800000u}, /* -inf */
        {0x7F7FFFFFu, 0x7F800000u}, /* FLT_MAX overflows to inf */
        {0x7F7F8000u, 0x7F800000u}, /* a tie at the top, to the even: inf */
        {0x7F7F7FFFu, 0x7F7F0000u}, /* the largest bfloat16 */
        {0x00008000u, 0x00000000u}, /* subnormal tie, to the even 0 */
        {0x00018000u, 0x00020000u}, /* subnormal tie, to the even 2 */
        {0x00000001u, 0x00000000u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = f32_bits(sy_bf16_round(f32_of(cases[i][0])));
        CHECK(got == cases[i][1], "bf16(0x%08x) = 0x%08x, want 0x%08x", cases[i][0], got, cases[i][1]);
    }
    /* a NaN stays a NaN, signalling ones too (their payload may sit in the bits rounding drops) */
    static const uint32_t nans[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float got = sy_bf16_round(f32_of(nans[i]));
        CHECK(isnan(got) && (f32_bits(got) & 0xFFFFu) == 0 && (f32_bits(got) >> 31) == nans[i] >> 31,
              "bf16(0x%08x) = 0x%08x: a NaN with its sign, in bfloat16's bits", nans[i], f32_bits(got));
    }
    /* an independent rule over random patterns: the nearer of the two bfloat16 neighbours, the even one on a tie */
    sy_rng rng = sy_rng_new(16, 2);
    for (int i = 0; i < 100000; i++) {
        uint32_t u = (uint32_t)(sy_rng_uniform64(&rng) * 4294967296.0);
        float x = f32_of(u);
        if (!isfinite(x)) continue;
        uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u, rest = u & 0xFFFFu;
        uint32_t want = rest < 0x8000u ? lo : rest > 0x8000u ? hi : (lo & 0x10000u) ? hi : lo;
        uint32_t got = f32_bits(sy_bf16_round(x));
        if (got != want) {
            CHECK(false, "bf16(0x%08x) = 0x%08x, want 0x%08x", u, got, want);
            break;
        }
    }
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    check_inference_scan_has_no_gradient();
    bool covered[SY_OP_COUNT] = {false};
    sy_pool *pool2;
    CHECK_OK(sy_pool_new(2, &pool2));
    for (int i = 0; i < op_n_rows; i++) {
        const row *r = &op_rows[i];
        covered[r->op] = true;
        if (only && !strstr(r->name, only)) continue;
        int before = check_failures;
        if (r->checks & FWD) check_variants(r, pool2, false);
        if (r->checks & GRAD) check_gradient(r);
        if (r->checks & FUSED_TRAIN) check_variants(r, pool2, true); /* issue 21 */
        if (r->checks & FWD) check_mxu(r, pool2); /* issue 16, MXU numerics */
        fprintf(stderr, "%-40s %s\n", r->name, check_failures == before ? "ok" : "FAILED");
    }
    check_bf16_rounding(); /* issue 16, MXU numerics */
    check_optimizers(covered);
    check_more_optimizers(covered); /* issue 17, optimizers */
    check_moving_average(covered);
    int quant_checks = 0;
    check_failures += check_quant_ops(covered, &quant_checks); /* issue 18 (op_rows_quant.c): its own counts */
    check_count += quant_checks;
    if (!only) check_nan_propagates(pool2);
    for (int op = 0; op < SY_OP_COUNT; op++)
        CHECK(covered[op], "op '%s' has no row in the op harness", sy_op_name((sy_op)op));
    sy_pool_free(pool2);
    return check_report("test_ops");
}
