/*
 * test_losses.c - tf.keras 2.15's losses and metrics against systolic's
 * (issue 17, losses and metrics), on fixtures written by
 * tools/golden/make_loss_metric_fixtures.py (tests/golden/losses_metrics*):
 *
 *   - every built-in loss, several with arguments (label_smoothing, Huber's
 *     delta, the focal losses' alpha, gamma, class balancing and
 *     from_logits), built as compile() builds it: its value (the batch mean,
 *     SUM_OVER_BATCH_SIZE) and its gradient wrt y_pred, each to 1e-6;
 *   - every new metric accumulated over three batches as Keras's stateful
 *     metrics are (AUC and Precision/Recall from the epoch's confusion
 *     counts, RMSE the sqrt of the epoch's mean), to 1e-6;
 *   - a model Keras saved with BinaryFocalCrossentropy and AUC, AUC(PR),
 *     Precision, Recall and RootMeanSquaredError: loaded, evaluate gives
 *     Keras's logs (the last batch partial) with one replica and with two,
 *     and its training_config is written back byte for byte;
 *   - issue 17: the crossentropies, focal losses and cosine similarity
 *     with the classes along axis 1 (or -2); the metric options (top_k,
 *     class_id, a list of one threshold; multi_label, label_weights,
 *     from_logits, minoring/majoring), some with sample weights; and
 *     Keras-saved models with a loss axis, ignore_class on a masked output,
 *     weighted_metrics (also per output) and the metric options: evaluate's
 *     logs, one fit step's loss and weights, training_config written back
 *     byte for byte;
 *   - names, aliases and arguments refused as Keras would refuse them.
 */
#include "check.h"
#include "io/io_internal.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SY_GOLDEN_DIR
#error "SY_GOLDEN_DIR must name tests/golden"
#endif

static sy_npz *open_npz(const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_GOLDEN_DIR, file);
    sy_npz *z = NULL;
    CHECK(sy_npz_open(path, &z) == SY_OK, "%s: %s", path, sy_last_error());
    return z;
}

static sy_tensor *get(const sy_npz *z, const char *fmt, const char *a, int b) {
    char key[128];
    snprintf(key, sizeof key, fmt, a, b);
    sy_tensor *t = NULL;
    CHECK(sy_npz_get(z, key, &t) == SY_OK, "%s: %s", key, sy_last_error());
    return t;
}

static float *as_floats(const sy_tensor *t) {
    float *f = malloc((size_t)sy_tensor_count(t) * sizeof *f);
    for (int64_t i = 0; f && i < sy_tensor_count(t); i++) f[i] = (float)sy_tensor_get(t, i);
    return f;
}

static bool npz_has(const sy_npz *z, const char *name) {
    for (int32_t i = 0; i < sy_npz_count(z); i++)
        if (!strcmp(sy_npz_name(z, i), name)) return true;
    return false;
}

static double worst_loss, worst_grad, worst_metric; /* the measured maxima, printed */

/* ---- losses ------------------------------------------------------------------------------- */

typedef struct loss_case {
    const char *fixture, *loss;
    bool from_logits;
    double label_smoothing, delta, alpha, gamma;
    bool balance;
    int32_t axis; /* issue 17: Keras's axis */
} loss_case;

