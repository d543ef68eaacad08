/*
 * example.c - tf.train.Example: building and serializing Examples, and
 * parsing them with a feature spec (tf.io.parse_single_example and
 * tf.io.parse_example).
 *
 * The messages are TensorFlow's own (src/data/proto/tensorflow/core/
 * example/{example,feature}.proto, copied from TensorFlow 2.15):
 *
 *   Example   { Features features = 1; }
 *   Features  { map<string, Feature> feature = 1; }   (entries: key = 1, value = 2)
 *   Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
 *                            Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }
 *   FloatList { repeated float value = 1 [packed = true]; }
 *   Int64List { repeated int64 value = 1 [packed = true]; }
 *
 * Building. An sy_example is the protobuf-c structures generated from
 * those files at build time (protoc-c), one allocation per feature holding
 * its map entry, Feature, list, key and a copy of the values; serializing
 * is protobuf-c's pack. Features are written in the order they were added.
 *
 * Parsing. Like TensorFlow's parse_example (example_proto_fast_parsing.cc),
 * the parser reads the wire format itself instead of unpacking a message
 * tree: one pass over an Example finds, for each spec's key, the last map
 * entry with that key, reading only the framing of the other entries; the
 * values of the entries found are then counted and copied straight into
 * the output tensors. Nothing is allocated per Example beyond the outputs
 * and one small table, so the memory a hostile input can cost is bounded
 * by its size (a value takes at least one byte on the wire, and becomes at
 * most 8 bytes, or one string, of output).
 *
 * What the bytes mean follows protobuf's rules, which TensorFlow's own
 * writers never stretch but other writers may: fields in any order;
 * unknown fields, and known ones with an unexpected wire type, skipped
 * (any field number, wire types 0, 1, 2 and 5); a map key given twice
 * keeps the last entry; a message given twice is merged (two `features`
 * add their entries, two `value`s of one entry are read as one Feature);
 * the oneof `kind` keeps the last member given, and a member given twice
 * concatenates its values; repeated floats and int64s packed or not, or
 * both. An entry without a value, or a Feature with no kind, is absent
 * (as TensorFlow treats it). tools/tfrecord_fixtures.py checks these rules
 * against Python's protobuf, and the values against TensorFlow's parser.
 *
 * Errors: SY_ERR_CORRUPT for bytes that are not protobuf wire data
 * (a truncated varint or field, a length past its message, a packed float
 * list that is not a whole number of floats, field number 0, groups, wire
 * types 6 and 7), with the byte offset in the Example (and the Example's
 * index in a batch); SY_ERR_INVALID_ARGUMENT naming the key for a
 * required feature that is absent, a feature of another type than its
 * spec, or a fixed-length feature with the wrong number of values. Wire
 * errors are found in the framing of every entry, and inside the Features
 * of the keys asked for; the Features of other keys are skipped unread,
 * as TensorFlow skips them.
 */
#include "data_internal.h"

#include "tensorflow/core/example/example.pb-c.h"

#include <string.h>

/* ==== building ==================================================================== */

/* One feature: the generated messages, then the values, the key and (for
 * bytes) the bytes, in one allocation. */
typedef struct feature_block {
    Tensorflow__Features__FeatureEntry entry;
    Tensorflow__Feature feature;
    union {
        Tensorflow__BytesList bytes;
        Tensorflow__FloatList floats;
        Tensorflow__Int64List int64s;
    } list;
} feature_block;

struct sy_example {
    Tensorflow__Features__FeatureEntry **entries; /* each the first member of its feature_block */
    int64_t n, cap;
};

sy_status sy_example_new(sy_example **out) {
    *out = sy_calloc(1, sizeof **out);
    return *out ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory for a tf.train.Example");
}

void sy_example_free(sy_example *e) {
    if (!e) return;
    for (int64_t i = 0; i < e->n; i++) sy_free(e->entries[i]);
    sy_free(e->entries);
    sy_free(e);
}

static const char *list_names[] = {"no value", "a bytes_list", "a float_list", "an int64_list"};

/* Add a feature of `kind` (Feature's oneof numbers: 1 bytes, 2 float, 3
 * int64) with n values: elem bytes each, or sy_strings for bytes. */
