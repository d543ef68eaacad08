/*
 * features.c - record specs: what each component of a dataset element
 * (x, the model's input; y, its label; w, the sample weight; x.NAME and
 * y.NAME for each input and output layer of a model with several) is
 * made of, read from a TFRecord of tf.train.Examples in any layout, as a
 * tf.data pipeline would write
 *
 *   features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
 *               "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
 *   x = tf.io.parse_single_example(record, features)
 *   image = tf.image.resize(tf.io.decode_image(x["image/encoded"], 3), [224, 224]) * (1 / 255)
 *
 * A spec has two spellings, one parsed into the same sy_record_spec: the
 * flag's, close to tf.io's calls,
 *
 *   x=FixedLen(image, float, [28,28,1]); y=FixedLen(label, int64, default=0)
 *   x=VarLen(text, int64, length=250)
 *   x=Image(image/encoded, channels=3, resize=[224,224], rescale=0.00392156862)
 *
 * and JSON, one object per role with the same names as keys
 * ({"x": {"kind": "Image", "feature": "image/encoded", "channels": 3}}).
 * Both go through set_option and finish, so they accept and refuse the
 * same things with the same messages. The components come out as Keras
 * takes (x, y, sample_weight): the x's, the y's, then w, each kind in the
 * order given; sy_record_spec_arrange then puts the x's and y's in a
 * model's order, by the layers' names, so a spec's order never matters.
 *
 * Applying a spec parses the Example once (sy_parse_single_example, one
 * pass over the wire format for all features), then makes each
 * component: a FixedLen feature as parsed; a VarLen one cut or padded
 * after its values to `length` (tf.sparse.to_dense(...)[:length], padded
 * with default_value); an Image decoded (sy_image_decode), checked
 * against the spec's shape, resized (sy_image_resize_bilinear) and
 * rescaled when asked. Every error starts with `where` (the file and the
 * record) and names the feature.
 *
 * The resize is tf.image.resize's default: bilinear with half-pixel
 * centres and no antialiasing, computed as TensorFlow's CPU kernel does
 * (resize_bilinear_op.cc): for output row y the source row is
 * (y + 0.5) * in/out - 0.5, its neighbours floor and ceil clamped to the
 * image, and each value top + (bottom - top) * ylerp of
 * top = tl + (tr - tl) * xlerp, in float. The file is compiled without
 * contracting those into fused multiply-adds (CMakeLists.txt), so the
 * roundings are TensorFlow's.
 */
#include "data_internal.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_FILE_MAX ((size_t)1 << 20)

/* ---- resize ----------------------------------------------------------------------------------- */

typedef struct lerp_at {
    int64_t lo, hi;
    float t;
} lerp_at;

static void lerp_table(int64_t in, int64_t out, lerp_at *tab) {
    float scale = (float)in / (float)out;
    for (int64_t i = 0; i < out; i++) {
        float src = ((float)i + 0.5f) * scale - 0.5f;
        float f = floorf(src);
        tab[i].lo = f > 0 ? (int64_t)f : 0;
        int64_t c = (int64_t)ceilf(src);
        tab[i].hi = c < in - 1 ? c : in - 1;
        tab[i].t = src - f;
    }
}

sy_status sy_image_resize_bilinear(const sy_tensor *image, int64_t height, int64_t width, sy_tensor **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "resize: out is NULL");
    *out = NULL;
    sy_shape s = image ? sy_tensor_shape(image) : sy_shape_of(0);
    sy_dtype dt = image ? sy_tensor_dtype(image) : SY_F32;
    if (!image || s.rank != 3 || (dt != SY_U8 && dt != SY_F32) || s.dims[0] < 1 || s.dims[1] < 1) {
        char b[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_INVALID_ARGUMENT, "resize: expected a uint8 or float32 image (height, width, channels), "
                        "got %s %s", image ? sy_dtype_name(dt) : "NULL", sy_shape_format(&s, b, sizeof b));
    }
    if (height < 1 || width < 1 || height > (1 << 20) || width > (1 << 20))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "resize: to %lld x %lld; expected each in [1, 1048576]",
                        (long long)height, (long long)width);
    int64_t ih = s.dims[0], iw = s.dims[1], c = s.dims[2];
    lerp_at *ys = sy_malloc(sizeof *ys * (size_t)height), *xs = sy_malloc(sizeof *xs * (size_t)width);
    sy_status st = ys && xs ? sy_tensor_new(SY_F32, sy_shape_of(3, height, width, c), out)
                            : sy_error(SY_ERR_OUT_OF_MEMORY, "resize: no memory for %lld x %lld", (long long)height,
                                       (long long)width);
    if (!st) {
        lerp_table(ih, height, ys);
        lerp_table(iw, width, xs);
        float *o = sy_tensor_data(*out);
        const uint8_t *u = dt == SY_U8 ? sy_tensor_data(image) : NULL;
        const float *f = dt == SY_F32 ? sy_tensor_data(image) : NULL;
#define AT(y, x, k) (u ? (float)u[((y) * iw + (x)) * c + (k)] : f[((y) * iw + (x)) * c + (k)])
        for (int64_t y = 0; y < height; y++)
            for (int64_t x = 0; x < width; x++)
                for (int64_t k = 0; k < c; k++) {
                    float tl = AT(ys[y].lo, xs[x].lo, k), tr = AT(ys[y].lo, xs[x].hi, k);
                    float bl = AT(ys[y].hi, xs[x].lo, k), br = AT(ys[y].hi, xs[x].hi, k);
                    float top = tl + (tr - tl) * xs[x].t, bottom = bl + (br - bl) * xs[x].t;
                    *o++ = top + (bottom - top) * ys[y].t;
                }
#undef AT
    }
    sy_free(ys);
    sy_free(xs);
    return st;
}

