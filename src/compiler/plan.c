/*
 * plan.c - compiling a graph into a plan, and running it.
 *
 * sy_plan_compile works on a private copy of the graph:
 *
 *   1. autodiff adds the gradient of the loss w.r.t. every trainable
 *      parameter it depends on;
 *   2. each gradient is pinned to the plan's gradient block (a copy op is
 *      added where the gradient is a view or shared), and the optimizer adds
 *      its slot variables and one update op per parameter; a state update
 *      (sy_graph_moving_average: BatchNormalization's moving statistics)
 *      is planned the same way, its value pinned after the gradients and
 *      its update op beside the optimizer's, so replicas average it with
 *      the gradients (docs/design/state-updates.md);
 *   3. only nodes the roots (loss, outputs, gradients, updates) need stay;
 *   4. fusion folds elementwise work into producers (fusion.c);
 *   5. the schedule is the nodes' topological order (update ops last, after
 *      every reader of the parameters they write);
 *   6. buffers: parameters and slots in the variable store, gradients in one
 *      block, constants in one block, everything else -- inputs,
 *      activations, kernel workspaces -- in one arena whose offsets come
 *      from liveness (memplan.c); views (reshape) share their source's buffer.
 *      Every size is a checked product (sy_shape_bytes), and blocks that
 *      would pass int64 or the memory available now are refused, naming
 *      the batch size and the bytes, before anything is allocated;
 *   7. every step is bound to a kernel of the backend, with its argument
 *      block (pointers, shapes) filled in once.
 *
 * sy_plan_run then calls the kernels in order with no allocation. If the
 * variable store grew since binding (another plan added variables), the
 * pointers are re-bound first, which also allocates nothing.
 */
#include "plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

sy_plan_options sy_plan_options_default(void) {
    sy_plan_options o;
    memset(&o, 0, sizeof o);
    o.backend = "cpu";
    o.loss = SY_NONE;
    o.fuse = true;
    return o;
}

void *plan_resolve(const sy_plan *p, place pl) {
    switch (pl.block) {
    case BLK_ARENA: return p->arena + pl.offset;
    case BLK_PARAMS: return p->vars->block[SY_VAR_PARAM] + pl.offset;
    case BLK_SLOTS: return p->vars->block[SY_VAR_SLOT] + pl.offset;
    case BLK_GRADS: return p->grads + pl.offset;
    case BLK_CONST: return p->consts + pl.offset;
    default: return NULL;
    }
}

sy_node plan_storage_of(const sy_plan *p, sy_node n) {
    for (;;) {
        while (p->remap[n] != n) n = p->remap[n];
        if (!(sy_op_def_of(p->g->nodes[n].op)->flags & SY_OPF_ALIAS)) return n;
        n = graph_input(p->g, n, 0);
    }
}

/* Parameter places depend on the store's current layout. */
static void bind(sy_plan *p) {
    if (p->tpu_view) return; /* (the cost model's plan has no buffers to point into) */
    for (int64_t i = 0; i < p->g->n_nodes; i++) {
        if (p->var_index[i] < 0) continue;
        const sy_var *v = &p->vars->vars[p->var_index[i]];
        p->places[i] = (place){v->kind == SY_VAR_PARAM ? BLK_PARAMS : BLK_SLOTS, v->offset};
    }
    for (int32_t s = 0; s < p->n_steps; s++) {
        step *st = &p->steps[s];
        const sy_node_rec *n = &p->g->nodes[st->node];
        char *ws = st->ws_bytes + st->cvt_bytes ? plan_resolve(p, st->ws) : NULL;
        for (int j = 0; j < n->n_in; j++) {
            sy_node in = graph_input(p->g, st->node, j);
            p->in_ptrs[st->in_first + j] = plan_resolve(p, p->places[plan_storage_of(p, in)]);
            if (!p->cvt[st->in_first + j]) continue;
            /* issue 16, bfloat16 storage: the kernel reads the float32 copy at the start of its
             * workspace */
            p->cvt_src[st->in_first + j] = p->in_ptrs[st->in_first + j];
            p->in_ptrs[st->in_first + j] = ws;
            ws += sy_align_up(
                sy_shape_count(&p->in_shapes[st->in_first + j]) * (int64_t)sizeof(float), SY_ALIGN);
        }
        st->args.out = plan_resolve(p, p->places[plan_storage_of(p, st->node)]);
        st->args.ws = st->ws_bytes ? ws : NULL;
        st->args.aux = st->side != SY_NONE ? plan_resolve(p, p->places[st->side]) : NULL;
    }
    p->n_opt_vars = 0;
    p->u_product = NULL;
    for (int32_t s = p->first_update; p->opt_vars && s < p->n_steps; s++) {
        const step *st = &p->steps[s];
        if (p->g->nodes[st->node].op == SY_OP_MOVING_AVERAGE) continue;
        p->opt_vars[p->n_opt_vars++] = (optimizer_var){p->in_ptrs[st->in_first], p->in_ptrs[st->in_first + 1],
                                                       sy_shape_count(&st->args.in_shape[0]), st->args.in_dtype[0]};
        if (p->g->nodes[st->node].op == SY_OP_NADAM_UPDATE) p->u_product = p->in_ptrs[st->in_first + 4];
    }
    p->bound_generation = p->vars->generation;
}

bool plan_has_before_update(const sy_plan *p) { return p->opt_vars != NULL; }

void plan_before_update(sy_plan *p) {
    if (p->n_opt_vars)
        optimizer_before_update(&p->optimizer, p->ex.learning_rate, p->ex.iterations, p->opt_vars, p->n_opt_vars,
                                p->u_product);
}

void sy_plan_free(sy_plan *p) {
    if (!p) return;
    if (p->profile) plan_profile_report(p);
    sy_free(p->profile);
    sy_free(p->opt_vars);
    for (int64_t i = 0; p->origin && i < p->n_origin; i++) sy_free(p->origin[i]);
    sy_free(p->origin);
    if (p->owns_vars) sy_vars_free(p->vars);
    sy_graph_free(p->g);
    sy_free(p->steps);
    sy_free(p->places);
    sy_free(p->remap);
    sy_free(p->store);
    sy_free(p->cvt);
    sy_free(p->cvt_src);
    sy_free(p->var_index);
    sy_free(p->readable);
    sy_free(p->in_ptrs);
    sy_free(p->in_shapes);
    sy_free(p->in_dtypes);
    sy_free(p->in_places);
    sy_free(p->arena);
    sy_free(p->grads);
    sy_free(p->consts);
    sy_free(p->grad_params);
    sy_free(p->grad_nodes);
    sy_free(p);
}

typedef struct compile_ctx {
    sy_plan *p;
    const sy_plan_options *o;
    sy_graph *g;
    sy_fusion_state fs;
    sy_node *params; /* trainable, in graph order */
    sy_node *grads;
    int32_t n_params;
    sy_node *updates;
    int32_t n_updates, n_opt_updates;
    sy_node *state_params, *state_values; /* state updates: the parameter and its value */
    int32_t n_states;
    int32_t *step_of; /* per node: its step index, or -1 */
} compile_ctx;

