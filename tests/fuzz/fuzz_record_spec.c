/*
 * fuzz_record_spec.c - libFuzzer target for record specs (issue 17,
 * TFRecord layouts): the input is parsed as the --features flag's
 * spelling and as JSON; a spec either parsed is checked (x first, at most
 * x and y, shapes of static rank) and applied to the input itself taken
 * as a serialized Example, which must give its components or an error
 * naming the record, never a crash, a leak or undefined behaviour.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_record_spec CORPUS_DIR tests/fuzz/corpus/fuzz_record_spec
 */
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use(const sy_record_spec *s, const uint8_t *data, size_t size) {
    SY_ASSERT(s->n >= 1 && s->n <= 2 && s->f[0].role[0] == 'x');
    for (int32_t i = 0; i < s->n; i++) {
        sy_component_spec c = sy_record_spec_component(s, i);
        SY_ASSERT(c.shape.rank >= 0 && c.shape.rank < SY_MAX_RANK);
    }
    /* A spec may ask for up to SY_RECORD_MAX_BYTES a component, which a
     * machine may well give; libFuzzer's -malloc_limit_mb counts any
     * allocation past 256 MiB as a crash, so larger specs are only parsed. */
    for (int32_t i = 0; i < s->n; i++) {
        const sy_record_feature *f = &s->f[i];
        int64_t values = f->kind == SY_RECORD_IMAGE ? f->resize[0] * f->resize[1] * 4 : sy_shape_count(&f->shape);
        if (values > ((int64_t)1 << 22)) return;
    }
    sy_element el;
    if (sy_record_spec_apply(s, data, size, "fuzz, record 0", &el) == SY_OK) {
        SY_ASSERT(el.n == s->n);
        sy_element_clear(&el);
    } else {
        SY_ASSERT(el.n == 0 && strstr(sy_last_error(), "fuzz, record 0"));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    sy_record_spec s;
    if (sy_record_spec_parse(text, &s) == SY_OK) use(&s, data, size);
    else SY_ASSERT(s.n == 0);
    if (sy_record_spec_from_json(text, size, "fuzz.json", &s) == SY_OK) use(&s, data, size);
    else SY_ASSERT(s.n == 0);
    free(text);
    return 0;
}