static sy_status example_add(sy_example *e, const char *key, int kind, const void *values,
                             int64_t n, size_t elem) {
    if (!e || !key)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_example_add: %s is NULL",
                        !e ? "the example" : "the key");
    if (n < 0 || (n > 0 && !values))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "tf.train.Example feature '%s': %lld values at %p",
                        key, (long long)n, values);
    for (int64_t i = 0; i < e->n; i++)
        if (!strcmp(e->entries[i]->key, key))
            return sy_error(
                SY_ERR_INVALID_ARGUMENT,
                "tf.train.Example: the feature '%s' was already added (a key holds one list)", key);
    size_t head = (size_t)sy_align_up(sizeof(feature_block), 16), key_len = strlen(key) + 1;
    size_t bytes = 0;
    if (kind == TENSORFLOW__FEATURE__KIND_BYTES_LIST)
        for (int64_t i = 0; i < n; i++) {
            const sy_string *s = (const sy_string *)values + i;
            if (s->size < 0 || (s->size > 0 && !s->data))
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "tf.train.Example feature '%s': value %lld is %lld bytes at %p",
                                key, (long long)i, (long long)s->size, (const void *)s->data);
            bytes += (size_t)s->size;
        }
    if ((uint64_t)n > (SIZE_MAX / 2 - bytes - head - key_len) / (elem + 1))
        return sy_error(SY_ERR_OUT_OF_MEMORY,
                        "tf.train.Example feature '%s': %lld values are too many", key,
                        (long long)n);
    size_t array = (size_t)n * elem;
    if (SY_GROW(e->entries, e->cap, e->n + 1)) return SY_ERR_OUT_OF_MEMORY;
    feature_block *b = sy_malloc(head + array + key_len + bytes);
    if (!b)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory for the tf.train.Example feature '%s'",
                        key);
    uint8_t *vals = (uint8_t *)b + head;
    char *k = (char *)vals + array;
    memcpy(k, key, key_len);
    Tensorflow__Features__FeatureEntry entry = TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT;
    Tensorflow__Feature feature = TENSORFLOW__FEATURE__INIT;
    b->entry = entry;
    b->entry.key = k;
    b->entry.value = &b->feature;
    b->feature = feature;
    b->feature.kind_case = (Tensorflow__Feature__KindCase)kind;
    if (kind == TENSORFLOW__FEATURE__KIND_BYTES_LIST) {
        Tensorflow__BytesList list = TENSORFLOW__BYTES_LIST__INIT;
        ProtobufCBinaryData *d = (ProtobufCBinaryData *)(void *)vals;
        uint8_t *data = (uint8_t *)k + key_len;
        for (int64_t i = 0; i < n; i++) {
            const sy_string *s = (const sy_string *)values + i;
            d[i].len = (size_t)s->size;
            d[i].data = data;
            if (s->size) memcpy(data, s->data, (size_t)s->size);
            data += s->size;
        }
        list.n_value = (size_t)n;
        list.value = d;
        b->list.bytes = list;
        b->feature.bytes_list = &b->list.bytes;
    } else if (kind == TENSORFLOW__FEATURE__KIND_FLOAT_LIST) {
        b->list.floats = (Tensorflow__FloatList)TENSORFLOW__FLOAT_LIST__INIT;
        b->list.floats.n_value = (size_t)n;
        b->list.floats.value = (float *)(void *)vals;
        b->feature.float_list = &b->list.floats;
    } else {
        b->list.int64s = (Tensorflow__Int64List)TENSORFLOW__INT64_LIST__INIT;
        b->list.int64s.n_value = (size_t)n;
        b->list.int64s.value = (int64_t *)(void *)vals;
        b->feature.int64_list = &b->list.int64s;
    }
    if (kind != TENSORFLOW__FEATURE__KIND_BYTES_LIST && n) memcpy(vals, values, array);
    e->entries[e->n++] = &b->entry;
    return SY_OK;
}

sy_status sy_example_add_floats(sy_example *e, const char *key, const float *values, int64_t n) {
    return example_add(e, key, TENSORFLOW__FEATURE__KIND_FLOAT_LIST, values, n, sizeof(float));
}

sy_status sy_example_add_int64s(sy_example *e, const char *key, const int64_t *values, int64_t n) {
    return example_add(e, key, TENSORFLOW__FEATURE__KIND_INT64_LIST, values, n, sizeof(int64_t));
}

sy_status sy_example_add_bytes(sy_example *e, const char *key, const sy_string *values, int64_t n) {
    return example_add(e, key, TENSORFLOW__FEATURE__KIND_BYTES_LIST, values, n,
                       sizeof(ProtobufCBinaryData));
}