static sy_status check_options(const sy_graph *g, const sy_plan_options *o) {
    if (g->status != SY_OK)
        return sy_error(g->status, "cannot compile a graph that failed to build: %s", g->error);
    int64_t n = g->n_nodes;
    if (o->loss != SY_NONE) {
        if (o->loss < 0 || o->loss >= n) return sy_error(SY_ERR_INVALID_ARGUMENT, "loss node %d is not in the graph", o->loss);
        const sy_node_rec *l = &g->nodes[o->loss];
        if (l->dtype != SY_F32 && l->dtype != SY_F64)
            return sy_error(SY_ERR_DTYPE, "the loss '%s' is %s; it must be float", l->name, sy_dtype_name(l->dtype));
    }
    if (o->n_outputs < 0 || (o->n_outputs > 0 && !o->outputs))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%d outputs requested but no output array given", o->n_outputs);
    for (int i = 0; i < o->n_outputs; i++)
        if (o->outputs[i] < 0 || o->outputs[i] >= n)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "output %d (node %d) is not in the graph", i, o->outputs[i]);
    if (o->loss == SY_NONE && o->n_outputs == 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "nothing to compute: give a loss or at least one output");
    if (o->optimizer.kind != SY_OPTIMIZER_NONE && o->loss == SY_NONE)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "an optimizer needs a loss to minimise");
    if (o->threads < 0) return sy_error(SY_ERR_INVALID_ARGUMENT, "threads %d must be >= 0", o->threads);
    if (o->threads > sy_pool_size(o->pool))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "threads %d exceeds the pool's %d threads", o->threads,
                        sy_pool_size(o->pool));
    return optimizer_check(&o->optimizer);
}

/* 1-2: gradients, pinned; optimizer updates. */
static sy_status differentiate(compile_ctx *c) {
    sy_graph *g = c->g;
    const sy_plan_options *o = c->o;
    int64_t n0 = g->n_nodes;
    c->params = sy_malloc((size_t)n0 * sizeof *c->params);
    c->grads = sy_malloc((size_t)n0 * sizeof *c->grads);
    if (!c->params || !c->grads) return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int64_t i = 0; i < n0; i++)
        if (g->nodes[i].op == SY_OP_PARAM && g->nodes[i].trainable) c->params[c->n_params++] = (sy_node)i;
    if (o->loss == SY_NONE) return SY_OK;
    sy_node *grad_of = sy_malloc((size_t)(n0 ? n0 : 1) * sizeof *grad_of);
    if (!grad_of) return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    c->fs.grad_of = grad_of;
    c->fs.n_grad_of = n0;
    sy_status st = autodiff(g, o->loss, c->params, c->n_params, c->grads, grad_of);
    if (st) return st;
    int32_t with_grad = 0;
    for (int32_t i = 0; i < c->n_params; i++) {
        sy_node gr = c->grads[i];
        if (gr == SY_NONE) continue;
        with_grad++;
        /* A gradient that is a view, a leaf, or another parameter's gradient
         * gets its own copy, so that it can live in the gradient block. */
        bool shared = false;
        for (int32_t j = 0; j < i; j++) shared |= c->grads[j] == gr;
        uint32_t fl = sy_op_def_of(g->nodes[gr].op)->flags;
        if (shared || (fl & (SY_OPF_ALIAS | SY_OPF_LEAF))) {
            c->grads[i] = graph_add(g, SY_OP_COPY, &gr, 1, NULL, NULL);
            if (c->grads[i] == SY_NONE) return sy_graph_status(g);
        }
    }
    if (o->optimizer.kind == SY_OPTIMIZER_NONE) return SY_OK;
    if (with_grad == 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "no gradients: the loss '%s' does not depend on any of the %d trainable parameters",
                        g->nodes[o->loss].name, c->n_params);
    c->updates = sy_malloc((size_t)c->n_params * sizeof *c->updates);
    if (!c->updates) return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int32_t i = 0; i < c->n_params; i++) {
        if (c->grads[i] == SY_NONE) {
            sy_log(SY_LOG_WARNING, "gradients do not exist for '%s' when minimizing the loss '%s'; it is not updated",
                   g->nodes[c->params[i]].name, g->nodes[o->loss].name);
            continue;
        }
        sy_node u = optimizer_add_update(g, &o->optimizer, c->params[i], c->grads[i]);
        if (u == SY_NONE) return sy_graph_status(g);
        c->updates[c->n_updates++] = u;
    }
    c->n_opt_updates = c->n_updates;
    return SY_OK;
}

/* 2b: state updates. Each sy_graph_moving_average node of the graph gets
 * its value pinned to the gradient block (copied where it is a view, a
 * leaf or shared) and a fresh update node at the graph's end, so that the
 * update follows its value in node order; the builder's node stays
 * unreached and is pruned. */
static sy_status state_updates(compile_ctx *c) {
    sy_graph *g = c->g;
    int64_t n0 = g->n_nodes;
    int32_t count = 0;
    for (int64_t i = 0; i < n0; i++) count += g->nodes[i].op == SY_OP_MOVING_AVERAGE;
    if (count == 0) return SY_OK;
    sy_node *updates = sy_malloc((size_t)(c->n_updates + count) * sizeof *updates);
    c->state_params = sy_malloc((size_t)count * sizeof *c->state_params);
    c->state_values = sy_malloc((size_t)count * sizeof *c->state_values);
    if (!updates || !c->state_params || !c->state_values) {
        sy_free(updates);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    }
    if (c->n_updates) memcpy(updates, c->updates, (size_t)c->n_updates * sizeof *updates);
    sy_free(c->updates);
    c->updates = updates;
    for (int64_t i = 0; i < n0; i++) {
        if (g->nodes[i].op != SY_OP_MOVING_AVERAGE) continue;
        sy_node param = graph_input(g, (sy_node)i, 0), value = graph_input(g, (sy_node)i, 1);
        if (g->nodes[param].trainable)
            return graph_fail(g, &g->nodes[i], SY_ERR_INVALID_ARGUMENT,
                              "'%s' is trainable; a state update writes only non-trainable parameters",
                              g->nodes[param].name);
        bool shared = false;
        for (int32_t j = 0; j < c->n_states; j++) {
            if (c->state_params[j] == param)
                return graph_fail(g, &g->nodes[i], SY_ERR_INVALID_ARGUMENT, "'%s' has two state updates",
                                  g->nodes[param].name);
            shared |= c->state_values[j] == value;
        }
        for (int32_t j = 0; c->o->loss != SY_NONE && j < c->n_params; j++) shared |= c->grads[j] == value;
        if (shared || (sy_op_def_of(g->nodes[value].op)->flags & (SY_OPF_ALIAS | SY_OPF_LEAF))) {
            value = graph_add(g, SY_OP_COPY, &value, 1, NULL, NULL);
            if (value == SY_NONE) return sy_graph_status(g);
        }
        sy_attrs at = g->nodes[i].attr;
        sy_node in[2] = {param, value};
        sy_node u = graph_add(g, SY_OP_MOVING_AVERAGE, in, 2, &at, NULL);
        if (u == SY_NONE) return sy_graph_status(g);
        c->updates[c->n_updates++] = u;
        c->state_params[c->n_states] = param;
        c->state_values[c->n_states++] = value;
    }
    return SY_OK;
}

/* 3-4: liveness of nodes from the roots, then fusion. */
static sy_status select_and_fuse(compile_ctx *c) {
    sy_graph *g = c->g;
    const sy_plan_options *o = c->o;
    sy_fusion_state *fs = &c->fs;
    sy_status st = fusion_grow(fs, g->n_nodes);
    if (st) return st;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        fs->live[i] = fs->protect[i] = false;
        fs->key[i] = i;
        fs->remap[i] = (int32_t)i;
    }
    if (o->loss != SY_NONE) fs->protect[o->loss] = true;
    for (int i = 0; i < o->n_outputs; i++) fs->protect[o->outputs[i]] = true;
    for (int32_t i = 0; i < c->n_params; i++)
        if (o->loss != SY_NONE && c->grads[i] != SY_NONE) fs->protect[c->grads[i]] = true;
    for (int32_t i = 0; i < c->n_updates; i++) fs->protect[c->updates[i]] = true;
    for (int32_t i = 0; i < c->n_states; i++) fs->protect[c->state_values[i]] = true;
    for (int64_t i = g->n_nodes - 1; i >= 0; i--) {
        if (fs->protect[i]) fs->live[i] = true;
        if (!fs->live[i]) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++) fs->live[graph_input(g, (sy_node)i, j)] = true;
    }
    /* update ops go last, after every reader of what they write */
    for (int32_t i = 0; i < c->n_updates; i++) fs->key[c->updates[i]] = g->n_nodes + i;
    c->p->info.fused = 0;
    fs->backend = c->p->backend;
    fs->inference = c->p->ex.inference;
    fs->tpu_view = o->tpu_view;
    if (o->fuse) return fuse(g, fs, &c->p->info.fused);
    return SY_OK;
}

