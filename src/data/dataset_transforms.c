/*
 * dataset_transforms.c - the transformations that run on the consumer's
 * thread: filter, shuffle, batch and padded_batch, repeat, take, skip, shard,
 * zip and concatenate (map, interleave and prefetch are in dataset_parallel.c,
 * cache in dataset_cache.c).
 *
 * Each is a node kind with an open function and an iterator that pulls
 * from its input iterator(s) when asked. Specs and cardinalities follow
 * tf.data's rules, computed when the node is made:
 *   batch          n / B with drop_remainder, else ceil(n / B); the batch
 *                  dimension is B with drop_remainder, else None (-1);
 *   repeat(k)      k * n; forever: infinite unless n is 0;
 *   take(k)        min(n, k);  skip(k): max(0, n - k);
 *   shard(H, h)    the elements i with i % H == h (issue 20: a host's share,
 *                  as tf.data deals input to the hosts of a TPU Pod):
 *                  n / H, plus one for h < n % H;
 *   zip            the smallest;  concatenate: the sum;
 *   filter         unknown;
 * and infinite or unknown inputs stay so (TensorFlow's CardinalityInternal).
 *
 * shuffle keeps a buffer of up to buffer_size elements (grown as it fills,
 * so a buffer_size meant as "everything" costs only what the input holds),
 * hands out one drawn uniformly from it and refills that place with the
 * next input element, as TensorFlow does. Its random stream is
 * (seed, pass): with reshuffle_each_iteration every iterator opened on the
 * node takes the next pass number from a counter in the node (the one
 * mutable thing in it, as TensorFlow's seed generator resource), so the
 * passes of repeat() or of successive fit() epochs differ, but the whole
 * sequence of orders is the same for the same seed.
 */
#include "data_internal.h"

#include <math.h>
#include <string.h>

/* ---- filter ------------------------------------------------------------------------ */

typedef struct filter_state {
    sy_predicate_fn pred;
    void *ctx;
} filter_state;

typedef struct filter_iter {
    ds_unary_iter u;
    int64_t index; /* input elements seen */
} filter_iter;

static sy_status filter_next(ds_iter *base, sy_element *out, bool *end) {
    filter_iter *it = (filter_iter *)base;
    const filter_state *s = base->d->state;
    for (;;) {
        sy_status st = ds_next(it->u.input, out, end);
        if (st || *end) return st;
        bool keep = false;
        sy_clear_error();
        st = s->pred(s->ctx, out, &keep);
        if (st) {
            sy_element_clear(out);
            return ds_fn_error(st, "filter", "predicate", it->index);
        }
        it->index++;
        if (keep) return SY_OK;
        sy_element_clear(out);
    }
}

static const ds_iter_ops filter_iter_ops = {filter_next, ds_unary_release};

static sy_status filter_open(const sy_dataset *d, ds_iter **out) {
    return ds_unary_open(d, sizeof(filter_iter), &filter_iter_ops, out);
}

static const ds_kind filter_kind = {"filter", filter_open, NULL};

sy_status sy_dataset_filter(const sy_dataset *in, sy_predicate_fn pred, void *ctx, sy_dataset **out) {
    if (!pred) return sy_error(SY_ERR_INVALID_ARGUMENT, "filter: the predicate is NULL");
    sy_status st = ds_transform_new(&filter_kind, sizeof(filter_state), in, out);
    if (st) return st;
    filter_state *s = (*out)->state;
    s->pred = pred;
    s->ctx = ctx;
    (*out)->cardinality = SY_UNKNOWN;
    return SY_OK;
}

/* ---- what shuffle and batch share: a buffer filled from the input ---------------------- */

typedef struct elem_buf {
    sy_element *e;
    int64_t count, cap;
    int64_t seen; /* input elements read, for messages */
    bool input_ended;
} elem_buf;

/* Read until b holds `want` elements or the input ends. */
static sy_status buf_fill(elem_buf *b, ds_iter *input, int64_t want, const char *what) {
    while (!b->input_ended && b->count < want) {
        sy_element e = {0};
        bool end;
        sy_status st = ds_next(input, &e, &end);
        if (st) return st;
        if (end) {
            b->input_ended = true;
            break;
        }
        if (SY_GROW(b->e, b->cap, b->count + 1)) {
            sy_element_clear(&e);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for a buffer of %lld elements", what,
                            (long long)b->count + 1);
        }
        ds_element_move(&b->e[b->count++], &e);
        b->seen++;
    }
    return SY_OK;
}