/* ---- the spec: options, from either spelling ---------------------------------------------------- */

/* An option's value: a string, a number, or a list of numbers. */
typedef struct opt_value {
    const char *str; /* NUL-terminated, or NULL */
    double nums[SY_MAX_RANK];
    int n;
    bool list, number;
} opt_value;

static const char *kind_name(sy_record_kind k) {
    return k == SY_RECORD_FIXED_LEN ? "FixedLen" : k == SY_RECORD_VAR_LEN ? "VarLen" : "Image";
}

static bool integral(double v, double lo, double hi) { return v == floor(v) && v >= lo && v <= hi; }

/* `what` as an int64 in [lo, hi]. */
static sy_status want_int(const char *where, const char *what, const opt_value *v, int64_t lo, int64_t hi,
                          int64_t *out) {
    if (!v->number || !integral(v->nums[0], (double)lo, (double)hi))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s must be an integer in [%lld, %lld]%s%s", where, what,
                        (long long)lo, (long long)hi, v->str ? ", not " : "", v->str ? v->str : "");
    *out = (int64_t)v->nums[0];
    return SY_OK;
}

static sy_status set_option(sy_record_feature *f, const char *where, const char *name, const opt_value *v) {
    int64_t i = 0;
    if (!strcmp(name, "dtype")) {
        const char *d = v->str ? v->str : "";
        if (!strcmp(d, "float") || !strcmp(d, "float32")) f->dtype = SY_F32;
        else if (!strcmp(d, "int64")) f->dtype = SY_I64;
        else if (!strcmp(d, "string") || !strcmp(d, "bytes")) f->dtype = SY_STRING;
        else
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: dtype '%s'; a feature is float (float32), int64 or "
                            "bytes (string), tf.train.Feature's three lists", where, d);
        return SY_OK;
    }
    if (!strcmp(name, "shape")) {
        if (!v->list || v->n > SY_MAX_RANK - 1)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: shape must be a list of at most %d dimensions, e.g. "
                            "[28,28,1] ([] for a scalar)", where, SY_MAX_RANK - 1);
        f->shape.rank = v->n;
        for (int k = 0; k < v->n; k++) {
            if (!integral(v->nums[k], 0, (double)INT32_MAX))
                return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: shape's dimension %d is %g; expected an integer in [0, "
                                "2147483647]", where, k, v->nums[k]);
            f->shape.dims[k] = (int64_t)v->nums[k];
        }
        return SY_OK;
    }
    if (!strcmp(name, "default")) {
        if (!v->number || !isfinite(v->nums[0]))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: default must be a finite number", where);
        f->has_default = true;
        f->default_value = v->nums[0];
        return SY_OK;
    }
    if (!strcmp(name, "length")) {
        sy_status st = want_int(where, "length", v, 1, INT32_MAX, &i);
        f->length = i;
        return st;
    }
    if (!strcmp(name, "channels")) {
        sy_status st = want_int(where, "channels", v, 0, 4, &i);
        f->channels = (int32_t)i;
        return st;
    }
    if (!strcmp(name, "resize")) {
        if (!v->list || v->n != 2 || !integral(v->nums[0], 1, 1 << 20) || !integral(v->nums[1], 1, 1 << 20))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: resize must be [height, width], each an integer in [1, "
                            "1048576]", where);
        f->resize[0] = (int64_t)v->nums[0];
        f->resize[1] = (int64_t)v->nums[1];
        return SY_OK;
    }
    if (!strcmp(name, "rescale") || !strcmp(name, "offset")) {
        if (!v->number || !isfinite(v->nums[0]))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s must be a finite number", where, name);
        if (!f->rescaled) f->rescale = 1;
        f->rescaled = true;
        *(name[0] == 'r' ? &f->rescale : &f->offset) = v->nums[0];
        return SY_OK;
    }
    return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: unknown option '%s'; known: dtype, shape, default (FixedLen), "
                    "length, default (VarLen), channels, resize, rescale, offset (Image)", where, name);
}

