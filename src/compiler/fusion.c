/*
 * fusion.c - folding elementwise work into the ops around it, so that
 * intermediate tensors are never written to memory.
 *
 * Two rewrites, both on the plan's private copy of the graph, after
 * autodiff (so gradient rules only ever see plain ops):
 *
 * 1. Epilogues. matmul or conv2d -> bias_add -> relu|sigmoid|tanh becomes
 *    one matmul/conv2d with a bias input and an activation attribute: the
 *    kernel applies them to each output tile while it is still in cache.
 *    The pre-activation values are not kept; no gradient needs them (the
 *    activations' gradients read the output).
 *
 * 2. Elementwise chains. A maximal tree of elementwise ops, each feeding only
 *    the next and all of one shape, becomes one fused_eltwise op running a
 *    small register program over tiles of the output. Operands from outside
 *    the chain are loaded full-size, as a row broadcast along the last axis
 *    (a bias), or as a scalar; any other broadcast keeps its op unfused.
 *
 *    A BatchNormalization after a conv is not folded into the conv's kernel
 *    (w * scale): at inference (the only place its statistics do not
 *    depend on the conv) the rounding of w * scale, amplified through a
 *    deep network, moved ResNet50's predictions 8 times further from
 *    Keras's (at 32x32, with direct convs: 4.3e-5 of the largest output
 *    0.17 folded, 5.5e-6 not). It runs as one fused elementwise pass after
 *    the conv, in Keras's order.
 *
 * 3. Conv -> pool (issue 21, docs/design/fusion.md; runs first). conv2d ->
 *    [bias_add] -> [activation] -> max|avg_pool2d -> [relu] and its gradient
 *    ops become conv2d_pool (the pooled output, and for max pooling a byte
 *    per output naming the maximum's place) and conv2d_pool_backprop_filter
 *    (the kernel's and the bias's gradients straight from the pooled
 *    gradient), so that the conv's full-size output and its gradient never
 *    exist. autodiff's grad_of map says which gradient op belongs to which
 *    node; the backend says which shapes its kernels take (sy_backend.fuses).
 *    $SYSTOLIC_CONV_POOL=0 turns it off.
 *
 * 4. int8 conv -> max pool (issue 18): qconv2d -> qmax_pool2d becomes
 *    qconv2d_pool, which requantizes only each window's largest accumulator
 *    (the section's comment says why that is exact and when it fuses).
 *
 * 5. A Dense layer's bias gradient (issue 21): reduce_sum(dy, axis 0) beside
 *    the kernel gradient's matmul(x, dy, transpose_a) becomes that product's
 *    side output matmul_bias_grad (its section says when).
 *
 * A node whose value the plan must keep (the loss, a requested output, a
 * parameter's gradient) may end a chain but is never folded into one.
 */
#include "compiler_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sy_status fusion_grow(sy_fusion_state *s, int64_t need) {
    if (need <= s->cap) return SY_OK;
    int64_t cap = s->cap, c1 = cap, c2 = cap, c3 = cap, c4 = cap;
    if (SY_GROW(s->live, c1, need) || SY_GROW(s->protect, c2, need) || SY_GROW(s->key, c3, need) ||
        SY_GROW(s->origin, c4, need) || SY_GROW(s->remap, cap, need))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    s->cap = cap;
    return SY_OK;
}

/* Uses of each live node by live nodes, and (if exactly one) the user. */
static sy_status count_uses(const sy_graph *g, const sy_fusion_state *s, int32_t **uses, sy_node **user) {
    int64_t n = g->n_nodes;
    *uses = sy_calloc((size_t)n, sizeof **uses);
    *user = sy_malloc((size_t)n * sizeof **user);
    if (!*uses || !*user) return sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    for (int64_t i = 0; i < n; i++) (*user)[i] = SY_NONE;
    for (int64_t i = 0; i < n; i++) {
        if (!s->live[i]) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            sy_node in = graph_input(g, (sy_node)i, j);
            (*uses)[in]++;
            (*user)[in] = (sy_node)i;
        }
    }
    return SY_OK;
}

/* Make `fresh` stand for `old` (the last node of a folded group). */
static void replace(sy_graph *g, sy_fusion_state *s, sy_node old, sy_node fresh) {
    s->live[fresh] = true;
    s->key[fresh] = s->key[old];
    s->protect[fresh] = s->protect[old];
    s->remap[fresh] = fresh;
    s->remap[old] = fresh;
    s->live[old] = false;
    /* issue 16, cost model: the fused node takes the name of the node it stands for, so the plan's dump and its
     * profile say which layer it belongs to */
    char *name = g->nodes[old].name ? sy_strdup(g->nodes[old].name) : NULL;
    if (name) {
        sy_free(g->nodes[fresh].name);
        g->nodes[fresh].name = name;
    }
    for (int64_t i = 0; i < g->n_nodes; i++) {
        if (!s->live[i] || i == fresh) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (g->edges[g->nodes[i].in_off + j] == old) g->edges[g->nodes[i].in_off + j] = fresh;
    }
}

static bool sole_use(const sy_fusion_state *s, const int32_t *uses, sy_node n) { return uses[n] == 1 && !s->protect[n]; }

/* issue 21, `systolic summary --plan`: record that `fresh` stands for members[0 .. n) (SY_NONE
 * skipped), each by its own origin when it is a fused node, else by its name: "a + b + c". */