static void buf_drop(elem_buf *b) {
    for (int64_t i = 0; i < b->count; i++) sy_element_clear(&b->e[i]);
    b->count = 0;
}

static void buf_free(elem_buf *b) {
    buf_drop(b);
    sy_free(b->e);
    b->e = NULL;
}

/* ---- shuffle ------------------------------------------------------------------------- */

typedef struct shuffle_state {
    int64_t buffer_size;
    uint64_t seed;
    bool reshuffle;
    atomic_uint_fast64_t passes; /* iterators opened so far */
} shuffle_state;

typedef struct shuffle_iter {
    ds_unary_iter u;
    sy_rng rng;
    elem_buf buf;
} shuffle_iter;

static sy_status shuffle_next(ds_iter *base, sy_element *out, bool *end) {
    shuffle_iter *it = (shuffle_iter *)base;
    const shuffle_state *s = base->d->state;
    elem_buf *b = &it->buf;
    sy_status st = buf_fill(b, it->u.input, s->buffer_size, "shuffle");
    if (st) return st;
    if (b->count == 0) {
        *end = true;
        return SY_OK;
    }
    /* The drawn place is refilled by the next call's read, or by the last
     * element once the input has ended. */
    int64_t k = (int64_t)ds_rng_below(&it->rng, (uint64_t)b->count);
    ds_element_move(out, &b->e[k]);
    ds_element_move(&b->e[k], &b->e[--b->count]);
    return SY_OK;
}

static void shuffle_release(ds_iter *base) {
    buf_free(&((shuffle_iter *)base)->buf);
    ds_unary_release(base);
}

static const ds_iter_ops shuffle_iter_ops = {shuffle_next, shuffle_release};

static sy_status shuffle_open(const sy_dataset *d, ds_iter **out) {
    shuffle_state *s = d->state;
    uint64_t pass = atomic_fetch_add(&s->passes, 1);
    sy_status st = ds_unary_open(d, sizeof(shuffle_iter), &shuffle_iter_ops, out);
    if (st) return st;
    ((shuffle_iter *)*out)->rng = sy_rng_new(s->seed, s->reshuffle ? pass : 0);
    return SY_OK;
}

static const ds_kind shuffle_kind = {"shuffle", shuffle_open, NULL};

/* Visit d's reshuffling shuffles depth first: read (get) or write their
 * pass counters at v[*i]; *i counts them all. */
static void walk_shuffles(const sy_dataset *d, uint64_t *v, int32_t max, bool set, int32_t *i) {
    for (int32_t k = 0; k < d->n_inputs; k++) walk_shuffles(d->input[k], v, max, set, i);
    if (d->kind != &shuffle_kind || !((shuffle_state *)d->state)->reshuffle) return;
    shuffle_state *s = d->state;
    if (*i < max) {
        if (set) atomic_store(&s->passes, v[*i]);
        else v[*i] = atomic_load(&s->passes);
    }
    (*i)++;
}

int32_t sy_dataset_rng_state(const sy_dataset *d, uint64_t *state, int32_t max) {
    int32_t n = 0;
    walk_shuffles(d, state, max, false, &n);
    return n;
}

sy_status sy_dataset_set_rng_state(const sy_dataset *d, const uint64_t *state, int32_t n) {
    int32_t have = sy_dataset_rng_state(d, NULL, 0);
    if (have != n)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "the dataset has %d reshuffling shuffle%s but the saved random state is for %d: another pipeline",
                        have, have == 1 ? "" : "s", n);
    int32_t i = 0;
    walk_shuffles(d, (uint64_t *)state, n, true, &i);
    return SY_OK;
}

sy_status sy_dataset_shuffle(const sy_dataset *in, int64_t buffer_size, uint64_t seed, bool reshuffle_each_iteration,
                             sy_dataset **out) {
    if (buffer_size < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "shuffle: buffer_size is %lld; expected at least 1",
                        (long long)buffer_size);
    sy_status st = ds_transform_new(&shuffle_kind, sizeof(shuffle_state), in, out);
    if (st) return st;
    shuffle_state *s = (*out)->state;
    s->buffer_size = buffer_size;
    s->seed = seed;
    s->reshuffle = reshuffle_each_iteration;
    atomic_init(&s->passes, 0);
    return SY_OK;
}

