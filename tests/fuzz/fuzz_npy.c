/*
 * fuzz_npy.c - libFuzzer target for the NPY and NPZ readers: the input is
 * parsed as an .npy file and as an .npz archive, and every member the
 * archive lists is read. Any bytes must give a result or an error, never a
 * crash, a leak, undefined behaviour or an allocation out of proportion to
 * the input.
 *
 *   make fuzz                     (both targets, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_npy CORPUS_DIR tests/fuzz/corpus/fuzz_npy
 */
#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch(sy_tensor *t) {
    const uint8_t *p = sy_tensor_data(t);
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < sy_tensor_bytes(t); i++) sum ^= p[i];
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_tensor *t = NULL;
    if (npy_parse(data, size, "fuzz.npy", &t) == SY_OK) touch(t);
    sy_tensor_free(t);
    sy_npz *z = NULL;
    if (npz_parse(data, size, "fuzz.npz", &z) != SY_OK) {
        SY_ASSERT(z == NULL);
        return 0;
    }
    for (int32_t i = 0; i < sy_npz_count(z); i++) {
        t = NULL;
        if (sy_npz_get(z, sy_npz_name(z, i), &t) == SY_OK)
            touch(t);
        else
            SY_ASSERT(t == NULL);
        sy_tensor_free(t);
    }
    sy_npz_close(z);
    return 0;
}