static sy_status set_origin(const sy_graph *g, sy_fusion_state *s, sy_node fresh,
                            const sy_node *members, int n) {
    size_t len = 1;
    for (int i = 0; i < n; i++) {
        if (members[i] == SY_NONE) continue;
        const char *m = s->origin[members[i]] ? s->origin[members[i]] : g->nodes[members[i]].name;
        len += strlen(m ? m : "?") + 3;
    }
    char *o = sy_malloc(len), *at = o;
    if (!o) return sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    *o = '\0';
    for (int i = 0; i < n; i++) {
        if (members[i] == SY_NONE) continue;
        const char *m = s->origin[members[i]] ? s->origin[members[i]] : g->nodes[members[i]].name;
        at += sprintf(at, "%s%s", at == o ? "" : " + ", m ? m : "?");
    }
    sy_free(s->origin[fresh]);
    s->origin[fresh] = o;
    return SY_OK;
}

static sy_status fuse_epilogues(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    int32_t *uses = NULL;
    sy_node *user = NULL;
    sy_status st = count_uses(g, s, &uses, &user);
    int64_t n0 = g->n_nodes;
    for (int64_t m = 0; st == SY_OK && m < n0; m++) {
        sy_node_rec *r = &g->nodes[m];
        if (!s->live[m] || (r->op != SY_OP_MATMUL && r->op != SY_OP_CONV2D) || r->n_in != 2) continue;
        if ((r->op == SY_OP_MATMUL && r->attr.matmul.act) || (r->op == SY_OP_CONV2D && r->attr.conv.act)) continue;
        sy_node last = (sy_node)m, bias = SY_NONE;
        int act = SY_ACT_NONE, absorbed = 0;
        /* issue 16, mixed_bfloat16: a bf16 product takes a bf16 bias and activation only, which the plan then
         * applies with TensorFlow's roundings between them (sy_bf16_epilogue) */
        bool bf16 = r->bf16;
        if (sole_use(s, uses, last)) {
            sy_node c = user[last];
            if (g->nodes[c].op == SY_OP_BIAS_ADD && g->nodes[c].bf16 == bf16 && graph_input(g, c, 0) == last) {
                bias = graph_input(g, c, 1);
                last = c;
                absorbed++;
            }
        }
        sy_op conv_op = r->op; /* r moves when graph_add grows the node array */
        if (sole_use(s, uses, last)) {
            sy_node c = user[last];
            sy_op op = g->nodes[c].op;
            if ((op == SY_OP_RELU || op == SY_OP_SIGMOID || op == SY_OP_TANH) && g->nodes[c].bf16 == bf16) {
                act = op == SY_OP_RELU ? SY_ACT_RELU : op == SY_OP_SIGMOID ? SY_ACT_SIGMOID : SY_ACT_TANH;
                last = c;
                absorbed++;
            }
        }
        if (!absorbed) continue;
        sy_attrs at = r->attr;
        if (r->op == SY_OP_MATMUL) at.matmul.act = (uint8_t)act;
        else at.conv.act = (uint8_t)act;
        sy_node in[3] = {graph_input(g, (sy_node)m, 0), graph_input(g, (sy_node)m, 1), bias};
        sy_node fresh = graph_add(g, conv_op, in, bias == SY_NONE ? 2 : 3, &at, NULL);
        if (fresh == SY_NONE) {
            st = sy_graph_status(g);
            break;
        }
        g->nodes[fresh].bf16 = g->nodes[last].bf16;
        if ((st = fusion_grow(s, g->n_nodes))) break;
        sy_node members[3] = {(sy_node)m, bias != SY_NONE ? user[m] : SY_NONE,
                              act ? last : SY_NONE};
        if ((st = set_origin(g, s, fresh, members, 3))) break;
        /* the matmul and bias_add die; the activation's consumers now read fresh */
        s->live[m] = false;
        if (bias != SY_NONE) s->live[user[m]] = false;
        replace(g, s, last, fresh);
        *folded += absorbed;
    }
    sy_free(uses);
    sy_free(user);
    return st;
}

/* How an operand of shape `in` is read by an elementwise op of shape `out`. */
static int load_kind(const sy_shape *in, const sy_shape *out) {
    if (sy_shape_equal(in, out)) return SY_E_LD_FULL;
    if (sy_shape_count(in) == 1) return SY_E_LD_SCALAR;
    if (out->rank >= 1 && in->rank >= 1 && in->dims[in->rank - 1] == out->dims[out->rank - 1] &&
        sy_shape_count(in) == in->dims[in->rank - 1] && in->rank <= out->rank)
        return SY_E_LD_ROW;
    return -1;
}

static bool eligible(const sy_graph *g, const sy_fusion_state *s, sy_node e) {
    const sy_node_rec *r = &g->nodes[e];
    if (!s->live[e] || !(sy_op_def_of(r->op)->flags & SY_OPF_ELTWISE)) return false;
    if (r->dtype != SY_F32 && r->dtype != SY_F64) return false;
    for (int j = 0; j < r->n_in; j++)
        if (load_kind(&graph_in_rec(g, r, j)->shape, &r->shape) < 0) return false;
    return true;
}

typedef struct group {
    sy_node members[SY_FUSED_MAX_INSNS];
    int n;
    sy_node ext[SY_KMAX_IN];
    int n_ext;
} group;

/* Register program for a group (members in topological order). False if it
 * does not fit the limits; the group is then left unfused. */