/* ---- batch and padded_batch ---------------------------------------------------------- */

typedef struct batch_state {
    int64_t batch_size;
    bool drop_remainder, padded;
    sy_shape pad_shape[SY_ELEMENT_MAX]; /* padded: -1 dims pad to the longest */
    double pad_value[SY_ELEMENT_MAX];
} batch_state;

typedef struct batch_iter {
    ds_unary_iter u;
    elem_buf buf; /* the elements of the batch being made */
} batch_iter;

static const char *batch_name(const batch_state *s) { return s->padded ? "padded_batch" : "batch"; }

/* Fill a numeric tensor with v (the padding value); zero is already there. */
static void fill_value(sy_tensor *t, double v) {
    if (v == 0) return;
    void *p = sy_tensor_data(t);
    int64_t n = sy_tensor_count(t);
    for (int64_t i = 0; i < n; i++) switch (sy_tensor_dtype(t)) {
        case SY_F32: ((float *)p)[i] = (float)v; break;
        case SY_F64: ((double *)p)[i] = v; break;
        case SY_I32: ((int32_t *)p)[i] = (int32_t)v; break;
        case SY_I64: ((int64_t *)p)[i] = (int64_t)v; break;
        case SY_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
        default: break;
        }
}

/* Copy src (shape s) into the corner of dst's block at element offset
 * `base`, a block of shape p >= s elementwise: row by row along the last
 * axis; strings copied one by one. */
static sy_status copy_into(sy_tensor *dst, int64_t base, const sy_shape *p, const sy_tensor *src) {
    sy_shape s = sy_tensor_shape(src);
    size_t dsize = sy_dtype_size(sy_tensor_dtype(src));
    bool strings = sy_tensor_dtype(src) == SY_STRING;
    int64_t count = sy_tensor_count(src);
    if (count == 0) return SY_OK;
    int64_t row = s.rank ? s.dims[s.rank - 1] : 1, rows = count / row;
    int64_t idx[SY_MAX_RANK] = {0};
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0; /* the row's start in the padded block */
        for (int32_t k = 0; k + 1 < s.rank; k++) off = off * p->dims[k] + idx[k];
        if (s.rank) off *= p->dims[s.rank - 1];
        if (!strings) {
            memcpy((char *)sy_tensor_data(dst) + (size_t)(base + off) * dsize,
                   (const char *)sy_tensor_data(src) + (size_t)(r * row) * dsize, (size_t)row * dsize);
        } else {
            for (int64_t j = 0; j < row; j++) {
                sy_string str = sy_tensor_string(src, r * row + j);
                sy_status st = sy_tensor_set_string(dst, base + off + j, str.data, (size_t)str.size);
                if (st) return st;
            }
        }
        for (int32_t k = s.rank - 2; k >= 0; k--) { /* the next row's index */
            if (++idx[k] < s.dims[k]) break;
            idx[k] = 0;
        }
    }
    return SY_OK;
}

/* The batch's shape for component c (without the batch axis), checking
 * every element against the first (batch) or the padded shape. */
static sy_status batch_shape(const elem_buf *buf, const batch_state *s, int32_t c, sy_shape *shape) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    const sy_element *e = buf->e;
    int64_t count = buf->count, first = buf->seen - count; /* the first element's index in the input */
    sy_shape s0 = sy_tensor_shape(e[0].c[c]);
    *shape = s0;
    for (int64_t i = 1; i < count && !s->padded; i++) {
        sy_shape si = sy_tensor_shape(e[i].c[c]);
        if (!sy_shape_equal(&si, &s0))
            return sy_error(SY_ERR_SHAPE,
                            "batch: component %d has shape %s in element %lld but %s in the first element of the batch "
                            "(element %lld); padded_batch pads elements of different shapes",
                            (int)c, sy_shape_format(&si, a, sizeof a), (long long)(first + i),
                            sy_shape_format(&s0, b, sizeof b), (long long)first);
    }
    if (!s->padded) return SY_OK;
    const sy_shape *want = &s->pad_shape[c];
    for (int32_t k = 0; k < shape->rank; k++) {
        int64_t longest = 0;
        for (int64_t i = 0; i < count; i++) longest = sy_max64(longest, sy_tensor_shape(e[i].c[c]).dims[k]);
        shape->dims[k] = want->dims[k] >= 0 ? want->dims[k] : longest;
        if (longest <= shape->dims[k]) continue;
        for (int64_t i = 0; i < count; i++) {
            sy_shape si = sy_tensor_shape(e[i].c[c]);
            if (si.dims[k] > want->dims[k])
                return sy_error(SY_ERR_SHAPE, "padded_batch: component %d has shape %s in element %lld, larger than "
                                "its padded shape %s",
                                (int)c, sy_shape_format(&si, a, sizeof a), (long long)(first + i),
                                sy_shape_format(want, b, sizeof b));
        }
    }
    return SY_OK;
}