sy_status sy_example_serialize(const sy_example *e, sy_tensor **out) {
    *out = NULL;
    if (!e) return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_example_serialize: the example is NULL");
    Tensorflow__Features features = TENSORFLOW__FEATURES__INIT;
    features.n_feature = (size_t)e->n;
    features.feature = e->entries;
    Tensorflow__Example example = TENSORFLOW__EXAMPLE__INIT;
    example.features = &features;
    size_t size = tensorflow__example__get_packed_size(&example);
    uint8_t *buf = sy_malloc(size);
    if (!buf)
        return sy_error(SY_ERR_OUT_OF_MEMORY,
                        "out of memory serializing a tf.train.Example (%zu bytes)", size);
    size_t packed = tensorflow__example__pack(&example, buf);
    SY_ASSERT(packed == size);
    sy_status st = sy_tensor_new(SY_STRING, sy_shape_of(0), out);
    if (!st) st = sy_tensor_set_string(*out, 0, buf, size);
    sy_free(buf);
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

/* ==== the wire format ============================================================= */

/* One serialized Example: where its bytes start (offsets in messages
 * count from there) and its index in the batch (-1: a single Example). */
typedef struct ex_src {
    const uint8_t *base;
    size_t n;
    int64_t index;
} ex_src;

/* "serialized Example 3" or "serialized Example". */
static const char *ex_name(const ex_src *s, char *buf, size_t size) {
    if (s->index < 0) return "serialized Example";
    snprintf(buf, size, "serialized Example %lld", (long long)s->index);
    return buf;
}

static sy_status wire_error(const ex_src *s, const uint8_t *at, const char *what) {
    char name[48];
    return sy_error(SY_ERR_CORRUPT, "%s: bad protobuf wire data at byte %zu of %zu: %s",
                    ex_name(s, name, sizeof name), (size_t)(at - s->base), s->n, what);
}

/* A varint of at most 10 bytes before end; bits past 64 are dropped, as
 * protobuf drops them. */
static bool varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    uint64_t x = 0;
    for (int i = 0; i < 10 && p < end; i++) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *v = x;
            return true;
        }
    }
    return false;
}

enum { WIRE_VARINT = 0, WIRE_64BIT = 1, WIRE_LEN = 2, WIRE_32BIT = 5 };

typedef struct field {
    uint32_t number;
    int type;
    const uint8_t *at; /* the tag */
    const uint8_t *
        val; /* the value: a varint's bytes, 4 or 8 bytes, or a length-delimited field's contents */
    size_t len;
} field;

/* The field at *pp (before end), its extent checked; *pp moves past it. */
static sy_status next_field(const ex_src *s, const uint8_t **pp, const uint8_t *end, field *f) {
    const uint8_t *p = *pp;
    uint64_t key, v;
    f->at = p;
    if (!varint(&p, end, &key))
        return wire_error(s, f->at, "a field's tag is truncated or longer than 10 bytes");
    if (key >> 3 == 0 || key >> 3 > 0x1fffffff)
        return wire_error(s, f->at, "a field number outside 1..2^29-1");
    f->number = (uint32_t)(key >> 3);
    f->type = (int)(key & 7);
    f->val = p;
    switch (f->type) {
    case WIRE_VARINT:
        if (!varint(&p, end, &v))
            return wire_error(s, f->val, "a varint is truncated or longer than 10 bytes");
        f->len = (size_t)(p - f->val);
        break;
    case WIRE_64BIT:
    case WIRE_32BIT:
        f->len = f->type == WIRE_64BIT ? 8 : 4;
        if ((size_t)(end - p) < f->len)
            return wire_error(s, f->val, "a fixed-size value runs past the end of its message");
        p += f->len;
        break;
    case WIRE_LEN:
        if (!varint(&p, end, &v))
            return wire_error(s, f->val, "a length is truncated or longer than 10 bytes");
        if (v > (uint64_t)(end - p)) {
            char why[128];
            snprintf(why, sizeof why,
                     "a field of %llu bytes runs past the end of its message (%zu bytes left)",
                     (unsigned long long)v, (size_t)(end - p));
            return wire_error(s, f->val, why);
        }
        f->val = p;
        f->len = (size_t)v;
        p += v;
        break;
    case 3:
    case 4:
        return wire_error(s, f->at,
                          "a group (wire type 3 or 4), which tf.train.Example never holds");
    default:
        return wire_error(s, f->at, "an invalid wire type (6 or 7)");
    }
    *pp = p;
    return SY_OK;
}