static const loss_case loss_cases[] = {
    {"cce_smooth", "categorical_crossentropy", false, 0.1, 1, 0.25, 2, false, -1},
    {"cce_logits_smooth", "CategoricalCrossentropy", true, 0.2, 1, 0.25, 2, false, -1},
    {"bce_smooth", "binary_crossentropy", false, 0.1, 1, 0.25, 2, false, -1},
    {"mae", "mae", false, 0, 1, 0.25, 2, false, -1},
    {"mape", "mape", false, 0, 1, 0.25, 2, false, -1},
    {"msle", "msle", false, 0, 1, 0.25, 2, false, -1},
    {"kld", "kld", false, 0, 1, 0.25, 2, false, -1},
    {"huber", "huber_loss", false, 0, 1, 0.25, 2, false, -1},
    {"huber_half", "Huber", false, 0, 0.5, 0.25, 2, false, -1},
    {"log_cosh", "logcosh", false, 0, 1, 0.25, 2, false, -1},
    {"poisson", "poisson", false, 0, 1, 0.25, 2, false, -1},
    {"hinge01", "hinge", false, 0, 1, 0.25, 2, false, -1},
    {"hinge_pm1", "hinge", false, 0, 1, 0.25, 2, false, -1},
    {"squared_hinge", "squared_hinge", false, 0, 1, 0.25, 2, false, -1},
    {"categorical_hinge", "categorical_hinge", false, 0, 1, 0.25, 2, false, -1},
    {"cosine", "cosine_similarity", false, 0, 1, 0.25, 2, false, -1},
    {"bfocal", "binary_focal_crossentropy", false, 0, 1, 0.25, 2, false, -1},
    {"bfocal_logits", "BinaryFocalCrossentropy", true, 0.1, 1, 0.25, 1.5, true, -1},
    {"cfocal", "categorical_focal_crossentropy", false, 0, 1, 0.25, 2, false, -1},
    {"cfocal_logits", "CategoricalFocalCrossentropy", true, 0.1, 1, 0.5, 2, false, -1},
    /* issue 17: the classes along axis 1 of (4, 3, 5) */
    {"cce_axis1", "CategoricalCrossentropy", false, 0.1, 1, 0.25, 2, false, 1},
    {"cce_logits_axis1", "CategoricalCrossentropy", true, 0, 1, 0.25, 2, false, 1},
    {"cce_axis_m2", "CategoricalCrossentropy", false, 0, 1, 0.25, 2, false, -2},
    {"bce_axis1", "BinaryCrossentropy", false, 0.1, 1, 0.25, 2, false, 1},
    {"bce_logits_axis1", "BinaryCrossentropy", true, 0, 1, 0.25, 2, false, 1},
    {"bfocal_axis1", "BinaryFocalCrossentropy", false, 0, 1, 0.25, 1.5, true, 1},
    {"cfocal_axis1", "CategoricalFocalCrossentropy", false, 0.1, 1, 0.25, 2, false, 1},
    {"cfocal_logits_axis1", "CategoricalFocalCrossentropy", true, 0, 1, 0.25, 2, false, 1},
    {"cosine_axis1", "CosineSimilarity", false, 0, 1, 0.25, 2, false, 1},
};

static void check_loss(const sy_npz *z, const loss_case *c) {
    sy_tensor *yt = get(z, "loss_%s_y_true", c->fixture, 0), *yp = get(z, "loss_%s_y_pred", c->fixture, 0);
    sy_tensor *want = get(z, "loss_%s_value", c->fixture, 0), *wgrad = get(z, "loss_%s_grad", c->fixture, 0);
    sy_model *m = calloc(1, sizeof *m);
    sy_graph *g = NULL;
    sy_plan *plan = NULL;
    if (!yt || !yp || !want || !wgrad || !m || sy_graph_new(&g)) goto done;
    sy_shape s = sy_tensor_shape(yp), one = s; /* one sample's shape */
    one.rank--;
    for (int i = 0; i < one.rank; i++) one.dims[i] = s.dims[i + 1];
    sy_loss_args a = sy_loss_args_default();
    a.label_smoothing = c->label_smoothing;
    a.delta = c->delta;
    a.alpha = c->alpha;
    a.gamma = c->gamma;
    a.apply_class_balancing = c->balance;
    a.axis = c->axis;
    m->n_outputs = 1;
    CHECK_OK(keras_loss_resolve("test", c->loss, c->from_logits, &a, &one, &m->heads[0]));
    sy_node p = sy_graph_param(g, "y_pred", SY_F32, s, sy_init_zeros());
    sy_node y = sy_graph_input(g, "y_true", SY_F32, s);
    sy_node loss = sy_graph_reduce_mean(g, keras_loss_build(m, 0, g, p, y), NULL, 0, false);
    CHECK(!sy_graph_status(g), "%s: %s", c->fixture, sy_graph_error(g));
    sy_plan_options o = sy_plan_options_default();
    o.loss = loss;
    o.outputs = &loss;
    o.n_outputs = 1;
    CHECK_OK(sy_plan_compile(g, &o, &plan));
    if (!plan) goto done;
    int64_t n = sy_shape_count(&s);
    float *pv = sy_vars_data(sy_plan_vars(plan), sy_vars_find(sy_plan_vars(plan), "y_pred"));
    float *yv = sy_plan_input(plan, y);
    for (int64_t i = 0; i < n; i++) {
        pv[i] = (float)sy_tensor_get(yp, i);
        yv[i] = (float)sy_tensor_get(yt, i);
    }
    CHECK_OK(sy_plan_run_gradients(plan));
    double got = *(const float *)sy_plan_output(plan, loss), w = sy_tensor_get(want, 0);
    double err = fabs(got - w) / fmax(1, fabs(w));
    worst_loss = fmax(worst_loss, err);
    CHECK(err <= 1e-6, "loss %s (%s): %.9g, Keras %.9g", c->fixture, c->loss, got, w);
    const float *gr = sy_plan_gradient(plan, p);
    double gmax = 0, gerr = 0;
    for (int64_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(sy_tensor_get(wgrad, i)));
    for (int64_t i = 0; gr && i < n; i++) gerr = fmax(gerr, fabs(gr[i] - sy_tensor_get(wgrad, i)) / fmax(gmax, 1e-3));
    worst_grad = fmax(worst_grad, gerr);
    CHECK(gr && gerr <= 1e-6, "loss %s (%s): gradient off by %.3g of its largest %.3g", c->fixture, c->loss, gerr, gmax);
done:
    sy_plan_free(plan);
    sy_graph_free(g);
    free(m);
    sy_tensor_free(yt);
    sy_tensor_free(yp);
    sy_tensor_free(want);
    sy_tensor_free(wgrad);
}

