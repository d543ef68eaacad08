/*
 * test_golden.c - systolic against tf.keras 2.15 on the same weights and
 * inputs: every layer's output and gradients, a stacked model, every loss
 * (with the softmax/sigmoid logits shortcut), every metric, every optimizer,
 * and five training steps of the Fashion-MNIST tutorial model.
 *
 * The fixtures are .npz files written by tools/golden/make_fixtures.py,
 * which runs tf.keras; they are committed, so this test needs no Python.
 * tests/golden/README.md documents every array. The directory comes from
 * the build (SY_GOLDEN_DIR).
 */
#include "check.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef SY_GOLDEN_DIR
#error "SY_GOLDEN_DIR must name tests/golden"
#endif

/* ---- fixtures ----------------------------------------------------------------------- */

static sy_npz *open_fixture(const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_GOLDEN_DIR, file);
    sy_npz *z = NULL;
    sy_status st = sy_npz_open(path, &z);
    CHECK(st == SY_OK, "opening %s: %s", path, sy_last_error());
    return z;
}

/* Array `name` (NULL and a failed check if missing). */
static sy_tensor *get(const sy_npz *z, const char *name) {
    sy_tensor *t = NULL;
    sy_status st = z ? sy_npz_get(z, name, &t) : SY_ERR_NOT_FOUND;
    CHECK(st == SY_OK, "fixture array '%s': %s", name, sy_last_error());
    return t;
}

/* Array "<prefix>_<suffix>". */
static sy_tensor *getp(const sy_npz *z, const char *prefix, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s_%s", prefix, suffix);
    return get(z, key);
}

static bool has(const sy_npz *z, const char *name) {
    for (int32_t i = 0; z && i < sy_npz_count(z); i++)
        if (strcmp(sy_npz_name(z, i), name) == 0) return true;
    return false;
}

/* got (count floats) against the fixture's array: |a - b| <= atol + rtol |b|,
 * with atol scaled by the array's largest magnitude. */
static void compare(const char *what, const float *got, const sy_tensor *want, double rtol, double atol) {
    if (!got || !want) {
        CHECK(false, "%s: nothing to compare", what);
        return;
    }
    int64_t n = sy_tensor_count(want);
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(sy_tensor_get(want, i)));
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; i++) {
        double b = sy_tensor_get(want, i), a = got[i];
        if (!(fabs(a - b) <= atol * fmax(scale, 1e-30) + rtol * fabs(b))) {
            bad++;
            CHECK(false, "%s[%lld]: systolic %.9g, tf.keras %.9g", what, (long long)i, a, b);
        }
    }
    check_count++;
}

/* A float32 copy of a fixture array. */
static float *as_f32(const sy_tensor *t) {
    int64_t n = sy_tensor_count(t);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)sy_tensor_get(t, i);
    return f;
}

static sy_node find_param(const sy_graph *g, const char *name) {
    for (int32_t i = 0; i < sy_graph_node_count(g); i++)
        if (!strcmp(sy_graph_op_name(g, i), "param") && !strcmp(sy_graph_name(g, i), name)) return i;
    return SY_NONE;
}

static void set_var(sy_vars *v, const char *name, const sy_tensor *t) {
    int32_t k = sy_vars_find(v, name);
    CHECK(k >= 0, "variable %s", name);
    if (k < 0 || !t) return;
    sy_shape vs = sy_vars_shape(v, k), ts = sy_tensor_shape(t);
    CHECK(sy_shape_count(&vs) == sy_shape_count(&ts), "variable %s: %lld values, fixture %lld", name,
          (long long)sy_shape_count(&vs), (long long)sy_shape_count(&ts));
    float *f = as_f32(t);
    memcpy(sy_vars_data(v, k), f, (size_t)sy_shape_count(&vs) * sizeof(float));
    free(f);
}

