/*
 * lite.c - `systolic predict|evaluate MODEL.tflite` (issue 18): an int8
 * TFLite model run by systolic's int8 path (sy_lite_model, src/lite/).
 *
 *   predict  --input X.npy --output Y.npy: X of the model's input dtype
 *            (float32, or int8 -- NumPy's int8 arrays, read as int32, must
 *            hold int8 values) and shape (N, input shape...); Y of the
 *            output's dtype, what TFLite's interpreter gives.
 *   evaluate --dataset fashion_mnist|mnist|imdb: the test split's images as
 *            `systolic evaluate MODEL.h5 --dataset` feeds a Keras model and
 *            as the tutorial CNN takes them (raw pixels 0-255 in float32),
 *            so that a model `systolic quantize` made scores what its float
 *            model scores; quantized with the
 *            input's scale and zero point for an int8-input model as
 *            TFLite's QUANTIZE would; accuracy (the output's argmax against
 *            the label) and, when the output is a probability vector, the
 *            loss Keras's sparse_categorical_crossentropy gives for it.
 *            imdb (a dynamic-range model over word ids): the test reviews
 *            as int32 word ids below the model's embedding rows, padded or
 *            cut to its input length; one sigmoid output scored as Keras's
 *            binary accuracy (> 0.5) and binary crossentropy.
 *
 * --tpu picks the device (sy_lite_model_set_device): local or cpu (a
 * kernel thread per core; the default, after $SYSTOLIC_TPU), cpu:N (N
 * threads), or sim:v1, the emulated TPU v1: the model compiled to a
 * program for --batch-size (default 32) and run on the emulator, the host
 * running what the lowering leaves to it; the same outputs bit for bit,
 * then a line of the program's emulated time (its runs' counters summed;
 * `systolic profile MODEL --tpu sim:v1` prints Table 3's rows). A model the
 * lowering does not take is refused naming the operator (exit 1), as
 * `systolic compile` refuses it; the Cloud TPU slices (sim:v2-8, ...) are
 * refused too. evaluate --steps N scores the first N batches only.
 */
#include "cli_internal.h"

#include "backend/backend_internal.h" /* SY_KERAS_EPSILON */

#include <math.h>
#include <string.h>

static int lite_fail(const char *command) {
    fprintf(stderr, "systolic %s: %s\n", command, sy_last_error());
    return 1;
}

/* On sim:v1, after the results: the program's emulated time over all its runs. */
static void print_tpu1(const sy_lite_model *m, const lite_cli_opts *o) {
    sy_tpu1_counters c;
    int64_t runs, batch;
    if (o->verbose < 1 || !sy_lite_model_tpu1_counters(m, &c, &runs, &batch)) return;
    double t = c.cycles > 0 ? c.cycles : 1;
    bool ms = c.seconds >= 1e-3;
    printf("TPU v1 (emulated): %lld run%s of a batch-%lld program: %.0f cycles, %.*f %s at 700 MHz, %.3g TeraOps/s, "
           "%.1f%% array active, %.1f%% weight stall (Table 3's rows: systolic profile %s --tpu sim:v1 --batch-size "
           "%lld)\n",
           (long long)runs, runs == 1 ? "" : "s", (long long)batch, c.cycles, ms ? 2 : 1, c.seconds * (ms ? 1e3 : 1e6),
           ms ? "ms" : "us", c.tops,
           100 * c.array_active_cycles / t, 100 * c.weight_stall_cycles / t, o->model, (long long)batch);
}

static int lite_predict(const char *command, sy_lite_model *m, const lite_cli_opts *o) {
    if (o->n_inputs != 1 || !o->output) {
        fprintf(stderr, "systolic %s: a TFLite model predicts with --input FILE.npy --output FILE.npy\n", command);
        return 2;
    }
    const char *path = o->input;
    const char *eq = strchr(path, '=');
    if (eq && !strstr(path, ".npy=")) path = eq + 1; /* [NAME=]FILE as for Keras models */
    sy_tensor *x = NULL, *y = NULL;
    if (sy_npy_read(path, &x)) return lite_fail(command);
    sy_status st = sy_lite_model_predict(m, x, o->batch_size, &y);
    sy_tensor_free(x);
    if (st) return lite_fail(command);
    st = sy_npy_write(o->output, y);
    if (!st) {
        sy_shape s = sy_tensor_shape(y);
        char buf[SY_SHAPE_STR_MAX];
        printf("wrote %s: %s %s\n", o->output, sy_dtype_name(sy_tensor_dtype(y)), sy_shape_format(&s, buf, sizeof buf));
        print_tpu1(m, o);
    }
    sy_tensor_free(y);
    return st ? lite_fail(command) : 0;
}

