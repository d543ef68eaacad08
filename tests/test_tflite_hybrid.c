/*
 * test_tflite_hybrid.c - dynamic-range quantization end to end without
 * TensorFlow (issue 18; docs/design/tflite.md, "Dynamic-range
 * quantization"): a small IMDB-shaped model -- Embedding -> LSTM ->
 * Dense(relu) -> Dense(sigmoid) -- quantized by sy_lite_quantize (chosen
 * automatically: the model has an Embedding), the file's operators, int8
 * weights and scales checked, then run by systolic's hybrid kernels
 * (sy_lite_model_predict: HLSTM, HFULLY_CONNECTED) and compared with the
 * float model's predict within the quantization error; batches of any size
 * give each row the same outputs. Then what is refused, by name: a GRU, a
 * masked Embedding, an LSTM too small for the converter to quantize, a file
 * whose LSTM is time-major. Seconds; run under ASan and TSan too.
 */
#include "check.h"

#include "systolic.h"
#include "io/io_internal.h"
#include "lite/lite_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VOCAB 500
#define LEN 12
#define ROWS 13

static sy_model *imdb_like(int32_t lstm_units, bool mask_zero, bool gru) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("imdb_like", &m));
    if (!m) return NULL;
    sy_layer e = sy_layer_embedding(VOCAB, 32);
    e.input_length = LEN;
    e.mask_zero = mask_zero;
    sy_layer r = gru ? sy_layer_gru(lstm_units) : sy_layer_lstm(lstm_units), h = sy_layer_dense(64),
             o = sy_layer_dense(1);
    h.activation = SY_ACTIVATION_RELU;
    o.activation = SY_ACTIVATION_SIGMOID;
    CHECK_OK(sy_model_add(m, &e));
    CHECK_OK(sy_model_add(m, &r));
    CHECK_OK(sy_model_add(m, &h));
    CHECK_OK(sy_model_add(m, &o));
    sy_model_set_seed(m, 18);
    CHECK_OK(sy_model_build(m, sy_shape_of(1, (int64_t)LEN)));
    /* as trained weights are: embeddings spread to about +-1, nonzero biases */
    uint32_t s = 18;
    for (int32_t v = 0; v < sy_vars_count(m->vars); v++) {
        float *d = sy_vars_data(m->vars, v);
        sy_shape sh = sy_vars_shape(m->vars, v);
        bool emb = strstr(sy_vars_name(m->vars, v), "embeddings") != NULL;
        for (int64_t i = 0; i < sy_shape_count(&sh); i++) {
            s = s * 1664525u + 1013904223u;
            float noise = (float)(s >> 8) / (float)(1u << 24) - 0.5f;
            if (emb) d[i] *= 20.0f;
            else if (sh.rank == 1) d[i] += 0.5f * noise;
            else d[i] *= 1.5f;
        }
    }
    return m;
}

static sy_tensor *word_ids(void) {
    sy_tensor *x = NULL;
    CHECK_OK(sy_tensor_new(SY_I32, sy_shape_of(2, (int64_t)ROWS, (int64_t)LEN), &x));
    if (!x) return NULL;
    int32_t *d = sy_tensor_data(x);
    uint32_t s = 7;
    for (int64_t i = 0; i < ROWS * LEN; i++) {
        s = s * 1664525u + 1013904223u;
        d[i] = (int32_t)(1 + (s >> 8) % (VOCAB - 1));
    }
    for (int r = 0; r < ROWS; r += 3) /* pad_sequences' zeros in front of short reviews */
        for (int t = 0; t < r % LEN; t++) d[r * LEN + t] = 0;
    return x;
}

