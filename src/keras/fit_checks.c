/*
 * fit_checks.c - the checks fit(), evaluate() and predict() make of the
 * arrays they are given, before anything runs: one array per model input
 * and one label array per output, each of the shape its input or its
 * output's loss takes (class indices in range for sparse losses, word
 * indices in range for an Embedding), all with as many samples. Errors
 * name the argument, both shapes and, for a bad value, its index, as
 * Keras's do. (Moved out of fit.c, which had grown past the size the
 * house style allows, when issue 20 added the hosts.)
 */
#include "keras_internal.h"

#include <math.h>
#include <string.h>

int64_t fit_samples(const sy_tensor *t) {
    sy_shape s = sy_tensor_shape(t);
    return s.rank ? s.dims[0] : 0;
}

/* The per-sample shape of t: its shape without the first axis. */
static sy_shape per_sample(const sy_tensor *t) {
    sy_shape s = sy_tensor_shape(t), r;
    memset(&r, 0, sizeof r);
    r.rank = s.rank > 0 ? s.rank - 1 : 0;
    for (int i = 0; i < r.rank; i++) r.dims[i] = s.dims[i + 1];
    return r;
}

/* a equals b, or equals b with a trailing axis of 1 added or removed. */
static bool same_up_to_trailing_one(const sy_shape *a, const sy_shape *b) {
    if (sy_shape_equal(a, b)) return true;
    const sy_shape *longer = a->rank > b->rank ? a : b, *shorter = a->rank > b->rank ? b : a;
    if (longer->rank != shorter->rank + 1 || longer->dims[longer->rank - 1] != 1) return false;
    for (int i = 0; i < shorter->rank; i++)
        if (longer->dims[i] != shorter->dims[i]) return false;
    return true;
}

/* "x" with one array, "x[i]" with several. */
static const char *array_name(const char *base, int32_t i, int32_t n, char *buf, size_t size) {
    if (n == 1)
        snprintf(buf, size, "%s", base);
    else
        snprintf(buf, size, "%s[%d]", base, i);
    return buf;
}

/* x, an input array, against input i of m. */
static sy_status check_input(const sy_model *m, const char *what, const char *xname, int32_t i,
                             const sy_tensor *x) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (sy_tensor_dtype(x) == SY_STRING)
        return sy_error(SY_ERR_DTYPE,
                        "%s: %s holds strings; a model takes numbers (parse or decode them first)",
                        what, xname);
    sy_shape xs = sy_tensor_shape(x), xp = per_sample(x), in = model_input_shape_at(m, i);
    if (xs.rank < 1 || fit_samples(x) == 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s %s holds no samples", what, xname,
                        sy_shape_format(&xs, a, sizeof a));
    if (!sy_shape_equal(&xp, &in)) {
        sy_shape want = keras_batch_shape(xs.dims[0], &in);
        bool same_count = sy_shape_count(&xp) == sy_shape_count(&in);
        char input[LAYER_NAME_MAX + 16] = "";
        if (m->n_inputs > 1) snprintf(input, sizeof input, "input '%s' of ", m->inputs[i].name);
        return sy_error(SY_ERR_SHAPE, "%s: %s has shape %s but %smodel '%s' expects %s%s%s", what,
                        xname, sy_shape_format(&xs, a, sizeof a), input, m->name,
                        keras_shape_str(&in, b, sizeof b),
                        same_count ? "; the sizes agree: reshape it to " : "",
                        same_count ? sy_shape_format(&want, b, sizeof b) : "");
    }
    const model_layer *first = model_first_layer_of(m, i);
    if (first && first->cfg.kind == SY_LAYER_EMBEDDING) { /* word indices */
        int64_t n = sy_tensor_count(x), vocab = first->cfg.input_dim;
        for (int64_t k = 0; k < n; k++) {
            double v = sy_tensor_get(x, k);
            if (!(v >= 0 && v < (double)vocab && v == floor(v)))
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: %s[%lld] = %g is not a word index in [0, %lld) for layer '%s' "
                                "(Embedding with "
                                "input_dim %lld)",
                                what, xname, (long long)k, v, (long long)vocab, first->name,
                                (long long)vocab);
        }
    }
    return SY_OK;
}