static sy_status set_kind(sy_record_feature *f, const char *where, const char *k) {
    if (!strcmp(k, "FixedLen") || !strcmp(k, "FixedLenFeature")) f->kind = SY_RECORD_FIXED_LEN;
    else if (!strcmp(k, "VarLen") || !strcmp(k, "VarLenFeature")) f->kind = SY_RECORD_VAR_LEN;
    else if (!strcmp(k, "Image")) f->kind = SY_RECORD_IMAGE;
    else
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%s' is no kind of feature; expected FixedLen, VarLen or Image",
                        where, k);
    return SY_OK;
}

static sy_status set_key(sy_record_feature *f, const char *where, const char *key, size_t n) {
    if (n == 0 || n >= sizeof f->key)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the feature's name must be 1 to %d bytes, not %zu", where,
                        (int)sizeof f->key - 1, n);
    memcpy(f->key, key, n);
    f->key[n] = 0;
    return SY_OK;
}

/* w is the sample weight: one number per record, as fit takes it. */
static sy_status check_weight(const sy_record_feature *f, const char *where) {
    bool one = f->kind == SY_RECORD_FIXED_LEN && f->dtype != SY_STRING &&
               (f->shape.rank == 0 || (f->shape.rank == 1 && f->shape.dims[0] == 1));
    if (f->role[0] != 'w' || one) return SY_OK;
    return sy_error(SY_ERR_INVALID_ARGUMENT,
                    "%s: w (the sample weight) is one number per record: FixedLen(KEY, "
                    "float) or int64, shape [] or [1]; not %s(%s)",
                    where, kind_name(f->kind), f->key);
}

/* What the options set must fit together: checked once all are read. */
static sy_status finish(sy_record_feature *f, const char *where, bool has_dtype, bool has_shape) {
    const char *bad = NULL;
    bool image_opts = f->channels || f->resize[0] || f->rescaled;
    if (f->kind == SY_RECORD_IMAGE) {
        if (has_dtype || has_shape || f->has_default || f->length)
            bad = "an Image takes channels, resize, rescale and offset (its dtype is uint8, float32 once resized or "
                  "rescaled; its shape the image's)";
        f->dtype = f->resize[0] || f->rescaled ? SY_F32 : SY_U8;
        f->shape = sy_shape_of(3, f->resize[0] ? f->resize[0] : (int64_t)-1, f->resize[0] ? f->resize[1] : (int64_t)-1,
                               f->channels ? (int64_t)f->channels : (int64_t)-1);
    } else if (!has_dtype) {
        bad = "give the feature's dtype: float, int64 or bytes";
    } else if (image_opts) {
        bad = "channels, resize, rescale and offset are an Image's";
    } else if (f->kind == SY_RECORD_FIXED_LEN) {
        if (f->length) bad = "length is a VarLen's (a FixedLen has a shape)";
        else if (f->has_default && f->dtype == SY_STRING) bad = "a bytes feature takes no numeric default";
        if (!has_shape) f->shape = sy_shape_of(0);
    } else {
        if (has_shape) bad = "a VarLen has a length, not a shape: the values kept, padded with default";
        else if (!f->length) bad = "a VarLen needs length=N: the values kept, padded after with default (0), as the "
                                   "model's static shape needs";
        else if (f->has_default && f->dtype == SY_STRING) bad = "a bytes feature takes no numeric default";
        f->shape = sy_shape_of(1, f->length);
    }
    if (!bad && f->has_default && f->dtype == SY_I64 && !integral(f->default_value, -0x1p63, 0x1p63 - 1024))
        bad = "an int64 feature's default must be an integer in [-2^63, 2^63)";
    if (!bad && f->has_default && f->dtype == SY_F32 && fabs(f->default_value) > FLT_MAX)
        bad = "a float feature's default must be a float32 (at most 3.4028235e38 in magnitude)";
    if (bad) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s(%s): %s", where, kind_name(f->kind), f->key, bad);
    /* A tf.train.Example is a protocol buffer, at most 2 GiB: a component
     * past that could come only from its default, and is refused here
     * rather than when the first record asks for it. An Image's size is
     * known once decoded; only its resize is checked. */
    int64_t values = f->kind == SY_RECORD_IMAGE ? f->resize[0] * f->resize[1] * 4 : sy_shape_count(&f->shape);
    size_t size = f->kind == SY_RECORD_IMAGE ? sizeof(float) : f->dtype == SY_STRING ? 1 : sy_dtype_size(f->dtype);
    if (values > SY_RECORD_MAX_BYTES / (int64_t)size) {
        char buf[SY_SHAPE_STR_MAX];
        if (f->kind == SY_RECORD_IMAGE)
            snprintf(buf, sizeof buf, "resize [%lld, %lld]", (long long)f->resize[0], (long long)f->resize[1]);
        else sy_shape_format(&f->shape, buf + snprintf(buf, sizeof buf, "shape "), sizeof buf - 6);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s(%s): %s holds %lld values, more than a record can (a "
                        "tf.train.Example is a protocol buffer of at most 2 GiB)", where, kind_name(f->kind), f->key,
                        buf, (long long)values);
    }
    return check_weight(f, where);
}

