/*
 * test_example.c - tf.train.Example: building and serializing, and parsing
 * with a feature spec (parse_single_example, parse_example): every dtype,
 * fixed and variable length, defaults, empty lists, bytes with NULs; the
 * wire encodings protobuf allows and TensorFlow's writers never use, and
 * damaged ones, against what Python's protobuf reads from the same bytes
 * (tests/data/tfrecord/wire_cases.json, by tools/tfrecord_fixtures.py);
 * the serialized bytes against protobuf-c's own parser; and every error:
 * the byte offset of bad wire data, the key of a feature that is missing,
 * of another type or of the wrong length, the Example's index in a batch,
 * bad specs and arguments.
 */
#define _GNU_SOURCE
#include "check.h"
#include "files.h"

#include "data/data_internal.h"
#include "tensorflow/core/example/example.pb-c.h"
#include "tfrecord_check.h"

static sy_feature_spec fixed(const char *key, sy_dtype dtype, sy_shape shape, const sy_tensor *dv) {
    return (sy_feature_spec){key, SY_FEATURE_FIXED_LEN, dtype, shape, dv};
}

static sy_feature_spec var(const char *key, sy_dtype dtype) {
    return (sy_feature_spec){key, SY_FEATURE_VAR_LEN, dtype, sy_shape_of(0), NULL};
}

static sy_tensor *serialize(const sy_example *e) {
    sy_tensor *t = NULL;
    CHECK_OK(sy_example_serialize(e, &t));
    return t;
}

static void free_all(sy_tensor **t, int n) {
    for (int i = 0; i < n; i++) sy_tensor_free(t[i]);
}

/* ---- building and parsing ----------------------------------------------------------- */

