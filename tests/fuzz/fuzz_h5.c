/*
 * fuzz_h5.c - libFuzzer target for the .h5 loaders: any bytes, as a file,
 * must load (sy_model_load, sy_model_load_weights) or be refused; never
 * crash or hang this process, leak, or change the model when refused.
 *
 * The bytes are parsed by libhdf5, and Debian's 1.10.8 crashes and spins on
 * damaged metadata; so every read goes, as it does for users, through the
 * reader process of src/io/h5_reader.c, which turns libhdf5's crash or
 * hang into an error. This target therefore checks that guard and what is
 * built on it (the reader's replies, saving.c's matching and staging),
 * not libhdf5: its coverage is the parent's (the child's counters die with
 * it), and a libhdf5 crash in the child is an input refused, not a
 * finding. Reading in-process instead would make CI fail on libhdf5's bugs
 * (docs/design/model-files.md, Fuzzing). SYSTOLIC_H5_TIMEOUT is set to 2 s,
 * so an input that makes libhdf5 spin costs 2 s, far below libFuzzer's
 * -timeout.
 *
 * In the child, libFuzzer's death callback is cleared (pthread_atfork):
 * a sanitizer report on libhdf5's code there (memcpy-param-overlap) would
 * otherwise be saved as this fuzzer's crash. A single libhdf5 allocation
 * past -malloc_limit_mb in the child still makes libFuzzer print an
 * out-of-memory report there and save an oom- file; the fuzzer itself
 * goes on.
 *
 * The model matches tests/data/h5/tiny_cnn.json, whose full model file
 * (tiny_cnn.h5) and weights are the seeds.
 *
 *   make fuzz
 *   build-fuzz/fuzz_h5 CORPUS_DIR tests/fuzz/corpus/fuzz_h5
 */
#define _GNU_SOURCE
#include "keras/keras_internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
const char *__asan_default_options(void);

/* libhdf5 in the child asks for absurd sizes that a damaged header claims
 * (200 TB): malloc then returns NULL, which libhdf5 reports as an error,
 * instead of ASan printing a report for each such input into CI's log. */
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[256];

/* In the reader child: no death callback (see above), and its sanitizer
 * reports on libhdf5's code (memcpy-param-overlap) to /dev/null, not
 * into CI's log: the parent reports the child's death as the refusal. */
static void child_quiet(void) {
    __sanitizer_set_death_callback(NULL);
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) __sanitizer_set_report_fd((void *)(intptr_t)fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("SYSTOLIC_H5_TIMEOUT", "0.5", 1);
    pthread_atfork(NULL, NULL, child_quiet);
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fuzz_h5-%ld.h5", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    return 0;
}

static sy_model *model(void) {
    static sy_model *m;
    if (m) return m;
    SY_ASSERT(sy_model_new("tiny_cnn", &m) == SY_OK);
    sy_layer conv = sy_layer_conv2d(2, 3, 3), pool = sy_layer_max_pooling2d(4, 4),
             relu = sy_layer_activation(SY_ACTIVATION_RELU), flat = sy_layer_flatten(),
             dense = sy_layer_dense(10), soft = sy_layer_activation(SY_ACTIVATION_SOFTMAX);
    conv.input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
    SY_ASSERT(sy_model_add(m, &conv) == SY_OK && sy_model_add(m, &pool) == SY_OK &&
              sy_model_add(m, &relu) == SY_OK && sy_model_add(m, &flat) == SY_OK &&
              sy_model_add(m, &dense) == SY_OK && sy_model_add(m, &soft) == SY_OK);
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_model *m = model();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    SY_ASSERT(fd >= 0);
    for (size_t done = 0; done < size;) {
        ssize_t k = write(fd, data + done, size - done);
        SY_ASSERT(k > 0);
        done += (size_t)k;
    }
    close(fd);

    sy_model *loaded = NULL;
    if (sy_model_load(path, &loaded) == SY_OK)
        sy_model_free(loaded);
    else
        SY_ASSERT(loaded == NULL && strstr(sy_last_error(), path));

    /* the weights before, to see a refusal changed nothing */
    int32_t count = sy_model_weight_count(m);
    size_t bytes = 0;
    for (int32_t i = 0; i < count; i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        bytes += (size_t)sy_shape_count(&s) * sizeof(float);
    }
    uint8_t *before = malloc(bytes), *p = before;
    SY_ASSERT(before);
    for (int32_t i = 0; i < count; i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        memcpy(p, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof(float));
        p += (size_t)sy_shape_count(&s) * sizeof(float);
    }
    if (sy_model_load_weights(m, path) != SY_OK) {
        SY_ASSERT(strstr(sy_last_error(), path));
        p = before;
        for (int32_t i = 0; i < count; i++) {
            sy_shape s = sy_model_weight_shape(m, i);
            SY_ASSERT(
                !memcmp(p, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof(float)));
            p += (size_t)sy_shape_count(&s) * sizeof(float);
        }
    }
    free(before);
    return 0;
}
