/*
 * tfrecord_check.h - what test_tfrecord.c and test_example.c share: the
 * JSON fixtures of tests/data/tfrecord (tools/tfrecord_fixtures.py writes
 * them with TensorFlow), read with jansson: hex-encoded bytes, feature
 * specs, and values (floats as their uint32 bit patterns, int64s as
 * integers, bytes as hex) compared with tensors or made from them.
 * Include it after check.h and files.h.
 */
#ifndef SY_TEST_TFRECORD_CHECK_H
#define SY_TEST_TFRECORD_CHECK_H

#include "systolic/data.h"

#include <jansson.h>

static inline json_t *load_json(const char *path) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    CHECK(j, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    return j;
}

/* tests/data/tfrecord/<name>, parsed; NULL (a failed check) if it cannot be. */
static inline json_t *load_fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tfrecord/%s", fixture_dir, name);
    return load_json(path);
}

/* The bytes of a hex string (malloc'd, at least 1 byte), their count in *n. */
static inline uint8_t *hex_bytes(const char *hex, size_t *n) {
    size_t len = strlen(hex) / 2;
    uint8_t *p = malloc(len + 1);
    SY_ASSERT(p);
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        SY_ASSERT(sscanf(hex + 2 * i, "%2x", &v) == 1);
        p[i] = (uint8_t)v;
    }
    *n = len;
    return p;
}

static inline char *bytes_hex(const uint8_t *p, size_t n) {
    char *s = malloc(2 * n + 1);
    SY_ASSERT(s);
    for (size_t i = 0; i < n; i++) sprintf(s + 2 * i, "%02x", p[i]);
    s[2 * n] = '\0';
    return s;
}

static inline sy_dtype dtype_named(const char *name) {
    return !strcmp(name, "float32") ? SY_F32 : !strcmp(name, "int64") ? SY_I64 : SY_STRING;
}

/* Element i of a float32, int64 or string tensor as the fixtures write it. */
static inline json_t *value_json(const sy_tensor *t, int64_t i) {
    const void *d = sy_tensor_data(t);
    if (sy_tensor_dtype(t) == SY_F32) {
        uint32_t bits;
        memcpy(&bits, (const float *)d + i, 4);
        return json_integer(bits);
    }
    if (sy_tensor_dtype(t) == SY_I64) return json_integer(((const int64_t *)d)[i]);
    sy_string s = sy_tensor_string(t, i);
    char *hex = bytes_hex(s.data, (size_t)s.size);
    json_t *j = json_string(hex);
    free(hex);
    return j;
}

/* Elements [begin, end) of t equal the JSON array `want`. */
static inline void check_values(const sy_tensor *t, int64_t begin, int64_t end, const json_t *want,
                                const char *what) {
    CHECK(t && (int64_t)json_array_size(want) == end - begin, "%s: %lld values, expected %zu", what,
          (long long)(end - begin), json_array_size(want));
    if (!t || (int64_t)json_array_size(want) != end - begin) return;
    for (int64_t i = begin; i < end; i++) {
        json_t *got = value_json(t, i), *exp = json_array_get(want, (size_t)(i - begin));
        CHECK(json_equal(got, exp), "%s: value %lld differs", what, (long long)(i - begin));
        json_decref(got);
    }
}

/* A spec from its JSON ({"key", "kind": "fixed"|"var", "dtype", "shape",
 * "default"}); a default becomes a new tensor in *default_value. */
static inline sy_feature_spec spec_json(const json_t *j, sy_tensor **default_value) {
    sy_feature_spec sp = {0};
    sp.key = json_string_value(json_object_get(j, "key"));
    sp.kind = !strcmp(json_string_value(json_object_get(j, "kind")), "var") ? SY_FEATURE_VAR_LEN
                                                                            : SY_FEATURE_FIXED_LEN;
    sp.dtype = dtype_named(json_string_value(json_object_get(j, "dtype")));
    json_t *shape = json_object_get(j, "shape");
    sp.shape.rank = (int32_t)json_array_size(shape);
    for (int32_t d = 0; d < sp.shape.rank; d++)
        sp.shape.dims[d] = json_integer_value(json_array_get(shape, (size_t)d));
    *default_value = NULL;
    json_t *dv = json_object_get(j, "default");
    if (dv) {
        SY_ASSERT(sy_tensor_new(sp.dtype, sp.shape, default_value) == SY_OK);
        for (size_t i = 0; i < json_array_size(dv); i++) {
            double v = json_number_value(json_array_get(dv, i));
            if (sp.dtype == SY_F32) ((float *)sy_tensor_data(*default_value))[i] = (float)v;
            if (sp.dtype == SY_I64) ((int64_t *)sy_tensor_data(*default_value))[i] = (int64_t)v;
        }
        sp.default_value = *default_value;
    }
    return sp;
}

/* The records of a JSON array of hex strings, as a string tensor (B,). */
static inline sy_tensor *records_json(const json_t *hexes) {
    sy_tensor *t;
    SY_ASSERT(sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)json_array_size(hexes)), &t) ==
              SY_OK);
    for (size_t i = 0; i < json_array_size(hexes); i++) {
        size_t n;
        uint8_t *p = hex_bytes(json_string_value(json_array_get(hexes, i)), &n);
        SY_ASSERT(sy_tensor_set_string(t, (int64_t)i, p, n) == SY_OK);
        free(p);
    }
    return t;
}

#endif
