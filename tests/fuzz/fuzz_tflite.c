/*
 * fuzz_tflite.c - libFuzzer target for the TFLite reader (src/io/tflite.c,
 * tflite_fb.cc): the input is read as a .tflite file and, where it is one,
 * every tensor's constant bytes, scales and zero points and every
 * operator's tensor indices are touched. Any bytes must give a model or an
 * error, never a crash, a leak or undefined behaviour: flatbuffers'
 * Verifier runs before anything is read.
 *
 *   make fuzz
 *   build-fuzz/fuzz_tflite CORPUS_DIR tests/fuzz/corpus/fuzz_tflite
 */
#include "io/io_internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    io_tflite *m = NULL;
    if (io_tflite_parse(data, size, "fuzz.tflite", &m) != SY_OK) {
        SY_ASSERT(m == NULL);
        return 0;
    }
    volatile uint64_t sum = 0;
    for (int32_t i = 0; i < m->n_tensors; i++) {
        const io_tflite_tensor *t = &m->tensors[i];
        for (size_t k = 0; k < t->data_size; k++) sum += t->data[k];
        for (int32_t k = 0; k < t->quant_count; k++) {
            uint32_t bits; /* the scale's bits: a converted NaN or negative float would be the harness's own UB */
            memcpy(&bits, &t->scale[k], sizeof bits);
            sum += (uint64_t)t->zero_point[k] + bits;
        }
        sum += strlen(t->name);
    }
    for (int32_t i = 0; i < m->n_ops; i++)
        for (int32_t k = 0; k < m->ops[i].n_inputs; k++)
            if (m->ops[i].inputs[k] >= 0) sum += (uint64_t)m->tensors[m->ops[i].inputs[k]].rank;
    for (int32_t i = 0; i < m->n_inputs; i++) sum += (uint64_t)m->tensors[m->inputs[i]].rank;
    (void)sum;
    io_tflite_free(m);
    return 0;
}