/* y, a label array, against output j's loss. */
static sy_status check_labels(const sy_model *m, const char *what, const char *yname, int32_t j,
                              const sy_tensor *y) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX], c[SY_SHAPE_STR_MAX];
    if (sy_tensor_dtype(y) == SY_STRING)
        return sy_error(SY_ERR_DTYPE,
                        "%s: %s holds strings; a model takes numbers (parse or decode them first)",
                        what, yname);
    const model_head *h = &m->heads[j];
    sy_shape yp = per_sample(y), want = model_label_shape(m, j), out = model_output_shape_at(m, j);
    char output[LAYER_NAME_MAX + 16] = "the output";
    if (m->n_outputs > 1) snprintf(output, sizeof output, "output '%s'", model_output_name(m, j));
    bool sparse = h->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE;
    if (sy_tensor_shape(y).rank < 1 || !same_up_to_trailing_one(&yp, &want)) {
        sy_shape whole = sy_tensor_shape(y);
        return sy_error(SY_ERR_SHAPE,
                        "%s: %s has shape %s but the loss %s on %s %s takes %s per sample%s", what,
                        yname, sy_shape_format(&whole, a, sizeof a), h->loss_name, output,
                        keras_shape_str(&out, b, sizeof b), sy_shape_format(&want, c, sizeof c),
                        sparse                ? " (class indices)"
                        : yp.rank < want.rank ? ""
                                              : " (one target per output)");
    }
    if (sparse) {
        int64_t classes = out.dims[out.rank - 1], n = sy_tensor_count(y);
        for (int64_t i = 0; i < n; i++) {
            double v = sy_tensor_get(y, i);
            if (h->args.has_ignore_class && v == (double)h->args.ignore_class)
                continue; /* issue 17 */
            if (!(v >= 0 && v < (double)classes && v == floor(v))) {
                if (m->n_outputs > 1)
                    return sy_error(SY_ERR_INVALID_ARGUMENT,
                                    "%s: %s[%lld] = %g is not a class index in [0, %lld) for the "
                                    "%lld-way output '%s' "
                                    "of model '%s'",
                                    what, yname, (long long)i, v, (long long)classes,
                                    (long long)classes, model_output_name(m, j), m->name);
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: %s[%lld] = %g is not a class index in [0, %lld) for the "
                                "%lld-way output of model '%s'",
                                what, yname, (long long)i, v, (long long)classes,
                                (long long)classes, m->name);
            }
        }
    }
    return SY_OK;
}

/* "a, b": the model's input names, or its output names. */
void fit_io_names(const sy_model *m, bool outputs, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < (outputs ? m->n_outputs : m->n_inputs) && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                                outputs ? model_output_name(m, i) : m->inputs[i].name);
}

/* The arrays given to fit, evaluate or predict: n_x of them for the
 * model's inputs (named xname), n_y (when y is given) for its outputs'
 * labels; each checked against its input or output, and every one with
 * as many samples. */
sy_status fit_check_data(const sy_model *m, const char *what, const char *xname,
                         const sy_tensor *const *x, int32_t n_x, const char *yname,
                         const sy_tensor *const *y, int32_t n_y) {
    char names[1024], a[64];
    if (n_x != m->n_inputs || !x) {
        fit_io_names(m, false, names, sizeof names);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: model '%s' expects %d input array%s (%s), but it received %d (%s)",
                        what, m->name, m->n_inputs, m->n_inputs == 1 ? "" : "s", names, x ? n_x : 0,
                        xname);
    }
    if (y && n_y != m->n_outputs) {
        fit_io_names(m, true, names, sizeof names);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: model '%s' has %d output%s (%s) and takes a label array for each, but "
                        "it received %d (%s)",
                        what, m->name, m->n_outputs, m->n_outputs == 1 ? "" : "s", names, n_y,
                        yname);
    }
    for (int32_t i = 0; i < n_x; i++) {
        if (!x[i])
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what,
                            array_name(xname, i, n_x, a, sizeof a));
        sy_status st = check_input(m, what, array_name(xname, i, n_x, a, sizeof a), i, x[i]);
        if (st) return st;
    }
    for (int32_t j = 0; y && j < n_y; j++) {
        if (!y[j])
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what,
                            array_name(yname, j, n_y, a, sizeof a));
        sy_status st = check_labels(m, what, array_name(yname, j, n_y, a, sizeof a), j, y[j]);
        if (st) return st;
    }
    bool same = true;
    for (int32_t i = 1; i < n_x; i++) same &= fit_samples(x[i]) == fit_samples(x[0]);
    for (int32_t j = 0; y && j < n_y; j++) same &= fit_samples(y[j]) == fit_samples(x[0]);
    if (same) return SY_OK;
    if (n_x == 1 && n_y == 1)
        return sy_error(SY_ERR_SHAPE, "%s: %s has %lld samples but %s has %lld", what, xname,
                        (long long)fit_samples(x[0]), yname, (long long)fit_samples(y[0]));
    /* Keras's "Data cardinality is ambiguous" */
    size_t len = (size_t)snprintf(names, sizeof names, "%s sizes:", xname);
    for (int32_t i = 0; i < n_x && len < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s %lld", i ? "," : "",
                                (long long)fit_samples(x[i]));
    if (y && len < sizeof names)
        len += (size_t)snprintf(names + len, sizeof names - len, "; %s sizes:", yname);
    for (int32_t j = 0; y && j < n_y && len < sizeof names; j++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s %lld", j ? "," : "",
                                (long long)fit_samples(y[j]));
    return sy_error(
        SY_ERR_SHAPE,
        "%s: data cardinality is ambiguous: %s; make sure all arrays contain the same number "
        "of samples",
        what, names);
}
