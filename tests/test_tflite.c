/*
 * test_tflite.c - the TFLite reader (src/io/tflite.c, tflite_fb.cc) on files
 * TensorFlow's converter wrote:
 *
 *   test_tflite ROOT        tests/data/tflite/tiny_dense.tflite (Dense(4) on
 *                           8 floats, full-integer quantized by TF 2.15.1,
 *                           tools/tflite_models.py --tiny): its tensors,
 *                           quantization and operators as TensorFlow's
 *                           interpreter lists them; then every truncation
 *                           and every single-byte change of it, each either
 *                           read or refused with SY_ERR_CORRUPT naming the
 *                           file (never a crash: ASan and UBSan watch in
 *                           make asan); and files that are not TFLite models
 *                           ; and TFLite's integer arithmetic (backend/qmath.c)
 *                           on gemmlowp's rounding cases and against exact
 *                           products
 *   test_tflite ROOT DIR    also DIR's models (tests/tflite_tensorflow.sh has
 *                           TensorFlow make them at test time): their
 *                           operators, operator and tensor counts as tflite.json lists them
 */
#include "backend/backend_internal.h"
#include "io/io_internal.h"
#include "check.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void check_tiny(const char *path) {
    io_tflite *m = NULL;
    CHECK_OK(io_tflite_read(path, &m));
    if (!m) return;
    CHECK(m->version == 3, "schema version %u", m->version);
    CHECK(m->n_subgraphs == 1 && m->n_tensors == 5 && m->n_ops == 3, "%d subgraphs, %d tensors, %d ops",
          m->n_subgraphs, m->n_tensors, m->n_ops);
    CHECK(m->n_inputs == 1 && m->n_outputs == 1, "%d inputs, %d outputs", m->n_inputs, m->n_outputs);
    if (m->n_ops == 3 && m->n_tensors == 5 && m->n_inputs == 1) {
        const char *names[] = {"QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE"};
        for (int i = 0; i < 3; i++)
            CHECK(io_tflite_op_name(m->ops[i].builtin) && !strcmp(io_tflite_op_name(m->ops[i].builtin), names[i]),
                  "op %d is %s, TensorFlow lists %s", i, io_tflite_op_name(m->ops[i].builtin), names[i]);
        const io_tflite_tensor *in = &m->tensors[m->inputs[0]];
        CHECK(in->type == IO_TFLITE_FLOAT32 && in->rank == 2 && in->shape[0] == 1 && in->shape[1] == 8 && !in->data,
              "input %s rank %d", io_tflite_type_name(in->type), in->rank);
        const io_tflite_op *fc = &m->ops[1];
        CHECK(fc->n_inputs == 3 && fc->inputs[2] == -1, "FULLY_CONNECTED takes (x, w, no bias): %d inputs",
              fc->n_inputs);
        const io_tflite_tensor *w = &m->tensors[fc->inputs[1]];
        CHECK(w->type == IO_TFLITE_INT8 && w->rank == 2 && w->shape[0] == 4 && w->shape[1] == 8 && w->data &&
                  w->data_size == 32,
              "weights %s (%d, %d), %zu bytes", io_tflite_type_name(w->type), w->shape[0], w->shape[1], w->data_size);
        CHECK(w->quant_count == 1 && w->zero_point[0] == 0 && w->scale[0] > 0, "symmetric weights: %d scales",
              w->quant_count);
        const io_tflite_tensor *q = &m->tensors[fc->inputs[0]];
        CHECK(q->type == IO_TFLITE_INT8 && q->quant_count == 1 && q->scale[0] > 0 && q->zero_point[0] >= -128 &&
                  q->zero_point[0] <= 127,
              "the quantized input: %s, %d scales", io_tflite_type_name(q->type), q->quant_count);
        CHECK(fc->activation == 1, "Dense(relu) fuses RELU: %d", fc->activation);
    }
    io_tflite_free(m);
}

