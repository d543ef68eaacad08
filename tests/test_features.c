/*
 * test_features.c - TFRecord layouts (issue 17, point 7): images decoded
 * as tf.io.decode_image decodes them, tf.image.resize's bilinear, record
 * specs in both spellings, and applying them to Examples.
 *
 * The images and what TensorFlow 2.15 decodes from them are fixtures
 * (tests/data/images, by tools/image_fixtures.py), so this runs without
 * TensorFlow: every pixel must be TensorFlow's, for every channels
 * argument, and the resize every float bit. Hostile images (every
 * truncation of every fixture, dimensions past the limit, bytes that are
 * no image) must give errors that say what is wrong.
 *
 *   test_features                       the checks (a format the build has no
 *                                       library for: its checks skipped, saying so)
 *   test_features --have-images         exit 0 when PNG and JPEG are built in
 *   test_features --dump FILE SPEC OUT  read FILE (TFRecord) through SPEC
 *       and write OUT_x.npy and OUT_y.npy (OUT_x.NAME.npy, OUT_w.npy: one
 *       file per role), the components stacked, for
 *       tests/tfrecord_layouts.py to compare with TensorFlow's
 */
#include "check.h"

#include "data/data_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#ifndef SY_IMAGE_DIR
#error "SY_IMAGE_DIR: the fixtures' directory"
#endif

static uint8_t *slurp(const char *name, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_IMAGE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)size + 1);
    *n = fread(b, 1, (size_t)size, f);
    fclose(f);
    return b;
}

/* ---- decoding, against TensorFlow's pixels ------------------------------------------------------ */

static void check_decoded(const char *name, const uint8_t *data, size_t n, json_t *cases) {
    const char *key;
    json_t *c;
    json_object_foreach(cases, key, c) {
        int channels = atoi(key);
        sy_tensor *t = NULL;
        sy_status st = sy_image_decode(data, n, channels, &t);
        CHECK(st == SY_OK, "%s channels %d: %s", name, channels, sy_last_error());
        if (st) continue;
        json_t *shape = json_object_get(c, "shape"), *values = json_object_get(c, "values");
        sy_shape s = sy_tensor_shape(t);
        bool same_shape = s.rank == 3;
        for (int k = 0; k < 3 && same_shape; k++)
            same_shape = s.dims[k] == json_integer_value(json_array_get(shape, (size_t)k));
        CHECK(same_shape, "%s channels %d: shape (%lld, %lld, %lld)", name, channels, (long long)s.dims[0],
              (long long)s.dims[1], (long long)s.dims[2]);
        if (same_shape) {
            const uint8_t *px = sy_tensor_data(t);
            int64_t differ = 0, first = -1;
            for (int64_t i = 0; i < sy_tensor_count(t); i++)
                if (px[i] != json_integer_value(json_array_get(values, (size_t)i)) && differ++ == 0) first = i;
            CHECK(differ == 0, "%s channels %d: %lld of %lld values differ from TensorFlow's (the first at %lld: %d, "
                  "TensorFlow %lld)", name, channels, (long long)differ, (long long)sy_tensor_count(t), (long long)first,
                  first >= 0 ? px[first] : 0, first >= 0 ? json_integer_value(json_array_get(values, (size_t)first)) : 0);
        }
        sy_tensor_free(t);
    }
}

static void check_resized(const char *name, const uint8_t *data, size_t n, json_t *want) {
    sy_tensor *img = NULL, *r = NULL;
    CHECK_OK(sy_image_decode(data, n, 3, &img));
    CHECK_OK(sy_image_resize_bilinear(img, 4, 9, &r));
    json_t *bits = json_object_get(want, "bits");
    if (r && sy_tensor_count(r) == (int64_t)json_array_size(bits)) {
        const uint32_t *v = sy_tensor_data(r);
        int64_t differ = 0;
        for (int64_t i = 0; i < sy_tensor_count(r); i++) differ += v[i] != (uint32_t)json_integer_value(json_array_get(bits, (size_t)i));
        CHECK(differ == 0, "%s resized to 4 x 9: %lld values are not TensorFlow's bit for bit", name, (long long)differ);
    } else {
        CHECK(false, "%s resized: %lld values, TensorFlow %zu", name, r ? (long long)sy_tensor_count(r) : -1LL,
              json_array_size(bits));
    }
    sy_tensor_free(img);
    sy_tensor_free(r);
}

