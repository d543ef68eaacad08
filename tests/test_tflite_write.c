/*
 * test_tflite_write.c - the TFLite writer (src/io/tflite_write.cc) and the
 * quantizer (src/lite/quantize.c), issue 18:
 *
 *   test_tflite_write ROOT [FILE.tflite...]
 *
 * The writer is the reader's inverse: each file TensorFlow's converter
 * wrote (tests/data/tflite/tiny_dense.tflite; at test time the
 * tools/tflite_models.py ones, tests/quantize_tensorflow.sh) read, encoded
 * and read again gives every field back, constant bytes included. A bad
 * index is refused before anything is written. The quantizer on small
 * models built here: a Conv2D -> BatchNormalization -> ReLU -> Flatten ->
 * Dense -> softmax model becomes the operators TFLite's converter makes
 * (the BN folded, the ReLU fused, per-channel weight scales
 * max|w| / 127); a layer it has no builtin for is refused naming the
 * layer; a path it cannot write leaves nothing behind, and an existing
 * file untouched.
 */
#include "io/io_internal.h"
#include "lite/lite_internal.h"
#include "check.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool same_tensor(const io_tflite_tensor *a, const io_tflite_tensor *b) {
    if (strcmp(a->name, b->name) || a->type != b->type || a->rank != b->rank || a->quant_count != b->quant_count ||
        a->data_size != b->data_size || !a->data != !b->data || a->is_variable != b->is_variable)
        return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    if (a->data && memcmp(a->data, b->data, a->data_size)) return false;
    if (a->quant_count > 1 && a->quant_dim != b->quant_dim) return false;
    for (int32_t i = 0; i < a->quant_count; i++)
        if (a->scale[i] != b->scale[i] || a->zero_point[i] != b->zero_point[i]) return false;
    return true;
}

static bool same_ints(const int32_t *a, const int32_t *b, int32_t n) { return !n || !memcmp(a, b, (size_t)n * 4); }

static bool same_op(const io_tflite_op *a, const io_tflite_op *b) {
    return a->builtin == b->builtin && a->version == b->version && a->n_inputs == b->n_inputs &&
           a->n_outputs == b->n_outputs && same_ints(a->inputs, b->inputs, a->n_inputs) &&
           same_ints(a->outputs, b->outputs, a->n_outputs) && a->padding == b->padding && a->stride_w == b->stride_w &&
           a->stride_h == b->stride_h && a->dilation_w == b->dilation_w && a->dilation_h == b->dilation_h &&
           a->filter_w == b->filter_w && a->filter_h == b->filter_h && a->depth_multiplier == b->depth_multiplier &&
           a->activation == b->activation && a->keep_dims == b->keep_dims && a->weights_format == b->weights_format &&
           a->beta == b->beta && a->asymmetric_quantize_inputs == b->asymmetric_quantize_inputs &&
           a->time_major == b->time_major && a->cell_clip == b->cell_clip && a->proj_clip == b->proj_clip &&
           a->axis == b->axis && a->batch_dims == b->batch_dims && a->begin_mask == b->begin_mask &&
           a->end_mask == b->end_mask && a->ellipsis_mask == b->ellipsis_mask && a->new_axis_mask == b->new_axis_mask &&
           a->shrink_axis_mask == b->shrink_axis_mask && a->offset == b->offset && !a->custom_code == !b->custom_code &&
           (!a->custom_code || !strcmp(a->custom_code, b->custom_code));
}