static bool build_program(const sy_graph *g, group *gr, sy_eprog *p) {
    int reg_of[SY_FUSED_MAX_INSNS], uses_left[SY_FUSED_MAX_INSNS];
    bool busy[SY_FUSED_MAX_REGS] = {false};
    memset(p, 0, sizeof *p);
    gr->n_ext = 0;
    for (int i = 0; i < gr->n; i++) {
        uses_left[i] = 0;
        for (int k = i + 1; k < gr->n; k++)
            for (int j = 0; j < g->nodes[gr->members[k]].n_in; j++)
                if (graph_input(g, gr->members[k], j) == gr->members[i]) uses_left[i]++;
    }
#define ALLOC_REG(r)                                                                               \
    do {                                                                                           \
        r = -1;                                                                                    \
        for (int q = 0; q < SY_FUSED_MAX_REGS; q++)                                                \
            if (!busy[q]) {                                                                        \
                r = q;                                                                             \
                break;                                                                             \
            }                                                                                      \
        if (r < 0) return false;                                                                   \
        busy[r] = true;                                                                            \
    } while (0)
#define EMIT(o, d, x, y)                                                                           \
    do {                                                                                           \
        if (p->n >= SY_FUSED_MAX_INSNS) return false;                                              \
        p->insn[p->n++] = (sy_einsn){(uint8_t)(o), (uint8_t)(d), (uint8_t)(x), (uint8_t)(y)};      \
    } while (0)
    for (int i = 0; i < gr->n; i++) {
        sy_node m = gr->members[i];
        const sy_node_rec *r = &g->nodes[m];
        int opr[2] = {0, 0};
        bool temp[2] = {false, false};
        for (int j = 0; j < r->n_in; j++) {
            sy_node in = graph_input(g, m, j);
            int k = -1;
            for (int q = 0; q < i; q++)
                if (gr->members[q] == in) k = q;
            if (k >= 0) {
                opr[j] = reg_of[k];
                if (--uses_left[k] == 0) temp[j] = true; /* last use: free after */
                continue;
            }
            int e = -1;
            for (int q = 0; q < gr->n_ext; q++)
                if (gr->ext[q] == in) e = q;
            if (e < 0) {
                if (gr->n_ext >= SY_KMAX_IN) return false;
                e = gr->n_ext++;
                gr->ext[e] = in;
            }
            int reg;
            ALLOC_REG(reg);
            EMIT(load_kind(&g->nodes[in].shape, &r->shape), reg, e, 0);
            opr[j] = reg;
            temp[j] = true;
        }
        for (int j = 0; j < r->n_in; j++)
            if (temp[j]) busy[opr[j]] = false;
        int dst;
        ALLOC_REG(dst);
        EMIT(sy_op_def_of(r->op)->eop, dst, opr[0], r->n_in > 1 ? opr[1] : 0);
        if (r->op == SY_OP_ACT || r->op == SY_OP_ACT_GRAD) p->act[p->n - 1] = r->attr.act; /* its function */
        reg_of[i] = dst;
    }
#undef ALLOC_REG
#undef EMIT
    p->out = reg_of[gr->n - 1];
    return true;
}

static sy_status fuse_chains(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    int32_t *uses = NULL;
    sy_node *user = NULL;
    sy_status st = count_uses(g, s, &uses, &user);
    int64_t n0 = g->n_nodes;
    sy_node *parent = sy_malloc((size_t)n0 * sizeof *parent);
    if (!st && !parent) st = sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    for (int64_t e = 0; st == SY_OK && e < n0; e++) {
        parent[e] = SY_NONE;
        if (!eligible(g, s, (sy_node)e) || !sole_use(s, uses, (sy_node)e)) continue;
        sy_node c = user[e];
        /* issue 16, mixed_bfloat16: a fused chain rounds only its result, so a bf16 op folds only into a bf16
         * relu, which commutes with the rounding */
        bool exact = !g->nodes[e].bf16 || (g->nodes[c].op == SY_OP_RELU && g->nodes[c].bf16);
        if (exact && eligible(g, s, c) && sy_shape_equal(&g->nodes[e].shape, &g->nodes[c].shape)) parent[e] = c;
    }
    /* Each chain is a tree whose root folds into nobody. A consumer comes
     * after its producers, so one backward sweep finds every node's root, and
     * a forward sweep lists each root's members in topological order. */
    sy_node *top = st ? NULL : sy_malloc((size_t)n0 * sizeof *top);
    sy_node *next = st ? NULL : sy_malloc((size_t)n0 * sizeof *next);
    sy_node *head = st ? NULL : sy_malloc((size_t)n0 * 2 * sizeof *head), *tail = head ? head + n0 : NULL;
    if (!st && (!top || !next || !head)) st = sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    for (int64_t e = n0 - 1; st == SY_OK && e >= 0; e--) top[e] = parent[e] == SY_NONE ? (sy_node)e : top[parent[e]];
    for (int64_t e = 0; st == SY_OK && e < n0; e++) head[e] = tail[e] = next[e] = SY_NONE;
    for (int64_t e = 0; st == SY_OK && e < n0; e++) {
        if (!eligible(g, s, (sy_node)e)) continue;
        sy_node t = top[e];
        if (head[t] == SY_NONE) head[t] = (sy_node)e;
        else next[tail[t]] = (sy_node)e;
        tail[t] = (sy_node)e;
    }
    for (int64_t root = 0; st == SY_OK && root < n0; root++) {
        if (head[root] == SY_NONE || top[root] != (sy_node)root || !eligible(g, s, (sy_node)root)) continue;
        group gr = {.n = 0};
        bool overflow = false;
        for (sy_node e = head[root]; e != SY_NONE; e = next[e]) {
            if (gr.n >= SY_FUSED_MAX_INSNS) {
                overflow = true;
                break;
            }
            gr.members[gr.n++] = e;
        }
        if (overflow || gr.n < 2) continue;
        sy_eprog *prog = sy_malloc(sizeof *prog);
        if (!prog) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
            break;
        }
        if (!build_program(g, &gr, prog)) {
            sy_free(prog);
            continue;
        }
        if ((st = graph_own_prog(g, prog))) break;
        sy_attrs at;
        memset(&at, 0, sizeof at);
        at.fused = prog;
        sy_shape shape = g->nodes[root].shape;
        sy_node fresh = graph_add(g, SY_OP_FUSED_ELTWISE, gr.ext, gr.n_ext, &at, &shape);
        if (fresh == SY_NONE) {
            st = sy_graph_status(g);
            break;
        }
        g->nodes[fresh].bf16 = g->nodes[root].bf16;
        if ((st = fusion_grow(s, g->n_nodes)) || (st = set_origin(g, s, fresh, gr.members, gr.n)))
            break;
        for (int i = 0; i < gr.n - 1; i++) s->live[gr.members[i]] = false;
        replace(g, s, (sy_node)root, fresh);
        *folded += gr.n - 1;
    }
    sy_free(parent);
    sy_free(top);
    sy_free(next);
    sy_free(head);
    sy_free(uses);
    sy_free(user);
    return st;
}