/* A plan computing the gradients of sum(y * r), y the model's output over x
 * (a parameter "x" in the model's store, set to the fixture's values); NULL
 * after a failed check. The caller frees the plan and *g. */
static sy_plan *grad_plan(sy_model *m, const sy_tensor *x, const sy_tensor *r, sy_graph **g, sy_node *xp) {
    sy_graph_new(g);
    *xp = sy_graph_param(*g, "x", SY_F32, sy_tensor_shape(x), sy_init_zeros());
    sy_node yn = keras_build_layers(m, *g, *xp, false);
    sy_node rn = sy_graph_input(*g, "r", SY_F32, sy_tensor_shape(r));
    sy_node loss = sy_graph_reduce_sum(*g, sy_graph_mul(*g, yn, rn), NULL, 0, false);
    CHECK(sy_graph_status(*g) == SY_OK, "gradient graph: %s", sy_graph_error(*g));
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.vars = m->vars;
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(*g, &o, &p));
    if (!p) return NULL;
    set_var(m->vars, "x", x);
    float *rv = as_f32(r);
    memcpy(sy_plan_input(p, rn), rv, (size_t)sy_tensor_count(r) * sizeof(float));
    free(rv);
    CHECK_OK(sy_plan_run(p));
    return p;
}

/* ---- layers --------------------------------------------------------------------------- */

typedef struct layer_case {
    const char *name;
    sy_layer cfg;
} layer_case;

static sy_layer with_act(sy_layer l, sy_activation a) {
    l.activation = a;
    return l;
}
static sy_layer no_bias(sy_layer l) {
    l.use_bias = false;
    return l;
}
static sy_layer conv_opts(sy_layer l, int sh, int sw, sy_padding p) {
    l.strides[0] = sh;
    l.strides[1] = sw;
    l.padding = p;
    return l;
}

/* The model of one layer over x: forward through the public API, gradients
 * of sum(y * r) through a plan over the layer's graph. */
static void check_layer(const layer_case *c) {
    char file[128], what[160];
    snprintf(file, sizeof file, "layer_%s.npz", c->name);
    sy_npz *z = open_fixture(file);
    if (!z) return;
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *r = get(z, "r"), *dx = get(z, "dx");
    if (!x || !y || !r || !dx) goto done;
    sy_shape xs = sy_tensor_shape(x), in;
    in.rank = xs.rank - 1;
    for (int i = 0; i < in.rank; i++) in.dims[i] = xs.dims[i + 1];
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer cfg = c->cfg;
    cfg.name = "layer";
    cfg.input_shape = in;
    sy_status st = sy_model_add(m, &cfg);
    CHECK(st == SY_OK, "%s: %s", c->name, sy_last_error());
    if (st) {
        sy_model_free(m);
        goto done;
    }
    static const char *const weights[] = {"kernel", "bias"};
    for (int w = 0; w < 2; w++) {
        char key[32], var[64];
        snprintf(key, sizeof key, "w_%s", weights[w]);
        snprintf(var, sizeof var, "layer/%s", weights[w]);
        CHECK(has(z, key) == (sy_vars_find(m->vars, var) >= 0), "%s: weight %s present in one only", c->name, weights[w]);
        if (has(z, key)) {
            sy_tensor *t = get(z, key);
            set_var(m->vars, var, t);
            sy_tensor_free(t);
        }
    }
    /* forward, public API */
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_tensor *out = NULL;
    CHECK_OK(sy_model_predict(m, x, &eo, &out));
    snprintf(what, sizeof what, "%s: y", c->name);
    if (out) compare(what, sy_tensor_data(out), y, 2e-5, 2e-6);
    sy_tensor_free(out);
    /* gradients of sum(y * r) w.r.t. x and the weights */
    sy_graph *g;
    sy_node xp;
    sy_plan *p = grad_plan(m, x, r, &g, &xp);
    if (p) {
        snprintf(what, sizeof what, "%s: dx", c->name);
        compare(what, sy_plan_gradient(p, xp), dx, 2e-5, 2e-6);
        for (int w = 0; w < 2; w++) {
            char key[32], var[64];
            snprintf(key, sizeof key, "dw_%s", weights[w]);
            snprintf(var, sizeof var, "layer/%s", weights[w]);
            if (!has(z, key)) continue;
            sy_tensor *t = get(z, key);
            snprintf(what, sizeof what, "%s: d%s", c->name, weights[w]);
            compare(what, sy_plan_gradient(p, find_param(g, var)), t, 2e-5, 2e-6);
            sy_tensor_free(t);
        }
    }
    sy_plan_free(p);
    sy_graph_free(g);
    sy_model_free(m);
done:
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(r);
    sy_tensor_free(dx);
    sy_npz_close(z);
}