/* decode(encode(m)) == m, field by field. */
static void check_round_trip(const char *path) {
    io_tflite *m = NULL, *back = NULL;
    CHECK_OK(io_tflite_read(path, &m));
    if (!m) return;
    uint8_t *bytes = NULL;
    size_t n = 0;
    char err[512];
    CHECK(io_tflite_encode(m, NULL, &bytes, &n, err, sizeof err) == 0, "%s: encode: %s", path, err);
    if (bytes) CHECK_OK(io_tflite_parse(bytes, n, "the encoded model", &back));
    if (back) {
        CHECK(back->n_tensors == m->n_tensors && back->n_ops == m->n_ops && back->n_inputs == m->n_inputs &&
                  back->n_outputs == m->n_outputs && back->version == m->version,
              "%s: %d tensors, %d ops back of %d, %d", path, back->n_tensors, back->n_ops, m->n_tensors, m->n_ops);
        for (int32_t i = 0; i < m->n_tensors && i < back->n_tensors; i++)
            CHECK(same_tensor(&m->tensors[i], &back->tensors[i]), "%s: tensor %d '%s' differs after the round trip",
                  path, i, m->tensors[i].name);
        for (int32_t i = 0; i < m->n_ops && i < back->n_ops; i++)
            CHECK(same_op(&m->ops[i], &back->ops[i]), "%s: operator %d (%s) differs after the round trip", path, i,
                  io_tflite_op_name(m->ops[i].builtin));
        CHECK(same_ints(m->inputs, back->inputs, m->n_inputs) && same_ints(m->outputs, back->outputs, m->n_outputs),
              "%s: inputs and outputs differ", path);
    }
    /* an operator naming a tensor the model has not is refused, nothing built */
    if (m->n_ops > 0) {
        int32_t keep = m->ops[0].inputs[0];
        m->ops[0].inputs[0] = m->n_tensors;
        uint8_t *bad = NULL;
        CHECK(io_tflite_encode(m, NULL, &bad, &n, err, sizeof err) != 0 && !bad && strstr(err, "operator 0"),
              "a tensor index out of range: '%s'", err);
        m->ops[0].inputs[0] = keep;
    }
    sy_free(bytes);
    io_tflite_free(back);
    io_tflite_free(m);
}

/* Conv2D(4, 3x3) -> BatchNormalization -> ReLU -> MaxPooling2D -> Flatten -> Dropout -> Dense(3) -> softmax on
 * 8x8x1, its weights the seeded ones and BN statistics set apart from 0 and 1 so that folding matters. */
static sy_model *small_model(void) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("small", &m));
    if (!m) return NULL;
    sy_layer l = sy_layer_conv2d(4, 3, 3);
    l.input_shape = sy_shape_of(3, 8, 8, 1);
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_batch_normalization();
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_relu();
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_max_pooling2d(2, 2);
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_flatten();
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_dropout(0.5);
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_dense(3);
    CHECK_OK(sy_model_add(m, &l));
    l = sy_layer_activation(SY_ACTIVATION_SOFTMAX);
    CHECK_OK(sy_model_add(m, &l));
    sy_model_set_seed(m, 18);
    CHECK_OK(sy_model_build(m, sy_shape_of(3, 8, 8, 1)));
    for (int32_t v = 0; v < sy_vars_count(m->vars); v++) {
        const char *name = sy_vars_name(m->vars, v);
        float *d = sy_vars_data(m->vars, v);
        sy_shape s = sy_vars_shape(m->vars, v);
        for (int64_t i = 0; i < sy_shape_count(&s); i++) {
            if (strstr(name, "moving_mean")) d[i] = 0.1f * (float)(i + 1);
            if (strstr(name, "moving_variance")) d[i] = 0.5f + 0.25f * (float)i;
            if (strstr(name, "gamma")) d[i] = 1.5f - 0.2f * (float)i;
        }
    }
    return m;
}

static sy_tensor *samples(int64_t n) {
    sy_tensor *x = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(4, n, 8, 8, 1), &x));
    float *d = sy_tensor_data(x);
    uint32_t r = 18;
    for (int64_t i = 0; i < n * 64; i++) {
        r = r * 1664525u + 1013904223u;
        d[i] = (float)(r >> 8) / (float)(1u << 24) * 4.0f - 1.0f;
    }
    return x;
}

static bool dir_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n == 0;
}

