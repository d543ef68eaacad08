/*
 * test_loss_config.c - a Keras .h5 file's loss object, honoured (issue 15):
 * files tf.keras 2.15 wrote (tools/golden/make_loss_config_h5.py,
 * tests/data/keras/logits*) with SparseCategoricalCrossentropy(
 * from_logits=True), on a linear output and on a softmax output.
 *
 *   - evaluate gives Keras's model.evaluate loss to 1e-6 on both (on the
 *     softmax output Keras uses the softmax's logits despite from_logits);
 *   - one fit step gives Keras's step loss and the weights Keras had after
 *     the step (SGD 0.1: the gradients to 1e-6) on both;
 *   - on the softmax output, Keras's warning is logged once for the
 *     compile, though evaluate and fit each build a plan with the loss;
 *   - issue 17: a file with SparseCategoricalCrossentropy(ignore_class=0)
 *     gives Keras's evaluate loss, step loss and weights after the step
 *     (the labels of class 0 count in neither the loss nor its mean);
 *   - compile() refuses from_logits with mean_squared_error.
 */
#include "check.h"
#include "systolic.h"

#include <stdlib.h>
#include <string.h>

static char dir[1024];
static int warnings;
static char last_warning[1024];

static void count_warnings(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level != SY_LOG_WARNING || !strstr(message, "from_logits")) return;
    warnings++;
    snprintf(last_warning, sizeof last_warning, "%s", message);
}

static sy_tensor *get(const sy_npz *z, const char *name) {
    sy_tensor *t = NULL;
    CHECK(sy_npz_get(z, name, &t) == SY_OK, "%s: %s", name, sy_last_error());
    return t;
}

static double scalar(const sy_npz *z, const char *name) {
    sy_tensor *t = get(z, name);
    double v = t ? sy_tensor_get(t, 0) : NAN;
    sy_tensor_free(t);
    return v;
}

/* The model of file <dir>/<file>.h5, its numbers under "<which>_" in logits.npz */
static void check_model(const sy_npz *z, const char *file, const char *which, const sy_tensor *x,
                        const sy_tensor *y) {
    char path[1200], key[64];
    snprintf(path, sizeof path, "%s/%s.h5", dir, file);
    sy_model *m = NULL;
    warnings = 0;
    sy_set_log(count_warnings, NULL);
    CHECK(sy_model_load(path, &m) == SY_OK, "%s: %s", path, sy_last_error());
    if (!m) return;
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = 16;
    eo.verbose = 0;
    sy_logs l;
    CHECK(sy_model_evaluate(m, x, y, &eo, &l) == SY_OK, "%s", sy_last_error());
    snprintf(key, sizeof key, "%s_loss", which);
    CHECK_CLOSE(sy_logs_get(&l, "loss"), scalar(z, key), 0, 1e-6, "%s: evaluate's loss vs Keras's", which);
    sy_fit_options fo = sy_fit_options_default();
    fo.batch_size = 16;
    fo.epochs = 1;
    fo.shuffle = false;
    fo.verbose = 0;
    sy_history *h = NULL;
    CHECK(sy_model_fit(m, x, y, &fo, &h) == SY_OK, "%s", sy_last_error());
    if (h) {
        snprintf(key, sizeof key, "%s_fit_loss", which);
        CHECK_CLOSE(sy_logs_get(sy_history_logs(h, 0), "loss"), scalar(z, key), 0, 1e-6, "%s: fit's loss", which);
    }
    sy_history_free(h);
    /* the weights after one SGD(0.1) step: (kernel0 - kernel) / 0.1 is the gradient */
    const char *names[2] = {"kernel", "bias"};
    for (int w = 0; w < 2; w++) {
        snprintf(key, sizeof key, "%s_%s", which, names[w]);
        sy_tensor *want = get(z, key);
        int32_t i = sy_model_find_weight(m, w ? "dense/bias" : "dense/kernel");
        CHECK(i >= 0 && want, "%s: weight %s", which, names[w]);
        if (i < 0 || !want) continue;
        const float *got = sy_model_weight_data(m, i);
        double worst = 0;
        for (int64_t k = 0; k < sy_tensor_count(want); k++)
            worst = fmax(worst, fabs(got[k] - sy_tensor_get(want, k)));
        CHECK(worst <= 1e-6, "%s: %s after one step differs from Keras's by %g", which, names[w], worst);
        sy_tensor_free(want);
    }
    bool softmax = !strcmp(which, "softmax");
    CHECK(warnings == (softmax ? 1 : 0), "%s: %d from_logits warnings, expected %d", which, warnings, softmax ? 1 : 0);
    if (softmax)
        CHECK(strstr(last_warning, "\"`sparse_categorical_crossentropy` received `from_logits=True`, but the "
                                   "`output` argument was produced by a Softmax activation and thus does not "
                                   "represent logits. Was this intended?\""),
              "Keras's text: %s", last_warning);
    sy_set_log(NULL, NULL);
    sy_model_free(m);
}

int main(void) {
    const char *src = __FILE__, *slash = strrchr(src, '/');
    snprintf(dir, sizeof dir, "%.*s/data/keras", slash ? (int)(slash - src) : 1, slash ? src : ".");
    char path[1200];
    snprintf(path, sizeof path, "%s/logits.npz", dir);
    sy_npz *z = NULL;
    if (sy_npz_open(path, &z)) {
        fprintf(stderr, "%s\n", sy_last_error());
        return 1;
    }
    sy_tensor *x = get(z, "x"), *y = get(z, "y");
    if (x && y) {
        check_model(z, "logits_linear", "linear", x, y);
        check_model(z, "logits_softmax", "softmax", x, y);
        /* issue 17: ignore_class=0 honoured: the labels of class 0 count in neither the loss nor
         * its mean */
        check_model(z, "ignore_class", "ignore_class", x, y);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);

    /* compile() in C: from_logits is an argument of the crossentropy losses only */
    sy_model *m = NULL;
    sy_status st;
    snprintf(path, sizeof path, "%s/logits_linear.h5", dir);
    if (sy_model_load(path, &m) == SY_OK) {
        sy_compile_options c = sy_compile_options_default();
        c.loss = "mse";
        c.from_logits = true;
        st = sy_model_compile(m, &c);
        CHECK(st == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "from_logits"), "mse with from_logits: %d %s",
              st, sy_last_error());
        sy_model_free(m);
    }
    return check_report("test_loss_config");
}