/* Every prefix, and every byte xor 0xff: read, or refused naming the file; nothing else. */
static void check_hostile(const char *path) {
    uint8_t *buf = NULL;
    size_t n = 0;
    CHECK_OK(io_read_file(path, &buf, &n));
    if (!buf) return;
    int refused = 0, truncated_ok = 0, named = 0, offsets = 0;
    for (size_t len = 0; len < n; len++) {
        io_tflite *m = NULL;
        sy_status st = io_tflite_parse(buf, len, "cut.tflite", &m);
        if (st == SY_OK) {
            truncated_ok++;
            io_tflite_free(m);
            continue;
        }
        refused += st == SY_ERR_CORRUPT && m == NULL;
        named += strstr(sy_last_error(), "'cut.tflite' is not a valid TFLite model: ") != NULL;
        offsets += strstr(sy_last_error(), "byte") != NULL;
        if (len == n / 2) fprintf(stderr, "the first half of it: %s\n", sy_last_error());
    }
    CHECK(truncated_ok == 0, "%d truncations read as models", truncated_ok);
    CHECK(refused == (int)n && named == (int)n, "of %zu truncations %d refused as corrupt, %d naming the file", n,
          refused, named);
    CHECK(offsets >= (int)n - 8, "%d of %zu truncations' messages give a byte offset", offsets, n);
    int changed_ok = 0, changed_refused = 0;
    for (size_t i = 0; i < n; i++) {
        buf[i] ^= 0xff;
        io_tflite *m = NULL;
        sy_status st = io_tflite_parse(buf, n, "flip.tflite", &m);
        if (st == SY_OK) {
            changed_ok++;
            io_tflite_free(m);
        } else {
            CHECK(st == SY_ERR_CORRUPT && m == NULL && strstr(sy_last_error(), "'flip.tflite'"),
                  "byte %zu changed: %s: %s", i, sy_status_name(st), sy_last_error());
            changed_refused++;
        }
        buf[i] ^= 0xff;
    }
    fprintf(stderr, "%zu truncations refused; of %zu one-byte changes %d refused, %d still a valid model\n", n, n,
            changed_refused, changed_ok);
    CHECK(changed_refused > 0, "no one-byte change was refused");
    sy_free(buf);

    const char npy[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    io_tflite *m = NULL;
    CHECK_ERR(io_tflite_parse((const uint8_t *)npy, sizeof npy, "x.npy", &m), SY_ERR_CORRUPT, "'x.npy'",
              "not a TFLite model", "TFL3");
    CHECK_ERR(io_tflite_parse((const uint8_t *)"TFL3", 4, "short.tflite", &m), SY_ERR_CORRUPT, "truncated: 4 bytes");
    CHECK_ERR(io_tflite_read("/nonexistent/m.tflite", &m), SY_ERR_IO, "/nonexistent/m.tflite");
    CHECK(m == NULL, "no model on failure");
}

/* DIR's models as TensorFlow's interpreter listed them (tflite.json). */
static void check_dir(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tflite.json", dir);
    json_error_t jerr;
    json_t *info = json_load_file(path, 0, &jerr);
    CHECK(info, "%s: %s", path, jerr.text);
    if (!info) return;
    const char *name;
    json_t *model;
    int models = 0;
    json_object_foreach(json_object_get(info, "models"), name, model) {
        snprintf(path, sizeof path, "%s/%s.tflite", dir, name);
        io_tflite *m = NULL;
        CHECK_OK(io_tflite_read(path, &m));
        if (!m) continue;
        models++;
        CHECK(m->n_tensors == json_integer_value(json_object_get(model, "tensors")), "%s: %d tensors, TensorFlow %d",
              name, m->n_tensors, (int)json_integer_value(json_object_get(model, "tensors")));
        CHECK(m->n_ops == json_integer_value(json_object_get(model, "operators")), "%s: %d operators, TensorFlow %d",
              name, m->n_ops, (int)json_integer_value(json_object_get(model, "operators")));
        size_t i;
        json_t *op;
        json_array_foreach(json_object_get(model, "ops"), i, op) {
            int found = 0;
            for (int32_t k = 0; k < m->n_ops; k++)
                found += io_tflite_op_name(m->ops[k].builtin) &&
                         !strcmp(io_tflite_op_name(m->ops[k].builtin), json_string_value(op));
            CHECK(found, "%s: TensorFlow's interpreter runs %s, the reader did not find it", name,
                  json_string_value(op));
        }
        for (int32_t k = 0; k < m->n_ops; k++) {
            int listed = 0;
            json_array_foreach(json_object_get(model, "ops"), i, op) listed +=
                io_tflite_op_name(m->ops[k].builtin) && !strcmp(io_tflite_op_name(m->ops[k].builtin), json_string_value(op));
            CHECK(listed, "%s: the reader found op %d (%d), which TensorFlow does not list", name, k, m->ops[k].builtin);
        }
        /* every quantized constant's scales are per channel along the axis TFLite says, with symmetric zero points */
        for (int32_t k = 0; k < m->n_tensors; k++) {
            const io_tflite_tensor *t = &m->tensors[k];
            if (t->type != IO_TFLITE_INT8 || !t->data) continue;
            for (int32_t c = 0; c < t->quant_count; c++)
                CHECK(t->zero_point[c] == 0 && t->scale[c] > 0, "%s: %s channel %d: zero point %lld", name, t->name, c,
                      (long long)t->zero_point[c]);
        }
        io_tflite_free(m);
    }
    CHECK(models == 2, "%d models in %s", models, dir);
    fprintf(stderr, "tflite reader: %d models TensorFlow %s wrote read as its interpreter lists them\n", models,
            json_string_value(json_object_get(info, "tensorflow")));
    json_decref(info);
}

/* TFLite's fixed-point steps: the rounding cases, then random products against the exact value. */
static void check_qmath(void) {
    CHECK(sy_q_high_mul(INT32_MIN, INT32_MIN) == INT32_MAX, "saturates");
    CHECK(sy_q_high_mul(1 << 30, 1 << 30) == 1 << 29, "2^30 2^30 / 2^31");
    CHECK(sy_q_high_mul(1, 1 << 30) == 1 && sy_q_high_mul(-1, 1 << 30) == 0 && sy_q_high_mul(-3, 1 << 30) == -1 &&
              sy_q_high_mul(3, 1 << 30) == 2,
          "halves toward +infinity: %d %d %d %d", sy_q_high_mul(1, 1 << 30), sy_q_high_mul(-1, 1 << 30),
          sy_q_high_mul(-3, 1 << 30), sy_q_high_mul(3, 1 << 30));
    const int32_t x[] = {3, -3, 5, 6, -6, -5, 7, 0, INT32_MAX, INT32_MIN};
    const int e[] = {1, 1, 2, 2, 2, 2, 0, 31, 31, 31};
    const int32_t want[] = {2, -2, 1, 2, -2, -1, 7, 0, 1, -1};
    for (int i = 0; i < 10; i++)
        CHECK(sy_q_rounding_shift(x[i], e[i]) == want[i], "%d / 2^%d: %d, want %d (halves away from zero)", x[i], e[i],
              sy_q_rounding_shift(x[i], e[i]), want[i]);
    int32_t m;
    int s;
    sy_q_multiplier(0.5, &m, &s);
    CHECK(m == 1 << 30 && s == 0, "0.5: %d 2^%d", m, s);
    sy_q_multiplier(1.0, &m, &s);
    CHECK(m == 1 << 30 && s == 1, "1.0: %d 2^%d", m, s);
    sy_q_multiplier(0.75, &m, &s);
    CHECK(m == 1610612736 && s == 0, "0.75: %d 2^%d", m, s);
    sy_q_multiplier(0.0, &m, &s);
    CHECK(m == 0 && s == 0, "0: %d 2^%d", m, s);
    sy_q_multiplier(1e-12, &m, &s);
    CHECK(m == 0 && s == 0, "below 2^-32: %d 2^%d", m, s);
    /* an accumulator times a typical conv multiplier: within one of the exact product (two roundings of at most
     * half each), and exact for the multiplier's own real value where that is a power of two */
    uint64_t r = 18;
    int far = 0;
    for (int i = 0; i < 20000; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int32_t acc = (int32_t)(r >> 40) - (1 << 23);
        double real = ldexp((double)((r >> 8) & 0xffff) / 65536.0 + 0.5, -(int)((r >> 4) & 15));
        sy_q_multiplier(real, &m, &s);
        double exact = (double)acc * (double)m * ldexp(1.0, s - 31);
        int32_t got = sy_q_requantize(acc, m, s);
        far += fabs((double)got - exact) > 1.0;
    }
    CHECK(far == 0, "%d of 20000 requantizations more than one from the exact product", far);
    CHECK(sy_q_requantize(1000, 1 << 30, -3) == 63 && sy_q_requantize(-1000, 1 << 30, -3) == -63,
          "1000 / 16 = 62.5 -> 63, -62.5 -> -63: %d %d", sy_q_requantize(1000, 1 << 30, -3),
          sy_q_requantize(-1000, 1 << 30, -3));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_tflite ROOT [DIR]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/tflite/tiny_dense.tflite", argv[1]);
    check_tiny(path);
    check_hostile(path);
    check_qmath();
    if (argc > 2) check_dir(argv[2]);
    return check_report("test_tflite");
}