static void test_layers(void) {
    sy_padding V = SY_PADDING_VALID, S = SY_PADDING_SAME;
    sy_layer pool3 = sy_layer_max_pooling2d(3, 3), avg3 = sy_layer_average_pooling2d(3, 3);
    pool3.strides[0] = pool3.strides[1] = avg3.strides[0] = avg3.strides[1] = 2;
    pool3.padding = avg3.padding = S;
    const layer_case cases[] = {
        {"dense_linear", sy_layer_dense(5)},
        {"dense_relu", with_act(sy_layer_dense(6), SY_ACTIVATION_RELU)},
        {"dense_nobias_sigmoid", with_act(no_bias(sy_layer_dense(4)), SY_ACTIVATION_SIGMOID)},
        {"dense_softmax", with_act(sy_layer_dense(5), SY_ACTIVATION_SOFTMAX)},
        {"dense_tanh_rank3", with_act(sy_layer_dense(3), SY_ACTIVATION_TANH)},
        {"conv2d_valid", sy_layer_conv2d(4, 3, 3)},
        {"conv2d_same_s2", conv_opts(sy_layer_conv2d(5, 3, 2), 2, 2, S)},
        {"conv2d_relu_1ch", with_act(sy_layer_conv2d(8, 3, 3), SY_ACTIVATION_RELU)},
        {"conv2d_nobias", no_bias(sy_layer_conv2d(3, 2, 2))},
        {"conv2d_s12_tanh", with_act(conv_opts(sy_layer_conv2d(4, 3, 3), 1, 2, S), SY_ACTIVATION_TANH)},
        {"max_pooling2d", sy_layer_max_pooling2d(2, 2)},
        {"max_pooling2d_same", pool3},
        {"max_pooling2d_ties", sy_layer_max_pooling2d(2, 2)},
        {"average_pooling2d", sy_layer_average_pooling2d(2, 2)},
        {"average_pooling2d_same", avg3},
        {"activation_relu", sy_layer_activation(SY_ACTIVATION_RELU)},
        {"activation_sigmoid", sy_layer_activation(SY_ACTIVATION_SIGMOID)},
        {"activation_tanh", sy_layer_activation(SY_ACTIVATION_TANH)},
        {"activation_linear", sy_layer_activation(SY_ACTIVATION_LINEAR)},
        {"activation_softmax", sy_layer_activation(SY_ACTIVATION_SOFTMAX)},
        {"flatten", sy_layer_flatten()},
        {"reshape", sy_layer_reshape(sy_shape_of(2, (int64_t)6, (int64_t)4))},
        {"dropout_inference", sy_layer_dropout(0.5f)},
    };
    (void)V;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int before = check_failures;
        check_layer(&cases[i]);
        fprintf(stderr, "layer %-28s %s\n", cases[i].name, check_failures == before ? "ok" : "FAILED");
    }
}

/* ---- a stacked model --------------------------------------------------------------- */

