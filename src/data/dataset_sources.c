/*
 * dataset_sources.c - the in-memory sources (from_tensor_slices,
 * from_tensors, range) and list_files.
 *
 * The tensor sources copy their tensors when the dataset is made, so the
 * caller's may change or go; an iterator is an index into them, and each
 * element is a fresh copy of a slice (strings copied byte for byte).
 * list_files globs when it is called, as tf.data.Dataset.list_files does,
 * sorts the names bytewise (glob(3) sorts by the locale's collation) and
 * is then from_tensor_slices over them, shuffled when asked with a buffer
 * holding every name (reshuffled on every pass, as TensorFlow's).
 */
#include "data_internal.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

/* ---- from_tensor_slices and from_tensors ------------------------------------------ */

typedef struct tensors_state {
    int32_t n;
    sy_tensor *t[SY_ELEMENT_MAX];
    int64_t rows; /* slices: the shared first dimension; one element otherwise */
    bool slices;
} tensors_state;

typedef struct tensors_iter {
    ds_iter base;
    int64_t next;
} tensors_iter;

static void tensors_destroy(void *state) {
    tensors_state *s = state;
    for (int32_t i = 0; i < s->n; i++) sy_tensor_free(s->t[i]);
}

/* Row `row` of t along its first axis, a new tensor of shape dims[1:]. */
static sy_status tensor_slice(const sy_tensor *t, int64_t row, sy_tensor **out) {
    sy_shape full = sy_tensor_shape(t);
    sy_status st = sy_tensor_new(sy_tensor_dtype(t), sy_shape_from(full.rank - 1, full.dims + 1), out);
    if (st) return st;
    int64_t count = sy_tensor_count(*out);
    if (sy_tensor_dtype(t) != SY_STRING) {
        size_t bytes = sy_tensor_bytes(*out);
        memcpy(sy_tensor_data(*out), (const char *)sy_tensor_data(t) + (size_t)row * bytes, bytes);
        return SY_OK;
    }
    for (int64_t k = 0; k < count && !st; k++) {
        sy_string s = sy_tensor_string(t, row * count + k);
        st = sy_tensor_set_string(*out, k, s.data, (size_t)s.size);
    }
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

static sy_status tensors_next(ds_iter *base, sy_element *out, bool *end) {
    tensors_iter *it = (tensors_iter *)base;
    const tensors_state *s = base->d->state;
    if (it->next >= s->rows) {
        *end = true;
        return SY_OK;
    }
    for (int32_t i = 0; i < s->n; i++) {
        sy_status st = s->slices ? tensor_slice(s->t[i], it->next, &out->c[i]) : sy_tensor_clone(s->t[i], &out->c[i]);
        if (st) {
            sy_element_clear(out);
            return st;
        }
        out->n = i + 1;
    }
    it->next++;
    return SY_OK;
}

static const ds_iter_ops tensors_iter_ops = {tensors_next, NULL};

static sy_status tensors_open(const sy_dataset *d, ds_iter **out) {
    return ds_iter_new(d, sizeof(tensors_iter), &tensors_iter_ops, out);
}

static const ds_kind from_tensor_slices_kind = {"from_tensor_slices", tensors_open, tensors_destroy};
static const ds_kind from_tensors_kind = {"from_tensors", tensors_open, tensors_destroy};

static sy_status tensors_new(sy_tensor *const *tensors, int32_t n, bool slices, sy_dataset **out) {
    const ds_kind *kind = slices ? &from_tensor_slices_kind : &from_tensors_kind;
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: out is NULL", kind->name);
    *out = NULL;
    if (n < 1 || n > SY_ELEMENT_MAX || !tensors)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %d tensors given; expected 1 to %d", kind->name, (int)n,
                        SY_ELEMENT_MAX);
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    for (int32_t i = 0; i < n; i++) {
        if (!tensors[i]) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: tensor %d is NULL", kind->name, (int)i);
        sy_shape s = sy_tensor_shape(tensors[i]), s0 = sy_tensor_shape(tensors[0]);
        if (slices && s.rank == 0)
            return sy_error(SY_ERR_SHAPE, "%s: tensor %d is a scalar; slices need a first axis", kind->name, (int)i);
        if (slices && s.dims[0] != s0.dims[0])
            return sy_error(SY_ERR_SHAPE, "%s: tensor %d has shape %s but tensor 0 has %s: the first dimensions differ",
                            kind->name, (int)i, sy_shape_format(&s, a, sizeof a), sy_shape_format(&s0, b, sizeof b));
    }
    sy_dataset *d;
    sy_status st = ds_node_new(kind, sizeof(tensors_state), NULL, 0, &d);
    if (st) return st;
    tensors_state *s = d->state;
    s->slices = slices;
    for (int32_t i = 0; i < n; i++) {
        st = sy_tensor_clone(tensors[i], &s->t[i]);
        if (st) {
            sy_dataset_free(d);
            return st;
        }
        s->n = i + 1;
        sy_shape shape = sy_tensor_shape(tensors[i]);
        d->spec[i].dtype = sy_tensor_dtype(tensors[i]);
        d->spec[i].shape = slices ? sy_shape_from(shape.rank - 1, shape.dims + 1) : shape;
    }
    d->n = n;
    s->rows = slices ? sy_tensor_shape(tensors[0]).dims[0] : 1;
    d->cardinality = s->rows;
    *out = d;
    return SY_OK;
}