/* The test split --dataset names, as the model's input takes it: images (raw pixels 0-255 as float32, or
 * quantized with the input's scale and zero point as TFLite's QUANTIZE would for an int8 input), or IMDB's
 * reviews as int32 word ids (words below the embedding table's rows, each review padded or cut to the
 * input's length, as the Keras tutorial prepares them). *x (N, input shape...) and *labels (N) uint8. */
static int lite_test_split(const char *command, sy_lite_model *m, const lite_cli_opts *o, sy_tensor **x,
                           sy_tensor **labels) {
    sy_lite_io in;
    sy_lite_model_io(m, false, &in);
    int64_t per = 1;
    for (int i = 1; i < in.shape.rank; i++) per *= in.shape.dims[i];
    char s[SY_SHAPE_STR_MAX];
    bool imdb = !strcmp(o->dataset, "imdb");
    if (imdb && (in.dtype == SY_I8 || in.shape.rank != 2 || sy_lite_model_vocabulary(m) < 1)) {
        fprintf(stderr, "systolic %s: --dataset imdb gives word ids, but '%s' takes %s inputs of shape %s that index "
                "no embedding table\n", command, o->model, sy_dtype_name(in.dtype), sy_shape_format(&in.shape, s, sizeof s));
        return 1;
    }
    if (!imdb && per != 784) {
        fprintf(stderr, "systolic %s: --dataset %s gives 28x28 images (784 values) but '%s' takes inputs of shape %s\n",
                command, o->dataset, o->model, sy_shape_format(&in.shape, s, sizeof s));
        return 1;
    }
    sy_data_split d;
    sy_status st = imdb ? builtin_imdb_data((int32_t)sy_lite_model_vocabulary(m), per, &d)
                   : !strcmp(o->dataset, "mnist") ? sy_mnist_load_data(&d) : sy_fashion_mnist_load_data(&d);
    if (st) return lite_fail(command);
    int64_t n = sy_tensor_count(d.y_test), batch = o->batch_size > 0 ? o->batch_size : 32;
    if (o->steps > 0 && o->steps < (n + batch - 1) / batch) n = o->steps * batch; /* Keras's steps: the first batches */
    sy_shape xs = in.shape;
    xs.dims[0] = n;
    if (imdb && in.dtype == SY_I32 && n == sy_tensor_count(d.y_test)) { /* already int32 (N, length) */
        *x = d.x_test;
        d.x_test = NULL;
    } else if (imdb && in.dtype == SY_I32) { /* --steps: the first n reviews */
        if (!(st = sy_tensor_new_uninit(SY_I32, xs, x)))
            memcpy(sy_tensor_data(*x), sy_tensor_data(d.x_test), (size_t)(n * per) * sizeof(int32_t));
    } else if (imdb) { /* a float input the model casts to word ids, as Keras's default float32 input is fed */
        if (!(st = sy_tensor_new(SY_F32, xs, x)))
            for (int64_t i = 0; i < n * per; i++)
                ((float *)sy_tensor_data(*x))[i] = (float)((const int32_t *)sy_tensor_data(d.x_test))[i];
    } else if (!(st = sy_tensor_new(in.dtype, xs, x))) {
        const uint8_t *px = sy_tensor_data(d.x_test);
        for (int64_t i = 0; i < n * per; i++) {
            float v = (float)px[i]; /* raw pixels, as a Keras model file gets them */
            if (in.dtype == SY_F32) {
                ((float *)sy_tensor_data(*x))[i] = v;
                continue;
            }
            float q = roundf(v / in.scale) + (float)in.zero_point; /* TFLite's QUANTIZE */
            ((int8_t *)sy_tensor_data(*x))[i] = (int8_t)(q < -128 ? -128 : q > 127 ? 127 : q);
        }
    }
    *labels = d.y_test;
    d.y_test = NULL;
    sy_data_split_free(&d);
    return st ? lite_fail(command) : 0;
}