static void test_small_cnn(void) {
    sy_npz *z = open_fixture("model_small_cnn.npz");
    if (!z) return;
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer l[4] = {sy_layer_conv2d(4, 3, 3), sy_layer_max_pooling2d(2, 2), sy_layer_flatten(), sy_layer_dense(3)};
    l[0].activation = SY_ACTIVATION_RELU;
    l[0].input_shape = sy_shape_of(3, (int64_t)8, (int64_t)8, (int64_t)1);
    l[3].activation = SY_ACTIVATION_SOFTMAX;
    for (int i = 0; i < 4; i++) CHECK_OK(sy_model_add(m, &l[i]));
    static const char *const w[4] = {"conv2d_kernel", "conv2d_bias", "dense_kernel", "dense_bias"};
    static const char *const var[4] = {"conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"};
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "w_%s", w[i]);
        sy_tensor *t = get(z, key);
        set_var(m->vars, var[i], t);
        sy_tensor_free(t);
    }
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *r = get(z, "r"), *dx = get(z, "dx"), *out = NULL;
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    CHECK_OK(sy_model_predict(m, x, &eo, &out));
    if (out) compare("small_cnn: y", sy_tensor_data(out), y, 2e-5, 1e-6);
    sy_graph *g;
    sy_node xp;
    sy_plan *p = grad_plan(m, x, r, &g, &xp);
    if (p) {
        compare("small_cnn: dx", sy_plan_gradient(p, xp), dx, 1e-4, 1e-6);
        for (int i = 0; i < 4; i++) {
            char key[64], what[96];
            snprintf(key, sizeof key, "dw_%s", w[i]);
            snprintf(what, sizeof what, "small_cnn: d%s", var[i]);
            sy_tensor *t = get(z, key);
            compare(what, sy_plan_gradient(p, find_param(g, var[i])), t, 1e-4, 1e-6);
            sy_tensor_free(t);
        }
    }
    sy_plan_free(p);
    sy_graph_free(g);
    sy_tensor_free(out);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(r);
    sy_tensor_free(dx);
    sy_model_free(m);
    sy_npz_close(z);
    fprintf(stderr, "model small_cnn done\n");
}

/* ---- losses ----------------------------------------------------------------------------- */

typedef enum { SCCE, CCE, BCE, MSE } loss_kind;

typedef struct loss_case {
    const char *name;
    loss_kind kind;
    bool from_logits;
    int shortcut; /* 0: none; 1: softmax(z) feeds the loss; 2: sigmoid(z) */
} loss_case;

static sy_node make_loss(sy_graph *g, loss_kind k, sy_node pred, sy_node truth, bool logits) {
    switch (k) {
    case SCCE: return sy_graph_sparse_categorical_crossentropy(g, pred, truth, logits);
    case CCE: return sy_graph_categorical_crossentropy(g, pred, truth, logits);
    case BCE: return sy_graph_binary_crossentropy(g, pred, truth, logits);
    default: return sy_graph_mean_squared_error(g, pred, truth);
    }
}