static void check_file(const char *path, sy_model *m) {
    io_tflite *t = NULL;
    CHECK_OK(io_tflite_read(path, &t));
    if (!t) return;
    const io_tflite_op *lstm = NULL, *fc = NULL;
    for (int32_t i = 0; i < t->n_ops; i++) {
        if (t->ops[i].builtin == 44) lstm = &t->ops[i];
        if (t->ops[i].builtin == 9 && !fc) fc = &t->ops[i];
    }
    CHECK(lstm && lstm->n_inputs == 24 && lstm->asymmetric_quantize_inputs && lstm->activation == 4,
          "an UNIDIRECTIONAL_SEQUENCE_LSTM of 24 inputs, asymmetric inputs, tanh");
    float *kernel = NULL;
    for (int32_t v = 0; v < sy_vars_count(m->vars); v++)
        if (strstr(sy_vars_name(m->vars, v), "lstm_cell/kernel")) kernel = sy_vars_data(m->vars, v);
    if (lstm && kernel) {
        /* the forget gate's input weights: (units, features) = kernel[:, U:2U]^T, scale max|w| / 127 */
        const io_tflite_tensor *w = &t->tensors[lstm->inputs[2]];
        CHECK(w->type == IO_TFLITE_INT8 && w->quant_count == 1 && w->zero_point[0] == 0 && w->rank == 2 &&
                  w->shape[0] == 32 && w->shape[1] == 32,
              "the forget gate's weights int8 (32, 32), one scale, zero point 0");
        float amax = 0;
        for (int i = 0; i < 32; i++)
            for (int u = 0; u < 32; u++) amax = fmaxf(amax, fabsf(kernel[i * 128 + 32 + u]));
        CHECK_CLOSE(w->scale[0], amax / 127, 1e-6, 0, "the forget gate's weight scale");
        if (w->data && w->quant_count == 1) {
            bool rounded = true;
            for (int u = 0; u < 32; u++)
                for (int i = 0; i < 32; i++) {
                    double q = (double)kernel[i * 128 + 32 + u] / (double)w->scale[0];
                    rounded &= fabs(q - ((const int8_t *)w->data)[u * 32 + i]) <= 0.5 + 1e-6;
                }
            CHECK(rounded, "the forget gate's int8 weights are round(w / scale)");
        }
        CHECK(t->tensors[lstm->inputs[18]].is_variable && t->tensors[lstm->inputs[19]].is_variable,
              "the LSTM's states are variable tensors");
    }
    CHECK(fc && t->tensors[fc->inputs[1]].type == IO_TFLITE_INT8 && fc->asymmetric_quantize_inputs,
          "Dense(64)'s 2,048 weights int8, a hybrid FULLY_CONNECTED");
    io_tflite_free(t);
}

static void check_quantize_and_run(void) {
    sy_model *m = imdb_like(32, false, false);
    sy_tensor *x = word_ids(), *yf = NULL, *y5 = NULL, *y13 = NULL;
    if (!m || !x) return;
    CHECK(sy_lite_quantize_dynamic(m, NULL), "an Embedding model is quantized dynamic-range");
    CHECK_OK(sy_model_predict(m, x, NULL, &yf));
    char dir[] = "/tmp/systolic-hybrid-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/imdb_like.tflite", dir);
    sy_lite_quantize_report r;
    CHECK_OK(sy_lite_quantize(m, NULL, NULL, path, &r));
    CHECK(r.dynamic_range && r.samples == 0, "dynamic-range, no calibration");
    CHECK(r.n_ops == 8 && !strcmp(r.ops, "CAST GATHER DEQUANTIZE UNIDIRECTIONAL_SEQUENCE_LSTM STRIDED_SLICE FULLY_CONNECTED LOGISTIC"),
          "%d ops: %s", r.n_ops, r.ops);
    check_file(path, m);
    sy_lite_model *lm = NULL;
    CHECK_OK(sy_lite_model_load(path, &lm));
    if (lm && yf) {
        CHECK(sy_lite_model_vocabulary(lm) == VOCAB, "the embedding's %d rows", VOCAB);
        CHECK_OK(sy_lite_model_predict(lm, x, 5, &y5)); /* batches of 5, 5 and 3 */
        CHECK_OK(sy_lite_model_predict(lm, x, 13, &y13));
        if (y5 && y13) {
            const float *a = sy_tensor_data(y5), *b = sy_tensor_data(y13), *f = sy_tensor_data(yf);
            double worst = 0, mean = 0;
            for (int i = 0; i < ROWS; i++) {
                CHECK(a[i] == b[i], "row %d: %.9g in a batch of 5, %.9g in one of 13", i, a[i], b[i]);
                worst = fmax(worst, fabs(a[i] - f[i]));
                mean += fabs(a[i] - f[i]) / ROWS;
            }
            /* int8 weights (1/254 of each matrix's largest) and rows quantized at each step: the sigmoid's
             * output moves by about 1e-3 here; 0.02 is far above that and far below a wrong gate's effect */
            CHECK(worst < 0.02 && worst > 0, "hybrid vs float outputs: max |diff| %.3g (mean %.3g)", worst, mean);
            fprintf(stderr, "hybrid vs float: %d outputs, max |diff| %.3g, mean %.3g\n", ROWS, worst, mean);
        }
        /* a word id outside the table: refused by the gather, never read out of bounds */
        ((int32_t *)sy_tensor_data(x))[3] = VOCAB;
        sy_tensor *bad = NULL;
        CHECK_ERR(sy_lite_model_predict(lm, x, 4, &bad), SY_ERR_INVALID_ARGUMENT, "index 500");
        sy_tensor_free(bad);
    }
    sy_lite_model_free(lm);

    /* a time-major LSTM in a file: refused by name when loaded */
    io_tflite *t = NULL;
    CHECK_OK(io_tflite_read(path, &t));
    if (t) {
        for (int32_t i = 0; i < t->n_ops; i++)
            if (t->ops[i].builtin == 44) t->ops[i].time_major = 1;
        char tm[300];
        snprintf(tm, sizeof tm, "%s/time_major.tflite", dir);
        CHECK_OK(io_tflite_write(tm, t, NULL));
        lm = NULL;
        CHECK_ERR(sy_lite_model_load(tm, &lm), SY_ERR_UNSUPPORTED, "UNIDIRECTIONAL_SEQUENCE_LSTM", "time_major");
        sy_lite_model_free(lm);
        unlink(tm);
        io_tflite_free(t);
    }
    unlink(path);
    rmdir(dir);
    sy_tensor_free(yf);
    sy_tensor_free(y5);
    sy_tensor_free(y13);
    sy_tensor_free(x);
    sy_model_free(m);
}