/* "x", "y.cls": a role and its name, for messages. */
static const char *role_text(const sy_record_feature *f, char *buf, size_t size) {
    snprintf(buf, size, "%s%s%s", f->role, f->name[0] ? "." : "", f->name);
    return buf;
}

/* Role `role` -- x, y or w, or x.NAME and y.NAME naming a model's input
 * or output layer -- once each, and a bare x (y) not beside named ones.
 * At most SY_ELEMENT_MAX in all: they are one dataset element's
 * components. */
static sy_status add_role(sy_record_spec *s, const char *where, const char *role, size_t n, sy_record_feature **f) {
    char r = n ? role[0] : 0;
    bool named = n > 2 && role[1] == '.';
    if (!((n == 1 || named) && (r == 'x' || r == 'y' || r == 'w')))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: role '%.*s'; expected x (the model's input), y (its label), "
                        "x.NAME and y.NAME (the input and output layers of a model with several), "
                        "or w (the sample weight)",
                        where, (int)(n > 64 ? 64 : n), role);
    if (named && r == 'w')
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: role '%.*s': w takes no name (one sample weight for every "
                        "output, as Keras's sample_weight array)",
                        where, (int)(n > 64 ? 64 : n), role);
    if (named && n - 2 >= SY_RECORD_NAME_MAX)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: a layer's name in a role is at most %d bytes, not %zu", where,
                        SY_RECORD_NAME_MAX - 1, n - 2);
    char have[SY_RECORD_NAME_MAX + 4];
    for (int32_t i = 0; i < s->n; i++) {
        const sy_record_feature *g = &s->f[i];
        if (g->role[0] != r) continue;
        if (!named && !g->name[0])
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %c is given twice", where, r);
        if (!named || !g->name[0])
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: %.*s beside %s: give one %c for a model's only %s, or %c.NAME for "
                            "each of its %ss",
                            where, (int)(n > 64 ? 64 : n), role, role_text(g, have, sizeof have), r,
                            r == 'x' ? "input" : "output", r, r == 'x' ? "input" : "output");
        if (strlen(g->name) == n - 2 && !memcmp(g->name, role + 2, n - 2))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %.*s is given twice", where, (int)n,
                            role);
    }
    if (s->n >= SY_ELEMENT_MAX)
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "%s: more than %d features; a dataset element holds at most %d "
            "components (SY_ELEMENT_MAX): the inputs, the labels and the sample weight together",
            where, SY_ELEMENT_MAX, SY_ELEMENT_MAX);
    *f = &s->f[s->n++];
    memset(*f, 0, sizeof **f);
    (*f)->role[0] = r;
    if (named) memcpy((*f)->name, role + 2, n - 2);
    return SY_OK;
}

/* The x's, then the y's, then w, each kind in the order given: an element
 * (x..., y..., sample_weight), as Keras takes (x, y, sample_weight). */