static int cmp_key_ctx(const sy_fusion_state *fs, sy_node a, sy_node b) {
    return fs->key[a] < fs->key[b] ? -1 : fs->key[a] > fs->key[b] ? 1 : (a > b) - (a < b);
}

/* insertion sort is too slow for big graphs: a merge sort on keys */
static void sort_by_key(sy_node *v, sy_node *tmp, int64_t n, const sy_fusion_state *fs) {
    if (n < 2) return;
    int64_t h = n / 2;
    sort_by_key(v, tmp, h, fs);
    sort_by_key(v + h, tmp, n - h, fs);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_key_ctx(fs, v[i], v[j]) <= 0 ? v[i++] : v[j++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* 5: the schedule. */
static sy_status schedule(compile_ctx *c) {
    sy_plan *p = c->p;
    sy_graph *g = c->g;
    int64_t n = g->n_nodes;
    sy_node *order = sy_malloc((size_t)n * sizeof *order), *tmp = sy_malloc((size_t)n * sizeof *tmp);
    c->step_of = sy_malloc((size_t)n * sizeof *c->step_of);
    if (!order || !tmp || !c->step_of) {
        sy_free(order);
        sy_free(tmp);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        c->step_of[i] = -1;
        if (c->fs.live[i] &&
            !(sy_op_def_of(g->nodes[i].op)->flags & (SY_OPF_LEAF | SY_OPF_ALIAS | SY_OPF_SIDE)))
            order[k++] = (sy_node)i;
    }
    sort_by_key(order, tmp, k, &c->fs);
    sy_free(tmp);
    p->steps = sy_calloc((size_t)(k ? k : 1), sizeof *p->steps);
    if (!p->steps) {
        sy_free(order);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    }
    p->n_steps = (int32_t)k;
    for (int64_t s = 0; s < k; s++) {
        p->steps[s].node = order[s];
        p->steps[s].side = SY_NONE;
        p->steps[s].over = SY_NONE;
        c->step_of[order[s]] = (int32_t)s;
    }
    sy_free(order);
    /* issue 21: a side output is written by the step of its input's kernel */
    for (int64_t i = 0; i < n; i++) {
        if (!c->fs.live[i] || !(sy_op_def_of(g->nodes[i].op)->flags & SY_OPF_SIDE)) continue;
        int32_t s = c->step_of[graph_input(g, (sy_node)i, 0)];
        SY_ASSERT(s >= 0 && p->steps[s].side == SY_NONE);
        p->steps[s].side = (sy_node)i;
    }
    return SY_OK;
}

/* " at batch size N (per replica)": the first input's first dimension, a
 * replica's share of a global batch; "" for a graph without one. */
static void batch_words(const sy_graph *g, char *buf, size_t size) {
    buf[0] = '\0';
    for (int64_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SY_OP_INPUT && g->nodes[i].shape.rank > 0) {
            snprintf(buf, size, " at batch size %lld (per replica)", (long long)g->nodes[i].shape.dims[0]);
            return;
        }
}

/* Add node i's value's bytes, aligned, to *total (checked: a shape too
 * large is an error that names the node and the batch size), stored as
 * store[i] (issue 16: bfloat16 storage), or as its dtype when store is NULL. */
static sy_status value_bytes(const sy_graph *g, const sy_dtype *store, int64_t i, int64_t *total) {
    const sy_node_rec *r = &g->nodes[i];
    int64_t bytes;
    if (sy_shape_bytes(&r->shape, sy_dtype_size(store ? store[i] : r->dtype), &bytes) == SY_OK &&
        bytes <= INT64_MAX - SY_ALIGN &&
        !sy_add_overflow64(*total, sy_align_up(bytes, SY_ALIGN), total))
        return SY_OK;
    char buf[SY_SHAPE_STR_MAX], at[64];
    batch_words(g, at, sizeof at);
    return sy_error(SY_ERR_OUT_OF_MEMORY,
                    "compile: the plan%s does not fit: the value of '%s' (%s %s) needs more than %lld bytes; use a "
                    "smaller batch size",
                    at, sy_graph_name(g, (sy_node)i), sy_dtype_name(r->dtype),
                    sy_shape_format(&r->shape, buf, sizeof buf), (long long)INT64_MAX);
}

/* The memory this machine can give now, in bytes: MemAvailable (free and
 * reclaimable), else the free pages, else INT64_MAX when unknown. What is
 * available, not installed, so that the plans of several replicas, each
 * compiled after the last one's blocks were zeroed (and so are resident),
 * are checked against what is left. A plan that needs more is refused
 * before anything is allocated, rather than left to fail in malloc or,
 * with overcommit, to be killed in the middle of a run. */
static int64_t available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[128];
        long long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
        fclose(f);
        if (kb > 0 && kb < INT64_MAX / 1024) return (int64_t)kb * 1024;
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 || pages > INT64_MAX / page) return INT64_MAX;
    return (int64_t)pages * page;
}

/* A plan too large for this machine: SY_ERR_OUT_OF_MEMORY naming the batch
 * size and the bytes. */
static sy_status too_large(const sy_graph *g, const char *what, int64_t bytes) {
    char at[64];
    batch_words(g, at, sizeof at);
    int64_t mem = available_memory();
    char have[96] = "";
    if (mem < INT64_MAX) snprintf(have, sizeof have, "; this machine has %.1f GB available", (double)mem / 1e9);
    return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: the plan%s does not fit: %s %.1f GB (%lld bytes)%s; use a smaller batch size",
                    at, what, (double)bytes / 1e9, (long long)bytes, have);
}

/* Which nodes are optimizer slots: the third and later inputs of the
 * update ops (the first two are the parameter and its gradient). */
static void mark_slots(const compile_ctx *c, bool *is_slot /* per node */) {
    for (int32_t u = 0; u < c->n_updates; u++)
        for (int j = 2; j < c->g->nodes[c->updates[u]].n_in; j++) is_slot[graph_input(c->g, c->updates[u], j)] = true;
}

/* bytes in words: "512.0 KiB", "3.2 MiB", "16.0 GiB" */
static const char *size_words(int64_t bytes, char *buf, size_t size) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int k = 0;
    while (v >= 1024 && k < 6) v /= 1024, k++;
    if (k) snprintf(buf, size, "%.1f %s", v, unit[k]);
    else snprintf(buf, size, "%lld bytes", (long long)bytes);
    return buf;
}

/* issue 16, sim devices: a plan the device cannot hold -- a TPU core's HBM
 * holds its replica's copy of the weights and optimizer slots, its
 * gradients and its activations -- is refused before anything is
 * allocated, naming each part, so the user sees which to shrink. The
 * activations are the arena planned again with each value at the bytes the
 * chip stores it in (cost_stored_bytes: bfloat16 where the dtype policy
 * computes in it), whatever the host's arena holds it in. */