/* A part of an Example: a map entry's bytes. */
typedef struct range {
    const uint8_t *p;
    size_t n;
} range;

/* The key of a spec, with its length. */
typedef struct spec_key {
    const char *key;
    size_t len;
} spec_key;

/* Record in found[k] the last map entry whose key is keys[k], for every k. */
static sy_status match_entries(const ex_src *s, const spec_key *keys, int32_t n_keys,
                               range *found) {
    const uint8_t *p = s->base, *end = s->base + s->n;
    while (p < end) {
        field ex;
        sy_status st = next_field(s, &p, end, &ex);
        if (st) return st;
        if (ex.number != 1 || ex.type != WIRE_LEN) continue; /* Example.features */
        for (const uint8_t *q = ex.val, *q_end = ex.val + ex.len; q < q_end;) {
            field entry;
            if ((st = next_field(s, &q, q_end, &entry))) return st;
            if (entry.number != 1 || entry.type != WIRE_LEN) continue; /* Features.feature */
            const uint8_t *key = NULL;
            size_t key_len = 0;
            for (const uint8_t *r = entry.val, *r_end = entry.val + entry.len; r < r_end;) {
                field f;
                if ((st = next_field(s, &r, r_end, &f))) return st;
                if (f.number == 1 && f.type == WIRE_LEN) key = f.val, key_len = f.len;
            }
            for (int32_t k = 0; k < n_keys; k++)
                if (keys[k].len == key_len && (!key_len || !memcmp(keys[k].key, key, key_len)))
                    found[k] = (range){entry.val, entry.len};
        }
    }
    return SY_OK;
}

/* ---- a Feature's values ---- */

enum { KIND_NONE = 0, KIND_BYTES = 1, KIND_FLOAT = 2, KIND_INT64 = 3 };

/* Where the values of an entry's Feature go: counted, or copied to f, i or
 * strings[at...]. */
typedef struct values {
    int kind;            /* the Feature's kind: the last oneof member given */
    const uint8_t *from; /* the first list of that kind after the last of another */
    int64_t count;
    float *f;
    int64_t *i;
    sy_tensor *strings;
    int64_t at;
} values;

/* The values of one list message of v->kind. */
static sy_status list_values(const ex_src *s, const field *list, values *v) {
    sy_status st;
    for (const uint8_t *p = list->val, *end = list->val + list->len; p < end;) {
        field f;
        if ((st = next_field(s, &p, end, &f))) return st;
        if (f.number != 1) continue;
        if (v->kind == KIND_BYTES && f.type == WIRE_LEN) {
            if (v->strings && (st = sy_tensor_set_string(v->strings, v->at++, f.val, f.len)))
                return st;
            v->count++;
        } else if (v->kind == KIND_FLOAT && (f.type == WIRE_LEN || f.type == WIRE_32BIT)) {
            if (f.len % 4)
                return wire_error(s, f.val, "a packed float_list's length is not a multiple of 4");
            for (size_t k = 0; v->f && k < f.len; k += 4) {
                uint32_t bits = io_le32(f.val + k);
                memcpy(v->f++, &bits, 4);
            }
            v->count += (int64_t)(f.len / 4);
        } else if (v->kind == KIND_INT64 && (f.type == WIRE_LEN || f.type == WIRE_VARINT)) {
            for (const uint8_t *q = f.val, *q_end = f.val + f.len; q < q_end;) {
                uint64_t x;
                if (!varint(&q, q_end, &x))
                    return wire_error(
                        s, q, "a packed int64_list's varint is truncated or longer than 10 bytes");
                if (v->i) *v->i++ = (int64_t)x;
                v->count++;
            }
        }
    }
    return SY_OK;
}

/* Visit the kind fields (bytes_list, float_list, int64_list) of an entry's
 * Feature -- all its value fields, merged -- in order: to find the kind
 * (values NULL) or to read the lists of v->kind from v->from on. */