static sy_status order_roles(sy_record_spec *s, const char *name) {
    if (s->n == 0) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: no feature given; expected x=... and y=...", name);
    sy_record_feature sorted[SY_ELEMENT_MAX];
    int32_t k = 0;
    for (const char *r = "xyw"; *r; r++)
        for (int32_t i = 0; i < s->n; i++)
            if (s->f[i].role[0] == *r) sorted[k++] = s->f[i];
    memcpy(s->f, sorted, sizeof sorted[0] * (size_t)k);
    if (s->f[0].role[0] != 'x') return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: no x (the model's input) given", name);
    return SY_OK;
}

sy_status sy_record_spec_arrange(sy_record_spec *s, const char *const *inputs, int32_t n_inputs,
                                 const char *const *outputs, int32_t n_outputs) {
    if (!s || n_inputs < 1 || n_outputs < 1 || !inputs || !outputs)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "record spec: arrange needs the spec and the model's inputs and outputs");
    bool labels = false;
    for (int32_t i = 0; i < s->n; i++) labels |= s->f[i].role[0] == 'y';
    if (n_inputs + (labels ? n_outputs : 0) > SY_ELEMENT_MAX)
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "record spec: the model has %d inputs and %d outputs; a dataset "
            "element holds at most %d components (SY_ELEMENT_MAX), inputs and labels together, so "
            "records cannot feed %s",
            n_inputs, n_outputs, SY_ELEMENT_MAX,
            n_inputs > SY_ELEMENT_MAX
                ? "it"
                : "its training and evaluation (predict takes the inputs alone)");
    sy_record_feature sorted[SY_ELEMENT_MAX];
    int32_t k = 0;
    char text[SY_RECORD_NAME_MAX + 4], names[1024];
    for (int pass = 0; pass < 2; pass++) {
        char r = pass ? 'y' : 'x';
        const char *const *want = pass ? outputs : inputs;
        int32_t n_want = pass ? n_outputs : n_inputs, given = 0;
        size_t len = 0;
        names[0] = 0;
        for (int32_t j = 0; j < n_want && len < sizeof names; j++)
            len +=
                (size_t)snprintf(names + len, sizeof names - len, "%s%s", j ? ", " : "", want[j]);
        const char *what = pass ? "output" : "input";
        for (int32_t i = 0; i < s->n; i++) {
            const sy_record_feature *f = &s->f[i];
            if (f->role[0] != r) continue;
            given++;
            if (!f->name[0] && n_want > 1)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "record spec: %c names no %s, but the model has %d %ss (%s): "
                                "give %c.NAME=... for each",
                                r, what, n_want, what, names, r);
            bool found = !f->name[0];
            for (int32_t j = 0; j < n_want && !found; j++) found = !strcmp(f->name, want[j]);
            if (!found)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "record spec: %s names no %s of the model; its %ss: %s",
                                role_text(f, text, sizeof text), what, what, names);
        }
        if (pass == 1 && given == 0) continue; /* no labels: predict's spec */
        for (int32_t j = 0; j < n_want; j++) {
            int32_t at = -1;
            for (int32_t i = 0; i < s->n && at < 0; i++)
                if (s->f[i].role[0] == r && (!s->f[i].name[0] || !strcmp(s->f[i].name, want[j])))
                    at = i;
            if (at < 0)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "record spec: the model's %s '%s' has no feature: give "
                                "%c.%s=...%s",
                                what, want[j], r, want[j],
                                pass ? " (labels for every output, or none)" : "");
            sorted[k++] = s->f[at];
        }
    }
    for (int32_t i = 0; i < s->n; i++)
        if (s->f[i].role[0] == 'w') {
            if (k == SY_ELEMENT_MAX)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "record spec: w: the model's %d inputs and %d labels fill "
                                "a dataset element's %d components (SY_ELEMENT_MAX); no room for a "
                                "sample weight",
                                n_inputs, n_outputs, SY_ELEMENT_MAX);
            if (k == n_inputs)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "record spec: w (the sample weight) without y: weights "
                                "weigh the labels' losses");
            sorted[k++] = s->f[i];
        }
    memcpy(s->f, sorted, sizeof sorted[0] * (size_t)k);
    s->n = k;
    return SY_OK;
}

/* ---- the flag's spelling ------------------------------------------------------------------------ */

static const char *skip_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n')) p++;
    return p;
}

static void trim(const char **b, const char **e) {
    *b = skip_space(*b, *e);
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\n')) (*e)--;
}

/* The end of the top-level piece that starts at p: the first `sep` outside
 * brackets, parentheses and quotes, or end. */
static const char *piece_end(const char *p, const char *end, char sep) {
    int depth = 0;
    char quote = 0;
    for (; p < end; p++) {
        if (quote) {
            if (*p == quote) quote = 0;
        } else if (*p == '"' || *p == '\'') quote = *p;
        else if (*p == '(' || *p == '[') depth++;
        else if (*p == ')' || *p == ']') depth--;
        else if (*p == sep && depth == 0) return p;
    }
    return end;
}

/* A number or [n, n, ...] in [b, e), else a bare word (v->str). */
static sy_status parse_value(const char *where, const char *b, const char *e, char *word, size_t cap, opt_value *v) {
    memset(v, 0, sizeof *v);
    size_t n = (size_t)(e - b);
    if (n + 1 > cap) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: a value of %zu bytes is too long", where, n);
    memcpy(word, b, n);
    word[n] = 0;
    v->str = word;
    if (n >= 2 && (word[0] == '"' || word[0] == '\'') && word[n - 1] == word[0]) { /* a quoted word */
        word[n - 1] = 0;
        v->str = word + 1;
        return SY_OK;
    }
    if (word[0] == '[') {
        if (word[n - 1] != ']') return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%s' has no closing ]", where, word);
        v->list = true;
        const char *p = word + 1, *end = word + n - 1;
        p = skip_space(p, end);
        while (p < end) {
            if (v->n == SY_MAX_RANK)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%s' has more than %d numbers", where, word, SY_MAX_RANK);
            char *stop;
            v->nums[v->n] = strtod(p, &stop);
            if (stop == p || stop > end)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%s' is not a list of numbers", where, word);
            v->n++;
            p = skip_space(stop, end);
            if (p < end && *p == ',') p = skip_space(p + 1, end);
            else if (p < end) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%s' is not a list of numbers", where, word);
        }
        return SY_OK;
    }
    char *stop;
    double d = strtod(word, &stop);
    if (stop != word && *stop == 0) {
        v->number = true;
        v->nums[0] = d;
        v->n = 1;
    }
    return SY_OK;
}

