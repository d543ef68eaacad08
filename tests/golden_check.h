/*
 * golden_check.h - what the golden tests share (test_golden.c,
 * test_sequence.c): opening a tests/golden fixture, comparing arrays to a
 * tolerance relative to their largest magnitude, setting a model's weights
 * by their Keras names, and checking a layer or model fixture's output
 * (predict) and the gradients of sum(y * r) wrt the input and every weight
 * (tests/golden/README.md). Include after check.h, keras_internal.h and
 * systolic.h, with SY_GOLDEN_DIR defined.
 */
#ifndef SY_TEST_GOLDEN_CHECK_H
#define SY_TEST_GOLDEN_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixtures ----------------------------------------------------------------------- */

static inline sy_npz *open_fixture(const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_GOLDEN_DIR, file);
    sy_npz *z = NULL;
    sy_status st = sy_npz_open(path, &z);
    CHECK(st == SY_OK, "opening %s: %s", path, sy_last_error());
    return z;
}

/* Array `name` (NULL and a failed check if missing). */
static inline sy_tensor *get(const sy_npz *z, const char *name) {
    sy_tensor *t = NULL;
    sy_status st = z ? sy_npz_get(z, name, &t) : SY_ERR_NOT_FOUND;
    CHECK(st == SY_OK, "fixture array '%s': %s", name, sy_last_error());
    return t;
}

/* Array "<prefix>_<suffix>". */
static inline sy_tensor *getp(const sy_npz *z, const char *prefix, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s_%s", prefix, suffix);
    return get(z, key);
}

static inline bool has(const sy_npz *z, const char *name) {
    for (int32_t i = 0; z && i < sy_npz_count(z); i++)
        if (strcmp(sy_npz_name(z, i), name) == 0) return true;
    return false;
}

/* How many arrays are named "<prefix>_...". */
static inline int32_t count_prefixed(const sy_npz *z, const char *prefix) {
    size_t n = strlen(prefix);
    int32_t count = 0;
    for (int32_t i = 0; z && i < sy_npz_count(z); i++)
        count += strncmp(sy_npz_name(z, i), prefix, n) == 0 && sy_npz_name(z, i)[n] == '_';
    return count;
}

typedef struct tol {
    double rtol, atol; /* |a - b| <= rtol |b| + atol max|b| */
} tol;

/* got (as many floats as want) against the fixture's array, seen as
 * (outer, steps, inner): |a - b| <= atol * scale + rtol |b|, where scale is the largest
 * magnitude in b's step (over outer and inner). A recurrent layer's dx
 * shrinks by orders of magnitude from the last step to the first, and
 * float round-off with it, so each step is held to its own scale. */
static inline void compare_steps(const char *what, const float *got, const sy_tensor *want, double rtol, double atol,
                          int64_t steps, int64_t inner) {
    if (!got || !want) {
        CHECK(false, "%s: nothing to compare", what);
        return;
    }
    int64_t n = sy_tensor_count(want);
    double *scale = calloc((size_t)steps, sizeof *scale);
    for (int64_t i = 0; i < n; i++) scale[i / inner % steps] = fmax(scale[i / inner % steps], fabs(sy_tensor_get(want, i)));
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 3; i++) {
        double b = sy_tensor_get(want, i), a = got[i];
        if (!(fabs(a - b) <= atol * fmax(scale[i / inner % steps], 1e-30) + rtol * fabs(b))) {
            bad++;
            CHECK(false, "%s[%lld]: systolic %.9g, tf.keras %.9g", what, (long long)i, a, b);
        }
    }
    free(scale);
    check_count++;
}

/* The same with one scale for the whole array. */
static inline void compare(const char *what, const float *got, const sy_tensor *want, double rtol, double atol) {
    compare_steps(what, got, want, rtol, atol, 1, want ? sy_tensor_count(want) : 1);
}

/* A float32 copy of a fixture array. */
static inline float *as_f32(const sy_tensor *t) {
    int64_t n = sy_tensor_count(t);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)sy_tensor_get(t, i);
    return f;
}

static inline sy_node find_node(const sy_graph *g, const char *op, const char *name) {
    for (int32_t i = 0; i < sy_graph_node_count(g); i++)
        if (!strcmp(sy_graph_op_name(g, i), op) && (!name || !strcmp(sy_graph_name(g, i), name))) return i;
    return SY_NONE;
}