static sy_status check_device_memory(const compile_ctx *c, int64_t grad_bytes, int64_t const_bytes,
                                     const sy_buffer_req *reqs, const int64_t *req_node,
                                     int64_t nreq, int64_t arena_bytes) {
    const sy_plan_options *o = c->o;
    if (o->device_memory <= 0) return SY_OK;
    const sy_graph *g = c->g;
    int64_t act_bytes = arena_bytes;
    bool differs = false; /* requests are aligned sizes (value_bytes) */
    for (int64_t k = 0; k < nreq && !differs; k++)
        differs = req_node[k] >= 0 &&
                  sy_align_up((int64_t)cost_stored_bytes(g, (sy_node)req_node[k]), SY_ALIGN) !=
                      reqs[k].bytes;
    if (differs) {
        sy_buffer_req *dev = sy_malloc((size_t)(nreq ? nreq : 1) * sizeof *dev);
        if (!dev) return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int64_t k = 0; k < nreq; k++) {
            dev[k] = reqs[k];
            if (req_node[k] >= 0)
                dev[k].bytes =
                    sy_align_up((int64_t)cost_stored_bytes(g, (sy_node)req_node[k]), SY_ALIGN);
        }
        sy_status st = memplan(dev, nreq, &act_bytes);
        sy_free(dev);
        if (st) return st;
    }
    if (sy_add_overflow64(act_bytes, const_bytes, &act_bytes)) act_bytes = INT64_MAX;
    bool *is_slot = sy_calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *is_slot);
    if (!is_slot) return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    mark_slots(c, is_slot);
    int64_t weights = 0, slots = 0, total = 0;
    sy_status st = SY_OK;
    for (int64_t i = 0; st == SY_OK && i < g->n_nodes; i++)
        if (c->fs.live[i] && g->nodes[i].op == SY_OP_PARAM)
            st = value_bytes(g, NULL, i, is_slot[i] ? &slots : &weights);
    sy_free(is_slot);
    if (st) return st;
    if (sy_add_overflow64(weights, slots, &total) || sy_add_overflow64(total, grad_bytes, &total) ||
        sy_add_overflow64(total, act_bytes, &total))
        total = INT64_MAX;
    if (total <= o->device_memory) return SY_OK;
    char at[64], w[32], sl[32], gr[32], ac[32], all[32], have[32];
    batch_words(g, at, sizeof at);
    return sy_error(SY_ERR_OUT_OF_MEMORY,
                    "compile: the plan%s does not fit in %s (%s): it needs %s -- weights %s, optimizer slots %s, "
                    "gradients %s, activations %s; use a smaller batch size, more replicas, or a chip with more HBM",
                    at, o->device_memory_name ? o->device_memory_name : "the device's memory",
                    size_words(o->device_memory, have, sizeof have), size_words(total, all, sizeof all),
                    size_words(weights, w, sizeof w), size_words(slots, sl, sizeof sl), size_words(grad_bytes, gr, sizeof gr),
                    size_words(act_bytes, ac, sizeof ac));
}

/* issue 21, in place (docs/design/fusion.md): an elementwise step whose input of the output's own
 * shape dies at it -- the step is that buffer's last reader -- writes its output over the input: one
 * buffer, from the input's first step to the output's last. The elementwise kernels read each
 * element before they write it, at the same place (cpu/eltwise.c's interpreter, broadcast.c, the ref
 * loops), so the values are those of two buffers; an operand of the same size but another shape is
 * read at other places, and the plan's bf16 passes after a kernel may read an input, so neither
 * qualifies. Only arena values do (not inputs fed before a run, parameters, gradients, outputs kept
 * after it), of the same bytes as stored. $SYSTOLIC_IN_PLACE=0 turns it off, for comparisons. A
 * taken buffer's lifetime moves to its new owner's; the output gets no buffer of its own (places are
 * copied after the arena is planned). */
static bool in_place_enabled(void) {
    const char *e = getenv("SYSTOLIC_IN_PLACE");
    return !e || strcmp(e, "0") != 0;
}

static sy_status plan_in_place(compile_ctx *c, int32_t *first, int32_t *last, int64_t *saved) {
    sy_plan *p = c->p;
    const sy_graph *g = c->g;
    *saved = 0;
    if (c->o->tpu_view || !in_place_enabled()) return SY_OK; /* (the cost model keeps each op's own buffer) */
    for (int32_t s = 0; s < p->n_steps; s++) {
        step *st = &p->steps[s];
        sy_node nd = st->node;
        const sy_node_rec *r = &g->nodes[nd];
        if ((!(sy_op_def_of(r->op)->flags & SY_OPF_ELTWISE) && r->op != SY_OP_FUSED_ELTWISE) ||
            st->side != SY_NONE || plan_storage_of(p, nd) != nd || p->places[nd].block != BLK_NONE || last[nd] < 0 ||
            st->round_bf16 || st->bf16_act >= 0) /* (the plan's bf16 passes after the kernel may read an input) */
            continue;
        int64_t out_bytes = 0;
        sy_status err = value_bytes(g, p->store, nd, &out_bytes);
        if (err) return err;
        for (int j = 0; j < r->n_in && st->over == SY_NONE; j++) {
            sy_node src = plan_storage_of(p, graph_input(g, nd, j));
            int32_t t = c->step_of[src];
            if (t >= 0 && p->steps[t].over != SY_NONE) src = p->steps[t].over; /* a buffer it took over: the owner */
            const sy_node_rec *sr = &g->nodes[src];
            /* the input as the step reads it: its own shape, the output's (a same-sized operand of another
             * shape would be read at other places than the output's) */
            if (!sy_shape_equal(&g->nodes[graph_input(g, nd, j)].shape, &r->shape)) continue;
            if (last[src] != s || first[src] >= s || p->places[src].block != BLK_NONE || p->readable[src] ||
                sr->op == SY_OP_PARAM || sr->op == SY_OP_INPUT ||
                (sy_op_def_of(sr->op)->flags & (SY_OPF_LEAF | SY_OPF_ALIAS | SY_OPF_UPDATE | SY_OPF_SIDE)) ||
                p->store[src] != p->store[nd])
                continue;
            int64_t in_bytes = 0;
            if ((err = value_bytes(g, p->store, src, &in_bytes))) return err;
            if (in_bytes != out_bytes) continue;
            st->over = src;
            *saved += sy_align_up(out_bytes, SY_ALIGN);
            last[src] = last[nd];
            last[nd] = -1; /* no buffer of its own */
        }
    }
    return SY_OK;
}