/* ---- 3. issue 21: a conv and the pool after it --------------------------------------------------
 * conv2d -> [bias_add] -> [relu|sigmoid|tanh] -> max|avg_pool2d -> [relu], each feeding only the
 * next (and its own gradient ops), becomes one conv2d_pool (ops_fused.c) writing only the pooled
 * output and, for max pooling in a training plan, its argmax (a pool_argmax side output). Its
 * gradient ops -- the relu's, the pool's, the activation's, the bias's reduction and the filter's
 * -- become one conv2d_pool_backprop_filter reading dy at the pooled output, with the bias gradient
 * a side output (conv2d_pool_bias_grad). autodiff's grad_of says which gradient belongs to which
 * node. Left unfused: a chain with another reader of an inner value (a requested output, a skip
 * connection), a conv whose input gradient is needed (not the first layer), overlapping pools, an
 * average pool after an activation (its gradient needs every window place's value), and what the
 * backend's kernels do not take (sy_backend.fuses: on cpu, convs that take Winograd or 1x1). */

typedef struct conv_pool {
    sy_node conv, bias_add, act, pool, post; /* forward, SY_NONE where absent */
    sy_node dout, post_grad, pool_grad, act_grad, dconv, filter, bias_grad; /* training */
} conv_pool;

static bool node_in(sy_node n, const sy_node *set, int count) {
    for (int i = 0; i < count; i++)
        if (set[i] == n && n != SY_NONE) return true;
    return false;
}

/* The one live user of n that is not a gradient op, or SY_NONE (none, or several). */
static sy_node forward_user(const sy_graph *g, const sy_fusion_state *s, sy_node n) {
    sy_node found = SY_NONE;
    for (int64_t i = n + 1; i < g->n_nodes; i++) {
        if (!s->live[i] || (sy_op_def_of(g->nodes[i].op)->flags & SY_OPF_GRAD_OP)) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (graph_input(g, (sy_node)i, j) == n) {
                if (found != SY_NONE && found != (sy_node)i) return SY_NONE;
                found = (sy_node)i;
            }
    }
    return found;
}

/* Every live user of n is one of set[0 .. count). */
static bool users_within(const sy_graph *g, const sy_fusion_state *s, sy_node n, const sy_node *set,
                         int count) {
    for (int64_t i = n + 1; i < g->n_nodes; i++) {
        if (!s->live[i] || node_in((sy_node)i, set, count)) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (graph_input(g, (sy_node)i, j) == n) return false;
    }
    return true;
}

/* The live user of n with op `op` and n as input `at`, or SY_NONE. */
static sy_node user_with(const sy_graph *g, const sy_fusion_state *s, sy_node n, sy_op op, int at) {
    for (int64_t i = n + 1; i < g->n_nodes; i++)
        if (s->live[i] && g->nodes[i].op == op && g->nodes[i].n_in > at &&
            graph_input(g, (sy_node)i, at) == n)
            return (sy_node)i;
    return SY_NONE;
}

static sy_node grad_of(const sy_fusion_state *s, sy_node n) {
    return s->grad_of && n >= 0 && n < s->n_grad_of ? s->grad_of[n] : SY_NONE;
}

static bool is_op(const sy_graph *g, sy_node n, sy_op op) {
    return n != SY_NONE && g->nodes[n].op == op;
}

static bool same_window(const sy_attrs *a, const sy_attrs *b) {
    return a->pool.ksize[0] == b->pool.ksize[0] && a->pool.ksize[1] == b->pool.ksize[1] &&
           a->pool.stride[0] == b->pool.stride[0] && a->pool.stride[1] == b->pool.stride[1] &&
           a->pool.padding == b->pool.padding;
}

/* The forward chain from conv c. False when it is not one. */
static bool match_forward(const sy_graph *g, const sy_fusion_state *s, sy_node c, conv_pool *m) {
    const sy_node_rec *r = &g->nodes[c];
    if (r->op != SY_OP_CONV2D || r->n_in != 2 || r->attr.conv.act ||
        sy_conv_groups(&r->attr) != 1 || sy_conv_dilation(&r->attr, 0) != 1 ||
        sy_conv_dilation(&r->attr, 1) != 1 || (r->dtype != SY_F32 && r->dtype != SY_F64))
        return false;
    bool bf16 = r->bf16;
    sy_node n = c, u = forward_user(g, s, n);
    if (is_op(g, u, SY_OP_BIAS_ADD) && graph_input(g, u, 0) == n)
        m->bias_add = n = u, u = forward_user(g, s, n);
    if (is_op(g, u, SY_OP_RELU) || is_op(g, u, SY_OP_SIGMOID) || is_op(g, u, SY_OP_TANH))
        m->act = n = u, u = forward_user(g, s, n);
    if (!is_op(g, u, SY_OP_MAX_POOL2D) && !is_op(g, u, SY_OP_AVG_POOL2D)) return false;
    m->pool = u;
    const sy_attrs *pa = &g->nodes[u].attr;
    if (pa->pool.stride[0] < pa->pool.ksize[0] || pa->pool.stride[1] < pa->pool.ksize[1] ||
        (int64_t)pa->pool.ksize[0] * pa->pool.ksize[1] > 255)
        return false;
    if (g->nodes[u].op == SY_OP_AVG_POOL2D && m->act != SY_NONE) return false;
    u = forward_user(g, s, m->pool);
    if (is_op(g, u, SY_OP_RELU)) m->post = u;
    sy_node chain[5] = {m->conv, m->bias_add, m->act, m->pool, m->post};
    for (int i = 0; i < 5; i++)
        if (chain[i] != SY_NONE &&
            (g->nodes[chain[i]].bf16 != bf16 || g->nodes[chain[i]].dtype != r->dtype))
            return false;
    return true;
}