static sy_status batch_stack(const elem_buf *buf, const batch_state *s, int32_t c, sy_tensor **out) {
    sy_shape shape;
    sy_status st = batch_shape(buf, s, c, &shape);
    if (st) return st;
    sy_shape full = {shape.rank + 1, {buf->count}};
    if (full.rank > SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE, "%s: component %d has rank %d; batching it would pass rank %d", batch_name(s),
                        (int)c, (int)shape.rank, SY_MAX_RANK);
    memcpy(full.dims + 1, shape.dims, (size_t)shape.rank * sizeof *shape.dims);
    sy_dtype dtype = sy_tensor_dtype(buf->e[0].c[c]);
    bool whole = true; /* every element the same shape as the batch's: each byte is copied over */
    for (int64_t i = 0; i < buf->count && whole; i++) {
        sy_shape si = sy_tensor_shape(buf->e[i].c[c]);
        whole = sy_shape_equal(&si, &shape);
    }
    st = whole ? sy_tensor_new_uninit(dtype, full, out) : sy_tensor_new(dtype, full, out);
    if (st) return st;
    if (dtype != SY_STRING && !whole) fill_value(*out, s->pad_value[c]);
    int64_t block = sy_shape_count(&shape);
    for (int64_t i = 0; i < buf->count && !st; i++) {
        const sy_tensor *src = buf->e[i].c[c];
        sy_shape si = sy_tensor_shape(src);
        if (dtype != SY_STRING && sy_shape_equal(&si, &shape))
            memcpy((char *)sy_tensor_data(*out) + (size_t)(i * block) * sy_dtype_size(dtype), sy_tensor_data(src),
                   sy_tensor_bytes(src));
        else
            st = copy_into(*out, i * block, &shape, src);
    }
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

static sy_status batch_next(ds_iter *base, sy_element *out, bool *end) {
    batch_iter *it = (batch_iter *)base;
    const batch_state *s = base->d->state;
    elem_buf *b = &it->buf;
    sy_status st = buf_fill(b, it->u.input, s->batch_size, batch_name(s));
    if (st) return st;
    if (b->count == 0 || (b->count < s->batch_size && s->drop_remainder)) {
        buf_drop(b);
        *end = true;
        return SY_OK;
    }
    for (int32_t c = 0; c < base->d->n && !st; c++) {
        st = batch_stack(b, s, c, &out->c[c]);
        if (!st) out->n = c + 1;
    }
    buf_drop(b);
    if (st) sy_element_clear(out);
    return st;
}

static void batch_release(ds_iter *base) {
    buf_free(&((batch_iter *)base)->buf);
    ds_unary_release(base);
}

static const ds_iter_ops batch_iter_ops = {batch_next, batch_release};

static sy_status batch_open(const sy_dataset *d, ds_iter **out) {
    return ds_unary_open(d, sizeof(batch_iter), &batch_iter_ops, out);
}

static const ds_kind batch_kind = {"batch", batch_open, NULL};
static const ds_kind padded_batch_kind = {"padded_batch", batch_open, NULL};

/* A padding value the component's dtype holds exactly. */
static sy_status check_pad_value(sy_dtype dtype, double v, int32_t c) {
    bool ok;
    switch (dtype) {
    case SY_F32: ok = isnan(v) || (double)(float)v == v || isinf(v); break;
    case SY_F64: ok = true; break;
    case SY_I32: ok = v == trunc(v) && v >= INT32_MIN && v <= INT32_MAX; break;
    case SY_I64: ok = v == trunc(v) && v >= -0x1p63 && v < 0x1p63; break;
    case SY_U8: ok = v == trunc(v) && v >= 0 && v <= 255; break;
    default: ok = v == 0; break; /* strings pad with "" */
    }
    if (ok) return SY_OK;
    return sy_error(SY_ERR_INVALID_ARGUMENT, "padded_batch: padding value %g for component %d is not a%s %s%s", v,
                    (int)c, dtype == SY_I32 || dtype == SY_I64 ? "n" : "", sy_dtype_name(dtype),
                    dtype == SY_STRING ? " (strings pad with \"\": give 0)" : " value");
}

static sy_status batch_new(const sy_dataset *in, int64_t batch_size, const sy_shape *padded_shapes,
                           const double *padding_values, bool drop_remainder, bool padded, sy_dataset **out) {
    const ds_kind *kind = padded ? &padded_batch_kind : &batch_kind;
    if (batch_size < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: batch_size is %lld; expected at least 1", kind->name,
                        (long long)batch_size);
    sy_status st = ds_transform_new(kind, sizeof(batch_state), in, out);
    if (st) return st;
    sy_dataset *d = *out;
    batch_state *s = d->state;
    s->batch_size = batch_size;
    s->drop_remainder = drop_remainder;
    s->padded = padded;
    char a[SY_SHAPE_STR_MAX], b[DS_SPEC_STR_MAX];
    for (int32_t c = 0; c < d->n && !st; c++) {
        sy_component_spec *spec = &d->spec[c];
        if (spec->shape.rank + 1 > SY_MAX_RANK) {
            st = sy_error(SY_ERR_SHAPE, "%s: component %d is %s; batching it would pass rank %d", kind->name, (int)c,
                          ds_spec_format(spec, b, sizeof b), SY_MAX_RANK);
            break;
        }
        if (padded) {
            s->pad_shape[c] = padded_shapes ? padded_shapes[c] : spec->shape;
            if (!padded_shapes)
                for (int32_t k = 0; k < spec->shape.rank; k++) s->pad_shape[c].dims[k] = -1;
            s->pad_value[c] = padding_values ? padding_values[c] : 0;
            st = check_pad_value(spec->dtype, s->pad_value[c], c);
            const sy_shape *p = &s->pad_shape[c];
            if (!st && p->rank != spec->shape.rank)
                st = sy_error(SY_ERR_SHAPE, "padded_batch: the padded shape %s of component %d has rank %d, but the "
                              "component is %s", sy_shape_format(p, a, sizeof a), (int)c, (int)p->rank,
                              ds_spec_format(spec, b, sizeof b));
            for (int32_t k = 0; !st && k < p->rank; k++) {
                int64_t have = spec->shape.dims[k];
                if (p->dims[k] < -1 || (p->dims[k] >= 0 && have > p->dims[k]))
                    st = sy_error(SY_ERR_SHAPE, "padded_batch: component %d is %s; it cannot be padded to %s", (int)c,
                                  ds_spec_format(spec, b, sizeof b), sy_shape_format(p, a, sizeof a));
                else if (p->dims[k] >= 0)
                    spec->shape.dims[k] = p->dims[k]; /* else the input's, known or not */
            }
        }
        memmove(spec->shape.dims + 1, spec->shape.dims, (size_t)spec->shape.rank * sizeof *spec->shape.dims);
        spec->shape.rank++;
        spec->shape.dims[0] = drop_remainder ? batch_size : -1;
    }
    if (st) {
        sy_dataset_free(d);
        *out = NULL;
        return st;
    }
    int64_t n = in->cardinality;
    if (n >= 0) d->cardinality = drop_remainder ? n / batch_size : n / batch_size + (n % batch_size != 0);
    return SY_OK;
}

sy_status sy_dataset_batch(const sy_dataset *in, int64_t batch_size, bool drop_remainder, sy_dataset **out) {
    return batch_new(in, batch_size, NULL, NULL, drop_remainder, false, out);
}

sy_status sy_dataset_padded_batch(const sy_dataset *in, int64_t batch_size, const sy_shape *padded_shapes,
                                  const double *padding_values, bool drop_remainder, sy_dataset **out) {
    return batch_new(in, batch_size, padded_shapes, padding_values, drop_remainder, true, out);
}

/* ---- repeat ------------------------------------------------------------------------------ */

typedef struct count_state {
    int64_t count; /* < 0: forever (repeat), all (take, skip) */
} count_state;

typedef struct repeat_iter {
    ds_unary_iter u;        /* u.input: this pass's, NULL between passes */
    int64_t pass, produced; /* produced: elements in this pass */
} repeat_iter;

static sy_status repeat_next(ds_iter *base, sy_element *out, bool *end) {
    repeat_iter *it = (repeat_iter *)base;
    int64_t count = ((const count_state *)base->d->state)->count;
    for (;;) {
        if (!it->u.input) {
            if (count >= 0 && it->pass >= count) break;
            sy_status st = ds_open(base->d->input[0], &it->u.input);
            if (st) return st;
            it->produced = 0;
        }
        sy_status st = ds_next(it->u.input, out, end);
        if (st) return st;
        if (!*end) {
            it->produced++;
            return SY_OK;
        }
        *end = false;
        ds_unary_release(base);
        it->pass++;
        /* TensorFlow's rule: repeating an empty pass forever ends instead of
         * spinning. */
        if (count < 0 && it->produced == 0) break;
    }
    *end = true;
    return SY_OK;
}

static const ds_iter_ops repeat_iter_ops = {repeat_next, ds_unary_release};

static sy_status repeat_open(const sy_dataset *d, ds_iter **out) {
    return ds_iter_new(d, sizeof(repeat_iter), &repeat_iter_ops, out);
}

static const ds_kind repeat_kind = {"repeat", repeat_open, NULL};

sy_status sy_dataset_repeat(const sy_dataset *in, int64_t count, sy_dataset **out) {
    sy_status st = ds_transform_new(&repeat_kind, sizeof(count_state), in, out);
    if (st) return st;
    ((count_state *)(*out)->state)->count = count < 0 ? -1 : count;
    int64_t n = in->cardinality;
    if (count == 0 || n == 0)
        (*out)->cardinality = 0;
    else if (count < 0)
        (*out)->cardinality = SY_INFINITE;
    else if (n > 0)
        (*out)->cardinality = n > INT64_MAX / count ? SY_INFINITE : n * count;
    return SY_OK;
}

/* ---- take and skip --------------------------------------------------------------------------- */

typedef struct count_iter {
    ds_unary_iter u;
    int64_t done; /* taken, or skipped */
} count_iter;

static sy_status take_next(ds_iter *base, sy_element *out, bool *end) {
    count_iter *it = (count_iter *)base;
    int64_t count = ((const count_state *)base->d->state)->count;
    if (count >= 0 && it->done >= count) {
        *end = true;
        return SY_OK;
    }
    sy_status st = ds_next(it->u.input, out, end);
    if (!st && !*end) it->done++;
    return st;
}

static sy_status skip_next(ds_iter *base, sy_element *out, bool *end) {
    count_iter *it = (count_iter *)base;
    int64_t count = ((const count_state *)base->d->state)->count;
    while (count < 0 || it->done < count) {
        sy_status st = ds_next(it->u.input, out, end);
        if (st || *end) return st;
        sy_element_clear(out);
        it->done++;
    }
    return ds_next(it->u.input, out, end);
}

static const ds_iter_ops take_iter_ops = {take_next, ds_unary_release};
static const ds_iter_ops skip_iter_ops = {skip_next, ds_unary_release};

static sy_status take_open(const sy_dataset *d, ds_iter **out) {
    return ds_unary_open(d, sizeof(count_iter), &take_iter_ops, out);
}

static sy_status skip_open(const sy_dataset *d, ds_iter **out) {
    return ds_unary_open(d, sizeof(count_iter), &skip_iter_ops, out);
}

static const ds_kind take_kind = {"take", take_open, NULL};
static const ds_kind skip_kind = {"skip", skip_open, NULL};

sy_status sy_dataset_take(const sy_dataset *in, int64_t count, sy_dataset **out) {
    sy_status st = ds_transform_new(&take_kind, sizeof(count_state), in, out);
    if (st) return st;
    ((count_state *)(*out)->state)->count = count < 0 ? -1 : count;
    int64_t n = in->cardinality;
    if (count == 0)
        (*out)->cardinality = 0;
    else if (count > 0 && (n == SY_INFINITE || (n >= 0 && n > count)))
        (*out)->cardinality = count;
    return SY_OK;
}

sy_status sy_dataset_skip(const sy_dataset *in, int64_t count, sy_dataset **out) {
    if (in && count < 0 && in->cardinality == SY_INFINITE) {
        if (out) *out = NULL;
        return sy_error(SY_ERR_INVALID_ARGUMENT, "skip: skipping every element of an infinite dataset never ends");
    }
    sy_status st = ds_transform_new(&skip_kind, sizeof(count_state), in, out);
    if (st) return st;
    ((count_state *)(*out)->state)->count = count < 0 ? -1 : count;
    int64_t n = in->cardinality;
    if (count < 0 && n != SY_INFINITE)
        (*out)->cardinality = 0; /* skipping everything of an unknown count leaves nothing too */
    else if (n >= 0)
        (*out)->cardinality = sy_max64(0, n - count);
    return SY_OK;
}

/* ---- shard (issue 20) ------------------------------------------------------------------------ */

typedef struct shard_state {
    int64_t shards, index;
} shard_state;

static sy_status shard_next(ds_iter *base, sy_element *out, bool *end) {
    count_iter *it = (count_iter *)base; /* done: input elements read */
    const shard_state *s = base->d->state;
    for (;;) {
        sy_status st = ds_next(it->u.input, out, end);
        if (st || *end) return st;
        if (it->done++ % s->shards == s->index) return SY_OK;
        sy_element_clear(out);
    }
}

static const ds_iter_ops shard_iter_ops = {shard_next, ds_unary_release};

static sy_status shard_open(const sy_dataset *d, ds_iter **out) {
    return ds_unary_open(d, sizeof(count_iter), &shard_iter_ops, out);
}

static const ds_kind shard_kind = {"shard", shard_open, NULL};

sy_status sy_dataset_shard(const sy_dataset *in, int64_t num_shards, int64_t index, sy_dataset **out) {
    if (out) *out = NULL;
    if (num_shards < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "shard: Number of shards must be greater than zero (currently num_shards = %lld)",
                        (long long)num_shards);
    if (index < 0 || index >= num_shards)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "shard: Index must be between 0 and %lld (currently index = %lld)",
                        (long long)(num_shards - 1), (long long)index);
    sy_status st = ds_transform_new(&shard_kind, sizeof(shard_state), in, out);
    if (st) return st;
    shard_state *s = (*out)->state;
    s->shards = num_shards;
    s->index = index;
    int64_t n = in->cardinality;
    if (n >= 0) (*out)->cardinality = n / num_shards + (index < n % num_shards);
    return SY_OK;
}

