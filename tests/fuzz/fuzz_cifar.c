/*
 * fuzz_cifar.c - libFuzzer target for the CIFAR-10 loader (src/data/cifar.c)
 * on top of the tar reader: any bytes, plain or gzip, must give Keras's
 * arrays or an error with every member NULL, never a crash, a leak,
 * undefined behaviour or an allocation out of proportion to the input.
 *
 * Batches of one record each (the seeds, tools/make_cifar_fixtures.py, are
 * archives of that size: valid, plain and gzip'd, and damaged), so that
 * the fuzzer reaches the records, the labels and the transposition.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_cifar CORPUS_DIR tests/fuzz/corpus/fuzz_cifar
 */
#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tar_reader *r = NULL;
    if (tar_open_memory(data, size, "fuzz", &r) != SY_OK) return 0;
    sy_data_split d;
    if (cifar10_load_tar(r, 1, &d) == SY_OK) {
        SY_ASSERT(sy_tensor_count(d.x_train) == 5 * 3072 && sy_tensor_count(d.y_train) == 5);
        SY_ASSERT(sy_tensor_count(d.x_test) == 3072 && sy_tensor_count(d.y_test) == 1);
        const uint8_t *y = sy_tensor_data(d.y_train);
        for (int i = 0; i < 5; i++) SY_ASSERT(y[i] < 10);
        SY_ASSERT(*(const uint8_t *)sy_tensor_data(d.y_test) < 10);
    } else {
        SY_ASSERT(!d.x_train && !d.y_train && !d.x_test && !d.y_test);
    }
    sy_data_split_free(&d);
    tar_close(r);
    return 0;
}