/* ---- metrics -------------------------------------------------------------------------------- */

typedef struct metric_case {
    const char *fixture, *text;
    bool sparse;
} metric_case;

static const metric_case metric_cases[] = {
    {"auc", "AUC", false},
    {"auc_pr50", "AUC(curve='PR', num_thresholds=50)", false},
    {"precision", "Precision", false},
    {"recall", "Recall", false},
    {"precision_03", "Precision(thresholds=0.3)", false},
    {"top2", "TopKCategoricalAccuracy(k=2)", false},
    {"sparse_top2", "SparseTopKCategoricalAccuracy(k=2)", true},
    {"mape", "mape", false},
    {"msle", "msle", false},
    {"mse", "MeanSquaredError", false},
    {"rmse", "RootMeanSquaredError", false},
    /* issue 17, metric options (some with sample weights: metric_<c>_sw_<b>) */
    {"precision_top2", "Precision(top_k=2)", false},
    {"recall_class1", "Recall(class_id=1, thresholds=[0.3])", false},
    {"precision_top1_class2", "Precision(top_k=1, class_id=2)", false},
    {"recall_top2_03", "Recall(top_k=2, thresholds=0.3)", false},
    {"auc_logits", "AUC(from_logits=True)", false},
    {"auc_label_weights", "AUC(label_weights=[0.5, 1, 2, 0.25])", false},
    {"auc_multi", "AUC(multi_label=True, num_labels=4, num_thresholds=100)", false},
    {"auc_multi_pr_weights",
     "AUC(multi_label=True, curve='PR', num_thresholds=50, label_weights=[1, 2, 0.5, 0.25])",
     false},
    {"auc_pr_minoring", "AUC(curve='PR', summation_method='minoring')", false},
    {"auc_majoring", "AUC(summation_method='majoring')", false},
};