/* ---- zip ------------------------------------------------------------------------------------ */

typedef struct zip_iter {
    ds_iter base;
    ds_iter *input[DS_MAX_INPUTS];
} zip_iter;

static sy_status zip_next(ds_iter *base, sy_element *out, bool *end) {
    zip_iter *it = (zip_iter *)base;
    for (int32_t i = 0; i < base->d->n_inputs; i++) {
        sy_element e = {0};
        sy_status st = ds_next(it->input[i], &e, end);
        if (st || *end) {
            sy_element_clear(out);
            return st;
        }
        for (int32_t c = 0; c < e.n; c++) out->c[out->n++] = e.c[c];
    }
    return SY_OK;
}

static void zip_release(ds_iter *base) {
    zip_iter *it = (zip_iter *)base;
    for (int32_t i = 0; i < base->d->n_inputs; i++) ds_iter_free(it->input[i]);
}

static const ds_iter_ops zip_iter_ops = {zip_next, zip_release};

static sy_status zip_open(const sy_dataset *d, ds_iter **out) {
    zip_iter *it;
    sy_status st = ds_iter_new(d, sizeof(zip_iter), &zip_iter_ops, (ds_iter **)&it);
    if (st) return st;
    for (int32_t i = 0; i < d->n_inputs; i++) {
        st = ds_open(d->input[i], &it->input[i]);
        if (st) {
            ds_iter_free(&it->base);
            return st;
        }
    }
    *out = &it->base;
    return SY_OK;
}

