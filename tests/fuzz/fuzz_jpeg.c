/*
 * fuzz_jpeg.c - libFuzzer target for the JPEG decoder (issue 17, TFRecord
 * layouts): any bytes must give an image or an error, never a crash, a
 * leak, undefined behaviour, a libjpeg exit or an allocation out of
 * proportion (the decoder's bound on pixels is set to 16 MiB here, under
 * the fuzzer's malloc limit). Each input is decoded with every channels
 * argument decode_image takes; an image must have the shape asked for, and
 * is resized, as a record spec would.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_jpeg CORPUS_DIR tests/fuzz/corpus/fuzz_jpeg
 */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_image(data, size);
    return 0;
}