static void check_refusals(void) {
    sy_model *m = imdb_like(32, false, true);
    if (m) CHECK_ERR(sy_lite_quantize_check(m, NULL), SY_ERR_UNSUPPORTED, "'gru' (GRU)", "Embedding (first), LSTM");
    sy_model_free(m);
    m = imdb_like(32, true, false);
    if (m) CHECK_ERR(sy_lite_quantize_check(m, NULL), SY_ERR_UNSUPPORTED, "(Embedding)", "mask_zero");
    sy_model_free(m);
    m = imdb_like(8, false, false); /* gates of 8 x 32 and 8 x 8: under 1,024 elements, left float by the converter */
    if (m) CHECK_ERR(sy_lite_quantize_check(m, NULL), SY_ERR_UNSUPPORTED, "(LSTM)", "1,024");
    sy_model_free(m);
}

/* --dynamic-range on a float model of Dense layers: hybrid FULLY_CONNECTEDs (the first's 2,048 weights int8, per
 * tensor) and a float one, run against the float predict */
static void check_dense_only(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("mlp", &m));
    if (!m) return;
    sy_layer h = sy_layer_dense(64), o = sy_layer_dense(3);
    h.input_shape = sy_shape_of(1, (int64_t)32);
    h.activation = SY_ACTIVATION_RELU;
    CHECK_OK(sy_model_add(m, &h));
    CHECK_OK(sy_model_add(m, &o));
    sy_model_set_seed(m, 18);
    CHECK_OK(sy_model_build(m, sy_shape_of(1, (int64_t)32)));
    sy_lite_quantize_options q = sy_lite_quantize_options_default();
    CHECK(!sy_lite_quantize_dynamic(m, &q), "a float Dense model is quantized full-integer by default");
    q.dynamic_range = true;
    sy_tensor *x = NULL, *yf = NULL, *y = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)7, (int64_t)32), &x));
    for (int64_t i = 0; x && i < 7 * 32; i++) ((float *)sy_tensor_data(x))[i] = sinf((float)i * 0.37f) * 2.0f;
    char path[] = "/tmp/systolic-hybrid-mlp-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) close(fd);
    sy_lite_quantize_report r;
    sy_lite_model *lm = NULL;
    if (x) CHECK_OK(sy_model_predict(m, x, NULL, &yf));
    CHECK_OK(sy_lite_quantize(m, NULL, &q, path, &r));
    CHECK(r.dynamic_range && r.n_ops == 2 && !strcmp(r.ops, "FULLY_CONNECTED"), "%d ops: %s", r.n_ops, r.ops);
    CHECK_OK(sy_lite_model_load(path, &lm));
    if (lm && x && yf && !sy_lite_model_predict(lm, x, 4, &y)) {
        double worst = 0;
        for (int i = 0; i < 21; i++)
            worst = fmax(worst, fabs(((float *)sy_tensor_data(y))[i] - ((float *)sy_tensor_data(yf))[i]));
        CHECK(worst < 0.05 && worst > 0, "hybrid vs float Dense outputs: max |diff| %.3g", worst);
    }
    sy_lite_model_free(lm);
    unlink(path);
    sy_tensor_free(x);
    sy_tensor_free(yf);
    sy_tensor_free(y);
    sy_model_free(m);
}

int main(void) {
    check_quantize_and_run();
    check_dense_only();
    check_refusals();
    return check_report("test_tflite_hybrid");
}