static const ds_kind zip_kind = {"zip", zip_open, NULL};

sy_status sy_dataset_zip(const sy_dataset *const *in, int32_t n, sy_dataset **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "zip: out is NULL");
    *out = NULL;
    if (n < 1 || n > DS_MAX_INPUTS || !in)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "zip: %d datasets given; expected 1 to %d", (int)n, DS_MAX_INPUTS);
    int32_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!in[i]) return sy_error(SY_ERR_INVALID_ARGUMENT, "zip: dataset %d is NULL", (int)i);
        total += in[i]->n;
    }
    if (total > SY_ELEMENT_MAX)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "zip: the datasets have %d components together; at most %d fit in an "
                        "element", (int)total, SY_ELEMENT_MAX);
    sy_status st = ds_node_new(&zip_kind, 0, in, n, out);
    if (st) return st;
    sy_dataset *d = *out;
    d->cardinality = SY_INFINITE;
    for (int32_t i = 0; i < n; i++) {
        memcpy(d->spec + d->n, in[i]->spec, (size_t)in[i]->n * sizeof *d->spec);
        d->n += in[i]->n;
        int64_t c = in[i]->cardinality;
        if (c == SY_UNKNOWN || d->cardinality == SY_UNKNOWN)
            d->cardinality = SY_UNKNOWN;
        else if (c != SY_INFINITE && (d->cardinality == SY_INFINITE || c < d->cardinality))
            d->cardinality = c;
    }
    return SY_OK;
}