/* One entry: ROLE=KIND(FEATURE, args...). */
static sy_status parse_entry(sy_record_spec *s, const char *b, const char *e, int index) {
    char where[64];
    snprintf(where, sizeof where, "entry %d", index + 1);
    const char *eq = memchr(b, '=', (size_t)(e - b));
    if (!eq)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%.*s' is not ROLE=KIND(FEATURE, ...), e.g. "
                        "x=FixedLen(image, float, [28,28,1])", where, (int)(e - b > 80 ? 80 : e - b), b);
    const char *rb = b, *re = eq;
    trim(&rb, &re);
    sy_record_feature *f;
    sy_status st = add_role(s, where, rb, (size_t)(re - rb), &f);
    if (st) return st;
    const char *kb = eq + 1, *open = memchr(kb, '(', (size_t)(e - kb));
    const char *close = e;
    while (close > kb && close[-1] != ')') close--;
    if (!open || close <= open + 1 || skip_space(close, e) != e)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%.*s' is not KIND(FEATURE, ...) with KIND FixedLen, VarLen or "
                        "Image", where, (int)(e - kb > 80 ? 80 : e - kb), kb);
    close--; /* at the ')' */
    char word[256];
    const char *ke = open;
    trim(&kb, &ke);
    if ((size_t)(ke - kb) >= sizeof word) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the kind is too long", where);
    memcpy(word, kb, (size_t)(ke - kb));
    word[ke - kb] = 0;
    if ((st = set_kind(f, where, word))) return st;
    bool has_dtype = false, has_shape = false;
    int arg = 0;
    for (const char *p = open + 1; p <= close && !st; arg++) {
        const char *q = piece_end(p, close, ','), *ab = p, *ae = q;
        trim(&ab, &ae);
        p = q + 1;
        if (ab == ae) {
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "%s: an empty argument in %s(...)", where, kind_name(f->kind));
            break;
        }
        opt_value v;
        if (arg == 0) { /* the feature's name, quoted or not */
            if ((st = parse_value(where, ab, ae, word, sizeof word, &v))) break;
            st = set_key(f, where, v.str, strlen(v.str));
            continue;
        }
        const char *oeq = piece_end(ab, ae, '=');
        if (oeq < ae) { /* name=value */
            const char *nb = ab, *ne = oeq, *vb = oeq + 1, *ve = ae;
            trim(&nb, &ne);
            trim(&vb, &ve);
            char name[32];
            if ((size_t)(ne - nb) >= sizeof name || ne == nb || vb == ve) {
                st = sy_error(SY_ERR_INVALID_ARGUMENT, "%s: '%.*s' is not NAME=VALUE", where, (int)(ae - ab), ab);
                break;
            }
            memcpy(name, nb, (size_t)(ne - nb));
            name[ne - nb] = 0;
            if (!(st = parse_value(where, vb, ve, word, sizeof word, &v))) st = set_option(f, where, name, &v);
            has_dtype |= !strcmp(name, "dtype");
            has_shape |= !strcmp(name, "shape");
        } else if (!(st = parse_value(where, ab, ae, word, sizeof word, &v))) { /* dtype or [shape] */
            st = set_option(f, where, v.list ? "shape" : "dtype", &v);
            has_dtype |= !v.list;
            has_shape |= v.list;
        }
    }
    if (!st && arg == 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s() names no feature", where, kind_name(f->kind));
    return st ? st : finish(f, where, has_dtype, has_shape);
}

sy_status sy_record_spec_parse(const char *text, sy_record_spec *out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "record spec: out is NULL");
    memset(out, 0, sizeof *out);
    if (!text) return sy_error(SY_ERR_INVALID_ARGUMENT, "record spec: none (NULL)");
    const char *p = text, *end = text + strlen(text);
    sy_status st = SY_OK;
    for (int i = 0; p < end && !st; i++) {
        const char *q = piece_end(p, end, ';'), *b = p, *e = q;
        trim(&b, &e);
        if (b < e) st = parse_entry(out, b, e, i);
        p = q + 1;
    }
    if (!st) st = order_roles(out, "record spec");
    if (st) memset(out, 0, sizeof *out);
    return st;
}