/* Whether the build decodes this format (libpng, libjpeg found); if not,
 * decoding must say so, and its checks are skipped. */
static bool built_in(const char *name) {
    size_t n = 0;
    uint8_t *data = slurp(name, &n);
    sy_tensor *t = NULL;
    sy_status st = data ? sy_image_decode(data, n, 0, &t) : SY_ERR_IO;
    free(data);
    sy_tensor_free(t);
    if (st == SY_ERR_UNSUPPORTED && strstr(sy_last_error(), "built without")) {
        fprintf(stderr, "test_features: %s: %s: its checks skipped\n", name, sy_last_error());
        return false;
    }
    return true;
}

static void check_fixtures(void) {
    size_t n = 0;
    uint8_t *text = slurp("expected.json", &n);
    CHECK(text != NULL, "tests/data/images/expected.json is missing (tools/image_fixtures.py writes it)");
    if (!text) return;
    json_error_t err;
    json_t *expected = json_loadb((const char *)text, n, 0, &err);
    free(text);
    CHECK(expected != NULL, "expected.json: %s", err.text);
    const char *name;
    json_t *e;
    int images = 0;
    json_object_foreach(expected, name, e) {
        size_t size = 0;
        if (!built_in(name)) {
            images++;
            continue;
        }
        uint8_t *data = slurp(name, &size);
        CHECK(data != NULL, "%s is missing", name);
        if (!data) continue;
        images++;
        check_decoded(name, data, size, json_object_get(e, "decoded"));
        check_resized(name, data, size, json_object_get(e, "resized_4x9"));
        /* every truncation is an error, never a crash; a JPEG's names the truncation */
        int refused = 0;
        for (size_t cut = 0; cut < size; cut++) {
            sy_tensor *t = NULL;
            sy_status st = sy_image_decode(data, cut, 0, &t);
            refused += st != SY_OK;
            CHECK(st != SY_OK || t != NULL, "%s cut at %zu: OK without an image", name, cut);
            sy_tensor_free(t);
        }
        /* PNG's IEND and a JPEG's EOI may go missing without losing a pixel (TensorFlow decodes them too) */
        CHECK(refused >= (int)size - 12, "%s: only %d of its %zu truncations refused", name, refused, size);
        free(data);
    }
    CHECK(images == 10, "%d fixture images", images);
    json_decref(expected);
}

/* A copy of rgb.png declaring w x h pixels (the IHDR's CRC fixed). */
static uint8_t *png_with_size(uint32_t w, uint32_t h, size_t *n) {
    uint8_t *p = slurp("rgb.png", n);
    if (!p) return NULL;
    for (int k = 0; k < 4; k++) {
        p[16 + k] = (uint8_t)(w >> (24 - 8 * k));
        p[20 + k] = (uint8_t)(h >> (24 - 8 * k));
    }
    uint32_t crc = (uint32_t)crc32(0, p + 12, 17);
    for (int k = 0; k < 4; k++) p[29 + k] = (uint8_t)(crc >> (24 - 8 * k));
    return p;
}

static void check_hostile(void) {
    sy_tensor *t = NULL;
    size_t n = 0;
    if (!built_in("rgb.png") || !built_in("baseline.jpg")) return;
    uint8_t *p = png_with_size(100000, 100000, &n);
    if (p) CHECK_ERR(sy_image_decode(p, n, 0, &t), SY_ERR_CORRUPT, "PNG", "100000 x 100000", "too large");
    free(p);
    p = png_with_size(0x7fffffff, 3, &n);
    if (p) CHECK(sy_image_decode(p, n, 0, &t) == SY_ERR_CORRUPT && t == NULL, "a PNG 2^31 - 1 pixels wide");
    free(p);
    /* a JPEG whose frame header declares 65,000 x 65,000 pixels */
    p = slurp("baseline.jpg", &n);
    for (size_t i = 2; p && i + 9 < n; i++)
        if (p[i] == 0xff && (p[i + 1] == 0xc0 || p[i + 1] == 0xc2)) {
            p[i + 5] = p[i + 7] = 0xfd;
            p[i + 6] = p[i + 8] = 0xe8;
            CHECK_ERR(sy_image_decode(p, n, 0, &t), SY_ERR_CORRUPT, "JPEG", "65000 x 65000", "too large");
            break;
        }
    free(p);
    p = slurp("baseline.jpg", &n);
    if (p) {
        CHECK_ERR(sy_image_decode(p, n, 4, &t), SY_ERR_INVALID_ARGUMENT, "channels 4", "1 or 3");
        CHECK_ERR(sy_image_decode(p, n / 2, 3, &t), SY_ERR_CORRUPT, "JPEG", "truncated");
        CHECK_ERR(sy_image_decode(p, n, 2, &t), SY_ERR_INVALID_ARGUMENT, "channels 2", "0 (the file's own), 1, 3 or 4");
    }
    free(p);
    CHECK_ERR(sy_image_decode("GIF89a....", 10, 0, &t), SY_ERR_UNSUPPORTED, "GIF", "only PNG and JPEG");
    CHECK_ERR(sy_image_decode("hello world", 11, 0, &t), SY_ERR_CORRUPT, "11 bytes", "not a PNG or JPEG", "68 65 6c 6c");
    CHECK_ERR(sy_image_decode("", 0, 0, &t), SY_ERR_CORRUPT, "0 bytes");
    CHECK_ERR(sy_image_decode("\x89PNG\r\n\x1a\n", 8, 0, &t), SY_ERR_CORRUPT, "PNG");
    CHECK(t == NULL, "no tensor after an error");
}