static void check_loss(const sy_npz *z, const loss_case *c) {
    char key[96], what[128];
    sy_tensor *pred = getp(z, c->name, c->shortcut ? "z" : "y_pred");
    sy_tensor *truth = getp(z, c->name, "y_true");
    sy_tensor *want_loss = getp(z, c->name, "loss");
    sy_tensor *want_grad = getp(z, c->name, "grad");
    snprintf(key, sizeof key, "%s_per_example", c->name);
    sy_tensor *want_per = has(z, key) ? get(z, key) : NULL;
    if (!pred || !truth || !want_loss || !want_grad) goto done;
    sy_shape ps = sy_tensor_shape(pred), ts = sy_tensor_shape(truth);
    if (c->kind == SCCE) ts = sy_shape_of(1, ps.dims[0]); /* (N, 1) labels are (N,) labels */
    sy_graph *g;
    sy_graph_new(&g);
    sy_node p = sy_graph_param(g, "pred", SY_F32, ps, sy_init_zeros());
    sy_node t = sy_graph_input(g, "truth", c->kind == SCCE ? SY_I32 : SY_F32, ts);
    sy_node in = c->shortcut == 1 ? sy_graph_softmax(g, p, -1) : c->shortcut == 2 ? sy_graph_sigmoid(g, p) : p;
    sy_node per = make_loss(g, c->kind, in, t, c->from_logits);
    sy_node loss = sy_graph_reduce_mean(g, per, NULL, 0, false);
    CHECK(sy_graph_status(g) == SY_OK, "%s: %s", c->name, sy_graph_error(g));
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.outputs = &per;
    o.n_outputs = 1;
    sy_plan *plan = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &plan));
    if (plan) {
        set_var(sy_plan_vars(plan), "pred", pred);
        void *tin = sy_plan_input(plan, t);
        for (int64_t i = 0; i < sy_tensor_count(truth); i++) {
            if (c->kind == SCCE) ((int32_t *)tin)[i] = (int32_t)sy_tensor_get(truth, i);
            else ((float *)tin)[i] = (float)sy_tensor_get(truth, i);
        }
        CHECK_OK(sy_plan_run(plan));
        snprintf(what, sizeof what, "%s: loss", c->name);
        compare(what, sy_plan_output(plan, loss), want_loss, 1e-5, 0);
        if (want_per && sy_tensor_count(want_per) == sy_shape_count(&(sy_shape){1, {ps.dims[0]}})) {
            snprintf(what, sizeof what, "%s: per-example loss", c->name);
            compare(what, sy_plan_output(plan, per), want_per, 1e-5, 1e-7);
        }
        snprintf(what, sizeof what, "%s: gradient", c->name);
        compare(what, sy_plan_gradient(plan, p), want_grad, 1e-4, 1e-6);
    }
    sy_plan_free(plan);
    sy_graph_free(g);
done:
    sy_tensor_free(pred);
    sy_tensor_free(truth);
    sy_tensor_free(want_loss);
    sy_tensor_free(want_grad);
    sy_tensor_free(want_per);
}