/* ---- JSON --------------------------------------------------------------------------------------- */

static sy_status json_feature(sy_record_feature *f, const char *where, json_t *o) {
    if (!json_is_object(o))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: expected an object {\"kind\": ..., \"feature\": ...}", where);
    json_t *k = json_object_get(o, "kind"), *key = json_object_get(o, "feature");
    if (!json_is_string(k) || !json_is_string(key))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: \"kind\" (FixedLen, VarLen or Image) and \"feature\" (the "
                        "Example's key) must be strings", where);
    sy_status st = set_kind(f, where, json_string_value(k));
    if (!st) st = set_key(f, where, json_string_value(key), json_string_length(key));
    bool has_dtype = false, has_shape = false;
    const char *name;
    json_t *v;
    json_object_foreach(o, name, v) {
        if (st) break;
        if (!strcmp(name, "kind") || !strcmp(name, "feature")) continue;
        opt_value ov;
        memset(&ov, 0, sizeof ov);
        if (json_is_string(v)) {
            ov.str = json_string_value(v);
        } else if (json_is_number(v)) {
            ov.number = true;
            ov.nums[0] = json_number_value(v);
            ov.n = 1;
        } else if (json_is_array(v) && json_array_size(v) <= SY_MAX_RANK) {
            ov.list = true;
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) {
                if (!json_is_number(e)) {
                    ov.list = false;
                    break;
                }
                ov.nums[ov.n++] = json_number_value(e);
            }
        }
        has_dtype |= !strcmp(name, "dtype");
        has_shape |= !strcmp(name, "shape");
        st = set_option(f, where, name, &ov);
    }
    return st ? st : finish(f, where, has_dtype, has_shape);
}

sy_status sy_record_spec_from_json(const char *text, size_t n, const char *name, sy_record_spec *out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "record spec: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name) name = "record spec";
    json_error_t err;
    json_t *root = text ? json_loadb(text, n, JSON_REJECT_DUPLICATES, &err) : NULL;
    if (!root)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: line %d column %d: %s", name, text ? err.line : 0,
                        text ? err.column : 0, text ? err.text : "no text");
    sy_status st = json_is_object(root) ? SY_OK
                                        : sy_error(SY_ERR_INVALID_ARGUMENT, "%s: expected an object {\"x\": {...}, "
                                                   "\"y\": {...}}", name);
    const char *role;
    json_t *v;
    if (!st) json_object_foreach(root, role, v) {
        char where[SY_RECORD_NAME_MAX + 32];
        snprintf(where, sizeof where, "%s: \"%.32s\"", name, role);
        sy_record_feature *f;
        if ((st = add_role(out, where, role, strlen(role), &f)) || (st = json_feature(f, where, v))) break;
    }
    json_decref(root);
    if (!st) st = order_roles(out, name);
    if (st) memset(out, 0, sizeof *out);
    return st;
}

sy_status sy_record_spec_read(const char *path, sy_record_spec *out) {
    if (out) memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t n = 0;
    sy_status st = io_read_file_max(path, SPEC_FILE_MAX, "record spec", &buf, &n);
    if (!st) st = sy_record_spec_from_json((const char *)buf, n, path, out);
    sy_free(buf);
    return st;
}

sy_component_spec sy_record_spec_component(const sy_record_spec *s, int32_t i) {
    return (sy_component_spec){s->f[i].dtype, s->f[i].shape};
}

/* ---- applying a spec ---------------------------------------------------------------------------- */

static sy_status var_len(const sy_record_feature *f, sy_tensor *v, sy_tensor **out) {
    int64_t n = sy_tensor_count(v), keep = n < f->length ? n : f->length;
    sy_status st = sy_tensor_new(f->dtype, sy_shape_of(1, f->length), out);
    if (st) return st;
    if (f->dtype == SY_STRING) {
        for (int64_t i = 0; i < keep && !st; i++) {
            sy_string b = sy_tensor_string(v, i);
            st = sy_tensor_set_string(*out, i, b.data, (size_t)b.size);
        }
        return st;
    }
    size_t size = sy_dtype_size(f->dtype);
    memcpy(sy_tensor_data(*out), sy_tensor_data(v), (size_t)keep * size);
    for (int64_t i = keep; i < f->length; i++) {
        if (f->dtype == SY_F32) ((float *)sy_tensor_data(*out))[i] = (float)f->default_value;
        else ((int64_t *)sy_tensor_data(*out))[i] = (int64_t)f->default_value;
    }
    return SY_OK;
}