static void test_build_and_parse(void) {
    sy_example *e;
    CHECK_OK(sy_example_new(&e));
    const float f[] = {1.5f, -0.0f, 3e38f, -7.25f};
    const int64_t i[] = {INT64_MIN, -1, 0, INT64_MAX, 300};
    const sy_string s[] = {
        {(const uint8_t *)"", 0}, {(const uint8_t *)"a\0b", 3}, {(const uint8_t *)"\xff", 1}};
    CHECK_OK(sy_example_add_floats(e, "f", f, 4));
    CHECK_OK(sy_example_add_int64s(e, "i", i, 5));
    CHECK_OK(sy_example_add_bytes(e, "s", s, 3));
    CHECK_OK(sy_example_add_floats(e, "empty", NULL, 0));
    CHECK_OK(sy_example_add_int64s(e, "one", &i[4], 1));
    sy_tensor *ser = serialize(e);
    sy_string bytes = sy_tensor_string(ser, 0);
    sy_shape scalar = sy_shape_of(0);
    CHECK(sy_tensor_shape(ser).rank == 0, "a scalar string");

    /* protobuf-c's own parser reads the same Example */
    Tensorflow__Example *pb = tensorflow__example__unpack(NULL, (size_t)bytes.size, bytes.data);
    CHECK(pb && pb->features && pb->features->n_feature == 5, "protobuf-c reads what was built");
    if (pb && pb->features && pb->features->n_feature == 5) {
        Tensorflow__Features__FeatureEntry *fe = pb->features->feature[2];
        CHECK(!strcmp(fe->key, "s") &&
                  fe->value->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST &&
                  fe->value->bytes_list->n_value == 3 && fe->value->bytes_list->value[1].len == 3 &&
                  !memcmp(fe->value->bytes_list->value[1].data, "a\0b", 3),
              "the bytes feature, as protobuf-c reads it");
        fe = pb->features->feature[3];
        CHECK(!strcmp(fe->key, "empty") &&
                  fe->value->kind_case == TENSORFLOW__FEATURE__KIND_FLOAT_LIST &&
                  fe->value->float_list->n_value == 0,
              "an empty float_list is a float_list");
    }
    tensorflow__example__free_unpacked(pb, NULL);

    sy_tensor *dv;
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)2), &dv));
    CHECK_OK(sy_tensor_set_string(dv, 1, "dflt", 4));
    const sy_feature_spec specs[] = {
        fixed("f", SY_F32, sy_shape_of(2, (int64_t)2, (int64_t)2), NULL),
        var("i", SY_I64),
        fixed("s", SY_STRING, sy_shape_of(1, (int64_t)3), NULL),
        fixed("one", SY_I64, scalar, NULL),
        var("empty", SY_F32),
        fixed("absent", SY_STRING, sy_shape_of(1, (int64_t)2), dv),
        var("absent too", SY_STRING),
        fixed("empty", SY_F32, sy_shape_of(1, (int64_t)0), NULL),
    };
    sy_tensor *out[8];
    CHECK_OK(sy_parse_single_example(bytes.data, (size_t)bytes.size, specs, 8, out));
    if (out[0]) {
        sy_shape want = sy_shape_of(2, (int64_t)2, (int64_t)2), got = sy_tensor_shape(out[0]);
        CHECK(sy_shape_equal(&got, &want) && !memcmp(sy_tensor_data(out[0]), f, sizeof f), "f");
        CHECK(sy_tensor_count(out[1]) == 5 && !memcmp(sy_tensor_data(out[1]), i, sizeof i), "i");
        for (int k = 0; k < 3; k++) {
            sy_string v = sy_tensor_string(out[2], k);
            CHECK(v.size == s[k].size && !memcmp(v.data, s[k].data, (size_t)v.size), "s[%d]", k);
        }
        got = sy_tensor_shape(out[3]);
        CHECK(sy_shape_equal(&got, &scalar) && sy_tensor_get(out[3], 0) == 300, "one");
        CHECK(sy_tensor_count(out[4]) == 0 && sy_tensor_dtype(out[4]) == SY_F32, "empty");
        CHECK(sy_tensor_string(out[5], 0).size == 0 && sy_tensor_string(out[5], 1).size == 4 &&
                  !memcmp(sy_tensor_string(out[5], 1).data, "dflt", 4),
              "the default");
        CHECK(sy_tensor_count(out[6]) == 0 && sy_tensor_dtype(out[6]) == SY_STRING,
              "absent var-len: no values");
        CHECK(sy_tensor_count(out[7]) == 0, "a fixed-length feature of shape (0,)");
    }
    free_all(out, 8);

    /* the errors name the key */
    sy_feature_spec bad = fixed("missing", SY_F32, scalar, NULL);
    CHECK_ERR(sy_parse_single_example(bytes.data, (size_t)bytes.size, &bad, 1, out),
              SY_ERR_INVALID_ARGUMENT, "'missing'", "required");
    CHECK(out[0] == NULL, "no output on failure");
    bad = var("f", SY_I64);
    CHECK_ERR(sy_parse_single_example(bytes.data, (size_t)bytes.size, &bad, 1, out),
              SY_ERR_INVALID_ARGUMENT, "'f'", "a float_list", "int64");
    bad = fixed("empty", SY_I64, sy_shape_of(1, (int64_t)0), NULL);
    CHECK_ERR(sy_parse_single_example(bytes.data, (size_t)bytes.size, &bad, 1, out),
              SY_ERR_INVALID_ARGUMENT, "'empty'",
              "a float_list"); /* an empty list still has a type */
    bad = fixed("f", SY_F32, sy_shape_of(2, (int64_t)3, (int64_t)2), NULL);
    CHECK_ERR(sy_parse_single_example(bytes.data, (size_t)bytes.size, &bad, 1, out),
              SY_ERR_INVALID_ARGUMENT, "'f'", "has 4 values", "(3, 2)", "needs 6");
    const sy_feature_spec two[] = {var("i", SY_I64), fixed("f", SY_F32, sy_shape_of(1, (int64_t)3), NULL)};
    CHECK_ERR(sy_parse_single_example(bytes.data, (size_t)bytes.size, two, 2, out),
              SY_ERR_INVALID_ARGUMENT, "'f'");
    CHECK(out[0] == NULL && out[1] == NULL, "every output NULL on failure, the good ones too");
    sy_tensor_free(dv);
    sy_tensor_free(ser);
    sy_example_free(e);
}

/* A batch of Examples with different features: fixed-length outputs get
 * the batch dimension, variable-length ones values and row splits. */