/* ---- resize by hand --------------------------------------------------------------------------- */

static void check_resize(void) {
    /* a 1 x 2 image widened to 1 x 4: x = (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 */
    sy_tensor *img = NULL, *r = NULL;
    CHECK_OK(sy_tensor_new(SY_U8, sy_shape_of(3, 1, 2, 1), &img));
    ((uint8_t *)sy_tensor_data(img))[0] = 0;
    ((uint8_t *)sy_tensor_data(img))[1] = 100;
    CHECK_OK(sy_image_resize_bilinear(img, 1, 4, &r));
    const float want[4] = {0, 25, 75, 100};
    for (int i = 0; r && i < 4; i++) CHECK(((float *)sy_tensor_data(r))[i] == want[i], "resize value %d", i);
    sy_tensor_free(r);
    CHECK_ERR(sy_image_resize_bilinear(img, 0, 4, &r), SY_ERR_INVALID_ARGUMENT, "0 x 4", "[1, 1048576]");
    sy_tensor_free(img);
}

/* ---- specs ------------------------------------------------------------------------------------ */

static void check_specs(void) {
    sy_record_spec s;
    CHECK_OK(sy_record_spec_parse("y=FixedLen(label, int64, default=-1); x=FixedLen(pixels, float, [28,28,1])", &s));
    CHECK(s.n == 2 && !strcmp(s.f[0].key, "pixels") && s.f[0].dtype == SY_F32 && s.f[0].shape.rank == 3 &&
              s.f[0].shape.dims[2] == 1 && !strcmp(s.f[1].key, "label") && s.f[1].has_default &&
              s.f[1].default_value == -1 && s.f[1].shape.rank == 0,
          "FixedLen: x first, its shape, y's default");
    CHECK_OK(sy_record_spec_parse(" x = Image( 'image/encoded' , channels=3, resize=[224, 224], rescale=0.5, "
                                  "offset=-1 ) ; y=VarLen(image/class/text, bytes, length=2);", &s));
    sy_component_spec c = sy_record_spec_component(&s, 0);
    CHECK(s.f[0].kind == SY_RECORD_IMAGE && !strcmp(s.f[0].key, "image/encoded") && c.dtype == SY_F32 &&
              c.shape.rank == 3 && c.shape.dims[0] == 224 && c.shape.dims[2] == 3 && s.f[0].rescale == 0.5 &&
              s.f[0].offset == -1,
          "Image: resized, rescaled, float32 (224, 224, 3)");
    c = sy_record_spec_component(&s, 1);
    CHECK(c.dtype == SY_STRING && c.shape.rank == 1 && c.shape.dims[0] == 2, "VarLen: (length,)");
    CHECK_OK(sy_record_spec_parse("x=Image(img)", &s));
    c = sy_record_spec_component(&s, 0);
    CHECK(s.n == 1 && c.dtype == SY_U8 && c.shape.dims[0] == -1 && c.shape.dims[2] == -1, "Image: uint8, unknown");
    const char *json = "{\"y\": {\"kind\": \"FixedLen\", \"feature\": \"image/class/label\", \"dtype\": \"int64\", "
                       "\"shape\": []}, \"x\": {\"kind\": \"Image\", \"feature\": \"image/encoded\", \"channels\": 3, "
                       "\"resize\": [32, 16]}}";
    CHECK_OK(sy_record_spec_from_json(json, strlen(json), "spec.json", &s));
    CHECK(s.n == 2 && s.f[0].kind == SY_RECORD_IMAGE && s.f[0].resize[1] == 16 && s.f[1].dtype == SY_I64,
          "JSON: the same spec");

    /* refused, each naming what and what is allowed */
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, double)", &s), SY_ERR_INVALID_ARGUMENT, "entry 1", "dtype 'double'",
              "float (float32), int64 or bytes");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a)", &s), SY_ERR_INVALID_ARGUMENT, "FixedLen(a)", "dtype");
    CHECK_ERR(sy_record_spec_parse("x=VarLen(a, int64)", &s), SY_ERR_INVALID_ARGUMENT, "VarLen(a)", "length=N");
    CHECK_ERR(sy_record_spec_parse("x=Fixed(a, int64)", &s), SY_ERR_INVALID_ARGUMENT, "'Fixed'",
              "FixedLen, VarLen or Image");
    CHECK_ERR(sy_record_spec_parse("z=FixedLen(a, int64)", &s), SY_ERR_INVALID_ARGUMENT, "role 'z'", "x (the model's");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, int64); x=FixedLen(b, int64)", &s), SY_ERR_INVALID_ARGUMENT,
              "entry 2", "x is given twice");
    CHECK_ERR(sy_record_spec_parse("y=FixedLen(a, int64)", &s), SY_ERR_INVALID_ARGUMENT, "no x");
    CHECK_ERR(sy_record_spec_parse("x=Image(a, channels=5)", &s), SY_ERR_INVALID_ARGUMENT, "channels", "[0, 4]");
    CHECK_ERR(sy_record_spec_parse("x=Image(a, resize=[0, 4])", &s), SY_ERR_INVALID_ARGUMENT, "resize",
              "[height, width]");
    CHECK_ERR(sy_record_spec_parse("x=Image(a, float)", &s), SY_ERR_INVALID_ARGUMENT, "Image(a)", "channels, resize");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float, [2.5])", &s), SY_ERR_INVALID_ARGUMENT, "dimension 0 is 2.5");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float, [2, 3)", &s), SY_ERR_INVALID_ARGUMENT, "entry 1");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float, colour=3)", &s), SY_ERR_INVALID_ARGUMENT, "unknown option "
              "'colour'");
    /* found by fuzz_record_spec: a default no record could hold, one no int64 or float32 can */
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(image, float, [30,9,1984951857], default=0)", &s),
              SY_ERR_INVALID_ARGUMENT, "FixedLen(image)", "shape (30, 9, 1984951857)", "at most 2 GiB");
    CHECK_ERR(sy_record_spec_parse("x=VarLen(t, int64, length=2147483647)", &s), SY_ERR_INVALID_ARGUMENT,
              "VarLen(t)", "2147483647 values");
    CHECK_ERR(sy_record_spec_parse("x=Image(a, resize=[1048576, 1048576])", &s), SY_ERR_INVALID_ARGUMENT, "Image(a)",
              "resize [1048576, 1048576] holds", "more than a record can");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, int64, default=5e99)", &s), SY_ERR_INVALID_ARGUMENT,
              "FixedLen(a)", "integer in [-2^63, 2^63)");
    CHECK_ERR(sy_record_spec_parse("x=VarLen(a, int64, length=3, default=0.5)", &s), SY_ERR_INVALID_ARGUMENT,
              "VarLen(a)", "integer in [-2^63, 2^63)");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float, default=1e39)", &s), SY_ERR_INVALID_ARGUMENT,
              "FixedLen(a)", "float32");
    CHECK_OK(sy_record_spec_parse("x=FixedLen(a, int64, [2], default=-9223372036854775808)", &s));
    CHECK_ERR(sy_record_spec_parse("", &s), SY_ERR_INVALID_ARGUMENT, "no feature given");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen()", &s), SY_ERR_INVALID_ARGUMENT, "entry 1");
    const char *no_feature = "{\"x\": {\"kind\": \"Image\"}}";
    CHECK_ERR(sy_record_spec_from_json(no_feature, strlen(no_feature), "s.json", &s), SY_ERR_INVALID_ARGUMENT,
              "s.json", "\"feature\"");
    CHECK_ERR(sy_record_spec_from_json("{\"x\": [1,", 9, "s.json", &s), SY_ERR_INVALID_ARGUMENT, "s.json", "line 1");
    CHECK(s.n == 0, "a refused spec is empty");
}

