/*
 * graph.c - the graph builder: node storage, name scopes, sticky errors,
 * leaves (inputs, parameters, constants) and parameter initializers.
 *
 * Nodes live in one growing array and refer to their inputs through a
 * second array of edges, so a node is an index and a graph copies with two
 * memcpys. Every node is added by graph_add(), which links the inputs, runs
 * the op's shape inference (graph/registry.c) and, on a mismatch, records the
 * first error and makes every later call a no-op returning SY_NONE.
 */
#include "graph_internal.h"

#include <math.h>
#include <string.h>

sy_status sy_graph_new(sy_graph **out) {
    *out = sy_calloc(1, sizeof **out);
    if (!*out) return sy_error(SY_ERR_OUT_OF_MEMORY, "graph: out of memory");
    return SY_OK;
}

void sy_graph_free(sy_graph *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        sy_free(g->nodes[i].name);
        if (g->nodes[i].op == SY_OP_CONSTANT) sy_free(g->nodes[i].attr.constant.data); /* issue 18 */
    }
    for (int64_t i = 0; i < g->n_progs; i++) sy_free(g->progs[i]);
    sy_free(g->progs);
    sy_free(g->nodes);
    sy_free(g->edges);
    sy_free(g);
}

sy_status sy_graph_status(const sy_graph *g) { return g->status; }
const char *sy_graph_error(const sy_graph *g) { return g->error; }

void sy_graph_push_scope(sy_graph *g, const char *name) {
    size_t len = strlen(g->scope);
    if (g->n_scopes < (int32_t)(sizeof g->scope_marks / sizeof g->scope_marks[0]))
        g->scope_marks[g->n_scopes] = (int32_t)len;
    g->n_scopes++;
    snprintf(g->scope + len, sizeof g->scope - len, "%s%s", len ? "/" : "", name);
}

void sy_graph_pop_scope(sy_graph *g) {
    if (g->n_scopes == 0) return;
    g->n_scopes--;
    if (g->n_scopes < (int32_t)(sizeof g->scope_marks / sizeof g->scope_marks[0]))
        g->scope[g->scope_marks[g->n_scopes]] = '\0';
}

int32_t sy_graph_node_count(const sy_graph *g) { return (int32_t)g->n_nodes; }

static bool valid(const sy_graph *g, sy_node n) { return n >= 0 && n < g->n_nodes; }

sy_shape sy_graph_shape(const sy_graph *g, sy_node n) {
    sy_shape none = {0};
    return valid(g, n) ? g->nodes[n].shape : none;
}
sy_dtype sy_graph_dtype(const sy_graph *g, sy_node n) { return valid(g, n) ? g->nodes[n].dtype : SY_F32; }
/* issue 16, mixed_bfloat16 */
bool sy_graph_set_bf16(sy_graph *g, bool on) {
    bool was = g->bf16;
    g->bf16 = on;
    return was;
}
bool sy_graph_is_bf16(const sy_graph *g, sy_node n) { return valid(g, n) && g->nodes[n].bf16; }
sy_node sy_graph_cast_bf16(sy_graph *g, sy_node x) {
    bool was = sy_graph_set_bf16(g, true);
    sy_node y = graph_add(g, SY_OP_COPY, &x, 1, NULL, NULL);
    g->bf16 = was;
    return y;
}
const char *sy_graph_name(const sy_graph *g, sy_node n) { return valid(g, n) ? g->nodes[n].name : ""; }
const char *sy_graph_op_name(const sy_graph *g, sy_node n) {
    return valid(g, n) ? sy_op_name(g->nodes[n].op) : "";
}

sy_status graph_fail(sy_graph *g, const sy_node_rec *n, sy_status status, const char *fmt, ...) {
    if (g->status != SY_OK) return g->status; /* keep the first */
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(g->error, sizeof g->error, "%s (%s): %s", sy_op_name(n->op), n->name ? n->name : "?", msg);
    else
        snprintf(g->error, sizeof g->error, "%s", msg);
    g->status = status;
    return sy_error(status, "%s", g->error);
}

const char *graph_in_shape_str(const sy_graph *g, const sy_node_rec *n, int i, char *buf) {
    return sy_shape_format(&graph_in_rec(g, n, i)->shape, buf, SY_SHAPE_STR_MAX);
}

/* "scope/base", or "scope/base_N" if that name is taken by a leaf (ops may
 * repeat names; parameters and inputs are identified by them). */