/* Its gradient ops, found through autodiff's grad_of. True also when there are none. */
static bool match_backward(const sy_graph *g, const sy_fusion_state *s, conv_pool *m) {
    sy_node last = m->post != SY_NONE ? m->post : m->pool;
    m->dout = grad_of(s, last);
    if (m->dout == SY_NONE) return true; /* not on the gradient's path: the forward alone */
    sy_node dpool = m->dout;
    if (m->post != SY_NONE) {
        m->post_grad = dpool = grad_of(s, m->pool);
        if (!is_op(g, dpool, SY_OP_RELU_GRAD) || graph_input(g, dpool, 0) != m->dout ||
            graph_input(g, dpool, 1) != m->post)
            return false;
    }
    sy_node pin = graph_input(g, m->pool, 0); /* the pool's input */
    m->pool_grad = grad_of(s, pin);
    bool max = g->nodes[m->pool].op == SY_OP_MAX_POOL2D;
    sy_node pg = m->pool_grad;
    if (max ? !is_op(g, pg, SY_OP_MAX_POOL2D_GRAD) || graph_input(g, pg, 0) != pin ||
                  graph_input(g, pg, 1) != m->pool || graph_input(g, pg, 2) != dpool
            : !is_op(g, pg, SY_OP_AVG_POOL2D_GRAD) || graph_input(g, pg, 0) != dpool)
        return false;
    if (!same_window(&g->nodes[pg].attr, &g->nodes[m->pool].attr)) return false;
    m->dconv = pg;
    if (m->act != SY_NONE) {
        sy_op op = g->nodes[m->act].op;
        sy_op want = op == SY_OP_RELU      ? SY_OP_RELU_GRAD
                     : op == SY_OP_SIGMOID ? SY_OP_SIGMOID_GRAD
                                           : SY_OP_TANH_GRAD;
        m->act_grad = m->dconv = grad_of(s, graph_input(g, m->act, 0));
        if (!is_op(g, m->act_grad, want) || graph_input(g, m->act_grad, 0) != pg ||
            graph_input(g, m->act_grad, 1) != m->act)
            return false;
    }
    if (grad_of(s, m->conv) != m->dconv) return false;
    const sy_node_rec *c = &g->nodes[m->conv];
    m->filter = user_with(g, s, m->dconv, SY_OP_CONV2D_BACKPROP_FILTER, 1);
    if (m->filter == SY_NONE || graph_input(g, m->filter, 0) != graph_input(g, m->conv, 0) ||
        memcmp(&g->nodes[m->filter].attr.conv, &c->attr.conv, sizeof c->attr.conv) != 0 ||
        g->nodes[m->filter].bf16 != c->bf16)
        return false;
    if (m->bias_add != SY_NONE) {
        sy_node rb = user_with(g, s, m->dconv, SY_OP_REDUCE_SUM, 0);
        if (rb != SY_NONE) {
            const sy_node_rec *r = &g->nodes[rb];
            if (r->attr.reduce.axes != 7u || r->attr.reduce.keepdims || r->bf16 != c->bf16)
                return false;
            /* its readers run after the filter's kernel, which now writes it */
            for (int64_t i = 0; i < g->n_nodes; i++)
                for (int j = 0; s->live[i] && j < g->nodes[i].n_in; j++)
                    if (graph_input(g, (sy_node)i, j) == rb && s->key[i] <= s->key[m->filter])
                        return false;
            m->bias_grad = rb;
        }
    }
    return true;
}

/* The pooled gradient dout as a Dense layer's input gradient: reshape(dz w^T), a flattened pool
 * feeding Dense(units) -- the product read by the reshape alone, the reshape by the ops that die
 * (dies[0 .. n_dies)), neither kept. Then the filter's kernel computes dy's rows from dz and w as
 * it expands them (attr.conv.dense_dy) and the product's (N, F) value is never written: the
 * tutorial CNN's 43 MB at batch 1,000. The matmul node, or SY_NONE. */
static sy_node match_dense_dy(const sy_graph *g, const sy_fusion_state *s, sy_node dout, const sy_node *dies,
                              int n_dies) {
    if (!is_op(g, dout, SY_OP_RESHAPE) || s->protect[dout] || !users_within(g, s, dout, dies, n_dies))
        return SY_NONE;
    sy_node mm = graph_input(g, dout, 0);
    if (!is_op(g, mm, SY_OP_MATMUL) || s->protect[mm] || !users_within(g, s, mm, &dout, 1)) return SY_NONE;
    const sy_node_rec *r = &g->nodes[mm];
    if (r->n_in != 2 || r->attr.matmul.ta || !r->attr.matmul.tb || r->attr.matmul.act || r->bf16 ||
        r->dtype != g->nodes[dout].dtype)
        return SY_NONE;
    return mm;
}