sy_status sy_dataset_from_tensor_slices(sy_tensor *const *tensors, int32_t n, sy_dataset **out) {
    return tensors_new(tensors, n, true, out);
}

sy_status sy_dataset_from_tensors(sy_tensor *const *tensors, int32_t n, sy_dataset **out) {
    return tensors_new(tensors, n, false, out);
}

/* ---- range --------------------------------------------------------------------------- */

typedef struct range_state {
    int64_t start, step, count;
} range_state;

typedef struct range_iter {
    ds_iter base;
    int64_t index;
} range_iter;

static sy_status range_next(ds_iter *base, sy_element *out, bool *end) {
    range_iter *it = (range_iter *)base;
    const range_state *s = base->d->state;
    if (it->index >= s->count) {
        *end = true;
        return SY_OK;
    }
    sy_status st = sy_tensor_new(SY_I64, sy_shape_of(0), &out->c[0]);
    if (st) return st;
    /* start + index * step cannot overflow: it lies between start and stop. */
    *(int64_t *)sy_tensor_data(out->c[0]) = (int64_t)((uint64_t)s->start + (uint64_t)it->index * (uint64_t)s->step);
    out->n = 1;
    it->index++;
    return SY_OK;
}

static const ds_iter_ops range_iter_ops = {range_next, NULL};

static sy_status range_open(const sy_dataset *d, ds_iter **out) {
    return ds_iter_new(d, sizeof(range_iter), &range_iter_ops, out);
}

static const ds_kind range_kind = {"range", range_open, NULL};

sy_status sy_dataset_range(int64_t start, int64_t stop, int64_t step, sy_dataset **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "range: out is NULL");
    *out = NULL;
    if (step == 0) return sy_error(SY_ERR_INVALID_ARGUMENT, "range: step is 0");
    /* ceil((stop - start) / step) in unsigned arithmetic, which cannot overflow. */
    uint64_t span = 0, stride = 0;
    if (step > 0 && stop > start) span = (uint64_t)stop - (uint64_t)start, stride = (uint64_t)step;
    if (step < 0 && stop < start) span = (uint64_t)start - (uint64_t)stop, stride = -(uint64_t)step;
    uint64_t count = stride ? span / stride + (span % stride != 0) : 0;
    sy_dataset *d;
    sy_status st = ds_node_new(&range_kind, sizeof(range_state), NULL, 0, &d);
    if (st) return st;
    range_state *s = d->state;
    s->start = start;
    s->step = step;
    s->count = count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)count;
    d->n = 1;
    d->spec[0] = (sy_component_spec){SY_I64, sy_shape_of(0)};
    d->cardinality = s->count;
    *out = d;
    return SY_OK;
}

/* ---- file names ------------------------------------------------------------------------ */

sy_status ds_filenames_tensor(const char *const *filenames, int32_t n, const char *what, sy_tensor **out) {
    *out = NULL;
    if (n < 0 || (n > 0 && !filenames))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %d file names given", what, (int)n);
    sy_status st = sy_tensor_new(SY_STRING, sy_shape_of(1, (int64_t)n), out);
    for (int32_t i = 0; i < n && !st; i++) {
        if (!filenames[i] || !*filenames[i])
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "%s: file name %d is %s", what, (int)i,
                          filenames[i] ? "empty" : "NULL");
        else
            st = sy_tensor_set_string(*out, i, filenames[i], strlen(filenames[i]));
    }
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- list_files ------------------------------------------------------------------------ */

static int compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

sy_status sy_dataset_list_files(const char *pattern, bool shuffle, uint64_t seed, sy_dataset **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "list_files: out is NULL");
    *out = NULL;
    if (!pattern || !*pattern) return sy_error(SY_ERR_INVALID_ARGUMENT, "list_files: the pattern is empty");
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        return sy_error(SY_ERR_NOT_FOUND, "list_files: no file matches the pattern '%s'", pattern);
    }
    if (rc != 0) {
        globfree(&g);
        return sy_error(rc == GLOB_NOSPACE ? SY_ERR_OUT_OF_MEMORY : SY_ERR_IO,
                        "list_files: cannot list the files matching '%s' (%s)", pattern,
                        rc == GLOB_NOSPACE ? "out of memory" : "a directory could not be read");
    }
    if (g.gl_pathc > (size_t)INT32_MAX) {
        globfree(&g);
        return sy_error(SY_ERR_UNSUPPORTED, "list_files: '%s' matches too many files", pattern);
    }
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, compare_names);
    sy_tensor *names;
    sy_status st = ds_filenames_tensor((const char *const *)g.gl_pathv, (int32_t)g.gl_pathc, "list_files", &names);
    globfree(&g);
    if (st) return st;
    sy_dataset *files;
    st = sy_dataset_from_tensor_slices(&names, 1, &files);
    sy_tensor_free(names);
    if (st || !shuffle) {
        *out = st ? NULL : files;
        return st;
    }
    st = sy_dataset_shuffle(files, sy_dataset_cardinality(files), seed, true, out);
    sy_dataset_free(files);
    return st;
}