/* 6: places for every live value, arena offsets by liveness. */
static sy_status plan_buffers(compile_ctx *c) {
    sy_plan *p = c->p;
    sy_graph *g = c->g;
    const sy_plan_options *o = c->o;
    int64_t n = g->n_nodes;
    sy_status st = SY_OK;
    p->places = sy_calloc((size_t)n, sizeof *p->places);
    p->var_index = sy_malloc((size_t)n * sizeof *p->var_index);
    p->readable = sy_calloc((size_t)n, sizeof *p->readable);
    int32_t *first = sy_malloc((size_t)n * sizeof *first), *last = sy_malloc((size_t)n * sizeof *last);
    sy_buffer_req *reqs = sy_malloc((size_t)(n + p->n_steps + 1) * sizeof *reqs);
    int64_t *req_node = sy_malloc((size_t)(n + p->n_steps + 1) * sizeof *req_node);
    if (!p->places || !p->var_index || !p->readable || !first || !last || !reqs || !req_node) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        p->var_index[i] = -1;
        first[i] = INT32_MAX;
        last[i] = -1;
    }
    /* gradients first: their block */
    int64_t grad_bytes = 0;
    size_t n_pinned = (size_t)(c->n_params + c->n_states ? c->n_params + c->n_states : 1);
    p->grad_params = sy_malloc(n_pinned * sizeof *p->grad_params);
    p->grad_nodes = sy_malloc(n_pinned * sizeof *p->grad_nodes);
    if (!p->grad_params || !p->grad_nodes) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        goto done;
    }
    for (int32_t i = 0; o->loss != SY_NONE && i < c->n_params; i++) {
        if (c->grads[i] == SY_NONE) continue;
        sy_node gn = plan_storage_of(p, c->grads[i]);
        p->places[gn] = (place){BLK_GRADS, grad_bytes};
        if ((st = value_bytes(g, NULL, gn, &grad_bytes))) goto done;
        p->grad_params[p->n_grads] = c->params[i];
        p->grad_nodes[p->n_grads++] = gn;
        p->readable[gn] = true;
    }
    /* state values after the gradients: the replicas' all-reduce averages them too */
    for (int32_t i = 0; i < c->n_states; i++) {
        sy_node vn = plan_storage_of(p, c->state_values[i]);
        p->places[vn] = (place){BLK_GRADS, grad_bytes};
        if ((st = value_bytes(g, NULL, vn, &grad_bytes))) goto done;
        p->grad_params[p->n_grads] = c->state_params[i];
        p->grad_nodes[p->n_grads++] = vn;
        p->readable[vn] = true;
    }
    /* constants */
    int64_t const_bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!c->fs.live[i] || (g->nodes[i].op != SY_OP_FILL && g->nodes[i].op != SY_OP_CONSTANT)) continue;
        p->places[i] = (place){BLK_CONST, const_bytes};
        if ((st = value_bytes(g, NULL, i, &const_bytes))) goto done;
    }
    /* lifetimes of arena values, on storage nodes (views extend their source) */
    for (int32_t s = 0; s < p->n_steps; s++) {
        sy_node nd = p->steps[s].node;
        sy_node own = plan_storage_of(p, nd);
        if (first[own] > s) first[own] = s;
        if (last[own] < s) last[own] = s;
        sy_node side = p->steps[s].side; /* issue 21: written by this step's kernel */
        if (side != SY_NONE && first[side] > s) first[side] = s;
        if (side != SY_NONE && last[side] < s) last[side] = s;
        for (int j = 0; j < g->nodes[nd].n_in; j++) {
            sy_node src = plan_storage_of(p, graph_input(g, nd, j));
            if (first[src] > s) first[src] = s;
            if (last[src] < s) last[src] = s;
        }
    }
    sy_node roots[2] = {o->loss, SY_NONE};
    for (int i = -1; i < o->n_outputs; i++) {
        sy_node r = i < 0 ? roots[0] : o->outputs[i];
        if (r == SY_NONE) continue;
        sy_node src = plan_storage_of(p, r);
        last[src] = p->n_steps; /* kept to the end of the run */
        if (first[src] == INT32_MAX) first[src] = 0;
        p->readable[src] = true;
    }
    int64_t in_place = 0; /* bytes of the outputs written over their inputs */
    if ((st = plan_in_place(c, first, last, &in_place))) goto done;
    int64_t nreq = 0;
    for (int64_t i = 0; i < n; i++) {
        const sy_node_rec *r = &g->nodes[i];
        if (!c->fs.live[i] || last[i] < 0 || p->places[i].block != BLK_NONE) continue;
        if (r->op == SY_OP_PARAM || (sy_op_def_of(r->op)->flags & (SY_OPF_ALIAS | SY_OPF_UPDATE))) continue;
        if (r->op == SY_OP_INPUT) { /* fed before a run, kept across runs */
            first[i] = 0;
            last[i] = p->n_steps;
        }
        int64_t bytes = 0;
        if ((st = value_bytes(g, p->store, i, &bytes))) goto done;
        reqs[nreq] = (sy_buffer_req){bytes, first[i], last[i], 0};
        req_node[nreq++] = i;
    }
    for (int32_t s = 0; s < p->n_steps; s++) {
        int64_t ws = p->steps[s].ws_bytes + p->steps[s].cvt_bytes;
        if (!ws) continue;
        reqs[nreq] = (sy_buffer_req){ws, s, s, 0};
        req_node[nreq++] = -1 - s;
    }
    /* The sum of the aligned sizes bounds the arena (memplan places each
     * buffer at most past all the others), so once it fits in int64 the
     * planner's offsets do too. */
    int64_t unplanned = 0;
    for (int64_t k = 0; k < nreq; k++)
        if (reqs[k].bytes > INT64_MAX - SY_ALIGN ||
            sy_add_overflow64(unplanned, sy_align_up(reqs[k].bytes, SY_ALIGN), &unplanned)) {
            st = too_large(g, "its activations need more than", INT64_MAX);
            goto done;
        }
    p->info.unplanned_bytes = unplanned + in_place; /* (what each value's own buffer would take) */
    int64_t arena_bytes, total;
    if ((st = memplan(reqs, nreq, &arena_bytes))) goto done;
    if (sy_add_overflow64(arena_bytes, grad_bytes, &total) || sy_add_overflow64(total, const_bytes, &total)) {
        st = too_large(g, "its activations and gradients need more than", INT64_MAX);
        goto done;
    }
    if ((st = check_device_memory(c, grad_bytes, const_bytes, reqs, req_node, nreq, arena_bytes)))
        goto done;
    if (total > available_memory()) {
        st = too_large(g, "its activations and gradients need", total);
        goto done;
    }
    for (int64_t k = 0; k < nreq; k++) {
        if (req_node[k] >= 0)
            p->places[req_node[k]] = (place){BLK_ARENA, reqs[k].offset};
        else
            p->steps[-1 - req_node[k]].ws = (place){BLK_ARENA, reqs[k].offset};
    }
    for (int32_t s = 0; s < p->n_steps; s++) /* in place: the buffer it takes over (in schedule order, so a
                                                   chain of them ends at the first's) */
        if (p->steps[s].over != SY_NONE) p->places[p->steps[s].node] = p->places[p->steps[s].over];
    p->info.arena_bytes = arena_bytes;
    p->info.grad_bytes = grad_bytes;
    if (o->tpu_view) goto done; /* the cost model's plan: sizes, nothing allocated */
    p->arena = sy_malloc_aligned((size_t)(arena_bytes ? arena_bytes : SY_ALIGN), SY_ALIGN);
    p->grads = sy_malloc_aligned((size_t)(grad_bytes ? grad_bytes : SY_ALIGN), SY_ALIGN);
    p->consts = sy_malloc_aligned((size_t)(const_bytes ? const_bytes : SY_ALIGN), SY_ALIGN);
    if (!p->arena || !p->grads || !p->consts) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory for a %lld-byte arena", (long long)arena_bytes);
        goto done;
    }
    memset(p->arena, 0, (size_t)arena_bytes);
    memset(p->grads, 0, (size_t)grad_bytes);
    for (int64_t i = 0; i < n; i++) {
        const sy_node_rec *r = &g->nodes[i];
        if (!c->fs.live[i] || (r->op != SY_OP_FILL && r->op != SY_OP_CONSTANT)) continue;
        int64_t cnt = sy_shape_count(&r->shape);
        void *dst = p->consts + p->places[i].offset;
        if (r->op == SY_OP_CONSTANT) { /* issue 18: the int8 ops' weights */
            memcpy(dst, r->attr.constant.data, (size_t)cnt * sy_dtype_size(r->dtype));
            continue;
        }
        for (int64_t k = 0; k < cnt; k++) {
            if (r->dtype == SY_F32) ((float *)dst)[k] = (float)r->attr.fill.value;
            else if (r->dtype == SY_F64) ((double *)dst)[k] = r->attr.fill.value;
            else ((int32_t *)dst)[k] = (int32_t)r->attr.fill.value;
        }
    }
done:
    sy_free(first);
    sy_free(last);
    sy_free(reqs);
    sy_free(req_node);
    return st;
}

/* 7a: a kernel and an argument block per step; workspace sizes. */
/* issue 16, mixed_bfloat16: ops whose output values are copies of one input's values (or zeros):
 * relu, pooling by max, views, and their gradients, which route dy (max-pooling's only where its
 * windows do not overlap: else a dx element may be the sum of several dy). -1: none; -2: every
 * input. */