static char *scoped_name(const sy_graph *g, const char *base) {
    char buf[768];
    snprintf(buf, sizeof buf, "%s%s%s", g->scope, g->scope[0] ? "/" : "", base);
    return sy_strdup(buf);
}

sy_node graph_add(sy_graph *g, sy_op op, const sy_node *in, int n_in, const sy_attrs *attr,
                  const sy_shape *shape) {
    if (g->status != SY_OK) return SY_NONE;
    for (int i = 0; i < n_in; i++) {
        if (!valid(g, in[i])) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s: input %d is not a node of this graph (%d)", sy_op_name(op), i, in[i]);
            graph_fail(g, NULL, SY_ERR_INVALID_ARGUMENT, "%s", msg);
            return SY_NONE;
        }
    }
    int arity = sy_op_arity(op);
    if (arity >= 0 && n_in != arity) {
        graph_fail(g, NULL, SY_ERR_INTERNAL, "%s takes %d inputs, got %d", sy_op_name(op), arity, n_in);
        return SY_NONE;
    }
    if (SY_GROW(g->nodes, g->cap_nodes, g->n_nodes + 1) || SY_GROW(g->edges, g->cap_edges, g->n_edges + n_in)) {
        graph_fail(g, NULL, SY_ERR_OUT_OF_MEMORY, "graph: out of memory adding %s", sy_op_name(op));
        return SY_NONE;
    }
    sy_node id = (sy_node)g->n_nodes;
    sy_node_rec *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->bf16 = g->bf16;
    if (attr) n->attr = *attr;
    if (shape) n->shape = *shape;
    n->in_off = (int32_t)g->n_edges;
    n->n_in = n_in;
    if (n_in) memcpy(g->edges + g->n_edges, in, (size_t)n_in * sizeof *in);
    n->name = scoped_name(g, sy_op_name(op));
    if (!n->name) {
        graph_fail(g, NULL, SY_ERR_OUT_OF_MEMORY, "graph: out of memory");
        return SY_NONE;
    }
    g->n_nodes++;
    g->n_edges += n_in;
    const sy_op_def *def = sy_op_def_of(op);
    int64_t bytes;
    sy_status st = def->infer(g, n);
    if (st == SY_OK && sy_shape_bytes(&n->shape, sy_dtype_size(n->dtype), &bytes) != SY_OK) {
        /* a shape past int64 (a batch of 2^62): said here, where the layer is
         * known, not as a nonsense mismatch further on */
        char buf[SY_SHAPE_STR_MAX];
        st = graph_fail(g, n, SY_ERR_SHAPE, "its output %s is too large: more than 2^63 bytes",
                        sy_shape_format(&n->shape, buf, sizeof buf));
    }
    if (st != SY_OK) {
        g->n_nodes--; /* drop the half-made node; the error stays */
        g->n_edges -= n_in;
        sy_free(n->name);
        return SY_NONE;
    }
    return id;
}

/* ---- leaves ----------------------------------------------------------------- */

static sy_status check_shape(sy_graph *g, const char *what, const char *name, const sy_shape *s) {
    if (!name) name = "?";
    if (s->rank < 0 || s->rank > SY_MAX_RANK)
        return graph_fail(g, NULL, SY_ERR_SHAPE, "%s '%s': rank %d is outside [0, %d]", what, name, s->rank, SY_MAX_RANK);
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] <= 0) {
            char buf[SY_SHAPE_STR_MAX];
            return graph_fail(g, NULL, SY_ERR_SHAPE, "%s '%s': shape %s has a dimension that is not positive", what,
                              name, sy_shape_format(s, buf, sizeof buf));
        }
    return SY_OK;
}

static sy_node add_leaf(sy_graph *g, sy_op op, const char *name, sy_dtype dtype, const sy_shape *shape) {
    if (g->status != SY_OK) return SY_NONE;
    if (dtype != SY_F32 && dtype != SY_F64 && dtype != SY_I32 && dtype != SY_I8) { /* issue 18: int8 */
        graph_fail(g, NULL, SY_ERR_DTYPE, "%s '%s': dtype %s (%d); graph values are float32, float64, int32 or int8",
                   sy_op_name(op), name ? name : "", sy_dtype_name(dtype), (int)dtype);
        return SY_NONE;
    }
    if (check_shape(g, sy_op_name(op), name, shape) != SY_OK) return SY_NONE;
    sy_node id = graph_add(g, op, NULL, 0, NULL, shape);
    if (id == SY_NONE) return SY_NONE;
    sy_node_rec *n = graph_node(g, id);
    n->dtype = dtype;
    if (name) {
        char *full = scoped_name(g, name);
        if (!full) {
            graph_fail(g, NULL, SY_ERR_OUT_OF_MEMORY, "graph: out of memory");
            return SY_NONE;
        }
        sy_free(n->name);
        n->name = full;
        for (int64_t i = 0; i < g->n_nodes - 1; i++) {
            sy_node_rec *o = &g->nodes[i];
            if ((o->op == SY_OP_INPUT || o->op == SY_OP_PARAM) && strcmp(o->name, full) == 0) {
                graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "the name '%s' is already used by another %s", full,
                           sy_op_name(o->op));
                return SY_NONE;
            }
        }
    }
    return id;
}