static sy_status feature_walk(const ex_src *s, range entry, values *v, bool read) {
    sy_status st;
    for (const uint8_t *p = entry.p, *end = entry.p + entry.n; p < end;) {
        field value;
        if ((st = next_field(s, &p, end, &value))) return st;
        if (value.number != 2 || value.type != WIRE_LEN)
            continue; /* the entry's value, a Feature */
        for (const uint8_t *q = value.val, *q_end = value.val + value.len; q < q_end;) {
            field f;
            if ((st = next_field(s, &q, q_end, &f))) return st;
            if (f.number < 1 || f.number > 3 || f.type != WIRE_LEN) continue;
            if (!read && (int)f.number != v->kind) {
                v->kind = (int)f.number;
                v->from = f.at;
            } else if (read && (int)f.number == v->kind && f.at >= v->from &&
                       (st = list_values(s, &f, v))) {
                return st;
            }
        }
    }
    return SY_OK;
}

/* The kind and the number of values of an entry's Feature. */
static sy_status feature_count(const ex_src *s, range entry, values *v) {
    memset(v, 0, sizeof *v);
    if (!entry.p) return SY_OK;
    sy_status st = feature_walk(s, entry, v, false);
    if (!st && v->kind) st = feature_walk(s, entry, v, true);
    return st;
}

/* ==== parsing with a spec =========================================================== */

static int kind_of(sy_dtype dtype) {
    return dtype == SY_F32      ? KIND_FLOAT
           : dtype == SY_I64    ? KIND_INT64
           : dtype == SY_STRING ? KIND_BYTES
                                : KIND_NONE;
}

static sy_status check_specs(const sy_feature_spec *specs, int32_t n_specs, bool batch) {
    if (n_specs < 0 || (n_specs > 0 && !specs))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_example: %d feature specs at %p", n_specs,
                        (const void *)specs);
    char buf[SY_SHAPE_STR_MAX], dbuf[SY_SHAPE_STR_MAX];
    for (int32_t k = 0; k < n_specs; k++) {
        const sy_feature_spec *sp = &specs[k];
        const char *key = sp->key ? sp->key : "(null)";
        if (!sp->key)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_example: feature spec %d has no key",
                            k);
        if (sp->kind != SY_FEATURE_FIXED_LEN && sp->kind != SY_FEATURE_VAR_LEN)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_example: feature '%s': invalid kind %d",
                            key, (int)sp->kind);
        if (!kind_of(sp->dtype))
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "parse_example: feature '%s': dtype %s; a tf.train.Example holds "
                            "float32 (float_list), "
                            "int64 (int64_list) or string (bytes_list)",
                            key, sy_dtype_name(sp->dtype));
        if (sp->kind == SY_FEATURE_VAR_LEN) continue;
        int32_t max_rank = batch ? SY_MAX_RANK - 1 : SY_MAX_RANK;
        if (sp->shape.rank < 0 || sp->shape.rank > max_rank)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "parse_example: feature '%s': rank %d is outside [0, %d]", key,
                            sp->shape.rank, max_rank);
        for (int32_t d = 0; d < sp->shape.rank; d++)
            if (sp->shape.dims[d] < 0)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "parse_example: feature '%s': shape %s has a negative dimension",
                                key, sy_shape_format(&sp->shape, buf, sizeof buf));
        const sy_tensor *dv = sp->default_value;
        if (dv && (sy_tensor_dtype(dv) != sp->dtype ||
                   sy_tensor_count(dv) != sy_shape_count(&sp->shape))) {
            sy_shape ds = sy_tensor_shape(dv);
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "parse_example: feature '%s': the default value is %s %s, the spec "
                            "needs %s with %lld "
                            "values (shape %s)",
                            key, sy_dtype_name(sy_tensor_dtype(dv)),
                            sy_shape_format(&ds, dbuf, sizeof dbuf), sy_dtype_name(sp->dtype),
                            (long long)sy_shape_count(&sp->shape),
                            sy_shape_format(&sp->shape, buf, sizeof buf));
        }
    }
    return SY_OK;
}

/* The output tensor of a spec: (B, shape...) or shape for a fixed-length
 * one (single: no batch dimension), (total,) for a variable-length one. */
static sy_status new_output(const sy_feature_spec *sp, int64_t batch, bool single, int64_t total,
                            sy_tensor **out) {
    sy_shape shape = sy_shape_of(1, total);
    if (sp->kind == SY_FEATURE_FIXED_LEN && single) {
        shape = sp->shape;
    } else if (sp->kind == SY_FEATURE_FIXED_LEN) {
        shape.rank = sp->shape.rank + 1;
        shape.dims[0] = batch;
        for (int32_t d = 0; d < sp->shape.rank; d++) shape.dims[d + 1] = sp->shape.dims[d];
    }
    return sy_tensor_new(sp->dtype, shape, out);
}