static void check_metric(const sy_npz *z, const metric_case *c) {
    metric_spec ms;
    char key[96];
    snprintf(key, sizeof key, "metric_%s_sw_0", c->fixture);
    bool weighted = npz_has(z, key);
    CHECK_OK(metric_resolve("test", c->text, c->sparse, &ms));
    sy_shape four = sy_shape_of(1, (int64_t)4); /* the fixtures' (8, 4) predictions */
    CHECK_OK(metric_check_output("test", &four, &ms));
    ms.weighted =
        weighted; /* as compile() lays out a weighted metric's state: the weights' sum last */
    ms.n_state = metric_state_size(&ms) + weighted;
    CHECK(ms.n_state <= METRIC_STATE_MAX, "metric %s: a state of %d numbers", c->fixture,
          ms.n_state);
    if (ms.n_state > METRIC_STATE_MAX) return;
    double *state = calloc(METRIC_STATE_MAX, sizeof *state), rows = 0;
    for (int b = 0; state && b < 3; b++) {
        sy_tensor *yt = get(z, "metric_%s_y_true_%d", c->fixture, b), *yp = get(z, "metric_%s_y_pred_%d", c->fixture, b);
        if (!yt || !yp) break;
        sy_shape s = sy_tensor_shape(yp);
        int64_t n = sy_shape_count(&s), per_row = s.dims[1];
        float *p = malloc((size_t)n * sizeof *p), *t = malloc((size_t)n * sizeof *t);
        int32_t *l = malloc((size_t)n * sizeof *l);
        for (int64_t i = 0; i < n; i++) p[i] = (float)sy_tensor_get(yp, i);
        for (int64_t i = 0; i < sy_tensor_count(yt); i++) t[i] = (float)sy_tensor_get(yt, i), l[i] = (int32_t)t[i];
        sy_tensor *sw = weighted ? get(z, "metric_%s_sw_%d", c->fixture, b) : NULL;
        float *w = sw ? as_floats(sw) : NULL;
        if (weighted) /* issue 17: weights per sample */
            metric_update_masked(&ms, p, c->sparse ? (const void *)l : t, w, NULL, n / per_row, 1,
                                 per_row, false, state);
        else
            metric_update(&ms, p, c->sparse ? (const void *)l : t, n / per_row, per_row, state);
        free(w);
        sy_tensor_free(sw);
        rows += (double)(n / per_row);
        free(p);
        free(t);
        free(l);
        sy_tensor_free(yt);
        sy_tensor_free(yp);
    }
    sy_tensor *want = get(z, "metric_%s_value", c->fixture, 0);
    if (want && state) {
        double got = metric_value(&ms, state, weighted ? state[ms.n_state - 1] : rows),
               w = sy_tensor_get(want, 0);
        double err = fabs(got - w) / fmax(1, fabs(w));
        worst_metric = fmax(worst_metric, err);
        CHECK(err <= 1e-6, "metric %s (%s): %.9g, Keras %.9g", c->fixture, c->text, got, w);
    }
    sy_tensor_free(want);
    free(state);
}

/* ---- the saved model ------------------------------------------------------------------------ */

static char *training_config_of(const char *path) {
    h5_file *f = NULL;
    char *s = NULL;
    CHECK_OK(h5_open(path, &f));
    if (f) CHECK_OK(h5_attr_read_string(f, h5_root(f), "training_config", &s));
    if (f) h5_close(f);
    return s;
}

static void check_model(void) {
    static const char *const names[] = {"loss", "auc", "auc_2", "precision", "recall", "root_mean_squared_error"};
    char path[1024];
    snprintf(path, sizeof path, "%s/losses_metrics_model.h5", SY_GOLDEN_DIR);
    sy_npz *z = open_npz("losses_metrics_model.npz");
    sy_tensor *x = NULL, *y = NULL;
    if (!z || sy_npz_get(z, "x", &x) || sy_npz_get(z, "y", &y)) {
        CHECK(false, "losses_metrics_model.npz: %s", sy_last_error());
        goto done;
    }
    for (int replicas = 1; replicas <= 2; replicas++) {
        sy_cluster *cl = NULL;
        sy_strategy *s = NULL;
        if (replicas == 2) {
            CHECK_OK(sy_cluster_resolve("cpu:2", &cl));
            if (cl) CHECK_OK(sy_strategy_new(cl, &s));
            if (s) sy_strategy_scope_enter(s);
        }
        sy_model *m = NULL;
        CHECK(sy_model_load(path, &m) == SY_OK, "%s: %s", path, sy_last_error());
        if (s) sy_strategy_scope_exit(s);
        sy_evaluate_options eo = sy_evaluate_options_default();
        eo.batch_size = 8;
        eo.verbose = 0;
        sy_logs l;
        if (m) CHECK(sy_model_evaluate(m, x, y, &eo, &l) == SY_OK, "evaluate: %s", sy_last_error());
        for (size_t i = 0; m && i < sizeof names / sizeof names[0]; i++) {
            char key[64];
            snprintf(key, sizeof key, "eval_%s", names[i]);
            sy_tensor *w = NULL;
            CHECK_OK(sy_npz_get(z, key, &w));
            double got = sy_logs_get(&l, names[i]), want = w ? sy_tensor_get(w, 0) : NAN;
            CHECK(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)), "%d replica(s): evaluate's %s %.9g, Keras %.9g",
                  replicas, names[i], got, want);
            sy_tensor_free(w);
        }
        if (m && replicas == 1) { /* written back as Keras wrote it */
            char out[] = "/tmp/systolic_losses_XXXXXX";
            int fd = mkstemp(out);
            if (fd >= 0) close(fd);
            CHECK_OK(sy_model_save(m, out));
            char *keras = training_config_of(path), *ours = training_config_of(out);
            CHECK(keras && ours && !strcmp(keras, ours), "training_config written back as Keras wrote it:\n%s\n%s",
                  keras ? keras : "(none)", ours ? ours : "(none)");
            sy_free(keras);
            sy_free(ours);
            unlink(out);
        }
        sy_model_free(m);
        sy_strategy_free(s);
        sy_cluster_free(cl);
    }
