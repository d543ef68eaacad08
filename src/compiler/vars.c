/*
 * vars.c - the variable store: parameters in one block, optimizer slots in
 * another, found by name.
 *
 * Train, evaluate and predict plans are compiled against one store and so
 * share the parameters. Variables are created when a plan first needs them;
 * creating some grows a block (a new allocation, the old values copied) and
 * bumps `generation`, which tells plans compiled earlier to re-bind their
 * pointers before their next run.
 */
#include "compiler_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

sy_status sy_vars_new(sy_vars **out) {
    *out = sy_calloc(1, sizeof **out);
    if (!*out) return sy_error(SY_ERR_OUT_OF_MEMORY, "variable store: out of memory");
    return SY_OK;
}

void sy_vars_free(sy_vars *v) {
    if (!v) return;
    for (int64_t i = 0; i < v->n_vars; i++) sy_free(v->vars[i].name);
    sy_free(v->vars);
    sy_free(v->block[0]);
    sy_free(v->block[1]);
    sy_free(v);
}

int32_t sy_vars_count(const sy_vars *v) { return (int32_t)v->n_vars; }

int32_t sy_vars_find(const sy_vars *v, const char *name) {
    for (int64_t i = 0; i < v->n_vars; i++)
        if (strcmp(v->vars[i].name, name) == 0) return (int32_t)i;
    return -1;
}

const char *sy_vars_name(const sy_vars *v, int32_t i) { return i >= 0 && i < v->n_vars ? v->vars[i].name : NULL; }

sy_shape sy_vars_shape(const sy_vars *v, int32_t i) {
    sy_shape none = {0};
    return i >= 0 && i < v->n_vars ? v->vars[i].shape : none;
}

sy_dtype sy_vars_dtype(const sy_vars *v, int32_t i) { return i >= 0 && i < v->n_vars ? v->vars[i].dtype : SY_F32; }

void *sy_vars_data(sy_vars *v, int32_t i) {
    if (i < 0 || i >= v->n_vars) return NULL;
    return v->block[v->vars[i].kind] + v->vars[i].offset;
}

int64_t sy_vars_iterations(const sy_vars *v) { return v->iterations; }

static sy_status init_values(const sy_var_request *r, void *dst) {
    int64_t n = sy_shape_count(&r->shape);
    double *tmp = sy_malloc((size_t)n * sizeof(double));
    if (!tmp) return sy_error(SY_ERR_OUT_OF_MEMORY, "variable '%s': out of memory initialising", r->name);
    sy_status st = sy_init_fill(&r->init, &r->shape, tmp);
    if (st == SY_OK) {
        if (r->dtype == SY_F32)
            for (int64_t i = 0; i < n; i++) /* past float's range: infinity, as the hardware rounds (a cast is UB in C) */
                ((float *)dst)[i] = tmp[i] > FLT_MAX ? INFINITY : tmp[i] < -FLT_MAX ? -INFINITY : (float)tmp[i];
        else
            memcpy(dst, tmp, (size_t)n * sizeof(double));
    }
    sy_free(tmp);
    return st;
}

static sy_status check_same(const sy_var *x, const sy_var_request *r) {
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (x->kind == r->kind && x->dtype == r->dtype && sy_shape_equal(&x->shape, &r->shape)) return SY_OK;
    return sy_error(SY_ERR_SHAPE, "variable '%s' is %s %s in the variable store but %s %s in this graph", r->name,
                    sy_dtype_name(x->dtype), sy_shape_format(&x->shape, a, sizeof a), sy_dtype_name(r->dtype),
                    sy_shape_format(&r->shape, b, sizeof b));
}

static void forget_from(sy_vars *v, int64_t first) {
    for (int64_t i = first; i < v->n_vars; i++) sy_free(v->vars[i].name);
    v->n_vars = first;
}