static int lite_evaluate(const char *command, sy_lite_model *m, const lite_cli_opts *o) {
    if (!o->dataset || (strcmp(o->dataset, "fashion_mnist") && strcmp(o->dataset, "mnist") && strcmp(o->dataset, "imdb"))) {
        fprintf(stderr, "systolic %s: a TFLite model is evaluated with --dataset fashion_mnist, mnist or imdb\n", command);
        return 2;
    }
    sy_lite_io out;
    sy_lite_model_io(m, true, &out);
    sy_tensor *x = NULL, *y = NULL, *label_t = NULL;
    int rc = lite_test_split(command, m, o, &x, &label_t);
    if (rc) return rc;
    sy_status st = sy_lite_model_predict(m, x, o->batch_size, &y);
    sy_tensor_free(x);
    if (st) {
        sy_tensor_free(label_t);
        return lite_fail(command);
    }
    int64_t n = sy_tensor_shape(y).dims[0]; /* the first n labels: --steps may have taken fewer rows */
    int64_t classes = sy_tensor_count(y) / n, correct = 0;
    double loss = 0;
    bool probs = true; /* the output a probability vector: every row non-negative, summing to about 1 */
    const uint8_t *labels = sy_tensor_data(label_t);
    double *row = sy_malloc((size_t)classes * sizeof *row);
    for (int64_t i = 0; i < n && row; i++) {
        double sum = 0;
        int64_t best = 0;
        for (int64_t c = 0; c < classes; c++) {
            double v = out.dtype == SY_F32 ? ((const float *)sy_tensor_data(y))[i * classes + c]
                                           : (double)out.scale * (((const int8_t *)sy_tensor_data(y))[i * classes + c] -
                                                                  out.zero_point);
            row[c] = v;
            sum += v;
            if (v > row[best]) best = c;
            probs &= v >= 0;
        }
        if (classes == 1) { /* one sigmoid unit: Keras's binary accuracy (> 0.5) and binary crossentropy */
            double p = row[0] < SY_KERAS_EPSILON ? SY_KERAS_EPSILON : row[0] > 1 - SY_KERAS_EPSILON ? 1 - SY_KERAS_EPSILON : row[0];
            correct += (row[0] > 0.5) == (labels[i] != 0);
            probs &= row[0] <= 1;
            loss -= labels[i] ? log(p + SY_KERAS_EPSILON) : log(1 - p + SY_KERAS_EPSILON);
            continue;
        }
        correct += best == labels[i];
        probs &= fabs(sum - 1) < 0.1;
        /* Keras's sparse_categorical_crossentropy on probabilities: scaled to sum 1, clipped to [eps, 1 - eps] */
        double p = sum > 0 ? row[labels[i]] / sum : 0;
        p = p < SY_KERAS_EPSILON ? SY_KERAS_EPSILON : p > 1 - SY_KERAS_EPSILON ? 1 - SY_KERAS_EPSILON : p;
        loss -= log(p);
    }
    sy_free(row);
    sy_tensor_free(y);
    sy_tensor_free(label_t);
    int64_t batch = o->batch_size > 0 ? o->batch_size : 32;
    printf("%lld/%lld - ", (long long)((n + batch - 1) / batch), (long long)((n + batch - 1) / batch));
    if (probs) printf("loss: %.4f - ", loss / (double)n);
    printf("accuracy: %.4f\n", (double)correct / (double)n);
    print_tpu1(m, o);
    return 0;
}

int lite_cli_run(const char *command, const lite_cli_opts *o) {
    bool predict = !strcmp(command, "predict"), evaluate = !strcmp(command, "evaluate");
    if (!predict && !evaluate) {
        fprintf(stderr, "systolic %s: '%s' is a TFLite model: it runs with systolic predict and systolic evaluate\n",
                command, o->model);
        return 2;
    }
    sy_lite_model *m;
    if (sy_lite_model_load(o->model, &m)) return lite_fail(command);
    sy_status st = sy_lite_model_set_device(m, o->tpu);
    if (st) { /* a malformed spec is a usage error; a device or lowering refused, a failure */
        int rc = st == SY_ERR_INVALID_ARGUMENT ? flag_refused(command, o->tpu && *o->tpu ? "--tpu" : "--tpu (from $SYSTOLIC_TPU)")
                                               : lite_fail(command);
        sy_lite_model_free(m);
        return rc;
    }
    int rc = predict ? lite_predict(command, m, o) : lite_evaluate(command, m, o);
    sy_lite_model_free(m);
    return rc;
}