sy_status infer_INPUT(sy_graph *g, sy_node_rec *n) { (void)g, (void)n; return SY_OK; }
sy_status infer_PARAM(sy_graph *g, sy_node_rec *n) { (void)g, (void)n; return SY_OK; }
sy_status infer_FILL(sy_graph *g, sy_node_rec *n) { (void)g, (void)n; return SY_OK; }

sy_node sy_graph_input(sy_graph *g, const char *name, sy_dtype dtype, sy_shape shape) {
    return add_leaf(g, SY_OP_INPUT, name ? name : "input", dtype, &shape);
}

sy_node sy_graph_param(sy_graph *g, const char *name, sy_dtype dtype, sy_shape shape, sy_init init) {
    if (g->status == SY_OK && dtype != SY_F32 && dtype != SY_F64) {
        graph_fail(g, NULL, SY_ERR_DTYPE, "param '%s': parameters are float32 or float64, not %s", name,
                   sy_dtype_name(dtype));
        return SY_NONE;
    }
    sy_node id = add_leaf(g, SY_OP_PARAM, name ? name : "param", dtype, &shape);
    if (id == SY_NONE) return SY_NONE;
    graph_node(g, id)->init = init;
    graph_node(g, id)->trainable = true;
    return id;
}

void sy_graph_set_trainable(sy_graph *g, sy_node param, bool trainable) {
    if (valid(g, param) && g->nodes[param].op == SY_OP_PARAM) g->nodes[param].trainable = trainable;
}

sy_node sy_graph_fill(sy_graph *g, sy_dtype dtype, sy_shape shape, double value) {
    sy_node id = add_leaf(g, SY_OP_FILL, NULL, dtype, &shape);
    if (id != SY_NONE) graph_node(g, id)->attr.fill.value = value;
    return id;
}

/* ---- initializers ------------------------------------------------------------ */

sy_init sy_init_zeros(void) { return (sy_init){SY_INIT_ZEROS, 0, 0, 0}; }
sy_init sy_init_constant(double value) { return (sy_init){SY_INIT_CONSTANT, value, 0, 0}; }
sy_init sy_init_uniform(double lo, double hi, uint64_t seed) { return (sy_init){SY_INIT_UNIFORM, lo, hi, seed}; }
sy_init sy_init_normal(double mean, double stddev, uint64_t seed) {
    return (sy_init){SY_INIT_NORMAL, mean, stddev, seed};
}
sy_init sy_init_glorot_uniform(uint64_t seed) { return (sy_init){SY_INIT_GLOROT_UNIFORM, 0, 0, seed}; }
sy_init sy_init_orthogonal(double gain, uint64_t seed) { return (sy_init){SY_INIT_ORTHOGONAL, gain, 0, seed}; }

/* Keras's Orthogonal: the Q of a normal matrix of shape (max(rows, cols),
 * min(rows, cols)) with rows = prod(shape[:-1]), cols = shape[-1], its
 * columns' signs fixed so that R has a positive diagonal, transposed when
 * rows < cols, times the gain. Modified Gram-Schmidt gives that Q directly
 * (its R diagonal is the positive column norms). */