static sy_node adopt(sy_fusion_state *s, sy_node n, sy_node like) {
    s->live[n] = true;
    s->key[n] = s->key[like];
    s->protect[n] = false;
    s->remap[n] = n;
    return n;
}

/* $SYSTOLIC_CONV_POOL=0 turns this fusion off, for comparisons (tests, bench). */
static bool conv_pool_enabled(void) {
    const char *e = getenv("SYSTOLIC_CONV_POOL");
    return !e || strcmp(e, "0") != 0;
}

static sy_status fuse_conv_pools(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    if (!s->backend || !s->backend->fuses || s->tpu_view || !conv_pool_enabled()) return SY_OK;
    int64_t n0 = g->n_nodes;
    for (int64_t c = 0; c < n0; c++) {
        if (!s->live[c]) continue;
        conv_pool m = {(sy_node)c, SY_NONE, SY_NONE, SY_NONE, SY_NONE, SY_NONE,
                       SY_NONE,    SY_NONE, SY_NONE, SY_NONE, SY_NONE, SY_NONE};
        if (!match_forward(g, s, (sy_node)c, &m) || !match_backward(g, s, &m)) continue;
        /* what dies must have no reader but the others that die */
        sy_node set[11] = {m.conv,      m.bias_add, m.act,    m.pool,      m.post, m.post_grad,
                           m.pool_grad, m.act_grad, m.filter, m.bias_grad, SY_NONE};
        sy_node inner[7] = {
            m.conv,      m.bias_add,  m.act,     m.post != SY_NONE ? m.pool : SY_NONE,
            m.post_grad, m.pool_grad, m.act_grad};
        bool ok = true;
        for (int i = 0; i < 7 && ok; i++)
            ok = inner[i] == SY_NONE ||
                 (!s->protect[inner[i]] && users_within(g, s, inner[i], set, 10));
        if (!ok) continue;
        sy_node last = m.post != SY_NONE ? m.post : m.pool;
        const sy_node_rec *cr = &g->nodes[m.conv], *pr = &g->nodes[m.pool];
        sy_attrs at = cr->attr;
        at.conv.act = (uint8_t)(m.act == SY_NONE                      ? SY_ACT_NONE
                                : g->nodes[m.act].op == SY_OP_RELU    ? SY_ACT_RELU
                                : g->nodes[m.act].op == SY_OP_SIGMOID ? SY_ACT_SIGMOID
                                                                      : SY_ACT_TANH);
        for (int i = 0; i < 2; i++) {
            at.conv.pool_ksize[i] = pr->attr.pool.ksize[i];
            at.conv.pool_stride[i] = pr->attr.pool.stride[i];
        }
        at.conv.pool_padding = pr->attr.pool.padding;
        at.conv.pool_avg = pr->op == SY_OP_AVG_POOL2D;
        at.conv.post_act = m.post != SY_NONE ? SY_ACT_RELU : SY_ACT_NONE;
        at.conv.round_bf16 = cr->bf16 && cr->dtype == SY_F32;
        sy_node in[4] = {graph_input(g, m.conv, 0), graph_input(g, m.conv, 1),
                         m.bias_add != SY_NONE ? graph_input(g, m.bias_add, 1) : SY_NONE, SY_NONE};
        /* the backend's say, on the shapes its kernels would get */
        sy_shape shapes[3] = {g->nodes[in[0]].shape, g->nodes[in[1]].shape,
                              in[2] != SY_NONE ? g->nodes[in[2]].shape : sy_shape_of(0)};
        sy_exec ex;
        memset(&ex, 0, sizeof ex);
        ex.inference = s->inference;
        sy_kargs k = {.op = SY_OP_CONV2D_POOL,
                      .attr = &at,
                      .dtype = cr->dtype,
                      .out_shape = &g->nodes[last].shape,
                      .n_in = in[2] != SY_NONE ? 3 : 2,
                      .in_shape = shapes,
                      .ex = &ex};
        if (!s->backend->fuses(SY_OP_CONV2D_POOL, &k)) continue;
        k.op = SY_OP_CONV2D_POOL_BACKPROP_FILTER;
        k.out_shape = &shapes[1];
        if (m.dout != SY_NONE && !s->backend->fuses(k.op, &k)) continue;

        sy_node y = graph_add(g, SY_OP_CONV2D_POOL, in, k.n_in, &at, NULL);
        if (y == SY_NONE) return sy_graph_status(g);
        SY_ASSERT(sy_shape_equal(&g->nodes[y].shape, &g->nodes[last].shape));
        g->nodes[y].bf16 = g->nodes[last].bf16;
        sy_status st = fusion_grow(s, g->n_nodes);
        sy_node fwd[5] = {m.conv, m.bias_add, m.act, m.pool, m.post};
        if (st || (st = set_origin(g, s, y, fwd, 5))) return st;
        for (int i = 0; i < 5; i++)
            if (fwd[i] != SY_NONE && fwd[i] != last) s->live[fwd[i]] = false, (*folded)++;
        if (m.dout == SY_NONE) {
            replace(g, s, last, y);
            continue;
        }
        sy_node arg = SY_NONE;
        if (!at.conv.pool_avg) {
            if ((arg = graph_add(g, SY_OP_POOL_ARGMAX, &y, 1, NULL, NULL)) == SY_NONE)
                return sy_graph_status(g);
            if ((st = fusion_grow(s, g->n_nodes))) return st;
            adopt(s, arg, last);
        }
        sy_node bin[5] = {in[0], m.dout, y, arg, SY_NONE};
        int nb = 2;
        sy_attrs fa = at;
        fa.conv.dense_dy = 1;
        k.attr = &fa;
        sy_node mm = match_dense_dy(g, s, m.dout, set, 10);
        if (mm != SY_NONE && !g->nodes[m.filter].bf16 && s->backend->fuses(k.op, &k)) {
            bin[1] = graph_input(g, mm, 0); /* dz, w */
            bin[nb++] = graph_input(g, mm, 1);
        } else {
            mm = SY_NONE;
            fa.conv.dense_dy = 0;
        }
        if (sy_conv_pool_reads_y(&at)) bin[nb++] = y;
        if (arg != SY_NONE) bin[nb++] = arg;
        sy_shape ws = g->nodes[in[1]].shape;
        sy_node f = graph_add(g, SY_OP_CONV2D_POOL_BACKPROP_FILTER, bin, nb, &fa, &ws);
        if (f == SY_NONE) return sy_graph_status(g);
        g->nodes[f].bf16 = g->nodes[m.filter].bf16;
        sy_node bwd[5] = {mm, m.post_grad, m.pool_grad, m.act_grad, m.filter};
        if ((st = fusion_grow(s, g->n_nodes)) || (st = set_origin(g, s, f, bwd, 5))) return st;
        for (int i = 0; i < 4; i++)
            if (bwd[i] != SY_NONE) s->live[bwd[i]] = false, (*folded)++;
        if (mm != SY_NONE) s->live[m.dout] = false; /* (the reshape: a view, no kernel) */
        replace(g, s, last, y);
        replace(g, s, m.filter, f);
        if (m.bias_grad == SY_NONE) continue;
        sy_node db = graph_add(g, SY_OP_CONV2D_POOL_BIAS_GRAD, &f, 1, NULL, NULL);
        if (db == SY_NONE) return sy_graph_status(g);
        g->nodes[db].bf16 = g->nodes[m.bias_grad].bf16;
        if ((st = fusion_grow(s, g->n_nodes)) || (st = set_origin(g, s, db, &m.bias_grad, 1)))
            return st;
        replace(g, s, m.bias_grad, db);
        (*folded)++; /* the reduction runs in the filter gradient's kernel */
    }
    return SY_OK;
}