static void test_losses(void) {
    sy_npz *z = open_fixture("losses.npz");
    if (!z) return;
    const loss_case cases[] = {
        {"scce_probs", SCCE, false, 0},
        {"scce_probs_labels_2d", SCCE, false, 0},
        {"scce_logits", SCCE, true, 0},
        {"cce_probs", CCE, false, 0},
        {"cce_probs_unnormalized", CCE, false, 0},
        {"cce_soft_targets", CCE, false, 0},
        {"cce_logits", CCE, true, 0},
        {"bce_probs", BCE, false, 0},
        {"bce_soft_targets", BCE, false, 0},
        {"bce_saturated", BCE, false, 0},
        {"bce_logits", BCE, true, 0},
        {"mse", MSE, false, 0},
        {"softmax_shortcut", SCCE, false, 1},
        {"sigmoid_shortcut", BCE, false, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int before = check_failures;
        check_loss(z, &cases[i]);
        fprintf(stderr, "loss %-30s %s\n", cases[i].name, check_failures == before ? "ok" : "FAILED");
    }
    sy_npz_close(z);
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void check_metric(const sy_npz *z, const char *name, keras_metric kind) {
    sy_tensor *truth = getp(z, name, "y_true");
    sy_tensor *pred = getp(z, name, "y_pred");
    sy_tensor *value = getp(z, name, "value");
    if (truth && pred && value) {
        sy_shape ps = sy_tensor_shape(pred);
        int64_t per_row = ps.dims[ps.rank - 1], rows = sy_tensor_count(pred) / per_row;
        float *p = as_f32(pred);
        void *labels;
        if (kind == KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY) {
            int32_t *l = malloc((size_t)rows * sizeof *l);
            for (int64_t i = 0; i < rows; i++) l[i] = (int32_t)sy_tensor_get(truth, i);
            labels = l;
        } else {
            labels = as_f32(truth);
        }
        double sum = 0;
        metric_accumulate(kind, p, labels, rows, per_row, &sum);
        CHECK_CLOSE(sum / (double)rows, sy_tensor_get(value, 0), 1e-6, 1e-7, "metric %s", name);
        free(p);
        free(labels);
    }
    sy_tensor_free(truth);
    sy_tensor_free(pred);
    sy_tensor_free(value);
}

/* 'accuracy' resolved by compile() and reported by evaluate() under that name. */
static void check_accuracy_resolution(const sy_npz *z, const char *name, const char *loss) {
    sy_tensor *truth = getp(z, name, "y_true");
    sy_tensor *pred = getp(z, name, "y_pred");
    sy_tensor *value = getp(z, name, "value");
    if (truth && pred && value) {
        sy_model *m;
        CHECK_OK(sy_model_new(NULL, &m));
        sy_shape ps = sy_tensor_shape(pred);
        sy_layer a = sy_layer_activation(SY_ACTIVATION_LINEAR);
        a.input_shape = sy_shape_of(1, ps.dims[1]);
        CHECK_OK(sy_model_add(m, &a));
        sy_compile_options c = sy_compile_options_default();
        c.loss = loss;
        const char *metrics[] = {"accuracy"};
        c.metrics = metrics;
        c.n_metrics = 1;
        CHECK_OK(sy_model_compile(m, &c));
        sy_evaluate_options eo = sy_evaluate_options_default();
        eo.verbose = 0;
        eo.batch_size = 8;
        sy_logs l;
        CHECK_OK(sy_model_evaluate(m, pred, truth, &eo, &l));
        CHECK_CLOSE(sy_logs_get(&l, "accuracy"), sy_tensor_get(value, 0), 1e-6, 1e-7, "%s: evaluate's 'accuracy'", name);
        sy_model_free(m);
    }
    sy_tensor_free(truth);
    sy_tensor_free(pred);
    sy_tensor_free(value);
}

static void test_metrics(void) {
    sy_npz *z = open_fixture("metrics.npz");
    if (!z) return;
    check_metric(z, "sparse_categorical_accuracy", KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY);
    check_metric(z, "sparse_categorical_accuracy_labels_2d", KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY);
    check_metric(z, "categorical_accuracy", KERAS_METRIC_CATEGORICAL_ACCURACY);
    check_metric(z, "binary_accuracy", KERAS_METRIC_BINARY_ACCURACY);
    check_accuracy_resolution(z, "accuracy_with_scce", "sparse_categorical_crossentropy");
    check_accuracy_resolution(z, "accuracy_with_cce", "categorical_crossentropy");
    check_accuracy_resolution(z, "accuracy_with_bce", "binary_crossentropy");
    check_accuracy_resolution(z, "accuracy_with_bce_multilabel", "binary_crossentropy");
    sy_npz_close(z);
    fprintf(stderr, "metrics done\n");
}

/* ---- optimizers ---------------------------------------------------------------------------- */

static void check_optimizer(const sy_npz *z, const char *name, sy_optimizer opt) {
    sy_tensor *w0 = getp(z, name, "w0");
    sy_tensor *grads = getp(z, name, "grads");
    sy_tensor *want = getp(z, name, "w");
    if (w0 && grads && want) {
        int64_t n = sy_tensor_count(w0);
        sy_graph *g;
        sy_graph_new(&g);
        sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(1, n), sy_init_zeros());
        sy_node gin = sy_graph_input(g, "g", SY_F32, sy_shape_of(1, n));
        sy_node loss = sy_graph_reduce_sum(g, sy_graph_mul(g, w, gin), NULL, 0, false); /* d/dw = g */
        sy_plan_options o = sy_plan_options_default();
        o.loss = loss;
        o.optimizer = opt;
        sy_plan *p = NULL;
        CHECK_OK(sy_plan_compile(g, &o, &p));
        if (p) {
            sy_vars *v = sy_plan_vars(p);
            set_var(v, "w", w0);
            float *gv = as_f32(grads), *wv = as_f32(want);
            for (int s = 0; s < 5; s++) {
                memcpy(sy_plan_input(p, gin), gv + s * n, (size_t)n * sizeof(float));
                CHECK_OK(sy_plan_run(p));
                /* bit for bit here (float32 constants and rounding as Keras's);
                 * an ulp of slack for another libm's powf */
                const float *cur = sy_vars_data(v, sy_vars_find(v, "w"));
                for (int64_t i = 0; i < n; i++)
                    CHECK_CLOSE(cur[i], wv[s * n + i], 2e-7, 0, "%s: w[%lld] after step %d", name, (long long)i, s + 1);
            }
            free(gv);
            free(wv);
        }
        sy_plan_free(p);
        sy_graph_free(g);
    }
    sy_tensor_free(w0);
    sy_tensor_free(grads);
    sy_tensor_free(want);
}

static void test_optimizers(void) {
    sy_npz *z = open_fixture("optimizers.npz");
    if (!z) return;
    sy_optimizer rms = sy_optimizer_rmsprop(0.01f);
    sy_optimizer rmc = rms;
    rmc.momentum = 0.5f;
    rmc.centered = true;
    check_optimizer(z, "sgd", sy_optimizer_sgd(0.1f, 0, false));
    check_optimizer(z, "sgd_momentum", sy_optimizer_sgd(0.05f, 0.9f, false));
    check_optimizer(z, "sgd_nesterov", sy_optimizer_sgd(0.05f, 0.9f, true));
    check_optimizer(z, "adam", sy_optimizer_adam(0.01f));
    check_optimizer(z, "adam_default", sy_optimizer_adam(0.001f));
    sy_optimizer ams = sy_optimizer_adam(0.01f);
    ams.amsgrad = true;
    check_optimizer(z, "adam_amsgrad", ams);
    check_optimizer(z, "rmsprop", rms);
    check_optimizer(z, "rmsprop_momentum_centered", rmc);
    sy_npz_close(z);
    fprintf(stderr, "optimizers done\n");
}

/* ---- the tutorial model: five training steps -------------------------------------------------- */

typedef struct step_log {
    double mean_loss[8], mean_acc[8];
    int n;
} step_log;

static sy_status record_step(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m;
    step_log *l = ctx;
    if (step < 8) {
        l->mean_loss[step] = sy_logs_get(logs, "loss");
        l->mean_acc[step] = sy_logs_get(logs, "sparse_categorical_accuracy");
        l->n = (int)step + 1;
    }
    return SY_OK;
}

static void test_fashion_mnist_trajectory(void) {
    sy_npz *z = open_fixture("fashion_mnist_cnn.npz");
    if (!z) return;
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer l[6] = {sy_layer_conv2d(64, 3, 3), sy_layer_max_pooling2d(2, 2), sy_layer_activation(SY_ACTIVATION_RELU),
                     sy_layer_flatten(), sy_layer_dense(10), sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
    l[0].input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
    for (int i = 0; i < 6; i++) CHECK_OK(sy_model_add(m, &l[i]));
    static const char *const w[4] = {"conv2d_kernel", "conv2d_bias", "dense_kernel", "dense_bias"};
    static const char *const var[4] = {"conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"};
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof key, "w0_%s", w[i]);
        sy_tensor *t = get(z, key);
        set_var(m->vars, var[i], t);
        sy_tensor_free(t);
    }
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_adam(1e-3f);
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"sparse_categorical_accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    CHECK_OK(sy_model_compile(m, &c));
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *loss = get(z, "loss"), *acc = get(z, "acc");
    sy_tensor *pred = get(z, "pred"), *eval_loss = get(z, "eval_loss"), *eval_acc = get(z, "eval_acc");
    sy_tensor *eval0_loss = get(z, "eval0_loss");
    if (x && y && loss && acc && pred && eval_loss && eval_acc && eval0_loss) {
        sy_evaluate_options eo = sy_evaluate_options_default();
        eo.verbose = 0;
        eo.batch_size = 160;
        sy_logs r;
        CHECK_OK(sy_model_evaluate(m, x, y, &eo, &r));
        CHECK_CLOSE(sy_logs_get(&r, "loss"), sy_tensor_get(eval0_loss, 0), 1e-5, 0, "evaluate before training");
        /* steps on batches of 32 in order: the logs' running means give each step's value */
        step_log log = {{0}, {0}, 0};
        sy_callback cb = {&log, NULL, NULL, record_step, NULL, NULL};
        sy_fit_options f = sy_fit_options_default();
        f.batch_size = 32;
        f.steps_per_epoch = 5;
        f.shuffle = false;
        f.verbose = 0;
        f.callbacks = &cb;
        f.n_callbacks = 1;
        CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
        CHECK(log.n == 5, "five steps logged: %d", log.n);
        for (int s = 0; s < log.n; s++) {
            double step_loss = (s + 1) * log.mean_loss[s] - s * (s ? log.mean_loss[s - 1] : 0);
            double step_acc = (s + 1) * log.mean_acc[s] - s * (s ? log.mean_acc[s - 1] : 0);
            CHECK_CLOSE(step_loss, sy_tensor_get(loss, s), 2e-4, 0, "step %d loss", s);
            CHECK_CLOSE(step_acc, sy_tensor_get(acc, s), 0, 1e-6, "step %d accuracy", s);
        }
        for (int i = 0; i < 4; i++) {
            char key[64], what[96];
            snprintf(key, sizeof key, "w5_%s", w[i]);
            snprintf(what, sizeof what, "weights after 5 steps: %s", var[i]);
            sy_tensor *t = get(z, key);
            /* Adam normalises every step to about lr, so round-off in a
             * near-zero gradient moves a weight by up to ~1e-5 */
            compare(what, sy_model_weight_data(m, sy_model_find_weight(m, var[i])), t, 0, 3e-4);
            sy_tensor_free(t);
        }
        sy_tensor *p = NULL;
        sy_tensor_reshape(x, sy_shape_of(4, (int64_t)160, (int64_t)28, (int64_t)28, (int64_t)1));
        eo.batch_size = 32;
        CHECK_OK(sy_model_predict(m, x, &eo, &p));
        /* The logits are in the hundreds (raw pixels), so the weights' Adam
         * round-off above moves a logit by ~1e-3 and an unsaturated
         * probability by up to p(1-p) times that. */
        if (p) compare("predictions after 5 steps", sy_tensor_data(p), pred, 0, 2e-3);
        sy_tensor_free(p);
        eo.batch_size = 160;
        CHECK_OK(sy_model_evaluate(m, x, y, &eo, &r));
        CHECK_CLOSE(sy_logs_get(&r, "loss"), sy_tensor_get(eval_loss, 0), 1e-4, 0, "evaluate after 5 steps: loss");
        CHECK_CLOSE(sy_logs_get(&r, "sparse_categorical_accuracy"), sy_tensor_get(eval_acc, 0), 0, 1e-6,
                    "evaluate after 5 steps: accuracy");
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(loss);
    sy_tensor_free(acc);
    sy_tensor_free(pred);
    sy_tensor_free(eval_loss);
    sy_tensor_free(eval_acc);
    sy_tensor_free(eval0_loss);
    sy_model_free(m);
    sy_npz_close(z);
    fprintf(stderr, "fashion_mnist_cnn trajectory done\n");
}

int main(void) {
    test_layers();
    test_small_cnn();
    test_losses();
    test_metrics();
    test_optimizers();
    test_fashion_mnist_trajectory();
    return check_report("test_golden");
}