/* Copy the default of a fixed-length spec into row b of out. */
static sy_status copy_default(const sy_feature_spec *sp, sy_tensor *out, int64_t b) {
    int64_t n = sy_shape_count(&sp->shape);
    if (sp->dtype != SY_STRING) {
        size_t size = sy_dtype_size(sp->dtype);
        memcpy((uint8_t *)sy_tensor_data(out) + (size_t)(b * n) * size,
               sy_tensor_data(sp->default_value), (size_t)n * size);
        return SY_OK;
    }
    for (int64_t k = 0; k < n; k++) {
        sy_string v = sy_tensor_string(sp->default_value, k);
        sy_status st = sy_tensor_set_string(out, b * n + k, v.data, (size_t)v.size);
        if (st) return st;
    }
    return SY_OK;
}

static const char *dtype_list(sy_dtype dtype) {
    return dtype == SY_F32 ? "a float_list" : dtype == SY_I64 ? "an int64_list" : "a bytes_list";
}

/* What was found of a spec's feature in one Example: its number of
 * values (-1: absent) and where its lists of the right kind start. */
typedef struct feature_seen {
    int64_t count;
    const uint8_t *from;
} feature_seen;

/* Parse spec k of every Example: count (and check) the values, make the
 * output, copy them in. found[b * n_specs + k] is the entry of Example b. */
static sy_status parse_spec(const ex_src *src, int64_t batch, bool single,
                            const sy_feature_spec *specs, int32_t n_specs, int32_t k,
                            const range *found, feature_seen *seen, sy_tensor **out,
                            sy_tensor **splits) {
    const sy_feature_spec *sp = &specs[k];
    bool fixed = sp->kind == SY_FEATURE_FIXED_LEN;
    int64_t want = fixed ? sy_shape_count(&sp->shape) : 0, total = 0;
    char name[48], buf[SY_SHAPE_STR_MAX];
    sy_status st;
    for (int64_t b = 0; b < batch; b++) {
        values v;
        if ((st = feature_count(&src[b], found[b * n_specs + k], &v))) return st;
        seen[b] = (feature_seen){v.count, v.from};
        total += v.count;
        if (v.kind == KIND_NONE) {
            seen[b].count = -1;
            if (fixed && !sp->default_value)
                return sy_error(
                    SY_ERR_INVALID_ARGUMENT,
                    "%s: feature '%s' is required (fixed-length, no default value) but absent",
                    ex_name(&src[b], name, sizeof name), sp->key);
        } else if (v.kind != kind_of(sp->dtype)) {
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: feature '%s' is %s, its spec asks for %s (%s)",
                            ex_name(&src[b], name, sizeof name), sp->key, list_names[v.kind],
                            sy_dtype_name(sp->dtype), dtype_list(sp->dtype));
        } else if (fixed && v.count != want) {
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: feature '%s' has %lld values, its spec's shape %s needs %lld",
                            ex_name(&src[b], name, sizeof name), sp->key, (long long)v.count,
                            sy_shape_format(&sp->shape, buf, sizeof buf), (long long)want);
        }
    }
    if ((st = new_output(sp, batch, single, total, out))) return st;
    if (!fixed && splits) {
        if ((st = sy_tensor_new(SY_I64, sy_shape_of(1, batch + 1), splits))) return st;
        int64_t *rs = sy_tensor_data(*splits);
        for (int64_t b = 0; b < batch; b++)
            rs[b + 1] = rs[b] + (seen[b].count > 0 ? seen[b].count : 0);
    }
    values v = {.kind = kind_of(sp->dtype)};
    if (sp->dtype == SY_F32) v.f = sy_tensor_data(*out);
    if (sp->dtype == SY_I64) v.i = sy_tensor_data(*out);
    if (sp->dtype == SY_STRING) v.strings = *out;
    for (int64_t b = 0; b < batch; b++) {
        if (seen[b].count < 0) {
            if (fixed && (st = copy_default(sp, *out, b))) return st;
            if (fixed && v.f) v.f += want;
            if (fixed && v.i) v.i += want;
            if (fixed) v.at += want;
            continue;
        }
        v.from = seen[b].from;
        int64_t before = v.count;
        if ((st = feature_walk(&src[b], found[b * n_specs + k], &v, true))) return st;
        SY_ASSERT(v.count - before == seen[b].count);
    }
    return SY_OK;
}