static sy_status image(const sy_record_feature *f, const char *where, const sy_tensor *v, sy_tensor **out) {
    sy_string b = sy_tensor_string(v, 0);
    sy_tensor *img = NULL;
    sy_status st = sy_image_decode(b.data, (size_t)b.size, f->channels, &img);
    if (st) return sy_error(st, "%s: feature '%s': %s", where, f->key, sy_last_error());
    sy_shape s = sy_tensor_shape(img);
    bool fits = true;
    for (int k = 0; k < 3; k++) fits &= f->shape.dims[k] < 0 || f->shape.dims[k] == s.dims[k] || (k < 2 && f->resize[0]);
    if (!fits) {
        char a[SY_SHAPE_STR_MAX], e[SY_SHAPE_STR_MAX];
        sy_tensor_free(img);
        return sy_error(SY_ERR_SHAPE, "%s: feature '%s' is an image of shape %s but %s is expected: give "
                        "resize=[height, width] and channels=N", where, f->key, sy_shape_format(&s, a, sizeof a),
                        sy_shape_format(&f->shape, e, sizeof e));
    }
    if (f->resize[0]) {
        sy_tensor *r = NULL;
        st = sy_image_resize_bilinear(img, f->resize[0], f->resize[1], &r);
        sy_tensor_free(img);
        if (st) return sy_error(st, "%s: feature '%s': %s", where, f->key, sy_last_error());
        img = r;
    } else if (f->rescaled) {
        sy_tensor *r = NULL;
        if ((st = sy_tensor_new(SY_F32, s, &r))) {
            sy_tensor_free(img);
            return st;
        }
        const uint8_t *u = sy_tensor_data(img);
        float *o = sy_tensor_data(r);
        for (int64_t i = 0, n = sy_tensor_count(img); i < n; i++) o[i] = (float)u[i];
        sy_tensor_free(img);
        img = r;
    }
    if (f->rescaled) { /* Keras's Rescaling: inputs * scale + offset, in float32 */
        float *o = sy_tensor_data(img), scale = (float)f->rescale, offset = (float)f->offset;
        for (int64_t i = 0, n = sy_tensor_count(img); i < n; i++) o[i] = o[i] * scale + offset;
    }
    *out = img;
    return SY_OK;
}

sy_status sy_record_spec_apply(const sy_record_spec *s, const void *data, size_t n, const char *where,
                               sy_element *out) {
    if (!s || !out || s->n < 1 || s->n > SY_ELEMENT_MAX)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "record spec: no spec or no element");
    if (!where) where = "record";
    memset(out, 0, sizeof *out);
    sy_feature_spec fs[SY_ELEMENT_MAX];
    sy_tensor *defaults[SY_ELEMENT_MAX] = {NULL}, *v[SY_ELEMENT_MAX] = {NULL};
    sy_status st = SY_OK;
    for (int32_t i = 0; i < s->n && !st; i++) {
        const sy_record_feature *f = &s->f[i];
        bool image_kind = f->kind == SY_RECORD_IMAGE;
        fs[i] = (sy_feature_spec){f->key, f->kind == SY_RECORD_VAR_LEN ? SY_FEATURE_VAR_LEN : SY_FEATURE_FIXED_LEN,
                                  image_kind ? SY_STRING : f->dtype, image_kind ? sy_shape_of(0) : f->shape, NULL};
        if (f->kind == SY_RECORD_FIXED_LEN && f->has_default) {
            if ((st = sy_tensor_new(f->dtype, f->shape, &defaults[i]))) break;
            for (int64_t k = 0, m = sy_tensor_count(defaults[i]); k < m; k++) {
                if (f->dtype == SY_F32) ((float *)sy_tensor_data(defaults[i]))[k] = (float)f->default_value;
                else ((int64_t *)sy_tensor_data(defaults[i]))[k] = (int64_t)f->default_value;
            }
            fs[i].default_value = defaults[i];
        }
    }
    if (!st && (st = sy_parse_single_example(data, n, fs, s->n, v))) st = sy_error(st, "%s: %s", where, sy_last_error());
    for (int32_t i = 0; i < s->n && !st; i++) {
        const sy_record_feature *f = &s->f[i];
        if (f->kind == SY_RECORD_FIXED_LEN) {
            out->c[i] = v[i];
            v[i] = NULL;
        } else if (f->kind == SY_RECORD_VAR_LEN) {
            st = var_len(f, v[i], &out->c[i]);
        } else {
            st = image(f, where, v[i], &out->c[i]);
        }
        out->n = i + 1;
    }
    for (int32_t i = 0; i < s->n; i++) {
        sy_tensor_free(v[i]);
        sy_tensor_free(defaults[i]);
    }
    if (st) sy_element_clear(out);
    return st;
}
