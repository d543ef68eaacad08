/*
 * fuzz_png.c - libFuzzer target for the PNG decoder (issue 17, TFRecord
 * layouts): any bytes must give an image or an error, never a crash, a
 * leak, undefined behaviour, a libpng abort or an allocation out of
 * proportion (the decoder's bound on pixels is set to 16 MiB here, under
 * the fuzzer's malloc limit). Each input is decoded with every channels
 * argument decode_image takes; an image must have the shape asked for, and
 * is resized, as a record spec would. A second pass decodes a copy whose
 * chunks' CRCs are recomputed, so that mutations get past libpng's
 * checksums into the chunks' contents and the compressed pixels.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_png CORPUS_DIR tests/fuzz/corpus/fuzz_png
 */
#include "fuzz_image.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_image(data, size);
    uint8_t *p = malloc(size ? size : 1);
    if (!p) return 0;
    memcpy(p, data, size);
    for (size_t at = 8; at + 12 <= size;) { /* length, type, data, CRC of type and data */
        uint32_t len = io_be32(p + at);
        if (len > size - at - 12) break;
        uint32_t crc = (uint32_t)crc32(0, p + at + 4, (uInt)len + 4);
        for (int k = 0; k < 4; k++) p[at + 8 + len + (size_t)k] = (uint8_t)(crc >> (24 - 8 * k));
        at += 12 + (size_t)len;
    }
    fuzz_image(p, size);
    free(p);
    return 0;
}