done:
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
}

/* ---- issue 17: Keras-written models with a loss axis, ignore_class, weighted_metrics
 * ---------------- */

/* A model Keras saved as <name>.h5 (tools/golden/make_loss_metric_fixtures.py, saved_model_case)
 * with its numbers in <name>.npz: loaded, its training_config written back byte for byte;
 * evaluate's logs (named in logs[]) at batch `batch`, with the file's sample weights if any; then,
 * when the fixture has them, one fit step over every sample: the step's loss and the weights after
 * it. */
static void check_saved(const char *name, const char *const *logs, int n_logs, int64_t batch) {
    char path[1024], file[128];
    snprintf(path, sizeof path, "%s/%s.h5", SY_GOLDEN_DIR, name);
    snprintf(file, sizeof file, "%s.npz", name);
    sy_npz *z = open_npz(file);
    sy_model *m = NULL;
    CHECK(sy_model_load(path, &m) == SY_OK, "%s: %s", path, sy_last_error());
    sy_tensor *x = NULL, *y = NULL, *sw = NULL, *tc = NULL;
    if (!z || !m || sy_npz_get(z, "training_config", &tc)) goto done;
    char out[] = "/tmp/systolic_losses_XXXXXX";
    int fd = mkstemp(out);
    if (fd >= 0) close(fd);
    CHECK_OK(sy_model_save(m, out));
    char *ours = training_config_of(out), *keras = calloc((size_t)sy_tensor_count(tc) + 1, 1);
    for (int64_t i = 0; keras && i < sy_tensor_count(tc); i++)
        keras[i] = (char)sy_tensor_get(tc, i);
    CHECK(keras && ours && !strcmp(keras, ours),
          "%s: training_config written back as Keras wrote it:\n%s\n%s", name,
          keras ? keras : "(none)", ours ? ours : "(none)");
    sy_free(ours);
    free(keras);
    unlink(out);
    if (n_logs == 0 || sy_npz_get(z, "x", &x) || sy_npz_get(z, "y", &y)) goto done;
    if (npz_has(z, "sw")) CHECK_OK(sy_npz_get(z, "sw", &sw));
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = batch;
    eo.verbose = 0;
    eo.sample_weight = sw;
    sy_logs l;
    CHECK(sy_model_evaluate(m, x, y, &eo, &l) == SY_OK, "%s: evaluate: %s", name, sy_last_error());
    for (int i = 0; i < n_logs; i++) {
        sy_tensor *w = get(z, "eval_%s%.0d", logs[i], 0);
        double got = sy_logs_get(&l, logs[i]), want = w ? sy_tensor_get(w, 0) : NAN;
        CHECK(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)), "%s: evaluate's %s %.9g, Keras %.9g",
              name, logs[i], got, want);
        sy_tensor_free(w);
    }
    if (!npz_has(z, "after_0")) goto done;
    sy_fit_options fo = sy_fit_options_default();
    fo.batch_size = sy_tensor_shape(x).dims[0];
    fo.shuffle = false;
    fo.verbose = 0;
    fo.sample_weight = sw;
    sy_history *h = NULL;
    CHECK(sy_model_fit(m, x, y, &fo, &h) == SY_OK, "%s: fit: %s", name, sy_last_error());
    sy_tensor *fl = get(z, "fit_%s%.0d", "loss", 0);
    double fit_loss = h ? sy_logs_get(sy_history_logs(h, 0), "loss") : NAN,
           want = fl ? sy_tensor_get(fl, 0) : NAN;
    CHECK(fabs(fit_loss - want) <= 1e-6 * fmax(1, fabs(want)), "%s: fit's loss %.9g, Keras %.9g",
          name, fit_loss, want);
    sy_tensor_free(fl);
    sy_history_free(h);
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_tensor *after = get(z, "after_%.0s%d", "", i);
        double worst = after ? 0 : INFINITY;
        for (int64_t k = 0; after && k < sy_tensor_count(after); k++)
            worst = fmax(worst, fabs(sy_model_weight_data(m, i)[k] - sy_tensor_get(after, k)));
        CHECK(worst <= 1e-6, "%s: %s after one step differs from Keras's by %g", name,
              sy_model_weight_name(m, i), worst);
        sy_tensor_free(after);
    }