/* issue 17: several inputs and outputs (x.NAME, y.NAME) and the sample weight (w), as Keras takes
 * (x, y, sample_weight), arranged in a model's order whatever the spec's */
static void check_roles(void) {
    sy_record_spec s;
    const char *inputs[] = {"in_a", "in_b"}, *outputs[] = {"cls", "reg"}, *one[] = {"input_1"},
               *out1[] = {"dense"};
    CHECK_OK(sy_record_spec_parse(
        "w=FixedLen(weight, float); y.reg=FixedLen(r, float, [2]); x.in_b=FixedLen(b, "
        "float, [3]); y.cls=FixedLen(c, int64); x.in_a=FixedLen(a, float, [4])",
        &s));
    CHECK(s.n == 5 && !strcmp(s.f[0].key, "b") && !strcmp(s.f[1].key, "a") &&
              !strcmp(s.f[2].key, "r") && !strcmp(s.f[3].key, "c") &&
              !strcmp(s.f[4].key, "weight") && !strcmp(s.f[0].name, "in_b") &&
              !strcmp(s.f[4].role, "w"),
          "parsed: the x's, the y's, then w, each in the order given");
    CHECK_OK(sy_record_spec_arrange(&s, inputs, 2, outputs, 2));
    CHECK(s.n == 5 && !strcmp(s.f[0].key, "a") && !strcmp(s.f[1].key, "b") &&
              !strcmp(s.f[2].key, "c") && !strcmp(s.f[3].key, "r") && !strcmp(s.f[4].key, "weight"),
          "arranged: the model's inputs, its outputs, then w");
    const char *json =
        "{\"y.reg\": {\"kind\": \"FixedLen\", \"feature\": \"r\", \"dtype\": \"float\", \"shape\": "
        "[2]}, "
        "\"x.in_b\": {\"kind\": \"FixedLen\", \"feature\": \"b\", \"dtype\": \"float\", \"shape\": "
        "[3]}, "
        "\"x.in_a\": {\"kind\": \"VarLen\", \"feature\": \"a\", \"dtype\": \"float\", \"length\": "
        "4}, "
        "\"y.cls\": {\"kind\": \"FixedLen\", \"feature\": \"c\", \"dtype\": \"int64\"}}";
    CHECK_OK(sy_record_spec_from_json(json, strlen(json), "spec.json", &s));
    CHECK_OK(sy_record_spec_arrange(&s, inputs, 2, outputs, 2));
    CHECK(s.n == 4 && !strcmp(s.f[0].key, "a") && !strcmp(s.f[1].key, "b") &&
              !strcmp(s.f[2].key, "c") && !strcmp(s.f[3].key, "r"),
          "JSON: the same roles, arranged the same");
    /* predict's spec: no labels, none asked for */
    CHECK_OK(
        sy_record_spec_parse("x.in_b=FixedLen(b, float, [3]); x.in_a=FixedLen(a, float, [4])", &s));
    CHECK_OK(sy_record_spec_arrange(&s, inputs, 2, outputs, 2));
    CHECK(s.n == 2 && !strcmp(s.f[0].key, "a"), "no y: the inputs alone");
    /* a bare x and y stand for a model's only input and output; x.NAME may name it too */
    CHECK_OK(sy_record_spec_parse("y=FixedLen(l, int64); x=FixedLen(p, float, [8])", &s));
    CHECK_OK(sy_record_spec_arrange(&s, one, 1, out1, 1));
    CHECK(s.n == 2 && !strcmp(s.f[0].key, "p"), "bare x and y");
    CHECK_OK(
        sy_record_spec_parse("x.input_1=FixedLen(p, float, [8]); y.dense=FixedLen(l, int64)", &s));
    CHECK_OK(sy_record_spec_arrange(&s, one, 1, out1, 1));

    /* refused, naming the role and what the model has */
    CHECK_OK(
        sy_record_spec_parse("x.in_a=FixedLen(a, float, [4]); x.in_c=FixedLen(b, float, [3])", &s));
    CHECK_ERR(sy_record_spec_arrange(&s, inputs, 2, outputs, 2), SY_ERR_INVALID_ARGUMENT,
              "x.in_c names no input", "its inputs: in_a, in_b");
    CHECK_OK(sy_record_spec_parse("x.in_a=FixedLen(a, float, [4])", &s));
    CHECK_ERR(sy_record_spec_arrange(&s, inputs, 2, outputs, 2), SY_ERR_INVALID_ARGUMENT,
              "input 'in_b' has no "
              "feature",
              "x.in_b=");
    CHECK_OK(sy_record_spec_parse("x=FixedLen(a, float, [4]); y=FixedLen(c, int64)", &s));
    CHECK_ERR(sy_record_spec_arrange(&s, inputs, 2, outputs, 2), SY_ERR_INVALID_ARGUMENT,
              "x names no input", "2 inputs (in_a, in_b)", "x.NAME");
    CHECK_OK(sy_record_spec_parse("x.in_a=FixedLen(a, float, [4]); x.in_b=FixedLen(b, float, [3]); "
                                  "y.cls=FixedLen(c, int64)",
                                  &s));
    CHECK_ERR(sy_record_spec_arrange(&s, inputs, 2, outputs, 2), SY_ERR_INVALID_ARGUMENT,
              "output 'reg' has no "
              "feature",
              "y.reg=", "labels for every output, or none");
    CHECK_OK(sy_record_spec_parse("x.in_a=FixedLen(a, float, [4]); x.in_b=FixedLen(b, float, [3]); "
                                  "w=FixedLen(weight, float)",
                                  &s));
    CHECK_ERR(sy_record_spec_arrange(&s, inputs, 2, outputs, 2), SY_ERR_INVALID_ARGUMENT,
              "w (the sample weight) "
              "without y");
    CHECK_OK(sy_record_spec_parse("x=FixedLen(a, float, [4]); y.other=FixedLen(c, int64)", &s));
    CHECK_ERR(sy_record_spec_arrange(&s, one, 1, out1, 1), SY_ERR_INVALID_ARGUMENT,
              "y.other names no output", "its outputs: dense");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float, [4]); x.in_a=FixedLen(b, float, [3])", &s),
              SY_ERR_INVALID_ARGUMENT, "entry 2", "x.in_a beside x",
              "x.NAME for each of its inputs");
    CHECK_ERR(
        sy_record_spec_parse("x.in_a=FixedLen(a, float, [4]); x.in_a=FixedLen(b, float, [3])", &s),
        SY_ERR_INVALID_ARGUMENT, "entry 2", "x.in_a is given twice");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float); w.cls=FixedLen(b, float)", &s),
              SY_ERR_INVALID_ARGUMENT, "w takes no name");
    CHECK_ERR(sy_record_spec_parse("x.=FixedLen(a, float)", &s), SY_ERR_INVALID_ARGUMENT,
              "role 'x.'");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float); w=FixedLen(b, float, [2])", &s),
              SY_ERR_INVALID_ARGUMENT, "w (the sample weight) is one number per record",
              "FixedLen(b)");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float); w=VarLen(b, float, length=1)", &s),
              SY_ERR_INVALID_ARGUMENT, "one number per record");
    CHECK_ERR(sy_record_spec_parse("x=FixedLen(a, float); w=FixedLen(b, bytes)", &s),
              SY_ERR_INVALID_ARGUMENT, "one number per record");
    CHECK_OK(sy_record_spec_parse(
        "x=FixedLen(a, float); y=FixedLen(c, int64); w=FixedLen(b, int64, [1])", &s));
    /* SY_ELEMENT_MAX: the ninth feature is refused when parsed; a model with more inputs and
     * outputs than an element holds, when arranged */
    char text[1024], names[10][16];
    const char *many[10];
    size_t len = 0;
    for (int i = 0; i < 9; i++) {
        snprintf(names[i], sizeof names[i], "in_%d", i);
        many[i] = names[i];
        len +=
            (size_t)snprintf(text + len, sizeof text - len, "x.in_%d=FixedLen(f%d, float); ", i, i);
    }
    CHECK_ERR(sy_record_spec_parse(text, &s), SY_ERR_INVALID_ARGUMENT, "entry 9",
              "more than 8 features", "SY_ELEMENT_MAX");
    CHECK_OK(sy_record_spec_parse("x.in_0=FixedLen(f0, float)", &s));
    CHECK_ERR(sy_record_spec_arrange(&s, many, 9, out1, 1), SY_ERR_INVALID_ARGUMENT,
              "9 inputs and 1 outputs", "at most 8 components", "cannot feed it");
    CHECK_OK(sy_record_spec_parse("x.in_0=FixedLen(f0, float); y=FixedLen(l, int64)", &s));
    CHECK_ERR(sy_record_spec_arrange(&s, many, 8, out1, 1), SY_ERR_INVALID_ARGUMENT,
              "8 inputs and 1 outputs", "predict takes the inputs alone");
}