static sy_status orthogonal(const sy_init *init, const sy_shape *shape, double *data, sy_rng *r) {
    int64_t cols = shape->rank ? shape->dims[shape->rank - 1] : 1, n = sy_shape_count(shape), rows = cols ? n / cols : 0;
    int64_t m = rows > cols ? rows : cols, k = rows > cols ? cols : rows;
    double *q = sy_malloc((size_t)(m * k > 0 ? m * k : 1) * sizeof *q);
    if (!q) return sy_error(SY_ERR_OUT_OF_MEMORY, "orthogonal initializer: out of memory for (%lld, %lld)", (long long)m, (long long)k);
    for (int64_t i = 0; i < m * k; i++) q[i] = sy_rng_normal(r); /* (m, k) row-major */
    for (int64_t j = 0; j < k; j++) {
        for (int64_t p = 0; p < j; p++) {
            double dot = 0;
            for (int64_t i = 0; i < m; i++) dot += q[i * k + p] * q[i * k + j];
            for (int64_t i = 0; i < m; i++) q[i * k + j] -= dot * q[i * k + p];
        }
        double norm = 0;
        for (int64_t i = 0; i < m; i++) norm += q[i * k + j] * q[i * k + j];
        norm = sqrt(norm);
        for (int64_t i = 0; i < m; i++) q[i * k + j] = norm > 0 ? q[i * k + j] / norm : 0;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) data[i * cols + j] = init->a * (rows >= cols ? q[i * k + j] : q[j * k + i]);
    sy_free(q);
    return SY_OK;
}

/* Keras's _compute_fans. */
static void fans(const sy_shape *s, double *fan_in, double *fan_out) {
    if (s->rank < 1) {
        *fan_in = *fan_out = 1;
    } else if (s->rank == 1) {
        *fan_in = *fan_out = (double)s->dims[0];
    } else if (s->rank == 2) {
        *fan_in = (double)s->dims[0];
        *fan_out = (double)s->dims[1];
    } else {
        double receptive = 1;
        for (int i = 0; i < s->rank - 2; i++) receptive *= (double)s->dims[i];
        *fan_in = (double)s->dims[s->rank - 2] * receptive;
        *fan_out = (double)s->dims[s->rank - 1] * receptive;
    }
}

static double truncated(sy_rng *r) {
    for (;;) {
        double z = sy_rng_normal(r);
        if (fabs(z) <= 2.0) return z;
    }
}

sy_status sy_init_fill(const sy_init *init, const sy_shape *shape, double *data) {
    int64_t n = sy_shape_count(shape);
    sy_rng r = sy_rng_new(init->seed, 0x1417);
    double fan_in, fan_out;
    fans(shape, &fan_in, &fan_out);
    /* variance scaling: scale / n with n = fan_in, fan_out or their mean */
    double scale = 0, limit;
    bool uniform = false, normal = false;
    switch (init->kind) {
    case SY_INIT_ZEROS:
    case SY_INIT_ONES:
    case SY_INIT_CONSTANT: {
        double v = init->kind == SY_INIT_ZEROS ? 0 : init->kind == SY_INIT_ONES ? 1 : init->a;
        for (int64_t i = 0; i < n; i++) data[i] = v;
        return SY_OK;
    }
    case SY_INIT_UNIFORM:
        for (int64_t i = 0; i < n; i++) data[i] = init->a + (init->b - init->a) * sy_rng_uniform64(&r);
        return SY_OK;
    case SY_INIT_NORMAL:
        for (int64_t i = 0; i < n; i++) data[i] = init->a + init->b * sy_rng_normal(&r);
        return SY_OK;
    case SY_INIT_TRUNCATED_NORMAL:
        for (int64_t i = 0; i < n; i++) data[i] = init->a + init->b * truncated(&r);
        return SY_OK;
    case SY_INIT_GLOROT_UNIFORM: scale = 1.0 / ((fan_in + fan_out) / 2); uniform = true; break;
    case SY_INIT_GLOROT_NORMAL: scale = 1.0 / ((fan_in + fan_out) / 2); normal = true; break;
    case SY_INIT_HE_UNIFORM: scale = 2.0 / fan_in; uniform = true; break;
    case SY_INIT_HE_NORMAL: scale = 2.0 / fan_in; normal = true; break;
    case SY_INIT_LECUN_UNIFORM: scale = 1.0 / fan_in; uniform = true; break;
    case SY_INIT_LECUN_NORMAL: scale = 1.0 / fan_in; normal = true; break;
    case SY_INIT_ORTHOGONAL: return orthogonal(init, shape, data, &r);
    case SY_INIT_VARIANCE_SCALING: { /* issue 15 */
        int mode = (int)init->b % 3, dist = (int)init->b / 3;
        scale = init->a / (mode == 0 ? fan_in : mode == 1 ? fan_out : (fan_in + fan_out) / 2);
        if (dist == 1) { /* untruncated_normal */
            for (int64_t i = 0; i < n; i++) data[i] = sqrt(scale) * sy_rng_normal(&r);
            return SY_OK;
        }
        uniform = dist == 2;
        normal = dist == 0;
        break;
    }
    case SY_INIT_UNIT_FORGET_BIAS: {
        int64_t last = shape->rank ? shape->dims[shape->rank - 1] : 1, u = last / 4;
        for (int64_t i = 0; i < n; i++) data[i] = (i % last) >= u && (i % last) < 2 * u ? 1.0 : 0.0;
        return SY_OK;
    }
    default: return sy_error(SY_ERR_INVALID_ARGUMENT, "initializer: unknown kind %d", (int)init->kind);
    }
    if (uniform) {
        limit = sqrt(3.0 * scale);
        for (int64_t i = 0; i < n; i++) data[i] = -limit + 2 * limit * sy_rng_uniform64(&r);
    } else if (normal) {
        /* truncated normal with the stddev corrected for the truncation, as Keras does */
        double stddev = sqrt(scale) / 0.87962566103423978;
        for (int64_t i = 0; i < n; i++) data[i] = stddev * truncated(&r);
    }
    return SY_OK;
}