/* ---- 4. issue 18: an int8 conv and the max pool after it ------------------------------------------
 * qconv2d -> qmax_pool2d, the conv's output read by the pool alone, becomes qconv2d_pool (ops_quant.c):
 * its kernel takes the maximum of each window's int32 accumulators and requantizes that one, writing a
 * quarter of the bytes (a 2x2 pool) and requantizing a quarter of the values. The byte is the one the two
 * ops give -- requantize every accumulator, then the largest byte -- because the requantization
 *
 *     clamp(y_zp + RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc << left, m), right), lo, hi)
 *
 * is non-decreasing in acc when m >= 0 and acc << left does not wrap: the doubled high product is
 * floor((s m + 2^30) / 2^31) (docs/design/int8-kernels.md), the rounding shift, the offset and the clamp
 * are monotone, and max commutes with a monotone function. So it fuses only when every channel's
 * multiplier is >= 0 and the accumulator's bound |bias| + 255 sum |w| (|x - x_zp| <= 255), shifted left
 * by the channel's left shift, stays below 2^31: the weights, bias and multipliers are CONSTANT nodes,
 * read here. TFLite's converter gives positive multipliers and right shifts; anything else runs unfused.
 * The pool's own clamp (its fused activation) is kept; MAX_POOL's input and output quantization are
 * equal (lite_model.c refuses a pool that changes them; the pool moves bytes). Overlapping pools
 * (stride < window) stay unfused: a fused kernel would compute the shared conv pixels twice.
 * $SYSTOLIC_CONV_POOL=0 turns this off too. */

static const void *constant_data(const sy_graph *g, sy_node n, sy_dtype dt) {
    const sy_node_rec *r = &g->nodes[n];
    return r->op == SY_OP_CONSTANT && r->dtype == dt ? r->attr.constant.data : NULL;
}

/* Whether requantizing qconv2d node c's accumulators is non-decreasing in each channel (above). */
static bool qconv_monotone(const sy_graph *g, sy_node c) {
    const int8_t *w = constant_data(g, graph_input(g, c, 1), SY_I8);
    const int32_t *bias = constant_data(g, graph_input(g, c, 2), SY_I32);
    const int32_t *m = constant_data(g, graph_input(g, c, 3), SY_I32);
    if (!w || !bias || !m) return false;
    const sy_shape *ws = &g->nodes[graph_input(g, c, 1)].shape;
    int64_t o = ws->dims[0], k = ws->dims[1] * ws->dims[2] * ws->dims[3];
    for (int64_t ch = 0; ch < o; ch++) {
        int32_t shift = m[o + ch];
        if (m[ch] < 0 || shift > 30) return false;
        int64_t bound = bias[ch] < 0 ? -(int64_t)bias[ch] : bias[ch];
        for (int64_t i = 0; i < k; i++) bound += 255 * (int64_t)(w[ch * k + i] < 0 ? -w[ch * k + i] : w[ch * k + i]);
        if (bound > (INT64_C(0x7FFFFFFF) >> (shift > 0 ? shift : 0))) return false;
    }
    return true;
}