static inline void set_var(sy_vars *v, const char *name, const sy_tensor *t) {
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

/* ---- gradient plans ---------------------------------------------------------------------- */

/* A plan over the model's layers that computes a loss of the output y and
 * a fixture array t, with its gradients, and has run once. */
typedef struct grad_run {
    sy_graph *g;
    sy_plan *p;   /* NULL after a failed check */
    sy_node x;    /* float x: a parameter "x" of the model's store, for dx; word indices: SY_NONE */
    sy_node y;    /* the model's output, an output of the plan */
    sy_node loss; /* also an output */
    sy_node scan; /* the first lstm_scan or gru_scan, also an output; SY_NONE if none */
} grad_run;

typedef sy_node (*loss_fn)(sy_graph *g, sy_node y, sy_node t);

/* sum(y * r): what the layer and model fixtures differentiate. */
static inline sy_node dot_loss(sy_graph *g, sy_node y, sy_node r) {
    return sy_graph_reduce_sum(g, sy_graph_mul(g, y, r), NULL, 0, false);
}

/* Keras's binary_crossentropy over the batch, labels (N, 1); after a
 * sigmoid it is computed from the logits, as Keras's compute_loss does. */
static inline sy_node bce_loss(sy_graph *g, sy_node y, sy_node labels) {
    return sy_graph_reduce_mean(g, sy_graph_binary_crossentropy(g, y, labels, false), NULL, 0, false);
}

/* Compile loss_of(y, t) over m's layers on x and run it once. Float x is a
 * parameter "x" in the model's store, so the plan has its gradient (dx);
 * word indices are an int32 input. */
static inline grad_run grad_plan(sy_model *m, const sy_tensor *x, const sy_tensor *t, loss_fn loss_of) {
    grad_run r = {NULL, NULL, SY_NONE, SY_NONE, SY_NONE, SY_NONE};
    sy_graph_new(&r.g);
    bool words = sy_tensor_dtype(x) == SY_I32;
    sy_node xn = words ? sy_graph_input(r.g, "x", SY_I32, sy_tensor_shape(x))
                       : sy_graph_param(r.g, "x", SY_F32, sy_tensor_shape(x), sy_init_zeros());
    if (!words) r.x = xn;
    r.y = SY_NONE;
    keras_build_layers(m, r.g, &xn, &r.y, false, true, NULL);
    r.scan = find_node(r.g, "lstm_scan", NULL);
    if (r.scan == SY_NONE) r.scan = find_node(r.g, "gru_scan", NULL);
    sy_node tn = sy_graph_input(r.g, "t", SY_F32, sy_tensor_shape(t));
    r.loss = loss_of(r.g, r.y, tn);
    CHECK(sy_graph_status(r.g) == SY_OK, "gradient graph: %s", sy_graph_error(r.g));
    sy_node outputs[2] = {r.y, r.scan};
    sy_plan_options o = sy_plan_options_default();
    o.loss = r.loss;
    o.vars = m->vars;
    o.outputs = outputs;
    o.n_outputs = r.scan == SY_NONE ? 1 : 2;
    CHECK_OK(sy_plan_compile(r.g, &o, &r.p));
    if (!r.p) return r;
    if (words) {
        int32_t *in = sy_plan_input(r.p, xn);
        for (int64_t i = 0; i < sy_tensor_count(x); i++) in[i] = (int32_t)sy_tensor_get(x, i);
    } else {
        set_var(m->vars, "x", x);
    }
    float *tv = as_f32(t);
    memcpy(sy_plan_input(r.p, tn), tv, (size_t)sy_tensor_count(t) * sizeof(float));
    free(tv);
    CHECK_OK(sy_plan_run(r.p));
    return r;
}

static inline void grad_run_free(grad_run *r) {
    sy_plan_free(r->p);
    sy_graph_free(r->g);
}

/* ---- weights, by their names in the fixtures ------------------------------------------- */

typedef struct weight_name {
    char var[128]; /* the model's variable: "lstm_1/lstm_cell/kernel" */
    char key[160]; /* its fixture array: "w_lstm_1_kernel" */
} weight_name;

/* issue 17: model_file's third form, for fixtures whose weights' leaves
 * collide (Bidirectional's forward and backward kernels): the whole
 * variable name, '/' as '_' (w_bidirectional_forward_lstm_lstm_cell_kernel). */
#define GOLDEN_FULL_NAMES 2
/* issue 17, masking: the fourth, for models read from Keras's JSON (nested models too): Keras's
 * name of the weight (sy_model_weight_name: a nested model's weights without the model's name), '/'
 * as '_' (w_dense_kernel); the weight found in the store by its data. */
#define GOLDEN_KERAS_NAMES 3

/* Weight i of m and its array: "<prefix>_<weight>" in a single-layer file
 * (the layer's name dropped), "<prefix>_<layer>_<weight>" in a model file,
 * where <weight> is the variable's last component (an LSTM or GRU drops
 * its cell scope, as tests/golden/README.md says); with GOLDEN_FULL_NAMES
 * "<prefix>_<the whole name>". */
static inline weight_name weight_of(sy_model *m, int32_t i, const char *prefix, int model_file) {
    weight_name w;
    snprintf(w.var, sizeof w.var, "%s", sy_model_weight_name(m, i));
    w.var[strcspn(w.var, ":")] = 0;
    const char *leaf = strrchr(w.var, '/') ? strrchr(w.var, '/') + 1 : w.var;
    if (model_file == GOLDEN_FULL_NAMES || model_file == GOLDEN_KERAS_NAMES) {
        snprintf(w.key, sizeof w.key, "%s_%s", prefix, w.var);
        for (char *c = w.key; *c; c++)
            if (*c == '/') *c = '_';
        for (int32_t v = 0; model_file == GOLDEN_KERAS_NAMES && v < sy_vars_count(m->vars); v++)
            if (sy_vars_data(m->vars, v) == sy_model_weight_data(m, i))
                snprintf(w.var, sizeof w.var, "%s", sy_vars_name(m->vars, v));
    } else if (model_file) {
        snprintf(w.key, sizeof w.key, "%s_%.*s_%s", prefix, (int)strcspn(w.var, "/"), w.var, leaf);
    } else {
        snprintf(w.key, sizeof w.key, "%s_%s", prefix, leaf);
    }
    return w;
}

/* Set every weight of m from the fixture, which must hold exactly m's
 * weights under `prefix`. */
static inline void load_weights(const sy_npz *z, sy_model *m, const char *prefix, int model_file) {
    CHECK(count_prefixed(z, prefix) == sy_model_weight_count(m), "%s_*: %d arrays in the fixture, %d weights", prefix,
          count_prefixed(z, prefix), sy_model_weight_count(m));
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        weight_name w = weight_of(m, i, prefix, model_file);
        sy_tensor *t = get(z, w.key);
        set_var(m->vars, w.var, t);
        sy_tensor_free(t);
    }
}