/* ---- helpers for gradient rules ------------------------------------------- */

sy_node graph_unbroadcast(sy_graph *g, sy_node dy, const sy_shape *shape) {
    if (dy == SY_NONE) return SY_NONE;
    sy_shape ys = graph_node(g, dy)->shape;
    if (sy_shape_equal(&ys, shape)) return dy;
    int32_t axes[SY_MAX_RANK];
    int n = 0;
    for (int i = 0; i < ys.rank; i++) {
        int j = i - (ys.rank - shape->rank);
        if (j < 0 || (shape->dims[j] == 1 && ys.dims[i] != 1)) axes[n++] = i;
    }
    sy_node r = n ? sy_graph_reduce_sum(g, dy, axes, n, false) : dy;
    return sy_graph_reshape(g, r, *shape);
}

sy_status graph_own_prog(sy_graph *g, sy_eprog *p) {
    if (SY_GROW(g->progs, g->cap_progs, g->n_progs + 1)) {
        sy_free(p);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "graph: out of memory");
    }
    g->progs[g->n_progs++] = p;
    return SY_OK;
}

sy_status graph_clone(const sy_graph *g, sy_graph **out) {
    sy_graph *c;
    sy_status st = sy_graph_new(&c);
    if (st) return st;
    *c = *g;
    c->nodes = NULL;
    c->edges = NULL;
    c->progs = NULL;
    c->cap_nodes = c->cap_edges = c->cap_progs = 0;
    c->n_nodes = c->n_edges = c->n_progs = 0;
    if (SY_GROW(c->nodes, c->cap_nodes, g->n_nodes) || SY_GROW(c->edges, c->cap_edges, g->n_edges)) {
        sy_graph_free(c);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "graph: out of memory copying");
    }
    if (g->n_nodes) memcpy(c->nodes, g->nodes, (size_t)g->n_nodes * sizeof *g->nodes);
    if (g->n_edges) memcpy(c->edges, g->edges, (size_t)g->n_edges * sizeof *g->edges);
    c->n_edges = g->n_edges;
    for (int64_t i = 0; i < g->n_nodes; i++) {
        c->nodes[i].name = sy_strdup(g->nodes[i].name);
        bool ok = true;
        if (c->nodes[i].op == SY_OP_CONSTANT) { /* issue 18: a constant's bytes are its node's own */
            size_t bytes = (size_t)sy_shape_count(&g->nodes[i].shape) * sy_dtype_size(g->nodes[i].dtype);
            c->nodes[i].attr.constant.data = sy_malloc(bytes ? bytes : 1);
            if ((ok = c->nodes[i].attr.constant.data != NULL) && bytes)
                memcpy(c->nodes[i].attr.constant.data, g->nodes[i].attr.constant.data, bytes);
        }
        c->n_nodes = i + 1;
        if (!c->nodes[i].name || !ok) {
            sy_graph_free(c);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "graph: out of memory copying");
        }
    }
    for (int64_t i = 0; i < g->n_progs; i++) {
        sy_eprog *p = sy_malloc(sizeof *p);
        if (!p) {
            sy_graph_free(c);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "graph: out of memory copying");
        }
        *p = *g->progs[i];
        for (int64_t j = 0; j < c->n_nodes; j++)
            if (c->nodes[j].op == SY_OP_FUSED_ELTWISE && c->nodes[j].attr.fused == g->progs[i]) c->nodes[j].attr.fused = p;
        if (graph_own_prog(c, p)) {
            sy_graph_free(c);
            return SY_ERR_OUT_OF_MEMORY;
        }
    }
    *out = c;
    return SY_OK;
}