/* ---- concatenate --------------------------------------------------------------------------------- */

typedef struct concat_iter {
    ds_unary_iter u; /* u.input: a's or b's */
    int32_t which;   /* 0: a, 1: b, 2: done */
} concat_iter;

static sy_status concat_next(ds_iter *base, sy_element *out, bool *end) {
    concat_iter *it = (concat_iter *)base;
    while (it->which < 2) {
        if (!it->u.input) {
            sy_status st = ds_open(base->d->input[it->which], &it->u.input);
            if (st) return st;
        }
        sy_status st = ds_next(it->u.input, out, end);
        if (st || !*end) return st;
        ds_unary_release(base);
        it->which++;
    }
    *end = true;
    return SY_OK;
}

static const ds_iter_ops concat_iter_ops = {concat_next, ds_unary_release};

static sy_status concat_open(const sy_dataset *d, ds_iter **out) {
    return ds_iter_new(d, sizeof(concat_iter), &concat_iter_ops, out);
}

static const ds_kind concat_kind = {"concatenate", concat_open, NULL};

sy_status sy_dataset_concatenate(const sy_dataset *a, const sy_dataset *b, sy_dataset **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "concatenate: out is NULL");
    *out = NULL;
    if (!a || !b) return sy_error(SY_ERR_INVALID_ARGUMENT, "concatenate: dataset %s is NULL", a ? "b" : "a");
    if (a->n != b->n)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "concatenate: the datasets have %d and %d components", (int)a->n,
                        (int)b->n);
    sy_component_spec spec[SY_ELEMENT_MAX];
    for (int32_t c = 0; c < a->n; c++) {
        char x[DS_SPEC_STR_MAX], y[DS_SPEC_STR_MAX];
        if (a->spec[c].dtype != b->spec[c].dtype || a->spec[c].shape.rank != b->spec[c].shape.rank)
            return sy_error(a->spec[c].dtype != b->spec[c].dtype ? SY_ERR_DTYPE : SY_ERR_SHAPE,
                            "concatenate: component %d is %s in the first dataset but %s in the second", (int)c,
                            ds_spec_format(&a->spec[c], x, sizeof x), ds_spec_format(&b->spec[c], y, sizeof y));
        spec[c] = a->spec[c]; /* dimensions that differ become unknown */
        for (int32_t k = 0; k < spec[c].shape.rank; k++)
            if (spec[c].shape.dims[k] != b->spec[c].shape.dims[k]) spec[c].shape.dims[k] = -1;
    }
    const sy_dataset *in[2] = {a, b};
    sy_status st = ds_node_new(&concat_kind, 0, in, 2, out);
    if (st) return st;
    ds_node_set_specs(*out, spec, a->n);
    int64_t na = a->cardinality, nb = b->cardinality;
    if (na == SY_INFINITE || nb == SY_INFINITE)
        (*out)->cardinality = SY_INFINITE;
    else if (na >= 0 && nb >= 0)
        (*out)->cardinality = na > INT64_MAX - nb ? SY_INFINITE : na + nb;
    return SY_OK;
}
