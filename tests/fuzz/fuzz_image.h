/*
 * fuzz_image.h - what fuzz_png and fuzz_jpeg share: decode the input with
 * channels 0, 1, 3 and 4 under a 16 MiB bound on pixels, check what comes
 * back, read every pixel and resize it. The two targets differ only in
 * their seeds (tests/fuzz/corpus/fuzz_png, fuzz_jpeg: the images of
 * tests/data/images), which keep the mutations inside one format.
 */
#ifndef SY_FUZZ_IMAGE_H
#define SY_FUZZ_IMAGE_H

#include "io/io_internal.h"

static void fuzz_image(const uint8_t *data, size_t size) {
    static const int32_t channels[4] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) {
        sy_tensor *t = NULL;
        if (io_image_decode(data, size, channels[i], (int64_t)16 << 20, &t) != SY_OK) {
            SY_ASSERT(t == NULL);
            continue;
        }
        sy_shape s = sy_tensor_shape(t);
        SY_ASSERT(sy_tensor_dtype(t) == SY_U8 && s.rank == 3 && s.dims[0] > 0 && s.dims[1] > 0);
        SY_ASSERT(channels[i] ? s.dims[2] == channels[i] : s.dims[2] >= 1 && s.dims[2] <= 4);
        const uint8_t *p = sy_tensor_data(t);
        volatile uint8_t sum = 0;
        for (int64_t k = 0; k < sy_tensor_count(t); k++) sum ^= p[k];
        (void)sum;
        sy_tensor *r = NULL;
        SY_ASSERT(sy_image_resize_bilinear(t, 3, 5, &r) == SY_OK);
        sy_tensor_free(r);
        sy_tensor_free(t);
    }
}

#endif
