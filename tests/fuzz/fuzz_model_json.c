/*
 * fuzz_model_json.c - libFuzzer target for Keras's model JSON
 * (src/keras/config.c): any bytes give a model or an error, never a crash,
 * a leak or undefined behaviour. A model that reads is written (to_json),
 * and what was written must read back into a model with the same layers
 * and weights and write the same bytes again: reading and writing agree.
 *
 * Models are capped at 2^17 weight values, checked before anything is
 * allocated, so an input cannot ask for gigabytes (the limit is a
 * parameter of keras_model_from_json_bytes; the public reader's is 2^40).
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_model_json CORPUS_DIR tests/fuzz/corpus/fuzz_model_json
 */
#include "core/core_internal.h"
#include "keras/keras_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PARAMS (1 << 17) /* the tutorial CNN (108,810) fits */

static void fail(const char *what, const char *json) {
    fprintf(stderr, "fuzz_model_json: %s: %s\n%s\n", what, sy_last_error(), json ? json : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_model *m = NULL;
    sy_status st = keras_model_from_json_bytes((const char *)data, size, MAX_PARAMS, &m);
    SY_ASSERT((st == SY_OK) == (m != NULL));
    SY_ASSERT(st == SY_OK || sy_last_error()[0] != '\0');
    if (!m) return 0;
    char *a = NULL, *b = NULL;
    if (sy_model_to_json(m, &a)) fail("to_json of a model read from JSON", NULL);
    sy_model *m2 = NULL;
    if (keras_model_from_json_bytes(a, strlen(a), MAX_PARAMS, &m2)) fail("what to_json wrote does not read", a);
    if (sy_model_to_json(m2, &b)) fail("to_json of the model read back", a);
    if (strcmp(a, b)) fail("written twice, different JSON", b);
    SY_ASSERT(sy_model_layer_count(m) == sy_model_layer_count(m2));
    SY_ASSERT(sy_model_weight_count(m) == sy_model_weight_count(m2));
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s1 = sy_model_weight_shape(m, i), s2 = sy_model_weight_shape(m2, i);
        char n1[256];
        snprintf(n1, sizeof n1, "%s", sy_model_weight_name(m, i));
        SY_ASSERT(!strcmp(n1, sy_model_weight_name(m2, i)) && sy_shape_equal(&s1, &s2));
    }
    sy_free(a);
    sy_free(b);
    sy_model_free(m);
    sy_model_free(m2);
    return 0;
}