static int selected_input(const sy_node_rec *r) {
    const sy_attrs *a = &r->attr;
    switch (r->op) {
    case SY_OP_RELU: case SY_OP_MAX_POOL2D: case SY_OP_RESHAPE: case SY_OP_TRANSPOSE: case SY_OP_SLICE:
    case SY_OP_BROADCAST_TO: case SY_OP_REVERSE: case SY_OP_NEG: case SY_OP_PAD: case SY_OP_COPY:
    case SY_OP_RELU_GRAD: case SY_OP_REDUCE_MAX: case SY_OP_SLICE_GRAD: return 0;
    case SY_OP_MAX_POOL2D_GRAD:
        return a->pool.stride[0] >= a->pool.ksize[0] && a->pool.stride[1] >= a->pool.ksize[1] ? 2
                                                                                              : -1;
    case SY_OP_CONCAT: return -2;
    default: return -1;
    }
}

/* Whether node n holds bfloat16 numbers whatever its inputs' values were: a bf16 op that rounds, or a
 * selection of such values. A bf16 selection of bf16 numbers needs no rounding pass -- the passes over
 * max_pool2d_grad's and relu_grad's large outputs cost as much as the ops. memo: 0 unknown, 1 yes, 2 no. */
static bool holds_bf16(const sy_graph *g, sy_node n, uint8_t *memo) {
    if (memo[n]) return memo[n] == 1;
    const sy_node_rec *r = &g->nodes[n];
    int sel = selected_input(r);
    bool yes;
    if (sel == -1) yes = r->bf16 && r->dtype == SY_F32 && !(sy_op_def_of(r->op)->flags & (SY_OPF_LEAF | SY_OPF_UPDATE));
    else {
        yes = r->n_in > 0;
        for (int j = sel == -2 ? 0 : sel; yes && j < (sel == -2 ? r->n_in : sel + 1); j++)
            yes = holds_bf16(g, graph_input(g, n, j), memo);
        yes = yes || (r->bf16 && r->dtype == SY_F32);
    }
    memo[n] = yes ? 1 : 2;
    return yes;
}

static bool needs_rounding(const sy_graph *g, sy_node n, uint8_t *memo) {
    const sy_node_rec *r = &g->nodes[n];
    if (!r->bf16 || r->dtype != SY_F32 || (sy_op_def_of(r->op)->flags & (SY_OPF_UPDATE | SY_OPF_ALIAS))) return false;
    /* issue 21: the fused conv -> pool ops round where the ops they fold would
     * (attr.conv.round_bf16) */
    if (r->op == SY_OP_CONV2D_POOL || r->op == SY_OP_CONV2D_POOL_BACKPROP_FILTER) return false;
    int sel = selected_input(r);
    if (sel == -1) return true;
    for (int j = sel == -2 ? 0 : sel; j < (sel == -2 ? r->n_in : sel + 1); j++)
        if (j >= r->n_in || !holds_bf16(g, graph_input(g, n, j), memo)) return true;
    return false;
}

/* issue 16, bfloat16 storage: $SYSTOLIC_BF16_STORAGE=0 keeps every activation in float32 (holding
 * the same bfloat16 numbers), the path before 2-byte storage, for comparisons (tests, bench). */
static bool bf16_storage_enabled(void) {
    const char *e = getenv("SYSTOLIC_BF16_STORAGE");
    return !e || strcmp(e, "0") != 0;
}

/* issue 16, bfloat16 storage: values that must stay float32 whatever they hold -- what a caller
 * reads after a run (the loss, the outputs) and what the gradient block holds (gradients, state
 * values), which the replicas' all-reduce and the optimizer read as float32. */
static void mark_float32(const compile_ctx *c, bool *keep /* per node */) {
    const sy_plan_options *o = c->o;
    if (o->loss != SY_NONE) keep[plan_storage_of(c->p, o->loss)] = true;
    for (int i = 0; i < o->n_outputs; i++) keep[plan_storage_of(c->p, o->outputs[i])] = true;
    for (int32_t i = 0; o->loss != SY_NONE && i < c->n_params; i++)
        if (c->grads[i] != SY_NONE) keep[plan_storage_of(c->p, c->grads[i])] = true;
    for (int32_t i = 0; i < c->n_states; i++)
        keep[plan_storage_of(c->p, c->state_values[i])] = true;
}

/* issue 16, bfloat16 storage: step st's kernel and the dtypes of its operands. Its output is stored
 * as bfloat16 when it holds bfloat16 numbers (want_out) and the backend's SY_BF16 kernel writes
 * bfloat16 for these shapes; an input stored as bfloat16 that the chosen kernel reads as float32
 * only is converted at the boundary, into the step's workspace, before the kernel runs (the
 * fallback that keeps every op running). The plan's own passes after a float32 output read the bias
 * (a product's epilogue) or the input (sigmoid) as float32, so those inputs are converted too. */
static const sy_kernel *choose_storage(sy_plan *p, step *st, const sy_node_rec *r, const sy_kernel *kf, bool want_out,
                                       bool post_reads) {
    sy_kargs *a = &st->args;
    sy_dtype *in_dt = p->in_dtypes + st->in_first;
    bool any_in = false;
    for (int j = 0; j < r->n_in; j++) any_in |= in_dt[j] == SY_BF16;
    const sy_kernel *kb = any_in || want_out ? p->backend->kernel(r->op, SY_BF16) : NULL;
    uint32_t io = 0;
    if (kb && kb->bf16_io) {
        a->dtype = want_out ? SY_BF16 : a->dtype;
        io = kb->bf16_io(a);
    }
    if (io & SY_BF16_UNIFORM) { /* every float operand bfloat16, or the float32 kernel */
        bool all = want_out && r->n_in < 30;
        for (int j = 0; all && j < r->n_in; j++) all = in_dt[j] == SY_BF16 || graph_in_rec(p->g, r, j)->dtype != SY_F32;
        io = all ? SY_BF16_OUT | (SY_BF16_OUT - 1) : 0;
    }
    if (!want_out) io &= ~SY_BF16_OUT;
    if (!(io & SY_BF16_OUT) && post_reads) io &= ~SY_BF16_IN(r->op == SY_OP_SIGMOID ? 0 : 2);
    st->out_bf16 = (io & SY_BF16_OUT) != 0;
    bool reads = false; /* an input read as bfloat16 */
    for (int j = 0; j < r->n_in; j++) reads |= in_dt[j] == SY_BF16 && j < 30 && (io & SY_BF16_IN(j));
    const sy_kernel *k = st->out_bf16 || reads ? kb : kf;
    a->dtype = st->out_bf16 ? SY_BF16 : r->dtype;
    st->cvt_bytes = 0;
    for (int j = 0; j < r->n_in; j++) {
        if (in_dt[j] != SY_BF16 || (k == kb && j < 30 && (io & SY_BF16_IN(j)))) continue;
        p->cvt[st->in_first + j] = true;
        in_dt[j] = SY_F32;
        st->cvt_bytes += sy_align_up(sy_shape_count(&a->in_shape[j]) * (int64_t)sizeof(float), SY_ALIGN);
        p->info.bf16_converts++;
    }
    if (st->out_bf16) p->store[st->node] = SY_BF16;
    p->info.bf16_steps += k == kb;
    return k;
}