/* Every weight of m against the fixture's arrays under `prefix`: the
 * weights' values, or with r their gradients in r's plan (where a weight
 * that is not trainable, BatchNormalization's moving statistics, has
 * none, in Keras as here). */
static inline void compare_weights(const char *what, const sy_npz *z, sy_model *m, const char *prefix, int model_file,
                            const grad_run *r, tol t) {
    int32_t compared = 0;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        weight_name w = weight_of(m, i, prefix, model_file);
        char label[320];
        snprintf(label, sizeof label, "%s: %s", what, w.key);
        const float *got = r ? sy_plan_gradient(r->p, find_node(r->g, "param", w.var)) : sy_model_weight_data(m, i);
        if (r && !got && !has(z, w.key)) continue;
        sy_tensor *want = get(z, w.key);
        if (want) compare(label, got, want, t.rtol, t.atol);
        sy_tensor_free(want);
        compared++;
    }
    CHECK(count_prefixed(z, prefix) == compared,
          "%s: %s_*: %d arrays in the fixture, %d weights compared", what, prefix,
          count_prefixed(z, prefix), compared);
}

/* A model of layers[0..n) over the input shape of x (without its batch
 * axis); NULL after a failed check. */
static inline sy_model *model_of(const sy_tensor *x, const sy_layer *layers, int n) {
    sy_shape xs = sy_tensor_shape(x), in;
    in.rank = xs.rank - 1;
    for (int i = 0; i < in.rank; i++) in.dims[i] = xs.dims[i + 1];
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    for (int i = 0; i < n; i++) {
        sy_layer l = layers[i];
        if (i == 0) l.input_shape = in;
        sy_status st = sy_model_add(m, &l);
        CHECK(st == SY_OK, "adding layer %d: %s", i, sy_last_error());
        if (st) {
            sy_model_free(m);
            return NULL;
        }
    }
    return m;
}

/* The model's output for x, predict() through the public API; NULL after a
 * failed check. */
static inline sy_tensor *predict(sy_model *m, const sy_tensor *x) {
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_tensor *out = NULL;
    CHECK_OK(sy_model_predict(m, x, &eo, &out));
    return out;
}