/* ---- applying a spec to Examples -------------------------------------------------------------- */

static sy_tensor *example(bool with_label, bool label_as_float, const uint8_t *png, size_t png_n) {
    sy_example *e = NULL;
    sy_tensor *out = NULL;
    CHECK_OK(sy_example_new(&e));
    const int64_t words[3] = {5, 6, 7};
    sy_example_add_int64s(e, "words", words, 3);
    if (with_label) {
        const int64_t label = 4;
        const float flabel = 4;
        if (label_as_float) sy_example_add_floats(e, "label", &flabel, 1);
        else sy_example_add_int64s(e, "label", &label, 1);
    }
    if (png) sy_example_add_bytes(e, "image/encoded", &(sy_string){.data = png, .size = (int64_t)png_n}, 1);
    CHECK_OK(sy_example_serialize(e, &out));
    sy_example_free(e);
    return out;
}

static void check_apply(void) {
    if (!built_in("rgb.png")) return;
    size_t png_n = 0;
    uint8_t *png = slurp("rgb.png", &png_n);
    sy_record_spec s;
    sy_element el;
    sy_tensor *ex = example(true, false, png, png_n);
    sy_string rec = sy_tensor_string(ex, 0);
    CHECK_OK(sy_record_spec_parse("x=VarLen(words, int64, length=5, default=-1); y=FixedLen(label, int64)", &s));
    CHECK_OK(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el));
    const int64_t padded[5] = {5, 6, 7, -1, -1};
    CHECK(el.n == 2 && !memcmp(sy_tensor_data(el.c[0]), padded, sizeof padded) &&
              *(int64_t *)sy_tensor_data(el.c[1]) == 4, "VarLen padded after with its default");
    sy_element_clear(&el);
    CHECK_OK(sy_record_spec_parse("x=VarLen(words, int64, length=2); y=FixedLen(label, int64)", &s));
    CHECK_OK(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el));
    CHECK(el.n == 2 && ((int64_t *)sy_tensor_data(el.c[0]))[1] == 6, "VarLen cut to its length");
    sy_element_clear(&el);
    CHECK_OK(sy_record_spec_parse("x=Image(image/encoded, channels=1, rescale=0.5); y=FixedLen(label, int64)", &s));
    CHECK_OK(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el));
    CHECK(el.n == 2 && sy_tensor_dtype(el.c[0]) == SY_F32 && sy_tensor_shape(el.c[0]).dims[2] == 1,
          "an image, gray, rescaled");
    sy_element_clear(&el);
    /* errors name the file, the record and the feature */
    CHECK_OK(sy_record_spec_parse("x=FixedLen(missing, float, [3]); y=FixedLen(label, int64)", &s));
    CHECK_ERR(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el),
              SY_ERR_INVALID_ARGUMENT, "f.tfrecord, record 3", "missing");
    CHECK_OK(sy_record_spec_parse("x=FixedLen(words, float, [3]); y=FixedLen(label, int64)", &s));
    CHECK_ERR(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el),
              SY_ERR_INVALID_ARGUMENT, "f.tfrecord, record 3", "words");
    CHECK_OK(sy_record_spec_parse("x=Image(words); y=FixedLen(label, int64)", &s));
    CHECK_ERR(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el),
              SY_ERR_INVALID_ARGUMENT, "f.tfrecord, record 3", "words");
    CHECK_OK(sy_record_spec_parse("x=Image(image/encoded, channels=3); y=FixedLen(label, int64)", &s));
    s.f[0].shape = sy_shape_of(3, 28, 28, 3); /* what a model would have fixed */
    CHECK_ERR(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "f.tfrecord, record 3", &el), SY_ERR_SHAPE,
              "f.tfrecord, record 3", "'image/encoded'", "(5, 7, 3)", "(28, 28, 3)", "resize=");
    sy_tensor_free(ex);
    ex = example(true, true, NULL, 0);
    rec = sy_tensor_string(ex, 0);
    CHECK_OK(sy_record_spec_parse("x=VarLen(words, int64, length=2); y=FixedLen(label, int64)", &s));
    CHECK_ERR(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "g.tfrecord, record 0", &el),
              SY_ERR_INVALID_ARGUMENT, "g.tfrecord, record 0", "label");
    CHECK_OK(sy_record_spec_parse("x=Image(image/encoded); y=FixedLen(label, float)", &s));
    CHECK_ERR(sy_record_spec_apply(&s, rec.data, (size_t)rec.size, "g.tfrecord, record 0", &el),
              SY_ERR_INVALID_ARGUMENT, "g.tfrecord, record 0", "image/encoded");
    sy_tensor_free(ex);
    free(png);
}