done:
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(sw);
    sy_tensor_free(tc);
    sy_model_free(m);
    sy_npz_close(z);
}

static void check_saved_models(void) {
    static const char *const loss[] = {"loss"},
                             *const ignore[] = {"loss", "sparse_categorical_accuracy"},
                             *const weighted[] = {"loss",  "accuracy", "auc", "weighted_accuracy",
                                                  "auc_1", "mse"};
    /* CategoricalCrossentropy(axis=1, label_smoothing=0.1) over a softmax's logits */
    check_saved("loss_axis_model", loss, 1, 4);
    /* ignore_class=-1 with a mask: neither counts in the loss or its mean; the metric sees labels
     * as given */
    check_saved("ignore_class_model", ignore, 2, 4);
    /* weighted_metrics read, computed with the sample weights and written back */
    check_saved("weighted_metrics_model", weighted, 6, 8);
    /* per output weighted_metrics, two outputs: read and written back */
    check_saved("weighted_metrics_outputs", NULL, 0, 0);
    /* Precision and Recall's top_k, class_id, [threshold]; AUC's multi_label, num_labels,
     * label_weights, from_logits, summation_method */
    static const char *const options[] = {"loss", "p_top2", "r_c1", "auc_ml", "auc_lw", "auc_min"};
    check_saved("metric_options_model", options, 6, 8);
}

/* ---- refusals -------------------------------------------------------------------------------- */

