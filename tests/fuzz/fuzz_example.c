/*
 * fuzz_example.c - libFuzzer target for the tf.train.Example parser: any
 * bytes must give values or an error, never a crash, a leak, undefined
 * behaviour or an allocation out of proportion to the input.
 *
 * Each input is parsed as one Example with variable-length specs (keys of
 * every type, as the seeds hold them), with fixed-length specs that have
 * defaults, and with a required one; then in a batch (itself, an empty
 * Example, itself again), which must fail exactly when the single parse
 * did and otherwise give the same values in rows 0 and 2. The values read
 * are built into a new Example (sy_example_*, protobuf-c's packing),
 * serialized and parsed again: the same values come back.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_example CORPUS_DIR tests/fuzz/corpus/fuzz_example
 */
#include "data/data_internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { NVAR = 4 };

static const sy_feature_spec var_specs[NVAR] = {
    {"x", SY_FEATURE_VAR_LEN, SY_F32, {0, {0}}, NULL},
    {"ids", SY_FEATURE_VAR_LEN, SY_I64, {0, {0}}, NULL},
    {"tags", SY_FEATURE_VAR_LEN, SY_STRING, {0, {0}}, NULL},
    {"label", SY_FEATURE_VAR_LEN, SY_I64, {0, {0}}, NULL},
};

/* Values [begin, end) of a and b are the same (bit for bit). */
static bool same_values(const sy_tensor *a, int64_t ab, const sy_tensor *b, int64_t bb, int64_t n) {
    if (sy_tensor_dtype(a) != SY_STRING) {
        size_t size = sy_dtype_size(sy_tensor_dtype(a));
        return !n ||
               !memcmp((const uint8_t *)sy_tensor_data(a) + ab * (int64_t)size,
                       (const uint8_t *)sy_tensor_data(b) + bb * (int64_t)size, (size_t)n * size);
    }
    for (int64_t i = 0; i < n; i++) {
        sy_string x = sy_tensor_string(a, ab + i), y = sy_tensor_string(b, bb + i);
        if (x.size != y.size || (x.size && memcmp(x.data, y.data, (size_t)x.size))) return false;
    }
    return true;
}

static void round_trip(sy_tensor *const *vals) {
    sy_example *e;
    SY_ASSERT(sy_example_new(&e) == SY_OK);
    for (int k = 0; k < NVAR; k++) {
        int64_t n = sy_tensor_count(vals[k]);
        void *d = sy_tensor_data(vals[k]);
        sy_status st =
            var_specs[k].dtype == SY_F32   ? sy_example_add_floats(e, var_specs[k].key, d, n)
            : var_specs[k].dtype == SY_I64 ? sy_example_add_int64s(e, var_specs[k].key, d, n)
                                           : sy_example_add_bytes(e, var_specs[k].key, d, n);
        SY_ASSERT(st == SY_OK);
    }
    sy_tensor *ser, *again[NVAR];
    SY_ASSERT(sy_example_serialize(e, &ser) == SY_OK);
    sy_string s = sy_tensor_string(ser, 0);
    SY_ASSERT(sy_parse_single_example(s.data, (size_t)s.size, var_specs, NVAR, again) == SY_OK);
    for (int k = 0; k < NVAR; k++) {
        SY_ASSERT(sy_tensor_count(again[k]) == sy_tensor_count(vals[k]));
        SY_ASSERT(same_values(again[k], 0, vals[k], 0, sy_tensor_count(vals[k])));
        sy_tensor_free(again[k]);
    }
    sy_tensor_free(ser);
    sy_example_free(e);
}

static void with_defaults(const uint8_t *data, size_t size) {
    sy_tensor *d_label, *d_pixels, *d_name, *out[3];
    SY_ASSERT(sy_tensor_new(SY_I64, sy_shape_of(0), &d_label) == SY_OK);
    SY_ASSERT(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)2, (int64_t)3), &d_pixels) == SY_OK);
    SY_ASSERT(sy_tensor_new(SY_STRING, sy_shape_of(0), &d_name) == SY_OK);
    const sy_feature_spec fixed[3] = {
        {"label", SY_FEATURE_FIXED_LEN, SY_I64, {0, {0}}, d_label},
        {"pixels", SY_FEATURE_FIXED_LEN, SY_F32, {2, {2, 3}}, d_pixels},
        {"name", SY_FEATURE_FIXED_LEN, SY_STRING, {0, {0}}, d_name},
    };
    sy_status st = sy_parse_single_example(data, size, fixed, 3, out);
    SY_ASSERT(st == SY_OK || st == SY_ERR_CORRUPT || st == SY_ERR_INVALID_ARGUMENT);
    for (int k = 0; k < 3; k++) {
        SY_ASSERT((st == SY_OK) == (out[k] != NULL));
        if (out[k]) SY_ASSERT(sy_tensor_count(out[k]) == sy_shape_count(&fixed[k].shape));
        sy_tensor_free(out[k]);
    }
    const sy_feature_spec required = {"x", SY_FEATURE_FIXED_LEN, SY_F32, {1, {1}}, NULL};
    if (sy_parse_single_example(data, size, &required, 1, out) == SY_OK) sy_tensor_free(out[0]);
    sy_tensor_free(d_label);
    sy_tensor_free(d_pixels);
    sy_tensor_free(d_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_tensor *one[NVAR], *out[NVAR], *splits[NVAR], *batch;
    sy_status st = sy_parse_single_example(data, size, var_specs, NVAR, one);
    SY_ASSERT(st == SY_OK || st == SY_ERR_CORRUPT || st == SY_ERR_INVALID_ARGUMENT);
    with_defaults(data, size);

    SY_ASSERT(sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)3), &batch) == SY_OK);
    SY_ASSERT(sy_tensor_set_string(batch, 0, data, size) == SY_OK);
    SY_ASSERT(sy_tensor_set_string(batch, 2, data, size) == SY_OK);
    sy_status bst = sy_parse_example(batch, var_specs, NVAR, out, splits);
    SY_ASSERT(bst == st);
    for (int k = 0; k < NVAR && !st; k++) {
        const int64_t *rs = sy_tensor_data(splits[k]);
        int64_t n = sy_tensor_count(one[k]);
        SY_ASSERT(rs[1] - rs[0] == n && rs[2] == rs[1] && rs[3] - rs[2] == n);
        SY_ASSERT(same_values(out[k], 0, one[k], 0, n) && same_values(out[k], rs[2], one[k], 0, n));
    }
    if (!st) round_trip(one);
    for (int k = 0; k < NVAR; k++) {
        if (!st) {
            sy_tensor_free(one[k]);
            sy_tensor_free(out[k]);
            sy_tensor_free(splits[k]);
        } else {
            SY_ASSERT(!one[k] && !out[k] && !splits[k]);
        }
    }
    sy_tensor_free(batch);
    return 0;
}
