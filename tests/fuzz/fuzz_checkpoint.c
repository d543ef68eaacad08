/*
 * fuzz_checkpoint.c - libFuzzer target for the checkpoint loader: any bytes
 * must load into the model or be refused, never crash, leak or change the
 * model when refused.
 *
 * A checkpoint's CRC would stop almost every mutation at the door, so an
 * input whose first byte is odd is framed here (magic, lengths, CRC) around
 * the rest: bytes 1-2 give how much of it is the manifest, the remainder is
 * the data. That way the fuzzer reaches the manifest's JSON, the variable
 * table and the offsets. An even first byte: the rest is taken as a whole
 * file. The model is a small Dense -> Dropout -> Dense classifier compiled
 * with Adam, its optimizer slots made, as a resumed fit() would load into.
 *
 *   make fuzz
 *   build-fuzz/fuzz_checkpoint CORPUS_DIR tests/fuzz/corpus/fuzz_checkpoint
 */
#include "keras/keras_internal.h"
#include "io/io_internal.h"
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sy_model *model(void) {
    static sy_model *m;
    if (m) return m;
    SY_ASSERT(sy_model_new("mlp", &m) == SY_OK);
    sy_model_set_seed(m, 5);
    sy_layer a = sy_layer_dense(16), drop = sy_layer_dropout(0.25f), b = sy_layer_dense(3);
    a.input_shape = sy_shape_of(1, (int64_t)4);
    a.activation = SY_ACTIVATION_RELU;
    b.activation = SY_ACTIVATION_SOFTMAX;
    SY_ASSERT(sy_model_add(m, &a) == SY_OK && sy_model_add(m, &drop) == SY_OK && sy_model_add(m, &b) == SY_OK);
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_adam(0.01f);
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    c.threads = 1;
    SY_ASSERT(sy_model_compile(m, &c) == SY_OK);
    model_plan *p;
    SY_ASSERT(model_plan_get(m, MODE_TRAIN, 8, &p) == SY_OK); /* the slots */
    return m;
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_model *m = model();
    if (size < 1) return 0;
    uint8_t *file = NULL;
    size_t n = 0;
    if (data[0] & 1) {
        if (size < 3) return 0;
        size_t body = size - 3, man = ((size_t)data[1] << 8 | data[2]);
        if (man > body) man = body;
        n = 24 + body + 4;
        file = malloc(n);
        memcpy(file, "SYCKPT01", 8);
        put_u64(file + 8, man);
        put_u64(file + 16, body - man);
        memcpy(file + 24, data + 3, body);
        uint32_t crc = crc32c_extend(0, file, n - 4);
        for (int i = 0; i < 4; i++) file[n - 4 + i] = (uint8_t)(crc >> (8 * i));
    } else {
        n = size - 1;
        file = malloc(n ? n : 1);
        memcpy(file, data + 1, n);
    }
    /* the weights before, to see a refusal changed nothing */
    int32_t count = sy_vars_count(m->vars);
    size_t bytes = 0;
    for (int32_t i = 0; i < count; i++) {
        sy_shape s = sy_vars_shape(m->vars, i);
        bytes += (size_t)sy_shape_count(&s) * 4;
    }
    uint8_t *before = malloc(bytes), *at = before;
    for (int32_t i = 0; i < count; i++) {
        sy_shape s = sy_vars_shape(m->vars, i);
        memcpy(at, sy_vars_data(m->vars, i), (size_t)sy_shape_count(&s) * 4);
        at += (size_t)sy_shape_count(&s) * 4;
    }
    int64_t steps = sy_vars_iterations(m->vars);
    fit_position p;
    sy_status st = checkpoint_load_bytes(m, file, n, "fuzz", &p);
    if (st) {
        at = before;
        for (int32_t i = 0; i < count; i++) {
            sy_shape s = sy_vars_shape(m->vars, i);
            SY_ASSERT(memcmp(at, sy_vars_data(m->vars, i), (size_t)sy_shape_count(&s) * 4) == 0);
            at += (size_t)sy_shape_count(&s) * 4;
        }
        SY_ASSERT(sy_vars_iterations(m->vars) == steps);
        SY_ASSERT(sy_last_error()[0] != '\0');
    } else {
        SY_ASSERT(p.epoch >= 0 && p.step >= 0 && p.n_rng >= 0 && p.n_rng <= CKPT_RNG_MAX);
    }
    free(before);
    free(file);
    return 0;
}