sy_status vars_resolve(sy_vars *v, sy_var_request *req, int64_t n) {
    /* Check every existing variable before changing anything. */
    for (int64_t i = 0; i < n; i++) {
        int32_t idx = sy_vars_find(v, req[i].name);
        sy_status st = idx >= 0 ? check_same(&v->vars[idx], &req[i]) : SY_OK;
        if (st) return st;
    }
    int64_t grow[2] = {0, 0}, first_new = v->n_vars;
    for (int64_t i = 0; i < n; i++) {
        sy_var_request *r = &req[i];
        int32_t idx = sy_vars_find(v, r->name);
        if (idx >= 0) { /* existing, or added earlier in this batch */
            sy_status st = check_same(&v->vars[idx], r);
            if (st) {
                forget_from(v, first_new);
                return st;
            }
            r->index = idx;
            continue;
        }
        if (SY_GROW(v->vars, v->cap_vars, v->n_vars + 1)) {
            forget_from(v, first_new);
            return SY_ERR_OUT_OF_MEMORY;
        }
        sy_var *x = &v->vars[v->n_vars];
        memset(x, 0, sizeof *x);
        x->name = sy_strdup(r->name);
        if (!x->name) {
            forget_from(v, first_new);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "variable store: out of memory");
        }
        x->kind = r->kind;
        x->dtype = r->dtype;
        x->shape = r->shape;
        x->bytes = sy_shape_count(&r->shape) * (int64_t)sy_dtype_size(r->dtype);
        x->offset = v->block_bytes[r->kind] + grow[r->kind];
        grow[r->kind] += sy_align_up(x->bytes, SY_ALIGN);
        r->index = (int32_t)v->n_vars++;
    }
    /* A block that must grow moves to one of at least 1.5 times its size
     * (ResNet152's 930 variables, 240 MB, added one layer at a time, were
     * quadratic: 100 GB of copying). */
    char *blocks[2] = {NULL, NULL};
    int64_t cap[2] = {v->block_cap[0], v->block_cap[1]};
    for (int k = 0; k < 2; k++) {
        if (!grow[k] || v->block_bytes[k] + grow[k] <= v->block_cap[k]) continue;
        int64_t want = v->block_bytes[k] + grow[k], more = v->block_cap[k] + v->block_cap[k] / 2;
        cap[k] = sy_align_up(want > more ? want : more, SY_ALIGN);
        blocks[k] = sy_malloc_aligned((size_t)cap[k], SY_ALIGN);
        if (!blocks[k]) {
            sy_free(blocks[0]);
            forget_from(v, first_new);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "variable store: out of memory for %lld bytes", (long long)cap[k]);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (!grow[k]) continue;
        if (blocks[k]) {
            if (v->block[k]) memcpy(blocks[k], v->block[k], (size_t)v->block_bytes[k]);
            sy_free(v->block[k]);
            v->block[k] = blocks[k];
            v->block_cap[k] = cap[k];
        }
        memset(v->block[k] + v->block_bytes[k], 0, (size_t)grow[k]);
        v->block_bytes[k] += grow[k];
        v->generation++; /* plans re-bind: the block may have moved */
    }
    for (int64_t i = 0; i < n; i++) {
        if (req[i].index < first_new) continue;
        sy_status st = init_values(&req[i], sy_vars_data(v, req[i].index));
        if (st) return st;
    }
    return SY_OK;
}

sy_status sy_vars_add(sy_vars *v, const char *name, sy_dtype dtype, sy_shape shape, sy_init init, int32_t *index) {
    if (dtype != SY_F32 && dtype != SY_F64)
        return sy_error(SY_ERR_DTYPE, "variable '%s': parameters are float32 or float64, not %s", name,
                        sy_dtype_name(dtype));
    sy_var_request r = {name, SY_VAR_PARAM, dtype, shape, init, -1};
    sy_status st = vars_resolve(v, &r, 1);
    if (st == SY_OK) *index = r.index;
    return st;
}

sy_status sy_vars_reset(sy_vars *v, int32_t index, sy_init init) {
    if (index < 0 || index >= v->n_vars)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "variable index %d is outside [0, %lld)", index, (long long)v->n_vars);
    const sy_var *x = &v->vars[index];
    sy_var_request r = {x->name, x->kind, x->dtype, x->shape, init, index};
    return init_values(&r, sy_vars_data(v, index));
}