static void check_refusals(void) {
    model_head h;
    sy_shape out = sy_shape_of(1, 4L);
    sy_loss_args a = sy_loss_args_default();
    CHECK_ERR(keras_loss_resolve("compile", "cosine_proximity", false, NULL, &out, &h), SY_ERR_NOT_FOUND,
              "unknown loss 'cosine_proximity'", "huber (huber_loss)");
    a.delta = 2;
    CHECK_ERR(keras_loss_resolve("compile", "mse", false, &a, &out, &h), SY_ERR_INVALID_ARGUMENT, "delta",
              "MeanSquaredError");
    a = sy_loss_args_default();
    a.label_smoothing = 1.5;
    CHECK_ERR(keras_loss_resolve("compile", "bce", false, &a, &out, &h), SY_ERR_INVALID_ARGUMENT, "1.5", "[0, 1]");
    a = sy_loss_args_default();
    a.axis = 0; /* issue 17: any axis of the output but the batch's */
    CHECK_ERR(keras_loss_resolve("compile", "cosine_similarity", false, &a, &out, &h),
              SY_ERR_INVALID_ARGUMENT, "axis=0", "batch axis", "(None, 4)");
    a.axis = 2;
    CHECK_ERR(keras_loss_resolve("compile", "categorical_crossentropy", false, &a, &out, &h),
              SY_ERR_INVALID_ARGUMENT, "axis=2", "axes 1 to 1");
    a.axis = -2;
    CHECK_ERR(keras_loss_resolve("compile", "binary_crossentropy", false, &a, &out, &h),
              SY_ERR_INVALID_ARGUMENT, "axis=-2");
    a.axis = 1;
    CHECK_OK(keras_loss_resolve("compile", "binary_crossentropy", false, &a, &out, &h));
    a = sy_loss_args_default();
    a.has_ignore_class = true;
    CHECK_ERR(keras_loss_resolve("compile", "categorical_crossentropy", false, &a, &out, &h),
              SY_ERR_INVALID_ARGUMENT, "ignore_class", "CategoricalCrossentropy");
    CHECK_OK(keras_loss_resolve("compile", "sparse_categorical_crossentropy", false, &a, &out, &h));
    CHECK_ERR(keras_loss_resolve("compile", "huber", true, NULL, &out, &h), SY_ERR_INVALID_ARGUMENT, "from_logits",
              "Huber");
    metric_spec ms;
    CHECK_ERR(metric_resolve("compile", "AUC(curve='XY')", false, &ms), SY_ERR_INVALID_ARGUMENT, "curve=XY", "ROC or PR");
    CHECK_ERR(metric_resolve("compile", "AUC(k=2)", false, &ms), SY_ERR_INVALID_ARGUMENT, "'k'");
    CHECK_ERR(metric_resolve("compile", "top_k_categorical_accuracy(k=2)", false, &ms), SY_ERR_INVALID_ARGUMENT,
              "use its class");
    CHECK_ERR(metric_resolve("compile", "AUC", true, &ms), SY_ERR_INVALID_ARGUMENT, "class indices");
    CHECK(metric_resolve("compile", "auc", false, &ms) == SY_ERR_NOT_FOUND, "'auc' is not a Keras name (AUC is)");
    /* issue 17, metric options: what Keras cannot log or compute */
    CHECK_ERR(metric_resolve("compile", "Precision(thresholds=[0.3, 0.5])", false, &ms),
              SY_ERR_UNSUPPORTED, "thresholds=[0.3, 0.5]", "one threshold per metric");
    CHECK_ERR(metric_resolve("compile", "AUC(summation_method='riemann')", false, &ms),
              SY_ERR_INVALID_ARGUMENT, "summation_method=riemann", "minoring");
    CHECK_ERR(metric_resolve("compile", "AUC(label_weights=[1, -2])", false, &ms),
              SY_ERR_INVALID_ARGUMENT, "label_weights");
    CHECK_ERR(metric_resolve("compile", "Recall(top_k=0)", false, &ms), SY_ERR_INVALID_ARGUMENT,
              "top_k=0");
    CHECK_OK(metric_resolve("compile", "Precision(class_id=4)", false, &ms));
    CHECK_ERR(metric_check_output("compile", &out, &ms), SY_ERR_INVALID_ARGUMENT, "class_id=4",
              "4 classes");
    CHECK_OK(metric_resolve("compile", "AUC(label_weights=[1, 2])", false, &ms));
    CHECK_ERR(metric_check_output("compile", &out, &ms), SY_ERR_INVALID_ARGUMENT, "2 label_weights",
              "4 labels");
    sy_shape seq = sy_shape_of(2, (int64_t)3, (int64_t)4);
    CHECK_OK(metric_resolve("compile", "AUC(multi_label=True)", false, &ms));
    CHECK_ERR(metric_check_output("compile", &seq, &ms), SY_ERR_INVALID_ARGUMENT, "multi-label",
              "(None, 3, 4)");
    /* issue 17: a file's loss arguments of the wrong type */
    json_t *bad = json_loads("{\"class_name\": \"SparseCategoricalCrossentropy\", \"config\": "
                             "{\"ignore_class\": \"void\"}}",
                             0, NULL);
    const char *lname;
    bool logits, has;
    sy_loss_args la;
    CHECK_ERR(keras_loss_from_json("f.h5", bad, &lname, &logits, &la, &has), SY_ERR_UNSUPPORTED,
              "ignore_class", "\"void\"");
    json_decref(bad);
    /* names as Keras logs them */
    CHECK_OK(metric_resolve("compile", "AUC(name='pr', curve='PR')", false, &ms));
    CHECK(!strcmp(ms.name, "pr") && ms.pr && ms.num_thresholds == 200, "AUC(name='pr', curve='PR') is '%s'", ms.name);
    CHECK_OK(metric_resolve("compile", "RootMeanSquaredError", false, &ms));
    CHECK(!strcmp(ms.name, "root_mean_squared_error"), "RootMeanSquaredError logs as '%s'", ms.name);
    CHECK_OK(metric_resolve("compile", "mape", false, &ms));
    CHECK(!strcmp(ms.name, "mape"), "mape logs as '%s'", ms.name);
}

int main(void) {
    sy_npz *z = open_npz("losses_metrics.npz");
    for (size_t i = 0; z && i < sizeof loss_cases / sizeof loss_cases[0]; i++) check_loss(z, &loss_cases[i]);
    for (size_t i = 0; z && i < sizeof metric_cases / sizeof metric_cases[0]; i++) check_metric(z, &metric_cases[i]);
    sy_npz_close(z);
    check_model();
    check_saved_models();
    check_refusals();
    printf("largest differences from Keras: loss %.3g, gradient %.3g (of its largest), metric %.3g\n", worst_loss,
           worst_grad, worst_metric);
    return check_report("test_losses");
}
