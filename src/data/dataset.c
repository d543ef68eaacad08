/*
 * dataset.c - the core of the input pipeline: dataset nodes and their
 * reference counts, component specs, the public iterator, and the helpers
 * every transformation shares (element copies and checks, errors carried
 * across threads, thread start, unbiased random indices).
 *
 * A dataset is an immutable node (struct sy_dataset, data_internal.h): a
 * kind (its name and how to open it), the specs of its components, its
 * cardinality, its inputs, which it retains, and the kind's own state,
 * allocated with the node. Building a pipeline builds a tree of nodes;
 * nothing runs until an iterator is opened. Opening a node opens an
 * iterator over it (a struct that starts with ds_iter), which opens its
 * inputs as it needs them; each iterator retains its node, so a dataset
 * may be freed while iterators over it live.
 *
 * sy_iterator wraps the root iterator and makes its end and its errors
 * sticky: after an error every call returns the same error again, after the
 * end every call says end, so a caller that goes on calling is safe.
 */
#include "data_internal.h"

#include <string.h>

/* ---- nodes ------------------------------------------------------------------------ */

sy_status ds_node_new(const ds_kind *kind, size_t state_size, const sy_dataset *const *inputs, int32_t n_inputs,
                      sy_dataset **out) {
    *out = NULL;
    SY_ASSERT(n_inputs >= 0 && n_inputs <= DS_MAX_INPUTS);
    size_t head = (size_t)sy_align_up((int64_t)sizeof(sy_dataset), 16);
    sy_dataset *d = sy_calloc(1, head + state_size);
    if (!d) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", kind->name);
    atomic_init(&d->refs, 1);
    d->kind = kind;
    d->cardinality = SY_UNKNOWN;
    d->state = (char *)d + head;
    for (int32_t i = 0; i < n_inputs; i++) d->input[i] = ds_retain(inputs[i]);
    d->n_inputs = n_inputs;
    *out = d;
    return SY_OK;
}

void ds_node_set_specs(sy_dataset *d, const sy_component_spec *spec, int32_t n) {
    SY_ASSERT(n >= 1 && n <= SY_ELEMENT_MAX);
    memcpy(d->spec, spec, (size_t)n * sizeof *spec);
    d->n = n;
}

const sy_dataset *ds_retain(const sy_dataset *d) {
    /* The count is the only thing that changes in an "immutable" node. */
    atomic_fetch_add_explicit(&((sy_dataset *)d)->refs, 1, memory_order_relaxed);
    return d;
}

void sy_dataset_free(sy_dataset *d) {
    if (!d || atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1) return;
    if (d->kind->destroy) d->kind->destroy(d->state);
    for (int32_t i = 0; i < d->n_inputs; i++) sy_dataset_free((sy_dataset *)d->input[i]);
    sy_free(d);
}

int32_t sy_dataset_component_count(const sy_dataset *d) { return d ? d->n : 0; }

sy_component_spec sy_dataset_component_spec(const sy_dataset *d, int32_t index) {
    sy_component_spec none = {SY_DTYPE_COUNT, {0, {0}}};
    if (!d || index < 0 || index >= d->n) return none;
    return d->spec[index];
}

int64_t sy_dataset_cardinality(const sy_dataset *d) { return d ? d->cardinality : SY_UNKNOWN; }

/* ---- internal iterators --------------------------------------------------------- */

void *ds_iter_alloc(size_t size, const ds_iter_ops *ops, const sy_dataset *d) {
    SY_ASSERT(size >= sizeof(ds_iter));
    ds_iter *it = sy_calloc(1, size);
    if (!it) return NULL;
    it->ops = ops;
    it->d = ds_retain(d);
    return it;
}

sy_status ds_iter_new(const sy_dataset *d, size_t size, const ds_iter_ops *ops, ds_iter **out) {
    *out = ds_iter_alloc(size, ops, d);
    return *out ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", d->kind->name);
}