/* ---- --dump, for the interop test --------------------------------------------------------------- */

static int dump(const char *file, const char *spec_text, const char *out) {
    sy_record_spec s;
    size_t len = strlen(spec_text);
    sy_status st = len > 5 && !strcmp(spec_text + len - 5, ".json") ? sy_record_spec_read(spec_text, &s)
                                                                    : sy_record_spec_parse(spec_text, &s);
    sy_tfrecord_options o = sy_tfrecord_options_default();
    o.with_origin = true;
    sy_dataset *d = NULL, *m = NULL;
    if (!st) st = sy_dataset_tfrecord(&file, 1, &o, 1, &d);
    /* the records, then the spec applied one by one: batch stacks them */
    sy_iterator *it = NULL;
    if (!st) st = sy_dataset_iterator(d, &it);
    sy_tensor *stacked[SY_ELEMENT_MAX] = {NULL};
    int64_t count = 0, cap = 0;
    sy_element *els = NULL;
    while (!st) {
        sy_element in, el;
        bool end = false;
        if ((st = sy_iterator_next(it, &in, &end)) || end) break;
        char where[256];
        snprintf(where, sizeof where, "%s, record %lld", file, (long long)*(int64_t *)sy_tensor_data(in.c[2]));
        sy_string rec = sy_tensor_string(in.c[0], 0);
        st = sy_record_spec_apply(&s, rec.data, (size_t)rec.size, where, &el);
        sy_element_clear(&in);
        if (st) break;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            els = realloc(els, sizeof *els * (size_t)cap);
        }
        els[count++] = el;
    }
    for (int32_t k = 0; !st && k < s.n && count; k++) {
        sy_shape one = sy_tensor_shape(els[0].c[k]), all = one;
        all.rank = one.rank + 1;
        all.dims[0] = count;
        for (int r = 0; r < one.rank; r++) all.dims[r + 1] = one.dims[r];
        sy_dtype dt = sy_tensor_dtype(els[0].c[k]);
        if ((st = sy_tensor_new(dt, all, &stacked[k]))) break;
        size_t bytes = (size_t)sy_tensor_count(els[0].c[k]) * sy_dtype_size(dt);
        for (int64_t i = 0; i < count; i++)
            memcpy((char *)sy_tensor_data(stacked[k]) + (size_t)i * bytes, sy_tensor_data(els[i].c[k]), bytes);
        char path[1024];
        snprintf(path, sizeof path, "%s_%s%s%s.npy", out, s.f[k].role, s.f[k].name[0] ? "." : "",
                 s.f[k].name);
        st = sy_npy_write(path, stacked[k]);
    }
    for (int64_t i = 0; i < count; i++) sy_element_clear(&els[i]);
    free(els);
    for (int32_t k = 0; k < SY_ELEMENT_MAX; k++) sy_tensor_free(stacked[k]);
    sy_iterator_free(it);
    sy_dataset_free(d);
    sy_dataset_free(m);
    if (st) {
        fprintf(stderr, "test_features --dump: %s\n", sy_last_error());
        return 1;
    }
    printf("%lld records\n", (long long)count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--dump")) return dump(argv[2], argv[3], argv[4]);
    if (argc == 2 && !strcmp(argv[1], "--have-images")) return built_in("rgb.png") && built_in("baseline.jpg") ? 0 : 1;
    check_fixtures();
    check_hostile();
    check_resize();
    check_specs();
    check_roles();
    check_apply();
    return check_report("test_features");
}
