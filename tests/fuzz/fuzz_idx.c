/*
 * fuzz_idx.c - libFuzzer target for the IDX reader: any bytes, plain or
 * gzip, must give a tensor or an error, never a crash, a leak, undefined
 * behaviour or an allocation out of proportion to the input.
 *
 *   make fuzz                     (both targets, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_idx CORPUS_DIR tests/fuzz/corpus/fuzz_idx
 */
#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_tensor *t = NULL;
    sy_status st = idx_parse(data, size, "fuzz", &t);
    SY_ASSERT((st == SY_OK) == (t != NULL));
    if (t) {
        /* touch every byte, so a short allocation shows */
        const uint8_t *p = sy_tensor_data(t);
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < sy_tensor_bytes(t); i++) sum ^= p[i];
        (void)sum;
    }
    sy_tensor_free(t);
    return 0;
}