sy_status ds_open(const sy_dataset *d, ds_iter **out) {
    *out = NULL;
    return d->kind->open(d, out);
}

void ds_iter_free(ds_iter *it) {
    if (!it) return;
    if (it->ops->release) it->ops->release(it);
    sy_dataset_free((sy_dataset *)it->d);
    sy_free(it);
}

sy_status ds_transform_new(const ds_kind *kind, size_t state_size, const sy_dataset *in, sy_dataset **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: out is NULL", kind->name);
    *out = NULL;
    if (!in) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the input dataset is NULL", kind->name);
    sy_status st = ds_node_new(kind, state_size, &in, 1, out);
    if (st) return st;
    ds_node_set_specs(*out, in->spec, in->n);
    (*out)->cardinality = in->cardinality;
    return SY_OK;
}

sy_status ds_unary_open(const sy_dataset *d, size_t size, const ds_iter_ops *ops, ds_iter **out) {
    SY_ASSERT(size >= sizeof(ds_unary_iter));
    ds_unary_iter *it;
    sy_status st = ds_iter_new(d, size, ops, (ds_iter **)&it);
    if (!st) st = ds_open(d->input[0], &it->input);
    if (st) {
        ds_iter_free(it ? &it->base : NULL);
        return st;
    }
    *out = &it->base;
    return SY_OK;
}

void ds_unary_release(ds_iter *base) {
    ds_unary_iter *it = (ds_unary_iter *)base;
    ds_iter_free(it->input);
    it->input = NULL;
}

/* ---- the public iterator ---------------------------------------------------------- */

struct sy_iterator {
    ds_iter *root;
    ds_error error; /* sticky */
    bool ended;
};

sy_status sy_dataset_iterator(const sy_dataset *d, sy_iterator **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "iterator: out is NULL");
    *out = NULL;
    if (!d) return sy_error(SY_ERR_INVALID_ARGUMENT, "iterator: the dataset is NULL");
    sy_iterator *it = sy_calloc(1, sizeof *it);
    if (!it) return sy_error(SY_ERR_OUT_OF_MEMORY, "iterator: out of memory");
    sy_status st = ds_open(d, &it->root);
    if (st) {
        sy_free(it);
        return st;
    }
    *out = it;
    return SY_OK;
}

sy_status sy_iterator_next(sy_iterator *it, sy_element *out, bool *end) {
    if (!it || !out || !end) return sy_error(SY_ERR_INVALID_ARGUMENT, "iterator: a NULL argument to next");
    out->n = 0;
    *end = false;
    if (it->error.status) return ds_error_raise(&it->error);
    if (it->ended) {
        *end = true;
        return SY_OK;
    }
    sy_status st = ds_next(it->root, out, end);
    if (st) {
        sy_element_clear(out);
        ds_error_capture(&it->error, st);
        return st;
    }
    if (*end) {
        sy_element_clear(out);
        it->ended = true;
    }
    return SY_OK;
}

void sy_iterator_free(sy_iterator *it) {
    if (!it) return;
    ds_iter_free(it->root);
    ds_error_clear(&it->error);
    sy_free(it);
}

/* ---- elements ------------------------------------------------------------------- */

void sy_element_clear(sy_element *e) {
    if (!e) return;
    for (int32_t i = 0; i < e->n && i < SY_ELEMENT_MAX; i++) {
        sy_tensor_free(e->c[i]);
        e->c[i] = NULL;
    }
    e->n = 0;
}

sy_status ds_element_clone(const sy_element *in, sy_element *out) {
    out->n = 0;
    for (int32_t i = 0; i < in->n; i++) {
        sy_status st = sy_tensor_clone(in->c[i], &out->c[i]);
        if (st) {
            sy_element_clear(out);
            return st;
        }
        out->n = i + 1;
    }
    return SY_OK;
}