/* The strategy of a cluster spec ("cpu:2", "sim:v2-8"), or NULL after a failed check. */
static inline sy_strategy *strategy_of(const char *spec) {
    sy_cluster *c = NULL;
    sy_strategy *s = NULL;
    CHECK_OK(sy_cluster_resolve(spec, &c));
    if (c) CHECK_OK(sy_strategy_new(c, &s));
    sy_cluster_free(c);
    return s;
}

/* The largest |out - want| over want's values (out float32, NULL: infinity); *scale receives want's largest
 * magnitude. */
static inline double largest_difference(const sy_tensor *out, const sy_tensor *want, double *scale) {
    double worst = out ? 0 : INFINITY;
    *scale = 0;
    for (int64_t i = 0; i < sy_tensor_count(want); i++) {
        if (out) worst = fmax(worst, fabs(((const float *)sy_tensor_data(out))[i] - sy_tensor_get(want, i)));
        *scale = fmax(*scale, fabs(sy_tensor_get(want, i)));
    }
    return worst;
}

/* dx of g's run against the fixture's; an (N, T, F) one step by step (a
 * recurrent layer's dx spans orders of magnitude over the steps). */
static inline void compare_dx(const char *file, const sy_npz *z, const grad_run *g, tol t) {
    char what[160];
    snprintf(what, sizeof what, "%s: dx", file);
    sy_tensor *dx = get(z, "dx");
    sy_shape s = dx ? sy_tensor_shape(dx) : (sy_shape){0};
    if (s.rank == 3) compare_steps(what, sy_plan_gradient(g->p, g->x), dx, t.rtol, t.atol, s.dims[1], s.dims[2]);
    else compare(what, sy_plan_gradient(g->p, g->x), dx, t.rtol, t.atol);
    sy_tensor_free(dx);
}

/* A layer or model fixture (tests/golden/README.md) for model m (NULL:
 * layers[0..n) over x) with the weights w_*; y against predict(), then dx
 * (unless x is word indices) and dw_* of sum(y * r). m is freed. */
static inline void check_model_of(const char *file, sy_model *m, const sy_layer *layers, int n,
                                  int model_file, tol ty, tol tg) {
    char what[160];
    sy_npz *z = open_fixture(file);
    sy_tensor *x = get(z, "x"), *y = get(z, "y"), *r = get(z, "r");
    if (!m && x && y && r) m = model_of(x, layers, n);
    if (m && x && y && r) {
        bool words = sy_tensor_dtype(x) == SY_I32;
        CHECK(has(z, "dx") == !words, "%s: dx is there exactly when x is differentiable", file);
        load_weights(z, m, "w", model_file);
        sy_tensor *out = predict(m, x);
        snprintf(what, sizeof what, "%s: y", file);
        if (out) compare(what, sy_tensor_data(out), y, ty.rtol, ty.atol);
        sy_tensor_free(out);
        grad_run g = grad_plan(m, x, r, dot_loss);
        if (g.p && !words) compare_dx(file, z, &g, tg);
        snprintf(what, sizeof what, "%s: gradient", file);
        if (g.p) compare_weights(what, z, m, "dw", model_file, &g, tg);
        grad_run_free(&g);
    }
    sy_model_free(m);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(r);
    sy_npz_close(z);
}

static inline void check_model(const char *file, const sy_layer *layers, int n, int model_file,
                               tol ty, tol tg) {
    check_model_of(file, NULL, layers, n, model_file, ty, tg);
}

typedef struct layer_case {
    const char *name;
    sy_layer cfg;
} layer_case;

/* Each case's layer_<name>.npz, to tolerance t for y, dx and dw_*, its
 * weights keyed as check_model's model_file says (GOLDEN_FULL_NAMES: the
 * layer keeps its automatic name, which the keys hold). */
static inline void check_layers_keyed(const layer_case *cases, size_t n, tol t, int keys) {
    for (size_t i = 0; i < n; i++) {
        int before = check_failures;
        char file[128];
        snprintf(file, sizeof file, "layer_%s.npz", cases[i].name);
        sy_layer l = cases[i].cfg;
        if (keys != GOLDEN_FULL_NAMES) l.name = "layer";
        check_model(file, &l, 1, keys, t, t);
        fprintf(stderr, "layer %-28s %s\n", cases[i].name, check_failures == before ? "ok" : "FAILED");
    }
}

static inline void check_layers(const layer_case *cases, size_t n, tol t) { check_layers_keyed(cases, n, t, false); }

#endif