static void test_batch(void) {
    enum { B = 300 };
    sy_tensor *batch;
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)B), &batch));
    for (int b = 0; b < B; b++) {
        sy_example *e;
        CHECK_OK(sy_example_new(&e));
        int64_t label = b % 10, ids[7];
        float xy[2] = {(float)b, (float)-b};
        for (int k = 0; k < b % 7; k++) ids[k] = b * 100 + k;
        CHECK_OK(sy_example_add_int64s(e, "label", &label, 1));
        CHECK_OK(sy_example_add_floats(e, "xy", xy, 2));
        if (b % 4) CHECK_OK(sy_example_add_int64s(e, "ids", ids, b % 7));
        sy_tensor *t = serialize(e);
        sy_string s = sy_tensor_string(t, 0);
        CHECK_OK(sy_tensor_set_string(batch, b, s.data, (size_t)s.size));
        sy_tensor_free(t);
        sy_example_free(e);
    }
    const sy_feature_spec specs[] = {fixed("label", SY_I64, sy_shape_of(0), NULL),
                                     fixed("xy", SY_F32, sy_shape_of(1, (int64_t)2), NULL),
                                     var("ids", SY_I64)};
    sy_tensor *out[3], *splits[3];
    CHECK_OK(sy_parse_example(batch, specs, 3, out, splits));
    if (out[0]) {
        sy_shape l = sy_tensor_shape(out[0]), xy = sy_tensor_shape(out[1]);
        CHECK(l.rank == 1 && l.dims[0] == B && xy.rank == 2 && xy.dims[0] == B && xy.dims[1] == 2,
              "batch shapes");
        CHECK(splits[0] == NULL && splits[1] == NULL && splits[2] != NULL,
              "row splits for variable-length only");
        int bad = 0;
        const int64_t *rs = sy_tensor_data(splits[2]), *ids = sy_tensor_data(out[2]);
        for (int b = 0; b < B; b++) {
            bad += sy_tensor_get(out[0], b) != b % 10 || sy_tensor_get(out[1], 2 * b + 1) != -b;
            int64_t n = b % 4 ? b % 7 : 0;
            bad += rs[b + 1] - rs[b] != n;
            for (int64_t k = 0; k < n && rs[b + 1] - rs[b] == n; k++)
                bad += ids[rs[b] + k] != b * 100 + k;
        }
        CHECK(bad == 0 && rs[0] == 0 && rs[B] == sy_tensor_count(out[2]), "%d values differ", bad);
    }
    free_all(out, 3);
    free_all(splits, 3);

    /* an error names the Example */
    CHECK_OK(sy_tensor_set_string(batch, 7, "\x0a\x05\x0a\x03", 4));
    CHECK_ERR(sy_parse_example(batch, specs, 3, out, splits), SY_ERR_CORRUPT,
              "serialized Example 7", "at byte 1 of 4");
    CHECK(!out[0] && !out[2] && !splits[2], "no output on failure");
    sy_example *e;
    CHECK_OK(sy_example_new(&e));
    sy_tensor *t = serialize(e);
    CHECK_OK(sy_tensor_set_string(batch, 7, sy_tensor_string(t, 0).data,
                                  (size_t)sy_tensor_string(t, 0).size));
    CHECK_ERR(sy_parse_example(batch, specs, 3, out, splits), SY_ERR_INVALID_ARGUMENT,
              "serialized Example 7", "'label'", "required");
    sy_tensor_free(t);
    sy_example_free(e);
    sy_tensor_free(batch);

    /* no Examples: (0, ...) outputs and row splits [0] */
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)0), &batch));
    CHECK_OK(sy_parse_example(batch, specs, 3, out, splits));
    if (out[1]) {
        sy_shape xy = sy_tensor_shape(out[1]);
        CHECK(xy.rank == 2 && xy.dims[0] == 0 && xy.dims[1] == 2 &&
                  sy_tensor_count(splits[2]) == 1 && sy_tensor_get(splits[2], 0) == 0,
              "an empty batch");
    }
    free_all(out, 3);
    free_all(splits, 3);
    sy_tensor_free(batch);
}

/* ---- the wire format ----------------------------------------------------------------- */

/* Each case against Python's protobuf (and where they differ, TensorFlow). */
static void test_wire_cases(void) {
    json_t *all = load_fixture("wire_cases.json");
    json_t *cases = json_object_get(all, "cases");
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *k = json_array_get(cases, c);
        const char *name = json_string_value(json_object_get(k, "name"));
        size_t n;
        uint8_t *data = hex_bytes(json_string_value(json_object_get(k, "hex")), &n);
        sy_tensor *out[1];
        if (json_is_true(json_object_get(k, "error"))) {
            sy_feature_spec sp = var("x", SY_F32);
            CHECK_ERR(sy_parse_single_example(data, n, &sp, 1, out), SY_ERR_CORRUPT,
                      "bad protobuf wire data at byte");
            CHECK(out[0] == NULL, "%s: no output", name);
        } else {
            const char *kind = json_string_value(json_object_get(k, "kind"));
            bool none = !strcmp(kind, "none");
            const sy_dtype dtypes[] = {SY_F32, SY_I64, SY_STRING};
            for (int d = 0; d < 3; d++) {
                sy_feature_spec sp = var("x", dtypes[d]);
                sy_status st = sy_parse_single_example(data, n, &sp, 1, out);
                char what[128];
                snprintf(what, sizeof what, "wire case %s as %s", name, sy_dtype_name(dtypes[d]));
                if (none || dtypes[d] == dtype_named(kind)) {
                    CHECK(st == SY_OK, "%s: %s", what, sy_last_error());
                    check_values(out[0], 0, out[0] ? sy_tensor_count(out[0]) : 0,
                                 json_object_get(k, "values"), what);
                } else {
                    CHECK(st == SY_ERR_INVALID_ARGUMENT && strstr(sy_last_error(), "'x'"), "%s: %s",
                          what, sy_last_error());
                }
                sy_tensor_free(out[0]);
            }
        }
        free(data);
    }
    json_decref(all);
}