size_t ds_element_bytes(const sy_element *e) {
    size_t bytes = 0;
    for (int32_t i = 0; i < e->n; i++) {
        const sy_tensor *t = e->c[i];
        bytes += sy_tensor_bytes(t);
        if (sy_tensor_dtype(t) == SY_STRING)
            for (int64_t k = 0; k < sy_tensor_count(t); k++) bytes += (size_t)sy_tensor_string(t, k).size;
    }
    return bytes;
}

char *ds_spec_format(const sy_component_spec *s, char *buf, size_t size) {
    const char *dtype = (unsigned)s->dtype < SY_DTYPE_COUNT ? sy_dtype_name(s->dtype) : "invalid";
    int k = snprintf(buf, size, "%s (", dtype);
    for (int32_t i = 0; i < s->shape.rank && k > 0 && (size_t)k < size; i++) {
        if (s->shape.dims[i] < 0)
            k += snprintf(buf + k, size - (size_t)k, "%sNone", i ? ", " : "");
        else
            k += snprintf(buf + k, size - (size_t)k, "%s%lld", i ? ", " : "", (long long)s->shape.dims[i]);
    }
    if (k > 0 && (size_t)k < size) snprintf(buf + k, size - (size_t)k, s->shape.rank == 1 ? ",)" : ")");
    return buf;
}

bool ds_element_fits(const sy_element *e, const sy_component_spec *spec, int32_t n) {
    if (e->n != n) return false;
    for (int32_t i = 0; i < n; i++) {
        if (!e->c[i] || sy_tensor_dtype(e->c[i]) != spec[i].dtype) return false;
        sy_shape s = sy_tensor_shape(e->c[i]);
        if (s.rank != spec[i].shape.rank) return false;
        for (int32_t k = 0; k < s.rank; k++)
            if (spec[i].shape.dims[k] >= 0 && spec[i].shape.dims[k] != s.dims[k]) return false;
    }
    return true;
}

sy_status ds_element_check(const sy_element *e, const sy_component_spec *spec, int32_t n, const char *what) {
    if (e->n != n)
        return sy_error(SY_ERR_SHAPE, "%s has %d components but %d are declared", what, (int)e->n, (int)n);
    for (int32_t i = 0; i < n; i++) {
        if (!e->c[i]) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s component %d is NULL", what, (int)i);
        sy_component_spec got = {sy_tensor_dtype(e->c[i]), sy_tensor_shape(e->c[i])};
        bool ok = got.dtype == spec[i].dtype && got.shape.rank == spec[i].shape.rank;
        for (int32_t k = 0; ok && k < got.shape.rank; k++)
            ok = spec[i].shape.dims[k] < 0 || spec[i].shape.dims[k] == got.shape.dims[k];
        if (!ok) {
            char a[DS_SPEC_STR_MAX], b[DS_SPEC_STR_MAX];
            return sy_error(got.dtype == spec[i].dtype ? SY_ERR_SHAPE : SY_ERR_DTYPE,
                            "%s component %d is %s but the declared spec is %s", what, (int)i,
                            ds_spec_format(&got, a, sizeof a), ds_spec_format(&spec[i], b, sizeof b));
        }
    }
    return SY_OK;
}

sy_status ds_specs_check(const sy_component_spec *spec, int32_t n, const char *what) {
    if (n < 1 || n > SY_ELEMENT_MAX || !spec)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %d output components declared; expected 1 to %d", what, (int)n,
                        SY_ELEMENT_MAX);
    for (int32_t i = 0; i < n; i++) {
        if ((unsigned)spec[i].dtype >= SY_DTYPE_COUNT)
            return sy_error(SY_ERR_DTYPE, "%s: component %d has the invalid dtype %d", what, (int)i,
                            (int)spec[i].dtype);
        if (spec[i].dtype == SY_BF16) /* a compiled plan's storage dtype: no tensor holds it */
            return sy_error(SY_ERR_DTYPE,
                            "%s: component %d is bfloat16; a dataset's components are float32, "
                            "float64, int32, uint8, int64 or string",
                            what, (int)i);
        if (spec[i].shape.rank < 0 || spec[i].shape.rank > SY_MAX_RANK)
            return sy_error(SY_ERR_SHAPE, "%s: component %d has rank %d; expected 0 to %d", what, (int)i,
                            (int)spec[i].shape.rank, SY_MAX_RANK);
        for (int32_t k = 0; k < spec[i].shape.rank; k++)
            if (spec[i].shape.dims[k] < -1)
                return sy_error(SY_ERR_SHAPE, "%s: component %d has dimension %lld; expected -1 (unknown) or >= 0",
                                what, (int)i, (long long)spec[i].shape.dims[k]);
    }
    return SY_OK;
}