static void check_quantize(void) {
    sy_model *m = small_model();
    sy_tensor *x = samples(64);
    if (!m || !x) return;
    char dir[] = "/tmp/systolic-qtest-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/small.tflite", dir);
    sy_lite_quantize_options o = sy_lite_quantize_options_default();
    o.batch_size = 16;
    sy_lite_quantize_report r;
    CHECK_OK(sy_lite_quantize(m, x, &o, path, &r));
    CHECK(r.samples == 64 && r.n_ops == 7, "%lld samples, %d ops", (long long)r.samples, r.n_ops);
    CHECK(!strcmp(r.ops, "QUANTIZE CONV_2D MAX_POOL_2D RESHAPE FULLY_CONNECTED SOFTMAX DEQUANTIZE"), "ops: %s", r.ops);
    io_tflite *t = NULL;
    CHECK_OK(io_tflite_read(path, &t));
    if (t && t->n_ops == 7) {
        const io_tflite_op *conv = &t->ops[1], *pool = &t->ops[2], *fc = &t->ops[4];
        CHECK(conv->activation == 1 && pool->activation == 0, "the ReLU after BN fuses into the conv: conv %d, pool %d",
              conv->activation, pool->activation);
        CHECK(pool->stride_h == 2 && pool->stride_w == 2 && pool->filter_h == 2,
              "MaxPooling2D(2)'s strides=None written as the pool size: strides %dx%d", pool->stride_h, pool->stride_w);
        const io_tflite_tensor *w = &t->tensors[conv->inputs[1]], *b = &t->tensors[conv->inputs[2]];
        const io_tflite_tensor *in = &t->tensors[conv->inputs[0]];
        CHECK(w->quant_count == 4 && w->quant_dim == 0 && w->shape[0] == 4 && w->shape[3] == 1,
              "conv weights per output channel: %d scales along %d", w->quant_count, w->quant_dim);
        /* the folded kernel: kernel * gamma / sqrt(var + eps), its max |w| / 127 the scale */
        float *kernel = NULL, *gamma = NULL, *var = NULL;
        for (int32_t v = 0; v < sy_vars_count(m->vars); v++) {
            const char *name = sy_vars_name(m->vars, v);
            if (strstr(name, "conv2d/kernel")) kernel = sy_vars_data(m->vars, v);
            if (strstr(name, "gamma")) gamma = sy_vars_data(m->vars, v);
            if (strstr(name, "moving_variance")) var = sy_vars_data(m->vars, v);
        }
        for (int c = 0; kernel && gamma && var && c < 4 && w->quant_count == 4; c++) {
            float amax = 0, mul = gamma[c] / sqrtf(var[c] + 0.001f);
            for (int p = 0; p < 9; p++) amax = fmaxf(amax, fabsf(kernel[p * 4 + c] * mul));
            CHECK_CLOSE(w->scale[c], amax / 127, 1e-6, 0, "channel %d's weight scale", c);
            CHECK_CLOSE(b->scale[c], in->scale[0] * w->scale[c], 1e-6, 0, "channel %d's bias scale", c);
            int8_t top = 0;
            for (int p = 0; p < 9; p++) {
                int8_t q = ((const int8_t *)w->data)[c * 9 + p];
                top = abs(q) > abs(top) ? q : top;
            }
            CHECK(abs(top) == 127, "channel %d's largest weight quantizes to +-127: %d", c, top);
        }
        const io_tflite_tensor *fw = &t->tensors[fc->inputs[1]];
        CHECK(fw->quant_count == 1 && fw->shape[0] == 3 && fw->shape[1] == 36, "Dense weights (3, 36), one scale: %d",
              fw->quant_count);
        const io_tflite_tensor *sm = &t->tensors[t->ops[5].outputs[0]];
        CHECK(sm->scale[0] == 1.0f / 256 && sm->zero_point[0] == -128, "softmax's output 1/256, -128");
        CHECK(t->tensors[t->inputs[0]].type == IO_TFLITE_FLOAT32, "float input by default");
    }
    io_tflite_free(t);

    /* systolic runs the file it wrote, with the same outputs on the calling thread and on a thread per core
     * (the kernels' parallel parts are fixed by the shapes); a device spec it cannot take is refused */
    {
        sy_lite_model *lm = NULL;
        sy_tensor *y1 = NULL, *y3 = NULL;
        CHECK_OK(sy_lite_model_load(path, &lm));
        if (lm) CHECK_OK(sy_lite_model_set_device(lm, "cpu:1"));
        if (lm) CHECK_OK(sy_lite_model_predict(lm, x, 16, &y1));
        if (lm) CHECK_OK(sy_lite_model_set_device(lm, "local"));
        if (lm) CHECK_OK(sy_lite_model_predict(lm, x, 16, &y3));
        CHECK(y1 && y3 && sy_tensor_count(y1) == 64 * 3 && sy_tensor_count(y3) == sy_tensor_count(y1) &&
                  !memcmp(sy_tensor_data(y1), sy_tensor_data(y3), (size_t)sy_tensor_count(y1) * sizeof(float)),
              "predict on one thread and on every core gives the same outputs");
        if (lm) CHECK_ERR(sy_lite_model_set_device(lm, "cpu:-1"), SY_ERR_INVALID_ARGUMENT, "cpu:-1");
        sy_tensor_free(y1);
        sy_tensor_free(y3);
        sy_lite_model_free(lm);
    }

    /* an infinity in the calibration data: refused, naming the input, nothing written (a NaN is passed over by
     * the running min and max) */
    float *xd = sy_tensor_data(x);
    float keep = xd[5];
    xd[5] = INFINITY;
    char nan_path[300];
    snprintf(nan_path, sizeof nan_path, "%s/nan.tflite", dir);
    CHECK_ERR(sy_lite_quantize(m, x, &o, nan_path, NULL), SY_ERR_INVALID_ARGUMENT, "the model's input", "finite");
    CHECK(access(nan_path, F_OK) != 0, "nothing written for an infinite range");
    xd[5] = keep;

    /* int8 input and output: no QUANTIZE, no DEQUANTIZE */
    o.int8_input = o.int8_output = true;
    CHECK_OK(sy_lite_quantize(m, x, &o, path, &r));
    CHECK(!strcmp(r.ops, "CONV_2D MAX_POOL_2D RESHAPE FULLY_CONNECTED SOFTMAX"), "int8 I/O ops: %s", r.ops);
    o = sy_lite_quantize_options_default();

    /* a path that cannot be written: nothing left behind; a refused model leaves the old file as it was */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/missing/q.tflite", dir);
    CHECK_ERR(sy_lite_quantize(m, x, &o, sub, NULL), SY_ERR_IO, "missing");
    CHECK_ERR(sy_lite_quantize(m, x, &o, dir, NULL), SY_ERR_IO, "is a directory");
    unlink(path);
    CHECK(dir_empty(dir), "%s holds nothing after the failed writes", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("old", f);
        fclose(f);
    }
    sy_model *bad = NULL;
    CHECK_OK(sy_model_new("bad", &bad));
    if (bad) {
        sy_layer l = sy_layer_conv2d(2, 3, 3);
        l.input_shape = sy_shape_of(3, 8, 8, 1);
        CHECK_OK(sy_model_add(bad, &l));
        l = sy_layer_global_max_pooling2d();
        CHECK_OK(sy_model_add(bad, &l));
        CHECK_OK(sy_model_build(bad, sy_shape_of(3, 8, 8, 1)));
        CHECK_ERR(sy_lite_quantize(bad, x, &o, path, NULL), SY_ERR_UNSUPPORTED, "GlobalMaxPooling2D");
        CHECK(strstr(sy_last_error(), "'global_max_pooling2d' (GlobalMaxPooling2D)") != NULL, "the refusal names it: %s",
              sy_last_error());
        sy_model_free(bad);
    }
    uint8_t *old = NULL;
    size_t n = 0;
    CHECK_OK(io_read_file(path, &old, &n));
    CHECK(n == 3 && old && !memcmp(old, "old", 3), "the refused quantization left the old file: %zu bytes", n);
    sy_free(old);
    unlink(path);
    rmdir(dir);
    sy_tensor_free(x);
    sy_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_tflite_write ROOT [FILE.tflite...]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/tflite/tiny_dense.tflite", argv[1]);
    check_round_trip(path);
    for (int i = 2; i < argc; i++) check_round_trip(argv[i]);
    if (argc == 2) check_quantize();
    return check_report("test_tflite_write");
}