static sy_status fuse_qconv_pools(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    if (!s->backend || !s->backend->fuses || !conv_pool_enabled()) return SY_OK;
    int64_t n0 = g->n_nodes;
    for (int64_t c = 0; c < n0; c++) {
        const sy_node_rec *cr = &g->nodes[c];
        if (!s->live[c] || cr->op != SY_OP_QCONV2D || cr->n_in != 4 || s->protect[c]) continue;
        sy_node p = forward_user(g, s, (sy_node)c);
        if (!is_op(g, p, SY_OP_QMAX_POOL2D) || graph_input(g, p, 0) != (sy_node)c ||
            !users_within(g, s, (sy_node)c, &p, 1))
            continue;
        const sy_attrs *pa = &g->nodes[p].attr;
        if (pa->q.stride[0] < pa->q.ksize[0] || pa->q.stride[1] < pa->q.ksize[1] || !qconv_monotone(g, (sy_node)c))
            continue;
        sy_attrs at = cr->attr;
        for (int i = 0; i < 2; i++) at.q.pool.ksize[i] = pa->q.ksize[i], at.q.pool.stride[i] = pa->q.stride[i];
        at.q.pool.padding = pa->q.padding;
        at.q.pool.act_min = pa->q.act_min, at.q.pool.act_max = pa->q.act_max;
        sy_node in[4];
        sy_shape shapes[4];
        for (int j = 0; j < 4; j++) in[j] = graph_input(g, (sy_node)c, j), shapes[j] = g->nodes[in[j]].shape;
        sy_exec ex;
        memset(&ex, 0, sizeof ex);
        ex.inference = true;
        sy_kargs k = {.op = SY_OP_QCONV2D_POOL, .attr = &at, .dtype = SY_I8, .out_shape = &g->nodes[p].shape,
                      .n_in = 4, .in_shape = shapes, .ex = &ex};
        if (!s->backend->fuses(SY_OP_QCONV2D_POOL, &k)) continue;
        sy_node y = graph_add(g, SY_OP_QCONV2D_POOL, in, 4, &at, NULL);
        if (y == SY_NONE) return sy_graph_status(g);
        SY_ASSERT(sy_shape_equal(&g->nodes[y].shape, &g->nodes[p].shape));
        sy_status st = fusion_grow(s, g->n_nodes);
        sy_node members[2] = {(sy_node)c, p};
        if (st || (st = set_origin(g, s, y, members, 2))) return st;
        s->live[c] = false;
        replace(g, s, p, y);
        (*folded)++;
    }
    return SY_OK;
}

/* ---- 5. issue 21: a Dense layer's bias gradient in its kernel gradient's product -------------------
 * reduce_sum(dy, axis 0) -- a bias's gradient over a (N, U) output gradient -- beside matmul(x, dy,
 * transpose_a), the Dense kernel's gradient x^T dy, which reads every row of dy anyway, becomes a side
 * output of that product (matmul_bias_grad): its kernel sums dy's columns row by row and the reduction's
 * step is gone, as the conv's bias gradient rides on its filter gradient (section 3). Not for bf16 ops; the
 * backend says whether its matmul writes it (sy_backend.fuses); the reduction's readers must run after the
 * product, which now writes it. */
static sy_status fuse_bias_grads(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    if (!s->backend || !s->backend->fuses || s->tpu_view) return SY_OK;
    int64_t n0 = g->n_nodes;
    for (int64_t r = 0; r < n0; r++) {
        const sy_node_rec *rr = &g->nodes[r];
        if (!s->live[r] || rr->op != SY_OP_REDUCE_SUM || rr->attr.reduce.axes != 1u || rr->attr.reduce.keepdims ||
            rr->bf16)
            continue;
        sy_node dy = graph_input(g, (sy_node)r, 0), m = user_with(g, s, dy, SY_OP_MATMUL, 1);
        if (m == SY_NONE || g->nodes[dy].shape.rank != 2) continue;
        const sy_node_rec *mr = &g->nodes[m];
        if (mr->n_in != 2 || !mr->attr.matmul.ta || mr->attr.matmul.tb || mr->attr.matmul.act || mr->bf16 ||
            mr->dtype != rr->dtype || user_with(g, s, m, SY_OP_MATMUL_BIAS_GRAD, 0) != SY_NONE)
            continue;
        bool after = true;
        for (int64_t i = 0; i < g->n_nodes && after; i++)
            for (int j = 0; s->live[i] && j < g->nodes[i].n_in; j++)
                if (graph_input(g, (sy_node)i, j) == (sy_node)r && s->key[i] <= s->key[m]) after = false;
        sy_exec ex;
        memset(&ex, 0, sizeof ex);
        ex.inference = s->inference;
        sy_kargs k = {.op = SY_OP_MATMUL_BIAS_GRAD, .attr = &mr->attr, .dtype = mr->dtype, .out_shape = &rr->shape,
                      .n_in = 1, .in_shape = &mr->shape, .ex = &ex};
        if (!after || !s->backend->fuses(SY_OP_MATMUL_BIAS_GRAD, &k)) continue;
        sy_node db = graph_add(g, SY_OP_MATMUL_BIAS_GRAD, &m, 1, NULL, NULL);
        if (db == SY_NONE) return sy_graph_status(g);
        sy_status st = fusion_grow(s, g->n_nodes);
        sy_node members[1] = {(sy_node)r};
        if (st || (st = set_origin(g, s, db, members, 1))) return st;
        replace(g, s, (sy_node)r, db);
        (*folded)++;
    }
    return SY_OK;
}

sy_status fuse(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    *folded = 0;
    sy_status st = fuse_conv_pools(g, s, folded);
    if (!st) st = fuse_qconv_pools(g, s, folded);
    if (!st) st = fuse_epilogues(g, s, folded);
    /* (after the epilogues, which replace a matmul they fold into: a side output's matmul stays) */
    if (!st) st = fuse_bias_grads(g, s, folded);
    return st ? st : fuse_chains(g, s, folded);
}