/* Parse `batch` Examples; single: one Example, fixed-length outputs
 * without the batch dimension. */
static sy_status parse_examples(const sy_string *examples, int64_t batch, bool single,
                                const sy_feature_spec *specs, int32_t n_specs, sy_tensor **out,
                                sy_tensor **row_splits) {
    static const uint8_t nothing[1];
    sy_status st = check_specs(specs, n_specs, !single);
    if (st) return st;
    if (n_specs > 0 && !out) return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_example: out is NULL");
    spec_key keys_stack[16],
        *keys = n_specs <= 16 ? keys_stack : sy_malloc(sizeof *keys * (size_t)n_specs);
    range *found = sy_calloc((size_t)(batch * n_specs) + 1, sizeof *found);
    ex_src *src = sy_malloc(sizeof *src * (size_t)(batch + 1));
    feature_seen *seen = sy_malloc(sizeof *seen * (size_t)(batch + 1));
    if (!keys || !found || !src || !seen) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "parse_example: out of memory for %lld Examples",
                      (long long)batch);
        goto done;
    }
    for (int32_t k = 0; k < n_specs; k++) keys[k] = (spec_key){specs[k].key, strlen(specs[k].key)};
    for (int64_t b = 0; b < batch; b++) {
        src[b] = (ex_src){examples[b].size ? examples[b].data : nothing, (size_t)examples[b].size,
                          single ? -1 : b};
        if ((st = match_entries(&src[b], keys, n_specs, found + b * n_specs))) goto done;
    }
    for (int32_t k = 0; k < n_specs; k++) {
        sy_tensor **splits =
            row_splits && specs[k].kind == SY_FEATURE_VAR_LEN ? &row_splits[k] : NULL;
        if ((st = parse_spec(src, batch, single, specs, n_specs, k, found, seen, &out[k], splits)))
            goto done;
    }
done:
    if (keys != keys_stack) sy_free(keys);
    sy_free(found);
    sy_free(src);
    sy_free(seen);
    if (st)
        for (int32_t k = 0; k < n_specs; k++) {
            sy_tensor_free(out[k]);
            out[k] = NULL;
            if (row_splits) {
                sy_tensor_free(row_splits[k]);
                row_splits[k] = NULL;
            }
        }
    return st;
}

static void clear_outputs(int32_t n_specs, sy_tensor **out, sy_tensor **row_splits) {
    for (int32_t k = 0; out && k < n_specs; k++) out[k] = NULL;
    for (int32_t k = 0; row_splits && k < n_specs; k++) row_splits[k] = NULL;
}

sy_status sy_parse_single_example(const void *data, size_t n, const sy_feature_spec *specs,
                                  int32_t n_specs, sy_tensor **out) {
    clear_outputs(n_specs, out, NULL);
    if (!data && n)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_single_example: %zu bytes at NULL", n);
    if (n > INT64_MAX)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_single_example: %zu bytes", n);
    sy_string one = {data, (int64_t)n};
    return parse_examples(&one, 1, true, specs, n_specs, out, NULL);
}

sy_status sy_parse_example(const sy_tensor *serialized, const sy_feature_spec *specs,
                           int32_t n_specs, sy_tensor **out, sy_tensor **row_splits) {
    clear_outputs(n_specs, out, row_splits);
    if (!serialized) return sy_error(SY_ERR_INVALID_ARGUMENT, "parse_example: serialized is NULL");
    if (sy_tensor_dtype(serialized) != SY_STRING)
        return sy_error(SY_ERR_DTYPE, "parse_example: serialized is %s, expected string",
                        sy_dtype_name(sy_tensor_dtype(serialized)));
    sy_shape shape = sy_tensor_shape(serialized);
    char buf[SY_SHAPE_STR_MAX];
    if (shape.rank != 1)
        return sy_error(SY_ERR_SHAPE,
                        "parse_example: serialized has shape %s, expected a batch (B,)",
                        sy_shape_format(&shape, buf, sizeof buf));
    for (int32_t k = 0; k < n_specs && specs; k++)
        if (specs[k].kind == SY_FEATURE_VAR_LEN && !row_splits)
            return sy_error(
                SY_ERR_INVALID_ARGUMENT,
                "parse_example: feature '%s' is variable-length, and row_splits is NULL",
                specs[k].key ? specs[k].key : "(null)");
    return parse_examples(sy_tensor_data(serialized), shape.dims[0], false, specs, n_specs, out,
                          row_splits);
}
