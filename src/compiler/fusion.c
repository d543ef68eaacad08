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
 *    Between the bias and the activation, a conv also takes an inference-
 *    mode BatchNormalization, (t - mean) * scale [+ beta] (or t * scale +
 *    shift, its unfused form), whose per-channel operands do not depend on
 *    the conv (moving statistics, gamma, beta; a training BN's batch
 *    statistics do, and stay unfolded): the kernel is scaled, w * scale,
 *    and the bias becomes (bias - mean) * scale + beta, so the conv writes
 *    the normalised, activated output in one pass (a ResNet's conv, BN,
 *    ReLU at inference).
 *
 * A node whose value the plan must keep (the loss, a requested output, a
 * parameter's gradient) may end a chain but is never folded into one.
 */
#include "compiler_internal.h"

#include <string.h>

sy_status fusion_grow(sy_fusion_state *s, int64_t need) {
    if (need <= s->cap) return SY_OK;
    int64_t cap = s->cap, c1 = cap, c2 = cap, c3 = cap;
    if (SY_GROW(s->live, c1, need) || SY_GROW(s->protect, c2, need) || SY_GROW(s->key, c3, need) ||
        SY_GROW(s->remap, cap, need))
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

typedef struct fold_ctx {
    const sy_fusion_state *s;
    const int32_t *uses;
    const sy_node *user;
    uint8_t *seen;  /* per node, for depends_on */
    sy_node *stack;
    int64_t cap_seen, cap_stack;
} fold_ctx;

/* v depends on target (a path of inputs leads from v to it); true also when
 * out of memory to find out, which leaves the conv unfolded. */
static bool depends_on(const sy_graph *g, fold_ctx *f, sy_node v, sy_node target) {
    if (SY_GROW(f->seen, f->cap_seen, g->n_nodes) || SY_GROW(f->stack, f->cap_stack, g->n_nodes)) return true;
    memset(f->seen, 0, (size_t)g->n_nodes);
    int64_t top = 0;
    f->stack[top++] = v;
    f->seen[v] = 1;
    while (top > 0) {
        sy_node u = f->stack[--top];
        if (u == target) return true;
        for (int j = 0; j < g->nodes[u].n_in; j++) {
            sy_node in = graph_input(g, u, j);
            if (!f->seen[in]) {
                f->seen[in] = 1;
                f->stack[top++] = in;
            }
        }
    }
    return false;
}

/* The folded BatchNormalization after a conv: t = ((t - mean) * scale) + shift. */
typedef struct bn_fold {
    sy_node mean, scale, shift; /* (O,) each; mean and shift may be SY_NONE */
    sy_node nodes[3];           /* the sub, mul and add folded */
    int n;
} bn_fold;

/* c's other operand than t when c is `op` reading t (at input 0, or either
 * input when commutative) and the other is a per-channel (O,) value
 * independent of the conv; SY_NONE otherwise. */
static sy_node bn_operand(const sy_graph *g, fold_ctx *f, sy_node c, sy_op op, sy_node t, sy_node conv,
                          int64_t O) {
    const sy_node_rec *r = &g->nodes[c];
    if (r->op != op || r->n_in != 2) return SY_NONE;
    int k = graph_input(g, c, 0) == t ? 1 : op != SY_OP_SUB && graph_input(g, c, 1) == t ? 0 : -1;
    if (k < 0) return SY_NONE;
    sy_node v = graph_input(g, c, k);
    const sy_node_rec *vr = &g->nodes[v];
    if (vr->dtype != SY_F32 || vr->shape.rank != 1 || vr->shape.dims[0] != O || !sy_shape_equal(&r->shape, &g->nodes[t].shape))
        return SY_NONE;
    return depends_on(g, f, v, conv) ? SY_NONE : v;
}

/* The BatchNormalization that follows t, the output of conv with O
 * channels, or false if none can be folded. */
static bool find_bn(const sy_graph *g, fold_ctx *f, sy_node conv, sy_node t, int64_t O, bn_fold *bn) {
    *bn = (bn_fold){SY_NONE, SY_NONE, SY_NONE, {SY_NONE, SY_NONE, SY_NONE}, 0};
    if (!sole_use(f->s, f->uses, t)) return false;
    sy_node c = f->user[t];
    if ((bn->mean = bn_operand(g, f, c, SY_OP_SUB, t, conv, O)) != SY_NONE) {
        bn->nodes[bn->n++] = t = c;
        if (!sole_use(f->s, f->uses, t)) return false;
        c = f->user[t];
    }
    if ((bn->scale = bn_operand(g, f, c, SY_OP_MUL, t, conv, O)) == SY_NONE) return false;
    bn->nodes[bn->n++] = t = c;
    if (sole_use(f->s, f->uses, t) && (bn->shift = bn_operand(g, f, f->user[t], SY_OP_ADD, t, conv, O)) != SY_NONE)
        bn->nodes[bn->n++] = f->user[t];
    return true;
}

/* A node added for a fold, at schedule position `key`. */
static sy_node fold_node(sy_graph *g, sy_fusion_state *s, sy_op op, sy_node a, sy_node b, int64_t key) {
    sy_node in[2] = {a, b};
    sy_node n = graph_add(g, op, in, b == SY_NONE ? 1 : 2, NULL, NULL);
    if (n == SY_NONE || fusion_grow(s, g->n_nodes)) return SY_NONE;
    s->live[n] = true;
    s->protect[n] = false;
    s->key[n] = key;
    s->remap[n] = n;
    return n;
}

/* Where the fold's nodes go in the schedule: right after the last of their
 * operands (a key after it, so that a chain fusion of those operands, which
 * takes its root's key and a later index, still comes first), and before
 * the conv, which takes the key of `last`. -1 when there is no room. */
static int64_t fold_key(const sy_fusion_state *s, const bn_fold *bn, sy_node bias, sy_node last) {
    sy_node ops[4] = {bias, bn->mean, bn->scale, bn->shift};
    int64_t k = 0;
    for (int i = 0; i < 4; i++)
        if (ops[i] != SY_NONE && s->key[ops[i]] > k) k = s->key[ops[i]];
    return k + 1 < s->key[last] ? k + 1 : -1;
}

/* The conv's kernel and bias with bn folded in: w * scale, (bias - mean) * scale + shift. False: out of memory. */
static bool fold_bn(sy_graph *g, sy_fusion_state *s, const bn_fold *bn, int64_t at, sy_node *w, sy_node *bias) {
    sy_node b = *bias;
    bool ok = true;
    if (bn->mean != SY_NONE) {
        b = b != SY_NONE ? fold_node(g, s, SY_OP_SUB, b, bn->mean, at) : fold_node(g, s, SY_OP_NEG, bn->mean, SY_NONE, at);
        ok &= b != SY_NONE;
    }
    if (ok && b != SY_NONE) ok &= (b = fold_node(g, s, SY_OP_MUL, b, bn->scale, at)) != SY_NONE;
    if (ok && bn->shift != SY_NONE) {
        b = b != SY_NONE ? fold_node(g, s, SY_OP_ADD, b, bn->shift, at) : bn->shift;
        ok &= b != SY_NONE;
    }
    if (ok) ok &= (*w = fold_node(g, s, SY_OP_MUL, *w, bn->scale, at)) != SY_NONE;
    *bias = b;
    return ok;
}

static sy_status fuse_epilogues(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    int32_t *uses = NULL;
    sy_node *user = NULL;
    sy_status st = count_uses(g, s, &uses, &user);
    int64_t n0 = g->n_nodes;
    fold_ctx f = {s, uses, user, NULL, NULL, 0, 0};
    for (int64_t m = 0; st == SY_OK && m < n0; m++) {
        sy_node_rec *r = &g->nodes[m];
        if (!s->live[m] || (r->op != SY_OP_MATMUL && r->op != SY_OP_CONV2D) || r->n_in != 2) continue;
        if ((r->op == SY_OP_MATMUL && r->attr.matmul.act) || (r->op == SY_OP_CONV2D && r->attr.conv.act)) continue;
        sy_node last = (sy_node)m, bias = SY_NONE;
        int act = SY_ACT_NONE, absorbed = 0;
        if (sole_use(s, uses, last)) {
            sy_node c = user[last];
            if (g->nodes[c].op == SY_OP_BIAS_ADD && graph_input(g, c, 0) == last) {
                bias = graph_input(g, c, 1);
                last = c;
                absorbed++;
            }
        }
        bn_fold bn = {.n = 0};
        if (r->op == SY_OP_CONV2D && r->dtype == SY_F32 && find_bn(g, &f, (sy_node)m, last, r->shape.dims[3], &bn)) {
            last = bn.nodes[bn.n - 1];
            absorbed += bn.n;
        }
        sy_op conv_op = r->op; /* r moves when fold_bn adds nodes */
        if (sole_use(s, uses, last)) {
            sy_node c = user[last];
            sy_op op = g->nodes[c].op;
            if (op == SY_OP_RELU || op == SY_OP_SIGMOID || op == SY_OP_TANH) {
                act = op == SY_OP_RELU ? SY_ACT_RELU : op == SY_OP_SIGMOID ? SY_ACT_SIGMOID : SY_ACT_TANH;
                last = c;
                absorbed++;
            }
        }
        if (!absorbed) continue;
        sy_attrs at = r->attr;
        if (r->op == SY_OP_MATMUL) at.matmul.act = (uint8_t)act;
        else at.conv.act = (uint8_t)act;
        sy_node w = graph_input(g, (sy_node)m, 1), bias_in = bias;
        int64_t key = bn.n ? fold_key(s, &bn, bias, last) : 0;
        if (key < 0) continue; /* no room in the schedule: leave it unfused */
        if (bn.n && !fold_bn(g, s, &bn, key, &w, &bias)) {
            st = sy_graph_status(g) ? sy_graph_status(g) : sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
            break;
        }
        sy_node in[3] = {graph_input(g, (sy_node)m, 0), w, bias};
        sy_node fresh = graph_add(g, conv_op, in, bias == SY_NONE ? 2 : 3, &at, NULL);
        if (fresh == SY_NONE) {
            st = sy_graph_status(g);
            break;
        }
        if ((st = fusion_grow(s, g->n_nodes))) break;
        /* the matmul, bias_add and BatchNormalization die; the activation's consumers now read fresh */
        s->live[m] = false;
        if (bias_in != SY_NONE) s->live[user[m]] = false;
        for (int i = 0; i < bn.n; i++) s->live[bn.nodes[i]] = false;
        replace(g, s, last, fresh);
        *folded += absorbed;
    }
    sy_free(f.seen);
    sy_free(f.stack);
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
        if (eligible(g, s, c) && sy_shape_equal(&g->nodes[e].shape, &g->nodes[c].shape)) parent[e] = c;
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
        if ((st = fusion_grow(s, g->n_nodes))) break;
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

sy_status fuse(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    *folded = 0;
    sy_status st = fuse_epilogues(g, s, folded);
    return st ? st : fuse_chains(g, s, folded);
}