static sy_status bind_kernels(compile_ctx *c) {
    sy_plan *p = c->p;
    sy_graph *g = c->g;
    int64_t n = g->n_nodes, total_in = 0;
    for (int32_t s = 0; s < p->n_steps; s++) total_in += g->nodes[p->steps[s].node].n_in;
    size_t cnt = (size_t)(total_in ? total_in : 1);
    p->in_ptrs = sy_calloc(cnt, sizeof *p->in_ptrs);
    p->in_shapes = sy_calloc(cnt, sizeof *p->in_shapes);
    p->in_dtypes = sy_calloc(cnt, sizeof *p->in_dtypes);
    p->cvt = sy_calloc(cnt, sizeof *p->cvt);
    p->cvt_src = sy_calloc(cnt, sizeof *p->cvt_src);
    p->remap = sy_malloc((size_t)n * sizeof *p->remap);
    p->store = sy_malloc((size_t)n * sizeof *p->store);
    uint8_t *memo = sy_calloc((size_t)n + 1, 1);
    bool *keep = sy_calloc((size_t)n + 1, sizeof *keep);
    sy_status status = SY_OK;
    if (!p->in_ptrs || !p->in_shapes || !p->in_dtypes || !p->cvt || !p->cvt_src || !p->remap || !p->store ||
        !memo || !keep) {
        status = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        goto done;
    }
    memcpy(p->remap, c->fs.remap, (size_t)n * sizeof *p->remap);
    for (int64_t i = 0; i < n; i++) p->store[i] = g->nodes[i].dtype;
    bool bf16_storage = bf16_storage_enabled();
    mark_float32(c, keep);
    int32_t next = 0;
    for (int32_t s = 0; s < p->n_steps; s++) {
        step *st = &p->steps[s];
        const sy_node_rec *r = &g->nodes[st->node];
        sy_dtype dt = r->dtype;
        bool update = sy_op_def_of(r->op)->flags & SY_OPF_UPDATE;
        if (update) dt = graph_in_rec(g, r, 0)->dtype;
        const sy_kernel *kf = p->backend->kernel(r->op, dt);
        st->round_bf16 = needs_rounding(g, st->node, memo);
        st->bf16_act = -1;
        if (!kf) {
            status = sy_error(SY_ERR_UNSUPPORTED,
                              "%s (%s): the '%s' backend has no %s kernel for this op",
                              sy_op_name(r->op), r->name, p->backend->name, sy_dtype_name(dt));
            goto done;
        }
        st->in_first = next;
        for (int j = 0; j < r->n_in; j++) {
            sy_node in = graph_input(g, st->node, j);
            p->in_shapes[next + j] = g->nodes[in].shape;
            p->in_dtypes[next + j] = p->store[plan_storage_of(p, in)];
        }
        next += r->n_in;
        sy_kargs *a = &st->args;
        a->op = r->op;
        a->attr = &r->attr;
        a->dtype = dt;
        a->out_shape = &r->shape;
        a->n_in = r->n_in;
        a->in = p->in_ptrs + st->in_first;
        a->in_shape = p->in_shapes + st->in_first;
        a->in_dtype = p->in_dtypes + st->in_first;
        a->ex = &p->ex;
        /* issue 16, mixed_bfloat16: a bf16 product's fused bias and activation need roundings
         * between them, which a float32 kernel's own epilogue has not: the kernel gives the bare
         * product, sy_bf16_epilogue the rest (a kernel writing bfloat16 applies that epilogue
         * itself) */
        bool product = r->op == SY_OP_MATMUL || r->op == SY_OP_CONV2D;
        int act = r->op == SY_OP_MATMUL ? r->attr.matmul.act : r->op == SY_OP_CONV2D ? r->attr.conv.act : 0;
        bool epilogue = st->round_bf16 && product && (r->n_in == 3 || act != SY_ACT_NONE);
        bool want_out = bf16_storage && !update && !keep[st->node] && r->dtype == SY_F32 &&
                        holds_bf16(g, st->node, memo);
        bool post_reads = st->round_bf16 && ((epilogue && r->n_in == 3) || r->op == SY_OP_SIGMOID);
        st->kernel = choose_storage(p, st, r, kf, want_out, post_reads);
        if (st->out_bf16)
            st->round_bf16 = false;
        else if (epilogue) {
            st->bf16_act = (int8_t)act;
            st->bf16_attr = r->attr;
            if (r->op == SY_OP_MATMUL) st->bf16_attr.matmul.act = SY_ACT_NONE;
            else st->bf16_attr.conv.act = SY_ACT_NONE;
            a->attr = &st->bf16_attr;
            a->n_in = 2;
        }
        st->ws_bytes = st->kernel->workspace ? (int64_t)st->kernel->workspace(a, p->ex.threads) : 0;
    }
done:
    sy_free(memo);
    sy_free(keep);
    return status;
}

/* 7b: variables for the live parameters (created in the store if new). */
static sy_status bind_vars(compile_ctx *c) {
    sy_plan *p = c->p;
    sy_graph *g = c->g;
    int64_t n = g->n_nodes, k = 0;
    sy_var_request *req = sy_malloc((size_t)(n ? n : 1) * sizeof *req);
    sy_node *who = sy_malloc((size_t)(n ? n : 1) * sizeof *who);
    sy_status st = SY_OK;
    if (!req || !who) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        goto done;
    }
    bool *is_slot = sy_calloc((size_t)n, sizeof *is_slot);
    if (!is_slot) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        goto done;
    }
    mark_slots(c, is_slot);
    for (int64_t i = 0; i < n; i++) {
        const sy_node_rec *r = &g->nodes[i];
        if (!c->fs.live[i] || r->op != SY_OP_PARAM) continue;
        req[k] = (sy_var_request){r->name, is_slot[i] ? SY_VAR_SLOT : SY_VAR_PARAM, r->dtype, r->shape, r->init, -1};
        who[k++] = (sy_node)i;
    }
    sy_free(is_slot);
    if ((st = vars_resolve(p->vars, req, k))) goto done;
    for (int64_t i = 0; i < k; i++) p->var_index[who[i]] = req[i].index;
    p->info.param_bytes = p->vars->block_bytes[SY_VAR_PARAM];
    p->info.slot_bytes = p->vars->block_bytes[SY_VAR_SLOT];
done:
    sy_free(req);
    sy_free(who);
    return st;
}

sy_status sy_plan_compile(const sy_graph *graph, const sy_plan_options *o, sy_plan **out) {
    *out = NULL;
    sy_status st = check_options(graph, o);
    if (st) return st;
    const sy_backend *backend = sy_backend_find(o->backend ? o->backend : "cpu");
    if (!backend) return SY_ERR_NOT_FOUND;
    sy_plan *p = sy_calloc(1, sizeof *p);
    if (!p) return sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
    compile_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.o = o;
    p->backend = backend;
    p->ex.pool = o->pool;
    p->ex.threads = o->threads ? o->threads : sy_pool_size(o->pool);
    p->ex.rng_key = sy_mix64(o->seed ^ 0xD50F7A11ull);
    p->ex.learning_rate = o->optimizer.learning_rate;
    p->ex.inference = o->loss == SY_NONE;
    atomic_init(&p->ex.failed, 0);
    if (o->vars) {
        p->vars = o->vars;
    } else {
        if ((st = sy_vars_new(&p->vars))) goto fail;
        p->owns_vars = true;
    }
    if ((st = graph_clone(graph, &p->g))) goto fail;
    c.g = p->g;
    if ((st = differentiate(&c))) goto fail;
    if ((st = state_updates(&c))) goto fail;
    if ((st = select_and_fuse(&c))) goto fail;
    if ((st = schedule(&c))) goto fail;
    if ((st = bind_kernels(&c))) goto fail;
    if ((st = plan_buffers(&c))) goto fail;
    if ((st = bind_vars(&c))) goto fail;
    p->has_updates = c.n_updates > 0;
    p->has_optimizer = c.n_opt_updates > 0;
    p->first_update = p->n_steps;
    for (int32_t s = 0; s < p->n_steps; s++)
        if (sy_op_def_of(p->g->nodes[p->steps[s].node].op)->flags & SY_OPF_UPDATE) {
            p->first_update = s;
            break;
        }
    for (int32_t s = p->first_update; s < p->n_steps; s++) /* updates are scheduled last */
        SY_ASSERT(sy_op_def_of(p->g->nodes[p->steps[s].node].op)->flags & SY_OPF_UPDATE);
    p->optimizer = o->optimizer;
    if (p->has_optimizer && optimizer_has_prologue(&o->optimizer) &&
        !(p->opt_vars = sy_calloc((size_t)(p->n_steps - p->first_update), sizeof *p->opt_vars))) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "compile: out of memory");
        goto fail;
    }
    p->info.steps = p->n_steps;
    if (getenv("SYSTOLIC_PROFILE") && *getenv("SYSTOLIC_PROFILE")) p->profile = sy_calloc((size_t)(p->n_steps ? p->n_steps : 1), sizeof *p->profile);
    p->tpu_view = o->tpu_view;
    bind(p);
    p->origin = c.fs.origin; /* issue 21: for sy_plan_summary */
    p->n_origin = c.fs.cap;
    c.fs.origin = NULL;
    goto done;