sy_status ds_fn_error(sy_status status, const char *kind, const char *role, int64_t index) {
    const char *detail = sy_last_error();
    return sy_error(status, "%s: the %s returned %s on element %lld%s%s", kind, role, sy_status_name(status),
                    (long long)index, *detail ? ": " : "", detail);
}

/* ---- errors across threads --------------------------------------------------------- */

void ds_error_capture(ds_error *e, sy_status status) {
    if (e->status || !status) return;
    e->status = status;
    e->message = sy_strdup(sy_last_error()); /* NULL when out of memory: raise says so */
}

sy_status ds_error_raise(const ds_error *e) {
    return sy_error(e->status, "%s", e->message ? e->message : "(out of memory for the error message)");
}

void ds_error_clear(ds_error *e) {
    sy_free(e->message);
    e->message = NULL;
    e->status = SY_OK;
}

sy_status ds_queue_push(ds_queue *q, sy_element *e, const char *what) {
    if (q->count == q->cap) {
        int64_t cap = q->cap ? 2 * q->cap : 4;
        sy_element *grown = sy_calloc((size_t)cap, sizeof *grown);
        if (!grown) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for a buffer of %lld elements", what,
                                    (long long)cap);
        for (int64_t i = 0; i < q->count; i++) grown[i] = q->e[(q->head + i) % q->cap];
        sy_free(q->e);
        q->e = grown;
        q->head = 0;
        q->cap = cap;
    }
    q->bytes += ds_element_bytes(e);
    ds_element_move(&q->e[(q->head + q->count++) % q->cap], e);
    return SY_OK;
}

void ds_queue_pop(ds_queue *q, sy_element *out) {
    SY_ASSERT(q->count > 0);
    ds_element_move(out, &q->e[q->head]);
    q->head = (q->head + 1) % q->cap;
    q->count--;
    size_t bytes = ds_element_bytes(out);
    q->bytes = q->bytes > bytes ? q->bytes - bytes : 0;
}

void ds_queue_clear(ds_queue *q) {
    for (int64_t i = 0; i < q->count; i++) sy_element_clear(&q->e[(q->head + i) % q->cap]);
    sy_free(q->e);
    *q = (ds_queue){0};
}

/* ---- threads and random numbers --------------------------------------------------- */

int ds_threads_start(pthread_t *threads, int n, void *(*fn)(void *), void *arg) {
    for (int i = 0; i < n; i++)
        if (pthread_create(&threads[i], NULL, fn, arg) != 0) return i;
    return n;
}

int ds_autotune_threads(void) { return sy_cpu_count(); }

int ds_chunk_size(double seconds, int max) {
    if (seconds <= 0 || seconds * max <= DS_CHUNK_SECONDS) return max;
    int n = (int)(DS_CHUNK_SECONDS / seconds) + 1;
    return n < 1 ? 1 : n > max ? max : n;
}

uint64_t ds_rng_below(sy_rng *rng, uint64_t n) {
    /* Rejection from 64 random bits: the accepted range is a multiple of n. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t hi = sy_rng_u32(rng);
        uint64_t x = hi << 32 | sy_rng_u32(rng);
        if (x < limit) return x % n;
    }
}