/* Damaged bytes: the offset is where the damage is. */
static void test_wire_errors(void) {
    static const struct {
        const char *bytes;
        size_t n;
        const char *says;
    } cases[] = {
        {"\x0a\x05\x0a\x03", 4,
         "at byte 1 of 4: a field of 5 bytes runs past the end of its message (2 bytes left)"},
        {"\x0a", 1, "at byte 1 of 1: a length is truncated"},
        {"\x0f", 1, "at byte 0 of 1: an invalid wire type"},
        {"\x02\x00", 2, "at byte 0 of 2: a field number outside"},
        {"\x0b\x0c", 2, "at byte 0 of 2: a group"},
        {"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11,
         "at byte 0 of 11: a field's tag is truncated or longer"},
        {"\x09\x00\x00", 3, "at byte 1 of 3: a fixed-size value runs past"},
        {"\x08\xff", 2, "at byte 1 of 2: a varint is truncated"},
        /* Example{features{feature{key "x" value{float_list{value: 3 bytes}}}}}: the packed field's
           contents */
        {"\x0a\x0e\x0a\x0c\x0a\x01x\x12\x07\x12\x05\x0a\x03\x00\x00\x80", 16,
         "at byte 13 of 16: a packed float_list's length is not a multiple of 4"},
        /* ... int64_list{value: a varint cut short} */
        {"\x0a\x0d\x0a\x0b\x0a\x01x\x12\x06\x1a\x04\x0a\x02\x01\x80", 15,
         "at byte 14 of 15: a packed int64_list's varint"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sy_feature_spec sp[] = {var("x", SY_F32)};
        if (c == 9) sp[0].dtype = SY_I64;
        sy_tensor *out[1];
        CHECK_ERR(sy_parse_single_example(cases[c].bytes, cases[c].n, sp, 1, out), SY_ERR_CORRUPT,
                  "serialized Example:", cases[c].says);
    }
    /* damage inside a Feature nobody asked for is not looked at (as TensorFlow) */
    const char *other = "\x0a\x0e\x0a\x0c\x0a\x01y\x12\x07\x12\x05\x0a\x03\x00\x00\x80";
    sy_feature_spec sp = var("x", SY_F32);
    sy_tensor *out[1];
    CHECK_OK(sy_parse_single_example(other, 16, &sp, 1, out));
    sy_tensor_free(out[0]);
}

/* ---- misuse ---------------------------------------------------------------------- */

static void test_errors(void) {
    sy_example *e;
    CHECK_OK(sy_example_new(&e));
    float v = 1;
    CHECK_OK(sy_example_add_floats(e, "a", &v, 1));
    CHECK_ERR(sy_example_add_int64s(e, "a", NULL, 0), SY_ERR_INVALID_ARGUMENT, "'a'", "already");
    CHECK_ERR(sy_example_add_floats(e, NULL, &v, 1), SY_ERR_INVALID_ARGUMENT, "key");
    CHECK_ERR(sy_example_add_floats(e, "b", &v, -1), SY_ERR_INVALID_ARGUMENT, "'b'");
    CHECK_ERR(sy_example_add_floats(e, "b", NULL, 2), SY_ERR_INVALID_ARGUMENT, "'b'");
    sy_string bad = {NULL, 5};
    CHECK_ERR(sy_example_add_bytes(e, "b", &bad, 1), SY_ERR_INVALID_ARGUMENT, "'b'", "value 0");
    CHECK_ERR(sy_example_add_floats(NULL, "b", &v, 1), SY_ERR_INVALID_ARGUMENT, "example");
    sy_tensor *t;
    CHECK_ERR(sy_example_serialize(NULL, &t), SY_ERR_INVALID_ARGUMENT, "NULL");
    sy_example_free(NULL);
    t = serialize(e);
    sy_string s = sy_tensor_string(t, 0);

    sy_tensor *out[2], *splits[2], *dv;
    sy_feature_spec sp = fixed("a", SY_I32, sy_shape_of(0), NULL);
    CHECK_ERR(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out), SY_ERR_INVALID_ARGUMENT,
              "'a'", "int32");
    sp = fixed("a", SY_F32, (sy_shape){.rank = 1, .dims = {-2}}, NULL);
    CHECK_ERR(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out), SY_ERR_INVALID_ARGUMENT,
              "'a'", "negative");
    sp = fixed(NULL, SY_F32, sy_shape_of(0), NULL);
    CHECK_ERR(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out), SY_ERR_INVALID_ARGUMENT,
              "no key");
    sp = fixed("a", SY_F32, sy_shape_of(0), NULL);
    sp.kind = (sy_feature_kind)5;
    CHECK_ERR(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out), SY_ERR_INVALID_ARGUMENT,
              "'a'", "kind");
    CHECK_OK(sy_tensor_new(SY_I64, sy_shape_of(1, (int64_t)2), &dv));
    sp = fixed("z", SY_F32, sy_shape_of(1, (int64_t)2), dv);
    CHECK_ERR(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out), SY_ERR_INVALID_ARGUMENT,
              "'z'", "default", "int64");
    sp = fixed("z", SY_I64, sy_shape_of(1, (int64_t)3), dv);
    CHECK_ERR(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out), SY_ERR_INVALID_ARGUMENT,
              "'z'", "default", "3 values");
    sp = fixed("z", SY_I64, sy_shape_of(2, (int64_t)1, (int64_t)2),
               dv); /* the default is reshaped, as TensorFlow reshapes it */
    CHECK_OK(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1, out));
    sy_tensor_free(out[0]);
    sy_tensor_free(dv);
    CHECK_ERR(sy_parse_single_example(NULL, 3, &sp, 1, out), SY_ERR_INVALID_ARGUMENT, "NULL");

    sy_tensor *batch;
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)1), &batch));
    CHECK_OK(sy_tensor_set_string(batch, 0, s.data, (size_t)s.size));
    sy_shape deep = {.rank = SY_MAX_RANK};
    for (int d = 0; d < SY_MAX_RANK; d++) deep.dims[d] = 1;
    sp = fixed("a", SY_F32, deep, NULL);
    CHECK_ERR(sy_parse_example(batch, &sp, 1, out, splits), SY_ERR_INVALID_ARGUMENT, "'a'", "rank");
    CHECK_OK(sy_parse_single_example(s.data, (size_t)s.size, &sp, 1,
                                     out)); /* no batch dimension: fits */
    sy_tensor_free(out[0]);
    sp = var("a", SY_F32);
    CHECK_ERR(sy_parse_example(batch, &sp, 1, out, NULL), SY_ERR_INVALID_ARGUMENT, "'a'",
              "row_splits");
    CHECK_ERR(sy_parse_example(NULL, &sp, 1, out, splits), SY_ERR_INVALID_ARGUMENT, "NULL");
    sy_tensor *floats, *matrix;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(1, (int64_t)1), &floats));
    CHECK_ERR(sy_parse_example(floats, &sp, 1, out, splits), SY_ERR_DTYPE, "float32");
    CHECK_OK(sy_tensor_new(SY_STRING, sy_shape_of(2, (int64_t)1, (int64_t)1), &matrix));
    CHECK_ERR(sy_parse_example(matrix, &sp, 1, out, splits), SY_ERR_SHAPE, "(1, 1)");
    CHECK_ERR(sy_parse_example(batch, NULL, 1, out, splits), SY_ERR_INVALID_ARGUMENT, "specs");
    CHECK_OK(sy_parse_example(batch, NULL, 0, NULL, NULL)); /* nothing asked, nothing wrong */
    sy_tensor_free(floats);
    sy_tensor_free(matrix);
    sy_tensor_free(batch);
    sy_tensor_free(t);
    sy_example_free(e);
}

int main(void) {
    if (!files_setup("example", __FILE__)) return 1;
    test_build_and_parse();
    test_batch();
    test_wire_cases();
    test_wire_errors();
    test_errors();
    files_cleanup();
    return check_report("test_example");
}