fail:
    if (st == SY_OK) st = SY_ERR_INTERNAL;
    {
        /* keep the message across the frees below */
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        sy_plan_free(p);
        p = NULL;
        sy_error(st, "%s", msg);
    }
done:
    sy_free(c.fs.live);
    sy_free(c.fs.protect);
    sy_free(c.fs.key);
    sy_free(c.fs.remap);
    for (int64_t i = 0; c.fs.origin && i < c.fs.cap; i++) sy_free(c.fs.origin[i]);
    sy_free(c.fs.origin);
    sy_free((void *)c.fs.grad_of);
    sy_free(c.params);
    sy_free(c.grads);
    sy_free(c.updates);
    sy_free(c.state_params);
    sy_free(c.state_values);
    sy_free(c.step_of);
    *out = p;
    return st;
}

void *sy_plan_input(sy_plan *p, sy_node input) {
    if (input < 0 || input >= p->g->n_nodes || p->g->nodes[input].op != SY_OP_INPUT) {
        sy_error(SY_ERR_INVALID_ARGUMENT, "node %d is not an input of the graph", input);
        return NULL;
    }
    if (p->places[input].block != BLK_ARENA) {
        sy_error(SY_ERR_NOT_FOUND, "input '%s' is not read by this plan", p->g->nodes[input].name);
        return NULL;
    }
    return plan_resolve(p, p->places[input]);
}

void plan_prepare(sy_plan *p) {
    if (p->vars->generation != p->bound_generation) bind(p);
    p->ex.iterations = p->vars->iterations;
    /* issue 17, learning-rate schedules: this step's rate, before any kernel reads it */
    if (p->optimizer.schedule.kind != SY_LR_SCHEDULE_NONE)
        p->ex.learning_rate = sy_lr_schedule_value(&p->optimizer.schedule, p->ex.iterations);
    atomic_store_explicit(&p->ex.failed, 0, memory_order_relaxed);
}

int32_t plan_step_count(const sy_plan *p) { return p->n_steps; }
int32_t plan_first_update(const sy_plan *p) { return p->first_update; }
int64_t plan_step_elements(const sy_plan *p, int32_t s) { return sy_shape_count(&p->steps[s].args.in_shape[0]); }
/* issue 16, cost model: the cost pass (cost.c) walks the schedule's nodes */
const sy_graph *plan_graph(const sy_plan *p) { return p->g; }
sy_node plan_step_node(const sy_plan *p, int32_t s) { return p->steps[s].node; }
sy_node plan_step_side(const sy_plan *p, int32_t s) {
    return p->steps[s].side;
}
bool plan_step_bf16(const sy_plan *p, int32_t s, uint32_t *bf16_in, uint32_t *converted) {
    const step *st = &p->steps[s];
    *bf16_in = *converted = 0;
    for (int j = 0; j < p->g->nodes[st->node].n_in && j < 32; j++) {
        if (st->args.in_dtype[j] == SY_BF16) *bf16_in |= 1u << j;
        if (p->cvt[st->in_first + j]) *converted |= 1u << j;
    }
    return st->out_bf16;
}

sy_status plan_run_steps(sy_plan *p, int32_t first, int32_t last) {
    if (p->tpu_view)
        return sy_error(SY_ERR_STATE, "this plan was compiled as the TPU's view of the step (tpu_view), for the cost "
                                      "model only: it has no buffers to run on");
    if (p->profile && first == 0) p->profile_runs++;
    for (int32_t s = first; s < last; s++) {
        step *st = &p->steps[s];
        double t0 = p->profile ? sy_now() : 0;
        /* issue 16, bfloat16 storage: inputs the kernel reads as float32 */
        for (int j = 0; st->cvt_bytes && j < p->g->nodes[st->node].n_in; j++)
            if (p->cvt[st->in_first + j])
                sy_bf16_load_all(st->args.in[j], p->cvt_src[st->in_first + j], sy_shape_count(&st->args.in_shape[j]));
        st->kernel->run(&st->args);
        if (st->bf16_act >= 0) {
            const sy_shape *os = st->args.out_shape;
            int64_t n = os->dims[os->rank - 1];
            sy_bf16_epilogue(st->args.out, sy_shape_count(os) / n, n, p->g->nodes[st->node].n_in == 3 ? st->args.in[2] : NULL,
                             st->bf16_act);
        } else if (st->round_bf16 && st->args.op == SY_OP_SIGMOID)
            sy_bf16_sigmoid(st->args.out, st->args.in[0], sy_shape_count(st->args.out_shape));
        else if (st->round_bf16) sy_bf16_round_all(st->args.out, sy_shape_count(st->args.out_shape));
        if (p->profile) p->profile[s] += sy_now() - t0;
        if (atomic_load_explicit(&p->ex.failed, memory_order_relaxed)) {
            const sy_node_rec *r = &p->g->nodes[st->node];
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s (%s): %s", sy_op_name(r->op), r->name, p->ex.error);
        }
    }
    return SY_OK;
}

sy_status sy_plan_run(sy_plan *p) {
    plan_prepare(p);
    sy_status st = plan_run_steps(p, 0, p->first_update);
    if (st == SY_OK && p->first_update < p->n_steps) {
        plan_before_update(p);
        st = plan_run_steps(p, p->first_update, p->n_steps);
    }
    if (st == SY_OK && p->has_optimizer) p->vars->iterations++;
    return st;
}

sy_status sy_plan_run_gradients(sy_plan *p) {
    plan_prepare(p);
    return plan_run_steps(p, 0, p->first_update);
}

sy_status sy_plan_run_update(sy_plan *p) {
    if (!p->has_updates) return sy_error(SY_ERR_STATE, "this plan has no optimizer update to run");
    plan_prepare(p);
    plan_before_update(p);
    sy_status st = plan_run_steps(p, p->first_update, p->n_steps);
    if (st == SY_OK && p->has_optimizer) p->vars->iterations++;
    return st;
}

void *sy_plan_gradients(sy_plan *p, size_t *bytes) {
    if (bytes) *bytes = (size_t)p->info.grad_bytes;
    return p->grads;
}

const void *sy_plan_output(const sy_plan *p, sy_node node) {
    if (node < 0 || node >= p->g->n_nodes) return NULL;
    sy_node s = plan_storage_of(p, node);
    if (!p->readable[s] && p->g->nodes[s].op != SY_OP_PARAM) return NULL;
    return plan_resolve(p, p->places[s]);
}

const void *sy_plan_gradient(const sy_plan *p, sy_node param) {
    for (int32_t i = 0; i < p->n_grads; i++)
        if (p->grad_params[i] == param) return plan_resolve(p, p->places[p->grad_nodes[i]]);
    return NULL;
}

sy_vars *sy_plan_vars(sy_plan *p) { return p->vars; }
void sy_plan_set_learning_rate(sy_plan *p, float lr) { p->ex.learning_rate = lr; }
float sy_plan_learning_rate(const sy_plan *p) { return p->ex.learning_rate; }
void sy_plan_get_info(const sy_plan *p, sy_plan_info *info) {
    *info = p->info;
    info->backend = p->backend->name;
}
