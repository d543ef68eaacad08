/*
 * fuzz_record_spec.c - libFuzzer target for record specs (issue 17,
 * TFRecord layouts): the input is parsed as the --features flag's
 * spelling and as JSON; a spec either parsed is checked (1 to
 * SY_ELEMENT_MAX components: the x's, then the y's, then at most one w,
 * named roles unique, never a bare one beside named ones; shapes of static
 * rank), arranged for a model whose layers are the spec's own names (in
 * reverse order, so every x and y moves) and for a fixed two-input model
 * (which must succeed, or fail naming the spec and leave it as it was),
 * and applied to the input itself taken as a serialized Example, which
 * must give its components or an error naming the record, never a crash,
 * a leak or undefined behaviour.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_record_spec CORPUS_DIR tests/fuzz/corpus/fuzz_record_spec
 */
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The roles' order and uniqueness, as the parsers promise them. */
static void check_roles(const sy_record_spec *s) {
    SY_ASSERT(s->n >= 1 && s->n <= SY_ELEMENT_MAX && s->f[0].role[0] == 'x');
    const char *order = "xyw";
    for (int32_t i = 0; i < s->n; i++) {
        const sy_record_feature *f = &s->f[i];
        SY_ASSERT(f->role[0] && strchr(order, f->role[0]) && !f->role[1]);
        SY_ASSERT(f->role[0] != 'w' || (i == s->n - 1 && !f->name[0]));
        if (i) SY_ASSERT(strchr(order, s->f[i - 1].role[0]) <= strchr(order, f->role[0]));
        for (int32_t j = 0; j < i; j++)
            if (s->f[j].role[0] == f->role[0])
                SY_ASSERT(f->name[0] && s->f[j].name[0] && strcmp(f->name, s->f[j].name));
    }
}

/* Arranged for a model whose inputs and outputs are the spec's own x's and
 * y's, reversed: the same components, each kind reversed. */
static void check_arrange(const sy_record_spec *s) {
    const char *in[SY_ELEMENT_MAX], *out[SY_ELEMENT_MAX];
    int32_t n_in = 0, n_out = 0;
    for (int32_t i = s->n - 1; i >= 0; i--) {
        const char *name = s->f[i].name[0] ? s->f[i].name : "only";
        if (s->f[i].role[0] == 'x')
            in[n_in++] = name;
        else if (s->f[i].role[0] == 'y')
            out[n_out++] = name;
    }
    if (!n_out) out[n_out++] = "unlabelled";
    sy_record_spec a;
    memcpy(&a, s, sizeof a);
    if (sy_record_spec_arrange(&a, in, n_in, out, n_out) == SY_OK) {
        SY_ASSERT(a.n == s->n);
        for (int32_t i = 0; i < n_in; i++) SY_ASSERT(!strcmp(a.f[i].key, s->f[n_in - 1 - i].key));
        check_roles(&a);
    } else {
        /* only w without y can fail here */
        SY_ASSERT(strstr(sy_last_error(), "record spec: ") && !memcmp(&a, s, sizeof a));
    }
    static const char *const two[] = {"in_a", "in_b"}, *const outs[] = {"cls", "reg"};
    memcpy(&a, s, sizeof a);
    if (sy_record_spec_arrange(&a, two, 2, outs, 2) == SY_OK)
        SY_ASSERT(a.n == s->n && !strcmp(a.f[0].name, "in_a"));
    else
        SY_ASSERT(strstr(sy_last_error(), "record spec: ") && !memcmp(&a, s, sizeof a));
}

static void use(const sy_record_spec *s, const uint8_t *data, size_t size) {
    check_roles(s);
    check_arrange(s);
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
